/* proto/keys.c - CURVE keys in the pilot directory: make, check, load
 *
 * The files are private to their owner: pl_keys_check() refuses a key
 * file or directory that group or others may read, write or search, or
 * that belongs to someone else, because whoever reads a secret key is
 * admitted as its owner, and whoever writes server.pub or allow/ can
 * put their own key in our place.  Keys are written to a temporary file
 * and linked (new keys: whoever links first wins) or renamed into place,
 * so a reader never sees half a key.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zmq.h>

#include "proto/allow.h"
#include "proto/keys.h"

#define KEYFILE_MAX PL_KEYFILE_MAX

static const char z85_chars[] = "0123456789"
                                "abcdefghijklmnopqrstuvwxyz"
                                "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                ".-:+=^!/*?&<>()[]{}@%$#";

void pl_keys_path(const char *dir, char *buf, size_t len)
{
    snprintf(buf, len, "%s/keys", dir);
}

static int join(char *buf, size_t len, const char *a, const char *b,
                struct pl_error *errp)
{
    int n = snprintf(buf, len, "%s/%s", a, b);

    if (n < 0 || (size_t)n >= len) {
        errno = ENAMETOOLONG;
        return pl_errprintf(errp, "path too long: %s/%s", a, b);
    }
    return 0;
}

int pl_keys_decode(const char *z85, unsigned char bin[PL_KEY_BIN])
{
    char again[PL_KEY_Z85];

    if (strlen(z85) != PL_KEY_Z85 - 1
        || strspn(z85, z85_chars) != PL_KEY_Z85 - 1
        || !zmq_z85_decode(bin, z85)
        /* five characters may spell more than 32 bits: the encoding of
         * what was decoded tells */
        || !zmq_z85_encode(again, bin, PL_KEY_BIN) || strcmp(again, z85)) {
        errno = EINVAL;
        return -1;
    }
    return 0;
}

/* The check of pl_keys_check() on what stat() or fstat() said. */
static int check_stat(const char *path, const struct stat *st, bool dir,
                      struct pl_error *errp)
{
    const char *what = dir ? "keys directory" : "key file";

    if (dir && !S_ISDIR(st->st_mode)) {
        errno = ENOTDIR;
        return pl_errprintf(errp, "%s is not a directory", path);
    }
    if (!dir && !S_ISREG(st->st_mode)) {
        errno = S_ISDIR(st->st_mode) ? EISDIR : EINVAL;
        return pl_errprintf(errp, "key file %s is not a regular file", path);
    }
    if (st->st_uid != geteuid()) {
        errno = EPERM;
        return pl_errprintf(errp, "%s %s belongs to uid %u, not to you "
                            "(uid %u)", what, path, (unsigned)st->st_uid,
                            (unsigned)geteuid());
    }
    if (st->st_mode & 077) {
        errno = EACCES;
        /* N.B. one path only: errp holds 160 characters */
        return pl_errprintf(errp, "%s %s is open to group or others (mode "
                            "%04o, want %s)", what, path,
                            (unsigned)(st->st_mode & 07777),
                            dir ? "0700" : "0600");
    }
    return 0;
}

int pl_keys_check(const char *path, bool dir, struct pl_error *errp)
{
    struct stat st;

    if (stat(path, &st) < 0)
        return pl_errprintf(errp, "cannot read %s: %s", path,
                            strerror(errno));
    return check_stat(path, &st, dir, errp);
}

/* N.B. checked as it is read (fstat of the descriptor read): no window
 * for a swap after the check */
int pl_keys_read_text(const char *path, char *buf, size_t len,
                      struct pl_error *errp)
{
    struct stat st;
    size_t used = 0;
    ssize_t n;
    int fd, saved;

    if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0)
        return pl_errprintf(errp, "cannot read %s: %s", path,
                            strerror(errno));
    if (fstat(fd, &st) < 0) {
        pl_errprintf(errp, "cannot read %s: %s", path, strerror(errno));
        goto error;
    }
    if (check_stat(path, &st, false, errp) < 0)
        goto error;
    while ((n = read(fd, buf + used, len - 1 - used)) > 0)
        if ((used += (size_t)n) == len - 1)
            break;
    if (n < 0) {
        pl_errprintf(errp, "cannot read %s: %s", path, strerror(errno));
        goto error;
    }
    if (used == len - 1) {
        errno = EINVAL;
        pl_errprintf(errp, "%s is too large to be a key file", path);
        goto error;
    }
    buf[used] = '\0';
    close(fd);
    return 0;
error:
    saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

/* The "public" and "secret" values of a key file's text (either may be
 * NULL: not wanted).  Other lines are ignored. */
static int parse(const char *path, char *text, char *pub, char *sec,
                 struct pl_error *errp)
{
    unsigned char bin[PL_KEY_BIN];
    bool have_pub = false, have_sec = false;

    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char *val = strchr(line, ' ');
        char *out = NULL;
        bool *have = NULL;
        if (line[0] == '#' || !val)
            continue;
        *val++ = '\0';
        if (!strcmp(line, "public") && pub) {
            out = pub;
            have = &have_pub;
        }
        else if (!strcmp(line, "secret") && sec) {
            out = sec;
            have = &have_sec;
        }
        else
            continue;
        val[strcspn(val, " \t\r")] = '\0';
        if (pl_keys_decode(val, bin) < 0)
            return pl_errprintf(errp, "%s: its %s key is not 40 characters "
                                "of Z85", path, line);
        memcpy(out, val, PL_KEY_Z85);
        *have = true;
    }
    if ((pub && !have_pub) || (sec && !have_sec)) {
        errno = EINVAL;
        return pl_errprintf(errp, "%s holds no %s key", path,
                            pub && !have_pub ? "public" : "secret");
    }
    return 0;
}

int pl_keys_parse_pair(const char *path, char *text, struct pl_keypair *kp,
                       struct pl_error *errp)
{
    char derived[PL_KEY_Z85];

    if (parse(path, text, kp->pub, kp->sec, errp) < 0)
        return -1;
    if (zmq_curve_public(derived, kp->sec) < 0
        || strcmp(derived, kp->pub) != 0) {
        errno = EINVAL;
        return pl_errprintf(errp, "%s: its public and secret keys do not "
                            "match", path);
    }
    return 0;
}

int pl_keys_parse_pub(const char *path, char *text, char pub[PL_KEY_Z85],
                      struct pl_error *errp)
{
    return parse(path, text, pub, NULL, errp);
}

int pl_keys_read_pair(const char *path, struct pl_keypair *kp,
                      struct pl_error *errp)
{
    char text[KEYFILE_MAX];

    if (pl_keys_read_text(path, text, sizeof(text), errp) < 0)
        return -1;
    return pl_keys_parse_pair(path, text, kp, errp);
}

int pl_keys_read_pub(const char *path, char pub[PL_KEY_Z85],
                     struct pl_error *errp)
{
    char text[KEYFILE_MAX];

    if (pl_keys_read_text(path, text, sizeof(text), errp) < 0)
        return -1;
    return pl_keys_parse_pub(path, text, pub, errp);
}

int pl_keys_generate(struct pl_keypair *kp, struct pl_error *errp)
{
    if (zmq_curve_keypair(kp->pub, kp->sec) < 0)
        return pl_errprintf(errp, "cannot make a CURVE keypair: %s",
                            zmq_strerror(errno));
    return 0;
}

int pl_keys_write_file(const char *path, const char *text, bool exclusive,
                       struct pl_error *errp)
{
    char tmp[PL_PATH_MAX + 96];
    size_t len = strlen(text);
    int fd, saved;

    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    unlink(tmp); /* left by a crash of an earlier process with our pid */
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0)
        return pl_errprintf(errp, "cannot write %s: %s", tmp,
                            strerror(errno));
    /* exactly 0600, whatever the umask */
    if (fchmod(fd, 0600) < 0)
        goto error;
    ssize_t n = write(fd, text, len);
    if (n != (ssize_t)len) {
        if (n >= 0)
            errno = ENOSPC; /* a short write of 100 bytes: a full disk */
        goto error;
    }
    if (fsync(fd) < 0)
        goto error;
    if (close(fd) < 0) {
        fd = -1;
        goto error;
    }
    fd = -1;
    if (exclusive) {
        if (link(tmp, path) < 0) {
            saved = errno;
            unlink(tmp);
            errno = saved;
            if (errno == EEXIST)
                return -1;
            return pl_errprintf(errp, "cannot write %s: %s", path,
                                strerror(errno));
        }
        unlink(tmp);
        return 0;
    }
    if (rename(tmp, path) < 0)
        goto error;
    return 0;
error:
    saved = errno;
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    errno = saved;
    return pl_errprintf(errp, "cannot write %s: %s", path, strerror(errno));
}

static int write_pub(const char *path, const char *pub, struct pl_error *errp)
{
    char text[128];

    snprintf(text, sizeof(text), "# pilot: a CURVE public key (Z85)\n"
             "public %s\n", pub);
    return pl_keys_write_file(path, text, false, errp);
}

/* A directory, 0700, made if missing; then checked. */
static int private_dir(const char *path, struct pl_error *errp)
{
    if (mkdir(path, 0700) == 0) {
        if (chmod(path, 0700) < 0) /* the umask may have taken bits */
            return pl_errprintf(errp, "cannot chmod %s: %s", path,
                                strerror(errno));
    }
    else if (errno != EEXIST)
        return pl_errprintf(errp, "cannot create %s: %s", path,
                            strerror(errno));
    return pl_keys_check(path, true, errp);
}

/* kdir/NAME.key, made with a new keypair if missing; for a client or
 * agent keypair made here ('role' not 0), allow/NAME.pub too (first: a
 * crash between the two leaves an allowed key nobody holds, and the
 * next run makes both again). */
static int ensure_pair(const char *kdir, const char *name, int role,
                       struct pl_keypair *kp, struct pl_error *errp)
{
    char path[PL_PATH_MAX + 64], file[80];
    char text[256];
    struct stat st;
    long long now = (long long)time(NULL);

    snprintf(file, sizeof(file), "%s.key", name);
    if (join(path, sizeof(path), kdir, file, errp) < 0)
        return -1;
    if (stat(path, &st) == 0 || errno != ENOENT)
        return pl_keys_read_pair(path, kp, errp);
    if (pl_keys_generate(kp, errp) < 0)
        return -1;
    if (role && pl_allow_write(kdir, name, role, kp->pub, now, errp) < 0)
        return -1;
    snprintf(text, sizeof(text), "# pilot: a CURVE keypair (Z85); the "
             "secret key must stay private\npublic %s\nsecret %s\n",
             kp->pub, kp->sec);
    if (pl_keys_write_file(path, text, true, errp) == 0)
        return 0;
    if (errno != EEXIST)
        return -1;
    /* another process made it first: use its keypair */
    if (pl_keys_read_pair(path, kp, errp) < 0)
        return -1;
    return role ? pl_allow_write(kdir, name, role, kp->pub, now, errp) : 0;
}

int pl_keys_create(const char *kdir, struct pl_error *errp)
{
    static const struct {
        const char *name;
        int role;
    } peers[] = { { "client", PL_ROLE_ADMIN }, { "agent", PL_ROLE_AGENT } };
    char path[PL_PATH_MAX + 64], pub[PL_KEY_Z85];
    struct pl_keypair server, kp;
    struct stat st;

    if (private_dir(kdir, errp) < 0
        || join(path, sizeof(path), kdir, "allow", errp) < 0
        || private_dir(path, errp) < 0
        || ensure_pair(kdir, "server", 0, &server, errp) < 0)
        return -1;
    for (size_t i = 0; i < sizeof(peers) / sizeof(peers[0]); i++)
        if (ensure_pair(kdir, peers[i].name, peers[i].role, &kp, errp) < 0)
            return -1;
    /* server.pub follows server.key */
    if (join(path, sizeof(path), kdir, "server.pub", errp) < 0)
        return -1;
    if (stat(path, &st) == 0 && pl_keys_read_pub(path, pub, NULL) == 0
        && !strcmp(pub, server.pub))
        return 0;
    return write_pub(path, server.pub, errp);
}

int pl_keys_load_peer(const char *kdir, const char *name,
                      struct pl_keys_peer *k, struct pl_error *errp)
{
    char path[PL_PATH_MAX + 64], file[32];

    memset(k, 0, sizeof(*k));
    if (strlen(name) >= sizeof(k->name)) {
        errno = EINVAL;
        return pl_errprintf(errp, "key name '%s' is too long", name);
    }
    if (snprintf(k->dir, sizeof(k->dir), "%s", kdir) >= (int)sizeof(k->dir)) {
        errno = ENAMETOOLONG;
        return pl_errprintf(errp, "keys directory path too long");
    }
    snprintf(k->name, sizeof(k->name), "%s", name);
    snprintf(file, sizeof(file), "%s.key", name);
    if (pl_keys_check(kdir, true, errp) < 0) {
        if (errno == ENOENT)
            pl_errprintf(errp, "no keys: %s does not exist", kdir);
        return -1;
    }
    if (join(path, sizeof(path), kdir, file, errp) < 0)
        return -1;
    if (pl_keys_read_pair(path, &k->own, errp) < 0) {
        if (errno == ENOENT)
            pl_errprintf(errp, "no %s key: %s does not exist", name, path);
        return -1;
    }
    if (join(path, sizeof(path), kdir, "server.pub", errp) < 0)
        return -1;
    if (pl_keys_read_pub(path, k->server, errp) < 0) {
        if (errno == ENOENT)
            pl_errprintf(errp, "no server key: %s does not exist", path);
        return -1;
    }
    return 0;
}
