/* agent/env.h - a task's environment: a copy of ours, with overrides */
#ifndef PL_AGENT_ENV_H
#define PL_AGENT_ENV_H

#include <stddef.h>
#include <stdint.h>

struct pl_env;

/* A copy of 'base' (a NULL-terminated "KEY=VALUE" vector, borrowed; NULL
 * means empty).  Entries without '=' are dropped.  Returns NULL (ENOMEM). */
struct pl_env *pl_env_new(char *const *base);

/* NULL is ok; preserves errno. */
void pl_env_free(struct pl_env *e);

/* An environment that starts as 'tmpl' and borrows its strings: 'tmpl'
 * must stay unchanged while the new one lives; what is set, put or unset
 * in the new one does not touch 'tmpl'.  Returns NULL (ENOMEM). */
struct pl_env *pl_env_new_borrow(const struct pl_env *tmpl);

/* Add "KEY=VALUE" (copied), replacing any entry for KEY.
 * Returns 0, or -1 with errno EINVAL (no '=', or an empty key) or ENOMEM. */
int pl_env_put(struct pl_env *e, const char *kv);

/* Set KEY to VALUE (copied), replacing any entry.  Returns 0 or -1 (errno
 * EINVAL for an empty key or one holding '=', ENOMEM). */
int pl_env_set(struct pl_env *e, const char *key, const char *val);

/* Like pl_env_set() with a printf-formatted value. */
int pl_env_setf(struct pl_env *e, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Remove the entry for KEY, or, when KEY ends with '*', every entry whose
 * key starts with what precedes the '*'.  No entry is not an error. */
void pl_env_unset(struct pl_env *e, const char *key);

/* Remove every variable that describes the agents' own srun step or an
 * MPI launch's wire-up rather than the job: every SLURM_* but the job's
 * (SLURM_JOB_*, SLURM_JOBID, SLURM_ARRAY_*, SLURM_HET_*,
 * SLURM_CLUSTER_NAME, SLURM_CONF, SLURM_SUBMIT_DIR, SLURM_SUBMIT_HOST),
 * PMIX_*, PMI_* and Open MPI's per-process OMPI_* (OMPI_COMM_WORLD_*,
 * OMPI_MCA_orte_*...; settings such as OMPI_MCA_btl stay). */
void pl_env_drop_step(struct pl_env *e);

/* The value of KEY, or NULL.  Borrowed: valid until 'e' changes. */
const char *pl_env_get(const struct pl_env *e, const char *key);

/* The NULL-terminated vector for execve().  Borrowed: owned by 'e', valid
 * until 'e' changes or is freed. */
char **pl_env_vector(struct pl_env *e);

/* The environments of the specs seen lately: 'base' with a spec's
 * variables, built once per distinct spec and borrowed by each of its
 * tasks' environments (issue 16).  A spec's PILOT_* variables (an array
 * element's PILOT_ARRAY_INDEX) differ from task to task: they are not in
 * the key, and go on each task's environment after the rest. */
#define PL_ENV_CACHE_SLOTS 8
struct pl_env_cache;

/* 'base' borrowed, unchanged while the cache lives.  NULL (ENOMEM). */
struct pl_env_cache *pl_env_cache_new(const struct pl_env *base);
/* NULL is ok; preserves errno.  After every environment it gave. */
void pl_env_cache_free(struct pl_env_cache *c);

/* A new environment: 'base', then every "KEY=VALUE" of 'spec' (NULL:
 * none) as pl_env_put() puts them, as its own to change and free.  It
 * borrows from the cache: free it before the next call.  NULL with errno
 * EINVAL (an entry without '=') or ENOMEM. */
struct pl_env *pl_env_cache_task(struct pl_env_cache *c, char *const *spec);

/* Calls answered from the cache, and calls that built an entry. */
void pl_env_cache_stats(const struct pl_env_cache *c, uint64_t *hits,
                        uint64_t *misses);

#endif /* !PL_AGENT_ENV_H */
