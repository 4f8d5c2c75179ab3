#!/bin/bash
# t0930-durable-ack.sh - an acknowledged submission survives a crash of
# the node, not only of pilotd (issue 12): pilotd syncs the WAL before a
# commit's acknowledgements leave.  Counted with strace on a local pilot
# with no agent: 100 submits one after another are 100 commits, each
# followed by an fdatasync of state.db-wal; with PILOT_ACK_SYNC=0 only
# the checkpoints (4 a second at most) sync it: at least 80 fewer.
. "$(dirname "$0")/lib.sh"

plan 6
command -v strace >/dev/null || abort "strace is missing (scripts/install-deps.sh installs it)"

# wal_syncs PILOT: fsync/fdatasync calls of pilotd on its -wal file while
# 100 tasks are submitted one at a time
wal_syncs() {
    local pid out=$WORK/strace.$1
    pid=$(kv "$(pilot_dir "$1")/endpoint" pid)
    strace -f -y -qq -e trace=fsync,fdatasync -p "$pid" -o "$out" &
    local st=$!
    sleep 1 # strace attached to every thread
    for _ in $(seq 100); do
        pilot submit --pilot "$1" -- true >/dev/null || echo "submit failed" >&2
    done
    kill -INT "$st"
    wait "$st" 2>/dev/null
    grep -c -- '-wal>)' "$out"
}

capture pilot up --local --agents 0 --wait
P=$OUT
SYNCED=$(wal_syncs "$P")
ok "100 submits: the WAL is synced at least 100 times ($SYNCED)" test "$SYNCED" -ge 100
is "$(pilot status --pilot "$P" --json | json 'j["tasks"]["total"]')" 100 "... and 100 tasks are queued"
capture pilot down --pilot "$P"
is "$RC" 0 "pilot down"

capture env PILOT_ACK_SYNC=0 pilot up --local --agents 0 --wait
P=$OUT
NOSYNC=$(wal_syncs "$P")
# the checkpoints sync the WAL too, as often as the run's length allows
# (4 a second at most): the difference is the acknowledgements'
ok "with PILOT_ACK_SYNC=0, $NOSYNC syncs: 80 or more of the 100 fewer (the checkpoints' are left)" \
    test "$((SYNCED - NOSYNC))" -ge 80
is "$(pilot status --pilot "$P" --json | json 'j["tasks"]["total"]')" 100 "... and 100 tasks are queued"
capture env PILOT_ACK_SYNC=maybe pilot up --local --agents 0 --wait
like "$RC $ERR" "^1 .*pilotd exited with status 2" "PILOT_ACK_SYNC=maybe: pilotd refuses it, pilot up --wait says so"
