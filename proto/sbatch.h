/* proto/sbatch.h - writing the batch scripts pilot gives sbatch
 *
 * Two programs write one: pilot up (client/up_slurm.c, the pilot's own
 * job) and pilotd (daemon/alloc.c, an allocation of agents that joins
 * it).  Both are made private to the user and name paths in #SBATCH
 * lines the same way.
 */
#ifndef PL_PROTO_SBATCH_H
#define PL_PROTO_SBATCH_H

#include <stdbool.h>
#include <stdio.h>

#include "proto/error.h"

/* Create (or truncate) the script 'path' for writing, with no access
 * for group or others (umask 077 while it is made: it names the
 * pilot's directories and keys).  The stream, or NULL with errp ("cannot
 * write PATH: ..."). */
FILE *pl_sbatch_create(const char *path, struct pl_error *errp);

/* Close 'fp' (pl_sbatch_create()'s).  'failed': writing it failed
 * already, with errno set: it is closed all the same and that is the
 * error.  0, or -1 with errp ("cannot write PATH: ..."). */
int pl_sbatch_close(FILE *fp, const char *path, bool failed,
                    struct pl_error *errp);

/* Write "#SBATCH OPT=PATHSUFFIX" for a path: '%' doubled (Slurm's
 * filename patterns, sbatch(1) "filename pattern"), in double quotes if
 * it has blanks.  'suffix' is written as it is (it may hold patterns:
 * "/logs/slurm-%j.out"). */
void pl_sbatch_path(FILE *fp, const char *opt, const char *path,
                    const char *suffix);

#endif /* !PL_PROTO_SBATCH_H */
