/* tests/unit/test_agent_resources.c - agent resources, lists and env */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/env.h"
#include "agent/resources.h"
#include "proto/log.h"
#include "proto/msg.h"
#include "tests/unit/tap.h"

static const char *cpus(const char *s)
{
    static char buf[256];
    uint64_t *v = NULL;
    uint32_t n = 0;

    if (pl_cpulist_parse(s, &v, &n, NULL) < 0)
        return "error";
    pl_idlist_format(buf, sizeof(buf), v, n);
    free(v);
    return buf;
}

static void test_cpulist(void)
{
    struct pl_error err;
    uint64_t *v = NULL;
    uint32_t n = 99;

    is_str(cpus("0,1,2"), "0,1,2", "cpulist: plain list");
    is_str(cpus("4-7,0"), "0,4,5,6,7", "cpulist: range, sorted");
    is_str(cpus("3,1-3,1"), "1,2,3", "cpulist: duplicates merged");
    is_str(cpus("1023"), "1023", "cpulist: highest id");
    ok(pl_cpulist_parse("", &v, &n, NULL) == 0 && n == 0,
       "cpulist: empty string is an empty list");
    free(v);
    const char *bad[] = { "1024", "0-", "-1", "3-1", "0,", ",0", "a", "0,,1",
                          "1 2", "0x1", NULL };
    for (int i = 0; bad[i]; i++) {
        errno = 0;
        ok(pl_cpulist_parse(bad[i], &v, &n, &err) < 0 && errno == EINVAL,
           "cpulist: '%s' refused (%s)", bad[i], err.text);
    }
}

static void test_idlist(void)
{
    char **v;
    char buf[16];
    uint64_t ids[] = { 10, 11, 12, 13, 14, 15 };

    v = pl_idlist_split("0,1,GPU-ab");
    ok(v && pl_strv_len(v) == 3 && !strcmp(v[2], "GPU-ab"),
       "idlist: three entries");
    pl_strv_free(v);
    v = pl_idlist_split(",2,,3,");
    ok(v && pl_strv_len(v) == 2 && !strcmp(v[0], "2") && !strcmp(v[1], "3"),
       "idlist: empty entries skipped");
    pl_strv_free(v);
    v = pl_idlist_split(NULL);
    ok(v && pl_strv_len(v) == 0, "idlist: NULL is empty");
    pl_strv_free(v);
    is_str(pl_idlist_format(buf, sizeof(buf), ids, 2), "10,11",
           "idlist: format");
    is_str(pl_idlist_format(buf, sizeof(buf), ids, 6), "10,11,12,13,...",
           "idlist: format cut with '...'");
    is_str(pl_idlist_format(buf, sizeof(buf), ids, 0), "",
           "idlist: format of nothing");
}

/* The GPUs found for the given variables, as "ids/visible". */
static const char *gpus(const char *step, const char *job, const char *cvd)
{
    static char buf[256];
    struct pl_resources_spec spec = { .node = "n1", .cores = "0",
                                      .step_gpus = step, .job_gpus = job,
                                      .cuda_visible = cvd };
    struct pl_resources *r = pl_resources_new(&spec, NULL);
    size_t off = 0;

    if (!r)
        return "error";
    buf[0] = '\0';
    for (size_t i = 0; i < pl_resources_ngpus(r); i++)
        off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s%s",
                                i ? "," : "", pl_resources_gpu_id(r, i));
    off += (size_t)snprintf(buf + off, sizeof(buf) - off, "/");
    for (size_t i = 0; i < pl_resources_ngpus(r); i++)
        off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s%s",
                                i ? "," : "", pl_resources_gpu_visible(r, i));
    ok(pl_strv_len(pl_resources_gpu_ids(r)) == pl_resources_ngpus(r),
       "gpus: id vector has ngpus entries");
    pl_resources_free(r);
    return buf;
}

static void test_gpus(void)
{
    is_str(gpus(NULL, NULL, NULL), "/", "gpus: none");
    is_str(gpus("2,3", NULL, "0,1"), "2,3/0,1",
           "gpus: step ids, renumbered CUDA_VISIBLE_DEVICES");
    is_str(gpus("2,3", "0,1,2,3", "2,3"), "2,3/2,3",
           "gpus: step ids win over job ids");
    is_str(gpus(NULL, "0,1,2,3", "0,1,2,3"), "0,1,2,3/0,1,2,3",
           "gpus: job ids");
    is_str(gpus("", "1", "0"), "1/0", "gpus: empty step ids: job ids");
    is_str(gpus(NULL, NULL, "GPU-aa,GPU-bb"), "GPU-aa,GPU-bb/GPU-aa,GPU-bb",
           "gpus: only CUDA_VISIBLE_DEVICES");
    is_str(gpus("2,3", NULL, NULL), "2,3/2,3",
           "gpus: no CUDA_VISIBLE_DEVICES: address by id");
    is_str(gpus("2,3,4", NULL, "0,1"), "2,3/0,1",
           "gpus: more ids than visible: the shorter");
    is_str(gpus("5", NULL, "0,1"), "5/0",
           "gpus: more visible than ids: the shorter");
    is_str(gpus("1", NULL, ""), "/", "gpus: CUDA_VISIBLE_DEVICES empty");
    is_str(gpus("1", NULL, "NoDevFiles"), "1/1",
           "gpus: NoDevFiles taken as unset");
}

static void test_new(void)
{
    struct pl_resources_spec spec = { .node = "n7", .cores = "2-5" };
    struct pl_resources *r;
    struct pl_error err;
    const uint64_t *cores;
    uint32_t n;

    r = pl_resources_new(&spec, &err);
    ok(r != NULL, "new: with --cores");
    is_str(pl_resources_node(r), "n7", "new: node name");
    cores = pl_resources_cores(r, &n);
    ok(n == 4 && cores[0] == 2 && cores[3] == 5, "new: cores 2-5");
    is(pl_resources_free_cores(r), 4, "new: all cores free");
    pl_resources_free(r);

    spec.cores = "";
    errno = 0;
    ok(!pl_resources_new(&spec, &err) && errno == EINVAL,
       "new: no cores refused (%s)", err.text);
    spec.cores = "9999";
    ok(!pl_resources_new(&spec, &err) && errno == EINVAL,
       "new: bad cores refused (%s)", err.text);

    struct pl_resources_spec dflt = { 0 };
    r = pl_resources_new(&dflt, &err);
    ok(r && pl_resources_node(r)[0] != '\0',
       "new: defaults: host name '%s'", r ? pl_resources_node(r) : "");
    cores = r ? pl_resources_cores(r, &n) : NULL;
    ok(r && n >= 1, "new: defaults: %u cores from the affinity mask", n);
    pl_resources_free(r);
    pl_resources_free(NULL);
}

static void test_claim(void)
{
    struct pl_resources_spec spec = { .node = "n1", .cores = "0-3",
                                      .step_gpus = "0,1" };
    struct pl_resources *r = pl_resources_new(&spec, NULL);
    struct pl_error err;
    uint64_t c01[] = { 0, 1 };
    uint64_t c12[] = { 1, 2 };
    uint64_t c33[] = { 3, 3 };
    uint64_t c9[] = { 9 };
    uint64_t g0[] = { 0 };
    uint64_t g2[] = { 2 };
    uint64_t g11[] = { 1, 1 };

    ok(pl_resources_claim(r, c01, 2, g0, 1, &err) == 0, "claim: 2 cores 1 gpu");
    is(pl_resources_free_cores(r), 2, "claim: 2 cores left");
    is(pl_resources_free_gpus(r), 1, "claim: 1 gpu left");
    errno = 0;
    ok(pl_resources_claim(r, c12, 2, NULL, 0, &err) < 0 && errno == EBUSY,
       "claim: busy core refused (%s)", err.text);
    is(pl_resources_free_cores(r), 2, "claim: a refused claim takes nothing");
    ok(pl_resources_claim(r, c9, 1, NULL, 0, &err) < 0 && errno == EINVAL,
       "claim: foreign core refused (%s)", err.text);
    ok(pl_resources_claim(r, c33, 2, NULL, 0, &err) < 0 && errno == EINVAL,
       "claim: core twice refused (%s)", err.text);
    ok(pl_resources_claim(r, c12 + 1, 1, g0, 1, &err) < 0 && errno == EBUSY,
       "claim: busy gpu refused (%s)", err.text);
    ok(pl_resources_claim(r, c12 + 1, 1, g2, 1, &err) < 0 && errno == EINVAL,
       "claim: gpu position out of range refused (%s)", err.text);
    ok(pl_resources_claim(r, c12 + 1, 1, g11, 2, &err) < 0 && errno == EINVAL,
       "claim: gpu twice refused (%s)", err.text);
    is(pl_resources_free_cores(r), 2, "claim: still 2 cores free");
    pl_resources_release(r, c01, 2, g0, 1);
    is(pl_resources_free_cores(r), 4, "release: all cores free");
    is(pl_resources_free_gpus(r), 2, "release: all gpus free");
    ok(pl_resources_claim(r, c12, 2, g11 + 1, 1, &err) == 0,
       "claim: freed cores can be taken again");
    pl_resources_free(r);
}

static void test_env(void)
{
    char a[] = "A=1", b[] = "B=2", junk[] = "junk", nokey[] = "=x";
    char *base[] = { a, b, junk, nokey, NULL };
    struct pl_env *e = pl_env_new(base);
    char **v;

    ok(e != NULL, "env: new");
    is_str(pl_env_get(e, "A"), "1", "env: copied A");
    ok(pl_env_get(e, "junk") == NULL, "env: entries without '=' dropped");
    ok(pl_env_put(e, "A=one") == 0, "env: put overrides");
    is_str(pl_env_get(e, "A"), "one", "env: A overridden");
    ok(pl_env_set(e, "C", "x=y") == 0, "env: set new");
    ok(pl_env_setf(e, "D", "%d", 42) == 0, "env: setf");
    is_str(pl_env_get(e, "D"), "42", "env: D");
    ok(pl_env_set(e, "EMPTY", "") == 0 && pl_env_get(e, "EMPTY")
           && !*pl_env_get(e, "EMPTY"), "env: empty value");
    errno = 0;
    ok(pl_env_put(e, "noequals") < 0 && errno == EINVAL, "env: put needs '='");
    ok(pl_env_put(e, "=v") < 0 && errno == EINVAL, "env: put needs a key");
    ok(pl_env_set(e, "K=", "v") < 0 && errno == EINVAL,
       "env: key with '=' refused");
    v = pl_env_vector(e);
    is(pl_strv_len(v), 5, "env: 5 entries");
    is_str(v[0], "A=one", "env: order kept, override in place");
    is_str(v[2], "C=x=y", "env: value may hold '='");
    ok(pl_env_get(e, "B") && pl_env_get(e, "BB") == NULL,
       "env: no prefix match");
    pl_env_free(e);
    e = pl_env_new(NULL);
    ok(e && pl_strv_len(pl_env_vector(e)) == 0, "env: empty base");
    for (int i = 0; i < 200; i++)
        pl_env_setf(e, "V", "%d", i);
    ok(pl_strv_len(pl_env_vector(e)) == 1, "env: repeated set keeps one");
    pl_env_free(e);
}

int main(void)
{
    pl_log_level = LOG_ERR; /* the mismatch warnings are expected */
    plan(83);
    test_cpulist();
    test_idlist();
    test_gpus();
    test_new();
    test_claim();
    test_env();
    return done_testing();
}
