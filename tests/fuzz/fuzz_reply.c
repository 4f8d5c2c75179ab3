/* tests/fuzz/fuzz_reply.c - libFuzzer target: pilotd's replies, as the
 * CLI reads them
 *
 * The input is one reply frame from pilotd.  It goes the way pl_rpc_call()
 * takes it (pl_msg_decode(), pl_reply_decode()), its data becomes JSON
 * (pl_mpjson_to_json(), as client/conn.c does), and then every object in
 * it is read with the CLI's accessors and formatters of client/output.c,
 * on every key, as the commands read task lists, shows, counts and status
 * (pl_out_jint(), _jreal(), _jcount(), _time(), _duration(), _kib(),
 * _intlist(), _argv(), _nodelist(), _bar()).  A number that is NaN,
 * infinite or too large for an integer must never be converted to one
 * (UBSan aborts on that).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "client/output.h"
#include "proto/mpjson.h"
#include "proto/msg.h"
#include "tests/fuzz/check.h"

/* Every accessor on key 'key' of object 'o'. */
static void fields(const json_t *o, const char *key)
{
    char buf[128];
    const json_t *v = json_object_get(o, key);
    double r = pl_out_jreal(o, key, NAN);
    long long i = pl_out_jint(o, key, -7);

    CHECK(!json_is_integer(v) || i == json_integer_value(v));
    (void)pl_out_jcount(o, key);
    pl_out_duration(r, buf, sizeof(buf));
    CHECK(strlen(buf) < sizeof(buf) - 1);
    pl_out_time(r, false, buf, sizeof(buf));
    pl_out_time(r, true, buf, sizeof(buf));
    pl_out_kib(i, buf, sizeof(buf));
    pl_out_bar(r, 20, buf, sizeof(buf));
    CHECK(strlen(buf) == 22);
    pl_out_intlist(v, buf, sizeof(buf));
    free(pl_out_argv(v));
    const char *s = pl_out_jstr(o, key);
    if (s)
        CHECK(pl_out_nodelist(s, 16, buf, sizeof(buf)) == buf);
}

/* Every object under 'j', at most 'left' values in all. */
static void walk(const json_t *j, int depth, size_t *left)
{
    const char *key;
    const json_t *v;
    size_t i;

    if (depth > 32 || *left == 0)
        return;
    (*left)--;
    if (json_is_object(j))
        json_object_foreach((json_t *)j, key, v) {
            fields(j, key);
            walk(v, depth + 1, left);
        }
    else if (json_is_array(j))
        json_array_foreach(j, i, v)
            walk(v, depth + 1, left);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pl_msg m;
    struct pl_error e;
    int64_t errnum;
    char *text = NULL;
    const msgpack_object *d;

    if (pl_msg_decode(data, size, &m, &e) < 0)
        return 0;
    if (pl_reply_decode(m.body, &errnum, &text, &d, &e) == 0) {
        free(text);
        if (d) {
            json_t *j = pl_mpjson_to_json(d);
            if (j) {
                size_t left = 4096;
                walk(j, 0, &left);
                json_decref(j);
            }
            else
                CHECK(errno == EPROTO || errno == ENOMEM);
        }
    }
    pl_msg_release(&m);
    return 0;
}
