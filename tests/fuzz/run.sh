#!/usr/bin/env bash
# tests/fuzz/run.sh - run libFuzzer targets for a while; fail on a finding
#
# Usage: tests/fuzz/run.sh BINDIR SECONDS TARGET...
#
# Targets (tests/fuzz/fuzz_*.c):
#   fuzz_msg    a whole frame: envelope, then every body decoder of proto/
#   fuzz_task   one task entry: run entries, submit specs, agent events
#   fuzz_keys   key files' text: keypair, public key, allow/NAME.pub
#   fuzz_pilotdir  the endpoint and info files of a pilot directory
#   fuzz_taskfile  pilot submit --file: YAML and JSONL task files
#   fuzz_reply  a reply frame as the CLI reads it: JSON, client/output.c
#   fuzz_agentseq  sequences of frames from several fake agents, handled
#               by pilotd's own code (libpilotd.a, SQLite), invariants checked
#   fuzz_pywmsg  what a warm Python worker sends its agent: frames, hello,
#               results
#
# Each TARGET runs BINDIR/TARGET for SECONDS on its seed corpus
# tests/fuzz/corpus/<kind> (fuzz_msg -> msg) and its regression inputs
# tests/fuzz/regress/<kind> (every input that once found a bug), writing
# what it discovers into BINDIR/corpus-<kind>, not into the tree.  SECONDS 0 only replays the corpus and the regression
# inputs once.  A finding (crash, sanitizer report, leak, timeout of
# 10 s, more than 2 GiB) stops it: the input is saved as
# BINDIR/artifacts/TARGET-crash-<sha1> (or -leak-, -timeout-, -oom-) and
# this script exits 1 after saying how to replay it.
set -u

if (($# < 3)); then
    sed -n '4,25p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
bindir=$1
secs=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
rc=0
for t in "$@"; do
    kind=${t#fuzz_}
    work=$bindir/corpus-$kind
    arts=$bindir/artifacts
    mkdir -p "$work" "$arts" "$here/regress/$kind"
    if [[ $secs == 0 ]]; then
        limit=(-runs=0)
    else
        limit=(-max_total_time="$secs")
    fi
    log=$bindir/$t.log
    echo "fuzz: $t for ${secs}s (log $log)"
    # N.B. the writable corpus comes first: libFuzzer adds new inputs to
    # the first directory only
    "$bindir/$t" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$arts/$t-" \
        "$work" "$here/corpus/$kind" "$here/regress/$kind" >"$log" 2>&1
    st=$?
    execs=$(awk '/stat::number_of_executed_units/ { print $2 }' "$log")
    speed=$(awk '/stat::average_exec_per_sec/ { print $2 }' "$log")
    cov=$(grep -Eo 'cov: [0-9]+' "$log" | tail -n 1)
    if ((st != 0)); then
        rc=1
        echo "fuzz: $t: FINDING (exit $st); the end of $log:" >&2
        tail -n 40 "$log" >&2
        art=$(grep -Eo "Test unit written to [^ ]+" "$log" | tail -n 1)
        art=${art#Test unit written to }
        if [[ -n $art ]]; then
            echo "fuzz: replay it with: $bindir/$t $art" >&2
            echo "fuzz: once fixed, keep it: cp $art $here/regress/$kind/" >&2
        fi
    else
        echo "fuzz: $t: no finding; ${execs:-?} inputs, ${speed:-?}/s, ${cov:-cov: ?}"
    fi
done
exit $rc
