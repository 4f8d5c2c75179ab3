/* proto/spec.c - a task as submitted: its fields, its limits, its names */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/spec.h"
#include "proto/spec_private.h"
#include "proto/strv.h"

static const char *const comm_names[] = { "none", "torch", "mpi" };
static const char *const launcher_names[] = { "srun", "srun", "mpirun" };

int pl_comm_parse(const char *s)
{
    for (int i = 0; i < 3; i++)
        if (s && !strcmp(s, comm_names[i]))
            return i;
    return -1;
}

const char *pl_comm_name(int comm)
{
    return comm >= 0 && comm < 3 ? comm_names[comm] : "unknown";
}

static const char *const fn_names[] = { "none", "c", "py", "pool",
                                         "pycall" };

int pl_fn_parse(const char *s)
{
    for (int i = 0; i < 5; i++)
        if (s && !strcmp(s, fn_names[i]))
            return i;
    return -1;
}

const char *pl_fn_name(int fn)
{
    return fn >= 0 && fn < 5 ? fn_names[fn] : "unknown";
}

/* ASCII, whatever the locale */
static bool alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
           || (c >= '0' && c <= '9');
}

bool pl_pool_name_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;

    if (n == 0 || n > PL_POOL_NAME_MAX || !alnum(s[0]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!alnum(s[i]) && s[i] != '_' && s[i] != '.' && s[i] != '-')
            return false;
    return true;
}

int pl_launcher_parse(const char *s)
{
    if (s && !strcmp(s, "srun"))
        return PL_LAUNCHER_SRUN;
    if (s && !strcmp(s, "mpirun"))
        return PL_LAUNCHER_MPIRUN;
    return -1;
}

const char *pl_launcher_name(int l)
{
    return l >= 0 && l < 3 ? launcher_names[l] : "unknown";
}

size_t pl_spec_tag_key(const char *s)
{
    size_t k = strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                         "0123456789_.-");

    return k > 0 && k <= PL_SPEC_MAX_TAG_KEY && (s[k] == '\0' || s[k] == '=')
               ? k
               : 0;
}

void pl_spec_init(struct pl_spec *s)
{
    memset(s, 0, sizeof(*s));
    s->ranks = s->cpr = 1;
}

void pl_spec_clear(struct pl_spec *s)
{
    int saved = errno;

    free(s->name);
    free(s->cwd);
    free(s->pool);
    free(s->input);
    free(s->input_file);
    free(s->py_prelude);
    free(s->python);
    free(s->refs);
    pl_strv_free(s->argv);
    pl_strv_free(s->env);
    pl_strv_free(s->tags);
    free(s->index);
    for (uint32_t i = 0; i < s->nafter; i++)
        free(s->after[i].name);
    free(s->after);
    memset(s, 0, sizeof(*s));
    errno = saved;
}

uint64_t pl_spec_count(const struct pl_spec *s)
{
    if (s->retry)
        return s->nindex;
    return s->array ? (s->aend - s->astart) / s->astep + 1 : 1;
}

/* ------------------------------------------------------------ the rules */

/* tags: ["KEY=VALUE"...]: keys unique, values of at most
 * PL_SPEC_MAX_TAG_VALUE bytes of UTF-8 without control characters. */
static int tags_check(char *const *tags, struct pl_error *errp)
{
    for (size_t i = 0; tags && tags[i]; i++) {
        size_t klen = pl_spec_tag_key(tags[i]);
        const char *v = tags[i] + klen + 1;
        if (!klen || tags[i][klen] != '=')
            return pl_errset(errp, EINVAL, "tag '%.40s' is not KEY=VALUE with "
                             "a KEY of 1-64 letters, digits, '_', '.', '-'",
                             tags[i]);
        if (strlen(v) > PL_SPEC_MAX_TAG_VALUE || !pl_utf8_str(v))
            return pl_errset(errp, EINVAL, "tag '%.*s': the value is longer "
                             "than 256 bytes or not UTF-8", (int)klen, tags[i]);
        for (const char *c = v; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                return pl_errset(errp, EINVAL, "tag '%.*s': the value has a "
                                 "control character", (int)klen, tags[i]);
        for (size_t k = 0; k < i; k++)
            if (!strncmp(tags[k], tags[i], klen + 1))
                return pl_errset(errp, EINVAL, "tag '%.*s' is given twice",
                                 (int)klen, tags[i]);
    }
    if (pl_strv_len(tags) > PL_SPEC_MAX_TAGS)
        return pl_errset(errp, EINVAL, "%zu tags; at most %d",
                         pl_strv_len(tags), PL_SPEC_MAX_TAGS);
    return 0;
}

static int after_check(const struct pl_spec *s, struct pl_error *errp)
{
    if (s->nafter > PL_SPEC_MAX_AFTER)
        return pl_errset(errp, EINVAL, "after: %u tasks; at most %d", s->nafter,
                         PL_SPEC_MAX_AFTER);
    for (uint32_t i = 0; i < s->nafter; i++) {
        const struct pl_dep *d = &s->after[i];
        if (d->id && d->name)
            return pl_errset(errp, EINVAL, "after: entry %u needs an id or a "
                             "name (one of them)", i + 1);
        if (!d->id && !d->name)
            return pl_errset(errp, EINVAL, "after: task 0 does not exist");
        if (d->elem && !d->id)
            return pl_errset(errp, EINVAL, "after: entry %u: an index goes "
                             "with an array's id", i + 1);
        if (d->elem && d->index > PL_SPEC_MAX_INDEX)
            return pl_errset(errp, EINVAL, "after: entry %u: indexes go up to "
                             "%u", i + 1, PL_SPEC_MAX_INDEX);
        if (d->name && (!d->name[0] || strlen(d->name) > PL_SPEC_MAX_NAME
                        || !pl_utf8_str(d->name)))
            return pl_errset(errp, EINVAL, "after: entry %u: a name must be "
                             "non-empty UTF-8", i + 1);
    }
    return 0;
}

static int array_check(const struct pl_spec *s, struct pl_error *errp)
{
    if (!s->array || s->index)
        return 0; /* not one, or pilotd chose the indexes */
    if (s->astep == 0)
        return pl_errset(errp, EINVAL, "array: the step must be at least 1");
    if (s->aend < s->astart)
        return pl_errset(errp, EINVAL, "array: the end %llu is below the start "
                         "%llu", (unsigned long long)s->aend,
                         (unsigned long long)s->astart);
    if (s->aend > PL_SPEC_MAX_INDEX)
        return pl_errset(errp, EINVAL, "array: indexes go up to %u",
                         PL_SPEC_MAX_INDEX);
    uint64_t n = (s->aend - s->astart) / s->astep + 1;
    /* a retry's range only narrows the indexes that failed */
    if (n > PL_SPEC_MAX_ARRAY && !s->retry)
        return pl_errset(errp, EINVAL, "array: %llu elements; at most %d",
                         (unsigned long long)n, PL_SPEC_MAX_ARRAY);
    return 0;
}

size_t pl_spec_exec_bytes(char *const *argv, char *const *env)
{
    size_t n = 0;

    for (size_t i = 0; argv && argv[i]; i++)
        n += strlen(argv[i]) + 1 + sizeof(char *);
    for (size_t i = 0; env && env[i]; i++)
        n += strlen(env[i]) + 1 + sizeof(char *);
    return n;
}

size_t pl_spec_store_bytes(const struct pl_spec *s)
{
    return pl_spec_exec_bytes(s->argv, s->env) + s->ninput
           + (s->py_prelude ? strlen(s->py_prelude) : 0)
           + (s->python ? strlen(s->python) : 0);
}

uint64_t pl_spec_submit_cap(const struct pl_spec *s)
{
    uint64_t per = pl_spec_store_bytes(s);
    uint64_t n = per ? PL_SUBMIT_MAX_BYTES / per : PL_SUBMIT_MAX_TASKS;

    return n < 1 ? 1 : n > PL_SUBMIT_MAX_TASKS ? PL_SUBMIT_MAX_TASKS : n;
}

size_t pl_spec_wire_bytes(const struct pl_spec *s)
{
    /* each string: its bytes and a str32 header; every other field: a
     * key and a number, 32 bytes is room to spare */
    size_t n = 512 + pl_spec_store_bytes(s)
               + (s->input_file ? strlen(s->input_file) + 32 : 0);

    n += (s->name ? strlen(s->name) : 0) + (s->cwd ? strlen(s->cwd) : 0)
         + (s->pool ? strlen(s->pool) + 32 : 0);
    for (size_t i = 0; s->tags && s->tags[i]; i++)
        n += strlen(s->tags[i]) + 16;
    for (uint32_t i = 0; i < s->nafter; i++)
        n += 48 + (s->after[i].name ? strlen(s->after[i].name) : 0);
    return n + 9 * (size_t)s->nindex + 9 * (size_t)s->nrefs + 16;
}

/* The command and its environment: sizes, KEY=VALUE, UTF-8.  N.B. argv
 * and env are kept as JSON (the database, list, show): jansson refuses
 * other bytes, and a string it refused was once dropped from the stored
 * argv, so a task run again from the database ran another command. */
static int command_check(const struct pl_spec *s, struct pl_error *errp)
{
    size_t n = pl_strv_len(s->argv);

    if (n == 0)
        return pl_errset(errp, EINVAL, "no command");
    if (n > PL_SPEC_MAX_ARGV)
        return pl_errset(errp, EINVAL, "the command has %zu arguments; at most "
                         "%d", n, PL_SPEC_MAX_ARGV);
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(s->argv[i]);
        if (len > PL_SPEC_MAX_ARG)
            return pl_errset(errp, EINVAL, "argument %zu of the command has "
                             "%zu bytes; at most %d (Linux's MAX_ARG_STRLEN "
                             "less the NUL)", i, len, PL_SPEC_MAX_ARG);
        if (!pl_utf8_str(s->argv[i]))
            return pl_errset(errp, EINVAL, "argument %zu of the command is not "
                             "UTF-8", i);
    }
    if (!s->argv[0][0])
        return pl_errset(errp, EINVAL, "the command is empty");
    if (pl_strv_len(s->env) > PL_SPEC_MAX_ENV)
        return pl_errset(errp, EINVAL, "%zu environment entries; at most %d",
                         pl_strv_len(s->env), PL_SPEC_MAX_ENV);
    for (size_t i = 0; s->env && s->env[i]; i++) {
        const char *eq = strchr(s->env[i], '=');
        if (strlen(s->env[i]) > PL_SPEC_MAX_ARG)
            return pl_errset(errp, EINVAL, "environment entry %zu has %zu "
                             "bytes; at most %d (Linux's MAX_ARG_STRLEN less "
                             "the NUL)", i, strlen(s->env[i]),
                             PL_SPEC_MAX_ARG);
        if (!pl_utf8_str(s->env[i]))
            return pl_errset(errp, EINVAL, "environment entry %zu is not UTF-8",
                             i);
        if (!eq || eq == s->env[i])
            return pl_errset(errp, EINVAL, "environment entry '%.40s' is not "
                             "KEY=VALUE", s->env[i]);
    }
    size_t exec = pl_spec_exec_bytes(s->argv, s->env);
    if (exec > PL_SPEC_MAX_EXEC)
        return pl_errset(errp, EINVAL, "the command and its environment "
                         "take %zu bytes as execve() counts them; at most %d "
                         "(1.5 MiB: Linux's usual ARG_MAX of 2 MiB less room "
                         "for the environment the task inherits)", exec,
                         PL_SPEC_MAX_EXEC);
    if (!pl_utf8_str(s->name) || !pl_utf8_str(s->cwd))
        return pl_errset(errp, EINVAL, "the %s is not UTF-8",
                         pl_utf8_str(s->name) ? "cwd" : "name");
    if (s->name && strlen(s->name) > PL_SPEC_MAX_NAME)
        return pl_errset(errp, EINVAL, "the name is longer than %d bytes",
                         PL_SPEC_MAX_NAME);
    if (s->cwd && strlen(s->cwd) > PL_SPEC_MAX_CWD)
        return pl_errset(errp, EINVAL, "the cwd is longer than %d bytes",
                         PL_SPEC_MAX_CWD);
    return 0;
}

/* ranks, nodes, ranks per node, cores, GPUs, retries. */
static int shape_check(const struct pl_spec *s, uint64_t ranks,
                       struct pl_error *errp)
{
    if (ranks == 0)
        return pl_errset(errp, EINVAL, "ranks must be at least 1");
    if (ranks > PL_SPEC_MAX_RANKS || s->nodes > PL_SPEC_MAX_NODES
        || s->rpn > PL_SPEC_MAX_RPN)
        return pl_errset(errp, EINVAL, "at most %d ranks, %d nodes and %d "
                         "ranks per node", PL_SPEC_MAX_RANKS, PL_SPEC_MAX_NODES,
                         PL_SPEC_MAX_RPN);
    if (s->cpr == 0)
        return pl_errset(errp, EINVAL, "cores_per_rank must be at least 1");
    if (s->cpr > PL_SPEC_MAX_CPR || s->gpr > PL_SPEC_MAX_GPR)
        return pl_errset(errp, EINVAL, "at most %d cores and %d GPUs per rank",
                         PL_SPEC_MAX_CPR, PL_SPEC_MAX_GPR);
    if (s->retries > PL_SPEC_MAX_RETRIES)
        return pl_errset(errp, EINVAL, "retries: at most %d",
                         PL_SPEC_MAX_RETRIES);
    if (s->nodes && s->rpn && ranks > s->nodes * s->rpn)
        return pl_errset(errp, EINVAL, "%llu ranks do not fit %llu nodes x "
                         "%llu ranks per node", (unsigned long long)ranks,
                         (unsigned long long)s->nodes,
                         (unsigned long long)s->rpn);
    if (s->nodes > ranks)
        return pl_errset(errp, EINVAL, "--nodes %llu needs at least as many "
                         "ranks (--ranks %llu)", (unsigned long long)s->nodes,
                         (unsigned long long)ranks);
    return 0;
}

int pl_spec_check(struct pl_spec *s, struct pl_error *errp)
{
    uint64_t ranks = s->ranks;

    if (!s->has_ranks && (s->nodes || s->rpn))
        /* --nodes and --ranks-per-node alone say how many ranks */
        ranks = (s->nodes ? s->nodes : 1) * (s->rpn ? s->rpn : 1);
    if (command_check(s, errp) < 0 || tags_check(s->tags, errp) < 0
        || after_check(s, errp) < 0 || array_check(s, errp) < 0
        || shape_check(s, ranks, errp) < 0)
        return -1;
    if (s->priority < -PL_SPEC_MAX_PRIORITY
        || s->priority > PL_SPEC_MAX_PRIORITY)
        return pl_errset(errp, EINVAL, "priority %lld is out of -%d..%d",
                         (long long)s->priority, PL_SPEC_MAX_PRIORITY,
                         PL_SPEC_MAX_PRIORITY);
    if (s->vetted > PL_SPEC_MAX_VETTED)
        return pl_errset(errp, EINVAL, "vetted: %llu minutes is more than "
                         "%d", (unsigned long long)s->vetted,
                         PL_SPEC_MAX_VETTED);
    if (!isfinite(s->timeout) || s->timeout < 0)
        return pl_errset(errp, EINVAL, "timeout must be a positive number of "
                         "seconds");
    if (s->timeout > PL_SPEC_MAX_TIMEOUT)
        return pl_errset(errp, EINVAL, "timeout: at most %.0f s (115 days)",
                         PL_SPEC_MAX_TIMEOUT);
    if (s->append && !s->array && !s->retry)
        return pl_errset(errp, EINVAL, "append: only an array's elements can "
                         "join an array");
    if (s->comm < PL_COMM_NONE || s->comm > PL_COMM_MPI)
        return pl_errset(errp, EINVAL, "unknown comm");
    if (pl_spec_fn_check(s, errp) < 0)
        return -1;
    if (s->fn == PL_FN_PYCALL && ranks != 1)
        return pl_errset(errp, EINVAL, "a Python call is one rank, not %llu",
                         (unsigned long long)ranks);
    if (s->launcher < PL_LAUNCHER_UNSET || s->launcher > PL_LAUNCHER_MPIRUN)
        return pl_errset(errp, EINVAL, "unknown launcher");
    if (s->launcher != PL_LAUNCHER_UNSET && s->comm != PL_COMM_MPI)
        return pl_errset(errp, EINVAL, "a launcher is for --comm mpi only");
    /* settled: what is left to defaults */
    s->ranks = ranks;
    s->has_ranks = true;
    if (!s->has_retries) {
        s->retries = PL_SPEC_DEFAULT_RETRIES;
        s->has_retries = true;
    }
    if (s->env && !s->env[0]) {
        pl_strv_free(s->env);
        s->env = NULL;
    }
    if (s->tags && !s->tags[0]) {
        pl_strv_free(s->tags);
        s->tags = NULL;
    }
    return 0;
}

/* ------------------------------------------------------------ decode */

/* 'after': [{id: uint} or {name: str}, with any: bool], into s->after. */
static int after_decode(const msgpack_object *o, struct pl_spec *s,
                        struct pl_error *errp)
{
    const msgpack_object *a;
    int rc = pl_mp_array(o, "after", false, PL_SPEC_MAX_AFTER, &a, errp);

    if (rc <= 0)
        return rc;
    if (a->via.array.size == 0)
        return 0;
    if (!(s->after = calloc(a->via.array.size, sizeof(*s->after)))) {
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    for (uint32_t i = 0; i < a->via.array.size; i++) {
        const msgpack_object *e = &a->via.array.ptr[i];
        struct pl_dep *dp = &s->after[s->nafter++];
        int hid, hname, hindex;
        if (e->type != MSGPACK_OBJECT_MAP) {
            errno = EPROTO;
            return pl_errprintf(errp, "after: entry %u is not a map", i + 1);
        }
        if ((hid = pl_mp_uint(e, "id", false, UINT64_MAX, &dp->id, errp)) < 0
            || (hname = pl_mp_str(e, "name", false, PL_SPEC_MAX_NAME,
                                  &dp->name, errp)) < 0
            || pl_mp_bool(e, "any", false, &dp->any, errp) < 0
            || (hindex = pl_mp_uint(e, "index", false, PL_SPEC_MAX_INDEX,
                                    &dp->index, errp)) < 0)
            return -1;
        if (hid + hname != 1)
            return pl_errset(errp, EINVAL, "after: entry %u needs an id or a "
                             "name (one of them)", i + 1);
        if (hindex && !hid)
            return pl_errset(errp, EINVAL, "after: entry %u: an index goes "
                             "with an array's id", i + 1);
        dp->elem = hindex == 1;
        if (hid && dp->id == 0)
            return pl_errset(errp, EINVAL, "after: task 0 does not exist");
    }
    return 0;
}

/* 'array': [start, end, step] (an array of tasks, '{}' in the arguments
 * and the name stands for the index). */
static int array_decode(const msgpack_object *o, struct pl_spec *s,
                        struct pl_error *errp)
{
    const msgpack_object *a;
    int rc = pl_mp_array(o, "array", false, 3, &a, errp);
    uint64_t v[3];

    if (rc <= 0)
        return rc;
    errno = EPROTO;
    if (a->via.array.size != 3)
        return pl_errprintf(errp, "array: want [start, end, step]");
    for (int i = 0; i < 3; i++) {
        if (a->via.array.ptr[i].type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            return pl_errprintf(errp, "array: want [start, end, step] as "
                                "integers >= 0");
        v[i] = a->via.array.ptr[i].via.u64;
    }
    s->array = true;
    s->astart = v[0];
    s->aend = v[1];
    s->astep = v[2];
    return 0;
}

/* 'key' as one of 'names' (an enum's): *v, or -1 with errp (EINVAL). */
static int name_decode(const msgpack_object *o, const char *key,
                       int (*parse)(const char *), const char *what,
                       int *v, struct pl_error *errp)
{
    char *s = NULL;
    int rc = pl_mp_str(o, key, false, 16, &s, errp);

    if (rc <= 0)
        return rc;
    if ((*v = parse(s)) < 0) {
        pl_errset(errp, EINVAL, "unknown %s '%.20s' (%s)", key, s, what);
        free(s);
        return -1;
    }
    free(s);
    return 1;
}

int pl_spec_decode(const msgpack_object *o, struct pl_spec *s,
                   struct pl_error *errp)
{
    int has_ranks = 0, has_retries = 0;

    pl_spec_init(s);
    if (o->type != MSGPACK_OBJECT_MAP) {
        errno = EPROTO;
        return pl_errprintf(errp, "a task spec must be a map");
    }
    /* the limits a person may hit, in words before the generic checks */
    const msgpack_object *av = pl_mp_get(o, "argv");
    if (av && av->type == MSGPACK_OBJECT_ARRAY) {
        if (av->via.array.size > PL_SPEC_MAX_ARGV) {
            pl_errset(errp, EINVAL, "the command has %u arguments; at most %d",
                      av->via.array.size, PL_SPEC_MAX_ARGV);
            goto error;
        }
        for (uint32_t i = 0; i < av->via.array.size; i++) {
            if (av->via.array.ptr[i].type == MSGPACK_OBJECT_STR
                && av->via.array.ptr[i].via.str.size > PL_SPEC_MAX_ARG) {
                pl_errset(errp, EINVAL, "argument %u of the command has %u "
                          "bytes; at most %d (Linux's MAX_ARG_STRLEN less "
                          "the NUL)", i, av->via.array.ptr[i].via.str.size,
                          PL_SPEC_MAX_ARG);
                goto error;
            }
        }
    }
    if (pl_mp_strv(o, "argv", true, 1, PL_SPEC_MAX_ARGV, PL_SPEC_MAX_ARG,
                   &s->argv, errp) < 0
        || pl_mp_str(o, "name", false, PL_SPEC_MAX_NAME, &s->name, errp) < 0
        || pl_mp_str(o, "cwd", false, PL_SPEC_MAX_CWD, &s->cwd, errp) < 0
        || pl_mp_strv(o, "env", false, 0, PL_SPEC_MAX_ENV, PL_SPEC_MAX_ARG,
                      &s->env, errp) < 0
        || (has_ranks = pl_mp_uint(o, "ranks", false, PL_SPEC_MAX_RANKS,
                                   &s->ranks, errp)) < 0
        || pl_mp_uint(o, "nodes", false, PL_SPEC_MAX_NODES, &s->nodes, errp)
               < 0
        || pl_mp_uint(o, "ranks_per_node", false, PL_SPEC_MAX_RPN, &s->rpn,
                      errp) < 0
        || pl_mp_bool(o, "exclusive", false, &s->exclusive, errp) < 0
        || name_decode(o, "comm", pl_comm_parse, "none, torch or mpi",
                       &s->comm, errp) < 0
        || name_decode(o, "launcher", pl_launcher_parse, "srun or mpirun",
                       &s->launcher, errp) < 0
        || pl_mp_uint(o, "cores_per_rank", false, PL_SPEC_MAX_CPR, &s->cpr,
                      errp) < 0
        || pl_mp_uint(o, "gpus_per_rank", false, PL_SPEC_MAX_GPR, &s->gpr,
                      errp) < 0
        || (has_retries = pl_mp_uint(o, "retries", false,
                                     PL_SPEC_MAX_RETRIES, &s->retries,
                                     errp)) < 0
        || pl_mp_double(o, "timeout", false, &s->timeout, errp) < 0
        || pl_mp_uint(o, "output_limit", false, PL_SPEC_MAX_OUTPUT,
                      &s->output_limit, errp) < 0
        || pl_mp_int(o, "priority", false, &s->priority, errp) < 0
        || pl_mp_uint(o, "vetted", false, PL_SPEC_MAX_VETTED, &s->vetted,
                      errp) < 0
        || pl_mp_strv(o, "tags", false, 0, PL_SPEC_MAX_TAGS, 512, &s->tags,
                      errp) < 0
        || pl_mp_uint(o, "retry_failed", false, INT64_MAX, &s->retry,
                      errp) < 0
        || pl_mp_uint(o, "append", false, INT64_MAX, &s->append, errp) < 0
        || pl_mp_str(o, "pool", false, PL_POOL_NAME_MAX, &s->pool, errp) < 0
        || name_decode(o, "fn", pl_fn_parse, "c, py or pycall", &s->fn,
                       errp) < 0
        || pl_spec_pycall_decode(o, s, errp) < 0
        || after_decode(o, s, errp) < 0 || array_decode(o, s, errp) < 0)
        goto error;
    s->has_ranks = has_ranks == 1;
    s->has_retries = has_retries == 1;
    if (pl_spec_check(s, errp) < 0)
        goto error;
    return 0;
error:
    pl_spec_clear(s);
    return -1;
}

/* ------------------------------------------------------------ encode */

void pl_spec_encode(struct pl_wbuf *w, const struct pl_spec *s)
{
    struct pl_wmap m;
    msgpack_packer *pk;

    pl_wmap_begin(w, &m);
    pl_wm_strv(&m, "argv", s->argv);
    if (s->name)
        pl_wm_str(&m, "name", s->name);
    if (s->cwd)
        pl_wm_str(&m, "cwd", s->cwd);
    if (s->env && s->env[0])
        pl_wm_strv(&m, "env", s->env);
    /* what pl_spec_decode() and pl_spec_check() would make of an absent
     * field is left out (pl_spec_check() settles ranks and retries, so
     * a checked spec would carry both): a 100,000-line file's request
     * is that much smaller in pilotd's memory.  Ranks stay when NODES x
     * RPN would give another number. */
    if (s->ranks != 1 || (s->has_ranks && (s->nodes || s->rpn)))
        pl_wm_uint(&m, "ranks", s->ranks);
    if (s->cpr != 1)
        pl_wm_uint(&m, "cores_per_rank", s->cpr);
    if (s->gpr)
        pl_wm_uint(&m, "gpus_per_rank", s->gpr);
    if (s->nodes)
        pl_wm_uint(&m, "nodes", s->nodes);
    if (s->rpn)
        pl_wm_uint(&m, "ranks_per_node", s->rpn);
    if (s->exclusive)
        pl_wm_bool(&m, "exclusive", true);
    if (s->comm != PL_COMM_NONE)
        pl_wm_str(&m, "comm", pl_comm_name(s->comm));
    if (s->launcher != PL_LAUNCHER_UNSET)
        pl_wm_str(&m, "launcher", pl_launcher_name(s->launcher));
    if (s->has_retries && s->retries != PL_SPEC_DEFAULT_RETRIES)
        pl_wm_uint(&m, "retries", s->retries);
    if (s->timeout > 0)
        pl_wm_double(&m, "timeout", s->timeout);
    if (s->output_limit)
        pl_wm_uint(&m, "output_limit", s->output_limit);
    if (s->priority)
        pl_wm_int(&m, "priority", s->priority);
    if (s->vetted)
        pl_wm_uint(&m, "vetted", s->vetted);
    if (s->tags && s->tags[0])
        pl_wm_strv(&m, "tags", s->tags);
    if (s->retry)
        pl_wm_uint(&m, "retry_failed", s->retry);
    if (s->append)
        pl_wm_uint(&m, "append", s->append);
    if (s->pool)
        pl_wm_str(&m, "pool", s->pool);
    if (s->fn != PL_FN_NONE)
        pl_wm_str(&m, "fn", pl_fn_name(s->fn));
    if (s->input)
        pl_wm_bin(&m, "input", s->input, s->ninput);
    if (s->input_file)
        pl_wm_str(&m, "input_file", s->input_file);
    if (s->py_prelude)
        pl_wm_str(&m, "py_prelude", s->py_prelude);
    if (s->python)
        pl_wm_str(&m, "python", s->python);
    if (s->nrefs)
        pl_wm_uintv(&m, "refs", s->refs, s->nrefs);
    if (s->nafter) {
        pk = pl_wm_key(&m, "after");
        msgpack_pack_array(pk, s->nafter);
        for (uint32_t i = 0; i < s->nafter; i++) {
            const struct pl_dep *d = &s->after[i];
            struct pl_wmap e;
            pl_wmap_begin(w, &e);
            if (d->name)
                pl_wm_str(&e, "name", d->name);
            else
                pl_wm_uint(&e, "id", d->id);
            if (d->elem)
                pl_wm_uint(&e, "index", d->index);
            if (d->any)
                pl_wm_bool(&e, "any", true);
        }
    }
    if (s->array) {
        pk = pl_wm_key(&m, "array");
        msgpack_pack_array(pk, 3);
        msgpack_pack_uint64(pk, s->astart);
        msgpack_pack_uint64(pk, s->aend);
        msgpack_pack_uint64(pk, s->astep);
    }
}
