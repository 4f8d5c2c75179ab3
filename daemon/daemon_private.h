/* daemon/daemon_private.h - pilotd's state, for pilotd's own modules only
 *
 * One struct pl_daemon holds what the modules of pilotd share; each
 * module owns the fields its comment names and is the only one to write
 * them.  A task goes through them in this order (docs/architecture.md):
 * clients.c reads a request, submit.c stores and queues it, dispatch.c
 * places it (sched.c) and sends its RUN once stored (outq.c, store.c),
 * agents.c reads its agent's events, task.c records every state change
 * and its end, and recover.c takes tasks back after a restart;
 * launch.c runs the agents' srun step; daemon.c is the loop's life.
 */
#ifndef PL_DAEMON_PRIVATE_H
#define PL_DAEMON_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>
#include <uv.h>

#include "daemon/daemon.h"
#include "daemon/db.h"
#include "daemon/sched.h"
#include "proto/agentmsg.h"
#include "proto/allow.h"
#include "proto/msg.h"
#include "proto/pilotdir.h"
#include "proto/spec.h"
#include "proto/state.h"
#include "proto/vetmsg.h"
#include "proto/watchmsg.h"

#define KILL_GRACE 5.0          /* s between SIGTERM and SIGKILL */
/* After a failed commit: retry at most this often (s) from the loop
 * (the 1 s tick makes it every second), and from a submit or cancel.  A
 * retry replays the journal, one statement per write kept: what changed
 * since the failure, which is little, as no task starts meanwhile. */
#define STORE_RETRY 0.5
#define STORE_RETRY_REQ 0.1
/* The WAL is copied into the database at most this often (s) after a
 * commit, and at the 1 s tick: it stays about 0.25 s of writes long
 * (SQLite's own checkpoint at 1000 pages, 4 MiB, bounds a burst).  A
 * copy costs two fsyncs (8 ms here for 100 pages): SQLite's own alone,
 * every 1000 pages, would let the WAL grow to 4 MiB; every 100 pages, it
 * made a commit 3 times as slow (1.0 ms, not 0.34 ms, 8 writes each). */
#define CHECKPOINT 0.25
/* run_seq of a rank placed whose RUN waits for the commit: for
 * pl_agents_register() it is on its way */
#define RUN_UNSENT UINT64_MAX

/* ------------------------------------------------------------ outq.c */

/* A message to send after the batch's commit. */
struct pl_out {
    struct pl_out *next;
    void *sock;
    unsigned char rid[256];
    size_t ridlen;
    struct pl_wbuf w;
    uint64_t seq;            /* the request answered, for an error reply */
    uint64_t *undo;          /* tasks this reply acknowledges */
    size_t nundo;
    bool needs_commit;       /* acknowledges what the batch stores: if
                                its commit fails, an agent's is not sent
                                and a client's becomes an error */
    bool cancel;             /* the reply to a cancel */
    bool run;                /* a RUN: may leave before the sync of the
                                commit that placed it (pl_outq_send_runs()) */
    bool ack;                /* an agent's ACK: a RUN may pass it */
    char watch[PL_WATCH_TOKEN_MAX + 1]; /* a push of this watch, or "" */
};

/* A client request being answered: its routing id and seq, and the
 * allowed key that sent it (borrowed from the allow-list: valid while
 * its handler runs). */
struct pl_req {
    const void *rid;
    size_t ridlen;
    uint64_t seq;
    const struct pl_allow_key *key;
};

/* What pilotd knows of the agent of a node, beside the node's
 * resources (daemon/node.h): how to reach it on the agent socket. */
struct pl_link {
    struct pl_node *node;    /* borrowed: the scheduler's */
    unsigned char rid[256];  /* its ZeroMQ routing id */
    size_t ridlen;
    long pid;
    double last_seen;        /* pl_now() of its last message (shown) */
    double seen;             /* pl_mono() of it: judges it lost, so that
                                a step of the wall clock does not */
    uint64_t run_seq;        /* RUN and KILL messages sent to it (orders.c
                                numbers them together) */
    uint64_t got;            /* it read every one up to this (orders.c) */
    struct pl_order *orders; /* owned: those not acknowledged (orders.c) */
    size_t norders, caporders;
    /* agents.c: in d->live (the links of nodes up, oldest 'seen' first)
     * while 'live' is set */
    struct pl_link *live_prev, *live_next;
    bool live;
};

/* A task placed whose RUN waits for the commit of its assignment. */
struct pl_unsent {
    uint64_t id;
    uint32_t attempt;
};

/* A task whose dependency failed: it fails too, after the one that
 * ended (a list, not a recursion: a chain may be long). */
struct pl_depfail {
    uint64_t id, serial, dep;
    int state;                   /* the dependency's */
};

/* One agent started on one node, where the agents' step lost its own. */
struct pl_node_launch;

struct pl_daemon {
    uv_loop_t *loop;
    struct pl_daemon_config cfg;
    char dir[PL_PATH_MAX];
    char keydir[PL_PATH_MAX];
    char id[PL_ID_MAX];
    char host[256];
    char bindir[PL_PATH_MAX];
    char instance[96];           /* this pilotd, told apart from the last */
    double started;
    struct pl_db *db;
    struct pl_sched *sched;
    void *zctx;
    struct pl_auth *auth;        /* ZAP: judges the peers of both ROUTERs */
    const char *peer;            /* the "User-Id" of the message being
                                    handled (daemon/auth.c), for
                                    pl_auth_peer(); NULL between them */
    void *csock, *asock;         /* ROUTERs: clients, agents (CURVE) */
    struct pl_zwatch *czw, *azw;
    char cep[256], aep[256];
    uv_signal_t sigterm, sigint;
    uv_timer_t tick, stop_timer, restart_timer;
    uv_idle_t cancel_idle;       /* cancel.c: the next turn of a cancel */
    struct pl_canceljob *cancels; /* cancel.c: those not done, in order */
    int handles;                 /* uv handles still to close */
    bool stopping, stopped;
    bool draining;               /* stopping for the walltime (SIGTERM):
                                  interrupted tasks go back to the queue */
    time_t end_time;             /* the job's end (0: none or unknown) */
    double end_time_checked;
    /* bad input from peers: the window of lines logged (daemon.c) */
    double bad_since;
    unsigned bad_logged;
    unsigned long long bad_dropped;
    /* outq.c: sent after the batch's commit, in order */
    struct pl_out *outq, **outtail;
    /* task.c: the counters, tasks made, failed dependencies to follow */
    long long count[PL_ST_COUNT];
    long long total;
    uint64_t serial;             /* tasks made (pl_dtask.serial) */
    struct pl_depfail *depfail;  /* to fail, 'ndepfail' of them */
    size_t ndepfail, capdepfail;
    bool in_depfail;
    bool want_sched;             /* something may start: schedule at the
                                    end of the batch */
    uint64_t end_seq;            /* the end sequence: the last task's end
                                    took this (tasks.end_seq) */
    /* daemon.c: end_seq when the last commit stored everything: no end
     * above it is pushed yet */
    uint64_t end_seq_stored;
    /* watch.c: the watches (owned), how many are 'all', the replays'
     * turns of the loop, where the next turn starts */
    struct pl_watch **watches;
    size_t nwatches, capwatches;
    size_t nwatch_all;
    uv_idle_t watch_idle;
    size_t watch_rr;
    /* dispatch.c: placed, RUN not sent */
    struct pl_unsent *unsent;
    size_t nunsent, capunsent;
    /* agents.c: one link per node, in the scheduler's node order */
    struct pl_link **links;
    size_t nlinks, caplinks;
    struct pl_keymap *rids;      /* the links by routing id (keymap.h) */
    /* the links by their last word, oldest first: the tick looks at the
     * head only (no walk of 1,000 agents a second, issue 16); a link of
     * a node no longer up leaves it when it comes to the head */
    struct pl_link *live_first, *live_last;
    bool fit_checked;            /* the queue was checked against the
                                    nodes once all expected were up */
    /* store.c: a commit failed: until a retry stores the journal,
     * nothing is acknowledged and no task is started */
    double store_failed_since;   /* 0: everything is stored */
    double store_retry_at;       /* pl_mono() of the last retry */
    double ckpt_at;              /* pl_mono() of the last checkpoint */
    double tick_at;              /* pl_mono() of the last 1 s tick */
    /* daemon.c: the longest a batch (or a tick) held the loop, and when
     * (pl_now()): the status object's 'longest_batch' */
    double longest_batch;
    double longest_batch_at;
    double judge_after;          /* pl_mono() before which no agent is
                                    judged lost: set after a stall */
    int store_errno;             /* the reason last logged */
    /* recover.c: a pilotd restarted in its allocation: the agents of the
     * one before still run its tasks.  Until they are back (or
     * recover_until), the tasks the database says are on agents are
     * 'orphans' (pl_rank). */
    bool recovering;
    double recover_until;        /* pl_mono() */
    bool agents_deferred;        /* start the agents that did not return */
    /* orders.c: the tasks placed, for the bound on 'assigned' */
    struct pl_placed *placed;
    size_t nplaced, capplaced;
    /* submit.c: the Python calls' defaults (pilot up --py-prelude,
     * --python: the pilot directory's py-prelude and py-python files),
     * stored into the calls that name none; owned, may be NULL */
    char *py_prelude, *py_python;
    /* poolctl.c: the pools (daemon/pool.h), owned */
    struct pl_pool **pools;
    size_t npools, cappools;
    /* launch.c: the agents' step, its restarts, agents started per node */
    struct pl_child *launch;
    int restarts;
    struct pl_node_launch **node_launch;
    size_t nnode_launch;
    /* vet.c: node vetting's settings (the pilot directory's vet.yaml, or
     * the built-in ones), the last VET's token, the `pilot vet`s that
     * wait for their results */
    struct pl_vetconf vetconf;
    bool vet_on;
    bool vet_restore;            /* restarted in the same job: the nodes'
                                    stored vettings hold (in a new one,
                                    --resume, they are other machines) */
    uint64_t vet_token;
    struct pl_vetwait **vetwaits;
    size_t nvetwaits, capvetwaits;
    /* metrics.c: NULL unless served or written */
    struct pl_metrics *metrics;
    /* alloc.c: the allocations that joined (pilot grow), owned */
    struct pl_allocs *allocs;
};

/* ------------------------------------------------------------ daemon.c */

/* pl_log() for a line about bad input from a peer: at most a burst of
 * them in each window, then one line says how many were left out. */
void pl_daemon_bad_log(struct pl_daemon *d, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* One message of a ROUTER socket: its routing id and its body. */
typedef void (*pl_daemon_msg_f)(struct pl_daemon *d, const void *rid,
                                size_t ridlen, const void *buf, size_t len);
/* Read a batch of messages from 'sock' into 'fn', then end the batch
 * (pl_daemon_flush()).  A receive error is logged as 'what' ("agent
 * socket"), or not when NULL. */
void pl_daemon_recv(struct pl_daemon *d, void *sock, pl_daemon_msg_f fn,
                    const char *what);
/* End of a batch: schedule, commit, then send what the batch produced. */
void pl_daemon_flush(struct pl_daemon *d);
/* Stop: tell the agents to exit, wait for them (at most a grace), then
 * close the loop's handles.  Idempotent. */
void pl_daemon_stop(struct pl_daemon *d, const char *why);
/* Ask Slurm for the job's end now and then (at most every 10 s). */
void pl_daemon_end_time(struct pl_daemon *d);

/* ------------------------------------------------------------ outq.c */

/* A message to 'rid' on 'sock' (NULL: out of memory).  Owned by the
 * caller until pl_out_push(). */
struct pl_out *pl_out_new(void *sock, const void *rid, size_t ridlen);
/* Queue 'o' (taken) to be sent after the batch's commit. */
void pl_out_push(struct pl_daemon *d, struct pl_out *o);
void pl_out_free(struct pl_out *o);
/* A message to the agent of 'n' (NULL: out of memory, or no link). */
struct pl_out *pl_out_agent(struct pl_daemon *d, const struct pl_node *n);
/* Queue an error reply to request 'r'. */
void pl_out_err(struct pl_daemon *d, const struct pl_req *r, int errnum,
                const char *text);
/* Queue a reply holding 'data' (taken).  Returns it (borrowed: the out
 * queue owns it), or NULL if out of memory. */
struct pl_out *pl_out_json(struct pl_daemon *d, const struct pl_req *r,
                           json_t *data);
/* The tasks of reply 'o' were not stored: forget them, and make 'o' an
 * error reply. */
void pl_out_undo(struct pl_daemon *d, struct pl_out *o, const char *why,
                 int errnum);
/* Send everything queued; what acknowledges a write is held back when
 * 'stored' is false (the agents send again; clients got an error). */
/* Whether a client's acknowledgement of what the batch stores (a submit,
 * a cancel) waits in the queue. */
bool pl_outq_acks(const struct pl_daemon *d);
void pl_outq_send(struct pl_daemon *d, bool stored);
/* Send the RUNs queued now, in their order, ahead of the rest (called
 * after a commit that stored them and before the sync that the clients'
 * replies wait for: docs/state.md, "the RUNs a commit placed leave right
 * after the commit").  Nothing is sent ahead if an agent has a message
 * queued that is neither a RUN nor an ACK (a KILL, a WELCOME: the order
 * between those and its RUNs matters); an ACK (independent of the RUNs'
 * numbering) stays for after the sync. */
void pl_outq_send_runs(struct pl_daemon *d);
void pl_outq_free(struct pl_daemon *d);

/* ------------------------------------------------------------ store.c */

/* The batch ends with writes not stored: log it once (and when the
 * reason changes); its acknowledgements to clients become errors. */
void pl_store_failed(struct pl_daemon *d);
/* Store the journal again if the last try is 'interval' s old; on
 * success send the RUNs that waited and schedule again. */
void pl_store_retry(struct pl_daemon *d, double interval);
/* Copy the WAL into the database if the last copy is 'interval' s old. */
void pl_store_checkpoint(struct pl_daemon *d, double interval);
/* While nothing can be stored, refuse request 'r' that would change
 * state, after one more try.  Returns true if it was refused. */
bool pl_store_refused(struct pl_daemon *d, const struct pl_req *r);
/* A write of a request failed (errno) with the state directory: say so
 * in errp, in the words of pl_store_refused(). */
void pl_store_text(const struct pl_daemon *d, struct pl_error *errp);
/* The state directory for status: "ok", "full", "read-only", "error",
 * and when not ok why, into 'why'. */
const char *pl_store_state(const struct pl_daemon *d, char *why, size_t len);

/* ------------------------------------------------------------ task.c */

/* The dependencies of a task, resolved: those still live, and the first
 * that ended badly. */
struct pl_deps {
    uint64_t *live;              /* tasks that have not ended: wait */
    bool *any;                   /* ... for any end, not only done */
    uint32_t nlive, cap;
    struct pl_db_dep *stored;    /* what is stored, 'nstored' */
    size_t nstored, capstored;
    char why[96];                /* a dependency that failed: fail too */
};

/* 't' (new, state set) joins the counters. */
void pl_dtask_counted(struct pl_daemon *d, struct pl_dtask *t);
/* Its scheduling shape from its spec. */
void pl_dtask_shape(struct pl_dtask *t, const struct pl_spec *s);
/* Record a state change of 't' in the database and the counters. */
void pl_dtask_change(struct pl_daemon *d, struct pl_dtask *t, int state,
                     const struct pl_db_change *extra);
/* 't' was placed (its ranks hold their cores): its attempt begins,
 * assigned. */
void pl_dtask_placed(struct pl_daemon *d, struct pl_dtask *t);
/* Rank 'r' of 't' started (at 'time', 0: now); the task runs once all
 * its ranks do ('c': what the event said, may be NULL). */
void pl_dtask_rank_running(struct pl_daemon *d, struct pl_dtask *t,
                           uint32_t r, double time,
                           const struct pl_db_change *c);
/* Rank 'r' of 't' runs on the agent that registered with it after a
 * pilotd restart (its start is recorded already, or lost with the old
 * pilotd). */
void pl_dtask_rank_adopted(struct pl_daemon *d, struct pl_dtask *t,
                           uint32_t r);
/* Rank 'r' of 't' ended in 'st' (details in 'c'): give back its cores;
 * the first failure fails the task and stops its other ranks.  Returns
 * true when that ended the task (it may be freed). */
bool pl_dtask_rank_ended(struct pl_daemon *d, struct pl_dtask *t, uint32_t r,
                         int st, const struct pl_db_change *c);
/* Rank 'r' of pool task 't' ended with its worker, which went down by no
 * doing of its own: the task runs again once its ranks have ended (not
 * charged to --retries, at most a few times).  As pl_dtask_rank_ended(). */
bool pl_dtask_rank_lost(struct pl_daemon *d, struct pl_dtask *t, uint32_t r,
                        const struct pl_db_change *c);
/* 't' reached a final state ('extra': its exit code, signal, reason;
 * may be NULL): record it and forget it; what waited for it goes on, or
 * fails with it. */
void pl_dtask_finish(struct pl_daemon *d, struct pl_dtask *t, int state,
                     const struct pl_db_change *extra);
/* pl_dtask_finish() with only a reason. */
void pl_dtask_end(struct pl_daemon *d, struct pl_dtask *t, int state,
                  const char *reason);
/* 't' goes back to the head of the queue, its attempt over ('reason');
 * 'spare': not charged to its --retries. */
void pl_dtask_requeue(struct pl_daemon *d, struct pl_dtask *t,
                      const char *reason, bool spare);
/* Canceled: a task not on an agent ends now, one on an agent is
 * stopped there. */
void pl_dtask_cancel(struct pl_daemon *d, struct pl_dtask *t);
/* A task whose submission was not stored: gone, as if never made. */
void pl_dtask_forget(struct pl_daemon *d, uint64_t id);
/* The ranks an agent starts itself: all, but for MPI only rank 0, whose
 * agent launches the whole job (the other ranks' cores are held). */
uint32_t pl_dtask_launched(const struct pl_dtask *t);

/* Dependencies: 'dp' zeroed, then one pl_deps_add() per dependency
 * (an array's id stands for all its elements unless 'one'), then
 * pl_deps_apply() once the task exists (in state waiting when one is
 * live or failed).  A task that is not in the database is an error
 * (EINVAL) with 'must_exist' (at submit), else a failed dependency (it
 * was, before a restart).  0, or -1 with errp (EINVAL, ENOMEM, or the
 * database's). */
int pl_deps_add(struct pl_daemon *d, struct pl_deps *dp, uint64_t id,
                bool any, bool one, bool must_exist, struct pl_error *errp);
/* 't' waits for the live ones, fails with one that failed, or is
 * queued when it waited and none is left.  0, or -1 (ENOMEM). */
int pl_deps_apply(struct pl_daemon *d, struct pl_dtask *t,
                  const struct pl_deps *dp);
void pl_deps_clear(struct pl_deps *dp);

/* ------------------------------------------------------------ dispatch.c */

/* Place what fits and record it (in the open transaction); the RUNs
 * leave after the commit (pl_dispatch_send()). */
void pl_dispatch_schedule(struct pl_daemon *d);
/* Take back every prefetched task its agent has not started (the state
 * directory failed: no task starts until it is written again). */
void pl_dispatch_recall_all(struct pl_daemon *d);
/* The assignments of the tasks placed are stored: send their RUNs. */
void pl_dispatch_send(struct pl_daemon *d);
/* 't', stored, has ranks whose RUN goes again (run_seq RUN_UNSENT): the
 * next pl_dispatch_send() sends them.  0, or -1 (ENOMEM). */
int pl_dispatch_unsent(struct pl_daemon *d, struct pl_dtask *t);

/* ------------------------------------------------------------ orders.c */

struct pl_order;
struct pl_placed;
/* The seq of a new RUN ('k' NULL) or KILL 'k' to the agent of 'l',
 * remembered until the agent acknowledges it. */
uint64_t pl_orders_add(struct pl_link *l, const struct pl_kill *k);
/* Send KILL 'k' to the agent of 'n' (numbered and remembered). */
void pl_orders_kill(struct pl_daemon *d, struct pl_node *n,
                    const struct pl_kill *k);
/* The agent of 'l' read every RUN and KILL up to 'got' (GOT). */
void pl_orders_got(struct pl_link *l, uint64_t got);
/* The agent of 'l' registered again (the same process) having read up
 * to 'after': what it did not read goes again. */
void pl_orders_again(struct pl_daemon *d, struct pl_link *l,
                     uint64_t after);
/* A new agent process on the node of 'l': nothing it was sent matters. */
void pl_orders_forget(struct pl_link *l);
void pl_orders_free(struct pl_link *l);
/* 't' was placed: its attempt must start within cfg.start_timeout. */
void pl_orders_placed(struct pl_daemon *d, const struct pl_dtask *t);
/* Every second: send again what was not acknowledged in time, queue
 * again the tasks not started in time. */
void pl_orders_tick(struct pl_daemon *d);
void pl_orders_free_all(struct pl_daemon *d);

/* ------------------------------------------------------------ agents.c */

/* The agent socket's watcher callback. */
void pl_agents_cb(struct pl_zwatch *zw, int revents, void *arg);
/* The link of node 'n', or of the agent of routing id 'rid' (NULL: none
 * yet). */
struct pl_link *pl_agents_link(struct pl_daemon *d, const struct pl_node *n);
struct pl_link *pl_agents_link_by_rid(struct pl_daemon *d, const void *rid,
                                      size_t len);
/* Stop every rank of 't' still running: one KILL per node it is on. */
void pl_agents_kill_task(struct pl_daemon *d, struct pl_dtask *t);
/* Every second: lose the agents silent for too long (the oldest of
 * d->live first; it stops at the first that spoke in time). */
void pl_agents_tick(struct pl_daemon *d);
/* The agent of 'n' is lost ('why'): its tasks' ranks there end; another
 * agent may start there. */
void pl_agents_lost(struct pl_daemon *d, struct pl_node *n, const char *why);
/* The node 'n' leaves the pilot ('why': its allocation ends or is
 * released): its agent is told to exit, the ranks there end and their
 * tasks run again elsewhere, not charged to --retries; no agent is
 * started there again. */
void pl_agents_leave(struct pl_daemon *d, struct pl_node *n, const char *why);
/* Tell every agent up to exit. */
void pl_agents_exit(struct pl_daemon *d);
/* Record node 'n' in the database as 'state'. */
void pl_agents_record(struct pl_daemon *d, struct pl_node *n,
                      const char *state);
void pl_agents_free(struct pl_daemon *d);

/* ------------------------------------------------------------ poolctl.c */
struct pl_pool;
/* The pool named 'name', or NULL. */
struct pl_pool *pl_poolctl_find(struct pl_daemon *d, const char *name);
/* The requests: POOL_START, POOL_STOP, POOL_LIST. */
void pl_poolctl_start(struct pl_daemon *d, const struct pl_req *r,
                      const struct pl_msg *m);
void pl_poolctl_stop(struct pl_daemon *d, const struct pl_req *r,
                     const struct pl_msg *m);
void pl_poolctl_list(struct pl_daemon *d, const struct pl_req *r,
                     const struct pl_msg *m);
/* Stop 'p' ('why'): its tasks end canceled, its job is stopped; the pool
 * is gone once its job has ended (at once if it was not running). */
void pl_poolctl_stop_one(struct pl_daemon *d, struct pl_pool *p,
                         const char *why);
/* Take the job of 'p' down now ('why'): the workers of every node under
 * it are killed; its end restarts the pool (or ends it, stopping).  No
 * task is placed in it meanwhile.  Idempotent for an attempt. */
void pl_poolctl_down(struct pl_daemon *d, struct pl_pool *p,
                     const char *why);
/* A pool's job was placed (its attempt begins): its slots. */
void pl_poolctl_placed(struct pl_daemon *d, struct pl_dtask *job);
/* POOL_READY from the agent of 'n'. */
void pl_poolctl_ready(struct pl_daemon *d, struct pl_node *n,
                      const struct pl_msg *m);
/* A pool's job ended ('state', 'reason'): true if it was queued again
 * (the pool restarts); false if it ends as any task (the pool stopped,
 * or failed). */
bool pl_poolctl_job_ended(struct pl_daemon *d, struct pl_dtask *job,
                          int state, const char *reason);
/* Place what fits of each ready pool's queue ('place' for each). */
void pl_poolctl_schedule(struct pl_daemon *d, pl_sched_place_f place,
                         void *arg);
void pl_poolctl_free(struct pl_daemon *d);
/* A restarted pilotd: the pools of the database (before its tasks are
 * loaded), each restarting.  0, or -1 with errp. */
int pl_poolctl_load(struct pl_daemon *d, struct pl_error *errp);
/* Task 't' (a pool's task, or its job) of pool 'name' as loaded: its
 * pool, or NULL (gone, or 't' is an older job of it). */
struct pl_pool *pl_poolctl_adopt(struct pl_daemon *d, struct pl_dtask *t,
                                 const char *name);
/* The pools of --pool not taken back from the database: started.  0, or
 * -1 with errp. */
int pl_poolctl_boot(struct pl_daemon *d, struct pl_error *errp);
/* Every task is loaded: a pool whose job is not live gets a new one. */
int pl_poolctl_loaded(struct pl_daemon *d, struct pl_error *errp);

/* ------------------------------------------------------------ recover.c */

/* Rebuild the queue and the counters from the database (a restarted
 * pilotd, or --resume).  0, or -1 with errp. */
int pl_recover_load(struct pl_daemon *d, struct pl_error *errp);
/* An agent registered on 'n' with what it runs: take back the orphan
 * ranks the database put there. */
void pl_recover_adopt(struct pl_daemon *d, struct pl_node *n,
                      const struct pl_register *reg);
/* The recovery window is over (or every agent is back). */
void pl_recover_end(struct pl_daemon *d);

/* ------------------------------------------------------------ submit.c */

/* cancel.c: the request, done in turns of CANCEL_TURN tasks. */
struct pl_canceljob;
void pl_cancel(struct pl_daemon *d, const struct pl_req *r,
               const struct pl_msg *m);
/* Forget the cancels not done (pilotd's end: their clients get no
 * answer). */
void pl_cancel_free_all(struct pl_daemon *d);
/* A batch (or a turn) that began at 't0' (uv_hrtime()) has ended: the
 * longest is kept for the status object. */
void pl_daemon_batch_time(struct pl_daemon *d, uint64_t t0);

/* Read the pilot's defaults for Python calls (py_prelude, py_python)
 * from its directory.  0, or -1 with errp (a file that cannot be read,
 * or too large). */
int pl_submit_py_defaults(struct pl_daemon *d, struct pl_error *errp);
void pl_submit(struct pl_daemon *d, const struct pl_req *r,
               const struct pl_msg *m);

/* ------------------------------------------------------------ clients.c */

/* The client socket's watcher callback. */
void pl_clients_cb(struct pl_zwatch *zw, int revents, void *arg);

/* ------------------------------------------------------------ watch.c */

/* The requests WATCH and UNWATCH. */
void pl_watch_req(struct pl_daemon *d, const struct pl_req *r,
                  const struct pl_msg *m);
void pl_unwatch_req(struct pl_daemon *d, const struct pl_req *r,
                    const struct pl_msg *m);
/* The watch 'token' a submit of 'n' tasks by the key of 'r' names: it
 * must exist (ENOENT), be that key's (EACCES) and have room (E2BIG).
 * NULL with errp. */
struct pl_watch *pl_watch_for_submit(struct pl_daemon *d,
                                     const struct pl_req *r,
                                     const char *token, uint64_t n,
                                     struct pl_error *errp);
/* 't', just made, joins 'w' (before anything can end it).  0, or -1
 * (ENOMEM). */
int pl_watch_add_task(struct pl_daemon *d, struct pl_watch *w,
                      struct pl_dtask *t);
/* 't' reached a final state: 'c' as stored (its end_seq set); each
 * watch of it keeps the end to push after the commit. */
void pl_watch_ended(struct pl_daemon *d, struct pl_dtask *t,
                    const struct pl_db_change *c);
/* The submission of task 'id' was undone: no watch holds it, nor its
 * end if it had one. */
void pl_watch_forgot(struct pl_daemon *d, uint64_t id);
/* Everything up to d->end_seq_stored is stored: queue the pushes (just
 * before the out queue is sent), a turn of each replay, the heartbeats. */
void pl_watch_flush(struct pl_daemon *d);
/* A push of watch 'token' could not be sent: its client is gone. */
void pl_watch_push_failed(struct pl_daemon *d, const char *token);
/* The allow-list was read again: the watches of keys no longer in it
 * are dropped (their ends are not pushed to a revoked key). */
void pl_watch_revoked(struct pl_daemon *d);
/* Every second: detached watches expire. */
void pl_watch_tick(struct pl_daemon *d);
void pl_watch_free_all(struct pl_daemon *d);

/* ------------------------------------------------------------ launch.c */

/* Start the agents: the step over the job's nodes, or over 'nodelist'
 * ('count' nodes) when given; with --local, one child.  0, or -1. */
int pl_launch_agents(struct pl_daemon *d, const char *nodelist, int count,
                     struct pl_error *errp);
/* Start another agent on 'n', whose agent was lost (Slurm pilots; a
 * few times per node at most). */
void pl_launch_node(struct pl_daemon *d, const struct pl_node *n);
/* Whether the agents' process still runs. */
bool pl_launch_running(const struct pl_daemon *d);
/* Stop and forget every agent process (at shutdown). */
void pl_launch_free_all(struct pl_daemon *d);

/* ------------------------------------------------------------ vet.c */

/* The settings: DIR/vet.yaml if there, else the built-in ones.  0, or
 * -1 with errp (a bad file stops pilotd: `pilot up` checked it). */
int pl_vet_boot(struct pl_daemon *d, struct pl_error *errp);
void pl_vet_free(struct pl_daemon *d);
/* The agent of 'n' registered ('first': the node is new to this pilotd):
 * its stored vetting taken back, or VET sent (cordoned "vetting" until
 * the result). */
void pl_vet_joined(struct pl_daemon *d, struct pl_node *n, bool first);
/* VET_RESULT 'm' from the agent of 'n'. */
void pl_vet_result(struct pl_daemon *d, struct pl_node *n,
                   const struct pl_msg *m);
/* A rank on 'n' ended by a signal: vetted again after revet.signals. */
void pl_vet_rank_signal(struct pl_daemon *d, struct pl_node *n);
/* pilotd stops: every `pilot vet` waiting gets an error (ESHUTDOWN). */
void pl_vet_stop(struct pl_daemon *d);
/* Every second: `pilot vet`s past their time are answered. */
void pl_vet_tick(struct pl_daemon *d);
/* Status's "vet" object of a node (new reference). */
json_t *pl_vet_status(const struct pl_node *n);
/* Requests VET (117) and CORDON (118). */
void pl_vet_req(struct pl_daemon *d, const struct pl_req *r,
                const struct pl_msg *m);
void pl_cordon_req(struct pl_daemon *d, const struct pl_req *r,
                   const struct pl_msg *m);

/* ------------------------------------------------------------ alloc.c */

struct pl_allocs;
/* Set up from cfg.grow and the database (a restarted pilotd takes its
 * allocations back).  0, or -1 with errp. */
int pl_alloc_boot(struct pl_daemon *d, struct pl_error *errp);
void pl_alloc_free(struct pl_daemon *d);
/* The pilot stops: every live allocation's job is cancelled (their
 * agents were told to exit), and it has ended. */
void pl_alloc_stop(struct pl_daemon *d);
/* The agent of 'n' registered with 'reg': a node of an allocation joins
 * it (its job's end is learned). */
void pl_alloc_joined(struct pl_daemon *d, struct pl_node *n,
                     const struct pl_register *reg);
/* The id of the live allocation node 'name' is in; 0: the pilot's own
 * job (or none). */
uint64_t pl_alloc_of_node(const struct pl_daemon *d, const char *name);
/* Whether the pilot grows itself (pilot up --grow): a task too large for
 * its nodes waits rather than fails. */
bool pl_alloc_may_grow(const struct pl_daemon *d);
/* With --grow: whether 't' could never run however the pilot grows (no
 * node like its own takes a rank of it, or it needs more such nodes
 * than its own and --grow max together), with the reason in 'why'.
 * False when the pilot does not grow itself or has no node yet. */
bool pl_alloc_never_fits(const struct pl_daemon *d, const struct pl_dtask *t,
                         char *why, size_t len);
/* Every second: the jobs' states, drains, idle releases, auto-grow. */
void pl_alloc_tick(struct pl_daemon *d);
/* Status's "allocs" array (new reference). */
json_t *pl_alloc_status(const struct pl_daemon *d);
/* The requests GROW (119), SHRINK (120), ALLOCS (121). */
void pl_alloc_grow_req(struct pl_daemon *d, const struct pl_req *r,
                       const struct pl_msg *m);
void pl_alloc_shrink_req(struct pl_daemon *d, const struct pl_req *r,
                         const struct pl_msg *m);
void pl_alloc_list_req(struct pl_daemon *d, const struct pl_req *r,
                       const struct pl_msg *m);

#endif /* !PL_DAEMON_PRIVATE_H */
