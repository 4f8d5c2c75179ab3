/* worker/link.h - a pool worker's connection to its node's agent: the
 * socket, its frames, and the CRASH frames sent from signal handlers */
#ifndef PL_WORKER_LINK_H
#define PL_WORKER_LINK_H

#include <stddef.h>

#include "proto/error.h"
#include "proto/msg.h"

/* Connect to the agent socket of 'prefix' (PILOT_POOL_SOCKET) under each
 * name of 'nodes' (NULL-terminated) in turn, retrying all of them until
 * 'timeout' seconds have passed: the agent normally listens before the
 * pool starts, but a slow node may still be binding.  Returns the socket
 * (close-on-exec), or -1 with errp (errno of the last connect()). */
int pl_link_connect(const char *prefix, const char *const *nodes,
                    double timeout, struct pl_error *errp);

/* Send the message built in 'w' as one frame.  0, or -1 with errno
 * (EPIPE: the agent is gone; EMSGSIZE: over PL_WFRAME_MAX). */
int pl_link_send(int fd, struct pl_wbuf *w);

/* Read one frame: *buf (malloc'd, the caller frees) and *len.  Returns 1,
 * 0 at a clean end of the stream (the agent closed it between frames),
 * or -1 with errno (EPROTO: a frame over PL_WFRAME_MAX or cut short). */
int pl_link_recv(int fd, void **buf, size_t *len);

/* Pre-encode the CRASH frames, and install the handlers of SIGSEGV,
 * SIGBUS, SIGFPE, SIGILL, SIGABRT and SIGTRAP (on an alternate stack, so
 * that a stack overflow is reported too) and an atexit() handler, all of
 * which write to 'fd' only between pl_crash_enter() and pl_crash_leave():
 * the signal's frame, or signal 0 for exit().  Call once, after
 * MPI_Init (which installs handlers of its own that these replace).
 * 0, or -1 with errno. */
int pl_crash_arm(int fd);
/* The function of a call runs from now on / has returned. */
void pl_crash_enter(void);
void pl_crash_leave(void);

#endif /* !PL_WORKER_LINK_H */
