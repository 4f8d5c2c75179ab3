#!/usr/bin/python3
"""bench/bench.py - `make bench`: pilot against the fork/exec limit and Slurm

Five scenarios (docs/PERFORMANCE.md says what each measures and why):
  1 no-op throughput: N x /bin/true by every system
  2 daemon capacity: bench agents (pilot-agent --bench) against one pilotd
  3 submission of 1,000,000 tasks, and pilotd's RSS with them queued
  4 latency on an idle pilot: submit-to-start, end-to-report
  5 pipeline overhead: 3 stages of 4 x 0.2 s tasks

Each repetition runs every system of a scenario once, in an order that
rotates from one repetition to the next; the table gives the median, min
and max over repetitions, and ratios are taken inside one repetition (these
2-core machines drift).  Results go to bench/results/<timestamp>.json.
Everything that touches Slurm holds /tmp/pilot-cluster.lock (flock), one
system at a time.  Standard library only; run by /usr/bin/python3.
"""
import argparse
import contextlib
import fcntl
import json
import math
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

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
    "s3": {"n": 1000000, "reps": 2},
    "s4": {"n": 1000},
    "s5": {"stages": 3, "width": 4, "sleep": 0.2},
}
QUICK = {
    "reps": 1,
    "s1": {"limit": 2000, "pilot-local": 2000, "limit-16": 1000,
           "pilot-slurm": 1000, "xargs": 2000, "parallel": 60,
           "srun-seq": 20, "srun-16": 32, "sbatch-array": 30},
    "s2": {"agents": [1, 16], "n": 30000, "slots": 1024},
    "s3": {"n": 100000},
    "s4": {"n": 200},
    "s5": {"stages": 3, "width": 4, "sleep": 0.2},
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

    def pilot_cmd(self, argv, pid=None, **kw):
        env = dict(self.env)
        if pid:
            env["PILOT_ID"] = pid
        return sh([os.path.join(self.bin, "pilot")] + argv, env=env, **kw)

    def up(self, slurm=False, agents=1):
        argv = ["up", "--wait", "--json"]
        if slurm:
            argv += ["--nodes", "4", "--time", "20:00"]
        else:
            argv += ["--local"] + (["--agents", "0"] if agents == 0 else [])
        j = json.loads(self.pilot_cmd(argv))
        p = {"id": j["pilot"], "dir": j["dir"], "slurm": slurm}
        self.pilots.append(p)
        with open(os.path.join(p["dir"], "endpoint")) as f:
            for line in f:
                k, _, v = line.strip().partition(" ")
                p[k] = v
        p["pid"] = int(p["pid"])
        return p

    def down(self, p):
        if p in self.pilots:
            self.pilots.remove(p)
        self.pilot_cmd(["down"], pid=p["id"], check=False, timeout=300)
        for a in [a for a in self.procs if a[0] is p]:
            try:
                a[1].wait(15)
            except subprocess.TimeoutExpired:
                a[1].kill()
                a[1].wait()
            self.procs.remove(a)
        shutil.rmtree(p["dir"], ignore_errors=True)

    def feed(self, p, n, argv, chunk=10000):
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

    def db_times(self, p):
        """count, done, min submit, min start, max end of every task."""
        db = sqlite3.connect("file:%s/state.db?mode=ro" % p["dir"], uri=True,
                             timeout=30)
        try:
            return db.execute(
                "SELECT count(*), sum(state = 'done'), min(submit_time), "
                "min(start_time), max(end_time) FROM tasks").fetchone()
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

    def s1_limit(self, n, p, opts=()):
        j = json.loads(sh([os.path.join(self.tools, "limit")] + list(opts)
                          + ["-n", str(n), "-p", str(p), "/bin/true"]))
        return j["tasks_per_s"], j

    def s1_pilot(self, n, slurm):
        if slurm:
            with cluster_lock():
                return self._s1_pilot(n, True)
        return self._s1_pilot(n, False)

    def _s1_pilot(self, n, slurm):
        p = self.up(slurm=slurm)
        try:
            t0 = time.time()
            self.submit_n(p, n, ["/bin/true"])
            self.wait_all(p)
            count, done, sub, start, end = self.db_times(p)
        finally:
            self.down(p)
        if done != n:
            raise RuntimeError("pilot: %s of %d tasks done" % (done, n))
        return n / (end - t0), {"seconds": end - t0,
                                "exec_seconds": end - start,
                                "exec_tasks_per_s": n / (end - start)}

    def s1_xargs(self, n):
        t0 = time.time()
        sh(["sh", "-c", "seq %d | xargs -P %d -n 1 /bin/true"
            % (n, self.ncores)], stdout=False)
        dt = time.time() - t0
        return n / dt, {"seconds": dt}

    def s1_parallel(self, n):
        t0 = time.time()
        sh(["sh", "-c", "seq %d | parallel --will-cite -j %d -N0 /bin/true"
            % (n, self.ncores)], stdout=False)
        dt = time.time() - t0
        return n / dt, {"seconds": dt}

    def s1_srun(self, nseq, nconc):
        """Both srun figures from one allocation: 'seq' steps one after
        another, then 'conc' steps 16 at a time; timed inside it."""
        script = (
            't0=$(date +%%s.%%N); for i in $(seq %d); do '
            'srun --overlap -n1 -N1 /bin/true || exit 1; done; '
            't1=$(date +%%s.%%N); seq %d | xargs -P16 -I{} '
            'srun --overlap -n1 -N1 /bin/true || exit 1; '
            't2=$(date +%%s.%%N); echo "times $t0 $t1 $t2"'
            % (nseq, nconc))
        with cluster_lock():
            out = sh(["salloc", "-N4", "-n16", "--time=10", "bash", "-c",
                      script])
        t = [float(x) for x in [l for l in out.splitlines()
                                if l.startswith("times ")][-1].split()[1:]]
        j = {"seq": t[1] - t[0], "conc": t[2] - t[1]}
        return ((nseq / j["seq"], {"seconds": j["seq"]}),
                (nconc / j["conc"], {"seconds": j["conc"]}))

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
        with cluster_lock():
            t0 = time.time()
            j = sh(["sbatch", "--parsable", "--array=1-%d" % n, "-n1",
                    "-o", "/dev/null", "--wrap", "/bin/true"]).strip()
            t1 = self.squeue_gone([j.split(";")[0]])
        return n / (t1 - t0), {"seconds": t1 - t0}

    def scenario1(self):
        c = self.cfg["s1"]
        runs = {k: [] for k in c}
        ratio = {k: [] for k in c}
        vs_srun = []
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
                elif sysname == "pilot-slurm":
                    got[sysname] = self.s1_pilot(c[sysname], True)
                elif sysname == "xargs":
                    got[sysname] = self.s1_xargs(c[sysname])
                elif sysname == "parallel":
                    got[sysname] = self.s1_parallel(c[sysname])
                elif sysname == "srun":
                    got["srun-seq"], got["srun-16"] = self.s1_srun(
                        c["srun-seq"], c["srun-16"])
                elif sysname == "sbatch-array":
                    got[sysname] = self.s1_sbatch(c[sysname])
            for name, (rate, detail) in got.items():
                runs[name].append(dict(detail, tasks_per_s=rate))
                ratio[name].append(rate / got["limit-16" if name ==
                                               "pilot-slurm" else "limit"][0])
            vs_srun.append(got["pilot-local"][0]
                           / max(got["srun-seq"][0], got["srun-16"][0]))
        self.res["s1"] = {
            name: {"n": c[name],
                   "tasks_per_s": summary([r["tasks_per_s"]
                                           for r in runs[name]]),
                   "ratio_to_limit": summary(ratio[name]),
                   "runs": runs[name]}
            for name in c}
        self.res["s1"]["pilot-local_vs_best_srun"] = summary(vs_srun)

    # ---- scenario 2: daemon capacity, bench agents ----

    def s2_one(self, k, n, slots, profile):
        p = self.up(agents=0)
        perf = None
        try:
            self.start_agents(p, k, slots)
            pid = p["pid"]
            if profile:
                perf = subprocess.Popen(
                    ["perf", "record", "-g", "-F", "999", "-p", str(pid),
                     "-o", profile + ".data"],
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                time.sleep(0.5)
            cpu0 = cpu_seconds(pid)
            t0 = time.time()
            self.submit_n(p, n, ["/bin/true"])
            self.wait_all(p)
            cpu1 = cpu_seconds(pid)
            rss = rss_kb(pid)
            if perf:
                perf.send_signal(signal.SIGINT)
                perf.wait()
            count, done, sub, start, end = self.db_times(p)
        finally:
            self.down(p)
        if done != n:
            raise RuntimeError("s2: %s of %d tasks done" % (done, n))
        return {"tasks_per_s": n / (end - t0), "seconds": end - t0,
                "cpu_s": cpu1 - cpu0,
                "cpu_s_per_1000": (cpu1 - cpu0) / n * 1000,
                "cpu_us_per_task": (cpu1 - cpu0) / n * 1e6,
                "rss_kb": rss}

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
                self.feed(p, n, ["/bin/true", "{}"], chunk=100000)
            dt = time.time() - t0
            rss1 = rss_kb(pid)
            count = self.db_times(p)[0]
        finally:
            self.down(p)
        if count != n:
            raise RuntimeError("s3 %s: %s of %d tasks stored" % (method,
                                                                count, n))
        return {"seconds": dt, "rss_kb_before": rss0, "rss_kb": rss1,
                "bytes_per_task": (rss1 - rss0) * 1024 / n}

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
        self.res["s3"] = {
            m: {"n": n,
                "seconds": summary([r["seconds"] for r in runs[m]]),
                "bytes_per_task": summary([r["bytes_per_task"]
                                           for r in runs[m]]),
                "runs": runs[m]} for m in methods}

    # ---- scenario 4: latency on an idle pilot ----

    def scenario4(self):
        n = self.cfg["s4"]["n"]
        runs = []
        for rep in range(self.cfg["reps"]):
            log("s4 rep %d: %d tasks one after another" % (rep + 1, n))
            p = self.up()
            try:
                j = json.loads(sh([os.path.join(self.tools, "feed"), "-l",
                                   p["dir"], str(n), "--", "/bin/true"]))
            finally:
                self.down(p)
            runs.append({k + "_" + q: pct(j[k], v) * 1000
                         for k in ("ack", "start", "report", "queue")
                         for q, v in (("p50", 0.5), ("p99", 0.99))})
        self.res["s4"] = {"n": n, "poll_interval_ms": 1.0,
                          "ms": {k: summary([r[k] for r in runs])
                                 for k in runs[0]},
                          "runs": runs}

    # ---- scenario 5: pipeline ----

    def s5_pilot(self, c):
        with cluster_lock():
            p = self.up(slurm=True)
            try:
                return self._s5_pilot(p, c)
            finally:
                self.down(p)

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
        count, done, sub, start, end = self.db_times(p)
        if done != c["stages"] * c["width"]:
            raise RuntimeError("s5 pilot: %s tasks done" % done)
        return end - t0

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
            return self.squeue_gone(jobs) - t0

    def s5_srun(self, c):
        stage = " ".join(["srun --overlap -n1 -N1 sleep %s &" % c["sleep"]]
                         * c["width"])
        script = "for s in $(seq %d); do %s wait; done" % (c["stages"],
                                                           stage)
        with cluster_lock():
            t0 = time.time()
            j = sh(["sbatch", "--parsable", "-N4", "-n16", "-o", "/dev/null",
                    "--wrap", script]).strip().split(";")[0]
            return self.squeue_gone([j]) - t0

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
                runs[k].append({"seconds": v, "overhead": v - work})
            ratio.append((got["sbatch-chain"] - work)
                         / max(got["pilot"] - work, 1e-3))
        self.res["s5"] = {k: {"seconds": summary([r["seconds"]
                                                   for r in runs[k]]),
                              "overhead": summary([r["overhead"]
                                                   for r in runs[k]]),
                              "runs": runs[k]} for k in systems}
        self.res["s5"]["work_seconds"] = work
        self.res["s5"]["tasks"] = c["stages"] * c["width"]
        self.res["s5"]["pilot_how"] = (
            "pilot submit --array --after" if self.has["after"]
            and self.has["array"] else "chained by bench.py (no --after)")
        self.res["s5"]["sbatch_over_pilot"] = summary(ratio)

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
    if unit in ("ms", "s", "us/task", "B/task"):
        return "%.2f" % v if v < 100 else "%.0f" % v
    return "%g" % v


def rows(b):
    r = b.res
    out = []    # (scenario, system, n, unit, summary, ratio summary)

    def add(sc, sysname, n, unit, s, ratio=None):
        out.append((sc, sysname, n, unit, s, ratio))
    if "s1" in r:
        for k, v in r["s1"].items():
            if k.endswith("srun"):
                continue
            add("1 no-op", k, v["n"], "tasks/s", v["tasks_per_s"],
                v["ratio_to_limit"] if k not in ("limit", "limit-16")
                else None)
    if "s2" in r:
        for k, v in r["s2"].items():
            add("2 capacity", "pilotd, " + k, v["n"], "tasks/s",
                v["tasks_per_s"])
            add("2 capacity", "pilotd CPU, " + k, v["n"], "us/task",
                v["cpu_us_per_task"])
    if "s3" in r:
        for k, v in r["s3"].items():
            add("3 submit", k + ": all acked", v["n"], "s", v["seconds"])
            add("3 submit", k + ": pilotd RSS", v["n"], "B/task",
                v["bytes_per_task"])
    if "s4" in r:
        for k, v in r["s4"]["ms"].items():
            name = {"ack": "submit ack", "start": "submit-to-start",
                    "report": "end-to-report",
                    "queue": "queue (pilotd's times)"}[k.split("_")[0]]
            add("4 latency", "%s %s" % (name, k.split("_")[1]),
                r["s4"]["n"], "ms", v)
    if "s5" in r:
        for k in ("pilot", "sbatch-chain", "srun-steps"):
            add("5 pipeline", k + " overhead",
                r["s5"]["tasks"], "s",
                r["s5"][k]["overhead"])
    return out


def targets(b):
    r = b.res
    t = []

    def judge(name, s, ok, fmtv):
        if s is None:
            t.append((name, "-", "not measured"))
        else:
            t.append((name, fmtv % s["median"],
                      "met" if ok(s["median"]) else "NOT met"))
    if "s1" in r:
        judge("no-op: pilot --local / limit >= 0.80",
              r["s1"]["pilot-local"]["ratio_to_limit"], lambda x: x >= 0.8,
              "%.2f")
        judge("no-op: pilot --local / best srun >= 20x",
              r["s1"]["pilot-local_vs_best_srun"], lambda x: x >= 20,
              "%.1fx")
    if "s2" in r and "16 agents" in r["s2"]:
        judge("capacity: 16 bench agents >= 50,000 tasks/s",
              r["s2"]["16 agents"]["tasks_per_s"], lambda x: x >= 50000,
              "%.0f/s")
        judge("capacity: pilotd CPU per task < 100 us",
              r["s2"]["16 agents"]["cpu_us_per_task"], lambda x: x < 100,
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
    if "s4" in r:
        judge("latency: idle submit-to-start p50 < 5 ms",
              r["s4"]["ms"]["start_p50"], lambda x: x < 5, "%.2f ms")
    if "s5" in r:
        judge("pipeline: sbatch overhead / pilot overhead >= 20x",
              r["s5"]["sbatch_over_pilot"], lambda x: x >= 20, "%.1fx")
    return t


def print_table(b, f=sys.stdout):
    hdr = ("scenario", "system", "N", "unit", "median", "min", "max",
           "/limit")
    lines = [hdr]
    for sc, name, n, unit, s, ratio in rows(b):
        if s is None:
            lines.append((sc, name, str(n), unit, "-", "-", "-", "-"))
            continue
        lines.append((sc, name, "{:,}".format(n), unit,
                      fmt(s["median"], unit), fmt(s["min"], unit),
                      fmt(s["max"], unit),
                      "%.2f" % ratio["median"] if ratio else ""))
    w = [max(len(l[i]) for l in lines) for i in range(len(hdr))]
    for i, l in enumerate(lines):
        print("| " + " | ".join(c.ljust(w[k]) if k < 4 else c.rjust(w[k])
                                for k, c in enumerate(l)) + " |", file=f)
        if i == 0:
            print("|" + "|".join("-" * (x + 2) for x in w) + "|", file=f)
    print("/limit: tasks/s over the limit's (bench/limit, %d at a time) in "
          "the same repetition;\npilot-slurm's over limit-16's (16 at a "
          "time, the Slurm pilot's slots, same machine)." % b.ncores,
          file=f)
    print(file=f)
    tg = [("target", "measured", "result")] + targets(b)
    if len(tg) > 1:
        w = [max(len(x[i]) for x in tg) for i in range(3)]
        for i, l in enumerate(tg):
            print("| " + " | ".join(c.ljust(w[k]) for k, c in enumerate(l))
                  + " |", file=f)
            if i == 0:
                print("|" + "|".join("-" * (x + 2) for x in w) + "|", file=f)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="small N, one repetition, 1M submission as 100k, "
                    "no 256 agents: under 2 minutes")
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--reps", type=int, default=0,
                    help="repetitions (default 3, QUICK 1)")
    ap.add_argument("--only", default="1,2,3,4,5",
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
