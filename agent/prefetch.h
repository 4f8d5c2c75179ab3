/* agent/prefetch.h - the RUN entries pilotd placed here beyond the free
 * cores (pilotd --prefetch), held in order until an end frees cores
 *
 * A prefetched entry has no cores, only how many it takes ('prefetch').
 * The agent starts the first ones on the cores that ends freed, before
 * the EVENTS that carry those ends leave: the ends reach pilotd
 * before the 'running' events that name the cores, so its accounting
 * never sees a core held twice (docs/protocol.md, 202).  Cores free
 * before that are pilotd's to give: a held entry waits for an end, or
 * for pilotd to send it again with cores.
 */
#ifndef PL_AGENT_PREFETCH_H
#define PL_AGENT_PREFETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/run.h"

struct pl_prefetch;

/* NULL with errno (ENOMEM). */
struct pl_prefetch *pl_prefetch_new(void);
/* Frees what it holds; NULL is ok. */
void pl_prefetch_free(struct pl_prefetch *p);

/* Hold entry *r at the end: its contents move in (*r is zeroed, so
 * pl_run_clear(r) stays safe).  0, or -1 (ENOMEM) leaving *r as it was. */
int pl_prefetch_add(struct pl_prefetch *p, struct pl_run *r);
/* Whether rank 'rank' of attempt 'attempt' of task 'id' is held. */
bool pl_prefetch_holds(const struct pl_prefetch *p, uint64_t id,
                       uint64_t attempt, uint64_t rank);
/* Take the first held entry of attempt 'attempt' of task 'id' (of rank
 * 'rank' only, with 'one') out into *r (the caller's to clear); false if
 * none is held. */
bool pl_prefetch_take(struct pl_prefetch *p, uint64_t id, uint64_t attempt,
                      bool one, uint64_t rank, struct pl_run *r);
/* Entries held. */
size_t pl_prefetch_len(const struct pl_prefetch *p);
/* Forget every entry (another pilotd took over: it queues them again). */
void pl_prefetch_clear(struct pl_prefetch *p);

/* An end freed CPU ids cores[0..n) (after the agent released them), which
 * the next pl_prefetch_next() may use; ignored while nothing is held.
 * 0, or -1 (ENOMEM: they are not used). */
int pl_prefetch_freed(struct pl_prefetch *p, const uint64_t *cores,
                      uint32_t n);
/* The first entry if the cores freed since the last pl_prefetch_reset()
 * are enough for it: taken out into *r with 'cores' set to those it
 * takes (taken out of the freed ones); false otherwise (or ENOMEM). */
bool pl_prefetch_next(struct pl_prefetch *p, struct pl_run *r);
/* Put entry *r back first (a start that could not claim its cores):
 * its contents move in, its cores are dropped.  0, or -1 (ENOMEM). */
int pl_prefetch_unget(struct pl_prefetch *p, struct pl_run *r);
/* Forget the freed cores: the flush that reports their ends leaves, and
 * they are pilotd's to give from then on. */
void pl_prefetch_reset(struct pl_prefetch *p);

#endif /* !PL_AGENT_PREFETCH_H */
