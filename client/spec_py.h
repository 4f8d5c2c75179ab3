/* client/spec_py.h - pilot submit's Python calls: --py-call, --input
 *
 * A Python call (fn pycall, docs/python.md) runs in a warm worker of its
 * agent: --py-call MODULE:FUNCTION with string arguments, or --input
 * FILE, a cloudpickle of (function, args, kwargs) made by a client.
 */
#ifndef PL_CLIENT_SPEC_PY_H
#define PL_CLIENT_SPEC_PY_H

#include "client/spec.h"
#include "proto/error.h"

/* Apply --'name' ("py-call", "py-prelude", "python") with value 'arg':
 * 'b' becomes a Python call.  0, or -1 with errp (a usage error). */
int pl_cli_spec_py(struct pl_cli_spec *b, const char *name, const char *arg,
                   struct pl_error *errp);

/* --input FILE ('-': stdin): its bytes become the pickled call of 'b',
 * inline up to PL_SPEC_MAX_INPUT, else written to a new file under the
 * pilot directory 'dir''s inputs/ (0600, synced) that 'b' names, up to
 * PL_SPEC_MAX_INPUT_FILE; more is refused (E2BIG) saying so.  0, or -1
 * with errp. */
int pl_cli_spec_py_input(struct pl_cli_spec *b, const char *file,
                         const char *dir, struct pl_error *errp);

#endif /* !PL_CLIENT_SPEC_PY_H */
