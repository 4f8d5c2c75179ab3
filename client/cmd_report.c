/* client/cmd_report.c - pilot report: a page (or JSON) of what ran */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/cli.h"
#include "client/conn.h"
#include "client/output.h"
#include "client/parse.h"
#include "client/report.h"
#include "proto/query.h"
#include "proto/spec.h"
#include "proto/strv.h"
#include "proto/tlmsg.h"

static const char help[] =
    "usage: pilot report [--html FILE] [--json] [--since T] [--tag K=V]\n"
    "                    [--name N] [--color-tag K] [--detail-max N] "
    "[ID...]\n"
    "\n"
    "Write one HTML page of what the pilot ran, which a browser opens with\n"
    "no network: a timeline of every node's cores and GPUs (a row each, a\n"
    "bar per task rank, coloured by name or by a tag; hover for the task),\n"
    "utilisation over time, queue-wait and run-time histograms, the\n"
    "slowest tasks, failures grouped by reason, and per name and per tag:\n"
    "count, mean and p95 wall time, CPU efficiency (CPU time over cores x\n"
    "wall, where measured).  From 'detail-max' tasks on, the timeline shows\n"
    "each row's busy fraction over time instead of a bar per rank, so the\n"
    "page stays small.  On a pilot that is down, reports its last recorded\n"
    "state.  Prints the page's path.\n"
    "\n"
    "options:\n"
    "  --html FILE     write the page there (default: report-PILOT.html\n"
    "                  in the current directory; '-': stdout)\n"
    "  --json          print the summary (histograms, slowest, failures,\n"
    "                  tables, utilisation) as JSON instead\n"
    "  --since T       leave out tasks that ended before T: a duration ago\n"
    "                  (90s, 30m, 2h, 1d), epoch seconds, or a local time\n"
    "                  YYYY-MM-DD[THH:MM[:SS]]\n"
    "  --tag K=V       only tasks with tag K set to V (K alone: any value);\n"
    "                  repeatable, all must match\n"
    "  --name N        only tasks named N\n"
    "  --color-tag K   colour the bars by tag K's value (default: name)\n"
    "  --detail-max N  aggregate the timeline from N tasks on (default\n"
    "                  20000: a page of more bars\n"
    "                  takes seconds to draw)\n"
    "  --pilot ID      the pilot to ask\n"
    "  -h, --help      this help\n"
    "\n"
    "examples:\n"
    "  pilot report\n"
    "  pilot report --since 2h --tag model=lstm --html lstm.html\n"
    "  pilot report 40 --json       # array 40's summary\n";

enum {
    OPT_HTML = PL_OPT_CMD,
    OPT_SINCE,
    OPT_TAG,
    OPT_NAME,
    OPT_COLOR_TAG,
    OPT_DETAIL_MAX,
};

#define DETAIL_MAX 20000
/* columns of the aggregated timeline: a row's cells at most, and all
 * the rows' together (a thousand nodes of 288 cores stay a few MB) */
#define HEAT_BUCKETS 400
#define HEAT_CELLS 2000000

/* --since: a duration ago, epoch seconds, or a local date and time. */
static int parse_since(const char *s, double now, double *t,
                       struct pl_error *errp)
{
    static const char *const fmts[] = { "%Y-%m-%dT%H:%M:%S",
                                        "%Y-%m-%d %H:%M:%S",
                                        "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M",
                                        "%Y-%m-%d" };
    struct pl_error ignored;
    double secs;
    char *end;

    for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
        struct tm tm = { .tm_isdst = -1 };
        const char *rest = strptime(s, fmts[i], &tm);
        if (rest && !*rest) {
            /* mktime() moves a day that does not exist (2026-02-30) to
             * one that does (March 2nd): refused, not moved */
            int mday = tm.tm_mday, mon = tm.tm_mon;
            *t = (double)mktime(&tm);
            if (tm.tm_mday != mday || tm.tm_mon != mon)
                break;
            return 0;
        }
    }
    secs = strtod(s, &end);
    if (end != s && !*end && secs >= 1e9 && isfinite(secs)) {
        *t = secs;
        return 0;
    }
    if (pl_parse_secs("--since", s, &secs, &ignored) == 0) {
        *t = now - secs;
        return 0;
    }
    errno = EINVAL;
    return pl_errprintf(errp, "--since: '%s' is not a duration ago (2h), "
                        "epoch seconds or YYYY-MM-DD[THH:MM[:SS]]", s);
}

/* Every page of the selection into 'r'. */
static int read_all(struct pl_conn *conn, struct pl_tl_req *q,
                    struct pl_report *r, struct pl_error *errp)
{
    for (;;) {
        json_t *page = pl_conn_timeline(conn, q, errp), *tasks, *last;
        json_int_t next;
        bool more;
        int rc;
        if (!page)
            return -1;
        rc = pl_report_add_page(r, page, errp);
        tasks = json_object_get(page, "tasks");
        last = json_object_get(json_array_get(tasks,
                                              json_array_size(tasks) - 1),
                               "id");
        next = json_is_integer(last) ? json_integer_value(last) : 0;
        more = json_is_true(json_object_get(page, "more"));
        json_decref(page);
        if (rc < 0)
            return -1;
        if (!more)
            return 0;
        if (next <= 0 || (uint64_t)next == q->after) {
            errno = EPROTO;
            return pl_errprintf(errp, "timeline: a page that does not go "
                                "on after the one before");
        }
        q->after = (uint64_t)next;
    }
}

/* Open where the page goes.  A regular file (or a new one) is written
 * beside, then renamed over it, so that a page is whole or not there:
 * through a symlink, beside the file it names (the link stays), with
 * the mode the file had.  What is not a regular file (a FIFO, a
 * terminal, /dev/stdout; '-' is stdout) is written straight: renamed
 * over, /dev/stdout (as root) or a FIFO was replaced by a file, and a
 * symlink by a copy.  '*tmp' is the name to rename, or "" for none. */
static FILE *open_page(const char *path, char *tmp, size_t len,
                       char *dst, struct pl_error *errp)
{
    struct stat st;
    mode_t mode, mask;
    bool exists;
    FILE *f;
    int fd;

    tmp[0] = '\0';
    if (!strcmp(path, "-")) {
        /* fd 1 itself: stdout escapes what it writes (client/clean.h) */
        if ((fd = dup(STDOUT_FILENO)) < 0 || !(f = fdopen(fd, "w"))) {
            pl_errprintf(errp, "cannot write the page to stdout: %s",
                         strerror(errno));
            if (fd >= 0)
                close(fd);
            return NULL;
        }
        return f;
    }
    exists = stat(path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode)) {
        errno = EISDIR;
        pl_errprintf(errp, "cannot write %s: it is a directory", path);
        return NULL;
    }
    if (exists && !S_ISREG(st.st_mode)) {
        if (!(f = fopen(path, "w")))
            pl_errprintf(errp, "cannot write %s: %s", path, strerror(errno));
        return f;
    }
    if (!exists || !realpath(path, dst))
        snprintf(dst, PATH_MAX, "%s", path);
    if (snprintf(tmp, len, "%s.XXXXXX", dst) >= (int)len) {
        tmp[0] = '\0';
        errno = ENAMETOOLONG;
        pl_errprintf(errp, "%s: name too long", path);
        return NULL;
    }
    if ((fd = mkstemp(tmp)) < 0) {
        pl_errprintf(errp, "cannot write %s: %s", path, strerror(errno));
        tmp[0] = '\0';
        return NULL;
    }
    /* mkstemp()'s 0600: the old file's mode, or a new file's */
    mask = umask(0);
    umask(mask);
    mode = exists ? st.st_mode & 07777 : 0666 & ~mask;
    if (fchmod(fd, mode) < 0 || !(f = fdopen(fd, "w"))) {
        pl_errprintf(errp, "cannot write %s: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
        tmp[0] = '\0';
        return NULL;
    }
    return f;
}

static int write_page(const struct pl_report *r, const char *path,
                      const char *pilot, uint64_t detail_max,
                      struct pl_error *errp)
{
    char title[160], tmp[PATH_MAX + 8], dst[PATH_MAX];
    size_t nb = HEAT_BUCKETS;
    FILE *f;

    if (r->nrows && r->nrows * nb > HEAT_CELLS)
        nb = HEAT_CELLS / r->nrows > 20 ? HEAT_CELLS / r->nrows : 20;
    snprintf(title, sizeof(title), "pilot report: %s", pilot);
    if (!(f = open_page(path, tmp, sizeof(tmp), dst, errp)))
        return -1;
    if (pl_report_write_html(r, f, title, r->ntasks < detail_max, nb,
                             errp) < 0) {
        fclose(f);
        if (tmp[0])
            unlink(tmp);
        return -1;
    }
    if (fclose(f) != 0 || (tmp[0] && rename(tmp, dst) < 0)) {
        int e = errno;
        if (tmp[0])
            unlink(tmp);
        errno = e;
        return pl_errprintf(errp, "cannot write %s: %s", path,
                            strerror(errno));
    }
    return 0;
}

int pl_cmd_report(struct pl_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        { "html", required_argument, NULL, OPT_HTML },
        { "since", required_argument, NULL, OPT_SINCE },
        { "tag", required_argument, NULL, OPT_TAG },
        { "name", required_argument, NULL, OPT_NAME },
        { "color-tag", required_argument, NULL, OPT_COLOR_TAG },
        { "detail-max", required_argument, NULL, OPT_DETAIL_MAX },
        PL_CLI_COMMON_OPTS,
        { 0 },
    };
    struct pl_error err;
    struct pl_conn *conn = NULL;
    char *tags[PL_QUERY_MAX_TAGS + 1] = { NULL };
    size_t ntags = 0;
    struct pl_tl_req q = { .tags = tags };
    struct pl_report r;
    const char *html = NULL, *color_tag = NULL;
    uint64_t detail_max = DETAIL_MAX;
    char path[PATH_MAX];
    int c, x, rc;

    pl_report_init(&r, NULL);
    r.now = pl_now();
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if ((x = pl_cli_opt(cli, c, argv, help, &rc)) < 0)
            return rc;
        if (x > 0)
            continue;
        switch (c) {
        case OPT_HTML:
            html = optarg;
            break;
        case OPT_SINCE:
            if (parse_since(optarg, r.now, &q.since, &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            break;
        case OPT_TAG:
            if (!pl_spec_tag_key(optarg))
                return pl_cli_usage(cli, "--tag: '%s' is not KEY=VALUE or "
                                    "KEY (KEY: letters, digits, '_', '.', "
                                    "'-')", optarg);
            if (ntags == PL_QUERY_MAX_TAGS)
                return pl_cli_usage(cli, "--tag: more than %d",
                                    PL_QUERY_MAX_TAGS);
            tags[ntags++] = optarg;
            break;
        case OPT_NAME:
            if (!*optarg || strlen(optarg) > PL_SPEC_MAX_NAME)
                return pl_cli_usage(cli, "--name: 1 to %d bytes",
                                    PL_SPEC_MAX_NAME);
            q.name = optarg;
            break;
        case OPT_COLOR_TAG:
            if (!pl_spec_tag_key(optarg) || strchr(optarg, '='))
                return pl_cli_usage(cli, "--color-tag: '%s' is not a tag "
                                    "key", optarg);
            color_tag = optarg;
            break;
        case OPT_DETAIL_MAX:
            if (pl_parse_uint("--detail-max", optarg, 0, UINT32_MAX,
                              &detail_max, &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            break;
        }
    }
    /* --json prints instead of writing: a page asked for too was
     * silently not written */
    if (cli->json && html)
        return pl_cli_usage(cli, "--json prints the summary, --html writes "
                            "the page: one or the other");
    r.color_tag = color_tag;
    if (!(conn = pl_conn_open_sel(cli, PL_CONN_READ, argc - optind,
                                  argv + optind, &q.sel, &rc)))
        goto done;
    rc = PL_EXIT_ERROR;
    if (read_all(conn, &q, &r, &err) < 0) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    if (cli->json) {
        json_t *s = pl_report_summary(&r);
        if (!s) {
            pl_cli_error("out of memory");
            goto done;
        }
        pl_out_json(s);
        json_decref(s);
        rc = PL_EXIT_OK;
        goto done;
    }
    if (!html) {
        snprintf(path, sizeof(path), "report-%s.html", conn->pilot.id);
        html = path;
    }
    if (write_page(&r, html, conn->pilot.id, detail_max, &err) < 0) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    if (strcmp(html, "-"))
        printf("%s\n", html);
    rc = PL_EXIT_OK;
done:
    pl_report_fini(&r);
    pl_conn_free(conn);
    pl_sel_req_clear(&q.sel);
    return rc;
}
