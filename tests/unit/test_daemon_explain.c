/* tests/unit/test_daemon_explain.c - why a task does not run, each reason */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "daemon/explain.h"
#include "daemon/node.h"
#include "daemon/sched.h"
#include "proto/state.h"
#include "proto/strv.h"
#include "tests/unit/sched_fixture.h"
#include "tests/unit/tap.h"

static void place_cb(struct pl_dtask *t, void *arg)
{
    (void)arg;
    t->state = PL_ST_ASSIGNED;
}

/* The explanation of task 'id', its code and summary. */
static json_t *explain(struct pl_sched *s, uint64_t id)
{
    json_t *o = pl_explain_live(s, pl_sched_task_get(s, id));

    if (!o) {
        diag("no explanation of task %llu", (unsigned long long)id);
        exit(1);
    }
    diag("task %llu: %s: %s", (unsigned long long)id,
         json_string_value(json_object_get(o, "code")),
         json_string_value(json_object_get(o, "summary")));
    return o;
}

static bool code_is(const json_t *o, const char *code)
{
    const char *c = json_string_value(json_object_get(o, "code"));

    return c && !strcmp(c, code);
}

static bool says(const json_t *o, const char *text)
{
    const char *s = json_string_value(json_object_get(o, "summary"));

    return s && strstr(s, text);
}

/* Whether node 'name' of the explanation has a reason 'code' whose text
 * holds 'text' (NULL: any). */
static bool node_says(const json_t *o, const char *name, const char *code,
                      const char *text)
{
    const json_t *n, *r;
    size_t i, j;

    json_array_foreach(json_object_get(o, "nodes"), i, n) {
        if (strcmp(json_string_value(json_object_get(n, "name")), name))
            continue;
        json_array_foreach(json_object_get(n, "reasons"), j, r) {
            const char *c = json_string_value(json_object_get(r, "code"));
            const char *t = json_string_value(json_object_get(r, "text"));
            if (!strcmp(c, code) && (!text || strstr(t, text)))
                return true;
        }
    }
    return false;
}

static void test_deps(void)
{
    struct pl_sched *s = pl_sched_new();
    json_t *o;

    t_sched_node(s, "n1", 4, 0);
    t_sched_task(s, 1, 0, 1, 1, 0);
    pl_sched_run(s, place_cb, NULL);
    pl_sched_task_get(s, 1)->state = PL_ST_RUNNING;
    char a0[] = "true";
    char *v[] = { a0, NULL };
    char **argv = pl_strv_dup(v), **env = NULL, *cwd = NULL;
    struct pl_dtask *t = pl_sched_task_add(s, 2, false, 0, &argv, &env,
                                           &cwd);
    t->state = PL_ST_WAITING;
    /* 9 has ended: only 1 is still waited for */
    t->deps = malloc(2 * sizeof(*t->deps));
    t->deps[0] = 9;
    t->deps[1] = 1;
    t->ndeps_live = 2;
    t->ndeps = 1;
    o = explain(s, 2);
    const json_t *deps = json_object_get(o, "deps");
    ok(code_is(o, "deps") && json_array_size(deps) == 1
           && json_integer_value(json_object_get(json_array_get(deps, 0),
                                                 "id")) == 1
           && says(o, "1 (running)"),
       "deps: waits for task 1, running (9 has ended)");
    json_decref(o);
    o = explain(s, 1);
    ok(code_is(o, "running") && says(o, "runs on n1"),
       "running: where it runs");
    json_decref(o);
    /* 150 dependencies not ended: 100 listed, 50 counted */
    uint64_t *more = realloc(t->deps, 150 * sizeof(*t->deps));
    t->deps = more;
    for (uint64_t i = 0; i < 150; i++) {
        t_sched_task(s, 100 + i, 0, 1, 1, 0);
        t->deps[i] = 100 + i;
    }
    t->ndeps_live = t->ndeps = 150;
    o = pl_explain_live(s, t);
    ok(o && json_array_size(json_object_get(o, "deps")) == 100
           && json_integer_value(json_object_get(o, "deps_more")) == 50,
       "deps: 100 of 150 listed, 50 counted");
    json_decref(o);
    pl_sched_free(s);
}

static void test_cores_resv(void)
{
    struct pl_sched *s = pl_sched_new();
    json_t *o;

    t_sched_node(s, "n1", 8, 0);
    t_sched_node(s, "n2", 8, 1);
    t_sched_task(s, 1, 0, 1, 6, 0);
    t_sched_task(s, 2, 0, 1, 6, 0);
    pl_sched_run(s, place_cb, NULL);
    o = explain(s, 1);
    ok(code_is(o, "assigned") && says(o, "placed on n1"),
       "assigned: placed on n1, its agent starts it");
    json_decref(o);
    /* n1 and n2 have 2 cores free: 3 reserves n1 (the first freest) */
    t_sched_task(s, 3, 0, 1, 4, 0);
    t_sched_task(s, 4, 0, 1, 1, 2);
    pl_sched_run(s, place_cb, NULL);
    ok(pl_sched_reserved_for(s) == 3, "task 3 holds the reservation");
    o = explain(s, 3);
    ok(code_is(o, "holds") && says(o, "n1 is kept for it")
           && node_says(o, "n2", "cores", "2 of 8 cores free, a rank needs "
                        "4"),
       "holds: n1 kept for it; n2 has 2 of 8 cores free");
    json_decref(o);
    o = explain(s, 4);
    ok(code_is(o, "never") && says(o, "GPUs per rank"),
       "never: 2 GPUs per rank, no node has them");
    json_decref(o);
    /* 5 fits n2 now (no pass yet) */
    t_sched_task(s, 5, 0, 1, 2, 0);
    o = explain(s, 5);
    ok(code_is(o, "next") && json_integer_value(json_object_get(o, "ahead"))
                                 == 2,
       "next: fits now, 2 tasks ahead of it");
    json_decref(o);
    pl_sched_run(s, place_cb, NULL);
    ok(pl_sched_task_get(s, 5)->state == PL_ST_ASSIGNED, "5 placed on n2");
    /* n2 is full; 6 would fit n1, kept for 3 */
    t_sched_task(s, 6, 0, 1, 2, 0);
    o = explain(s, 6);
    ok(code_is(o, "reserved") && says(o, "reserved for task 3")
           && node_says(o, "n1", "reserved", "task 3")
           && node_says(o, "n2", "cores", "0 of 8"),
       "reserved: only n1 would do, kept for task 3");
    json_decref(o);
    /* a GPU: n1 has none, n2 has no core left */
    t_sched_task(s, 7, 0, 1, 1, 1);
    o = explain(s, 7);
    ok(code_is(o, "room") && node_says(o, "n1", "small", "0 GPUs")
           && node_says(o, "n2", "cores", NULL),
       "room: n1 has no GPU, n2 no free core");
    json_decref(o);
    /* a GPU held */
    t_sched_task(s, 8, 0, 1, 1, 1);
    pl_sched_task_get(s, 2)->state = PL_ST_RUNNING;
    pl_sched_task_remove(s, pl_sched_task_get(s, 2)); /* 2 ended */
    pl_sched_task_remove(s, pl_sched_task_get(s, 6));
    pl_sched_task_remove(s, pl_sched_task_get(s, 3));
    pl_sched_run(s, place_cb, NULL); /* 7 takes n2's GPU */
    o = explain(s, 8);
    ok(pl_sched_task_get(s, 7)->state == PL_ST_ASSIGNED
           && code_is(o, "holds") && says(o, "n2 is kept for it")
           && node_says(o, "n2", "gpus", "0 of 1 GPUs"),
       "gpus: n2's only GPU is taken by 7; 8 holds n2");
    json_decref(o);
    pl_sched_free(s);
}

static void test_nodes(void)
{
    struct pl_sched *s = pl_sched_new();
    struct pl_node *n1, *n2, *n3;
    json_t *o;

    n1 = t_sched_node(s, "n1", 4, 0);
    n2 = t_sched_node(s, "n2", 4, 0);
    n3 = t_sched_node(s, "n3", 4, 0);
    t_sched_task(s, 1, 0, 1, 1, 0);
    pl_sched_run(s, place_cb, NULL);
    n2->cordon = strdup("check cpu_speed: 41% slower than the median");
    pl_node_changed(n2);
    pl_node_set_state(n3, PL_NODE_LOST);
    struct pl_dtask *t = t_sched_task(s, 2, 0, 1, 1, 0);
    t->exclusive = true;
    o = explain(s, 2);
    ok(code_is(o, "room") && node_says(o, "n1", "exclusive", "idle")
           && node_says(o, "n2", "cordoned", "cpu_speed: 41%")
           && node_says(o, "n3", "down", "lost"),
       "exclusive: n1 busy, n2 cordoned (why), n3 lost");
    json_decref(o);
    /* a cordon's reason of 256 bytes in UTF-8 (pilot cordon --reason
     * allows it): the reason's text is cut between characters, and kept */
    free(n2->cordon);
    n2->cordon = malloc(257);
    pl_node_changed(n2);
    for (int i = 0; i < 256; i += 2)
        memcpy(n2->cordon + i, "\xc3\xa9", 2);
    n2->cordon[256] = '\0';
    o = explain(s, 2);
    ok(node_says(o, "n2", "cordoned", "cordoned: \xc3\xa9\xc3\xa9"),
       "a long cordon's reason in UTF-8: the reason kept, cut whole");
    json_decref(o);
    /* n1 cordoned too: n3 is lost, so no open node can ever take it */
    n1->cordon = strdup("by hand");
    pl_node_changed(n1);
    o = explain(s, 2);
    ok(code_is(o, "cordoned") && says(o, "cordoned: n1, n2"),
       "every node it fits on cordoned: says so, not 'waits for room'");
    json_decref(o);
    free(n1->cordon);
    free(n2->cordon);
    n1->cordon = strdup("vetting");
    pl_node_changed(n1);
    n2->cordon = strdup("vetting");
    pl_node_changed(n2);
    o = explain(s, 2);
    ok(code_is(o, "cordoned") && says(o, "being vetted: n1, n2"),
       "... being vetted at first: says so, not 'pilot uncordon'");
    json_decref(o);
    free(n1->cordon);
    free(n2->cordon);
    n1->cordon = NULL;
    pl_node_changed(n1);
    n2->cordon = strdup("check cpu_speed: 41% slower than the median");
    pl_node_changed(n2);
    /* a gang of 2 x 2 cores on 2 nodes: only n1 has room, for 1 */
    t = t_sched_task(s, 3, 0, 2, 2, 0);
    t->nodes_req = 2;
    o = explain(s, 3);
    ok(code_is(o, "room") && says(o, "on 2 nodes")
           && says(o, "1 node can take 1 rank in all"),
       "gang: needs 2 nodes, 1 node has room for 1 rank");
    json_decref(o);
    pl_sched_free(s);
}

static void test_walltime(void)
{
    struct pl_sched *s = pl_sched_new();
    json_t *o;

    t_sched_task(s, 1, 0, 1, 1, 0);
    o = explain(s, 1);
    ok(code_is(o, "nodes"), "nodes: no node has joined");
    json_decref(o);
    t_sched_node(s, "n1", 4, 0);
    pl_sched_set_time_left(s, 600);
    pl_sched_task_get(s, 1)->timeout = 3600;
    o = explain(s, 1);
    ok(code_is(o, "walltime") && says(o, "(1h00m)") && says(o, "(10m00s)")
           && json_real_value(json_object_get(o, "walltime_left")) == 600,
       "walltime: timeout 1h, 10m left");
    json_decref(o);
    pl_sched_free(s);
}

static void test_row(void)
{
    json_t *row = json_pack("{s:I, s:s, s:s, s:s, s:f, s:f, s:I, s:n}",
                            "id", (json_int_t)5, "state", "failed", "node",
                            "n1", "nodes", "n1,n2", "start_time", 100.0,
                            "end_time", 103.6, "exit_code", (json_int_t)3,
                            "signal");
    json_t *o = pl_explain_row(row);

    ok(o && code_is(o, "ended")
           && says(o, "ran on n1,n2 and ended failed (exit 3) after 4s"),
       "ended: where, how, how long (%s)",
       json_string_value(json_object_get(o, "summary")));
    json_decref(o);
    json_decref(row);
    row = json_pack("{s:I, s:s, s:n, s:n, s:n, s:s}", "id", (json_int_t)6,
                    "state", "canceled", "node", "start_time", "end_time",
                    "reason", "canceled by user");
    o = pl_explain_row(row);
    ok(o && code_is(o, "ended") && says(o, "ended canceled before it "
                                        "started: canceled by user"),
       "ended before it started, with its reason");
    json_decref(o);
    json_decref(row);

    /* a reason longer than the summary's room, in 2-byte characters at
     * an odd offset: cut between characters, not inside one */
    char reason[1201];
    reason[0] = 'x';
    for (int i = 1; i < 1199; i += 2)
        memcpy(reason + i, "\xc3\xa9", 2); /* U+00E9 */
    reason[1199] = '\0';
    row = json_pack("{s:I, s:s, s:n, s:n, s:n, s:s}", "id", (json_int_t)7,
                    "state", "failed", "node", "start_time", "end_time",
                    "reason", reason);
    o = pl_explain_row(row);
    ok(o && code_is(o, "ended") && says(o, "started: x\xc3\xa9"),
       "a long reason in UTF-8: cut between characters (%s)",
       o ? "an explanation" : "none");
    json_decref(o);
    json_decref(row);
    row = json_pack("{s:I, s:s, s:n, s:n, s:n, s:s}", "id", (json_int_t)8,
                    "state", "failed", "node", "start_time", "end_time",
                    "reason", reason + 1);
    o = pl_explain_row(row);
    ok(o != NULL, "... at an even offset too");
    json_decref(o);
    json_decref(row);
}

int main(void)
{
    plan(23);
    test_deps();
    test_cores_resv();
    test_nodes();
    test_walltime();
    test_row();
    return done_testing();
}
