#!/usr/bin/env bash
# scripts/demo.sh - the main job (issue 6): the end-to-end pipeline demo of
# examples/pipeline/ on a 4-node pilot of the dev cluster: an MPI
# data-engineering stage, three torch.distributed trainings at once, a
# postprocessing stage, chained with --after; prints the stage timings, the
# metrics table, the plot's path and the pilot's overhead.
# Run through `make demo`, which installs, builds and starts the cluster;
# arguments go to examples/pipeline/run.sh (--models, --epochs, --out ...).
set -euo pipefail

: "${PILOT_BIN:?set PILOT_BIN to the directory of pilot, pilotd, pilot-agent}"
export PILOT_HOME=${PILOT_HOME:-/var/tmp/pilot-demo}
exec "$(dirname "$0")/../examples/pipeline/run.sh" --nodes "${DEMO_NODES:-4}" "$@"
