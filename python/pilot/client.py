"""pilot.client - a connection to a pilot, and the tasks submitted to it

Every request goes through libpilot (pilot._ffi): the same code as the
pilot CLI's finds the pilot, builds and checks the task specs, sends them
in requests pilotd takes, and answers with the JSON 'pilot ... --json'
prints.
"""
import errno as _errno
import json
import os
import time

from . import errors
from ._ffi import ffi, lib

FINAL = frozenset(("done", "failed", "canceled", "timeout"))
# Client.wait()'s return_when, as concurrent.futures names them
ALL_COMPLETED = "ALL_COMPLETED"
FIRST_COMPLETED = "FIRST_COMPLETED"
# ids in one watch or list request (pilotd takes 100,000)
_WATCH_CHUNK = 50000


def _text(cdata):
    return ffi.string(cdata).decode("utf-8", "replace")


def _raise(err, what, ids=None):
    raise errors.from_errno(err.errnum, _text(err.text), what, ids)


# ------------------------------------------------------------ specs


def _dep(d):
    """One entry of after=: a Task, an id, "ID.N", a name, or a pair
    (any of those, "any" or "ok")."""
    if isinstance(d, tuple):
        if len(d) != 2 or d[1] not in ("any", "ok"):
            raise errors.BadRequest(_errno.EINVAL, "after: a pair is "
                                    "(task, 'any') or (task, 'ok'), not %r"
                                    % (d,))
        return "%s:%s" % (_dep(d[0]), d[1])
    if isinstance(d, Task):
        return str(d.id)
    if isinstance(d, bool) or not isinstance(d, (int, str)):
        raise errors.BadRequest(_errno.EINVAL, "after: %r is not a task, an "
                                "id or a name" % (d,))
    return str(d)


def _elements(array):
    """The tasks array= makes ("A-B:S", [A, B, S] or a range), or 1."""
    if array is None:
        return 1
    if isinstance(array, range):
        return max(len(array), 1)
    if isinstance(array, str):
        a, _, rest = array.partition("-")
        b, _, s = rest.partition(":")
        try:
            a, b, s = int(a), int(b), int(s or 1)
        except ValueError:
            return 1  # libpilot says what is wrong with it
    else:
        try:
            a, b, s = (int(x) for x in array)
        except (TypeError, ValueError):
            return 1
    return (b - a) // s + 1 if s > 0 and b >= a else 1


def _spec(argv=None, **opts):
    """A task object of the task file's form from submit()'s arguments:
    argv a list (or a str: a shell line, "cmd"), the options by their
    task-file keys."""
    spec = {}
    if isinstance(argv, str):
        spec["cmd"] = argv
    elif argv is not None:
        spec["argv"] = [str(a) for a in argv]
    for key, v in opts.items():
        if v is None:
            continue
        if key == "after":
            if isinstance(v, (list, set, frozenset)):
                v = [_dep(d) for d in v]
            else:
                v = [_dep(v)]
        elif key == "array" and isinstance(v, range):
            if v.step < 1 or len(v) == 0:
                raise errors.BadRequest(_errno.EINVAL, "array: %r is empty "
                                        "or goes down" % (v,))
            v = [v.start, v[-1], v.step]
        elif key == "argv":
            v = [str(a) for a in v]
        elif key in ("env", "tags") and isinstance(v, dict):
            v = {str(k): str(x) for k, x in v.items()}
        spec[key] = v
    return spec


# ------------------------------------------------------------ tasks


class Task:
    """A task of a pilot: .id, and what 'pilot show ID --json' says of it
    (.info, refreshed by refresh(), .state and .exit_code).

    A Task made by submit() with array= is the array: its id names all
    its elements (ls, cancel, counts), .ids lists them, wait() waits for
    all of them, and .state and .exit_code are its first element's."""

    def __init__(self, client, id, info=None, ids=None):
        self.client = client
        self.id = int(id)
        self.ids = list(ids) if ids else [self.id]
        self.info = info

    def __repr__(self):
        st = self.info.get("state") if self.info else None
        return "<pilot.Task %d%s>" % (self.id, " " + st if st else "")

    def __eq__(self, other):
        return (isinstance(other, Task) and other.id == self.id
                and other.client.id == self.client.id)

    def __hash__(self):
        return hash((self.client.id, self.id))

    def __int__(self):
        return self.id

    def refresh(self):
        """Ask the pilot for the task again; returns self."""
        self.info = self.client.show(self.id)
        return self

    def _known(self):
        # a final state never changes: no need to ask again
        if self.info is None or self.info.get("state") not in FINAL:
            self.refresh()
        return self.info

    @property
    def state(self):
        """The task's state now (waiting, queued, assigned, running, done,
        failed, canceled, timeout)."""
        return self._known()["state"]

    @property
    def exit_code(self):
        """Its exit code once it has ended (None before, or if it never
        ran)."""
        return self._known().get("exit_code")

    def done(self):
        """Whether it has ended (any final state)."""
        return self.state in FINAL

    def wait(self, timeout=None):
        """Wait until the task (an array: every element) has ended, at most
        'timeout' seconds (None: no limit); returns self, refreshed.
        pilot.Timeout (a TimeoutError) if it has not ended by then.  The
        end is pushed by pilotd (a Watch): nothing polls."""
        _, left = self.client.wait([self], timeout)
        if left:
            raise errors.Timeout(_errno.ETIMEDOUT, "task %d has not ended "
                                 "within %g s" % (self.id, timeout))
        return self.refresh()

    def log_path(self, stream="stdout", attempt=0):
        """The file of its stdout or stderr (attempt 0: the last one).  A
        task whose ranks each write their own files (log_paths()) has
        none at this path."""
        if attempt == 0:
            attempt = int(self._known().get("attempts") or 0)
        return self.client.log_path(self.id, attempt, stream)

    def log_paths(self, stream="stdout", attempt=0):
        """Where its stdout or stderr is: its files, one a rank for a task
        of several ranks that the agents start as processes of their own
        ("<id>.r<R>.out", docs/output.md), else the one of log_path(); or,
        for a task whose output went to the nodes' journals (--output
        journal), the journal segments that hold it
        ("journal/<node>/<seq>.pj")."""
        src = _Reader(self, self._known(), attempt, stream)
        try:
            paths = src.paths()
            if any(os.path.exists(x) for x in paths):
                return paths  # files: no need to read them
            src.read(final=True)  # a journal's frames, if there are any
            return src.paths()
        finally:
            src.close()

    def logs(self, stream="stdout", follow=False, attempt=0, poll=0.1,
             rank=None, label=False):
        """What the task wrote to stream ("stdout" or "stderr") as text,
        of its last attempt ('attempt' N: that one); "" if it has not
        started.  Read as 'pilot logs' reads it (libpilot's
        pilot_logs_*(), the CLI's own reader): from its files, or from
        the nodes' journals (--output journal).  The ranks of a task of
        several come merged by whole lines, never mixed inside one, in
        rank order (from a journal: in the order written on each node);
        rank=R: rank R's alone, as it wrote it; label=True: each line
        after its rank, "R: ".  With follow=True, an iterator of its
        lines (each with its "\\n") as it writes them, until it has ended
        and its output is read to the end; a task run again goes on with
        the next attempt's output."""
        if follow:
            return self._follow(stream, attempt, poll, rank, label)
        src = _Reader(self, self._known(), attempt, stream, rank, label)
        try:
            return src.read(final=True).decode("utf-8", "replace")
        finally:
            src.close()

    def _follow(self, stream, want, poll, rank, label):
        from ._watch import Watch
        # the watch first: an end after it is pushed, one before it is
        # in the state read next
        w = Watch(self.client, ids=[self.id])
        info = self.refresh().info
        ended = info.get("state") in FINAL
        cur = want or max(int(info.get("attempts") or 0), 1)
        src = _Reader(self, info, cur, stream, rank, label)
        looked = time.monotonic()
        try:
            while True:
                lines = src.lines()
                if lines:
                    yield from lines
                    continue
                if not want and (ended or time.monotonic() - looked >= 1.0):
                    # run again (retries): its attempts, asked for once a
                    # second of silence and at the end
                    info = self.refresh().info
                    looked = time.monotonic()
                    att = int(info.get("attempts") or 0)
                    if att > cur:
                        # the rest of this attempt's output, then the
                        # next one's
                        yield from src.lines(final=True)
                        src.close()
                        cur = att
                        src = _Reader(self, info, cur, stream, rank, label)
                        continue
                if ended:
                    # the end came before this last read: all is in
                    yield from src.lines(final=True)
                    return
                # nothing new: wait for more output, or for the end (an
                # array's id watches all its elements: this one's)
                if any(e["id"] == self.id for e in w.next(timeout=poll)):
                    ended = True
        finally:
            src.close()
            w.close()


_STREAMS = {"stdout": 1, "stderr": 2}


class _Reader:
    """A task's output as it grows: libpilot's pilot_logs_*() (the CLI's
    reader: its files, else its frames in the nodes' journals)."""

    def __init__(self, task, info, attempt, stream, rank=None, label=False):
        if stream not in _STREAMS:
            raise errors.BadRequest(_errno.EINVAL, "stream: 'stdout' or "
                                    "'stderr', not %r" % (stream,))
        c = task.client
        self._lib = c._lib
        self.partial = b""
        err = ffi.new("struct pilot_error *")
        self._l = self._lib.pilot_logs_open(
            c._handle(), json.dumps(info).encode(), int(attempt),
            _STREAMS[stream], -1 if rank is None else int(rank),
            self._lib.PILOT_LOGS_LABEL if label else 0, err)
        if self._l == ffi.NULL:
            _raise(err, "task")

    def read(self, final=False):
        """The bytes written since the last read."""
        err = ffi.new("struct pilot_error *")
        data = ffi.new("char **")
        n = ffi.new("size_t *")
        rc = self._lib.pilot_logs_read(self._l, 1 if final else 0, data, n,
                                       err)
        if rc < 0:
            _raise(err, "task")
        if data[0] == ffi.NULL:
            return b""
        try:
            return ffi.buffer(data[0], n[0])[:]
        finally:
            self._lib.pilot_free(data[0])

    def lines(self, final=False):
        """The whole lines written since the last call; 'final': and
        what is left of the last one."""
        b = self.partial + self.read(final)
        lines = b.split(b"\n")
        self.partial = lines.pop()
        out = [x.decode("utf-8", "replace") + "\n" for x in lines]
        if final and self.partial:
            out.append(self.partial.decode("utf-8", "replace"))
            self.partial = b""
        return out

    def paths(self):
        err = ffi.new("struct pilot_error *")
        out = ffi.new("char **")
        if self._lib.pilot_logs_paths(self._l, out, err) < 0:
            _raise(err, "task")
        try:
            return json.loads(_text(out[0]))
        finally:
            self._lib.pilot_free(out[0])

    def close(self):
        l, self._l = self._l, ffi.NULL
        if l != ffi.NULL:
            self._lib.pilot_logs_close(l)


# ------------------------------------------------------------ the client


class Client:
    """A connection to one pilot (pilot.connect()).  Safe to share between
    threads: its requests go one at a time; for requests in parallel,
    give each thread a Client of its own."""

    def __init__(self, pilot=None, home=None, timeout=None):
        """pilot: its id ("p3"), or None: $PILOT_ID, else the one running
        pilot.  home: the pilot home (None: $PILOT_HOME or ~/.pilot).
        timeout: seconds one request may wait for pilotd (None:
        $PILOT_TIMEOUT or 10)."""
        self._lib = lib()
        self._p = ffi.NULL
        err = ffi.new("struct pilot_error *")
        ms = 0 if timeout is None else max(int(timeout * 1000), 1)
        p = self._lib.pilot_open(pilot.encode() if pilot else ffi.NULL,
                                 os.fsencode(home) if home else ffi.NULL,
                                 ms, err)
        if p == ffi.NULL:
            _raise(err, "pilot")
        self._p = p
        self._home = None if home is None else os.fspath(home)
        self.id = _text(self._lib.pilot_id(p))
        self.dir = _text(self._lib.pilot_dir(p))

    def __repr__(self):
        return "<pilot.Client %s%s>" % (self.id, "" if self._p != ffi.NULL
                                        else " closed")

    def close(self):
        """Close the connection (tasks go on)."""
        p, self._p = self._p, ffi.NULL
        if p != ffi.NULL:
            self._lib.pilot_close(p)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _handle(self):
        if self._p == ffi.NULL:
            raise errors.Error(_errno.EBADF, "this pilot.Client is closed")
        return self._p

    @property
    def live(self):
        """Whether pilotd answers (else reads come from its state)."""
        return bool(self._lib.pilot_is_live(self._handle()))

    def call(self, op, what="task", **args):
        """One request by the name of its op (docs/libpilot.md), its
        reply as JSON data."""
        err = ffi.new("struct pilot_error *")
        out = ffi.new("char **")
        rc = self._lib.pilot_call(self._handle(), op.encode(),
                                  json.dumps(args).encode(), out, err)
        reply = _text(out[0]) if out[0] != ffi.NULL else None
        self._lib.pilot_free(out[0])
        if rc < 0:
            _raise(err, what)
        return json.loads(reply)

    # ---- submitting

    def _submit(self, specs, watch=None):
        err = ffi.new("struct pilot_error *")
        out = ffi.new("char **")
        opts = ffi.NULL
        if watch is not None:
            opts = json.dumps({"watch": getattr(watch, "token", watch)})
            opts = opts.encode()
        rc = self._lib.pilot_submit_opts(self._handle(),
                                         json.dumps(specs).encode(), opts,
                                         out, err)
        reply = _text(out[0]) if out[0] != ffi.NULL else None
        self._lib.pilot_free(out[0])
        if rc < 0:
            _raise(err, "task", json.loads(reply)["ids"] if reply else None)
        return json.loads(reply)["ids"]

    def _tasks(self, specs, ids):
        """A Task per spec, each with the ids of its elements."""
        tasks, k = [], 0
        for s in specs:
            n = _elements(s.get("array"))
            tasks.append(Task(self, ids[k], ids=ids[k:k + n]))
            k += n
        if k != len(ids):
            # an array of a shape we do not read: the ids as they came
            return [Task(self, i) for i in ids]
        return tasks

    def submit(self, argv, watch=None, **opts):
        """Submit one task, argv (a list, or a str: a shell line), with
        the options of a task file by their keys: name=, ranks=, nodes=,
        ranks_per_node=, cores_per_rank=, gpus_per_rank=, exclusive=,
        comm= ("none", "torch", "mpi"), launcher=, timeout= (s, or "10m"),
        output_limit=, retries=, cwd= (default: this directory), env=
        {K: V}, tags= {K: V}, after= [Task, id, "ID.N", name, (t, "any")],
        array= ("A-B:S", [A, B, S] or a range), priority=, vetted= (True:
        nodes vetted within 60 min, or minutes), pool=, fn=, py=.  watch=: a pilot.Watch the task joins in the same request
        (its end is given by that watch's next(), however soon it
        comes).  Returns the Task (with array=: the array's).  Raises
        pilot.BadRequest for an option pilotd would refuse."""
        spec = _spec(argv, **opts)
        return self._tasks([spec], self._submit([spec], watch))[0]

    def submit_many(self, specs, watch=None):
        """Submit many tasks at once: a list of dicts, each a task file's
        entry ({"argv": [...], "ranks": 2, ...}; values as submit() takes
        them).  One request per 5,000 tasks.  Returns their Tasks in
        order.  If a request fails after others were queued, the
        pilot.Error's .ids holds the queued ids.  watch=: as submit()."""
        specs = [_spec(**dict(s)) for s in specs]
        if not specs:
            return []
        return self._tasks(specs, self._submit(specs, watch))

    # ---- waiting

    def watch(self, ids=None, all=False, token=None, after=None):
        """A pilot.Watch of this pilot (see there)."""
        from ._watch import Watch
        return Watch(self, ids, all, token, after)

    def wait(self, tasks, timeout=None, return_when=ALL_COMPLETED):
        """Wait until the tasks (Tasks or ids; an array's Task: all its
        elements) have ended, all of them (return_when=ALL_COMPLETED) or
        one (FIRST_COMPLETED), at most 'timeout' seconds (None: no
        limit), as concurrent.futures.wait() does: returns (done,
        not_done), two sets of Tasks; it does not raise when the time
        passes.  The ends are pushed by pilotd (a Watch): nothing polls.
        pilot.NotRunning if the pilot stops running meanwhile."""
        from ._watch import Watch
        if return_when not in (ALL_COMPLETED, FIRST_COMPLETED):
            raise errors.BadRequest(_errno.EINVAL, "return_when: "
                                    "ALL_COMPLETED or FIRST_COMPLETED, not "
                                    "%r" % (return_when,))
        deadline = None if timeout is None else time.monotonic() + timeout
        tasks = [t if isinstance(t, Task) else Task(self, _id_arg(t))
                 for t in tasks]
        done, left = set(), {}        # left: Task -> its element ids left
        owner = {}                    # an element's id -> its Task
        for t in tasks:
            if (len(t.ids) == 1 and t.info
                    and t.info.get("state") in FINAL):
                done.add(t)  # a final state never changes
                continue
            left[t] = set(t.ids)
            for i in t.ids:
                owner[i] = t
        if not left:
            return done, set()
        # the watch first: an end after it is pushed, one before it is in
        # the states read next (an array's id names all its elements)
        names = [t.id for t in left]
        w = Watch(self, ids=names[:_WATCH_CHUNK])
        try:
            for k in range(_WATCH_CHUNK, len(names), _WATCH_CHUNK):
                w.add(names[k:k + _WATCH_CHUNK])
            for k in range(0, len(names), _WATCH_CHUNK):
                for info in self.call("list", ids=names[k:k + _WATCH_CHUNK]):
                    if info.get("state") in FINAL:
                        _ended(info["id"], owner, left, done)
            while left and not (done and return_when == FIRST_COMPLETED):
                t = None
                if deadline is not None:
                    t = deadline - time.monotonic()
                    if t <= 0:
                        break
                for end in w.next(t):
                    _ended(end["id"], owner, left, done)
        finally:
            w.close()
        return done, set(left)

    # ---- reading

    def show(self, id):
        """The task object of task 'id' (an int, a Task or "ID.N"), with
        its events.  pilot.NoSuchTask if there is none."""
        return self.call("show", id=_dep(id))

    def task(self, id):
        """Task 'id', read now."""
        info = self.show(id)
        return Task(self, info["id"], info)

    def ls(self, state=None, tags=None, ids=None, limit=None):
        """The tasks (Task objects, their .info filled), as 'pilot ls'
        lists them: in 'state', with all 'tags' ({K: V}, or "K=V"/"K"
        strings), among 'ids' (Tasks, ids, "ID.N"; an array's id: its
        elements), at most 'limit'."""
        args = {}
        if state is not None:
            args["state"] = state
        if tags is not None:
            args["tags"] = ({str(k): str(v) for k, v in tags.items()}
                            if isinstance(tags, dict) else list(tags))
        if ids is not None:
            args["ids"] = [_id_arg(i) for i in ids]
        if limit is not None:
            args["limit"] = limit
        return [Task(self, t["id"], t) for t in self.call("list", **args)]

    def counts(self, ids=None):
        """Tasks by state ({total, waiting, queued, ..., unknown}) among
        'ids', or of all tasks."""
        if ids is None:
            return self.call("counts")
        return self.call("counts", ids=[_id_arg(i) for i in ids])

    def status(self):
        """The pilot's status object (nodes, cores, GPUs, tasks)."""
        return self.call("status")

    def log_path(self, id, attempt=0, stream="stdout"):
        """The file of task 'id''s stream of 'attempt' (0 or 1: the first)."""
        s = {"stdout": 1, "stderr": 2}.get(stream)
        if s is None:
            raise errors.BadRequest(_errno.EINVAL, "stream: 'stdout' or "
                                    "'stderr', not %r" % (stream,))
        buf = ffi.new("char[]", 4200)
        if self._lib.pilot_log_path(self._handle(), int(id), attempt, s, buf,
                                    len(buf)) < 0:
            raise errors.Error(ffi.errno, os.strerror(ffi.errno))
        return _text(buf)

    # ---- changing

    def cancel(self, *tasks):
        """Cancel tasks (Tasks, ids, "ID.N"; an array's id: all its
        elements): {"canceled": [...], "final": [...]} (those that had
        ended already).  pilot.NoSuchTask, and nothing canceled, if one
        does not exist."""
        if len(tasks) == 1 and isinstance(tasks[0], (list, tuple, set)):
            tasks = tuple(tasks[0])
        return self.call("cancel", ids=[_id_arg(t) for t in tasks])

    def pool_start(self, name, ranks_per_node=1, nodes=None,
                   cores_per_rank=None, gpus_per_rank=None, launcher=None,
                   env=None):
        """Start pool 'name' (pilot pool start): the pool object."""
        args = {"name": name, "ranks_per_node": ranks_per_node}
        for k, v in (("nodes", nodes), ("cores_per_rank", cores_per_rank),
                     ("gpus_per_rank", gpus_per_rank),
                     ("launcher", launcher), ("env", env)):
            if v is not None:
                args[k] = v
        return self.call("pool_start", "pool", **args)

    def pool_stop(self, name):
        """Stop pool 'name': the pool object, stopping."""
        return self.call("pool_stop", "pool", name=name)

    def pools(self):
        """The pools (pilot pool ls --json)."""
        return self.call("pool_list", "pool")

    def shutdown(self):
        """Ask pilotd to stop its agents and exit (see also down())."""
        return self.call("shutdown")

    def down(self, timeout=120):
        """'pilot down' of this pilot: stop it and wait until it has gone
        (its Slurm job too).  The Client then reads its final state."""
        from . import _run_cli
        env = None
        if self._home is not None:
            env = dict(os.environ, PILOT_HOME=self._home)
        _run_cli(["down", "--pilot", self.id], timeout, env)


def _ended(id, owner, left, done):
    """Task element 'id' has ended: its Task is done once all its
    elements are."""
    t = owner.get(id)
    if t is None or t not in left:
        return
    left[t].discard(id)
    if not left[t]:
        del left[t]
        done.add(t)


def _id_arg(t):
    if isinstance(t, Task):
        return t.id
    if isinstance(t, bool):
        raise errors.BadRequest(_errno.EINVAL, "%r is not a task id" % (t,))
    return t
