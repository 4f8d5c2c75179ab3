"""pilot._ffi - libpilot through cffi's ABI mode

The library is opened at run time (ffi.dlopen): nothing is compiled when
the package is installed.  Which library: $PILOT_LIBPILOT when set (and
only that one), else the one 'make install' put beside the package
(_paths.py), else "libpilot.so.1" from the loader's path.  Its
pilot_api_version() must be the version these declarations describe.
cffi releases the GIL for the length of each call, so a thread waiting
on pilotd never holds up the others.
"""
import os
import threading

from cffi import FFI

from ._cdef import CDEF

ffi = FFI()
ffi.cdef(CDEF)

_lib = None
_lock = threading.Lock()


def _candidates():
    given = os.environ.get("PILOT_LIBPILOT")
    if given:
        return [given]
    names = []
    try:
        from ._paths import LIBPILOT
        names.append(LIBPILOT)
    except ImportError:
        pass  # in the source tree: no install
    names.append("libpilot.so.1")
    return names


def lib():
    """The loaded library (loaded on first use); ImportError if none
    loads or its API version is not ours."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for name in _candidates():
            try:
                loaded = ffi.dlopen(name)
            except OSError as e:
                tried.append("%s: %s" % (name, e))
                continue
            want = loaded.PILOT_API_VERSION  # the declarations' own
            have = loaded.pilot_api_version()
            if have != want:
                raise ImportError("%s has libpilot API version %d; this "
                                  "package speaks version %d" % (name, have,
                                                                 want))
            _lib = loaded
            return _lib
        raise ImportError("cannot load libpilot (set PILOT_LIBPILOT to its "
                          "path): " + "; ".join(tried))
