/* tests/fuzz/body.h - run every body decoder of the protocol on one body */
#ifndef PL_TESTS_FUZZ_BODY_H
#define PL_TESTS_FUZZ_BODY_H

#include <msgpack.h>

/* Read 'body' (a map, from pl_msg_decode()) with every decoder of
 * proto/: pilotd's of client requests and agent messages, the agent's of
 * pilotd's, the reply reader of the CLI and the agent.  Whatever the envelope's type says, every reader runs:
 * a mutation rarely keeps the type and the body matching.  Anything a
 * reader accepts is also checked against its documented promises, and
 * a broken promise aborts (a finding). */
void fuzz_body(const msgpack_object *body);

#endif /* !PL_TESTS_FUZZ_BODY_H */
