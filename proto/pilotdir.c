/* proto/pilotdir.c - the pilot directory: ids, info and endpoint files */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "proto/msg.h"
#include "proto/pilotdir.h"

/* mkdir that accepts an existing directory, and only a directory. */
static int mkdir1(const char *path, unsigned mode)
{
    struct stat st;

    if (mkdir(path, mode) == 0)
        return 0;
    if (errno != EEXIST)
        return -1;
    if (stat(path, &st) < 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

int pl_mkdirs(const char *path, unsigned mode)
{
    char buf[PL_PATH_MAX];
    size_t len = strlen(path);

    if (len == 0 || len >= sizeof(buf)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    memcpy(buf, path, len + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir1(buf, mode) < 0)
            return -1;
        *p = '/';
    }
    return mkdir1(buf, mode);
}

int pl_home(char *buf, size_t len, struct pl_error *errp)
{
    const char *h = getenv("PILOT_HOME");
    int n;

    if (h && *h)
        n = snprintf(buf, len, "%s", h);
    else {
        const char *home = getenv("HOME");
        if (!home || !*home) {
            errno = ENOENT;
            return pl_errprintf(errp, "neither PILOT_HOME nor HOME is set");
        }
        n = snprintf(buf, len, "%s/.pilot", home);
    }
    if (n < 0 || (size_t)n >= len) {
        errno = ENAMETOOLONG;
        return pl_errprintf(errp, "pilot home path too long");
    }
    if (pl_mkdirs(buf, 0700) < 0)
        return pl_errprintf(errp, "cannot create %s: %s", buf, strerror(errno));
    return 0;
}

static bool valid_id(const char *id)
{
    size_t n = strlen(id);

    if (n < 2 || n >= PL_ID_MAX || id[0] != 'p')
        return false;
    for (size_t i = 1; i < n; i++)
        if (id[i] < '0' || id[i] > '9')
            return false;
    return true;
}

int pl_pilotdir_path(const char *home, const char *id, char *dir,
                     size_t dirlen, struct pl_error *errp)
{
    struct stat st;

    if (!valid_id(id)) {
        errno = EINVAL;
        return pl_errprintf(errp, "'%s' is not a pilot id (like p1)", id);
    }
    snprintf(dir, dirlen, "%s/pilots/%s", home, id);
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        errno = ENOENT;
        return pl_errprintf(errp, "no pilot %s under %s", id, home);
    }
    return 0;
}

int pl_pilotdir_create(const char *home, char *id, size_t idlen, char *dir,
                       size_t dirlen, struct pl_error *errp)
{
    char base[PL_PATH_MAX];
    char sub[PL_PATH_MAX + 16];
    long next = 1;
    char **ids;

    snprintf(base, sizeof(base), "%s/pilots", home);
    if (pl_mkdirs(base, 0700) < 0)
        return pl_errprintf(errp, "cannot create %s: %s", base,
                            strerror(errno));
    if (!(ids = pl_pilotdir_list(home, errp)))
        return -1;
    if (ids[0]) {
        next = strtol(ids[0] + 1, NULL, 10);
        if (next >= 1000000000L) {
            pl_strv_free(ids);
            errno = EOVERFLOW;
            return pl_errprintf(errp, "too many pilots under %s", base);
        }
        next++;
    }
    pl_strv_free(ids);
    /* mkdir is the atomic claim: two concurrent 'pilot up' never share */
    for (int tries = 0; tries < 1000; tries++, next++) {
        snprintf(id, idlen, "p%ld", next);
        snprintf(dir, dirlen, "%s/%s", base, id);
        if (mkdir(dir, 0700) == 0) {
            snprintf(sub, sizeof(sub), "%s/logs", dir);
            if (mkdir(sub, 0700) < 0)
                goto error;
            snprintf(sub, sizeof(sub), "%s/tasks", dir);
            if (mkdir(sub, 0700) < 0)
                goto error;
            return 0;
        }
        if (errno != EEXIST)
            goto error;
    }
error:
    return pl_errprintf(errp, "cannot create pilot directory %s: %s", dir,
                        strerror(errno));
}

static int cmp_id_desc(const void *a, const void *b)
{
    long x = strtol(*(char *const *)a + 1, NULL, 10);
    long y = strtol(*(char *const *)b + 1, NULL, 10);

    return (x < y) - (x > y);
}

char **pl_pilotdir_list(const char *home, struct pl_error *errp)
{
    char base[PL_PATH_MAX];
    DIR *d;
    struct dirent *de;
    char **v;
    size_t n = 0, cap = 8;

    if (!(v = calloc(cap + 1, sizeof(*v))))
        return NULL;
    snprintf(base, sizeof(base), "%s/pilots", home);
    if (!(d = opendir(base))) {
        if (errno == ENOENT)
            return v;
        pl_errprintf(errp, "cannot read %s: %s", base, strerror(errno));
        free(v);
        return NULL;
    }
    while ((de = readdir(d))) {
        if (!valid_id(de->d_name))
            continue;
        if (n == cap) {
            char **nv = realloc(v, (cap * 2 + 1) * sizeof(*v));
            if (!nv)
                goto nomem;
            v = nv;
            cap *= 2;
        }
        if (!(v[n] = strdup(de->d_name)))
            goto nomem;
        v[++n] = NULL;
    }
    closedir(d);
    qsort(v, n, sizeof(*v), cmp_id_desc);
    return v;
nomem:
    closedir(d);
    pl_strv_free(v);
    pl_errprintf(errp, "out of memory");
    return NULL;
}

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

/* Call 'cb' for each "key value" line of DIR/NAME. */
static int read_kv(const char *dir, const char *name,
                   void (*cb)(const char *key, const char *val, void *arg),
                   void *arg, struct pl_error *errp)
{
    char path[PL_PATH_MAX + 64];
    char line[512];
    FILE *fp;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    if (!(fp = fopen(path, "r")))
        return pl_errprintf(errp, "cannot read %s: %s", path, strerror(errno));
    while (fgets(line, sizeof(line), fp)) {
        char *sp, *nl;
        if ((nl = strchr(line, '\n')))
            *nl = '\0';
        if (!(sp = strchr(line, ' ')))
            continue;
        *sp = '\0';
        cb(line, sp + 1, arg);
    }
    fclose(fp);
    return 0;
}

static void endpoint_kv(const char *key, const char *val, void *arg)
{
    struct pl_endpoint *ep = arg;

    if (!strcmp(key, "client"))
        snprintf(ep->client, sizeof(ep->client), "%s", val);
    else if (!strcmp(key, "agent"))
        snprintf(ep->agent, sizeof(ep->agent), "%s", val);
    else if (!strcmp(key, "host"))
        snprintf(ep->host, sizeof(ep->host), "%s", val);
    else if (!strcmp(key, "pid"))
        ep->pid = strtol(val, NULL, 10);
    else if (!strcmp(key, "job"))
        ep->job = strtol(val, NULL, 10);
}

int pl_endpoint_write(const char *dir, const struct pl_endpoint *ep,
                      struct pl_error *errp)
{
    char text[1024];

    snprintf(text, sizeof(text), "client %s\nagent %s\nhost %s\npid %ld\njob %ld\n",
             ep->client, ep->agent, ep->host, ep->pid, ep->job);
    return write_atomic(dir, "endpoint", text, errp);
}

int pl_endpoint_read(const char *dir, struct pl_endpoint *ep,
                     struct pl_error *errp)
{
    memset(ep, 0, sizeof(*ep));
    if (read_kv(dir, "endpoint", endpoint_kv, ep, errp) < 0)
        return -1;
    if (!ep->client[0] || !ep->agent[0]) {
        errno = EPROTO;
        return pl_errprintf(errp, "%s/endpoint is incomplete", dir);
    }
    return 0;
}

int pl_endpoint_remove(const char *dir)
{
    char path[PL_PATH_MAX + 16];

    snprintf(path, sizeof(path), "%s/endpoint", dir);
    return unlink(path);
}

static void info_kv(const char *key, const char *val, void *arg)
{
    struct pl_info *in = arg;

    if (!strcmp(key, "id"))
        snprintf(in->id, sizeof(in->id), "%s", val);
    else if (!strcmp(key, "mode"))
        snprintf(in->mode, sizeof(in->mode), "%s", val);
    else if (!strcmp(key, "job"))
        in->job = strtol(val, NULL, 10);
    else if (!strcmp(key, "nodes"))
        in->nodes = strtol(val, NULL, 10);
    else if (!strcmp(key, "created"))
        in->created = strtod(val, NULL);
}

int pl_info_write(const char *dir, const struct pl_info *in,
                  struct pl_error *errp)
{
    char text[512];

    snprintf(text, sizeof(text), "id %s\nmode %s\njob %ld\nnodes %ld\ncreated %.3f\n",
             in->id, in->mode, in->job, in->nodes, in->created);
    return write_atomic(dir, "info", text, errp);
}

int pl_info_read(const char *dir, struct pl_info *in, struct pl_error *errp)
{
    memset(in, 0, sizeof(*in));
    return read_kv(dir, "info", info_kv, in, errp);
}

void pl_path_db(const char *dir, char *buf, size_t len)
{
    snprintf(buf, len, "%s/state.db", dir);
}

int pl_path_task_log(const char *dir, unsigned long long id,
                     unsigned attempt, bool err, bool mkdirs, char *buf,
                     size_t len)
{
    int n = snprintf(buf, len, "%s/tasks/%llu", dir, id / 1000);

    if (n < 0 || (size_t)n >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (mkdirs && pl_mkdirs(buf, 0700) < 0)
        return -1;
    if (attempt > 1)
        n = snprintf(buf, len, "%s/tasks/%llu/%llu.%u.%s", dir, id / 1000,
                     id, attempt, err ? "err" : "out");
    else
        n = snprintf(buf, len, "%s/tasks/%llu/%llu.%s", dir, id / 1000, id,
                     err ? "err" : "out");
    if (n < 0 || (size_t)n >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}
