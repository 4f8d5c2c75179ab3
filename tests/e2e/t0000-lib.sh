#!/bin/bash
# t0000-lib.sh - the checks of lib.sh fail when what they check is absent:
# an error-line check given no pattern or the wrong one, 'lacks' on a file
# that is not there, job_gone when squeue fails, a process left running after the test, a plan not
# met; 'skip' is reported as a skip.  Each case is a small test script run
# here as prove would run it, its TAP and exit status read back.  No pilot.
. "$(dirname "$0")/lib.sh"

plan 14

# run_case NAME: run $WORK/NAME.sh (written by the caller), which sources
# lib.sh; sets C_OUT (its TAP), C_ERR and C_RC
run_case() {
    C_RC=0
    PILOT_E2E_LEFTOVER_WAIT=1 run_timeout 60 bash "$WORK/$1.sh" \
        >"$WORK/$1.out" 2>"$WORK/$1.err" || C_RC=$?
    C_OUT=$(<"$WORK/$1.out")
    C_ERR=$(<"$WORK/$1.err")
    # a case that fails keeps its directory, as any test does: not here
    local kept
    kept=$(sed -n 's/.* failed; its files are kept in \(\/tmp\/pilot-e2e-.*\)$/\1/p' \
           <<<"$C_ERR")
    [[ -n $kept ]] && rm -rf "$kept"
}
# case_script NAME BODY: a test script that sources lib.sh, then BODY
case_script() {
    printf '#!/bin/bash\n. %q\n%s\n' "$REPO/tests/e2e/lib.sh" "$2" >"$WORK/$1.sh"
}

# --- one_error_line ----------------------------------------------------
case_script err-nopat 'plan 1
ERR="pilot: error: something else entirely"; OUT=; RC=1
one_error_line "no task 999999"'
run_case err-nopat
is "$C_RC" 1 "one_error_line with no pattern fails the test"
like "$C_OUT" "not ok 1 - no task 999999" "... at that point"

case_script err-wrong 'plan 2
ERR="pilot: error: after: no task 123"; OUT=; RC=1
one_error_line "the right id" "^pilot: error: after: no task 123\$"
one_error_line "another id" "^pilot: error: after: no task 999999\$"'
run_case err-wrong
like "$C_OUT" $'ok 1 - the right id\nnot ok 2 - another id' \
    "one_error_line passes the message it names and fails another"
is "$C_RC" 1 "... and the test exits 1"

case_script usage-nopat 'plan 1
ERR="pilot: error: bad"; OUT=; RC=2
usage_error "a usage error"'
run_case usage-nopat
is "$C_RC" 1 "usage_error with no pattern fails the test"

# --- lacks --------------------------------------------------------------
case_script lacks 'plan 3
printf "all good\n" >"$WORK/clean"
printf "one restart here\n" >"$WORK/dirty"
lacks "a clean file" restart "$WORK/clean"
lacks "a file with the pattern" restart "$WORK/dirty"
lacks "a file that is not there" restart "$WORK/missing"'
run_case lacks
like "$C_OUT" $'ok 1 - a clean file\nnot ok 2 - a file with the pattern' \
    "lacks passes a clean file and fails one with the pattern"
like "$C_OUT" "not ok 3 - a file that is not there" "lacks fails on a missing file"
like "$C_OUT" "#   .*/missing: no such file" "... saying so"

# --- skip ----------------------------------------------------------------
case_script skip 'plan 1
skip "the first attempt" "it crashed in MPI_Init"'
run_case skip
is "$C_RC|$C_OUT" "0|1..1
ok 1 - the first attempt # SKIP it crashed in MPI_Init" \
    "skip: TAP's SKIP directive with the reason, the test passes"

# --- a process left behind -------------------------------------------------
case_script leftover 'plan 1
pass "all checks pass"
setsid sleep 300 </dev/null >/dev/null 2>&1 &
echo "$!" >"'"$WORK"'/leftover.pid"'
run_case leftover
LPID=$(<"$WORK/leftover.pid")
is "$C_RC" 1 "a test that leaves a process running fails, every check passed"
like "$C_ERR" "process $LPID outlived the test's pilots: sleep 300" \
    "... naming the process"
ok "... and the process is killed" wait_for 5 eval '! alive "$LPID"'

# --- job_gone ---------------------------------------------------------------
# a squeue that fails (here: given an empty configuration file, so that
# it stops at once) prints nothing on stdout: that is not a job gone
: >"$WORK/empty.conf"
case_script gone 'plan 2
SLURM_CONF='"$WORK"'/empty.conf nok "squeue failing: not gone" job_gone 5
nok "an id that is not a number: not gone" job_gone ""'
run_case gone
is "$C_RC|$(grep -c '^ok' <<<"$C_OUT")" "0|2" \
    "job_gone is false when squeue fails and for an empty id"

# --- the plan --------------------------------------------------------------
case_script short 'plan 3
pass one
pass two'
run_case short
is "$C_RC" 1 "a test that runs fewer points than its plan fails"
