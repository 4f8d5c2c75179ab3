/* client/spec_out.c - a task's --output: files or journal (docs/output.md) */
#include <errno.h>
#include <string.h>

#include "client/spec.h"

/* The mode travels as the task's PILOT_OUTPUT, which the agent reads
 * (agent/journal.h): neither the wire nor the state database changes for
 * it, and a task's own setting comes after the pilot's (pilot up
 * --output, in the agents' environment). */
int pl_cli_spec_output(struct pl_cli_spec *b, const char *what,
                       const char *arg, struct pl_error *errp)
{
    if (strcmp(arg, "files") && strcmp(arg, "journal"))
        return pl_errset(errp, EINVAL, "%s: '%s' is not files or journal",
                         what, arg);
    return pl_cli_spec_flag(b, "env",
                            !strcmp(arg, "files") ? "PILOT_OUTPUT=files"
                                                  : "PILOT_OUTPUT=journal",
                            errp);
}
