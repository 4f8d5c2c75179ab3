/* tests/mpw.h - raw msgpack writers for tests: maps whose counts the test
 * gives, so that it can build what a broken or hostile peer sends
 *
 * The product's writers (proto/msg.h, pl_wm_*) count a map's pairs
 * themselves; these do not, on purpose.
 */
#ifndef PL_TESTS_MPW_H
#define PL_TESTS_MPW_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <msgpack.h>

#include "proto/msg.h"

/* The envelope of a message and a body map header of 'nfields' pairs. */
static inline void raw_wbuf_init(struct pl_wbuf *w, int type, uint64_t seq,
                                 uint32_t nfields)
{
    msgpack_sbuffer_init(&w->sb);
    msgpack_packer_init(&w->pk, &w->sb, msgpack_sbuffer_write);
    msgpack_pack_array(&w->pk, 4);
    msgpack_pack_uint32(&w->pk, PL_PROTO_VERSION);
    msgpack_pack_uint32(&w->pk, (uint32_t)type);
    msgpack_pack_uint64(&w->pk, seq);
    msgpack_pack_map(&w->pk, nfields);
}

static inline void raw_key(msgpack_packer *pk, const char *key)
{
    pl_w_str(pk, key);
}

static inline void raw_kstr(msgpack_packer *pk, const char *key,
                            const char *val)
{
    pl_w_str(pk, key);
    pl_w_str(pk, val);
}

static inline void raw_kuint(msgpack_packer *pk, const char *key,
                             uint64_t val)
{
    pl_w_str(pk, key);
    msgpack_pack_uint64(pk, val);
}

static inline void raw_kint(msgpack_packer *pk, const char *key, int64_t val)
{
    pl_w_str(pk, key);
    msgpack_pack_int64(pk, val);
}

static inline void raw_kdouble(msgpack_packer *pk, const char *key,
                               double val)
{
    pl_w_str(pk, key);
    msgpack_pack_double(pk, val);
}

static inline void raw_kbool(msgpack_packer *pk, const char *key, bool val)
{
    pl_w_str(pk, key);
    if (val)
        msgpack_pack_true(pk);
    else
        msgpack_pack_false(pk);
}

static inline void raw_kstrv(msgpack_packer *pk, const char *key,
                             char *const *v)
{
    size_t n = 0;

    while (v && v[n])
        n++;
    pl_w_str(pk, key);
    msgpack_pack_array(pk, n);
    for (size_t i = 0; i < n; i++)
        pl_w_str(pk, v[i]);
}

static inline void raw_kuintv(msgpack_packer *pk, const char *key,
                              const uint64_t *v, uint32_t n)
{
    pl_w_str(pk, key);
    msgpack_pack_array(pk, n);
    for (uint32_t i = 0; i < n; i++)
        msgpack_pack_uint64(pk, v[i]);
}

#endif /* !PL_TESTS_MPW_H */
