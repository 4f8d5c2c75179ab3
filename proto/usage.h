/* proto/usage.h - what one rank of a task used, as its agent measured it */
#ifndef PL_PROTO_USAGE_H
#define PL_PROTO_USAGE_H

/* Which figures of a struct pl_usage were measured. */
enum pl_usage_has {
    PL_USE_CPU = 1,       /* cpu_user and cpu_sys */
    PL_USE_GPU_UTIL = 2,
    PL_USE_GPU_MEM = 4,
    PL_USE_GPU_POWER = 8,
};

/* A rank's resource use, sent with its end event (docs/protocol.md,
 * 303) and summed over the ranks into the task's row.  A figure counts
 * only where its bit is set in 'has': a zeroed struct measured nothing,
 * so designated initializers that leave it out say "not measured".
 * Decoded figures are finite and >= 0, and gpu_util <= 100. */
struct pl_usage {
    unsigned has;         /* enum pl_usage_has */
    double cpu_user;      /* s of user CPU, the rank's process tree as
                             far as it was reaped (getrusage(2)) */
    double cpu_sys;       /* s of system CPU, the same */
    double gpu_util;      /* %: mean over its GPUs and the samples */
    double gpu_mem_mb;    /* MB: the most one of its GPUs held, over the
                             samples */
    double gpu_power_w;   /* W: mean over its GPUs and the samples */
};

/* Largest CPU seconds one rank may report: 2^40 s, some 35,000 years,
 * so that a sum over 2^32 ranks stays exact enough in a double. */
#define PL_USAGE_CPU_MAX 1099511627776.0
/* Largest GPU memory (MB) and power (W) a rank may report. */
#define PL_USAGE_GPU_MEM_MAX 1e9
#define PL_USAGE_GPU_POWER_MAX 1e6

#endif /* !PL_PROTO_USAGE_H */
