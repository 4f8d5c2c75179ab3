/* tests/unit/test_proto_keys.c - CURVE keys in the pilot directory: made once,
 * kept, private; loading refuses what others may read; the allow-list and
 * its roles */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/allow.h"
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
    const struct pl_allow_key *k = pl_allow_find(a, bin);
    is_str(k ? k->name : "(none)", "client",
           "the client's key is allowed, as 'client'");
    is_str(k ? pl_role_name(k->role) : "(none)", "admin",
           "... with role admin (pl_keys_create wrote it)");
    ok(k && k->added > 0 && !strcmp(k->pub, client.pub),
       "... added at a time, its public key in Z85");
    k = pl_allow_find_name(a, "agent");
    is_str(k ? pl_role_name(k->role) : "(none)", "agent",
           "allow/agent.pub: role agent");
    ok(pl_allow_at(a, 0) && pl_allow_at(a, 1) && !pl_allow_at(a, 2)
           && !strcmp(pl_allow_at(a, 0)->name, "agent"),
       "the keys in name order");
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
           && !strcmp(pl_allow_find(a, bin)->name, "laptop"),
       "an added allow/laptop.pub is allowed; other files are ignored");
    ok(a && pl_allow_find(a, bin)
           && pl_allow_find(a, bin)->role == PL_ROLE_ADMIN
           && pl_allow_find(a, bin)->added == 0,
       "... with no role line: the owner's (admin), as before roles");
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

/* The parser of allow/NAME.pub, on texts made here. */
static void test_parse(void)
{
    struct pl_keypair kp;
    struct pl_allow_key k;
    struct pl_error e = { "" };
    char text[512];

    pl_keys_generate(&kp, &e);
    snprintf(text, sizeof(text), "# a comment\npublic %s\r\nrole read\n"
             "added 1700000000\nsomething else\n", kp.pub);
    ok(pl_allow_parse("x.pub", "bob", text, &k, &e) == 0
           && !strcmp(k.name, "bob") && k.role == PL_ROLE_READ
           && k.added == 1700000000 && !strcmp(k.pub, kp.pub),
       "public, role read, added; a comment, a CR and another line: "
       "parsed (%s)", e.text);
    static const struct {
        const char *name, *role;
        int want;
    } roles[] = {
        { "x", "submit", PL_ROLE_SUBMIT }, { "x", "admin", PL_ROLE_ADMIN },
        { "x", "agent", PL_ROLE_AGENT },   { "agent", NULL, PL_ROLE_AGENT },
        { "client", NULL, PL_ROLE_ADMIN }, { "laptop", NULL, PL_ROLE_ADMIN },
    };
    for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++) {
        snprintf(text, sizeof(text), "public %s\n%s%s\n", kp.pub,
                 roles[i].role ? "role " : "",
                 roles[i].role ? roles[i].role : "");
        k.role = 0;
        ok(pl_allow_parse("x.pub", roles[i].name, text, &k, &e) == 0
               && k.role == roles[i].want,
           "%s.pub with %s%s: role %s", roles[i].name,
           roles[i].role ? "role " : "no role line",
           roles[i].role ? roles[i].role : "", pl_role_name(roles[i].want));
    }
    static const char *const bad[] = {
        "role read\nadded 1\n",                   /* no public key */
        "public K\nrole root\n",                  /* no such role */
        "public K\nrole \n",                      /* an empty one */
        "public K\nrole read\nrole submit\n",     /* two roles */
        "public K\npublic K\n",                    /* two keys */
        "public K\nadded yesterday\n",            /* not a time */
        "public K\nadded -5\n",                   /* before the epoch */
        "public K\nadded 12x\n",                  /* trailing junk */
        "public 0123456789\n",                    /* a key too short */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        size_t off = 0;
        for (const char *c = bad[i]; *c && off < sizeof(text) - 48; c++)
            if (*c == 'K')
                off += (size_t)snprintf(text + off, sizeof(text) - off,
                                        "%s", kp.pub);
            else
                text[off++] = *c;
        text[off] = '\0';
        errno = 0;
        e.text[0] = '\0';
        ok(pl_allow_parse("bad.pub", "bad", text, &k, &e) == -1
               && errno == EINVAL && strstr(e.text, "bad.pub"),
           "refused: %s", e.text);
    }
    ok(pl_allow_parse("x.pub", "../x", text, &k, &e) == -1,
       "a name with a '/': refused");
    is(pl_role_parse("read"), PL_ROLE_READ, "pl_role_parse(\"read\")");
    errno = 0;
    ok(pl_role_parse("Read") == -1 && errno == EINVAL,
       "pl_role_parse(\"Read\"): -1, EINVAL");
    is_str(pl_role_name(0), "?", "pl_role_name(0): ?");
    ok(pl_allow_check_name("alice_2-b", &e) == 0, "name alice_2-b: fine");
    static const char *const badnames[] = {
        "", "a.b", "a/b", ".x", "a b", "012345678901234567890123456789012",
    };
    for (size_t i = 0; i < sizeof(badnames) / sizeof(badnames[0]); i++) {
        errno = 0;
        ok(pl_allow_check_name(badnames[i], &e) == -1 && errno == EINVAL,
           "name '%s': refused", badnames[i]);
    }
}

/* pl_allow_add and pl_allow_remove on the list test_allow left: client
 * (admin) and agent (no role line: agent). */
static void test_add_remove(const char *kdir)
{
    struct pl_keypair bob, eve;
    struct pl_allow_key k;
    struct pl_error e = { "" };
    struct pl_allow *a;
    char path[PL_PATH_MAX], text[512];

    pl_keys_generate(&bob, &e);
    pl_keys_generate(&eve, &e);
    is(pl_allow_add(kdir, "bob", PL_ROLE_SUBMIT, bob.pub, 1700000001, &e),
       0, "pl_allow_add bob, role submit");
    snprintf(path, sizeof(path), "%s/allow/bob.pub", kdir);
    is(mode_of(path), 0600, "allow/bob.pub: mode 0600");
    snprintf(text, sizeof(text), "%s", slurp(path));
    ok(pl_allow_parse(path, "bob", text, &k, &e) == 0
           && k.role == PL_ROLE_SUBMIT && k.added == 1700000001
           && !strcmp(k.pub, bob.pub),
       "... it reads back: role submit, its time, its key");
    a = pl_allow_load(kdir, &e);
    ok(a && pl_allow_count(a) == 3 && pl_allow_find_name(a, "bob")
           && pl_allow_find_name(a, "agent")->role == PL_ROLE_AGENT,
       "the list: 3 keys, agent.pub of before roles still the agents'");
    pl_allow_free(a);

    errno = 0;
    ok(pl_allow_add(kdir, "bob", PL_ROLE_READ, eve.pub, 1, &e) == -1
           && errno == EEXIST && strstr(e.text, "already a key 'bob'"),
       "the name again: EEXIST: %s", e.text);
    snprintf(text, sizeof(text), "%s", slurp(path));
    ok(strstr(text, bob.pub) && strstr(text, "role submit"),
       "... and bob.pub is as it was");
    errno = 0;
    ok(pl_allow_add(kdir, "bob2", PL_ROLE_READ, bob.pub, 1, &e) == -1
           && errno == EEXIST && strstr(e.text, "as 'bob'"),
       "bob's key under another name: EEXIST: %s", e.text);
    snprintf(path, sizeof(path), "%s/allow/bob2.pub", kdir);
    ok(access(path, F_OK) < 0, "... no bob2.pub written");
    errno = 0;
    ok(pl_allow_add(kdir, "a.b", PL_ROLE_READ, eve.pub, 1, &e) == -1
           && errno == EINVAL, "a bad name: EINVAL: %s", e.text);
    errno = 0;
    ok(pl_allow_add(kdir, "eve", PL_ROLE_READ, "short", 1, &e) == -1
           && errno == EINVAL, "a bad key: EINVAL: %s", e.text);

    /* one key in two files: which role would it have? */
    snprintf(path, sizeof(path), "%s/allow/copy.pub", kdir);
    snprintf(text, sizeof(text), "public %s\nrole admin\n", bob.pub);
    put(path, text, 0600);
    errno = 0;
    a = pl_allow_load(kdir, &e);
    ok(!a && errno == EINVAL && strstr(e.text, "the same key"),
       "one key in two files: the load fails: %s", e.text);
    unlink(path);

    is(pl_allow_remove(kdir, "bob", &e), 0, "pl_allow_remove bob");
    a = pl_allow_load(kdir, &e);
    unsigned char bin[PL_KEY_BIN];
    pl_keys_decode(bob.pub, bin);
    ok(a && pl_allow_count(a) == 2 && !pl_allow_find(a, bin),
       "... bob's key is no longer allowed");
    pl_allow_free(a);
    errno = 0;
    ok(pl_allow_remove(kdir, "bob", &e) == -1 && errno == ENOENT
           && strstr(e.text, "no key 'bob'"),
       "removed again: ENOENT: %s", e.text);
    errno = 0;
    ok(pl_allow_remove(kdir, "../server", &e) == -1 && errno == EINVAL,
       "a name with a '/': EINVAL");
    snprintf(path, sizeof(path), "%s/server.key", kdir);
    ok(access(path, F_OK) == 0, "... server.key is still there");
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
    char path[PL_PATH_MAX], text[512], big[5000], pub[PL_KEY_Z85];
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

    /* the parsers alone, on text (tests/fuzz/fuzz_keys.c) */
    snprintf(text, sizeof(text), "public %s\r\nsecret %s \n", b.pub, b.sec);
    ok(pl_keys_parse_pair("t.key", text, &kp, &e) == 0
           && !strcmp(kp.pub, b.pub) && !strcmp(kp.sec, b.sec),
       "pl_keys_parse_pair() of a text with CR and trailing blanks");
    snprintf(text, sizeof(text), "secret %s\n", b.sec);
    errno = 0;
    ok(pl_keys_parse_pub("t.pub", text, pub, &e) == -1 && errno == EINVAL
           && strstr(e.text, "t.pub holds no public key"),
       "pl_keys_parse_pub() of a secret alone: %s", e.text);
}

int main(void)
{
    char kdir[256], pdir[128];
    struct pl_error e = { "" };

    plan(100);
    if (!t_tmpdir("keys", tmp, sizeof(tmp)))
        return 1;
    snprintf(pdir, sizeof(pdir), "%s/p1", tmp);
    mkdir(pdir, 0700);
    pl_keys_path(pdir, kdir, sizeof(kdir));
    test_create(kdir);
    test_allow(kdir);
    test_parse();
    test_add_remove(kdir);
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
