/* daemon/node.c - one agent's node: its cores and GPUs, and who holds them */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/node.h"
#include "daemon/placeidx.h"
#include "proto/msg.h"
#include "proto/strv.h"

struct pl_node *pl_node_new(const char *name, const uint64_t *cpu,
                            uint32_t ncpu, char *const *gpus)
{
    struct pl_node *n;

    if (!(n = calloc(1, sizeof(*n))))
        return NULL;
    snprintf(n->name, sizeof(n->name), "%s", name);
    n->ncores = ncpu;
    n->ngpus = (uint32_t)pl_strv_len(gpus);
    if (!(n->cpu = calloc(ncpu + 1, sizeof(*n->cpu)))
        || !(n->core_task = calloc(ncpu + 1, sizeof(*n->core_task)))
        || !(n->gpu_task = calloc(n->ngpus + 1, sizeof(*n->gpu_task)))
        || !(n->gpu = gpus ? pl_strv_dup(gpus) : calloc(1, sizeof(char *))))
        goto error;
    if (ncpu)
        memcpy(n->cpu, cpu, ncpu * sizeof(*cpu));
    n->free_cores = ncpu;
    n->free_gpus = n->ngpus;
    n->state = PL_NODE_UP;
    TAILQ_INIT(&n->pref);
    return n;
error:
    pl_node_free(n);
    errno = ENOMEM;
    return NULL;
}

void pl_node_changed(struct pl_node *n)
{
    if (n->pidx)
        pl_placeidx_update(n->pidx, n);
}

void pl_node_set_state(struct pl_node *n, int state)
{
    n->state = state;
    pl_node_changed(n);
}

uint32_t pl_node_port_take(struct pl_node *n, uint64_t hint)
{
    for (uint32_t k = 0; k < PL_NODE_PORTS; k++) {
        uint32_t i = (uint32_t)((hint + k) % PL_NODE_PORTS);
        uint64_t bit = UINT64_C(1) << (i % 64);
        if (!(n->ports[i / 64] & bit)) {
            n->ports[i / 64] |= bit;
            return PL_NODE_PORT_BASE + i;
        }
    }
    return 0;
}

void pl_node_port_free(struct pl_node *n, uint32_t port)
{
    if (port < PL_NODE_PORT_BASE || port >= PL_NODE_PORT_BASE + PL_NODE_PORTS)
        return;
    uint32_t i = port - PL_NODE_PORT_BASE;
    n->ports[i / 64] &= ~(UINT64_C(1) << (i % 64));
}

void pl_node_free(struct pl_node *n)
{
    if (!n)
        return;
    int saved = errno;
    free(n->cordon);
    free(n->vet_json);
    free(n->cpu);
    free(n->core_task);
    free(n->gpu_task);
    pl_strv_free(n->gpu);
    free(n);
    errno = saved;
}

int pl_node_alloc(struct pl_node *n, uint64_t id, uint32_t ncores,
                  uint32_t ngpus, uint32_t *core_idx, uint32_t *gpu_idx)
{
    uint32_t k = 0;

    if (ncores > n->free_cores || ngpus > n->free_gpus) {
        errno = EAGAIN;
        return -1;
    }
    for (uint32_t i = 0; i < n->ncores && k < ncores; i++)
        if (!n->core_task[i])
            core_idx[k++] = i;
    k = 0;
    for (uint32_t j = 0; j < n->ngpus && k < ngpus; j++) {
        uint32_t i = (n->gpu_next + j) % n->ngpus;
        if (!n->gpu_task[i])
            gpu_idx[k++] = i;
    }
    if (ngpus && n->ngpus)
        n->gpu_next = (gpu_idx[ngpus - 1] + 1) % n->ngpus;
    for (uint32_t i = 0; i < ncores; i++)
        n->core_task[core_idx[i]] = id;
    for (uint32_t i = 0; i < ngpus; i++)
        n->gpu_task[gpu_idx[i]] = id;
    n->free_cores -= ncores;
    n->free_gpus -= ngpus;
    n->running++;
    pl_node_changed(n);
    return 0;
}

/* The entries of the comma list 'list', each looked up with 'find'
 * (index or -1); found and free ones go to idx[] (room for all). */
static uint32_t claim_list(const char *list, uint32_t *idx,
                           long (*find)(const struct pl_node *, const char *,
                                        size_t),
                           const struct pl_node *n)
{
    uint32_t k = 0;

    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ",");
        long i = len ? find(n, p, len) : -1;
        if (i >= 0)
            idx[k++] = (uint32_t)i;
        p += len + (p[len] == ',');
    }
    return k;
}

static long find_cpu(const struct pl_node *n, const char *s, size_t len)
{
    char buf[24];
    char *end;

    if (len >= sizeof(buf))
        return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    unsigned long long v = strtoull(buf, &end, 10);
    if (*end || end == buf)
        return -1;
    for (uint32_t i = 0; i < n->ncores; i++)
        if (n->cpu[i] == v && !n->core_task[i])
            return (long)i;
    return -1;
}

static long find_gpu(const struct pl_node *n, const char *s, size_t len)
{
    for (uint32_t i = 0; i < n->ngpus; i++)
        if (strlen(n->gpu[i]) == len && !strncmp(n->gpu[i], s, len)
            && !n->gpu_task[i])
            return (long)i;
    return -1;
}

static uint32_t list_len(const char *list)
{
    uint32_t k = list && *list ? 1 : 0;

    for (const char *p = list; p && *p; p++)
        k += *p == ',';
    return k;
}

int pl_node_claim(struct pl_node *n, uint64_t id, const char *cpus,
                  const char *gpus, uint32_t **core_idx, uint32_t *ncores,
                  uint32_t **gpu_idx, uint32_t *ngpus)
{
    uint32_t *c = calloc(list_len(cpus) + 1, sizeof(*c));
    uint32_t *g = calloc(list_len(gpus) + 1, sizeof(*g));

    if (!c || !g) {
        free(c);
        free(g);
        errno = ENOMEM;
        return -1;
    }
    *ncores = claim_list(cpus, c, find_cpu, n);
    *ngpus = claim_list(gpus, g, find_gpu, n);
    for (uint32_t i = 0; i < *ncores; i++)
        n->core_task[c[i]] = id;
    for (uint32_t i = 0; i < *ngpus; i++)
        n->gpu_task[g[i]] = id;
    n->free_cores -= *ncores;
    n->free_gpus -= *ngpus;
    n->running++;
    pl_node_changed(n);
    *core_idx = c;
    *gpu_idx = g;
    return 0;
}

void pl_node_release(struct pl_node *n, uint64_t id, const uint32_t *core_idx,
                     uint32_t ncores, const uint32_t *gpu_idx, uint32_t ngpus)
{
    bool held = false;

    for (uint32_t i = 0; i < ncores; i++) {
        if (core_idx[i] < n->ncores && n->core_task[core_idx[i]] == id) {
            n->core_task[core_idx[i]] = 0;
            n->free_cores++;
            held = true;
        }
    }
    for (uint32_t i = 0; i < ngpus; i++) {
        if (gpu_idx[i] < n->ngpus && n->gpu_task[gpu_idx[i]] == id) {
            n->gpu_task[gpu_idx[i]] = 0;
            n->free_gpus++;
            held = true;
        }
    }
    if (held && n->running > 0)
        n->running--;
    if (held)
        pl_node_changed(n);
}

void pl_node_cpu_str(const struct pl_node *n, const uint32_t *idx, uint32_t k,
                     char *buf, size_t len)
{
    size_t off = 0;

    /* N.B. not snprintf(): this runs twice for every task (its assigned
     * and its running rows), at 1-2k instructions a call */
    buf[0] = '\0';
    for (uint32_t i = 0; i < k; i++) {
        size_t at = off;

        if ((i && !pl_put_s(buf, len, &off, ",", 1))
            || !pl_put_u(buf, len, &off, (unsigned long long)n->cpu[idx[i]])) {
            buf[at] = '\0'; /* cut at a whole number, as the list's end */
            break;
        }
    }
}

void pl_node_gpu_str(const struct pl_node *n, const uint32_t *idx, uint32_t k,
                     char *buf, size_t len)
{
    size_t off = 0;

    buf[0] = '\0';
    for (uint32_t i = 0; i < k && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? "," : "",
                                n->gpu[idx[i]]);
}
