#!/bin/bash
# t1126-pyleftover.sh - what a Python call starts and leaves running
# stays in its worker's process group while the worker lives, and goes
# with the worker: a worker that exits on its own during a call
# (os._exit), and the workers of a pilot brought down (they saw EOF and
# exited, and their groups' processes were left to init).  The call
# that kills its worker goes first: the next runs in a new worker.  On a local
# pilot, /usr/bin/python3.
. "$(dirname "$0")/lib.sh"

plan 8

CODE=$WORK/code
mkdir -p "$CODE"
# a tag in the sleeps' arguments: this test's processes alone are looked
# for (the dev cluster's nodes share this machine's pids)
TAG=$((42000 + $$ % 1000))
cat >"$CODE/leavemod.py" <<PYEOF
import os, subprocess
def leave(n):
    subprocess.Popen(["sleep", "$TAG.%s" % n])
    return "left"
def leave_and_die(n):
    subprocess.Popen(["sleep", "$TAG.%s" % n])
    os._exit(3)
PYEOF
cd "$CODE" || abort "no $CODE"
# workers: a Python worker of this test's pilots runs (its environment
# has our PILOT_HOME)
workers() {
    local pid
    for pid in $(pgrep -f _pyworker.py); do
        tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" \
            | grep -qxF "PILOT_HOME=$PILOT_HOME" && return 0
    done
    return 1
}
# sleeping N: a process 'sleep TAG.N' runs
sleeping() { pgrep -f "^sleep $TAG\\.$1\$" >/dev/null; }

pilot_up_local || abort "pilot up --local failed"
P=$PILOT_UP_ID
call() { pilot submit --parsable --python /usr/bin/python3 --py-call "$@"; }

B=$(call leavemod:leave_and_die -- 2)
capture pilot wait "$B" --timeout 60
is "$(pilot show "$B" --json | json 'j["state"]')" failed \
    "a call that starts 'sleep' and os._exit()s its worker fails"
if wait_for 10 eval '! sleeping 2'; then
    pass "... its sleep went with its worker"
else
    fail "... its sleep went with its worker"
fi

A=$(call leavemod:leave -- 1)
capture pilot wait "$A" --timeout 60
is "$RC" 0 "a call that starts 'sleep' and returns ends done" || diag "$ERR"
ok "... its sleep runs on in the worker's group" sleeping 1

ok "a worker of the pilot runs" workers
capture pilot down --pilot "$P"
is "$RC" 0 "pilot down" || diag "$ERR"
if wait_for 10 eval '! sleeping 1'; then
    pass "the returning call's sleep went with the pilot's workers"
else
    fail "the returning call's sleep went with the pilot's workers"
fi
if wait_for 10 eval '! workers'; then
    pass "no worker of the pilot is left"
else
    fail "no worker of the pilot is left"
fi
# a failure leaves none of ours behind
for pid in $(pgrep -f "^sleep $TAG\\."); do
    kill "$pid" 2>/dev/null
done
exit 0
