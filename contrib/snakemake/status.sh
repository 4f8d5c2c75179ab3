#!/bin/sh
# contrib/snakemake/status.sh - Snakemake's --cluster-status: 'status.sh ID'
# prints running, success or failed (pilot state ID).
#
# Snakemake 7 runs this for every running job, one after another, then
# sleeps 10 s.  A pilot command costs about 20 ms of CPU (its start and a
# CURVE connection): 500 jobs would keep a core busy 10 s a sweep.  So a
# call that asks pilot asks about its own job and every job the last one
# found running, in one 'pilot state ID...', and writes the answers to a
# cache ($PILOT_SNAKEMAKE_CACHE, default .snakemake/pilot-states in
# Snakemake's directory: "stamp UPTIME", then "ID WORD" lines); the
# calls after it answer from there, each job once ("- ID" lines say who
# has been answered), while it is under 3 s old.  Asked a second time,
# a job is in the next sweep and pilot is asked again: the cache never
# answers with what the sweep before saw, and Snakemake learns of an
# end as soon as it would without it.  An older cache (another run, a
# pilot whose task ids are the same numbers) only says whom to ask.
#
# A status command that fails stops the whole workflow (Snakemake raises
# "Failed to obtain job status"), so a failure is tried twice more, 2 s
# apart: pilotd slow to answer under a burst of submits is no reason to
# lose a run.  An unknown id still fails, 4 s later.
pilot=${PILOT:-pilot}
cache=${PILOT_SNAKEMAKE_CACHE:-.snakemake/pilot-states}
id=$1

# seconds since boot, read without a process (the cached answer costs
# this shell alone: a 'date' would double it); a stamp from before a
# reboot is ahead of it and not believed
if read -r now _ </proc/uptime 2>/dev/null; then
    now=${now%%.*}
else
    now=$(date +%s)
fi

if [ -r "$cache" ]; then
    read -r _ stamp <"$cache"
    case $stamp in
    '' | *[!0-9]*) stamp=-99 ;; # not ours: never believed
    esac
    age=$((now - stamp))
    if [ "$age" -ge 0 ] && [ "$age" -lt 3 ]; then
        # -F -x: whole lines, an id's dots are not patterns
        hit=$(grep -Fx -e "$id running" -e "$id success" -e "$id failed" \
                  -e "- $id" "$cache")
        case $hit in
        *"- $id"*) ;; # answered since the cache was made: ask pilot
        "$id "*)
            echo "- $id" >>"$cache"
            echo "${hit#* }"
            exit 0
            ;;
        esac
    fi
fi

# this id and every one the cache has running, in one call (ids are
# ID or ID.N: word splitting is safe)
ids=$(
    if [ -r "$cache" ]; then
        awk -v id="$id" \
            '$1 != "stamp" && $2 == "running" && $1 != id { print $1 }' \
            "$cache"
    fi
    echo "$id"
)
# shellcheck disable=SC2086
set -- $ids
# its stderr is shown only if it worked (a note that the pilot is down):
# an error may be another id's, and the call below says this one's
tmp=$cache.$$
mkdir -p "$(dirname "$cache")" 2>/dev/null # else: no cache, pilot each time
if words=$("$pilot" state -- "$@" 2>"$tmp.err"); then
    cat "$tmp.err" >&2
    rm -f "$tmp.err"
    if printf '%s\n' "$words" | awk -v ids="$*" -v now="$now" '
            BEGIN { split(ids, id, " "); print "stamp", now }
            { print id[NR], $0 }
            END { print "-", id[NR] }' >"$tmp" \
        && mv -f "$tmp" "$cache"; then
        :
    else
        rm -f "$tmp" # no cache: the next call asks pilot
    fi
    printf '%s\n' "$words" | tail -n 1
    exit 0
fi

# one of them is unknown, or pilot did not answer: this id alone, and a
# cache that may hold a stale id starts over
rm -f "$cache" "$tmp.err"
tries=1
while :; do
    if out=$("$pilot" state -- "$id"); then
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
