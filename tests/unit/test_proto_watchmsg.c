/* tests/unit/test_proto_watchmsg.c - watches on the wire: WATCH, UNWATCH,
 * the ENDS push, a submit's 'watch' and WATCH's reply round-trip, and
 * what a broken or hostile peer sends is refused with a reason */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/state.h"
#include "proto/watchmsg.h"
#include "tests/mpw.h"
#include "tests/unit/tap.h"

#define TOKEN "tok_0123456789-abc"

/* Decode the message in 'w' (destroyed) into 'm', which takes its
 * buffer (strings point into it): its body, or NULL. */
static const msgpack_object *reread(struct pl_wbuf *w, struct pl_msg *m)
{
    struct pl_error e;
    const msgpack_object *b = NULL;
    size_t len = w->sb.size;
    char *buf = msgpack_sbuffer_release(&w->sb);

    if (pl_msg_decode(buf, len, m, &e) == 0) {
        b = m->body;
        m->own = buf;
    }
    else {
        diag("decode: %s", e.text);
        free(buf);
    }
    pl_wbuf_destroy(w);
    return b;
}

static void test_token(void)
{
    char long65[66];

    memset(long65, 'a', 65);
    long65[65] = '\0';
    ok(pl_watch_token_ok(TOKEN) && pl_watch_token_ok("ABCDEFGHIJKLMNOP"),
       "token: 16+ of A-Z a-z 0-9 _ - is one");
    ok(!pl_watch_token_ok("short") && !pl_watch_token_ok(long65)
           && !pl_watch_token_ok("tok 0123456789abcdef")
           && !pl_watch_token_ok("tok/0123456789abcdef")
           && !pl_watch_token_ok(NULL),
       "token: too short, too long, a space, a slash, NULL are not");
    long65[64] = '\0';
    ok(pl_watch_token_ok(long65), "token: 64 characters is one");
}

static void test_watch_req(void)
{
    uint64_t ids[] = { 4, 9, 7 }, el[] = { 40, 3 };
    struct pl_watch_req q = { .token = TOKEN, .attach = true,
                              .has_after = true, .after = 17,
                              .sel = { ids, 3, el, 1 } };
    struct pl_watch_req d;
    struct pl_wbuf w;
    struct pl_msg m;
    struct pl_error e = { "" };
    const msgpack_object *b;

    pl_watch_req_encode(&w, 5, &q);
    ok((b = reread(&w, &m)) && m.type == PL_MSG_WATCH
           && pl_watch_req_decode(b, &d, &e) == 0,
       "watch: a request round-trips (%s)", e.text);
    ok(!strcmp(d.token, TOKEN) && d.attach && !d.all && d.has_after
           && d.after == 17 && d.sel.nids == 3 && d.sel.ids[2] == 7
           && d.sel.nelems == 1 && d.sel.elems[0] == 40
           && d.sel.elems[1] == 3,
       "watch: every field comes back");
    pl_watch_req_clear(&d);
    pl_msg_release(&m);

    struct pl_watch_req all = { .token = TOKEN, .all = true };
    pl_watch_req_encode(&w, 6, &all);
    ok((b = reread(&w, &m)) && pl_watch_req_decode(b, &d, &e) == 0 && d.all
           && !d.attach && !d.has_after && !pl_sel_req_given(&d.sel)
           && !d.make,
       "watch: 'all' alone, no 'after': absent, not 0");
    pl_msg_release(&m);

    struct pl_watch_req mk = { .token = TOKEN, .make = true };
    pl_watch_req_encode(&w, 6, &mk);
    ok((b = reread(&w, &m)) && pl_watch_req_decode(b, &d, &e) == 0 && d.make
           && !d.all && !pl_sel_req_given(&d.sel),
       "watch: 'make' alone (an empty watch) round-trips");
    pl_msg_release(&m);

    /* what a client must not send */
    raw_wbuf_init(&w, PL_MSG_WATCH, 7, 2);
    raw_kstr(&w.pk, "token", TOKEN);
    raw_kstr(&w.pk, "after", "12");
    errno = 0;
    ok((b = reread(&w, &m)) && pl_watch_req_decode(b, &d, &e) == -1
           && errno == EPROTO && strstr(e.text, "after"),
       "watch: 'after' as a string: EPROTO (%s)", e.text);
    pl_msg_release(&m);
    raw_wbuf_init(&w, PL_MSG_WATCH, 8, 1);
    raw_kstr(&w.pk, "token", "bad token with spaces");
    errno = 0;
    ok((b = reread(&w, &m)) && pl_watch_req_decode(b, &d, &e) == -1
           && errno == EINVAL && strstr(e.text, "16 to 64"),
       "watch: a bad token: EINVAL, the rule said (%s)", e.text);
    pl_msg_release(&m);
    raw_wbuf_init(&w, PL_MSG_WATCH, 9, 1);
    raw_kuint(&w.pk, "after", 3);
    errno = 0;
    ok((b = reread(&w, &m)) && pl_watch_req_decode(b, &d, &e) == -1
           && errno == EPROTO && strstr(e.text, "token"),
       "watch: no token: EPROTO (%s)", e.text);
    pl_msg_release(&m);
    raw_wbuf_init(&w, PL_MSG_WATCH, 10, 3);
    raw_kstr(&w.pk, "token", TOKEN);
    raw_key(&w.pk, "all");
    msgpack_pack_true(&w.pk);
    raw_kuintv(&w.pk, "ids", ids, 1);
    errno = 0;
    ok((b = reread(&w, &m)) && pl_watch_req_decode(b, &d, &e) == -1
           && errno == EINVAL && !d.sel.ids,
       "watch: 'all' and ids: EINVAL, nothing held (%s)", e.text);
    pl_msg_release(&m);
    raw_wbuf_init(&w, PL_MSG_WATCH, 11, 2);
    raw_kstr(&w.pk, "token", TOKEN);
    raw_kuintv(&w.pk, "elems", ids, 3);
    errno = 0;
    ok((b = reread(&w, &m)) && pl_watch_req_decode(b, &d, &e) == -1
           && errno == EPROTO,
       "watch: an odd elems list: EPROTO (%s)", e.text);
    pl_msg_release(&m);

    char token[PL_WATCH_TOKEN_MAX + 1];
    pl_unwatch_encode(&w, 12, TOKEN);
    ok((b = reread(&w, &m)) && m.type == PL_MSG_UNWATCH
           && pl_unwatch_decode(b, token, &e) == 0 && !strcmp(token, TOKEN),
       "unwatch: round-trips");
    pl_msg_release(&m);
}

static void test_reply(void)
{
    struct pl_watch_reply r = { .token = TOKEN, .seq = 90, .n = 3,
                                .watching = 100000, .pending = 12 }, d;
    struct pl_wbuf w;
    struct pl_msg m;
    struct pl_error e = { "" };
    const msgpack_object *b, *data;
    int64_t errnum;
    char *text;

    pl_watch_reply_encode(&w, 4, &r);
    ok((b = reread(&w, &m)) && m.type == PL_MSG_REPLY && m.seq == 4
           && pl_reply_decode(b, &errnum, &text, &data, &e) == 0
           && errnum == 0 && pl_watch_reply_decode(data, &d, &e) == 0,
       "reply: round-trips (%s)", e.text);
    ok(!strcmp(d.token, TOKEN) && d.seq == 90 && d.n == 3
           && d.watching == 100000 && d.pending == 12,
       "reply: every field comes back");
    pl_msg_release(&m);
    errno = 0;
    ok(pl_watch_reply_decode(NULL, &d, &e) == -1 && errno == EPROTO,
       "reply: no data: EPROTO");
}

static void test_ends(void)
{
    struct pl_end ends[3] = {
        { .seq = 5, .id = 11, .state = PL_ST_DONE, .exit_code = 0,
          .signal = 0, .end_time = 1.7e9 },
        { .seq = 9, .id = 12, .state = PL_ST_FAILED, .exit_code = 137,
          .signal = 9, .end_time = 1.7e9 + 1,
          .reason = (char *)"exit code 137" },
        { .seq = 10, .id = 3, .state = PL_ST_CANCELED, .exit_code = -1,
          .signal = -1, .end_time = 1.7e9 + 2 },
    };
    struct pl_wbuf w;
    struct pl_msg m;
    struct pl_error e = { "" };
    struct pl_ends d;
    const msgpack_object *b;

    pl_ends_encode(&w, TOKEN, 4, 2, ends, 3);
    ok((b = reread(&w, &m)) && m.type == PL_MSG_ENDS
           && pl_ends_decode(b, &d, &e) == 0,
       "ends: a push round-trips (%s)", e.text);
    ok(!strcmp(d.token, TOKEN) && d.n == 4 && d.pending == 2 && d.nends == 3
           && d.ends[0].seq == 5 && d.ends[0].exit_code == 0
           && d.ends[1].state == PL_ST_FAILED && d.ends[1].signal == 9
           && !strcmp(d.ends[1].reason, "exit code 137")
           && d.ends[2].exit_code == -1 && d.ends[2].signal == -1
           && !d.ends[2].reason && d.ends[2].end_time == 1.7e9 + 2
           && !d.ends[0].result,
       "ends: every field comes back, absent ones as -1 and NULL");
    pl_ends_clear(&d);
    pl_msg_release(&m);

    pl_ends_encode(&w, TOKEN, 1, 0, NULL, 0);
    ok((b = reread(&w, &m)) && pl_ends_decode(b, &d, &e) == 0 && d.nends == 0
           && d.n == 1,
       "ends: a push of no end (a heartbeat) is one");
    pl_msg_release(&m);

    /* out of order, a live state, a push counter 0, a reserved result */
    ends[2].seq = 7;
    pl_ends_encode(&w, TOKEN, 5, 0, ends, 3);
    errno = 0;
    ok((b = reread(&w, &m)) && pl_ends_decode(b, &d, &e) == -1
           && errno == EPROTO && strstr(e.text, "ascending") && !d.ends,
       "ends: seqs out of order: EPROTO, nothing held (%s)", e.text);
    pl_msg_release(&m);
    ends[2].seq = 10;
    ends[0].state = PL_ST_RUNNING;
    pl_ends_encode(&w, TOKEN, 5, 0, ends, 3);
    errno = 0;
    ok((b = reread(&w, &m)) && pl_ends_decode(b, &d, &e) == -1
           && errno == EPROTO,
       "ends: an end that is not final: EPROTO (%s)", e.text);
    pl_msg_release(&m);
    ends[0].state = PL_ST_DONE;
    pl_ends_encode(&w, TOKEN, 0, 0, ends, 1);
    ok((b = reread(&w, &m)) && pl_ends_decode(b, &d, &e) == -1,
       "ends: push counter 0: refused (%s)", e.text);
    pl_msg_release(&m);

    /* by hand: a result (reserved: taken, bounded), a bad exit code */
    static char blob[PL_END_RESULT_MAX + 1];
    for (int big = 0; big < 2; big++) {
        raw_wbuf_init(&w, PL_MSG_ENDS, 0, 4);
        raw_kstr(&w.pk, "token", TOKEN);
        raw_kuint(&w.pk, "n", 1);
        raw_kuint(&w.pk, "pending", 0);
        raw_key(&w.pk, "ends");
        msgpack_pack_array(&w.pk, 1);
        msgpack_pack_map(&w.pk, 5);
        raw_kuint(&w.pk, "seq", 1);
        raw_kuint(&w.pk, "id", 1);
        raw_kstr(&w.pk, "state", "done");
        raw_kdouble(&w.pk, "end_time", 1.0);
        raw_key(&w.pk, "result");
        size_t len = big ? sizeof(blob) : 10;
        msgpack_pack_bin(&w.pk, len);
        msgpack_pack_bin_body(&w.pk, blob, len);
        errno = 0;
        int rc = (b = reread(&w, &m)) ? pl_ends_decode(b, &d, &e) : -2;
        if (!big)
            ok(rc == 0 && d.ends[0].result && d.ends[0].result_size == 10,
               "ends: a 'result' of 10 bytes is taken (reserved)");
        else
            ok(rc == -1 && errno == EPROTO && strstr(e.text, "result"),
               "ends: a 'result' over %d bytes: EPROTO (%s)",
               PL_END_RESULT_MAX, e.text);
        if (rc == 0)
            pl_ends_clear(&d);
        pl_msg_release(&m);
    }
    raw_wbuf_init(&w, PL_MSG_ENDS, 0, 4);
    raw_kstr(&w.pk, "token", TOKEN);
    raw_kuint(&w.pk, "n", 1);
    raw_kuint(&w.pk, "pending", 0);
    raw_key(&w.pk, "ends");
    msgpack_pack_array(&w.pk, 1);
    msgpack_pack_map(&w.pk, 5);
    raw_kuint(&w.pk, "seq", 1);
    raw_kuint(&w.pk, "id", 1);
    raw_kstr(&w.pk, "state", "failed");
    raw_kdouble(&w.pk, "end_time", 1.0);
    raw_kint(&w.pk, "exit_code", -5);
    errno = 0;
    ok((b = reread(&w, &m)) && pl_ends_decode(b, &d, &e) == -1
           && errno == EPROTO && strstr(e.text, "exit_code"),
       "ends: a negative exit code: EPROTO (%s)", e.text);
    pl_msg_release(&m);
    raw_wbuf_init(&w, PL_MSG_ENDS, 0, 4);
    raw_kstr(&w.pk, "token", TOKEN);
    raw_kuint(&w.pk, "n", 1);
    raw_kuint(&w.pk, "pending", 0);
    raw_key(&w.pk, "ends");
    msgpack_pack_array(&w.pk, PL_ENDS_MAX + 1);
    for (int i = 0; i <= PL_ENDS_MAX; i++)
        msgpack_pack_nil(&w.pk);
    errno = 0;
    ok((b = reread(&w, &m)) && pl_ends_decode(b, &d, &e) == -1
           && errno == EPROTO,
       "ends: more than %d ends in a push: EPROTO", PL_ENDS_MAX);
    pl_msg_release(&m);
}

static void test_submit_watch(void)
{
    char token[PL_WATCH_TOKEN_MAX + 1];
    struct pl_wbuf w;
    struct pl_msg m;
    struct pl_error e = { "" };
    const msgpack_object *b, *specs;

    pl_submit_begin_watch(&w, 3, 0, TOKEN);
    ok((b = reread(&w, &m)) && pl_submit_watch_decode(b, token, &e) == 1
           && !strcmp(token, TOKEN)
           && pl_submit_decode(b, &specs, &e) == -1 && errno == EINVAL,
       "submit: 'watch' comes back, beside its tasks");
    pl_msg_release(&m);
    pl_submit_begin(&w, 3, 0);
    ok((b = reread(&w, &m)) && pl_submit_watch_decode(b, token, &e) == 0
           && !token[0],
       "submit: no 'watch': absent");
    pl_msg_release(&m);
    pl_submit_begin_watch(&w, 3, 0, "no good");
    errno = 0;
    ok((b = reread(&w, &m)) && pl_submit_watch_decode(b, token, &e) == -1
           && errno == EINVAL,
       "submit: a bad 'watch' token: EINVAL (%s)", e.text);
    pl_msg_release(&m);
}

int main(void)
{
    plan(29);
    test_token();
    test_watch_req();
    test_reply();
    test_ends();
    test_submit_watch();
    return tap_failed ? 1 : 0;
}
