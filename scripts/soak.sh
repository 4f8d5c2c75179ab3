#!/bin/bash
# scripts/soak.sh - kill pilotd and agents with SIGKILL, again and again,
# under a stream of tasks, then count what ran (make soak; not in make
# check: about 15 minutes here).
#
#   scripts/soak.sh [--pilotd-kills N] [--agent-kills M] [--nodes K]
#                   [--json FILE]
#
# A Slurm pilot of K nodes (2) on the dev cluster (scripts/dev-cluster.sh
# start) with --lost-after 5.  A submitter sends one array of 10 tasks at
# a time while the soak runs; each task sleeps 0.2-1.2 s and then appends
# its id to a file (so a task counts as run when it ran to its end);
# fewer than 40 wait at any time.  Meanwhile N times (100) pilotd is killed (the batch script starts it
# again), and M times (50) a random agent; each kill waits for the pilot
# to answer again.  Then the soak waits for every acknowledged task to
# end and prints the counts: acknowledged, done, ran once, ran twice or
# more, never ran (lost), not done.  Exit 0 when every acknowledged task
# ended done and ran exactly once.
set -u

PILOTD_KILLS=100
AGENT_KILLS=50
NODES=2
JSON=
while (($#)); do
    case $1 in
    --pilotd-kills) PILOTD_KILLS=$2; shift 2 ;;
    --agent-kills) AGENT_KILLS=$2; shift 2 ;;
    --nodes) NODES=$2; shift 2 ;;
    --json) JSON=$2; shift 2 ;;
    -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "soak: unknown argument '$1' (--help)" >&2; exit 2 ;;
    esac
done

REPO=$(cd "$(dirname "$0")/.." && pwd)
PILOT_BIN=${PILOT_BIN:-$REPO/build/bin}
export PATH=$PILOT_BIN:$PATH
PY=/usr/bin/python3
WORK=$(mktemp -d /tmp/pilot-soak.XXXXXX)
export PILOT_HOME=$WORK/home
mkdir -p "$PILOT_HOME"
chmod 700 "$PILOT_HOME"
RUNS=$WORK/runs
ACKED=$WORK/acked
: >"$RUNS"
: >"$ACKED"
log() { printf '%s soak: %s\n' "$(date +%T)" "$*" >&2; }

scripts_status() { "$REPO/scripts/dev-cluster.sh" status >/dev/null 2>&1; }
scripts_status || "$REPO/scripts/dev-cluster.sh" start >/dev/null ||
    { log "no dev cluster"; exit 1; }

P=$(pilot up --nodes "$NODES" --time 2:00:00 --lost-after 5 --wait \
    --wait-timeout 180) || { log "pilot up failed"; exit 1; }
export PILOT_ID=$P
DIR=$PILOT_HOME/pilots/$P
log "pilot $P up ($DIR)"
trap 'kill $SUBMITTER 2>/dev/null; pilot down >/dev/null 2>&1' EXIT

kv() { awk -v k="$2" '$1 == k { print $2; exit }' "$1" 2>/dev/null; }
answers() { timeout 10 pilot status --json >/dev/null 2>&1; }
# the agents of this pilot (not the srun commands that started them)
agent_pids() { pgrep -f "^[^ ]*pilot-agent .*--dir $DIR"; }

# the stream: arrays of 10 (each acknowledged by its array's id), while
# fewer than 40 tasks wait: the counts come once the queue is empty
submitter() {
    while :; do
        q=$(timeout 10 pilot status --json 2>/dev/null |
            $PY -c 'import json,sys; print(json.load(sys.stdin)["tasks"]["queued"])' 2>/dev/null)
        if [[ $q =~ ^[0-9]+$ ]] && ((q >= 40)); then
            sleep 0.5
            continue
        fi
        out=$(timeout 30 pilot submit --array 1-10 -- sh -c \
              "sleep 0.\$((RANDOM % 10 + 2)); echo \$PILOT_TASK_ID >>$RUNS" \
              2>/dev/null) && echo "$out" >>"$ACKED"
        sleep 0.3
    done
}
submitter &
SUBMITTER=$!

total=$((PILOTD_KILLS + AGENT_KILLS))
pk=0
ak=0
for ((i = 0; i < total; i++)); do
    sleep "$($PY -c 'import random; print(random.uniform(1, 4))')"
    # interleaved: an agent kill every (total / AGENT_KILLS) cycles
    if ((ak < AGENT_KILLS && (pk >= PILOTD_KILLS
          || i * AGENT_KILLS / total >= ak))); then
        mapfile -t agents < <(agent_pids)
        ((${#agents[@]})) || { log "no agent to kill"; sleep 2; continue; }
        victim=${agents[RANDOM % ${#agents[@]}]}
        kill -9 "$victim" 2>/dev/null && ak=$((ak + 1))
        log "agent kill $ak/$AGENT_KILLS (pid $victim)"
        # its node is given up after --lost-after, then another agent
        # starts there: wait until every node is up again
        for _ in $(seq 120); do
            up=$(timeout 10 pilot status --json 2>/dev/null |
                 $PY -c 'import json,sys; print(json.load(sys.stdin)["agents_up"])' 2>/dev/null)
            mapfile -t now < <(agent_pids)
            [[ $up == "$NODES" && ${#now[@]} == "$NODES" ]] \
                && ! printf '%s\n' "${now[@]}" | grep -qx "$victim" && break
            sleep 0.5
        done
    else
        pid=$(kv "$DIR/endpoint" pid)
        [[ -n $pid ]] || { sleep 1; continue; }
        kill -9 "$pid" 2>/dev/null && pk=$((pk + 1))
        log "pilotd kill $pk/$PILOTD_KILLS (pid $pid)"
        for _ in $(seq 120); do
            new=$(kv "$DIR/endpoint" pid)
            [[ -n $new && $new != "$pid" ]] && answers && break
            sleep 0.5
        done
    fi
done
kill $SUBMITTER 2>/dev/null
wait $SUBMITTER 2>/dev/null
log "kills done ($pk of pilotd, $ak of agents); waiting for the tasks"
mapfile -t ids <"$ACKED"
timeout 1800 pilot wait --all --timeout 1700 >/dev/null 2>&1
pilot ls --json --limit 100000 >"$WORK/ls.json" 2>/dev/null
"$PY" - "$ACKED" "$RUNS" "$WORK/ls.json" "$pk" "$ak" "${JSON:-/dev/null}" <<'EOF'
import collections, json, sys
# 'pilot submit --array' acknowledges with the array's id: its elements
arrays = set(int(x) for x in open(sys.argv[1]).read().split())
runs = collections.Counter(int(x) for x in open(sys.argv[2]).read().split())
tasks = {t["id"]: t for t in json.load(open(sys.argv[3]))}
acked = sorted(i for i, t in tasks.items()
               if (t.get("array_id") or i) in arrays)
r = {
    "pilotd_kills": int(sys.argv[4]), "agent_kills": int(sys.argv[5]),
    "arrays_acknowledged": len(arrays),
    "acknowledged": len(acked),
    "unacknowledged_stored": len(tasks) - len(acked),
    "second_attempts": sum(1 for i in acked if tasks[i]["attempts"] > 1),
    "done": sum(1 for i in acked if tasks.get(i, {}).get("state") == "done"),
    "ran_once": sum(1 for i in acked if runs[i] == 1),
    "ran_twice_or_more": sum(1 for i in acked if runs[i] >= 2),
    "never_ran": sum(1 for i in acked if runs[i] == 0),
    "not_done": sorted(i for i in acked
                       if tasks.get(i, {}).get("state") != "done")[:20],
    "twice": sorted(i for i in acked if runs[i] >= 2)[:20],
}
print(json.dumps(r, indent=1))
json.dump(r, open(sys.argv[6], "w"))
sys.exit(0 if r["ran_once"] == r["acknowledged"] == r["done"]
         == 10 * len(arrays) else 1)
EOF
rc=$?
log "files in $WORK"
exit $rc
