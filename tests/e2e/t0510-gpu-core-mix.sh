#!/bin/bash
# t0510-gpu-core-mix.sh - 64 one-GPU tasks and 64 core-bound tasks
# submitted at once to a 4-node pilot (4 fake GPUs and 2 cores a node):
# from the recorded times and each task's own report of its GPUs and CPU
# mask, no GPU and no core was ever held by two running tasks, every
# node's GPUs were all used, and what each task saw is what pilotd
# recorded for it.
. "$(dirname "$0")/lib.sh"

plan 6

pilot_up 4 || abort "pilot up --nodes 4 --wait failed"
# each task reports where it runs and what it sees, then holds it a while
cat >"$WORK/submit.sh" <<'EOS'
#!/bin/sh
# submit.sh gpu|core: one task of that kind
if [ "$1" = gpu ]; then set -- --gpus-per-rank 1; else set --; fi
exec pilot submit "$@" -- sh -c 'echo "$PILOT_TASK_ID $(hostname) gpus=$PILOT_GPUS cvd=$CUDA_VISIBLE_DEVICES $(grep Cpus_allowed_list /proc/self/status | tr -d "\t ")"; sleep 0.3'
EOS
chmod +x "$WORK/submit.sh"
T0=$(date +%s.%N)
for i in $(seq 64); do echo gpu; echo core; done \
    | run_timeout 300 xargs -P4 -n1 "$WORK/submit.sh" >"$WORK/ids"
diag "submitted 128 tasks in $(elapsed "$T0" "$(date +%s.%N)")s"
is "$(sort -u "$WORK/ids" | grep -c '^[0-9][0-9]*$')" 128 "128 distinct task ids"
capture pilot wait --all --timeout 240
is "$RC" 0 "all 128 tasks end done"
pilot ls --json >"$WORK/ls.json"
for id in $(cat "$WORK/ids"); do
    pilot logs "$id" 2>/dev/null
done >"$WORK/reports"
capture pilot status --json
echo "$OUT" >"$WORK/status.json"
/usr/bin/python3 - "$WORK/ls.json" "$WORK/reports" "$WORK/status.json" \
    >"$WORK/res" <<'EOP'
import json, re, sys
tasks = {t["id"]: t for t in json.load(open(sys.argv[1]))}
status = json.load(open(sys.argv[3]))
rep = {}
for l in open(sys.argv[2]):
    m = re.match(r"(\d+) (\S+) gpus=(\S*) cvd=(\S*) Cpus_allowed_list:(\S+)", l)
    if m:
        rep[int(m.group(1))] = m.groups()[1:]
def cpus(s):
    out = set()
    for part in s.split(","):
        a, _, b = part.partition("-")
        out.update(range(int(a), int(b or a) + 1))
    return out
# intervals per (node, core) and (node, gpu)
use = {}
for t in tasks.values():
    if t["start_time"] is None:
        continue
    for c in t["cores"]:
        use.setdefault(("core", t["node"], c), []).append((t["start_time"], t["end_time"], t["id"]))
    for g in t["gpus"]:
        use.setdefault(("gpu", t["node"], g), []).append((t["start_time"], t["end_time"], t["id"]))
overlaps = 0
for k, iv in use.items():
    iv.sort()
    for a, b in zip(iv, iv[1:]):
        if b[0] < a[1]:
            overlaps += 1
used_gpus = {(t["node"], g) for t in tasks.values() for g in t["gpus"]}
all_gpus = {(n["name"], int(g)) for n in status["nodes"] for g in n["gpus"]}
agree = 0
for tid, (host, gpus, cvd, cl) in rep.items():
    t = tasks[tid]
    g_ok = sorted(int(x) for x in gpus.split(",") if x) == sorted(t["gpus"])
    c_ok = cpus(cl) == set(t["cores"])
    if host == t["node"] and g_ok and c_ok and (cvd != "") == bool(t["gpus"]):
        agree += 1
print(json.dumps({"overlaps": overlaps, "reports": len(rep), "agree": agree,
                  "gpus_used": len(used_gpus & all_gpus), "gpus_all": len(all_gpus),
                  "gpu_tasks": sum(1 for t in tasks.values() if t["gpus"])}))
EOP
RES=$(cat "$WORK/res")
diag "$RES"
is "$(json 'j["overlaps"]' <<<"$RES")" 0 "no core and no GPU held by two running tasks (from the recorded times)"
is "$(json 'j["agree"]' <<<"$RES")" 128 "all 128 tasks saw the node, cores and GPUs pilotd recorded for them"
is "$(json 'j["gpu_tasks"]' <<<"$RES")" 64 "64 tasks held a GPU"
is "$(json 'j["gpus_used"] == j["gpus_all"]' <<<"$RES")" true "every GPU of every node was used"
