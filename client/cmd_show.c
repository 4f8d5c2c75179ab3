/* client/cmd_show.c - pilot show: one task, its spec, state and events */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "client/cli.h"
#include "client/conn.h"
#include "client/logsrc.h"
#include "client/output.h"
#include "proto/state.h"
#include "proto/strv.h"

static const char help[] =
    "usage: pilot show [--json] ID\n"
    "\n"
    "Show task ID: its spec, state (and why), node, cores and GPUs,\n"
    "attempts, exit code or signal, times, peak memory, CPU time and CPU\n"
    "efficiency ((user + system) / (ranks x cores per rank x wall), as\n"
    "Slurm's seff), GPU use on GPU nodes, the files that hold its output,\n"
    "where each rank runs (RANK NODE CORES GPUS STATE), and every state\n"
    "change it went through (times relative to its submission).  ID.N is\n"
    "element N of array ID.  On a pilot that is down, shows its last\n"
    "recorded state.\n"
    "\n"
    "options:\n"
    "  --pilot ID   the pilot to ask\n"
    "  --json       print the task object as JSON\n"
    "  -h, --help   this help\n"
    "\n"
    "example:\n"
    "  pilot show 12\n";

#define KEY "%-12s "

static void line(const char *key, const char *val)
{
    printf(KEY "%s\n", key, val && *val ? val : "-");
}

static void time_line(const char *key, double t, double since)
{
    char ts[48], d[32];

    if (isnan(t)) {
        line(key, NULL);
        return;
    }
    pl_out_time(t, true, ts, sizeof(ts));
    if (isnan(since))
        printf(KEY "%s\n", key, ts);
    else
        printf(KEY "%s (+%s)\n", key, ts, pl_out_duration(t - since, d,
                                                          sizeof(d)));
}

/* attempts: N, and how many of them were given back before they started
 * (an agent that held the task under --prefetch, pilot down, a drain):
 * attempts, not retries, which would read as runs otherwise */
static void print_attempts(const json_t *t)
{
    const json_t *e;
    size_t i, back = 0;
    static const char tail[] = PL_REASON_UNSTARTED;

    json_array_foreach(json_object_get(t, "events"), i, e) {
        const char *d = pl_out_jstr(e, "detail");
        const char *st = pl_out_jstr(e, "state");
        size_t n = d ? strlen(d) : 0;
        if (st && !strcmp(st, "queued") && n >= sizeof(tail) - 1
            && !strcmp(d + n - (sizeof(tail) - 1), tail))
            back++;
    }
    printf(KEY "%lld", "attempts:", pl_out_jint(t, "attempts", 0));
    if (back)
        printf(" (%zu given back " PL_REASON_UNSTARTED ", not retries)",
               back);
    putchar('\n');
}

static void print_events(const json_t *events, double submit)
{
    const json_t *e;
    size_t i;

    if (!json_is_array(events) || json_array_size(events) == 0)
        return;
    printf("events:\n");
    json_array_foreach(events, i, e) {
        char rel[32], cores[128], gpus[128];
        double t = pl_out_jreal(e, "time", NAN);
        const char *node = pl_out_jstr(e, "node");
        const char *detail = pl_out_jstr(e, "detail");
        long long attempt = pl_out_jint(e, "attempt", 0);

        if (isnan(submit) || isnan(t))
            snprintf(rel, sizeof(rel), "-");
        else
            snprintf(rel, sizeof(rel), "+%.3fs", t - submit);
        printf("  %-10s %s", rel, pl_out_jstr(e, "state")
                                      ? pl_out_jstr(e, "state") : "?");
        if (attempt > 0)
            printf(", attempt %lld", attempt);
        if (node)
            printf(", on %s", node);
        if (json_array_size(json_object_get(e, "cores")) > 0)
            printf(", cores %s", pl_out_intlist(json_object_get(e, "cores"),
                                                cores, sizeof(cores)));
        if (json_array_size(json_object_get(e, "gpus")) > 0)
            printf(", gpus %s", pl_out_intlist(json_object_get(e, "gpus"),
                                               gpus, sizeof(gpus)));
        if (detail && *detail)
            printf(": %s", detail);
        putchar('\n');
    }
}

/* The RANKS table: where each rank of the task runs (or ran). */
/* Where its output is: its files (one pair per rank for a task of
 * several ranks that are not one MPI job: pl_path_rank_log()), or the
 * nodes' journals (docs/output.md). */
static void print_outputs(const char *dir, const json_t *t,
                          unsigned long long id, unsigned att)
{
    char path[PL_PATH_MAX + 64], one[PL_PATH_MAX + 96];
    char text[3 * PL_PATH_MAX + 400];
    long long ranks = pl_out_jint(t, "ranks", 1);
    const char *comm = pl_out_jstr(t, "comm");
    bool per_rank = pl_output_per_rank(ranks > 0 ? (unsigned long long)ranks
                                                 : 1, comm,
                                       pl_out_jstr(t, "fn"),
                                       pl_out_jstr(t, "pool") != NULL);
    struct stat st;

    for (int e = 0; e < 2; e++) {
        if (pl_path_task_log(dir, id, att, e, false, path, sizeof(path)) < 0)
            continue;
        if (per_rank)
            pl_path_rank_log(path, 0, one, sizeof(one));
        else
            snprintf(one, sizeof(one), "%s", path);
        if (stat(one, &st) < 0 && pl_task_journaled(dir, t)) {
            /* its node's journal when it ran on one node */
            const char *node = pl_out_jstr(t, "node");
            if (!node || !*node || strpbrk(node, "[,/ ") || node[0] == '.')
                node = "NODE";
            snprintf(text, sizeof(text), "in the journals %s/journal/%s/"
                     " (pilot logs%s %llu)", dir, node, e ? " --stderr" : "",
                     id);
            line(e ? "stderr:" : "stdout:", text);
            continue;
        }
        if (per_rank) {
            char last[PL_PATH_MAX + 96];
            pl_path_rank_log(path, (unsigned long long)ranks - 1, last,
                             sizeof(last));
            const char *base = strrchr(last, '/');
            snprintf(text, sizeof(text), "%s .. %s (one per rank)", one,
                     base ? base + 1 : last);
            line(e ? "stderr:" : "stdout:", text);
        }
        else
            line(e ? "stderr:" : "stdout:", one);
    }
}

static void print_ranks(const json_t *ranks)
{
    static const char *headers[] = { "RANK", "NODE", "CORES", "GPUS",
                                     "STATE" };
    struct pl_out_table *tab;
    const json_t *r;
    size_t i;

    if (!json_is_array(ranks) || json_array_size(ranks) == 0)
        return;
    if (!(tab = pl_out_table_new(5, headers)))
        return;
    json_array_foreach(ranks, i, r) {
        char rank[24], cores[256], gpus[256];
        snprintf(rank, sizeof(rank), "%lld", pl_out_jint(r, "rank", -1));
        const char *cells[] = {
            rank,
            pl_out_jstr(r, "node"),
            pl_out_intlist(json_object_get(r, "cores"), cores, sizeof(cores)),
            pl_out_intlist(json_object_get(r, "gpus"), gpus, sizeof(gpus)),
            pl_out_jstr(r, "state"),
        };
        if (pl_out_table_add(tab, cells) < 0)
            break;
    }
    pl_out_table_print(tab, stdout, 0);
    pl_out_table_free(tab);
}

/* Its array, dependencies, priority and tags, those it has. */
static void print_queueing(const json_t *t)
{
    const json_t *after = json_object_get(t, "after");
    const json_t *tags = json_object_get(t, "tags"), *v;
    const char *key;
    size_t i;

    if (json_is_integer(json_object_get(t, "array_id")))
        printf(KEY "%lld, element %lld (%lld.%lld)\n", "array:",
               pl_out_jint(t, "array_id", 0), pl_out_jint(t, "array_index", 0),
               pl_out_jint(t, "array_id", 0), pl_out_jint(t, "array_index", 0));
    if (json_array_size(after) > 0) {
        printf(KEY, "after:");
        json_array_foreach(after, i, v) {
            printf("%s%lld%s", i ? ", " : "", pl_out_jint(v, "id", 0),
                   json_is_true(json_object_get(v, "any")) ? ":any" : "");
        }
        putchar('\n');
    }
    if (pl_out_jint(t, "priority", 0) != 0)
        printf(KEY "%lld\n", "priority:", pl_out_jint(t, "priority", 0));
    if (json_object_size(tags) > 0) {
        bool first = true;
        printf(KEY, "tags:");
        json_object_foreach((json_t *)tags, key, v) {
            printf("%s%s=%s", first ? "" : " ", key, json_string_value(v));
            first = false;
        }
        putchar('\n');
    }
}

/* The placement options the task was submitted with, those given. */
static void print_placement(const json_t *t)
{
    const char *comm = pl_out_jstr(t, "comm");

    if (json_is_integer(json_object_get(t, "nodes")))
        printf(KEY "%lld\n", "nodes:", pl_out_jint(t, "nodes", 0));
    if (json_is_integer(json_object_get(t, "ranks_per_node")))
        printf(KEY "%lld\n", "ranks/node:", pl_out_jint(t, "ranks_per_node",
                                                       0));
    /* a bool, or 0/1 as SQLite keeps it */
    if (json_is_true(json_object_get(t, "exclusive"))
        || pl_out_jint(t, "exclusive", 0) != 0)
        line("exclusive:", "yes");
    const char *pool = pl_out_jstr(t, "pool"), *fn = pl_out_jstr(t, "fn");
    if (pool && fn && !strcmp(fn, "pool")) {
        char buf[128];
        snprintf(buf, sizeof(buf), "%s: this task is its MPI job of "
                 "workers", pool);
        line("pool:", buf);
    }
    else if (pool) {
        char buf[128];
        snprintf(buf, sizeof(buf), "%s (a %s function)", pool,
                 fn && !strcmp(fn, "py") ? "Python" : "C");
        line("pool:", buf);
    }
    else if (fn && !strcmp(fn, "pycall"))
        line("python:", "a call in a warm Python worker");
    else if (comm)
        line("comm:", comm);
}

/* A Python call's result: its repr (a value) or the exception's line
 * (the reason), its size and where the pickle is. */
static void print_result(const json_t *t)
{
    const char *st = pl_out_jstr(t, "result_status");
    const char *repr = pl_out_jstr(t, "result_repr");
    const char *file = pl_out_jstr(t, "result_file");
    char buf[PL_PATH_MAX + 96];

    if (!st)
        return;
    if (!strcmp(st, "ok"))
        line("result:", repr ? repr : "(no repr)");
    else
        line("raised:", pl_out_jstr(t, "reason"));
    snprintf(buf, sizeof(buf), "%lld bytes pickled, %s%s (pilot result ID)",
             pl_out_jint(t, "result_size", 0), file ? "in " : "inline",
             file ? file : "");
    line("", buf);
}

/* Its CPU time, CPU efficiency (as seff: CPU over cores x wall) and GPU
 * figures, where measured. */
static void print_usage(const json_t *t)
{
    double user = pl_out_jreal(t, "cpu_user", NAN);
    double sys = pl_out_jreal(t, "cpu_sys", NAN);
    double eff = pl_out_jreal(t, "cpu_eff", NAN);
    double util = pl_out_jreal(t, "gpu_util", NAN);
    double mem = pl_out_jreal(t, "gpu_mem_mb", NAN);
    double power = pl_out_jreal(t, "gpu_power_w", NAN);
    const char *comm = pl_out_jstr(t, "comm");
    long long cores = pl_out_jint(t, "ranks", 1)
                      * pl_out_jint(t, "cores_per_rank", 1);
    char buf[160], d[32];
    int n = 0;

    if (isnan(user) || isnan(sys))
        /* an MPI task's ranks are its launcher's children (srun's
         * slurmstepd, mpirun's orted): pilotd keeps no figure for it */
        line("cpu:", comm && !strcmp(comm, "mpi")
                         ? "- (not measured for an MPI task: its ranks "
                           "are its launcher's children)"
                         : NULL);
    else {
        snprintf(buf, sizeof(buf), "%.2f s user, %.2f s system", user,
                 sys);
        line("cpu:", buf);
    }
    if (!isnan(eff)) {
        snprintf(buf, sizeof(buf), "%.1f%% of %lld core%s x %s", eff * 100,
                 cores, cores == 1 ? "" : "s",
                 pl_out_duration(pl_out_jreal(t, "wall", 0), d, sizeof(d)));
        line("cpu eff:", buf);
    }
    if (isnan(util) && isnan(mem) && isnan(power))
        return;
    buf[0] = '\0';
    if (!isnan(util))
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, "%.1f%% busy", util);
    if (!isnan(mem))
        n += snprintf(buf + n, sizeof(buf) - (size_t)n, "%s%.0f MB max",
                      n ? ", " : "", mem);
    if (!isnan(power))
        snprintf(buf + n, sizeof(buf) - (size_t)n, "%s%.1f W mean",
                 n ? ", " : "", power);
    line("gpu use:", buf);
}

static void print_task(const struct pl_conn *conn, const json_t *t)
{
    char buf[PL_PATH_MAX + 64], d[32];
    const char *state = pl_out_jstr(t, "state");
    const char *reason = pl_out_jstr(t, "reason");
    double submit = pl_out_jreal(t, "submit_time", NAN);
    double start = pl_out_jreal(t, "start_time", NAN);
    double end = pl_out_jreal(t, "end_time", NAN);
    double timeout = pl_out_jreal(t, "timeout", 0);
    long long id = pl_out_jint(t, "id", 0);
    long long sig = pl_out_jint(t, "signal", 0);
    const json_t *env = json_object_get(t, "env");
    char *cmd;

    printf(KEY "%lld\n", "id:", id);
    line("name:", pl_out_jstr(t, "name"));
    if (reason && *reason && (!state || strcmp(reason, state)))
        printf(KEY "%s (%s)\n", "state:", state ? state : "?", reason);
    else
        line("state:", state);
    cmd = pl_out_argv(json_object_get(t, "argv"));
    line("command:", cmd);
    free(cmd);
    line("cwd:", pl_out_jstr(t, "cwd"));
    print_queueing(t);
    /* N.B. the list of ranks comes as 'placement' (or as 'ranks', which
     * list's task objects keep for the count) */
    const json_t *ranks = json_object_get(t, "placement");
    if (!json_is_array(ranks))
        ranks = json_object_get(t, "ranks");
    printf(KEY "%lld x %lld cores, %lld gpus\n", "ranks:",
           json_is_array(ranks) ? (long long)json_array_size(ranks)
                                : pl_out_jint(t, "ranks", 1),
           pl_out_jint(t, "cores_per_rank", 1),
           pl_out_jint(t, "gpus_per_rank", 0));
    print_placement(t);
    line("timeout:", timeout > 0 ? pl_out_duration(timeout, d, sizeof(d))
                                 : "none");
    printf(KEY "%lld\n", "retries:", pl_out_jint(t, "retries", 0));
    line("node:", pl_out_jstr(t, "node"));
    line("cores:", pl_out_intlist(json_object_get(t, "cores"), buf,
                                  sizeof(buf)));
    line("gpus:", pl_out_intlist(json_object_get(t, "gpus"), buf,
                                 sizeof(buf)));
    print_attempts(t);
    if (sig > 0) {
        const char *name = sigabbrev_np((int)sig);
        printf(KEY "%lld (SIG%s)\n", "signal:", sig, name ? name : "?");
    }
    else if (json_is_integer(json_object_get(t, "exit_code")))
        printf(KEY "%lld\n", "exit code:", pl_out_jint(t, "exit_code", 0));
    else
        line("exit code:", NULL);
    time_line("submitted:", submit, NAN);
    line("by key:", pl_out_jstr(t, "submitted_by"));
    time_line("started:", start, submit);
    time_line("ended:", end, isnan(start) ? submit : start);
    if (!isnan(start)) {
        double w = pl_out_jreal(t, "wall", NAN);
        bool so_far = isnan(w) && isnan(end);
        if (so_far)
            w = pl_now() - start;
        printf(KEY "%s%s\n", "wall:", pl_out_duration(w, d, sizeof(d)),
               so_far ? " so far" : "");
    }
    long long rss = pl_out_jint(t, "maxrss_kb", -1);
    line("max rss:", rss >= 0 ? pl_out_kib(rss, buf, sizeof(buf)) : NULL);
    print_usage(t);
    /* the last attempt's (pilot logs --attempt N: an earlier one's) */
    unsigned att = (unsigned)pl_out_jint(t, "attempts", 1);
    print_outputs(conn->pilot.dir, t, (unsigned long long)id, att);
    if (json_array_size(env) > 0) {
        const json_t *v;
        size_t i;
        json_array_foreach(env, i, v)
            line(i == 0 ? "env:" : "", json_string_value(v));
    }
    print_result(t);
    print_ranks(ranks);
    print_events(json_object_get(t, "events"), submit);
}

int pl_cmd_show(struct pl_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = { PL_CLI_COMMON_OPTS, { 0 } };
    struct pl_error err;
    struct pl_conn *conn = NULL;
    json_t *task = NULL;
    struct pl_sel_req sel = { 0 };
    int c, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1)
        if (pl_cli_opt(cli, c, argv, help, &rc) < 0)
            return rc;
    if (optind >= argc)
        return pl_cli_usage(cli, "no task id given");
    if (optind + 1 < argc)
        return pl_cli_usage(cli, "one task id at a time ('pilot ls ID...' "
                            "lists several)");
    if (!(conn = pl_conn_open_sel(cli, PL_CONN_READ, 1, argv + optind, &sel,
                                  &rc)))
        goto done;
    rc = PL_EXIT_ERROR;
    if (!(task = pl_conn_show(conn, &sel, &err))) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    if (cli->json)
        pl_out_json(task);
    else
        print_task(conn, task);
    rc = PL_EXIT_OK;
done:
    json_decref(task);
    pl_conn_free(conn);
    pl_sel_req_clear(&sel);
    return rc;
}
