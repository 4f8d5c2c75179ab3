/* daemon/launch.h - the agents' process: one srun step, or one local child */
#ifndef PL_DAEMON_LAUNCH_H
#define PL_DAEMON_LAUNCH_H

#include <uv.h>

#include "proto/error.h"

struct pl_launch;

/* Called when the process ends (status, or -signal). */
typedef void (*pl_launch_exit_f)(struct pl_launch *l, int64_t status,
                                 int signum, void *arg);

/* Start 'argv' (copied) with stdout and stderr appended to 'logpath'
 * (NULL: inherit).  Returns NULL with errp set. */
struct pl_launch *pl_launch_new(uv_loop_t *loop, char *const *argv,
                                const char *logpath, pl_launch_exit_f cb,
                                void *arg, struct pl_error *errp);

/* Start it (again).  0 or -1 with errp. */
int pl_launch_start(struct pl_launch *l, struct pl_error *errp);
int pl_launch_running(const struct pl_launch *l);
/* Send 'signum' to the process if it runs. */
void pl_launch_kill(struct pl_launch *l, int signum);
/* Close the handle; memory goes in its close callback.  NULL is ok. */
void pl_launch_free(struct pl_launch *l);

#endif /* !PL_DAEMON_LAUNCH_H */
