#!/bin/bash
# t0600-mpi.sh - an MPI program (C, mpicc) over 3 nodes of a Slurm pilot,
# launched by rank 0's agent as one srun --mpi=pmix step on exactly the nodes and cores pilotd chose: MPI_Allreduce is
# right, and every rank ran where 'pilot show' says.  --launcher mpirun
# is refused until its ranks land where they were placed.
. "$(dirname "$0")/lib.sh"

plan 9

command -v mpicc >/dev/null || abort "mpicc is missing (scripts/install-deps.sh installs it)"
cat >"$WORK/hello.c" <<'EOC'
#define _GNU_SOURCE
#include <mpi.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv)
{
    int rank, size, one, sum = 0;
    char host[256];
    cpu_set_t set;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    one = rank + 1;
    MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    gethostname(host, sizeof(host));
    sched_getaffinity(0, sizeof(set), &set);
    int cpu = -1, n = CPU_COUNT(&set);
    for (int c = 0; c < CPU_SETSIZE && cpu < 0; c++)
        if (CPU_ISSET(c, &set))
            cpu = c;
    char line[512];
    snprintf(line, sizeof(line), "rank %d of %d on %s sum %d cpus %d first %d\n",
             rank, size, host, sum, n, cpu);
    fputs(line, stdout);
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
EOC
ok "mpicc builds an MPI hello" mpicc -o "$WORK/hello" "$WORK/hello.c"

pilot_up 4 || abort "pilot up --nodes 4 --wait failed"
diag "pilot up to all 4 agents registered: ${PILOT_UP_SECS}s"

# check_run LAUNCHER: 3 ranks on 3 nodes, one core each
check_run() {
    local launcher=$1 id
    capture pilot submit --nodes 3 --comm mpi --launcher "$launcher" \
        --env OMPI_ALLOW_RUN_AS_ROOT=1 --env OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        -- "$WORK/hello"
    id=$OUT
    like "$id" '^[0-9]+$' "$launcher: submit --nodes 3 --comm mpi prints an id ($id)"
    capture pilot wait "$id" --timeout 120
    is "$RC" 0 "$launcher: the MPI task ends done" \
        || { pilot show "$id" >&2; pilot logs --stderr "$id" >&2; }
    pilot logs "$id" >"$WORK/out-$id" 2>&1
    pilot show --json "$id" >"$WORK/show-$id.json"
    /usr/bin/python3 - "$WORK/out-$id" "$WORK/show-$id.json" >"$WORK/res-$id" <<'EOP'
import json, re, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("rank ")]
show = json.load(open(sys.argv[2]))
pl = {p["rank"]: p for p in show["placement"]}
ok_sum = len(lines) == 3 and all(" sum 6 " in l for l in lines)
where = True
for l in lines:
    m = re.match(r"rank (\d+) of (\d+) on (\S+) sum (\d+) cpus (\d+) first (\d+)", l)
    if not m:
        where = False
        continue
    r = int(m.group(1))
    p = pl.get(r)
    if not p or p["node"] != m.group(3) or int(m.group(6)) not in p["cores"] \
            or int(m.group(5)) != len(p["cores"]):
        where = False
nodes = sorted(set(p["node"] for p in pl.values()))
print(json.dumps({"sum": ok_sum, "where": where, "nodes": nodes,
                  "nlines": len(lines),
                  "running": [e["time"] for e in show["events"]
                              if e["state"] == "running" and "rank" not in e][:1],
                  "submit": show["submit_time"]}))
EOP
    local res
    res=$(cat "$WORK/res-$id")
    is "$(json 'j["sum"]' <<<"$res")" true "$launcher: 3 ranks print MPI_Allreduce sum 6 ($(json 'j["nlines"]' <<<"$res") lines)"
    is "$(json 'len(j["nodes"])' <<<"$res")" 3 "$launcher: the ranks were placed on 3 nodes ($(json 'j["nodes"]' <<<"$res"))"
    is "$(json 'j["where"]' <<<"$res")" true "$launcher: each rank ran on the node and cores pilot show records"
    diag "$launcher: submit to running $(json '"%.1f ms" % ((j["running"][0] - j["submit"]) * 1000) if j["running"] else "?"' <<<"$res")"
}
check_run srun
capture pilot submit --nodes 3 --comm mpi --launcher mpirun -- true
one_error_line "--launcher mpirun: refused with one line" 'mpirun'

# a rank that dies fails the task, and the others are stopped
capture pilot submit --nodes 3 --comm mpi \
    --env OMPI_ALLOW_RUN_AS_ROOT=1 --env OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    -- sh -c 'if [ "$PILOT_RANK" = 2 ]; then exit 7; fi; sleep 300'
BAD=$OUT
capture pilot wait "$BAD" --timeout 60
is "$RC" 1 "a rank exiting 7 fails the MPI task within 60 s"
capture pilot submit --comm mpi --gpus-per-rank 1 -- true
one_error_line "--comm mpi with GPUs: refused with one line" 'GPU'
