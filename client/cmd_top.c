/* client/cmd_top.c - pilot top: a live view of the nodes and the queue
 *
 * The STATUS request once a second (its per-node running tasks and
 * cordon), drawn as one frame of plain ANSI: cursor home, each line
 * cleared to its end, the rest of the screen cleared.  The frame is built
 * in memory and written to the terminal in one write(), past the
 * escaping stdout (client/clean.h): every piece of it that comes from
 * others (node and task names, a cordon's reason, errors) is escaped
 * first with pl_clean_str(), so only top's own codes reach the terminal.
 * Keys come from the terminal in non-canonical mode; SIGINT, SIGTERM,
 * SIGHUP and SIGWINCH are read from a signalfd in the same poll(), so
 * the terminal is put back on every way out but a crash.
 */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "client/clean.h"
#include "client/cli.h"
#include "client/conn.h"
#include "client/output.h"

static const char help[] =
    "usage: pilot top [--once] [--json] [--interval SECS] [--sort KEY]\n"
    "\n"
    "A live view of the pilot, refreshed every second: per node its\n"
    "cores and GPUs busy as bars, its running tasks by name, its state\n"
    "(up, lost, cordoned) and last vetting; the tasks by state; tasks\n"
    "started and ended per second; the walltime left.  Keys: q quit,\n"
    "s the next sort (name, busy, tasks), + and - refresh slower or\n"
    "faster.  When the output is not a terminal (or with --once) it\n"
    "prints one snapshot and exits.  On a pilot that is down, shows what\n"
    "it last recorded.\n"
    "\n"
    "options:\n"
    "  --once            one snapshot, then exit\n"
    "  --interval SECS   seconds between refreshes (default 1)\n"
    "  --sort KEY        name, busy (cores busy) or tasks (running)\n"
    "  --json            one snapshot as JSON (the status object)\n"
    "  --pilot ID        the pilot to show\n"
    "  -h, --help        this help\n"
    "\n"
    "example:\n"
    "  pilot top\n";

enum { OPT_ONCE = PL_OPT_CMD, OPT_INTERVAL, OPT_SORT };

enum sort { SORT_NAME, SORT_BUSY, SORT_TASKS, SORT_COUNT };
static const char *const sort_names[] = { "name", "busy", "tasks" };

struct top {
    struct pl_conn *conn;
    json_t *status;          /* the last status, or NULL */
    char err[200];           /* why the last refresh failed; "" */
    bool live;               /* drawing on a terminal */
    int rows, cols;
    int sort;                /* enum sort */
    double interval;
    /* rates: the counts of the refresh before */
    bool have_prev;
    double prev_t;
    long long prev_out, prev_end;
    double start_rate, end_rate;
    /* the frame being built */
    char *buf;
    size_t len, cap;
    int line_cols;           /* columns used on the current line */
    int lines;               /* lines of the frame so far */
    bool oom;
};

static void grow(struct top *t, size_t more)
{
    if (t->len + more + 1 <= t->cap)
        return;
    size_t ncap = t->cap ? t->cap : 8192;
    while (ncap < t->len + more + 1)
        ncap *= 2;
    char *nb = realloc(t->buf, ncap);
    if (!nb) {
        t->oom = true;
        return;
    }
    t->buf = nb;
    t->cap = ncap;
}

/* Append our own terminal code (live only): it takes no column. */
static void code(struct top *t, const char *c)
{
    size_t n = strlen(c);

    if (!t->live)
        return;
    grow(t, n);
    if (t->oom)
        return;
    memcpy(t->buf + t->len, c, n);
    t->len += n;
}

/* Append text that holds no control character, cut at the screen's
 * width (UTF-8 counted by code points). */
static void put(struct top *t, const char *s)
{
    int width = t->live ? t->cols : INT32_MAX;

    /* N.B. the last row stays empty: a newline there would scroll */
    if (t->live && t->lines >= t->rows - 1)
        return;
    for (; *s && !t->oom; s++) {
        bool cont = ((unsigned char)*s & 0xC0) == 0x80;
        if (!cont && t->line_cols >= width)
            break;
        grow(t, 1);
        if (t->oom)
            return;
        t->buf[t->len++] = *s;
        t->line_cols += !cont;
    }
}

static void putf(struct top *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* put() of our own formatted text: never with a string from others as
 * an argument (put_user() is for those). */
static void putf(struct top *t, const char *fmt, ...)
{
    char line[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    put(t, line);
}

/* Text from others (names, reasons, errors): escaped, then put(); at
 * least 'pad' columns, padded with spaces; at most 'max' (0: any). */
static void put_user(struct top *t, const char *s, int pad, int max)
{
    char *c = pl_clean_str(s ? s : "-");
    int n = 0;

    if (!c) {
        t->oom = true;
        return;
    }
    /* the two controls pl_clean_str() leaves would break the frame */
    for (char *p = c; *p; p++)
        if (*p == '\n' || *p == '\t')
            *p = ' ';
    if (max > 0) {
        int k = 0;
        for (char *p = c; *p; p++)
            if (((unsigned char)*p & 0xC0) != 0x80 && k++ == max) {
                *p = '\0';
                break;
            }
    }
    for (char *p = c; *p; p++)
        n += ((unsigned char)*p & 0xC0) != 0x80;
    put(t, c);
    for (; n < pad; n++)
        put(t, " ");
    free(c);
}

/* End the current line: on a terminal, clear what an earlier frame left
 * after it; lines past the screen's height are dropped. */
static void endl(struct top *t)
{
    if (!t->live || t->lines < t->rows - 1) {
        code(t, "\033[K");
        grow(t, 2);
        if (!t->oom) {
            if (t->live)
                t->buf[t->len++] = '\r';
            t->buf[t->len++] = '\n';
        }
    }
    t->lines++;
    t->line_cols = 0;
}

/* Whether another line fits the screen. */
static bool room(const struct top *t)
{
    return !t->live || t->lines < t->rows - 1;
}

static long long count(const json_t *tasks, const char *st)
{
    return pl_out_jint(tasks, st, 0);
}

static double mono(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Tasks/s that left the queue (placed, or canceled there) and that
 * ended, from the change of the counts since the refresh before. */
static void rates(struct top *t)
{
    const json_t *tasks = json_object_get(t->status, "tasks");
    long long end = count(tasks, "done") + count(tasks, "failed")
                    + count(tasks, "canceled") + count(tasks, "timeout");
    long long out = pl_out_jint(tasks, "total", 0) - count(tasks, "queued")
                    - count(tasks, "waiting");
    double now = mono();

    t->start_rate = t->end_rate = NAN;
    if (t->have_prev && now > t->prev_t) {
        double dt = now - t->prev_t;
        t->start_rate = fmax(0, (double)(out - t->prev_out) / dt);
        t->end_rate = fmax(0, (double)(end - t->prev_end) / dt);
    }
    t->have_prev = true;
    t->prev_t = now;
    t->prev_out = out;
    t->prev_end = end;
}

/* Fetch the status again; a pilot gone down is read from its database. */
static void refresh(struct top *t)
{
    struct pl_error err;
    json_t *s = pl_conn_status(t->conn, &err);

    if (!s && (pl_conn_recheck(t->conn) || pl_conn_moved(t->conn)))
        s = pl_conn_status(t->conn, &err);
    if (!s) {
        snprintf(t->err, sizeof(t->err), "%s", err.text);
        return;
    }
    t->err[0] = '\0';
    json_decref(t->status);
    t->status = s;
    rates(t);
}

static int cmp_nodes(const void *a, const void *b, void *arg)
{
    const json_t *x = *(const json_t *const *)a;
    const json_t *y = *(const json_t *const *)b;
    int mode = *(const int *)arg;
    long long kx = 0, ky = 0;
    const char *nx = pl_out_jstr(x, "name"), *ny = pl_out_jstr(y, "name");

    if (mode == SORT_BUSY) {
        kx = pl_out_jcount(x, "cores_busy") + pl_out_jcount(x, "gpus_busy");
        ky = pl_out_jcount(y, "cores_busy") + pl_out_jcount(y, "gpus_busy");
    }
    else if (mode == SORT_TASKS) {
        kx = pl_out_jcount(x, "running");
        ky = pl_out_jcount(y, "running");
    }
    if (kx != ky)
        return kx > ky ? -1 : 1;
    return strcmp(nx ? nx : "", ny ? ny : "");
}

/* A JSON value of the vetting object as text ("41.2", "cpu_speed"). */
static void jtext(const json_t *v, char *buf, size_t len)
{
    if (json_is_string(v))
        snprintf(buf, len, "%s", json_string_value(v));
    else if (json_is_integer(v))
        snprintf(buf, len, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, len, "%.3g", json_real_value(v));
    else if (json_is_true(v) || json_is_false(v))
        snprintf(buf, len, "%s", json_is_true(v) ? "true" : "false");
    else
        buf[0] = '\0';
}

/* The VET column: its last vetting ("ok", "failed gpu_mem 3.1"), else
 * why it is cordoned, else "-". */
static void vet_text(const json_t *n, char *buf, size_t len)
{
    const json_t *vet = json_object_get(n, "vet");
    const char *cordon = pl_out_jstr(n, "cordon");
    char st[64], check[64], fig[64];

    if (json_is_object(vet)) {
        jtext(json_object_get(vet, "state"), st, sizeof(st));
        jtext(json_object_get(vet, "check"), check, sizeof(check));
        jtext(json_object_get(vet, "figure"), fig, sizeof(fig));
        snprintf(buf, len, "%s%s%s%s%s", st[0] ? st : "vetted",
                 check[0] ? " " : "", check, fig[0] ? " " : "", fig);
    }
    else if (cordon)
        snprintf(buf, len, "%s", cordon);
    else
        snprintf(buf, len, "-");
}

/* "[#####.....] 5/10" */
static void bar(struct top *t, long long busy, long long total, int width)
{
    char b[128];

    pl_out_bar(total > 0 ? (double)busy / (double)total : 0, width, b,
               sizeof(b));
    putf(t, "%s %3lld/%-3lld ", b, busy, total);
}

static void draw_nodes(struct top *t, const json_t *nodes)
{
    size_t nn = json_array_size(nodes), i;
    const json_t **v = calloc(nn ? nn : 1, sizeof(*v));
    const json_t *n;
    int namew = 4, vetw = 0;
    bool gpus = false;

    if (!v) {
        t->oom = true;
        return;
    }
    json_array_foreach(nodes, i, n) {
        const char *name = pl_out_jstr(n, "name");
        char vt[256];
        v[i] = n;
        if (name && (int)strlen(name) > namew)
            namew = (int)strlen(name) > 24 ? 24 : (int)strlen(name);
        gpus |= json_array_size(json_object_get(n, "gpus")) > 0
                || pl_out_jcount(n, "gpus") > 0;
        vet_text(n, vt, sizeof(vt));
        if (strcmp(vt, "-") && (int)strlen(vt) > vetw)
            vetw = (int)strlen(vt) > 28 ? 28 : (int)strlen(vt);
    }
    int sm = t->sort;
    qsort_r(v, nn, sizeof(*v), cmp_nodes, &sm);
    /* the bars take what the screen has to spare, within reason */
    int barw = t->live ? (t->cols - namew - 60) / (gpus ? 3 : 2) : 20;
    if (barw < 8)
        barw = 8;
    if (barw > 40)
        barw = 40;
    code(t, "\033[7m");
    putf(t, "%-*s %-8s %-*s ", namew, "NODE", "STATE", barw + 10, "CORES");
    if (gpus)
        putf(t, "%-*s ", barw / 2 + 10, "GPUS");
    if (vetw)
        putf(t, "%-*s ", vetw > 3 ? vetw : 3, "VET");
    putf(t, "TASKS");
    if (t->live)
        for (int c = t->line_cols; c < t->cols; c++)
            put(t, " ");
    code(t, "\033[0m");
    endl(t);
    for (i = 0; i < nn && room(t); i++) {
        if (t->live && t->lines == t->rows - 2 && i + 1 < nn) {
            putf(t, "... %zu more nodes", nn - i);
            endl(t);
            break;
        }
        const json_t *tl = json_object_get(v[i], "tasks"), *k;
        const char *st = pl_out_jstr(v[i], "state");
        bool cordoned = pl_out_jstr(v[i], "cordon") != NULL;
        long long nc = json_is_array(json_object_get(v[i], "cores"))
                           ? (long long)json_array_size(
                                 json_object_get(v[i], "cores"))
                           : pl_out_jcount(v[i], "cores");
        long long ng = json_is_array(json_object_get(v[i], "gpus"))
                           ? (long long)json_array_size(
                                 json_object_get(v[i], "gpus"))
                           : pl_out_jcount(v[i], "gpus");
        size_t j;
        put_user(t, pl_out_jstr(v[i], "name"), namew + 1, namew);
        if (cordoned && st && !strcmp(st, "up"))
            st = "cordoned";
        put_user(t, st, 9, 8);
        bar(t, pl_out_jcount(v[i], "cores_busy"), nc, barw);
        if (gpus)
            bar(t, pl_out_jcount(v[i], "gpus_busy"), ng, barw / 2);
        if (vetw) {
            char vt[256];
            vet_text(v[i], vt, sizeof(vt));
            put_user(t, vt, (vetw > 3 ? vetw : 3) + 1, vetw);
        }
        json_array_foreach(tl, j, k) {
            const char *name = pl_out_jstr(k, "name");
            const char *cmd = pl_out_jstr(k, "cmd");
            const char *base = cmd && strrchr(cmd, '/') ? strrchr(cmd, '/') + 1
                                                        : cmd;
            putf(t, "%s%lld:", j ? " " : "", pl_out_jint(k, "id", 0));
            put_user(t, name ? name : base ? base : "?", 0, 40);
        }
        if (pl_out_jcount(v[i], "tasks_more"))
            putf(t, " +%lld more", pl_out_jcount(v[i], "tasks_more"));
        else if (!json_array_size(tl) && pl_out_jcount(v[i], "running"))
            putf(t, "%lld running", pl_out_jcount(v[i], "running"));
        endl(t);
    }
    free(v);
}

/* One frame of the last status, into t->buf. */
static void draw(struct top *t)
{
    const json_t *s = t->status, *n, *p;
    const json_t *tasks = json_object_get(s, "tasks");
    const json_t *nodes = json_object_get(s, "nodes");
    const char *state = pl_out_jstr(s, "state");
    const char *host = pl_out_jstr(s, "host");
    long long job = pl_out_jint(s, "job", 0), up = 0, lost = 0, cord = 0;
    double left = pl_out_jreal(s, "walltime_left", NAN);
    char d[32], clock[16];
    time_t now = time(NULL);
    size_t i;

    t->len = 0;
    t->lines = 0;
    t->line_cols = 0;
    code(t, "\033[H");
    if (!s) {
        putf(t, "pilot top: no status yet");
        endl(t);
    }
    else {
        putf(t, "pilot ");
        put_user(t, pl_out_jstr(s, "pilot"), 0, 0);
        putf(t, " (");
        put_user(t, pl_out_jstr(s, "mode"), 0, 0);
        if (job > 0)
            putf(t, " job %lld", job);
        if (host) {
            putf(t, " on ");
            put_user(t, host, 0, 0);
        }
        putf(t, ") ");
        put_user(t, state ? state : "running", 0, 0);
        if (!isnan(left))
            putf(t, ", walltime left %s", pl_out_duration(left, d,
                                                           sizeof(d)));
        strftime(clock, sizeof(clock), "%H:%M:%S", localtime(&now));
        putf(t, "   %s", clock);
        endl(t);
        if (state && strcmp(state, "running") && strcmp(state, "stopping")) {
            code(t, "\033[1m");
            putf(t, "the pilot does not run: what it last recorded");
            code(t, "\033[0m");
            endl(t);
        }
        json_array_foreach(nodes, i, n) {
            const char *st = pl_out_jstr(n, "state");
            up += st && !strcmp(st, "up");
            lost += st && !strcmp(st, "lost");
            cord += pl_out_jstr(n, "cordon") != NULL;
        }
        const json_t *cores = json_object_get(s, "cores");
        const json_t *gpus = json_object_get(s, "gpus");
        putf(t, "nodes: %lld up, %lld lost, %lld cordoned   cores: %lld/%lld "
             "busy   gpus: %lld/%lld busy", up, lost, cord,
             pl_out_jint(cores, "busy", 0), pl_out_jint(cores, "total", 0),
             pl_out_jint(gpus, "busy", 0), pl_out_jint(gpus, "total", 0));
        endl(t);
        putf(t, "tasks: %lld waiting, %lld queued, %lld assigned, %lld "
             "running, %lld done, %lld failed, %lld canceled, %lld timeout",
             count(tasks, "waiting"), count(tasks, "queued"),
             count(tasks, "assigned"), count(tasks, "running"),
             count(tasks, "done"), count(tasks, "failed"),
             count(tasks, "canceled"), count(tasks, "timeout"));
        endl(t);
        if (isnan(t->start_rate))
            putf(t, "rate: - started/s, - ended/s");
        else
            putf(t, "rate: %.1f started/s, %.1f ended/s", t->start_rate,
                 t->end_rate);
        if (t->live)
            putf(t, "   sort: %s   (q quit, s sort, +/- refresh %gs)",
                 sort_names[t->sort], t->interval);
        endl(t);
        json_array_foreach(json_object_get(s, "pools"), i, p) {
            putf(t, "pool ");
            put_user(t, pl_out_jstr(p, "name"), 0, 0);
            putf(t, ": ");
            put_user(t, pl_out_jstr(p, "state"), 0, 0);
            putf(t, ", %lld workers (%lld busy), %lld tasks queued",
                 pl_out_jcount(p, "workers"), pl_out_jcount(p, "busy"),
                 pl_out_jcount(p, "queued"));
            endl(t);
        }
        endl(t);
        draw_nodes(t, nodes);
    }
    if (t->err[0] && room(t)) {
        putf(t, "error: ");
        put_user(t, t->err, 0, 0);
        endl(t);
    }
    code(t, "\033[J");
}

/* Write the whole frame to the terminal, past the escaping stdout. */
static int flush_frame(struct top *t)
{
    size_t off = 0;

    fflush(stdout);
    while (off < t->len) {
        ssize_t w = write(STDOUT_FILENO, t->buf + off, t->len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        off += (size_t)w;
    }
    return 0;
}

static void term_size(struct top *t)
{
    struct winsize ws;

    t->rows = 24;
    t->cols = 80;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row
        && ws.ws_col) {
        t->rows = ws.ws_row;
        t->cols = ws.ws_col;
    }
}

/* The live view until q or a signal.  Returns an exit code. */
static int run_live(struct top *t)
{
    struct termios saved, raw;
    bool keys = isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &saved) == 0;
    sigset_t mask, old;
    int sfd, rc = PL_EXIT_OK;
    bool quit = false;

    sigemptyset(&mask);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigaddset(&mask, SIGWINCH);
    if (sigprocmask(SIG_BLOCK, &mask, &old) < 0)
        return pl_cli_error("top: signals: %s", strerror(errno));
    if ((sfd = signalfd(-1, &mask, SFD_CLOEXEC)) < 0) {
        rc = pl_cli_error("top: signals: %s", strerror(errno));
        sigprocmask(SIG_SETMASK, &old, NULL);
        return rc;
    }
    if (keys) {
        /* keys one at a time, unechoed; ^C still a signal (ISIG) */
        raw = saved;
        raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
        raw.c_cc[VMIN] = 1;
        raw.c_cc[VTIME] = 0;
        tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    }
    term_size(t);
    /* the alternate screen, the cursor hidden */
    t->len = 0;
    code(t, "\033[?1049h\033[?25l\033[2J");
    flush_frame(t);
    while (!quit) {
        refresh(t);
        double next = mono() + t->interval;
        bool redraw = true;
        while (!quit) {
            if (redraw) {
                draw(t);
                if (t->oom || flush_frame(t) < 0) {
                    rc = PL_EXIT_ERROR;
                    quit = true;
                    break;
                }
                redraw = false;
            }
            double wait = next - mono();
            if (wait <= 0)
                break;
            struct pollfd pf[2] = { { sfd, POLLIN, 0 },
                                    { STDIN_FILENO, POLLIN, 0 } };
            int np = poll(pf, keys ? 2 : 1, (int)(wait * 1000) + 1);
            if (np < 0 && errno != EINTR) {
                rc = PL_EXIT_ERROR;
                break;
            }
            if (np > 0 && pf[0].revents) {
                struct signalfd_siginfo si;
                if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
                    if (si.ssi_signo == SIGWINCH) {
                        term_size(t);
                        t->len = 0;
                        code(t, "\033[2J");
                        flush_frame(t);
                        redraw = true;
                    }
                    else
                        quit = true;
                }
            }
            if (np > 0 && keys && pf[1].revents) {
                char c;
                ssize_t r = read(STDIN_FILENO, &c, 1);
                if (r <= 0 || c == 'q' || c == 'Q')
                    quit = true;
                else if (c == 's' || c == 'S') {
                    t->sort = (t->sort + 1) % SORT_COUNT;
                    redraw = true;
                }
                else if (c == '+' && t->interval < 60) {
                    t->interval *= 2;
                    redraw = true;
                }
                else if (c == '-' && t->interval > 0.25) {
                    t->interval /= 2;
                    next = fmin(next, mono() + t->interval);
                    redraw = true;
                }
            }
        }
    }
    /* put the terminal back: the main screen, the cursor, the modes */
    t->len = 0;
    t->live = true;
    code(t, "\033[0m\033[?25h\033[?1049l");
    flush_frame(t);
    if (keys)
        tcsetattr(STDIN_FILENO, TCSANOW, &saved);
    close(sfd);
    sigprocmask(SIG_SETMASK, &old, NULL);
    return rc;
}

int pl_cmd_top(struct pl_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        { "once", no_argument, NULL, OPT_ONCE },
        { "interval", required_argument, NULL, OPT_INTERVAL },
        { "sort", required_argument, NULL, OPT_SORT },
        PL_CLI_COMMON_OPTS, { 0 } };
    struct top t = { .interval = 1, .start_rate = NAN, .end_rate = NAN };
    struct pl_error err;
    bool once = false;
    int c, r, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if ((r = pl_cli_opt(cli, c, argv, help, &rc)) < 0)
            return rc;
        if (r > 0)
            continue;
        switch (c) {
        case OPT_ONCE:
            once = true;
            break;
        case OPT_INTERVAL:
            if (pl_parse_secs("--interval", optarg, &t.interval, &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            if (t.interval < 0.1)
                return pl_cli_usage(cli, "--interval: at least 0.1 s");
            break;
        case OPT_SORT:
            for (t.sort = 0; t.sort < SORT_COUNT; t.sort++)
                if (!strcmp(optarg, sort_names[t.sort]))
                    break;
            if (t.sort == SORT_COUNT)
                return pl_cli_usage(cli, "--sort: name, busy or tasks, not "
                                    "'%s'", optarg);
            break;
        }
    }
    if (optind < argc)
        return pl_cli_usage(cli, "unexpected argument '%s'", argv[optind]);
    if (!(t.conn = pl_conn_open(&cli->find, PL_CONN_READ, &err)))
        return pl_cli_error("%s", err.text);
    rc = PL_EXIT_ERROR;
    t.live = !cli->json && !once && isatty(STDOUT_FILENO);
    if (t.live) {
        rc = run_live(&t);
        goto done;
    }
    refresh(&t);
    if (!t.status) {
        pl_cli_error("%s", t.err);
        goto done;
    }
    if (cli->json)
        pl_out_json(t.status);
    else {
        /* a snapshot: through stdout, which escapes (again) */
        draw(&t);
        if (t.oom)
            goto done;
        fwrite(t.buf, 1, t.len, stdout);
    }
    rc = PL_EXIT_OK;
done:
    free(t.buf);
    json_decref(t.status);
    pl_conn_free(t.conn);
    return rc;
}
