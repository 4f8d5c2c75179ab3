#!/bin/bash
# t0880-output-limit.sh - --output-limit (issue 12): a task whose stdout or
# stderr grows over its limit is stopped, failed, reason output-limit, so
# that one task cannot fill the disk the pilot's state lives on; a task
# under it is not touched; bad sizes are refused at submit.  Local pilot.
. "$(dirname "$0")/lib.sh"

plan 12

field() { pilot show "$1" --json | json "j[\"$2\"]"; }

pilot_up_local || abort "pilot up --local --wait failed"
export PILOT_ID=$PILOT_UP_ID
DIR=$(pilot_dir "$PILOT_ID")

# 100 kB every 50 ms: 2 MB/s, over 1 MiB in about half a second
T=$(pilot submit --output-limit 1M -- sh -c 'while :; do head -c 100000 /dev/zero; sleep 0.05; done')
capture pilot wait "$T" --timeout 30
is "$(field "$T" state)" failed "a task writing 2 MB/s with --output-limit 1M ends failed"
like "$(field "$T" reason)" '^output-limit: stdout is over 1048576 bytes' "... reason output-limit, stdout named"
out_size() { stat -c %s "$DIR/tasks/$(($1 / 1000))/$1.out" 2>/dev/null; }
SIZE=$(out_size "$T")
ok "... stopped within a few seconds of the limit (stdout $SIZE bytes)" test "${SIZE:-0}" -lt 8000000
is "$(field "$T" attempts)" 1 "... and not run again"

T=$(pilot submit --output-limit 500K -- sh -c 'while :; do head -c 100000 /dev/zero >&2; sleep 0.05; done')
capture pilot wait "$T" --timeout 30
like "$(field "$T" state) $(field "$T" reason)" '^failed output-limit: stderr is over 512000 bytes' \
    "stderr counts too (500K = 512,000 bytes)"

# as fast as it can: the overshoot is what one second of writing is
T=$(pilot submit --output-limit 10M -- yes)
capture pilot wait "$T" --timeout 30
is "$(field "$T" state)" failed "'yes' with --output-limit 10M ends failed"
SIZE=$(out_size "$T")
diag "'yes' wrote $SIZE bytes before it was stopped (checked every 0.25 s)"

T=$(pilot submit --output-limit 1K -- echo hello)
capture pilot wait "$T" --timeout 30
is "$RC,$(field "$T" state),$(pilot logs "$T")" "0,done,hello" "a task under its limit ends done"

# the size as a task file gives it
printf '{"argv": ["sh", "-c", "head -c 300000 /dev/zero; sleep 3"], "output_limit": "100K"}\n' >"$WORK/t.jsonl"
capture pilot submit --file "$WORK/t.jsonl"
T=$OUT
capture pilot wait "$T" --timeout 30
like "$(field "$T" state) $(field "$T" reason)" '^failed output-limit: stdout is over 102400 bytes' \
    "output_limit in a task file (\"100K\")"

capture pilot submit --output-limit 0 -- true
usage_error "--output-limit 0 is refused" "--output-limit: '0' is not between 1 byte and"
capture pilot submit --output-limit 10X -- true
usage_error "--output-limit 10X is refused, the form named" "--output-limit: '10X' is not a size \\(bytes, or with K, M, G or T: 500M, 10G\\)"
capture pilot submit --output-limit 2000000T -- true
usage_error "a limit over 1 EiB is refused" "--output-limit: '2000000T' is not between 1 byte and 1073741824 GiB"
printf '{"argv": ["true"], "output_limit": -5}\n' >"$WORK/bad.jsonl"
capture pilot submit --file "$WORK/bad.jsonl"
like "$RC $ERR" "^[12] pilot: error: .*output_limit" "a bad output_limit in a task file is refused, the key named"
