/* proto/spec.h - a task as submitted: its fields, its limits, its names
 *
 * The one definition of a task spec (docs/protocol.md, "A task spec"):
 * the CLI builds one and checks it with pl_spec_check() before it sends
 * it, pilotd decodes and checks it again (a peer is never trusted), and
 * the limits below are the only ones: the agent's RUN entry
 * (proto/run.h) takes what they allow.  The fit against the pilot's
 * nodes is pilotd's (daemon/sched.h).
 */
#ifndef PL_PROTO_SPEC_H
#define PL_PROTO_SPEC_H

#include <stdbool.h>
#include <stdint.h>

#include <msgpack.h>

#include "proto/error.h"
#include "proto/msg.h"

/* The limits of one task. */
#define PL_SPEC_MAX_ARGV 4096          /* arguments of the command */
/* One argument or environment entry takes what execve() takes: Linux's
 * MAX_ARG_STRLEN (32 pages, 131,072 bytes) less its NUL.  All of them,
 * as execve() counts them against ARG_MAX (each string with its NUL and
 * an 8-byte pointer), at most PL_SPEC_MAX_EXEC: three quarters of the
 * usual ARG_MAX (2 MiB, a quarter of an 8 MiB stack limit), the rest
 * left for the environment the task inherits from its agent. */
#define PL_SPEC_MAX_ARG (128 * 1024 - 1)
#define PL_SPEC_MAX_EXEC (1536 * 1024)
#define PL_SPEC_MAX_ENV 4096           /* environment entries */
#define PL_SPEC_MAX_NAME 256           /* bytes of a name */
#define PL_SPEC_MAX_CWD 4096           /* bytes of the working directory */
#define PL_SPEC_MAX_RANKS 65536
#define PL_SPEC_MAX_NODES 65536
#define PL_SPEC_MAX_RPN 4096           /* ranks per node */
#define PL_SPEC_MAX_CPR 4096           /* cores per rank */
#define PL_SPEC_MAX_GPR 64             /* GPUs per rank */
#define PL_SPEC_MAX_RETRIES 100
#define PL_SPEC_DEFAULT_RETRIES 2      /* runs on lost nodes a task may
                                          survive when its spec is silent */
/* s: 115 days; the agent's timer counts ms in a uint64 */
#define PL_SPEC_MAX_TIMEOUT 1e7
/* --output-limit: bytes of stdout and stderr a task may write (each
 * file; 0: the default); more stops it, failed, reason output-limit */
#define PL_SPEC_MAX_OUTPUT (UINT64_C(1) << 60)
/* --vetted[=MINUTES]: at most a week; the default when none is given */
#define PL_SPEC_MAX_VETTED 10080
#define PL_SPEC_VETTED_DEFAULT 60
#define PL_OUTPUT_LIMIT_DEFAULT (UINT64_C(10) << 30)
#define PL_SPEC_MAX_AFTER 10000        /* dependencies of one spec */
#define PL_SPEC_MAX_ARRAY 1000000      /* elements of one array */
#define PL_SPEC_MAX_INDEX UINT32_MAX   /* an array index */
#define PL_SPEC_MAX_PRIORITY 1000000   /* |priority| */
#define PL_SPEC_MAX_TAGS 32
#define PL_SPEC_MAX_TAG_KEY 64
#define PL_SPEC_MAX_TAG_VALUE 256
#define PL_SPEC_MAX_SUBMIT 100000      /* specs in one submit request */
/* Tasks one submit request may make: pilotd stores them in one turn of
 * its loop, about 6 us each, so that no turn takes more than about
 * 0.1 s.  pilot submit sends a larger array in slices of this size,
 * each after the first appended to the array the first one made
 * ('append'). */
#define PL_SUBMIT_MAX_TASKS 5000
/* ... and at most this many bytes of commands (argv and env as execve()
 * counts them, pl_spec_exec_bytes(), times the tasks of each spec), unless
 * it makes one task: storing a command costs about 35 ms a MB (64 tasks
 * of 1.4 MB held the loop 3.1 s). */
#define PL_SUBMIT_MAX_BYTES (2 * 1024 * 1024)

/* A Python call ('fn' pycall, docs/python-reference.md).  Its pickled function and
 * arguments come inline ('input', counted with the commands against
 * PL_SUBMIT_MAX_BYTES: 8 of the largest fill a request) or, larger, in
 * a file the client wrote under the pilot's inputs/ ('input_file'). */
#define PL_SPEC_MAX_INPUT (256 * 1024)
#define PL_SPEC_MAX_INPUT_FILE (UINT64_C(256) << 20)
#define PL_SPEC_MAX_PRELUDE (64 * 1024)    /* bytes of 'py_prelude' */
#define PL_SPEC_MAX_PYTHON 4096            /* bytes of 'python' */
/* Calls whose values a call receives ('refs'): each result goes with
 * the call to its worker, at most PL_PY_RESULT_INLINE bytes inline, so
 * that a RUN entry stays within 64 x 64 KiB = 4 MiB of them. */
#define PL_SPEC_MAX_REFS 64
/* A call's result (pickled) travels in its end event up to this size;
 * larger, the worker writes it to a file beside the task's output, up to
 * PL_PY_RESULT_MAX: more fails the call. */
#define PL_PY_RESULT_INLINE (64 * 1024)
#define PL_PY_RESULT_MAX (UINT64_C(256) << 20)
/* The interpreter of a call that names none (and whose pilot set no
 * default: pilot up --python): found in the PATH of the task's
 * environment, as a command is, so that a venv's or conda's comes
 * first where it is activated. */
#define PL_PY_DEFAULT_PYTHON "python3"

/* How the ranks of a task find each other ('comm'). */
enum pl_comm {
    PL_COMM_NONE = 0, /* independent ranks */
    PL_COMM_TORCH,    /* torch.distributed init_method="env://" */
    PL_COMM_MPI,      /* one MPI job, started by rank 0's agent */
};

/* What starts the ranks of a comm mpi task ('launcher'). */
enum pl_launcher {
    PL_LAUNCHER_UNSET = 0, /* not given: srun */
    PL_LAUNCHER_SRUN,      /* one srun --overlap --mpi=pmix step */
    PL_LAUNCHER_MPIRUN,    /* Open MPI's mpirun --rankfile */
};

/* What a task runs ('fn'): a command, or a function in a pool's
 * workers (docs/pool.md). */
enum pl_fn {
    PL_FN_NONE = 0, /* argv is a command */
    PL_FN_C,        /* argv[0] is "LIB.so:SYMBOL" (worker/pilot_fn.h) */
    PL_FN_PY,       /* argv[0] is "MODULE:FUNCTION" */
    PL_FN_POOL,     /* the pool's own MPI job of workers; pilotd makes it,
                       a client may not */
    PL_FN_PYCALL,   /* a Python call in a warm worker of its agent: the
                       pickled 'input' (argv a label), or argv[0]
                       "MODULE:FUNCTION" and string arguments */
};
/* The fn named 's' ("none", "c", "py", "pool", "pycall"), or -1. */
int pl_fn_parse(const char *s);
/* The name of 'fn', or "unknown". */
const char *pl_fn_name(int fn);

/* A pool's name: 1..PL_POOL_NAME_MAX of A-Z a-z 0-9 _ . -, the first a
 * letter or a digit. */
#define PL_POOL_NAME_MAX 64
bool pl_pool_name_ok(const char *s);

/* The comm named 's' ("none", "torch", "mpi"), or -1. */
int pl_comm_parse(const char *s);
/* The name of 'comm', or "unknown". */
const char *pl_comm_name(int comm);
/* The launcher named 's' ("srun", "mpirun"), or -1. */
int pl_launcher_parse(const char *s);
/* The name of 'l' ("srun" for PL_LAUNCHER_UNSET), or "unknown". */
const char *pl_launcher_name(int l);

/* The length of the tag key 's' starts with, if it is one: 1 to
 * PL_SPEC_MAX_TAG_KEY of [A-Za-z0-9_.-] (it goes into a JSON path),
 * followed by '\0' or '='; else 0. */
size_t pl_spec_tag_key(const char *s);

/* One dependency of a spec: a task id, or the latest task of a name. */
struct pl_dep {
    uint64_t id;                        /* 0 when 'name' is given */
    char *name;                         /* owned, or NULL */
    bool any;                           /* any end will do, not only done */
    bool elem;                          /* element 'index' of array 'id' */
    uint64_t index;
};

/* One task spec.  Every pointer is owned by the spec. */
struct pl_spec {
    char *name, *cwd;                   /* NULL when absent */
    int comm;                           /* enum pl_comm */
    int launcher;                       /* enum pl_launcher */
    char **argv;                        /* at least one, first not empty */
    char **env;                         /* KEY=VALUE, or NULL: none */
    uint64_t ranks, cpr, gpr, retries, nodes, rpn;
    bool has_ranks;                     /* given: else NODES x RPN */
    bool has_retries;                   /* given: else the default */
    bool exclusive;
    double timeout;                     /* 0: none */
    uint64_t output_limit;              /* bytes; 0: the default */
    struct pl_dep *after;               /* 'nafter' of them, or NULL */
    uint32_t nafter;
    bool array;                         /* an array: astart..aend by astep */
    uint64_t astart, aend, astep;
    int64_t priority;                   /* higher first; default 0 */
    uint64_t vetted;                    /* minutes: only on nodes whose
                                           vetting passed within them;
                                           0: any node (daemon/vet.c) */
    char **tags;                        /* "KEY=VALUE", or NULL: none */
    uint64_t retry;                     /* retry_failed: that array's
                                           failed elements only; 0: no */
    uint64_t *index;                    /* retry: the indexes to make
                                           (set by pilotd), 'nindex' */
    uint64_t nindex;
    char *pool;                         /* a pool task: the pool's name;
                                           NULL: none */
    int fn;                             /* enum pl_fn: a pool task's
                                           function, in argv[0] */
    uint64_t append;                    /* the elements join the array of
                                           this id (its element 0's),
                                           made by an earlier request;
                                           0: they make a new one */
    /* fn pycall only (each NULL when absent) */
    unsigned char *input;               /* the pickled call, 'ninput'
                                           bytes (1..PL_SPEC_MAX_INPUT) */
    size_t ninput;
    char *input_file;                   /* ... or an absolute path to it */
    char *py_prelude;                   /* run once when a worker starts */
    char *python;                       /* the interpreter */
    uint64_t *refs;                     /* Python calls whose values
                                           this call's pickle names
                                           (persistent ids "pilot-ref");
                                           each is in 'after' (:ok);
                                           'nrefs', or NULL */
    uint32_t nrefs;
};

/* A spec with the defaults: one rank of one core, comm none. */
void pl_spec_init(struct pl_spec *s);
/* Free what 's' holds and zero it.  Preserves errno. */
void pl_spec_clear(struct pl_spec *s);

/* Elements of the array of 's' (1 when it is not one; with retry, the
 * indexes pilotd chose). */
uint64_t pl_spec_count(const struct pl_spec *s);

/* The bytes 'argv' and 'env' (either may be NULL) take as execve()
 * counts them against ARG_MAX: each string with its NUL, and a pointer. */
size_t pl_spec_exec_bytes(char *const *argv, char *const *env);

/* The bytes a task of 's' costs pilotd to store: its command as
 * pl_spec_exec_bytes() counts it, and a Python call's input, prelude
 * and interpreter. */
size_t pl_spec_store_bytes(const struct pl_spec *s);

/* How many tasks of spec 's' one submit request may make: at most
 * PL_SUBMIT_MAX_TASKS and PL_SUBMIT_MAX_BYTES of commands, at least 1. */
uint64_t pl_spec_submit_cap(const struct pl_spec *s);

/* An upper bound of the bytes pl_spec_encode() writes for 's': the CLI
 * keeps each submit request under PL_MSG_MAX with it. */
size_t pl_spec_wire_bytes(const struct pl_spec *s);

/* Check 's' against every rule of a spec and settle what it leaves to
 * defaults: ranks from nodes x ranks_per_node when not given, the
 * default retries, an empty env or tags as none.  The limits a person
 * may hit are named in the text.  0, or -1 with errp set (errno EINVAL)
 * and 's' unchanged. */
int pl_spec_check(struct pl_spec *s, struct pl_error *errp);

/* Decode spec 'o' and check it (pl_spec_check()).  0, or -1 with errp
 * set for a person (errno EPROTO: not the right types; EINVAL: a value
 * out of its rules; ENOMEM) and 's' cleared. */
int pl_spec_decode(const msgpack_object *o, struct pl_spec *s,
                   struct pl_error *errp);

/* Pack 's' (as pl_spec_check() left it, or as given) as one map value
 * into 'w'.  Fields at their defaults are left out. */
void pl_spec_encode(struct pl_wbuf *w, const struct pl_spec *s);

#endif /* !PL_PROTO_SPEC_H */
