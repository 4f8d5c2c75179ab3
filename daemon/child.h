/* daemon/child.h - a child process of pilotd, its output into a log file */
#ifndef PL_DAEMON_CHILD_H
#define PL_DAEMON_CHILD_H

#include <uv.h>

#include "proto/error.h"

struct pl_child;

/* Called when the process ends (status, or -signal). */
typedef void (*pl_child_exit_f)(struct pl_child *l, int64_t status,
                                int signum, void *arg);

/* Start 'argv' (copied) with stdout and stderr appended to 'logpath'
 * (NULL: inherit).  Returns NULL with errp set. */
struct pl_child *pl_child_new(uv_loop_t *loop, char *const *argv,
                              const char *logpath, pl_child_exit_f cb,
                              void *arg, struct pl_error *errp);

/* Start it (again).  0 or -1 with errp. */
int pl_child_start(struct pl_child *l, struct pl_error *errp);
int pl_child_running(const struct pl_child *l);
/* Close the handle; memory goes in its close callback.  NULL is ok. */
void pl_child_free(struct pl_child *l);

#endif /* !PL_DAEMON_CHILD_H */
