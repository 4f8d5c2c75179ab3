/* daemon/keymap.h - a hash table from byte strings to pointers
 *
 * For the lookups pilotd makes per message or per registration that a
 * scan of every node or agent made before: a node by its name
 * (daemon/sched.c), an agent's link by its ZeroMQ routing id
 * (daemon/agents.c).  The keys are borrowed: each must stay as it was
 * while it is in the table (a node's name, a link's rid).
 */
#ifndef PL_DAEMON_KEYMAP_H
#define PL_DAEMON_KEYMAP_H

#include <stddef.h>

struct pl_keymap;

struct pl_keymap *pl_keymap_new(void);
/* NULL is ok; preserves errno. */
void pl_keymap_free(struct pl_keymap *m);

/* The value of 'key' ('len' bytes), or NULL. */
void *pl_keymap_get(const struct pl_keymap *m, const void *key, size_t len);

/* Set 'key' (borrowed) to 'val' (not NULL), replacing any value it had.
 * 0, or -1 (ENOMEM) leaving the table as it was. */
int pl_keymap_put(struct pl_keymap *m, const void *key, size_t len,
                  void *val);

/* Take 'key' out, if it is in. */
void pl_keymap_del(struct pl_keymap *m, const void *key, size_t len);

#endif /* !PL_DAEMON_KEYMAP_H */
