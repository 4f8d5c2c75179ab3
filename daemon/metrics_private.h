/* daemon/metrics_private.h - what metrics.c (rendering, the textfile,
 * the timer) and metrics_http.c (serving) share (no other module
 * includes this) */
#ifndef PL_DAEMON_METRICS_PRIVATE_H
#define PL_DAEMON_METRICS_PRIVATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "proto/error.h"

struct MHD_Daemon;
struct pl_daemon;

#define MAX_LE 24

struct hist {
    const double *le;
    size_t n;
    uint64_t bucket[MAX_LE + 1]; /* not cumulative; [n]: above the last */
    uint64_t count;
    double sum;
};

/* A rendered text, shared by the loop and the responses that send it. */
struct snap {
    atomic_uint refs;
    size_t len;
    char text[];
};

struct pl_metrics {
    struct pl_daemon *d;
    uv_timer_t timer;
    bool timer_init, stopped;
    uint64_t expect;             /* uv_hrtime() the timer is due */
    struct hist wait, run, lag, commit, sync;
    uint64_t started;            /* tasks started since pilotd started */
    /* HTTP: the server, and what it serves (under 'lock') */
    struct MHD_Daemon *mhd;
    int lfd;
    char url[160];
    pthread_mutex_t lock;
    bool lock_init;
    struct snap *om, *text;
    atomic_ulong scrapes;        /* the HTTP thread counts them */
    /* the textfile: written by the thread pool, one write at a time */
    char *path;
    double interval, written_at;
    uv_work_t work;
    bool writing;
    struct snap *wsnap;
    int werr, werr_logged;
};

/* metrics.c: drop a reference to 's' (NULL: nothing); the last frees it */
void metrics_snap_unref(struct snap *s);

/* metrics_http.c: listen on 'addr':'port' (0: any free port) and serve
 * the published texts from libmicrohttpd's thread; the URL into m->url.
 * 0, or -1 with errp set. */
int metrics_http_start(struct pl_metrics *m, const char *addr, int port,
                       struct pl_error *errp);
/* metrics_http.c: stop serving (its thread joined), the socket closed */
void metrics_http_stop(struct pl_metrics *m);

#endif
