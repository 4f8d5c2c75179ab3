/* tests/fuzz/fuzz_pywmsg.c - libFuzzer target: what a warm Python worker
 * sends its agent
 *
 * The input is the byte stream an agent reads from a worker's socket
 * (agent/pyw.c): frames, each a 4-byte length (at most PL_PYW_FRAME_MAX,
 * as the agent takes them) then pl_pyw_decode(), and each message
 * through the hello, entered and result decoders.  A function may write
 * anything to the socket: nothing it sends may crash the agent, and
 * what a decoder accepts is checked against what it promises.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/msg.h"
#include "proto/pywmsg.h"
#include "tests/fuzz/check.h"

#define INLINE (64 * 1024)
#define MAX (256ULL << 20)

static void result(const struct pl_pyw_msg *m)
{
    struct pl_pyresult r;
    struct pl_error e;

    if (pl_pyresult_decode(m, INLINE, MAX, &r, &e) < 0) {
        CHECK(e.text[0] && !r.file && !r.reason && !r.repr);
        return;
    }
    CHECK(r.status >= PL_PYW_OK && r.status <= PL_PYW_ERROR);
    if (r.status == PL_PYW_ERROR)
        CHECK(r.reason && !r.file && !r.data);
    else if (r.file)
        CHECK(r.file[0] == '/' && !r.data && r.size <= MAX);
    else
        CHECK(r.data == m->data && m->ndata == r.size && r.size <= INLINE);
    CHECK(!r.reason || strlen(r.reason) <= PL_PYW_REASON_MAX);
    CHECK(!r.repr || strlen(r.repr) <= 1024);
    pl_pyresult_clear(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0;

    while (size - off >= 4) {
        size_t len = pl_pyw_frame_len(data + off);
        struct pl_pyw_msg m;
        struct pl_pyhello h;
        struct pl_error e;
        if (len > PL_PYW_FRAME_MAX || len > size - off - 4)
            break; /* the agent kills such a worker, or waits for more */
        /* a copy of exactly the frame: a read past it is caught */
        unsigned char *f = malloc(len ? len : 1);
        memcpy(f, data + off + 4, len);
        if (pl_pyw_decode(f, len, &m, &e) == 0) {
            CHECK(m.h && m.data >= f && m.data + m.ndata == f + len);
            CHECK(m.kind == PL_MSG_PY_HELLO || m.kind == PL_MSG_PY_CALL
                  || m.kind == PL_MSG_PY_RESULT
                  || m.kind == PL_MSG_PY_ENTERED);
            uint64_t id, attempt;
            if (pl_pyentered_decode(&m, &id, &attempt, &e) == 0)
                CHECK(m.kind == PL_MSG_PY_ENTERED && attempt <= UINT32_MAX);
            if (pl_pyhello_decode(&m, &h, &e) == 0) {
                CHECK(m.kind == PL_MSG_PY_HELLO && h.pid > 0);
                for (const char *c = h.version; *c; c++)
                    CHECK(*c >= ' ' && *c <= '~');
            }
            result(&m);
            pl_pyw_msg_clear(&m);
        }
        else
            CHECK(e.text[0] && !m.h);
        free(f);
        off += 4 + len;
    }
    return 0;
}
