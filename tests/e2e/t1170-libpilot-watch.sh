#!/bin/bash
# t1170-libpilot-watch.sh - libpilot's watch (pilot_watch_*) from C
# against a real local pilot (tests/lib/libpilot_watch.c): an empty
# watch that submits join (pilot_submit_opts) while another thread
# blocks in pilot_watch_next(), pilot_watch_close() while another
# thread waits in pilot_watch_next(), a watch of ids and one added, a watch
# resumed from a second struct pilot with its token and 'after', the
# errors, pilotd killed with SIGKILL and started again while a watch
# waits; then a watch of a pilot that is down (ENOTCONN).
. "$(dirname "$0")/lib.sh"

# 1 here, the C client's 35, then 1 and its 1
plan 38

PW=${LIBPILOT_WATCH:-$PILOT_BIN/../tests/libpilot_watch}
ok "libpilot_watch is built ($PW)" test -x "$PW" \
    || abort "no libpilot_watch: run 'make test' or 'make check'"
pilot_up_local || abort "pilot up --local --wait failed"
P=$PILOT_UP_ID
DIR=$(pilot_dir "$P")

# checks: the C client's lines, numbered here
checks() {
    while IFS= read -r line; do
        case $line in
        "ok "[0-9]*" - "*) pass "${line#ok * - }" ;;
        "not ok "[0-9]*" - "*) fail "${line#not ok * - }" ;;
        *) diag "$line" ;;
        esac
    done
}
checks < <(run_timeout 400 "$PW" "$P" "$DIR" 2>&1)

wait_for 30 eval 'pilot status --pilot "$P" >/dev/null 2>&1'
capture pilot down --pilot "$P"
is "$RC" 0 "pilot down after the restart" || diag "$ERR"
checks < <(run_timeout 60 "$PW" --down "$P" 2>&1)
