/* proto/query_py.c - read-only queries of Python calls' results */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/query.h"
#include "proto/strv.h"

/* The ids as the JSON text "[1,2,...]" for json_each(), or NULL. */
static char *ids_text(const uint64_t *ids, size_t n)
{
    size_t len = 3 + n * 21, off = 1;
    char *s = malloc(len);

    if (!s)
        return NULL;
    s[0] = '[';
    for (size_t i = 0; i < n; i++)
        off += (size_t)snprintf(s + off, len - off, "%s%" PRIu64,
                                i ? "," : "", ids[i]);
    snprintf(s + off, len - off, "]");
    return s;
}

/* The entry of the row 'st' is on: {"id", "status", "size", "result" or
 * "result_file"}, or {"id", "status": null} when the task has none. */
static json_t *entry(sqlite3_stmt *st, size_t *bytes)
{
    json_t *e = json_pack("{s:I}", "id",
                          (json_int_t)sqlite3_column_int64(st, 0));

    *bytes = 0;
    if (!e)
        return NULL;
    if (sqlite3_column_type(st, 1) == SQLITE_NULL) {
        json_object_set_new(e, "status", json_null());
        return e;
    }
    json_object_set_new(e, "status",
                        json_string((const char *)sqlite3_column_text(st, 1)));
    json_object_set_new(e, "size", json_integer(sqlite3_column_int64(st, 2)));
    if (sqlite3_column_type(st, 3) == SQLITE_BLOB) {
        size_t n = (size_t)sqlite3_column_bytes(st, 3);
        char *b64 = pl_b64_encode(sqlite3_column_blob(st, 3), n);
        if (!b64) {
            json_decref(e);
            return NULL;
        }
        *bytes = strlen(b64);
        json_object_set_new(e, "result", json_string(b64));
        free(b64);
    }
    else if (sqlite3_column_type(st, 4) == SQLITE_TEXT) {
        json_object_set_new(e, "result_file",
                            json_string((const char *)sqlite3_column_text(st,
                                                                          4)));
        *bytes = (size_t)sqlite3_column_bytes(st, 4);
    }
    return e;
}

json_t *pl_query_results(sqlite3 *db, const uint64_t *ids, size_t n,
                         size_t budget, struct pl_error *errp)
{
    /* one statement: one read transaction, the entries in the ids'
     * order, an id without a row (no result, no task) null */
    static const char sql[] =
        "WITH q(i, id) AS (SELECT key, value FROM json_each(?1)) "
        "SELECT q.id, r.status, r.size, r.data, r.file FROM q "
        "LEFT JOIN results r ON r.task = q.id ORDER BY q.i";
    sqlite3_stmt *st = NULL;
    json_t *out = json_array();
    char *text = ids_text(ids, n);
    size_t used = 0;
    bool cut = false;
    int rc;

    if (!out || !text)
        goto nomem;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        goto dberr;
    sqlite3_bind_text(st, 1, text, -1, SQLITE_STATIC);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        size_t bytes;
        json_t *e;
        if (cut) {
            /* the rest is asked for again: no bytes read for it */
            e = json_pack("{s:I, s:b}", "id",
                          (json_int_t)sqlite3_column_int64(st, 0), "more",
                          1);
        }
        else if ((e = entry(st, &bytes)) && json_array_size(out) > 0
                 && used + bytes + 64 > budget) {
            json_decref(e);
            cut = true;
            e = json_pack("{s:I, s:b}", "id",
                          (json_int_t)sqlite3_column_int64(st, 0), "more",
                          1);
        }
        else
            used += bytes + 64; /* the entry's keys and numbers */
        if (!e || json_array_append_new(out, e) < 0)
            goto nomem;
    }
    if (rc != SQLITE_DONE)
        goto dberr;
    sqlite3_finalize(st);
    free(text);
    return out;
nomem:
    errno = ENOMEM;
    pl_errprintf(errp, "out of memory");
    goto error;
dberr:
    pl_errprintf(errp, "read results: %s", sqlite3_errmsg(db));
    errno = EIO;
error:
    sqlite3_finalize(st);
    json_decref(out);
    free(text);
    return NULL;
}
