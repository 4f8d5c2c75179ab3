/* daemon/db_meta.c - the meta and nodes rows: a meta key's value, or
 * every key under a prefix; their writes (and a node's row, its
 * vetting), kept in db.c's journal until stored */
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

int pl_db_node_set(struct pl_db *db, const char *name, const char *cores,
                   const char *gpus, const char *state, double now,
                   struct pl_error *errp)
{
    const char *v[4] = { name, cores, gpus, state };
    struct jent *j;

    if (!name || !state) {
        errno = EINVAL;
        return pl_errprintf(errp, "a node row needs a name and a state");
    }
    if (!(j = jent_new(J_NODE, v, 4))) {
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    j->c.time = j->joined = now;
    return db_write_j(db, j, errp);
}

int pl_db_node_vet_set(struct pl_db *db, const char *name,
                       const char *cordon, const char *vet, double vet_time,
                       struct pl_error *errp)
{
    const char *v[3] = { name, cordon, vet };
    struct jent *j;

    if (!name) {
        errno = EINVAL;
        return pl_errprintf(errp, "a node row needs a name");
    }
    if (!(j = jent_new(J_NODE_VET, v, 3))) {
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    j->c.time = vet_time;
    return db_write_j(db, j, errp);
}

int pl_db_meta_set(struct pl_db *db, const char *key, const char *val,
                   struct pl_error *errp)
{
    const char *v[2] = { key, val };
    struct jent *j;

    if (!key) {
        errno = EINVAL;
        return pl_errprintf(errp, "a meta row needs a key");
    }
    if (!(j = jent_new(J_META, v, 2))) {
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    return db_write_j(db, j, errp);
}
