/* agent/gpusample.h - the GPU use of the running tasks: NVML sampled
 * every few seconds by a child process, averaged per task rank */
#ifndef PL_AGENT_GPUSAMPLE_H
#define PL_AGENT_GPUSAMPLE_H

#include <stdbool.h>
#include <stdint.h>

#include <uv.h>

#include "agent/resources.h"
#include "proto/error.h"
#include "proto/usage.h"

/* The sampler runs as a child, 'pilot-agent --gpu-sampler MS'
 * (agent/nvmlsample.c): NVML is never loaded into the agent, and an NVML
 * call that blocks (a GPU that fell off the bus, a driver being
 * reloaded) stalls the child, not the agent's loop.  The child writes
 * one line per sample through a pipe the loop reads.  It is started only
 * on a node with GPUs; when NVML cannot be loaded or lists no GPU it
 * says why and exits, the agent logs it once and carries on: its tasks'
 * GPU figures are then absent (NULL in the task's row).
 *
 * A rank holding GPUs is watched from its start to its end: each sample
 * adds, for each of its GPUs, the utilisation (% of the last period a
 * kernel ran), the memory used and the power drawn.  Its figures are the
 * mean utilisation and power over its GPUs and the samples, and the most
 * memory one of its GPUs held.  N.B. NVML gives a device's figures, not
 * a process's: a GPU is held by one task at a time, so they are the
 * task's, plus what the driver itself holds (some hundreds of MB).  A
 * rank that ends before the first sample has no GPU figures. */

struct pl_gpusample;

/* A sampler for the GPUs of 'res' (borrowed: it must outlive the
 * sampler), not started.  NULL: out of memory. */
struct pl_gpusample *pl_gpusample_new(uv_loop_t *loop,
                                      const struct pl_resources *res);

/* Start the child: program 'prog' (the agent's own) with a sample every
 * 'interval' seconds (0.01 to 3600).  0, or -1 with errp set (the spawn
 * failed).  Whether NVML loads is known later, from the child. */
int pl_gpusample_start(struct pl_gpusample *s, const char *prog,
                       double interval, struct pl_error *errp);

/* SIGTERM to the child, close the handles; the memory goes with the last
 * close callback (run the loop).  NULL is ok. */
void pl_gpusample_free(struct pl_gpusample *s);

/* Whether 'pid' is the sampler's child (not an orphan for the agent to
 * reap: libuv reaps it).  NULL: false. */
bool pl_gpusample_child(const struct pl_gpusample *s, int pid);

/* Why it samples nothing ("" while it starts or samples); borrowed. */
const char *pl_gpusample_why(const struct pl_gpusample *s);
/* Whether the child listed its GPUs and samples them. */
bool pl_gpusample_ready(const struct pl_gpusample *s);

/* Watch rank 'rank' of attempt 'attempt' of task 'id', which holds the
 * node's GPUs at positions 'gpus' (n of them, < pl_resources_ngpus()).
 * No-op when s is NULL, n is 0, the child failed, or out of memory (the
 * rank then gets no GPU figures). */
void pl_gpusample_watch(struct pl_gpusample *s, uint64_t id,
                        uint64_t attempt, uint64_t rank, const uint64_t *gpus,
                        uint32_t n);

/* The rank's figures into *u (the PL_USE_GPU_* bits of what was sampled
 * set), and forget the rank.  No-op when not watched. */
void pl_gpusample_take(struct pl_gpusample *s, uint64_t id, uint64_t attempt,
                       uint64_t rank, struct pl_usage *u);

/* Handle one line of the child's (without its newline), as read from the
 * pipe; the unit tests give it lines of their own. */
void pl_gpusample_feed(struct pl_gpusample *s, const char *line);

/* The child's main(): 'pilot-agent --gpu-sampler MS'; argv[1] is MS.
 * agent/nvmlsample.c. */
int pl_gpusample_main(int argc, char **argv);

#endif /* !PL_AGENT_GPUSAMPLE_H */
