/* tests/unit/test_client_spec.c - the spec pilot submit builds: flags and
 * file entries give the same spec, each rule has its words */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "client/spec.h"
#include "client/spec_py.h"
#include "proto/strv.h"
#include "tests/unit/helpers.h"
#include "tests/unit/tap.h"

static char here[PATH_MAX]; /* the test's directory: relative cwds */

/* Whether two string vectors hold the same strings. */
static bool same_strv(char *const *a, char *const *b)
{
    size_t n = pl_strv_len(a);

    if (n != pl_strv_len(b))
        return false;
    for (size_t i = 0; i < n; i++)
        if (strcmp(a[i], b[i]))
            return false;
    return true;
}

static bool same_str(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

/* Whether 'a' and 'b' say the same; a diag line names the first field
 * that differs. */
static bool same_spec(const struct pl_spec *a, const struct pl_spec *b)
{
    const char *bad = NULL;

    if (!same_str(a->name, b->name))
        bad = "name";
    else if (!same_str(a->cwd, b->cwd))
        bad = "cwd";
    else if (!same_strv(a->argv, b->argv))
        bad = "argv";
    else if (!same_strv(a->env, b->env))
        bad = "env";
    else if (!same_strv(a->tags, b->tags))
        bad = "tags";
    else if (a->comm != b->comm || a->launcher != b->launcher)
        bad = "comm or launcher";
    else if (a->ranks != b->ranks || a->has_ranks != b->has_ranks
             || a->cpr != b->cpr || a->gpr != b->gpr || a->nodes != b->nodes
             || a->rpn != b->rpn)
        bad = "shape";
    else if (a->retries != b->retries || a->has_retries != b->has_retries
             || a->exclusive != b->exclusive || a->timeout != b->timeout
             || a->priority != b->priority || a->retry != b->retry)
        bad = "retries, exclusive, timeout, priority or retry";
    else if (a->array != b->array || a->astart != b->astart
             || a->aend != b->aend || a->astep != b->astep)
        bad = "array";
    else if (a->nafter != b->nafter)
        bad = "after";
    for (uint32_t i = 0; !bad && i < a->nafter; i++) {
        const struct pl_dep *x = &a->after[i], *y = &b->after[i];
        if (x->id != y->id || !same_str(x->name, y->name) || x->any != y->any
            || x->elem != y->elem || x->index != y->index)
            bad = "after";
    }
    if (bad)
        diag("the specs differ in %s", bad);
    return !bad;
}

/* Apply flags (NAME, VALUE pairs; VALUE NULL for --exclusive) to 'b'.
 * 0, or -1 with errp set by the flag that failed. */
static int flags(struct pl_cli_spec *b, const char *const *fv,
                 struct pl_error *errp)
{
    for (size_t i = 0; fv[i]; i += 2)
        if (pl_cli_spec_flag(b, fv[i], fv[i + 1], errp) < 0)
            return -1;
    return 0;
}

/* The entry 'text' (JSON) into 'b'.  0, or -1 with errp set. */
static int entry(struct pl_cli_spec *b, const char *text,
                 struct pl_error *errp)
{
    json_error_t je;
    json_t *j = json_loads(text, 0, &je);
    int rc;

    if (!j) {
        diag("bad test JSON %s: %s", text, je.text);
        return -1;
    }
    rc = pl_cli_spec_entry(b, j, here, errp);
    json_decref(j);
    return rc;
}

static void test_same(void)
{
    static const char *const fv[] = {
        "name", "train-{}", "ranks", "4", "cores-per-rank", "2",
        "gpus-per-rank", "1", "nodes", "2", "ranks-per-node", "2",
        "retries", "0", "timeout", "10m", "exclusive", NULL, "comm", "mpi",
        "launcher", "mpirun", "env", "A=1", "env", "B=x=y",
        "after", "3,prep:any", "after", "40.7:ok", "array", "0-9:3",
        "priority", "-5", "tag", "model=lstm", "tag", "run=2",
        "cwd", "sub/dir", NULL,
    };
    static char *argv[] = { (char *)"python3", (char *)"train.py",
                            (char *)"{}", NULL };
    struct pl_cli_spec f, e;
    struct pl_error err;
    struct pl_spec s;

    pl_cli_spec_init(&f);
    pl_cli_spec_init(&e);
    ok(flags(&f, fv, &err) == 0 && pl_cli_spec_counts(&f, &err) == 0
           && pl_cli_spec_command(&f, 3, argv, &err) == 0,
       "the flags build a spec");
    ok(entry(&e, "{\"name\": \"train-{}\", \"ranks\": 4, "
             "\"cores_per_rank\": 2, \"gpus_per_rank\": 1, \"nodes\": 2, "
             "\"ranks_per_node\": 2, \"retries\": 0, \"timeout\": \"10m\", "
             "\"exclusive\": true, \"comm\": \"mpi\", \"launcher\": "
             "\"mpirun\", \"env\": {\"A\": 1, \"B\": \"x=y\"}, \"after\": "
             "[3, \"prep:any\", \"40.7:ok\"], \"array\": [0, 9, 3], "
             "\"priority\": -5, \"tags\": [\"model=lstm\", \"run=2\"], "
             "\"cwd\": \"sub/dir\", \"argv\": [\"python3\", \"train.py\", "
             "\"{}\"]}", &err) == 0,
       "the same task as a file entry builds a spec");
    ok(same_spec(&f.spec, &e.spec), "... and both are the same spec");
    is(f.spec.nafter, 3, "--after twice: 3 dependencies");
    ok(f.spec.after[0].id == 3 && !f.spec.after[0].any
           && !strcmp(f.spec.after[1].name, "prep") && f.spec.after[1].any
           && f.spec.after[2].id == 40 && f.spec.after[2].elem
           && f.spec.after[2].index == 7,
       "... an id, a name with :any, an element with :ok");
    char cwd[PATH_MAX + 16];
    snprintf(cwd, sizeof(cwd), "%s/sub/dir", here);
    is_str(f.spec.cwd, cwd, "a relative --cwd is in this directory");
    ok(f.spec.timeout == 600 && f.spec.array && f.spec.astart == 0
           && f.spec.aend == 9 && f.spec.astep == 3,
       "timeout 10m, array 0-9:3");
    ok(pl_spec_check(&f.spec, &err) == 0 && pl_spec_check(&e.spec, &err) == 0,
       "both pass pl_spec_check()");
    ok(same_spec(&f.spec, &e.spec) && f.spec.ranks == 4
           && f.spec.has_retries && f.spec.retries == 0,
       "... and are still the same, settled");
    pl_cli_spec_take(&f, &s);
    ok(s.argv && !f.spec.argv && f.spec.ranks == 1 && f.nenv == 0,
       "take: the spec is handed over, the builder is empty again");
    pl_spec_clear(&s);
    pl_cli_spec_clear(&e);

    /* the defaults, from both: nothing but a command */
    static char *one[] = { (char *)"true", NULL };
    pl_cli_spec_init(&f);
    pl_cli_spec_init(&e);
    ok(pl_cli_spec_command(&f, 1, one, &err) == 0
           && entry(&e, "{\"cmd\": \"true\"}", &err) == 0
           && !strcmp(e.spec.argv[0], "/bin/sh")
           && !strcmp(e.spec.argv[1], "-c") && !strcmp(e.spec.argv[2], "true")
           && !e.spec.argv[3],
       "cmd is a shell line: /bin/sh -c LINE");
    ok(!strcmp(f.spec.cwd, here) && !strcmp(e.spec.cwd, here)
           && !f.spec.has_ranks && !e.spec.has_ranks && f.spec.cpr == 1
           && e.spec.cpr == 1 && !f.spec.env && !e.spec.tags,
       "no cwd means this directory; the rest are the defaults");
    pl_cli_spec_clear(&f);
    pl_cli_spec_clear(&e);
}

/* pl_cli_spec_flag(NAME, VALUE) fails with 'want' as its text. */
static void flag_fails(const char *name, const char *value,
                       const char *want)
{
    struct pl_cli_spec b;
    struct pl_error err = { "" };

    pl_cli_spec_init(&b);
    ok(pl_cli_spec_flag(&b, name, value, &err) < 0
           && !strcmp(err.text, want),
       "--%s %s: %s", name, value ? value : "", err.text);
    if (strcmp(err.text, want))
        diag("want: %s", want);
    pl_cli_spec_clear(&b);
}

static void test_flag_rules(void)
{
    char name[300], *s;

    flag_fails("ranks", "0", "--ranks: '0' is not between 1 and 65536");
    flag_fails("ranks", "abc", "--ranks: 'abc' is not a positive integer");
    flag_fails("cores-per-rank", "4097",
               "--cores-per-rank: '4097' is not between 1 and 4096");
    flag_fails("gpus-per-rank", "x",
               "--gpus-per-rank: 'x' is not a non-negative integer");
    flag_fails("nodes", "65537", "--nodes: '65537' is not between 1 and "
               "65536");
    flag_fails("ranks-per-node", "0", "--ranks-per-node: '0' is not between "
               "1 and 4096");
    flag_fails("retries", "101", "--retries: '101' is not between 0 and 100");
    flag_fails("retry-failed", "0", "--retry-failed: '0' is not between 1 "
               "and 9223372036854775807");
    flag_fails("timeout", "soon", "--timeout: 'soon' is not a duration "
               "(seconds, or a number with s, m, h or d)");
    flag_fails("comm", "nccl", "--comm: 'nccl' is not none, torch or mpi");
    flag_fails("launcher", "x", "--launcher: 'x' is not srun or mpirun");
    flag_fails("cwd", "", "--cwd: empty directory");
    flag_fails("env", "X", "--env: 'X' is not KEY=VALUE");
    flag_fails("env", "=1", "--env: '=1' is not KEY=VALUE");
    flag_fails("env", "X=\xff", "--env: 'X=\xff' is not valid UTF-8");
    flag_fails("priority", "1000001", "--priority: '1000001' is not an "
               "integer in -1000000..1000000");
    flag_fails("priority", "1x", "--priority: '1x' is not an integer in "
               "-1000000..1000000");
    flag_fails("tag", "bad key=1", "--tag: 'bad key=1' is not KEY=VALUE "
               "(KEY: 1-64 letters, digits, '_', '.', '-'; VALUE: at most "
               "256 bytes)");
    flag_fails("tag", "k", "--tag: 'k' is not KEY=VALUE (KEY: 1-64 letters, "
               "digits, '_', '.', '-'; VALUE: at most 256 bytes)");
    flag_fails("tag", "k=\xc3", "--tag: 'k=\xc3' is not valid UTF-8");
    memset(name, 'n', 257);
    name[257] = '\0';
    flag_fails("name", name, "--name: longer than 256 bytes");
    name[256] = '\0';
    struct pl_cli_spec b;
    struct pl_error err;
    pl_cli_spec_init(&b);
    ok(pl_cli_spec_flag(&b, "name", name, &err) == 0
           && pl_cli_spec_flag(&b, "name", "last", &err) == 0
           && !strcmp(b.spec.name, "last"),
       "a name of 256 bytes is taken; the last --name wins");

    /* the counts: one of each limit */
    for (int i = 0; i < 32; i++) {
        char t[16];
        snprintf(t, sizeof(t), "k%d=v", i);
        pl_cli_spec_flag(&b, "tag", t, &err);
    }
    ok(b.ntags == 32 && pl_cli_spec_flag(&b, "tag", "k=v", &err) < 0
           && !strcmp(err.text, "--tag: more than 32"),
       "a 33rd --tag: %s", err.text);
    for (int i = 0; i < 4096; i++)
        pl_cli_spec_flag(&b, "env", "X=1", &err);
    ok(b.nenv == 4096 && !b.spec.env[4096]
           && pl_cli_spec_flag(&b, "env", "X=1", &err) < 0
           && !strcmp(err.text, "--env: more than 4096 variables"),
       "a 4097th --env: %s", err.text);
    if (!(s = malloc(10000 * 3)))
        return;
    s[0] = '\0';
    for (int i = 0; i < 10000; i++)
        strcat(s, i ? ",a" : "a");
    ok(pl_cli_spec_flag(&b, "after", s, &err) == 0 && b.spec.nafter == 10000
           && pl_cli_spec_flag(&b, "after", "b", &err) < 0
           && !strcmp(err.text, "--after: more than 10000 tasks"),
       "--after of 10,000 tasks, then one more: %s", err.text);
    free(s);
    pl_cli_spec_clear(&b);
}

static void test_after(void)
{
    struct pl_cli_spec b;
    struct pl_error err;

    flag_fails("after", "", "--after: no task given");
    flag_fails("after", ",", "--after: ',': an empty entry");
    flag_fails("after", "1,,2", "--after: '1,,2': an empty entry");
    flag_fails("after", ":any", "--after: ':any': an entry without a task");
    flag_fails("after", "0", "--after: '0' is not a task id");
    flag_fails("after", "99999999999999999999999",
               "--after: '99999999999999999999999' is not a task id");
    flag_fails("after", "0.3", "--after: '0.3' is not an array element "
               "(ID.N)");
    flag_fails("after", "3.4294967296", "--after: '3.4294967296' is not an "
               "array element (ID.N)");
    flag_fails("after", "n\xff", "--after: 'n\xff' is not UTF-8");
    char big[400];
    memset(big, 'a', 300);
    big[300] = '\0';
    snprintf(big + 300, sizeof(big) - 300, ",b");
    char want[450];
    snprintf(want, sizeof(want), "--after: '%s': an entry is too long", big);
    want[sizeof(struct pl_error) - 1] = '\0';
    flag_fails("after", big, want);

    pl_cli_spec_init(&b);
    ok(pl_cli_spec_flag(&b, "after", "3.x,1:maybe,7:any,a:b:ok", &err) == 0
           && b.spec.nafter == 4 && !strcmp(b.spec.after[0].name, "3.x")
           && !strcmp(b.spec.after[1].name, "1:maybe")
           && b.spec.after[2].id == 7 && b.spec.after[2].any
           && !strcmp(b.spec.after[3].name, "a:b") && !b.spec.after[3].any,
       "what is not ID or ID.N is a name; only the last :ok or :any counts");
    ok(pl_cli_spec_flag(&b, "after", "", &err) == 0,
       "an empty --after after others adds nothing and is no error");
    pl_cli_spec_clear(&b);
}

static void test_array(void)
{
    struct pl_cli_spec b;
    struct pl_error err;

    flag_fails("array", "5-1", "--array: 5-1 ends before it starts");
    flag_fails("array", "0-9:0", "--array: the step must be at least 1");
    flag_fails("array", "a", "--array: 'a' is not A-B or A-B:STEP");
    flag_fails("array", "1-", "--array: '1-' is not A-B or A-B:STEP");
    flag_fails("array", "1-2:", "--array: '1-2:' is not A-B or A-B:STEP");
    flag_fails("array", "-1-2", "--array: '-1-2' is not A-B or A-B:STEP");
    flag_fails("array", "0-4294967296", "--array: indexes go up to "
               "4294967295");
    flag_fails("array", "0-1000000", "--array: 1000001 tasks; at most "
               "1000000");
    pl_cli_spec_init(&b);
    ok(pl_cli_spec_flag(&b, "array", "0-999999", &err) == 0
           && pl_cli_spec_flag(&b, "array", "7-7", &err) == 0 && b.spec.array
           && b.spec.astart == 7 && b.spec.aend == 7 && b.spec.astep == 1,
       "an array of 1,000,000; the last --array wins (7-7, step 1)");
    ok(pl_cli_spec_flag(&b, "array", "4294967290-4294967295:5", &err) == 0
           && pl_spec_count(&b.spec) == 2,
       "up to index 4294967295: 2 elements by 5");
    pl_cli_spec_clear(&b);
}

static void test_counts(void)
{
    static const struct {
        const char *const fv[8];
        const char *want; /* NULL: accepted */
    } cases[] = {
        { { "nodes", "2", "ranks-per-node", "3" }, NULL },
        { { "nodes", "2", "ranks", "4" }, NULL },
        { { "nodes", "2", "ranks-per-node", "2", "ranks", "5" },
          "--ranks 5 does not match --nodes 2 x --ranks-per-node 2" },
        { { "nodes", "3", "ranks", "2" },
          "--ranks 2 is fewer than --nodes 3 (each node needs a rank)" },
        { { "nodes", "65536", "ranks-per-node", "2" },
          "--nodes 65536 x --ranks-per-node 2 is more than 65536 ranks" },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct pl_cli_spec b;
        struct pl_error err = { "" };
        pl_cli_spec_init(&b);
        int rc = flags(&b, cases[i].fv, &err) < 0
                     ? -2
                     : pl_cli_spec_counts(&b, &err);
        if (cases[i].want)
            ok(rc == -1 && !strcmp(err.text, cases[i].want), "counts: %s",
               err.text);
        else
            ok(rc == 0, "counts: --%s %s --%s %s agree", cases[i].fv[0],
               cases[i].fv[1], cases[i].fv[2], cases[i].fv[3]);
        pl_cli_spec_clear(&b);
    }
}

static void test_command(void)
{
    static char *bad[] = { (char *)"echo", (char *)"\xc3\x28", NULL };
    static char *cmd[] = { (char *)"true", NULL };
    struct pl_cli_spec b;
    struct pl_error err;
    char *longdir = malloc(5000);

    pl_cli_spec_init(&b);
    ok(pl_cli_spec_command(&b, 2, bad, &err) < 0
           && !strcmp(err.text, "argument 1 of the command is not valid "
                      "UTF-8"),
       "%s", err.text);
    pl_cli_spec_clear(&b);
    pl_cli_spec_init(&b);
    ok(pl_cli_spec_flag(&b, "cwd", "/abs/dir", &err) == 0
           && pl_cli_spec_command(&b, 1, cmd, &err) == 0
           && !strcmp(b.spec.cwd, "/abs/dir"),
       "an absolute --cwd is taken as it is");
    pl_cli_spec_clear(&b);
    if (!longdir)
        return;
    memset(longdir, 'd', 4999);
    longdir[0] = '/';
    longdir[4999] = '\0';
    pl_cli_spec_init(&b);
    ok(pl_cli_spec_flag(&b, "cwd", longdir, &err) == 0
           && pl_cli_spec_command(&b, 1, cmd, &err) < 0
           && !strcmp(err.text, "--cwd: path too long"),
       "a --cwd of 4999 bytes: %s", err.text);
    pl_cli_spec_clear(&b);
    free(longdir);
}

/* The entry 'text' is refused with 'want'. */
static void entry_fails(const char *text, const char *want)
{
    struct pl_cli_spec b;
    struct pl_error err = { "" };

    pl_cli_spec_init(&b);
    ok(entry(&b, text, &err) < 0 && !strcmp(err.text, want), "%s: %s", text,
       err.text);
    if (strcmp(err.text, want))
        diag("want: %s", want);
    pl_cli_spec_clear(&b);
}

static void test_entry_rules(void)
{
    struct pl_cli_spec b;
    struct pl_error err;

    entry_fails("[1]", "not a JSON object");
    entry_fails("{\"name\": \"x\"}", "no command: give argv (a list) or cmd "
                "(a shell line)");
    entry_fails("{\"argv\": [\"a\"], \"cmd\": \"b\"}", "argv and cmd: give "
                "one of them");
    entry_fails("{\"cmd\": \"x\", \"frob\": 1}", "unknown field 'frob'");
    entry_fails("{\"cmd\": \"x\", \"retry_failed\": 4}", "unknown field "
                "'retry_failed'");
    entry_fails("{\"argv\": []}", "field 'argv' has the wrong type or value");
    entry_fails("{\"argv\": [\"a\", 1]}", "field 'argv' has the wrong type or "
                "value");
    entry_fails("{\"cmd\": 3}", "field 'cmd' has the wrong type or value");
    entry_fails("{\"cmd\": \"x\", \"ranks\": \"x\"}", "field 'ranks' has the "
                "wrong type or value");
    entry_fails("{\"cmd\": \"x\", \"gpus_per_rank\": -1}", "field "
                "'gpus_per_rank' has the wrong type or value");
    entry_fails("{\"cmd\": \"x\", \"nodes\": 1.5}", "field 'nodes' has the "
                "wrong type or value");
    entry_fails("{\"cmd\": \"x\", \"name\": 3}", "field 'name' has the wrong "
                "type or value");
    entry_fails("{\"cmd\": \"x\", \"cwd\": \"\"}", "field 'cwd' has the "
                "wrong type or value");
    entry_fails("{\"cmd\": \"x\", \"exclusive\": 1}", "field 'exclusive' has "
                "the wrong type or value");
    entry_fails("{\"cmd\": \"x\", \"priority\": 1000001}", "field 'priority' "
                "has the wrong type or value");
    entry_fails("{\"cmd\": \"x\", \"timeout\": -1}", "field 'timeout' has "
                "the wrong type or value");
    entry_fails("{\"cmd\": \"x\", \"timeout\": \"soon\"}", "field 'timeout' "
                "has the wrong type or value");
    entry_fails("{\"cmd\": \"x\", \"comm\": \"nccl\"}", "unknown comm 'nccl' "
                "(none, torch or mpi)");
    entry_fails("{\"cmd\": \"x\", \"launcher\": \"pbs\"}", "unknown launcher "
                "'pbs' (srun or mpirun)");
    entry_fails("{\"cmd\": \"x\", \"env\": {\"\": \"1\"}}", "field 'env' has "
                "the wrong type or value");
    entry_fails("{\"cmd\": \"x\", \"env\": [\"X\"]}", "field 'env' has the "
                "wrong type or value");
    entry_fails("{\"cmd\": \"x\", \"env\": {\"X\": [1]}}", "field 'env' has "
                "the wrong type or value");
    entry_fails("{\"cmd\": \"x\", \"tags\": {\"a b\": \"1\"}}", "field 'tags' "
                "has the wrong type or value");
    entry_fails("{\"cmd\": \"x\", \"tags\": [\"a=1\", \"b\"]}", "field 'tags' "
                "has the wrong type or value");
    entry_fails("{\"cmd\": \"x\", \"after\": [0]}", "field 'after' has the "
                "wrong type or value");
    entry_fails("{\"cmd\": \"x\", \"after\": true}", "field 'after' has the "
                "wrong type or value");
    entry_fails("{\"cmd\": \"x\", \"after\": \",\"}", "--after: ',': an "
                "empty entry");
    entry_fails("{\"cmd\": \"x\", \"array\": [0, 10]}", "field 'array' has "
                "the wrong type or value");
    entry_fails("{\"cmd\": \"x\", \"array\": [-1, 10, 1]}", "--array: "
                "'-1-10:1' is not A-B or A-B:STEP");
    entry_fails("{\"cmd\": \"x\", \"array\": \"5-1\"}", "--array: 5-1 ends "
                "before it starts");
    /* in the entry's order: the first bad field is the one named */
    entry_fails("{\"ranks\": \"x\", \"name\": 3, \"cmd\": \"x\"}", "field "
                "'ranks' has the wrong type or value");

    /* 33 tags in one entry */
    json_t *j = json_pack("{s:s, s:{}}", "cmd", "x", "tags");
    for (int i = 0; i < 33; i++) {
        char k[16];
        snprintf(k, sizeof(k), "k%d", i);
        json_object_set_new(json_object_get(j, "tags"), k, json_string("v"));
    }
    pl_cli_spec_init(&b);
    ok(pl_cli_spec_entry(&b, j, here, &err) < 0
           && !strcmp(err.text, "field 'tags' has the wrong type or value"),
       "33 tags: %s", err.text);
    pl_cli_spec_clear(&b);
    json_decref(j);

    /* numbers as values; an integer range is pl_spec_check()'s */
    pl_cli_spec_init(&b);
    ok(entry(&b, "{\"cmd\": \"x\", \"env\": {\"N\": 3, \"R\": 0.25}, "
             "\"tags\": {\"epochs\": 3}, \"ranks\": 70000, \"after\": [], "
             "\"timeout\": 1.5, \"cwd\": \"/abs\"}", &err) == 0
           && !strcmp(b.spec.env[0], "N=3") && !strcmp(b.spec.env[1], "R=0.25")
           && !strcmp(b.spec.tags[0], "epochs=3") && b.spec.ranks == 70000
           && b.spec.nafter == 0 && b.spec.timeout == 1.5
           && !strcmp(b.spec.cwd, "/abs"),
       "env and tags of numbers, after [], 70000 ranks (not refused here)");
    ok(pl_spec_check(&b.spec, &err) < 0
           && !strcmp(err.text, "at most 65536 ranks, 65536 nodes and 4096 "
                      "ranks per node"),
       "... pl_spec_check() refuses them: %s", err.text);
    pl_cli_spec_clear(&b);
}

/* What the CLI no longer leaves to pilotd: pl_spec_check() on flags. */
static void test_checked(void)
{
    static const struct {
        const char *const fv[6];
        const char *want;
    } cases[] = {
        { { "tag", "k=v", "tag", "k=w" }, "tag 'k' is given twice" },
        { { "tag", "k=a\tb" }, "tag 'k': the value has a control character" },
        { { "timeout", "200d" }, "timeout: at most 10000000 s (115 days)" },
        { { "name", "\xff" }, "the name is not UTF-8" },
    };
    static char *cmd[] = { (char *)"true", NULL };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct pl_cli_spec b;
        struct pl_error err = { "" };
        pl_cli_spec_init(&b);
        ok(flags(&b, cases[i].fv, &err) == 0
               && pl_cli_spec_command(&b, 1, cmd, &err) == 0
               && pl_spec_check(&b.spec, &err) < 0
               && !strcmp(err.text, cases[i].want),
           "checked here, as pilotd does: %s", err.text);
        pl_cli_spec_clear(&b);
    }
}

/* --py-call and --input: a Python call, its pickle inline or staged
 * under the pilot directory's inputs/, too large refused. */
static void test_pycall(const char *dir)
{
    struct pl_cli_spec b;
    struct pl_error e = { "" };
    char *words[] = { (char *)"1", (char *)"2" };
    char path[PATH_MAX + 32];
    FILE *fp;

    pl_cli_spec_init(&b);
    ok(pl_cli_spec_py(&b, "py-call", "mod:add", &e) == 0
           && pl_cli_spec_py(&b, "py-prelude", "import os", &e) == 0
           && pl_cli_spec_command(&b, 2, words, &e) == 0
           && b.spec.fn == PL_FN_PYCALL && !strcmp(b.spec.argv[0], "mod:add")
           && !strcmp(b.spec.argv[2], "2")
           && !strcmp(b.spec.py_prelude, "import os")
           && pl_spec_check(&b.spec, &e) == 0,
       "--py-call mod:add --py-prelude ... -- 1 2 (%s)", e.text);
    pl_cli_spec_clear(&b);
    snprintf(path, sizeof(path), "%s/small.pkl", dir);
    if ((fp = fopen(path, "w"))) {
        fputs("pickled", fp);
        fclose(fp);
    }
    pl_cli_spec_init(&b);
    ok(pl_cli_spec_py_input(&b, path, dir, &e) == 0 && b.spec.ninput == 7
           && !memcmp(b.spec.input, "pickled", 7) && !b.spec.input_file,
       "--input of 7 bytes: inline (%s)", e.text);
    pl_cli_spec_clear(&b);
    snprintf(path, sizeof(path), "%s/mid.pkl", dir);
    if (truncate(path, 0) < 0 && (fp = fopen(path, "w")))
        fclose(fp);
    ok(truncate(path, PL_SPEC_MAX_INPUT + 1) == 0, "a pickle of 256 KiB + 1");
    pl_cli_spec_init(&b);
    struct stat st;
    ok(pl_cli_spec_py_input(&b, path, dir, &e) == 0 && !b.spec.input
           && b.spec.input_file
           && !strncmp(b.spec.input_file, dir, strlen(dir))
           && strstr(b.spec.input_file, "/inputs/")
           && stat(b.spec.input_file, &st) == 0
           && st.st_size == PL_SPEC_MAX_INPUT + 1
           && (st.st_mode & 0777) == 0600,
       "--input over 256 KiB: copied under inputs/ (0600) (%s)", e.text);
    pl_cli_spec_clear(&b);
    ok(truncate(path, (off_t)PL_SPEC_MAX_INPUT_FILE + 1) == 0,
       "a pickle of 256 MiB + 1 (sparse)");
    pl_cli_spec_init(&b);
    errno = 0;
    ok(pl_cli_spec_py_input(&b, path, dir, &e) < 0 && errno == E2BIG
           && strstr(e.text, "(256 MiB)"),
       "--input over 256 MiB: refused (%s)", e.text);
    pl_cli_spec_clear(&b);
}

/* A task file's (and pilot_submit()'s) Python call: py_call, input in
 * base64, input_file read here, refs waited for; a large input staged
 * under inputs/ by the --input code; the rules between the keys. */
static void test_pycall_entry(const char *dir)
{
    struct pl_cli_spec b;
    struct pl_error e = { "" };
    struct pl_spec s;
    char text[PATH_MAX + 16];

    pl_cli_spec_init(&b);
    ok(entry(&b, "{\"py_call\": \"mod:add\", \"argv\": [\"1\", \"2\"], "
                 "\"python\": \"/usr/bin/python3\"}", &e) == 0
           && b.spec.fn == PL_FN_PYCALL && !strcmp(b.spec.argv[0], "mod:add")
           && !strcmp(b.spec.argv[2], "2") && pl_strv_len(b.spec.argv) == 3
           && !strcmp(b.spec.python, "/usr/bin/python3")
           && pl_spec_check(&b.spec, &e) == 0,
       "entry: py_call with argv its string arguments (%s)", e.text);
    pl_cli_spec_clear(&b);
    /* a function of no arguments, as pilot.Client.submit([], ...) and
     * --py-call MOD:FN with nothing after it say it */
    pl_cli_spec_init(&b);
    ok(entry(&b, "{\"argv\": [], \"py_call\": \"mod:noop\"}", &e) == 0
           && b.spec.fn == PL_FN_PYCALL && pl_strv_len(b.spec.argv) == 1
           && !strcmp(b.spec.argv[0], "mod:noop")
           && pl_spec_check(&b.spec, &e) == 0,
       "entry: py_call with argv [], no arguments (%s)", e.text);
    pl_cli_spec_clear(&b);
    entry_fails("{\"argv\": []}", "field 'argv' has the wrong type or "
                "value");
    entry_fails("{\"argv\": [], \"input\": \"gAVLBS4=\"}", "field 'argv' "
                "has the wrong type or value");
    pl_cli_spec_init(&b);
    ok(entry(&b, "{\"input\": \"gAVLBS4=\", \"refs\": [7, 9], "
                 "\"after\": [\"9:ok\", 3]}", &e) == 0
           && b.spec.fn == PL_FN_PYCALL && b.spec.ninput == 5
           && !memcmp(b.spec.input, "\x80\x05K\x05.", 5)
           && !strcmp(b.spec.argv[0], "input") && b.spec.nrefs == 2
           && b.spec.nafter == 3 && b.spec.after[2].id == 7
           && !b.spec.after[2].any && pl_spec_check(&b.spec, &e) == 0,
       "entry: input in base64, its label 'input', a ref not in after "
       "added (:ok) (%s)", e.text);
    pl_cli_spec_clear(&b);
    snprintf(text, sizeof(text), "%s/call.pkl", dir);
    FILE *fp = fopen(text, "w");
    if (fp) {
        fputs("pickled", fp);
        fclose(fp);
    }
    pl_cli_spec_init(&b);
    ok(entry(&b, "{\"input_file\": \"call.pkl\", \"name\": \"c\"}", &e)
           == 0 && b.spec.ninput == 7 && !memcmp(b.spec.input, "pickled", 7)
           && !strcmp(b.spec.argv[0], "call.pkl"),
       "entry: input_file read here (relative), its name the label (%s)",
       e.text);
    pl_cli_spec_clear(&b);
    /* 256 KiB + 1 in base64: kept whole, then staged as --input's is */
    size_t n = PL_SPEC_MAX_INPUT + 1;
    unsigned char *raw = calloc(1, n);
    char *b64 = pl_b64_encode(raw, n), *js = malloc(strlen(b64) + 32);
    snprintf(js, strlen(b64) + 32, "{\"input\": \"%s\"}", b64);
    pl_cli_spec_init(&b);
    ok(entry(&b, js, &e) == 0 && b.spec.ninput == n, "entry: an input of "
       "256 KiB + 1 in base64 read whole (%s)", e.text);
    pl_cli_spec_take(&b, &s);
    errno = 0;
    ok(pl_cli_spec_py_stage(&s, NULL, &e) < 0 && errno == E2BIG,
       "... without a pilot directory: refused (%s)", e.text);
    struct stat st;
    ok(pl_cli_spec_py_stage(&s, dir, &e) == 0 && !s.input && s.input_file
           && strstr(s.input_file, "/inputs/")
           && stat(s.input_file, &st) == 0 && (size_t)st.st_size == n
           && pl_spec_check(&s, &e) == 0,
       "... staged under inputs/, named in input_file (%s)", e.text);
    pl_spec_clear(&s);
    free(raw);
    free(b64);
    free(js);
    entry_fails("{\"input\": \"gAV!\"}", "field 'input': want the pickled "
                "call in base64 (A-Z a-z 0-9 + /, '=' padded, no line "
                "breaks)");
    entry_fails("{\"input\": \"\"}", "field 'input': empty");
    entry_fails("{\"input\": \"gAVLBS4=\", \"py_call\": \"m:f\"}",
                "py_call and input: give one of them (the pickled call "
                "holds its function)");
    entry_fails("{\"input\": \"gAVLBS4=\", \"input_file\": \"call.pkl\"}",
                "input and input_file: give one of them");
    entry_fails("{\"argv\": [\"x\"], \"refs\": [1]}", "refs: only a Python "
                "call (py_call, input or input_file) receives other calls' "
                "values");
    entry_fails("{\"input\": \"gAVLBS4=\", \"refs\": [0]}",
                "field 'refs': want a list of task ids (Python calls)");
    entry_fails("{\"argv\": [\"x\"], \"python\": \"python3\"}",
                "py_prelude and python go with py_call, input or input_file");
    entry_fails("{\"input\": \"gAVLBS4=\", \"pool\": \"p\"}",
                "a Python call (py_call, input, input_file) runs in a warm "
                "worker of its agent: no pool, fn or py");
}

int main(void)
{
    char tmp[64];

    plan(128);
    if (!t_tmpdir("client-spec", tmp, sizeof(tmp)) || chdir(tmp) < 0
        || !getcwd(here, sizeof(here)))
        return 1;
    test_same();
    test_flag_rules();
    test_after();
    test_array();
    test_counts();
    test_command();
    test_entry_rules();
    test_checked();
    test_pycall(here);
    test_pycall_entry(here);
    if (chdir("/") == 0)
        t_rmtree(tmp);
    return done_testing();
}
