/* worker/link.c - a pool worker's connection to its node's agent: the
 * socket, its frames, and the CRASH frames sent from signal handlers */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "proto/poolmsg.h"
#include "proto/strv.h"
#include "worker/link.h"

int pl_link_connect(const char *prefix, const char *const *nodes,
                    double timeout, struct pl_error *errp)
{
    double end = pl_mono() + timeout;
    int e = ENOENT;

    for (;;) {
        for (const char *const *n = nodes; *n; n++) {
            struct sockaddr_un sa;
            socklen_t len;
            int fd;

            if (pl_pool_sock_addr(prefix, *n, &sa, &len) < 0) {
                e = errno;
                continue;
            }
            if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
                return pl_errprintf(errp, "socket: %s", strerror(errno));
            if (connect(fd, (struct sockaddr *)&sa, len) == 0)
                return fd;
            e = errno;
            close(fd);
        }
        if (pl_mono() >= end)
            break;
        /* 100 ms: an agent that is still starting is up within a
         * second or two; this costs nothing when it is already there */
        nanosleep(&(struct timespec){ .tv_nsec = 100 * 1000 * 1000 }, NULL);
    }
    /* every name tried: the one the agent used may be none of them */
    char tried[256] = "";
    for (const char *const *n = nodes; *n; n++)
        snprintf(tried + strlen(tried), sizeof(tried) - strlen(tried),
                 "%s%s", n == nodes ? "" : ",", *n);
    errno = e;
    return pl_errprintf(errp, "no agent socket @%s.{%s} after %.0f s: %s",
                        prefix, tried, timeout, strerror(e));
}

/* send() all of 'len' bytes: MSG_NOSIGNAL, so that a gone agent is
 * EPIPE here rather than a SIGPIPE that kills the worker */
static int send_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int pl_link_send(int fd, struct pl_wbuf *w)
{
    unsigned char hdr[4];

    if (w->sb.size > PL_WFRAME_MAX) {
        errno = EMSGSIZE;
        return -1;
    }
    pl_wframe_header(hdr, w->sb.size);
    /* two writes, but the agent reads a stream: no frame boundary is
     * lost, and no other thread writes to this socket meanwhile */
    if (send_all(fd, hdr, sizeof(hdr)) < 0
        || send_all(fd, w->sb.data, w->sb.size) < 0)
        return -1;
    return 0;
}

/* Read exactly 'len' bytes: 1, 0 at EOF before the first byte, or -1
 * (EPROTO: EOF after some of them). */
static int recv_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    size_t got = 0;

    while (got < len) {
        ssize_t n = read(fd, p + got, len - got);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (n == 0) {
            if (got == 0)
                return 0;
            errno = EPROTO;
            return -1;
        }
        got += (size_t)n;
    }
    return 1;
}

int pl_link_recv(int fd, void **buf, size_t *len)
{
    unsigned char hdr[4];
    size_t n;
    void *b;
    int rc;

    if ((rc = recv_all(fd, hdr, sizeof(hdr))) <= 0)
        return rc;
    n = pl_wframe_len(hdr);
    if (n == 0 || n > PL_WFRAME_MAX) {
        errno = EPROTO;
        return -1;
    }
    if (!(b = malloc(n)))
        return -1;
    if ((rc = recv_all(fd, b, n)) <= 0) {
        free(b);
        if (rc == 0)
            errno = EPROTO;
        return -1;
    }
    *buf = b;
    *len = n;
    return 1;
}

/* ---- CRASH -------------------------------------------------------- */

/* N.B. a signal handler can reach nothing but globals: this is the
 * worker's only mutable state outside main(), written before the
 * handlers are installed (frames, fd) or as one sig_atomic_t. */
static const int crash_sigs[] = { SIGSEGV, SIGBUS, SIGFPE,
                                  SIGILL,  SIGABRT, SIGTRAP };
#define NCRASH (sizeof(crash_sigs) / sizeof(crash_sigs[0]) + 1)
#define ALTSTACK_SIZE (64 * 1024)

static struct {
    int fd;
    void *altstack;                /* the handlers' stack */
    volatile sig_atomic_t in_call; /* 1 between enter and leave; 0 once
                                      a frame is written */
    struct {
        int sig;                   /* 0: exit() */
        unsigned char *buf;        /* header and message */
        size_t len;
    } frame[NCRASH];
} crash = { .fd = -1 };

/* Write the frame of 'sig' once, if a function is running.  Only
 * async-signal-safe calls: send() (MSG_NOSIGNAL: a gone agent must not
 * turn a SIGSEGV into a SIGPIPE). */
static void crash_write(int sig)
{
    if (!crash.in_call || crash.fd < 0)
        return;
    crash.in_call = 0;
    for (size_t i = 0; i < NCRASH; i++) {
        if (crash.frame[i].sig != sig || !crash.frame[i].buf)
            continue;
        const unsigned char *p = crash.frame[i].buf;
        size_t left = crash.frame[i].len;
        while (left > 0) {
            ssize_t n = send(crash.fd, p, left, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break;
            p += n;
            left -= (size_t)n;
        }
        break;
    }
}

static void on_fatal(int sig)
{
    int e = errno;

    crash_write(sig);
    errno = e;
    /* SA_RESETHAND put back the default action and SA_NODEFER leaves
     * the signal unblocked: this kills the worker with 'sig', so the
     * MPI launcher sees the real cause */
    raise(sig);
}

static void on_exit_call(void)
{
    crash_write(0);
}

static int encode_frame(size_t i, int sig)
{
    struct pl_wbuf w;
    unsigned char *b;

    pl_wcrash_encode(&w, sig);
    if (!(b = malloc(4 + w.sb.size))) {
        pl_wbuf_destroy(&w);
        return -1;
    }
    pl_wframe_header(b, w.sb.size);
    memcpy(b + 4, w.sb.data, w.sb.size);
    crash.frame[i].sig = sig;
    crash.frame[i].buf = b;
    crash.frame[i].len = 4 + w.sb.size;
    pl_wbuf_destroy(&w);
    return 0;
}

int pl_crash_arm(int fd)
{
    struct sigaction sa;
    stack_t ss;

    crash.fd = fd;
    for (size_t i = 0; i < NCRASH; i++)
        if (encode_frame(i, i < NCRASH - 1 ? crash_sigs[i] : 0) < 0)
            return -1;
    /* kept for the life of the process: the handlers may run at any
     * time until it ends */
    if (!(crash.altstack = malloc(ALTSTACK_SIZE)))
        return -1;
    ss.ss_sp = crash.altstack;
    ss.ss_size = ALTSTACK_SIZE;
    ss.ss_flags = 0;
    if (sigaltstack(&ss, NULL) < 0)
        return -1;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_fatal;
    sa.sa_flags = SA_RESETHAND | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < NCRASH - 1; i++)
        if (sigaction(crash_sigs[i], &sa, NULL) < 0)
            return -1;
    if (atexit(on_exit_call) != 0) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

void pl_crash_enter(void)
{
    crash.in_call = 1;
}

void pl_crash_leave(void)
{
    crash.in_call = 0;
}
