#!/bin/bash
# t0850-clock.sh - time on the monotonic clock (issue 12): a step of the
# wall clock (libfaketime, 5 minutes ahead under a running pilotd) and a
# stall of pilotd's loop (SIGSTOP for 8 s, longer than --lost-after) mark
# no agent lost and rerun no task; after the stall pilotd says so.
# Local pilots, --lost-after 3.
. "$(dirname "$0")/lib.sh"

plan 8

FAKETIME_LIB=$(ls /usr/lib/*/faketime/libfaketime.so.1 2>/dev/null | head -n1)
[[ -n $FAKETIME_LIB ]] || abort "libfaketime is missing (scripts/install-deps.sh installs it)"
field() { pilot show "$1" --json | json "j[\"$2\"]"; }

# --- a step of the wall clock ---------------------------------------------
FT=$WORK/faketime
echo "+0" >"$FT"
# (under make asan, ASan must be told that its runtime is not the first
# library: libfaketime is preloaded before it)
CAPTURE_TIMEOUT=60 capture env LD_PRELOAD="$FAKETIME_LIB" FAKETIME_TIMESTAMP_FILE="$FT" \
    FAKETIME_NO_CACHE=1 FAKETIME_DONT_FAKE_MONOTONIC=1 \
    ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0" \
    pilot up --local --lost-after 3 --wait
P=$OUT
[[ $RC == 0 && -n $P ]] || abort "pilot up under libfaketime failed: $ERR"
DIR=$(pilot_dir "$P")
T=$(pilot submit --pilot "$P" -- sleep 8)
ok "a task runs" wait_for 20 eval '[[ $(field "$T" state) == running ]]'
echo "+300" >"$FT" # pilotd's (and its agent's) wall clock: 5 minutes on
capture pilot wait --pilot "$P" "$T" --timeout 30
is "$RC $(field "$T" attempts)" "0 1" \
    "the wall clock 5 minutes on: the task ends done, run once"
lacks "... and pilotd marked no agent lost" "agent on .* lost" "$DIR/logs/pilotd.log"
capture pilot down --pilot "$P"

# --- a stall of pilotd's loop -------------------------------------------------
capture pilot up --local --lost-after 3 --wait
P=$OUT
DIR=$(pilot_dir "$P")
PID=$(kv "$DIR/endpoint" pid)
T=$(pilot submit --pilot "$P" -- sleep 14)
ok "a task runs" wait_for 20 eval '[[ $(field "$T" state) == running ]]'
kill -STOP "$PID"
sleep 8
kill -CONT "$PID"
capture pilot wait --pilot "$P" "$T" --timeout 40
is "$RC $(field "$T" attempts)" "0 1" \
    "pilotd stopped 8 s (--lost-after 3): the task ends done, run once"
lacks "... and pilotd marked no agent lost" "agent on .* lost" "$DIR/logs/pilotd.log"
ok "... and it says its loop stalled" \
    grep -q "the loop stalled for [0-9.]* s: no agent is judged lost" "$DIR/logs/pilotd.log"
capture pilot down --pilot "$P"
is "$RC" 0 "pilot down"
