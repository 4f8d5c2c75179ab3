/* client/cmd_vet.c - pilot vet, pilot cordon, pilot uncordon: a node's
 * checks run again, and nothing new placed on a node (or again) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/cli.h"
#include "client/conn.h"
#include "client/output.h"
#include "client/vetnet.h"
#include "proto/agentmsg.h"
#include "proto/vetmsg.h"

static const char vet_help[] =
    "usage: pilot vet [NODE...] [--json] [--pilot ID]\n"
    "       pilot vet --net | --nccl [--vet FILE] [--json] [--pilot ID]\n"
    "\n"
    "Run the nodes' checks again (all the pilot's nodes that are up, or\n"
    "the NODEs) and print each node's result, check by check: its figure\n"
    "and limit.  A node that fails a check is cordoned (nothing new is\n"
    "placed there; what runs goes on); one that passes loses a cordon its\n"
    "vetting put there (not one of 'pilot cordon').  The checks and their\n"
    "limits are the pilot's vet.yaml ('pilot up --vet FILE'; docs/vet.yaml).\n"
    "Exit status 0 when every node passed, 3 when one did not.\n"
    "\n"
    "--net runs pilot-vetcheck net as a task of the pilot (comm mpi, one\n"
    "rank on each node that is up and not cordoned): latency and bandwidth\n"
    "between every pair of nodes; --nccl runs pilot-vetcheck nccl (one\n"
    "rank a GPU): NCCL all-reduce bus bandwidth.  Their limits are\n"
    "vet.yaml's net: and nccl: sections (none by default); the nodes of a\n"
    "pair that breaks one are cordoned ('vet: net.latency ...').\n"
    "\n"
    "options:\n"
    "  --net        the network between the nodes (MPI ping-pong)\n"
    "  --nccl       NCCL all-reduce across the pilot's GPUs\n"
    "  --vet FILE   --net/--nccl: the limits of this vet.yaml instead\n"
    "  --json       print the results as JSON (an array, one per node)\n"
    "  --pilot ID   the pilot (default: the one running)\n"
    "  -h, --help   this help\n"
    "\n"
    "examples:\n"
    "  pilot vet\n"
    "  pilot vet n3 n4\n"
    "  pilot vet --net\n";

static const char cordon_help[] =
    "usage: pilot cordon NODE [--reason TEXT] [--pilot ID]\n"
    "       pilot uncordon NODE [--pilot ID]\n"
    "\n"
    "cordon     place nothing new on NODE; what runs there goes on\n"
    "uncordon   take NODE's cordon off (a failed vetting's too): tasks are\n"
    "           placed there again\n"
    "'pilot status' shows each node's cordon and vetting.\n"
    "\n"
    "options:\n"
    "  --reason TEXT  why (shown by 'pilot status'; default 'pilot cordon')\n"
    "  --json         print {\"node\": NODE, \"cordon\": TEXT or null}\n"
    "  --pilot ID     the pilot (default: the one running)\n"
    "  -h, --help     this help\n"
    "\n"
    "examples:\n"
    "  pilot cordon n3 --reason 'ECC errors'\n"
    "  pilot uncordon n3\n";

/* 'pilot vet' waits this long for pilotd's answer: its checks' timeout
 * (60 s by default, at most 3600) and a margin are pilotd's to keep. */
#define VET_WAIT_MS (3700 * 1000)

static void num(char *buf, size_t len, const json_t *v, const char *unit)
{
    if (json_is_number(v))
        snprintf(buf, len, "%g%s%s", json_number_value(v), unit ? " " : "",
                 unit ? unit : "");
    else
        snprintf(buf, len, "-");
}

static void print_result(const json_t *r)
{
    const json_t *c;
    size_t i;
    char took[32] = "";

    if (json_is_number(json_object_get(r, "took")))
        snprintf(took, sizeof(took), " in %.2f s",
                 json_number_value(json_object_get(r, "took")));
    printf("%s: %s%s", pl_out_jstr(r, "node"), pl_out_jstr(r, "state"), took);
    if (json_is_string(json_object_get(r, "cordon")))
        printf(", cordoned: %s", pl_out_jstr(r, "cordon"));
    putchar('\n');
    json_array_foreach(json_object_get(r, "checks"), i, c) {
        const char *unit = json_string_value(json_object_get(c, "unit"));
        char fig[48], lim[48];
        num(fig, sizeof(fig), json_object_get(c, "figure"), unit);
        num(lim, sizeof(lim), json_object_get(c, "limit"), unit);
        printf("  %-8s %-6s %-14s limit %-12s %s\n", pl_out_jstr(c, "name"),
               json_is_true(json_object_get(c, "ok")) ? "ok" : "FAILED", fig,
               lim, pl_out_jstr(c, "detail"));
    }
}

int pl_cmd_vet(struct pl_cli *cli, int argc, char **argv)
{
    enum { OPT_NET = PL_OPT_CMD, OPT_NCCL, OPT_VET };
    static const struct option opts[] = {
        { "net", no_argument, NULL, OPT_NET },
        { "vet", required_argument, NULL, OPT_VET },
        { "nccl", no_argument, NULL, OPT_NCCL },
        PL_CLI_COMMON_OPTS, { 0 } };
    bool net = false, nccl = false;
    const char *file = NULL;
    struct pl_error err;
    struct pl_conn *conn = NULL;
    json_t *res = NULL, *r;
    char **nodes = NULL;
    size_t i;
    int c, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (c == OPT_NET)
            net = true;
        else if (c == OPT_NCCL)
            nccl = true;
        else if (c == OPT_VET)
            file = optarg;
        else if (pl_cli_opt(cli, c, argv, vet_help, &rc) < 0)
            return rc;
    }
    if (file && !net && !nccl)
        return pl_cli_usage(cli, "--vet FILE is for --net and --nccl");
    if ((net || nccl) && optind < argc)
        return pl_cli_usage(cli, "--net and --nccl check the pilot's nodes "
                            "that are up and not cordoned: no NODE");
    if (net || nccl) {
        rc = PL_EXIT_ERROR;
        if (!(conn = pl_conn_open(&cli->find, PL_CONN_WRITE, &err))) {
            pl_cli_error("%s", err.text);
            return rc;
        }
        rc = net ? pl_vet_net_cmd(cli, conn, false, file) : PL_EXIT_OK;
        if (nccl && rc == PL_EXIT_OK)
            rc = pl_vet_net_cmd(cli, conn, true, file);
        pl_conn_free(conn);
        return rc;
    }
    for (int k = optind; k < argc; k++)
        if (!pl_node_name_ok(argv[k]))
            return pl_cli_usage(cli, "'%s' is not a node name", argv[k]);
    if (optind < argc)
        nodes = argv + optind; /* NULL-terminated, as argv is */
    rc = PL_EXIT_ERROR;
    if (!(conn = pl_conn_open(&cli->find, PL_CONN_WRITE, &err))
        || !(res = pl_conn_vet(conn, nodes, VET_WAIT_MS, &err))) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    rc = PL_EXIT_OK;
    json_array_foreach(res, i, r)
        if (strcmp(pl_out_jstr(r, "state"), "ok"))
            rc = 3;
    if (cli->json)
        pl_out_json(res);
    else
        json_array_foreach(res, i, r)
            print_result(r);
done:
    json_decref(res);
    pl_conn_free(conn);
    return rc;
}

static int cordon(struct pl_cli *cli, int argc, char **argv, bool uncordon)
{
    enum { OPT_REASON = PL_OPT_CMD };
    static const struct option opts[] = {
        { "reason", required_argument, NULL, OPT_REASON },
        PL_CLI_COMMON_OPTS, { 0 } };
    struct pl_cordon_req q = { .uncordon = uncordon };
    struct pl_error err;
    struct pl_conn *conn = NULL;
    json_t *res = NULL;
    int c, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (c == OPT_REASON && !uncordon) {
            if (!*optarg || strlen(optarg) > PL_CORDON_REASON_MAX)
                return pl_cli_usage(cli, "--reason: 1 to %d bytes",
                                    PL_CORDON_REASON_MAX);
            q.reason = optarg;
        }
        else if (c == OPT_REASON)
            return pl_cli_usage(cli, "--reason is for 'pilot cordon'");
        else if (pl_cli_opt(cli, c, argv, cordon_help, &rc) < 0)
            return rc;
    }
    if (optind + 1 != argc)
        return pl_cli_usage(cli, "want one NODE");
    if (!pl_node_name_ok(argv[optind]))
        return pl_cli_usage(cli, "'%s' is not a node name", argv[optind]);
    q.node = argv[optind];
    rc = PL_EXIT_ERROR;
    if (!(conn = pl_conn_open(&cli->find, PL_CONN_WRITE, &err))
        || !(res = pl_conn_cordon(conn, &q, &err))) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    if (cli->json)
        pl_out_json(res);
    else if (json_is_string(json_object_get(res, "cordon")))
        printf("%s cordoned: %s\n", q.node, pl_out_jstr(res, "cordon"));
    else if (json_is_string(json_object_get(res, "was")))
        printf("%s uncordoned (was: %s)\n", q.node, pl_out_jstr(res, "was"));
    else
        printf("%s was not cordoned\n", q.node);
    rc = PL_EXIT_OK;
done:
    json_decref(res);
    pl_conn_free(conn);
    return rc;
}

int pl_cmd_cordon(struct pl_cli *cli, int argc, char **argv)
{
    return cordon(cli, argc, argv, false);
}

int pl_cmd_uncordon(struct pl_cli *cli, int argc, char **argv)
{
    return cordon(cli, argc, argv, true);
}
