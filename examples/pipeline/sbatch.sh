#!/usr/bin/env bash
# examples/pipeline/sbatch.sh - the pipeline demo's three stages without
# pilot, as three Slurm batch jobs chained with --dependency=afterok, for
# comparison with run.sh: the same programs, the same placement, the same
# timings and overhead (docs/pipeline.md).
#
#   job 1  prep:  srun --mpi=pmix over 4 nodes x 1 rank
#   job 2  train: 4 nodes; each model one srun step of 2 nodes x 1 rank,
#                 the three steps at once (train.py takes RANK, WORLD_SIZE
#                 and MASTER_ADDR from the step's SLURM_* variables)
#   job 3  post:  one process
#
# Usage: sbatch.sh [--models mlp,lstm,cnn] [--epochs N] [--csv FILE]
#                  [--out DIR]
# Environment: PREP (default build/examples/prep: make examples).
# Exit status: 0 every job completed, 1 one failed (its output is printed
# and the jobs after it are canceled), 2 usage.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
PY=/usr/bin/python3
models=mlp,lstm,cnn
epochs=40
csv=/usr/lib/python3/dist-packages/statsmodels/datasets/co2/co2.csv
out=
usage() { sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; }
while (($#)); do
    case $1 in
    --models) models=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --csv) csv=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "sbatch.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
    esac
done
PREP=${PREP:-$HERE/../../build/examples/prep}
[[ -x $PREP ]] || { echo "sbatch.sh: $PREP is missing (make examples)" >&2; exit 1; }
PREP=$(cd "$(dirname "$PREP")" && pwd)/$(basename "$PREP")
# /var/tmp is shared by the nodes
out=${out:-$(mktemp -d /var/tmp/pipeline-sbatch.XXXXXX)}
mkdir -p "$out"
out=$(cd "$out" && pwd)
stamps=$out/stamps
: >"$stamps"
unset PYTHONUNBUFFERED RANK WORLD_SIZE LOCAL_RANK MASTER_ADDR MASTER_PORT

now() { date +%s.%N; }
q() { printf '%q' "$1"; }

# the batch scripts: each stamps its stage's start and end around the work,
# as pilot records a task's start and end around its process. N.B.
# --kill-on-bad-exit, as pilot's agent launches MPI tasks: without it a
# rank that dies leaves the others blocked in a collective, and the step
# (and the chain) hangs until its time limit
cat >"$out/prep.sbatch" <<EOF
#!/bin/bash
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "prep start \$(date +%s.%N)" >>$(q "$stamps")
srun --kill-on-bad-exit=1 --mpi=pmix -N4 -n4 --ntasks-per-node=1 $(q "$PREP") $(q "$csv") $(q "$out/data")
rc=\$?
echo "prep end \$(date +%s.%N)" >>$(q "$stamps")
exit \$rc
EOF
{
    echo '#!/bin/bash'
    echo 'pids=()'
    for m in ${models//,/ }; do
        cat <<EOF
(
    echo "train-$m start \$(date +%s.%N)" >>$(q "$stamps")
    srun --kill-on-bad-exit=1 --exact -N2 -n2 --ntasks-per-node=1 -c1 $PY $(q "$HERE/train.py") \\
        --model $m --epochs $(q "$epochs") --data $(q "$out/data") \\
        --out $(q "$out/results") >$(q "$out/train-$m.log") 2>&1
    rc=\$?
    echo "train-$m end \$(date +%s.%N)" >>$(q "$stamps")
    exit \$rc
) &
pids+=(\$!)
EOF
    done
    cat <<'EOF'
rc=0
for p in "${pids[@]}"; do
    wait "$p" || rc=1
done
exit $rc
EOF
} >"$out/train.sbatch"
cat >"$out/post.sbatch" <<EOF
#!/bin/bash
echo "post start \$(date +%s.%N)" >>$(q "$stamps")
$PY $(q "$HERE/post.py") --data $(q "$out/data") --results $(q "$out/results") --models $(q "$models")
rc=\$?
echo "post end \$(date +%s.%N)" >>$(q "$stamps")
exit \$rc
EOF

jobs=()
cancel() {
    local j
    for j in "${jobs[@]}"; do
        scancel "$j" 2>/dev/null || true
    done
}
trap cancel EXIT

echo "== sbatch chain: prep -> train ($models, concurrent srun steps) -> post (output in $out)"
t0=$(now)
j1=$(sbatch --parsable -J pipe-prep -N4 --ntasks-per-node=1 -t 10 \
     -o "$out/prep-%j.out" "$out/prep.sbatch")
jobs+=("$j1")
j2=$(sbatch --parsable -J pipe-train -N4 --ntasks-per-node=2 -t 10 \
     --dependency=afterok:"$j1" -o "$out/train-%j.out" "$out/train.sbatch")
jobs+=("$j2")
j3=$(sbatch --parsable -J pipe-post -N1 -n1 -t 10 \
     --dependency=afterok:"$j2" -o "$out/post-%j.out" "$out/post.sbatch")
jobs+=("$j3")
echo "jobs: prep $j1, train $j2, post $j3"

# job_state J: Slurm's state of job J (MinJobAge keeps ended jobs visible)
job_state() {
    scontrol -o show job "$1" 2>/dev/null | tr ' ' '\n' \
        | awk -F= '$1 == "JobState" { print $2 }'
}
declare -A ended=()
ndone=0
deadline=$((SECONDS + 600))
while ((ndone < 3)); do
    for j in "$j1" "$j2" "$j3"; do
        [[ -n ${ended[$j]:-} ]] && continue
        st=$(job_state "$j")
        case $st in
        PENDING | RUNNING | CONFIGURING | COMPLETING | SUSPENDED | "") ;;
        COMPLETED)
            ended[$j]=$(now)
            ndone=$((ndone + 1))
            ;;
        *)
            echo "sbatch chain: job $j ended $st" >&2
            for f in "$out"/*-"$j".out "$out"/train-*.log; do
                [[ -s $f ]] || continue
                echo "-- $f" >&2
                tail -n 30 "$f" >&2
            done
            echo "sbatch chain: FAILED; files in $out" >&2
            exit 1
            ;;
        esac
    done
    if ((SECONDS > deadline)); then
        echo "sbatch chain: not done after 600 s; files in $out" >&2
        exit 1
    fi
    sleep 0.1
done
trap - EXIT

echo "== stage 1 (prep)"
cat "$out/prep-$j1.out"
echo "== stage 2 (training)"
for m in ${models//,/ }; do
    grep '^train ' "$out/train-$m.log" || true
done
echo "== stage 3 (post): metrics on the test set"
cat "$out/post-$j3.out"
echo "== timings (seconds from the first sbatch)"
$PY "$HERE/timings.py" --t0 "$t0" --stamps "$stamps" \
    --json "$out/timings.json" --label "sbatch chain"
echo "Slurm reported the last job ended at" \
     "$($PY -c "print('%.2f' % (${ended[$j3]} - $t0))") s (polled every 0.1 s)"
echo "output: $out (data/, results/, stamps, timings.json)"
