/* proto/keys.h - CURVE keys in the pilot directory: make, check, load
 *
 * DIR/keys/ (0700, every file 0600):
 *   server.key, server.pub   pilotd's keypair, and its public half
 *   client.key, agent.key    the CLI's and the agents' keypairs
 *   allow/NAME.pub           the public keys pilotd admits, each with its
 *                            role (its allow-list: proto/allow.h)
 * A keypair file holds "public Z85" and "secret Z85" lines, a public key
 * file one "public Z85" line (Z85: 40 characters for 32 bytes). */
#ifndef PL_PROTO_KEYS_H
#define PL_PROTO_KEYS_H

#include <stdbool.h>
#include <stddef.h>

#include "proto/error.h"
#include "proto/pilotdir.h"

#define PL_KEY_Z85 41   /* 40 characters of Z85 and a NUL */
#define PL_KEY_BIN 32
#define PL_KEYFILE_MAX 4096 /* bytes read of a key file: it holds about 100 */

struct pl_keypair {
    char pub[PL_KEY_Z85];
    char sec[PL_KEY_Z85];
};

/* What a client or an agent needs to talk to pilotd. */
struct pl_keys_peer {
    char dir[PL_PATH_MAX];     /* the keys directory, for messages */
    char name[16];             /* "client" or "agent": DIR/NAME.key */
    char server[PL_KEY_Z85];   /* pilotd's public key (DIR/server.pub) */
    struct pl_keypair own;
};

/* DIR/keys into 'buf'. */
void pl_keys_path(const char *dir, char *buf, size_t len);

/* Make the keys directory 'kdir' (0700) and what it lacks of server.key,
 * server.pub, client.key, agent.key; a keypair made here also gets its
 * allow/NAME.pub.  Keys already there are kept (a restarted pilotd
 * keeps its identity), and so is the allow-list (a removed allow/NAME.pub
 * stays removed).  Files are written whole or not at all.  Returns 0,
 * or -1 with errno and errp set. */
int pl_keys_create(const char *kdir, struct pl_error *errp);

/* Whether 'path' may hold keys: a directory (dir true) or a regular
 * file, owned by the effective user, with no permission for group or
 * others.  Returns 0, or -1 with errp set and errno ENOENT, ENOTDIR,
 * EISDIR, EPERM (not ours) or EACCES (group or others may use it). */
int pl_keys_check(const char *path, bool dir, struct pl_error *errp);

/* Read a keypair file (public and secret, which must match) or a public
 * key file, after pl_keys_check().  Returns 0, or -1 with errp set
 * (EINVAL: not a valid key). */
int pl_keys_read_pair(const char *path, struct pl_keypair *kp,
                      struct pl_error *errp);
int pl_keys_read_pub(const char *path, char pub[PL_KEY_Z85],
                     struct pl_error *errp);

/* The parsers of those two: the text of a key file ('text',
 * NUL-terminated, at most PL_KEYFILE_MAX - 1 bytes as read; changed),
 * 'path' naming it in messages.  "public Z85" and "secret Z85" lines
 * (the last of each counts), '#' comment lines, others ignored.
 * Returns 0, or -1 with errp set (EINVAL). */
int pl_keys_parse_pair(const char *path, char *text, struct pl_keypair *kp,
                       struct pl_error *errp);
int pl_keys_parse_pub(const char *path, char *text, char pub[PL_KEY_Z85],
                      struct pl_error *errp);

/* A new keypair, from libzmq's random source.  0 or -1 (errp). */
int pl_keys_generate(struct pl_keypair *kp, struct pl_error *errp);

/* Load what a client (name "client") or agent ("agent") needs from the
 * keys directory 'kdir': NAME.key and server.pub, each checked with
 * pl_keys_check(), as is 'kdir'.  Returns 0, or -1 with errp set. */
int pl_keys_load_peer(const char *kdir, const char *name,
                      struct pl_keys_peer *k, struct pl_error *errp);

/* 32 bytes of a Z85 key; -1 (EINVAL) if 'z85' is not one. */
int pl_keys_decode(const char *z85, unsigned char bin[PL_KEY_BIN]);

/* The text of key file 'path' into 'buf' ('len' bytes, NUL-terminated),
 * checked as pl_keys_check() does on the descriptor read.  Returns 0,
 * or -1 with errp set (EINVAL: larger than a key file). */
int pl_keys_read_text(const char *path, char *buf, size_t len,
                      struct pl_error *errp);

/* Write 'text' to key file 'path', mode 0600, whole or not at all: a
 * temporary file, then link() when 'exclusive' (-1 with errno EEXIST
 * and errp untouched if 'path' exists), else rename().  Returns 0, or
 * -1 with errp set. */
int pl_keys_write_file(const char *path, const char *text, bool exclusive,
                       struct pl_error *errp);

#endif /* !PL_PROTO_KEYS_H */
