/* agent/gpuprobe.h - this node's GPUs as NVML or the CUDA driver sees
 * them (dlopen at run time), cross-checked with Slurm's grant */
#ifndef PL_AGENT_GPUPROBE_H
#define PL_AGENT_GPUPROBE_H

#include <stddef.h>
#include <stdint.h>

#include "proto/error.h"

/* The policy, as the agent applies it (agent/resources.c):
 *
 * - Slurm's grant (SLURM_STEP_GPUS, else SLURM_JOB_GPUS, else our
 *   CUDA_VISIBLE_DEVICES) is the authority for WHICH GPUs we may use.
 *   The library only confirms that they exist and tells their model,
 *   memory and UUID.
 * - A granted GPU the library cannot find is dropped, with a warning that
 *   names it: a task must not be bound to a GPU that does not exist.
 * - GPUs the library sees that Slurm did not grant are not used (they
 *   belong to someone else); a notice says so when Slurm granted none.
 * - Without a GPU library (none installed, a stub, no driver loaded, no
 *   devices), Slurm's variables alone decide, as before, with one info
 *   line that says why.
 *
 * How a granted GPU is found among the library's devices:
 * - an id "GPU-..." or "MIG-..." is matched by UUID;
 * - NVML: a Slurm id N is the GPU with minor number N (/dev/nvidiaN): the
 *   ids are gres.conf's device numbers, which are the minor numbers when
 *   gres.conf lists /dev/nvidia files or AutoDetect=nvml is used.  NVML
 *   lists every GPU our device cgroup allows, in its own order, and
 *   ignores CUDA_VISIBLE_DEVICES.  An id that came from
 *   CUDA_VISIBLE_DEVICES (no Slurm variables) is an NVML index;
 * - CUDA driver: it honours CUDA_VISIBLE_DEVICES and numbers our visible
 *   GPUs from 0, so granted GPU i is ordinal i when CUDA_VISIBLE_DEVICES
 *   is set, else the ordinal named by its id.
 */

enum pl_gpuprobe_lib {
    PL_GPUPROBE_NONE = 0, /* no usable GPU library: pl_gpuprobe_reason() */
    PL_GPUPROBE_NVML,     /* libnvidia-ml.so.1 */
    PL_GPUPROBE_CUDA,     /* libcuda.so.1 */
};

/* One GPU as the library reports it; plain data. */
struct pl_gpuprobe_dev {
    int index;       /* NVML index, or CUDA ordinal (after
                        CUDA_VISIBLE_DEVICES) */
    int minor;       /* N of /dev/nvidiaN; -1: unknown (always, with CUDA) */
    char uuid[96];   /* "GPU-8f6c...", "" if unknown */
    char name[96];   /* "NVIDIA H200", "" if unknown */
    uint64_t memory; /* total bytes; 0 if unknown */
};

/* Where the libraries are; borrowed strings. */
struct pl_gpuprobe_spec {
    const char *nvml_library; /* $PILOT_NVML_LIBRARY; NULL:
                                 "libnvidia-ml.so.1"; "": skip NVML */
    const char *cuda_library; /* $PILOT_CUDA_LIBRARY; NULL: "libcuda.so.1";
                                 "": skip the CUDA driver */
};

struct pl_gpuprobe;

/* Load NVML, else the CUDA driver, with dlopen(), list the GPUs, and
 * unload it, all in a child process (the CUDA driver cannot be unloaded
 * after cuInit(), so the agent and its tasks never map it).
 * A missing library, a stub, a driver that is not loaded or a library
 * that sees no GPU is not an error: the result is PL_GPUPROBE_NONE with
 * the reason.  'spec' may be NULL (the defaults).  Blocks for as long as
 * the library's init takes (seconds on a cold node): start-up only.
 * Returns NULL only with errno ENOMEM. */
struct pl_gpuprobe *pl_gpuprobe_new(const struct pl_gpuprobe_spec *spec);

/* NULL is ok; preserves errno. */
void pl_gpuprobe_free(struct pl_gpuprobe *p);

enum pl_gpuprobe_lib pl_gpuprobe_lib(const struct pl_gpuprobe *p);

/* Borrowed, valid until pl_gpuprobe_free(p): which library was used, or
 * why none was ("libnvidia-ml.so.1: cannot open shared object file ...;
 * libcuda.so.1: cuInit: CUDA_ERROR_STUB_LIBRARY (34)"). */
const char *pl_gpuprobe_reason(const struct pl_gpuprobe *p);

/* The GPUs found (none without a library); *n gets their count.
 * Borrowed, valid until pl_gpuprobe_free(p). */
const struct pl_gpuprobe_dev *pl_gpuprobe_devs(const struct pl_gpuprobe *p,
                                               size_t *n);

/* "NVML", "CUDA driver" or "no GPU library". */
const char *pl_gpuprobe_lib_name(enum pl_gpuprobe_lib lib);

/* Flags for pl_gpuprobe_check(). */
enum pl_gpuprobe_flag {
    PL_GPUPROBE_SLURM_IDS = 1,    /* the ids are Slurm's (SLURM_STEP_GPUS or
                                     SLURM_JOB_GPUS), not entries of
                                     CUDA_VISIBLE_DEVICES */
    PL_GPUPROBE_CUDA_VISIBLE = 2, /* CUDA_VISIBLE_DEVICES is set */
};

/* The cross-check above as a pure function: no library, no log.
 * 'ids' is Slurm's grant, NULL-terminated, n entries: GPU i is ids[i]
 * to Slurm and entry i of our CUDA_VISIBLE_DEVICES (pl_resources' pairs).
 * 'devs' are what library 'lib' found.  match[i] (the caller's array of
 * n) gets the index in 'devs' of GPU i, or -1 where the library has no
 * such GPU: GPU i is to be dropped.  'msg' (may be NULL) gets a warning
 * naming the GPUs not found when some are missing, else a notice when
 * Slurm granted none but the library sees GPUs, else "".
 * With PL_GPUPROBE_NONE there is nothing to check against: all are kept
 * (the return is n) but match[] is all -1.
 * Returns how many of the n GPUs were found: fewer than n means 'msg' is
 * a warning. */
size_t pl_gpuprobe_check(enum pl_gpuprobe_lib lib,
                         const struct pl_gpuprobe_dev *devs, size_t ndevs,
                         char *const *ids, unsigned flags, long *match,
                         struct pl_error *msg);

#endif /* !PL_AGENT_GPUPROBE_H */
