"""pilot.errors - what a failed call raises

Every error is a pilot.Error with .errno (the errno value libpilot set)
and .text (one line, the words the pilot CLI would print).  Some are
also a built-in exception, so that 'except TimeoutError' works.
"""
import errno as _errno


class Error(Exception):
    """A pilot call failed: .errno, .text; .ids: the ids of tasks a
    failed submit_many queued before it failed (else [])."""

    def __init__(self, errnum, text, ids=None):
        super().__init__(text)
        self.errno = errnum
        self.text = text
        self.ids = list(ids or [])

    def __str__(self):
        return self.text


class NoPilot(Error, ConnectionError):
    """No pilot to connect to: none runs, several do, or the one named
    is not there or does not run (ENOENT, EEXIST, ENOTCONN)."""


class NoSuchTask(Error, LookupError):
    """The task named does not exist (ENOENT)."""


class NoSuchPool(Error, LookupError):
    """The pool named does not exist (ENOENT)."""


class BadRequest(Error, ValueError):
    """An option, a spec or an argument that pilotd would refuse
    (EINVAL, E2BIG)."""


class Timeout(Error, TimeoutError):
    """pilotd did not answer in time, or a wait ran out (ETIMEDOUT)."""


class Denied(Error, PermissionError):
    """The client's key may not do this (EACCES, EPERM)."""


class NotRunning(Error, ConnectionError):
    """The pilot no longer runs: only reads answer, from its state
    (ENOTCONN)."""


def from_errno(errnum, text, what="task", ids=None):
    """The exception for errno 'errnum'; 'what' says what an ENOENT is
    about: "task", "pool" or "pilot"."""
    if errnum == _errno.ETIMEDOUT:
        cls = Timeout
    elif errnum in (_errno.EACCES, _errno.EPERM):
        cls = Denied
    elif errnum in (_errno.EINVAL, _errno.E2BIG):
        cls = BadRequest
    elif what == "pilot" and errnum in (_errno.ENOENT, _errno.EEXIST,
                                        _errno.ENOTCONN):
        cls = NoPilot
    elif errnum == _errno.ENOTCONN:
        cls = NotRunning
    elif errnum == _errno.ENOENT and what == "task":
        cls = NoSuchTask
    elif errnum == _errno.ENOENT and what == "pool":
        cls = NoSuchPool
    else:
        cls = Error
    return cls(errnum, text, ids)


class TaskFailed(Exception):
    """A Python call (pilot.Executor) that ended with no value: its worker
    died, it ran out of time, it was canceled elsewhere, its result was
    too big.  .task_id, .state ("failed", "timeout", "canceled"),
    .exit_code, .signal and .reason: what 'pilot show' says of it."""

    def __init__(self, task_id, state, exit_code=None, signal=None,
                 reason=None):
        super().__init__(task_id, state, exit_code, signal, reason)
        self.task_id = task_id
        self.state = state
        self.exit_code = exit_code
        self.signal = signal
        self.reason = reason

    def __str__(self):
        how = []
        if self.exit_code is not None:
            how.append("exit code %d" % self.exit_code)
        if self.signal:
            how.append("signal %d" % self.signal)
        return "call %s %s%s%s" % (
            self.task_id, self.state,
            " (%s)" % ", ".join(how) if how else "",
            ": " + self.reason if self.reason else "")


class RemoteError(Exception):
    """An exception of a Python call that could not be brought here as
    itself (it did not pickle there, or does not unpickle here): its
    type's name, its message and the traceback text (None if unknown)."""

    def __init__(self, type_name, message, traceback=None):
        super().__init__(type_name, message, traceback)
        self.type_name = type_name
        self.message = message
        self.traceback = traceback

    def __str__(self):
        return "%s: %s" % (self.type_name, self.message)


class RemoteTraceback(Exception):
    """The __cause__ of a Python call's exception: the traceback as the
    worker printed it (so that it shows under the local one)."""

    def __init__(self, tb):
        super().__init__(tb)
        self.tb = tb

    def __str__(self):
        return self.tb
