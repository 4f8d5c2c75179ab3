/* tests/unit/test_daemon_alloc.c - pilot grow's sizing of allocations
 * from the queue's shape, its back-off after failures, and the
 * settings and time limits it reads */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "daemon/alloc.h"
#include "proto/allocmsg.h"
#include "tests/unit/tap.h"

/* 4 cores and 4 GPUs a node, as the dev cluster's */
static struct pl_alloc_have have(uint32_t nodes, uint32_t pending,
                                 uint32_t held)
{
    return (struct pl_alloc_have){ .nodes = nodes, .pending = pending,
                                   .held = held, .cores = 4, .gpus = 4 };
}

static struct pl_grow_conf conf(uint32_t max, uint32_t nodes)
{
    struct pl_grow_conf c = { .max = max, .nodes = nodes, .pending = 1 };
    return c;
}

static void task_nodes(void)
{
    struct pl_alloc_want w = { .ranks = 1, .cores = 1 };

    is(pl_alloc_task_nodes(&w, 4, 4), 1, "one rank: one node");
    w.ranks = 8;
    is(pl_alloc_task_nodes(&w, 4, 4), 2, "8 ranks of a core: 2 nodes");
    w = (struct pl_alloc_want){ .ranks = 4, .cores = 1, .nodes_req = 4 };
    is(pl_alloc_task_nodes(&w, 4, 4), 4, "--nodes 4: 4 nodes");
    w = (struct pl_alloc_want){ .ranks = 20, .cores = 1, .nodes_req = 4 };
    is(pl_alloc_task_nodes(&w, 4, 4), 0,
       "20 ranks on exactly 4 nodes of 4 cores: no such nodes run it");
    w = (struct pl_alloc_want){ .ranks = 3, .cores = 1, .gpus = 2 };
    is(pl_alloc_task_nodes(&w, 4, 4), 2, "3 ranks of 2 GPUs: 2 nodes");
    w = (struct pl_alloc_want){ .ranks = 1, .cores = 8 };
    is(pl_alloc_task_nodes(&w, 4, 4), 0, "a rank of 8 cores: never");
    w = (struct pl_alloc_want){ .ranks = 4, .cores = 1, .rpn = 1 };
    is(pl_alloc_task_nodes(&w, 4, 4), 4, "--ranks-per-node 1: 4 nodes");
    w = (struct pl_alloc_want){ .ranks = 1, .cores = 1, .gpus = 1 };
    is(pl_alloc_task_nodes(&w, 4, 0), 0, "a GPU task on nodes without");
}

static void size(void)
{
    struct pl_alloc_want gang[3], small[6], gpu[3], big = { .ranks = 1,
                                                             .cores = 8 };
    struct pl_alloc_have h;
    struct pl_grow_conf c = conf(3, 0);

    for (int i = 0; i < 3; i++)
        gang[i] = (struct pl_alloc_want){ .ranks = 4, .cores = 1,
                                          .nodes_req = 4 };
    h = have(1, 0, 0);
    is(pl_alloc_size(gang, 3, &h, &c), 3,
       "1 node, 4-node tasks queued, max 3: ask 3");
    h = have(1, 3, 3);
    is(pl_alloc_size(gang, 3, &h, &c), 0, "... not again while pending");
    h = have(4, 0, 3);
    is(pl_alloc_size(gang, 3, &h, &c), 0, "... nor at max");
    c = conf(10, 0);
    h = have(2, 0, 1);
    is(pl_alloc_size(gang, 3, &h, &c), 2,
       "2 nodes (1 grown): a 4-node gang lacks 2");
    c = conf(2, 0);
    h = have(1, 0, 0);
    is(pl_alloc_size(gang, 3, &h, &c), 2,
       "max 2: ask 2 even though the gang lacks 3");
    c = conf(3, 0);
    is(pl_alloc_size(&big, 1, &h, &c), 0,
       "a task no node runs: growing does not help");
    for (int i = 0; i < 6; i++)
        small[i] = (struct pl_alloc_want){ .ranks = 1, .cores = 2 };
    c = conf(10, 0);
    h = have(1, 0, 0);
    is(pl_alloc_size(small, 6, &h, &c), 3,
       "6 waiting tasks of 2 cores on 4-core nodes: 3 nodes");
    {
        /* a compact run of an array stands for its elements */
        struct pl_alloc_want run = { .ranks = 1, .cores = 2, .count = 6 };
        is(pl_alloc_size(&run, 1, &h, &c), 3,
           "a run of 6 elements of 2 cores on 4-core nodes: 3 nodes");
        run.count = 0;
        is(pl_alloc_size(&run, 1, &h, &c), 1, "... a count of 0 is 1");
    }
    h = have(1, 2, 2);
    is(pl_alloc_size(small, 6, &h, &c), 0,
       "... none while an allocation is pending");
    is(pl_alloc_size(small, 1, &(struct pl_alloc_have){ .nodes = 1,
                                                        .cores = 4 },
                     &c), 1, "one waiting task of 2 cores: 1 node");
    c = conf(10, 2);
    h = have(1, 0, 0);
    is(pl_alloc_size(small, 1, &h, &c), 2, "nodes=2: 2 each time");
    h = have(1, 0, 9);
    is(pl_alloc_size(small, 6, &h, &c), 1, "... capped by max");
    c = conf(10, 0);
    for (int i = 0; i < 3; i++)
        gpu[i] = (struct pl_alloc_want){ .ranks = 1, .cores = 1, .gpus = 4 };
    h = have(1, 0, 0);
    is(pl_alloc_size(gpu, 3, &h, &c), 3,
       "3 tasks of 4 GPUs (the cores would fit one node): 3 nodes");
    h = (struct pl_alloc_have){ 0 };
    is(pl_alloc_size(small, 6, &h, &c), 0,
       "no node known yet: no shape to size from");
    is(pl_alloc_size(NULL, 0, &(struct pl_alloc_have){ .nodes = 1,
                                                       .cores = 4 },
                     &c), 0, "an empty queue asks nothing");
}

static void backoff(void)
{
    is(pl_alloc_backoff(0), 0, "no failure: no wait");
    is(pl_alloc_backoff(1), 10, "1 failure: 10 s");
    is(pl_alloc_backoff(2), 20, "2: 20 s");
    is(pl_alloc_backoff(4), 80, "4: 80 s");
    is(pl_alloc_backoff(7), 600, "7: capped at 600 s");
    is(pl_alloc_backoff(1000), 600, "1000: still 600 s");
}

static void settings(void)
{
    struct pl_grow_conf c;
    struct pl_error err;

    ok(pl_grow_conf_parse("max=3,idle=1m", &c, &err) == 0
           && c.max == 3 && c.idle == 60 && c.pending == 1 && c.nodes == 0
           && c.drain == PL_GROW_DRAIN,
       "max=3,idle=1m: max 3, idle 60 s, 1 pending, nodes from the queue");
    ok(pl_grow_conf_parse("max=4,nodes=2,time=1:00:00,partition=debug,"
                          "pending=2,drain=90s", &c, &err) == 0
           && c.nodes == 2 && !strcmp(c.time, "1:00:00")
           && !strcmp(c.partition, "debug") && c.pending == 2
           && c.drain == 90,
       "every key");
    ok(pl_grow_conf_parse("max=2,nodes=5", &c, &err) == 0 && c.nodes == 2,
       "nodes above max: max");
    ok(pl_grow_conf_parse("idle=5m", &c, &err) < 0 && errno == EINVAL
           && strstr(err.text, "no max=K"), "max is required, and named");
    ok(pl_grow_conf_parse("max=0", &c, &err) < 0
           && !strcmp(err.text, "--grow: max='0': want a number of nodes "
                      "from 1 to 100000"), "max=0 is refused: %s", err.text);
    ok(pl_grow_conf_parse("max=2,time=1;rm", &c, &err) < 0
           && strstr(err.text, "time='1;rm': want a Slurm time limit"),
       "a time a shell would read is refused, the piece named");
    ok(pl_grow_conf_parse("max=2,idle=5x", &c, &err) < 0
           && strstr(err.text, "idle='5x': want a duration"),
       "idle=5x: %s", err.text);
    ok(pl_grow_conf_parse("max=2,idle", &c, &err) < 0
           && strstr(err.text, "'idle' is not KEY=VALUE"), "idle without =");
    errno = 0;
    ok(pl_grow_conf_parse("max=2", &c, &err) == 0 && errno == 0,
       "errno untouched when it parses");
    ok(pl_grow_conf_parse("max=2,size=3", &c, &err) < 0
           && strstr(err.text, "no key 'size'") && strstr(err.text, "max=K"),
       "an unknown key, named, with the usage");
    is(pl_alloc_time_secs("30"), 1800, "time 30: minutes");
    is(pl_alloc_time_secs("1:30"), 90, "1:30: M:S");
    is(pl_alloc_time_secs("2:00:00"), 7200, "2:00:00: H:M:S");
    is(pl_alloc_time_secs("1-2"), 93600, "1-2: D-H");
    is(pl_alloc_time_secs("1-0:30"), 88200, "1-0:30: D-H:M");
    is(pl_alloc_time_secs("1:2:3:4"), -1, "four fields: no");
    ok(!pl_alloc_time_ok("0") && !pl_alloc_time_ok("") && pl_alloc_time_ok("2"),
       "time 0 and '' are refused, 2 is fine");
    ok(pl_alloc_part_ok("gpu-a100_x.1") && !pl_alloc_part_ok("a b")
           && !pl_alloc_part_ok("$(x)"), "partition names");
}

int main(void)
{
    plan(8 + 16 + 6 + 18);
    task_nodes();
    size();
    backoff();
    settings();
    return done_testing();
}
