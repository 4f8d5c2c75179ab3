/* agent/benchmany.h - many bench agents in one process, on one loop */
#ifndef PL_AGENT_BENCHMANY_H
#define PL_AGENT_BENCHMANY_H

#include <stdint.h>

/* What 'pilot-agent --bench --bench-agents N' was given. */
struct pl_benchmany_opts {
    const char *connect;   /* pilotd's agent endpoint */
    const char *keys;      /* the pilot's keys directory */
    const char *node;      /* names NODE-0 .. NODE-(N-1) */
    const char *cores;     /* each agent's slots (a CPU list), or NULL */
    uint32_t agents;       /* N */
};

/* Run N bench agents, each its own DEALER to pilotd (one ZeroMQ context,
 * one libuv loop), each as 'pilot-agent --bench' behaves on the wire:
 * REGISTER until WELCOME, each RUN entry reported running then done
 * (exit 0) at once, GOT, PULL, HEARTBEAT, VET answered fit.  Returns
 * the process's exit code once every agent got EXIT (0), or at SIGTERM
 * or SIGINT (0), or 1 on a start failure (logged). */
int pl_benchmany_main(const struct pl_benchmany_opts *o);

#endif /* !PL_AGENT_BENCHMANY_H */
