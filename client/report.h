/* client/report.h - pilot report's model: tasks, rank bars, rows
 *
 * cmd_report.c reads the TIMELINE pages into this (report_data.c),
 * report_stats.c computes the summary (histograms, slowest tasks,
 * failures, per-name and per-tag tables, utilisation, the aggregated
 * timeline), report_html.c writes the page around the embedded
 * report.js and report.css.  Private to client/report_*.c and
 * cmd_report.c (and the unit test). */
#ifndef PL_CLIENT_REPORT_H
#define PL_CLIENT_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "proto/error.h"

/* One task, as the report needs it.  Times are epoch seconds, NAN when
 * not known (never started, not ended, not measured). */
struct pl_rtask {
    uint64_t id;
    char *name;              /* NULL: none */
    char *state, *reason;    /* reason NULL: none */
    json_t *tags;            /* an object (never NULL) */
    uint32_t group;          /* its colour: index into pl_report.groups */
    double submit, start, end;
    uint32_t ranks, cpr, gpr, attempts;
    int64_t exit_code, signal, maxrss_kb;  /* -1: none */
    double cpu_user, cpu_sys;              /* NAN: not measured */
};

/* One rank of one attempt on its node: a bar on each row (core, GPU)
 * it held. */
struct pl_rbar {
    uint32_t task;           /* index into pl_report.tasks */
    uint32_t attempt, rank;
    double start, end;       /* end NAN: still running */
    uint32_t nrows;
    uint32_t *rows;          /* indices into pl_report.rows */
};

/* A timeline row: one core or GPU of a node. */
struct pl_rrow {
    uint32_t node;           /* index into the nodes array */
    bool gpu;
    int64_t id;              /* its CPU or GPU id */
};

struct pl_report {
    json_t *nodes;           /* [{name, cores, gpus, ...}] as given */
    struct pl_rrow *rows;
    size_t nrows, ncores, ngpus;
    size_t *node_base;       /* a node's first row; [nnodes] = nrows */
    size_t nnodes, nlast;    /* nlast: the node found last */
    struct pl_rtask *tasks;
    size_t ntasks, tcap;
    struct pl_rbar *bars;
    size_t nbars, bcap;
    char **groups;           /* colour keys, in order of first use */
    size_t ngroups, gcap, glast;
    const char *color_tag;   /* colour by this tag's value; NULL: name */
    double now;              /* when the report was made */
};

/* Set up 'r' (zeroed) to colour by 'color_tag' (borrowed; NULL: the
 * task's name). */
void pl_report_init(struct pl_report *r, const char *color_tag);
void pl_report_fini(struct pl_report *r);

/* Take one TIMELINE page (proto/tlmsg.h): its nodes (the first page's)
 * become rows, its tasks and their rank placements are added.  Each
 * field is checked (a task without an id, a placement that is not
 * [attempt, rank, node, cores, gpus, start, end]: EPROTO).  0, or -1
 * with errp. */
int pl_report_add_page(struct pl_report *r, const json_t *page,
                       struct pl_error *errp);

/* The span of the report: the first submit and the last end (or 'now'
 * for what still runs).  false if there is nothing. */
bool pl_report_span(const struct pl_report *r, double *t0, double *t1);

/* The summary pilot report --json prints and the page shows:
 * {"tasks": N, "states": {...}, "span": [t0, t1], "wait_hist",
 *  "run_hist": {"edges": [...], "counts": [...]}, "slowest": [...],
 *  "failures": [{"reason", "count", "ids"}], "by_name", "by_tag":
 *  [{"group", "count", "done", "failed", "mean_wall", "p95_wall",
 *  "cpu_eff"}], "util": {"t0", "dt", "cores": [...], "gpus": [...]}}.
 * report_stats.c.  NULL on out of memory. */
json_t *pl_report_summary(const struct pl_report *r);

/* Per row, the busy fraction (0 to 100) of each of 'nb' buckets of
 * [t0, t0 + nb * dt): the aggregated timeline.  [[...] per row].
 * report_stats.c.  NULL on out of memory. */
json_t *pl_report_heat(const struct pl_report *r, double t0, double dt,
                       size_t nb);

/* The p-th percentile (0..100) of 'v' (n values; sorted in place),
 * nearest rank; NAN when n is 0. */
double pl_report_pct(double *v, size_t n, double p);

/* Histogram of 'v' (n values >= 0) in 'nbins' bins: linear from 0, or
 * logarithmic when the values span more than two decades; {"edges":
 * [nbins + 1], "counts": [nbins], "log": bool}.  NULL on out of
 * memory. */
json_t *pl_report_hist(const double *v, size_t n, size_t nbins);

/* Write the page to 'f': the data (JSON with '<', '>' and '&' escaped,
 * so no task text can end the script element) inside a
 * <script type="application/json">, and the embedded script and style.
 * With 'detail' every bar is drawn; without it the page has the
 * aggregated timeline of 'heat_buckets' columns.  'title' is escaped.
 * report_html.c.  0, or -1 with errp. */
int pl_report_write_html(const struct pl_report *r, FILE *f,
                         const char *title, bool detail,
                         size_t heat_buckets, struct pl_error *errp);

/* The JSON text of 'j' written to 'f' with '<', '>', '&' as \u003c,
 * \u003e, \u0026 (inside strings, the only place they can be).  0, or
 * -1 (errno). */
int pl_report_json_script(const json_t *j, FILE *f);

#endif /* !PL_CLIENT_REPORT_H */
