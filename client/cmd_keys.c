/* client/cmd_keys.c - pilot keys: who may talk to the pilot, and how much
 *
 * The allow-list is the pilot's keys/allow/ directory (proto/allow.h),
 * its owner's alone: 'add' and 'revoke' change it directly, so they work
 * on a pilot that is down too, then ask a running pilotd to read it
 * again (a request only the owner's key may make), so that a revoked key
 * is refused from the next request on, on connections it already has.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client/cli.h"
#include "client/conn.h"
#include "client/output.h"
#include "proto/allow.h"
#include "proto/keys.h"

static const char help[] =
    "usage: pilot keys list [--json]\n"
    "       pilot keys add NAME --role submit|read (--out DIR | --pub KEY)\n"
    "       pilot keys revoke NAME\n"
    "\n"
    "The keys the pilot admits, each with a role:\n"
    "  admin    the pilot's own key (keys/client.key): everything\n"
    "  submit   submit; cancel the tasks it submitted; what read may\n"
    "  read     ls, show, wait, status (logs needs the pilot's files)\n"
    "  agent    the agents' key (keys/agent.key), on the agent socket only\n"
    "\n"
    "list     NAME ROLE ADDED PUBLIC for each key\n"
    "add      add key NAME: a new keypair, written with the pilot's server\n"
    "         key and endpoint into a new directory DIR (--out) to hand to\n"
    "         its holder, who runs 'PILOT_HOME=DIR pilot status'; or the\n"
    "         public key KEY (--pub: 40 characters of Z85, or a file with\n"
    "         a 'public Z85' line) of a keypair its holder made (with\n"
    "         --out too: DIR gets all but the keypair, which its holder\n"
    "         puts in DIR/pilots/ID/keys/client.key)\n"
    "revoke   remove key NAME; a running pilotd refuses it at once, on\n"
    "         the connections it has too\n"
    "A running pilotd reads the allow-list again after 'add' and 'revoke'\n"
    "(only the pilot's own key may ask it to).\n"
    "\n"
    "options:\n"
    "  --role ROLE  submit or read\n"
    "  --out DIR    a new directory (0700) for the key's holder\n"
    "  --pub KEY    the public key to admit (Z85 or a file)\n"
    "  --pilot ID   the pilot (default: the one running)\n"
    "  --json       print data as JSON\n"
    "  -h, --help   this help\n"
    "\n"
    "examples:\n"
    "  pilot keys add alice --role submit --out /tmp/alice\n"
    "  pilot keys add dashboard --role read --out /tmp/dash\n"
    "  pilot keys revoke alice\n";

enum {
    OPT_ROLE = PL_OPT_CMD,
    OPT_OUT,
    OPT_PUB,
};

struct args {
    const char *role, *out, *pub;
};

/* The chosen pilot (running, else --pilot's or the newest) and its keys
 * directory.  0, or -1 with the error printed. */
static int find_pilot(struct pl_cli *cli, struct pl_pilot *p, char *kdir,
                      size_t len)
{
    struct pl_error err;

    if (pl_conn_find(&cli->find, PL_CONN_READ, p, &err) < 0)
        return pl_cli_error("%s", err.text);
    pl_keys_path(p->dir, kdir, len);
    if (pl_keys_check(kdir, true, &err) < 0)
        return pl_cli_error("%s", err.text);
    return 0;
}

static json_t *key_json(const struct pl_allow_key *k)
{
    return json_pack("{s:s, s:s, s:s, s:o}", "name", k->name, "role",
                     pl_role_name(k->role), "public", k->pub, "added",
                     k->added ? json_integer(k->added) : json_null());
}

static int do_list(struct pl_cli *cli)
{
    static const char *const headers[] = { "NAME", "ROLE", "ADDED",
                                           "PUBLIC" };
    struct pl_pilot p;
    char kdir[PL_PATH_MAX + 16];
    struct pl_error err;
    struct pl_allow *a;
    int rc = PL_EXIT_ERROR;

    if (find_pilot(cli, &p, kdir, sizeof(kdir)) < 0)
        return PL_EXIT_ERROR;
    if (!(a = pl_allow_load(kdir, &err)))
        return pl_cli_error("%s", err.text);
    if (cli->json) {
        json_t *arr = json_array();
        for (size_t i = 0; i < pl_allow_count(a); i++)
            json_array_append_new(arr, key_json(pl_allow_at(a, i)));
        pl_out_json(arr);
        json_decref(arr);
        rc = PL_EXIT_OK;
        goto done;
    }
    struct pl_out_table *tab = pl_out_table_new(4, headers);
    if (!tab) {
        pl_cli_error("out of memory");
        goto done;
    }
    for (size_t i = 0; i < pl_allow_count(a); i++) {
        const struct pl_allow_key *k = pl_allow_at(a, i);
        char added[48];
        if (k->added)
            pl_out_time((double)k->added, false, added, sizeof(added));
        const char *cells[] = { k->name, pl_role_name(k->role),
                                k->added ? added : NULL, k->pub };
        pl_out_table_add(tab, cells);
    }
    /* a key cut short is of no use: never cut */
    pl_out_table_print(tab, stdout, 1 << 16);
    pl_out_table_free(tab);
    rc = PL_EXIT_OK;
done:
    pl_allow_free(a);
    return rc;
}

/* The public key of --pub: Z85 itself, or the "public" line of a file
 * (public: its mode does not matter). */
static int read_pub(const char *arg, char pub[PL_KEY_Z85],
                    struct pl_error *errp)
{
    unsigned char bin[PL_KEY_BIN];
    char text[4096];
    struct pl_allow_key k;
    size_t n;
    FILE *fp;

    if (strlen(arg) == PL_KEY_Z85 - 1 && pl_keys_decode(arg, bin) == 0) {
        memcpy(pub, arg, PL_KEY_Z85);
        return 0;
    }
    if (!(fp = fopen(arg, "r")))
        return pl_errprintf(errp, "--pub: '%.60s' is neither a public key "
                            "(40 characters of Z85) nor a file: %s", arg,
                            strerror(errno));
    n = fread(text, 1, sizeof(text) - 1, fp);
    fclose(fp);
    text[n] = '\0';
    if (pl_allow_parse(arg, "pub", text, &k, errp) < 0)
        return -1;
    memcpy(pub, k.pub, PL_KEY_Z85);
    return 0;
}

/* A private directory 'path' (0700), made here: it must not exist. */
static int new_dir(const char *path, struct pl_error *errp)
{
    if (mkdir(path, 0700) < 0)
        return pl_errprintf(errp, "cannot create %s: %s", path,
                            strerror(errno));
    if (chmod(path, 0700) < 0) /* the umask may have taken bits */
        return pl_errprintf(errp, "cannot chmod %s: %s", path,
                            strerror(errno));
    return 0;
}

/* DIR for the key's holder: a PILOT_HOME that holds pilot p's endpoint
 * and info, server.pub and, when 'kp' is given, the keypair as
 * client.key.  N.B. 'out' is made here (mkdir): it never writes into a
 * directory that exists. */
static int write_bundle(const char *out, const struct pl_pilot *p,
                        const char *kdir, const struct pl_keypair *kp,
                        struct pl_error *errp)
{
    char dir[PL_PATH_MAX + 64], keys[PL_PATH_MAX + 80];
    char path[PL_PATH_MAX + 128], text[256];
    char server[PL_KEY_Z85];
    struct pl_endpoint ep;
    struct pl_info info;

    if (snprintf(dir, sizeof(dir), "%s/pilots/%s", out, p->id)
        >= (int)sizeof(dir))
        return pl_errset(errp, ENAMETOOLONG, "--out: path too long");
    snprintf(keys, sizeof(keys), "%s/keys", dir);
    snprintf(path, sizeof(path), "%s/server.pub", kdir);
    if (pl_keys_read_pub(path, server, errp) < 0 || new_dir(out, errp) < 0)
        return -1;
    snprintf(path, sizeof(path), "%s/pilots", out);
    if (new_dir(path, errp) < 0 || new_dir(dir, errp) < 0
        || new_dir(keys, errp) < 0)
        return -1;
    if (pl_info_read(p->dir, &info, NULL) == 0
        && pl_info_write(dir, &info, errp) < 0)
        return -1;
    if (pl_endpoint_read(p->dir, &ep, NULL) == 0
        && pl_endpoint_write(dir, &ep, errp) < 0)
        return -1;
    snprintf(path, sizeof(path), "%s/server.pub", keys);
    snprintf(text, sizeof(text), "# pilot: a CURVE public key (Z85)\n"
             "public %s\n", server);
    if (pl_keys_write_file(path, text, true, errp) < 0)
        return errno == EEXIST ? pl_errprintf(errp, "%s exists", path) : -1;
    if (!kp)
        return 0;
    snprintf(path, sizeof(path), "%s/client.key", keys);
    snprintf(text, sizeof(text), "# pilot: a CURVE keypair (Z85); the "
             "secret key must stay private\npublic %s\nsecret %s\n",
             kp->pub, kp->sec);
    if (pl_keys_write_file(path, text, true, errp) < 0)
        return errno == EEXIST ? pl_errprintf(errp, "%s exists", path) : -1;
    return 0;
}

/* Ask pilot p's pilotd, if it runs, to read its allow-list again.
 * 1: it did, 0: it does not run, -1 with errp set. */
static int reload(struct pl_cli *cli, const struct pl_pilot *p,
                  struct pl_error *errp)
{
    struct pl_conn *conn;
    json_t *res;

    if (p->state != PL_PILOT_RUNNING)
        return 0;
    if (!(conn = pl_conn_attach(&cli->find, p, errp)))
        return -1;
    res = pl_conn_keys(conn, errp);
    pl_conn_free(conn);
    json_decref(res);
    return res ? 1 : -1;
}

static int do_add(struct pl_cli *cli, const char *name, const struct args *a)
{
    struct pl_pilot p;
    char kdir[PL_PATH_MAX + 16], pub[PL_KEY_Z85];
    struct pl_keypair kp, *newkp = NULL;
    struct pl_error err;
    long long now = (long long)time(NULL);
    int role, rc = PL_EXIT_ERROR;

    if (pl_allow_check_name(name, &err) < 0)
        return pl_cli_usage(cli, "%s", err.text);
    if (!a->role)
        return pl_cli_usage(cli, "add: --role submit or --role read is "
                            "required");
    role = pl_role_parse(a->role);
    if (role != PL_ROLE_SUBMIT && role != PL_ROLE_READ)
        return pl_cli_usage(cli, "--role: '%s' is not submit or read (the "
                            "pilot's own client.key is its admin, agent.key "
                            "its agents')", a->role);
    if (!a->out && !a->pub)
        return pl_cli_usage(cli, "add: --out DIR (a new keypair for its "
                            "holder) or --pub KEY is required");
    if (a->pub && read_pub(a->pub, pub, &err) < 0)
        return pl_cli_usage(cli, "%s", err.text);
    if (a->out && access(a->out, F_OK) == 0)
        return pl_cli_error("--out: %s exists; give a new directory",
                            a->out);
    if (find_pilot(cli, &p, kdir, sizeof(kdir)) < 0)
        return PL_EXIT_ERROR;
    if (!a->pub) {
        if (pl_keys_generate(&kp, &err) < 0)
            return pl_cli_error("%s", err.text);
        memcpy(pub, kp.pub, PL_KEY_Z85);
        newkp = &kp;
    }
    if (pl_allow_add(kdir, name, role, pub, now, &err) < 0) {
        pl_cli_error("pilot %s: %s", p.id, err.text);
        goto done;
    }
    if (a->out && write_bundle(a->out, &p, kdir, newkp, &err) < 0) {
        /* nothing half done: the key goes again */
        pl_allow_remove(kdir, name, NULL);
        pl_cli_error("%s; key '%s' not added", err.text, name);
        goto done;
    }
    int reloaded = reload(cli, &p, &err);
    if (reloaded < 0) {
        pl_cli_error("added '%s' to %s/allow, but pilotd did not read it "
                     "again (%s): it admits the key once it does or "
                     "restarts", name, kdir, err.text);
        goto done;
    }
    if (cli->json) {
        json_t *j = json_pack("{s:s, s:s, s:s, s:I, s:s?, s:b}", "name",
                              name, "role", pl_role_name(role), "public", pub,
                              "added", (json_int_t)now, "out", a->out,
                              "reloaded", reloaded > 0);
        pl_out_json(j);
        json_decref(j);
    }
    else {
        printf("added key '%s' (role %s) to pilot %s\n", name,
               pl_role_name(role), p.id);
        if (a->out && newkp)
            printf("hand over %s (it holds the secret key): its holder "
                   "runs 'PILOT_HOME=%s pilot status'\n", a->out, a->out);
        else if (a->out)
            printf("hand over %s; its holder puts the keypair of that "
                   "public key in %s/pilots/%s/keys/client.key\n", a->out,
                   a->out, p.id);
    }
    rc = PL_EXIT_OK;
done:
    explicit_bzero(&kp, sizeof(kp));
    return rc;
}

static int do_revoke(struct pl_cli *cli, const char *name)
{
    struct pl_pilot p;
    char kdir[PL_PATH_MAX + 16];
    struct pl_error err;
    struct pl_allow *a;
    const struct pl_allow_key *k;
    int role;

    if (!strcmp(name, "client") || !strcmp(name, "agent"))
        return pl_cli_usage(cli, "key '%s' is the pilot's own (its %s): it "
                            "cannot be revoked", name, !strcmp(name, "client")
                            ? "CLI's" : "agents'");
    if (find_pilot(cli, &p, kdir, sizeof(kdir)) < 0)
        return PL_EXIT_ERROR;
    if (!(a = pl_allow_load(kdir, &err)))
        return pl_cli_error("%s", err.text);
    if (!(k = pl_allow_find_name(a, name))) {
        pl_allow_free(a);
        return pl_cli_error("pilot %s has no key '%s' ('pilot keys list')",
                            p.id, name);
    }
    role = k->role;
    pl_allow_free(a);
    if (pl_allow_remove(kdir, name, &err) < 0)
        return pl_cli_error("%s", err.text);
    int reloaded = reload(cli, &p, &err);
    if (reloaded < 0)
        /* the file is gone, but pilotd still admits the key */
        return pl_cli_error("revoked '%s' from %s/allow, but pilotd did not "
                            "read it again (%s): the key stays admitted "
                            "until it does or restarts", name, kdir,
                            err.text);
    if (cli->json) {
        json_t *j = json_pack("{s:s, s:s, s:b}", "name", name, "role",
                              pl_role_name(role), "reloaded", reloaded > 0);
        pl_out_json(j);
        json_decref(j);
    }
    else
        printf("revoked key '%s' (role %s) of pilot %s%s\n", name,
               pl_role_name(role), p.id,
               reloaded > 0 ? ": pilotd refuses it from now on" : "");
    return PL_EXIT_OK;
}

int pl_cmd_keys(struct pl_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        { "role", required_argument, NULL, OPT_ROLE },
        { "out", required_argument, NULL, OPT_OUT },
        { "pub", required_argument, NULL, OPT_PUB },
        PL_CLI_COMMON_OPTS,
        { 0 },
    };
    struct args a = { NULL, NULL, NULL };
    const char *sub;
    int c, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        switch (c) {
        case OPT_ROLE:
            a.role = optarg;
            break;
        case OPT_OUT:
            a.out = optarg;
            break;
        case OPT_PUB:
            a.pub = optarg;
            break;
        default:
            if (pl_cli_opt(cli, c, argv, help, &rc) < 0)
                return rc;
            break;
        }
    }
    if (optind >= argc)
        return pl_cli_usage(cli, "no subcommand: list, add or revoke");
    sub = argv[optind++];
    if (!strcmp(sub, "list")) {
        if (optind < argc)
            return pl_cli_usage(cli, "list: unexpected argument '%s'",
                                argv[optind]);
        if (a.role || a.out || a.pub)
            return pl_cli_usage(cli, "list takes no --role, --out or --pub");
        return do_list(cli);
    }
    if (strcmp(sub, "add") && strcmp(sub, "revoke"))
        return pl_cli_usage(cli, "unknown subcommand '%s' (list, add or "
                            "revoke)", sub);
    if (optind >= argc)
        return pl_cli_usage(cli, "%s: no key name given", sub);
    if (optind + 1 < argc)
        return pl_cli_usage(cli, "%s: unexpected argument '%s'", sub,
                            argv[optind + 1]);
    if (!strcmp(sub, "add"))
        return do_add(cli, argv[optind], &a);
    if (a.role || a.out || a.pub)
        return pl_cli_usage(cli, "revoke takes no --role, --out or --pub");
    return do_revoke(cli, argv[optind]);
}
