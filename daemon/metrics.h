/* daemon/metrics.h - pilotd's metrics for Prometheus: HTTP and a textfile
 *
 * Off unless pilotd has --metrics-port or --metrics-file.  The loop
 * renders the text each second into a buffer it publishes; a
 * libmicrohttpd thread serves the latest buffer and touches nothing
 * else of pilotd's.  The textfile (node_exporter's textfile collector)
 * is written from the same buffer by libuv's thread pool.
 */
#ifndef PL_DAEMON_METRICS_H
#define PL_DAEMON_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/error.h"

struct pl_daemon;
struct pl_dtask;

#define PL_METRICS_INTERVAL 15.0 /* s between textfile writes (default) */

/* The textfile's path is acceptable: node_exporter reads only files
 * ending in ".prom".  0, or -1 with errp (EINVAL). */
int pl_metrics_file_check(const char *path, struct pl_error *errp);

/* Start what d->cfg asks for (metrics_http: the HTTP server on
 * d->cfg.bind_addr, port metrics_port; metrics_file: the textfile), or
 * nothing.  Sets
 * d->metrics.  0, or -1 with errp (the port is taken, ...). */
int pl_metrics_start(struct pl_daemon *d, struct pl_error *errp);
/* Stop serving and close the timer (pilotd's stop); the textfile gets
 * one last write.  Idempotent; nothing when off. */
void pl_metrics_stop(struct pl_daemon *d);
/* After pl_metrics_stop() and the loop's end.  Nothing when off. */
void pl_metrics_free(struct pl_daemon *d);

/* "http://ADDR:PORT/metrics", or NULL when not served. */
const char *pl_metrics_url(const struct pl_daemon *d);
/* The textfile's path, or NULL. */
const char *pl_metrics_path(const struct pl_daemon *d);

/* daemon/task.c's hook: task 't' goes from state 'from' (0: new) to
 * 'to' at 'time' (pl_now()).  Counts starts, and observes the queue
 * wait at a start and the run time at an end. */
void pl_metrics_task(struct pl_daemon *d, struct pl_dtask *t, int from,
                     int to, double time);
/* A commit of the batch took 'ns' (or its WAL sync, 'sync'). */
void pl_metrics_commit(struct pl_daemon *d, uint64_t ns, bool sync);

/* Render the metrics now: OpenMetrics ('om') or Prometheus' text format
 * 0.0.4.  A new string (*len bytes), or NULL (ENOMEM).  For the tests;
 * the loop publishes its own. */
char *pl_metrics_render(struct pl_daemon *d, bool om, size_t *len);

#endif /* !PL_DAEMON_METRICS_H */
