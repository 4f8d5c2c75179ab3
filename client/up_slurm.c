/* client/up_slurm.c - pilot up: the pilot as a Slurm job (sbatch) */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "client/output.h"
#include "client/up_private.h"
#include "proto/sbatch.h"

#define MAX_PILOTD_RESTARTS 100 /* in one allocation */
#define DRAIN_BEFORE 120        /* s: Slurm signals the drain this early */

int pl_up_script(const struct pl_up_opts *o, const char *id,
                 const char *home, const char *dir, const char *bindir,
                 char *path, size_t len, struct pl_error *errp)
{
    char pilotd[PATH_MAX + 16];
    char *qhome = NULL, *qpilotd = NULL, *qdir = NULL;
    FILE *fp;

    snprintf(path, len, "%s/pilot.sbatch", dir);
    snprintf(pilotd, sizeof(pilotd), "%s/pilotd", bindir);
    if (!(fp = pl_sbatch_create(path, errp)))
        return -1;
    if (!(qhome = pl_out_shquote(home)) || !(qpilotd = pl_out_shquote(pilotd))
        || !(qdir = pl_out_shquote(dir))) {
        errno = ENOMEM;
        goto error;
    }
    fprintf(fp, "#!/bin/bash\n");
    fprintf(fp, "#SBATCH --job-name=pilot-%s\n", id);
    fprintf(fp, "#SBATCH --nodes=%llu\n", (unsigned long long)o->nodes);
    fprintf(fp, "#SBATCH --ntasks-per-node=1\n");
    /* whole nodes: otherwise Slurm accounts one CPU per node to the job
     * and may place other jobs beside the pilot's tasks */
    fprintf(fp, "#SBATCH --exclusive\n");
    fprintf(fp, "#SBATCH --time=%s\n", o->time ? o->time : PL_UP_DEFAULT_TIME);
    pl_sbatch_path(fp, "--output", dir, "/logs/slurm-%j.out");
    fprintf(fp, "#SBATCH --no-requeue\n");
    /* the drain: SIGTERM to this script, which passes it to pilotd */
    fprintf(fp, "#SBATCH --signal=B:TERM@%d\n", DRAIN_BEFORE);
    if (o->gpus_set)
        fprintf(fp, "#SBATCH --gres=gpu:%llu\n", (unsigned long long)o->gpus);
    if (o->partition)
        fprintf(fp, "#SBATCH --partition=%s\n", o->partition);
    if (o->account)
        fprintf(fp, "#SBATCH --account=%s\n", o->account);
    for (char **a = o->sbatch_args; *a; a++)
        fprintf(fp, "#SBATCH %s\n", *a);
    fprintf(fp, "# written by 'pilot up' for pilot %s\n", id);
    fprintf(fp, "export PILOT_HOME=%s\n", qhome);
    /* pilotd killed or crashed (a signal) while the allocation lives:
     * start it again on the same directory; it takes its agents back.
     * Slurm's SIGTERM before the end (--signal=B:) goes to this shell
     * only: pass it on (pilotd runs in the background so that the trap
     * runs at once) and do not restart what it stopped. */
    fprintf(fp, "restarts=0 drain=0 pid=\n");
    fprintf(fp, "trap 'drain=1; [ -n \"$pid\" ] && kill -TERM \"$pid\" "
                "2>/dev/null' TERM\n");
    fprintf(fp, "while :; do\n");
    char opts[256 + 8 * 96 + 272] = "";
    if (o->lost_after > 0)
        snprintf(opts, sizeof(opts), " --lost-after %g", o->lost_after);
    if (o->start_timeout >= 0)
        snprintf(opts + strlen(opts), sizeof(opts) - strlen(opts),
                 " --start-timeout %g", o->start_timeout);
    if (o->prefetch >= 0)
        snprintf(opts + strlen(opts), sizeof(opts) - strlen(opts),
                 " --prefetch %d", o->prefetch);
    if (o->bind) /* a name or address without blanks or quotes (cmd_up.c) */
        snprintf(opts + strlen(opts), sizeof(opts) - strlen(opts),
                 " --bind '%s'", o->bind);
    /* checked by pl_pool_spec_parse(): [A-Za-z0-9_.-:], nothing to quote */
    for (int i = 0; i < o->npools; i++)
        snprintf(opts + strlen(opts), sizeof(opts) - strlen(opts),
                 " --pool %s", o->pools[i]);
    if (o->metrics_port >= 0)
        snprintf(opts + strlen(opts), sizeof(opts) - strlen(opts),
                 " --metrics-port %d", o->metrics_port);
    if (o->metrics_interval > 0)
        snprintf(opts + strlen(opts), sizeof(opts) - strlen(opts),
                 " --metrics-interval %g", o->metrics_interval);
    /* checked by pl_grow_conf_parse(): [A-Za-z0-9_.,:=-], nothing to quote */
    if (o->grow)
        snprintf(opts + strlen(opts), sizeof(opts) - strlen(opts),
                 " --grow %s", o->grow);
    /* checked by cmd_up.c: a word and digits, nothing to quote */
    if (o->output)
        snprintf(opts + strlen(opts), sizeof(opts) - strlen(opts),
                 " --output %s", o->output);
    if (o->journal_size[0])
        snprintf(opts + strlen(opts), sizeof(opts) - strlen(opts),
                 " --journal-size %s", o->journal_size);
    char *qmfile = o->metrics_file ? pl_out_shquote(o->metrics_file) : NULL;
    if (o->metrics_file && !qmfile) {
        errno = ENOMEM;
        goto error;
    }
    fprintf(fp, "    %s --dir %s --drain-before %d%s%s%s &\n", qpilotd, qdir,
            DRAIN_BEFORE, opts, qmfile ? " --metrics-file " : "",
            qmfile ? qmfile : "");
    free(qmfile);
    fprintf(fp, "    pid=$!\n");
    fprintf(fp, "    while :; do\n");
    fprintf(fp, "        rc=0; wait \"$pid\" || rc=$?\n");
    fprintf(fp, "        kill -0 \"$pid\" 2>/dev/null || break\n");
    fprintf(fp, "    done\n");
    fprintf(fp, "    if [ \"$drain\" = 1 ] || [ \"$rc\" -lt 129 ] || "
                "[ \"$restarts\" -ge %d ]; then exit \"$rc\"; fi\n",
            MAX_PILOTD_RESTARTS);
    fprintf(fp, "    restarts=$((restarts + 1))\n");
    fprintf(fp, "    echo \"pilot.sbatch: pilotd died (status $rc): restart "
                "$restarts of %d\" >&2\n", MAX_PILOTD_RESTARTS);
    fprintf(fp, "    sleep 1\n");
    fprintf(fp, "done\n");
    free(qhome);
    free(qpilotd);
    free(qdir);
    return pl_sbatch_close(fp, path, false, errp);
error:
    free(qhome);
    free(qpilotd);
    free(qdir);
    return pl_sbatch_close(fp, path, true, errp);
}

/* Append what is readable on 'fd' to buf (len bytes, kept terminated).
 * Returns false at end of file. */
static bool slurp(int fd, char *buf, size_t len, size_t *used)
{
    char tmp[4096];
    ssize_t n = read(fd, tmp, sizeof(tmp));

    if (n < 0)
        return errno == EINTR || errno == EAGAIN;
    if (n == 0)
        return false;
    size_t room = len - 1 - *used;
    size_t k = (size_t)n < room ? (size_t)n : room;
    memcpy(buf + *used, tmp, k);
    *used += k;
    buf[*used] = '\0';
    return true;
}

/* Run 'argv', capturing its stdout and stderr.  Returns its wait
 * status, or -1 with errp set if it could not be run. */
static int run_capture(char *const argv[], char *out, size_t outlen,
                       char *errbuf, size_t errlen, struct pl_error *errp)
{
    int po[2] = { -1, -1 }, pe[2] = { -1, -1 };
    size_t no = 0, ne = 0;
    int status;
    pid_t pid;

    out[0] = errbuf[0] = '\0';
    if (pipe2(po, O_CLOEXEC) < 0 || pipe2(pe, O_CLOEXEC) < 0)
        goto error;
    if ((pid = fork()) < 0)
        goto error;
    if (pid == 0) {
        dup2(po[1], STDOUT_FILENO);
        dup2(pe[1], STDERR_FILENO);
        execvp(argv[0], argv);
        dprintf(STDERR_FILENO, "cannot run %s: %s\n", argv[0],
                strerror(errno));
        _exit(127);
    }
    close(po[1]);
    close(pe[1]);
    po[1] = pe[1] = -1;
    /* both pipes at once: a full stderr pipe must not block the child */
    struct pollfd fds[2] = { { po[0], POLLIN, 0 }, { pe[0], POLLIN, 0 } };
    while (fds[0].fd >= 0 || fds[1].fd >= 0) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (fds[0].revents && !slurp(po[0], out, outlen, &no))
            fds[0].fd = -1;
        if (fds[1].revents && !slurp(pe[0], errbuf, errlen, &ne))
            fds[1].fd = -1;
    }
    close(po[0]);
    close(pe[0]);
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return pl_errprintf(errp, "waitpid: %s", strerror(errno));
    return status;
error:
    pl_errprintf(errp, "cannot run %s: %s", argv[0], strerror(errno));
    for (int i = 0; i < 2; i++) {
        if (po[i] >= 0)
            close(po[i]);
        if (pe[i] >= 0)
            close(pe[i]);
    }
    return -1;
}

/* The last non-empty line of 'text', without "sbatch: error: ". */
static const char *last_line(char *text)
{
    char *line = NULL;

    for (char *p = strtok(text, "\n"); p; p = strtok(NULL, "\n"))
        if (strspn(p, " \t") < strlen(p))
            line = p;
    if (!line)
        return "no message";
    if (!strncmp(line, "sbatch: error: ", 15))
        line += 15;
    return line;
}

int pl_up_sbatch(const char *script, long *job, struct pl_error *errp)
{
    char *argv[] = { (char *)"sbatch", (char *)"--parsable", (char *)script,
                     NULL };
    char out[1024], err[4096];
    int status;
    char *end;

    if ((status = run_capture(argv, out, sizeof(out), err, sizeof(err),
                              errp)) < 0)
        return -1;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        errno = EIO;
        return pl_errprintf(errp, "sbatch failed: %s", last_line(err));
    }
    /* --parsable: "JOBID" or "JOBID;CLUSTER" */
    errno = 0;
    *job = strtol(out, &end, 10);
    if (errno || end == out || *job <= 0 || (*end && *end != ';'
                                             && *end != '\n')) {
        errno = EPROTO;
        return pl_errprintf(errp, "sbatch printed no job id: '%.60s'", out);
    }
    return 0;
}

bool pl_up_job_died(struct pl_cli *cli, const struct pl_pilot *p,
                    struct pl_slurm_job *j, char *why, size_t len)
{
    struct pl_slurm_job now;
    struct pl_slurm *s;

    if (!(s = pl_cli_slurm(cli, NULL))
        || pl_slurm_job(s, p->info.job, &now, NULL) < 0)
        return false;
    *j = now;
    if (pl_slurm_job_hopeless(j)) {
        /* waiting would be forever: give the allocation request back */
        pl_slurm_cancel(s, p->info.job, NULL);
        snprintf(why, len, "Slurm will not start job %ld as asked (%s: "
                 "more than its partition offers?); the job is canceled",
                 p->info.job, j->reason_name);
        return true;
    }
    if (pl_slurm_job_alive(j))
        return false;
    snprintf(why, len, "Slurm job %ld ended (state %s) before its agents "
             "came up", p->info.job, j->state_name);
    return true;
}
