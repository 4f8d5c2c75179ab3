/* agent/journal.c - a task's output into its node's journal, through pipes */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/journal.h"
#include "proto/journal.h"
#include "proto/log.h"
#include "proto/pilotdir.h"

/* One stream of a rank: its pipe's read end, polled on the loop. */
struct tstream {
    uv_poll_t poll;
    int fd;                 /* -1: closed */
    int child;              /* the write end, until the spawn */
    int stream;             /* PL_J_STDOUT or PL_J_STDERR */
    bool polling;
    struct pl_jstate js;
    struct pl_tout *o;
};

struct pl_tout {
    struct tstream s[2];
    int ns;                 /* 1: stderr goes to stdout's pipe */
    int closing;            /* poll handles whose close is due */
};

/* The agent's writer: one per node name and pilot directory. */
static struct {
    struct pl_jw *w;
    char dir[PL_PATH_MAX];
    char node[256];
    bool warned;
} J;

bool pl_tout_wanted(char *const *env)
{
    for (char *const *e = env; e && *e; e++)
        if (!strncmp(*e, "PILOT_OUTPUT=", 13))
            return !strcmp(*e + 13, "journal");
    return false;
}

static const char *env_get(char *const *env, const char *key)
{
    size_t n = strlen(key);

    for (char *const *e = env; e && *e; e++)
        if (!strncmp(*e, key, n) && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

/* PILOT_JOURNAL_SIZE: bytes, or with K, M or G; 0: the default. */
static uint64_t journal_size(void)
{
    const char *s = getenv("PILOT_JOURNAL_SIZE");
    char *end;
    unsigned long long v;

    if (!s || !*s)
        return 0;
    v = strtoull(s, &end, 10);
    switch (*end) {
    case 'K': v <<= 10; break;
    case 'M': v <<= 20; break;
    case 'G': v <<= 30; break;
    default: break;
    }
    return v;
}

/* The writer for the journal of the task that writes to 'out' (a path in
 * DIR/tasks/) on node 'node'. */
static struct pl_jw *writer(const char *out, const char *node,
                            struct pl_error *errp)
{
    const char *t = out ? strstr(out, "/tasks/") : NULL;
    char dir[PL_PATH_MAX];

    if (!t || (size_t)(t - out) >= sizeof(dir) || !node)
        return pl_errprintf(errp, "journal: no pilot directory or node "
                            "for it"), NULL;
    memcpy(dir, out, (size_t)(t - out));
    dir[t - out] = '\0';
    if (J.w && !strcmp(J.dir, dir) && !strcmp(J.node, node))
        return J.w;
    pl_jw_close(J.w);
    J.w = NULL;
    if (!(J.w = pl_jw_open(dir, node, journal_size(), errp)))
        return NULL;
    snprintf(J.dir, sizeof(J.dir), "%s", dir);
    snprintf(J.node, sizeof(J.node), "%s", node);
    pl_log(LOG_INFO, "output journal %s/journal/%s/ segment %u", dir, node,
           pl_jw_segment(J.w));
    return J.w;
}

/* Read what the pipe has now into the journal (until it is empty if
 * 'all', else a read or a few).  Returns false at its end (EOF, or an
 * error).  N.B. 'all' stops after FINAL_MAX bytes: what the ended
 * process wrote is at most the pipe's size, and a process it left
 * behind that writes without end must not hold the agent here. */
#define FINAL_MAX (4u << 20)
static bool pump(struct tstream *s, bool all)
{
    static char buf[65536];
    struct pl_error err;
    size_t total = 0;
    ssize_t n;

    while (total < FINAL_MAX) {
        n = read(s->fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == EAGAIN;
        if (n == 0)
            return false;
        if (J.w && pl_jw_write(J.w, &s->js, s->stream, buf, (size_t)n, &err)
                       < 0) {
            if (!J.warned)
                pl_log(LOG_WARNING, "task %llu: %s: output lost",
                       (unsigned long long)s->js.id, err.text);
            J.warned = true;
        }
        total += (size_t)n;
        if (!all && (size_t)n < sizeof(buf))
            return true; /* likely empty now: the next poll says */
    }
    return true;
}

static void close_cb(uv_handle_t *h)
{
    struct tstream *s = h->data;
    struct pl_tout *o = s->o;

    if (--o->closing == 0)
        free(o);
}

/* The stream has ended: its end in the journal, its pipe closed. */
static void end_stream(struct tstream *s)
{
    struct pl_error err;

    if (s->fd < 0)
        return;
    if (J.w && pl_jw_end(J.w, &s->js, &err) < 0)
        pl_log(LOG_WARNING, "task %llu: %s", (unsigned long long)s->js.id,
               err.text);
    if (s->polling)
        uv_poll_stop(&s->poll);
    s->polling = false;
    close(s->fd);
    s->fd = -1;
}

static void poll_cb(uv_poll_t *h, int status, int events)
{
    struct tstream *s = h->data;

    (void)events;
    if (status < 0 || !pump(s, false))
        end_stream(s);
}

struct pl_tout *pl_tout_new(uv_loop_t *loop, const struct pl_run *r,
                            char *const *env, int *child_out, int *child_err,
                            struct pl_error *errp)
{
    struct pl_tout *o;
    int p[2];

    if (!writer(r->out, env_get(env, "PILOT_NODE"), errp))
        return NULL;
    if (!(o = calloc(1, sizeof(*o)))) {
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    o->ns = r->err && r->out && !strcmp(r->err, r->out) ? 1 : 2;
    for (int i = 0; i < 2; i++)
        o->s[i].fd = o->s[i].child = -1;
    for (int i = 0; i < o->ns; i++) {
        struct tstream *s = &o->s[i];
        if (pipe2(p, O_CLOEXEC) < 0) {
            pl_errprintf(errp, "pipe: %s", strerror(errno));
            goto error;
        }
        s->fd = p[0];
        s->child = p[1];
        s->o = o;
        s->stream = i == 0 ? PL_J_STDOUT : PL_J_STDERR;
        s->js.id = r->id;
        s->js.attempt = (uint32_t)r->attempt;
        s->js.rank = (uint32_t)r->rank;
        (void)fcntl(s->fd, F_SETFL, O_NONBLOCK);
        uv_poll_init(loop, &s->poll, s->fd);
        s->poll.data = s;
        o->closing++;
    }
    *child_out = o->s[0].child;
    *child_err = o->ns == 2 ? o->s[1].child : o->s[0].child;
    return o;
error:
    for (int i = 0; i < 2; i++) {
        if (o->s[i].child >= 0)
            close(o->s[i].child);
        o->s[i].child = -1;
    }
    if (o->closing == 0) {
        free(o);
        return NULL;
    }
    pl_tout_finish(o);
    return NULL;
}

void pl_tout_spawned(struct pl_tout *o)
{
    for (int i = 0; i < o->ns; i++) {
        struct tstream *s = &o->s[i];
        if (s->child >= 0)
            close(s->child);
        s->child = -1;
        if (s->fd >= 0 && uv_poll_start(&s->poll, UV_READABLE | UV_DISCONNECT,
                                        poll_cb) == 0)
            s->polling = true;
    }
}

void pl_tout_sizes(const struct pl_tout *o, uint64_t *out, uint64_t *err)
{
    *out = o->s[0].js.bytes;
    *err = o->ns == 2 ? o->s[1].js.bytes : 0;
}

void pl_tout_finish(struct pl_tout *o)
{
    if (!o)
        return;
    for (int i = 0; i < 2; i++) {
        struct tstream *s = &o->s[i];
        if (s->child >= 0)
            close(s->child);
        s->child = -1;
        /* what the process wrote before it ended is in the pipe */
        if (s->fd >= 0)
            (void)pump(s, true);
        end_stream(s);
        if (i < o->ns && s->o)
            uv_close((uv_handle_t *)&s->poll, close_cb);
    }
}
