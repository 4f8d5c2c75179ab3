/* tests/unit/test_agent_prefetch.c - the agent's prefetched entries and
 * the cores one flush's ends freed (agent/prefetch.c) */
#include <stdlib.h>
#include <string.h>

#include "agent/prefetch.h"
#include "tests/unit/tap.h"

/* A decoded-like entry of task 'id' taking 'cores' cores, owning a copy
 * of its strings. */
static struct pl_run entry(uint64_t id, uint32_t cores)
{
    struct pl_run r = { .id = id, .attempt = 1, .size = 1,
                        .prefetch = cores };

    r.argv = calloc(2, sizeof(*r.argv));
    r.argv[0] = strdup("true");
    r.out = strdup("/tmp/out");
    r.err = strdup("/tmp/err");
    return r;
}

static void test_fifo(void)
{
    struct pl_prefetch *p = pl_prefetch_new();
    struct pl_run r, got;

    ok(p != NULL, "new");
    for (uint64_t id = 1; id <= 3; id++) {
        r = entry(id, id == 2 ? 2 : 1);
        ok(pl_prefetch_add(p, &r) == 0 && r.argv == NULL, "hold entry %llu "
           "(its contents move in)", (unsigned long long)id);
        pl_run_clear(&r);
    }
    is(pl_prefetch_len(p), 3, "3 held");
    ok(pl_prefetch_holds(p, 2, 1, 0) && !pl_prefetch_holds(p, 2, 2, 0)
           && !pl_prefetch_holds(p, 2, 1, 1) && !pl_prefetch_holds(p, 4, 1, 0),
       "holds: by id, attempt and rank");
    ok(!pl_prefetch_next(p, &got), "no core freed: nothing starts");

    uint64_t c1[] = { 7 };
    ok(pl_prefetch_freed(p, c1, 1) == 0, "an end frees core 7");
    ok(pl_prefetch_next(p, &got) && got.id == 1 && got.ncores == 1
           && got.cores[0] == 7 && got.prefetch == 1,
       "task 1 (the first) takes core 7");
    pl_run_clear(&got);
    ok(!pl_prefetch_next(p, &got), "task 2 needs 2 cores: it waits");
    uint64_t c2[] = { 3 };
    pl_prefetch_freed(p, c2, 1);
    ok(!pl_prefetch_next(p, &got), "... one freed is not enough");
    uint64_t c3[] = { 4 };
    pl_prefetch_freed(p, c3, 1);
    ok(pl_prefetch_next(p, &got) && got.id == 2 && got.ncores == 2
           && ((got.cores[0] == 3 && got.cores[1] == 4)
               || (got.cores[0] == 4 && got.cores[1] == 3)),
       "two freed: task 2 takes cores 3 and 4");
    ok(pl_prefetch_unget(p, &got) == 0 && got.argv == NULL
           && pl_prefetch_len(p) == 2 && pl_prefetch_holds(p, 2, 1, 0),
       "put back (its cores could not be claimed): first again");
    pl_prefetch_reset(p);
    ok(!pl_prefetch_next(p, &got), "after the flush the freed cores are "
       "pilotd's: nothing starts");

    ok(pl_prefetch_take(p, 3, 1, true, 0, &got) && got.id == 3
           && pl_prefetch_len(p) == 1,
       "take task 3 out (a KILL, or its RUN with cores)");
    pl_run_clear(&got);
    ok(!pl_prefetch_take(p, 3, 1, false, 0, &got), "... once");
    ok(pl_prefetch_take(p, 2, 1, false, 0, &got) && got.id == 2,
       "take any rank of attempt 1 of task 2");
    pl_run_clear(&got);
    is(pl_prefetch_len(p), 0, "none left");
    ok(pl_prefetch_freed(p, c1, 1) == 0 && !pl_prefetch_next(p, &got),
       "freed cores with nothing held are not kept");

    r = entry(9, 1);
    pl_prefetch_add(p, &r);
    pl_prefetch_clear(p);
    ok(pl_prefetch_len(p) == 0, "clear (another pilotd) forgets them");
    r = entry(10, 1);
    pl_prefetch_add(p, &r);
    pl_prefetch_free(p); /* frees what it holds */
    pl_prefetch_free(NULL);
    ok(1, "free, with an entry held, and of NULL");
}

int main(void)
{
    plan(21);
    test_fifo();
    return done_testing();
}
