/* client/vetnet.c - pilot vet --net / --nccl: pilot-vetcheck net or nccl
 * run as an ordinary task of the pilot (comm mpi, one rank a node or a
 * GPU), its report read, the nodes it names cordoned
 *
 * A task, not something of pilotd's own: it is placed like any other
 * (cordoned nodes are not used), shows in `pilot ls` and the report, its
 * output stays in the pilot directory.  The thresholds are the pilot's
 * vet.yaml's (net:, nccl:).  The cordons go through CORDON (118) with a
 * reason that names the check and its figure: `pilot uncordon` takes
 * them off.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/cli.h"
#include "client/conn.h"
#include "client/output.h"
#include "client/vetnet.h"
#include "proto/agentmsg.h"
#include "proto/clientmsg.h"
#include "proto/pilotdir.h"
#include "proto/spec.h"
#include "proto/state.h"
#include "proto/strv.h"
#include "proto/vetconf.h"

#define REPORT_MAX (4 * 1024 * 1024) /* bytes of the task's stdout */

/* The pilot's vet.yaml (the built-in default without one). */
static int load_conf(const struct pl_conn *conn, const char *file,
                     struct pl_vetconf *c, struct pl_error *errp)
{
    char path[PL_PATH_MAX + 16];

    if (file)
        return pl_vetconf_load(file, c, errp);
    snprintf(path, sizeof(path), "%s/%s", conn->pilot.dir, PL_VETCONF_FILE);
    if (access(path, F_OK) < 0)
        return pl_vetconf_default(c) < 0
                   ? pl_errprintf(errp, "out of memory") : 0;
    return pl_vetconf_load(path, c, errp);
}

/* The nodes a task may use now: up and not cordoned; the fewest and
 * most GPUs and the fewest cores one of them has. */
static int usable_nodes(struct pl_conn *conn, uint64_t *nodes,
                        uint64_t *gpus_min, uint64_t *gpus_max,
                        uint64_t *cores_min, struct pl_error *errp)
{
    json_t *s = pl_conn_status(conn, errp), *n;
    size_t i;

    if (!s)
        return -1;
    *nodes = 0;
    *gpus_min = *cores_min = UINT64_MAX;
    *gpus_max = 0;
    json_array_foreach(json_object_get(s, "nodes"), i, n) {
        const json_t *v = json_object_get(n, "vet");
        if (strcmp(pl_out_jstr(n, "state"), "up")
            || json_is_string(json_object_get(v, "cordon")))
            continue;
        (*nodes)++;
        long long g = pl_out_jcount(n, "gpus");
        if ((uint64_t)(g > 0 ? g : 0) < *gpus_min)
            *gpus_min = (uint64_t)(g > 0 ? g : 0);
        if (g > 0 && (uint64_t)g > *gpus_max)
            *gpus_max = (uint64_t)g;
        long long k = pl_out_jcount(n, "cores");
        if ((uint64_t)(k > 0 ? k : 0) < *cores_min)
            *cores_min = (uint64_t)(k > 0 ? k : 0);
    }
    json_decref(s);
    if (!*nodes)
        *gpus_min = *cores_min = 0;
    return 0;
}

/* Where pilot-vetcheck is: beside this program, as the agent finds it. */
static int find_prog(char *path, size_t len)
{
    char exe[PL_PATH_MAX];
    ssize_t n;
    const char *env = getenv("PILOT_VETCHECK");

    if (env && *env) {
        snprintf(path, len, "%s", env);
        return access(path, X_OK);
    }
    if ((n = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) <= 0)
        return -1;
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0';
    snprintf(path, len, "%s/pilot-vetcheck", exe);
    return access(path, X_OK);
}

/* Submit the check task; its id, or 0 with errp. */
static uint64_t submit(struct pl_conn *conn, const struct pl_vetconf *c,
                       bool nccl, uint64_t nodes, uint64_t gpus,
                       const char *prog, struct pl_error *errp)
{
    struct pl_spec s;
    char a[4][32];
    const char *argv[12];
    int k = 0;
    json_t *r;
    uint64_t id = 0;

    argv[k++] = prog;
    argv[k++] = nccl ? "nccl" : "net";
    snprintf(a[0], sizeof(a[0]), "%llu", (unsigned long long)
             (nccl ? c->nccl_size : c->net_size));
    snprintf(a[1], sizeof(a[1]), "%llu", (unsigned long long)
             (nccl ? c->nccl_iters : c->net_iters));
    argv[k++] = "--size";
    argv[k++] = a[0];
    argv[k++] = "--iters";
    argv[k++] = a[1];
    if (nccl && c->nccl_min_busbw > 0) {
        snprintf(a[2], sizeof(a[2]), "%g", c->nccl_min_busbw);
        argv[k++] = "--min-busbw-gbs";
        argv[k++] = a[2];
    }
    if (!nccl && c->net_max_latency > 0) {
        snprintf(a[2], sizeof(a[2]), "%g", c->net_max_latency);
        argv[k++] = "--max-latency-us";
        argv[k++] = a[2];
    }
    if (!nccl && c->net_min_bw > 0) {
        snprintf(a[3], sizeof(a[3]), "%g", c->net_min_bw);
        argv[k++] = "--min-bandwidth-mbs";
        argv[k++] = a[3];
    }
    argv[k] = NULL;
    pl_spec_init(&s);
    s.comm = PL_COMM_MPI;
    s.nodes = nodes;
    s.rpn = nccl ? gpus : 1;
    s.gpr = nccl ? 1 : 0;
    s.timeout = c->net_timeout;
    s.has_retries = true;
    s.retries = 0;
    if (!(s.argv = pl_strv_dup((char *const *)argv))
        || !(s.name = strdup(nccl ? "vet-nccl" : "vet-net"))
        || !(s.tags = calloc(2, sizeof(char *)))
        || !(s.tags[0] = strdup("pilot=vet"))) {
        pl_errprintf(errp, "out of memory");
        goto done;
    }
    if (pl_spec_check(&s, errp) < 0 || !(r = pl_conn_submit(conn, &s, 1,
                                                            NULL, errp)))
        goto done;
    json_t *ids = json_object_get(r, "ids");
    if (json_is_integer(json_array_get(ids, 0)))
        id = (uint64_t)json_integer_value(json_array_get(ids, 0));
    else
        pl_errprintf(errp, "pilotd answered submit without the task's id");
    json_decref(r);
done:
    pl_spec_clear(&s);
    return id;
}

/* Wait until task 'id' ends (polling; at most 'limit' s): its state, or
 * -1 with errp. */
static int wait_end(struct pl_conn *conn, uint64_t id, double limit,
                    struct pl_error *errp)
{
    struct pl_sel_req one = { .ids = &id, .nids = 1 };
    struct timespec pause = { 0, 300 * 1000 * 1000 };
    time_t until = time(NULL) + (time_t)limit;

    for (;;) {
        json_t *t = pl_conn_show(conn, &one, errp);
        if (!t)
            return -1;
        int st = pl_state_parse(pl_out_jstr(t, "state"));
        json_decref(t);
        if (st >= 0 && pl_state_final(st))
            return st;
        if (time(NULL) > until) {
            pl_conn_cancel(conn, &one, errp);
            errno = ETIMEDOUT;
            return pl_errprintf(errp, "task %llu did not end within %.0f "
                                "s: cancelled", (unsigned long long)id,
                                limit);
        }
        nanosleep(&pause, NULL);
    }
}

/* The task's stdout (its last line that is a JSON object), or NULL with
 * errp. */
static json_t *read_report(const struct pl_conn *conn, uint64_t id,
                           struct pl_error *errp)
{
    char path[PL_PATH_MAX + 64], *buf = NULL, *line, *save = NULL;
    json_t *r = NULL;
    FILE *fp;
    size_t n;

    if (pl_path_task_log(conn->pilot.dir, id, 1, false, false, path,
                         sizeof(path)) < 0
        || !(fp = fopen(path, "re"))) {
        pl_errprintf(errp, "task %llu: no output: %s",
                     (unsigned long long)id, strerror(errno));
        return NULL;
    }
    if (!(buf = malloc(REPORT_MAX + 1))) {
        fclose(fp);
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    n = fread(buf, 1, REPORT_MAX, fp);
    fclose(fp);
    buf[n] = '\0';
    for (line = strtok_r(buf, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        json_t *j = line[0] == '{' ? json_loads(line, 0, NULL) : NULL;
        if (json_is_object(j) && json_is_string(json_object_get(j, "check"))) {
            json_decref(r);
            r = j;
        }
        else
            json_decref(j);
    }
    free(buf);
    if (!r)
        pl_errprintf(errp, "task %llu printed no report (pilot logs %llu "
                     "--stderr says why)", (unsigned long long)id,
                     (unsigned long long)id);
    return r;
}

/* Cordon the nodes each failed entry names, the check and figure the
 * reason.  How many were cordoned. */
static int cordon_failed(struct pl_conn *conn, const json_t *rep, FILE *out)
{
    const json_t *f, *node;
    size_t i, j;
    int n = 0;

    json_array_foreach(json_object_get(rep, "failed"), i, f) {
        char reason[PL_CORDON_REASON_MAX];
        const json_t *val = json_object_get(f, "value");
        const json_t *lim = json_object_get(f, "limit");
        snprintf(reason, sizeof(reason), "vet: %.32s %.4g (limit %.4g): "
                 "%.150s", pl_out_jstr(f, "check"),
                 json_is_number(val) ? json_number_value(val) : NAN,
                 json_is_number(lim) ? json_number_value(lim) : NAN,
                 pl_out_jstr(f, "text"));
        json_array_foreach(json_object_get(f, "nodes"), j, node) {
            const char *name = json_string_value(node);
            struct pl_cordon_req q = { .node = (char *)name,
                                       .reason = reason };
            struct pl_error err;
            json_t *r;
            if (!name || !pl_node_name_ok(name))
                continue;
            if (!(r = pl_conn_cordon(conn, &q, &err)))
                pl_cli_error("cordon %s: %s", name, err.text);
            else if (n++, out)
                fprintf(out, "%s cordoned: %s\n", name, reason);
            json_decref(r);
        }
    }
    return n;
}

static void print_net(FILE *out, const json_t *rep)
{
    const json_t *p;
    size_t i;

    fprintf(out, "%-12s %-12s %12s %14s\n", "A", "B", "latency us",
           "bandwidth MB/s");
    json_array_foreach(json_object_get(rep, "pairs"), i, p)
        fprintf(out, "%-12s %-12s %12.2f %14.1f%s\n", pl_out_jstr(p, "a"),
               pl_out_jstr(p, "b"),
               json_number_value(json_object_get(p, "latency_us")),
               json_number_value(json_object_get(p, "bandwidth_mbs")),
               json_is_false(json_object_get(p, "ok")) ? "  FAILED" : "");
    fprintf(out, "median latency %.2f us, bandwidth %.1f MB/s\n",
           json_number_value(json_object_get(rep, "median_latency_us")),
           json_number_value(json_object_get(rep, "median_bandwidth_mbs")));
}

static void print_nccl(FILE *out, const json_t *rep)
{
    fprintf(out, "nccl all-reduce: %lld ranks on %lld nodes, busbw %.2f GB/s "
           "(algbw %.2f GB/s, %.0f us)\n",
           pl_out_jint(rep, "ranks", 0), pl_out_jint(rep, "nodes", 0),
           json_number_value(json_object_get(rep, "busbw_gbs")),
           json_number_value(json_object_get(rep, "algbw_gbs")),
           json_number_value(json_object_get(rep, "time_us")));
}

/* The check (net, or with 'nccl' nccl) with the limits of 'c', its
 * words on 'out' (with 'json' the report alone, on stdout). */
static int vet_run(struct pl_conn *conn, bool nccl,
                   const struct pl_vetconf *c, bool json, FILE *out)
{
    struct pl_error err;
    uint64_t nodes, gpus, gmax, cores, id;
    char prog[PL_PATH_MAX + 32];
    const char *what = nccl ? "nccl" : "net";
    json_t *rep = NULL, *f;
    size_t i;
    int st, rc = PL_EXIT_ERROR;

    if (usable_nodes(conn, &nodes, &gpus, &gmax, &cores, &err) < 0) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    /* nothing to check is not a failure of the nodes */
    if (nccl && !gmax) {
        fprintf(out, "vet nccl: no GPUs in this pilot (on its nodes that "
                "are up and not cordoned): nothing checked\n");
        rc = PL_EXIT_OK;
        goto done;
    }
    if (nccl && !gpus) {
        fprintf(out, "vet nccl: a node without GPUs: NCCL is checked on "
                "pilots whose every node has them; nothing checked\n");
        rc = PL_EXIT_OK;
        goto done;
    }
    if (!nccl && nodes < 2) {
        fprintf(out, "vet net: %llu node%s up and not cordoned: no pair to "
                "check\n", (unsigned long long)nodes, nodes == 1 ? "" : "s");
        rc = PL_EXIT_OK;
        goto done;
    }
    if (nccl && gpus > cores) {
        /* a rank needs a core: the GPUs a node's cores can drive */
        fprintf(out, "vet nccl: %llu of each node's %llu GPUs (a rank needs "
                "a core)\n", (unsigned long long)cores,
                (unsigned long long)gpus);
        gpus = cores;
    }
    if (find_prog(prog, sizeof(prog)) < 0) {
        pl_cli_error("no pilot-vetcheck (%s)", prog);
        goto done;
    }
    if (!(id = submit(conn, c, nccl, nodes, gpus, prog, &err))) {
        pl_cli_error("vet %s: %s", what, err.text);
        goto done;
    }
    if (!json)
        fprintf(out, "vet %s: task %llu, %llu nodes%s\n", what,
                (unsigned long long)id, (unsigned long long)nodes,
                nccl ? ", one rank a GPU" : "");
    /* its run, and a wait for the nodes to be free */
    if ((st = wait_end(conn, id, 2 * c->net_timeout + 60, &err)) < 0) {
        pl_cli_error("vet %s: %s", what, err.text);
        goto done;
    }
    if (!(rep = read_report(conn, id, &err))) {
        pl_cli_error("vet %s: task %llu ended %s: %s", what,
                     (unsigned long long)id, pl_state_name(st), err.text);
        goto done;
    }
    bool cannot = !strcmp(pl_out_jstr(rep, "status"), "cannot-run");
    if (json)
        pl_out_json(rep);
    else if (cannot)
        fprintf(out, "vet %s: cannot run here, nothing checked or "
                "cordoned: %s\n", what, pl_out_jstr(rep, "error"));
    else if (nccl)
        print_nccl(out, rep);
    else
        print_net(out, rep);
    rc = PL_EXIT_OK;
    json_array_foreach(json_object_get(rep, "failed"), i, f) {
        if (!json)
            fprintf(out, "FAILED %s: %s\n", pl_out_jstr(f, "check"),
                    pl_out_jstr(f, "text"));
        rc = 3;
    }
    cordon_failed(conn, rep, json ? NULL : out);
done:
    json_decref(rep);
    return rc;
}

int pl_vet_net_cmd(struct pl_cli *cli, struct pl_conn *conn, bool nccl,
                   const char *file)
{
    struct pl_vetconf c;
    struct pl_error err;
    int rc;

    if (load_conf(conn, file, &c, &err) < 0) {
        pl_cli_error("%s", err.text);
        return PL_EXIT_ERROR;
    }
    rc = vet_run(conn, nccl, &c, cli->json, stdout);
    pl_vetconf_clear(&c);
    return rc;
}

/* Whether a node is still in its first vetting (cordoned "vetting"). */
static int vetting(struct pl_conn *conn, struct pl_error *errp)
{
    json_t *s = pl_conn_status(conn, errp), *n;
    size_t i;
    int busy = 0;

    if (!s)
        return -1;
    json_array_foreach(json_object_get(s, "nodes"), i, n)
        busy |= !strcmp(pl_out_jstr(json_object_get(n, "vet"), "state"),
                        "running");
    json_decref(s);
    return busy;
}

int pl_vet_net_at_start(struct pl_cli *cli, const struct pl_pilot *p,
                        const char *yaml)
{
    struct pl_vetconf c;
    struct pl_error err;
    struct pl_conn *conn = NULL;
    struct timespec pause = { 0, 200 * 1000 * 1000 };
    int rc = PL_EXIT_OK, busy;

    if (!yaml || pl_vetconf_parse("vet.yaml", yaml, strlen(yaml), &c, &err)
                     < 0)
        return PL_EXIT_OK; /* none, or checked before: nothing asked */
    if (!c.net_start && !c.nccl_start)
        goto done;
    if (!(conn = pl_conn_attach(&cli->find, p, &err))) {
        rc = pl_cli_error("%s", err.text);
        goto done;
    }
    /* the nodes' own checks first: a node is used once it passed */
    time_t until = time(NULL) + (time_t)c.timeout + 10;
    while ((busy = vetting(conn, &err)) > 0 && time(NULL) < until)
        nanosleep(&pause, NULL);
    if (busy < 0) {
        rc = pl_cli_error("%s", err.text);
        goto done;
    }
    /* stdout has the pilot's id alone: the reports go to stderr */
    if (c.net_start)
        rc = vet_run(conn, false, &c, false, stderr);
    if (c.nccl_start && rc == PL_EXIT_OK)
        rc = vet_run(conn, true, &c, false, stderr);
    /* a node that failed is cordoned; the pilot itself is up */
    if (rc == 3)
        rc = PL_EXIT_OK;
done:
    pl_conn_free(conn);
    pl_vetconf_clear(&c);
    return rc;
}
