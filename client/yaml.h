/* client/yaml.h - a YAML task file (pilot submit --file) as JSON values
 *
 * libyaml parses; this turns its document into the JSON a line of a
 * JSONL file would be, so both go through the same checks.  Plain
 * scalars that read as integers, reals, true/false or null/~ become
 * those; anything quoted stays a string. */
#ifndef PL_CLIENT_YAML_H
#define PL_CLIENT_YAML_H

#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

#include "proto/error.h"

/* The entries of the YAML document in 'fp': a list of mappings, or a
 * mapping whose "tasks" is that list.  Returns a new array of the
 * entries, with *lines (malloc'd) the 1-based line each starts on;
 * NULL with errp set ("line N: ..." where the document is wrong). */
json_t *pl_yaml_tasks(FILE *fp, size_t **lines, struct pl_error *errp);

#endif /* !PL_CLIENT_YAML_H */
