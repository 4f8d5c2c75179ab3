/* proto/pilotdir.c - the pilot directory: ids, checks, paths, outputs
 *
 * Its endpoint and info files: proto/pilotfiles.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "proto/msg.h"
#include "proto/pilotdir.h"
#include "proto/strv.h"

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

/* The checks of the pilot tree (docs/architecture.md, "The pilot
 * directory").  Another user who could create, rename or replace a name
 * on the way to a pilot directory could hand pilotd a database of their
 * own (commands run as us) or read what tasks write.  So every
 * directory from / down is checked on the descriptor that the next step
 * opens from, and no symbolic link is followed past the real path of
 * PILOT_HOME.  N.B. one path a message: errp holds 160 characters. */

/* PILOT_HOME, pilots/, a bucket of task outputs: a directory of the
 * effective user that group and others cannot write.  They may read and
 * search it (pilot ids, 0600 outputs), unless 'private': a pilot
 * directory is 0700 as its keys/ is, since SQLite and the log make
 * state.db and logs/ as the umask says (0644), and they hold every
 * task's command and environment. */
static int check_own(const char *path, const struct stat *st, bool private,
                     struct pl_error *errp)
{
    if (S_ISLNK(st->st_mode))
        return pl_errset(errp, ELOOP, "%s is a symbolic link: not followed "
                         "(make it a directory of yours)", path);
    if (!S_ISDIR(st->st_mode))
        return pl_errset(errp, ENOTDIR, "%s is not a directory", path);
    if (st->st_uid != geteuid())
        return pl_errset(errp, EPERM, "%s belongs to uid %u, not to you "
                         "(uid %u): use a PILOT_HOME of yours", path,
                         (unsigned)st->st_uid, (unsigned)geteuid());
    if (private && (st->st_mode & 077))
        return pl_errset(errp, EACCES, "%s is open to group or others "
                         "(mode %04o): chmod go-rwx it", path,
                         (unsigned)(st->st_mode & 07777));
    if (st->st_mode & (S_IWGRP | S_IWOTH))
        return pl_errset(errp, EACCES, "%s is writable by group or others "
                         "(mode %04o): chmod go-w it", path,
                         (unsigned)(st->st_mode & 07777));
    return 0;
}

/* A directory above those: nobody but root and the effective user may
 * rename or replace what is in it.  Others may write it only if it is
 * sticky (/tmp, /var/tmp: there only an entry's owner renames it). */
static int check_above(const char *path, const struct stat *st,
                       struct pl_error *errp)
{
    if (S_ISLNK(st->st_mode)) /* realpath() resolved it: a swap since */
        return pl_errset(errp, ELOOP, "%s became a symbolic link: refused",
                         path);
    if (!S_ISDIR(st->st_mode))
        return pl_errset(errp, ENOTDIR, "%s is not a directory", path);
    if (st->st_uid != 0 && st->st_uid != geteuid())
        return pl_errset(errp, EPERM, "%s belongs to uid %u, who could swap "
                         "the pilot directories below it: move PILOT_HOME",
                         path, (unsigned)st->st_uid);
    if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(st->st_mode & S_ISVTX))
        return pl_errset(errp, EACCES, "%s is writable by others and not "
                         "sticky (mode %04o): chmod go-w it, or move "
                         "PILOT_HOME", path, (unsigned)(st->st_mode & 07777));
    return 0;
}

#define WALK_DEPTH 128 /* directories in a path; PATH_MAX allows 2048 */

/* Open the directory 'path' (absolute, no symbolic link: a realpath())
 * from / one name at a time, each opened (O_PATH, O_NOFOLLOW) from the
 * descriptor of the one above and checked with fstat(): the last 'own'
 * directories (counting / as one) with check_own(), the very last one
 * 'private' if asked, those above with check_above().  Returns the last
 * one's O_PATH descriptor, or -1 with errp and errno (ENOENT: a name is
 * missing). */
static int walk(const char *path, int own, bool private,
                struct pl_error *errp)
{
    char buf[PL_PATH_MAX], at[PL_PATH_MAX] = "/";
    char *name[WALK_DEPTH], *save = NULL;
    struct stat st;
    int n = 0, fd;

    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return pl_errset(errp, ENAMETOOLONG, "path too long: %.100s", path);
    for (char *s = strtok_r(buf, "/", &save); s; s = strtok_r(NULL, "/",
                                                             &save)) {
        if (n == WALK_DEPTH)
            return pl_errset(errp, ENAMETOOLONG, "%.100s: too deep", path);
        name[n++] = s;
    }
    if ((fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
        return pl_errprintf(errp, "cannot open /: %s", strerror(errno));
    for (int i = 0;; i++) {
        if (fstat(fd, &st) < 0) {
            pl_errprintf(errp, "cannot read %s: %s", at, strerror(errno));
            goto error;
        }
        if (n - i < own ? check_own(at, &st, private && i == n, errp) < 0
                        : check_above(at, &st, errp) < 0)
            goto error;
        if (i == n)
            return fd;
        int next = openat(fd, name[i], O_PATH | O_NOFOLLOW | O_CLOEXEC);
        size_t len = strlen(at);
        snprintf(at + len, sizeof(at) - len, "%s%s", i ? "/" : "", name[i]);
        if (next < 0) {
            pl_errprintf(errp, "cannot open %s: %s", at, strerror(errno));
            goto error;
        }
        close(fd);
        fd = next;
    }
error:;
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

/* Directory 'name' in the one open on 'at' (an O_PATH descriptor, not
 * following a link), checked with check_own() under the name 'path'. */
static int open_own(int at, const char *name, const char *path,
                    struct pl_error *errp)
{
    struct stat st;
    int fd = openat(at, name, O_PATH | O_NOFOLLOW | O_CLOEXEC), saved;

    if (fd < 0)
        return pl_errprintf(errp, "cannot open %s: %s", path,
                            strerror(errno));
    if (fstat(fd, &st) < 0)
        pl_errprintf(errp, "cannot read %s: %s", path, strerror(errno));
    else if (check_own(path, &st, false, errp) == 0)
        return fd;
    saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

/* The real path of 'path' (absolute, no symbolic link) into 'buf'. */
static int resolve(const char *path, char *buf, size_t len,
                   struct pl_error *errp)
{
    char *real = realpath(path, NULL);
    int n;

    if (!real)
        return pl_errprintf(errp, "cannot open %s: %s", path,
                            strerror(errno));
    n = snprintf(buf, len, "%s", real);
    free(real);
    if (n < 0 || (size_t)n >= len)
        return pl_errset(errp, ENAMETOOLONG, "path too long: %.100s", path);
    return 0;
}

/* If 'path' does not exist: check the directory it would be made in
 * (its nearest parent that exists) as one above PILOT_HOME, before
 * anything is made there. */
static int above_missing(const char *path, struct pl_error *errp)
{
    char buf[PL_PATH_MAX], real[PL_PATH_MAX];
    struct stat st;
    int fd;

    if (stat(path, &st) == 0
        || snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return 0; /* the checks after pl_mkdirs() say the rest */
    while (stat(buf, &st) < 0) {
        char *slash = strrchr(buf, '/');
        if (errno != ENOENT)
            return 0;
        if (!slash)
            snprintf(buf, sizeof(buf), ".");
        else if (slash == buf)
            buf[1] = '\0';
        else
            *slash = '\0';
    }
    if (resolve(buf, real, sizeof(real), errp) < 0
        || (fd = walk(real, 0, false, errp)) < 0)
        return -1;
    close(fd);
    return 0;
}

int pl_home(char *buf, size_t len, struct pl_error *errp)
{
    const char *h = getenv("PILOT_HOME");
    char path[PL_PATH_MAX];
    int n;

    if (h && *h)
        n = snprintf(path, sizeof(path), "%s", h);
    else {
        const char *home = getenv("HOME");
        if (!home || !*home) {
            errno = ENOENT;
            return pl_errprintf(errp, "neither PILOT_HOME nor HOME is set");
        }
        n = snprintf(path, sizeof(path), "%s/.pilot", home);
    }
    if (n < 0 || (size_t)n >= sizeof(path)) {
        errno = ENAMETOOLONG;
        return pl_errprintf(errp, "pilot home path too long");
    }
    return pl_home_at(path, buf, len, errp);
}

int pl_home_at(const char *path, char *buf, size_t len,
               struct pl_error *errp)
{
    char real[PL_PATH_MAX];
    int fd;

    if (snprintf(buf, len, "%s", path) >= (int)len) {
        errno = ENAMETOOLONG;
        return pl_errprintf(errp, "pilot home path too long");
    }
    if (above_missing(buf, errp) < 0)
        return -1;
    if (pl_mkdirs(buf, 0700) < 0)
        return pl_errprintf(errp, "cannot create %s: %s", buf, strerror(errno));
    if (resolve(buf, real, sizeof(real), errp) < 0
        || (fd = walk(real, 1, false, errp)) < 0)
        return -1;
    close(fd);
    if (snprintf(buf, len, "%s", real) >= (int)len)
        return pl_errset(errp, ENAMETOOLONG, "pilot home path too long");
    return 0;
}

int pl_pilotdir_check(const char *dir, char *real, size_t len,
                      struct pl_error *errp)
{
    char path[PL_PATH_MAX], parent[PL_PATH_MAX], rparent[PL_PATH_MAX];
    size_t n = strlen(dir);
    int fd;

    while (n > 1 && dir[n - 1] == '/')
        n--;
    if (n == 0 || n >= sizeof(path))
        return pl_errset(errp, n ? ENAMETOOLONG : ENOENT,
                         "'%.100s' is no directory name", dir);
    memcpy(path, dir, n);
    path[n] = '\0';
    char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!strcmp(base, ".") || !strcmp(base, "..") || !strcmp(path, "/")) {
        /* no name of its own in its parent: the whole path is resolved */
        if (resolve(path, real, len, errp) < 0)
            return -1;
    }
    else {
        /* the parents' symbolic links are resolved, not the last name */
        if (!slash)
            snprintf(parent, sizeof(parent), ".");
        else
            snprintf(parent, sizeof(parent), "%.*s",
                     slash == path ? 1 : (int)(slash - path), path);
        if (resolve(parent, rparent, sizeof(rparent), errp) < 0)
            return -1;
        int k = snprintf(real, len, "%s%s%s", rparent,
                         strcmp(rparent, "/") ? "/" : "", base);
        if (k < 0 || (size_t)k >= len)
            return pl_errset(errp, ENAMETOOLONG, "path too long: %.100s",
                             dir);
    }
    if ((fd = walk(real, 1, true, errp)) < 0)
        return -1;
    close(fd);
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
    char real[PL_PATH_MAX];
    int n, fd;

    if (!valid_id(id)) {
        errno = EINVAL;
        return pl_errprintf(errp, "'%s' is not a pilot id (like p1)", id);
    }
    if (resolve(home, real, sizeof(real), errp) < 0) {
        if (errno == ENOENT)
            pl_errprintf(errp, "no pilot %s under %s", id, home);
        return -1;
    }
    n = snprintf(dir, dirlen, "%s/pilots/%s", real, id);
    if (n < 0 || (size_t)n >= dirlen)
        return pl_errset(errp, ENAMETOOLONG, "pilot home path too long");
    /* PILOT_HOME, pilots/ and the pilot's own, 0700 */
    if ((fd = walk(dir, 3, true, errp)) < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return pl_errset(errp, ENOENT, "no pilot %s under %s", id, real);
        return -1;
    }
    close(fd);
    return 0;
}

int pl_pilotdir_create(const char *home, char *id, size_t idlen, char *dir,
                       size_t dirlen, struct pl_error *errp)
{
    char real[PL_PATH_MAX], base[PL_PATH_MAX + 16];
    long next = 1;
    char **ids = NULL;
    int hfd = -1, bfd = -1, dfd = -1, saved;

    if (resolve(home, real, sizeof(real), errp) < 0
        || (hfd = walk(real, 1, false, errp)) < 0)
        return -1;
    snprintf(base, sizeof(base), "%s/pilots", real);
    if (mkdirat(hfd, "pilots", 0700) < 0 && errno != EEXIST) {
        pl_errprintf(errp, "cannot create %s: %s", base, strerror(errno));
        goto error;
    }
    if ((bfd = open_own(hfd, "pilots", base, errp)) < 0
        || !(ids = pl_pilotdir_list(real, errp)))
        goto error;
    if (ids[0]) {
        next = strtol(ids[0] + 1, NULL, 10);
        if (next >= 1000000000L) {
            errno = EOVERFLOW;
            pl_errprintf(errp, "too many pilots under %s", base);
            goto error;
        }
        next++;
    }
    /* mkdir is the atomic claim: two concurrent 'pilot up' never share.
     * Made from the checked descriptor of pilots/, 0700 (a umask only
     * takes bits away). */
    for (int tries = 0; tries < 1000; tries++, next++) {
        snprintf(id, idlen, "p%ld", next);
        snprintf(dir, dirlen, "%s/%s", base, id);
        if (mkdirat(bfd, id, 0700) == 0) {
            if ((dfd = openat(bfd, id, O_PATH | O_DIRECTORY | O_NOFOLLOW
                                           | O_CLOEXEC)) < 0
                || mkdirat(dfd, "logs", 0700) < 0
                || mkdirat(dfd, "tasks", 0700) < 0)
                break;
            close(dfd);
            close(bfd);
            close(hfd);
            pl_strv_free(ids);
            return 0;
        }
        if (errno != EEXIST)
            break;
    }
    pl_errprintf(errp, "cannot create pilot directory %s: %s", dir,
                 strerror(errno));
error:
    saved = errno;
    if (dfd >= 0)
        close(dfd);
    if (bfd >= 0)
        close(bfd);
    close(hfd);
    pl_strv_free(ids);
    errno = saved;
    return -1;
}

static int cmp_id_desc(const void *a, const void *b)
{
    long x = strtol(*(char *const *)a + 1, NULL, 10);
    long y = strtol(*(char *const *)b + 1, NULL, 10);

    return (x < y) - (x > y);
}

char **pl_pilotdir_list(const char *home, struct pl_error *errp)
{
    char real[PL_PATH_MAX], base[PL_PATH_MAX + 16];
    DIR *d;
    struct dirent *de;
    char **v;
    size_t n = 0, cap = 8;
    int fd, rfd;

    if (!(v = calloc(cap + 1, sizeof(*v)))) {
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    if (resolve(home, real, sizeof(real), errp) < 0) {
        if (errno == ENOENT)
            return v;
        free(v);
        return NULL;
    }
    snprintf(base, sizeof(base), "%s/pilots", real);
    if ((fd = walk(base, 2, false, errp)) < 0) {
        if (errno == ENOENT)
            return v;
        free(v);
        return NULL;
    }
    rfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    close(fd);
    if (rfd < 0 || !(d = fdopendir(rfd))) {
        pl_errprintf(errp, "cannot read %s: %s", base, strerror(errno));
        if (rfd >= 0)
            close(rfd);
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

void pl_path_db(const char *dir, char *buf, size_t len)
{
    snprintf(buf, len, "%s/state.db", dir);
}

/* N.B. formatted by hand, not by snprintf(): pilotd makes two of these
 * for every RUN entry, and the four snprintf() calls were 4% of its
 * instructions a task (docs/PERFORMANCE.md, issue 16) */
int pl_path_task_log(const char *dir, unsigned long long id,
                     unsigned attempt, bool err, bool mkdirs, char *buf,
                     size_t len)
{
    size_t n = 0;

    if (!len || !pl_put_s(buf, len, &n, dir, strlen(dir))
        || !pl_put_s(buf, len, &n, "/tasks/", 7)
        || !pl_put_u(buf, len, &n, id / 1000)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    if (mkdirs && pl_mkdirs(buf, 0700) < 0)
        return -1;
    if (!pl_put_s(buf, len, &n, "/", 1) || !pl_put_u(buf, len, &n, id)
        || (attempt > 1 && (!pl_put_s(buf, len, &n, ".", 1)
                            || !pl_put_u(buf, len, &n, attempt)))
        || !pl_put_s(buf, len, &n, err ? ".err" : ".out", 4)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

bool pl_output_per_rank(unsigned long long ranks, const char *comm,
                        const char *fn, bool pool)
{
    return ranks > 1 && !pool && !(comm && !strcmp(comm, "mpi"))
           && !(fn && !strcmp(fn, "pycall"));
}

int pl_path_rank_log(const char *path, unsigned long long rank, char *buf,
                     size_t len)
{
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');
    size_t stem = dot && (!slash || dot > slash) ? (size_t)(dot - path)
                                                 : strlen(path);
    int n = snprintf(buf, len, "%.*s.r%llu%s", (int)stem, path, rank,
                     path + stem);

    if (n < 0 || (size_t)n >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

int pl_path_task_result(const char *dir, unsigned long long id,
                        unsigned attempt, char *buf, size_t len)
{
    int n = attempt > 1 ? snprintf(buf, len, "%s/tasks/%llu/%llu.%u.result",
                                   dir, id / 1000, id, attempt)
                        : snprintf(buf, len, "%s/tasks/%llu/%llu.result", dir,
                                   id / 1000, id);

    if (n < 0 || (size_t)n >= len) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

/* The O_PATH descriptor of the checked directory of output file 'path'
 * (made 0700 if missing), and in *name the file's name in it; -1 with
 * errp ("PATH: ...") and errno. */
static int output_dir(const char *path, const char **name,
                      struct pl_error *errp)
{
    char dir[PL_PATH_MAX];
    const char *slash = strrchr(path, '/');
    int dfd;

    if (!slash || !slash[1] || (size_t)(slash - path) >= sizeof(dir))
        return pl_errset(errp, EINVAL, "%.100s: not a file's path", path);
    /* its directory: "/" for "/name" */
    size_t dlen = slash == path ? 1 : (size_t)(slash - path);
    memcpy(dir, path, dlen);
    dir[dlen] = '\0';
    *name = slash + 1;
    /* N.B. made only when missing: an mkdir() and a stat() of each
     * level per output would slow every spawn */
    if ((dfd = open_own(AT_FDCWD, dir, dir, errp)) < 0 && errno == ENOENT) {
        if (pl_mkdirs(dir, 0700) < 0)
            return pl_errprintf(errp, "%s: %s", path, strerror(errno));
        dfd = open_own(AT_FDCWD, dir, dir, errp);
    }
    return dfd;
}

int pl_output_why(int dfd, const char *path, const char *name, int errnum,
                  struct pl_error *errp)
{
    struct stat st;

    if (errnum != EEXIST) {
        errno = errnum;
        return pl_errprintf(errp, "%s: %s", path, strerror(errnum));
    }
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        pl_errprintf(errp, "%s: %s", path, strerror(errno));
    else if (S_ISLNK(st.st_mode))
        pl_errprintf(errp, "%s is a symbolic link: not followed", path);
    else
        pl_errprintf(errp, "%s exists already (uid %u, mode %04o)", path,
                     (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
    errno = EEXIST;
    return -1;
}

int pl_output_open(const char *path, bool shared, struct pl_error *errp)
{
    const char *name;
    int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY
                | O_CLOEXEC | (shared ? O_APPEND : 0);
    struct stat st;
    int dfd, fd, saved;

    if ((dfd = output_dir(path, &name, errp)) < 0)
        return -1;
    if ((fd = openat(dfd, name, flags, 0600)) >= 0) {
        close(dfd);
        return fd;
    }
    /* there already: the file of a rank of the same task (one that
     * another agent, on another node, made first), or nothing we write.
     * N.B. O_NONBLOCK: a FIFO must not stop the agent. */
    if (errno == EEXIST && shared) {
        if ((fd = openat(dfd, name, O_WRONLY | O_APPEND | O_NOFOLLOW
                                        | O_NOCTTY | O_CLOEXEC | O_NONBLOCK))
            >= 0) {
            if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)
                && st.st_uid == geteuid() && st.st_nlink == 1
                && fcntl(fd, F_SETFL, O_APPEND) == 0) {
                close(dfd);
                return fd;
            }
            close(fd);
        }
        errno = EEXIST; /* said by what is there */
    }
    pl_output_why(dfd, path, name, errno, errp);
    saved = errno;
    close(dfd);
    errno = saved;
    return -1;
}

void pl_outdir_init(struct pl_outdir *c)
{
    c->fd = -1;
    c->path[0] = '\0';
}

void pl_outdir_close(struct pl_outdir *c)
{
    if (c && c->fd >= 0) {
        int saved = errno;
        close(c->fd);
        errno = saved;
    }
    if (c)
        pl_outdir_init(c);
}

int pl_outdir_get(struct pl_outdir *c, const char *path, const char **name,
                  struct pl_error *errp)
{
    const char *slash = strrchr(path, '/');
    size_t dlen = slash ? (size_t)(slash - path) : 0;
    struct stat st;
    int fd;

    /* the one kept: what its path still names (not removed, renamed or
     * replaced: the same inode, no link), passing the same checks; one
     * lstat() instead of a walk and a check */
    if (c->fd >= 0 && slash && slash[1] && dlen < sizeof(c->path)
        && !strncmp(c->path, path, dlen) && c->path[dlen] == '\0') {
        if (lstat(c->path, &st) == 0 && st.st_dev == c->dev
            && st.st_ino == c->ino
            && check_own(c->path, &st, false, NULL) == 0) {
            *name = slash + 1;
            return c->fd;
        }
    }
    pl_outdir_close(c);
    if ((fd = output_dir(path, name, errp)) < 0)
        return -1;
    if (dlen < sizeof(c->path) && dlen > 0 && fstat(fd, &st) == 0) {
        memcpy(c->path, path, dlen);
        c->path[dlen] = '\0';
        c->dev = st.st_dev;
        c->ino = st.st_ino;
        c->fd = fd;
        return fd;
    }
    /* not kept: the caller's until its next call */
    c->fd = fd;
    c->path[0] = '\0';
    return fd;
}
