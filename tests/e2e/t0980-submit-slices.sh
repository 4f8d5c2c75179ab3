#!/bin/bash
# t0980-submit-slices.sh - one submit request makes at most 5,000 tasks
# (issue 12: pilotd stores a request in one turn of its loop, and a
# million-task submit must not hold that loop for seconds).  pilotd
# refuses a larger request and stores none of it; pilot submit sends a
# larger array in slices that join one array ('append'), and a
# --retry-failed of more than 5,000 failures in several requests
# ('more').  pilotd checks an append: an array's id, no index twice.
# A cancel of more than 5,000 tasks is done in turns of the loop too.
# Also: 'pilot up --local' without --wait returns once pilotd's endpoint
# is written, so that the next command finds the pilot.
. "$(dirname "$0")/lib.sh"

plan 28
FEED=${FEED:-$PILOT_BIN/../bench/feed}
ok "feed is built ($FEED)" test -x "$FEED" \
    || abort "no feed: run 'make check' (it builds bench/feed)"

total() {
    pilot status --pilot "$1" --json | json 'j["tasks"]["total"]'
}

# elems PILOT ARRAY: "COUNT FIRST-INDEX LAST-INDEX OK" of the array's
# elements, OK 1 when each has the array's id, its own index once, the
# name e{index} and its index as the argument
elems() {
    pilot ls --pilot "$1" --json "$2" | json '(lambda a: "%d %d %d %d" % (
        len(a), min(t["array_index"] for t in a),
        max(t["array_index"] for t in a),
        all(t["array_id"] == '"$2"' for t in a)
        and len({t["array_index"] for t in a}) == len(a)
        and all(t["name"] in (None, "e%d" % t["array_index"]) for t in a)
        and all(t["argv"][-1] == str(t["array_index"]) for t in a)))(j)'
}

# the pilot is found right after 'pilot up --local' (no --wait)
capture pilot up --local --agents 0
P=$OUT
is "$RC" 0 "pilot up --local --agents 0 (no --wait)"
capture pilot submit --pilot "$P" -- true
is "$RC" 0 "... and a submit at once finds the pilot ($ERR)"
DIR=$(pilot_dir "$P")

capture "$FEED" -a 0 "$DIR" 5001 -- true '{}'
like "$RC $ERR" "^1 .*5001 tasks in one request; at most 5000" \
    "one request of an array of 5,001: pilotd refuses it (E2BIG)"
is "$(total "$P")" 1 "... and stores none of it"
capture "$FEED" -a 0 "$DIR" 5000 -- true '{}'
is "$RC" 0 "one request of 5,000 tasks is taken ($ERR)"
F=$(json 'j["first_id"]' <<<"$OUT")

capture pilot submit --pilot "$P" --array 0-24999:2 --name 'e{}' -- true '{}'
A=$OUT
is "$RC" 0 "pilot submit --array 0-24999:2 (12,500 tasks) ($ERR)"
is "$(total "$P")" 17501 "... all 12,500 are stored"
is "$(elems "$P" "$A")" "12500 0 24998 1" \
    "... as one array: each index once, with its name and argument"
is "$(pilot show --pilot "$P" --json "$A.24998" | json 'j["array_id"]')" "$A" \
    "... and ID.N finds an element of the last slice"

capture "$FEED" -a "$A" "$DIR" 5 -- true '{}'
like "$RC $ERR" "^1 .*append: array $A already has 3 elements with indexes in 0-4" \
    "an append of indexes the array has: refused (EEXIST)"
capture "$FEED" -a "$((A + 1))" "$DIR" 5 -- true '{}'
like "$RC $ERR" "^1 .*append: $((A + 1)) is not an array's id" \
    "an append to an element that is not the array's first: refused"
capture "$FEED" -a 999999 "$DIR" 5 -- true '{}'
like "$RC $ERR" "^1 .*append: 999999 is not an array's id" \
    "an append to no task: refused"
is "$(total "$P")" 17501 "... and the refused appends stored nothing"
is "$(elems "$P" "$F")" "5000 0 4999 1" "the 5,000 of one request are one array"

# a listing of more than 100,000 tasks is refused (and at once: the
# count comes first), a narrowed one is not
capture pilot submit --pilot "$P" --array 0-100000 -- true
A=$OUT
is "$(total "$P")" 117502 "an array of 100,001 more"
capture pilot ls --pilot "$P" "$A"
one_error_line "pilot ls of the array of 100,001: refused, it says how to narrow it" \
    "^pilot: error: more than 100000 tasks match: narrow the listing with --state, --tag or --limit$"
capture pilot ls --pilot "$P"
one_error_line "pilot ls of all 117,502: refused" "^pilot: error: more than 100000 tasks match"
capture pilot ls --pilot "$P" --limit 2 --json "$A"
is "$(json '[t["array_index"] for t in j]' <<<"$OUT")" "[0, 1]" "pilot ls --limit 2 of it: its first two"

# a cancel of 100,001 is done in turns of 5,000: pilotd answers a status
# meanwhile, which sees the array part canceled
pilot cancel --pilot "$P" "$A" >"$WORK/cancel.out" 2>&1 &
CPID=$!
PART=
for _ in $(seq 200); do
    c=$(pilot status --pilot "$P" --json | json 'j["tasks"]["canceled"]')
    if ((c > 0 && c < 100001)); then
        PART=$c
        break
    fi
    ((c == 100001)) && break
done
wait "$CPID"
is "$?:$(<"$WORK/cancel.out")" "0:canceled 100001 tasks" "pilot cancel of the array of 100,001"
ok "... and a status during it was answered, with $PART canceled so far" test -n "$PART"
capture pilot cancel --pilot "$P" "$A"
is "$OUT" "canceled 0 tasks (100001 were already finished)" "a second cancel: all had ended"
capture pilot down --pilot "$P"
is "$RC" 0 "pilot down"

# a retry of 5,010 failures goes in two requests, one array
pilot_up_local || abort "no local pilot"
P=$PILOT_UP_ID
capture pilot submit --pilot "$P" --array 0-5009 -- false '{}'
A=$OUT
CAPTURE_TIMEOUT=300 capture pilot wait --pilot "$P" "$A"
is "$(pilot status --pilot "$P" --json | json 'j["tasks"]["failed"]')" 5010 \
    "5,010 tasks failed"
capture pilot submit --pilot "$P" --retry-failed "$A" -- false '{}'
B=$OUT
is "$RC" 0 "--retry-failed of 5,010 failures ($ERR)"
is "$(elems "$P" "$B")" "5010 0 5009 1" "... one array of every failed index once"
capture pilot submit --pilot "$P" --retry-failed "$A" --array 2000-5009:5 -- false '{}'
is "$(elems "$P" "$OUT")" "602 2000 5005 1" \
    "--retry-failed narrowed to 2000-5009:5: its 602 indexes"
capture pilot down --pilot "$P"
is "$RC" 0 "pilot down"
