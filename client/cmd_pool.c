/* client/cmd_pool.c - pilot pool: start, list and stop MPI worker pools
 *
 * A pool is one MPI job of workers that runs function tasks (pilot
 * submit --pool NAME --fn LIB.so:SYMBOL | --py MODULE:FUNCTION) on a
 * communicator made per task, with no process started for them
 * (docs/pool.md).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/cli.h"
#include "client/conn.h"
#include "client/output.h"
#include "proto/clientmsg.h"

static const char help[] =
    "usage: pilot pool start --name NAME --ranks-per-node N [--nodes N]\n"
    "                        [--cores-per-rank N] [--gpus-per-rank N]\n"
    "                        [--launcher srun|mpirun] [--env KEY=VALUE]\n"
    "                        [--wait [--wait-timeout S]]\n"
    "       pilot pool ls [--json]\n"
    "       pilot pool stop NAME\n"
    "\n"
    "A pool is one long-running MPI job of worker processes on the\n"
    "pilot's nodes (srun --overlap --mpi=pmix, or mpirun), started once.\n"
    "Its cores and GPUs are the pool's; other tasks use the rest.  Tasks\n"
    "submitted with --pool NAME call a function in its workers, one rank\n"
    "a worker, on an MPI communicator made for the task: no process is\n"
    "started and MPI_Init is not paid per task.  A function that crashes\n"
    "takes the pool's job down: the pool restarts, that task fails, the\n"
    "tasks beside it run again.\n"
    "\n"
    "start    start pool NAME: N workers on each of the pilot's nodes\n"
    "         (or --nodes of them); prints the pool\n"
    "ls       the pools: state, workers ready and busy, tasks queued,\n"
    "         restarts\n"
    "stop     stop pool NAME: its queued and running tasks are canceled\n"
    "\n"
    "options:\n"
    "  --name NAME            the pool's name (A-Z a-z 0-9 _ . -)\n"
    "  --ranks-per-node N     workers on each node (default 1)\n"
    "  --nodes N              on N of the pilot's nodes (default: all)\n"
    "  --cores-per-rank N     cores each worker holds (default 1)\n"
    "  --gpus-per-rank N      GPUs each worker holds (default 0); with\n"
    "                         GPUs each task gets an NCCL communicator\n"
    "  --launcher L           srun (default) or mpirun\n"
    "  --env KEY=VALUE        set a variable in the workers (repeatable):\n"
    "                         PYTHONPATH for --py functions, OMP_NUM_THREADS\n"
    "  --wait                 start: wait until every worker is ready\n"
    "  --wait-timeout S       ... at most S (default 120 s; 90, 2m)\n"
    "  --pilot ID             the pilot (default: the one running)\n"
    "  --json                 print the pool(s) as JSON\n"
    "  -h, --help             this help\n"
    "\n"
    "examples:\n"
    "  pilot pool start --name etl --ranks-per-node 2 --wait\n"
    "  pilot submit --pool etl --ranks 4 --fn ./libjoin.so:join -- in/ out/\n"
    "  pilot submit --pool etl --ranks 2 --py etl.jobs:sort_table -- "
    "part-{} \\\n"
    "      --array 0-99\n"
    "  pilot pool stop etl\n";

enum {
    OPT_NAME = PL_OPT_CMD,
    OPT_RPN,
    OPT_NODES,
    OPT_CPR,
    OPT_GPR,
    OPT_LAUNCHER,
    OPT_WAIT,
    OPT_WAIT_TIMEOUT,
    OPT_ENV,
};

#define WAIT_DEFAULT 120.0

static void print_pools(const json_t *pools)
{
    static const char *headers[] = { "NAME", "STATE", "WORKERS", "NODES",
                                     "READY", "BUSY", "QUEUED", "RESTARTS",
                                     "JOB" };
    struct pl_out_table *t = pl_out_table_new(9, headers);
    const json_t *p;
    size_t i;

    if (!t)
        return;
    json_array_foreach(pools, i, p) {
        char w[24], n[24], r[24], b[24], q[24], rs[24], j[24];
        snprintf(w, sizeof(w), "%lld", pl_out_jcount(p, "workers"));
        snprintf(n, sizeof(n), "%lld", pl_out_jcount(p, "nodes"));
        snprintf(r, sizeof(r), "%lld", pl_out_jcount(p, "ready"));
        snprintf(b, sizeof(b), "%lld", pl_out_jcount(p, "busy"));
        snprintf(q, sizeof(q), "%lld", pl_out_jcount(p, "queued"));
        snprintf(rs, sizeof(rs), "%lld", pl_out_jcount(p, "restarts"));
        snprintf(j, sizeof(j), "%lld", pl_out_jcount(p, "job"));
        const char *cells[] = { pl_out_jstr(p, "name"),
                                pl_out_jstr(p, "state"), w, n, r, b, q, rs,
                                j };
        pl_out_table_add(t, cells);
    }
    pl_out_table_print(t, stdout, 0);
    pl_out_table_free(t);
    json_array_foreach(pools, i, p) {
        const char *why = pl_out_jstr(p, "reason");
        double rst = pl_out_jreal(p, "last_restart_s", NAN);
        if (!isnan(rst))
            printf("%s: last restart took %.2f s\n", pl_out_jstr(p, "name"),
                   rst);
        if (why && strcmp(pl_out_jstr(p, "state"), "ready"))
            printf("%s: %s\n", pl_out_jstr(p, "name"), why);
    }
}

static json_t *find_pool(const json_t *pools, const char *name)
{
    const json_t *p;
    size_t i;

    json_array_foreach(pools, i, p) {
        const char *n = pl_out_jstr(p, "name");
        if (n && !strcmp(n, name))
            return (json_t *)p;
    }
    return NULL;
}

/* Wait until pool 'name' is ready (every worker said hello), with a
 * progress line on a terminal.  0, or the exit code. */
int pl_pool_wait_ready(struct pl_conn *conn, const char *name, double secs,
                       json_t **poolp)
{
    struct timespec t0, now;
    struct pl_error err;
    bool tty = isatty(STDERR_FILENO);

    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        json_t *pools = pl_conn_pool(conn, PL_MSG_POOL_LIST, NULL, &err);
        json_t *p;
        const char *st;
        if (!pools)
            return pl_cli_error("%s", err.text);
        if (!(p = find_pool(pools, name))) {
            json_decref(pools);
            return pl_cli_error("pool %s is gone", name);
        }
        st = pl_out_jstr(p, "state");
        if (st && !strcmp(st, "ready")) {
            if (tty)
                pl_out_progress_clear(stderr);
            *poolp = json_incref(p);
            json_decref(pools);
            return 0;
        }
        if (st && !strcmp(st, "failed")) {
            if (tty)
                pl_out_progress_clear(stderr);
            pl_cli_error("%s", pl_out_jstr(p, "reason")
                                   ? pl_out_jstr(p, "reason")
                                   : "the pool failed (no reason given)");
            json_decref(pools);
            return PL_EXIT_ERROR;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        double el = (double)(now.tv_sec - t0.tv_sec)
                    + (double)(now.tv_nsec - t0.tv_nsec) / 1e9;
        if (tty) {
            char line[160];
            snprintf(line, sizeof(line), "pool %s: %s, %lld of %lld workers "
                     "ready (%.0f s)", name, st ? st : "?",
                     pl_out_jcount(p, "ready"), pl_out_jcount(p, "workers"),
                     el);
            pl_out_progress(stderr, line);
        }
        json_decref(pools);
        if (el > secs) {
            if (tty)
                pl_out_progress_clear(stderr);
            return pl_cli_error("pool %s: not ready after %.0f s (pilot pool "
                                "ls; the pool's job's log: pilot logs JOB)",
                                name, secs);
        }
        usleep(100 * 1000);
    }
}

static int do_start(struct pl_cli *cli, const struct pl_pool_req *pr,
                    double wait)
{
    struct pl_error err;
    struct pl_conn *conn;
    json_t *p;
    int rc = PL_EXIT_OK;

    if (pl_pool_req_check(pr, &err) < 0)
        return pl_cli_usage(cli, "%s", err.text);
    if (!(conn = pl_conn_open(&cli->find, PL_CONN_WRITE, &err)))
        return pl_cli_error("%s", err.text);
    if (!(p = pl_conn_pool(conn, PL_MSG_POOL_START, pr, &err))) {
        rc = pl_cli_error("%s", err.text);
        goto done;
    }
    if (wait > 0) {
        json_decref(p);
        p = NULL;
        if ((rc = pl_pool_wait_ready(conn, pr->name, wait, &p)) != 0)
            goto done;
    }
    if (cli->json)
        pl_out_json(p);
    else {
        printf("pool %s: %lld workers (%lld per node), %s", pr->name,
               pl_out_jcount(p, "workers"), pl_out_jcount(p, "ranks_per_node"),
               pl_out_jstr(p, "state"));
        if (wait > 0)
            printf(" in %.2f s", pl_out_jreal(p, "last_start_s", 0));
        printf(" (job %lld)\n", pl_out_jcount(p, "job"));
    }
done:
    json_decref(p);
    pl_conn_free(conn);
    return rc;
}

static int do_ls(struct pl_cli *cli)
{
    struct pl_error err;
    struct pl_conn *conn;
    json_t *pools;
    int rc = PL_EXIT_OK;

    if (!(conn = pl_conn_open(&cli->find, PL_CONN_WRITE, &err)))
        return pl_cli_error("%s", err.text);
    if (!(pools = pl_conn_pool(conn, PL_MSG_POOL_LIST, NULL, &err)))
        rc = pl_cli_error("%s", err.text);
    else if (cli->json)
        pl_out_json(pools);
    else if (json_array_size(pools) == 0)
        printf("no pools (start one: pilot pool start --name NAME "
               "--ranks-per-node N)\n");
    else
        print_pools(pools);
    json_decref(pools);
    pl_conn_free(conn);
    return rc;
}

static int do_stop(struct pl_cli *cli, const char *name)
{
    struct pl_pool_req pr = { .rpn = 1, .cpr = 1 };
    struct pl_error err;
    struct pl_conn *conn;
    json_t *p;
    int rc = PL_EXIT_OK;

    snprintf(pr.name, sizeof(pr.name), "%s", name);
    if (!(conn = pl_conn_open(&cli->find, PL_CONN_WRITE, &err)))
        return pl_cli_error("%s", err.text);
    if (!(p = pl_conn_pool(conn, PL_MSG_POOL_STOP, &pr, &err)))
        rc = pl_cli_error("%s", err.text);
    else if (cli->json)
        pl_out_json(p);
    else
        printf("pool %s: stopping (%lld queued, %lld running tasks "
               "canceled)\n", name, pl_out_jcount(p, "queued"),
               pl_out_jcount(p, "running"));
    json_decref(p);
    pl_conn_free(conn);
    return rc;
}

int pl_cmd_pool(struct pl_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        { "name", required_argument, NULL, OPT_NAME },
        { "ranks-per-node", required_argument, NULL, OPT_RPN },
        { "nodes", required_argument, NULL, OPT_NODES },
        { "cores-per-rank", required_argument, NULL, OPT_CPR },
        { "gpus-per-rank", required_argument, NULL, OPT_GPR },
        { "launcher", required_argument, NULL, OPT_LAUNCHER },
        { "wait", no_argument, NULL, OPT_WAIT },
        { "wait-timeout", required_argument, NULL, OPT_WAIT_TIMEOUT },
        { "env", required_argument, NULL, OPT_ENV },
        PL_CLI_COMMON_OPTS,
        { 0 },
    };
    struct pl_pool_req pr = { .rpn = 1, .cpr = 1 };
    struct pl_error err;
    bool start_opts = false, named = false, wait_on = false;
    char *env[257] = { NULL };
    size_t nenv = 0;
    double wait = WAIT_DEFAULT;
    const char *sub;
    int c, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case OPT_NAME:
            if (!pl_pool_name_ok(optarg))
                return pl_cli_usage(cli, "--name: '%s' is not a pool's name "
                                    "(1 to %d of A-Z a-z 0-9 _ . -, first a "
                                    "letter or a digit)", optarg,
                                    PL_POOL_NAME_MAX);
            snprintf(pr.name, sizeof(pr.name), "%s", optarg);
            named = start_opts = true;
            break;
        case OPT_RPN:
        case OPT_NODES:
        case OPT_CPR:
        case OPT_GPR: {
            static const char *const names[] = { "--ranks-per-node",
                                                 "--nodes",
                                                 "--cores-per-rank",
                                                 "--gpus-per-rank" };
            uint64_t *dst[] = { &pr.rpn, &pr.nodes, &pr.cpr, &pr.gpr };
            static const uint64_t lo[] = { 1, 1, 1, 0 };
            static const uint64_t hi[] = { PL_SPEC_MAX_RPN, PL_SPEC_MAX_NODES,
                                           PL_SPEC_MAX_CPR, PL_SPEC_MAX_GPR };
            int k = c - OPT_RPN;
            if (pl_parse_uint(names[k], optarg, lo[k], hi[k], dst[k],
                              &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            start_opts = true;
            break;
        }
        case OPT_LAUNCHER:
            if ((pr.launcher = pl_launcher_parse(optarg)) < 0)
                return pl_cli_usage(cli, "--launcher: '%s' is not srun or "
                                    "mpirun", optarg);
            start_opts = true;
            break;
        case OPT_WAIT:
            wait_on = start_opts = true;
            break;
        case OPT_ENV:
            if (!strchr(optarg, '=') || optarg[0] == '=')
                return pl_cli_usage(cli, "--env '%s': want KEY=VALUE",
                                    optarg);
            if (nenv >= 256)
                return pl_cli_usage(cli, "at most 256 --env");
            env[nenv++] = optarg;
            start_opts = true;
            break;
        case OPT_WAIT_TIMEOUT:
            if (pl_parse_secs("--wait-timeout", optarg, &wait, &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            if (wait <= 0)
                return pl_cli_usage(cli, "--wait-timeout: want a positive "
                                    "time");
            start_opts = true;
            break;
        default:
            if (pl_cli_opt(cli, c, argv, help, &rc) < 0)
                return rc;
            break;
        }
    }
    if (optind >= argc)
        return pl_cli_usage(cli, "no subcommand: start, ls or stop");
    sub = argv[optind++];
    if (!strcmp(sub, "start")) {
        if (optind < argc)
            return pl_cli_usage(cli, "start: unexpected argument '%s' (the "
                                "name goes with --name)", argv[optind]);
        if (!named)
            return pl_cli_usage(cli, "start: give the pool a --name");
        pr.env = nenv ? env : NULL;
        return do_start(cli, &pr, wait_on ? wait : 0);
    }
    if (start_opts)
        return pl_cli_usage(cli, "%s takes none of start's options", sub);
    if (!strcmp(sub, "ls") || !strcmp(sub, "list")) {
        if (optind < argc)
            return pl_cli_usage(cli, "ls: unexpected argument '%s'",
                                argv[optind]);
        return do_ls(cli);
    }
    if (!strcmp(sub, "stop")) {
        if (optind >= argc)
            return pl_cli_usage(cli, "stop: no pool named (pilot pool ls)");
        if (optind + 1 < argc)
            return pl_cli_usage(cli, "stop: unexpected argument '%s'",
                                argv[optind + 1]);
        if (!pl_pool_name_ok(argv[optind]))
            return pl_cli_usage(cli, "stop: '%s' is not a pool's name",
                                argv[optind]);
        return do_stop(cli, argv[optind]);
    }
    return pl_cli_usage(cli, "unknown subcommand '%s' (start, ls or stop)",
                        sub);
}
