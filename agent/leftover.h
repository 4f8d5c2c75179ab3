/* agent/leftover.h - the processes of a task, found by their key, and
 * those a dead agent of this pilot left on this node
 *
 * Every process of a task carries PILOT_TASK_KEY=OWNER/ID.ATTEMPT.RANK in
 * its environment (first: it is read from /proc/PID/environ), where
 * OWNER is PILOT/NODE/PID:START: the pilot (12 hex digits of its server
 * key), the node as the agent named itself at start, and the agent (its
 * pid and its start time, so that a pid used again is not taken for it).
 * An agent killed with SIGKILL leaves its tasks running; the next agent
 * on the node kills them before it registers, so that pilotd, which runs
 * them again, never has two copies of one running (issue 12).
 */
#ifndef PL_AGENT_LEFTOVER_H
#define PL_AGENT_LEFTOVER_H

#include <stdbool.h>
#include <stddef.h>

#define PL_OWNER_MAX 384 /* PILOT/NODE/PID:START: 12 + 256 + 2 + 42 */

/* The environment of process 'pid' (a /proc entry name) as it was at its
 * exec, NUL-separated entries, up to 4 MiB: a malloc()ed buffer and its
 * length in *len, or NULL (gone, not ours to read, a zombie: empty). */
char *pl_proc_environ(const char *pid, size_t *len);

/* This agent's owner string into 'buf' (PL_OWNER_MAX): 'server' is the
 * pilot's public key (Z85), 'node' this node's name.  0, or -1. */
int pl_owner_make(char *buf, size_t len, const char *server,
                  const char *node);

/* Kill (SIGKILL) every process of this pilot's tasks on this node whose
 * agent ('owner' but another pid, or the same pid started at another
 * time) is dead, until none is left or 'wait' seconds passed.  An agent
 * of the pilot still alive on the node keeps its tasks.  Sets the count
 * of processes killed and of tasks they belonged to; returns how many
 * are left (0: none). */
int pl_leftovers_kill(const char *owner, double wait, unsigned *killed,
                      unsigned *tasks);

#endif /* !PL_AGENT_LEFTOVER_H */
