/* client/report_html.c - pilot report's page: data, script and style
 *
 * One file a browser opens with no network: the data as JSON inside a
 * <script type="application/json"> (every '<', '>' and '&' in it
 * written as \u003c..., so a task named "</script>" stays text), then
 * report.js and report.css, which the build includes in the binary
 * (report_assets.S).  Task rows and bars are written one by one, never
 * all as one JSON value in memory. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "client/report.h"

extern const char pl_report_js[], pl_report_js_end[];
extern const char pl_report_css[], pl_report_css_end[];

/* Times relative to the report's start, to the microsecond: 12 digits
 * keep that for a run of days, and the page stays small. */
#define REAL_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(12))

static int esc_cb(const char *buf, size_t size, void *data)
{
    FILE *f = data;
    size_t from = 0;

    for (size_t i = 0; i < size; i++) {
        const char *rep = buf[i] == '<'   ? "\\u003c"
                          : buf[i] == '>' ? "\\u003e"
                          : buf[i] == '&' ? "\\u0026"
                                          : NULL;
        if (!rep)
            continue;
        if (fwrite(buf + from, 1, i - from, f) != i - from
            || fputs(rep, f) == EOF)
            return -1;
        from = i + 1;
    }
    return fwrite(buf + from, 1, size - from, f) == size - from ? 0 : -1;
}

int pl_report_json_script(const json_t *j, FILE *f)
{
    if (!j) {
        errno = ENOMEM;
        return -1;
    }
    if (json_dump_callback(j, esc_cb, f, REAL_FLAGS | JSON_ENCODE_ANY) < 0) {
        if (!errno)
            errno = EIO;
        return -1;
    }
    return 0;
}

/* 'j' (a new reference, taken) as "KEY":VALUE and a comma. */
static int field(FILE *f, const char *key, json_t *j)
{
    int rc = fprintf(f, "\"%s\":", key) < 0 || pl_report_json_script(j, f) < 0
                     || fputc(',', f) == EOF
                 ? -1 : 0;

    json_decref(j);
    return rc;
}

static json_t *rel(double t, double t0)
{
    return isnan(t) ? json_null() : json_real(round((t - t0) * 1e6) / 1e6);
}

static json_t *num_or_null(double v)
{
    return isnan(v) ? json_null() : json_real(v);
}

static json_t *int_or_null(int64_t v)
{
    return v < 0 ? json_null() : json_integer(v);
}

/* "tasks": [[id, name, group, state, reason, submit, start, end, ranks,
 * cores_per_rank, gpus_per_rank, exit, signal, maxrss_kb, cpu_user,
 * cpu_sys, attempts, tags]...] and "bars": [[task, attempt, rank, start,
 * end, [rows]]...], times relative to t0 (report.js reads them so). */
static int detail(const struct pl_report *r, FILE *f, double t0)
{
    if (fputs("\"tasks\":[", f) == EOF)
        return -1;
    for (size_t i = 0; i < r->ntasks; i++) {
        const struct pl_rtask *t = &r->tasks[i];
        json_t *j = json_pack(
            "[I,s?,I,s,s?,o,o,o,I,I,I,o,o,o,o,o,I,O]", (json_int_t)t->id,
            t->name, (json_int_t)t->group, t->state, t->reason,
            rel(t->submit, t0), rel(t->start, t0), rel(t->end, t0),
            (json_int_t)t->ranks, (json_int_t)t->cpr, (json_int_t)t->gpr,
            int_or_null(t->exit_code), int_or_null(t->signal),
            int_or_null(t->maxrss_kb), num_or_null(t->cpu_user),
            num_or_null(t->cpu_sys), (json_int_t)t->attempts, t->tags);
        int rc = (i && fputc(',', f) == EOF) || pl_report_json_script(j, f);
        json_decref(j);
        if (rc)
            return -1;
    }
    if (fputs("],\"bars\":[", f) == EOF)
        return -1;
    for (size_t i = 0; i < r->nbars; i++) {
        const struct pl_rbar *b = &r->bars[i];
        json_t *rows = json_array();
        for (uint32_t k = 0; rows && k < b->nrows; k++)
            json_array_append_new(rows, json_integer(b->rows[k]));
        json_t *j = json_pack("[I,I,I,o,o,o]", (json_int_t)b->task,
                              (json_int_t)b->attempt, (json_int_t)b->rank,
                              rel(b->start, t0), rel(b->end, t0), rows);
        int rc = (i && fputc(',', f) == EOF) || pl_report_json_script(j, f);
        json_decref(j);
        if (rc)
            return -1;
    }
    return fputs("],", f) == EOF ? -1 : 0;
}

static json_t *rows_json(const struct pl_report *r)
{
    json_t *a = json_array();

    for (size_t i = 0; a && i < r->nrows; i++)
        json_array_append_new(a, json_pack("[I,b,I]",
                                           (json_int_t)r->rows[i].node,
                                           r->rows[i].gpu,
                                           (json_int_t)r->rows[i].id));
    return a;
}

static json_t *groups_json(const struct pl_report *r)
{
    json_t *a = json_array();

    for (size_t i = 0; a && i < r->ngroups; i++)
        json_array_append_new(a, json_string(r->groups[i]));
    return a;
}

static int html_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        int rc = *s == '<'    ? fputs("&lt;", f)
                 : *s == '>'  ? fputs("&gt;", f)
                 : *s == '&'  ? fputs("&amp;", f)
                 : *s == '"'  ? fputs("&quot;", f)
                              : fputc(*s, f);
        if (rc == EOF)
            return -1;
    }
    return 0;
}

int pl_report_write_html(const struct pl_report *r, FILE *f,
                         const char *title, bool detail_bars,
                         size_t heat_buckets, struct pl_error *errp)
{
    double t0 = 0, t1 = 1;
    bool any = pl_report_span(r, &t0, &t1);
    json_t *summary = pl_report_summary(r);

    if (!summary) {
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    if (fputs("<!DOCTYPE html>\n<html lang=\"en\"><head>"
              "<meta charset=\"utf-8\">\n<title>", f) == EOF
        || html_text(f, title) < 0
        || fputs("</title>\n<style>\n", f) == EOF
        || fwrite(pl_report_css, 1, (size_t)(pl_report_css_end
                                              - pl_report_css), f)
               != (size_t)(pl_report_css_end - pl_report_css)
        || fputs("</style></head>\n<body>\n<div id=\"app\"><noscript>This "
                 "report needs JavaScript.</noscript></div>\n<script "
                 "type=\"application/json\" id=\"report-data\">{", f) == EOF
        || field(f, "title", json_string(title)) < 0
        || field(f, "made", json_real(r->now)) < 0
        || field(f, "t0_ms", json_integer((json_int_t)llround(t0 * 1e3)))
               < 0
        || field(f, "t1", json_real(any ? t1 - t0 : 1)) < 0
        || field(f, "detail", json_boolean(detail_bars)) < 0
        || field(f, "color_by", r->color_tag ? json_string(r->color_tag)
                                             : json_null()) < 0
        || field(f, "nodes", json_incref(r->nodes)) < 0
        || field(f, "rows", rows_json(r)) < 0
        || field(f, "groups", groups_json(r)) < 0)
        goto ioerr;
    if (detail_bars ? detail(r, f, t0) < 0
                    : field(f, "heat",
                            json_pack("{s:f, s:o}", "dt",
                                      (any ? t1 - t0 : 1) / heat_buckets,
                                      "rows",
                                      pl_report_heat(r, t0,
                                                     (any ? t1 - t0 : 1)
                                                         / heat_buckets,
                                                     heat_buckets))) < 0)
        goto ioerr;
    if (fputs("\"summary\":", f) == EOF
        || pl_report_json_script(summary, f) < 0
        || fputs("}</script>\n<script>\n", f) == EOF
        || fwrite(pl_report_js, 1, (size_t)(pl_report_js_end - pl_report_js),
                  f) != (size_t)(pl_report_js_end - pl_report_js)
        || fputs("</script>\n</body></html>\n", f) == EOF)
        goto ioerr;
    json_decref(summary);
    return 0;
ioerr:
    json_decref(summary);
    if (!errno)
        errno = EIO;
    return pl_errprintf(errp, "cannot write the report: %s",
                        strerror(errno));
}
