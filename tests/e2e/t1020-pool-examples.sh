#!/bin/bash
# t1020-pool-examples.sh - the pool examples (issue 13, examples/pool/):
# join and sort of libpoolex.so, each rank in pilot-worker --once under
# mpirun -n 4, print the line poolcheck computes in one process, for
# uniform and skewed keys, tables of fewer rows than ranks, and 1M rows;
# their OUTDIR parts hold the pairs and the sorted table; bad arguments
# end every rank with 1.  The Python sort_table, under mpirun without a
# pool, prints the same line as the C sort.  No pilot is started.
. "$(dirname "$0")/lib.sh"

plan 33

command -v mpirun >/dev/null || abort "mpirun is missing (scripts/install-deps.sh installs it)"
"$PY" -c 'import mpi4py, numpy' 2>/dev/null \
    || abort "$PY lacks mpi4py or numpy (scripts/install-deps.sh installs them)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# under make asan pilot-worker is built with ASan: Open MPI's and
# Python's own allocations at exit are not ours to report (t1010's list;
# our code's leaks are still reported)
export LSAN_OPTIONS="suppressions=$REPO/tests/e2e/worker-lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export ASAN_OPTIONS="fast_unwind_on_malloc=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
MPIRUN=(mpirun -n 4 --oversubscribe)

# a build of our own: the examples' rules add -Werror, and the main
# build's .flags stay as 'make check' wrote them
B=$WORK/build
CAPTURE_TIMEOUT=300 capture make -C "$REPO" -j2 BUILD="$B" examples
is "$RC" 0 "make examples builds libpoolex.so and poolcheck" \
    || { diag "$(tail -n 20 <<<"$ERR")"; abort "no examples"; }
LIB=$B/examples/libpoolex.so
CHECK=$B/examples/poolcheck
is "$(nm -D --defined-only "$LIB" | awk '$2 == "T" { print $3 }' | sort | xargs)" \
    "join sort" "libpoolex.so exports join and sort, nothing else"

# poolcheck itself: the line depends on every argument
capture "$CHECK" join 1000 1000 100 0.5 1
A=$OUT
capture "$CHECK" join 1000 1000 100 0.5 2
like "$A" '^join left=1000 right=1000 keys=100 skew=0.5 seed=1 matches=[0-9]+ checksum=[0-9]+$' \
    "poolcheck join prints the join line"
ok "another seed gives another result" test "${OUT##*matches=}" != "${A##*matches=}"
capture "$CHECK" sort 1000 100 1.2 1
like "$OUT" '^sort rows=1000 keys=100 skew=1.2 seed=1 checksum=[0-9]+ ok$' \
    "poolcheck sort prints the sort line"

# --- Python: etl.jobs.sort_table on MPI_COMM_WORLD ----------------------
export PYTHONPATH=$REPO/examples/pool
py_sort() {
    local want
    want=$("$CHECK" sort "$@")
    capture "${MPIRUN[@]}" "$PY" -m etl.jobs "$@"
    is "$RC:$OUT" "0:$want" "python sort_table $* on 4 ranks = poolcheck"
}
py_sort 200000 100000 0 3
py_sort 200000 1000 1.2 4
py_sort 3 1 0 5
"$PY" -c '
import random
r = random.Random(7)
for i in range(5001):
    print(r.randrange(40), r.randrange(2**64))' >"$WORK/rows.txt"
capture mpirun -n 1 "$PY" -m etl.jobs "$WORK/rows.txt"
ONE=$OUT
capture "${MPIRUN[@]}" "$PY" -m etl.jobs "$WORK/rows.txt" 0 0 0 "$WORK/py"
is "$RC:$OUT" "0:$ONE" "python sort_table of a text file: 4 ranks = 1 rank"
c=${ONE##*checksum=}
capture "$CHECK" sorted "$WORK"/py/part-{0,1,2,3}
is "$RC:$OUT" "0:rows=5001 checksum=${c% ok}" \
    "its parts, read in rank order, are the sorted file"

# --- C: the pool functions in pilot-worker --once -----------------------
WORKER=$PILOT_BIN/pilot-worker
if [[ ! -x $WORKER ]]; then
    fail "pilot-worker is built"
    abort "$WORKER is missing: the pool worker (worker/) must be built by 'make' before this test"
fi
pass "pilot-worker is built"

# fn FN ARGS...: run LIB:FN ARGS on 4 ranks, one pilot-worker each
fn() {
    local f=$1
    shift
    capture "${MPIRUN[@]}" "$WORKER" --once "$LIB:$f" "$@"
}

same() {
    local f=$1 want
    shift
    want=$("$CHECK" "$f" "$@")
    fn "$f" "$@"
    is "$RC:$OUT" "0:$want" "$f $* on 4 ranks = poolcheck" \
        || diag "stderr: $(tail -n 5 <<<"$ERR")"
}

same join 0 0 1 0 1
same join 3 2 7 0 4
same join 20000 30000 5000 1.2 7
same join 1000000 1000000 100000 0.5 1
same join 200000 100000 18446744073709551615 0.8 9
same sort 0 1 0 1
same sort 3 1 0 3
same sort 50000 100 1.2 4
same sort 1000000 100000 0.5 1
same sort 100000 1 0 6

# the parts: every joined pair, the sorted table
want=$("$CHECK" join 20000 30000 5000 0.8 4)
fn join 20000 30000 5000 0.8 4 "$WORK/j/deeper"
is "$RC:$OUT" "0:$want" "join with OUTDIR prints the same line"
capture "$CHECK" pairs "$WORK"/j/deeper/part-{0,1,2,3}
is "$RC:$OUT" "0:matches=${want#* matches=}" \
    "its parts hold each joined pair once"
want=$("$CHECK" sort 50000 100 1.2 4)
fn sort 50000 100 1.2 4 "$WORK/s"
is "$RC:$OUT" "0:$want" "sort with OUTDIR prints the same line"
capture "$CHECK" sorted "$WORK"/s/part-{0,1,2,3}
c=${want#*checksum=}
is "$RC:$OUT" "0:rows=50000 checksum=${c% ok}" \
    "its parts, in rank order, are the sorted table"
# each part holds some of the skewed table: the splitters spread key 0
sizes=$(stat -c %s "$WORK"/s/part-{0,1,2,3} | xargs)
ok "the skewed sort's parts are within 10% of an even share ($sizes)" \
    "$PY" -c 'import sys; s = [int(x) for x in sys.argv[1:]]
sys.exit(not all(abs(x - 200000) < 20000 for x in s))' $sizes
capture "$CHECK" sorted "$WORK"/s/part-{3,2,1,0}
is "$RC" 2 "poolcheck sorted fails the parts out of order"

# errors: every rank ends with 1, rank 0 says why
fn join 1 2 3
is "$RC" 1 "join with too few arguments exits 1"
like "$ERR" 'usage: join LEFT_ROWS RIGHT_ROWS KEYS SKEW SEED' "and prints its usage"
fn sort 10 5 -1 1
is "$RC" 1 "sort with a negative skew exits 1"
like "$ERR" 'sort: SKEW is a number' "and says so"
fn join 1000000 1000000 1000 2 1 "$WORK/big"
is "$RC" 1 "join refuses to write billions of pairs to OUTDIR"
like "$ERR" 'pairs to write, more than' "and says why"
