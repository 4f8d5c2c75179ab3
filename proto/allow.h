/* proto/allow.h - the allow-list: the keys pilotd admits, each with a role
 *
 * DIR/keys/allow/NAME.pub, one file a key (0600, like every key file):
 *
 *   # pilot: a CURVE public key (Z85)
 *   public Z85
 *   role submit
 *   added 1718000000
 *
 * 'role' says what the key may do (enum pl_role); 'added' is when it was
 * added, in seconds since the epoch.  A file without a role line (a
 * pilot made before roles, or a key put there by hand) is the role its
 * name had then: allow/agent.pub the agents', any other the owner's
 * (admin).  pl_allow_add() names a key with 1..PL_ALLOW_NAME_MAX
 * characters of [A-Za-z0-9_-]; a file put there by hand may have any
 * name of up to 63 bytes, as before roles. */
#ifndef PL_PROTO_ALLOW_H
#define PL_PROTO_ALLOW_H

#include <stddef.h>

#include "proto/error.h"
#include "proto/keys.h"

#define PL_ALLOW_NAME_MAX 32 /* characters in the name of a key added
                                with pl_allow_add() */
#define PL_ALLOW_MAX 64      /* keys in one allow-list */

/* What a key may do.  Each socket admits its own: the agent socket
 * agent keys only, the client socket all others. */
enum pl_role {
    PL_ROLE_AGENT = 1, /* an agent: register, pull, report */
    PL_ROLE_ADMIN,     /* the owner (client.key): every request */
    PL_ROLE_SUBMIT,    /* submit; cancel its own tasks; read */
    PL_ROLE_READ,      /* list, show, counts, status */
};

/* One allowed key.  Read-only for callers. */
struct pl_allow_key {
    char name[64];
    int role;                      /* enum pl_role */
    long long added;               /* seconds since the epoch; 0: unknown */
    char pub[PL_KEY_Z85];          /* Z85 */
    unsigned char key[PL_KEY_BIN]; /* the same, decoded */
};

/* "agent", "admin", "submit", "read"; "?" for anything else. */
const char *pl_role_name(int role);
/* The role named 's', or -1 (EINVAL). */
int pl_role_parse(const char *s);

/* Whether 'name' may name a key: 0, or -1 with errp set (EINVAL). */
int pl_allow_check_name(const char *name, struct pl_error *errp);

/* Parse the text of allow/NAME.pub ('path' names it in messages; the
 * text is changed) into 'k'.  Lines: "public Z85" (required), "role
 * ROLE", "added SECONDS", each at most once; '#' starts a comment line;
 * other lines are ignored.  Returns 0, or -1 with errp set (EINVAL: no
 * public key, a bad key, role or time, a line given twice). */
int pl_allow_parse(const char *path, const char *name, char *text,
                   struct pl_allow_key *k, struct pl_error *errp);

struct pl_allow;

/* Read kdir/allow/ (the directory and each file checked with
 * pl_keys_check()), sorted by name.  A bad file fails the whole load,
 * as does one key under two names (which role would it have?).  NULL
 * with errp set; an empty list is not an error. */
struct pl_allow *pl_allow_load(const char *kdir, struct pl_error *errp);
/* NULL is ok; errno is kept. */
void pl_allow_free(struct pl_allow *a);

/* The allowed key 'key' (32 bytes), or named 'name', or the i-th
 * (0 <= i < pl_allow_count(a)); NULL if none.  Borrowed from 'a'. */
const struct pl_allow_key *pl_allow_find(const struct pl_allow *a,
                                         const unsigned char *key);
const struct pl_allow_key *pl_allow_find_name(const struct pl_allow *a,
                                              const char *name);
const struct pl_allow_key *pl_allow_at(const struct pl_allow *a, size_t i);
size_t pl_allow_count(const struct pl_allow *a);

/* Write kdir/allow/NAME.pub for public key 'pub' (Z85) with 'role' and
 * 'added', whole or not at all.  Refused (nothing written) if 'name' is
 * not a valid name (EINVAL), is taken (EEXIST), or 'pub' is already
 * allowed under another name (EEXIST), or the list is full (E2BIG).
 * Returns 0, or -1 with errp set. */
int pl_allow_add(const char *kdir, const char *name, int role,
                 const char *pub, long long added, struct pl_error *errp);

/* Write kdir/allow/NAME.pub, replacing one that is there, with no check
 * of the rest of the list: pl_keys_create()'s, for the pilot's own
 * keys.  0, or -1 with errp set. */
int pl_allow_write(const char *kdir, const char *name, int role,
                   const char *pub, long long added, struct pl_error *errp);

/* Remove kdir/allow/NAME.pub.  -1 with errp set: ENOENT if there is no
 * such key, EINVAL for a bad name. */
int pl_allow_remove(const char *kdir, const char *name,
                    struct pl_error *errp);

#endif /* !PL_PROTO_ALLOW_H */
