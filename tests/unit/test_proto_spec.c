/* tests/unit/test_proto_spec.c - the task spec: its rules, its decoder,
 * its encoder */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "proto/clientmsg.h"
#include "proto/spec.h"
#include "tests/mpw.h"
#include "proto/msg.h"
#include "tests/unit/helpers.h"


/* ---- task specs ---- */

/* Decode a one-field-changed spec: argv [sh -c true] plus 'key' = 'val'
 * packed by the caller's callback. */
typedef void (*pack_f)(msgpack_packer *pk);

/* ... where the callback packs 'n' fields */
static int spec_with_n(pack_f extra, uint32_t n, struct pl_spec *s,
                       struct pl_error *e)
{
    struct t_body b;
    char a0[] = "sh", a1[] = "-c", a2[] = "true";
    char *argv[] = { a0, a1, a2, NULL };
    const msgpack_object *o;
    int rc = -2;

    t_body_begin(&b, PL_MSG_SUBMIT, extra ? 1 + n : 1);
    raw_kstrv(&b.w.pk, "argv", argv);
    if (extra)
        extra(&b.w.pk);
    if ((o = t_body_end(&b)))
        rc = pl_spec_decode(o, s, e);
    t_body_free(&b);
    return rc;
}

static int spec_with(pack_f extra, struct pl_spec *s, struct pl_error *e)
{
    return spec_with_n(extra, 1, s, e);
}

static void p_ranks0(msgpack_packer *pk) { raw_kuint(pk, "ranks", 0); }
static void p_cpr0(msgpack_packer *pk)
{
    raw_kuint(pk, "cores_per_rank", 0);
}
static void p_comm_bad(msgpack_packer *pk) { raw_kstr(pk, "comm", "pvm"); }
static void p_env_bad(msgpack_packer *pk)
{
    char e0[] = "=x";
    char *env[] = { e0, NULL };
    raw_kstrv(pk, "env", env);
}
static void p_timeout_neg(msgpack_packer *pk)
{
    raw_kdouble(pk, "timeout", -1.0);
}
static void p_name_int(msgpack_packer *pk) { raw_kuint(pk, "name", 5); }
/* not UTF-8: kept as JSON they were dropped from the stored argv */
static void p_name_latin1(msgpack_packer *pk)
{
    raw_kstr(pk, "name", "\xe9t\xe9");
}
static void p_cwd_latin1(msgpack_packer *pk)
{
    raw_kstr(pk, "cwd", "/tmp/\xe9");
}
static void p_env_latin1(msgpack_packer *pk)
{
    char e0[] = "A=\xff";
    char *env[] = { e0, NULL };
    raw_kstrv(pk, "env", env);
}
static void p_launcher_nompi(msgpack_packer *pk)
{
    raw_kstr(pk, "launcher", "mpirun");
}

static void p_array(uint64_t a, uint64_t b, uint64_t c, msgpack_packer *pk)
{
    raw_key(pk, "array");
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
    raw_key(pk, "array");
    msgpack_pack_array(pk, 2);
    msgpack_pack_uint64(pk, 0);
    msgpack_pack_uint64(pk, 1);
}
static void p_after_ok(msgpack_packer *pk)
{
    raw_key(pk, "after");
    msgpack_pack_array(pk, 2);
    msgpack_pack_map(pk, 1);
    raw_kuint(pk, "id", 7);
    msgpack_pack_map(pk, 2);
    raw_kstr(pk, "name", "prep");
    raw_kbool(pk, "any", true);
}
static void p_after_both(msgpack_packer *pk)
{
    raw_key(pk, "after");
    msgpack_pack_array(pk, 1);
    msgpack_pack_map(pk, 2);
    raw_kuint(pk, "id", 7);
    raw_kstr(pk, "name", "prep");
}
static void p_after_none(msgpack_packer *pk)
{
    raw_key(pk, "after");
    msgpack_pack_array(pk, 1);
    msgpack_pack_map(pk, 1);
    raw_kbool(pk, "any", true);
}
static void p_after_zero(msgpack_packer *pk)
{
    raw_key(pk, "after");
    msgpack_pack_array(pk, 1);
    msgpack_pack_map(pk, 1);
    raw_kuint(pk, "id", 0);
}
static void p_after_int(msgpack_packer *pk)
{
    raw_key(pk, "after");
    msgpack_pack_array(pk, 1);
    msgpack_pack_uint64(pk, 7);
}

static void p_tags(const char *a, const char *b, msgpack_packer *pk)
{
    char x[600], y[600];
    char *v[] = { x, y, NULL };

    snprintf(x, sizeof(x), "%s", a);
    snprintf(y, sizeof(y), "%s", b);
    raw_kstrv(pk, "tags", v);
}
static void p_queue_ok(msgpack_packer *pk)
{
    raw_kint(pk, "priority", -42);
    p_tags("model=lstm", "a.b-c_d=", pk);
    raw_kuint(pk, "retry_failed", 9);
}
static void p_prio_big(msgpack_packer *pk)
{
    raw_kint(pk, "priority", 1000001);
}
static void p_prio_str(msgpack_packer *pk) { raw_kstr(pk, "priority", "1"); }
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
        struct t_body b;
        char a0[] = "cat", a1[] = "\xe9t\xe9.txt";
        char *argv[] = { a0, a1, NULL };
        const msgpack_object *o;
        t_body_begin(&b, PL_MSG_SUBMIT, 1);
        raw_kstrv(&b.w.pk, "argv", argv);
        errno = 0;
        ok((o = t_body_end(&b)) && pl_spec_decode(o, &s, &e) == -1
               && errno == EINVAL && strstr(e.text, "argument 1"),
           "spec: an argument that is not UTF-8 refused (%s)", e.text);
        t_body_free(&b);
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

/* ---- the rules, on a spec built as the CLI builds one ---- */

/* A spec of argv [prog] and the defaults, owned by the caller. */
static void spec_make(struct pl_spec *s)
{
    char *argv[] = { (char *)"prog", NULL };

    pl_spec_init(s);
    s->argv = pl_strv_dup(argv);
}

static void test_check(void)
{
    struct pl_spec s;
    struct pl_error e = { "" };

    spec_make(&s);
    ok(pl_spec_check(&s, &e) == 0 && s.ranks == 1 && s.has_ranks
           && s.retries == PL_SPEC_DEFAULT_RETRIES && s.has_retries,
       "check: a bare spec passes, defaults settled (ranks 1, retries %d)",
       PL_SPEC_DEFAULT_RETRIES);
    pl_spec_clear(&s);
    spec_make(&s);
    s.nodes = 3;
    s.rpn = 2;
    ok(pl_spec_check(&s, &e) == 0 && s.ranks == 6,
       "check: --nodes 3 --ranks-per-node 2 alone: 6 ranks");
    pl_spec_clear(&s);

    spec_make(&s);
    s.append = 7;
    errno = 0;
    ok(pl_spec_check(&s, &e) == -1 && errno == EINVAL
           && strstr(e.text, "append: only an array's elements"),
       "check: append without an array refused (%s)", e.text);
    pl_spec_clear(&s);
    spec_make(&s);
    s.retry = 3;
    s.array = true;
    s.astart = 5;
    s.aend = PL_SPEC_MAX_INDEX;
    s.astep = 1;
    ok(pl_spec_check(&s, &e) == 0,
       "check: a retry's range may be longer than an array (%s): it only "
       "narrows the failed indexes", e.text);
    pl_spec_clear(&s);

    spec_make(&s);
    s.timeout = PL_SPEC_MAX_TIMEOUT * 2;
    errno = 0;
    ok(pl_spec_check(&s, &e) == -1 && errno == EINVAL
           && strstr(e.text, "timeout"),
       "check: a timeout past %.0f s refused (%s): the agent could not "
       "time it", PL_SPEC_MAX_TIMEOUT, e.text);
    pl_spec_clear(&s);
    spec_make(&s);
    s.ranks = 4;
    s.has_ranks = true;
    s.nodes = 5;
    ok(pl_spec_check(&s, &e) == -1 && strstr(e.text, "--nodes 5"),
       "check: more nodes than ranks refused (%s)", e.text);
    pl_spec_clear(&s);
    spec_make(&s);
    s.ranks = 5;
    s.has_ranks = true;
    s.nodes = 2;
    s.rpn = 2;
    ok(pl_spec_check(&s, &e) == -1 && strstr(e.text, "do not fit"),
       "check: 5 ranks on 2 nodes x 2 refused (%s)", e.text);
    pl_spec_clear(&s);
    spec_make(&s);
    s.launcher = PL_LAUNCHER_MPIRUN;
    ok(pl_spec_check(&s, &e) == -1 && strstr(e.text, "--comm mpi only"),
       "check: a launcher without comm mpi refused (%s)", e.text);
    s.comm = PL_COMM_MPI;
    ok(pl_spec_check(&s, &e) == 0, "check: ... with comm mpi it passes");
    pl_spec_clear(&s);
    spec_make(&s);
    free(s.argv[0]);
    s.argv[0] = strdup("");
    ok(pl_spec_check(&s, &e) == -1 && strstr(e.text, "empty"),
       "check: an empty command refused (%s)", e.text);
    pl_spec_clear(&s);
    spec_make(&s);
    s.cpr = PL_SPEC_MAX_CPR + 1;
    ok(pl_spec_check(&s, &e) == -1 && strstr(e.text, "cores"),
       "check: %d cores per rank refused (%s)", PL_SPEC_MAX_CPR + 1, e.text);
    pl_spec_clear(&s);

    /* the names and the tag-key rule, one place for all three programs */
    ok(pl_comm_parse("none") == PL_COMM_NONE
           && pl_comm_parse("torch") == PL_COMM_TORCH
           && pl_comm_parse("mpi") == PL_COMM_MPI && pl_comm_parse("pvm") < 0
           && pl_comm_parse(NULL) < 0 && !strcmp(pl_comm_name(2), "mpi")
           && !strcmp(pl_comm_name(7), "unknown"),
       "comm names parse and print");
    ok(pl_launcher_parse("srun") == PL_LAUNCHER_SRUN
           && pl_launcher_parse("mpirun") == PL_LAUNCHER_MPIRUN
           && pl_launcher_parse("") < 0
           && !strcmp(pl_launcher_name(PL_LAUNCHER_UNSET), "srun"),
       "launcher names parse and print (unset: srun)");
    char k64[80], k65[80];
    memset(k64, 'k', 64);
    strcpy(k64 + 64, "=v");
    memset(k65, 'k', 65);
    strcpy(k65 + 65, "=v");
    ok(pl_spec_tag_key("model=lstm") == 5 && pl_spec_tag_key("a.b-c_d") == 7
           && pl_spec_tag_key(k64) == 64 && pl_spec_tag_key(k65) == 0
           && pl_spec_tag_key("=v") == 0 && pl_spec_tag_key("a b=1") == 0,
       "tag keys: 1-64 of [A-Za-z0-9_.-] before '=' or the end");
}

/* ---- encode, then decode: the same spec ---- */

/* 's' as the one spec of a submit, and back into 't'. */
static int encode_decode(const struct pl_spec *s, struct pl_wbuf *w,
                         struct pl_msg *m, struct pl_spec *t,
                         struct pl_error *e)
{
    const msgpack_object *specs;

    memset(m, 0, sizeof(*m));
    pl_spec_init(t);
    pl_submit_begin(w, 1, 1);
    pl_spec_encode(w, s);
    if (pl_msg_decode(w->sb.data, w->sb.size, m, e) < 0)
        return -1;
    if (pl_submit_decode(m->body, &specs, e) < 0
        || specs->via.array.size != 1
        || pl_spec_decode(&specs->via.array.ptr[0], t, e) < 0) {
        pl_msg_release(m);
        memset(m, 0, sizeof(*m));
        return -1;
    }
    return 0;
}

/* The number of keys of the one spec in submit 'm'. */
static uint32_t encoded_keys(const struct pl_msg *m)
{
    const msgpack_object *specs = pl_mp_get(m->body, "tasks");

    return specs && specs->type == MSGPACK_OBJECT_ARRAY
                   && specs->via.array.size == 1
                   && specs->via.array.ptr[0].type == MSGPACK_OBJECT_MAP
               ? specs->via.array.ptr[0].via.map.size
               : 0;
}

static void test_round_trip(void)
{
    struct pl_spec s, t;
    struct pl_error e = { "" };
    struct pl_wbuf w;
    struct pl_msg m;
    char *env[] = { (char *)"A=1", (char *)"B=x=y", NULL };
    char *tags[] = { (char *)"model=lstm", (char *)"k=", NULL };

    spec_make(&s);
    s.name = strdup("train-{}");
    s.cwd = strdup("/work/dir");
    s.env = pl_strv_dup(env);
    s.tags = pl_strv_dup(tags);
    s.nodes = 2;
    s.rpn = 2;
    s.cpr = 3;
    s.gpr = 1;
    s.exclusive = true;
    s.comm = PL_COMM_MPI;
    s.launcher = PL_LAUNCHER_MPIRUN;
    s.timeout = 90.5;
    s.output_limit = 123456789;
    s.priority = -7;
    s.has_retries = true;
    s.retries = 0;
    s.array = true;
    s.astart = 0;
    s.aend = 99;
    s.astep = 3;
    s.append = 4242;
    s.after = calloc(3, sizeof(*s.after));
    s.nafter = 3;
    s.after[0] = (struct pl_dep){ .id = 12 };
    s.after[1] = (struct pl_dep){ .name = strdup("prep"), .any = true };
    s.after[2] = (struct pl_dep){ .id = 40, .elem = true, .index = 7 };
    ok(pl_spec_check(&s, &e) == 0, "round trip: the spec checks (%s)",
       e.text);
    ok(encode_decode(&s, &w, &m, &t, &e) == 0,
       "round trip: a submit of it decodes (%s)", e.text);
    ok(!strcmp(t.argv[0], "prog") && !t.argv[1] && !strcmp(t.name, s.name)
           && !strcmp(t.cwd, s.cwd) && pl_strv_len(t.env) == 2
           && !strcmp(t.env[1], "B=x=y") && pl_strv_len(t.tags) == 2
           && !strcmp(t.tags[1], "k="),
       "... argv, name, cwd, env, tags");
    ok(t.ranks == 4 && t.nodes == 2 && t.rpn == 2 && t.cpr == 3
           && t.gpr == 1 && t.exclusive && t.comm == PL_COMM_MPI
           && t.launcher == PL_LAUNCHER_MPIRUN && t.timeout == 90.5
           && t.priority == -7 && t.retries == 0
           && t.output_limit == 123456789,
       "... the shape, comm, launcher, timeout, priority, retries 0, "
       "output_limit");
    ok(t.array && t.astart == 0 && t.aend == 99 && t.astep == 3
           && pl_spec_count(&t) == 34 && t.append == 4242,
       "... the array 0-99:3 (34 elements), appended to array 4242");
    ok(t.nafter == 3 && t.after[0].id == 12 && !t.after[0].any
           && !t.after[0].elem && !strcmp(t.after[1].name, "prep")
           && t.after[1].any && t.after[2].id == 40 && t.after[2].elem
           && t.after[2].index == 7,
       "... after: an id, a name (any), an element");
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    pl_spec_clear(&t);
    pl_spec_clear(&s);

    /* the defaults travel as defaults */
    spec_make(&s);
    ok(encode_decode(&s, &w, &m, &t, &e) == 0 && t.ranks == 1
           && t.cpr == 1 && t.gpr == 0 && !t.env && !t.tags && !t.name
           && t.comm == PL_COMM_NONE && t.launcher == PL_LAUNCHER_UNSET
           && t.retries == PL_SPEC_DEFAULT_RETRIES && !t.array && !t.nafter,
       "round trip: a bare spec comes back bare (retries %llu)",
       (unsigned long long)t.retries);
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    pl_spec_clear(&t);
    pl_spec_clear(&s);

    /* pl_spec_check() settles ranks and retries; the encoder still
     * leaves them out when they are what the decoder would make */
    spec_make(&s);
    ok(pl_spec_check(&s, &e) == 0 && s.has_ranks && s.has_retries,
       "a checked bare spec: ranks and retries settled");
    ok(encode_decode(&s, &w, &m, &t, &e) == 0 && t.ranks == 1
           && t.retries == PL_SPEC_DEFAULT_RETRIES,
       "... sent, it decodes to 1 rank and the default retries");
    ok(encoded_keys(&m) == 1, "... its map holds argv alone (%u keys)",
       encoded_keys(&m));
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    pl_spec_clear(&t);
    pl_spec_clear(&s);
    spec_make(&s);
    s.has_ranks = true;
    s.rpn = 1;
    ok(encode_decode(&s, &w, &m, &t, &e) == 0 && t.has_ranks
           && t.ranks == 1 && t.rpn == 1,
       "ranks 1 given with --ranks-per-node: sent, as given");
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    pl_spec_clear(&t);
    pl_spec_clear(&s);
}

/* ---- commands as long as execve() takes (issue 12) ---- */

/* A spec whose argv is "true" and 'n' arguments of 'len' bytes. */
static void big_spec(struct pl_spec *s, size_t n, size_t len)
{
    pl_spec_init(s);
    s->argv = calloc(n + 2, sizeof(*s->argv));
    s->argv[0] = strdup("true");
    for (size_t i = 1; i <= n; i++) {
        s->argv[i] = malloc(len + 1);
        memset(s->argv[i], 'x', len);
        s->argv[i][len] = '\0';
    }
}

static void test_exec_limits(void)
{
    struct pl_spec s, t;
    struct pl_error e = { "" };
    struct pl_wbuf w;
    struct pl_msg m;
    char a[] = "ab", b[] = "K=v";
    char *argv[] = { a, NULL }, *env[] = { b, NULL };

    is(pl_spec_exec_bytes(argv, env), 3 + 4 + 2 * sizeof(char *),
       "exec bytes: each string with its NUL and a pointer");
    is(pl_spec_exec_bytes(NULL, NULL), 0, "exec bytes of nothing: 0");

    big_spec(&s, 1, PL_SPEC_MAX_ARG);
    ok(pl_spec_check(&s, &e) == 0, "an argument of 131,071 bytes passes");
    ok(encode_decode(&s, &w, &m, &t, &e) == 0
           && strlen(t.argv[1]) == PL_SPEC_MAX_ARG,
       "... and crosses the wire whole (%s)", e.text);
    ok(w.sb.size <= pl_spec_wire_bytes(&s) + 64,
       "wire bytes bound the encoded spec (%zu <= %zu)", w.sb.size,
       pl_spec_wire_bytes(&s));
    pl_msg_release(&m);
    pl_spec_clear(&t);
    pl_wbuf_destroy(&w);
    pl_spec_clear(&s);

    big_spec(&s, 1, PL_SPEC_MAX_ARG + 1);
    ok(pl_spec_check(&s, &e) < 0
           && !strcmp(e.text, "argument 1 of the command has 131072 bytes; "
                      "at most 131071 (Linux's MAX_ARG_STRLEN less the NUL)"),
       "131,072 bytes: refused, the limit named (%s)", e.text);
    pl_spec_clear(&s);

    /* 11 of 131,071: 1,441,880 bytes with the pointers, under 1.5 MiB;
     * 12: 1,572,960, over */
    big_spec(&s, 11, PL_SPEC_MAX_ARG);
    ok(pl_spec_check(&s, &e) == 0, "11 arguments of 131,071 bytes pass");
    pl_spec_clear(&s);
    big_spec(&s, 12, PL_SPEC_MAX_ARG);
    ok(pl_spec_check(&s, &e) < 0
           && strstr(e.text, "as execve() counts them; at most 1572864"),
       "12 of them: refused, the 1.5 MiB named (%s)", e.text);
    pl_spec_clear(&s);
}

/* A Python call (fn pycall): its fields round-trip, its rules hold. */
static void test_pycall(void)
{
    struct pl_spec s, t;
    struct pl_error e = { "" };
    struct pl_wbuf w;
    struct pl_msg m;

    spec_make(&s);
    s.fn = PL_FN_PYCALL;
    s.input = malloc(5);
    memcpy(s.input, "\x80\x05\x00\xff.", 5);
    s.ninput = 5;
    s.py_prelude = strdup("import torch");
    s.python = strdup("/usr/bin/python3");
    s.cpr = 2;
    ok(pl_spec_check(&s, &e) == 0, "pycall: a pickled call checks (%s)",
       e.text);
    ok(encode_decode(&s, &w, &m, &t, &e) == 0
           && t.fn == PL_FN_PYCALL && t.ninput == 5
           && !memcmp(t.input, s.input, 5)
           && !strcmp(t.py_prelude, "import torch")
           && !strcmp(t.python, "/usr/bin/python3") && t.cpr == 2,
       "pycall: input (bytes), prelude, python round-trip (%s)", e.text);
    ok(pl_spec_store_bytes(&s) == pl_spec_exec_bytes(s.argv, NULL) + 5 + 12
                                      + 16,
       "pycall: its input, prelude and python count as stored bytes");
    pl_spec_clear(&t);
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    s.ranks = 2;
    ok(pl_spec_check(&s, &e) < 0 && strstr(e.text, "one rank"),
       "pycall: 2 ranks refused (%s)", e.text);
    s.ranks = 1;
    s.input_file = strdup("/p/inputs/x.pkl");
    ok(pl_spec_check(&s, &e) < 0 && strstr(e.text, "not both"),
       "pycall: input and input_file refused (%s)", e.text);
    free(s.input);
    s.input = NULL;
    s.ninput = 0;
    free(s.input_file);
    s.input_file = strdup("/p/inputs/../x.pkl");
    ok(pl_spec_check(&s, &e) < 0 && strstr(e.text, "'..'"),
       "pycall: an input_file with '..' refused (%s)", e.text);
    free(s.input_file);
    s.input_file = NULL;
    ok(pl_spec_check(&s, &e) < 0 && strstr(e.text, "MODULE:FUNCTION"),
       "pycall: no input and argv[0] not MODULE:FUNCTION refused (%s)",
       e.text);
    free(s.argv[0]);
    s.argv[0] = strdup("pkg.mod:fn");
    ok(pl_spec_check(&s, &e) == 0, "pycall: --py-call pkg.mod:fn checks");
    s.pool = strdup("etl");
    ok(pl_spec_check(&s, &e) < 0 && strstr(e.text, "not in a pool"),
       "pycall: in a pool refused (%s)", e.text);
    free(s.pool);
    s.pool = NULL;
    s.fn = PL_FN_NONE;
    ok(pl_spec_check(&s, &e) < 0 && strstr(e.text, "fn pycall"),
       "a command task with a prelude refused (%s)", e.text);
    pl_spec_clear(&s);
}

/* A call's refs: each waited for in 'after' (:ok), at most
 * PL_SPEC_MAX_REFS, a pickled call's only; they round-trip. */
static void test_refs(void)
{
    struct pl_spec s, t;
    struct pl_error e = { "" };
    struct pl_wbuf w;
    struct pl_msg m;

    spec_make(&s);
    s.fn = PL_FN_PYCALL;
    s.input = malloc(3);
    memcpy(s.input, "\x80\x05.", 3);
    s.ninput = 3;
    s.refs = calloc(PL_SPEC_MAX_REFS + 1, sizeof(*s.refs));
    s.after = calloc(PL_SPEC_MAX_REFS + 1, sizeof(*s.after));
    s.refs[0] = 7;
    s.refs[1] = 8;
    s.nrefs = 2;
    s.after[0] = (struct pl_dep){ .id = 8 };
    s.nafter = 1;
    ok(pl_spec_check(&s, &e) < 0
           && strstr(e.text, "refs: 7 is not in after (a call waits for "
                             "the values it receives: after 7:ok)"),
       "refs: a ref not in after refused (%s)", e.text);
    s.after[1] = (struct pl_dep){ .id = 7, .any = true };
    s.nafter = 2;
    ok(pl_spec_check(&s, &e) < 0 && strstr(e.text, "with :any"),
       "refs: a ref in after with :any refused (%s)", e.text);
    s.after[1].any = false;
    ok(pl_spec_check(&s, &e) == 0, "refs: each in after (:ok) checks (%s)",
       e.text);
    ok(encode_decode(&s, &w, &m, &t, &e) == 0 && t.nrefs == 2
           && t.refs[0] == 7 && t.refs[1] == 8,
       "refs: round-trip (%s)", e.text);
    pl_spec_clear(&t);
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    s.array = true;
    s.astart = 0;
    s.aend = 3;
    s.astep = 1;
    ok(pl_spec_check(&s, &e) < 0 && strstr(e.text, "not an array"),
       "refs: an array refused (%s)", e.text);
    s.array = false;
    for (uint32_t i = 0; i <= PL_SPEC_MAX_REFS; i++) {
        s.refs[i] = i + 1;
        s.after[i] = (struct pl_dep){ .id = i + 1 };
    }
    s.nrefs = s.nafter = PL_SPEC_MAX_REFS + 1;
    ok(pl_spec_check(&s, &e) < 0 && strstr(e.text, "at most 64"),
       "refs: 65 refused (%s)", e.text);
    s.nrefs = s.nafter = 1;
    free(s.input);
    s.input = NULL;
    s.ninput = 0;
    free(s.argv[0]);
    s.argv[0] = strdup("mod:fn");
    ok(pl_spec_check(&s, &e) < 0 && strstr(e.text, "through its pickle"),
       "refs: a --py-call call's refused (%s)", e.text);
    s.fn = PL_FN_NONE;
    ok(pl_spec_check(&s, &e) < 0 && strstr(e.text, "Python call's"),
       "refs: a command's refused (%s)", e.text);
    pl_spec_clear(&s);
}

int main(void)
{
    plan(89);
    test_spec();
    test_check();
    test_round_trip();
    test_exec_limits();
    test_pycall();
    test_refs();
    return done_testing();
}
