#!/bin/bash
# t1330-grow.sh - pilot grow: a Slurm job of agents joins a running 1-node
# pilot and tasks run on its node; a pilotd killed and restarted in its
# job takes it back; pilot shrink --idle releases it (its job ends, its
# node leaves).  An allocation whose walltime nears drains
# its node and leaves: only its task is queued again (not charged to
# --retries 0) and ends on the pilot's own node, whose task runs on; a
# task whose --timeout outlasts the allocation never starts there.
. "$(dirname "$0")/lib.sh"

plan 31

pilot_up 1 || abort "pilot up --nodes 1 --wait failed"
P=$PILOT_UP_ID
DIR=$(pilot_dir "$P")
OWN=$(pilot status --json | json 'j["nodes"][0]["name"]')

# --- a manual allocation, tasks on it, its release --------------------
capture pilot grow --nodes 1 --wait --json
is "$RC" 0 "pilot grow --nodes 1 --wait exits 0"
A1_JOB=$(json 'j["job"]' <<<"$OUT")
cleanup_job "$A1_JOB"
is "$(json '[j["id"], j["state"], len(j["names"])]' <<<"$OUT")" \
    '[1, "running", 1]' "allocation 1 runs, its node joined"
NEW=$(json 'j["names"][0]' <<<"$OUT")
ok "its node ($NEW) is not the pilot's ($OWN)" test "$NEW" != "$OWN"
like "$(squeue -h -j "$A1_JOB" -o '%j %T')" "^pilot-$P-a1 RUNNING" \
    "its Slurm job $A1_JOB runs, named after the pilot"
capture pilot status --json
is "$(json '[{n["name"]: n["alloc"] for n in j["nodes"]}.get(x, 0)
             for x in ["'"$OWN"'", "'"$NEW"'"]]' <<<"$OUT")" "[null, 1]" \
    "status: each node with its allocation (none: the pilot's own)"
is "$(json '[[a["id"], a["job"], a["state"]] for a in j["allocs"]]' \
    <<<"$OUT")" "[[1, $A1_JOB, \"running\"]]" "status lists the allocation"
capture pilot status
like "$OUT" "1 +$A1_JOB +running +$NEW" "the text status has its row"

# two tasks of a whole node (2 cores each) at once: one on each node
for i in 1 2; do
    pilot submit --cores-per-rank 2 -- sh -c 'sleep 2; hostname' \
        >>"$WORK/ids"
done
capture pilot wait $(cat "$WORK/ids") --timeout 60
is "$RC" 0 "both tasks are done"
capture pilot ls --json
is "$(json 'sorted(t["node"] for t in j)' <<<"$OUT")" \
    "$(printf '%s\n' "$OWN" "$NEW" | sort | "$PY" -c \
       'import json, sys; print(json.dumps(sys.stdin.read().split()))')" \
    "one ran on the pilot's node, one on the grown one"

# --- a pilotd restarted in its job takes its allocation back ----------
PID=$(kv "$DIR/endpoint" pid)
kill -9 "$PID"
ok "pilotd killed: restarted, both agents back" \
    wait_for 60 eval '[[ $(kv "$DIR/endpoint" pid) != "$PID" ]] && agents_up 2'
capture pilot status --json
is "$(json '[[a["id"], a["state"], a["names"]] for a in j["allocs"]]' \
    <<<"$OUT")" "[[1, \"running\", [\"$NEW\"]]]" \
    "the new pilotd has allocation 1 back (state.db), its node rejoined"

capture pilot shrink --idle 1h --json
is "$(json 'j["released"]' <<<"$OUT")" "[]" \
    "shrink --idle 1h: nothing idle that long"
sleep 2
capture pilot shrink --idle 1s
is "$RC" 0 "pilot shrink --idle 1s exits 0"
is "$OUT" "allocation 1 released" "... and releases allocation 1"
ok "its job leaves squeue within 30 s" wait_for 30 job_gone "$A1_JOB"
capture pilot status --json
like "$(json '[[a["state"], a["why"]] for a in j["allocs"]]' <<<"$OUT")" \
    '^\[\["ended", "released idle after [0-9]+ s \(pilot shrink\)"\]\]$' \
    "the allocation has ended, released idle"
is "$(json '[{n["name"]: n["state"] for n in j["nodes"]}.get(x)
             for x in ["'"$OWN"'", "'"$NEW"'"]]' <<<"$OUT")" '["up", "gone"]' \
    "its node is gone, the pilot's is up"
capture pilot shrink --alloc 9
one_error_line "shrink --alloc 9: no such allocation" "no such allocation"

# --- an allocation whose walltime ends --------------------------------
# the pilot's node: busy for 40 s with a task that must not be touched
capture pilot submit --cores-per-rank 2 --retries 0 -- sleep 40
OWN_T=$OUT
wait_for 20 eval '[[ $(pilot show "$OWN_T" --json | json "j[\"state\"]") == running ]]'
T0=$(now)
capture pilot grow --nodes 1 --time 1 --drain 30s --wait --json
is "$RC" 0 "pilot grow --time 1 --drain 30s exits 0"
A2_JOB=$(json 'j["job"]' <<<"$OUT")
cleanup_job "$A2_JOB"
NEW2=$(json 'j["names"][0]' <<<"$OUT")
# first in the queue, but its --timeout outlasts the allocation: it
# waits for the pilot's node (and holds nothing back on the grown one)
capture pilot submit --cores-per-rank 2 --timeout 5m -- hostname
LONG_T=$OUT
# runs on the grown node until it leaves; then on the pilot's node
capture pilot submit --cores-per-rank 2 --retries 0 -- \
    sh -c "hostname; [ \"\$(hostname)\" = $OWN ] || sleep 600"
GROWN_T=$OUT
wait_for 20 eval '[[ $(pilot show "$GROWN_T" --json | json "j[\"state\"]") == running ]]'
is "$(pilot show "$GROWN_T" --json | json 'j["node"]')" "$NEW2" \
    "the second task runs on the grown node $NEW2"
is "$(pilot show "$LONG_T" --json | json 'j["state"]')" queued \
    "a task of --timeout 5m before it waits: $NEW2 drains within a minute"
alloc2() {
    pilot status --json | json '[a["state"] for a in j["allocs"] if a["id"] == 2][0]'
}
ok "the allocation drains 30 s before its end" \
    wait_for 60 eval '[[ $(alloc2) == draining ]]'
diag "grow to draining: $(elapsed "$T0" "$(now)")s"
capture pilot status --json
like "$(json '[n["vet"]["cordon"] for n in j["nodes"] if n["name"] == "'"$NEW2"'"][0]' \
    <<<"$OUT")" "^allocation 2 drains: its job ends at" \
    "its node is cordoned: nothing new goes there"
ok "... then ends, 15 s before its walltime" \
    wait_for 40 eval '[[ $(alloc2) == ended ]]'
diag "grow to ended: $(elapsed "$T0" "$(now)")s"
capture pilot wait "$GROWN_T" "$OWN_T" --timeout 60
is "$RC" 0 "both tasks end done"
capture pilot show "$GROWN_T" --json
is "$(json '[j["attempts"], j["node"]]' <<<"$OUT")" "[2, \"$OWN\"]" \
    "the grown node's task ran again (--retries 0 not charged), on $OWN"
capture pilot wait "$LONG_T" --timeout 60
capture pilot show "$LONG_T" --json
is "$(json '[j["state"], j["node"]]' <<<"$OUT")" "[\"done\", \"$OWN\"]" \
    "the --timeout 5m task ran on the pilot's node once it was free"
capture pilot show "$OWN_T" --json
is "$(json 'j["attempts"]' <<<"$OUT")" 1 \
    "the pilot's own node's task was not touched: 1 attempt"
like "$(cat "$DIR/logs/pilotd.log")" "agent on $NEW2 leaves: allocation 2 left" \
    "pilotd logs the node leaving"
ok "the allocation's job leaves squeue" wait_for 30 job_gone "$A2_JOB"
capture pilot status --json
is "$(json 'j["agents_up"]' <<<"$OUT")" 1 "one agent up: the pilot's own"
