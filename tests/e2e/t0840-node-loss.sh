#!/bin/bash
# t0840-node-loss.sh - under load, one agent is killed with SIGKILL and one
# node is cut off the network (ip link down in its namespace): their tasks
# go back to the queue and finish on the other nodes, pilotd starts another
# agent on the first node, and the cut-off agent, once the link is back,
# registers again and its given-up tasks are stopped.  A task with no
# retries left that loses a node ends failed (node-lost), and its ranks on
# the nodes that are still up are stopped.  The pilot keeps going: every
# other task ends done.
. "$(dirname "$0")/lib.sh"

plan 14

RUNS=$WORK/runs
GANG_PIDS=$WORK/gang
NTASKS=160
t0=$(now)
P=$(run_timeout 180 pilot up --nodes 4 --time 15:00 --lost-after 5 --wait \
    --wait-timeout 120 2>"$WORK/up.err") || abort "pilot up failed: $(<"$WORK/up.err")"
DIR=$(pilot_dir "$P")
diag "pilot up --nodes 4 --lost-after 5: $(elapsed "$t0" "$(now)")s"

field() { pilot show "$1" --json | json "j[\"$2\"]"; }

# one long rank on every node, no retries: each rank writes its node and
# its pid (exec: the pid is the sleeping process's)
capture pilot submit --name gang --nodes 4 --ranks-per-node 1 --retries 0 -- \
    sh -c "echo \$PILOT_NODE \$\$ >>$GANG_PIDS; exec sleep 600"
GANG=$OUT
ok "a 4-rank task with --retries 0 runs one rank on each node" \
    wait_for 30 eval '[[ $(cut -d" " -f1 "$GANG_PIDS" 2>/dev/null | sort -u | wc -l) == 4 ]]'
gang_pid() { awk -v n="$1" '$1 == n { print $2 }' "$GANG_PIDS"; }

# tasks of 1 s; each appends its id when it has finished
for i in $(seq "$NTASKS"); do
    echo "sleep 1; echo \$PILOT_TASK_ID >>$RUNS"
done | xargs -P4 -I{} pilot submit -- sh -c {} >"$WORK/ids" 2>"$WORK/submit.err"
is "$(grep -cE '^[0-9]+$' "$WORK/ids")" "$NTASKS" "$NTASKS tasks submitted"

node_pid() { # the agent's pid on node $1, from pilotd
    pilot status --json | json "[n['pid'] for n in j['nodes'] if n['name'] == '$1'][0]"
}
node_state() {
    pilot status --json | json "[n['state'] for n in j['nodes'] if n['name'] == '$1'][0]"
}
PID2=$(node_pid n2)
like "$PID2" '^[0-9]+$' "status gives n2's agent pid ($PID2)"
kill -9 "$PID2"
env -u PILOT_HOME -u PILOT_BIN "$REPO/scripts/dev-cluster.sh" node-down 3 >"$WORK/down.out" 2>&1
t_cut=$(now)
# From pilotd's log, not from two status polls: another agent registers on
# n2 a second or two after n2 is marked lost, so both may never read
# "lost" at the same poll.
lost_logged() { grep -q "agent on $1 lost" "$DIR/logs/pilotd.log"; }
ok "n2 (agent killed) and n3 (cut off) are marked lost within 20 s" \
    wait_for 20 eval 'lost_logged n2 && lost_logged n3'
diag "both lost after $(elapsed "$t_cut" "$(now)")s"
ok "another agent registers on n2 within 30 s" \
    wait_for 30 eval '[[ $(node_state n2) == up && $(node_pid n2) != "$PID2" ]]'
like "$(cat "$DIR/logs/pilotd.log")" 'started another agent on n2' \
    "pilotd says it started another agent on n2"
sleep 3
env -u PILOT_HOME -u PILOT_BIN "$REPO/scripts/dev-cluster.sh" node-up 3 >"$WORK/up.out" 2>&1
ok "n3's agent registers again within 30 s of its link coming back" \
    wait_for 30 eval '[[ $(node_state n3) == up ]]'

gang_gone() { ! alive "$(gang_pid "$1")"; }
ok "the gang's rank on n3 is stopped within 15 s of its agent's return" \
    wait_for 15 gang_gone n3
like "$(field "$GANG" state) $(field "$GANG" reason)" '^failed rank [0-3]: node-lost$' \
    "the task with no retries left ends failed, reason 'rank N: node-lost'"
ok "its ranks on n1 and n4 are stopped" \
    wait_for 15 eval 'gang_gone n1 && gang_gone n4'
diag "its rank on n2 (the agent killed under it): $(gang_gone n2 && echo gone || echo 'still running')"

mapfile -t IDS <"$WORK/ids"
CAPTURE_TIMEOUT=200 capture pilot wait "${IDS[@]}" --timeout 180
is "$RC" 0 "every other task ends done"
pilot ls --json --limit 1000 >"$WORK/ls.json"
"$PY" - "$WORK/ids" "$RUNS" "$WORK/ls.json" >"$WORK/res.json" <<'EOF'
import collections, json, sys
ids = [int(x) for x in open(sys.argv[1]).read().split()]
runs = collections.Counter(int(x) for x in open(sys.argv[2]).read().split())
t = {x["id"]: x for x in json.load(open(sys.argv[3]))}
print(json.dumps({
    "never": [i for i in ids if runs[i] == 0][:10],
    "twice": [i for i in ids if runs[i] > 1][:10],
    "requeued": sum(1 for i in ids if t[i].get("attempts", 1) > 1),
    "lost_nodes": sorted(set(e for i in ids for e in [t[i].get("node")]
                             if t[i].get("attempts", 1) > 1)),
}))
EOF
R=$(<"$WORK/res.json")
is "$(json 'j["never"]' <<<"$R")" "[]" "every task finished at least once"
ok "tasks of the lost nodes were requeued ($(json 'j["requeued"]' <<<"$R"))" \
    test "$(json 'j["requeued"]' <<<"$R")" -gt 0
diag "ran twice (finished on the cut-off node before it was given up): $(json 'j["twice"]' <<<"$R")"
capture pilot status --json
is "$(json 'j["agents_up"]' <<<"$OUT")" 4 "4 agents up at the end"
