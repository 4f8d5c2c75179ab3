/* proto/msg.c - wire messages: envelope, types, checked field access */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/msg.h"

const char *pl_msg_type_name(int type)
{
    switch (type) {
    case PL_MSG_REPLY: return "reply";
    case PL_MSG_ENDS: return "ends";
    case PL_MSG_SUBMIT: return "submit";
    case PL_MSG_LIST: return "list";
    case PL_MSG_SHOW: return "show";
    case PL_MSG_CANCEL: return "cancel";
    case PL_MSG_STATUS: return "status";
    case PL_MSG_SHUTDOWN: return "shutdown";
    case PL_MSG_COUNTS: return "counts";
    case PL_MSG_KEYS: return "keys";
    case PL_MSG_POOL_START: return "pool-start";
    case PL_MSG_POOL_STOP: return "pool-stop";
    case PL_MSG_POOL_LIST: return "pool-list";
    case PL_MSG_WATCH: return "watch";
    case PL_MSG_UNWATCH: return "unwatch";
    case PL_MSG_RESULTS: return "results";
    case PL_MSG_EXPLAIN: return "explain";
    case PL_MSG_VET_REQ: return "vet";
    case PL_MSG_CORDON: return "cordon";
    case PL_MSG_TIMELINE: return "timeline";
    case PL_MSG_GROW: return "grow";
    case PL_MSG_SHRINK: return "shrink";
    case PL_MSG_ALLOCS: return "allocs";
    case PL_MSG_WELCOME: return "welcome";
    case PL_MSG_RUN: return "run";
    case PL_MSG_KILL: return "kill";
    case PL_MSG_EXIT: return "exit";
    case PL_MSG_ACK: return "ack";
    case PL_MSG_REREGISTER: return "reregister";
    case PL_MSG_PING: return "ping";
    case PL_MSG_VET: return "vet-run";
    case PL_MSG_REGISTER: return "register";
    case PL_MSG_PULL: return "pull";
    case PL_MSG_EVENTS: return "events";
    case PL_MSG_HEARTBEAT: return "heartbeat";
    case PL_MSG_GOT: return "got";
    case PL_MSG_POOL_READY: return "pool-ready";
    case PL_MSG_VET_RESULT: return "vet-result";
    case PL_MSG_W_HELLO: return "hello";
    case PL_MSG_W_CALL: return "call";
    case PL_MSG_W_ENTERED: return "entered";
    case PL_MSG_W_RETURN: return "return";
    case PL_MSG_W_CRASH: return "crash";
    case PL_MSG_PY_HELLO: return "py-hello";
    case PL_MSG_PY_CALL: return "py-call";
    case PL_MSG_PY_RESULT: return "py-result";
    case PL_MSG_PY_ENTERED: return "py-entered";
    }
    return "unknown";
}

__attribute__((format(printf, 2, 3)))
static int proto_err(struct pl_error *errp, const char *fmt, ...)
{
    if (errp) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(errp->text, sizeof(errp->text), fmt, ap);
        va_end(ap);
    }
    errno = EPROTO;
    return -1;
}

static uint64_t be(const unsigned char *p, size_t n)
{
    uint64_t v = 0;

    for (size_t i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

/* msgpack-c allocates room for every element an array or map header
 * claims before it reads them (msgpack/msgpack-c#1013): 5 bytes can ask
 * for 100 GiB.  So walk the headers first and refuse a message whose
 * element counts exceed the bytes left (every element takes at least one
 * byte), or that ends early, or that holds more than 'max' objects
 * (PL_MSG_MAX_OBJECTS: what msgpack-c then builds costs time and memory
 * in proportion).  Returns 0, -1 (malformed) or -2 (too many objects). */
static int precheck(const unsigned char *p, size_t len, uint64_t max)
{
    size_t off = 0;
    uint64_t pending = 1; /* objects still to read */
    uint64_t seen = 0;    /* objects read */

    while (pending > 0) {
        uint64_t n = 0, skip = 0;
        size_t hdr = 0;   /* length bytes after the type byte */
        int mult = 1;     /* 2 for maps: keys and values */
        unsigned char c;

        if (off >= len)
            return -1;
        c = p[off++];
        pending--;
        seen++;
        if (c <= 0x7f || c >= 0xe0)
            continue;
        if (c <= 0x8f) {
            n = 2 * (uint64_t)(c & 0x0f);
        }
        else if (c <= 0x9f)
            n = c & 0x0f;
        else if (c <= 0xbf)
            skip = c & 0x1f;
        else {
            switch (c) {
            case 0xc0: case 0xc2: case 0xc3: break;
            case 0xc4: case 0xd9: hdr = 1; break;        /* bin8, str8 */
            case 0xc5: case 0xda: hdr = 2; break;        /* bin16, str16 */
            case 0xc6: case 0xdb: hdr = 4; break;        /* bin32, str32 */
            case 0xc7: hdr = 1; skip = 1; break;         /* ext8 + type */
            case 0xc8: hdr = 2; skip = 1; break;
            case 0xc9: hdr = 4; skip = 1; break;
            case 0xcc: case 0xd0: skip = 1; break;
            case 0xcd: case 0xd1: skip = 2; break;
            case 0xca: case 0xce: case 0xd2: skip = 4; break;
            case 0xcb: case 0xcf: case 0xd3: skip = 8; break;
            case 0xd4: skip = 2; break;                  /* fixext1..16 */
            case 0xd5: skip = 3; break;
            case 0xd6: skip = 5; break;
            case 0xd7: skip = 9; break;
            case 0xd8: skip = 17; break;
            case 0xdc: hdr = 2; mult = 0; break;         /* array16 */
            case 0xdd: hdr = 4; mult = 0; break;         /* array32 */
            case 0xde: hdr = 2; mult = -2; break;        /* map16 */
            case 0xdf: hdr = 4; mult = -2; break;        /* map32 */
            default: return -1;                          /* 0xc1 */
            }
            if (hdr > len - off)
                return -1;
            if (mult <= 0) /* the header holds a count, not a length */
                n = be(p + off, hdr) * (uint64_t)(mult ? 2 : 1);
            else
                skip += be(p + off, hdr);
            off += hdr;
        }
        /* every object is the root or declared by a header: checking
         * here counts them all */
        if (n > len - off || pending + n > len - off)
            return -1;
        if (seen + pending + n > max)
            return -2;
        pending += n;
        if (skip > len - off)
            return -1;
        off += skip;
    }
    return 0;
}

int pl_msg_decode(const void *buf, size_t len, struct pl_msg *m,
                  struct pl_error *errp)
{
    return pl_msg_decode_max(buf, len, PL_MSG_MAX_OBJECTS, m, errp);
}

int pl_msg_decode_max(const void *buf, size_t len, uint64_t max_objects,
                      struct pl_msg *m, struct pl_error *errp)
{
    size_t off = 0;
    const msgpack_object *a;

    memset(m, 0, sizeof(*m));
    msgpack_unpacked_init(&m->up);
    if (len == 0 || len > PL_MSG_MAX) {
        proto_err(errp, "message size out of range");
        goto error;
    }
    int rc = precheck(buf, len, max_objects);
    if (rc == -2) {
        proto_err(errp, "message holds more than %llu values",
                  (unsigned long long)max_objects);
        goto error;
    }
    if (rc < 0
        || msgpack_unpack_next(&m->up, buf, len, &off)
               != MSGPACK_UNPACK_SUCCESS) {
        proto_err(errp, "malformed message");
        goto error;
    }
    if (off != len) {
        proto_err(errp, "trailing bytes after message");
        goto error;
    }
    if (m->up.data.type != MSGPACK_OBJECT_ARRAY
        || m->up.data.via.array.size != 4) {
        proto_err(errp, "message is not a 4-element array");
        goto error;
    }
    a = m->up.data.via.array.ptr;
    if (a[0].type != MSGPACK_OBJECT_POSITIVE_INTEGER
        || a[0].via.u64 != PL_PROTO_VERSION) {
        proto_err(errp, "protocol version mismatch (want %d)", PL_PROTO_VERSION);
        goto error;
    }
    if (a[1].type != MSGPACK_OBJECT_POSITIVE_INTEGER
        || a[1].via.u64 > 1000
        || !strcmp(pl_msg_type_name((int)a[1].via.u64), "unknown")) {
        proto_err(errp, "unknown message type");
        goto error;
    }
    if (a[2].type != MSGPACK_OBJECT_POSITIVE_INTEGER) {
        proto_err(errp, "bad sequence number");
        goto error;
    }
    if (a[3].type != MSGPACK_OBJECT_MAP) {
        proto_err(errp, "message body is not a map");
        goto error;
    }
    for (uint32_t i = 0; i < a[3].via.map.size; i++) {
        if (a[3].via.map.ptr[i].key.type != MSGPACK_OBJECT_STR) {
            proto_err(errp, "message body key is not a string");
            goto error;
        }
    }
    m->type = (int)a[1].via.u64;
    m->seq = a[2].via.u64;
    m->body = &a[3];
    return 0;
error:
    msgpack_unpacked_destroy(&m->up);
    memset(m, 0, sizeof(*m));
    errno = EPROTO;
    return -1;
}

/* The unsigned integer at p + *off, as msgpack-c reads one (a signed
 * encoding of a value >= 0 counts), moving *off past it: 0, or -1. */
static int head_uint(const unsigned char *p, size_t len, size_t *off,
                     uint64_t *v)
{
    unsigned c;
    size_t n;

    if (*off >= len)
        return -1;
    c = p[(*off)++];
    if (c <= 0x7f) {
        *v = c;
        return 0;
    }
    if (c < 0xcc || c > 0xd3)
        return -1;
    n = (size_t)1 << ((c - 0xcc) & 3); /* uint8..64, then int8..64 */
    if (n > len - *off)
        return -1;
    *v = be(p + *off, n);
    if (c >= 0xd0 && (*v >> (8 * n - 1)))
        return -1; /* negative */
    *off += n;
    return 0;
}

/* N.B. only the head is read: a frame refused after msgpack-c decoded
 * all of it (4 Mi values, 0.5 s) is not decoded a second time. */
int pl_msg_peek(const void *buf, size_t len, uint64_t *version,
                uint64_t *seq)
{
    const unsigned char *p = buf;
    size_t off = 1;
    uint64_t n = 0, type;

    if (len == 0 || len > PL_MSG_MAX)
        goto error;
    if (p[0] >= 0x90 && p[0] <= 0x9f)
        n = p[0] & 0x0f;
    else if ((p[0] == 0xdc || p[0] == 0xdd) && len > (p[0] == 0xdc ? 2 : 4)) {
        off += p[0] == 0xdc ? 2 : 4;
        n = be(p + 1, off - 1);
    }
    if (n < 3 || head_uint(p, len, &off, version) < 0
        || head_uint(p, len, &off, &type) < 0
        || head_uint(p, len, &off, seq) < 0)
        goto error;
    return 0;
error:
    errno = EPROTO;
    return -1;
}

void pl_msg_release(struct pl_msg *m)
{
    if (m && m->body) {
        int saved = errno;
        msgpack_unpacked_destroy(&m->up);
        m->body = NULL;
        free(m->own);
        m->own = NULL;
        errno = saved;
    }
}

const msgpack_object *pl_mp_get(const msgpack_object *map, const char *key)
{
    size_t klen = strlen(key);

    if (!map || map->type != MSGPACK_OBJECT_MAP)
        return NULL;
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *k = &map->via.map.ptr[i].key;
        if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == klen
            && !memcmp(k->via.str.ptr, key, klen))
            return &map->via.map.ptr[i].val;
    }
    return NULL;
}

/* Look up 'key': 1 and *o set, 0 if absent or nil and optional, -1. */
static int lookup(const msgpack_object *map, const char *key, bool required,
                  const msgpack_object **o, struct pl_error *errp)
{
    *o = pl_mp_get(map, key);
    if (!*o || (*o)->type == MSGPACK_OBJECT_NIL) {
        if (required)
            return proto_err(errp, "missing field '%s'", key);
        return 0;
    }
    return 1;
}

int pl_mp_uint(const msgpack_object *map, const char *key, bool required,
               uint64_t max, uint64_t *v, struct pl_error *errp)
{
    const msgpack_object *o = NULL;
    int rc = lookup(map, key, required, &o, errp);

    if (rc <= 0)
        return rc;
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER || o->via.u64 > max)
        return proto_err(errp, "field '%s': not an integer in range", key);
    *v = o->via.u64;
    return 1;
}

int pl_mp_int(const msgpack_object *map, const char *key, bool required,
              int64_t *v, struct pl_error *errp)
{
    const msgpack_object *o = NULL;
    int rc = lookup(map, key, required, &o, errp);

    if (rc <= 0)
        return rc;
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        *v = o->via.i64;
    else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER
             && o->via.u64 <= INT64_MAX)
        *v = (int64_t)o->via.u64;
    else
        return proto_err(errp, "field '%s': not an integer", key);
    return 1;
}

int pl_mp_double(const msgpack_object *map, const char *key, bool required,
                 double *v, struct pl_error *errp)
{
    const msgpack_object *o = NULL;
    int rc = lookup(map, key, required, &o, errp);

    if (rc <= 0)
        return rc;
    if (o->type == MSGPACK_OBJECT_FLOAT32 || o->type == MSGPACK_OBJECT_FLOAT64)
        *v = o->via.f64;
    else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER)
        *v = (double)o->via.u64;
    else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        *v = (double)o->via.i64;
    else
        return proto_err(errp, "field '%s': not a number", key);
    return 1;
}

int pl_mp_bool(const msgpack_object *map, const char *key, bool required,
               bool *v, struct pl_error *errp)
{
    const msgpack_object *o = NULL;
    int rc = lookup(map, key, required, &o, errp);

    if (rc <= 0)
        return rc;
    if (o->type != MSGPACK_OBJECT_BOOLEAN)
        return proto_err(errp, "field '%s': not a boolean", key);
    *v = o->via.boolean;
    return 1;
}

char *pl_mp_strdup(const msgpack_object *o, size_t maxlen)
{
    char *s;

    if (o->type != MSGPACK_OBJECT_STR || o->via.str.size > maxlen
        || memchr(o->via.str.ptr, '\0', o->via.str.size)) {
        errno = EPROTO;
        return NULL;
    }
    if (!(s = malloc(o->via.str.size + 1)))
        return NULL;
    memcpy(s, o->via.str.ptr, o->via.str.size);
    s[o->via.str.size] = '\0';
    return s;
}

int pl_mp_str(const msgpack_object *map, const char *key, bool required,
              size_t maxlen, char **s, struct pl_error *errp)
{
    const msgpack_object *o = NULL;
    int rc = lookup(map, key, required, &o, errp);
    char *copy;

    if (rc <= 0)
        return rc;
    if (!(copy = pl_mp_strdup(o, maxlen))) {
        if (errno == EPROTO)
            return proto_err(errp, "field '%s': not a valid string", key);
        return pl_errprintf(errp, "out of memory");
    }
    *s = copy;
    return 1;
}

int pl_mp_bin(const msgpack_object *map, const char *key, bool required,
              size_t maxlen, const unsigned char **p, size_t *len,
              struct pl_error *errp)
{
    const msgpack_object *o = NULL;
    int rc = lookup(map, key, required, &o, errp);

    if (rc <= 0)
        return rc;
    if (o->type != MSGPACK_OBJECT_BIN)
        return proto_err(errp, "field '%s': not bytes", key);
    if (o->via.bin.size > maxlen)
        return proto_err(errp, "field '%s': %u bytes; at most %zu", key,
                         o->via.bin.size, maxlen);
    *p = (const unsigned char *)o->via.bin.ptr;
    *len = o->via.bin.size;
    return 1;
}

int pl_mp_array(const msgpack_object *map, const char *key, bool required,
                uint32_t maxn, const msgpack_object **arr,
                struct pl_error *errp)
{
    const msgpack_object *o = NULL;
    int rc = lookup(map, key, required, &o, errp);

    if (rc <= 0)
        return rc;
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size > maxn)
        return proto_err(errp, "field '%s': not an array of allowed size",
                         key);
    *arr = o;
    return 1;
}

int pl_mp_map(const msgpack_object *map, const char *key, bool required,
              const msgpack_object **out, struct pl_error *errp)
{
    const msgpack_object *o = NULL;
    int rc = lookup(map, key, required, &o, errp);

    if (rc <= 0)
        return rc;
    if (o->type != MSGPACK_OBJECT_MAP)
        return proto_err(errp, "field '%s': not a map", key);
    *out = o;
    return 1;
}

int pl_mp_strv(const msgpack_object *map, const char *key, bool required,
               uint32_t minn, uint32_t maxn, size_t maxlen, char ***v,
               struct pl_error *errp)
{
    const msgpack_object *arr = NULL;
    char **out;
    int rc = pl_mp_array(map, key, required, maxn, &arr, errp);

    if (rc <= 0)
        return rc;
    if (arr->via.array.size < minn)
        return proto_err(errp, "field '%s': too few elements", key);
    if (!(out = calloc(arr->via.array.size + 1, sizeof(*out))))
        return pl_errprintf(errp, "out of memory");
    for (uint32_t i = 0; i < arr->via.array.size; i++) {
        if (!(out[i] = pl_mp_strdup(&arr->via.array.ptr[i], maxlen))) {
            pl_strv_free(out);
            return proto_err(errp, "field '%s': bad string element", key);
        }
    }
    *v = out;
    return 1;
}

int pl_mp_uintv(const msgpack_object *map, const char *key, bool required,
                uint32_t maxn, uint64_t max, uint64_t **v, uint32_t *n,
                struct pl_error *errp)
{
    const msgpack_object *arr = NULL;
    uint64_t *out;
    int rc = pl_mp_array(map, key, required, maxn, &arr, errp);

    if (rc <= 0)
        return rc;
    if (!(out = calloc(arr->via.array.size + 1, sizeof(*out))))
        return pl_errprintf(errp, "out of memory");
    for (uint32_t i = 0; i < arr->via.array.size; i++) {
        const msgpack_object *e = &arr->via.array.ptr[i];
        if (e->type != MSGPACK_OBJECT_POSITIVE_INTEGER || e->via.u64 > max) {
            free(out);
            return proto_err(errp, "field '%s': bad integer element", key);
        }
        out[i] = e->via.u64;
    }
    *v = out;
    *n = arr->via.array.size;
    return 1;
}

/* The map32 header of 'm' says m->n pairs. */
static void wmap_count(struct pl_wmap *m)
{
    unsigned char *h = (unsigned char *)m->w->sb.data + m->at;

    h[1] = (unsigned char)(m->n >> 24);
    h[2] = (unsigned char)(m->n >> 16);
    h[3] = (unsigned char)(m->n >> 8);
    h[4] = (unsigned char)m->n;
}

void pl_wmap_begin(struct pl_wbuf *w, struct pl_wmap *m)
{
    static const unsigned char map32[5] = { 0xdf, 0, 0, 0, 0 };

    m->w = w;
    m->at = w->sb.size;
    m->n = 0;
    msgpack_sbuffer_write(&w->sb, (const char *)map32, sizeof(map32));
}

void pl_wbuf_init(struct pl_wbuf *w, int type, uint64_t seq)
{
    msgpack_sbuffer_init(&w->sb);
    msgpack_packer_init(&w->pk, &w->sb, msgpack_sbuffer_write);
    msgpack_pack_array(&w->pk, 4);
    msgpack_pack_uint32(&w->pk, PL_PROTO_VERSION);
    msgpack_pack_uint32(&w->pk, (uint32_t)type);
    msgpack_pack_uint64(&w->pk, seq);
    pl_wmap_begin(w, &w->body);
}

void pl_wbuf_destroy(struct pl_wbuf *w)
{
    msgpack_sbuffer_destroy(&w->sb);
}

void pl_w_str(msgpack_packer *pk, const char *s)
{
    if (!s) {
        msgpack_pack_nil(pk);
        return;
    }
    size_t len = strlen(s);
    msgpack_pack_str(pk, len);
    msgpack_pack_str_body(pk, s, len);
}

msgpack_packer *pl_wm_key(struct pl_wmap *m, const char *key)
{
    pl_w_str(&m->w->pk, key);
    m->n++;
    wmap_count(m);
    return &m->w->pk;
}

void pl_wm_str(struct pl_wmap *m, const char *key, const char *val)
{
    pl_w_str(pl_wm_key(m, key), val);
}

void pl_wm_uint(struct pl_wmap *m, const char *key, uint64_t val)
{
    msgpack_pack_uint64(pl_wm_key(m, key), val);
}

void pl_wm_int(struct pl_wmap *m, const char *key, int64_t val)
{
    msgpack_pack_int64(pl_wm_key(m, key), val);
}

void pl_wm_double(struct pl_wmap *m, const char *key, double val)
{
    msgpack_pack_double(pl_wm_key(m, key), val);
}

void pl_wm_bool(struct pl_wmap *m, const char *key, bool val)
{
    msgpack_packer *pk = pl_wm_key(m, key);

    if (val)
        msgpack_pack_true(pk);
    else
        msgpack_pack_false(pk);
}

void pl_wm_strv(struct pl_wmap *m, const char *key, char *const *v)
{
    size_t n = pl_strv_len(v);
    msgpack_packer *pk = pl_wm_key(m, key);

    msgpack_pack_array(pk, n);
    for (size_t i = 0; i < n; i++)
        pl_w_str(pk, v[i]);
}

void pl_wm_bin(struct pl_wmap *m, const char *key, const void *p, size_t len)
{
    msgpack_packer *pk = pl_wm_key(m, key);

    msgpack_pack_bin(pk, len);
    msgpack_pack_bin_body(pk, p, len);
}

void pl_wm_uintv(struct pl_wmap *m, const char *key, const uint64_t *v,
                 uint32_t n)
{
    msgpack_packer *pk = pl_wm_key(m, key);

    msgpack_pack_array(pk, n);
    for (uint32_t i = 0; i < n; i++)
        msgpack_pack_uint64(pk, v[i]);
}

void pl_wbuf_reply(struct pl_wbuf *w, uint64_t seq, int errnum,
                   const char *text)
{
    pl_wbuf_init(w, PL_MSG_REPLY, seq);
    pl_wm_int(&w->body, "errno", errnum);
    if (errnum) {
        pl_wm_str(&w->body, "error", text ? text : strerror(errnum));
        msgpack_pack_nil(pl_wm_key(&w->body, "data"));
    }
    else
        (void)pl_wm_key(&w->body, "data"); /* the caller packs the value */
}

int pl_reply_decode(const msgpack_object *body, int64_t *errnum,
                    char **text, const msgpack_object **data,
                    struct pl_error *errp)
{
    *text = NULL;
    *data = NULL;
    if (pl_mp_int(body, "errno", true, errnum, errp) < 0
        || pl_mp_str(body, "error", false, 4096, text, errp) < 0)
        return -1;
    *data = pl_mp_get(body, "data");
    return 0;
}
