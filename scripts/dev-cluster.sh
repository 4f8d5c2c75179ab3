#!/usr/bin/env bash
# scripts/dev-cluster.sh - a real multi-node Slurm cluster on this one machine, for tests
#
# Usage (as root; Debian 12, no systemd needed):
#   scripts/dev-cluster.sh start           create what is missing, wait until all nodes are
#                                          idle; returns at once when the cluster is healthy
#   scripts/dev-cluster.sh status          exit 0 only if munged, slurmctld and every slurmd
#                                          are alive and sinfo shows every node responding
#                                          and usable (not down or drained)
#   scripts/dev-cluster.sh stop [--purge]  cancel jobs, stop daemons, remove namespaces,
#                                          bridge and /etc/hosts block; --purge also deletes
#                                          Slurm state, spool, logs and generated configs
#   scripts/dev-cluster.sh restart         stop, then start (needed after changing settings)
#   scripts/dev-cluster.sh selftest        multi-node, connect-back, GPU and MPI checks
#   scripts/dev-cluster.sh node-down N     fault injection: cut node nN off the network
#   scripts/dev-cluster.sh node-up N       reconnect nN and have it re-register at once
#
# Layout. Each compute node nN is a network + UTS + mount namespace: its own
# IP (SUBNET.(10+N) on bridge plcbr0), its own hostname, a private /dev/shm and a
# private directory for Slurm's TmpFS (where PMIx puts its per-step files). The
# rest of the filesystem, /tmp included, is shared like a cluster filesystem,
# so jobs may be submitted from anywhere (a checkout under /tmp too). slurmctld
# runs in the host network namespace under hostname "slurmctl" (its own UTS
# namespace) on SUBNET.1. One munged serves everyone. Fake GPUs are character
# devices (major 195) that no driver backs. The recipe, its pitfalls and its
# measurements: reference/slurm-local.md.
#
# Settings (environment; after changing one use restart):
#   PL_CLUSTER_NODES=4        compute nodes n1..nN (1..200)
#   PL_CLUSTER_CPUS=4         CPUs per node (may exceed the real cores)
#   PL_CLUSTER_GPUS=4         fake GPUs per node (0: no GRES)
#   PL_CLUSTER_MEM=4096       RealMemory per node, MB
#   PL_CLUSTER_SUBNET=10.199.0           /24 prefix of the private network
#   PL_CLUSTER_CONSTRAIN_DEVICES=yes     with task/cgroup: fence GPUs, so steps see
#                             CUDA_VISIBLE_DEVICES renumbered from 0 (as on production
#                             clusters); "no" shows the global indices instead
#
# Files: configs in /etc/slurm, logs in /var/log/pilot-cluster (slurmctld.log,
# slurmd-nN.log), state in /var/lib/pilot-cluster, pid files in /run/pilot-cluster.
set -euo pipefail
PATH=$PATH:/usr/sbin:/sbin

NODES=${PL_CLUSTER_NODES:-4}
CPUS=${PL_CLUSTER_CPUS:-4}
GPUS=${PL_CLUSTER_GPUS:-4}
MEM=${PL_CLUSTER_MEM:-4096}
SUBNET=${PL_CLUSTER_SUBNET:-10.199.0}

CTL_HOST=slurmctl
CTL_IP=$SUBNET.1
BRIDGE=plcbr0
CONF_DIR=/etc/slurm
RUN_DIR=/run/pilot-cluster
STATE_DIR=/var/lib/pilot-cluster
SPOOL_DIR=/var/spool/pilot-cluster
LOG_DIR=/var/log/pilot-cluster
GPU_DIR=$RUN_DIR/gpu
# Slurm's TmpFS; each node mounts its own directory of $SPOOL_DIR/tmp here
NODE_TMPFS=$RUN_DIR/nodetmp
MUNGE_OURS=$RUN_DIR/munged.ours
HOSTS_BEGIN="# BEGIN pilot dev-cluster"
HOSTS_END="# END pilot dev-cluster"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

say() { echo "dev-cluster: $*" >&2; }
die() {
    say "error: $*"
    exit 1
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }

[[ $NODES =~ ^[0-9]+$ && $NODES -ge 1 && $NODES -le 200 ]] ||
    die "PL_CLUSTER_NODES=$NODES: want 1..200"
[[ $CPUS =~ ^[1-9][0-9]*$ && $GPUS =~ ^[0-9]+$ && $MEM =~ ^[1-9][0-9]*$ ]] ||
    die "PL_CLUSTER_CPUS, _GPUS and _MEM must be numbers"
[[ $SUBNET =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "PL_CLUSTER_SUBNET=$SUBNET: want a.b.c"

node_ip() { echo "$SUBNET.$((10 + $1))"; }
netns() { echo "plc-n$1"; }

# cgroup v1 with a writable freezer (this kind of VM): proctrack/cgroup kills
# every process of a job, double-forked ones too, and task/cgroup fences the
# fake GPUs. Elsewhere fall back to linuxproc, which can leak escaped children
# (stop still kills them through the network namespaces).
if [[ -d /sys/fs/cgroup/freezer && -w /sys/fs/cgroup/freezer ]]; then
    PROCTRACK=proctrack/cgroup
    TASK=task/cgroup
    CONSTRAIN_DEVICES=${PL_CLUSTER_CONSTRAIN_DEVICES:-yes}
else
    PROCTRACK=proctrack/linuxproc
    TASK=task/none
    CONSTRAIN_DEVICES=no
fi

# ------------------------------------------------------------ processes

# Prints the state of process $1 (R, S, T, Z...); fails if there is none.
proc_state() {
    local stat
    [[ $1 =~ ^[0-9]+$ ]] && read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
    stat=${stat##*) }
    echo "${stat%% *}"
}

# Succeeds if pid $1 runs the program named $2. N.B. a killed daemon stays a
# zombie until PID 1 reaps it, which can take seconds in a VM, and kill -0
# succeeds on a zombie: read the state from /proc instead.
running() {
    local state comm
    state=$(proc_state "$1") && [[ $state != Z ]] &&
        read -r comm 2>/dev/null <"/proc/$1/comm" && [[ $comm == "$2" ]]
}

pid_of() {
    local pid=""
    read -r pid 2>/dev/null <"$1" || true
    echo "$pid"
}

# Waits up to $1 tenths of a second for the pids after it to be gone or zombies.
gone_within() {
    local tenths=$1 pid t
    shift
    for ((t = 0; t <= tenths; t++)); do
        for pid; do
            if [[ $(proc_state "$pid") =~ ^[^Z]$ ]]; then
                sleep 0.1
                continue 2
            fi
        done
        return 0
    done
    return 1
}

# Ends the given processes: TERM (and CONT, for stopped ones), then KILL.
terminate() {
    [[ $# -gt 0 ]] || return 0
    kill -TERM "$@" 2>/dev/null || true
    kill -CONT "$@" 2>/dev/null || true
    gone_within 50 "$@" && return 0
    kill -KILL "$@" 2>/dev/null || true
    gone_within 50 "$@"
}
munge_ok() { munge -n 2>/dev/null | unmunge >/dev/null 2>&1; }
ctld_pid() { pid_of "$RUN_DIR/slurmctld.pid"; }
slurmd_pid() { pid_of "$RUN_DIR/slurmd-n$1.pid"; }

# ------------------------------------------------------------ configuration

node_range() { if [[ $NODES == 1 ]]; then echo n1; else echo "n[1-$NODES]"; fi; }

slurm_conf() {
    local addrs="$SUBNET.[11-$((10 + NODES))]" gres=""
    [[ $NODES != 1 ]] || addrs=$(node_ip 1)
    [[ $GPUS == 0 ]] || gres="Gres=gpu:$GPUS"
    cat <<EOF
# generated by scripts/dev-cluster.sh; edit the script, not this file
ClusterName=local
# must equal slurmctld's gethostname(): it runs in a UTS namespace named so
SlurmctldHost=$CTL_HOST($CTL_IP)
SlurmUser=slurm
AuthType=auth/munge
CredType=cred/munge
SlurmctldPort=6817
SlurmdPort=6818
StateSaveLocation=$STATE_DIR
SlurmdSpoolDir=$SPOOL_DIR/%n
# private per node (bind mount): PMIx creates the same names on every node
TmpFS=$NODE_TMPFS
SlurmctldPidFile=$RUN_DIR/slurmctld.pid
SlurmdPidFile=$RUN_DIR/slurmd-%n.pid
SlurmctldLogFile=$LOG_DIR/slurmctld.log
SlurmdLogFile=$LOG_DIR/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ProctrackType=$PROCTRACK
TaskPlugin=$TASK
MpiDefault=none
# the nodes claim more CPUs and memory than the machine has; keep them up
SlurmdParameters=config_overrides
ReturnToService=2
SchedulerType=sched/backfill
# Slurm's default (3) starts batch jobs on a 3 s tick
SchedulerParameters=batch_sched_delay=0
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=300
KillWait=5
Waittime=0
GresTypes=gpu
NodeName=$(node_range) NodeAddr=$addrs CPUs=$CPUS Sockets=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=$MEM $gres State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO
EOF
}

gres_conf() {
    echo "# generated by scripts/dev-cluster.sh: fake GPUs, no NVML"
    echo "AutoDetect=off"
    [[ $GPUS == 0 ]] || echo "NodeName=$(node_range) Name=gpu File=$GPU_DIR/nvidia[0-$((GPUS - 1))]"
}

cgroup_conf() {
    cat <<EOF
# generated by scripts/dev-cluster.sh
CgroupPlugin=autodetect
ConstrainCores=no
ConstrainDevices=$CONSTRAIN_DEVICES
ConstrainRAMSpace=no
EOF
}

# Succeeds if the config files on disk are the ones these settings give.
conf_current() {
    [[ $(cat "$CONF_DIR/slurm.conf" 2>/dev/null) == "$(slurm_conf)" &&
        $(cat "$CONF_DIR/gres.conf" 2>/dev/null) == "$(gres_conf)" &&
        $(cat "$CONF_DIR/cgroup.conf" 2>/dev/null) == "$(cgroup_conf)" ]]
}

write_conf() {
    mkdir -p "$CONF_DIR" "$RUN_DIR" "$STATE_DIR" "$SPOOL_DIR/tmp" "$LOG_DIR" "$GPU_DIR" \
        "$NODE_TMPFS"
    chown slurm:slurm "$STATE_DIR" "$LOG_DIR"
    slurm_conf >"$CONF_DIR/slurm.conf"
    gres_conf >"$CONF_DIR/gres.conf"
    cgroup_conf >"$CONF_DIR/cgroup.conf"
    local g
    for ((g = 0; g < GPUS; g++)); do
        # slurmd rejects regular files ("is not a valid character or block
        # device"); nothing ever opens these (no driver: ENXIO)
        [[ -c $GPU_DIR/nvidia$g ]] || {
            rm -f "$GPU_DIR/nvidia$g"
            mknod -m 666 "$GPU_DIR/nvidia$g" c 195 "$g"
        }
    done
}

# ------------------------------------------------------------ network

link_exists() { ip link show "$1" >/dev/null 2>&1; }

# Creates the bridge and every node's namespace and veth pair, as far as they
# are missing, and brings all links up. Prints the numbers of nodes whose
# eth0 was down (node-down): their slurmd must re-register.
net_up() {
    link_exists "$BRIDGE" || ip link add "$BRIDGE" type bridge
    ip -br addr show dev "$BRIDGE" | grep -q " $CTL_IP/24" ||
        ip addr add "$CTL_IP/24" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    # N.B. with br_netfilter loaded and an iptables FORWARD policy of DROP
    # (Docker does that), bridged traffic between nodes is dropped; then
    # iptables -I FORWARD -i plcbr0 -o plcbr0 -j ACCEPT
    local i ns
    for ((i = 1; i <= NODES; i++)); do
        ns=$(netns "$i")
        [[ -e /run/netns/$ns ]] || ip netns add "$ns"
        link_exists "plcv$i" || ip link add "plcv$i" type veth peer name eth0 netns "$ns"
        ip link set "plcv$i" master "$BRIDGE" up
        ip -n "$ns" link set lo up
        ip -n "$ns" -br addr show dev eth0 | grep -q " $(node_ip "$i")/24" ||
            ip -n "$ns" addr add "$(node_ip "$i")/24" dev eth0
        if ! ip -n "$ns" link show eth0 | grep -qE '<([^>]*,)?UP[,>]'; then
            ip -n "$ns" link set eth0 up
            echo "$i"
        fi
        ip -n "$ns" route show default | grep -q . ||
            ip -n "$ns" route add default via "$CTL_IP"
    done
}

net_down() {
    local ns link
    for ns in $(ip netns list | awk '$1 ~ /^plc-n[0-9]+$/ {print $1}'); do
        ip netns del "$ns"
    done
    # deleting a namespace deletes its veth peers; this is for half-made ones
    for link in $(ip -o link show | awk -F': ' '{sub(/@.*/, "", $2); print $2}' |
        grep -E '^plcv[0-9]+$'); do
        ip link del "$link" 2>/dev/null || true
    done
    if link_exists "$BRIDGE"; then ip link del "$BRIDGE"; fi
}

# /etc/hosts may be a bind mount: rewrite it in place, never replace it.
hosts_block() {
    echo "$HOSTS_BEGIN"
    echo "$CTL_IP $CTL_HOST"
    local i
    for ((i = 1; i <= NODES; i++)); do echo "$(node_ip "$i") n$i"; done
    echo "$HOSTS_END"
}

hosts_remove() {
    grep -qxF "$HOSTS_BEGIN" /etc/hosts || return 0
    local rest
    rest=$(sed "/^$HOSTS_BEGIN\$/,/^$HOSTS_END\$/d" /etc/hosts)
    printf '%s\n' "$rest" >/etc/hosts
}

hosts_add() {
    local block
    block=$(hosts_block)
    [[ $(sed -n "/^$HOSTS_BEGIN\$/,/^$HOSTS_END\$/p" /etc/hosts) != "$block" ]] || return 0
    hosts_remove
    # a last line without its newline would swallow our first line
    [[ ! -s /etc/hosts || -z $(tail -c 1 /etc/hosts) ]] || echo >>/etc/hosts
    echo "$block" >>/etc/hosts
}

# ------------------------------------------------------------ daemons

munge_up() {
    munge_ok && return 0
    if [[ ! -s /etc/munge/munge.key ]]; then
        say "creating /etc/munge/munge.key"
        mungekey --create --keyfile=/etc/munge/munge.key
        chown munge:munge /etc/munge/munge.key
        chmod 600 /etc/munge/munge.key
    fi
    # no systemd: nothing creates /run/munge for us
    install -d -o munge -g munge -m 755 /run/munge
    runuser -u munge -- munged 9>&-
    touch "$MUNGE_OURS"
    local t
    for ((t = 0; t < 50; t++)); do
        munge_ok && return 0
        sleep 0.1
    done
    die "munged does not answer"
}

ctld_up() {
    running "$(ctld_pid)" slurmctld && return 0
    # shellcheck disable=SC2016  # $1 is sh's
    unshare --uts -- sh -c 'hostname "$1" && exec slurmctld' sh "$CTL_HOST" 9>&-
}

# Starts node $1's slurmd in the node's namespaces. N.B. nsenter, not
# `ip netns exec`: that remounts /sys, which hides /sys/fs/cgroup, and
# slurmd 22.05 then refuses to start.
slurmd_up() {
    local i=$1 name=n$1
    running "$(slurmd_pid "$i")" slurmd && return 0
    mkdir -p "$SPOOL_DIR/$name" "$SPOOL_DIR/tmp/$name"
    chmod 1777 "$SPOOL_DIR/tmp/$name"
    # shellcheck disable=SC2016  # $1.. are sh's
    nsenter --net="/run/netns/$(netns "$i")" \
        unshare --uts --mount --propagation slave -- sh -c '
            hostname "$1" &&
            mount --bind "$2" "$3" &&
            mount -t tmpfs -o mode=1777,size=1g tmpfs /dev/shm &&
            exec slurmd -N "$1"' \
        sh "$name" "$SPOOL_DIR/tmp/$name" "$NODE_TMPFS" 9>&-
}

slurmd_restart() {
    local pid
    pid=$(slurmd_pid "$1")
    if running "$pid" slurmd; then terminate "$pid" || true; fi
    slurmd_up "$1"
}

# Prints "name state" for every node sinfo knows; state as %T prints it
# ("idle", "mixed", "down*": a trailing * means not responding).
node_states() { sinfo -h -N -o '%N %T' 2>/dev/null | sort -u; }

usable_state() { [[ $1 =~ ^(idle|mixed|allocated|completing|planned|reserved)$ ]]; }

# Waits until nodes $2.. are usable, for at most $1 seconds. Responding nodes
# that are down or drained (left so by an earlier run or node-down) are
# resumed; a node still not responding after 5 s gets its slurmd restarted.
wait_usable() {
    local limit=$1 t0 waited restarted="" name state i bad
    shift
    t0=$(now_ms)
    while :; do
        declare -A st=()
        while read -r name state; do st[$name]=$state; done < <(node_states)
        bad=()
        for i; do usable_state "${st[n$i]:-}" || bad+=("$i"); done
        [[ ${#bad[@]} -gt 0 ]] || return 0
        waited=$(($(now_ms) - t0))
        ((waited < limit * 1000)) || {
            sinfo -N -o '%N %T %E' >&2 || true
            die "nodes not usable after ${limit} s; see $LOG_DIR"
        }
        local resume=()
        for i in "${bad[@]}"; do
            state=${st[n$i]:-}
            case $state in
            *\*) if ((waited > 5000)) && [[ " $restarted " != *" $i "* ]]; then
                say "n$i does not respond: restarting its slurmd"
                slurmd_restart "$i"
                restarted+=" $i"
            fi ;;
            down | drain* | fail*) resume+=("n$i") ;;
            esac
        done
        if [[ ${#resume[@]} -gt 0 ]]; then
            (IFS=, && scontrol update nodename="${resume[*]}" state=resume) \
                >/dev/null 2>&1 || true
        fi
        sleep 0.1
    done
}

# Succeeds if the cluster is complete and healthy; with -v says what is not.
healthy() {
    local verbose=${1:-} ok=0 i pid name state
    report() { [[ -z $verbose ]] || echo "$*"; }
    if munge_ok; then report "munged: ok"; else
        report "munged: not answering"
        ok=1
    fi
    pid=$(ctld_pid)
    if running "$pid" slurmctld; then report "slurmctld: running (pid $pid)"; else
        report "slurmctld: not running"
        ok=1
    fi
    declare -A st=()
    if [[ $ok == 0 ]]; then
        while read -r name state; do st[$name]=$state; done < <(node_states)
    fi
    for ((i = 1; i <= NODES; i++)); do
        name=n$i
        pid=$(slurmd_pid "$i")
        state=${st[$name]:-unknown}
        if ! running "$pid" slurmd; then
            report "$name: slurmd not running"
            ok=1
        elif ! usable_state "$state"; then
            report "$name: slurmd pid $pid, node $state"
            ok=1
        else
            report "$name: slurmd pid $pid, node $state, $(node_ip "$i")"
        fi
    done
    return $ok
}

# ------------------------------------------------------------ commands

# Checks for root and serialises the commands that change the cluster (two
# `make check` at once both find it down and both start it). N.B. daemons
# must be started with 9>&-, or they hold the lock for ever.
need_root() {
    [[ $(id -u) == 0 ]] || die "run me as root"
    [[ -z ${locked:-} ]] || return 0
    exec 9>/run/pilot-cluster.lock
    flock -w 300 9 || die "another dev-cluster.sh holds /run/pilot-cluster.lock"
    locked=1
}

need_tools() {
    if ! command -v slurmctld >/dev/null; then
        say "Slurm is not installed: running scripts/install-deps.sh"
        bash "$HERE/install-deps.sh" 9>&-
    fi
    local tool missing=()
    for tool in slurmd sinfo srun scontrol munged munge mungekey ip nsenter unshare runuser; do
        command -v "$tool" >/dev/null || missing+=("$tool")
    done
    [[ ${#missing[@]} -eq 0 ]] ||
        die "missing ${missing[*]}: run scripts/install-deps.sh (as root)"
}

cmd_start() {
    need_root
    if running "$(ctld_pid)" slurmctld && ! conf_current; then
        die "the running cluster has other settings: use restart"
    fi
    healthy && return 0
    need_tools
    local t0 i relink
    t0=$(now_ms)
    write_conf
    relink=$(net_up)
    hosts_add
    munge_up
    ctld_up
    for ((i = 1; i <= NODES; i++)); do
        # a node that was cut off re-registers only on slurmctld's next ping
        # (about 75 s): a fresh slurmd registers at once
        if [[ " ${relink//$'\n'/ } " == *" $i "* ]]; then
            slurmd_restart "$i"
        else
            slurmd_up "$i"
        fi
    done
    wait_usable 30 $(seq "$NODES")
    say "$NODES nodes idle in $(($(now_ms) - t0)) ms"
}

cmd_status() {
    local rc=0
    healthy -v || rc=1
    [[ $rc == 0 ]] && echo "cluster: ok" || echo "cluster: not ok"
    return $rc
}

cmd_stop() {
    need_root
    local purge=${1:-} pid pids jobs f ns d i
    [[ -z $purge || $purge == --purge ]] || die "stop: unknown option $purge"
    if running "$(ctld_pid)" slurmctld; then
        jobs=$(squeue -h -o %i 2>/dev/null || true)
        if [[ -n $jobs ]]; then
            # shellcheck disable=SC2086
            scancel $jobs 2>/dev/null || true
            for ((i = 0; i < 100; i++)); do
                [[ -n $(squeue -h -o %i 2>/dev/null) ]] || break
                sleep 0.1
            done
        fi
    fi
    # every slurmd with a pid file, even of nodes beyond PL_CLUSTER_NODES
    pids=()
    for f in "$RUN_DIR"/slurmd-*.pid; do
        [[ -e $f ]] || continue
        pid=$(pid_of "$f")
        if running "$pid" slurmd; then pids+=("$pid"); fi
        rm -f "$f"
    done
    terminate "${pids[@]}" || true
    # whatever is left in the nodes (escaped job processes) is ours too
    for ns in $(ip netns list | awk '$1 ~ /^plc-n[0-9]+$/ {print $1}'); do
        # shellcheck disable=SC2046
        terminate $(ip netns pids "$ns") || true
    done
    pid=$(ctld_pid)
    if running "$pid" slurmctld; then terminate "$pid" || true; fi
    rm -f "$RUN_DIR/slurmctld.pid"
    if [[ -e $MUNGE_OURS ]]; then
        pid=$(pid_of /run/munge/munged.pid)
        if running "$pid" munged; then terminate "$pid" || true; fi
        rm -f "$MUNGE_OURS"
    fi
    net_down
    hosts_remove
    # the per-node cgroup v1 trees slurmd made (slurm_nN/uid_*/job_*/step_*)
    for d in /sys/fs/cgroup/*/slurm_n[0-9]*; do
        if [[ -d $d ]]; then find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true; fi
    done
    if [[ $purge == --purge ]]; then
        rm -rf "$STATE_DIR" "$SPOOL_DIR" "$LOG_DIR" "$RUN_DIR"
        rm -f "$CONF_DIR/slurm.conf" "$CONF_DIR/gres.conf" "$CONF_DIR/cgroup.conf"
    fi
    leftovers
}

# Fails, saying what, if stop left anything of ours behind.
leftovers() {
    local left=()
    local name pid
    for name in slurmctld slurmd slurmstepd; do
        for pid in $(pgrep -x "$name" || true); do
            running "$pid" "$name" && left+=("$name $pid")
        done
    done
    [[ -z $(ip netns list | awk '$1 ~ /^plc-n[0-9]+$/') ]] || left+=("network namespaces")
    ! link_exists "$BRIDGE" || left+=("bridge $BRIDGE")
    ! grep -qxF "$HOSTS_BEGIN" /etc/hosts || left+=("/etc/hosts block")
    [[ ${#left[@]} -eq 0 ]] || die "stop left behind: ${left[*]}"
    say "stopped"
}

node_arg() {
    [[ ${1:-} =~ ^[0-9]+$ && $1 -ge 1 && $1 -le $NODES ]] ||
        die "want a node number 1..$NODES"
}

cmd_node_down() {
    need_root
    node_arg "${1:-}"
    # slurmctld marks the node down after SlurmdTimeout (30 s) plus a ping
    # interval, about 45 s; its jobs end with NODE_FAIL and batch jobs are
    # requeued unless submitted with --no-requeue
    ip -n "$(netns "$1")" link set eth0 down
}

cmd_node_up() {
    need_root
    node_arg "${1:-}"
    ip -n "$(netns "$1")" link set eth0 up
    slurmd_restart "$1"
    wait_usable 30 "$1"
}

# ------------------------------------------------------------ selftest

# Waits for job $1 to leave the queue, for at most $2 seconds.
wait_job() {
    local t
    for ((t = 0; t < $2 * 10; t++)); do
        [[ -n $(squeue -h -j "$1" -o %i 2>/dev/null) ]] || return 0
        sleep 0.1
    done
    scancel "$1" 2>/dev/null || true
    return 1
}

cmd_selftest() {
    local fail=0 dir tmpdir out n rc
    healthy || die "the cluster is not running: scripts/dev-cluster.sh start"
    dir=$(mktemp -d /var/tmp/pilot-cluster-selftest.XXXXXX)
    tmpdir=$(mktemp -d /tmp/pilot-cluster-selftest.XXXXXX)
    cd "$dir"
    verdict() {
        if [[ $2 == 0 ]]; then echo "PASS $1"; else
            echo "FAIL $1"
            fail=1
        fi
    }

    # 1. one task per node, each under its own hostname
    n=$((NODES < 4 ? NODES : 4))
    out=$(timeout 60 srun -N"$n" -t 1 hostname 2>&1 | sort -u | paste -sd' ') || true
    rc=0
    [[ $(wc -w <<<"$out") == "$n" && $out != *srun* ]] || rc=1
    verdict "srun-N$n-hostname ($out)" $rc

    # 2. the pilot pattern: a server in the batch step, srun clients on every
    #    node connecting back to it over TCP
    n=$((NODES < 2 ? NODES : 2))
    cat >connect.sbatch <<'EOF'
#!/bin/bash
python3 - <<'PY' &
import socket
s = socket.create_server((socket.gethostname(), 0))
open("port.tmp", "w").write(str(s.getsockname()[1]))
__import__("os").rename("port.tmp", "port")
peers = []
for _ in range(int(__import__("os").environ["SLURM_JOB_NUM_NODES"])):
    c, _addr = s.accept()
    peers.append(c.recv(64).decode())
    c.close()
print("server", socket.gethostname(), "peers", " ".join(sorted(peers)))
PY
while [ ! -e port ]; do sleep 0.05; done
head=$(hostname)
srun --ntasks-per-node=1 python3 -c "
import socket
c = socket.create_connection(('$head', $(cat port)), timeout=10)
c.sendall(socket.gethostname().encode())"
wait
EOF
    local job
    rc=0
    job=$(sbatch --parsable -N"$n" -t 2 --no-requeue -o connect.out connect.sbatch) &&
        wait_job "$job" 60 &&
        [[ $(grep -o 'peers .*' connect.out | wc -w) == $((n + 1)) ]] || rc=1
    verdict "batch-N$n-connect-back ($(grep -h . connect.out 2>/dev/null | tail -1))" $rc

    # 3. fake GPUs
    if [[ $GPUS -ge 2 ]]; then
        out=$(timeout 60 srun -N1 -t 1 --gres=gpu:2 printenv SLURM_STEP_GPUS 2>&1) || true
        rc=0
        [[ $out =~ ^[0-9]+,[0-9]+$ ]] || rc=1
        verdict "srun-gres-gpu:2 (SLURM_STEP_GPUS=$out)" $rc
    fi

    # 4. MPI over PMIx across nodes, from the shared /var/tmp and from /tmp
    n=$((NODES < 3 ? NODES : 3))
    cat >hello_mpi.c <<'EOF'
#include <mpi.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, size, sum = 0;
    char host[256];

    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    gethostname(host, sizeof(host));
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("rank %d/%d on %s sum %d\n", rank, size, host, sum);
    MPI_Finalize();
    return 0;
}
EOF
    local where want=$((n * (n - 1) / 2))
    for where in "$dir" "$tmpdir"; do
        out=""
        if mpicc -o "$where/hello_mpi" hello_mpi.c; then
            out=$(cd "$where" && OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
                timeout 120 srun -N"$n" -n"$n" -t 2 --mpi=pmix ./hello_mpi 2>&1) || true
        fi
        echo "$out" >"$dir/mpi-${where##*/}.out"
        rc=0
        [[ $(grep -c " sum $want\$" <<<"$out") == "$n" &&
            $(grep -o ' on [^ ]*' <<<"$out" | sort -u | wc -l) == "$n" ]] || rc=1
        verdict "mpi-pmix-n$n-from-${where%/*} ($(grep -o ' on [^ ]*' <<<"$out" |
            sort -u | awk '{print $2}' | paste -sd,), sum $want)" $rc
    done

    cd /
    if [[ $fail == 0 ]]; then
        rm -rf "$dir" "$tmpdir"
    else
        say "outputs kept in $dir and $tmpdir"
    fi
    return $fail
}

case ${1:-} in
start) cmd_start ;;
stop) cmd_stop "${2:-}" ;;
restart)
    cmd_stop
    cmd_start
    ;;
status) cmd_status ;;
selftest) cmd_selftest ;;
node-down) cmd_node_down "${2:-}" ;;
node-up) cmd_node_up "${2:-}" ;;
*)
    echo "usage: $0 start|stop [--purge]|restart|status|selftest|node-down N|node-up N" >&2
    exit 2
    ;;
esac
