/* client/cmd_state.c - pilot state: running, success or failed, per task */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/cli.h"
#include "client/conn.h"
#include "client/output.h"

static const char help[] =
    "usage: pilot state ID...\n"
    "\n"
    "Print one word a line for each task, in the order given: 'running'\n"
    "(waiting, queued, assigned or running), 'success' (done) or\n"
    "'failed' (failed, canceled or timeout): the words a workflow\n"
    "manager's status script prints (Snakemake's --cluster-status).  An\n"
    "array's id means all its tasks: failed as soon as one has failed,\n"
    "else running while one has not ended, else success.  ID.N is\n"
    "element N of array ID.  On a pilot that is down, its last recorded\n"
    "state (a task it left unended stays 'running').  If any ID is\n"
    "unknown, nothing is printed and the exit status is 1.\n"
    "\n"
    "options:\n"
    "  --pilot ID   the pilot the tasks belong to (saves looking for it)\n"
    "  --json       print {\"states\": [{\"task\": ID, \"state\": WORD,\n"
    "               \"counts\": {...}}, ...]}, counts by task state\n"
    "  -h, --help   this help\n"
    "\n"
    "examples:\n"
    "  pilot state 12\n"
    "  pilot state 40 40.7      # array 40 as a whole, then its element 7\n";

/* The word for a counts object (pl_conn_counts()) of one id. */
static const char *word(const json_t *counts)
{
    long long bad = pl_out_jint(counts, "failed", 0)
                    + pl_out_jint(counts, "canceled", 0)
                    + pl_out_jint(counts, "timeout", 0);
    long long done = pl_out_jint(counts, "done", 0);

    if (bad > 0)
        return "failed";
    if (done < pl_out_jint(counts, "total", 0))
        return "running";
    return "success";
}

/* The counts of one selection; on a pilot that went down since the
 * connection opened, from what it recorded.  NULL after printing the
 * error. */
static json_t *counts_of(struct pl_conn *conn, const struct pl_sel_req *sel,
                         const char *arg)
{
    struct pl_error err;
    json_t *c;

    if (!(c = pl_conn_counts(conn, sel, &err))
        && (!pl_conn_recheck(conn) || !conn->db
            || !(c = pl_conn_counts(conn, sel, &err)))) {
        pl_cli_error("%s", err.text);
        return NULL;
    }
    if (json_array_size(json_object_get(c, "unknown")) > 0
        || pl_out_jint(c, "total", 0) == 0) {
        pl_cli_error("no task %s", arg);
        json_decref(c);
        return NULL;
    }
    return c;
}

int pl_cmd_state(struct pl_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = { PL_CLI_COMMON_OPTS, { 0 } };
    struct pl_error err;
    struct pl_conn *conn = NULL;
    struct pl_sel_req *sels = NULL;
    json_t *out = NULL;
    int c, n, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1)
        if (pl_cli_opt(cli, c, argv, help, &rc) < 0)
            return rc;
    if (optind >= argc)
        return pl_cli_usage(cli, "no task ids given");
    n = argc - optind;
    if (n > PL_REQ_MAX_IDS)
        return pl_cli_usage(cli, "more than %d ids at once", PL_REQ_MAX_IDS);
    rc = PL_EXIT_ERROR;
    if (!(sels = calloc((size_t)n, sizeof(*sels))) || !(out = json_array())) {
        pl_cli_error("out of memory");
        goto done;
    }
    /* one selection per id, each counted on its own: an id's word is
     * its own, not its neighbours' (a count is one indexed lookup, an
     * array's one query: pl_query_counts()) */
    for (int i = 0; i < n; i++)
        if (pl_parse_sel(1, argv + optind + i, &sels[i], &err) < 0) {
            rc = pl_cli_usage(cli, "%s", err.text);
            goto done;
        }
    if (!(conn = pl_conn_open(&cli->find, PL_CONN_READ, &err))) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        const char *arg = argv[optind + i];
        json_t *counts = counts_of(conn, &sels[i], arg);
        if (!counts)
            goto done;
        json_object_del(counts, "unknown");
        if (json_array_append_new(out, json_pack("{s:s, s:s, s:o}", "task",
                                                 arg, "state", word(counts),
                                                 "counts", counts))
            < 0) {
            pl_cli_error("out of memory");
            goto done;
        }
    }
    if (cli->json) {
        json_t *o = json_pack("{s:O}", "states", out);
        pl_out_json(o);
        json_decref(o);
    }
    else {
        size_t i;
        json_t *s;
        json_array_foreach(out, i, s)
            printf("%s\n", pl_out_jstr(s, "state"));
    }
    rc = PL_EXIT_OK;
done:
    json_decref(out);
    pl_conn_free(conn);
    for (int i = 0; sels && i < n; i++)
        pl_sel_req_clear(&sels[i]);
    free(sels);
    return rc;
}
