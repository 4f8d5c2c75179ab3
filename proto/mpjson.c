/* proto/mpjson.c - convert between msgpack objects and jansson values */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "proto/mpjson.h"
#include "proto/msg.h"

json_t *pl_mpjson_to_json(const msgpack_object *o)
{
    json_t *j = NULL;

    switch (o->type) {
    case MSGPACK_OBJECT_NIL:
        return json_null();
    case MSGPACK_OBJECT_BOOLEAN:
        return json_boolean(o->via.boolean);
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        if (o->via.u64 > (uint64_t)INT64_MAX)
            break;
        return json_integer((json_int_t)o->via.u64);
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        return json_integer((json_int_t)o->via.i64);
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        return json_real(o->via.f64);
    case MSGPACK_OBJECT_STR:
        /* N.B. msgpack-c may give an empty string a NULL ptr */
        return json_stringn_nocheck(o->via.str.size ? o->via.str.ptr : "",
                                    o->via.str.size);
    case MSGPACK_OBJECT_ARRAY:
        if (!(j = json_array()))
            goto nomem;
        for (uint32_t i = 0; i < o->via.array.size; i++) {
            json_t *e = pl_mpjson_to_json(&o->via.array.ptr[i]);
            if (!e || json_array_append_new(j, e) < 0)
                goto fail;
        }
        return j;
    case MSGPACK_OBJECT_MAP:
        if (!(j = json_object()))
            goto nomem;
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            const msgpack_object_kv *kv = &o->via.map.ptr[i];
            json_t *v;
            if (kv->key.type != MSGPACK_OBJECT_STR
                || (kv->key.via.str.size
                    && memchr(kv->key.via.str.ptr, '\0', kv->key.via.str.size)))
                goto proto;
            if (!(v = pl_mpjson_to_json(&kv->val)))
                goto fail;
            if (json_object_setn_new_nocheck(j, kv->key.via.str.size
                                                    ? kv->key.via.str.ptr
                                                    : "",
                                             kv->key.via.str.size, v) < 0)
                goto fail;
        }
        return j;
    default:
        break;
    }
proto:
    json_decref(j);
    errno = EPROTO;
    return NULL;
nomem:
    errno = ENOMEM;
    return NULL;
fail:
    json_decref(j);
    if (errno != EPROTO)
        errno = ENOMEM;
    return NULL;
}

void pl_mpjson_pack(msgpack_packer *pk, const json_t *j)
{
    const char *key;
    json_t *v;
    size_t i;

    switch (json_typeof(j)) {
    case JSON_OBJECT:
        msgpack_pack_map(pk, json_object_size(j));
        json_object_foreach((json_t *)j, key, v) {
            pl_w_str(pk, key); /* no NULs: pl_mpjson_to_json() refuses them */
            pl_mpjson_pack(pk, v);
        }
        break;
    case JSON_ARRAY:
        msgpack_pack_array(pk, json_array_size(j));
        json_array_foreach(j, i, v)
            pl_mpjson_pack(pk, v);
        break;
    case JSON_STRING:
        msgpack_pack_str(pk, json_string_length(j));
        msgpack_pack_str_body(pk, json_string_value(j), json_string_length(j));
        break;
    case JSON_INTEGER:
        msgpack_pack_int64(pk, json_integer_value(j));
        break;
    case JSON_REAL:
        msgpack_pack_double(pk, json_real_value(j));
        break;
    case JSON_TRUE:
        msgpack_pack_true(pk);
        break;
    case JSON_FALSE:
        msgpack_pack_false(pk);
        break;
    case JSON_NULL:
        msgpack_pack_nil(pk);
        break;
    }
}
