/* tests/unit/test_agent_vetgpu.c - node vetting's GPU health check:
 * pilot-vetcheck gpu's report turned into checks (pl_vet_gpu_adapt(),
 * with hostile reports: cut short, wrong types, huge), and the real
 * program run by the check process for granted GPUs, without NVML (a
 * pass with a note) and with a library that is not NVML (a failure) */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/vet.h"
#include "proto/msg.h"
#include "proto/vetconf.h"
#include "proto/vetmsg.h"
#include "tests/unit/helpers.h"

#define MAXC 64

struct got {
    int n;
    char name[MAXC][40];
    bool ok[MAXC];
    double figure[MAXC], limit[MAXC];
    char detail[MAXC][600];
};

static void add(void *arg, const char *name, bool ok, double figure,
                const char *unit, double limit, const char *detail)
{
    struct got *g = arg;

    (void)unit;
    if (g->n >= MAXC)
        return;
    snprintf(g->name[g->n], sizeof(g->name[0]), "%s", name);
    g->ok[g->n] = ok;
    g->figure[g->n] = figure;
    g->limit[g->n] = limit;
    snprintf(g->detail[g->n], sizeof(g->detail[0]), "%s", detail);
    g->n++;
}

static struct got adapt(const char *s, int code)
{
    struct got g = { 0 };

    pl_vet_gpu_adapt(s, s ? strlen(s) : 0, code, add, &g);
    return g;
}

/* The check process on vet.yaml 'yaml' with GPUs 0 and 1 granted and
 * NVML at 'nvml'; its result into 'r'.  0, or -1. */
static int run(const char *yaml, const char *nvml, struct pl_vet_result *r)
{
    struct pl_vetconf c;
    struct pl_error e;
    struct pl_wbuf w;
    int in[2], out[2], status;
    static char buf[1 << 16];
    size_t len = 0;
    ssize_t n;
    pid_t pid;

    if (pl_vetconf_parse("t", yaml, strlen(yaml), &c, &e) < 0) {
        diag("%s", e.text);
        return -1;
    }
    pl_vet_encode(&w, 0, 5, &c);
    pl_vetconf_clear(&c);
    if (pipe(in) < 0 || pipe(out) < 0)
        return -1;
    fflush(stdout);
    if ((pid = fork()) == 0) {
        char *argv[] = { (char *)"pilot-agent", (char *)"--vet-child",
                         (char *)"--node", (char *)"t1", (char *)"--gpus",
                         (char *)"0,1", NULL };
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        setenv("SLURM_STEP_GPUS", "0,1", 1);
        setenv("PILOT_NVML_LIBRARY", nvml, 1);
        alarm(60);
        _exit(pl_vet_child_main(6, argv));
    }
    close(in[0]);
    close(out[1]);
    if (write(in[1], w.sb.data, w.sb.size) != (ssize_t)w.sb.size)
        diag("write: %s", strerror(errno));
    close(in[1]);
    pl_wbuf_destroy(&w);
    while ((n = read(out[0], buf + len, sizeof(buf) - len)) > 0)
        len += (size_t)n;
    close(out[0]);
    waitpid(pid, &status, 0);
    struct pl_msg m;
    if (!WIFEXITED(status) || WEXITSTATUS(status)
        || pl_msg_decode(buf, len, &m, &e) < 0)
        return -1;
    int rc = m.type == PL_MSG_VET_RESULT ? pl_vet_result_decode(m.body, r, &e)
                                         : -1;
    pl_msg_release(&m);
    return rc;
}

static const struct pl_vet_check *find(const struct pl_vet_result *r,
                                       const char *name)
{
    for (uint32_t i = 0; i < r->ncheck; i++)
        if (!strcmp(r->check[i].name, name))
            return &r->check[i];
    return NULL;
}

int main(void)
{
    struct got g;
    struct pl_vet_result r;
    const struct pl_vet_check *c;
    char exe[PATH_MAX], prog[PATH_MAX + 32];
    ssize_t n;

    plan(19);

    g = adapt("{\"check\":\"gpu\",\"failed\":[],\"count\":2,\"expect\":2,"
              "\"driver\":\"570.1\",\"gpus\":[{\"temperature_c\":40,"
              "\"memory_free_mb\":900,\"memory_total_mb\":1000},"
              "{\"temperature_c\":61,\"memory_free_mb\":990,"
              "\"memory_total_mb\":1000}],\"status\":\"pass\",\"ok\":true}",
              0);
    ok(g.n == 1 && g.ok[0] && !strcmp(g.name[0], "gpu") && g.figure[0] == 2
           && g.limit[0] == 2 && strstr(g.detail[0], "hottest 61 C")
           && strstr(g.detail[0], "least free 90.0%"),
       "a pass: one gpu check, the count, the hottest and least free");

    g = adapt("{\"check\":\"gpu\",\"failed\":[{\"check\":\"gpu.temperature\","
              "\"value\":91,\"limit\":85,\"gpu\":1,\"text\":\"GPU 1 at 91 C, "
              "above 85 C\"},{\"check\":\"gpu.kernel\",\"value\":null,"
              "\"limit\":null,\"text\":\"wrong\"}],\"status\":\"fail\","
              "\"ok\":false}", 1);
    ok(g.n == 2 && !g.ok[0] && !strcmp(g.name[0], "gpu.temperature")
           && g.figure[0] == 91 && g.limit[0] == 85
           && !strcmp(g.detail[0], "GPU 1 at 91 C, above 85 C"),
       "a failure: each failed entry a check, its figure and limit");
    ok(!strcmp(g.name[1], "gpu.kernel") && isnan(g.figure[1])
           && isnan(g.limit[1]),
       "... null figures stay none");

    g = adapt("{\"check\":\"gpu\",\"no_nvml\":true,\"error\":\"no GPU here: "
              "NVML not found\",\"status\":\"cannot-run\",\"ok\":false}", 3);
    ok(g.n == 1 && g.ok[0] && !strcmp(g.detail[0], "not checked: no GPU "
                                                    "here: NVML not found"),
       "exit 3 without an NVML library: passes, 'not checked' says why");
    g = adapt("{\"check\":\"gpu\",\"error\":\"no CUDA driver (x)\","
              "\"status\":\"cannot-run\",\"ok\":false}", 3);
    ok(g.n == 1 && !g.ok[0] && strstr(g.detail[0], "no CUDA driver"),
       "exit 3 with NVML loaded and the driver failing: fails");

    g = adapt("{\"check\":\"gpu\",\"failed\":[{\"check\":\"gpu.count\"", 1);
    ok(g.n == 1 && !g.ok[0] && strstr(g.detail[0], "printed no report"),
       "a report cut short: a failed gpu check");
    g = adapt("", -1);
    ok(g.n == 1 && !g.ok[0], "no output at all (killed): failed");
    g = adapt("[1,2,3]", 0);
    ok(g.n == 1 && !g.ok[0], "JSON that is not an object: failed");
    g = adapt("{\"status\":\"pass\",\"ok\":true}", 1);
    ok(g.n == 1 && !g.ok[0] && strstr(g.detail[0], "exited 1"),
       "a pass in the report with exit 1: the exit code wins, failed");
    g = adapt("{\"status\":\"fail\",\"ok\":false,\"failed\":{\"a\":1}}", 0);
    ok(g.n == 1 && !g.ok[0], "exit 0 with a failed report: failed");
    g = adapt("{\"status\":\"fail\",\"failed\":[{\"check\":7,\"value\":\"x\","
              "\"limit\":[1],\"text\":{}},{\"check\":\"BAD NAME!\"}]}", 1);
    ok(g.n == 2 && !strcmp(g.name[0], "gpu") && isnan(g.figure[0])
           && isnan(g.limit[0]) && !strcmp(g.name[1], "gpu") && !g.ok[1],
       "entries of the wrong types or a bad name: failed checks named gpu");

    /* huge: 10,000 failed entries with 100 kB texts */
    size_t cap = 10000 * 140 + 200000, len = 0;
    char *huge = malloc(cap);
    len += (size_t)sprintf(huge, "{\"status\":\"fail\",\"failed\":[");
    for (int i = 0; i < 10000; i++)
        len += (size_t)sprintf(huge + len, "%s{\"check\":\"gpu.temperature\","
                               "\"value\":%d,\"limit\":85,\"text\":\"hot\"}",
                               i ? "," : "", 90 + i);
    len += (size_t)sprintf(huge + len, ",{\"check\":\"gpu.x\",\"text\":\"");
    memset(huge + len, 'a', 100000);
    len += 100000;
    len += (size_t)sprintf(huge + len, "\"}]}");
    g = adapt(huge, 1);
    ok(g.n == PL_VET_MAX_CHECKS / 2 && !g.ok[0] && g.figure[31] == 121,
       "10,000 failed entries: the first 32 kept");
    free(huge);

    /* the real program for granted GPUs: beside the test, ../bin */
    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[n > 0 ? n : 0] = '\0';
    *strrchr(exe, '/') = '\0';
    snprintf(prog, sizeof(prog), "%s/../bin/pilot-vetcheck", exe);
    setenv("PILOT_VETCHECK", prog, 1);
    ok(run("gpus: {devices: none}\ndisk: {enabled: false}\n"
           "memory: {enabled: false}\ncpu: {enabled: false}\n",
           "/nonexistent/libnvidia-ml.so.1", &r) == 0,
       "the checks run with GPUs 0,1 granted");
    ok((c = find(&r, "gpu")) && c->ok && r.ok
           && !strncmp(c->detail, "not checked: no GPU here: NVML not found",
                       40),
       "no NVML library: pilot-vetcheck gpu passes the node, with a note");
    pl_vet_result_clear(&r);
    ok(run("gpus: {devices: none}\ndisk: {enabled: false}\n"
           "memory: {enabled: false}\ncpu: {enabled: false}\n",
           "libm.so.6", &r) == 0
           && (c = find(&r, "gpu")) && !c->ok && !r.ok
           && strstr(c->detail, "is not a usable NVML"),
       "a library there that is not NVML: the gpu check fails the node");
    pl_vet_result_clear(&r);
    ok(run("gpus: {devices: none, vetcheck: false}\n"
           "disk: {enabled: false}\nmemory: {enabled: false}\n"
           "cpu: {enabled: false}\n", "libm.so.6", &r) == 0
           && !find(&r, "gpu") && find(&r, "gpus") && r.ok,
       "gpus.vetcheck: false: not run");
    pl_vet_result_clear(&r);
    /* programs in its place: one that hangs, one that floods */
    char hang[] = "/tmp/test_vetgpu.XXXXXX";
    int fd = mkstemp(hang);
    FILE *fp = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (fp) {
        fputs("#!/bin/sh\nexec sleep 30\n", fp);
        fclose(fp);
    }
    chmod(hang, 0700);
    setenv("PILOT_VETCHECK", hang, 1);
    ok(run("timeout: 2\ngpus: {devices: none}\ndisk: {enabled: false}\n"
           "memory: {enabled: false}\ncpu: {enabled: false}\n", "", &r) == 0
           && (c = find(&r, "gpu")) && !c->ok
           && strstr(c->detail, "timed out"),
       "a program that hangs: killed within the checks' timeout, failed");
    pl_vet_result_clear(&r);
    if ((fp = fopen(hang, "w"))) {
        fputs("#!/bin/sh\nhead -c 3000000 /dev/zero | tr '\\0' '['\n"
              "exit 0\n", fp);
        fclose(fp);
    }
    ok(run("gpus: {devices: none}\ndisk: {enabled: false}\n"
           "memory: {enabled: false}\ncpu: {enabled: false}\n", "", &r) == 0
           && (c = find(&r, "gpu")) && !c->ok
           && strstr(c->detail, "printed no report"),
       "a program that prints 3 MB of '[': read up to its limit, failed");
    pl_vet_result_clear(&r);
    unlink(hang);
    setenv("PILOT_VETCHECK", "/nonexistent/pilot-vetcheck", 1);
    ok(run("gpus: {devices: none}\ndisk: {enabled: false}\n"
           "memory: {enabled: false}\ncpu: {enabled: false}\n", "", &r) == 0
           && (c = find(&r, "gpu")) && c->ok
           && strstr(c->detail, "not checked: no pilot-vetcheck"),
       "no pilot-vetcheck installed: a note, not the node's fault");
    pl_vet_result_clear(&r);
    return done_testing();
}
