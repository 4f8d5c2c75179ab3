/* client/pilot.c - one pilot as a client sees it: its files and liveness */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/parse.h"
#include "client/pilot.h"

#define DEFAULT_TIMEOUT_MS 10000

int pl_find_init(struct pl_find *f, struct pl_error *errp)
{
    const char *s;

    memset(f, 0, sizeof(*f));
    f->timeout_ms = DEFAULT_TIMEOUT_MS;
    if ((s = getenv("PILOT_ID")) && *s)
        f->pilot = s;
    if ((s = getenv("PILOT_KEYS")) && *s)
        f->keys = s;
    if ((s = getenv("PILOT_TIMEOUT")) && *s) {
        double secs;
        if (pl_parse_secs("PILOT_TIMEOUT", s, &secs, errp) < 0)
            return -1;
        if (secs <= 0 || secs > 86400) {
            errno = EINVAL;
            return pl_errprintf(errp, "PILOT_TIMEOUT: '%s' is not between "
                                "0 and 86400 seconds", s);
        }
        f->timeout_ms = (int)ceil(secs * 1000);
    }
    return 0;
}

void pl_find_fini(struct pl_find *f)
{
    pl_slurm_free(f->slurm);
    f->slurm = NULL;
}

struct pl_slurm *pl_find_slurm(struct pl_find *f, struct pl_error *errp)
{
    if (!f->slurm)
        f->slurm = pl_slurm_new(errp);
    return f->slurm;
}

void pl_find_note(const struct pl_find *f, const char *fmt, ...)
{
    char text[512];
    va_list ap;

    if (!f->note)
        return;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    f->note(text, f->note_arg);
}

const char *pl_pilot_state_name(int state)
{
    switch (state) {
    case PL_PILOT_STARTING:
        return "starting";
    case PL_PILOT_RUNNING:
        return "running";
    case PL_PILOT_STALE:
        return "stale";
    case PL_PILOT_DOWN:
        return "down";
    default:
        return "unknown";
    }
}

bool pl_pilot_has_endpoint(const char *home, const char *id)
{
    char path[PL_PATH_MAX + 64];
    struct stat st;

    snprintf(path, sizeof(path), "%s/pilots/%s/endpoint", home, id);
    return stat(path, &st) == 0;
}

void pl_pilot_log_path(const struct pl_pilot *p, char *buf, size_t len)
{
    long job = p->info.job ? p->info.job : p->ep.job;

    if (!strcmp(p->info.mode, "local") || job == 0)
        snprintf(buf, len, "%s/logs/pilotd.out", p->dir);
    else
        snprintf(buf, len, "%s/logs/slurm-%ld.out", p->dir, job);
}

static bool same_host(const char *host)
{
    char me[256];

    if (gethostname(me, sizeof(me)) < 0)
        return false;
    me[sizeof(me) - 1] = '\0';
    return !strcmp(me, host);
}

long pl_pilot_pid_here(const struct pl_pilot *p)
{
    if (!p->has_ep || p->ep.pid <= 0 || !same_host(p->ep.host))
        return 0;
    return p->ep.pid;
}

/* Whether process 'pid' exists and is not a zombie (a pilotd killed a
 * moment ago stays one until init reaps it, and kill(pid, 0) succeeds
 * on it). */
static bool pid_alive(long pid)
{
    char path[64], buf[256];
    FILE *fp;
    char *rp;

    if (pid <= 0 || (kill((pid_t)pid, 0) < 0 && errno != EPERM))
        return false;
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    if (!(fp = fopen(path, "r")))
        return true;
    rp = fgets(buf, sizeof(buf), fp);
    fclose(fp);
    /* "PID (COMM) STATE ...": COMM may hold spaces and parentheses */
    if (rp && (rp = strrchr(buf, ')')) && rp[1] == ' ' && rp[2] == 'Z')
        return false;
    return true;
}

static void probe_local(struct pl_pilot *p)
{
    if (!p->has_ep) {
        /* N.B. info has no pid: a local pilotd that has not written its
         * endpoint yet looks the same as one that is gone */
        p->state = PL_PILOT_DOWN;
        return;
    }
    if (p->ep.host[0] && !same_host(p->ep.host)) {
        /* another login node: nothing to check from here */
        p->state = PL_PILOT_RUNNING;
        return;
    }
    if (pid_alive(p->ep.pid)) {
        p->state = PL_PILOT_RUNNING;
        return;
    }
    p->state = PL_PILOT_STALE;
    snprintf(p->why, sizeof(p->why), "its pilotd (pid %ld on %.64s) has exited",
             p->ep.pid, p->ep.host[0] ? p->ep.host : "this host");
}

/* Whether something accepts TCP connections at 'endpoint'
 * (tcp://A.B.C.D:PORT) within 'ms'.  A listening pilotd answers in well
 * under a millisecond, which spares the usual case a Slurm query (a munge
 * credential and a slurmctld round trip: most of a command's time). */
static bool tcp_listening(const char *endpoint, int ms)
{
    char host[64];
    unsigned port;
    struct sockaddr_in sa = { .sin_family = AF_INET };
    struct pollfd pfd;
    int fd, soerr = 0;
    socklen_t len = sizeof(soerr);
    bool ok = false;

    if (sscanf(endpoint, "tcp://%63[0-9.]:%u", host, &port) != 2
        || port == 0 || port > 65535 || inet_pton(AF_INET, host,
                                                  &sa.sin_addr) != 1)
        return false;
    sa.sin_port = htons((uint16_t)port);
    if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
                     0)) < 0)
        return false;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0)
        ok = true;
    else if (errno == EINPROGRESS) {
        pfd.fd = fd;
        pfd.events = POLLOUT;
        if (poll(&pfd, 1, ms) == 1
            && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) == 0
            && soerr == 0)
            ok = true;
    }
    close(fd);
    return ok;
}

static void probe_slurm(struct pl_find *f, struct pl_pilot *p)
{
    long job = p->info.job ? p->info.job : p->ep.job;
    struct pl_slurm *s;
    struct pl_error err;

    if (p->has_ep && tcp_listening(p->ep.client, 500)) {
        p->state = PL_PILOT_RUNNING;
        return;
    }

    if (job <= 0) {
        /* sbatch never returned a job id */
        p->state = p->has_ep ? PL_PILOT_RUNNING : PL_PILOT_DOWN;
        return;
    }
    if (!(s = pl_find_slurm(f, &err))
        || pl_slurm_job(s, job, &p->job, &err) < 0) {
        /* give a pilot the benefit of the doubt: its pilotd will answer
         * or time out */
        p->state = p->has_ep ? PL_PILOT_RUNNING : PL_PILOT_DOWN;
        snprintf(p->why, sizeof(p->why), "%s", err.text);
        return;
    }
    p->has_job = true;
    if (pl_slurm_job_alive(&p->job)) {
        p->state = p->has_ep ? PL_PILOT_RUNNING : PL_PILOT_STARTING;
        if (!p->has_ep)
            snprintf(p->why, sizeof(p->why), "its Slurm job %ld is %s", job,
                     p->job.state_name);
        return;
    }
    p->state = p->has_ep ? PL_PILOT_STALE : PL_PILOT_DOWN;
    if (p->job.known)
        snprintf(p->why, sizeof(p->why),
                 "its Slurm job %ld has ended (state %s)", job,
                 p->job.state_name);
    else
        snprintf(p->why, sizeof(p->why),
                 "its Slurm job %ld has ended and Slurm no longer knows it",
                 job);
}

void pl_pilot_probe(struct pl_find *f, struct pl_pilot *p)
{
    p->why[0] = '\0';
    p->has_job = false;
    p->has_ep = pl_endpoint_read(p->dir, &p->ep, NULL) == 0;
    if (!strcmp(p->info.mode, "local"))
        probe_local(p);
    else
        probe_slurm(f, p);
}

int pl_pilot_load(struct pl_find *f, const char *home, const char *id,
                  struct pl_pilot *p, struct pl_error *errp)
{
    memset(p, 0, sizeof(*p));
    if (pl_pilotdir_path(home, id, p->dir, sizeof(p->dir), errp) < 0)
        return -1;
    snprintf(p->id, sizeof(p->id), "%s", id);
    snprintf(p->home, sizeof(p->home), "%s", home);
    p->has_info = pl_info_read(p->dir, &p->info, NULL) == 0;
    if (!p->info.mode[0]) {
        /* no info file (an older or broken pilot): the endpoint tells */
        struct pl_endpoint ep;
        bool local = pl_endpoint_read(p->dir, &ep, NULL) == 0 && ep.job == 0;
        snprintf(p->info.mode, sizeof(p->info.mode), "%s",
                 local ? "local" : "slurm");
    }
    pl_pilot_probe(f, p);
    return 0;
}
