#!/bin/bash
# t1305-journal.sh - --output journal (issue 16): every task's output on
# a node goes into that node's journal, not two files per task; pilot
# logs, -f, --rank, --stderr and --attempt read it as they read files;
# --array ID --grep RE searches an array; a journal is rotated at its
# size; a task of 20 MB reads back whole; the output limit holds; an
# agent killed with SIGKILL while its task writes leaves the journal
# readable (a torn tail skipped) and its successor writes a new file.
# A local pilot, then a 2-node Slurm pilot.
. "$(dirname "$0")/lib.sh"

plan 30

field() { pilot show "$1" --json | json "j[\"$2\"]"; }
nfiles() { find "$DIR" -type f | wc -l; }
agent_pid() { pgrep -f "pilot-agent --local .*--keys $DIR/keys" | head -n1; }

CAPTURE_TIMEOUT=60 capture pilot up --local --wait --output journal --journal-size 1M
[[ $RC == 0 ]] || abort "pilot up --local --output journal failed: $ERR"
export PILOT_ID=$OUT
DIR=$(pilot_dir "$PILOT_ID")

T=$(pilot submit -- sh -c 'echo out 1; echo err 1 >&2; echo out 2; printf no-newline')
capture pilot wait "$T" --timeout 60
is "$(pilot logs "$T" | tr '\n' '|')" "out 1|out 2|no-newline" "pilot logs reads the journal"
is "$(pilot logs --stderr "$T")" "err 1" "--stderr"
ok "no file of its own" test ! -e "$DIR/tasks/$((T / 1000))/$T.out"
ls "$DIR"/journal/*/000001.pj "$DIR"/journal/*/000001.pji >/dev/null 2>&1
is "$?" 0 "the node's journal and its index are in DIR/journal/NODE/"
like "$(pilot show "$T")" "stdout: +in the journals $DIR/journal/[^/ ]+/ \\(pilot logs $T\\)" "pilot show says where"

# a task's own --output files beside it
T=$(pilot submit --output files -- echo in a file)
capture pilot wait "$T" --timeout 60
is "$(cat "$DIR/tasks/$((T / 1000))/$T.out")" "in a file" "pilot submit --output files: a file"

# 2 ranks, unbuffered: whole lines, --rank, --label
T=$(pilot submit --ranks 2 --env PYTHONUNBUFFERED=1 -- /usr/bin/python3 -c '
import os
r = os.environ["PILOT_RANK"]
for i in range(500): print("rank", r, "line", i)')
capture pilot wait "$T" --timeout 60
pilot logs --label "$T" >"$WORK/l"
is "$(grep -Ec '^([01]): rank \1 line [0-9]+$' "$WORK/l"),$(wc -l <"$WORK/l")" "1000,1000" \
    "--label: 2 x 500 whole lines, each after its rank"
is "$(pilot logs --rank 1 "$T" | sed -n '1p;$p' | tr '\n' '|')" "rank 1 line 0|rank 1 line 499|" "--rank 1"

# -f while it runs
T=$(pilot submit -- sh -c 'for i in 1 2 3 4 5 6; do echo tick $i; sleep 0.5; done')
pilot logs -f "$T" >"$WORK/f" &
FPID=$!
ok "-f prints lines while the task runs" \
    wait_for 20 eval '[[ $(field "$T" state) == running && -s $WORK/f ]]'
wait_for 30 eval '! kill -0 $FPID 2>/dev/null'
is "$(tr '\n' ' ' <"$WORK/f")" "tick 1 tick 2 tick 3 tick 4 tick 5 tick 6 " "-f: all of it, then it ends"

# an array: few files, --grep
BEFORE=$(nfiles)
A=$(pilot submit --array 0-499 -- sh -c 'echo "element $PILOT_ARRAY_INDEX value $((PILOT_ARRAY_INDEX * 7))"')
capture pilot wait "$A" --timeout 120
is "$RC" 0 "an array of 500 is done"
AFTER=$(nfiles)
ok "500 tasks made $((AFTER - BEFORE)) files, not 1000" test $((AFTER - BEFORE)) -lt 10
capture pilot logs --array "$A" --grep 'value (0|7|3493)$'
is "$RC,$(sort -V <<<"$OUT" | tr '\n' '|')" "0,$A.0: element 0 value 0|$A.1: element 1 value 7|$A.499: element 499 value 3493|" \
    "--array --grep: the matching lines, ID.N: line"
capture pilot logs --array "$A" --grep 'nothing like this'
is "$RC,$OUT" "1," "--grep with no match: exit 1"
F=$(pilot submit --array 0-9 --output files -- sh -c 'echo "file element $PILOT_ARRAY_INDEX"')
capture pilot wait "$F" --timeout 60
capture pilot logs --array "$F" --grep 'element [37]$'
is "$(sort -V <<<"$OUT" | tr '\n' '|')" "$F.3: file element 3|$F.7: file element 7|" \
    "--grep reads the files of an array that has them"
capture pilot logs --array "$((F + 3))" --grep element
is "$RC,$OUT" "1," "--array with an element's id: no lines labelled as another array's"
like "$ERR" "^pilot: error: $((F + 3)) is element 3 of array $F, not an array: try --array $F\$" \
    "... the error names its array"

# rotation at 1M, and a task of 20 MB read back whole
SEGS=$(ls "$DIR"/journal/*/*.pj | wc -l)
T=$(pilot submit -- sh -c 'yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c 20000000')
capture pilot wait "$T" --timeout 120
is "$(pilot logs "$T" | md5sum)" "$(yes 0123456789abcdefghijklmnopqrstuvwxyz | head -c 20000000 | md5sum)" \
    "20 MB of output read back whole"
NSEGS=$(ls "$DIR"/journal/*/*.pj | wc -l)
ok "rotated at 1M: $SEGS journal files, then $NSEGS" test "$NSEGS" -ge $((SEGS + 18))
ok "no journal file over 1 MiB" test -z "$(find "$DIR/journal" -name '*.pj' -size +1024k)"

# the output limit holds without a file to stat
T=$(pilot submit --output-limit 1M -- sh -c 'while :; do head -c 100000 /dev/zero; sleep 0.05; done')
capture pilot wait "$T" --timeout 30
like "$(field "$T" state) $(field "$T" reason)" '^failed output-limit: stdout is over 1048576 bytes' \
    "--output-limit stops a task that writes into the journal"

# a task that leaves a writer behind: its end is not held by the pipe
T=$(pilot submit -- sh -c 'yes & sleep 0.5; echo leader done >&2')
capture pilot wait "$T" --timeout 30
is "$RC,$(field "$T" state),$(pilot logs --stderr "$T")" "0,done,leader done" \
    "a task whose child writes without end still ends (the agent stops reading)"

# the agent killed with SIGKILL while its task writes
T=$(pilot submit -- sh -c 'while :; do echo tick-tock-tick-tock; done')
wait_for 20 eval '[[ $(field "$T" state) == running ]]' || abort "task $T did not start"
sleep 1
OLD=$(agent_pid)
LAST=$(ls "$DIR"/journal/*/*.pj | tail -n1)
kill -9 "$OLD"
ok "a new agent registers" \
    wait_for 40 eval '[[ -n $(agent_pid) && $(agent_pid) != "$OLD" ]] && agents_up 1'
# a tear at the tail, as a kill inside a write leaves
truncate -s -7 "$LAST"
capture pilot logs --attempt 1 "$T"
is "$RC,$(grep -vc '^tick-tock-tick-tock$' <<<"$OUT")" "0,0" \
    "the killed attempt's output reads, whole lines, the torn tail skipped ($(wc -l <<<"$OUT") lines)"
pilot cancel "$T" >/dev/null 2>&1
T2=$(pilot submit -- echo after the kill)
capture pilot wait "$T2" --timeout 60
is "$(pilot logs "$T2")" "after the kill" "a task after it reads"
ok "the new agent writes a new journal file" \
    test "$(ls "$DIR"/journal/*/*.pj | tail -n1)" != "$LAST"
capture pilot logs --array "$A" --grep 'value 3493$'
is "$OUT" "$A.499: element 499 value 3493" "what was written before the kill still reads"
capture pilot down

# a 2-node Slurm pilot
CAPTURE_TIMEOUT=180 capture pilot up --nodes 2 --time 10:00 --wait --wait-timeout 120 --output journal
[[ $RC == 0 ]] || abort "pilot up --nodes 2 --output journal failed: $ERR"
export PILOT_ID=$OUT
DIR=$(pilot_dir "$PILOT_ID")
T=$(pilot submit --nodes 2 --ranks-per-node 1 -- sh -c 'for i in 1 2 3; do echo "rank $PILOT_RANK on $PILOT_NODE $i"; sleep 0.5; done')
pilot logs -f --label "$T" >"$WORK/f2" &
FPID=$!
A=$(pilot submit --array 0-39 -- sh -c 'echo "element $PILOT_ARRAY_INDEX on $PILOT_NODE"')
capture pilot wait "$T" "$A" --timeout 120
wait_for 30 eval '! kill -0 $FPID 2>/dev/null'
is "$(grep -Ec '^([01]): rank \1 on n[0-9] [123]$' "$WORK/f2")" 6 "slurm: -f --label over 2 nodes' journals"
is "$(ls -d "$DIR"/journal/*/ | wc -l)" 2 "slurm: a journal per node"
capture pilot logs --array "$A" --grep '^element (0|39) '
like "$(sort -V <<<"$OUT" | tr '\n' '|')" "^$A\\.0: element 0 on n[0-9]\\|$A\\.39: element 39 on n[0-9]\\|$" \
    "slurm: --grep over an array on 2 nodes"
capture pilot down
