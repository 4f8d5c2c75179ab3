/* tests/unit/test_client_output.c - the CLI's formatting and number parsing */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "client/cli.h"
#include "client/output.h"
#include "tests/unit/tap.h"

static void test_duration(void)
{
    char b[32];

    is_str(pl_out_duration(0.0123, b, sizeof(b)), "0.012s", "12 ms");
    is_str(pl_out_duration(1.23, b, sizeof(b)), "1.2s", "1.23 s");
    is_str(pl_out_duration(184, b, sizeof(b)), "3m04s", "184 s");
    is_str(pl_out_duration(1632, b, sizeof(b)), "27m12s", "27m12s");
    is_str(pl_out_duration(7500, b, sizeof(b)), "2h05m", "2h05m");
    is_str(pl_out_duration(3 * 86400 + 4 * 3600, b, sizeof(b)), "3d04h",
           "3d04h");
    is_str(pl_out_duration(-1, b, sizeof(b)), "-", "negative: -");
    is_str(pl_out_duration(NAN, b, sizeof(b)), "-", "NaN: -");
}

static void test_time_kib(void)
{
    char b[48];

    pl_out_time(1700000000.0999999, true, b, sizeof(b));
    ok(strlen(b) == 23 && b[10] == 'T' && !strcmp(b + 19, ".100"),
       "local ISO time with ms, rounded (%s)", b);
    pl_out_time(1700000000.9, false, b, sizeof(b));
    ok(strlen(b) == 19 && b[10] == 'T', "local ISO time (%s)", b);
    is_str(pl_out_time(0, false, b, sizeof(b)), "-", "no time: -");
    is_str(pl_out_kib(812, b, sizeof(b)), "812 KiB", "KiB");
    is_str(pl_out_kib(12800, b, sizeof(b)), "12.5 MiB", "MiB");
    is_str(pl_out_kib(3 * 1024 * 1024 / 2, b, sizeof(b)), "1.5 GiB", "GiB");
}

static void test_quote(void)
{
    json_t *argv = json_pack("[s, s, s, s, s]", "sh", "-c", "echo hi; exit 3",
                             "it's", "");
    char *s = pl_out_argv(argv);
    char *q;

    is_str(s, "sh -c 'echo hi; exit 3' 'it'\\''s' ''",
           "argv is shell-quoted");
    free(s);
    json_decref(argv);
    q = pl_out_shquote("/a/b c/pilotd");
    is_str(q, "'/a/b c/pilotd'", "a path with a blank is quoted");
    free(q);
    q = pl_out_shquote("/a/b/pilotd");
    is_str(q, "/a/b/pilotd", "a plain path is not");
    free(q);
}

static void test_json_access(void)
{
    json_t *o = json_pack("{s:i, s:f, s:n, s:[i,i,i], s:s}", "a", 3, "b", 2.5,
                          "c", "d", 1, 2, 3, "e", "x");
    char b[32];

    is(pl_out_jint(o, "a", -1), 3, "jint of an integer");
    is(pl_out_jint(o, "b", -1), 2, "jint of a real");
    is(pl_out_jint(o, "c", -1), -1, "jint of null: the default");
    is(pl_out_jint(o, "zz", -1), -1, "jint of nothing: the default");
    ok(pl_out_jreal(o, "b", 0) == 2.5, "jreal");
    ok(isnan(pl_out_jreal(o, "c", NAN)), "jreal of null: the default");
    is(pl_out_jcount(o, "d"), 3, "jcount of a list");
    is(pl_out_jcount(o, "a"), 3, "jcount of a number");
    is_str(pl_out_jstr(o, "e"), "x", "jstr");
    ok(pl_out_jstr(o, "a") == NULL, "jstr of a number: NULL");
    is_str(pl_out_intlist(json_object_get(o, "d"), b, sizeof(b)), "1,2,3",
           "intlist");
    is_str(pl_out_intlist(json_object_get(o, "c"), b, sizeof(b)), "-",
           "intlist of null");
    json_decref(o);

    /* a reply's number too large for an integer: converting it was
     * undefined (tests/fuzz/fuzz_reply.c); the default, or "-" */
    o = json_pack("{s:f, s:f, s:f}", "big", 1e300, "neg", -1e19, "edge",
                  9223372036854775808.0);
    is(pl_out_jint(o, "big", -1), -1, "jint of 1e300: the default");
    is(pl_out_jint(o, "neg", -1), -1, "jint of -1e19: the default");
    is(pl_out_jint(o, "edge", -1), -1, "jint of 2^63: the default");
    json_decref(o);
    is_str(pl_out_duration(1e300, b, sizeof(b)), "-", "duration of 1e300");
    is_str(pl_out_duration(INFINITY, b, sizeof(b)), "-", "duration of inf");
    is_str(pl_out_time(1e300, true, b, sizeof(b)), "-", "time of 1e300");
    is_str(pl_out_time(INFINITY, false, b, sizeof(b)), "-", "time of inf");
}

static void test_bar(void)
{
    char b[64];

    is_str(pl_out_bar(0.5, 10, b, sizeof(b)), "[#####.....]", "half a bar");
    is_str(pl_out_bar(2, 4, b, sizeof(b)), "[####]", "capped at full");
    is_str(pl_out_bar(NAN, 4, b, sizeof(b)), "[....]", "NaN: empty");
}

static void test_table(void)
{
    static const char *headers[] = { "ID", "NAME", "COMMAND" };
    const char *r1[] = { "1", NULL, "a command that is rather long indeed" };
    const char *r2[] = { "12", "hello", "short" };
    struct pl_out_table *t = pl_out_table_new(3, headers);
    char buf[512];
    size_t n;
    FILE *fp = tmpfile();

    ok(t && fp, "table and file");
    if (!t || !fp)
        return;
    ok(pl_out_table_add(t, r1) == 0 && pl_out_table_add(t, r2) == 0,
       "rows added");
    pl_out_table_print(t, fp, 30);
    rewind(fp);
    n = fread(buf, 1, sizeof(buf) - 1, fp);
    buf[n] = '\0';
    is_str(buf,
           "ID  NAME   COMMAND\n"
           "1   -      a command that i...\n"
           "12  hello  short\n",
           "columns padded, NULL as '-', the last cut to 30 columns");
    fclose(fp);
    pl_out_table_free(t);
}

static void test_parse(void)
{
    struct pl_error err;
    uint64_t v = 7;
    struct pl_sel_req sel;
    double s = -1;
    char *good[] = { (char *)"3", (char *)"14" };
    char *bad[] = { (char *)"3", (char *)"x" };
    char *elems[] = { (char *)"40.0", (char *)"9", (char *)"40.7" };
    char *badel[] = { (char *)"40.", (char *)".3", (char *)"0.3",
                      (char *)"4.x", (char *)"4.1.2", (char *)"4.-1" };

    ok(pl_parse_uint("--n", "12", 1, 100, &v, &err) == 0 && v == 12,
       "12 parses");
    ok(pl_parse_uint("--n", "0", 1, 100, &v, &err) < 0
           && strstr(err.text, "between 1 and 100"),
       "0 is out of range: %s", err.text);
    ok(pl_parse_uint("--n", "-1", 0, 100, &v, &err) < 0
           && strstr(err.text, "not a non-negative integer"),
       "-1 is refused: %s", err.text);
    ok(pl_parse_uint("--n", "4x", 1, 100, &v, &err) < 0
           && strstr(err.text, "'4x' is not a positive integer"),
       "4x is refused: %s", err.text);
    ok(pl_parse_uint("--n", "", 1, 100, &v, &err) < 0, "'' is refused");
    ok(pl_parse_secs("--t", "90", &s, &err) == 0 && s == 90, "90 s");
    ok(pl_parse_secs("--t", "1.5", &s, &err) == 0 && s == 1.5, "1.5 s");
    ok(pl_parse_secs("--t", "10m", &s, &err) == 0 && s == 600, "10m");
    ok(pl_parse_secs("--t", "2h", &s, &err) == 0 && s == 7200, "2h");
    ok(pl_parse_secs("--t", "2x", &s, &err) < 0, "2x is refused");
    ok(pl_parse_secs("--t", "-3", &s, &err) < 0, "-3 is refused");
    ok(pl_parse_secs("--t", "nan", &s, &err) < 0, "nan is refused");
    ok(pl_parse_id("0", &v, &err) < 0, "task id 0 is refused");
    ok(pl_parse_sel(2, good, &sel, &err) == 0 && sel.nids == 2
           && sel.ids[0] == 3 && sel.ids[1] == 14 && sel.nelems == 0,
       "ids 3 14");
    pl_sel_req_clear(&sel);
    ok(pl_parse_sel(2, bad, &sel, &err) < 0
           && strstr(err.text, "'x'"),
       "a bad id among good ones: %s", err.text);
    ok(pl_parse_sel(3, elems, &sel, &err) == 0 && sel.nids == 1
           && sel.nelems == 2 && sel.elems[0] == 40 && sel.elems[1] == 0
           && sel.elems[2] == 40 && sel.elems[3] == 7 && sel.ids[0] == 9,
       "40.0 9 40.7: one id, two elements");
    pl_sel_req_clear(&sel);
    for (size_t i = 0; i < sizeof(badel) / sizeof(badel[0]); i++) {
        char *one[] = { badel[i] };
        ok(pl_parse_sel(1, one, &sel, &err) < 0
               && strstr(err.text, "is not a task id"),
           "'%s' is refused: %s", badel[i], err.text);
    }
}

static void test_nodelist(void)
{
    char b[64], s[5];

    is_str(pl_out_nodelist("n1,n2", 20, b, sizeof(b)), "n1,n2",
           "nodelist that fits");
    is_str(pl_out_nodelist("n1,n2,n3,n4", 9, b, sizeof(b)), "n1,n2+2",
           "nodelist cut at a name, the rest counted");
    is_str(pl_out_nodelist("n1,n2,n3,n4", 10, b, sizeof(b)), "n1,n2,n3+1",
           "nodelist: as many names as fit with the count");
    is_str(pl_out_nodelist("node-0001,n2", 6, b, sizeof(b)), "node+1",
           "nodelist: a first name too long is cut");
    is_str(pl_out_nodelist("node-0001", 4, b, sizeof(b)), "node",
           "nodelist: one long name is cut");
    is_str(pl_out_nodelist("n1,n2,n3", 20, s, sizeof(s)), "n1+2",
           "nodelist fits the buffer");
    ok(pl_out_nodelist(NULL, 20, b, sizeof(b)) == NULL, "nodelist of NULL");
}

int main(void)
{
    plan(71);
    test_nodelist();
    test_duration();
    test_time_kib();
    test_quote();
    test_json_access();
    test_bar();
    test_table();
    test_parse();
    return done_testing();
}
