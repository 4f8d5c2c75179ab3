#!/usr/bin/python3
"""bench/sqlite_model.py - what pilotd's two task-row writes cost in SQLite,
and what the layouts proposed to cut them would save (docs/PERFORMANCE.md,
"What limits pilotd's CPU a task").

pilotd writes each task's row twice on the way to done (daemon/db_batch.c):
an UPDATE to assigned (node, cores) and one for running+done merged (exit
code, times, end_seq, CPU), 64 tasks to a transaction as a busy batch has
them.  This replays that on the real schema (read from proto/schema.h)
under pilotd's pragmas, against:

  today     the 44-column tasks row, tasks_state and tasks_end_seq indexes
  partial   tasks_state only over tasks not ended (WHERE end_time IS NULL):
            an ended task leaves the index instead of moving in it
  narrow    the columns that change in a table of their own (12 columns)
  one       today's row, one UPDATE a task (assigned folded into done:
            what a crashed pilotd could not recover from, for reference)
  floor     the same number of statements doing nothing (SELECT ?): the
            cost of Python's sqlite3 calls, to be subtracted

Usage: bench/sqlite_model.py [N] (default 200000 tasks); prints us of CPU
a task for each, the median of 3.
"""
import os
import re
import sqlite3
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH = 64


def schema():
    src = open(os.path.join(HERE, "..", "proto", "schema.h")).read()
    block = src[src.index("#define PL_SCHEMA_SQL"):]
    block = block[:block.index("\n\n")]
    block = re.sub(r"/\*.*?\*/", "", block, flags=re.S)
    return "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', block))


def fresh(path):
    for f in (path, path + "-wal", path + "-shm"):
        if os.path.exists(f):
            os.remove(f)
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.executescript(schema())
    db.execute("CREATE INDEX tasks_end_seq ON tasks(end_seq) "
               "WHERE end_seq IS NOT NULL")
    return db


def fill(db, n):
    db.execute("BEGIN")
    db.executemany(
        "INSERT INTO tasks (id, name, argv, cwd, state, submit_time, comm, "
        "submitted_by) VALUES (?, NULL, '[\"/bin/true\"]', '/root/work', "
        "'queued', 1.0e9, 'none', 'owner')", ((i,) for i in range(1, n + 1)))
    db.execute("COMMIT")


ASSIGNED = ("UPDATE {t} SET state = ?, attempts = max(attempts, ?), "
            "reason = ?, end_time = ?, node = ?, cores = ?, "
            "start_time = NULL WHERE id = ?")
DONE = ("UPDATE {t} SET state = ?, attempts = max(attempts, ?), reason = ?, "
        "end_time = ?, exit_code = ?, start_time = ?, end_seq = ?, "
        "cpu_user = ?, cpu_sys = ? WHERE id = ?")


def replay(db, n, table="tasks", assigned=True, floor=False):
    a_sql, d_sql = ASSIGNED.format(t=table), DONE.format(t=table)
    t0 = time.process_time()
    for s in range(1, n + 1, BATCH):
        ids = range(s, min(s + BATCH, n + 1))
        db.execute("BEGIN")
        if floor:
            for i in ids:
                db.execute("SELECT ?", (i,))
                db.execute("SELECT ?", (i,))
        else:
            if assigned:
                for i in ids:
                    db.execute(a_sql, ("assigned", 1, None, None, "n1", "0", i))
            for i in ids:
                db.execute(d_sql, ("done", 1, None, 2.0e9, 0, 1.5e9, i,
                                   0.001, 0.001, i))
        db.execute("COMMIT")
    return (time.process_time() - t0) / n * 1e6


def arm(name, n, path):
    db = fresh(path)
    if name == "partial":
        db.execute("DROP INDEX tasks_state")
        db.execute("CREATE INDEX tasks_state ON tasks(state) "
                   "WHERE end_time IS NULL")
    if name == "narrow":
        db.execute("CREATE TABLE tstate (id INTEGER PRIMARY KEY, "
                   "state TEXT NOT NULL, reason TEXT, node TEXT, cores TEXT, "
                   "attempts INTEGER NOT NULL DEFAULT 0, start_time REAL, "
                   "end_time REAL, exit_code INTEGER, end_seq INTEGER, "
                   "cpu_user REAL, cpu_sys REAL)")
        db.execute("DROP INDEX tasks_state")
        db.execute("DROP INDEX tasks_end_seq")
        db.execute("CREATE INDEX tstate_state ON tstate(state)")
        db.execute("CREATE INDEX tstate_end_seq ON tstate(end_seq) "
                   "WHERE end_seq IS NOT NULL")
    fill(db, n)
    if name == "narrow":
        db.execute("INSERT INTO tstate (id, state) SELECT id, state "
                   "FROM tasks")
    us = replay(db, n, table="tstate" if name == "narrow" else "tasks",
                assigned=name != "one", floor=name == "floor")
    db.close()
    return us


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
    arms = ("today", "partial", "narrow", "one", "floor")
    got = {a: [] for a in arms}
    with tempfile.TemporaryDirectory() as d:
        for _ in range(3):
            for a in arms:
                got[a].append(arm(a, n, os.path.join(d, "state.db")))
    med = {a: statistics.median(v) for a, v in got.items()}
    fl = med["floor"]
    print(f"sqlite {sqlite3.sqlite_version}, {n} tasks, {BATCH} a commit; "
          f"us of CPU a task (median of 3), and beyond the floor")
    for a in arms:
        print(f"  {a:8s} {med[a]:6.2f}   {med[a] - fl:6.2f}"
              + ("" if a in ("today", "floor") else
                 f"   {(med[a] - fl) / (med['today'] - fl):.2f}x today's"))


if __name__ == "__main__":
    main()
