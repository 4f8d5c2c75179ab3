/* client/cmd_grow.c - pilot grow, pilot shrink: allocations that join a
 * running pilot, and their release (docs/grow.md) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/cli.h"
#include "client/conn.h"
#include "client/output.h"
#include "proto/allocmsg.h"

static const char grow_help[] =
    "usage: pilot grow --nodes N [--time T] [--partition P] [--drain D]\n"
    "                  [--wait] [--json] [--pilot ID]\n"
    "\n"
    "Add N nodes to the running pilot: pilotd submits a Slurm job (sbatch)\n"
    "that runs only agents, one per node, which connect to it with the\n"
    "pilot's keys.  Tasks are placed on them as on the pilot's own nodes.\n"
    "When the job's walltime nears (D before its end) its nodes are\n"
    "drained: nothing new starts there; 15 s before the end, or once they\n"
    "are idle, they leave and what still runs there is queued again (not\n"
    "charged to --retries).  The pilot's own nodes are not affected.\n"
    "'pilot status' lists the allocations; 'pilot shrink' releases them.\n"
    "\n"
    "options:\n"
    "  --nodes N        nodes of the new allocation\n"
    "  --time T         its Slurm time limit (sbatch --time: 30, 1:30:00,\n"
    "                   1-0); default: the partition's\n"
    "  --partition P    its partition; default: Slurm's\n"
    "  --drain D        drain its nodes D before its end (60s; s, m, h)\n"
    "  --wait           return once its nodes have joined (or it ended)\n"
    "  --json           print the allocation as JSON\n"
    "  --pilot ID       the pilot (default: the one running)\n"
    "  -h, --help       this help\n"
    "\n"
    "examples:\n"
    "  pilot grow --nodes 4 --time 2:00:00\n"
    "  pilot grow --nodes 1 --partition gpu --wait\n";

static const char shrink_help[] =
    "usage: pilot shrink --idle D | --alloc ID [--json] [--pilot ID]\n"
    "\n"
    "Release allocations that joined the pilot ('pilot grow', or 'pilot up\n"
    "--grow'): those whose nodes have all run nothing for D (s, m, h), or\n"
    "allocation ID whatever it runs (its tasks are queued again, not\n"
    "charged to --retries).  Their nodes leave and their Slurm jobs are\n"
    "cancelled.  The pilot's own nodes are never released.\n"
    "\n"
    "options:\n"
    "  --idle D     allocations idle at least D (0: every idle one)\n"
    "  --alloc ID   this allocation (pending or running)\n"
    "  --json       print {\"released\": [ids]}\n"
    "  --pilot ID   the pilot (default: the one running)\n"
    "  -h, --help   this help\n"
    "\n"
    "examples:\n"
    "  pilot shrink --idle 5m\n"
    "  pilot shrink --alloc 2\n";

static long long joined(const json_t *a)
{
    return (long long)json_array_size(json_object_get(a, "names"));
}

/* ALLOCS until allocation 'id' has all its nodes, or has ended.  The
 * allocation (new reference), or NULL with errp. */
static json_t *wait_joined(struct pl_conn *conn, long long id,
                           struct pl_error *errp)
{
    for (;;) {
        json_t *res = pl_conn_allocs(conn, errp), *a;
        size_t i;

        if (!res)
            return NULL;
        json_array_foreach(json_object_get(res, "allocs"), i, a) {
            if (pl_out_jint(a, "id", 0) != id)
                continue;
            const char *st = pl_out_jstr(a, "state");
            if ((st && !strcmp(st, "ended"))
                || joined(a) >= pl_out_jint(a, "nodes", 0)) {
                json_incref(a);
                json_decref(res);
                return a;
            }
        }
        json_decref(res);
        pl_cli_sleep(0.5);
    }
}

int pl_cmd_grow(struct pl_cli *cli, int argc, char **argv)
{
    enum { OPT_NODES = PL_OPT_CMD, OPT_TIME, OPT_PART, OPT_DRAIN, OPT_WAIT };
    static const struct option opts[] = {
        { "nodes", required_argument, NULL, OPT_NODES },
        { "time", required_argument, NULL, OPT_TIME },
        { "partition", required_argument, NULL, OPT_PART },
        { "drain", required_argument, NULL, OPT_DRAIN },
        { "wait", no_argument, NULL, OPT_WAIT },
        PL_CLI_COMMON_OPTS, { 0 } };
    struct pl_grow_req q = { .drain = -1 };
    struct pl_error err;
    struct pl_conn *conn = NULL;
    json_t *res = NULL;
    bool wait = false;
    uint64_t v;
    int c, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case OPT_NODES:
            if (pl_parse_uint("--nodes", optarg, 1, PL_ALLOC_MAX_NODES, &v,
                              &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            q.nodes = (uint32_t)v;
            break;
        case OPT_TIME:
            if (!pl_alloc_time_ok(optarg))
                return pl_cli_usage(cli, "--time: '%s' is not a Slurm time "
                                    "limit (M, M:S, H:M:S, D-H[:M[:S]])",
                                    optarg);
            q.time = optarg;
            break;
        case OPT_PART:
            if (!pl_alloc_part_ok(optarg))
                return pl_cli_usage(cli, "--partition: '%s' is not a "
                                    "partition name", optarg);
            q.partition = optarg;
            break;
        case OPT_DRAIN:
            if (pl_parse_secs("--drain", optarg, &q.drain, &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            break;
        case OPT_WAIT: wait = true; break;
        default:
            if (pl_cli_opt(cli, c, argv, grow_help, &rc) < 0)
                return rc;
        }
    }
    if (optind < argc)
        return pl_cli_usage(cli, "unexpected argument '%s'", argv[optind]);
    if (!q.nodes)
        return pl_cli_usage(cli, "want --nodes N");
    rc = PL_EXIT_ERROR;
    if (!(conn = pl_conn_open(&cli->find, PL_CONN_WRITE, &err))
        || !(res = pl_conn_grow(conn, &q, &err))) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    if (wait) {
        json_t *a = wait_joined(conn, pl_out_jint(res, "id", 0), &err);
        if (!a) {
            pl_cli_error("%s", err.text);
            goto done;
        }
        json_decref(res);
        res = a;
    }
    if (cli->json)
        pl_out_json(res);
    else {
        long long nn = pl_out_jint(res, "nodes", 0);
        printf("allocation %lld: Slurm job %lld, %lld node%s",
               pl_out_jint(res, "id", 0), pl_out_jint(res, "job", 0), nn,
               nn == 1 ? "" : "s");
        if (wait && joined(res))
            printf(", joined:");
        for (size_t i = 0; wait && i < (size_t)joined(res); i++)
            printf(" %s", json_string_value(json_array_get(
                              json_object_get(res, "names"), i)));
        putchar('\n');
    }
    const char *st = pl_out_jstr(res, "state");
    if (st && !strcmp(st, "ended")) {
        pl_cli_error("allocation %lld ended: %s", pl_out_jint(res, "id", 0),
                     pl_out_jstr(res, "why"));
        goto done;
    }
    rc = PL_EXIT_OK;
done:
    json_decref(res);
    pl_conn_free(conn);
    return rc;
}

int pl_cmd_shrink(struct pl_cli *cli, int argc, char **argv)
{
    enum { OPT_IDLE = PL_OPT_CMD, OPT_ALLOC };
    static const struct option opts[] = {
        { "idle", required_argument, NULL, OPT_IDLE },
        { "alloc", required_argument, NULL, OPT_ALLOC },
        PL_CLI_COMMON_OPTS, { 0 } };
    struct pl_shrink_req q = { .idle = -1 };
    struct pl_error err;
    struct pl_conn *conn = NULL;
    json_t *res = NULL, *id;
    size_t i;
    int c, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (c == OPT_IDLE) {
            if (pl_parse_secs("--idle", optarg, &q.idle, &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
        }
        else if (c == OPT_ALLOC) {
            if (pl_parse_uint("--alloc", optarg, 1, UINT32_MAX, &q.alloc,
                              &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
        }
        else if (pl_cli_opt(cli, c, argv, shrink_help, &rc) < 0)
            return rc;
    }
    if (optind < argc)
        return pl_cli_usage(cli, "unexpected argument '%s'", argv[optind]);
    if ((q.idle >= 0) == (q.alloc > 0))
        return pl_cli_usage(cli, "want --idle D or --alloc ID");
    rc = PL_EXIT_ERROR;
    if (!(conn = pl_conn_open(&cli->find, PL_CONN_WRITE, &err))
        || !(res = pl_conn_shrink(conn, &q, &err))) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    if (cli->json)
        pl_out_json(res);
    else if (json_array_size(json_object_get(res, "released")) == 0)
        printf("no allocation released\n");
    else
        json_array_foreach(json_object_get(res, "released"), i, id)
            printf("allocation %lld released\n",
                   (long long)json_integer_value(id));
    rc = PL_EXIT_OK;
done:
    json_decref(res);
    pl_conn_free(conn);
    return rc;
}
