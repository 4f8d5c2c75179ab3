"""pilot._pickle - an Executor call pickled, with the futures among its arguments

A call is pickled by cloudpickle; a pilot.Future among its arguments
becomes a reference ("pilot-ref", ID[, INDEX]) that the worker's
unpickler replaces with that call's value (docs/python-reference.md).
"""
import errno as _errno
import io
import pickle

from . import errors

MAX_CALL = 256 << 20      # bytes of a pickled call (the workers' limit)


class HasFuture(TypeError):
    """A Future met while pickling without references (Future.__reduce_ex__):
    pickle again, with them.  Elsewhere: a Future does not pickle."""

    def __init__(self):
        super().__init__("a pilot.Future pickles only among the arguments "
                         "of Executor.submit()")


class Unsent(Exception):
    """An argument's future has no task id yet: send the buffer first."""


class _TooBig(Exception):
    pass


class _Sink(io.BytesIO):
    """The pickle's bytes, refused past MAX_CALL (a huge argument costs at
    most the limit before it fails)."""

    def write(self, b):
        n = super().write(b)
        if self.tell() > MAX_CALL:
            raise _TooBig()
        return n


def _pickler_class(future_cls):
    import cloudpickle

    class RefPickler(cloudpickle.CloudPickler):
        """Pickles a Future among the arguments as ("pilot-ref", ID): the
        worker's unpickler puts that call's value in its place."""

        def __init__(self, file, ex):
            super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
            self.ex = ex
            self.refs = []

        def persistent_id(self, obj):
            if not isinstance(obj, future_cls):
                return None
            if obj._ex is not None and obj._ex._pilot_id != self.ex._pilot_id:
                raise errors.BadRequest(_errno.EINVAL, "a future of pilot %s "
                                        "cannot be an argument of a call on "
                                        "pilot %s" % (obj._ex._pilot_id,
                                                      self.ex._pilot_id))
            if obj.task_id is None:
                if obj._where == "dropped":
                    raise errors.BadRequest(_errno.EINVAL, "a canceled "
                                            "future (never sent) cannot be "
                                            "an argument")
                raise Unsent()
            if obj.task_id not in self.refs:
                self.refs.append(obj.task_id)
            if obj._pack is not None:
                # a packed call: element INDEX of its batch's outcomes
                return ("pilot-ref", obj.task_id, obj._pack[1])
            return ("pilot-ref", obj.task_id)
    return RefPickler


_RefPickler = None


def dumps(ex, call, future_cls):
    """The pickled call and the ids of the futures (instances of
    'future_cls') among its arguments.  Unsent if one of those has not
    been sent yet."""
    global _RefPickler
    import cloudpickle
    sink = _Sink()
    try:
        try:
            # most calls hold no future: the plain pickler, whose
            # persistent_id is not called for every object
            cloudpickle.CloudPickler(sink, protocol=pickle.HIGHEST_PROTOCOL)\
                .dump(call)
            return sink.getvalue(), []
        except HasFuture:
            pass
        if _RefPickler is None:
            _RefPickler = _pickler_class(future_cls)
        sink = _Sink()
        p = _RefPickler(sink, ex)
        p.dump(call)
        return sink.getvalue(), p.refs
    except _TooBig:
        raise errors.BadRequest(_errno.E2BIG, "the call pickles to more than "
                                "%d bytes (%d MiB): a pickled call may be no "
                                "larger; pass a path to the data instead"
                                % (MAX_CALL, MAX_CALL >> 20)) from None
