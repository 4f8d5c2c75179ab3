"""tests/py/test_pycall.py - hostile Python calls in warm workers: what a
function does to its worker must not change another call's result or
cost the worker"""
import base64
import pickle
import textwrap

import pilot

PY = "/usr/bin/python3"


def value(client, t):
    r = client.call("results", ids=[t.id])[0]
    assert r["status"] == "ok", r
    return pickle.loads(base64.b64decode(r["result"]))


def test_a_call_that_forks_and_returns(client, tmp_path):
    # os.fork() in the function: the child returns into the worker too.
    # It answered the agent as the worker, a second result on the
    # worker's socket: the agent took it for a bad message and killed the
    # worker (and, had it come first, the child's 0 was the call's value)
    (tmp_path / "forkmod.py").write_text(textwrap.dedent("""\
        import os
        def forky():
            return os.fork()
        def pid():
            return os.getpid()
        """))
    cwd = str(tmp_path)
    # argv [] for a function of no arguments (was refused: "field 'argv'
    # has the wrong type or value")
    first = client.submit([], py_call="forkmod:pid",
                          python=PY, cwd=cwd)
    first.wait(60)
    worker = value(client, first)
    for _ in range(3):
        t = client.submit(None, py_call="forkmod:forky", python=PY, cwd=cwd)
        t.wait(60)
        assert t.state == "done", t.refresh().info
        child = value(client, t)
        assert child not in (0, worker)
        again = client.submit(None, py_call="forkmod:pid", python=PY, cwd=cwd)
        again.wait(60)
        assert value(client, again) == worker, "the worker was replaced"


def test_small_results_come_with_their_ends(client, tmp_path):
    # pilotd pushes a call's result (<= 4 KiB) with its end; the watch
    # dropped it, so a client asked for every value again
    (tmp_path / "sizemod.py").write_text(textwrap.dedent("""\
        def blob(n):
            return b"x" * int(n)
        """))
    with pilot.Watch(client) as w:
        small, big = client.submit_many(
            [{"py_call": "sizemod:blob", "argv": [n], "python": PY,
              "cwd": str(tmp_path)} for n in ("10", "5000")], watch=w)
        ends = {}
        while w.pending:
            for e in w.next(timeout=60):
                ends[e["id"]] = e
    assert pickle.loads(base64.b64decode(ends[small.id]["result"])) == \
        b"x" * 10
    assert ends[big.id]["state"] == "done"
    assert ends[big.id].get("result") is None  # over 4 KiB: ask for it


def test_reprs_and_reasons_of_any_text(client, tmp_path):
    # the worker sends the value's repr and the exception's last line in
    # a JSON header: a NUL in one made the agent refuse the header (the
    # call failed, "a bad message", the worker killed) and a lone
    # surrogate would not encode (the worker died)
    (tmp_path / "textmod.py").write_text(textwrap.dedent("""\
        import os
        class Odd:
            def __init__(self, text):
                self.text = text
            def __repr__(self):
                return self.text
            def __reduce__(self):
                return (str, ("odd",))
        def nul():
            return Odd("a\\x00b")
        def surrogate():
            return Odd("c\\udcffd")
        def raise_nul():
            raise ValueError("e\\x00f")
        def pid():
            return os.getpid()
        """))
    kw = {"python": PY, "cwd": str(tmp_path)}
    first = client.submit([], py_call="textmod:pid", **kw)
    first.wait(60)
    worker = value(client, first)
    for fn, state, text in (("nul", "done", "a\\x00b"),
                            ("surrogate", "done", "c\\udcffd"),
                            ("raise_nul", "failed", "ValueError: e\\x00f")):
        t = client.submit([], py_call="textmod:" + fn, **kw)
        t.wait(60)
        info = t.refresh().info
        assert info["state"] == state, (fn, info)
        if state == "done":
            assert info["result_repr"] == text
            assert value(client, t) == "odd"
        else:
            assert info["reason"] == text
        again = client.submit([], py_call="textmod:pid", **kw)
        again.wait(60)
        assert value(client, again) == worker, fn + ": the worker went"
