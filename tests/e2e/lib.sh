# tests/e2e/lib.sh - shared helpers of the end-to-end tests (sourced)
#
# Each test is an executable bash script printing TAP:
#
#   . "$(dirname "$0")/lib.sh"
#   plan 3
#   pilot_up 4 || abort "no pilot"
#   capture pilot submit -- hostname
#   is "$RC" 0 "submit exits 0"
#   ...
#
# What this file gives a test:
#   WORK          its own directory, /tmp/pilot-e2e-<test>.XXXXXX (kept on
#                 failure, removed on success)
#   PILOT_HOME    $WORK/home (exported)
#   PY            /usr/bin/python3 (Debian's: for JSON, never jq)
#   REPO          the repository root
#   plan N; ok DESC CMD...; nok DESC CMD...; is GOT WANT DESC;
#   like GOT REGEX DESC; unlike GOT REGEX DESC; pass DESC; fail DESC;
#   diag MSG...; abort MSG (give up: the missing points count as failed)
#   capture CMD...        run CMD, set OUT, ERR (text) and RC
#   capture_mpi CMD...    the same, once more if its MPI task crashed in
#                         Open MPI's MPI_Init (a known bug, not pilot's)
#   mpi_init_crashed ID   whether task ID crashed so (its stderr)
#   run_timeout SECS CMD... timeout(1), with a KILL 5 s later
#   wait_for SECS CMD...  retry CMD every 0.2 s until it succeeds
#   json EXPR             evaluate a Python expression on 'j', the JSON
#                         document read from stdin; prints the result
#   one_error_line DESC REGEX [RC]  check that ERR is one "pilot: error: ..."
#                         line matching REGEX (and RC, default 1)
#   usage_error DESC REGEX the same for a usage error: RC 2
#   pilot_up N            Slurm pilot of N nodes; sets PILOT_UP_ID and
#                         PILOT_UP_SECS
#   pilot_up_local        local pilot; sets PILOT_UP_ID, PILOT_UP_SECS
#   pilot_dir ID          $PILOT_HOME/pilots/ID
#   job_end JOBID         "STATE EXITCODE" once a Slurm job has ended
#   job_gone JOBID        true once the job has left squeue (for wait_for)
#   cleanup_job JOBID     scancel JOBID when the test ends
#   last_start FILE T0 N  ms from T0 (epoch s) to the last " start EPOCH"
#                         stamp in FILE, once it holds N of them, else "?"
#   agents_up N           true when 'pilot status' says N agents are up
#                         (for wait_for)
#   cleanup_hook CMD      eval CMD when the test ends, once its pilots and
#                         their processes are gone (unmount what it mounted)
# On exit: 'pilot down' for every pilot under $PILOT_HOME, scancel of
# their Slurm jobs; a process with our PILOT_HOME in its environment still
# alive 15 s later fails the test (and is killed); on failure the tail of
# every pilot log, then the cleanup hooks, last first.

set -u

_tap_planned=0
_tap_n=0
_tap_failed=0
_cleanup_jobs=()
_cleanup_hooks=()

if [[ -z ${PILOT_BIN:-} ]]; then
    echo "1..0 # PILOT_BIN is not set (run through 'make check')"
    echo "pilot e2e: PILOT_BIN is not set" >&2
    exit 1
fi
for _b in pilot pilotd pilot-agent; do
    if [[ ! -x $PILOT_BIN/$_b ]]; then
        echo "1..0 # $PILOT_BIN/$_b is missing (run 'make')"
        echo "pilot e2e: $PILOT_BIN/$_b is missing" >&2
        exit 1
    fi
done
export PILOT_BIN
export PATH=$PILOT_BIN:$PATH
unset PILOT_ID PILOT_TIMEOUT

PY=/usr/bin/python3
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TEST_NAME=$(basename "$0" .sh)
WORK=$(mktemp -d "/tmp/pilot-e2e-$TEST_NAME.XXXXXX") || exit 1
export PILOT_HOME=$WORK/home
mkdir -m 0700 "$PILOT_HOME" # pilot refuses one others may write

# --- TAP -------------------------------------------------------------

plan() {
    _tap_planned=$1
    echo "1..$1"
}

# diag MSG...: each argument on its own line(s), as TAP comments
diag() {
    local arg line
    for arg in "$@"; do
        while IFS= read -r line; do
            echo "# $line"
        done <<<"$arg"
    done
}

pass() {
    _tap_n=$((_tap_n + 1))
    echo "ok $_tap_n - $1"
}

fail() {
    _tap_n=$((_tap_n + 1))
    _tap_failed=$((_tap_failed + 1))
    echo "not ok $_tap_n - $1"
    # where, for the person reading prove's output
    local i line=?
    for ((i = 1; i < ${#BASH_SOURCE[@]}; i++)); do
        if [[ ${BASH_SOURCE[i]} == "$0" ]]; then
            line=${BASH_LINENO[i - 1]}
            break
        fi
    done
    echo "#   failed: $1 ($0 line $line)" >&2
    return 1
}

# skip DESC REASON: a point not judged, with the reason (TAP's SKIP: prove
# counts it and lists it as skipped, never as a plain pass)
skip() {
    _tap_n=$((_tap_n + 1))
    echo "ok $_tap_n - $1 # SKIP $2"
}

# ok DESC CMD...: passes if CMD exits 0
ok() {
    local desc=$1
    shift
    if "$@"; then
        pass "$desc"
    else
        local rc=$?
        fail "$desc"
        diag "  command: $*" "  exit status: $rc"
        return 1
    fi
}

# nok DESC CMD...: passes if CMD exits non-zero
nok() {
    local desc=$1
    shift
    if "$@"; then
        fail "$desc"
        diag "  command unexpectedly succeeded: $*"
        return 1
    fi
    pass "$desc"
}

# is GOT WANT DESC
is() {
    if [[ "$1" == "$2" ]]; then
        pass "$3"
    else
        fail "$3"
        diag "       got: '$1'" "  expected: '$2'"
        [[ -n ${ERR:-} ]] && diag "  last stderr: $ERR"
        return 1
    fi
}

# like GOT REGEX DESC (bash ERE)
like() {
    if [[ "$1" =~ $2 ]]; then
        pass "$3"
    else
        fail "$3"
        diag "       got: '$1'" "  expected to match: /$2/"
        return 1
    fi
}

unlike() {
    if [[ "$1" =~ $2 ]]; then
        fail "$3"
        diag "       got: '$1'" "  expected not to match: /$2/"
        return 1
    fi
    pass "$3"
}

# lacks DESC REGEX FILE: passes if FILE can be read and no line of it
# matches REGEX (grep ERE); a missing or unreadable file fails, so the
# check cannot pass because what it looks at is not there
lacks() {
    local desc=$1 re=$2 file=$3
    if [[ ! -f $file || ! -r $file ]]; then
        fail "$desc"
        diag "  $file: no such file (or not readable)"
        return 1
    fi
    if grep -qE -- "$re" "$file"; then
        fail "$desc"
        diag "  $file has:" "$(grep -nE -- "$re" "$file" | head -5)"
        return 1
    fi
    pass "$desc"
}

# abort MSG: stop the test here (the plan is not met, so prove reports it)
abort() {
    _tap_failed=$((_tap_failed + 1))
    diag "ABORT: $*"
    echo "pilot e2e: $TEST_NAME: abort: $*" >&2
    exit 1
}

# --- running commands ------------------------------------------------

# PYLIB: the command that runs Python with the client library, an array
# ("${PYLIB[@]}" script.py ...): "$PY"; under 'make asan' (libpilot built
# with ASan) "$PY" with the ASan runtime preloaded, its own leaks not
# counted, and its children given the environment as it was
# (tests/e2e/asan-site/sitecustomize.py)
PYLIB=("$PY")
_asanlib=$(ldd "$PILOT_BIN/../lib/libpilot.so.1" 2>/dev/null \
           | awk '/libasan/ { print $3 }')
if [[ -n $_asanlib ]]; then
    PYLIB=(env "PILOT_ASAN_SAVED=$("$PY" -c 'import json, os, sys
print(json.dumps({k: os.environ.get(k) for k in
                  ("LD_PRELOAD", "ASAN_OPTIONS", "PYTHONPATH")}))')"
           "LD_PRELOAD=$_asanlib"
           "ASAN_OPTIONS=detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
           "PYTHONPATH=$REPO/tests/e2e/asan-site:$REPO/python${PYTHONPATH:+:$PYTHONPATH}"
           "$PY")
fi

# run_timeout SECS CMD...
run_timeout() {
    local secs=$1
    shift
    timeout -k 5 "$secs" "$@"
}

# capture CMD...: OUT = stdout, ERR = stderr (text, last newline removed),
# RC = exit status.  The command runs with a limit of $CAPTURE_TIMEOUT
# seconds (default 120).
capture() {
    local o=$WORK/.capture.out e=$WORK/.capture.err
    RC=0
    run_timeout "${CAPTURE_TIMEOUT:-120}" "$@" >"$o" 2>"$e" || RC=$?
    OUT=$(<"$o")
    ERR=$(<"$e")
    return 0
}

# capture_mpi CMD...: capture CMD, a pilot command that runs an MPI task
# (pilot vet --net); when it fails and the pilot's newest task crashed in
# Open MPI's MPI_Init ("Failing at address: (nil)": Debian's Open MPI
# 4.1.4, about one launch in 50 to 100 here, docs/pipeline.md), run it
# once more, with a diag naming the crash: that bug is not pilot's, and
# the check is of what pilot does with a launch that starts.
capture_mpi() {
    local id
    capture "$@"
    [[ $RC == 0 ]] && return 0
    id=$(pilot ls --json 2>/dev/null | json 'j[-1]["id"]' 2>/dev/null) \
        || return 0
    mpi_init_crashed "$id" || return 0
    diag "task $id crashed in Open MPI's MPI_Init (docs/pipeline.md): '$*' once more"
    capture "$@"
}

# mpi_init_crashed ID: whether task ID's stderr has Open MPI's crash in
# MPI_Init (capture_mpi)
mpi_init_crashed() {
    pilot logs --stderr "$1" 2>/dev/null | grep -q 'Failing at address: (nil)'
}

# wait_for SECS CMD...: run CMD until it succeeds; 1 if it never did
wait_for() {
    local secs=$1
    shift
    local end=$((SECONDS + secs))
    while :; do
        if "$@"; then
            return 0
        fi
        ((SECONDS >= end)) && return 1
        sleep 0.2
    done
}

# json EXPR: read JSON from stdin into 'j', print EXPR (lists and dicts as
# JSON, None as 'null', True/False as 'true'/'false').  Exits 1 if stdin
# is not JSON or EXPR raises.
json() {
    "$PY" -c '
import json, sys
try:
    j = json.load(sys.stdin)
except Exception as e:
    print("json: not JSON: %s" % e, file=sys.stderr)
    sys.exit(1)
try:
    v = eval(sys.argv[1])
except Exception as e:
    print("json: %s: %r" % (sys.argv[1], e), file=sys.stderr)
    sys.exit(1)
if isinstance(v, (list, dict)) or v is None or isinstance(v, bool):
    print(json.dumps(v))
else:
    print(v)
' "$1"
}

# one_error_line DESC REGEX [RC]: after capture: RC (default 1), stdout
# empty, stderr one line "pilot: error: ..." matching REGEX.  The pattern
# is required: a check that takes any error line checks nothing.
one_error_line() {
    local desc=$1 re=${2:-} want=${3:-1}
    local nl
    if [[ -z $re ]]; then
        fail "$desc"
        diag "  one_error_line: no pattern given for the message"
        return 1
    fi
    nl=$(printf '%s' "$ERR" | grep -c '')
    if [[ $RC == "$want" && -z $OUT && $nl == 1 && $ERR == "pilot: error: "*
          && $ERR =~ $re ]]; then
        pass "$desc"
    else
        fail "$desc"
        diag "  exit status: $RC (expected $want)" "  stdout: '$OUT'" \
             "  stderr ($nl lines): '$ERR'" "  expected one line matching /$re/"
        return 1
    fi
}

# usage_error DESC REGEX: after capture: RC 2, stdout empty, stderr starts
# with "pilot: error: " and matches REGEX (required, as for one_error_line)
usage_error() {
    local desc=$1 re=${2:-}
    if [[ -z $re ]]; then
        fail "$desc"
        diag "  usage_error: no pattern given for the message"
        return 1
    fi
    if [[ $RC == 2 && -z $OUT && $ERR == "pilot: error: "* && $ERR =~ $re ]]
    then
        pass "$desc"
    else
        fail "$desc"
        diag "  exit status: $RC (expected 2)" "  stdout: '$OUT'" \
             "  stderr: '$ERR'" "  expected to match /$re/"
        return 1
    fi
}

# --- pilots ----------------------------------------------------------

pilot_dir() {
    echo "$PILOT_HOME/pilots/$1"
}

# seconds since the epoch, with fractions
now() {
    date +%s.%N
}

last_start() {
    "$PY" -c '
import re, sys
t = [float(m.group(1)) for m in re.finditer(r" start (\d+\.\d+)", open(sys.argv[1]).read())]
print("%.1f" % ((max(t) - float(sys.argv[2])) * 1000) if len(t) == int(sys.argv[3]) else "?")' "$1" "$2" "$3"
}

elapsed() {
    "$PY" -c 'import sys; print("%.2f" % (float(sys.argv[2]) - float(sys.argv[1])))' "$1" "$2"
}

# pilot_up N: start a Slurm pilot of N nodes and wait until its agents are
# registered.  Sets PILOT_UP_ID (the id printed) and PILOT_UP_SECS.
pilot_up() {
    local t0 rc=0
    PILOT_UP_ID=
    t0=$(now)
    PILOT_UP_ID=$(run_timeout 180 pilot up --nodes "$1" --time 15:00 --wait \
                  --wait-timeout 120 2>"$WORK/.up.err") || rc=$?
    PILOT_UP_SECS=$(elapsed "$t0" "$(now)")
    if ((rc != 0)); then
        diag "pilot up --nodes $1 failed (exit $rc): $(<"$WORK/.up.err")"
    fi
    return $rc
}

# pilot_up_local: start a pilot on this machine, no Slurm
pilot_up_local() {
    local t0 rc=0
    PILOT_UP_ID=
    t0=$(now)
    PILOT_UP_ID=$(run_timeout 60 pilot up --local --wait \
                  2>"$WORK/.up.err") || rc=$?
    PILOT_UP_SECS=$(elapsed "$t0" "$(now)")
    if ((rc != 0)); then
        diag "pilot up --local failed (exit $rc): $(<"$WORK/.up.err")"
    fi
    return $rc
}

# pub_of FILE: the public key in a key file (its "public Z85" line)
pub_of() {
    awk '$1 == "public" { print $2; exit }' "$1"
}

# keydir DIR: a private keys directory (0700), for a client or an agent
# that is not the pilot's
keydir() {
    mkdir -p "$1" && chmod 700 "$1"
}

# the value of KEY in FILE ("key value" lines: info, endpoint)
kv() {
    [[ -r $1 ]] || return 1
    awk -v k="$2" '$1 == k { print $2; exit }' "$1"
}

# job_end JOBID: "STATE EXITCODE" of a Slurm job once it has ended
# ("COMPLETED 0:0"), from scontrol (accounting may be off); waits up to
# 30 s for it to end
job_end() {
    local st= i
    for ((i = 0; i < 150; i++)); do
        st=$(scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' \
             | awk -F= '$1 == "JobState" { s = $2 } $1 == "ExitCode" { e = $2 }
                        END { if (s != "") print s, e }')
        case $st in
        "" | PENDING* | RUNNING* | COMPLETING* | CONFIGURING* | SUSPENDED*) ;;
        *) break ;;
        esac
        sleep 0.2
    done
    echo "$st"
}

# job_gone JOBID: the Slurm job has left squeue (ended, or already purged:
# squeue then says "Invalid job id"); false for an id that is not a
# number and when squeue fails for any other reason (an empty answer from
# a squeue that could not reach slurmctld is not "gone")
job_gone() {
    local out rc=0
    [[ $1 =~ ^[1-9][0-9]*$ ]] || return 1
    out=$(squeue -h -j "$1" -o %i 2>&1) || rc=$?
    if ((rc == 0)); then
        [[ -z $out ]]
    else
        [[ $out == *"Invalid job id"* ]]
    fi
}

cleanup_job() {
    _cleanup_jobs+=("$1")
}

cleanup_hook() {
    _cleanup_hooks+=("$1")
}

# agents_up N: the pilot's status says N agents are up
agents_up() {
    [[ $(pilot status --json 2>/dev/null | json 'j["agents_up"]' 2>/dev/null) \
       == "$1" ]]
}

# is PID a live process (a zombie counts as gone)?
alive() {
    local st
    [[ -r /proc/$1/stat ]] || return 1
    st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
    [[ -n $st && $st != Z && $st != X ]]
}

# --- cleanup ---------------------------------------------------------

# _leftovers: the pids of live processes, other than this shell, whose
# environment holds exactly our PILOT_HOME
_leftovers() {
    local pid
    for pid in $(grep -lsaF "PILOT_HOME=$PILOT_HOME" /proc/[0-9]*/environ \
                 2>/dev/null | cut -d/ -f3); do
        [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
        # the exact variable, not a prefix of another home
        tr '\0' '\n' 2>/dev/null <"/proc/$pid/environ" \
            | grep -qxF "PILOT_HOME=$PILOT_HOME" || continue
        alive "$pid" && echo "$pid"
    done
}

_cleanup() {
    local rc=$? d id job pid
    trap - EXIT
    if ((_tap_failed > 0)) && ((rc == 0)); then
        rc=1
    fi
    if ((_tap_planned > 0 && _tap_n != _tap_planned)) && ((rc == 0)); then
        rc=1
    fi
    local jobs=("${_cleanup_jobs[@]}")
    for d in "$PILOT_HOME"/pilots/*/; do
        [[ -d $d ]] || continue
        id=$(basename "$d")
        run_timeout 30 pilot down --pilot "$id" >/dev/null 2>&1
        job=$(kv "$d/info" job)
        [[ -n $job && $job != 0 ]] && jobs+=("$job")
        job=$(kv "$d/endpoint" job)
        [[ -n $job && $job != 0 ]] && jobs+=("$job")
    done
    for job in "${jobs[@]}"; do
        # only our pilots' jobs, and only while they are still there
        if squeue -h -j "$job" -o %j 2>/dev/null | grep -q '^pilot'; then
            scancel "$job" 2>/dev/null
        fi
    done
    # processes left behind: those started for this test carry our
    # PILOT_HOME in their environment.  'pilot down' (and scancel, whose
    # KillWait is 5 s on the dev cluster) must have ended every agent,
    # pilotd and task process: one still alive 15 s later fails the test,
    # and is killed so that it cannot disturb the next one.
    # (PILOT_E2E_LEFTOVER_WAIT: t0000 shortens the wait for its own runs.)
    local left=() end=$((SECONDS + ${PILOT_E2E_LEFTOVER_WAIT:-15}))
    while :; do
        mapfile -t left < <(_leftovers)
        ((${#left[@]} == 0 || SECONDS >= end)) && break
        sleep 0.2
    done
    for pid in "${left[@]}"; do
        echo "pilot e2e: $TEST_NAME: process $pid outlived the test's" \
             "pilots: $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" >&2
        kill -KILL "$pid" 2>/dev/null
        rc=1
    done
    # a sanitizer report from pilotd or an agent (make asan) fails the
    # test even when every check passed: those processes only log it
    local f
    for f in "$PILOT_HOME"/pilots/*/logs/* "$WORK"/sbatch-*.out \
             "$WORK"/pilotd-*.out; do
        [[ -f $f ]] || continue
        if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$f"; then
            echo "pilot e2e: $TEST_NAME: sanitizer report in $f" >&2
            rc=1
        fi
    done
    if ((rc != 0)); then
        for f in "$PILOT_HOME"/pilots/*/logs/* "$WORK"/*.log "$WORK"/sbatch-*.out
        do
            [[ -f $f ]] || continue
            {
                echo "---- tail of $f"
                tail -n 40 "$f"
            } >&2
        done
    fi
    local i
    for ((i = ${#_cleanup_hooks[@]} - 1; i >= 0; i--)); do
        if ! eval "${_cleanup_hooks[i]}"; then
            echo "pilot e2e: $TEST_NAME: cleanup hook failed:" \
                 "${_cleanup_hooks[i]}" >&2
            rc=1
        fi
    done
    if ((rc != 0)); then
        echo "pilot e2e: $TEST_NAME failed; its files are kept in $WORK" >&2
    else
        rm -rf "$WORK"
    fi
    exit $rc
}
trap _cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
