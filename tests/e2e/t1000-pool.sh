#!/bin/bash
# t1000-pool.sh - a pool of MPI workers on a 4-node Slurm pilot: C and
# Python functions on a communicator made per task, concurrent tasks on
# disjoint workers, arrays and dependencies, refusals, a crash (the pool
# restarts, the task beside it runs again), cancel and timeout (both
# take the pool down), the join example against its one-process check,
# NCCL without a GPU, and stop.
. "$(dirname "$0")/lib.sh"

plan 60

command -v mpicc >/dev/null || abort "mpicc is missing (scripts/install-deps.sh)"
[[ -x $PILOT_BIN/pilot-worker ]] || abort "$PILOT_BIN/pilot-worker is missing (make worker)"

cat >"$WORK/tfn.c" <<'EOC'
#define _GNU_SOURCE
#include <pilot_fn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

int allreduce(const struct pilot_fn_ctx *ctx, int argc, char **argv)
{
    int one = ctx->rank + 1, sum = 0, want = ctx->size * (ctx->size + 1) / 2;
    char host[64];
    gethostname(host, sizeof(host));
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, ctx->comm);
    printf("c rank %d of %d on %s world %d sum %d %s arg %s\n", ctx->rank,
           ctx->size, getenv("PILOT_NODE") ? getenv("PILOT_NODE") : host,
           ctx->world_rank, sum, sum == want ? "right" : "WRONG",
           argc > 1 ? argv[1] : "-");
    return sum == want ? 0 : 1;
}

/* nap S: both ends stamped, a barrier at each */
int nap(const struct pilot_fn_ctx *ctx, int argc, char **argv)
{
    int one = 1, n = 0;
    MPI_Barrier(ctx->comm);
    printf("start %.3f world %d task %llu\n", now(), ctx->world_rank,
           ctx->task_id);
    fflush(stdout);
    usleep((useconds_t)(atof(argc > 1 ? argv[1] : "1") * 1e6));
    MPI_Allreduce(&one, &n, 1, MPI_INT, MPI_SUM, ctx->comm);
    printf("end %.3f world %d n %d\n", now(), ctx->world_rank, n);
    return n == ctx->size ? 0 : 1;
}

int segv(const struct pilot_fn_ctx *ctx, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    if (ctx->rank == 1) {
        usleep(300000);
        raise(SIGSEGV);
    }
    MPI_Barrier(ctx->comm); /* rank 1 never comes */
    return 0;
}

int codes(const struct pilot_fn_ctx *ctx, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return ctx->rank + 3;
}

int gpuinfo(const struct pilot_fn_ctx *ctx, int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("nccl %s error %s cuda %d visible %s\n",
           ctx->nccl ? "yes" : "NULL",
           ctx->nccl_error ? ctx->nccl_error : "-", ctx->cuda_device,
           getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES")
                                          : "unset");
    return 0;
}
EOC
cat >"$WORK/tpool.py" <<'EOP'
def allreduce(ctx, *args):
    s = ctx.comm.allreduce(ctx.rank + 1)
    want = ctx.size * (ctx.size + 1) // 2
    print("py rank %d of %d sum %d %s task %d args %s" % (
        ctx.rank, ctx.size, s, "right" if s == want else "WRONG",
        ctx.task_id, ",".join(args)))
    return 0 if s == want else 1
EOP
ok "the test functions build" \
    mpicc -O1 -shared -fPIC -I"$REPO/worker" -o "$WORK/tfn.so" "$WORK/tfn.c"
EX=$REPO/examples/pool
ok "the join example builds" \
    mpicc -O2 -shared -fPIC -I"$REPO" -I"$REPO/worker" -o "$WORK/libpoolex.so" \
    "$EX/join.c" "$EX/sort.c" "$EX/exch.c" "$EX/table.c" -lm
ok "its checker builds" \
    cc -O2 -I"$REPO" -o "$WORK/poolcheck" "$EX/poolcheck.c" "$EX/table.c" -lm
F=$WORK/tfn.so
cd "$WORK" || abort "no $WORK"

pilot_up 4 || abort "no pilot"

# --- start ---------------------------------------------------------
capture pilot pool start --name etl --ranks-per-node 2 --wait \
    --wait-timeout 120
is "$RC" 0 "pool start --wait exits 0 ($ERR)"
like "$OUT" "^pool etl: 8 workers \(2 per node\), ready in [0-9.]+ s \(job [0-9]+\)$" \
    "it says 8 workers are ready, and in how long"
capture pilot pool ls --json
is "$(json 'j[0]["state"], j[0]["workers"], j[0]["ready"], j[0]["nodes"]' <<<"$OUT")" \
    "('ready', 8, 8, 4)" "pool ls: ready, 8 workers on 4 nodes"
JOB=$(json 'j[0]["job"]' <<<"$OUT")
capture pilot status --json
is "$(json 'sum(n["cores_busy"] for n in j["nodes"])' <<<"$OUT")" 8 \
    "status: the pool holds the 8 cores"
capture pilot ls --json
is "$(json 'len(j)' <<<"$OUT")" 0 "pilot ls does not list the pool's job"
capture pilot cancel "$JOB"
one_error_line "cancel of the pool's job is refused" "a pool's job: pilot pool stop"
capture pilot pool start --name etl --ranks-per-node 1
one_error_line "a second pool of that name is refused" "pool etl exists"
capture pilot pool start --name big --ranks-per-node 3
one_error_line "a pool larger than the nodes is refused" "."
capture pilot pool start --name '.x' --ranks-per-node 1
usage_error "a bad pool name is a usage error" "not a pool's name"

# --- C and Python functions ----------------------------------------
C1=$(pilot submit --pool etl --ranks 4 --nodes 2 --fn "$F:allreduce" -- hello)
P1=$(pilot submit --pool etl --ranks 4 --py tpool:allreduce -- a b)
capture pilot wait "$C1" "$P1" --timeout 60
is "$RC" 0 "the C and the Python task end done"
OUTC=$(pilot logs "$C1")
is "$(grep -c 'sum 10 right arg hello$' <<<"$OUTC")" 4 \
    "C: MPI_Allreduce over the task's communicator is right on all 4 ranks"
is "$(grep -o ' on n[0-9]*' <<<"$OUTC" | sort -u | wc -l)" 2 \
    "C: --nodes 2 puts the ranks on 2 nodes"
# (grep -o: under PYTHONUNBUFFERED two ranks' print() may interleave
# their text and newline in the task's one file, as for any task)
is "$(pilot logs "$P1" | grep -o "sum 10 right task $P1 args a,b" | wc -l)" 4 \
    "Python: mpi4py's allreduce on ctx.comm is right on all 4 ranks"
capture pilot show "$C1" --json
is "$(json 'j["exit_code"], j["attempts"], j["state"]' <<<"$OUT")" "(0, 1, 'done')" \
    "show: done, exit code 0, one attempt"

# --- refusals ------------------------------------------------------
capture pilot submit --pool etl --ranks 9 --fn "$F:allreduce"
one_error_line "9 ranks in a pool of 8 workers are refused at submit" \
    "pool etl has 8 workers .*wants 9 ranks"
capture pilot submit --pool nope --fn "$F:allreduce"
one_error_line "an unknown pool is refused" "no pool is named 'nope'"
capture pilot submit --pool etl --fn nocolon
one_error_line "--fn without :SYMBOL is refused" "want LIB.so:SYMBOL"
capture pilot submit --pool etl --py 'bad-mod:f'
one_error_line "--py with a bad module is refused" "want MODULE:FUNCTION"
capture pilot submit --pool etl --cores-per-rank 2 --fn "$F:allreduce"
one_error_line "--cores-per-rank on a pool task is refused" "the pool's workers"
capture pilot submit --fn "$F:allreduce"
usage_error "--fn without --pool is a usage error" "give --pool"

# --- exit codes, arrays, dependencies ------------------------------
X=$(pilot submit --pool etl --ranks 3 --fn "$F:codes")
A=$(pilot submit --pool etl --ranks 2 --array 0-5 --fn "$F:allreduce" -- 'i{}')
D=$(pilot submit --after "$A" --pool etl --fn "$F:allreduce" -- after)
capture pilot wait "$X" "$A" "$D" --timeout 60
capture pilot show "$X" --json
is "$(json 'j["state"], j["exit_code"]' <<<"$OUT")" "('failed', 5)" \
    "a task's exit code is the largest of its ranks' returns (3, 4, 5)"
capture pilot ls "$A" --json
is "$(json 'sorted(set(t["state"] for t in j)), len(j)' <<<"$OUT")" "(['done'], 6)" \
    "an array of 6 pool tasks: all done"
is "$(pilot logs "$A.4" | grep -c 'sum 3 right arg i4$')" 2 \
    "{} is the element's index in a pool task's arguments"
is "$(pilot show "$D" --json | json 'j["state"]'),$(pilot logs "$D" | grep -c 'arg after$')" done,1 \
    "a task --after a pool array ran after it"

# --- concurrency: 8 two-rank tasks on 8 workers --------------------
N=()
for i in 1 2 3 4 5 6 7 8; do
    N+=("$(pilot submit --pool etl --ranks 2 --ranks-per-node 2 --fn "$F:nap" -- 1.5)")
done
capture pilot wait "${N[@]}" --timeout 60
is "$RC" 0 "8 two-rank tasks all end done"
for t in "${N[@]}"; do pilot logs "$t"; done >"$WORK/naps"
is "$(grep -c '^end .* n 2$' "$WORK/naps")" 16 "each rank saw its task's 2 ranks"
# tasks running at the same time ran on disjoint workers, 4 at a time
# (the functions' own stamps: one clock, the nodes share the machine)
"$PY" - "${N[@]}" >"$WORK/overlap" <<'EOP'
import sys, re, subprocess
spans = {}
for t in sys.argv[1:]:
    log = subprocess.check_output(["pilot", "logs", t]).decode()
    st = [float(x) for x in re.findall(r"^start (\S+)", log, re.M)]
    en = [float(x) for x in re.findall(r"^end (\S+)", log, re.M)]
    w = set(int(x) for x in re.findall(r"^start \S+ world (\d+)", log, re.M))
    spans[t] = (max(st), min(en), w)
most = max(sum(1 for (c, d, _) in spans.values() if c <= a < d)
           for (a, b, _) in spans.values())
clash = sum(1 for t, (a, b, w) in spans.items()
            for u, (c, d, x) in spans.items()
            if u != t and c < b and a < d and w & x)
print(most, clash)
EOP
read -r MOST CLASH <"$WORK/overlap"
is "$MOST" 4 "4 two-rank tasks ran at once (8 workers)"
is "$CLASH" 0 "tasks running at once never shared a worker"

# --- a crash takes the pool down; the task beside it runs again -----
B=$(pilot submit --pool etl --ranks 2 --nodes 1 --fn "$F:nap" -- 3)
wait_for 20 sh -c "pilot show $B --json | grep -q '\"state\": \"running\"'"
S=$(pilot submit --pool etl --ranks 2 --fn "$F:segv")
capture pilot wait "$S" --timeout 60
capture pilot show "$S" --json
is "$(json 'j["state"], j["signal"]' <<<"$OUT")" "('failed', 11)" \
    "the function that segfaults fails its task with signal 11"
like "$(json 'j["reason"]' <<<"$OUT")" "rank 1: killed by signal 11 \(Segmentation fault\) in the function" \
    "the reason names the rank and the signal"
capture pilot wait "$B" --timeout 90
capture pilot show "$B" --json
is "$(json 'j["state"], j["attempts"]' <<<"$OUT")" "('done', 2)" \
    "the task running beside it was requeued and then done"
capture pilot pool ls --json
is "$(json 'j[0]["state"], j[0]["restarts"]' <<<"$OUT")" "('ready', 1)" \
    "the pool restarted by itself, once"
like "$(json 'j[0].get("last_restart_s", -1)' <<<"$OUT")" "^[0-9]+\.[0-9]+$" \
    "pool ls says how long the restart took"
AFTER=$(pilot submit --pool etl --ranks 4 --fn "$F:allreduce" -- again)
capture pilot wait "$AFTER" --timeout 60
is "$(pilot logs "$AFTER" | grep -c 'right arg again$')" 4 \
    "the restarted pool serves the next task"

# --- cancel and timeout ---------------------------------------------
L=$(pilot submit --pool etl --ranks 2 --fn "$F:nap" -- 300)
wait_for 20 sh -c "pilot show $L --json | grep -q '\"state\": \"running\"'"
capture pilot cancel "$L"
is "$RC" 0 "cancel of a long pool task exits 0"
capture pilot wait "$L" --timeout 60
is "$(pilot show "$L" --json | json 'j["state"]')" canceled \
    "the long pool task ends canceled"
T=$(pilot submit --pool etl --ranks 2 --timeout 2 --fn "$F:nap" -- 300)
capture pilot wait "$T" --timeout 90
capture pilot show "$T" --json
is "$(json 'j["state"]' <<<"$OUT")" timeout "a pool task past its --timeout ends timeout"
like "$(json 'j["reason"]' <<<"$OUT")" "timeout after 2 s" "its reason says so"
wait_for 60 sh -c "pilot pool ls --json | grep -q '\"state\": \"ready\"'"
capture pilot pool ls --json
is "$(json 'j[0]["state"], j[0]["restarts"]' <<<"$OUT")" "('ready', 3)" \
    "cancel and timeout each restarted the pool"

# --- the join example against its one-process check -----------------
J=$(pilot submit --pool etl --ranks 4 --fn "$WORK/libpoolex.so:join" -- 200000 150000 5000 0.8 7)
capture pilot wait "$J" --timeout 120
is "$RC" 0 "the join runs done in the pool"
is "$(pilot logs "$J")" "$("$WORK/poolcheck" join 200000 150000 5000 0.8 7)" \
    "the join's result is the one-process computation's"
SRT=$(pilot submit --pool etl --ranks 3 --fn "$WORK/libpoolex.so:sort" -- 300000 1000 1.1 3)
capture pilot wait "$SRT" --timeout 120
is "$(pilot logs "$SRT")" "$("$WORK/poolcheck" sort 300000 1000 1.1 3)" \
    "the sort's result is the one-process computation's"

# --- pilotd killed: the pool is taken back --------------------------
DIR=$(pilot_dir "$PILOT_UP_ID")
R0=$(pilot pool ls --json | json 'j[0]["restarts"]')
kill -9 "$(sed -n 's/^pid \([0-9]*\)$/\1/p' "$DIR/endpoint")"
wait_for 60 sh -c "pilot pool ls 2>/dev/null | grep -q ' ready '"
capture pilot pool ls --json
is "$(json 'j[0]["state"], j[0]["restarts"]' <<<"$OUT")" "('ready', $R0)" \
    "after pilotd's kill -9 the idle pool is taken back, not restarted"
K1=$(pilot submit --pool etl --ranks 2 --fn "$F:nap" -- 3)
K2=$(pilot submit --pool etl --ranks 4 --fn "$F:allreduce" -- k2)
wait_for 20 sh -c "pilot show $K1 --json | grep -q '\"state\": \"running\"'"
kill -9 "$(sed -n 's/^pid \([0-9]*\)$/\1/p' "$DIR/endpoint")"
sleep 0.5
wait_for 60 sh -c "pilot pool ls >/dev/null 2>&1"
capture pilot wait "$K1" "$K2" --timeout 120
is "$RC" 0 "a task running at the kill runs again, and the one queued runs: both done"
is "$(pilot logs "$K2" | grep -c 'right arg k2$')" 4 "... with the right sums"

# --- stop ----------------------------------------------------------
Q=$(pilot submit --pool etl --ranks 8 --fn "$F:nap" -- 30)
Q2=$(pilot submit --pool etl --ranks 2 --fn "$F:nap" -- 1)
wait_for 20 sh -c "pilot show $Q --json | grep -q '\"state\": \"running\"'"
capture pilot pool stop etl
is "$RC" 0 "pool stop exits 0"
capture pilot wait "$Q" "$Q2" --timeout 60
is "$(pilot show "$Q" --json | json 'j["state"]'),$(pilot show "$Q2" --json | json 'j["state"]')" \
    "canceled,canceled" "its running and queued tasks end canceled"
wait_for 30 sh -c "pilot pool ls --json | grep -q '^\[\]$'"
is "$(pilot pool ls --json)" "[]" "the pool is gone"
wait_for 30 sh -c "pilot status --json | $PY -c 'import json,sys; sys.exit(sum(n[\"cores_busy\"] for n in json.load(sys.stdin)[\"nodes\"]))'"
capture pilot status --json
is "$(json 'sum(n["cores_busy"] for n in j["nodes"])' <<<"$OUT")" 0 \
    "its cores are free again"
capture pilot submit --pool etl --fn "$F:allreduce"
one_error_line "a task for the stopped pool is refused" "no pool is named 'etl'"

# --- NCCL without a GPU ---------------------------------------------
capture pilot pool start --name gpu --nodes 1 --ranks-per-node 2 --gpus-per-rank 1 --wait
is "$RC" 0 "a pool with --gpus-per-rank starts where there is no real GPU ($ERR)"
G=$(pilot submit --pool gpu --ranks 2 --fn "$F:gpuinfo")
capture pilot wait "$G" --timeout 60
is "$RC" 0 "its task runs done"
GL=$(pilot logs "$G")
is "$(grep -c '^nccl NULL error [^-]' <<<"$GL")" 2 \
    "ctx->nccl is NULL and ctx->nccl_error says why, on each rank"
GJOB=$(pilot pool ls --json | json 'j[0]["job"]')
like "$(pilot logs --stderr "$GJOB")" "NCCL not used: " \
    "the pool's log (pilot logs --stderr JOB) says why NCCL is not used"
is "$(grep -c 'visible [0-9]' <<<"$GL")" 2 "each worker sees its GPU (CUDA_VISIBLE_DEVICES)"
capture pilot pool stop gpu
is "$RC" 0 "the GPU pool stops"
capture pilot wait --all --timeout 60
is "$RC" 1 "wait --all ends (the pools' jobs are not waited for); some tasks failed"
