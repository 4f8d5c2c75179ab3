/* client/spec.c - the task spec pilot submit builds, from flags or a file
 * (the setters both go through: spec_set.c) */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/parse.h"
#include "client/spec.h"
#include "client/spec_private.h"
#include "client/spec_py.h"
#include "proto/strv.h"

static const struct {
    int id;
    const char *flag;   /* the long option without "--", or NULL */
    const char *key;    /* a file entry's key, or NULL */
    uint64_t min, max;  /* an integer flag's range */
} fields[] = {
    { F_ARGV, NULL, "argv", 0, 0 },
    { F_CMD, NULL, "cmd", 0, 0 },
    { F_NAME, "name", "name", 0, 0 },
    { F_CWD, "cwd", "cwd", 0, 0 },
    { F_RANKS, "ranks", "ranks", 1, PL_SPEC_MAX_RANKS },
    { F_NODES, "nodes", "nodes", 1, PL_SPEC_MAX_NODES },
    { F_RPN, "ranks-per-node", "ranks_per_node", 1, PL_SPEC_MAX_RPN },
    { F_CPR, "cores-per-rank", "cores_per_rank", 1, PL_SPEC_MAX_CPR },
    { F_GPR, "gpus-per-rank", "gpus_per_rank", 0, PL_SPEC_MAX_GPR },
    { F_RETRIES, "retries", "retries", 0, PL_SPEC_MAX_RETRIES },
    { F_RETRY, "retry-failed", NULL, 1, INT64_MAX },
    { F_TIMEOUT, "timeout", "timeout", 0, 0 },
    { F_EXCLUSIVE, "exclusive", "exclusive", 0, 0 },
    { F_COMM, "comm", "comm", 0, 0 },
    { F_LAUNCHER, "launcher", "launcher", 0, 0 },
    { F_ENV, "env", "env", 0, 0 },
    { F_AFTER, "after", "after", 0, 0 },
    { F_ARRAY, "array", "array", 0, 0 },
    { F_PRIORITY, "priority", "priority", 0, 0 },
    { F_TAG, "tag", "tags", 0, 0 },
    { F_OUTPUT_LIMIT, "output-limit", "output_limit", 0, 0 },
    { F_OUTPUT, "output", "output", 0, 0 },
    { F_VETTED, "vetted", "vetted", 0, 0 },
    { F_POOL, "pool", "pool", 0, 0 },
    { F_FN, "fn", "fn", 0, 0 },
    { F_PY, "py", "py", 0, 0 },
    /* a Python call's (client/spec_py.c) */
    { F_PYCALL, NULL, "py_call", 0, 0 },
    { F_PYCALL, NULL, "input", 0, 0 },
    { F_PYCALL, NULL, "input_file", 0, 0 },
    { F_PYCALL, NULL, "py_prelude", 0, 0 },
    { F_PYCALL, NULL, "python", 0, 0 },
    { F_PYCALL, NULL, "refs", 0, 0 },
};
#define NFIELDS (sizeof(fields) / sizeof(fields[0]))

/* The index in fields[] of flag or key 'name', or -1. */
static int lookup(const char *name, bool flag)
{
    for (size_t i = 0; i < NFIELDS; i++) {
        const char *n = flag ? fields[i].flag : fields[i].key;
        if (n && !strcmp(n, name))
            return (int)i;
    }
    return -1;
}

int spec_nomem(struct pl_error *errp)
{
    errno = ENOMEM;
    return pl_errprintf(errp, "out of memory");
}

void pl_cli_spec_init(struct pl_cli_spec *b)
{
    memset(b, 0, sizeof(*b));
    pl_spec_init(&b->spec);
}

void pl_cli_spec_clear(struct pl_cli_spec *b)
{
    pl_spec_clear(&b->spec); /* preserves errno */
    free(b->fn_name);
    memset(b, 0, sizeof(*b));
}

void pl_cli_spec_take(struct pl_cli_spec *b, struct pl_spec *s)
{
    *s = b->spec;
    free(b->fn_name);
    pl_cli_spec_init(b);
}

/* ------------------------------------------------------------ flags */

/* "N" in -PL_SPEC_MAX_PRIORITY..PL_SPEC_MAX_PRIORITY. */
static int parse_priority(const char *s, int64_t *v, struct pl_error *errp)
{
    char *end;
    long long x;

    errno = 0;
    x = strtoll(s, &end, 10);
    if (errno || end == s || *end || x < -PL_SPEC_MAX_PRIORITY
        || x > PL_SPEC_MAX_PRIORITY)
        return pl_errset(errp, EINVAL, "--priority: '%s' is not an integer in "
                         "-%d..%d", s, PL_SPEC_MAX_PRIORITY,
                         PL_SPEC_MAX_PRIORITY);
    *v = x;
    return 0;
}

/* --env and --tag: KEY=VALUE, within the count, UTF-8. */
static int flag_env(struct pl_cli_spec *b, const char *arg,
                    struct pl_error *errp)
{
    if (!spec_env_ok(arg))
        return pl_errset(errp, EINVAL, "--env: '%s' is not KEY=VALUE", arg);
    if (b->nenv >= PL_SPEC_MAX_ENV)
        return pl_errset(errp, EINVAL, "--env: more than %d variables",
                         PL_SPEC_MAX_ENV);
    if (!pl_utf8_str(arg))
        return pl_errset(errp, EINVAL, "--env: '%s' is not valid UTF-8", arg);
    return spec_strv_add(&b->spec.env, &b->nenv, &b->envcap, arg, errp);
}

static int flag_tag(struct pl_cli_spec *b, const char *arg,
                    struct pl_error *errp)
{
    if (!spec_tag_ok(arg))
        return pl_errset(errp, EINVAL, "--tag: '%s' is not KEY=VALUE (KEY: "
                         "1-%d letters, digits, '_', '.', '-'; VALUE: at most "
                         "%d bytes)", arg, PL_SPEC_MAX_TAG_KEY,
                         PL_SPEC_MAX_TAG_VALUE);
    if (b->ntags >= PL_SPEC_MAX_TAGS)
        return pl_errset(errp, EINVAL, "--tag: more than %d", PL_SPEC_MAX_TAGS);
    if (!pl_utf8_str(arg))
        return pl_errset(errp, EINVAL, "--tag: '%s' is not valid UTF-8", arg);
    return spec_strv_add(&b->spec.tags, &b->ntags, &b->tagcap, arg, errp);
}

int pl_cli_spec_flag(struct pl_cli_spec *b, const char *name,
                     const char *arg, struct pl_error *errp)
{
    struct pl_spec *s = &b->spec;
    int f = lookup(name, true), k;
    char what[32];
    uint64_t v;

    assert(f >= 0); /* pilot submit's options are ours */
    if (fields[f].max) {
        snprintf(what, sizeof(what), "--%s", name);
        if (pl_parse_uint(what, arg, fields[f].min, fields[f].max, &v,
                          errp) < 0)
            return -1;
        spec_set_uint(s, fields[f].id, v);
        return 0;
    }
    switch (fields[f].id) {
    case F_NAME:
        if (strlen(arg) > PL_SPEC_MAX_NAME)
            return pl_errset(errp, EINVAL, "--name: longer than %d bytes",
                             PL_SPEC_MAX_NAME);
        return spec_set_str(&s->name, arg, errp);
    case F_CWD:
        if (!*arg)
            return pl_errset(errp, EINVAL, "--cwd: empty directory");
        return spec_set_str(&s->cwd, arg, errp); /* pl_cli_spec_command() */
    case F_TIMEOUT:
        return pl_parse_secs("--timeout", arg, &s->timeout, errp);
    case F_OUTPUT_LIMIT:
        return pl_parse_size("--output-limit", arg, PL_SPEC_MAX_OUTPUT,
                             &s->output_limit, errp);
    case F_EXCLUSIVE:
        s->exclusive = true;
        return 0;
    case F_COMM:
        if ((k = pl_comm_parse(arg)) < 0)
            return pl_errset(errp, EINVAL, "--comm: '%s' is not none, torch or "
                             "mpi", arg);
        s->comm = k;
        return 0;
    case F_LAUNCHER:
        if ((k = pl_launcher_parse(arg)) < 0)
            return pl_errset(errp, EINVAL, "--launcher: '%s' is not srun or "
                             "mpirun", arg);
        s->launcher = k;
        return 0;
    case F_ENV:
        return flag_env(b, arg, errp);
    case F_OUTPUT:
        return pl_cli_spec_output(b, "--output", arg, errp);
    case F_AFTER:
        return spec_add_after(b, arg, errp);
    case F_ARRAY:
        return spec_set_array(s, arg, errp);
    case F_PRIORITY:
        return parse_priority(arg, &s->priority, errp);
    case F_VETTED:
        /* --vetted alone: the default window */
        if (!arg) {
            s->vetted = PL_SPEC_VETTED_DEFAULT;
            return 0;
        }
        return pl_parse_uint("--vetted", arg, 1, PL_SPEC_MAX_VETTED,
                             &s->vetted, errp);
    case F_TAG:
        return flag_tag(b, arg, errp);
    case F_POOL:
        return spec_set_pool(s, "--pool", arg, errp);
    case F_FN:
        return spec_set_fn(b, PL_FN_C, "--fn", arg, errp);
    case F_PY:
        return spec_set_fn(b, PL_FN_PY, "--py", arg, errp);
    }
    return 0;
}

int pl_cli_spec_counts(const struct pl_cli_spec *b, struct pl_error *errp)
{
    unsigned long long nodes = b->spec.nodes, rpn = b->spec.rpn;
    unsigned long long ranks = b->spec.ranks;

    if (!nodes && !rpn)
        return 0;
    if (!b->spec.has_ranks) {
        /* at most 2^16 (nodes) x 2^12 (ranks per node): no overflow */
        if ((nodes ? nodes : 1) * (rpn ? rpn : 1) > PL_SPEC_MAX_RANKS)
            return pl_errset(errp, EINVAL, "--nodes %llu x --ranks-per-node "
                             "%llu is more than %d ranks", nodes, rpn,
                             PL_SPEC_MAX_RANKS);
        return 0;
    }
    if (nodes && rpn && ranks != nodes * rpn)
        return pl_errset(errp, EINVAL, "--ranks %llu does not match --nodes "
                         "%llu x --ranks-per-node %llu", ranks, nodes, rpn);
    if (nodes && ranks < nodes)
        return pl_errset(errp, EINVAL, "--ranks %llu is fewer than --nodes "
                         "%llu (each node needs a rank)", ranks, nodes);
    return 0;
}

int pl_cli_spec_command(struct pl_cli_spec *b, int argc, char *const *argv,
                        struct pl_error *errp)
{
    struct pl_spec *s = &b->spec;
    char here[PATH_MAX];

    if (!s->cwd || s->cwd[0] != '/') {
        if (!getcwd(here, sizeof(here)))
            return pl_errprintf(errp, "cannot get the current directory: %s "
                                "(use --cwd DIR)", strerror(errno));
        if (spec_set_cwd(s, here, s->cwd, errp) < 0)
            return -1;
    }
    if (strlen(s->cwd) > PL_SPEC_MAX_CWD) {
        errno = ENAMETOOLONG;
        return pl_errprintf(errp, "--cwd: path too long");
    }
    if (spec_set_argv(s, argc, argv, errp) < 0)
        return -1;
    return spec_fn_first(b, errp);
}

/* ------------------------------------------------------------ entries */

static int wrong(const char *key, struct pl_error *errp)
{
    return pl_errset(errp, EINVAL, "field '%.40s' has the wrong type or value",
                     key);
}

/* An entry's env or tags, {"K": V} (V a string or a number) or ["K=V"],
 * each "K=V" passing 'ok', added to the vector *v of *n. */
static int kv_list(const char *key, const json_t *val,
                   bool (*ok)(const char *), char ***v, size_t *n,
                   size_t *cap, struct pl_error *errp)
{
    const char *k;
    json_t *x;
    size_t i;

    if (json_is_array(val)) {
        json_array_foreach(val, i, x) {
            if (!json_is_string(x) || !ok(json_string_value(x)))
                return wrong(key, errp);
            if (spec_strv_add(v, n, cap, json_string_value(x), errp) < 0)
                return -1;
        }
        return 0;
    }
    if (!json_is_object(val))
        return wrong(key, errp);
    json_object_foreach((json_t *)val, k, x) {
        char *kv;
        int len, rc;
        if (!*k || strchr(k, '='))
            return wrong(key, errp);
        if (json_is_string(x))
            len = asprintf(&kv, "%s=%s", k, json_string_value(x));
        else if (json_is_integer(x))
            len = asprintf(&kv, "%s=%lld", k,
                           (long long)json_integer_value(x));
        else if (json_is_real(x))
            len = asprintf(&kv, "%s=%g", k, json_real_value(x));
        else
            return wrong(key, errp);
        if (len < 0)
            return spec_nomem(errp);
        rc = ok(kv) ? spec_strv_add(v, n, cap, kv, errp) : wrong(key, errp);
        free(kv);
        if (rc < 0)
            return -1;
    }
    return 0;
}

/* An entry's "after": a string as --after takes it, or a list of those
 * and of task ids. */
static int entry_after(struct pl_cli_spec *b, const json_t *v,
                       struct pl_error *errp)
{
    json_t *x;
    size_t i;

    if (json_is_string(v))
        return spec_add_after(b, json_string_value(v), errp);
    if (!json_is_array(v))
        return wrong("after", errp);
    json_array_foreach(v, i, x) {
        char id[32];
        const char *t = id;
        if (json_is_integer(x) && json_integer_value(x) > 0)
            snprintf(id, sizeof(id), "%lld", (long long)json_integer_value(x));
        else if (json_is_string(x))
            t = json_string_value(x);
        else
            return wrong("after", errp);
        if (spec_add_after(b, t, errp) < 0)
            return -1;
    }
    return 0;
}

/* An entry's "array": "A-B[:STEP]" as --array takes it, or [A, B, STEP]. */
static int entry_array(struct pl_spec *s, const json_t *v,
                       struct pl_error *errp)
{
    char text[96];

    if (json_is_string(v))
        return spec_set_array(s, json_string_value(v), errp);
    if (json_array_size(v) != 3 || !json_is_integer(json_array_get(v, 0))
        || !json_is_integer(json_array_get(v, 1))
        || !json_is_integer(json_array_get(v, 2)))
        return wrong("array", errp);
    /* as text, so that a negative number is refused as it is there */
    snprintf(text, sizeof(text), "%lld-%lld:%lld",
             (long long)json_integer_value(json_array_get(v, 0)),
             (long long)json_integer_value(json_array_get(v, 1)),
             (long long)json_integer_value(json_array_get(v, 2)));
    return spec_set_array(s, text, errp);
}

/* An entry's "argv": a list of strings, empty only for a function's
 * arguments (py_call: none; checked once every key is read). */
static int entry_argv(struct pl_spec *s, const json_t *v,
                      struct pl_error *errp)
{
    size_t n = json_array_size(v);
    char **argv;

    if (!json_is_array(v))
        return wrong("argv", errp);
    for (size_t i = 0; i < n; i++)
        if (!json_is_string(json_array_get(v, i)))
            return wrong("argv", errp);
    if (!(argv = calloc(n + 1, sizeof(*argv))))
        return spec_nomem(errp);
    for (size_t i = 0; i < n; i++)
        if (!(argv[i] = strdup(json_string_value(json_array_get(v, i))))) {
            pl_strv_free(argv);
            return spec_nomem(errp);
        }
    pl_strv_free(s->argv);
    s->argv = argv;
    return 0;
}

/* An entry's string field 'key', into *dst. */
static int entry_str(const char *key, const json_t *v, char **dst,
                     struct pl_error *errp)
{
    if (!json_is_string(v))
        return wrong(key, errp);
    return spec_set_str(dst, json_string_value(v), errp);
}

/* comm or launcher: a name 'parse' knows.  N.B. the text of an unknown
 * one is pilotd's (pl_spec_decode()), which used to be the one to say. */
static int entry_enum(const char *key, const json_t *v,
                      int (*parse)(const char *), const char *names,
                      int *dst, struct pl_error *errp)
{
    int k;

    if (!json_is_string(v))
        return wrong(key, errp);
    if ((k = parse(json_string_value(v))) < 0)
        return pl_errset(errp, EINVAL, "unknown %s '%.20s' (%s)", key,
                         json_string_value(v), names);
    *dst = k;
    return 0;
}

/* The entry's 'key', 'v', in 'b'; of integers only the type is checked:
 * their ranges are pl_spec_check()'s. */
static int entry_field(struct pl_cli_spec *b, const char *key,
                       const json_t *v, const char *here,
                       struct pl_error *errp)
{
    struct pl_spec *s = &b->spec;
    int f = lookup(key, false);
    double secs;

    if (f < 0)
        return pl_errset(errp, EINVAL, "unknown field '%.40s'", key);
    if (fields[f].max) {
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return wrong(key, errp);
        spec_set_uint(s, fields[f].id, (uint64_t)json_integer_value(v));
        return 0;
    }
    switch (fields[f].id) {
    case F_ARGV:
        return entry_argv(s, v, errp);
    case F_CMD: {
        char *sh[] = { (char *)"/bin/sh", (char *)"-c",
                       (char *)json_string_value(v), NULL };
        return json_is_string(v) ? spec_set_argv(s, 3, sh, errp)
                                 : wrong(key, errp);
    }
    case F_NAME:
        return entry_str(key, v, &s->name, errp);
    case F_COMM:
        return entry_enum(key, v, pl_comm_parse, "none, torch or mpi",
                          &s->comm, errp);
    case F_LAUNCHER:
        return entry_enum(key, v, pl_launcher_parse, "srun or mpirun",
                          &s->launcher, errp);
    case F_CWD:
        if (!json_is_string(v) || !json_string_length(v))
            return wrong(key, errp);
        return spec_set_cwd(s, here, json_string_value(v), errp);
    case F_EXCLUSIVE:
        if (!json_is_boolean(v))
            return wrong(key, errp);
        s->exclusive = json_is_true(v);
        return 0;
    case F_VETTED:
        /* true: the default window; a number: minutes; false: any node */
        if (json_is_boolean(v))
            s->vetted = json_is_true(v) ? PL_SPEC_VETTED_DEFAULT : 0;
        else if (json_is_integer(v) && json_integer_value(v) >= 1
                 && json_integer_value(v) <= PL_SPEC_MAX_VETTED)
            s->vetted = (uint64_t)json_integer_value(v);
        else
            return wrong(key, errp);
        return 0;
    case F_PRIORITY:
        if (!json_is_integer(v) || json_integer_value(v) < -PL_SPEC_MAX_PRIORITY
            || json_integer_value(v) > PL_SPEC_MAX_PRIORITY)
            return wrong(key, errp);
        s->priority = json_integer_value(v);
        return 0;
    case F_OUTPUT_LIMIT:
        if (json_is_integer(v) && json_integer_value(v) > 0
            && (uint64_t)json_integer_value(v) <= PL_SPEC_MAX_OUTPUT)
            s->output_limit = (uint64_t)json_integer_value(v);
        else if (!json_is_string(v)
                 || pl_parse_size(key, json_string_value(v),
                                  PL_SPEC_MAX_OUTPUT, &s->output_limit,
                                  NULL) < 0)
            return wrong(key, errp);
        return 0;
    case F_TIMEOUT:
        if (json_is_number(v) && json_number_value(v) >= 0)
            secs = json_number_value(v);
        else if (!json_is_string(v)
                 || pl_parse_secs(key, json_string_value(v), &secs,
                                  NULL) < 0)
            return wrong(key, errp);
        s->timeout = secs;
        return 0;
    case F_ENV:
        return kv_list(key, v, spec_env_ok, &s->env, &b->nenv, &b->envcap,
                       errp);
    case F_OUTPUT:
        return json_is_string(v)
                   ? pl_cli_spec_output(b, key, json_string_value(v), errp)
                   : wrong(key, errp);
    case F_TAG:
        if (kv_list(key, v, spec_tag_ok, &s->tags, &b->ntags, &b->tagcap, errp)
            < 0)
            return -1;
        return b->ntags > PL_SPEC_MAX_TAGS ? wrong(key, errp) : 0;
    case F_AFTER:
        return entry_after(b, v, errp);
    case F_ARRAY:
        return entry_array(s, v, errp);
    case F_POOL:
        return json_is_string(v)
                   ? spec_set_pool(s, key, json_string_value(v), errp)
                   : wrong(key, errp);
    case F_FN:
    case F_PY:
        return json_is_string(v)
                   ? spec_set_fn(b, fields[f].id == F_FN ? PL_FN_C
                                                         : PL_FN_PY,
                                 key, json_string_value(v), errp)
                   : wrong(key, errp);
    case F_PYCALL:
        return pl_cli_spec_py_entry(b, key, v, here, errp);
    }
    return 0;
}

int pl_cli_spec_entry(struct pl_cli_spec *b, const json_t *entry,
                      const char *here, struct pl_error *errp)
{
    const char *key;
    json_t *v;

    if (!json_is_object(entry))
        return pl_errset(errp, EINVAL, "not a JSON object");
    json_object_foreach((json_t *)entry, key, v)
        if (entry_field(b, key, v, here, errp) < 0)
            return -1;
    if (b->spec.argv && !b->spec.argv[0] && !b->fn_name)
        return wrong("argv", errp); /* no function to take no arguments */
    if (pl_cli_spec_py_done(b, entry, errp) < 0)
        return -1;
    if (b->fn_name && !b->spec.argv
        && spec_set_argv(&b->spec, 0, NULL, errp) < 0)
        return -1;
    if (spec_fn_first(b, errp) < 0)
        return -1;
    if (!b->spec.argv)
        return pl_errset(errp, EINVAL, "no command: give argv (a list) or cmd "
                         "(a shell line)");
    if (json_object_get(entry, "argv") && json_object_get(entry, "cmd"))
        return pl_errset(errp, EINVAL, "argv and cmd: give one of them");
    return b->spec.cwd ? 0 : spec_set_cwd(&b->spec, here, NULL, errp);
}
