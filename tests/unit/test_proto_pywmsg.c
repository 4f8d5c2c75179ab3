/* tests/unit/test_proto_pywmsg.c - a warm Python worker's frames: what a
 * worker says is decoded with every length and type checked (a function
 * may write garbage to its socket), and a CALL carries what the worker
 * reads */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "proto/agentmsg.h"
#include "proto/msg.h"
#include "proto/pywmsg.h"
#include "tests/unit/tap.h"

#define INL 64
#define MAX 1000

/* A frame (after its 4 length bytes) of header 'h' and 'n' bytes of
 * 'data', into 'buf'; its length. */
static size_t frame(unsigned char *buf, const char *h, const void *data,
                    size_t n)
{
    size_t hl = strlen(h);

    buf[0] = (unsigned char)(hl >> 24);
    buf[1] = (unsigned char)(hl >> 16);
    buf[2] = (unsigned char)(hl >> 8);
    buf[3] = (unsigned char)hl;
    memcpy(buf + 4, h, hl);
    if (n)
        memcpy(buf + 4 + hl, data, n);
    return 4 + hl + n;
}

/* Decode a result from header 'h' and 'data': the decoder's return. */
static int result(const char *h, const void *data, size_t n,
                  struct pl_pyresult *r, struct pl_error *e)
{
    unsigned char buf[4096];
    struct pl_pyw_msg m;
    size_t len = frame(buf, h, data, n);
    int rc;

    memset(r, 0, sizeof(*r));
    if (pl_pyw_decode(buf, len, &m, e) < 0)
        return -2;
    rc = pl_pyresult_decode(&m, INL, MAX, r, e);
    /* the bytes are borrowed from the frame: check them while here */
    if (rc == 0 && r->data && memcmp(r->data, data, n))
        rc = -3;
    if (rc == 0)
        r->data = NULL;
    pl_pyw_msg_clear(&m);
    return rc;
}

static void test_frames(void)
{
    unsigned char buf[256];
    struct pl_pyw_msg m;
    struct pl_error e = { "" };
    struct pl_pyhello h;

    is(pl_pyw_decode(buf, frame(buf, "{\"kind\":406,\"pid\":12,"
                                     "\"version\":\"3.11.2\"}", NULL, 0),
                     &m, &e), 0, "hello: decoded (%s)", e.text);
    is(pl_pyhello_decode(&m, &h, &e), 0, "hello: its fields");
    ok(h.pid == 12 && !strcmp(h.version, "3.11.2"), "hello: pid, version");
    pl_pyw_msg_clear(&m);

    static const struct {
        const char *h;
        const char *what;
    } bad[] = {
        { "{\"kind\":406", "JSON cut short" },
        { "[406]", "not an object" },
        { "{\"kind\":\"406\"}", "a kind that is a string" },
        { "{\"kind\":405}", "a kind of the pools' (405)" },
        { "{\"kind\":408,\"kind\":406}", "a key twice" },
        { "{\"kind\":406,\"v\":\"a\\u0000b\"}", "a NUL in a string" },
        { "{\"kind\":406,\"v\":\"\xff\"}", "bytes that are not UTF-8" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        errno = 0;
        ok(pl_pyw_decode(buf, frame(buf, bad[i].h, NULL, 0), &m, &e) < 0
               && errno == EPROTO, "frame refused: %s (%s)", bad[i].what,
           e.text);
    }
    /* lengths: no header length, a header past the frame's end */
    ok(pl_pyw_decode(buf, 3, &m, &e) < 0, "frame refused: 3 bytes");
    size_t n = frame(buf, "{\"kind\":406,\"pid\":1}", NULL, 0);
    buf[3] += 1;
    ok(pl_pyw_decode(buf, n, &m, &e) < 0, "frame refused: its header runs "
       "past its end (%s)", e.text);
    buf[0] = 0x7f;
    ok(pl_pyw_decode(buf, n, &m, &e) < 0, "frame refused: a header length "
       "of 2 GiB");
    /* a hello with pid 0, or none */
    pl_pyw_decode(buf, frame(buf, "{\"kind\":406,\"pid\":0}", NULL, 0), &m,
                  &e);
    ok(pl_pyhello_decode(&m, &h, &e) < 0, "hello refused: pid 0");
    pl_pyw_msg_clear(&m);
    pl_pyw_decode(buf, frame(buf, "{\"kind\":408,\"pid\":3}", NULL, 0), &m,
                  &e);
    ok(pl_pyhello_decode(&m, &h, &e) < 0, "hello refused: a result first");
    pl_pyw_msg_clear(&m);
    ok(pl_pyw_frame_len((const unsigned char *)"\0\1\0\2") == 65538,
       "frame length: big-endian");
    uint64_t id = 0, att = 0;
    pl_pyw_decode(buf, frame(buf, "{\"kind\":409,\"id\":4,\"attempt\":2}",
                             NULL, 0), &m, &e);
    ok(pl_pyentered_decode(&m, &id, &att, &e) == 0 && id == 4 && att == 2,
       "entered: its call");
    pl_pyw_msg_clear(&m);
    pl_pyw_decode(buf, frame(buf, "{\"kind\":409,\"id\":4}", NULL, 0), &m,
                  &e);
    ok(pl_pyentered_decode(&m, &id, &att, &e) < 0, "entered refused: no "
       "attempt");
    pl_pyw_msg_clear(&m);
}

static void test_results(void)
{
    struct pl_pyresult r;
    struct pl_error e = { "" };
    const char data[] = "0123456789";

    is(result("{\"kind\":408,\"id\":5,\"attempt\":1,\"status\":\"ok\","
              "\"size\":10,\"repr\":\"'x'\"}", data, 10, &r, &e), 0,
       "result: ok inline (%s)", e.text);
    ok(r.id == 5 && r.attempt == 1 && r.status == PL_PYW_OK && r.size == 10
           && !r.file && !strcmp(r.repr, "'x'"), "result: its fields");
    pl_pyresult_clear(&r);
    is(result("{\"kind\":408,\"id\":5,\"attempt\":1,\"status\":\"raised\","
              "\"size\":500,\"file\":\"/p/tasks/0/5.result\","
              "\"reason\":\"ValueError: x\",\"interrupted\":true}", NULL, 0,
              &r, &e), 0, "result: raised, in a file (%s)", e.text);
    ok(r.status == PL_PYW_RAISED && r.size == 500 && r.interrupted
           && !strcmp(r.file, "/p/tasks/0/5.result")
           && !strcmp(r.reason, "ValueError: x"), "result: its fields");
    pl_pyresult_clear(&r);
    is(result("{\"kind\":408,\"id\":5,\"attempt\":1,\"status\":\"error\","
              "\"reason\":\"the prelude failed\"}", NULL, 0, &r, &e), 0,
       "result: an error (%s)", e.text);
    ok(r.status == PL_PYW_ERROR && !strcmp(r.reason, "the prelude failed"),
       "result: its reason");
    pl_pyresult_clear(&r);

    static const struct {
        const char *h;
        size_t n;
        const char *what;
    } bad[] = {
        { "{\"kind\":408,\"id\":5,\"attempt\":1,\"status\":\"ok\","
          "\"size\":9}", 10, "a size other than the bytes'" },
        { "{\"kind\":408,\"id\":5,\"attempt\":1,\"status\":\"ok\"}", 10,
          "no size" },
        { "{\"kind\":408,\"id\":5,\"attempt\":1,\"status\":\"ok\","
          "\"size\":100}", 0, "no bytes and no file" },
        { "{\"kind\":408,\"id\":5,\"attempt\":1,\"status\":\"ok\","
          "\"size\":1001,\"file\":\"/f\"}", 0, "a file over the limit" },
        { "{\"kind\":408,\"id\":5,\"attempt\":1,\"status\":\"ok\","
          "\"size\":10,\"file\":\"/f\"}", 10, "bytes and a file" },
        { "{\"kind\":408,\"id\":5,\"attempt\":1,\"status\":\"ok\","
          "\"size\":100,\"file\":\"rel\"}", 0, "a relative file" },
        { "{\"kind\":408,\"id\":5,\"attempt\":1,\"status\":\"maybe\","
          "\"size\":10}", 10, "an unknown status" },
        { "{\"kind\":408,\"id\":5,\"attempt\":1,\"status\":\"error\"}", 0,
          "an error without a reason" },
        { "{\"kind\":408,\"id\":5,\"attempt\":1,\"status\":\"error\","
          "\"reason\":\"x\"}", 10, "an error with bytes" },
        { "{\"kind\":408,\"id\":-5,\"attempt\":1,\"status\":\"ok\","
          "\"size\":10}", 10, "a negative id" },
        { "{\"kind\":408,\"attempt\":1,\"status\":\"ok\",\"size\":10}", 10,
          "no id" },
        { "{\"kind\":408,\"id\":5,\"attempt\":1,\"status\":\"ok\","
          "\"size\":10,\"repr\":7}", 10, "a repr that is a number" },
        { "{\"kind\":408,\"id\":5,\"attempt\":1,\"status\":\"raised\","
          "\"size\":10,\"interrupted\":1}", 10, "interrupted not a bool" },
        { "{\"kind\":406,\"pid\":1}", 0, "a hello" },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        errno = 0;
        ok(result(bad[i].h, "0123456789", bad[i].n, &r, &e) == -1
               && errno == EPROTO && !r.file && !r.reason && !r.repr,
           "result refused: %s (%s)", bad[i].what, e.text);
    }
    /* inline: at most the inline limit */
    char big[INL + 1];
    char h[256];
    memset(big, 'x', sizeof(big));
    snprintf(h, sizeof(h), "{\"kind\":408,\"id\":5,\"attempt\":1,"
             "\"status\":\"ok\",\"size\":%d}", INL + 1);
    ok(result(h, big, INL + 1, &r, &e) == -1, "result refused: %d bytes "
       "inline, over the inline limit", INL + 1);
    /* a reason of 5,000 bytes */
    char *lh = malloc(6000);
    snprintf(lh, 6000, "{\"kind\":408,\"id\":5,\"attempt\":1,\"status\":"
             "\"error\",\"reason\":\"%05000d\"}", 0);
    unsigned char *fb = malloc(7000);
    struct pl_pyw_msg m;
    size_t n = frame(fb, lh, NULL, 0);
    ok(pl_pyw_decode(fb, n, &m, &e) == 0
           && pl_pyresult_decode(&m, INL, MAX, &r, &e) < 0,
       "result refused: a reason of 5,000 bytes");
    pl_pyw_msg_clear(&m);
    free(lh);
    free(fb);
}

static void test_call(void)
{
    char a0[] = "mod:fn", a1[] = "x", e0[] = "A=1", e1[] = "B=\xff",
         e2[] = "C=\xc3\xa9";
    char *argv[] = { a0, a1, NULL };
    char *env[] = { e0, e1, e2, NULL };
    const unsigned char in[] = { 0x80, 0x05, 0x00, 0xff };
    struct pl_pycall c = {
        .id = 9, .attempt = 2, .argv = argv, .pickled = true, .input = in,
        .ninput = sizeof(in), .env = env, .cwd = "/w", .out = "/o",
        .err = "/e", .result_file = "/r", .prelude = "import os",
        .inline_max = 65536, .result_max = 1 << 28,
    };
    struct pl_error e = { "" };
    unsigned char *buf;
    unsigned dropped = 9;
    size_t len;

    is(pl_pycall_encode(&c, &buf, &len, &dropped, &e), 0, "call: encoded");
    ok(pl_pyw_frame_len(buf) == len - 4, "call: its length, the rest");
    struct pl_pyw_msg m;
    is(pl_pyw_decode(buf + 4, len - 4, &m, &e), 0, "call: it decodes (%s)",
       e.text);
    ok(m.kind == PL_MSG_PY_CALL && m.ndata == sizeof(in)
           && !memcmp(m.data, in, sizeof(in)), "call: the input, raw");
    json_t *env_j = json_object_get(m.h, "env");
    ok(json_integer_value(json_object_get(m.h, "id")) == 9
           && json_is_true(json_object_get(m.h, "pickled"))
           && !strcmp(json_string_value(json_object_get(m.h, "prelude")),
                      "import os")
           && json_integer_value(json_object_get(m.h, "inline_max")) == 65536
           && !strcmp(json_string_value(json_object_get(m.h, "result_file")),
                      "/r")
           && json_array_size(json_object_get(m.h, "argv")) == 2,
       "call: its header");
    ok(json_array_size(env_j) == 2 && dropped == 1
           && !strcmp(json_string_value(json_array_get(env_j, 1)),
                      "C=\xc3\xa9"),
       "call: an environment entry that is not UTF-8 is left out, counted");
    pl_pyw_msg_clear(&m);
    free(buf);
}

/* A call with refs: the header lists them, "input_size" splits the
 * payload, the inline results follow the input in their order. */
static void test_call_refs(void)
{
    unsigned char in[] = { 1, 2, 3 }, v1[] = { 'a', 'b' }, v3[] = { 'z' };
    char *argv[] = { (char *)"f", NULL };
    struct pl_run_ref refs[] = {
        { .id = 4, .status = PL_PYR_OK, .data = v1, .ndata = 2 },
        { .id = 5, .status = PL_PYR_OK, .file = (char *)"/d/5.result" },
        { .id = 6, .status = PL_PYR_NONE },
        { .id = 7, .status = PL_PYR_RAISED, .data = v3, .ndata = 1 },
    };
    struct pl_pycall c = {
        .id = 9, .attempt = 1, .argv = argv, .pickled = true, .input = in,
        .ninput = sizeof(in), .out = "/o", .err = "/o", .result_file = "/r",
        .inline_max = 65536, .result_max = 1 << 20, .refs = refs, .nrefs = 4,
    };
    struct pl_error e = { "" };
    struct pl_pyw_msg m;
    unsigned char *buf;
    size_t len;

    is(pl_pycall_encode(&c, &buf, &len, NULL, &e), 0, "refs: encoded");
    is(pl_pyw_decode(buf + 4, len - 4, &m, &e), 0, "refs: it decodes (%s)",
       e.text);
    json_t *r = json_object_get(m.h, "refs");
    ok(json_integer_value(json_object_get(m.h, "input_size")) == 3
           && m.ndata == 6 && !memcmp(m.data, in, 3)
           && !memcmp(m.data + 3, "ab", 2) && m.data[5] == 'z',
       "refs: the input, then the inline results in order");
    ok(json_array_size(r) == 4
           && json_integer_value(json_object_get(json_array_get(r, 0),
                                                 "size")) == 2
           && !strcmp(json_string_value(json_object_get(
                          json_array_get(r, 1), "file")), "/d/5.result")
           && !strcmp(json_string_value(json_object_get(
                          json_array_get(r, 2), "status")), "none")
           && !json_object_get(json_array_get(r, 2), "size")
           && !strcmp(json_string_value(json_object_get(
                          json_array_get(r, 3), "status")), "raised")
           && json_integer_value(json_object_get(json_array_get(r, 3),
                                                 "id")) == 7,
       "refs: each ref's id, status and where its bytes are");
    pl_pyw_msg_clear(&m);
    free(buf);
    c.refs = NULL;
    c.nrefs = 0;
    is(pl_pycall_encode(&c, &buf, &len, NULL, &e), 0, "no refs: encoded");
    is(pl_pyw_decode(buf + 4, len - 4, &m, &e), 0, "no refs: decodes");
    ok(!json_object_get(m.h, "refs") && !json_object_get(m.h, "input_size")
           && m.ndata == 3, "no refs: no refs, no input_size: as before");
    pl_pyw_msg_clear(&m);
    free(buf);
}

int main(void)
{
    plan(53);
    test_frames();
    test_results();
    test_call();
    test_call_refs();
    return done_testing();
}
