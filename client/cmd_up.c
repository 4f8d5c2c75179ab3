/* client/cmd_up.c - pilot up: start a pilot, in Slurm or on this machine */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <unistd.h>

#include "client/conn.h"
#include "client/output.h"
#include "client/up_private.h"
#include "client/vetnet.h"
#include "proto/allocmsg.h"
#include "proto/vetconf.h"
#include "proto/keys.h"
#include "proto/pilotdir.h"
#include "proto/spec.h"
#include "proto/strv.h"

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
    "  --start-timeout S     a task sent to an agent that has not started\n"
    "                        it after S is stopped there and queued again\n"
    "                        (default 60 s; 0: never)\n"
    "  --prefetch N          each agent holds up to N one-rank tasks of\n"
    "                        cores only beyond its free cores, to start one\n"
    "                        as soon as a task ends there (default 4; 0:\n"
    "                        none)\n"
    "  --pool NAME:N[:G[:C]] start a pool of N MPI workers a node (with G\n"
    "                        GPUs and C cores each) on all the nodes, as\n"
    "                        'pilot pool start' does; with --wait, wait for\n"
    "                        it too (repeatable)\n"
    "  --bind ADDR|IFACE     where pilotd listens: an address of its node,\n"
    "                        or an interface there (ib0: its first IPv4\n"
    "                        address); default: the node's name's address,\n"
    "                        or the first interface up if that is loopback\n"
    "  --py-prelude CODE     Python calls (pilot submit --py-call) that name\n"
    "                        no prelude run CODE once in each new worker\n"
    "                        (\"import torch\")\n"
    "  --python PATH         ... and that name no interpreter run this one\n"
    "                        (default: python3 from the task's PATH)\n"
    "  --vet FILE            the nodes' checks and limits (a vet.yaml, see\n"
    "                        docs/vet.yaml; copied into the pilot), or\n"
    "                        'none': no vetting.  Default: the built-in\n"
    "                        checks (GPUs, disk, memory, CPU speed)\n"
    "  --metrics-port P      pilotd serves metrics for Prometheus at\n"
    "                        http://ADDR:P/metrics (ADDR: where it\n"
    "                        listens; 0: any free port); 'pilot status'\n"
    "                        shows the URL\n"
    "  --metrics-file F      pilotd writes them to F, a name ending in\n"
    "                        .prom, for node_exporter's textfile collector\n"
    "  --metrics-interval S  ... every S (default 15 s)\n"
    "  --grow max=K,idle=D[,nodes=N][,time=T][,partition=P][,pending=M]\n"
    "                        pilotd adds Slurm jobs of agents while queued\n"
    "                        work does not fit, K nodes at most, and\n"
    "                        releases those idle for D (docs/grow.md)\n"
    "  --output MODE         where tasks' output goes unless a task says:\n"
    "                        files (default: a pair per rank) or journal\n"
    "                        (each node's journal: docs/output.md)\n"
    "  --journal-size SIZE   start a node's next journal file at SIZE\n"
    "                        (default 256M)\n"
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
    OPT_START_TIMEOUT,
    OPT_PREFETCH,
    OPT_AGENTS,
    OPT_BIND,
    OPT_POOL,
    OPT_PY_PRELUDE,
    OPT_PYTHON,
    OPT_VET,
    OPT_METRICS_PORT,
    OPT_METRICS_FILE,
    OPT_METRICS_INTERVAL,
    OPT_GROW,
    OPT_OUTPUT,
    OPT_JOURNAL_SIZE,
};

#define DEFAULT_WAIT 600.0 /* --wait-timeout */

/* --wait with --pool: each pool ready too, within what is left of
 * --wait-timeout. */
static int wait_pools(struct pl_cli *cli, struct pl_pilot *p,
                      const struct pl_up_opts *o, double t0)
{
    struct pl_error err;
    struct pl_conn *conn;
    int rc = PL_EXIT_OK;

    if (!(conn = pl_conn_attach(&cli->find, p, &err)))
        return pl_cli_error("%s", err.text);
    for (int i = 0; i < o->npools && rc == PL_EXIT_OK; i++) {
        struct pl_pool_req pr;
        json_t *pool = NULL;
        double left = o->wait_timeout - (pl_mono() - t0);
        (void)pl_pool_spec_parse(o->pools[i], &pr, NULL); /* checked */
        if ((rc = pl_pool_wait_ready(conn, pr.name, left > 1 ? left : 1,
                                     &pool)) == PL_EXIT_OK)
            pl_cli_say("pilot %s: pool %s ready: %lld workers", p->id,
                       pr.name, pl_out_jcount(pool, "workers"));
        json_decref(pool);
    }
    pl_conn_free(conn);
    return rc;
}

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

/* --vet FILE: its text, checked (the errors name the file and line), or
 * "enabled: false" for 'none'.  0, or -1 with errp. */
static int read_vet(const char *path, char **text, struct pl_error *errp)
{
    struct pl_vetconf c;
    FILE *fp;
    char *buf;
    size_t n;

    free(*text);
    *text = NULL;
    if (!strcmp(path, "none"))
        return (*text = strdup("enabled: false\n")) ? 0
               : pl_errprintf(errp, "out of memory");
    if (!(fp = fopen(path, "re")))
        return pl_errprintf(errp, "%s: %s", path, strerror(errno));
    /* a vet.yaml is a few lines: 1 MiB is plenty */
    if (!(buf = malloc(1024 * 1024 + 1))) {
        fclose(fp);
        return pl_errprintf(errp, "out of memory");
    }
    n = fread(buf, 1, 1024 * 1024 + 1, fp);
    fclose(fp);
    if (n > 1024 * 1024) {
        free(buf);
        return pl_errprintf(errp, "%s: over 1 MiB", path);
    }
    buf[n] = '\0';
    if (pl_vetconf_parse(path, buf, n, &c, errp) < 0) {
        free(buf);
        return -1;
    }
    pl_vetconf_clear(&c);
    *text = buf;
    return 0;
}

/* --metrics-file 'path': node_exporter's textfile collector reads only
 * names ending in .prom; made absolute, for pilotd runs elsewhere.  -1,
 * or an exit code. */
static int metrics_file(struct pl_cli *cli, const char *path,
                        struct pl_up_opts *o)
{
    size_t n = strlen(path);
    const char *base = strrchr(path, '/');
    char cwd[PATH_MAX];

    base = base ? base + 1 : path;
    if (n < 5 || strcmp(path + n - 5, ".prom") || !strcmp(base, ".prom"))
        return pl_cli_usage(cli, "--metrics-file %s: the name must end in "
                            "'.prom' (node_exporter's textfile collector "
                            "reads only those)", path);
    if (strpbrk(path, "\n"))
        return pl_cli_usage(cli, "--metrics-file: no newline in its path");
    free(o->metrics_file);
    if (path[0] == '/')
        o->metrics_file = strdup(path);
    else if (!getcwd(cwd, sizeof(cwd))
             || asprintf(&o->metrics_file, "%s/%s", cwd, path) < 0)
        o->metrics_file = NULL;
    if (!o->metrics_file)
        return pl_cli_error("--metrics-file: %s", strerror(errno));
    return -1;
}

static int parse_opts(struct pl_cli *cli, int argc, char **argv,
                      struct pl_up_opts *o)
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
        { "pool", required_argument, NULL, OPT_POOL },
        { "wait-timeout", required_argument, NULL, OPT_WAIT_TIMEOUT },
        { "resume", required_argument, NULL, OPT_RESUME },
        { "lost-after", required_argument, NULL, OPT_LOST_AFTER },
        { "start-timeout", required_argument, NULL, OPT_START_TIMEOUT },
        { "prefetch", required_argument, NULL, OPT_PREFETCH },
        { "bind", required_argument, NULL, OPT_BIND },
        { "agents", required_argument, NULL, OPT_AGENTS },
        { "py-prelude", required_argument, NULL, OPT_PY_PRELUDE },
        { "python", required_argument, NULL, OPT_PYTHON },
        { "vet", required_argument, NULL, OPT_VET },
        { "metrics-port", required_argument, NULL, OPT_METRICS_PORT },
        { "metrics-file", required_argument, NULL, OPT_METRICS_FILE },
        { "metrics-interval", required_argument, NULL,
          OPT_METRICS_INTERVAL },
        { "grow", required_argument, NULL, OPT_GROW },
        { "output", required_argument, NULL, OPT_OUTPUT },
        { "journal-size", required_argument, NULL, OPT_JOURNAL_SIZE },
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
            if (pl_parse_uint("--nodes", optarg, 1, 100000, &o->nodes,
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
            if (pl_parse_uint("--gpus-per-node", optarg, 1, 1024,
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
        case OPT_PY_PRELUDE:
            if (strlen(optarg) > PL_SPEC_MAX_PRELUDE || !pl_utf8_str(optarg))
                return pl_cli_usage(cli, "--py-prelude: at most %d bytes of "
                                    "UTF-8", PL_SPEC_MAX_PRELUDE);
            o->py_prelude = optarg;
            break;
        case OPT_VET:
            if (read_vet(optarg, &o->vet, &err) < 0)
                return pl_cli_usage(cli, "--vet: %s", err.text);
            break;
        case OPT_PYTHON:
            if (!*optarg || strlen(optarg) > PL_SPEC_MAX_PYTHON
                || strchr(optarg, '\n') || !pl_utf8_str(optarg))
                return pl_cli_usage(cli, "--python: want the interpreter's "
                                    "name or path");
            o->py_python = optarg;
            break;
        case OPT_BIND:
            /* checked by pilotd, on its node: the login node's interfaces
             * are not the compute node's */
            if (!*optarg || strlen(optarg) > 63 || strpbrk(optarg, " \t\n'\"\\$`"))
                return pl_cli_usage(cli, "--bind: '%s' is not an address or "
                                    "an interface name", optarg);
            o->bind = optarg;
            break;
        case OPT_POOL: {
            struct pl_pool_req pr;
            if (pl_pool_spec_parse(optarg, &pr, &err) < 0)
                return pl_cli_usage(cli, "--pool: %s", err.text);
            for (int i = 0; i < o->npools; i++)
                if (!strncmp(o->pools[i], optarg, strlen(pr.name))
                    && o->pools[i][strlen(pr.name)] == ':')
                    return pl_cli_usage(cli, "--pool: %s twice", pr.name);
            if (o->npools == 8)
                return pl_cli_usage(cli, "--pool: at most 8 pools");
            o->pools[o->npools++] = optarg;
            break;
        }
        case OPT_LOST_AFTER:
            if (pl_parse_secs("--lost-after", optarg, &o->lost_after,
                              &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            if (o->lost_after < 1 || o->lost_after > 86400)
                return pl_cli_usage(cli, "--lost-after: want 1 s to 1 day");
            break;
        case OPT_START_TIMEOUT:
            if (pl_parse_secs("--start-timeout", optarg,
                              &o->start_timeout, &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            if (o->start_timeout != 0
                && (o->start_timeout < 1 || o->start_timeout > 86400))
                return pl_cli_usage(cli, "--start-timeout: want 0 (none) "
                                    "or 1 s to 1 day");
            break;
        case OPT_PREFETCH: {
            char *end;
            errno = 0;
            unsigned long v = strtoul(optarg, &end, 10);
            if (errno || end == optarg || *end || optarg[0] == '-' || v > 1024)
                return pl_cli_usage(cli, "--prefetch: want 0 to 1024");
            o->prefetch = (int)v;
            break;
        }
        case OPT_METRICS_PORT: {
            uint64_t port;
            if (pl_parse_uint("--metrics-port", optarg, 0, 65535, &port,
                              &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            o->metrics_port = (int)port;
            break;
        }
        case OPT_METRICS_FILE:
            if ((rc = metrics_file(cli, optarg, o)) >= 0)
                return rc;
            break;
        case OPT_METRICS_INTERVAL:
            if (pl_parse_secs("--metrics-interval", optarg,
                              &o->metrics_interval, &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            if (o->metrics_interval < 1 || o->metrics_interval > 86400)
                return pl_cli_usage(cli, "--metrics-interval: want 1 s to "
                                    "1 day");
            break;
        case OPT_GROW: {
            struct pl_grow_conf gc;
            if (pl_grow_conf_parse(optarg, &gc, &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            o->grow = optarg;
            break;
        }
        case OPT_OUTPUT:
            if (strcmp(optarg, "files") && strcmp(optarg, "journal"))
                return pl_cli_usage(cli, "--output: '%s' is not files or "
                                    "journal", optarg);
            o->output = optarg;
            break;
        case OPT_JOURNAL_SIZE: {
            uint64_t v;
            if (pl_parse_size("--journal-size", optarg, 1ull << 40, &v, &err)
                < 0)
                return pl_cli_usage(cli, "%s", err.text);
            if (v < 4096)
                return pl_cli_usage(cli, "--journal-size: want 4K or more");
            snprintf(o->journal_size, sizeof(o->journal_size), "%llu",
                     (unsigned long long)v);
            break;
        }
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
            if (pl_parse_secs("--wait-timeout", optarg, &o->wait_timeout,
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
                          : o->grow          ? "--grow"
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

/* A default of the Python calls, 'text' (NULL: none given), as the file
 * DIR/'name' that pilotd reads at start.  0, or -1 with errp. */
static int py_default(const char *dir, const char *name, const char *text,
                      struct pl_error *errp)
{
    char path[PL_PATH_MAX + 32];
    size_t n = text ? strlen(text) : 0;
    int fd;

    if (!text)
        return 0;
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW
                             | O_CLOEXEC, 0600)) < 0
        || write(fd, text, n) != (ssize_t)n || close(fd) < 0)
        return pl_errprintf(errp, "%s: %s", path, strerror(errno));
    return 0;
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
    struct pl_up_opts o = { .nodes = 1, .wait_timeout = DEFAULT_WAIT,
                            .start_timeout = -1, .metrics_port = -1,
                            .prefetch = -1 };
    struct pl_error err;
    struct pl_pilot p = { .state = PL_PILOT_STARTING };
    char bindir[PATH_MAX], pilotd[PATH_MAX + 16], script[PL_PATH_MAX + 32];
    double t0 = pl_mono();
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
    p.info.created = pl_now();
    p.has_info = true;
    /* the keys exist before pilotd: CURVE from its first socket on */
    char kdir[PL_PATH_MAX + 16];
    pl_keys_path(p.dir, kdir, sizeof(kdir));
    if (pl_info_write(p.dir, &p.info, &err) < 0
        || pl_keys_create(kdir, &err) < 0
        || py_default(p.dir, "py-prelude", o.py_prelude, &err) < 0
        || py_default(p.dir, "py-python", o.py_python, &err) < 0
        || py_default(p.dir, PL_VETCONF_FILE, o.vet, &err) < 0) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    /* pilotd finds its pilots where we do */
    if (setenv("PILOT_HOME", p.home, 1) < 0) {
        pl_cli_error("setenv: %s", strerror(errno));
        goto done;
    }
    if (o.local) {
        if ((pid = pl_up_spawn(pilotd, p.dir, &o, &err)) < 0) {
            pl_cli_error("%s", err.text);
            goto done;
        }
        print_id(cli, &p);
        pl_cli_say("pilot %s: pilotd started here (pid %ld)", p.id,
                   (long)pid);
    }
    else {
        if (pl_up_script(&o, p.id, p.home, p.dir, bindir, script,
                         sizeof(script), &err) < 0
            || pl_up_sbatch(script, &p.info.job, &err) < 0) {
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
                   o.nodes == 1 ? "" : "s",
                   o.time ? o.time : PL_UP_DEFAULT_TIME);
    }
    created = false; /* it is started: it stays, whatever happens next */
    /* without --wait a local pilot is back at once, but with its
     * endpoint written: 'pilot up --local && pilot submit' finds it */
    rc = o.wait    ? pl_up_wait(cli, &p, pid, o.wait_timeout, t0)
         : o.local ? pl_up_local_ready(&p, pid, 30.0)
                   : PL_EXIT_OK;
    if (rc == PL_EXIT_OK && o.wait && o.npools)
        rc = wait_pools(cli, &p, &o, t0);
    if (rc == PL_EXIT_OK && o.wait)
        rc = pl_vet_net_at_start(cli, &p, o.vet);
done:
    if (created)
        remove_dir(p.dir);
    free(o.sbatch_args);
    free(o.vet);
    free(o.metrics_file);
    return rc;
}
