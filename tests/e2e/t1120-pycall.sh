#!/bin/bash
# t1120-pycall.sh - Python calls in warm workers (issue 14), with
# /usr/bin/python3: --py-call with string arguments and its result in
# show and result; a call pickled by a script (--input, inline and over
# 256 KiB through inputs/, over 256 MiB refused); a function that raises
# (its traceback in show and stderr); os._exit and SIGSEGV fail only
# their call, the next runs in a new worker; a result over 64 KiB (a
# file) and over 256 MiB (failed); warm reuse (same pid, the prelude run
# once, pilot up --py-prelude); output with PYTHONUNBUFFERED set and
# unset; timeout and cancel of a long call (the worker stays); 200 calls
# through the cores.  On a local pilot, then on a 2-node Slurm pilot.
. "$(dirname "$0")/lib.sh"

plan 79

CODE=$WORK/code
mkdir -p "$CODE"
cat >"$CODE/mod.py" <<'EOF'
import os, signal, sys, time
def add(a, b):
    print("adding", a, b)
    return int(a) + int(b)
def pid():
    return os.getpid()
def boom(msg):
    print("about to raise")
    raise ValueError(msg)
def leave(code):
    os._exit(int(code))
def segv():
    os.kill(os.getpid(), signal.SIGSEGV)
def nap(s):
    time.sleep(float(s))
    return "woke"
def big(n):
    return b"x" * int(n)
def talk(n):
    for i in range(int(n)):
        print("line", i)
    sys.stderr.write("to stderr\n")
    return "talked"
def sq(x):
    return int(x) ** 2
def noop():
    pass
EOF
# a client's pickled call: (function, args, kwargs), the function by value
cat >"$CODE/mkcall.py" <<'EOF'
import sys, cloudpickle
def weighted(xs, w=1):
    return sum(x * x for x in xs) * w
n = int(sys.argv[1]) if len(sys.argv) > 1 else 10
sys.stdout.buffer.write(cloudpickle.dumps((weighted, (list(range(n)),),
                                           {"w": 2})))
EOF
cat >"$CODE/unpickle.py" <<'EOF'
import pickle, sys
v = pickle.load(sys.stdin.buffer)
if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], BaseException):
    print("raised", type(v[0]).__name__, v[0], "|", v[1].splitlines()[0])
elif isinstance(v, bytes):
    print("bytes", len(v))
else:
    print(repr(v))
EOF
cd "$CODE" || abort "no $CODE"

PYA=(--python /usr/bin/python3)
field() { pilot show "$1" --json | json "j.get(\"$2\")"; }
value() { pilot result "$1" | "$PY" "$CODE/unpickle.py"; }
call() { pilot submit "${PYA[@]}" "$@"; }
ended() { capture pilot wait "$1" --timeout "${2:-60}"; }
is_running() { [[ $(field "$1" state) == running ]]; }
# worker_alive REASON: the worker whose pid the reason names still runs
# _pyworker.py (the dev cluster's nodes share this machine's pids)
worker_alive() {
    local pid
    pid=$(sed -E 's/.*\(pid ([0-9]+)[,)].*/\1/' <<<"$1")
    [[ $pid =~ ^[0-9]+$ ]] && grep -q _pyworker.py "/proc/$pid/cmdline" 2>/dev/null
}

# checks MODE: everything above on the pilot $PILOT_ID
checks() {
    local m=$1 T T2 P1 P2 DIR
    DIR=$(pilot_dir "$PILOT_ID")

    T=$(call --py-call mod:add -- 2 3)
    ended "$T"
    is "$RC $(field "$T" state) $(field "$T" fn)" "0 done pycall" "$m: --py-call mod:add -- 2 3 ends done"
    capture pilot show "$T"
    like "$OUT" $'\nresult: +5\n' "$m: pilot show gives its result's repr"
    is "$(value "$T")" 5 "$m: pilot result gives the pickled value"
    is "$(pilot logs "$T")" "adding 2 3" "$m: what it printed is in its stdout"

    "$PY" "$CODE/mkcall.py" 10 >"$WORK/call.pkl"
    T=$(call --input "$WORK/call.pkl" -- weighted)
    ended "$T"
    is "$(field "$T" state) $(value "$T")" "done 570" "$m: a pickled call (--input, inline) returns 570"
    is "$(field "$T" argv)" '["weighted"]' "$m: ... its words are its label"
    "$PY" "$CODE/mkcall.py" 100000 >"$WORK/call2.pkl"
    SIZE=$(stat -c %s "$WORK/call2.pkl")
    T=$(call --input "$WORK/call2.pkl")
    ended "$T"
    is "$(field "$T" state) $(value "$T")" "done 666656666700000" "$m: a pickled call of $SIZE bytes (over 256 KiB) runs"
    ok "$m: ... its pickle went under the pilot's inputs/" test "$(ls "$DIR/inputs" | wc -l)" -ge 1
    truncate -s 257M "$WORK/huge.pkl"
    capture pilot submit "${PYA[@]}" --input "$WORK/huge.pkl"
    one_error_line "$m: a pickle over 256 MiB is refused, saying so" "more than 268435456 bytes \\(256 MiB\\)"

    T=$(call --py-call mod:boom -- "bad input")
    ended "$T"
    is "$RC $(field "$T" state) $(field "$T" exit_code)" "1 failed 1" "$m: a function that raises: failed, exit code 1"
    is "$(field "$T" reason)" "ValueError: bad input" "$m: ... reason the exception's last line"
    capture pilot show "$T"
    like "$OUT" $'\nraised: +ValueError: bad input\n' "$m: ... pilot show says what it raised"
    capture pilot logs --stderr "$T"
    like "$OUT" 'Traceback .*line 9, in boom.*ValueError: bad input' "$m: ... its traceback in its stderr"
    like "$(value "$T")" '^raised ValueError bad input \| Traceback' "$m: ... pilot result: (exception, traceback)"

    P1=$(call --py-call mod:pid)
    ended "$P1"
    T=$(call --py-call mod:leave -- 3)
    ended "$T"
    is "$(field "$T" state) $(field "$T" exit_code)" "failed 3" "$m: os._exit(3): failed, exit code 3"
    like "$(field "$T" reason)" "^its Python worker \\(pid [0-9]+ on $(field "$T" node)\\) exited with code 3 during the call" \
        "$m: ... the reason names its worker's pid and node"
    local dead1 dead2
    dead1=$(field "$T" reason | sed -E 's/.*\(pid ([0-9]+) .*/\1/')
    T=$(call --py-call mod:segv)
    ended "$T"
    is "$(field "$T" state) $(field "$T" signal)" "failed 11" "$m: SIGSEGV: failed, signal 11"
    like "$(field "$T" reason)" "died of signal 11 \\(Segmentation fault\\) during the call" "$m: ... reason the signal"
    dead2=$(field "$T" reason | sed -E 's/.*\(pid ([0-9]+) .*/\1/')
    P2=$(call --py-call mod:pid)
    ended "$P2"
    ok "$m: the next call runs in a new worker (pid $(field "$P2" result_repr), not the dead $dead1, $dead2)" \
        test "$(field "$P2" state)" = done -a "$(field "$P2" result_repr)" != "$dead1" \
        -a "$(field "$P2" result_repr)" != "$dead2"

    T=$(call --py-call mod:big -- 100000)
    ended "$T"
    is "$(field "$T" state) $(value "$T")" "done bytes 100000" "$m: a result of 100 kB comes back"
    like "$(field "$T" result_file)" "^$DIR/tasks/0/$T\\.result$" "$m: ... through its file beside its output"
    is "$(field "$T" result_size)" "$(stat -c %s "$DIR/tasks/0/$T.result")" "$m: ... of the size recorded"
    T=$(call --py-call mod:big -- 270000000)
    ended "$T" 120
    like "$(field "$T" state) $(field "$T" reason)" "^failed the result pickles to 27000[0-9]+ bytes, over the limit of 268435456 \\(256 MiB\\)" \
        "$m: a result over 256 MiB fails the call, saying so"

    # warm: calls one after the other on a node run in one worker (one
    # key: the node's first free core), whose prelude ran once
    : >"$WORK/pids-$m"
    for _ in 1 2 3 4; do
        T=$(call --py-prelude "open('$WORK/prelude-$m', 'a').write('x')" --py-call mod:pid)
        ended "$T"
        echo "$(field "$T" node) $(field "$T" result_repr)" >>"$WORK/pids-$m"
    done
    local nw nn
    nw=$(sort -u "$WORK/pids-$m" | wc -l)
    nn=$(cut -d' ' -f1 "$WORK/pids-$m" | sort -u | wc -l)
    is "$nw" "$nn" "$m: 4 calls one after the other: one worker a node ($(sort -u "$WORK/pids-$m" | tr '\n' ' '))"
    is "$(wc -c <"$WORK/prelude-$m")" "$nw" "$m: ... each worker ran the prelude once"
    # the pilot's prelude wrote the pid of each worker it ran in
    local pids
    pids=$(cat "$WORK/up-prelude-$m" 2>/dev/null)
    ok "$m: pilot up --py-prelude ran once in each worker of the calls without one" \
        test -n "$pids" -a -z "$(sort <<<"$pids" | uniq -d)"
    ok "$m: ... among them the worker of an earlier call" \
        grep -qx "$(field "$P2" result_repr)" "$WORK/up-prelude-$m"

    # output, with PYTHONUNBUFFERED unset (block-buffered) and set
    T=$(call --py-call mod:talk -- 3)
    T2=$(call --env PYTHONUNBUFFERED=1 --py-call mod:talk -- 3)
    ended "$T"
    ended "$T2"
    is "$(pilot logs "$T" | tr '\n' ' ')|$(pilot logs --stderr "$T")" "line 0 line 1 line 2 |to stderr" \
        "$m: stdout and stderr land in the task's files, PYTHONUNBUFFERED unset"
    is "$(pilot logs "$T2" | tr '\n' ' ')|$(pilot logs --stderr "$T2")" "line 0 line 1 line 2 |to stderr" \
        "$m: ... and set"

    # timeout and cancel: SIGINT, the worker answers and stays
    T=$(call --timeout 1 --py-call mod:nap -- 60)
    ended "$T"
    is "$(field "$T" state)" timeout "$m: a call past its --timeout ends timeout"
    like "$(field "$T" reason)" "^timeout after 1 s: interrupted \\(KeyboardInterrupt\\); its Python worker \\(pid [0-9]+\\) stays" \
        "$m: ... interrupted, its worker stays"
    ok "$m: ... and it lives on" worker_alive "$(field "$T" reason)"
    T=$(call --py-call mod:nap -- 60)
    wait_for 30 is_running "$T"
    sleep 0.5
    capture pilot cancel "$T"
    ended "$T"
    is "$(field "$T" state)" canceled "$m: pilot cancel of a long call: canceled"
    like "$(field "$T" reason)" "interrupted \\(KeyboardInterrupt\\) in its Python worker \\(pid [0-9]+\\), which stays" \
        "$m: ... interrupted, its worker stays"
    ok "$m: ... and it lives on" worker_alive "$(field "$T" reason)"

    # 200 calls through the cores
    T=$(call --array 0-199 --py-call mod:sq -- '{}')
    ended "$T" 300
    is "$RC" 0 "$m: 200 calls (an array) all done"
    is "$(pilot show "$T.199" --json | json 'j["result_repr"]')" 39601 "$m: ... the last one's value 199^2"
}

# --- a local pilot ---------------------------------------------------

PILOT_UP_ID=$(run_timeout 60 pilot up --local --wait --python /usr/bin/python3 \
              --py-prelude "import os; open('$WORK/up-prelude-local', 'a').write('%d\\n' % os.getpid())" 2>"$WORK/.up.err") \
    || abort "pilot up --local failed: $(<"$WORK/.up.err")"
export PILOT_ID=$PILOT_UP_ID
PYA=()  # the pilot's --python
checks local
# the agent killed in a call: its workers go with it (parent-death
# SIGKILL), the call runs again under the next agent
worker_pids() {
    local p
    for p in /proc/[0-9]*; do
        grep -qs _pyworker.py "$p/cmdline" \
            && grep -qsa "PILOT_HOME=$PILOT_HOME" "$p/environ" && echo "${p#/proc/}"
    done
}
none_of() { local p; for p in $1; do [[ -d /proc/$p ]] && return 1; done; return 0; }
attempt2_runs() { [[ $(field "$1" attempts) == 2 && $(field "$1" state) == running ]]; }
T=$(pilot submit --py-call mod:nap -- 60)
wait_for 30 is_running "$T"
OLD=$(worker_pids)
AGENT=$(pilot status --json | json 'j["nodes"][0]["pid"]')
kill -9 "$AGENT"
ok "agent killed with SIGKILL: its workers ($(tr '\n' ' ' <<<"$OLD")) are gone within 5 s" \
    wait_for 5 none_of "$OLD"
ok "... the call runs again under the next agent" wait_for 60 attempt2_runs "$T"
capture pilot cancel "$T"
capture pilot submit --py-call mod:add --pool nope -- 1 2
usage_error "--py-call with --pool is refused" "runs in a warm worker of its agent, not in a pool"
capture pilot submit --py-prelude "import os" -- true
usage_error "--py-prelude alone is refused" "go with --py-call MODULE:FUNCTION or --input FILE"
capture pilot submit --py-call notafunction -- 1
one_error_line "--py-call without MODULE:FUNCTION is refused" "want MODULE:FUNCTION"
capture pilot down
unset PILOT_ID

# --- a 2-node Slurm pilot --------------------------------------------

PILOT_UP_ID=$(run_timeout 180 pilot up --nodes 2 --time 15:00 --wait --wait-timeout 120 \
              --py-prelude "import os; open('$WORK/up-prelude-cluster', 'a').write('%d\\n' % os.getpid())" 2>"$WORK/.up.err") \
    || abort "pilot up --nodes 2 failed: $(<"$WORK/.up.err")"
export PILOT_ID=$PILOT_UP_ID
PYA=(--python /usr/bin/python3)
checks cluster
