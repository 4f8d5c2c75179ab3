"""tests/py/exfn.py - functions test_executor.py runs on a pilot

Plain module functions, standard library only: cloudpickle pickles them
by reference, and the warm worker imports this module from the call's
directory (the Executor's cwd, this one), as a user's module would be.
"""
import ctypes
import mmap
import os
import pickle
import time


def square(x):
    return x * x


def add(a, b):
    return a + b


def total(xs):
    return sum(xs)


def echo_kw(*args, **kwargs):
    return args, kwargs


def nap(seconds, value=None):
    time.sleep(seconds)
    return value


def raise_value_error(x):
    raise ValueError("bad input %r" % (x,))


def exit3():
    os._exit(3)


def segv():
    ctypes.string_at(0)


def blob(n):
    return b"\xab" * n


def too_big(n):
    # n bytes of zeros that cost no memory until pickled: an anonymous
    # mapping's untouched pages, given to pickle as a buffer
    return pickle.PickleBuffer(mmap.mmap(-1, n))


def pid():
    return os.getpid()


def unpicklable_exception():
    import threading

    class Bad(Exception):
        def __init__(self):
            super().__init__("holds a lock")
            self.lock = threading.Lock()
    raise Bad()


def square_unless(x, bad, how):
    """x * x, but for x == bad: raise ValueError, or die (os._exit(3))."""
    if x == bad:
        if how == "exit":
            os._exit(3)
        raise ValueError("bad input %r" % (x,))
    return x * x
