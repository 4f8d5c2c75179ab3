#!/bin/bash
# t0950-pipeline.sh - the pipeline demo (issue 6, examples/pipeline/) small:
# one model, few epochs, on a 4-node Slurm pilot. The MPI stage's shards
# and statistics against an independent numpy computation on the same CSV,
# the model against the naive forecast, the table and the plot; then a bad
# input path: prep fails, the training and post fail with reason
# 'dependency', and nothing hangs. In between, the same pipeline with
# stage 1 on a pool (run.sh --pool): the same shards, metrics and plot.
. "$(dirname "$0")/lib.sh"

plan 35

CSV=/usr/lib/python3/dist-packages/statsmodels/datasets/co2/co2.csv
EX=$REPO/examples/pipeline
[[ -r $CSV ]] || abort "$CSV is missing (scripts/install-deps.sh installs python3-statsmodels)"
command -v mpicc >/dev/null || abort "mpicc is missing (scripts/install-deps.sh installs it)"
unset PYTHONUNBUFFERED

# the MPI stage, built here as the Makefile builds it (-Werror)
ok "prep.c builds with mpicc -Wall -Wextra -Werror" \
    mpicc -I"$REPO/worker" -std=c17 -D_GNU_SOURCE -Wall -Wextra -Wshadow \
    -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Werror -O2 \
    -o "$WORK/prep" "$EX/prep.c" -lm
export PREP=$WORK/prep

pilot_up 4 || abort "pilot up --nodes 4 --wait failed"
P=$PILOT_UP_ID
diag "pilot up to all 4 agents registered: ${PILOT_UP_SECS}s"

# --- the pipeline, one model ------------------------------------------
t0=$(now)
CAPTURE_TIMEOUT=150 capture "$EX/run.sh" --pilot "$P" --models mlp \
    --epochs 8 --out "$WORK/run"
diag "run.sh: $(elapsed "$t0" "$(now)")s"
is "$RC" 0 "run.sh (prep -> train-mlp -> post) exits 0" \
    || diag "stdout (tail): $(tail -n 20 <<<"$OUT")"
RUN_OUT=$OUT
# the tasks of run.sh's last attempt (it submits the pipeline once more
# when Open MPI crashes in MPI_Init, docs/pipeline.md)
# That second attempt is reported as a skip of this point, the crash
# named: a pipeline that only passed on its second try is not a pass.
CRASH=$(grep -m1 'SIGSEGV in Open MPI' <<<"$ERR")
if [[ -n $CRASH ]]; then
    skip "the pipeline ran at its first attempt" \
        "prep's first attempt crashed in Open MPI's MPI_Init ('Failing at address: (nil)', run.sh: '${CRASH#== }'); the checks below are of run.sh's second attempt"
elif grep -q 'once more' <<<"$RUN_OUT$ERR"; then
    fail "the pipeline ran at its first attempt (run.sh submitted it once more, for no crash it names)"
else
    pass "the pipeline ran at its first attempt"
fi
cp "$WORK/run/tasks.json" "$WORK/ls.json"
state_of() { json "[t[\"state\"] for t in j if t[\"name\"] == \"$1\"]" <"$WORK/ls.json"; }
is "$(state_of prep)" '["done"]' "stage 1 (prep, MPI over 4 nodes) ended done"
is "$(state_of train-mlp)" '["done"]' "stage 2 (train-mlp, torch over 2 nodes) ended done"
is "$(state_of post)" '["done"]' "stage 3 (post) ended done"
is "$(json '[(t["comm"], t["nodes"]) for t in j if t["name"] != "post"]' <"$WORK/ls.json")" \
    '[["mpi", 4], ["torch", 2]]' "prep ran as one MPI task on 4 nodes, train as a torch task on 2"
is "$(json '[t["start_time"] >= p["end_time"] for t in j for p in j
             if (t["name"], p["name"]) in (("train-mlp", "prep"), ("post", "train-mlp"))]' \
      <"$WORK/ls.json")" '[true, true]' "each stage started after the one before it ended"

# stage 1 against numpy on the same CSV: windows per rank and split, file
# sizes, the training period's statistics, the test records
"$PY" - "$CSV" "$WORK/run/data" >"$WORK/check1.json" 2>"$WORK/check1.err" <<'EOF'
import datetime, json, os, sys
import numpy as np
csv, data = sys.argv[1], sys.argv[2]
m = json.load(open(os.path.join(data, "meta.json")))
W, H, R, NF = m["W"], m["H"], m["ranks"], m["record_floats"]
rows = [l.split(",") for l in open(csv).read().splitlines()[1:] if l.strip()]
day = np.array([datetime.date(int(d[:4]), int(d[4:6]), int(d[6:8])).toordinal()
                for d, _ in rows], float)
v = np.array([float(s) if s else np.nan for _, s in rows])
good = ~np.isnan(v)
x = np.interp(day, day[good], v[good])          # linear in time
d = np.concatenate([[np.nan], np.diff(x)])
N = len(x)
M = N - W - H                                   # windows t = W .. N-1-H
ntr, nva = int(0.7 * M), int(0.15 * M)
split = np.array(["train"] * ntr + ["val"] * nva + ["test"] * (M - ntr - nva))
# window k (t = W + k) belongs to the rank whose rows hold k + 1
lo = [N * r // R for r in range(R)] + [N]
owner = np.searchsorted(lo, np.arange(M) + 1, side="right") - 1
want = {s: [int(((owner == r) & (split == s)).sum()) for r in range(R)]
        for s in ("train", "val", "test")}
sizes = {s: [os.path.getsize(os.path.join(data, "%s-r%03d.f32" % (s, r)))
             for r in range(R)] for s in want}
dd = d[1:W + ntr - 1 + H + 1]                   # rows up to the last train target
t = W + np.arange(ntr)
y = x[t + H] - x[t]
stats = {"mean": dd.mean(), "std": dd.std(), "n_stat": len(dd),
         "target_mean": y.mean(), "target_std": y.std()}
rel = max(abs(m[k] - v) / max(abs(v), 1e-12) for k, v in stats.items())
rec = np.concatenate([np.fromfile(os.path.join(data, "test-r%03d.f32" % r),
                                  np.float32) for r in range(R)]).reshape(-1, NF)
tt = W + ntr + nva + np.arange(len(rec))
X = np.stack([(d[tt - W + 1 + j] - stats["mean"]) / stats["std"]
              for j in range(W)], 1)
print(json.dumps({
    "rows": [m["rows"], N], "missing": [m["missing"], int((~good).sum())],
    "counts": m["counts"] == want, "want": want, "got": m["counts"],
    "sizes": all(sizes[s][r] == want[s][r] * NF * 4 for s in want
                 for r in range(R)),
    "rel": rel,
    "test_inputs": float(np.abs(rec[:, :W] - X).max()),
    "test_values": float(max(np.abs(rec[:, W] - (x[tt + H] - x[tt])).max(),
                             np.abs(rec[:, W + 1] - x[tt]).max(),
                             np.abs(rec[:, W + 2] - x[tt + H]).max())),
    "naive_mae": float(np.abs(x[tt + H] - x[tt]).mean())}))
EOF
C1=$(cat "$WORK/check1.json")
[[ -s $WORK/check1.err ]] && diag "numpy check: $(<"$WORK/check1.err")"
is "$(json 'j["rows"]' <<<"$C1")" "[2284, 2284]" "meta.json: 2284 rows, as in the CSV"
is "$(json 'j["missing"]' <<<"$C1")" "[59, 59]" "meta.json: 59 missing values, as in the CSV"
is "$(json 'j["counts"]' <<<"$C1")" true "windows per rank and split as numpy expects" \
    || diag "want $(json 'j["want"]' <<<"$C1")" "got  $(json 'j["got"]' <<<"$C1")"
is "$(json 'j["sizes"]' <<<"$C1")" true "each shard holds its count of W+4 float32 records"
is "$(json 'j["rel"] < 1e-9' <<<"$C1")" true \
    "mean, std, count and target statistics of the training period match numpy (rel err $(json '"%.1e" % j["rel"]' <<<"$C1"))"
is "$(json 'j["test_inputs"] < 1e-5 and j["test_values"] < 1e-4' <<<"$C1")" true \
    "the test records (normalised inputs, change, last, future) match numpy"

# stage 2 and 3: the model beats the naive forecast, the table and the PNG
M=$WORK/run/results/metrics.json
is "$(json '[r["model"] for r in j["rows"]]' <"$M" 2>&1)" '["naive (no change)", "mlp"]' \
    "post's metrics.json has the naive forecast and the model"
is "$(json '"%.4f" % j["rows"][0]["mae"]' <"$M")" \
    "$(json '"%.4f" % j["naive_mae"]' <<<"$C1")" "post's naive MAE is numpy's"
is "$(json 'j["rows"][1]["mae"] < j["rows"][0]["mae"]' <"$M")" true \
    "the MLP's test MAE ($(json '"%.3f" % j["rows"][1]["mae"]' <"$M") ppm) beats the naive forecast's ($(json '"%.3f" % j["rows"][0]["mae"]' <"$M"))"
like "$(cat "$WORK/run/results/metrics.txt" 2>&1)" $'naive \\(no change\\) +[0-9.]+ +[0-9.]+.*\nmlp +[0-9.]+ +[0-9.]+' \
    "the table (metrics.txt) lists the naive forecast and the model"
is "$(head -c 8 "$WORK/run/results/forecast.png" 2>/dev/null | od -An -tx1 | tr -d ' \n')" \
    89504e470d0a1a0a "forecast.png is a PNG"
like "$RUN_OUT" 'pilot: end-to-end [0-9.]+ s .* overhead -?[0-9.]+ s' \
    "run.sh prints the end-to-end time and the overhead"
is "$(json '0 <= j["overhead"] < 10 and abs(j["end_to_end"] - j["critical_path"] - j["overhead"]) < 1e-6' \
      <"$WORK/run/timings.json" 2>&1)" true \
    "overhead = end-to-end - critical path, between 0 and 10 s ($(json '"%.3f" % j["overhead"]' <"$WORK/run/timings.json" 2>&1) s)"

# --- stage 1 on a pool: the same outputs --------------------------------
ok "prep.c builds as a pool function (libprep.so, prep_fn)" \
    mpicc -I"$REPO/worker" -std=c17 -D_GNU_SOURCE -Wall -Wextra -Wshadow \
    -Wstrict-prototypes -Wmissing-prototypes -Wformat=2 -Werror -O2 -fPIC \
    -fvisibility=hidden -shared -o "$WORK/libprep.so" "$EX/prep.c" -lm
export PREP_LIB=$WORK/libprep.so
t0=$(now)
CAPTURE_TIMEOUT=150 capture "$EX/run.sh" --pilot "$P" --pool --models mlp \
    --epochs 8 --out "$WORK/pool"
diag "run.sh --pool: $(elapsed "$t0" "$(now)")s"
is "$RC" 0 "run.sh --pool (pool start, prep on it, pool stop, train, post) exits 0" \
    || diag "stdout (tail): $(tail -n 20 <<<"$OUT")" "stderr: $ERR"
POOL_OUT=$OUT
is "$(json '[[t["state"], t["pool"], t["ranks"], t["nodes"]] for t in j if t["name"] == "prep"]' \
      <"$WORK/pool/tasks.json" 2>&1)" '[["done", "prep", 4, 4]]' \
    "prep ran as a task of pool 'prep', 4 ranks on 4 nodes"
DIFF=$(for f in "$WORK"/run/data/*.f32; do
           cmp -s "$f" "$WORK/pool/data/${f##*/}" || echo "${f##*/}"
       done; ls "$WORK/pool/data" | grep -c 'f32$')
is "$DIFF" 12 "its 12 shards are byte for byte the srun step's"
is "$("$PY" -c 'import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for m in a, b:
    del m["seconds"]                # how long prep took
print(a == b)' "$WORK/run/data/meta.json" "$WORK/pool/data/meta.json" 2>&1)" True \
    "its meta.json is the srun step's, but for the seconds it took"
is "$("$PY" -c 'import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for m in a, b:
    for r in m["rows"]:
        r.pop("train_seconds")
print(a == b)' "$WORK/run/results/metrics.json" "$WORK/pool/results/metrics.json" 2>&1)" True \
    "the metrics are the srun version's, but for the training seconds"
ok "forecast.png is byte for byte the srun version's" \
    cmp "$WORK/run/results/forecast.png" "$WORK/pool/results/forecast.png"
like "$POOL_OUT" $'pool start +-[0-9.]+ +-[0-9.]+ +[0-9.]+\nprep \\(pool\\) ' \
    "the timings have the pool's start on a line, and prep as a pool task"
is "$(pilot pool ls --json 2>&1)" "[]" "the pool is gone once run.sh is done"

# --- a bad input path: prep fails, the rest fail by dependency -----------
t0=$(now)
CAPTURE_TIMEOUT=90 capture "$EX/run.sh" --pilot "$P" --models mlp \
    --epochs 2 --csv "$WORK/no-such.csv" --out "$WORK/bad"
diag "run.sh with a bad path: $(elapsed "$t0" "$(now)")s"
is "$RC" 1 "run.sh exits 1 when prep fails (not a timeout)"
like "$ERR" "prep: error: $WORK/no-such.csv: No such file or directory" \
    "... and prints prep's log, which names the missing file"
pilot ls --json >"$WORK/ls2.json"
last_of() { json "[[t[\"state\"], t[\"reason\"]] for t in j if t[\"name\"] == \"$1\"][-1]" <"$WORK/ls2.json"; }
PREP_ID=$(json '[t["id"] for t in j if t["name"] == "prep"][-1]' <"$WORK/ls2.json")
TRAIN_ID=$(json '[t["id"] for t in j if t["name"] == "train-mlp"][-1]' <"$WORK/ls2.json")
# N.B. not exit code 1: srun --kill-on-bad-exit may end the step with 143
# when it kills the other ranks after the first one exited 1
pilot show --json "$PREP_ID" >"$WORK/show-prep.json"
is "$(json '[j["state"], j["exit_code"] not in (None, 0)]' <"$WORK/show-prep.json")" \
    '["failed", true]' "prep failed with a non-zero exit code ($(json 'j["reason"]' <"$WORK/show-prep.json"))"
is "$(json '[j["state"], j["reason"], j["start_time"]]' < <(pilot show --json "$TRAIN_ID"))" \
    "[\"failed\", \"dependency: task $PREP_ID failed\", null]" \
    "train-mlp failed with reason dependency and never started"
is "$(last_of post)" "[\"failed\", \"dependency: task $TRAIN_ID failed\"]" \
    "post failed with reason dependency"
