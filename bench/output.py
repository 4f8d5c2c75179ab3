"""bench/output.py - scenario 8 of bench.py: task output at scale (issue 16)

N tasks each printing one line (/bin/echo), as one array, on a local
pilot of its own per system, with their output in files (--output files:
an ID.out and an ID.err per task, the default) and in the node's journal
(--output journal: docs/output.md).  For each:

  throughput  N / (wall from 'pilot submit --array' until 'pilot wait'
              exits 0)
  files       files created in the pilot directory by the run (a walk of
              it before and after)
  bytes       what the run added on disk: du -sk of the pilot directory
              after, less before (the state database included: it is
              the same for both), and of the output alone (tasks/ and
              journal/)
  agent CPU   the agent's utime + stime (/proc/PID/stat) over the run,
              per task; pilotd's beside it

and, without pilot, what the agent does for each task's output in each
mode: a pipe2() pair (two, stdout and stderr) against two files created
(O_CREAT|O_EXCL) in a bucket directory of the same file system, with
their closes and the files' unlinks left out of the clock (the pilot
leaves the files), from Python (the call's overhead in both).

One repetition runs both systems in an order that rotates; ratios are
taken inside it.  bench.py calls scenario8(b, h) with its Bench and its
own module h (log, summary, cpu_seconds), rows() and targets() for the
table.  Standard library only.
"""
import os
import subprocess
import time

# one repetition in FULL: 1,000,000 tasks a mode take about 12 minutes
# each at the limit's rate
FULL = {"n": 1000000, "micro_n": 20000, "reps": 1}
QUICK = {"n": 50000, "micro_n": 5000, "reps": 1}

NOTE = """\
8 output: N x '/bin/echo' as one array on a local pilot per system:
files: --output files (ID.out and ID.err a task); journal: --output
journal (the node's journal and its index).  files created: a walk of
the pilot directory before and after; bytes: du -sk after - before (the
state database's growth included, alike in both).  agent CPU: utime +
stime of the agent over the run / N.  pipe2 pair vs 2 files: the
syscalls each mode makes a task for its output, from Python."""


def count_files(d):
    n = 0
    for _, _, files in os.walk(d):
        n += len(files)
    return n


def du_bytes(d):
    out = subprocess.run(["du", "-sk", d], capture_output=True, text=True,
                         check=True).stdout
    return int(out.split()[0]) * 1024


def out_bytes(d):
    """du of the output alone: tasks/ and journal/"""
    dirs = [os.path.join(d, x) for x in ("tasks", "journal")
            if os.path.isdir(os.path.join(d, x))]
    return sum(du_bytes(x) for x in dirs)


def agent_pid(p):
    out = subprocess.run(["pgrep", "-f", "pilot-agent .*--keys %s/keys"
                          % p["dir"]], capture_output=True, text=True).stdout
    pids = [int(x) for x in out.split()]
    return pids[0] if pids else None


def micro(d, n):
    """us per task: a pipe pair a stream, against two created files"""
    os.makedirs(d, exist_ok=True)
    t0 = time.perf_counter()
    fds = []
    for _ in range(n):
        fds.append(os.pipe2(os.O_CLOEXEC))
        fds.append(os.pipe2(os.O_CLOEXEC))
        if len(fds) >= 512:
            for a, b in fds:
                os.close(a)
                os.close(b)
            fds = []
    pipes = (time.perf_counter() - t0) / n * 1e6
    for a, b in fds:
        os.close(a)
        os.close(b)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    t0 = time.perf_counter()
    for i in range(n):
        bucket = os.path.join(d, str(i // 1000))
        if i % 1000 == 0:
            os.makedirs(bucket, exist_ok=True)
        os.close(os.open(os.path.join(bucket, "%d.out" % i), flags, 0o600))
        os.close(os.open(os.path.join(bucket, "%d.err" % i), flags, 0o600))
    files = (time.perf_counter() - t0) / n * 1e6
    subprocess.run(["rm", "-rf", d], check=False)
    return {"pipes_us": pipes, "files_us": files}


def one(b, h, mode, n):
    p = b.up()
    try:
        apid = agent_pid(p)
        f0, d0 = count_files(p["dir"]), du_bytes(p["dir"])
        o0 = out_bytes(p["dir"])
        a0 = h.cpu_seconds(apid) if apid else None
        c0 = h.cpu_seconds(p["pid"])
        t0 = time.time()
        b.pilot_cmd(["submit", "--array", "1-%d" % n, "--output", mode,
                     "--", "/bin/echo", "a line of output from a task"],
                    pid=p["id"], stdout=False, timeout=3600)
        b.wait_all(p, timeout=7200)
        wall = time.time() - t0
        a1 = h.cpu_seconds(apid) if apid else None
        c1 = h.cpu_seconds(p["pid"])
        files = count_files(p["dir"]) - f0
        size = du_bytes(p["dir"]) - d0
        osize = out_bytes(p["dir"]) - o0
        # a sample read back: the last task's line
        last = b.pilot_cmd(["logs", str(n)], pid=p["id"]).strip()
        if last != "a line of output from a task":
            raise RuntimeError("8 output %s: task %d's output read back as "
                               "%r" % (mode, n, last))
        t1 = time.time()
        b.pilot_cmd(["logs", str(n // 2)], pid=p["id"])
        logs_ms = (time.time() - t1) * 1000
        return {"tasks_per_s": n / wall, "wall": wall, "files": files,
                "bytes": size, "bytes_per_task": size / n,
                "output_bytes": osize, "output_bytes_per_task": osize / n,
                "agent_cpu_us": (a1 - a0) / n * 1e6 if apid else None,
                "pilotd_cpu_us": (c1 - c0) / n * 1e6, "logs_ms": logs_ms}
    finally:
        b.down(p)


def scenario8(b, h):
    c = QUICK if b.quick else FULL
    n = c["n"]
    runs = {"files": [], "journal": [], "micro": []}
    for rep in range(c.get("reps", b.cfg["reps"])):
        order = ["files", "journal"]
        order = order[rep % 2:] + order[:rep % 2]
        for mode in order:
            h.log("8 output: %d tasks, --output %s, rep %d"
                  % (n, mode, rep + 1))
            runs[mode].append(one(b, h, mode, n))
        runs["micro"].append(micro(os.path.join(b.home, "micro"),
                                   c["micro_n"]))
    out = {"n": n, "micro_n": c["micro_n"], "runs": runs}
    for mode in ("files", "journal"):
        out[mode] = {k: h.summary([r[k] for r in runs[mode]])
                     for k in runs[mode][0]}
    out["micro"] = {k: h.summary([r[k] for r in runs["micro"]])
                    for k in ("pipes_us", "files_us")}
    out["journal_over_files"] = h.summary(
        [j["tasks_per_s"] / f["tasks_per_s"]
         for f, j in zip(runs["files"], runs["journal"])])
    b.res["s8"] = out


def rows(r, add):
    """scenario 8's rows of the table, by bench.py's add()"""
    sc = "8 output"
    n = r["n"]
    for mode in ("files", "journal"):
        v = r[mode]
        add(sc, "%s: throughput" % mode, n, "wall: submit .. wait exits 0",
            "tasks/s", v["tasks_per_s"])
        add(sc, "%s: files created" % mode, n, "walk of the pilot dir",
            "count", v["files"])
        for k, what in (("bytes", "du -sk pilot dir, after - before"),
                        ("output_bytes", "du -sk tasks/ + journal/")):
            add(sc, "%s: %s on disk" % (mode, k.replace("_", " ")), n, what,
                "MB", {q: (x / 1e6 if q != "runs" else [y / 1e6 for y in x])
                       for q, x in v[k].items()})
        if v.get("agent_cpu_us"):
            add(sc, "%s: agent CPU per task" % mode, n,
                "/proc/PID/stat utime+stime", "us", v["agent_cpu_us"])
        add(sc, "%s: pilotd CPU per task" % mode, n,
            "/proc/PID/stat utime+stime", "us", v["pilotd_cpu_us"])
        add(sc, "%s: pilot logs of one task" % mode, n, "wall: the command",
            "ms", v["logs_ms"])
    add(sc, "journal / files throughput", n, "ratio", "x",
        r["journal_over_files"])
    add(sc, "2 pipe2() pairs a task", r["micro_n"], "python, per task",
        "us", r["micro"]["pipes_us"])
    add(sc, "2 files created a task", r["micro_n"], "python, per task",
        "us", r["micro"]["files_us"])


def targets(r, judge):
    """scenario 8's targets (issue 16), by bench.py's judge()"""
    def med(x):
        return {"median": x}
    judge("output: journal files created per 1,000 tasks < 1",
          med(r["journal"]["files"]["median"] * 1000 / r["n"]),
          lambda x: x < 1, "%.3f")
    judge("output: journal throughput >= files throughput",
          r["journal_over_files"], lambda x: x >= 1.0, "%.2fx")
    judge("output: journal bytes on disk < files' bytes on disk",
          med(r["journal"]["bytes"]["median"]
              / max(1, r["files"]["bytes"]["median"])),
          lambda x: x < 1.0, "%.3fx")
