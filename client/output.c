/* client/output.c - what the CLI prints: tables, JSON, times, progress */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "client/output.h"

struct pl_out_table {
    size_t ncols;
    size_t nrows;
    size_t cap;
    char **cells; /* (nrows + 1) * ncols, the header first */
};

static void free_cells(char **cells, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(cells[i]);
}

struct pl_out_table *pl_out_table_new(size_t ncols,
                                      const char *const *headers)
{
    struct pl_out_table *t;

    if (!(t = calloc(1, sizeof(*t))))
        return NULL;
    t->ncols = ncols;
    t->cap = 16;
    if (!(t->cells = calloc(t->cap * ncols, sizeof(*t->cells))))
        goto error;
    for (size_t i = 0; i < ncols; i++)
        if (!(t->cells[i] = strdup(headers[i])))
            goto error;
    t->nrows = 1;
    return t;
error:
    pl_out_table_free(t);
    return NULL;
}

void pl_out_table_free(struct pl_out_table *t)
{
    if (!t)
        return;
    int saved = errno;
    if (t->cells)
        free_cells(t->cells, t->cap * t->ncols);
    free(t->cells);
    free(t);
    errno = saved;
}

int pl_out_table_add(struct pl_out_table *t, const char *const *cells)
{
    if (t->nrows == t->cap) {
        size_t cap = t->cap * 2;
        char **nc = realloc(t->cells, cap * t->ncols * sizeof(*nc));
        if (!nc)
            return -1;
        memset(nc + t->cap * t->ncols, 0,
               (cap - t->cap) * t->ncols * sizeof(*nc));
        t->cells = nc;
        t->cap = cap;
    }
    char **row = t->cells + t->nrows * t->ncols;
    for (size_t i = 0; i < t->ncols; i++) {
        if (!(row[i] = strdup(cells[i] ? cells[i] : "-"))) {
            free_cells(row, i);
            memset(row, 0, t->ncols * sizeof(*row));
            return -1;
        }
    }
    t->nrows++;
    return 0;
}

void pl_out_table_print(const struct pl_out_table *t, FILE *fp, int width)
{
    size_t w[16] = { 0 };
    size_t ncols = t->ncols < 16 ? t->ncols : 16;
    size_t used = 0;

    for (size_t r = 0; r < t->nrows; r++)
        for (size_t c = 0; c < ncols; c++) {
            size_t n = strlen(t->cells[r * t->ncols + c]);
            if (n > w[c])
                w[c] = n;
        }
    for (size_t c = 0; c + 1 < ncols; c++)
        used += w[c] + 2;
    /* the last column gets what is left, but never less than 12 */
    size_t last = width > 0 && (size_t)width > used + 12 ? (size_t)width - used
                                                          : 12;
    for (size_t r = 0; r < t->nrows; r++) {
        for (size_t c = 0; c < ncols; c++) {
            const char *s = t->cells[r * t->ncols + c];
            if (c + 1 < ncols) {
                fprintf(fp, "%-*s  ", (int)w[c], s);
                continue;
            }
            size_t n = strlen(s);
            if (n <= last)
                fprintf(fp, "%s\n", s);
            else
                fprintf(fp, "%.*s...\n", (int)(last - 3), s);
        }
    }
}

int pl_out_term_width(int fd)
{
    struct winsize ws;

    if (!isatty(fd) || ioctl(fd, TIOCGWINSZ, &ws) < 0 || ws.ws_col == 0)
        return 0;
    return ws.ws_col;
}

char *pl_out_duration(double secs, char *buf, size_t len)
{
    /* N.B. not past what a long long holds (undefined) */
    if (isnan(secs) || secs < 0 || secs >= 0x1p63) {
        snprintf(buf, len, "-");
        return buf;
    }
    if (secs < 1)
        snprintf(buf, len, "%.3fs", secs);
    else if (secs < 60)
        snprintf(buf, len, "%.1fs", secs);
    else {
        long long s = (long long)secs;
        if (s < 3600)
            snprintf(buf, len, "%lldm%02llds", s / 60, s % 60);
        else if (s < 86400)
            snprintf(buf, len, "%lldh%02lldm", s / 3600, s % 3600 / 60);
        else
            snprintf(buf, len, "%lldd%02lldh", s / 86400, s % 86400 / 3600);
    }
    return buf;
}

char *pl_out_time(double epoch, bool ms, char *buf, size_t len)
{
    /* rounded to the millisecond first, so .0999999 shows as .100 */
    double r = ms ? floor(epoch * 1000 + 0.5) / 1000 : floor(epoch);
    time_t t = 0;
    struct tm tm;
    char s[32];

    /* N.B. a time_t holds what it converts: not NaN, +inf, 1e300 */
    if (isnan(epoch) || epoch <= 0 || r >= 0x1p62
        || (t = (time_t)r, !localtime_r(&t, &tm))) {
        snprintf(buf, len, "-");
        return buf;
    }
    strftime(s, sizeof(s), "%Y-%m-%dT%H:%M:%S", &tm);
    if (ms) {
        int m = (int)floor((r - (double)t) * 1000 + 0.5);
        snprintf(buf, len, "%s.%03d", s, m < 0 ? 0 : m > 999 ? 999 : m);
    }
    else
        snprintf(buf, len, "%s", s);
    return buf;
}

char *pl_out_kib(long long kib, char *buf, size_t len)
{
    if (kib < 0)
        snprintf(buf, len, "-");
    else if (kib < 1024)
        snprintf(buf, len, "%lld KiB", kib);
    else if (kib < 1024 * 1024)
        snprintf(buf, len, "%.1f MiB", kib / 1024.0);
    else
        snprintf(buf, len, "%.1f GiB", kib / (1024.0 * 1024.0));
    return buf;
}

/* Whether 's' can be shown to a shell as it is. */
static bool shell_plain(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                    "0123456789-_./=:,+@%^", *s))
            return false;
    return true;
}

/* Write 's' quoted for a shell at 'p' (room for 4 * strlen + 3 bytes);
 * returns the end. */
static char *quote_into(char *p, const char *s)
{
    if (shell_plain(s))
        return stpcpy(p, s);
    *p++ = '\'';
    for (; *s; s++) {
        if (*s == '\'')
            p = stpcpy(p, "'\\''");
        else
            *p++ = *s;
    }
    *p++ = '\'';
    *p = '\0';
    return p;
}

char *pl_out_shquote(const char *s)
{
    char *buf = malloc(strlen(s) * 4 + 3);

    if (buf)
        quote_into(buf, s);
    return buf;
}

char *pl_out_argv(const json_t *argv)
{
    size_t len = 1, i;
    const json_t *a;
    char *buf, *p;

    json_array_foreach(argv, i, a) {
        const char *s = json_string_value(a);
        /* worst case: every byte a quote, '\'' each (4x), plus ' ' '' */
        len += (s ? strlen(s) * 4 : 0) + 3;
    }
    if (!(buf = malloc(len)))
        return NULL;
    p = buf;
    *p = '\0';
    json_array_foreach(argv, i, a) {
        const char *s = json_string_value(a);
        if (i > 0)
            *p++ = ' ';
        p = quote_into(p, s ? s : "");
    }
    *p = '\0';
    return buf;
}

char *pl_out_intlist(const json_t *a, char *buf, size_t len)
{
    size_t off = 0, i;
    const json_t *v;

    buf[0] = '\0';
    if (!json_is_array(a) || json_array_size(a) == 0) {
        snprintf(buf, len, "-");
        return buf;
    }
    json_array_foreach(a, i, v) {
        int n;
        if (json_is_integer(v))
            n = snprintf(buf + off, len - off, "%s%lld", i ? "," : "",
                         (long long)json_integer_value(v));
        else
            n = snprintf(buf + off, len - off, "%s%s", i ? "," : "",
                         json_is_string(v) ? json_string_value(v) : "?");
        if (n < 0 || (size_t)n >= len - off)
            break;
        off += (size_t)n;
    }
    return buf;
}

char *pl_out_nodelist(const char *list, size_t width, char *buf, size_t len)
{
    size_t n = 1, keep = 0, kept = 0;
    const char *p;
    char more[24];

    if (!list)
        return NULL;
    if (width > len - 1)
        width = len - 1;
    if (strlen(list) <= width) {
        snprintf(buf, len, "%s", list);
        return buf;
    }
    for (p = list; *p; p++)
        n += *p == ',';
    if (n == 1) {
        snprintf(buf, len, "%.*s", (int)width, list);
        return buf;
    }
    /* the longest run of whole names that leaves room for "+REST" */
    for (p = list;; p++) {
        if (*p != ',' && *p != '\0')
            continue;
        size_t used = (size_t)(p - list);
        int m = snprintf(more, sizeof(more), "+%zu", n - kept - 1);
        if (used + (size_t)m > width)
            break;
        keep = used;
        kept++;
        if (!*p)
            break;
    }
    if (kept == 0) {
        /* not even one whole name: cut the first one */
        int m = snprintf(more, sizeof(more), "+%zu", n - 1);
        keep = width > (size_t)m ? width - (size_t)m : 0;
    }
    snprintf(more, sizeof(more), "+%zu", n - (kept ? kept : 1));
    snprintf(buf, len, "%.*s%s", (int)keep, list, more);
    return buf;
}

/* json_dump_callback(): to stdout, with DEL written "\u007f".  jansson
 * escapes every other control character but leaves DEL (0x7f) as it is,
 * which JSON allows; the escaping stdout (client/clean.h) would then
 * print it "\x7f", which JSON does not: a task named with a DEL made
 * every --json that shows it unreadable.  DEL occurs only inside strings
 * there, where "\u007f" is the same character. */
static int dump_out(const char *buf, size_t size, void *data)
{
    const char *del;

    (void)data;
    while ((del = memchr(buf, 0x7f, size))) {
        fwrite(buf, 1, (size_t)(del - buf), stdout);
        fputs("\\u007f", stdout);
        size -= (size_t)(del - buf) + 1;
        buf = del + 1;
    }
    fwrite(buf, 1, size, stdout);
    return 0;
}

static void dump(const json_t *j, size_t flags)
{
    json_dump_callback(j, dump_out, NULL, flags);
}

void pl_out_json(const json_t *j)
{
    size_t i;
    const json_t *v;

    if (json_is_array(j)) {
        /* one element a line: greppable, and jq reads it all the same */
        if (json_array_size(j) == 0) {
            fputs("[]\n", stdout);
            return;
        }
        fputs("[\n", stdout);
        json_array_foreach(j, i, v) {
            fputs("  ", stdout);
            dump(v, JSON_COMPACT | JSON_ENCODE_ANY);
            fputs(i + 1 < json_array_size(j) ? ",\n" : "\n", stdout);
        }
        fputs("]\n", stdout);
        return;
    }
    dump(j, JSON_INDENT(2) | JSON_ENCODE_ANY);
    fputc('\n', stdout);
}

long long pl_out_jint(const json_t *o, const char *key, long long dflt)
{
    const json_t *v = json_object_get(o, key);

    if (json_is_integer(v))
        return json_integer_value(v);
    /* N.B. only a real an integer can hold: converting NaN, an infinity
     * or 1e300 is undefined (a reply is another program's word) */
    if (json_is_real(v) && json_real_value(v) > -0x1p63
        && json_real_value(v) < 0x1p63)
        return (long long)json_real_value(v);
    return dflt;
}

double pl_out_jreal(const json_t *o, const char *key, double dflt)
{
    const json_t *v = json_object_get(o, key);

    return json_is_number(v) ? json_number_value(v) : dflt;
}

const char *pl_out_jstr(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

long long pl_out_jcount(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);

    if (json_is_array(v))
        return (long long)json_array_size(v);
    return pl_out_jint(o, key, 0);
}

void pl_out_progress(FILE *fp, const char *line)
{
    fprintf(fp, "\r%s\033[K", line);
    fflush(fp);
}

void pl_out_progress_clear(FILE *fp)
{
    fputs("\r\033[K", fp);
    fflush(fp);
}

char *pl_out_bar(double frac, int width, char *buf, size_t len)
{
    int full;

    if (width < 1 || len < (size_t)width + 3) {
        snprintf(buf, len, "[]");
        return buf;
    }
    if (isnan(frac) || frac < 0)
        frac = 0;
    if (frac > 1)
        frac = 1;
    full = (int)(frac * width);
    buf[0] = '[';
    for (int i = 0; i < width; i++)
        buf[i + 1] = i < full ? '#' : '.';
    buf[width + 1] = ']';
    buf[width + 2] = '\0';
    return buf;
}
