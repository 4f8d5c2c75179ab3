/* proto/mpjson.h - convert between msgpack objects and jansson values */
#ifndef PL_PROTO_MPJSON_H
#define PL_PROTO_MPJSON_H

#include <jansson.h>
#include <msgpack.h>

/* A new JSON value for 'o' (maps must have string keys without NUL
 * bytes; bin and ext are refused).  Returns NULL with errno EPROTO or ENOMEM. */
json_t *pl_mpjson_to_json(const msgpack_object *o);

/* Pack JSON value 'j' (borrowed) with 'pk'. */
void pl_mpjson_pack(msgpack_packer *pk, const json_t *j);

#endif /* !PL_PROTO_MPJSON_H */
