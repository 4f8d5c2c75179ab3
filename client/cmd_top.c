/* client/cmd_top.c - pilot top: a live view of the nodes and the queue
 *
 * The STATUS request once a second (its per-node running tasks and
 * cordon), drawn by client/topview.c as one frame of plain ANSI and
 * written to the terminal in one write(), past the escaping stdout
 * (client/clean.h): topview.c escapes every piece of the frame that comes
 * from others (node and task names, a cordon's reason, errors), so only
 * top's own codes reach the terminal.
 * Keys come from the terminal in non-canonical mode; SIGINT, SIGTERM,
 * SIGHUP and SIGWINCH are read from a signalfd in the same poll(), so
 * the terminal is put back on every way out but a crash.
 */
#include <errno.h>
#include <langinfo.h>
#include <locale.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "client/cli.h"
#include "client/conn.h"
#include "client/output.h"
#include "client/topview.h"

static const char help[] =
    "usage: pilot top [--once] [--json] [--interval SECS] [--sort KEY]\n"
    "\n"
    "A live view of the pilot, refreshed every second: per node its\n"
    "cores and GPUs busy as bars, its running tasks by name, its state\n"
    "(up, lost, cordoned) and last vetting; the tasks by state; tasks\n"
    "started and ended per second; the walltime left.  Keys: q quit,\n"
    "s the next sort (name, busy, tasks), + and - refresh slower or\n"
    "faster.  When the output is not a terminal (or TERM is dumb, or\n"
    "with --once) it prints one snapshot and exits.  On a pilot that is\n"
    "down, shows what it last recorded.\n"
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

struct top {
    struct pl_conn *conn;
    json_t *status;          /* the last status, or NULL */
    char err[200];           /* why the last refresh failed; "" */
    struct pl_topview v;
};

static double mono(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
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
    pl_topview_rates(&t->v, s, mono());
}

/* Write 'len' bytes at 'buf' to the terminal, past the escaping
 * stdout: a frame, or our own codes. */
static int term_write(const char *buf, size_t len)
{
    size_t off = 0;

    fflush(stdout);
    while (off < len) {
        ssize_t w = write(STDOUT_FILENO, buf + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        off += (size_t)w;
    }
    return 0;
}

static int term_str(const char *s)
{
    return term_write(s, strlen(s));
}

static void term_size(struct pl_topview *v)
{
    struct winsize ws;

    v->rows = 24;
    v->cols = 80;
    if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row
        && ws.ws_col) {
        v->rows = ws.ws_row;
        v->cols = ws.ws_col;
    }
}

/* Draw the last status and write it out.  0, or -1. */
static int frame(struct top *t)
{
    if (pl_topview_draw(&t->v, t->status, t->err) < 0)
        return -1;
    return term_write(t->v.buf, t->v.len);
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
    /* a refresh blocks the keys and signals: a stuck or dead pilotd held
     * q and Ctrl-C for the whole request limit (10 s); 2 s at most here,
     * the next refresh asks again */
    if (t->conn->timeout_ms > 2000)
        t->conn->timeout_ms = 2000;
    term_size(&t->v);
    /* the alternate screen, the cursor hidden */
    term_str("\033[?1049h\033[?25l\033[2J");
    while (!quit) {
        refresh(t);
        double next = mono() + t->v.interval;
        bool redraw = true;
        while (!quit) {
            if (redraw) {
                if (frame(t) < 0) {
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
            /* at most a minute a poll: a long --interval (1e9 s) in
             * ms overflowed the int, and poll() waited for ever */
            int np = poll(pf, keys ? 2 : 1,
                          (int)(fmin(wait, 60) * 1000) + 1);
            if (np < 0 && errno != EINTR) {
                rc = PL_EXIT_ERROR;
                break;
            }
            if (np > 0 && pf[0].revents) {
                struct signalfd_siginfo si;
                if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
                    if (si.ssi_signo == SIGWINCH) {
                        term_size(&t->v);
                        term_str("\033[2J");
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
                    t->v.sort = (t->v.sort + 1) % PL_TOP_SORT_COUNT;
                    redraw = true;
                }
                else if (c == '+' && t->v.interval < 60) {
                    t->v.interval *= 2;
                    redraw = true;
                }
                else if (c == '-' && t->v.interval > 0.25) {
                    t->v.interval /= 2;
                    next = fmin(next, mono() + t->v.interval);
                    redraw = true;
                }
            }
        }
    }
    /* put the terminal back: the main screen, the cursor, the modes */
    term_str("\033[0m\033[?25h\033[?1049l");
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
    struct top t = { .v = { .interval = 1, .start_rate = NAN,
                            .end_rate = NAN } };
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
            if (pl_parse_secs("--interval", optarg, &t.v.interval, &err)
                < 0)
                return pl_cli_usage(cli, "%s", err.text);
            if (t.v.interval < 0.1)
                return pl_cli_usage(cli, "--interval: at least 0.1 s");
            break;
        case OPT_SORT:
            if ((t.v.sort = pl_topview_sort_parse(optarg)) < 0)
                return pl_cli_usage(cli, "--sort: name, busy or tasks, not "
                                    "'%s'", optarg);
            break;
        }
    }
    if (optind < argc)
        return pl_cli_usage(cli, "unexpected argument '%s'", argv[optind]);
    /* the columns a name takes (topview.c): names are UTF-8, and so is
     * the terminal in all but name where the locale is C */
    if (!setlocale(LC_CTYPE, "") || strcmp(nl_langinfo(CODESET), "UTF-8"))
        setlocale(LC_CTYPE, "C.UTF-8");
    if (!(t.conn = pl_conn_open(&cli->find, PL_CONN_READ, &err)))
        return pl_cli_error("%s", err.text);
    rc = PL_EXIT_ERROR;
    /* a terminal that cannot move its cursor (TERM=dumb: Emacs' shell,
     * some CI logs) got our codes as text: one snapshot there too */
    const char *term = getenv("TERM");
    t.v.live = !cli->json && !once && isatty(STDOUT_FILENO) && term
               && *term && strcmp(term, "dumb");
    if (t.v.live) {
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
        if (pl_topview_draw(&t.v, t.status, NULL) < 0) {
            pl_cli_error("top: out of memory");
            goto done;
        }
        fwrite(t.v.buf, 1, t.v.len, stdout);
    }
    rc = PL_EXIT_OK;
done:
    pl_topview_fini(&t.v);
    json_decref(t.status);
    pl_conn_free(t.conn);
    return rc;
}
