"""pilot._pack - the Executor's packing of calls into tasks

A warm call costs ~2.6 ms of CPU on the pilot's side (pilotd, the agent
and the worker's per-call setup), ~30x the call of a no-op function:
while an Executor has many calls pending, its flusher packs up to B
buffered calls with the same task options into one task, so that cost is
paid once a batch (docs/python-reference.md, "Packing").  B = pending calls /
(2 x the calls the pilot runs at once), at most PACK_MAX: an idle
Executor sends a lone call as a plain task (its latency stays that of
one call), a busy one keeps about two batches a slot in flight.

The batch's task is a call of run() below (pickled by value, as map()'s
chunks: a worker never imports the pilot package) on the list of the
calls' pickles as submit() made them (nothing is pickled twice).  It
returns one outcome a call, each pickled on its own in the worker, so
that a value that will not pickle (or unpickle here) fails its call
only:

  ("ok", PICKLED_VALUE)            the call returned
  ("raised", PICKLED_(EXC, TB))    it raised EXC, TB the traceback text
  ("error", TYPE, MESSAGE, TB)     it raised an exception that will not
                                   pickle
  ("failed", REASON)               its value would not pickle

A batch whose task ends with no such list (its worker died: os._exit,
a signal, out of memory; a result over the limit; a KeyboardInterrupt)
has its calls that are still pending sent again one a task, never
packed again: the call that kills its worker fails alone, as it would
have unpacked (those that had run before it in the batch run again).  A batch canceled by another client fails its calls
(pilot.TaskFailed, "canceled"), as a plain call's.
"""
import base64
import json
import time

import concurrent.futures._base as _cfb

from . import errors
from ._outcome import element, outcome

PACK_MAX = 256            # calls a batch
PACK_CALL_MAX = 64 << 10  # bytes of a pickled call that may be packed
PACK_BYTES = 4 << 20      # bytes of pickled calls a batch
SLOTS_S = 30.0            # seconds between looks at the pilot's cores

# run() in a worker.  Made by exec under a module name nothing can
# import, so that cloudpickle pickles it by value.  A KeyboardInterrupt
# (a kill, a cancel: SIGINT) ends the batch: its other calls are sent
# again (or fail, canceled elsewhere).
_NS = {"__name__": "pilot_pack_batch"}
exec('''
def run(blobs):
    import pickle
    import traceback
    import cloudpickle
    out = []
    for b in blobs:
        try:
            fn, args, kwargs = pickle.loads(b)
            v = fn(*args, **kwargs)
        except KeyboardInterrupt:
            raise
        except BaseException as e:
            tb = traceback.format_exc()
            try:
                out.append(("raised", cloudpickle.dumps((e, tb))))
            except BaseException:
                out.append(("error", type(e).__qualname__, str(e), tb))
            continue
        try:
            out.append(("ok", cloudpickle.dumps(v)))
        except BaseException as e:
            out.append(("failed", "the result would not pickle: %s: %s"
                        % (type(e).__name__, e)))
    return out
''', _NS)
_run = _NS["run"]


class Batch:
    """The calls of one packed task: its futures (each knows its
    (batch, index) as ._pack) and their specs (to send them again one a
    task).  Setting task_id or _where sets its futures'."""

    def __init__(self, items):
        self.fs = [f for f, _ in items]
        self.specs = [s for _, s in items]
        self._task_id = None
        self._w = "sending"
        for k, f in enumerate(self.fs):
            f._pack = (self, k)

    @property
    def task_id(self):
        return self._task_id

    @task_id.setter
    def task_id(self, v):
        self._task_id = v
        for f in self.fs:
            f.task_id = v

    @property
    def _where(self):
        return self._w

    @_where.setter
    def _where(self, v):
        self._w = v
        for f in self.fs:
            f._where = v

    @property
    def _state(self):
        # what _finish looks at: pending while one of its futures is
        if any(f._state == _cfb.PENDING for f in self.fs):
            return _cfb.PENDING
        return _cfb.FINISHED


class Packer:
    """An Executor's packing state and counters (under its lock but
    refresh())."""

    def __init__(self, on):
        self.on = on
        self.slots = 1            # calls of 1 core the pilot runs at once
        self.slots_at = None
        self.extra = 0            # calls in sent batches beyond one each
        self.killed = set()       # batch tasks this Executor canceled
        self.packed = 0           # calls sent in batches
        self.batches = 0
        self.resubmitted = 0      # calls sent again one a task

    def refresh(self, client):
        """The pilot's cores, every SLOTS_S (in the flusher, unlocked)."""
        now = time.monotonic()
        if not self.on or (self.slots_at is not None
                           and now - self.slots_at < SLOTS_S):
            return
        self.slots_at = now
        try:
            self.slots = max(1, int(client.status()["cores"]["total"]))
        except Exception:
            self.slots_at = None  # at the next send


def members(items):
    """The futures of these futures and batches."""
    out = []
    for f in items:
        if isinstance(f, Batch):
            out.extend(f.fs)
        else:
            out.append(f)
    return out


def _key(f, spec):
    """The options a batch's calls share; None: not to be packed."""
    if f._nopack or "refs" in spec or spec.get("timeout") is not None or \
            len(spec["input"]) > PACK_CALL_MAX * 4 // 3:
        return None
    rest = {k: v for k, v in spec.items() if k not in ("argv", "input")}
    return json.dumps(rest, sort_keys=True, default=str)


def pack(ex, taken):
    """The specs 'taken' from the buffer, those with the same options
    packed by up to B into batches (under ex._lock); [(future or Batch,
    spec)] in the order of their first calls."""
    pk = ex._pk
    if not pk.on or len(taken) < 2:
        return taken
    pending = len(ex._buf) + len(taken) + len(ex._futures) + pk.extra
    groups, order = {}, []
    for f, spec in taken:
        key = _key(f, spec)
        if key is None:
            order.append([(f, spec)])
            continue
        cores = max(1, int(spec.get("cores_per_rank") or 1))
        size = max(1, min(PACK_MAX, pending * cores // (2 * pk.slots)))
        g = groups.get(key)
        if g is None or len(g) >= size or \
                g.nbytes + len(spec["input"]) > PACK_BYTES * 4 // 3:
            g = groups[key] = _Group()
            order.append(g)
        g.append((f, spec))
        g.nbytes += len(spec["input"])
    out = []
    for g in order:
        if len(g) == 1:
            out.append(g[0])
        else:
            out.append(_batch(ex, g))
    return out


class _Group(list):
    nbytes = 0


def _batch(ex, items):
    import cloudpickle
    import pickle
    blobs = [base64.b64decode(s["input"]) for _, s in items]
    spec = {k: v for k, v in items[0][1].items() if k != "input"}
    spec["argv"] = ["%s [a batch of %d calls]" % (spec["argv"][0],
                                                 len(items))]
    spec["input"] = base64.b64encode(cloudpickle.dumps(
        (_run, (blobs,), {}), protocol=pickle.HIGHEST_PROTOCOL)).decode()
    b = Batch(items)
    ex._pk.packed += len(items)
    ex._pk.batches += 1
    return (b, spec)


def resolve(ex, b, end, res):
    """Resolve the futures of batch b from its task's end and result
    (each once: the executor's _settle())."""
    with ex._lock:
        killed = b.task_id in ex._pk.killed
        ex._pk.killed.discard(b.task_id)
    ok, value = outcome(end, res)
    if ok and (not isinstance(value, list) or len(value) != len(b.fs)):
        ok, value = False, errors.RemoteError(
            "TypeError", "batch task %d returned no list of %d outcomes"
            % (end["id"], len(b.fs)), None)
        for f in b.fs:
            ex._settle(f, False, value)
        return
    if ok:
        for f, out in zip(b.fs, value):
            ex._settle(f, *element(end, out))
        return
    if end.get("state") == "canceled" and not killed:
        # canceled by someone else (pilot cancel): as a plain call's
        for f in b.fs:
            ex._settle(f, False, value)
        return
    _resubmit(ex, b)


def _resubmit(ex, b):
    """The batch's task ended with no outcomes: its pending calls go
    again, one a task (the flusher sends them, even after shutdown())."""
    again = []
    with ex._lock:
        for f, spec in zip(b.fs, b.specs):
            if f._state != _cfb.PENDING:
                continue
            f._pack = None
            f._nopack = True
            f.task_id = None
            f._where = "buffered"
            again.append((f, spec))
        ex._pk.resubmitted += len(again)
        ex._buf.extend(again)
        ex._cond.notify_all()
