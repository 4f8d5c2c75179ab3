#!/bin/bash
# t0940-big-commands.sh - commands as long as exec takes (issue 12): an
# argument of up to 131,071 bytes (Linux's MAX_ARG_STRLEN less its NUL)
# arrives intact, a longer one is refused at submit with the limit named
# (t0200: a command over 1.5 MiB in all); 64 tasks of 1.4 MB commands at
# once on a node of 64 cores reach it (the submit and the RUNs are split
# under the 64 MiB frame: one RUN of them all was dropped, and the tasks
# stayed assigned), a local pilot and a bench agent.
. "$(dirname "$0")/lib.sh"

plan 9

pilot_up_local || abort "pilot up --local --wait failed"
P=$PILOT_UP_ID

# x N: N bytes of 'x'
x() { head -c "$1" /dev/zero | tr '\0' x; }

T=$(pilot submit -- sh -c 'printf %s "$1" | wc -c; printf %s "$1" | tr -d x | wc -c' _ "$(x 100000)")
capture pilot wait "$T" --timeout 30
is "$RC" 0 "a task with a 100,000-byte argument ends done"
is "$(pilot logs "$T" | tr '\n' ' ')" "100000 0 " "... and gets all of it, unchanged"
T=$(pilot submit -- sh -c 'printf %s "$1" | wc -c' _ "$(x 131071)")
capture pilot wait "$T" --timeout 30
is "$RC,$(pilot logs "$T")" "0,131071" "an argument of 131,071 bytes, the most exec takes, runs"
# (no command line can pass 131,072 bytes to pilot itself: exec refuses
# it; a task file can)
"$PY" -c 'import json, sys; print(json.dumps({"argv": ["echo", "x" * 131072]}))' \
    >"$WORK/long.jsonl"
capture pilot submit --file "$WORK/long.jsonl"
one_error_line "131,072 bytes: refused at submit, the limit named" \
    "^pilot: error: $WORK/long\\.jsonl: line 1: argument 1 of the command has 131072 bytes; at most 131071 \\(Linux's MAX_ARG_STRLEN less the NUL\\)\$"
# (a command over 1.5 MiB in all: t0200)
capture pilot down
is "$RC" 0 "pilot down"

# --- 64 tasks of 1.4 MB commands on a node of 64 cores --------------------
capture pilot up --local --agents 0 --wait
P=$OUT
DIR=$(pilot_dir "$P")
pilot-agent --connect "$(kv "$DIR/endpoint" agent)" --keys "$DIR/keys" \
    --node big --cores 0-63 --bench --log "$DIR/logs/agent-big.log" &
AGENT=$!
cleanup_hook "kill $AGENT 2>/dev/null; wait $AGENT 2>/dev/null; true"
ok "a bench agent of 64 cores joins" wait_for 30 agents_up 1
ARGS=()
for i in $(seq 24); do ARGS+=("$(x 60000)"); done
CAPTURE_TIMEOUT=100 capture pilot submit --array 1-64 -- true "${ARGS[@]}"
A=$OUT
CAPTURE_TIMEOUT=100 capture pilot wait "$A" --timeout 90
is "$RC" 0 "an array of 64 tasks of 1.44 MB commands: all 64 reach the agent and end done"
# the same as 64 lines of a file: 92 MB, over one 64 MiB request
"$PY" -c '
import json, sys
arg = "x" * 60000
with open(sys.argv[1], "w") as f:
    for i in range(64):
        f.write(json.dumps({"argv": ["true", str(i)] + [arg] * 24}) + "\n")' "$WORK/big.jsonl"
CAPTURE_TIMEOUT=100 capture pilot submit --file "$WORK/big.jsonl"
is "$RC,$(wc -l <<<"$OUT")" "0,64" "a file of 64 such tasks (92 MB) is submitted: 64 ids"
mapfile -t IDS <<<"$OUT"
CAPTURE_TIMEOUT=100 capture pilot wait "${IDS[@]}" --timeout 90
is "$RC" 0 "... and all 64 end done"
