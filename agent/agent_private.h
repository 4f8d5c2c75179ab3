/* agent/agent_private.h - what the files of the agent share: struct
 * pl_agent and the calls between agent.c, link.c and run.c
 *
 * N.B. for agent/agent.c, link.c, run.c, pool.c and pyw.c only: every other
 * module sees the agent through agent/agent.h.
 */
#ifndef PL_AGENT_AGENT_PRIVATE_H
#define PL_AGENT_AGENT_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <uv.h>

#include "agent/agent.h"
#include "agent/bind_cpu.h"
#include "agent/bind_cuda.h"
#include "agent/gpusample.h"
#include "agent/leftover.h"
#include "agent/resources.h"
#include "agent/task.h"
#include "proto/agentmsg.h"
#include "proto/error.h"
#include "proto/keys.h"
#include "proto/msg.h"
#include "proto/pilotdir.h"
#include "proto/zmon.h"
#include "proto/zwatch.h"

struct outmsg;  /* link.c: a message waiting for room on the socket */
struct unacked; /* link.c: an end pilotd has not committed yet */
struct pl_env;  /* agent/env.h: a task's environment */
struct pl_env_cache;

/* The fields in groups: the state of the file each names. */
struct pl_agent {
    /* agent.c */
    uv_loop_t loop;
    uv_signal_t sigchld;   /* reaps the tasks (pl_task_reap()) */
    uv_timer_t flush;      /* zero timeout: the iteration's events leave;
                              FLUSH_SOON_MS when only starts wait */
    bool flush_soon;       /* 'flush' armed with a delay (FLUSH_SOON_MS,
                              or what is left of HOLD_MS): a kick runs it
                              at once */
    uv_timer_t deadline;   /* bounds the wait for tasks at shutdown */
    uv_timer_t outcheck;   /* the tasks' output limits, every 0.25 s */
    bool sigchld_ok;       /* 'sigchld' initialised: close it */
    bool exiting;
    bool finished;         /* uv_stop() called */
    bool bench;            /* run nothing: report each task done at once */
    uint64_t hold_ms;      /* events wait this long while entries are
                              held (HOLD_MS; pl_agent_set_hold()) */

    /* link.c */
    uv_timer_t reg;        /* REGISTER again until WELCOME */
    uv_timer_t heartbeat;
    uv_timer_t watch;      /* is pilotd still there? */
    void *zctx;
    void *zsock;           /* DEALER, a CURVE client of pilotd */
    struct pl_zwatch *zw;
    struct pl_zmon *mon;   /* its handshakes: refused, failed */
    struct pl_keys_peer keys;
    uint64_t handshake_log_ms; /* last handshake failure logged */
    int exit_code;         /* 1 once pilotd refused our key */
    char endpoint[256];
    char node[256];        /* as pilotd calls us (WELCOME), else ours */
    char dir[PL_PATH_MAX]; /* the pilot directory, "" if not given */
    double orphan_after;   /* s without pilotd before we give up; 0 never */
    uint64_t seq;          /* of the next message we send */
    struct pl_event *events; /* for the next EVENTS message */
    size_t nevents;
    size_t cap_events;
    uint64_t events_ms;    /* uv_now() when events[0] was added: they wait
                              HOLD_MS at most (agent.c) */
    /* Ends sent but not yet committed by pilotd (no ACK): sent again in
     * every REGISTER, and on their own after a while. */
    struct unacked *unacked;
    size_t nunacked;
    size_t cap_unacked;
    double heard;          /* last message from pilotd (pl_agent_now()) */
    double spoke;          /* last message sent (pl_agent_now()): the
                              HEARTBEAT is due a period after the older
                              of it and 'heard' (link.c) */
    uint64_t last_run;     /* seq of the last RUN or KILL read from this
                              pilotd (they are numbered together) */
    bool got_due;          /* GOT last_run goes with the next flush */
    uv_timer_t got;        /* GOT at most every GOT_MS (link.c) */
    uint64_t got_ms;       /* when the last GOT left (uv_now()) */
    bool end_freed;        /* an end of a one-rank task leaves in this
                              flush: pilotd schedules its cores at once,
                              a PULL would say nothing more */
    char instance[PL_INSTANCE_MAX + 1]; /* the pilotd that welcomed us */
    double reread;         /* last read of the endpoint file */
    struct outmsg *outq;   /* FIFO of unsent messages */
    struct outmsg **outq_tail;
    size_t noutq;
    bool welcomed;
    bool pulled;           /* sent PULL since the last RUN */

    /* run.c; link.c reads 'res' for REGISTER and PULL */
    struct pl_resources *res;
    struct pl_bind_cpu *cpu;
    struct pl_bind_cuda *cuda;
    int devnull;               /* the tasks' stdin */
    struct pl_outdir outdir;   /* the last tasks' output directory, kept
                                  open and checked (pl_task_start()) */
    struct pl_env *base_env;   /* ours without the step's (pl_env_drop_step) */
    struct pl_env_cache *envcache; /* base_env + a spec's env, per spec */
    char owner[PL_OWNER_MAX];  /* our part of the tasks' keys (leftover.h) */
    struct pl_task **running;  /* spawned, not exited */
    size_t nrunning;
    size_t cap_running;
    struct pl_prefetch *pref;  /* entries placed beyond our free cores,
                                  started as ends free cores (prefetch.h) */
    struct pl_task **dead;     /* exited: freed from the flush timer */
    size_t ndead;
    size_t cap_dead;

    /* pool.c: the pool workers of this node (NULL: no socket) */
    struct pl_wpool *wpool;
    /* pyw.c: the warm Python workers (agent/pyw.h) */
    struct pl_pyw *pyw;
    /* vet.c: the node's vetting (agent/vet.h) */
    struct pl_vet *vet;

    /* agent.c starts it, run.c and pyw_call.c watch their ranks with it:
     * the GPUs' use (agent/gpusample.h); NULL: none sampled */
    struct pl_gpusample *gsample;
    double gpu_sample;     /* s between samples; 0: no sampling */
};

/* The loop's clock in seconds, for intervals (pl_now() dates events). */
static inline double pl_agent_now(struct pl_agent *a)
{
    return (double)uv_now(&a->loop) / 1000.0;
}

/* ---- agent.c ---- */

/* Make sure the flush timer runs at the start of the next iteration: it
 * frees the dead tasks, sends the events, then a PULL if one is due. */
void pl_agent_kick(struct pl_agent *a);
/* The same within FLUSH_SOON_MS, for what pilotd needs soon but not at
 * once (a start): a no-op task's end usually joins its start in one
 * EVENTS message, and pilotd stores both in one commit.  An end, or
 * anything else, kicked meanwhile runs the flush at once, which sends
 * them unless prefetched entries are still held (agent.c, HOLD_MS). */
void pl_agent_kick_soon(struct pl_agent *a);

/* Decode the message of 'len' bytes at 'buf' and hand it to its
 * handler; a bad or unknown one is logged and dropped. */
void pl_agent_dispatch(struct pl_agent *a, const void *buf, size_t len);

/* ---- link.c ---- */

/* Make the socket (a CURVE client as a->keys says), its watcher and the
 * monitor of its handshakes.  0, or -1 with errp set; pl_agent_link_close()
 * and pl_agent_link_free() undo whatever was made.  (The link's timers,
 * like every timer of the agent, are agent.c's to init and close.) */
int pl_agent_link_open(struct pl_agent *a, struct pl_error *errp);
/* Connect to a->endpoint and watch the socket.  0, or -1 with errp. */
int pl_agent_link_connect(struct pl_agent *a, struct pl_error *errp);
/* Send REGISTER, and again until WELCOME; watch for a silent pilotd. */
void pl_agent_link_up(struct pl_agent *a);
/* Stop the link's timers and the watcher (the socket stays open). */
void pl_agent_link_stop(struct pl_agent *a);
/* Free the watcher and the monitor, whose handles close with the loop's
 * last run. */
void pl_agent_link_close(struct pl_agent *a);
/* Close the socket, which lingers to flush what was sent, and the
 * context; free what waits to be sent.  After the loop is closed. */
void pl_agent_link_free(struct pl_agent *a);

/* A new event in 'state' for the next EVENTS message (the flush timer
 * is kicked), with the time now and nothing else set: the caller may
 * fill in the rest (an 'error' it gives is then owned by the agent).
 * NULL when out of memory (logged: the event is lost). */
struct pl_event *pl_agent_event_add(struct pl_agent *a, uint64_t id,
                                    uint64_t attempt, uint64_t rank,
                                    int state);
/* Send the events collected so far as one EVENTS message, if any. */
void pl_agent_events_send(struct pl_agent *a);
/* Whether an end of rank 'rank' of attempt 'attempt' of task 'id' waits
 * to be sent or committed: a RUN of it sent again is not run again. */
bool pl_agent_ended(const struct pl_agent *a, uint64_t id, uint64_t attempt,
                    uint64_t rank);
/* Send POOL_READY 'pr' to pilotd (welcomed or not: a REGISTER first
 * brings the reports again). */
struct pl_pool_ready;
void pl_agent_pool_ready_send(struct pl_agent *a,
                              const struct pl_pool_ready *pr);
/* Send VET_RESULT 'r' (its strings borrowed) to pilotd. */
struct pl_vet_result;
void pl_agent_vet_result_send(struct pl_agent *a,
                              const struct pl_vet_result *r);
/* Send GOT with the last RUN or KILL read, if one was read since: at
 * most every GOT_MS (a timer sends the one held back), far inside the
 * ORDER_RESEND after which pilotd sends a RUN again. */
void pl_agent_got_send(struct pl_agent *a);
/* Send PULL if welcomed, not pulled since the last RUN, not exiting and
 * cores are free. */
void pl_agent_pull(struct pl_agent *a);

/* ---- run.c ---- */

/* Start the prefetched entries that the cores freed by the ends not yet
 * sent take (agent/prefetch.h), before their EVENTS leave; the flush
 * forgets those cores (pl_prefetch_reset()) when the ends leave, and they
 * are pilotd's again. */
void pl_agent_prefetch_start(struct pl_agent *a);

/* Handlers of pilotd's messages (agent.c's table; run.c has RUN and
 * KILL): 0, or -1 with errp set when the message is refused (the caller
 * logs it). */
int pl_agent_welcome_cb(struct pl_agent *a, const struct pl_msg *m,
                        struct pl_error *errp);
int pl_agent_ack_cb(struct pl_agent *a, const struct pl_msg *m,
                    struct pl_error *errp);
int pl_agent_reregister_cb(struct pl_agent *a, const struct pl_msg *m,
                           struct pl_error *errp);

/* ---- vet.c ---- */

/* VET: run the node's checks in a child process (agent/vet.h). */
int pl_agent_vet_cb(struct pl_agent *a, const struct pl_msg *m,
                    struct pl_error *errp);

/* ---- run.c ---- */

int pl_agent_run_cb(struct pl_agent *a, const struct pl_msg *m,
                    struct pl_error *errp);
/* The environment of the rank of entry 'r' (docs/protocol.md): ours less
 * our step's, the entry's, then PILOT_*, the comm's and the binding's
 * variables.  NULL with errp set. */
struct pl_env *pl_agent_task_env(struct pl_agent *a, const struct pl_run *r,
                                 struct pl_error *errp);
int pl_agent_kill_cb(struct pl_agent *a, const struct pl_msg *m,
                     struct pl_error *errp);
/* Stop the tasks whose stdout or stderr is over their output limit
 * (every 0.25 s, from agent.c's timer). */
void pl_agent_check_output(struct pl_agent *a);
/* Free the tasks that exited since the last call. */
void pl_agent_free_dead(struct pl_agent *a);
/* Free every task, running (left running) or dead, and their lists. */
void pl_agent_free_tasks(struct pl_agent *a);

#endif /* !PL_AGENT_AGENT_PRIVATE_H */
