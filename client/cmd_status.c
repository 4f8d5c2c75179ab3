/* client/cmd_status.c - pilot status: nodes, slots, tasks, walltime */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/cli.h"
#include "client/conn.h"
#include "client/output.h"

static const char help[] =
    "usage: pilot status [--json]\n"
    "\n"
    "Show the pilot: its id, Slurm job and host, whether it runs, the\n"
    "walltime left, its nodes and agents (up or lost), cores and GPUs\n"
    "busy, and its tasks by state, and where its metrics are (pilot up\n"
    "--metrics-port, --metrics-file).  When pilotd cannot write its state\n"
    "directory (full, read-only), a 'store:' line says so.  On a pilot\n"
    "that is down, shows what it last recorded.\n"
    "\n"
    "options:\n"
    "  --pilot ID   the pilot to show\n"
    "  --json       print the status object as JSON\n"
    "  -h, --help   this help\n"
    "\n"
    "example:\n"
    "  pilot status\n";

/* "pilot p3 (slurm job 42 on n1) running, walltime left 27m12s" */
static void print_head(const struct pl_conn *conn, const json_t *s)
{
    const char *mode = pl_out_jstr(s, "mode");
    const char *host = pl_out_jstr(s, "host");
    const char *state = pl_out_jstr(s, "state");
    const char *id = pl_out_jstr(s, "pilot");
    long long job = pl_out_jint(s, "job", 0);
    double left = pl_out_jreal(s, "walltime_left", NAN);
    char d[32];

    if (!mode)
        mode = conn->pilot.info.mode;
    printf("pilot %s (", id ? id : conn->pilot.id);
    if (job > 0)
        printf("%s job %lld", mode, job);
    else
        printf("%s", mode);
    if (host)
        printf(" on %s", host);
    if (!state)
        state = "running";
    printf(") %s", state);
    if (!isnan(left) && !strcmp(state, "running"))
        printf(", walltime left %s", pl_out_duration(left, d, sizeof(d)));
    putchar('\n');
}

/* "store: full for 12s, 7 changes wait: the state directory ... is full
 * (ENOSPC): ...; submit and cancel are refused": nothing when "ok" (or
 * from a pilotd that does not say) */
static void print_store(const json_t *s)
{
    const char *st = pl_out_jstr(s, "state_store");
    const char *why = pl_out_jstr(s, "state_store_error");
    double since = pl_out_jreal(s, "state_store_since", NAN);
    char d[32];

    if (!st || !strcmp(st, "ok"))
        return;
    printf("store: %s", st);
    if (!isnan(since))
        printf(" for %s", pl_out_duration(fmax(0, time(NULL) - since), d,
                                          sizeof(d)));
    printf(", %lld changes wait: %s; submit and cancel are refused\n",
           pl_out_jcount(s, "unstored"), why ? why : "");
}

/* A node's vetting in a few words: "ok", "running", "failed: disk 12
 * MiB < 1024", "-" (none). */
static void vet_cell(const json_t *v, char *buf, size_t len)
{
    const char *st = json_string_value(json_object_get(v, "state"));
    const char *check = json_string_value(json_object_get(v, "check"));
    const char *unit = json_string_value(json_object_get(v, "unit"));
    const json_t *fig = json_object_get(v, "figure");
    const json_t *lim = json_object_get(v, "limit");

    if (!st || !strcmp(st, "none"))
        snprintf(buf, len, "-");
    else if (strcmp(st, "failed") || !check)
        snprintf(buf, len, "%s", st);
    else if (json_is_number(fig) && json_is_number(lim))
        snprintf(buf, len, "failed: %s %g%s%s < %g", check,
                 json_number_value(fig), unit ? " " : "", unit ? unit : "",
                 json_number_value(lim));
    else if (json_is_number(fig))
        snprintf(buf, len, "failed: %s %g%s%s", check, json_number_value(fig),
                 unit ? " " : "", unit ? unit : "");
    else
        snprintf(buf, len, "failed: %s", check);
}

static void print_nodes(const json_t *nodes)
{
    static const char *headers[] = { "NODE", "STATE", "CORES", "GPUS",
                                     "RUNNING", "VET", "POOL" };
    struct pl_out_table *tab;
    const json_t *n;
    size_t i;
    bool pools = false;

    if (json_array_size(nodes) == 0)
        return;
    json_array_foreach(nodes, i, n)
        pools |= pl_out_jcount(n, "pool_workers") > 0;
    if (!(tab = pl_out_table_new(pools ? 7 : 6, headers)))
        return;
    json_array_foreach(nodes, i, n) {
        char cores[48], gpus[48], running[24], pool[48];
        /* the pool's workers hold their cores: shown apart */
        if (pl_out_jcount(n, "pool_workers"))
            snprintf(pool, sizeof(pool), "%lld/%lld busy (%lld cores)",
                     pl_out_jcount(n, "pool_busy"),
                     pl_out_jcount(n, "pool_workers"),
                     pl_out_jcount(n, "pool_cores"));
        else
            snprintf(pool, sizeof(pool), "-");
        snprintf(cores, sizeof(cores), "%lld/%lld",
                 pl_out_jcount(n, "cores_busy"), pl_out_jcount(n, "cores"));
        snprintf(gpus, sizeof(gpus), "%lld/%lld",
                 pl_out_jcount(n, "gpus_busy"), pl_out_jcount(n, "gpus"));
        snprintf(running, sizeof(running), "%lld",
                 pl_out_jcount(n, "running"));
        char vet[96];
        vet_cell(json_object_get(n, "vet"), vet, sizeof(vet));
        const char *cells[] = { pl_out_jstr(n, "name"), pl_out_jstr(n, "state"),
                                cores, gpus, running, vet, pool };
        if (pl_out_table_add(tab, cells) < 0)
            break;
    }
    pl_out_table_print(tab, stdout, PL_OUT_WIDTH);
    pl_out_table_free(tab);
    /* why a node takes nothing new (daemon/vet.c) */
    json_array_foreach(nodes, i, n) {
        const json_t *v = json_object_get(n, "vet");
        const char *why = json_string_value(json_object_get(v, "cordon"));
        if (why)
            printf("%s cordoned: %s\n", pl_out_jstr(n, "name"), why);
    }
    /* checks that passed without looking (no NVML for the GPUs) */
    json_array_foreach(nodes, i, n) {
        const json_t *note;
        size_t k;
        json_array_foreach(json_object_get(json_object_get(n, "vet"),
                                           "notes"), k, note)
            printf("%s note: %s %s\n", pl_out_jstr(n, "name"),
                   pl_out_jstr(note, "check"), pl_out_jstr(note, "detail"));
    }
}

/* "1h 02m", "3m 05s", "42s" */
static void left_text(double s, char *buf, size_t len)
{
    long t = (long)s;

    if (t >= 3600)
        snprintf(buf, len, "%ldh %02ldm", t / 3600, t % 3600 / 60);
    else if (t >= 60)
        snprintf(buf, len, "%ldm %02lds", t / 60, t % 60);
    else
        snprintf(buf, len, "%lds", t);
}

void pl_allocs_print(const json_t *allocs)
{
    static const char *headers[] = { "ALLOC", "JOB", "STATE", "NODES",
                                     "LEFT", "IDLE", "WHY" };
    struct pl_out_table *tab;
    const json_t *a, *v;
    size_t i, k;

    if (json_array_size(allocs) == 0
        || !(tab = pl_out_table_new(7, headers)))
        return;
    json_array_foreach(allocs, i, a) {
        char id[32], job[32], nodes[256] = "", left[32] = "-", idle[32] = "-";
        snprintf(id, sizeof(id), "%lld%s", pl_out_jint(a, "id", 0),
                 json_is_true(json_object_get(a, "auto")) ? " (auto)" : "");
        snprintf(job, sizeof(job), "%lld", pl_out_jint(a, "job", 0));
        json_array_foreach(json_object_get(a, "names"), k, v)
            snprintf(nodes + strlen(nodes), sizeof(nodes) - strlen(nodes),
                     "%s%s", k ? "," : "", json_string_value(v));
        if (!nodes[0])
            snprintf(nodes, sizeof(nodes), "(%lld asked)",
                     pl_out_jint(a, "nodes", 0));
        if (json_is_number(json_object_get(a, "time_left")))
            left_text(json_number_value(json_object_get(a, "time_left")),
                      left, sizeof(left));
        if (json_is_number(json_object_get(a, "idle")))
            left_text(json_number_value(json_object_get(a, "idle")), idle,
                      sizeof(idle));
        const char *why = pl_out_jstr(a, "why");
        const char *cells[] = { id, job, pl_out_jstr(a, "state"), nodes,
                                left, idle, why && *why ? why : "-" };
        if (pl_out_table_add(tab, cells) < 0)
            break;
    }
    pl_out_table_print(tab, stdout, PL_OUT_WIDTH);
    pl_out_table_free(tab);
}

/* "metrics: http://10.0.0.1:9464/metrics, file /var/lib/.../p3.prom" */
static void print_metrics(const json_t *s)
{
    const char *url = pl_out_jstr(s, "metrics");
    const char *file = pl_out_jstr(s, "metrics_file");

    if (url || file)
        printf("metrics: %s%s%s\n", url ? url : "", url && file ? ", " : "",
               file ? file : "");
}

static void print_status(const struct pl_conn *conn, const json_t *s)
{
    static const char *extra[] = { "waiting", "assigned", "timeout" };
    const json_t *nodes = json_object_get(s, "nodes");
    const json_t *tasks = json_object_get(s, "tasks");
    const json_t *cores = json_object_get(s, "cores");
    const json_t *gpus = json_object_get(s, "gpus");
    long long up = 0, lost = 0, expected = pl_out_jint(s, "agents_expected",
                                                       0);
    const json_t *n;
    char buf[64];
    size_t i;

    print_head(conn, s);
    print_store(s);
    print_metrics(s);
    json_array_foreach(nodes, i, n) {
        const char *st = pl_out_jstr(n, "state");
        if (st && !strcmp(st, "up"))
            up++;
        else if (st && !strcmp(st, "lost"))
            lost++;
    }
    snprintf(buf, sizeof(buf), "nodes: %lld up, %lld lost", up, lost);
    if (expected > up + lost)
        snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf),
                 " (of %lld)", expected);
    int pad = 26 - (int)strlen(buf);
    printf("%s%*s cores: %lld/%lld busy   gpus: %lld/%lld busy\n", buf,
           pad > 1 ? pad : 1, "",
           pl_out_jint(cores, "busy", 0), pl_out_jint(cores, "total", 0),
           pl_out_jint(gpus, "busy", 0), pl_out_jint(gpus, "total", 0));
    printf("tasks: %lld queued, %lld running, %lld done, %lld failed, "
           "%lld canceled", pl_out_jint(tasks, "queued", 0),
           pl_out_jint(tasks, "running", 0), pl_out_jint(tasks, "done", 0),
           pl_out_jint(tasks, "failed", 0), pl_out_jint(tasks, "canceled", 0));
    for (i = 0; i < sizeof(extra) / sizeof(extra[0]); i++) {
        long long k = pl_out_jint(tasks, extra[i], 0);
        if (k)
            printf(", %lld %s", k, extra[i]);
    }
    putchar('\n');
    const json_t *pools = json_object_get(s, "pools"), *p;
    json_array_foreach(pools, i, p)
        printf("pool %s: %s, %lld workers (%lld busy), %lld tasks queued\n",
               pl_out_jstr(p, "name"), pl_out_jstr(p, "state"),
               pl_out_jcount(p, "workers"), pl_out_jcount(p, "busy"),
               pl_out_jcount(p, "queued"));
    print_nodes(nodes);
    /* allocations that joined (pilot grow): their nodes are above */
    pl_allocs_print(json_object_get(s, "allocs"));
}

int pl_cmd_status(struct pl_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = { PL_CLI_COMMON_OPTS, { 0 } };
    struct pl_error err;
    struct pl_conn *conn = NULL;
    json_t *status = NULL;
    int c, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1)
        if (pl_cli_opt(cli, c, argv, help, &rc) < 0)
            return rc;
    if (optind < argc)
        return pl_cli_usage(cli, "unexpected argument '%s'", argv[optind]);
    rc = PL_EXIT_ERROR;
    if (!(conn = pl_conn_open(&cli->find, PL_CONN_READ, &err))
        || !(status = pl_conn_status(conn, &err))) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    if (cli->json)
        pl_out_json(status);
    else
        print_status(conn, status);
    rc = PL_EXIT_OK;
done:
    json_decref(status);
    pl_conn_free(conn);
    return rc;
}
