/* proto/strv.c - string vectors, UTF-8, growable arrays, clocks */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proto/strv.h"

void pl_strv_free(char **v)
{
    if (v) {
        int saved = errno;
        for (char **p = v; *p; p++)
            free(*p);
        free(v);
        errno = saved;
    }
}

size_t pl_strv_len(char *const *v)
{
    size_t n = 0;

    while (v && v[n])
        n++;
    return n;
}

char **pl_strv_dup(char *const *v)
{
    size_t n = pl_strv_len(v);
    char **out = calloc(n + 1, sizeof(*out));

    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        if (!(out[i] = strdup(v[i]))) {
            pl_strv_free(out);
            return NULL;
        }
    }
    return out;
}

bool pl_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;

    while (i < len) {
        unsigned c = p[i];
        size_t n;
        uint32_t cp, min;

        if (c < 0x80) {
            i++;
            continue;
        }
        if (c >= 0xc2 && c <= 0xdf)
            n = 1, cp = c & 0x1f, min = 0x80;
        else if (c >= 0xe0 && c <= 0xef)
            n = 2, cp = c & 0x0f, min = 0x800;
        else if (c >= 0xf0 && c <= 0xf4)
            n = 3, cp = c & 0x07, min = 0x10000;
        else
            return false; /* a continuation byte, 0xc0, 0xc1, >= 0xf5 */
        if (n >= len - i)
            return false;
        for (size_t k = 1; k <= n; k++) {
            if ((p[i + k] & 0xc0) != 0x80)
                return false;
            cp = (cp << 6) | (p[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += n + 1;
    }
    return true;
}

/* The length of the valid UTF-8 sequence at 'p' ('len' bytes left), or
 * 0 if there is none. */
static size_t utf8_seq(const char *p, size_t len)
{
    for (size_t n = 1; n <= 4 && n <= len; n++)
        if (pl_utf8_valid(p, n))
            return n;
    return 0;
}

void pl_utf8_repair(char *s)
{
    size_t len = s ? strlen(s) : 0;

    for (size_t i = 0; i < len;) {
        size_t n = utf8_seq(s + i, len - i);
        if (n == 0) {
            s[i++] = '?';
            continue;
        }
        i += n;
    }
}

bool pl_utf8_str(const char *s)
{
    return !s || pl_utf8_valid(s, strlen(s));
}

int pl_grow(void *v, size_t *cap, size_t n, size_t more, size_t size)
{
    void **vp = v;
    size_t ncap = *cap ? *cap : 16;
    void *nv;

    if (n + more <= *cap)
        return 0;
    if (more > SIZE_MAX / size - n) {
        errno = EOVERFLOW;
        return -1;
    }
    while (ncap < n + more) {
        if (ncap > SIZE_MAX / 2 / size) {
            ncap = n + more;
            break;
        }
        ncap *= 2;
    }
    if (!(nv = realloc(*vp, ncap * size))) {
        errno = ENOMEM;
        return -1;
    }
    *vp = nv;
    *cap = ncap;
    return 0;
}

static double clock_s(clockid_t id)
{
    struct timespec ts;

    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

double pl_now(void)
{
    return clock_s(CLOCK_REALTIME);
}

double pl_mono(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

static const char b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *pl_b64_encode(const void *p, size_t len)
{
    const unsigned char *in = p;
    char *out = malloc(4 * ((len + 2) / 3) + 1), *o = out;

    if (!out)
        return NULL;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)in[i + 1] << 8;
        if (i + 2 < len)
            v |= in[i + 2];
        *o++ = b64[v >> 18 & 63];
        *o++ = b64[v >> 12 & 63];
        *o++ = i + 1 < len ? b64[v >> 6 & 63] : '=';
        *o++ = i + 2 < len ? b64[v & 63] : '=';
    }
    *o = '\0';
    return out;
}

int pl_b64_decode(const char *s, unsigned char **out, size_t *len)
{
    size_t n = strlen(s), k = 0;
    unsigned char *buf;

    if (n % 4) {
        errno = EINVAL;
        return -1;
    }
    if (!(buf = malloc(n / 4 * 3 + 1)))
        return -1;
    for (size_t i = 0; i < n; i += 4) {
        uint32_t v = 0;
        int pad = 0;
        for (int j = 0; j < 4; j++) {
            const char *c = s[i + j] ? strchr(b64, s[i + j]) : NULL;
            if (s[i + j] == '=' && i + 4 == n && j >= 2
                && (j == 3 || s[i + 3] == '=')) {
                pad++;
                v <<= 6;
                continue;
            }
            if (!c || pad) {
                free(buf);
                errno = EINVAL;
                return -1;
            }
            v = v << 6 | (uint32_t)(c - b64);
        }
        buf[k++] = (unsigned char)(v >> 16);
        if (pad < 2)
            buf[k++] = (unsigned char)(v >> 8);
        if (pad < 1)
            buf[k++] = (unsigned char)v;
    }
    *out = buf;
    *len = k;
    return 0;
}

size_t pl_utoa(char *buf, unsigned long long v)
{
    char d[PL_UTOA_MAX];
    size_t k = 0, n;

    do
        d[k++] = (char)('0' + v % 10);
    while ((v /= 10));
    for (n = 0; n < k; n++)
        buf[n] = d[k - 1 - n];
    return k;
}

bool pl_put_s(char *buf, size_t len, size_t *n, const char *s, size_t sl)
{
    if (*n >= len || len - *n <= sl)
        return false;
    memcpy(buf + *n, s, sl);
    *n += sl;
    buf[*n] = '\0';
    return true;
}

bool pl_put_u(char *buf, size_t len, size_t *n, unsigned long long v)
{
    char d[PL_UTOA_MAX];

    return pl_put_s(buf, len, n, d, pl_utoa(d, v));
}
