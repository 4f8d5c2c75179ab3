/* daemon/metrics_http.c - pilotd's metrics served over HTTP by
 * libmicrohttpd's thread: the latest texts metrics.c published, under
 * its lock; nothing else of pilotd's is read here */
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "daemon/metrics_private.h"

#define OM_TYPE "application/openmetrics-text; version=1.0.0; charset=utf-8"
#define TEXT_TYPE "text/plain; version=0.0.4; charset=utf-8"
/* HTTP connections at once (from one address), and how long an idle or
 * slow one is kept (s): Prometheus keeps one open per target; a client
 * that holds more is turned away, never waited for. */
#define HTTP_CONNS 32
#define HTTP_CONNS_IP 8
#define HTTP_TIMEOUT 10

/* A response sent: its reference to the text dropped. */
static void snap_unref_cb(void *cls)
{
    metrics_snap_unref(cls);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code,
                             const char *text)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(
        strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    enum MHD_Result ret;

    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
    if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, "Allow", "GET, HEAD");
    ret = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return ret;
}

/* libmicrohttpd's thread: nothing but 'm's lock, the buffers and the
 * atomic count. */
static enum MHD_Result serve(void *cls, struct MHD_Connection *c,
                             const char *url, const char *method,
                             const char *version, const char *upload,
                             size_t *upload_size, void **con_cls)
{
    struct pl_metrics *m = cls;
    (void)version;
    (void)upload;
    (void)upload_size;
    (void)con_cls;

    if (strcmp(method, "GET") && strcmp(method, "HEAD"))
        return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "GET only\n");
    if (strcmp(url, "/metrics"))
        return reply(c, MHD_HTTP_NOT_FOUND, "not found: try /metrics\n");
    /* Prometheus asks for OpenMetrics first ("Accept: application/
     * openmetrics-text;version=1.0.0,...;q=0.75,text/plain;version=
     * 0.0.4;q=0.5,..." in 2.42); curl and older scrapers get the text
     * format */
    const char *acc = MHD_lookup_connection_value(c, MHD_HEADER_KIND,
                                                  "Accept");
    bool om = acc && strstr(acc, "application/openmetrics-text");
    pthread_mutex_lock(&m->lock);
    struct snap *s = om ? m->om : m->text;
    if (s)
        atomic_fetch_add(&s->refs, 1);
    pthread_mutex_unlock(&m->lock);
    if (!s)
        return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "not rendered yet\n");
    atomic_fetch_add(&m->scrapes, 1);
    struct MHD_Response *r =
        MHD_create_response_from_buffer_with_free_callback_cls(
            s->len, s->text, snap_unref_cb, s);
    if (!r) {
        metrics_snap_unref(s);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", om ? OM_TYPE : TEXT_TYPE);
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r); /* the connection holds it, and 's' */
    return ret;
}

/* Listen on 'addr':'port' (0: any free port); the URL into m->url. */
int metrics_http_start(struct pl_metrics *m, const char *addr, int port,
                       struct pl_error *errp)
{
    struct addrinfo hints = { .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV,
                              .ai_socktype = SOCK_STREAM };
    struct addrinfo *ai = NULL;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    char portstr[16], host[64];
    sigset_t all, old;
    int one = 1, rc;

    snprintf(portstr, sizeof(portstr), "%d", port);
    if ((rc = getaddrinfo(addr, portstr, &hints, &ai)) != 0)
        return pl_errprintf(errp, "metrics: address %s: %s", addr,
                            gai_strerror(rc));
    m->lfd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (m->lfd < 0
        || setsockopt(m->lfd, SOL_SOCKET, SO_REUSEADDR, &one,
                      sizeof(one)) < 0
        || bind(m->lfd, ai->ai_addr, ai->ai_addrlen) < 0
        || listen(m->lfd, 64) < 0
        || getsockname(m->lfd, (struct sockaddr *)&ss, &sl) < 0) {
        pl_errprintf(errp, "metrics: cannot listen on %s port %d: %s", addr,
                     port, strerror(errno));
        freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    if (getnameinfo((struct sockaddr *)&ss, sl, host, sizeof(host), portstr,
                    sizeof(portstr), NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        return pl_errprintf(errp, "metrics: getnameinfo failed");
    snprintf(m->url, sizeof(m->url), strchr(host, ':')
                                         ? "http://[%s]:%s/metrics"
                                         : "http://%s:%s/metrics",
             host, portstr);
    /* its thread takes no signal of ours: they are the loop's */
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    m->mhd = MHD_start_daemon(
        MHD_USE_AUTO_INTERNAL_THREAD, 0, NULL, NULL, serve, m,
        MHD_OPTION_LISTEN_SOCKET, m->lfd,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)HTTP_CONNS,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)HTTP_CONNS_IP,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)HTTP_TIMEOUT,
        MHD_OPTION_END);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!m->mhd)
        return pl_errprintf(errp, "metrics: cannot start the HTTP server on "
                            "%s", m->url);
    m->lfd = -1; /* N.B. MHD_stop_daemon() closes it */
    return 0;
}

void metrics_http_stop(struct pl_metrics *m)
{
    if (m->mhd) {
        MHD_stop_daemon(m->mhd); /* joins its thread */
        m->mhd = NULL;
    }
    if (m->lfd >= 0) {
        close(m->lfd);
        m->lfd = -1;
    }
}
