"""pilot.executor - a concurrent.futures.Executor over the warm Python workers

    with pilot.Executor(c, cores=1) as ex:
        fs = [ex.submit(score, i, gpus=0) for i in range(10_000)]
        total = sum(f.result() for f in pilot.as_completed(fs))
        g = ex.submit(summarise, fs[0])     # a future as an argument

Each submit() is one Python call on the pilot (docs/python-reference.md): the
function and its arguments pickled with cloudpickle into the task's
"input", run in a warm worker, its value (or exception) stored by pilotd
and fetched by this process.  Three threads share the work:

- the caller's: submit() pickles at once (so an argument that will not
  pickle, or a call over 256 MiB, raises there) and appends the spec to
  a buffer;
- the flusher: sends the buffer, at most 2,000 specs a request, with one
  pilot_submit that joins the Executor's watch in the same request (no
  end can be missed); an idle Executor sends a lone call at once, a busy
  one lets calls gather for ~2 ms between requests, and packs those
  with the same options into batches, one task each (_pack.py);
- the reader: blocks on the watch (pilot.Watch, its own connection) and,
  for each batch of ends, takes the small results that came with them
  (pilotd pushes those of at most 4 KiB) and fetches the others with
  one "results" request a 1,000 ids, and resolves each future once: the
  map id -> future loses the id at its first end, so an end pushed again
  after a reconnect finds nothing to resolve.
"""
import base64
import concurrent.futures as cf
import concurrent.futures._base as _cfb
import errno as _errno
import itertools
import threading
import time

from . import _pack, errors
from ._pickle import HasFuture as _HasFuture, Unsent as _Unsent, dumps
from ._outcome import outcome as _outcome

BATCH_N = 2000            # specs a submit request
BATCH_S = 0.002           # seconds calls gather while requests follow
RESULTS_N = 1000          # ids a "results" request
MAX_REFS = 64             # futures among a call's arguments (libpilot's)
WATCH_WAIT_S = 0.2        # a watch.next() wait, to see shutdown
GONE_S = 60               # a pilot that does not run for this long:
                          # its pending futures fail

# the per-call task options, by their names here -> the task file's keys
OPTS = {"cores": "cores_per_rank", "gpus": "gpus_per_rank",
        "timeout": "timeout", "python": "python", "prelude": "py_prelude",
        "env": "env", "cwd": "cwd", "name": "name", "tags": "tags",
        "priority": "priority", "retries": "retries"}

# map(chunksize > 1)'s function in a worker.  Made by exec under a module
# name nothing can import, so cloudpickle pickles it by value: a worker
# never imports the pilot package (it may not be installed there).
_CHUNK_NS = {"__name__": "pilot_map_chunk"}
exec("def chunk(fn, items):\n"
     "    return [fn(*a) for a in items]\n", _CHUNK_NS)
_chunk = _CHUNK_NS["chunk"]


def _bad_spec(e, n):
    """The index of the one spec libpilot refused ("specs[3]: ..."), or
    None."""
    if n < 2 or not isinstance(e, errors.BadRequest):
        return None
    text = str(e)
    if not text.startswith("specs["):
        return None
    try:
        k = int(text[6:text.index("]")])
    except ValueError:
        return None
    return k if 0 <= k < n else None


def _label(fn):
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    mod = getattr(fn, "__module__", None)
    if not isinstance(name, str):
        name = type(fn).__name__
    return "%s:%s" % (mod, name) if isinstance(mod, str) else name


# ------------------------------------------------------------ futures


class Future(cf.Future):
    """The future of one Python call on the pilot: .task_id (None until
    the call is sent).  result() is the function's value; exception()
    the exception it raised, with the remote traceback as its __cause__
    (a pilot.RemoteTraceback; also .remote_traceback), or a
    pilot.TaskFailed when the call ended with no value (its worker died,
    a timeout, a cancel from elsewhere, a result over 256 MiB).

    running() is never True: the pilot tells the client a call's end,
    not its start.  cancel() succeeds for a call not sent yet, or one
    that waits or is queued on the pilot (then canceled there); kill()
    also cancels a running call (KeyboardInterrupt in the function)."""

    def __init__(self, ex, task_id=None):
        super().__init__()
        self._ex = ex
        self.task_id = task_id
        # buffered, sending, sent, dropped (canceled before it was sent)
        self._where = "sent" if task_id is not None else "buffered"
        self._pack = None       # (Batch, index) while packed (_pack.py)
        self._nopack = False    # sent again alone: its batch died

    def __repr__(self):
        return "<pilot.Future %s call %s>" % (
            self._state.lower(), "(unsent)" if self.task_id is None
            else self.task_id)

    def __reduce_ex__(self, protocol):
        # an argument of Executor.submit pickles by reference (its
        # persistent_id), never this way
        raise _HasFuture()

    def cancel(self):
        with self._condition:
            if self._state in (_cfb.RUNNING, _cfb.FINISHED):
                return False
            if self._state in (_cfb.CANCELLED, _cfb.CANCELLED_AND_NOTIFIED):
                return True
        if self._ex is None or not self._ex._cancel([self]):
            return False
        return True

    def kill(self):
        """Cancel the call even if it runs (pilot cancel: the worker gets
        SIGINT, KeyboardInterrupt in the function).  True if the future
        is canceled now; False if it had a result already."""
        if self.cancel():
            return True
        if self.done() or self.task_id is None:
            return self.cancelled()
        tid, packed = self.task_id, self._pack is not None
        if packed:
            # its batch's task: the batch's other calls are sent again
            with self._ex._lock:
                self._ex._pk.killed.add(tid)
        try:
            r = self._ex._client.cancel(tid)
        except errors.Error:
            return False
        if tid in r.get("canceled", []):
            return self._ex._mark_canceled(self)
        return False


def _fail(f, e):
    """A future, or each of a batch's, fails with e (a send failed)."""
    for g in _pack.members([f]):
        if _start(g):
            g.set_exception(e)


def _notify_cancel(f):
    """A future just canceled: tell as_completed()/wait() (they hear of a
    cancel through set_running_or_notify_cancel())."""
    with f._condition:
        if f._state == _cfb.CANCELLED:
            f.set_running_or_notify_cancel()


def _start(f):
    """PENDING -> RUNNING before its result is set; False if it was
    canceled meanwhile (nothing to set)."""
    with f._condition:
        if f._state == _cfb.CANCELLED:
            f.set_running_or_notify_cancel()
            return False
        if f._state == _cfb.PENDING:
            f.set_running_or_notify_cancel()
            return True
        return False


# ------------------------------------------------------------ the executor


class Executor(cf.Executor):
    """Runs Python functions on a pilot, each call in a warm worker (a
    concurrent.futures.Executor).

    Executor(client, cores=1, gpus=0, timeout=None, python=None,
    prelude=None, env=None, cwd=None, name=None, tags=None,
    priority=None, retries=None): the options of every call: cores and
    GPUs it holds, its time limit (s), the interpreter and the prelude
    of its worker (a worker is kept per interpreter, prelude,
    environment, cores and GPUs), its environment ({K: V}), directory
    (None: this process's), name, tags ({K: V}), priority and retries.

    submit(fn, *args, cores=N, gpus=N, **kwargs): 'cores' and 'gpus' are
    this call's, not fn's; every other keyword goes to fn.  For a
    function that takes keywords named cores or gpus, and for the other
    options per call, use options(...).submit(), which reserves no
    keyword.  A Future (of this pilot) among the arguments, at any
    depth, makes the call wait for that call's success and receive its
    value in its place."""

    def __init__(self, client, cores=1, gpus=0, timeout=None, python=None,
                 prelude=None, env=None, cwd=None, name=None, tags=None,
                 priority=None, retries=None, pack=True):
        from .client import Client
        import cloudpickle  # noqa: F401 (at once: ImportError here)
        self._client = client
        self._pilot_id = client.id
        self._opts = dict(cores=cores, gpus=gpus, timeout=timeout,
                          python=python, prelude=prelude, env=env, cwd=cwd,
                          name=name, tags=tags, priority=priority,
                          retries=retries)
        self._lock = threading.Lock()          # all below
        self._cond = threading.Condition(self._lock)
        self._buf = []                         # (future, spec) to send
        self._futures = {}                     # task id -> future
        self._early = {}                       # ends before their ids
        self._closing = False                  # shutdown() was called
        self._inflight = 0                     # specs being sent
        self._send_lock = threading.Lock()     # one send at a time
        self._last_send = 0.0
        self._gone_since = None
        self._set_results = 0                  # futures resolved, for tests
        self._pk = _pack.Packer(pack)          # packing calls (_pack.py)
        # the reader's requests go on a connection of their own: a
        # large submit on the client's does not hold up results
        self._rclient = Client(client.id, client._home)
        from ._watch import Watch
        self._watch = Watch(client)
        self._stop = False
        self._flusher = threading.Thread(target=self._flush_loop,
                                         name="pilot-executor-flush",
                                         daemon=True)
        self._reader = threading.Thread(target=self._read_loop,
                                        name="pilot-executor-read",
                                        daemon=True)
        self._flusher.start()
        self._reader.start()

    def __repr__(self):
        return "<pilot.Executor pilot %s, %d pending>" % (
            self._pilot_id,
            len(self._futures) + self._pk.extra + len(self._buf))

    @property
    def stats(self):
        """Counters: {"packed": calls sent in batches, "batches": their
        tasks, "resubmitted": calls of dead batches sent again alone}."""
        pk = self._pk
        return {"packed": pk.packed, "batches": pk.batches,
                "resubmitted": pk.resubmitted}

    # ---- submitting

    def submit(self, fn, /, *args, cores=None, gpus=None, **kwargs):
        """Call fn(*args, **kwargs) on the pilot; its Future.  'cores' and
        'gpus' (keywords) are this call's resources, not fn's arguments
        (see options()).  Raises at once if the call does not pickle
        (the pickler's error) or pickles to more than 256 MiB
        (pilot.BadRequest), and RuntimeError after shutdown()."""
        over = {}
        if cores is not None:
            over["cores"] = cores
        if gpus is not None:
            over["gpus"] = gpus
        return self._submit(fn, args, kwargs, over)

    def options(self, **opts):
        """A view of this Executor whose calls have these options
        (cores=, gpus=, timeout=, env=, tags=, priority=, ... as the
        constructor's): its submit(fn, *args, **kwargs) passes every
        keyword to fn.  It shares this Executor's connection, watch and
        shutdown."""
        return _Options(self, opts)

    def _spec(self, over, data, refs, fn):
        opts = dict(self._opts)
        for k, v in over.items():
            if k not in OPTS:
                raise TypeError("unknown call option %r (one of %s)"
                                % (k, ", ".join(sorted(OPTS))))
            opts[k] = v
        spec = {"argv": [_label(fn)],
                "input": base64.b64encode(data).decode("ascii")}
        for k, v in opts.items():
            if v is None:
                continue
            if k in ("env", "tags") and isinstance(v, dict):
                v = {str(a): str(b) for a, b in v.items()}
            spec[OPTS[k]] = v
        if refs:
            spec["refs"] = list(refs)
        return spec

    def _submit(self, fn, args, kwargs, over):
        if not callable(fn):
            raise TypeError("%r is not callable" % (fn,))
        if self._closing:
            raise RuntimeError("cannot schedule new futures after shutdown")
        call = (fn, tuple(args), dict(kwargs))
        try:
            data, refs = dumps(self, call, Future)
        except _Unsent:
            # a future among the arguments is in the buffer: send it
            # (its id must exist before a call can name it)
            self._flush_now()
            data, refs = dumps(self, call, Future)
        if len(refs) > MAX_REFS:
            raise errors.BadRequest(_errno.EINVAL, "%d futures among the "
                                    "arguments of one call; at most %d"
                                    % (len(refs), MAX_REFS))
        spec = self._spec(over, data, refs, fn)
        f = Future(self)
        with self._lock:
            if self._closing:
                raise RuntimeError("cannot schedule new futures after "
                                   "shutdown")
            self._buf.append((f, spec))
            if len(self._buf) == 1 or len(self._buf) >= BATCH_N:
                self._cond.notify_all()
        return f

    def map(self, fn, *iterables, timeout=None, chunksize=1):
        """fn over the iterables as the built-in map(), each call (or
        each 'chunksize' calls, in one task) on the pilot; an iterator
        of the values in order, as concurrent.futures' map().  Every
        call is submitted before the first value is returned."""
        if chunksize < 1:
            raise ValueError("chunksize must be >= 1.")
        return _map(self, fn, iterables, timeout, chunksize)

    # ---- sending

    def _flush_now(self):
        """Send everything buffered now (in the caller's thread)."""
        with self._send_lock:
            while True:
                with self._lock:
                    batch = self._take()
                if not batch:
                    return
                self._send(batch)

    def _take(self):
        """Up to BATCH_N buffered specs, those canceled left out (under
        self._lock)."""
        batch = [(f, s) for f, s in self._buf[:BATCH_N]
                 if f._where == "buffered"]
        del self._buf[:BATCH_N]
        for f, _ in batch:
            f._where = "sending"
        batch = _pack.pack(self, batch)
        self._inflight += len(batch)
        return batch

    def _send(self, batch):
        """One submit request (under self._send_lock)."""
        ids, err = [], None
        while True:
            try:
                tasks = self._client.submit_many([s for _, s in batch],
                                                 watch=self._watch)
                ids = [t.id for t in tasks]
            except Exception as e:
                err = e
                ids = list(getattr(e, "ids", []) or [])
                bad = _bad_spec(e, len(batch)) if not ids else None
                if bad is not None:
                    # one spec refused (checked before anything is
                    # sent): it fails, the others go again
                    f, _ = batch.pop(bad)
                    with self._lock:
                        self._inflight -= 1
                        f._where = "failed"
                    _fail(f, e)
                    err = None
                    if batch:
                        continue
            break
        self._last_send = time.monotonic()
        late = []
        with self._lock:
            self._inflight -= len(batch)
            for k, (f, _) in enumerate(batch):
                if k < len(ids):
                    f.task_id = ids[k]
                    f._where = "sent"
                    self._futures[ids[k]] = f
                    if isinstance(f, _pack.Batch):
                        self._pk.extra += len(f.fs) - 1
                    if ids[k] in self._early:
                        late.append(self._early.pop(ids[k]))
                else:
                    f._where = "failed"
            self._cond.notify_all()
        if err is not None:
            for f, _ in batch[len(ids):]:
                _fail(f, err)
        if late:
            self._finish(late)

    def _flush_loop(self):
        while True:
            with self._lock:
                # after shutdown() too while calls are pending: a dead
                # batch's calls are sent again (_pack.py)
                while not self._buf and not (
                        self._stop and not self._futures
                        and not self._inflight):
                    self._cond.wait(None if not self._stop
                                    else WATCH_WAIT_S)
                if not self._buf:
                    return
                # requests following one another: let calls gather
                lag = BATCH_S - (time.monotonic() - self._last_send)
                if lag > 0 and len(self._buf) < BATCH_N:
                    self._cond.wait(lag)
            with self._send_lock:
                if len(self._buf) > 1:
                    # busy: the pilot's cores, for the batches' size (a
                    # lone call, the latency case, never waits for it)
                    self._pk.refresh(self._client)
                with self._lock:
                    batch = self._take()
                if batch:
                    self._send(batch)

    # ---- ends and results

    def _read_loop(self):
        while True:
            with self._lock:
                if self._stop and not self._futures and not self._buf \
                        and not self._inflight:
                    break
            try:
                got = self._watch.next(WATCH_WAIT_S)
                self._gone_since = None
            except Exception as e:
                self._trouble(e)
                continue
            if got:
                self._finish(got)
        self._close_connections()

    def _trouble(self, e):
        """The watch failed: try again; a pilot that has not run for
        GONE_S fails the futures that wait."""
        now = time.monotonic()
        if self._gone_since is None:
            self._gone_since = now
        elif now - self._gone_since > GONE_S:
            with self._lock:
                lost = _pack.members(self._futures.values())
                self._futures.clear()
                self._pk.extra = 0
            for f in lost:
                if _start(f):
                    f.set_exception(e)
        time.sleep(0.2)

    def _finish(self, ends):
        """Resolve the futures of these ends (each at most once)."""
        mine = []
        with self._lock:
            for end in ends:
                f = self._futures.pop(end["id"], None)
                if f is not None:
                    mine.append((f, end))
                    if isinstance(f, _pack.Batch):
                        self._pk.extra -= len(f.fs) - 1
                elif self._inflight:
                    # a submit's reply not read yet may hold its id
                    self._early[end["id"]] = end
        if not mine:
            return
        want, results = [], {}
        for f, end in mine:
            if f._state != _cfb.PENDING:
                continue
            if end.get("result") is not None and \
                    end.get("state") in ("done", "failed"):
                # a small result came with its end (pilotd pushes those
                # of at most 4 KiB): no request
                results[end["id"]] = {
                    "id": end["id"], "result": end["result"],
                    "status": "ok" if end["state"] == "done" else "raised"}
            else:
                want.append(end["id"])
        while want:
            part, want = want[:RESULTS_N], want[RESULTS_N:]
            try:
                got = self._results(part)
            except Exception as e:
                for i in part:
                    results[i] = e
                continue
            # a reply is cut past 32 MiB: the rest are marked "more"
            more = [r["id"] for r in got if r.get("more")]
            for r in got:
                if not r.get("more"):
                    results[r["id"]] = r
            want = more + want
        for f, end in mine:
            self._resolve(f, end, results.get(end["id"]))

    def _results(self, ids):
        """One "results" request; asked again while pilotd is away (it was
        killed and comes back, say), for up to GONE_S, on a connection
        opened again (a local pilotd started again listens on another
        port: a connection made before does not follow it)."""
        t0 = time.monotonic()
        while True:
            try:
                return self._rclient.call("results", ids=ids)
            except (errors.BadRequest, errors.Denied, LookupError):
                raise
            except errors.Error:
                if time.monotonic() - t0 > GONE_S:
                    raise
            time.sleep(0.2)
            try:
                from .client import Client
                fresh = Client(self._pilot_id, self._client._home)
            except errors.Error:
                continue
            old, self._rclient = self._rclient, fresh
            old.close()

    def _resolve(self, f, end, res):
        if isinstance(f, _pack.Batch):
            return _pack.resolve(self, f, end, res)
        try:
            ok, value = _outcome(end, res)
        except BaseException as e:
            ok, value = False, e
        self._settle(f, ok, value)

    def _settle(self, f, ok, value):
        """Give f its value (ok) or exception, once: a future already
        resolved or canceled is left as it is."""
        if not _start(f):
            return
        with self._lock:
            self._set_results += 1
        if ok:
            f.set_result(value)
        else:
            f.set_exception(value)

    # ---- cancel

    def _cancel(self, fs):
        """Cancel futures not running: those buffered at once, those sent
        if pilotd finds them waiting or queued.  True if all were."""
        sent, all_ok = [], True
        with self._lock:
            for f in fs:
                if f._where == "buffered":
                    f._where = "dropped"
                    if cf.Future.cancel(f):
                        _notify_cancel(f)
                elif f._where in ("sent", "sending"):
                    sent.append(f)
                elif f._where != "dropped":
                    all_ok = False
        if any(f._where == "sending" for f in sent):
            with self._send_lock:
                pass  # its id comes with the reply
        sent = [f for f in sent if f.task_id is not None and not f.done()]
        if not sent:
            return all_ok and all(f.cancelled() for f in fs)
        ids = list(dict.fromkeys(f.task_id for f in sent))
        try:
            states = {}
            for k in range(0, len(ids), 10000):
                for t in self._rclient.call("list", ids=ids[k:k + 10000]):
                    states[t["id"]] = t["state"]
            # N.B. one that starts between this list and the cancel is
            # canceled while it runs (and its future too)
            todo = [i for i in ids
                    if states.get(i) in ("waiting", "queued", "assigned")]
            with self._lock:
                # a packed call's batch: its other calls go again alone
                # when its end comes (_pack.resolve)
                self._pk.killed.update(f.task_id for f in sent
                                       if f._pack is not None
                                       and f.task_id in set(todo))
            canceled = set()
            for k in range(0, len(todo), 10000):
                r = self._rclient.call("cancel", ids=todo[k:k + 10000])
                canceled.update(r.get("canceled", []))
        except errors.Error:
            return False
        for f in sent:
            if f.task_id in canceled:
                self._mark_canceled(f)
        return all_ok and all(f.cancelled() for f in fs)

    def _mark_canceled(self, f):
        with self._lock:
            if f.task_id is not None and \
                    self._futures.get(f.task_id) is f:
                del self._futures[f.task_id]
            if f._pack is None:
                self._early.pop(f.task_id, None)
        if cf.Future.cancel(f):
            _notify_cancel(f)
            return True
        return False

    # ---- attach, shutdown

    def attach(self, ids):
        """Futures for calls submitted by another process (one killed,
        say) to this pilot: their results are durable.  'ids': task ids;
        a list of Futures in their order."""
        fs = [Future(self, int(i)) for i in ids]
        if not fs:
            return fs
        if self._closing:
            raise RuntimeError("cannot attach futures after shutdown")
        with self._lock:
            for f in fs:
                self._futures[f.task_id] = f
        self._watch.add([f.task_id for f in fs])
        # those that ended before the watch knew them: their ends now
        # (a second end of one is ignored)
        ended = []
        for k in range(0, len(fs), 10000):
            part = [f.task_id for f in fs[k:k + 10000]]
            for t in self._rclient.call("list", ids=part):
                if t["state"] in ("done", "failed", "canceled", "timeout"):
                    ended.append({"id": t["id"], "state": t["state"],
                                  "exit_code": t.get("exit_code"),
                                  "signal": t.get("signal"),
                                  "reason": t.get("reason")})
        if ended:
            self._finish(ended)
        return fs

    def shutdown(self, wait=True, *, cancel_futures=False):
        """No more calls: send what is buffered; with cancel_futures,
        cancel every call not running yet; with wait, return when every
        future is done.  The reader goes on until the last future is
        resolved either way."""
        with self._lock:
            self._closing = True
            pend = [f for f, _ in self._buf] + \
                _pack.members(self._futures.values())
        if cancel_futures:
            self._cancel([f for f in pend if not f.done()])
        self._flush_now()
        with self._lock:
            self._stop = True
            self._cond.notify_all()
        if wait:
            self._flusher.join()
            self._reader.join()

    def _close_connections(self):
        try:
            self._watch.close()
        except Exception:
            pass
        try:
            self._rclient.close()
        except Exception:
            pass


class _Options:
    """Executor.options(): the Executor with other call options; its
    submit() reserves no keyword."""

    def __init__(self, ex, opts):
        for k in opts:
            if k not in OPTS:
                raise TypeError("unknown call option %r (one of %s)"
                                % (k, ", ".join(sorted(OPTS))))
        self._ex = ex
        self._over = dict(opts)

    def submit(self, fn, /, *args, **kwargs):
        """fn(*args, **kwargs) with this view's options; every keyword
        is fn's."""
        return self._ex._submit(fn, args, kwargs, self._over)

    def options(self, **opts):
        return _Options(self._ex, dict(self._over, **opts))

    def map(self, fn, *iterables, timeout=None, chunksize=1):
        if chunksize < 1:
            raise ValueError("chunksize must be >= 1.")
        return _map(self, fn, iterables, timeout, chunksize)


def _map(target, fn, iterables, timeout, chunksize):
    end = None if timeout is None else timeout + time.monotonic()
    ex = target if isinstance(target, Executor) else target._ex
    over = {} if isinstance(target, Executor) else target._over
    if chunksize == 1:
        fs = [ex._submit(fn, a, {}, over) for a in zip(*iterables)]
    else:
        it = zip(*iterables)
        fs = []
        while True:
            part = list(itertools.islice(it, chunksize))
            if not part:
                break
            fs.append(ex._submit(_chunk, (fn, part), {}, over))

    def results():
        try:
            fs.reverse()
            while fs:
                f = fs.pop()
                if end is None:
                    v = f.result()
                else:
                    v = f.result(end - time.monotonic())
                if chunksize == 1:
                    yield v
                else:
                    yield from v
        finally:
            if fs:
                ex._cancel(fs)
    return results()
