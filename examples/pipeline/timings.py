#!/usr/bin/python3
"""examples/pipeline/timings.py - the stage timings and the overhead of one
pipeline run, for run.sh (pilot) and sbatch.sh (an sbatch chain).

  timings.py --t0 T --pilot LS.json [--json OUT.json] [--pool-start A,B]
  timings.py --t0 T --stamps STAMPS [--json OUT.json]

T is the epoch time of the first submission (pilot submit or sbatch). With
--pilot, LS.json is `pilot ls --json`: each task's start_time, end_time and
wall. With --stamps, each line is "NAME start|end EPOCH", written by the
batch scripts around each stage's work.

A stage is a task named prep, train-MODEL or post. End-to-end is T to the
end of the last task; the critical path is the tasks' own run time: prep's
wall + the longest train-* wall + post's wall; the overhead is the
difference: queueing, launching, dependency release, everything that is
not the stages' work.

--pool-start A,B (run.sh --pool): the pool that runs prep was started at
epoch A and ready at B, before T; it gets a line of its own, not counted in
end-to-end (a pool is started once for many tasks), and prep's line says
it ran as a pool task."""

import argparse
import json
import sys


def die(msg):
    print("timings: error: %s" % msg, file=sys.stderr)
    sys.exit(1)


def from_pilot(path):
    with open(path) as f:
        tasks = json.load(f)
    st = {}
    for t in tasks:
        if t.get("start_time") is None or t.get("end_time") is None:
            die("task %s (%s) never ran: %s" % (t["id"], t["name"],
                                                t.get("reason")))
        st[t["name"]] = {"id": t["id"], "start": t["start_time"],
                         "end": t["end_time"], "state": t["state"],
                         "node": t.get("node"), "pool": t.get("pool")}
    return st


def from_stamps(path):
    st = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            w = line.split()
            if len(w) != 3 or w[1] not in ("start", "end"):
                die("%s: line %d: expected 'NAME start|end EPOCH'"
                    % (path, n))
            st.setdefault(w[0], {})[w[1]] = float(w[2])
    for name, s in st.items():
        if "start" not in s or "end" not in s:
            die("%s: stage %s has no %s stamp" % (
                path, name, "end" if "start" in s else "start"))
    return st


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--t0", type=float, required=True)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--pilot")
    g.add_argument("--stamps")
    ap.add_argument("--json")
    ap.add_argument("--label", default="")
    ap.add_argument("--pool-start")
    a = ap.parse_args()
    pool = None
    if a.pool_start:
        try:
            p0, p1 = (float(v) for v in a.pool_start.split(","))
        except ValueError:
            die("--pool-start %s: expected START,END" % a.pool_start)
        pool = {"start": p0, "end": p1, "wall": p1 - p0}
    st = from_pilot(a.pilot) if a.pilot else from_stamps(a.stamps)
    for name, s in st.items():
        s["wall"] = s["end"] - s["start"]
    trains = [n for n in st if n.startswith("train-")]
    if "prep" not in st or "post" not in st or not trains:
        die("expected stages prep, train-*, post; got %s" % sorted(st))
    order = ["prep"] + sorted(trains) + ["post"]
    end = max(s["end"] for s in st.values())
    e2e = end - a.t0
    crit = (st["prep"]["wall"] + max(st[n]["wall"] for n in trains)
            + st["post"]["wall"])
    print("%-12s %9s %9s %9s" % ("stage", "start s", "end s", "wall s"))
    if pool:
        print("%-12s %9.2f %9.2f %9.2f" % ("pool start", pool["start"] - a.t0,
                                           pool["end"] - a.t0, pool["wall"]))
    for n in order:
        s = st[n]
        label = n + " (pool)" if s.get("pool") else n
        print("%-12s %9.2f %9.2f %9.2f" % (label, s["start"] - a.t0,
                                           s["end"] - a.t0, s["wall"]))
    print("%send-to-end %.2f s (first submit to last end), critical path "
          "%.2f s (prep + slowest training + post), overhead %.2f s" % (
              a.label + ": " if a.label else "", e2e, crit, e2e - crit))
    if pool:
        print("%swith the pool's start: %.2f s (pool start to last end)" % (
            a.label + ": " if a.label else "", end - pool["start"]))
    if a.json:
        out = {"t0": a.t0, "stages": {n: st[n] for n in order},
               "end_to_end": e2e, "critical_path": crit,
               "overhead": e2e - crit}
        if pool:
            out["pool_start"] = pool
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
