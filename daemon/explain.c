/* daemon/explain.c - why a task does not run yet, from the scheduler */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "daemon/explain.h"
#include "daemon/pool.h"
#include "proto/spec.h"
#include "proto/state.h"
#include "proto/strv.h"

/* The dependencies an explanation lists at most (a task may have
 * 100,000); the others are counted. */
#define EXPLAIN_DEPS_MAX 100

/* "1h02m", "20m05s", "45s" */
static const char *dur(double secs, char *buf, size_t len)
{
    long long s = secs > 0 ? (long long)(secs + 0.5) : 0;

    if (s >= 3600)
        snprintf(buf, len, "%lldh%02lldm", s / 3600, s / 60 % 60);
    else if (s >= 60)
        snprintf(buf, len, "%lldm%02llds", s / 60, s % 60);
    else
        snprintf(buf, len, "%llds", s);
    return buf;
}

/* Cut 's' back to its last whole character.  snprintf() cuts bytes: a
 * text cut inside a character (a long cordon's reason or failure reason
 * in UTF-8) is not UTF-8, and jansson refuses it, so the reason, or the
 * whole explanation, was lost. */
static void whole_chars(char *s)
{
    size_t n = strlen(s), i = n;

    while (i > 0 && ((unsigned char)s[i - 1] & 0xC0) == 0x80)
        i--;
    if (i > 0 && (unsigned char)s[i - 1] >= 0xC0) {
        unsigned char c = (unsigned char)s[i - 1];
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        if (n - (i - 1) < need)
            s[i - 1] = '\0';
    }
}

static void add_reason(json_t *reasons, const char *code, const char *fmt,
                       ...) __attribute__((format(printf, 3, 4)));

static void add_reason(json_t *reasons, const char *code, const char *fmt,
                       ...)
{
    char text[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    whole_chars(text);
    json_array_append_new(reasons, json_pack("{s:s, s:s}", "code", code,
                                             "text", text));
}

static const char *node_state(const struct pl_node *n)
{
    return n->state == PL_NODE_UP     ? "up"
           : n->state == PL_NODE_LOST ? "lost"
                                      : "gone";
}

/* "1 rank x 4 cores", "8 ranks x 2 cores and 1 GPU, on 2 nodes, whole
 * nodes" */
static void needs_text(const struct pl_dtask *t, char *buf, size_t len)
{
    int off = snprintf(buf, len, "%u rank%s x %u core%s", t->ranks,
                       t->ranks == 1 ? "" : "s", t->cores_per_rank,
                       t->cores_per_rank == 1 ? "" : "s");
    if (t->gpus_per_rank && off > 0 && (size_t)off < len)
        off += snprintf(buf + off, len - off, " and %u GPU%s",
                        t->gpus_per_rank, t->gpus_per_rank == 1 ? "" : "s");
    if (t->nodes_req && off > 0 && (size_t)off < len)
        off += snprintf(buf + off, len - off, ", on %u nodes", t->nodes_req);
    if (t->ranks_per_node && off > 0 && (size_t)off < len)
        off += snprintf(buf + off, len - off, ", %u per node",
                        t->ranks_per_node);
    if (t->exclusive && off > 0 && (size_t)off < len)
        snprintf(buf + off, len - off, ", whole nodes");
}

/* Whether the reservation the scheduler holds is live: a pass drops it
 * once its task has left the queue. */
static uint64_t live_resv(struct pl_sched *s)
{
    uint64_t id = pl_sched_reserved_for(s);
    struct pl_dtask *r = id ? pl_sched_task_get(s, id) : NULL;

    return r && r->inq ? id : 0;
}

/* One node's entry: what it has, the ranks of 't' it could take now
 * ('room'), and each reason it cannot take (more of) them. */
static json_t *node_entry(struct pl_sched *s, size_t k,
                          const struct pl_dtask *t, uint64_t resv)
{
    struct pl_node *n = pl_sched_node_at(s, k);
    uint32_t room = pl_sched_room(t, n, false);
    json_t *reasons = json_array();
    json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "name",
                          n->name, "state", node_state(n), "cores",
                          (json_int_t)n->ncores, "free_cores",
                          (json_int_t)n->free_cores, "gpus",
                          (json_int_t)n->ngpus, "free_gpus",
                          (json_int_t)n->free_gpus, "room",
                          (json_int_t)room);

    if (!o || !reasons) {
        json_decref(o);
        json_decref(reasons);
        return NULL;
    }
    if (n->state != PL_NODE_UP)
        add_reason(reasons, "down", "its agent is %s", node_state(n));
    else if (pl_sched_room(t, n, true) == 0)
        add_reason(reasons, "small", "too small even when idle: %u cores "
                   "and %u GPUs, a rank needs %u and %u", n->ncores,
                   n->ngpus, t->cores_per_rank, t->gpus_per_rank);
    else {
        if (n->cordon)
            add_reason(reasons, "cordoned", "cordoned: %s", n->cordon);
        if (t->vetted
            && !(n->vet_ok_time > 0
                 && pl_now() - n->vet_ok_time <= t->vetted * 60.0)) {
            if (n->vet_ok_time > 0)
                add_reason(reasons, "unvetted", "its last passed vetting "
                           "is %.0f min old; the task asks for one within "
                           "%u min (it is vetted again)",
                           (pl_now() - n->vet_ok_time) / 60.0, t->vetted);
            else
                add_reason(reasons, "unvetted", "no vetting of it has "
                           "passed; the task asks for --vetted");
        }
        if (t->exclusive
            && (n->free_cores != n->ncores || n->free_gpus != n->ngpus))
            add_reason(reasons, "exclusive", "not idle (%u of %u cores, %u "
                       "of %u GPUs busy): an exclusive task needs a whole "
                       "idle node", n->ncores - n->free_cores, n->ncores,
                       n->ngpus - n->free_gpus, n->ngpus);
        else if (n->free_cores < t->cores_per_rank)
            add_reason(reasons, "cores", "%u of %u cores free, a rank needs "
                       "%u", n->free_cores, n->ncores, t->cores_per_rank);
        else if (t->gpus_per_rank && n->free_gpus < t->gpus_per_rank)
            add_reason(reasons, "gpus", "%u of %u GPUs free, a rank needs "
                       "%u", n->free_gpus, n->ngpus, t->gpus_per_rank);
        if (resv && resv != t->id && pl_sched_node_reserved(s, k))
            add_reason(reasons, "reserved", "reserved for task %llu, which "
                       "waits for room there (against starvation)",
                       (unsigned long long)resv);
    }
    json_object_set_new(o, "reasons", reasons);
    return o;
}

/* "n1, n2" of the nodes reserved now, into 'buf'. */
static void reserved_names(struct pl_sched *s, char *buf, size_t len)
{
    size_t off = 0;

    buf[0] = '\0';
    for (size_t k = 0; k < pl_sched_nnodes(s) && off < len; k++)
        if (pl_sched_node_reserved(s, k))
            off += (size_t)snprintf(buf + off, len - off, "%s%s",
                                    off ? ", " : "",
                                    pl_sched_node_at(s, k)->name);
}

/* A queued task's case, into 'o': its code and summary. */
static void queued(struct pl_sched *s, const struct pl_dtask *t, json_t *o,
                   char *sum, size_t len, const char **code)
{
    double left = pl_sched_time_left(s);
    uint64_t resv = live_resv(s);
    char why[256], a[32], b[32], names[256];
    uint32_t room = 0, with_room = 0, up = 0, open = 0, closed = 0,
             vetting = 0;
    size_t noff = 0;
    json_t *nodes = json_array();

    names[0] = '\0';
    for (size_t k = 0; k < pl_sched_nnodes(s); k++) {
        struct pl_node *n = pl_sched_node_at(s, k);
        uint32_t r = pl_sched_room(t, n, false);
        /* the nodes large enough for it: open, or cordoned (named) */
        if (n->state == PL_NODE_UP && pl_sched_room(t, n, true) > 0) {
            if (!n->cordon)
                open++;
            else {
                closed++;
                /* daemon/vet.c's cordon until a first vetting's result */
                vetting += !strcmp(n->cordon, "vetting");
                if (noff < sizeof(names))
                    noff += (size_t)snprintf(names + noff,
                                             sizeof(names) - noff, "%s%s",
                                             noff ? ", " : "", n->name);
            }
        }
        if (resv && resv != t->id && pl_sched_node_reserved(s, k))
            r = 0;
        room += r;
        with_room += r > 0;
        up += n->state == PL_NODE_UP;
        json_array_append_new(nodes, node_entry(s, k, t, resv));
    }
    json_object_set_new(o, "nodes", nodes);
    if (pl_sched_nnodes(s) == 0 || up == 0) {
        *code = "nodes";
        snprintf(sum, len, "no node is up yet: it starts once an agent "
                 "joins");
    }
    else if (left > 0 && t->timeout > left) {
        *code = "walltime";
        snprintf(sum, len, "its timeout (%s) is longer than the walltime "
                 "left before the drain (%s): it waits for the next "
                 "allocation (pilot up --resume)",
                 dur(t->timeout, a, sizeof(a)), dur(left, b, sizeof(b)));
    }
    else if (!pl_sched_fits(s, t, why, sizeof(why))) {
        *code = "never";
        snprintf(sum, len, "it can never run on this pilot: %s", why);
    }
    else if (!open && closed) {
        /* not "first in line" nor "waits for room": nothing frees a
         * cordoned node but an uncordon (or a vetting that passes) */
        *code = "cordoned";
        if (vetting == closed)
            snprintf(sum, len, "every node it fits on is being vetted: %s; "
                     "it starts on one that passes", names);
        else
            snprintf(sum, len, "every node it fits on is cordoned: %s "
                     "(pilot uncordon NODE, or pilot vet NODE)", names);
    }
    else if (pl_sched_fits_now(s, t, true)) {
        *code = "next";
        snprintf(sum, len, "it fits now and starts on the next scheduling "
                 "pass");
    }
    else if (pl_sched_fits_now(s, t, false)) {
        *code = "reserved";
        reserved_names(s, names, sizeof(names));
        snprintf(sum, len, "it would fit on %s, reserved for task %llu "
                 "(against starvation): it waits until that task starts",
                 names, (unsigned long long)resv);
    }
    else if (resv == t->id) {
        *code = "holds";
        reserved_names(s, names, sizeof(names));
        needs_text(t, why, sizeof(why));
        snprintf(sum, len, "it is first in line: %s %s kept for it, "
                 "taking no other task until it starts (it needs %s)",
                 names, strchr(names, ',') ? "are" : "is", why);
    }
    else {
        *code = "room";
        needs_text(t, why, sizeof(why));
        if (t->ranks > 1 || t->nodes_req)
            snprintf(sum, len, "it waits for room: it needs %s; now %u "
                     "node%s can take %u rank%s in all", why, with_room,
                     with_room == 1 ? "" : "s", room, room == 1 ? "" : "s");
        else
            snprintf(sum, len, "it waits for room: no node can take %s now",
                     why);
    }
}

json_t *pl_explain_live(struct pl_sched *s, const struct pl_dtask *t)
{
    const char *code = "queued";
    char sum[768], needs[160];
    double left = pl_sched_time_left(s);
    uint64_t resv = live_resv(s);
    json_t *o;

    needs_text(t, needs, sizeof(needs));
    o = json_pack("{s:I, s:s, s:{s:I, s:I, s:I, s:I, s:I, s:b, s:f, s:s}, "
                  "s:o, s:o}",
                  "id", (json_int_t)t->id, "state", pl_state_name(t->state),
                  "needs", "ranks", (json_int_t)t->ranks, "cores_per_rank",
                  (json_int_t)t->cores_per_rank, "gpus_per_rank",
                  (json_int_t)t->gpus_per_rank, "nodes",
                  (json_int_t)t->nodes_req, "ranks_per_node",
                  (json_int_t)t->ranks_per_node, "exclusive", t->exclusive,
                  "timeout", t->timeout, "text", needs,
                  "reserved_for", resv ? json_integer((json_int_t)resv)
                                       : json_null(),
                  "walltime_left", left > 0 ? json_real(left) : json_null());
    if (!o)
        return NULL;
    sum[0] = '\0';
    if (t->state == PL_ST_WAITING) {
        json_t *deps = json_array();
        size_t off = 0, more = 0;
        code = "deps";
        for (uint32_t i = 0; i < t->ndeps_live; i++) {
            struct pl_dtask *d = pl_sched_task_get(s, t->deps[i]);
            if (!d)
                continue; /* it has ended */
            if (json_array_size(deps) >= EXPLAIN_DEPS_MAX) {
                more++;
                continue;
            }
            json_array_append_new(deps, json_pack(
                "{s:I, s:s}", "id", (json_int_t)d->id, "state",
                pl_state_name(d->state)));
            if (off < sizeof(sum))
                off += (size_t)snprintf(sum + off, sizeof(sum) - off,
                                        "%s%llu (%s)",
                                        off ? ", " : "it waits for task"
                                                     "s that have not "
                                                     "ended: ",
                                        (unsigned long long)d->id,
                                        pl_state_name(d->state));
        }
        if (!off)
            snprintf(sum, sizeof(sum), "it waits for %u dependenc%s to end",
                     t->ndeps, t->ndeps == 1 ? "y" : "ies");
        json_object_set_new(o, "deps", deps);
        json_object_set_new(o, "deps_more",
                            json_integer((json_int_t)more));
    }
    else if (t->state == PL_ST_QUEUED && t->pool && t->fn != PL_FN_POOL) {
        code = "pool";
        snprintf(sum, sizeof(sum), "it waits for a free worker of pool "
                 "'%s' (%u of %u busy, %u ready)", t->pool->name,
                 t->pool->nbusy, t->pool->nslots, t->pool->nready);
    }
    else if (t->state == PL_ST_QUEUED && t->inq) {
        json_object_set_new(o, "ahead",
                            json_integer((json_int_t)pl_sched_ahead(s, t)));
        queued(s, t, o, sum, sizeof(sum), &code);
    }
    else if (t->state == PL_ST_ASSIGNED && pl_dtask_held(t)) {
        /* held beyond the busy cores (daemon/prefetch.c) */
        code = "prefetched";
        snprintf(sum, sizeof(sum), "it is held by the agent on %s, which "
                 "starts it as soon as a task ends there (%u held there)",
                 t->nodelist ? t->nodelist : "?", t->rank[0].node->npref);
    }
    else if (t->state == PL_ST_ASSIGNED) {
        code = "assigned";
        snprintf(sum, sizeof(sum), "it is placed on %s and its agent%s "
                 "starting it", t->nodelist ? t->nodelist : "?",
                 t->nnodes > 1 ? "s are" : " is");
    }
    else if (t->state == PL_ST_RUNNING) {
        code = "running";
        snprintf(sum, sizeof(sum), "it runs on %s (%u rank%s)",
                 t->nodelist ? t->nodelist : "?", t->ranks,
                 t->ranks == 1 ? "" : "s");
    }
    else
        snprintf(sum, sizeof(sum), "it is %s", pl_state_name(t->state));
    json_object_set_new(o, "code", json_string(code));
    whole_chars(sum);
    json_object_set_new(o, "summary", json_string(sum));
    return o;
}

/* Number 'key' of 'o', or NAN. */
static double num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);

    return json_is_number(v) ? json_number_value(v) : NAN;
}

static const char *str(const json_t *o, const char *key)
{
    return json_string_value(json_object_get(o, key));
}

json_t *pl_explain_row(const json_t *task)
{
    const char *st = str(task, "state"), *node = str(task, "node");
    const char *nodes = str(task, "nodes"), *reason = str(task, "reason");
    double start = num(task, "start_time"), end = num(task, "end_time");
    double code_ = num(task, "exit_code"), sig = num(task, "signal");
    char sum[768], a[32];
    size_t off = 0;
    bool ended = st && pl_state_final(pl_state_parse(st));
    const char *where = nodes && *nodes ? nodes : node;

    if (!st)
        st = "unknown";
    if (!ended)
        off = (size_t)snprintf(sum, sizeof(sum), "it runs on %s",
                               where ? where : "?");
    else if (!where || isnan(start))
        off = (size_t)snprintf(sum, sizeof(sum), "it ended %s before it "
                               "started", st);
    else
        off = (size_t)snprintf(sum, sizeof(sum), "it ran on %s and ended "
                               "%s", where, st);
    if (ended && !isnan(code_) && code_ >= 0 && off < sizeof(sum))
        off += (size_t)snprintf(sum + off, sizeof(sum) - off, " (exit %d)",
                                (int)code_);
    if (ended && !isnan(sig) && sig > 0 && off < sizeof(sum))
        off += (size_t)snprintf(sum + off, sizeof(sum) - off,
                                " (signal %d)", (int)sig);
    if (!isnan(start) && off < sizeof(sum))
        off += (size_t)snprintf(sum + off, sizeof(sum) - off, "%s %s",
                                ended ? " after" : " for",
                                dur((ended && !isnan(end) ? end
                                                          : pl_now())
                                        - start, a, sizeof(a)));
    if (ended && reason && *reason && off < sizeof(sum))
        snprintf(sum + off, sizeof(sum) - off, ": %s", reason);
    whole_chars(sum);
    return json_pack("{s:O?, s:s, s:s, s:s, s:s?}", "id",
                     json_object_get(task, "id"), "state", st, "code",
                     ended ? "ended" : "running", "summary", sum, "where",
                     where);
}
