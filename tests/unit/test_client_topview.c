/* tests/unit/test_client_topview.c - pilot top's frame from a status */
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include <jansson.h>

#include "client/topview.h"
#include "tests/unit/tap.h"

/* A status with two nodes: n2 busy, cordoned, vetted; n1 running a task
 * whose name holds escape sequences; n3 lost. */
static json_t *status(void)
{
    json_t *s = json_pack(
        "{s:s, s:s, s:s, s:s, s:I, s:f, "
        "s:{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}, "
        "s:{s:I, s:I}, s:{s:I, s:I}, s:[]}",
        "pilot", "p7", "mode", "slurm", "state", "running", "host", "n1",
        "job", (json_int_t)42, "walltime_left", 1632.0, "tasks", "waiting",
        (json_int_t)1, "queued", (json_int_t)20, "assigned", (json_int_t)0,
        "running", (json_int_t)5, "done", (json_int_t)100, "failed",
        (json_int_t)2, "canceled", (json_int_t)1, "timeout", (json_int_t)0,
        "total", (json_int_t)129, "cores", "busy", (json_int_t)7, "total",
        (json_int_t)12, "gpus", "busy", (json_int_t)1, "total",
        (json_int_t)4, "pools");
    json_t *nodes = json_pack(
        "[{s:s, s:s, s:[i,i,i,i], s:[s,s], s:I, s:I, s:I, s:n, "
        "  s:[{s:I, s:s}], s:I},"
        " {s:s, s:s, s:[i,i,i,i], s:[s,s], s:I, s:I, s:I, s:s, "
        "  s:[{s:I, s:n, s:s}, {s:I, s:s}], s:I, "
        "  s:{s:s, s:s, s:f}},"
        " {s:s, s:s, s:[i,i,i,i], s:[], s:I, s:I, s:I, s:n, s:[], s:I}]",
        "name", "n1", "state", "up", "cores", 0, 1, 2, 3, "gpus", "0", "1",
        "cores_busy", (json_int_t)1, "gpus_busy", (json_int_t)0, "running",
        (json_int_t)1, "cordon", "tasks", "id", (json_int_t)12, "name",
        "ev\033[2J\033]0;x\007il\nx", "tasks_more", (json_int_t)0,
        "name", "n2", "state", "up", "cores", 0, 1, 2, 3, "gpus", "0", "1",
        "cores_busy", (json_int_t)4, "gpus_busy", (json_int_t)1, "running",
        (json_int_t)4, "cordon", "check gpu_mem: 3.1 GiB free",
        "tasks", "id", (json_int_t)13, "name", "cmd", "/bin/sleep", "id",
        (json_int_t)14, "name", "train", "tasks_more", (json_int_t)2,
        "vet", "state", "failed", "check", "gpu_mem", "figure", 3.1,
        "name", "n3", "state", "lost", "cores", 0, 1, 2, 3, "gpus",
        "cores_busy", (json_int_t)2, "gpus_busy", (json_int_t)0, "running",
        (json_int_t)0, "cordon", "tasks", "tasks_more", (json_int_t)0);

    if (!s || !nodes) {
        diag("cannot build the status");
        exit(1);
    }
    json_object_set_new(s, "nodes", nodes);
    return s;
}

/* The frame as a string (owned by 'v'). */
static const char *draw(struct pl_topview *v, const json_t *s,
                        const char *err)
{
    if (pl_topview_draw(v, s, err) < 0) {
        diag("draw failed");
        exit(1);
    }
    v->buf[v->len] = '\0';
    return v->buf;
}

/* The first node row's name (the line after "NODE "). */
static void first_node(const char *frame, char *name, size_t len)
{
    const char *p = strstr(frame, "NODE ");

    name[0] = '\0';
    if (p && (p = strchr(p, '\n')))
        sscanf(p + 1, "%63s", name);
    (void)len;
}

/* Whether every ESC in 'f' starts one of top's own codes. */
static bool only_own_codes(const char *f)
{
    static const char *own[] = { "\033[H", "\033[K", "\033[J", "\033[7m",
                                 "\033[1m", "\033[0m" };

    for (const char *p = strchr(f, '\033'); p; p = strchr(p + 1, '\033')) {
        bool known = false;
        for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
            known |= !strncmp(p, own[i], strlen(own[i]));
        if (!known)
            return false;
    }
    return true;
}

/* The widest line of 'f' in columns (our codes take none) and the
 * number of lines; a C0 control but ESC, CR and LF counts as bad. */
static void measure(const char *f, int *widest, int *lines, bool *bad)
{
    int w = 0;

    *widest = *lines = 0;
    *bad = false;
    for (const char *p = f; *p; p++) {
        if (*p == '\033') {
            p++;
            if (*p == '[')
                while (p[1] && !((p[1] >= 'A' && p[1] <= 'Z')
                                 || (p[1] >= 'a' && p[1] <= 'z')))
                    p++;
            p++;
            continue;
        }
        if (*p == '\n') {
            (*lines)++;
            w = 0;
            continue;
        }
        if (*p == '\r')
            continue;
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *bad = true;
        /* a terminal's columns: two for a wide character */
        wchar_t wc;
        mbstate_t st;
        memset(&st, 0, sizeof(st));
        size_t n = mbrtowc(&wc, p, MB_LEN_MAX, &st);
        if (n > 0 && n <= MB_LEN_MAX) {
            w += wcwidth(wc) > 0 ? wcwidth(wc) : 1;
            p += n - 1;
        }
        else
            w += ((unsigned char)*p & 0xC0) != 0x80;
        if (w > *widest)
            *widest = w;
    }
}

int main(void)
{
    json_t *s = status();
    struct pl_topview v = { .interval = 1, .start_rate = NAN,
                            .end_rate = NAN };
    const char *f;
    char name[64];
    int widest, lines;
    bool bad;

    plan(20);
    setlocale(LC_CTYPE, "C.UTF-8"); /* as cmd_top.c */

    /* a snapshot: plain lines */
    f = draw(&v, s, NULL);
    ok(!strchr(f, '\033') && !strchr(f, '\r'),
       "snapshot: no terminal code, no escape character");
    ok(strstr(f, "pilot p7 (slurm job 42 on n1) running, walltime left "
                 "27m12s") != NULL,
       "the pilot's line, with the walltime left");
    ok(strstr(f, "tasks: 1 waiting, 20 queued, 0 assigned, 5 running, 100 "
                 "done, 2 failed, 1 canceled, 0 timeout") != NULL,
       "the tasks by state");
    ok(strstr(f, "nodes: 2 up, 1 lost, 1 cordoned   cores: 7/12 busy   "
                 "gpus: 1/4 busy") != NULL,
       "the nodes up, lost, cordoned; cores and GPUs busy");
    ok(strstr(f, "rate: - started/s, - ended/s") != NULL,
       "no rate from one status");
    ok(strstr(f, "12:ev\\x1b[2J\\x1b]0;x\\x07il x") != NULL,
       "a task's name: its escapes shown escaped, its newline a space");
    ok(strstr(f, "n2   cordoned [####################]   4/4   "
                 "[#####.....]   1/2   failed gpu_mem 3.1") != NULL,
       "n2: cordoned, bars of 4/4 cores and 1/2 GPUs, its vetting");
    ok(strstr(f, "13:sleep 14:train +2 more") != NULL,
       "n2's tasks: the command's name for one without a name; 2 more");
    ok(strstr(f, "n3   lost") != NULL, "n3: lost");
    first_node(f, name, sizeof(name));
    is_str(name, "n1", "sorted by name: n1 first");
    v.sort = PL_TOP_SORT_BUSY;
    first_node(draw(&v, s, NULL), name, sizeof(name));
    is_str(name, "n2", "sorted by busy: n2 first (4 cores, 1 GPU)");
    v.sort = PL_TOP_SORT_TASKS;
    json_object_set_new(json_array_get(json_object_get(s, "nodes"), 2),
                        "running", json_integer(9));
    first_node(draw(&v, s, NULL), name, sizeof(name));
    is_str(name, "n3", "sorted by tasks: n3 first (9 running)");

    /* cordoned, not vetted: the cordon's reason in the VET column */
    json_object_del(json_array_get(json_object_get(s, "nodes"), 1), "vet");
    f = draw(&v, s, NULL);
    ok(strstr(f, "check gpu_mem: 3.1 GiB free") != NULL,
       "a cordon's reason when there is no vetting");

    /* rates: from the change of the counts */
    pl_topview_rates(&v, s, 100.0);
    json_t *t = json_object_get(s, "tasks");
    json_object_set_new(t, "done", json_integer(110));
    json_object_set_new(t, "queued", json_integer(8));
    pl_topview_rates(&v, s, 102.0);
    ok(v.start_rate == 6 && v.end_rate == 5,
       "rates: 12 left the queue, 10 ended in 2 s (%g, %g)", v.start_rate,
       v.end_rate);

    /* live, on a small screen */
    v.live = true;
    v.rows = 9;
    v.cols = 50;
    v.sort = PL_TOP_SORT_NAME;
    f = draw(&v, s, "pilotd did not answer \033[31min time");
    measure(f, &widest, &lines, &bad);
    ok(!strncmp(f, "\033[H", 3) && strstr(f, "\033[J") == f + v.len - 3,
       "live: cursor home first, the rest of the screen cleared last");
    ok(only_own_codes(f) && !bad, "live: no escape but top's own");
    ok(widest <= 50 && lines <= 8,
       "live: lines cut at 50 columns (%d), none on the last row (%d)",
       widest, lines);
    ok(strstr(f, "... 2 more nodes") != NULL,
       "live: the nodes that do not fit counted");
    /* a name of wide characters: 2 columns each, so the line still
     * ends at the screen's edge (counted 1 a character, it wrapped) */
    v.rows = 30;
    v.cols = 100;
    json_object_set_new(
        json_array_get(json_object_get(json_array_get(
                           json_object_get(s, "nodes"), 0), "tasks"), 0),
        "name", json_string("名前名前名前名前名前名前"
                            "名前名前名前名前名前名前"));
    f = draw(&v, s, NULL);
    measure(f, &widest, &lines, &bad);
    ok(widest <= 100 && strstr(f, "12:名前名前"),
       "live: a name of wide characters cut at 100 columns (%d)", widest);
    f = draw(&v, s, "pilotd did not answer \033[31min time");
    ok(strstr(f, "error: pilotd did not answer \\x1b[31min time") != NULL,
       "live: the refresh's error, escaped");
    pl_topview_fini(&v);
    json_decref(s);
    return done_testing();
}
