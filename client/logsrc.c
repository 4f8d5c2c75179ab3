/* client/logsrc.c - where pilot logs reads a task's output: files or journal */
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/logsrc.h"
#include "proto/journal.h"
#include "proto/strv.h"

enum { MODE_UNKNOWN, MODE_FILES, MODE_JOURNAL };

/* What a rank wrote and has not ended with a newline yet. */
struct lbuf {
    char *p;
    size_t n, cap;
};

struct rfile {
    char path[PL_PATH_MAX + 64];
    int fd;
    off_t off;
};

struct pl_logsrc {
    char dir[PL_PATH_MAX];
    uint64_t id;
    unsigned attempt;
    unsigned ranks;
    struct pl_logopt o;
    bool raw;             /* bytes as written: one stream, no label */
    int mode;
    struct rfile *files;  /* per_rank: 'ranks' of them, else one */
    unsigned nfiles;
    unsigned first;       /* the rank of files[0] */
    struct pl_jr *jr;
    bool found;
    struct lbuf *lb;      /* per rank */
    pl_logsrc_out_f out;
    void *arg;
    char **segs;          /* the journal segments read from */
    size_t nsegs, capsegs;
};

/* ---- lines ---- */

static int lb_add(struct lbuf *b, const char *p, size_t n)
{
    if (pl_grow(&b->p, &b->cap, b->n, n, 1) < 0)
        return -1;
    memcpy(b->p + b->n, p, n);
    b->n += n;
    return 0;
}

/* Give the whole lines of 'b' (and, if 'final', the rest with a
 * newline) to the reader's sink, each after 'label' if not NULL; keep
 * the rest. */
static int lb_flush(struct pl_logsrc *s, struct lbuf *b, const char *label,
                    bool final)
{
    size_t start = 0;
    int rc = 0;

    for (size_t i = 0; rc == 0 && i < b->n; i++)
        if (b->p[i] == '\n') {
            if (label)
                rc = s->out(label, strlen(label), s->arg);
            if (rc == 0)
                rc = s->out(b->p + start, i + 1 - start, s->arg);
            start = i + 1;
        }
    if (rc == 0 && final && start < b->n) {
        if (label)
            rc = s->out(label, strlen(label), s->arg);
        if (rc == 0)
            rc = s->out(b->p + start, b->n - start, s->arg);
        if (rc == 0)
            rc = s->out("\n", 1, s->arg);
        start = b->n;
    }
    memmove(b->p, b->p + start, b->n - start);
    b->n -= start;
    return rc;
}

/* 'n' bytes of rank 'rank' to the sink: as they are, or as lines. */
static int emit(struct pl_logsrc *s, unsigned rank, const char *p, size_t n)
{
    char label[32];

    if (s->raw)
        return s->out(p, n, s->arg);
    if (rank >= s->ranks)
        return 0; /* not a rank of this task: nothing of ours */
    if (lb_add(&s->lb[rank], p, n) < 0) {
        errno = ENOMEM;
        return -1;
    }
    snprintf(label, sizeof(label), "%u: ", rank);
    return lb_flush(s, &s->lb[rank], s->o.label ? label : NULL, false);
}

static int flush_all(struct pl_logsrc *s)
{
    char label[32];

    for (unsigned r = 0; !s->raw && r < s->ranks; r++) {
        snprintf(label, sizeof(label), "%u: ", r);
        if (lb_flush(s, &s->lb[r], s->o.label ? label : NULL, true) < 0)
            return -1;
    }
    return 0;
}

/* ---- a task's sources ---- */

struct pl_logsrc *pl_logsrc_new(const char *dir, uint64_t id,
                                unsigned attempt, unsigned ranks,
                                bool per_rank, const struct pl_logopt *o,
                                pl_logsrc_out_f out, void *arg)
{
    struct pl_logsrc *s = calloc(1, sizeof(*s));
    char base[PL_PATH_MAX + 64];

    if (!s)
        return NULL;
    s->out = out;
    s->arg = arg;
    snprintf(s->dir, sizeof(s->dir), "%s", dir);
    s->id = id;
    s->attempt = attempt ? attempt : 1;
    s->ranks = ranks ? ranks : 1;
    s->o = *o;
    s->raw = !o->label && (o->rank >= 0 || s->ranks == 1);
    s->nfiles = per_rank && o->rank < 0 ? s->ranks : 1;
    s->first = per_rank && o->rank >= 0 ? (unsigned)o->rank : 0;
    if (!(s->files = calloc(s->nfiles, sizeof(*s->files)))
        || !(s->lb = calloc(s->ranks, sizeof(*s->lb))))
        goto error;
    if (pl_path_task_log(dir, id, s->attempt, o->use_err, false, base,
                         sizeof(base))
        < 0)
        goto error;
    for (unsigned i = 0; i < s->nfiles; i++) {
        struct rfile *f = &s->files[i];
        f->fd = -1;
        if (!per_rank)
            snprintf(f->path, sizeof(f->path), "%s", base);
        else if (pl_path_rank_log(base, s->first + i, f->path,
                                  sizeof(f->path))
                 < 0)
            goto error;
    }
    return s;
error:
    pl_logsrc_free(s);
    return NULL;
}

void pl_logsrc_free(struct pl_logsrc *s)
{
    if (!s)
        return;
    for (unsigned i = 0; s->files && i < s->nfiles; i++)
        if (s->files[i].fd >= 0)
            close(s->files[i].fd);
    for (unsigned r = 0; s->lb && r < s->ranks; r++)
        free(s->lb[r].p);
    pl_jr_close(s->jr);
    for (size_t i = 0; i < s->nsegs; i++)
        free(s->segs[i]);
    free(s->segs);
    free(s->files);
    free(s->lb);
    free(s);
}

const char *pl_logsrc_path(const struct pl_logsrc *s)
{
    return s->files[0].path;
}

size_t pl_logsrc_nsources(const struct pl_logsrc *s)
{
    return s->mode == MODE_JOURNAL ? s->nsegs : s->nfiles;
}

const char *pl_logsrc_source(const struct pl_logsrc *s, size_t i)
{
    if (s->mode == MODE_JOURNAL)
        return i < s->nsegs ? s->segs[i] : NULL;
    return i < s->nfiles ? s->files[i].path : NULL;
}

/* Note the segment frame 'f' came from, if it is a new one. */
static int add_seg(struct pl_logsrc *s, const struct pl_jframe *f)
{
    char path[PL_PATH_MAX + 300];

    snprintf(path, sizeof(path), "%s/journal/%s/%06u.pj", s->dir, f->node,
             f->seq);
    /* N.B. a task's frames are in a few segments: a scan is enough */
    for (size_t i = s->nsegs; i-- > 0;)
        if (!strcmp(s->segs[i], path))
            return 0;
    if (pl_grow(&s->segs, &s->capsegs, s->nsegs, 1, sizeof(*s->segs)) < 0
        || !(s->segs[s->nsegs] = strdup(path)))
        return -1;
    s->nsegs++;
    return 0;
}

/* Copy what file 'f' (of rank 'rank') has from its offset on.  A file
 * that shrank (the task ran again) is read from its start. */
static int drain_file(struct pl_logsrc *s, struct rfile *f, unsigned rank)
{
    char buf[65536];
    struct stat st;
    ssize_t n;

    if (fstat(f->fd, &st) == 0 && st.st_size < f->off) {
        f->off = 0;
        if (lseek(f->fd, 0, SEEK_SET) < 0)
            return -1;
    }
    while ((n = read(f->fd, buf, sizeof(buf))) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (emit(s, rank, buf, (size_t)n) < 0)
            return -1;
        f->off += n;
    }
    return 0;
}

static bool want_task(uint64_t id, uint32_t attempt, void *arg)
{
    const struct pl_logsrc *s = arg;

    return id == s->id && attempt == s->attempt;
}

static int drain_journal(struct pl_logsrc *s, struct pl_error *errp)
{
    struct pl_jframe f;
    int rc;

    while ((rc = pl_jr_next(s->jr, &f, errp)) == 1) {
        s->found = true;
        if (f.stream != (s->o.use_err ? PL_J_STDERR : PL_J_STDOUT)
            || (s->o.rank >= 0 && f.rank != (unsigned long)s->o.rank))
            continue;
        if (add_seg(s, &f) < 0)
            return pl_errprintf(errp, "out of memory");
        if (emit(s, f.rank, f.data, f.len) < 0)
            return pl_errprintf(errp, "cannot copy the journal's output: "
                                "%s", strerror(errno));
    }
    return rc < 0 ? -1 : 0;
}

int pl_logsrc_drain(struct pl_logsrc *s, bool final, struct pl_error *errp)
{
    /* the files, if there are any; else the journal, if there is one */
    for (unsigned i = 0; s->mode != MODE_JOURNAL && i < s->nfiles; i++) {
        struct rfile *f = &s->files[i];
        /* N.B. O_NOFOLLOW: what the agent writes is never a link
         * (pl_output_open()); one that is there is not its output */
        if (f->fd < 0
            && (f->fd = open(f->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0
            && errno != ENOENT)
            return pl_errprintf(errp, "cannot read %s: %s", f->path,
                                errno == ELOOP
                                    ? "a symbolic link, not followed"
                                    : strerror(errno));
        if (f->fd < 0)
            continue;
        s->mode = MODE_FILES;
        s->found = true;
        if (drain_file(s, f, s->first + i) < 0)
            return pl_errprintf(errp, "cannot copy %s: %s", f->path,
                                strerror(errno));
    }
    if (s->mode != MODE_FILES && !s->jr) {
        s->jr = pl_jr_open(s->dir, NULL, want_task, s, errp);
        if (!s->jr && errno != ENOENT)
            return -1;
    }
    if (s->mode != MODE_FILES && s->jr) {
        if (drain_journal(s, errp) < 0)
            return -1;
        if (s->found)
            s->mode = MODE_JOURNAL;
    }
    if (final && flush_all(s) < 0)
        return pl_errprintf(errp, "cannot write: %s", strerror(errno));
    return s->found ? 1 : 0;
}

bool pl_task_journaled(const char *dir, const json_t *t)
{
    const json_t *env = json_object_get(t, "env"), *v;
    char path[PL_PATH_MAX + 16];
    struct stat st;
    size_t i;

    json_array_foreach(env, i, v) {
        const char *s = json_string_value(v);
        if (s && !strncmp(s, "PILOT_OUTPUT=", 13))
            return !strcmp(s + 13, "journal");
    }
    snprintf(path, sizeof(path), "%s/journal", dir);
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ---- an array's lines that match ---- */

struct gctx {
    struct pl_logelem *e;
    size_t n;
};

static int elem_cmp(const void *a, const void *b)
{
    const struct pl_logelem *x = a, *y = b;

    return (x->id > y->id) - (x->id < y->id);
}

static struct pl_logelem *find_elem(const struct gctx *g, uint64_t id)
{
    struct pl_logelem key = { .id = id };

    return bsearch(&key, g->e, g->n, sizeof(*g->e), elem_cmp);
}

static bool want_elem(uint64_t id, uint32_t attempt, void *arg)
{
    const struct pl_logelem *e = find_elem(arg, id);

    return e && e->attempt == attempt;
}

/* The whole lines of 'b' that match, printed with their element's name;
 * the count, the rest kept (all of it if 'final'). */
static long grep_lines(struct lbuf *b, const regex_t *rx, uint64_t array,
                       uint64_t index, bool final)
{
    size_t start = 0;
    long hits = 0;

    if (final && b->n && b->p[b->n - 1] != '\n' && lb_add(b, "\n", 1) < 0)
        return -1;
    for (size_t i = 0; i < b->n; i++)
        if (b->p[i] == '\n') {
            b->p[i] = '\0';
            if (regexec(rx, b->p + start, 0, NULL, 0) == 0) {
                printf("%llu.%llu: %s\n", (unsigned long long)array,
                       (unsigned long long)index, b->p + start);
                hits++;
            }
            start = i + 1;
        }
    memmove(b->p, b->p + start, b->n - start);
    b->n -= start;
    return hits;
}

long pl_logsrc_grep(const char *dir, uint64_t array, struct pl_logelem *e,
                    size_t n, const void *rx, bool use_err,
                    struct pl_error *errp)
{
    struct gctx g = { e, n };
    struct pl_jframe f;
    struct lbuf b = { 0 };
    uint64_t cur = 0;
    uint32_t cur_rank = 0;
    long hits = 0, k;
    int rc;

    qsort(e, n, sizeof(*e), elem_cmp);
    /* the journal first: one pass over it for all of them */
    struct pl_jr *jr = pl_jr_open(dir, NULL, want_elem, &g, errp);
    if (!jr && errno != ENOENT)
        return -1;
    /* N.B. lines are cut where a frame of another rank or task comes
     * (one per rank ends where it wrote a newline: agents read pipes by
     * the line-buffered writes of most programs) */
    while (jr && (rc = pl_jr_next(jr, &f, errp)) == 1) {
        if (f.stream != (use_err ? PL_J_STDERR : PL_J_STDOUT))
            continue;
        if (f.id != cur || f.rank != cur_rank) {
            if (cur && (k = grep_lines(&b, rx, array, find_elem(&g, cur)->index,
                                       true)) >= 0)
                hits += k;
            cur = f.id;
            cur_rank = f.rank;
        }
        if (lb_add(&b, f.data, f.len) < 0
            || (k = grep_lines(&b, rx, array, find_elem(&g, cur)->index,
                               false)) < 0) {
            pl_jr_close(jr);
            free(b.p);
            return pl_errprintf(errp, "out of memory");
        }
        hits += k;
    }
    if (cur && (k = grep_lines(&b, rx, array, find_elem(&g, cur)->index,
                               true)) > 0)
        hits += k;
    pl_jr_close(jr);
    /* then the files of the elements that have them */
    for (size_t i = 0; i < n; i++) {
        struct pl_logelem *x = &e[i];
        char base[PL_PATH_MAX + 64], path[PL_PATH_MAX + 96];
        if (!x->attempt
            || pl_path_task_log(dir, x->id, x->attempt, use_err, false, base,
                                sizeof(base)) < 0)
            continue;
        for (unsigned r = 0; r < (x->per_rank ? x->ranks : 1); r++) {
            if (x->per_rank)
                pl_path_rank_log(base, r, path, sizeof(path));
            else
                snprintf(path, sizeof(path), "%s", base);
            int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            char buf[65536];
            ssize_t got;
            if (fd < 0)
                continue;
            while ((got = read(fd, buf, sizeof(buf))) > 0) {
                if (lb_add(&b, buf, (size_t)got) < 0)
                    break;
                if ((k = grep_lines(&b, rx, array, x->index, false)) > 0)
                    hits += k;
            }
            close(fd);
            if ((k = grep_lines(&b, rx, array, x->index, true)) > 0)
                hits += k;
            b.n = 0;
        }
    }
    free(b.p);
    fflush(stdout);
    return hits;
}
