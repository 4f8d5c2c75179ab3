/* agent/env.c - a task's environment: a copy of ours, with overrides
 *
 * A task's environment is ours, then its spec's variables, then its own
 * (PILOT_TASK_ID, the ranks, the binding).  The first two are the same
 * for every task of a spec, so they are built once (pl_env_cache) and a
 * task's environment borrows their strings (pl_env_new_borrow()): no
 * copy of the agent's whole environment a task (issue 16).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/env.h"

struct pl_env {
    char **v;   /* NULL-terminated */
    bool *own;  /* per entry: v[i] is ours to free; NULL: all are */
    size_t n;   /* entries, not counting the NULL */
    size_t cap; /* slots in v (and own), counting the NULL */
};

static bool owned(const struct pl_env *e, size_t i)
{
    return !e->own || e->own[i];
}

void pl_env_free(struct pl_env *e)
{
    if (e) {
        int saved = errno;
        for (size_t i = 0; i < e->n; i++)
            if (owned(e, i))
                free(e->v[i]);
        free(e->v);
        free(e->own);
        free(e);
        errno = saved;
    }
}

/* Room for one more entry and the NULL. */
static int grow(struct pl_env *e)
{
    if (e->n + 1 < e->cap)
        return 0;
    size_t cap = e->cap ? e->cap * 2 : 64;
    char **v = realloc(e->v, cap * sizeof(*v));
    if (!v)
        return -1;
    e->v = v;
    if (e->own) {
        bool *own = realloc(e->own, cap * sizeof(*own));
        if (!own)
            return -1; /* N.B. 'v' grown alone is harmless: cap unchanged */
        e->own = own;
    }
    e->cap = cap;
    return 0;
}

struct pl_env *pl_env_new_borrow(const struct pl_env *tmpl)
{
    struct pl_env *e;
    size_t cap = tmpl->n + 16;

    if (!(e = calloc(1, sizeof(*e))) || !(e->v = malloc(cap * sizeof(*e->v)))
        || !(e->own = calloc(cap, sizeof(*e->own)))) {
        pl_env_free(e);
        errno = ENOMEM;
        return NULL;
    }
    memcpy(e->v, tmpl->v, (tmpl->n + 1) * sizeof(*e->v));
    e->n = tmpl->n;
    e->cap = cap;
    return e;
}

struct pl_env *pl_env_new(char *const *base)
{
    struct pl_env *e;

    if (!(e = calloc(1, sizeof(*e))) || grow(e) < 0)
        goto error;
    e->v[0] = NULL;
    /* N.B. no duplicate check here: keys in environ are unique in practice,
     * and a quadratic copy per spawn would cost more than it is worth. */
    for (size_t i = 0; base && base[i]; i++) {
        const char *eq = strchr(base[i], '=');
        if (!eq || eq == base[i])
            continue;
        if (grow(e) < 0 || !(e->v[e->n] = strdup(base[i])))
            goto error;
        e->v[++e->n] = NULL;
    }
    return e;
error:
    pl_env_free(e);
    errno = ENOMEM;
    return NULL;
}

/* The index of the entry for the 'klen' bytes at 'key', or -1. */
static long find(const struct pl_env *e, const char *key, size_t klen)
{
    for (size_t i = 0; i < e->n; i++)
        if (!strncmp(e->v[i], key, klen) && e->v[i][klen] == '=')
            return (long)i;
    return -1;
}

/* Store 'kv' ("KEY=VALUE" with a key of 'klen' bytes) in 'e'; on success
 * 'e' owns it, on failure it is freed. */
static int store(struct pl_env *e, char *kv, size_t klen)
{
    long i = find(e, kv, klen);

    if (i >= 0) {
        if (owned(e, (size_t)i))
            free(e->v[i]);
        e->v[i] = kv;
        if (e->own)
            e->own[i] = true;
        return 0;
    }
    if (grow(e) < 0) {
        free(kv);
        errno = ENOMEM;
        return -1;
    }
    if (e->own)
        e->own[e->n] = true;
    e->v[e->n++] = kv;
    e->v[e->n] = NULL;
    return 0;
}

int pl_env_put(struct pl_env *e, const char *kv)
{
    const char *eq = strchr(kv, '=');
    char *copy;

    if (!eq || eq == kv) {
        errno = EINVAL;
        return -1;
    }
    if (!(copy = strdup(kv)))
        return -1;
    return store(e, copy, (size_t)(eq - kv));
}

int pl_env_set(struct pl_env *e, const char *key, const char *val)
{
    size_t klen = strlen(key);
    size_t vlen = strlen(val);
    char *kv;

    if (klen == 0 || strchr(key, '=')) {
        errno = EINVAL;
        return -1;
    }
    if (!(kv = malloc(klen + vlen + 2)))
        return -1;
    memcpy(kv, key, klen);
    kv[klen] = '=';
    memcpy(kv + klen + 1, val, vlen + 1);
    return store(e, kv, klen);
}

int pl_env_setf(struct pl_env *e, const char *key, const char *fmt, ...)
{
    va_list ap;
    char *val;
    int rc;

    va_start(ap, fmt);
    rc = vasprintf(&val, fmt, ap);
    va_end(ap);
    if (rc < 0) {
        errno = ENOMEM;
        return -1;
    }
    rc = pl_env_set(e, key, val);
    int saved = errno;
    free(val);
    errno = saved;
    return rc;
}

/* Whether the key of "KEY=VALUE" 'kv' is 'pat' ("KEY", or "PREFIX*"). */
static bool key_is(const char *kv, const char *pat)
{
    size_t plen = strlen(pat);

    if (plen > 0 && pat[plen - 1] == '*')
        return !strncmp(kv, pat, plen - 1);
    return !strncmp(kv, pat, plen) && kv[plen] == '=';
}

/* Free and remove every entry 'drop' says so of ('arg' passed on). */
static void remove_if(struct pl_env *e,
                      bool (*drop)(const char *kv, const void *arg),
                      const void *arg)
{
    size_t j = 0;

    for (size_t i = 0; i < e->n; i++) {
        if (drop(e->v[i], arg)) {
            if (owned(e, i))
                free(e->v[i]);
            continue;
        }
        if (e->own)
            e->own[j] = e->own[i];
        e->v[j++] = e->v[i];
    }
    e->n = j;
    e->v[j] = NULL;
}

static bool key_matches(const char *kv, const void *pat)
{
    return key_is(kv, pat);
}

void pl_env_unset(struct pl_env *e, const char *key)
{
    remove_if(e, key_matches, key);
}

/* Variables that describe the agents' own srun step, or the wire-up of
 * an MPI launch, not the job: a task that read them would take itself
 * for rank SLURM_PROCID of the agents' step (docs/placement.md, "What a
 * task's environment holds").  Of SLURM_*, only the job's stay. */
static const char *const job_slurm[] = {
    "SLURM_JOB_*", "SLURM_JOBID", "SLURM_ARRAY_*", "SLURM_HET_*",
    "SLURM_CLUSTER_NAME", "SLURM_CONF", "SLURM_SUBMIT_DIR",
    "SLURM_SUBMIT_HOST",
};
static const char *const launch_vars[] = {
    "PMIX_*", "PMI_*", "OMPI_COMM_WORLD_*", "OMPI_UNIVERSE_SIZE",
    "OMPI_APP_CTX_*", "OMPI_FIRST_RANKS", "OMPI_NUM_APP_CTX",
    "OMPI_FILE_LOCATION", "OMPI_MCA_orte_*", "OMPI_MCA_ess*",
    "OMPI_MCA_pmix*", "OMPI_MCA_initial_wdir",
};

static bool step_var(const char *kv, const void *arg)
{
    (void)arg;
    if (!strncmp(kv, "SLURM_", 6)) {
        for (size_t i = 0; i < sizeof(job_slurm) / sizeof(job_slurm[0]); i++)
            if (key_is(kv, job_slurm[i]))
                return false;
        return true;
    }
    for (size_t i = 0; i < sizeof(launch_vars) / sizeof(launch_vars[0]); i++)
        if (key_is(kv, launch_vars[i]))
            return true;
    return false;
}

void pl_env_drop_step(struct pl_env *e)
{
    remove_if(e, step_var, NULL);
}

const char *pl_env_get(const struct pl_env *e, const char *key)
{
    size_t klen = strlen(key);
    long i = find(e, key, klen);

    return i < 0 ? NULL : e->v[i] + klen + 1;
}

char **pl_env_vector(struct pl_env *e)
{
    return e->v;
}

/* ---- the cache of spec environments ---- */

/* Whether spec variable 'kv' differs from task to task of one spec (an
 * array's PILOT_ARRAY_INDEX, which pilotd adds to the spec's): not kept
 * in a template, put on each task's environment instead. */
static bool per_task(const char *kv)
{
    return !strncmp(kv, "PILOT_", 6);
}

struct slot {
    char **spec;           /* the spec's variables it was built from,
                              less the per-task ones (NULL: none) */
    size_t nspec;
    struct pl_env *tmpl;   /* base + those */
    uint64_t used;         /* for the replacement: least recently used */
};

struct pl_env_cache {
    const struct pl_env *base;
    struct slot slot[PL_ENV_CACHE_SLOTS];
    uint64_t clock;
    uint64_t hits, misses;
};

struct pl_env_cache *pl_env_cache_new(const struct pl_env *base)
{
    struct pl_env_cache *c = calloc(1, sizeof(*c));

    if (c)
        c->base = base;
    return c;
}

static void slot_clear(struct slot *s)
{
    for (size_t i = 0; i < s->nspec; i++)
        free(s->spec[i]);
    free(s->spec);
    pl_env_free(s->tmpl);
    memset(s, 0, sizeof(*s));
}

void pl_env_cache_free(struct pl_env_cache *c)
{
    if (c) {
        int saved = errno;
        for (size_t i = 0; i < PL_ENV_CACHE_SLOTS; i++)
            slot_clear(&c->slot[i]);
        free(c);
        errno = saved;
    }
}

/* Whether slot 's' was built from the spec variables 'spec' (its per-task
 * ones skipped). */
static bool slot_is(const struct slot *s, char *const *spec)
{
    size_t k = 0;

    for (size_t i = 0; spec && spec[i]; i++) {
        if (per_task(spec[i]))
            continue;
        if (k >= s->nspec || strcmp(s->spec[k], spec[i]))
            return false;
        k++;
    }
    return k == s->nspec;
}

/* Build slot 's' for 'spec'; -1 with errno (EINVAL: a variable without
 * '=', ENOMEM). */
static int slot_fill(struct pl_env_cache *c, struct slot *s,
                     char *const *spec)
{
    size_t n = 0;

    for (size_t i = 0; spec && spec[i]; i++)
        n += !per_task(spec[i]);
    if (!(s->tmpl = pl_env_new(pl_env_vector((struct pl_env *)c->base)))
        || (n && !(s->spec = calloc(n, sizeof(*s->spec)))))
        goto nomem;
    for (size_t i = 0; spec && spec[i]; i++) {
        if (per_task(spec[i]))
            continue;
        if (pl_env_put(s->tmpl, spec[i]) < 0)
            goto error;
        if (!(s->spec[s->nspec] = strdup(spec[i])))
            goto nomem;
        s->nspec++;
    }
    return 0;
nomem:
    errno = ENOMEM;
error:;
    int saved = errno;
    slot_clear(s);
    errno = saved;
    return -1;
}

struct pl_env *pl_env_cache_task(struct pl_env_cache *c, char *const *spec)
{
    struct slot *s = NULL, *old = &c->slot[0];
    struct pl_env *e;

    for (size_t i = 0; i < PL_ENV_CACHE_SLOTS && !s; i++) {
        struct slot *t = &c->slot[i];
        if (t->tmpl && slot_is(t, spec))
            s = t;
        else if (!t->tmpl || (old->tmpl && t->used < old->used))
            old = t;
    }
    if (s)
        c->hits++;
    else {
        c->misses++;
        slot_clear(old);
        if (slot_fill(c, old, spec) < 0)
            return NULL;
        s = old;
    }
    s->used = ++c->clock;
    if (!(e = pl_env_new_borrow(s->tmpl)))
        return NULL;
    /* the per-task ones, in the spec's order, after the rest (no key is
     * both: the order among the others is kept) */
    for (size_t i = 0; spec && spec[i]; i++)
        if (per_task(spec[i]) && pl_env_put(e, spec[i]) < 0) {
            pl_env_free(e);
            return NULL;
        }
    return e;
}

void pl_env_cache_stats(const struct pl_env_cache *c, uint64_t *hits,
                        uint64_t *misses)
{
    *hits = c->hits;
    *misses = c->misses;
}
