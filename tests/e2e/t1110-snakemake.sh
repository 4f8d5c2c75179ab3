#!/bin/bash
# t1110-snakemake.sh - pilot as Snakemake's backend (contrib/snakemake), on
# a Slurm pilot of 4 nodes: 'pilot submit --parsable' and 'pilot state'
# (a task, an array, an element, an unknown id, a pilot that is down); a
# diamond of 30 jobs through the profile (outputs, the job properties as
# task options) and through the old --cluster "pilot submit --" with
# Snakemake's marker files, both timed; then, with --keep-going, a job
# that fails, one canceled while it sleeps and one refused at submit
# (gpus=8 on nodes of 4 GPUs): the good outputs are made, Snakemake
# exits non-zero and names each failed job.
. "$(dirname "$0")/lib.sh"

plan 55

field() { pilot show "$1" --json | json "j[\"$2\"]"; }
state_is() { [[ $(field "$1" state) == "$2" ]]; }
PROFILE=$REPO/contrib/snakemake
SMK=/usr/bin/snakemake
[[ -x $SMK ]] || abort "$SMK is missing (scripts/install-deps.sh installs it)"

pilot_up 4 || abort "pilot up --nodes 4 failed"
P=$PILOT_UP_ID
diag "pilot up --nodes 4: ${PILOT_UP_SECS}s"

# --- submit --parsable ------------------------------------------------------
capture pilot submit --parsable --name ok -- true
is "$RC" 0 "submit --parsable exits 0"
like "$OUT" '^[1-9][0-9]*$' "... and prints the id alone"
is "$ERR" "" "... and nothing on stderr"
OK=$OUT
capture pilot submit --parsable --array 0-3 -- sh -c 'exit $((PILOT_ARRAY_INDEX == 2))'
like "$RC|$OUT|$ERR" '^0\|[1-9][0-9]*\|$' \
    "submit --parsable --array: the array's id alone, nothing on stderr"
ARR=$OUT
capture pilot submit --parsable --json -- true
usage_error "--parsable with --json: a usage error" '--parsable and --json'
capture pilot submit --parsable -- sh -c 'exit 1'
BAD=$OUT
SLEEP=$(pilot submit --parsable -- sleep 300)
DOOMED=$(pilot submit --parsable -- sleep 300)
WAITING=$(pilot submit --parsable --after "$SLEEP" -- true)
TO=$(pilot submit --parsable --timeout 1 -- sleep 30)
capture pilot wait "$OK" "$ARR" "$BAD" "$TO" --timeout 60
is "$RC" 1 "the tasks ended (one element and two tasks failed)"

# --- pilot state ------------------------------------------------------------
wait_for 30 state_is "$SLEEP" running
capture pilot state "$SLEEP"
is "$RC|$OUT|$ERR" "0|running|" "state of a running task: running"
capture pilot state "$WAITING" "$TO"
is "$OUT" "running
failed" "a task waiting for it: running; one that timed out: failed"
capture pilot state "$OK" "$BAD" "$ARR.1" "$ARR.2" "$ARR"
is "$RC|$OUT" "0|success
failed
success
failed
failed" "state of several: one word a line, in order (an element, an array with a failed one)"
capture pilot cancel "$DOOMED"
capture pilot state "$DOOMED"
is "$OUT" failed "a canceled task: failed"
RUNARR=$(pilot submit --parsable --array 0-1 -- sh -c '[ $PILOT_ARRAY_INDEX = 0 ] || sleep 300')
wait_for 30 state_is "$RUNARR.0" "done"
capture pilot state "$RUNARR"
is "$OUT" running "an array with an element done and one running: running"
capture pilot state --json "$OK" "$ARR"
is "$(json '[(s["task"], s["state"], s["counts"]["total"]) for s in j["states"]]' <<<"$OUT")" \
    "[[\"$OK\", \"success\", 1], [\"$ARR\", \"failed\", 4]]" \
    "--json: each id's word and its counts"
capture pilot state 999999
one_error_line "an unknown id: exit 1, one line naming it" '^pilot: error: no task 999999$'
capture pilot state "$OK" 999999
one_error_line "... and nothing printed for the known ids beside it" 'no task 999999'
capture pilot state "$ARR.99"
is "$RC|$OUT" "1|" "an unknown element: exit 1"
like "$ERR" '^pilot: error: .*99' "... with an error naming it"
capture pilot state 12x
usage_error "a malformed id: a usage error" "'12x' is not a positive integer"
capture pilot state
usage_error "no id: a usage error" 'no task ids given'
# Snakemake polls every job every 10 s: the call must stay cheap
t0=$(now)
for _ in 1 2 3 4 5 6 7 8 9 10; do pilot state --pilot "$P" "$OK" >/dev/null; done
STATE_MS=$("$PY" -c "print(round((float('$(now)') - $t0) * 100))")
diag "pilot state (running pilot, --pilot): ${STATE_MS} ms a call"
pilot cancel "$SLEEP" "$RUNARR" >/dev/null

# --- a diamond of 30 jobs through the profile ---------------------------------
# split -> 28 x work (2 threads each) -> merge; split carries a runtime and
# a memory figure, which the profile turns into --timeout and a tag, merge
# a GPU (the dev cluster's nodes have 4 fake ones)
write_diamond() {
    mkdir -p "$1"
    cat >"$1/Snakefile" <<'EOF'
N = 28
wildcard_constraints:
    i="[0-9]+"
rule all:
    input: "out/final.txt"
rule split:
    output: "out/split.txt"
    resources: runtime=5, mem_mb=100
    shell: "echo $PILOT_TASK_ID > {output}"
rule work:
    input: "out/split.txt"
    output: "out/work.{i}.txt"
    threads: 2
    shell: "echo {wildcards.i} $PILOT_TASK_ID $PILOT_NODELIST > {output}"
rule merge:
    input: expand("out/work.{i}.txt", i=range(N))
    output: "out/final.txt"
    resources: gpus=1
    shell: "cat {input} > {output}"
EOF
}
# the lines of final.txt: "I TASK NODE", I from 0 to 27
diamond_ok() {
    [[ $(awk '{ print $1 }' "$1/out/final.txt" 2>/dev/null | sort -n | tr '\n' ' ') \
       == "$(seq 0 27 | tr '\n' ' ')" ]]
}

write_diamond "$WORK/prof"
t0=$(now)
(cd "$WORK/prof" && run_timeout 400 "$SMK" --profile "$PROFILE" \
     >"$WORK/prof.log" 2>&1)
RC=$?
PROF_SECS=$(elapsed "$t0" "$(now)")
diag "30-job diamond through the profile: ${PROF_SECS}s"
is "$RC" 0 "the diamond through the profile: snakemake exits 0" ||
    diag "$(tail -n 30 "$WORK/prof.log")"
ok "... and final.txt holds the 28 work outputs, merged" diamond_ok "$WORK/prof"
is "$(grep -c '^stamp [0-9]*$' "$WORK/prof/.snakemake/pilot-states")" 1 \
    "... status.sh left its cache in .snakemake/"
is "$(grep -c "with external jobid '[1-9][0-9]*'" "$WORK/prof.log")" 30 \
    "... each of the 30 jobs a pilot task, its id the job id"
NODES=$(awk '{ print $3 }' "$WORK/prof/out/final.txt" | sort -u | wc -l)
diag "the work jobs ran on $NODES nodes"
ok "... the work jobs spread over several of the 4 nodes" test "$NODES" -ge 2
W=$(awk '$1 == 5 { print $2 }' "$WORK/prof/out/final.txt")
is "$(pilot show "$W" --json | json '[j["name"], len(j["cores"])]')" '["work", 2]' \
    "a work job: named after its rule, 2 cores for its 2 threads"
S=$(cat "$WORK/prof/out/split.txt")
is "$(pilot show "$S" --json | json '[j["name"], j["timeout"], j["tags"]["mem_mb"]]')" \
    '["split", 300.0, "100"]' "the split job: runtime=5 -> --timeout 5m, mem_mb -> a tag"
like "$(pilot show "$S" --json | json 'j["argv"]')" \
    '^\["/.*/\.snakemake/tmp\.[^/]*/snakejob\.split\.[0-9]+\.sh"\]$' \
    "... and it ran Snakemake's jobscript, by its absolute path"
is "$(pilot ls --json | json '[len(t["gpus"]) for t in j if t["name"] == "merge"]')" \
    "[1]" "the merge job (gpus=1): a task with 1 GPU"

# --- the same through the old --cluster "pilot submit --" -------------------
write_diamond "$WORK/old"
t0=$(now)
(cd "$WORK/old" && run_timeout 400 "$SMK" --cluster "pilot submit --" \
     --jobs 500 >"$WORK/old.log" 2>&1)
RC=$?
OLD_SECS=$(elapsed "$t0" "$(now)")
diag "30-job diamond through --cluster 'pilot submit --': ${OLD_SECS}s"
is "$RC" 0 "the diamond through --cluster 'pilot submit --': exits 0" ||
    diag "$(tail -n 30 "$WORK/old.log")"
ok "... with the same outputs" diamond_ok "$WORK/old"

# --- failures, with --keep-going ----------------------------------------------
mkdir -p "$WORK/bad"
cat >"$WORK/bad/Snakefile" <<'EOF'
rule all:
    input: "out/c.txt", "out/fail.txt", "out/sleepy.txt", "out/gpu.txt"
rule a:
    output: "out/a.txt"
    shell: "echo a > {output}"
rule b:
    input: "out/a.txt"
    output: "out/b{k}.txt"
    shell: "echo b{wildcards.k} > {output}"
rule c:
    input: "out/b1.txt", "out/b2.txt"
    output: "out/c.txt"
    shell: "cat {input} > {output}"
rule fail:
    output: "out/fail.txt"
    shell: "exit 1"
rule sleepy:
    output: "out/sleepy.txt"
    shell: "sleep 300; touch {output}"
rule gpu:
    output: "out/gpu.txt"
    resources: gpus=8
    shell: "touch {output}"
EOF
(cd "$WORK/bad" && run_timeout 400 "$SMK" --profile "$PROFILE" --keep-going \
     >"$WORK/bad.log" 2>&1) &
SMK_PID=$!
sleepy_id() {
    pilot ls --state running --json 2>/dev/null \
        | json '" ".join(str(t["id"]) for t in j if t["name"] == "sleepy")'
}
sleepy_runs() { [[ -n $(sleepy_id) ]]; }
wait_for 120 sleepy_runs
SL=$(sleepy_id)
capture pilot cancel "$SL"
is "$RC" 0 "the sleeping job's task ($SL) is canceled"
wait "$SMK_PID"
RC=$?
is "$RC" 1 "snakemake --keep-going exits 1 after the failures" ||
    diag "$(tail -n 40 "$WORK/bad.log")"
is "$(cat "$WORK/bad/out/c.txt" 2>/dev/null)" "b1
b2" "... the good diamond's outputs are there"
ok "... none of the failed jobs' outputs" \
    test ! -e "$WORK/bad/out/fail.txt" -a ! -e "$WORK/bad/out/sleepy.txt" \
    -a ! -e "$WORK/bad/out/gpu.txt"
FAIL_ID=$(pilot ls --state failed --json | json '[t["id"] for t in j if t["name"] == "fail"][0]')
LOG=$(<"$WORK/bad.log")
like "$LOG" "Error in rule fail:" "the log names rule fail"
like "$LOG" "cluster_jobid: $FAIL_ID([^0-9]|\$)" "... with its task id"
like "$LOG" "Error in rule sleepy:" "the log names rule sleepy (canceled)"
like "$LOG" "cluster_jobid: $SL([^0-9]|\$)" "... with its task id"
like "$LOG" "Error submitting jobscript" "the gpu job: its submit failed"
like "$LOG" "pilot: error: task needs 8 GPUs per rank but the largest node has 4" \
    "... with pilot's reason"
like "$LOG" "Exiting because a job execution failed" "snakemake says it failed"
is "$(field "$SL" state)" canceled "the canceled job's task ended canceled"

# --- the status and cancel scripts by hand -------------------------------------
# in a directory of their own: status.sh keeps its cache in .snakemake/
mkdir -p "$WORK/st"
cd "$WORK/st" || abort "cd $WORK/st"
capture "$PROFILE/status.sh" "$FAIL_ID"
is "$RC|$OUT" "0|failed" "status.sh ID: pilot state's word"
L1=$(pilot submit --parsable -- sleep 300)
L2=$(pilot submit --parsable -- sleep 300)
wait_for 30 state_is "$L1" running
wait_for 30 state_is "$L2" running
capture "$PROFILE/status.sh" "$L1"
capture "$PROFILE/status.sh" "$L2"
is "$OUT|$(grep -cxe "$L1 running" -e "$L2 running" .snakemake/pilot-states)" \
    "running|2" "status.sh of running tasks: running, each in its cache"
capture "$PROFILE/cancel.sh" "$L1" "$OK"
is "$RC|$OUT" "0|canceled 1 task (1 was already finished)" "cancel.sh ID...: pilot cancel"
capture "$PROFILE/status.sh" "$L1"
is "$OUT" running "status.sh answers once from its cache (the task was canceled since)"
capture "$PROFILE/status.sh" "$L1"
is "$OUT" failed "... asked again (Snakemake's next sweep), it asks pilot"
pilot cancel "$L2" >/dev/null
printf 'stamp 1\n999999 running\n' >.snakemake/pilot-states
capture "$PROFILE/status.sh" "$OK"
is "$RC|$OUT" "0|success" "a stale cache naming an unknown id: the right answer all the same"
t0=$(now)
capture "$PROFILE/status.sh" 999999
is "$RC" 1 "status.sh of an unknown id fails (after its retries)"
like "$(elapsed "$t0" "$(now)")" '^[4-9]\.' "... tried 3 times, 2 s apart"
cd "$WORK" || abort "cd $WORK"

# --- pilot state on a pilot that is down --------------------------------------
capture pilot down
is "$RC" 0 "pilot down"
capture pilot state "$OK" "$ARR" "$DOOMED"
is "$RC|$OUT" "0|success
failed
failed" "state on a pilot that is down: from its state DB"
like "$ERR" "^pilot: note: pilot $P is down" "... with the note that says so"
capture pilot state --pilot "$P" 999999
is "$RC|$OUT" "1|" "an unknown id on a pilot that is down: exit 1, nothing on stdout"
like "$ERR" $'pilot: error: no task 999999$' "... the error naming it, after the note"
capture pilot submit --parsable -- true
is "$RC|$OUT" "1|" "submit --parsable to a pilot that is down: exit 1, nothing on stdout"

diag "profile ${PROF_SECS}s vs --cluster 'pilot submit --' ${OLD_SECS}s; pilot state ${STATE_MS} ms"
