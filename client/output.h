/* client/output.h - what the CLI prints: tables, JSON, times, progress */
#ifndef PL_CLIENT_OUTPUT_H
#define PL_CLIENT_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

/* Width a table is fitted to when the terminal is not wider. */
#define PL_OUT_WIDTH 100

/* A table of strings, printed with columns padded to their widest cell;
 * the last column is cut to fit the width. */
struct pl_out_table;

/* A table with 'ncols' columns named by 'headers' (copied).  NULL with
 * errno ENOMEM. */
struct pl_out_table *pl_out_table_new(size_t ncols,
                                      const char *const *headers);
void pl_out_table_free(struct pl_out_table *t);

/* Add a row of ncols cells (copied; NULL prints as "-").  0 or -1
 * (ENOMEM). */
int pl_out_table_add(struct pl_out_table *t, const char *const *cells);

/* Print the header and rows to 'fp', in at most 'width' columns. */
void pl_out_table_print(const struct pl_out_table *t, FILE *fp, int width);

/* Columns of the terminal on 'fd', or 0 if it is not one. */
int pl_out_term_width(int fd);

/* A duration for people: "0.012s", "1.2s", "3m04s", "2h05m", "3d04h".
 * Negative or NaN gives "-".  Returns 'buf'. */
char *pl_out_duration(double secs, char *buf, size_t len);

/* Local time ISO 8601, "2024-05-01T12:03:04" (with ".123" if 'ms').
 * Returns 'buf'. */
char *pl_out_time(double epoch, bool ms, char *buf, size_t len);

/* A size in KiB for people: "812 KiB", "12.3 MiB", "1.5 GiB". */
char *pl_out_kib(long long kib, char *buf, size_t len);

/* 'argv' (a JSON array of strings) as one shell-quoted line, in a new
 * string (free()), or NULL (ENOMEM). */
char *pl_out_argv(const json_t *argv);

/* 's' quoted for a POSIX shell, in a new string (free()), or NULL. */
char *pl_out_shquote(const char *s);

/* A JSON integer array as "0,1,2", or "-" when empty.  Returns 'buf'. */
char *pl_out_intlist(const json_t *a, char *buf, size_t len);

/* A comma list of node names ("n1,n2,n3") cut to at most 'width' bytes
 * at a name boundary, the names left out counted at the end: "n1,n2+3".
 * A name that does not fit alone is cut (and still followed by "+N").
 * NULL gives NULL.  Returns 'buf' (or NULL). */
char *pl_out_nodelist(const char *list, size_t width, char *buf, size_t len);

/* Print 'j' on stdout: arrays one element per line, objects indented. */
void pl_out_json(const json_t *j);

/* Field access that tolerates absent keys and null: an integer
 * (a real is truncated) or 'dflt'; a number or 'dflt' (NAN for none);
 * a string or NULL. */
long long pl_out_jint(const json_t *o, const char *key, long long dflt);
double pl_out_jreal(const json_t *o, const char *key, double dflt);
const char *pl_out_jstr(const json_t *o, const char *key);
/* A count that may come as a number or as a list of ids. */
long long pl_out_jcount(const json_t *o, const char *key);

/* Redraw the one progress line on terminal 'fp': "\r" LINE, erase to
 * the end.  pl_out_progress_clear() erases it. */
void pl_out_progress(FILE *fp, const char *line);
void pl_out_progress_clear(FILE *fp);

/* "[#####-----]" with 'width' cells inside the brackets, for 'frac' in
 * [0, 1].  Returns 'buf'. */
char *pl_out_bar(double frac, int width, char *buf, size_t len);

#endif /* !PL_CLIENT_OUTPUT_H */
