/* tests/unit/test_daemon_metrics.c - pilotd's metrics: the text in both
 * formats (HELP and TYPE, counters' _total, histograms' cumulative
 * buckets up to le="+Inf" with _sum and _count, OpenMetrics' # EOF), the
 * task hooks through daemon/task.c, the HTTP server (content types, 404,
 * 405, hostile clients), the loop's publishing and the textfile
 *
 * A pilotd of its parts, as test_daemon_task.c makes it: a real state
 * database and scheduler with one node, a real loop, no ZeroMQ sockets.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>

#include "daemon/daemon_private.h"
#include "daemon/metrics.h"
#include "proto/strv.h"
#include "tests/unit/helpers.h"

#define MARK "s3cr3t-argv-mark"

static char dir[128];

static struct pl_daemon *daemon_make(uv_loop_t *loop, const char *file)
{
    struct pl_daemon *d = calloc(1, sizeof(*d));
    struct pl_error e;
    char path[256];
    uint64_t cpu[4] = { 0, 1, 2, 3 };

    snprintf(path, sizeof(path), "%s/state.db", dir);
    d->outtail = &d->outq;
    d->loop = loop;
    snprintf(d->id, sizeof(d->id), "p7");
    d->cfg.id = d->id;
    d->cfg.local = true;
    d->cfg.expected_agents = 1;
    d->cfg.bind_addr = "127.0.0.1";
    d->cfg.metrics_http = true;
    d->cfg.metrics_port = 0;
    d->cfg.metrics_file = file;
    d->cfg.metrics_interval = 1;
    d->started = pl_now();
    if (!(d->db = pl_db_open(path, &e)) || !(d->sched = pl_sched_new())) {
        diag("daemon: %s", e.text);
        exit(1);
    }
    struct pl_node *n = pl_node_new("n1", cpu, 4, NULL);
    if (!n || pl_sched_node_add(d->sched, n) < 0)
        exit(1);
    return d;
}

static void daemon_drop(struct pl_daemon *d)
{
    pl_metrics_free(d);
    pl_outq_free(d);
    pl_agents_free(d);
    pl_sched_free(d->sched);
    pl_db_close(d->db);
    free(d->unsent);
    free(d->depfail);
    free(d);
}

/* A task stored and queued as submit.c does it, its argv holding MARK. */
static struct pl_dtask *task_new(struct pl_daemon *d)
{
    char *argv[] = { (char *)"echo", (char *)MARK, NULL };
    struct pl_spec s = { .argv = argv, .ranks = 1, .cpr = 1 };
    struct pl_db_task row = { .spec = &s };
    struct pl_error e;
    uint64_t id;

    if (pl_db_task_insert(d->db, &row, PL_ST_QUEUED, pl_now(), &id, &e) < 0) {
        diag("insert: %s", e.text);
        exit(1);
    }
    char **av = pl_strv_dup(argv), **env = NULL, *cwd = NULL;
    struct pl_dtask *t = pl_sched_task_add(d->sched, id, true, 0, &av, &env,
                                           &cwd);
    t->state = PL_ST_QUEUED;
    pl_dtask_shape(t, &s);
    t->serial = ++d->serial;
    pl_dtask_counted(d, t);
    return t;
}

static void place_cb(struct pl_dtask *t, void *arg)
{
    pl_dtask_placed(arg, t);
}

/* ------------------------------------------------------------ the format */

/* The value of sample 'series' ("name{labels}" exactly), or NAN. */
static double sample(const char *text, const char *series)
{
    size_t n = strlen(series);

    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1
                                                                 : NULL)
        if (!strncmp(p, series, n) && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return NAN;
}

static bool ends_with(const char *s, const char *sfx)
{
    size_t a = strlen(s), b = strlen(sfx);

    return a >= b && !strcmp(s + a - b, sfx);
}

/* Whether 'text' is valid OpenMetrics ('om') or text format 0.0.4, as far
 * as pilotd's families go; 'why' says what is not. */
static bool valid(const char *text, bool om, char *why, size_t len)
{
    char fam[128] = "", type[16] = "", seen[8192] = ",";
    double last_le = -INFINITY, last_cum = 0, inf = NAN;
    bool help = false, eof = false;
    int lineno = 0;
    const char *p = text;

    while (*p) {
        const char *nl = strchr(p, '\n');
        char line[1024], name[128];
        lineno++;
        if (!nl || (size_t)(nl - p) >= sizeof(line))
            return snprintf(why, len, "line %d: no newline", lineno), false;
        memcpy(line, p, (size_t)(nl - p));
        line[nl - p] = '\0';
        p = nl + 1;
        if (eof)
            return snprintf(why, len, "line %d after # EOF", lineno), false;
        if (!strcmp(line, "# EOF")) {
            eof = true;
            continue;
        }
        if (!strncmp(line, "# HELP ", 7)) {
            if (sscanf(line + 7, "%127s", fam) != 1)
                return snprintf(why, len, "line %d: HELP", lineno), false;
            char key[160];
            snprintf(key, sizeof(key), ",%s,", fam);
            if (strstr(seen, key))
                return snprintf(why, len, "%s twice", fam), false;
            snprintf(seen + strlen(seen), sizeof(seen) - strlen(seen), "%s,",
                     fam);
            help = true;
            continue;
        }
        if (!strncmp(line, "# TYPE ", 7)) {
            if (!help || sscanf(line + 7, "%127s %15s", name, type) != 2
                || strcmp(name, fam))
                return snprintf(why, len, "line %d: TYPE without its HELP",
                                lineno), false;
            help = false;
            if (strcmp(type, "gauge") && strcmp(type, "counter")
                && strcmp(type, "histogram"))
                return snprintf(why, len, "%s: type %s", fam, type), false;
            if (!strcmp(type, "counter") && ends_with(fam, "_total") == om)
                return snprintf(why, len, "counter family %s", fam), false;
            last_le = -INFINITY;
            last_cum = 0;
            inf = NAN;
            continue;
        }
        if (line[0] == '#')
            return snprintf(why, len, "line %d: comment", lineno), false;
        /* a sample: name{labels} value */
        char *brace = strchr(line, '{'), *close = strchr(line, '}');
        if (!brace || !close || close[1] != ' ' || !type[0])
            return snprintf(why, len, "line %d: sample", lineno), false;
        snprintf(name, sizeof(name), "%.*s", (int)(brace - line), line);
        char *end;
        double v = strtod(close + 2, &end);
        if (*end || end == close + 2)
            return snprintf(why, len, "line %d: value", lineno), false;
        char want[160];
        bool good;
        if (!strcmp(type, "gauge"))
            good = !strcmp(name, fam);
        else if (!strcmp(type, "counter")) {
            snprintf(want, sizeof(want), "%s%s", fam, om ? "_total" : "");
            good = !strcmp(name, want) && v >= 0;
        }
        else {
            snprintf(want, sizeof(want), "%s_bucket", fam);
            if (!strcmp(name, want)) {
                char *le = strstr(brace, "le=\"");
                if (!le)
                    return snprintf(why, len, "line %d: no le", lineno), false;
                double b = strncmp(le + 4, "+Inf\"", 5)
                               ? strtod(le + 4, NULL)
                               : INFINITY;
                if (!(b > last_le) || v < last_cum)
                    return snprintf(why, len, "line %d: bucket not "
                                    "cumulative", lineno), false;
                last_le = b;
                last_cum = v;
                if (isinf(b))
                    inf = v;
                continue;
            }
            snprintf(want, sizeof(want), "%s_sum", fam);
            good = !strcmp(name, want);
            snprintf(want, sizeof(want), "%s_count", fam);
            if (!strcmp(name, want))
                good = !isnan(inf) && v == inf; /* after le="+Inf" */
        }
        if (!good)
            return snprintf(why, len, "line %d: %s in family %s (%s)",
                            lineno, name, fam, type), false;
    }
    if (eof != om)
        return snprintf(why, len, om ? "no # EOF" : "# EOF in text format"),
               false;
    return true;
}

/* ------------------------------------------------------------ HTTP */

/* Send 'req' to 127.0.0.1:'port'; the whole response (malloc'd), or
 * NULL. */
static char *http(int port, const char *req)
{
    struct sockaddr_in sa = { .sin_family = AF_INET,
                              .sin_port = htons((uint16_t)port) };
    struct timeval tv = { .tv_sec = 5 };
    size_t len = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0
        || write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
        close(fd);
        free(buf);
        return NULL;
    }
    for (;;) {
        if (len + 1 == cap)
            buf = realloc(buf, cap *= 2);
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    buf[len] = '\0';
    return buf;
}

static int status_of(const char *resp)
{
    int code = 0;

    return resp && sscanf(resp, "HTTP/1.%*d %d", &code) == 1 ? code : 0;
}

static const char *body_of(const char *resp)
{
    const char *b = resp ? strstr(resp, "\r\n\r\n") : NULL;

    return b ? b + 4 : "";
}

/* A client that connects and sends 'what', then holds the connection. */
static int hold(int port, const char *what)
{
    struct sockaddr_in sa = { .sin_family = AF_INET,
                              .sin_port = htons((uint16_t)port) };
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0
        || write(fd, what, strlen(what)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* ------------------------------------------------------------ the loop */

static void stop_cb(uv_timer_t *h)
{
    uv_stop(h->loop);
}

/* Run the loop for 'ms' (the metrics timer fires each second). */
static void run_for(uv_loop_t *loop, uv_timer_t *t, uint64_t ms)
{
    uv_timer_start(t, stop_cb, ms, 0);
    uv_run(loop, UV_RUN_DEFAULT);
}

static char *slurp(const char *path)
{
    FILE *fp = fopen(path, "r");
    char *buf = calloc(1, 1 << 16);

    if (fp) {
        size_t n = fread(buf, 1, (1 << 16) - 1, fp);
        buf[n] = '\0';
        fclose(fp);
    }
    return buf;
}

static void test_file_check(void)
{
    struct pl_error e;

    ok(pl_metrics_file_check("/var/lib/x/p3.prom", &e) == 0
           && pl_metrics_file_check("p3.txt", &e) < 0 && errno == EINVAL
           && strstr(e.text, ".prom")
           && pl_metrics_file_check("/d/.prom", &e) < 0
           && pl_metrics_file_check("/d/p.prom.tmp", &e) < 0,
       "a textfile must be named *.prom, and is told so");
}

static void test_all(void)
{
    uv_loop_t loop;
    uv_timer_t timer;
    struct pl_error e;
    char file[256], why[256], series[256];
    size_t len;

    snprintf(file, sizeof(file), "%s/p7.prom", dir);
    uv_loop_init(&loop);
    uv_timer_init(&loop, &timer);
    struct pl_daemon *d = daemon_make(&loop, file);
    if (pl_metrics_start(d, &e) < 0) {
        diag("start: %s", e.text);
        exit(1);
    }
    const char *url = pl_metrics_url(d);
    int port = 0;
    ok(url && sscanf(url, "http://127.0.0.1:%d/metrics", &port) == 1
           && port > 0,
       "served on the bind address, a free port: %s", url ? url : "");

    /* a task through daemon/task.c: queued 5 s ago, started 2 s ago */
    struct pl_dtask *t = task_new(d);
    ok(t->queued_at > 0, "the hook saw it queued");
    t->queued_at -= 5;
    pl_sched_run(d->sched, place_cb, d);
    struct pl_db_change c = { .exit_code = -1, .signal = -1,
                              .maxrss_kb = -1, .time = pl_now() - 2 };
    pl_dtask_rank_running(d, t, 0, c.time, &c);
    struct pl_db_change end = { .exit_code = 0, .signal = 0,
                                .maxrss_kb = 100 };
    pl_dtask_rank_ended(d, t, 0, PL_ST_DONE, &end);
    pl_metrics_commit(d, 3000000, false); /* 3 ms */
    pl_metrics_commit(d, 1000000, true);  /* 1 ms: on a bound */

    char *om = pl_metrics_render(d, true, &len);
    char *txt = pl_metrics_render(d, false, &len);
    ok(om && valid(om, true, why, sizeof(why)), "OpenMetrics valid%s%s",
       om ? ": " : "", om ? why : "");
    ok(txt && valid(txt, false, why, sizeof(why)), "text format valid%s%s",
       txt ? ": " : "", txt ? why : "");
    ok(om && ends_with(om, "\n# EOF\n")
           && strstr(om, "\n# TYPE pilot_tasks_ended counter\n") && txt
           && strstr(txt, "\n# TYPE pilot_tasks_ended_total counter\n"),
       "counters: family without _total in OpenMetrics, with it in text");
    is(sample(om, "pilot_tasks_submitted_total{pilot=\"p7\"}"), 1,
       "submitted 1");
    is(sample(om, "pilot_tasks_started_total{pilot=\"p7\"}"), 1,
       "started 1");
    is(sample(om, "pilot_tasks_ended_total{pilot=\"p7\",state=\"done\"}"), 1,
       "ended done 1");
    ok(sample(om, "pilot_task_queue_wait_seconds_bucket{pilot=\"p7\","
                  "le=\"2.5\"}") == 0
           && sample(om, "pilot_task_queue_wait_seconds_bucket{pilot=\"p7\","
                         "le=\"5.0\"}") == 1
           && fabs(sample(om, "pilot_task_queue_wait_seconds_sum{pilot="
                              "\"p7\"}") - 3) < 0.5,
       "queue wait of 3 s: in the 5 s bucket, not the 2.5 s one");
    ok(sample(om, "pilot_task_run_seconds_bucket{pilot=\"p7\",le=\"1.0\"}")
               == 0
           && sample(om, "pilot_task_run_seconds_bucket{pilot=\"p7\","
                         "le=\"2.5\"}") == 1
           && sample(om, "pilot_task_run_seconds_bucket{pilot=\"p7\","
                         "le=\"+Inf\"}") == 1
           && sample(om, "pilot_task_run_seconds_count{pilot=\"p7\"}") == 1,
       "run time of 2 s: in the 2.5 s bucket, counted once");
    ok(sample(om, "pilot_commit_seconds_bucket{pilot=\"p7\",le=\"0.0025\"}")
               == 0
           && sample(om, "pilot_commit_seconds_bucket{pilot=\"p7\","
                         "le=\"0.005\"}") == 1,
       "a commit of 3 ms observed");
    is(sample(om, "pilot_wal_sync_seconds_bucket{pilot=\"p7\",le=\"0.001\"}"),
       1, "a sync of 1 ms is in the bucket le=\"0.001\" (le: at most)");
    is(sample(om, "pilot_node_cores{pilot=\"p7\",node=\"n1\"}"), 4,
       "node n1: 4 cores");
    d->cfg.expected_agents = 3;
    struct pl_node *n = pl_sched_node_at(d->sched, 0);
    n->cordon = strdup("vet: disk");
    free(om);
    om = pl_metrics_render(d, true, &len);
    ok(sample(om, "pilot_node_cordoned{pilot=\"p7\",node=\"n1\"}") == 1
           && sample(om, "pilot_agents_expected{pilot=\"p7\"}") == 3
           && !strstr(om, "vet: disk"),
       "a cordoned node is 1 (its reason is not in the metrics)");
    ok(!strstr(om, MARK) && !strstr(txt, MARK) && !strstr(om, "echo"),
       "no argv in the metrics");
    free(om);
    free(txt);

    /* HTTP: what start published (the task was not there yet) */
    char *r = http(port, "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: "
                         "application/openmetrics-text;version=1.0.0,"
                         "text/plain;version=0.0.4;q=0.5\r\n"
                         "Connection: close\r\n\r\n");
    ok(status_of(r) == 200
           && strstr(r, "Content-Type: application/openmetrics-text; "
                        "version=1.0.0; charset=utf-8\r\n")
           && valid(body_of(r), true, why, sizeof(why))
           && sample(body_of(r), "pilot_tasks_submitted_total{pilot=\"p7\"}")
                  == 0,
       "GET with Prometheus' Accept: OpenMetrics, as published at start");
    free(r);
    r = http(port, "GET /metrics HTTP/1.0\r\n\r\n");
    ok(status_of(r) == 200
           && strstr(r, "Content-Type: text/plain; version=0.0.4")
           && valid(body_of(r), false, why, sizeof(why)),
       "GET without Accept: the text format");
    free(r);
    r = http(port, "GET /nope HTTP/1.0\r\n\r\n");
    is(status_of(r), 404, "an unknown path: 404");
    free(r);
    r = http(port, "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n");
    is(status_of(r), 405, "POST: 405");
    free(r);
    r = http(port, "\x01\x02garbage\r\n\r\n");
    ok(!r || status_of(r) == 0 || status_of(r) == 400,
       "garbage: no 200 (%d)", status_of(r));
    free(r);

    /* two clients that hold their connections (one half a request, one
     * nothing at all) do not stop the next, nor the loop */
    int h1 = hold(port, "GET /metr"), h2 = hold(port, "");
    double t0 = pl_mono();
    r = http(port, "GET /metrics HTTP/1.0\r\n\r\n");
    ok(h1 >= 0 && h2 >= 0 && status_of(r) == 200 && pl_mono() - t0 < 1,
       "slow clients hold connections: another is answered at once");
    free(r);

    /* the loop publishes what changed, and writes the textfile */
    task_new(d);
    run_for(&loop, &timer, 1300);
    r = http(port, "GET /metrics HTTP/1.0\r\n\r\n");
    is(sample(body_of(r), "pilot_tasks_submitted_total{pilot=\"p7\"}"), 2,
       "after a tick: the new task is served");
    snprintf(series, sizeof(series), "pilot_loop_lag_seconds_count{pilot="
             "\"p7\"}");
    ok(sample(body_of(r), series) >= 1, "the loop's lag observed");
    ok(sample(body_of(r), "pilot_metrics_scrapes_total{pilot=\"p7\"}") >= 3,
       "scrapes counted");
    free(r);
    close(h1);
    close(h2);
    char *f = slurp(file);
    ok(valid(f, false, why, sizeof(why))
           && sample(f, "pilot_tasks_submitted_total{pilot=\"p7\"}") == 2,
       "the textfile: text format, the counts%s%s", why[0] ? ": " : "",
       why);
    free(f);
    task_new(d);
    run_for(&loop, &timer, 1100);
    f = slurp(file);
    is(sample(f, "pilot_tasks_submitted_total{pilot=\"p7\"}"), 3,
       "... written again after its interval");
    free(f);
    snprintf(series, sizeof(series), "%s/p7.prom.%ld.tmp", dir,
             (long)getpid());
    ok(access(series, F_OK) < 0, "no temporary file left");

    /* stop: the server goes, the last counts are written */
    task_new(d);
    pl_metrics_stop(d);
    uv_close((uv_handle_t *)&timer, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    f = slurp(file);
    r = http(port, "GET /metrics HTTP/1.0\r\n\r\n");
    ok(!r && sample(f, "pilot_tasks_submitted_total{pilot=\"p7\"}") == 4,
       "stopped: no server, the textfile has the last counts");
    free(r);
    free(f);
    daemon_drop(d);
    is(uv_loop_close(&loop), 0, "every handle closed");
}

/* 1,000 nodes: still valid, one series each; what a render costs (said,
 * not judged: docs/observability.md quotes it). */
static void test_many_nodes(void)
{
    uv_loop_t loop;
    struct pl_error e;
    uint64_t cpu[4] = { 0, 1, 2, 3 };
    char why[256], name[32];
    size_t len = 0, len1 = 0;

    uv_loop_init(&loop);
    struct pl_daemon *d = daemon_make(&loop, NULL);
    char path[256];
    snprintf(path, sizeof(path), "%s/many.prom", dir);
    d->cfg.metrics_http = false; /* rendered here, not served */
    d->cfg.metrics_file = path;
    if (pl_metrics_start(d, &e) < 0)
        exit(1);
    free(pl_metrics_render(d, true, &len1));
    for (int i = 2; i <= 1000; i++) {
        snprintf(name, sizeof(name), "n%d", i);
        struct pl_node *n = pl_node_new(name, cpu, 4, NULL);
        if (!n || pl_sched_node_add(d->sched, n) < 0)
            exit(1);
    }
    uint64_t t0 = uv_hrtime();
    char *om = NULL;
    for (int i = 0; i < 20; i++) {
        free(om);
        om = pl_metrics_render(d, true, &len);
    }
    double us = (double)(uv_hrtime() - t0) / 20 / 1e3;
    int series = 0;
    for (const char *p = om; (p = strstr(p, "\npilot_node_cores{")); p++)
        series++;
    ok(om && valid(om, true, why, sizeof(why)) && series == 1000,
       "1,000 nodes: valid, one pilot_node_cores each (%d)%s%s", series,
       why[0] ? ": " : "", why);
    diag("render: %zu bytes for 1 node, %zu for 1,000 (%.0f bytes a node), "
         "%.0f us for 1,000", len1, len, (double)(len - len1) / 999, us);
    free(om);
    pl_metrics_stop(d);
    uv_run(&loop, UV_RUN_DEFAULT);
    daemon_drop(d);
    is(uv_loop_close(&loop), 0, "... closed");
}

/* A textfile that cannot be written (its directory is not there): start
 * fails and says why, as for a port taken, instead of a pilot without
 * metrics and one warning in its log. */
static void test_file_unwritable(void)
{
    uv_loop_t loop;
    struct pl_error e;

    uv_loop_init(&loop);
    struct pl_daemon *d = daemon_make(&loop, NULL);
    d->cfg.metrics_http = false;
    d->cfg.metrics_file = "/nonexistent/x.prom";
    ok(pl_metrics_start(d, &e) < 0
           && strstr(e.text, "cannot write /nonexistent/x.prom: No such "
                             "file or directory"),
       "a textfile's directory not there: start fails (%s)", e.text);
    pl_metrics_stop(d);
    uv_run(&loop, UV_RUN_DEFAULT);
    daemon_drop(d);
    is(uv_loop_close(&loop), 0, "... nothing left open");
}

/* A port taken: start fails and says which. */
static void test_port_taken(void)
{
    uv_loop_t loop;
    struct pl_error e;
    struct sockaddr_in sa = { .sin_family = AF_INET };
    socklen_t sl = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    listen(fd, 1);
    getsockname(fd, (struct sockaddr *)&sa, &sl);
    uv_loop_init(&loop);
    struct pl_daemon *d = daemon_make(&loop, NULL);
    d->cfg.metrics_port = ntohs(sa.sin_port);
    ok(pl_metrics_start(d, &e) < 0 && strstr(e.text, "cannot listen"),
       "a port in use: %s", e.text);
    pl_metrics_stop(d);
    uv_run(&loop, UV_RUN_DEFAULT);
    daemon_drop(d);
    close(fd);
    is(uv_loop_close(&loop), 0, "... nothing left open");
}

int main(void)
{
    plan(36);
    if (!t_tmpdir("daemon-metrics", dir, sizeof(dir)))
        return 1;
    test_file_check();
    test_all();
    test_many_nodes();
    test_port_taken();
    test_file_unwritable();
    t_rmtree(dir);
    return done_testing();
}
