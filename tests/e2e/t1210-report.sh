#!/bin/bash
# t1210-report.sh - pilot report: a local pilot with two nodes joined by
# hand (cpu1: 2 cores; gpu1: 2 cores and 2 GPUs from SLURM_STEP_GPUS)
# runs a mix of tasks (an array, GPU tasks, a failing one, a GPU-less
# task of 3 ranks over both nodes, one named '</script><b>x'); the page
# is rendered by headless Chromium (Debian's chromium): its DOM has one
# bar per rank that ran, a row per core and GPU, the per-name table's
# counts are those of the tasks, both histograms, the failure's reason,
# the hostile name as text; the screenshot is not blank.  With
# --detail-max below the task count the page has the aggregated
# timeline and no bar.  The summary (--json) is the same read from
# pilotd and from state.db once the pilot is down; --name, --tag and ids
# select.  An array of 100,000 tasks (T1210_BIG) on two --bench agents
# of 32 slots each: its page is aggregated, under 1 MB, and drawn within
# 2 s of the navigation's start (the better of two renders: the dev
# machine is shared).  A 2-node Slurm pilot: a row per core and fake GPU
# of its nodes, a bar per rank of its GPU and 2-node tasks.
. "$(dirname "$0")/lib.sh"

plan 44

CHROMIUM=$(command -v chromium) \
    || abort "chromium is not installed (scripts/install-deps.sh tests)"

capture pilot up --local --agents 0 --wait
P=$OUT
[[ $RC == 0 && -n $P ]] || abort "pilot up --local --agents 0 failed: $ERR"
export PILOT_ID=$P
DIR=$(pilot_dir "$P")
AEP=$(kv "$DIR/endpoint" agent)
SLURM_STEP_GPUS=0,1 pilot-agent --connect "$AEP" --keys "$DIR/keys" \
    --node gpu1 --cores 0,1 --dir "$DIR" --log "$DIR/logs/agent-gpu1.log" &
A1=$!
cleanup_hook "kill $A1 2>/dev/null; wait $A1 2>/dev/null; true"
pilot-agent --connect "$AEP" --keys "$DIR/keys" --node cpu1 --cores 0,1 \
    --dir "$DIR" --log "$DIR/logs/agent-cpu1.log" &
A2=$!
cleanup_hook "kill $A2 2>/dev/null; wait $A2 2>/dev/null; true"
wait_for 30 agents_up 2 || abort "the two agents did not join"

HOSTILE='</script><b>x'
ARR=$(pilot submit --array 1-6 --name prep --tag stage=prep -- sleep 0.3)
pilot submit --name train --tag stage=train --gpus-per-rank 1 \
    -- sleep 0.6 >/dev/null
pilot submit --name train --tag stage=train --gpus-per-rank 1 \
    -- sleep 0.4 >/dev/null
BAD=$(pilot submit --name bad -- sh -c 'exit 3')
pilot submit --name mr --ranks 3 -- sleep 0.4 >/dev/null
HID=$(pilot submit --name "$HOSTILE" -- sleep 0.1)
capture pilot wait --all --timeout 120
is "$RC" 1 "the 11 tasks end (one failed: wait exits 1)"
pilot ls --json >"$WORK/ls.json"
# ranks that ran: each task's ranks (no retry here)
RANKS=$("$PY" -c 'import json,sys
print(sum(t["ranks"] for t in json.load(open(sys.argv[1]))))' "$WORK/ls.json")
is "$RANKS" 13 "13 ranks ran (6 + 2 + 1 + 3 + 1)"

# --- the page --------------------------------------------------------
cd "$WORK" || abort "no $WORK"
capture pilot report
is "$RC,$OUT" "0,report-$P.html" "pilot report writes report-$P.html and prints it"
HTML=$WORK/report-$P.html
is "$(grep -c '</script>' "$HTML")" 2 \
    "... only its two script elements end: the task name is escaped"
nok "... and '<b>x' is nowhere in the file" grep -q '<b>x' "$HTML"

render() { # render FILE PREFIX: PREFIX.dom and PREFIX.png, timed
    local t0
    t0=$(now)
    run_timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu \
        --run-all-compositor-stages-before-draw --window-size=1400,1800 \
        --dump-dom "file://$1" >"$2.dom" 2>"$2.err" || return 1
    RENDER_SECS=$(elapsed "$t0" "$(now)")
    run_timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu \
        --window-size=1400,1800 --screenshot="$2.png" "file://$1" \
        >>"$2.err" 2>&1
}
ok "chromium renders it" render "$HTML" "$WORK/page"
diag "dump-dom of the page took ${RENDER_SECS:-?} s"

# the rendered DOM, read with Python's html.parser into JSON facts
cat >"$WORK/dom.py" <<'EOP'
import json, sys
from html.parser import HTMLParser

class P(HTMLParser):
    def __init__(self):
        super().__init__()
        self.stack = []          # open elements: (tag, attrs)
        self.bars = set()        # (task, attempt, rank)
        self.rects_in_bars = 0
        self.hbars = {}          # histogram id -> [counts]
        self.tables = {}         # table class -> rows of cells
        self.rowlabels = []
        self.rendered = False
        self.bold = 0
        self.heat = None
        self.hist = None
        self.cell = None
    def handle_starttag(self, tag, a):
        a = dict(a)
        if tag == "body" and a.get("data-rendered") == "1":
            self.rendered = True
        if tag == "b":
            self.bold += 1
        if tag == "canvas" and "heat" in a.get("class", ""):
            self.heat = (a.get("data-rows"), a.get("data-buckets"))
        if tag == "div" and a.get("class") == "histbox":
            self.hist = a.get("id")
            self.hbars[self.hist] = []
        if tag == "rect" and a.get("class") == "hbar":
            self.hbars[self.hist].append(int(a["data-count"]))
        if tag == "g" and a.get("class") == "bar":
            self.bars.add((a["data-task"], a["data-attempt"], a["data-rank"]))
        if tag == "rect" and any(t == "g" and x.get("class") == "bar"
                                 for t, x in self.stack):
            self.rects_in_bars += 1
        if tag == "table":
            self.table = a.get("class", "")
            self.tables[self.table] = []
        if tag == "tr":
            self.tables[self.table].append([])
        if tag in ("td", "th"):
            self.cell = ""
        if tag == "text" and a.get("class") == "rowlabel":
            self.cell = ""
        if tag not in ("rect", "line", "polygon", "meta", "br", "input"):
            self.stack.append((tag, a))
    def handle_endtag(self, tag):
        if tag in ("td", "th") and self.cell is not None:
            self.tables[self.table][-1].append(self.cell)
            self.cell = None
        if tag == "text" and self.cell is not None:
            self.rowlabels.append(self.cell)
            self.cell = None
        if tag in ("rect", "line", "polygon", "meta", "br", "input"):
            return
        while self.stack:
            t, _ = self.stack.pop()
            if t == tag:
                break
    def handle_data(self, d):
        if self.cell is not None:
            self.cell += d

p = P()
p.feed(open(sys.argv[1]).read())
print(json.dumps({
    "rendered": p.rendered, "bars": len(p.bars), "bold": p.bold,
    "rects_in_bars": p.rects_in_bars, "hist": p.hbars, "heat": p.heat,
    "tables": p.tables,
    "rows": [l for l in p.rowlabels if " cpu" in l or " gpu" in l],
}))
EOP
"$PY" "$WORK/dom.py" "$WORK/page.dom" >"$WORK/dom.json"
dom() { json "$1" <"$WORK/dom.json"; }
is "$(dom 'j["rendered"]')" true "the script ran to its end"
is "$(dom 'j["bars"]')" "$RANKS" "the timeline has one bar per rank that ran"
is "$(dom 'j["rows"]')" \
    '["cpu1 cpu0", "cpu1 cpu1", "gpu1 cpu0", "gpu1 cpu1", "gpu1 gpu0", "gpu1 gpu1"]' \
    "... on a row per core and GPU of each node"
# each bar spans the rows it held: a train rank holds a core and a GPU
is "$(dom 'j["rects_in_bars"]')" 15 "... its cells: 13 cores and 2 GPUs held"
is "$(dom 'j["bold"]')" 0 "the hostile name made no <b> element"
WANT=$("$PY" -c 'import json, sys, collections
c = collections.Counter(t["name"] for t in json.load(open(sys.argv[1])))
print(json.dumps(sorted([n, str(k)] for n, k in c.items())))' "$WORK/ls.json")
is "$(dom 'sorted([r[0], r[1]] for r in j["tables"]["groups by-name"][1:])')" \
    "$WANT" "the per-name table's names and counts are the tasks' (hostile one as text)"
is "$(dom 'sorted([r[0], r[1]] for r in j["tables"]["groups by-tag"][1:])')" \
    '[["stage=prep", "6"], ["stage=train", "2"]]' "... and the per-tag table's"
is "$(dom '[len(j["hist"]["wait-hist"]), sum(j["hist"]["wait-hist"]), len(j["hist"]["run-hist"]), sum(j["hist"]["run-hist"])]')" \
    "[30, 11, 30, 11]" "both histograms: 30 bins holding the 11 tasks"
is "$(dom '[r[:2] for r in j["tables"]["failures"][1:]]')" \
    '[["exit code 3", "1"]]' "the failure is listed under its reason"
is "$(dom 'len(j["tables"]["slowest"]) - 1')" 11 "the slowest-tasks table lists them"

# the page's #task=ID shows that task's tip, as hovering its bar does
run_timeout 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu \
    --window-size=1400,1800 --dump-dom "file://$HTML#task=$HID" \
    >"$WORK/tip.dom" 2>/dev/null
"$PY" - "$WORK/tip.dom" >"$WORK/tip.json" <<'EOP'
import json, sys
from html.parser import HTMLParser
class T(HTMLParser):
    depth, lines, bold = 0, [], 0
    def handle_starttag(self, tag, a):
        if tag == "b":
            T.bold += 1
        if self.depth or dict(a).get("id") == "tip":
            self.depth += 1
            if self.depth == 2:
                self.lines.append("")
    def handle_endtag(self, tag):
        if self.depth:
            self.depth -= 1
    def handle_data(self, d):
        if self.depth == 2:
            self.lines[-1] += d
t = T()
t.feed(open(sys.argv[1]).read())
print(json.dumps([t.lines[:2], t.bold]))
EOP
# its one run is its last attempt: with --prefetch an agent may have held
# it and given it back unstarted (a new attempt, not a retry)
HATT=$("$PY" -c 'import json, sys
print([t["attempts"] for t in json.load(open(sys.argv[1]))
       if t["id"] == int(sys.argv[2])][0])' "$WORK/ls.json" "$HID")
is "$(<"$WORK/tip.json")" \
    "[[\"task $HID </script><b>x (rank 0, attempt $HATT)\", \"state done\"], 0]" \
    "#task=$HID: the hostile task's tip, its name as text"

# the screenshot: a PNG of many colours, not one blank field
cat >"$WORK/png.py" <<'EOP'
import struct, sys, zlib
d = open(sys.argv[1], "rb").read()
assert d[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, w = 8, b"", 0
while pos < len(d):
    n, typ = struct.unpack(">I4s", d[pos:pos + 8])
    body = d[pos + 8:pos + 8 + n]
    if typ == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
        bpp = {2: 3, 6: 4}[ctype]
    elif typ == b"IDAT":
        idat += body
    pos += 12 + n
raw = zlib.decompress(idat)
stride = w * bpp + 1
colours, nonwhite = set(), 0
# unfiltered first bytes of each row are enough to tell content: take
# rows filtered with type 0 (None) or 1 (Sub) decoded properly
prev = bytearray(w * bpp)
for y in range(h):
    f, line = raw[y * stride], bytearray(raw[y * stride + 1:(y + 1) * stride])
    for i in range(len(line)):
        a = line[i - bpp] if i >= bpp else 0
        b = prev[i]
        c = prev[i - bpp] if i >= bpp else 0
        if f == 1: line[i] = (line[i] + a) & 255
        elif f == 2: line[i] = (line[i] + b) & 255
        elif f == 3: line[i] = (line[i] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            line[i] = (line[i] + pr) & 255
    for x in range(0, len(line), bpp * 7):
        px = bytes(line[x:x + 3])
        colours.add(px)
        nonwhite += px != b"\xff\xff\xff"
    prev = line
print(w, h, len(colours), nonwhite)
EOP
read -r PW PH PCOL PNW < <("$PY" "$WORK/png.py" "$WORK/page.png")
diag "screenshot ${PW:-?}x${PH:-?}: ${PCOL:-?} colours, ${PNW:-?} non-white samples"
ok "the screenshot is not blank (${PCOL:-0} colours)" test "${PCOL:-0}" -ge 20 -a "${PNW:-0}" -ge 5000

# --- --json, the selections, the aggregated page ----------------------
capture pilot report --json
echo "$OUT" >"$WORK/up.json"
is "$(echo "$OUT" | json '[j["tasks"], j["ranks_run"], j["states"], j["cores"], j["gpus"]]')" \
    '[11, 13, {"done": 10, "failed": 1}, 4, 2]' "--json: the summary's counts"
is "$(pilot report --json --name prep | json 'j["tasks"]'),$(pilot report --json --tag stage=train | json 'j["tasks"]'),$(pilot report --json "$ARR" "$BAD" | json 'j["tasks"]')" \
    "6,2,7" "--name, --tag and ids select the tasks"
is "$(pilot report --json --since 1h | json 'j["tasks"]'),$(pilot report --json --since "$(date +%s)" | json 'j["tasks"]')" \
    "11,0" "--since 1h: all 11; --since now (epoch seconds): none, all ended before"
capture pilot report --color-tag stage --html "$WORK/color.html"
like "$(grep -o '"groups":\[[^]]*\]' "$WORK/color.html")" \
    '^"groups":\["prep","train","\(no tag\)"\]$' \
    "--color-tag stage: the bars' groups are the tag's values"
capture pilot report --detail-max 5 --html "$WORK/agg.html"
is "$RC" 0 "--detail-max 5: the aggregated page"
ok "... rendered" render "$WORK/agg.html" "$WORK/agg"
"$PY" "$WORK/dom.py" "$WORK/agg.dom" >"$WORK/agg.json"
is "$(json '[j["rendered"], j["bars"], j["heat"][0], j["tables"]["failures"][1][0]]' <"$WORK/agg.json")" \
    '[true, 0, "6", "exit code 3"]' "... a heat row per core and GPU, no bar, the rest as before"
capture pilot report --since nonsense
usage_error "--since nonsense is a usage error" "since"
# where the page goes: through a symlink, onto a FIFO, to stdout
echo old >"$WORK/kept.html"
chmod 640 "$WORK/kept.html"
ln -s kept.html "$WORK/link.html"
pilot report --html "$WORK/link.html" >/dev/null
is "$(stat -c %F,%a "$WORK/link.html" "$WORK/kept.html" | tr '\n' ' ')$(grep -c '</html>' "$WORK/kept.html")" \
   "symbolic link,777 regular file,640 1" \
   "--html LINK: the page in the file it names, the link kept, the file's mode kept"
mkfifo "$WORK/fifo"
cat "$WORK/fifo" >"$WORK/fifo.out" &
pilot report --html "$WORK/fifo" >/dev/null
wait $!
is "$(stat -c %F "$WORK/fifo"),$(grep -c '</html>' "$WORK/fifo.out")" "fifo,1" \
   "--html FIFO: the page written into it, the FIFO not replaced by a file"
capture pilot report --html -
is "$RC,$(grep -c '</html>' <<<"$OUT"),$(grep -c "^report-" <<<"$OUT")" "0,1,0" \
   "--html -: the page on stdout, and no path"
capture pilot report --since 2026-02-30
usage_error "--since 2026-02-30 (no such day) is a usage error, not March 2nd" \
    "since"
capture pilot report --json --html "$WORK/both.html"
usage_error "--json with --html: a usage error (the page was silently not written)" \
    "one or the other"
mkdir "$WORK/adir"
capture pilot report --html "$WORK/adir/"
one_error_line "--html DIR: an error" "adir/: it is a directory"

# --- the same from state.db once the pilot is down --------------------
pilot down >/dev/null 2>&1
capture pilot report --json
is "$RC" 0 "pilot report on the pilot that is down"
"$PY" -c 'import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:3])
print(a == b)' "$WORK/up.json" <(echo "$OUT") >"$WORK/same"
is "$(<"$WORK/same")" True "... gives the same summary, read from state.db"

# --- 100,000 tasks: the aggregated page, its size and its time ---------
NBIG=${T1210_BIG:-100000}
unset PILOT_ID
capture pilot up --local --agents 0 --wait
PB=$OUT
[[ $RC == 0 && -n $PB ]] || abort "pilot up --local --agents 0 failed: $ERR"
DB=$(pilot_dir "$PB")
BEP=$(kv "$DB/endpoint" agent)
for n in bench1 bench2; do
    pilot-agent --connect "$BEP" --keys "$DB/keys" --node $n --cores 0-31 \
        --bench --dir "$DB" --log "$DB/logs/agent-$n.log" &
    cleanup_hook "kill $! 2>/dev/null; wait $! 2>/dev/null; true"
done
wait_for 30 eval '[[ $(pilot status --pilot $PB --json | json "j[\"agents_up\"]") == 2 ]]' \
    || abort "the bench agents did not join"
pilot submit --pilot "$PB" --array "1-$NBIG" true >/dev/null
capture pilot wait --pilot "$PB" --all --timeout 600
is "$RC" 0 "$NBIG tasks done on the bench agents"
T0=$(now)
capture pilot report --pilot "$PB" --html "$WORK/big.html"
RSECS=$(elapsed "$T0" "$(now)")
SIZE=$(stat -c %s "$WORK/big.html")
diag "pilot report of $NBIG tasks: ${RSECS}s, $SIZE bytes"
is "$RC" 0 "pilot report of $NBIG tasks"
ok "... a page under 1 MB ($SIZE bytes)" test "$SIZE" -lt 1048576
best=
for try in 1 2; do
    render "$WORK/big.html" "$WORK/big" || continue
    ms=$(grep -o 'data-render-ms="[0-9]*"' "$WORK/big.dom" | tr -dc 0-9)
    sms=$(grep -o 'data-script-ms="[0-9]*"' "$WORK/big.dom" | tr -dc 0-9)
    diag "render $try: ${ms:-?} ms from navigation start (script ${sms:-?} ms), chromium ${RENDER_SECS}s in all"
    [[ -n $ms ]] && { [[ -z $best ]] || ((ms < best)); } && best=$ms
done
ok "... drawn within 2 s of opening it (${best:-?} ms)" test "${best:-99999}" -lt 2000
"$PY" "$WORK/dom.py" "$WORK/big.dom" >"$WORK/big.json"
is "$(json '[j["bars"], j["heat"][0], len(j["rows"]), sum(j["hist"]["run-hist"])]' <"$WORK/big.json")" \
    "[0, \"64\", 64, $NBIG]" "... aggregated: no bar, 64 heat rows, every task in the histogram"
pilot down --pilot "$PB" >/dev/null 2>&1

# --- a 2-node Slurm pilot: its nodes' cores and (fake) GPUs ------------
pilot_up 2 || abort "pilot up --nodes 2 --wait failed"
PS=$PILOT_UP_ID
pilot submit --pilot "$PS" --name g2 --gpus-per-rank 2 -- sleep 0.3 >/dev/null
pilot submit --pilot "$PS" --name g2 --gpus-per-rank 2 -- sleep 0.3 >/dev/null
pilot submit --pilot "$PS" --name spread --ranks 2 --nodes 2 -- sleep 0.3 \
    >/dev/null
capture pilot wait --pilot "$PS" --all --timeout 120
is "$RC" 0 "the Slurm pilot's 3 tasks are done"
ROWS=$(pilot status --pilot "$PS" --json \
       | json 'sum(len(n["cores"]) + len(n["gpus"]) for n in j["nodes"])')
capture pilot report --pilot "$PS" --html "$WORK/slurm.html"
is "$RC" 0 "pilot report of the Slurm pilot"
ok "... rendered" render "$WORK/slurm.html" "$WORK/slurm"
"$PY" "$WORK/dom.py" "$WORK/slurm.dom" >"$WORK/slurm.json"
is "$(json '[j["bars"], len(j["rows"]), len([r for r in j["rows"] if " gpu" in r])]' <"$WORK/slurm.json")" \
    "[4, $ROWS, $(pilot status --pilot "$PS" --json | json 'sum(len(n["gpus"]) for n in j["nodes"])')]" \
    "... a bar per rank (4), a row per core and GPU ($ROWS)"
is "$(json 'j["rects_in_bars"]' <"$WORK/slurm.json")" 8 \
    "... the GPU tasks' bars on a core and 2 GPUs each, the spread one's on a core a node"
