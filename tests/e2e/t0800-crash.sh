#!/bin/bash
# t0800-crash.sh - pilotd killed with SIGKILL 20 times while thousands of
# short tasks are submitted and run on a 4-node Slurm pilot.  The batch
# script starts pilotd again each time; the agents keep their tasks and
# come back to it.  Every acknowledged task id ends done, ran exactly
# once (counted from the runs the tasks themselves append to a file),
# and no id is handed out twice.
. "$(dirname "$0")/lib.sh"

plan 9

NTASKS=${T0800_TASKS:-5000}
NKILLS=${T0800_KILLS:-20}
RUNS=$WORK/runs

pilot_up 4 || abort "pilot up --nodes 4 --wait failed"
P=$PILOT_UP_ID
DIR=$(pilot_dir "$P")
diag "pilot up to all 4 agents registered: ${PILOT_UP_SECS}s"

# submitter: one task per command, 4 at a time; a command that fails (its
# pilotd died under it) is tried again: only printed ids count as acked
cat >"$WORK/sub.sh" <<EOF
#!/bin/bash
for try in \$(seq 50); do
    if id=\$(PILOT_TIMEOUT=3 timeout 20 pilot submit --retries 3 -- sh -c 'echo \$PILOT_TASK_ID >>$RUNS' 2>>$WORK/sub.err); then
        echo "\$id"
        exit 0
    fi
    sleep 0.2
done
echo "gave up" >&2
exit 1
EOF
chmod +x "$WORK/sub.sh"
T0=$(now)
seq "$NTASKS" | xargs -P4 -I{} "$WORK/sub.sh" >"$WORK/acked" 2>"$WORK/xargs.err" &
SUBMITTER=$!

# killer: SIGKILL pilotd at random moments; each time, wait until a new
# pilotd answers and measure how long that took
pilotd_pid() {
    awk '$1 == "pid" { print $2 }' "$DIR/endpoint" 2>/dev/null
}
KILLED=0
RESTART_MS=()
for i in $(seq "$NKILLS"); do
    sleep "$(( RANDOM % 3 + 1 )).$(( RANDOM % 10 ))"
    old=$(pilotd_pid)
    [[ -n $old ]] && kill -0 "$old" 2>/dev/null || continue
    kill -9 "$old" && KILLED=$((KILLED + 1))
    t=$(now)
    # serving: 'pilot status' answers from a pilotd with another pid
    for _ in $(seq 300); do
        new=$(pilotd_pid)
        if [[ -n $new && $new != "$old" ]] &&
            timeout 5 pilot status >/dev/null 2>&1; then
            break
        fi
        sleep 0.1
    done
    RESTART_MS+=("$("$PY" -c 'import sys; print(int((float(sys.argv[2]) - float(sys.argv[1])) * 1000))' "$t" "$(now)")")
done
wait "$SUBMITTER"
SUB_RC=$?
diag "submitted $(wc -l <"$WORK/acked") tasks in $(elapsed "$T0" "$(now)")s" \
     "while pilotd was killed $KILLED times"
diag "kill to serving again (ms): ${RESTART_MS[*]}"
is "$KILLED" "$NKILLS" "pilotd was killed with SIGKILL $NKILLS times"
is "$SUB_RC,$(grep -cE '^[0-9]+$' "$WORK/acked")" "0,$NTASKS" \
    "all $NTASKS submissions were acknowledged (some after retries)"
restarts=$(grep -c "pilotd died (status 137): restart" "$DIR"/logs/slurm-*.out)
is "$restarts" "$KILLED" "the batch script restarted pilotd after each kill"

CAPTURE_TIMEOUT=400 capture pilot wait --all --timeout 360
is "$RC" 0 "pilot wait --all: every task ends done"
pilot ls --json --limit 100000 >"$WORK/ls.json" 2>"$WORK/ls.err"
"$PY" - "$WORK/acked" "$RUNS" "$WORK/ls.json" >"$WORK/res.json" <<'EOF'
import collections, json, sys
acked = [int(x) for x in open(sys.argv[1]).read().split()]
runs = collections.Counter(int(x) for x in open(sys.argv[2]).read().split())
tasks = {t["id"]: t for t in json.load(open(sys.argv[3]))}
dup_ids = [i for i, n in collections.Counter(acked).items() if n > 1]
print(json.dumps({
    "acked": len(acked),
    "dup_ids": dup_ids[:10],
    "not_done": [[i, tasks.get(i, {}).get("state")] for i in acked
                 if tasks.get(i, {}).get("state") != "done"][:10],
    "never_ran": [i for i in acked if runs[i] == 0][:10],
    "ran_twice": [[i, n] for i, n in runs.items() if n > 1][:10],
    "runs": sum(runs.values()),
    "tasks": len(tasks),
    "requeued": sum(1 for t in tasks.values() if t.get("attempts", 1) > 1),
}))
EOF
R=$(<"$WORK/res.json")
res() { json "$1" <<<"$R"; }
is "$(res 'j["dup_ids"]')" "[]" "no task id was handed out twice"
is "$(res 'j["not_done"]')" "[]" "every acknowledged task is done"
is "$(res 'j["never_ran"]')" "[]" "every acknowledged task ran"
is "$(res 'j["ran_twice"]')" "[]" "no task ran twice"
diag "$(res 'j["acked"]') acked, $(res 'j["tasks"]') tasks in the pilot" \
     "(the rest: submissions whose reply died with pilotd), $(res 'j["runs"]')" \
     "runs, $(res 'j["requeued"]') tasks started more than once"
# the last kill may come after the last task ended: its pilotd answers
# before the agents' next heartbeat brings them back (2 s; it waits 10 s)
ok "the 4 agents are still up (back within 15 s of the last restart)" \
    wait_for 15 agents_up 4
