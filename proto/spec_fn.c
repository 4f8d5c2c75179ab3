/* proto/spec_fn.c - a spec's function: a C or Python function in a pool
 * (fn c, py), a Python call in a warm worker (fn pycall: its input,
 * prelude, interpreter and refs), their rules and their decoding
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/spec.h"
#include "proto/spec_private.h"
#include "proto/strv.h"

/* "MODULE:FUNCTION": a dotted Python module and an identifier. */
static bool py_name_ok(const char *s)
{
    const char *colon = strrchr(s, ':');
    bool start = true;

    if (!colon || colon == s || !colon[1])
        return false;
    for (const char *p = s; *p; p++) {
        bool letter = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
                      || *p == '_';
        bool digit = *p >= '0' && *p <= '9';
        if (p == colon || (*p == '.' && p < colon)) {
            if (start)
                return false; /* an empty part */
            start = true;
            continue;
        }
        if (!letter && !(digit && !start))
            return false;
        start = false;
    }
    return !start;
}

/* A call's refs: at most PL_SPEC_MAX_REFS task ids, each waited for
 * with its value (in 'after' as that id, :ok): a ref's value is its
 * result, which only a call that ended done has. */
static int refs_check(const struct pl_spec *s, struct pl_error *errp)
{
    if (s->nrefs > PL_SPEC_MAX_REFS)
        return pl_errset(errp, EINVAL, "refs: %u calls; at most %d",
                         s->nrefs, PL_SPEC_MAX_REFS);
    if (s->nrefs && s->array)
        return pl_errset(errp, EINVAL, "refs: a call with refs is one call, "
                         "not an array");
    if (s->nrefs && !s->input && !s->input_file)
        return pl_errset(errp, EINVAL, "refs: a call receives values "
                         "through its pickle (input, input_file), not "
                         "py_call's string arguments");
    for (uint32_t i = 0; i < s->nrefs; i++) {
        uint32_t k = 0;
        if (s->refs[i] == 0 || s->refs[i] > INT64_MAX)
            return pl_errset(errp, EINVAL, "refs: want task ids");
        while (k < s->nafter
               && (s->after[k].name || s->after[k].elem
                   || s->after[k].id != s->refs[i]))
            k++;
        if (k == s->nafter)
            return pl_errset(errp, EINVAL, "refs: %llu is not in after (a "
                             "call waits for the values it receives: after "
                             "%llu:ok)", (unsigned long long)s->refs[i],
                             (unsigned long long)s->refs[i]);
        if (s->after[k].any)
            return pl_errset(errp, EINVAL, "refs: %llu is in after with :any; "
                             "a call receives the value of a call that "
                             "ended done (after %llu:ok)",
                             (unsigned long long)s->refs[i],
                             (unsigned long long)s->refs[i]);
    }
    return 0;
}

/* A Python call: one rank, in no pool, its function named in argv[0] or
 * pickled in its input (docs/python-reference.md). */
static int pycall_check(const struct pl_spec *s, struct pl_error *errp)
{
    const char *f = s->input_file;

    if (s->pool)
        return pl_errset(errp, EINVAL, "a Python call runs in its agent's "
                         "warm workers, not in a pool");
    if (s->comm != PL_COMM_NONE || s->launcher != PL_LAUNCHER_UNSET
        || s->nodes > 1 || s->rpn > 1)
        return pl_errset(errp, EINVAL, "a Python call is one rank: no "
                         "--comm, --launcher, --nodes or --ranks-per-node");
    if (s->input && s->input_file)
        return pl_errset(errp, EINVAL, "give input or input_file, not both");
    if (s->input && (s->ninput == 0 || s->ninput > PL_SPEC_MAX_INPUT))
        return pl_errset(errp, EINVAL, "the pickled call is %zu bytes; "
                         "inline it is 1 to %d (256 KiB): write it to a file "
                         "under the pilot's inputs/ (input_file)", s->ninput,
                         PL_SPEC_MAX_INPUT);
    if (f && (f[0] != '/' || strlen(f) > PL_SPEC_MAX_CWD || strstr(f, "/../")
              || !pl_utf8_str(f)))
        return pl_errset(errp, EINVAL, "input_file '%.100s': want an "
                         "absolute path without '..'", f);
    if (!s->input && !f && !py_name_ok(s->argv[0]))
        return pl_errset(errp, EINVAL, "--py-call '%.200s': want "
                         "MODULE:FUNCTION (a dotted module, a Python "
                         "identifier)", s->argv[0]);
    if (s->py_prelude && (strlen(s->py_prelude) > PL_SPEC_MAX_PRELUDE
                          || !pl_utf8_str(s->py_prelude)))
        return pl_errset(errp, EINVAL, "--py-prelude: at most %d bytes of "
                         "UTF-8", PL_SPEC_MAX_PRELUDE);
    if (s->python && (!s->python[0] || strlen(s->python) > PL_SPEC_MAX_PYTHON
                      || !pl_utf8_str(s->python)))
        return pl_errset(errp, EINVAL, "--python: want a program's name or "
                         "path, at most %d bytes of UTF-8",
                         PL_SPEC_MAX_PYTHON);
    return refs_check(s, errp);
}

/* A pool task's function and what it may not ask for (its ranks are the
 * pool's workers, whose cores and GPUs the pool set). */
int pl_spec_fn_check(const struct pl_spec *s, struct pl_error *errp)
{
    const char *f = s->argv[0], *colon = strrchr(f, ':');

    if (s->fn < PL_FN_NONE || s->fn > PL_FN_PYCALL)
        return pl_errset(errp, EINVAL, "unknown fn");
    if (s->fn == PL_FN_PYCALL)
        return pycall_check(s, errp);
    if (s->input || s->input_file || s->py_prelude || s->python || s->nrefs)
        return pl_errset(errp, EINVAL, "input, input_file, py_prelude, "
                         "python and refs are a Python call's (fn pycall)");
    if (s->pool && !pl_pool_name_ok(s->pool))
        return pl_errset(errp, EINVAL, "pool name '%.64s': want 1 to %d of "
                         "A-Z a-z 0-9 _ . -, starting with a letter or a "
                         "digit", s->pool, PL_POOL_NAME_MAX);
    if (s->fn == PL_FN_NONE) {
        if (s->pool)
            return pl_errset(errp, EINVAL, "a pool task names a function "
                             "(--fn LIB.so:SYMBOL or --py MODULE:FUNCTION)");
        return 0;
    }
    if (!s->pool)
        return pl_errset(errp, EINVAL, "a function runs in a pool: name it "
                         "(--pool NAME)");
    if (s->fn == PL_FN_POOL)
        return 0; /* pilotd's own: the pool's job */
    if (s->fn == PL_FN_C && (!colon || colon == f || !colon[1]))
        return pl_errset(errp, EINVAL, "--fn '%.200s': want LIB.so:SYMBOL",
                         f);
    if (s->fn == PL_FN_PY && !py_name_ok(f))
        return pl_errset(errp, EINVAL, "--py '%.200s': want "
                         "MODULE:FUNCTION (a dotted module, a Python "
                         "identifier)", f);
    if (s->comm != PL_COMM_NONE || s->launcher != PL_LAUNCHER_UNSET)
        return pl_errset(errp, EINVAL, "a pool task's communicator is the "
                         "pool's: no --comm or --launcher");
    if (s->cpr > 1 || s->gpr || s->exclusive)
        return pl_errset(errp, EINVAL, "a pool task's ranks are the pool's "
                         "workers, with the cores and GPUs the pool was "
                         "started with: no --cores-per-rank, "
                         "--gpus-per-rank or --exclusive");
    return 0;
}

/* A Python call's fields: 'input' (bytes, copied), 'input_file',
 * 'py_prelude', 'python'. */
int pl_spec_pycall_decode(const msgpack_object *o, struct pl_spec *s,
                          struct pl_error *errp)
{
    const msgpack_object *in = pl_mp_get(o, "input");
    const unsigned char *p;
    size_t n;
    int rc;

    /* in words before the generic check: a person may hit it */
    if (in && in->type == MSGPACK_OBJECT_BIN
        && in->via.bin.size > PL_SPEC_MAX_INPUT)
        return pl_errset(errp, EINVAL, "the pickled call is %u bytes; "
                         "inline it is at most %d (256 KiB): write it to a "
                         "file under the pilot's inputs/ (input_file)",
                         in->via.bin.size, PL_SPEC_MAX_INPUT);
    if ((rc = pl_mp_bin(o, "input", false, PL_SPEC_MAX_INPUT, &p, &n, errp))
        < 0)
        return -1;
    if (rc && n) {
        if (!(s->input = malloc(n))) {
            errno = ENOMEM;
            return pl_errprintf(errp, "out of memory");
        }
        memcpy(s->input, p, n);
    }
    s->ninput = rc ? n : 0;
    if (rc && !n)
        return pl_errset(errp, EINVAL, "the pickled call is empty");
    if (pl_mp_str(o, "input_file", false, PL_SPEC_MAX_CWD, &s->input_file,
                  errp) < 0
        || pl_mp_str(o, "py_prelude", false, PL_SPEC_MAX_PRELUDE,
                     &s->py_prelude, errp) < 0
        || pl_mp_str(o, "python", false, PL_SPEC_MAX_PYTHON, &s->python,
                     errp) < 0
        || pl_mp_uintv(o, "refs", false, PL_SPEC_MAX_REFS, INT64_MAX,
                       &s->refs, &s->nrefs, errp) < 0)
        return -1;
    return 0;
}
