/* tests/fuzz/check.h - what every fuzz target shares */
#ifndef PL_TESTS_FUZZ_CHECK_H
#define PL_TESTS_FUZZ_CHECK_H

#include <stddef.h>
#include <stdint.h>

/* libFuzzer's entry: one input, 0 (never keep it out of the corpus). */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken promise: abort, so that libFuzzer records the input. */
#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond))                                                           \
            __builtin_trap();                                                  \
    } while (0)

#endif /* !PL_TESTS_FUZZ_CHECK_H */
