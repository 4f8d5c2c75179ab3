/* tests/fuzz/fuzz_task.c - libFuzzer target: one task, as a run entry and
 * as a submit spec
 *
 * The input is one msgpack object: the target wraps it as the only task
 * of a body {"tasks": [INPUT], "events": [INPUT]} in a valid envelope, so
 * that the fuzzer spends its mutations on the entry, not on the envelope
 * around it, and the result goes through pl_msg_decode() like any frame
 * (its precheck guards msgpack-c's allocations).  Then every body
 * reader of proto/ runs (tests/fuzz/body.c): pl_run_decode(),
 * pl_spec_decode(), pl_event_decode() among them.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/msg.h"
#include "tests/fuzz/body.h"
#include "tests/fuzz/check.h"

/* [2, 202, 0, {"tasks": [ ... */
static const unsigned char head[] = {
    0x94, PL_PROTO_VERSION, 0xcc, 202, 0x00, 0x82,
    0xa5, 't', 'a', 's', 'k', 's', 0x91,
};
/* ... ], "events": [ ... */
static const unsigned char mid[] = {
    0xa6, 'e', 'v', 'e', 'n', 't', 's', 0x91,
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pl_msg m;
    struct pl_error e;
    size_t len = sizeof(head) + size + sizeof(mid) + size;
    unsigned char *buf;

    if (size == 0 || size > PL_MSG_MAX / 4 || !(buf = malloc(len)))
        return 0;
    memcpy(buf, head, sizeof(head));
    memcpy(buf + sizeof(head), data, size);
    memcpy(buf + sizeof(head) + size, mid, sizeof(mid));
    memcpy(buf + sizeof(head) + size + sizeof(mid), data, size);
    if (pl_msg_decode(buf, len, &m, &e) == 0) {
        fuzz_body(m.body);
        pl_msg_release(&m);
    }
    free(buf);
    return 0;
}
