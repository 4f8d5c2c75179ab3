/* client/spec_py.h - pilot submit's Python calls: --py-call, --input
 *
 * A Python call (fn pycall, docs/python-reference.md) runs in a warm worker of its
 * agent: --py-call MODULE:FUNCTION with string arguments, or --input
 * FILE, a cloudpickle of (function, args, kwargs) made by a client.
 */
#ifndef PL_CLIENT_SPEC_PY_H
#define PL_CLIENT_SPEC_PY_H

#include <jansson.h>

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

/* A pickled call over PL_SPEC_MAX_INPUT bytes in 's' (a task file's
 * "input" or "input_file", read into s->input) written to a new file
 * under the pilot directory 'dir''s inputs/ (0600, synced), which 's'
 * then names instead (input_file), as --input does; a smaller one stays
 * inline.  'dir' NULL: refused (E2BIG).  0, or -1 with errp. */
int pl_cli_spec_py_stage(struct pl_spec *s, const char *dir,
                         struct pl_error *errp);

/* Remove the files pl_cli_spec_py_stage() wrote for specs[from..n)
 * (each input_file of a spec a client built is one), which pilotd did
 * not store: a refused submit of a large call leaves no file behind (up
 * to 256 MiB each, for nothing).  Preserves errno. */
void pl_cli_spec_py_unstage(const struct pl_spec *specs, size_t n,
                            size_t from);

/* A task file's key of a Python call (pl_cli_spec_entry()): "py_call"
 * ("MODULE:FUNCTION", with "argv" its string arguments), "input" (the
 * pickled call in base64), "input_file" (a file holding it, relative to
 * 'here'; read now), "py_prelude", "python", "refs" (task ids).  A
 * pickled call of any size up to PL_SPEC_MAX_INPUT_FILE is kept in
 * spec.input until pl_cli_spec_py_stage().  0, or -1 with errp. */
int pl_cli_spec_py_entry(struct pl_cli_spec *b, const char *key,
                         const json_t *v, const char *here,
                         struct pl_error *errp);

/* After all of 'entry''s keys: the rules between them (input or
 * input_file or py_call, refs only with a call), each ref added to
 * 'after' as ID:ok when it is not there, and a pickled call's label
 * ("argv" absent: the input file's name, or "input").  0, or -1 with
 * errp. */
int pl_cli_spec_py_done(struct pl_cli_spec *b, const json_t *entry,
                        struct pl_error *errp);

#endif /* !PL_CLIENT_SPEC_PY_H */
