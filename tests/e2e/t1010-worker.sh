#!/bin/bash
# t1010-worker.sh - pilot-worker alone: pools of 2 and 4 ranks under
# mpirun, and of 4 on 2 nodes of the dev cluster under srun --mpi=pmix,
# with tests/tools/wdriver playing the nodes' agents (no pilot).
# C and Python functions get the right communicator (an allreduce on 4
# ranks, two 2-rank calls at once on disjoint groups, one of them in
# reverse world order), their arguments, environment, directory, context
# and output files; a missing symbol or module is 127 on every rank, a
# rank that cannot open its files 126 (and 127 for the others); return
# codes, a Python exception (1, traceback in the err file) and
# SystemExit; a segfault, a stack overflow and exit() in a function are
# CRASH frames (11, 11, 0); the pool ends cleanly when the agent closes
# the sockets; --once runs a function as a plain MPI program; and with
# PILOT_POOL_GPUS=1 on a machine without a GPU, NCCL is reported unused
# (HELLO, the pool's log, ctx->nccl_error) and calls still run.
. "$(dirname "$0")/lib.sh"

plan 67

WORKER=${WORKER:-$PILOT_BIN/pilot-worker}
WDRIVER=${WDRIVER:-$PILOT_BIN/../tests/wdriver}
ok "pilot-worker is built ($WORKER)" test -x "$WORKER" \
    || abort "no pilot-worker: run 'make worker'"
ok "wdriver is built ($WDRIVER)" test -x "$WDRIVER" \
    || abort "no wdriver: run 'make test'"
command -v mpicc >/dev/null || abort "mpicc is missing (scripts/install-deps.sh)"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# a sanitizer build (make asan): what Open MPI and Python keep at exit is
# not ours (the file says what it hides); their libraries have no frame
# pointers, so a leak's stack needs the slow unwinder to reach them
export LSAN_OPTIONS="suppressions=$REPO/tests/e2e/worker-lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export ASAN_OPTIONS="fast_unwind_on_malloc=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
# the function library's C and Python sources are in the test
W=$(cd "$WORK" && pwd -P)
HERE=$(pwd -P) # the pool's directory: mpirun's
mkdir -p "$W/sub" "$W/dir0"

# --- the functions --------------------------------------------------------
cat >"$W/tfn.c" <<'EOC'
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <pilot_fn.h>

/* MPI_Allreduce of rank + 1 over ctx->comm: 0 if right */
int sum(const struct pilot_fn_ctx *ctx, int argc, char **argv)
{
    int one = ctx->rank + 1, s = 0;
    MPI_Allreduce(&one, &s, 1, MPI_INT, MPI_SUM, ctx->comm);
    printf("sum=%d rank=%d size=%d world=%d argc=%d\n", s, ctx->rank,
           ctx->size, ctx->world_rank, argc);
    fprintf(stderr, "stderr of rank %d\n", ctx->rank);
    return s == ctx->size * (ctx->size + 1) / 2 ? 0 : 2;
}

int three(const struct pilot_fn_ctx *ctx, int argc, char **argv)
{
    (void)ctx, (void)argc, (void)argv;
    return 3;
}

int ctxinfo(const struct pilot_fn_ctx *ctx, int argc, char **argv)
{
    char cwd[4096];
    const char *x = getenv("PLT_X");
    printf("ctx version=%d rank=%d size=%d task=%llu attempt=%u index=%lld "
           "outdir=%s pool=%s world=%d/%d cuda=%d nccl=%s cwd=%s x=%s "
           "argc=%d", ctx->version, ctx->rank, ctx->size, ctx->task_id,
           ctx->attempt, ctx->array_index, ctx->outdir, ctx->pool,
           ctx->world_rank, ctx->world_size, ctx->cuda_device,
           ctx->nccl ? "set" : "NULL", getcwd(cwd, sizeof(cwd)),
           x ? x : "unset", argc);
    for (int i = 0; i < argc; i++)
        printf(" %s", argv[i]);
    printf("\nnccl_error=%s\n", ctx->nccl_error ? ctx->nccl_error : "-");
    return argv[argc] == NULL ? 0 : 9;
}

int segv(const struct pilot_fn_ctx *ctx, int argc, char **argv)
{
    int *volatile p = NULL; /* the compiler cannot see it is NULL */
    (void)argc, (void)argv;
    printf("segv rank %d\n", ctx->rank);
    fflush(stdout);
    if (ctx->rank == 1)
        *p = 1;
    return 0;
}

static int deep(volatile char *up, int n)
{
    volatile char pad[4096];
    pad[0] = up ? up[0] + 1 : 0;
    return deep(pad, n + 1) + pad[0]; /* no tail call */
}

int overflow(const struct pilot_fn_ctx *ctx, int argc, char **argv)
{
    (void)argc, (void)argv;
    return ctx->rank == 0 ? deep(NULL, 0) : 0;
}

int exit4(const struct pilot_fn_ctx *ctx, int argc, char **argv)
{
    (void)argc, (void)argv;
    if (ctx->rank == 0)
        exit(4);
    return 0;
}
EOC
cat >"$W/tpy.py" <<'EOP'
import os, sys

def allreduce(ctx, *args):
    s = ctx.comm.allreduce(ctx.rank + 1)
    # one write: with PYTHONUNBUFFERED, print() writes the newline
    # apart, and two ranks' lines may mix on mpirun's stdout
    sys.stdout.write("pysum=%d rank=%d size=%d args=%s index=%r y=%s "
                     "task=%d pool=%s\n"
                     % (s, ctx.rank, ctx.size, ",".join(args),
                        ctx.array_index, os.environ.get("PLT_Y"),
                        ctx.task_id, ctx.pool))
    return 0 if s == ctx.size * (ctx.size + 1) // 2 else 2

def boom(ctx):
    raise RuntimeError("boom from rank %d" % ctx.rank)

def exit5(ctx):
    sys.exit(5)
EOP
# -O0: the overflow's recursion stays a recursion
ok "mpicc builds the test functions" \
    mpicc -O0 -shared -fPIC -I"$REPO/worker" -o "$W/tfn.so" "$W/tfn.c"

# pool NAME N [ENV=VALUE...] < SCRIPT: wdriver playing the agent of node
# NAME (its prefix this test's), and an N-rank pool of workers under
# mpirun; sets DRV_RC and MPI_RC; $W/NAME.drv has wdriver's lines,
# $W/NAME.err the pool's log
PREFIX=pilot-pool-t1010-$$
pool() {
    local name=$1 n=$2 dpid
    shift 2
    cat >"$W/$name.script"
    "$WDRIVER" -t 60 "$PREFIX" "$name" "$n" <"$W/$name.script" \
        >"$W/$name.drv" 2>"$W/$name.drverr" &
    dpid=$!
    MPI_RC=0
    DRV_RC=0
    env PILOT_POOL=t1010 PILOT_POOL_SOCKET="$PREFIX" PILOT_NODE="$name" \
        PILOT_TASK_ID=77 PILOT_ATTEMPT=2 "$@" \
        timeout -k 5 90 mpirun -n "$n" --oversubscribe "$WORKER" \
        >"$W/$name.out" 2>"$W/$name.err" || MPI_RC=$?
    # wdriver ends at the end of its script, or after its own timeouts
    run_timeout 70 tail --pid="$dpid" -f /dev/null || kill "$dpid"
    wait "$dpid" || DRV_RC=$?
}
# lines of FILE matching the ERE
count() {
    grep -cE -- "$1" "$2"
}

# --- a pool of 4 -------------------------------------------------------------
pool p4 4 <<EOF
call id=1 group=0,1,2,3 fn=c argv=./tfn.so:sum cwd=$W out=o1.%r err=e1.%r
wait
# two at once, the second in reverse world order
call id=2 group=0,1 fn=c argv=$W/tfn.so:sum arg=a out=$W/o2.%r err=$W/e2.%r
call id=3 group=3,2 fn=c argv=$W/tfn.so:sum out=$W/o3.%r err=$W/e3.%r
wait
call id=4 group=0,1,2,3 fn=py argv=tpy:allreduce arg=q index=5 env=PLT_Y=7 cwd=$W out=o4.%r err=e4.%r
wait
call id=5 group=0,1,2 fn=c argv=./tfn.so:nosuch cwd=$W out=o5.%r err=e5.%r
wait
call id=6 group=1,2 fn=c argv=./tfn.so:three cwd=$W out=o6.%r err=e6.%r
wait
call id=7 group=0,3 fn=py argv=tpy:boom cwd=$W out=o7.%r err=e7.%r
wait
call id=8 group=2 fn=c argv=../tfn.so:ctxinfo arg=hello arg=world env=PLT_X=42 index=7 attempt=3 cwd=$W/sub out=o8 err=e8
wait
call id=9 group=2 fn=c argv=$W/tfn.so:ctxinfo out=$W/o9 err=$W/e9
wait
call id=10 group=0,1 fn=c argv=./tfn.so:sum cwd=$W out=dir%r/o err=dir%r/e
wait
call id=11 group=1,3 fn=py argv=nosuchmod:f cwd=$W out=o11.%r err=e11.%r
wait
call id=12 group=3 fn=py argv=tpy:exit5 cwd=$W out=o12 err=e12
wait
call id=13 group=0,1,2,3 fn=c argv=./tfn.so:sum cwd=$W out=o13.%r err=e13.%r
wait
EOF
D=$W/p4.drv
is "$DRV_RC" 0 "wdriver ran the whole script" \
    || diag "$(cat "$W/p4.drv" "$W/p4.drverr")"
is "$MPI_RC" 0 "the pool's job ends with 0 once the agent closes the sockets" \
    || diag "$(tail -20 "$W/p4.err")"
is "$(count '^hello world=[0-3] size=4 pid=[0-9]+ pool=t1010 job=77 attempt=2 python=1 nccl=the pool has no GPUs$' "$D")" 4 \
    "each worker says HELLO: world rank, size, pool, job, attempt, Python, no GPUs"
is "$(count 'notice: pool t1010 rank [0-3] of 4 .*Python yes; NCCL not used: the pool has no GPUs' "$W/p4.err")" 4 \
    "each worker logs one line of what it has"

is "$(count '^entered id=1 attempt=1 rank=[0-3] world=[0-3]$' "$D")" 4 "call 1: ENTERED from the 4 ranks"
is "$(count '^return id=1 attempt=1 rank=([0-3]) world=\1 code=0 error=-$' "$D")" 4 "call 1: the allreduce on 4 ranks returns 0 on each"
n=0
for r in 0 1 2 3; do
    grep -qx "sum=10 rank=$r size=4 world=$r argc=1" "$W/o1.$r" \
        && grep -qx "stderr of rank $r" "$W/e1.$r" && n=$((n + 1))
done
is "$n" 4 "call 1: each rank's stdout and stderr are in its own files (cwd-relative)"

is "$(count '^return id=2 attempt=1 rank=([01]) world=\1 code=0 error=-$' "$D")" 2 "call 2 (world 0,1) returns 0 on both ranks"
is "$(count '^return id=3 attempt=1 rank=(0 world=3|1 world=2) code=0 error=-$' "$D")" 2 "call 3 (world 3,2, at the same time) returns 0 on both ranks"
is "$(cat "$W/o2.0" "$W/o2.1")" $'sum=3 rank=0 size=2 world=0 argc=2\nsum=3 rank=1 size=2 world=1 argc=2' \
    "call 2: its own 2-rank communicator, and its argument"
is "$(cat "$W/o3.0" "$W/o3.1")" $'sum=3 rank=0 size=2 world=3 argc=1\nsum=3 rank=1 size=2 world=2 argc=1' \
    "call 3: task rank 0 is world rank 3"

is "$(count '^return id=4 attempt=1 rank=([0-3]) world=\1 code=0 error=-$' "$D")" 4 "call 4: the Python allreduce returns 0 on 4 ranks"
n=0
for r in 0 1 2 3; do
    grep -qx "pysum=10 rank=$r size=4 args=q index=5 y=7 task=4 pool=t1010" "$W/o4.$r" && n=$((n + 1))
done
is "$n" 4 "call 4: mpi4py's allreduce is right; argv, index, env and ctx in Python"

is "$(count "^return id=5 attempt=1 rank=[0-2] world=[0-2] code=127 error=$W/tfn.so: undefined symbol: nosuch$" "$D")" 3 \
    "call 5: a missing symbol is 127 on every rank, with the error"
is "$(count '^entered id=5 ' "$D")" 0 "call 5: no rank entered the function"
is "$(cat "$W/e5.1")" "pilot-worker: ./tfn.so:nosuch: $W/tfn.so: undefined symbol: nosuch" \
    "call 5: the error is in the rank's err file too"

is "$(count '^return id=6 attempt=1 rank=[01] world=[12] code=3 error=-$' "$D")" 2 "call 6: return 3 is code 3"

is "$(count '^return id=7 attempt=1 rank=[01] world=[03] code=1 error=-$' "$D")" 2 "call 7: a Python exception is code 1"
like "$(cat "$W/e7.1")" $'^Traceback \\(most recent call last\\):\n  File "'"$W"$'/tpy.py", line [0-9]+, in boom\n[^\n]*\nRuntimeError: boom from rank 1$' \
    "call 7: its traceback (from the function down) is in the rank's err file"

is "$(count '^return id=8 attempt=3 rank=0 world=2 code=0 error=-$' "$D")" 1 "call 8: a 1-rank call returns 0"
is "$(cat "$W/sub/o8")" "ctx version=1 rank=0 size=1 task=8 attempt=3 index=7 outdir=$W/sub pool=t1010 world=2/4 cuda=-1 nccl=NULL cwd=$W/sub x=42 argc=3 ../tfn.so:ctxinfo hello world
nccl_error=the pool has no GPUs" \
    "call 8: ctx (task, attempt, index, outdir, pool, world), cwd, env, argv"
is "$(cat "$W/o9")" "ctx version=1 rank=0 size=1 task=9 attempt=1 index=-1 outdir=$W pool=t1010 world=2/4 cuda=-1 nccl=NULL cwd=$HERE x=unset argc=1 $W/tfn.so:ctxinfo
nccl_error=the pool has no GPUs" \
    "call 9: the environment and directory of call 8 are put back (no cwd: the pool's)"

like "$(grep '^return id=10 .*world=1 ' "$D")" "^return id=10 attempt=1 rank=1 world=1 code=126 error=dir1/o: No such file or directory$" \
    "call 10: the rank that cannot open its file returns 126"
like "$(grep '^return id=10 .*world=0 ' "$D")" "^return id=10 attempt=1 rank=0 world=0 code=127 error=rank 1 of the task could not open its directory or output files$" \
    "call 10: the other rank returns 127, naming it"

is "$(count "^return id=11 attempt=1 rank=[01] world=[13] code=127 error=ModuleNotFoundError: No module named 'nosuchmod'$" "$D")" 2 \
    "call 11: a missing Python module is 127, with the error"
like "$(cat "$W/e11.0")" "Traceback .*ModuleNotFoundError: No module named 'nosuchmod'" \
    "call 11: the import's traceback is in the err file"
is "$(count '^return id=12 attempt=1 rank=0 world=3 code=5 error=-$' "$D")" 1 "call 12: sys.exit(5) is code 5"
is "$(count '^return id=13 attempt=1 rank=([0-3]) world=\1 code=0 error=-$' "$D")" 4 "call 13: after all that, the pool still runs calls"
is "$(count '^(crash|eof|timeout|unsent)' "$D")" 0 "no crash, EOF or timeout in the pool of 4"

# --- crashes (each ends its pool) ------------------------------------------
pool segv 2 <<EOF
call id=20 group=0,1 fn=c argv=./tfn.so:segv cwd=$W out=o20.%r err=e20.%r
wait
EOF
is "$DRV_RC" 0 "segv: wdriver saw the call end" \
    || diag "$(cat "$W/segv.drv" "$W/segv.drverr")"
is "$(count '^crash id=20 attempt=1 rank=1 world=1 signal=11$' "$W/segv.drv")" 1 "a segfault on rank 1 is CRASH signal 11"
is "$(count '^return id=20 .* world=1 ' "$W/segv.drv")" 0 "... and no RETURN from it"
is "$(cat "$W/o20.1")" "segv rank 1" "... its output before the crash is in its file"
nok "... and the pool's job fails" test "$MPI_RC" = 0

pool overflow 2 <<EOF
call id=21 group=0,1 fn=c argv=./tfn.so:overflow cwd=$W out=o21.%r err=e21.%r
wait
EOF
is "$(count '^crash id=21 attempt=1 rank=0 world=0 signal=11$' "$W/overflow.drv")" 1 \
    "a stack overflow is CRASH signal 11 (the handler's own stack)" \
    || diag "$(cat "$W/overflow.drv" "$W/overflow.drverr")"

pool exit 2 <<EOF
call id=22 group=0,1 fn=c argv=./tfn.so:exit4 cwd=$W out=o22.%r err=e22.%r
wait
EOF
is "$(count '^crash id=22 attempt=1 rank=0 world=0 signal=0$' "$W/exit.drv")" 1 \
    "exit() in a function is CRASH signal 0" \
    || diag "$(cat "$W/exit.drv" "$W/exit.drverr")"

# --- GPUs asked for ----------------------------------------------------------
if nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
    HAVE_GPU=1
else
    HAVE_GPU=0
fi
pool gpu 2 PILOT_POOL_GPUS=1 <<EOF
call id=30 group=0 fn=c argv=./tfn.so:ctxinfo cwd=$W out=o30 err=e30
wait
call id=31 group=0 fn=c argv=./tfn.so:ctxinfo cwd=$W out=o31 err=e31
call id=32 group=1 fn=py argv=tpy:allreduce cwd=$W out=o32 err=e32
wait
EOF
is "$DRV_RC $MPI_RC" "0 0" "a pool with GPUs asked for runs" \
    || diag "$(cat "$W/gpu.drv" "$W/gpu.drverr" "$W/gpu.err")"
if ((HAVE_GPU)); then
    is "$(count '^hello world=[01] .* nccl=-$' "$W/gpu.drv")" 2 "GPU: HELLO says NCCL is ready"
    is "$(count 'notice: pool t1010 rank [01] of 2 .*; NCCL [0-9.]+ from ' "$W/gpu.err")" 2 "GPU: the pool's log says which NCCL"
    like "$(head -1 "$W/o30")" ' cuda=0 nccl=set ' "GPU: the function gets device 0 and an NCCL communicator"
    like "$(head -1 "$W/o31")" ' cuda=0 nccl=set ' "GPU: and again from the cache"
else
    is "$(count '^hello world=[01] .* nccl=cudaGetDeviceCount: .+$' "$W/gpu.drv")" 2 \
        "no GPU: HELLO says why NCCL is not used (cudaGetDeviceCount)"
    is "$(count 'notice: pool t1010 rank [01] of 2 .*; NCCL not used: cudaGetDeviceCount: ' "$W/gpu.err")" 2 \
        "no GPU: the pool's log says so, once per rank"
    like "$(cat "$W/o30")" $' cuda=-1 nccl=NULL .*\nnccl_error=cudaGetDeviceCount: .+$' \
        "no GPU: ctx->nccl is NULL and ctx->nccl_error says why"
    like "$(cat "$W/o31")" $' cuda=-1 nccl=NULL .*\nnccl_error=cudaGetDeviceCount: .+$' \
        "no GPU: the same on the next call"
fi
is "$(count '^return id=3[0-2] attempt=1 rank=0 world=[01] code=0 error=-$' "$W/gpu.drv")" 3 \
    "GPUs asked for: C and Python calls return 0"

# --- across nodes: srun --mpi=pmix on the dev cluster -----------------------
# each node has its own network namespace, so its own agent socket: one
# wdriver a node (-s: of a pool of 4) and the pool, two steps of one
# allocation of 2 nodes (salloc: the wait for the nodes is before both);
# the workers find their node's wdriver by SLURMD_NODENAME
cat >"$W/srun.script" <<EOF
call id=40 group=0,1,2,3 fn=c argv=./tfn.so:sum cwd=$W out=o40.%r err=e40.%r
wait
call id=41 group=3,0 fn=py argv=tpy:allreduce cwd=$W out=o41.%r err=e41.%r
call id=42 group=1,2 fn=c argv=./tfn.so:sum cwd=$W out=o42.%r err=e42.%r
wait
EOF
cat >"$W/srun.sh" <<'EOF'
# run by salloc: one wdriver a node, then the pool
srun --overlap -N2 -n2 --ntasks-per-node=1 bash -c \
    'exec "$WDRIVER" -s 4 -t 60 "$PREFIX" "$SLURMD_NODENAME" 2 \
         <"$W/srun.script" >"$W/srun.drv.$SLURMD_NODENAME"' \
    2>"$W/srun.drverr" &
spid=$!
PILOT_POOL=t1010 PILOT_POOL_SOCKET=$PREFIX srun --overlap --mpi=pmix \
    -N2 -n4 --ntasks-per-node=2 "$WORKER" >"$W/srun.out" 2>"$W/srun.err"
echo $? >"$W/srun.mpirc"
wait $spid
echo $? >"$W/srun.drvrc"
EOF
export W WDRIVER WORKER PREFIX
run_timeout 300 salloc -N2 -n4 --ntasks-per-node=2 -t 3 bash "$W/srun.sh" \
    >"$W/salloc.out" 2>&1
cat "$W"/srun.drv.* >"$W/srun.drv" 2>/dev/null
is "$(cat "$W/srun.drvrc" "$W/srun.mpirc" 2>/dev/null | paste -sd' ')" "0 0" \
    "srun --mpi=pmix: a pool of 4 on 2 nodes runs, and ends with 0" \
    || diag "$(cat "$W/salloc.out" "$W/srun.drv" "$W/srun.drverr" "$W/srun.err")"
is "$(count '^return id=40 attempt=1 rank=([0-3]) world=\1 code=0 error=-$' "$W/srun.drv")$(cat "$W"/o40.* | sort | tr '\n' ' ')" \
    "4sum=10 rank=0 size=4 world=0 argc=1 sum=10 rank=1 size=4 world=1 argc=1 sum=10 rank=2 size=4 world=2 argc=1 sum=10 rank=3 size=4 world=3 argc=1 " \
    "srun: the allreduce over both nodes is right on the 4 ranks"
is "$(count '^return id=4[12] attempt=1 rank=[01] world=[0-3] code=0 error=-$' "$W/srun.drv")" 4 \
    "srun: two calls across the nodes at once (Python on world 3,0; C on 1,2) return 0"
is "$(grep -o 'pilot-worker\[[^]]*\]' "$W/srun.err" | sort -u | wc -l)" 2 \
    "srun: the pool's log has lines from 2 nodes"

# --- --once --------------------------------------------------------------------
# once ARGS...: capture 'pilot-worker --once ARGS' run in $W, its stderr
# kept for the sanitizer check at the end (ENV=VALUE first, 'mpirun -n N'
# by default, '-' for none)
once() {
    local env=() launcher=(mpirun -n 2 --oversubscribe)
    while [[ $1 == *=* ]]; do
        env+=("$1")
        shift
    done
    if [[ $1 == - ]]; then
        launcher=()
        shift
    fi
    capture env -C "$W" "${env[@]}" "${launcher[@]}" "$WORKER" --once "$@"
    printf '%s\n' "$ERR" >>"$W/once.err"
}
once ./tfn.so:sum x
is "$RC" 0 "--once: the allreduce exits 0"
is "$(grep -c '^sum=3 rank=[01] size=2 world=[01] argc=2$' <<<"$OUT")" 2 "--once: on MPI_COMM_WORLD's 2 ranks, with the argument"
once ./tfn.so:three
is "$RC" 3 "--once: exit code 3"
once PILOT_TASK_ID=12 --py tpy:allreduce a b
is "$RC" 0 "--once --py: exits 0"
is "$(grep -c '^pysum=3 rank=[01] size=2 args=a,b index=None y=None task=12 pool=$' <<<"$OUT")" 2 \
    "--once --py: mpi4py's allreduce, arguments and PILOT_TASK_ID" \
    || diag "stdout: $OUT" "stderr: $ERR"
once --py tpy:boom
is "$RC" 1 "--once --py: an exception exits 1"
like "$ERR" 'RuntimeError: boom from rank 0' "--once --py: its traceback on stderr"
once ./tfn.so:nosuch
is "$RC" 127 "--once: a missing symbol exits 127"
like "$ERR" "pilot-worker: ./tfn.so:nosuch: $W/tfn.so: undefined symbol: nosuch" "--once: with the error on stderr"
once - ./tfn.so:ctxinfo
is "$RC" 0 "--once without mpirun (a singleton MPI)"
like "$OUT" "^ctx version=1 rank=0 size=1 task=0 attempt=1 index=-1 outdir=\\. pool= world=0/1 cuda=-1 nccl=NULL cwd=$W x=unset argc=1 ./tfn.so:ctxinfo" \
    "--once: ctx of a singleton (task 0, outdir .)"
once PILOT_POOL_GPUS=1 PILOT_NCCL_LIBRARY= - ./tfn.so:ctxinfo
like "$OUT" $'\nnccl_error=NCCL is not used \\(PILOT_NCCL_LIBRARY is empty\\)$' "PILOT_NCCL_LIBRARY empty: NCCL not used, and why"
once PILOT_POOL_GPUS=1 PILOT_NCCL_LIBRARY=/nonexistent/libnccl.so.2 - ./tfn.so:ctxinfo
like "$OUT" $'\nnccl_error=no NCCL: /nonexistent/libnccl.so.2: cannot open shared object file' "PILOT_NCCL_LIBRARY: that library or none"

capture "$WORKER" --version
like "$OUT" '^pilot-worker [0-9]+\.[0-9]+\.[0-9]+ \(pilot_fn.h version 1\)$' "--version"
capture "$WORKER" --help
like "$RC:$OUT" '^0:Usage: pilot-worker ' "--help"
capture "$WORKER" --once
like "$RC:$ERR" '^2:pilot-worker: error: --once needs' "--once without a function is a usage error"
capture env -u PILOT_POOL timeout 30 "$WORKER"
like "$RC:$ERR" '^1:pilot-worker: error: PILOT_POOL and PILOT_POOL_SOCKET' "without a pool's environment, a clear error"

# a sanitizer build of the worker (make asan) reports on stderr: the
# pool's logs and --once's stderr above
cat "$W"/*.err "$W"/e[0-9]* "$W"/sub/e* >"$W/all-stderr" 2>/dev/null
lacks "no sanitizer report from the workers" \
    'ERROR: (Address|Leak)Sanitizer|runtime error:' "$W/all-stderr"
