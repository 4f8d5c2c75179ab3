#!/bin/sh
# contrib/snakemake/cancel.sh - Snakemake's --cluster-cancel: 'cancel.sh ID...'
# cancels the jobs' tasks (Snakemake calls it on Ctrl-C; it runs the
# command itself, without a shell, so 'pilot cancel' needs this script).
exec "${PILOT:-pilot}" cancel -- "$@"
