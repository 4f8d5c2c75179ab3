/* client/cmd_down.c - pilot down: stop agents and pilotd, end the job */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "client/cli.h"
#include "client/conn.h"
#include "client/output.h"
#include "client/slurm.h"
#include "proto/strv.h"

static const char help[] =
    "usage: pilot down [--pilot ID]\n"
    "\n"
    "Stop the pilot: pilotd stops the agents (their tasks are killed)\n"
    "and exits, which ends its Slurm job.  If pilotd does not answer, or\n"
    "has not exited after 30 s, the Slurm job is canceled (a local\n"
    "pilotd is killed).  A pilot still waiting in the Slurm queue is\n"
    "canceled.  Its state stays readable: 'pilot status --pilot ID'.\n"
    "Only the pilot's own key may stop it: if pilotd refuses the key\n"
    "(another role, see 'pilot keys'), nothing is stopped or canceled.\n"
    "\n"
    "options:\n"
    "  --pilot ID   the pilot to stop (default: the one running)\n"
    "  --json       print {\"pilot\": ID, \"state\": \"down\"}\n"
    "  -h, --help   this help\n"
    "\n"
    "example:\n"
    "  pilot down --pilot p3\n";

#define STOP_WAIT 30.0       /* seconds pilotd has to exit */
#define KILL_WAIT 5.0        /* seconds between SIGTERM and SIGKILL */

static bool pid_alive(long pid)
{
    return pid > 0 && (kill((pid_t)pid, 0) == 0 || errno == EPERM);
}

static long job_of(const struct pl_pilot *p)
{
    return p->info.job ? p->info.job : p->ep.job;
}

/* Whether anything of the pilot still runs: its local pilotd, its Slurm
 * job.  An endpoint file alone does not count: a pilotd that crashed
 * leaves it behind. */
static bool still_up(struct pl_cli *cli, const struct pl_pilot *p, long pid)
{
    struct pl_slurm *s;
    struct pl_slurm_job j;

    if (pid_alive(pid))
        return true;
    if (job_of(p) <= 0 || strcmp(p->info.mode, "slurm"))
        return false;
    if (!(s = pl_cli_slurm(cli, NULL)) || pl_slurm_job(s, job_of(p), &j,
                                                       NULL) < 0)
        /* Slurm cannot tell: trust the endpoint pilotd removes on exit */
        return pl_pilot_has_endpoint(p->home, p->id);
    return pl_slurm_job_alive(&j);
}

/* Wait up to 'secs' for the pilot to be gone.  true if it is. */
static bool wait_gone(struct pl_cli *cli, const struct pl_pilot *p, long pid,
                      double secs)
{
    bool tty = isatty(STDERR_FILENO);
    double t0 = pl_mono();

    while (still_up(cli, p, pid)) {
        double el = pl_mono() - t0;
        if (el >= secs) {
            if (tty)
                pl_out_progress_clear(stderr);
            return false;
        }
        if (tty) {
            char line[128];
            snprintf(line, sizeof(line), "pilot %s: stopping %.1fs", p->id,
                     el);
            pl_out_progress(stderr, line);
        }
        pl_cli_sleep(PL_CLI_POLL);
    }
    if (tty)
        pl_out_progress_clear(stderr);
    return true;
}

/* Force the pilot down: cancel its Slurm job, or kill its local pilotd;
 * then remove the endpoint it left.  Says what it did in 'how'. */
static int force_down(struct pl_cli *cli, const struct pl_pilot *p, long pid,
                      char *how, size_t len, struct pl_error *errp)
{
    struct pl_slurm *s;

    if (!strcmp(p->info.mode, "slurm") && job_of(p) > 0) {
        if (!(s = pl_cli_slurm(cli, errp))
            || pl_slurm_cancel(s, job_of(p), errp) < 0)
            return -1;
        snprintf(how, len, "Slurm job %ld canceled", job_of(p));
        wait_gone(cli, p, 0, STOP_WAIT);
    }
    else if (pid_alive(pid)) {
        kill((pid_t)pid, SIGTERM);
        if (!wait_gone(cli, p, pid, KILL_WAIT))
            kill((pid_t)pid, SIGKILL);
        snprintf(how, len, "pilotd (pid %ld) killed", pid);
    }
    else
        snprintf(how, len, "nothing left running");
    if (pl_endpoint_remove(p->dir) < 0 && errno != ENOENT) {
        pl_errprintf(errp, "cannot remove %s/endpoint: %s", p->dir,
                     strerror(errno));
        return -1;
    }
    return 0;
}

static void say_down(struct pl_cli *cli, const struct pl_pilot *p,
                     const char *how)
{
    if (cli->json) {
        json_t *j = json_pack("{s:s, s:s, s:s?}", "pilot", p->id, "state",
                              "down", "detail", how);
        if (j)
            pl_out_json(j);
        json_decref(j);
    }
    else if (how)
        printf("pilot %s is down (%s)\n", p->id, how);
    else
        printf("pilot %s is down\n", p->id);
}

/* Stop a running pilot: ask pilotd, then make sure. */
static int stop(struct pl_cli *cli, struct pl_conn *conn)
{
    const struct pl_pilot *p = &conn->pilot;
    long pid = pl_pilot_pid_here(p);
    struct pl_error err, ferr;
    char how[200];
    if (pl_conn_shutdown(conn, &err) < 0) {
        /* pilotd answered no (a key that may not stop it): it is not
         * stuck, and is not to be stopped behind its back */
        if (errno == EACCES)
            return pl_cli_error("%s", err.text);
        /* pilotd is stuck or gone: end what holds the allocation */
        if (force_down(cli, p, pid, how, sizeof(how), &ferr) < 0)
            return pl_cli_error("%s; %s", err.text, ferr.text);
        char both[400];
        snprintf(both, sizeof(both), "pilotd did not answer: %s", how);
        say_down(cli, p, both);
        return PL_EXIT_OK;
    }
    if (!wait_gone(cli, p, pid, STOP_WAIT)) {
        if (force_down(cli, p, pid, how, sizeof(how), &ferr) < 0)
            return pl_cli_error("pilotd did not exit in %.0f s; %s",
                                STOP_WAIT, ferr.text);
        char both[400];
        snprintf(both, sizeof(both), "pilotd did not exit in %.0f s: %s",
                 STOP_WAIT, how);
        say_down(cli, p, both);
        return PL_EXIT_OK;
    }
    if (pl_endpoint_remove(p->dir) == 0) {
        /* gone, but it did not clean up after itself: it crashed */
        say_down(cli, p, "pilotd exited without removing its endpoint; "
                         "see its logs/");
        return PL_EXIT_OK;
    }
    say_down(cli, p, NULL);
    return PL_EXIT_OK;
}

int pl_cmd_down(struct pl_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = { PL_CLI_COMMON_OPTS, { 0 } };
    struct pl_error err;
    struct pl_conn *conn = NULL;
    const struct pl_pilot *p;
    char how[300];
    int c, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1)
        if (pl_cli_opt(cli, c, argv, help, &rc) < 0)
            return rc;
    if (optind < argc)
        return pl_cli_usage(cli, "unexpected argument '%s' (use --pilot ID)",
                            argv[optind]);
    if (!(conn = pl_conn_open(&cli->find, PL_CONN_STOP, &err)))
        return pl_cli_error("%s", err.text);
    p = &conn->pilot;
    switch (p->state) {
    case PL_PILOT_RUNNING:
        rc = stop(cli, conn);
        break;
    case PL_PILOT_STARTING:
        if (force_down(cli, p, 0, how, sizeof(how), &err) < 0) {
            rc = pl_cli_error("%s", err.text);
            break;
        }
        say_down(cli, p, how);
        rc = PL_EXIT_OK;
        break;
    case PL_PILOT_STALE:
        if (pl_endpoint_remove(p->dir) < 0 && errno != ENOENT) {
            rc = pl_cli_error("cannot remove %s/endpoint: %s", p->dir,
                              strerror(errno));
            break;
        }
        snprintf(how, sizeof(how), "it was stale: %s", p->why);
        say_down(cli, p, how);
        rc = PL_EXIT_OK;
        break;
    default:
        if (cli->json)
            say_down(cli, p, "already down");
        else
            printf("pilot %s is already down\n", p->id);
        rc = PL_EXIT_OK;
        break;
    }
    pl_conn_free(conn);
    return rc;
}
