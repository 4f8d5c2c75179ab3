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
