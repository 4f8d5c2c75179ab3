/* daemon/metrics.c - pilotd's metrics: rendered by the loop, served by
 * libmicrohttpd's thread (metrics_http.c), written to a textfile by the
 * thread pool
 *
 * The loop owns everything here but the published buffers.  Each second
 * its timer renders the text (OpenMetrics, and Prometheus' text format
 * 0.0.4 for a client that does not ask for OpenMetrics) into a new
 * refcounted buffer and swaps it in under 'lock'; the HTTP thread takes
 * a reference to the latest under the same lock and gives it to its
 * response, which drops it when sent.  So a scrape never reads pilotd's
 * state, and a slow or hostile HTTP client holds one buffer and one of
 * libmicrohttpd's connections, never the loop.  No argv, environment or
 * task name is in any metric: only counts, nodes and timings.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/daemon_private.h"
#include "daemon/metrics.h"
#include "daemon/metrics_private.h"
#include "daemon/node.h"
#include "proto/log.h"
#include "proto/msg.h"
#include "proto/strv.h"

/* Buckets (s), upper bounds.  A task's queue wait and run time: from
 * 1 ms (a no-op on a warm agent) to a day; pilotd's own delays (the
 * loop's lag, a commit, a sync of the WAL): from 0.1 ms to 10 s. */
static const double task_le[] = { 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                  0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
                                  120, 300, 600, 1800, 3600, 7200, 14400,
                                  43200, 86400 };
static const double loop_le[] = { 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                  0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                  1, 2.5, 5, 10 };
#define NLE(a) (sizeof(a) / sizeof((a)[0]))

/* ------------------------------------------------------------ snapshots */

void metrics_snap_unref(struct snap *s)
{
    if (s && atomic_fetch_sub(&s->refs, 1) == 1)
        free(s);
}

/* The text being rendered: a struct snap growing in place. */
struct tb {
    struct snap *s;
    size_t cap;
    bool oom;
};

static void tb_printf(struct tb *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void tb_printf(struct tb *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b->oom)
        return;
    for (;;) {
        size_t room = b->s ? b->cap - sizeof(struct snap) - b->s->len : 0;
        va_start(ap, fmt);
        n = vsnprintf(b->s ? b->s->text + b->s->len : NULL, room, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->oom = true;
            return;
        }
        if ((size_t)n < room) {
            b->s->len += (size_t)n;
            return;
        }
        size_t ncap = b->cap ? b->cap * 2 : 16384;
        while (ncap - sizeof(struct snap) - (b->s ? b->s->len : 0)
               <= (size_t)n)
            ncap *= 2;
        struct snap *ns = realloc(b->s, ncap);
        if (!ns) {
            b->oom = true;
            return;
        }
        if (!b->s)
            ns->len = 0;
        b->s = ns;
        b->cap = ncap;
    }
}

/* ------------------------------------------------------------ rendering */

/* A label value with \, " and newline escaped (both formats agree). */
static void tb_label(struct tb *b, const char *v)
{
    char out[256];
    size_t k = 0;

    for (; *v && k < sizeof(out) - 3; v++) {
        if (*v == '\\' || *v == '"')
            out[k++] = '\\';
        if (*v == '\n') {
            out[k++] = '\\';
            out[k++] = 'n';
            continue;
        }
        out[k++] = *v;
    }
    out[k] = '\0';
    tb_printf(b, "%s", out);
}

/* HELP and TYPE of a family.  A counter's family is named without
 * "_total" in OpenMetrics, with it in the text format; its samples end
 * in "_total" in both. */
static void family(struct tb *b, bool om, const char *name,
                   const char *type, const char *help)
{
    const char *sfx = !om && !strcmp(type, "counter") ? "_total" : "";

    tb_printf(b, "# HELP %s%s %s\n# TYPE %s%s %s\n", name, sfx, help, name,
              sfx, type);
}

/* A bound as Prometheus' clients write it: "0.005", "1.0", "+Inf". */
static void le_str(double v, char *buf, size_t len)
{
    snprintf(buf, len, "%g", v);
    if (!strpbrk(buf, ".e"))
        snprintf(buf + strlen(buf), len - strlen(buf), ".0");
}

static void hist_init(struct hist *h, const double *le, size_t n)
{
    memset(h, 0, sizeof(*h));
    h->le = le;
    h->n = n;
}

static void hist_observe(struct hist *h, double v)
{
    size_t i = 0;

    if (!(v >= 0))
        v = 0; /* clocks of two nodes, or NaN: not below zero */
    while (i < h->n && v > h->le[i])
        i++;
    h->bucket[i]++;
    h->count++;
    h->sum += v;
}

static void hist_render(struct tb *b, bool om, const char *name,
                        const char *help, const char *pilot,
                        const struct hist *h)
{
    uint64_t cum = 0;
    char le[32];

    family(b, om, name, "histogram", help);
    for (size_t i = 0; i <= h->n; i++) {
        cum += h->bucket[i];
        if (i < h->n)
            le_str(h->le[i], le, sizeof(le));
        else
            snprintf(le, sizeof(le), "+Inf");
        tb_printf(b, "%s_bucket{pilot=\"%s\",le=\"%s\"} %llu\n", name, pilot,
                  le, (unsigned long long)cum);
    }
    tb_printf(b, "%s_sum{pilot=\"%s\"} %.9g\n", name, pilot, h->sum);
    tb_printf(b, "%s_count{pilot=\"%s\"} %llu\n", name, pilot,
              (unsigned long long)h->count);
}

/* One gauge per node: what 'val' says of it. */
static void node_gauge(struct tb *b, bool om, struct pl_daemon *d,
                       const char *pilot, const char *name, const char *help,
                       long long (*val)(const struct pl_node *n))
{
    family(b, om, name, "gauge", help);
    for (size_t k = 0; k < pl_sched_nnodes(d->sched); k++) {
        const struct pl_node *n = pl_sched_node_at(d->sched, k);
        tb_printf(b, "%s{pilot=\"%s\",node=\"", name, pilot);
        tb_label(b, n->name);
        tb_printf(b, "\"} %lld\n", val(n));
    }
}

static long long n_cores(const struct pl_node *n)
{
    return n->ncores;
}

static long long n_cores_busy(const struct pl_node *n)
{
    return (long long)n->ncores - n->free_cores;
}

static long long n_gpus(const struct pl_node *n)
{
    return n->ngpus;
}

static long long n_gpus_busy(const struct pl_node *n)
{
    return (long long)n->ngpus - n->free_gpus;
}

static long long n_up(const struct pl_node *n)
{
    return n->state == PL_NODE_UP;
}

static long long n_cordoned(const struct pl_node *n)
{
    return n->cordon != NULL;
}

static long long n_running(const struct pl_node *n)
{
    return n->running;
}

static struct snap *render(struct pl_daemon *d, bool om)
{
    struct pl_metrics *m = d->metrics;
    struct tb b = { 0 };
    char pilot[PL_ID_MAX * 2 + 8];
    struct tb pb = { 0 };
    long long up = 0;

    /* the pilot's id, escaped once (ids are [a-z0-9] anyway) */
    tb_label(&pb, d->id);
    snprintf(pilot, sizeof(pilot), "%s", pb.s ? pb.s->text : "");
    free(pb.s);

    family(&b, om, "pilot_info", "gauge", "This pilot: its mode and "
           "pilotd's version (always 1).");
    tb_printf(&b, "pilot_info{pilot=\"%s\",mode=\"%s\",version=\"%s\"} 1\n",
              pilot, d->cfg.local ? "local" : "slurm", PL_VERSION);
    family(&b, om, "pilot_start_time_seconds", "gauge",
           "When this pilotd started (Unix time).");
    tb_printf(&b, "pilot_start_time_seconds{pilot=\"%s\"} %.3f\n", pilot,
              d->started);

    family(&b, om, "pilot_tasks", "gauge",
           "Tasks not ended, by state.");
    for (int st = PL_ST_WAITING; st <= PL_ST_RUNNING; st++)
        tb_printf(&b, "pilot_tasks{pilot=\"%s\",state=\"%s\"} %lld\n", pilot,
                  pl_state_name(st), d->count[st]);
    family(&b, om, "pilot_tasks_submitted", "counter",
           "Tasks submitted to this pilot (from its database: kept across "
           "pilotd restarts).");
    tb_printf(&b, "pilot_tasks_submitted_total{pilot=\"%s\"} %lld\n", pilot,
              d->total);
    family(&b, om, "pilot_tasks_started", "counter",
           "Task attempts started (all ranks running) since this pilotd "
           "started.");
    tb_printf(&b, "pilot_tasks_started_total{pilot=\"%s\"} %llu\n", pilot,
              (unsigned long long)m->started);
    family(&b, om, "pilot_tasks_ended", "counter",
           "Tasks ended, by final state (from its database: kept across "
           "pilotd restarts).");
    for (int st = PL_ST_DONE; st < PL_ST_COUNT; st++)
        tb_printf(&b, "pilot_tasks_ended_total{pilot=\"%s\",state=\"%s\"} "
                  "%lld\n", pilot, pl_state_name(st), d->count[st]);

    for (size_t k = 0; k < pl_sched_nnodes(d->sched); k++)
        up += pl_sched_node_at(d->sched, k)->state == PL_NODE_UP;
    family(&b, om, "pilot_agents_up", "gauge", "Agents registered and up.");
    tb_printf(&b, "pilot_agents_up{pilot=\"%s\"} %lld\n", pilot, up);
    family(&b, om, "pilot_agents_expected", "gauge",
           "Agents the allocation should have (one per node).");
    tb_printf(&b, "pilot_agents_expected{pilot=\"%s\"} %d\n", pilot,
              d->cfg.expected_agents);
    node_gauge(&b, om, d, pilot, "pilot_node_up",
               "1 if the node's agent is up, else 0 (lost, gone).", n_up);
    node_gauge(&b, om, d, pilot, "pilot_node_cordoned",
               "1 if nothing new is placed on the node (failed vetting, "
               "pilot cordon).", n_cordoned);
    node_gauge(&b, om, d, pilot, "pilot_node_cores",
               "Cores of the node's agent.", n_cores);
    node_gauge(&b, om, d, pilot, "pilot_node_cores_busy",
               "Cores held by tasks.", n_cores_busy);
    node_gauge(&b, om, d, pilot, "pilot_node_gpus",
               "GPUs of the node's agent.", n_gpus);
    node_gauge(&b, om, d, pilot, "pilot_node_gpus_busy",
               "GPUs held by tasks.", n_gpus_busy);
    node_gauge(&b, om, d, pilot, "pilot_node_tasks_running",
               "Tasks placed on the node and not ended.", n_running);

    if (d->end_time > 0) {
        family(&b, om, "pilot_walltime_left_seconds", "gauge",
               "Seconds until the Slurm job's end.");
        tb_printf(&b, "pilot_walltime_left_seconds{pilot=\"%s\"} %.0f\n",
                  pilot, fmax(0, (double)d->end_time - pl_now()));
    }

    hist_render(&b, om, "pilot_task_queue_wait_seconds",
                "From queued (or queued again) to running, for the tasks "
                "started since this pilotd started.", pilot, &m->wait);
    hist_render(&b, om, "pilot_task_run_seconds",
                "From running to the end, for the tasks ended since this "
                "pilotd started.", pilot, &m->run);
    hist_render(&b, om, "pilot_loop_lag_seconds",
                "How late pilotd's 1 s metrics timer fired: what a "
                "request waits for a busy loop.", pilot, &m->lag);
    hist_render(&b, om, "pilot_commit_seconds",
                "A batch's commit of its state changes (SQLite, WAL).",
                pilot, &m->commit);
    hist_render(&b, om, "pilot_wal_sync_seconds",
                "The sync of the WAL before a submit or cancel is "
                "acknowledged.", pilot, &m->sync);
    family(&b, om, "pilot_store_unstored", "gauge",
           "State changes in pilotd's memory not stored (its state "
           "directory failed).");
    tb_printf(&b, "pilot_store_unstored{pilot=\"%s\"} %zu\n", pilot,
              pl_db_unstored(d->db));
    family(&b, om, "pilot_metrics_scrapes", "counter",
           "HTTP requests for the metrics since this pilotd started.");
    tb_printf(&b, "pilot_metrics_scrapes_total{pilot=\"%s\"} %lu\n", pilot,
              atomic_load(&m->scrapes));
    if (om)
        tb_printf(&b, "# EOF\n");
    if (b.oom) {
        free(b.s);
        errno = ENOMEM;
        return NULL;
    }
    atomic_init(&b.s->refs, 1);
    return b.s;
}

char *pl_metrics_render(struct pl_daemon *d, bool om, size_t *len)
{
    struct snap *s;
    char *text;

    if (!d->metrics) {
        errno = EINVAL;
        return NULL;
    }
    if (!(s = render(d, om)))
        return NULL;
    if ((text = malloc(s->len + 1))) {
        memcpy(text, s->text, s->len);
        text[s->len] = '\0';
        *len = s->len;
    }
    metrics_snap_unref(s);
    return text;
}

/* Swap in the texts of now. */
static void publish(struct pl_metrics *m)
{
    struct snap *om = render(m->d, true), *text = render(m->d, false);
    struct snap *oldom, *oldtext;

    if (!om || !text) {
        metrics_snap_unref(om);
        metrics_snap_unref(text);
        return; /* the last ones stay */
    }
    pthread_mutex_lock(&m->lock);
    oldom = m->om;
    oldtext = m->text;
    m->om = om;
    m->text = text;
    pthread_mutex_unlock(&m->lock);
    metrics_snap_unref(oldom);
    metrics_snap_unref(oldtext);
}

/* ------------------------------------------------------------ textfile */

int pl_metrics_file_check(const char *path, struct pl_error *errp)
{
    size_t n = strlen(path);
    const char *base = strrchr(path, '/');

    base = base ? base + 1 : path;
    if (n < 5 || strcmp(path + n - 5, ".prom") || !strcmp(base, ".prom")) {
        errno = EINVAL;
        return pl_errprintf(errp, "--metrics-file %s: the name must end in "
                            "'.prom' (node_exporter's textfile collector "
                            "reads only those)", path);
    }
    return 0;
}

/* The thread pool: 'wsnap' into a temporary file beside 'path', then
 * renamed over it, so the collector never reads half a file. */
static void write_work(uv_work_t *w)
{
    struct pl_metrics *m = w->data;
    char tmp[PL_PATH_MAX + 32];
    size_t off = 0;
    int fd;

    snprintf(tmp, sizeof(tmp), "%s.%ld.tmp", m->path, (long)getpid());
    m->werr = 0;
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
                   0644)) < 0) {
        m->werr = errno;
        return;
    }
    while (off < m->wsnap->len) {
        ssize_t n = write(fd, m->wsnap->text + off, m->wsnap->len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            m->werr = errno;
            break;
        }
        off += (size_t)n;
    }
    if (close(fd) < 0 && !m->werr)
        m->werr = errno;
    if (!m->werr && rename(tmp, m->path) < 0)
        m->werr = errno;
    if (m->werr)
        unlink(tmp);
}

static void write_done(uv_work_t *w, int status)
{
    struct pl_metrics *m = w->data;
    (void)status;

    metrics_snap_unref(m->wsnap);
    m->wsnap = NULL;
    m->writing = false;
    if (m->werr && m->werr != m->werr_logged)
        pl_log(LOG_WARNING, "metrics: cannot write %s: %s", m->path,
               strerror(m->werr));
    else if (!m->werr && m->werr_logged)
        pl_log(LOG_NOTICE, "metrics: %s written again", m->path);
    m->werr_logged = m->werr;
}

static void file_write(struct pl_metrics *m)
{
    if (m->writing || !(m->wsnap = render(m->d, false)))
        return;
    m->written_at = pl_mono();
    m->work.data = m;
    if (uv_queue_work(m->d->loop, &m->work, write_work, write_done) < 0) {
        metrics_snap_unref(m->wsnap);
        m->wsnap = NULL;
        return;
    }
    m->writing = true;
}

/* ------------------------------------------------------------ the loop */

static void timer_cb(uv_timer_t *h)
{
    struct pl_metrics *m = h->data;
    uint64_t now = uv_hrtime();

    /* libuv runs a repeating timer 1 s after the loop time it last ran
     * at: what is left past that is the time the loop was busy */
    if (m->expect)
        hist_observe(&m->lag, now > m->expect
                                  ? (double)(now - m->expect) / 1e9
                                  : 0);
    m->expect = now + 1000000000ULL;
    if (m->mhd)
        publish(m);
    if (m->path && pl_mono() - m->written_at >= m->interval)
        file_write(m);
}

int pl_metrics_start(struct pl_daemon *d, struct pl_error *errp)
{
    struct pl_metrics *m;

    if (!d->cfg.metrics_http && !d->cfg.metrics_file)
        return 0;
    if (!(m = calloc(1, sizeof(*m)))) {
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    d->metrics = m;
    m->d = d;
    m->lfd = -1;
    hist_init(&m->wait, task_le, NLE(task_le));
    hist_init(&m->run, task_le, NLE(task_le));
    hist_init(&m->lag, loop_le, NLE(loop_le));
    hist_init(&m->commit, loop_le, NLE(loop_le));
    hist_init(&m->sync, loop_le, NLE(loop_le));
    atomic_init(&m->scrapes, 0);
    if (pthread_mutex_init(&m->lock, NULL) != 0)
        return pl_errprintf(errp, "metrics: mutex: %s", strerror(errno));
    m->lock_init = true;
    if (d->cfg.metrics_file) {
        if (pl_metrics_file_check(d->cfg.metrics_file, errp) < 0
            || !(m->path = strdup(d->cfg.metrics_file)))
            return -1;
        m->interval = d->cfg.metrics_interval > 0 ? d->cfg.metrics_interval
                                                  : PL_METRICS_INTERVAL;
        /* the first write now, from the loop (it has not started):
         * a directory that is not there or not writable stops pilotd
         * with the reason, as a port taken does, instead of a pilot
         * that runs for hours with one warning in its log and no
         * metrics */
        if (!(m->wsnap = render(d, false))) {
            errno = ENOMEM;
            return pl_errprintf(errp, "out of memory");
        }
        m->work.data = m;
        write_work(&m->work);
        metrics_snap_unref(m->wsnap);
        m->wsnap = NULL;
        if (m->werr) {
            errno = m->werr;
            return pl_errprintf(errp, "metrics: cannot write %s: %s",
                                m->path, strerror(m->werr));
        }
        m->written_at = -INFINITY; /* the first tick writes it again */
    }
    /* the texts before the server: it never serves a 503 */
    if (d->cfg.metrics_http) {
        publish(m);
        if (metrics_http_start(m, d->cfg.bind_addr, d->cfg.metrics_port,
                               errp) < 0)
            return -1;
        pl_log(LOG_NOTICE, "metrics at %s", m->url);
    }
    if (m->path)
        pl_log(LOG_NOTICE, "metrics written to %s every %g s", m->path,
               m->interval);
    uv_timer_init(d->loop, &m->timer);
    m->timer.data = m;
    m->timer_init = true;
    uv_timer_start(&m->timer, timer_cb, 1000, 1000);
    m->expect = uv_hrtime() + 1000000000ULL;
    return 0;
}

void pl_metrics_stop(struct pl_daemon *d)
{
    struct pl_metrics *m = d->metrics;

    if (!m || m->stopped)
        return;
    m->stopped = true;
    metrics_http_stop(m);
    if (m->path && m->timer_init)
        file_write(m); /* the final counts; the loop waits for it */
    if (m->timer_init)
        uv_close((uv_handle_t *)&m->timer, NULL);
}

void pl_metrics_free(struct pl_daemon *d)
{
    struct pl_metrics *m = d->metrics;

    if (!m)
        return;
    int saved = errno;
    /* N.B. pl_metrics_stop() closed the timer, and the loop has run */
    metrics_http_stop(m);
    metrics_snap_unref(m->om);
    metrics_snap_unref(m->text);
    metrics_snap_unref(m->wsnap);
    if (m->lock_init)
        pthread_mutex_destroy(&m->lock);
    free(m->path);
    free(m);
    d->metrics = NULL;
    errno = saved;
}

const char *pl_metrics_url(const struct pl_daemon *d)
{
    return d->metrics && d->metrics->url[0] ? d->metrics->url : NULL;
}

const char *pl_metrics_path(const struct pl_daemon *d)
{
    return d->metrics ? d->metrics->path : NULL;
}

/* ------------------------------------------------------------ hooks */

void pl_metrics_task(struct pl_daemon *d, struct pl_dtask *t, int from,
                     int to, double time)
{
    struct pl_metrics *m = d->metrics;

    if (!m || t->fn == PL_FN_POOL || from == to)
        return;
    if (to == PL_ST_QUEUED)
        t->queued_at = time;
    else if (to == PL_ST_RUNNING) {
        m->started++;
        if (t->queued_at > 0)
            hist_observe(&m->wait, time - t->queued_at);
        t->started_at = time;
    }
    else if (pl_state_final(to) && from == PL_ST_RUNNING
             && t->started_at > 0)
        hist_observe(&m->run, time - t->started_at);
}

void pl_metrics_commit(struct pl_daemon *d, uint64_t ns, bool sync)
{
    struct pl_metrics *m = d->metrics;

    if (m)
        hist_observe(sync ? &m->sync : &m->commit, (double)ns / 1e9);
}
