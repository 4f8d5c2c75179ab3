/* lib/pilot_private.h - what lib/pilot.c and lib/call.c share
 *
 * Not installed, and no other module includes it.
 */
#ifndef PL_LIB_PILOT_PRIVATE_H
#define PL_LIB_PILOT_PRIVATE_H

#include <pthread.h>
#include <stdbool.h>

#include <jansson.h>

#include "client/conn.h"
#include "lib/pilot.h"
#include "proto/error.h"

/* A connection: one pl_conn (one DEALER and its private libuv loop)
 * whose requests 'lock' sends one at a time. */
struct pilot {
    pthread_mutex_t lock;      /* held across each call's requests */
    struct pl_find find;       /* how it was found; conn->find points
                                  here */
    char home[PL_PATH_MAX];    /* find.home's copy, when given */
    char id[PL_ID_MAX];        /* find.pilot's copy */
    char keys[PL_PATH_MAX];    /* find.keys's copy ($PILOT_KEYS) */
    struct pl_conn *conn;
};

/* Fill 'err' (may be NULL) from errno and 'e'; returns -1. */
int pl_lib_fail(struct pilot_error *err, const struct pl_error *e);

/* *out = 'j' as compact JSON text (the caller's: pilot_free()).  0, or
 * -1 with errp (ENOMEM). */
int pl_lib_dump(const json_t *j, char **out, struct pl_error *errp);

/* After a read failed: whether pilotd has gone since and 'p' now reads
 * the state database (the read may be asked again).  Called with
 * p->lock held. */
bool pl_lib_recheck(struct pilot *p);

#endif /* !PL_LIB_PILOT_PRIVATE_H */
