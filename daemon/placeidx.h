/* daemon/placeidx.h - the nodes indexed by free capacity, for placement
 *
 * A tree over the scheduler's nodes (in their order) whose leaves hold
 * what a node can take now: its free cores and GPUs while it is up and
 * not cordoned (0 otherwise), whether it is idle, whether it is
 * reserved, and all its cores and GPUs while it is up (what it could
 * take if idle); each inner entry holds the largest of its leaves.  Finding
 * the first node, in rotation order, that has room for a rank walks
 * down the tree past the subtrees that cannot have one: O(log N) for N
 * nodes, where a scan of the nodes was O(N).  node.c updates a node's
 * leaf whenever its free cores, GPUs, state or cordon change
 * (pl_node_changed()); sched.c sets the reserved marks.
 */
#ifndef PL_DAEMON_PLACEIDX_H
#define PL_DAEMON_PLACEIDX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pl_node;
struct pl_placeidx;

struct pl_placeidx *pl_placeidx_new(void);
/* NULL is ok; the nodes are left as they are. */
void pl_placeidx_free(struct pl_placeidx *x);

/* Index node 'n' as the next one (its position: the number added
 * before it); n->pidx and n->pidx_at are set.  0, or -1 (ENOMEM)
 * leaving 'x' as it was. */
int pl_placeidx_add(struct pl_placeidx *x, struct pl_node *n);

/* Read node 'n' (indexed in 'x') again: its leaf and the entries above
 * it.  O(log N). */
void pl_placeidx_update(struct pl_placeidx *x, const struct pl_node *n);

/* Mark node 'k' reserved (or not) for the scheduler's reservation. */
void pl_placeidx_set_resv(struct pl_placeidx *x, size_t k, bool on);

/* Nodes that are up, have a free core (cordoned or not) and are not
 * reserved: whether a pass can place anything but the reserved task. */
size_t pl_placeidx_nfree(const struct pl_placeidx *x);

/* What a question asks of a node (pl_placeidx_want's 'pref'). */
enum pl_placeidx_ask {
    PL_PIDX_CAP = 0,       /* room for a rank: cores, gpus, idle, as_idle */
    PL_PIDX_ROOM,          /* a prefetch slot (daemon/prefetch.c): up, not
                              cordoned, npref < room, ncores >= cores */
    PL_PIDX_BIND,          /* up, not cordoned, holding prefetched tasks
                              and a free core */
    PL_PIDX_HELD,          /* holding prefetched tasks */
    PL_PIDX_BACK,          /* holding prefetched tasks, and cordoned, or
                              one held out of priority order, or one of
                              a priority below 'top' (if top_set), or
                              reserved (if resv_back) */
};

/* What a rank needs of a node. */
struct pl_placeidx_want {
    int pref;              /* enum pl_placeidx_ask; 0: a rank's room */
    uint32_t room;         /* PL_PIDX_ROOM: the prefetch limit */
    int32_t top;           /* PL_PIDX_BACK */
    bool top_set, resv_back;
    uint32_t cores, gpus;  /* free, at least (cores >= 1) */
    bool idle;             /* the node idle (an exclusive task) */
    bool as_idle;          /* the question is of a fit if every node
                              were idle: its cores and GPUs while up,
                              cordoned or not ('idle' is then moot) */
    bool skip_resv;        /* not a reserved node */
    /* and then this holds (NULL: nothing more) */
    bool (*ok)(size_t k, void *arg);
    void *arg;
};

/* The first node k at 'from' or after, wrapping to 0, that 'w' takes;
 * -1 if none. */
long pl_placeidx_first(const struct pl_placeidx *x, size_t from,
                       const struct pl_placeidx_want *w);

/* The same, but no wrapping: the first at 'from' or after; -1 if none. */
long pl_placeidx_next(const struct pl_placeidx *x, size_t from,
                      const struct pl_placeidx_want *w);

/* The free cores on nodes up, not cordoned, not reserved and holding
 * no prefetched task: their sum and the largest.  O(1). */
void pl_placeidx_spare(const struct pl_placeidx *x, uint64_t *sum,
                       uint32_t *widest);
/* The sum of the nodes' pref_taking.  O(1). */
uint64_t pl_placeidx_taking(const struct pl_placeidx *x);

#endif /* !PL_DAEMON_PLACEIDX_H */
