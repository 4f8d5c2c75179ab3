/* client/cmd_cancel.c - pilot cancel: stop tasks, queued or running */
#include <stdio.h>
#include <stdlib.h>

#include "client/cli.h"
#include "client/conn.h"
#include "client/output.h"

static const char help[] =
    "usage: pilot cancel ID...\n"
    "\n"
    "Cancel tasks.  A queued task never starts; a running one's whole\n"
    "process group gets SIGTERM, then SIGKILL.  Tasks that have already\n"
    "ended are left as they are.  An array's id means all its tasks,\n"
    "ID.N its element N.  If any ID is unknown, nothing is canceled.\n"
    "\n"
    "options:\n"
    "  --pilot ID   the pilot the tasks belong to\n"
    "  --json       print {\"canceled\": [IDS], \"final\": [IDS]}\n"
    "  -h, --help   this help\n"
    "\n"
    "examples:\n"
    "  pilot cancel 12 13\n"
    "  pilot cancel 40.7        # element 7 of array 40\n";

int pl_cmd_cancel(struct pl_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = { PL_CLI_COMMON_OPTS, { 0 } };
    struct pl_error err;
    struct pl_conn *conn = NULL;
    json_t *reply = NULL;
    struct pl_sel_req sel = { 0 };
    int c, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1)
        if (pl_cli_opt(cli, c, argv, help, &rc) < 0)
            return rc;
    if (optind >= argc)
        return pl_cli_usage(cli, "no task ids given");
    if (!(conn = pl_conn_open_sel(cli, PL_CONN_WRITE, argc - optind,
                                  argv + optind, &sel, &rc)))
        goto done;
    rc = PL_EXIT_ERROR;
    if (!(reply = pl_conn_cancel(conn, &sel, &err))) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    if (cli->json)
        pl_out_json(reply);
    else {
        size_t nc = json_array_size(json_object_get(reply, "canceled"));
        size_t nf = json_array_size(json_object_get(reply, "final"));
        printf("canceled %zu task%s", nc, nc == 1 ? "" : "s");
        if (nf > 0)
            printf(" (%zu %s already finished)", nf, nf == 1 ? "was" : "were");
        putchar('\n');
    }
    rc = PL_EXIT_OK;
done:
    json_decref(reply);
    pl_conn_free(conn);
    pl_sel_req_clear(&sel);
    return rc;
}
