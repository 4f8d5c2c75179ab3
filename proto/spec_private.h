/* proto/spec_private.h - what spec.c and spec_fn.c share */
#ifndef PL_PROTO_SPEC_PRIVATE_H
#define PL_PROTO_SPEC_PRIVATE_H

#include <msgpack.h>

#include "proto/spec.h"

/* The rules of a spec's fn and of a Python call's fields (spec_fn.c),
 * part of pl_spec_check().  0, or -1 with errp (EINVAL). */
int pl_spec_fn_check(const struct pl_spec *s, struct pl_error *errp);
/* A Python call's fields from 'o' into 's': 'input' (bytes, copied),
 * 'input_file', 'py_prelude', 'python', 'refs'.  0, or -1 with errp. */
int pl_spec_pycall_decode(const msgpack_object *o, struct pl_spec *s,
                          struct pl_error *errp);

#endif /* !PL_PROTO_SPEC_PRIVATE_H */
