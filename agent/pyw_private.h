/* agent/pyw_private.h - what agent/pyw.c (the workers' life) and
 * agent/pyw_call.c (a call in one) share; no other module includes it */
#ifndef PL_AGENT_PYW_PRIVATE_H
#define PL_AGENT_PYW_PRIVATE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "agent/agent_private.h"
#include "agent/env.h"
#include "agent/pyw.h"
#include "agent/usage.h"
#include "proto/pywmsg.h"
#include "proto/run.h"

#define IDLE_MS (10 * 60 * 1000) /* an idle worker goes after this */
#define KILL_AFTER_MS 2000       /* SIGINT, then SIGKILL this much later */
#define GONE_MS 5000             /* a worker told to go, then SIGKILL */
#define EOF_MS 500               /* its socket closed in a call: it must
                                    be dead this soon, or it is killed */

struct worker {
    struct pl_pyw *p;
    struct worker *next;
    uv_pipe_t pipe;            /* our end of its socketpair */
    uv_timer_t timer;          /* the call's timeout, then the SIGKILL;
                                  idle: its end */
    int closing;               /* handles whose close callback is due */
    bool open;                 /* 'pipe' not closed yet */
    bool going;                /* told to go (no more calls) */
    bool reaped;
    pid_t pid;
    bool hello;
    char version[PL_PYW_VERSION_MAX + 1];
    char *key;                 /* what calls it may run (pyw_key()) */
    size_t keylen;
    uint64_t last_used;        /* uv_now() at its last call's end */
    unsigned char *buf;        /* read, not yet a whole frame */
    size_t len, cap;
    unsigned calls;            /* calls it ran */
    /* the call */
    struct pl_run *run;        /* owned while busy; NULL when idle */
    bool entered;              /* it said ENTERED: a SIGINT reaches the
                                  function (before, it would be lost) */
    int stop;                  /* PL_ST_TIMEOUT, PL_ST_CANCELED: we
                                  pyw_interrupt it */
    uint64_t kill_ms;          /* after the SIGINT, SIGKILL this late */
    bool eof;                  /* its socket closed in a call */
    struct pl_cpu_mark cpu0;   /* its CPU time when the call was sent */
    bool finished;             /* the last handle is closing: free it
                                  once 'closing' is 0 */
};

struct pl_pyw {
    struct pl_agent *a;
    struct worker *workers;
    char script[PATH_MAX];     /* _pyworker.py, "" if not found */
    char looked[512];          /* where it was looked for */
    unsigned spawned;
};

/* ---- pyw.c: the workers ---- */

/* Workers not told to go. */
size_t pyw_nactive(const struct pl_pyw *p);
/* Signal 'w''s process group (not once it is reaped). */
void pyw_sig(struct worker *w, int sig);
/* The key of entry 'r' (interpreter, prelude, environment less an array
 * element's variables, cores, GPUs) in *len bytes; NULL: out of memory. */
char *pyw_key(const struct pl_run *r, size_t *len);
/* An idle worker of 'key', or NULL; the least recently used idle one of
 * any key in *lru (NULL: none). */
struct worker *pyw_find_idle(struct pl_pyw *p, const char *key,
                             size_t keylen, struct worker **lru);
/* A new worker for entry 'r' (its key taken), bound to its cores and
 * GPUs, with environment 'env'.  NULL with errp set. */
struct worker *pyw_spawn(struct pl_pyw *p, const struct pl_run *r,
                         struct pl_env *env, char *key, size_t keylen,
                         struct pl_error *errp);
/* No more calls for 'w': its socket closes, SIGKILL if it lingers. */
void pyw_go(struct worker *w, const char *why);
/* 'w' broke the protocol: its call fails saying 'why', it is killed. */
void pyw_bad(struct worker *w, const char *why);
/* 'w' is idle: it goes after IDLE_MS unless a call comes. */
void pyw_idle(struct worker *w);

/* ---- pyw_call.c: a call ---- */

/* The call of 'w' ends in 'st' ('why' copied, may be NULL): its event
 * (returned, to add the result to; NULL: none), its cores back. */
struct pl_event *pyw_call_end(struct worker *w, int st, int code, int sig,
                              const char *why);
/* Interrupt the call of 'w' (timeout, canceled): SIGINT once it has
 * entered the function, SIGKILL 'ms' later (0: at once). */
void pyw_interrupt(struct worker *w, int st, uint64_t ms);
/* One frame from 'w' ('len' bytes after its length). */
void pyw_on_frame(struct worker *w, const unsigned char *buf, size_t len);

#endif /* !PL_AGENT_PYW_PRIVATE_H */
