"""tests/py/test_watch.py - waiting by pushed ends (pilot.Watch over
pilot_watch_*): Task.wait and Client.wait return on the push, not on a
poll; a watch resumed from a second Client with its token; a thread
submits into a watch while another blocks in next()."""
import statistics
import threading
import time

import pytest

import pilot


def _latency(t):
    """Seconds from the task's end (pilotd's end_time) to now."""
    return time.time() - t.info["end_time"]


def test_task_wait_by_push(client):
    # each task runs 1.1 s: the wait that polled (show after 50 ms, then
    # each pause 1.5 times the last, up to 1 s) looked at 1.04 s and
    # 1.61 s, ~0.5 s after the end; a push comes in milliseconds on an
    # idle local pilot
    lat = []
    for _ in range(3):
        t = client.submit(["sleep", "1.1"])
        assert t.wait(timeout=60) is t and t.state == "done"
        lat.append(_latency(t))
    assert statistics.median(lat) < 0.1, lat


def test_client_wait_first_completed(client):
    quick = client.submit(["sleep", "0.2"])
    slow = [client.submit(["sleep", "30"]) for _ in range(2)]
    t0 = time.monotonic()
    done, left = client.wait([quick] + slow,
                             return_when=pilot.FIRST_COMPLETED, timeout=60)
    took = time.monotonic() - t0
    client.cancel(slow)
    assert done == {quick} and left == set(slow)
    assert took < 10, took
    # all of them: the canceled ones end too
    done, left = client.wait(slow, timeout=60)
    assert done == set(slow) and not left
    assert {t.refresh().state for t in slow} == {"canceled"}


def test_client_wait_timeout_and_arrays(client):
    arr = client.submit(["sh", "-c", "sleep 0.{}"], array="1-4")
    long = client.submit(["sleep", "30"])
    done, left = client.wait([arr, long], timeout=2)
    assert done == {arr} and left == {long}
    client.cancel(long)
    with pytest.raises(pilot.BadRequest):
        client.wait([arr], return_when="SOMETIMES")
    # an ended task: no watch needed
    assert client.wait([arr.refresh()], timeout=0)[0] == {arr}


def test_watch_resumed_by_a_second_client(client):
    w = pilot.Watch(client)
    arr = client.submit(["sh", "-c", "sleep 0.{}"], array="1-6", watch=w)
    first = w.next(timeout=30)
    assert first and all(e["state"] == "done" for e in first)
    after, token = w.last_seq, w.token
    assert after == first[-1]["seq"]
    w.close(unwatch=False)
    time.sleep(1.5)  # the others end with no client attached
    with pilot.connect(client.id) as c2:
        w2 = pilot.Watch(c2, token=token, after=after)
        got = []
        deadline = time.monotonic() + 30
        while len(first) + len(got) < 6 and time.monotonic() < deadline:
            got += w2.next(timeout=1)
        seqs = [e["seq"] for e in got]
        assert seqs == sorted(seqs) and seqs[0] > after
        assert (sorted(e["id"] for e in first + got) == sorted(arr.ids))
        assert w2.next(timeout=0.3) == []
        w2.close()
    # dropped: a resume without its tasks is refused
    with pytest.raises(pilot.Error):
        pilot.Watch(client, token=token, after=after)


def test_submit_while_another_thread_waits(client):
    w = client.watch()
    got, errs = [], []

    def waiter():
        try:
            while len(got) < 6:
                got.extend(w.next())
        except Exception as e:  # said below
            errs.append(e)

    th = threading.Thread(target=waiter)
    th.start()
    time.sleep(0.3)  # it blocks in next() now
    tasks, slowest = [], 0
    for _ in range(3):
        t0 = time.monotonic()
        tasks += client.submit_many([{"argv": ["sleep", "0.2"]},
                                     {"argv": ["true"]}], watch=w)
        slowest = max(slowest, time.monotonic() - t0)
    th.join(60)
    assert not th.is_alive() and not errs, errs
    assert slowest < 1.0, slowest
    assert sorted(e["id"] for e in got) == sorted(t.id for t in tasks)
    assert w.pending == 0
    w.close()
    with pytest.raises(pilot.Error):
        w.next(0)


def test_watch_errors(client):
    with pytest.raises(pilot.BadRequest):
        pilot.Watch(client, ids=[1], all=True)
    with pytest.raises(pilot.BadRequest):
        pilot.Watch(client, after=3)
    with pytest.raises(pilot.NoSuchTask):
        pilot.Watch(client, ids=[99999999])


def test_pending_counts_tasks_a_submit_added(client):
    # the loop of Watch's docstring: pending read right after a submit
    # into the watch counted none of its tasks (0 for a new watch), so
    # the loop ended before it read a single end
    with pilot.Watch(client) as w:
        assert w.pending == 0
        tasks = client.submit_many([{"argv": ["sleep", "0.5"]}] * 3
                                   + [{"argv": ["true"]}], watch=w)
        assert w.pending == 4
        got = []
        while w.pending:
            got += w.next(timeout=30)
        assert sorted(e["id"] for e in got) == sorted(t.id for t in tasks)
        # ends that came in add()'s reply are pending until given
        more = client.submit_many([{"argv": ["true"]}] * 2, watch=w)
        time.sleep(1)  # they end, unread
        assert w.pending == 2
        assert sorted(e["id"] for e in w.next(timeout=30)) == \
            sorted(t.id for t in more)
        assert w.pending == 0
