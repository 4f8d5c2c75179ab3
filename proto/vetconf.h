/* proto/vetconf.h - node vetting's settings from a vet.yaml, and the
 * built-in default (docs/vet.yaml) */
#ifndef PL_PROTO_VETCONF_H
#define PL_PROTO_VETCONF_H

#include "proto/error.h"
#include "proto/vetmsg.h"

/* The name of the copy in the pilot directory (pilot up --vet FILE). */
#define PL_VETCONF_FILE "vet.yaml"

/* The built-in settings into 'c' (owned: pl_vetconf_clear()).  0, or -1
 * (ENOMEM). */
int pl_vetconf_default(struct pl_vetconf *c);

/* Read 'path' into 'c' (owned): what the file gives over the built-in
 * default, every key known, every value checked.  The text "none" as the
 * path gives settings with no check at all (vetting off).  Returns 0, or
 * -1 with errp ("vet.yaml:12: cpu.slices: want 1 to 1000") and errno
 * EINVAL (a bad file), ENOENT and the like (cannot read it), ENOMEM. */
int pl_vetconf_load(const char *path, struct pl_vetconf *c,
                    struct pl_error *errp);
/* The same from 'len' bytes of YAML at 'buf'; 'name' prefixes errors. */
int pl_vetconf_parse(const char *name, const char *buf, size_t len,
                     struct pl_vetconf *c, struct pl_error *errp);

/* Whether 'c' checks nothing (vetting off). */
bool pl_vetconf_empty(const struct pl_vetconf *c);

#endif /* !PL_PROTO_VETCONF_H */
