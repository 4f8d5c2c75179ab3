/* client/up_private.h - what the files of pilot up share
 *
 * cmd_up.c reads the options and makes the pilot's directory; the pilot
 * is started as a Slurm job (up_slurm.c) or as a pilotd on this machine
 * (up_local.c), and --wait waits for its agents (up_wait.c).
 */
#ifndef PL_CLIENT_UP_PRIVATE_H
#define PL_CLIENT_UP_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "client/cli.h"
#include "client/pilot.h"
#include "client/slurm.h"
#include "proto/error.h"

#define PL_UP_DEFAULT_TIME "1:00:00" /* --time */

/* What the options say; strings are borrowed from argv. */
struct pl_up_opts {
    uint64_t nodes, gpus;
    bool nodes_set, gpus_set;
    const char *time;
    const char *partition;
    const char *account;
    char **sbatch_args; /* NULL-terminated, pointers into argv */
    bool local, wait;
    double wait_timeout;
    bool wait_timeout_set;
    const char *resume; /* pilot id to run again, or NULL */
    double lost_after;  /* 0: pilotd's default */
    double start_timeout; /* -1: pilotd's default; 0: none */
    int prefetch;       /* pilotd --prefetch; -1: pilotd's default */
    bool no_agent;      /* --local --agents 0 */
    const char *bind;   /* pilotd --bind: an address or interface, or NULL */
    const char *pools[8]; /* pilotd --pool NAME:RPN[:GPR[:CPR]] (checked) */
    int npools;
    const char *py_prelude; /* the Python calls' defaults: written to the */
    const char *py_python;  /* pilot directory (py-prelude, py-python) */
    char *vet;              /* --vet: the vet.yaml's text, checked; owned
                               (written to the pilot directory) */
    int metrics_port;       /* pilotd --metrics-port, -1: none */
    char *metrics_file;     /* pilotd --metrics-file (absolute), or NULL */
    double metrics_interval; /* pilotd --metrics-interval, 0: default */
    const char *grow;       /* pilotd --grow (checked), or NULL */
    const char *output;     /* pilotd --output: "files", "journal", NULL */
    char journal_size[24];  /* pilotd --journal-size, bytes, or "" */
};

/* Write the batch script of pilot 'id' (directory 'dir' under 'home',
 * pilotd in 'bindir') as DIR/pilot.sbatch, its path into 'path'.  0, or
 * -1 with errp set. */
int pl_up_script(const struct pl_up_opts *o, const char *id,
                 const char *home, const char *dir, const char *bindir,
                 char *path, size_t len, struct pl_error *errp);

/* sbatch 'script'; the job id into *job.  0, or -1 with errp set
 * (sbatch's own last line of error). */
int pl_up_sbatch(const char *script, long *job, struct pl_error *errp);

/* Whether the Slurm job of 'p' has ended, or waits for what will never
 * come (then it is canceled); 'j' is what Slurm said (left as it was
 * when Slurm cannot be asked), 'why' says it for a person. */
bool pl_up_job_died(struct pl_cli *cli, const struct pl_pilot *p,
                    struct pl_slurm_job *j, char *why, size_t len);

/* Start 'pilotd' --local on 'dir' in its own session, its output to
 * logs/pilotd.out, with o's --agents 0 and --bind.  Its pid (the caller
 * reaps it), or -1 with errp set (also when it could not be executed). */
pid_t pl_up_spawn(const char *pilotd, const char *dir,
                  const struct pl_up_opts *o, struct pl_error *errp);

/* Whether the local pilotd 'pid' has exited (it is reaped); 'why' says
 * how. */
bool pl_up_local_died(pid_t pid, char *why, size_t len);

/* Wait up to 'limit' seconds from 't0' (pl_mono()) until every agent of
 * pilot 'p' is up: a Slurm pilot when 'pid' is 0, else the local pilotd
 * 'pid'.  Returns an exit code: PL_EXIT_OK, PL_EXIT_ERROR (it died: the
 * error is printed), PL_EXIT_USAGE (the time ran out; the pilot stays). */
/* pilot up --local without --wait: until pilotd (pid 'pid') has
 * written its endpoint, so that the next command finds it; at most
 * 'limit' s.  PL_EXIT_OK, or PL_EXIT_ERROR after saying why (pilotd
 * died; not after 'limit': it may yet come up, and the note says so). */
int pl_up_local_ready(struct pl_pilot *p, pid_t pid, double limit);
int pl_up_wait(struct pl_cli *cli, struct pl_pilot *p, pid_t pid,
               double limit, double t0);

#endif /* !PL_CLIENT_UP_PRIVATE_H */
