#!/bin/bash
# t0910-queue.sh - a local pilot: an array's id in ls/wait/cancel, ID.N,
# --retry-failed over an array of 10,000, --priority, --tag and ls --tag,
# a YAML task file (a bad entry named by its line, nothing queued), and
# pilot wait's progress: a bar with an ETA on a terminal, lines otherwise.
. "$(dirname "$0")/lib.sh"

plan 45

field() { pilot show "$1" --json | json "j[\"$2\"]"; }
total() { pilot ls --json | json 'len(j)'; }

pilot_up_local || abort "pilot up --local --wait failed"
RES=$WORK/out
mkdir -p "$RES"

# --- 10,000 elements, indexes 7, 107, ... fail (100 of them) -------------
t0=$(now)
capture pilot submit --array 0-9999 --name 'el-{}' --tag stage=one -- \
    expr '{}' % 100 != 7
is "$RC" 0 "an array of 10,000 is submitted"
A=$OUT
CAPTURE_TIMEOUT=300 capture pilot wait "$A" --timeout 280 --json
is "$RC" 1 "pilot wait ARRAY_ID: exit 1, some element failed"
is "$(json '[j["total"], j["done"], j["failed"]]' <<<"$OUT")" "[10000, 9900, 100]" \
    "... over all 10,000 elements: 9,900 done, 100 failed"
diag "10,000 elements ran in $(elapsed "$t0" "$(now)")s"
is "$(pilot ls "$A" --state failed --json | json 'len(j)')" 100 \
    "pilot ls ARRAY_ID --state failed: 100 tasks"
capture pilot ls "$A.107" --json
is "$(json '[(t["name"], t["state"], t["array_index"]) for t in j]' <<<"$OUT")" \
    '[["el-107", "failed", 107]]' "pilot ls ID.107: that element, failed"
capture pilot ls "$A.10000"
is "$RC" 1 "an index the array lacks is an error"
one_error_line "... with one line naming the element" \
    "^pilot: error: no task $A\\.10000 \\(array $A has no element 10000\\)\$"
capture pilot ls "$A.x"
is "$RC" 2 "ID.x is a usage error"
is "$(field "$A.42" id)" $((A + 42)) "pilot show ID.42 is element 42"
capture pilot logs "$A.42"
is "$OUT" 1 "pilot logs ID.42: its output"
X8=$(pilot submit --after "$A.8" -- true)
X7=$(pilot submit --after "$A.7" -- true)
XA=$(pilot submit --after "$A" -- true)
X0=$(pilot submit --after "$A.0:any" -- true)
pilot wait "$X8" "$X7" "$XA" "$X0" --timeout 30 >/dev/null 2>&1
is "$(field "$X8" state) / $(field "$X7" reason) / $(field "$XA" state) / $(field "$X0" state)" \
    "done / dependency: task $((A + 7)) failed / failed / done" \
    "--after ID.8 (done) runs, ID.7 (failed) fails it, ID (all) fails, ID.0:any runs"

# --- --retry-failed: only the 100 failed indexes run again ----------------
n0=$(total)
capture pilot submit --retry-failed "$A" --name 're-{}' -- \
    sh -c 'echo "$PILOT_ARRAY_INDEX" >'"$RES"'/re.{}'
is "$RC" 0 "--retry-failed ARRAY_ID is accepted"
B=$OUT
capture pilot wait "$B" --timeout 120
is "$RC" 0 "... and every retried element is done"
is "$(( $(total) - n0 ))" 100 "... 100 tasks: one per failed element"
is "$(ls "$RES" | grep -c '^re\.')" 100 "... each ran once"
is "$(cat "$RES/re.9907" 2>/dev/null)" 9907 "... with its old index in {} and PILOT_ARRAY_INDEX"
ok "... and none of the others ran" test ! -e "$RES/re.8"
is "$(field "$B.9907" name)" re-9907 "ID.N of the new array names the old index"
capture pilot submit --retry-failed "$A" --array 0-999 -- true
is "$(wc -l <<<"$(pilot ls "$OUT" --json | json '"\n".join(str(t["array_index"]) for t in j)')")" 10 \
    "--array 0-999 narrows the retry to the 10 failed indexes below 1,000"
pilot wait "$OUT" >/dev/null 2>&1
n1=$(total)
capture pilot submit --retry-failed "$B" -- true
is "$RC" 1 "--retry-failed of an array without failures is refused"
one_error_line "... with one line saying none failed" \
    "^pilot: error: retry_failed: no task of array $B failed\$"
capture pilot submit --retry-failed $((A + 1)) -- true
one_error_line "--retry-failed of an element's id: refused with one line" \
    "^pilot: error: retry_failed: $((A + 1)) is not an array's id\$"
S=$(pilot submit --array 1-3 -- sleep 30)
capture pilot submit --retry-failed "$S" -- true
one_error_line "--retry-failed of a running array: refused with one line" \
    "^pilot: error: retry_failed: array $S has 3 tasks that have not ended"
is "$(total)" $((n1 + 3)) "nothing was queued by the refused retries"

# --- cancel: an element, then the whole array -----------------------------
capture pilot cancel "$S.2"
is "$RC" 0 "pilot cancel ID.2"
pilot wait "$S.2" --timeout 20 >/dev/null 2>&1
is "$(field $((S + 1)) state) $(field "$S" state)" "canceled running" \
    "... canceled that element only"
capture pilot cancel "$S" --json
is "$(json 'len(j["canceled"]), len(j["final"])' <<<"$OUT")" "(2, 1)" \
    "pilot cancel ARRAY_ID: the 2 running elements, the canceled one final"
capture pilot wait "$S" --timeout 30 --json
is "$(json 'j["canceled"]' <<<"$OUT")" 3 "... all 3 end canceled"

# --- --priority: higher first, FIFO within a priority ---------------------
# fill every core the pilot has (not two: the machine's count), and queue
# the others only once all of those run, so that none can start early
NCORES=$(pilot status --json | json 'j["cores"]["total"]')
BLOCK=$(pilot submit --array "1-$NCORES" -- sleep 3)
ok "$NCORES tasks hold the pilot's $NCORES cores" \
    wait_for 20 eval '[[ $(pilot ls "$BLOCK" --state running --json | json "len(j)") == "$NCORES" ]]'
for p in -1 0 10; do
    pilot submit --array 1-3 --priority "$p" --name "prio$p-{}" -- true >/dev/null
done
pilot wait --all --timeout 60 >/dev/null 2>&1
order=$(pilot ls --json | json '" ".join(t["name"] for t in sorted((t for t in j if (t["name"] or "").startswith("prio")), key=lambda t: t["start_time"]))')
is "$order" "prio10-1 prio10-2 prio10-3 prio0-1 prio0-2 prio0-3 prio-1-1 prio-1-2 prio-1-3" \
    "queued behind a full pilot, priority 10 starts first, then 0, then -1"
is "$(field "$(pilot submit --priority -7 -- true)" priority)" -7 "show gives the priority"
capture pilot submit --priority 1000001 -- true
is "$RC" 2 "--priority beyond 1,000,000 is a usage error"

# --- --tag, ls --tag ------------------------------------------------------
pilot submit --tag model=lstm --tag run=1 -- true >/dev/null
pilot submit --tag model=cnn --tag run=1 -- true >/dev/null
pilot wait --all --timeout 60 >/dev/null 2>&1
is "$(pilot ls --tag model=lstm --json | json 'len(j)')" 1 "ls --tag model=lstm: 1 task"
is "$(pilot ls --tag run=1 --tag model --json | json 'len(j)')" 2 \
    "ls --tag run=1 --tag model (any value): 2 tasks"
is "$(pilot ls --tag stage=one --state failed --json | json 'len(j)')" 100 \
    "ls --tag with --state: the array's 100 failed elements"
capture pilot submit --tag 'bad key=1' -- true
is "$RC" 2 "a tag key with a space is a usage error"

# --- a YAML file -----------------------------------------------------------
cat >"$WORK/p.yaml" <<EOF
# a pipeline: train waits for prep (further down), post for train
tasks:
  - name: ytrain
    cmd: cat $RES/yprep.txt > $RES/ytrain.txt
    after: [yprep]
    tags: {model: mlp, epochs: 3}
    priority: 2
  - name: yprep
    argv: [sh, -c, "echo \$X > $RES/yprep.txt"]
    env: {X: 42}
  - name: ypost
    cmd: true
    after: ytrain
EOF
capture pilot submit --file "$WORK/p.yaml"
is "$RC" 0 "a YAML file is submitted"
pilot wait --all --timeout 60 >/dev/null 2>&1
is "$(cat "$RES/ytrain.txt" 2>/dev/null)" 42 "its tasks ran in the order of their dependencies"
is "$(pilot ls --tag model=mlp --json | json '[(t["name"], t["tags"]["epochs"], t["priority"]) for t in j]')" \
    '[["ytrain", "3", 2]]' "tags and priority from YAML"
n2=$(total)
printf -- '- name: ok1\n  cmd: true\n- name: bad\n  cmd: true\n  ranks: many\n' >"$WORK/bad.yml"
capture pilot submit --file "$WORK/bad.yml"
is "$RC" 1 "a YAML file with a bad entry is refused"
one_error_line "... with one line naming the file, the line and the field" \
    "^pilot: error: $WORK/bad\\.yml: line 3: field 'ranks' has the wrong type"
printf -- '- name: a\n  cmd: [unclosed\n' >"$WORK/bad2.yaml"
capture pilot submit --file "$WORK/bad2.yaml"
one_error_line "a file that is not YAML: refused with one line naming the line" \
    "^pilot: error: $WORK/bad2\\.yaml: line 3: not YAML: "
is "$(total)" "$n2" "nothing was queued from either file"

# --- pilot wait's progress ---------------------------------------------------
W=$(pilot submit --array 1-6 -- sleep 1)
pilot wait "$W" --timeout 60 >/dev/null 2>"$WORK/plain.err"
like "$(head -1 "$WORK/plain.err")" '^pilot: wait: [0-9]+/6 ended  done' \
    "not a terminal: plain progress lines"
W=$(pilot submit --array 1-6 -- sleep 1)
script -qec "pilot wait $W --timeout 60" /dev/null >"$WORK/tty.out" 2>&1
like "$(tr '\r' '\n' <"$WORK/tty.out" | grep ETA | tail -1)" '\] +[0-9]+/6 .*done [0-9]+  failed 0  running [0-9]+.* ETA ' \
    "on a terminal: a bar with the counts and an ETA"
