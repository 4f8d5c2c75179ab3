/* client/cli.c - the pilot CLI: global options, usage errors, numbers */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/clean.h"
#include "client/cli.h"
#include "client/conn.h"
#include "client/slurm.h"
#include "proto/msg.h"
#include "proto/spec.h"

/* A note of the connection (client/conn.c): on stderr. */
static void note_cb(const char *text, void *arg)
{
    (void)arg;
    pl_cli_note("%s", text);
}

int pl_cli_init(struct pl_cli *cli, struct pl_error *errp)
{
    memset(cli, 0, sizeof(*cli));
    if (pl_find_init(&cli->find, errp) < 0)
        return -1;
    cli->find.note = note_cb;
    return 0;
}

void pl_cli_fini(struct pl_cli *cli)
{
    pl_find_fini(&cli->find);
}

struct pl_slurm *pl_cli_slurm(struct pl_cli *cli, struct pl_error *errp)
{
    return pl_find_slurm(&cli->find, errp);
}

/* Messages name what others wrote (task names, pilotd's error texts):
 * their control characters are escaped (client/clean.h). */
static void vmsg(const char *kind, const char *cmd, const char *fmt,
                 va_list ap) __attribute__((format(printf, 3, 0)));
static void vmsg(const char *kind, const char *cmd, const char *fmt,
                 va_list ap)
{
    char text[1024];
    char *clean;

    vsnprintf(text, sizeof(text), fmt, ap);
    clean = pl_clean_str(text);
    fprintf(stderr, "pilot: %s%s%s%s\n", kind, cmd ? cmd : "", cmd ? ": " : "",
            clean ? clean : text);
    free(clean);
}

int pl_cli_usage(const struct pl_cli *cli, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vmsg("error: ", cli->cmd, fmt, ap);
    va_end(ap);
    if (cli->cmd)
        fprintf(stderr, "try 'pilot %s --help'\n", cli->cmd);
    else
        fprintf(stderr, "try 'pilot --help'\n");
    return PL_EXIT_USAGE;
}

int pl_cli_error(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vmsg("error: ", NULL, fmt, ap);
    va_end(ap);
    return PL_EXIT_ERROR;
}

void pl_cli_note(const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vmsg("note: ", NULL, fmt, ap);
    va_end(ap);
}

void pl_cli_say(const char *fmt, ...)
{
    va_list ap;
    char *text = NULL, *clean = NULL;
    int n;

    va_start(ap, fmt);
    n = vasprintf(&text, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    clean = pl_clean_str(text);
    fprintf(stderr, "%s\n", clean ? clean : text);
    free(clean);
    free(text);
}

void pl_cli_sleep(double secs)
{
    struct timespec ts = { (time_t)secs,
                           (long)((secs - (double)(time_t)secs) * 1e9) };

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

int pl_cli_opt(struct pl_cli *cli, int c, char **argv, const char *help,
               int *exitp)
{
    const char *bad = argv[optind - 1];

    switch (c) {
    case PL_OPT_PILOT:
        cli->find.pilot = optarg;
        return 1;
    case PL_OPT_JSON:
        cli->json = true;
        return 1;
    case 'h':
        fputs(help, stdout);
        *exitp = PL_EXIT_OK;
        return -1;
    case PL_OPT_VERSION:
        printf("pilot %s (protocol %d)\n", PL_VERSION, PL_PROTO_VERSION);
        *exitp = PL_EXIT_OK;
        return -1;
    case '?':
        /* N.B. getopt leaves optopt 0 for an unknown long option */
        if (optopt && strncmp(bad, "--", 2) != 0)
            *exitp = pl_cli_usage(cli, "unknown option '-%c'", optopt);
        else
            *exitp = pl_cli_usage(cli, "unknown option '%s'", bad);
        return -1;
    case ':':
        if (strncmp(bad, "--", 2) == 0)
            *exitp = pl_cli_usage(cli, "option '%s' needs a value", bad);
        else
            *exitp = pl_cli_usage(cli, "option '-%c' needs a value", optopt);
        return -1;
    default:
        return 0;
    }
}

struct pl_conn *pl_conn_open_sel(struct pl_cli *cli, int need, int argc,
                                 char **argv, struct pl_sel_req *sel,
                                 int *exitp)
{
    struct pl_error err;
    struct pl_conn *c;

    if (pl_parse_sel(argc, argv, sel, &err) < 0) {
        *exitp = pl_cli_usage(cli, "%s", err.text);
        return NULL;
    }
    if (!(c = pl_conn_open(&cli->find, need, &err)))
        *exitp = pl_cli_error("%s", err.text);
    return c;
}
