/* agent/resources.h - what this node offers (name, cores, GPUs), and which
 * of it running tasks hold */
#ifndef PL_AGENT_RESOURCES_H
#define PL_AGENT_RESOURCES_H

#include <stddef.h>
#include <stdint.h>

#include "agent/gpuprobe.h"
#include "proto/error.h"

struct pl_resources;

/* Where the facts come from; every string is borrowed and may be NULL. */
struct pl_resources_spec {
    const char *node;         /* --node, else $SLURMD_NODENAME; NULL:
                                 gethostname() */
    const char *cores;        /* --cores "0,1,4-7"; NULL: the CPUs in our
                                 sched_getaffinity() mask */
    const char *step_gpus;    /* $SLURM_STEP_GPUS */
    const char *job_gpus;     /* $SLURM_JOB_GPUS */
    const char *cuda_visible; /* $CUDA_VISIBLE_DEVICES */
    /* What a GPU library found (agent/gpuprobe.h), to check the GPUs
     * with; gpu_probe NULL: not probed, Slurm's variables alone. */
    const char *gpu_probe;        /* pl_gpuprobe_reason(), for the log */
    enum pl_gpuprobe_lib gpu_lib; /* PL_GPUPROBE_NONE: no library */
    const struct pl_gpuprobe_dev *gpu_devs; /* gpu_ndevs of them */
    size_t gpu_ndevs;
};

/* Find the node's resources.  GPU ids come from the first of step_gpus,
 * job_gpus, cuda_visible that is set and not empty; GPU i is addressed as
 * entry i of cuda_visible (Slurm may renumber devices from 0 inside a
 * step), or as its id when cuda_visible is unset.  If both lists are set
 * and their lengths differ, a warning is logged and the shorter is used.
 * If gpu_probe is set and found a GPU library, those GPUs are checked
 * with it as agent/gpuprobe.h says: the ones it does not find are
 * dropped (a warning names them), and the others get a copy of its facts.
 * If it found none, an info line says why.
 * Returns NULL with errp set (EINVAL: a bad core list; ENOMEM). */
struct pl_resources *pl_resources_new(const struct pl_resources_spec *spec,
                                      struct pl_error *errp);

/* NULL is ok; preserves errno. */
void pl_resources_free(struct pl_resources *r);

/* Borrowed, valid until pl_resources_free(r). */
const char *pl_resources_node(const struct pl_resources *r);
/* The CPU ids, ascending; *n gets their count. */
const uint64_t *pl_resources_cores(const struct pl_resources *r, uint32_t *n);
size_t pl_resources_ngpus(const struct pl_resources *r);
/* The GPU ids ("2", "3"), NULL-terminated, for REGISTER. */
char *const *pl_resources_gpu_ids(const struct pl_resources *r);
/* What GPU 'pos' is called in our CUDA_VISIBLE_DEVICES ("0", "1").
 * 'pos' < pl_resources_ngpus(r). */
const char *pl_resources_gpu_visible(const struct pl_resources *r,
                                     size_t pos);
const char *pl_resources_gpu_id(const struct pl_resources *r, size_t pos);
/* What the GPU library says of GPU 'pos' (model, memory, UUID), or NULL
 * if no library was found.  Borrowed, valid until pl_resources_free(r). */
const struct pl_gpuprobe_dev *pl_resources_gpu_dev(const struct pl_resources *r,
                                                   size_t pos);

/* Counts of cores and GPUs no task holds. */
size_t pl_resources_free_cores(const struct pl_resources *r);
size_t pl_resources_free_gpus(const struct pl_resources *r);

/* Take 'ncores' CPU ids and 'ngpus' GPU positions for one task, all or
 * nothing.  Returns 0, or -1 with errp set and errno EINVAL (not ours,
 * or listed twice) or EBUSY (held by another task); nothing changes. */
int pl_resources_claim(struct pl_resources *r, const uint64_t *cores,
                       uint32_t ncores, const uint64_t *gpus, uint32_t ngpus,
                       struct pl_error *errp);

/* Give back what a successful pl_resources_claim() took. */
void pl_resources_release(struct pl_resources *r, const uint64_t *cores,
                          uint32_t ncores, const uint64_t *gpus,
                          uint32_t ngpus);

/* Parse a CPU list ("0,1,2", "0-3,8", "") into ascending unique ids below
 * PL_CPU_MAX, as a new array (free()) in *v and its length in *n.
 * Returns 0, or -1 with errp set (EINVAL, ENOMEM). */
#define PL_CPU_MAX 1024 /* CPU_SETSIZE: what a cpu_set_t can hold */
int pl_cpulist_parse(const char *s, uint64_t **v, uint32_t *n,
                     struct pl_error *errp);

/* Split a comma list ("0,1", "GPU-ab,GPU-cd") into a NULL-terminated
 * vector (pl_strv_free()); empty elements and a NULL or empty 's' give
 * no entries.  Returns NULL (ENOMEM). */
char **pl_idlist_split(const char *s);

/* Write "0,1,2" for 'n' ids into 'buf'; a list that does not fit ends
 * with "...".  Returns 'buf'. */
char *pl_idlist_format(char *buf, size_t len, const uint64_t *v, size_t n);

#endif /* !PL_AGENT_RESOURCES_H */
