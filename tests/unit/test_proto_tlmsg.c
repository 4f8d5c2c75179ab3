/* tests/unit/test_proto_tlmsg.c - TIMELINE (116): the request's encoder
 * and pilotd's decoder agree and the decoder refuses what it must; the
 * query (proto/query_tl.c) on a database of the schema: each rank's
 * placement from the events, the filters, pages that go on */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/query.h"
#include "proto/schema.h"
#include "proto/tlmsg.h"
#include "tests/mpw.h"
#include "tests/unit/tap.h"

static const msgpack_object *reread(struct pl_wbuf *w, struct pl_msg *m)
{
    struct pl_error e;

    if (pl_msg_decode(w->sb.data, w->sb.size, m, &e) < 0) {
        diag("envelope refused: %s", e.text);
        return NULL;
    }
    return m->body;
}

static void test_roundtrip(void)
{
    char kv[] = "k=v", flag[] = "flag", train[] = "train";
    char *tags[] = { kv, flag, NULL };
    uint64_t ids[] = { 3, 9 }, el[] = { 40, 2 };
    struct pl_tl_req q = { .tags = tags, .name = train, .since = 1.5e9,
                           .after = 7, .limit = 100,
                           .sel = { ids, 2, el, 1 } }, d;
    struct pl_wbuf w;
    struct pl_msg m;
    struct pl_error e = { "" };
    const msgpack_object *o;

    pl_tl_req_encode(&w, 5, &q);
    ok((o = reread(&w, &m)) && m.type == PL_MSG_TIMELINE
           && pl_tl_req_decode(o, &d, &e) == 0,
       "timeline: encoded and decoded (%s)", e.text);
    ok(d.tags && !strcmp(d.tags[0], "k=v") && !strcmp(d.tags[1], "flag")
           && !d.tags[2] && !strcmp(d.name, "train") && d.since == 1.5e9
           && d.after == 7 && d.limit == 100 && d.sel.nids == 2
           && d.sel.ids[1] == 9 && d.sel.nelems == 1 && d.sel.elems[0] == 40,
       "... every field as sent");
    pl_tl_req_clear(&d);
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);

    q = (struct pl_tl_req){ 0 };
    pl_tl_req_encode(&w, 6, &q);
    ok((o = reread(&w, &m)) && pl_tl_req_decode(o, &d, &e) == 0 && !d.tags
           && !d.name && d.since == 0 && d.limit == 0,
       "an empty request: every task, the first page");
    pl_tl_req_clear(&d);
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);
}

/* A body of one field, decoded: the errno, 0 if taken. */
static int one_field(void (*put)(msgpack_packer *pk))
{
    struct pl_wbuf w;
    struct pl_msg m;
    struct pl_error e;
    struct pl_tl_req d;
    const msgpack_object *o;
    int rc;

    raw_wbuf_init(&w, PL_MSG_TIMELINE, 1, 1);
    put(&w.pk);
    if (!(o = reread(&w, &m))) {
        pl_wbuf_destroy(&w);
        return -1;
    }
    errno = 0;
    rc = pl_tl_req_decode(o, &d, &e) == 0 ? 0 : errno;
    if (!rc)
        pl_tl_req_clear(&d);
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    return rc;
}

static void bad_tag(msgpack_packer *pk)
{
    raw_key(pk, "tags");
    msgpack_pack_array(pk, 1);
    pl_w_str(pk, "a\"]') OR 1=1 --=x");
}
static void nan_since(msgpack_packer *pk) { raw_kdouble(pk, "since", NAN); }
static void neg_since(msgpack_packer *pk) { raw_kdouble(pk, "since", -1); }
static void big_limit(msgpack_packer *pk) { raw_kuint(pk, "limit", 5001); }
static void str_after(msgpack_packer *pk) { raw_kstr(pk, "after", "1"); }
static void long_name(msgpack_packer *pk)
{
    char s[300];
    memset(s, 'n', sizeof(s) - 1);
    s[sizeof(s) - 1] = '\0';
    raw_kstr(pk, "name", s);
}
static void odd_elems(msgpack_packer *pk)
{
    raw_key(pk, "elems");
    msgpack_pack_array(pk, 1);
    msgpack_pack_uint64(pk, 4);
}

static void test_refused(void)
{
    is(one_field(bad_tag), EINVAL, "a tag key that is not [A-Za-z0-9_.-]");
    is(one_field(nan_since), EPROTO, "since NaN");
    is(one_field(neg_since), EPROTO, "since < 0");
    is(one_field(big_limit), EPROTO, "limit over 5,000");
    is(one_field(str_after), EPROTO, "after not a number");
    is(one_field(long_name), EPROTO, "a name over 256 bytes");
    is(one_field(odd_elems), EPROTO, "elems not in pairs");
}

static sqlite3 *db_new(void)
{
    static const char *const cols[] = PL_SCHEMA_NEW_COLUMNS;
    sqlite3 *db;
    (void)cols;

    if (sqlite3_open(":memory:", &db) != SQLITE_OK
        || sqlite3_exec(db, PL_SCHEMA_SQL PL_SCHEMA_INDEXES, NULL, NULL,
                        NULL) != SQLITE_OK)
        return NULL;
    return db;
}

#define T(id, name, tags, state, end)                                          \
    "INSERT INTO tasks (id, name, argv, state, submit_time, start_time, "      \
    "end_time, ranks, tags, cpu_user) VALUES (" id ", " name ", '[\"x\"]', " \
    state ", 10, 11, " end ", 1, " tags ", NULL);"

static void test_query(void)
{
    sqlite3 *db = db_new();
    struct pl_error e = { "" };
    struct pl_tl_req q = { 0 };
    json_t *page, *t, *pl;

    ok(db != NULL, "a database of the schema");
    if (!db)
        return;
    ok(sqlite3_exec(db,
        "INSERT INTO nodes (name, cores, gpus, state) VALUES "
        " ('a', '0,1', '0', 'up');"
        T("1", "'p'", "'{\"k\": \"v\"}'", "'done'", "20")
        T("2", "'p'", "NULL", "'running'", "NULL")
        T("3", "'q'", "NULL", "'done'", "5")
        "UPDATE tasks SET ranks = 2 WHERE id = 2;"
        "INSERT INTO events (task, time, state, attempt, node, cores, gpus,"
        " rank) VALUES"
        " (1, 10, 'queued', 0, NULL, NULL, NULL, NULL),"
        " (1, 10.5, 'assigned', 1, 'a', '0', '0', NULL),"
        " (1, 11, 'running', 1, 'a', '0', '0', NULL),"
        " (1, 20, 'done', 1, 'a', NULL, NULL, NULL),"
        " (2, 11, 'running', 1, 'a', NULL, NULL, NULL),"
        " (2, 11, 'running', 1, 'a', '0', NULL, 0),"
        " (2, 11.5, 'running', 1, 'a', '1', NULL, 1),"
        " (2, 15, 'failed', 1, 'a', '1', NULL, 1),"
        " (3, 1, 'running', 1, 'a', '1', NULL, NULL),"
        " (3, 5, 'done', 1, 'a', NULL, NULL, NULL),"
        " (4, 21, 'running', 1, 'a', '1', NULL, NULL),"
        " (4, 30, 'queued', 1, NULL, NULL, NULL, NULL),"
        " (4, 31, 'running', 2, 'a', '0', NULL, NULL),"
        " (4, 40, 'done', 2, 'a', NULL, NULL, NULL);"
        T("4", "'r'", "NULL", "'done'", "40"),
        NULL, NULL, NULL) == SQLITE_OK, "three tasks and their events");

    page = pl_query_timeline(db, &q, NULL, 0, &e);
    ok(page && json_array_size(json_object_get(page, "tasks")) == 4
           && json_is_false(json_object_get(page, "more"))
           && json_array_size(json_object_get(page, "nodes")) == 1,
       "all tasks in one page, the nodes with it (%s)", e.text);
    t = json_array_get(json_object_get(page, "tasks"), 0);
    pl = json_array_get(json_object_get(t, "place"), 0);
    ok(json_array_size(json_object_get(t, "place")) == 1
           && json_integer_value(json_array_get(json_array_get(pl, 3), 0))
                  == 0
           && json_integer_value(json_array_get(json_array_get(pl, 4), 0))
                  == 0
           && json_real_value(json_array_get(pl, 5)) == 11
           && json_real_value(json_array_get(pl, 6)) == 20,
       "task 1: its one rank on a, core 0, GPU 0, 11 to 20 (the end "
       "event's cores kept from running)");
    ok(json_is_null(json_object_get(t, "cpu_user"))
           && !strcmp(json_string_value(json_object_get(
                          json_object_get(t, "tags"), "k")), "v"),
       "... cpu_user null (not measured), its tags an object");
    t = json_array_get(json_object_get(page, "tasks"), 1);
    pl = json_object_get(t, "place");
    ok(json_array_size(pl) == 2
           && json_integer_value(json_array_get(json_array_get(pl, 1), 1))
                  == 1
           && json_is_null(json_array_get(json_array_get(pl, 0), 6))
           && json_real_value(json_array_get(json_array_get(pl, 1), 6))
                  == 15,
       "task 2: its rank rows (not its own), rank 0 still running (end "
       "null), rank 1 ended at 15");
    t = json_array_get(json_object_get(page, "tasks"), 3);
    pl = json_object_get(t, "place");
    ok(json_array_size(pl) == 2
           && json_real_value(json_array_get(json_array_get(pl, 0), 6)) == 30
           && json_integer_value(json_array_get(json_array_get(pl, 1), 0))
                  == 2
           && json_real_value(json_array_get(json_array_get(pl, 1), 6))
                  == 40,
       "task 4, requeued (its node lost): attempt 1 ends when it went "
       "back to the queue (30), attempt 2 ran 31 to 40");
    json_decref(page);

    q.limit = 1;
    page = pl_query_timeline(db, &q, NULL, 0, &e);
    ok(page && json_array_size(json_object_get(page, "tasks")) == 1
           && json_is_true(json_object_get(page, "more")),
       "limit 1: one task, more");
    json_decref(page);
    q.after = 2;
    page = pl_query_timeline(db, &q, NULL, 0, &e);
    ok(page && json_integer_value(json_object_get(json_array_get(
                   json_object_get(page, "tasks"), 0), "id")) == 3
           && json_is_true(json_object_get(page, "more"))
           && !json_object_get(page, "nodes"),
       "after 2: task 3, more, and no nodes on a later page");
    json_decref(page);

    char p[] = "p", kv[] = "k=v";
    q = (struct pl_tl_req){ .name = p, .since = 15 };
    page = pl_query_timeline(db, &q, NULL, 0, &e);
    ok(page && json_array_size(json_object_get(page, "tasks")) == 2,
       "name p, since 15: tasks 1 (ended 20) and 2 (running)");
    json_decref(page);
    char *tags[] = { kv, NULL };
    q = (struct pl_tl_req){ .tags = tags };
    page = pl_query_timeline(db, &q, NULL, 0, &e);
    ok(page && json_array_size(json_object_get(page, "tasks")) == 1,
       "tag k=v: task 1");
    json_decref(page);
    uint64_t ids[] = { 3, 1 };
    q = (struct pl_tl_req){ .limit = 1 };
    page = pl_query_timeline(db, &q, ids, 2, &e);
    ok(page && json_integer_value(json_object_get(json_array_get(
                   json_object_get(page, "tasks"), 0), "id")) == 3
           && json_is_true(json_object_get(page, "more")),
       "ids 3, 1 in their order, a page of 1: 3, more");
    json_decref(page);
    q.after = 3;
    page = pl_query_timeline(db, &q, ids, 2, &e);
    ok(page && json_integer_value(json_object_get(json_array_get(
                   json_object_get(page, "tasks"), 0), "id")) == 1
           && json_is_false(json_object_get(page, "more")),
       "... after 3: 1, the last");
    json_decref(page);
    sqlite3_close(db);
}

int main(void)
{
    plan(23);
    test_roundtrip();
    test_refused();
    test_query();
    return done_testing();
}
