#!/bin/bash
# t0200-errors.sh - bad input gets one clear error line and changes
# nothing: no pilot, unknown task ids, tasks larger than any node, empty
# commands, bad counts, a stale pilot whose Slurm job has ended.
. "$(dirname "$0")/lib.sh"

plan 55

# --- no pilot at all ---------------------------------------------------------
capture pilot submit -- true
one_error_line "no pilot: submit fails with one line" 'no pilot'
capture pilot status
one_error_line "no pilot: status fails with one line" 'no pilot'

# --- a pilot Slurm can never start: more nodes than the cluster has ---------
capture pilot up --nodes 5 --time 5:00 --wait
BIGP=$OUT
ok "up --nodes 5 on 4 nodes fails at once (exit 1) with Slurm's reason" \
    eval '[[ $RC == 1 && $ERR == *"pilot: error: "*PartitionNodeLimit* ]]' \
    || diag "exit $RC, stderr: $ERR"
BIGJOB=$(kv "$(pilot_dir "$BIGP")/info" job)
ok "... and its Slurm job $BIGJOB is canceled, not left pending" \
    wait_for 10 job_gone "$BIGJOB"
capture pilot status
one_error_line "... and status says it never started" 'never started'

# --- a 1-node pilot with one task ----------------------------------------
pilot_up 1 || abort "pilot up --nodes 1 --wait failed"
P=$PILOT_UP_ID
like "$P" '^p[0-9]+$' "pilot up --nodes 1 --wait prints a pilot id ($P)"
diag "pilot up --nodes 1: ${PILOT_UP_SECS}s"
PDIR=$(pilot_dir "$P")
capture pilot submit -- true
FIRST=$OUT
capture pilot wait "$FIRST" --timeout 30
is "$RC" 0 "a first task is done"

ntasks() {
    pilot status --json 2>/dev/null | json 'j["tasks"]["total"]' 2>/dev/null
}
NT=$(ntasks)
is "$NT" 1 "status counts 1 task"
unchanged() {
    is "$(ntasks)" "$NT" "... and the task count is unchanged ($NT)"
}

# --- unknown task ids ------------------------------------------------------
BAD=987654
capture pilot show $BAD
one_error_line "show of an unknown id: one error line naming it" "$BAD"
capture pilot cancel $BAD
one_error_line "cancel of an unknown id: one error line naming it" "$BAD"
capture pilot logs $BAD
one_error_line "logs of an unknown id: one error line naming it" "$BAD"
capture pilot wait $BAD --timeout 10
# wait keeps 1 for "a task failed": its errors exit 3 (pilot wait --help)
one_error_line "wait for an unknown id: one error line naming it, exit 3" \
    "$BAD" 3
unchanged

# an unknown id among good ones fails the whole cancel, and nothing changes
capture pilot submit -- sleep 60
SLEEPER=$OUT
wait_for 15 eval '[[ $(pilot show "$SLEEPER" --json 2>/dev/null | json "j[\"state\"]" 2>/dev/null) == running ]]'
capture pilot cancel "$SLEEPER" $BAD
one_error_line "cancel of a running task and an unknown id: one error line naming the unknown one" "$BAD"
capture pilot show "$SLEEPER" --json
is "$(json 'j["state"]' <<<"$OUT")" running "... and the running task is not canceled"
capture pilot cancel "$SLEEPER"
is "$RC" 0 "cancel of it alone works"
ok "... and it is canceled within 10 s" wait_for 10 eval \
    '[[ $(pilot show "$SLEEPER" --json 2>/dev/null | json "j[\"state\"]" 2>/dev/null) == canceled ]]'
NT=$((NT + 1))

# --- tasks larger than any node ----------------------------------------------
capture pilot submit --cores-per-rank 64 -- true
one_error_line "submit --cores-per-rank 64: one error line about cores" 'core'
unchanged
capture pilot submit --gpus-per-rank 9 -- true
one_error_line "submit --gpus-per-rank 9: one error line about GPUs" '[Gg][Pp][Uu]'
unchanged
BIGARGS=()
for _ in $(seq 13); do BIGARGS+=("$(head -c 131000 /dev/zero | tr '\0' x)"); done
capture pilot submit -- echo "${BIGARGS[@]}"
one_error_line "a command of 1.7 MB (13 x 131,000 bytes): one error line giving the limit" \
    'as execve\(\) counts them; at most 1572864 '
unchanged
capture pilot submit -- $(seq 5000)
one_error_line "5,000 arguments: one error line giving the limit" '4096'
unchanged

# --- usage errors ------------------------------------------------------------------
capture pilot submit --
usage_error "submit -- (no command): usage error" 'command'
capture pilot submit
usage_error "submit (no command, no --): usage error" 'command'
capture pilot submit -- ''
usage_error "submit -- '' (an empty string as command): usage error" 'command|empty'
unchanged
capture pilot submit --cores-per-rank abc -- true
usage_error "submit --cores-per-rank abc: usage error" 'cores-per-rank'
capture pilot submit --cores-per-rank 0 -- true
usage_error "submit --cores-per-rank 0: usage error" 'cores-per-rank'
capture pilot submit --cores-per-rank -1 -- true
usage_error "submit --cores-per-rank -1: usage error" 'cores-per-rank'
capture pilot submit --gpus-per-rank x -- true
usage_error "submit --gpus-per-rank x: usage error" 'gpus-per-rank'
capture pilot submit --cores-per-rank 1x -- true
usage_error "submit --cores-per-rank 1x: usage error" 'cores-per-rank'
capture pilot submit --timeout soon -- true
usage_error "submit --timeout soon: usage error" 'timeout'
unchanged
capture pilot show abc
usage_error "show abc: usage error" 'abc'
capture pilot cancel 0
usage_error "cancel 0: usage error" '0'
capture pilot ls --limit zero
usage_error "ls --limit zero: usage error" 'limit'
capture pilot frobnicate
usage_error "an unknown command: usage error" 'frobnicate'
unchanged

# --- a stale pilot: its job ended under pilotd ---------------------------------------
JOB=$(pilot status --json 2>/dev/null | json 'j["job"]' 2>/dev/null)
[[ $JOB =~ ^[0-9]+$ ]] || JOB=$(kv "$PDIR/info" job)
like "$JOB" '^[1-9][0-9]*$' "status gives the pilot's Slurm job id ($JOB)"
PILOTD_PID=$(kv "$PDIR/endpoint" pid)
like "$PILOTD_PID" '^[1-9][0-9]*$' "the endpoint file gives pilotd's pid ($PILOTD_PID)"
# N.B. not 'scancel': Slurm sends SIGTERM first (even for --signal=KILL,
# which scancel takes as a plain cancel) and pilotd cleans up.  The batch
# script restarts a pilotd that dies: SIGKILL to it first (that ends the
# job), then to pilotd.
if [[ $PILOTD_PID =~ ^[1-9][0-9]*$ ]]; then
    BATCH_PID=$(ps -o ppid= -p "$PILOTD_PID" | tr -d ' ')
    [[ $BATCH_PID =~ ^[1-9][0-9]*$ ]] && kill -KILL "$BATCH_PID"
    kill -KILL "$PILOTD_PID"
fi
ok "the job leaves squeue within 30 s after pilotd is killed" \
    wait_for 30 job_gone "$JOB"
ok "pilotd (pid $PILOTD_PID) is gone" wait_for 10 eval '! alive "$PILOTD_PID"'
ok "pilotd left its endpoint file behind (the pilot is stale)" \
    test -e "$PDIR/endpoint"
capture pilot submit -- true
one_error_line "submit to the stale pilot: one error line saying it is stale or ended" \
    'stale|ended'
diag "$ERR"
capture pilot submit --pilot "$P" -- true
one_error_line "submit --pilot $P to the stale pilot: one error line saying it is stale or ended" \
    'stale|ended'
capture pilot ls --json
is "$RC" 0 "ls still reads the stale pilot's state"
is "$(json 'sorted([t["id"], t["state"]] for t in j)' <<<"$OUT" 2>/dev/null)" \
    "[[$FIRST, \"done\"], [$SLEEPER, \"canceled\"]]" \
    "... and lists its 2 tasks with their states"
capture pilot down
is "$RC" 0 "pilot down of the stale pilot exits 0"
like "$OUT" "^pilot $P is down \(it was stale: " "... saying it was stale"
ok "... and removes the endpoint pilotd left behind" test ! -e "$PDIR/endpoint"
capture pilot status --pilot "$P" --json
is "$RC,$(json 'j["state"]' <<<"$OUT" 2>/dev/null)" "0,down" \
    "status --pilot $P then reads the pilot as down"
capture pilot down --pilot "$P"
is "$RC,$OUT" "0,pilot $P is already down" "a second pilot down says it is already down"
