#!/bin/bash
# t0830-disk-full.sh - a local pilot whose state directory (PILOT_HOME, a
# 1 MiB tmpfs) fills up: submissions get one clear error and no id, reads
# still answer and say so, tasks running meanwhile end and their ends are
# stored once the space returns, and submissions work again.
# Needs root (mount); docs/state.md, "Durability".
. "$(dirname "$0")/lib.sh"

plan 36

# seconds taken by CMD..., with its output in OUT, ERR and RC (capture)
timed() {
    local t0
    t0=$(now)
    capture "$@"
    SECS=$(elapsed "$t0" "$(now)")
}
# is the float $1 below $2?
below() {
    "$PY" -c 'import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)' "$1" "$2"
}
status_json() {
    pilot status --json 2>/dev/null | json "$1" 2>/dev/null
}
state_store_is() {
    [[ $(status_json 'j.get("state_store")') == "$1" ]]
}

# --- a 1 MiB state directory ------------------------------------------
mount -t tmpfs -o size=1m,mode=0700 tmpfs "$PILOT_HOME" \
    || abort "cannot mount a tmpfs on $PILOT_HOME (this test needs root)"
# after 'pilot down' and the leftover processes (lib.sh); what the pilot
# wrote is kept beside for a failed test, whose logs lib.sh has shown
cleanup_hook 'cp -a "$PILOT_HOME/pilots" "$WORK/pilots-tmpfs" 2>/dev/null;
              rm -f "$PILOT_HOME/filler"; umount "$PILOT_HOME" \
              || umount -l "$PILOT_HOME"'
diag "PILOT_HOME $PILOT_HOME: $(df -k "$PILOT_HOME" | awk 'NR == 2 { print $2 " KiB" }') tmpfs"

pilot_up_local || abort "pilot up --local --wait failed"
P=$PILOT_UP_ID
PDIR=$(pilot_dir "$P")
is "$(status_json 'j["state_store"]')" ok "status: state_store is ok"

# --- before it fills ---------------------------------------------------
IDS=()
for i in 1 2 3; do
    IDS+=("$(pilot submit -- true 2>/dev/null)")
done
like "${IDS[*]}" '^[0-9]+ [0-9]+ [0-9]+$' "3 tasks submitted (${IDS[*]})"
capture pilot wait "${IDS[@]}" --timeout 30
is "$RC" 0 "... and done"
# two tasks that hold every core until we say so: they end while the
# disk is full, and what is submitted meanwhile stays queued
NCORES=$(status_json 'j["cores"]["total"]')
NCORES=${NCORES//[^0-9]/}
: "${NCORES:=2}"
GATE=()
WAIT_GO="while [ ! -e '$WORK/go' ]; do sleep 0.1; done"
GATE+=("$(pilot submit --name gate -- sh -c "$WAIT_GO")")
if ((NCORES > 1)); then
    GATE+=("$(pilot submit --name gate --cores-per-rank $((NCORES - 1)) \
              -- sh -c "$WAIT_GO")")
fi
IDS+=("${GATE[@]}")
NGATE=${#GATE[@]}
GATES=$(IFS=,; echo "${GATE[*]}")
gates_run() {
    [[ $(status_json '[j["tasks"]["running"], j["cores"]["busy"]]') == "[$NGATE, $NCORES]" ]]
}
ok "$NGATE gate tasks ($GATES) hold the $NCORES cores" wait_for 20 gates_run
timed pilot status
diag "status before the fill: ${SECS}s"

# --- fill it -------------------------------------------------------------
dd if=/dev/zero of="$PILOT_HOME/filler" bs=4k 2>"$WORK/dd.err"
like "$(<"$WORK/dd.err")" 'No space left on device' \
    "the tmpfs is filled up ($(df -k "$PILOT_HOME" | awk 'NR == 2 { print $4 }') KiB left)"
T_FULL=$(now)

# pilotd writes in place while its WAL has room: submit until refused;
# each task notes that it ran in a file off the tmpfs
RAN="echo \$PILOT_TASK_ID >> '$WORK/ran'"
ACCEPTED=()
REFUSED=0
for ((i = 0; i < 200; i++)); do
    capture pilot submit -- sh -c "$RAN"
    if ((RC != 0)); then
        REFUSED=1
        break
    fi
    ACCEPTED+=("$OUT")
done
diag "${#ACCEPTED[@]} submissions were still stored after the fill"
IDS+=("${ACCEPTED[@]}")
is "$REFUSED" 1 "a submission is refused once the state directory is full"
one_error_line "... with one error line, no id, exit status 1" \
    "state directory .*/pilots/$P.* is full \(ENOSPC\)"
capture pilot submit -- echo never
one_error_line "the next submission is refused the same way" \
    'is full \(ENOSPC\)'

# --- reads while full ---------------------------------------------------
timed pilot status --json
is "$RC" 0 "status --json answers while full"
ok "... within a second (${SECS}s)" below "$SECS" 1
diag "status while full: ${SECS}s"
STATUS=$OUT
is "$(json 'j["state_store"]' <<<"$STATUS")" full "... state_store is full"
like "$(json 'j["state_store_error"]' <<<"$STATUS")" \
    "state directory .*/pilots/$P is full \(ENOSPC\)" \
    "... state_store_error names the directory and ENOSPC"
timed pilot status
like "$OUT" $'\nstore: full for [^\n]*changes wait: the state directory' \
    "status says 'store: full' (${SECS}s)"
timed pilot ls --json
is "$RC" 0 "ls answers while full"
ok "... within a second (${SECS}s)" below "$SECS" 1
diag "ls while full: ${SECS}s"
capture pilot cancel "${GATE[0]}"
one_error_line "a cancel is refused while full" 'is full \(ENOSPC\)'

# the gate tasks end while full: pilotd has their ends, the database not;
# the cores are free, but nothing starts
T_GO=$(now)
touch "$WORK/go"
none_running() {
    [[ $(status_json 'j["tasks"]["running"]') == 0 ]]
}
ok "the gate tasks end while full (status counts them)" wait_for 20 none_running
sleep 1
is "$(status_json '[j["tasks"]["running"], j["tasks"]["assigned"], j["tasks"]["queued"]]')" \
    "[0, 0, ${#ACCEPTED[@]}]" \
    "no task starts while full: the ${#ACCEPTED[@]} stored after the fill stay queued"
UNSTORED=$(status_json 'j["unstored"]')
like "$UNSTORED" '^[1-9][0-9]*$' "status: $UNSTORED changes wait to be stored"
capture pilot ls --json
is "$(json "sorted(set(t['state'] for t in j if t['id'] in ($GATES,)))" <<<"$OUT")" \
    '["running"]' \
    "ls (the database) still shows them running: their ends are not stored"
capture pilot submit -- true
one_error_line "still refused after a second" 'ENOSPC'

# --- the space returns -----------------------------------------------------
rm -f "$PILOT_HOME/filler"
T_FREE=$(now)
ok "pilotd finds it can write again by itself" wait_for 10 state_store_is ok
RECOVER=$(elapsed "$T_FREE" "$(now)")
ok "... within 3 s (${RECOVER}s)" below "$RECOVER" 3
diag "recovery: state_store ok ${RECOVER}s after the space returned"
capture pilot submit -- true
NEXT=$OUT
is "$RC" 0 "a submission works again"
like "$NEXT" '^[0-9]+$' "... and prints its id ($NEXT)"
IDS+=("$NEXT")
is "$(status_json 'j["unstored"]')" 0 "status: nothing waits to be stored"
ok "pilotd logged that its state directory can be written again" \
    grep -q 'can be written again after' "$PDIR/logs/pilotd.log"
capture pilot wait --all --timeout 60
is "$RC" 0 "every task ends done"
TWICE=$(sort -n "$WORK/ran" 2>/dev/null | uniq -d | wc -l)
# (none at all when the disk refused the first submission after the fill)
is "$TWICE $(cat "$WORK/ran" 2>/dev/null | wc -l)" "0 ${#ACCEPTED[@]}" \
    "the ${#ACCEPTED[@]} tasks stored after the fill ran once each"

capture pilot ls --json
LS=$OUT
want=$(printf '%s\n' "${IDS[@]}" | sort -n | paste -sd,)
is "$(json 'sorted(t["id"] for t in j)' <<<"$LS" | tr -d '[] ')" "$want" \
    "the tasks are exactly those whose id was printed (${#IDS[@]}): no refused one"
is "$(json 'sorted(set(t["state"] for t in j))' <<<"$LS")" '["done"]' \
    "... all done"
# the ends that came while full are stored with their time
ENDS=$(json "[t['end_time'] for t in j if t['id'] in ($GATES,)]" <<<"$LS")
ok "the gate tasks' ends are stored, at times while full ($ENDS)" \
    "$PY" -c '
import json, sys
ends, t0, t1, n = json.loads(sys.argv[1]), *map(float, sys.argv[2:])
sys.exit(0 if len(ends) == n and all(e and t0 <= e < t1 for e in ends)
         else 1)' "$ENDS" "$T_GO" "$T_FREE" "$NGATE"
capture pilot show "${GATE[0]}" --json
is "$(json '[e["state"] for e in j["events"] if "rank" not in e or e["rank"] is None]' <<<"$OUT")" \
    '["queued", "assigned", "running", "done"]' \
    "gate task ${GATE[0]}: events queued, assigned, running, done"
is "$(status_json '[j["tasks"][k] for k in ("total", "done")]')" \
    "[${#IDS[@]}, ${#IDS[@]}]" "status: ${#IDS[@]} tasks, all done"

# --- after a restart of pilotd: the database agrees ----------------------
capture pilot down
is "$RC" 0 "pilot down"
capture pilot ls --pilot "$P" --json
is "$(json 'len([t for t in j if t["state"] == "done"])' <<<"$OUT")" \
    "${#IDS[@]}" "ls from the database after down: ${#IDS[@]} done"
