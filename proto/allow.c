/* proto/allow.c - the allow-list: the keys pilotd admits, each with a role
 *
 * One file a key, so that adding or revoking one is one link() or
 * unlink() that never rewrites the others, and a file is written whole
 * (proto/keys.c) before its name appears.  The role is a line of the
 * file rather than a directory per role: a key moved between roles by
 * hand cannot end up in two directories at once.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/allow.h"

#define TEXT_MAX 4096 /* bytes of an allow/NAME.pub: about 120 */

struct pl_allow {
    size_t n;
    struct pl_allow_key e[PL_ALLOW_MAX];
};

static const char *const role_names[] = {
    [PL_ROLE_AGENT] = "agent",
    [PL_ROLE_ADMIN] = "admin",
    [PL_ROLE_SUBMIT] = "submit",
    [PL_ROLE_READ] = "read",
};
#define NROLES (sizeof(role_names) / sizeof(role_names[0]))

const char *pl_role_name(int role)
{
    if (role < 1 || (size_t)role >= NROLES)
        return "?";
    return role_names[role];
}

int pl_role_parse(const char *s)
{
    for (size_t i = 1; i < NROLES; i++)
        if (!strcmp(s, role_names[i]))
            return (int)i;
    errno = EINVAL;
    return -1;
}

int pl_allow_check_name(const char *name, struct pl_error *errp)
{
    size_t len = strlen(name);

    if (len == 0 || len > PL_ALLOW_NAME_MAX
        || strspn(name, "abcdefghijklmnopqrstuvwxyz"
                        "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != len)
        return pl_errset(errp, EINVAL, "bad key name '%.40s': 1 to %d "
                         "letters, digits, '_' or '-'", name,
                         PL_ALLOW_NAME_MAX);
    return 0;
}

/* A name a file of allow/ may have (pl_allow_remove()): not empty, no
 * '/', not hidden, short enough for struct pl_allow_key. */
static int check_file_name(const char *name, struct pl_error *errp)
{
    if (!name[0] || name[0] == '.' || strchr(name, '/')
        || strlen(name) >= sizeof(((struct pl_allow_key *)0)->name))
        return pl_errset(errp, EINVAL, "bad key name '%.40s'", name);
    return 0;
}

int pl_allow_parse(const char *path, const char *name, char *text,
                   struct pl_allow_key *k, struct pl_error *errp)
{
    bool have_pub = false, have_role = false, have_added = false;

    memset(k, 0, sizeof(*k));
    if (check_file_name(name, errp) < 0)
        return -1;
    snprintf(k->name, sizeof(k->name), "%s", name);
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char *val = strchr(line, ' ');
        if (line[0] == '#' || !val)
            continue;
        *val++ = '\0';
        val[strcspn(val, " \t\r")] = '\0';
        if (!strcmp(line, "public")) {
            if (have_pub)
                goto twice;
            if (strlen(val) != PL_KEY_Z85 - 1
                || pl_keys_decode(val, k->key) < 0)
                return pl_errset(errp, EINVAL, "%s: its public key is not "
                                 "40 characters of Z85", path);
            memcpy(k->pub, val, PL_KEY_Z85);
            have_pub = true;
        }
        else if (!strcmp(line, "role")) {
            if (have_role)
                goto twice;
            if ((k->role = pl_role_parse(val)) < 0)
                return pl_errset(errp, EINVAL, "%s: role '%.16s' is not "
                                 "agent, admin, submit or read", path, val);
            have_role = true;
        }
        else if (!strcmp(line, "added")) {
            char *end;
            if (have_added)
                goto twice;
            errno = 0;
            k->added = strtoll(val, &end, 10);
            if (errno || end == val || *end || k->added < 0)
                return pl_errset(errp, EINVAL, "%s: 'added %.24s' is not "
                                 "seconds since the epoch", path, val);
            have_added = true;
        }
        continue;
    twice:
        return pl_errset(errp, EINVAL, "%s: more than one '%s' line", path,
                         line);
    }
    if (!have_pub)
        return pl_errset(errp, EINVAL, "%s holds no public key", path);
    if (!have_role)
        /* a pilot of before roles: its agents' key, and the owner's */
        k->role = !strcmp(name, "agent") ? PL_ROLE_AGENT : PL_ROLE_ADMIN;
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const struct pl_allow_key *)a)->name,
                  ((const struct pl_allow_key *)b)->name);
}

struct pl_allow *pl_allow_load(const char *kdir, struct pl_error *errp)
{
    char dir[PL_PATH_MAX + 16], path[PL_PATH_MAX + 320];
    char text[TEXT_MAX], name[64];
    struct pl_allow *a;
    struct dirent *de;
    DIR *d = NULL;
    int saved;

    if (!(a = calloc(1, sizeof(*a)))) {
        pl_errset(errp, ENOMEM, "out of memory");
        return NULL;
    }
    if (snprintf(dir, sizeof(dir), "%s/allow", kdir) >= (int)sizeof(dir)) {
        pl_errset(errp, ENAMETOOLONG, "path too long: %s/allow", kdir);
        goto error;
    }
    if (pl_keys_check(dir, true, errp) < 0)
        goto error;
    if (!(d = opendir(dir))) {
        pl_errprintf(errp, "cannot read %s: %s", dir, strerror(errno));
        goto error;
    }
    while ((de = readdir(d))) {
        size_t len = strlen(de->d_name);
        if (de->d_name[0] == '.' || len <= 4
            || strcmp(de->d_name + len - 4, ".pub") != 0)
            continue; /* ours are NAME.pub; temporary files are not */
        if (len - 4 >= sizeof(name)) {
            pl_errset(errp, ENAMETOOLONG, "%s/%s: name too long", dir,
                      de->d_name);
            goto error;
        }
        if (a->n == PL_ALLOW_MAX) {
            pl_errset(errp, E2BIG, "%s holds more than %d keys", dir,
                      PL_ALLOW_MAX);
            goto error;
        }
        memcpy(name, de->d_name, len - 4);
        name[len - 4] = '\0';
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if (pl_keys_read_text(path, text, sizeof(text), errp) < 0
            || pl_allow_parse(path, name, text, &a->e[a->n], errp) < 0)
            goto error;
        const struct pl_allow_key *other = pl_allow_find(a, a->e[a->n].key);
        if (other) {
            pl_errset(errp, EINVAL, "%s/%s.pub and %s.pub hold the same key",
                      dir, other->name, name);
            goto error;
        }
        a->n++;
    }
    closedir(d);
    qsort(a->e, a->n, sizeof(a->e[0]), by_name);
    return a;
error:
    saved = errno;
    if (d)
        closedir(d);
    free(a);
    errno = saved;
    return NULL;
}

void pl_allow_free(struct pl_allow *a)
{
    int saved = errno;

    free(a);
    errno = saved;
}

const struct pl_allow_key *pl_allow_find(const struct pl_allow *a,
                                         const unsigned char *key)
{
    for (size_t i = 0; i < a->n; i++)
        if (!memcmp(a->e[i].key, key, PL_KEY_BIN))
            return &a->e[i];
    return NULL;
}

const struct pl_allow_key *pl_allow_find_name(const struct pl_allow *a,
                                              const char *name)
{
    for (size_t i = 0; i < a->n; i++)
        if (!strcmp(a->e[i].name, name))
            return &a->e[i];
    return NULL;
}

const struct pl_allow_key *pl_allow_at(const struct pl_allow *a, size_t i)
{
    return i < a->n ? &a->e[i] : NULL;
}

size_t pl_allow_count(const struct pl_allow *a)
{
    return a->n;
}

static int write_entry(const char *kdir, const char *name, int role,
                       const char *pub, long long added, bool exclusive,
                       struct pl_error *errp)
{
    char path[PL_PATH_MAX + 128], text[256];

    if (snprintf(path, sizeof(path), "%s/allow/%s.pub", kdir, name)
        >= (int)sizeof(path))
        return pl_errset(errp, ENAMETOOLONG, "path too long: %s/allow/%s.pub",
                         kdir, name);
    snprintf(text, sizeof(text), "# pilot: a CURVE public key (Z85) and "
             "what it may do\npublic %s\nrole %s\nadded %lld\n", pub,
             pl_role_name(role), added);
    return pl_keys_write_file(path, text, exclusive, errp);
}

int pl_allow_write(const char *kdir, const char *name, int role,
                   const char *pub, long long added, struct pl_error *errp)
{
    return write_entry(kdir, name, role, pub, added, false, errp);
}

int pl_allow_add(const char *kdir, const char *name, int role,
                 const char *pub, long long added, struct pl_error *errp)
{
    unsigned char bin[PL_KEY_BIN];
    const struct pl_allow_key *k;
    struct pl_allow *a;
    int rc = -1;

    if (pl_allow_check_name(name, errp) < 0)
        return -1;
    if (role < 1 || (size_t)role >= NROLES)
        return pl_errset(errp, EINVAL, "no role %d", role);
    if (pl_keys_decode(pub, bin) < 0)
        return pl_errset(errp, EINVAL, "'%.48s' is not a public key (40 "
                         "characters of Z85)", pub);
    if (!(a = pl_allow_load(kdir, errp)))
        return -1;
    if (pl_allow_find_name(a, name))
        pl_errset(errp, EEXIST, "there is already a key '%s' (revoke it "
                  "first)", name);
    else if ((k = pl_allow_find(a, bin)))
        pl_errset(errp, EEXIST, "this public key is already allowed, as "
                  "'%s' (role %s)", k->name, pl_role_name(k->role));
    else if (a->n == PL_ALLOW_MAX)
        pl_errset(errp, E2BIG, "the allow-list holds %d keys already, the "
                  "most it may", PL_ALLOW_MAX);
    else if (write_entry(kdir, name, role, pub, added, true, errp) == 0)
        rc = 0;
    else if (errno == EEXIST) /* someone else added it meanwhile */
        pl_errset(errp, EEXIST, "there is already a key '%s'", name);
    pl_allow_free(a);
    return rc;
}

int pl_allow_remove(const char *kdir, const char *name,
                    struct pl_error *errp)
{
    char dir[PL_PATH_MAX + 16], path[PL_PATH_MAX + 128];

    if (check_file_name(name, errp) < 0)
        return -1;
    if (snprintf(dir, sizeof(dir), "%s/allow", kdir) >= (int)sizeof(dir)
        || snprintf(path, sizeof(path), "%s/%s.pub", dir, name)
               >= (int)sizeof(path))
        return pl_errset(errp, ENAMETOOLONG, "path too long: %s/allow",
                         kdir);
    if (pl_keys_check(dir, true, errp) < 0)
        return -1;
    if (unlink(path) < 0) {
        if (errno == ENOENT)
            return pl_errprintf(errp, "no key '%s' in %s", name, dir);
        return pl_errprintf(errp, "cannot remove %s: %s", path,
                            strerror(errno));
    }
    return 0;
}
