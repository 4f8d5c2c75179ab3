/* proto/strv.h - string vectors, UTF-8, growable arrays, clocks */
#ifndef PL_PROTO_STRV_H
#define PL_PROTO_STRV_H

#include <stdbool.h>
#include <stddef.h>

/* NULL-terminated string vectors, each string owned by the vector.
 * pl_strv_free() accepts NULL and preserves errno; pl_strv_dup() returns
 * NULL (ENOMEM) or a deep copy (NULL in, an empty vector out). */
void pl_strv_free(char **v);
char **pl_strv_dup(char *const *v);
size_t pl_strv_len(char *const *v);

/* Whether 'len' bytes at 's' are valid UTF-8 (no overlong forms, no
 * surrogates, nothing past U+10FFFF): what a JSON string may hold. */
bool pl_utf8_valid(const char *s, size_t len);
/* The same for a NUL-terminated string; NULL is valid. */
bool pl_utf8_str(const char *s);
/* Replace every byte of 's' that is not part of valid UTF-8 by '?', in
 * place: for a text a peer sent that must become JSON (an error). */
void pl_utf8_repair(char *s);

/* Base64 (RFC 4648, with padding): a Python call's result travels as
 * JSON so.  Encode: a new string, or NULL (ENOMEM).  Decode: the bytes
 * of 's' into *out (malloc()) and *len; -1 with errno EINVAL (not
 * base64) or ENOMEM. */
char *pl_b64_encode(const void *p, size_t len);
int pl_b64_decode(const char *s, unsigned char **out, size_t *len);

/* Make room in the array *v ('*cap' elements of 'size' bytes, 'n' in
 * use) for at least 'more' more: doubling from 16, so that appends cost
 * amortised O(1).  0, or -1 (ENOMEM, or an overflow: EOVERFLOW) with
 * *v and *cap unchanged. */
int pl_grow(void *v, size_t *cap, size_t n, size_t more, size_t size);

/* Write 'v' in decimal at 'buf' (room for PL_UTOA_MAX bytes), without a
 * NUL; the number of digits.  N.B. for paths and lists pilotd makes for
 * every task, where snprintf() cost 1-2k instructions a call. */
#define PL_UTOA_MAX 20
size_t pl_utoa(char *buf, unsigned long long v);
/* Append the 'sl' bytes of 's' (pl_put_s) or 'v' in decimal (pl_put_u)
 * at buf[*n], with a NUL after, if that fits in 'len' bytes: *n moves
 * past it; false (buf and *n unchanged) if not. */
bool pl_put_s(char *buf, size_t len, size_t *n, const char *s, size_t sl);
bool pl_put_u(char *buf, size_t len, size_t *n, unsigned long long v);

/* Seconds since the epoch (CLOCK_REALTIME), for times that are stored
 * or shown: events, last_seen.  N.B. it may jump; measure intervals
 * with pl_mono(). */
double pl_now(void);
/* Seconds of CLOCK_MONOTONIC: for timeouts and intervals. */
double pl_mono(void);

#endif /* !PL_PROTO_STRV_H */
