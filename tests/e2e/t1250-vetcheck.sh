#!/bin/bash
# t1250-vetcheck.sh - pilot-vetcheck, node vetting's check program: with
# no GPU here its gpu and nccl checks exit 3 with a report that says why;
# its kernel's PTX assembles for sm_80 and sm_90 with CUDA's ptxas (and a
# broken copy does not); net over 2 nodes of the dev cluster (srun
# --mpi=pmix) measures every pair, and fails the pair's nodes under a
# threshold no network meets; bad arguments exit 2 with the usage; a
# build without MPI still has gpu and a one-rank nccl.
# (tests/device/vet-gpu.sh runs gpu and nccl on a real GPU.)
. "$(dirname "$0")/lib.sh"

plan 52

VC=$PILOT_BIN/pilot-vetcheck
PTXAS=${PTXAS:-/usr/local/cuda/bin/ptxas}
ok "pilot-vetcheck is built ($VC)" test -x "$VC" \
    || abort "no pilot-vetcheck: run 'make'"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# under 'make asan': what Open MPI keeps at exit is not ours (the
# worker's suppressions, t1010), full stacks to find its frames
export LSAN_OPTIONS="suppressions=$REPO/tests/e2e/worker-lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export ASAN_OPTIONS="fast_unwind_on_malloc=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"

# a report: one line of JSON whose "status" and exit code agree
status_of() { json 'j["status"] + " " + str(j["ok"])'; }

# --- usage: exit 2, the usage on stderr, nothing on stdout ---------------
capture "$VC"
is "$RC" 2 "no check: exit 2"
like "$ERR" "usage: pilot-vetcheck CHECK" "... with the usage"
capture "$VC" disk
is "$RC:$OUT" "2:" "an unknown check: exit 2, nothing on stdout"
like "$ERR" "no check 'disk'" "... naming it"
capture "$VC" gpu --max-temp hot
is "$RC:$OUT" "2:" "gpu --max-temp hot: exit 2"
like "$ERR" "--max-temp: 'hot' is not a number" "... saying which option"
capture "$VC" gpu --frobnicate
is "$RC" 2 "gpu with an unknown option: exit 2"
like "$ERR" "bad option '--frobnicate'.*usage:" "... the option, then the usage"
capture "$VC" net --iters 0
is "$RC:$OUT" "2:" "net --iters 0: exit 2 (before MPI starts)"
capture "$VC" nccl extra
is "$RC" 2 "nccl with a stray argument: exit 2"
capture "$VC" --help
is "$RC" 0 "--help: exit 0"
like "$OUT" "pilot-vetcheck nccl.*exit: 0 passed, 1 a check failed, 2 usage, 3" \
    "... every check and the exit codes on stdout"

# --- gpu: no NVML -> 3 -------------------------------------------------
capture env PILOT_NVML_LIBRARY="$WORK/none/libnvidia-ml.so.1" "$VC" gpu \
    --expect 1
is "$RC" 3 "gpu without NVML: exit 3 (cannot run here)"
like "$ERR" "cannot run here: no GPU here: NVML not found \(.*none/libnvidia-ml.so.1" \
    "... stderr says NVML was not found, and where it looked"
is "$(status_of <<<"$OUT")" "cannot-run False" "... the report says cannot-run"
is "$(json '[j["check"], j["expect"], j["gpus"], j["failed"]]' <<<"$OUT")" \
    '["gpu", 1, [], []]' "... with the check, what was expected, no GPU, no failure"
like "$(json 'j["error"]' <<<"$OUT")" "NVML not found" "... and the reason"
# this machine itself: no GPU library in the search path means no GPU
if ! ldconfig -p | grep -q 'libnvidia-ml\.so\.1 '; then
    capture "$VC" gpu
    is "$RC" 3 "gpu on this machine (no libnvidia-ml.so.1): exit 3"
    like "$(json 'j["error"]' <<<"$OUT")" "^no GPU here: NVML not found" \
        "... JSON that says why"
else
    skip "gpu on this machine: exit 3" "it has NVML (a GPU machine)"
    skip "... JSON that says why" "it has NVML"
fi

# --- the kernel's PTX: ptxas for the A100 and H100/H200 ------------------
ok "CUDA's ptxas is there ($PTXAS)" test -x "$PTXAS" \
    || diag "CUDA is preinstalled under /usr/local/cuda (docs/reference)"
capture "$VC" gpu --print-ptx
is "$RC" 0 "gpu --print-ptx: exit 0"
printf '%s\n' "$OUT" >"$WORK/k.ptx"
like "$(head -3 "$WORK/k.ptx" | tr '\n' ' ')" \
    "^\.version 7\.8 \.target sm_75 \.address_size 64" \
    "... PTX ISA 7.8 for sm_75 (JITs on any driver since 520)"
for sm in sm_80 sm_90; do
    capture "$PTXAS" --gpu-name "$sm" -v -o "$WORK/k.$sm.cubin" "$WORK/k.ptx"
    is "$RC" 0 "ptxas --gpu-name $sm assembles it"
    like "$ERR" "Compiling entry function 'pl_vet_axpb' for '$sm'" \
        "... its entry pl_vet_axpb (the name pilot-vetcheck loads)"
done
# the same ptxas refuses a broken copy: the step above can fail
sed 's/fma\.rn\.f32/fma.f32/' "$WORK/k.ptx" >"$WORK/bad.ptx"
capture "$PTXAS" --gpu-name sm_90 -o "$WORK/bad.cubin" "$WORK/bad.ptx"
ok "... and refuses a copy whose fma has no rounding mode (rc $RC)" \
    test "$RC" -ne 0

# one allocation of 2 nodes (2 ranks each) for every step below: a
# single wait for a busy cluster, each step then starts at once
J=$(run_timeout 300 salloc -N2 --ntasks-per-node=2 --no-shell \
        --job-name=pilot-t1250-vetcheck 2>&1 \
    | sed -n 's/.*Granted job allocation \([0-9][0-9]*\).*/\1/p')
[[ -n $J ]] || abort "salloc -N2 --no-shell gave no allocation"
cleanup_job "$J" # (scancel at the end: its name starts with pilot)
SRUN=(srun --jobid="$J" --mpi=pmix)

# --- nccl: no GPU -> 3, every rank agreeing ------------------------------
CAPTURE_TIMEOUT=60 capture "${SRUN[@]}" -N2 --ntasks-per-node=1 "$VC" nccl
is "$RC" 3 "nccl on 2 nodes without GPUs: srun exits 3"
is "$(status_of <<<"$OUT")" "cannot-run False" "... one report, from rank 0: cannot-run"
like "$(json 'j["error"]' <<<"$OUT")" "^no GPU for NCCL: rank 0 on n[0-9]+: " \
    "... naming the first rank without a GPU and why"
like "$ERR" "cannot run here: no GPU for NCCL" "... on stderr too"

# --- built without MPI: gpu, and nccl as one rank; net says it cannot ----
capture make -C "$REPO" -s WERROR=1 BUILD="$WORK/nompi" MPICC=no-mpicc vetcheck
is "$RC" 0 "pilot-vetcheck builds without MPI (make MPICC=no-mpicc vetcheck)"
NV=$WORK/nompi/bin/pilot-vetcheck
nok "... and is not linked to MPI" bash -c "ldd '$NV' | grep -q libmpi"
capture "$NV" net
is "$RC:$(json 'j["error"]' <<<"$OUT")" \
    "3:pilot-vetcheck was built without MPI (no mpicc)" "... its net exits 3, saying why"
capture "$NV" nccl
is "$RC:$(status_of <<<"$OUT")" "3:cannot-run False" \
    "... its nccl (one rank) finds no GPU: exit 3"
like "$(json 'j["error"]' <<<"$OUT")" "^no GPU for NCCL: rank 0 on .*: cuda" \
    "... the CUDA runtime's reason"

# --- net across 2 nodes --------------------------------------------------
CAPTURE_TIMEOUT=90 capture "${SRUN[@]}" -N2 --ntasks-per-node=1 "$VC" net \
    --iters 50 --size 1M
is "$RC" 0 "net over 2 nodes: exit 0"
is "$(status_of <<<"$OUT")" "pass True" "... the report passes"
is "$(json '[j["pattern"], j["ranks"], j["rounds"], len(j["pairs"]), j["size"]]' <<<"$OUT")" \
    '["all-pairs", 2, 1, 1, 1048576]' "... all pairs of 2 ranks: 1 pair, 1 round, 1 MiB"
P=$(json 'j["pairs"][0]' <<<"$OUT")
ok "... latency > 0 and bandwidth > 0 ($P)" \
    "$PY" -c 'import sys, json; p = json.loads(sys.argv[1]); sys.exit(not (p["latency_us"] > 0 and p["bandwidth_mbs"] > 0 and p["ok"]))' "$P"
like "$(json '" ".join(j["nodes"])' <<<"$OUT")" "^n[0-9]+ n[0-9]+$" \
    "... between two named nodes"
unlike "$(json 'j["nodes"][0]' <<<"$OUT")" "^$(json 'j["nodes"][1]' <<<"$OUT")$" \
    "... two different ones"
is "$(json 'j["slowest"]["bandwidth"] == j["pairs"][0]' <<<"$OUT")" true \
    "... the slowest pair is named"

# 3 ranks on 2 nodes: every one of the 3 pairs once (an odd count: a bye)
CAPTURE_TIMEOUT=90 capture "${SRUN[@]}" -N2 -n3 "$VC" net --iters 20 --size 64K
is "$RC:$(json 'sorted([p["rank_a"], p["rank_b"]] for p in j["pairs"])' <<<"$OUT")" \
    "0:[[0, 1], [0, 2], [1, 2]]" "3 ranks: pairs 0-1, 0-2 and 1-2, each once"
is "$(json '[j["rounds"], sum(1 for p in j["pairs"] if p.get("same_node"))]' <<<"$OUT")" \
    "[3, 1]" "... in 3 rounds, one pair within a node (marked so)"

# thresholds no network meets: exit 1, both nodes named
CAPTURE_TIMEOUT=90 capture "${SRUN[@]}" -N2 --ntasks-per-node=1 "$VC" net \
    --iters 20 --size 1M --min-bandwidth-mbs 1e9
is "$RC" 1 "net --min-bandwidth-mbs 1e9: exit 1"
is "$(status_of <<<"$OUT")" "fail False" "... the report fails"
is "$(json '[[f["check"] for f in j["failed"]], len(j["failed_nodes"]), j["failed"][0]["limit"]]' <<<"$OUT")" \
    '[["net.bandwidth"], 2, 1000000000.0]' \
    "... net.bandwidth failed, with its limit, and the pair's 2 nodes are named"
like "$ERR" "FAILED net.bandwidth: n[0-9]+ <-> n[0-9]+: [0-9]+ MB/s, under 1e\+09 MB/s" \
    "... on stderr, with the figure"
CAPTURE_TIMEOUT=90 capture "${SRUN[@]}" -N2 --ntasks-per-node=1 "$VC" net \
    --iters 20 --size 64K --max-latency-us 0.001
is "$RC:$(json '[f["check"] for f in j["failed"]]' <<<"$OUT")" \
    '1:["net.latency"]' "net --max-latency-us 0.001: exit 1, net.latency failed"

# one rank: nothing to measure -> 3
CAPTURE_TIMEOUT=60 capture "${SRUN[@]}" -N1 -n1 "$VC" net
is "$RC:$(status_of <<<"$OUT")" "3:cannot-run False" "net of one rank: exit 3"

