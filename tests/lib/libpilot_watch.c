/* tests/lib/libpilot_watch.c - libpilot's watch (pilot_watch_*) against
 * a running pilot, through libpilot alone
 *
 *   libpilot_watch PILOT_ID DIR      the checks below, on a local pilot
 *   libpilot_watch --down PILOT_ID   a watch of a pilot that is down
 *
 * Run by tests/e2e/t1170-libpilot-watch.sh.  Prints one line a check,
 * "ok N - DESC" or "not ok N - DESC" (tests/unit/tap.h), and "# "
 * lines, with no plan; the script numbers them again.  The first form
 * ends by killing the pilot's pilotd (SIGKILL) and starting it again
 * while a watch waits.  Exits 0 if every check passed.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "lib/pilot.h"
#include "tests/unit/tap.h"

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* pilot_submit_opts() of 'specs' into watch 'token' (NULL: none); the
 * ids as a new array, or NULL. */
static json_t *submit(struct pilot *p, const char *specs, const char *token,
                      struct pilot_error *err)
{
    char *reply = NULL, opts[128];
    json_t *j = NULL, *ids = NULL;

    snprintf(opts, sizeof(opts), "{\"watch\": \"%s\"}", token ? token : "");
    if (pilot_submit_opts(p, specs, token ? opts : NULL, &reply, err) == 0
        && (j = json_loads(reply, 0, NULL)))
        ids = json_incref(json_object_get(j, "ids"));
    json_decref(j);
    pilot_free(reply);
    return ids;
}

/* What a watch gave: its ends in the order given, checked as they come. */
struct got {
    json_t *ends;          /* every end, in the order given */
    int dup, order;        /* an id given twice; a seq not above the last */
    uint64_t last;
    uint64_t pending;      /* the last "pending" */
    int calls;
};

static void got_init(struct got *g)
{
    memset(g, 0, sizeof(*g));
    g->ends = json_array();
    g->pending = UINT64_MAX;
}

/* Take what pilot_watch_next(w, ms) gives into 'g': its rc. */
static int take(struct pilot_watch *w, int ms, struct got *g,
                struct pilot_error *err)
{
    char *out = NULL;
    int rc = pilot_watch_next(w, ms, &out, err);
    json_t *j, *e;
    size_t i;

    if (rc != 1)
        return rc;
    g->calls++;
    j = json_loads(out, 0, NULL);
    pilot_free(out);
    json_array_foreach(json_object_get(j, "ends"), i, e) {
        uint64_t seq = (uint64_t)json_integer_value(json_object_get(e, "seq"));
        json_t *id = json_object_get(e, "id"), *x;
        size_t k;
        json_array_foreach(g->ends, k, x)
            if (json_equal(json_object_get(x, "id"), id))
                g->dup++;
        if (seq <= g->last)
            g->order++;
        g->last = seq;
        json_array_append(g->ends, e);
    }
    if (json_is_integer(json_object_get(j, "pending")))
        g->pending = (uint64_t)json_integer_value(json_object_get(j,
                                                                  "pending"));
    if ((uint64_t)json_integer_value(json_object_get(j, "last_seq")) != g->last)
        g->order++;
    json_decref(j);
    return 1;
}

/* Take ends until 'n' came or 'secs' passed. */
static void take_n(struct pilot_watch *w, size_t n, double secs, struct got *g,
                   struct pilot_error *err)
{
    double end = now() + secs;

    while (json_array_size(g->ends) < n && now() < end)
        if (take(w, 500, g, err) < 0)
            printf("# pilot_watch_next: %s (going on)\n", err->text);
}

/* Whether the ends of 'g' are those of 'ids' (any order), all "done". */
static int same_ids(const struct got *g, const json_t *ids)
{
    size_t i, k;
    json_t *x, *e;

    if (json_array_size(g->ends) != json_array_size(ids))
        return 0;
    json_array_foreach(ids, i, x) {
        int found = 0;
        json_array_foreach(g->ends, k, e)
            found += json_equal(json_object_get(e, "id"), x)
                     && !strcmp(json_string_value(json_object_get(e, "state")),
                                "done");
        if (found != 1)
            return 0;
    }
    return 1;
}

/* A thread blocked in pilot_watch_next() until 'n' ends came. */
struct waiter {
    struct pilot_watch *w;
    size_t n;
    struct got g;
    struct pilot_error err;
    double blocked;        /* when it first blocked */
};

static void *waiter_main(void *arg)
{
    struct waiter *t = arg;
    double end = now() + 60;

    t->blocked = now();
    while (json_array_size(t->g.ends) < t->n && now() < end)
        if (take(t->w, -1, &t->g, &t->err) < 0)
            break;
    return NULL;
}

/* 1. a watch opened empty, tasks submitted into it from this thread
 * while another thread blocks in pilot_watch_next() */
static void test_threads(struct pilot *p)
{
    struct pilot_error err;
    struct waiter t = { .n = 10 };
    pthread_t th;
    json_t *all = json_array(), *ids;
    double slowest = 0;

    t.w = pilot_watch_open(p, "{}", &err);
    if (!ok(t.w != NULL, "pilot_watch_open(p, \"{}\"): an empty watch%s%s",
               t.w ? "" : ": ", t.w ? "" : err.text))
        return;
    ok(strlen(pilot_watch_token(t.w)) >= 16, "... its token: %s",
          pilot_watch_token(t.w));
    got_init(&t.g);
    pthread_create(&th, NULL, waiter_main, &t);
    usleep(200000);
    for (int i = 0; i < 5; i++) {
        double t0 = now();
        ids = submit(p, "[{\"argv\": [\"sleep\", \"0.3\"]},"
                        " {\"argv\": [\"true\"]}]",
                     pilot_watch_token(t.w), &err);
        if (now() - t0 > slowest)
            slowest = now() - t0;
        if (!ids) {
            printf("# submit: %s\n", err.text);
            break;
        }
        json_array_extend(all, ids);
        json_decref(ids);
        usleep(100000);
    }
    ok(slowest < 2.0, "5 submits with the watch's token while another "
          "thread blocks in pilot_watch_next(): none waited for it "
          "(slowest %.3f s)", slowest);
    pthread_join(th, NULL);
    ok(same_ids(&t.g, all), "... the waiting thread got the 10 ends, "
          "each once, done (%zu ends in %d calls)",
          json_array_size(t.g.ends), t.g.calls);
    ok(!t.g.dup && !t.g.order, "... in ascending seq, last_seq the last "
          "one's");
    ok(t.g.pending == 0, "... pending 0 with the last");
    ok(pilot_watch_last_seq(t.w) == t.g.last, "pilot_watch_last_seq() is "
          "the last end's seq (%llu)", (unsigned long long)t.g.last);
    json_decref(t.g.ends);
    json_decref(all);
    pilot_watch_close(t.w, 1);
}

struct closed {
    struct pilot_watch *w;
    int rc;
    struct pilot_error err;
    double back;           /* when pilot_watch_next() returned */
};

static void *closed_main(void *arg)
{
    struct closed *c = arg;
    char *ends = NULL;

    c->rc = pilot_watch_next(c->w, -1, &ends, &c->err);
    c->back = now();
    free(ends);
    return NULL;
}

/* 1b. pilot_watch_close() while another thread waits in
 * pilot_watch_next() (with no timeout): that call returns, ECANCELED,
 * and the close frees nothing it still uses (it crashed in libuv) */
static void test_close_while_waiting(struct pilot *p)
{
    struct pilot_error err;
    struct closed c = { .rc = 9 };
    pthread_t th;
    double t0;

    c.w = pilot_watch_open(p, "{}", &err);
    if (!ok(c.w != NULL, "pilot_watch_open(p, \"{}\")%s%s",
               c.w ? "" : ": ", c.w ? "" : err.text))
        return;
    pthread_create(&th, NULL, closed_main, &c);
    usleep(300000);
    t0 = now();
    pilot_watch_close(c.w, 1);
    pthread_join(th, NULL);
    ok(c.rc == -1 && c.err.errnum == ECANCELED && c.back - t0 < 1.0,
          "pilot_watch_close() while another thread waits in "
          "pilot_watch_next(w, -1): it returns -1, ECANCELED, in %.3f s "
          "(rc %d, %s)", c.back - t0, c.rc, c.rc < 0 ? c.err.text : "");
}

/* 2. a watch of ids; pilot_watch_add(); timeouts */
static void test_ids(struct pilot *p)
{
    struct pilot_error err;
    struct pilot_watch *w;
    struct got g;
    char args[256];
    json_t *a, *b;
    double t0;
    char *out = (char *)"x";
    int rc;

    a = submit(p, "[{\"argv\": [\"sleep\", \"1\"]},"
                  " {\"argv\": [\"sleep\", \"0.5\"], \"array\": \"0-2\"}]",
               NULL, &err);
    b = submit(p, "[{\"argv\": [\"sleep\", \"1.2\"]}]", NULL, &err);
    if (!a || !b) {
        ok(0, "submit: %s", err.text);
        return;
    }
    snprintf(args, sizeof(args), "{\"ids\": [%lld, \"%lld.1\"]}",
             (long long)json_integer_value(json_array_get(a, 0)),
             (long long)json_integer_value(json_array_get(a, 1)));
    w = pilot_watch_open(p, args, &err);
    if (!ok(w != NULL, "pilot_watch_open(p, %s)%s%s", args, w ? "" : ": ",
               w ? "" : err.text))
        return;
    snprintf(args, sizeof(args), "[%lld]",
             (long long)json_integer_value(json_array_get(b, 0)));
    memset(&err, 0, sizeof(err));
    ok(pilot_watch_add(w, args, &err) == 0, "pilot_watch_add(w, %s)%s%s",
          args, err.errnum ? ": " : "", err.text);
    t0 = now();
    rc = pilot_watch_next(w, 0, &out, &err);
    t0 = now() - t0;
    ok(rc == 0 && out == NULL && t0 < 0.1, "pilot_watch_next(w, 0) "
          "before any end: 0, *ends_json NULL, at once (%.3f s)", t0);
    got_init(&g);
    take_n(w, 3, 30, &g, &err);
    json_array_remove(a, 3); /* the array's elements 0 and 2 */
    json_array_remove(a, 1);
    json_array_append(a, json_array_get(b, 0));
    ok(same_ids(&g, a) && !g.dup && !g.order, "the ends of the task, "
          "element 1 of the array and the task added: once each, in seq "
          "order (%zu)", json_array_size(g.ends));
    t0 = now();
    rc = pilot_watch_next(w, 300, &out, &err);
    t0 = now() - t0;
    ok(rc == 0 && t0 >= 0.29 && t0 < 2, "nothing more: "
          "pilot_watch_next(w, 300) returns 0 after %.3f s", t0);
    json_decref(g.ends);
    json_decref(a);
    json_decref(b);
    pilot_watch_close(w, 1);
}

/* 3. a watch left (not unwatched), resumed with its token and 'after'
 * from a second struct pilot */
static void test_resume(struct pilot *p, const char *id)
{
    struct pilot_error err;
    struct pilot *p2;
    struct pilot_watch *w, *w2;
    struct got g, g2;
    char args[256], token[80];
    json_t *ids, *rest;
    uint64_t after;

    w = pilot_watch_open(p, NULL, &err);
    if (!w) {
        ok(0, "pilot_watch_open(p, NULL): %s", err.text);
        return;
    }
    snprintf(token, sizeof(token), "%s", pilot_watch_token(w));
    ids = submit(p, "[{\"argv\": [\"sh\", \"-c\", \"sleep 0.{}\"], "
                    "\"array\": \"1-6\"}]", token, &err);
    got_init(&g);
    take_n(w, 1, 30, &g, &err);
    after = pilot_watch_last_seq(w);
    ok(json_array_size(g.ends) >= 1 && json_array_size(g.ends) < 6
              && after == g.last,
          "a watch of 6 tasks: %zu ends taken, last seq %llu",
          json_array_size(g.ends), (unsigned long long)after);
    pilot_watch_close(w, 0);
    sleep(2); /* the others end meanwhile, with no client */
    if (!(p2 = pilot_open(id, NULL, 0, &err))) {
        ok(0, "pilot_open(%s): %s", id, err.text);
        return;
    }
    snprintf(args, sizeof(args), "{\"token\": \"%s\", \"after\": %llu}",
             token, (unsigned long long)after);
    w2 = pilot_watch_open(p2, args, &err);
    if (!ok(w2 != NULL, "a second struct pilot resumes the watch with "
               "its token and after%s%s", w2 ? "" : ": ",
               w2 ? "" : err.text)) {
        pilot_close(p2);
        return;
    }
    got_init(&g2);
    take_n(w2, 6 - json_array_size(g.ends), 30, &g2, &err);
    rest = json_array(); /* the ids not in g */
    for (size_t i = 0; i < json_array_size(ids); i++) {
        json_t *x = json_array_get(ids, i), *e;
        size_t k;
        int seen = 0;
        json_array_foreach(g.ends, k, e)
            seen |= json_equal(json_object_get(e, "id"), x);
        if (!seen)
            json_array_append(rest, x);
    }
    ok(same_ids(&g2, rest) && !g2.dup && !g2.order,
          "... it gets the %zu ends after %llu, once each, in seq order",
          json_array_size(rest), (unsigned long long)after);
    ok(json_integer_value(json_object_get(json_array_get(g2.ends, 0),
                                             "seq")) > (json_int_t)after,
          "... all of them after it");
    pilot_watch_close(w2, 1);
    /* dropped in pilotd: a resume without its tasks finds nothing */
    w2 = pilot_watch_open(p2, args, &err);
    ok(!w2 && err.errnum == ENOENT && strstr(err.text, "no watch"),
          "after pilot_watch_close(w, 1) the watch is gone: a resume gets "
          "ENOENT, '%s'", err.text);
    pilot_watch_close(w2, 1);
    json_decref(g.ends);
    json_decref(g2.ends);
    json_decref(ids);
    json_decref(rest);
    pilot_close(p2);
}

/* 4. what is refused, and why */
static void test_bad(struct pilot *p)
{
    static const struct { const char *args, *want; } bad[] = {
        { "{\"idz\": [1]}", "unknown field 'idz'" },
        { "[1, 2]", "must be a JSON object" },
        { "{\"ids\": [1]", "not JSON" },
        { "{\"ids\": [1], \"all\": true}", "'ids' or 'all', not both" },
        { "{\"after\": 3}", "give its 'token' too" },
        { "{\"token\": \"short\"}", "'token' must be a watch's token" },
        { "{\"ids\": [\"x.y\"]}", "'x.y' is not a task id" },
        { "{\"ids\": [999999]}", "!no task 999999" },
    };
    struct pilot_error err;
    struct pilot_watch *w;
    char *out = NULL;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&err, 0, sizeof(err));
        errno = 0;
        w = pilot_watch_open(p, bad[i].args, &err);
        /* "!": not EINVAL but ENOENT */
        int want = bad[i].want[0] == '!' ? ENOENT : EINVAL;
        ok(!w && errno == want && err.errnum == want
                  && strstr(err.text, bad[i].want + (want == ENOENT)),
              "pilot_watch_open(%s): %s, '%s'", bad[i].args,
              want == EINVAL ? "EINVAL" : "ENOENT", err.text);
        pilot_watch_close(w, 1);
    }
    errno = 0;
    ok(pilot_submit_opts(p, "[{\"argv\": [\"true\"]}]",
                            "{\"watch\": \"not a token\"}", &out, &err) < 0
              && errno == EINVAL && out == NULL
              && strstr(err.text, "'watch' must be"),
          "pilot_submit_opts with a bad watch token: EINVAL, '%s'",
          err.text);
    errno = 0;
    ok(pilot_submit_opts(p, "[{\"argv\": [\"true\"]}]",
                            "{\"watch\": \"no-such-watch-token-here\"}", &out,
                            &err) < 0
              && errno == ENOENT && strstr(err.text, "no watch"),
          "... with the token of no watch: ENOENT, '%s'", err.text);
    pilot_free(out);
    if ((w = pilot_watch_open(p, "{}", &err))) {
        ok(pilot_watch_add(w, "[]", &err) < 0 && err.errnum == EINVAL,
              "pilot_watch_add(w, \"[]\"): EINVAL, '%s'", err.text);
        ok(pilot_watch_add(w, "[999999]", &err) < 0
                  && err.errnum == ENOENT && strstr(err.text, "no task"),
              "pilot_watch_add of no such task: ENOENT, '%s'", err.text);
        pilot_watch_close(w, 1);
    }
}

/* The pid in DIR/endpoint ("pid N"), or 0. */
static long pilotd_pid(const char *dir)
{
    char path[4096], line[256];
    long pid = 0;
    FILE *f;

    snprintf(path, sizeof(path), "%s/endpoint", dir);
    if (!(f = fopen(path, "r")))
        return 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "pid %ld", &pid) == 1)
            break;
    fclose(f);
    return pid;
}

/* 5. pilotd killed (SIGKILL) and started again while a watch waits */
static void test_kill(struct pilot *p, const char *dir)
{
    struct pilot_error err;
    struct pilot_watch *w;
    struct got g;
    char cmd[4500];
    json_t *ids;
    long pid;
    double t0;

    if (!(w = pilot_watch_open(p, "{}", &err))) {
        ok(0, "pilot_watch_open: %s", err.text);
        return;
    }
    ids = submit(p, "[{\"argv\": [\"sh\", \"-c\", \"sleep $(( {} % 4 + 1 ))."
                    "{}\"], \"array\": \"0-7\"}]", pilot_watch_token(w), &err);
    if (!ids) {
        ok(0, "submit: %s", err.text);
        return;
    }
    got_init(&g);
    take(w, 300, &g, &err);
    pid = pilotd_pid(dir);
    ok(pid > 0 && kill((pid_t)pid, SIGKILL) == 0, "pilotd (%ld) killed "
          "with SIGKILL while a watch of 8 tasks waits", pid);
    t0 = now();
    while (kill((pid_t)pid, 0) == 0 && now() - t0 < 20)
        usleep(50000);
    snprintf(cmd, sizeof(cmd), "setsid '%s/pilotd' --dir '%s' --local "
             ">'%s/pilotd-restart.out' 2>&1 </dev/null &",
             getenv("PILOT_BIN") ? getenv("PILOT_BIN") : ".", dir, dir);
    ok(system(cmd) == 0, "pilotd started again");
    take_n(w, 8, 120, &g, &err);
    ok(same_ids(&g, ids), "the watch got the 8 ends across the restart "
          "(%zu)", json_array_size(g.ends));
    ok(!g.dup && !g.order, "... none twice, in ascending seq");
    json_decref(g.ends);
    json_decref(ids);
    pilot_watch_close(w, 1);
}

int main(int argc, char **argv)
{
    struct pilot_error err;
    struct pilot *p;

    if (argc == 3 && !strcmp(argv[1], "--down")) {
        struct pilot_watch *w;
        if (!(p = pilot_open(argv[2], NULL, 0, &err))) {
            ok(0, "pilot_open(%s) of a pilot that is down: %s", argv[2],
                  err.text);
            return 1;
        }
        errno = 0;
        w = pilot_watch_open(p, "{\"all\": true}", &err);
        ok(!w && errno == ENOTCONN && err.errnum == ENOTCONN
                  && strstr(err.text, "not running"),
              "a watch of a pilot that does not run: ENOTCONN, '%s'",
              err.text);
        pilot_watch_close(w, 1);
        pilot_close(p);
        return done_testing();
    }
    if (argc != 3) {
        fprintf(stderr, "usage: libpilot_watch PILOT_ID DIR | --down "
                        "PILOT_ID\n");
        return 2;
    }
    /* requests give up after 3 s: a pilotd killed shows sooner */
    if (!(p = pilot_open(argv[1], NULL, 3000, &err))) {
        ok(0, "pilot_open(%s): %s", argv[1], err.text);
        return 1;
    }
    test_threads(p);
    test_close_while_waiting(p);
    test_ids(p);
    test_resume(p, argv[1]);
    test_bad(p);
    test_kill(p, argv[2]);
    pilot_close(p);
    return done_testing();
}
