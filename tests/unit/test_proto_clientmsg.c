/* tests/unit/test_proto_clientmsg.c - the client requests: encoders and
 * pilotd's decoders agree, and the decoders refuse what they must */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/clientmsg.h"
#include "proto/spec.h"
#include "proto/strv.h"
#include "tests/mpw.h"
#include "tests/unit/tap.h"

/* 'w' decoded into 'm'; its body, or NULL. */
static const msgpack_object *reread(struct pl_wbuf *w, struct pl_msg *m)
{
    struct pl_error e;

    if (pl_msg_decode(w->sb.data, w->sb.size, m, &e) < 0) {
        diag("envelope refused: %s", e.text);
        return NULL;
    }
    return m->body;
}

/* RESULTS (114): 1 to 1,000 task ids, none 0. */
static void test_results(void)
{
    static uint64_t many[PL_RESULTS_MAX_IDS + 1];
    uint64_t ids[] = { 4, 2, 9 }, zero[] = { 3, 0 };
    struct pl_results_req r = { .ids = ids, .nids = 3 }, r2;
    struct pl_error e = { "" };
    const msgpack_object *o;
    struct pl_wbuf w;
    struct pl_msg m;

    pl_results_req_encode(&w, 8, &r);
    ok((o = reread(&w, &m)) && m.type == PL_MSG_RESULTS && m.seq == 8
           && pl_results_req_decode(o, &r2, &e) == 0 && r2.nids == 3
           && r2.ids[0] == 4 && r2.ids[2] == 9,
       "results: its ids round-trip in order (%s)", e.text);
    pl_results_req_clear(&r2);
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    for (size_t i = 0; i <= PL_RESULTS_MAX_IDS; i++)
        many[i] = i + 1;
    r = (struct pl_results_req){ .ids = many, .nids = PL_RESULTS_MAX_IDS };
    pl_results_req_encode(&w, 8, &r);
    ok((o = reread(&w, &m)) && pl_results_req_decode(o, &r2, &e) == 0
           && r2.nids == PL_RESULTS_MAX_IDS,
       "results: %d ids pass", PL_RESULTS_MAX_IDS);
    pl_results_req_clear(&r2);
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    r.nids = PL_RESULTS_MAX_IDS + 1;
    pl_results_req_encode(&w, 8, &r);
    errno = 0;
    ok((o = reread(&w, &m)) && pl_results_req_decode(o, &r2, &e) < 0
           && errno == EPROTO && !r2.ids,
       "results: %d ids refused (%s)", PL_RESULTS_MAX_IDS + 1, e.text);
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    r = (struct pl_results_req){ .ids = zero, .nids = 2 };
    pl_results_req_encode(&w, 8, &r);
    ok((o = reread(&w, &m)) && pl_results_req_decode(o, &r2, &e) < 0
           && errno == EINVAL && strstr(e.text, "id 0") && !r2.ids,
       "results: id 0 refused (%s)", e.text);
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    r.nids = 0;
    pl_results_req_encode(&w, 8, &r);
    ok((o = reread(&w, &m)) && pl_results_req_decode(o, &r2, &e) < 0
           && errno == EINVAL && strstr(e.text, "no task"),
       "results: no ids refused (%s)", e.text);
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    raw_wbuf_init(&w, PL_MSG_RESULTS, 1, 0);
    ok((o = reread(&w, &m)) && pl_results_req_decode(o, &r2, &e) < 0
           && errno == EPROTO,
       "results: a body without ids refused (%s)", e.text);
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);
}

int main(void)
{
    struct pl_wbuf w;
    struct pl_msg m;
    struct pl_error e = { "" };
    const msgpack_object *o;
    uint64_t ids[] = { 3, 9, 12 }, elems[] = { 40, 7, 40, 8 };
    char *tags[] = { (char *)"model=lstm", (char *)"stage", NULL };

    plan(21);
    /* CANCEL / COUNTS: a selection */
    struct pl_sel_req s = { .ids = ids, .nids = 3, .elems = elems,
                            .nelems = 2 }, s2;
    pl_sel_req_encode(&w, PL_MSG_CANCEL, 5, &s);
    ok((o = reread(&w, &m)) && m.type == PL_MSG_CANCEL && m.seq == 5
           && pl_sel_req_decode(o, &s2, &e) == 0 && s2.nids == 3
           && s2.ids[2] == 12 && s2.nelems == 2 && s2.elems[3] == 8
           && pl_sel_req_given(&s2),
       "selection: ids and element pairs (%s)", e.text);
    pl_sel_req_clear(&s2);
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    struct pl_sel_req none = { 0 };
    pl_sel_req_encode(&w, PL_MSG_COUNTS, 6, &none);
    ok((o = reread(&w, &m)) && pl_sel_req_decode(o, &s2, &e) == 0
           && !pl_sel_req_given(&s2) && o->via.map.size == 0,
       "selection: none is an empty body");
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    raw_wbuf_init(&w, PL_MSG_CANCEL, 1, 1);
    raw_kuintv(&w.pk, "elems", elems, 3);
    errno = 0;
    ok((o = reread(&w, &m)) && pl_sel_req_decode(o, &s2, &e) == -1
           && errno == EPROTO && !s2.elems,
       "selection: an odd number of element numbers refused (%s)", e.text);
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);

    /* LIST */
    struct pl_list_req l = { .state = (char *)"done", .tags = tags,
                             .limit = 50, .sel = s }, l2;
    pl_list_req_encode(&w, 7, &l);
    ok((o = reread(&w, &m)) && m.type == PL_MSG_LIST
           && pl_list_req_decode(o, &l2, &e) == 0
           && !strcmp(l2.state, "done") && pl_strv_len(l2.tags) == 2
           && !strcmp(l2.tags[1], "stage") && l2.limit == 50
           && l2.sel.nids == 3 && l2.sel.nelems == 2,
       "list: state, tags, limit, selection (%s)", e.text);
    pl_list_req_clear(&l2);
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    l.state = (char *)"sleeping";
    pl_list_req_encode(&w, 8, &l);
    errno = 0;
    ok((o = reread(&w, &m)) && pl_list_req_decode(o, &l2, &e) == -1
           && errno == EINVAL && strstr(e.text, "sleeping") && !l2.tags,
       "list: an unknown state refused (%s)", e.text);
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    struct pl_list_req all = { 0 };
    pl_list_req_encode(&w, 9, &all);
    ok((o = reread(&w, &m)) && pl_list_req_decode(o, &l2, &e) == 0
           && !l2.state && !l2.tags && !l2.limit
           && !pl_sel_req_given(&l2.sel),
       "list: everything (an empty body)");
    pl_list_req_clear(&l2);
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);

    /* SHOW */
    struct pl_show_req sh = { .id = 17 }, sh2;
    pl_show_req_encode(&w, 10, &sh);
    ok((o = reread(&w, &m)) && pl_show_req_decode(o, &sh2, &e) == 0
           && !sh2.by_elem && sh2.id == 17,
       "show: by id");
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    sh = (struct pl_show_req){ .by_elem = true, .id = 40, .index = 7 };
    pl_show_req_encode(&w, 11, &sh);
    ok((o = reread(&w, &m)) && pl_show_req_decode(o, &sh2, &e) == 0
           && sh2.by_elem && sh2.id == 40 && sh2.index == 7,
       "show: by element (40.7)");
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    raw_wbuf_init(&w, PL_MSG_SHOW, 1, 0);
    errno = 0;
    ok((o = reread(&w, &m)) && pl_show_req_decode(o, &sh2, &e) == -1
           && errno == EPROTO,
       "show: neither id nor element refused (%s)", e.text);
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);

    /* EXPLAIN: named as SHOW names a task, under its own type */
    sh = (struct pl_show_req){ .id = 23 };
    pl_explain_req_encode(&w, 12, &sh);
    ok((o = reread(&w, &m)) && m.type == PL_MSG_EXPLAIN
           && pl_explain_req_decode(o, &sh2, &e) == 0 && !sh2.by_elem
           && sh2.id == 23,
       "explain: by id");
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    sh = (struct pl_show_req){ .by_elem = true, .id = 40, .index = 3 };
    pl_explain_req_encode(&w, 13, &sh);
    ok((o = reread(&w, &m)) && pl_explain_req_decode(o, &sh2, &e) == 0
           && sh2.by_elem && sh2.id == 40 && sh2.index == 3,
       "explain: by element (40.3)");
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    raw_wbuf_init(&w, PL_MSG_EXPLAIN, 1, 0);
    errno = 0;
    ok((o = reread(&w, &m)) && pl_explain_req_decode(o, &sh2, &e) == -1
           && errno == EPROTO && strstr(e.text, "explain"),
       "explain: neither id nor element refused (%s)", e.text);
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);

    /* SUBMIT: the array of specs */
    const msgpack_object *specs;
    pl_submit_begin(&w, 12, 0);
    errno = 0;
    ok((o = reread(&w, &m)) && pl_submit_decode(o, &specs, &e) == -1
           && errno == EINVAL,
       "submit: no specs refused (%s)", e.text);
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    raw_wbuf_init(&w, PL_MSG_SUBMIT, 1, 1);
    raw_key(&w.pk, "tasks");
    msgpack_pack_array(&w.pk, PL_SPEC_MAX_SUBMIT + 1);
    for (uint32_t i = 0; i <= PL_SPEC_MAX_SUBMIT; i++)
        msgpack_pack_nil(&w.pk);
    errno = 0;
    ok((o = reread(&w, &m)) && pl_submit_decode(o, &specs, &e) == -1
           && errno == EPROTO,
       "submit: %d specs in one request refused (%s)",
       PL_SPEC_MAX_SUBMIT + 1, e.text);
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    raw_wbuf_init(&w, PL_MSG_SUBMIT, 1, 1);
    raw_key(&w.pk, "tasks");
    msgpack_pack_array(&w.pk, 2);
    msgpack_pack_nil(&w.pk);
    msgpack_pack_nil(&w.pk);
    ok((o = reread(&w, &m)) && pl_submit_decode(o, &specs, &e) == 0
           && specs->via.array.size == 2,
       "submit: the specs, each for pl_spec_decode()");
    if (o)
        pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    test_results();
    return done_testing();
}
