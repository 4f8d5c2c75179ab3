/* tests/unit/test_proto_msg.c - wire messages: build, decode, checked field access */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <msgpack.h>

#include "tests/mpw.h"
#include "proto/msg.h"
#include "tests/unit/tap.h"

/* A packer for hand-made (often broken) messages. */
struct raw {
    msgpack_sbuffer sb;
    msgpack_packer pk;
};

static void raw_init(struct raw *r)
{
    msgpack_sbuffer_init(&r->sb);
    msgpack_packer_init(&r->pk, &r->sb, msgpack_sbuffer_write);
}

static void raw_destroy(struct raw *r)
{
    msgpack_sbuffer_destroy(&r->sb);
}

static void raw_str(struct raw *r, const char *s, size_t len)
{
    msgpack_pack_str(&r->pk, len);
    msgpack_pack_str_body(&r->pk, s, len);
}

/* The envelope [version, type, seq, <body follows>]. */
static void raw_head(struct raw *r, uint64_t version, uint64_t type,
                     uint64_t seq)
{
    msgpack_pack_array(&r->pk, 4);
    msgpack_pack_uint64(&r->pk, version);
    msgpack_pack_uint64(&r->pk, type);
    msgpack_pack_uint64(&r->pk, seq);
}

/* 1 if pl_msg_decode() refuses buf as documented: -1, EPROTO, error text,
 * nothing left to release. */
static int refused(const void *buf, size_t len)
{
    struct pl_msg m;
    struct pl_error e = { "" };

    errno = 0;
    if (pl_msg_decode(buf, len, &m, &e) == 0) {
        pl_msg_release(&m);
        return 0;
    }
    if (errno != EPROTO || m.body != NULL || e.text[0] == '\0') {
        diag("errno %d, body %p, text '%s'", errno, (const void *)m.body,
             e.text);
        return 0;
    }
    pl_msg_release(&m); /* harmless after a failure */
    return 1;
}

static int refused_raw(struct raw *r)
{
    int rc = refused(r->sb.data, r->sb.size);

    raw_destroy(r);
    return rc;
}

static void test_roundtrip(void)
{
    struct pl_wbuf w;
    struct pl_msg m;
    struct pl_error e = { "" };
    char a0[] = "a", a1[] = "bc", a2[] = "";
    char *argv[] = { a0, a1, a2, NULL };
    uint64_t cores[] = { 0, 3, 7 };

    raw_wbuf_init(&w, PL_MSG_SUBMIT, 42, 15);
    raw_kstr(&w.pk, "name", "job");
    raw_kuint(&w.pk, "big", UINT64_MAX);
    raw_kint(&w.pk, "neg", -5);
    raw_kint(&w.pk, "pos", 7);
    raw_kint(&w.pk, "min", INT64_MIN);
    raw_kdouble(&w.pk, "d", 1.5);
    raw_kbool(&w.pk, "t", true);
    raw_kbool(&w.pk, "f", false);
    raw_kstrv(&w.pk, "argv", argv);
    raw_kstrv(&w.pk, "none", NULL);
    raw_kuintv(&w.pk, "cores", cores, 3);
    raw_kstr(&w.pk, "nil", NULL);
    raw_key(&w.pk, "map");
    msgpack_pack_map(&w.pk, 1);
    raw_kuint(&w.pk, "x", 1);
    raw_key(&w.pk, "arr");
    msgpack_pack_array(&w.pk, 2);
    msgpack_pack_uint64(&w.pk, 1);
    pl_w_str(&w.pk, "y");
    raw_kuintv(&w.pk, "empty", NULL, 0);

    is(pl_msg_decode(w.sb.data, w.sb.size, &m, &e), 0,
       "decode a built message");
    is(m.type, PL_MSG_SUBMIT, "type");
    is(m.seq, 42, "seq");
    is_str(pl_msg_type_name(m.type), "submit", "type name");
    is_str(pl_msg_type_name(999), "unknown", "type name of an unknown type");
    ok(m.body && m.body->type == MSGPACK_OBJECT_MAP
           && m.body->via.map.size == 15,
       "body is a map of 15 fields");

    /* strings */
    char *s = NULL;
    is(pl_mp_str(m.body, "name", true, 64, &s, &e), 1, "pl_mp_str present");
    is_str(s, "job", "pl_mp_str value");
    free(s);
    s = NULL;
    is(pl_mp_str(m.body, "name", true, 3, &s, &e), 1,
       "pl_mp_str at exactly maxlen");
    free(s);
    s = (char *)"untouched";
    errno = 0;
    is(pl_mp_str(m.body, "name", true, 2, &s, &e), -1,
       "pl_mp_str over maxlen refused");
    ok(errno == EPROTO && !strcmp(s, "untouched"),
       "... EPROTO and output left alone");
    is(pl_mp_str(m.body, "big", false, 64, &s, &e), -1,
       "pl_mp_str on an integer refused");
    is(pl_mp_str(m.body, "nil", false, 64, &s, &e), 0,
       "pl_mp_str: nil counts as absent");
    e.text[0] = '\0';
    is(pl_mp_str(m.body, "nil", true, 64, &s, &e), -1,
       "pl_mp_str: nil for a required field refused");
    ok(strstr(e.text, "nil") != NULL, "... the error names the field: %s",
       e.text);
    is(pl_mp_str(m.body, "absent", false, 64, &s, &e), 0,
       "pl_mp_str absent optional");
    ok(!strcmp(s, "untouched"), "... output left alone");

    /* unsigned */
    uint64_t u = 99;
    is(pl_mp_uint(m.body, "big", true, UINT64_MAX, &u, &e), 1, "pl_mp_uint");
    ok(u == UINT64_MAX, "pl_mp_uint value UINT64_MAX");
    u = 99;
    is(pl_mp_uint(m.body, "pos", true, 7, &u, &e), 1, "pl_mp_uint at max");
    is(u, 7, "... value");
    u = 99;
    errno = 0;
    is(pl_mp_uint(m.body, "pos", true, 6, &u, &e), -1,
       "pl_mp_uint over max refused");
    ok(errno == EPROTO && u == 99, "... EPROTO, output left alone");
    is(pl_mp_uint(m.body, "neg", true, UINT64_MAX, &u, &e), -1,
       "pl_mp_uint of a negative refused");
    is(pl_mp_uint(m.body, "d", true, UINT64_MAX, &u, &e), -1,
       "pl_mp_uint of a double refused");
    is(pl_mp_uint(m.body, "name", true, UINT64_MAX, &u, &e), -1,
       "pl_mp_uint of a string refused");
    is(pl_mp_uint(m.body, "absent", false, 10, &u, &e), 0,
       "pl_mp_uint absent optional");
    errno = 0;
    is(pl_mp_uint(m.body, "absent", true, 10, &u, &e), -1,
       "pl_mp_uint absent required");
    ok(errno == EPROTO && u == 99, "... EPROTO, output left alone");

    /* signed */
    int64_t i = 1;
    is(pl_mp_int(m.body, "neg", true, &i, &e), 1, "pl_mp_int negative");
    is(i, -5, "... value");
    is(pl_mp_int(m.body, "pos", true, &i, &e), 1, "pl_mp_int positive");
    is(i, 7, "... value");
    is(pl_mp_int(m.body, "min", true, &i, &e), 1, "pl_mp_int INT64_MIN");
    ok(i == INT64_MIN, "... value");
    i = 1;
    is(pl_mp_int(m.body, "big", true, &i, &e), -1,
       "pl_mp_int of UINT64_MAX refused");
    is(i, 1, "... output left alone");
    is(pl_mp_int(m.body, "t", true, &i, &e), -1, "pl_mp_int of a bool refused");

    /* double */
    double d = 0;
    is(pl_mp_double(m.body, "d", true, &d, &e), 1, "pl_mp_double");
    ok(d == 1.5, "... value 1.5");
    is(pl_mp_double(m.body, "neg", true, &d, &e), 1,
       "pl_mp_double takes a negative integer");
    ok(d == -5.0, "... value -5");
    is(pl_mp_double(m.body, "pos", true, &d, &e), 1,
       "pl_mp_double takes a positive integer");
    ok(d == 7.0, "... value 7");
    d = 3;
    is(pl_mp_double(m.body, "name", true, &d, &e), -1,
       "pl_mp_double of a string refused");
    ok(d == 3, "... output left alone");

    /* bool */
    bool b = false;
    is(pl_mp_bool(m.body, "t", true, &b, &e), 1, "pl_mp_bool true");
    ok(b == true, "... value");
    is(pl_mp_bool(m.body, "f", true, &b, &e), 1, "pl_mp_bool false");
    ok(b == false, "... value");
    b = true;
    is(pl_mp_bool(m.body, "pos", true, &b, &e), -1,
       "pl_mp_bool of an integer refused");
    ok(b == true, "... output left alone");

    /* string vectors */
    char **v = NULL;
    is(pl_mp_strv(m.body, "argv", true, 1, 3, 64, &v, &e), 1, "pl_mp_strv");
    ok(v && pl_strv_len(v) == 3 && !strcmp(v[0], "a") && !strcmp(v[1], "bc")
           && !strcmp(v[2], "") && v[3] == NULL,
       "... values a, bc, '' and NULL-terminated");
    pl_strv_free(v);
    v = NULL;
    is(pl_mp_strv(m.body, "argv", true, 4, 10, 64, &v, &e), -1,
       "pl_mp_strv under minn refused");
    is(pl_mp_strv(m.body, "argv", true, 0, 2, 64, &v, &e), -1,
       "pl_mp_strv over maxn refused");
    is(pl_mp_strv(m.body, "argv", true, 0, 3, 1, &v, &e), -1,
       "pl_mp_strv with an element over maxlen refused");
    is(pl_mp_strv(m.body, "cores", true, 0, 3, 64, &v, &e), -1,
       "pl_mp_strv of integers refused");
    ok(v == NULL, "... output left alone");
    is(pl_mp_strv(m.body, "none", true, 0, 3, 64, &v, &e), 1,
       "pl_mp_strv of an empty array (NULL vector packed)");
    ok(v && v[0] == NULL, "... empty vector");
    pl_strv_free(v);
    v = NULL;
    is(pl_mp_strv(m.body, "none", true, 1, 3, 64, &v, &e), -1,
       "pl_mp_strv empty with minn 1 refused");

    /* unsigned vectors */
    uint64_t *uv = NULL;
    uint32_t n = 77;
    is(pl_mp_uintv(m.body, "cores", true, 3, 7, &uv, &n, &e), 1,
       "pl_mp_uintv");
    ok(uv && n == 3 && uv[0] == 0 && uv[1] == 3 && uv[2] == 7,
       "... values 0, 3, 7");
    free(uv);
    uv = NULL;
    n = 77;
    is(pl_mp_uintv(m.body, "cores", true, 3, 6, &uv, &n, &e), -1,
       "pl_mp_uintv with an element over max refused");
    is(pl_mp_uintv(m.body, "cores", true, 2, 7, &uv, &n, &e), -1,
       "pl_mp_uintv over maxn refused");
    is(pl_mp_uintv(m.body, "argv", true, 3, 7, &uv, &n, &e), -1,
       "pl_mp_uintv of strings refused");
    ok(uv == NULL && n == 77, "... outputs left alone");
    is(pl_mp_uintv(m.body, "empty", true, 3, 7, &uv, &n, &e), 1,
       "pl_mp_uintv of an empty array");
    ok(uv != NULL && n == 0, "... n 0, a vector to free");
    free(uv);

    /* maps, arrays, get */
    const msgpack_object *o = NULL;
    is(pl_mp_map(m.body, "map", true, &o, &e), 1, "pl_mp_map");
    ok(o && pl_mp_get(o, "x") && pl_mp_get(o, "x")->via.u64 == 1,
       "... nested value x=1");
    o = NULL;
    is(pl_mp_map(m.body, "arr", true, &o, &e), -1,
       "pl_mp_map of an array refused");
    is(pl_mp_array(m.body, "arr", true, 2, &o, &e), 1, "pl_mp_array");
    ok(o && o->via.array.size == 2, "... 2 elements");
    o = NULL;
    is(pl_mp_array(m.body, "arr", true, 1, &o, &e), -1,
       "pl_mp_array over maxn refused");
    is(pl_mp_array(m.body, "map", true, 10, &o, &e), -1,
       "pl_mp_array of a map refused");
    ok(o == NULL, "... output left alone");
    ok(pl_mp_get(m.body, "nope") == NULL, "pl_mp_get of a missing key");
    ok(pl_mp_get(pl_mp_get(m.body, "arr"), "x") == NULL,
       "pl_mp_get on a non-map");
    ok(pl_mp_get(NULL, "x") == NULL, "pl_mp_get on NULL");

    pl_msg_release(&m);
    pl_msg_release(&m); /* a second release is harmless */
    ok(m.body == NULL, "pl_msg_release clears the body");
    pl_wbuf_destroy(&w);
}

/* Strings with NUL bytes are refused by every string accessor. */
static void test_nul_strings(void)
{
    struct raw r;
    struct pl_msg m;
    struct pl_error e;

    raw_init(&r);
    raw_head(&r, PL_PROTO_VERSION, PL_MSG_RUN, 1);
    msgpack_pack_map(&r.pk, 2);
    raw_str(&r, "s", 1);
    raw_str(&r, "a\0b", 3);
    raw_str(&r, "v", 1);
    msgpack_pack_array(&r.pk, 2);
    raw_str(&r, "ok", 2);
    raw_str(&r, "\0", 1);
    is(pl_msg_decode(r.sb.data, r.sb.size, &m, &e), 0,
       "a message with NUL bytes in values decodes");

    char *s = NULL;
    char **v = NULL;
    errno = 0;
    is(pl_mp_str(m.body, "s", true, 64, &s, &e), -1,
       "pl_mp_str refuses a string with a NUL byte");
    ok(errno == EPROTO && s == NULL, "... EPROTO, output left alone");
    is(pl_mp_strv(m.body, "v", true, 0, 8, 64, &v, &e), -1,
       "pl_mp_strv refuses an element with a NUL byte");
    ok(v == NULL, "... output left alone");
    errno = 0;
    ok(pl_mp_strdup(pl_mp_get(m.body, "s"), 64) == NULL && errno == EPROTO,
       "pl_mp_strdup refuses a NUL byte (EPROTO)");
    errno = 0;
    ok(pl_mp_strdup(pl_mp_get(m.body, "v"), 64) == NULL && errno == EPROTO,
       "pl_mp_strdup refuses a non-string (EPROTO)");
    pl_msg_release(&m);
    raw_destroy(&r);
}

static void test_envelope(void)
{
    struct raw r;

    raw_init(&r);
    raw_head(&r, PL_PROTO_VERSION + 1, PL_MSG_LIST, 1);
    msgpack_pack_map(&r.pk, 0);
    ok(refused_raw(&r), "wrong version refused");

    raw_init(&r);
    raw_head(&r, 0, PL_MSG_LIST, 1);
    msgpack_pack_map(&r.pk, 0);
    ok(refused_raw(&r), "version 0 refused");

    raw_init(&r);
    msgpack_pack_array(&r.pk, 4);
    raw_str(&r, "1", 1);
    msgpack_pack_uint64(&r.pk, PL_MSG_LIST);
    msgpack_pack_uint64(&r.pk, 1);
    msgpack_pack_map(&r.pk, 0);
    ok(refused_raw(&r), "version as a string refused");

    raw_init(&r);
    raw_head(&r, PL_PROTO_VERSION, 999, 1);
    msgpack_pack_map(&r.pk, 0);
    ok(refused_raw(&r), "unknown type 999 refused");

    raw_init(&r);
    raw_head(&r, PL_PROTO_VERSION, 0, 1);
    msgpack_pack_map(&r.pk, 0);
    ok(refused_raw(&r), "type 0 refused");

    raw_init(&r);
    raw_head(&r, PL_PROTO_VERSION, ((uint64_t)1 << 32) + PL_MSG_LIST, 1);
    msgpack_pack_map(&r.pk, 0);
    ok(refused_raw(&r), "type 2^32+102 (truncates to a known type) refused");

    raw_init(&r);
    msgpack_pack_array(&r.pk, 4);
    msgpack_pack_uint64(&r.pk, PL_PROTO_VERSION);
    msgpack_pack_int64(&r.pk, -PL_MSG_LIST);
    msgpack_pack_uint64(&r.pk, 1);
    msgpack_pack_map(&r.pk, 0);
    ok(refused_raw(&r), "negative type refused");

    raw_init(&r);
    msgpack_pack_array(&r.pk, 4);
    msgpack_pack_uint64(&r.pk, PL_PROTO_VERSION);
    msgpack_pack_uint64(&r.pk, PL_MSG_LIST);
    msgpack_pack_double(&r.pk, 1.0);
    msgpack_pack_map(&r.pk, 0);
    ok(refused_raw(&r), "seq as a double refused");

    raw_init(&r);
    raw_head(&r, PL_PROTO_VERSION, PL_MSG_LIST, 1);
    msgpack_pack_array(&r.pk, 0);
    ok(refused_raw(&r), "array body refused");

    raw_init(&r);
    raw_head(&r, PL_PROTO_VERSION, PL_MSG_LIST, 1);
    msgpack_pack_nil(&r.pk);
    ok(refused_raw(&r), "nil body refused");

    raw_init(&r);
    raw_head(&r, PL_PROTO_VERSION, PL_MSG_LIST, 1);
    msgpack_pack_map(&r.pk, 2);
    raw_str(&r, "a", 1);
    msgpack_pack_uint64(&r.pk, 1);
    msgpack_pack_uint64(&r.pk, 7);
    msgpack_pack_uint64(&r.pk, 1);
    ok(refused_raw(&r), "integer key refused");

    raw_init(&r);
    raw_head(&r, PL_PROTO_VERSION, PL_MSG_LIST, 1);
    msgpack_pack_map(&r.pk, 1);
    msgpack_pack_bin(&r.pk, 1);
    msgpack_pack_bin_body(&r.pk, "a", 1);
    msgpack_pack_uint64(&r.pk, 1);
    ok(refused_raw(&r), "bin key refused");

    raw_init(&r);
    msgpack_pack_array(&r.pk, 3);
    msgpack_pack_uint64(&r.pk, PL_PROTO_VERSION);
    msgpack_pack_uint64(&r.pk, PL_MSG_LIST);
    msgpack_pack_uint64(&r.pk, 1);
    ok(refused_raw(&r), "3-element envelope refused");

    raw_init(&r);
    raw_head(&r, PL_PROTO_VERSION, PL_MSG_LIST, 1);
    r.sb.data[0] = (char)0x95; /* fixarray of 5 */
    msgpack_pack_map(&r.pk, 0);
    msgpack_pack_nil(&r.pk);
    ok(refused_raw(&r), "5-element envelope refused");

    raw_init(&r);
    msgpack_pack_map(&r.pk, 0);
    ok(refused_raw(&r), "a bare map refused");

    /* trailing bytes, two messages in one buffer */
    struct pl_wbuf w;
    raw_wbuf_init(&w, PL_MSG_STATUS, 3, 1);
    raw_kuint(&w.pk, "n", 1);
    size_t len = w.sb.size;
    char *two = malloc(2 * len + 1);
    memcpy(two, w.sb.data, len);
    memcpy(two + len, w.sb.data, len);
    two[2 * len] = (char)0xc0;
    ok(refused(two, len + 1), "one trailing nil byte refused");
    ok(refused(two, 2 * len), "two messages in one buffer refused");
    ok(!refused(two, len), "the message alone is accepted");

    /* empty and every truncation */
    ok(refused(two, 0), "empty buffer refused");
    int bad = 0;
    for (size_t k = 1; k < len; k++) {
        char *p = malloc(k); /* exact size: ASan sees any over-read */
        memcpy(p, w.sb.data, k);
        if (!refused(p, k)) {
            diag("prefix of %zu bytes accepted", k);
            bad++;
        }
        free(p);
    }
    ok(bad == 0, "every one of the %zu proper prefixes refused", len - 1);
    free(two);
    pl_wbuf_destroy(&w);

    /* over PL_MSG_MAX */
    char *huge = calloc(1, (size_t)PL_MSG_MAX + 1);
    raw_wbuf_init(&w, PL_MSG_STATUS, 3, 0);
    memcpy(huge, w.sb.data, w.sb.size);
    ok(refused(huge, (size_t)PL_MSG_MAX + 1),
       "a buffer over PL_MSG_MAX refused");
    pl_wbuf_destroy(&w);
    free(huge);

    /* deep nesting in a value must not blow the stack */
    raw_init(&r);
    raw_head(&r, PL_PROTO_VERSION, PL_MSG_LIST, 1);
    msgpack_pack_map(&r.pk, 1);
    raw_str(&r, "x", 1);
    for (int k = 0; k < 100000; k++)
        msgpack_pack_array(&r.pk, 1);
    msgpack_pack_nil(&r.pk);
    {
        struct pl_msg m;
        struct pl_error e;
        int rc = pl_msg_decode(r.sb.data, r.sb.size, &m, &e);
        if (rc == 0)
            pl_msg_release(&m);
        ok(rc == 0 || rc == -1, "100000 nested arrays: no crash (rc %d)", rc);
    }
    raw_destroy(&r);
}

/* Random corruption of a valid message: decode either accepts it or
 * refuses it cleanly; ASan checks that nothing is read out of bounds. */
static void test_fuzz(void)
{
    struct pl_wbuf w;
    char a0[] = "x", a1[] = "yy";
    char *argv[] = { a0, a1, NULL };
    uint64_t ids[] = { 1, 2, 3 };
    uint32_t seed = 12345;
    int accepted = 0, badref = 0;

    raw_wbuf_init(&w, PL_MSG_EVENTS, 77, 4);
    raw_kstr(&w.pk, "name", "abc");
    raw_kstrv(&w.pk, "argv", argv);
    raw_kuintv(&w.pk, "ids", ids, 3);
    raw_kdouble(&w.pk, "t", 2.5);
    for (int iter = 0; iter < 4000; iter++) {
        size_t len = w.sb.size;
        char *p = malloc(len);
        memcpy(p, w.sb.data, len);
        int nflip = 1 + (int)(seed % 3);
        for (int k = 0; k < nflip; k++) {
            seed = seed * 1103515245u + 12345u;
            size_t at = (seed >> 8) % len;
            seed = seed * 1103515245u + 12345u;
            unsigned char byte = (unsigned char)(seed >> 16);
            /* array32 and map32 headers claiming up to 2^32 elements
             * are test_huge_claims()' business: keep to array16/map16 */
            if (byte == 0xdd || byte == 0xdf)
                byte--;
            p[at] = (char)byte;
        }
        seed = seed * 1103515245u + 12345u;
        size_t cut = (seed >> 4) % 4 == 0 ? (seed >> 8) % len : len;
        struct pl_msg m;
        struct pl_error e;
        errno = 0;
        if (pl_msg_decode(p, cut, &m, &e) == 0) {
            char *s = NULL;
            char **v = NULL;
            uint64_t *u = NULL;
            uint32_t n;
            double d;
            if (pl_mp_str(m.body, "name", false, 8, &s, &e) == 1)
                free(s);
            if (pl_mp_strv(m.body, "argv", false, 0, 8, 8, &v, &e) == 1)
                pl_strv_free(v);
            if (pl_mp_uintv(m.body, "ids", false, 8, 100, &u, &n, &e) == 1)
                free(u);
            pl_mp_double(m.body, "t", false, &d, &e);
            pl_msg_release(&m);
            accepted++;
        }
        else if (errno != EPROTO || m.body != NULL)
            badref++;
        free(p);
    }
    ok(badref == 0, "4000 corrupted messages: every refusal clean "
       "(%d accepted)", accepted);
    pl_wbuf_destroy(&w);
}

/* A few bytes that claim 2^32-1 elements: msgpack-c allocates for the
 * claim before it sees that the bytes are missing (msgpack/msgpack-c#1013),
 * ~96 GiB here.  Without ASan malloc() fails and the message is refused;
 * under ASan (make asan, which also runs pilotd) the process aborts, so a
 * peer can kill an ASan pilotd with 5 bytes.  In a child, as ASan aborts. */
static void test_huge_claims(void)
{
    static const unsigned char bare[] = { 0xdd, 0xff, 0xff, 0xff, 0xff };
    static const unsigned char body[] = { 0x94, 0x01, 0x66, 0x01,
                                          0xdf, 0xff, 0xff, 0xff, 0xff };
    static const unsigned char field[] = { 0x94, 0x01, 0x66, 0x01, 0x81,
                                           0xa1, 'x',
                                           0xdd, 0xff, 0xff, 0xff, 0xff };
    pid_t pid;
    int status = 0;

    fflush(stdout);
    if ((pid = fork()) < 0) {
        ok(0, "fork: %s", strerror(errno));
        return;
    }
    if (pid == 0) {
        int good = refused(bare, sizeof(bare)) + refused(body, sizeof(body))
                   + refused(field, sizeof(field));
        _exit(good == 3 ? 0 : 1);
    }
    waitpid(pid, &status, 0);
    if (!ok(WIFEXITED(status) && WEXITSTATUS(status) == 0,
            "5-12 byte messages claiming 2^32-1 elements refused without "
            "a huge allocation"))
        diag("child %s %d (under ASan: allocator out of memory)",
             WIFEXITED(status) ? "exited" : "killed by signal",
             WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

static void test_reply(void)
{
    struct pl_wbuf w;
    struct pl_msg m;
    struct pl_error e;
    int64_t en = -1;
    char *s = NULL;
    const msgpack_object *o;

    pl_wbuf_reply(&w, 9, 0, NULL);
    msgpack_pack_map(&w.pk, 1);
    raw_kuint(&w.pk, "id", 5);
    is(pl_msg_decode(w.sb.data, w.sb.size, &m, &e), 0, "ok reply decodes");
    ok(m.type == PL_MSG_REPLY && m.seq == 9, "... type reply, seq 9");
    ok(pl_mp_int(m.body, "errno", true, &en, &e) == 1 && en == 0,
       "... errno 0");
    is(pl_mp_str(m.body, "error", false, 160, &s, &e), 0, "... no error text");
    o = NULL;
    uint64_t id = 0;
    ok(pl_mp_map(m.body, "data", true, &o, &e) == 1
           && pl_mp_uint(o, "id", true, 10, &id, &e) == 1 && id == 5,
       "... data is the caller's map {id: 5}");
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);

    pl_wbuf_reply(&w, 10, ENOENT, "no task 7");
    is(pl_msg_decode(w.sb.data, w.sb.size, &m, &e), 0, "error reply decodes");
    ok(pl_mp_int(m.body, "errno", true, &en, &e) == 1 && en == ENOENT,
       "... errno ENOENT");
    ok(pl_mp_str(m.body, "error", true, 160, &s, &e) == 1
           && !strcmp(s, "no task 7"),
       "... error text");
    free(s);
    s = NULL;
    o = pl_mp_get(m.body, "data");
    ok(o && o->type == MSGPACK_OBJECT_NIL, "... data is nil");
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);

    pl_wbuf_reply(&w, 11, EINVAL, NULL);
    is(pl_msg_decode(w.sb.data, w.sb.size, &m, &e), 0,
       "error reply without text decodes");
    ok(pl_mp_str(m.body, "error", true, 160, &s, &e) == 1
           && !strcmp(s, strerror(EINVAL)),
       "... error text is strerror(EINVAL)");
    free(s);
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);
}

/* The writers count a map's pairs themselves (a map32 header updated
 * as they go): a reader sees exactly the pairs written, nested maps
 * too, and past 65,535 pairs (where map16 would end). */
static void test_counted_maps(void)
{
    struct pl_wbuf w;
    struct pl_msg m;
    struct pl_error e;
    struct pl_wmap inner;
    const msgpack_object *o = NULL;
    uint64_t v = 0, ids[] = { 1, 2, 3 };
    int64_t en = -1;
    char *text = NULL;
    const msgpack_object *data = NULL;

    pl_wbuf_init(&w, PL_MSG_STATUS, 4);
    ok(pl_msg_decode(w.sb.data, w.sb.size, &m, &e) == 0
           && m.body->via.map.size == 0,
       "counted: an empty body decodes as an empty map");
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    pl_wbuf_init(&w, PL_MSG_STATUS, 4);
    pl_wm_str(&w.body, "s", "x");
    pl_wm_uint(&w.body, "u", 7);
    pl_wm_int(&w.body, "i", -7);
    pl_wm_double(&w.body, "d", 0.5);
    pl_wm_bool(&w.body, "b", true);
    pl_wm_uintv(&w.body, "v", ids, 3);
    (void)pl_wm_key(&w.body, "m");
    pl_wmap_begin(&w, &inner);
    pl_wm_uint(&inner, "a", 1);
    pl_wm_uint(&inner, "b", 2);
    pl_wm_str(&w.body, "after", "y");
    ok(pl_msg_decode(w.sb.data, w.sb.size, &m, &e) == 0
           && m.body->via.map.size == 8 && w.body.n == 8 && inner.n == 2,
       "counted: 8 pairs written, 8 read (%s)", e.text);
    ok(pl_mp_map(m.body, "m", true, &o, &e) == 1 && o->via.map.size == 2
           && pl_mp_uint(o, "b", true, 10, &v, &e) == 1 && v == 2,
       "counted: the nested map holds its 2 pairs");
    ok(pl_mp_get(m.body, "after") != NULL,
       "counted: a pair of the outer map after the nested one");
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);

    pl_wbuf_init(&w, PL_MSG_STATUS, 4);
    for (uint32_t i = 0; i < 70000; i++) {
        char k[16];
        snprintf(k, sizeof(k), "k%u", i);
        pl_wm_uint(&w.body, k, i);
    }
    ok(pl_msg_decode(w.sb.data, w.sb.size, &m, &e) == 0
           && m.body->via.map.size == 70000,
       "counted: 70,000 pairs (past a map16's 65,535)");
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);

    /* a reply read back with pl_reply_decode() */
    pl_wbuf_reply(&w, 3, ENOENT, "no task 9");
    ok(pl_msg_decode(w.sb.data, w.sb.size, &m, &e) == 0
           && pl_reply_decode(m.body, &en, &text, &data, &e) == 0
           && en == ENOENT && !strcmp(text, "no task 9") && data
           && data->type == MSGPACK_OBJECT_NIL,
       "reply: errno, text and nil data read back");
    free(text);
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);
}

static void test_strv(void)
{
    char a0[] = "a", a1[] = "bb", a2[] = "";
    char *v[] = { a0, a1, a2, NULL };
    char **d;

    is(pl_strv_len(NULL), 0, "pl_strv_len(NULL)");
    is(pl_strv_len(v), 3, "pl_strv_len");
    d = pl_strv_dup(v);
    ok(d && pl_strv_len(d) == 3 && d[0] != v[0] && !strcmp(d[0], "a")
           && !strcmp(d[1], "bb") && !strcmp(d[2], "") && d[3] == NULL,
       "pl_strv_dup copies every string");
    errno = ERANGE;
    pl_strv_free(d);
    is(errno, ERANGE, "pl_strv_free preserves errno");
    d = pl_strv_dup(NULL);
    ok(d && d[0] == NULL, "pl_strv_dup(NULL) is an empty vector");
    pl_strv_free(d);
    pl_strv_free(NULL);
    ok(1, "pl_strv_free(NULL)");
}

/* pl_utf8_valid: what jansson takes as a JSON string, no more */
static void test_utf8(void)
{
    static const struct {
        const char *s;
        int valid;
        const char *what;
    } cases[] = {
        { "", 1, "empty" },
        { "plain ascii", 1, "ASCII" },
        { "\xc3\xa9t\xc3\xa9", 1, "2-byte sequences" },
        { "\xe2\x82\xac", 1, "a 3-byte sequence" },
        { "\xf0\x9f\x98\x80", 1, "a 4-byte sequence" },
        { "\xf4\x8f\xbf\xbf", 1, "U+10FFFF" },
        { "\xe9t\xe9", 0, "Latin-1" },
        { "\xc3", 0, "a sequence cut at the end" },
        { "\xe2\x82", 0, "a 3-byte sequence cut at the end" },
        { "\x80", 0, "a lone continuation byte" },
        { "\xc0\xaf", 0, "an overlong '/'" },
        { "\xe0\x80\xaf", 0, "an overlong 3-byte '/'" },
        { "\xed\xa0\x80", 0, "a surrogate" },
        { "\xf4\x90\x80\x80", 0, "past U+10FFFF" },
        { "\xff", 0, "0xff" },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        is(pl_utf8_valid(cases[i].s, strlen(cases[i].s)), cases[i].valid,
           "pl_utf8_valid: %s", cases[i].what);
    /* the length is the limit, not a NUL */
    ok(!pl_utf8_valid("\xc3\xa9", 1), "pl_utf8_valid: stops at 'len'");
}

static double mono(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* [2, 105, 1, {"pad": [nil x n]}]: n + 7 objects. */
static void nils(struct raw *r, size_t n)
{
    raw_init(r);
    raw_head(r, PL_PROTO_VERSION, PL_MSG_STATUS, 1);
    msgpack_pack_map(&r->pk, 1);
    raw_str(r, "pad", 3);
    msgpack_pack_array(&r->pk, (uint32_t)n);
    for (size_t i = 0; i < n; i++)
        msgpack_pack_nil(&r->pk);
}

/* The object budget: a frame of PL_MSG_MAX nils once took pilotd 8 s
 * and 1.5 GiB to decode (found by tests/tools/zgarbage --big). */
static void test_object_budget(void)
{
    struct raw r;
    struct pl_msg m;
    struct pl_error e = { "" };

    nils(&r, 3); /* 10 objects */
    is(pl_msg_decode_max(r.sb.data, r.sb.size, 10, &m, &e), 0,
       "budget: a message of exactly the budget decodes");
    pl_msg_release(&m);
    errno = 0;
    ok(pl_msg_decode_max(r.sb.data, r.sb.size, 9, &m, &e) == -1
           && errno == EPROTO && strstr(e.text, "more than 9"),
       "budget: one object more is refused (%s)", e.text);
    raw_destroy(&r);

    /* a whole frame of nils: refused at the array's header */
    nils(&r, PL_MSG_MAX - 20);
    ok(r.sb.size <= PL_MSG_MAX, "a frame of %zu bytes of nils", r.sb.size);
    double t0 = mono();
    ok(refused(r.sb.data, r.sb.size), "pl_msg_decode refuses it");
    uint64_t v, seq;
    ok(pl_msg_peek(r.sb.data, r.sb.size, &v, &seq) == 0
           && v == PL_PROTO_VERSION && seq == 1,
       "pl_msg_peek reads only its head");
    double dt = mono() - t0;
    ok(dt < 0.5, "both within 0.5 s (%.3f s)", dt);
    raw_destroy(&r);

    /* the CLI reads pilotd's replies with no budget beyond the size */
    nils(&r, PL_MSG_MAX_OBJECTS);
    ok(refused(r.sb.data, r.sb.size), "PL_MSG_MAX_OBJECTS + 7 refused");
    is(pl_msg_decode_max(r.sb.data, r.sb.size, PL_MSG_MAX, &m, &e), 0,
       "... but decoded with the budget PL_MSG_MAX");
    pl_msg_release(&m);
    raw_destroy(&r);
}

/* pl_msg_peek: the head of an envelope only, so that pilotd can answer a
 * peer of another version; once it decoded the whole frame again. */
static void test_peek(void)
{
    static const struct {
        const unsigned char b[16];
        size_t len;
        int rc;
        uint64_t v, seq;
        const char *what;
    } cases[] = {
        { { 0x94, 0x01, 0x66, 0x07, 0xc1 }, 5, 0, 1, 7,
          "version 1, a body that is not msgpack" },
        { { 0x93, 0x09, 0xcc, 0xc8, 0xcd, 0x01, 0x00 }, 7, 0, 9, 256,
          "3 elements, uint8 type, uint16 seq" },
        { { 0xdc, 0x00, 0x05, 0xd0, 0x03, 0x01, 0xd1, 0x00, 0x02 }, 9, 0, 3,
          2, "array16, int8 and int16 of values >= 0" },
        { { 0xdd, 0x00, 0x00, 0x00, 0x04, 0x02, 0x01, 0xcf, 0, 0, 0, 0, 0, 0,
            0, 5 }, 16, 0, 2, 5, "array32, uint64 seq" },
        { { 0x92, 0x02, 0x01 }, 3, -1, 0, 0, "2 elements" },
        { { 0x94, 0xd0, 0xff, 0x01, 0x01 }, 5, -1, 0, 0, "a negative version" },
        { { 0x94, 0x02, 0x01, 0xa1, 'x' }, 5, -1, 0, 0, "a string seq" },
        { { 0x94, 0x02, 0x01, 0xcd, 0x01 }, 5, -1, 0, 0, "a seq cut short" },
        { { 0xdc, 0x00 }, 2, -1, 0, 0, "an array16 header cut short" },
        { { 0x81, 0x01, 0x02 }, 3, -1, 0, 0, "a map" },
        { { 0 }, 0, -1, 0, 0, "nothing" },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint64_t v = 0, seq = 0;
        int rc = pl_msg_peek(cases[i].b, cases[i].len, &v, &seq);
        if (cases[i].rc == 0)
            ok(rc == 0 && v == cases[i].v && seq == cases[i].seq,
               "pl_msg_peek: %s", cases[i].what);
        else
            ok(rc == -1 && errno == EPROTO, "pl_msg_peek refuses %s",
               cases[i].what);
    }
}

int main(void)
{
    plan(171);
    test_utf8();
    test_peek();
    test_object_budget();
    test_roundtrip();
    test_nul_strings();
    test_envelope();
    test_fuzz();
    test_huge_claims();
    test_reply();
    test_counted_maps();
    test_strv();
    return done_testing();
}
