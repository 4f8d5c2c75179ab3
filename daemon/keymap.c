/* daemon/keymap.c - a hash table from byte strings to pointers
 *
 * Open addressing with linear probing; a deleted entry leaves a
 * tombstone, and the table is rebuilt when live entries and tombstones
 * fill 3/4 of it.  FNV-1a hashes: the keys are short (names, routing
 * ids of 5 bytes) and come from pilotd's own peers.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/keymap.h"

struct slot {
    const void *key;   /* NULL: empty */
    size_t len;
    void *val;         /* NULL with a key: a tombstone */
    uint32_t hash;
};

struct pl_keymap {
    struct slot *s;
    size_t cap;        /* a power of 2, or 0 */
    size_t used;       /* live entries and tombstones */
};

static uint32_t hash(const void *key, size_t len)
{
    const unsigned char *p = key;
    uint32_t h = 2166136261u;

    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

struct pl_keymap *pl_keymap_new(void)
{
    return calloc(1, sizeof(struct pl_keymap));
}

void pl_keymap_free(struct pl_keymap *m)
{
    if (!m)
        return;
    int saved = errno;
    free(m->s);
    free(m);
    errno = saved;
}

/* The slot of 'key', or the empty one where it would go. */
static struct slot *lookup(const struct pl_keymap *m, const void *key,
                           size_t len, uint32_t h)
{
    struct slot *tomb = NULL;

    for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        struct slot *e = &m->s[i];
        if (!e->key)
            return tomb ? tomb : e;
        if (!e->val) {
            if (!tomb)
                tomb = e;
        }
        else if (e->hash == h && e->len == len && !memcmp(e->key, key, len))
            return e;
    }
}

void *pl_keymap_get(const struct pl_keymap *m, const void *key, size_t len)
{
    if (!m || m->cap == 0)
        return NULL;
    struct slot *e = lookup(m, key, len, hash(key, len));
    return e->key && e->val && e->len == len && !memcmp(e->key, key, len)
               ? e->val
               : NULL;
}

static int rebuild(struct pl_keymap *m, size_t cap)
{
    struct slot *old = m->s;
    size_t ocap = m->cap;

    if (!(m->s = calloc(cap, sizeof(*m->s)))) {
        m->s = old;
        errno = ENOMEM;
        return -1;
    }
    m->cap = cap;
    m->used = 0;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].key && old[i].val) {
            *lookup(m, old[i].key, old[i].len, old[i].hash) = old[i];
            m->used++;
        }
    free(old);
    return 0;
}

int pl_keymap_put(struct pl_keymap *m, const void *key, size_t len,
                  void *val)
{
    uint32_t h = hash(key, len);

    if ((m->used + 1) * 4 > m->cap * 3) {
        size_t live = 0;
        for (size_t i = 0; i < m->cap; i++)
            live += m->s[i].key && m->s[i].val;
        size_t cap = m->cap ? m->cap : 16;
        while ((live + 1) * 2 > cap)
            cap *= 2;
        if (rebuild(m, cap) < 0)
            return -1;
    }
    struct slot *e = lookup(m, key, len, h);
    if (!e->key)
        m->used++;
    *e = (struct slot){ .key = key, .len = len, .val = val, .hash = h };
    return 0;
}

void pl_keymap_del(struct pl_keymap *m, const void *key, size_t len)
{
    if (!m || m->cap == 0)
        return;
    struct slot *e = lookup(m, key, len, hash(key, len));
    if (e->key && e->val && e->len == len && !memcmp(e->key, key, len))
        e->val = NULL; /* a tombstone: probes go on past it */
}
