#!/bin/sh
# contrib/snakemake/status.sh - Snakemake's --cluster-status: 'status.sh ID'
# prints running, success or failed (pilot state ID).
#
# A status command that fails stops the whole workflow (Snakemake raises
# "Failed to obtain job status"), so a failure is tried twice more, 2 s
# apart: pilotd slow to answer under a burst of submits is no reason to
# lose a run.  An unknown id still fails, 4 s later.
pilot=${PILOT:-pilot}
tries=1
while :; do
    if out=$("$pilot" state -- "$1"); then
        printf '%s\n' "$out"
        exit 0
    else
        rc=$?
    fi
    # 2 is a usage error: no use trying again
    if [ "$rc" -eq 2 ] || [ "$tries" -ge 3 ]; then
        exit "$rc"
    fi
    tries=$((tries + 1))
    sleep 2
done
