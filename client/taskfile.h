/* client/taskfile.h - pilot submit --file: a JSONL or YAML task file
 *
 * A JSONL file has one JSON object a line (blank lines and lines that
 * start with '#' are skipped); a YAML file is a list of mappings, or a
 * mapping whose "tasks" is that list, read through libyaml into the
 * JSON a JSONL line would be (plain scalars that read as integers,
 * reals, true/false or null/~ become those, except in fields whose
 * values are text; anything quoted stays a string).  Either way each
 * entry goes through pl_cli_spec_entry() (client/spec.h), and the specs
 * come out in the order to submit them.
 */
#ifndef PL_CLIENT_TASKFILE_H
#define PL_CLIENT_TASKFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "proto/error.h"
#include "proto/spec.h"

/* The tasks of a file. */
struct pl_taskfile {
    struct pl_spec *specs; /* 'n' of them, each owned: a task named in
                              another's "after" comes before it */
    size_t *lines;         /* the line each starts on */
    size_t n;
};

/* Whether 'path' names a YAML file (it ends in .yaml or .yml). */
bool pl_taskfile_is_yaml(const char *path);

/* Read the task file 'fp' (YAML if 'yaml', else JSONL) into 'tf', a
 * relative "cwd" (and no "cwd") meaning 'here'.  The specs are ordered
 * so that a task comes after those of the file its "after" names (a
 * name means the last entry of that name), otherwise in the file's
 * order; none is checked with pl_spec_check() yet.  Returns 0 (free
 * with pl_taskfile_clear()), or -1 with 'tf' empty, errp set and *line
 * the line at fault ("not JSON: ...", "its "after" is part of a cycle"),
 * or 0 when it is the file's ("no tasks in it"), or reading it failed
 * (ferror(fp); errp says why). */
int pl_taskfile_read(FILE *fp, bool yaml, const char *here,
                     struct pl_taskfile *tf, size_t *line,
                     struct pl_error *errp);
void pl_taskfile_clear(struct pl_taskfile *tf);

#endif /* !PL_CLIENT_TASKFILE_H */
