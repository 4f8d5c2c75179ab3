/* client/topview.c - pilot top's frame: a status object drawn as text */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <wchar.h>

#include "client/clean.h"
#include "client/output.h"
#include "client/topview.h"

static const char *const sort_names[] = { "name", "busy", "tasks" };

const char *pl_topview_sort_name(int sort)
{
    return sort >= 0 && sort < PL_TOP_SORT_COUNT ? sort_names[sort] : "?";
}

int pl_topview_sort_parse(const char *s)
{
    for (int i = 0; i < PL_TOP_SORT_COUNT; i++)
        if (!strcmp(s, sort_names[i]))
            return i;
    return -1;
}

void pl_topview_fini(struct pl_topview *t)
{
    free(t->buf);
    t->buf = NULL;
    t->len = t->cap = 0;
}

static void grow(struct pl_topview *t, size_t more)
{
    if (t->len + more + 1 <= t->cap)
        return;
    size_t ncap = t->cap ? t->cap : 8192;
    while (ncap < t->len + more + 1)
        ncap *= 2;
    char *nb = realloc(t->buf, ncap);
    if (!nb) {
        t->oom = true;
        return;
    }
    t->buf = nb;
    t->cap = ncap;
}

/* Append our own terminal code (live only): it takes no column. */
static void code(struct pl_topview *t, const char *c)
{
    size_t n = strlen(c);

    if (!t->live)
        return;
    grow(t, n);
    if (t->oom)
        return;
    memcpy(t->buf + t->len, c, n);
    t->len += n;
}

/* The columns the character at 's' takes on a terminal, its length in
 * '*n'.  A wide character (CJK, most emoji) takes two: counted as one,
 * a line of them ran past the screen's edge and wrapped, breaking the
 * frame.  Widths come from the locale (cmd_top.c sets one of UTF-8);
 * where it cannot say, one column a code point. */
static int char_width(const char *s, size_t *n)
{
    mbstate_t st;
    wchar_t wc;
    size_t r;
    int w;

    memset(&st, 0, sizeof(st));
    r = mbrtowc(&wc, s, MB_LEN_MAX, &st);
    if (r == 0 || r == (size_t)-1 || r == (size_t)-2) {
        *n = 1;
        return ((unsigned char)*s & 0xC0) != 0x80;
    }
    *n = r;
    w = wcwidth(wc);
    return w < 0 ? 1 : w;
}

/* Columns of the string 's'. */
static int str_width(const char *s)
{
    int cols = 0;
    size_t n;

    for (; *s; s += n)
        cols += char_width(s, &n);
    return cols;
}

/* Append text that holds no control character, cut at the screen's
 * width (a character that would cross it is left out whole). */
static void put(struct pl_topview *t, const char *s)
{
    int width = t->live ? t->cols : INT_MAX;
    size_t n;

    /* N.B. the last row stays empty: a newline there would scroll */
    if (t->live && t->lines >= t->rows - 1)
        return;
    for (; *s && !t->oom; s += n) {
        int w = char_width(s, &n);
        if (w > 0 && t->line_cols + w > width)
            break;
        grow(t, n);
        if (t->oom)
            return;
        memcpy(t->buf + t->len, s, n);
        t->len += n;
        t->line_cols += w;
    }
}

static void putf(struct pl_topview *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* put() of our own formatted text: never with a string from others as
 * an argument (put_user() is for those). */
static void putf(struct pl_topview *t, const char *fmt, ...)
{
    char line[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    put(t, line);
}

/* Text from others (names, reasons, errors): escaped, then put(); at
 * least 'pad' columns, padded with spaces; at most 'max' (0: any). */
static void put_user(struct pl_topview *t, const char *s, int pad,
                     int max)
{
    char *c = pl_clean_str(s ? s : "-");
    int n = 0;

    if (!c) {
        t->oom = true;
        return;
    }
    /* the two controls pl_clean_str() leaves would break the frame */
    for (char *p = c; *p; p++)
        if (*p == '\n' || *p == '\t')
            *p = ' ';
    if (max > 0) {
        int k = 0;
        size_t len;
        for (char *p = c; *p; p += len) {
            int w = char_width(p, &len);
            if (k + w > max) {
                *p = '\0';
                break;
            }
            k += w;
        }
    }
    n = str_width(c);
    put(t, c);
    for (; n < pad; n++)
        put(t, " ");
    free(c);
}

/* End the current line: on a terminal, clear what an earlier frame left
 * after it; lines past the screen's height are dropped. */
static void endl(struct pl_topview *t)
{
    if (!t->live || t->lines < t->rows - 1) {
        code(t, "\033[K");
        grow(t, 2);
        if (!t->oom) {
            if (t->live)
                t->buf[t->len++] = '\r';
            t->buf[t->len++] = '\n';
        }
    }
    t->lines++;
    t->line_cols = 0;
}

/* Whether another line fits the screen. */
static bool room(const struct pl_topview *t)
{
    return !t->live || t->lines < t->rows - 1;
}

static long long count(const json_t *tasks, const char *st)
{
    return pl_out_jint(tasks, st, 0);
}

/* Tasks/s that left the queue (placed, or canceled there) and that
 * ended, from the change of the counts since the refresh before. */
void pl_topview_rates(struct pl_topview *t, const json_t *status,
                      double now)
{
    const json_t *tasks = json_object_get(status, "tasks");
    long long end = count(tasks, "done") + count(tasks, "failed")
                    + count(tasks, "canceled") + count(tasks, "timeout");
    long long out = pl_out_jint(tasks, "total", 0) - count(tasks, "queued")
                    - count(tasks, "waiting");

    t->start_rate = t->end_rate = NAN;
    if (t->have_prev && now > t->prev_t) {
        double dt = now - t->prev_t;
        t->start_rate = fmax(0, (double)(out - t->prev_out) / dt);
        t->end_rate = fmax(0, (double)(end - t->prev_end) / dt);
    }
    t->have_prev = true;
    t->prev_t = now;
    t->prev_out = out;
    t->prev_end = end;
}

static int cmp_nodes(const void *a, const void *b, void *arg)
{
    const json_t *x = *(const json_t *const *)a;
    const json_t *y = *(const json_t *const *)b;
    int mode = *(const int *)arg;
    long long kx = 0, ky = 0;
    const char *nx = pl_out_jstr(x, "name"), *ny = pl_out_jstr(y, "name");

    if (mode == PL_TOP_SORT_BUSY) {
        kx = pl_out_jcount(x, "cores_busy") + pl_out_jcount(x, "gpus_busy");
        ky = pl_out_jcount(y, "cores_busy") + pl_out_jcount(y, "gpus_busy");
    }
    else if (mode == PL_TOP_SORT_TASKS) {
        kx = pl_out_jcount(x, "running");
        ky = pl_out_jcount(y, "running");
    }
    if (kx != ky)
        return kx > ky ? -1 : 1;
    return strcmp(nx ? nx : "", ny ? ny : "");
}

/* A JSON value of the vetting object as text ("41.2", "cpu_speed"). */
static void jtext(const json_t *v, char *buf, size_t len)
{
    if (json_is_string(v))
        snprintf(buf, len, "%s", json_string_value(v));
    else if (json_is_integer(v))
        snprintf(buf, len, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v))
        snprintf(buf, len, "%.3g", json_real_value(v));
    else if (json_is_true(v) || json_is_false(v))
        snprintf(buf, len, "%s", json_is_true(v) ? "true" : "false");
    else
        buf[0] = '\0';
}

/* The VET column: its last vetting ("ok", "failed gpu_mem 3.1"), else
 * why it is cordoned, else "-". */
static void vet_text(const json_t *n, char *buf, size_t len)
{
    const json_t *vet = json_object_get(n, "vet");
    const char *cordon = pl_out_jstr(n, "cordon");
    char st[64], check[64], fig[64];

    if (json_is_object(vet)) {
        jtext(json_object_get(vet, "state"), st, sizeof(st));
        jtext(json_object_get(vet, "check"), check, sizeof(check));
        jtext(json_object_get(vet, "figure"), fig, sizeof(fig));
        snprintf(buf, len, "%s%s%s%s%s", st[0] ? st : "vetted",
                 check[0] ? " " : "", check, fig[0] ? " " : "", fig);
    }
    else if (cordon)
        snprintf(buf, len, "%s", cordon);
    else
        snprintf(buf, len, "-");
}

/* "[#####.....] 5/10" */
static void bar(struct pl_topview *t, long long busy, long long total,
                int width)
{
    char b[128];

    pl_out_bar(total > 0 ? (double)busy / (double)total : 0, width, b,
               sizeof(b));
    putf(t, "%s %3lld/%-3lld ", b, busy, total);
}

static void draw_nodes(struct pl_topview *t, const json_t *nodes)
{
    size_t nn = json_array_size(nodes), i;
    const json_t **v = calloc(nn ? nn : 1, sizeof(*v));
    const json_t *n;
    int namew = 4, vetw = 0;
    bool gpus = false;

    if (!v) {
        t->oom = true;
        return;
    }
    json_array_foreach(nodes, i, n) {
        const char *name = pl_out_jstr(n, "name");
        char vt[256];
        v[i] = n;
        if (name && (int)strlen(name) > namew)
            namew = (int)strlen(name) > 24 ? 24 : (int)strlen(name);
        gpus |= json_array_size(json_object_get(n, "gpus")) > 0
                || pl_out_jcount(n, "gpus") > 0;
        vet_text(n, vt, sizeof(vt));
        if (strcmp(vt, "-") && (int)strlen(vt) > vetw)
            vetw = (int)strlen(vt) > 28 ? 28 : (int)strlen(vt);
    }
    int sm = t->sort;
    qsort_r(v, nn, sizeof(*v), cmp_nodes, &sm);
    /* the bars take what the screen has to spare, within reason */
    int barw = t->live ? (t->cols - namew - 60) / (gpus ? 3 : 2) : 20;
    if (barw < 8)
        barw = 8;
    if (barw > 40)
        barw = 40;
    code(t, "\033[7m");
    putf(t, "%-*s %-8s %-*s ", namew, "NODE", "STATE", barw + 10, "CORES");
    if (gpus)
        putf(t, "%-*s ", barw / 2 + 10, "GPUS");
    if (vetw)
        putf(t, "%-*s ", vetw > 3 ? vetw : 3, "VET");
    putf(t, "TASKS");
    if (t->live)
        for (int c = t->line_cols; c < t->cols; c++)
            put(t, " ");
    code(t, "\033[0m");
    endl(t);
    for (i = 0; i < nn && room(t); i++) {
        if (t->live && t->lines == t->rows - 2 && i + 1 < nn) {
            putf(t, "... %zu more nodes", nn - i);
            endl(t);
            break;
        }
        const json_t *tl = json_object_get(v[i], "tasks"), *k;
        const char *st = pl_out_jstr(v[i], "state");
        bool cordoned = pl_out_jstr(v[i], "cordon") != NULL;
        long long nc = json_is_array(json_object_get(v[i], "cores"))
                           ? (long long)json_array_size(
                                 json_object_get(v[i], "cores"))
                           : pl_out_jcount(v[i], "cores");
        long long ng = json_is_array(json_object_get(v[i], "gpus"))
                           ? (long long)json_array_size(
                                 json_object_get(v[i], "gpus"))
                           : pl_out_jcount(v[i], "gpus");
        size_t j;
        put_user(t, pl_out_jstr(v[i], "name"), namew + 1, namew);
        if (cordoned && st && !strcmp(st, "up"))
            st = "cordoned";
        put_user(t, st, 9, 8);
        bar(t, pl_out_jcount(v[i], "cores_busy"), nc, barw);
        if (gpus)
            bar(t, pl_out_jcount(v[i], "gpus_busy"), ng, barw / 2);
        if (vetw) {
            char vt[256];
            vet_text(v[i], vt, sizeof(vt));
            put_user(t, vt, (vetw > 3 ? vetw : 3) + 1, vetw);
        }
        json_array_foreach(tl, j, k) {
            const char *name = pl_out_jstr(k, "name");
            const char *cmd = pl_out_jstr(k, "cmd");
            const char *base = cmd && strrchr(cmd, '/') ? strrchr(cmd, '/') + 1
                                                        : cmd;
            putf(t, "%s%lld:", j ? " " : "", pl_out_jint(k, "id", 0));
            put_user(t, name ? name : base ? base : "?", 0, 40);
        }
        if (pl_out_jcount(v[i], "tasks_more"))
            putf(t, " +%lld more", pl_out_jcount(v[i], "tasks_more"));
        else if (!json_array_size(tl) && pl_out_jcount(v[i], "running"))
            putf(t, "%lld running", pl_out_jcount(v[i], "running"));
        endl(t);
    }
    free(v);
}

int pl_topview_draw(struct pl_topview *t, const json_t *s, const char *err)
{
    const json_t *n, *p;
    const json_t *tasks = json_object_get(s, "tasks");
    const json_t *nodes = json_object_get(s, "nodes");
    const char *state = pl_out_jstr(s, "state");
    const char *host = pl_out_jstr(s, "host");
    long long job = pl_out_jint(s, "job", 0), up = 0, lost = 0, cord = 0;
    double left = pl_out_jreal(s, "walltime_left", NAN);
    char d[32], clock[16];
    time_t now = time(NULL);
    size_t i;

    t->len = 0;
    t->lines = 0;
    t->line_cols = 0;
    code(t, "\033[H");
    if (!s) {
        putf(t, "pilot top: no status yet");
        endl(t);
    }
    else {
        putf(t, "pilot ");
        put_user(t, pl_out_jstr(s, "pilot"), 0, 0);
        putf(t, " (");
        put_user(t, pl_out_jstr(s, "mode"), 0, 0);
        if (job > 0)
            putf(t, " job %lld", job);
        if (host) {
            putf(t, " on ");
            put_user(t, host, 0, 0);
        }
        putf(t, ") ");
        put_user(t, state ? state : "running", 0, 0);
        if (!isnan(left))
            putf(t, ", walltime left %s", pl_out_duration(left, d,
                                                           sizeof(d)));
        strftime(clock, sizeof(clock), "%H:%M:%S", localtime(&now));
        putf(t, "   %s", clock);
        endl(t);
        if (state && strcmp(state, "running") && strcmp(state, "stopping")) {
            code(t, "\033[1m");
            putf(t, "the pilot does not run: what it last recorded");
            code(t, "\033[0m");
            endl(t);
        }
        json_array_foreach(nodes, i, n) {
            const char *st = pl_out_jstr(n, "state");
            up += st && !strcmp(st, "up");
            lost += st && !strcmp(st, "lost");
            cord += pl_out_jstr(n, "cordon") != NULL;
        }
        const json_t *cores = json_object_get(s, "cores");
        const json_t *gpus = json_object_get(s, "gpus");
        putf(t, "nodes: %lld up, %lld lost, %lld cordoned   cores: %lld/%lld "
             "busy   gpus: %lld/%lld busy", up, lost, cord,
             pl_out_jint(cores, "busy", 0), pl_out_jint(cores, "total", 0),
             pl_out_jint(gpus, "busy", 0), pl_out_jint(gpus, "total", 0));
        endl(t);
        putf(t, "tasks: %lld waiting, %lld queued, %lld assigned, %lld "
             "running, %lld done, %lld failed, %lld canceled, %lld timeout",
             count(tasks, "waiting"), count(tasks, "queued"),
             count(tasks, "assigned"), count(tasks, "running"),
             count(tasks, "done"), count(tasks, "failed"),
             count(tasks, "canceled"), count(tasks, "timeout"));
        endl(t);
        if (isnan(t->start_rate))
            putf(t, "rate: - started/s, - ended/s");
        else
            putf(t, "rate: %.1f started/s, %.1f ended/s", t->start_rate,
                 t->end_rate);
        if (t->live)
            putf(t, "   sort: %s   (q quit, s sort, +/- refresh %gs)",
                 pl_topview_sort_name(t->sort), t->interval);
        endl(t);
        json_array_foreach(json_object_get(s, "pools"), i, p) {
            putf(t, "pool ");
            put_user(t, pl_out_jstr(p, "name"), 0, 0);
            putf(t, ": ");
            put_user(t, pl_out_jstr(p, "state"), 0, 0);
            putf(t, ", %lld workers (%lld busy), %lld tasks queued",
                 pl_out_jcount(p, "workers"), pl_out_jcount(p, "busy"),
                 pl_out_jcount(p, "queued"));
            endl(t);
        }
        endl(t);
        draw_nodes(t, nodes);
    }
    if (err && err[0] && room(t)) {
        putf(t, "error: ");
        put_user(t, err, 0, 0);
        endl(t);
    }
    code(t, "\033[J");
    if (t->oom) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

