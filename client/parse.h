/* client/parse.c - numbers, durations, sizes and task ids from text
 *
 * What a person types (an option's value, a task file's string) read
 * the same way by the CLI and by libpilot.  Nothing here prints: each
 * function returns 0, or -1 with errno and errp set to a message that
 * names 'what' (the option or field).
 */
#ifndef PL_CLIENT_PARSE_H
#define PL_CLIENT_PARSE_H

#include <stdint.h>

#include "proto/clientmsg.h"
#include "proto/error.h"

/* A decimal integer in [min, max]. */
int pl_parse_uint(const char *what, const char *s, uint64_t min,
                  uint64_t max, uint64_t *v, struct pl_error *errp);

/* A size in bytes: N, or N with K, M, G or T (powers of 1024; KiB,
 * KB, k... the same), between 1 and 'max'. */
int pl_parse_size(const char *what, const char *s, uint64_t max,
                  uint64_t *v, struct pl_error *errp);

/* Seconds >= 0, as "90", "1.5", "90s", "10m", "2h", "1d". */
int pl_parse_secs(const char *what, const char *s, double *v,
                  struct pl_error *errp);

/* A task id (a positive integer). */
int pl_parse_id(const char *s, uint64_t *id, struct pl_error *errp);

/* Tasks named by argv[0..argc-1], into 'sel': each "ID" is a task, or
 * every element of an array when it is the array's id; each "ID.N" is
 * element N of array ID.  Returns 0 (pl_sel_req_clear() it), or -1 with
 * errp set (a bad id, more than PL_REQ_MAX_IDS, or ENOMEM) and 'sel'
 * empty. */
int pl_parse_sel(int argc, char *const *argv, struct pl_sel_req *sel,
                 struct pl_error *errp);

#endif /* !PL_CLIENT_PARSE_H */
