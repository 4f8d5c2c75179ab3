#!/bin/bash
# t0100-cluster-1000.sh - a 4-node Slurm pilot runs 1,000 small tasks:
# all done, each output is its own, all nodes used, no core shared by two
# tasks at once (from ls and from the events table), status counts agree
# with the database.
. "$(dirname "$0")/lib.sh"

plan 24

NTASKS=1000
NNODES=4

# --- up ---------------------------------------------------------------
pilot_up $NNODES || abort "pilot up --nodes $NNODES --wait failed"
P=$PILOT_UP_ID
like "$P" '^p[0-9]+$' "pilot up --nodes $NNODES --wait prints a pilot id ($P)"
diag "pilot up to all $NNODES agents registered: ${PILOT_UP_SECS}s"
PDIR=$(pilot_dir "$P")
DB=$PDIR/state.db

capture pilot status --json
is "$RC" 0 "status --json exits 0"
STATUS=$OUT
is "$(json '[j["mode"], j["agents_expected"], j["agents_up"]]' <<<"$STATUS")" \
    "[\"slurm\", $NNODES, $NNODES]" \
    "status: mode slurm, $NNODES agents expected and up when 'up --wait' returns"
NODES=$(json 'sorted(n["name"] for n in j["nodes"] if n["state"] == "up")' <<<"$STATUS")
is "$(json 'len(j)' <<<"$NODES")" $NNODES "status: $NNODES nodes up: $NODES"
diag "cores: $(json 'j["cores"]' <<<"$STATUS"), gpus: $(json 'j["gpus"]' <<<"$STATUS")"

# --- submit 1,000 --------------------------------------------------------
cat >"$WORK/submit1.sh" <<'EOF'
#!/bin/sh
exec pilot submit -- sh -c 'echo "task $PILOT_TASK_ID on $(hostname)"'
EOF
chmod +x "$WORK/submit1.sh"
IDS=$WORK/ids
: >"$IDS"
T0=$(now)
# a sequential sample says whether a plain loop fits in 60 s
NSAMPLE=20
SUBMIT_RC=0
for ((i = 0; i < NSAMPLE; i++)); do
    "$WORK/submit1.sh" >>"$IDS" || SUBMIT_RC=$?
done
T1=$(now)
PER=$("$PY" -c 'import sys; print("%.4f" % ((float(sys.argv[2]) - float(sys.argv[1])) / int(sys.argv[3])))' "$T0" "$T1" $NSAMPLE)
diag "one sequential 'pilot submit': ${PER}s"
if "$PY" -c 'import sys; sys.exit(0 if float(sys.argv[1]) * int(sys.argv[2]) > 60 else 1)' "$PER" $NTASKS; then
    diag "a loop would take more than 60 s: xargs -P4 for the other $((NTASKS - NSAMPLE))"
    seq $((NTASKS - NSAMPLE)) | run_timeout 300 xargs -P4 -I{} "$WORK/submit1.sh" \
        >>"$IDS" || SUBMIT_RC=$?
else
    for ((i = NSAMPLE; i < NTASKS; i++)); do
        "$WORK/submit1.sh" >>"$IDS" || SUBMIT_RC=$?
    done
fi
T2=$(now)
diag "submitting $NTASKS tasks: $(elapsed "$T0" "$T2")s"
is "$SUBMIT_RC" 0 "all $NTASKS submits exit 0"
is "$(sort -u "$IDS" | grep -cE '^[0-9]+$')" $NTASKS "$NTASKS distinct task ids printed"

CAPTURE_TIMEOUT=330 capture pilot wait --all --timeout 300
T3=$(now)
is "$RC" 0 "pilot wait --all --timeout 300 exits 0"
diag "$NTASKS tasks: $(elapsed "$T0" "$T3")s from the first submit to the end of 'wait --all'"

# --- analysis ---------------------------------------------------------
pilot ls --json --limit $NTASKS >"$WORK/ls.json" 2>"$WORK/ls.err"
is "$?" 0 "ls --json --limit $NTASKS exits 0"
pilot status --json >"$WORK/status.json" 2>>"$WORK/ls.err"
sqlite3 -readonly -separator '|' "$DB" \
    "SELECT task, attempt, state, time, node, cores FROM events ORDER BY id" \
    >"$WORK/events.txt" 2>"$WORK/sqlite.err"
is "$?" 0 "sqlite3 -readonly reads the events table"
sqlite3 -readonly -separator '|' "$DB" \
    "SELECT state, count(*) FROM tasks GROUP BY state" \
    >"$WORK/dbcounts.txt" 2>>"$WORK/sqlite.err"

cat >"$WORK/analyse.py" <<'EOF'
import json, re, sys
from collections import defaultdict

work, pdir, ids_file = sys.argv[1:4]
r = {}
tasks = json.load(open(work + "/ls.json"))
ids = sorted(int(x) for x in open(ids_file).read().split())
r["count"] = len(tasks)
r["ids_match"] = sorted(t["id"] for t in tasks) == ids
r["not_done"] = [[t["id"], t["state"]] for t in tasks if t["state"] != "done"][:10]

# outputs: "task ID on HOST"
bad_out, host_node, hosts = [], [], set()
for t in tasks:
    path = "%s/tasks/%d/%d.out" % (pdir, t["id"] // 1000, t["id"])
    try:
        text = open(path).read()
    except OSError as e:
        bad_out.append([t["id"], str(e)])
        continue
    m = re.fullmatch(r"task (\d+) on (\S+)\n", text)
    if not m or int(m.group(1)) != t["id"]:
        bad_out.append([t["id"], text[:80]])
        continue
    hosts.add(m.group(2))
    if m.group(2) != t["node"]:
        host_node.append([t["id"], t["node"], m.group(2)])
r["bad_out"] = bad_out[:10]
r["nbad_out"] = len(bad_out)
r["host_node"] = host_node[:10]
r["hosts"] = sorted(hosts)
r["nodes"] = sorted(set(str(t["node"]) for t in tasks))
per_node = defaultdict(int)
for t in tasks:
    per_node[str(t["node"])] += 1
r["per_node"] = dict(sorted(per_node.items()))

def overlaps(iv):
    """iv: {(node, core): [(start, end, id)]} -> overlapping pairs"""
    bad = []
    for key, l in iv.items():
        l.sort()
        for a, b in zip(l, l[1:]):
            if b[0] < a[1]:
                bad.append([key[0], key[1], a[2], b[2], a[0], a[1], b[0], b[1]])
    return bad

# from ls: start_time/end_time, node, cores
iv, missing = defaultdict(list), []
for t in tasks:
    if t.get("start_time") is None or t.get("end_time") is None or not t.get("cores"):
        missing.append(t["id"])
        continue
    for c in t["cores"]:
        iv[(t["node"], int(c))].append((t["start_time"], t["end_time"], t["id"]))
r["ls_missing_times"] = missing[:10]
r["ls_overlaps"] = overlaps(iv)[:5]
r["ls_intervals"] = sum(len(l) for l in iv.values())
spans = [(t["start_time"], t["end_time"]) for t in tasks if t.get("start_time") and t.get("end_time")]
if spans:
    r["run_span"] = max(e for s, e in spans) - min(s for s, e in spans)
    r["mean_wall"] = sum(e - s for s, e in spans) / len(spans)
r["submit_to_end"] = max(t["end_time"] or 0 for t in tasks) - min(t["submit_time"] for t in tasks)

# from the events table: running -> final state, per (task, attempt)
FINAL = ("done", "failed", "canceled", "timeout")
run, fin = {}, {}
for line in open(work + "/events.txt"):
    task, attempt, state, time, node, cores = line.rstrip("\n").split("|")
    key = (int(task), attempt)
    if state == "running":
        cs = [int(x) for x in re.findall(r"\d+", cores)]
        run[key] = (float(time), node, cs)
    elif state in FINAL:
        fin[key] = float(time)
iv, ev_bad = defaultdict(list), []
for key, (start, node, cs) in run.items():
    if key not in fin or not cs or not node:
        ev_bad.append([key[0], key[1], "no final event" if key not in fin else "no node/cores"])
        continue
    for c in cs:
        iv[(node, c)].append((start, fin[key], key[0]))
r["ev_tasks_running"] = len(set(k[0] for k in run))
r["ev_bad"] = ev_bad[:10]
r["ev_overlaps"] = overlaps(iv)[:5]
r["ev_intervals"] = sum(len(l) for l in iv.values())

# status counts against the database
st = json.load(open(work + "/status.json"))["tasks"]
db = {}
for line in open(work + "/dbcounts.txt"):
    s, n = line.strip().split("|")
    db[s] = int(n)
diff = {}
for s in set(db) | set(k for k, v in st.items() if isinstance(v, int) and k != "total"):
    if st.get(s, 0) != db.get(s, 0):
        diff[s] = [st.get(s), db.get(s, 0)]
if st.get("total") != sum(db.values()):
    diff["total"] = [st.get("total"), sum(db.values())]
r["counts_diff"] = diff
r["db_counts"] = db
print(json.dumps(r))
EOF
"$PY" "$WORK/analyse.py" "$WORK" "$PDIR" "$IDS" >"$WORK/result.json" 2>"$WORK/analyse.err" \
    || diag "analysis failed: $(<"$WORK/analyse.err")"
R=$(<"$WORK/result.json")
res() {
    json "$1" <<<"$R" 2>/dev/null
}
is "$(res 'j["count"]')" $NTASKS "ls --json lists $NTASKS tasks"
is "$(res 'j["ids_match"]')" true "... with the ids 'submit' printed"
is "$(res 'j["not_done"]')" '[]' "every task is done"
is "$(res 'j["bad_out"]')" '[]' "every stdout file says 'task ID on HOST' with its own id"
is "$(res 'j["host_node"]')" '[]' "the hostname in each output is the task's node"
is "$(res 'j["nodes"]')" "$NODES" "tasks ran on all $NNODES nodes (ls node field)"
is "$(res 'j["hosts"]')" "$NODES" "tasks ran on all $NNODES nodes (hostnames in the outputs)"
diag "tasks per node: $(res 'j["per_node"]')"
is "$(res 'j["ls_missing_times"]')" '[]' "every task has start_time, end_time and cores in ls"
is "$(res 'j["ls_overlaps"]')" '[]' \
    "no core ran two tasks at once (ls: $(res 'j["ls_intervals"]') intervals)"
is "$(res 'j["ev_tasks_running"]')" $NTASKS "the events table has a running event for every task"
is "$(res 'j["ev_bad"]')" '[]' "each running event has a node, cores and a final event"
is "$(res 'j["ev_overlaps"]')" '[]' \
    "no core ran two tasks at once (events: $(res 'j["ev_intervals"]') intervals)"
is "$(res 'j["counts_diff"]')" '{}' \
    "status --json task counts equal the tasks table's (db: $(res 'j["db_counts"]'))"
diag "$NTASKS tasks: first start to last end $(res '"%.2f" % j["run_span"]')s,\
 first submit to last end $(res '"%.2f" % j["submit_to_end"]')s," \
     "mean task wall $(res '"%.4f" % j["mean_wall"]')s"

JOB=$(kv "$PDIR/info" job)
capture pilot down
is "$RC" 0 "pilot down exits 0"
is "$(job_end "$JOB")" "COMPLETED 0:0" \
    "its Slurm job $JOB ends cleanly (pilotd exits 0: not canceled, no signal)"
