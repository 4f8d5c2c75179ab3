#!/bin/bash
# t0300-sbatch.sh - a pilot started by 'sbatch scripts/pilot.sbatch' (the
# user's own batch script) is found and driven by the CLI, and 'pilot
# down' ends its Slurm job.
. "$(dirname "$0")/lib.sh"

plan 16

cd "$REPO" || abort "cannot cd to $REPO"
JOB=$(sbatch --parsable -N2 --output="$WORK/sbatch-%j.out" \
      scripts/pilot.sbatch 2>"$WORK/sbatch.err")
RC=$?
is "$RC" 0 "sbatch --parsable -N2 scripts/pilot.sbatch exits 0"
JOB=${JOB%%;*}
like "$JOB" '^[1-9][0-9]*$' "sbatch prints a job id ($JOB)"
[[ $JOB =~ ^[0-9]+$ ]] || abort "sbatch failed: $(<"$WORK/sbatch.err")"
cleanup_job "$JOB"
cd "$WORK" || abort "cannot cd to $WORK"

T0=$(now)
ok "within 60 s, pilot status --json shows 2 agents up" wait_for 60 agents_up 2
diag "sbatch to 2 agents up: $(elapsed "$T0" "$(now)")s"

capture pilot status --json
is "$(json '[j["mode"], j["job"], j["agents_expected"]]' <<<"$OUT")" \
    "[\"slurm\", $JOB, 2]" "status: mode slurm, job $JOB, 2 agents expected"
P=$(json 'j["pilot"]' <<<"$OUT")
like "$P" '^p[0-9]+$' "status names the pilot ($P)"
capture pilot pilots --json
like "$OUT" "\"$P\"" "pilot pilots --json lists $P"

capture pilot submit -- sh -c 'echo "sbatch task $PILOT_TASK_ID on $(hostname)"'
ID=$OUT
like "$ID" '^[0-9]+$' "submit prints a task id ($ID)"
capture pilot wait "$ID" --timeout 30
is "$RC" 0 "the task is done"
capture pilot logs "$ID"
like "$OUT" "^sbatch task $ID on n[0-9]+\$" "its output names its id and its node"
capture pilot show "$ID" --json
is "$(json '[j["state"], j["exit_code"]]' <<<"$OUT")" '["done", 0]' \
    "show: done, exit code 0"

T1=$(now)
capture pilot down
T2=$(now)
is "$RC" 0 "pilot down exits 0"
diag "pilot down: $(elapsed "$T1" "$T2")s: $OUT"
ok "pilot down returns within 15 s" \
    "$PY" -c 'import sys; sys.exit(float(sys.argv[2]) - float(sys.argv[1]) > 15)' "$T1" "$T2"
ok "the job leaves squeue within 30 s" wait_for 30 job_gone "$JOB"
diag "pilot down to the job out of squeue: $(elapsed "$T1" "$(now)")s"
is "$(job_end "$JOB")" "COMPLETED 0:0" \
    "the job ends by itself, cleanly (pilotd exits 0: not canceled, no signal)"
capture pilot ls --json
is "$RC" 0 "ls works after down"
is "$(json '[t["id"] for t in j]' <<<"$OUT" 2>/dev/null)" "[$ID]" \
    "... and lists the task"
