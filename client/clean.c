/* client/clean.c - control characters made visible in what people read */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/clean.h"

static const char hex[] = "0123456789abcdef";

static size_t put_x(char *dst, unsigned char c)
{
    dst[0] = '\\';
    dst[1] = 'x';
    dst[2] = hex[c >> 4];
    dst[3] = hex[c & 15];
    return 4;
}

size_t pl_clean_bytes(struct pl_clean *st, const char *s, size_t n,
                      char *dst)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t w = 0;

    for (size_t i = 0; i < n; i++) {
        unsigned char c = p[i];
        if (st->held_c2) {
            st->held_c2 = false;
            if (c >= 0x80 && c <= 0x9f) {
                /* U+0080..U+009F: a C1 control */
                memcpy(dst + w, "\\u00", 4);
                dst[w + 4] = hex[c >> 4];
                dst[w + 5] = hex[c & 15];
                w += 6;
                continue;
            }
            dst[w++] = (char)0xc2;
        }
        if (c == 0xc2)
            st->held_c2 = true;
        else if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f)
            w += put_x(dst + w, c);
        else
            dst[w++] = (char)c;
    }
    return w;
}

size_t pl_clean_end(struct pl_clean *st, char *dst)
{
    if (!st->held_c2)
        return 0;
    st->held_c2 = false;
    dst[0] = (char)0xc2; /* a truncated character: as it was */
    return 1;
}

char *pl_clean_str(const char *s)
{
    struct pl_clean st = { false };
    size_t n = strlen(s);
    char *out;

    if (n > (SIZE_MAX - 9) / 6) {
        errno = ENOMEM;
        return NULL;
    }
    if (!(out = malloc(PL_CLEAN_ROOM(n) + 1)))
        return NULL;
    size_t w = pl_clean_bytes(&st, s, n, out);
    w += pl_clean_end(&st, out + w);
    out[w] = '\0';
    return out;
}

/* ---- the stdout filter ---- */

static int write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        buf += w;
        n -= (size_t)w;
    }
    return 0;
}

/* The cookie is the stream's struct pl_clean, freed by cookie_close(). */
static ssize_t cookie_write(void *c, const char *buf, size_t n)
{
    char esc[PL_CLEAN_ROOM(1024)];
    size_t done = 0;

    while (done < n) {
        size_t k = n - done < 1024 ? n - done : 1024;
        size_t w = pl_clean_bytes(c, buf + done, k, esc);
        if (write_all(STDOUT_FILENO, esc, w) < 0)
            return done > 0 ? (ssize_t)done : -1;
        done += k;
    }
    return (ssize_t)n;
}

static int cookie_close(void *c)
{
    char tail[8];
    size_t w = pl_clean_end(c, tail);
    int rc = w && write_all(STDOUT_FILENO, tail, w) < 0 ? -1 : 0;

    free(c);
    return rc;
}

FILE *pl_clean_stdout(void)
{
    cookie_io_functions_t io = { .write = cookie_write,
                                 .close = cookie_close };
    struct pl_clean *st;
    FILE *f, *orig = stdout;

    if (!(st = calloc(1, sizeof(*st))))
        return NULL;
    if (!(f = fopencookie(st, "w", io))) {
        free(st);
        return NULL;
    }
    /* N.B. after fopencookie(), 'st' is the stream's: fclose() frees it */
    if (setvbuf(f, NULL, isatty(STDOUT_FILENO) ? _IOLBF : _IOFBF, BUFSIZ)
        != 0) {
        int saved = errno;
        fclose(f);
        errno = saved;
        return NULL;
    }
    fflush(orig);
    stdout = f;
    return orig;
}

int pl_clean_stdout_close(FILE *orig)
{
    FILE *f = stdout;

    if (!orig || f == orig)
        return fflush(stdout);
    stdout = orig;
    return fclose(f);
}
