/* agent/bind_cuda.h - bind a task to its GPUs (CUDA_VISIBLE_DEVICES) */
#ifndef PL_AGENT_BIND_CUDA_H
#define PL_AGENT_BIND_CUDA_H

#include "agent/env.h"
#include "agent/resources.h"
#include "proto/error.h"
#include "proto/run.h"

/* Same shape as agent/bind_cpu.h. */
struct pl_bind_cuda;

/* 'r' is borrowed and must outlive the binder.  Returns NULL (errp). */
struct pl_bind_cuda *pl_bind_cuda_new(const struct pl_resources *r,
                                      struct pl_error *errp);
void pl_bind_cuda_free(struct pl_bind_cuda *b);

/* CUDA_VISIBLE_DEVICES = the task's GPU positions mapped into our own
 * CUDA_VISIBLE_DEVICES entries ("" for a task without GPUs, so that it
 * sees none), and GPU_DEVICE_ORDINAL the same; PILOT_GPUS and
 * SLURM_STEP_GPUS = their Slurm ids.  Positions must have been
 * checked (pl_resources_claim()).  Returns 0 or -1 (ENOMEM, errp). */
int pl_bind_cuda_env(struct pl_bind_cuda *b, const struct pl_run *run,
                     struct pl_env *env, struct pl_error *errp);

/* Nothing to do around the spawn: the environment does it all. */
int pl_bind_cuda_enter(struct pl_bind_cuda *b, const struct pl_run *run,
                       struct pl_error *errp);
void pl_bind_cuda_leave(struct pl_bind_cuda *b);

#endif /* !PL_AGENT_BIND_CUDA_H */
