#!/bin/bash
# t0860-lost-orders.sh - a RUN or KILL lost on its way to an agent is sent
# again (issue 12).  A local pilot with two agents started by hand: 'a'
# connects to pilotd directly, 'px' through tests/tools/cutproxy.py, a
# relay that closes the connection instead of relaying a frame when told
# to.  'a' is kept busy, so that the tasks go to 'px':
#   - a RUN cut on its way: the agent reconnects and registers again; the
#     task runs once (before: it stayed assigned for ever);
#   - a KILL cut on its way: the cancel still stops the task;
#   - every RUN cut (a relay that eats large frames): after --start-timeout
#     the task is stopped there and queued again, and runs once;
#   - an idle agent hears a ping for each heartbeat it sends (2 s), not
#     one a second.
. "$(dirname "$0")/lib.sh"

plan 14

field() { pilot show "$1" --json | json "j[\"$2\"]"; }

capture pilot up --local --agents 0 --start-timeout 4 --wait
P=$OUT
[[ $RC == 0 && -n $P ]] || abort "pilot up --local --agents 0 failed: $ERR"
export PILOT_ID=$P
DIR=$(pilot_dir "$P")
AEP=$(kv "$DIR/endpoint" agent)
CTL=$WORK/cut.ctl
echo pass >"$CTL"
"$PY" "$REPO/tests/tools/cutproxy.py" "$WORK/proxy.port" "${AEP#tcp://}" \
    "$CTL" "$WORK/proxy.log" &
PROXY=$!
cleanup_hook "kill $PROXY 2>/dev/null; wait $PROXY 2>/dev/null; true"
wait_for 10 test -s "$WORK/proxy.port" || abort "the relay did not start"
pilot-agent --connect "$AEP" --keys "$DIR/keys" --node a --cores 0 \
    --log "$DIR/logs/agent-a.log" &
A=$!
cleanup_hook "kill $A 2>/dev/null; wait $A 2>/dev/null; true"
wait_for 30 agents_up 1 || abort "agent a did not join"
# 'a' busy for the whole test (its one core); then 'px' joins
BUSY=$(pilot submit -- sleep 600)
wait_for 20 eval '[[ $(field "$BUSY" state) == running ]]' \
    || abort "the task keeping a busy did not start"
pilot-agent --connect "tcp://127.0.0.1:$(<"$WORK/proxy.port")" \
    --keys "$DIR/keys" --node px --cores 1 --log "$DIR/logs/agent-px.log" &
PX=$!
cleanup_hook "kill $PX 2>/dev/null; wait $PX 2>/dev/null; true"
ok "agent px joins through the relay" wait_for 30 agents_up 2

BIG=$(printf 'x%.0s' $(seq 3000))
ARGS=()
for i in $(seq 8); do ARGS+=("$BIG"); done

# --- a lost RUN ---------------------------------------------------------------
echo "cut-once 2000" >"$CTL"
T=$(pilot submit -- sh -c "echo ran >>$WORK/runs.1" "${ARGS[@]}")
capture pilot wait "$T" --timeout 30
is "$RC,$(field "$T" state),$(field "$T" node)" "0,done,px" \
    "a RUN cut on its way: the task still runs on px and ends done"
is "$(grep -c '^cut' "$WORK/proxy.log")" 1 "... the relay cut one frame"
is "$(cat "$WORK/runs.1"),$(field "$T" attempts)" "ran,1" "... and it ran once, in one attempt"
like "$(cat "$DIR/logs/pilotd.log")" "run [0-9]+ to px .*sending its 1 ranks that have not started again" \
    "pilotd says it sent the RUN again"

# --- a lost KILL --------------------------------------------------------------
# the sizes of pilotd's frames: a KILL is larger than every ping
T=$(pilot submit -- sh -c "sleep 600; echo ran >>$WORK/runs.2")
wait_for 20 eval '[[ $(field "$T" state) == running ]]' || abort "task $T did not start"
# an idle agent's heartbeat every 2 s, pilotd's ping its answer: the last
# two frames to it are pings
sleep 6.5
PING=$(awk '$1 == "s2c" { print $2 }' "$WORK/proxy.log" | tail -n 2 | sort -n | tail -n 1)
echo "cut-once $((PING + 8))" >"$CTL"
capture pilot cancel "$T"
is "$RC" 0 "cancel of a task on px is acknowledged"
capture pilot wait "$T" --timeout 30
is "$(field "$T" state)" canceled "a KILL cut on its way (frames of $((PING + 8)) bytes or more): the task still ends canceled"
is "$(grep -c '^cut' "$WORK/proxy.log")" 2 "... the relay cut a second frame"
ok "... and its command never finished" test ! -e "$WORK/runs.2"

# --- every RUN lost: the bound on 'assigned' ----------------------------------
echo "cut-always 2000" >"$CTL"
T=$(pilot submit --retries 5 -- sh -c "echo ran >>$WORK/runs.3" "${ARGS[@]}")
ok "a task whose RUN never arrives is queued again after --start-timeout 4" \
    wait_for 30 eval '(( $(field "$T" attempts) >= 2 ))'
like "$(pilot show "$T" --json | json '[e["detail"] for e in j["events"]]')" \
    "not started within 4 s of its run to px" "... with the reason in its events"
echo pass >"$CTL"
capture pilot wait "$T" --timeout 60
is "$RC,$(field "$T" state),$(cat "$WORK/runs.3" 2>/dev/null)" "0,done,ran" \
    "once the relay passes them again, it runs once and ends done"
# --- an idle agent: pilotd's ping answers its heartbeat (every 2 s) -----------
# (issue 16: pilotd pinged every agent every second, 1,000 pings a second
# at 1,000 agents)
n0=$(grep -c '^s2c' "$WORK/proxy.log")
sleep 10
n=$(($(grep -c '^s2c' "$WORK/proxy.log") - n0))
ok "idle px heard from pilotd 4 to 7 times in 10 s, a ping each heartbeat ($n)" \
    test "$n" -ge 4 -a "$n" -le 7
lacks "... and pilotd marked no agent lost" "agent on .* lost" "$DIR/logs/pilotd.log"
capture pilot cancel "$BUSY"
capture pilot down
kill "$PROXY" 2>/dev/null
wait "$PROXY" 2>/dev/null || true
