"""tests/py/test_journal.py - Task.logs() and log_paths() of output kept in
the nodes' journals (--output journal, docs/output.md)

Read through libpilot's pilot_logs_*(), the reader of 'pilot logs': the
text must be the CLI's, byte for byte, and no per-task file may exist.
(One rank followed: test_client.py's test_logs_follow.)
"""
import os
import re

from conftest import pilot_cli


def _journal_paths(t, stream="stdout"):
    paths = t.log_paths(stream)
    assert paths, "no journal segment holds task %d" % t.id
    for p in paths:
        assert re.search(r"/journal/[^/]+/\d{6}\.pj$", p), p
        assert os.path.isfile(p), p
    return paths


def test_journal_one_rank(client):
    c = client
    t = c.submit(["sh", "-c", "echo one; echo err >&2; echo two; "
                  "printf tail"], output="journal")
    assert t.wait(60).state == "done"
    assert "PILOT_OUTPUT=journal" in t.info["env"]
    assert t.logs() == "one\ntwo\ntail"
    assert t.logs("stderr") == "err\n"
    # no file of its own: the output is in the journal only
    assert not os.path.exists(t.log_path())
    _journal_paths(t)
    assert t.logs() == pilot_cli("logs", str(t.id)).stdout
    assert t.logs("stderr") == pilot_cli("logs", "--stderr",
                                         str(t.id)).stdout
    # one rank: rank=0 is the same, label=True puts "0: " before each
    assert t.logs(rank=0) == t.logs()
    assert t.logs(label=True) == "0: one\n0: two\n0: tail\n"


def test_journal_ranks(client):
    c = client
    # each rank writes its lines a piece at a time: whole lines come out
    t = c.submit(["sh", "-c", 'for i in 1 2 3; do printf "r$PILOT_RANK "; '
                  'sleep 0.05; echo "l$i"; done'], ranks=2, output="journal")
    assert t.wait(60).state == "done"
    assert not any(os.path.exists(p) for p in
                   (t.log_path(), t.log_path().replace(".out", ".r0.out")))
    _journal_paths(t)
    out = t.logs()
    want = ["r%d l%d" % (r, i) for r in range(2) for i in range(1, 4)]
    assert sorted(out.splitlines()) == sorted(want)
    # each rank's lines in their order
    for r in range(2):
        assert [x for x in out.splitlines() if x.startswith("r%d " % r)] \
            == ["r%d l%d" % (r, i) for i in range(1, 4)]
    assert out == pilot_cli("logs", str(t.id)).stdout
    assert t.logs(rank=1) == "".join("r1 l%d\n" % i for i in range(1, 4))
    assert t.logs(rank=1) == pilot_cli("logs", "--rank", "1",
                                       str(t.id)).stdout
    lab = t.logs(label=True)
    assert lab == pilot_cli("logs", "--label", str(t.id)).stdout
    assert sorted(lab.splitlines()) == sorted("%d: r%d l%d" % (r, r, i)
                                              for r in range(2)
                                              for i in range(1, 4))
    try:
        t.logs(rank=2)
    except ValueError as e:  # pilot.BadRequest
        assert "no rank 2" in str(e)
    else:
        raise AssertionError("rank=2 of a task of 2 ranks was taken")


def test_journal_follow_ranks(client):
    c = client
    t = c.submit(["sh", "-c", "for i in 1 2 3; do echo r$PILOT_RANK.$i; "
                  "sleep 0.3; done; printf r$PILOT_RANK.end"], ranks=2,
                 output="journal")
    got = list(t.logs(follow=True))
    # whole lines, each rank's last (no newline) made whole
    assert all(x.endswith("\n") for x in got)
    assert sorted(got) == sorted("r%d.%s\n" % (r, i) for r in range(2)
                                 for i in ("1", "2", "3", "end"))
    assert t.state == "done"
    assert sorted(t.logs().splitlines()) == sorted(x[:-1] for x in got)
