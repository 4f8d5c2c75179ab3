/* client/up_wait.c - pilot up --wait: until every agent has registered */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "client/conn.h"
#include "client/output.h"
#include "client/up_private.h"
#include "proto/strv.h"

#define SLURM_EVERY 5       /* ask Slurm every 5th look (1 s) */
#define STATUS_MS 2000      /* a status request while waiting */

/* Agents up in a status object. */
static long count_up(const json_t *status)
{
    const json_t *n;
    long up = 0;
    size_t i;

    json_array_foreach(json_object_get(status, "nodes"), i, n) {
        const char *st = pl_out_jstr(n, "state");
        if (st && !strcmp(st, "up"))
            up++;
    }
    return up;
}

static void draw(const struct pl_pilot *p, bool connected, bool slurm,
                 const struct pl_slurm_job *j, long up, long expected,
                 double el)
{
    char line[200];

    if (connected)
        snprintf(line, sizeof(line), "pilot %s: %ld/%ld agents %.1fs", p->id,
                 up, expected, el);
    else if (slurm && strcmp(j->state_name, "RUNNING") != 0)
        snprintf(line, sizeof(line), "pilot %s: waiting for Slurm (job %ld "
                 "%s%s%s) %.1fs", p->id, p->info.job, j->state_name,
                 j->reason_name[0] ? ": " : "", j->reason_name, el);
    else
        snprintf(line, sizeof(line), "pilot %s: waiting for pilotd %.1fs",
                 p->id, el);
    pl_out_progress(stderr, line);
}

/* The last "pilotd: error: ..." line of 'path' (the batch script's or
 * pilotd's output), without its newline, into 'buf'; "" if none.  What
 * stopped pilotd, said where the user looks first. */
static void last_error(const char *path, char *buf, size_t len)
{
    char line[1024];
    FILE *fp = fopen(path, "r");

    buf[0] = '\0';
    if (!fp)
        return;
    while (fgets(line, sizeof(line), fp))
        if (!strncmp(line, "pilotd: error: ", 15)) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(buf, len, "%s", line);
        }
    fclose(fp);
}

int pl_up_local_ready(struct pl_pilot *p, pid_t pid, double limit)
{
    double t0 = pl_mono();
    char why[160], log[PL_PATH_MAX + 64], said[1024];

    pl_pilot_log_path(p, log, sizeof(log));
    while (pl_endpoint_read(p->dir, &p->ep, NULL) < 0) {
        if (pl_up_local_died(pid, why, sizeof(why))) {
            last_error(log, said, sizeof(said));
            pl_cli_error("pilot %s: %s%s%s; see %s", p->id, why,
                         said[0] ? ": " : "", said, log);
            return PL_EXIT_ERROR;
        }
        if (pl_mono() - t0 >= limit) {
            pl_cli_say("pilot %s: pilotd (pid %ld) has written no endpoint "
                       "after %.0f s; see %s", p->id, (long)pid, limit, log);
            return PL_EXIT_OK;
        }
        usleep(10000);
    }
    p->has_ep = true;
    return PL_EXIT_OK;
}

int pl_up_wait(struct pl_cli *cli, struct pl_pilot *p, pid_t pid,
               double limit, double t0)
{
    struct pl_conn *conn = NULL;
    struct pl_slurm_job j = { .state_name = "PENDING" };
    struct pl_error err;
    bool tty = isatty(STDERR_FILENO), slurm = pid <= 0;
    long expected = p->info.nodes > 0 ? p->info.nodes : 1, up = 0;
    char why[160], log[PL_PATH_MAX + 64], d[32];
    int rc = PL_EXIT_ERROR;

    pl_pilot_log_path(p, log, sizeof(log));
    for (unsigned long tick = 0;; tick++) {
        double el = pl_mono() - t0;
        if (!conn && pl_endpoint_read(p->dir, &p->ep, NULL) == 0) {
            p->has_ep = true;
            if (!(conn = pl_conn_attach(&cli->find, p, &err))) {
                pl_cli_error("%s", err.text);
                goto done;
            }
        }
        if (conn) {
            json_t *st;
            double left = (limit - el) * 1000;
            conn->timeout_ms = left >= STATUS_MS ? STATUS_MS
                               : left < 1        ? 1
                                                 : (int)left;
            if ((st = pl_conn_status(conn, &err))) {
                up = count_up(st);
                /* pilotd knows best (--local --agents 0 expects none) */
                json_t *e = json_object_get(st, "agents_expected");
                if (json_is_integer(e) && json_integer_value(e) >= 0)
                    expected = (long)json_integer_value(e);
                json_decref(st);
            }
            else if (errno == EACCES || errno == EPROTO) {
                /* refused, or not our pilotd: waiting will not help */
                if (tty)
                    pl_out_progress_clear(stderr);
                pl_cli_error("pilot %s: %s", p->id, err.text);
                goto done;
            }
            if (up >= expected)
                break;
        }
        if (slurm ? tick % SLURM_EVERY == 0
                        && pl_up_job_died(cli, p, &j, why, sizeof(why))
                  : pl_up_local_died(pid, why, sizeof(why))) {
            char said[1024];
            if (tty)
                pl_out_progress_clear(stderr);
            last_error(log, said, sizeof(said));
            pl_cli_error("pilot %s: %s%s%s; see %s", p->id, why,
                         said[0] ? ": " : "", said, log);
            goto done;
        }
        el = pl_mono() - t0;
        if (el >= limit) {
            if (tty)
                pl_out_progress_clear(stderr);
            if (slurm || conn)
                pl_cli_say("pilot %s: not up after %s (%ld/%ld agents%s%s); "
                           "it stays: 'pilot down --pilot %s' ends it",
                           p->id, pl_out_duration(limit, d, sizeof(d)), up,
                           expected, slurm ? ", Slurm job " : "",
                           slurm ? j.state_name : "", p->id);
            else
                pl_cli_say("pilot %s: not up after %s: pilotd (pid %ld) has "
                           "written no endpoint yet; it stays ('kill %ld' "
                           "ends it; see %s)", p->id,
                           pl_out_duration(limit, d, sizeof(d)), (long)pid,
                           (long)pid, log);
            rc = PL_EXIT_USAGE; /* 2: the wait timed out */
            goto done;
        }
        if (tty)
            draw(p, conn != NULL, slurm, &j, up, expected, el);
        pl_cli_sleep(PL_CLI_POLL);
    }
    if (tty)
        pl_out_progress_clear(stderr);
    pl_cli_say("pilot %s up: %ld agent%s in %.1f s", p->id, up,
               up == 1 ? "" : "s", pl_mono() - t0);
    rc = PL_EXIT_OK;
done:
    pl_conn_free(conn);
    return rc;
}
