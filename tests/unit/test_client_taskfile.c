/* tests/unit/test_client_taskfile.c - pilot submit --file's readers: JSONL
 * and YAML, line numbers, the order "after" names give, cycles, faults */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/taskfile.h"
#include "proto/strv.h"
#include "tests/unit/helpers.h"
#include "tests/unit/tap.h"

static char dir[64];           /* the test's temporary directory */

/* Read 'text' as a task file (YAML if 'yaml').  0 or -1, as
 * pl_taskfile_read(). */
static int read_text(const char *text, bool yaml, struct pl_taskfile *tf,
                     size_t *line, struct pl_error *errp)
{
    char path[128];
    FILE *fp;
    int rc;

    snprintf(path, sizeof(path), "%s/tasks.%s", dir, yaml ? "yaml" : "jsonl");
    if (!(fp = fopen(path, "w")) || fputs(text, fp) < 0 || fclose(fp) < 0) {
        diag("cannot write %s", path);
        return -1;
    }
    if (!(fp = fopen(path, "r")))
        return -1;
    rc = pl_taskfile_read(fp, yaml, "/here", tf, line, errp);
    fclose(fp);
    return rc;
}

/* 'text' is refused at line 'want_line' with 'want', and nothing is
 * returned. */
static void fails(const char *what, const char *text, bool yaml,
                  size_t want_line, const char *want)
{
    struct pl_taskfile tf = { .n = 99 };
    struct pl_error err = { "" };
    size_t line = 99;

    ok(read_text(text, yaml, &tf, &line, &err) < 0 && line == want_line
           && !strcmp(err.text, want) && tf.n == 0 && !tf.specs && !tf.lines,
       "%s: line %zu: %s", what, line, err.text);
    if (strcmp(err.text, want) || line != want_line)
        diag("want: line %zu: %s", want_line, want);
}

/* The names of tf's specs, in order, as "a b c". */
static const char *names(const struct pl_taskfile *tf)
{
    static char buf[256];
    size_t off = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < tf->n && off < sizeof(buf); i++)
        off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s%s",
                                i ? " " : "",
                                tf->specs[i].name ? tf->specs[i].name : "-");
    return buf;
}

static void test_jsonl(void)
{
    struct pl_taskfile tf;
    struct pl_error err;
    size_t line;

    ok(read_text("# a comment\n\n  \t\n"
                 "{\"name\": \"a\", \"cmd\": \"echo 1\"}\n"
                 "   # another\n"
                 "{\"argv\": [\"b\", \"c d\"], \"cwd\": \"sub\"}\r\n",
                 false, &tf, &line, &err) == 0,
       "JSONL with comments and blank lines");
    is(tf.n, 2, "... 2 tasks");
    ok(tf.lines && tf.lines[0] == 4 && tf.lines[1] == 6,
       "... on lines 4 and 6");
    ok(tf.n == 2 && !strcmp(tf.specs[0].argv[2], "echo 1")
           && !strcmp(tf.specs[0].cwd, "/here")
           && !strcmp(tf.specs[1].argv[1], "c d")
           && !strcmp(tf.specs[1].cwd, "/here/sub"),
       "... their commands, cwds in the directory given");
    pl_taskfile_clear(&tf);
    ok(tf.n == 0 && !tf.specs, "clear empties it");

    fails("a bad line", "{\"cmd\": \"true\"}\n{\"cmd\": \"true\"}\n"
          "{\"cmd\": \"true\", \"ranks\": \"x\"}\n", false, 3,
          "field 'ranks' has the wrong type or value");
    fails("not JSON", "{\"cmd\": \"x\"}\n{\"cmd\": \"true\"\n", false, 2,
          "not JSON: '}' expected near end of file");
    fails("a string", "\"x\"\n", false, 1,
          "not JSON: '[' or '{' expected near '\"x\"'");
    fails("an array", "[1, 2]\n", false, 1, "not a JSON object");
    fails("nothing", "# nothing\n\n", false, 0, "no tasks in it");
    fails("an empty file", "", false, 0, "no tasks in it");
}

static void test_order(void)
{
    struct pl_taskfile tf;
    struct pl_error err;
    size_t line;

    ok(read_text("{\"name\": \"c\", \"cmd\": \"x\", \"after\": [\"b\", "
                 "\"a\"]}\n"
                 "{\"name\": \"b\", \"cmd\": \"x\", \"after\": \"a\"}\n"
                 "{\"name\": \"a\", \"cmd\": \"x\"}\n"
                 "{\"name\": \"d\", \"cmd\": \"x\", \"after\": \"c:any,7\"}\n"
                 "{\"name\": \"a\", \"cmd\": \"the last a\"}\n",
                 false, &tf, &line, &err) == 0,
       "a file whose tasks name later ones");
    is_str(names(&tf), "a a b c d", "... in the order of their dependencies");
    ok(tf.n == 5 && tf.lines[0] == 3 && tf.lines[1] == 5
           && tf.lines[2] == 2 && tf.lines[3] == 1 && tf.lines[4] == 4,
       "... each with its line");
    is_str(tf.specs[1].argv[2], "the last a",
           "... a name means its last task");
    pl_taskfile_clear(&tf);

    ok(read_text("{\"name\": \"x\", \"cmd\": \"x\", \"after\": \"nosuch\"}\n"
                 "{\"name\": \"y\", \"cmd\": \"x\", \"after\": \"x\"}\n",
                 false, &tf, &line, &err) == 0
           && !strcmp(names(&tf), "x y"),
       "names the file does not have, and backward ones: the file's order");
    pl_taskfile_clear(&tf);

    fails("a task after itself", "{\"cmd\": \"x\"}\n"
          "{\"name\": \"a\", \"cmd\": \"x\", \"after\": \"a\"}\n", false, 2,
          "it waits for itself ('a')");
    fails("a cycle", "{\"name\": \"a\", \"cmd\": \"x\", \"after\": \"b\"}\n"
          "{\"name\": \"b\", \"cmd\": \"x\", \"after\": \"a\"}\n", false, 1,
          "its \"after\" is part of a cycle");
    fails("behind a cycle", "{\"cmd\": \"x\"}\n"
          "{\"name\": \"z\", \"cmd\": \"x\", \"after\": \"c\"}\n"
          "{\"name\": \"c\", \"cmd\": \"x\", \"after\": \"d\"}\n"
          "{\"name\": \"d\", \"cmd\": \"x\", \"after\": \"e\"}\n"
          "{\"name\": \"e\", \"cmd\": \"x\", \"after\": \"c\"}\n", false, 2,
          "its \"after\" is part of a cycle");
}

/* The order the CLI had before, as it computed it: sweeps over the
 * file, each taking in order every task whose dependencies are taken.
 * 'dep[i*k..]' are task i's dependencies (-1: none), k of them. */
static void old_order(size_t n, const int *dep, size_t k, size_t *out)
{
    bool *taken = calloc(n, sizeof(*taken));
    size_t done = 0;

    for (bool moved = true; moved && done < n;) {
        moved = false;
        for (size_t i = 0; i < n; i++) {
            bool ready = !taken[i];
            for (size_t d = 0; ready && d < k; d++)
                ready = dep[i * k + d] < 0 || taken[dep[i * k + d]];
            if (!ready)
                continue;
            taken[i] = true;
            out[done++] = i;
            moved = true;
        }
    }
    free(taken);
}

/* Random graphs without cycles (each task names up to 3 others that
 * come before it in a hidden order): the same order as before. */
static void test_order_random(void)
{
    enum { N = 400, K = 3, ROUNDS = 20 };
    int *dep = malloc(N * K * sizeof(*dep));
    size_t *rank = malloc(N * sizeof(*rank)), *want = malloc(N * sizeof(*want));
    char *text = malloc(N * 120);
    int same = 0;

    srand(7);
    for (int round = 0; dep && rank && want && text && round < ROUNDS;
         round++) {
        struct pl_taskfile tf;
        struct pl_error err;
        size_t line, off = 0;
        bool eq;
        for (size_t i = 0; i < N; i++)
            rank[i] = i;
        for (size_t i = N - 1; i > 0; i--) {
            size_t j = (size_t)rand() % (i + 1), t = rank[i];
            rank[i] = rank[j];
            rank[j] = t;
        }
        for (size_t i = 0; i < N; i++) {
            off += (size_t)sprintf(text + off, "{\"name\": \"t%zu\", \"cmd\": "
                                   "\"x\", \"after\": [", i);
            for (size_t d = 0; d < K; d++) {
                size_t j = (size_t)rand() % N;
                dep[i * K + d] = rank[j] < rank[i] && rand() % 2 ? (int)j : -1;
                if (dep[i * K + d] >= 0)
                    off += (size_t)sprintf(text + off, "%s\"t%zu\"",
                                           text[off - 1] == '[' ? "" : ", ",
                                           j);
            }
            off += (size_t)sprintf(text + off, "]}\n");
        }
        old_order(N, dep, K, want);
        if (read_text(text, false, &tf, &line, &err) < 0) {
            diag("round %d: line %zu: %s", round, line, err.text);
            continue;
        }
        eq = tf.n == N;
        for (size_t i = 0; eq && i < N; i++)
            eq = tf.lines[i] == want[i] + 1
                 && atoi(tf.specs[i].name + 1) == (int)want[i];
        same += eq;
        pl_taskfile_clear(&tf);
    }
    is(same, ROUNDS, "%d random files in the order they always had", ROUNDS);
    free(dep);
    free(rank);
    free(want);
    free(text);
}

static void test_yaml(void)
{
    struct pl_taskfile tf;
    struct pl_error err;
    size_t line;

    ok(read_text("# a pipeline\n"
                 "tasks:\n"
                 "  - name: ytrain\n"
                 "    cmd: cat a\n"
                 "    after: [yprep]\n"
                 "    tags: {model: mlp, epochs: 3}\n"
                 "    priority: 2\n"
                 "  - name: yprep\n"
                 "    argv: [true, 3, \"x y\"]\n"
                 "    env: {X: 42}\n"
                 "    timeout: 10m\n"
                 "  - {name: null, cmd: x, ranks: 2, exclusive: true}\n",
                 true, &tf, &line, &err) == 0,
       "YAML: tasks: [...]");
    /* the first sweep takes yprep and null, the second ytrain */
    is_str(names(&tf), "yprep null ytrain",
           "... in the order of their dependencies; name null stays text");
    ok(tf.n == 3 && tf.lines[0] == 8 && tf.lines[1] == 12
           && tf.lines[2] == 3,
       "... each with the line it starts on");
    ok(tf.n == 3 && !strcmp(tf.specs[0].argv[0], "true")
           && !strcmp(tf.specs[0].argv[1], "3")
           && !strcmp(tf.specs[0].env[0], "X=42")
           && tf.specs[0].timeout == 600
           && !strcmp(tf.specs[2].tags[1], "epochs=3")
           && tf.specs[2].priority == 2 && tf.specs[1].ranks == 2
           && tf.specs[1].exclusive,
       "... text fields stay text, numbers and booleans are read as such");
    pl_taskfile_clear(&tf);
    ok(read_text("- cmd: a\n- cmd: b\n", true, &tf, &line, &err) == 0
           && tf.n == 2 && tf.lines[1] == 2,
       "YAML: a plain list");
    pl_taskfile_clear(&tf);

    fails("a bad YAML entry", "- name: ok1\n  cmd: true\n- name: bad\n"
          "  cmd: true\n  ranks: many\n", true, 3,
          "field 'ranks' has the wrong type or value");
    fails("not YAML", "- name: a\n  cmd: [unclosed\n", true, 3,
          "not YAML: did not find expected ',' or ']' while parsing a flow "
          "sequence");
    fails("not a list", "foo: 1\n", true, 1,
          "want a list of tasks (or tasks: [...])");
    fails("an empty YAML file", "", true, 0, "no tasks in it");
    fails("an empty list", "[]\n", true, 0, "no tasks in it");
    fails("a scalar entry", "- 3\n", true, 1, "not a JSON object");
    fails("a key twice", "- name: a\n  cmd: x\n  name: b\n", true, 3,
          "'name' is given twice");
    fails("a YAML cycle", "- {name: a, cmd: x, after: b}\n"
          "- {name: b, cmd: x, after: a}\n", true, 1,
          "its \"after\" is part of a cycle");
    char deep[200];
    int k = snprintf(deep, sizeof(deep), "- cmd: x\n  argv: ");
    for (int i = 0; i < 70; i++)
        deep[k++] = '[';
    for (int i = 0; i < 70; i++)
        deep[k++] = ']';
    snprintf(deep + k, sizeof(deep) - (size_t)k, "\n");
    fails("an entry nested too deep", deep, true, 2, "nested deeper than 64");
    /* aliases of aliases: 10^9 values from 400 bytes, stopped after
     * about 100,000, not 20 million (12 s, 2 GiB: fuzz_taskfile) */
    char bomb[1024];
    k = snprintf(bomb, sizeof(bomb), "- cmd: x\n  tags: {k: &a0 [x,x,x,x,x,"
                 "x,x,x,x,x]}\n");
    for (int l = 1; l < 9; l++)
        k += snprintf(bomb + k, sizeof(bomb) - (size_t)k, "- cmd: x\n  argv: "
                      "&a%d [*a%d,*a%d,*a%d,*a%d,*a%d,*a%d,*a%d,*a%d,*a%d,"
                      "*a%d]\n", l, l - 1, l - 1, l - 1, l - 1, l - 1, l - 1,
                      l - 1, l - 1, l - 1, l - 1);
    struct pl_taskfile tf2;
    ok(read_text(bomb, true, &tf2, &line, &err) < 0 && tf2.n == 0
           && strstr(err.text, "aliases that expand too far"),
       "an alias bomb: %s", err.text);
    /* every entry is converted before any is looked at */
    fails("a bad field before a bad document",
          "- cmd: x\n  ranks: many\n- name: a\n  a: b\n  a: c\n", true, 5,
          "'a' is given twice");
}

/* A directory opens but cannot be read: the reader says so, line 0, and
 * ferror() tells the caller. */
static void test_unreadable(void)
{
    struct pl_taskfile tf;
    struct pl_error err;
    size_t line = 9;
    FILE *fp = fopen(dir, "r");

    ok(fp && pl_taskfile_read(fp, false, "/", &tf, &line, &err) < 0
           && line == 0 && ferror(fp) && !strcmp(err.text, "Is a directory")
           && tf.n == 0,
       "a directory: %s", err.text);
    if (fp)
        fclose(fp);
    ok(pl_taskfile_is_yaml("a.yaml") && pl_taskfile_is_yaml("b.yml")
           && !pl_taskfile_is_yaml("c.jsonl") && !pl_taskfile_is_yaml(".yml")
           && !pl_taskfile_is_yaml("yaml"),
       "YAML by the suffix");
}

int main(void)
{
    plan(38);
    if (!t_tmpdir("client-taskfile", dir, sizeof(dir)))
        return 1;
    test_jsonl();
    test_order();
    test_order_random();
    test_yaml();
    test_unreadable();
    t_rmtree(dir);
    return done_testing();
}
