/* client/logsrc.h - where pilot logs reads a task's output: files or journal
 *
 * A task's output is in its files in the pilot directory (one pair, or
 * a pair per rank for a task of several ranks that are not one MPI job)
 * or in the journals of the nodes it ran on (--output journal,
 * proto/journal.h); both read alike, as whole lines when the ranks are
 * merged (docs/output.md).
 */
#ifndef PL_CLIENT_LOGSRC_H
#define PL_CLIENT_LOGSRC_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "proto/pilotdir.h"

struct pl_logsrc;

struct pl_logopt {
    bool use_err;       /* stderr instead of stdout */
    long rank;          /* one rank's, or -1: all, merged */
    bool label;         /* "RANK: " before each line */
};

/* What attempt 'attempt' (1, ...) of task 'id' of 'ranks' ranks wrote,
 * in pilot directory 'dir'; 'per_rank': each rank has its own files.
 * NULL (ENOMEM). */
struct pl_logsrc *pl_logsrc_new(const char *dir, uint64_t id,
                                unsigned attempt, unsigned ranks,
                                bool per_rank, const struct pl_logopt *o);
void pl_logsrc_free(struct pl_logsrc *s);

/* Copy to stdout what was added since the last call, whole lines only
 * when ranks are merged or labelled; 'final': the task has ended, what
 * is left of a last line goes too (with a newline added).  1: there is
 * output (a file, or frames in a journal), 0: none yet, -1 after
 * printing an error. */
int pl_logsrc_drain(struct pl_logsrc *s, bool final);

/* The file named in messages (rank 0's, or the one rank's). */
const char *pl_logsrc_path(const struct pl_logsrc *s);

/* Whether task 't' (its show object) writes into the journals: its
 * environment says PILOT_OUTPUT=journal (pilot submit --output journal),
 * or the pilot has journals (pilot up --output journal). */
bool pl_task_journaled(const char *dir, const json_t *t);

/* One element of an array, for pl_logsrc_grep(). */
struct pl_logelem {
    uint64_t id;
    unsigned attempt;   /* its last, 0: never ran */
    unsigned ranks;
    bool per_rank;
    uint64_t index;     /* its index in the array */
};

/* Print each line of the elements' output (stdout, or stderr) that
 * matches 'rx' (a compiled POSIX regex) as "ARRAY.INDEX: line".  The
 * elements are sorted by id here.  Returns the number of matching
 * lines, or -1 after printing an error. */
long pl_logsrc_grep(const char *dir, uint64_t array, struct pl_logelem *e,
                    size_t n, const void *rx, bool use_err);

#endif /* !PL_CLIENT_LOGSRC_H */
