"""pilot._watch - the ends of tasks as pilotd pushes them (pilot_watch_*)

A Watch has a connection to pilotd of its own: a thread may block in
next() while other threads submit and ask through the same Client.
"""
import errno as _errno
import json
import threading
import time

from . import errors
from ._ffi import ffi

# next() waits in C calls of at most this long, so that close() from
# another thread is never held up longer (a push ends a call at once)
_SLICE = 1.0
_UNKNOWN = 2 ** 64 - 1


class Watch:
    """A subscription to the ends of tasks: pilotd pushes each end once,
    in the order of its end sequence (no polling).

        with pilot.Watch(client) as w:
            tasks = client.submit_many(specs, watch=w)
            while w.pending:
                for end in w.next():
                    print(end["id"], end["state"], end["exit_code"])

    ids: tasks to watch (Tasks, ids, "ID.N"; an array's id: all its
    elements); all=True: every task of the pilot, those submitted later
    too; neither: none yet (add() them, or submit them with watch=).  A
    new watch gives the ends from now on: a task that has ended already
    is not given.  token (with after): come back to a watch opened
    elsewhere (another process's .token) after the last end seq it had
    (its .last_seq): the ends after it are given again, in order.

    Safe to use from several threads; close() waits until a next() in
    another thread has returned (within a second, unless pilotd is not
    answering: then within a request's timeout)."""

    def __init__(self, client, ids=None, all=False, token=None, after=None):
        from .client import _id_arg, _raise
        self.client = client
        self._lib = client._lib
        self._w = ffi.NULL
        self._cond = threading.Condition()
        self._busy = 0          # next() calls in C now
        self._closing = False
        args = {}
        if ids is not None:
            args["ids"] = [_id_arg(i) for i in ids]
        if all:
            args["all"] = True
        if token is not None:
            args["token"] = token
        if after is not None:
            args["after"] = int(after)
        err = ffi.new("struct pilot_error *")
        w = self._lib.pilot_watch_open(client._handle(),
                                       json.dumps(args).encode(), err)
        if w == ffi.NULL:
            # ENOENT: no such task, or no such watch to resume
            no_task = ffi.string(err.text).startswith(b"no task")
            _raise(err, "task" if no_task else "watch")
        self._w = w
        self.token = ffi.string(self._lib.pilot_watch_token(w)).decode()

    def __repr__(self):
        return "<pilot.Watch %s%s>" % (self.token if self._w != ffi.NULL
                                       else "", "" if self._w != ffi.NULL
                                       else "closed")

    def _handle(self):
        if self._w == ffi.NULL or self._closing:
            raise errors.Error(_errno.EBADF, "this pilot.Watch is closed")
        return self._w

    def add(self, ids):
        """Watch these tasks too (Tasks, ids, "ID.N")."""
        from .client import _id_arg, _raise
        err = ffi.new("struct pilot_error *")
        with self._cond:
            w = self._handle()
            self._busy += 1
        try:
            if self._lib.pilot_watch_add(
                    w, json.dumps([_id_arg(i) for i in ids]).encode(),
                    err) < 0:
                _raise(err, "task")
        finally:
            self._done()

    def _done(self):
        with self._cond:
            self._busy -= 1
            self._cond.notify_all()

    def next(self, timeout=None):
        """The ends that come within 'timeout' seconds (None: until one
        comes; 0: those here now), a list of dicts in ascending "seq":
        {"seq", "id", "state", "exit_code", "signal", "end_time",
        "reason", "result"} ("result": a Python call's result pickle in
        base64 when it is at most 4 KiB, else None: ask with
        client.call("results", ids=[...])); [] if none came in time.
        pilot.NotRunning if the
        pilot does not run (a later call asks again)."""
        from .client import _raise
        deadline = None if timeout is None else time.monotonic() + timeout
        out = ffi.new("char **")
        err = ffi.new("struct pilot_error *")
        while True:
            left = _SLICE if deadline is None else min(
                max(deadline - time.monotonic(), 0), _SLICE)
            with self._cond:
                w = self._handle()
                self._busy += 1
            try:
                rc = self._lib.pilot_watch_next(w, int(left * 1000), out, err)
                if rc == 1:
                    try:
                        got = json.loads(ffi.string(out[0]).decode())
                    finally:
                        self._lib.pilot_free(out[0])
                    return got["ends"]
                if rc < 0:
                    _raise(err, "watch")
            finally:
                self._done()
            if deadline is not None and time.monotonic() >= deadline:
                return []

    @property
    def last_seq(self):
        """The seq of the last end next() gave (at first: pilotd's last
        seq when the watch was opened, or the 'after' resumed from)."""
        return int(self._lib.pilot_watch_last_seq(self._handle()))

    @property
    def pending(self):
        """The watched tasks not ended (or whose end was not given yet),
        as pilotd last said; None if it has not said.  After a submit
        into the watch pilotd is asked (close() waits for it)."""
        with self._cond:
            w = self._handle()
            self._busy += 1
        try:
            n = int(self._lib.pilot_watch_pending(w))
        finally:
            self._done()
        return None if n == _UNKNOWN else n

    def close(self, unwatch=True):
        """Close the watch; unwatch=False leaves it in pilotd for a
        resume with .token and .last_seq (it expires 10 minutes later)."""
        with self._cond:
            if self._w == ffi.NULL or self._closing:
                return
            self._closing = True
            while self._busy:
                self._cond.wait()
            w, self._w = self._w, ffi.NULL
        self._lib.pilot_watch_close(w, 1 if unwatch else 0)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
