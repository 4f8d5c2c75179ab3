#!/bin/bash
# t0700-auth.sh - CURVE and the ZAP allow-list, on a local pilot: keys are
# made private at 'pilot up'; the pilot's own client and agent get in; a
# client whose key others can read, a wrong key, no key, no CURVE or
# another server key is refused with one clear line, quickly, and
# pilotd logs the refusal once; so is an agent with a wrong key; a
# restarted pilotd keeps its keys; one pilot's keys do not open another.
. "$(dirname "$0")/lib.sh"

plan 45

# "mode" of a file, as stat prints it (600, 700)
mode() {
    stat -c %a "$1" 2>/dev/null
}
# lines of pilotd's log that hold the fixed string $1
log_count() {
    grep -cF -- "$1" "$PDIR/logs/pilotd.log" 2>/dev/null
}
log_has() {
    grep -qF -- "$1" "$PDIR/logs/pilotd.log" 2>/dev/null
}
# capture CMD with the time it took in SECS
timed() {
    local t0
    t0=$(now)
    capture "$@"
    SECS=$(elapsed "$t0" "$(now)")
}
fast() {
    "$PY" -c 'import sys; sys.exit(0 if float(sys.argv[1]) < 3 else 1)' "$1"
}

pilot_up_local || abort "pilot up --local --wait failed"
P=$PILOT_UP_ID
PDIR=$(pilot_dir "$P")
K=$PDIR/keys
export PILOT_TIMEOUT=10

# --- the keys 'pilot up' made ----------------------------------------------
is "$(mode "$K") $(mode "$K/allow")" "700 700" "keys/ and keys/allow/ are 0700"
is "$(cd "$K" && stat -c '%n %a' server.key server.pub client.key agent.key \
      allow/client.pub allow/agent.pub | tr '\n' ' ')" \
    "server.key 600 server.pub 600 client.key 600 agent.key 600 allow/client.pub 600 allow/agent.pub 600 " \
    "server.key, server.pub, client.key, agent.key and the allow-list: 0600"
is "$(pub_of "$K/allow/client.pub")" "$(pub_of "$K/client.key")" \
    "allow/client.pub is the client's public key"
ok "pilotd logged its allow-list of 2 keys" log_has "admitting the 2 keys"

# --- the pilot's own client ------------------------------------------------
capture pilot status --json
is "$RC" 0 "the pilot's client is admitted: status exits 0"
is "$(json 'j["agents_up"]' <<<"$OUT")" 1 "... and the pilot's agent is up"
capture pilot submit -- echo admitted
TASK=$OUT
capture pilot wait "$TASK" --timeout 30
is "$RC" 0 "a task runs"

# --- a key file, or the keys directory, that others may read ---------------
chmod 644 "$K/client.key"
timed pilot status
one_error_line "a world-readable client.key: refused with one line" \
    "key file $K/client.key is open to group or others \(mode 0644, want 0600\)"
capture pilot submit -- true
one_error_line "... by submit too" "client.key is open to group or others"
chmod 640 "$K/client.key"
capture pilot ls
one_error_line "a group-readable client.key: refused" "mode 0640"
chmod 600 "$K/client.key"
chmod 755 "$K"
capture pilot status
one_error_line "a keys directory of mode 0755: refused" \
    "keys directory $K is open to group or others \(mode 0755"
chmod 700 "$K"
chmod 622 "$K/server.pub"
capture pilot status
one_error_line "a server.pub others may write: refused" "server.pub is open"
chmod 600 "$K/server.pub"

# --- a wrong key: a valid keypair that is not in the allow-list ------------
W=$WORK/wrong
keydir "$W"
cp "$K/server.pub" "$W/"
cp "$K/server.key" "$W/client.key" # a real keypair, not an allowed one
WRONG_PUB=$(pub_of "$W/client.key")
timed env PILOT_KEYS="$W" pilot status
one_error_line "a wrong key: refused with one line" \
    "pilotd refused this client's key $W/client.key \(not in the pilot's allow-list for clients\)"
ok "... at once (${SECS}s), not at the timeout" fast "$SECS"
ok "pilotd logged the refusal, naming the address and the key" \
    wait_for 5 log_has "refused 127.0.0.1 on the clients socket: its CURVE key $WRONG_PUB is not in $K/allow"
capture env PILOT_KEYS="$W" pilot submit -- true
one_error_line "... submit with it too" "refused this client's key"
capture env PILOT_KEYS="$W" pilot ls
is "$(log_count "key $WRONG_PUB")" 1 \
    "three tries with that key from this address: logged once"

# --- no key --------------------------------------------------------------
N=$WORK/nokey
keydir "$N"
timed env PILOT_KEYS="$N" pilot status
one_error_line "a keys directory with no client key: refused" \
    "no client key: $N/client.key does not exist"
mv "$K/client.key" "$WORK/client.key.away"
capture pilot status
one_error_line "the pilot's own client.key gone: refused" \
    "no client key: $K/client.key does not exist"
mv "$WORK/client.key.away" "$K/client.key"
capture env PILOT_KEYS="$WORK/none" pilot status
one_error_line "PILOT_KEYS naming nothing: refused" "no keys: $WORK/none"

# a peer that speaks ZeroMQ with no CURVE at all: a whole ZMTP 3.0
# greeting of the NULL mechanism (signature, version 3.0, "NULL" in 20
# bytes, as-server 0, 31 bytes of filler)
null_greeting() {
    local ep=${1#tcp://}
    exec 3<>"/dev/tcp/${ep%:*}/${ep##*:}" || return 1
    printf '\xff\x00\x00\x00\x00\x00\x00\x00\x01\x7f\x03\x00NULL' >&3
    printf '\x00%.0s' {1..48} >&3
    sleep 0.2
    exec 3>&-
}
CEP=$(kv "$PDIR/endpoint" client)
ok "a NULL-mechanism greeting reaches pilotd's client socket" \
    null_greeting "$CEP"
ok "pilotd logged a peer without CURVE" \
    wait_for 5 log_has "refused a peer on the clients socket: it does not use CURVE"

# --- another pilot's server key ----------------------------------------------
F=$WORK/foreign
keydir "$F"
cp "$K/client.key" "$F/"
printf 'public %s\n' "$(pub_of "$K/agent.key")" >"$F/server.pub"
chmod 600 "$F/server.pub"
timed env PILOT_KEYS="$F" pilot status
one_error_line "another server key: refused with one line" \
    "broke off the CURVE handshake 3 times: is $F/server.pub this pilot's key"
ok "... at once (${SECS}s)" fast "$SECS"
ok "pilotd logged it" \
    wait_for 5 log_has "its HELLO does not decrypt (it holds another server key?)"

# --- agents ------------------------------------------------------------------
AEP=$(kv "$PDIR/endpoint" agent)
A=$WORK/wrongagent
keydir "$A"
cp "$K/server.pub" "$A/"
cp "$K/server.key" "$A/agent.key"
CAPTURE_TIMEOUT=20 capture pilot-agent --connect "$AEP" --keys "$A" \
    --node intruder
is "$RC" 1 "an agent with a wrong key exits 1"
like "$ERR" "pilotd at $AEP refused our key $A/agent.key \(ZAP status 400\)" \
    "... saying pilotd refused its key"
ok "pilotd logged the refusal on its agents socket" \
    wait_for 5 log_has "refused 127.0.0.1 on the agents socket: its CURVE key $WRONG_PUB"
L=$WORK/laxagent
keydir "$L"
cp "$K/server.pub" "$K/agent.key" "$L/"
chmod 644 "$L/agent.key"
CAPTURE_TIMEOUT=20 capture pilot-agent --connect "$AEP" --keys "$L" \
    --node lax
is "$RC" 1 "an agent with a world-readable key exits 1"
like "$ERR" "agent.key is open to group or others" "... saying why"
capture pilot-agent --connect "$AEP"
is "$RC" 2 "an agent without --keys: usage error"
capture pilot status --json
is "$(json '[n["name"] for n in j["nodes"]]' <<<"$OUT")" \
    "[\"$(hostname)\"]" "only the pilot's own agent is a node"
lacks "pilotd never heard from the refused agents" "intruder|agent on lax" \
    "$PDIR/logs/pilotd.log"

# --- the pilot still works -----------------------------------------------------
capture pilot submit -- echo still
TASK=$OUT
capture pilot wait "$TASK" --timeout 30
is "$RC" 0 "after all that, the pilot's client and agent still work"

# --- a restarted pilotd keeps its keys -----------------------------------------
SUMS=$(cd "$K" && md5sum server.key server.pub client.key agent.key \
       allow/client.pub allow/agent.pub)
capture pilot down
is "$RC" 0 "pilot down"
chmod 755 "$K"
capture pilotd --dir "$PDIR" --local
is "$RC" 1 "pilotd refuses a keys directory others may read"
like "$ERR" "keys directory $K is open to group or others" "... saying so"
chmod 700 "$K"
setsid pilotd --dir "$PDIR" --local >"$WORK/pilotd-2.out" 2>&1 </dev/null &
ok "pilotd restarted on $P: its agent is up again" wait_for 20 agents_up 1
is "$(cd "$K" && md5sum server.key server.pub client.key agent.key \
      allow/client.pub allow/agent.pub)" "$SUMS" \
    "... with the same keys and allow-list"
capture pilot submit -- echo again
TASK=$OUT
capture pilot wait "$TASK" --timeout 30
is "$RC" 0 "... and the same client key works"
capture pilot down
is "$RC" 0 "pilot down"

# --- keys of one pilot do not open another -------------------------------------
timed env PILOT_KEYS="$K" pilot up --local --wait
is "$RC" 1 "pilot up --wait with $P's keys (PILOT_KEYS) exits 1"
like "$ERR" "broke off the CURVE handshake 3 times: is $K/server.pub this pilot's key" \
    "... saying the server key is not the new pilot's"
ok "... at once (${SECS}s), not after --wait-timeout" fast "$SECS"
P2=$OUT
capture pilot down --pilot "$P2"
is "$RC" 0 "the new pilot $P2 stops with its own keys"
