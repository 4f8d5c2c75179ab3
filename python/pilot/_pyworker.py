"""python/pilot/_pyworker.py - a warm Python worker of a pilot agent

The agent (agent/pyw.c) starts this file with the interpreter a call
names, bound to the call's cores and GPUs, with one end of a socketpair
as file descriptor 3 (--fd), and sends it calls one at a time; the
worker lives on between them, so that the interpreter's start, the
prelude (--py-prelude: "import torch") and the imports of the functions
are paid once per worker, not per call (docs/python-reference.md, "Warm workers").

Pure Python: the standard library, and cloudpickle for pickled calls and
results, so that it runs under whatever interpreter a user brings (a
venv's, conda's).  Frames, both ways: a 4-byte big-endian length of the
rest, a 4-byte big-endian header length, a JSON object (the header, its
"kind" 406 hello, 407 call, 408 result) and raw bytes (the payload);
docs/protocol.md, "A warm Python worker and its agent".

Each call: the task's stdout and stderr (files the agent made) on fds 1
and 2, its working directory, its environment and its directory first on
sys.path, around the call; then the value (or the exception with its
traceback) pickled with cloudpickle, inline or, when large, written to
the file the agent names.  A SIGINT (a timeout, a cancel) raises
KeyboardInterrupt in the call: the worker answers and stays warm.  It
exits when the agent closes its socket.

A pickled call may name the values of other calls, its refs, as the
persistent ids ("pilot-ref", ID), or ("pilot-ref", ID, INDEX) for call
INDEX of a packed task ID (its value a list of outcomes): the call's
frame carries each ref's result (its bytes after the input's, or its
file), and load_call() gives the unpickled value in its place
(docs/python-reference.md, "Refs").
"""

import importlib
import io
import json
import os
import pickle
import platform
import signal
import struct
import sys
import traceback

KIND_HELLO, KIND_CALL, KIND_RESULT, KIND_ENTERED = 406, 407, 408, 409
REASON_MAX = 4000   # bytes of a reason (the agent takes 4096)
REPR_MAX = 1000     # bytes of a repr (the agent takes 1024)


class RemoteError(Exception):
    """An exception raised by a call that would not pickle: its type's
    name, its message and the traceback text, in its place."""

    def __init__(self, type_name, message, tb):
        super().__init__(type_name, message, tb)
        self.type_name = type_name
        self.message = message
        self.traceback = tb

    def __str__(self):
        return "%s: %s" % (self.type_name, self.message)


class Worker:
    def __init__(self, fd):
        self.fd = fd
        self.phase = "idle"   # idle, prep, armed, call
        self.pending = False  # a SIGINT came while 'armed'
        self.prelude_done = False
        self.prelude_error = None
        self.prelude_ns = {"__name__": "__pilot_prelude__"}
        self.pid = os.getpid()

    # ---- frames

    def _read(self, n):
        buf = bytearray()
        while len(buf) < n:
            b = os.read(self.fd, n - len(buf))
            if not b:
                return None
            buf += b
        return bytes(buf)

    def recv(self):
        head = self._read(4)
        if head is None:
            return None
        (n,) = struct.unpack(">I", head)
        body = self._read(n)
        if body is None or n < 4:
            return None
        (hlen,) = struct.unpack(">I", body[:4])
        return json.loads(body[4:4 + hlen].decode()), body[4 + hlen:]

    def send(self, header, data=b""):
        h = json.dumps(header, ensure_ascii=False).encode()
        frame = struct.pack(">II", 4 + len(h) + len(data), len(h)) + h + data
        view = memoryview(frame)
        while view:
            view = view[os.write(self.fd, view):]

    # ---- a call

    def on_sigint(self, signum, frame):
        # Only a call is interrupted, and the agent sends SIGINT only
        # after our ENTERED: one that comes between calls (the agent
        # interrupted a call that was just returning) is not for us.
        # While ENTERED is written it is kept for the call's start: a
        # KeyboardInterrupt must not cut a frame.
        if self.phase == "call":
            raise KeyboardInterrupt
        if self.phase == "armed":
            self.pending = True

    def enter(self, h):
        """The task's stdout, stderr, cwd, environment and sys.path;
        what to restore after the call."""
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except Exception:
                pass
        saved = {"out": os.dup(1), "err": os.dup(2), "cwd": os.getcwd(),
                 "env": dict(os.environ), "stdout": sys.stdout,
                 "stderr": sys.stderr, "path": None}
        flags = os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
        fo = os.open(h["stdout"], flags)
        fe = fo if h["stderr"] == h["stdout"] else os.open(h["stderr"], flags)
        os.dup2(fo, 1)
        os.dup2(fe, 2)
        os.close(fo)
        if fe != fo:
            os.close(fe)
        os.environ.clear()
        for kv in h.get("env", []):
            k, _, v = kv.partition("=")
            if k:
                os.environ[k] = v
        if h.get("cwd"):
            os.chdir(h["cwd"])
        saved["path"] = os.getcwd()
        sys.path.insert(0, saved["path"])
        return saved

    def leave(self, saved):
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except Exception:
                pass
        sys.stdout, sys.stderr = saved["stdout"], saved["stderr"]
        for f in (sys.stdout, sys.stderr):
            try:
                f.flush()
            except Exception:
                pass
        os.dup2(saved["out"], 1)
        os.dup2(saved["err"], 2)
        os.close(saved["out"])
        os.close(saved["err"])
        try:
            os.chdir(saved["cwd"])
        except OSError:
            os.chdir("/")
        os.environ.clear()
        os.environ.update(saved["env"])
        if saved["path"] is not None and sys.path[:1] == [saved["path"]]:
            del sys.path[0]

    def prelude(self, code):
        """Run the prelude once, before the worker's first call."""
        self.prelude_done = True
        if not code:
            return
        try:
            exec(compile(code, "<py_prelude>", "exec"), self.prelude_ns)
        except BaseException as e:
            traceback.print_exc()
            self.prelude_error = "the prelude failed: " + last_line(e)

    def target(self, h, payload):
        """The function and its arguments."""
        if h.get("pickled"):
            import cloudpickle  # noqa: F401 (what its pickles are made of)
            refs = {}
            if "refs" in h:
                # the input first, then each inline ref's bytes in order
                off = h["input_size"]
                for r in h["refs"]:
                    if "size" in r:
                        r["data"] = payload[off:off + r["size"]]
                        off += r["size"]
                    refs[r["id"]] = r
                payload = payload[:h["input_size"]]
            if h.get("input_file"):
                payload = read_file(h["input_file"])
            fn, args, kwargs = load_call(payload, refs)
            if not callable(fn):
                raise TypeError("the pickled call's function is a %s, not "
                                "a callable" % type(fn).__name__)
            return fn, tuple(args), dict(kwargs)
        mod, _, name = h["argv"][0].rpartition(":")
        return (lambda *a: getattr(importlib.import_module(mod), name)(*a),
                tuple(h["argv"][1:]), {})

    def call(self, h, payload):
        """Run call 'h': the result's header and bytes, and whether the
        worker must go (its prelude failed)."""
        res = {"kind": KIND_RESULT, "id": h["id"], "attempt": h["attempt"]}
        try:
            saved = self.enter(h)
        except OSError as e:
            res.update(status="error", reason=cut("the call's %s: %s" % (
                "files or directory", e), REASON_MAX))
            return res, b"", False
        try:
            return self.run(h, payload, res)
        finally:
            self.leave(saved)

    def run(self, h, payload, res):
        if not self.prelude_done:
            self.prelude(h.get("prelude"))
        if self.prelude_error:
            res.update(status="error", reason=cut(self.prelude_error,
                                                  REASON_MAX))
            return res, b"", True
        try:
            fn, args, kwargs = self.target(h, payload)
        except BaseException as e:
            traceback.print_exc()
            res.update(status="error", reason=cut(
                "cannot load the call: " + last_line(e), REASON_MAX))
            return res, b"", False
        raised = tb = None
        try:
            self.phase = "armed"
            self.send({"kind": KIND_ENTERED, "id": h["id"],
                       "attempt": h["attempt"]})
            self.phase = "call"
            try:
                if self.pending:
                    raise KeyboardInterrupt
                value = fn(*args, **kwargs)
            finally:
                self.phase = "prep"
        except BaseException as e:
            raised = e
            tb = traceback.format_exc()
            sys.stderr.write(tb)
        if os.getpid() != self.pid:
            # a child the function forked (os.fork()) returned into us:
            # only the worker answers the agent (the child's answer was a
            # second result on our socket: taken for the call's, or the
            # worker killed for a message while idle)
            for f in (sys.stdout, sys.stderr):
                try:
                    f.flush()
                except BaseException:
                    pass
            os._exit(0 if raised is None else 1)
        dumps = pickler()
        try:
            if raised is None:
                data = dumps(value)
            else:
                try:
                    data = dumps((raised, tb))
                except BaseException:
                    data = dumps((RemoteError(type(raised).__qualname__,
                                              str(raised), tb), tb))
        except BaseException as e:
            res.update(status="error", reason=cut(
                "the result would not pickle: " + last_line(e), REASON_MAX))
            return res, b"", False
        res["status"] = "ok" if raised is None else "raised"
        res["size"] = len(data)
        if raised is not None:
            res["reason"] = cut(last_line(raised), REASON_MAX)
            res["interrupted"] = isinstance(raised, KeyboardInterrupt)
        else:
            try:
                res["repr"] = cut(repr(value), REPR_MAX)
            except BaseException:
                pass
        if len(data) > h["result_max"]:
            res = {k: res[k] for k in ("kind", "id", "attempt")}
            res.update(status="error", reason=(
                "the result pickles to %d bytes, over the limit of %d "
                "(%d MiB)" % (len(data), h["result_max"],
                              h["result_max"] >> 20)))
            return res, b"", False
        if len(data) <= h["inline_max"]:
            return res, data, False
        try:
            write_new(h["result_file"], data)
        except OSError as e:
            res = {k: res[k] for k in ("kind", "id", "attempt")}
            res.update(status="error", reason=cut(
                "the result file: %s" % e, REASON_MAX))
            return res, b"", False
        res["file"] = h["result_file"]
        return res, b"", False

    def loop(self):
        signal.signal(signal.SIGINT, self.on_sigint)
        self.send({"kind": KIND_HELLO, "pid": os.getpid(),
                   "version": platform.python_version()})
        while True:
            msg = self.recv()
            if msg is None:
                return  # the agent closed our socket: we are done
            h, payload = msg
            if h.get("kind") != KIND_CALL:
                continue
            self.phase, self.pending = "prep", False
            res, data, go = self.call(h, payload)
            self.send(res, data)
            self.phase = "idle"
            if go:
                return


class RefError(Exception):
    """A value the call names (a persistent id ("pilot-ref", ID)) that
    it cannot be given."""


def read_file(path):
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
    with os.fdopen(os.open(path, flags), "rb") as f:
        return f.read()


def load_call(data, refs):
    """Unpickle a call whose pickle may name the values of other calls:
    a persistent id ("pilot-ref", ID) is the value call ID returned, its
    result as pilotd stored it ('refs': ID -> {"status", "data" or
    "file"}), each unpickled once."""
    values = {}

    def value(rid):
        ref = refs.get(rid)
        if ref is None:
            raise RefError("the call names the value of call %r, which is "
                           "not one of its refs" % (rid,))
        if ref.get("status") == "raised":
            raise RefError("ref %d: that call raised, it has no value"
                           % rid)
        if ref.get("status") != "ok":
            raise RefError("ref %d: that call has no result" % rid)
        data = ref["data"] if "data" in ref else read_file(ref["file"])
        return pickle.loads(data)

    def element(rid, k):
        # a packed call's value: element k of its batch's outcomes,
        # ("ok", its pickled value) (python/pilot/_pack.py)
        outs = values[rid]
        if not isinstance(outs, list) or not 0 <= k < len(outs):
            raise RefError("ref %d[%d]: that task holds no call %d"
                           % (rid, k, k))
        out = outs[k]
        if out[0] == "raised" or out[0] == "error":
            raise RefError("ref %d[%d]: that call raised, it has no value"
                           % (rid, k))
        if out[0] != "ok":
            raise RefError("ref %d[%d]: that call has no result" % (rid, k))
        return pickle.loads(out[1])

    class Loader(pickle.Unpickler):
        def persistent_load(self, pid):
            if (not isinstance(pid, tuple) or len(pid) not in (2, 3)
                    or pid[0] != "pilot-ref"):
                raise pickle.UnpicklingError("unknown persistent id %r"
                                             % (pid,))
            if pid[1] not in values:
                values[pid[1]] = value(pid[1])
            if len(pid) == 2:
                return values[pid[1]]
            if pid not in values:
                values[pid] = element(pid[1], pid[2])
            return values[pid]

    return Loader(io.BytesIO(data)).load()


def pickler():
    try:
        import cloudpickle
        return lambda v: cloudpickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL)
    except ImportError:
        return lambda v: pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL)


def last_line(e):
    """The exception's last line: "ValueError: bad input"."""
    try:
        return traceback.format_exception_only(type(e), e)[-1].strip()
    except BaseException:
        return type(e).__name__


def cut(text, limit):
    """'text' cut to at most 'limit' bytes of UTF-8, as the agent's JSON
    takes it: a NUL written \\x00 (the agent refused the header: the
    call failed, its worker killed) and a lone surrogate \\udcff (it
    would not encode: the worker died)."""
    b = text.replace("\0", "\\x00").encode("utf-8", "backslashreplace")
    return b[:limit].decode("utf-8", "ignore")


def write_new(path, data):
    """Write 'data' to the new file 'path' (0600, never through a link,
    never over a file that is there) and make it durable."""
    flags = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
             | os.O_CLOEXEC)
    fd = os.open(path, flags, 0o600)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    # the script's directory is not the user's: nothing of ours shadows
    # their modules
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        del sys.path[0]
    fd = 3
    if len(sys.argv) == 3 and sys.argv[1] == "--fd":
        fd = int(sys.argv[2])
    try:
        Worker(fd).loop()
    except (BrokenPipeError, ConnectionResetError):
        pass
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except Exception:
            pass
    # N.B. not sys.exit(): a thread a call left running would hold it
    os._exit(0)


if __name__ == "__main__":
    main()
