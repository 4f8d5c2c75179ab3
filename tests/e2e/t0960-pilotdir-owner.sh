#!/bin/bash
# t0960-pilotdir-owner.sh - the pilot directory is checked like the keys
# (issue 12): a local pilot run by an unprivileged user (pilot-owner), and
# another one (pilot-other) who, while a directory was open to them, put
# things in it.  A PILOT_HOME others may write, a pilots/<id> of another
# user or a link to one is refused by pilot up --resume, status, submit,
# logs and by pilotd --dir (the batch script's restart), with one line
# naming the path, the owner or mode found and what to do, and the other
# user's queued command never runs as the owner; a task output file or
# link planted in the output directory is not written into, and the task
# fails saying why.  The users are made here (useradd) when missing.
. "$(dirname "$0")/lib.sh"

plan 33

OWNER=pilot-owner
OTHER=pilot-other
for u in $OWNER $OTHER; do
    id -u "$u" >/dev/null 2>&1 \
        || useradd --system --no-create-home --shell /usr/sbin/nologin "$u" \
        || id -u "$u" >/dev/null 2>&1 || abort "cannot make user $u"
done
OWNER_UID=$(id -u $OWNER)
OTHER_UID=$(id -u $OTHER)

# The users pass through $WORK (root's) to $WORK/tmp, sticky as /var/tmp
# (the demo's PILOT_HOME is under it): each may make things there, and
# only rename or remove their own.
chmod 0711 "$WORK"
mkdir -m 1777 "$WORK/tmp"
OPEN=$WORK/tmp/open-home  # a PILOT_HOME the owner left open to all
OHOME=$WORK/tmp/home      # the owner's PILOT_HOME
XHOME=$WORK/tmp/xhome     # the other user's
PWNED=$WORK/tmp/pwned     # what the other user's command would write

# as USER HOME CMD...: CMD as USER (setpriv: no root left), PILOT_HOME=HOME
cat >"$WORK/as" <<EOF
#!/bin/bash
u=\$1 h=\$2
shift 2
cd /
exec setpriv --reuid="\$u" --regid="\$u" --init-groups -- \\
    env PILOT_HOME="\$h" PATH="$PILOT_BIN:/usr/bin:/bin" "\$@"
EOF
chmod 0755 "$WORK/as"
AS=$WORK/as

# the pilots of both users down (in every PILOT_HOME used here: a pilot
# refused by these checks may have started all the same without them),
# and none of their processes left: they have PILOT_HOME=$WORK/...
users_down() {
    local h u d pid left=() end=$((SECONDS + 15))
    for h in "$OPEN" "$WORK/pub/home" "$OHOME" "$XHOME"; do
        u=$OWNER
        [[ $h == "$XHOME" ]] && u=$OTHER
        for d in "$h"/pilots/*/; do
            [[ -d $d ]] || continue
            run_timeout 30 "$AS" $u "$h" pilot down --pilot "$(basename "$d")" \
                >/dev/null 2>&1
            run_timeout 30 "$AS" $OTHER "$h" pilot down --pilot \
                "$(basename "$d")" >/dev/null 2>&1
        done
    done
    while :; do
        left=()
        for pid in $(grep -lsaF "PILOT_HOME=$WORK/" /proc/[0-9]*/environ \
                     2>/dev/null | cut -d/ -f3); do
            [[ $pid == "$$" || $pid == "$BASHPID" ]] || ! alive "$pid" \
                || left+=("$pid")
        done
        ((${#left[@]} == 0 || SECONDS >= end)) && break
        sleep 0.2
    done
    for pid in "${left[@]}"; do
        echo "t0960: process $pid outlived the test's pilots:" \
             "$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" >&2
        kill -KILL "$pid" 2>/dev/null
    done
    ((${#left[@]} == 0))
}
cleanup_hook users_down

field() { "$AS" $OWNER "$OHOME" pilot show "$1" --json | json "j[\"$2\"]"; }

# --- a PILOT_HOME that others may write ------------------------------------
mkdir "$OPEN"
chown $OWNER "$OPEN"
chmod 0777 "$OPEN"
capture "$AS" $OWNER "$OPEN" pilot up --local --wait
one_error_line "pilot up with a PILOT_HOME anyone may write: refused, saying how to fix it" \
    "^pilot: error: $OPEN is writable by group or others \(mode 0777\): chmod go-w it$"
ok "... and nothing is made in it" test ! -e "$OPEN/pilots"
capture "$AS" $OWNER "$OPEN" pilot status
one_error_line "pilot status there: the same line" "$OPEN is writable by group or others"
capture "$AS" $OWNER "$OPEN" pilotd --local
ok "pilotd of a batch script without PILOT_DIR there: refused too (exit 1)" \
    eval '[[ $RC == 1 && $ERR == "pilotd: error: $OPEN is writable by group or others"* ]]' \
    || diag "exit $RC, stderr: $ERR"
# while it was open, the other user made pilots/ in it
"$AS" $OTHER "$OPEN" mkdir "$OPEN/pilots"
chmod 0755 "$OPEN"
capture "$AS" $OWNER "$OPEN" pilot up --local --wait
one_error_line "chmod go-w done, but pilots/ is the other user's: refused, naming its owner" \
    "$OPEN/pilots belongs to uid $OTHER_UID, not to you \(uid $OWNER_UID\): use a PILOT_HOME of yours$"

# a PILOT_HOME to be made in a directory anyone may write, not sticky
mkdir -m 0777 "$WORK/pub"
capture "$AS" $OWNER "$WORK/pub/home" pilot up --local --wait
one_error_line "a PILOT_HOME in a directory anyone may write and not sticky: refused" \
    "$WORK/pub is writable by others and not sticky \(mode 0777\): chmod go-w it, or move PILOT_HOME"
ok "... and it is not made there" test ! -e "$WORK/pub/home"

# --- the owner's pilot, in the sticky directory (as /var/tmp) --------------
capture "$AS" $OWNER "$OHOME" pilot up --local --wait
is "$RC|$OUT" "0|p1" "a pilot of an unprivileged user in a sticky directory starts (p1)"
is "$(stat -c '%U %a' "$OHOME" "$OHOME/pilots" "$OHOME/pilots/p1" | sort -u)" \
    "$OWNER 700" "... PILOT_HOME, pilots/ and pilots/p1 made 0700, the owner's"
chmod 0755 "$OHOME" "$OHOME/pilots" # others may read these two
T=$("$AS" $OWNER "$OHOME" pilot submit -- sh -c 'id -un')
capture "$AS" $OWNER "$OHOME" pilot wait "$T" --timeout 30
is "$RC|$("$AS" $OWNER "$OHOME" pilot logs "$T")" "0|$OWNER" \
    "a task runs, as its owner (PILOT_HOME and pilots/ 0755)"
R=$("$AS" $OWNER "$OHOME" pilot submit --ranks 2 -- sh -c 'echo rank $PILOT_RANK')
capture "$AS" $OWNER "$OHOME" pilot wait "$R" --timeout 30
is "$RC|$("$AS" $OWNER "$OHOME" pilot logs "$R" | sort | tr '\n' ' ')" \
    "0|rank 0 rank 1 " "the two ranks of a task share one output file"

# --- task output files put in the output directory -------------------------
# (by root for the other user here: the directory is the owner's, 0700,
# which is why no one else can do it any more)
B=$OHOME/pilots/p1/tasks/0
N=$((R + 1))
BAIT=$WORK/tmp/bait
install -o $OTHER -m 0666 /dev/null "$B/$N.out"
printf 'bait\n' >"$BAIT"
chown $OTHER "$BAIT"
chmod 0666 "$BAIT"
ln -s "$BAIT" "$B/$((N + 1)).out"
chown -h $OTHER "$B/$((N + 1)).out"
T=$("$AS" $OWNER "$OHOME" pilot submit -- echo secret-one)
capture "$AS" $OWNER "$OHOME" pilot wait "$T" --timeout 30
is "$T|$RC" "$N|1" "a task whose output file was put there before it fails"
like "$(field "$T" reason)" \
    "^stdout $B/$N.out exists already \(uid $OTHER_UID, mode 0666\)$" \
    "... its reason names the file, its owner and mode"
is "$(stat -c %s "$B/$N.out")" 0 "... and nothing is written into it"
T=$("$AS" $OWNER "$OHOME" pilot submit -- echo secret-two)
capture "$AS" $OWNER "$OHOME" pilot wait "$T" --timeout 30
is "$T|$RC|$(field "$T" reason)" \
    "$((N + 1))|1|stdout $B/$((N + 1)).out is a symbolic link: not followed" \
    "a task whose output file is a link fails, saying so"
is "$(cat "$BAIT")" bait "... and nothing is written through it"
capture "$AS" $OWNER "$OHOME" pilot logs "$T"
one_error_line "pilot logs does not follow the link either" \
    "cannot read $B/$((N + 1)).out: a symbolic link, not followed"
T=$("$AS" $OWNER "$OHOME" pilot submit -- echo after)
capture "$AS" $OWNER "$OHOME" pilot wait "$T" --timeout 30
is "$RC|$("$AS" $OWNER "$OHOME" pilot logs "$T")" "0|after" "the next task runs as before"
# not the pilot's own: its database and logs hold every task's command
chmod 0750 "$OHOME/pilots/p1"
capture "$AS" $OWNER "$OHOME" pilot status --pilot p1
one_error_line "a pilot directory its group may read: refused, saying how to fix it" \
    "^pilot: error: $OHOME/pilots/p1 is open to group or others \(mode 0750\): chmod go-rwx it$"
chmod 0700 "$OHOME/pilots/p1"

# --- pilot directories of the other user -------------------------------------
# The other user's pilot: one queued command, no agent to run it; its
# directory opened to all (keys/ removed: pilot up makes them anew) so
# that a pilotd of the owner could run in it.
capture "$AS" $OTHER "$XHOME" pilot up --local --agents 0 --wait
is "$RC|$OUT" "0|p1" "the other user's pilot (no agent) starts"
"$AS" $OTHER "$XHOME" pilot submit -- sh -c "id -un >$PWNED" >/dev/null
"$AS" $OTHER "$XHOME" pilot down >/dev/null 2>&1
X=$XHOME/pilots/p1
is "$("$AS" $OTHER "$XHOME" pilot ls --pilot p1 --json 2>/dev/null | json 'j[0]["state"]')" \
    queued "... down, its command still queued"
"$AS" $OTHER "$XHOME" sh -c "rm -rf $X/keys && chmod -R a+rwX $X && cp -a $X $XHOME/copy"
# while the owner's PILOT_HOME and pilots/ were open to all (made with
# umask 0, say), the other user moved theirs in as p2, and linked p3 to
# the copy; then the owner closed them
chmod 0777 "$OHOME" "$OHOME/pilots"
"$AS" $OTHER "$XHOME" sh -c "mv $X $OHOME/pilots/p2 && ln -s $XHOME/copy $OHOME/pilots/p3"
chmod 0700 "$OHOME" "$OHOME/pilots"

P2=$OHOME/pilots/p2
P3=$OHOME/pilots/p3
capture "$AS" $OWNER "$OHOME" pilot up --local --resume p2 --wait
one_error_line "up --resume of another user's pilot directory: refused, naming its owner" \
    "^pilot: error: $P2 belongs to uid $OTHER_UID, not to you \(uid $OWNER_UID\): use a PILOT_HOME of yours$"
capture "$AS" $OWNER "$OHOME" pilot up --local --resume p3 --wait
one_error_line "up --resume of a pilot directory that is a link: refused" \
    "^pilot: error: $P3 is a symbolic link: not followed \(make it a directory of yours\)$"
capture "$AS" $OWNER "$OHOME" pilot status --pilot p2
one_error_line "status --pilot p2: refused" "$P2 belongs to uid $OTHER_UID"
capture "$AS" $OWNER "$OHOME" pilot submit --pilot p2 -- true
one_error_line "submit --pilot p2: refused" "$P2 belongs to uid $OTHER_UID"
capture "$AS" $OWNER "$OHOME" pilot logs --pilot p3 1
one_error_line "logs --pilot p3: refused" "$P3 is a symbolic link"
capture "$AS" $OWNER "$OHOME" pilot pilots
one_error_line "pilot pilots: refused while they are there" "$OHOME/pilots/p[23] (belongs to|is a symbolic link)"
# what the batch script runs on a restart (pilot.sbatch: pilotd --dir)
CAPTURE_TIMEOUT=10 capture "$AS" $OWNER "$OHOME" pilotd --local --dir "$P2"
ok "pilotd --dir on another user's directory: refused (exit 1)" \
    eval '[[ $RC == 1 && $ERR == "pilotd: error: $P2 belongs to uid $OTHER_UID"* ]]' \
    || diag "exit $RC, stderr: $ERR"
CAPTURE_TIMEOUT=10 capture "$AS" $OWNER "$OHOME" pilotd --local --dir "$P3"
ok "pilotd --dir on a link to one: refused (exit 1)" \
    eval '[[ $RC == 1 && $ERR == "pilotd: error: $P3 is a symbolic link"* ]]' \
    || diag "exit $RC, stderr: $ERR"
nok "the other user's queued command never ran as the owner" \
    wait_for 3 test -e "$PWNED"
[[ -e $PWNED ]] && diag "$PWNED: $(cat "$PWNED")"
ok "... nor was anything of the owner's made in their directories" \
    eval '[[ -z $(find "$P2" "$XHOME/copy" -user $OWNER) ]]'
capture "$AS" $OWNER "$OHOME" pilot status
is "$RC" 0 "the owner's running pilot is found as before (status exits 0)"

capture "$AS" $OWNER "$OHOME" pilot down --pilot p1
is "$RC" 0 "pilot down"
