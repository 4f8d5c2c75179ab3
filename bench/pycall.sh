#!/bin/bash
# bench/pycall.sh - warm Python workers against a fresh interpreter a call
# (docs/python-reference.md, "Warm workers"), on a local pilot with /usr/bin/python3:
#
#   1. N no-op calls (pilot submit --array --py-call mod:noop) through
#      the warm workers, once they are up: calls/s from the submit to
#      the last end;
#   2. N tasks 'python3 -c pass' the same way: tasks/s;
#   3. a function that imports torch: its first call (a new worker: the
#      interpreter, the import) and the next ones (warm), their wall
#      times as pilot show gives them.
#
# Usage: PILOT_BIN=build/bin bench/pycall.sh [N]   (default 500)
set -eu

N=${1:-500}
PY=/usr/bin/python3
export PATH=$PILOT_BIN:$PATH
WORK=$(mktemp -d /tmp/pilot-pycall-bench.XXXXXX)
export PILOT_HOME=$WORK/home
mkdir -m 0700 "$PILOT_HOME"
trap 'pilot down >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT
cd "$WORK"
cat >mod.py <<'EOF'
def noop():
    pass
def with_torch():
    import torch
    return torch.ones(4).sum().item()
EOF

export PILOT_ID=$(pilot up --local --wait --python $PY)
now() { date +%s.%N; }
rate() { $PY -c "import sys; print('%.1f' % ($1 / (float(sys.argv[2]) - float(sys.argv[1]))))" "$2" "$3"; }
wall() { pilot show "$1" --json | $PY -c 'import json, sys; j = json.load(sys.stdin); print("%.3f" % (j["end_time"] - j["start_time"]))'; }

# the workers up first (one a core), then the measured run
A=$(pilot submit --array 0-9 --py-call mod:noop)
pilot wait "$A" --timeout 120 >/dev/null 2>&1
t0=$(now)
A=$(pilot submit --array 0-$((N - 1)) --py-call mod:noop)
pilot wait "$A" --timeout 600 >/dev/null 2>&1
t1=$(now)
echo "warm no-op calls: $N in $($PY -c "print('%.2f' % ($t1 - $t0))") s: $(rate "$N" "$t0" "$t1") calls/s"

t0=$(now)
A=$(pilot submit --array 0-$((N - 1)) -- $PY -c pass)
pilot wait "$A" --timeout 600 >/dev/null 2>&1
t1=$(now)
echo "python3 -c pass tasks: $N in $($PY -c "print('%.2f' % ($t1 - $t0))") s: $(rate "$N" "$t0" "$t1") tasks/s"

# torch: a worker of its own key (its env), first and later calls
for i in 1 2 3 4; do
    T=$(pilot submit --env BENCH=torch --py-call mod:with_torch)
    pilot wait "$T" --timeout 300 >/dev/null 2>&1
    echo "torch call $i: $(pilot show "$T" --json | $PY -c 'import json, sys; print(json.load(sys.stdin)["state"])') in $(wall "$T") s"
done
for i in 1 2; do
    T=$(pilot submit --env BENCH=torch-task -- $PY -c 'import torch; print(torch.ones(4).sum().item())')
    pilot wait "$T" --timeout 300 >/dev/null 2>&1
    echo "torch as a task (python3 -c 'import torch; ...') $i: $(wall "$T") s"
done
