/* daemon/decode.c - the bodies pilotd receives, decoded and checked */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/decode.h"
#include "proto/msg.h"
#include "proto/pilotdir.h"

#define MAX_ARGV 4096
#define MAX_ARG_LEN (64 * 1024)
#define MAX_ENV 4096
#define NODE_LEN 63           /* struct pl_node's name[64] */
#define MAX_CPUS 4096         /* CPU ids an agent may register */
#define MAX_CPU_ID (1 << 20)
#define MAX_GPUS 64
#define GPU_ID_LEN 64

void pl_spec_clear(struct pl_spec *s)
{
    int saved = errno;

    free(s->comm);
    free(s->launcher);
    free(s->name);
    free(s->cwd);
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

static bool utf8(const char *s)
{
    return !s || pl_utf8_valid(s, strlen(s));
}

uint64_t pl_spec_count(const struct pl_spec *s)
{
    if (s->retry)
        return s->nindex;
    return s->array ? (s->aend - s->astart) / s->astep + 1 : 1;
}

/* A tag key: 1..64 of [A-Za-z0-9_.-] (it goes into a JSON path). */
static bool tag_key_ok(const char *s, size_t n)
{
    if (n == 0 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!(s[i] >= 'a' && s[i] <= 'z') && !(s[i] >= 'A' && s[i] <= 'Z')
            && !(s[i] >= '0' && s[i] <= '9') && !strchr("_.-", s[i]))
            return false;
    return true;
}

/* 'tags': ["KEY=VALUE"...]: keys unique, values at most 256 bytes of
 * UTF-8 without control characters. */
static int tags_check(char **tags, struct pl_error *errp)
{
    for (size_t i = 0; tags && tags[i]; i++) {
        const char *eq = strchr(tags[i], '=');
        size_t klen = eq ? (size_t)(eq - tags[i]) : 0;
        errno = EINVAL;
        if (!eq || !tag_key_ok(tags[i], klen))
            return pl_errprintf(errp, "tag '%.40s' is not KEY=VALUE with a "
                                "KEY of 1-64 letters, digits, '_', '.', "
                                "'-'", tags[i]);
        if (strlen(eq + 1) > 256 || !utf8(eq + 1))
            return pl_errprintf(errp, "tag '%.*s': the value is longer than "
                                "256 bytes or not UTF-8", (int)klen,
                                tags[i]);
        for (const char *c = eq + 1; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f)
                return pl_errprintf(errp, "tag '%.*s': the value has a "
                                    "control character", (int)klen,
                                    tags[i]);
        for (size_t k = 0; k < i; k++)
            if (!strncmp(tags[k], tags[i], klen + 1))
                return pl_errprintf(errp, "tag '%.*s' is given twice",
                                    (int)klen, tags[i]);
    }
    return 0;
}

/* 'after': [{id: uint} or {name: str}, with any: bool], into s->after. */
static int after_decode(const msgpack_object *o, struct pl_spec *s,
                        struct pl_error *errp)
{
    const msgpack_object *a;
    int rc = pl_mp_array(o, "after", false, PL_MAX_AFTER, &a, errp);

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
            || (hname = pl_mp_str(e, "name", false, 256, &dp->name,
                                  errp)) < 0
            || pl_mp_bool(e, "any", false, &dp->any, errp) < 0
            || (hindex = pl_mp_uint(e, "index", false, UINT32_MAX,
                                    &dp->index, errp)) < 0)
            return -1;
        errno = EINVAL;
        if (hid + hname != 1)
            return pl_errprintf(errp, "after: entry %u needs an id or a "
                                "name (one of them)", i + 1);
        if (hindex && !hid)
            return pl_errprintf(errp, "after: entry %u: an index goes with "
                                "an array's id", i + 1);
        dp->elem = hindex == 1;
        if (hid && dp->id == 0)
            return pl_errprintf(errp, "after: task 0 does not exist");
        if (hname && (!dp->name[0] || !utf8(dp->name)))
            return pl_errprintf(errp, "after: entry %u: a name must be "
                                "non-empty UTF-8", i + 1);
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
    errno = EINVAL;
    if (v[2] == 0)
        return pl_errprintf(errp, "array: the step must be at least 1");
    if (v[1] < v[0])
        return pl_errprintf(errp, "array: the end %llu is below the start "
                            "%llu", (unsigned long long)v[1],
                            (unsigned long long)v[0]);
    if (v[1] > UINT32_MAX)
        return pl_errprintf(errp, "array: indexes go up to %u", UINT32_MAX);
    if ((v[1] - v[0]) / v[2] + 1 > PL_MAX_ARRAY)
        return pl_errprintf(errp, "array: %llu elements; at most %d",
                            (unsigned long long)((v[1] - v[0]) / v[2] + 1),
                            PL_MAX_ARRAY);
    s->array = true;
    s->astart = v[0];
    s->aend = v[1];
    s->astep = v[2];
    return 0;
}

int pl_spec_decode(const msgpack_object *o, struct pl_spec *s,
                   struct pl_error *errp)
{
    int has_ranks = 0;
    int has_retries = 0;

    memset(s, 0, sizeof(*s));
    s->ranks = s->cpr = 1;
    if (o->type != MSGPACK_OBJECT_MAP) {
        errno = EPROTO;
        return pl_errprintf(errp, "a task spec must be a map");
    }
    /* the limits a person may hit, in words before the generic checks */
    const msgpack_object *av = pl_mp_get(o, "argv");
    if (av && av->type == MSGPACK_OBJECT_ARRAY) {
        errno = EINVAL;
        if (av->via.array.size > MAX_ARGV) {
            pl_errprintf(errp, "the command has %u arguments; at most %d",
                         av->via.array.size, MAX_ARGV);
            goto error;
        }
        for (uint32_t i = 0; i < av->via.array.size; i++) {
            if (av->via.array.ptr[i].type == MSGPACK_OBJECT_STR
                && av->via.array.ptr[i].via.str.size > MAX_ARG_LEN) {
                pl_errprintf(errp, "argument %u of the command is longer "
                             "than %d KiB", i, MAX_ARG_LEN / 1024);
                goto error;
            }
        }
    }
    if (pl_mp_strv(o, "argv", true, 1, MAX_ARGV, MAX_ARG_LEN, &s->argv,
                   errp) < 0
        || pl_mp_str(o, "name", false, 256, &s->name, errp) < 0
        || pl_mp_str(o, "cwd", false, PL_PATH_MAX * 4, &s->cwd, errp) < 0
        || pl_mp_strv(o, "env", false, 0, MAX_ENV, MAX_ARG_LEN, &s->env,
                      errp) < 0
        || (has_ranks = pl_mp_uint(o, "ranks", false, 65536, &s->ranks,
                                   errp)) < 0
        || pl_mp_uint(o, "nodes", false, 65536, &s->nodes, errp) < 0
        || pl_mp_uint(o, "ranks_per_node", false, 4096, &s->rpn, errp) < 0
        || pl_mp_bool(o, "exclusive", false, &s->exclusive, errp) < 0
        || pl_mp_str(o, "comm", false, 16, &s->comm, errp) < 0
        || pl_mp_str(o, "launcher", false, 16, &s->launcher, errp) < 0
        || pl_mp_uint(o, "cores_per_rank", false, 4096, &s->cpr, errp) < 0
        || pl_mp_uint(o, "gpus_per_rank", false, 64, &s->gpr, errp) < 0
        || (has_retries = pl_mp_uint(o, "retries", false, 100, &s->retries,
                                     errp)) < 0
        || pl_mp_double(o, "timeout", false, &s->timeout, errp) < 0
        || pl_mp_int(o, "priority", false, &s->priority, errp) < 0
        || pl_mp_strv(o, "tags", false, 0, PL_MAX_TAGS, 512, &s->tags,
                      errp) < 0
        || pl_mp_uint(o, "retry_failed", false, INT64_MAX, &s->retry,
                      errp) < 0
        || after_decode(o, s, errp) < 0 || array_decode(o, s, errp) < 0)
        goto error;
    if (tags_check(s->tags, errp) < 0)
        goto error;
    errno = EINVAL;
    if (!s->argv[0][0]) {
        pl_errprintf(errp, "the command is empty");
        goto error;
    }
    /* N.B. argv and env are kept as JSON (the database, list, show):
     * jansson refuses other bytes, and a string it refused was once
     * dropped from the stored argv, so a task run again from the
     * database ran another command */
    for (size_t i = 0; s->argv[i]; i++) {
        if (!utf8(s->argv[i])) {
            pl_errprintf(errp, "argument %zu of the command is not UTF-8",
                         i);
            goto error;
        }
    }
    for (size_t i = 0; s->env && s->env[i]; i++) {
        if (!utf8(s->env[i])) {
            pl_errprintf(errp, "environment entry %zu is not UTF-8", i);
            goto error;
        }
    }
    if (!utf8(s->name) || !utf8(s->cwd)) {
        pl_errprintf(errp, "the %s is not UTF-8", utf8(s->name) ? "cwd"
                                                                 : "name");
        goto error;
    }
    if (!has_retries)
        s->retries = PL_DEFAULT_RETRIES;
    if (!has_ranks && (s->nodes || s->rpn))
        /* --nodes and --ranks-per-node alone say how many ranks */
        s->ranks = (s->nodes ? s->nodes : 1) * (s->rpn ? s->rpn : 1);
    if (s->ranks == 0) {
        pl_errprintf(errp, "ranks must be at least 1");
        goto error;
    }
    if (s->cpr == 0) {
        pl_errprintf(errp, "cores_per_rank must be at least 1");
        goto error;
    }
    if (s->priority < -PL_MAX_PRIORITY || s->priority > PL_MAX_PRIORITY) {
        pl_errprintf(errp, "priority %lld is out of -%d..%d",
                     (long long)s->priority, PL_MAX_PRIORITY,
                     PL_MAX_PRIORITY);
        goto error;
    }
    if (s->tags && !s->tags[0]) {
        pl_strv_free(s->tags);
        s->tags = NULL;
    }
    if (!isfinite(s->timeout) || s->timeout < 0) {
        pl_errprintf(errp, "timeout must be a positive number of seconds");
        goto error;
    }
    for (size_t i = 0; s->env && s->env[i]; i++) {
        const char *eq = strchr(s->env[i], '=');
        if (!eq || eq == s->env[i]) {
            pl_errprintf(errp, "environment entry '%.40s' is not KEY=VALUE",
                         s->env[i]);
            goto error;
        }
    }
    if (s->env && !s->env[0]) {
        pl_strv_free(s->env);
        s->env = NULL;
    }
    if (s->launcher && strcmp(s->launcher, "srun")
        && strcmp(s->launcher, "mpirun")) {
        pl_errprintf(errp, "unknown launcher '%.20s' (srun or mpirun)",
                     s->launcher);
        goto error;
    }
    if (s->launcher && (!s->comm || strcmp(s->comm, "mpi"))) {
        pl_errprintf(errp, "a launcher is for --comm mpi only");
        goto error;
    }
    if (s->comm && strcmp(s->comm, "none") && strcmp(s->comm, "torch")
        && strcmp(s->comm, "mpi")) {
        pl_errprintf(errp, "unknown comm '%.20s' (none, torch or mpi)",
                     s->comm);
        goto error;
    }
    if (s->nodes && s->rpn && s->ranks > s->nodes * s->rpn) {
        pl_errprintf(errp, "%llu ranks do not fit %llu nodes x %llu ranks "
                     "per node", (unsigned long long)s->ranks,
                     (unsigned long long)s->nodes,
                     (unsigned long long)s->rpn);
        goto error;
    }
    if (s->nodes > s->ranks) {
        pl_errprintf(errp, "--nodes %llu needs at least as many ranks "
                     "(--ranks %llu)", (unsigned long long)s->nodes,
                     (unsigned long long)s->ranks);
        goto error;
    }
    return 0;
error:
    pl_spec_clear(s);
    return -1;
}

void pl_agent_reg_clear(struct pl_agent_reg *r)
{
    int saved = errno;

    free(r->node);
    free(r->cpu);
    pl_strv_free(r->gpus);
    memset(r, 0, sizeof(*r));
    errno = saved;
}

/* A name for the logs, the database and the run entries' 'nodelist' and
 * 'hosts', whose readers refuse commas, colons and spaces: a host name's
 * characters (and Slurm's '_'). */
static bool node_name_ok(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!(*s >= 'a' && *s <= 'z') && !(*s >= 'A' && *s <= 'Z')
            && !(*s >= '0' && *s <= '9') && !strchr("._-", *s))
            return false;
    return true;
}

/* A GPU id goes into comma- and semicolon-joined lists (status, the
 * run entries' 'rank_gpus'): printable, without either. */
static bool gpu_id_ok(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s <= ' ' || *s > '~' || *s == ',' || *s == ';')
            return false;
    return true;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return (x > y) - (x < y);
}

/* Whether the 'n' ids at 'v' are all different (sorts a copy). */
static int unique(const uint64_t *v, uint32_t n, bool *yes)
{
    uint64_t *c = malloc((n ? n : 1) * sizeof(*c));

    if (!c)
        return -1;
    memcpy(c, v, n * sizeof(*c));
    qsort(c, n, sizeof(*c), cmp_u64);
    *yes = true;
    for (uint32_t i = 1; i < n && *yes; i++)
        *yes = c[i] != c[i - 1];
    free(c);
    return 0;
}

int pl_agent_reg_decode(const msgpack_object *body, struct pl_agent_reg *r,
                        struct pl_error *errp)
{
    bool once;

    memset(r, 0, sizeof(*r));
    if (pl_mp_str(body, "node", true, NODE_LEN, &r->node, errp) < 0
        || pl_mp_uint(body, "pid", false, INT32_MAX, &r->pid, errp) < 0
        || pl_mp_uintv(body, "cores", true, MAX_CPUS, MAX_CPU_ID, &r->cpu,
                       &r->ncpu, errp) < 0
        || pl_mp_strv(body, "gpus", false, 0, MAX_GPUS, GPU_ID_LEN, &r->gpus,
                      errp) < 0)
        goto error;
    errno = EPROTO;
    if (!node_name_ok(r->node)) {
        pl_errprintf(errp, "bad node name (want 1..%d of A-Z a-z 0-9 . _ -)",
                     NODE_LEN);
        goto error;
    }
    if (r->ncpu == 0) {
        pl_errprintf(errp, "no cores");
        goto error;
    }
    /* pilotd would place two tasks on a core given twice */
    if (unique(r->cpu, r->ncpu, &once) < 0) {
        pl_errprintf(errp, "out of memory");
        goto error;
    }
    if (!once) {
        errno = EPROTO;
        pl_errprintf(errp, "a CPU id given twice");
        goto error;
    }
    errno = EPROTO;
    for (size_t i = 0; r->gpus && r->gpus[i]; i++) {
        if (!gpu_id_ok(r->gpus[i])) {
            pl_errprintf(errp, "bad GPU id (want printable, no ',' or ';')");
            goto error;
        }
        for (size_t j = 0; j < i; j++) {
            if (!strcmp(r->gpus[i], r->gpus[j])) {
                pl_errprintf(errp, "GPU id '%s' given twice", r->gpus[i]);
                goto error;
            }
        }
    }
    return 0;
error:
    pl_agent_reg_clear(r);
    return -1;
}

void pl_agent_event_clear(struct pl_agent_event *e)
{
    int saved = errno;

    free(e->state);
    free(e->error);
    memset(e, 0, sizeof(*e));
    errno = saved;
}

int pl_agent_event_decode(const msgpack_object *ev, struct pl_agent_event *e,
                          struct pl_error *errp)
{
    int has_rss = 0;

    memset(e, 0, sizeof(*e));
    e->exit_code = e->signal = -1;
    if (ev->type != MSGPACK_OBJECT_MAP) {
        errno = EPROTO;
        return pl_errprintf(errp, "not a map");
    }
    if (pl_mp_uint(ev, "id", true, UINT64_MAX, &e->id, errp) < 0
        || pl_mp_uint(ev, "attempt", true, UINT32_MAX, &e->attempt, errp) < 0
        || pl_mp_uint(ev, "rank", false, UINT32_MAX, &e->rank, errp) < 0
        || pl_mp_str(ev, "state", true, 16, &e->state, errp) < 0
        || pl_mp_double(ev, "time", false, &e->time, errp) < 0
        || pl_mp_int(ev, "exit_code", false, &e->exit_code, errp) < 0
        || pl_mp_int(ev, "signal", false, &e->signal, errp) < 0
        || (has_rss = pl_mp_uint(ev, "maxrss_kb", false, INT64_MAX,
                                 &e->maxrss_kb, errp)) < 0
        || pl_mp_str(ev, "error", false, 1024, &e->error, errp) < 0) {
        pl_agent_event_clear(e);
        return -1;
    }
    e->has_rss = has_rss == 1;
    return 0;
}
