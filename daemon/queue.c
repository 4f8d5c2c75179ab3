/* daemon/queue.c - runs of queued array elements kept compact */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/queue.h"
#include "proto/strv.h"

char *pl_queue_subst(const char *s, uint64_t idx)
{
    char num[24], *out, *o;
    size_t n = 0;

    errno = 0;
    if (!s)
        return NULL;
    /* N.B. not snprintf(): every array element made comes here, for its
     * argv, and it cost 1.4k instructions a task in scenario 2 */
    size_t nl = pl_utoa(num, (unsigned long long)idx);
    for (const char *p = s; (p = strstr(p, "{}")); p += 2)
        n++;
    if (!(out = malloc(strlen(s) + n * nl + 1)))
        return NULL;
    for (o = out; *s;) {
        if (s[0] == '{' && s[1] == '}') {
            memcpy(o, num, nl);
            o += nl;
            s += 2;
        }
        else
            *o++ = *s++;
    }
    *o = '\0';
    return out;
}

char **pl_queue_subst_strv(char *const *v, uint64_t idx)
{
    size_t n = pl_strv_len(v);
    char **out;

    if (!(out = calloc(n + 1, sizeof(*out))))
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (!(out[i] = pl_queue_subst(v[i], idx))) {
            pl_strv_free(out);
            errno = ENOMEM;
            return NULL;
        }
    }
    return out;
}

struct pl_qrun *pl_qrun_new(uint64_t id0, uint64_t n, uint64_t idx0,
                            uint64_t step, char ***argv, char ***env,
                            char **cwd)
{
    struct pl_qrun *r = calloc(1, sizeof(*r));

    if (!r)
        return NULL;
    r->proto.run = r;
    r->proto.ranks = 1;
    r->proto.cores_per_rank = 1;
    r->proto.exit_code = r->proto.signal = -1;
    r->proto.argv = *argv;
    r->proto.env = *env;
    r->proto.cwd = *cwd;
    *argv = NULL;
    *env = NULL;
    *cwd = NULL;
    r->id0 = r->first = id0;
    r->end = id0 + n;
    r->idx0 = idx0;
    r->step = step;
    return r;
}

void pl_qrun_free(struct pl_qrun *r)
{
    if (!r)
        return;
    pl_strv_free(r->proto.argv);
    pl_strv_free(r->proto.env);
    free(r->proto.cwd);
    free(r);
}

/* Copies of the strings of 'from' into 'to' (which has none).  0 or
 * -1 (ENOMEM: 'to' keeps what was copied, for its owner to free). */
static int strings_copy(struct pl_dtask *to, const struct pl_dtask *from)
{
    if ((from->env && !(to->env = pl_strv_dup(from->env)))
        || (from->cwd && !(to->cwd = strdup(from->cwd)))) {
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

struct pl_qrun *pl_qrun_tail(const struct pl_qrun *r, uint64_t from)
{
    struct pl_qrun *t = malloc(sizeof(*t));

    if (!t)
        return NULL;
    *t = *r;
    t->proto.run = t;
    t->proto.argv = t->proto.env = NULL;
    t->proto.cwd = NULL;
    t->proto.inq = false;
    t->first = from;
    if ((r->proto.argv && !(t->proto.argv = pl_strv_dup(r->proto.argv)))
        || strings_copy(&t->proto, &r->proto) < 0) {
        pl_qrun_free(t);
        errno = ENOMEM;
        return NULL;
    }
    return t;
}

struct pl_dtask *pl_qrun_elem_bare(const struct pl_qrun *r, uint64_t id)
{
    struct pl_dtask *t = malloc(sizeof(*t));
    uint64_t k = id - r->id0;

    if (!t)
        return NULL;
    *t = r->proto;
    t->run = NULL;
    t->inq = false;
    t->argv = t->env = NULL;
    t->cwd = NULL;
    t->id = id;
    t->array_index = r->idx0 + k * r->step;
    t->serial = r->proto.serial + k;
    return t;
}

struct pl_dtask *pl_qrun_elem(const struct pl_qrun *r, uint64_t id)
{
    struct pl_dtask *t = pl_qrun_elem_bare(r, id);

    if (!t)
        return NULL;
    if ((r->proto.argv
         && !(t->argv = pl_queue_subst_strv(r->proto.argv, t->array_index)))
        || strings_copy(t, &r->proto) < 0) {
        pl_strv_free(t->argv);
        pl_strv_free(t->env);
        free(t->cwd);
        free(t);
        errno = ENOMEM;
        return NULL;
    }
    return t;
}

/* The index of the first run whose ids end after 'id' (rs->n: none). */
static size_t runs_at(const struct pl_qruns *rs, uint64_t id)
{
    size_t lo = 0, hi = rs->n;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (rs->v[mid]->end <= id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int pl_qruns_add(struct pl_qruns *rs, struct pl_qrun *r)
{
    size_t at;

    if (rs->n == rs->cap) {
        size_t ncap = rs->cap ? rs->cap * 2 : 16;
        struct pl_qrun **nv = realloc(rs->v, ncap * sizeof(*nv));
        if (!nv)
            return -1;
        rs->v = nv;
        rs->cap = ncap;
    }
    /* new ids come last: the search is for a run split in two */
    at = rs->n && rs->v[rs->n - 1]->end > r->first ? runs_at(rs, r->first)
                                                   : rs->n;
    memmove(&rs->v[at + 1], &rs->v[at], (rs->n - at) * sizeof(*rs->v));
    rs->v[at] = r;
    rs->n++;
    return 0;
}

void pl_qruns_del(struct pl_qruns *rs, const struct pl_qrun *r)
{
    size_t at = runs_at(rs, r->first);

    /* an emptied run (first == end) sorts among those of its ids */
    while (at < rs->n && rs->v[at] != r)
        at++;
    if (at == rs->n) {
        for (at = 0; at < rs->n && rs->v[at] != r; at++)
            ;
        if (at == rs->n)
            return;
    }
    memmove(&rs->v[at], &rs->v[at + 1], (rs->n - at - 1) * sizeof(*rs->v));
    rs->n--;
}

struct pl_qrun *pl_qruns_find(const struct pl_qruns *rs, uint64_t id)
{
    size_t at = runs_at(rs, id);

    return at < rs->n && rs->v[at]->first <= id && id < rs->v[at]->end
               ? rs->v[at]
               : NULL;
}
