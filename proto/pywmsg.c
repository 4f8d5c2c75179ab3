/* proto/pywmsg.c - a warm Python worker and its agent: frames, messages */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/agentmsg.h"
#include "proto/error.h"
#include "proto/msg.h"
#include "proto/pywmsg.h"
#include "proto/strv.h"

/* A frame that breaks the protocol: EPROTO, and why (proto/error.h) */
#define bad(errp, ...) pl_errset((errp), EPROTO, __VA_ARGS__)

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8
           | p[3];
}

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

size_t pl_pyw_frame_len(const unsigned char *p)
{
    return be32(p);
}

/* ------------------------------------------------------------ decode */

void pl_pyw_msg_clear(struct pl_pyw_msg *m)
{
    int saved = errno;

    json_decref(m->h);
    memset(m, 0, sizeof(*m));
    errno = saved;
}

int pl_pyw_decode(const void *buf, size_t len, struct pl_pyw_msg *m,
                  struct pl_error *errp)
{
    const unsigned char *p = buf;
    json_error_t jerr;
    json_t *kind;
    size_t hlen;

    memset(m, 0, sizeof(*m));
    if (len < 4)
        return bad(errp, "a frame of %zu bytes: no header length", len);
    hlen = be32(p);
    if (hlen > PL_PYW_HDR_MAX || hlen > len - 4)
        return bad(errp, "a header of %zu bytes in a frame of %zu", hlen,
                   len);
    /* N.B. no JSON_ALLOW_NUL: a string never holds a NUL */
    if (!(m->h = json_loadb((const char *)p + 4, hlen,
                            JSON_REJECT_DUPLICATES, &jerr)))
        return bad(errp, "header: %.100s", jerr.text);
    kind = json_object_get(m->h, "kind");
    if (!json_is_object(m->h) || !json_is_integer(kind)
        || (json_integer_value(kind) != PL_MSG_PY_HELLO
            && json_integer_value(kind) != PL_MSG_PY_CALL
            && json_integer_value(kind) != PL_MSG_PY_RESULT
            && json_integer_value(kind) != PL_MSG_PY_ENTERED)) {
        pl_pyw_msg_clear(m);
        return bad(errp, "header: not an object of a known 'kind'");
    }
    m->kind = (int)json_integer_value(kind);
    m->data = p + 4 + hlen;
    m->ndata = len - 4 - hlen;
    return 0;
}

/* Field 'key' of 'h' as an integer in 0..max: 1, 0 when absent (and not
 * 'required'), or -1 with errp. */
static int get_uint(const json_t *h, const char *key, bool required,
                    uint64_t max, uint64_t *v, struct pl_error *errp)
{
    json_t *o = json_object_get(h, key);

    if (!o && !required)
        return 0;
    if (!json_is_integer(o) || json_integer_value(o) < 0
        || (uint64_t)json_integer_value(o) > max)
        return bad(errp, "field '%s': want an integer in 0..%llu", key,
                   (unsigned long long)max);
    *v = (uint64_t)json_integer_value(o);
    return 1;
}

/* Field 'key' as a new string of at most 'max' bytes, or NULL when
 * absent: 1, 0, or -1 with errp (EPROTO, ENOMEM). */
static int get_str(const json_t *h, const char *key, size_t max, char **s,
                   struct pl_error *errp)
{
    json_t *o = json_object_get(h, key);

    *s = NULL;
    if (!o || json_is_null(o))
        return 0;
    if (!json_is_string(o) || json_string_length(o) > max)
        return bad(errp, "field '%s': want a string of at most %zu bytes",
                   key, max);
    if (!(*s = strdup(json_string_value(o)))) {
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    return 1;
}

int pl_pyhello_decode(const struct pl_pyw_msg *m, struct pl_pyhello *h,
                      struct pl_error *errp)
{
    uint64_t pid = 0;
    json_t *v;

    memset(h, 0, sizeof(*h));
    if (m->kind != PL_MSG_PY_HELLO)
        return bad(errp, "want a hello first");
    if (get_uint(m->h, "pid", true, INT32_MAX, &pid, errp) < 0)
        return -1;
    if (pid == 0)
        return bad(errp, "hello: pid 0");
    h->pid = (int64_t)pid;
    v = json_object_get(m->h, "version");
    if (json_is_string(v)) {
        snprintf(h->version, sizeof(h->version), "%s", json_string_value(v));
        /* it goes into log lines */
        for (char *c = h->version; *c; c++)
            if (*c < ' ' || *c > '~')
                *c = '?';
    }
    return 0;
}

int pl_pyentered_decode(const struct pl_pyw_msg *m, uint64_t *id,
                        uint64_t *attempt, struct pl_error *errp)
{
    if (m->kind != PL_MSG_PY_ENTERED)
        return bad(errp, "want entered");
    if (get_uint(m->h, "id", true, UINT64_MAX >> 1, id, errp) < 0
        || get_uint(m->h, "attempt", true, UINT32_MAX, attempt, errp) < 0)
        return -1;
    return 0;
}

void pl_pyresult_clear(struct pl_pyresult *r)
{
    int saved = errno;

    free(r->file);
    free(r->reason);
    free(r->repr);
    memset(r, 0, sizeof(*r));
    errno = saved;
}

int pl_pyresult_decode(const struct pl_pyw_msg *m, uint64_t inline_max,
                       uint64_t result_max, struct pl_pyresult *r,
                       struct pl_error *errp)
{
    json_t *st, *in;
    const char *s;
    int hsize;

    memset(r, 0, sizeof(*r));
    if (m->kind != PL_MSG_PY_RESULT)
        return bad(errp, "want a result");
    if (get_uint(m->h, "id", true, UINT64_MAX >> 1, &r->id, errp) < 0
        || get_uint(m->h, "attempt", true, UINT32_MAX, &r->attempt, errp) < 0
        || (hsize = get_uint(m->h, "size", false, result_max, &r->size,
                             errp)) < 0
        || get_str(m->h, "file", 4096, &r->file, errp) < 0
        || get_str(m->h, "reason", PL_PYW_REASON_MAX, &r->reason, errp) < 0
        || get_str(m->h, "repr", 1024, &r->repr, errp) < 0)
        goto error;
    st = json_object_get(m->h, "status");
    s = json_is_string(st) ? json_string_value(st) : "";
    r->status = !strcmp(s, "ok") ? PL_PYW_OK
                : !strcmp(s, "raised") ? PL_PYW_RAISED
                : !strcmp(s, "error") ? PL_PYW_ERROR : 0;
    in = json_object_get(m->h, "interrupted");
    if (in && !json_is_boolean(in)) {
        bad(errp, "field 'interrupted': want a boolean");
        goto error;
    }
    r->interrupted = json_is_true(in);
    if (!r->status) {
        bad(errp, "field 'status': want ok, raised or error");
        goto error;
    }
    if (r->status == PL_PYW_ERROR) {
        if (!r->reason || m->ndata || r->file) {
            bad(errp, "an error: a reason, and no result");
            goto error;
        }
        return 0;
    }
    if (!hsize) {
        bad(errp, "a result without its size");
        goto error;
    }
    if (r->file) {
        if (r->file[0] != '/' || m->ndata) {
            bad(errp, "a result in a file: an absolute path, no bytes "
                "inline");
            goto error;
        }
        return 0;
    }
    if (m->ndata != r->size || r->size > inline_max) {
        bad(errp, "a result inline: %zu bytes (of %llu), at most %llu",
            m->ndata, (unsigned long long)r->size,
            (unsigned long long)inline_max);
        goto error;
    }
    r->data = m->data;
    return 0;
error:
    pl_pyresult_clear(r);
    return -1;
}

/* ------------------------------------------------------------ encode */

/* 'v' (NULL-terminated) as a JSON array of its UTF-8 strings; the others
 * are counted in *dropped. */
static json_t *strv_json(char *const *v, unsigned *dropped)
{
    json_t *a = json_array();

    for (size_t i = 0; a && v && v[i]; i++) {
        if (!pl_utf8_str(v[i])) {
            (*dropped)++;
            continue;
        }
        if (json_array_append_new(a, json_string(v[i])) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

/* The header's "refs": each ref's id, status and where its bytes are
 * (inline: "size", counted into *inline_bytes; or "file"). */
static json_t *refs_json(const struct pl_pycall *c, size_t *inline_bytes)
{
    json_t *a = json_array();

    *inline_bytes = 0;
    for (uint32_t i = 0; a && i < c->nrefs; i++) {
        const struct pl_run_ref *f = &c->refs[i];
        const char *st = pl_pyr_name(f->status);
        json_t *e = json_pack("{s:I, s:s}", "id", (json_int_t)f->id,
                              "status", st ? st : "none");
        if (e && st && f->data) {
            json_object_set_new(e, "size", json_integer((json_int_t)
                                                        f->ndata));
            *inline_bytes += f->ndata;
        }
        else if (e && st && f->file)
            json_object_set_new(e, "file", json_string(f->file));
        if (!e || json_array_append_new(a, e) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

int pl_pycall_encode(const struct pl_pycall *c, unsigned char **buf,
                     size_t *len, unsigned *dropped, struct pl_error *errp)
{
    size_t nref = 0;
    unsigned drop = 0, drop_argv = 0;
    json_t *h = json_object();
    char *text = NULL;
    size_t hlen;

    *buf = NULL;
    if (!h
        || json_object_set_new(h, "kind", json_integer(PL_MSG_PY_CALL)) < 0
        || json_object_set_new(h, "id", json_integer((json_int_t)c->id)) < 0
        || json_object_set_new(h, "attempt",
                               json_integer((json_int_t)c->attempt)) < 0
        || json_object_set_new(h, "argv", strv_json(c->argv, &drop_argv)) < 0
        || json_object_set_new(h, "env", strv_json(c->env, &drop)) < 0
        || json_object_set_new(h, "pickled", json_boolean(c->pickled)) < 0
        || json_object_set_new(h, "stdout", json_string(c->out)) < 0
        || json_object_set_new(h, "stderr", json_string(c->err)) < 0
        || json_object_set_new(h, "result_file",
                               json_string(c->result_file)) < 0
        || json_object_set_new(h, "inline_max",
                               json_integer((json_int_t)c->inline_max)) < 0
        || json_object_set_new(h, "result_max",
                               json_integer((json_int_t)c->result_max)) < 0
        || (c->cwd && json_object_set_new(h, "cwd", json_string(c->cwd)) < 0)
        || (c->input_file
            && json_object_set_new(h, "input_file",
                                   json_string(c->input_file)) < 0)
        || (c->prelude
            && json_object_set_new(h, "prelude", json_string(c->prelude))
                   < 0)
        || (c->nrefs
            && (json_object_set_new(h, "refs", refs_json(c, &nref)) < 0
                || json_object_set_new(h, "input_size",
                                       json_integer((json_int_t)(
                                           c->input ? c->ninput : 0)))
                       < 0))
        || !(text = json_dumps(h, JSON_COMPACT))) {
        /* N.B. json_string() of bytes that are not UTF-8 is NULL too; the
         * paths and the prelude were checked (a spec is UTF-8) */
        json_decref(h);
        errno = ENOMEM;
        return pl_errprintf(errp, "a call's header: out of memory or not "
                            "UTF-8");
    }
    json_decref(h);
    hlen = strlen(text);
    size_t n = 8 + hlen + (c->input ? c->ninput : 0) + nref;
    if (n - 4 > UINT32_MAX || !(*buf = malloc(n))) {
        free(text);
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    put32(*buf, (uint32_t)(n - 4));
    put32(*buf + 4, (uint32_t)hlen);
    memcpy(*buf + 8, text, hlen);
    size_t off = 8 + hlen;
    if (c->input) {
        memcpy(*buf + off, c->input, c->ninput);
        off += c->ninput;
    }
    for (uint32_t i = 0; i < c->nrefs; i++)
        if (pl_pyr_name(c->refs[i].status) && c->refs[i].data) {
            memcpy(*buf + off, c->refs[i].data, c->refs[i].ndata);
            off += c->refs[i].ndata;
        }
    free(text);
    *len = n;
    if (dropped)
        *dropped = drop + drop_argv;
    return 0;
}
