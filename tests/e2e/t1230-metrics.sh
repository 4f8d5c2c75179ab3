#!/bin/bash
# t1230-metrics.sh - a pilot's metrics for Prometheus: a Slurm pilot of one
# node started with --metrics-port 0 and --metrics-file serves them on its
# node's address (pilot status says where); a real Prometheus (Debian's,
# run as a plain process) scrapes it every second while two hostile HTTP
# clients (garbage, and half a request held open) are connected; the tasks
# still run, and PromQL over what Prometheus stored gives their count and
# their run time's median; an unknown path is a 404; the textfile is valid
# text format and rewritten, never half written; a textfile not named
# *.prom is refused; after pilotd is killed and started again, the
# submitted and ended counters carry on (from the database), the started
# one begins at 0.
. "$(dirname "$0")/lib.sh"

plan 32

N=20
PROM=${PROMETHEUS:-/usr/bin/prometheus}
ok "prometheus is installed ($PROM)" test -x "$PROM" \
    || abort "no prometheus: scripts/install-deps.sh installs it"

# a free TCP port of 127.0.0.1
free_port() {
    "$PY" -c 'import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# http URL [ACCEPT]: "CODE CONTENT-TYPE" then the body (Python's urllib)
http() {
    "$PY" - "$@" <<'EOF'
import sys, urllib.request, urllib.error
req = urllib.request.Request(sys.argv[1])
if len(sys.argv) > 2:
    req.add_header("Accept", sys.argv[2])
try:
    with urllib.request.urlopen(req, timeout=10) as r:
        print(r.status, r.headers.get("Content-Type"))
        sys.stdout.write(r.read().decode())
except urllib.error.HTTPError as e:
    print(e.code, e.headers.get("Content-Type"))
EOF
}

# promql EXPR: the value of an instant query's one sample, or "none"
promql() {
    "$PY" - "$PROM_URL" "$1" <<'EOF'
import json, sys, urllib.parse, urllib.request
url = sys.argv[1] + "/api/v1/query?" + urllib.parse.urlencode({"query": sys.argv[2]})
try:
    j = json.load(urllib.request.urlopen(url, timeout=10))
except Exception as e:
    print("none"); sys.exit(0)
r = j.get("data", {}).get("result", []) if j.get("status") == "success" else []
print(r[0]["value"][1] if len(r) == 1 else "none")
EOF
}
# promql_is EXPR WANT: for wait_for
promql_is() {
    [[ $(promql "$1") == "$2" ]]
}
# between LO X HI (floats)
between() {
    "$PY" -c 'import sys; lo, x, hi = map(float, sys.argv[1:]); sys.exit(not lo <= x <= hi)' "$@"
}

# textfile_ok FILE N: the text format (HELP, TYPE, samples; no # EOF) with
# N tasks submitted
textfile_ok() {
    "$PY" - "$1" "$2" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
fam, types, vals = None, {}, {}
assert text.endswith("\n") and "# EOF" not in text, "end"
for line in text.splitlines():
    if line.startswith("# HELP "):
        fam = line.split()[2]
        assert fam not in types, "twice: " + fam
    elif line.startswith("# TYPE "):
        _, _, name, typ = line.split()
        assert name == fam, line
        types[fam] = typ
    else:
        m = re.fullmatch(r'([a-z_]+)\{([^}]*)\} (\S+)', line)
        assert m, line
        name = m.group(1)
        assert name == fam or (types[fam] == "histogram" and
            name in (fam + "_bucket", fam + "_sum", fam + "_count")), line
        vals[m.group(1) + "{" + m.group(2) + "}"] = float(m.group(3))
sub = [v for k, v in vals.items() if k.startswith("pilot_tasks_submitted_total{")]
assert sub == [float(sys.argv[2])], sub
EOF
}

# --- a textfile not named *.prom is refused ------------------------------
capture pilot up --local --metrics-file "$WORK/pilot.txt"
usage_error "pilot up --metrics-file pilot.txt: refused" \
    "--metrics-file .*pilot.txt: the name must end in '.prom'"
# --- a textfile in a directory that is not there: pilotd does not start
# (it ran for hours with one warning in its log and no metrics)
capture pilot up --local --wait \
    --metrics-file "$WORK/no/such/dir/pilot.prom"
like "$RC,$ERR" "^1,.*metrics: cannot write [^ ]*/no/such/dir/pilot.prom: No such file or directory" \
    "pilot up --metrics-file in a directory that is not there: fails, saying why"
# --- a port taken: pilotd does not start ---------------------------------
"$PY" -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen()
print(s.getsockname()[1], flush=True); time.sleep(120)' >"$WORK/taken" &
TAKER=$!
cleanup_hook "kill $TAKER 2>/dev/null; true"
wait_for 10 test -s "$WORK/taken" || diag "no port taken"
capture pilot up --local --wait --metrics-port "$(<"$WORK/taken")"
like "$RC,$ERR" "^1,.*metrics: cannot listen on 127.0.0.1 port $(<"$WORK/taken"): Address already in use" \
    "pilot up --metrics-port of a port taken: fails, saying why"
kill $TAKER 2>/dev/null

# --- a Slurm pilot with metrics ------------------------------------------
mkdir -p "$WORK/textfile"
TF=$WORK/textfile/pilot.prom
CAPTURE_TIMEOUT=330 capture pilot up --nodes 1 --time 10:00 --wait \
    --wait-timeout 300 --metrics-port 0 --metrics-file "$TF" \
    --metrics-interval 1 --json
is "$RC" 0 "pilot up --nodes 1 --metrics-port 0 --metrics-file --wait exits 0"
P=$(json 'j["pilot"]' <<<"$OUT")
JOB=$(json 'j["job"]' <<<"$OUT")
[[ $RC == 0 && $JOB =~ ^[0-9]+$ ]] || abort "pilot up failed: $ERR"
cleanup_job "$JOB"
DIR=$(pilot_dir "$P")

URL=$(pilot status --json | json 'j["metrics"]')
ADDR=$(kv "$DIR/endpoint" client | sed -E 's|^tcp://(.*):[0-9]+$|\1|')
like "$URL" "^http://${ADDR//./\\.}:[0-9]+/metrics\$" \
    "status: the metrics URL on pilotd's own address ($URL)"
is "$(pilot status --json | json 'j["metrics_file"]')" "$TF" \
    "status: the textfile's path"
like "$(pilot status)" "metrics: ${URL//./\\.}, $TF" "... in the text too"
TARGET=${URL#http://}
TARGET=${TARGET%/metrics}

# --- Prometheus scrapes it ----------------------------------------------
PPORT=$(free_port)
PROM_URL=http://127.0.0.1:$PPORT
cat >"$WORK/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: pilot
    static_configs:
      - targets: ['$TARGET']
EOF
# not pilot processes: without PILOT_HOME (lib.sh's leftover check), ended
# by the cleanup hooks
env -u PILOT_HOME "$PROM" --config.file="$WORK/prometheus.yml" --storage.tsdb.path="$WORK/tsdb" \
    --web.listen-address="127.0.0.1:$PPORT" >"$WORK/prometheus.log" 2>&1 &
PROM_PID=$!
cleanup_hook "kill $PROM_PID 2>/dev/null; wait $PROM_PID 2>/dev/null; true"
ok "Prometheus is ready" wait_for 60 curl -sf -o /dev/null "$PROM_URL/-/ready"
ok "... and scrapes the pilot (up == 1)" wait_for 30 promql_is 'up{job="pilot"}' 1

# hostile HTTP clients, held open while the tasks run: garbage, and half
# a request sent slowly
env -u PILOT_HOME "$PY" - "$TARGET" >"$WORK/hostile.log" 2>&1 <<'EOF' &
import socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
g = socket.create_connection((host, int(port)))
g.sendall(b"\x16\x03\x01\x02\x00garbage\r\n\r\n")
s = socket.create_connection((host, int(port)))
for c in b"GET /metr":
    s.sendall(bytes([c]))
    time.sleep(0.5)
time.sleep(30)
EOF
HOSTILE=$!
cleanup_hook "kill $HOSTILE 2>/dev/null; true"
sleep 1

# --- tasks run; PromQL over what was scraped ----------------------------
for i in $(seq 1 $N); do echo "{\"argv\": [\"sleep\", \"0.4\"]}"; done \
    >"$WORK/tasks.jsonl"
t0=$(now)
capture pilot submit --file "$WORK/tasks.jsonl"
is "$RC" 0 "submit $N tasks (sleep 0.4)"
capture pilot wait --all --timeout 60
is "$RC" 0 "... all done while the hostile clients hold their connections"
diag "$N tasks in $(elapsed "$t0" "$(now)") s"
ok "... the hostile clients were still connected" alive "$HOSTILE"
is "$(curl -s -o /dev/null -w '%{http_code}' "${URL%/metrics}/nope")" 404 \
    "curl of an unknown path: 404"
is "$(http "$URL" 'application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5' | head -n1)" \
    "200 application/openmetrics-text; version=1.0.0; charset=utf-8" \
    "GET with Prometheus' Accept: OpenMetrics"
# (what is served is at most 1 s old: the loop renders it each second)
text_done() {
    [[ $(http "$URL" | tail -n +2 | grep '^pilot_tasks_ended_total.*done') \
       == "pilot_tasks_ended_total{pilot=\"$P\",state=\"done\"} $N" ]]
}
ok "GET without: the text format, $N done within 3 s" wait_for 3 text_done
is "$(http "$URL" | head -n1)" "200 text/plain; version=0.0.4; charset=utf-8" \
    "... its content type"

ok "sum(pilot_tasks_ended_total) == $N in Prometheus" \
    wait_for 20 promql_is 'sum(pilot_tasks_ended_total)' "$N"
is "$(promql "pilot_tasks_ended_total{state=\"done\"}")" "$N" "... all of them done"
is "$(promql 'pilot_tasks_submitted_total')" "$N" "pilot_tasks_submitted_total == $N"
ok "pilot_task_run_seconds_count == $N" \
    wait_for 10 promql_is 'sum(pilot_task_run_seconds_count)' "$N"
P50=$(promql 'histogram_quantile(0.5, sum by (le) (pilot_task_run_seconds_bucket))')
ok "median run time from the histogram: 0.25 <= $P50 <= 1 (tasks sleep 0.4 s)" \
    between 0.25 "$P50" 1
is "$(promql 'pilot_agents_up') $(promql 'pilot_agents_expected') $(promql 'count(pilot_node_cores)')" \
    "1 1 1" "agents up 1 of 1, one node"
ok "the loop's lag was observed (pilot_loop_lag_seconds_count > 0)" \
    between 1 "$(promql 'pilot_loop_lag_seconds_count')" 1e9
lacks_argv=$(curl -s "$URL" | grep -c 'sleep')
is "$lacks_argv" 0 "no argv in the metrics"

# --- the textfile -----------------------------------------------------
ok "the textfile is valid text format with $N submitted" textfile_ok "$TF" "$N"
m0=$(stat -c %y "$TF")
changed() { [[ $(stat -c %y "$TF") != "$m0" ]]; }
ok "... written again within 3 s" wait_for 3 changed
# read while it is rewritten: never empty or cut (temporary file, rename)
is "$("$PY" - "$TF" <<'EOF'
import sys, time
bad = 0
for i in range(300):
    t = open(sys.argv[1]).read()
    bad += not (t.startswith("# HELP pilot_info ")
                and t.rstrip("\n").rsplit("\n", 1)[-1].startswith(
                    "pilot_metrics_scrapes_total{"))
    time.sleep(0.01)
print(bad)
EOF
)" 0 "... 300 reads over 3 s while it is rewritten: each one whole"

# --- pilotd killed and started again: the database's counters carry on --
OLD=$(kv "$DIR/endpoint" pid)
kill -9 "$OLD"
restarted() {
    local new
    new=$(kv "$DIR/endpoint" pid)
    [[ -n $new && $new != "$OLD" ]] && timeout 5 pilot status >/dev/null 2>&1
}
ok "pilotd killed with SIGKILL: the batch script starts it again" \
    wait_for 60 restarted
URL2=$(pilot status --json | json 'j["metrics"]')
curl -s "$URL2" >"$WORK/after-restart.txt"
is "$(grep -E '^pilot_tasks_(submitted|started|ended)_total\{' \
      "$WORK/after-restart.txt" | grep -v -e failed -e canceled -e timeout)" \
"pilot_tasks_submitted_total{pilot=\"$P\"} $N
pilot_tasks_started_total{pilot=\"$P\"} 0
pilot_tasks_ended_total{pilot=\"$P\",state=\"done\"} $N" \
    "after the restart ($URL2): submitted and ended from the database, started from 0"

capture pilot down
is "$RC" 0 "pilot down"
is "$(ls "$WORK/textfile")" "pilot.prom" "... no temporary file left beside the textfile"
