"""tests/py/test_client.py - the Python client against real pilots

A local pilot (conftest's 'client') for most; a Slurm pilot of 2 nodes on
the dev cluster for the MPI task.  What the client says is checked
against what the pilot CLI says ('pilot show --json').
"""
import json
import os
import threading
import time

import pytest

import pilot
from conftest import REPO, pilot_cli


def cli_show(c, task_id):
    return json.loads(pilot_cli("show", "--pilot", c.id, "--json",
                                str(task_id)).stdout)


def test_cdef_is_the_headers():
    """_cdef.py is what scripts/gen-cdef.py makes of lib/pilot.h."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "gen_cdef", os.path.join(REPO, "scripts", "gen-cdef.py"))
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    with open(os.path.join(REPO, "lib", "pilot.h")) as f:
        want = gen.module(f.read())
    with open(os.path.join(REPO, "python", "pilot", "_cdef.py")) as f:
        assert f.read() == want, "python/pilot/_cdef.py is stale: make cdef"


def test_library_version():
    from pilot._ffi import lib
    assert lib().pilot_api_version() == lib().PILOT_API_VERSION == 1


def test_submit_options_round_trip(client, tmp_path):
    c = client
    first = c.submit(["true"], name="first")
    t = c.submit(["sh", "-c", 'echo "A=$A rank=$PILOT_RANK"; pwd'],
                 name="opts", ranks=2, cores_per_rank=1, env={"A": "x y"},
                 cwd=str(tmp_path), priority=7,
                 tags={"model": "lstm", "run": 3}, timeout=60, retries=1,
                 after=[(first, "any")])
    assert isinstance(t, pilot.Task) and t.id > first.id
    assert t.wait(timeout=60) is t
    assert t.state == "done" and t.exit_code == 0
    shown = cli_show(c, t.id)
    # the client reads the same task object the CLI prints
    assert c.show(t.id) == shown
    assert t.info == shown
    assert shown["name"] == "opts"
    assert shown["ranks"] == 2 and shown["cores_per_rank"] == 1
    assert "A=x y" in shown["env"]
    assert shown["cwd"] == str(tmp_path)
    assert shown["priority"] == 7
    assert shown["tags"] == {"model": "lstm", "run": "3"}
    assert shown["timeout"] == 60 and shown["retries"] == 1
    assert shown["argv"] == ["sh", "-c", 'echo "A=$A rank=$PILOT_RANK"; pwd']
    assert shown["after"] == [{"id": first.id, "any": True}]
    out = t.logs()
    assert sorted(out.splitlines()) == sorted(
        ["A=x y rank=0", "A=x y rank=1", str(tmp_path), str(tmp_path)])
    assert t.logs("stderr") == ""
    # a shell line is "cmd"
    s = c.submit("echo $((6 * 7))", name="shell")
    assert s.wait(30).logs() == "42\n"


def test_array_and_names(client):
    c = client
    tasks = c.submit_many([
        {"name": "stage-a", "argv": ["true"]},
        {"argv": ["echo", "after a"], "after": ["stage-a"]},
        {"argv": ["echo", "{}"], "array": range(10, 13), "name": "el-{}"},
        {"argv": ["echo", "one"]},
    ])
    assert [len(t.ids) for t in tasks] == [1, 1, 3, 1]
    ids = [i for t in tasks for i in t.ids]
    assert ids == sorted(ids) and len(set(ids)) == 6
    arr = tasks[2]
    arr.wait(timeout=60)
    elems = c.ls(ids=[arr])
    assert [e.info["name"] for e in elems] == ["el-10", "el-11", "el-12"]
    assert [c.task(i).logs() for i in arr.ids] == ["10\n", "11\n", "12\n"]
    assert c.task("%d.11" % arr.id).id == arr.ids[1]  # index 11
    assert tasks[1].wait(30).exit_code == 0
    assert c.show(tasks[1].id)["after"]


def test_submit_many_10000(client):
    c = client
    block = c.submit(["sleep", "300"], name="blocker")
    t0 = time.monotonic()
    specs = [{"argv": ["echo", str(i)], "after": [block],
              "tags": {"batch": "big"}} for i in range(10000)]
    tasks = c.submit_many(specs)
    took = time.monotonic() - t0
    print("submit_many of 10,000: %.2f s" % took)
    assert len(tasks) == 10000
    ids = [t.id for t in tasks]
    assert ids == sorted(ids) and len(set(ids)) == 10000
    counts = c.counts(tasks)
    assert counts["total"] == 10000 and counts["waiting"] == 10000
    assert len(c.ls(tags={"batch": "big"})) == 10000
    assert len(c.ls(tags=["batch=big"], limit=10)) == 10
    r = c.cancel(tasks)
    assert len(r["canceled"]) == 10000
    c.cancel(block)
    assert c.counts(tasks)["canceled"] == 10000


def test_cancel(client):
    c = client
    t = c.submit(["sleep", "300"])
    deadline = time.monotonic() + 30
    while t.state != "running" and time.monotonic() < deadline:
        time.sleep(0.1)
    assert t.state == "running"
    r = c.cancel(t)
    assert r["canceled"] == [t.id]
    assert t.wait(timeout=30).state == "canceled"
    # canceling it again: it is final already
    assert c.cancel(t.id)["final"] == [t.id]


@pytest.mark.parametrize("output", ["files", "journal"])
def test_logs_follow(client, output):
    c = client
    # queued behind nothing, it may not have started when we begin; its
    # output in its files, or in the node's journal (read alike)
    t = c.submit(["sh", "-c", "for i in 1 2 3 4 5; do echo line$i; "
                  "echo err$i >&2; sleep 0.3; done; printf tail"],
                 output=output)
    got = []
    t0 = time.monotonic()
    for line in t.logs(follow=True):
        got.append((line, time.monotonic() - t0))
    assert [g[0] for g in got] == ["line%d\n" % i for i in range(1, 6)] \
        + ["tail"]
    # the lines came as they were written, not all at the end
    assert got[-1][1] - got[0][1] > 0.8
    assert t.state == "done"
    assert list(t.logs("stderr", follow=True)) == ["err%d\n" % i
                                                   for i in range(1, 6)]
    assert t.logs() == "".join(g[0] for g in got)
    assert os.path.exists(t.log_path()) == (output == "files")


def test_errors(client, empty_home):
    c = client
    with pytest.raises(pilot.NoSuchTask) as e:
        c.show(99999999)
    assert e.value.errno == 2 and "no task 99999999" in str(e.value)
    with pytest.raises(LookupError):
        c.task(99999999)
    with pytest.raises(pilot.NoSuchTask):
        c.cancel(99999999)
    with pytest.raises(pilot.BadRequest) as e:
        c.submit(["true"], ranks=0)
    assert isinstance(e.value, ValueError) and "ranks" in str(e.value)
    with pytest.raises(pilot.BadRequest) as e:
        c.submit(["true"], colour="blue")
    assert "unknown field 'colour'" in str(e.value)
    with pytest.raises(pilot.BadRequest) as e:
        c.submit(["true"], comm="smoke")
    assert "unknown comm 'smoke'" in str(e.value)
    with pytest.raises(pilot.BadRequest) as e:
        c.submit_many([{"argv": ["true"]}, {"argv": ["true"], "nodes": -1}])
    assert str(e.value).startswith("specs[1]: ")
    with pytest.raises(pilot.BadRequest):
        c.ls(state="sleepy")
    with pytest.raises(pilot.NoPilot) as e:
        pilot.connect(home=empty_home)
    assert "no pilot running" in str(e.value) and e.value.errno == 2
    with pytest.raises(pilot.NoPilot) as e:
        pilot.connect("p999")
    assert "no pilot p999" in str(e.value)
    with pytest.raises(pilot.BadRequest):
        pilot.connect("nine")
    t = c.submit(["sleep", "300"])
    with pytest.raises(TimeoutError) as e:
        t.wait(timeout=0.5)
    assert isinstance(e.value, pilot.Timeout) and e.value.errno == 110
    c.cancel(t)
    with pytest.raises(pilot.Error) as e:
        pilot.up(bogus_option=True)
    assert "unknown option '--bogus-option'" in str(e.value)


def test_status(client):
    st = client.status()
    assert st["pilot"] == client.id and st["mode"] == "local"
    assert st["agents_up"] == 1
    assert client.live


def test_20_clients_in_threads(client):
    errors, results = [], {}
    shared = client

    def work(n):
        try:
            own = pilot.connect(client.id)
            with own:
                c = own if n % 2 else shared
                tasks = [c.submit(["sh", "-c", "echo %d-%d" % (n, k)])
                         for k in range(5)]
                for k, t in enumerate(tasks):
                    t.wait(timeout=120)
                    results[(n, k)] = (t.exit_code, t.logs())
        except Exception as e:  # reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(20)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    assert not errors
    assert len(results) == 100
    assert all(r == (0, "%d-%d\n" % nk) for nk, r in results.items())


def test_mpi_task_on_the_cluster(tmp_path):
    """An MPI task of 4 ranks over 2 nodes of a Slurm pilot."""
    try:
        c = pilot.up(nodes=2, time="10:00", wait_timeout=180)
    except pilot.Error as e:
        if e.pilot:
            pilot_cli("down", "--pilot", e.pilot, check=False)
        raise
    try:
        code = ("from mpi4py import MPI; import socket; "
                "w = MPI.COMM_WORLD; s = w.allreduce(w.Get_rank() + 1); "
                "print(w.Get_rank(), w.Get_size(), s, socket.gethostname(), "
                "flush=True)")
        for _ in range(2):
            t = c.submit(["/usr/bin/python3", "-c", code], ranks=4, nodes=2,
                         comm="mpi", name="mpi4", cwd=str(tmp_path))
            t.wait(timeout=120)
            # Open MPI 4.1.4's rare crash in MPI_Init (docs/pipeline.md),
            # not pilot's: once more, said on the test's output
            if t.state == "done" or \
                    "Failing at address: (nil)" not in t.logs("stderr"):
                break
            print("task %d crashed in Open MPI's MPI_Init: once more" % t.id)
        out = t.logs()
        assert t.state == "done" and t.exit_code == 0, (t.info, out,
                                                         t.logs("stderr"))
        rows = sorted(line.split() for line in out.splitlines())
        assert [r[:3] for r in rows] == [[str(i), "4", "10"]
                                         for i in range(4)]
        assert len({r[3] for r in rows}) == 2
        assert cli_show(c, t.id)["comm"] == "mpi"
    finally:
        c.down()
        c.close()
