/* client/logsrc.h - where pilot logs reads a task's output: files or journal
 *
 * A task's output is in its files in the pilot directory (one pair, or
 * a pair per rank for a task of several ranks that are not one MPI job)
 * or in the journals of the nodes it ran on (--output journal,
 * proto/journal.h); both read alike, as whole lines when the ranks are
 * merged (docs/output.md).  The CLI (pilot logs) and libpilot
 * (pilot_logs_*(), the Python client's Task.logs()) read through it;
 * it prints nothing but pl_logsrc_grep()'s lines.
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

/* Where a reader's output goes: 'n' bytes at 'p' (borrowed for the
 * call).  0, or -1 with errno set. */
typedef int (*pl_logsrc_out_f)(const void *p, size_t n, void *arg);

/* What attempt 'attempt' (1, ...) of task 'id' of 'ranks' ranks wrote,
 * in pilot directory 'dir'; 'per_rank': each rank has its own files.
 * Its output goes to 'out' (with 'arg').  NULL (ENOMEM). */
struct pl_logsrc *pl_logsrc_new(const char *dir, uint64_t id,
                                unsigned attempt, unsigned ranks,
                                bool per_rank, const struct pl_logopt *o,
                                pl_logsrc_out_f out, void *arg);
void pl_logsrc_free(struct pl_logsrc *s);

/* Give the sink what was added since the last call, whole lines only
 * when ranks are merged or labelled; 'final': the task has ended, what
 * is left of a last line goes too (with a newline added).  1: there is
 * output (a file, or frames in a journal), 0: none yet, -1 with errp
 * (a file or journal that cannot be read, the sink's errno). */
int pl_logsrc_drain(struct pl_logsrc *s, bool final, struct pl_error *errp);

/* The file named in messages (rank 0's, or the one rank's). */
const char *pl_logsrc_path(const struct pl_logsrc *s);

/* Where the output is: once pl_logsrc_drain() has found it in the
 * journals, the segments (DIR/journal/NODE/SEQ.pj) its frames of the
 * stream (and rank) chosen were read from so far, in the order first
 * read; else its files (each rank's, or the one), which may not exist
 * yet.  Borrowed, valid until the next drain. */
size_t pl_logsrc_nsources(const struct pl_logsrc *s);
const char *pl_logsrc_source(const struct pl_logsrc *s, size_t i);

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
 * matches 'rx' (a compiled POSIX regex) as "ARRAY.INDEX: line" to
 * stdout.  The elements are sorted by id here.  Returns the number of
 * matching lines, or -1 with errp. */
long pl_logsrc_grep(const char *dir, uint64_t array, struct pl_logelem *e,
                    size_t n, const void *rx, bool use_err,
                    struct pl_error *errp);

#endif /* !PL_CLIENT_LOGSRC_H */
