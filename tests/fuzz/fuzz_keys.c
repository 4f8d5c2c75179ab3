/* tests/fuzz/fuzz_keys.c - libFuzzer target: the text of a key file
 *
 * The input is the bytes of a key file as pl_keys_read_text() reads them
 * (at most PL_KEYFILE_MAX - 1, NUL-terminated): the keypair reader
 * pl_keys_parse_pair() (server.key, client.key, agent.key), the public
 * key reader pl_keys_parse_pub() (server.pub) and the allow-list's
 * pl_allow_parse() (allow/NAME.pub, under a name that has a role of its
 * own and one that has not) each run on a copy.  What one accepts is
 * checked against its promises, and a broken promise aborts.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "proto/allow.h"
#include "proto/keys.h"
#include "tests/fuzz/check.h"

/* A Z85 key that pl_keys_decode() takes, and the same once encoded. */
static void key_ok(const char *z85)
{
    unsigned char bin[PL_KEY_BIN];
    char again[PL_KEY_Z85];

    CHECK(strlen(z85) == PL_KEY_Z85 - 1 && pl_keys_decode(z85, bin) == 0);
    CHECK(zmq_z85_encode(again, bin, PL_KEY_BIN) && !strcmp(again, z85));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char text[PL_KEYFILE_MAX];
    static const char *const names[] = { "agent", "bob" };
    struct pl_keypair kp;
    char pub[PL_KEY_Z85];
    struct pl_allow_key k;
    struct pl_error e;

    if (size >= PL_KEYFILE_MAX)
        return 0; /* pl_keys_read_text() refuses it */
    memcpy(text, data, size);
    text[size] = '\0';
    if (pl_keys_parse_pair("f.key", text, &kp, &e) == 0) {
        char derived[PL_KEY_Z85];
        key_ok(kp.pub);
        key_ok(kp.sec);
        CHECK(zmq_curve_public(derived, kp.sec) == 0
              && !strcmp(derived, kp.pub));
    }
    else
        CHECK(e.text[0] != '\0');
    memcpy(text, data, size);
    text[size] = '\0';
    if (pl_keys_parse_pub("f.pub", text, pub, &e) == 0)
        key_ok(pub);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        memcpy(text, data, size);
        text[size] = '\0';
        if (pl_allow_parse("f.pub", names[i], text, &k, &e) < 0) {
            CHECK(e.text[0] != '\0');
            continue;
        }
        unsigned char bin[PL_KEY_BIN];
        key_ok(k.pub);
        CHECK(pl_keys_decode(k.pub, bin) == 0
              && !memcmp(bin, k.key, PL_KEY_BIN));
        CHECK(strcmp(pl_role_name(k.role), "?") != 0 && k.added >= 0);
        CHECK(!strcmp(k.name, names[i]));
    }
    return 0;
}
