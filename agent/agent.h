/* agent/agent.h - the agent: its link to pilotd, and the tasks it runs */
#ifndef PL_AGENT_AGENT_H
#define PL_AGENT_AGENT_H

#include <stdbool.h>

#include <uv.h>

#include "agent/resources.h"
#include "proto/error.h"
#include "proto/keys.h"

struct pl_agent;

/* An agent offering 'res' (moved in: *resp is set to NULL on success),
 * to connect to pilotd at 'endpoint' (tcp://ADDR:PORT) with CURVE, as
 * 'keys' (copied; pl_keys_load_peer()).  The agent embeds the process's
 * one libuv loop (pl_agent_loop()).  Returns NULL with errp set; then
 * the caller still owns *resp. */
struct pl_agent *pl_agent_new(const char *endpoint,
                              const struct pl_keys_peer *keys,
                              struct pl_resources **resp,
                              struct pl_error *errp);

/* Close every handle of the agent, run the loop until their close
 * callbacks are done, close the loop, then the socket (which lingers to
 * flush what was sent) and the ZeroMQ context.  Handles that others
 * started on the loop must be closed first.  NULL is ok. */
void pl_agent_free(struct pl_agent *a);

/* Outlive a pilotd that dies: when it has been silent for a few seconds,
 * read the endpoint file of the pilot directory 'dir' (NULL: don't) and
 * connect where it says; after 'orphan_after' seconds (0: never) without
 * a word from it, stop every task and exit.  Call before
 * pl_agent_start(). */
void pl_agent_set_recovery(struct pl_agent *a, const char *dir,
                           double orphan_after);

/* Benchmark mode ('on'): each entry of a RUN is reported running and
 * then done (exit 0) in the next EVENTS message, with no process, no
 * output files, no binding and no cores held; the rest (register, pull,
 * acks, heartbeats) is unchanged.  Call before pl_agent_start(). */
void pl_agent_set_bench(struct pl_agent *a, bool on);

/* While prefetched entries are held, events wait up to 'ms' after the
 * oldest of them for the next ones before their EVENTS message leaves
 * (default 2; 0: at once).  For tests, which make the window long enough
 * to see on a loaded machine. */
void pl_agent_set_hold(struct pl_agent *a, unsigned ms);

/* Sample the GPUs of the node every 'secs' seconds while tasks hold them
 * (agent/gpusample.h; 0: never; default PL_AGENT_GPU_SAMPLE).  Call
 * before pl_agent_start(). */
#define PL_AGENT_GPU_SAMPLE 5.0
void pl_agent_set_gpu_sample(struct pl_agent *a, double secs);

/* Borrowed: the loop, valid until pl_agent_free(a). */
uv_loop_t *pl_agent_loop(struct pl_agent *a);

/* What the process should exit with once the loop has stopped: 0, or 1
 * when pilotd refused the agent's key (the agent then shuts down, as
 * pl_agent_shutdown() does: no key of ours will be let in later). */
int pl_agent_exit_code(const struct pl_agent *a);

/* Connect, send REGISTER (again every 2 s until WELCOME) and start
 * watching the socket.  Returns 0, or -1 with errp set. */
int pl_agent_start(struct pl_agent *a, struct pl_error *errp);

/* Stop every task (SIGTERM, SIGKILL after a grace), report them, then
 * stop the loop (uv_stop()), so that uv_run() returns; tasks that outlive
 * SIGKILL by 5 s are reported canceled and left.  Later calls do nothing.
 * 'why' names the cause in the log. */
void pl_agent_shutdown(struct pl_agent *a, const char *why);

/* Listen for the pool workers of this node (agent/pool.h); the keys
 * directory names the socket.  0, or -1 with errp (pools cannot run
 * here; the rest can).  A bench agent listens for none. */
int pl_agent_pool_listen(struct pl_agent *a, const char *keydir,
                         struct pl_error *errp);

#endif /* !PL_AGENT_AGENT_H */
