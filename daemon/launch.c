/* daemon/launch.c - the agents' srun step, its restarts, and single agents
 *
 * pilotd starts its agents as one `srun --overlap --ntasks-per-node=1`
 * step over the job's nodes (with --local, one pilot-agent child).  When
 * the step ends unexpectedly every agent is lost and the step starts
 * again after a pause, a few times; when one node's agent is lost while
 * the step lives, another agent is started on that node alone.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/child.h"
#include "daemon/daemon_private.h"
#include "proto/log.h"

#define RESTART_DELAY 5000     /* ms before restarting the agents' step */
#define MAX_RESTARTS 5
#define ORPHAN_TIMEOUT 600     /* s an agent outlives a silent pilotd */
#define NODE_RESTARTS 3        /* agents started on a node that lost its, */
#define NODE_WINDOW 30.0       /* within this many s: an agent that dies at
                                  once, again and again, is given up; one
                                  killed now and then is started again */

struct pl_node_launch {
    struct pl_child *child;
    char node[64];
    int starts;              /* within the window */
    double window;           /* pl_mono() of the window's first start */
};

bool pl_launch_running(const struct pl_daemon *d)
{
    return d->launch && pl_child_running(d->launch);
}

/* The srun command of agents on 'nodelist' ('count' nodes), or on the
 * job's nodes if NULL, into argv[] (room for 48); its formatted strings
 * go to 'bufs' (buflen >= 512 + the paths).  0, or -1: too long. */
static int agent_argv(struct pl_daemon *d, const char *nodelist, int count,
                      const char **argv, char *bufs, size_t buflen)
{
    const char *cpn = getenv("SLURM_CPUS_ON_NODE");
    const char *gpn = getenv("SLURM_GPUS_ON_NODE");
    int want = nodelist ? count : d->cfg.expected_agents;
    size_t off = 0;
    int n = 0;

    /* each formatted argument is one more string in 'bufs' */
#define FMT(...)                                                             \
    do {                                                                     \
        int w_ = snprintf(bufs + off, buflen - off, __VA_ARGS__);            \
        if (w_ < 0 || (size_t)w_ >= buflen - off)                            \
            return -1;                                                       \
        argv[n++] = bufs + off;                                              \
        off += (size_t)w_ + 1;                                               \
    } while (0)
    argv[n++] = "srun";
    argv[n++] = "--overlap";
    FMT("--nodes=%d", want);
    FMT("--ntasks=%d", want);
    argv[n++] = "--ntasks-per-node=1";
    argv[n++] = "--kill-on-bad-exit=0";
    argv[n++] = "--cpu-bind=none";
    argv[n++] = "--mem=0";
    argv[n++] = "--job-name=pilot-agents";
    if (nodelist) {
        argv[n++] = "--nodelist";
        argv[n++] = nodelist;
    }
    /* the agent's affinity mask must cover the whole node */
    if (cpn && atoi(cpn) > 0)
        FMT("--cpus-per-task=%d", atoi(cpn));
    if (gpn && atoi(gpn) > 0)
        FMT("--gres=gpu:%d", atoi(gpn));
    FMT("%s/pilot-agent", d->bindir);
    argv[n++] = "--connect";
    argv[n++] = d->aep;
    /* agents outlive a pilotd that dies and follow the next */
    argv[n++] = "--dir";
    argv[n++] = d->dir;
    argv[n++] = "--orphan-timeout";
    FMT("%d", ORPHAN_TIMEOUT);
    /* the pilot directory is on a filesystem every node sees */
    argv[n++] = "--keys";
    argv[n++] = d->keydir;
    argv[n] = NULL;
#undef FMT
    return 0;
}

static void restart_cb(uv_timer_t *h)
{
    struct pl_daemon *d = h->data;
    struct pl_error err;

    if (d->stopping)
        return;
    if (pl_launch_agents(d, NULL, 0, &err) < 0)
        pl_log(LOG_ERR, "restart agents: %s", err.text);
}

static void launch_exit_cb(struct pl_child *c, int64_t status, int signum,
                           void *arg)
{
    struct pl_daemon *d = arg;
    (void)c;

    if (d->stopping) {
        pl_log(LOG_NOTICE, "agents' process ended (status %lld, signal %d)",
               (long long)status, signum);
        /* nothing to wait for any more */
        pl_daemon_stop(d, NULL);
        return;
    }
    pl_log(LOG_WARNING, "agents' process ended unexpectedly (status %lld, "
           "signal %d)", (long long)status, signum);
    for (size_t k = 0; k < pl_sched_nnodes(d->sched); k++) {
        struct pl_node *n = pl_sched_node_at(d->sched, k);
        if (n->state == PL_NODE_UP)
            pl_agents_lost(d, n, "agents' process ended");
    }
    pl_daemon_flush(d);
    if (d->restarts++ < MAX_RESTARTS) {
        pl_log(LOG_NOTICE, "restarting the agents in %d s (%d of %d)",
               RESTART_DELAY / 1000, d->restarts, MAX_RESTARTS);
        uv_timer_start(&d->restart_timer, restart_cb, RESTART_DELAY, 0);
    }
    else
        pl_log(LOG_ERR, "agents failed %d times; not restarting them",
               d->restarts);
}

int pl_launch_agents(struct pl_daemon *d, const char *nodelist, int count,
                     struct pl_error *errp)
{
    char agent[PL_PATH_MAX + 32], logpath[PL_PATH_MAX + 64];
    char bufs[PL_PATH_MAX + 512];
    const char *argv[48];
    int n = 0;

    snprintf(agent, sizeof(agent), "%s/pilot-agent", d->bindir);
    if (d->cfg.local && d->cfg.no_agent)
        return 0;
    if (!d->launch) {
        if (d->cfg.local) {
            snprintf(logpath, sizeof(logpath), "%s/logs/agent-local.log",
                     d->dir);
            argv[n++] = agent;
            argv[n++] = "--local";
            argv[n++] = "--connect";
            argv[n++] = d->aep;
            argv[n++] = "--keys";
            argv[n++] = d->keydir;
            if (d->cfg.agent_cores) {
                argv[n++] = "--cores";
                argv[n++] = d->cfg.agent_cores;
            }
            argv[n] = NULL;
        }
        else {
            snprintf(logpath, sizeof(logpath), "%s/logs/srun-agents.log",
                     d->dir);
            if (agent_argv(d, nodelist, count, argv, bufs, sizeof(bufs))
                < 0)
                return pl_errprintf(errp, "agents' command too long");
        }
        if (!(d->launch = pl_child_new(d->loop, (char *const *)argv, logpath,
                                       launch_exit_cb, d, errp)))
            return -1;
    }
    return pl_child_start(d->launch, errp);
}

static void node_exit_cb(struct pl_child *c, int64_t status, int signum,
                         void *arg)
{
    struct pl_node_launch *nl = arg;
    (void)c;

    pl_log(LOG_NOTICE, "agent step on %s ended (status %lld, signal %d)",
           nl->node, (long long)status, signum);
}

/* The record of agents started on node 'name', made if needed (NULL:
 * out of memory). */
static struct pl_node_launch *node_launch(struct pl_daemon *d,
                                          const char *name)
{
    struct pl_node_launch *nl, **v;

    for (size_t i = 0; i < d->nnode_launch; i++)
        if (!strcmp(d->node_launch[i]->node, name))
            return d->node_launch[i];
    if (!(v = realloc(d->node_launch, (d->nnode_launch + 1) * sizeof(*v))))
        return NULL;
    d->node_launch = v;
    if (!(nl = calloc(1, sizeof(*nl))))
        return NULL;
    d->node_launch[d->nnode_launch++] = nl;
    snprintf(nl->node, sizeof(nl->node), "%s", name);
    return nl;
}

void pl_launch_node(struct pl_daemon *d, const struct pl_node *n)
{
    struct pl_node_launch *nl;
    struct pl_error err = { .text = "agent's command too long" };
    const char *argv[48];
    char bufs[PL_PATH_MAX + 512], logpath[PL_PATH_MAX + 96];

    /* if the old agent was only cut off, it is told to exit when it
     * comes back (pl_agents_cb) */
    if (d->cfg.local || d->stopping)
        return;
    /* a grown allocation's node is not in our job: srun cannot reach it,
     * and its own job's end takes its agent (daemon/alloc.c) */
    if (pl_alloc_of_node(d, n->name)) {
        pl_log(LOG_NOTICE, "not starting another agent on %s: it is in "
               "allocation %llu, not in this job", n->name,
               (unsigned long long)pl_alloc_of_node(d, n->name));
        return;
    }
    if (!(nl = node_launch(d, n->name))) {
        pl_log(LOG_ERR, "restart agent on %s: out of memory", n->name);
        return;
    }
    if (nl->child && pl_child_running(nl->child))
        return;
    if (pl_mono() - nl->window > NODE_WINDOW) {
        nl->window = pl_mono();
        nl->starts = 0;
    }
    if (nl->starts >= NODE_RESTARTS) {
        pl_log(LOG_WARNING, "not starting another agent on %s: %d started "
               "in the last %.0f s died", n->name, nl->starts,
               pl_mono() - nl->window);
        return;
    }
    pl_child_free(nl->child);
    nl->child = NULL;
    nl->starts++;
    snprintf(logpath, sizeof(logpath), "%s/logs/srun-agent-%s.log", d->dir,
             n->name);
    if (agent_argv(d, n->name, 1, argv, bufs, sizeof(bufs)) < 0
        || !(nl->child = pl_child_new(d->loop, (char *const *)argv, logpath,
                                      node_exit_cb, nl, &err))
        || pl_child_start(nl->child, &err) < 0) {
        pl_log(LOG_ERR, "restart agent on %s: %s", n->name, err.text);
        return;
    }
    pl_log(LOG_NOTICE, "started another agent on %s (%d of %d in %.0f s)",
           n->name, nl->starts, NODE_RESTARTS, NODE_WINDOW);
}

void pl_launch_free_all(struct pl_daemon *d)
{
    pl_child_free(d->launch);
    d->launch = NULL;
    for (size_t i = 0; i < d->nnode_launch; i++) {
        pl_child_free(d->node_launch[i]->child);
        free(d->node_launch[i]);
    }
    free(d->node_launch);
    d->node_launch = NULL;
    d->nnode_launch = 0;
}
