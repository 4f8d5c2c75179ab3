/* client/cmd_explain.c - pilot explain: why a task does not run yet */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "client/cli.h"
#include "client/conn.h"
#include "client/output.h"

static const char help[] =
    "usage: pilot explain [--json] ID\n"
    "\n"
    "Say why task ID does not run yet, as the scheduler sees it: the\n"
    "dependencies it still waits for, or each node it cannot go on and\n"
    "why (down, cordoned, too few free cores or GPUs, not idle for an\n"
    "exclusive task, reserved for another task against starvation), a\n"
    "timeout longer than the walltime left, a gang that needs more nodes\n"
    "than have room; or that it is next.  For a task that runs or has\n"
    "ended: where, and how it ended.  ID may be an array's element (40.3).\n"
    "On a pilot that is down, only the state it last recorded.\n"
    "\n"
    "options:\n"
    "  --pilot ID   the pilot to ask\n"
    "  --json       print the explanation as JSON (docs/protocol.md)\n"
    "  -h, --help   this help\n"
    "\n"
    "example:\n"
    "  pilot explain 12\n";

/* Each node, and why the task cannot go there:
 *   n1 (up): 2/8 cores free, 0/0 GPUs free
 *     2 of 8 cores free, a rank needs 4 */
static void print_nodes(const json_t *nodes)
{
    const json_t *n, *r;
    size_t i, j;

    if (json_array_size(nodes))
        printf("nodes:\n");
    json_array_foreach(nodes, i, n) {
        const json_t *reasons = json_object_get(n, "reasons");
        printf("  %s (%s): %lld/%lld cores free, %lld/%lld GPUs free",
               pl_out_jstr(n, "name"), pl_out_jstr(n, "state"),
               pl_out_jcount(n, "free_cores"), pl_out_jcount(n, "cores"),
               pl_out_jcount(n, "free_gpus"), pl_out_jcount(n, "gpus"));
        if (!json_array_size(reasons)) {
            long long room = pl_out_jcount(n, "room");
            printf(": room for %lld rank%s", room, room == 1 ? "" : "s");
        }
        putchar('\n');
        json_array_foreach(reasons, j, r)
            printf("    %s\n", pl_out_jstr(r, "text"));
    }
}

static void print_explain(const json_t *e)
{
    const char *name = pl_out_jstr(e, "name");
    const json_t *needs = json_object_get(e, "needs");
    const json_t *ahead = json_object_get(e, "ahead");
    const json_t *resv = json_object_get(e, "reserved_for");
    double left = pl_out_jreal(e, "walltime_left", NAN);
    double timeout = pl_out_jreal(needs, "timeout", 0);
    char d[32];

    printf("task %lld", pl_out_jint(e, "id", 0));
    if (name)
        printf(" (%s)", name);
    printf(" is %s: %s\n", pl_out_jstr(e, "state"), pl_out_jstr(e, "summary"));
    if (needs) {
        printf("needs: %s", pl_out_jstr(needs, "text"));
        if (timeout > 0)
            printf("; timeout %s", pl_out_duration(timeout, d, sizeof(d)));
        putchar('\n');
    }
    if (json_is_integer(ahead))
        printf("queue: %lld task%s ahead of it", json_integer_value(ahead),
               json_integer_value(ahead) == 1 ? "" : "s");
    if (json_is_integer(ahead) && json_is_integer(resv))
        printf("; task %lld holds the reservation",
               json_integer_value(resv));
    if (json_is_integer(ahead) && !isnan(left))
        printf("; walltime left %s", pl_out_duration(left, d, sizeof(d)));
    if (json_is_integer(ahead))
        putchar('\n');
    print_nodes(json_object_get(e, "nodes"));
}

/* A pilot that is down: what its state database last recorded; with
 * --json as an explain object of code "down" (scripts get an object on
 * a pilot that is down too, not an error). */
static int explain_down(struct pl_conn *conn, const struct pl_sel_req *sel,
                        bool json)
{
    struct pl_error err;
    json_t *task = pl_conn_show(conn, sel, &err), *e;
    const char *st, *name;
    char summary[200];

    if (!task)
        return pl_cli_error("%s", err.text);
    st = pl_out_jstr(task, "state");
    name = pl_out_jstr(task, "name");
    snprintf(summary, sizeof(summary), "it was %s when the pilot stopped%s",
             st ? st : "unknown",
             st && (!strcmp(st, "queued") || !strcmp(st, "waiting"))
                 ? ": it runs when the pilot is resumed (pilot up --resume)"
                 : "");
    if (json) {
        e = json_pack("{s:O, s:O?, s:s, s:s, s:s}", "id",
                      json_object_get(task, "id"), "name",
                      json_object_get(task, "name"), "state",
                      st ? st : "unknown", "code", "down", "summary",
                      summary);
        json_decref(task);
        if (!e)
            return pl_cli_error("out of memory");
        pl_out_json(e);
        json_decref(e);
        return PL_EXIT_OK;
    }
    printf("task %lld", pl_out_jint(task, "id", 0));
    if (name)
        printf(" (%s)", name);
    printf(" was%s\n", summary + strlen("it was"));
    json_decref(task);
    return PL_EXIT_OK;
}

int pl_cmd_explain(struct pl_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = { PL_CLI_COMMON_OPTS, { 0 } };
    struct pl_error err;
    struct pl_conn *conn = NULL;
    json_t *e = NULL;
    struct pl_sel_req sel = { 0 };
    int c, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1)
        if (pl_cli_opt(cli, c, argv, help, &rc) < 0)
            return rc;
    if (optind >= argc)
        return pl_cli_usage(cli, "no task id given");
    if (optind + 1 < argc)
        return pl_cli_usage(cli, "one task id at a time");
    if (!(conn = pl_conn_open_sel(cli, PL_CONN_READ, 1, argv + optind, &sel,
                                  &rc)))
        goto done;
    if (conn->db) {
        rc = explain_down(conn, &sel, cli->json);
        goto done;
    }
    rc = PL_EXIT_ERROR;
    if (!(e = pl_conn_explain(conn, &sel, &err))) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    if (cli->json)
        pl_out_json(e);
    else
        print_explain(e);
    rc = PL_EXIT_OK;
done:
    json_decref(e);
    pl_conn_free(conn);
    pl_sel_req_clear(&sel);
    return rc;
}
