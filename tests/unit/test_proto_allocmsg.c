/* tests/unit/test_proto_allocmsg.c - GROW and SHRINK as encoded and
 * decoded (what a batch script may hold is checked), and REGISTER's job
 * and job_end (protocol 12) */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "proto/agentmsg.h"
#include "proto/allocmsg.h"
#include "proto/msg.h"
#include "tests/unit/tap.h"

/* Decode 'w' into 'm': the body, or NULL. */
static const msgpack_object *reread(struct pl_wbuf *w, struct pl_msg *m,
                                    int type)
{
    struct pl_error e;

    if (pl_msg_decode(w->sb.data, w->sb.size, m, &e) < 0) {
        diag("envelope refused: %s", e.text);
        return NULL;
    }
    if (m->type != type) {
        pl_msg_release(m);
        return NULL;
    }
    return m->body;
}

/* A GROW of 'q' decoded: 0 or -1 (its error in 'e'). */
static int grow_trip(const struct pl_grow_req *q, struct pl_grow_req *out,
                     struct pl_error *e)
{
    struct pl_wbuf w;
    struct pl_msg m;
    const msgpack_object *o;
    int rc = -1;

    pl_grow_req_encode(&w, 7, q);
    if ((o = reread(&w, &m, PL_MSG_GROW))) {
        rc = pl_grow_req_decode(o, out, e);
        pl_msg_release(&m);
    }
    pl_wbuf_destroy(&w);
    return rc;
}

static int shrink_trip(const struct pl_shrink_req *q,
                       struct pl_shrink_req *out, struct pl_error *e)
{
    struct pl_wbuf w;
    struct pl_msg m;
    const msgpack_object *o;
    int rc = -1;

    pl_shrink_req_encode(&w, 8, q);
    if ((o = reread(&w, &m, PL_MSG_SHRINK))) {
        rc = pl_shrink_req_decode(o, out, e);
        pl_msg_release(&m);
    }
    pl_wbuf_destroy(&w);
    return rc;
}

static void grow(void)
{
    struct pl_grow_req q = { .nodes = 3, .time = (char *)"1:00:00",
                             .partition = (char *)"gpu", .drain = 90 }, r;
    struct pl_error e = { "" };

    ok(grow_trip(&q, &r, &e) == 0 && r.nodes == 3
           && !strcmp(r.time, "1:00:00") && !strcmp(r.partition, "gpu")
           && r.drain == 90, "grow: nodes, time, partition, drain (%s)",
       e.text);
    pl_grow_req_clear(&r);
    q = (struct pl_grow_req){ .nodes = 1, .drain = -1 };
    ok(grow_trip(&q, &r, &e) == 0 && !r.time && !r.partition
           && r.drain < 0, "grow: only nodes");
    pl_grow_req_clear(&r);
    q.nodes = 0;
    ok(grow_trip(&q, &r, &e) < 0 && errno == EPROTO, "grow: 0 nodes");
    q = (struct pl_grow_req){ .nodes = 1, .time = (char *)"1;reboot",
                              .drain = -1 };
    ok(grow_trip(&q, &r, &e) < 0 && strstr(e.text, "time"),
       "grow: a time a shell would read is refused");
    q = (struct pl_grow_req){ .nodes = 1, .partition = (char *)"a\nb",
                              .drain = -1 };
    ok(grow_trip(&q, &r, &e) < 0 && strstr(e.text, "partition"),
       "grow: a partition with a newline is refused");
    q = (struct pl_grow_req){ .nodes = 1, .drain = INFINITY };
    ok(grow_trip(&q, &r, &e) < 0 && strstr(e.text, "drain"),
       "grow: a drain that is not finite");
    q = (struct pl_grow_req){ .nodes = PL_ALLOC_MAX_NODES + 1, .drain = -1 };
    ok(grow_trip(&q, &r, &e) < 0, "grow: too many nodes");
}

static void shrink(void)
{
    struct pl_shrink_req q = { .idle = 300, .alloc = 0 }, r;
    struct pl_error e = { "" };

    ok(shrink_trip(&q, &r, &e) == 0 && r.idle == 300 && r.alloc == 0,
       "shrink --idle 300");
    q = (struct pl_shrink_req){ .idle = -1, .alloc = 4 };
    ok(shrink_trip(&q, &r, &e) == 0 && r.idle < 0 && r.alloc == 4,
       "shrink --alloc 4");
    q = (struct pl_shrink_req){ .idle = 5, .alloc = 4 };
    ok(shrink_trip(&q, &r, &e) < 0 && strstr(e.text, "exactly one"),
       "shrink: both refused");
    q = (struct pl_shrink_req){ .idle = -1, .alloc = 0 };
    ok(shrink_trip(&q, &r, &e) < 0, "shrink: neither refused");
}

static void reg(void)
{
    uint64_t cpu[] = { 0, 1 };
    struct pl_register in = { .node = (char *)"n2", .pid = 5, .cpu = cpu,
                              .ncpu = 2, .job = 1529,
                              .job_end = 1796487582 }, out;
    struct pl_error e = { "" };
    struct pl_wbuf w;
    struct pl_msg m;
    const msgpack_object *o;

    pl_register_encode(&w, 1, &in);
    ok((o = reread(&w, &m, PL_MSG_REGISTER))
           && pl_register_decode(o, &out, &e) == 0 && out.job == 1529
           && out.job_end == 1796487582 && out.ncpu == 2,
       "register: job and job_end come back (%s)", e.text);
    if (o) {
        pl_register_clear(&out);
        pl_msg_release(&m);
    }
    pl_wbuf_destroy(&w);
    in.job = 0;
    in.job_end = 0;
    pl_register_encode(&w, 1, &in);
    ok((o = reread(&w, &m, PL_MSG_REGISTER))
           && pl_register_decode(o, &out, &e) == 0 && out.job == 0
           && out.job_end == 0, "register: without them (an older agent)");
    if (o) {
        pl_register_clear(&out);
        pl_msg_release(&m);
    }
    pl_wbuf_destroy(&w);
    in.job_end = 1e12;
    pl_register_encode(&w, 1, &in);
    ok((o = reread(&w, &m, PL_MSG_REGISTER))
           && pl_register_decode(o, &out, &e) < 0
           && strstr(e.text, "job_end"), "register: a job_end far off");
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);
}

int main(void)
{
    plan(7 + 4 + 3);
    grow();
    shrink();
    reg();
    return done_testing();
}
