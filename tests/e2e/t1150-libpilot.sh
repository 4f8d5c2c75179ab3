#!/bin/bash
# t1150-libpilot.sh - libpilot against a real local pilot, from C: a
# program that links libpilot.so alone (tests/lib/libpilot_e2e.c)
# finds the pilot, submits (options, dependencies, arrays in slices),
# reads tasks and their logs, cancels, and submits from 8 threads at
# once; the same tasks seen by the CLI; the library exports pilot_*
# alone.
. "$(dirname "$0")/lib.sh"

# 3 here, the C client's 17, 2 after
plan 22

E2E=${LIBPILOT_E2E:-$PILOT_BIN/../tests/libpilot_e2e}
LIB=$PILOT_BIN/../lib/libpilot.so.1

ok "libpilot_e2e is built ($E2E)" test -x "$E2E" \
    || abort "no libpilot_e2e: run 'make test' or 'make check'"
capture nm -D --defined-only "$LIB"
is "$(awk '$3 !~ /^(pilot_|PILOT_)/' <<<"$OUT")" "" \
    "libpilot.so.1 exports pilot_* and nothing else"
pilot_up_local || abort "pilot up --local --wait failed"
P=$PILOT_UP_ID
like "$P" '^p[0-9]+$' "a local pilot runs ($P)"

# the C client's checks, numbered here
while IFS= read -r line; do
    case $line in
    "ok "[0-9]*" - "*) pass "${line#ok * - }" ;;
    "not ok "[0-9]*" - "*) fail "${line#not ok * - }" ;;
    *) diag "$line" ;;
    esac
done < <(run_timeout 300 "$E2E" "$P" 2>&1)

# what the library submitted, as the CLI sees it
capture pilot ls --json
is "$(json '[t["name"] for t in j].count("thr")' <<<"$OUT")" 400 \
    "pilot ls lists the 400 tasks the threads submitted"
capture pilot ls --json --state failed
like "$(json '[t["name"] for t in j]' <<<"$OUT")" '"c1"' \
    "... and c1 as failed"
