/* tests/unit/test_daemon_decode.c - pilotd's decoders of what peers send */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "daemon/decode.h"
#include "proto/msg.h"
#include "tests/unit/tap.h"

/* A body built with the pl_w_* helpers, decoded as pilotd decodes it. */
struct body {
    struct pl_wbuf w;
    struct pl_msg m;
};

static void body_begin(struct body *b, int type, uint32_t nfields)
{
    pl_wbuf_init(&b->w, type, 1, nfields);
}

/* The body map, or NULL if the envelope did not decode. */
static const msgpack_object *body_end(struct body *b)
{
    struct pl_error e;

    if (pl_msg_decode(b->w.sb.data, b->w.sb.size, &b->m, &e) < 0) {
        diag("envelope refused: %s", e.text);
        return NULL;
    }
    return b->m.body;
}

static void body_free(struct body *b)
{
    pl_msg_release(&b->m);
    pl_wbuf_destroy(&b->w);
}

/* ---- task specs ---- */

/* Decode a one-field-changed spec: argv [sh -c true] plus 'key' = 'val'
 * packed by the caller's callback. */
typedef void (*pack_f)(msgpack_packer *pk);

/* ... where the callback packs 'n' fields */
static int spec_with_n(pack_f extra, uint32_t n, struct pl_spec *s,
                       struct pl_error *e)
{
    struct body b;
    char a0[] = "sh", a1[] = "-c", a2[] = "true";
    char *argv[] = { a0, a1, a2, NULL };
    const msgpack_object *o;
    int rc = -2;

    body_begin(&b, PL_MSG_SUBMIT, extra ? 1 + n : 1);
    pl_w_kstrv(&b.w.pk, "argv", argv);
    if (extra)
        extra(&b.w.pk);
    if ((o = body_end(&b)))
        rc = pl_spec_decode(o, s, e);
    body_free(&b);
    return rc;
}

static int spec_with(pack_f extra, struct pl_spec *s, struct pl_error *e)
{
    return spec_with_n(extra, 1, s, e);
}

static void p_ranks0(msgpack_packer *pk) { pl_w_kuint(pk, "ranks", 0); }
static void p_cpr0(msgpack_packer *pk)
{
    pl_w_kuint(pk, "cores_per_rank", 0);
}
static void p_comm_bad(msgpack_packer *pk) { pl_w_kstr(pk, "comm", "pvm"); }
static void p_env_bad(msgpack_packer *pk)
{
    char e0[] = "=x";
    char *env[] = { e0, NULL };
    pl_w_kstrv(pk, "env", env);
}
static void p_timeout_neg(msgpack_packer *pk)
{
    pl_w_kdouble(pk, "timeout", -1.0);
}
static void p_name_int(msgpack_packer *pk) { pl_w_kuint(pk, "name", 5); }
/* not UTF-8: kept as JSON they were dropped from the stored argv */
static void p_name_latin1(msgpack_packer *pk)
{
    pl_w_kstr(pk, "name", "\xe9t\xe9");
}
static void p_cwd_latin1(msgpack_packer *pk)
{
    pl_w_kstr(pk, "cwd", "/tmp/\xe9");
}
static void p_env_latin1(msgpack_packer *pk)
{
    char e0[] = "A=\xff";
    char *env[] = { e0, NULL };
    pl_w_kstrv(pk, "env", env);
}
static void p_launcher_nompi(msgpack_packer *pk)
{
    pl_w_kstr(pk, "launcher", "mpirun");
}

static void p_array(uint64_t a, uint64_t b, uint64_t c, msgpack_packer *pk)
{
    pl_w_key(pk, "array");
    msgpack_pack_array(pk, 3);
    msgpack_pack_uint64(pk, a);
    msgpack_pack_uint64(pk, b);
    msgpack_pack_uint64(pk, c);
}
static void p_array_ok(msgpack_packer *pk) { p_array(2, 11, 3, pk); }
static void p_array_step0(msgpack_packer *pk) { p_array(0, 9, 0, pk); }
static void p_array_back(msgpack_packer *pk) { p_array(9, 1, 1, pk); }
static void p_array_big(msgpack_packer *pk) { p_array(0, 1000000, 1, pk); }
static void p_array_two(msgpack_packer *pk)
{
    pl_w_key(pk, "array");
    msgpack_pack_array(pk, 2);
    msgpack_pack_uint64(pk, 0);
    msgpack_pack_uint64(pk, 1);
}
static void p_after_ok(msgpack_packer *pk)
{
    pl_w_key(pk, "after");
    msgpack_pack_array(pk, 2);
    msgpack_pack_map(pk, 1);
    pl_w_kuint(pk, "id", 7);
    msgpack_pack_map(pk, 2);
    pl_w_kstr(pk, "name", "prep");
    pl_w_kbool(pk, "any", true);
}
static void p_after_both(msgpack_packer *pk)
{
    pl_w_key(pk, "after");
    msgpack_pack_array(pk, 1);
    msgpack_pack_map(pk, 2);
    pl_w_kuint(pk, "id", 7);
    pl_w_kstr(pk, "name", "prep");
}
static void p_after_none(msgpack_packer *pk)
{
    pl_w_key(pk, "after");
    msgpack_pack_array(pk, 1);
    msgpack_pack_map(pk, 1);
    pl_w_kbool(pk, "any", true);
}
static void p_after_zero(msgpack_packer *pk)
{
    pl_w_key(pk, "after");
    msgpack_pack_array(pk, 1);
    msgpack_pack_map(pk, 1);
    pl_w_kuint(pk, "id", 0);
}
static void p_after_int(msgpack_packer *pk)
{
    pl_w_key(pk, "after");
    msgpack_pack_array(pk, 1);
    msgpack_pack_uint64(pk, 7);
}

static void p_tags(const char *a, const char *b, msgpack_packer *pk)
{
    char x[600], y[600];
    char *v[] = { x, y, NULL };

    snprintf(x, sizeof(x), "%s", a);
    snprintf(y, sizeof(y), "%s", b);
    pl_w_kstrv(pk, "tags", v);
}
static void p_queue_ok(msgpack_packer *pk)
{
    pl_w_kint(pk, "priority", -42);
    p_tags("model=lstm", "a.b-c_d=", pk);
    pl_w_kuint(pk, "retry_failed", 9);
}
static void p_prio_big(msgpack_packer *pk)
{
    pl_w_kint(pk, "priority", 1000001);
}
static void p_prio_str(msgpack_packer *pk) { pl_w_kstr(pk, "priority", "1"); }
static void p_tag_noeq(msgpack_packer *pk) { p_tags("model", "a=1", pk); }
static void p_tag_twice(msgpack_packer *pk) { p_tags("a=1", "a=2", pk); }
static void p_tag_space(msgpack_packer *pk) { p_tags("a b=1", "c=2", pk); }
static void p_tag_ctrl(msgpack_packer *pk) { p_tags("a=x\ty", "c=2", pk); }
static void p_tag_long(msgpack_packer *pk)
{
    char v[300];

    memset(v, 'v', sizeof(v));
    memcpy(v, "k=", 2);
    v[sizeof(v) - 1] = '\0';
    p_tags(v, "c=2", pk);
}

static void test_spec(void)
{
    struct pl_spec s;
    struct pl_error e = { "" };

    is(spec_with(NULL, &s, &e), 0, "spec: argv alone decodes");
    ok(s.argv && !strcmp(s.argv[0], "sh"), "... argv[0]");
    pl_spec_clear(&s);
    {
        struct body b;
        char a0[] = "cat", a1[] = "\xe9t\xe9.txt";
        char *argv[] = { a0, a1, NULL };
        const msgpack_object *o;
        body_begin(&b, PL_MSG_SUBMIT, 1);
        pl_w_kstrv(&b.w.pk, "argv", argv);
        errno = 0;
        ok((o = body_end(&b)) && pl_spec_decode(o, &s, &e) == -1
               && errno == EINVAL && strstr(e.text, "argument 1"),
           "spec: an argument that is not UTF-8 refused (%s)", e.text);
        body_free(&b);
    }
    ok(spec_with(NULL, &s, &e) == 0, "spec: argv alone decodes again");
    ok(s.argv && !strcmp(s.argv[2], "true") && s.ranks == 1 && s.cpr == 1
           && !s.env && !s.comm,
       "... one rank, one core, no env, no comm");
    pl_spec_clear(&s);
    ok(s.argv == NULL, "pl_spec_clear zeroes");
    is(spec_with(p_array_ok, &s, &e), 0, "spec: array [2, 11, 3] decodes");
    ok(s.array && s.astart == 2 && s.aend == 11 && s.astep == 3
           && pl_spec_count(&s) == 4,
       "... 4 elements: 2, 5, 8, 11");
    pl_spec_clear(&s);
    is(spec_with(p_after_ok, &s, &e), 0, "spec: after [{id 7}, {name prep, "
       "any}] decodes");
    ok(s.nafter == 2 && s.after[0].id == 7 && !s.after[0].any
           && !s.after[0].name && s.after[1].id == 0
           && !strcmp(s.after[1].name, "prep") && s.after[1].any,
       "... both entries as sent");
    pl_spec_clear(&s);
    ok(!s.after && !s.nafter, "... cleared");
    is(spec_with_n(p_queue_ok, 3, &s, &e), 0, "spec: priority, tags, "
       "retry_failed decode");
    ok(s.priority == -42 && s.retry == 9 && s.tags
           && !strcmp(s.tags[0], "model=lstm") && !strcmp(s.tags[1], "a.b-c_d=")
           && !s.tags[2],
       "... priority -42, retry_failed 9, two tags (an empty value too)");
    pl_spec_clear(&s);

    struct {
        pack_f f;
        int errnum;
        const char *what;
    } bad[] = {
        { p_ranks0, EINVAL, "ranks 0" },
        { p_cpr0, EINVAL, "cores_per_rank 0" },
        { p_comm_bad, EINVAL, "an unknown comm" },
        { p_env_bad, EINVAL, "env '=x'" },
        { p_timeout_neg, EINVAL, "a negative timeout" },
        { p_name_int, EPROTO, "a name that is an integer" },
        { p_launcher_nompi, EINVAL, "a launcher without comm mpi" },
        { p_name_latin1, EINVAL, "a name that is not UTF-8" },
        { p_cwd_latin1, EINVAL, "a cwd that is not UTF-8" },
        { p_env_latin1, EINVAL, "an env entry that is not UTF-8" },
        { p_array_step0, EINVAL, "an array of step 0" },
        { p_array_back, EINVAL, "an array that ends before it starts" },
        { p_array_big, EINVAL, "an array of 1,000,001" },
        { p_array_two, EPROTO, "an array of two numbers" },
        { p_after_both, EINVAL, "an after entry with an id and a name" },
        { p_after_none, EINVAL, "an after entry with neither" },
        { p_after_zero, EINVAL, "after task 0" },
        { p_after_int, EPROTO, "an after entry that is not a map" },
        { p_prio_big, EINVAL, "priority 1000001" },
        { p_prio_str, EPROTO, "a priority that is a string" },
        { p_tag_noeq, EINVAL, "a tag without '='" },
        { p_tag_twice, EINVAL, "a tag key given twice" },
        { p_tag_space, EINVAL, "a tag key with a space" },
        { p_tag_ctrl, EINVAL, "a tag value with a tab" },
        { p_tag_long, EINVAL, "a tag value of 297 bytes" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        e.text[0] = '\0';
        errno = 0;
        int rc = spec_with(bad[i].f, &s, &e);
        ok(rc == -1 && errno == bad[i].errnum && e.text[0] && !s.argv,
           "spec: %s refused (%s), spec cleared", bad[i].what, e.text);
    }
}

/* ---- register ---- */

static int reg_with(const char *node, const char *gpu, uint32_t ncores,
                    struct pl_agent_reg *r, struct pl_error *e)
{
    struct body b;
    uint64_t cores[] = { 0, 1, 2, 3 };
    char g[80];
    char *gpus[] = { g, NULL };
    const msgpack_object *o;
    int rc = -2;

    snprintf(g, sizeof(g), "%s", gpu ? gpu : "");
    body_begin(&b, PL_MSG_REGISTER, gpu ? 4 : 3);
    pl_w_kstr(&b.w.pk, "node", node);
    pl_w_kuint(&b.w.pk, "pid", 42);
    pl_w_kuintv(&b.w.pk, "cores", cores, ncores);
    if (gpu)
        pl_w_kstrv(&b.w.pk, "gpus", gpus);
    if ((o = body_end(&b)))
        rc = pl_agent_reg_decode(o, r, e);
    body_free(&b);
    return rc;
}

static void test_register(void)
{
    struct pl_agent_reg r;
    struct pl_error e = { "" };
    char long63[64], long64[65];

    is(reg_with("n1", "0", 4, &r, &e), 0, "register: a good one decodes");
    ok(!strcmp(r.node, "n1") && r.pid == 42 && r.ncpu == 4 && r.cpu[3] == 3
           && r.gpus && !strcmp(r.gpus[0], "0") && !r.gpus[1],
       "... node, pid, cores, gpus");
    pl_agent_reg_clear(&r);
    is(reg_with("Node-7.rack_2", NULL, 1, &r, &e), 0,
       "register: letters, digits, '.', '-', '_' are a node name");
    pl_agent_reg_clear(&r);
    memset(long63, 'a', 63);
    long63[63] = '\0';
    is(reg_with(long63, NULL, 1, &r, &e), 0, "register: a name of 63 bytes");
    pl_agent_reg_clear(&r);
    memset(long64, 'a', 64);
    long64[64] = '\0';

    /* names the run entries' readers would refuse, or that break a log
     * line: every multi-rank task placed there would fail */
    const char *badnames[] = { "", "a,b", "a b", "a:b", "a\nb", "a;b",
                               "a/b", long64 };
    for (size_t i = 0; i < sizeof(badnames) / sizeof(badnames[0]); i++) {
        errno = 0;
        e.text[0] = '\0';
        ok(reg_with(badnames[i], NULL, 1, &r, &e) == -1 && errno == EPROTO
               && !r.node && e.text[0],
           "register: node name #%zu refused (%s)", i, e.text);
    }
    const char *badgpus[] = { "", "0,1", "0;1", "a b", "\x7f" };
    for (size_t i = 0; i < sizeof(badgpus) / sizeof(badgpus[0]); i++) {
        errno = 0;
        ok(reg_with("n1", badgpus[i], 1, &r, &e) == -1 && errno == EPROTO
               && !r.gpus,
           "register: GPU id #%zu refused (%s)", i, e.text);
    }
    errno = 0;
    ok(reg_with("n1", NULL, 0, &r, &e) == -1 && errno == EPROTO,
       "register: no cores refused (%s)", e.text);

    /* the same core or GPU twice: pilotd would place two tasks on it */
    struct body b;
    uint64_t dup[] = { 3, 1, 3 };
    char g0[] = "0", g1[] = "0";
    char *gpus[] = { g0, g1, NULL };
    const msgpack_object *o;
    body_begin(&b, PL_MSG_REGISTER, 2);
    pl_w_kstr(&b.w.pk, "node", "n1");
    pl_w_kuintv(&b.w.pk, "cores", dup, 3);
    errno = 0;
    ok((o = body_end(&b)) && pl_agent_reg_decode(o, &r, &e) == -1
           && errno == EPROTO && !r.cpu,
       "register: a CPU id given twice refused (%s)", e.text);
    body_free(&b);
    body_begin(&b, PL_MSG_REGISTER, 3);
    pl_w_kstr(&b.w.pk, "node", "n1");
    pl_w_kuintv(&b.w.pk, "cores", dup, 2);
    pl_w_kstrv(&b.w.pk, "gpus", gpus);
    errno = 0;
    ok((o = body_end(&b)) && pl_agent_reg_decode(o, &r, &e) == -1
           && errno == EPROTO && !r.gpus,
       "register: a GPU id given twice refused (%s)", e.text);
    body_free(&b);
}

/* ---- events ---- */

static void test_event(void)
{
    struct body b;
    struct pl_agent_event ev;
    struct pl_error e = { "" };
    const msgpack_object *o, *arr;

    body_begin(&b, PL_MSG_EVENTS, 1);
    pl_w_key(&b.w.pk, "events");
    msgpack_pack_array(&b.w.pk, 4);
    msgpack_pack_map(&b.w.pk, 7);
    pl_w_kuint(&b.w.pk, "id", 7);
    pl_w_kuint(&b.w.pk, "attempt", 1);
    pl_w_kuint(&b.w.pk, "rank", 2);
    pl_w_kstr(&b.w.pk, "state", "failed");
    pl_w_kdouble(&b.w.pk, "time", 12.5);
    pl_w_kint(&b.w.pk, "exit_code", 3);
    pl_w_kstr(&b.w.pk, "error", "spawn: no");
    msgpack_pack_map(&b.w.pk, 3); /* the least an event has */
    pl_w_kuint(&b.w.pk, "id", 8);
    pl_w_kuint(&b.w.pk, "attempt", 0);
    pl_w_kstr(&b.w.pk, "state", "running");
    msgpack_pack_uint64(&b.w.pk, 5); /* not a map */
    msgpack_pack_map(&b.w.pk, 3);
    pl_w_kuint(&b.w.pk, "id", 9);
    pl_w_kuint(&b.w.pk, "attempt", (uint64_t)UINT32_MAX + 1);
    pl_w_kstr(&b.w.pk, "state", "done");
    if (!(o = body_end(&b)) || !(arr = pl_mp_get(o, "events"))) {
        ok(0, "events body");
        body_free(&b);
        return;
    }
    const msgpack_object *v = arr->via.array.ptr;
    is(pl_agent_event_decode(&v[0], &ev, &e), 0, "event: a full one");
    ok(ev.id == 7 && ev.attempt == 1 && ev.rank == 2
           && !strcmp(ev.state, "failed") && ev.time == 12.5
           && ev.exit_code == 3 && ev.signal == -1 && !ev.has_rss
           && !strcmp(ev.error, "spawn: no"),
       "... every field");
    pl_agent_event_clear(&ev);
    is(pl_agent_event_decode(&v[1], &ev, &e), 0, "event: id, attempt, state");
    ok(ev.rank == 0 && ev.exit_code == -1 && ev.signal == -1 && !ev.error,
       "... defaults: rank 0, no exit code, signal or error");
    pl_agent_event_clear(&ev);
    errno = 0;
    ok(pl_agent_event_decode(&v[2], &ev, &e) == -1 && errno == EPROTO,
       "event: not a map refused (%s)", e.text);
    errno = 0;
    ok(pl_agent_event_decode(&v[3], &ev, &e) == -1 && errno == EPROTO
           && !ev.state,
       "event: attempt > UINT32_MAX refused, event cleared (%s)", e.text);
    body_free(&b);
}

int main(void)
{
    plan(64);
    test_spec();
    test_register();
    test_event();
    return done_testing();
}
