#!/bin/bash
# t1100-watch.sh - pilot wait on pushed ends (a watch): it returns once the
# last task has ended (ordering, not a timing), --all takes the tasks
# submitted while it waits, 20 waits at once, an array of 100,000; a
# client resuming with an old 'after' gets the ends after it in order;
# and on a Slurm pilot whose pilotd is killed with SIGKILL (the batch
# script starts it again) a waiting client gets every end once, none
# twice (tests/tools/watchends prints them).
. "$(dirname "$0")/lib.sh"

plan 30

WE=${WATCHENDS:-$PILOT_BIN/../tests/watchends}
ok "watchends is built ($WE)" test -x "$WE" \
    || abort "no watchends: run 'make test' or 'make check'"
NBIG=${T1100_BIG:-100000}

field() { pilot show "$1" --json | json "j[\"$2\"]"; }
# le A B: A <= B (floats)
le() { "$PY" -c 'import sys; sys.exit(not float(sys.argv[1]) <= float(sys.argv[2]))' "$1" "$2"; }

pilot_up_local || abort "pilot up --local --wait failed"
P=$PILOT_UP_ID
DIR=$(pilot_dir "$P")

# --- wait returns after the last end ------------------------------------
A=$(pilot submit -- sleep 1.5)
B=$(pilot submit -- sleep 0.3)
C=$(pilot submit -- sleep 0.8)
capture pilot wait "$A" "$B" "$C" --timeout 60
T=$(now)
is "$RC" 0 "pilot wait of 3 tasks exits 0"
like "$(tail -n 1 <<<"$ERR")" '^3 tasks: 3 done, 0 failed, 0 canceled, 0 timeout \(' \
    "... with the summary it always printed"
is "$(pilot ls --json "$A" "$B" "$C" | json '[t["state"] for t in j]')" \
    '["done", "done", "done"]' "... and every task had ended when it returned"
ok "... after the last end_time ($(field "$A" end_time) <= $T)" \
    le "$(field "$A" end_time)" "$T"

# --- --all takes what is submitted while it waits -----------------------
X=$(pilot submit -- sleep 1)
W0=$(now)
pilot wait --all --timeout 60 >"$WORK/all.out" 2>"$WORK/all.err" &
WP=$!
sleep 0.4
Y=$(pilot submit -- sleep 0.5)
Z=$(pilot submit --after "$Y" -- sleep 1.5)
wait "$WP"
RC=$?
T=$(now)
is "$RC" 0 "pilot wait --all exits 0"
ok "... Z was submitted after it began" le "$W0" "$(field "$Z" submit_time)"
is "$(field "$Z" state)" done "... and it returned only once Z (after Y) had ended"
ok "... after Z's end_time" le "$(field "$Z" end_time)" "$T"
like "$(tail -n 1 "$WORK/all.err")" '^6 tasks: 6 done' "... counting the 6 tasks"

# --- a failed task: exit 1, as before -----------------------------------
F=$(pilot submit -- sh -c 'exit 3')
capture pilot wait "$F" --json --timeout 30
is "$RC,$(echo "$OUT" | json '[j["total"], j["failed"]]')" "1,[1, 1]" \
    "a failed task: exit 1, --json the counts"

# --- a replay from an old 'after', in order -----------------------------
R1=$(pilot submit -- true)
R2=$(pilot submit --after "$R1" -- true)
R3=$(pilot submit --after "$R2" -- true)
R4=$(pilot submit --after "$R3" -- true)
R5=$(pilot submit --after "$R4" -- true)
capture pilot wait "$R5" --timeout 30
run_timeout 30 "$WE" "$DIR" --after 0 "$R1" "$R2" "$R3" "$R4" "$R5" \
    >"$WORK/replay0" 2>"$WORK/replay0.err"
is "$(awk '{ printf "%s%s", s, $2; s = " " }' "$WORK/replay0")" \
    "$R1 $R2 $R3 $R4 $R5" "a watch resuming after 0 gets the 5 ends, in order"
ok "... seqs ascending" sort -n -c "$WORK/replay0"
S3=$(awk 'NR == 3 { print $1 }' "$WORK/replay0")
run_timeout 30 "$WE" "$DIR" --after "$S3" "$R1" "$R2" "$R3" "$R4" "$R5" \
    >"$WORK/replay3" 2>"$WORK/replay3.err"
is "$(cat "$WORK/replay3")" "$(tail -n 2 "$WORK/replay0")" \
    "after the 3rd end's seq ($S3): the 4th and the 5th, as before"

# --- a client killed comes back to its watch with its token and last seq
# (none ends before the watch is made: a new watch pushes what ends from
# then on)
KB=$(pilot submit --array 0-9 -- sleep 1.{})
TOKK=t1100-killed-client-token
"$WE" "$DIR" --token "$TOKK" "$KB" >"$WORK/k1" 2>"$WORK/k1.err" &
KP=$!
sleep 1.6
kill -9 "$KP"
wait "$KP" 2>/dev/null
LAST=$(awk 'END { print $1 + 0 }' "$WORK/k1")
run_timeout 60 "$WE" "$DIR" --token "$TOKK" --resume "$LAST" "$KB" \
    >"$WORK/k2" 2>"$WORK/k2.err"
is "$?,$(cat "$WORK/k1" "$WORK/k2" | awk '{ print $2 }' | sort -u | wc -l),$(cat "$WORK/k1" "$WORK/k2" | wc -l)" \
    "0,10,10" "a client killed after $(wc -l <"$WORK/k1") ends, back with its token: 10 ends in all, none twice"
ok "... in ascending seq across the two" eval 'cat "$WORK/k1" "$WORK/k2" | sort -n -c'

# --- 20 waits at once -----------------------------------------------------
AR=$(pilot submit --array 0-19 -- sleep 0.3)
for i in $(seq 0 19); do
    (pilot wait "$AR.$i" --timeout 120 >/dev/null 2>"$WORK/w.$i.err"
     echo "$? $(now)" >"$WORK/w.$i") &
done
wait
bad=0 late=0
for i in $(seq 0 19); do
    read -r rc t <"$WORK/w.$i"
    [[ $rc == 0 ]] || bad=$((bad + 1))
    le "$(field "$AR.$i" end_time)" "$t" || late=$((late + 1))
done
is "$bad" 0 "20 concurrent pilot waits, one element each: all exit 0"
is "$late" 0 "... each after its own task's end"

# --- a local pilotd killed and started again (on another port) while
# clients wait: they follow it there and resume ------------------------
LK=$(pilot submit --array 0-11 -- sleep 1.{})
"$WE" "$DIR" --timeout 150 "$LK" >"$WORK/lends" 2>"$WORK/lends.err" &
LWEP=$!
pilot wait "$LK" --timeout 150 >/dev/null 2>"$WORK/lwait.err" &
LWP=$!
sleep 2
PID=$(kv "$DIR/endpoint" pid)
kill -9 "$PID"
wait_for 20 eval '! kill -0 "$PID" 2>/dev/null'
setsid pilotd --dir "$DIR" --local >"$WORK/pilotd-restart.out" 2>&1 </dev/null &
wait "$LWEP"
LRC=$?
wait "$LWP"
is "$LRC,$?" "0,0" "a local pilotd killed and started again: the watching client and pilot wait both end well"
is "$(awk '{ print $2 }' "$WORK/lends" | sort -u | wc -l),$(wc -l <"$WORK/lends")" \
    "12,12" "... the client got the 12 ends, none twice"
ok "... in ascending seq" sort -n -c "$WORK/lends"

# --- an array of 100,000 --------------------------------------------------
# (their ends come by cancel: 100,000 runs of true would take 9 minutes
# of this 2-core machine; the watch's work is the same)
t0=$(now)
# (storing 100,000 rows takes pilotd more than the 10 s a request
# waits by default under 'make asan')
BIG=$(PILOT_TIMEOUT=120 pilot submit --array "0-$((NBIG - 1))" -- sleep 600)
pilot wait "$BIG" --json --timeout 600 >"$WORK/big.out" 2>"$WORK/big.err" &
BWP=$!
sleep 1
PILOT_TIMEOUT=120 pilot cancel "$BIG" >/dev/null
wait "$BWP"
RC=$?
is "$RC,$(json '[j["total"], j["canceled"]]' <"$WORK/big.out")" "1,[$NBIG, $NBIG]" \
    "pilot wait of an array of $NBIG canceled meanwhile: exit 1, all canceled"
diag "$NBIG tasks submitted, canceled and waited for in $(elapsed "$t0" "$(now)") s"
run_timeout 60 pilot down >/dev/null 2>&1

# --- pilotd killed while a client waits (Slurm: the batch script starts
# it again in the same job, on the same ports) ---------------------------
# (the dev cluster is shared: its nodes may be busy a while)
P2=$(run_timeout 660 pilot up --nodes 2 --time 15:00 --wait \
     --wait-timeout 600 2>"$WORK/up2.err") \
    || abort "pilot up --nodes 2 --wait failed: $(<"$WORK/up2.err")"
DIR2=$(pilot_dir "$P2")
export PILOT_ID=$P2
N=40
# 1 to 6 s each: none ends before the client's watch is made
K=$(pilot submit --array 0-$((N - 1)) -- sh -c 'sleep $(( {} % 6 + 1 )).$(( {} % 10 ))')
run_timeout 300 "$WE" "$DIR2" --timeout 280 "$K" >"$WORK/ends" \
    2>"$WORK/ends.err" &
WEP=$!
pilot wait "$K" --timeout 280 >"$WORK/kwait.out" 2>"$WORK/kwait.err" &
KWP=$!
pilotd_pid() { awk '$1 == "pid" { print $2 }' "$DIR2/endpoint" 2>/dev/null; }
KILLED=0
for k in 1 2; do
    sleep 2
    old=$(pilotd_pid)
    kill -9 "$old" && KILLED=$((KILLED + 1))
    for _ in $(seq 300); do
        new=$(pilotd_pid)
        if [[ -n $new && $new != "$old" ]] && timeout 5 pilot status >/dev/null 2>&1
        then
            break
        fi
        sleep 0.1
    done
done
wait "$WEP"
WRC=$?
wait "$KWP"
KRC=$?
is "$KILLED" 2 "pilotd was killed twice with SIGKILL while clients waited"
is "$WRC" 0 "the watching client saw pending reach 0"
is "$(wc -l <"$WORK/ends")" "$N" "... it got $N ends"
is "$(awk '{ print $2 }' "$WORK/ends" | sort -u | wc -l)" "$N" \
    "... one per task: none twice"
is "$(awk '{ print $2 }' "$WORK/ends" | sort -n | tr '\n' ' ')" \
    "$(pilot ls --json "$K" | json '" ".join(str(t["id"]) for t in j)') " \
    "... and every element of the array"
ok "... in ascending seq" sort -n -c "$WORK/ends"
is "$KRC" 0 "pilot wait across the two restarts exits 0"
like "$(tail -n 1 "$WORK/kwait.err")" "^$N tasks: $N done" \
    "... with every task done"
