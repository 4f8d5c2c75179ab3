#!/usr/bin/env bash
# scripts/demo.sh - the main job: a 4-node pilot on the dev cluster runs a
# few hundred tasks, then prints where they ran and how long it took.
# Run through `make demo`, which installs, builds and starts the cluster.
set -euo pipefail

: "${PILOT_BIN:?set PILOT_BIN to the directory of pilot, pilotd, pilot-agent}"
export PATH=$PILOT_BIN:$PATH
NODES=${DEMO_NODES:-4}
TASKS=${DEMO_TASKS:-400}
export PILOT_HOME=${PILOT_HOME:-/var/tmp/pilot-demo}
mkdir -p "$PILOT_HOME"

ms() { date +%s%3N; }

echo "== pilot up --nodes $NODES (PILOT_HOME=$PILOT_HOME)"
t0=$(ms)
pid=$(pilot up --nodes "$NODES" --time 20:00 --wait --wait-timeout 180)
t1=$(ms)
export PILOT_ID=$pid
trap 'pilot down >/dev/null 2>&1 || true' EXIT
echo "pilot $pid: $NODES agents registered in $(( t1 - t0 )) ms"

echo "== submitting $TASKS tasks"
work=$(mktemp -d /var/tmp/pilot-demo-work.XXXXXX)
t2=$(ms)
seq 1 "$TASKS" | xargs -P 4 -I{} pilot submit --name "square-{}" -- \
    sh -c 'n={}; echo "$(hostname) task $PILOT_TASK_ID: $n^2 = $((n * n))"' \
    > "$work/ids"
t3=$(ms)
echo "submitted $(wc -l < "$work/ids") tasks in $(( t3 - t2 )) ms"

echo "== pilot wait --all"
pilot wait --all --timeout 600
t4=$(ms)
echo "all $TASKS tasks finished $(( t4 - t2 )) ms after the first submit"

echo "== tasks per node"
pilot ls --json | /usr/bin/python3 -c '
import json, sys, collections
tasks = json.load(sys.stdin)
per = collections.Counter(t["node"] for t in tasks)
states = collections.Counter(t["state"] for t in tasks)
for node in sorted(per):
    print(f"  {node:6} {per[node]:5d} tasks")
print("  states:", dict(states))
walls = sorted(t["wall"] for t in tasks if t["wall"] is not None)
if walls:
    print(f"  task wall time: median {walls[len(walls)//2]*1000:.1f} ms, max {walls[-1]*1000:.1f} ms")
'
echo "== a sample of the output"
first=$(head -1 "$work/ids")
pilot logs "$first"
echo "== pilot status"
pilot status
rm -rf "$work"
echo "== pilot down"
pilot down
trap - EXIT
