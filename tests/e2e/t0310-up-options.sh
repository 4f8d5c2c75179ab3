#!/bin/bash
# t0310-up-options.sh - 'pilot up --gpus-per-node --partition --account
# --sbatch-arg': the #SBATCH lines of the batch script it writes, what
# Slurm made of them (scontrol), and the GPUs the agents then see; a
# partition Slurm does not have fails 'pilot up' with sbatch's reason.
. "$(dirname "$0")/lib.sh"

plan 21

PART=$(sinfo -h -o %P | head -n1)
PART=${PART%\*}
[[ -n $PART ]] || abort "sinfo names no partition"

t0=$(now)
CAPTURE_TIMEOUT=180 capture pilot up --nodes 2 --time 12:00 --gpus-per-node 2 \
    --partition "$PART" --account e2e-acct --sbatch-arg=--comment=pilot-e2e-t0310 \
    --sbatch-arg "--mem-per-cpu=64" --wait --wait-timeout 120 --json
is "$RC" 0 "pilot up with --gpus-per-node 2 --partition $PART --account --sbatch-arg x2 --wait exits 0"
diag "pilot up: $(elapsed "$t0" "$(now)")s"
P=$(json 'j["pilot"]' <<<"$OUT")
JOB=$(json 'j["job"]' <<<"$OUT")
DIR=$(json 'j["dir"]' <<<"$OUT")
like "$JOB" '^[1-9][0-9]*$' "--json gives the Slurm job ($JOB)"
[[ $JOB =~ ^[0-9]+$ && -d $DIR ]] || abort "pilot up failed: $ERR"
cleanup_job "$JOB"

# the batch script: one #SBATCH line per option, in the order given
grep '^#SBATCH' "$DIR/pilot.sbatch" >"$WORK/sbatch-lines"
is "$(grep -E -- '--(nodes|time|gres|partition|account|comment|mem-per-cpu)' "$WORK/sbatch-lines")" \
"#SBATCH --nodes=2
#SBATCH --time=12:00
#SBATCH --gres=gpu:2
#SBATCH --partition=$PART
#SBATCH --account=e2e-acct
#SBATCH --comment=pilot-e2e-t0310
#SBATCH --mem-per-cpu=64" "pilot.sbatch has an #SBATCH line for each option"
ok "... after the ones pilot always writes (whole nodes, no requeue, the drain signal)" \
    grep -qx -- '#SBATCH --signal=B:TERM@120' "$WORK/sbatch-lines"

# what Slurm made of them
scontrol -o show job "$JOB" | tr ' ' '\n' >"$WORK/job"
jf() { awk -F= -v k="$1" '$1 == k { sub(/^[^=]*=/, ""); print; exit }' "$WORK/job"; }
is "$(jf Partition) $(jf NumNodes) $(jf TimeLimit)" "$PART 2 00:12:00" \
    "Slurm's job: partition $PART, 2 nodes, 12 minutes"
is "$(jf Account)" e2e-acct "... account e2e-acct"
is "$(jf Comment)" pilot-e2e-t0310 "... the comment given by --sbatch-arg"
is "$(jf MinMemoryCPU)" 64M "... the memory per CPU given by the other --sbatch-arg"
like "$(jf TresPerNode)" '^(gres[:/])?gpu:2$' "... 2 GPUs a node"

# the agents: each has the GPUs Slurm gave the job on its node.  N.B. an
# --exclusive job (pilot's are: whole nodes) is given every GPU of its
# nodes whatever --gres asked for (Slurm 22.05: JOB_GRES=gpu:4 for
# --gres=gpu:2); --gpus-per-node chooses nodes that have at least that many.
# scontrol -d gives each node's "GRES=gpu:N(IDX:...)"
GRANTED=$(scontrol -d show job "$JOB" | grep -oE '(^| )GRES=gpu:[0-9]+' \
          | sed 's/.*gpu://' | sort -u)
ok "Slurm gave the job at least 2 GPUs on each node ($GRANTED)" test "${GRANTED:-0}" -ge 2
capture pilot status --json
is "$(json '[len(n["gpus"]) for n in j["nodes"]]' <<<"$OUT")" "[$GRANTED, $GRANTED]" \
    "each of the 2 agents has the $GRANTED GPUs Slurm gave the job on its node"
T=$(pilot submit --gpus-per-rank 2 -- sh -c 'echo "$CUDA_VISIBLE_DEVICES"')
capture pilot wait "$T" --timeout 30
is "$RC,$(pilot logs "$T")" "0,0,1" "a task with --gpus-per-rank 2 gets both"
capture pilot down
is "$RC" 0 "pilot down exits 0"

# a partition Slurm does not have: sbatch refuses, pilot up says why
capture pilot up --nodes 1 --partition no-such-partition
is "$RC" 1 "pilot up --partition no-such-partition exits 1"
like "$ERR" "sbatch.*(invalid partition|Invalid partition)" "... with sbatch's reason"

# --- --bind -----------------------------------------------------------------
# the dev cluster's nodes have lo and eth0 (10.199.0.1N)
CAPTURE_TIMEOUT=180 capture pilot up --nodes 1 --bind eth0 --wait --wait-timeout 120 --json
is "$RC" 0 "pilot up --nodes 1 --bind eth0 --wait exits 0"
DIR=$(json 'j["dir"]' <<<"$OUT")
[[ -n $DIR ]] && cleanup_job "$(json 'j["job"]' <<<"$OUT")"
like "$(kv "$DIR/endpoint" client)" '^tcp://10\.199\.0\.1[0-9]:[0-9]+$' \
    "... pilotd listens on eth0's address ($(kv "$DIR/endpoint" client))"
like "$(cat "$DIR/pilot.sbatch")" "--bind 'eth0'" "... given to pilotd by the batch script"
P3=$(json 'j["pilot"]' <<<"$OUT")
T=$(pilot submit --pilot "$P3" -- true)
capture pilot wait --pilot "$P3" "$T" --timeout 30
is "$RC" 0 "... and a task runs: the agent reached it there"
capture pilot down --pilot "$P3"
CAPTURE_TIMEOUT=180 capture pilot up --nodes 1 --bind 203.0.113.77 --wait --wait-timeout 120
is "$RC" 1 "pilot up --bind 203.0.113.77 (not the node's): exit 1"
like "$ERR" "pilotd: error: --bind 203\\.0\\.113\\.77: not an address or interface of this host \\(it has: lo 127\\.0\\.0\\.1, eth0 10\\.199\\.0\\." \
    "... with pilotd's reason: the node's addresses named"
