#!/bin/bash
# t0870-agent-kill.sh - an agent killed with SIGKILL leaves its tasks
# running; the next agent on the node kills them before it registers, so
# that the task pilotd runs again never runs beside its first copy
# (issue 12).  Before: the first copy went on, the second started on the
# same core, and the task ran to its end twice.  Local pilot, whose
# pilotd starts the agent again 5 s after it died.
. "$(dirname "$0")/lib.sh"

plan 8

field() { pilot show "$1" --json | json "j[\"$2\"]"; }
agent_pid() { pgrep -f "pilot-agent --local .*--keys $DIR/keys" | head -n1; }

pilot_up_local || abort "pilot up --local --wait failed"
export PILOT_ID=$PILOT_UP_ID
DIR=$(pilot_dir "$PILOT_ID")
RUNS=$WORK/runs

# a task of 8 s that leaves a process in its own session; it says when
# it ends, so that a second copy that runs to its end shows
T=$(pilot submit -- sh -c "setsid sleep 8871 & sleep 8; echo \$PILOT_TASK_ID >>$RUNS")
wait_for 20 eval '[[ $(field "$T" state) == running ]]' || abort "task $T did not start"
wait_for 10 pgrep -f 'sleep 8871' >/dev/null || abort "the task's setsid child did not start"
CHILD=$(pgrep -f '^sleep 8871')
OLD=$(agent_pid)
[[ -n $OLD ]] || abort "no agent process found"
kill -9 "$OLD"
ok "a new agent starts after the old one was killed" \
    wait_for 30 eval '[[ -n $(agent_pid) && $(agent_pid) != "$OLD" ]]'
ok "... and registers" wait_for 30 agents_up 1
capture pilot wait "$T" --timeout 60
is "$RC,$(field "$T" state),$(field "$T" attempts)" "0,done,2" \
    "the task runs again and ends done, in its second attempt"
is "$(cat "$RUNS")" "$T" "... it ran to its end once: the first copy was killed"
like "$(cat "$DIR"/logs/agent*.log)" "killed [0-9]+ processes of 1 tasks that a dead agent of this pilot left on this node" \
    "the new agent says what it killed"
nok "... the first copy's setsid child too (pid $CHILD)" alive "$CHILD"

# a task's process whose agent lives is not touched by another agent of
# the pilot on the node (one started by hand, told by pilotd to exit)
T2=$(pilot submit -- sleep 8872)
wait_for 20 eval '[[ $(field "$T2" state) == running ]]' || abort "task $T2 did not start"
pilot-agent --connect "$(kv "$DIR/endpoint" agent)" --keys "$DIR/keys" \
    --log "$DIR/logs/agent-second.log" &
SECOND=$!
cleanup_hook "kill $SECOND 2>/dev/null; wait $SECOND 2>/dev/null; true"
wait_for 20 grep -qs "registered\|exit" "$DIR/logs/agent-second.log"
sleep 1
is "$(field "$T2" state),$(pgrep -fc 'sleep 8872')" "running,1" \
    "a second agent on the node leaves the tasks of the live one alone"
capture pilot cancel "$T2"
capture pilot wait "$T2" --timeout 30
is "$(field "$T2" state)" canceled "... which are canceled as usual"
