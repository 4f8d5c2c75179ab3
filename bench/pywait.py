#!/usr/bin/python3
"""bench/pywait.py - how late Task.wait() returns after a task's end

    PILOT_LIBPILOT=... PYTHONPATH=python bench/pywait.py [--n 200]

Starts a local pilot (pilot up --local, the pilot on PATH), then N
times: submits 'sleep X' (X from 0.05 to 1 s, the same seeded sequence
each run, so that a poll's schedule meets ends at every phase) and
calls Task.wait(); the latency is the wall clock when wait() returned
minus the task's end_time (pilotd's stamp of the end, on this machine).
Prints p50, p90, p99 and max in ms as one JSON line.  The pilot is
brought down at the end.  Standard library and the pilot package only.
"""
import argparse
import json
import random
import statistics
import time

import pilot


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=14)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    c = pilot.up(local=True, wait_timeout=60)
    lat = []
    try:
        for _ in range(a.n):
            t = c.submit(["sleep", "%.3f" % rng.uniform(0.05, 1.0)])
            t.wait(timeout=60)
            lat.append(time.time() - t.info["end_time"])
    finally:
        c.down()
    lat.sort()
    q = statistics.quantiles(lat, n=100)
    print(json.dumps({"n": a.n, "p50_ms": round(q[49] * 1000, 1),
                      "p90_ms": round(q[89] * 1000, 1),
                      "p99_ms": round(q[98] * 1000, 1),
                      "max_ms": round(lat[-1] * 1000, 1)}))


if __name__ == "__main__":
    main()
