#!/bin/bash
# t0820-drain-resume.sh - the walltime drain and 'pilot up --resume': Slurm's
# signal before the end (sent here at once with scancel --batch, as
# --signal=B:TERM does) makes pilotd stop its running tasks, queue them
# again and exit; a resumed pilot runs what was queued or interrupted and
# nothing that was done.  A task whose --timeout would outlive the
# allocation is not started.
. "$(dirname "$0")/lib.sh"

plan 17

RUNS=$WORK/runs
pilot_up 2 || abort "pilot up --nodes 2 --wait failed"
P=$PILOT_UP_ID
DIR=$(pilot_dir "$P")
like "$(cat "$DIR/pilot.sbatch")" '#SBATCH --signal=B:TERM@120' \
    "the batch script asks Slurm for SIGTERM 120 s before the end"

# 12 tasks of 3 s on 4 cores; each appends its id once it has finished
for i in $(seq 12); do
    pilot submit -- sh -c "sleep 3; echo \$PILOT_TASK_ID >>$RUNS" >>"$WORK/ids"
done
# longer than the allocation (15 minutes) less the drain: never started
capture pilot submit --timeout 2h -- true
LONG=$OUT
wait_for 20 eval '[[ -s $RUNS ]]' # a first wave ended
JOB=$(pilot status --json | json 'j["job"]')
like "$JOB" '^[0-9]+$' "status gives the Slurm job ($JOB)"
capture pilot status --json
RUNNING=$(json 'j["tasks"]["running"]' <<<"$OUT")
diag "at the drain: $(json 'j["tasks"]' <<<"$OUT")"
ok "some tasks run when the drain comes ($RUNNING)" test "$RUNNING" -gt 0
HELD=$(json 'j["tasks"].get("assigned", 0)' <<<"$OUT")
ok "... and some are held by their agents beyond the free cores (--prefetch): $HELD" \
    test "$HELD" -gt 0
scancel --signal=TERM --batch "$JOB"
ok "the job ends within 60 s of the signal" wait_for 60 job_gone "$JOB"
like "$(cat "$DIR"/logs/pilotd.log)" 'draining' "pilotd says it drains"
lacks "the batch script did not restart the drained pilotd" \
    "restart" "$DIR/logs/slurm-$JOB.out"
pilot ls --json --limit 100 >"$WORK/before.json"
"$PY" - "$WORK/before.json" "$LONG" >"$WORK/b.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
long_id = int(sys.argv[2])
print(json.dumps({
    "states": sorted(set(x["state"] for x in t if x["id"] != long_id)),
    "done": sorted(x["id"] for x in t if x["state"] == "done"),
    # attempts, not 1: a task its agent held (--prefetch) and gave back
    # unstarted has a second attempt that was its first run
    "done_att": {x["id"]: x.get("attempts") for x in t if x["state"] == "done"},
    "running": [x["id"] for x in t if x["state"] in ("assigned", "running")],
    "long": [x["state"] for x in t if x["id"] == long_id],
    "interrupted": sum(1 for x in t if x["state"] == "queued" and x.get("attempts", 0) > 0),
}))
EOF
B=$(<"$WORK/b.json")
is "$(json 'j["running"]' <<<"$B")" "[]" "after the drain no task is assigned or running"
is "$(json 'j["states"]' <<<"$B")" '["done", "queued"]' "every task is done or queued again"
ok "the interrupted tasks are queued again ($(json 'j["interrupted"]' <<<"$B"))" \
    test "$(json 'j["interrupted"]' <<<"$B")" -gt 0
is "$(json 'j["long"]' <<<"$B")" '["queued"]' "the task with --timeout 2h never started"
HELDQ=$("$PY" -c 'import sqlite3, sys
db = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
print(db.execute("select count(*) from events where state = ? and detail = ?",
                 ("queued", "walltime drain before it started")).fetchone()[0])' "$DIR/state.db")
ok "held ones are queued again as not started ($HELDQ)" test "$HELDQ" -gt 0

capture pilot up --resume "$P" --nodes 2 --time 15:00 --wait --wait-timeout 120
is "$RC,$OUT" "0,$P" "pilot up --resume $P brings the same pilot up again"
capture pilot cancel "$LONG"
CAPTURE_TIMEOUT=100 capture pilot wait --all --timeout 90
is "$RC" 1 "wait --all: the 12 tasks end (the long one was canceled)"
pilot ls --json --limit 100 >"$WORK/after.json"
"$PY" - "$WORK/after.json" "$WORK/b.json" "$RUNS" "$WORK/ids" >"$WORK/a.json" <<'EOF'
import collections, json, sys
t = {x["id"]: x for x in json.load(open(sys.argv[1]))}
before = json.load(open(sys.argv[2]))
runs = collections.Counter(int(x) for x in open(sys.argv[3]).read().split())
ids = [int(x) for x in open(sys.argv[4]).read().split()]
print(json.dumps({
    "not_done": [i for i in ids if t[i]["state"] != "done"],
    "runs": sorted(set(runs[i] for i in ids)),
    "done_rerun": [i for i in before["done"]
                   if t[i].get("attempts") != before["done_att"][str(i)]],
}))
EOF
A=$(<"$WORK/a.json")
is "$(json 'j["not_done"]' <<<"$A")" "[]" "after the resume all 12 tasks are done"
is "$(json 'j["runs"]' <<<"$A")" "[1]" "each of them finished exactly once"
is "$(json 'j["done_rerun"]' <<<"$A")" "[]" "none done before the drain ran again"
