/* client/spec.h - the task spec pilot submit builds, from flags or a file
 *
 * The command line (--cores-per-rank 2) and a task file's entry
 * ({"cores_per_rank": 2}) fill one struct pl_spec (proto/spec.h) through
 * the same setters: --after, --array, --tag and --env are read the same
 * way from both, and a relative cwd is taken from the same directory.
 * Each front end words its own errors: a flag's as a usage error ("--ranks:
 * '0' is not between 1 and 65536"), an entry's as a fault of its line
 * ("field 'ranks' has the wrong type or value").  What pilotd refuses is
 * left to pl_spec_check(), which the caller runs before sending.
 */
#ifndef PL_CLIENT_SPEC_H
#define PL_CLIENT_SPEC_H

#include <stddef.h>

#include <jansson.h>

#include "proto/error.h"
#include "proto/spec.h"

/* A spec being built. */
struct pl_cli_spec {
    struct pl_spec spec;          /* what the setters made; owned */
    size_t nenv, ntags;           /* entries in spec.env, spec.tags */
    size_t envcap, tagcap, aftercap; /* their room (pl_grow()) */
    char *fn_name;                /* --fn or --py: argv[0] once the
                                     command is set; owned */
};

/* An empty spec: pl_spec_init()'s defaults.  pl_cli_spec_clear() frees
 * what it holds (and preserves errno). */
void pl_cli_spec_init(struct pl_cli_spec *b);
void pl_cli_spec_clear(struct pl_cli_spec *b);

/* Apply long option --'name' with value 'arg' (NULL for --exclusive).
 * Repeated options add (--env, --tag, --after) or replace (the others).
 * A relative --cwd is resolved by pl_cli_spec_command().  0, or -1 with
 * errp set for a usage error ("--after: ',': an empty entry"). */
/* --output files|journal, or a task file's "output" (named 'what' in
 * errors), into 'b' (client/spec_out.c).  0, or -1 with errp set. */
int pl_cli_spec_output(struct pl_cli_spec *b, const char *what,
                       const char *arg, struct pl_error *errp);

int pl_cli_spec_flag(struct pl_cli_spec *b, const char *name,
                     const char *arg, struct pl_error *errp);

/* The flags' --ranks, --nodes and --ranks-per-node agree: without
 * --ranks, NODES x RANKS-PER-NODE ranks (either defaulting to 1, as
 * srun -N 4 starts 4 tasks) must be within the limit; with it, --nodes
 * needs a rank per node, and with both others it must be their
 * product.  0, or -1 with errp set for a usage error. */
int pl_cli_spec_counts(const struct pl_cli_spec *b, struct pl_error *errp);

/* The flags' command, argv[0..argc-1] (copied), and the cwd: --cwd, or
 * the current directory, which a relative --cwd is in.  0, or -1 with
 * errp set (an argument that is not UTF-8, no current directory, a
 * path too long). */
int pl_cli_spec_command(struct pl_cli_spec *b, int argc, char *const *argv,
                        struct pl_error *errp);

/* A task file's entry 'entry' (borrowed): a JSON object whose keys are
 * the long options with '_' for '-' ("tags" for --tag), and "argv" (a
 * list) or "cmd" (a shell line), checked in its order; a relative "cwd"
 * (and no "cwd") means 'here'.  0, or -1 with errp set to the fault of
 * the entry ("unknown field 'foo'"); 'b' then holds what came before
 * it, for pl_cli_spec_clear(). */
int pl_cli_spec_entry(struct pl_cli_spec *b, const json_t *entry,
                      const char *here, struct pl_error *errp);

/* Hand the spec over to *s (which the caller then owns) and leave 'b'
 * empty, as pl_cli_spec_init() does. */
void pl_cli_spec_take(struct pl_cli_spec *b, struct pl_spec *s);

#endif /* !PL_CLIENT_SPEC_H */
