"""bench/queue10m.py - scenario 10 of bench.py: 10 million tasks queued

N tasks queued as arrays of 1,000,000 (the most one array may have):
'pilot submit --array 0-999999 -- /bin/true {}' N/1M times, each sent
by the CLI as requests of 5,000 elements appended to one array, on a
local pilot with no agent, so that they stay queued.  What
is measured (issue 16):

  ack        wall clock of that submit command, until it exits (every
             request acknowledged, so committed); pilotd's CPU for it
             (utime + stime from /proc/PID/stat, before and after)
  rss        pilotd's VmRSS after minus before, per queued task
  status     'pilot status' (the CLI command, wall): median of 10, with
             them queued and, before the submit, on the empty pilot (the
             CLI's own start and CURVE handshake: on a loaded host most
             of it)
  ls         'pilot ls --state queued --limit 10' (wall), once
  restart    pilotd killed with SIGKILL and started again on the same
             directory with the same command line (as the batch script
             of a Slurm pilot does): from the start until 'pilot status
             --json' answers from the new pilotd (not the stale record),
             and the new pilotd's CPU until then; its VmRSS then, per
             queued task
  cancel one 'pilot cancel' of the element in the middle of the array,
             after the restart (it leaves its run, which splits)
  run        one real agent (2 cores) joins the restarted pilot for
             RUN_S seconds: the tasks it ran must be the lowest ids (the
             queue's order survives the restart), each done with exit 0,
             with its own index in its command (its row was read back);
             then 'pilot down' with the rest still queued (wall)

bench.py calls scenario10(b, h) with its Bench and its own module h (the
helpers sh, log, summary, rss_kb, cpu_seconds), rows() and targets() for
the table.  Standard library only.
"""
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import time

ARRAY_MAX = 1000000  # elements of one array (PL_SPEC_MAX_ARRAY)
FULL = {"n": 10000000, "status_n": 10, "run_s": 5}
QUICK = {"n": 1000000, "status_n": 10, "run_s": 3}


def _status(b, p):
    try:
        out = b.pilot_cmd(["status", "--json"], pid=p["id"], timeout=10,
                          check=False)
        return json.loads(out) if out.strip() else {}
    except (ValueError, subprocess.TimeoutExpired):
        return {}


def _timed(b, p, argv, timeout=600):
    t0 = time.time()
    b.pilot_cmd(argv, pid=p["id"], stdout=False, timeout=timeout)
    return time.time() - t0


def _endpoint(p):
    with open(os.path.join(p["dir"], "endpoint")) as f:
        for line in f:
            k, _, v = line.strip().partition(" ")
            p[k] = v
    p["pid"] = int(p["pid"])


def _restart(b, h, p):
    """SIGKILL pilotd, start it again as it was started; seconds until
    it serves"""
    pid = p["pid"]
    with open("/proc/%d/cmdline" % pid, "rb") as f:
        argv = [a.decode() for a in f.read().split(b"\0") if a]
    with open("/proc/%d/environ" % pid, "rb") as f:
        env = dict(e.decode(errors="replace").partition("=")[::2]
                   for e in f.read().split(b"\0") if e)
    argv[0] = os.path.join(b.bin, "pilotd")
    os.kill(pid, signal.SIGKILL)
    while os.path.exists("/proc/%d" % pid):
        try:
            with open("/proc/%d/stat" % pid) as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
        except OSError:
            break
        time.sleep(0.01)
    log = os.path.join(p["dir"], "logs", "pilotd-restart.out")
    t0 = time.time()
    # started by a shell that exits at once, as the batch script's is not
    # our child: 'pilot down' waits for its pid to go, and a child of ours
    # would stay a zombie until we reaped it
    subprocess.run(["/bin/sh", "-c", 'log=$1; shift; "$@" </dev/null '
                    '>"$log" 2>&1 &', "sh", log] + argv, env=env,
                   start_new_session=True, check=True)
    while time.time() - t0 < 300:
        st = _status(b, p)
        if st.get("state") == "running" and st.get("pid") != pid:
            break
        time.sleep(0.02)
    else:
        raise RuntimeError("s10: the restarted pilotd did not answer")
    dt = time.time() - t0
    _endpoint(p)
    return dt


def _run_sample(b, h, p, c, first, n, gone):
    """one real agent for run_s seconds; check what it ran"""
    node = "q10"
    argv = [os.path.join(b.bin, "pilot-agent"), "--connect", p["agent"],
            "--keys", os.path.join(p["dir"], "keys"), "--node", node,
            "--cores", "0-1", "--log",
            os.path.join(p["dir"], "logs", "agent-%s.log" % node)]
    a = subprocess.Popen(argv, env=b.env)
    b.procs.append((p, a))
    t = time.time()
    while time.time() - t < 60 and _status(b, p).get("agents_up", 0) < 1:
        time.sleep(0.1)
    time.sleep(c["run_s"])
    db = sqlite3.connect("file:%s/state.db?mode=ro" % p["dir"], uri=True,
                         timeout=30)
    try:
        rows = db.execute("SELECT id, state, exit_code, argv, array_index "
                          "FROM tasks INDEXED BY tasks_state WHERE state "
                          "IN ('done', 'failed', 'timeout', 'assigned', "
                          "'running')").fetchall()
    finally:
        db.close()
    # every id it took is below every id still queued (the one canceled
    # aside); those that ended are done, with their own index
    took = sorted(r[0] for r in rows)
    ended = [r for r in rows if r[1] not in ("assigned", "running")]
    bad = [r for r in ended if r[1] != "done" or r[2] != 0
           or json.loads(r[3]) != ["/bin/true", str(r[4])]
           or r[4] != (r[0] - first) % min(n, ARRAY_MAX)]
    want = [i for i in range(first, first + len(took) + 1) if i != gone]
    return {"ran": len(ended), "bad": len(bad),
            "in_order": took == want[:len(took)], "seconds": c["run_s"]}


def scenario10(b, h):
    c = dict(QUICK if b.quick else FULL)
    n = c["n"]
    r = {"n": n}
    p = b.up(agents=0)
    try:
        pid = p["pid"]
        # the CLI's own start (keys, connection): status of an empty pilot
        r["status_empty_s"] = [_timed(b, p, ["status"])
                               for _ in range(c["status_n"])]
        rss0, cpu0 = h.rss_kb(pid), h.cpu_seconds(pid)
        m = min(n, ARRAY_MAX)
        h.log("s10: %d tasks as %d arrays of %d" % (n, n // m, m))
        t0 = time.time()
        for _ in range(n // m):
            b.pilot_cmd(["submit", "--array", "0-%d" % (m - 1), "--",
                         "/bin/true", "{}"], pid=p["id"], stdout=False,
                        timeout=1800)
        r["ack_s"] = time.time() - t0
        r["ack_cpu_s"] = h.cpu_seconds(pid) - cpu0
        r["rss_b_per_task"] = (h.rss_kb(pid) - rss0) * 1024 / n
        st = _status(b, p)
        r["queued"] = st.get("tasks", {}).get("queued")
        r["status_s"] = [_timed(b, p, ["status"])
                         for _ in range(c["status_n"])]
        r["ls_s"] = _timed(b, p, ["ls", "--state", "queued", "--limit",
                                  "10"])
        h.log("s10: restart")
        r["restart_s"] = _restart(b, h, p)
        # its CPU until then: what the wall would be on an idle host
        r["restart_cpu_s"] = h.cpu_seconds(p["pid"])
        r["restart_rss_b_per_task"] = h.rss_kb(p["pid"]) * 1024 / n
        st = _status(b, p)
        r["queued_after_restart"] = st.get("tasks", {}).get("queued")
        r["status_after_restart_s"] = [_timed(b, p, ["status"])
                                       for _ in range(c["status_n"])]
        db = sqlite3.connect("file:%s/state.db?mode=ro" % p["dir"],
                             uri=True, timeout=30)
        first = db.execute("SELECT min(id) FROM tasks").fetchone()[0]
        db.close()
        mid = first + min(n, ARRAY_MAX) // 2 + 1  # not an array's id
        r["cancel_one_s"] = _timed(b, p, ["cancel", str(mid)])
        r["show_one_s"] = _timed(b, p, ["show", str(mid + 1)])
        r["run"] = _run_sample(b, h, p, c, first, n, mid)
        r["down_s"] = _timed(b, p, ["down"])
        b.down(p)
        p = None
    finally:
        if p:
            b.down(p)
    b.res["s10"] = r


def _s(v):
    return {"median": statistics.median(v), "min": min(v), "max": max(v),
            "runs": v} if isinstance(v, list) else \
        {"median": v, "min": v, "max": v, "runs": [v]}


def rows(r, add):
    """scenario 10's rows of the table, by bench.py's add()"""
    sc, n = "10 queue", r["n"]
    add(sc, "submit --array: acked", n, "wall: the command", "s",
        _s(r["ack_s"]))
    add(sc, "submit --array: pilotd CPU", n, "utime+stime", "us/task",
        _s(r["ack_cpu_s"] * 1e6 / n))
    add(sc, "pilotd RSS, queued", n, "VmRSS after - before", "B/task",
        _s(r["rss_b_per_task"]))
    add(sc, "pilot status, empty pilot", len(r["status_empty_s"]),
        "wall: the command", "ms",
        _s([x * 1000 for x in r["status_empty_s"]]))
    add(sc, "pilot status, queued", len(r["status_s"]), "wall: the command",
        "ms", _s([x * 1000 for x in r["status_s"]]))
    add(sc, "pilot ls --state queued --limit 10", 1, "wall: the command",
        "ms", _s(r["ls_s"] * 1000))
    add(sc, "kill -9 + restart to serving", n, "wall: start .. status",
        "s", _s(r["restart_s"]))
    add(sc, "restart: pilotd CPU until serving", n, "utime+stime", "s",
        _s(r["restart_cpu_s"]))
    add(sc, "pilotd RSS after restart", n, "VmRSS", "B/task",
        _s(r["restart_rss_b_per_task"]))
    add(sc, "pilot status after restart", len(r["status_after_restart_s"]),
        "wall: the command", "ms",
        _s([x * 1000 for x in r["status_after_restart_s"]]))
    add(sc, "cancel of one element", 1, "wall: the command", "ms",
        _s(r["cancel_one_s"] * 1000))
    add(sc, "tasks run after restart", r["run"]["ran"],
        "1 agent, %d s" % r["run"]["seconds"], "tasks",
        _s(r["run"]["ran"]))
    add(sc, "pilot down, rest queued", 1, "wall: the command", "s",
        _s(r["down_s"]))


def targets(r, judge):
    """scenario 10's targets (issue 16), by bench.py's judge()"""
    big = r["n"] >= 10000000
    judge("queue: %s queued acked < 60 s%s" % ("{:,}".format(r["n"]),
                                              "" if big else " x N/10M"),
          _s(r["ack_s"] * (1 if big else 10000000 / r["n"])),
          lambda x: x < 60, "%.1f s")
    judge("queue: pilotd RSS < 512 B per queued task",
          _s(r["rss_b_per_task"]), lambda x: x < 512, "%.0f B")
    judge("queue: pilot status < 100 ms with them queued",
          _s([x * 1000 for x in r["status_s"]]), lambda x: x < 100,
          "%.0f ms")
    judge("queue: kill -9 + restart to serving < 5 s", _s(r["restart_s"]),
          lambda x: x < 5, "%.2f s")
    ok = (r["run"]["ran"] > 0 and r["run"]["bad"] == 0
          and r["run"]["in_order"] and r["queued_after_restart"] == r["n"])
    judge("queue: after the restart all queued, and run in order, done",
          _s(1 if ok else 0), lambda x: x == 1, "%d")


NOTE = """\
10 queue: N x '/bin/true {}' as arrays of 1M on a local pilot with no
agent (pilot submit sends 5,000 elements a request, appended to one array);
restart: pilotd SIGKILLed and started again with its command line, until
'pilot status --json' answers from it; then one real agent runs tasks for
a few seconds: they must be the lowest ids, done, each with its own index
in its command.  The ack target is for 10M: a QUICK run scales its time
by 10M/N."""
