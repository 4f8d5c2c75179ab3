/* daemon/alloc.c - allocations that join a running pilot (pilot grow)
 *
 * An allocation is a Slurm job of agents only: pilotd writes its batch
 * script and runs sbatch; its agents connect across jobs with the
 * pilot's keys and register with their job id and its end.  Near that
 * end its nodes are cordoned (drained), then leave: what still runs
 * there goes back to the queue, not charged to --retries, and the job
 * is cancelled.  Idle allocations are released (pilot shrink, or
 * pilot up --grow's idle=), and with --grow pilotd asks for more while
 * queued work waits, sized from the queue, backing off after failures.
 * Each allocation is a meta row "alloc.N" (JSON) of the state database.
 * docs/grow.md.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/alloc.h"
#include "daemon/alloc_private.h"
#include "daemon/child.h"
#include "daemon/daemon_private.h"
#include "daemon/slurmjob.h"
#include "proto/log.h"
#include "proto/sbatch.h"
#include "proto/strv.h"

const char *const alloc_state_names[] = { "?", "pending", "running",
                                          "draining", "ended" };

#define LEAVE_MARGIN 15.0   /* s before its end a draining one leaves */
#define POLL_PENDING 2.0    /* s between looks at a pending job */
#define POLL_RUNNING 10.0   /* ... at a running one (its end may move) */
#define GROW_SETTLE 3.0     /* s the queue must wait before auto-grow */
#define GROW_SCAN 5.0       /* s between looks at the queue's shape */

/* ------------------------------------------------------------ the table */

bool alloc_live(const struct pl_alloc *a)
{
    return a->state != A_ENDED;
}

struct pl_alloc *alloc_find(const struct pl_allocs *s, uint64_t id)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i]->id == id)
            return s->v[i];
    return NULL;
}

static struct pl_alloc *find_job(const struct pl_allocs *s, long job)
{
    /* the newest: a job id is not reused while pilotd lives */
    for (size_t i = s->n; i-- > 0;)
        if (s->v[i]->job == job)
            return s->v[i];
    return NULL;
}

static bool has_name(const struct pl_alloc *a, const char *name)
{
    for (size_t i = 0; a->names && a->names[i]; i++)
        if (!strcmp(a->names[i], name))
            return true;
    return false;
}

uint64_t pl_alloc_of_node(const struct pl_daemon *d, const char *name)
{
    const struct pl_allocs *s = d->allocs;

    for (size_t i = 0; s && i < s->n; i++)
        if (alloc_live(s->v[i]) && has_name(s->v[i], name))
            return s->v[i]->id;
    return 0;
}

bool pl_alloc_may_grow(const struct pl_daemon *d)
{
    return d->allocs && d->allocs->grow;
}

struct pl_alloc *alloc_new(struct pl_daemon *d)
{
    struct pl_allocs *s = d->allocs;
    struct pl_alloc *a;

    if (pl_grow(&s->v, &s->cap, s->n, 1, sizeof(*s->v)) < 0
        || !(a = calloc(1, sizeof(*a))))
        return NULL;
    a->d = d;
    a->id = s->next++;
    a->state = A_PENDING;
    a->drain = PL_GROW_DRAIN;
    s->v[s->n++] = a;
    return a;
}

int alloc_add_name(struct pl_alloc *a, const char *name)
{
    size_t n = pl_strv_len(a->names);
    char **v = realloc(a->names, (n + 2) * sizeof(*v));

    if (!v)
        return -1;
    a->names = v;
    if (!(v[n] = strdup(name)))
        return -1;
    v[n + 1] = NULL;
    return 0;
}

json_t *alloc_json(const struct pl_alloc *a)
{
    json_t *names = json_array();

    for (size_t i = 0; a->names && a->names[i]; i++)
        json_array_append_new(names, json_string(a->names[i]));
    return json_pack("{s:I, s:I, s:s, s:b, s:i, s:s, s:s, s:f, s:f, s:f, "
                     "s:f, s:f, s:b, s:o, s:s}",
                     "id", (json_int_t)a->id, "job", (json_int_t)a->job,
                     "state", alloc_state_names[a->state], "auto", a->automatic,
                     "nodes", (int)a->nodes, "time", a->time,
                     "partition", a->partition, "drain", a->drain,
                     "submitted", a->submitted, "started", a->started,
                     "ended", a->ended, "end_time", a->end_time,
                     "joined", a->joined, "names", names, "why", a->why);
}

/* Write 'a' into the open transaction (meta row alloc.N). */
void alloc_store(struct pl_alloc *a)
{
    char key[48];
    struct pl_error err;
    json_t *j = alloc_json(a);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;

    snprintf(key, sizeof(key), "alloc.%010llu", (unsigned long long)a->id);
    if (!text || pl_db_meta_set(a->d->db, key, text, &err) < 0)
        pl_log(LOG_ERR, "allocation %llu: not stored: %s",
               (unsigned long long)a->id, text ? err.text : "out of memory");
    free(text);
    json_decref(j);
}

void alloc_set_state(struct pl_alloc *a, int state, const char *why)
{
    if (why && why != a->why)
        snprintf(a->why, sizeof(a->why), "%s", why);
    if (a->state != state)
        pl_log(LOG_NOTICE, "allocation %llu (job %ld): %s%s%s",
               (unsigned long long)a->id, a->job, alloc_state_names[state],
               why ? ": " : "", why ? why : "");
    a->state = state;
    if (state == A_ENDED && !a->ended)
        a->ended = pl_now();
    alloc_store(a);
}

/* ------------------------------------------------------------ nodes */

#define CORDON_PREFIX "allocation "

static void cordon(struct pl_node *n, const char *why)
{
    char *c = strdup(why);

    if (!c)
        return;
    free(n->cordon);
    n->cordon = c;
    n->vet_cordon = false;
    pl_node_changed(n); /* the placement index */
}

/* The nodes of 'a' that joined it and are still its, up. */
static void each_node(struct pl_alloc *a,
                      void (*fn)(struct pl_alloc *, struct pl_node *))
{
    for (size_t i = 0; a->names && a->names[i]; i++) {
        struct pl_node *n = pl_sched_node_find(a->d->sched, a->names[i]);
        if (n && n->state == PL_NODE_UP
            && pl_alloc_of_node(a->d, n->name) == a->id)
            fn(a, n);
    }
}

static void drain_node(struct pl_alloc *a, struct pl_node *n)
{
    char why[160];

    snprintf(why, sizeof(why), CORDON_PREFIX "%llu drains: %s",
             (unsigned long long)a->id, a->why);
    cordon(n, why);
}

static void leave_node(struct pl_alloc *a, struct pl_node *n)
{
    char why[160];

    snprintf(why, sizeof(why), CORDON_PREFIX "%llu left: %s",
             (unsigned long long)a->id, a->why);
    cordon(n, why);
    pl_agents_leave(a->d, n, why);
}

/* What starts on 'n' must have ended when 'a' drains (place.c: a task
 * whose --timeout is longer goes elsewhere, or waits). */
static void set_ends(struct pl_alloc *a, struct pl_node *n)
{
    n->ends = a->end_time > 0 ? a->end_time - a->drain : 0;
}

static void drain(struct pl_alloc *a, const char *why)
{
    alloc_set_state(a, A_DRAINING, why);
    each_node(a, drain_node);
}

/* Its nodes leave (their tasks are queued again), its job is cancelled,
 * it has ended. */
void alloc_leave(struct pl_alloc *a, const char *why)
{
    struct pl_error err;
    char text[sizeof(a->why)];

    snprintf(text, sizeof(text), "%s", why); /* 'why' may be a->why */
    why = text;
    snprintf(a->why, sizeof(a->why), "%s", why);
    each_node(a, leave_node);
    if (a->job > 0 && pl_slurmjob_cancel(a->job, &err) < 0)
        pl_log(LOG_WARNING, "allocation %llu: %s", (unsigned long long)a->id,
               err.text);
    alloc_set_state(a, A_ENDED, why);
    a->d->want_sched = true;
}

/* Whether every node of 'a' runs nothing (and it has one up). */
static bool idle(struct pl_alloc *a)
{
    bool any = false;

    for (size_t i = 0; a->names && a->names[i]; i++) {
        struct pl_node *n = pl_sched_node_find(a->d->sched, a->names[i]);
        if (!n || n->state != PL_NODE_UP
            || pl_alloc_of_node(a->d, n->name) != a->id)
            continue;
        if (n->running > 0)
            return false;
        any = true;
    }
    return any;
}

/* ------------------------------------------------------------ sbatch */

/* 's' in single quotes for the shell. */
static void shq(FILE *fp, const char *s)
{
    fputc('\'', fp);
    for (; *s; s++)
        fputs(*s == '\'' ? "'\\''" : (char[]){ *s, '\0' }, fp);
    fputc('\'', fp);
}

/* The batch script of 'a': agents only, one per node, connecting to
 * this pilotd with the pilot's keys.  0, or -1 with errp. */
static int write_script(struct pl_alloc *a, char *path, size_t len,
                        struct pl_error *errp)
{
    struct pl_daemon *d = a->d;
    const char *gpn = getenv("SLURM_GPUS_ON_NODE");
    int gpus = gpn ? atoi(gpn) : 0;
    char suffix[64];
    FILE *fp;

    snprintf(path, len, "%s/alloc-%llu.sbatch", d->dir,
             (unsigned long long)a->id);
    if (!(fp = pl_sbatch_create(path, errp)))
        return -1;
    fprintf(fp, "#!/bin/bash\n");
    fprintf(fp, "#SBATCH --job-name=pilot-%s-a%llu\n", d->id,
            (unsigned long long)a->id);
    fprintf(fp, "#SBATCH --nodes=%u\n", a->nodes);
    fprintf(fp, "#SBATCH --ntasks-per-node=1\n");
    fprintf(fp, "#SBATCH --exclusive\n");
    fprintf(fp, "#SBATCH --no-requeue\n");
    if (a->time[0])
        fprintf(fp, "#SBATCH --time=%s\n", a->time);
    if (a->partition[0])
        fprintf(fp, "#SBATCH --partition=%s\n", a->partition);
    /* its nodes are like the pilot's own: the same GPUs */
    if (gpus > 0)
        fprintf(fp, "#SBATCH --gres=gpu:%d\n", gpus);
    snprintf(suffix, sizeof(suffix), "/logs/alloc-%llu-%%j.out",
             (unsigned long long)a->id);
    pl_sbatch_path(fp, "--output", d->dir, suffix);
    fprintf(fp, "# written by pilotd for allocation %llu of pilot %s\n",
            (unsigned long long)a->id, d->id);
    /* the agents tell pilotd the job's end: Slurm 22.05 has no variable
     * for it */
    fprintf(fp, "end=$(squeue -h -j \"$SLURM_JOB_ID\" -o %%e 2>/dev/null)\n");
    fprintf(fp, "end=$(date -d \"$end\" +%%s 2>/dev/null) && "
                "export PILOT_JOB_END=\"$end\"\n");
    fprintf(fp, "exec srun --nodes=\"$SLURM_JOB_NUM_NODES\" "
                "--ntasks=\"$SLURM_JOB_NUM_NODES\" --ntasks-per-node=1 "
                "--kill-on-bad-exit=0 --cpu-bind=none --mem=0 "
                "--job-name=pilot-agents "
                "--cpus-per-task=\"$SLURM_CPUS_ON_NODE\"");
    if (gpus > 0)
        fprintf(fp, " --gres=gpu:%d", gpus);
    fprintf(fp, " \\\n    ");
    char agent[PL_PATH_MAX + 16];
    snprintf(agent, sizeof(agent), "%s/pilot-agent", d->bindir);
    shq(fp, agent);
    fprintf(fp, " --connect ");
    shq(fp, d->aep);
    fprintf(fp, " --dir ");
    shq(fp, d->dir);
    fprintf(fp, " --keys ");
    shq(fp, d->keydir);
    fprintf(fp, " --orphan-timeout 600\n");
    return pl_sbatch_close(fp, path, false, errp);
}

/* The last line of sbatch's output (its error), into 'buf'. */
static void last_line(const char *text, char *buf, size_t len)
{
    const char *end = text + strlen(text);

    while (end > text && (end[-1] == '\n' || end[-1] == ' '))
        end--;
    const char *p = end;
    while (p > text && p[-1] != '\n')
        p--;
    if (!strncmp(p, "sbatch: error: ", 15))
        p += 15;
    snprintf(buf, len, "%.*s", (int)(end - p), p);
    if (!buf[0])
        snprintf(buf, len, "no message");
}

static void reply(struct pl_alloc *a, int errnum, const char *text)
{
    struct pl_req r = { .rid = a->rid, .ridlen = a->ridlen, .seq = a->seq };

    if (!a->reply)
        return;
    a->reply = false;
    if (errnum)
        pl_out_err(a->d, &r, errnum, text);
    else
        pl_out_json(a->d, &r, alloc_json(a));
}

static void sbatch_exit_cb(struct pl_child *c, int64_t status, int signum,
                           void *arg)
{
    struct pl_alloc *a = arg;
    struct pl_allocs *s = a->d->allocs;
    char text[4096] = "", why[200];
    FILE *fp = fopen(a->out, "r");
    size_t n = fp ? fread(text, 1, sizeof(text) - 1, fp) : 0;
    char *end;
    long job;
    (void)c;

    if (fp)
        fclose(fp);
    text[n] = '\0';
    errno = 0;
    job = strtol(text, &end, 10);
    if (status == 0 && signum == 0 && job > 0 && !errno
        && (*end == '\n' || *end == ';' || !*end)) {
        a->job = job;
        a->checked = 0;
        if (a->automatic)
            s->failures = 0;
        pl_log(LOG_NOTICE, "allocation %llu: Slurm job %ld (%u nodes%s%s)",
               (unsigned long long)a->id, job, a->nodes,
               a->time[0] ? ", time " : "", a->time);
        alloc_store(a);
        reply(a, 0, NULL);
    }
    else {
        char line[160];
        last_line(text, line, sizeof(line));
        snprintf(why, sizeof(why), "sbatch failed: %s", line);
        if (a->automatic) {
            s->failures++;
            double wait = pl_alloc_backoff(s->failures);
            s->retry_at = pl_mono() + wait;
            pl_log(LOG_WARNING, "auto-grow: %s; next try in %.0f s "
                   "(failure %u in a row)", why, wait, s->failures);
        }
        alloc_set_state(a, A_ENDED, why);
        reply(a, EIO, why);
    }
    pl_daemon_flush(a->d);
}

/* A new allocation of 'nodes' nodes: its script, and sbatch started.
 * NULL with errp. */
struct pl_alloc *alloc_submit(struct pl_daemon *d, uint32_t nodes,
                              const char *time, const char *partition,
                              double drain, bool automatic,
                              struct pl_error *errp)
{
    struct pl_alloc *a;
    char script[PL_PATH_MAX + 64];

    if (!(a = alloc_new(d))) {
        errno = ENOMEM;
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    a->nodes = nodes;
    a->automatic = automatic;
    a->submitted = pl_now();
    if (drain >= 0)
        a->drain = drain;
    snprintf(a->time, sizeof(a->time), "%s", time ? time : "");
    snprintf(a->partition, sizeof(a->partition), "%s",
             partition ? partition : "");
    snprintf(a->out, sizeof(a->out), "%s/logs/alloc-%llu.sbatch.out",
             d->dir, (unsigned long long)a->id);
    unlink(a->out);
    char *argv[] = { (char *)"sbatch", (char *)"--parsable", script, NULL };
    if (write_script(a, script, sizeof(script), errp) < 0
        || !(a->sbatch = pl_child_new(d->loop, argv, a->out, sbatch_exit_cb,
                                      a, errp))
        || pl_child_start(a->sbatch, errp) < 0) {
        alloc_set_state(a, A_ENDED, errp->text);
        return NULL;
    }
    alloc_store(a);
    return a;
}

/* ------------------------------------------------------------ agents */

static void end_text(double end, char *buf, size_t len)
{
    time_t t = (time_t)end;
    struct tm tm;

    if (end > 0 && localtime_r(&t, &tm))
        strftime(buf, len, "its job ends at %H:%M:%S", &tm);
    else
        snprintf(buf, len, "its job ends");
}

void pl_alloc_joined(struct pl_daemon *d, struct pl_node *n,
                     const struct pl_register *reg)
{
    struct pl_allocs *s = d->allocs;
    struct pl_alloc *a;

    if (!s || d->cfg.local || !reg->job || (long)reg->job == d->cfg.job) {
        /* one of the pilot's own nodes: a cordon of an allocation it
         * once was in goes */
        n->ends = 0; /* the pilot's walltime is the scheduler's */
        if (s && n->cordon && !strncmp(n->cordon, CORDON_PREFIX,
                                       strlen(CORDON_PREFIX))) {
            free(n->cordon);
            n->cordon = NULL;
            pl_node_changed(n); /* the placement index */
        }
        return;
    }
    if (!(a = find_job(s, (long)reg->job))) {
        /* agents of a job pilotd did not submit (or forgot): taken in */
        if (!(a = alloc_new(d)))
            return;
        a->job = (long)reg->job;
        a->submitted = pl_now();
        pl_log(LOG_NOTICE, "agents of Slurm job %ld join: allocation %llu",
               a->job, (unsigned long long)a->id);
    }
    if (!has_name(a, n->name) && alloc_add_name(a, n->name) < 0)
        pl_log(LOG_ERR, "allocation %llu: out of memory",
               (unsigned long long)a->id);
    if (reg->job_end > 0)
        a->end_time = reg->job_end;
    set_ends(a, n);
    a->joined = true;
    if (!a->started)
        a->started = pl_now();
    if (n->cordon && !strncmp(n->cordon, CORDON_PREFIX,
                              strlen(CORDON_PREFIX))) {
        free(n->cordon);
        n->cordon = NULL;
        pl_node_changed(n); /* the placement index */
    }
    pl_log(LOG_NOTICE, "node %s joins allocation %llu (job %ld)", n->name,
           (unsigned long long)a->id, a->job);
    if (a->state == A_PENDING)
        alloc_set_state(a, A_RUNNING, NULL);
    else if (a->state == A_DRAINING)
        drain_node(a, n);
    else if (a->state == A_ENDED) {
        /* came back after it ended (pilotd missed its end): it leaves */
        a->state = A_RUNNING;
        alloc_leave(a, "its allocation had ended");
        return;
    }
    alloc_store(a);
}

/* ------------------------------------------------------------ tick */

/* Ask Slurm how the job of 'a' stands, now and then. */
static void poll_job(struct pl_alloc *a)
{
    struct pl_error err;
    time_t end;
    int st;

    if (a->job <= 0 || a->sbatch
        || pl_mono() - a->checked < (a->state == A_PENDING ? POLL_PENDING
                                                          : POLL_RUNNING))
        return;
    a->checked = pl_mono();
    if (pl_slurmjob_state(a->job, &st, &end, &err) < 0) {
        pl_log(LOG_WARNING, "allocation %llu: %s", (unsigned long long)a->id,
               err.text);
        return;
    }
    if (end > 0 && st != PL_SJ_PENDING && (double)end != a->end_time) {
        a->end_time = (double)end;
        each_node(a, set_ends);
        alloc_store(a);
    }
    if (st == PL_SJ_ENDED) {
        struct pl_allocs *s = a->d->allocs;
        if (a->automatic && !a->joined) {
            /* it ran no agent: as a failed sbatch, for the back-off */
            s->failures++;
            s->retry_at = pl_mono() + pl_alloc_backoff(s->failures);
        }
        alloc_leave(a, a->joined ? "its Slurm job ended"
                                 : "its Slurm job ended before its agents "
                                   "joined");
    }
    else if (st == PL_SJ_RUNNING && a->state == A_PENDING)
        alloc_set_state(a, A_RUNNING, NULL);
}

static void tick_one(struct pl_alloc *a)
{
    struct pl_allocs *s = a->d->allocs;
    double now = pl_now(), mono = pl_mono();
    char why[128];

    if (a->sbatch && !pl_child_running(a->sbatch)) {
        pl_child_free(a->sbatch);
        a->sbatch = NULL;
    }
    if (!alloc_live(a))
        return;
    poll_job(a);
    if (!alloc_live(a))
        return;
    if (a->state == A_RUNNING && a->end_time > 0
        && now >= a->end_time - a->drain) {
        end_text(a->end_time, why, sizeof(why));
        drain(a, why);
    }
    if (a->state == A_DRAINING
        && (idle(a) || (a->end_time > 0
                        && now >= a->end_time - LEAVE_MARGIN))) {
        alloc_leave(a, a->why[0] ? a->why : "drained");
        return;
    }
    /* idle: none of its nodes runs anything */
    if (a->state == A_RUNNING && idle(a)) {
        if (!a->idle_since)
            a->idle_since = mono;
    }
    else
        a->idle_since = 0;
    /* not while work waits: a gang may wait for the next allocation */
    if (a->automatic && s->grow && a->idle_since && !s->queued_since
        && mono - a->idle_since >= s->conf.idle) {
        snprintf(why, sizeof(why), "idle for %.0f s", mono - a->idle_since);
        alloc_leave(a, why);
    }
    /* an automatic one still waiting in Slurm while nothing waits here */
    else if (a->automatic && a->state == A_PENDING && a->job > 0
             && !s->queued_since && now - a->submitted >= s->conf.idle)
        alloc_leave(a, "not needed any more");
}

struct scan {
    struct pl_allocs *s;
};

/* The size of 't' (of 'n' tasks alike). */
static struct pl_alloc_want want_of(const struct pl_dtask *t, uint64_t n)
{
    return (struct pl_alloc_want){
        .ranks = t->ranks, .cores = t->cores_per_rank,
        .gpus = t->gpus_per_rank, .nodes_req = t->nodes_req,
        .rpn = t->ranks_per_node, .exclusive = t->exclusive, .count = n,
    };
}

static void scan_cb(const struct pl_dtask *t, uint64_t n, void *arg)
{
    struct pl_allocs *s = arg;

    if (t->state != PL_ST_QUEUED || t->pool || t->fn == PL_FN_POOL)
        return;
    if (pl_grow(&s->want, &s->capwant, s->nwant, 1, sizeof(*s->want)) < 0)
        return;
    s->want[s->nwant++] = want_of(t, n);
}

bool pl_alloc_never_fits(const struct pl_daemon *d, const struct pl_dtask *t,
                         char *why, size_t len)
{
    struct pl_alloc_want w = want_of(t, 1);
    uint32_t cores, gpus, k;

    pl_sched_max(d->sched, &cores, &gpus);
    if (!pl_alloc_may_grow(d) || cores == 0)
        return false; /* no node yet: what one is like is not known */
    /* nodes like the pilot's: the largest it has (pl_alloc_size()) */
    if ((k = pl_alloc_task_nodes(&w, cores, gpus)) == 0) {
        char fit[160];
        if (pl_sched_fits(d->sched, t, fit, sizeof(fit)))
            snprintf(fit, sizeof(fit), "no node of %u cores and %u GPUs "
                     "takes its ranks", cores, gpus);
        snprintf(why, len, "%s (nodes that join are alike: growing does not "
                 "help)", fit);
        return true;
    }
    uint64_t most = (uint64_t)(d->cfg.expected_agents > 0
                                   ? d->cfg.expected_agents : 0)
                    + d->allocs->conf.max;
    if (k > most) {
        snprintf(why, len, "task needs %u nodes but this pilot grows to %llu "
                 "at most (its own %d, --grow max=%u)", k,
                 (unsigned long long)most, d->cfg.expected_agents,
                 d->allocs->conf.max);
        return true;
    }
    return false;
}

/* pilot up --grow: ask for more while queued work waits. */
static void auto_grow(struct pl_daemon *d)
{
    struct pl_allocs *s = d->allocs;
    struct pl_alloc_have h = { 0 };
    uint32_t pending = 0;
    struct pl_error err;

    if (pl_sched_queued(d->sched) == 0) {
        s->queued_since = 0;
        return;
    }
    if (!s->queued_since)
        s->queued_since = pl_mono();
    if (!s->grow || d->stopping || d->draining
        || pl_mono() - s->queued_since < GROW_SETTLE
        || pl_mono() < s->retry_at || pl_mono() - s->scanned < GROW_SCAN)
        return;
    for (size_t i = 0; i < s->n; i++) {
        struct pl_alloc *a = s->v[i];
        uint32_t up = 0;
        if (!alloc_live(a))
            continue;
        for (size_t k = 0; a->names && a->names[k]; k++)
            if (pl_alloc_of_node(d, a->names[k]) == a->id)
                up++;
        h.held += up > a->nodes ? up : a->nodes;
        if (up < a->nodes)
            h.pending += a->nodes - up;
        if (a->state == A_PENDING || !a->joined)
            pending++;
    }
    if (pending >= s->conf.pending)
        return;
    for (size_t k = 0; k < pl_sched_nnodes(d->sched); k++) {
        struct pl_node *n = pl_sched_node_at(d->sched, k);
        if (n->state != PL_NODE_UP || n->cordon)
            continue;
        h.nodes++;
        h.cores = n->ncores > h.cores ? n->ncores : h.cores;
        h.gpus = n->ngpus > h.gpus ? n->ngpus : h.gpus;
    }
    s->scanned = pl_mono();
    s->nwant = 0;
    pl_sched_queue_each(d->sched, scan_cb, s);
    uint32_t nodes = pl_alloc_size(s->want, s->nwant, &h, &s->conf);
    if (nodes == 0)
        return;
    uint64_t waiting = 0;
    for (size_t i = 0; i < s->nwant; i++)
        waiting += s->want[i].count ? s->want[i].count : 1;
    pl_log(LOG_NOTICE, "auto-grow: %llu tasks wait on %u nodes (%u pending, "
           "%u held of %u): asking for %u more",
           (unsigned long long)waiting, h.nodes,
           h.pending, h.held, s->conf.max, nodes);
    if (!alloc_submit(d, nodes, s->conf.time[0] ? s->conf.time : NULL,
                s->conf.partition[0] ? s->conf.partition : NULL,
                s->conf.drain, true, &err)) {
        s->failures++;
        s->retry_at = pl_mono() + pl_alloc_backoff(s->failures);
        pl_log(LOG_WARNING, "auto-grow: %s; next try in %.0f s", err.text,
               pl_alloc_backoff(s->failures));
    }
}

void pl_alloc_tick(struct pl_daemon *d)
{
    struct pl_allocs *s = d->allocs;

    if (!s || d->cfg.local)
        return;
    /* N.B. tick_one adds none and frees none: the indexes hold */
    for (size_t i = 0; i < s->n; i++)
        tick_one(s->v[i]);
    auto_grow(d);
}

