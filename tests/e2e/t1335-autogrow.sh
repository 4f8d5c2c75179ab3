#!/bin/bash
# t1335-autogrow.sh - pilot up --grow: a 1-node pilot under a queue of
# 4-node tasks asks Slurm for the 3 nodes they lack (one allocation, sized
# from the queue), runs them, and releases the allocation once it has been
# idle for idle=; sbatch failures back off (10 s, then 20 s) and are
# logged, and the task waits rather than fails as too large; one that no
# node like the pilot's could ever run (or more of them than --grow max
# allows) is refused at once.
. "$(dirname "$0")/lib.sh"

plan 18

T0=$(now)
P=$(run_timeout 120 pilot up --nodes 1 --time 15:00 --grow max=3,idle=10s \
    --wait --wait-timeout 60 2>"$WORK/up.err") \
    || abort "pilot up --grow failed: $(<"$WORK/up.err")"
DIR=$(pilot_dir "$P")
like "$(cat "$DIR/pilot.sbatch")" ' --grow max=3,idle=10s' \
    "the batch script passes --grow to pilotd"
for i in 1 2 3; do
    pilot submit --nodes 4 -- hostname >>"$WORK/ids"
done
is "$(wc -l <"$WORK/ids")" 3 "three 4-node tasks are taken (not too large)"
capture pilot submit --cores-per-rank 64 -- true
one_error_line "64 cores a rank: refused, growing would not help" \
    'task needs 64 cores per rank but the largest node has [0-9]+ \(nodes that join are alike'
capture pilot submit --nodes 5 -- true
one_error_line "5 nodes: refused, the pilot grows to 4 at most" \
    'task needs 5 nodes but this pilot grows to 4 at most \(its own 1, --grow max=3\)'
capture pilot wait $(cat "$WORK/ids") --timeout 90
is "$RC" 0 "they are done"
diag "up to the tasks done: $(elapsed "$T0" "$(now)")s"
capture pilot ls --json
is "$(json '[len(set(t["node"].split(","))) for t in j]' <<<"$OUT")" \
    "[4, 4, 4]" "each ran on 4 nodes"
capture pilot status --json
is "$(json '[[a["id"], a["auto"], a["nodes"], len(a["names"])] for a in j["allocs"]]' \
    <<<"$OUT")" '[[1, true, 3, 3]]' \
    "one automatic allocation of the 3 nodes they lacked"
JOB=$(json 'j["allocs"][0]["job"]' <<<"$OUT")
cleanup_job "$JOB"
is "$(json 'j["agents_up"]' <<<"$OUT")" 4 "4 agents up"
alloc1() {
    pilot status --json | json 'j["allocs"][0]["state"]'
}
ok "idle for 10 s, the allocation is released" \
    wait_for 40 eval '[[ $(alloc1) == ended ]]'
capture pilot status --json
like "$(json 'j["allocs"][0]["why"]' <<<"$OUT")" '^idle for 1[0-9] s$' \
    "... as idle"
is "$(json 'j["agents_up"]' <<<"$OUT")" 1 "the pilot is back to its own node"
ok "its Slurm job leaves squeue" wait_for 30 job_gone "$JOB"
capture pilot grow --nodes 1 --time 0
usage_error "grow --time 0 is refused" "not a Slurm time limit"
capture pilot down
is "$RC" 0 "pilot down"

# --- sbatch fails: the back-off ---------------------------------------
P2=$(run_timeout 120 pilot up --nodes 1 --time 15:00 \
     --grow max=2,partition=nosuch --wait --wait-timeout 60 \
     2>"$WORK/up2.err") || abort "pilot up failed: $(<"$WORK/up2.err")"
DIR2=$(pilot_dir "$P2")
capture pilot submit --nodes 2 --retries 0 -- hostname
T2=$OUT
failures() {
    grep -c 'auto-grow: sbatch failed: .*[Pp]artition' "$DIR2/logs/pilotd.log"
}
ok "sbatch fails: logged" wait_for 30 eval '(( $(failures) >= 1 ))'
ok "... tried again after 10 s, then waits 20 s" \
    wait_for 30 eval '(( $(failures) >= 2 ))'
like "$(grep 'auto-grow: sbatch failed' "$DIR2/logs/pilotd.log" | head -2 \
        | sed 's/.*next try/next try/' | tr '\n' '|')" \
    '^next try in 10 s \(failure 1 in a row\)\|next try in 20 s \(failure 2 in a row\)\|$' \
    "the waits double: 10 s, 20 s"
is "$(pilot show "$T2" --json | json 'j["state"]')" queued \
    "the 2-node task stays queued"
