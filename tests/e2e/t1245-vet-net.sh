#!/bin/bash
# t1245-vet-net.sh - node vetting's GPU and cross-node checks on the dev
# cluster (docs/observability.md, "Node vetting"): a pilot of 2 nodes
# whose vet.yaml asks for the net check at start (net.at_start): `pilot
# up --wait` runs it as a task; the fake GPUs (no NVML) pass the gpu
# check with a note that `pilot status` shows; `pilot vet --net` reports
# the pair's latency and bandwidth; with an impossible latency limit
# (--vet FILE) both nodes are cordoned with net.latency named, a task
# waits, and `pilot uncordon` brings them back; `--nccl` on the fake
# GPUs cannot run (said, nothing cordoned) and on a pilot without GPUs
# answers so.  The dev cluster is shared: 2 nodes, a few seconds.
. "$(dirname "$0")/lib.sh"

plan 26

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
status_json() {
    pilot status --json 2>/dev/null | json "$1" 2>/dev/null
}
cordons() {
    status_json "' '.join(str(n['vet']['cordon']) for n in sorted(j['nodes'], key=lambda n: n['name']))"
}
GPUFILES=$(awk -F'File=' '/^NodeName=.*Name=gpu.*File=/ { print $2; exit }' \
           /etc/slurm/gres.conf)
GPUDIR=$(dirname "${GPUFILES%% *}")
[[ -d $GPUDIR ]] || abort "no dev cluster here (GPUs in /etc/slurm/gres.conf)"

# --- usage -------------------------------------------------------------
capture pilot vet --net n1
usage_error "pilot vet --net NODE: refused (it checks the pilot's nodes)" \
    "no NODE"
capture pilot vet --vet /dev/null
usage_error "pilot vet --vet FILE without --net/--nccl: refused" \
    "--vet FILE is for --net and --nccl"

cat >"$WORK/vet.yaml" <<EOF
gpus:
  devices: $GPUDIR/nvidia%s
disk:
  min_free_mb: 64
memory:
  min_free_mb: 64
net:
  at_start: true
  size: 65536
  iters: 20
EOF
printf 'net:\n  max_latency_us: 0.001\n  size: 65536\n  iters: 20\n' \
    >"$WORK/impossible.yaml"

# --- the pilot: 2 nodes, vetted, the net check at start ----------------
T0=$(now)
PILOT_UP_ID=$(run_timeout 300 pilot up --nodes 2 --time 10:00 --wait \
              --wait-timeout 200 --vet "$WORK/vet.yaml" 2>"$WORK/up.err") \
    || abort "pilot up --nodes 2 failed: $(<"$WORK/up.err")"
diag "pilot up with vetting and the net check: $(elapsed "$T0" "$(now)") s"
UPERR=$(<"$WORK/up.err")
like "$UPERR" $'vet net: task [0-9]+, 2 nodes\nA +B +latency us +bandwidth MB/s\nn[1-4] +n[1-4] +[0-9.]+ +[0-9.]+\n' \
     "pilot up --wait ran the net check (net.at_start), its pair on stderr"
is "$(pilot ls --json 2>/dev/null | json "' '.join(t['name'] + ':' + t['state'] for t in j)")" \
   "vet-net:done" "... as a task of the pilot: vet-net, done"
is "$(status_json "' '.join(n['vet']['state'] for n in j['nodes'])")" "ok ok" \
   "both nodes passed their vetting (the gpu check included)"
is "$(cordons)" "None None" "... and neither is cordoned"

# --- the gpu check on fake GPUs: a note, not a cordon --------------------
capture pilot status
like "$OUT" $'\nn[1-4] note: gpu not checked: no GPU here: NVML not found[^\n]*\nn[1-4] note: gpu not checked: no GPU here: NVML not found' \
     "pilot status notes, for each node, the gpu check that could not look"
capture pilot vet
like "$OUT" $'\n  gpu +ok +- +limit - +not checked: no GPU here: NVML not found' \
     "pilot vet lists the gpu check: ok, not checked, why"
is "$RC" 0 "... and every node passed"

# --- pilot vet --net ---------------------------------------------------
capture_mpi pilot vet --net
is "$RC" 0 "pilot vet --net: passed"
like "$OUT" $'^vet net: task [0-9]+, 2 nodes\nA +B +latency us +bandwidth MB/s\nn[1-4] +n[1-4] +[0-9]+\\.[0-9]+ +[0-9]+\\.[0-9]\nmedian latency [0-9.]+ us, bandwidth [0-9.]+ MB/s$' \
     "... the pair's latency and bandwidth and the medians"
capture_mpi pilot vet --net --json
is "$RC" 0 "pilot vet --net --json"
NAMES=$(status_json "' '.join(sorted(n['name'] for n in j['nodes']))")
is "$(json "len(j['pairs']) == 1 and j['pairs'][0]['latency_us'] > 0 and j['pairs'][0]['bandwidth_mbs'] > 0 and ' '.join(sorted(j['nodes'])) == '$NAMES' and j['status']" <<<"$OUT")" \
   "pass" "... its report: one pair of both nodes ($NAMES), figures above 0"

# --- an impossible latency limit: both cordoned, uncordon ----------------
capture_mpi pilot vet --net --vet "$WORK/impossible.yaml"
is "$RC" 3 "pilot vet --net with max_latency_us 0.001: exit 3"
like "$OUT" $'FAILED net.latency: n[1-4] <-> n[1-4]: [0-9.]+ us, above 0.001 us' \
     "... net.latency failed, the pair named"
like "$(cordons)" '^vet: net\.latency [0-9.e+]+ \(limit 0\.001\): n[1-4] <-> n[1-4]: [0-9.]+ us, above 0\.001 us vet: net\.latency ' \
     "both nodes cordoned: net.latency, its figure and limit"
capture pilot status
like "$OUT" $'\nn[1-4] cordoned: vet: net.latency [^\n]*\nn[1-4] cordoned: vet: net.latency' \
     "pilot status shows both cordons"
ID=$(pilot submit -- true 2>/dev/null)
sleep 1
is "$(pilot show "$ID" --json 2>/dev/null | json "j['state']")" "queued" \
   "a task waits: no node takes new work"
for n in $(status_json "' '.join(n['name'] for n in j['nodes'])"); do
    pilot uncordon "$n" >/dev/null
done
is "$(cordons)" "None None" "pilot uncordon: both back"
capture pilot wait "$ID" --timeout 30
is "$RC" 0 "... and the waiting task ran"

# --- nccl: fake GPUs cannot run it; nothing cordoned ----------------------
capture_mpi pilot vet --nccl
is "$RC" 0 "pilot vet --nccl on fake GPUs: exit 0"
like "$OUT" 'vet nccl: cannot run here, nothing checked or cordoned: ' \
     "... says it cannot run here, and why"
is "$(cordons)" "None None" "... nothing cordoned"

capture pilot down
is "$RC" 0 "pilot down"

# --- a pilot without GPUs: nccl says so ----------------------------------
pilot_up_local || abort "pilot up --local failed"
capture_mpi pilot vet --nccl
is "$RC/$OUT" "0/vet nccl: no GPUs in this pilot (on its nodes that are up and not cordoned): nothing checked" \
   "pilot vet --nccl without GPUs: a clear answer, exit 0"
capture pilot down
is "$RC" 0 "pilot down (local)"
