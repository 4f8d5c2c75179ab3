#!/bin/bash
# t0920-cli.sh - CLI behaviours no other test covers, on a local pilot:
# --version, a task's working directory (the submitter's by default,
# --cwd, a --cwd that does not exist), 'pilot logs -f' streaming a running
# task until it ends, 'pilot wait --timeout' giving up with exit 2;
# control characters of a task's name and argv escaped in what people
# read, exact in --json and in the task's output; each attempt's output
# kept (pilot logs --attempt N); and a submit of several requests that
# fails part-way printing the ids of those that were queued.
. "$(dirname "$0")/lib.sh"

plan 41

field() { pilot show "$1" --json | json "j[\"$2\"]"; }

# --- --version: the CLI's version and protocol, from the sources --------
V=$(sed -n 's/^#define PL_VERSION "\(.*\)"$/\1/p' "$REPO/proto/msg.h")
PV=$(sed -n 's/^#define PL_PROTO_VERSION \([0-9]*\)$/\1/p' "$REPO/proto/msg.h")
capture pilot --version
is "$RC|$OUT|$ERR" "0|pilot $V (protocol $PV)|" \
    "pilot --version: 'pilot $V (protocol $PV)' on stdout, exit 0, no pilot needed"
capture pilotd --version
is "$RC|$OUT" "0|pilotd $V (protocol $PV)" "pilotd --version: the same version and protocol"
capture pilot-agent --version
is "$RC|$OUT" "0|pilot-agent $V (protocol $PV)" "pilot-agent --version too"

pilot_up_local || abort "pilot up --local --wait failed"

# --- the working directory -------------------------------------------------
mkdir -p "$WORK/here" "$WORK/there"
T=$(cd "$WORK/here" && pilot submit -- pwd)
capture pilot wait "$T" --timeout 30
is "$RC" 0 "a task submitted from a directory ends done"
is "$(pilot logs "$T")" "$WORK/here" "... and ran in the directory it was submitted from"
is "$(field "$T" cwd)" "$WORK/here" "... which show gives as its cwd"
T=$(cd "$WORK/here" && pilot submit --cwd "$WORK/there" -- pwd)
capture pilot wait "$T" --timeout 30
is "$(pilot logs "$T")" "$WORK/there" "--cwd DIR: the task runs in DIR"
T=$(cd "$WORK/here" && pilot submit --cwd ../there -- pwd)
capture pilot wait "$T" --timeout 30
is "$(pilot logs "$T") $(field "$T" cwd)" "$WORK/there $WORK/here/../there" \
    "--cwd ../there: taken from the submitter's directory, stored absolute"
T=$(pilot submit --cwd "$WORK/none" -- pwd)
capture pilot wait "$T" --timeout 30
is "$RC" 1 "--cwd of a directory that does not exist: the task fails"
is "$(field "$T" state) $(field "$T" start_time)" "failed null" "... and never starts"
is "$(field "$T" reason)" "cwd $WORK/none: no such file or directory" \
    "... the reason naming the directory"
T=$(pilot submit -- no-such-command-t0920)
capture pilot wait "$T" --timeout 30
is "$RC,$(field "$T" reason)" "1,command 'no-such-command-t0920' not found in PATH" \
    "a command not in PATH: the task fails, saying so"

# --- pilot logs -f ---------------------------------------------------------
# a task that writes a line, waits for a file the test makes, writes again
GO=$WORK/go
F=$(pilot submit -- sh -c "echo first; echo oops >&2; while [ ! -e $GO ]; do sleep 0.1; done; echo second; echo done-err >&2")
pilot logs -f "$F" >"$WORK/follow.out" 2>"$WORK/follow.err" &
FOLLOW=$!
pilot logs -f --stderr "$F" >"$WORK/follow-e.out" 2>&1 &
FOLLOW_E=$!
ok "logs -f prints the first line while the task still runs" \
    wait_for 20 grep -qx first "$WORK/follow.out"
ok "... and keeps following (it has not exited)" alive "$FOLLOW"
is "$(field "$F" state)" running "... of a task that is running"
touch "$GO"
# reap PID SECS: wait for PID, a background job of this shell, giving it
# SECS to end (killed then); its exit status in REAPED
reap() {
    run_timeout "$2" tail --pid="$1" -f /dev/null || kill -KILL "$1"
    REAPED=0
    wait "$1" || REAPED=$?
}
reap "$FOLLOW" 20
is "$REAPED" 0 "logs -f exits 0 once the task has ended"
is "$(cat "$WORK/follow.out")" "first
second" "... having printed every line the task wrote, once"
is "$(cat "$WORK/follow.err")" "" "... and nothing on its own stderr"
reap "$FOLLOW_E" 10
is "$REAPED,$(cat "$WORK/follow-e.out")" "0,oops
done-err" "logs -f --stderr follows the task's stderr the same way"
capture pilot logs -f "$F"
is "$RC,$OUT" "0,first
second" "logs -f of a task that has ended prints its output and exits"

# --- pilot wait --timeout ----------------------------------------------------
S=$(pilot submit -- sleep 60)
t0=$(now)
capture pilot wait "$S" --timeout 1
T_WAIT=$(elapsed "$t0" "$(now)")
is "$RC" 2 "pilot wait --timeout 1 on a running task exits 2"
like "$ERR" "timed out after 1\\.[0-9]s: 0 of 1 tasks ended" "... saying it timed out"
ok "... after about a second ($T_WAIT s)" \
    "$PY" -c "import sys; sys.exit(not 0.9 <= $T_WAIT < 5)"
capture pilot cancel "$S"
capture pilot wait "$S" --timeout 30
is "$RC" 1 "the task still ran after the wait gave up, until it was canceled"

# --- control characters: escaped for people, exact in JSON and logs ------
ESC=$'\e'
T=$(pilot submit --name "${ESC}[2J${ESC}]0;owned"$'\a' -- printf 'out\033[31m\r\n')
capture pilot wait "$T" --timeout 30
pilot ls "$T" >"$WORK/ls.txt" 2>&1
pilot show "$T" >"$WORK/show.txt" 2>&1
ok "ls and show print no ESC, BEL or CR of the task's name and argv" \
    eval '! grep -qP "[\x1b\x07\r]" "$WORK/ls.txt" "$WORK/show.txt"'
ok "... but the escapes, \\x1b[2J for the name" \
    grep -qF '\x1b[2J\x1b]0;owned\x07' "$WORK/show.txt"
is "$(pilot show "$T" --json | json 'j["name"] == "\x1b[2J\x1b]0;owned\x07"')" true \
    "show --json gives the name exactly"
is "$(pilot logs "$T" | od -An -c | tr -s ' ' | sed 's/^ //')" 'o u t 033 [ 3 1 m \r \n' \
    "pilot logs prints the task's bytes as they are"
capture pilot submit --after "x${ESC}[2J" -- true
ok "an error naming what the user typed escapes it too" \
    eval '[[ $ERR == *"x\\x1b[2J"* && $ERR != *"$ESC"* ]]'

# --- each attempt keeps its own output ---------------------------------------
# the local agent killed under a running task: pilotd starts another, the
# task runs again (attempt 2), and attempt 1's output is not truncated
T=$(pilot submit -- sh -c 'echo "start $$"; sleep 4; echo "end $$"')
ok "a task runs" wait_for 20 eval '[[ $(field "$T" state) == running ]]'
sleep 0.5
kill -KILL "$(pilot status --json | json 'j["nodes"][0]["pid"]')"
wait_for 30 eval '[[ $(field "$T" attempts) == 2 && $(field "$T" state) == running ]]' \
    || abort "task $T did not run again"
CAPTURE_TIMEOUT=3 capture pilot logs -f --attempt 1 "$T"
like "$RC|$OUT" '^0\|start [0-9]+' "logs -f --attempt 1 while attempt 2 runs: attempt 1's output, at once"
capture pilot wait "$T" --timeout 60
is "$RC $(field "$T" attempts)" "0 2" "the agent killed under it: the task runs again and ends done"
A1=$(pilot logs --attempt 1 "$T" | head -1)
A2=$(pilot logs "$T" | head -1)
like "$A1|$A2" '^start [0-9]+\|start [0-9]+$' "pilot logs: the last attempt's output; --attempt 1: the first's"
ok "... two runs, two outputs ($A1, $A2)" test "$A1" != "$A2"
like "$(pilot show "$T" | grep '^stdout:')" "/$T\\.2\\.out\$" "show names the last attempt's file"
capture pilot logs --attempt 3 "$T"
one_error_line "--attempt 3 of a task of 2: refused" "^pilot: error: task $T has had 2 attempts; there is no attempt 3\$"

# --- a submit of many requests that fails part-way -------------------------
# 100,002 lines: more than one request (at most 100,000 specs and 16 MiB
# each), the last refused by pilotd (an unknown id in 'after', which only
# it can tell); on a second pilot with no agent, so that nothing runs
capture pilot up --local --agents 0
P2=$OUT
"$PY" -c '
import sys
with open(sys.argv[1], "w") as f:
    for i in range(100001):
        f.write("{\"argv\": [\"true\", \"%d\"]}\n" % i)
    f.write("{\"argv\": [\"true\"], \"after\": [999999999]}\n")' "$WORK/big.jsonl"
CAPTURE_TIMEOUT=180 capture pilot submit --pilot "$P2" --file "$WORK/big.jsonl"
is "$RC" 1 "a file whose last request is refused: exit 1"
QUEUED=$(sed -n 's/.*(the \([0-9]*\) tasks of the requests before it were queued: their ids are on stdout)$/\1/p' <<<"$ERR")
like "$ERR" "^pilot: error: .*big\\.jsonl: line 100002: .*999999999" \
    "... one error naming the line"
ok "... and how many of the tasks before it were queued ($QUEUED)" \
    test "${QUEUED:-0}" -ge 1
is "$(wc -l <<<"$OUT") $(head -1 <<<"$OUT") $(tail -1 <<<"$OUT")" "$QUEUED 1 $QUEUED" \
    "... whose $QUEUED ids are on stdout"
is "$(pilot status --pilot "$P2" --json | json 'j["tasks"]["total"]')" "$QUEUED" \
    "... and they are the pilot's tasks, no more"
capture pilot down --pilot "$P2"
