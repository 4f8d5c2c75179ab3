/* daemon/auth.c - pilotd's ZAP handler: CURVE peers judged by allow-list
 *
 * CURVE alone admits anyone who knows the server's public key; libzmq
 * asks the ZAP handler of the server's context (RFC 27) about each
 * client key, and we answer "200" only for keys in the pilot
 * directory's allow-list whose role the socket admits (agent keys on
 * the agent socket, the others on the client socket).  The user id we
 * give with it is the key itself (Z85): every message of that
 * connection carries it as its "User-Id" property, and pl_auth_peer()
 * looks it up in the allow-list of the moment, so that a key revoked
 * (pl_auth_reload()) is refused on the connections it already has, not
 * only at the next handshake.  A name would not do: a key revoked and
 * another added under its name would inherit its connections.
 *
 * A refusal is logged once per (socket, peer address, key), so a client
 * retrying, or a flood, does not fill the log: at most SEEN_MAX pairs
 * are remembered, and refusals past that are counted and summed up at
 * most once a minute.  Handshakes broken off before ZAP is asked (no
 * CURVE, the wrong server key) are seen only by a monitor of the server
 * socket, which does not know the peer's address (libzmq 4.3): those
 * are logged at most once a minute per socket and kind of failure.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "daemon/auth.h"
#include "proto/allow.h"
#include "proto/keys.h"
#include "proto/log.h"
#include "proto/zmon.h"
#include "proto/zsock.h"
#include "proto/zwatch.h"

#define ZAP_ENDPOINT "inproc://zeromq.zap.01"
#define ZAP_FRAMES 7          /* version, id, domain, address, identity,
                                 mechanism, key: a CURVE request */
#define SEEN_SLOTS 2048       /* hash table of logged refusals: 16 KiB */
#define SEEN_MAX 1024         /* at most half full: short probes */
#define QUIET_MS 60000        /* between two summaries */
#define MAX_SERVERS 4

/* Kinds of handshake failure a server socket's monitor reports. */
enum failure { FAIL_NO_CURVE, FAIL_SERVER_KEY, FAIL_OTHER, FAIL_KINDS };

/* One monitored server socket. */
struct server {
    struct pl_auth *au;
    struct pl_zmon *mon;
    char domain[32];
    unsigned roles;           /* admitted: 1 << enum pl_role */
    struct {
        uint64_t last_ms;     /* of the last failure of the kind logged */
        unsigned long quiet;  /* failures not logged since */
    } kind[FAIL_KINDS];
};

struct pl_auth {
    uv_loop_t *loop;
    void *zctx;               /* borrowed: the servers' context */
    void *zap;                /* REP, bound to ZAP_ENDPOINT */
    struct pl_zwatch *zw;
    char kdir[PL_PATH_MAX];
    struct pl_keypair key;    /* pilotd's */
    struct pl_allow *allow;
    struct server servers[MAX_SERVERS];
    size_t nservers;
    uint64_t seen[SEEN_SLOTS]; /* hashes of logged refusals; 0: free */
    size_t nseen;
    unsigned long unlogged;   /* refusals past SEEN_MAX, since last_ms */
    uint64_t last_ms;
    bool stopped;
};

/* FNV-1a over the parts, 0 kept for free slots. */
static uint64_t hash(const char *domain, const char *addr,
                     const unsigned char *key)
{
    uint64_t h = 14695981039346656037ULL;
    const unsigned char *parts[] = { (const unsigned char *)domain,
                                     (const unsigned char *)addr, key };
    size_t lens[] = { strlen(domain) + 1, strlen(addr) + 1, PL_KEY_BIN };

    for (size_t p = 0; p < 3; p++)
        for (size_t i = 0; i < lens[p]; i++) {
            h ^= parts[p][i];
            h *= 1099511628211ULL;
        }
    return h ? h : 1;
}

enum seen { SEEN_NEW, SEEN_OLD, SEEN_FULL };

/* Remember a refusal; whether it is the first of its kind. */
static enum seen remember(struct pl_auth *au, uint64_t h)
{
    size_t i = (size_t)h & (SEEN_SLOTS - 1);

    while (au->seen[i]) {
        if (au->seen[i] == h)
            return SEEN_OLD;
        i = (i + 1) & (SEEN_SLOTS - 1);
    }
    if (au->nseen >= SEEN_MAX)
        return SEEN_FULL;
    au->seen[i] = h;
    au->nseen++;
    return SEEN_NEW;
}

static void summary(struct pl_auth *au, bool force)
{
    uint64_t now = uv_now(au->loop);

    if (!au->unlogged || (!force && now - au->last_ms < QUIET_MS))
        return;
    pl_log(LOG_WARNING, "auth: refused %lu more connections from new peers "
           "or keys; not logged one by one past %d of them", au->unlogged,
           SEEN_MAX);
    au->unlogged = 0;
    au->last_ms = now;
}

/* 'len' bytes of a frame as a printable C string. */
static void frame_str(zmq_msg_t *m, char *buf, size_t len)
{
    size_t n = zmq_msg_size(m);
    const char *p = zmq_msg_data(m);

    if (n >= len)
        n = len - 1;
    for (size_t i = 0; i < n; i++)
        buf[i] = isprint((unsigned char)p[i]) ? p[i] : '?';
    buf[n] = '\0';
}

static bool frame_is(zmq_msg_t *m, const char *s)
{
    return zmq_msg_size(m) == strlen(s)
           && !memcmp(zmq_msg_data(m), s, strlen(s));
}

/* Remember a refusal of the peer at 'addr' with 'key' (a CURVE key, or a
 * mechanism's name padded with zeros); whether to log it. */
static bool log_refusal(struct pl_auth *au, const char *domain,
                        const char *addr, const unsigned char *key)
{
    switch (remember(au, hash(domain, addr, key))) {
    case SEEN_NEW:
        return true;
    case SEEN_OLD:
        return false;
    case SEEN_FULL:
    default:
        au->unlogged++;
        summary(au, false);
        return false;
    }
}

static const struct server *find_server(const struct pl_auth *au,
                                        const char *domain)
{
    for (size_t i = 0; i < au->nservers; i++)
        if (!strcmp(au->servers[i].domain, domain))
            return &au->servers[i];
    return NULL;
}

/* The verdict on one request of 'n' frames: a status code and text, and
 * for "200" the user id (the key, Z85: borrowed from the allow-list). */
static const char *judge(struct pl_auth *au, zmq_msg_t *f, int n,
                         const char **text, const char **user)
{
    char domain[32], addr[64], z85[PL_KEY_Z85];
    unsigned char mech[PL_KEY_BIN] = { 0 };
    const unsigned char *key;
    const struct pl_allow_key *k;
    const struct server *s;

    *user = "";
    if (n < 6 || !frame_is(&f[0], "1.0")) {
        /* from libzmq in this process: a bug, not an attack */
        pl_log(LOG_ERR, "auth: refused a ZAP request of %d frames, not "
               "version 1.0 of RFC 27", n);
        *text = "bad request";
        return "500";
    }
    frame_str(&f[2], domain, sizeof(domain));
    frame_str(&f[3], addr, sizeof(addr));
    if (!frame_is(&f[5], "CURVE")) {
        frame_str(&f[5], (char *)mech, sizeof(mech));
        if (log_refusal(au, domain, addr, mech))
            pl_log(LOG_WARNING, "auth: refused %s on the %s socket: "
                   "mechanism %s, not CURVE", addr, domain, (char *)mech);
        *text = "CURVE only";
        return "400";
    }
    if (n != ZAP_FRAMES || zmq_msg_size(&f[6]) != PL_KEY_BIN) {
        pl_log(LOG_ERR, "auth: refused a CURVE request of %d frames "
               "without a key of 32 bytes", n);
        *text = "bad request";
        return "500";
    }
    key = zmq_msg_data(&f[6]);
    s = find_server(au, domain);
    if ((k = pl_allow_find(au->allow, key)) && s
        && (s->roles & (1u << k->role))) {
        pl_log(LOG_DEBUG, "auth: admitted %s on the %s socket: key %s "
               "(role %s)", addr, domain, k->name, pl_role_name(k->role));
        *text = "OK";
        *user = k->pub;
        return "200";
    }
    if (k) {
        /* an agent's key on the client socket, or the reverse */
        if (log_refusal(au, domain, addr, key))
            pl_log(LOG_WARNING, "auth: refused %s on the %s socket: its "
                   "key '%s' has role %s, which that socket does not "
                   "admit (its next refusals are not logged)", addr, domain,
                   k->name, pl_role_name(k->role));
        *text = "key not allowed on this socket";
        return "400";
    }
    if (log_refusal(au, domain, addr, key)) {
        zmq_z85_encode(z85, key, PL_KEY_BIN);
        pl_log(LOG_WARNING, "auth: refused %s on the %s socket: its CURVE "
               "key %s is not in %s/allow (its next refusals are not "
               "logged)", addr, domain, z85, au->kdir);
    }
    *text = "key not allowed";
    return "400";
}

static int reply(void *zap, const zmq_msg_t *id, const char *status,
                 const char *text, const char *user)
{
    const int more = ZMQ_SNDMORE | ZMQ_DONTWAIT;

    /* REP adds the envelope; ours is: version, request id, status code,
     * status text, user id, metadata (none) */
    if (zmq_send(zap, "1.0", 3, more) < 0
        || zmq_send(zap, id ? zmq_msg_data((zmq_msg_t *)id) : "",
                    id ? zmq_msg_size((zmq_msg_t *)id) : 0, more) < 0
        || zmq_send(zap, status, strlen(status), more) < 0
        || zmq_send(zap, text, strlen(text), more) < 0
        || zmq_send(zap, user, strlen(user), more) < 0
        || zmq_send(zap, "", 0, ZMQ_DONTWAIT) < 0)
        return -1;
    return 0;
}

static void zap_cb(struct pl_zwatch *zw, int revents, void *arg)
{
    struct pl_auth *au = arg;
    (void)zw;
    (void)revents;

    for (int k = 0; k < PL_ZBATCH; k++) {
        zmq_msg_t f[ZAP_FRAMES + 1];
        int n = 0, more = 1;
        size_t len = sizeof(more);
        const char *status, *text, *user;

        zmq_msg_init(&f[0]);
        if (zmq_msg_recv(&f[0], au->zap, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&f[0]);
            if (errno != EAGAIN)
                pl_log(LOG_WARNING, "auth: ZAP socket: %s",
                       zmq_strerror(errno));
            return;
        }
        n = 1;
        /* the rest is here already (a message comes whole); frames past
         * ZAP_FRAMES + 1 are read into the last one and count as one */
        while (zmq_getsockopt(au->zap, ZMQ_RCVMORE, &more, &len) == 0
               && more) {
            if (n <= ZAP_FRAMES)
                zmq_msg_init(&f[n++]);
            if (zmq_msg_recv(&f[n - 1], au->zap, 0) < 0)
                break;
        }
        status = judge(au, f, n, &text, &user);
        if (reply(au->zap, n > 1 ? &f[1] : NULL, status, text, user) < 0)
            pl_log(LOG_ERR, "auth: ZAP reply: %s", zmq_strerror(errno));
        for (int i = 0; i < n; i++)
            zmq_msg_close(&f[i]);
    }
}

static enum failure failure_kind(uint32_t value)
{
    switch (value) {
    case ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH:
        return FAIL_NO_CURVE;
    case ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC:
        return FAIL_SERVER_KEY;
    default:
        return FAIL_OTHER;
    }
}

static void monitor_cb(struct pl_zmon *m, int event, uint32_t value,
                       void *arg)
{
    static const char *const why[FAIL_KINDS] = {
        [FAIL_NO_CURVE] = "it does not use CURVE (a client without keys?)",
        [FAIL_SERVER_KEY] = "its HELLO does not decrypt (it holds another "
                            "server key?)",
        [FAIL_OTHER] = "a CURVE protocol error",
    };
    struct server *s = arg;
    uint64_t now = uv_now(s->au->loop);
    enum failure k;
    (void)m;

    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) {
        /* a connection closed during the handshake: also what the
         * CLI's "is anything listening" probe does */
        pl_log(LOG_DEBUG, "auth: %s socket: handshake broken off (%s)",
               s->domain, strerror((int)value));
        return;
    }
    if (event != ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL)
        return; /* HANDSHAKE_FAILED_AUTH: ZAP said no, and logged it */
    k = failure_kind(value);
    if (s->kind[k].last_ms && now - s->kind[k].last_ms < QUIET_MS) {
        s->kind[k].quiet++;
        return;
    }
    pl_log(LOG_WARNING, "auth: refused a peer on the %s socket: %s "
           "(0x%x)%s", s->domain, why[k], (unsigned)value,
           s->kind[k].quiet ? "; more of these in the last minute were "
           "not logged" : "");
    s->kind[k].last_ms = now ? now : 1;
    s->kind[k].quiet = 0;
}

struct pl_auth *pl_auth_new(uv_loop_t *loop, void *zctx, const char *kdir,
                            struct pl_error *errp)
{
    struct pl_auth *au;
    char path[PL_PATH_MAX + 16];

    if (!(au = calloc(1, sizeof(*au)))) {
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    au->loop = loop;
    au->zctx = zctx;
    snprintf(au->kdir, sizeof(au->kdir), "%s", kdir);
    snprintf(path, sizeof(path), "%s/server.key", kdir);
    if (pl_keys_check(kdir, true, errp) < 0
        || pl_keys_read_pair(path, &au->key, errp) < 0
        || !(au->allow = pl_allow_load(kdir, errp))
        || !(au->zap = pl_zsock_new(zctx, ZMQ_REP, errp)))
        goto error;
    if (zmq_bind(au->zap, ZAP_ENDPOINT) < 0) {
        pl_errprintf(errp, "bind %s: %s", ZAP_ENDPOINT, zmq_strerror(errno));
        goto error;
    }
    if (!(au->zw = pl_zwatch_new(loop, au->zap, ZMQ_POLLIN, zap_cb, au))) {
        pl_errprintf(errp, "watch the ZAP socket: %s", strerror(errno));
        goto error;
    }
    /* only zap_cb() touches it: no read of ZMQ_EVENTS a loop iteration */
    pl_zwatch_set_exclusive(au->zw);
    if (pl_zwatch_start(au->zw) < 0) {
        pl_errprintf(errp, "watch the ZAP socket: %s", strerror(errno));
        goto error;
    }
    pl_log(LOG_NOTICE, "auth: CURVE, admitting the %zu keys of %s/allow",
           pl_allow_count(au->allow), kdir);
    return au;
error:
    pl_auth_free(au);
    return NULL;
}

int pl_auth_server(struct pl_auth *au, void *sock, const char *domain,
                   unsigned roles, struct pl_error *errp)
{
    struct server *s;

    if (au->nservers == MAX_SERVERS || strlen(domain) >= sizeof(s->domain)) {
        errno = EINVAL;
        return pl_errprintf(errp, "auth: no room for server '%s'", domain);
    }
    s = &au->servers[au->nservers];
    memset(s, 0, sizeof(*s));
    s->au = au;
    s->roles = roles;
    snprintf(s->domain, sizeof(s->domain), "%s", domain);
    if (pl_zsock_curve_server(sock, &au->key, domain, errp) < 0)
        return -1;
    if (!(s->mon = pl_zmon_new(au->loop, au->zctx, sock,
                               ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL
                                   | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL,
                               monitor_cb, s, errp)))
        return -1;
    au->nservers++;
    return 0;
}

int pl_auth_reload(struct pl_auth *au, struct pl_error *errp)
{
    struct pl_allow *a;
    struct pl_error err;

    if (!(a = pl_allow_load(au->kdir, &err))) {
        int saved = errno;
        pl_log(LOG_ERR, "auth: %s: the allow-list stays as it was",
               err.text);
        return pl_errset(errp, saved, "%s", err.text);
    }
    pl_allow_free(au->allow);
    au->allow = a;
    pl_log(LOG_NOTICE, "auth: reloaded %s/allow: admitting %zu keys",
           au->kdir, pl_allow_count(a));
    return 0;
}

bool pl_auth_has_name(const struct pl_auth *au, const char *name)
{
    return au && au->allow && pl_allow_find_name(au->allow, name);
}

size_t pl_auth_count(const struct pl_auth *au)
{
    return pl_allow_count(au->allow);
}

const struct pl_allow_key *pl_auth_peer(const struct pl_auth *au,
                                        const char *user)
{
    unsigned char key[PL_KEY_BIN];

    if (!user || pl_keys_decode(user, key) < 0)
        return NULL;
    return pl_allow_find(au->allow, key);
}

void pl_auth_stop(struct pl_auth *au)
{
    if (!au || au->stopped)
        return;
    au->stopped = true;
    summary(au, true);
    pl_zwatch_free(au->zw);
    au->zw = NULL;
    for (size_t i = 0; i < au->nservers; i++) {
        pl_zmon_free(au->servers[i].mon);
        au->servers[i].mon = NULL;
    }
}

void pl_auth_free(struct pl_auth *au)
{
    if (!au)
        return;
    int saved = errno;
    pl_auth_stop(au);
    if (au->zap)
        zmq_close(au->zap);
    pl_allow_free(au->allow);
    /* the secret key leaves no copy in freed memory */
    explicit_bzero(&au->key, sizeof(au->key));
    free(au);
    errno = saved;
}
