/* daemon/main.c - pilotd: options, the pilot directory, the loop */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "daemon/daemon.h"
#include "daemon/metrics.h"
#include "daemon/slurmjob.h"
#include "proto/allocmsg.h"
#include "proto/clientmsg.h"
#include "proto/keys.h"
#include "proto/log.h"
#include "proto/msg.h"
#include "proto/pilotdir.h"
#include "proto/zsock.h"

static void usage(FILE *fp)
{
    fprintf(fp,
        "Usage: pilotd [--dir DIR] [--local] [options]\n"
        "The pilot daemon: owns a pilot's state and runs its tasks on the\n"
        "agents.  Started by 'pilot up' or by scripts/pilot.sbatch.\n"
        "\n"
        "  --dir DIR          pilot directory (default: a new one under\n"
        "                     $PILOT_HOME/pilots, or ~/.pilot/pilots)\n"
        "  --local            run one agent on this machine, no Slurm\n"
        "  --cores LIST       local mode: CPU ids for the agent (0,1)\n"
        "  --agents N         local mode: 1 (default), or 0 to start none:\n"
        "                     agents started by hand join (pilot-agent --dir)\n"
        "  --heartbeat S      seconds between agent heartbeats (2)\n"
        "  --lost-after S     seconds of agent silence before it is lost (30)\n"
        "  --pool SPEC        start pool NAME:WORKERS_PER_NODE[:GPUS[:CORES]]\n"
        "                     on all nodes, unless it exists (repeatable)\n"
        "  --start-timeout S  a task sent to its agent and not started after\n"
        "                     S seconds is stopped there and queued again\n"
        "                     (60; 0: never)\n"
        "  --prefetch N       each agent holds up to N one-rank tasks of\n"
        "                     cores only beyond its free cores, started as\n"
        "                     soon as a task ends there (4; 0: none)\n"
        "  --drain-before S   the batch script's --signal=B:TERM@S: start no\n"
        "                     task whose --timeout ends later than S seconds\n"
        "                     before the job's end (120)\n"
        "  --log-level L      err, warning, notice, info, debug (notice;\n"
        "                     env PILOT_LOG_LEVEL)\n"
        "  --foreground-log   log to stderr instead of DIR/logs/pilotd.log\n"
        "  --bind ADDR|IFACE  the address (or the interface whose first\n"
        "                     address) the agents and clients connect to;\n"
        "                     default: the host name's address, or, if that\n"
        "                     is a loopback one, the first interface up;\n"
        "                     --local: 127.0.0.1\n"
        "  --metrics-port P   serve metrics for Prometheus (OpenMetrics)\n"
        "                     at http://ADDR:P/metrics, ADDR the --bind\n"
        "                     address (0: any free port; 'pilot status'\n"
        "                     shows it); off by default\n"
        "  --metrics-file F   write them to F (its name ends in .prom:\n"
        "                     node_exporter's textfile collector) ...\n"
        "  --metrics-interval S  ... every S seconds (15)\n"
        "  --grow max=K,idle=D,...  grow while work waits (docs/grow.md)\n"
        "  --output MODE      files or journal: where the tasks' output\n"
        "                     goes unless a task says (PILOT_OUTPUT in\n"
        "                     the agents' environment: docs/output.md)\n"
        "  --journal-size N   bytes of a node's journal file before the\n"
        "                     next one (PILOT_JOURNAL_SIZE)\n"
        "  -h, --help\n"
        "  --version          print the version and the protocol\n"
        "\n"
        "A submission or cancel is acknowledged once its commit is in the\n"
        "WAL and the WAL is synced to disk; PILOT_ACK_SYNC=0 leaves the\n"
        "sync out (it then survives pilotd's crash, not the node's).\n");
}

static double parse_secs(const char *s, const char *opt)
{
    char *end;
    double v = strtod(s, &end);

    if (end == s || *end || !(v > 0) || v > 86400)
        pl_fatal(2, "%s: '%s' is not a number of seconds", opt, s);
    return v;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "dir", required_argument, NULL, 'd' },
        { "local", no_argument, NULL, 'l' },
        { "cores", required_argument, NULL, 'c' },
        { "agents", required_argument, NULL, 'a' },
        { "heartbeat", required_argument, NULL, 'b' },
        { "lost-after", required_argument, NULL, 'L' },
        { "start-timeout", required_argument, NULL, 'S' },
        { "drain-before", required_argument, NULL, 'D' },
        { "prefetch", required_argument, NULL, 'p' },
        { "log-level", required_argument, NULL, 'v' },
        { "foreground-log", no_argument, NULL, 'f' },
        { "bind", required_argument, NULL, 'B' },
        { "pool", required_argument, NULL, 'P' },
        { "metrics-port", required_argument, NULL, 'M' },
        { "metrics-file", required_argument, NULL, 'F' },
        { "metrics-interval", required_argument, NULL, 'I' },
        { "grow", required_argument, NULL, 'G' },
        { "output", required_argument, NULL, 'O' },
        { "journal-size", required_argument, NULL, 'J' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    struct pl_daemon_config cfg = { .heartbeat = 2, .lost_after = 30,
                                    .start_timeout = 60, .prefetch = 4,
                                    .drain_before = 120 };
    char dir[PL_PATH_MAX] = "", home[PL_PATH_MAX], id[PL_ID_MAX];
    char exe[PL_PATH_MAX], addr[64], logpath[PL_PATH_MAX + 32];
    const char *level = getenv("PILOT_LOG_LEVEL");
    struct pl_error err;
    struct pl_info info;
    bool fg_log = false;
    const char *bind = NULL, *bind_why = NULL;
    uv_loop_t loop;
    int c, rc;

    pl_log_init("pilotd", NULL, NULL);
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd': snprintf(dir, sizeof(dir), "%s", optarg); break;
        case 'l': cfg.local = true; break;
        case 'c': cfg.agent_cores = optarg; break;
        case 'a':
            if (strcmp(optarg, "0") && strcmp(optarg, "1"))
                pl_fatal(2, "--agents: want 0 or 1, not '%s'", optarg);
            cfg.no_agent = !strcmp(optarg, "0");
            break;
        case 'b': cfg.heartbeat = parse_secs(optarg, "--heartbeat"); break;
        case 'L': cfg.lost_after = parse_secs(optarg, "--lost-after"); break;
        case 'S':
            cfg.start_timeout = strcmp(optarg, "0")
                                    ? parse_secs(optarg, "--start-timeout")
                                    : 0;
            break;
        case 'p': {
            char *end;
            errno = 0;
            unsigned long v = strtoul(optarg, &end, 10);
            if (errno || end == optarg || *end || v > 1024 || optarg[0] == '-')
                pl_fatal(2, "--prefetch: want 0..1024, not '%s'", optarg);
            cfg.prefetch = (uint32_t)v;
            break;
        }
        case 'D':
            cfg.drain_before = parse_secs(optarg, "--drain-before");
            break;
        case 'v': level = optarg; break;
        case 'f': fg_log = true; break;
        case 'B': bind = optarg; break;
        case 'P': {
            struct pl_pool_req pr;
            if (pl_pool_spec_parse(optarg, &pr, &err) < 0)
                pl_fatal(2, "--pool: %s", err.text);
            if (cfg.npools == 8)
                pl_fatal(2, "--pool: at most 8");
            cfg.pools[cfg.npools++] = optarg;
            break;
        }
        case 'M': {
            char *end;
            long port = strtol(optarg, &end, 10);
            if (end == optarg || *end || port < 0 || port > 65535)
                pl_fatal(2, "--metrics-port: want 0 to 65535, not '%s'",
                         optarg);
            cfg.metrics_http = true;
            cfg.metrics_port = (int)port;
            break;
        }
        case 'F':
            if (pl_metrics_file_check(optarg, &err) < 0)
                pl_fatal(2, "%s", err.text);
            if (optarg[0] != '/')
                pl_fatal(2, "--metrics-file: want an absolute path, not "
                            "'%s'", optarg);
            cfg.metrics_file = optarg;
            break;
        case 'I':
            cfg.metrics_interval = parse_secs(optarg, "--metrics-interval");
            break;
        case 'G': {
            struct pl_grow_conf gc;
            if (pl_grow_conf_parse(optarg, &gc, &err) < 0)
                pl_fatal(2, "%s", err.text);
            cfg.grow = optarg;
            break;
        }
        case 'O':
            /* the agents it starts inherit it, and pass it to their
             * tasks, whose own --output comes after it */
            if (strcmp(optarg, "files") && strcmp(optarg, "journal"))
                pl_fatal(2, "--output: '%s' is not files or journal", optarg);
            if (setenv("PILOT_OUTPUT", optarg, 1) < 0)
                pl_fatal(1, "setenv: %s", strerror(errno));
            break;
        case 'J':
            if (strspn(optarg, "0123456789") != strlen(optarg) || !*optarg
                || setenv("PILOT_JOURNAL_SIZE", optarg, 1) < 0)
                pl_fatal(2, "--journal-size: '%s' is not a number of bytes",
                         optarg);
            break;
        case 'h': usage(stdout); return 0;
        case 'V':
            printf("pilotd %s (protocol %d)\n", PL_VERSION, PL_PROTO_VERSION);
            return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc)
        pl_fatal(2, "unexpected argument '%s' (try --help)", argv[optind]);
    const char *sync = getenv("PILOT_ACK_SYNC");
    if (sync && *sync && strcmp(sync, "0") && strcmp(sync, "1"))
        pl_fatal(2, "PILOT_ACK_SYNC: want 0 or 1, not '%s'", sync);
    cfg.ack_nosync = sync && !strcmp(sync, "0");
    if (level && (pl_log_level = pl_log_level_parse(level)) < 0)
        pl_fatal(2, "bad log level '%s'", level);

    const char *jobenv = getenv("SLURM_JOB_ID");
    if (!cfg.local && !jobenv)
        pl_fatal(2, "not inside a Slurm job (no SLURM_JOB_ID): use --local "
                    "or start me with sbatch");
    cfg.job = cfg.local ? 0 : strtol(jobenv, NULL, 10);

    if (dir[0]) {
        /* what it holds runs as us (state.db's commands): another user
         * must not be able to swap it, nor anything on its way */
        char real[PL_PATH_MAX];
        if (pl_pilotdir_check(dir, real, sizeof(real), &err) < 0)
            pl_fatal(1, "%s", err.text);
        snprintf(dir, sizeof(dir), "%s", real);
    }
    else {
        /* started by a user's own batch script: make a new pilot */
        if (pl_home(home, sizeof(home), &err) < 0
            || pl_pilotdir_create(home, id, sizeof(id), dir, sizeof(dir),
                                  &err) < 0)
            pl_fatal(1, "%s", err.text);
        memset(&info, 0, sizeof(info));
        snprintf(info.id, sizeof(info.id), "%s", id);
        snprintf(info.mode, sizeof(info.mode), "%s",
                 cfg.local ? "local" : "slurm");
        info.job = cfg.job;
        info.created = (double)time(NULL);
        if (pl_info_write(dir, &info, &err) < 0)
            pl_fatal(1, "%s", err.text);
    }
    if (pl_info_read(dir, &info, &err) < 0)
        pl_fatal(1, "%s is not a pilot directory: %s", dir, err.text);
    /* one pilotd per directory: the database has one writer.  Held until
     * exit (the descriptor is close-on-exec, so agents do not keep it). */
    char lockpath[PL_PATH_MAX + 16];
    snprintf(lockpath, sizeof(lockpath), "%s/lock", dir);
    int lockfd = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lockfd < 0)
        pl_fatal(1, "cannot open %s: %s", lockpath, strerror(errno));
    if (flock(lockfd, LOCK_EX | LOCK_NB) < 0)
        pl_fatal(1, "pilot %s already has a running pilotd (%s is locked)",
                 info.id, lockpath);
    if (!cfg.local && info.job != cfg.job) {
        info.job = cfg.job;
        if (pl_info_write(dir, &info, &err) < 0)
            pl_fatal(1, "%s", err.text);
    }
    cfg.dir = dir;
    cfg.id = info.id;
    /* 'pilot up' made them; a pilot started by the user's own batch
     * script, or by an older 'pilot up', gets them here.  Kept across
     * restarts: clients and agents hold them. */
    char keydir[PL_PATH_MAX + 16];
    pl_keys_path(dir, keydir, sizeof(keydir));
    if (pl_keys_create(keydir, &err) < 0)
        pl_fatal(1, "%s", err.text);
    cfg.keydir = keydir;


    if (cfg.no_agent && !cfg.local)
        pl_fatal(2, "--agents 0 needs --local");
    if (cfg.local) {
        cfg.expected_agents = cfg.no_agent ? 0 : 1;
        if (!bind)
            snprintf(addr, sizeof(addr), "127.0.0.1");
        else if (pl_bind_addr(bind, addr, sizeof(addr), NULL, &err) < 0)
            pl_fatal(2, "%s", err.text);
    }
    else {
        const char *nl = getenv("SLURM_JOB_NODELIST");
        int nn = nl ? pl_slurmjob_hostlist_count(nl, &err) : -1;
        if (nn <= 0) {
            const char *nnenv = getenv("SLURM_JOB_NUM_NODES");
            nn = nnenv ? atoi(nnenv) : 0;
        }
        if (nn <= 0)
            pl_fatal(1, "cannot tell how many nodes the job has");
        cfg.expected_agents = nn;
        if (pl_bind_addr(bind, addr, sizeof(addr), &bind_why, &err) < 0)
            pl_fatal(bind ? 2 : 1, "%s", err.text);
    }
    cfg.bind_addr = addr;

    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        pl_fatal(1, "readlink /proc/self/exe: %s", strerror(errno));
    exe[n] = '\0';
    cfg.bindir = dirname(exe);

    if (!fg_log) {
        snprintf(logpath, sizeof(logpath), "%s/logs/pilotd.log", dir);
        if (pl_log_init("pilotd", NULL, logpath) < 0)
            pl_fatal(1, "cannot open %s: %s", logpath, strerror(errno));
    }
    if (bind_why)
        pl_log(LOG_NOTICE, "binding %s: %s (--bind chooses)", addr, bind_why);
    uv_loop_init(&loop);
    struct pl_daemon *d = pl_daemon_new(&loop, &cfg, &err);
    if (!d) {
        pl_log(LOG_ERR, "%s", err.text);
        uv_loop_close(&loop);
        pl_fatal(1, "%s", err.text);
    }
    uv_run(&loop, UV_RUN_DEFAULT);
    rc = pl_daemon_exit_code(d);
    pl_daemon_free(d);
    if (uv_loop_close(&loop) != 0)
        pl_log(LOG_WARNING, "loop closed with handles still open");
    return rc;
}
