"""bench/scale.py - scenario 9 of bench.py: one pilotd, 1,000 agents

Issue 16's "1,000 nodes": a local pilot with no agent of its own (pilot
up --local --agents 0), and K bench agents in ONE process
('pilot-agent --bench --bench-agents K', agent/benchmany.c: each its
DEALER, its CURVE handshake, its node s<K>-i; each RUN entry reported
running then done at once, as 'pilot-agent --bench' does), for K = 16,
256 and 1,000 in the same repetition, in an order that rotates:

  registration  from just before 'pilot up' until 'pilot status' says
                all K agents are up (polled every 0.05 s), and the part
                of it from the agents' start; pilotd's CPU meanwhile.
  capacity      N no-op tasks ('pilot submit --array', /bin/true, never
                run) from the submit until 'pilot wait --all' exits 0:
                tasks/s, and pilotd's CPU per task (utime+stime from
                /proc/PID/stat, all its threads: ZeroMQ's I/O thread does
                the CURVE work).  The agents' one process's CPU per task
                beside.

Slots: 4 each, for every K (scenario 2 gives 16 agents 64 each: a RUN
and an EVENTS message then carry more tasks, so a task costs less);
the last row is the ratio of pilotd's CPU per task at 1,000 agents to
that at 16, inside a repetition.  With --profile, pilotd is
perf-recorded during the 1,000 agents' tasks of the first repetition.

bench.py calls scenario9(b, h) with its Bench and its own module h (the
helpers log, summary, cpu_seconds, rss_kb), rows() and targets() for the
table.  Standard library only.
"""
import json
import os
import subprocess
import time

# slots: each agent's (the same for every K: what a task costs pilotd
# then differs only by the number of agents, not by how many tasks a
# message carries)
FULL = {"agents": [16, 256, 1000], "n": 200000, "slots": 4}
QUICK = {"agents": [16, 256, 1000], "n": 30000, "slots": 4}

NOTE = """\
9 scale: K bench agents in one process (pilot-agent --bench
--bench-agents K) against one local pilotd with no agent of its own.
registration: pilot up --local --agents 0 .. pilot status shows K agents
up (polled every 0.05 s); agents' part: from their process's start.
capacity: pilot submit --array .. pilot wait --all exits 0; pilotd CPU:
utime+stime of all its threads over the same span."""


def status(b, p):
    return json.loads(b.pilot_cmd(["status", "--json"], pid=p["id"]))


def one(b, h, k, n, per, profile):
    """one pilot, k agents in one process, n tasks: bench.py's scenario 2
    run (Bench.s2_one()) with these agents, and their registration"""
    def agents(p, t_up):
        pid = p["pid"]
        cpu0 = h.cpu_seconds(pid)
        t0 = time.time()
        argv = [os.path.join(b.bin, "pilot-agent"), "--bench",
                "--bench-agents", str(k), "--connect", p["agent"],
                "--keys", os.path.join(p["dir"], "keys"), "--node",
                "s%d" % k, "--cores", "0-%d" % (per - 1), "--log",
                os.path.join(p["dir"], "logs", "bench-agents.log")]
        proc = subprocess.Popen(argv, env=b.env)
        b.procs.append((p, proc))
        while status(b, p).get("agents_up", 0) < k:
            if time.time() - t0 > 300 or proc.poll() is not None:
                raise RuntimeError("s9: %d bench agents did not register"
                                   % k)
            time.sleep(0.05)
        t1 = time.time()
        return ({"register_s": t1 - t_up, "register_agents_s": t1 - t0,
                 "register_cpu_s": h.cpu_seconds(pid) - cpu0}, proc.pid)

    return b.s2_one(k, n, per * k, profile, agents=agents, what="s9")


def scenario9(b, h):
    c = QUICK if b.quick else FULL
    ks = c["agents"]
    runs = {k: [] for k in ks}
    ratio = []
    for rep in range(b.cfg["reps"]):
        for k in ks[rep % len(ks):] + ks[:rep % len(ks)]:
            per = c["slots"]
            h.log("s9 rep %d: %d bench agents in one process, %d slots "
                  "each, %d tasks" % (rep + 1, k, per, c["n"]))
            prof = None
            if b.profile and k == max(ks) and rep == 0:
                prof = os.path.join(b.profile, "pilotd-%dagents" % k)
            runs[k].append(one(b, h, k, c["n"], per, prof))
            r = runs[k][-1]
            h.log("s9: %d agents registered in %.2f s (%.2f s from their "
                  "start), %.0f tasks/s, pilotd %.1f us/task"
                  % (k, r["register_s"], r["register_agents_s"],
                     r["tasks_per_s"], r["cpu_us_per_task"]))
            if prof:
                b.res["s9_profile"] = b.perf_report(prof + ".data")
        # the growth with the agents, inside one repetition
        lo, hi = runs[min(ks)][-1], runs[max(ks)][-1]
        ratio.append(hi["cpu_us_per_task"] / lo["cpu_us_per_task"])
    res = {"n": c["n"], "agents": ks,
           "cpu_ratio": h.summary(ratio) if len(ks) > 1 else None}
    for k in ks:
        v = runs[k]
        res["%d agents" % k] = {
            "k": k, "slots": c["slots"],
            "n": c["n"],
            "register_s": h.summary([x["register_s"] for x in v]),
            "register_agents_s": h.summary([x["register_agents_s"]
                                            for x in v]),
            "register_cpu_s": h.summary([x["register_cpu_s"] for x in v]),
            "tasks_per_s": h.summary([x["tasks_per_s"] for x in v]),
            "db_tasks_per_s": h.summary([x["db_tasks_per_s"] for x in v]),
            "cpu_us_per_task": h.summary([x["cpu_us_per_task"] for x in v]),
            "agents_cpu_us_per_task": h.summary(
                [x["agents_cpu_us_per_task"] for x in v]),
            "runs": v}
    b.res["s9"] = res


def rows(r, add):
    """scenario 9's rows of the table, by bench.py's add()"""
    sc = "9 scale"
    for k in r["agents"]:
        v = r["%d agents" % k]
        add(sc, "registration, %d agents" % k, k,
            "wall: pilot up .. all up", "s", v["register_s"])
        add(sc, "registration, %d agents, from their start" % k, k,
            "wall: agents start .. all up", "s", v["register_agents_s"])
        add(sc, "pilotd, %d agents (%d slots each)" % (k, v["slots"]),
            v["n"], "wall: submit .. wait exits 0", "tasks/s",
            v["tasks_per_s"])
        add(sc, "pilotd, %d agents internal" % k, v["n"],
            "pilot db: submit .. last end", "tasks/s", v["db_tasks_per_s"])
        add(sc, "pilotd CPU, %d agents" % k, v["n"], "pilotd utime+stime",
            "us/task", v["cpu_us_per_task"])
        add(sc, "the agents' process CPU, %d agents" % k, v["n"],
            "its utime+stime", "us/task", v["agents_cpu_us_per_task"])
    if r.get("cpu_ratio"):
        add(sc, "pilotd CPU/task, %d over %d agents" % (max(r["agents"]),
                                                        min(r["agents"])),
            r["n"], "ratio", "x", r["cpu_ratio"])


def targets(r, judge):
    """scenario 9's targets (issue 16), by bench.py's judge()"""
    v = r.get("1000 agents")
    judge("scale: 1,000 agents registered < 5 s (pilot up .. all up)",
          v and v["register_s"], lambda x: x < 5, "%.2f s")
    judge("scale: 1,000 bench agents >= 30,000 tasks/s (wall)",
          v and v["tasks_per_s"], lambda x: x >= 30000, "%.0f/s")
    judge("scale: pilotd CPU/task at 1,000 agents <= 1.25x at 16",
          r.get("cpu_ratio"), lambda x: x <= 1.25, "%.2fx")
