#!/bin/bash
# tests/device/vet-gpu.sh - pilot-vetcheck's gpu and nccl checks on a
# real GPU (a lent H200 or H100), as one script of under 3 minutes
#
# Usage, from the repository root:
#   tests/device/vet-gpu.sh --prep   here, before: builds build-vet/ (the
#                                    program without MPI, jansson linked in:
#                                    the GPU machine may have neither)
#   tests/device/vet-gpu.sh          on the GPU machine (device run, carry
#                                    ["build-vet"])
# On the GPU machine it builds pilot-vetcheck (make vetcheck, into
# build-dev/) where gcc and jansson's header are, else uses build-vet/'s,
# then checks:
#   1. gpu --expect 1: exit 0, the kernel right on every element, figures;
#   2. gpu --expect 2 and gpu --max-temp 1: exit 1, gpu.count and
#      gpu.temperature named (the checks can fail on a real GPU);
#   3. nccl, one rank, 256 MiB: exit 0, no element wrong, algbw > 0;
#   4. nccl --min-busbw-gbs 1 on one rank: still 0 (busbw is 0 by
#      definition with one rank, and the threshold is not applied).
# Prints every report.  Exit 0 when all hold, else 1.
set -u
cd "$(dirname "$0")/../.." || exit 1

if [[ ${1:-} == --prep ]]; then
    # -Bstatic for jansson alone: glibc stays shared (the GPU machine's is
    # newer than Debian 12's, which is what a binary built here needs)
    make -s BUILD=build-vet MPICC=no-mpicc \
        VET_LIBS='-Wl,-Bstatic -ljansson -Wl,-Bdynamic -ldl -lm' vetcheck \
        || exit 1
    if ldd build-vet/bin/pilot-vetcheck | grep -E 'libjansson|libmpi'; then
        echo "vet-gpu: build-vet/bin/pilot-vetcheck is not self-contained" >&2
        exit 1
    fi
    echo "vet-gpu: build-vet/bin/pilot-vetcheck ready: carry [\"build-vet\"]"
    exit 0
fi

PY=$(command -v python3)
failed=0
say() { printf 'vet-gpu: %s\n' "$*"; }
bad() {
    say "FAIL: $*"
    failed=1
}

say "$(date -u +%FT%TZ) on $(hostname)"
nvidia-smi -L 2>&1 | head -4

# --- the program --------------------------------------------------------
VC=
if command -v gcc >/dev/null \
    && { pkg-config --exists jansson 2>/dev/null \
         || [[ -f /usr/include/jansson.h ]]; }; then
    mkdir -p build-dev
    if make -s BUILD=build-dev vetcheck >build-dev/make.log 2>&1; then
        VC=build-dev/bin/pilot-vetcheck
        say "built here: $VC ($(ldd "$VC" | grep -q libmpi && echo with MPI || echo without MPI))"
    else
        say "make vetcheck failed here:"
        tail -5 build-dev/make.log
    fi
fi
if [[ -z $VC ]]; then
    VC=build-vet/bin/pilot-vetcheck
    [[ -x $VC ]] || { say "FAIL: no build here and no $VC (run --prep and carry build-vet)"; exit 1; }
    say "using the carried $VC (no jansson or gcc here)"
fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# NCCL and the CUDA runtime: the system's, else the Python wheels'
for lib in libnccl.so.2:PILOT_NCCL_LIBRARY libcudart.so.13:PILOT_CUDART_LIBRARY; do
    name=${lib%%:*} var=${lib##*:}
    if ! ldconfig -p | grep -q " $name " && [[ ! -e /usr/local/cuda/lib64/$name ]]; then
        found=$(find $("$PY" -c 'import site; print(" ".join(site.getsitepackages()))') \
                -name "$name" 2>/dev/null | head -1)
        [[ -n $found ]] && export "$var=$found" && say "$var=$found"
    fi
done

# run NAME WANT-RC CMD...: the report into R, its exit status checked
run() {
    local name=$1 want=$2
    shift 2
    R=$(timeout 120 "$VC" "$@" 2>"/tmp/vet-gpu.$name.err")
    local rc=$?
    say "--- $name: pilot-vetcheck $* -> exit $rc"
    printf '%s\n' "$R" | "$PY" -m json.tool 2>/dev/null || printf '%s\n' "$R"
    sed 's/^/    stderr: /' "/tmp/vet-gpu.$name.err"
    [[ $rc == "$want" ]] || bad "$name: exit $rc, not $want"
}
# field EXPR: a Python expression on j, the last report
field() { printf '%s\n' "$R" | "$PY" -c "import json, sys; j = json.load(sys.stdin); print($1)" 2>/dev/null; }

run gpu 0 gpu --expect 1
[[ $(field 'j["count"]') == 1 ]] || bad "gpu: count is not 1"
[[ $(field 'all(g["kernel"]["ok"] and g["kernel"]["wrong"] == 0 for g in j["gpus"])') == True ]] \
    || bad "gpu: a kernel did not run right"
say "gpu: $(field '"; ".join("%s %s MB free of %s, %s C, kernel %.0f us %.0f GB/s, JIT %.0f ms" % (g["name"], g["memory_free_mb"], g["memory_total_mb"], g["temperature_c"], g["kernel"]["kernel_us"], g["kernel"]["kernel_gbs"], g["kernel"]["jit_ms"]) for g in j["gpus"])')"

run gpu-count 1 gpu --expect 2
[[ $(field '[f["check"] for f in j["failed"]]') == "['gpu.count']" ]] \
    || bad "gpu --expect 2: gpu.count not the failed check"
run gpu-temp 1 gpu --max-temp 1
[[ $(field '[f["check"] for f in j["failed"]]') == "['gpu.temperature']" ]] \
    || bad "gpu --max-temp 1: gpu.temperature not the failed check"

run nccl 0 nccl --size 256M --iters 20
[[ $(field 'j["wrong"] == 0 and j["algbw_gbs"] > 0 and j["ranks"] == 1') == True ]] \
    || bad "nccl: wrong elements, no algbw, or not one rank"
say "nccl: $(field '"%s: %.0f us an all-reduce, algbw %.1f GB/s, busbw %.1f GB/s" % (j["nccl"], j["time_us"], j["algbw_gbs"], j["busbw_gbs"])')"
run nccl-busbw 0 nccl --size 64M --iters 5 --min-busbw-gbs 1
[[ -n $(field 'j["note"]') ]] || bad "nccl on one rank: no note that busbw is not applied"

if ((failed)); then
    say "FAILED"
    exit 1
fi
say "all passed"
