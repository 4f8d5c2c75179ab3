/* tests/tools/zgarbage.c - send a running pilotd frames it must survive
 *
 * zgarbage [-n FRAMES] [-s SEED] [--socket client|agent|both] [--big]
 *          [--raw CONNS] [--heavy K] PILOTDIR
 *
 * Connects DEALER sockets to the client and agent sockets named in
 * PILOTDIR/endpoint and sends FRAMES messages to each: random bytes,
 * truncated valid messages, valid envelopes with fields of the wrong type
 * or counts that claim more than the frame holds, mutated messages, other
 * versions and types, trailing bytes, deep nesting, multi-frame messages,
 * empty frames; some from sockets with a 255-byte routing id.  --big adds
 * frames of exactly PL_MSG_MAX bytes (garbage, and a valid status request
 * padded to that size whose body holds an array of millions of nils) and
 * one of PL_MSG_MAX + 1, which libzmq must refuse.  --raw opens CONNS
 * plain TCP connections to each socket that send bytes that are not
 * ZMTP, or a ZMTP greeting followed by a frame claiming 2^62 bytes.
 * --heavy sends K valid but slow requests to the client socket (status
 * padded to PL_MSG_MAX_OBJECTS values, all alike) and then
 * times a status request from another socket while they are handled,
 * and the answers to all K.
 *
 * Nothing it sends may change the pilot: a frame that would be a valid
 * submit, cancel or shutdown (client socket) or register (agent socket)
 * is broken before it is sent (checked with pilotd's own decoders).
 *
 * Prints the seed first (rerun with -s to repeat a run), then per socket
 * the frames of each kind and the replies received, and with --heavy
 * "status behind K heavy requests: S s, all K answered in T s".  Exits 1
 * if pilotd stops taking frames for 30 s (a send times out), 2 on usage
 * errors.
 */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "proto/agentmsg.h"
#include "proto/spec.h"
#include "tests/mpw.h"
#include "proto/msg.h"
#include "proto/keys.h"
#include "proto/pilotdir.h"
#include "proto/zsock.h"

#define SEND_TIMEOUT 30000 /* ms: longer means pilotd stopped reading */

/* ---- a seeded PRNG (xorshift64*), so that a run can be repeated ---- */

static uint64_t rng_state;

static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1DULL;
}

/* Uniform in [0, n). */
static size_t below(size_t n)
{
    return n ? (size_t)(rnd() % n) : 0;
}

static void fill(unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)rnd();
}

/* ---- frames ---- */

struct frame {
    unsigned char *p;
    size_t len, cap;
};

static void put(struct frame *f, const void *p, size_t n)
{
    if (f->len + n > f->cap) {
        size_t cap = (f->len + n) * 2;
        unsigned char *q = realloc(f->p, cap);
        if (!q) {
            fprintf(stderr, "zgarbage: out of memory\n");
            exit(1);
        }
        f->p = q;
        f->cap = cap;
    }
    memcpy(f->p + f->len, p, n);
    f->len += n;
}

static void put1(struct frame *f, unsigned c)
{
    unsigned char b = (unsigned char)c;
    put(f, &b, 1);
}

static void put_be(struct frame *f, uint64_t v, int n)
{
    for (int i = n - 1; i >= 0; i--)
        put1(f, (unsigned)(v >> (8 * i)));
}

static void put_str(struct frame *f, const char *s)
{
    size_t n = strlen(s);

    put1(f, 0xd9);
    put1(f, (unsigned)n);
    put(f, s, n);
}

/* The envelope [version, type, seq, then the body the caller adds. */
static void put_head(struct frame *f, uint64_t version, uint64_t type)
{
    put1(f, 0x94);
    put1(f, 0xcf);
    put_be(f, version, 8);
    put1(f, 0xcf);
    put_be(f, type, 8);
    put1(f, 0xcf);
    put_be(f, rnd(), 8);
}

/* Valid messages of every type, as the real senders pack them. */
static struct pl_wbuf tmpl[20];
static int ntmpl;

static void templates(void)
{
    char a0[] = "sh", a1[] = "-c", a2[] = "exit 3";
    char *argv[] = { a0, a1, a2, NULL };
    char g0[] = "0";
    char *gpus[] = { g0, NULL };
    uint64_t ids[] = { 1, 2, 3 };
    struct pl_wbuf *w;

    w = &tmpl[ntmpl++];
    raw_wbuf_init(w, PL_MSG_STATUS, 1, 0);
    w = &tmpl[ntmpl++];
    raw_wbuf_init(w, PL_MSG_LIST, 2, 3);
    raw_kstr(&w->pk, "state", "queued");
    raw_kuintv(&w->pk, "ids", ids, 3);
    raw_kuint(&w->pk, "limit", 5);
    w = &tmpl[ntmpl++];
    raw_wbuf_init(w, PL_MSG_SHOW, 3, 1);
    raw_kuint(&w->pk, "id", 1);
    w = &tmpl[ntmpl++];
    raw_wbuf_init(w, PL_MSG_COUNTS, 4, 1);
    raw_kuintv(&w->pk, "ids", ids, 2);
    w = &tmpl[ntmpl++];
    raw_wbuf_init(w, PL_MSG_SUBMIT, 5, 1);
    raw_key(&w->pk, "tasks");
    msgpack_pack_array(&w->pk, 1);
    msgpack_pack_map(&w->pk, 3);
    raw_kstrv(&w->pk, "argv", argv);
    raw_kstr(&w->pk, "name", "garbage");
    raw_kuint(&w->pk, "ranks", 1);
    w = &tmpl[ntmpl++];
    raw_wbuf_init(w, PL_MSG_CANCEL, 6, 1);
    raw_kuintv(&w->pk, "ids", ids, 3);
    w = &tmpl[ntmpl++];
    raw_wbuf_init(w, PL_MSG_SHUTDOWN, 7, 0);
    w = &tmpl[ntmpl++];
    raw_wbuf_init(w, PL_MSG_REGISTER, 8, 4);
    raw_kstr(&w->pk, "node", "garbage");
    raw_kuint(&w->pk, "pid", 1);
    raw_kuintv(&w->pk, "cores", ids, 3);
    raw_kstrv(&w->pk, "gpus", gpus);
    w = &tmpl[ntmpl++];
    raw_wbuf_init(w, PL_MSG_PULL, 9, 2);
    raw_kuint(&w->pk, "free_cores", 2);
    raw_kuint(&w->pk, "free_gpus", 0);
    w = &tmpl[ntmpl++];
    raw_wbuf_init(w, PL_MSG_EVENTS, 10, 1);
    raw_key(&w->pk, "events");
    msgpack_pack_array(&w->pk, 1);
    msgpack_pack_map(&w->pk, 5);
    raw_kuint(&w->pk, "id", 1);
    raw_kuint(&w->pk, "attempt", 1);
    raw_kuint(&w->pk, "rank", 0);
    raw_kstr(&w->pk, "state", "done");
    raw_kint(&w->pk, "exit_code", 0);
    w = &tmpl[ntmpl++];
    raw_wbuf_init(w, PL_MSG_HEARTBEAT, 11, 0);
    w = &tmpl[ntmpl++];
    raw_wbuf_init(w, PL_MSG_WELCOME, 12, 2);
    raw_kstr(&w->pk, "node", "n1");
    raw_kdouble(&w->pk, "heartbeat", 1.0);
    w = &tmpl[ntmpl++];
    raw_wbuf_init(w, PL_MSG_KILL, 13, 3);
    raw_kuint(&w->pk, "id", 1);
    raw_kuint(&w->pk, "attempt", 1);
    raw_kdouble(&w->pk, "grace", 1.0);
    w = &tmpl[ntmpl++];
    pl_wbuf_reply(w, 14, 5, "garbage");
}

/* 1 if 'f' is a message pilotd would act on for real on this socket:
 * a valid submit, cancel or shutdown for clients, register for agents. */
static int harmful(const struct frame *f, bool agent)
{
    struct pl_msg m;
    struct pl_error e;
    int bad = 0;

    if (pl_msg_decode(f->p, f->len, &m, &e) < 0)
        return 0;
    if (agent && m.type == PL_MSG_REGISTER) {
        struct pl_register r;
        if (pl_register_decode(m.body, &r, &e) == 0) {
            bad = 1;
            pl_register_clear(&r);
        }
    }
    else if (!agent && m.type == PL_MSG_SUBMIT) {
        const msgpack_object *arr;
        if (pl_mp_array(m.body, "tasks", true, 100000, &arr, &e) == 1) {
            for (uint32_t i = 0; i < arr->via.array.size && !bad; i++) {
                struct pl_spec s;
                if (pl_spec_decode(&arr->via.array.ptr[i], &s, &e) == 0) {
                    bad = 1;
                    pl_spec_clear(&s);
                }
            }
        }
    }
    else if (!agent && (m.type == PL_MSG_CANCEL || m.type == PL_MSG_SHUTDOWN))
        bad = 1;
    pl_msg_release(&m);
    return bad;
}

enum kind {
    K_RANDOM,     /* random bytes */
    K_ARRAY,      /* an array of 4 random-ish values */
    K_TRUNCATED,  /* a valid message cut short */
    K_WRONGTYPES, /* a valid envelope, fields of the wrong type */
    K_HUGE,       /* counts and lengths far beyond the frame */
    K_MUTATED,    /* a valid message with bytes changed */
    K_VERSION,    /* another version, an unknown type, trailing bytes */
    K_DEEP,       /* nesting far past msgpack-c's limit */
    K_EMPTY,      /* a frame of 0 bytes */
    K_MULTI,      /* 2..5 frames in one message */
    K_NKINDS,
};

static const char *const kind_name[K_NKINDS] = {
    "random", "array", "truncated", "wrong-types", "huge-counts", "mutated",
    "version/type", "deep", "empty", "multi-frame",
};

/* A body map of 'n' fields with the keys the handlers read and values
 * of random, mostly wrong, types. */
static void wrong_body(struct frame *f)
{
    static const char *const keys[] = {
        "tasks", "ids", "id", "state", "limit", "node", "pid", "cores",
        "gpus", "events", "argv", "attempt", "heartbeat", "grace", "errno",
        "error", "data", "running", "free_cores", "rank",
    };
    size_t n = 1 + below(6);

    put1(f, 0x80 | (unsigned)n);
    for (size_t i = 0; i < n; i++) {
        put_str(f, keys[below(sizeof(keys) / sizeof(keys[0]))]);
        switch (below(9)) {
        case 0: put1(f, 0xc0); break;                      /* nil */
        case 1: put1(f, 0xc3); break;                      /* true */
        case 2: put1(f, 0xd3); put_be(f, rnd(), 8); break; /* int64 */
        case 3: put1(f, 0xcb); put_be(f, rnd(), 8); break; /* double */
        case 4: put_str(f, "x,y z"); break;
        case 5: put1(f, 0x92); put1(f, 0xa1); put1(f, 'a');
                put1(f, 0xc2); break;                      /* ["a", false] */
        case 6: put1(f, 0x81); put_str(f, "argv");
                put1(f, 0x91); put1(f, 0x01); break;       /* {argv: [1]} */
        case 7: put1(f, 0xc4); put1(f, 2); put1(f, 0);
                put1(f, 0); break;                         /* bin */
        default: put1(f, 0x91); put1(f, 0x80); break;      /* [{}] */
        }
    }
}

/* A header claiming far more than follows. */
static void huge(struct frame *f)
{
    put_head(f, PL_PROTO_VERSION, 101 + below(7));
    put1(f, 0x81);
    put_str(f, "tasks");
    switch (below(5)) {
    case 0: put1(f, 0xdd); put_be(f, 0xffffffffu, 4); break; /* array32 */
    case 1: put1(f, 0xdf); put_be(f, 0xffffffffu, 4); break; /* map32 */
    case 2: put1(f, 0xdb); put_be(f, 0xffffffffu, 4); break; /* str32 */
    case 3: put1(f, 0xc6); put_be(f, 0x7fffffffu, 4); break; /* bin32 */
    default: put1(f, 0xc9); put_be(f, 0xffffffffu, 4);
             put1(f, 1); break;                              /* ext32 */
    }
    unsigned char junk[16];
    size_t n = below(sizeof(junk));
    fill(junk, n);
    put(f, junk, n);
}

static void make(struct frame *f, enum kind k, bool agent)
{
    unsigned char buf[4096];
    const struct pl_wbuf *t = &tmpl[below((size_t)ntmpl)];
    size_t n;

    f->len = 0;
    switch (k) {
    case K_RANDOM:
        n = below(10) ? below(512) : below(sizeof(buf));
        fill(buf, n);
        put(f, buf, n);
        break;
    case K_ARRAY:
        put1(f, 0x94);
        n = below(64);
        fill(buf, n);
        put(f, buf, n);
        break;
    case K_TRUNCATED:
        put(f, t->sb.data, below(t->sb.size)); /* never all of it */
        break;
    case K_WRONGTYPES:
        put_head(f, PL_PROTO_VERSION,
                 below(2) ? 101 + below(7) : 301 + below(4));
        wrong_body(f);
        break;
    case K_HUGE:
        huge(f);
        break;
    case K_MUTATED:
        put(f, t->sb.data, t->sb.size);
        for (size_t i = 0, m = 1 + below(4); i < m; i++)
            f->p[below(f->len)] ^= (unsigned char)(1u << below(8));
        break;
    case K_VERSION:
        switch (below(4)) {
        case 0: put_head(f, PL_PROTO_VERSION + 1 + below(100), 105); break;
        case 1: put_head(f, 0, 105); break;
        case 2: put_head(f, PL_PROTO_VERSION, below(2) ? 999 : rnd()); break;
        default:
            put(f, t->sb.data, t->sb.size);
            put1(f, 0xc0); /* trailing nil */
            break;
        }
        if (f->p[0] == 0x94 && f->len == 28)
            put1(f, 0x80); /* the empty body after put_head() */
        break;
    case K_DEEP:
        put_head(f, PL_PROTO_VERSION, 105);
        put1(f, 0x81);
        put_str(f, "data");
        n = 33 + below(2000);
        for (size_t i = 0; i < n; i++) {
            if (below(2))
                put1(f, 0x91); /* [ */
            else {
                put1(f, 0x81); /* {"k": */
                put_str(f, "k");
            }
        }
        put1(f, 0xc0);
        break;
    case K_EMPTY:
    case K_MULTI:
    case K_NKINDS:
        break;
    }
    /* pilotd must not act on what we send: break anything it would */
    if (harmful(f, agent))
        f->p[0] = 0x93; /* a 3-element array is never an envelope */
}

/* ---- sockets ---- */

struct peer {
    const char *name;
    const char *endpoint;
    bool agent;
    void *sock;
    unsigned long sent[K_NKINDS];
    unsigned long replies;
    unsigned long big;
    unsigned long big_replies;
};

/* The pilot's client and agent keys: the flood comes from a peer pilotd
 * admits (CURVE, on the allow-list, each socket with the key of the role
 * it admits), the hardest case for its decoders. */
static struct pl_keys_peer keys, agent_keys;

/* A DEALER connected to 'endpoint' with the agent's keys ('agent') or
 * the client's. */
static void *dealer(void *ctx, const char *endpoint, bool agent,
                    bool long_id)
{
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int hwm = 100000, timeout = SEND_TIMEOUT, linger = 5000;
    unsigned char id[255];

    if (!s) {
        fprintf(stderr, "zgarbage: zmq_socket: %s\n", zmq_strerror(errno));
        exit(1);
    }
    zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof(hwm));
    zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof(hwm));
    zmq_setsockopt(s, ZMQ_SNDTIMEO, &timeout, sizeof(timeout));
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof(linger));
    if (long_id) {
        /* the longest routing id a peer may choose (a leading zero byte
         * is libzmq's own) */
        fill(id, sizeof(id));
        id[0] = 'z';
        zmq_setsockopt(s, ZMQ_ROUTING_ID, id, sizeof(id));
    }
    struct pl_error kerr;
    const struct pl_keys_peer *k = agent ? &agent_keys : &keys;
    if (pl_zsock_curve_client(s, k->server, &k->own, &kerr) < 0) {
        fprintf(stderr, "zgarbage: %s\n", kerr.text);
        exit(1);
    }
    if (zmq_connect(s, endpoint) < 0) {
        fprintf(stderr, "zgarbage: connect %s: %s\n", endpoint,
                zmq_strerror(errno));
        exit(1);
    }
    return s;
}

static void send_or_die(struct peer *p, void *s, const void *buf, size_t len,
                        int flags)
{
    if (zmq_send(s, buf, len, flags) < 0) {
        fprintf(stderr, "zgarbage: %s socket: send: %s (pilotd stopped "
                "taking frames?)\n", p->name, zmq_strerror(errno));
        exit(1);
    }
}

/* Read replies until none comes for 'ms' or 'want' (0: any number)
 * have come.  Returns how many came. */
static unsigned long drain(struct peer *p, void *s, int ms,
                           unsigned long want)
{
    char buf[256];
    unsigned long got = 0;

    zmq_setsockopt(s, ZMQ_RCVTIMEO, &ms, sizeof(ms));
    while ((!want || got < want) && zmq_recv(s, buf, sizeof(buf), 0) >= 0) {
        int more = 0;
        size_t len = sizeof(more);
        zmq_getsockopt(s, ZMQ_RCVMORE, &more, &len);
        if (!more)
            got++;
    }
    p->replies += got;
    return got;
}

static void flood(void *ctx, struct peer *p, unsigned long n)
{
    struct frame f = { 0 };
    void *alt = dealer(ctx, p->endpoint, p->agent, true);

    p->sock = dealer(ctx, p->endpoint, p->agent, false);
    for (unsigned long i = 0; i < n; i++) {
        /* one frame in 16 from the socket with a 255-byte routing id */
        void *s = below(16) ? p->sock : alt;
        enum kind k = (enum kind)below(K_NKINDS);
        p->sent[k]++;
        if (k == K_EMPTY) {
            send_or_die(p, s, "", 0, 0);
            continue;
        }
        if (k == K_MULTI) {
            size_t frames = 2 + below(4);
            for (size_t j = 0; j < frames; j++) {
                make(&f, (enum kind)below(K_EMPTY), p->agent);
                send_or_die(p, s, f.p, f.len,
                            j + 1 < frames ? ZMQ_SNDMORE : 0);
            }
            continue;
        }
        make(&f, k, p->agent);
        send_or_die(p, s, f.p, f.len, 0);
        if (i % 1000 == 999) {
            drain(p, p->sock, 0, 0);
            drain(p, alt, 0, 0);
        }
    }
    drain(p, p->sock, 1000, 0);
    drain(p, alt, 1000, 0);
    zmq_close(alt);
    free(f.p);
}

/* Frames at and past ZMQ_MAXMSGSIZE, each from its own socket: libzmq
 * drops the connection of a peer that sends too big a frame. */
static void big(void *ctx, struct peer *p)
{
    struct frame f = { 0 };
    void *s;

    /* garbage of exactly PL_MSG_MAX bytes */
    f.len = 0;
    put1(&f, 0x94);
    unsigned char *junk = malloc(PL_MSG_MAX);
    if (!junk) {
        fprintf(stderr, "zgarbage: out of memory\n");
        exit(1);
    }
    fill(junk, 4096); /* then copies of it: PL_MSG_MAX is 4096 x 16384 */
    for (size_t i = 4096; i < PL_MSG_MAX; i += 4096)
        memcpy(junk + i, junk, 4096);
    put(&f, junk, PL_MSG_MAX - 1);
    s = dealer(ctx, p->endpoint, p->agent, false);
    send_or_die(p, s, f.p, f.len, 0);
    p->big++;

    /* a valid status request of exactly PL_MSG_MAX bytes: {"pad": [nil
     * x N]}, the most objects a frame can hold (msgpack-c allocates 24
     * bytes for each) */
    f.len = 0;
    put_head(&f, PL_PROTO_VERSION, PL_MSG_STATUS);
    put1(&f, 0x81);
    put_str(&f, "pad");
    size_t nils = PL_MSG_MAX - f.len - 5;
    put1(&f, 0xdd);
    put_be(&f, nils, 4);
    memset(junk, 0xc0, nils);
    put(&f, junk, nils);
    send_or_die(p, s, f.p, f.len, 0);
    p->big++;

    /* one byte more than ZMQ_MAXMSGSIZE: refused by libzmq, which drops
     * this connection (the other sockets stay) */
    void *s2 = dealer(ctx, p->endpoint, p->agent, false);
    f.len = 0;
    put(&f, junk, PL_MSG_MAX);
    put1(&f, 0xc0);
    send_or_die(p, s2, f.p, f.len, 0);
    p->big++;
    /* the client socket answers the first two with errors */
    if (!p->agent)
        p->big_replies = drain(p, s, 10000, 2);
    /* libzmq refuses the frame at its header and drops the connection;
     * s2 would send it again on each reconnection until its linger ran
     * out: once the header has surely gone, drop it */
    int zero = 0;
    struct timespec ms300 = { 0, 300 * 1000 * 1000 };
    nanosleep(&ms300, NULL);
    zmq_setsockopt(s2, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_close(s2);
    zmq_close(s);
    free(junk);
    free(f.p);
}

/* CONNS plain TCP connections: bytes that are not ZMTP, or a ZMTP 3.0
 * NULL greeting then a frame claiming 2^62 bytes. */
static void raw(const struct peer *p, unsigned long conns)
{
    char host[256];
    const char *hp = strstr(p->endpoint, "://");
    const char *colon = strrchr(p->endpoint, ':');
    struct addrinfo hints = { .ai_family = AF_INET,
                              .ai_socktype = SOCK_STREAM };
    struct addrinfo *res;

    if (!hp || !colon || colon <= hp + 3
        || (size_t)(colon - hp - 3) >= sizeof(host)) {
        fprintf(stderr, "zgarbage: cannot parse %s\n", p->endpoint);
        exit(1);
    }
    snprintf(host, sizeof(host), "%.*s", (int)(colon - hp - 3), hp + 3);
    if (getaddrinfo(host, colon + 1, &hints, &res) != 0) {
        fprintf(stderr, "zgarbage: cannot resolve %s\n", p->endpoint);
        exit(1);
    }
    for (unsigned long i = 0; i < conns; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        unsigned char buf[2048];
        size_t n = 0;
        if (fd < 0 || connect(fd, res->ai_addr, res->ai_addrlen) < 0) {
            if (fd >= 0)
                close(fd);
            continue;
        }
        if (i % 2) {
            /* signature, version 3.0, mechanism NULL, as-server 0 */
            static const unsigned char greet[64] = {
                0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0,
                'N', 'U', 'L', 'L',
            };
            memcpy(buf, greet, sizeof(greet));
            n = sizeof(greet);
            buf[n++] = 0x02;    /* a long message frame ... */
            buf[n++] = 0x40;    /* ... of 2^62 bytes */
            memset(buf + n, 0, 7);
            n += 7;
            fill(buf + n, 64);
            n += 64;
        }
        else {
            n = 1 + below(sizeof(buf) - 1);
            fill(buf, n);
        }
        (void)!write(fd, buf, n);
        close(fd);
    }
    freeaddrinfo(res);
}

static double mono(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* K heavy requests on one socket, then a status request on another:
 * how long its answer takes, and theirs. */
static void heavy(void *ctx, const char *endpoint, unsigned long k)
{
    struct pl_wbuf pad, st;
    void *s = dealer(ctx, endpoint, false, false);
    void *q = dealer(ctx, endpoint, false, false);
    int ms = 60000, zero = 0;
    char buf[256];

    /* [2, 105, seq, {"pad": [nil x ...]}] is 7 values besides the nils */
    raw_wbuf_init(&pad, PL_MSG_STATUS, 1, 1);
    raw_key(&pad.pk, "pad");
    msgpack_pack_array(&pad.pk, PL_MSG_MAX_OBJECTS - 7);
    for (size_t i = 0; i < PL_MSG_MAX_OBJECTS - 7; i++)
        msgpack_pack_nil(&pad.pk);
    for (unsigned long i = 0; i < k; i++) {
        if (zmq_send(s, pad.sb.data, pad.sb.size, 0) < 0) {
            fprintf(stderr, "zgarbage: heavy: send: %s\n",
                    zmq_strerror(errno));
            exit(1);
        }
    }
    /* let pilotd start on them */
    struct timespec pause = { 0, 200 * 1000 * 1000 };
    nanosleep(&pause, NULL);
    raw_wbuf_init(&st, PL_MSG_STATUS, 3, 0);
    zmq_setsockopt(q, ZMQ_RCVTIMEO, &ms, sizeof(ms));
    double t0 = mono();
    if (zmq_send(q, st.sb.data, st.sb.size, 0) < 0
        || zmq_recv(q, buf, sizeof(buf), 0) < 0) {
        fprintf(stderr, "zgarbage: heavy: no status answer in %d s\n",
                ms / 1000);
        exit(1);
    }
    double t_status = mono() - t0;
    /* and how long all of them took, to compare */
    unsigned long got = 0;
    zmq_setsockopt(s, ZMQ_RCVTIMEO, &ms, sizeof(ms));
    while (got < k && zmq_recv(s, buf, sizeof(buf), 0) >= 0)
        got++;
    printf("zgarbage: status behind %lu heavy requests: %.3f s, all %lu "
           "answered in %.3f s\n", k, t_status, got, mono() - t0);
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof(zero));
    zmq_close(s);
    zmq_close(q);
    pl_wbuf_destroy(&pad);
    pl_wbuf_destroy(&st);
}

static void report(const struct peer *p)
{
    unsigned long total = 0;

    printf("zgarbage: %s socket:", p->name);
    for (int k = 0; k < K_NKINDS; k++) {
        printf(" %s %lu", kind_name[k], p->sent[k]);
        total += p->sent[k];
    }
    printf("; %lu in all, %lu big (%lu answered); %lu replies\n", total,
           p->big, p->big_replies, p->replies);
}

static void usage(void)
{
    fprintf(stderr, "usage: zgarbage [-n FRAMES] [-s SEED] [--socket "
            "client|agent|both] [--big] [--raw CONNS] [--heavy K] "
            "PILOTDIR\n");
    exit(2);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "frames", required_argument, NULL, 'n' },
        { "seed", required_argument, NULL, 's' },
        { "socket", required_argument, NULL, 'S' },
        { "big", no_argument, NULL, 'b' },
        { "raw", required_argument, NULL, 'r' },
        { "heavy", required_argument, NULL, 'H' },
        { NULL, 0, NULL, 0 },
    };
    unsigned long frames = 10000, conns = 0, nheavy = 0;
    uint64_t seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    const char *which = "both";
    bool with_big = false;
    struct pl_endpoint ep;
    struct pl_error err;
    int c;

    while ((c = getopt_long(argc, argv, "n:s:", opts, NULL)) != -1) {
        switch (c) {
        case 'n': frames = strtoul(optarg, NULL, 10); break;
        case 's': seed = strtoull(optarg, NULL, 0); break;
        case 'S': which = optarg; break;
        case 'b': with_big = true; break;
        case 'r': conns = strtoul(optarg, NULL, 10); break;
        case 'H': nheavy = strtoul(optarg, NULL, 10); break;
        default: usage();
        }
    }
    if (optind + 1 != argc
        || (strcmp(which, "client") && strcmp(which, "agent")
            && strcmp(which, "both")))
        usage();
    if (pl_endpoint_read(argv[optind], &ep, &err) < 0) {
        fprintf(stderr, "zgarbage: %s\n", err.text);
        return 1;
    }
    char kdir[PL_PATH_MAX + 16];
    pl_keys_path(argv[optind], kdir, sizeof(kdir));
    if (pl_keys_load_peer(kdir, "client", &keys, &err) < 0
        || pl_keys_load_peer(kdir, "agent", &agent_keys, &err) < 0) {
        fprintf(stderr, "zgarbage: %s\n", err.text);
        return 1;
    }
    rng_state = seed ? seed : 1;
    printf("zgarbage: seed %llu\n", (unsigned long long)seed);
    fflush(stdout);
    templates();

    void *ctx = zmq_ctx_new();
    struct peer peers[2] = {
        { .name = "client", .endpoint = ep.client, .agent = false },
        { .name = "agent", .endpoint = ep.agent, .agent = true },
    };
    for (int i = 0; i < 2; i++) {
        struct peer *p = &peers[i];
        if (strcmp(which, "both") && strcmp(which, p->name))
            continue;
        flood(ctx, p, frames);
        if (with_big)
            big(ctx, p);
        if (conns)
            raw(p, conns);
        report(p);
        fflush(stdout);
        zmq_close(p->sock);
    }
    if (nheavy)
        heavy(ctx, ep.client, nheavy);
    for (int i = 0; i < ntmpl; i++)
        pl_wbuf_destroy(&tmpl[i]);
    zmq_ctx_term(ctx);
    return 0;
}
