/* proto/zsock.c - ZeroMQ socket set-up, framing and endpoints */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto/msg.h"
#include "proto/zsock.h"

void *pl_zsock_new(void *ctx, int type, struct pl_error *errp)
{
    void *s;
    int linger = 2000;       /* ms: enough to flush a final reply */
    int hwm = 1000000;       /* messages: a burst of submissions or events */
    /* N.B. libzmq checks the size on the wire: under CURVE a message
     * travels as a MESSAGE command 33 bytes longer ("\x07MESSAGE", an
     * 8-byte nonce, a 16-byte MAC, a flags byte) */
    int64_t maxmsg = PL_MSG_MAX + 33;
    int one = 1;
    int ivl = 100, ivl_max = 2000; /* ms: reconnect backoff, 0.1 s to 2 s */
    /* connections waiting for accept(): 1,000 agents connect at once,
     * and ZeroMQ's 100 dropped the rest, whose SYNs came again after 1,
     * 3, 7 s (the kernel caps it at net.core.somaxconn) */
    int backlog = 4096;

    if (!(s = zmq_socket(ctx, type))) {
        pl_errprintf(errp, "zmq_socket: %s", zmq_strerror(errno));
        return NULL;
    }
    if (zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof(linger)) < 0
        || zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof(hwm)) < 0
        || zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof(hwm)) < 0
        || zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &maxmsg, sizeof(maxmsg)) < 0
        || zmq_setsockopt(s, ZMQ_RECONNECT_IVL, &ivl, sizeof(ivl)) < 0
        || zmq_setsockopt(s, ZMQ_RECONNECT_IVL_MAX, &ivl_max,
                          sizeof(ivl_max)) < 0
        || (type == ZMQ_ROUTER
            && (zmq_setsockopt(s, ZMQ_ROUTER_MANDATORY, &one, sizeof(one)) < 0
                || zmq_setsockopt(s, ZMQ_BACKLOG, &backlog, sizeof(backlog))
                       < 0))) {
        pl_errprintf(errp, "zmq_setsockopt: %s", zmq_strerror(errno));
        int saved = errno;
        zmq_close(s);
        errno = saved;
        return NULL;
    }
    return s;
}

int pl_zsock_curve_server(void *sock, const struct pl_keypair *kp,
                          const char *domain, struct pl_error *errp)
{
    int one = 1;

    /* N.B. Z85 keys go in with their NUL: a length of 41 */
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &one, sizeof(one)) < 0
        || zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, kp->pub, PL_KEY_Z85) < 0
        || zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, kp->sec, PL_KEY_Z85) < 0
        || zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, domain, strlen(domain)) < 0)
        return pl_errprintf(errp, "CURVE server options: %s",
                            zmq_strerror(errno));
    return 0;
}

int pl_zsock_curve_client(void *sock, const char *serverkey,
                          const struct pl_keypair *kp,
                          struct pl_error *errp)
{
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, serverkey, PL_KEY_Z85) < 0
        || zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, kp->pub, PL_KEY_Z85) < 0
        || zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, kp->sec, PL_KEY_Z85) < 0)
        return pl_errprintf(errp, "CURVE client options: %s",
                            zmq_strerror(errno));
    return 0;
}

int pl_zsock_bind_any(void *sock, const char *addr, char *ep, size_t eplen,
                      struct pl_error *errp)
{
    char want[128];
    size_t len = eplen;

    snprintf(want, sizeof(want), "tcp://%s:*", addr);
    if (zmq_bind(sock, want) < 0)
        return pl_errprintf(errp, "bind %s: %s", want, zmq_strerror(errno));
    if (zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, ep, &len) < 0)
        return pl_errprintf(errp, "ZMQ_LAST_ENDPOINT: %s",
                            zmq_strerror(errno));
    return 0;
}

int pl_zsock_send(void *sock, const void *id, size_t idlen, const void *buf,
                  size_t len)
{
    if (id && zmq_send(sock, id, idlen, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return -1;
    if (zmq_send(sock, buf, len, ZMQ_DONTWAIT) < 0)
        return -1;
    return 0;
}

static int more(void *sock)
{
    int m = 0;
    size_t len = sizeof(m);

    if (zmq_getsockopt(sock, ZMQ_RCVMORE, &m, &len) < 0)
        return 0;
    return m;
}

int pl_zsock_recv(void *sock, zmq_msg_t *id, zmq_msg_t *body)
{
    int frames = 0;

    if (id) {
        if (zmq_msg_recv(id, sock, ZMQ_DONTWAIT) < 0)
            return -1;
        frames++;
        if (!more(sock)) {
            errno = EPROTO;
            return -1;
        }
    }
    /* N.B. after the first frame the rest of a message is already here:
     * ZeroMQ delivers multipart messages atomically. */
    if (zmq_msg_recv(body, sock, id ? 0 : ZMQ_DONTWAIT) < 0)
        return -1;
    frames++;
    if (more(sock)) {
        zmq_msg_t junk;
        zmq_msg_init(&junk);
        do {
            if (zmq_msg_recv(&junk, sock, 0) < 0)
                break;
        } while (more(sock));
        zmq_msg_close(&junk);
        errno = EPROTO;
        return -1;
    }
    return 0;
}

/* "lo 127.0.0.1, eth0 10.0.0.5" into 'buf': the IPv4 addresses there are. */
static void list_addrs(const struct ifaddrs *ifs, char *buf, size_t len)
{
    size_t off = 0;

    buf[0] = '\0';
    for (const struct ifaddrs *i = ifs; i && off < len; i = i->ifa_next) {
        char a[INET_ADDRSTRLEN];
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET
            || !inet_ntop(AF_INET,
                          &((const struct sockaddr_in *)i->ifa_addr)->sin_addr,
                          a, sizeof(a)))
            continue;
        int n = snprintf(buf + off, len - off, "%s%s %s", off ? ", " : "",
                         i->ifa_name, a);
        if (n < 0)
            break;
        off += (size_t)n;
    }
}

static const struct in_addr *in_of(const struct ifaddrs *i)
{
    return &((const struct sockaddr_in *)i->ifa_addr)->sin_addr;
}

/* The first IPv4 entry of 'ifs' of interface 'name', or of address 'a',
 * or, both NULL, of an interface that is up and not loopback. */
static const struct ifaddrs *find(const struct ifaddrs *ifs,
                                  const char *name, const struct in_addr *a)
{
    for (const struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        if (name ? !strcmp(i->ifa_name, name)
                 : a ? in_of(i)->s_addr == a->s_addr
                     : (i->ifa_flags & IFF_UP)
                           && !(i->ifa_flags & IFF_LOOPBACK))
            return i;
    }
    return NULL;
}

/* The first IPv4 address of this host's name, if it is not a loopback
 * one.  0, or -1. */
static int name_addr(struct in_addr *a)
{
    struct addrinfo hints = { .ai_family = AF_INET,
                              .ai_socktype = SOCK_STREAM };
    struct addrinfo *res = NULL;
    char name[256];

    if (gethostname(name, sizeof(name)) < 0)
        return -1;
    name[sizeof(name) - 1] = '\0';
    if (getaddrinfo(name, NULL, &hints, &res) != 0)
        return -1;
    *a = ((const struct sockaddr_in *)res->ai_addr)->sin_addr;
    freeaddrinfo(res);
    return (ntohl(a->s_addr) >> 24) == 127 ? -1 : 0;
}

int pl_bind_addr(const char *spec, char *addr, size_t len, const char **why,
                 struct pl_error *errp)
{
    struct ifaddrs *ifs = NULL;
    const struct ifaddrs *pick = NULL;
    struct in_addr want;
    char have[1024];

    if (why)
        *why = NULL;
    if (getifaddrs(&ifs) < 0)
        return pl_errprintf(errp, "getifaddrs: %s", strerror(errno));
    if (spec)
        pick = inet_pton(AF_INET, spec, &want) == 1 ? find(ifs, NULL, &want)
                                                    : find(ifs, spec, NULL);
    else {
        if (name_addr(&want) == 0)
            pick = find(ifs, NULL, &want);
        if (!pick && (pick = find(ifs, NULL, NULL)) && why)
            *why = "the host name's address is a loopback one, or none of "
                   "this host's: the first interface up and not loopback "
                   "is used";
    }
    if (!pick) {
        list_addrs(ifs, have, sizeof(have));
        freeifaddrs(ifs);
        errno = EADDRNOTAVAIL;
        if (spec)
            return pl_errprintf(errp, "--bind %.64s: not an address or "
                                "interface of this host (it has: %.600s)",
                                spec, have[0] ? have : "no IPv4 address");
        return pl_errprintf(errp, "no address to bind: the host name's is "
                            "a loopback one and no other interface is up "
                            "(there are: %.600s); give --bind",
                            have[0] ? have : "no IPv4 address");
    }
    if (!inet_ntop(AF_INET, in_of(pick), addr, (socklen_t)len)) {
        int saved = errno;
        freeifaddrs(ifs);
        errno = saved;
        return pl_errprintf(errp, "inet_ntop: %s", strerror(errno));
    }
    freeifaddrs(ifs);
    return 0;
}
