/* tests/unit/test_proto_mpjson.c - JSON <-> msgpack conversion */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <msgpack.h>

#include "proto/mpjson.h"
#include "tests/unit/tap.h"

/* Pack 'j', unpack it, convert back; NULL (errno) if conversion fails.
 * 'type' gets the msgpack type of the packed top-level object. */
static json_t *roundtrip(const json_t *j, int *type)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_unpacked up;
    size_t off = 0;
    json_t *out = NULL;

    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    pl_mpjson_pack(&pk, j);
    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, sb.data, sb.size, &off)
            == MSGPACK_UNPACK_SUCCESS
        && off == sb.size) {
        if (type)
            *type = up.data.type;
        out = pl_mpjson_to_json(&up.data);
    }
    else
        errno = EINVAL;
    msgpack_unpacked_destroy(&up);
    msgpack_sbuffer_destroy(&sb);
    return out;
}

/* Round trip of the JSON text 's': equal, and of the same JSON type. */
static void same(const char *s, const char *what)
{
    json_error_t jerr;
    json_t *j = json_loads(s, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
    json_t *back;

    if (!j) {
        ok(0, "%s: bad test JSON: %s", what, jerr.text);
        return;
    }
    back = roundtrip(j, NULL);
    if (!ok(back && json_equal(j, back), "round trip: %s", what)) {
        char *a = json_dumps(j, JSON_ENCODE_ANY | JSON_SORT_KEYS);
        char *b = back ? json_dumps(back, JSON_ENCODE_ANY | JSON_SORT_KEYS)
                       : NULL;
        diag("sent %s", a ? a : "?");
        diag("got  %s", b ? b : "(null)");
        free(a);
        free(b);
    }
    json_decref(j);
    json_decref(back);
}

/* Convert hand-packed msgpack; the msgpack object is freed here. */
static json_t *from_packed(msgpack_sbuffer *sb)
{
    msgpack_unpacked up;
    size_t off = 0;
    json_t *out = NULL;

    msgpack_unpacked_init(&up);
    if (msgpack_unpack_next(&up, sb->data, sb->size, &off)
        == MSGPACK_UNPACK_SUCCESS)
        out = pl_mpjson_to_json(&up.data);
    else
        errno = EINVAL;
    msgpack_unpacked_destroy(&up);
    msgpack_sbuffer_destroy(sb);
    return out;
}

static void test_roundtrips(void)
{
    same("{}", "empty object");
    same("[]", "empty array");
    same("null", "null");
    same("true", "true");
    same("false", "false");
    same("0", "zero");
    same("-1", "minus one");
    same("9223372036854775807", "INT64_MAX");
    same("-9223372036854775808", "INT64_MIN");
    same("4294967296", "2^32");
    same("-0.125", "a negative real");
    same("1e300", "a large real");
    /* N.B. msgpack-c gives a zero-length str a NULL ptr when no other
     * variable-length item came before it in the buffer */
    same("\"\"", "empty string (ptr NULL in the msgpack object)");
    same("[\"\"]", "array of one empty string (ptr NULL)");
    same("[\"x\", \"\"]", "empty string after another string");
    same("\"h\\u00e9llo \\u2713 \\ud83d\\ude00\"", "UTF-8 string");
    same("\"a\\u0000b\"", "string with a NUL byte");
    same("[1, 2.5, true, false, null, \"s\", [], {}]", "mixed array");
    same("{\"a\": {\"b\": {\"c\": {\"d\": "
         "[[[{\"e\": [1, {\"f\": null}]}]]]}}}}",
         "deeply nested");
    same("{\"argv\": [\"sh\", \"-c\", \"echo hi\"], \"ranks\": 1, "
         "\"cores_per_rank\": 4, \"timeout\": 60.5, \"env\": null, "
         "\"exclusive\": false, \"ids\": [1, 2, 3], \"\": \"empty key\"}",
         "a submit body");

    /* integers stay integers and reals stay reals, even 1.0 */
    int type = -1;
    json_t *j = json_real(1.0), *back = roundtrip(j, &type);
    ok(type == MSGPACK_OBJECT_FLOAT64 && json_is_real(back)
           && json_real_value(back) == 1.0,
       "real 1.0 packs as float64 and comes back real");
    json_decref(j);
    json_decref(back);
    j = json_integer(-3);
    back = roundtrip(j, &type);
    ok(type == MSGPACK_OBJECT_NEGATIVE_INTEGER && json_is_integer(back)
           && json_integer_value(back) == -3,
       "integer -3 packs as an integer and comes back an integer");
    json_decref(j);
    json_decref(back);

    /* a long array and a wide object */
    j = json_array();
    json_t *o = json_object();
    for (int i = 0; i < 5000; i++) {
        char key[32];
        json_array_append_new(j, json_integer(i * 7 - 1000));
        snprintf(key, sizeof(key), "k%d", i);
        json_object_set_new(o, key, json_real(i / 4.0));
    }
    json_object_set(o, "arr", j);
    back = roundtrip(o, NULL);
    ok(back && json_equal(o, back), "5000-element array in a 5001-key object");
    json_decref(back);
    json_decref(j);
    json_decref(o);

    /* a msgpack map key with a NUL byte is refused, not cut short:
     * jansson 2.14 cannot give a key's length back when packing */
    {
        msgpack_sbuffer sb;
        msgpack_packer pk;
        msgpack_unpacked up;
        size_t off = 0;
        msgpack_sbuffer_init(&sb);
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        msgpack_pack_map(&pk, 1);
        msgpack_pack_str(&pk, 3);
        msgpack_pack_str_body(&pk, "k\0a", 3);
        msgpack_pack_int(&pk, 1);
        msgpack_unpacked_init(&up);
        msgpack_unpack_next(&up, sb.data, sb.size, &off);
        errno = 0;
        back = pl_mpjson_to_json(&up.data);
        ok(!back && errno == EPROTO, "a map key with a NUL byte is refused");
        json_decref(back);
        msgpack_unpacked_destroy(&up);
        msgpack_sbuffer_destroy(&sb);
    }
}

static void test_refused(void)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    json_t *j;

    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_bin(&pk, 3);
    msgpack_pack_bin_body(&pk, "abc", 3);
    errno = 0;
    j = from_packed(&sb);
    ok(j == NULL && errno == EPROTO, "bin refused (EPROTO)");
    json_decref(j);

    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 2);
    msgpack_pack_str(&pk, 1);
    msgpack_pack_str_body(&pk, "a", 1);
    msgpack_pack_array(&pk, 3);
    msgpack_pack_int(&pk, 1);
    msgpack_pack_str(&pk, 1);
    msgpack_pack_str_body(&pk, "x", 1);
    msgpack_pack_nil(&pk);
    msgpack_pack_str(&pk, 1);
    msgpack_pack_str_body(&pk, "b", 1);
    msgpack_pack_array(&pk, 2);
    msgpack_pack_int(&pk, 2);
    msgpack_pack_bin(&pk, 1);
    msgpack_pack_bin_body(&pk, "z", 1);
    errno = 0;
    j = from_packed(&sb);
    ok(j == NULL && errno == EPROTO,
       "bin nested in a map's array refused (EPROTO, nothing leaked)");
    json_decref(j);

    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_ext(&pk, 2, 1);
    msgpack_pack_ext_body(&pk, "ab", 2);
    errno = 0;
    j = from_packed(&sb);
    ok(j == NULL && errno == EPROTO, "ext refused (EPROTO)");
    json_decref(j);

    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 1);
    msgpack_pack_int(&pk, 1);
    msgpack_pack_int(&pk, 2);
    errno = 0;
    j = from_packed(&sb);
    ok(j == NULL && errno == EPROTO, "integer map key refused (EPROTO)");
    json_decref(j);

    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_uint64(&pk, (uint64_t)INT64_MAX + 1);
    errno = 0;
    j = from_packed(&sb);
    ok(j == NULL && errno == EPROTO, "integer over INT64_MAX refused (EPROTO)");
    json_decref(j);

    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_float(&pk, 0.5f);
    j = from_packed(&sb);
    ok(json_is_real(j) && json_real_value(j) == 0.5, "float32 accepted: 0.5");
    json_decref(j);
}

int main(void)
{
    plan(30);
    test_roundtrips();
    test_refused();
    return done_testing();
}
