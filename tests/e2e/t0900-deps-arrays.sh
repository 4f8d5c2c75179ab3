#!/bin/bash
# t0900-deps-arrays.sh - a local pilot: --after (a graph whose failures
# propagate, :any, names, an array's id), --array (10,000 tasks, {} and
# PILOT_ARRAY_INDEX), --file (JSONL: order by names, a bad line names its
# number and queues nothing), dependencies kept across a pilotd restart.
. "$(dirname "$0")/lib.sh"

plan 30

field() { pilot show "$1" --json | json "j[\"$2\"]"; }

pilot_up_local || abort "pilot up --local --wait failed"
P=$PILOT_UP_ID
DIR=$(pilot_dir "$P")
RES=$WORK/out
mkdir -p "$RES"

# --- a graph: a -> b -> c, a fails: b and c fail with 'dependency' ------
A=$(pilot submit --name a -- sh -c 'sleep 2; exit 3')
B=$(pilot submit --after "$A" -- touch "$RES/b")
C=$(pilot submit --after "$B" -- touch "$RES/c")
D=$(pilot submit --after "$A:any" -- touch "$RES/d")
E=$(pilot submit --after a:any,"$D" -- touch "$RES/e")
is "$(field "$B" state)" waiting "a task whose dependency runs is waiting"
capture pilot wait "$A" "$B" "$C" "$D" "$E" --timeout 30
is "$(field "$A" state)" failed "a failed (exit 3)"
is "$(field "$B" state) $(field "$B" reason)" "failed dependency: task $A failed" \
    "b failed with reason dependency"
is "$(field "$C" state) $(field "$C" reason)" "failed dependency: task $B failed" \
    "c failed after b: the failure went down the graph"
ok "neither b nor c ran (d, writing beside them, did)" \
    test -e "$RES/d" -a ! -e "$RES/b" -a ! -e "$RES/c"
is "$(field "$D" state)" done "d (--after a:any) ran after a failed"
is "$(field "$E" state)" done "e (--after a:any,D: a name and an id) ran"
is "$(pilot show "$E" --json | json '[x["id"] for x in j["after"]]')" \
    "[$A, $D]" "show lists e's dependencies by id"
S1=$(field "$E" start_time)
ok "e started after d ended" "$PY" -c \
    "import sys; sys.exit(not $S1 >= $(field "$D" end_time))"

# a dependency that already failed: the new task fails at once
capture pilot submit --after "$A" -- true
is "$RC" 0 "submit after a failed task is accepted"
is "$(field "$OUT" reason)" "dependency: task $A failed" "... and it fails at once"
capture pilot submit --after 999999 -- true
is "$RC" 1 "an unknown id is refused"
one_error_line "... with one line naming the id" '^pilot: error: after: no task 999999$'
capture pilot submit --after nosuchname -- true
one_error_line "an unknown --after name: refused with one line naming it" \
    "^pilot: error: after: no task is named 'nosuchname'\$"
capture pilot submit --after 1:maybe -- true
is "$RC" 1 "a bad --after is refused"
capture pilot submit --array 5-1 -- true
is "$RC" 2 "--array 5-1 is a usage error"
like "$ERR" 'ends before it starts' "... saying why"

# --- an array of 10,000, then one task after the whole array -------------
t0=$(now)
capture pilot submit --array 0-9999 --name 'el-{}' -- sh -c \
    'echo "{} $PILOT_ARRAY_INDEX" >'"$RES"'/el.$PILOT_ARRAY_INDEX'
is "$RC" 0 "an array of 10,000 is submitted"
ARR=$OUT
diag "submit --array 0-9999: $(elapsed "$t0" "$(now)")s"
AFTER=$(pilot submit --after "$ARR" -- sh -c "ls $WORK/out | grep -c '^el\.' >$WORK/count")
CAPTURE_TIMEOUT=300 capture pilot wait --all --timeout 280
diag "10,000 tasks ran in $(elapsed "$t0" "$(now)")s"
is "$(ls "$WORK/out" | grep -c '^el\.')" 10000 "every element ran once and wrote its file"
is "$(cat "$WORK/out/el.4321")" "4321 4321" "{} and PILOT_ARRAY_INDEX hold the index"
is "$(cat "$WORK/count" 2>/dev/null)" 10000 "the task after the array saw all 10,000 outputs"
is "$(field $((ARR + 17)) name) $(field $((ARR + 17)) array_id) $(field $((ARR + 17)) array_index)" \
    "el-17 $ARR 17" "element 17: its name, array id and index"

# --- a JSONL file -------------------------------------------------------
cat >"$WORK/tasks.jsonl" <<EOF
# a comment, then a task that names one further down
{"name": "train", "cmd": "cat $RES/prep.txt >$RES/train.txt", "after": ["prep"]}

{"name": "prep", "argv": ["sh", "-c", "echo \$X >$RES/prep.txt"], "env": {"X": "from-prep"}}
EOF
capture pilot submit --file "$WORK/tasks.jsonl"
is "$RC" 0 "submit --file with a forward name: accepted"
is "$(wc -l <<<"$OUT")" 2 "... two ids, one per task"
capture pilot wait --all --timeout 30
is "$(cat "$RES/train.txt" 2>/dev/null)" from-prep "train ran after prep (file order reversed)"

before=$(pilot status --json | json 'j["tasks"]["total"]')
printf '{"cmd": "true"}\n{"cmd": "true"}\n{"cmd": "true", "ranks": "x"}\n' \
    >"$WORK/bad.jsonl"
capture pilot submit --file "$WORK/bad.jsonl"
is "$RC" 1 "a bad line fails the whole file"
one_error_line "... with one line naming the file, the line and the field" \
    "^pilot: error: $WORK/bad\\.jsonl: line 3: field 'ranks' has the wrong type"
is "$(pilot status --json | json 'j["tasks"]["total"]')" "$before" "nothing was queued"

# --- dependencies survive a pilotd restart ------------------------------
G=$(pilot submit -- sleep 3)
H=$(pilot submit --after "$G" -- touch "$RES/h")
PID=$(kv "$DIR/endpoint" pid)
kill -9 "$PID"
# the old pilotd holds the pilot's lock until it is gone (under ASan its
# exit takes a while): a pilotd started before then would find it held
wait_for 20 eval '! kill -0 "$PID" 2>/dev/null'
setsid pilotd --dir "$DIR" --local >"$WORK/pilotd-restart.out" 2>&1 </dev/null &
# 'pilot status' exits 0 on a pilot that is down too (it shows the
# recorded state): wait for the new pilotd itself to answer
restarted() {
    [[ $(pilot status --json 2>/dev/null \
         | json "j['state'] == 'running' and j['pid'] != $PID" 2>/dev/null) \
       == true ]]
}
wait_for 20 restarted || diag "the restarted pilotd did not answer in 20 s"
is "$(field "$H" state)" waiting "after a restart the dependent task still waits"
capture pilot wait "$H" --timeout 30
is "$(field "$H" state)" done "... and runs once its dependency is done"
