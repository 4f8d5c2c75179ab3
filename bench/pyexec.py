"""bench/pyexec.py - scenario 7 of bench.py: pilot.Executor (issue 14)

Python functions through pilot.Executor (python/pilot/executor.py) on a
local pilot, against what a user would do otherwise on the same cores:

  no-op       N calls of a no-op function, all submitted then all
              results read (submit of the first .. last result), through
              (a) the Executor, its workers warm (a first round of 4
              calls a core started them); (b) a fresh interpreter a
              call: N tasks '/usr/bin/python3 -c pass' (pilot submit
              --array .. pilot wait exits 0); (c)
              concurrent.futures.ProcessPoolExecutor with a worker a
              core (the local limit: no pilot, no database), warmed the
              same way.  The ratios are taken inside a repetition.
  torch       a function that imports torch, in a worker of its own (its
              env): its first call (the interpreter and the import) and
              the 3 next ones, submit .. result each.
  latency     one future at a time on an idle pilot: submit .. result,
              p50 and p99.
  map         Executor.map over M small calls (x*x), chunksize 1 and
              chunksize 1,000: the list() of the map, from the call of
              map() (which pickles and submits all) to the last value.

bench.py calls scenario7(b, h) with its Bench and its own module h (the
helpers log, pct, summary), rows() and targets() for the table.  It needs
the Python client (python/ of this tree, libpilot from the build) and
python3-cloudpickle.
"""
import concurrent.futures
import os
import sys
import time

NOTE = """\
7 executor: pilot.Executor on a local pilot, its calls' results read
by this process.  warm: N no-op calls, submit of the first .. last
result, the workers started before (a round of 4 calls a core); fresh
interpreter: N tasks '/usr/bin/python3 -c pass', pilot submit --array
.. pilot wait exits 0; ProcessPoolExecutor: a worker a core, warmed, N
submits .. last result.  latency: one future at a time, submit ..
result().  map: list(ex.map(f, range(M), chunksize=C)), from the call."""


def noop():
    return None


def square(x):
    return x * x


def with_torch():
    import torch
    return float(torch.ones(4).sum().item())


class Exec7:
    def __init__(self, b, h):
        self.b, self.h = b, h
        self.c = b.cfg["s7"]
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        sys.path.insert(0, os.path.join(root, "python"))
        os.environ.setdefault("PILOT_LIBPILOT", os.path.join(
            os.path.dirname(b.bin), "lib", "libpilot.so.1"))
        import cloudpickle
        import pilot
        # this module's functions by value: the workers need not import
        # bench/
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
        self.pilot = pilot

    def warm_noop(self, ex, n):
        t0, c0 = time.monotonic(), time.process_time()
        fs = [ex.submit(noop) for _ in range(n)]
        for f in fs:
            f.result()
        self.client_cpu_us = (time.process_time() - c0) / n * 1e6
        return n / (time.monotonic() - t0)

    def fresh(self, p, n):
        t0 = time.monotonic()
        self.b.pilot_cmd(["submit", "--array", "1-%d" % n, "--",
                          "/usr/bin/python3", "-c", "pass"], pid=p["id"],
                         stdout=False, timeout=900)
        self.b.wait_all(p)
        return n / (time.monotonic() - t0)

    def ppe(self, pool, n):
        t0 = time.monotonic()
        fs = [pool.submit(noop) for _ in range(n)]
        for f in fs:
            f.result()
        return n / (time.monotonic() - t0)

    def run(self):
        b, h, c = self.b, self.h, self.c
        p = b.up()
        out = {"n": c["n"], "n_fresh": c["n_fresh"], "map_n": c["map_n"]}
        try:
            client = self.pilot.connect(p["id"], b.home)
            # the interpreter of the fresh tasks and of the pool: this one
            ex = self.pilot.Executor(client, cwd="/tmp", python=sys.executable)
            pool = concurrent.futures.ProcessPoolExecutor(b.ncores)
            self.warm_noop(ex, 4 * b.ncores)
            self.ppe(pool, 4 * b.ncores)
            runs = {"warm": [], "fresh": [], "ppe": [], "warm_over_fresh": [],
                    "warm_over_ppe": [], "client_cpu_us": []}
            for rep in range(b.cfg["reps"]):
                order = ["warm", "fresh", "ppe"]
                order = order[rep % 3:] + order[:rep % 3]
                got = {}
                for k in order:
                    h.log("7 executor: %s no-op, rep %d" % (k, rep + 1))
                    if k == "warm":
                        got[k] = self.warm_noop(ex, c["n"])
                        runs["client_cpu_us"].append(self.client_cpu_us)
                    elif k == "fresh":
                        got[k] = self.fresh(p, c["n_fresh"])
                    else:
                        got[k] = self.ppe(pool, c["n"])
                    runs[k].append(got[k])
                runs["warm_over_fresh"].append(got["warm"] / got["fresh"])
                runs["warm_over_ppe"].append(got["warm"] / got["ppe"])
            pool.shutdown()
            out["noop"] = {k: h.summary(v) for k, v in runs.items()}

            h.log("7 executor: latency, %d one at a time" % c["lat_n"])
            lat = []
            for _ in range(c["lat_n"]):
                t0 = time.monotonic()
                ex.submit(noop).result()
                lat.append((time.monotonic() - t0) * 1000)
            out["latency_ms"] = {"p50": h.pct(lat, 0.5),
                                 "p99": h.pct(lat, 0.99), "runs": lat}

            h.log("7 executor: torch")
            tx = ex.options(env={"BENCH": "torch-%d" % os.getpid()})
            tt = []
            for _ in range(4):
                t0 = time.monotonic()
                try:
                    tx.submit(with_torch).result(timeout=600)
                except Exception as e:
                    h.log("7 executor: torch: %s" % e)
                    tt.append(None)
                    continue
                tt.append(time.monotonic() - t0)
            out["torch_s"] = tt

            out["map"] = {}
            for cs in (1, 1000):
                h.log("7 executor: map over %d, chunksize %d"
                      % (c["map_n"], cs))
                t0 = time.monotonic()
                got = list(ex.map(square, range(c["map_n"]), chunksize=cs))
                dt = time.monotonic() - t0
                if got != [i * i for i in range(c["map_n"])]:
                    raise RuntimeError("map, chunksize %d: wrong values"
                                       % cs)
                out["map"][str(cs)] = {"seconds": dt,
                                       "calls_per_s": c["map_n"] / dt}
            ex.shutdown()
            client.close()
        finally:
            b.down(p)
        return out


def scenario7(b, h):
    b.res["s7"] = Exec7(b, h).run()


def rows(r, add):
    """scenario 7's rows of the table, by bench.py's add()"""
    sc = "7 executor"
    nz = r["noop"]
    add(sc, "no-op, Executor (warm workers)", r["n"],
        "wall: submits .. last result", "tasks/s", nz["warm"])
    add(sc, "no-op, a fresh python3 -c task a call", r["n_fresh"],
        "wall: submit .. wait exits 0", "tasks/s", nz["fresh"])
    add(sc, "no-op, ProcessPoolExecutor (a worker a core)", r["n"],
        "wall: submits .. last result", "tasks/s", nz["ppe"])
    add(sc, "no-op, Executor: this process's CPU a call", r["n"],
        "utime+stime (all its threads)", "us/task", nz["client_cpu_us"])
    add(sc, "no-op, Executor / fresh interpreter", r["n"], "ratio", "x",
        nz["warm_over_fresh"])
    add(sc, "no-op, Executor / ProcessPoolExecutor", r["n"], "ratio", "x",
        nz["warm_over_ppe"])
    lat = r["latency_ms"]
    for q in ("p50", "p99"):
        add(sc, "latency idle, submit .. result %s" % q, len(lat["runs"]),
            "wall: one future at a time", "ms",
            {"median": lat[q], "min": lat[q], "max": lat[q], "runs": [1]})
    t = r["torch_s"]
    for k, what in ((0, "first call (new worker)"), (1, "2nd call"),
                    (2, "3rd call"), (3, "4th call")):
        v = t[k] if k < len(t) else None
        add(sc, "import torch, %s" % what, 1, "wall: submit .. result", "s",
            None if v is None else {"median": v, "min": v, "max": v,
                                    "runs": [v]})
    for cs, v in r["map"].items():
        add(sc, "map, chunksize %s" % cs, r["map_n"],
            "wall: map() .. last value", "tasks/s",
            {"median": v["calls_per_s"], "min": v["calls_per_s"],
             "max": v["calls_per_s"], "runs": [v["calls_per_s"]]})


def targets(r, judge):
    """scenario 7's targets (issue 14), by bench.py's judge()"""
    judge("executor: warm no-op calls / fresh interpreter >= 20x",
          r["noop"]["warm_over_fresh"], lambda x: x >= 20, "%.1fx")
    judge("executor: warm no-op calls / ProcessPoolExecutor >= 0.5x",
          r["noop"]["warm_over_ppe"], lambda x: x >= 0.5, "%.2fx")
