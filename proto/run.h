/* proto/run.h - the RUN message: one entry per rank an agent starts
 *
 * pilotd encodes an entry for each rank it placed on a node (for an MPI
 * task only rank 0's, whose agent launches the job) and sends them in
 * one RUN per node; the agent decodes each and starts it
 * (docs/protocol.md, 202).  The limits are the spec's (proto/spec.h).
 */
#ifndef PL_PROTO_RUN_H
#define PL_PROTO_RUN_H

#include <stdbool.h>
#include <stdint.h>

#include <msgpack.h>

#include "proto/error.h"
#include "proto/msg.h"
#include "proto/spec.h"

#define PL_RUN_MAX_CPU 1024    /* CPU ids below this: CPU_SETSIZE, what a
                                  cpu_set_t can hold */
#define PL_RUN_MAX_PATH 4096   /* stdout and stderr paths */
#define PL_RUN_MAX_ENTRIES 100000 /* entries in one RUN */
/* The spec's environment and the two of an array element
 * (PILOT_ARRAY_INDEX, PILOT_ARRAY_ID). */
#define PL_RUN_MAX_ENV (PL_SPEC_MAX_ENV + 2)

/* The value a Python call receives from another call (its 'refs'): the
 * result pilotd stored for that call. */
struct pl_run_ref {
    uint64_t id;          /* the call it is the result of */
    int status;           /* enum pl_pyr (proto/agentmsg.h): OK or RAISED;
                             PL_PYR_NONE: that call has no result */
    unsigned char *data;  /* the pickle inline, 'ndata' bytes (1 to
                             PL_PY_RESULT_INLINE), or NULL */
    size_t ndata;
    char *file;           /* or the file holding it (an absolute path in
                             the pilot directory, which every node sees) */
};

/* One entry: one rank of a task.  A decoded entry owns every pointer
 * (pl_run_clear()); one filled in to be encoded may borrow them all
 * (pilotd's are borrowed from its task and node) and is then never
 * cleared. */
struct pl_run {
    uint64_t id;
    uint64_t attempt;
    uint64_t rank;        /* 0 <= rank < size */
    uint64_t size;        /* ranks in the task, >= 1 */
    uint64_t local_rank;  /* among the task's ranks on this node */
    uint64_t local_size;
    uint64_t node_rank;   /* this node's index in 'nodelist' */
    char **nodelist;      /* NULL-terminated, or NULL: [this node] */
    int comm;             /* enum pl_comm (proto/spec.h) */
    char *master_addr;    /* PL_COMM_TORCH: rank 0's node, else NULL */
    uint64_t master_port; /* PL_COMM_TORCH: 1..65535, else 0 */
    int launcher;         /* PL_COMM_MPI: PL_LAUNCHER_SRUN or _MPIRUN */
    char **hosts;         /* PL_COMM_MPI: each rank's node, 'size' names */
    char *rank_cores;     /* PL_COMM_MPI: each rank's CPU ids, "0,1;0;.." */
    char *rank_gpus;      /* PL_COMM_MPI: each rank's GPU ids (Slurm's),
                             "0,1;2;..", or NULL: no GPUs */
    char **argv;          /* NULL-terminated, at least one element */
    char **env;           /* "KEY=VALUE" overrides, NULL-terminated, or
                             NULL */
    char *cwd;            /* NULL: the agent's */
    uint64_t *cores;      /* CPU ids, at least one (none when prefetched) */
    uint32_t ncores;
    uint32_t prefetch;    /* a prefetched entry: 0, or the cores it takes
                             when the agent starts it on cores an end
                             freed (its 'cores' are then empty: a one-rank
                             task of no GPUs, pool or comm) */
    uint64_t *gpus;       /* positions in the agent's GPU list, or NULL */
    uint32_t ngpus;
    char *out;            /* stdout path */
    char *err;            /* stderr path */
    double timeout;       /* seconds; 0: none */
    uint64_t output_limit; /* bytes each of stdout, stderr; 0: default */
    /* a pool task's rank (docs/pool.md): no cores of its own, it runs in
     * the pool's worker of world rank 'world_rank' on this node */
    char *pool;           /* the pool's name, or NULL: not a pool task */
    int fn;               /* PL_FN_C or PL_FN_PY */
    uint64_t pool_job;    /* the pool's MPI job: task id and attempt */
    uint64_t pool_attempt;
    uint64_t world_rank;  /* the worker's rank in that job */
    uint64_t *group;      /* 'size' distinct world ranks: each rank's */
    /* a Python call (fn PL_FN_PYCALL, no pool; docs/python-reference.md): the
     * pickled call inline or in a file, or argv "MODULE:FUNCTION" and
     * its arguments */
    unsigned char *input; /* 'ninput' bytes, or NULL */
    size_t ninput;
    char *input_file;     /* or NULL */
    char *py_prelude;     /* run once by each worker, or NULL */
    char *python;         /* the interpreter; NULL: PL_PY_DEFAULT_PYTHON */
    char *result_file;    /* where a result over PL_PY_RESULT_INLINE goes
                             (required with pycall) */
    struct pl_run_ref *refs; /* the results of the calls its pickle names
                             ("pilot-ref" persistent ids), 'nrefs' (at
                             most PL_SPEC_MAX_REFS), or NULL */
    uint32_t nrefs;
};

/* Start a RUN message of 'n' entries (seq: pilotd's count of RUNs to
 * that node); then exactly 'n' pl_run_encode(). */
void pl_run_msg_begin(struct pl_wbuf *w, uint64_t seq, uint32_t n);
/* The entries of a RUN body: the array, borrowed.  0, or -1 with errp
 * (EPROTO). */
int pl_run_msg_decode(const msgpack_object *body,
                      const msgpack_object **entries, struct pl_error *errp);

/* Pack entry 'r' (as pl_run_decode() would give it back: the rank
 * fields only when size > 1 or comm is not none, torch's and MPI's
 * fields with their comm). */
void pl_run_encode(struct pl_wbuf *w, const struct pl_run *r);

/* Decode entry 'o' into 'r' (zeroed first; the rank fields absent from
 * 'o' get their defaults: rank 0 of 1, comm none).  *have_id is set
 * when 'id' and 'attempt' were valid, even if something else was not,
 * so that the failure can be reported for that task (r->rank is then
 * the entry's rank if it was valid, else 0).  Clear 'r' with
 * pl_run_clear() whatever this returns.  0, or -1 with errp set (errno
 * EPROTO or ENOMEM). */
int pl_run_decode(const msgpack_object *o, struct pl_run *r, bool *have_id,
                  struct pl_error *errp);
/* Free what a decoded 'r' holds and zero it.  Preserves errno. */
void pl_run_clear(struct pl_run *r);

#endif /* !PL_PROTO_RUN_H */
