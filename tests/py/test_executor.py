"""tests/py/test_executor.py - pilot.Executor against real local pilots

The session's local pilot (conftest's 'client') for most; a pilot of its
own for the test that kills pilotd.  The functions are tests/py/exfn.py's
(imported by the workers from the calls' directory, this one), and a
lambda or two (pickled by value).
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import pilot
import pilot.executor as pex
import pilot._pickle as pickle_mod
from conftest import py_child_env

import exfn

HERE = os.path.dirname(os.path.abspath(__file__))
FINAL = ("done", "failed", "canceled", "timeout")


@pytest.fixture
def ex(client):
    e = pilot.Executor(client, cwd=HERE)
    yield e
    e.shutdown(wait=True, cancel_futures=True)


def wait_state(c, f, states, timeout=30):
    """Wait until the call of future f is in one of 'states'."""
    end = time.monotonic() + timeout
    st = None
    while time.monotonic() < end:
        if f.task_id is None:
            time.sleep(0.01)
            continue
        st = c.show(f.task_id)["state"]
        if st in states:
            return st
        time.sleep(0.05)
    raise AssertionError("call %s is %s, not in %s" % (f.task_id, st, states))


def test_submit_and_result(ex):
    f = ex.submit(exfn.square, 7)
    assert isinstance(f, pilot.Future)
    assert f.result(timeout=60) == 49
    assert isinstance(f.task_id, int)
    # by value: a lambda; keywords go to the function
    assert ex.submit(lambda a, b=1: a * b, 6, b=7).result(60) == 42
    # cores= and gpus= are the call's; options() reserves nothing
    g = ex.submit(exfn.echo_kw, 1, cores=1, gpus=0, colour="red")
    assert g.result(60) == ((1,), {"colour": "red"})
    h = ex.options(timeout=60).submit(exfn.echo_kw, cores=3, gpus=2)
    assert h.result(60) == ((), {"cores": 3, "gpus": 2})
    shown = ex._client.show(h.task_id)
    assert shown["timeout"] == 60
    assert ex._client.show(g.task_id)["cores_per_rank"] == 1


def test_map(ex):
    assert list(ex.map(exfn.square, range(200))) == [i * i for i in range(200)]
    got = list(ex.map(exfn.add, range(100), range(100, 200), chunksize=7))
    assert got == [i + i + 100 for i in range(100)]
    # an empty input, and the timeout of a slow one
    assert list(ex.map(exfn.square, [])) == []
    slow = ex.map(exfn.nap, [0, 2.5], timeout=1)
    assert next(slow) is None
    with pytest.raises(TimeoutError):
        next(slow)


def test_as_completed_and_wait(ex):
    fs = [ex.submit(exfn.square, i) for i in range(500)]
    assert sum(f.result() for f in pilot.as_completed(fs, timeout=120)) \
        == sum(i * i for i in range(500))
    slow = ex.submit(exfn.nap, 20, "slow")
    quick = ex.submit(exfn.nap, 0, "quick")
    done, not_done = pilot.wait([slow, quick], timeout=60,
                                return_when=pilot.FIRST_COMPLETED)
    assert done == {quick} and not_done == {slow}
    assert quick.result() == "quick"
    wait_state(ex._client, slow, ("running",))
    assert slow.cancel() is False      # it runs: cancel() cannot
    assert slow.kill() is True         # kill() can
    assert slow.cancelled()
    with pytest.raises(pilot.CancelledError):
        slow.result()
    assert wait_state(ex._client, slow, FINAL) == "canceled"


def test_exception_with_remote_traceback(ex):
    f = ex.submit(exfn.raise_value_error, 3)
    e = f.exception(timeout=60)
    assert type(e) is ValueError and str(e) == "bad input 3"
    assert isinstance(e.__cause__, pilot.RemoteTraceback)
    tb = str(e.__cause__)
    assert "Traceback (most recent call last)" in tb
    assert "exfn.py" in tb and "raise_value_error" in tb
    assert e.remote_traceback == tb
    with pytest.raises(ValueError, match="bad input 3"):
        f.result()
    # one that does not pickle comes as a RemoteError of its type
    g = ex.submit(exfn.unpicklable_exception)
    e = g.exception(timeout=60)
    assert isinstance(e, pilot.RemoteError)
    assert e.type_name.endswith("Bad") and "holds a lock" in e.message
    assert "unpicklable_exception" in e.traceback


def test_worker_deaths_fail_only_their_call(ex):
    a = ex.submit(exfn.exit3)
    e = a.exception(timeout=60)
    assert isinstance(e, pilot.TaskFailed)
    assert e.state == "failed" and e.exit_code == 3
    assert "exited with code 3" in e.reason
    b = ex.submit(exfn.segv)
    e = b.exception(timeout=60)
    assert isinstance(e, pilot.TaskFailed) and e.signal == 11
    assert "died of signal 11" in e.reason and "during the call" in e.reason
    assert "call %d failed" % b.task_id in str(e)
    # the next calls work
    assert list(ex.map(exfn.square, range(10))) == [i * i for i in range(10)]


def test_sizes(ex, monkeypatch):
    # a result over 256 MiB: the call fails with the worker's words
    # (about 257 MiB are pickled there, once)
    f = ex.submit(exfn.too_big, (256 << 20) + 4096)
    e = f.exception(timeout=120)
    assert isinstance(e, pilot.TaskFailed)
    assert "over the limit of 268435456 (256 MiB)" in e.reason
    # a call over the limit is refused by submit(): the limit lowered
    # to 1 MiB, not to pickle 256 MiB here too
    monkeypatch.setattr(pickle_mod, "MAX_CALL", 1 << 20)
    with pytest.raises(pilot.BadRequest, match="more than 1048576 bytes"):
        ex.submit(exfn.total, b"x" * (1 << 21))
    with pytest.raises(ValueError):
        ex.submit(exfn.total, b"x" * (1 << 21))
    # one that does not pickle, at once
    import threading as th
    with pytest.raises(TypeError):
        ex.submit(exfn.total, th.Lock())
    monkeypatch.undo()
    # a value over 64 KiB (a result file) and one over 256 KiB as an
    # argument (an input file) both ways
    asked = []
    fetch = ex._results
    monkeypatch.setattr(ex, "_results", lambda ids: asked.append(ids) or
                        fetch(ids))
    # a small value comes with its end (no request); a larger one is
    # asked for, from pilotd's table (> 4 KiB) or a file (> 64 KiB)
    small = ex.submit(exfn.blob, 4000)
    assert small.result(60) == b"\xab" * 4000
    assert asked == []
    mid = ex.submit(exfn.blob, 20_000)
    assert mid.result(60) == b"\xab" * 20_000
    assert asked == [[mid.task_id]]
    big = ex.submit(exfn.blob, 300_000)
    assert big.result(60) == b"\xab" * 300_000
    assert asked[-1] == [big.task_id]
    assert ex.submit(len, b"\xcd" * 400_000).result(60) == 400_000


def test_futures_as_arguments(ex):
    a = ex.submit(exfn.square, 3)                 # 9
    b = ex.submit(exfn.add, a, 1)                 # 10
    c = ex.submit(exfn.add, b, a)                 # 19
    assert c.result(60) == 19
    shown = ex._client.show(c.task_id)
    assert sorted(d["id"] for d in shown["after"]) == sorted(
        [a.task_id, b.task_id])
    # nested in a structure, and a value over 64 KiB
    big = ex.submit(exfn.blob, 100_000)
    n = ex.submit(lambda d: len(d["x"][0]) + d["y"], {"x": [big], "y": c})
    assert n.result(60) == 100_019
    # one that failed: the call that needs it does not run
    bad = ex.submit(exfn.raise_value_error, 0)
    dep = ex.submit(exfn.add, bad, 1)
    e = dep.exception(timeout=60)
    assert isinstance(e, pilot.TaskFailed) and e.state != "done"


def test_shutdown_cancels_pending(client):
    ex = pilot.Executor(client, cwd=HERE)
    fs = [ex.submit(exfn.nap, 0.5, i) for i in range(40)]
    time.sleep(1)
    ex.shutdown(wait=False, cancel_futures=True)
    with pytest.raises(RuntimeError):
        ex.submit(exfn.square, 1)
    done, not_done = pilot.wait(fs, timeout=60)
    assert not not_done
    canceled = [f for f in fs if f.cancelled()]
    ran = [f for f in fs if not f.cancelled()]
    assert len(canceled) >= 20, "only %d canceled (%d cores seen, %s)" % (
        len(canceled), ex._pk.slots, ex.stats)
    for f in ran:
        assert f.result() == fs.index(f)
    ids = [f.task_id for f in fs if f.task_id is not None]
    ex._reader.join(30)
    assert not ex._reader.is_alive()
    n = client.counts(ids)
    assert n["running"] + n["queued"] + n["waiting"] + n["assigned"] == 0
    # packed calls share a task (a batch canceled whole)
    assert n["canceled"] == len({f.task_id for f in canceled if f.task_id})


def test_cancel_queued(ex):
    cores = len(ex._client.status()["nodes"][0]["cores"])
    hold = ex.options(cores=cores).submit(exfn.nap, 10)
    wait_state(ex._client, hold, ("running",))
    queued = ex.submit(exfn.square, 2)
    wait_state(ex._client, queued, ("queued",))
    assert queued.cancel() is True
    assert queued.cancelled()
    assert wait_state(ex._client, queued, FINAL) == "canceled"
    assert hold.kill() is True
    assert ex.submit(exfn.square, 5).result(60) == 25


RESTART_CHILD = r"""
import collections, json, sys
import pilot, pilot.executor as pex
sys.path.insert(0, %(here)r)
import exfn
seen = collections.Counter()
for name in ("set_result", "set_exception"):
    def wrapped(self, v, orig=getattr(pex.Future, name)):
        seen[id(self)] += 1
        return orig(self, v)
    setattr(pex.Future, name, wrapped)
c = pilot.connect(%(pilot)r, %(home)r)
with pilot.Executor(c, cwd=%(here)r) as ex:
    fs = [ex.submit(exfn.nap, 0.1, i) for i in range(60)]
    ex._flush_now()
    print("sent", flush=True)
    values = [f.result(timeout=120) for f in fs]
print(json.dumps({"values": values, "resolved": list(seen.values()),
                  "futures": len(seen)}), flush=True)
"""


def test_pilotd_killed_and_restarted(empty_home):
    # the Executor runs in a process of its own: N.B. a watch that follows
    # a restarted pilotd has made the next request of another connection
    # of its process fail (ETIMEDOUT, at once): the session's client here
    c = pilot.up(local=True, wait_timeout=60, home=empty_home)
    env = py_child_env()
    try:
        p = subprocess.Popen([sys.executable, "-c", RESTART_CHILD % {
            "here": HERE, "pilot": c.id, "home": empty_home}],
            stdout=subprocess.PIPE, env=env, text=True)
        try:
            assert p.stdout.readline() == "sent\n"
            time.sleep(1)
            with open(os.path.join(c.dir, "endpoint")) as f:
                pid = int(dict(ln.split(None, 1) for ln in f
                               if ln.strip())["pid"])
            os.kill(pid, signal.SIGKILL)
            for _ in range(200):
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.05)
            # (setsid -f: the new pilotd is not our child, so that no
            # zombie of it outlives it: pilot down waits for its pid)
            subprocess.run(["setsid", "-f", os.path.join(
                os.environ["PILOT_BIN"], "pilotd"), "--dir", c.dir,
                "--local"], check=True, stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            out, _ = p.communicate(timeout=180)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        assert p.returncode == 0
        got = json.loads(out)
        # none lost, none resolved twice
        assert got["values"] == list(range(60))
        assert got["futures"] == 60 and got["resolved"] == [1] * 60
    finally:
        c.down()
        c.close()


CHILD = r"""
import sys, time
import pilot
sys.path.insert(0, %(here)r)
import exfn
c = pilot.connect(%(pilot)r)
ex = pilot.Executor(c, cwd=%(here)r, pack=False)  # attach takes calls' ids
fs = [ex.submit(exfn.nap, 0.05 * (i %% 5), i) for i in range(30)]
ex._flush_now()
print(" ".join(str(f.task_id) for f in fs), flush=True)
time.sleep(600)
"""


def test_client_killed_and_attached(client):
    env = py_child_env()
    p = subprocess.Popen([sys.executable, "-c", CHILD % {
        "here": HERE, "pilot": client.id}], stdout=subprocess.PIPE,
        env=env, text=True)
    try:
        ids = [int(i) for i in p.stdout.readline().split()]
        assert len(ids) == 30
    finally:
        p.kill()
        p.wait()
    with pilot.Executor(client, cwd=HERE) as ex:
        # a few have ended already, the others not yet
        fs = ex.attach(ids)
        assert [f.task_id for f in fs] == ids
        assert [f.result(timeout=120) for f in fs] == list(range(30))


def test_20_clients(client):
    bad = []

    def work(k):
        try:
            with pilot.connect(client.id) as c, \
                    pilot.Executor(c, cwd=HERE) as ex:
                fs = [ex.submit(exfn.add, k * 1000, i) for i in range(100)]
                got = [f.result(timeout=300) for f in fs]
                if got != [k * 1000 + i for i in range(100)]:
                    bad.append((k, got))
        except Exception as e:
            bad.append((k, repr(e)))
    threads = [threading.Thread(target=work, args=(k,)) for k in range(20)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not bad


def test_idle_longer_than_the_request_timeout(client):
    # a connection's loop runs only inside requests: its clock must be
    # brought up to date before a request's timer is set, or the first
    # request after an idle spell longer than the timeout failed at once
    # (ETIMEDOUT) while pilotd queued it
    with pilot.connect(client.id, timeout=1) as c:
        with pilot.Executor(c, cwd=HERE) as ex:
            assert ex.submit(exfn.square, 2).result(60) == 4
            time.sleep(1.5)
            f = ex.submit(exfn.square, 3)
            assert f.result(60) == 9
            time.sleep(1.5)
            assert c.submit(["true"]).id == f.task_id + 1


def packed(ex, fn, args):
    """Futures of fn(*a) for a in args, buffered while the flusher cannot
    send (its lock held) so that they go in batches."""
    with ex._send_lock:
        fs = [ex.submit(fn, *a) for a in args]
    ex._flush_now()
    return fs


def test_packing_2000_calls(ex):
    n0, s0 = ex.stats["packed"], ex._set_results
    fs = [ex.submit(exfn.add, i, 1) for i in range(2000)]
    assert [f.result(timeout=120) for f in fs] == list(range(1, 2001))
    assert ex._set_results - s0 == 2000          # each resolved once
    assert ex.stats["packed"] - n0 > 0
    ids = {f.task_id for f in fs}
    assert len(ids) < 2000
    # a lone call on an idle Executor goes alone
    g = ex.submit(exfn.square, 4)
    assert g.result(60) == 16 and g._pack is None
    with pytest.raises(TypeError):
        pilot.Executor(ex._client, cwd=HERE, bogus=1)
    off = pilot.Executor(ex._client, cwd=HERE, pack=False)
    try:
        hs = packed(off, exfn.square, [(i,) for i in range(50)])
        assert [h.result(60) for h in hs] == [i * i for i in range(50)]
        assert off.stats["packed"] == 0
        assert len({h.task_id for h in hs}) == 50
    finally:
        off.shutdown()


def test_packed_call_raising(ex):
    fs = packed(ex, exfn.square_unless, [(i, 7, "raise") for i in range(30)])
    e = fs[7].exception(timeout=60)
    assert type(e) is ValueError and str(e) == "bad input 7"
    tb = e.remote_traceback
    assert "square_unless" in tb and "bad input 7" in tb
    assert isinstance(e.__cause__, pilot.RemoteTraceback)
    for i, f in enumerate(fs):
        if i != 7:
            assert f.result(60) == i * i
    assert fs[7]._pack is not None
    assert fs[7].task_id in {f.task_id for f in fs[:7] + fs[8:]}
    # a call whose argument is a packed call's value, and one whose
    # argument is one that raised
    assert fs[3]._pack is not None
    assert ex.submit(exfn.add, fs[3], 1).result(60) == 10
    d = ex.submit(exfn.add, {"k": [fs[5]]}["k"][0], fs[6]).result(60)
    assert d == 25 + 36
    bad = ex.submit(exfn.add, fs[7], 1).exception(timeout=60)
    assert isinstance(bad, pilot.TaskFailed)
    assert "that call raised" in bad.reason


def test_packed_worker_death_fails_only_its_call(ex):
    r0 = ex.stats["resubmitted"]
    fs = packed(ex, exfn.square_unless, [(i, 11, "exit") for i in range(40)])
    e = fs[11].exception(timeout=120)
    assert isinstance(e, pilot.TaskFailed)
    assert e.state == "failed" and e.exit_code == 3
    assert [f.result(120) for i, f in enumerate(fs) if i != 11] == \
        [i * i for i in range(40) if i != 11]
    assert ex.stats["resubmitted"] - r0 >= 1
    # it was sent again alone: its own task, which failed (its batch's id
    # is not compared: on a loaded machine the batch may have died and
    # been sent again before this thread read it)
    others = {f.task_id for i, f in enumerate(fs) if i != 11}
    assert fs[11].task_id not in others and fs[11]._pack is None
    assert e.task_id == fs[11].task_id


def test_cancel_and_kill_packed(ex):
    cores = len(ex._client.status()["nodes"][0]["cores"])
    hold = ex.options(cores=cores).submit(exfn.nap, 10)
    wait_state(ex._client, hold, ("running",))
    fs = packed(ex, exfn.square, [(i,) for i in range(20)])
    assert fs[0]._pack is not None or fs[1]._pack is not None
    k = 0 if fs[0]._pack is not None else 1
    wait_state(ex._client, fs[k], ("queued",))
    # its batch's task is canceled; the batch's other calls go again
    assert fs[k].cancel() is True and fs[k].cancelled()
    assert hold.kill() is True
    assert [f.result(60) for i, f in enumerate(fs) if i != k] == \
        [i * i for i in range(20) if i != k]
    # a running packed call killed: its batch's others go again
    gs = packed(ex, exfn.nap, [(3 if i == 0 else 0.01, i) for i in range(8)])
    wait_state(ex._client, gs[0], ("running",))
    assert gs[0].kill() is True and gs[0].cancelled()
    assert [g.result(60) for g in gs[1:]] == list(range(1, 8))
