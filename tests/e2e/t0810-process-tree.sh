#!/bin/bash
# t0810-process-tree.sh - a timeout, a cancel and 'pilot down' leave no
# process of the task behind, not even one that left its process group
# (setsid, a double fork), nor one whose environment is over 64 KiB; a
# task that ends leaves no background child, in its group or not.  Local pilot:
# the process table is this machine's.
. "$(dirname "$0")/lib.sh"

plan 18

pilot_up_local || abort "pilot up --local --wait failed"

# gone MARK: no process whose command line holds MARK within 10 s
gone() {
    for _ in $(seq 50); do
        pgrep -f "$1" >/dev/null || return 0
        sleep 0.2
    done
    diag "left: $(pgrep -af "$1")"
    return 1
}
# started MARK...: a process whose command line holds each MARK within 20 s
started() {
    local m
    for m in "$@"; do
        wait_for 20 pgrep -f "$m" >/dev/null || return 1
    done
}

# timeout: the group and an escaped session
capture pilot submit --timeout 3 -- sh -c 'setsid sleep 7771 & sleep 7772'
T=$OUT
ok "a task with a child that calls setsid starts both" \
    started 'sleep 7771' 'sleep 7772'
capture pilot wait "$T" --timeout 30
is "$(pilot ls --json "$T" | json 'j[0]["state"]')" timeout "--timeout 3: the task ends timeout"
ok "... and neither its child nor the one that called setsid is left" gone 'sleep 777[12]'

# cancel: a double fork into a new session
capture pilot submit -- sh -c '(setsid sh -c "sleep 7773" &); sleep 7774'
C=$OUT
ok "a task that double-forks into a new session starts" \
    started 'sleep 7773' 'sleep 7774'
capture pilot cancel "$C"
capture pilot wait "$C" --timeout 30
is "$(pilot ls --json "$C" | json 'j[0]["state"]')" canceled "cancel: the task ends canceled"
ok "... and its double-forked daemon is gone too" gone 'sleep 777[34]'

# cancel: an escaped process whose environment is over 64 KiB (the task's
# key was read from the first 64 KiB only, and placed last)
BIG=$(head -c 20000 /dev/zero | tr '\0' x)
capture pilot submit --env "B1=$BIG" --env "B2=$BIG" --env "B3=$BIG" --env "B4=$BIG" \
    -- sh -c '(setsid sh -c "sleep 7778" &); sleep 7779'
C=$OUT
ok "a task with 80 KB of environment double-forks and runs" \
    started 'sleep 7778' 'sleep 7779'
capture pilot cancel "$C"
capture pilot wait "$C" --timeout 30
ok "... cancel leaves neither of its processes" gone 'sleep 777[89]'

# a task that exits 0 with a background child still in its group
capture pilot submit -- sh -c 'sleep 7775 & echo $! >'"$WORK"'/bg.pid; sleep 0.5; exit 0'
E=$OUT
capture pilot wait "$E" --timeout 30
is "$RC" 0 "a task that leaves a background child ends done"
like "$(cat "$WORK/bg.pid" 2>/dev/null)" '^[0-9]+$' "... after it started its child"
ok "... and the child is killed with it" gone 'sleep 7775'

# a task that exits 0 and leaves a process in its own session: that one
# comes to the agent (its subreaper), which kills it with the task
capture pilot submit -- sh -c 'setsid sleep 7780 & sleep 0.5; exit 0'
E=$OUT
capture pilot wait "$E" --timeout 30
is "$RC" 0 "a task that leaves a child in another session ends done"
ok "... and that child is killed with it" gone 'sleep 7780'

# pilot down while tasks run, one of them escaped
capture pilot submit -- sh -c 'setsid sleep 7776 & sleep 7777'
ok "a task with an escaped child runs before pilot down" \
    started 'sleep 7776' 'sleep 7777'
ok "... beside this pilot's agent" started "pilot-agent.*$PILOT_HOME"
capture pilot down
is "$RC" 0 "pilot down exits 0 while a task runs"
ok "... and leaves none of its processes" gone 'sleep 777[67]'
ok "no pilot-agent is left for this pilot" gone "pilot-agent.*$PILOT_HOME"
