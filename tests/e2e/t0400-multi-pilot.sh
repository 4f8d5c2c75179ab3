#!/bin/bash
# t0400-multi-pilot.sh - two pilots at once under one PILOT_HOME: the CLI
# refuses to guess, --pilot and PILOT_ID choose, tasks stay in their pilot.
. "$(dirname "$0")/lib.sh"

plan 22

pilot_up_local || abort "the first pilot up --local failed"
P1=$PILOT_UP_ID
pilot_up_local || abort "the second pilot up --local failed"
P2=$PILOT_UP_ID
like "$P1 $P2" '^p[0-9]+ p[0-9]+$' "two local pilots: $P1 and $P2"
isnt_same() { [[ $P1 != "$P2" ]]; }
ok "... with different ids" isnt_same

# --- the CLI does not guess ---------------------------------------------------
capture pilot submit -- true
one_error_line "submit without --pilot: refused, several pilots" 'several pilots'
capture pilot status
one_error_line "status without --pilot: refused, several pilots" 'several pilots'
capture pilot pilots --json
is "$RC" 0 "pilot pilots --json exits 0"
like "$OUT" "\"$P1\".*\"$P2\"|\"$P2\".*\"$P1\"" "... and lists both"

# --- choosing ------------------------------------------------------------------
capture pilot --pilot "$P1" submit --name one -- echo one
A=$OUT
like "$A" '^[0-9]+$' "pilot --pilot $P1 submit (option before the command) works"
capture env PILOT_ID="$P2" pilot submit --name two -- echo two
B=$OUT
like "$B" '^[0-9]+$' "PILOT_ID=$P2 pilot submit works"
capture pilot submit --pilot "$P2" --name two-b -- echo two-b
B2=$OUT
like "$B2" '^[0-9]+$' "pilot submit --pilot $P2 (option after the command) works"
capture pilot status --pilot "$P1" --json
is "$(json 'j["pilot"]' <<<"$OUT")" "$P1" "status --pilot $P1 talks to $P1"
capture env PILOT_ID="$P2" pilot status --json
is "$(json 'j["pilot"]' <<<"$OUT")" "$P2" "PILOT_ID=$P2 status talks to $P2"
capture env PILOT_ID="$P1" pilot status --pilot "$P2" --json
is "$(json 'j["pilot"]' <<<"$OUT")" "$P2" "--pilot wins over PILOT_ID"

capture pilot wait --pilot "$P1" --all --timeout 30
is "$RC" 0 "wait --all on $P1"
capture env PILOT_ID="$P2" pilot wait --all --timeout 30
is "$RC" 0 "wait --all on $P2"

# --- each pilot has its own tasks -------------------------------------------
capture pilot ls --pilot "$P1" --json
is "$(json 'sorted(t["name"] for t in j)' <<<"$OUT")" '["one"]' \
    "$P1 has its task and not $P2's"
capture pilot ls --pilot "$P2" --json
is "$(json 'sorted(t["name"] for t in j)' <<<"$OUT")" '["two", "two-b"]' \
    "$P2 has its tasks and not $P1's"
capture pilot logs --pilot "$P1" "$A"
is "$OUT" one "logs --pilot $P1 $A is its own output"
capture env PILOT_ID="$P2" pilot logs "$B"
is "$OUT" two "PILOT_ID=$P2 logs $B is its own output"

capture pilot --pilot p999 status
one_error_line "--pilot p999 (no such pilot): one error line" 'p999'

# --- one left: the CLI uses it -------------------------------------------
capture pilot down --pilot "$P1"
is "$RC" 0 "pilot down --pilot $P1"
capture pilot status --json
is "$(json 'j["pilot"]' <<<"$OUT")" "$P2" "with $P1 down, status without --pilot uses $P2"
capture pilot down
is "$RC" 0 "pilot down without --pilot stops $P2"
