#!/bin/bash
# t0520-task-env.sh - a task sees its own world, not the agents' srun step
# (issue 12): on each node of a 4-node pilot, a 1-rank task and a rank of
# a 4-rank comm-none task have the job's Slurm variables (SLURM_JOB_ID,
# SLURM_CONF, SLURMD_NODENAME = its node) and none of the step's
# (SLURM_PROCID, SLURM_NTASKS, SLURM_STEP_*, PMIX_*...); an srun run by a
# task starts a step of the job; --env can still set a step variable.
. "$(dirname "$0")/lib.sh"

plan 12

pilot_up 4 || abort "pilot up --nodes 4 --wait failed"
JOB=$(pilot status --json | json 'j["job"]')
like "$JOB" '^[1-9][0-9]*$' "status gives the pilot's Slurm job ($JOB)"
ENVS=$WORK/env
mkdir -p "$ENVS"

# one 1-rank task per node (--exclusive: each takes a whole node), then a
# 4-rank task with one rank on each node.  The four are one request (an
# array), so all four are queued before any is placed: submitted one by
# one, a task can end (in 4 ms) before the next arrives, which then
# takes the same node (seen in CI at 7f78cb5)
pilot submit --array 1-4 --exclusive -- sh -c "env >$ENVS/one.\$PILOT_TASK_ID" >>"$WORK/ids"
pilot submit --nodes 4 --ranks-per-node 1 -- \
    sh -c "env >$ENVS/four.\$PILOT_RANK" >>"$WORK/ids"
mapfile -t IDS <"$WORK/ids"
capture pilot wait "${IDS[@]}" --timeout 60
is "$RC" 0 "four 1-rank tasks and a 4-rank task end done"

"$PY" - "$ENVS" "$JOB" >"$WORK/check.json" <<'EOF'
import glob, json, os, re, sys
envs, job = sys.argv[1], sys.argv[2]
# the job's Slurm variables, the only SLURM_* a task may see
job_re = re.compile(r"SLURM_(JOB_.*|JOBID|ARRAY_.*|HET_.*|CLUSTER_NAME|CONF|"
                    r"SUBMIT_DIR|SUBMIT_HOST)$")
launch_re = re.compile(r"(PMIX_|PMI_|OMPI_COMM_WORLD_|OMPI_MCA_orte_|OMPI_MCA_ess)")
res = {"files": {}, "step_vars": {}, "job_ok": [], "node_ok": [], "ranks": {}}
for path in sorted(glob.glob(os.path.join(envs, "*"))):
    name = os.path.basename(path)
    env = {}
    for line in open(path, errors="replace").read().split("\n"):
        k, eq, v = line.partition("=")
        if eq and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            env[k] = v
    # SLURM_STEP_GPUS is pilot's own: the rank's GPUs (docs/placement.md),
    # as PILOT_GPUS; any other value would be the agents' step's
    bad = sorted(k for k in env
                 if (k.startswith("SLURM_") and not job_re.match(k)
                     and not (k == "SLURM_STEP_GPUS"
                              and env[k] == env.get("PILOT_GPUS")))
                 or launch_re.match(k))
    if bad:
        res["step_vars"][name] = bad
    res["files"][name] = env.get("PILOT_NODE")
    if env.get("SLURM_JOB_ID") == job and env.get("SLURM_CONF"):
        res["job_ok"].append(name)
    if env.get("SLURMD_NODENAME") and env.get("SLURMD_NODENAME") == env.get("PILOT_NODE"):
        res["node_ok"].append(name)
    res["ranks"][name] = "%s/%s" % (env.get("PILOT_RANK"), env.get("PILOT_SIZE"))
res["one_nodes"] = sorted(n for f, n in res["files"].items() if f.startswith("one."))
res["four_nodes"] = sorted(n for f, n in res["files"].items() if f.startswith("four."))
print(json.dumps(res))
EOF
C=$(<"$WORK/check.json")
is "$(json 'j["one_nodes"]' <<<"$C")" '["n1", "n2", "n3", "n4"]' \
    "the 1-rank tasks ran one on each node"
is "$(json 'j["four_nodes"]' <<<"$C")" '["n1", "n2", "n3", "n4"]' \
    "the 4-rank task ran one rank on each node"
is "$(json 'j["step_vars"]' <<<"$C")" '{}' \
    "no task saw a variable of the agents' step (SLURM_PROCID, SLURM_STEP_*, PMIX_*...)"
is "$(json 'len(j["job_ok"])' <<<"$C")" 8 \
    "all 8 saw the job's SLURM_JOB_ID ($JOB) and SLURM_CONF"
is "$(json 'len(j["node_ok"])' <<<"$C")" 8 "... and SLURMD_NODENAME naming their node"
is "$(json 'sorted(v for k, v in j["ranks"].items() if k.startswith("four."))' <<<"$C")" \
    '["0/4", "1/4", "2/4", "3/4"]' "the 4-rank task's ranks: PILOT_RANK 0-3 of PILOT_SIZE 4"
is "$(json 'sorted(set(v for k, v in j["ranks"].items() if k.startswith("one.")))' <<<"$C")" \
    '["0/1"]' "each 1-rank task: rank 0 of 1"

# srun inside a task: a new step of the job, with the task's one rank
T=$(pilot submit -- srun --overlap -N1 -n1 sh -c 'echo "$SLURM_JOB_ID $SLURM_STEP_ID $SLURM_PROCID/$SLURM_NTASKS"')
capture pilot wait "$T" --timeout 60
is "$RC" 0 "a task that runs srun itself ends done"
like "$(pilot logs "$T")" "^$JOB [1-9][0-9]* 0/1\$" \
    "... its srun started a step of the job (a new step id, rank 0 of 1)"

# --env still sets what the user asks, even a step's variable
T=$(pilot submit --env SLURM_PROCID=7 -- sh -c 'echo "$SLURM_PROCID"')
capture pilot wait "$T" --timeout 30
is "$(pilot logs "$T")" 7 "--env SLURM_PROCID=7 reaches the task"
