/* daemon/db_py.c - SQLite state of the Python calls: their inputs, read
 * at dispatch, and their results, written with their end */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/db.h"
#include "daemon/db_private.h"
#include "proto/agentmsg.h"

static void bind_blob(sqlite3_stmt *st, int i, const void *p, size_t n)
{
    if (p)
        sqlite3_bind_blob64(st, i, p, n, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

/* A call's refs as the JSON text "[1,2,...]" (PL_SPEC_MAX_REFS ids of
 * at most 20 digits: 'buf' of REFS_TEXT), or NULL for none. */
#define REFS_TEXT (PL_SPEC_MAX_REFS * 21 + 3)
static const char *refs_text(const struct pl_spec *s, char *buf)
{
    size_t off = 1;

    if (!s->nrefs)
        return NULL;
    buf[0] = '[';
    for (uint32_t i = 0; i < s->nrefs && i < PL_SPEC_MAX_REFS; i++)
        off += (size_t)snprintf(buf + off, REFS_TEXT - off, "%s%llu",
                                i ? "," : "",
                                (unsigned long long)s->refs[i]);
    snprintf(buf + off, REFS_TEXT - off, "]");
    return buf;
}

int pl_db_pyinput_add(struct pl_db *db, uint64_t id, const struct pl_spec *s,
                      const char *prelude, const char *python,
                      struct pl_error *errp)
{
    sqlite3_stmt *st = db->st[ST_PYIN_ADD];
    char refs[REFS_TEXT];

    if (db->failed)
        return db_refuse(db, errp);
    if (db_begin(db, errp) < 0)
        return -1;
    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    bind_blob(st, 2, s->input, s->ninput);
    db_bind_text(st, 3, s->input_file);
    db_bind_text(st, 4, s->py_prelude ? s->py_prelude : prelude);
    db_bind_text(st, 5, s->python ? s->python : python);
    db_bind_text(st, 6, refs_text(s, refs));
    return db_step(db, ST_PYIN_ADD, errp);
}

void *pl_db_result_small(struct pl_db *db, uint64_t id, size_t max,
                         size_t *len)
{
    sqlite3_stmt *st = db->st[ST_REF_GET];
    void *copy = NULL;

    *len = 0;
    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    if (sqlite3_step(st) == SQLITE_ROW
        && sqlite3_column_type(st, 1) == SQLITE_BLOB) {
        size_t n = (size_t)sqlite3_column_bytes(st, 1);
        if (n && n <= max && (copy = malloc(n))) {
            memcpy(copy, sqlite3_column_blob(st, 1), n);
            *len = n;
        }
    }
    sqlite3_reset(st);
    return copy;
}

int pl_db_refs_check(struct pl_db *db, const uint64_t *refs, uint32_t n,
                     struct pl_error *errp)
{
    sqlite3_stmt *st = db->st[ST_TASK_FN];

    for (uint32_t i = 0; i < n; i++) {
        unsigned long long id = (unsigned long long)refs[i];
        sqlite3_bind_int64(st, 1, (sqlite3_int64)refs[i]);
        int rc = sqlite3_step(st);
        const char *fn = rc == SQLITE_ROW
                             ? (const char *)sqlite3_column_text(st, 0)
                             : NULL;
        bool call = fn && pl_fn_parse(fn) == PL_FN_PYCALL;
        sqlite3_reset(st);
        if (rc != SQLITE_ROW && rc != SQLITE_DONE)
            return db_err(db, errp, "read a ref's task");
        if (rc == SQLITE_DONE)
            return pl_errset(errp, EINVAL, "refs: no task %llu", id);
        if (!call)
            return pl_errset(errp, EINVAL, "refs: task %llu is not a Python "
                             "call (a ref's value is a call's result: "
                             "py_call, input, input_file)", id);
    }
    return 0;
}

void pl_db_pyinput_clear(struct pl_db_pyinput *in)
{
    int saved = errno;

    free(in->input);
    free(in->input_file);
    free(in->prelude);
    free(in->python);
    for (uint32_t i = 0; i < in->nrefs; i++) {
        free(in->refs[i].data);
        free(in->refs[i].file);
    }
    free(in->refs);
    memset(in, 0, sizeof(*in));
    errno = saved;
}

/* A copy of text column 'i' of 'st' into *s (NULL stays NULL).  0, or -1
 * (ENOMEM). */
static int col_dup(sqlite3_stmt *st, int i, char **s)
{
    const unsigned char *t = sqlite3_column_text(st, i);

    *s = NULL;
    if (!t)
        return 0;
    return (*s = strdup((const char *)t)) ? 0 : -1;
}

/* The refs of text column 4 of 'st' ("[1,2]", schema 10's; NULL: none)
 * into in->refs, each with its id alone.  0, or -1 (ENOMEM). */
static int refs_parse(sqlite3_stmt *st, struct pl_db_pyinput *in)
{
    const char *t = (const char *)sqlite3_column_text(st, 4);
    uint32_t n = 0;

    for (const char *p = t; p && *p; p++)
        n += *p == ',';
    if (!t || !strcmp(t, "[]"))
        return 0;
    n = n + 1 > PL_SPEC_MAX_REFS ? PL_SPEC_MAX_REFS : n + 1;
    if (!(in->refs = calloc(n, sizeof(*in->refs))))
        return -1;
    for (const char *p = t + 1; *p && in->nrefs < n;) {
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p)
            break;
        in->refs[in->nrefs++].id = v;
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}

/* The result stored for ref 'f' (its id set) into 'f': none, or the
 * pickle inline or its file.  0, or -1 with errp. */
static int ref_read(struct pl_db *db, struct pl_run_ref *f,
                    struct pl_error *errp)
{
    sqlite3_stmt *st = db->st[ST_REF_GET];
    int rc;

    sqlite3_bind_int64(st, 1, (sqlite3_int64)f->id);
    if ((rc = sqlite3_step(st)) == SQLITE_DONE) {
        sqlite3_reset(st);
        f->status = PL_PYR_NONE;
        return 0;
    }
    if (rc != SQLITE_ROW) {
        db_err(db, errp, "read a ref's result");
        sqlite3_reset(st);
        return -1;
    }
    int status = pl_pyr_parse((const char *)sqlite3_column_text(st, 0));
    const void *b = sqlite3_column_blob(st, 1);
    size_t n = (size_t)sqlite3_column_bytes(st, 1);
    f->status = status < 0 ? PL_PYR_NONE : status;
    if (f->status != PL_PYR_NONE
        && ((b && n && n <= PL_PY_RESULT_INLINE
             && !(f->data = malloc(n)))
            || (!b && col_dup(st, 2, &f->file) < 0))) {
        sqlite3_reset(st);
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    if (f->data) {
        memcpy(f->data, b, n);
        f->ndata = n;
    }
    if (!f->data && !f->file)
        f->status = PL_PYR_NONE; /* nothing to send: none */
    sqlite3_reset(st);
    return 0;
}

int pl_db_pyinput_get(struct pl_db *db, uint64_t id,
                      struct pl_db_pyinput *in, struct pl_error *errp)
{
    sqlite3_stmt *st = db->st[ST_PYIN_GET];
    int rc;

    memset(in, 0, sizeof(*in));
    sqlite3_bind_int64(st, 1, (sqlite3_int64)id);
    if ((rc = sqlite3_step(st)) == SQLITE_DONE) {
        sqlite3_reset(st);
        errno = ENOENT;
        return pl_errprintf(errp, "no input stored for call %llu",
                            (unsigned long long)id);
    }
    if (rc != SQLITE_ROW) {
        db_err(db, errp, "read a call's input");
        sqlite3_reset(st);
        return -1;
    }
    const void *b = sqlite3_column_blob(st, 0);
    size_t n = (size_t)sqlite3_column_bytes(st, 0);
    if ((b && !(in->input = malloc(n ? n : 1)))
        || col_dup(st, 1, &in->input_file) || col_dup(st, 2, &in->prelude)
        || col_dup(st, 3, &in->python) || refs_parse(st, in) < 0) {
        sqlite3_reset(st);
        pl_db_pyinput_clear(in);
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    if (b) {
        memcpy(in->input, b, n);
        in->ninput = n;
    }
    sqlite3_reset(st);
    for (uint32_t i = 0; i < in->nrefs; i++)
        if (ref_read(db, &in->refs[i], errp) < 0) {
            pl_db_pyinput_clear(in);
            return -1;
        }
    return 0;
}

int db_result_apply(struct pl_db *db, const struct jent *j,
                    struct pl_error *errp)
{
    sqlite3_stmt *st = db->st[ST_RESULT];

    sqlite3_bind_int64(st, 1, (sqlite3_int64)j->c.id);
    sqlite3_bind_int64(st, 2, j->c.attempt);
    sqlite3_bind_text(st, 3, pl_pyr_name(j->status), -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, j->size);
    bind_blob(st, 5, j->blob, j->nblob);
    db_bind_text(st, 6, j->s[0]);
    db_bind_text(st, 7, j->s[1]);
    return db_step(db, ST_RESULT, errp);
}

int pl_db_result_set(struct pl_db *db, const struct pl_db_result *r,
                     struct pl_error *errp)
{
    size_t lf = r->file ? strlen(r->file) + 1 : 0;
    size_t lr = r->repr ? strlen(r->repr) + 1 : 0;
    struct jent *j;

    if (!pl_pyr_name(r->status)) {
        errno = EINVAL;
        return pl_errprintf(errp, "a result of no status");
    }
    if (!(j = calloc(1, sizeof(*j) + lf + lr + r->ndata))) {
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    j->kind = J_RESULT;
    j->c.id = r->id;
    j->c.attempt = r->attempt;
    j->status = r->status;
    j->size = r->size;
    if (lf)
        j->s[0] = memcpy(j->buf, r->file, lf);
    if (lr)
        j->s[1] = memcpy(j->buf + lf, r->repr, lr);
    if (r->data) {
        memcpy(j->buf + lf + lr, r->data, r->ndata);
        j->blob = (const unsigned char *)j->buf + lf + lr;
        j->nblob = r->ndata;
    }
    return db_write_j(db, j, errp);
}
