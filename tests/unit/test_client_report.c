/* tests/unit/test_client_report.c - pilot report's computations
 * (client/report_*.c): percentiles, histogram bins, a TIMELINE page into
 * rows and bars, the summary's tables and failures, the aggregated
 * timeline's busy fractions, bad pages refused, and the data written
 * for a script element without a '<' that could end it */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/report.h"
#include "tests/unit/tap.h"

static void test_pct_hist(void)
{
    double v[20];
    json_t *h;

    for (int i = 0; i < 20; i++)
        v[i] = 20 - i;            /* 20..1, unsorted */
    is(pl_report_pct(v, 20, 95) == 19, 1, "p95 of 1..20 is 19 (nearest rank)");
    is(pl_report_pct(v, 20, 50) == 10, 1, "p50 of 1..20 is 10");
    ok(isnan(pl_report_pct(v, 0, 95)), "p95 of nothing is NAN");
    h = pl_report_hist(v, 20, 10);
    is((int)json_array_size(json_object_get(h, "counts")), 10, "10 bins");
    is((int)json_array_size(json_object_get(h, "edges")), 11, "11 edges");
    ok(json_is_false(json_object_get(h, "log")), "1..20: linear bins");
    json_int_t sum = 0;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(h, "counts"), i, c)
        sum += json_integer_value(c);
    is((int)sum, 20, "every value in a bin (the largest in the last)");
    json_decref(h);
    double w[3] = { 0.001, 0.5, 100 };
    h = pl_report_hist(w, 3, 5);
    ok(json_is_true(json_object_get(h, "log")), "1 ms to 100 s: log bins");
    is((int)json_integer_value(json_array_get(json_object_get(h, "counts"),
                                              0)), 1, "... 1 ms in the first");
    is((int)json_integer_value(json_array_get(json_object_get(h, "counts"),
                                              4)), 1, "... 100 s in the last");
    json_decref(h);
}

/* Two nodes: a (cores 0,1), b (core 0, GPU 0); four tasks:
 * 1 "p" done on a:0 for 10 s from 100 (CPU 5 s: 50%), 2 "p" failed on
 * a:1 for 2 s ("exit code 3"), 3 "t" (tag k=v) on b core 0 and GPU 0
 * for 10 s, 4 "</script>" of two ranks on a:0 and a:1 for 5 s from
 * 110, 5 queued (never ran). */
static const char page_text[] =
    "{\"more\": false, \"nodes\": ["
    " {\"name\": \"a\", \"cores\": [0, 1], \"gpus\": []},"
    " {\"name\": \"b\", \"cores\": [0], \"gpus\": [0]}],"
    "\"tasks\": ["
    " {\"id\": 1, \"name\": \"p\", \"tags\": {}, \"state\": \"done\","
    "  \"submit\": 99, \"start\": 100, \"end\": 110, \"ranks\": 1,"
    "  \"cores_per_rank\": 1, \"gpus_per_rank\": 0, \"cpu_user\": 4,"
    "  \"cpu_sys\": 1, \"place\": [[1, 0, \"a\", [0], [], 100, 110]]},"
    " {\"id\": 2, \"name\": \"p\", \"tags\": {}, \"state\": \"failed\","
    "  \"reason\": \"exit code 3\", \"submit\": 99, \"start\": 100,"
    "  \"end\": 102, \"ranks\": 1, \"cores_per_rank\": 1,"
    "  \"gpus_per_rank\": 0, \"cpu_user\": null, \"cpu_sys\": null,"
    "  \"place\": [[1, 0, \"a\", [1], [], 100, 102]]},"
    " {\"id\": 3, \"name\": \"t\", \"tags\": {\"k\": \"v\"},"
    "  \"state\": \"done\", \"submit\": 100, \"start\": 100, \"end\": 110,"
    "  \"ranks\": 1, \"cores_per_rank\": 1, \"gpus_per_rank\": 1,"
    "  \"place\": [[1, 0, \"b\", [0], [0], 100, 110]]},"
    " {\"id\": 4, \"name\": \"</script>\", \"tags\": {}, \"state\": \"done\","
    "  \"submit\": 100, \"start\": 110, \"end\": 115, \"ranks\": 2,"
    "  \"cores_per_rank\": 1, \"gpus_per_rank\": 0,"
    "  \"place\": [[1, 0, \"a\", [0], [], 110, 115],"
    "             [1, 1, \"a\", [1], [], 110, 115]]},"
    " {\"id\": 5, \"name\": null, \"tags\": {}, \"state\": \"queued\","
    "  \"submit\": 112, \"start\": null, \"end\": null, \"ranks\": 1,"
    "  \"cores_per_rank\": 1, \"gpus_per_rank\": 0, \"place\": []}]}";

static json_t *find(json_t *arr, const char *key, const char *val)
{
    size_t i;
    json_t *e;

    json_array_foreach(arr, i, e)
        if (!strcmp(json_string_value(json_object_get(e, key)), val))
            return e;
    return NULL;
}

static void test_model(void)
{
    struct pl_report r;
    struct pl_error err;
    json_t *page = json_loads(page_text, 0, NULL), *s, *g, *heat;
    double t0, t1;

    pl_report_init(&r, NULL);
    r.now = 200;
    is(pl_report_add_page(&r, page, &err), 0, "the page is taken");
    is((int)r.nrows, 4, "4 rows: a's 2 cores, b's core and GPU");
    is((int)r.ncores * 10 + (int)r.ngpus, 31, "3 cores, 1 GPU");
    is((int)r.ntasks, 5, "5 tasks");
    is((int)r.nbars, 5, "5 bars: a rank each that ran");
    is((int)r.bars[2].nrows, 2, "the GPU task's bar holds 2 rows");
    ok(r.rows[r.bars[2].rows[1]].gpu, "... its second a GPU");
    is((int)r.ngroups, 4, "4 colour groups: p, t, </script>, (no name)");
    ok(pl_report_span(&r, &t0, &t1) && t0 == 99 && t1 == 115,
       "span: first submit (99) to last end (115)");

    s = pl_report_summary(&r);
    is((int)json_integer_value(json_object_get(s, "ranks_run")), 5,
       "summary: 5 ranks run");
    g = find(json_object_get(s, "by_name"), "group", "p");
    is((int)json_integer_value(json_object_get(g, "count")), 2,
       "by name: p has 2 tasks");
    ok(fabs(json_real_value(json_object_get(g, "mean_wall")) - 6) < 1e-9,
       "... mean wall 6 s");
    ok(fabs(json_real_value(json_object_get(g, "p95_wall")) - 10) < 1e-9,
       "... p95 wall 10 s");
    ok(fabs(json_real_value(json_object_get(g, "cpu_eff")) - 0.5) < 1e-9,
       "... CPU efficiency 50%% (5 s over 1 core x 10 s; task 2 unmeasured)");
    g = find(json_object_get(s, "by_name"), "group", "t");
    ok(json_is_null(json_object_get(g, "cpu_eff")),
       "t: no CPU time measured: efficiency null");
    g = find(json_object_get(s, "by_tag"), "group", "k=v");
    is((int)json_integer_value(json_object_get(g, "count")), 1,
       "by tag: k=v has 1 task");
    g = json_array_get(json_object_get(s, "failures"), 0);
    is_str(json_string_value(json_object_get(g, "reason")), "exit code 3",
           "failures: the reason");
    is((int)json_integer_value(json_array_get(json_object_get(g, "ids"), 0)),
       2, "... and the task");
    ok(json_real_value(json_object_get(json_array_get(
           json_object_get(s, "slowest"), 0), "wall")) == 10
       && json_array_size(json_object_get(s, "slowest")) == 4,
       "slowest: 10 s first, the 4 tasks that ended");
    json_decref(s);

    /* the heat of [100, 116) in 4 buckets of 4 s: a:0 busy 100-115 */
    heat = pl_report_heat(&r, 100, 4, 4);
    json_t *a0 = json_array_get(heat, 0), *a1 = json_array_get(heat, 1);
    is((int)json_integer_value(json_array_get(a0, 0)), 100,
       "heat: a:0 busy all of [100, 104)");
    is((int)json_integer_value(json_array_get(a0, 3)), 75,
       "... 3 of 4 s of [112, 116)");
    is((int)json_integer_value(json_array_get(a1, 0)), 50,
       "... a:1 2 of 4 s of [100, 104) (task 2)");
    is((int)json_integer_value(json_array_get(a1, 1)), 0,
       "... and idle in [104, 108)");
    json_decref(heat);

    /* the page data: no '<' inside the script element */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    is(pl_report_write_html(&r, f, "t <&> \"q\"", true, 10, &err), 0,
       "the page is written");
    fclose(f);
    char *data = strstr(buf, "id=\"report-data\">");
    char *end = data ? strstr(data, "</script>") : NULL;
    ok(data && end && !memchr(data + 17, '<', (size_t)(end - data - 17)),
       "its data has no '<' before its own end tag");
    ok(strstr(buf, "\\u003c/script\\u003e") != NULL,
       "... the name '</script>' written as \\u003c/script\\u003e");
    ok(strstr(buf, "<title>t &lt;&amp;&gt; &quot;q&quot;</title>") != NULL,
       "the title escaped as HTML text");
    free(buf);
    pl_report_fini(&r);
    json_decref(page);
}

static void test_bad_pages(void)
{
    static const char *const bad[] = {
        "{\"tasks\": 3}",
        "{\"tasks\": [{\"name\": \"x\"}]}",
        "{\"tasks\": [{\"id\": 1, \"state\": \"done\", \"submit\": 1,"
        " \"place\": [[1, 0]]}]}",
        "{\"tasks\": [{\"id\": 1, \"state\": \"done\", \"submit\": 1}]}",
        "{\"nodes\": [{\"name\": 1}], \"tasks\": []}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct pl_report r;
        struct pl_error err;
        json_t *p = json_loads(bad[i], 0, NULL);
        pl_report_init(&r, NULL);
        is(pl_report_add_page(&r, p, &err), -1, "refused: %s", bad[i]);
        pl_report_fini(&r);
        json_decref(p);
    }
}

int main(void)
{
    plan(42);
    test_pct_hist();
    test_model();
    test_bad_pages();
    return done_testing();
}
