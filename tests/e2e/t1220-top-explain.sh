#!/bin/bash
# t1220-top-explain.sh - pilot top and pilot explain on a local pilot (2
# cores): top on a terminal (tmux: capture-pane shows each node's bar and
# its running tasks by name; s changes the sort, a resize narrows the
# bars, q and SIGTERM leave with the terminal as it was), a snapshot when
# the output is not a terminal, --json; a task name holding escape
# sequences shows escaped.  explain of a task that runs, one that ended,
# one waiting on a dependency, one held back by too few free cores (it
# holds the reservation), one that fits only on the reserved node, an
# exclusive one, an unknown id; and both on the pilot once it is down.
# Then briefly a 2-node Slurm pilot with GPUs: the GPU bars, the
# sort by busy, and a gang of 2 nodes that one busy node holds back.
. "$(dirname "$0")/lib.sh"

plan 50

TM="tmux -L pl1220-$$"
cleanup_hook "$TM kill-server 2>/dev/null || true"
pilot_up_local || abort "pilot up --local --wait failed"

field() { pilot show "$1" --json | json "j[\"$2\"]"; }
state_is() { [[ $(field "$1" state) == "$2" ]]; }
ex() { pilot explain "$1" --json | json "$2"; }

# --- a task that ended, then two that hold both cores ------------------
F=$(pilot submit --name quick -- true)
wait_for 30 state_is "$F" done || diag "task $F did not end"
# a DEL in a name: jansson leaves it raw, the escaping stdout must not
# turn it into "\x7f" (not JSON) in --json
DEL=$(pilot submit --name $'de\x7fl' -- true)
wait_for 30 state_is "$DEL" done || diag "task $DEL did not end"
A=$(pilot submit --name hold -- sleep 300)
EVIL=$'ev\e[2J\e]0;pwned\a\e[31mil'
G=$(pilot submit --name "$EVIL" -- sleep 300)
wait_for 30 state_is "$A" running && wait_for 30 state_is "$G" running \
    || diag "tasks $A and $G did not start"

# --- not a terminal: one snapshot --------------------------------------
capture pilot top </dev/null
is "$RC" 0 "pilot top with its output not a terminal exits 0"
like "$OUT" $'\n''NODE +STATE +CORES +VET +TASKS' "... one snapshot with the node table (the nodes' vetting too)"
like "$OUT" "[^ ]+ +up +\[#{20}\] +2/2 +ok +$A:hold" \
    "... the node's cores all busy as a bar, the task 'hold' by name"
like "$OUT" 'tasks: 0 waiting, 0 queued, 0 assigned, 2 running, 2 done' \
    "... the tasks by state"
unlike "$OUT" $'\e' "... and no escape character at all"
like "$OUT" "$G:ev\\\\x1b\[2J\\\\x1b\]0;pwned\\\\x07\\\\x1b\[31mil" \
    "... the escapes of a task's name shown escaped"

capture pilot top --json
is "$(echo "$OUT" | EVIL=$EVIL json '[sorted(t["name"] for t in n["tasks"]) for n in j["nodes"]] == [sorted(["hold", __import__("os").environ["EVIL"]])]')" \
   true "--json: the node lists its running tasks by name (as they are)"
is "$(echo "$OUT" | json '[n["cordon"] for n in j["nodes"]]'),$(echo "$OUT" | json 'j["nodes"][0]["tasks_more"]')" \
   "[null],0" "--json: cordon null, no more tasks than listed"

# --- on a terminal: tmux ------------------------------------------------
cat >"$WORK/top.sh" <<EOF
#!/bin/bash
export PATH='$PATH' PILOT_HOME='$PILOT_HOME'
S0=\$(stty -g)
pilot top
rc=\$?
S1=\$(stty -g)
[[ \$S0 == "\$S1" ]] && echo "TERMINAL RESTORED"
echo "TOP EXITED \$rc"
unset PILOT_HOME
exec sleep 300
EOF
chmod +x "$WORK/top.sh"
pane() { $TM capture-pane -p -t top 2>/dev/null; }
# the server gone before the next new-session: one started while it
# exits fails ("server exited unexpectedly")
tm_gone() { ! $TM ls >/dev/null 2>&1; }
tm_kill() { $TM kill-server 2>/dev/null; wait_for 5 tm_gone; }
pane_has() { pane | grep -qE -- "$1"; }
env -u PILOT_HOME $TM new-session -d -s top -x 160 -y 50 "$WORK/top.sh"
ok "top draws the node row with a full bar and 'hold' running" \
    wait_for 20 pane_has "^[^ ]+ +up +\[#{40}\] +2/2 +ok +$A:hold"
like "$(pane | head -1)" '^pilot p[0-9]+ \(local on [^)]+\) running ' \
    "... the pilot's line first"
like "$(pane)" "$G:ev\\\\x1b\[2J" "... the task's escapes shown escaped"
ok "... the sort is by name" pane_has 'sort: name '
$TM send-keys -t top s
ok "s: sorted by cores busy" wait_for 5 pane_has 'sort: busy '
$TM send-keys -t top s
ok "s again: by tasks running" wait_for 5 pane_has 'sort: tasks '
$TM resize-window -t top -x 100 -y 40
ok "a resize to 100 columns narrows the bars (SIGWINCH)" \
    wait_for 5 pane_has "^[^ ]+ +up +\[#{8,39}\] +2/2 "
$TM send-keys -t top q
ok "q: top exits 0" wait_for 10 pane_has '^TOP EXITED 0$'
ok "... the terminal's modes as they were" pane_has '^TERMINAL RESTORED$'
unlike "$(pane)" 'sort: ' "... and the main screen back (no frame left)"
tm_kill

env -u PILOT_HOME $TM new-session -d -s top -x 120 -y 30 "$WORK/top.sh"
wait_for 20 pane_has "$A:hold" || diag "top did not draw"
pid=$(pgrep -f -n "^pilot top$" -P "$($TM display -p -t top '#{pane_pid}')")
ok "SIGTERM to top (pid $pid) ..." kill -TERM "$pid"
ok "... it exits 0" wait_for 10 pane_has '^TOP EXITED 0$'
ok "... with the terminal restored" pane_has '^TERMINAL RESTORED$'
tm_kill

# a pilotd that does not answer (stopped): q still quits at once, not
# after the request's whole limit of 10 s
env -u PILOT_HOME $TM new-session -d -s top -x 120 -y 30 "$WORK/top.sh"
wait_for 20 pane_has "$A:hold" || diag "top did not draw"
PD=$(kv "$(pilot_dir "$PILOT_UP_ID")/endpoint" pid)
cleanup_hook "kill -CONT $PD 2>/dev/null; true"
kill -STOP "$PD"
sleep 2 # top's next refresh now waits on pilotd
$TM send-keys -t top q
ok "q while pilotd does not answer: top exits within 5 s" \
    wait_for 5 pane_has '^TOP EXITED 0$'
kill -CONT "$PD"
tm_kill

# TERM=dumb: a terminal that cannot take top's codes: one snapshot
env -u PILOT_HOME $TM new-session -d -s top -x 120 -y 30 \
    "env TERM=dumb $WORK/top.sh"
ok "TERM=dumb: one snapshot, top exits by itself" \
    wait_for 20 pane_has '^TOP EXITED 0$'
ok "... the snapshot's node row" pane_has "^[^ ]+ +up +\[#{20}\] +2/2 +ok +$A:hold"
tm_kill

env -u PILOT_HOME $TM new-session -d -s top -x 120 -y 30 "$WORK/top.sh"
wait_for 20 pane_has "$A:hold" || diag "top did not draw"
$TM send-keys -t top C-c
ok "Ctrl-C: top exits 0" wait_for 10 pane_has '^TOP EXITED 0$'
ok "... with the terminal restored" pane_has '^TERMINAL RESTORED$'
tm_kill

# --- explain -----------------------------------------------------------
like "$(pilot explain "$F")" "^task $F \(quick\) is done: it ran on [^ ]+ and ended done \(exit 0\) after [0-9]+s" \
    "explain of an ended task: where and how"
like "$(pilot explain "$A")" "^task $A \(hold\) is running: it runs on [^ ]+ for [0-9]+s" \
    "explain of a running task: where"
pilot cancel "$G" >/dev/null
wait_for 30 state_is "$G" canceled || diag "task $G not canceled"
# one core free: a task of 2 cores waits for it, and reserves the node
B=$(pilot submit --name big --cores 2 -- true)
D=$(pilot submit --after "$B" -- true)
X=$(pilot submit --exclusive -- true)
E=$(pilot submit --name small -- true)
sleep 1
is "$(ex "$B" '[j["code"], j["nodes"][0]["reasons"][0]["code"]]')" \
   '["holds", "cores"]' "explain of a 2-core task: it holds the reservation; the node has too few cores"
like "$(pilot explain "$B")" "is queued: it is first in line: [^ ]+ is kept for it.*"$'\n'"  [^ ]+ \(up\): 1/2 cores free.*"$'\n'"    1 of 2 cores free, a rank needs 2" \
    "... in words: first in line, 1 of 2 cores free"
is "$(ex "$D" '[j["code"], j["deps"]]')" "[\"deps\", [{\"id\": $B, \"state\": \"queued\"}]]" \
   "explain of a task after it: waits for $B (queued)"
like "$(pilot explain "$D")" "is waiting: it waits for tasks that have not ended: $B \(queued\)" \
   "... in words"
is "$(ex "$X" '[j["code"], sorted(r["code"] for r in j["nodes"][0]["reasons"])]')" \
   '["room", ["exclusive", "reserved"]]' \
   "explain of an exclusive task: the node is not idle, and reserved"
like "$(pilot explain "$X")" "an exclusive task needs a whole idle node"$'\n'" +reserved for task $B" \
    "... in words"
is "$(ex "$E" '[j["code"], j["reserved_for"]]')" "[\"reserved\", $B]" \
   "explain of a 1-core task: it fits only on the node reserved for $B"
capture pilot explain 9999
one_error_line "explain of an unknown task" 'no task 9999'
is "$(pilot explain "$DEL" --json | json 'j["name"] == "de\x7fl"')" true \
   "explain --json of a task whose name holds a DEL: JSON, the name as it is"

# --- the pilot down ------------------------------------------------------
pilot down >/dev/null 2>&1
capture pilot top
like "$OUT" 'the pilot does not run: what it last recorded' \
    "top on a pilot that is down: says so"
like "$OUT" $'\n''[^ ]+ +down +\[\.{20}\] +0/2' "... and shows its node, down, as recorded"
capture pilot explain "$B"
like "$OUT" "^task $B \(big\) was queued when the pilot stopped: it runs when the pilot is resumed" \
    "explain on a pilot that is down: the state it last recorded"
capture pilot explain "$B" --json
is "$RC" 0 "explain --json on a pilot that is down exits 0"
is "$(echo "$OUT" | json '[j["id"], j["state"], j["code"]]')" "[$B, \"queued\", \"down\"]" \
   "... an object: the state it last recorded, code down"
is "$(pilot top --json | json 'j["state"] != "running"')" true \
   "top --json on a pilot that is down: JSON"

# --- a 2-node Slurm pilot ------------------------------------------------
P2=$(run_timeout 180 pilot up --nodes 2 --gpus-per-node 2 --time 5:00 --wait \
     --wait-timeout 120 2>"$WORK/up2.err") \
    || abort "pilot up --nodes 2 failed: $(<"$WORK/up2.err")"
export PILOT_ID=$P2
# (the dev cluster's nodes give an agent 2 cores, and fake GPUs)
H=$(pilot submit --name busy --cores 1 --gpus 1 -- sleep 300)
wait_for 60 state_is "$H" running || diag "task $H did not start"
BUSY=$(pilot status --json | json '[n["name"] for n in j["nodes"] if n["cores_busy"] == 1][0]')
first_row() { sed -n '/^NODE /{n;p;q}' <<<"$1" | awk '{print $1}'; }
capture pilot top --sort busy
is "$(first_row "$OUT")" "$BUSY" "top --sort busy: the busiest node ($BUSY) first"
capture pilot top --sort name
is "$(first_row "$OUT")" "$(pilot status --json | json 'sorted(n["name"] for n in j["nodes"])[0]')" \
   "top --sort name: the first name first"
like "$OUT" "$BUSY +up +\[#{10}\.{10}\] +1/2 +\[#+\.+\] +1/[0-9]+ +ok +$H:busy" \
    "... the busy node's cores and GPUs as bars, its task by name"
G2=$(pilot submit --name gang --ranks 2 --nodes 2 --cores 2 -- true)
S2=$(pilot submit --name small -- true)
sleep 1
is "$(ex "$G2" '[j["code"], [r["code"] for n in j["nodes"] for r in n["reasons"] if n["name"] == "'"$BUSY"'"]]')" \
   '["holds", ["cores"]]' "a gang of 2 nodes x 2 cores: it holds the reservation; $BUSY has too few cores"
like "$(pilot explain "$G2")" "first in line: [^ ]+, [^ ]+ are kept for it,.*needs 2 ranks x 2 cores, on 2 nodes" \
    "... in words"
is "$(ex "$S2" '[j["code"], j["reserved_for"]]')" "[\"reserved\", $G2]" \
   "a 1-core task: both nodes are reserved for the gang"
pilot cancel "$H" >/dev/null
ok "the gang runs once the busy task is canceled" wait_for 60 state_is "$G2" done
pilot down >/dev/null 2>&1
