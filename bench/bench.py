#!/usr/bin/python3
"""bench/bench.py - `make bench`: pilot against the fork/exec limit and Slurm

Ten scenarios (docs/PERFORMANCE.md says what each measures and why):
  1 no-op throughput: N x /bin/true by every system
  2 daemon capacity: bench agents (pilot-agent --bench) against one pilotd
  3 submission of 1,000,000 tasks, and pilotd's RSS with them queued
  4 latency on an idle pilot: submit-to-start, end-to-report, through
    the CLI and over one connection
  5 pipeline overhead: 3 stages of 4 x 0.2 s tasks
  6 the MPI worker pool against --comm mpi tasks and srun steps of the
    same function: start latency, no-op throughput, join and sort
    (bench/pool.py)
  7 Python functions through pilot.Executor: warm no-op calls against a
    fresh interpreter a call and ProcessPoolExecutor, a function that
    imports torch, latency, a map of 100,000 (bench/pyexec.py)
  8 output at scale: N tasks each printing a line, into files and into
    the nodes' journals: tasks/s, files created, bytes on disk
    (bench/output.py)
  9 one pilotd, 1,000 agents: registration, and capacity with 16, 256
    and 1,000 bench agents in one process (bench/scale.py)
  10 10,000,000 tasks queued: ack, pilotd RSS, status, kill -9 and
    restart, a sample run after it (bench/queue10m.py; not named
    queue.py: that would hide Python's own module)

Every system is timed the same way: the wall clock from just before the
command a user runs until it returns, or until the user's way of knowing
the work ended returns (pilot: 'pilot submit' until 'pilot wait' exits 0;
sbatch: until squeue no longer lists the job, polled every 0.1 s).  What
must happen before (pilot up --wait, salloc) is its own row, and pilot's
database stamps (submit_time, start_time, end_time) are given beside as
its internal cost.

Each repetition runs every system of a scenario once, in an order that
rotates from one repetition to the next; the table gives the median, min
and max over repetitions, and ratios are taken inside one repetition (these
2-core machines drift).  Results go to bench/results/<timestamp>.json.
Everything that touches Slurm holds /tmp/pilot-cluster.lock (flock), one
system at a time.  Standard library only; run by /usr/bin/python3.

The cost of an option of pilot up (the metrics server, say) on these
figures: PILOT_BENCH_UP_ARGS="--metrics-port 0" adds it to every pilot
up, and PILOT_BENCH_SCRAPE=1 then GETs each pilot's metrics every second
as Prometheus would, from a thread, for as long as the pilot is up.
"""
import argparse
import contextlib
import fcntl
import json
import math
import os
import shlex
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import output
import pool
import queue10m
import pyexec
import scale

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LOCK = "/tmp/pilot-cluster.lock"
FINAL = ("done", "failed", "canceled", "timeout")

# N per system and repetitions; the slow systems get a smaller N and
# are reported in tasks/s like the others.
FULL = {
    "reps": 3,
    "s1": {"limit": 10000, "pilot-local": 10000, "limit-fork": 5000,
           "limit-16": 5000, "pilot-slurm": 5000, "xargs": 5000,
           "parallel": 300, "srun-seq": 100, "srun-16": 100,
           "sbatch-array": 100},
    "s2": {"agents": [1, 16, 256], "n": 200000, "slots": 1024},
    "s3": {"n": 1000000, "reps": 2, "ack_n": 2000},
    "s4": {"n": 1000, "cli_n": 100, "cli_slurm_n": 30},
    "s5": {"stages": 3, "width": 4, "sleep": 0.2},
    "s6": {"lat_n": 20, "tp_pool": {1: 1000, 4: 400}, "tp_mpi": {1: 40, 4: 20},
           "cylon_n": 100, "cylon_rows": 1000000},
    "s7": {"n": 2000, "n_fresh": 300, "lat_n": 200, "map_n": 100000},
}
QUICK = {
    "reps": 1,
    "s1": {"limit": 2000, "pilot-local": 2000, "limit-16": 1000,
           "pilot-slurm": 1000, "xargs": 2000, "parallel": 60,
           "srun-seq": 20, "srun-16": 32, "sbatch-array": 30},
    "s2": {"agents": [1, 16], "n": 30000, "slots": 1024},
    "s3": {"n": 100000, "ack_n": 500},
    "s4": {"n": 200, "cli_n": 30, "cli_slurm_n": 10},
    "s5": {"stages": 3, "width": 4, "sleep": 0.2},
    "s6": {"lat_n": 5, "tp_pool": {1: 200, 4: 100}, "tp_mpi": {1: 10, 4: 10},
           "cylon_n": 20, "cylon_rows": 200000},
    "s7": {"n": 500, "n_fresh": 60, "lat_n": 50, "map_n": 5000},
}


def log(msg):
    print("bench: " + msg, file=sys.stderr, flush=True)


def sh(cmd, timeout=600, env=None, check=True, stdin=None, stdout=True):
    """Run 'cmd' (a list), return its stdout as text."""
    p = subprocess.run(cmd, timeout=timeout, env=env, text=True,
                       stdin=stdin,
                       stdout=subprocess.PIPE if stdout else
                       subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
    if check and p.returncode != 0:
        raise RuntimeError("%s: exit %d: %s" % (" ".join(cmd[:4]),
                                                 p.returncode,
                                                 p.stderr.strip()[-2000:]))
    return p.stdout or ""


@contextlib.contextmanager
def cluster_lock():
    """The dev cluster has one user at a time."""
    with open(LOCK, "a") as f:
        t = time.time()
        fcntl.flock(f, fcntl.LOCK_EX)
        if time.time() - t > 1:
            log("waited %.0f s for %s" % (time.time() - t, LOCK))
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def pct(v, q):
    """Nearest-rank percentile q (0..1) of the values v."""
    s = sorted(v)
    return s[max(0, math.ceil(q * len(s)) - 1)]


def summary(v):
    v = [x for x in v if x is not None]
    if not v:
        return None
    return {"median": statistics.median(v), "min": min(v), "max": max(v),
            "runs": v}


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 (1-based) of stat(5)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_pids(pid):
    out = []
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/children" % (pid, t)) as f:
                out += [int(x) for x in f.read().split()]
        except OSError:
            pass
    return out


def proc_name(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return None


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return None


class Bench:
    def __init__(self, args):
        self.quick = args.quick
        self.cfg = QUICK if args.quick else FULL
        if args.reps:
            self.cfg = dict(self.cfg, reps=args.reps)
        self.bin = os.environ.get("PILOT_BIN") or os.path.join(
            args.build, "bin")
        self.tools = os.path.join(args.build, "bench")
        self.home = tempfile.mkdtemp(prefix="bench-home.", dir="/tmp")
        self.env = dict(os.environ, PILOT_HOME=self.home, PILOT_BIN=self.bin)
        self.env.pop("PILOT_ID", None)
        self.ncores = len(os.sched_getaffinity(0))
        self.pilots = []       # pilots up: taken down at the end
        self.procs = []        # agents we started
        self.profile = args.profile
        self.res = {}
        help_text = self.pilot_cmd(["submit", "--help"], check=False)
        self.has = {k: ("--" + k) in help_text
                    for k in ("array", "file", "after")}

    # ---- pilot ----

    def pilot_cmd(self, argv, pid=None, extra_env=None, **kw):
        env = dict(self.env, **(extra_env or {}))
        if pid:
            env["PILOT_ID"] = pid
        return sh([os.path.join(self.bin, "pilot")] + argv, env=env, **kw)

    def up(self, slurm=False, agents=1, extra_env=None):
        argv = ["up", "--wait", "--json"]
        argv += shlex.split(os.environ.get("PILOT_BENCH_UP_ARGS", ""))
        if slurm:
            argv += ["--nodes", "4", "--time", "20:00"]
        else:
            argv += ["--local"] + (["--agents", "0"] if agents == 0 else [])
        t0 = time.time()
        j = json.loads(self.pilot_cmd(argv, extra_env=extra_env))
        # pilot's fixed cost: 'pilot up --wait' returns once every agent
        # has registered
        p = {"id": j["pilot"], "dir": j["dir"], "slurm": slurm,
             "up_seconds": time.time() - t0}
        self.pilots.append(p)
        with open(os.path.join(p["dir"], "endpoint")) as f:
            for line in f:
                k, _, v = line.strip().partition(" ")
                p[k] = v
        p["pid"] = int(p["pid"])
        if os.environ.get("PILOT_BENCH_SCRAPE") == "1":
            self.scrape(p)
        return p

    def scrape(self, p):
        """GET the metrics of pilot p every second (Prometheus' Accept)
        until down(p); the scrapes and failures go in p."""
        st = json.loads(self.pilot_cmd(["status", "--json"], pid=p["id"]))
        if not st.get("metrics"):
            raise RuntimeError("PILOT_BENCH_SCRAPE=1: pilot %s serves no "
                               "metrics (PILOT_BENCH_UP_ARGS=--metrics-port"
                               " 0?)" % p["id"])
        p["scrapes"], p["scrape_errors"] = 0, 0
        stop = threading.Event()
        req = urllib.request.Request(st["metrics"], headers={
            "Accept": "application/openmetrics-text;version=1.0.0,"
                      "text/plain;version=0.0.4;q=0.5"})

        def run():
            while not stop.wait(1.0):
                try:
                    with urllib.request.urlopen(req, timeout=5) as r:
                        r.read()
                    p["scrapes"] += 1
                except Exception:
                    p["scrape_errors"] += 1
        p["scraper"] = (stop, threading.Thread(target=run, daemon=True))
        p["scraper"][1].start()

    def down(self, p):
        if p in self.pilots:
            self.pilots.remove(p)
        if "scraper" in p:
            p["scraper"][0].set()
            p["scraper"][1].join()
            log("pilot %s: %d scrapes of its metrics, %d failed"
                % (p["id"], p["scrapes"], p["scrape_errors"]))
        self.pilot_cmd(["down"], pid=p["id"], check=False, timeout=300)
        for a in [a for a in self.procs if a[0] is p]:
            try:
                a[1].wait(15)
            except subprocess.TimeoutExpired:
                a[1].kill()
                a[1].wait()
            self.procs.remove(a)
        shutil.rmtree(p["dir"], ignore_errors=True)

    def feed(self, p, n, argv, chunk=5000):
        out = sh([os.path.join(self.tools, "feed"), "-c", str(chunk),
                  p["dir"], str(n), "--"] + argv)
        return json.loads(out)

    def submit_n(self, p, n, argv):
        """Queue n copies of argv: 'pilot submit --array', else feed."""
        if self.has["array"]:
            self.pilot_cmd(["submit", "--array", "1-%d" % n, "--"] + argv,
                           pid=p["id"], stdout=False, timeout=600)
        else:
            self.feed(p, n, argv)

    def wait_all(self, p, timeout=1200):
        self.pilot_cmd(["wait", "--all", "--timeout", str(timeout)],
                       pid=p["id"], stdout=False, timeout=timeout + 30)

    def db(self, p):
        return sqlite3.connect("file:%s/state.db?mode=ro" % p["dir"],
                               uri=True, timeout=30)

    def db_times(self, p, first=0):
        """count, done, min submit, min start, max end of the tasks
        whose id is 'first' or more."""
        db = self.db(p)
        try:
            return db.execute(
                "SELECT count(*), sum(state = 'done'), min(submit_time), "
                "min(start_time), max(end_time) FROM tasks WHERE id >= ?",
                (first,)).fetchone()
        finally:
            db.close()

    def max_id(self, p):
        db = self.db(p)
        try:
            return db.execute("SELECT coalesce(max(id), 0) FROM tasks"
                              ).fetchone()[0]
        finally:
            db.close()

    def start_agents(self, p, k, slots):
        per = max(1, slots // k)
        for i in range(k):
            node = "b%d-%d" % (k, i)
            argv = [os.path.join(self.bin, "pilot-agent"), "--connect",
                    p["agent"], "--keys", os.path.join(p["dir"], "keys"),
                    "--node", node, "--cores", "0-%d" % (per - 1),
                    "--bench", "--log",
                    os.path.join(p["dir"], "logs", "agent-%s.log" % node)]
            self.procs.append((p, subprocess.Popen(argv, env=self.env)))
        t = time.time()
        while time.time() - t < 120:
            st = json.loads(self.pilot_cmd(["status", "--json"], pid=p["id"]))
            if st.get("agents_up", 0) >= k:
                return
            time.sleep(0.2)
        raise RuntimeError("%d bench agents did not register" % k)

    # ---- scenario 1: no-op throughput ----
    #
    # Every system is timed by the wall clock of what a user runs, until
    # it returns (or, for sbatch, until squeue no longer lists the job),
    # at N and at N = 1 in the same repetition: wall(1) is the fixed cost
    # of a run, (wall(N) - wall(1)) / (N - 1) the cost of one more task.
    # What must happen before a run (pilot up, salloc) is its own row.

    def timed(self, argv, **kw):
        t0 = time.time()
        out = sh(argv, **kw)
        return time.time() - t0, out

    def s1_limit(self, n, p, opts=()):
        def one(k):
            return self.timed([os.path.join(self.tools, "limit")]
                              + list(opts) + ["-n", str(k), "-p", str(p),
                                              "/bin/true"])
        wall, out = one(n)
        wall1, _ = one(1)
        j = json.loads(out)
        r = {"wall": wall, "wall1": wall1, "inner_seconds": j["seconds"]}
        # its own CPU (spawns, reaps) and its children's (the tasks)
        if "self_user_s" in j:
            r["cpu_us_per_task"] = ((j["self_user_s"] + j["self_sys_s"])
                                    / n * 1e6)
            r["children_cpu_us_per_task"] = ((j["children_user_s"]
                                              + j["children_sys_s"])
                                             / n * 1e6)
        return r

    def s1_pilot(self, n, slurm):
        if slurm:
            with cluster_lock():
                return self._s1_pilot(n, True)
        return self._s1_pilot(n, False)

    def pilot_run(self, p, n, argv):
        """pilot submit (an array of n, or one task) and pilot wait --all
        on pilot p: the wall clock from before the submit to the wait's
        exit 0, and the database's times of those tasks."""
        first = self.max_id(p) + 1
        t0 = time.time()
        if n == 1:
            self.pilot_cmd(["submit", "--"] + argv, pid=p["id"],
                           stdout=False)
        else:
            self.submit_n(p, n, argv)
        t_sub = time.time()
        self.wait_all(p)
        t1 = time.time()
        count, done, sub, start, end = self.db_times(p, first)
        if done != n:
            raise RuntimeError("pilot: %s of %d tasks done" % (done, n))
        return {"wall": t1 - t0, "submit_seconds": t_sub - t0,
                "db_seconds": end - t0, "exec_seconds": end - start,
                "wait_after_end": t1 - end}

    def _s1_pilot(self, n, slurm):
        p = self.up(slurm=slurm)
        try:
            # pilot's own CPU: pilotd's and, on a local pilot, its agent's
            # (a Slurm pilot's agents are in job steps: not read)
            pids = {"pilotd": p["pid"]}
            if not slurm:
                pids.update({"agent": a for a in child_pids(p["pid"])
                             if proc_name(a) == "pilot-agent"})
            cpu0 = {k: cpu_seconds(v) for k, v in pids.items()}
            r = self.pilot_run(p, n, ["/bin/true"])
            cpu1 = {k: cpu_seconds(v) for k, v in pids.items()}
            r["wall1"] = self.pilot_run(p, 1, ["/bin/true"])["wall"]
        finally:
            self.down(p)
        for k in pids:
            r["cpu_us_per_task_" + k] = (cpu1[k] - cpu0[k]) / n * 1e6
        if "agent" in pids:
            r["cpu_us_per_task"] = sum((cpu1[k] - cpu0[k]) for k in pids
                                       ) / n * 1e6
        r["up_seconds"] = p["up_seconds"]
        return r

    def s1_shell(self, n, line):
        wall, _ = self.timed(["sh", "-c", line % n], stdout=False)
        wall1, _ = self.timed(["sh", "-c", line % 1], stdout=False)
        return {"wall": wall, "wall1": wall1}

    def s1_srun(self, nseq, nconc):
        """Both srun figures from one allocation: one step (wall(1)),
        'seq' steps one after another, then 'conc' steps 16 at a time,
        timed inside it; salloc until the script runs is the fixed cost
        of the allocation, the script's end until salloc returns its
        teardown."""
        script = (
            't0=$(date +%%s.%%N); srun --overlap -n1 -N1 /bin/true || '
            'exit 1; t1=$(date +%%s.%%N); for i in $(seq %d); do '
            'srun --overlap -n1 -N1 /bin/true || exit 1; done; '
            't2=$(date +%%s.%%N); seq %d | xargs -P16 -I{} '
            'srun --overlap -n1 -N1 /bin/true || exit 1; '
            't3=$(date +%%s.%%N); echo "times $t0 $t1 $t2 $t3"'
            % (nseq, nconc))
        with cluster_lock():
            ta = time.time()
            out = sh(["salloc", "-N4", "-n16", "--time=10", "bash", "-c",
                      script])
            tb = time.time()
        t = [float(x) for x in [l for l in out.splitlines()
                                if l.startswith("times ")][-1].split()[1:]]
        fixed = {"salloc_seconds": t[0] - ta, "teardown_seconds": tb - t[3],
                 "salloc_wall": tb - ta}
        return ({"wall": t[2] - t[1], "wall1": t[1] - t[0]},
                {"wall": t[3] - t[2], "wall1": t[1] - t[0]}, fixed)

    def squeue_gone(self, jobs, timeout=600):
        t = time.time()
        while time.time() - t < timeout:
            out = sh(["squeue", "-h", "-o", "%i", "-j", ",".join(jobs)],
                     check=False)
            if not out.strip():
                return time.time()
            time.sleep(0.1)
        raise RuntimeError("jobs %s still queued" % ",".join(jobs))

    def s1_sbatch(self, n):
        def one(k):
            t0 = time.time()
            j = sh(["sbatch", "--parsable", "--array=1-%d" % k, "-n1",
                    "-o", "/dev/null", "--wrap", "/bin/true"]).strip()
            return self.squeue_gone([j.split(";")[0]]) - t0
        with cluster_lock():
            wall = one(n)
            wall1 = one(1)
        return {"wall": wall, "wall1": wall1}

    def scenario1(self):
        c = self.cfg["s1"]
        runs = {k: [] for k in c}
        setup = {k: [] for k in ("pilot up --local", "pilot up --nodes 4",
                                 "salloc -N4 -n16")}
        ratio = {k: [] for k in c}
        vs_srun = []
        beyond = []
        # limit-16: the limit at the Slurm pilot's concurrency (4 nodes x
        # 4 cores, all of them on this machine), the pilot-slurm's ratio
        # limit-fork: fork() + exec, as libuv 1.44's uv_spawn() does
        order = ["limit", "pilot-local", "xargs", "parallel", "limit-16",
                 "pilot-slurm", "srun", "sbatch-array", "limit-fork"]
        order = [o for o in order if o in c or o == "srun"]
        for rep in range(self.cfg["reps"]):
            got = {}
            k = rep % len(order)
            for sysname in order[k:] + order[:k]:
                log("s1 rep %d: %s" % (rep + 1, sysname))
                if sysname == "limit":
                    got["limit"] = self.s1_limit(c["limit"], self.ncores)
                elif sysname == "limit-16":
                    got[sysname] = self.s1_limit(c[sysname], 16)
                elif sysname == "limit-fork":
                    got[sysname] = self.s1_limit(c[sysname], self.ncores,
                                                 ["-f"])
                elif sysname == "pilot-local":
                    got[sysname] = self.s1_pilot(c[sysname], False)
                    setup["pilot up --local"].append(
                        got[sysname]["up_seconds"])
                elif sysname == "pilot-slurm":
                    got[sysname] = self.s1_pilot(c[sysname], True)
                    setup["pilot up --nodes 4"].append(
                        got[sysname]["up_seconds"])
                elif sysname == "xargs":
                    got[sysname] = self.s1_shell(
                        c[sysname], "seq %%d | xargs -P %d -n 1 /bin/true"
                        % self.ncores)
                elif sysname == "parallel":
                    got[sysname] = self.s1_shell(
                        c[sysname], "seq %%d | parallel --will-cite -j %d "
                        "-N0 /bin/true" % self.ncores)
                elif sysname == "srun":
                    got["srun-seq"], got["srun-16"], fixed = self.s1_srun(
                        c["srun-seq"], c["srun-16"])
                    setup["salloc -N4 -n16"].append(fixed["salloc_seconds"])
                    got["srun-seq"].update(fixed)
                elif sysname == "sbatch-array":
                    got[sysname] = self.s1_sbatch(c[sysname])
            for name, r in got.items():
                n = c[name]
                r["tasks_per_s"] = n / r["wall"]
                r["per_task_ms"] = ((r["wall"] - r["wall1"]) / (n - 1) * 1e3
                                    if n > 1 else None)
                if "db_seconds" in r:
                    r["db_tasks_per_s"] = n / r["db_seconds"]
                runs[name].append(r)
            # N.B. after every rate is known: the order rotates, so the
            # limit may have run last in this repetition
            for name, r in got.items():
                lim = got["limit-16" if name == "pilot-slurm"
                          else "limit"]["tasks_per_s"]
                ratio[name].append(r["tasks_per_s"] / lim)
            # the srun comparison: pilot on Slurm against the better of the
            # two srun ways, per task (their N differ), wall clock
            # (a per-task time <= 0, wall(N) under wall(1) in the noise,
            # makes no ratio: it is left out, never clamped)
            sr = [got[k]["per_task_ms"] for k in ("srun-seq", "srun-16")
                  if (got[k]["per_task_ms"] or 0) > 0]
            ps = got["pilot-slurm"]["per_task_ms"] or 0
            vs_srun.append(min(sr) / ps if sr and ps > 0 else None)
            # pilot's own CPU a task beyond what the limit spends itself
            # (its spawns and reaps), in the same repetition
            pc = got.get("pilot-local", {}).get("cpu_us_per_task")
            lc = got.get("limit", {}).get("cpu_us_per_task")
            beyond.append(pc - lc if pc is not None and lc is not None
                          else None)
        self.res["s1"] = {
            name: {"n": c[name],
                   "tasks_per_s": summary([r["tasks_per_s"]
                                           for r in runs[name]]),
                   # own CPU a task: the limit's getrusage(RUSAGE_SELF),
                   # pilot-local's agent + pilotd (/proc/PID/stat)
                   "cpu_us_per_task": summary([r.get("cpu_us_per_task")
                                               for r in runs[name]]),
                   "children_cpu_us_per_task": summary(
                       [r.get("children_cpu_us_per_task")
                        for r in runs[name]]),
                   "agent_cpu_us_per_task": summary(
                       [r.get("cpu_us_per_task_agent") for r in runs[name]]),
                   "pilotd_cpu_us_per_task": summary(
                       [r.get("cpu_us_per_task_pilotd")
                        for r in runs[name]]),
                   "ratio_to_limit": summary(ratio[name]),
                   "wall1_seconds": summary([r["wall1"]
                                             for r in runs[name]]),
                   "per_task_ms": summary([r["per_task_ms"]
                                           for r in runs[name]]),
                   "db_tasks_per_s": summary([r.get("db_tasks_per_s")
                                              for r in runs[name]]),
                   "runs": runs[name]}
            for name in c}
        self.res["s1_setup"] = {k: summary(v) for k, v in setup.items()}
        self.res["s1_pilot_slurm_vs_best_srun"] = summary(vs_srun)
        self.res["s1_pilot_slurm_vs_best_srun_runs"] = vs_srun
        self.res["s1_cpu_beyond_limit"] = summary(beyond)

    # ---- scenario 2: daemon capacity, bench agents ----

    def s2_one(self, k, n, slots, profile, agents=None, what="s2"):
        """n no-op tasks (/bin/true, never run) through a local pilot
        with no agent of its own and k bench agents, from the submit
        until all are done: rates, pilotd's CPU per task and its RSS
        (and the agents' CPU per task when they are one process).
        agents: None, k 'pilot-agent --bench' of 'slots' slots in all
        (start_agents()); or agents(p, t_up), which starts them, waits
        until they are up and returns (figures to add, the pid of their
        one process or None); t_up: time.time() before 'pilot up'.
        With 'profile', pilotd is perf-recorded during the tasks."""
        t_up = time.time()
        p = self.up(agents=0)
        perf = None
        out, apid = {}, None
        try:
            if agents is None:
                self.start_agents(p, k, slots)
            else:
                out, apid = agents(p, t_up)
            pid = p["pid"]
            if profile:
                perf = subprocess.Popen(
                    ["perf", "record", "-g", "-F", "999", "-p", str(pid),
                     "-o", profile + ".data"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(0.5)
            cpu0 = cpu_seconds(pid)
            acpu0 = cpu_seconds(apid) if apid else 0
            t0 = time.time()
            self.submit_n(p, n, ["/bin/true"])
            self.wait_all(p)
            t1 = time.time()
            cpu1 = cpu_seconds(pid)
            acpu1 = cpu_seconds(apid) if apid else 0
            rss = rss_kb(pid)
            if perf:
                perf.send_signal(signal.SIGINT)
                perf.wait()
            count, done, sub, start, end = self.db_times(p)
        finally:
            self.down(p)
        if done != n:
            raise RuntimeError("%s: %s of %d tasks done" % (what, done, n))
        out.update({"tasks_per_s": n / (t1 - t0), "seconds": t1 - t0,
                    "db_tasks_per_s": n / (end - t0), "db_seconds": end - t0,
                    "cpu_s": cpu1 - cpu0,
                    "cpu_s_per_1000": (cpu1 - cpu0) / n * 1000,
                    "cpu_us_per_task": (cpu1 - cpu0) / n * 1e6,
                    "rss_kb": rss})
        if apid:
            out["agents_cpu_us_per_task"] = (acpu1 - acpu0) / n * 1e6
        return out

    def scenario2(self):
        c = self.cfg["s2"]
        runs = {k: [] for k in c["agents"]}
        ks = c["agents"]
        for rep in range(self.cfg["reps"]):
            for k in ks[rep % len(ks):] + ks[:rep % len(ks)]:
                log("s2 rep %d: %d bench agents, %d tasks" % (rep + 1, k,
                                                              c["n"]))
                prof = None
                if self.profile and k == 16 and rep == 0:
                    prof = os.path.join(self.profile, "pilotd-16agents")
                runs[k].append(self.s2_one(k, c["n"], c["slots"], prof))
                if prof:
                    self.res["s2_profile"] = self.perf_report(prof + ".data")
        self.res["s2"] = {
            "%d agents" % k: {
                "n": c["n"], "slots": c["slots"],
                "tasks_per_s": summary([r["tasks_per_s"] for r in runs[k]]),
                "db_tasks_per_s": summary([r["db_tasks_per_s"]
                                           for r in runs[k]]),
                "cpu_us_per_task": summary([r["cpu_us_per_task"]
                                            for r in runs[k]]),
                "runs": runs[k]} for k in ks}

    def perf_report(self, data):
        out = sh(["perf", "report", "-i", data, "--stdio", "--no-children",
                  "--sort", "symbol", "-g", "none", "--percent-limit", "0.7"],
                 check=False)
        lines = [l for l in out.splitlines() if l.strip()
                 and not l.startswith("#")]
        log("perf report of %s:\n%s" % (data, "\n".join(lines[:30])))
        return lines[:40]

    # ---- scenario 3: one million tasks submitted ----

    def s3_one(self, method, n, jsonl):
        p = self.up(agents=0)
        try:
            pid = p["pid"]
            rss0 = rss_kb(pid)
            t0 = time.time()
            if method == "array":
                self.pilot_cmd(["submit", "--array", "0-%d" % (n - 1), "--",
                                "/bin/true", "{}"], pid=p["id"],
                               stdout=False, timeout=600)
            elif method == "jsonl":
                self.pilot_cmd(["submit", "--file", jsonl], pid=p["id"],
                               stdout=False, timeout=600)
            else:
                self.feed(p, n, ["/bin/true", "{}"], chunk=5000)
            dt = time.time() - t0
            rss1 = rss_kb(pid)
            count = self.db_times(p)[0]
            # how long one batch held pilotd's loop (issue 12: <= 0.1 s)
            st = json.loads(self.pilot_cmd(["status", "--json"],
                                           pid=p["id"]))
            held = st.get("longest_batch")
        finally:
            self.down(p)
        if count != n:
            raise RuntimeError("s3 %s: %s of %d tasks stored" % (method,
                                                                count, n))
        return {"seconds": dt, "rss_kb_before": rss0, "rss_kb": rss1,
                "bytes_per_task": (rss1 - rss0) * 1024 / n,
                "longest_batch_s": held}

    def scenario3(self):
        n = self.cfg["s3"]["n"]
        methods = [m for m in ("array", "jsonl") if self.has[
            "array" if m == "array" else "file"]]
        if not methods:
            methods.append("feed")
        jsonl = None
        if "jsonl" in methods:
            jsonl = os.path.join(self.home, "tasks.jsonl")
            with open(jsonl, "w") as f:
                for i in range(n):
                    f.write('{"argv": ["/bin/true", "%d"]}\n' % i)
        runs = {m: [] for m in methods}
        for rep in range(self.cfg["s3"].get("reps", self.cfg["reps"])):
            for m in methods[rep % len(methods):] + methods[:rep %
                                                            len(methods)]:
                log("s3 rep %d: %d tasks by %s" % (rep + 1, n, m))
                runs[m].append(self.s3_one(m, n, jsonl))
        if jsonl:
            os.unlink(jsonl)
        self.s3_acks()
        self.res["s3"] = {
            m: {"n": n,
                "seconds": summary([r["seconds"] for r in runs[m]]),
                "bytes_per_task": summary([r["bytes_per_task"]
                                           for r in runs[m]]),
                "longest_batch_s": summary([r["longest_batch_s"]
                                            for r in runs[m]]),
                "runs": runs[m]} for m in methods}

    def s3_ack(self, n, sync):
        """n submit requests of one task each, one after another over one
        connection (feed -c 1): each waits for its acknowledgement, which
        pilotd sends after its commit and, unless PILOT_ACK_SYNC=0, after
        an fsync of the WAL (issue 12: a crash of the node then loses no
        acknowledged task)."""
        p = self.up(agents=0, extra_env={"PILOT_ACK_SYNC":
                                         "1" if sync else "0"})
        try:
            j = self.feed(p, n, ["/bin/true"], chunk=1)
            count = self.db_times(p)[0]
        finally:
            self.down(p)
        if count != n:
            raise RuntimeError("s3 ack: %s of %d tasks stored" % (count, n))
        return {"seconds": j["seconds"], "tasks_per_s": n / j["seconds"]}

    def s3_acks(self):
        n = self.cfg["s3"].get("ack_n", 2000)
        kinds = ["synced", "not synced"]
        runs = {k: [] for k in kinds}
        cost = []
        for rep in range(self.cfg["s3"].get("reps", self.cfg["reps"])):
            got = {}
            for k in kinds[rep % 2:] + kinds[:rep % 2]:
                log("s3 rep %d: %d submits of one task, WAL %s before "
                    "each ack" % (rep + 1, n, k))
                got[k] = self.s3_ack(n, k == "synced")
                runs[k].append(got[k])
            cost.append(got["not synced"]["tasks_per_s"]
                        / got["synced"]["tasks_per_s"])
        self.res["s3_ack"] = {
            k: {"n": n, "tasks_per_s": summary([r["tasks_per_s"]
                                                for r in runs[k]]),
                "runs": runs[k]} for k in kinds}
        self.res["s3_ack"]["nosync_over_sync"] = summary(cost)

    # ---- scenario 4: latency on an idle pilot ----

    def s4_cli(self, p, n):
        """n x /bin/true one after another through the CLI, as a user
        would: 'pilot submit -- /bin/true', then 'pilot wait ID'.  Per
        task, seconds from before the submit command starts to its exit,
        to the task's start_time (the agent's clock: the same host), and
        to the wait command's exit 0."""
        r = {"submit": [], "start": [], "wait": []}
        db = self.db(p)
        try:
            for _ in range(n):
                t0 = time.time()
                tid = self.pilot_cmd(["submit", "--", "/bin/true"],
                                     pid=p["id"]).strip()
                t1 = time.time()
                self.pilot_cmd(["wait", tid], pid=p["id"], stdout=False)
                t2 = time.time()
                start = db.execute("SELECT start_time FROM tasks WHERE "
                                   "id = ?", (int(tid),)).fetchone()[0]
                r["submit"].append(t1 - t0)
                r["start"].append(start - t0)
                r["wait"].append(t2 - t0)
        finally:
            db.close()
        return r

    def scenario4(self):
        c = self.cfg["s4"]
        n = c["n"]
        runs = []
        for rep in range(self.cfg["reps"]):
            log("s4 rep %d: %d tasks one after another over one "
                "connection, %d by the CLI" % (rep + 1, n, c["cli_n"]))
            p = self.up()
            try:
                j = json.loads(sh([os.path.join(self.tools, "feed"), "-l",
                                   p["dir"], str(n), "--", "/bin/true"]))
                j.update({"cli_" + k: v for k, v in
                          self.s4_cli(p, c["cli_n"]).items()})
            finally:
                self.down(p)
            if c.get("cli_slurm_n"):
                log("s4 rep %d: %d tasks by the CLI on a Slurm pilot"
                    % (rep + 1, c["cli_slurm_n"]))
                with cluster_lock():
                    p = self.up(slurm=True)
                    try:
                        j.update({"slurm_" + k: v for k, v in
                                  self.s4_cli(p, c["cli_slurm_n"]).items()})
                    finally:
                        self.down(p)
            runs.append({k + "_" + q: pct(v, f) * 1000
                         for k, v in j.items() if isinstance(v, list)
                         for q, f in (("p50", 0.5), ("p99", 0.99))})
        self.res["s4"] = {"n": n, "cli_n": c["cli_n"],
                          "cli_slurm_n": c.get("cli_slurm_n", 0),
                          "poll_interval_ms": 1.0,
                          "ms": {k: summary([r[k] for r in runs])
                                 for k in runs[0]},
                          "runs": runs}

    # ---- scenario 5: pipeline ----

    def s5_pilot(self, c):
        with cluster_lock():
            p = self.up(slurm=True)
            try:
                r = self._s5_pilot(p, c)
            finally:
                self.down(p)
        r["up_seconds"] = p["up_seconds"]
        return r

    def _s5_pilot(self, p, c):
        sleep = ["sleep", str(c["sleep"])]
        t0 = time.time()
        if self.has["after"] and self.has["array"]:
            # as the sbatch chain: one array a stage, after the last one
            prev = None
            for s in range(c["stages"]):
                argv = ["submit", "--array", "1-%d" % c["width"]]
                if prev:
                    argv += ["--after", prev]
                prev = self.pilot_cmd(argv + ["--"] + sleep,
                                      pid=p["id"]).strip()
            self.wait_all(p)
            t1 = time.time()
        else:
            # no --after yet: the chain is kept here, polling the state
            # database every 5 ms for the stage's end
            db = sqlite3.connect("file:%s/state.db?mode=ro" % p["dir"],
                                 uri=True, timeout=30)
            for s in range(c["stages"]):
                j = self.feed(p, c["width"], sleep)
                while True:
                    row = db.execute(
                        "SELECT count(*) FROM tasks WHERE id BETWEEN ? AND ? "
                        "AND state IN ('done', 'failed', 'canceled', "
                        "'timeout')", (j["first_id"], j["last_id"])
                    ).fetchone()
                    if row[0] == c["width"]:
                        break
                    time.sleep(0.005)
            db.close()
            t1 = time.time()
        count, done, sub, start, end = self.db_times(p)
        if done != c["stages"] * c["width"]:
            raise RuntimeError("s5 pilot: %s tasks done" % done)
        return {"seconds": t1 - t0, "db_seconds": end - t0}

    def s5_sbatch(self, c):
        with cluster_lock():
            t0 = time.time()
            jobs = []
            for s in range(c["stages"]):
                argv = ["sbatch", "--parsable", "--array=1-%d" % c["width"],
                        "-n1", "-o", "/dev/null"]
                if jobs:
                    argv.append("--dependency=afterok:%s" % jobs[-1])
                jobs.append(sh(argv + ["--wrap", "sleep %s" % c["sleep"]])
                            .strip().split(";")[0])
            return {"seconds": self.squeue_gone(jobs) - t0}

    def s5_srun(self, c):
        stage = " ".join(["srun --overlap -n1 -N1 sleep %s &" % c["sleep"]]
                         * c["width"])
        script = "for s in $(seq %d); do %s wait; done" % (c["stages"],
                                                           stage)
        with cluster_lock():
            t0 = time.time()
            j = sh(["sbatch", "--parsable", "-N4", "-n16", "-o", "/dev/null",
                    "--wrap", script]).strip().split(";")[0]
            return {"seconds": self.squeue_gone([j]) - t0}

    def scenario5(self):
        c = self.cfg["s5"]
        work = c["stages"] * c["sleep"]
        systems = ["pilot", "sbatch-chain", "srun-steps"]
        runs = {k: [] for k in systems}
        ratio = []
        for rep in range(self.cfg["reps"]):
            got = {}
            for name in systems[rep % 3:] + systems[:rep % 3]:
                log("s5 rep %d: %s" % (rep + 1, name))
                if name == "pilot":
                    got[name] = self.s5_pilot(c)
                elif name == "sbatch-chain":
                    got[name] = self.s5_sbatch(c)
                else:
                    got[name] = self.s5_srun(c)
            for k, v in got.items():
                v["overhead"] = v["seconds"] - work
                if "db_seconds" in v:
                    v["db_overhead"] = v["db_seconds"] - work
                runs[k].append(v)
            # no floor: an overhead at or under 0 makes no ratio
            po = got["pilot"]["overhead"]
            ratio.append(got["sbatch-chain"]["overhead"] / po if po > 0
                         else None)
        self.res["s5"] = {k: {"seconds": summary([r["seconds"]
                                                   for r in runs[k]]),
                              "overhead": summary([r["overhead"]
                                                   for r in runs[k]]),
                              "db_overhead": summary([r.get("db_overhead")
                                                      for r in runs[k]]),
                              "runs": runs[k]} for k in systems}
        self.res["s5"]["pilot_up_seconds"] = summary(
            [r["up_seconds"] for r in runs["pilot"]])
        # for a user who starts a pilot for this pipeline alone
        self.res["s5"]["pilot_overhead_with_up"] = summary(
            [r["overhead"] + r["up_seconds"] for r in runs["pilot"]])
        self.res["s5"]["work_seconds"] = work
        self.res["s5"]["tasks"] = c["stages"] * c["width"]
        self.res["s5"]["pilot_how"] = (
            "pilot submit --array --after" if self.has["after"]
            and self.has["array"] else "chained by bench.py (no --after)")
        self.res["s5"]["sbatch_over_pilot"] = summary(ratio)
        self.res["s5"]["sbatch_over_pilot_runs"] = ratio

    # ---- scenario 6: the pool (bench/pool.py) ----

    def scenario6(self):
        pool.scenario6(self, sys.modules[__name__])

    # ---- scenario 7: pilot.Executor (bench/pyexec.py) ----

    def scenario7(self):
        pyexec.scenario7(self, sys.modules[__name__])

    # ---- scenario 8: output at scale (bench/output.py) ----

    def scenario8(self):
        output.scenario8(self, sys.modules[__name__])

    # ---- scenario 9: 1,000 agents (bench/scale.py) ----

    def scenario9(self):
        scale.scenario9(self, sys.modules[__name__])

    # ---- scenario 10: 10 million queued (bench/queue10m.py) ----

    def scenario10(self):
        queue10m.scenario10(self, sys.modules[__name__])

    def cleanup(self):
        for p in list(self.pilots):
            log("taking down pilot %s" % p["id"])
            if p["slurm"]:
                with cluster_lock():
                    self.down(p)
            else:
                self.down(p)
        for _, a in self.procs:
            if a.poll() is None:
                a.kill()
                a.wait()
        shutil.rmtree(self.home, ignore_errors=True)


# ---- the table ----

def fmt(v, unit):
    if v is None:
        return "-"
    if unit in ("tasks/s",):
        return "%.0f" % v if v >= 100 else "%.1f" % v
    if unit == "x":
        return "%.2f" % v
    if unit in ("ms", "s", "us/task", "B/task", "%"):
        return "%.2f" % v if abs(v) < 100 else "%.0f" % v
    return "%g" % v


# what each system's clock covers in scenario 1
S1_CLOCK = {
    "limit": "wall: the command", "limit-16": "wall: the command",
    "limit-fork": "wall: the command", "xargs": "wall: the command",
    "parallel": "wall: the command",
    "pilot-local": "wall: submit .. wait exits 0",
    "pilot-slurm": "wall: submit .. wait exits 0",
    "srun-seq": "wall: the srun commands (in salloc)",
    "srun-16": "wall: the srun commands (in salloc)",
    "sbatch-array": "wall: sbatch .. squeue empty",
}


def cell(s, unit):
    """median, and (min-max) when there were several runs."""
    if s is None:
        return "-"
    if len(s["runs"]) > 1:
        return "%s (%s-%s)" % (fmt(s["median"], unit), fmt(s["min"], unit),
                               fmt(s["max"], unit))
    return fmt(s["median"], unit)


def s1_table(b):
    r = b.res["s1"]
    out = [("system", "N", "clock", "tasks/s", "/limit", "wall(1) s",
            "per task ms", "pilot db tasks/s")]
    for k, v in r.items():
        out.append((k, "{:,}".format(v["n"]), S1_CLOCK.get(k, "wall"),
                    cell(v["tasks_per_s"], "tasks/s"),
                    cell(v["ratio_to_limit"], "x")
                    if k not in ("limit", "limit-16") else "",
                    cell(v["wall1_seconds"], "s"),
                    cell(v["per_task_ms"], "ms"),
                    cell(v["db_tasks_per_s"], "tasks/s")
                    if v["db_tasks_per_s"] else ""))
    return out


def rows(b):
    r = b.res
    out = []    # (scenario, system, n, clock, unit, summary, ratio summary)

    def add(sc, sysname, n, clock, unit, s, ratio=None):
        out.append((sc, sysname, n, clock, unit, s, ratio))
    if "s1_setup" in r:
        for k, v in r["s1_setup"].items():
            add("1 set-up", k, 1, "wall: until agents registered"
                if k.startswith("pilot") else "wall: salloc .. script runs",
                "s", v)
    if "s1" in r:
        s1 = r["s1"]
        # the ratios with the rate they are taken against beside them: a
        # machine that spawns slowly hides pilot's cost in the ratio
        for name, lim in (("pilot-local", "limit"),
                          ("pilot-slurm", "limit-16")):
            if name not in s1 or lim not in s1:
                continue
            add("1 no-op", lim + " (the limit)", s1[lim]["n"],
                "wall: the command", "tasks/s", s1[lim]["tasks_per_s"])
            add("1 no-op", "%s / %s" % (name, lim), s1[name]["n"],
                "wall, same repetition", "x", s1[name]["ratio_to_limit"])
        if "limit" in s1:
            add("1 no-op CPU", "limit: its own (spawn, reap)",
                s1["limit"]["n"], "getrusage(RUSAGE_SELF)", "us/task",
                s1["limit"].get("cpu_us_per_task"))
            add("1 no-op CPU", "limit: its tasks", s1["limit"]["n"],
                "getrusage(RUSAGE_CHILDREN)", "us/task",
                s1["limit"].get("children_cpu_us_per_task"))
        if "pilot-local" in s1:
            v = s1["pilot-local"]
            for k, what in (("cpu_us_per_task", "agent + pilotd"),
                            ("agent_cpu_us_per_task", "agent"),
                            ("pilotd_cpu_us_per_task", "pilotd")):
                add("1 no-op CPU", "pilot-local: " + what, v["n"],
                    "/proc/PID/stat utime+stime", "us/task", v.get(k))
            add("1 no-op CPU", "pilot-local beyond the limit's own", v["n"],
                "same repetition", "us/task", r.get("s1_cpu_beyond_limit"))
    if "s2" in r:
        for k, v in r["s2"].items():
            add("2 capacity", "pilotd, " + k, v["n"],
                "wall: submit .. wait exits 0", "tasks/s", v["tasks_per_s"])
            add("2 capacity", "pilotd, " + k + " internal", v["n"],
                "pilot db: submit .. last end", "tasks/s",
                v.get("db_tasks_per_s"))
            add("2 capacity", "pilotd CPU, " + k, v["n"],
                "pilotd utime+stime", "us/task", v["cpu_us_per_task"])
    if "s3" in r:
        for k, v in r["s3"].items():
            add("3 submit", k + ": all acked", v["n"],
                "wall: the submit command", "s", v["seconds"])
            add("3 submit", k + ": pilotd RSS", v["n"], "pilotd VmRSS",
                "B/task", v["bytes_per_task"])
            if "longest_batch_s" in v:
                add("3 submit", k + ": longest loop stall", v["n"],
                    "pilotd: longest batch (status)", "s",
                    v["longest_batch_s"])
    if "s3_ack" in r:
        for k in ("synced", "not synced"):
            v = r["s3_ack"][k]
            add("3 submit", "1 task a request, WAL %s before the ack%s"
                % (k, "" if k == "synced" else " (PILOT_ACK_SYNC=0)"),
                v["n"], "wall: feed -c 1, each acked", "tasks/s",
                v["tasks_per_s"])
    if "s4" in r:
        s4 = r["s4"]
        names = [
            ("cli_submit", "local, CLI: submit exits", "cli_n",
             "wall: submit command"),
            ("cli_start", "local, CLI: submit-to-start", "cli_n",
             "wall: submit .. start_time"),
            ("cli_wait", "local, CLI: submit-to-wait-exit", "cli_n",
             "wall: submit .. wait ID exits"),
            ("slurm_submit", "slurm, CLI: submit exits", "cli_slurm_n",
             "wall: submit command"),
            ("slurm_start", "slurm, CLI: submit-to-start", "cli_slurm_n",
             "wall: submit .. start_time"),
            ("slurm_wait", "slurm, CLI: submit-to-wait-exit", "cli_slurm_n",
             "wall: submit .. wait ID exits"),
            ("ack", "local, rpc: submit ack", "n",
             "one connection: request .. reply"),
            ("start", "local, rpc: submit-to-start", "n",
             "one connection: request .. start_time"),
            ("report", "local, rpc: end-to-report", "n",
             "end_time .. list shows it (1 ms polls)"),
            ("queue", "local: queue (pilotd's times)", "n",
             "pilot db: start - submit_time")]
        for key, name, nkey, clock in names:
            for q in ("p50", "p99"):
                if key + "_" + q in s4["ms"]:
                    add("4 latency", "%s %s" % (name, q), s4[nkey], clock,
                        "ms", s4["ms"][key + "_" + q])
    if "s5" in r:
        s5 = r["s5"]
        add("5 pipeline", "pilot up --nodes 4", 1,
            "wall: until agents registered", "s", s5["pilot_up_seconds"])
        for k, clock in (("pilot", "wall: submit .. wait exits 0"),
                         ("sbatch-chain", "wall: sbatch .. squeue empty"),
                         ("srun-steps", "wall: sbatch .. squeue empty")):
            add("5 pipeline", k + " overhead", s5["tasks"], clock, "s",
                s5[k]["overhead"])
        add("5 pipeline", "pilot overhead internal", s5["tasks"],
            "pilot db: submit .. last end", "s", s5["pilot"]["db_overhead"])
        add("5 pipeline", "pilot overhead + pilot up", s5["tasks"],
            "wall: up .. wait exits 0", "s", s5["pilot_overhead_with_up"])
    if "s6" in r:
        pool.rows(r["s6"], add)
    if "s7" in r:
        pyexec.rows(r["s7"], add)
    if "s8" in r:
        output.rows(r["s8"], add)
    if "s9" in r:
        scale.rows(r["s9"], add)
    if "s10" in r:
        queue10m.rows(r["s10"], add)
    return out


def targets(b):
    r = b.res
    t = []

    def judge(name, s, ok, fmtv, why=None):
        if s is None:
            t.append((name, "-", why or "not measured"))
        else:
            t.append((name, fmtv % s["median"],
                      "met" if ok(s["median"]) else "NOT met"))
    if "s1" in r:
        s1 = r["s1"]

        def with_limit(lim):
            # the limit's own rate beside the ratio (issue 16)
            if t and t[-1][1] != "-" and s1.get(lim):
                t[-1] = (t[-1][0], "%s (%s %.0f/s)" % (
                    t[-1][1], lim, s1[lim]["tasks_per_s"]["median"]),
                    t[-1][2])
        judge("no-op: pilot --local / limit >= 0.90 (wall)",
              s1["pilot-local"]["ratio_to_limit"], lambda x: x >= 0.9,
              "%.2f")
        with_limit("limit")
        if "pilot-slurm" in s1:
            judge("no-op: pilot on Slurm / limit-16 >= 0.85 (wall)",
                  s1["pilot-slurm"]["ratio_to_limit"], lambda x: x >= 0.85,
                  "%.2f")
            with_limit("limit-16")
        judge("no-op: pilot's own CPU beyond the limit's < 50 us/task",
              r.get("s1_cpu_beyond_limit"), lambda x: x < 50, "%.0f us",
              "no CPU figure (pilot-local or limit not run)")
        judge("no-op: pilot on Slurm / best srun >= 20x (wall, per task)",
              r["s1_pilot_slurm_vs_best_srun"], lambda x: x >= 20, "%.1fx",
              "no ratio: pilot's per-task time was <= 0")
    if "s2" in r and "16 agents" in r["s2"]:
        # issue 16's targets (docs/PERFORMANCE.md, "pilotd, scenario 2")
        judge("capacity: 16 bench agents >= 60,000 tasks/s (wall)",
              r["s2"]["16 agents"]["tasks_per_s"], lambda x: x >= 60000,
              "%.0f/s")
        judge("capacity: pilotd CPU per task < 12 us",
              r["s2"]["16 agents"]["cpu_us_per_task"], lambda x: x < 12,
              "%.1f us")
    if "s3" in r:
        for m, v in r["s3"].items():
            if v["n"] >= 1000000:
                judge("submit %s: 1M acked < 20 s" % m, v["seconds"],
                      lambda x: x < 20, "%.1f s")
            else:
                t.append(("submit %s: 1M acked < 20 s" % m,
                          "%.1f s for %d" % (v["seconds"]["median"], v["n"]),
                          "not judged (QUICK: N=%d)" % v["n"]))
            judge("submit %s: pilotd RSS < 1024 B per queued task" % m,
                  v["bytes_per_task"], lambda x: x < 1024, "%.0f B")
            if "longest_batch_s" in v:
                judge("submit %s: longest loop stall <= 0.1 s" % m,
                      v["longest_batch_s"], lambda x: x <= 0.1, "%.2f s")
    if "s4" in r:
        judge("latency: idle submit-to-start p50 < 5 ms (CLI, local)",
              r["s4"]["ms"].get("cli_start_p50"), lambda x: x < 5,
              "%.2f ms")
        judge("latency: idle submit-to-start p50 < 1 ms (one connection)",
              r["s4"]["ms"]["start_p50"], lambda x: x < 1, "%.2f ms")
    if "s5" in r:
        judge("pipeline: sbatch overhead / pilot overhead >= 20x (wall)",
              r["s5"]["sbatch_over_pilot"], lambda x: x >= 20, "%.1fx",
              "no ratio: pilot's overhead was <= 0")
    if "s6" in r:
        pool.targets(r["s6"], judge)
    if "s7" in r:
        pyexec.targets(r["s7"], judge)
    if "s8" in r:
        output.targets(r["s8"], judge)
    if "s9" in r:
        scale.targets(r["s9"], judge)
    if "s10" in r:
        queue10m.targets(r["s10"], judge)
    return t


def print_rows(lines, f, right_from):
    w = [max(len(l[i]) for l in lines) for i in range(len(lines[0]))]
    for i, l in enumerate(lines):
        print("| " + " | ".join(c.ljust(w[k]) if k < right_from
                                else c.rjust(w[k])
                                for k, c in enumerate(l)) + " |", file=f)
        if i == 0:
            print("|" + "|".join("-" * (x + 2) for x in w) + "|", file=f)


def print_table(b, f=sys.stdout):
    if "s1" in b.res:
        print("Scenario 1, no-op throughput: N x /bin/true; each cell the "
              "median (min-max)\n", file=f)
        print_rows(s1_table(b), f, 3)
        print("tasks/s: N / wall(N).  /limit: tasks/s over the limit's "
              "(bench/limit, %d at a\ntime) in the same repetition; "
              "pilot-slurm's over limit-16's (16 at a time,\nthe Slurm "
              "pilot's slots, same machine).  wall(1): the same clock for "
              "one\ntask, the fixed cost of a run.  per task: (wall(N) - "
              "wall(1)) / (N - 1).\npilot db: N over the time from before "
              "the submit to the last end_time in\npilot's database "
              "(pilot's internal cost: no CLI start, no wait polling).\n"
              "What a run needs first (pilot up, salloc) is not in these "
              "clocks: see\n'1 set-up' below." % b.ncores, file=f)
        print(file=f)
    hdr = ("scenario", "system", "N", "clock", "unit", "median", "min",
           "max")
    lines = [hdr]
    for sc, name, n, clock, unit, s, ratio in rows(b):
        if s is None:
            lines.append((sc, name, "{:,}".format(n), clock, unit, "-", "-",
                          "-"))
            continue
        lines.append((sc, name, "{:,}".format(n), clock, unit,
                      fmt(s["median"], unit), fmt(s["min"], unit),
                      fmt(s["max"], unit)))
    if len(lines) > 1:
        print_rows(lines, f, 5)
        print("wall: from just before the command a user runs until it "
              "(or the user's wait)\nreturns; pilot db: the database's "
              "stamps, pilot's internal cost.", file=f)
        if "s6" in b.res:
            print(pool.NOTE, file=f)
        if "s7" in b.res:
            print(pyexec.NOTE, file=f)
        if "s8" in b.res:
            print(output.NOTE, file=f)
        if "s9" in b.res:
            print(scale.NOTE, file=f)
        if "s10" in b.res:
            print(queue10m.NOTE, file=f)
        print(file=f)
    tg = [("target", "measured", "result")] + targets(b)
    if len(tg) > 1:
        print_rows(tg, f, 3)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="small N, one repetition, 1M submission as 100k, "
                    "no 256 agents: under 2 minutes")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=0,
                    help="repetitions (default 3, QUICK 1)")
    ap.add_argument("--only", default="1,2,3,4,5,6,7,8,9,10",
                    help="scenarios to run, like 1,4")
    ap.add_argument("--profile", metavar="DIR",
                    help="perf record pilotd during scenario 2 with 16 "
                    "agents (first repetition); the report goes to DIR "
                    "and the JSON")
    ap.add_argument("--out", help="JSON file (default bench/results/"
                    "<timestamp>.json)")
    args = ap.parse_args()
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
        args.profile = os.path.abspath(args.profile)

    need = {"parallel": "parallel", "salloc": "slurm-client",
            "sbatch": "slurm-client", "squeue": "slurm-client"}
    if args.profile:
        need["perf"] = "linux-perf"
    missing = sorted({pkg for cmd, pkg in need.items()
                      if not shutil.which(cmd)})
    if missing:
        log("missing commands: install the Debian packages %s "
            "(scripts/install-deps.sh)" % " ".join(missing))
        return 2
    b = Bench(args)
    stamp = time.strftime("%Y%m%dT%H%M%S")
    out = args.out or os.path.join(HERE, "results", stamp + ".json")
    t0 = time.time()
    mode = "QUICK (small N, 1 repetition)" if b.quick else "full"
    log("%s run, %d cores, PILOT_BIN %s; CLI has %s" % (
        mode, b.ncores, b.bin,
        ", ".join("--" + k for k, v in b.has.items() if v) or
        "no --array/--file/--after"))
    if b.quick:
        log("QUICK: scenario 1 at N=%d, 2 without 256 agents, 3 with "
            "%d tasks instead of 1,000,000" % (b.cfg["s1"]["limit"],
                                               b.cfg["s3"]["n"]))
    if not b.has["array"] and not b.has["file"]:
        log("the CLI has no --array/--file yet: scenarios 1-3 submit with "
            "bench/feed (specs in bulk over the wire) instead")
    rc = 0
    try:
        for s in args.only.split(","):
            getattr(b, "scenario" + s.strip())()
    except (KeyboardInterrupt, Exception) as e:
        log("stopped: %s: %s" % (type(e).__name__, e))
        rc = 1
    finally:
        b.cleanup()
    doc = {"started": stamp, "seconds": time.time() - t0, "quick": b.quick,
           "host": os.uname().nodename, "cores": b.ncores,
           "config": b.cfg, "cli": b.has, "complete": rc == 0,
           "results": b.res,
           "targets": [{"target": a, "measured": m, "result": r}
                       for a, m, r in targets(b)],
           "command": "make bench" + (" QUICK=1" if b.quick else "")}
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
    print()
    print("pilot benchmark, %s, %s: %d cores, %.0f s" % (
        mode, stamp, b.ncores, time.time() - t0))
    print_table(b)
    print("\nJSON: %s" % os.path.relpath(out, ROOT))
    return rc


if __name__ == "__main__":
    sys.exit(main())
