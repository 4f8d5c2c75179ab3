/* daemon/daemon.h - pilotd: sockets, request handlers, agents, shutdown */
#ifndef PL_DAEMON_DAEMON_H
#define PL_DAEMON_DAEMON_H

#include <stdbool.h>

#include <uv.h>

#include "proto/error.h"

struct pl_daemon_config {
    const char *dir;         /* the pilot directory */
    const char *keydir;      /* its keys (DIR/keys): server.key, allow/ */
    const char *id;          /* pilot id ("p3") */
    bool local;              /* one local agent, no Slurm */
    long job;                /* Slurm job id, 0 when local */
    int expected_agents;
    const char *bindir;      /* where pilot-agent is */
    const char *bind_addr;   /* this node's address */
    double heartbeat;        /* s between agent heartbeats */
    double lost_after;       /* s of silence before an agent is lost */
    double start_timeout;    /* s a task may stay assigned, sent to its
                                agent and not started, before it is
                                queued again; 0: no bound */
    uint32_t prefetch;       /* tasks an agent may hold beyond its free
                                cores (--prefetch, daemon/prefetch.c);
                                0: none */
    double drain_before;     /* s before the job's end when Slurm signals
                                the drain: no task whose timeout goes
                                past it starts */
    const char *agent_cores; /* local mode: --cores for the agent, or NULL */
    bool no_agent;           /* local mode: start none (they connect on
                                their own: pilot-agent --dir, --bench) */
    const char *pools[8];    /* --pool NAME:RPN[:GPR[:CPR]]: started at
                                start unless there already */
    int npools;
    bool ack_nosync;         /* acknowledge after the commit without the
                                fsync of the WAL (PILOT_ACK_SYNC=0: for
                                make bench's comparison) */
    bool metrics_http;       /* serve the metrics (daemon/metrics.c) ... */
    int metrics_port;        /* ... on this port of bind_addr (0: any) */
    const char *metrics_file; /* write them here (*.prom), or NULL ... */
    double metrics_interval; /* ... every this many s (0: the default) */
    const char *grow;        /* --grow max=K,...: pilotd grows itself
                                (docs/grow.md), or NULL */
};

struct pl_daemon;

/* Open the state, start the ZAP handler, bind the sockets (CURVE),
 * publish the endpoint, start the agents.  NULL with errp set. */
struct pl_daemon *pl_daemon_new(uv_loop_t *loop,
                                const struct pl_daemon_config *cfg,
                                struct pl_error *errp);
/* After uv_run() returned: free everything.  NULL is ok. */
void pl_daemon_free(struct pl_daemon *d);
/* 0 after a clean shutdown, else 1. */
int pl_daemon_exit_code(const struct pl_daemon *d);

#endif /* !PL_DAEMON_DAEMON_H */
