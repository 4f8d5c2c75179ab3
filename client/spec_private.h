/* client/spec_private.h - what spec.c (the fields, flags and task-file
 * entries) and spec_set.c (the setters they go through) share (no other
 * module includes this) */
#ifndef PL_CLIENT_SPEC_PRIVATE_H
#define PL_CLIENT_SPEC_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/spec.h"
#include "proto/error.h"

/* The fields a task is described by, as a flag and as an entry's key. */
enum field {
    F_ARGV, F_CMD, F_NAME, F_CWD, F_RANKS, F_NODES, F_RPN, F_CPR, F_GPR,
    F_RETRIES, F_RETRY, F_TIMEOUT, F_EXCLUSIVE, F_COMM, F_LAUNCHER, F_ENV,
    F_POOL, F_FN, F_PY, F_PYCALL,
    F_AFTER, F_ARRAY, F_PRIORITY, F_TAG, F_OUTPUT_LIMIT, F_VETTED, F_OUTPUT,
};

/* errno ENOMEM and "out of memory" in errp: -1 (spec.c) */
int spec_nomem(struct pl_error *errp);

/* The rest: spec_set.c.  Each returns 0, or -1 with errp set. */

/* *dst = a copy of 'v' (the old one freed). */
int spec_set_str(char **dst, const char *v, struct pl_error *errp);
/* Integer field 'id' (F_RANKS .. F_RETRY, checked by the caller) = 'v'. */
void spec_set_uint(struct pl_spec *s, int id, uint64_t v);
/* Append a copy of 'kv' to the vector *v of *n entries (NULL-terminated,
 * room for *cap). */
int spec_strv_add(char ***v, size_t *n, size_t *cap, const char *kv,
                  struct pl_error *errp);
/* The command: a copy of argv[0..argc-1], each of it UTF-8. */
int spec_set_argv(struct pl_spec *s, int argc, char *const *argv,
                  struct pl_error *errp);
/* A pool task's function, --fn or --py 'arg' ('fn': PL_FN_C or _PY). */
int spec_set_fn(struct pl_cli_spec *b, int fn, const char *key,
                const char *arg, struct pl_error *errp);
/* A pool task's argv: its function first, then its arguments. */
int spec_fn_first(struct pl_cli_spec *b, struct pl_error *errp);
/* --pool or an entry's "pool" ('key' names it in errors). */
int spec_set_pool(struct pl_spec *s, const char *key, const char *arg,
                  struct pl_error *errp);
/* 'dir' as the task's cwd: as it is when absolute, else in 'here';
 * NULL means 'here'. */
int spec_set_cwd(struct pl_spec *s, const char *here, const char *dir,
                 struct pl_error *errp);
/* "KEY=VALUE" with a non-empty KEY. */
bool spec_env_ok(const char *s);
/* "KEY=VALUE" with a tag key and a VALUE of at most
 * PL_SPEC_MAX_TAG_VALUE bytes. */
bool spec_tag_ok(const char *s);
/* "A-B[:STEP]": the task is an array of those indexes. */
int spec_set_array(struct pl_spec *s, const char *text,
                   struct pl_error *errp);
/* "ID[:ok|:any],ID.N,NAME..." added to the spec's dependencies. */
int spec_add_after(struct pl_cli_spec *b, const char *text,
                   struct pl_error *errp);

#endif
