#!/bin/bash
# t1160-python.sh - the Python client (python/pilot over libpilot, cffi)
# through its pytest suite (tests/py/): a local pilot and a 2-node Slurm
# pilot (an MPI task), options checked against 'pilot show --json',
# 10,000 tasks in one submit_many, cancel, logs followed, errors, 20
# clients in threads; and pilot.Executor (tests/py/test_executor.py):
# Python calls and their values, exceptions, worker deaths, futures as
# arguments, cancel, shutdown, pilotd killed -9 and restarted, a client
# killed and its calls attached, 20 Executors.  The suite runs twice, with PYTHONUNBUFFERED unset
# and set: nothing in the client may depend on it.
. "$(dirname "$0")/lib.sh"

plan 4

export PILOT_LIBPILOT=$PILOT_BIN/../lib/libpilot.so.1
export PYTHONPATH=$REPO/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1 # nothing written into the tree
ok "libpilot is built ($PILOT_LIBPILOT)" test -e "$PILOT_LIBPILOT" \
    || abort "no libpilot: run 'make' or 'make check'"
# a libpilot of 'make asan' needs the ASan runtime loaded first, and the
# interpreter's own leaks are not ours; the pilots the suite starts get
# the environment as it was (tests/py/conftest.py puts it back)
PRELOAD=()
if ldd "$PILOT_LIBPILOT" 2>/dev/null | grep -q libasan; then
    PRELOAD=(PILOT_PYTEST_ENV="$(env | grep -E '^(LD_PRELOAD|ASAN_OPTIONS)=' \
                                 | tr '\n' ' ')"
             LD_PRELOAD="$(ldd "$PILOT_LIBPILOT" | awk '/libasan/ { print $3 }')"
             ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}")
fi
capture "$PY" -c 'import cffi, cloudpickle, pytest'
is "$RC" 0 "python3-cffi, -cloudpickle and -pytest are installed" \
    || diag "$ERR"

# pytest [ENV...]: one run of the suite, one point
suite() {
    local desc=$1
    shift
    # (env's options first: "$@" may be -u NAME)
    CAPTURE_TIMEOUT=900 capture env "$@" "${PRELOAD[@]}" "$PY" -m pytest \
        -p no:cacheprovider -q -rA --tb=short "$REPO/tests/py"
    if is "$RC" 0 "$desc"; then
        diag "$(tail -n 3 <<<"$OUT")"
    else
        diag "$OUT" "$ERR"
    fi
}
suite "the Python suite passes with PYTHONUNBUFFERED unset" \
    -u PYTHONUNBUFFERED
suite "the Python suite passes with PYTHONUNBUFFERED=1" PYTHONUNBUFFERED=1
