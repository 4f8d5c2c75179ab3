#!/bin/bash
# t1126-pyleftover.sh - what a Python call starts and leaves running
# stays in its worker's process group while the worker lives, and goes
# with the worker: a worker that exits on its own during a call
# (os._exit), and the workers of a pilot brought down (they saw EOF and
# exited, and their groups' processes were left to init).  On a local
# pilot, /usr/bin/python3.
. "$(dirname "$0")/lib.sh"

plan 7

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
# alive N: a process 'sleep TAG.N' runs
alive() { pgrep -f "^sleep $TAG\\.$1\$" >/dev/null; }

pilot_up_local || abort "pilot up --local failed"
P=$PILOT_UP_ID
call() { pilot submit --parsable --python /usr/bin/python3 --py-call "$@"; }

A=$(call leavemod:leave -- 1)
capture pilot wait "$A" --timeout 60
is "$RC" 0 "a call that starts 'sleep' and returns ends done" || diag "$ERR"
ok "... its sleep runs on in the worker's group" alive 1

B=$(call leavemod:leave_and_die -- 2)
capture pilot wait "$B" --timeout 60
is "$(pilot show "$B" --json | json 'j["state"]')" failed \
    "a call that starts 'sleep' and os._exit()s its worker fails"
if wait_for 10 eval '! alive 2'; then
    pass "... its sleep went with its worker"
else
    fail "... its sleep went with its worker"
fi

capture pilot down --pilot "$P"
is "$RC" 0 "pilot down" || diag "$ERR"
if wait_for 10 eval '! alive 1'; then
    pass "the first call's sleep went with the pilot's workers"
else
    fail "the first call's sleep went with the pilot's workers"
fi
if wait_for 10 eval '! pgrep -f "_pyworker.py" -a | grep -q "$WORK"'; then
    pass "no worker of the pilot is left"
else
    fail "no worker of the pilot is left"
fi
pkill -f "^sleep $TAG\\." 2>/dev/null
