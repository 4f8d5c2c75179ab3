/* daemon/node.h - one agent's node: its cores and GPUs, and who holds them */
#ifndef PL_DAEMON_NODE_H
#define PL_DAEMON_NODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

struct pl_dtask;

enum pl_node_state {
    PL_NODE_UP = 1,
    PL_NODE_LOST,  /* silent past the heartbeat timeout */
    PL_NODE_GONE,  /* said goodbye (pilot going down) */
};

/* The rendezvous ports pilotd hands out (torch's MASTER_PORT): below
 * Linux's ephemeral range (32768-60999), so no connect() takes one. */
#define PL_NODE_PORT_BASE 20000
#define PL_NODE_PORTS 10048 /* a multiple of 64 */

struct pl_node {
    char name[64];
    int state;
    uint32_t ncores;
    uint64_t *cpu;          /* CPU ids, as the agent registered them */
    uint64_t *core_task;    /* task holding each core, 0 = free */
    uint32_t ngpus;
    char **gpu;             /* GPU ids (SLURM_STEP_GPUS), NULL-terminated */
    uint64_t *gpu_task;
    uint32_t free_cores, free_gpus;
    uint32_t gpu_next;      /* where the next GPU search starts */
    uint32_t running;       /* tasks placed here and not yet ended */
    /* tasks placed here beyond its free cores (pilotd --prefetch): the
     * agent holds them and starts each on the cores an end frees; they
     * hold no cores here until their 'running' says which, or until a
     * pass binds the first to cores found free (daemon/place.c).  In the
     * order they were placed, as the agent holds them. */
    TAILQ_HEAD(pl_prefq, pl_dtask) pref;
    uint32_t npref;
    int32_t pref_lo;        /* no held task has a lower priority (kept
                               since the list was last empty) */
    bool pref_inv;          /* a task was held after one of a lower
                               priority (the same) */
    uint64_t pref_taking;   /* cores of those being taken back (their
                               'recalled' set); whoever changes npref,
                               pref_lo, pref_inv or this calls
                               pl_node_changed() (the index sums them) */
    uint64_t ports[PL_NODE_PORTS / 64]; /* rendezvous ports in use here */
    char *cordon;           /* NULL, or why nothing new is placed here (a
                               failed vetting, 'pilot cordon'); owned.  What
                               runs here goes on. */
    /* daemon/vet.c's: the node's vetting */
    int vet;                /* enum pl_vet_state */
    bool vet_cordon;        /* 'cordon' is a vetting's: a passing one
                               lifts it ('pilot cordon's stays) */
    uint64_t vet_token;     /* the VET last sent, 0: none */
    double vet_time;        /* pl_now() of its last result; 0: none */
    double vet_ok_time;     /* ... of its last passing one (--vetted) */
    double vet_cpu;         /* its cpu check's figure; NaN: none */
    char *vet_json;         /* owned: the last result as stored (nodes.vet) */
    bool vet_wanted;        /* a --vetted task found its passed vetting
                               too old (set by sched.c) */
    double vet_sig[8];      /* when ranks here last ended by a signal */
    uint32_t vet_nsig;
    double ends;            /* pl_now() by which what starts here must have
                               ended: a grown allocation's drain (alloc.c);
                               0: none of its own (the pilot's walltime is
                               pl_sched_set_time_left()'s) */
    /* the scheduler's placement index (daemon/placeidx.h), NULL until
     * the node is added: its leaf follows free_cores, free_gpus, state
     * and cordon, so whoever changes state or cordon calls
     * pl_node_changed() (node.c's own calls do it) */
    struct pl_placeidx *pidx;
    uint32_t pidx_at;       /* its position there (the scheduler's k) */
};

enum pl_vet_state {
    PL_VET_NONE = 0,        /* never vetted (vetting off) */
    PL_VET_RUNNING,
    PL_VET_OK,
    PL_VET_FAILED,
};

/* A rendezvous port on 'n' no running task of this pilot holds, marked
 * held: the first free one from PL_NODE_PORT_BASE + hint % PL_NODE_PORTS
 * on, wrapping.  0 if every one is held. */
uint32_t pl_node_port_take(struct pl_node *n, uint64_t hint);
/* Give back a port of pl_node_port_take(); 0 is ignored. */
void pl_node_port_free(struct pl_node *n, uint32_t port);

/* A node named 'name' with 'ncpu' CPU ids and GPU ids 'gpus' (copied;
 * may be NULL).  NULL with errno on failure. */
struct pl_node *pl_node_new(const char *name, const uint64_t *cpu,
                            uint32_t ncpu, char *const *gpus);
void pl_node_free(struct pl_node *n);

/* 'state' or 'cordon' of 'n' changed: the placement index reads it
 * again.  pl_node_set_state() sets the state and calls it. */
void pl_node_changed(struct pl_node *n);
void pl_node_set_state(struct pl_node *n, int state);

/* Take 'ncores' free cores and 'ngpus' free GPUs for task 'id'; their
 * indexes go to core_idx[] and gpu_idx[].  Cores: lowest indexes first;
 * GPUs: rotating from the one after the last taken, so that all of a
 * node's GPUs get work even when its cores allow fewer GPU tasks.
 * Returns 0, or -1 (EAGAIN) leaving everything as it was. */
int pl_node_alloc(struct pl_node *n, uint64_t id, uint32_t ncores,
                  uint32_t ngpus, uint32_t *core_idx, uint32_t *gpu_idx);

/* Give back what pl_node_alloc() took for 'id'. */
void pl_node_release(struct pl_node *n, uint64_t id, const uint32_t *core_idx,
                     uint32_t ncores, const uint32_t *gpu_idx, uint32_t ngpus);

/* "3,4" of the CPU ids (or GPU ids) at the given indexes, into 'buf'. */
/* Hold for task 'id' what a restarted pilotd learns it holds: the cores
 * whose CPU ids are in 'cpus' ("0,1") and the GPUs whose ids are in
 * 'gpus' (either may be NULL); ids not on the node or already held are
 * skipped.  Their indexes go to new arrays *core_idx and *gpu_idx (the
 * caller's), counts to *ncores and *ngpus.  Returns 0, or -1 (ENOMEM). */
int pl_node_claim(struct pl_node *n, uint64_t id, const char *cpus,
                  const char *gpus, uint32_t **core_idx, uint32_t *ncores,
                  uint32_t **gpu_idx, uint32_t *ngpus);

void pl_node_cpu_str(const struct pl_node *n, const uint32_t *idx, uint32_t k,
                     char *buf, size_t len);
void pl_node_gpu_str(const struct pl_node *n, const uint32_t *idx, uint32_t k,
                     char *buf, size_t len);

#endif /* !PL_DAEMON_NODE_H */
