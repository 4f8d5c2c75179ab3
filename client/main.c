/* client/main.c - pilot: the command line of the pilot-job system */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "client/clean.h"
#include "client/cli.h"
#include "proto/msg.h"

struct cmd {
    const char *name;
    int (*run)(struct pl_cli *cli, int argc, char **argv);
    const char *summary;
};

static const struct cmd cmds[] = {
    { "up", pl_cmd_up, "start a pilot: a Slurm job, or --local here" },
    { "submit", pl_cmd_submit, "submit a task; prints its id" },
    { "ls", pl_cmd_ls, "list tasks" },
    { "show", pl_cmd_show, "one task: spec, state, node, times, events" },
    { "result", pl_cmd_result, "a Python call's pickled result" },
    { "wait", pl_cmd_wait, "wait until tasks end, with a progress bar" },
    { "cancel", pl_cmd_cancel, "cancel tasks" },
    { "state", pl_cmd_state,
      "running, success or failed per task (for workflow managers)" },
    { "logs", pl_cmd_logs, "a task's output; -f follows it" },
    { "status", pl_cmd_status,
      "the pilot: nodes, cores and GPUs busy, tasks by state" },
    { "top", pl_cmd_top, "a live view of the nodes, their tasks, the queue" },
    { "explain", pl_cmd_explain, "why a task does not run yet" },
    { "down", pl_cmd_down, "stop the pilot; its state stays readable" },
    { "pilots", pl_cmd_pilots, "all pilots under PILOT_HOME" },
    { "keys", pl_cmd_keys, "who may use the pilot: list, add, revoke keys" },
    { "pool", pl_cmd_pool,
      "MPI worker pools for function tasks: start, ls, stop" },
    { "vet", pl_cmd_vet, "run the nodes' checks again; print the results" },
    { "cordon", pl_cmd_cordon, "place nothing new on a node" },
    { "uncordon", pl_cmd_uncordon, "place tasks on a cordoned node again" },
    { "grow", pl_cmd_grow, "add nodes: a Slurm job of agents joins the pilot" },
    { "shrink", pl_cmd_shrink, "release idle allocations (or one)" },
    { "report", pl_cmd_report,
      "a page of what ran: timeline, histograms, failures" },
    { NULL, NULL, NULL },
};

static void usage(FILE *fp)
{
    fprintf(fp,
            "usage: pilot [--pilot ID] [--json] COMMAND [ARGS...]\n"
            "\n"
            "Run many tasks in one Slurm allocation (a pilot).\n"
            "\n"
            "commands:\n");
    for (const struct cmd *c = cmds; c->name; c++)
        fprintf(fp, "  %-8s %s\n", c->name, c->summary);
    fprintf(fp,
            "\n"
            "options (before or after the command):\n"
            "  --pilot ID   the pilot to use (default: $PILOT_ID, else the\n"
            "               one running under $PILOT_HOME, default\n"
            "               ~/.pilot)\n"
            "  --json       print data as JSON\n"
            "  -h, --help   help; 'pilot COMMAND --help' for a command's\n"
            "  --version    print the version\n"
            "\n"
            "environment: PILOT_HOME, PILOT_ID, PILOT_TIMEOUT (seconds a\n"
            "request may take, default 10), PILOT_BIN (where pilotd lives),\n"
            "PILOT_KEYS (a directory with client.key and server.pub to use\n"
            "instead of the pilot's keys/; files and directory must be\n"
            "private: 0600 and 0700)\n"
            "\n"
            "exit status: 0 ok, 1 error, 2 usage error ('pilot wait --help'\n"
            "for its own)\n"
            "\n"
            "example:\n"
            "  pilot up --nodes 4 --time 30:00 --wait\n"
            "  pilot submit -- hostname\n"
            "  pilot wait --all && pilot down\n");
}

static const struct cmd *find(const char *name)
{
    for (const struct cmd *c = cmds; c->name; c++)
        if (!strcmp(c->name, name))
            return c;
    return NULL;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = { PL_CLI_COMMON_OPTS, { 0 } };
    struct pl_cli cli;
    struct pl_error err;
    const struct cmd *cmd;
    int c, rc;

    if (pl_cli_init(&cli, &err) < 0)
        return pl_cli_error("%s", err.text);
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
        switch (c) {
        case 'h':
            usage(stdout);
            return PL_EXIT_OK;
        default:
            if (pl_cli_opt(&cli, c, argv, "", &rc) < 0)
                return rc;
            break;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return PL_EXIT_USAGE;
    }
    if (!strcmp(argv[optind], "help")) {
        /* 'pilot help CMD' is 'pilot CMD --help' */
        if (optind + 1 >= argc) {
            usage(stdout);
            return PL_EXIT_OK;
        }
        optind++;
        if (!(cmd = find(argv[optind])))
            return pl_cli_usage(&cli, "unknown command '%s'", argv[optind]);
        char *hargv[] = { argv[optind], (char *)"--help", NULL };
        cli.cmd = cmd->name;
        optind = 0;
        return cmd->run(&cli, 2, hargv);
    }
    if (!(cmd = find(argv[optind])))
        return pl_cli_usage(&cli, "unknown command '%s'", argv[optind]);
    cli.cmd = cmd->name;
    argc -= optind;
    argv += optind;
    optind = 0; /* N.B. 0, not 1: GNU getopt starts over, '+' included */
    /* what people read passes through the escapes of control characters
     * (client/clean.h); 'logs' prints the task's own bytes */
    FILE *orig = NULL;
    if (strcmp(cmd->name, "logs") && !(orig = pl_clean_stdout()))
        return pl_cli_error("cannot set up the output: %s", strerror(errno));
    rc = cmd->run(&cli, argc, argv);
    pl_cli_fini(&cli);
    if (pl_clean_stdout_close(orig) == EOF && rc == PL_EXIT_OK)
        rc = pl_cli_error("cannot write the output");
    return rc;
}
