/* tests/unit/test_agent_gpusample.c - the GPU sampler: its child started
 * for real (pilot-agent --gpu-sampler), failing to load NVML on this
 * machine (no GPU) and saying why; and what the agent makes of the
 * child's lines: GPUs matched by UUID, per-rank means and maxima */
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <uv.h>

#include "agent/gpusample.h"
#include "agent/resources.h"
#include "proto/log.h"
#include "tests/unit/tap.h"

static char agent[PATH_MAX + 32];

/* A node of 3 GPUs (Slurm ids 4, 5, 6) whose NVML UUIDs are known. */
static struct pl_resources *three_gpus(void)
{
    static const struct pl_gpuprobe_dev devs[] = {
        { .index = 0, .minor = 4, .uuid = "GPU-aaaa", .name = "H200" },
        { .index = 1, .minor = 5, .uuid = "GPU-bbbb", .name = "H200" },
        { .index = 2, .minor = 6, .uuid = "GPU-cccc", .name = "H200" },
    };
    struct pl_resources_spec spec = { .node = "n1", .cores = "0",
                                      .step_gpus = "4,5,6",
                                      .gpu_probe = "test",
                                      .gpu_lib = PL_GPUPROBE_NVML,
                                      .gpu_devs = devs, .gpu_ndevs = 3 };

    return pl_resources_new(&spec, NULL);
}

/* The child's lines, fed by hand: the arithmetic and the matching. */
static void test_lines(uv_loop_t *loop, struct pl_resources *res)
{
    struct pl_gpusample *s = pl_gpusample_new(loop, res);
    struct pl_usage u = { 0 }, v = { 0 }, none = { 0 };
    uint64_t gpus01[] = { 0, 1 }, gpus2[] = { 2 };

    ok(s != NULL, "lines: a sampler");
    /* NVML numbers the devices its own way: matched by UUID */
    pl_gpusample_feed(s, "gpu 0 GPU-cccc");
    pl_gpusample_feed(s, "gpu 1 GPU-aaaa");
    pl_gpusample_feed(s, "gpu 2 GPU-zzzz"); /* not granted to us */
    pl_gpusample_feed(s, "gpu 3 GPU-bbbb");
    pl_gpusample_feed(s, "ready 4");
    ok(pl_gpusample_ready(s) && !*pl_gpusample_why(s),
       "lines: ready, nothing to say");
    pl_gpusample_watch(s, 7, 1, 0, gpus01, 2);  /* GPU-aaaa, GPU-bbbb */
    pl_gpusample_watch(s, 8, 1, 0, gpus2, 1);   /* GPU-cccc */
    pl_gpusample_feed(s, "sample 0:90:1000:300.5 1:50:2000:200 "
                         "2:100:99999:999 3:30:4000:100");
    pl_gpusample_feed(s, "sample 0:70:3000:299.5 1:-:-:- 2:1:1:1 "
                         "3:10:1000:-");
    /* what no child of ours writes is ignored */
    pl_gpusample_feed(s, "sample 1:101:5:5 3:50:-1:5 9:50:5:5 1:50:5 x");
    pl_gpusample_feed(s, "sample 64:50:5:5 1:50:5:5:5 1:1e400:5:5");
    pl_gpusample_feed(s, "bogus");
    pl_gpusample_take(s, 7, 1, 0, &u);
    ok(u.has == (PL_USE_GPU_UTIL | PL_USE_GPU_MEM | PL_USE_GPU_POWER),
       "lines: rank of task 7: every GPU figure (has %u)", u.has);
    /* util: (50 + 30 + 10) / 3 samples of its GPUs that answered */
    ok(fabs(u.gpu_util - 30) < 1e-9, "lines: ... mean utilisation %g%%",
       u.gpu_util);
    ok(u.gpu_mem_mb == 4000, "lines: ... the most one GPU held: %g MB",
       u.gpu_mem_mb);
    ok(fabs(u.gpu_power_w - (200 + 100) / 2.0) < 1e-9,
       "lines: ... mean power %g W", u.gpu_power_w);
    pl_gpusample_take(s, 8, 1, 0, &v);
    ok(fabs(v.gpu_util - 80) < 1e-9 && v.gpu_mem_mb == 3000
           && fabs(v.gpu_power_w - 300) < 1e-9,
       "lines: rank of task 8, its own GPU only: %g%%, %g MB, %g W",
       v.gpu_util, v.gpu_mem_mb, v.gpu_power_w);
    pl_gpusample_take(s, 8, 1, 0, &none);
    ok(none.has == 0, "lines: taken once, then forgotten");
    /* a rank watched after the last sample gets nothing */
    pl_gpusample_watch(s, 9, 2, 1, gpus2, 1);
    pl_gpusample_take(s, 9, 2, 1, &none);
    ok(none.has == 0, "lines: no sample while it ran: no GPU figure");
    pl_gpusample_feed(s, "error NVML: gone");
    ok(!pl_gpusample_ready(s)
           && !strcmp(pl_gpusample_why(s), "NVML: gone"),
       "lines: an error line: off, and why");
    pl_gpusample_free(s);
    uv_run(loop, UV_RUN_NOWAIT);

    /* no UUID of ours among NVML's: off, saying so */
    s = pl_gpusample_new(loop, res);
    pl_gpusample_feed(s, "gpu 0 GPU-zzzz");
    pl_gpusample_feed(s, "ready 1");
    ok(strstr(pl_gpusample_why(s), "none of this node's GPUs") != NULL,
       "lines: NVML sees none of ours: '%s'", pl_gpusample_why(s));
    pl_gpusample_free(s);
    uv_run(loop, UV_RUN_NOWAIT);
}

static void wake_cb(uv_timer_t *t)
{
    (void)t; /* uv_run() returns: the caller looks again */
}

/* Run the loop until the child has said why it samples nothing (or
 * 10 s have passed). */
static void wait_why(uv_loop_t *loop, struct pl_gpusample *s)
{
    uv_timer_t t;
    uint64_t end = uv_now(loop) + 10000;

    uv_timer_init(loop, &t);
    uv_timer_start(&t, wake_cb, 100, 100);
    while (!*pl_gpusample_why(s) && uv_now(loop) < end)
        uv_run(loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(loop, UV_RUN_NOWAIT);
}

/* The real child: here there is no NVML, so it says why and exits; the
 * agent carries on and its ranks get no GPU figures. */
static void test_child(uv_loop_t *loop, struct pl_resources *res)
{
    struct pl_gpusample *s = pl_gpusample_new(loop, res);
    struct pl_error err;
    struct pl_usage u = { 0 };
    uint64_t gpus[] = { 0 };

    setenv("PILOT_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
    ok(pl_gpusample_start(s, agent, 0.05, &err) == 0
           && !*pl_gpusample_why(s),
       "child: started (%s)", agent);
    pl_gpusample_watch(s, 1, 1, 0, gpus, 1);
    wait_why(loop, s);
    ok(strstr(pl_gpusample_why(s), "/nonexistent/libnvidia-ml.so.1")
           != NULL,
       "child: no NVML: it says why ('%s')", pl_gpusample_why(s));
    ok(!pl_gpusample_ready(s), "child: ... and samples nothing");
    pl_gpusample_take(s, 1, 1, 0, &u);
    ok(u.has == 0, "child: a rank watched meanwhile: no GPU figure");
    pl_gpusample_free(s);
    uv_run(loop, UV_RUN_DEFAULT);
    unsetenv("PILOT_NVML_LIBRARY");

    /* a program that is not there: start fails, nothing leaks */
    s = pl_gpusample_new(loop, res);
    ok(pl_gpusample_start(s, "/nonexistent/pilot-agent", 1, &err) < 0
           && strstr(err.text, "/nonexistent/pilot-agent"),
       "child: a missing program: an error (%s)", err.text);
    pl_gpusample_free(s);
    uv_run(loop, UV_RUN_DEFAULT);
}

int main(int argc, char **argv)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    uv_loop_t loop;
    struct pl_resources *res;

    (void)argc;
    (void)argv;
    self[n > 0 ? n : 0] = '\0';
    /* $(BUILD)/tests/test_agent_gpusample -> $(BUILD)/bin/pilot-agent */
    snprintf(agent, sizeof(agent), "%s/../bin/pilot-agent", dirname(self));
    pl_log_level = LOG_ERR; /* the sampler's notices are expected here */
    plan(17);
    uv_loop_init(&loop);
    if (!(res = three_gpus())) {
        diag("resources: no 3 GPUs");
        return 1;
    }
    test_lines(&loop, res);
    test_child(&loop, res);
    ok(uv_loop_close(&loop) == 0, "every handle closed");
    pl_resources_free(res);
    return done_testing();
}
