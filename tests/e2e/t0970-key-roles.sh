#!/bin/bash
# t0970-key-roles.sh - keys have roles, on a local pilot: each socket
# admits its own (the client's key cannot be an agent, the agents' key
# cannot be a client); 'pilot keys add' makes a key of role read (ls,
# show, status, no submit or cancel) or submit (submit, cancel its own
# tasks only), handed over as a directory its holder uses as PILOT_HOME;
# none of them can shut the pilot down; 'pilot keys revoke' takes effect
# at once, on a connection the key already has; bad requests to 'pilot
# keys' change nothing.
. "$(dirname "$0")/lib.sh"

plan 69

log_has() {
    grep -qE -- "$1" "$PDIR/logs/pilotd.log" 2>/dev/null
}
# the state of task $1, as the pilot's owner sees it
state_of() {
    pilot show "$1" --json 2>/dev/null | json 'j["state"]'
}
fast() {
    "$PY" -c 'import sys; sys.exit(0 if float(sys.argv[1]) < 3 else 1)' "$1"
}

pilot_up_local || abort "pilot up --local --wait failed"
P=$PILOT_UP_ID
PDIR=$(pilot_dir "$P")
K=$PDIR/keys
AEP=$(kv "$PDIR/endpoint" agent)
CEP=$(kv "$PDIR/endpoint" client)
[[ $CEP == tcp://* ]] || abort "no client endpoint in $PDIR/endpoint"
export PILOT_TIMEOUT=10

# --- the pilot's own keys ------------------------------------------------------
capture pilot keys list --json
is "$RC" 0 "pilot keys list --json exits 0"
is "$(json '[[k["name"], k["role"], k["public"]] for k in j]' <<<"$OUT")" \
    "[[\"agent\", \"agent\", \"$(pub_of "$K/agent.key")\"], [\"client\", \"admin\", \"$(pub_of "$K/client.key")\"]]" \
    "the pilot's own two: agent (role agent), client (role admin), with their public keys"
capture pilot keys list
like "$OUT" "^NAME +ROLE +ADDED +PUBLIC" "pilot keys list: a table"
like "$OUT" "client +admin +[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8} +$(pub_of "$K/client.key" | sed 's/[][\.*^$+?(){}|/]/\\&/g')" \
    "... whose rows hold the whole public key"

# --- the client's key as an agent's --------------------------------------------
A=$WORK/asagent
keydir "$A"
cp "$K/server.pub" "$A/"
cp "$K/client.key" "$A/agent.key"
CAPTURE_TIMEOUT=20 capture pilot-agent --connect "$AEP" --keys "$A" \
    --node imposter
is "$RC" 1 "a pilot-agent with the pilot's client key exits 1"
like "$ERR" "pilotd at $AEP refused our key $A/agent.key" \
    "... saying pilotd refused its key"
ok "pilotd logged the refusal: key 'client' of role admin on the agents socket" \
    wait_for 5 log_has "refused 127\.0\.0\.1 on the agents socket: its key 'client' has role admin"
capture pilot status --json
is "$(json '[n["name"] for n in j["nodes"]]' <<<"$OUT")" "[\"$(hostname)\"]" \
    "only the pilot's own agent is a node"

# --- the agents' key as a client's ---------------------------------------------
G=$WORK/asclient
keydir "$G"
cp "$K/server.pub" "$G/"
cp "$K/agent.key" "$G/client.key"
capture env PILOT_KEYS="$G" pilot submit -- true
one_error_line "the agents' key cannot submit" \
    "pilotd refused this client's key $G/client.key \(not in the pilot's allow-list for clients\)"
capture env PILOT_KEYS="$G" pilot down
one_error_line "... nor shut the pilot down" "pilotd refused this client's key"
ok "pilotd logged the refusal: key 'agent' of role agent on the clients socket" \
    wait_for 5 log_has "refused 127\.0\.0\.1 on the clients socket: its key 'agent' has role agent"
capture pilot status --json
is "$RC $(json 'j["state"]' <<<"$OUT") $(json 'j["agents_up"]' <<<"$OUT")" \
    "0 running 1" "the pilot still runs, with its agent"

# --- a key of role read --------------------------------------------------------
capture pilot keys add viewer --role read --out "$WORK/viewer"
is "$RC" 0 "pilot keys add viewer --role read --out DIR exits 0"
like "$OUT" "added key 'viewer' \(role read\) to pilot $P" "... saying so"
like "$OUT" "PILOT_HOME=$WORK/viewer pilot status" "... and how its holder uses it"
VK=$WORK/viewer/pilots/$P/keys
is "$(stat -c '%a' "$WORK/viewer" "$VK" "$VK/client.key" "$VK/server.pub" | tr '\n' ' ')" \
    "700 700 600 600 " "DIR and its keys are private (0700, 0600)"
is "$(pub_of "$K/allow/viewer.pub") $(awk '$1 == "role" { print $2 }' "$K/allow/viewer.pub")" \
    "$(pub_of "$VK/client.key") read" \
    "allow/viewer.pub holds the new key's public half and 'role read'"
lacks "... and not its secret" "secret" "$K/allow/viewer.pub"
is "$(pub_of "$VK/server.pub")" "$(pub_of "$K/server.pub")" \
    "DIR holds the pilot's server key"
is "$(kv "$WORK/viewer/pilots/$P/endpoint" client)" "$CEP" \
    "... and its endpoint"

TASK=$(pilot submit -- sleep 120)
V=(env "PILOT_HOME=$WORK/viewer")
capture "${V[@]}" pilot ls --json
is "$RC $(json '[t["id"] for t in j]' <<<"$OUT")" "0 [$TASK]" \
    "a read key lists the tasks"
capture "${V[@]}" pilot show "$TASK" --json
is "$RC $(json 'j["submitted_by"]' <<<"$OUT")" "0 client" \
    "... shows one (submitted by key 'client')"
capture "${V[@]}" pilot status --json
is "$RC $(json 'j["agents_up"]' <<<"$OUT")" "0 1" "... and asks for the status"
capture "${V[@]}" pilot submit -- true
one_error_line "it may not submit" "key 'viewer' \(role read\) may not submit$"
capture "${V[@]}" pilot cancel "$TASK"
one_error_line "it may not cancel" \
    "key 'viewer' \(role read\) may not cancel tasks$"
capture "${V[@]}" pilot down
one_error_line "it may not shut the pilot down" \
    "key 'viewer' \(role read\) may not shut the pilot down$"
is "$(state_of "$TASK") $(pilot ls --json | json 'len(j)')" "running 1" \
    "nothing changed: the task runs, no task was added"
capture pilot status --json
is "$(json 'j["state"]' <<<"$OUT")" running "the pilot still runs"

# --- a key of role submit ------------------------------------------------------
capture pilot keys add alice --role submit --out "$WORK/alice" --json
is "$RC $(json '[j["name"], j["role"], j["reloaded"]]' <<<"$OUT")" \
    "0 [\"alice\", \"submit\", true]" \
    "pilot keys add alice --role submit --json: pilotd reloaded its list"
AL=(env "PILOT_HOME=$WORK/alice")
capture "${AL[@]}" pilot submit -- sleep 120
MINE=$OUT
like "$RC $MINE" "^0 [0-9]+$" "a submit key submits"
is "$(pilot show "$MINE" --json | json 'j["submitted_by"]')" alice \
    "... the task records the key it came with"
like "$(pilot show "$MINE")" "by key: +alice" "... which 'pilot show' prints"
capture "${AL[@]}" pilot cancel "$TASK"
one_error_line "it may not cancel another key's task" \
    "key 'alice' \(role submit\) may cancel only its own tasks: task $TASK was submitted by key 'client'"
capture "${AL[@]}" pilot cancel "$MINE" "$TASK"
one_error_line "... nor its own with another's" "task $TASK was submitted by key 'client'"
is "$(state_of "$TASK") $(state_of "$MINE")" "running running" \
    "... both still run"
capture "${AL[@]}" pilot cancel "$MINE"
is "$RC $OUT" "0 canceled 1 task" "it cancels its own"
ok "... which ends canceled" wait_for 10 eval '[[ $(state_of "$MINE") == canceled ]]'
capture "${AL[@]}" pilot down
one_error_line "it may not shut the pilot down" \
    "key 'alice' \(role submit\) may not shut the pilot down$"
capture "${AL[@]}" pilot ls --json
is "$RC $(json 'len(j)' <<<"$OUT")" "0 2" "it reads, as a read key does"
is "$(state_of "$TASK")" running "the owner's task still runs"

# --- revoke: at once, on a live connection -------------------------------------
# 'pilot wait' watches on one connection, asking for counts every 2 s
"${V[@]}" pilot wait "$TASK" --timeout 60 >"$WORK/wait.out" 2>"$WORK/wait.err" &
WAITPID=$!
sleep 1.5
ok "the read key's 'pilot wait' polls" kill -0 "$WAITPID"
T0=$(now)
capture pilot keys revoke viewer
is "$RC" 0 "pilot keys revoke viewer exits 0"
is "$OUT" "revoked key 'viewer' (role read) of pilot $P: pilotd refuses it from now on" \
    "... saying pilotd refuses it from now on"
WRC=0
wait "$WAITPID" || WRC=$?
SECS=$(elapsed "$T0" "$(now)")
like "$WRC $(tail -n 1 "$WORK/wait.err")" "^3 pilot: error: this client's key is no longer in the pilot's allow-list \(revoked\)" \
    "its 'pilot wait' ends with an error (exit 3): the key was revoked"
ok "... at its next poll (${SECS}s after the revoke)" \
    eval 'grep -qF "(revoked)" "$WORK/wait.err" && fast "$SECS"'
capture "${V[@]}" pilot status
one_error_line "a new connection with it is refused at the handshake" \
    "pilotd refused this client's key $VK/client.key"
ok "pilotd logged the reload" log_has "reloaded .*/allow: admitting 3 keys"
capture pilot keys list --json
is "$(json '[k["name"] for k in j]' <<<"$OUT")" '["agent", "alice", "client"]' \
    "the list: agent, alice, client"
capture "${AL[@]}" pilot ls --json
is "$RC" 0 "alice's key still works"

# --- a public key made elsewhere (--pub) -----------------------------------------
# a keypair nobody is admitted with: made by 'add', then revoked
capture pilot keys add tmpkey --role read --out "$WORK/tmpkey"
capture pilot keys revoke tmpkey
CK=$WORK/tmpkey/pilots/$P/keys/client.key
capture pilot keys add carol --role submit --pub "$(pub_of "$CK")" \
    --out "$WORK/carol"
is "$RC" 0 "pilot keys add carol --pub Z85 --out DIR exits 0"
ok "... DIR has the server key, no keypair" eval \
    'test -e "$WORK/carol/pilots/$P/keys/server.pub" && test ! -e "$WORK/carol/pilots/$P/keys/client.key"'
cp "$CK" "$WORK/carol/pilots/$P/keys/client.key"
capture env PILOT_HOME="$WORK/carol" pilot submit -- true
like "$RC $OUT" "^0 [0-9]+$" "with its keypair put in, carol submits"
capture pilot keys add dave --role read --pub "$CK"
is "$RC" 1 "the same key from a file (--pub FILE), as dave: refused"
like "$ERR" "this public key is already allowed, as 'carol' \(role submit\)" \
    "... it is carol's already"

# --- bad requests change nothing -------------------------------------------------
capture pilot keys add bob --role admin --out "$WORK/bob"
usage_error "--role admin: refused" "'admin' is not submit or read"
capture pilot keys add bob --role write --out "$WORK/bob"
usage_error "--role write: refused" "'write' is not submit or read"
capture pilot keys add bob --out "$WORK/bob"
usage_error "no --role: refused" "--role submit or --role read is required"
capture pilot keys add bob --role read
usage_error "neither --out nor --pub: refused" "--out DIR .* or --pub KEY is required"
capture pilot keys add b.b --role read --out "$WORK/bob"
usage_error "a bad name: refused" "bad key name 'b.b'"
capture pilot keys add bob --role read --pub nonsense
usage_error "a --pub that is no key: refused" "--pub: 'nonsense' is neither a public key"
capture pilot keys add alice --role read --out "$WORK/alice2"
one_error_line "a name taken: refused" "there is already a key 'alice'"
capture pilot keys add bob --role read --out "$WORK/alice"
one_error_line "--out naming a directory that exists: refused" "$WORK/alice exists"
capture pilot keys revoke client
usage_error "revoking the pilot's own client key: refused" \
    "key 'client' is the pilot's own"
capture pilot keys revoke nobody
one_error_line "revoking a key that is not there: refused" "has no key 'nobody'"
capture pilot keys frob
usage_error "an unknown subcommand: refused" "unknown subcommand 'frob'"
is "$(ls "$K/allow" | tr '\n' ' ')$(ls -d "$WORK/bob" "$WORK/alice2" 2>&1 >/dev/null | wc -l)" \
    "agent.pub alice.pub carol.pub client.pub 2" \
    "the allow-list is as it was, and none of them wrote a DIR"

# --- the owner still stops the pilot; its keys stay readable ----------------------
capture pilot down
is "$RC" 0 "the pilot's own key shuts the pilot down"
capture pilot keys revoke carol
is "$RC $OUT" "0 revoked key 'carol' (role submit) of pilot $P" \
    "a pilot that is down: revoke edits its allow-list alone"
capture pilot keys list --json
is "$(json '[k["name"] for k in j]' <<<"$OUT")" '["agent", "alice", "client"]' \
    "... which 'pilot keys list' reads"
