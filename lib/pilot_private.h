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
#include "proto/clientmsg.h"
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

/* Lend f->slurm the process's libslurm session, and take it back
 * (lib/pilot.c says why there is one).  Around a call that may look at
 * a Slurm pilot: pl_conn_open(), pl_pilot_probe(). */
void pl_lib_slurm_lend(struct pl_find *f);
void pl_lib_slurm_return(struct pl_find *f);

/* 'ids' (one id, or an array of them: ID or "ID.N") into *sel, as
 * pilot_call()'s ops read them; errors name 'what'.  0 (pl_sel_req_clear()
 * it), or -1 with errp (EINVAL, E2BIG, ENOMEM). */
int pl_lib_sel(const char *what, const json_t *ids, struct pl_sel_req *sel,
               struct pl_error *errp);

/* The tasks 'ids' (a JSON array of ids) that a submit with the watch
 * 'token' added to it in pilotd: told to the watches of this process
 * that have that token (lib/watch.c), so that a watch made again holds
 * them.  Preserves errno. */
void pl_lib_watch_noted(const char *token, const json_t *ids);

#endif /* !PL_LIB_PILOT_PRIVATE_H */
