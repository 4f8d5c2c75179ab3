/* worker/main.c - pilot-worker: one rank of a pool's MPI job, running
 * the function calls its node's agent sends (docs/pool.md); or, with
 * --once, one function on MPI_COMM_WORLD as a plain MPI program */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/log.h"
#include "proto/msg.h"
#include "proto/poolmsg.h"
#include "proto/spec.h"
#include "proto/strv.h"
#include "worker/call.h"
#include "worker/link.h"

/* seconds: the agent is normally listening before the pool starts */
#define CONNECT_TIMEOUT 10.0
/* seconds MPI_Finalize may take once the agent has closed the socket:
 * the other ranks are normally ending too, but a rank whose node's
 * agent stays up would never join, and the pool must end anyway */
#define FINALIZE_TIMEOUT 10

static const char usage[] =
    "Usage: pilot-worker                 (a rank of a pool: run by pilot)\n"
    "       pilot-worker --once LIB.so:SYMBOL [ARG...]\n"
    "       pilot-worker --once --py MODULE:FUNCTION [ARG...]\n"
    "\n"
    "In a pool, each rank connects to its node's agent and runs the\n"
    "function calls it sends (environment: PILOT_POOL, PILOT_POOL_SOCKET,\n"
    "PILOT_NODE, PILOT_TASK_ID, PILOT_ATTEMPT, PILOT_POOL_GPUS).\n"
    "--once runs one function on every rank of MPI_COMM_WORLD, as a\n"
    "plain MPI program (mpirun -n 4 pilot-worker --once ./lib.so:fn), and\n"
    "exits with the largest of the ranks' codes.  The function's contract\n"
    "is in pilot_fn.h.\n"
    "\n"
    "  --once      run one function and exit\n"
    "  --py        the function is Python's MODULE:FUNCTION\n"
    "  --help      this text\n"
    "  --version   print the version\n";

/* A number from the environment, or 'dflt' if unset; exits if bad */
static unsigned long long env_num(const char *name, unsigned long long dflt,
                                  unsigned long long max)
{
    const char *s = getenv(name);
    unsigned long long v;
    char *end;

    if (!s || !*s)
        return dflt;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || *end || v > max || s[0] == '-')
        pl_fatal(1, "%s='%s' is not a number up to %llu", name, s, max);
    return v;
}

/* The names this node may have in the agent's socket: PILOT_NODE, then
 * SLURMD_NODENAME, then the host name and its first label */
static void node_names(const char *names[4], char host[HOST_NAME_MAX + 1],
                       char shorth[HOST_NAME_MAX + 1])
{
    const char *cand[4];
    int n = 0, k = 0;

    cand[n++] = getenv("PILOT_NODE");
    cand[n++] = getenv("SLURMD_NODENAME");
    host[0] = shorth[0] = '\0';
    if (gethostname(host, HOST_NAME_MAX) == 0) {
        host[HOST_NAME_MAX] = '\0';
        snprintf(shorth, HOST_NAME_MAX + 1, "%.*s",
                 (int)strcspn(host, "."), host);
    }
    cand[n++] = host;
    cand[n++] = shorth;
    for (int i = 0; i < n; i++) {
        bool dup = false;
        if (!cand[i] || !*cand[i])
            continue;
        for (int j = 0; j < k; j++)
            dup = dup || !strcmp(names[j], cand[i]);
        if (!dup)
            names[k++] = cand[i];
    }
    names[k] = NULL;
}

static void on_alarm(int sig)
{
    (void)sig;
    _exit(0);
}

/* The agent closed the socket: the pool is going down */
static int finish(void)
{
    signal(SIGALRM, on_alarm);
    alarm(FINALIZE_TIMEOUT);
    MPI_Finalize();
    /* only MPI_Finalize is timed: what runs at exit (a sanitizer's
     * leak check) may take longer */
    alarm(0);
    return 0;
}

static void send_hello(struct pl_worker *w, unsigned long long job,
                       unsigned long long attempt, const char *nccl)
{
    struct pl_whello h = {
        .pool = (char *)w->pool,
        .job = job,
        .attempt = attempt,
        .world_rank = (uint64_t)w->world_rank,
        .world_size = (uint64_t)w->world_size,
        .pid = getpid(),
        .python = pl_py_built(),
        .nccl = (char *)nccl,
    };
    struct pl_wbuf b;

    pl_whello_encode(&b, &h);
    if (pl_link_send(w->fd, &b) < 0)
        pl_fatal(1, "sending HELLO to the agent: %s", strerror(errno));
    pl_wbuf_destroy(&b);
}

/* The calls, one at a time, until the agent closes the socket */
static int serve(struct pl_worker *w)
{
    for (;;) {
        struct pl_error err = { "" };
        struct pl_wcall c;
        struct pl_msg m;
        void *buf;
        size_t len;
        int rc, code;

        /* ECONNRESET: the agent closed with our last frame unread */
        if ((rc = pl_link_recv(w->fd, &buf, &len)) == 0
            || (rc < 0 && errno == ECONNRESET))
            return finish();
        if (rc < 0) {
            pl_log_error("reading from the agent");
            return 1;
        }
        if (pl_msg_decode(buf, len, &m, &err) < 0) {
            free(buf);
            pl_log(LOG_ERR, "a bad message from the agent: %s", err.text);
            return 1;
        }
        if (m.type != PL_MSG_W_CALL) {
            pl_log(LOG_ERR, "a %s message from the agent, not a call",
                   pl_msg_type_name(m.type));
            rc = -1;
        } else if ((rc = pl_wcall_decode(m.body, &c, &err)) < 0) {
            pl_log(LOG_ERR, "a bad call from the agent: %s", err.text);
        } else if ((int)c.group[c.rank] != w->world_rank) {
            pl_log(LOG_ERR, "call %llu: rank %llu is world rank %llu, not "
                   "this one", (unsigned long long)c.id,
                   (unsigned long long)c.rank,
                   (unsigned long long)c.group[c.rank]);
            pl_wcall_clear(&c);
            rc = -1;
        } else {
            for (uint64_t i = 0; i < c.size && rc == 0; i++)
                if (c.group[i] >= (uint64_t)w->world_size) {
                    pl_log(LOG_ERR, "call %llu: world rank %llu of %d",
                           (unsigned long long)c.id,
                           (unsigned long long)c.group[i], w->world_size);
                    pl_wcall_clear(&c);
                    rc = -1;
                }
        }
        pl_msg_release(&m);
        free(buf);
        if (rc < 0)
            return 1;
        rc = pl_call_run(w, &c, &code);
        pl_wcall_clear(&c);
        if (rc < 0) {
            pl_log_error("writing to the agent");
            return 1;
        }
    }
}

/* --once: the function on MPI_COMM_WORLD; the largest code */
static int once(struct pl_worker *w, int fn, char **argv)
{
    uint64_t *group = malloc((size_t)w->world_size * sizeof(*group));
    struct pl_wcall c = {
        .id = env_num("PILOT_TASK_ID", 0, UINT64_MAX),
        .attempt = env_num("PILOT_ATTEMPT", 1, UINT32_MAX),
        .rank = (uint64_t)w->world_rank,
        .size = (uint64_t)w->world_size,
        .group = group,
        .fn = fn,
        .argv = argv,
        .array_index = -1,
    };
    int code, max;

    if (!group)
        pl_fatal(1, "out of memory");
    for (int i = 0; i < w->world_size; i++)
        group[i] = (uint64_t)i;
    pl_call_run(w, &c, &code);
    free(group);
    MPI_Allreduce(&code, &max, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return max;
}

int main(int argc, char **argv)
{
    struct pl_worker w = { .fd = -1, .pool = "" };
    char host[HOST_NAME_MAX + 1], shorth[HOST_NAME_MAX + 1];
    const char *names[5];
    const char *sock, *threads, *nccl_why;
    struct pl_error err;
    int fn = PL_FN_C, first = 0, req, prov, rc;
    unsigned long long gpus;

    for (int i = 1; i < argc && !first; i++) {
        if (!strcmp(argv[i], "--help")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--version")) {
            printf("pilot-worker %s (pilot_fn.h version %d)\n", PL_VERSION,
                   PILOT_FN_VERSION);
            return 0;
        } else if (!strcmp(argv[i], "--once")) {
            w.fd = -2; /* not a pool */
        } else if (!strcmp(argv[i], "--py")) {
            fn = PL_FN_PY;
        } else if (argv[i][0] == '-' && strcmp(argv[i], "--")) {
            fprintf(stderr, "pilot-worker: error: unknown option '%s'\n%s",
                    argv[i], usage);
            return 2;
        } else {
            first = i + (strcmp(argv[i], "--") == 0);
        }
    }
    if (w.fd == -2 && (!first || first >= argc || !strchr(argv[first], ':'))) {
        fprintf(stderr, "pilot-worker: error: --once needs LIB.so:SYMBOL "
                        "or --py MODULE:FUNCTION\n%s", usage);
        return 2;
    }
    if (w.fd != -2 && (first || fn == PL_FN_PY)) {
        fprintf(stderr, "pilot-worker: error: a function is given only "
                        "with --once\n%s", usage);
        return 2;
    }

    threads = getenv("PILOT_POOL_THREADS");
    req = threads && !strcmp(threads, "multiple") ? MPI_THREAD_MULTIPLE
                                                  : MPI_THREAD_FUNNELED;
    MPI_Init_thread(&argc, &argv, req, &prov);
    MPI_Comm_rank(MPI_COMM_WORLD, &w.world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w.world_size);
    node_names(names, host, shorth);
    pl_log_init("pilot-worker", names[0], NULL);
    if (prov < req)
        pl_log(LOG_WARNING, "rank %d: MPI gives thread level %d, not %d",
               w.world_rank, prov, req);
    gpus = env_num("PILOT_POOL_GPUS", 0, 1024);
    if (!(w.fns = pl_fns_new()) || !(w.py = pl_py_new())
        || (gpus > 0 && !(w.nccl = pl_nccl_open())))
        pl_fatal(1, "out of memory");
    nccl_why = !w.nccl ? "the pool has no GPUs" : pl_nccl_error(w.nccl);

    if (w.fd == -2) {
        w.fd = -1;
        if (w.nccl)
            pl_log(LOG_NOTICE, "rank %d: %s%s", w.world_rank,
                   nccl_why ? "NCCL not used: " : pl_nccl_about(w.nccl),
                   nccl_why ? nccl_why : "");
        rc = once(&w, fn, argv + first);
        MPI_Finalize();
        pl_nccl_free(w.nccl);
        pl_py_free(w.py);
        pl_fns_free(w.fns);
        return rc;
    }

    w.pool = getenv("PILOT_POOL");
    sock = getenv("PILOT_POOL_SOCKET");
    if (!w.pool || !pl_pool_name_ok(w.pool) || !sock || !*sock)
        pl_fatal(1, "PILOT_POOL and PILOT_POOL_SOCKET must name the pool "
                    "(pilot starts pools; --once runs one function)");
    if (!names[0])
        pl_fatal(1, "no node name (PILOT_NODE, SLURMD_NODENAME, hostname)");
    if ((w.fd = pl_link_connect(sock, names, CONNECT_TIMEOUT, &err)) < 0)
        pl_fatal(1, "rank %d: %s", w.world_rank, err.text);
    if (pl_crash_arm(w.fd) < 0)
        pl_fatal(1, "crash handlers: %s", strerror(errno));
    send_hello(&w, env_num("PILOT_TASK_ID", 0, UINT64_MAX),
               env_num("PILOT_ATTEMPT", 1, UINT32_MAX), nccl_why);
    pl_log(LOG_NOTICE, "pool %s rank %d of %d (pid %d): Python %s; %s%s",
           w.pool, w.world_rank, w.world_size, (int)getpid(),
           pl_py_built() ? "yes" : "no (built without it)",
           nccl_why ? "NCCL not used: " : pl_nccl_about(w.nccl),
           nccl_why ? nccl_why : "");
    rc = serve(&w);
    pl_nccl_free(w.nccl);
    pl_py_free(w.py);
    pl_fns_free(w.fns);
    if (rc != 0)
        exit(rc); /* without MPI_Finalize: the pool's job ends */
    return 0;
}
