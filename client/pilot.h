/* client/pilot.h - one pilot as a client sees it: its files and liveness
 *
 * Shared by the CLI and libpilot: nothing here prints or exits.
 */
#ifndef PL_CLIENT_PILOT_H
#define PL_CLIENT_PILOT_H

#include <stdbool.h>
#include <stddef.h>

#include "client/slurm.h"
#include "proto/error.h"
#include "proto/pilotdir.h"

enum pl_pilot_state {
    PL_PILOT_STARTING = 1, /* its Slurm job is queued or running, no
                              endpoint yet */
    PL_PILOT_RUNNING,      /* endpoint written, pilotd (its job) alive */
    PL_PILOT_STALE,        /* an endpoint left by a pilotd that is gone */
    PL_PILOT_DOWN,         /* no endpoint and nothing running */
};

/* A note for the person: the output is not live (client/conn.c). */
typedef void (*pl_find_note_f)(const char *text, void *arg);

/* Which pilot a client means and how it reaches it: the CLI's global
 * options and environment, or what a libpilot caller gave. */
struct pl_find {
    const char *pilot;       /* its id (--pilot, $PILOT_ID); NULL: the
                                one running pilot */
    const char *home;        /* the pilot home, or NULL: $PILOT_HOME,
                                else ~/.pilot */
    const char *keys;        /* $PILOT_KEYS: the keys directory to use,
                                or NULL: the pilot's own (DIR/keys) */
    int timeout_ms;          /* one request's limit ($PILOT_TIMEOUT) */
    pl_find_note_f note;     /* NULL: notes are dropped */
    void *note_arg;
    struct pl_slurm *slurm;  /* made on first use: pl_find_slurm() */
};

/* Fill 'f' from the environment: PILOT_ID, PILOT_KEYS, PILOT_TIMEOUT
 * (default 10 s).  The strings are borrowed from the environment.  -1
 * with errp set (EINVAL) if PILOT_TIMEOUT is not a positive number of
 * seconds up to a day. */
int pl_find_init(struct pl_find *f, struct pl_error *errp);
/* End the libslurm session if one was started. */
void pl_find_fini(struct pl_find *f);

/* The libslurm session, started on first use (slurm_init() reads the
 * Slurm configuration, so it must not run for local pilots).  Borrowed;
 * NULL with errp set. */
struct pl_slurm *pl_find_slurm(struct pl_find *f, struct pl_error *errp);

/* Pass 'fmt' to f->note, if any. */
void pl_find_note(const struct pl_find *f, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

struct pl_pilot {
    char id[PL_ID_MAX];
    char dir[PL_PATH_MAX];
    char home[PL_PATH_MAX];
    bool has_info;
    struct pl_info info;
    bool has_ep;
    struct pl_endpoint ep;
    bool has_job;            /* 'job' was looked up */
    struct pl_slurm_job job;
    int state;               /* enum pl_pilot_state */
    char why[256];           /* for a person: "its Slurm job 42 has
                                ended (state COMPLETED)" */
};

/* Read pilot 'id' under 'home' (its info and endpoint files) and find
 * out whether it is alive (libslurm for a Slurm pilot, kill(pid, 0) for a
 * local one on this host).  Returns 0, or -1 with errp set if there is
 * no such pilot (ENOENT, "no pilot p7 under /root/.pilot").  Not
 * knowing whether it lives is not an error: see p->why. */
int pl_pilot_load(struct pl_find *f, const char *home, const char *id,
                  struct pl_pilot *p, struct pl_error *errp);

/* Read the endpoint again and redo the liveness check. */
void pl_pilot_probe(struct pl_find *f, struct pl_pilot *p);

/* Whether pilot 'id' under 'home' has an endpoint file (no check that
 * anything is alive: cheap, for choosing whom to probe). */
bool pl_pilot_has_endpoint(const char *home, const char *id);

/* pilotd's pid if the endpoint says it runs on this host, else 0. */
long pl_pilot_pid_here(const struct pl_pilot *p);

/* "starting", "running", "stale", "down". */
const char *pl_pilot_state_name(int state);

/* Where the pilot's launch log lies: logs/slurm-<job>.out or
 * logs/pilotd.out. */
void pl_pilot_log_path(const struct pl_pilot *p, char *buf, size_t len);

#endif /* !PL_CLIENT_PILOT_H */
