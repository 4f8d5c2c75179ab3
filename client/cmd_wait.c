/* client/cmd_wait.c - pilot wait: until tasks end, with a progress bar */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/cli.h"
#include "client/conn.h"
#include "client/output.h"
#include "client/sub.h"
#include "proto/state.h"
#include "proto/strv.h"

static const char help[] =
    "usage: pilot wait [--timeout S] ID... | --all\n"
    "\n"
    "Wait until the tasks (or, with --all, all the pilot's tasks, those\n"
    "submitted meanwhile too) have ended.  An array's id means all its\n"
    "tasks, ID.N its element N.  On a terminal a progress bar shows how\n"
    "many are done, failed, running, queued, assigned (held by an agent\n"
    "to start when cores free: pilot up --prefetch) and waiting (for\n"
    "their --after), with an ETA; otherwise a line is printed when the\n"
    "counts change, at most every 2 s.\n"
    "\n"
    "options:\n"
    "  --all           every task of the pilot\n"
    "  --timeout S     give up after S (90, 90s, 10m, 2h)\n"
    "  --pilot ID      the pilot to ask\n"
    "  --json          print the final counts as JSON\n"
    "  -h, --help      this help\n"
    "\n"
    "exit status:\n"
    "  0  every task is done (exit code 0)\n"
    "  1  some task failed, was canceled or timed out\n"
    "  2  --timeout passed first\n"
    "  3  error (unknown task, bad usage, the pilot went down, ...)\n"
    "\n"
    "example:\n"
    "  pilot wait --all --timeout 1h\n";

enum {
    OPT_ALL = PL_OPT_CMD,
    OPT_TIMEOUT,
};

enum {
    WAIT_DONE = 0,
    WAIT_FAILED = 1,
    WAIT_TIMEOUT = 2,
    WAIT_ERROR = 3,
};

#define PLAIN_EVERY 2.0     /* seconds between lines when not a terminal */

/* The counts wait cares about, from a counts object. */
struct wait_counts {
    long long total, done, failed, canceled, timeout, running, queued;
    long long waiting, assigned;
};

static void get_counts(const json_t *j, struct wait_counts *w)
{
    w->total = pl_out_jint(j, "total", 0);
    w->done = pl_out_jint(j, "done", 0);
    w->failed = pl_out_jint(j, "failed", 0);
    w->canceled = pl_out_jint(j, "canceled", 0);
    w->timeout = pl_out_jint(j, "timeout", 0);
    w->running = pl_out_jint(j, "running", 0);
    /* placed, not started: held by an agent (--prefetch) or on its way */
    w->assigned = pl_out_jint(j, "assigned", 0);
    w->queued = pl_out_jint(j, "queued", 0);
    w->waiting = pl_out_jint(j, "waiting", 0);
}

static long long ended(const struct wait_counts *w)
{
    return w->done + w->failed + w->canceled + w->timeout;
}

/* "done 860  failed 12  running 8  queued 120" (+ assigned, waiting,
 * canceled, timeout when there are any) */
static void counts_text(const struct wait_counts *w, char *buf, size_t len)
{
    int n = snprintf(buf, len, "done %lld  failed %lld  running %lld  "
                     "queued %lld", w->done, w->failed, w->running,
                     w->queued);
    if (n > 0 && (size_t)n < len && w->assigned)
        n += snprintf(buf + n, len - (size_t)n, "  assigned %lld",
                      w->assigned);
    if (n > 0 && (size_t)n < len && w->waiting)
        n += snprintf(buf + n, len - (size_t)n, "  waiting %lld", w->waiting);
    if (n > 0 && (size_t)n < len && w->canceled)
        n += snprintf(buf + n, len - (size_t)n, "  canceled %lld",
                      w->canceled);
    if (n > 0 && (size_t)n < len && w->timeout)
        snprintf(buf + n, len - (size_t)n, "  timeout %lld", w->timeout);
}

static void draw_bar(const struct wait_counts *w, long long ended0,
                     double elapsed)
{
    char counts[160], el[32], eta[32], tail[320], bar[64], line[400];
    long long fin = ended(w);
    double frac = w->total ? (double)fin / (double)w->total : 1;
    double rate = elapsed > 0 ? (double)(fin - ended0) / elapsed : 0;
    int width = pl_out_term_width(STDERR_FILENO);
    int n;

    counts_text(w, counts, sizeof(counts));
    pl_out_duration(elapsed, el, sizeof(el));
    if (rate > 0)
        pl_out_duration((double)(w->total - fin) / rate, eta, sizeof(eta));
    else
        snprintf(eta, sizeof(eta), "?");
    n = snprintf(tail, sizeof(tail), " %lld/%lld %3d%%  %s  %s ETA %s", fin,
                 w->total, (int)(frac * 100), counts, el, eta);
    /* the bar takes what the text leaves, 10 to 40 cells */
    int cells = width > n + 12 ? width - n - 3 : 10;
    if (cells > 40)
        cells = 40;
    pl_out_bar(frac, cells, bar, sizeof(bar));
    snprintf(line, sizeof(line), "%s%s", bar, tail);
    if (width > 1 && (int)strlen(line) >= width)
        line[width - 1] = '\0';
    pl_out_progress(stderr, line);
}

static void print_plain(const struct wait_counts *w, double elapsed)
{
    char counts[160], el[32];

    counts_text(w, counts, sizeof(counts));
    fprintf(stderr, "pilot: wait: %lld/%lld ended  %s  %s\n", ended(w),
            w->total, counts, pl_out_duration(elapsed, el, sizeof(el)));
}

/* "no task 12" or "no tasks 12, 13" from the 'unknown' list. */
static int unknown_error(const json_t *unknown)
{
    char list[200];
    size_t off = 0, i;
    const json_t *v;

    list[0] = '\0';
    json_array_foreach(unknown, i, v) {
        int n = snprintf(list + off, sizeof(list) - off, "%s%lld",
                         i ? ", " : "", (long long)json_integer_value(v));
        if (n < 0 || (size_t)n >= sizeof(list) - off)
            break;
        off += (size_t)n;
    }
    pl_cli_error("no task%s %s", json_array_size(unknown) > 1 ? "s" : "",
                 list);
    return WAIT_ERROR;
}

/* An end pushed: the counts move on until the next count says more. */
static void end_cb(struct pl_sub *sub, const struct pl_end *e, void *arg)
{
    struct wait_counts *w = arg;
    (void)sub;

    switch (e->state) {
    case PL_ST_DONE: w->done++; break;
    case PL_ST_FAILED: w->failed++; break;
    case PL_ST_CANCELED: w->canceled++; break;
    case PL_ST_TIMEOUT: w->timeout++; break;
    default: return;
    }
    if (w->running > 0)
        w->running--;
    else if (w->assigned > 0)
        w->assigned--;
    else if (w->queued > 0)
        w->queued--;
    else if (w->waiting > 0)
        w->waiting--;
    if (ended(w) > w->total)
        w->total = ended(w); /* --all: a task submitted since the count */
}

/* After a request failed with 'err': go on (true) if pilotd may answer
 * the next one: its pilot still runs and the request was the first to
 * time out ('*tries' counts them: a request that was with a pilotd
 * killed and started again is lost), or its pilotd moved (a local
 * pilot's, restarted: 'sub' goes there too).  When the pilot went down
 * the connection is its database now (conn->db); else the error is
 * said. */
static bool go_on(struct pl_conn *conn, struct pl_sub *sub, int *tries,
                  const struct pl_error *err, bool tty)
{
    int e = errno;

    if (pl_conn_recheck(conn)) {
        if (sub)
            pl_sub_set_rpc(sub, NULL); /* freed with the connection */
        return false;
    }
    if (pl_conn_moved(conn)) {
        if (sub)
            pl_sub_set_rpc(sub, conn->rpc);
        return true;
    }
    if (e == ETIMEDOUT && ++*tries < 2)
        return true;
    if (tty)
        pl_out_progress_clear(stderr);
    pl_cli_error("%s", err->text);
    return false;
}

/* The counts again into *countsp and 'w'.  0; 1 if the pilot went down
 * (then they are its database's); -1 (error said). */
static int recount(struct pl_conn *conn, struct pl_sub *sub,
                   const struct pl_sel_req *sel, json_t **countsp,
                   struct wait_counts *w, bool tty)
{
    struct pl_error err;
    json_t *next;
    int tries = 0, rc = 0;

    while (!(next = pl_conn_counts(conn, sel, &err))) {
        if (go_on(conn, sub, &tries, &err, tty))
            continue;
        if (!conn->db)
            return -1; /* said */
        if (!(next = pl_conn_counts(conn, sel, &err))) {
            pl_cli_error("%s", err.text);
            return -1;
        }
        rc = 1;
        break;
    }
    json_decref(*countsp);
    *countsp = next;
    get_counts(next, w);
    return rc;
}

/* Wait until every task has ended, told by pilotd's pushes (client/sub.h);
 * the counts of the progress bar are asked for at most every
 * PLAIN_EVERY.  Returns an exit code; *countsp is the last counts object
 * (or NULL). */
static int wait_loop(struct pl_cli *cli, struct pl_conn *conn,
                     const struct pl_sel_req *sel, double limit,
                     json_t **countsp)
{
    struct pl_error err;
    struct wait_counts w, shown = { .total = -1 };
    bool tty = isatty(STDERR_FILENO) && !cli->json;
    double t0 = pl_mono(), last_plain = -PLAIN_EVERY, counted;
    long long ended0;
    struct pl_sub *sub = NULL;
    json_t *counts;
    int rc = WAIT_ERROR, tries = 0;

    if (!(counts = pl_conn_counts(conn, sel, &err))) {
        pl_cli_error("%s", err.text);
        return WAIT_ERROR;
    }
    counted = pl_mono();
    *countsp = counts;
    if (json_array_size(json_object_get(counts, "unknown")) > 0)
        return unknown_error(json_object_get(counts, "unknown"));
    get_counts(counts, &w);
    ended0 = ended(&w);
    /* the watch after the count: an end between the two is not counted
     * twice (a count of all tasks is the pilot's total so far) */
    if (ended(&w) < w.total && conn->rpc) {
        if (!(sub = pl_sub_new(conn->rpc, NULL, conn->timeout_ms, end_cb, &w,
                               &err))
            || pl_sub_add(sub, sel, sel == NULL, &err) < 0) {
            pl_cli_error("%s", err.text);
            goto done;
        }
    }
    for (;;) {
        double elapsed = pl_mono() - t0;
        if (sub && !conn->rpc) {
            pl_sub_free(sub); /* the pilot went down (recount()) */
            sub = NULL;
        }
        if (ended(&w) >= w.total && (!sub || pl_sub_pending(sub) == 0)) {
            /* the last end is pushed: the final counts (--all: none was
             * submitted since, else wait for it too) */
            if (!sub)
                break;
            if (recount(conn, sub, sel, countsp, &w, tty) < 0)
                goto done;
            counted = pl_mono();
            if (ended(&w) >= w.total)
                break;
        }
        else if (sub && pl_sub_pending(sub) == 0) {
            if (recount(conn, sub, sel, countsp, &w, tty) < 0)
                goto done;
            counted = pl_mono();
            if (ended(&w) >= w.total)
                break;
        }
        if (!conn->rpc) {
            if (tty)
                pl_out_progress_clear(stderr);
            pl_cli_error("pilot %s is not running: %lld of %lld tasks "
                         "will not end", conn->pilot.id, w.total - ended(&w),
                         w.total);
            goto done;
        }
        if (limit > 0 && elapsed >= limit) {
            char d[32];
            if (tty)
                pl_out_progress_clear(stderr);
            pl_cli_say("pilot: wait: timed out after %s: %lld of %lld tasks "
                       "ended", pl_out_duration(limit, d, sizeof(d)),
                       ended(&w), w.total);
            rc = WAIT_TIMEOUT;
            goto done;
        }
        if (tty)
            draw_bar(&w, ended0, elapsed);
        else if (!cli->json && memcmp(&w, &shown, sizeof(w)) != 0
                 && elapsed - last_plain >= PLAIN_EVERY) {
            print_plain(&w, elapsed);
            shown = w;
            last_plain = elapsed;
        }
        /* until a push, the bar's next frame, the next count or
         * --timeout, whichever comes first */
        double secs = tty ? 0.25 : PLAIN_EVERY;
        if (limit > 0 && limit - elapsed < secs)
            secs = limit - elapsed;
        if (sub && pl_sub_wait(sub, (int)(secs * 1000) + 1, &err) < 0) {
            if (go_on(conn, sub, &tries, &err, tty))
                continue;
            if (!conn->db)
                goto done; /* said */
            /* the pilot went down: one last look at what it recorded */
            pl_sub_free(sub);
            sub = NULL;
            if (recount(conn, NULL, sel, countsp, &w, tty) < 0)
                goto done;
            continue;
        }
        tries = 0;
        if (pl_mono() - counted >= PLAIN_EVERY && conn->rpc) {
            if (recount(conn, sub, sel, countsp, &w, tty) < 0)
                goto done;
            counted = pl_mono();
        }
    }
    if (tty)
        pl_out_progress_clear(stderr);
    if (!cli->json) {
        char d[32];
        pl_cli_say("%lld task%s: %lld done, %lld failed, %lld canceled, "
                   "%lld timeout (%s)", w.total, w.total == 1 ? "" : "s",
                   w.done, w.failed, w.canceled, w.timeout,
                   pl_out_duration(pl_mono() - t0, d, sizeof(d)));
    }
    rc = w.done == w.total ? WAIT_DONE : WAIT_FAILED;
done:
    /* the watch goes with us (else pilotd keeps it 10 minutes) */
    if (sub && conn->rpc)
        (void)pl_sub_unwatch(sub, &err);
    pl_sub_free(sub);
    return rc;
}

int pl_cmd_wait(struct pl_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        { "all", no_argument, NULL, OPT_ALL },
        { "timeout", required_argument, NULL, OPT_TIMEOUT },
        PL_CLI_COMMON_OPTS,
        { 0 },
    };
    struct pl_error err;
    struct pl_conn *conn = NULL;
    json_t *counts = NULL;
    struct pl_sel_req sel = { 0 };
    size_t nids;
    bool all = false;
    double limit = 0;
    int c, r, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if ((r = pl_cli_opt(cli, c, argv, help, &rc)) < 0)
            return rc == PL_EXIT_USAGE ? WAIT_ERROR : rc;
        if (r > 0)
            continue;
        switch (c) {
        case OPT_ALL:
            all = true;
            break;
        case OPT_TIMEOUT:
            if (pl_parse_secs("--timeout", optarg, &limit, &err) < 0) {
                pl_cli_usage(cli, "%s", err.text);
                return WAIT_ERROR;
            }
            break;
        }
    }
    nids = (size_t)(argc - optind);
    if (all && nids > 0) {
        pl_cli_usage(cli, "give task ids or --all, not both");
        return WAIT_ERROR;
    }
    if (!all && nids == 0) {
        pl_cli_usage(cli, "no task ids given (or --all)");
        return WAIT_ERROR;
    }
    /* a usage error too exits 3: 1 and 2 are wait's own */
    if (!(conn = pl_conn_open_sel(cli, PL_CONN_READ, (int)nids,
                                  argv + optind, &sel, &rc))) {
        rc = WAIT_ERROR;
        goto done;
    }
    rc = wait_loop(cli, conn, all ? NULL : &sel, limit, &counts);
    if (cli->json && counts && rc != WAIT_ERROR)
        pl_out_json(counts);
done:
    json_decref(counts);
    pl_conn_free(conn);
    pl_sel_req_clear(&sel);
    return rc;
}
