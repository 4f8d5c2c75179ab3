/* client/topview.h - pilot top's frame: a status object drawn as text
 *
 * One frame from the STATUS object (docs/protocol.md): the pilot, its
 * nodes and tasks, each node's bars, state, vetting and running tasks.
 * On a terminal ('live') the frame is for a screen of 'rows' x 'cols':
 * cursor home, each line cut at 'cols' and cleared to its end, nothing
 * on the last row (a newline there would scroll), the rest of the screen
 * cleared; else it is plain lines.  Every string from the status is
 * escaped (client/clean.h) and its newlines and tabs made spaces, so the
 * only control codes in the frame are top's own: ESC [ H, K, J, 7m, 1m,
 * 0m, and CR LF.
 */
#ifndef PL_CLIENT_TOPVIEW_H
#define PL_CLIENT_TOPVIEW_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

/* How the nodes are ordered: by name, by cores and GPUs busy (most
 * first), by tasks running (most first); ties by name. */
enum pl_top_sort {
    PL_TOP_SORT_NAME,
    PL_TOP_SORT_BUSY,
    PL_TOP_SORT_TASKS,
    PL_TOP_SORT_COUNT,
};

/* The view's settings (the caller's to set: zero them first), and the
 * frame pl_topview_draw() makes in 'buf' ('len' bytes, owned: free it
 * with pl_topview_fini()). */
struct pl_topview {
    bool live;               /* for a terminal of rows x cols */
    int rows, cols;
    int sort;                /* enum pl_top_sort */
    double interval;         /* seconds between refreshes (shown) */
    double start_rate, end_rate; /* tasks/s; NAN: not known yet */
    /* the counts of the status before (pl_topview_rates()) */
    bool have_prev;
    double prev_t;
    long long prev_out, prev_end;
    /* the frame */
    char *buf;
    size_t len, cap;
    int line_cols;           /* columns used on the current line */
    int lines;               /* lines of the frame so far */
    bool oom;
};

/* "name", "busy", "tasks"; the value of one of them, or -1. */
const char *pl_topview_sort_name(int sort);
int pl_topview_sort_parse(const char *s);

/* Note status 'status' taken at 'now' (seconds, monotonic): the rates
 * become the change of its counts since the status noted before, per
 * second: tasks that left the queue (placed, or canceled there) and
 * tasks that ended. */
void pl_topview_rates(struct pl_topview *v, const json_t *status,
                      double now);

/* Draw 'status' (NULL: none yet) and 'err' (a refresh's error, or NULL)
 * into v->buf.  0, or -1 (ENOMEM). */
int pl_topview_draw(struct pl_topview *v, const json_t *status,
                    const char *err);

void pl_topview_fini(struct pl_topview *v);

#endif /* !PL_CLIENT_TOPVIEW_H */
