/* proto/query_nodes.c - read-only queries of the pilot's nodes: their
 * rows, and each one's vetting and cordon as status shows them
 */
#include <string.h>

#include "proto/query.h"

json_t *pl_query_vet_status(const char *state, double time,
                            const char *cordon, const char *vet)
{
    json_t *o = json_object(), *res = vet ? json_loads(vet, 0, NULL) : NULL;
    json_t *c;
    size_t i;

    if (!state)
        state = res ? (json_is_true(json_object_get(res, "ok")) ? "ok"
                                                                : "failed")
                : cordon && !strcmp(cordon, "vetting") ? "running"
                                                       : "none";
    json_object_set_new(o, "state", json_string(state));
    json_object_set_new(o, "time", time > 0 ? json_real(time) : json_null());
    json_object_set_new(o, "cordon", cordon ? json_string(cordon)
                                            : json_null());
    json_array_foreach(json_object_get(res, "checks"), i, c) {
        const char *det = json_string_value(json_object_get(c, "detail"));
        if (json_is_true(json_object_get(c, "ok")) && det
            && !strncmp(det, "not checked", 11)) {
            /* a check that passed without looking (the GPUs' with no
             * NVML): said, so that nobody takes it for a pass */
            json_t *notes = json_object_get(o, "notes");
            if (!notes)
                json_object_set_new(o, "notes", notes = json_array());
            json_array_append_new(notes, json_pack("{s:O, s:s}", "check",
                                  json_object_get(c, "name"), "detail",
                                  det));
        }
    }
    json_array_foreach(json_object_get(res, "checks"), i, c) {
        if (json_is_true(json_object_get(c, "ok")))
            continue;
        static const char *const keys[] = { "figure", "limit", "unit",
                                            "detail" };
        json_object_set(o, "check", json_object_get(c, "name"));
        for (size_t k = 0; k < 4; k++) {
            json_t *v = json_object_get(c, keys[k]);
            json_object_set(o, keys[k], v ? v : json_null());
        }
        break;
    }
    if (json_object_get(res, "took"))
        json_object_set(o, "took", json_object_get(res, "took"));
    json_decref(res);
    return o;
}

/* Each node's "vet" object from nodes.cordon, vet, vet_time (schema 11;
 * an older database has none: nothing is added). */
static void nodes_vet(sqlite3 *db, json_t *arr)
{
    sqlite3_stmt *st = NULL;
    json_t *n;
    size_t i;

    if (sqlite3_prepare_v2(db, "SELECT name, cordon, vet, vet_time FROM "
                               "nodes", -1, &st, NULL) != SQLITE_OK)
        return;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        json_array_foreach(arr, i, n) {
            const char *nn = json_string_value(json_object_get(n, "name"));
            if (!name || !nn || strcmp(nn, name))
                continue;
            const char *cordon = (const char *)sqlite3_column_text(st, 1);
            json_object_set_new(n, "vet", pl_query_vet_status(
                NULL, sqlite3_column_double(st, 3), cordon,
                (const char *)sqlite3_column_text(st, 2)));
            /* as a live pilotd's status has it (pilot top) */
            json_object_set_new(n, "cordon", cordon ? json_string(cordon)
                                                    : json_null());
            break;
        }
    }
    sqlite3_finalize(st);
}

json_t *pl_query_nodes(sqlite3 *db, struct pl_error *errp)
{
    sqlite3_stmt *st = NULL;
    json_t *arr = json_array();
    int rc;

    if (sqlite3_prepare_v2(db, "SELECT name, cores, gpus, state, joined, "
                               "last_seen FROM nodes ORDER BY name",
                           -1, &st, NULL) != SQLITE_OK)
        goto dberr;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        json_t *n = json_object();
        json_object_set_new(n, "name", pl_query_col(st, 0));
        json_object_set_new(n, "cores",
            pl_query_intlist((const char *)sqlite3_column_text(st, 1)));
        json_object_set_new(n, "gpus",
            pl_query_intlist((const char *)sqlite3_column_text(st, 2)));
        json_object_set_new(n, "state", pl_query_col(st, 3));
        json_object_set_new(n, "joined", pl_query_col(st, 4));
        json_object_set_new(n, "last_seen", pl_query_col(st, 5));
        json_array_append_new(arr, n);
    }
    if (rc != SQLITE_DONE)
        goto dberr;
    sqlite3_finalize(st);
    nodes_vet(db, arr);
    return arr;
dberr:
    pl_query_dberr(db, errp, "list nodes");
    sqlite3_finalize(st);
    json_decref(arr);
    return NULL;
}
