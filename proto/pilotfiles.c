/* proto/pilotfiles.c - the pilot directory's endpoint and info files
 *
 * "KEY VALUE" lines, written whole (a temporary file, fsync, rename) and
 * read with every line, value and number checked: a file of pilot's is
 * small, and one that is not refuses to be read (EPROTO). */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/pilotdir.h"

static int write_atomic(const char *dir, const char *name, const char *text,
                        struct pl_error *errp)
{
    char path[PL_PATH_MAX + 64], tmp[PL_PATH_MAX + 80];
    FILE *fp;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    mode_t old = umask(077);
    fp = fopen(tmp, "w");
    umask(old);
    if (!fp)
        return pl_errprintf(errp, "cannot write %s: %s", tmp, strerror(errno));
    if (fputs(text, fp) == EOF || fflush(fp) == EOF || fsync(fileno(fp)) < 0) {
        int saved = errno;
        fclose(fp);
        unlink(tmp);
        errno = saved;
        return pl_errprintf(errp, "cannot write %s: %s", tmp, strerror(errno));
    }
    if (fclose(fp) == EOF || rename(tmp, path) < 0) {
        int saved = errno;
        unlink(tmp);
        errno = saved;
        return pl_errprintf(errp, "cannot write %s: %s", path, strerror(errno));
    }
    return 0;
}

/* The text of DIR/NAME (at most PL_KV_FILE_MAX - 1 bytes) into 'buf',
 * 'path' its path; its length into 'len'. */
static int read_text(const char *dir, const char *name, char *path,
                     size_t plen, char *buf, size_t *len,
                     struct pl_error *errp)
{
    FILE *fp;
    size_t n;
    int saved;

    snprintf(path, plen, "%s/%s", dir, name);
    if (!(fp = fopen(path, "r")))
        return pl_errprintf(errp, "cannot read %s: %s", path, strerror(errno));
    n = fread(buf, 1, PL_KV_FILE_MAX, fp);
    if (ferror(fp)) {
        saved = errno;
        fclose(fp);
        errno = saved;
        return pl_errprintf(errp, "cannot read %s: %s", path, strerror(errno));
    }
    fclose(fp);
    if (n == PL_KV_FILE_MAX)
        return pl_errset(errp, EPROTO, "%s is larger than %d bytes: not a "
                         "file of pilot's", path, PL_KV_FILE_MAX - 1);
    *len = n;
    return 0;
}

typedef int (*kv_f)(const char *key, const char *val, void *arg);

/* Call 'cb' for each "KEY VALUE" line of 'text' ('len' bytes; a line
 * without a space is skipped); 'cb' returns 1 for a key it took, 0 for
 * one it does not know (ignored: a later version's), -1 for a value it
 * refuses.  A NUL, a line over PL_KV_LINE_MAX bytes, a key given twice
 * or a refused value: -1 with errp set, errno EPROTO. */
static int parse_kv(const char *path, const char *text, size_t len, kv_f cb,
                    void *arg, struct pl_error *errp)
{
    char line[PL_KV_LINE_MAX + 1];
    char seen[16][PL_KV_LINE_MAX + 1];
    int nseen = 0;

    if (memchr(text, '\0', len))
        return pl_errset(errp, EPROTO, "%s holds a NUL byte: not a file of "
                         "pilot's", path);
    for (size_t at = 0, lineno = 1; at < len; lineno++) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t n = (nl ? (size_t)(nl - text) : len) - at;
        char *sp;
        if (n > PL_KV_LINE_MAX)
            return pl_errset(errp, EPROTO, "%s: line %zu is longer than %d "
                             "bytes", path, lineno, PL_KV_LINE_MAX);
        memcpy(line, text + at, n);
        line[n] = '\0';
        at += n + (nl != NULL);
        if (!(sp = strchr(line, ' ')))
            continue;
        *sp = '\0';
        int rc = cb(line, sp + 1, arg);
        if (rc < 0)
            return pl_errset(errp, EPROTO, "%s: line %zu: bad %.32s '%.40s'",
                             path, lineno, line, sp + 1);
        if (rc == 0)
            continue;
        for (int i = 0; i < nseen; i++)
            if (!strcmp(seen[i], line))
                return pl_errset(errp, EPROTO, "%s: more than one '%.32s' "
                                 "line", path, line);
        if (nseen < (int)(sizeof(seen) / sizeof(seen[0])))
            memcpy(seen[nseen++], line, strlen(line) + 1);
    }
    return 0;
}

/* 'val' whole into 'buf' (-1 if it does not fit). */
static int kv_str(char *buf, size_t size, const char *val)
{
    size_t n = strlen(val);

    if (n >= size)
        return -1;
    memcpy(buf, val, n + 1);
    return 1;
}

/* 'val' whole, a decimal integer in [0, max], into '*out'. */
static int kv_long(long *out, const char *val, long max)
{
    char *end;
    long v;

    if (val[0] < '0' || val[0] > '9')
        return -1; /* no sign, no blank */
    errno = 0;
    v = strtol(val, &end, 10);
    if (errno || *end || v < 0 || v > max)
        return -1;
    *out = v;
    return 1;
}

static int endpoint_kv(const char *key, const char *val, void *arg)
{
    struct pl_endpoint *ep = arg;

    if (!strcmp(key, "client"))
        return kv_str(ep->client, sizeof(ep->client), val);
    if (!strcmp(key, "agent"))
        return kv_str(ep->agent, sizeof(ep->agent), val);
    if (!strcmp(key, "host"))
        return kv_str(ep->host, sizeof(ep->host), val);
    if (!strcmp(key, "pid"))
        return kv_long(&ep->pid, val, INT_MAX);
    if (!strcmp(key, "job"))
        return kv_long(&ep->job, val, UINT32_MAX);
    return 0;
}

int pl_endpoint_write(const char *dir, const struct pl_endpoint *ep,
                      struct pl_error *errp)
{
    char text[1024];

    snprintf(text, sizeof(text), "client %s\nagent %s\nhost %s\npid %ld\njob %ld\n",
             ep->client, ep->agent, ep->host, ep->pid, ep->job);
    return write_atomic(dir, "endpoint", text, errp);
}

int pl_endpoint_parse(const char *path, const char *text, size_t len,
                      struct pl_endpoint *ep, struct pl_error *errp)
{
    memset(ep, 0, sizeof(*ep));
    if (parse_kv(path, text, len, endpoint_kv, ep, errp) < 0)
        goto error;
    if (!ep->client[0] || !ep->agent[0]) {
        pl_errset(errp, EPROTO, "%s is incomplete", path);
        goto error;
    }
    return 0;
error:
    memset(ep, 0, sizeof(*ep));
    errno = EPROTO;
    return -1;
}

int pl_endpoint_read(const char *dir, struct pl_endpoint *ep,
                     struct pl_error *errp)
{
    char path[PL_PATH_MAX + 64], text[PL_KV_FILE_MAX];
    size_t len;

    memset(ep, 0, sizeof(*ep));
    if (read_text(dir, "endpoint", path, sizeof(path), text, &len, errp) < 0)
        return -1;
    return pl_endpoint_parse(path, text, len, ep, errp);
}

int pl_endpoint_remove(const char *dir)
{
    char path[PL_PATH_MAX + 16];

    snprintf(path, sizeof(path), "%s/endpoint", dir);
    return unlink(path);
}

static int info_kv(const char *key, const char *val, void *arg)
{
    struct pl_info *in = arg;

    if (!strcmp(key, "id"))
        return kv_str(in->id, sizeof(in->id), val);
    if (!strcmp(key, "mode"))
        return kv_str(in->mode, sizeof(in->mode), val);
    if (!strcmp(key, "job"))
        return kv_long(&in->job, val, UINT32_MAX);
    if (!strcmp(key, "nodes"))
        return kv_long(&in->nodes, val, INT_MAX);
    if (!strcmp(key, "created")) {
        char *end;
        if (val[0] < '0' || val[0] > '9')
            return -1;
        errno = 0;
        in->created = strtod(val, &end);
        /* N.B. finite: it goes into JSON (pilot pilots) */
        return errno || *end || !isfinite(in->created) ? -1 : 1;
    }
    return 0;
}

int pl_info_write(const char *dir, const struct pl_info *in,
                  struct pl_error *errp)
{
    char text[512];

    snprintf(text, sizeof(text), "id %s\nmode %s\njob %ld\nnodes %ld\ncreated %.3f\n",
             in->id, in->mode, in->job, in->nodes, in->created);
    return write_atomic(dir, "info", text, errp);
}

int pl_info_parse(const char *path, const char *text, size_t len,
                  struct pl_info *in, struct pl_error *errp)
{
    memset(in, 0, sizeof(*in));
    if (parse_kv(path, text, len, info_kv, in, errp) == 0)
        return 0;
    memset(in, 0, sizeof(*in));
    errno = EPROTO;
    return -1;
}

int pl_info_read(const char *dir, struct pl_info *in, struct pl_error *errp)
{
    char path[PL_PATH_MAX + 64], text[PL_KV_FILE_MAX];
    size_t len;

    memset(in, 0, sizeof(*in));
    if (read_text(dir, "info", path, sizeof(path), text, &len, errp) < 0)
        return -1;
    return pl_info_parse(path, text, len, in, errp);
}

