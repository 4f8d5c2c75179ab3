/* tests/unit/test_proto_run.c - RUN entries: what pilotd encodes, the
 * agent decodes to the same entry */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/run.h"
#include "proto/spec.h"
#include "proto/strv.h"
#include "tests/unit/tap.h"

static bool strv_eq(char *const *a, char *const *b)
{
    size_t n = pl_strv_len(a);

    if (n != pl_strv_len(b))
        return false;
    for (size_t i = 0; i < n; i++)
        if (strcmp(a[i], b[i]))
            return false;
    return true;
}

static bool str_eq(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

/* Encode 'r' as the one entry of a RUN and decode it into 'back'. */
static int round_trip(const struct pl_run *r, struct pl_run *back,
                      struct pl_error *e)
{
    struct pl_wbuf w;
    struct pl_msg m;
    const msgpack_object *entries;
    bool have_id;
    int rc = -1;

    memset(back, 0, sizeof(*back));
    pl_run_msg_begin(&w, 3, 1);
    pl_run_encode(&w, r);
    if (pl_msg_decode(w.sb.data, w.sb.size, &m, e) < 0)
        goto done;
    if (m.type == PL_MSG_RUN && m.seq == 3
        && pl_run_msg_decode(m.body, &entries, e) == 0
        && entries->via.array.size == 1)
        rc = pl_run_decode(&entries->via.array.ptr[0], back, &have_id, e);
    pl_msg_release(&m);
done:
    pl_wbuf_destroy(&w);
    return rc;
}

/* What every entry has in common, compared. */
static bool same_base(const struct pl_run *a, const struct pl_run *b)
{
    return a->id == b->id && a->attempt == b->attempt && a->rank == b->rank
           && a->size == b->size && a->local_rank == b->local_rank
           && a->local_size == b->local_size && a->node_rank == b->node_rank
           && a->comm == b->comm && strv_eq(a->argv, b->argv)
           && strv_eq(a->env, b->env) && str_eq(a->cwd, b->cwd)
           && a->ncores == b->ncores
           && !memcmp(a->cores, b->cores, a->ncores * sizeof(*a->cores))
           && a->ngpus == b->ngpus
           && (!a->ngpus
               || !memcmp(a->gpus, b->gpus, a->ngpus * sizeof(*a->gpus)))
           && !strcmp(a->out, b->out) && !strcmp(a->err, b->err)
           && a->timeout == b->timeout;
}

int main(void)
{
    struct pl_run r, b;
    struct pl_error e = { "" };
    char *argv[] = { (char *)"/bin/echo", (char *)"a b", NULL };
    char *env[] = { (char *)"X=1", (char *)"PILOT_ARRAY_INDEX=3", NULL };
    char *nodes[] = { (char *)"n1", (char *)"n2", NULL };
    char *hosts[] = { (char *)"n1", (char *)"n1", (char *)"n2", NULL };
    uint64_t cores[] = { 2, 3 }, gpus[] = { 1 };

    plan(12);
    /* a Python call */
    unsigned char in[] = { 0x80, 0x05, 0x00 };
    char *pyargv[] = { (char *)"label", NULL };
    r = (struct pl_run){ .id = 50, .attempt = 1, .size = 1, .local_size = 1,
                         .argv = pyargv, .cores = cores, .ncores = 1,
                         .out = (char *)"/d/50.out", .err = (char *)"/d/50.err",
                         .fn = PL_FN_PYCALL, .input = in, .ninput = 3,
                         .py_prelude = (char *)"import os",
                         .python = (char *)"python3",
                         .result_file = (char *)"/d/50.result" };
    ok(round_trip(&r, &b, &e) == 0 && same_base(&r, &b)
           && b.fn == PL_FN_PYCALL && b.ninput == 3 && !memcmp(b.input, in, 3)
           && !strcmp(b.py_prelude, "import os")
           && !strcmp(b.python, "python3")
           && !strcmp(b.result_file, "/d/50.result") && !b.pool,
       "pycall: its fields round-trip (%s)", e.text);
    pl_run_clear(&b);
    r.result_file = NULL;
    ok(round_trip(&r, &b, &e) < 0 && strstr(e.text, "result_file"),
       "pycall: without result_file refused (%s)", e.text);
    pl_run_clear(&b);
    r.result_file = (char *)"/d/50.result";
    r.input = NULL;
    r.ninput = 0;
    ok(round_trip(&r, &b, &e) < 0 && strstr(e.text, "MODULE:FUNCTION"),
       "pycall: no input and argv[0] without ':' refused (%s)", e.text);
    pl_run_clear(&b);
    /* a plain task of one rank */
    r = (struct pl_run){ .id = 41, .attempt = 2, .size = 1, .local_size = 1,
                         .argv = argv, .cores = cores, .ncores = 2,
                         .out = (char *)"/d/tasks/41.out",
                         .err = (char *)"/d/tasks/41.err" };
    ok(round_trip(&r, &b, &e) == 0, "one rank: decodes (%s)", e.text);
    ok(same_base(&r, &b) && !b.nodelist && !b.master_addr && !b.hosts,
       "one rank: the same entry, no rank fields");
    pl_run_clear(&b);
    /* with env, cwd, GPUs and a timeout */
    r.env = env;
    r.cwd = (char *)"/work";
    r.gpus = gpus;
    r.ngpus = 1;
    r.timeout = 7.5;
    r.output_limit = 5000000;
    ok(round_trip(&r, &b, &e) == 0 && same_base(&r, &b)
           && b.output_limit == 5000000,
       "env, cwd, gpus, timeout, output_limit come back (%s)", e.text);
    pl_run_clear(&b);
    /* rank 2 of a torch task of 4 over two nodes */
    r.rank = 2;
    r.size = 4;
    r.local_rank = 0;
    r.local_size = 2;
    r.node_rank = 1;
    r.nodelist = nodes;
    r.comm = PL_COMM_TORCH;
    r.master_addr = (char *)"n1";
    r.master_port = 20017;
    ok(round_trip(&r, &b, &e) == 0 && same_base(&r, &b)
           && strv_eq(b.nodelist, nodes) && !strcmp(b.master_addr, "n1")
           && b.master_port == 20017,
       "torch: rank fields, nodelist, master address and port (%s)",
       e.text);
    pl_run_clear(&b);
    /* rank 0 of an MPI task of 3: the launcher's entry */
    r.rank = 0;
    r.size = 3;
    r.node_rank = 0;
    r.comm = PL_COMM_MPI;
    r.master_addr = NULL;
    r.master_port = 0;
    r.launcher = PL_LAUNCHER_MPIRUN;
    r.hosts = hosts;
    r.rank_cores = (char *)"0,1;2;0,1,2,3";
    r.rank_gpus = (char *)"GPU-a;GPU-b,GPU-c;0";
    ok(round_trip(&r, &b, &e) == 0 && same_base(&r, &b),
       "mpi: decodes (%s)", e.text);
    ok(b.launcher == PL_LAUNCHER_MPIRUN && strv_eq(b.hosts, hosts)
           && !strcmp(b.rank_cores, r.rank_cores)
           && !strcmp(b.rank_gpus, r.rank_gpus),
       "mpi: launcher, hosts, each rank's cores and GPUs (%s, %s)",
       b.rank_cores ? b.rank_cores : "-", b.rank_gpus ? b.rank_gpus : "-");
    pl_run_clear(&b);
    r.rank_gpus = NULL;
    r.launcher = PL_LAUNCHER_SRUN;
    ok(round_trip(&r, &b, &e) == 0 && b.launcher == PL_LAUNCHER_SRUN
           && !b.rank_gpus,
       "mpi without GPUs, srun: no rank_gpus");
    pl_run_clear(&b);
    /* an entry the encoder was given without placement (out of memory
     * in pilotd) is refused by the agent, with its id */
    r.rank_cores = NULL;
    ok(round_trip(&r, &b, &e) == -1 && errno == EPROTO && b.id == 41,
       "mpi without rank_cores: refused (%s), the id known", e.text);
    pl_run_clear(&b);
    ok(!b.argv && !b.cores && !b.hosts, "pl_run_clear zeroes");
    return done_testing();
}
