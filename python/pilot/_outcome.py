"""pilot._outcome - a call's value or exception from its end and result

outcome() for a plain call's task (its result: the pickled value, or
the pickled (exception, traceback text)); element() for one call of a
packed task (its outcome in the batch's list, python/pilot/_pack.py).
"""
import base64

from . import errors


def load(data):
    import cloudpickle
    return cloudpickle.loads(data)


def result_bytes(res):
    if res.get("result") is not None:
        return base64.b64decode(res["result"])
    with open(res["result_file"], "rb") as f:
        return f.read()


def outcome(end, res):
    """(True, value) or (False, exception) of a call from its end and its
    "results" entry (None: none came)."""
    state = end.get("state")
    if isinstance(res, BaseException):
        return False, res
    status = res.get("status") if res else None
    if state == "done" and status == "ok":
        try:
            return True, load(result_bytes(res))
        except Exception as e:
            err = errors.RemoteError(
                type(e).__name__, "the value of call %d would not unpickle "
                "here: %s" % (end["id"], e), None)
            err.__cause__ = e
            return False, err
    if state == "failed" and status == "raised":
        try:
            exc, tb = load(result_bytes(res))
        except Exception as e:
            name, _, msg = (end.get("reason") or "").partition(": ")
            err = errors.RemoteError(name or "Exception", msg, None)
            err.__cause__ = e
            return False, err
        if type(exc).__name__ == "RemoteError" and \
                hasattr(exc, "type_name"):
            # the worker's stand-in for an exception that would not pickle
            exc = errors.RemoteError(exc.type_name, exc.message, tb)
        if not isinstance(exc, BaseException):
            exc = errors.RemoteError(type(exc).__name__, repr(exc), tb)
        exc.remote_traceback = tb
        exc.__cause__ = errors.RemoteTraceback(tb)
        return False, exc
    failed = errors.TaskFailed(end["id"], state, end.get("exit_code"),
                               end.get("signal"), end.get("reason"))
    return False, failed


def element(end, out):
    """(ok, value) of one call from its outcome in a batch's list."""
    try:
        kind = out[0]
        if kind == "ok":
            return True, load(out[1])
        if kind == "raised":
            exc, tb = load(out[1])
        elif kind == "error":
            exc = errors.RemoteError(out[1], out[2], out[3])
            tb = out[3]
        else:
            return False, errors.TaskFailed(end["id"], "failed", None, None,
                                            str(out[1]))
    except Exception as e:
        err = errors.RemoteError(type(e).__name__, "the outcome of a call "
                                 "of batch task %d would not unpickle here: "
                                 "%s" % (end["id"], e), None)
        err.__cause__ = e
        return False, err
    if not isinstance(exc, BaseException):
        exc = errors.RemoteError(type(exc).__name__, repr(exc), tb)
    exc.remote_traceback = tb
    exc.__cause__ = errors.RemoteTraceback(tb)
    return False, exc
