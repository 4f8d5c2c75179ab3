/* tests/unit/test_daemon_auth.c - pilotd's ZAP handler and the client's
 * view of it: allowed keys talk, each on the socket its role may use,
 * and their messages carry their key as "User-Id"; wrong, missing and
 * foreign-server keys are refused quickly, with a clear error, and logged
 * once.
 *
 * A forked child plays pilotd: the ZAP handler (daemon/auth.c) and two
 * CURVE ROUTERs, "clients" and "agents", that answer every request with
 * the User-Id of the message, on its own loop.  The parent is the
 * client, through proto/rpc.c, and a few raw sockets. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>
#include <zmq.h>

#include "daemon/auth.h"
#include "tests/mpw.h"
#include "proto/keys.h"
#include "proto/log.h"
#include "proto/msg.h"
#include "proto/rpc.h"
#include "proto/zsock.h"
#include "proto/zwatch.h"
#include "tests/unit/helpers.h"

#define FLOOD 1100 /* wrong keys: past the 1024 refusals logged singly */

static char tmp[64]; /* our mkdtemp() directory */

/* ---- the child: a pilotd of one socket ---- */

struct server {
    uv_loop_t loop;
    uv_signal_t sigterm;
    void *router[2];          /* clients, agents */
    struct pl_zwatch *zw[2];
    struct pl_auth *auth;
};

static void router_cb(struct pl_zwatch *zw, int revents, void *arg)
{
    void *router = arg;
    (void)zw;
    (void)revents;

    for (int i = 0; i < PL_ZBATCH; i++) {
        zmq_msg_t id, body;
        struct pl_msg m;
        struct pl_wbuf w;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        if (pl_zsock_recv(router, &id, &body) == 0
            && pl_msg_decode(zmq_msg_data(&body), zmq_msg_size(&body), &m,
                             NULL) == 0) {
            const char *user = zmq_msg_gets(&body, "User-Id");
            if (!user)
                user = "(none)";
            pl_wbuf_reply(&w, m.seq, 0, NULL);
            msgpack_pack_str(&w.pk, strlen(user));
            msgpack_pack_str_body(&w.pk, user, strlen(user));
            pl_zsock_send(router, zmq_msg_data(&id), zmq_msg_size(&id),
                          w.sb.data, w.sb.size);
            pl_wbuf_destroy(&w);
            pl_msg_release(&m);
        }
        else if (errno == EAGAIN)
            i = PL_ZBATCH;
        zmq_msg_close(&id);
        zmq_msg_close(&body);
    }
}

static void sigterm_cb(uv_signal_t *h, int signum)
{
    struct server *s = h->data;
    (void)signum;

    pl_zwatch_free(s->zw[0]);
    pl_zwatch_free(s->zw[1]);
    pl_auth_stop(s->auth);
    uv_close((uv_handle_t *)&s->sigterm, NULL);
}

/* Serve until SIGTERM; write the two endpoints to 'fd'.  Exits 0 if
 * every handle closed, else 1. */
static void serve(const char *kdir, const char *log, int fd)
{
    static const char *const domain[2] = { "clients", "agents" };
    const unsigned roles[2] = {
        1u << PL_ROLE_ADMIN | 1u << PL_ROLE_SUBMIT | 1u << PL_ROLE_READ,
        1u << PL_ROLE_AGENT,
    };
    struct server s = { 0 };
    struct pl_error e;
    char ep[2][256];
    void *zctx = zmq_ctx_new();
    int rc = 1;

    pl_log_init("pilotd", NULL, log);
    uv_loop_init(&s.loop);
    uv_signal_init(&s.loop, &s.sigterm);
    s.sigterm.data = &s;
    uv_signal_start(&s.sigterm, sigterm_cb, SIGTERM);
    if (!(s.auth = pl_auth_new(&s.loop, zctx, kdir, &e))) {
        dprintf(fd, "error %s\n", e.text);
        _exit(1);
    }
    for (int i = 0; i < 2; i++)
        if (!(s.router[i] = pl_zsock_new(zctx, ZMQ_ROUTER, &e))
            || pl_auth_server(s.auth, s.router[i], domain[i], roles[i], &e)
                   < 0
            || pl_zsock_bind_any(s.router[i], "127.0.0.1", ep[i],
                                 sizeof(ep[i]), &e) < 0
            || !(s.zw[i] = pl_zwatch_new(&s.loop, s.router[i], ZMQ_POLLIN,
                                         router_cb, s.router[i]))
            || pl_zwatch_start(s.zw[i]) < 0) {
            dprintf(fd, "error %s\n", e.text);
            _exit(1);
        }
    dprintf(fd, "%s %s\n", ep[0], ep[1]);
    close(fd);
    uv_run(&s.loop, UV_RUN_DEFAULT);
    zmq_close(s.router[0]);
    zmq_close(s.router[1]);
    pl_auth_free(s.auth); /* after the server socket, as it asks */
    zmq_ctx_term(zctx);
    if (uv_loop_close(&s.loop) == 0)
        rc = 0;
    _exit(rc);
}

/* ---- the parent: clients ---- */

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One request with 'keys'; returns what pl_rpc_call() did (-2: the
 * reply is not the key's User-Id, its public key), with errno, and the
 * time it took in *secs. */
static int call(const char *ep, const struct pl_keys_peer *keys, int ms,
                struct pl_error *e, double *secs)
{
    struct pl_rpc *r;
    struct pl_wbuf w;
    struct pl_msg reply;
    const msgpack_object *data;
    double t0 = now();
    int rc, saved;

    if (!(r = pl_rpc_new(ep, keys, e)))
        return -1;
    raw_wbuf_init(&w, PL_MSG_STATUS, pl_rpc_seq(r), 0);
    rc = pl_rpc_call(r, &w, ms, &reply, &data, e);
    saved = errno;
    if (rc == 0) {
        if (data->type != MSGPACK_OBJECT_STR
            || data->via.str.size != PL_KEY_Z85 - 1
            || memcmp(data->via.str.ptr, keys->own.pub, PL_KEY_Z85 - 1))
            rc = -2;
        pl_msg_release(&reply);
    }
    pl_wbuf_destroy(&w);
    pl_rpc_free(r);
    *secs = now() - t0;
    errno = saved;
    return rc;
}

/* Lines of 'path' holding 'what'. */
static int count_lines(const char *path, const char *what)
{
    FILE *fp = fopen(path, "r");
    char line[1024];
    int n = 0;

    while (fp && fgets(line, sizeof(line), fp))
        if (strstr(line, what))
            n++;
    if (fp)
        fclose(fp);
    return n;
}

/* Wait up to 'secs' until 'path' has at least 'want' lines with 'what'. */
static int wait_lines(const char *path, const char *what, int want,
                      double secs)
{
    double end = now() + secs;
    int n;

    while ((n = count_lines(path, what)) < want && now() < end)
        usleep(10000);
    return n;
}

/* A ZMTP 3.0 greeting of the NULL mechanism, whole, on a plain TCP
 * connection to 'ep': a peer with no CURVE whose greeting pilotd reads
 * in full.  (A ZeroMQ socket with no CURVE may hang up on seeing
 * pilotd's greeting before it has sent its own mechanism, which pilotd
 * then sees as a connection closed mid-handshake.) */
static void null_greeting(const char *ep)
{
    unsigned char g[64] = { 0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0,
                            'N', 'U', 'L', 'L' };
    struct sockaddr_in sa = { .sin_family = AF_INET };
    char host[64];
    unsigned port;
    int fd;

    if (sscanf(ep, "tcp://%63[0-9.]:%u", host, &port) != 2
        || inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        return;
    sa.sin_port = htons((uint16_t)port);
    if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
        return;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0
        && write(fd, g, sizeof(g)) == (ssize_t)sizeof(g))
        usleep(100000); /* pilotd reads it, and hangs up */
    close(fd);
}

/* A raw DEALER: CURVE with 'keys', or none (NULL); sends one frame. */
static void *raw_dealer(void *ctx, const char *ep,
                        const struct pl_keys_peer *keys)
{
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;

    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
    if (keys)
        pl_zsock_curve_client(s, keys->server, &keys->own, NULL);
    zmq_connect(s, ep);
    zmq_send(s, "x", 1, ZMQ_DONTWAIT);
    return s;
}

/* The agents socket admits the agent key alone. */
static void test_agents(const char *ep, const char *kdir, const char *log)
{
    struct pl_keys_peer client, agent;
    struct pl_error e = { "" };
    double secs;
    int rc;

    pl_keys_load_peer(kdir, "client", &client, &e);
    pl_keys_load_peer(kdir, "agent", &agent, &e);
    rc = call(ep, &agent, 5000, &e, &secs);
    ok(rc == 0, "the agents socket admits the agent key, its User-Id its "
       "key (%s)", rc == -1 ? e.text : "reply");
    errno = 0;
    rc = call(ep, &client, 5000, &e, &secs);
    ok(rc == -1 && errno == EACCES, "... and refuses the client key (role "
       "admin): %s", e.text);
    is(wait_lines(log, "on the agents socket: its key 'client' has role "
                  "admin", 1, 2.0), 1, "pilotd logged it");
}

static void test_clients(const char *ep, const char *kdir, const char *log)
{
    struct pl_keys_peer good, agent, wrong, foreign;
    struct pl_keypair other;
    struct pl_error e = { "" };
    char z85[PL_KEY_Z85 + 8];
    double secs;
    int rc;

    pl_keys_load_peer(kdir, "client", &good, &e);
    pl_keys_load_peer(kdir, "agent", &agent, &e);
    rc = call(ep, &good, 5000, &e, &secs);
    ok(rc == 0, "the pilot's client key is admitted, and its messages "
       "carry it as User-Id (%s)", rc == -1 ? e.text : "reply");

    /* a valid keypair the allow-list does not hold */
    wrong = good;
    pl_keys_generate(&wrong.own, &e);
    errno = 0;
    rc = call(ep, &wrong, 5000, &e, &secs);
    ok(rc == -1 && errno == EACCES
           && strstr(e.text, "pilotd refused this client's key")
           && strstr(e.text, "client.key"),
       "a wrong key is refused: %s", e.text);
    ok(secs < 2.0, "... at once (%.3f s), not at the 5 s timeout", secs);
    for (int i = 0; i < 3; i++)
        call(ep, &wrong, 5000, &e, &secs);
    snprintf(z85, sizeof(z85), "key %s", wrong.own.pub);
    is(wait_lines(log, z85, 1, 2.0), 1, "pilotd logged the refusal of "
       "that key");
    is(count_lines(log, "refused 127.0.0.1 on the clients socket"), 1,
       "... once for four attempts from one address");

    /* an allowed key of the wrong role */
    errno = 0;
    rc = call(ep, &agent, 5000, &e, &secs);
    ok(rc == -1 && errno == EACCES
           && strstr(e.text, "pilotd refused this client's key"),
       "the pilot's agent key on the clients socket: refused: %s", e.text);
    ok(secs < 2.0, "... at once (%.3f s)", secs);
    is(wait_lines(log, "on the clients socket: its key 'agent' has role "
                  "agent", 1, 2.0), 1, "pilotd logged it, naming the key "
       "and its role");

    /* the pilot's own client key, but another pilot's server key */
    foreign = good;
    pl_keys_generate(&other, &e);
    memcpy(foreign.server, other.pub, PL_KEY_Z85);
    errno = 0;
    rc = call(ep, &foreign, 5000, &e, &secs);
    ok(rc == -1 && errno == EPROTO && strstr(e.text, "server.pub"),
       "another server key: the handshake fails: %s", e.text);
    ok(secs < 2.0, "... at once (%.3f s)", secs);
    is(wait_lines(log, "its HELLO does not decrypt", 1, 2.0), 1,
       "pilotd logged it");

    /* no key at all: no CURVE */
    void *ctx = zmq_ctx_new();
    void *s = raw_dealer(ctx, ep, NULL);
    int ms = 500;
    char buf[16];
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &ms, sizeof(ms));
    ok(zmq_recv(s, buf, sizeof(buf), 0) < 0,
       "a ZeroMQ client without CURVE gets nothing");
    zmq_close(s);
    null_greeting(ep);
    is(wait_lines(log, "it does not use CURVE", 1, 2.0), 1,
       "pilotd logged a greeting without CURVE");
    for (int i = 0; i < 3; i++)
        null_greeting(ep);
    is(count_lines(log, "it does not use CURVE"), 1,
       "... once a minute, not once a try");

    /* a flood of new keys: one line each up to 1024, then a count */
    int sent = 0;
    while (sent < FLOOD) {
        void *batch[100];
        int n = FLOOD - sent < 100 ? FLOOD - sent : 100;
        for (int i = 0; i < n; i++) {
            struct pl_keys_peer k = good;
            pl_keys_generate(&k.own, &e);
            batch[i] = raw_dealer(ctx, ep, &k);
        }
        sent += n;
        wait_lines(log, "refused", sent < 1024 ? sent : 1024, 30.0);
        for (int i = 0; i < n; i++)
            zmq_close(batch[i]);
    }
    zmq_ctx_term(ctx);
    is(wait_lines(log, "not logged one by one", 1, 5.0), 1,
       "past 1024 refusals, pilotd logs a count instead");
    /* test_agents() logged the first of the 1024 */
    is(count_lines(log, "refused 127.0.0.1 on the clients socket"), 1023,
       "... having logged 1024 refusals one by one");
    rc = call(ep, &good, 5000, &e, &secs);
    ok(rc == 0, "the pilot's client is still admitted after the flood");
}

int main(void)
{
    char pdir[128], kdir[160], log[160], ep[520], *aep;
    struct pl_error e = { "" };
    int pfd[2], status = -1;
    pid_t pid;

    plan(21);
    if (!t_tmpdir("auth", tmp, sizeof(tmp)))
        return 1;
    snprintf(pdir, sizeof(pdir), "%s/p1", tmp);
    snprintf(kdir, sizeof(kdir), "%s/keys", pdir);
    snprintf(log, sizeof(log), "%s/pilotd.log", tmp);
    mkdir(pdir, 0700);
    if (pl_keys_create(kdir, &e) < 0 || pipe(pfd) < 0) {
        diag("%s", e.text);
        return 1;
    }
    /* before any ZeroMQ context: the child must not inherit one */
    if ((pid = fork()) == 0) {
        close(pfd[0]);
        serve(kdir, log, pfd[1]);
    }
    close(pfd[1]);
    FILE *fp = fdopen(pfd[0], "r");
    if (!fp || !fgets(ep, sizeof(ep), fp) || strncmp(ep, "tcp://", 6)) {
        diag("server: %s", ep);
        kill(pid, SIGKILL);
        return 1;
    }
    fclose(fp);
    ep[strcspn(ep, "\n")] = '\0';
    if (!(aep = strchr(ep, ' '))) {
        diag("server: %s", ep);
        kill(pid, SIGKILL);
        return 1;
    }
    *aep++ = '\0';
    test_agents(aep, kdir, log);
    test_clients(ep, kdir, log);
    kill(pid, SIGTERM);
    waitpid(pid, &status, 0);
    ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
       "the server stopped cleanly: every uv handle closed");
    if (tap_failed)
        diag("kept %s", tmp);
    else
        t_rmtree(tmp);
    return done_testing();
}
