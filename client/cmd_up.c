/* client/cmd_up.c - pilot up: start a pilot, in Slurm or on this machine */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "client/cli.h"
#include "client/conn.h"
#include "client/output.h"
#include "client/pilot.h"
#include "client/slurm.h"
#include "proto/keys.h"
#include "proto/pilotdir.h"

static const char help[] =
    "usage: pilot up [options]\n"
    "\n"
    "Start a pilot and print its id (p3).  By default it is a Slurm job\n"
    "(sbatch) running pilotd on its first node and one agent on each\n"
    "node; with --local, pilotd and one agent run on this machine.\n"
    "Its CURVE keys are made first, private to you, in the pilot's\n"
    "directory (keys/): only their holders can talk to its pilotd.\n"
    "\n"
    "options:\n"
    "  --nodes N             nodes to allocate (default 1)\n"
    "  --time T              walltime, as Slurm takes it: MM, MM:SS,\n"
    "                        HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS\n"
    "                        (default 1:00:00)\n"
    "  --gpus-per-node G     GPUs per node (--gres=gpu:G)\n"
    "  --partition P         Slurm partition\n"
    "  --account A           Slurm account\n"
    "  --sbatch-arg ARG      one more sbatch option, as written in a\n"
    "                        batch script (repeatable)\n"
    "  --local               no Slurm: pilotd and one agent here\n"
    "  --agents N            with --local: 1 (default), or 0: start no\n"
    "                        agent; agents started by hand join\n"
    "                        (pilot-agent --dir DIR --keys DIR/keys)\n"
    "  --wait                return once every agent has registered\n"
    "  --wait-timeout S      give up waiting after S (default 600 s);\n"
    "                        the pilot stays\n"
    "  --lost-after S        an agent silent this long is lost: its tasks\n"
    "                        run elsewhere, another agent is started on\n"
    "                        its node (default 30 s)\n"
    "  --resume ID           run pilot ID again, in a new allocation: its\n"
    "                        queued tasks and those its drain interrupted\n"
    "                        run, done ones do not (ID must be down)\n"
    "  --json                print {\"pilot\", \"mode\", \"job\", \"dir\"}\n"
    "  -h, --help            this help\n"
    "\n"
    "environment: PILOT_HOME (where pilots live, default ~/.pilot),\n"
    "PILOT_BIN (the directory of pilotd; default: this program's)\n"
    "\n"
    "exit status: 0 ok, 1 error (the pilot failed to start: read the log\n"
    "named), 2 usage error or --wait-timeout passed\n"
    "\n"
    "example:\n"
    "  pilot up --nodes 4 --time 30:00 --wait\n"
    "  pilot up --local --wait\n"
    "  pilot up --resume p3 --nodes 4 --time 2:00:00 --wait\n"
    "\n"
    "Slurm signals the pilot 120 s before its walltime ends; pilotd then\n"
    "stops its running tasks, puts them back in the queue, and exits:\n"
    "'pilot up --resume' carries on.  It starts no task whose --timeout\n"
    "would run past that signal.\n";

enum {
    OPT_NODES = PL_OPT_CMD,
    OPT_TIME,
    OPT_GPUS,
    OPT_PARTITION,
    OPT_ACCOUNT,
    OPT_SBATCH_ARG,
    OPT_LOCAL,
    OPT_WAIT,
    OPT_WAIT_TIMEOUT,
    OPT_RESUME,
    OPT_LOST_AFTER,
    OPT_AGENTS,
};

#define DEFAULT_TIME "1:00:00"
#define DEFAULT_WAIT 600.0
#define POLL_NS 200000000L  /* 0.2 s between looks */
#define SLURM_EVERY 5       /* ask Slurm every 5th look (1 s) */
#define STATUS_MS 2000      /* a status request while waiting */

/* What the options say; strings are borrowed from argv. */
struct up_opts {
    uint64_t nodes, gpus;
    bool nodes_set, gpus_set;
    const char *time;
    const char *partition;
    const char *account;
    char **sbatch_args; /* NULL-terminated, pointers into argv */
    bool local, wait;
    double wait_timeout;
    bool wait_timeout_set;
    const char *resume; /* pilot id to run again, or NULL */
    double lost_after;  /* 0: pilotd's default */
    bool no_agent;      /* --local --agents 0 */
};

/* Slurm's time formats (sbatch(1) --time): MM, MM:SS, HH:MM:SS, D-HH,
 * D-HH:MM, D-HH:MM:SS; also "infinite" and "unlimited". */
static bool valid_time(const char *s)
{
    int groups = 0;
    bool days = false;
    const char *p = s;

    if (!strcasecmp(s, "infinite") || !strcasecmp(s, "unlimited"))
        return true;
    const char *dash = strchr(s, '-');
    if (dash) {
        if (dash == s)
            return false;
        for (p = s; p < dash; p++)
            if (*p < '0' || *p > '9')
                return false;
        days = true;
        p = dash + 1;
    }
    for (;;) {
        const char *start = p;
        while (*p >= '0' && *p <= '9')
            p++;
        if (p == start)
            return false;
        groups++;
        if (*p == '\0')
            break;
        if (*p != ':')
            return false;
        p++;
    }
    return groups >= 1 && groups <= 3 && !(days && groups > 3);
}

static int parse_opts(struct pl_cli *cli, int argc, char **argv,
                      struct up_opts *o)
{
    static const struct option opts[] = {
        { "nodes", required_argument, NULL, OPT_NODES },
        { "time", required_argument, NULL, OPT_TIME },
        { "gpus-per-node", required_argument, NULL, OPT_GPUS },
        { "partition", required_argument, NULL, OPT_PARTITION },
        { "account", required_argument, NULL, OPT_ACCOUNT },
        { "sbatch-arg", required_argument, NULL, OPT_SBATCH_ARG },
        { "local", no_argument, NULL, OPT_LOCAL },
        { "wait", no_argument, NULL, OPT_WAIT },
        { "wait-timeout", required_argument, NULL, OPT_WAIT_TIMEOUT },
        { "resume", required_argument, NULL, OPT_RESUME },
        { "lost-after", required_argument, NULL, OPT_LOST_AFTER },
        { "agents", required_argument, NULL, OPT_AGENTS },
        PL_CLI_COMMON_OPTS,
        { 0 },
    };
    struct pl_error err;
    size_t nargs = 0;
    int c, r, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if ((r = pl_cli_opt(cli, c, argv, help, &rc)) < 0)
            return rc;
        if (r > 0)
            continue;
        switch (c) {
        case OPT_NODES:
            if (pl_cli_parse_uint("--nodes", optarg, 1, 100000, &o->nodes,
                                  &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            o->nodes_set = true;
            break;
        case OPT_TIME:
            if (!valid_time(optarg))
                return pl_cli_usage(cli, "--time: '%s' is not a Slurm time "
                                    "(MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or "
                                    "D-HH:MM:SS)", optarg);
            o->time = optarg;
            break;
        case OPT_GPUS:
            if (pl_cli_parse_uint("--gpus-per-node", optarg, 1, 1024,
                                  &o->gpus, &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            o->gpus_set = true;
            break;
        case OPT_PARTITION:
        case OPT_ACCOUNT:
            if (!*optarg || strpbrk(optarg, " \t\n"))
                return pl_cli_usage(cli, "%s: '%s' is not a Slurm name",
                                    c == OPT_PARTITION ? "--partition"
                                                       : "--account",
                                    optarg);
            if (c == OPT_PARTITION)
                o->partition = optarg;
            else
                o->account = optarg;
            break;
        case OPT_SBATCH_ARG:
            if (!*optarg || strchr(optarg, '\n'))
                return pl_cli_usage(cli, "--sbatch-arg: '%s' is not one "
                                    "sbatch option", optarg);
            o->sbatch_args[nargs++] = optarg;
            break;
        case OPT_RESUME:
            o->resume = optarg;
            break;
        case OPT_LOST_AFTER:
            if (pl_cli_parse_secs("--lost-after", optarg, &o->lost_after,
                                  &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            if (o->lost_after < 1 || o->lost_after > 86400)
                return pl_cli_usage(cli, "--lost-after: want 1 s to 1 day");
            break;
        case OPT_LOCAL:
            o->local = true;
            break;
        case OPT_AGENTS:
            if (strcmp(optarg, "0") && strcmp(optarg, "1"))
                return pl_cli_usage(cli, "--agents: want 0 or 1, not '%s'",
                                    optarg);
            o->no_agent = !strcmp(optarg, "0");
            break;
        case OPT_WAIT:
            o->wait = true;
            break;
        case OPT_WAIT_TIMEOUT:
            if (pl_cli_parse_secs("--wait-timeout", optarg, &o->wait_timeout,
                                  &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            if (o->wait_timeout <= 0)
                return pl_cli_usage(cli, "--wait-timeout: '%s' is not more "
                                    "than 0", optarg);
            o->wait_timeout_set = true;
            break;
        }
    }
    if (optind < argc)
        return pl_cli_usage(cli, "unexpected argument '%s'", argv[optind]);
    if (o->wait_timeout_set && !o->wait)
        return pl_cli_usage(cli, "--wait-timeout needs --wait");
    if (o->no_agent && !o->local)
        return pl_cli_usage(cli, "--agents 0 needs --local");
    if (o->local) {
        const char *bad = o->time            ? "--time"
                          : o->gpus_set      ? "--gpus-per-node"
                          : o->partition     ? "--partition"
                          : o->account       ? "--account"
                          : nargs            ? "--sbatch-arg"
                          : o->nodes_set && o->nodes != 1 ? "--nodes"
                                                          : NULL;
        if (bad)
            return pl_cli_usage(cli, "%s has no meaning with --local", bad);
    }
    return -1;
}

/* The directory pilotd lives in: $PILOT_BIN, else this program's. */
static int bin_dir(char *buf, size_t len, struct pl_error *errp)
{
    const char *env = getenv("PILOT_BIN");
    char exe[PATH_MAX];
    ssize_t n;
    char *slash;

    if (env && *env) {
        if ((size_t)snprintf(buf, len, "%s", env) >= len)
            goto toolong;
        return 0;
    }
    if ((n = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) < 0)
        return pl_errprintf(errp, "cannot find this program's directory "
                            "(set PILOT_BIN): %s", strerror(errno));
    exe[n] = '\0';
    if ((slash = strrchr(exe, '/')))
        *slash = '\0';
    if ((size_t)snprintf(buf, len, "%s", exe) >= len)
        goto toolong;
    return 0;
toolong:
    errno = ENAMETOOLONG;
    return pl_errprintf(errp, "the path of pilotd is too long");
}

static int rm_entry(const char *path, const struct stat *st, int flag,
                    struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

/* Remove a pilot directory that never got going. */
static void remove_dir(const char *dir)
{
    int saved = errno;

    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    errno = saved;
}

/* A path for an #SBATCH line: '%' doubled (Slurm's filename patterns,
 * sbatch(1) "filename pattern"), in double quotes if it has blanks. */
static void sbatch_path(FILE *fp, const char *opt, const char *path,
                        const char *suffix)
{
    bool quote = strpbrk(path, " \t") != NULL;

    fprintf(fp, "#SBATCH %s=%s", opt, quote ? "\"" : "");
    for (const char *p = path; *p; p++)
        fputs(*p == '%' ? "%%" : (char[]){ *p, '\0' }, fp);
    fprintf(fp, "%s%s\n", suffix, quote ? "\"" : "");
}

#define MAX_PILOTD_RESTARTS 100 /* in one allocation */
#define DRAIN_BEFORE 120        /* s: Slurm signals the drain this early */

/* Write DIR/pilot.sbatch.  0 or -1 with errp set. */
static int write_script(const struct up_opts *o, const char *id,
                        const char *home, const char *dir,
                        const char *bindir, char *path, size_t len,
                        struct pl_error *errp)
{
    char pilotd[PATH_MAX + 16];
    char *qhome = NULL, *qpilotd = NULL, *qdir = NULL;
    FILE *fp;
    mode_t old;

    snprintf(path, len, "%s/pilot.sbatch", dir);
    snprintf(pilotd, sizeof(pilotd), "%s/pilotd", bindir);
    old = umask(077);
    fp = fopen(path, "w");
    umask(old);
    if (!fp)
        return pl_errprintf(errp, "cannot write %s: %s", path,
                            strerror(errno));
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
    fprintf(fp, "#SBATCH --time=%s\n", o->time ? o->time : DEFAULT_TIME);
    sbatch_path(fp, "--output", dir, "/logs/slurm-%j.out");
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
    char lost[48] = "";
    if (o->lost_after > 0)
        snprintf(lost, sizeof(lost), " --lost-after %g", o->lost_after);
    fprintf(fp, "    %s --dir %s --drain-before %d%s &\n", qpilotd, qdir,
            DRAIN_BEFORE, lost);
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
    if (fclose(fp) == EOF)
        return pl_errprintf(errp, "cannot write %s: %s", path,
                            strerror(errno));
    return 0;
error:
    free(qhome);
    free(qpilotd);
    free(qdir);
    fclose(fp);
    return pl_errprintf(errp, "cannot write %s: %s", path, strerror(errno));
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

/* sbatch the script; the job id into *job.  0 or -1 with errp set. */
static int submit(const char *script, long *job, struct pl_error *errp)
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

/* Start pilotd --local in its own session, output to logs/pilotd.out.
 * Returns its pid, or -1 with errp set. */
static pid_t spawn_local(const char *pilotd, const char *dir, bool no_agent,
                         struct pl_error *errp)
{
    char log[PL_PATH_MAX + 32];
    int ep[2], in, out, child_errno;
    ssize_t n;
    pid_t pid;

    snprintf(log, sizeof(log), "%s/logs/pilotd.out", dir);
    if ((in = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
        return pl_errprintf(errp, "cannot open /dev/null: %s",
                            strerror(errno));
    if ((out = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600))
        < 0) {
        pl_errprintf(errp, "cannot open %s: %s", log, strerror(errno));
        close(in);
        return -1;
    }
    /* the child reports a failed exec on this close-on-exec pipe */
    if (pipe2(ep, O_CLOEXEC) < 0 || (pid = fork()) < 0) {
        pl_errprintf(errp, "cannot start pilotd: %s", strerror(errno));
        close(in);
        close(out);
        return -1;
    }
    if (pid == 0) {
        char *argv[] = { (char *)"pilotd", (char *)"--dir", (char *)dir,
                         (char *)"--local", (char *)"--agents",
                         (char *)(no_agent ? "0" : "1"), NULL };
        setsid(); /* no SIGINT or SIGHUP from this terminal */
        dup2(in, STDIN_FILENO);
        dup2(out, STDOUT_FILENO);
        dup2(out, STDERR_FILENO);
        execv(pilotd, argv);
        child_errno = errno;
        if (write(ep[1], &child_errno, sizeof(child_errno)) < 0)
            _exit(126);
        _exit(127);
    }
    close(ep[1]);
    close(in);
    close(out);
    while ((n = read(ep[0], &child_errno, sizeof(child_errno))) < 0
           && errno == EINTR)
        ;
    close(ep[0]);
    if (n > 0) {
        waitpid(pid, NULL, 0);
        errno = child_errno;
        return pl_errprintf(errp, "cannot run %s: %s", pilotd,
                            strerror(child_errno));
    }
    return pid;
}

static void sleep_poll(void)
{
    struct timespec ts = { 0, POLL_NS };

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

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

/* Whether the local pilotd 'pid' has exited; says how in 'why'. */
static bool local_died(pid_t pid, char *why, size_t len)
{
    int status;

    if (waitpid(pid, &status, WNOHANG) != pid)
        return false;
    if (WIFEXITED(status))
        snprintf(why, len, "pilotd exited with status %d before its agent "
                 "came up", WEXITSTATUS(status));
    else
        snprintf(why, len, "pilotd was killed by signal %d before its agent "
                 "came up", WTERMSIG(status));
    return true;
}

/* Whether the Slurm job has ended; 'j' is what Slurm said (left as it
 * was when Slurm cannot be asked). */
static bool job_died(struct pl_cli *cli, const struct pl_pilot *p,
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

/* Wait until every agent is up.  Returns an exit code. */
static int wait_up(struct pl_cli *cli, struct pl_pilot *p, pid_t pid,
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
        double el = pl_out_now() - t0;
        if (!conn && pl_endpoint_read(p->dir, &p->ep, NULL) == 0) {
            p->has_ep = true;
            if (!(conn = pl_conn_attach(cli, p, &err))) {
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
                        && job_died(cli, p, &j, why, sizeof(why))
                  : local_died(pid, why, sizeof(why))) {
            if (tty)
                pl_out_progress_clear(stderr);
            pl_cli_error("pilot %s: %s; see %s",
                         p->id, why, log);
            goto done;
        }
        el = pl_out_now() - t0;
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
        sleep_poll();
    }
    if (tty)
        pl_out_progress_clear(stderr);
    pl_cli_say("pilot %s up: %ld agent%s in %.1f s", p->id, up,
               up == 1 ? "" : "s", pl_out_now() - t0);
    rc = PL_EXIT_OK;
done:
    pl_conn_free(conn);
    return rc;
}

static void print_id(const struct pl_cli *cli, const struct pl_pilot *p)
{
    if (cli->json) {
        json_t *j = json_pack("{s:s, s:s, s:I, s:s}", "pilot", p->id, "mode",
                              p->info.mode, "job", (json_int_t)p->info.job,
                              "dir", p->dir);
        if (j)
            pl_out_json(j);
        json_decref(j);
    }
    else
        printf("%s\n", p->id);
    fflush(stdout);
}

/* Point 'p' at the directory of pilot 'id' for --resume: it must exist
 * and no pilotd may hold it (its lock file). */
static int resume_dir(struct pl_pilot *p, const char *id,
                      struct pl_error *errp)
{
    char lock[PL_PATH_MAX + 16];
    struct pl_info old;
    int fd;

    if (pl_pilotdir_path(p->home, id, p->dir, sizeof(p->dir), errp) < 0)
        return -1;
    if (pl_info_read(p->dir, &old, errp) < 0)
        return pl_errprintf(errp, "--resume %s: no such pilot (%s)", id,
                            errp->text);
    snprintf(p->id, sizeof(p->id), "%s", old.id[0] ? old.id : id);
    if (old.job > 0) {
        /* its allocation may outlive a pilotd that died for good */
        struct pl_slurm *sl = pl_slurm_new(NULL);
        struct pl_slurm_job j;
        bool alive = sl && pl_slurm_job(sl, old.job, &j, NULL) == 0
                     && pl_slurm_job_alive(&j);
        pl_slurm_free(sl);
        if (alive) {
            errno = EBUSY;
            return pl_errprintf(errp, "--resume %s: its Slurm job %ld is "
                                "still in the queue (pilot down %s, or "
                                "scancel %ld)", id, old.job, id, old.job);
        }
    }
    snprintf(lock, sizeof(lock), "%s/lock", p->dir);
    if ((fd = open(lock, O_RDWR | O_CLOEXEC)) >= 0) {
        int busy = flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
        close(fd);
        if (busy) {
            errno = EBUSY;
            return pl_errprintf(errp, "--resume %s: its pilotd still runs "
                                "(pilot down %s first)", id, id);
        }
    }
    return 0;
}

int pl_cmd_up(struct pl_cli *cli, int argc, char **argv)
{
    struct up_opts o = { .nodes = 1, .wait_timeout = DEFAULT_WAIT };
    struct pl_error err;
    struct pl_pilot p = { .state = PL_PILOT_STARTING };
    char bindir[PATH_MAX], pilotd[PATH_MAX + 16], script[PL_PATH_MAX + 32];
    double t0 = pl_out_now();
    bool created = false;
    pid_t pid = 0;
    int rc;

    if (!(o.sbatch_args = calloc((size_t)argc + 1, sizeof(char *))))
        return pl_cli_error("out of memory");
    if ((rc = parse_opts(cli, argc, argv, &o)) >= 0)
        goto done;
    rc = PL_EXIT_ERROR;
    if (bin_dir(bindir, sizeof(bindir), &err) < 0) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    snprintf(pilotd, sizeof(pilotd), "%s/pilotd", bindir);
    if (access(pilotd, X_OK) < 0) {
        pl_cli_error("cannot run %s: %s (set PILOT_BIN to the directory "
                     "of pilotd)", pilotd, strerror(errno));
        goto done;
    }
    if (pl_home(p.home, sizeof(p.home), &err) < 0) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    if (o.resume) {
        if (resume_dir(&p, o.resume, &err) < 0) {
            pl_cli_error("%s", err.text);
            goto done;
        }
    }
    else if (pl_pilotdir_create(p.home, p.id, sizeof(p.id), p.dir,
                                sizeof(p.dir), &err) < 0) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    else
        created = true;
    snprintf(p.info.id, sizeof(p.info.id), "%s", p.id);
    snprintf(p.info.mode, sizeof(p.info.mode), "%s",
             o.local ? "local" : "slurm");
    p.info.nodes = (long)o.nodes;
    p.info.created = t0;
    p.has_info = true;
    /* the keys exist before pilotd: CURVE from its first socket on */
    char kdir[PL_PATH_MAX + 16];
    pl_keys_path(p.dir, kdir, sizeof(kdir));
    if (pl_info_write(p.dir, &p.info, &err) < 0
        || pl_keys_create(kdir, &err) < 0) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    /* pilotd finds its pilots where we do */
    if (setenv("PILOT_HOME", p.home, 1) < 0) {
        pl_cli_error("setenv: %s", strerror(errno));
        goto done;
    }
    if (o.local) {
        if ((pid = spawn_local(pilotd, p.dir, o.no_agent, &err)) < 0) {
            pl_cli_error("%s", err.text);
            goto done;
        }
        print_id(cli, &p);
        pl_cli_say("pilot %s: pilotd started here (pid %ld)", p.id,
                   (long)pid);
    }
    else {
        if (write_script(&o, p.id, p.home, p.dir, bindir, script,
                         sizeof(script), &err) < 0
            || submit(script, &p.info.job, &err) < 0) {
            pl_cli_error("%s", err.text);
            goto done;
        }
        created = false; /* the job exists: the directory is its */
        if (pl_info_write(p.dir, &p.info, &err) < 0) {
            pl_cli_error("%s (Slurm job %ld)", err.text, p.info.job);
            goto done;
        }
        print_id(cli, &p);
        pl_cli_say("pilot %s: Slurm job %ld submitted (%llu node%s, %s)",
                   p.id, p.info.job, (unsigned long long)o.nodes,
                   o.nodes == 1 ? "" : "s", o.time ? o.time : DEFAULT_TIME);
    }
    created = false; /* it is started: it stays, whatever happens next */
    rc = o.wait ? wait_up(cli, &p, pid, o.wait_timeout, t0) : PL_EXIT_OK;
done:
    if (created)
        remove_dir(p.dir);
    free(o.sbatch_args);
    return rc;
}
