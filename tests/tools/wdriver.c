/* tests/tools/wdriver.c - play a node's agent to a pool's workers, to
 * test pilot-worker without pilotd or pilot-agent
 *
 * wdriver [-t SECS] [-s SIZE] PREFIX NODE NWORKERS < SCRIPT
 *
 * Binds the abstract socket of PREFIX and NODE (proto/poolmsg.h), as an
 * agent does, accepts NWORKERS workers (each must be this user: its
 * SO_PEERCRED), reads their HELLOs and prints, by world rank:
 *
 *   hello world=W size=S pid=P pool=NAME job=J attempt=A python=0|1 nccl=-|TEXT
 *
 * then runs SCRIPT, one command a line ('#' comments, blank lines):
 *
 *   call id=ID group=W0,W1,... fn=c|py argv=FN [arg=A]... out=PATH
 *        err=PATH [cwd=DIR] [env=K=V]... [index=N] [attempt=A]
 *        sends CALL to each worker of the group (rank i to world rank
 *        Wi); in out and err, %r stands for the task rank
 *   wait sends nothing more until every call sent has its answer from
 *        each rank, printing as they come:
 *          entered id=ID attempt=A rank=R world=W
 *          return id=ID attempt=A rank=R world=W code=C error=-|TEXT
 *          crash id=ID attempt=A rank=R world=W signal=S
 *          eof world=W            (the worker closed its socket)
 *        a rank's call ends with its RETURN, CRASH or EOF
 *
 * Calls of several 'call' lines before a 'wait' run at once (their
 * groups must be disjoint: a worker takes one call at a time).
 * -s SIZE: a pool of SIZE workers on several nodes, NWORKERS of them on
 * this one: one wdriver a node runs the same script (each in its node's
 * network namespace, as agents do), and each sends CALL to the ranks it
 * has, and waits for them only.  At the
 * end of the script, closes the sockets: the workers end.
 * Exits 0; 1 if a wait or the accepts took over SECS (default 60; what
 * was missing is printed: "timeout world=W"), a worker sent a bad frame,
 * or a peer was not this user; 2 on usage errors.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/poolmsg.h"
#include "proto/spec.h"
#include "proto/strv.h"

#define MAX_WORKERS 1024

struct worker {
    int fd;         /* -1: gone */
    bool busy;      /* a call sent, its end not read */
    uint64_t id, attempt, rank;
};

static struct worker workers[MAX_WORKERS];
static int nworkers;     /* accepted here */
static int world_size;   /* of the pool */
static double timeout = 60;

__attribute__((format(printf, 1, 2), noreturn))
static void die(const char *fmt, ...)
{
    va_list ap;

    fflush(stdout);
    fprintf(stderr, "wdriver: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
    exit(1);
}

static int send_frame(int fd, struct pl_wbuf *w)
{
    unsigned char hdr[4];

    pl_wframe_header(hdr, w->sb.size);
    if (send(fd, hdr, 4, MSG_NOSIGNAL) != 4
        || send(fd, w->sb.data, w->sb.size, MSG_NOSIGNAL)
               != (ssize_t)w->sb.size)
        return -1;
    return 0;
}

static int read_all(int fd, void *buf, size_t len)
{
    size_t got = 0;

    while (got < len) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    return 0;
}

/* One frame, decoded into 'm' (and its buffer, owned by m->own).
 * 0, or -1 at EOF or on a bad frame (then *bad). */
static int recv_msg(int fd, struct pl_msg *m, bool *bad)
{
    struct pl_error err;
    unsigned char hdr[4];
    size_t len;
    void *buf;

    *bad = false;
    if (read_all(fd, hdr, 4) < 0)
        return -1;
    len = pl_wframe_len(hdr);
    if (len == 0 || len > PL_WFRAME_MAX || !(buf = malloc(len))) {
        *bad = true;
        return -1;
    }
    if (read_all(fd, buf, len) < 0) {
        free(buf);
        *bad = true;
        return -1;
    }
    if (pl_msg_decode(buf, len, m, &err) < 0) {
        fprintf(stderr, "wdriver: bad message: %s\n", err.text);
        free(buf);
        *bad = true;
        return -1;
    }
    m->own = buf;
    return 0;
}

static void accept_all(int lfd)
{
    double end = pl_mono() + timeout;
    int got = 0;
    int fds[MAX_WORKERS];
    char *hello[MAX_WORKERS] = { NULL };

    while (got < nworkers) {
        struct pollfd p = { .fd = lfd, .events = POLLIN };
        int ms = (int)((end - pl_mono()) * 1000);
        struct ucred cr;
        socklen_t cl = sizeof(cr);
        int fd;

        if (ms <= 0 || poll(&p, 1, ms) <= 0) {
            printf("timeout accept got=%d\n", got);
            exit(1);
        }
        if ((fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
            continue;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0
            || cr.uid != getuid()) {
            printf("refused uid=%d\n", (int)cr.uid);
            exit(1);
        }
        fds[got++] = fd;
    }
    /* the HELLOs, each worker's first frame */
    for (int i = 0; i < nworkers; i++) {
        struct pl_error err;
        struct pl_whello h;
        struct pl_msg m;
        bool bad;
        struct pollfd p = { .fd = fds[i], .events = POLLIN };
        int ms = (int)((end - pl_mono()) * 1000);
        char line[1400];

        if (ms <= 0 || poll(&p, 1, ms) <= 0) {
            printf("timeout hello\n");
            exit(1);
        }
        if (recv_msg(fds[i], &m, &bad) < 0)
            die("%s", "no HELLO");
        if (m.type != PL_MSG_W_HELLO
            || pl_whello_decode(m.body, &h, &err) < 0)
            die("%s", "first message is not a good HELLO");
        if (h.world_size != (uint64_t)world_size
            || workers[h.world_rank].fd >= 0)
            die("%s", "HELLO: wrong world size or rank twice");
        workers[h.world_rank].fd = fds[i];
        pl_msg_release(&m);
        /* printed below in rank order */
        snprintf(line, sizeof(line),
                 "hello world=%llu size=%llu pid=%lld pool=%s job=%llu "
                 "attempt=%llu python=%d nccl=%s",
                 (unsigned long long)h.world_rank,
                 (unsigned long long)h.world_size, (long long)h.pid, h.pool,
                 (unsigned long long)h.job, (unsigned long long)h.attempt,
                 h.python, h.nccl ? h.nccl : "-");
        hello[h.world_rank] = strdup(line);
        pl_whello_clear(&h);
    }
    for (int i = 0; i < world_size; i++)
        if (workers[i].fd >= 0) {
            printf("%s\n", hello[i]);
            free(hello[i]);
        }
    fflush(stdout);
}

/* "a%rb" with %r replaced by 'rank' */
static char *subst(const char *s, uint64_t rank)
{
    const char *p = strstr(s, "%r");
    char *out;

    if (!p)
        return strdup(s);
    if (asprintf(&out, "%.*s%llu%s", (int)(p - s), s,
                 (unsigned long long)rank, p + 2) < 0)
        return NULL;
    return out;
}

static int strv_add(char ***v, const char *s)
{
    size_t n = pl_strv_len(*v);
    char **nv = realloc(*v, (n + 2) * sizeof(char *));

    if (!nv)
        return -1;
    nv[n] = strdup(s);
    nv[n + 1] = NULL;
    *v = nv;
    return 0;
}

static void do_call(char *line)
{
    struct pl_wcall c = { .attempt = 1, .array_index = -1, .fn = PL_FN_C };
    uint64_t group[MAX_WORKERS];
    char *out = NULL, *err = NULL;
    char **argv = NULL;
    uint32_t n = 0;

    for (char *tok = strtok(line, " \t\n"); tok;
         tok = strtok(NULL, " \t\n")) {
        char *v = strchr(tok, '=');
        if (!v)
            die("bad token '%s'", tok);
        *v++ = '\0';
        if (!strcmp(tok, "id"))
            c.id = strtoull(v, NULL, 10);
        else if (!strcmp(tok, "attempt"))
            c.attempt = strtoull(v, NULL, 10);
        else if (!strcmp(tok, "index"))
            c.array_index = strtoll(v, NULL, 10);
        else if (!strcmp(tok, "fn"))
            c.fn = pl_fn_parse(v);
        else if (!strcmp(tok, "argv")) {
            if (argv)
                die("%s", "argv= twice: more arguments are arg=");
            strv_add(&argv, v);
        } else if (!strcmp(tok, "arg")) {
            if (!argv)
                die("%s", "arg= before argv=");
            strv_add(&argv, v);
        } else if (!strcmp(tok, "env"))
            strv_add(&c.env, v);
        else if (!strcmp(tok, "cwd"))
            c.cwd = strdup(v);
        else if (!strcmp(tok, "out"))
            out = strdup(v);
        else if (!strcmp(tok, "err"))
            err = strdup(v);
        else if (!strcmp(tok, "group")) {
            for (char *g = strtok_r(v, ",", &v); g; g = strtok_r(NULL, ",", &v))
                if (n < MAX_WORKERS)
                    group[n++] = strtoull(g, NULL, 10);
        } else
            die("unknown key '%s'", tok);
    }
    if (!argv || !out || !err || n == 0)
        die("%s", "call needs id, group, argv, out and err");
    c.argv = argv;
    c.size = n;
    c.group = group;
    for (uint32_t r = 0; r < n; r++) {
        struct worker *w;
        struct pl_wbuf b;

        if (group[r] >= (uint64_t)world_size)
            die("%s", "group: no such worker");
        w = &workers[group[r]];
        if (w->fd < 0 && world_size > nworkers)
            continue; /* on another node */
        if (w->busy)
            die("%s", "group: a worker already has a call");
        c.rank = r;
        c.out = subst(out, r);
        c.err = subst(err, r);
        pl_wcall_encode(&b, &c);
        if (w->fd < 0 || send_frame(w->fd, &b) < 0)
            printf("unsent id=%llu world=%llu\n", (unsigned long long)c.id,
                   (unsigned long long)group[r]);
        else {
            w->busy = true;
            w->id = c.id;
            w->attempt = c.attempt;
            w->rank = r;
        }
        pl_wbuf_destroy(&b);
        free(c.out);
        free(c.err);
    }
    pl_strv_free(argv);
    pl_strv_free(c.env);
    free(c.cwd);
    free(out);
    free(err);
}

/* Read and print what worker 'i' sent */
static void handle(int i)
{
    struct worker *w = &workers[i];
    struct pl_error err;
    struct pl_msg m;
    bool bad;

    if (recv_msg(w->fd, &m, &bad) < 0) {
        if (bad)
            die("%s", "a bad frame from a worker");
        printf("eof world=%d\n", i);
        close(w->fd);
        w->fd = -1;
        w->busy = false;
        return;
    }
    if (m.type == PL_MSG_W_ENTERED) {
        struct pl_wentered e;
        if (pl_wentered_decode(m.body, &e, &err) < 0)
            die("bad ENTERED: %s", err.text);
        printf("entered id=%llu attempt=%llu rank=%llu world=%d\n",
               (unsigned long long)e.id, (unsigned long long)e.attempt,
               (unsigned long long)w->rank, i);
    } else if (m.type == PL_MSG_W_RETURN) {
        struct pl_wreturn r;
        if (pl_wreturn_decode(m.body, &r, &err) < 0)
            die("bad RETURN: %s", err.text);
        printf("return id=%llu attempt=%llu rank=%llu world=%d code=%lld "
               "error=%s\n",
               (unsigned long long)r.id, (unsigned long long)r.attempt,
               (unsigned long long)w->rank, i, (long long)r.code,
               r.error ? r.error : "-");
        if (r.id != w->id || r.attempt != w->attempt)
            die("%s", "RETURN of another call");
        pl_wreturn_clear(&r);
        w->busy = false;
    } else if (m.type == PL_MSG_W_CRASH) {
        int64_t sig;
        if (pl_wcrash_decode(m.body, &sig, &err) < 0)
            die("bad CRASH: %s", err.text);
        printf("crash id=%llu attempt=%llu rank=%llu world=%d signal=%lld\n",
               (unsigned long long)w->id, (unsigned long long)w->attempt,
               (unsigned long long)w->rank, i, (long long)sig);
        w->busy = false;
    } else {
        die("unexpected %s", pl_msg_type_name(m.type));
    }
    pl_msg_release(&m);
}

static void do_wait(void)
{
    double end = pl_mono() + timeout;
    struct pollfd p[MAX_WORKERS];
    int idx[MAX_WORKERS];

    for (;;) {
        int n = 0, ms;

        for (int i = 0; i < world_size; i++)
            if (workers[i].busy && workers[i].fd >= 0) {
                p[n].fd = workers[i].fd;
                p[n].events = POLLIN;
                idx[n++] = i;
            }
        if (n == 0)
            break;
        ms = (int)((end - pl_mono()) * 1000);
        if (ms <= 0 || poll(p, (nfds_t)n, ms) <= 0) {
            for (int i = 0; i < n; i++)
                printf("timeout world=%d id=%llu\n", idx[i],
                       (unsigned long long)workers[idx[i]].id);
            exit(1);
        }
        for (int i = 0; i < n; i++)
            if (p[i].revents)
                handle(idx[i]);
        fflush(stdout);
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    struct sockaddr_un sa;
    socklen_t len;
    char line[65536];
    int opt, lfd;

    while ((opt = getopt(argc, argv, "s:t:")) != -1) {
        if (opt == 't')
            timeout = atof(optarg);
        else if (opt == 's')
            world_size = atoi(optarg);
        else
            goto usage;
    }
    if (argc - optind != 3)
        goto usage;
    nworkers = atoi(argv[optind + 2]);
    if (!world_size)
        world_size = nworkers;
    if (nworkers < 1 || world_size < nworkers || world_size > MAX_WORKERS
        || timeout <= 0)
        goto usage;
    for (int i = 0; i < MAX_WORKERS; i++)
        workers[i].fd = -1;
    if (pl_pool_sock_addr(argv[optind], argv[optind + 1], &sa, &len) < 0)
        die("%s", "socket name too long");
    if ((lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0
        || bind(lfd, (struct sockaddr *)&sa, len) < 0 || listen(lfd, 128) < 0)
        die("bind: %s", strerror(errno));
    accept_all(lfd);
    while (fgets(line, sizeof(line), stdin)) {
        char *s = line + strspn(line, " \t");
        if (!strncmp(s, "call ", 5))
            do_call(s + 5);
        else if (!strncmp(s, "wait", 4))
            do_wait();
        else if (*s && *s != '#' && *s != '\n')
            die("bad line: %s", s);
    }
    for (int i = 0; i < world_size; i++)
        if (workers[i].fd >= 0)
            close(workers[i].fd);
    close(lfd);
    return 0;
usage:
    fprintf(stderr, "usage: wdriver [-t SECS] [-s SIZE] PREFIX NODE NWORKERS"
                    " < SCRIPT\n");
    return 2;
}
