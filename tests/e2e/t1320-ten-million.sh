#!/bin/bash
# t1320-ten-million.sh - millions of tasks queued (issue 16, in small: 2M
# here, 10M in bench scenario 10): a local pilot with no agent takes
# T1320_N tasks as arrays of up to 1M; they wait as compact runs
# (daemon/queue.c): pilotd's RSS grows by far less than a task struct
# each, 'pilot status' stays quick; one element and a small array are
# canceled; pilotd is killed with SIGKILL and started again, and serves
# within seconds with the same queue (rebuilt from the indexes); a real
# agent then runs the lowest ids first, each with its own index, and
# 'pilot down' with the rest queued is quick.
. "$(dirname "$0")/lib.sh"

plan 16

N=${T1320_N:-2000000}
M=$((N < 1000000 ? N : 1000000)) # elements an array

pid_of() { awk '$1 == "pid" { print $2 }' "$DIR/endpoint"; }
rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }
ms() {
    "$PY" -c 'import sys
a, b = map(float, sys.argv[1:])
print(int((b - a) * 1000))' "$1" "$2"
}
queued() { pilot status --json | json 'j["tasks"]["queued"]'; }

P=$(run_timeout 60 pilot up --local --agents 0 --wait) ||
    abort "pilot up --local --agents 0 failed"
DIR=$(pilot_dir "$P")
PID=$(pid_of)
R0=$(rss_kb "$PID")

# arrays of at most 1,000,000 elements (PL_SPEC_MAX_ARRAY), one after
# another: their ids follow each other
T0=$(now)
A= BAD=0
for ((k = 0; k < N; k += M)); do
    CAPTURE_TIMEOUT=900 capture \
        pilot submit --array "0-$((M - 1))" -- /bin/true '{}'
    ((RC == 0)) || BAD=1
    [[ -n $A ]] || A=$(head -1 <<<"$OUT")
done
T1=$(now)
is "$BAD" 0 "$((N / M)) arrays of $M acknowledged"
diag "$N tasks acknowledged in $(elapsed "$T0" "$T1")s"
is "$(queued)" "$N" "status: $N queued"
R1=$(rss_kb "$PID")
PER=$(( (R1 - R0) * 1024 / N ))
diag "pilotd RSS: +$(( (R1 - R0) / 1024 )) MiB, $PER B per queued task"
ok "pilotd RSS grew by less than 256 B a queued task ($PER)" [ "$PER" -lt 256 ]

# status: counters, not a count of rows (generous bound: a busy CI host)
best=999999
for _ in 1 2 3 4 5; do
    t=$(now); pilot status >/dev/null; d=$(ms "$t" "$(now)")
    ((d < best)) && best=$d
done
diag "pilot status: best of 5 ${best} ms"
ok "pilot status answers in under 0.5 s with $N queued" [ "$best" -lt 500 ]

# one element in the middle of the first array (not the id of an array),
# and a small array whole
MID=$((A + M / 2 + 1))
capture pilot cancel "$MID"
is "$RC,$(pilot show "$MID" --json | json 'j["state"]')" "0,canceled" \
    "cancel of element $MID (its run splits around it)"
B=$(pilot submit --array 0-999 -- /bin/true '{}')
capture pilot cancel "$B"
is "$RC,$(queued)" "0,$((N - 1))" \
    "the small array canceled whole: $((N - 1)) queued"

# SIGKILL, then pilotd again with the same command line
mapfile -d '' ARGV <"/proc/$PID/cmdline"
ARGV[0]=$PILOT_BIN/pilotd
kill -9 "$PID"
wait_for 10 bash -c "! kill -0 $PID 2>/dev/null"
T0=$(now)
setsid "${ARGV[@]}" </dev/null >"$WORK/pilotd2.out" 2>&1 &
serving() {
    local st
    st=$(pilot status --json 2>/dev/null) || return 1
    [[ $(json 'j["state"]' <<<"$st") == running &&
       $(json 'j["pid"]' <<<"$st") != "$PID" ]]
}
wait_for 120 serving
RC=$?
REST=$(ms "$T0" "$(now)")
diag "kill -9 to serving again: ${REST} ms"
is "$RC" 0 "a restarted pilotd serves"
ok "... within 30 s (${REST} ms; 5 s is the target at 10M)" \
    [ "$REST" -lt 30000 ]
PID=$(pid_of)
is "$(queued)" "$((N - 1))" "after the restart: $((N - 1)) queued"
R2=$(rss_kb "$PID")
diag "pilotd RSS after the restart: $((R2 / 1024)) MiB"
ok "... in under 256 B a queued task" [ $((R2 * 1024 / N)) -lt 256 ]
is "$(pilot show "$MID" --json | json 'j["state"]')" canceled \
    "the canceled element stays canceled"
E=$((MID + 1))
is "$(pilot show "$E" --json | json '[j["state"], j["argv"]]')" \
    "[\"queued\", [\"/bin/true\", \"$(((E - A) % M))\"]]" \
    "element $E: queued, its own index in its command"

# a real agent runs the lowest ids first, from rows read back
pilot-agent --connect "$(kv "$DIR/endpoint" agent)" --keys "$DIR/keys" \
    --node q1 --cores 0-1 --log "$WORK/agent.log" &
wait_for 60 agents_up 1 || diag "the agent did not register"
ran() {
    [[ $(pilot status --json | json 'j["tasks"]["done"]') -ge 200 ]]
}
wait_for 120 ran
is "$?" 0 "the agent ran 200 tasks"
"$PY" - "$DIR/state.db" "$A" "$M" >"$WORK/check" <<'EOF'
import json, sqlite3, sys
db = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True, timeout=30)
a = int(sys.argv[2])
rows = db.execute("SELECT id, state, exit_code, argv, array_index FROM "
                  "tasks WHERE state IN ('done', 'failed', 'timeout')"
                  ).fetchall()
ids = sorted(r[0] for r in rows)
bad = [r for r in rows if r[1] != "done" or r[2] != 0
       or json.loads(r[3]) != ["/bin/true", str(r[4])]
       or r[4] != (r[0] - a) % int(sys.argv[3])]
print(len(bad), ids == list(range(a, a + len(ids))))
EOF
is "$(<"$WORK/check")" "0 True" \
    "the lowest ids ran, in order, done, each with its own index"
T0=$(now)
CAPTURE_TIMEOUT=120 capture pilot down
D=$(ms "$T0" "$(now)")
diag "pilot down with $((N - 1)) queued: ${D} ms"
is "$RC" 0 "pilot down with them queued"
ok "... in under a minute (${D} ms)" [ "$D" -lt 60000 ]
