#!/bin/bash
# t1300-output-ranks.sh - each rank of a task writes its own stdout and
# stderr (issue 16): ranks on one node printing with unbuffered print()
# (each print() is several write()s) once shared one file and gave
# "rankrank 03 ofof 44" (a torch task: run here too); now 'pilot logs'
# merges whole lines, --label names each line's rank, --rank R prints one
# rank's, -f follows them, 'pilot show' names the files, and a task of
# one rank keeps ID.out.  A 2-node Slurm pilot (its agents offer 2 cores
# each here): 4 ranks, 2 on each node; /usr/bin/python3.
. "$(dirname "$0")/lib.sh"

plan 21

pilot_up 2 || abort "pilot up --nodes 2 --wait failed"
export PILOT_ID=$PILOT_UP_ID
DIR=$(pilot_dir "$PILOT_ID")

cat >"$WORK/ranks.py" <<'EOF'
import os, sys, time
r, n = int(os.environ["PILOT_RANK"]), int(os.environ["PILOT_SIZE"])
lines = int(sys.argv[1]) if len(sys.argv) > 1 else 300
pause = float(sys.argv[2]) if len(sys.argv) > 2 else 0
for i in range(lines):
    # several words: several write()s when unbuffered
    print("rank", r, "of", n, "line", i, "x" * (10 + r))
    print("err", r, i, file=sys.stderr)
    if pause:
        time.sleep(pause)
EOF

# check_lines FILE LABELLED: every line whole, each rank's 300 in order
cat >"$WORK/check.py" <<'EOF'
import re, sys
text, labelled = open(sys.argv[1]).read(), sys.argv[2] == "1"
want = int(sys.argv[3]) if len(sys.argv) > 3 else 300
pat = re.compile((r"(\d+): " if labelled else "()") +
                 r"rank (\d+) of 4 line (\d+) (x+)")
seen, bad = {}, []
for l in text.splitlines():
    m = pat.fullmatch(l)
    if not m or len(m.group(4)) != 10 + int(m.group(2)) or \
       (labelled and m.group(1) != m.group(2)):
        bad.append(l)
        continue
    seen.setdefault(int(m.group(2)), []).append(int(m.group(3)))
ok = all(seen.get(r) == list(range(want)) for r in range(4))
print("ok" if ok and not bad else "bad %d lines (%r), ranks %s" %
      (len(bad), bad[:3], {r: len(v) for r, v in seen.items()}))
EOF

for unbuf in 1 0; do
    if ((unbuf)); then
        T=$(pilot submit --nodes 2 --ranks-per-node 2 --env PYTHONUNBUFFERED=1 -- /usr/bin/python3 "$WORK/ranks.py")
        how="PYTHONUNBUFFERED=1"
    else
        T=$(pilot submit --nodes 2 --ranks-per-node 2 -- env -u PYTHONUNBUFFERED /usr/bin/python3 "$WORK/ranks.py")
        how="PYTHONUNBUFFERED unset"
    fi
    capture pilot wait "$T" --timeout 120
    is "$RC" 0 "$how: the 4-rank task is done"
    B=$DIR/tasks/$((T / 1000))/$T
    ok "$how: a stdout and a stderr file per rank" \
        test -f "$B.r0.out" -a -f "$B.r3.out" -a -f "$B.r0.err" -a -f "$B.r3.err"
    pilot logs "$T" >"$WORK/merged"
    is "$("$PY" "$WORK/check.py" "$WORK/merged" 0)" ok \
        "$how: pilot logs: 4 x 300 whole lines, none mixed inside"
    pilot logs --label "$T" >"$WORK/labelled"
    is "$("$PY" "$WORK/check.py" "$WORK/labelled" 1)" ok \
        "$how: --label: each line after its own rank"
done

capture pilot logs --rank 2 "$T"
is "$(sed -n '1p;$p' <<<"$OUT" | tr '\n' '|')" \
    "rank 2 of 4 line 0 xxxxxxxxxxxx|rank 2 of 4 line 299 xxxxxxxxxxxx|" \
    "--rank 2: rank 2's lines alone"
is "$(wc -l <<<"$OUT")" 300 "... all 300 of them"
capture pilot logs --rank 3 --stderr "$T"
is "$(tail -n1 <<<"$OUT")" "err 3 299" "--rank 3 --stderr"
capture pilot logs --rank 4 "$T"
like "$RC $ERR" "^2 .*task $T has 4 ranks: there is no rank 4" "--rank 4 of 4 ranks refused"
capture pilot show "$T"
like "$OUT" "stdout: +$B\\.r0\\.out \\.\\. $T\\.r3\\.out \\(one per rank\\)" \
    "pilot show names the per-rank files"

# -f: lines as they come, whole, while the task runs (3 s)
T=$(pilot submit --nodes 2 --ranks-per-node 2 --env PYTHONUNBUFFERED=1 -- /usr/bin/python3 "$WORK/ranks.py" 30 0.1)
pilot logs -f --label "$T" >"$WORK/follow" 2>"$WORK/follow.err" &
FPID=$!
ok "-f prints lines while the task runs" \
    wait_for 30 eval '[[ $(pilot show "$T" --json | json "j[\"state\"]") == running && -s $WORK/follow ]]'
wait_for 60 eval '! kill -0 $FPID 2>/dev/null'
wait "$FPID"
is "$?" 0 "-f ends when the task ends"
is "$("$PY" "$WORK/check.py" "$WORK/follow" 1 30)" ok "-f --label: all 4 x 30 lines, whole, labelled"

# the issue's case: torch.distributed over 2 x 2 ranks, unbuffered
TORCH='import os, torch, torch.distributed as d; d.init_process_group("gloo", init_method="env://"); t = torch.tensor([float(d.get_rank() + 1)]); d.all_reduce(t); print("rank", d.get_rank(), "of", d.get_world_size(), "sum", int(t.item()))'
T=$(pilot submit --nodes 2 --ranks-per-node 2 --comm torch --env PYTHONUNBUFFERED=1 \
    -- /usr/bin/python3 -c "$TORCH")
CAPTURE_TIMEOUT=200 capture pilot wait "$T" --timeout 180
is "$RC" 0 "torch: the 4-rank task is done"
is "$(pilot logs --label "$T" | sort | tr '\n' '|')" \
    "0: rank 0 of 4 sum 10|1: rank 1 of 4 sum 10|2: rank 2 of 4 sum 10|3: rank 3 of 4 sum 10|" \
    "torch: 'rank R of 4 sum 10' whole, once per rank, under its label"

# one rank: the old paths
T=$(pilot submit -- /usr/bin/python3 -c 'print("one rank")')
capture pilot wait "$T" --timeout 60
B=$DIR/tasks/$((T / 1000))/$T
ok "a task of one rank keeps $T.out" test -f "$B.out" -a ! -e "$B.r0.out"
is "$(pilot logs "$T")" "one rank" "... and pilot logs reads it"
is "$(pilot logs --label "$T")" "0: one rank" "--label on one rank"

capture pilot down
