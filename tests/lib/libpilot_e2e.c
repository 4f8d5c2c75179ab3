/* tests/lib/libpilot_e2e.c - a C client of a running pilot, through
 * libpilot alone, as a program outside the project would use it
 *
 * Run by tests/e2e/t1150-libpilot.sh against a local pilot (the only
 * one running under $PILOT_HOME, whose id is argv[1]).  Prints one line
 * a check, "ok N - DESC" or "not ok N - DESC" (tests/unit/tap.h), and
 * "# " lines, with no plan; the script numbers them again.  Exits 0 if
 * every check passed.
 */
#include <errno.h>
#include <pthread.h>
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

/* pilot_call() with its reply parsed; NULL on failure (err says). */
static json_t *call(struct pilot *p, const char *op, const char *args,
                    struct pilot_error *err)
{
    char *reply = NULL;
    json_t *j = NULL;

    if (pilot_call(p, op, args, &reply, err) == 0)
        j = json_loads(reply, 0, NULL);
    pilot_free(reply);
    return j;
}

/* pilot_submit() of 'specs'; the ids as a new array, or NULL. */
static json_t *submit(struct pilot *p, const char *specs,
                      struct pilot_error *err)
{
    char *reply = NULL;
    json_t *j = NULL, *ids = NULL;

    if (pilot_submit(p, specs, &reply, err) == 0
        && (j = json_loads(reply, 0, NULL)))
        ids = json_incref(json_object_get(j, "ids"));
    json_decref(j);
    pilot_free(reply);
    return ids;
}

static json_int_t id_at(const json_t *ids, size_t i)
{
    return json_integer_value(json_array_get(ids, i));
}

/* Task 'id' once its state is final (done, failed, canceled, timeout),
 * or NULL after 'secs'. */
static json_t *wait_final(struct pilot *p, json_int_t id, double secs)
{
    static const char *const finals[] = { "done", "failed", "canceled",
                                          "timeout" };
    struct pilot_error err;
    double end = now() + secs;
    char args[64];

    snprintf(args, sizeof(args), "{\"id\": %lld}", (long long)id);
    while (now() < end) {
        json_t *t = call(p, "show", args, &err);
        const char *st = json_string_value(json_object_get(t, "state"));
        for (size_t i = 0; st && i < 4; i++)
            if (!strcmp(st, finals[i]))
                return t;
        json_decref(t);
        usleep(100 * 1000);
    }
    return NULL;
}

static const char *state_of(const json_t *t)
{
    const char *s = json_string_value(json_object_get(t, "state"));

    return s ? s : "?";
}

/* Submit from threads: 4 with a connection each, 4 on one shared. */
struct worker {
    struct pilot *p;
    int own;              /* open its own connection */
    json_t *ids;
    char error[300];
};

static void *submit_loop(void *arg)
{
    struct worker *w = arg;
    struct pilot_error err;
    struct pilot *p = w->own ? pilot_open(NULL, NULL, 0, &err) : w->p;

    if (!p) {
        snprintf(w->error, sizeof(w->error), "open: %s", err.text);
        return NULL;
    }
    w->ids = json_array();
    for (int i = 0; i < 25; i++) {
        json_t *ids = submit(p, "[{\"argv\": [\"true\"], \"name\": \"thr\"},"
                                "{\"argv\": [\"true\"], \"name\": \"thr\"}]",
                             &err);
        if (!ids) {
            snprintf(w->error, sizeof(w->error), "submit: %s", err.text);
            break;
        }
        json_array_extend(w->ids, ids);
        json_decref(ids);
    }
    if (w->own)
        pilot_close(p);
    return NULL;
}

static void test_threads(struct pilot *shared)
{
    struct worker w[8];
    pthread_t t[8];
    json_t *all = json_object();
    size_t n = 0;
    int errors = 0;

    for (int i = 0; i < 8; i++) {
        w[i] = (struct worker){ .p = shared, .own = i < 4 };
        pthread_create(&t[i], NULL, submit_loop, &w[i]);
    }
    for (int i = 0; i < 8; i++) {
        json_t *v;
        size_t k;
        pthread_join(t[i], NULL);
        if (w[i].error[0]) {
            printf("# thread %d: %s\n", i, w[i].error);
            errors++;
        }
        json_array_foreach(w[i].ids, k, v) {
            char key[32];
            snprintf(key, sizeof(key), "%lld",
                     (long long)json_integer_value(v));
            json_object_set(all, key, json_true());
            n++;
        }
        json_decref(w[i].ids);
    }
    ok(errors == 0 && n == 400 && json_object_size(all) == 400,
          "8 threads (4 connections of their own, 4 on one shared) "
          "submit 400 tasks: 400 distinct ids (%zu ids, %zu distinct)", n,
          json_object_size(all));
    json_decref(all);
}

int main(int argc, char **argv)
{
    struct pilot_error err;
    struct pilot *p;
    json_t *ids, *t, *j;
    char path[4096], args[256], line[256];
    FILE *fp;

    if (argc != 2) {
        fprintf(stderr, "usage: libpilot_e2e PILOT_ID\n");
        return 2;
    }
    ok(pilot_api_version() == PILOT_API_VERSION, "pilot_api_version() "
          "is the header's, %d", PILOT_API_VERSION);
    p = pilot_open(NULL, NULL, 0, &err);
    if (!ok(p != NULL, "pilot_open(NULL, ...) finds the one running "
               "pilot%s%s", p ? "" : ": ", p ? "" : err.text))
        return 1;
    ok(!strcmp(pilot_id(p), argv[1]), "it is %s (%s)", argv[1],
          pilot_id(p));
    ok(pilot_is_live(p) == 1, "it is live");

    /* three specs in one call: a failing task, one after it, an array */
    ids = submit(p, "[{\"argv\": [\"sh\", \"-c\", \"echo hi; exit 3\"], "
                    "  \"name\": \"c1\"},"
                    " {\"cmd\": \"echo two\", \"after\": [\"c1:any\"]},"
                    " {\"argv\": [\"echo\", \"{}\"], \"array\": \"0-4\"}]",
                 &err);
    if (!ok(json_array_size(ids) == 7, "pilot_submit of 3 specs: 7 ids "
               "(an array of 5)%s%s", ids ? "" : ": ", ids ? "" : err.text))
        return 1;
    t = wait_final(p, id_at(ids, 0), 30);
    ok(t && !strcmp(state_of(t), "failed")
              && json_integer_value(json_object_get(t, "exit_code")) == 3,
          "task c1 ends failed with exit code 3 (%s)", state_of(t));
    json_decref(t);
    t = wait_final(p, id_at(ids, 1), 30);
    ok(t && !strcmp(state_of(t), "done"), "the task after c1:any is done "
          "(%s)", state_of(t));
    json_decref(t);
    pilot_log_path(p, (uint64_t)id_at(ids, 0), 0, PILOT_STDOUT, path,
                   sizeof(path));
    line[0] = '\0';
    if ((fp = fopen(path, "r"))) {
        if (!fgets(line, sizeof(line), fp))
            line[0] = '\0';
        fclose(fp);
    }
    ok(!strcmp(line, "hi\n"), "pilot_log_path: c1's stdout holds 'hi' "
          "(%s)", path);
    snprintf(args, sizeof(args), "{\"ids\": [%lld]}",
             (long long)id_at(ids, 2));
    j = call(p, "list", args, &err);
    ok(json_array_size(j) == 5, "list {ids: [the array's id]}: its 5 "
          "elements");
    json_decref(j);
    snprintf(args, sizeof(args), "{\"id\": \"%lld.3\"}",
             (long long)id_at(ids, 2));
    t = call(p, "show", args, &err);
    ok(json_integer_value(json_object_get(t, "id")) == id_at(ids, 5),
          "show {id: \"ARRAY.3\"}: element 3");
    json_decref(t);
    json_decref(ids);

    /* cancel a running task */
    ids = submit(p, "[{\"argv\": [\"sleep\", \"300\"]}]", &err);
    snprintf(args, sizeof(args), "{\"ids\": [%lld]}",
             (long long)id_at(ids, 0));
    j = call(p, "cancel", args, &err);
    ok(json_integer_value(json_array_get(json_object_get(j, "canceled"),
                                            0)) == id_at(ids, 0),
          "cancel: the task is in 'canceled'%s%s", j ? "" : ": ",
          j ? "" : err.text);
    json_decref(j);
    t = wait_final(p, id_at(ids, 0), 30);
    ok(t && !strcmp(state_of(t), "canceled"), "... and ends canceled (%s)",
          state_of(t));
    json_decref(t);
    json_decref(ids);

    /* an array of 12,000: three requests, one array */
    ids = submit(p, "[{\"argv\": [\"sleep\", \"300\"], \"name\": \"block\"},"
                    " {\"argv\": [\"true\"], \"array\": \"0-11999\","
                    "  \"after\": \"block\"}]",
                 &err);
    ok(json_array_size(ids) == 12001
              && id_at(ids, 12000) - id_at(ids, 1) == 11999,
          "an array of 12,000 goes in slices: 12,000 ids in a row%s%s",
          ids ? "" : ": ", ids ? "" : err.text);
    snprintf(args, sizeof(args), "{\"ids\": [%lld]}",
             (long long)id_at(ids, 1));
    j = call(p, "counts", args, &err);
    ok(json_integer_value(json_object_get(j, "waiting")) == 12000,
          "counts of the array: 12,000 waiting");
    json_decref(j);
    snprintf(args, sizeof(args), "{\"ids\": [%lld]}",
             (long long)id_at(ids, 0));
    json_decref(call(p, "cancel", args, &err));
    json_decref(ids);

    j = call(p, "status", NULL, &err);
    ok(json_integer_value(json_object_get(j, "agents_up")) == 1
              && !strcmp(json_string_value(json_object_get(j, "pilot")),
                         argv[1]),
          "status: one agent up, pilot %s", argv[1]);
    json_decref(j);

    errno = 0;
    t = call(p, "show", "{\"id\": 999999}", &err);
    ok(!t && errno == ENOENT && err.errnum == ENOENT
              && strstr(err.text, "no task 999999"),
          "show of an unknown id: ENOENT, '%s'", err.text);

    test_threads(p);
    pilot_close(p);
    return done_testing();
}
