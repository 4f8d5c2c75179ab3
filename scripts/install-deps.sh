#!/usr/bin/env bash
# scripts/install-deps.sh - install what pilot needs to build, test and run its dev cluster
#
# Usage (as root, Debian 12):
#   scripts/install-deps.sh             everything: build, cluster, MPI, test, demo and bench packages
#   scripts/install-deps.sh --minimal   the same without python3-torch (large, ~1 min to
#                                       install); the torch tests then fail, they never skip
#
# Idempotent. When every package is already installed it only asks dpkg and
# returns (tens of milliseconds, no root needed); otherwise it runs one
# `apt-get update` and one `apt-get install` for the missing packages.
set -euo pipefail

export DEBIAN_FRONTEND=noninteractive

minimal=0
for arg in "$@"; do
    case $arg in
    --minimal) minimal=1 ;;
    -h | --help)
        sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "install-deps: unknown argument '$arg' (usage: $0 [--minimal])" >&2
        exit 2
        ;;
    esac
done

# One group per line of output. Package names are Debian 12 (bookworm) ones.
groups=(build cluster mpi tests demo bench)
declare -A pkgs=(
    # libmicrohttpd: pilotd's metrics server (--metrics-port)
    [build]="gcc make pkg-config libzmq3-dev libuv1-dev libmsgpack-dev libjansson-dev
             libsqlite3-dev sqlite3 libslurm-dev libyaml-dev libmicrohttpd-dev"
    [cluster]="slurm-wlm slurmctld slurmd slurm-client munge iproute2 util-linux procps"
    # the pool: its workers embed Python (python3-dev) for --py functions,
    # with mpi4py's communicators
    [mpi]="libopenmpi-dev openmpi-bin libpmix-dev python3-dev python3-mpi4py"
    # python3 is Debian's /usr/bin/python3, the one python3-torch installs into;
    # clang is for the fuzzers (make fuzz), and libclang-rt-14-dev holds
    # clang 14's libFuzzer and sanitizer runtimes (libclang_rt.fuzzer-x86_64.a):
    # clang-14 only recommends it, and we install without recommends.
    # strace: t0930 counts pilotd's syncs of its WAL; libfaketime:
    # t0850 steps pilotd's wall clock; the Python package binds libpilot
    # through cffi's ABI mode (python3-cffi), pickles with cloudpickle,
    # and its tests are pytest's (tests/py/, t1160); the warm Python
    # workers unpickle calls with cloudpickle too (t1120); snakemake
    # (7.21): t1110 runs a workflow through contrib/snakemake, our profile;
    # tmux: t1220 drives 'pilot top' on a terminal (send-keys, capture-pane);
    # prometheus: t1230 scrapes a pilot's metrics with it and queries them;
    # chromium: t1210 renders pilot report's page headless
    [tests]="python3 clang libclang-rt-14-dev strace libfaketime
             python3-cffi python3-cloudpickle python3-pytest snakemake tmux
             prometheus chromium"
    # the pipeline demo (make demo, and its small version in make check):
    # statsmodels holds the data set (datasets/co2/co2.csv, read from disk,
    # no download), matplotlib draws the plot; the trainings need
    # python3-torch (tests group)
    [demo]="python3-numpy python3-statsmodels python3-matplotlib"
    # make bench: GNU parallel is one of the systems it compares; perf for
    # its --profile
    [bench]="parallel linux-perf"
)
[[ $minimal == 1 ]] || pkgs[tests]+=" python3-torch"

# One dpkg-query for all packages (each call costs about 30 ms): "name status"
# lines, none for a package dpkg has never heard of.
declare -A status
# shellcheck disable=SC2048,SC2086  # split the lists into package names
while read -r name st; do
    status[$name]=$st
done < <(dpkg-query -W -f='${Package} ${Status}\n' ${pkgs[*]} 2>/dev/null || true)

missing=()
for g in "${groups[@]}"; do
    read -r -d '' -a group <<<"${pkgs[$g]}" || true
    group_missing=()
    for p in "${group[@]}"; do
        [[ ${status[$p]:-} == "install ok installed" ]] || group_missing+=("$p")
    done
    note=""
    [[ $g != tests || $minimal == 0 ]] || note=" (--minimal: python3-torch skipped)"
    if [[ ${#group_missing[@]} -eq 0 ]]; then
        echo "install-deps: $g: all ${#group[@]} packages installed$note"
    else
        echo "install-deps: $g: will install ${group_missing[*]}$note"
        missing+=("${group_missing[@]}")
    fi
done

[[ ${#missing[@]} -gt 0 ]] || exit 0

if [[ $(id -u) -ne 0 ]]; then
    echo "install-deps: must run as root to install ${missing[*]}" >&2
    exit 1
fi
t0=$(date +%s)
echo "install-deps: apt-get update"
apt-get -o DPkg::Lock::Timeout=900 update -q >/dev/null
echo "install-deps: apt-get install ${#missing[@]} packages"
apt-get -o DPkg::Lock::Timeout=900 install -y -q --no-install-recommends "${missing[@]}" \
    >/dev/null
echo "install-deps: done in $(($(date +%s) - t0)) s"
