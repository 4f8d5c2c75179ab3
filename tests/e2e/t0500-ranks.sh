#!/bin/bash
# t0500-ranks.sh - multi-rank tasks on a 4-node Slurm pilot (issue 3): a
# torch.distributed GLOO all_reduce over 2 nodes x 2 ranks, independent
# GPU ranks that never share a GPU, an exclusive node, tasks that can never
# fit refused at submit, and a 4-node exclusive task that does not starve
# behind a stream of one-core tasks.
. "$(dirname "$0")/lib.sh"

plan 39

NNODES=4
# the ranks of a task append to one output file: with PYTHONUNBUFFERED
# each print() is several write()s, and two ranks' lines interleave
unset PYTHONUNBUFFERED

pilot_up $NNODES || abort "pilot up --nodes $NNODES --wait failed"
P=$PILOT_UP_ID
like "$P" '^p[0-9]+$' "pilot up --nodes $NNODES --wait prints a pilot id ($P)"
diag "pilot up to all $NNODES agents registered: ${PILOT_UP_SECS}s"

capture pilot status --json
STATUS=$OUT
is "$(json 'j["agents_up"]' <<<"$STATUS")" $NNODES "status: $NNODES agents up"
# the smallest node's cores and the largest node's GPUs (2 and 4 on the
# dev cluster): the rejections below go just past them
NCORES=$(json 'min(len(n["cores"]) for n in j["nodes"])' <<<"$STATUS")
NGPUS=$(json 'max(len(n["gpus"]) for n in j["nodes"])' <<<"$STATUS")
diag "nodes: $(json '[[n["name"], len(n["cores"]), len(n["gpus"])] for n in j["nodes"]]' <<<"$STATUS")"

# show_json ID: the task object, in $WORK/show-ID.json
show_json() {
    pilot show --json "$1" >"$WORK/show-$1.json" 2>"$WORK/show-$1.err"
}

# --- torch: GLOO all_reduce over 2 nodes x 2 ranks ---------------------------
TORCH='import os, torch, torch.distributed as d; d.init_process_group("gloo", init_method="env://"); t = torch.tensor([float(d.get_rank() + 1)]); d.all_reduce(t); print("rank", d.get_rank(), "of", d.get_world_size(), "on", os.uname().nodename, "sum", int(t.item()))'
capture pilot submit --nodes 2 --ranks-per-node 2 --comm torch \
    -- /usr/bin/python3 -c "$TORCH"
TT=$OUT
like "$TT" '^[0-9]+$' "submit --nodes 2 --ranks-per-node 2 --comm torch prints an id ($TT)" \
    || diag "stderr: $ERR"
CAPTURE_TIMEOUT=200 capture pilot wait "$TT" --timeout 180
is "$RC" 0 "the torch task is done within 180 s"
capture pilot logs "$TT"
TORCH_OUT=$OUT
capture pilot logs --stderr "$TT"
[[ -n $OUT ]] && diag "torch stderr (tail):" "$(tail -n 8 <<<"$OUT")"
show_json "$TT"
cat >"$WORK/torch.py" <<'EOF'
import json, re, sys
from collections import Counter

out, show = sys.argv[1], json.load(open(sys.argv[2]))
r = {}
lines = [l for l in out.splitlines() if l.strip()]
m = [re.fullmatch(r"rank (\d+) of (\d+) on (\S+) sum (\d+)", l) for l in lines]
r["nlines"] = len(lines)
r["bad_lines"] = [l for l, x in zip(lines, m) if not x][:4]
m = [x for x in m if x]
r["sums"] = sorted(set(int(x.group(4)) for x in m))
r["sizes"] = sorted(set(int(x.group(2)) for x in m))
r["ranks"] = sorted(int(x.group(1)) for x in m)
r["per_host"] = sorted(Counter(x.group(3) for x in m).values())
host = {int(x.group(1)): x.group(3) for x in m}
ranks = show.get("placement", show.get("ranks"))
ranks = ranks if isinstance(ranks, list) else []
r["show_nranks"] = len(ranks)
r["show_ranks"] = sorted(x.get("rank") for x in ranks)
r["show_per_node"] = sorted(Counter(x.get("node") for x in ranks).values())
r["cores_each"] = sorted(set(len(x.get("cores") or []) for x in ranks))
slots = [(x.get("node"), c) for x in ranks for c in x.get("cores") or []]
r["shared_cores"] = [s for s, n in Counter(slots).items() if n > 1]
# each rank ran where show says it did (short hostname against node name)
r["host_mismatch"] = [[x.get("rank"), x.get("node"), host.get(x.get("rank"))]
                      for x in ranks
                      if host.get(x.get("rank"), "").split(".")[0]
                      != str(x.get("node")).split(".")[0]]
if not ranks:
    r["host_mismatch"] = "show --json lists no ranks"
# submit to all ranks running: the task's own 'running' event, else the
# last of its ranks' once every rank has one
ev = [e for e in show.get("events") or [] if e.get("state") == "running"]
run = [e["time"] for e in ev if "rank" not in e]
if not run and len(set(e["rank"] for e in ev)) == 4:
    run = [max(e["time"] for e in ev)]
sub = show.get("submit_time")
r["to_running"] = round(run[-1] - sub, 3) if run and sub else None
r["start_minus_submit"] = (round(show["start_time"] - sub, 3)
                           if show.get("start_time") and sub else None)
print(json.dumps(r))
EOF
R=$("$PY" "$WORK/torch.py" "$TORCH_OUT" "$WORK/show-$TT.json" 2>"$WORK/torch.err") \
    || diag "analysis failed: $(<"$WORK/torch.err")"
res() {
    json "$1" <<<"$R" 2>/dev/null
}
is "$(res 'j["nlines"]'),$(res 'j["bad_lines"]')" "4,[]" \
    "torch: 4 output lines 'rank R of 4 on HOST sum S'" \
    || diag "output: $TORCH_OUT"
is "$(res 'j["sums"]'),$(res 'j["sizes"]')" "[10],[4]" \
    "torch: every rank's all_reduce sum is 10, world size 4"
is "$(res 'j["ranks"]')" "[0, 1, 2, 3]" "torch: ranks 0..3, once each"
is "$(res 'j["per_host"]')" "[2, 2]" "torch: 2 distinct hosts, 2 ranks each"
is "$(res 'j["show_nranks"]'),$(res 'j["show_ranks"]')" "4,[0, 1, 2, 3]" \
    "torch: show --json has 4 ranks, 0..3"
is "$(res 'j["show_per_node"]')" "[2, 2]" "torch: show --json places them on 2 nodes, 2 each"
is "$(res 'j["cores_each"]'),$(res 'j["shared_cores"]')" "[1],[]" \
    "torch: each rank has 1 core, no (node, core) held by two ranks"
is "$(res 'j["host_mismatch"]')" "[]" "torch: each rank ran on the node show gives it"
diag "torch 2x2: submit to all ranks running: $(res 'j["to_running"]')s" \
     "(start_time - submit_time: $(res 'j["start_minus_submit"]')s)"
# launch latency, for the record (no pass mark: speed is the benchmarks'
# business): from the command to the last rank's process start, a 2x2
# torch task (pilot submit) against a plain srun step of the same program
# on 2 nodes x 2 tasks of the same allocation
JOB=$(pilot status --json | json 'j["job"]')
STAMP='import time; t = time.time(); import os; print("rank", os.environ.get("RANK", os.environ.get("SLURM_PROCID")), "start %.6f" % t)'
PL_MS=() SR_MS=()
for i in 1 2 3; do
    t0=$(now)
    id=$(pilot submit --nodes 2 --ranks-per-node 2 --comm torch \
         -- /usr/bin/python3 -c "$STAMP")
    pilot wait "$id" --timeout 60 >/dev/null 2>&1
    pilot logs "$id" >"$WORK/lat-p$i" 2>&1
    PL_MS+=("$(last_start "$WORK/lat-p$i" "$t0" 4)")
    t0=$(now)
    run_timeout 60 srun --jobid="$JOB" --overlap -N2 --ntasks-per-node=2 \
        /usr/bin/python3 -c "$STAMP" >"$WORK/lat-s$i" 2>&1
    SR_MS+=("$(last_start "$WORK/lat-s$i" "$t0" 4)")
done
diag "2x2 torch ranks, command to last rank started (ms): pilot submit" \
     "${PL_MS[*]}; plain srun step ${SR_MS[*]}"

capture pilot show "$TT"
like "$OUT" $'\nRANK +NODE +CORES +GPUS +STATE\n0 +[^ ]+ +[0-9]' "pilot show lists a RANKS table"
like "$OUT" 'comm: +torch' "... and comm torch"

# --- comm none: 4 independent ranks, one GPU each ----------------------------
capture pilot submit --ranks 4 --gpus-per-rank 1 \
    -- sh -c 'echo $PILOT_RANK $(hostname) $CUDA_VISIBLE_DEVICES $PILOT_GPUS'
GT=$OUT
like "$GT" '^[0-9]+$' "submit --ranks 4 --gpus-per-rank 1 prints an id ($GT)" \
    || diag "stderr: $ERR"
CAPTURE_TIMEOUT=70 capture pilot wait "$GT" --timeout 60
is "$RC" 0 "the GPU ranks are done"
capture pilot logs "$GT"
GPU_OUT=$OUT
show_json "$GT"
cat >"$WORK/gpu.py" <<'EOF'
import json, sys
from collections import Counter

out, show = sys.argv[1], json.load(open(sys.argv[2]))
r = {}
rows = [l.split() for l in out.splitlines() if l.strip()]
r["nlines"] = len(rows)
r["ranks"] = sorted(int(x[0]) if x and x[0].isdigit() else -1 for x in rows)
r["short"] = [" ".join(x) for x in rows if len(x) < 4][:4]
# (host, PILOT_GPUS id) from each rank's own report
held = [(x[1], g) for x in rows if len(x) >= 4 for g in x[3].split(",")]
r["shared_env"] = [h for h, n in Counter(held).items() if n > 1]
ranks = show.get("placement", show.get("ranks"))
ranks = ranks if isinstance(ranks, list) else []
r["show_nranks"] = len(ranks)
r["gpus_each"] = sorted(set(len(x.get("gpus") or []) for x in ranks))
held = [(x.get("node"), g) for x in ranks for g in x.get("gpus") or []]
r["shared_show"] = [list(h) for h, n in Counter(held).items() if n > 1]
print(json.dumps(r))
EOF
R=$("$PY" "$WORK/gpu.py" "$GPU_OUT" "$WORK/show-$GT.json" 2>"$WORK/gpu.err") \
    || diag "analysis failed: $(<"$WORK/gpu.err")"
is "$(res 'j["nlines"]'),$(res 'j["ranks"]')" "4,[0, 1, 2, 3]" \
    "gpu ranks: 4 lines, ranks 0..3" || diag "output: $GPU_OUT"
is "$(res 'j["short"]')" "[]" \
    "gpu ranks: each rank has CUDA_VISIBLE_DEVICES and PILOT_GPUS"
is "$(res 'j["shared_env"]')" "[]" \
    "gpu ranks: no two ranks on one node report the same GPU (PILOT_GPUS)"
is "$(res 'j["show_nranks"]'),$(res 'j["gpus_each"]'),$(res 'j["shared_show"]')" \
    "4,[1],[]" "gpu ranks: show --json gives each rank 1 GPU, none shared on a node"

# --- an exclusive node ---------------------------------------------------------
capture pilot submit --exclusive --nodes 1 \
    -- sh -c 'grep Cpus_allowed_list /proc/self/status'
XT=$OUT
like "$XT" '^[0-9]+$' "submit --exclusive --nodes 1 prints an id ($XT)" \
    || diag "stderr: $ERR"
CAPTURE_TIMEOUT=70 capture pilot wait "$XT" --timeout 60
is "$RC" 0 "the exclusive task is done"
capture pilot logs "$XT"
like "$OUT" '^Cpus_allowed_list:' "... and printed its CPU list ($OUT)"
show_json "$XT"
# the rank list: 'placement' (or 'ranks' where that is a list, not a count)
is "$(json '[len(x) if isinstance(x, list) else "no rank list"
             for x in [j.get("placement", j.get("ranks"))]][0]' \
      <"$WORK/show-$XT.json")" 1 \
    "... and show --json has one rank"
is "$(json 'bool(j.get("exclusive"))' <"$WORK/show-$XT.json")" true \
    "... and says it was exclusive"

# --- tasks that can never fit are refused at submit ------------------------
ntasks() {
    pilot status --json 2>/dev/null | json 'j["tasks"]["total"]' 2>/dev/null
}
NT=$(ntasks)
BIGG=$((NGPUS >= 9 ? NGPUS + 1 : 9))
capture pilot submit --ranks 1 --gpus-per-rank $BIGG -- true
one_error_line "--gpus-per-rank $BIGG on $NGPUS-GPU nodes: one error line about GPUs" \
    '[Gg][Pp][Uu]'
capture pilot submit --nodes $((NNODES + 1)) -- true
one_error_line "--nodes $((NNODES + 1)) on a $NNODES-node pilot: one error line about nodes" \
    'node'
capture pilot submit --ranks-per-node $((NCORES + 1)) -- true
one_error_line "--ranks-per-node $((NCORES + 1)) over a node's $NCORES cores: one error line" \
    'core'
capture pilot submit --nodes 2 --ranks-per-node 2 --ranks 5 -- true
usage_error "--nodes 2 --ranks-per-node 2 --ranks 5: usage error" \
    'ranks 5 does not match --nodes 2 x --ranks-per-node 2'
capture pilot submit --comm nccl -- true
usage_error "--comm nccl: usage error" 'comm'
is "$(ntasks)" "$NT" "... and nothing was queued ($NT tasks)"

# --- no starvation: a 4-node exclusive task in a stream of small ones ------
cat >"$WORK/small.sh" <<'EOF'
#!/bin/sh
exec pilot submit -- sleep 0.2
EOF
chmod +x "$WORK/small.sh"
T0=$(now)
seq 500 | run_timeout 300 xargs -P4 -I{} "$WORK/small.sh" >"$WORK/ids1" \
    2>"$WORK/submit1.err"
RC1=$?
capture pilot submit --nodes $NNODES --exclusive -- true
BT=$OUT
seq 250 | run_timeout 300 xargs -P4 -I{} "$WORK/small.sh" >"$WORK/ids2" \
    2>"$WORK/submit2.err"
RC2=$?
diag "submitting 751 tasks: $(elapsed "$T0" "$(now)")s"
is "$RC1,$RC2,$(grep -cE '^[0-9]+$' "$WORK/ids1"),$(grep -cE '^[0-9]+$' "$WORK/ids2")" \
    "0,0,500,250" "500 one-core tasks submitted before the exclusive one, 250 after"
like "$BT" '^[0-9]+$' "submit --nodes $NNODES --exclusive prints an id ($BT)" \
    || diag "stderr: $ERR"
CAPTURE_TIMEOUT=200 capture pilot wait --all --timeout 180
is "$RC" 0 "wait --all: every task is done"
pilot ls --json --limit 100000 >"$WORK/ls.json" 2>"$WORK/ls.err"
cat >"$WORK/stream.py" <<'EOF'
import json, sys

tasks = {t["id"]: t for t in json.load(open(sys.argv[1]))}
big = int(sys.argv[2])
second = [int(x) for x in open(sys.argv[3]).read().split()]
show = json.load(open(sys.argv[4]))
r = {}
b = tasks.get(big, {})
r["big_state"] = b.get("state")
r["big_nodes"] = len(set(str(b.get("node") or "").split(","))) if b.get("node") else 0
ranks = show.get("placement", show.get("ranks"))
ranks = ranks if isinstance(ranks, list) else []
r["big_rank_nodes"] = len(set(x.get("node") for x in ranks))
bs, be = b.get("start_time"), b.get("end_time")
# the nodes are its own from its first rank's start to its last rank's end
ev = [e for e in show.get("events") or [] if "rank" in e]
run = [e["time"] for e in ev if e.get("state") == "running"]
end = [e["time"] for e in ev if e.get("state") in ("done", "failed")]
hs = min(run) if run else bs
he = max(end) if end else be
starts = [tasks[i]["start_time"] for i in second
          if i in tasks and tasks[i].get("start_time")]
r["second_started"] = len(starts)
r["big_before_last"] = bool(bs and starts and bs < max(starts))
if bs and starts:
    r["after_last_start"] = round(max(starts) - bs, 3)
    r["second_after_big"] = sum(1 for s in starts if s > bs)
# exclusive over all nodes: no other task ran while it did
r["overlap"] = [t["id"] for t in tasks.values()
                if t["id"] != big and hs and he and t.get("start_time")
                and t.get("end_time") and t["start_time"] < he
                and t["end_time"] > hs][:10]
r["not_done"] = [[t["id"], t["state"]] for t in tasks.values()
                 if t["state"] != "done"][:10]
print(json.dumps(r))
EOF
show_json "$BT"
R=$("$PY" "$WORK/stream.py" "$WORK/ls.json" "$BT" "$WORK/ids2" \
    "$WORK/show-$BT.json" 2>"$WORK/stream.err") \
    || diag "analysis failed: $(<"$WORK/stream.err")"
is "$(res 'j["big_state"]'),$(res 'j["big_nodes"]'),$(res 'j["big_rank_nodes"]')" \
    "done,$NNODES,$NNODES" \
    "the exclusive task is done, on $NNODES nodes (ls node, show's ranks)"
is "$(res 'j["big_before_last"]')" true \
    "it started before the last of the 250 tasks submitted after it (no starvation)"
diag "of the 250 tasks submitted after it, $(res 'j["second_after_big"]') started" \
     "after it; the last $(res 'j["after_last_start"]')s after"
is "$(res 'j["overlap"]')" "[]" "no other task ran while the exclusive task held all nodes"
is "$(res 'j["not_done"]')" "[]" "every task of the pilot is done"

# --- ls shows a multi-node task's nodes ------------------------------------
capture pilot ls "$BT"
like "$OUT" "^ID .*"$'\n'"$BT +- +done +[^ ]+,[^ ]+" "pilot ls lists the nodes of the 4-node task"
