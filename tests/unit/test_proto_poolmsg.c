/* tests/unit/test_proto_poolmsg.c - a pool's worker messages: what the
 * worker relies on round-trips, and a CALL's group is checked in linear
 * time */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/poolmsg.h"
#include "proto/spec.h"
#include "proto/strv.h"
#include "tests/unit/tap.h"

/* Encode 'c', decode it into 'out'; the decoder's return */
static int call_trip(const struct pl_wcall *c, struct pl_wcall *out,
                     struct pl_error *e)
{
    struct pl_wbuf w;
    struct pl_msg m;
    int rc = -2;

    pl_wcall_encode(&w, c);
    if (pl_msg_decode(w.sb.data, w.sb.size, &m, e) == 0) {
        rc = m.type == PL_MSG_W_CALL ? pl_wcall_decode(m.body, out, e) : -3;
        pl_msg_release(&m);
    }
    pl_wbuf_destroy(&w);
    return rc;
}

static void test_call(void)
{
    uint64_t group[] = { 3, 0, 2 };
    char fn[] = "./lib.so:fn", a[] = "a", kv[] = "K=V", cwd[] = "/w",
         out[] = "o.%r", err[] = "e";
    char *argv[] = { fn, a, NULL };
    char *env[] = { kv, NULL };
    struct pl_wcall c = { .id = 7, .attempt = 2, .rank = 1, .size = 3,
                          .group = group, .fn = PL_FN_C, .argv = argv,
                          .env = env, .cwd = cwd, .out = out, .err = err,
                          .array_index = 4 };
    struct pl_wcall d;
    struct pl_error e = { "" };

    is(call_trip(&c, &d, &e), 0, "call: a good one round-trips (%s)",
       e.text);
    ok(d.id == 7 && d.attempt == 2 && d.rank == 1 && d.size == 3
           && d.group[0] == 3 && d.group[2] == 2 && d.fn == PL_FN_C
           && !strcmp(d.argv[1], "a") && !d.argv[2]
           && !strcmp(d.env[0], "K=V") && !strcmp(d.cwd, "/w")
           && !strcmp(d.out, "o.%r") && d.array_index == 4,
       "call: every field comes back");
    pl_wcall_clear(&d);

    group[2] = 3;
    errno = 0;
    is(call_trip(&c, &d, &e), -1, "call: a world rank twice is refused");
    ok(errno == EPROTO && strstr(e.text, "twice"), "call: ... %s", e.text);
}

static void test_big_group(void)
{
    uint64_t n = PL_POOL_MAX_WORKERS;
    uint64_t *group = malloc(n * sizeof(*group));
    char fn[] = "m:f", out[] = "o", err[] = "e";
    char *argv[] = { fn, NULL };
    struct pl_wcall c = { .id = 1, .attempt = 1, .rank = 5, .size = n,
                          .group = group, .fn = PL_FN_PY, .argv = argv,
                          .out = out, .err = err, .array_index = -1 };
    struct pl_wcall d;
    struct pl_error e = { "" };
    double t;

    for (uint64_t i = 0; i < n; i++)
        group[i] = n - 1 - i;
    t = pl_mono();
    is(call_trip(&c, &d, &e), 0, "call: a group of %llu ranks decodes (%s)",
       (unsigned long long)n, e.text);
    t = pl_mono() - t;
    /* pairwise, 2^31 comparisons: 0.7 s at -O2 on the dev VM; a
     * bitmap: 8 ms, the decoding of 65,536 integers included */
    ok(t < 0.2, "call: ... in %.3f s (linear in the group)", t);
    ok(d.group[0] == n - 1 && d.group[n - 1] == 0, "call: ... all of it");
    pl_wcall_clear(&d);
    group[n - 1] = group[0];
    is(call_trip(&c, &d, &e), -1, "call: ... and its last rank twice is "
                                  "refused");
    free(group);
}

static void test_small(void)
{
    char pool[] = "p", nogpu[] = "no GPU";
    struct pl_whello h = { .pool = pool, .job = 9, .attempt = 1,
                           .world_rank = 1, .world_size = 2, .pid = 42,
                           .python = true, .nccl = nogpu };
    struct pl_whello g;
    struct pl_wreturn r = { .id = 3, .attempt = 1, .code = 256,
                            .time = 1.5 };
    struct pl_wreturn q;
    struct pl_error e = { "" };
    struct pl_wbuf w;
    struct pl_msg m;
    unsigned char hdr[4];
    int64_t sig = -1;

    pl_whello_encode(&w, &h);
    ok(pl_msg_decode(w.sb.data, w.sb.size, &m, &e) == 0
           && pl_whello_decode(m.body, &g, &e) == 0 && g.python
           && !strcmp(g.nccl, "no GPU") && g.world_rank == 1 && g.job == 9,
       "hello: round-trips (%s)", e.text);
    pl_msg_release(&m);
    pl_whello_clear(&g);
    pl_wbuf_destroy(&w);

    pl_wreturn_encode(&w, &r);
    ok(pl_msg_decode(w.sb.data, w.sb.size, &m, &e) == 0
           && pl_wreturn_decode(m.body, &q, &e) < 0,
       "return: code 256 is refused (%s)", e.text);
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);

    pl_wcrash_encode(&w, 11);
    ok(pl_msg_decode(w.sb.data, w.sb.size, &m, &e) == 0
           && pl_wcrash_decode(m.body, &sig, &e) == 0 && sig == 11,
       "crash: signal 11 round-trips");
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);

    pl_wframe_header(hdr, 0x01020304);
    is(pl_wframe_len(hdr), 0x01020304, "frame: a header round-trips");
}

int main(void)
{
    plan(12);
    test_call();
    test_big_group();
    test_small();
    return done_testing();
}
