/* client/cli.h - the pilot CLI: global options, usage errors, commands */
#ifndef PL_CLIENT_CLI_H
#define PL_CLIENT_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "client/parse.h"
#include "client/pilot.h"
#include "proto/clientmsg.h"
#include "proto/error.h"


/* Exit codes of every command ('wait' adds its own, see cmd_wait.c). */
enum pl_exit {
    PL_EXIT_OK = 0,
    PL_EXIT_ERROR = 1, /* "pilot: error: ..." on stderr */
    PL_EXIT_USAGE = 2, /* the same, plus "try 'pilot CMD --help'" */
};

/* Long-option values shared by all commands (above any char value). */
enum pl_cli_opt {
    PL_OPT_PILOT = 0x100,
    PL_OPT_JSON,
    PL_OPT_VERSION,
    PL_OPT_CMD, /* first value free for a command's own long options */
};

/* The options every command accepts; end a command's longopts with
 * PL_CLI_COMMON_OPTS, { 0 } */
#define PL_CLI_COMMON_OPTS                                                     \
    { "pilot", required_argument, NULL, PL_OPT_PILOT },                        \
    { "json", no_argument, NULL, PL_OPT_JSON },                                \
    { "help", no_argument, NULL, 'h' },                                        \
    { "version", no_argument, NULL, PL_OPT_VERSION }

/* What one invocation knows: global options and lazily made helpers. */
struct pl_cli {
    const char *cmd;         /* the subcommand's name, or NULL */
    struct pl_find find;     /* which pilot, and how to reach it: --pilot
                                (find.pilot), the environment's */
    bool json;               /* --json */
};

/* Fill 'cli' from the environment (pl_find_init()); notes of the
 * connection go to stderr (pl_cli_note()).  -1 with errp set if
 * PILOT_TIMEOUT is not a positive number of seconds. */
int pl_cli_init(struct pl_cli *cli, struct pl_error *errp);
void pl_cli_fini(struct pl_cli *cli);

/* The libslurm session, started on first use (slurm_init() reads the
 * Slurm configuration, so it must not run for local pilots).  Borrowed;
 * NULL with errp set. */
struct pl_slurm *pl_cli_slurm(struct pl_cli *cli, struct pl_error *errp);

/* Handle an option every command shares ('c' from getopt_long()), and
 * the errors getopt reports ('?', ':').  'help' is the command's help
 * text.  Returns 1 if handled, 0 if 'c' is the command's own, or -1 if
 * the command must return *exitp (help or version printed: 0; bad
 * option: usage error printed, 2). */
int pl_cli_opt(struct pl_cli *cli, int c, char **argv, const char *help,
               int *exitp);

/* Print "pilot: error: CMD: MSG" and "try 'pilot CMD --help'" on stderr.
 * Returns PL_EXIT_USAGE. */
int pl_cli_usage(const struct pl_cli *cli, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Print "pilot: error: MSG" on stderr.  Returns PL_EXIT_ERROR. */
int pl_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Print "pilot: note: MSG" on stderr: something the person should know
 * about the output (it is not live, a task has not started). */
void pl_cli_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Print "MSG" on stderr: progress a person reads, not data. */
void pl_cli_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Sleep 'secs' seconds (>= 0), the whole of them: a signal that
 * interrupts it is not an end. */
void pl_cli_sleep(double secs);

/* Seconds between two looks when a command polls: a task's state, the
 * pilot going down or coming up. */
#define PL_CLI_POLL 0.2

/* For a command that names tasks: parse its arguments argv[0..argc-1]
 * into 'sel' (pl_parse_sel(); pl_sel_req_clear() it), then open the
 * pilot for 'need' (pl_conn_open()).  On failure the error is printed
 * (a bad id is a usage error) and NULL returned with *exitp its exit
 * code: PL_EXIT_USAGE or PL_EXIT_ERROR. */
struct pl_conn;
struct pl_conn *pl_conn_open_sel(struct pl_cli *cli, int need, int argc,
                                 char **argv, struct pl_sel_req *sel,
                                 int *exitp);

/* The commands: argv[0] is the command's name; each returns an exit
 * code. */
int pl_cmd_up(struct pl_cli *cli, int argc, char **argv);
int pl_cmd_submit(struct pl_cli *cli, int argc, char **argv);
int pl_cmd_ls(struct pl_cli *cli, int argc, char **argv);
int pl_cmd_show(struct pl_cli *cli, int argc, char **argv);
int pl_cmd_result(struct pl_cli *cli, int argc, char **argv);
int pl_cmd_wait(struct pl_cli *cli, int argc, char **argv);
int pl_cmd_cancel(struct pl_cli *cli, int argc, char **argv);
int pl_cmd_state(struct pl_cli *cli, int argc, char **argv);
int pl_cmd_logs(struct pl_cli *cli, int argc, char **argv);
int pl_cmd_status(struct pl_cli *cli, int argc, char **argv);
int pl_cmd_down(struct pl_cli *cli, int argc, char **argv);
int pl_cmd_pilots(struct pl_cli *cli, int argc, char **argv);
int pl_cmd_keys(struct pl_cli *cli, int argc, char **argv);
int pl_cmd_grow(struct pl_cli *cli, int argc, char **argv);
int pl_cmd_shrink(struct pl_cli *cli, int argc, char **argv);
/* The allocations of 'allocs' (status's, or ALLOCS'), as a table. */
void pl_allocs_print(const json_t *allocs);
int pl_cmd_pool(struct pl_cli *cli, int argc, char **argv);
int pl_cmd_top(struct pl_cli *cli, int argc, char **argv);
int pl_cmd_explain(struct pl_cli *cli, int argc, char **argv);
int pl_cmd_vet(struct pl_cli *cli, int argc, char **argv);
int pl_cmd_cordon(struct pl_cli *cli, int argc, char **argv);
int pl_cmd_uncordon(struct pl_cli *cli, int argc, char **argv);
int pl_cmd_report(struct pl_cli *cli, int argc, char **argv);
/* Wait until pool 'name' of the pilot of 'conn' is ready (every worker
 * said HELLO), at most 'secs', with a progress line on a terminal;
 * *poolp: the pool as 'pool ls' gives it (json_decref()).  0, or the
 * exit code after printing the error. */
int pl_pool_wait_ready(struct pl_conn *conn, const char *name, double secs,
                       json_t **poolp);

#endif /* !PL_CLIENT_CLI_H */
