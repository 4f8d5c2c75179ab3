/* proto/run.c - the RUN message: one entry per rank an agent starts */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/agentmsg.h"
#include "proto/poolmsg.h"
#include "proto/run.h"
#include "proto/spec.h"
#include "proto/strv.h"

#define MPI_RANKS_MAX PL_SPEC_MAX_RANKS /* entries in 'hosts', 'rank_cores' */

void pl_run_clear(struct pl_run *r)
{
    int saved = errno;

    pl_strv_free(r->argv);
    pl_strv_free(r->env);
    pl_strv_free(r->nodelist);
    free(r->master_addr);
    pl_strv_free(r->hosts);
    free(r->rank_cores);
    free(r->rank_gpus);
    free(r->cwd);
    free(r->cores);
    free(r->gpus);
    free(r->out);
    free(r->err);
    free(r->pool);
    free(r->group);
    free(r->input);
    free(r->input_file);
    free(r->py_prelude);
    free(r->python);
    free(r->result_file);
    for (uint32_t i = 0; i < r->nrefs; i++) {
        free(r->refs[i].data);
        free(r->refs[i].file);
    }
    free(r->refs);
    memset(r, 0, sizeof(*r));
    errno = saved;
}

static int bad(struct pl_error *errp, const char *what)
{
    errno = EPROTO;
    return pl_errprintf(errp, "%s", what);
}

/* ------------------------------------------------------------ encode */

void pl_run_msg_begin(struct pl_wbuf *w, uint64_t seq, uint32_t n)
{
    pl_wbuf_init(w, PL_MSG_RUN, seq);
    msgpack_pack_array(pl_wm_key(&w->body, "tasks"), n);
}

int pl_run_msg_decode(const msgpack_object *body,
                      const msgpack_object **entries, struct pl_error *errp)
{
    return pl_mp_array(body, "tasks", true, PL_RUN_MAX_ENTRIES, entries,
                       errp) < 0 ? -1 : 0;
}

/* "0,1;2" as [[0, 1], [2]]: the ';'-separated lists of 'v' ('n' of
 * them), each of ','-separated items, packed as numbers or strings. */
static void pack_lists(msgpack_packer *pk, const char *v, uint64_t n,
                       bool numbers)
{
    if (!v)
        v = ""; /* empty lists: the reader refuses them */
    msgpack_pack_array(pk, (uint32_t)n);
    for (uint64_t i = 0; i < n; i++) {
        size_t len = strcspn(v, ";");
        uint32_t items = 1;
        for (size_t k = 0; k < len; k++)
            items += v[k] == ',';
        msgpack_pack_array(pk, len ? items : 0);
        for (const char *p = v; len && p < v + len;) {
            size_t ilen = strcspn(p, ",;");
            if (numbers)
                msgpack_pack_uint64(pk, strtoull(p, NULL, 10));
            else {
                msgpack_pack_str(pk, ilen);
                msgpack_pack_str_body(pk, p, ilen);
            }
            p += ilen + (p[ilen] == ',');
        }
        v += len + (v[len] == ';');
    }
}

/* A call's refs, each {"id", "status": "ok", "raised" or "none", and
 * "data" (bin) or "file" (str)}. */
static void pack_refs(struct pl_wbuf *w, msgpack_packer *pk,
                      const struct pl_run_ref *refs, uint32_t n)
{
    msgpack_pack_array(pk, n);
    for (uint32_t i = 0; i < n; i++) {
        const struct pl_run_ref *f = &refs[i];
        const char *st = pl_pyr_name(f->status);
        struct pl_wmap e;
        pl_wmap_begin(w, &e);
        pl_wm_uint(&e, "id", f->id);
        pl_wm_str(&e, "status", st ? st : "none");
        if (st && f->data)
            pl_wm_bin(&e, "data", f->data, f->ndata);
        else if (st && f->file)
            pl_wm_str(&e, "file", f->file);
    }
}

void pl_run_encode(struct pl_wbuf *w, const struct pl_run *r)
{
    struct pl_wmap m;
    bool multi = r->size > 1 || r->comm != PL_COMM_NONE;

    pl_wmap_begin(w, &m);
    pl_wm_uint(&m, "id", r->id);
    pl_wm_uint(&m, "attempt", r->attempt);
    pl_wm_strv(&m, "argv", r->argv);
    if (r->env)
        pl_wm_strv(&m, "env", r->env);
    if (r->cwd)
        pl_wm_str(&m, "cwd", r->cwd);
    pl_wm_uintv(&m, "cores", r->cores, r->ncores);
    pl_wm_uintv(&m, "gpus", r->gpus, r->ngpus);
    if (r->prefetch)
        pl_wm_uint(&m, "prefetch", r->prefetch);
    pl_wm_str(&m, "stdout", r->out);
    pl_wm_str(&m, "stderr", r->err);
    if (r->timeout > 0)
        pl_wm_double(&m, "timeout", r->timeout);
    if (r->output_limit)
        pl_wm_uint(&m, "output_limit", r->output_limit);
    if (multi) {
        pl_wm_uint(&m, "rank", r->rank);
        pl_wm_uint(&m, "size", r->size);
        pl_wm_uint(&m, "local_rank", r->local_rank);
        pl_wm_uint(&m, "local_size", r->local_size);
        pl_wm_uint(&m, "node_rank", r->node_rank);
        if (r->nodelist)
            pl_wm_strv(&m, "nodelist", r->nodelist);
        pl_wm_str(&m, "comm", pl_comm_name(r->comm));
    }
    if (r->comm == PL_COMM_TORCH) {
        pl_wm_str(&m, "master_addr", r->master_addr);
        pl_wm_uint(&m, "master_port", r->master_port);
    }
    if (r->comm == PL_COMM_MPI) {
        /* rank 0's agent launches them all, where they were placed */
        pl_wm_str(&m, "launcher", pl_launcher_name(r->launcher));
        pl_wm_strv(&m, "hosts", r->hosts);
        pack_lists(pl_wm_key(&m, "rank_cores"), r->rank_cores, r->size,
                   true);
        if (r->rank_gpus)
            /* by Slurm id: each rank finds them in its own step's list */
            pack_lists(pl_wm_key(&m, "rank_gpus"), r->rank_gpus, r->size,
                       false);
    }
    if (r->pool) {
        pl_wm_str(&m, "pool", r->pool);
        pl_wm_str(&m, "fn", pl_fn_name(r->fn));
        pl_wm_uint(&m, "pool_job", r->pool_job);
        pl_wm_uint(&m, "pool_attempt", r->pool_attempt);
        pl_wm_uint(&m, "world_rank", r->world_rank);
        pl_wm_uintv(&m, "group", r->group, (uint32_t)r->size);
    }
    if (r->fn == PL_FN_PYCALL && !r->pool) {
        pl_wm_str(&m, "fn", pl_fn_name(r->fn));
        if (r->input)
            pl_wm_bin(&m, "input", r->input, r->ninput);
        if (r->input_file)
            pl_wm_str(&m, "input_file", r->input_file);
        if (r->py_prelude)
            pl_wm_str(&m, "py_prelude", r->py_prelude);
        if (r->python)
            pl_wm_str(&m, "python", r->python);
        pl_wm_str(&m, "result_file", r->result_file);
        if (r->nrefs)
            pack_refs(w, pl_wm_key(&m, "refs"), r->refs, r->nrefs);
    }
}

/* Ref 'o' into 'f': a known status, and its pickle inline (1 to
 * PL_PY_RESULT_INLINE bytes) or an absolute path, not both, none
 * without a result.  0, or -1 with errp. */
static int decode_ref(const msgpack_object *o, struct pl_run_ref *f,
                      struct pl_error *errp)
{
    const unsigned char *p;
    char *st = NULL;
    size_t n = 0;
    int has;

    if (o->type != MSGPACK_OBJECT_MAP)
        return bad(errp, "field 'refs': want maps");
    if (pl_mp_uint(o, "id", true, INT64_MAX, &f->id, errp) < 0
        || pl_mp_str(o, "status", true, 8, &st, errp) < 0
        || (has = pl_mp_bin(o, "data", false, PL_PY_RESULT_INLINE, &p, &n,
                            errp)) < 0
        || pl_mp_str(o, "file", false, PL_RUN_MAX_PATH, &f->file, errp) < 0) {
        free(st);
        return -1;
    }
    f->status = strcmp(st, "none") ? pl_pyr_parse(st) : PL_PYR_NONE;
    free(st);
    if (f->id == 0 || f->status < 0)
        return bad(errp, "field 'refs': want an id and a status of ok, "
                   "raised or none");
    if (has && n && !(f->data = malloc(n)))
        return pl_errprintf(errp, "out of memory");
    if (has && n) {
        memcpy(f->data, p, n);
        f->ndata = n;
    }
    if ((has && !n) || (f->status == PL_PYR_NONE) != (!has && !f->file)
        || (has && f->file) || (f->file && f->file[0] != '/'))
        return bad(errp, "field 'refs': a result's pickle inline (data) or "
                   "its absolute path (file), one of them; none without a "
                   "result");
    return 0;
}

/* A Python call's fields ('fn' pycall without 'pool'). */
static int decode_pycall(const msgpack_object *o, struct pl_run *r,
                         struct pl_error *errp)
{
    const unsigned char *p;
    char *fn = NULL;
    size_t n = 0;
    int has;

    if (pl_mp_get(o, "pool"))
        return 0;
    if ((has = pl_mp_str(o, "fn", false, 8, &fn, errp)) <= 0)
        return has;
    r->fn = pl_fn_parse(fn);
    free(fn);
    if (r->fn != PL_FN_PYCALL)
        return bad(errp, "field 'fn': without a pool, want pycall");
    if ((has = pl_mp_bin(o, "input", false, PL_SPEC_MAX_INPUT, &p, &n, errp))
            < 0
        || pl_mp_str(o, "input_file", false, PL_SPEC_MAX_CWD, &r->input_file,
                     errp) < 0
        || pl_mp_str(o, "py_prelude", false, PL_SPEC_MAX_PRELUDE,
                     &r->py_prelude, errp) < 0
        || pl_mp_str(o, "python", false, PL_SPEC_MAX_PYTHON, &r->python,
                     errp) < 0
        || pl_mp_str(o, "result_file", true, PL_RUN_MAX_PATH, &r->result_file,
                     errp) < 0)
        return -1;
    if (has && n) {
        if (!(r->input = malloc(n)))
            return pl_errprintf(errp, "out of memory");
        memcpy(r->input, p, n);
        r->ninput = n;
    }
    if (has && !n)
        return bad(errp, "field 'input': empty");
    if (r->input && r->input_file)
        return bad(errp, "fields 'input' and 'input_file': one of them");
    if (r->input_file && r->input_file[0] != '/')
        return bad(errp, "field 'input_file': not an absolute path");
    if (!r->input && !r->input_file && !strchr(r->argv[0], ':'))
        return bad(errp, "a Python call's argv[0] is not MODULE:FUNCTION");
    if (r->python && !r->python[0])
        return bad(errp, "field 'python': empty");
    if (r->result_file[0] != '/')
        return bad(errp, "field 'result_file': not an absolute path");
    if (r->size != 1 || r->comm != PL_COMM_NONE)
        return bad(errp, "a Python call is one rank, comm none");
    const msgpack_object *refs;
    if ((has = pl_mp_array(o, "refs", false, PL_SPEC_MAX_REFS, &refs,
                           errp)) < 0)
        return -1;
    if (!has || !refs->via.array.size)
        return 0;
    if (!r->input && !r->input_file)
        return bad(errp, "field 'refs': a call that is not pickled");
    if (!(r->refs = calloc(refs->via.array.size, sizeof(*r->refs))))
        return pl_errprintf(errp, "out of memory");
    for (uint32_t i = 0; i < refs->via.array.size; i++) {
        r->nrefs++; /* cleared by pl_run_clear() whatever comes */
        if (decode_ref(&refs->via.array.ptr[i], &r->refs[i], errp) < 0)
            return -1;
    }
    return 0;
}

/* A pool task's fields (the rank's own are decoded). */
static int decode_pool(const msgpack_object *o, struct pl_run *r,
                       struct pl_error *errp)
{
    char *fn = NULL;
    uint32_t ng = 0;
    int has;

    if ((has = pl_mp_str(o, "pool", false, PL_POOL_NAME_MAX, &r->pool,
                         errp)) <= 0)
        return has;
    if (pl_mp_str(o, "fn", true, 8, &fn, errp) < 0
        || pl_mp_uint(o, "pool_job", true, UINT64_MAX, &r->pool_job, errp) < 0
        || pl_mp_uint(o, "pool_attempt", true, UINT32_MAX, &r->pool_attempt,
                      errp) < 0
        || pl_mp_uint(o, "world_rank", true, PL_POOL_MAX_WORKERS - 1,
                      &r->world_rank, errp) < 0
        || pl_mp_uintv(o, "group", true, PL_POOL_MAX_WORKERS,
                       PL_POOL_MAX_WORKERS - 1, &r->group, &ng, errp) < 0) {
        free(fn);
        return -1;
    }
    r->fn = pl_fn_parse(fn);
    free(fn);
    if (!pl_pool_name_ok(r->pool))
        return bad(errp, "field 'pool': not a pool's name");
    if (r->fn != PL_FN_C && r->fn != PL_FN_PY)
        return bad(errp, "field 'fn': want c or py");
    if (r->comm != PL_COMM_NONE)
        return bad(errp, "a pool task has no comm");
    if (ng != r->size || r->group[r->rank] != r->world_rank)
        return bad(errp, "field 'group': want 'size' world ranks, the "
                         "rank's its 'world_rank'");
    for (uint32_t i = 0; i < ng; i++)
        for (uint32_t j = i + 1; j < ng; j++)
            if (r->group[i] == r->group[j])
                return bad(errp, "field 'group': a world rank twice");
    if (!strchr(r->argv[0], ':'))
        return bad(errp, "a pool task's argv[0] is not FILE:SYMBOL");
    return 0;
}

/* ------------------------------------------------------------ decode */

/* MAX_ARG_STRLEN: execve() takes no longer environment entry */
#define ENV_STRLEN (128 * 1024)

/* 'rank_cores' as "0,1;2;..." in r->rank_cores: 'size' non-empty
 * arrays of CPU ids. */
static int decode_rank_cores(const msgpack_object *o,
                             struct pl_run *r, struct pl_error *errp)
{
    const msgpack_object *arr = NULL;
    char *buf;
    char *p;

    if (pl_mp_array(o, "rank_cores", true, MPI_RANKS_MAX, &arr, errp) < 0)
        return -1;
    if (arr->via.array.size != r->size)
        return bad(errp, "field 'rank_cores': want one entry per rank");
    size_t len = 1;
    for (uint32_t i = 0; i < arr->via.array.size; i++) {
        const msgpack_object *e = &arr->via.array.ptr[i];
        if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size == 0
            || e->via.array.size > PL_SPEC_MAX_CPR)
            return bad(errp, "field 'rank_cores': want a non-empty array "
                             "of CPU ids for each rank");
        len += 1 + (size_t)e->via.array.size * 5; /* "4095," */
    }
    if (!(p = buf = malloc(len)))
        return pl_errprintf(errp, "out of memory");
    for (uint32_t i = 0; i < arr->via.array.size; i++) {
        const msgpack_object *e = &arr->via.array.ptr[i];
        if (i)
            *p++ = ';';
        for (uint32_t j = 0; j < e->via.array.size; j++) {
            const msgpack_object *c = &e->via.array.ptr[j];
            if (c->type != MSGPACK_OBJECT_POSITIVE_INTEGER
                || c->via.u64 >= PL_RUN_MAX_CPU) {
                free(buf);
                return bad(errp, "field 'rank_cores': bad CPU id");
            }
            p += sprintf(p, "%s%u", j ? "," : "", (unsigned)c->via.u64);
        }
    }
    *p = '\0';
    r->rank_cores = buf;
    return 0;
}

/* 'rank_gpus', if there, as "0,1;2;..." in r->rank_gpus: 'size'
 * arrays of GPU ids (Slurm's names), each of 1 to PL_SPEC_MAX_GPR. */
static int decode_rank_gpus(const msgpack_object *o,
                            struct pl_run *r, struct pl_error *errp)
{
    const msgpack_object *arr = NULL;
    char *buf;
    char *p;

    if (pl_mp_array(o, "rank_gpus", false, MPI_RANKS_MAX, &arr, errp) < 0)
        return -1;
    if (!arr)
        return 0;
    if (arr->via.array.size != r->size)
        return bad(errp, "field 'rank_gpus': want one entry per rank");
    size_t len = 1;
    for (uint32_t i = 0; i < arr->via.array.size; i++) {
        const msgpack_object *e = &arr->via.array.ptr[i];
        if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size == 0
            || e->via.array.size > PL_SPEC_MAX_GPR)
            return bad(errp, "field 'rank_gpus': want a non-empty array "
                             "of GPU ids for each rank");
        for (uint32_t j = 0; j < e->via.array.size; j++) {
            const msgpack_object *g = &e->via.array.ptr[j];
            if (g->type != MSGPACK_OBJECT_STR || g->via.str.size == 0
                || g->via.str.size > PL_GPU_ID_MAX
                || memchr(g->via.str.ptr, ',', g->via.str.size)
                || memchr(g->via.str.ptr, ';', g->via.str.size)
                || memchr(g->via.str.ptr, '\0', g->via.str.size))
                return bad(errp, "field 'rank_gpus': want GPU ids: "
                                 "non-empty strings without ',' or ';'");
            len += g->via.str.size + 1;
        }
        len++;
    }
    if (len > ENV_STRLEN)
        return bad(errp, "field 'rank_gpus': too long for the environment");
    if (!(p = buf = malloc(len)))
        return pl_errprintf(errp, "out of memory");
    for (uint32_t i = 0; i < arr->via.array.size; i++) {
        const msgpack_object *e = &arr->via.array.ptr[i];
        if (i)
            *p++ = ';';
        for (uint32_t j = 0; j < e->via.array.size; j++) {
            const msgpack_object *g = &e->via.array.ptr[j];
            if (j)
                *p++ = ',';
            memcpy(p, g->via.str.ptr, g->via.str.size);
            p += g->via.str.size;
        }
    }
    *p = '\0';
    r->rank_gpus = buf;
    return 0;
}

/* The fields of an MPI task's one entry: the launcher and where every
 * rank runs. */
static int decode_mpi(const msgpack_object *o, struct pl_run *r,
                      struct pl_error *errp)
{
    char *launcher = NULL;
    int l = PL_LAUNCHER_SRUN;

    if (!pl_mp_get(o, "hosts"))
        return bad(errp, "mpi task without placement");
    if (pl_mp_str(o, "launcher", false, 16, &launcher, errp) < 0)
        return -1;
    if (launcher && (l = pl_launcher_parse(launcher)) < 0) {
        pl_errprintf(errp, "field 'launcher': unknown launcher '%s' "
                     "(srun or mpirun)", launcher);
        free(launcher);
        errno = EPROTO;
        return -1;
    }
    free(launcher);
    r->launcher = l;
    if (pl_mp_strv(o, "hosts", true, 1, MPI_RANKS_MAX, PL_NODE_NAME_MAX,
                   &r->hosts, errp) < 0)
        return -1;
    if (pl_strv_len(r->hosts) != r->size)
        return bad(errp, "field 'hosts': want one host per rank");
    for (char **h = r->hosts; *h; h++) {
        if (!**h || strpbrk(*h, ",: \t\n"))
            return bad(errp, "field 'hosts': empty name, or one holding a "
                             "comma, colon or space");
        bool found = !r->nodelist;
        for (char **n = r->nodelist; n && *n && !found; n++)
            found = !strcmp(*n, *h);
        if (!found) {
            pl_errprintf(errp, "field 'hosts': '%s' is not in 'nodelist'",
                         *h);
            errno = EPROTO;
            return -1;
        }
    }
    if (decode_rank_cores(o, r, errp) < 0)
        return -1;
    return decode_rank_gpus(o, r, errp);
}

/* The optional fields that place one rank in its task; the rank itself is
 * already decoded.  Defaults: rank 0 of 1, alone on this node, comm none. */
static int decode_rank(const msgpack_object *o, struct pl_run *r,
                       struct pl_error *errp)
{
    char *comm = NULL;
    size_t nnodes = 1;
    int c = PL_COMM_NONE;

    r->size = 1;
    r->local_size = 1;
    if (pl_mp_uint(o, "size", false, PL_SPEC_MAX_RANKS, &r->size, errp) < 0
        || pl_mp_uint(o, "local_rank", false, PL_SPEC_MAX_RANKS - 1,
                      &r->local_rank, errp) < 0
        || pl_mp_uint(o, "local_size", false, PL_SPEC_MAX_RANKS, &r->local_size,
                      errp) < 0
        || pl_mp_uint(o, "node_rank", false, PL_SPEC_MAX_NODES - 1,
                      &r->node_rank, errp) < 0
        || pl_mp_strv(o, "nodelist", false, 1, PL_SPEC_MAX_NODES, PL_NODE_NAME_MAX,
                      &r->nodelist, errp) < 0
        || pl_mp_str(o, "comm", false, 16, &comm, errp) < 0
        || pl_mp_str(o, "master_addr", false, PL_NODE_NAME_MAX, &r->master_addr,
                     errp) < 0
        || pl_mp_uint(o, "master_port", false, 65535, &r->master_port,
                      errp) < 0)
        goto error;
    if (r->size == 0 || r->rank >= r->size) {
        bad(errp, "field 'rank' or 'size': want rank < size");
        goto error;
    }
    if (r->local_size == 0 || r->local_rank >= r->local_size
        || r->local_size > r->size) {
        bad(errp, "field 'local_rank' or 'local_size': want "
                  "local_rank < local_size <= size");
        goto error;
    }
    if (r->nodelist) {
        nnodes = pl_strv_len(r->nodelist);
        for (char **n = r->nodelist; *n; n++) {
            if (!**n || strchr(*n, ',')) {
                bad(errp, "field 'nodelist': empty name or a comma");
                goto error;
            }
        }
    }
    if (r->node_rank >= nnodes) {
        bad(errp, "field 'node_rank': not an index in 'nodelist'");
        goto error;
    }
    if (comm && (c = pl_comm_parse(comm)) < 0) {
        pl_errprintf(errp, "field 'comm': unknown comm '%s'", comm);
        errno = EPROTO;
        goto error;
    }
    r->comm = c;
    if (r->comm == PL_COMM_TORCH
        && (!r->master_addr || !*r->master_addr
            || r->master_port == 0)) {
        bad(errp, "comm torch: want 'master_addr' and 'master_port' "
                  "(1..65535)");
        goto error;
    }
    if (r->master_port == 0 && pl_mp_get(o, "master_port")) {
        bad(errp, "field 'master_port': out of range");
        goto error;
    }
    if (r->comm == PL_COMM_MPI && decode_mpi(o, r, errp) < 0)
        goto error;
    free(comm);
    return 0;
error:
    free(comm);
    return -1;
}

int pl_run_decode(const msgpack_object *o, struct pl_run *r,
                        bool *have_id, struct pl_error *errp)
{
    memset(r, 0, sizeof(*r));
    *have_id = false;
    if (o->type != MSGPACK_OBJECT_MAP)
        return bad(errp, "task entry is not a map");
    for (uint32_t i = 0; i < o->via.map.size; i++)
        if (o->via.map.ptr[i].key.type != MSGPACK_OBJECT_STR)
            return bad(errp, "task entry key is not a string");
    if (pl_mp_uint(o, "id", true, UINT64_MAX, &r->id, errp) < 0
        || pl_mp_uint(o, "attempt", true, UINT32_MAX, &r->attempt, errp)
               < 0)
        return -1;
    *have_id = true;
    /* the rank next, so that a bad entry is reported for its rank */
    if (pl_mp_uint(o, "rank", false, PL_SPEC_MAX_RANKS - 1, &r->rank, errp) < 0)
        return -1;
    if (pl_mp_strv(o, "argv", true, 1, PL_SPEC_MAX_ARGV, PL_SPEC_MAX_ARG, &r->argv, errp)
            < 0
        || pl_mp_strv(o, "env", false, 0, PL_RUN_MAX_ENV, PL_SPEC_MAX_ARG, &r->env, errp)
               < 0
        || pl_mp_str(o, "cwd", false, PL_SPEC_MAX_CWD, &r->cwd, errp) < 0
        || pl_mp_uintv(o, "cores", true, PL_SPEC_MAX_CPR, PL_RUN_MAX_CPU - 1,
                       &r->cores, &r->ncores, errp) < 0
        || pl_mp_uintv(o, "gpus", false, PL_SPEC_MAX_GPR, UINT32_MAX, &r->gpus,
                       &r->ngpus, errp) < 0
        || pl_mp_str(o, "stdout", true, PL_RUN_MAX_PATH, &r->out, errp) < 0
        || pl_mp_str(o, "stderr", true, PL_RUN_MAX_PATH, &r->err, errp) < 0
        || pl_mp_double(o, "timeout", false, &r->timeout, errp) < 0
        || pl_mp_uint(o, "output_limit", false, PL_SPEC_MAX_OUTPUT,
                      &r->output_limit, errp) < 0)
        return -1;
    for (char **e = r->env; e && *e; e++) {
        const char *eq = strchr(*e, '=');
        if (!eq || eq == *e)
            return bad(errp, "field 'env': want KEY=VALUE entries");
    }
    if (r->cwd && !*r->cwd)
        return bad(errp, "field 'cwd': empty");
    uint64_t pf = 0;
    if (pl_mp_uint(o, "prefetch", false, PL_SPEC_MAX_CPR, &pf, errp) < 0)
        return -1;
    r->prefetch = (uint32_t)pf;
    if (r->ncores == 0 && !pl_mp_get(o, "pool") && !r->prefetch)
        return bad(errp, "field 'cores': empty");
    if (r->prefetch && (r->ncores || r->ngpus))
        return bad(errp, "field 'prefetch': with cores or GPUs");
    if (!*r->out || !*r->err)
        return bad(errp, "field 'stdout' or 'stderr': empty path");
    if (!isfinite(r->timeout) || r->timeout < 0
        || r->timeout > PL_SPEC_MAX_TIMEOUT)
        return bad(errp, "field 'timeout': out of range");
    if (decode_rank(o, r, errp) < 0 || decode_pool(o, r, errp) < 0
        || decode_pycall(o, r, errp) < 0)
        return -1;
    if (r->prefetch && (r->size != 1 || r->comm != PL_COMM_NONE || r->pool
                        || r->fn != PL_FN_NONE))
        return bad(errp, "field 'prefetch': only a one-rank command");
    return 0;
}

