/* tests/unit/test_proto_run.c - RUN entries: what pilotd encodes, the
 * agent decodes to the same entry */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/agentmsg.h"
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

/* A pycall entry 'r' encoded, its "refs" value replaced by the msgpack
 * packed by 'pack' (a broken pilotd's), decoded: the decoder's return. */
static int swapped_refs(const struct pl_run *r, void (*pack)(msgpack_packer *),
                        struct pl_error *e)
{
    struct pl_wbuf w;
    struct pl_msg m;
    const msgpack_object *entries;
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_unpacked u;
    struct pl_run back;
    bool have_id;
    int rc = -2;

    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    pack(&pk);
    msgpack_unpacked_init(&u);
    pl_run_msg_begin(&w, 3, 1);
    pl_run_encode(&w, r);
    if (msgpack_unpack_next(&u, sb.data, sb.size, NULL)
            == MSGPACK_UNPACK_SUCCESS
        && pl_msg_decode(w.sb.data, w.sb.size, &m, e) == 0) {
        if (pl_run_msg_decode(m.body, &entries, e) == 0) {
            msgpack_object_map *em = &entries->via.array.ptr[0].via.map;
            for (uint32_t i = 0; i < em->size; i++)
                if (em->ptr[i].key.via.str.size == 4
                    && !memcmp(em->ptr[i].key.via.str.ptr, "refs", 4))
                    em->ptr[i].val = u.data;
            rc = pl_run_decode(&entries->via.array.ptr[0], &back, &have_id,
                               e);
            pl_run_clear(&back);
        }
        pl_msg_release(&m);
    }
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&sb);
    pl_wbuf_destroy(&w);
    return rc;
}

static void ref_head(msgpack_packer *pk, uint32_t n, const char *status)
{
    msgpack_pack_array(pk, 1);
    msgpack_pack_map(pk, n);
    pl_w_str(pk, "id");
    msgpack_pack_uint64(pk, 7);
    pl_w_str(pk, "status");
    pl_w_str(pk, status);
}

/* a ref with its pickle inline and a file */
static void ref_both(msgpack_packer *pk)
{
    ref_head(pk, 4, "ok");
    pl_w_str(pk, "data");
    msgpack_pack_bin(pk, 1);
    msgpack_pack_bin_body(pk, "x", 1);
    pl_w_str(pk, "file");
    pl_w_str(pk, "/d/7.result");
}

static void ref_status(msgpack_packer *pk)
{
    ref_head(pk, 3, "maybe");
    pl_w_str(pk, "file");
    pl_w_str(pk, "/d/7.result");
}

static void ref_none_data(msgpack_packer *pk)
{
    ref_head(pk, 3, "none");
    pl_w_str(pk, "file");
    pl_w_str(pk, "/d/7.result");
}

static void ref_not_map(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 1);
    msgpack_pack_uint64(pk, 7);
}

/* A Python call's refs: the results of other calls round-trip, inline,
 * in a file or none; what a broken pilotd could send is refused. */
static void test_refs(void)
{
    struct pl_run r, b;
    struct pl_error e = { "" };
    unsigned char in[] = { 0x80, 0x05, 0x00 }, v1[] = { 1, 2, 3, 4 };
    char *pyargv[] = { (char *)"label", NULL };
    uint64_t cores[] = { 0 };
    struct pl_run_ref refs[PL_SPEC_MAX_REFS + 1] = {
        { .id = 11, .status = PL_PYR_OK, .data = v1, .ndata = 4 },
        { .id = 12, .status = PL_PYR_RAISED, .file = (char *)"/d/12.result" },
        { .id = 13, .status = PL_PYR_NONE },
    };

    r = (struct pl_run){ .id = 50, .attempt = 1, .size = 1, .local_size = 1,
                         .argv = pyargv, .cores = cores, .ncores = 1,
                         .out = (char *)"/d/50.out", .err = (char *)"/d/50.err",
                         .fn = PL_FN_PYCALL, .input = in, .ninput = 3,
                         .result_file = (char *)"/d/50.result",
                         .refs = refs, .nrefs = 3 };
    ok(round_trip(&r, &b, &e) == 0 && b.nrefs == 3 && b.refs[0].id == 11
           && b.refs[0].status == PL_PYR_OK && b.refs[0].ndata == 4
           && !memcmp(b.refs[0].data, v1, 4) && !b.refs[0].file
           && b.refs[1].id == 12 && b.refs[1].status == PL_PYR_RAISED
           && !b.refs[1].data && !strcmp(b.refs[1].file, "/d/12.result")
           && b.refs[2].id == 13 && b.refs[2].status == PL_PYR_NONE
           && !b.refs[2].data && !b.refs[2].file,
       "refs: inline, in a file and none round-trip (%s)", e.text);
    pl_run_clear(&b);
    for (uint32_t i = 0; i <= PL_SPEC_MAX_REFS; i++)
        refs[i] = (struct pl_run_ref){ .id = i + 1, .status = PL_PYR_NONE };
    r.nrefs = PL_SPEC_MAX_REFS + 1;
    ok(round_trip(&r, &b, &e) < 0 && errno == EPROTO,
       "refs: %d refused (%s)", PL_SPEC_MAX_REFS + 1, e.text);
    pl_run_clear(&b);
    r.nrefs = 1;
    refs[0] = (struct pl_run_ref){ .id = 11, .status = PL_PYR_OK };
    ok(round_trip(&r, &b, &e) < 0 && strstr(e.text, "refs"),
       "refs: a result with neither bytes nor a file refused (%s)", e.text);
    pl_run_clear(&b);
    refs[0].file = (char *)"d/12.result";
    ok(round_trip(&r, &b, &e) < 0 && strstr(e.text, "refs"),
       "refs: a relative file refused (%s)", e.text);
    pl_run_clear(&b);
    unsigned char *big = calloc(1, PL_PY_RESULT_INLINE + 1);
    refs[0] = (struct pl_run_ref){ .id = 11, .status = PL_PYR_OK,
                                   .data = big,
                                   .ndata = PL_PY_RESULT_INLINE + 1 };
    ok(round_trip(&r, &b, &e) < 0 && errno == EPROTO,
       "refs: a result inline over %d bytes refused (%s)",
       PL_PY_RESULT_INLINE, e.text);
    pl_run_clear(&b);
    free(big);
    refs[0] = (struct pl_run_ref){ .id = 0, .status = PL_PYR_NONE };
    ok(round_trip(&r, &b, &e) < 0 && strstr(e.text, "refs"),
       "refs: id 0 refused (%s)", e.text);
    pl_run_clear(&b);
    refs[0].id = 11;
    char *named[] = { (char *)"mod:fn", NULL };
    r.argv = named;
    r.input = NULL;
    r.ninput = 0;
    ok(round_trip(&r, &b, &e) < 0 && strstr(e.text, "not pickled"),
       "refs: on a call that is not pickled refused (%s)", e.text);
    pl_run_clear(&b);
    r.argv = pyargv;
    r.input = in;
    r.ninput = 3;
    ok(swapped_refs(&r, ref_both, &e) == -1 && errno == EPROTO,
       "refs: bytes inline and a file refused (%s)", e.text);
    ok(swapped_refs(&r, ref_status, &e) == -1 && errno == EPROTO,
       "refs: an unknown status refused (%s)", e.text);
    ok(swapped_refs(&r, ref_none_data, &e) == -1 && errno == EPROTO,
       "refs: none with a file refused (%s)", e.text);
    ok(swapped_refs(&r, ref_not_map, &e) == -1 && errno == EPROTO,
       "refs: an entry that is not a map refused (%s)", e.text);
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

    plan(23 + 3);
    test_refs();
    /* a prefetched entry: no cores, how many it takes */
    char *pfargv[] = { (char *)"true", NULL };
    r = (struct pl_run){ .id = 60, .attempt = 1, .size = 1, .local_size = 1,
                         .argv = pfargv, .out = (char *)"/d/60.out",
                         .err = (char *)"/d/60.err", .prefetch = 2 };
    ok(round_trip(&r, &b, &e) == 0 && same_base(&r, &b) && b.prefetch == 2
           && b.ncores == 0,
       "a prefetched entry: 'prefetch' 2, no cores (%s)", e.text);
    pl_run_clear(&b);
    r.cores = cores;
    r.ncores = 1;
    ok(round_trip(&r, &b, &e) == -1 && errno == EPROTO,
       "... with cores too: refused (%s)", e.text);
    pl_run_clear(&b);
    r.ncores = 0;
    r.size = 2;
    r.local_size = 2;
    ok(round_trip(&r, &b, &e) == -1, "... of two ranks: refused (%s)",
       e.text);
    pl_run_clear(&b);
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
