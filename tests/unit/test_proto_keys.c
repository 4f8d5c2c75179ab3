/* tests/unit/test_proto_keys.c - CURVE keys in the pilot directory: made once,
 * kept, private; loading refuses what others may read */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/keys.h"
#include "tests/unit/helpers.h"

static char tmp[64]; /* our mkdtemp() directory */

static int mode_of(const char *path)
{
    struct stat st;

    return stat(path, &st) < 0 ? -1 : (int)(st.st_mode & 07777);
}

/* The whole text of 'path' (static buffer). */
static const char *slurp(const char *path)
{
    static char buf[4096];
    FILE *fp = fopen(path, "r");
    size_t n = 0;

    buf[0] = '\0';
    if (fp) {
        n = fread(buf, 1, sizeof(buf) - 1, fp);
        fclose(fp);
    }
    buf[n] = '\0';
    return buf;
}

static void put(const char *path, const char *text, int mode)
{
    FILE *fp = fopen(path, "w");

    if (fp) {
        fputs(text, fp);
        fclose(fp);
    }
    chmod(path, (mode_t)mode);
}

static void test_create(const char *kdir)
{
    static const char *const files[] = {
        "server.key", "server.pub", "client.key", "agent.key",
        "allow/client.pub", "allow/agent.pub",
    };
    char path[PL_PATH_MAX], before[3][4096];
    const char *names[] = { "server", "client", "agent" };
    struct pl_keypair kp[3];
    char pub[PL_KEY_Z85];
    struct pl_error e = { "" };
    bool modes = true;

    umask(0); /* the modes must not depend on it */
    is(pl_keys_create(kdir, &e), 0, "pl_keys_create in a new directory");
    if (e.text[0])
        diag("%s", e.text);
    umask(022);
    is(mode_of(kdir), 0700, "keys directory: mode 0700");
    snprintf(path, sizeof(path), "%s/allow", kdir);
    is(mode_of(path), 0700, "allow/: mode 0700");
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", kdir, files[i]);
        if (mode_of(path) != 0600) {
            diag("%s: mode %o", path, mode_of(path));
            modes = false;
        }
    }
    ok(modes, "server.key, server.pub, client.key, agent.key, allow/client."
       "pub, allow/agent.pub: each there, mode 0600");
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/%s.key", kdir, names[i]);
        ok(pl_keys_read_pair(path, &kp[i], &e) == 0, "%s.key reads: a "
           "matching pair", names[i]);
        snprintf(before[i], sizeof(before[i]), "%s", slurp(path));
    }
    ok(strcmp(kp[0].pub, kp[1].pub) && strcmp(kp[1].pub, kp[2].pub)
           && strcmp(kp[0].pub, kp[2].pub), "three different keypairs");
    snprintf(path, sizeof(path), "%s/server.pub", kdir);
    ok(pl_keys_read_pub(path, pub, &e) == 0 && !strcmp(pub, kp[0].pub),
       "server.pub is server.key's public key");
    snprintf(path, sizeof(path), "%s/allow/client.pub", kdir);
    ok(pl_keys_read_pub(path, pub, &e) == 0 && !strcmp(pub, kp[1].pub),
       "allow/client.pub is client.key's public key");
    ok(!strstr(slurp(path), "secret"), "... and holds no secret");

    /* a restarted pilotd, or pilotd after 'pilot up': nothing changes */
    is(pl_keys_create(kdir, &e), 0, "pl_keys_create again");
    bool same = true;
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "%s/%s.key", kdir, names[i]);
        same = same && !strcmp(before[i], slurp(path));
    }
    ok(same, "... keeps every keypair");

    /* server.pub lost: made again from server.key */
    snprintf(path, sizeof(path), "%s/server.pub", kdir);
    unlink(path);
    ok(pl_keys_create(kdir, &e) == 0 && pl_keys_read_pub(path, pub, &e) == 0
           && !strcmp(pub, kp[0].pub),
       "a lost server.pub is written again from server.key");
}

static void test_allow(const char *kdir)
{
    char path[PL_PATH_MAX], text[256];
    struct pl_keypair client, extra;
    unsigned char bin[PL_KEY_BIN];
    struct pl_error e = { "" };
    struct pl_allow *a;

    snprintf(path, sizeof(path), "%s/client.key", kdir);
    pl_keys_read_pair(path, &client, &e);
    a = pl_allow_load(kdir, &e);
    ok(a && pl_allow_count(a) == 2, "allow-list: 2 keys (%s)",
       a ? "loaded" : e.text);
    if (!a)
        return;
    pl_keys_decode(client.pub, bin);
    is_str(pl_allow_find(a, bin) ? pl_allow_find(a, bin) : "(none)",
           "client", "the client's key is allowed, as 'client'");
    pl_keys_generate(&extra, &e);
    pl_keys_decode(extra.pub, bin);
    ok(!pl_allow_find(a, bin), "another key is not");
    pl_allow_free(a);

    /* one more key, and files that are not keys */
    snprintf(path, sizeof(path), "%s/allow/laptop.pub", kdir);
    snprintf(text, sizeof(text), "public %s\n", extra.pub);
    put(path, text, 0600);
    snprintf(path, sizeof(path), "%s/allow/README", kdir);
    put(path, "not a key\n", 0600);
    a = pl_allow_load(kdir, &e);
    ok(a && pl_allow_count(a) == 3 && pl_allow_find(a, bin)
           && !strcmp(pl_allow_find(a, bin), "laptop"),
       "an added allow/laptop.pub is allowed; other files are ignored");
    pl_allow_free(a);

    /* an allow-list others may write is no allow-list */
    snprintf(path, sizeof(path), "%s/allow/laptop.pub", kdir);
    chmod(path, 0620);
    errno = 0;
    a = pl_allow_load(kdir, &e);
    ok(!a && errno == EACCES && strstr(e.text, "laptop.pub"),
       "a .pub others may write: the load fails: %s", e.text);
    pl_allow_free(a);
    put(path, "public tooshort\n", 0600);
    errno = 0;
    a = pl_allow_load(kdir, &e);
    ok(!a && errno == EINVAL, "a .pub with a bad key: the load fails: %s",
       e.text);
    unlink(path);

    /* revoked: a removed allow/NAME.pub stays removed */
    snprintf(path, sizeof(path), "%s/allow/agent.pub", kdir);
    unlink(path);
    pl_keys_create(kdir, &e);
    a = pl_allow_load(kdir, &e);
    ok(a && pl_allow_count(a) == 1 && access(path, F_OK) < 0,
       "pl_keys_create does not bring back a removed allow/agent.pub");
    pl_allow_free(a);
    char apath[PL_PATH_MAX];
    struct pl_keypair agent;
    snprintf(apath, sizeof(apath), "%s/agent.key", kdir);
    pl_keys_read_pair(apath, &agent, &e);
    snprintf(text, sizeof(text), "public %s\n", agent.pub);
    put(path, text, 0600);
}

static void test_check(const char *kdir)
{
    char path[PL_PATH_MAX], dir[PL_PATH_MAX];
    struct pl_error e = { "" };

    snprintf(path, sizeof(path), "%s/client.key", kdir);
    is(pl_keys_check(path, false, &e), 0, "client.key 0600: fine");
    chmod(path, 0400);
    is(pl_keys_check(path, false, &e), 0, "0400: fine");
    static const int bad[] = { 0644, 0640, 0604, 0620, 0602, 0610 };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        chmod(path, (mode_t)bad[i]);
        errno = 0;
        e.text[0] = '\0';
        ok(pl_keys_check(path, false, &e) == -1 && errno == EACCES
               && strstr(e.text, "open to group or others"),
           "mode %04o: refused: %s", bad[i], e.text);
    }
    chmod(path, 0644);
    struct pl_keys_peer k;
    errno = 0;
    ok(pl_keys_load_peer(kdir, "client", &k, &e) == -1 && errno == EACCES,
       "a client with a world-readable client.key loads nothing");
    chmod(path, 0600);
    ok(pl_keys_load_peer(kdir, "client", &k, &e) == 0
           && !strcmp(k.name, "client") && !strcmp(k.dir, kdir),
       "chmod 600: it loads");

    chmod(kdir, 0755);
    errno = 0;
    ok(pl_keys_check(kdir, true, &e) == -1 && errno == EACCES
           && strstr(e.text, "keys directory"),
       "keys directory 0755: refused: %s", e.text);
    errno = 0;
    ok(pl_keys_load_peer(kdir, "client", &k, &e) == -1 && errno == EACCES,
       "... and so is loading from it");
    chmod(kdir, 0711);
    ok(pl_keys_check(kdir, true, &e) == -1, "keys directory 0711: refused");
    chmod(kdir, 0700);
    errno = 0;
    ok(pl_keys_check(path, true, &e) == -1 && errno == ENOTDIR,
       "a file where a directory should be: ENOTDIR");
    errno = 0;
    ok(pl_keys_check(kdir, false, &e) == -1 && errno == EISDIR,
       "a directory where a key file should be: EISDIR");

    /* not ours: as root, give a copy away; else any root file will do */
    if (geteuid() == 0) {
        snprintf(dir, sizeof(dir), "%s/theirs.key", tmp);
        put(dir, slurp(path), 0600);
        if (chown(dir, 65534, 65534) < 0)
            diag("chown: %s", strerror(errno));
    }
    else
        snprintf(dir, sizeof(dir), "/etc/passwd");
    errno = 0;
    ok(pl_keys_check(dir, false, &e) == -1 && errno == EPERM
           && strstr(e.text, "not to you"),
       "a key file of another user: refused: %s", e.text);

    snprintf(dir, sizeof(dir), "%s/nokeys", tmp);
    errno = 0;
    ok(pl_keys_load_peer(dir, "client", &k, &e) == -1 && errno == ENOENT
           && strstr(e.text, "no keys"),
       "no keys directory: %s", e.text);
    mkdir(dir, 0700);
    errno = 0;
    ok(pl_keys_load_peer(dir, "client", &k, &e) == -1 && errno == ENOENT
           && strstr(e.text, "no client key"),
       "no client.key: %s", e.text);
}

static void test_bad_files(void)
{
    char path[PL_PATH_MAX], text[512], big[5000];
    struct pl_keypair a, b, kp;
    unsigned char bin[PL_KEY_BIN];
    struct pl_error e = { "" };

    pl_keys_generate(&a, &e);
    pl_keys_generate(&b, &e);
    ok(pl_keys_decode(a.pub, bin) == 0, "a generated key decodes");
    errno = 0;
    ok(pl_keys_decode("short", bin) == -1 && errno == EINVAL,
       "5 characters: not a key");
    ok(pl_keys_decode("0000000000000000000000000000000000000 ~~", bin) == -1,
       "characters outside Z85: not a key");
    ok(pl_keys_decode("########################################", bin) == -1,
       "Z85 that spells more than 32 bits a group: not a key");

    snprintf(path, sizeof(path), "%s/bad.key", tmp);
    snprintf(text, sizeof(text), "public %s\nsecret %s\n", a.pub, b.sec);
    put(path, text, 0600);
    errno = 0;
    ok(pl_keys_read_pair(path, &kp, &e) == -1 && errno == EINVAL
           && strstr(e.text, "do not match"),
       "public and secret of two pairs: %s", e.text);
    snprintf(text, sizeof(text), "# comment\npublic %s\nsecret %s\n", a.pub,
             a.sec);
    put(path, text, 0600);
    ok(pl_keys_read_pair(path, &kp, &e) == 0 && !strcmp(kp.sec, a.sec),
       "a comment line is fine");
    snprintf(text, sizeof(text), "public %s\n", a.pub);
    put(path, text, 0600);
    errno = 0;
    ok(pl_keys_read_pair(path, &kp, &e) == -1 && errno == EINVAL
           && strstr(e.text, "no secret key"),
       "no secret: %s", e.text);
    snprintf(text, sizeof(text), "public %.39s\nsecret %s\n", a.pub, a.sec);
    put(path, text, 0600);
    ok(pl_keys_read_pair(path, &kp, &e) == -1 && strstr(e.text, "Z85"),
       "a public key one character short: %s", e.text);
    memset(big, '#', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    put(path, big, 0600);
    errno = 0;
    ok(pl_keys_read_pub(path, text, &e) == -1 && errno == EINVAL,
       "a file of 5000 bytes: %s", e.text);
    snprintf(path, sizeof(path), "%s/none.key", tmp);
    errno = 0;
    ok(pl_keys_read_pair(path, &kp, &e) == -1 && errno == ENOENT,
       "a missing file: ENOENT");
}

int main(void)
{
    char kdir[256], pdir[128];
    struct pl_error e = { "" };

    plan(50);
    if (!t_tmpdir("keys", tmp, sizeof(tmp)))
        return 1;
    snprintf(pdir, sizeof(pdir), "%s/p1", tmp);
    mkdir(pdir, 0700);
    pl_keys_path(pdir, kdir, sizeof(kdir));
    test_create(kdir);
    test_allow(kdir);
    test_check(kdir);
    test_bad_files();
    /* a keys directory others may use is not filled in */
    snprintf(pdir, sizeof(pdir), "%s/p2", tmp);
    mkdir(pdir, 0700);
    snprintf(pdir, sizeof(pdir), "%s/p2/keys", tmp);
    mkdir(pdir, 0755);
    errno = 0;
    ok(pl_keys_create(pdir, &e) == -1 && errno == EACCES,
       "pl_keys_create in a keys directory of mode 0755: %s", e.text);
    t_rmtree(tmp);
    return done_testing();
}
