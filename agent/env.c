/* agent/env.c - a task's environment: a copy of ours, with overrides */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/env.h"

struct pl_env {
    char **v;   /* NULL-terminated; every entry owned */
    size_t n;   /* entries, not counting the NULL */
    size_t cap; /* slots in v, counting the NULL */
};

void pl_env_free(struct pl_env *e)
{
    if (e) {
        int saved = errno;
        for (size_t i = 0; i < e->n; i++)
            free(e->v[i]);
        free(e->v);
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
    e->cap = cap;
    return 0;
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
        free(e->v[i]);
        e->v[i] = kv;
        return 0;
    }
    if (grow(e) < 0) {
        free(kv);
        errno = ENOMEM;
        return -1;
    }
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
        if (drop(e->v[i], arg))
            free(e->v[i]);
        else
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
