/* client/spec_py.c - pilot submit's Python calls: --py-call, --input */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/spec.h"
#include "client/spec_py.h"
#include "proto/pilotdir.h"
#include "proto/strv.h"

int pl_cli_spec_py(struct pl_cli_spec *b, const char *name, const char *arg,
                   struct pl_error *errp)
{
    struct pl_spec *s = &b->spec;
    char **dst = NULL;

    if (!strcmp(name, "py-call")) {
        if (b->fn_name && s->fn != PL_FN_PYCALL)
            return pl_errset(errp, EINVAL, "--py-call runs in a warm worker "
                             "of its agent: no --fn or --py with it");
        if (!*arg || strlen(arg) > PL_SPEC_MAX_ARG || !pl_utf8_str(arg))
            return pl_errset(errp, EINVAL, "--py-call: want "
                             "MODULE:FUNCTION");
        dst = &b->fn_name;
    }
    else if (!strcmp(name, "py-prelude")) {
        if (strlen(arg) > PL_SPEC_MAX_PRELUDE || !pl_utf8_str(arg))
            return pl_errset(errp, EINVAL, "--py-prelude: at most %d bytes "
                             "of UTF-8", PL_SPEC_MAX_PRELUDE);
        dst = &s->py_prelude;
    }
    else {
        if (!*arg || strlen(arg) > PL_SPEC_MAX_PYTHON || !pl_utf8_str(arg))
            return pl_errset(errp, EINVAL, "--python: want the "
                             "interpreter's name or path");
        dst = &s->python;
    }
    char *c = strdup(arg);
    if (!c) {
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    free(*dst);
    *dst = c;
    s->fn = PL_FN_PYCALL;
    return 0;
}

/* Read all of 'fd' (at most 'max' bytes, one more tells it is larger)
 * into *buf and *len.  0, or -1 with errno. */
static int slurp(int fd, size_t max, unsigned char **buf, size_t *len)
{
    size_t cap = 64 * 1024, n = 0;
    unsigned char *b = malloc(cap);
    ssize_t r;

    if (!b)
        return -1;
    while (n <= max) {
        if (n == cap) {
            unsigned char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                return -1;
            }
            b = nb;
            cap *= 2;
        }
        if ((r = read(fd, b + n, cap - n)) < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            free(b);
            return -1;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    *buf = b;
    *len = n;
    return 0;
}

/* Write 'len' bytes at 'p' to a new file under DIR/inputs/ (made 0700),
 * 0600, never through a link, synced; its path into 'path'.  0, or -1
 * with errp. */
static int stage(const char *dir, const unsigned char *p, size_t len,
                 char *path, size_t plen, struct pl_error *errp)
{
    unsigned char rnd[8];
    int fd;

    snprintf(path, plen, "%s/inputs", dir);
    if (pl_mkdirs(path, 0700) < 0)
        return pl_errprintf(errp, "%s: %s", path, strerror(errno));
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        return pl_errprintf(errp, "getrandom: %s", strerror(errno));
    snprintf(path, plen, "%s/inputs/%02x%02x%02x%02x%02x%02x%02x%02x.pkl",
             dir, rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6],
             rnd[7]);
    if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                   0600)) < 0)
        return pl_errprintf(errp, "%s: %s", path, strerror(errno));
    for (size_t off = 0; off < len;) {
        ssize_t w = write(fd, p + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            pl_errprintf(errp, "%s: %s", path, strerror(errno));
            close(fd);
            unlink(path);
            return -1;
        }
        off += (size_t)w;
    }
    if (fsync(fd) < 0 || close(fd) < 0) {
        pl_errprintf(errp, "%s: %s", path, strerror(errno));
        unlink(path);
        return -1;
    }
    return 0;
}

int pl_cli_spec_py_input(struct pl_cli_spec *b, const char *file,
                         const char *dir, struct pl_error *errp)
{
    struct pl_spec *s = &b->spec;
    char path[PL_PATH_MAX + 64];
    unsigned char *buf = NULL;
    size_t len;
    int fd, rc = -1;

    if ((fd = strcmp(file, "-") ? open(file, O_RDONLY | O_CLOEXEC) : 0) < 0)
        return pl_errprintf(errp, "--input: cannot open %s: %s", file,
                            strerror(errno));
    if (slurp(fd, PL_SPEC_MAX_INPUT_FILE, &buf, &len) < 0) {
        pl_errprintf(errp, "--input: cannot read %s: %s", file,
                     strerror(errno));
        goto done;
    }
    if (len > PL_SPEC_MAX_INPUT_FILE) {
        pl_errset(errp, E2BIG, "--input %s: more than %llu bytes (256 MiB): "
                  "a pickled call may be no larger; pass a path to the data "
                  "instead", file,
                  (unsigned long long)PL_SPEC_MAX_INPUT_FILE);
        goto done;
    }
    if (len == 0) {
        pl_errset(errp, EINVAL, "--input %s: empty", file);
        goto done;
    }
    s->fn = PL_FN_PYCALL;
    if (len <= PL_SPEC_MAX_INPUT) {
        s->input = buf; /* inline, in the spec */
        s->ninput = len;
        buf = NULL;
    }
    else if (stage(dir, buf, len, path, sizeof(path), errp) < 0
             || !(s->input_file = strdup(path)))
        goto done;
    rc = 0;
done:
    free(buf);
    if (fd > 0)
        close(fd);
    return rc;
}
