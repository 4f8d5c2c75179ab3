/* agent/agent.c - the agent: its link to pilotd, and the tasks it runs
 *
 * One DEALER to pilotd, watched by pl_zwatch on the agent's one loop.
 * REGISTER (again every 2 s until WELCOME), then PULL when cores are free
 * and we have not pulled since the last RUN; RUN spawns tasks (one rank
 * each: a task is known by id, attempt and rank, and several ranks of one
 * task may run here), KILL and EXIT stop them.  State changes are
 * collected during a loop iteration and leave as one EVENTS message from
 * a zero-timeout timer, followed by a PULL if one is due (so pilotd frees
 * the cores before it answers).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "agent/agent.h"
#include "agent/bind_cpu.h"
#include "agent/bind_cuda.h"
#include "agent/comm.h"
#include "agent/env.h"
#include "agent/mpi.h"
#include "agent/task.h"
#include "proto/keys.h"
#include "proto/log.h"
#include "proto/msg.h"
#include "proto/pilotdir.h"
#include "proto/state.h"
#include "proto/zmon.h"
#include "proto/zsock.h"
#include "proto/zwatch.h"

extern char **environ;

#define REGISTER_MS 2000     /* REGISTER again until WELCOME */
#define EXIT_GRACE 5.0       /* s from SIGTERM to SIGKILL on EXIT */
#define EXIT_WAIT_MS 5000    /* after the grace, give up on the tasks */
#define HEARTBEAT_MAX 3600.0 /* s: a longer period is a bad WELCOME */
#define KILL_GRACE_MAX 1e6   /* s */
#define RUN_MAX 100000       /* tasks in one RUN */
#define RESEND_S 10.0        /* an end not acknowledged this long goes again */
#define WATCH_MS 1000        /* how often we check that pilotd is there */
#define REREAD_S 6.0         /* silent pilotd: read its endpoint file again */
#define HANDSHAKE_LOG_MS 60000 /* between two handshake failure lines */

/* A state change, waiting to go out in the next EVENTS message. */
struct event {
    uint64_t id;
    uint64_t attempt;
    uint64_t rank;
    int state;
    double time;       /* seconds since the epoch */
    int pid;           /* 0: none */
    int exit_code;     /* -1: none */
    int signal;        /* -1: none */
    long maxrss_kb;    /* -1: unknown */
    char *error;       /* NULL, or owned */
    uint64_t seq;      /* unacked: the EVENTS message that last carried it */
    double sent;       /* unacked: when (uv_now, s) */
};

/* A message that got EAGAIN, sent again on POLLOUT. */
struct outmsg {
    struct outmsg *next;
    char *data;        /* malloc()ed, as msgpack_sbuffer_release() gives */
    size_t size;
};

struct pl_agent {
    uv_signal_t sigchld;   /* reaps the tasks (pl_task_reap()) */
    uv_loop_t loop;
    uv_timer_t flush;      /* zero timeout: the iteration's events leave */
    uv_timer_t reg;        /* REGISTER again until WELCOME */
    uv_timer_t heartbeat;
    uv_timer_t deadline;   /* bounds the wait for tasks at shutdown */
    uv_timer_t watch;      /* is pilotd still there? */
    void *zctx;
    void *zsock;               /* DEALER, a CURVE client of pilotd */
    struct pl_zwatch *zw;
    struct pl_zmon *mon;       /* its handshakes: refused, failed */
    struct pl_keys_peer keys;
    uint64_t handshake_log_ms; /* last handshake failure logged */
    int exit_code;             /* 1 once pilotd refused our key */
    char endpoint[256];
    char node[256];        /* as pilotd calls us (WELCOME), else ours */
    struct pl_resources *res;
    struct pl_bind_cpu *cpu;
    struct pl_bind_cuda *cuda;
    int devnull;           /* the tasks' stdin */
    uint64_t seq;          /* of the next message we send */
    struct pl_task **running;  /* spawned, not exited */
    size_t nrunning;
    size_t cap_running;
    struct pl_task **dead;     /* exited: freed from the flush timer */
    size_t ndead;
    size_t cap_dead;
    struct event *events;
    size_t nevents;
    size_t cap_events;
    /* Ends sent but not yet committed by pilotd (no ACK): sent again in
     * every REGISTER, and on their own after RESEND_S. */
    struct event *unacked;
    size_t nunacked;
    size_t cap_unacked;
    double heard;          /* last message from pilotd (uv_now, s) */
    uint64_t last_run;     /* seq of the last RUN read from this pilotd */
    char instance[96];     /* the pilotd that welcomed us */
    double reread;         /* last read of the endpoint file (uv_now, s) */
    char dir[PL_PATH_MAX]; /* the pilot directory, "" if not given */
    double orphan_after;   /* s without pilotd before we give up; 0 never */
    struct outmsg *outq;       /* FIFO of unsent messages */
    struct outmsg **outq_tail;
    size_t noutq;
    bool sigchld_ok;       /* 'sigchld' initialised: close it */
    bool welcomed;
    bool pulled;           /* sent PULL since the last RUN */
    bool exiting;
    bool finished;         /* uv_stop() called */
    bool bench;            /* run nothing: report each task done at once */
};

static double now_epoch(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* 'v' (an array of '*cap' elements of 'size' bytes) grown to hold at least
 * 'n' + 1, or NULL (ENOMEM; 'v' is unchanged). */
static void *grow(void *v, size_t *cap, size_t n, size_t size)
{
    size_t ncap = *cap ? *cap : 16;

    if (n + 1 <= *cap)
        return v;
    while (ncap < n + 1)
        ncap *= 2;
    if (!(v = realloc(v, ncap * size)))
        return NULL;
    *cap = ncap;
    return v;
}

/* ---- sending ---- */

static void pack_event(msgpack_packer *pk, const struct event *e);
static void watch_cb(uv_timer_t *h);

static void want_pollout(struct pl_agent *a, bool on)
{
    pl_zwatch_set_events(a->zw, on ? ZMQ_POLLIN | ZMQ_POLLOUT : ZMQ_POLLIN);
}

/* Send the message built in 'w' (destroyed here), or queue it if the
 * socket would block: messages leave in order. */
static void send_wbuf(struct pl_agent *a, struct pl_wbuf *w, int type)
{
    struct outmsg *m;

    if (!a->outq
        && pl_zsock_send(a->zsock, NULL, 0, w->sb.data, w->sb.size) == 0) {
        pl_log(LOG_DEBUG, "sent %s (%zu bytes)", pl_msg_type_name(type),
               w->sb.size);
        pl_wbuf_destroy(w);
        return;
    }
    if (a->outq || errno == EAGAIN || errno == EINTR) {
        if (!(m = calloc(1, sizeof(*m)))) {
            pl_log(LOG_WARNING, "%s dropped: out of memory",
                   pl_msg_type_name(type));
            pl_wbuf_destroy(w);
            return;
        }
        m->size = w->sb.size;
        m->data = msgpack_sbuffer_release(&w->sb);
        *a->outq_tail = m;
        a->outq_tail = &m->next;
        a->noutq++;
        want_pollout(a, true);
        pl_log(LOG_DEBUG, "%s queued (%zu waiting)", pl_msg_type_name(type),
               a->noutq);
        return;
    }
    pl_log(LOG_WARNING, "send %s: %s", pl_msg_type_name(type),
           zmq_strerror(errno));
    pl_wbuf_destroy(w);
}

/* Send what waits in the queue, until the socket would block again. */
static void drain_outq(struct pl_agent *a)
{
    struct outmsg *m;

    while ((m = a->outq)) {
        if (pl_zsock_send(a->zsock, NULL, 0, m->data, m->size) < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return;
            pl_log(LOG_WARNING, "send: %s", zmq_strerror(errno));
        }
        a->outq = m->next;
        if (!a->outq)
            a->outq_tail = &a->outq;
        a->noutq--;
        free(m->data);
        free(m);
    }
    want_pollout(a, false);
}

static void send_register(struct pl_agent *a)
{
    struct pl_wbuf w;
    const uint64_t *cores;
    uint32_t ncores;

    cores = pl_resources_cores(a->res, &ncores);
    pl_wbuf_init(&w, PL_MSG_REGISTER, a->seq++, 7);
    pl_w_kuint(&w.pk, "last_run", a->last_run);
    pl_w_kstr(&w.pk, "node", pl_resources_node(a->res));
    pl_w_kuint(&w.pk, "pid", (uint64_t)getpid());
    pl_w_kuintv(&w.pk, "cores", cores, ncores);
    pl_w_kstrv(&w.pk, "gpus", pl_resources_gpu_ids(a->res));
    pl_w_key(&w.pk, "running");
    msgpack_pack_array(&w.pk, (uint32_t)a->nrunning);
    for (size_t i = 0; i < a->nrunning; i++) {
        const struct pl_task_spec *s = pl_task_spec(a->running[i]);
        msgpack_pack_map(&w.pk, 3);
        pl_w_kuint(&w.pk, "id", s->id);
        pl_w_kuint(&w.pk, "attempt", s->attempt);
        pl_w_kuint(&w.pk, "rank", s->rank);
    }
    /* what ended while pilotd could not commit it (a restarted pilotd) */
    pl_w_key(&w.pk, "ended");
    msgpack_pack_array(&w.pk, (uint32_t)a->nunacked);
    for (size_t i = 0; i < a->nunacked; i++)
        pack_event(&w.pk, &a->unacked[i]);
    send_wbuf(a, &w, PL_MSG_REGISTER);
}

static void send_pull(struct pl_agent *a)
{
    struct pl_wbuf w;

    pl_wbuf_init(&w, PL_MSG_PULL, a->seq++, 2);
    pl_w_kuint(&w.pk, "free_cores", pl_resources_free_cores(a->res));
    pl_w_kuint(&w.pk, "free_gpus", pl_resources_free_gpus(a->res));
    send_wbuf(a, &w, PL_MSG_PULL);
    a->pulled = true;
}

static void pack_event(msgpack_packer *pk, const struct event *e)
{
    uint32_t n = 5 + (e->pid > 0) + (e->exit_code >= 0) + (e->signal >= 0)
                 + (e->maxrss_kb >= 0) + (e->error != NULL);

    msgpack_pack_map(pk, n);
    pl_w_kuint(pk, "id", e->id);
    pl_w_kuint(pk, "attempt", e->attempt);
    pl_w_kuint(pk, "rank", e->rank);
    pl_w_kstr(pk, "state", pl_state_name(e->state));
    pl_w_kdouble(pk, "time", e->time);
    if (e->pid > 0)
        pl_w_kuint(pk, "pid", (uint64_t)e->pid);
    if (e->exit_code >= 0)
        pl_w_kint(pk, "exit_code", e->exit_code);
    if (e->signal >= 0)
        pl_w_kint(pk, "signal", e->signal);
    if (e->maxrss_kb >= 0)
        pl_w_kuint(pk, "maxrss_kb", (uint64_t)e->maxrss_kb);
    if (e->error)
        pl_w_kstr(pk, "error", e->error);
}

static double now_s(struct pl_agent *a)
{
    return (double)uv_now(&a->loop) / 1000.0;
}

/* Keep the end 'e' (its error taken over) until pilotd acknowledges the
 * EVENTS message 'seq'.  Out of memory, it is only sent once. */
static void keep_unacked(struct pl_agent *a, struct event *e, uint64_t seq)
{
    struct event *v;

    if (!(v = grow(a->unacked, &a->cap_unacked, a->nunacked, sizeof(*v)))) {
        pl_log(LOG_WARNING, "task %llu: cannot keep its end until pilotd "
               "commits it: out of memory", (unsigned long long)e->id);
        free(e->error);
        return;
    }
    a->unacked = v;
    v[a->nunacked] = *e;
    v[a->nunacked].seq = seq;
    v[a->nunacked].sent = now_s(a);
    a->nunacked++;
}

static void send_events(struct pl_agent *a)
{
    struct pl_wbuf w;
    uint64_t seq = a->seq++;

    if (a->nevents == 0) {
        a->seq--;
        return;
    }
    pl_wbuf_init(&w, PL_MSG_EVENTS, seq, 1);
    pl_w_key(&w.pk, "events");
    msgpack_pack_array(&w.pk, (uint32_t)a->nevents);
    for (size_t i = 0; i < a->nevents; i++) {
        struct event *e = &a->events[i];
        pack_event(&w.pk, e);
        if (pl_state_final(e->state))
            keep_unacked(a, e, seq);
        else
            free(e->error);
    }
    a->nevents = 0;
    send_wbuf(a, &w, PL_MSG_EVENTS);
}

/* Send again, in one EVENTS message, the ends pilotd has not acknowledged
 * for RESEND_S (its commit failed, or the message was lost with it). */
static void resend_unacked(struct pl_agent *a)
{
    struct pl_wbuf w;
    double t = now_s(a);
    uint32_t n = 0;
    uint64_t seq;

    for (size_t i = 0; i < a->nunacked; i++)
        n += t - a->unacked[i].sent >= RESEND_S;
    if (n == 0 || !a->welcomed)
        return;
    seq = a->seq++;
    pl_wbuf_init(&w, PL_MSG_EVENTS, seq, 1);
    pl_w_key(&w.pk, "events");
    msgpack_pack_array(&w.pk, n);
    for (size_t i = 0; i < a->nunacked; i++) {
        struct event *e = &a->unacked[i];
        if (t - e->sent < RESEND_S)
            continue;
        pack_event(&w.pk, e);
        e->seq = seq;
        e->sent = t;
    }
    pl_log(LOG_NOTICE, "sending %u task ends again: pilotd has not "
           "committed them", n);
    send_wbuf(a, &w, PL_MSG_EVENTS);
}

/* Forget the ends that travelled in message 'seq' ('below': in any
 * message before it): pilotd committed them. */
static void drop_unacked(struct pl_agent *a, uint64_t seq, bool below)
{
    size_t k = 0;

    for (size_t i = 0; i < a->nunacked; i++) {
        struct event *e = &a->unacked[i];
        if (below ? e->seq < seq : e->seq == seq)
            free(e->error);
        else
            a->unacked[k++] = *e;
    }
    a->nunacked = k;
}

/* ---- events and the flush timer ---- */

static void flush_cb(uv_timer_t *h);

/* Make sure the flush timer runs at the start of the next iteration. */
static void kick(struct pl_agent *a)
{
    if (!a->finished && !uv_is_active((uv_handle_t *)&a->flush))
        uv_timer_start(&a->flush, flush_cb, 0, 0);
}

/* A new event for the next EVENTS message, or NULL (logged: it is lost). */
static struct event *event_add(struct pl_agent *a, uint64_t id,
                               uint64_t attempt, uint64_t rank, int state)
{
    struct event *e;

    if (!(e = grow(a->events, &a->cap_events, a->nevents, sizeof(*e)))) {
        pl_log(LOG_WARNING, "task %llu: event '%s' lost: out of memory",
               (unsigned long long)id, pl_state_name(state));
        return NULL;
    }
    a->events = e;
    e = &a->events[a->nevents++];
    memset(e, 0, sizeof(*e));
    e->id = id;
    e->attempt = attempt;
    e->rank = rank;
    e->state = state;
    e->time = now_epoch();
    e->exit_code = -1;
    e->signal = -1;
    e->maxrss_kb = -1;
    kick(a);
    return e;
}

/* A failure of a task that never ran. */
static void event_failed(struct pl_agent *a, const struct pl_task_spec *s,
                         const char *error)
{
    struct event *e = event_add(a, s->id, s->attempt, s->rank, PL_ST_FAILED);

    if (e)
        e->error = strdup(error);
}

/* The event for 't' in its current state. */
static void event_task(struct pl_agent *a, const struct pl_task *t)
{
    const struct pl_task_spec *s = pl_task_spec(t);
    struct event *e = event_add(a, s->id, s->attempt, s->rank,
                                pl_task_state(t));

    if (!e)
        return;
    if (pl_task_running(t)) {
        e->pid = pl_task_pid(t);
        return;
    }
    e->exit_code = pl_task_exit_code(t);
    if (pl_task_pid(t) > 0)
        e->signal = pl_task_signal(t);
    e->maxrss_kb = pl_task_maxrss_kb(t);
    if (pl_task_error(t))
        e->error = strdup(pl_task_error(t));
}

static void maybe_pull(struct pl_agent *a)
{
    if (a->welcomed && !a->pulled && !a->exiting
        && pl_resources_free_cores(a->res) > 0)
        send_pull(a);
}

static void finish(struct pl_agent *a)
{
    uv_timer_stop(&a->flush);
    uv_timer_stop(&a->reg);
    uv_timer_stop(&a->heartbeat);
    uv_timer_stop(&a->deadline);
    uv_timer_stop(&a->watch);
    pl_zwatch_stop(a->zw);
    a->finished = true;
    uv_stop(&a->loop);
    pl_log(LOG_NOTICE, "stopped");
}

static void flush_cb(uv_timer_t *h)
{
    struct pl_agent *a = h->data;

    for (size_t i = 0; i < a->ndead; i++)
        pl_task_free(a->dead[i]);
    a->ndead = 0;
    send_events(a);
    maybe_pull(a);
    if (a->exiting && a->nrunning == 0 && !a->outq)
        finish(a);
}

/* ---- tasks ---- */

/* A running rank of task 'id': the one of 'rank' if it runs here, else
 * any other of an attempt other than 'attempt', else NULL.  (Ranks of one
 * attempt may share the node; two attempts of a task may not.) */
static struct pl_task *find_task(struct pl_agent *a, uint64_t id,
                                 uint64_t attempt, uint64_t rank)
{
    struct pl_task *other = NULL;

    for (size_t i = 0; i < a->nrunning; i++) {
        const struct pl_task_spec *s = pl_task_spec(a->running[i]);
        if (s->id != id)
            continue;
        if (s->attempt == attempt && s->rank == rank)
            return a->running[i];
        if (s->attempt != attempt && !other)
            other = a->running[i];
    }
    return other;
}

static void task_exit_cb(struct pl_task *t, void *arg)
{
    struct pl_agent *a = arg;
    const struct pl_task_spec *s = pl_task_spec(t);
    char rss[32] = "";

    pl_resources_release(a->res, s->cores, s->ncores, s->gpus, s->ngpus);
    if (pl_task_maxrss_kb(t) >= 0)
        snprintf(rss, sizeof(rss), ", maxrss %ld kB", pl_task_maxrss_kb(t));
    if (pl_task_signal(t))
        pl_log(LOG_INFO, "task %llu rank %llu: %s (signal %d, %.3f s%s)",
               (unsigned long long)s->id, (unsigned long long)s->rank,
               pl_state_name(pl_task_state(t)), pl_task_signal(t),
               pl_task_runtime(t), rss);
    else
        pl_log(LOG_INFO, "task %llu rank %llu: %s (exit %d, %.3f s%s)",
               (unsigned long long)s->id, (unsigned long long)s->rank,
               pl_state_name(pl_task_state(t)), pl_task_exit_code(t),
               pl_task_runtime(t), rss);
    event_task(a, t);
    for (size_t i = 0; i < a->nrunning; i++) {
        if (a->running[i] == t) {
            a->running[i] = a->running[--a->nrunning];
            break;
        }
    }
    /* N.B. not freed here, inside its own callback: the flush timer does
     * it.  'dead' has room: see make_room(). */
    a->dead[a->ndead++] = t;
    kick(a);
}

/* The environment of the task of 's' (docs/protocol.md), or NULL. */
static struct pl_env *task_env(struct pl_agent *a,
                               const struct pl_task_spec *s,
                               struct pl_error *errp)
{
    struct pl_env *env;

    if (!(env = pl_env_new(environ))) {
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    for (char **e = s->env; e && *e; e++)
        if (pl_env_put(env, *e) < 0)
            goto nomem;
    if (pl_env_setf(env, "PILOT_TASK_ID", "%llu",
                    (unsigned long long)s->id) < 0
        || pl_env_set(env, "PILOT_NODE", a->node) < 0)
        goto nomem;
    if (pl_comm_env(s, a->node, env, errp) < 0
        || pl_bind_cpu_env(a->cpu, s, env, errp) < 0
        /* an MPI launcher keeps the node's GPU lists: each rank picks
         * its own GPUs from them (pl_mpi_exec_rank()) */
        || (s->comm != PL_COMM_MPI
            && pl_bind_cuda_env(a->cuda, s, env, errp) < 0))
        goto error;
    return env;
nomem:
    pl_errprintf(errp, "out of memory");
error:
    pl_env_free(env);
    return NULL;
}

/* Write 'text' to 'path' (0600), creating its directory (0700). */
static int write_file(const char *path, const char *text,
                      struct pl_error *errp)
{
    int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
    int fd;
    char *dir;
    const char *slash = strrchr(path, '/');

    if ((fd = open(path, flags, 0600)) < 0 && errno == ENOENT && slash
        && slash != path && (dir = strndup(path, (size_t)(slash - path)))) {
        (void)pl_mkdirs(dir, 0700);
        free(dir);
        fd = open(path, flags, 0600);
    }
    if (fd < 0)
        return pl_errprintf(errp, "%s: %s", path, strerror(errno));
    size_t len = strlen(text);
    ssize_t n = write(fd, text, len);
    int saved = errno;
    if (close(fd) < 0 && n == (ssize_t)len) {
        saved = errno;
        n = -1;
    }
    if (n != (ssize_t)len) {
        errno = n < 0 ? saved : EIO;
        return pl_errprintf(errp, "%s: %s", path, strerror(errno));
    }
    return 0;
}

/* Turn the entry of an MPI task into its launcher (agent/mpi.h): the
 * argv of 's' becomes srun's or mpirun's, which runs the task's argv on
 * every rank's host, and 'env' gets what the launcher needs. */
static int mpi_launcher(struct pl_task_spec *s, struct pl_env *env,
                        struct pl_error *errp)
{
    char self[4096];
    char *hostfile = NULL, *rankfile = NULL;
    char *text = NULL;
    char **argv;
    ssize_t n;

    if ((n = readlink("/proc/self/exe", self, sizeof(self) - 1)) < 0)
        return pl_errprintf(errp, "/proc/self/exe: %s", strerror(errno));
    self[n] = '\0';
    /* srun reads a hostfile (SLURM_HOSTFILE), mpirun a rankfile */
    bool srun = s->launcher == PL_LAUNCHER_SRUN;
    char **path = srun ? &hostfile : &rankfile;
    if (asprintf(path, "%s.%s", s->out, srun ? "hosts" : "ranks") < 0) {
        *path = NULL;
        goto nomem;
    }
    if (!(text = srun ? pl_mpi_hostfile(s) : pl_mpi_rankfile(s)))
        goto nomem;
    if (write_file(*path, text, errp) < 0)
        goto error;
    if (pl_mpi_env(s, hostfile, geteuid() == 0, env, errp) < 0)
        goto error;
    if (!(argv = pl_mpi_argv(s, self)))
        goto nomem;
    if (rankfile) {
        /* mpirun RANKFILE-less maps ranks in its own (sorted) node order */
        size_t na = pl_strv_len(argv);
        char **v = calloc(na + 3, sizeof(*v));
        if (!v) {
            pl_strv_free(argv);
            goto nomem;
        }
        v[0] = argv[0];
        v[1] = strdup("--rankfile");
        v[2] = rankfile;
        rankfile = NULL;
        memcpy(v + 3, argv + 1, (na - 1) * sizeof(*v));
        free(argv);
        argv = v;
        if (!v[1]) {
            pl_strv_free(argv);
            goto nomem;
        }
    }
    pl_strv_free(s->argv);
    s->argv = argv;
    free(text);
    free(hostfile);
    return 0;
nomem:
    pl_errprintf(errp, "out of memory");
error:
    free(text);
    free(hostfile);
    free(rankfile);
    return -1;
}

/* Room for one more task in 'running', and in 'dead' for all of them:
 * exits move tasks from one to the other, so ndead + nrunning never
 * exceeds what 'dead' was sized for at the last spawn. */
static int make_room(struct pl_agent *a)
{
    struct pl_task **v;

    if (!(v = grow(a->running, &a->cap_running, a->nrunning, sizeof(*v))))
        return -1;
    a->running = v;
    if (!(v = grow(a->dead, &a->cap_dead, a->nrunning + a->ndead,
                   sizeof(*v))))
        return -1;
    a->dead = v;
    return 0;
}

/* Bind and spawn; returns 0 or -1 with errp set. */
static int spawn(struct pl_agent *a, struct pl_task *t, struct pl_env *env,
                 struct pl_error *errp)
{
    const struct pl_task_spec *s = pl_task_spec(t);
    int rc;

    if (pl_bind_cpu_enter(a->cpu, s, errp) < 0)
        return -1;
    if (pl_bind_cuda_enter(a->cuda, s, errp) < 0) {
        pl_bind_cpu_leave(a->cpu);
        return -1;
    }
    rc = pl_task_start(t, pl_env_vector(env), a->devnull, errp);
    pl_bind_cuda_leave(a->cuda);
    pl_bind_cpu_leave(a->cpu);
    return rc;
}

/* Run one entry of a RUN message: one rank of a task.  Whatever goes
 * wrong, an entry with a valid id gets an event. */
static void run_one(struct pl_agent *a, const msgpack_object *o)
{
    struct pl_task_spec spec;
    struct pl_error err;
    struct pl_env *env = NULL;
    struct pl_task *t = NULL;
    bool have_id;
    char cores[128];

    if (pl_task_spec_decode(o, &spec, &have_id, &err) < 0) {
        if (have_id) {
            pl_log(LOG_WARNING, "task %llu rank %llu: bad run entry: %s",
                   (unsigned long long)spec.id, (unsigned long long)spec.rank,
                   err.text);
            event_failed(a, &spec, err.text);
        }
        else
            pl_log(LOG_WARNING, "run: bad task entry: %s", err.text);
        goto done;
    }
    unsigned long long id = spec.id;
    unsigned long long rank = spec.rank;
    if (a->exiting) {
        pl_log(LOG_WARNING, "task %llu rank %llu: not started: shutting down",
               id, rank);
        event_failed(a, &spec, "agent is shutting down");
        goto done;
    }
    if (a->bench) {
        /* no process, no files, no cores held: what pilotd costs alone */
        (void)event_add(a, spec.id, spec.attempt, spec.rank, PL_ST_RUNNING);
        struct event *e = event_add(a, spec.id, spec.attempt, spec.rank,
                                    PL_ST_DONE);
        if (e)
            e->exit_code = 0;
        goto done;
    }
    if ((t = find_task(a, spec.id, spec.attempt, spec.rank))) {
        /* The same rank of the same attempt again: it runs, its events
         * will come.  Another attempt: refuse it rather than leave pilotd
         * waiting for it. */
        uint64_t old = pl_task_spec(t)->attempt;
        t = NULL;
        pl_log(LOG_WARNING, "task %llu: attempt %llu still running here: "
               "run of attempt %llu rank %llu %s", id,
               (unsigned long long)old, (unsigned long long)spec.attempt,
               rank, old == spec.attempt ? "ignored" : "refused");
        if (old != spec.attempt) {
            pl_errprintf(&err, "attempt %llu of this task is still running "
                         "on this node", (unsigned long long)old);
            event_failed(a, &spec, err.text);
        }
        goto done;
    }
    if (pl_resources_claim(a->res, spec.cores, spec.ncores, spec.gpus,
                           spec.ngpus, &err) < 0) {
        pl_log(LOG_WARNING, "task %llu rank %llu: %s", id, rank, err.text);
        event_failed(a, &spec, err.text);
        goto done;
    }
    bool prepared = false;
    if (!(env = task_env(a, &spec, &err))
        || (spec.comm == PL_COMM_MPI && mpi_launcher(&spec, env, &err) < 0)
        || !(prepared = true) || make_room(a) < 0
        || !(t = pl_task_new(&a->loop, &spec, task_exit_cb, a))) {
        if (prepared)
            pl_errprintf(&err, "out of memory");
        pl_log(LOG_WARNING, "task %llu rank %llu: %s", id, rank, err.text);
        pl_resources_release(a->res, spec.cores, spec.ncores, spec.gpus,
                             spec.ngpus);
        event_failed(a, &spec, err.text);
        goto done;
    }
    const struct pl_task_spec *s = pl_task_spec(t);
    pl_idlist_format(cores, sizeof(cores), s->cores, s->ncores);
    if (spawn(a, t, env, &err) < 0) {
        pl_log(LOG_WARNING, "task %llu rank %llu: %s", id, rank, err.text);
        pl_resources_release(a->res, s->cores, s->ncores, s->gpus, s->ngpus);
        if (pl_task_state(t) == PL_ST_FAILED)
            event_task(a, t);
        else
            event_failed(a, s, err.text);
        pl_task_free(t);
        goto done;
    }
    a->running[a->nrunning++] = t;
    pl_log(LOG_INFO, "task %llu rank %llu: spawned pid %d on cores %s", id,
           rank, pl_task_pid(t), cores);
    event_task(a, t);
done:
    pl_env_free(env);
    pl_task_spec_release(&spec);
}

/* ---- messages from pilotd ---- */

static void heartbeat_cb(uv_timer_t *h)
{
    struct pl_agent *a = h->data;
    struct pl_wbuf w;

    pl_wbuf_init(&w, PL_MSG_HEARTBEAT, a->seq++, 0);
    send_wbuf(a, &w, PL_MSG_HEARTBEAT);
    resend_unacked(a);
}

static void reg_cb(uv_timer_t *h)
{
    struct pl_agent *a = h->data;

    pl_log(LOG_DEBUG, "no welcome yet: register again");
    send_register(a);
}

/* Leave the welcomed state and REGISTER until a WELCOME comes. */
static void register_again(struct pl_agent *a)
{
    a->welcomed = false;
    uv_timer_stop(&a->heartbeat);
    send_register(a);
    uv_timer_start(&a->reg, reg_cb, REGISTER_MS, REGISTER_MS);
}

static int welcome_cb(struct pl_agent *a, const struct pl_msg *m,
                      struct pl_error *errp)
{
    char *node = NULL;
    char *instance = NULL;
    double hb;

    if (pl_mp_str(m->body, "node", true, sizeof(a->node) - 1, &node, errp)
            < 0
        || pl_mp_double(m->body, "heartbeat", true, &hb, errp) < 0
        || pl_mp_str(m->body, "instance", true, sizeof(a->instance) - 1,
                     &instance, errp) < 0)
        goto error;
    if (!*node || !isfinite(hb) || hb <= 0 || hb > HEARTBEAT_MAX) {
        errno = EPROTO;
        pl_errprintf(errp, "welcome: bad node or heartbeat");
        goto error;
    }
    if (strcmp(node, a->node)) {
        pl_log(LOG_NOTICE, "pilotd calls this node %s", node);
        snprintf(a->node, sizeof(a->node), "%s", node);
        pl_log_init("pilot-agent", a->node, NULL);
    }
    uint64_t ms = (uint64_t)ceil(hb * 1000.0);
    /* another pilotd numbers its RUNs from 1 */
    if (strcmp(instance, a->instance)) {
        if (a->instance[0])
            pl_log(LOG_NOTICE, "a new pilotd (%s) took over", instance);
        snprintf(a->instance, sizeof(a->instance), "%s", instance);
        a->last_run = 0;
    }
    /* the welcome answers register m->seq, which carried every end sent
     * before it: pilotd committed them before it answered */
    drop_unacked(a, m->seq, true);
    uv_timer_stop(&a->reg);
    uv_timer_start(&a->heartbeat, heartbeat_cb, ms, ms);
    pl_log(LOG_NOTICE, "registered (heartbeat %.3g s, %zu cores, %zu gpus)",
           hb, pl_resources_free_cores(a->res),
           pl_resources_free_gpus(a->res));
    a->welcomed = true;
    a->pulled = false; /* a new (or restarted) pilotd: ask again */
    kick(a);
    free(node);
    free(instance);
    return 0;
error:
    free(node);
    free(instance);
    return -1;
}

static int run_cb(struct pl_agent *a, const struct pl_msg *m,
                  struct pl_error *errp)
{
    const msgpack_object *tasks;

    if (pl_mp_array(m->body, "tasks", true, RUN_MAX, &tasks, errp) < 0)
        return -1;
    pl_log(LOG_DEBUG, "run: %u tasks", tasks->via.array.size);
    a->last_run = m->seq;
    a->pulled = false;
    for (uint32_t i = 0; i < tasks->via.array.size; i++)
        run_one(a, &tasks->via.array.ptr[i]);
    kick(a);
    return 0;
}

static int kill_cb(struct pl_agent *a, const struct pl_msg *m,
                   struct pl_error *errp)
{
    uint64_t id;
    uint64_t attempt;
    uint64_t rank = 0;
    double grace;
    int one;
    size_t n = 0;

    if (pl_mp_uint(m->body, "id", true, UINT64_MAX, &id, errp) < 0
        || pl_mp_uint(m->body, "attempt", true, UINT32_MAX, &attempt, errp)
               < 0
        || (one = pl_mp_uint(m->body, "rank", false, UINT32_MAX, &rank,
                             errp)) < 0
        || pl_mp_double(m->body, "grace", true, &grace, errp) < 0)
        return -1;
    if (!isfinite(grace) || grace < 0 || grace > KILL_GRACE_MAX) {
        errno = EPROTO;
        return pl_errprintf(errp, "kill: grace out of range");
    }
    /* Every rank of the attempt running here, or only 'rank' if given. */
    for (size_t i = 0; i < a->nrunning; i++) {
        const struct pl_task_spec *s = pl_task_spec(a->running[i]);
        if (s->id != id || s->attempt != attempt || (one && s->rank != rank))
            continue;
        pl_log(LOG_INFO, "task %llu rank %llu: kill (grace %.3g s)",
               (unsigned long long)id, (unsigned long long)s->rank, grace);
        pl_task_kill(a->running[i], PL_ST_CANCELED, grace);
        n++;
    }
    if (n == 0)
        pl_log(LOG_DEBUG, "kill: task %llu attempt %llu%s is not running "
               "here", (unsigned long long)id, (unsigned long long)attempt,
               one ? " (that rank)" : "");
    return 0;
}

static int exit_msg_cb(struct pl_agent *a, const struct pl_msg *m,
                       struct pl_error *errp)
{
    (void)m;
    (void)errp;
    pl_agent_shutdown(a, "exit message");
    return 0;
}

static int ack_cb(struct pl_agent *a, const struct pl_msg *m,
                  struct pl_error *errp)
{
    uint64_t seq;

    if (pl_mp_uint(m->body, "seq", true, UINT64_MAX, &seq, errp) < 0)
        return -1;
    drop_unacked(a, seq, false);
    return 0;
}

/* A pilotd that does not know us (it restarted): register again, with
 * what runs here and what ended meanwhile. */
static int reregister_cb(struct pl_agent *a, const struct pl_msg *m,
                         struct pl_error *errp)
{
    (void)m;
    (void)errp;
    /* N.B. not while registering: pilotd asks once per message it got
     * from us before our REGISTER, and the reg timer repeats it anyway */
    if (a->exiting || !a->welcomed)
        return 0;
    pl_log(LOG_NOTICE, "pilotd does not know us (restarted?): registering "
           "again with %zu running, %zu ended", a->nrunning, a->nunacked);
    register_again(a);
    return 0;
}

static int ping_cb(struct pl_agent *a, const struct pl_msg *m,
                   struct pl_error *errp)
{
    (void)a;
    (void)m;
    (void)errp;
    return 0; /* 'heard' is set for any message */
}

static int reply_cb(struct pl_agent *a, const struct pl_msg *m,
                    struct pl_error *errp)
{
    int64_t errnum = 0;
    char *text = NULL;

    (void)a;
    if (pl_mp_int(m->body, "errno", true, &errnum, errp) < 0
        || pl_mp_str(m->body, "error", false, 1024, &text, errp) < 0)
        return -1;
    if (errnum)
        pl_log(LOG_WARNING, "pilotd refused message %llu: %s",
               (unsigned long long)m->seq, text ? text : strerror((int)errnum));
    free(text);
    return 0;
}

static const struct {
    int type;
    int (*cb)(struct pl_agent *a, const struct pl_msg *m,
              struct pl_error *errp);
} handlers[] = {
    { PL_MSG_WELCOME, welcome_cb },
    { PL_MSG_RUN, run_cb },
    { PL_MSG_KILL, kill_cb },
    { PL_MSG_EXIT, exit_msg_cb },
    { PL_MSG_REPLY, reply_cb },
    { PL_MSG_ACK, ack_cb },
    { PL_MSG_REREGISTER, reregister_cb },
    { PL_MSG_PING, ping_cb },
    { 0, NULL },
};

static void dispatch(struct pl_agent *a, const void *buf, size_t len)
{
    struct pl_msg m;
    struct pl_error err;
    int i;

    if (pl_msg_decode(buf, len, &m, &err) < 0) {
        pl_log(LOG_WARNING, "dropped a message: %s", err.text);
        return;
    }
    pl_log(LOG_DEBUG, "received %s (seq %llu, %zu bytes)",
           pl_msg_type_name(m.type), (unsigned long long)m.seq, len);
    a->heard = now_s(a);
    for (i = 0; handlers[i].cb; i++)
        if (handlers[i].type == m.type)
            break;
    if (!handlers[i].cb)
        pl_log(LOG_WARNING, "dropped a %s message: not for an agent",
               pl_msg_type_name(m.type));
    else if (handlers[i].cb(a, &m, &err) < 0)
        pl_log(LOG_WARNING, "dropped a %s message: %s",
               pl_msg_type_name(m.type), err.text);
    pl_msg_release(&m);
}

static void zsock_cb(struct pl_zwatch *zw, int revents, void *arg)
{
    struct pl_agent *a = arg;

    (void)zw;
    if (revents & ZMQ_POLLOUT)
        drain_outq(a);
    if (!(revents & ZMQ_POLLIN))
        return;
    for (int i = 0; i < PL_ZBATCH; i++) {
        zmq_msg_t body;
        zmq_msg_init(&body);
        if (pl_zsock_recv(a->zsock, NULL, &body) < 0) {
            int e = errno;
            zmq_msg_close(&body);
            if (e == EAGAIN || e == EINTR)
                break;
            pl_log(LOG_WARNING, "recv: %s", zmq_strerror(e));
            continue;
        }
        dispatch(a, zmq_msg_data(&body), zmq_msg_size(&body));
        zmq_msg_close(&body);
    }
}

/* ---- the CURVE handshake ---- */

static void mon_cb(struct pl_zmon *m, int event, uint32_t value, void *arg)
{
    struct pl_agent *a = arg;
    uint64_t now = uv_now(&a->loop);
    (void)m;

    switch (event) {
    case ZMQ_EVENT_HANDSHAKE_SUCCEEDED:
        pl_log(LOG_DEBUG, "CURVE handshake with pilotd done");
        break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
        /* ZAP said no: a key not in the pilot's allow-list stays out,
         * so waiting is no use (pilotd keeps its allow-list) */
        if (a->exiting || a->finished)
            break;
        pl_log(LOG_ERR, "pilotd at %s refused our key %s/%s.key (ZAP "
               "status %u): it is not in the pilot's allow-list",
               a->endpoint, a->keys.dir, a->keys.name, (unsigned)value);
        a->exit_code = 1;
        pl_agent_shutdown(a, "pilotd refused our key");
        break;
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
    case ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL:
        /* pilotd broke off: another server key, or pilotd going away;
         * ZeroMQ retries, we say so now and then */
        if (a->handshake_log_ms && now - a->handshake_log_ms
                                       < HANDSHAKE_LOG_MS)
            break;
        a->handshake_log_ms = now ? now : 1;
        if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
            pl_log(LOG_WARNING, "CURVE handshake with pilotd at %s failed "
                   "(protocol error %#x): is %s/server.pub this pilot's "
                   "key?", a->endpoint, (unsigned)value, a->keys.dir);
        else
            pl_log(LOG_WARNING, "CURVE handshake with pilotd at %s broken "
                   "off (%s); if this goes on, is %s/server.pub this "
                   "pilot's key?", a->endpoint, strerror((int)value),
                   a->keys.dir);
        break;
    default:
        break;
    }
}

/* ---- signals, shutdown ---- */

static void sigchld_cb(uv_signal_t *h, int signum)
{
    struct pl_agent *a = h->data;

    (void)signum;
    /* backwards: an ended task leaves 'running' by a swap with the last,
     * which was seen already */
    for (size_t i = a->nrunning; i-- > 0;)
        if (i < a->nrunning)
            pl_task_reap(a->running[i]);
}

static void deadline_cb(uv_timer_t *h)
{
    struct pl_agent *a = h->data;

    if (a->nrunning)
        pl_log(LOG_WARNING, "%zu tasks still running after SIGKILL: "
               "giving up on them", a->nrunning);
    for (size_t i = 0; i < a->nrunning; i++) {
        const struct pl_task_spec *s = pl_task_spec(a->running[i]);
        struct event *e = event_add(a, s->id, s->attempt, s->rank,
                                    PL_ST_CANCELED);
        if (e)
            e->error = strdup("did not exit after SIGKILL");
    }
    send_events(a);
    if (a->outq)
        pl_log(LOG_WARNING, "%zu messages to pilotd not sent", a->noutq);
    finish(a);
}

void pl_agent_shutdown(struct pl_agent *a, const char *why)
{
    /* N.B. idempotent, with no "second signal means SIGKILL now": with
     * --local, PR_SET_PDEATHSIG sends SIGTERM once for every thread of
     * the dying pilotd that we get reparented to (ZeroMQ's threads too),
     * so several arrive within microseconds.  The deadline bounds the
     * wait instead. */
    if (a->exiting || a->finished) {
        pl_log(LOG_DEBUG, "%s: already shutting down", why);
        return;
    }
    a->exiting = true;
    pl_log(LOG_NOTICE, "shutting down (%s): stopping %zu tasks", why,
           a->nrunning);
    uv_timer_stop(&a->reg);
    for (size_t i = 0; i < a->nrunning; i++)
        pl_task_kill(a->running[i], PL_ST_CANCELED, EXIT_GRACE);
    uv_timer_start(&a->deadline, deadline_cb,
                   (uint64_t)(EXIT_GRACE * 1000) + EXIT_WAIT_MS, 0);
    kick(a);
}

/* ---- a pilotd that went away ---- */

/* Connect to the agent endpoint pilotd's endpoint file names, if it is
 * not the one we use: a pilotd restarted on other ports. */
static void reread_endpoint(struct pl_agent *a)
{
    struct pl_endpoint ep;
    struct pl_error err;

    a->reread = now_s(a);
    if (pl_endpoint_read(a->dir, &ep, &err) < 0) {
        pl_log(LOG_DEBUG, "endpoint file: %s", err.text);
        return;
    }
    if (!ep.agent[0] || !strcmp(ep.agent, a->endpoint))
        return;
    pl_log(LOG_NOTICE, "pilotd moved to %s (was %s): connecting there",
           ep.agent, a->endpoint);
    (void)zmq_disconnect(a->zsock, a->endpoint);
    if (zmq_connect(a->zsock, ep.agent) < 0) {
        pl_log(LOG_WARNING, "connect %s: %s", ep.agent, zmq_strerror(errno));
        (void)zmq_connect(a->zsock, a->endpoint);
        return;
    }
    snprintf(a->endpoint, sizeof(a->endpoint), "%s", ep.agent);
    register_again(a);
}

static void watch_cb(uv_timer_t *h)
{
    struct pl_agent *a = h->data;
    double silent = now_s(a) - a->heard;

    if (a->exiting)
        return;
    if (a->orphan_after > 0 && silent > a->orphan_after) {
        char why[96];
        snprintf(why, sizeof(why), "no word from pilotd for %.0f s", silent);
        pl_agent_shutdown(a, why);
        return;
    }
    if (a->dir[0] && silent > REREAD_S && now_s(a) - a->reread > REREAD_S)
        reread_endpoint(a);
}

void pl_agent_set_bench(struct pl_agent *a, bool on)
{
    a->bench = on;
}

void pl_agent_set_recovery(struct pl_agent *a, const char *dir,
                           double orphan_after)
{
    snprintf(a->dir, sizeof(a->dir), "%s", dir ? dir : "");
    a->orphan_after = orphan_after;
}

/* ---- life cycle ---- */

uv_loop_t *pl_agent_loop(struct pl_agent *a)
{
    return &a->loop;
}

int pl_agent_exit_code(const struct pl_agent *a)
{
    return a->exit_code;
}

struct pl_agent *pl_agent_new(const char *endpoint,
                              const struct pl_keys_peer *keys,
                              struct pl_resources **resp,
                              struct pl_error *errp)
{
    struct pl_agent *a;
    int rc;

    if (strlen(endpoint) >= sizeof(((struct pl_agent *)0)->endpoint)) {
        errno = EINVAL;
        pl_errprintf(errp, "endpoint too long");
        return NULL;
    }
    if (!(a = calloc(1, sizeof(*a)))) {
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    a->devnull = -1;
    a->outq_tail = &a->outq;
    if ((rc = uv_loop_init(&a->loop)) < 0) {
        pl_errprintf(errp, "uv_loop_init: %s", uv_strerror(rc));
        free(a);
        errno = -rc;
        return NULL;
    }
    a->res = *resp;
    a->keys = *keys;
    snprintf(a->endpoint, sizeof(a->endpoint), "%s", endpoint);
    snprintf(a->node, sizeof(a->node), "%s", pl_resources_node(a->res));
    uv_timer_init(&a->loop, &a->flush);
    uv_timer_init(&a->loop, &a->reg);
    uv_timer_init(&a->loop, &a->heartbeat);
    uv_timer_init(&a->loop, &a->deadline);
    uv_timer_init(&a->loop, &a->watch);
    a->flush.data = a->reg.data = a->heartbeat.data = a->deadline.data = a;
    a->watch.data = a;
    a->sigchld.data = a;
    if ((rc = uv_signal_init(&a->loop, &a->sigchld)) == 0) {
        a->sigchld_ok = true;
        rc = uv_signal_start(&a->sigchld, sigchld_cb, SIGCHLD);
    }
    if (rc < 0) {
        errno = -rc;
        pl_errprintf(errp, "SIGCHLD watcher: %s", uv_strerror(rc));
        goto error;
    }
    if ((a->devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
        pl_errprintf(errp, "/dev/null: %s", strerror(errno));
        goto error;
    }
    if (!(a->cpu = pl_bind_cpu_new(a->res, errp))
        || !(a->cuda = pl_bind_cuda_new(a->res, errp)))
        goto error;
    if (!(a->zctx = zmq_ctx_new())) {
        pl_errprintf(errp, "zmq_ctx_new: %s", zmq_strerror(errno));
        goto error;
    }
    if (!(a->zsock = pl_zsock_new(a->zctx, ZMQ_DEALER, errp))
        || pl_zsock_curve_client(a->zsock, a->keys.server, &a->keys.own,
                                 errp) < 0
        || !(a->mon = pl_zmon_new(&a->loop, a->zctx, a->zsock,
                                  ZMQ_EVENT_HANDSHAKE_SUCCEEDED
                                      | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH
                                      | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
                                      | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL,
                                  mon_cb, a, errp)))
        goto error;
    if (!(a->zw = pl_zwatch_new(&a->loop, a->zsock, ZMQ_POLLIN, zsock_cb,
                                a))) {
        pl_errprintf(errp, "zwatch: %s", strerror(errno));
        goto error;
    }
    *resp = NULL;
    return a;
error:
    a->res = NULL; /* still the caller's */
    pl_agent_free(a);
    return NULL;
}

int pl_agent_start(struct pl_agent *a, struct pl_error *errp)
{
    uint32_t ncores;

    if (zmq_connect(a->zsock, a->endpoint) < 0)
        return pl_errprintf(errp, "connect %s: %s", a->endpoint,
                            zmq_strerror(errno));
    if (pl_zwatch_start(a->zw) < 0)
        return pl_errprintf(errp, "zwatch: %s", strerror(errno));
    (void)pl_resources_cores(a->res, &ncores);
    pl_log(LOG_NOTICE, "started: pid %d, %u cores, %zu gpus, pilotd at %s",
           (int)getpid(), ncores, pl_resources_ngpus(a->res), a->endpoint);
    a->heard = a->reread = now_s(a);
    send_register(a);
    uv_timer_start(&a->reg, reg_cb, REGISTER_MS, REGISTER_MS);
    uv_timer_start(&a->watch, watch_cb, WATCH_MS, WATCH_MS);
    return 0;
}

static void walk_cb(uv_handle_t *h, void *arg)
{
    (void)arg;
    pl_log(LOG_ERR, "handle still open: %s%s", uv_handle_type_name(h->type),
           uv_is_closing(h) ? " (closing)" : "");
}

static void close_handle(uv_handle_t *h)
{
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

void pl_agent_free(struct pl_agent *a)
{
    if (!a)
        return;
    int saved = errno;
    int rc;

    for (size_t i = 0; i < a->nrunning; i++)
        pl_task_free(a->running[i]);
    for (size_t i = 0; i < a->ndead; i++)
        pl_task_free(a->dead[i]);
    pl_zwatch_free(a->zw);
    pl_zmon_free(a->mon);
    close_handle((uv_handle_t *)&a->flush);
    close_handle((uv_handle_t *)&a->reg);
    close_handle((uv_handle_t *)&a->heartbeat);
    close_handle((uv_handle_t *)&a->deadline);
    close_handle((uv_handle_t *)&a->watch);
    if (a->sigchld_ok)
        close_handle((uv_handle_t *)&a->sigchld);
    /* Close callbacks run at the end of one iteration; a few are plenty. */
    for (int i = 0; i < 8 && uv_run(&a->loop, UV_RUN_NOWAIT); i++)
        ;
    if ((rc = uv_loop_close(&a->loop)) < 0) {
        pl_log(LOG_ERR, "uv_loop_close: %s", uv_strerror(rc));
        uv_walk(&a->loop, walk_cb, NULL);
    }
    if (a->zsock)
        zmq_close(a->zsock); /* lingers to deliver the last EVENTS */
    if (a->zctx)
        zmq_ctx_term(a->zctx);
    for (size_t i = 0; i < a->nevents; i++)
        free(a->events[i].error);
    free(a->events);
    for (size_t i = 0; i < a->nunacked; i++)
        free(a->unacked[i].error);
    free(a->unacked);
    while (a->outq) {
        struct outmsg *m = a->outq;
        a->outq = m->next;
        free(m->data);
        free(m);
    }
    if (a->devnull >= 0)
        close(a->devnull);
    pl_bind_cuda_free(a->cuda);
    pl_bind_cpu_free(a->cpu);
    pl_resources_free(a->res);
    free(a->running);
    free(a->dead);
    explicit_bzero(&a->keys, sizeof(a->keys));
    free(a);
    errno = saved;
}
