#!/bin/bash
# t1340-prefetch.sh - tasks an agent holds beyond its free cores (pilot up
# --prefetch N, default 4) and starts as soon as a task ends there
# (issue 16).  A local pilot: a stream of short tasks runs each once and
# never two on one core at a time; a held task is canceled, taken back
# by a cordon and by a task of a higher priority, and queued again when
# its agent is killed with SIGKILL, not charged to --retries (pilot
# logs --attempt of an attempt given back says so); held at
# 'pilot down', it stays queued.  A 2-node
# Slurm pilot: a stream of short tasks while pilotd is killed with
# SIGKILL twice: every task ends done, each ran once, no core twice.
. "$(dirname "$0")/lib.sh"

plan 33

field() { pilot show "$1" --json 2>/dev/null | json "j[\"$2\"]" 2>/dev/null; }
state_is() { [[ $(field "$1" state) == "$2" ]]; }
agent_pid() { pgrep -f "pilot-agent --local .*--keys $DIR/keys" | head -n1; }
RUNS=$WORK/runs
# each run appends: id, node, its first and last instant (ns), its CPUs
REC='a=$(date +%s%N); b=$(date +%s%N); echo "$PILOT_TASK_ID $PILOT_NODE $a $b $(grep Cpus_allowed_list /proc/self/status | cut -f2)" >>'"$RUNS"

# runs_ok FIRST LAST: each task FIRST..LAST ran exactly once, and no two
# runs overlapped on a CPU of a node; prints what is wrong, or "ok"
runs_ok() {
    "$PY" - "$RUNS" "$1" "$2" <<'EOF'
import collections, sys
first, last = int(sys.argv[2]), int(sys.argv[3])
runs = collections.Counter()
by_cpu = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) != 5 or not first <= int(f[0]) <= last:
        continue
    runs[int(f[0])] += 1
    for part in f[4].split(","):
        lo, _, hi = part.partition("-")
        for c in range(int(lo), int(hi or lo) + 1):
            by_cpu[(f[1], c)].append((int(f[2]), int(f[3]), int(f[0])))
bad = [i for i in range(first, last + 1) if runs[i] != 1]
over = 0
for l in by_cpu.values():
    l.sort()
    over += sum(1 for x, y in zip(l, l[1:]) if y[0] < x[1])
wide = sum(1 for line in open(sys.argv[1]) if "," in line.split()[-1]
           or "-" in line.split()[-1])
if bad or over or wide:
    print("ran not once: %s; overlaps on a CPU: %d; runs on more than one "
          "CPU: %d" % (bad[:10], over, wide))
else:
    print("ok")
EOF
}
# prefetched FIRST LAST: how many of tasks FIRST..LAST were placed with no
# cores (held by their agent beyond its free cores)
prefetched() {
    "$PY" - "$DIR/state.db" "$1" "$2" <<'EOF'
import sqlite3, sys
db = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
print(db.execute("select count(distinct task) from events where state = "
                 "'assigned' and cores is null and task between ? and ?",
                 (int(sys.argv[2]), int(sys.argv[3]))).fetchone()[0])
EOF
}
last_id() { pilot ls --json --limit 100000 | json 'max(t["id"] for t in j)'; }

# --- a local pilot ---------------------------------------------------
pilot_up_local || abort "pilot up --local --wait failed"
export PILOT_ID=$PILOT_UP_ID
DIR=$(pilot_dir "$PILOT_ID")
NC=$(pilot status --json | json 'j["cores"]["total"]')
NODE=$(pilot status --json | json 'j["nodes"][0]["name"]')
diag "local pilot: $NC cores on $NODE"

N=400
pilot submit --array 1-$N -- sh -c "$REC" >/dev/null
LAST=$(last_id)
FIRST=$((LAST - N + 1))
capture pilot wait --all --timeout 120
is "$RC" 0 "$N short tasks: pilot wait --all exits 0"
is "$(runs_ok $FIRST $LAST)" ok "... each ran once, one CPU each, never two at once on one"
P=$(prefetched $FIRST $LAST)
ok "... $P of them were held by the agent beyond its free cores" test "$P" -gt 0
cat "$DIR"/logs/*.log >"$WORK/logs1"
lacks "... pilotd and the agent never saw a core given twice" \
    "not all free|prefetched: " "$WORK/logs1"

# hold some: every core busy, then short tasks
SLEEPERS=()
for _ in $(seq "$NC"); do SLEEPERS+=("$(pilot submit -- sleep 300)"); done
wait_for 20 eval 'state_is ${SLEEPERS[-1]} running' || abort "sleepers did not start"
H1=$(pilot submit --retries 0 -- sh -c "$REC")
H2=$(pilot submit --retries 0 -- sh -c "$REC")
H3=$(pilot submit --retries 0 -- sh -c "$REC")
ok "3 tasks beyond the busy cores are placed (assigned)" \
    wait_for 10 eval 'state_is $H3 assigned && state_is $H1 assigned'
sleep 1
is "$(field "$H1" state),$(field "$H2" state)" "assigned,assigned" \
    "... and stay so while no task ends (no core for them)"
ok "... held by the agent: placed with no cores" test "$(prefetched "$H1" "$H3")" -eq 3
like "$(pilot explain "$H2" 2>&1)" "held by the agent on $NODE, which starts it as soon as a task ends there" \
    "... pilot explain says so"

# cancel of a held task
capture pilot cancel "$H1"
ok "cancel of a held task: it ends canceled" wait_for 10 state_is "$H1" canceled
lacks "... without having run" "^$H1 " "$RUNS"

# a cordon takes the held ones back; they wait in the queue
capture pilot cordon "$NODE"
ok "cordon: the held tasks are taken back to the queue" \
    wait_for 10 eval 'state_is $H2 queued && state_is $H3 queued'
like "$(pilot show "$H2" 2>&1)" "taken back before it started" \
    "... their events say why"
capture pilot uncordon "$NODE"
ok "uncordon: they are held again" \
    wait_for 10 eval 'state_is $H2 assigned && state_is $H3 assigned'

# a task of a higher priority: the held ones make way; it starts first
HP=$(pilot submit --priority 5 -- sh -c "$REC")
ok "a task of priority 5: it is held, the others taken back and held after it" \
    wait_for 10 eval 'state_is $HP assigned && [[ $(field $H3 attempts) -ge 3 ]] && state_is $H3 assigned'
pilot cancel "${SLEEPERS[0]}" >/dev/null
capture pilot wait "$HP" "$H2" "$H3" --timeout 30
is "$RC" 0 "a core freed: the held tasks run, all done"
ORDER=$(awk -v a="$HP" -v b="$H2" -v c="$H3" '$1 == a || $1 == b || $1 == c { print $3, $1 }' "$RUNS" | sort -n | awk '{ print $2 }' | head -n1)
is "$ORDER" "$HP" "... the one of priority 5 first"
is "$(field "$H2" state)" done \
    "... taken back twice, still done (not charged to --retries 0)"
H2A=$(field "$H2" attempts)
like "$(pilot show "$H2")" "attempts: +$H2A \\($((H2A - 1)) given back before it started, not retries\\)" \
    "pilot show: of its $H2A attempts, all but the one that ran were given back"
like "$(pilot logs --attempt 1 "$H2" 2>&1)" \
    "note: task $H2: attempt 1 never started \\(prefetched: taken back before it started\\)" \
    "pilot logs --attempt 1: that attempt never started, and why"

# an agent killed with SIGKILL while it holds tasks: they run again
for s in "${SLEEPERS[@]}"; do pilot cancel "$s" >/dev/null 2>&1; done
pilot wait "${SLEEPERS[@]}" --timeout 30 >/dev/null 2>&1
SLEEPERS=()
for _ in $(seq "$NC"); do SLEEPERS+=("$(pilot submit -- sleep 300)"); done
wait_for 20 eval 'state_is ${SLEEPERS[-1]} running' || abort "sleepers did not start"
K1=$(pilot submit --retries 0 -- sh -c "$REC")
K2=$(pilot submit --retries 0 -- sh -c "$REC")
wait_for 10 eval 'state_is $K2 assigned && state_is $K1 assigned' || abort "K1, K2 not held"
OLD=$(agent_pid)
[[ -n $OLD ]] || abort "no agent process found"
kill -9 "$OLD"
ok "agent killed: a new one registers" \
    wait_for 40 eval '[[ -n $(agent_pid) && $(agent_pid) != "$OLD" ]] && agents_up 1'
capture pilot wait "$K1" "$K2" --timeout 60
is "$RC,$(field "$K1" state),$(field "$K2" state)" "0,done,done" \
    "the tasks it held run again and end done (--retries 0: not charged)"
is "$(runs_ok "$K1" "$K2")" ok "... each once"
is "$(field "${SLEEPERS[0]}" attempts)" 2 "... the tasks it ran are lost and run again, as before"

# pilot down while the agent holds tasks: they never ran, so they stay
# queued for 'pilot up --resume' (what runs ends canceled)
D1=$(pilot submit -- sh -c "$REC")
D2=$(pilot submit -- sh -c "$REC")
wait_for 10 eval 'state_is $D2 assigned && state_is $D1 assigned' || abort "D1, D2 not held"
capture pilot down
is "$RC" 0 "pilot down while the agent holds 2 tasks"
is "$(field "$D1" state),$(field "$D2" state)" "queued,queued" \
    "... those stay queued (pilot up --resume runs them)"
like "$(pilot show "$D1" 2>&1)" "pilot down before it started" "... their events say why"
is "$(field "${SLEEPERS[0]}" state)" canceled "... the tasks that ran end canceled"
lacks "... and the held ones never ran" "^$D1 |^$D2 " "$RUNS"

# --- a 2-node Slurm pilot, pilotd killed twice -----------------------
: >"$RUNS"
pilot_up 2 || abort "pilot up --nodes 2 failed"
export PILOT_ID=$PILOT_UP_ID
DIR=$(pilot_dir "$PILOT_ID")
pilotd_pid() { awk '$1 == "pid" { print $2 }' "$DIR/endpoint" 2>/dev/null; }
N=1500
pilot submit --retries 3 --array 1-$N -- sh -c "$REC" >/dev/null
LAST=$(last_id)
FIRST=$((LAST - N + 1))
KILLED=0
for i in 1 2; do
    sleep 1.$((RANDOM % 10))
    old=$(pilotd_pid)
    [[ -n $old ]] && kill -0 "$old" 2>/dev/null || continue
    # on a Slurm node: kill it through its job's namespace is not needed,
    # the pid file names it as this machine sees it
    kill -9 "$old" && KILLED=$((KILLED + 1))
    for _ in $(seq 300); do
        new=$(pilotd_pid)
        [[ -n $new && $new != "$old" ]] && timeout 5 pilot status >/dev/null 2>&1 && break
        sleep 0.1
    done
done
is "$KILLED" 2 "Slurm pilot: pilotd killed with SIGKILL twice while $N tasks ran"
CAPTURE_TIMEOUT=300 capture pilot wait --all --timeout 240
is "$RC" 0 "... pilot wait --all: every task ends done"
is "$(runs_ok $FIRST $LAST)" ok "... each ran once, never two on one CPU of a node at once"
P=$(prefetched $FIRST $LAST)
ok "... $P of them were held by their agents beyond the free cores" test "$P" -gt 0
capture pilot down
is "$RC" 0 "pilot down"

