#!/bin/bash
# bench/profile-noop.sh - where the no-op stream's CPU goes: a local pilot
# runs 2,000 /bin/true tasks (warm-up), then 10,000 while 'perf record -g'
# samples pilotd and the agent (and the children, which inherit it).
# Prints the wall time, pilotd's and the agent's CPU a task (utime+stime
# from /proc/PID/stat), the samples by process and library, and the top
# symbols of pilotd and the agent (docs/PERFORMANCE.md, "Where the no-op
# stream's CPU goes").
#
#   bench/profile-noop.sh [N] [-- PILOT-UP-ARGS...]
#   e.g. bench/profile-noop.sh 10000 -- --output journal
# Needs perf (linux-perf) and a build (make all); uses a scratch
# PILOT_HOME under /tmp and removes it.
set -eu
N=10000
[[ $# -gt 0 && $1 != -- ]] && { N=$1; shift; }
[[ $# -gt 0 && $1 == -- ]] && shift
[[ $N =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [N] [-- PILOT-UP-ARGS...]" >&2; exit 2; }
command -v perf >/dev/null || { echo "$0: perf not found (apt-get install linux-perf)" >&2; exit 1; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${PILOT_BIN:-$ROOT/build/bin}
[[ -x $BIN/pilot ]] || { echo "$0: no $BIN/pilot: run make all" >&2; exit 1; }
SCRATCH=$(mktemp -d /tmp/pilot-prof.XXXXXX)
export PATH=$BIN:$PATH PILOT_HOME=$SCRATCH/home
mkdir -m 0700 "$PILOT_HOME"
trap 'pilot down >/dev/null 2>&1 || true; rm -rf "$SCRATCH"' EXIT
ID=$(pilot up --local --wait "$@" 2>/dev/null | grep -o '^p[0-9]*$' | head -n1)
[[ -n $ID ]] || { echo "$0: pilot up failed" >&2; exit 1; }
export PILOT_ID=$ID
PD=$(awk '$1 == "pid" { print $2 }' "$PILOT_HOME/pilots/$ID/endpoint")
AG=$(pgrep -f "pilot-agent --local .*$PILOT_HOME" | head -n1)
echo "pilot $ID: pilotd $PD, agent $AG, up args: ${*:-none}"
pilot submit --array 1-2000 -- /bin/true >/dev/null
pilot wait --all >/dev/null 2>&1
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
p0=$(cpu "$PD"); a0=$(cpu "$AG")
perf record -q -F 1999 -g -p "$PD,$AG" -o "$SCRATCH/perf.data" 2>/dev/null &
PERF=$!
sleep 0.5
t0=$(date +%s.%N)
pilot submit --array 1-"$N" -- /bin/true >/dev/null
pilot wait --all >/dev/null 2>&1
t1=$(date +%s.%N)
kill -INT "$PERF"; wait "$PERF" || true
p1=$(cpu "$PD"); a1=$(cpu "$AG")
awk -v n="$N" -v t0="$t0" -v t1="$t1" -v p="$((p1 - p0))" -v a="$((a1 - a0))" -v hz="$HZ" 'BEGIN {
    printf "%d tasks in %.1f s (%.0f tasks/s); CPU a task: pilotd %.0f us, agent %.0f us\n",
           n, t1 - t0, n / (t1 - t0), p / hz / n * 1e6, a / hz / n * 1e6 }'
report() { perf report -i "$SCRATCH/perf.data" --no-children --stdio -g none "$@" 2>/dev/null | grep -v '^#' | grep -v '^$'; }
echo "== samples by process"
report --sort comm | head -n 8
echo "== by process and library"
report --sort comm,dso | head -n 16
for c in pilotd pilot-agent; do
    echo "== $c: top symbols (self)"
    report --comm "$c" --sort sym | head -n 20
done
