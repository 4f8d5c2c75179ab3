/* client/spec_set.c - the setters a task spec is built through, the same
 * for a flag (spec.c) and a task file's entry: copies, counts, the
 * command, a pool task's function, the cwd, KEY=VALUE lists, --array and
 * --after */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/spec.h"
#include "client/spec_private.h"
#include "proto/strv.h"

/* *dst = a copy of 'v' (the old one freed). */
int spec_set_str(char **dst, const char *v, struct pl_error *errp)
{
    char *c = strdup(v);

    if (!c)
        return spec_nomem(errp);
    free(*dst);
    *dst = c;
    return 0;
}

void spec_set_uint(struct pl_spec *s, int id, uint64_t v)
{
    switch (id) {
    case F_RANKS:
        s->ranks = v;
        s->has_ranks = true;
        break;
    case F_NODES:
        s->nodes = v;
        break;
    case F_RPN:
        s->rpn = v;
        break;
    case F_CPR:
        s->cpr = v;
        break;
    case F_GPR:
        s->gpr = v;
        break;
    case F_RETRIES:
        s->retries = v;
        s->has_retries = true;
        break;
    case F_RETRY:
        s->retry = v;
        break;
    }
}

/* Append a copy of 'kv' to the vector *v of *n entries (NULL-terminated,
 * room for *cap). */
int spec_strv_add(char ***v, size_t *n, size_t *cap, const char *kv,
                  struct pl_error *errp)
{
    char *c;

    /* +2: the new entry and the NULL after it */
    if (pl_grow(v, cap, *n, 2, sizeof(**v)) < 0 || !(c = strdup(kv)))
        return spec_nomem(errp);
    (*v)[(*n)++] = c;
    (*v)[*n] = NULL;
    return 0;
}

/* The command: a copy of argv[0..argc-1], each of it UTF-8. */
int spec_set_argv(struct pl_spec *s, int argc, char *const *argv,
                  struct pl_error *errp)
{
    char **v;

    for (int i = 0; i < argc; i++)
        if (!pl_utf8_str(argv[i]))
            return pl_errset(errp, EINVAL, "argument %d of the command is not "
                             "valid UTF-8", i);
    if (!(v = calloc((size_t)argc + 1, sizeof(*v))))
        return spec_nomem(errp);
    for (int i = 0; i < argc; i++)
        if (!(v[i] = strdup(argv[i]))) {
            pl_strv_free(v);
            return spec_nomem(errp);
        }
    pl_strv_free(s->argv);
    s->argv = v;
    return 0;
}

/* A pool task's function, --fn or --py 'arg' ('fn': PL_FN_C or _PY). */
int spec_set_fn(struct pl_cli_spec *b, int fn, const char *key,
                const char *arg, struct pl_error *errp)
{
    if (b->fn_name && b->spec.fn != fn)
        return pl_errset(errp, EINVAL, "give --fn or --py, not both");
    if (!*arg || strlen(arg) > PL_SPEC_MAX_ARG || !pl_utf8_str(arg))
        return pl_errset(errp, EINVAL, "%s: want %s", key,
                         fn == PL_FN_C ? "LIB.so:SYMBOL" : "MODULE:FUNCTION");
    b->spec.fn = fn;
    return spec_set_str(&b->fn_name, arg, errp);
}

/* A pool task's argv: its function first, then its arguments. */
int spec_fn_first(struct pl_cli_spec *b, struct pl_error *errp)
{
    struct pl_spec *s = &b->spec;
    size_t n = pl_strv_len(s->argv);
    char **v;

    if (!b->fn_name)
        return 0;
    if (!(v = calloc(n + 2, sizeof(*v))))
        return spec_nomem(errp);
    v[0] = b->fn_name;
    b->fn_name = NULL;
    memcpy(v + 1, s->argv ? s->argv : v + 1, n * sizeof(*v));
    free(s->argv); /* its strings are v's now */
    s->argv = v;
    return 0;
}

int spec_set_pool(struct pl_spec *s, const char *key, const char *arg,
                  struct pl_error *errp)
{
    if (!pl_pool_name_ok(arg))
        return pl_errset(errp, EINVAL, "%s: '%.64s' is not a pool's name "
                         "(1 to %d of A-Z a-z 0-9 _ . -)", key, arg,
                         PL_POOL_NAME_MAX);
    return spec_set_str(&s->pool, arg, errp);
}

/* 'dir' as the task's cwd: as it is when absolute, else in 'here' (the
 * task runs elsewhere: a relative directory means this one's); NULL
 * means 'here'. */
int spec_set_cwd(struct pl_spec *s, const char *here, const char *dir,
                 struct pl_error *errp)
{
    char *c;
    int n;

    if (dir && dir[0] == '/')
        return spec_set_str(&s->cwd, dir, errp);
    n = dir ? asprintf(&c, "%s/%s", here, dir) : asprintf(&c, "%s", here);
    if (n < 0)
        return spec_nomem(errp);
    free(s->cwd);
    s->cwd = c;
    return 0;
}

/* "KEY=VALUE" with a non-empty KEY. */
bool spec_env_ok(const char *s)
{
    const char *eq = strchr(s, '=');

    return eq && eq != s;
}

/* "KEY=VALUE" with a tag key (pl_spec_tag_key()) and a VALUE of at most
 * PL_SPEC_MAX_TAG_VALUE bytes; the rest is pl_spec_check()'s. */
bool spec_tag_ok(const char *s)
{
    size_t k = pl_spec_tag_key(s);

    return k > 0 && s[k] == '=' && strlen(s + k + 1) <= PL_SPEC_MAX_TAG_VALUE;
}

/* A decimal number at *p (digits only), moving *p past it. */
static bool read_num(const char **p, unsigned long long *v)
{
    char *end;

    if (**p < '0' || **p > '9')
        return false;
    errno = 0;
    *v = strtoull(*p, &end, 10);
    *p = end;
    return errno == 0;
}

/* "A-B[:STEP]": the task is an array of those indexes. */
int spec_set_array(struct pl_spec *s, const char *text,
                   struct pl_error *errp)
{
    unsigned long long a, b, step = 1;
    const char *p = text;

    if (!read_num(&p, &a) || *p++ != '-' || !read_num(&p, &b)
        || (*p == ':' && (p++, !read_num(&p, &step))) || *p)
        return pl_errset(errp, EINVAL, "--array: '%s' is not A-B or A-B:STEP",
                         text);
    if (step == 0)
        return pl_errset(errp, EINVAL, "--array: the step must be at least 1");
    if (b < a)
        return pl_errset(errp, EINVAL, "--array: %llu-%llu ends before it "
                         "starts", a, b);
    if (b > PL_SPEC_MAX_INDEX)
        return pl_errset(errp, EINVAL, "--array: indexes go up to %u",
                         PL_SPEC_MAX_INDEX);
    if ((b - a) / step + 1 > PL_SPEC_MAX_ARRAY)
        return pl_errset(errp, EINVAL, "--array: %llu tasks; at most %d",
                         (b - a) / step + 1, PL_SPEC_MAX_ARRAY);
    s->array = true;
    s->astart = a;
    s->aend = b;
    s->astep = step;
    return 0;
}

/* One entry of --after, 'item' (ID, ID.N or NAME, without its ":ok" or
 * ":any"), into *d; d->name is allocated. */
static int parse_dep(const char *item, struct pl_dep *d,
                     struct pl_error *errp)
{
    size_t digits = strspn(item, "0123456789");
    const char *dot = item + digits;
    unsigned long long id, idx;

    if (!*dot) {
        errno = 0;
        id = strtoull(item, NULL, 10);
        if (errno || id == 0)
            return pl_errset(errp, EINVAL, "--after: '%s' is not a task id",
                             item);
        d->id = id;
        return 0;
    }
    if (digits > 0 && *dot == '.' && dot[1] >= '0' && dot[1] <= '9'
        && !dot[1 + strspn(dot + 1, "0123456789")]) {
        /* ID.N: element N of array ID */
        errno = 0;
        id = strtoull(item, NULL, 10);
        idx = strtoull(dot + 1, NULL, 10);
        if (errno || id == 0 || idx > PL_SPEC_MAX_INDEX)
            return pl_errset(errp, EINVAL, "--after: '%s' is not an array "
                             "element (ID.N)", item);
        d->id = id;
        d->elem = true;
        d->index = idx;
        return 0;
    }
    if (!pl_utf8_str(item))
        return pl_errset(errp, EINVAL, "--after: '%s' is not UTF-8", item);
    if (!(d->name = strdup(item)))
        return spec_nomem(errp);
    return 0;
}

/* "ID[:ok|:any],ID.N,NAME..." added to the spec's dependencies. */
int spec_add_after(struct pl_cli_spec *b, const char *text,
                   struct pl_error *errp)
{
    struct pl_spec *s = &b->spec;

    for (const char *p = text; *p;) {
        size_t n = strcspn(p, ",");
        char item[300], *colon;
        struct pl_dep d = { 0 };
        if (n == 0 || n >= sizeof(item))
            return pl_errset(errp, EINVAL, "--after: '%s': %s", text,
                             n ? "an entry is too long" : "an empty entry");
        memcpy(item, p, n);
        item[n] = '\0';
        colon = strrchr(item, ':');
        if (colon && (!strcmp(colon, ":any") || !strcmp(colon, ":ok"))) {
            d.any = !strcmp(colon, ":any");
            *colon = '\0';
        }
        if (!item[0])
            return pl_errset(errp, EINVAL, "--after: '%s': an entry without a "
                             "task", text);
        if (parse_dep(item, &d, errp) < 0)
            return -1;
        if (s->nafter >= PL_SPEC_MAX_AFTER) {
            free(d.name);
            return pl_errset(errp, EINVAL, "--after: more than %d tasks",
                             PL_SPEC_MAX_AFTER);
        }
        if (pl_grow(&s->after, &b->aftercap, s->nafter, 1, sizeof(d)) < 0) {
            free(d.name);
            return spec_nomem(errp);
        }
        s->after[s->nafter++] = d;
        p += n;
        if (*p == ',')
            p++;
    }
    if (s->nafter == 0)
        return pl_errset(errp, EINVAL, "--after: no task given");
    return 0;
}
