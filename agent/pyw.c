/* agent/pyw.c - warm Python workers: their life, from spawn to reap
 * (agent/pyw.h; a call in one: agent/pyw_call.c)
 *
 * A worker lives from its spawn until it is reaped: its socket (our end
 * of the socketpair) closes before that when it goes idle for good, is
 * evicted, sends garbage or closes its end; the struct goes once it is
 * reaped (so that its call ends with its exit status) and its handles
 * are closed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

#include "agent/pyw_private.h"
#include "agent/spawn.h"
#include "proto/log.h"
#include "proto/msg.h"
#include "proto/pilotdir.h"
#include "proto/pywmsg.h"
#include "proto/spec.h"
#include "proto/state.h"
#include "proto/strv.h"

/* ------------------------------------------------------------ helpers */

size_t pyw_nactive(const struct pl_pyw *p)
{
    size_t n = 0;

    for (const struct worker *w = p->workers; w; w = w->next)
        n += !w->going;
    return n;
}

void pyw_sig(struct worker *w, int sig)
{
    if (w->pid > 0 && !w->reaped && kill(-w->pid, sig) < 0 && errno == ESRCH)
        (void)kill(w->pid, sig);
}

/* The key of entry 'r': interpreter, prelude, environment (less the
 * variables of an array element, which differ by element), cores, GPUs,
 * NUL-separated.  NULL when out of memory. */
char *pyw_key(const struct pl_run *r, size_t *len)
{
    const char *py = r->python ? r->python : PL_PY_DEFAULT_PYTHON;
    const char *pre = r->py_prelude ? r->py_prelude : "";
    size_t n = strlen(py) + strlen(pre) + 2 + 1;
    char *k, *q;

    for (char **e = r->env; e && *e; e++)
        n += strlen(*e) + 1;
    n += (size_t)(r->ncores + r->ngpus) * 24 + 2;
    if (!(k = q = malloc(n)))
        return NULL;
    q += sprintf(q, "%s%c%s%c", py, 0, pre, 0);
    for (char **e = r->env; e && *e; e++)
        if (strncmp(*e, "PILOT_ARRAY_", 12))
            q += sprintf(q, "%s%c", *e, 0);
    *q++ = '\1'; /* the end of the environment */
    for (uint32_t i = 0; i < r->ncores; i++)
        q += sprintf(q, "c%llu,", (unsigned long long)r->cores[i]);
    for (uint32_t i = 0; i < r->ngpus; i++)
        q += sprintf(q, "g%llu,", (unsigned long long)r->gpus[i]);
    *len = (size_t)(q - k);
    return k;
}

/* ------------------------------------------------------------ its end */


static void free_cb(uv_handle_t *h)
{
    struct worker *w = h->data;

    if (--w->closing == 0 && w->finished) {
        free(w->buf);
        free(w->key);
        free(w);
    }
}

static void unlink_worker(struct worker *w)
{
    for (struct worker **q = &w->p->workers; *q; q = &(*q)->next)
        if (*q == w) {
            *q = w->next;
            return;
        }
}

/* Close our end of the worker's socket: it sees EOF and exits. */
static void close_pipe(struct worker *w)
{
    if (!w->open)
        return;
    w->open = false;
    uv_read_stop((uv_stream_t *)&w->pipe);
    w->closing++;
    uv_close((uv_handle_t *)&w->pipe, free_cb);
}

static void gone_cb(uv_timer_t *h)
{
    pyw_sig(h->data, SIGKILL);
}

/* No more calls for 'w': its socket closes, and SIGKILL follows if it
 * has not exited GONE_MS later. */
void pyw_go(struct worker *w, const char *why)
{
    if (w->going)
        return;
    w->going = true;
    pl_log(LOG_INFO, "Python worker %d: goes (%s) after %u calls",
           (int)w->pid, why, w->calls);
    close_pipe(w);
    if (!w->reaped)
        uv_timer_start(&w->timer, gone_cb, GONE_MS, 0);
}

/* The worker was reaped with wait status 'status': its call, if any,
 * ends with it, and it is freed. */
static void worker_dead(struct worker *w, int status)
{
    struct pl_pyw *p = w->p;
    char why[512];
    int code = -1, sig = 0;

    w->reaped = true;
    if (WIFSIGNALED(status))
        sig = WTERMSIG(status);
    else
        code = WEXITSTATUS(status);
    int st = w->stop ? w->stop : PL_ST_FAILED;
    if (!w->run) {
        if (!w->going)
            pl_log(LOG_INFO, "Python worker %d exited (%s %d) while idle",
                   (int)w->pid, sig ? "signal" : "code", sig ? sig : code);
    }
    else if (w->stop == PL_ST_TIMEOUT)
        snprintf(why, sizeof(why), "timeout after %.3g s: its Python worker "
                 "(pid %d on %s) was killed", w->run->timeout, (int)w->pid,
                 p->a->node);
    else if (w->stop)
        snprintf(why, sizeof(why), "canceled: its Python worker (pid %d on "
                 "%s) was killed", (int)w->pid, p->a->node);
    else if (!w->hello)
        /* its interpreter could not run the worker at all: what it said
         * went to our log */
        snprintf(why, sizeof(why), "its Python worker (pid %d on %s, %s) "
                 "%s %d before it said hello (its output is in the agent's "
                 "log)", (int)w->pid, p->a->node,
                 w->run->python ? w->run->python : PL_PY_DEFAULT_PYTHON,
                 sig ? "died of signal" : "exited with code",
                 sig ? sig : code);
    else if (sig)
        snprintf(why, sizeof(why), "its Python worker (pid %d on %s) died of "
                 "signal %d (%s) during the call", (int)w->pid, p->a->node,
                 sig, strsignal(sig));
    else
        snprintf(why, sizeof(why), "its Python worker (pid %d on %s) exited "
                 "with code %d during the call", (int)w->pid, p->a->node,
                 code);
    if (w->run)
        pyw_call_end(w, st, sig ? 128 + sig : code, sig, why);
    unlink_worker(w);
    w->finished = true;
    close_pipe(w);
    w->closing++;
    uv_close((uv_handle_t *)&w->timer, free_cb);
}

/* The worker broke the protocol (garbage on its socket, a frame too
 * large, its socket closed in a call): it goes at once (SIGKILL); its
 * call fails once it is reaped, saying 'why'. */
void pyw_bad(struct worker *w, const char *why)
{
    pl_log(LOG_WARNING, "Python worker %d: %s: killed", (int)w->pid, why);
    if (w->run && !w->stop) {
        /* the reason the reap gives would hide this one */
        char text[512];
        snprintf(text, sizeof(text), "its Python worker (pid %d on %s): %s",
                 (int)w->pid, w->p->a->node, why);
        pyw_call_end(w, PL_ST_FAILED, 1, 0, text);
    }
    w->going = true;
    close_pipe(w);
    pyw_sig(w, SIGKILL);
}

static void eof_cb(uv_timer_t *h)
{
    pyw_bad(h->data, "its socket closed in a call, and it lives on");
}

static void idle_cb(uv_timer_t *h)
{
    pyw_go(h->data, "idle for 10 minutes");
}

void pyw_idle(struct worker *w)
{
    uv_timer_start(&w->timer, idle_cb, IDLE_MS, 0);
}



/* ------------------------------------------------------------ reading */



static void alloc_cb(uv_handle_t *h, size_t want, uv_buf_t *b)
{
    struct worker *w = h->data;
    (void)want;

    if (w->cap - w->len < 4096) {
        size_t ncap = w->cap ? w->cap * 2 : 16384;
        unsigned char *nb = ncap <= PL_PYW_FRAME_MAX + 16384
                                ? realloc(w->buf, ncap)
                                : NULL;
        if (!nb) {
            *b = uv_buf_init(NULL, 0); /* UV_ENOBUFS: a bad frame */
            return;
        }
        w->buf = nb;
        w->cap = ncap;
    }
    *b = uv_buf_init((char *)w->buf + w->len, (unsigned)(w->cap - w->len));
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
    struct worker *w = s->data;
    size_t off = 0;
    (void)b;

    if (n < 0) {
        /* its end closed: it is exiting (its reap ends the call, with
         * its exit status), or a function closed fd 3 */
        close_pipe(w);
        if (n != UV_EOF)
            pyw_bad(w, uv_strerror((int)n));
        else if (w->run && !w->stop) {
            w->eof = true;
            uv_timer_start(&w->timer, eof_cb, EOF_MS, 0);
        }
        return;
    }
    w->len += (size_t)n;
    while (w->open && w->len - off >= 4) {
        size_t flen = pl_pyw_frame_len(w->buf + off);
        if (flen > PL_PYW_FRAME_MAX) {
            pyw_bad(w, "a frame larger than a worker may send");
            return;
        }
        if (w->len - off - 4 < flen)
            break;
        pyw_on_frame(w, w->buf + off + 4, flen);
        off += 4 + flen;
    }
    if (!w->open)
        return;
    memmove(w->buf, w->buf + off, w->len - off);
    w->len -= off;
}

/* ------------------------------------------------------------ spawning */




/* A new worker for entry 'r' (its key 'key', taken), bound to its cores
 * and GPUs, with environment 'env'.  NULL with errp set. */
struct worker *pyw_spawn(struct pl_pyw *p, const struct pl_run *r,
                                   struct pl_env *env, char *key,
                                   size_t keylen, struct pl_error *errp)
{
    struct pl_agent *a = p->a;
    const char *py = r->python ? r->python : PL_PY_DEFAULT_PYTHON;
    char prog[PATH_MAX + 256];
    char *argv[] = { (char *)py, p->script, (char *)"--fd", (char *)"3",
                     NULL };
    int sv[2] = { -1, -1 }, rc;
    struct pl_env *wenv = NULL;
    struct worker *w = NULL;
    pid_t pid;

    if (!p->script[0]) {
        free(key);
        return pl_errprintf(errp, "the Python worker's script is not "
                            "installed (looked for %s)", p->looked),
               NULL;
    }
    if ((rc = pl_spawn_find(py, pl_env_vector(env), prog, sizeof(prog)))) {
        free(key);
        errno = rc;
        pl_errprintf(errp, "python '%s' %s", py,
                     rc == ENOENT ? "not found in PATH" : strerror(rc));
        return NULL;
    }
    if (!(w = calloc(1, sizeof(*w))))
        goto nomem;
    /* its own key while it lives (the calls' are theirs): a later agent
     * kills it if this one dies (agent/leftover.h) */
    if (!(wenv = pl_env_new(pl_env_vector(env)))
        || pl_env_setf(wenv, "PILOT_TASK_KEY", "%s/pyw.%u", a->owner,
                       p->spawned + 1) < 0)
        goto nomem;
    w->p = p;
    w->key = key;
    w->keylen = keylen;
    key = NULL;
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
        pl_errprintf(errp, "socketpair: %s", strerror(errno));
        goto error;
    }
    if (pl_bind_cpu_enter(a->cpu, r, errp) < 0)
        goto error;
    if (pl_bind_cuda_enter(a->cuda, r, errp) < 0) {
        pl_bind_cpu_leave(a->cpu);
        goto error;
    }
    /* its own output between calls: the agent's log */
    rc = pl_spawn(prog, argv, pl_env_vector(wenv), a->devnull, 2, 2, sv[1],
                  NULL, &pid);
    pl_env_free(wenv);
    wenv = NULL;
    pl_bind_cuda_leave(a->cuda);
    pl_bind_cpu_leave(a->cpu);
    close(sv[1]);
    sv[1] = -1;
    if (rc) {
        errno = rc;
        pl_errprintf(errp, "spawn %s: %s", py, strerror(rc));
        goto error;
    }
    w->pid = pid;
    uv_pipe_init(&a->loop, &w->pipe, 0);
    uv_timer_init(&a->loop, &w->timer);
    w->pipe.data = w->timer.data = w;
    w->closing = 0;
    w->open = true;
    w->next = p->workers;
    p->workers = w;
    p->spawned++;
    if ((rc = uv_pipe_open(&w->pipe, sv[0])) < 0
        || (rc = uv_read_start((uv_stream_t *)&w->pipe, alloc_cb, read_cb))
               < 0) {
        /* it is ours now: reaped as any (its call never started) */
        pl_errprintf(errp, "its socket: %s", uv_strerror(rc));
        pyw_bad(w, "its socket could not be watched");
        return NULL;
    }
    pl_log(LOG_INFO, "Python worker %d started: %s %s on cores of task %llu",
           (int)pid, prog, p->script, (unsigned long long)r->id);
    return w;
nomem:
    pl_errprintf(errp, "out of memory");
error:
    pl_env_free(wenv);
    if (sv[0] >= 0)
        close(sv[0]);
    if (sv[1] >= 0)
        close(sv[1]);
    free(key);
    if (w)
        free(w->key);
    free(w);
    return NULL;
}

/* An idle worker of 'key', or NULL; the least recently used idle one
 * of any key in *lru (NULL: none). */
struct worker *pyw_find_idle(struct pl_pyw *p, const char *key,
                                size_t keylen, struct worker **lru)
{
    struct worker *found = NULL;

    *lru = NULL;
    for (struct worker *w = p->workers; w; w = w->next) {
        if (w->going || w->run || !w->open)
            continue;
        if (!found && w->keylen == keylen && !memcmp(w->key, key, keylen))
            found = w;
        if (!*lru || w->last_used < (*lru)->last_used)
            *lru = w;
    }
    return found;
}


/* ------------------------------------------------------------ the rest */





size_t pl_pyw_workers(const struct pl_pyw *p, pid_t *pids, size_t max)
{
    size_t n = 0;

    for (const struct worker *w = p ? p->workers : NULL; w; w = w->next) {
        if (pids && n < max)
            pids[n] = w->pid;
        n++;
    }
    return n;
}

void pl_pyw_shutdown(struct pl_pyw *p)
{
    for (struct worker *w = p ? p->workers : NULL; w; w = w->next) {
        if (w->run)
            pyw_interrupt(w, PL_ST_CANCELED, 0);
        else
            pyw_go(w, "the agent stops");
    }
}

bool pl_pyw_child(const struct pl_pyw *p, pid_t pid)
{
    for (const struct worker *w = p ? p->workers : NULL; w; w = w->next)
        if (w->pid == pid && !w->reaped)
            return true;
    return false;
}

void pl_pyw_reap(struct pl_pyw *p)
{
    struct worker *w = p ? p->workers : NULL, *next;

    for (; w; w = next) {
        siginfo_t info;
        next = w->next; /* worker_dead() unlinks it */
        memset(&info, 0, sizeof(info));
        if (w->reaped
            || waitid(P_PID, (id_t)w->pid, &info,
                      WEXITED | WNOHANG | WNOWAIT) != 0
            || info.si_pid != w->pid)
            continue;
        /* what its calls started and left in its group goes with it (a
         * worker that exits on EOF or dies leaves them to init); its pid,
         * a zombie until the wait below, names no other group */
        (void)kill(-w->pid, SIGKILL);
        if (waitid(P_PID, (id_t)w->pid, &info, WEXITED | WNOHANG) != 0
            || info.si_pid != w->pid)
            continue;
        worker_dead(w, info.si_code == CLD_EXITED ? info.si_status << 8
                                                  : info.si_status & 0x7f);
    }
}

/* Where _pyworker.py is: $PILOT_PYWORKER, else beside our program. */
static void find_script(struct pl_pyw *p)
{
    static const char *const rel[] = { "../python/pilot/_pyworker.py",
                                       "../share/pilot/python/pilot/"
                                       "_pyworker.py" };
    char exe[PATH_MAX], path[PATH_MAX + 64];
    const char *env = getenv("PILOT_PYWORKER");
    ssize_t n;

    if (env && *env) {
        snprintf(p->looked, sizeof(p->looked), "%s ($PILOT_PYWORKER)", env);
        if (access(env, R_OK) == 0)
            snprintf(p->script, sizeof(p->script), "%s", env);
        return;
    }
    if ((n = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) <= 0)
        return;
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0';
    for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", exe, rel[i]);
        snprintf(p->looked + strlen(p->looked),
                 sizeof(p->looked) - strlen(p->looked), "%s%s", i ? ", " : "",
                 path);
        if (access(path, R_OK) == 0 && realpath(path, p->script))
            return;
    }
    p->script[0] = '\0';
}

struct pl_pyw *pl_pyw_new(struct pl_agent *a)
{
    struct pl_pyw *p = calloc(1, sizeof(*p));

    if (!p)
        return NULL;
    p->a = a;
    find_script(p);
    if (!p->script[0])
        pl_log(LOG_WARNING, "Python calls cannot run here: no worker script "
               "(looked for %s)", p->looked);
    return p;
}

void pl_pyw_close(struct pl_pyw *p)
{
    if (!p)
        return;
    while (p->workers) {
        struct worker *w = p->workers;
        pyw_sig(w, SIGKILL);
        if (w->run) {
            pl_resources_release(p->a->res, w->run->cores, w->run->ncores,
                                 w->run->gpus, w->run->ngpus);
            pl_run_clear(w->run);
            free(w->run);
            w->run = NULL;
        }
        p->workers = w->next;
        w->finished = true;
        close_pipe(w);
        w->closing++;
        uv_close((uv_handle_t *)&w->timer, free_cb);
    }
    free(p);
}
