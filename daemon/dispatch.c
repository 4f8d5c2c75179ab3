/* daemon/dispatch.c - place queued tasks, and send their RUNs once stored
 *
 * At the end of a batch the scheduler places what fits (daemon/sched.h)
 * and the assignments are recorded in the batch's transaction; only
 * after its commit does each node get one RUN with the entries of the
 * ranks placed there, so that a task never runs unrecorded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon_private.h"
#include "daemon/pool.h"
#include "proto/log.h"
#include "proto/run.h"
#include "proto/strv.h"

struct placed {
    struct pl_dtask **t;
    size_t n, cap;
};

static void place_cb(struct pl_dtask *t, void *arg)
{
    struct placed *p = arg;

    /* N.B. out of memory the task stays assigned without a RUN, as if
     * its RUN were lost */
    if (pl_grow(&p->t, &p->cap, p->n, 1, sizeof(*p->t)) == 0)
        p->t[p->n++] = t;
}

/* A prefetched task bound to free cores: its RUN goes again with them
 * (the agent starts it there, unless an end started it already). */
static void bound_cb(struct pl_dtask *t, void *arg)
{
    struct pl_daemon *d = arg;

    if (t->rank[0].state != PL_ST_ASSIGNED)
        return;
    t->rank[0].run_seq = RUN_UNSENT;
    if (pl_dispatch_unsent(d, t) < 0)
        pl_log(LOG_ERR, "task %llu: its run with cores: out of memory",
               (unsigned long long)t->id);
}

/* Take back a prefetched task its agent has not started (a cordon, a
 * reservation, a task of a higher priority): a KILL of queued entries
 * only, once its RUN has left; its agent answers 'canceled' with 'lost'
 * and the task is queued again, or its 'running' comes and it runs. */
static bool recall_cb(struct pl_dtask *t, void *arg)
{
    struct pl_daemon *d = arg;
    struct pl_rank *k = &t->rank[0];

    if (k->state != PL_ST_ASSIGNED || k->run_seq == RUN_UNSENT)
        return false;
    struct pl_kill kill = { .id = t->id, .attempt = t->attempt, .one = true,
                            .rank = 0, .grace = 0, .queued_only = true };
    pl_orders_kill(d, k->node, &kill);
    return true;
}

void pl_dispatch_recall_all(struct pl_daemon *d)
{
    size_t n = pl_sched_pref_recall_all(d->sched, recall_cb, d);

    if (n)
        pl_log(LOG_NOTICE, "%zu prefetched tasks taken back from their "
               "agents: nothing starts while the state cannot be stored", n);
}

void pl_dispatch_schedule(struct pl_daemon *d)
{
    struct placed p = { 0 };

    d->want_sched = false;
    pl_sched_pref_bind(d->sched, bound_cb, d);
    pl_sched_run(d->sched, place_cb, &p);
    pl_sched_pref_recall(d->sched, recall_cb, d);
    pl_poolctl_schedule(d, place_cb, &p);
    /* N.B. out of memory, as in place_cb */
    (void)pl_grow(&d->unsent, &d->capunsent, d->nunsent, p.n,
                  sizeof(*d->unsent));
    for (size_t i = 0; i < p.n; i++) {
        struct pl_dtask *t = p.t[i];
        pl_dtask_placed(d, t);
        for (uint32_t r = 0; r < pl_dtask_launched(t); r++)
            t->rank[r].run_seq = RUN_UNSENT;
        if (d->nunsent < d->capunsent) {
            d->unsent[d->nunsent++] = (struct pl_unsent){ t->id,
                                                          t->attempt };
            t->unsent = true;
        }
        pl_orders_placed(d, t);
    }
    free(p.t);
}

int pl_dispatch_unsent(struct pl_daemon *d, struct pl_dtask *t)
{
    if (t->unsent)
        return 0;
    if (pl_grow(&d->unsent, &d->capunsent, d->nunsent, 1,
                sizeof(*d->unsent)) < 0)
        return -1;
    d->unsent[d->nunsent++] = (struct pl_unsent){ t->id, t->attempt };
    t->unsent = true;
    return 0;
}

/* Whether rank 'r' of 't' waits for its RUN to 'n': still assigned there,
 * in the attempt that was placed. */
static bool run_waits(const struct pl_dtask *t, uint32_t r,
                      const struct pl_node *n)
{
    const struct pl_rank *k = &t->rank[r];

    return k->node == n && k->state == PL_ST_ASSIGNED
           && k->run_seq == RUN_UNSENT;
}

/* Each rank's CPU ids ("0,1;2;..") or, with 'gpus', its GPU ids (Slurm's:
 * each rank finds them in its own step's list), as a new string, or
 * NULL (ENOMEM). */
static char *rank_lists(const struct pl_dtask *t, bool gpus)
{
    size_t len = 1, off = 0;
    char *s;

    for (uint32_t q = 0; q < t->ranks; q++) {
        const struct pl_rank *k = &t->rank[q];
        len += 1;
        for (uint32_t i = 0; i < (gpus ? k->ngpus : k->ncores); i++)
            len += 1 + (gpus ? strlen(k->node->gpu[k->gpu_idx[i]]) : 20);
    }
    if (!(s = malloc(len)))
        return NULL;
    s[0] = '\0';
    for (uint32_t q = 0; q < t->ranks; q++) {
        const struct pl_rank *k = &t->rank[q];
        if (q)
            s[off++] = ';';
        for (uint32_t i = 0; i < (gpus ? k->ngpus : k->ncores); i++) {
            if (gpus)
                off += (size_t)snprintf(s + off, len - off, "%s%s",
                                        i ? "," : "",
                                        k->node->gpu[k->gpu_idx[i]]);
            else
                off += (size_t)snprintf(s + off, len - off, "%s%llu",
                                        i ? "," : "",
                                        (unsigned long long)k->node
                                            ->cpu[k->core_idx[i]]);
        }
        s[off] = '\0';
    }
    return s;
}

/* A pool task's rank: the pool, its job's attempt, the worker of each
 * rank ('group', t->ranks entries, borrowed by 'run'). */
static void pool_fields(const struct pl_dtask *t, uint32_t r,
                        struct pl_run *run, uint64_t *group)
{
    const struct pl_pool *p = t->pool;

    for (uint32_t q = 0; q < t->ranks; q++)
        group[q] = t->rank[q].slot;
    run->pool = (char *)p->name;
    run->fn = t->fn;
    run->pool_job = p->job;
    run->pool_attempt = p->attempt;
    run->world_rank = t->rank[r].slot;
    run->group = group;
}

/* A Python call's fields of 'run': its input as stored (read into 'in',
 * which 'run' borrows), where a large result goes (into 'result').  0,
 * or -1 (logged). */
static int pycall_fields(struct pl_daemon *d, const struct pl_dtask *t,
                         struct pl_run *run, struct pl_db_pyinput *in,
                         char *result, size_t len)
{
    struct pl_error err;

    if (pl_db_pyinput_get(d->db, t->id, in, &err) < 0) {
        pl_log(LOG_ERR, "task %llu: %s", (unsigned long long)t->id,
               err.text);
        return -1;
    }
    if (pl_path_task_result(d->dir, t->id, t->attempt, result, len) < 0) {
        pl_log(LOG_ERR, "task %llu: its result's path is too long",
               (unsigned long long)t->id);
        return -1;
    }
    run->fn = PL_FN_PYCALL;
    run->input = in->input;
    run->ninput = in->ninput;
    run->input_file = in->input_file;
    run->py_prelude = in->prelude;
    run->python = in->python;
    run->result_file = result;
    run->refs = in->refs;
    run->nrefs = in->nrefs;
    return 0;
}

/* "NAME=<v>" into 'buf' (48 bytes; 'name' is one of ours, under 24).
 * N.B. not snprintf(): every array element's RUN has two, at 0.8k
 * instructions each. */
static void env_u64(char buf[48], const char *name, uint64_t v)
{
    size_t n = 0;

    pl_put_s(buf, 48, &n, name, strlen(name));
    pl_put_u(buf, 48, &n, (unsigned long long)v);
}

/* Pack the entry of rank 'r' of 't' (docs/protocol.md, 202): a struct
 * pl_run borrowing from the task and its nodes. */
static void pack_rank(struct pl_daemon *d, struct pl_wbuf *w,
                      const struct pl_dtask *t, uint32_t r)
{
    const struct pl_rank *k = &t->rank[r];
    char out[PL_PATH_MAX + 64], err[PL_PATH_MAX + 64];
    char aidx[48], aid[48];
    uint64_t cores[k->ncores + 1], gpus[k->ngpus + 1];
    uint32_t ne = (uint32_t)pl_strv_len(t->env);
    char *env[ne + 3];
    char *nodes[t->nnodes + 1], **hosts = NULL;
    char *rank_cores = NULL, *rank_gpus = NULL;
    uint64_t group[t->pool ? t->ranks : 1];

    pl_path_task_log(d->dir, t->id, t->attempt, false, false, out,
                     sizeof(out));
    pl_path_task_log(d->dir, t->id, t->attempt, true, false, err,
                     sizeof(err));
    for (uint32_t i = 0; i < k->ncores; i++)
        cores[i] = k->node->cpu[k->core_idx[i]];
    for (uint32_t i = 0; i < k->ngpus; i++)
        gpus[i] = k->gpu_idx[i];
    struct pl_run run = {
        .id = t->id, .attempt = t->attempt, .rank = r, .size = t->ranks,
        .local_rank = k->local_rank, .local_size = k->local_size,
        .node_rank = k->node_rank, .comm = t->comm,
        .argv = t->argv, .env = t->env, .cwd = t->cwd,
        .cores = cores, .ncores = k->ncores, .gpus = gpus,
        .ngpus = k->ngpus, .out = out, .err = err, .timeout = t->timeout,
        .output_limit = t->output_limit,
        /* placed beyond the node's free cores: its agent chooses them */
        .prefetch = k->pref ? t->cores_per_rank : 0,
    };
    if (t->array_id) {
        /* an array element: its index and array, after the spec's env */
        memcpy(env, t->env ? t->env : env, ne * sizeof(*env));
        env_u64(aidx, "PILOT_ARRAY_INDEX=", t->array_index);
        env_u64(aid, "PILOT_ARRAY_ID=", t->array_id);
        env[ne] = aidx;
        env[ne + 1] = aid;
        env[ne + 2] = NULL;
        run.env = env;
    }
    /* N.B. a RUN sent again (pl_orders_again()) may be for a rank whose
     * task has other ranks ended meanwhile: their nodes are released
     * (NULL), the task is being stopped (fuzz_agentseq found this) */
    bool whole = true;
    for (uint32_t q = 0; q < t->ranks; q++)
        if (!t->rank[q].node)
            whole = false;
    if (t->ranks > 1 || t->comm != PL_COMM_NONE) {
        uint32_t nn = 0;
        /* the ranks are in node_rank order */
        for (uint32_t q = 0; q < t->ranks && nn < t->nnodes; q++)
            if (t->rank[q].node
                && (!nn || strcmp(nodes[nn - 1], t->rank[q].node->name)))
                nodes[nn++] = (char *)t->rank[q].node->name;
        nodes[nn] = NULL;
        run.nodelist = nodes;
    }
    if (t->pool && t->fn != PL_FN_POOL && whole)
        pool_fields(t, r, &run, group);
    struct pl_db_pyinput in = { 0 };
    char result[PL_PATH_MAX + 64];
    if (t->fn == PL_FN_PYCALL && pycall_fields(d, t, &run, &in, result,
                                               sizeof(result)) < 0) {
        run.fn = PL_FN_PYCALL; /* without a result_file: the agent */
        run.result_file = NULL; /* refuses it, and the task fails */
    }
    if (t->comm == PL_COMM_TORCH && t->rank[0].node) {
        run.master_addr = (char *)t->rank[0].node->name;
        run.master_port = t->port;
    }
    /* not whole: no hosts, so the agent refuses the entry (the task fails
     * as it was failing) */
    if (t->comm == PL_COMM_MPI && whole) {
        run.launcher = t->mpirun ? PL_LAUNCHER_MPIRUN : PL_LAUNCHER_SRUN;
        if (!(hosts = calloc(t->ranks + 1, sizeof(*hosts)))
            || !(rank_cores = rank_lists(t, false))
            || (t->gpus_per_rank && !(rank_gpus = rank_lists(t, true)))) {
            /* the agent refuses the entry: the task fails, not hangs */
            pl_log(LOG_ERR, "task %llu: RUN entry: out of memory",
                   (unsigned long long)t->id);
            free(hosts);
            free(rank_cores);
            hosts = NULL;
            rank_cores = NULL;
        }
        for (uint32_t q = 0; hosts && q < t->ranks; q++)
            hosts[q] = (char *)t->rank[q].node->name;
        run.hosts = hosts;
        run.rank_cores = rank_cores;
        run.rank_gpus = rank_gpus;
    }
    pl_run_encode(w, &run);
    pl_db_pyinput_clear(&in);
    free(hosts);
    free(rank_cores);
    free(rank_gpus);
}

/* A RUN holds entries of at most this many bytes together, unless one
 * alone is larger: a node of 64 cores given 64 tasks of 1.5 MiB commands
 * (PL_SPEC_MAX_EXEC) would otherwise get a 96 MiB frame, over what the
 * agent's socket takes (PL_MSG_MAX): the RUN would be dropped and the
 * tasks left assigned (issue 12). */
#define RUN_BYTES (PL_MSG_MAX / 4)

/* An upper bound of the bytes pack_rank() writes for a rank of 't'. */
static size_t entry_bytes(const struct pl_daemon *d, const struct pl_dtask *t)
{
    /* the command and env (as execve counts them: more than msgpack's
     * headers), the two output paths, the cwd, the fixed fields, the
     * node list, and an MPI task's hosts and every rank's cores and
     * GPUs (a node name is at most 255 bytes, a CPU id 20 digits) */
    size_t n = 1024 + pl_spec_exec_bytes(t->argv, t->env)
               + 2 * (strlen(d->dir) + 96) + (t->cwd ? strlen(t->cwd) : 0)
               + (size_t)t->nnodes * 260;

    if (t->comm == PL_COMM_MPI)
        n += (size_t)t->ranks * (260 + 21 * t->cores_per_rank
                                 + 260 * t->gpus_per_rank);
    /* a Python call's input is read at dispatch: its largest */
    if (t->fn == PL_FN_PYCALL)
        n += PL_SPEC_MAX_INPUT + PL_SPEC_MAX_PRELUDE + PL_SPEC_MAX_PYTHON
             + PL_SPEC_MAX_CWD + strlen(d->dir) + 96
             /* and its refs' results, each inline or a path */
             + (size_t)t->nrefs * (PL_PY_RESULT_INLINE + PL_RUN_MAX_PATH
                                   + 64);
    return n;
}

/* How many of the ranks waiting for node 'n', among the first 'm'
 * unsent tasks in order, the next RUN takes: those that fit in RUN_BYTES
 * together, at least one.  Their bound in *bytes. */
static uint32_t run_fill(struct pl_daemon *d, const struct pl_node *n,
                         size_t m, size_t *bytes)
{
    uint32_t cnt = 0;

    *bytes = 0;
    for (size_t i = 0; i < m; i++) {
        struct pl_dtask *t = pl_sched_task_get(d->sched, d->unsent[i].id);
        size_t eb = 0; /* counted once a rank of 't' waits for 'n' */
        for (uint32_t r = 0; r < pl_dtask_launched(t); r++) {
            if (!run_waits(t, r, n))
                continue;
            if (!eb)
                eb = entry_bytes(d, t);
            if (cnt > 0 && *bytes + eb > RUN_BYTES)
                return cnt;
            cnt++;
            *bytes += eb;
        }
    }
    return cnt;
}

/* A rank waiting for its RUN: on the node at 'k' (the scheduler's
 * order), of the i-th unsent task. */
struct waiting {
    uint32_t k, i, r;
};

static int waiting_cmp(const void *a, const void *b)
{
    const struct waiting *x = a, *y = b;

    if (x->k != y->k)
        return x->k < y->k ? -1 : 1;
    if (x->i != y->i)
        return x->i < y->i ? -1 : 1;
    return x->r < y->r ? -1 : x->r > y->r;
}

/* The RUNs of the first 'm' unsent tasks, each node's in order, from the
 * waiting ranks sorted by node: the nodes that have none are not looked
 * at (a walk over every node, each over every task, cost a batch
 * O(nodes x tasks): issue 16).  0, or -1 (ENOMEM: nothing sent). */
static int send_by_node(struct pl_daemon *d, size_t m)
{
    struct waiting *w = NULL;
    size_t nw = 0, cap = 0;

    for (size_t i = 0; i < m; i++) {
        struct pl_dtask *t = pl_sched_task_get(d->sched, d->unsent[i].id);
        for (uint32_t r = 0; r < pl_dtask_launched(t); r++) {
            const struct pl_node *n = t->rank[r].node;
            if (!n || !n->pidx || !run_waits(t, r, n))
                continue;
            if (pl_grow(&w, &cap, nw, 1, sizeof(*w)) < 0) {
                free(w);
                return -1;
            }
            w[nw++] = (struct waiting){ n->pidx_at, (uint32_t)i, r };
        }
    }
    qsort(w, nw, sizeof(*w), waiting_cmp);
    for (size_t j = 0, end; j < nw; j = end) {
        struct pl_node *n = pl_sched_node_at(d->sched, w[j].k);
        struct pl_link *l = pl_agents_link(d, n);
        for (end = j; end < nw && w[end].k == w[j].k; end++)
            ;
        if (n->state != PL_NODE_UP || !l)
            continue;
        /* as many RUNs as it takes: a packed rank no longer waits */
        for (size_t q = j, cnt; q < end; q += cnt) {
            size_t bytes = 0;
            struct pl_out *o;
            for (cnt = 0; q + cnt < end; cnt++) {
                struct pl_dtask *t = pl_sched_task_get(
                    d->sched, d->unsent[w[q + cnt].i].id);
                size_t eb = entry_bytes(d, t);
                if (cnt > 0 && bytes + eb > RUN_BYTES)
                    break;
                bytes += eb;
            }
            if (!(o = pl_out_agent(d, n)))
                break;
            /* numbered per node, remembered until the agent's GOT */
            uint64_t seq = pl_orders_add(l, NULL);
            pl_run_msg_begin(&o->w, seq, (uint32_t)cnt);
            for (size_t x = q; x < q + cnt; x++) {
                struct pl_dtask *t = pl_sched_task_get(d->sched,
                                                       d->unsent[w[x].i].id);
                pack_rank(d, &o->w, t, w[x].r);
                t->rank[w[x].r].run_seq = seq;
            }
            o->run = true;
            pl_out_push(d, o);
            pl_log(LOG_DEBUG, "run %zu ranks on %s (%zu bytes at most)", cnt,
                   n->name, bytes);
        }
    }
    free(w);
    return 0;
}

void pl_dispatch_send(struct pl_daemon *d)
{
    size_t m = 0;

    /* the tasks still as they were placed: one that changed meanwhile
     * (while a failed commit was retried: its node lost, it requeued)
     * is skipped */
    for (size_t i = 0; i < d->nunsent; i++) {
        struct pl_dtask *t = pl_sched_task_get(d->sched, d->unsent[i].id);
        if (t)
            t->unsent = false;
        if (t && t->rank && t->state == PL_ST_ASSIGNED
            && t->attempt == d->unsent[i].attempt)
            d->unsent[m++] = d->unsent[i];
    }
    if (m && send_by_node(d, m) == 0)
        m = 0; /* sent */
    /* out of memory: node by node, as it was */
    for (size_t k = 0; m && k < pl_sched_nnodes(d->sched); k++) {
        struct pl_node *n = pl_sched_node_at(d->sched, k);
        struct pl_link *l = pl_agents_link(d, n);
        uint32_t cnt;
        size_t bytes;
        struct pl_out *o;
        if (n->state != PL_NODE_UP || !l)
            continue;
        /* as many RUNs as it takes: a packed rank no longer waits */
        while ((cnt = run_fill(d, n, m, &bytes)) > 0
               && (o = pl_out_agent(d, n))) {
            /* numbered per node, remembered until the agent's GOT */
            uint64_t seq = pl_orders_add(l, NULL);
            pl_run_msg_begin(&o->w, seq, cnt);
            for (size_t i = 0, packed = 0; i < m && packed < cnt; i++) {
                struct pl_dtask *t = pl_sched_task_get(d->sched,
                                                       d->unsent[i].id);
                for (uint32_t r = 0; r < pl_dtask_launched(t)
                                     && packed < cnt; r++)
                    if (run_waits(t, r, n)) {
                        pack_rank(d, &o->w, t, r);
                        t->rank[r].run_seq = seq;
                        packed++;
                    }
            }
            o->run = true;
            pl_out_push(d, o);
            pl_log(LOG_DEBUG, "run %u ranks on %s (%zu bytes at most)", cnt,
                   n->name, bytes);
        }
    }
    d->nunsent = 0;
}
