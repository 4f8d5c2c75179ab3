/* proto/journal.c - output journals: the format, its writer and its reader */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "proto/journal.h"
#include "proto/pilotdir.h"

#define NAME_MAX_NODE 256
#define WINDOW (PL_J_FRAME_MAX + PL_J_FRAME_HEAD + 65536)
#define IBUF (PL_J_INDEX_REC * 8192) /* index bytes read at once */

/* ---- the format ---- */

uint32_t pl_crc32(uint32_t crc, const void *p, size_t n)
{
    static uint32_t table[256];
    const unsigned char *b = p;

    if (!table[1])
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++)
                c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
    crc = ~crc;
    while (n--)
        crc = table[(crc ^ *b++) & 0xff] ^ (crc >> 8);
    return ~crc;
}

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* A frame header: magic, length, id, attempt, rank, stream, flags, 2
 * reserved, prev, and the CRC-32 of the header (CRC zero) and payload.
 *   0 magic u32   4 len u32    8 id u64     16 attempt u32  20 rank u32
 *  24 stream u8  25 flags u8  26 0 u16     28 prev u64      36 crc u32 */
static void frame_head(unsigned char *h, const struct pl_jstate *s,
                       int stream, unsigned flags, uint64_t prev,
                       const void *data, uint32_t len)
{
    memset(h, 0, PL_J_FRAME_HEAD);
    put32(h, PL_J_FRAME_MAGIC);
    put32(h + 4, len);
    put64(h + 8, s->id);
    put32(h + 16, s->attempt);
    put32(h + 20, s->rank);
    h[24] = (unsigned char)stream;
    h[25] = (unsigned char)flags;
    put64(h + 28, prev);
    uint32_t crc = pl_crc32(0, h, PL_J_FRAME_HEAD);
    put32(h + 36, pl_crc32(crc, data, len));
}

/* An index record: id u64, attempt u32, rank u32, off u64, kind u32,
 * crc u32 (of the 28 bytes before it). */
static void index_rec(unsigned char *p, const struct pl_jstate *s,
                      uint64_t off, unsigned kind)
{
    put64(p, s->id);
    put32(p + 8, s->attempt);
    put32(p + 12, s->rank);
    put64(p + 16, off);
    put32(p + 24, kind);
    put32(p + 28, pl_crc32(0, p, 28));
}

/* ---- writing ---- */

struct pl_jw {
    char dir[PL_PATH_MAX];    /* DIR/journal/NODE */
    uint64_t max;
    uint32_t seg;             /* 0: none open */
    uint64_t size;
    int fd, ifd;
    bool broken;              /* a write failed: the next goes to a new
                                 segment (nothing after a torn frame) */
};

static int seg_path(const char *dir, uint32_t seg, bool index, char *buf,
                    size_t len)
{
    int n = snprintf(buf, len, "%s/%06u.%s", dir, seg, index ? "pji" : "pj");

    if (n < 0 || (size_t)n >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

/* The highest segment number in 'dir' (0: none). */
static uint32_t highest(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    uint32_t hi = 0;

    if (!d)
        return 0;
    while ((e = readdir(d))) {
        char *end;
        unsigned long n = strtoul(e->d_name, &end, 10);
        if (end != e->d_name && !strcmp(end, ".pj") && n > hi
            && n < UINT32_MAX)
            hi = (uint32_t)n;
    }
    closedir(d);
    return hi;
}

static void close_segment(struct pl_jw *w)
{
    if (w->fd >= 0)
        close(w->fd);
    if (w->ifd >= 0)
        close(w->ifd);
    w->fd = w->ifd = -1;
}

/* Open segment number 'seg' and up (one there already: another writer's,
 * never appended to). */
static int open_segment(struct pl_jw *w, uint32_t seg, struct pl_error *errp)
{
    char path[PL_PATH_MAX + 32];
    unsigned char head[PL_J_HEAD] = { 0 };
    int flags = O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_NOFOLLOW
                | O_CLOEXEC;

    close_segment(w);
    for (;; seg++) {
        if (seg_path(w->dir, seg, false, path, sizeof(path)) < 0)
            return pl_errprintf(errp, "%s: %s", w->dir, strerror(errno));
        if ((w->fd = open(path, flags, 0600)) >= 0)
            break;
        if (errno != EEXIST)
            return pl_errprintf(errp, "%s: %s", path, strerror(errno));
    }
    memcpy(head, PL_J_MAGIC, 8);
    if (write(w->fd, head, sizeof(head)) != (ssize_t)sizeof(head)) {
        pl_errprintf(errp, "%s: %s", path, strerror(errno ? errno : EIO));
        goto error;
    }
    if (seg_path(w->dir, seg, true, path, sizeof(path)) < 0
        || (w->ifd = open(path, flags, 0600)) < 0) {
        pl_errprintf(errp, "%s: %s", path, strerror(errno));
        goto error;
    }
    w->seg = seg;
    w->size = PL_J_HEAD;
    w->broken = false;
    return 0;
error:
    close_segment(w);
    w->seg = 0;
    return -1;
}

struct pl_jw *pl_jw_open(const char *dir, const char *node, uint64_t max,
                         struct pl_error *errp)
{
    struct pl_jw *w = calloc(1, sizeof(*w));
    int n;

    if (!w) {
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    w->fd = w->ifd = -1;
    w->max = max ? max : PL_J_SIZE_DEFAULT;
    n = snprintf(w->dir, sizeof(w->dir), "%s/journal/%s", dir, node);
    if (n < 0 || (size_t)n >= sizeof(w->dir) || !*node || strchr(node, '/')
        || node[0] == '.') {
        pl_errset(errp, EINVAL, "journal of node '%.64s': a bad path", node);
        goto error;
    }
    if (pl_mkdirs(w->dir, 0700) < 0) {
        pl_errprintf(errp, "%s: %s", w->dir, strerror(errno));
        goto error;
    }
    if (open_segment(w, highest(w->dir) + 1, errp) < 0)
        goto error;
    return w;
error:
    free(w);
    return NULL;
}

void pl_jw_close(struct pl_jw *w)
{
    if (!w)
        return;
    close_segment(w);
    free(w);
}

uint32_t pl_jw_segment(const struct pl_jw *w)
{
    return w->seg;
}

uint64_t pl_jw_size(const struct pl_jw *w)
{
    return w->size;
}

static int write_index(struct pl_jw *w, const struct pl_jstate *s,
                       uint64_t off, unsigned kind, struct pl_error *errp)
{
    unsigned char rec[PL_J_INDEX_REC];

    index_rec(rec, s, off, kind);
    if (write(w->ifd, rec, sizeof(rec)) != (ssize_t)sizeof(rec)) {
        w->broken = true;
        return pl_errprintf(errp, "journal index %s/%06u.pji: %s", w->dir,
                            w->seg, strerror(errno ? errno : EIO));
    }
    return 0;
}

static int write_frame(struct pl_jw *w, struct pl_jstate *s, int stream,
                       const void *data, uint32_t len, struct pl_error *errp)
{
    unsigned char head[PL_J_FRAME_HEAD];
    uint64_t need = PL_J_FRAME_HEAD + (uint64_t)len;

    if (w->broken || w->seg == 0
        || (w->size + need > w->max && w->size > PL_J_HEAD))
        if (open_segment(w, w->seg + 1, errp) < 0)
            return -1;
    bool first = s->seg != w->seg;
    uint64_t off = w->size;
    frame_head(head, s, stream, 0, first ? 0 : s->last, data, len);
    struct iovec iov[2] = {
        { .iov_base = head, .iov_len = sizeof(head) },
        { .iov_base = (void *)data, .iov_len = len },
    };
    /* one write: a frame is whole or it is the torn tail */
    ssize_t n = writev(w->fd, iov, len ? 2 : 1);
    if (n != (ssize_t)need) {
        w->broken = true;
        if (n > 0)
            w->size += (uint64_t)n;
        return pl_errprintf(errp, "journal %s/%06u.pj: %s", w->dir, w->seg,
                            n < 0 ? strerror(errno) : "short write");
    }
    w->size += need;
    s->seg = w->seg;
    s->last = off;
    s->bytes += len;
    /* its first frame here: where a reader starts */
    return first ? write_index(w, s, off, PL_JI_START, errp) : 0;
}

int pl_jw_write(struct pl_jw *w, struct pl_jstate *s, int stream,
                const void *data, size_t len, struct pl_error *errp)
{
    const char *p = data;

    while (len > 0) {
        uint32_t n = len > PL_J_FRAME_MAX ? PL_J_FRAME_MAX : (uint32_t)len;
        if (write_frame(w, s, stream, p, n, errp) < 0)
            return -1;
        p += n;
        len -= n;
    }
    return 0;
}

int pl_jw_end(struct pl_jw *w, struct pl_jstate *s, struct pl_error *errp)
{
    /* its last frame in an earlier segment: that one's index has only
     * the start, and a reader reads that closed segment to its end */
    if (!s->seg || s->seg != w->seg || w->broken)
        return 0;
    return write_index(w, s, s->last, PL_JI_LAST, errp);
}

/* ---- reading ---- */

struct jseg {
    char node[NAME_MAX_NODE];
    uint32_t seq;
    int fd, ifd;
    uint64_t ioff;     /* index bytes read */
    bool active;       /* a wanted task has frames here */
    bool dead;         /* a torn frame: nothing after it is read */
    uint64_t cur;      /* the next frame to read */
    uint32_t nstart, nlast;
    uint64_t maxlast;  /* the last wanted frame, once every stream that
                          started here has ended here */
};

struct pl_jr {
    char dir[PL_PATH_MAX]; /* DIR/journal */
    char node[NAME_MAX_NODE]; /* "": every node */
    pl_jr_want_f want;
    void *arg;
    struct jseg *seg;
    size_t nseg, cap;
    size_t at;             /* the segment being read */
    unsigned torn;
    uint64_t read;
    /* a window of the segment being read */
    unsigned char *win;
    size_t nwin;
    uint64_t woff;
    size_t wseg;
    /* index records being read; N.B. the reader's own, not static:
     * libpilot's callers read journals from several threads */
    unsigned char *ibuf;
};

static int seg_cmp(const void *a, const void *b)
{
    const struct jseg *x = a, *y = b;
    int c = strcmp(x->node, y->node);

    return c ? c : (x->seq > y->seq) - (x->seq < y->seq);
}

static bool have_seg(const struct pl_jr *r, const char *node, uint32_t seq)
{
    for (size_t i = 0; i < r->nseg; i++)
        if (r->seg[i].seq == seq && !strcmp(r->seg[i].node, node))
            return true;
    return false;
}

static int add_segs(struct pl_jr *r, const char *node, struct pl_error *errp)
{
    char path[PL_PATH_MAX + NAME_MAX_NODE + 8];
    struct dirent *e;
    DIR *d;

    snprintf(path, sizeof(path), "%s/%s", r->dir, node);
    if (!(d = opendir(path)))
        return 0;
    while ((e = readdir(d))) {
        char *end;
        unsigned long n = strtoul(e->d_name, &end, 10);
        if (end == e->d_name || strcmp(end, ".pj") || n == 0
            || n >= UINT32_MAX || have_seg(r, node, (uint32_t)n))
            continue;
        if (r->nseg == r->cap) {
            size_t cap = r->cap ? 2 * r->cap : 16;
            struct jseg *s = realloc(r->seg, cap * sizeof(*s));
            if (!s) {
                closedir(d);
                return pl_errprintf(errp, "out of memory");
            }
            r->seg = s;
            r->cap = cap;
        }
        struct jseg *s = &r->seg[r->nseg++];
        memset(s, 0, sizeof(*s));
        snprintf(s->node, sizeof(s->node), "%s", node);
        s->seq = (uint32_t)n;
        s->fd = s->ifd = -1;
    }
    closedir(d);
    return 0;
}

/* Find the segments written since the last look. */
static int rescan(struct pl_jr *r, struct pl_error *errp)
{
    size_t before = r->nseg;

    if (*r->node) {
        if (add_segs(r, r->node, errp) < 0)
            return -1;
    }
    else {
        DIR *d = opendir(r->dir);
        struct dirent *e;
        if (!d)
            return 0;
        while ((e = readdir(d)))
            if (e->d_name[0] != '.' && strlen(e->d_name) < NAME_MAX_NODE
                && add_segs(r, e->d_name, errp) < 0) {
                closedir(d);
                return -1;
            }
        closedir(d);
    }
    if (r->nseg != before) {
        /* N.B. the window names a segment by position: drop it */
        qsort(r->seg, r->nseg, sizeof(*r->seg), seg_cmp);
        r->nwin = 0;
        r->at = 0;
    }
    return 0;
}

struct pl_jr *pl_jr_open(const char *dir, const char *node, pl_jr_want_f want,
                         void *arg, struct pl_error *errp)
{
    struct pl_jr *r = calloc(1, sizeof(*r));
    struct stat st;

    if (!r || !(r->win = malloc(WINDOW)) || !(r->ibuf = malloc(IBUF))) {
        if (r)
            free(r->win);
        free(r);
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    snprintf(r->dir, sizeof(r->dir), "%s/journal", dir);
    snprintf(r->node, sizeof(r->node), "%s", node ? node : "");
    r->want = want;
    r->arg = arg;
    if (stat(r->dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        pl_errset(errp, ENOENT, "%s: no journal there", r->dir);
        goto error;
    }
    if (rescan(r, errp) < 0)
        goto error;
    return r;
error:
    pl_jr_close(r);
    return NULL;
}

void pl_jr_close(struct pl_jr *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->nseg; i++) {
        if (r->seg[i].fd >= 0)
            close(r->seg[i].fd);
        if (r->seg[i].ifd >= 0)
            close(r->seg[i].ifd);
    }
    free(r->seg);
    free(r->win);
    free(r->ibuf);
    free(r);
}

unsigned pl_jr_torn(const struct pl_jr *r)
{
    return r->torn;
}

uint64_t pl_jr_read_bytes(const struct pl_jr *r)
{
    return r->read;
}

static int open_seg(struct pl_jr *r, struct jseg *s, bool index,
                    struct pl_error *errp)
{
    char path[PL_PATH_MAX + NAME_MAX_NODE + 32];
    int *fd = index ? &s->ifd : &s->fd;

    if (*fd >= 0)
        return 0;
    snprintf(path, sizeof(path), "%s/%s/%06u.%s", r->dir, s->node, s->seq,
             index ? "pji" : "pj");
    if ((*fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0
        && errno != ENOENT)
        return pl_errprintf(errp, "%s: %s", path, strerror(errno));
    return 0;
}

/* Read the index records added to segment 's' since the last look. */
static int read_index(struct pl_jr *r, struct jseg *s, struct pl_error *errp)
{
    unsigned char *buf = r->ibuf;
    ssize_t n;

    if (open_seg(r, s, true, errp) < 0)
        return -1;
    if (s->ifd < 0)
        return 0;
    while ((n = pread(s->ifd, buf, IBUF, (off_t)s->ioff)) > 0) {
        size_t whole = (size_t)n / PL_J_INDEX_REC * PL_J_INDEX_REC;
        if (whole == 0)
            break; /* a record being written */
        for (size_t i = 0; i < whole; i += PL_J_INDEX_REC) {
            const unsigned char *p = buf + i;
            uint64_t id = get64(p), off = get64(p + 16);
            uint32_t att = get32(p + 8), kind = get32(p + 24);
            /* the check of those wanted only: a million tasks' records
             * are read for one */
            if (!r->want(id, att, r->arg))
                continue;
            if (get32(p + 28) != pl_crc32(0, p, 28))
                continue; /* not trusted: the frames say it all */
            if (kind == PL_JI_START) {
                /* frames are read from the first one wanted on: a later
                 * start is after it */
                if (!s->active)
                    s->cur = off;
                s->active = true;
                s->nstart++;
            }
            else if (kind == PL_JI_LAST) {
                s->nlast++;
                if (off > s->maxlast)
                    s->maxlast = off;
            }
        }
        s->ioff += whole;
    }
    if (n < 0)
        return pl_errprintf(errp, "journal index: %s", strerror(errno));
    return 0;
}

/* 'n' bytes at 'off' of the segment at position 'i', in the window; NULL
 * when the file has fewer (*got: how many it has there). */
static const unsigned char *window(struct pl_jr *r, size_t i, uint64_t off,
                                   size_t n, size_t *got)
{
    struct jseg *s = &r->seg[i];

    if (r->wseg != i || off < r->woff || off + n > r->woff + r->nwin) {
        /* 64 KiB, or the frame: one task's read does not read 1 MiB */
        size_t want = n > 65536 ? n : 65536;
        ssize_t k = pread(s->fd, r->win, want, (off_t)off);
        r->wseg = i;
        r->woff = off;
        r->nwin = k > 0 ? (size_t)k : 0;
        r->read += r->nwin;
    }
    *got = off + n <= r->woff + r->nwin ? n
           : off < r->woff + r->nwin    ? (size_t)(r->woff + r->nwin - off)
                                        : 0;
    return *got == n ? r->win + (off - r->woff) : NULL;
}

/* Whether segment 'i' is its node's newest (one being written, maybe). */
static bool newest(const struct pl_jr *r, size_t i)
{
    return i + 1 == r->nseg || strcmp(r->seg[i + 1].node, r->seg[i].node);
}

/* The next wanted frame of segment 'i': 1, 0 (none now), -1. */
static int seg_next(struct pl_jr *r, size_t i, struct pl_jframe *f,
                    struct pl_error *errp)
{
    struct jseg *s = &r->seg[i];
    size_t got;

    if (s->dead || read_index(r, s, errp) < 0 || !s->active)
        return s->dead || !s->active ? 0 : -1;
    if (open_seg(r, s, false, errp) < 0)
        return -1;
    if (s->fd < 0)
        return 0;
    for (;;) {
        /* every stream that started here ended here: no frame of ours
         * after the last one's */
        if (s->nlast && s->nlast >= s->nstart && s->cur > s->maxlast)
            return 0;
        const unsigned char *h = window(r, i, s->cur, PL_J_FRAME_HEAD, &got);
        if (!h)
            goto short_read;
        uint32_t len = get32(h + 4);
        if (get32(h) != PL_J_FRAME_MAGIC || len > PL_J_FRAME_MAX)
            goto torn;
        uint64_t id = get64(h + 8);
        uint32_t att = get32(h + 16);
        if (!r->want(id, att, r->arg)) {
            s->cur += PL_J_FRAME_HEAD + (uint64_t)len;
            continue;
        }
        h = window(r, i, s->cur, PL_J_FRAME_HEAD + (size_t)len, &got);
        if (!h)
            goto short_read;
        unsigned char head[PL_J_FRAME_HEAD];
        memcpy(head, h, sizeof(head));
        memset(head + 36, 0, 4);
        uint32_t crc = pl_crc32(0, head, sizeof(head));
        if (pl_crc32(crc, h + PL_J_FRAME_HEAD, len) != get32(h + 36)) {
            /* maybe being written (a read may see part of a write) */
            struct stat st;
            if (newest(r, i) && fstat(s->fd, &st) == 0
                && (uint64_t)st.st_size
                       == s->cur + PL_J_FRAME_HEAD + (uint64_t)len)
                return 0;
            goto torn;
        }
        f->id = id;
        f->attempt = att;
        f->rank = get32(h + 20);
        f->stream = h[24];
        f->flags = h[25];
        f->prev = get64(h + 28);
        f->off = s->cur;
        f->node = s->node;
        f->seq = s->seq;
        f->data = (const char *)h + PL_J_FRAME_HEAD;
        f->len = len;
        s->cur += PL_J_FRAME_HEAD + (uint64_t)len;
        return 1;
    }
short_read:
    /* the end of what is written; in a closed segment, a torn tail */
    if (got == 0 || newest(r, i))
        return 0;
torn:
    s->dead = true;
    r->torn++;
    return 0;
}

int pl_jr_next(struct pl_jr *r, struct pl_jframe *f, struct pl_error *errp)
{
    int rc;

    /* on from the segment read last; at the end, a look for new ones and
     * one more sweep over all of them for what was added meanwhile */
    for (int sweep = 0; sweep < 2; sweep++) {
        for (; r->at < r->nseg; r->at++)
            if ((rc = seg_next(r, r->at, f, errp)) != 0)
                return rc;
        if (rescan(r, errp) < 0)
            return -1;
        r->at = 0;
    }
    return 0;
}
