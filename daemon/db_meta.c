/* daemon/db_meta.c - reading the meta rows: one key's value, or every
 * key under a prefix (the writes go through db.c's journal) */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/db_private.h"

int pl_db_meta_get(struct pl_db *db, const char *key, char **val,
                   struct pl_error *errp)
{
    sqlite3_stmt *st = NULL;
    int rc;

    *val = NULL;
    if (sqlite3_prepare_v2(db->h, "SELECT value FROM meta WHERE key = ?", -1,
                           &st, NULL) != SQLITE_OK)
        return db_err(db, errp, "read meta");
    db_bind_text(st, 1, key);
    if ((rc = sqlite3_step(st)) == SQLITE_ROW && sqlite3_column_text(st, 0)
        && !(*val = strdup((const char *)sqlite3_column_text(st, 0)))) {
        sqlite3_finalize(st);
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        db_err(db, errp, "read meta");
        sqlite3_finalize(st);
        return -1;
    }
    sqlite3_finalize(st);
    return 0;
}

int pl_db_meta_list(struct pl_db *db, const char *prefix,
                    int (*cb)(const char *key, const char *val, void *arg),
                    void *arg, struct pl_error *errp)
{
    sqlite3_stmt *st = NULL;
    size_t plen = strlen(prefix);
    int rc;

    /* substr, not LIKE: a prefix holds no pattern */
    if (sqlite3_prepare_v2(db->h, "SELECT key, value FROM meta WHERE "
                           "substr(key, 1, ?2) = ?1 AND value IS NOT NULL "
                           "ORDER BY key", -1, &st, NULL) != SQLITE_OK)
        return db_err(db, errp, "read meta");
    db_bind_text(st, 1, prefix);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)plen);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        if (cb((const char *)sqlite3_column_text(st, 0),
               (const char *)sqlite3_column_text(st, 1), arg) < 0) {
            sqlite3_finalize(st);
            errno = ENOMEM;
            return pl_errprintf(errp, "out of memory");
        }
    if (rc != SQLITE_DONE) {
        db_err(db, errp, "read meta");
        sqlite3_finalize(st);
        return -1;
    }
    sqlite3_finalize(st);
    return 0;
}

int pl_db_node_vet_get(struct pl_db *db, const char *name, char **cordon,
                       char **vet, double *vet_time, struct pl_error *errp)
{
    sqlite3_stmt *st = NULL;
    const char *c, *v;
    int rc;

    *cordon = *vet = NULL;
    *vet_time = 0;
    if (sqlite3_prepare_v2(db->h, "SELECT cordon, vet, vet_time FROM nodes "
                           "WHERE name = ?", -1, &st, NULL) != SQLITE_OK)
        return db_err(db, errp, "read node");
    db_bind_text(st, 1, name);
    if ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        c = (const char *)sqlite3_column_text(st, 0);
        v = (const char *)sqlite3_column_text(st, 1);
        *vet_time = sqlite3_column_double(st, 2);
        if ((c && !(*cordon = strdup(c))) || (v && !(*vet = strdup(v)))) {
            free(*cordon);
            *cordon = NULL;
            sqlite3_finalize(st);
            errno = ENOMEM;
            return pl_errprintf(errp, "out of memory");
        }
    }
    else if (rc != SQLITE_DONE) {
        db_err(db, errp, "read node");
        sqlite3_finalize(st);
        return -1;
    }
    sqlite3_finalize(st);
    return 0;
}
