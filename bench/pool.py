"""bench/pool.py - scenario 6 of bench.py: the persistent MPI worker pool

A pool task (issue 13) calls a function in MPI workers started once by
'pilot pool start'.  The same function runs as a plain MPI program with
'pilot-worker --once LIB.so:SYM': as a --comm mpi task (one srun
--mpi=pmix step its agent starts) or as an srun step of one's own.  Three
parts, each system side by side in one run, on a 4-node Slurm pilot:

  latency     a 4-rank task over 2 nodes, from just before the user's
              command until the function was entered on every rank: the
              largest CLOCK_REALTIME the ranks of bench/poolfn.c's
              'stamp' print on entry (the same host: one clock).  (a) a
              pool task by 'pilot submit', 4 workers on 2 of the nodes;
              (b) the same pool task over one connection already open
              (build/bench/feed -l -p, a client that stays, as the
              Python client does): from just before its submit request;
              (c) a --comm mpi task of 'pilot-worker --once', placed on
              the 2 other nodes; (d) 'srun --mpi=pmix -N2 -n4
              pilot-worker --once' as a step of an allocation held
              meanwhile: the pilot's own Slurm job (srun --jobid
              --overlap, as the srun rows of scenario 1 run steps in a
              salloc), on those 2 other nodes.  The order rotates from
              one repetition to the next.
  throughput  an array of N no-op functions ('noop'), 1 rank and 4 ranks
              a task, from 'pilot submit' until 'pilot wait' exits 0:
              8 workers (2 on each node) against --comm mpi tasks of
              'pilot-worker --once LIB:noop' with the 8 cores free.
  cylon       the Radical-Cylon experiment in small: examples/pool's join
              and sort, 100 tasks of 4 ranks each (1M rows a task, its own
              seed), through the 8 workers and as --comm mpi tasks; the
              makespan of each (submit of the array to 'pilot wait' of
              all) and, for the pool, the share of the makespan that is
              not the functions' own time.  Every pool result is compared
              with the --comm mpi one of its seed, and a few with
              build/examples/poolcheck.

In each repetition the pool's systems and the --comm mpi ones run one
after the other, in an order that rotates, in one pilot; ratios are taken
inside a repetition.

Open MPI 4.1.4 here now and then fails to start: all ranks wait forever
in their first collective after a TCP connection was refused ("cannot
find a corresponding process entry for that peer"), or a rank dies in
MPI_Init (docs/pipeline.md); two --comm mpi tasks starting side by side
fail most.  Every --comm mpi task and srun step therefore has a time
limit (HANG_S), and such failures are counted, with what the task said,
and handled so: a latency sample or a no-op array with one is run again
(up to TRIES times: those figures are of runs without a failure, which
favours --comm mpi); in the cylon arrays the tasks that failed or hung
are submitted again with 'pilot submit --retry-failed' until all are
done, as a user would, on the clock (a hang costs its HANG_S).  A pool
task that fails stops the run.

Every MPI process of every system runs with OMPI_MCA_mpi_yield_when_idle=1,
the pool's default (these ranks share 2 cores: ranks that spin made a
4-rank communicator 10 times slower).

bench.py calls scenario6(b, h) with its Bench and its own module h (the
helpers sh, log, summary, cluster_lock), rows() and targets() for the
table.  Standard library only.
"""
import json
import os
import signal
import subprocess
import time

YIELD = "OMPI_MCA_mpi_yield_when_idle"
# seconds after which a --comm mpi task or srun step is taken as hung:
# 10 to 50 times what one takes here
HANG_S = {"noop": 15, "stamp": 15, "cylon": 30}
TRIES = 5


class StartFail(Exception):
    """--comm mpi tasks or an srun step hung (hit their time limit) or
    failed"""

    def __init__(self, what, hung, failed, detail=""):
        super().__init__("%s: %d hung, %d failed %s"
                         % (what, hung, failed, detail))
        self.what, self.hung, self.failed = what, hung, failed
        self.detail = detail


NOTE = """\
6 pool: every MPI rank (pool workers, --comm mpi tasks, srun steps) ran
with OMPI_MCA_mpi_yield_when_idle=1, the pool's default.  The srun steps
are steps of the pilot's job (srun --jobid --overlap), on the 2 nodes
beside the pool's.  start latency: from just before the command until
the function was entered on every rank (the max over ranks of the
CLOCK_REALTIME it prints on entry).  not-function share: 1 - (sum over
tasks of (end_time - start_time) * ranks) / (makespan * workers), with
start_time when every rank had entered the function and end_time when
every rank had returned (pilot's database, as pilot show --json prints
them); makespan: from before 'pilot submit --array' until 'pilot wait'
exits.  Start failures: --comm mpi tasks and srun steps that hung (past
HANG_S in bench/pool.py) or failed: a latency sample or no-op array with
one was run again; in the cylon arrays those tasks were submitted again
(pilot submit --retry-failed), on the makespan's clock."""


class Pool6:
    """One run of scenario 6 on Bench b (bench.py), helpers from h."""

    def __init__(self, b, h):
        self.b, self.h = b, h
        self.c = b.cfg["s6"]
        build = os.path.dirname(b.tools)
        self.fn = os.path.join(b.tools, "libpoolfn.so")
        self.ex = os.path.join(build, "examples", "libpoolex.so")
        self.check = os.path.join(build, "examples", "poolcheck")
        self.worker = os.path.join(b.bin, "pilot-worker")
        for f in (self.fn, self.ex, self.check, self.worker):
            if not os.path.exists(f):
                raise RuntimeError("%s is missing: 'make bench' builds it "
                                   "(with MPI)" % f)
        # what a --comm mpi task and an srun step add to their ranks'
        # environment: the pool's yield, and what Open MPI wants as root
        # (the agent adds those to --comm mpi tasks itself)
        self.mpi_env = {YIELD: "1"}
        self.launches = 0      # MPI starts of the --comm mpi and srun runs
        self.fails = []        # each StartFail
        if os.geteuid() == 0:
            self.mpi_env.update(OMPI_ALLOW_RUN_AS_ROOT="1",
                                OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")

    # ---- pilot ----

    def cmd(self, p, argv, **kw):
        return self.b.pilot_cmd(argv, pid=p["id"], **kw)

    def status(self, p):
        return json.loads(self.cmd(p, ["status", "--json"]))

    def show(self, p, tid):
        return json.loads(self.cmd(p, ["show", "--json", str(tid)]))

    def mpi_opts(self, kind):
        out = ["--comm", "mpi", "--timeout", str(HANG_S[kind])]
        for k, v in sorted(self.mpi_env.items()):
            out += ["--env", "%s=%s" % (k, v)]
        return out

    def pool_start(self, p, name, nodes=None):
        """2 workers on each node (or on 'nodes' of them), until ready"""
        argv = ["pool", "start", "--name", name, "--ranks-per-node", "2",
                "--wait", "--wait-timeout", "120"]
        if nodes:
            argv += ["--nodes", str(nodes)]
        t0 = time.time()
        self.cmd(p, argv, stdout=False, timeout=180)
        wall = time.time() - t0
        pl = [x for x in json.loads(self.cmd(p, ["pool", "ls", "--json"]))
              if x["name"] == name][0]
        if pl["state"] != "ready" or pl["ready"] != pl["workers"]:
            raise RuntimeError("pool %s: %s" % (name, pl))
        return {"wall": wall, "ready_s": pl.get("last_start_s"),
                "workers": pl["workers"],
                "nodelist": pl["nodelist"].split(",")}

    def pool_stop(self, p, name):
        """stop it and wait until its cores are free again"""
        self.cmd(p, ["pool", "stop", name], stdout=False)
        t = time.time()
        while time.time() - t < 60:
            if self.status(p)["cores"]["busy"] == 0:
                return
            time.sleep(0.05)
        raise RuntimeError("pool %s: its cores still busy 60 s after "
                           "stop" % name)

    def run_one(self, p, argv):
        """submit one task and wait for it: (id, seconds until the
        submit command exited, until the wait exited), t0"""
        t0 = time.time()
        tid = self.cmd(p, ["submit"] + argv).strip()
        t1 = time.time()
        self.cmd(p, ["wait", "--timeout", "150", tid], stdout=False,
                 timeout=180, check=False)
        return tid, t0, t1, time.time()

    def run_array(self, p, n, opts, argv, mpi=None):
        """one 'pilot submit --array 1-n', then 'pilot wait' of it.
        mpi 'redo': --comm mpi tasks, a start failure raises StartFail;
        'resubmit': those that failed or hung are submitted again
        ('pilot submit --retry-failed', then 'pilot wait'), as a user
        would, on the clock, up to TRIES rounds"""
        rest = ["--"] + argv if argv else []
        t0 = time.time()
        aids = [int(self.cmd(p, ["submit", "--array", "1-%d" % n] + opts
                             + rest).strip())]
        t_sub = time.time()
        again = 0
        if mpi:
            self.launches += n
        while True:
            self.cmd(p, ["wait", "--timeout", "1800", str(aids[-1])],
                     stdout=False, timeout=1830, check=False)
            hung, bad = self.db_one(
                p, "SELECT sum(state = 'timeout'), sum(state != 'done') "
                "FROM tasks WHERE array_id = ?", (aids[-1],))
            if not bad or not mpi:
                break
            e = StartFail("array %d" % aids[-1], hung, bad - hung,
                          self.why(p, aids[-1]))
            if mpi == "redo":
                raise e
            self.fails.append(e)
            if len(aids) == TRIES:
                raise RuntimeError("s6: %d rounds of start failures: %s"
                                   % (TRIES, e))
            self.h.log("s6: %s; submitted again" % e)
            aids.append(int(self.cmd(p, ["submit", "--retry-failed",
                                         str(aids[-1])] + opts
                                     + rest).strip()))
            self.launches += bad
            again += bad
        t1 = time.time()
        q = ",".join("%d" % a for a in aids)
        done, sub, end = self.db_one(
            p, "SELECT count(DISTINCT array_index), min(submit_time), "
            "max(end_time) FROM tasks WHERE array_id IN (%s) AND "
            "state = 'done'" % q, ())
        ids = self.db_all(p, "SELECT id FROM tasks WHERE array_id IN (%s) "
                          "AND state = 'done' ORDER BY array_index" % q)
        if done != n or len(ids) != n:
            raise RuntimeError("array %d: %s of %d tasks done; %s"
                               % (aids[-1], done, n, self.why(p, aids[-1])))
        return {"wall": t1 - t0, "tasks_per_s": n / (t1 - t0),
                "submit_seconds": t_sub - t0, "db_submit_s": sub - t0,
                "db_seconds": end - t0, "db_tasks_per_s": n / (end - t0),
                "resubmitted": again,
                "ids": [r[0] for r in ids]}

    def db_one(self, p, sql, args):
        db = self.b.db(p)
        try:
            return db.execute(sql, args).fetchone()
        finally:
            db.close()

    def db_all(self, p, sql):
        db = self.b.db(p)
        try:
            return db.execute(sql).fetchall()
        finally:
            db.close()

    def why(self, p, aid):
        """what the first tasks of array aid that did not end done say"""
        db = self.b.db(p)
        try:
            bad = db.execute("SELECT id, state, reason, exit_code, signal, "
                             "node FROM tasks WHERE array_id = ? AND state "
                             "!= 'done' ORDER BY id LIMIT 3",
                             (aid,)).fetchall()
        finally:
            db.close()
        out = []
        for tid, state, reason, code, sig, node in bad:
            err = self.cmd(p, ["logs", "--stderr", str(tid)], check=False)
            out.append("task %d %s (%s) exit %s signal %s on %s: %s"
                       % (tid, state, reason, code, sig, node,
                          " | ".join(err.strip().splitlines()[-6:])))
        return "; ".join(out)

    # ---- latency ----

    def entered(self, text, t0, what):
        """the last rank's entry into 'stamp', seconds after t0"""
        e = {}
        for line in text.splitlines():
            w = line.split()
            if len(w) == 3 and w[0] == "entered":
                e[int(w[1])] = float(w[2])
        if sorted(e) != [0, 1, 2, 3]:
            raise RuntimeError("%s: stamp printed ranks %s, not 0-3"
                               % (what, sorted(e)))
        return max(e.values()) - t0

    def lat_task(self, p, opts, argv, what):
        tid, t0, t_sub, t_wait = self.run_one(
            p, ["--ranks", "4", "--nodes", "2"] + opts
            + (["--"] + argv if argv else []))
        s = self.show(p, tid)
        if what == "comm-mpi" and s["state"] in ("timeout", "failed"):
            err = self.cmd(p, ["logs", "--stderr", tid], check=False)
            raise StartFail("%s task %s" % (what, tid),
                            int(s["state"] == "timeout"),
                            int(s["state"] == "failed"),
                            " | ".join(err.strip().splitlines()[-6:]))
        if s["state"] != "done" or s["attempts"] != 1:
            raise RuntimeError("%s: task %s %s after %d attempts"
                               % (what, tid, s["state"], s["attempts"]))
        return {"entered": self.entered(self.cmd(p, ["logs", tid]), t0,
                                        what),
                "returned": t_wait - t0, "submit_exit": t_sub - t0,
                "db_submit": s["submit_time"] - t0,
                "db_start": s["start_time"] - t0,
                "db_end": s["end_time"] - t0}

    def lat_conn(self, p):
        """the pool task over one connection: feed -l -p submits it and
        polls until it has ended (every 2 ms); the clock starts just
        before the request, the connection already made"""
        out = subprocess.run(
            [os.path.join(self.b.tools, "feed"), "-l", "-i", "2000", "-p",
             "lat", "-r", "4", "-N", "2", p["dir"], "1", "--",
             self.fn + ":stamp"], env=self.b.env, text=True,
            capture_output=True, timeout=120)
        if out.returncode != 0:
            raise RuntimeError("feed -l -p: exit %d: %s"
                               % (out.returncode, out.stderr.strip()[-500:]))
        j = json.loads(out.stdout)
        tid, t0 = str(j["ids"][0]), j["sent"][0]
        s = self.show(p, tid)
        if s["state"] != "done" or s["attempts"] != 1:
            raise RuntimeError("pool-conn: task %s %s after %d attempts"
                               % (tid, s["state"], s["attempts"]))
        return {"entered": self.entered(self.cmd(p, ["logs", tid]), t0,
                                        "pool-conn"),
                "returned": None, "submit_exit": j["ack"][0],
                "db_submit": s["submit_time"] - t0,
                "db_start": s["start_time"] - t0,
                "db_end": s["end_time"] - t0}

    def lat_srun(self, job, nodes):
        env = dict(self.b.env, **self.mpi_env)
        t0 = time.time()
        # (-t 2: Slurm ends the step if all else fails)
        sr = subprocess.Popen(["srun", "--jobid", str(job), "--overlap",
                               "--mpi=pmix", "-N2", "-n4", "-t", "2", "-w",
                               ",".join(nodes), self.worker, "--once",
                               self.fn + ":stamp"], env=env, text=True,
                              stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE)
        try:
            out, err = sr.communicate(timeout=HANG_S["stamp"])
        except subprocess.TimeoutExpired:
            # two SIGINTs within a second: srun ends the step
            for _ in range(2):
                sr.send_signal(signal.SIGINT)
                time.sleep(0.2)
            try:
                sr.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                sr.kill()
                sr.communicate()
            raise StartFail("srun step", 1, 0)
        t1 = time.time()
        if sr.returncode != 0:
            raise StartFail("srun step", 0, 1, "exit %d: %s" % (
                sr.returncode, " | ".join(err.strip().splitlines()[-6:])))
        return {"entered": self.entered(out, t0, "srun step"),
                "returned": t1 - t0}

    def lat_sample(self, p, i, systems, job, nodes):
        """one of each system, in the order of repetition i"""
        got = {}
        r = i % len(systems)
        for k in systems[r:] + systems[:r]:
            if k == "pool":
                got[k] = self.lat_task(
                    p, ["--pool", "lat", "--fn", self.fn + ":stamp"], [], k)
            elif k == "pool-conn":
                got[k] = self.lat_conn(p)
            elif k == "comm-mpi":
                self.launches += 1
                got[k] = self.lat_task(
                    p, self.mpi_opts("stamp"),
                    [self.worker, "--once", self.fn + ":stamp"], k)
            else:
                self.launches += 1
                got[k] = self.lat_srun(job, nodes)
        return got

    def retry(self, run):
        """run() again after a start failure, up to TRIES times in all"""
        for t in range(TRIES):
            try:
                return run()
            except StartFail as e:
                self.fails.append(e)
                self.h.log("s6: start failure, try %d of %d: %s"
                           % (t + 1, TRIES, e))
                if t + 1 == TRIES:
                    raise RuntimeError("s6: %d start failures in a row"
                                       % TRIES)

    def latency(self):
        n = self.c["lat_n"]
        systems = ["pool", "pool-conn", "comm-mpi", "srun-step"]
        runs = {k: [] for k in systems}
        ratio = {"srun-step": [], "comm-mpi": [], "srun-conn": []}
        setup = {}
        with self.h.cluster_lock():
            p = self.b.up(slurm=True)
            try:
                st = self.status(p)
                ps = self.pool_start(p, "lat", nodes=2)
                free = [x["name"] for x in st["nodes"]
                        if x["name"] not in ps["nodelist"]]
                if len(free) < 2:
                    raise RuntimeError("no 2 nodes beside the pool: %s"
                                       % free)
                setup = {"up": p["up_seconds"], "pool": ps}
                for i in range(n):
                    got = self.retry(lambda: self.lat_sample(
                        p, i, systems, st["job"], free[:2]))
                    for k in systems:
                        runs[k].append(got[k])
                    for k in ("srun-step", "comm-mpi"):
                        ratio[k].append(got[k]["entered"]
                                        / got["pool"]["entered"])
                    ratio["srun-conn"].append(got["srun-step"]["entered"]
                                              / got["pool-conn"]["entered"])
                    if i == 0 or (i + 1) % 5 == 0:
                        self.h.log("s6 latency %d/%d: entered after "
                                   "%s ms" % (i + 1, n, ", ".join(
                                       "%s %.1f" % (k, got[k]["entered"]
                                                    * 1e3)
                                       for k in systems)))
                self.pool_stop(p, "lat")
            finally:
                self.b.down(p)
        ms = self.ms
        out = {"n": n, "ranks": 4, "nodes": 2, "setup": setup,
               "srun_over_pool": self.h.summary(ratio["srun-step"]),
               "mpi_over_pool": self.h.summary(ratio["comm-mpi"]),
               "srun_over_pool_conn": self.h.summary(ratio["srun-conn"]),
               "runs": runs}
        for k in systems:
            out[k] = {q + "_ms": ms([r.get(q) for r in runs[k]])
                      for q in ("entered", "returned", "submit_exit",
                                "db_submit", "db_start", "db_end")}
        return out

    def ms(self, v):
        return self.h.summary([x * 1e3 if x is not None else None
                               for x in v])

    # ---- throughput and the cylon experiment ----

    def cylon_args(self, app):
        rows = self.c["cylon_rows"]
        if app == "join":
            return [str(rows // 2), str(rows // 2), "100000", "0.5"]
        return [str(rows), "100000", "0.5"]

    def cylon(self, p, app, opts, argv, workers):
        """the array of c['cylon_n'] tasks, seeds 1..n; each task's
        output line and its database times (pilot show --json)"""
        n = self.c["cylon_n"]
        argv = argv + self.cylon_args(app) + ["{}"]
        r = self.run_array(p, n, opts, argv,
                           mpi=None if workers else "resubmit")
        busy = 0.0
        lines = {}
        for seed, tid in enumerate(r.pop("ids"), 1):
            s = self.show(p, tid)
            if s["state"] != "done" or s["attempts"] != 1:
                raise RuntimeError("%s task %s: %s, %d attempts"
                                   % (app, tid, s["state"], s["attempts"]))
            busy += (s["end_time"] - s["start_time"]) * s["ranks"]
            got = [l for l in self.cmd(p, ["logs", str(tid)]).splitlines()
                   if l.startswith(app + " ")]
            if len(got) != 1:
                raise RuntimeError("%s task %s printed %d result lines"
                                   % (app, tid, len(got)))
            lines[seed] = got[0]
        r["task_seconds"] = busy / 4 / n
        if workers:
            r["not_fn_share"] = 1 - busy / (r["wall"] * workers)
        r["lines"] = lines
        return r

    def group(self, p, kind):
        """every throughput and cylon system of one kind: pool or
        comm-mpi"""
        c = self.c
        got = {}
        if kind == "pool":
            ps = self.pool_start(p, "tp")
            got["pool-start"] = ps
            opts = ["--pool", "tp"]
            fn = ["--fn", self.fn + ":noop"]
            for r in (1, 4):
                self.h.log("s6: %d pool tasks of %d rank(s), no-op"
                           % (c["tp_pool"][r], r))
                got["tp%d" % r] = self.run_array(
                    p, c["tp_pool"][r], opts + ["--ranks", str(r)] + fn, [])
            for app in ("join", "sort"):
                self.h.log("s6: cylon %s, %d pool tasks of 4 ranks"
                           % (app, c["cylon_n"]))
                got[app] = self.cylon(
                    p, app, opts + ["--ranks", "4", "--fn",
                                    self.ex + ":" + app], [],
                    ps["workers"])
            self.pool_stop(p, "tp")
        else:
            for r in (1, 4):
                n = c["tp_mpi"][r]
                self.h.log("s6: %d --comm mpi tasks of %d rank(s), no-op"
                           % (n, r))
                got["tp%d" % r] = self.retry(lambda: self.run_array(
                    p, n, self.mpi_opts("noop") + ["--ranks", str(r)],
                    [self.worker, "--once", self.fn + ":noop"], "redo"))
            for app in ("join", "sort"):
                self.h.log("s6: cylon %s, %d --comm mpi tasks of 4 ranks"
                           % (app, c["cylon_n"]))
                got[app] = self.cylon(
                    p, app, self.mpi_opts("cylon") + ["--ranks", "4"],
                    [self.worker, "--once", self.ex + ":" + app], None)
        for k in ("tp1", "tp4"):
            got[k].pop("ids")
        return got

    def verify(self, got):
        """every pool result is the --comm mpi one of its seed; the
        first, middle and last seeds' are poolcheck's"""
        n = self.c["cylon_n"]
        checked = 0
        for app in ("join", "sort"):
            a = got["pool"][app]["lines"]
            m = got["comm-mpi"][app]["lines"]
            bad = [s for s in a if a[s] != m.get(s)]
            if bad:
                raise RuntimeError("%s seed %d: pool '%s', comm-mpi '%s'"
                                   % (app, bad[0], a[bad[0]],
                                      m.get(bad[0])))
            for seed in sorted({1, (n + 1) // 2, n}):
                want = self.h.sh([self.check, app] + self.cylon_args(app)
                                 + [str(seed)]).strip()
                if a[seed] != want:
                    raise RuntimeError("%s seed %d: '%s', poolcheck '%s'"
                                       % (app, seed, a[seed], want))
                checked += 1
        return checked

    def rep(self, i):
        kinds = ["pool", "comm-mpi"]
        got = {}
        with self.h.cluster_lock():
            p = self.b.up(slurm=True)
            try:
                for k in kinds[i % 2:] + kinds[:i % 2]:
                    got[k] = self.group(p, k)
            finally:
                self.b.down(p)
        got["verified"] = self.verify(got)
        for k in kinds:
            for app in ("join", "sort"):
                got[k][app].pop("lines")
        got["up_seconds"] = p["up_seconds"]
        return got

    def run(self):
        c, h = self.c, self.h
        h.log("s6: every MPI rank runs with %s=1 (the pool's default)"
              % YIELD)
        h.log("s6 latency: %d x a 4-rank task over 2 nodes by the pool, "
              "--comm mpi, an srun step" % c["lat_n"])
        res = {"latency": self.latency()}
        reps = [self.rep_log(i)
                for i in range(c.get("reps", self.b.cfg["reps"]))]
        s = h.summary
        tp = {}
        for r in (1, 4):
            k = "tp%d" % r
            tp["%d rank%s" % (r, "s" if r > 1 else "")] = {
                "pool": {"n": c["tp_pool"][r],
                         "tasks_per_s": s([x["pool"][k]["tasks_per_s"]
                                           for x in reps]),
                         "db_tasks_per_s": s([x["pool"][k]["db_tasks_per_s"]
                                              for x in reps])},
                "comm-mpi": {"n": c["tp_mpi"][r],
                             "tasks_per_s": s([x["comm-mpi"][k]
                                               ["tasks_per_s"]
                                               for x in reps]),
                             "db_tasks_per_s": s([x["comm-mpi"][k]
                                                  ["db_tasks_per_s"]
                                                  for x in reps])},
                "pool_over_mpi": s([x["pool"][k]["tasks_per_s"]
                                    / x["comm-mpi"][k]["tasks_per_s"]
                                    for x in reps])}
        res["throughput"] = tp
        cy = {}
        for app in ("join", "sort"):
            pool = [x["pool"][app] for x in reps]
            mpi = [x["comm-mpi"][app] for x in reps]
            cy[app] = {
                "tasks": c["cylon_n"], "ranks": 4,
                "args": self.cylon_args(app) + ["SEED"],
                "pool": {"makespan_s": s([x["wall"] for x in pool]),
                         "db_makespan_s": s([x["db_seconds"] for x in pool]),
                         "task_seconds": s([x["task_seconds"]
                                            for x in pool]),
                         "not_fn_share": s([x["not_fn_share"]
                                            for x in pool])},
                "comm-mpi": {"makespan_s": s([x["wall"] for x in mpi]),
                             "db_makespan_s": s([x["db_seconds"]
                                                 for x in mpi]),
                             "task_seconds": s([x["task_seconds"]
                                                for x in mpi]),
                             "resubmitted": s([x["resubmitted"]
                                               for x in mpi])},
                "mpi_over_pool": s([m["wall"] / a["wall"]
                                    for a, m in zip(pool, mpi)])}
        res["cylon"] = cy
        res["verified_against_poolcheck"] = sum(x["verified"] for x in reps)
        res["setup"] = {
            "pilot up --nodes 4": s([x["up_seconds"] for x in reps]
                                    + [res["latency"]["setup"]["up"]]),
            "pool start, 8 workers": s([x["pool"]["pool-start"]["wall"]
                                        for x in reps]),
            "pool start, 4 workers": s([res["latency"]["setup"]["pool"]
                                        ["wall"]])}
        res["mpi_launches"] = self.launches
        res["mpi_start_failures"] = [
            {"what": e.what, "hung": e.hung, "failed": e.failed,
             "detail": e.detail} for e in self.fails]
        res["hang_limit_s"] = HANG_S
        res["reps"] = reps
        res["yield_when_idle"] = 1
        res["definitions"] = NOTE
        return res

    def rep_log(self, i):
        self.h.log("s6 rep %d: throughput and cylon, pool and --comm mpi"
                   % (i + 1))
        return self.rep(i)


def scenario6(b, h):
    b.res["s6"] = Pool6(b, h).run()


def rows(r, add):
    """scenario 6's rows of the table, by bench.py's add()"""
    sc = "6 pool"
    se = r["setup"]
    for k, v in se.items():
        add(sc, k, len(v["runs"]), "wall: the command (--wait)", "s", v)
    la = r["latency"]
    for k, what in (("pool", "pool task"),
                    ("pool-conn", "pool task, one connection"),
                    ("comm-mpi", "--comm mpi task"),
                    ("srun-step", "srun step")):
        if k in la:
            add(sc, "start latency, %s" % what, la["n"],
                "wall: request .. all ranks entered" if k == "pool-conn"
                else "wall: command .. all ranks entered", "ms",
                la[k]["entered_ms"])
    add(sc, "start latency, srun step / pool", la["n"], "ratio", "x",
        la["srun_over_pool"])
    if "srun_over_pool_conn" in la:
        add(sc, "start latency, srun step / pool one connection", la["n"],
            "ratio", "x", la["srun_over_pool_conn"])
    add(sc, "start latency, --comm mpi / pool", la["n"], "ratio", "x",
        la["mpi_over_pool"])
    for k, what in (("pool", "pool task"), ("comm-mpi", "--comm mpi task"),
                    ("srun-step", "srun step")):
        add(sc, "4-rank stamp, %s returned" % what, la["n"],
            "wall: command .. wait (srun) exits", "ms",
            la[k]["returned_ms"])
    for k, what in (("pool", "pool task"), ("comm-mpi", "--comm mpi task")):
        add(sc, "4-rank stamp, %s submit_time" % what, la["n"],
            "pilot db: command .. submit_time", "ms", la[k]["db_submit_ms"])
        add(sc, "4-rank stamp, %s start_time" % what, la["n"],
            "pilot db: command .. start_time", "ms", la[k]["db_start_ms"])
    for k, v in r["throughput"].items():
        for sysname in ("pool", "comm-mpi"):
            add(sc, "no-op %s, %s" % (k, sysname), v[sysname]["n"],
                "wall: submit .. wait exits 0", "tasks/s",
                v[sysname]["tasks_per_s"])
            add(sc, "no-op %s, %s internal" % (k, sysname), v[sysname]["n"],
                "pilot db: submit .. last end", "tasks/s",
                v[sysname]["db_tasks_per_s"])
        add(sc, "no-op %s, pool / comm-mpi" % k, v["pool"]["n"], "ratio",
            "x", v["pool_over_mpi"])
    for app, v in r["cylon"].items():
        n = v["tasks"]
        for sysname in ("pool", "comm-mpi"):
            add(sc, "cylon %s %s, makespan" % (app, sysname), n,
                "wall: submit .. wait exits 0", "s",
                v[sysname]["makespan_s"])
            add(sc, "cylon %s %s, mean task" % (app, sysname), n,
                "pilot db: end - start_time", "s",
                v[sysname]["task_seconds"])
        add(sc, "cylon %s comm-mpi, submitted again" % app, n,
            "tasks that hung or failed", "count",
            v["comm-mpi"]["resubmitted"])
        add(sc, "cylon %s, comm-mpi / pool makespan" % app, n, "ratio",
            "x", v["mpi_over_pool"])
        pct = dict(v["pool"]["not_fn_share"])
        for q in ("median", "min", "max"):
            pct[q] *= 100
        pct["runs"] = [x * 100 for x in pct["runs"]]
        add(sc, "cylon %s pool, not-function share" % app, n,
            "1 - sum(fn time) / (makespan x 8)", "%", pct)
    for k in ("hung", "failed"):
        v = sum(x[k] for x in r["mpi_start_failures"])
        add(sc, "MPI starts that %s (run again)" % k, r["mpi_launches"],
            "--comm mpi tasks, srun steps", "count",
            {"median": v, "min": v, "max": v, "runs": [v]})


def targets(r, judge):
    """scenario 6's targets (issue 13), by bench.py's judge()"""
    judge("pool: srun step / pool task start latency >= 100x (4 ranks, "
          "pilot submit)", r["latency"]["srun_over_pool"],
          lambda x: x >= 100, "%.1fx")
    if "srun_over_pool_conn" in r["latency"]:
        judge("pool: srun step / pool task start latency >= 100x (4 ranks, "
              "one connection)", r["latency"]["srun_over_pool_conn"],
              lambda x: x >= 100, "%.1fx")
    for k, v in r["throughput"].items():
        judge("pool: pool / --comm mpi no-op throughput >= 50x (%s)" % k,
              v["pool_over_mpi"], lambda x: x >= 50, "%.1fx")
