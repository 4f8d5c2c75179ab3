/* client/cmd_pilots.c - pilot pilots: every pilot under PILOT_HOME */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "client/cli.h"
#include "client/output.h"
#include "client/pilot.h"
#include "proto/msg.h"

static const char help[] =
    "usage: pilot pilots [--json]\n"
    "\n"
    "List the pilots under $PILOT_HOME (default ~/.pilot), newest first:\n"
    "ID MODE JOB STATE NODES CREATED.  STATE is starting (its Slurm job\n"
    "waits or starts), running, stale (it left an endpoint behind but is\n"
    "gone) or down.\n"
    "\n"
    "options:\n"
    "  --json       print an array of {id, mode, job, state, nodes,\n"
    "               created, dir}\n"
    "  -h, --help   this help\n"
    "\n"
    "example:\n"
    "  pilot pilots\n";

static json_t *pilot_json(const struct pl_pilot *p)
{
    return json_pack("{s:s, s:s, s:I, s:s, s:I, s:f, s:s, s:s?}", "id",
                     p->id, "mode", p->info.mode, "job",
                     (json_int_t)(p->info.job ? p->info.job : p->ep.job),
                     "state", pl_pilot_state_name(p->state), "nodes",
                     (json_int_t)p->info.nodes, "created", p->info.created,
                     "dir", p->dir, "endpoint",
                     p->has_ep ? p->ep.client : NULL);
}

static int add_row(struct pl_out_table *tab, const struct pl_pilot *p)
{
    char job[24], nodes[24], created[32];
    long jid = p->info.job ? p->info.job : p->ep.job;

    if (jid > 0)
        snprintf(job, sizeof(job), "%ld", jid);
    else
        snprintf(job, sizeof(job), "-");
    if (p->info.nodes > 0)
        snprintf(nodes, sizeof(nodes), "%ld", p->info.nodes);
    else
        snprintf(nodes, sizeof(nodes), "-");
    pl_out_time(p->info.created, false, created, sizeof(created));
    const char *cells[] = { p->id, p->info.mode, job,
                            pl_pilot_state_name(p->state), nodes, created };
    return pl_out_table_add(tab, cells);
}

int pl_cmd_pilots(struct pl_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = { PL_CLI_COMMON_OPTS, { 0 } };
    static const char *headers[] = { "ID", "MODE", "JOB", "STATE", "NODES",
                                     "CREATED" };
    struct pl_error err;
    struct pl_out_table *tab = NULL;
    char home[PL_PATH_MAX];
    char **ids = NULL;
    json_t *arr = NULL;
    int c, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1)
        if (pl_cli_opt(cli, c, argv, help, &rc) < 0)
            return rc;
    if (optind < argc)
        return pl_cli_usage(cli, "unexpected argument '%s'", argv[optind]);
    rc = PL_EXIT_ERROR;
    if (pl_home(home, sizeof(home), &err) < 0
        || !(ids = pl_pilotdir_list(home, &err))) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    if (!(arr = json_array()) || !(tab = pl_out_table_new(6, headers))) {
        pl_cli_error("out of memory");
        goto done;
    }
    for (size_t i = 0; ids[i]; i++) {
        struct pl_pilot p;
        if (pl_pilot_load(&cli->find, home, ids[i], &p, &err) < 0) {
            if (errno == ENOENT)
                continue; /* removed meanwhile */
            pl_cli_error("%s", err.text); /* refused: pilotdir.h */
            goto done;
        }
        if ((cli->json ? json_array_append_new(arr, pilot_json(&p))
                       : add_row(tab, &p)) < 0) {
            pl_cli_error("out of memory");
            goto done;
        }
    }
    if (cli->json)
        pl_out_json(arr);
    else
        pl_out_table_print(tab, stdout, PL_OUT_WIDTH);
    rc = PL_EXIT_OK;
done:
    pl_out_table_free(tab);
    json_decref(arr);
    pl_strv_free(ids);
    return rc;
}
