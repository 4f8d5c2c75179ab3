/* client/cmd_ls.c - pilot ls: the tasks, as a table or JSON */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/cli.h"
#include "client/conn.h"
#include "client/output.h"
#include "proto/query.h"
#include "proto/spec.h"
#include "proto/state.h"
#include "proto/strv.h"

static const char help[] =
    "usage: pilot ls [--state STATE] [--tag K=V] [--limit N] [--long] "
    "[--json] [ID...]\n"
    "\n"
    "List the pilot's tasks, oldest first: ID NAME STATE NODE EXIT WALL\n"
    "COMMAND.  WALL is the last attempt's run time (so far, if it runs).\n"
    "EXIT is the exit code, or the signal that ended the task (sig9).\n"
    "An array's id lists all its tasks, ID.N its element N.  On a pilot\n"
    "that is down, lists its last recorded state.  --long adds CPU (user +\n"
    "system seconds, the ranks summed), EFF (CPU efficiency: CPU over\n"
    "ranks x cores per rank x wall, as Slurm's seff) and MAXRSS (the\n"
    "largest peak RSS of a rank), '-' where not measured.\n"
    "\n"
    "options:\n"
    "  --state STATE   only tasks in STATE: waiting, queued, assigned,\n"
    "                  running, done, failed, canceled, timeout\n"
    "  --tag K=V       only tasks with tag K set to V (K alone: any value);\n"
    "                  repeatable, all must match\n"
    "  --limit N       at most N tasks\n"
    "  --long          add the columns CPU, EFF and MAXRSS\n"
    "  --pilot ID      the pilot to ask\n"
    "  --json          print the task objects as a JSON array\n"
    "  -h, --help      this help\n"
    "\n"
    "examples:\n"
    "  pilot ls --state failed\n"
    "  pilot ls --tag model=lstm --json\n"
    "  pilot ls 40          # every element of array 40\n";

enum {
    OPT_STATE = PL_OPT_CMD,
    OPT_LIMIT,
    OPT_TAG,
    OPT_LONG,
};

static void states_list(char *buf, size_t len)
{
    size_t off = 0;

    buf[0] = '\0';
    for (int s = 1; s < PL_ST_COUNT && off < len; s++) {
        int n = snprintf(buf + off, len - off, "%s%s", s > 1 ? ", " : "",
                         pl_state_name(s));
        if (n < 0)
            break;
        off += (size_t)n;
    }
}

/* Widest NODE cell: a multi-node task's "n1,n2,..." is cut to this
 * ("n1,n2+6"), so that COMMAND keeps its room. */
#define NODE_WIDTH 24

/* --long's cells of task 't': CPU seconds, efficiency, peak RSS. */
static void usage_cells(const json_t *t, char *cpu, char *eff, char *rss,
                        size_t len)
{
    double u = pl_out_jreal(t, "cpu_user", NAN);
    double s = pl_out_jreal(t, "cpu_sys", NAN);
    double e = pl_out_jreal(t, "cpu_eff", NAN);
    long long kb = pl_out_jint(t, "maxrss_kb", -1);

    if (isnan(u) || isnan(s))
        snprintf(cpu, len, "-");
    else
        snprintf(cpu, len, "%.2f", u + s);
    if (isnan(e))
        snprintf(eff, len, "-");
    else
        snprintf(eff, len, "%.0f%%", e * 100);
    if (kb >= 0)
        pl_out_kib(kb, rss, len);
    else
        snprintf(rss, len, "-");
}

/* One table row for task 't'; 'wide': --long's columns too. */
static int add_row(struct pl_out_table *tab, const json_t *t, double now,
                   bool wide)
{
    char id[24], exitc[24], wall[32], node[NODE_WIDTH + 1];
    char cpu[32], eff[32], rss[32];
    char *cmd;
    double start = pl_out_jreal(t, "start_time", NAN);
    double w = pl_out_jreal(t, "wall", NAN);
    const char *state = pl_out_jstr(t, "state");
    long long sig = pl_out_jint(t, "signal", 0);
    long long code = pl_out_jint(t, "exit_code", -1);
    int rc;

    snprintf(id, sizeof(id), "%lld", pl_out_jint(t, "id", 0));
    if (sig > 0)
        snprintf(exitc, sizeof(exitc), "sig%lld", sig);
    else if (json_is_integer(json_object_get(t, "exit_code")))
        snprintf(exitc, sizeof(exitc), "%lld", code);
    else
        snprintf(exitc, sizeof(exitc), "-");
    if (isnan(w) && state && !strcmp(state, "running") && !isnan(start))
        w = now - start;
    pl_out_duration(w, wall, sizeof(wall));
    if (!(cmd = pl_out_argv(json_object_get(t, "argv"))))
        return -1;
    usage_cells(t, cpu, eff, rss, sizeof(cpu));
    const char *cells[] = {
        id, pl_out_jstr(t, "name"), state,
        pl_out_nodelist(pl_out_jstr(t, "node"), NODE_WIDTH, node,
                        sizeof(node)),
        exitc, wall, cmd, NULL, NULL, NULL,
    };
    if (wide) {
        /* before COMMAND, the column that takes what is left */
        const char *c = cells[6];
        cells[6] = cpu;
        cells[7] = eff;
        cells[8] = rss;
        cells[9] = c;
    }
    rc = pl_out_table_add(tab, cells);
    free(cmd);
    return rc;
}

static int print_table(const json_t *tasks, bool wide)
{
    static const char *headers[] = { "ID", "NAME", "STATE", "NODE",
                                     "EXIT", "WALL", "COMMAND" };
    static const char *wide_headers[] = { "ID", "NAME", "STATE", "NODE",
                                          "EXIT", "WALL", "CPU", "EFF",
                                          "MAXRSS", "COMMAND" };
    struct pl_out_table *tab;
    const json_t *t;
    double now = pl_now();
    int width = pl_out_term_width(STDOUT_FILENO);
    size_t i;

    if (!(tab = wide ? pl_out_table_new(10, wide_headers)
                     : pl_out_table_new(7, headers)))
        return -1;
    json_array_foreach(tasks, i, t) {
        if (add_row(tab, t, now, wide) < 0) {
            pl_out_table_free(tab);
            return -1;
        }
    }
    pl_out_table_print(tab, stdout, width > PL_OUT_WIDTH ? width
                                                         : PL_OUT_WIDTH);
    pl_out_table_free(tab);
    return 0;
}

#define LS_MAX 100000 /* tasks listed without --limit, at most */
#define TOO_MANY "more than 100000 tasks match: narrow the listing with " \
                 "--state, --tag or --limit"

/* Whether more than LS_MAX tasks of 'sel' are in 'state' (NULL: any),
 * from pilotd's counts: 1 (errp says so), 0, or -1 with errp. */
static int over_max(struct pl_conn *conn, const char *state,
                    const struct pl_sel_req *sel, struct pl_error *errp)
{
    json_t *c = pl_conn_counts(conn, pl_sel_req_given(sel) ? sel : NULL,
                               errp);
    json_t *n;
    int over;

    if (!c)
        return -1;
    n = json_object_get(c, state ? state : "total");
    over = json_is_integer(n) && json_integer_value(n) > LS_MAX;
    json_decref(c);
    if (over)
        pl_errprintf(errp, "%s", TOO_MANY);
    return over;
}

int pl_cmd_ls(struct pl_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        { "state", required_argument, NULL, OPT_STATE },
        { "limit", required_argument, NULL, OPT_LIMIT },
        { "tag", required_argument, NULL, OPT_TAG },
        { "long", no_argument, NULL, OPT_LONG },
        PL_CLI_COMMON_OPTS,
        { 0 },
    };
    struct pl_error err;
    struct pl_conn *conn = NULL;
    const char *state = NULL;
    uint64_t limit = 0;
    bool wide = false;
    const char *tags[PL_QUERY_MAX_TAGS + 1] = { NULL };
    size_t ntags = 0;
    struct pl_sel_req sel = { 0 };
    json_t *tasks = NULL;
    char names[160];
    int c, r, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if ((r = pl_cli_opt(cli, c, argv, help, &rc)) < 0)
            return rc;
        if (r > 0)
            continue;
        switch (c) {
        case OPT_STATE:
            if (pl_state_parse(optarg) < 0) {
                states_list(names, sizeof(names));
                return pl_cli_usage(cli, "--state: '%s' is not a task state "
                                    "(%s)", optarg, names);
            }
            state = optarg;
            break;
        case OPT_TAG:
            if (!pl_spec_tag_key(optarg)) /* "K=V" or "K" */
                return pl_cli_usage(cli, "--tag: '%s' is not KEY=VALUE or "
                                    "KEY (KEY: letters, digits, '_', '.', "
                                    "'-')", optarg);
            if (ntags == PL_QUERY_MAX_TAGS)
                return pl_cli_usage(cli, "--tag: more than %d",
                                    PL_QUERY_MAX_TAGS);
            tags[ntags++] = optarg;
            break;
        case OPT_LONG:
            wide = true;
            break;
        case OPT_LIMIT:
            if (pl_parse_uint("--limit", optarg, 1, UINT32_MAX, &limit,
                              &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            break;
        }
    }
    if (!(conn = pl_conn_open_sel(cli, PL_CONN_READ, argc - optind,
                                  argv + optind, &sel, &rc)))
        goto done;
    rc = PL_EXIT_ERROR;
    /* past LS_MAX the user narrows the listing: a count says so first
     * when it can (no tag to match), else the pages read say it */
    if (!limit && !ntags && over_max(conn, state, &sel, &err) != 0) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    if (!(tasks = pl_conn_list(conn, state, tags, &sel,
                               limit ? limit : LS_MAX + 1, &err))) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    if (!limit && json_array_size(tasks) > LS_MAX) {
        pl_cli_error("%s", TOO_MANY);
        goto done;
    }
    if (cli->json)
        pl_out_json(tasks);
    else if (print_table(tasks, wide) < 0) {
        pl_cli_error("out of memory");
        goto done;
    }
    rc = PL_EXIT_OK;
done:
    json_decref(tasks);
    pl_conn_free(conn);
    pl_sel_req_clear(&sel);
    return rc;
}
