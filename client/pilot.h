/* client/pilot.h - one pilot as the CLI sees it: its files and liveness */
#ifndef PL_CLIENT_PILOT_H
#define PL_CLIENT_PILOT_H

#include <stdbool.h>

#include "client/cli.h"
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
int pl_pilot_load(struct pl_cli *cli, const char *home, const char *id,
                  struct pl_pilot *p, struct pl_error *errp);

/* Read the endpoint again and redo the liveness check. */
void pl_pilot_probe(struct pl_cli *cli, struct pl_pilot *p);

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
