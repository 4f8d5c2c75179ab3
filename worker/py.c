/* worker/py.c - Python functions of a pool: "MODULE:FUNCTION" called in
 * an embedded interpreter, with an mpi4py communicator */
#ifdef PL_WITH_PYTHON
/* Python.h first: it sets feature macros the C library's headers read */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#endif

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/py.h"

#ifdef PL_WITH_PYTHON

/* The glue, a module of its own (_pilot_worker) run in the interpreter
 * when it starts.  A string here rather than a .py file beside the
 * worker: the same from the build tree and after 'make install'. */
static const char glue_src[] =
    "import importlib, os, sys, traceback, types\n"
    "\n"
    "if not getattr(sys, 'argv', None):\n"
    "    sys.argv = ['pilot-worker']  # argparse and others read it\n"
    "\n"
    "def _line(e):\n"
    "    return ''.join(traceback.format_exception_only(type(e), e)).strip()\n"
    "\n"
    "try:\n"
    "    from mpi4py import rc as _rc\n"
    "    _rc.initialize = False  # pilot-worker called MPI_Init_thread\n"
    "    _rc.finalize = False    # ... and calls MPI_Finalize\n"
    "    from mpi4py import MPI\n"
    "    error = None\n"
    "except BaseException as e:\n"
    "    error = 'cannot import mpi4py: ' + _line(e)\n"
    "\n"
    "def _unpath(path):\n"
    "    try:\n"
    "        sys.path.remove(path)\n"
    "    except ValueError:\n"
    "        pass\n"
    "\n"
    "def resolve(spec, cwd):\n"
    "    '''(function, None, None), or (None, why, traceback or None)'''\n"
    "    if error:\n"
    "        return None, error, None\n"
    "    mod, sep, name = spec.rpartition(':')\n"
    "    if not sep or not mod or not name:\n"
    "        return None, \"'%s' is not MODULE:FUNCTION\" % spec, None\n"
    "    path = cwd or os.getcwd()\n"
    "    sys.path.insert(0, path)\n"
    "    try:\n"
    "        obj = importlib.import_module(mod)\n"
    "        for part in name.split('.'):\n"
    "            obj = getattr(obj, part)\n"
    "    except BaseException as e:  # SystemExit at import too\n"
    "        return None, _line(e), traceback.format_exc()\n"
    "    finally:\n"
    "        _unpath(path)\n"
    "    if not callable(obj):\n"
    "        return None, '%s is not callable' % spec, None\n"
    "    return obj, None, None\n"
    "\n"
    "def _clamp(v):\n"
    "    return v if 0 <= v <= 255 else 255\n"
    "\n"
    "def flush():\n"
    "    for f in (sys.stdout, sys.stderr):\n"
    "        try:\n"
    "            f.flush()\n"
    "        except Exception:\n"
    "            pass\n"
    "\n"
    "def call(fn, spec, commf, info, argv, env, cwd):\n"
    "    '''(code, whether the function freed ctx.comm)'''\n"
    "    # a new Python object over our handle, which it does not own:\n"
    "    # its deallocation does not free the communicator\n"
    "    comm = MPI.Intracomm.f2py(commf)\n"
    "    ctx = types.SimpleNamespace(comm=comm, **info)\n"
    "    saved = {}\n"
    "    for kv in env:\n"
    "        k, _, v = kv.partition('=')\n"
    "        saved.setdefault(k, os.environ.get(k))\n"
    "        os.environ[k] = v\n"
    "    path = cwd or os.getcwd()\n"
    "    sys.path.insert(0, path)\n"
    "    try:\n"
    "        ret = fn(ctx, *argv[1:])\n"
    "        if ret is None:\n"
    "            code = 0\n"
    "        elif isinstance(ret, int) and not isinstance(ret, bool):\n"
    "            code = _clamp(ret)\n"
    "        else:\n"
    "            print('pilot-worker: %s returned a %s, not an int or None: '\n"
    "                  'exit code 0' % (spec, type(ret).__name__),\n"
    "                  file=sys.stderr)\n"
    "            code = 0\n"
    "    except SystemExit as e:\n"
    "        if e.code is None:\n"
    "            code = 0\n"
    "        elif isinstance(e.code, int):\n"
    "            code = _clamp(int(e.code))\n"
    "        else:\n"
    "            print(e.code, file=sys.stderr)\n"
    "            code = 1\n"
    "    except BaseException as e:\n"
    "        # from the function down: this frame of ours is noise\n"
    "        traceback.print_exception(type(e), e, e.__traceback__.tb_next)\n"
    "        code = 1\n"
    "    finally:\n"
    "        _unpath(path)\n"
    "        for k, v in saved.items():\n"
    "            if v is None:\n"
    "                os.environ.pop(k, None)\n"
    "            else:\n"
    "                os.environ[k] = v\n"
    "        flush()\n"
    "    return code, comm == MPI.COMM_NULL\n";

struct pl_py {
    bool started;
    char error[160];        /* why no function can run; "" if they can */
    PyObject *glue;         /* the _pilot_worker module */
    PyThreadState *main;    /* the main thread's, while it has no GIL */
};

bool pl_py_built(void)
{
    return true;
}

static int start(struct pl_py *p, struct pl_error *errp)
{
    PyObject *code, *err = NULL;

    if (p->started)
        return p->error[0] ? pl_errprintf(errp, "%s", p->error) : 0;
    p->started = true;
    Py_InitializeEx(0);
    if ((code = Py_CompileString(glue_src, "<pilot-worker>", Py_file_input))) {
        p->glue = PyImport_ExecCodeModule("_pilot_worker", code);
        Py_DECREF(code);
    }
    if (!p->glue) {
        PyErr_Print(); /* a bug of ours: the pool's log */
        snprintf(p->error, sizeof(p->error),
                 "the worker's Python glue failed (see the pool's log)");
    } else if ((err = PyObject_GetAttrString(p->glue, "error"))
               && PyUnicode_Check(err)) {
        const char *t = PyUnicode_AsUTF8(err);
        snprintf(p->error, sizeof(p->error), "%s",
                 t ? t : "cannot import mpi4py");
    }
    Py_XDECREF(err);
    PyErr_Clear();
    p->main = PyEval_SaveThread();
    return p->error[0] ? pl_errprintf(errp, "%s", p->error) : 0;
}

void *pl_py_get(struct pl_py *p, const char *spec, const char *cwd,
                struct pl_error *errp, char **tb)
{
    PyGILState_STATE g;
    PyObject *r, *fn = NULL;

    *tb = NULL;
    if (start(p, errp) < 0)
        return NULL;
    g = PyGILState_Ensure();
    if (!(r = PyObject_CallMethod(p->glue, "resolve", "sz", spec, cwd))
        || !PyTuple_Check(r) || PyTuple_Size(r) != 3) {
        PyErr_Print();
        pl_errprintf(errp, "%s: the worker's resolve() failed", spec);
    } else if (PyTuple_GetItem(r, 0) != Py_None) {
        fn = PyTuple_GetItem(r, 0);
        Py_INCREF(fn);
    } else {
        PyObject *why = PyTuple_GetItem(r, 1), *t = PyTuple_GetItem(r, 2);
        const char *w = PyUnicode_Check(why) ? PyUnicode_AsUTF8(why) : NULL;
        const char *s = PyUnicode_Check(t) ? PyUnicode_AsUTF8(t) : NULL;
        pl_errprintf(errp, "%s", w ? w : "cannot resolve");
        if (s)
            *tb = strdup(s);
        PyErr_Clear();
    }
    Py_XDECREF(r);
    PyGILState_Release(g);
    return fn;
}

void pl_py_put(struct pl_py *p, void *fn)
{
    PyGILState_STATE g;

    if (!fn || !p->started)
        return;
    g = PyGILState_Ensure();
    Py_DECREF((PyObject *)fn);
    PyGILState_Release(g);
}

/* A list of str from a NULL-terminated vector (NULL: empty), decoded as
 * the file system does (surrogateescape: any bytes survive) */
static PyObject *strv_list(char **v)
{
    PyObject *l = PyList_New(0);

    for (; l && v && *v; v++) {
        PyObject *s = PyUnicode_DecodeFSDefault(*v);
        if (!s || PyList_Append(l, s) < 0) {
            Py_XDECREF(s);
            Py_CLEAR(l);
            break;
        }
        Py_DECREF(s);
    }
    return l;
}

int pl_py_call(struct pl_py *p, void *fn, const char *spec,
               const struct pilot_fn_ctx *ctx, char **argv, char **env,
               const char *cwd, bool *freed)
{
    PyObject *info = NULL, *al = NULL, *el = NULL, *idx, *r = NULL;
    PyGILState_STATE g;
    int code = 1;

    *freed = false;
    g = PyGILState_Ensure();
    if (ctx->array_index >= 0)
        idx = PyLong_FromLongLong(ctx->array_index);
    else {
        idx = Py_None;
        Py_INCREF(idx);
    }
    if (idx)
        info = Py_BuildValue(
            "{s:i,s:i,s:K,s:I,s:N,s:s,s:s,s:i,s:i,s:O,s:z,s:i}", "rank",
            ctx->rank, "size", ctx->size, "task_id", ctx->task_id,
            "attempt", ctx->attempt, "array_index", idx, "outdir",
            ctx->outdir, "pool", ctx->pool, "world_rank", ctx->world_rank,
            "world_size", ctx->world_size, "nccl", Py_None, "nccl_error",
            ctx->nccl_error, "cuda_device", ctx->cuda_device);
    if (info && (al = strv_list(argv)) && (el = strv_list(env)))
        r = PyObject_CallMethod(p->glue, "call", "OsiOOOz", (PyObject *)fn,
                                spec, (int)MPI_Comm_c2f(ctx->comm), info, al,
                                el, cwd);
    if (r && PyTuple_Check(r) && PyTuple_Size(r) == 2) {
        code = (int)PyLong_AsLong(PyTuple_GetItem(r, 0));
        *freed = PyObject_IsTrue(PyTuple_GetItem(r, 1)) == 1;
        if (code < 0 || code > 255)
            code = 255;
    }
    if (PyErr_Occurred())
        PyErr_Print(); /* stderr: the rank's file */
    Py_XDECREF(r);
    Py_XDECREF(el);
    Py_XDECREF(al);
    Py_XDECREF(info);
    PyGILState_Release(g);
    return code;
}

void pl_py_flush(struct pl_py *p)
{
    PyGILState_STATE g;
    PyObject *r;

    if (!p || !p->glue)
        return;
    g = PyGILState_Ensure();
    if (!(r = PyObject_CallMethod(p->glue, "flush", NULL)))
        PyErr_Clear();
    Py_XDECREF(r);
    PyGILState_Release(g);
}

#else /* !PL_WITH_PYTHON */

/* Built without python3-embed: the worker runs C functions, and answers
 * a Python one with this error. */
struct pl_py {
    int unused;
};

bool pl_py_built(void)
{
    return false;
}

void *pl_py_get(struct pl_py *p, const char *spec, const char *cwd,
                struct pl_error *errp, char **tb)
{
    (void)p;
    (void)spec;
    (void)cwd;
    *tb = NULL;
    pl_errprintf(errp, "this pilot-worker was built without Python "
                       "(no python3-embed)");
    return NULL;
}

void pl_py_put(struct pl_py *p, void *fn)
{
    (void)p;
    (void)fn;
}

int pl_py_call(struct pl_py *p, void *fn, const char *spec,
               const struct pilot_fn_ctx *ctx, char **argv, char **env,
               const char *cwd, bool *freed)
{
    (void)p, (void)fn, (void)spec, (void)ctx, (void)argv, (void)env;
    (void)cwd;
    *freed = false;
    return 127;
}

void pl_py_flush(struct pl_py *p)
{
    (void)p;
}

#endif /* PL_WITH_PYTHON */

/* the same with or without Python: the struct is each branch's */
struct pl_py *pl_py_new(void)
{
    return calloc(1, sizeof(struct pl_py));
}

void pl_py_free(struct pl_py *p)
{
    int e = errno;

    free(p);
    errno = e;
}
