/* tests/fuzz/fuzz_msg.c - libFuzzer target: a whole frame, as a peer sends it
 *
 * The input is one ZeroMQ frame's bytes.  pl_msg_peek() and
 * pl_msg_decode() (the envelope: version, type, seq, a map of string
 * keys, precheck of every count) run on it as pilotd and the agent run
 * them, then every body reader (tests/fuzz/body.c).  See
 * docs/protocol.md, "Hostile input", for how to run it.
 */
#include <stddef.h>
#include <stdint.h>

#include "proto/msg.h"
#include "tests/fuzz/body.h"
#include "tests/fuzz/check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pl_msg m;
    struct pl_error e;
    uint64_t version, seq;

    (void)pl_msg_peek(data, size, &version, &seq);
    if (pl_msg_decode(data, size, &m, &e) < 0)
        return 0;
    fuzz_body(m.body);
    pl_msg_release(&m);
    return 0;
}
