/* client/conn_private.h - what conn.c and conn_ops.c share: a request
 * sent to pilotd (no other module includes this) */
#ifndef PL_CLIENT_CONN_PRIVATE_H
#define PL_CLIENT_CONN_PRIVATE_H

#include <stdint.h>

#include <jansson.h>

#include "client/conn.h"
#include "proto/error.h"
#include "proto/msg.h"

/* The number to build the next request with, or 0 with errp set
 * (ENOTCONN) when pilotd is not connected. */
uint64_t conn_seq(struct pl_conn *c, struct pl_error *errp);

/* Send the request built in 'w' (which this destroys) and return the
 * reply data as a new JSON value; 'what' names the request when the
 * data is not of type 'want' (-1: any). */
json_t *conn_call(struct pl_conn *c, struct pl_wbuf *w, int want,
                  const char *what, struct pl_error *errp);

#endif
