/* agent/main.c - pilot-agent: options, signals, the loop */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/benchmany.h"
#include "agent/gpuprobe.h"
#include "agent/gpusample.h"
#include "agent/mpi.h"
#include "agent/resources.h"
#include "agent/vet.h"
#include "proto/agentmsg.h"
#include "proto/error.h"
#include "proto/keys.h"
#include "proto/log.h"
#include "proto/msg.h"

static const char usage[] =
    "Usage: pilot-agent --connect tcp://ADDR:PORT --keys DIR [OPTIONS]\n"
    "       pilot-agent --exec-rank -- CMD [ARGS]\n"
    "Run pilot tasks on this node for pilotd; or, as one rank of an MPI\n"
    "task, bind to its entry of PILOT_RANK_CORES and exec CMD.\n"
    "\n"
    "  --connect EP       pilotd's agent endpoint (required)\n"
    "  --keys DIR         the pilot's keys directory (required): CURVE with\n"
    "                     DIR/agent.key, pilotd's key from DIR/server.pub\n"
    "  --node NAME        node name (default: $SLURMD_NODENAME, else the\n"
    "                     host name)\n"
    "  --cores LIST       CPU ids to offer, like 0,1,2 or 0-3 (default: the\n"
    "                     CPUs of this process's affinity mask)\n"
    "  --local            exit when the parent process (pilotd) exits\n"
    "  --dir DIR          the pilot directory: when pilotd is silent, read\n"
    "                     its endpoint file and follow a restarted pilotd\n"
    "  --orphan-timeout S with no word from pilotd for S seconds, stop the\n"
    "                     tasks and exit (default 0: never)\n"
    "  --log FILE         log to FILE instead of stderr\n"
    "  --bench            benchmark mode: report each task running, then\n"
    "                     done (exit 0) at once, without starting it;\n"
    "                     --cores may then name more CPUs than there are\n"
    "                     (virtual slots), and there are no GPUs\n"
    "  --bench-agents N   with --bench: N bench agents in this process,\n"
    "                     nodes NAME-0..NAME-(N-1) (NAME: --node, default\n"
    "                     bench), each with --cores slots (default 0-3)\n"
    "  --gpu-sample S     on a node with GPUs, sample their use through\n"
    "                     NVML every S seconds for the tasks' figures\n"
    "                     (default: $PILOT_GPU_SAMPLE, else 5; 0: never)\n"
    "  --log-level LEVEL  err, warning, notice (default), info or debug\n"
    "  --help             show this help\n"
    "  --version          print the version and the protocol\n"
    "\n"
    "GPUs are Slurm's (SLURM_STEP_GPUS, SLURM_JOB_GPUS), checked with NVML\n"
    "or the CUDA driver when either loads.  PILOT_NVML_LIBRARY and\n"
    "PILOT_CUDA_LIBRARY name the libraries to load instead of\n"
    "libnvidia-ml.so.1 and libcuda.so.1; set empty, that one is not used.\n";

struct opts {
    const char *connect;
    const char *keys;
    const char *node;
    const char *cores;
    const char *log;
    const char *dir;
    double orphan_after;
    double gpu_sample;
    bool local;
    bool bench;
    uint32_t bench_agents; /* --bench-agents: 0, one agent (ours) */
};

/* Seconds between GPU samples: 0 (none), or 0.01 to 3600. */
static int gpu_sample_parse(const char *s, double *v)
{
    char *end;

    errno = 0;
    *v = strtod(s, &end);
    if (errno || end == s || *end || !(*v == 0 || (*v >= 0.01 && *v <= 3600)))
        return -1;
    return 0;
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
    static const struct option longopts[] = {
        { "connect", required_argument, NULL, 'c' },
        { "keys", required_argument, NULL, 'k' },
        { "node", required_argument, NULL, 'n' },
        { "cores", required_argument, NULL, 'C' },
        { "local", no_argument, NULL, 'L' },
        { "log", required_argument, NULL, 'l' },
        { "log-level", required_argument, NULL, 'v' },
        { "dir", required_argument, NULL, 'd' },
        { "orphan-timeout", required_argument, NULL, 'o' },
        { "bench", no_argument, NULL, 'B' },
        { "bench-agents", required_argument, NULL, 'N' },
        { "gpu-sample", required_argument, NULL, 'G' },
        { "help", no_argument, NULL, 'h' },
        { "version", no_argument, NULL, 'V' },
        { NULL, 0, NULL, 0 },
    };
    int c;
    int level;
    uint64_t *cores;
    uint32_t ncores;
    struct pl_error err;

    memset(o, 0, sizeof(*o));
    o->gpu_sample = PL_AGENT_GPU_SAMPLE;
    if (getenv("PILOT_GPU_SAMPLE")
        && gpu_sample_parse(getenv("PILOT_GPU_SAMPLE"), &o->gpu_sample) < 0)
        pl_fatal(2, "PILOT_GPU_SAMPLE: want seconds, 0 or 0.01 to 3600");
    opterr = 0; /* one line of our own instead of getopt's */
    while ((c = getopt_long(argc, argv, ":", longopts, NULL)) != -1) {
        switch (c) {
        case 'c':
            o->connect = optarg;
            break;
        case 'k':
            o->keys = optarg;
            break;
        case 'n':
            if (!pl_node_name_ok(optarg))
                pl_fatal(2, "--node: want 1 to %d of A-Z a-z 0-9 . _ -",
                         PL_NODE_NAME_MAX);
            o->node = optarg;
            break;
        case 'C':
            if (pl_cpulist_parse(optarg, &cores, &ncores, &err) < 0)
                pl_fatal(2, "--cores: %s", err.text);
            free(cores);
            if (ncores == 0)
                pl_fatal(2, "--cores: empty list");
            o->cores = optarg;
            break;
        case 'L':
            o->local = true;
            break;
        case 'B':
            o->bench = true;
            break;
        case 'N': {
            char *end;
            errno = 0;
            unsigned long v = strtoul(optarg, &end, 10);
            if (errno || end == optarg || *end || v < 1 || v > 100000)
                pl_fatal(2, "--bench-agents: want 1 to 100000");
            o->bench_agents = (uint32_t)v;
            break;
        }
        case 'd':
            o->dir = optarg;
            break;
        case 'o': {
            char *end;
            errno = 0;
            o->orphan_after = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(o->orphan_after >= 0)
                || o->orphan_after > 1e7)
                pl_fatal(2, "--orphan-timeout: want seconds, 0 to 1e7");
            break;
        }
        case 'G':
            if (gpu_sample_parse(optarg, &o->gpu_sample) < 0)
                pl_fatal(2, "--gpu-sample: want seconds, 0 or 0.01 to 3600");
            break;
        case 'l':
            o->log = optarg;
            break;
        case 'v':
            if ((level = pl_log_level_parse(optarg)) < 0)
                pl_fatal(2, "--log-level: unknown level '%s'", optarg);
            pl_log_level = level;
            break;
        case 'h':
            fputs(usage, stdout);
            exit(0);
        case 'V':
            printf("pilot-agent %s (protocol %d)\n", PL_VERSION,
                   PL_PROTO_VERSION);
            exit(0);
        case ':':
            pl_fatal(2, "%s needs a value (see --help)", argv[optind - 1]);
        default:
            if (optopt)
                pl_fatal(2, "unknown option '-%c' (see --help)", optopt);
            pl_fatal(2, "unknown option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (optind < argc)
        pl_fatal(2, "unexpected argument '%s' (see --help)", argv[optind]);
    if (!o->connect)
        pl_fatal(2, "--connect is required (see --help)");
    if (!o->keys)
        pl_fatal(2, "--keys is required (see --help)");
    if (o->bench_agents && !o->bench)
        pl_fatal(2, "--bench-agents goes with --bench");
}

/* Make 'path' our stderr.  N.B. rather than pl_log_init(path): its FILE
 * is not close-on-exec and would leak into every task, while fd 2 is
 * replaced in each task by the task's own stderr.  ASan and libc
 * messages land in the log this way too. */
static void log_to(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

    if (fd < 0)
        pl_fatal(1, "--log %s: %s", path, strerror(errno));
    if (fd != STDERR_FILENO) {
        if (dup2(fd, STDERR_FILENO) < 0)
            pl_fatal(1, "--log %s: %s", path, strerror(errno));
        close(fd);
    }
}

/* One line per GPU at start: Slurm's id, how tasks address it, and what
 * the GPU library says of it. */
static void log_gpus(const struct pl_resources *r)
{
    for (size_t i = 0; i < pl_resources_ngpus(r); i++) {
        const struct pl_gpuprobe_dev *d = pl_resources_gpu_dev(r, i);
        const char *id = pl_resources_gpu_id(r, i);
        const char *visible = pl_resources_gpu_visible(r, i);
        char mem[32] = "memory unknown";

        if (!d) {
            pl_log(LOG_NOTICE, "GPU %s (CUDA_VISIBLE_DEVICES entry %s)", id,
                   visible);
            continue;
        }
        if (d->memory)
            snprintf(mem, sizeof(mem), "%.1f GiB",
                     (double)d->memory / (1024.0 * 1024 * 1024));
        pl_log(LOG_NOTICE, "GPU %s (CUDA_VISIBLE_DEVICES entry %s): %s, %s, "
               "%s", id, visible, d->name[0] ? d->name : "model unknown", mem,
               d->uuid[0] ? d->uuid : "UUID unknown");
    }
}

static void signal_cb(uv_signal_t *h, int signum)
{
    pl_agent_shutdown(h->data, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

int main(int argc, char **argv)
{
    struct opts o;
    struct pl_error err;
    struct pl_gpuprobe *probe = NULL;
    struct pl_resources *res;
    struct pl_agent *a;
    struct pl_keys_peer keys;
    uv_signal_t sigterm;
    uv_signal_t sigint;
    const char *node;
    size_t ndevs;
    int rc;

    /* one rank of an MPI task, under srun or mpirun: no loop, no log */
    if (argc >= 2 && !strcmp(argv[1], "--exec-rank")) {
        if (argc < 3 || strcmp(argv[2], "--"))
            return pl_mpi_exec_rank(NULL);
        return pl_mpi_exec_rank(argv + 3);
    }
    /* the node's checks, for our own vetting (agent/vet.c) */
    if (argc >= 2 && !strcmp(argv[1], "--vet-child"))
        return pl_vet_child_main(argc, argv);
    /* the GPU sampler's child (agent/gpusample.h): NVML, lines out */
    if (argc >= 2 && !strcmp(argv[1], "--gpu-sampler"))
        return pl_gpusample_main(argc - 1, argv + 1);
    pl_log_init("pilot-agent", NULL, NULL);
    parse_opts(argc, argv, &o);
    if (o.local && prctl(PR_SET_PDEATHSIG, SIGTERM) < 0)
        pl_fatal(1, "prctl(PR_SET_PDEATHSIG): %s", strerror(errno));
    /* a write to a Python worker that died must fail (EPIPE), not kill
     * us; our children get every signal at its default (agent/spawn.h) */
    signal(SIGPIPE, SIG_IGN);
    if (o.log)
        log_to(o.log);
    /* many bench agents in this process: agent/benchmany.c */
    if (o.bench_agents) {
        struct pl_benchmany_opts bo = {
            .connect = o.connect, .keys = o.keys, .cores = o.cores,
            .node = o.node ? o.node : "bench", .agents = o.bench_agents,
        };
        pl_log_init("pilot-agent", bo.node, NULL);
        return pl_benchmany_main(&bo);
    }

    if (!(node = o.node))
        node = getenv("SLURMD_NODENAME");
    pl_log_init("pilot-agent", node, NULL); /* for the GPU lines below */
    struct pl_gpuprobe_spec gspec = {
        .nvml_library = getenv("PILOT_NVML_LIBRARY"),
        .cuda_library = getenv("PILOT_CUDA_LIBRARY"),
    };
    struct pl_resources_spec spec = { .node = node, .cores = o.cores };
    /* a bench agent has cores only: they are slots, it runs nothing */
    if (!o.bench) {
        if (!(probe = pl_gpuprobe_new(&gspec)))
            pl_fatal(1, "GPU probe: %s", strerror(errno));
        const struct pl_gpuprobe_dev *devs = pl_gpuprobe_devs(probe, &ndevs);
        spec.step_gpus = getenv("SLURM_STEP_GPUS");
        spec.job_gpus = getenv("SLURM_JOB_GPUS");
        spec.cuda_visible = getenv("CUDA_VISIBLE_DEVICES");
        spec.gpu_probe = pl_gpuprobe_reason(probe);
        spec.gpu_lib = pl_gpuprobe_lib(probe);
        spec.gpu_devs = devs;
        spec.gpu_ndevs = ndevs;
    }
    res = pl_resources_new(&spec, &err); /* copies what it keeps */
    pl_gpuprobe_free(probe);
    if (!res)
        pl_fatal(1, "%s", err.text);
    /* pilotd refuses any other: say so now, not at every register */
    if (!pl_node_name_ok(pl_resources_node(res))) {
        char name[PL_NODE_NAME_MAX + 1];
        bool cut = strlen(pl_resources_node(res)) >= sizeof(name);
        snprintf(name, sizeof(name), "%s", pl_resources_node(res));
        pl_resources_free(res);
        pl_fatal(1, "the node's name '%s%s' is not 1 to %d of A-Z a-z 0-9 "
                 ". _ -: give one with --node", name, cut ? "..." : "",
                 PL_NODE_NAME_MAX);
    }
    pl_log_init("pilot-agent", pl_resources_node(res), NULL);
    log_gpus(res);
    /* the endpoint it reads when pilotd is silent must be the pilot's */
    char real[PL_PATH_MAX];
    if (o.dir && pl_pilotdir_check(o.dir, real, sizeof(real), &err) < 0) {
        pl_resources_free(res);
        pl_fatal(1, "%s", err.text);
    }
    if (pl_keys_load_peer(o.keys, "agent", &keys, &err) < 0) {
        pl_resources_free(res);
        pl_fatal(1, "%s", err.text);
    }
    a = pl_agent_new(o.connect, &keys, &res, &err);
    explicit_bzero(&keys, sizeof(keys)); /* the agent has its copy */
    if (!a) {
        pl_resources_free(res);
        pl_fatal(1, "%s", err.text);
    }
    pl_agent_set_recovery(a, o.dir, o.orphan_after);
    pl_agent_set_bench(a, o.bench);
    pl_agent_set_gpu_sample(a, o.gpu_sample);
    if (pl_agent_pool_listen(a, o.keys, &err) < 0)
        pl_log(LOG_WARNING, "no pools on this node: %s", err.text);
    uv_signal_init(pl_agent_loop(a), &sigterm);
    uv_signal_init(pl_agent_loop(a), &sigint);
    sigterm.data = sigint.data = a;
    if ((rc = uv_signal_start(&sigterm, signal_cb, SIGTERM)) < 0
        || (rc = uv_signal_start(&sigint, signal_cb, SIGINT)) < 0)
        pl_errprintf(&err, "signal watcher: %s", uv_strerror(rc));
    if (rc < 0 || pl_agent_start(a, &err) < 0) {
        pl_log(LOG_ERR, "%s", err.text);
        uv_close((uv_handle_t *)&sigterm, NULL);
        uv_close((uv_handle_t *)&sigint, NULL);
        pl_agent_free(a);
        return 1;
    }
    uv_run(pl_agent_loop(a), UV_RUN_DEFAULT);
    uv_close((uv_handle_t *)&sigterm, NULL);
    uv_close((uv_handle_t *)&sigint, NULL);
    rc = pl_agent_exit_code(a);
    pl_agent_free(a);
    return rc;
}
