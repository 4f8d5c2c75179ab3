#!/bin/bash
# t1240-vet.sh - node vetting on the dev cluster (docs/observability.md,
# "Node vetting"): a pilot of 3 nodes, all vetted at start; then Y's
# slurmd and agent are CPU-throttled (a cgroup CPU quota: v1
# cpu.cfs_quota_us here, v2 cpu.max where the host has it), X's task
# directory becomes a 16 MiB tmpfs (below the limit), later X loses one
# of its 4 fake GPUs' device files (a tmpfs over the GPU directory, in
# X's own mount namespace): each is cordoned with
# the right check named, tasks go to the other nodes, 'pilot uncordon'
# brings one back and tasks land there, 'pilot vet NODE' vets again (and
# lifts the vetting's cordon once the node is fit), --vetted tasks keep
# off a node whose vetting failed, and ranks that die by signals on a
# node get it vetted again.  Also: a bad vet.yaml is refused with its
# line.  Needs root (mount, nsenter, cgroups); restores all of it.
. "$(dirname "$0")/lib.sh"

plan 31

status_json() {
    pilot status --json 2>/dev/null | json "$1" 2>/dev/null
}
# the vet state of node $1 (ok, failed, running, none)
vet_state() {
    status_json "[n['vet']['state'] for n in j['nodes'] if n['name'] == '$1'][0]"
}
vet_field() {
    status_json "[n['vet'].get('$2') for n in j['nodes'] if n['name'] == '$1'][0]"
}
# all N nodes have a vetting result
all_vetted() {
    [[ $(status_json "sum(1 for n in j['nodes'] if n['vet']['state'] in ('ok', 'failed'))") == "$1" ]]
}
# the nodes tasks $@ ran on, sorted and unique
nodes_of() {
    local id
    for id in "$@"; do
        pilot show "$id" --json 2>/dev/null | json 'j.get("node") or "-"'
    done | sort -u | tr '\n' ' '
}

# --- where the dev cluster keeps things -------------------------------
PIDFILE=$(scontrol show config | awk -F' = ' '/^SlurmdPidFile/ { print $2 }')
GPUFILES=$(awk -F'File=' '/^NodeName=.*Name=gpu.*File=/ { print $2; exit }' \
           /etc/slurm/gres.conf)
GPUDIR=$(dirname "${GPUFILES%% *}")
slurmd_pid() { cat "${PIDFILE//%n/$1}" 2>/dev/null; }
[[ -n $(slurmd_pid n1) && -d $GPUDIR ]] \
    || abort "no dev cluster here (slurmd pid file $PIDFILE, GPUs $GPUDIR)"
# run a command in node $1's mount namespace (its slurmd's)
in_node() {
    local n=$1
    shift
    nsenter --mount --target "$(slurmd_pid "$n")" -- "$@"
}

# --- a bad vet.yaml: refused before anything starts -------------------
printf 'cpu:\n  slices: 2\n  speed: fast\n' >"$WORK/bad.yaml"
capture pilot up --local --vet "$WORK/bad.yaml"
usage_error "pilot up --vet: an unknown key, named with its file and line" \
    "bad.yaml:3: cpu.speed: unknown key"

# the test's checks: the dev cluster's GPU device files; limits a 16 MiB
# tmpfs is below; the CPU check as built in (30% below the median fails:
# the nodes share 2 CPUs here, which the figure does not count)
cat >"$WORK/vet.yaml" <<EOF
gpus:
  devices: $GPUDIR/nvidia%s
disk:
  min_free_mb: 64
memory:
  min_free_mb: 64
revet:
  signals: 3
  window_s: 600
EOF

# --- the pilot: 3 nodes, all vetted at start ---------------------------
T0=$(now)
PILOT_UP_ID=$(run_timeout 400 pilot up --nodes 3 --time 15:00 --wait \
              --wait-timeout 360 --vet "$WORK/vet.yaml" 2>"$WORK/.up.err") \
    || abort "pilot up --nodes 3 failed: $(<"$WORK/.up.err")"
P=$PILOT_UP_ID
PDIR=$(pilot_dir "$P")
ok "the pilot's vet.yaml is the one given" cmp -s "$WORK/vet.yaml" "$PDIR/vet.yaml"
ok "all 3 nodes vetted" wait_for 90 all_vetted 3
diag "3 nodes vetted $(elapsed "$T0" "$(now)") s after pilot up began"
is "$(status_json "' '.join(n['vet']['state'] for n in j['nodes'])")" \
   "ok ok ok" "every node passed its vetting at start"
diag "took (s): $(status_json "' '.join('%s=%.2f' % (n['name'], n['vet'].get('took') or 0) for n in j['nodes'])")"
# A runs pilotd and stays fit; X gets a small disk, then loses a GPU; Y
# is throttled
HOST=$(kv "$PDIR/endpoint" host)
NODES=($(status_json "' '.join(sorted(n['name'] for n in j['nodes']))"))
OTHERS=()
for n in "${NODES[@]}"; do
    [[ $n == "$HOST" ]] || OTHERS+=("$n")
done
((${#OTHERS[@]} == 2)) || abort "nodes ${NODES[*]}, pilotd on '$HOST'"
A=$HOST X=${OTHERS[0]} Y=${OTHERS[1]}
diag "pilotd on $A; $X: small disk, then a GPU hidden; $Y: CPU throttled"

# --- Y: its slurmd and its agent held to 1% of a CPU -------------------
PIDY=$(slurmd_pid "$Y")
AGENTY=$(status_json "[n['pid'] for n in j['nodes'] if n['name'] == '$Y'][0]")
if grep -qw cpu /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
    # cgroup v2: a cgroup of its own under the root, with cpu.max
    ORIG_CG=/sys/fs/cgroup$(awk -F: '$1 == "0" { print $3 }' "/proc/$PIDY/cgroup")
    THR_CG=/sys/fs/cgroup/t1240.$$
    mkdir "$THR_CG" && echo "1000 100000" >"$THR_CG/cpu.max"
else
    # cgroup v1: a child of its cpu cgroup, with a CFS quota
    ORIG_CG=/sys/fs/cgroup/cpu$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ { print $3 }' "/proc/$PIDY/cgroup")
    THR_CG=$ORIG_CG/t1240.$$
    mkdir "$THR_CG" && echo 100000 >"$THR_CG/cpu.cfs_period_us" \
        && echo 1000 >"$THR_CG/cpu.cfs_quota_us"
fi
# every process that landed in it goes back, even when the test fails
cleanup_hook 'for p in $(cat "$THR_CG/cgroup.procs" 2>/dev/null); do
                  echo "$p" >"$ORIG_CG/cgroup.procs"; done; rmdir "$THR_CG"'
echo "$PIDY" >"$THR_CG/cgroup.procs" && echo "$AGENTY" >"$THR_CG/cgroup.procs" \
    || abort "cannot move $Y's slurmd and agent to $THR_CG"
diag "$Y's slurmd (pid $PIDY) and agent (pid $AGENTY) in $THR_CG: 1% of a CPU"

# --- X: its task directory a 16 MiB tmpfs (its own mount namespace) ----
mkdir -p "$PDIR/tasks"
in_node "$X" mount -t tmpfs -o size=16m,mode=0700 tmpfs "$PDIR/tasks" \
    || abort "cannot mount a tmpfs on $X's $PDIR/tasks"
cleanup_hook 'in_node "$X" umount "$PDIR/tasks" 2>/dev/null || true'

capture pilot vet --json
is "$RC" 3 "pilot vet (all nodes): exit 3, a node failed"
is "$(echo "$OUT" | json "' '.join(r['node'] + ':' + r['state'] for r in sorted(j, key=lambda r: r['node']))")" \
   "$(for n in "${NODES[@]}"; do
          [[ $n == "$A" ]] && printf '%s:ok ' "$n" || printf '%s:failed ' "$n"
      done | sed 's/ $//')" "... $X and $Y failed, $A passed"
like "$(echo "$OUT" | json "[c for r in j if r['node'] == '$X' for c in r['checks'] if not c['ok']][0]")" \
     "\"name\": \"disk\".*\"figure\": 1[0-6]\.0.*\"limit\": 64\.0.*$PDIR/tasks: " \
     "$X failed the disk check of its task directory: ~16 MiB, limit 64"
like "$(echo "$OUT" | json "[c['name'] for r in j if r['node'] == '$Y' for c in r['checks'] if not c['ok']]")" \
     '^\["cpu"\]$' "$Y failed the cpu check alone"
like "$(vet_field "$X" cordon)" '^vet: disk 1[0-6] MiB \(limit 64 MiB\)$' \
     "$X cordoned: disk, its figure and limit"
like "$(vet_field "$Y" cordon)" '^vet: cpu [0-9.]+ Mop/s \(limit [0-9.]+ Mop/s\)$' \
     "$Y cordoned: cpu, its figure and limit"
capture pilot status
like "$OUT" "$Y +up .*failed: cpu [0-9.]+ Mop/s < [0-9.]+" \
     "pilot status: $Y's vetting failed, cpu and its figure"
like "$OUT" "$X cordoned: vet: disk" "pilot status: $X's cordon"
for n in "${NODES[@]}"; do
    diag "$n: $(status_json "[n['vet'] for n in j['nodes'] if n['name'] == '$n'][0]")"
done

# --- tasks go to the one node left ---------------------------------------
IDS=()
for i in 1 2 3 4 5 6; do
    IDS+=("$(pilot submit -- sleep 0.2 2>/dev/null)")
done
capture pilot wait "${IDS[@]}" --timeout 60
is "$RC" 0 "6 tasks done"
is "$(nodes_of "${IDS[@]}")" "$A " "... all on $A, the one node not cordoned"

# --- uncordon Y: tasks land there again ----------------------------------
capture pilot uncordon "$Y"
like "$OUT" "^$Y uncordoned \\(was: vet: cpu " "pilot uncordon $Y, with the cordon it lifted"
capture pilot uncordon "$Y"
is "$OUT/$RC" "$Y was not cordoned/0" "... again: it says it was not cordoned"
IDS=()
for i in 1 2; do
    IDS+=("$(pilot submit --exclusive -- sleep 2 2>/dev/null)")
done
capture pilot wait "${IDS[@]}" --timeout 60
is "$(nodes_of "${IDS[@]}")" "$(printf '%s\n' "$A" "$Y" | sort | tr '\n' ' ')" \
   "two whole-node tasks: on $A and on $Y"
# --vetted: Y's vetting failed, so not there; A's passed
IDS=()
for i in 1 2; do
    IDS+=("$(pilot submit --exclusive --vetted=10 -- sleep 1 2>/dev/null)")
done
capture pilot wait "${IDS[@]}" --timeout 60
is "$(nodes_of "${IDS[@]}")" "$A " \
   "two --vetted tasks: both on $A, none on $Y (its vetting failed)"

# --- X: the disk back, a GPU gone ----------------------------------------
in_node "$X" umount "$PDIR/tasks"
in_node "$X" sh -c "mount -t tmpfs -o mode=0755 tmpfs '$GPUDIR' &&
    for i in 0 1 2; do mknod -m 666 '$GPUDIR'/nvidia\$i c 195 \$i; done" \
    || abort "cannot hide a GPU of $X"
cleanup_hook 'in_node "$X" umount "$GPUDIR" 2>/dev/null || true'
ok "the other nodes still see the 4th GPU's file" test -e "$GPUDIR/nvidia3"
capture pilot vet "$X" --json
is "$RC" 3 "pilot vet $X with a GPU hidden: exit 3"
like "$(echo "$OUT" | json "[c for r in j for c in r['checks'] if not c['ok']]")" \
     '^\[\{"name": "gpus", "ok": false, "figure": 3\.0, "unit": "gpus", "limit": 4\.0, "detail": "3 of the 4 Slurm granted \(0,1,2,3\) usable: [^"]*/nvidia3: No such file or directory"\}\]$' \
     "$X failed the gpus check alone: 3 of the 4 Slurm granted, nvidia3 named"
like "$(vet_field "$X" cordon)" '^vet: gpus 3 gpus \(limit 4 gpus\)$' \
     "$X cordoned: gpus, 3 of 4"

# --- X fixed: pilot vet lifts the vetting's cordon -----------------------
in_node "$X" umount "$GPUDIR"
capture pilot vet "$X"
is "$RC" 0 "pilot vet $X once fixed: exit 0"
like "$OUT" "^$X: ok in [0-9.]+ s" "... $X: ok"
is "$(vet_field "$X" cordon)" null "... and its cordon is lifted"

# --- cordon by hand: a vetting that passes keeps it ----------------------
capture pilot cordon "$X" --reason "ECC errors"
is "$OUT" "$X cordoned: ECC errors" "pilot cordon $X --reason"
capture pilot vet "$X"
is "$(vet_field "$X" cordon)" "ECC errors" \
   "... a passing vetting keeps a cordon given by hand"

# --- ranks dead by signals: the node is vetted again ---------------------
pilot cordon "$A" >/dev/null
pilot cordon "$Y" >/dev/null
pilot uncordon "$X" >/dev/null
BEFORE=$(vet_field "$X" time)
IDS=()
for i in 1 2 3; do
    IDS+=("$(pilot submit --retries 0 -- sh -c 'kill -SEGV $$' 2>/dev/null)")
done
pilot wait "${IDS[@]}" --timeout 60 >/dev/null 2>&1
is "$(nodes_of "${IDS[@]}")" "$X " "3 tasks killed by SIGSEGV, on $X"
revetted() { [[ $(vet_field "$X" time) != "$BEFORE" && $(vet_state "$X") == ok ]]; }
ok "$X vetted again after 3 ranks died by a signal" wait_for 30 revetted
like "$(cat "$PDIR/logs/pilotd.log")" "$X: 3 ranks ended by a signal within 600 s: vetting it again" \
     "... and pilotd's log says why"

capture pilot down
is "$RC" 0 "pilot down"
