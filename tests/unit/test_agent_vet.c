/* tests/unit/test_agent_vet.c - the node's checks (agent/vetcheck.c) as
 * the agent runs them: a VET on stdin, a VET_RESULT on stdout; real
 * statvfs, /proc/meminfo, the compute loop, device files, and external
 * programs (the hook for pilot-vetcheck): JSON taken, a failure, a
 * timeout */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/vet.h"
#include "proto/msg.h"
#include "proto/strv.h"
#include "proto/vetconf.h"
#include "proto/vetmsg.h"
#include "tests/unit/helpers.h"

/* Run the checks of vet.yaml 'yaml' in a child with the given --gpus
 * and SLURM_STEP_GPUS; the result into 'r'.  0, or -1. */
static int run(const char *yaml, const char *gpus, const char *step_gpus,
               const char *dir, struct pl_vet_result *r)
{
    struct pl_vetconf c;
    struct pl_error e;
    struct pl_wbuf w;
    int in[2], out[2], status;
    char buf[1 << 16];
    size_t len = 0;
    ssize_t n;
    pid_t pid;

    if (pl_vetconf_parse("t", yaml, strlen(yaml), &c, &e) < 0) {
        diag("%s", e.text);
        return -1;
    }
    pl_vet_encode(&w, 0, 77, &c);
    pl_vetconf_clear(&c);
    if (pipe(in) < 0 || pipe(out) < 0)
        return -1;
    fflush(stdout);
    if ((pid = fork()) == 0) {
        char *argv[] = { (char *)"pilot-agent", (char *)"--vet-child",
                         (char *)"--node", (char *)"t1", (char *)"--cores",
                         (char *)"0", (char *)"--gpus", (char *)gpus,
                         dir ? (char *)"--dir" : NULL, (char *)dir, NULL };
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        if (step_gpus)
            setenv("SLURM_STEP_GPUS", step_gpus, 1);
        else
            unsetenv("SLURM_STEP_GPUS");
        unsetenv("SLURM_JOB_GPUS");
        unsetenv("CUDA_VISIBLE_DEVICES");
        alarm(60);
        _exit(pl_vet_child_main(dir ? 10 : 8, argv));
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
    if (!WIFEXITED(status) || WEXITSTATUS(status)) {
        diag("the checks' process ended with %d", status);
        return -1;
    }
    struct pl_msg m;
    if (pl_msg_decode(buf, len, &m, &e) < 0) {
        diag("result: %s", e.text);
        return -1;
    }
    int rc = m.type == PL_MSG_VET_RESULT ? pl_vet_result_decode(m.body, r, &e)
                                         : -1;
    if (rc < 0)
        diag("result: %s", e.text);
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
    struct pl_vet_result r;
    const struct pl_vet_check *c;
    char dir[256], yaml[2048];

    plan(17);
    if (!t_tmpdir("vet", dir, sizeof(dir)))
        return 1;

    /* the built-in checks, no GPUs */
    ok(run("gpus: {devices: none}\ndisk: {min_free_mb: 1}\n"
           "memory: {min_free_mb: 1}\ncpu: {iterations: 2000000}\n",
           "", NULL, dir, &r) == 0,
       "the checks run and give a result");
    ok(r.ok && r.token == 77 && !strcmp(r.node, "t1") && r.time > 1e9,
       "... ok, its token, node and time");
    ok((c = find(&r, "memory")) && c->ok && c->figure > 1 && c->limit == 1
           && !strcmp(c->unit, "MiB"),
       "memory: MemAvailable in MiB, above 1");
    ok((c = find(&r, "cpu")) && c->ok && c->figure > 0 && isnan(c->limit)
           && strstr(c->detail, "(1 cores)"),
       "cpu: a figure on core 0, no limit (pilotd compares nodes)");
    if (c)
        diag("cpu: %g %s: %s", c->figure, c->unit, c->detail);
    ok((c = find(&r, "gpus")) && c->ok && c->figure == 0,
       "gpus: none granted, none there");
    int ndisk = 0;
    for (uint32_t i = 0; i < r.ncheck; i++)
        ndisk += !strcmp(r.check[i].name, "disk") && r.check[i].ok;
    is(ndisk, 2, "disk: the task directory and /tmp, both ok");
    pl_vet_result_clear(&r);

    /* disk over the limit: a limit no file system here has */
    ok(run("gpus: {enabled: false}\nmemory: {enabled: false}\n"
           "cpu: {enabled: false}\n"
           "disk: {min_free_mb: 4000000000, task_dir: false}\n",
           "", NULL, NULL, &r) == 0 && !r.ok,
       "disk below its limit: the result fails");
    ok((c = find(&r, "disk")) && !c->ok && c->limit == 4e9
           && strstr(c->detail, "/tmp: "),
       "... the disk check, with /tmp named");
    pl_vet_result_clear(&r);

    /* GPUs: Slurm granted 0,1,2; the agent kept 0,1 (its library did not
     * find 2); device files for 0 and 2, none for 1 */
    char gdir[300], path[400];
    snprintf(gdir, sizeof(gdir), "%s/gpu", dir);
    mkdir(gdir, 0755);
    bool nodes = true;
    for (int i = 0; i <= 2; i += 2) {
        snprintf(path, sizeof(path), "%s/nvidia%d", gdir, i);
        /* a char device no driver serves (ENXIO), as on the dev cluster;
         * a regular file stands in when mknod is not allowed */
        if (mknod(path, S_IFCHR | 0666, makedev(195, 200 + i)) < 0) {
            nodes = false;
            close(open(path, O_CREAT | O_WRONLY, 0644));
        }
    }
    if (!nodes)
        diag("no mknod here: regular files stand in for the devices");
    snprintf(yaml, sizeof(yaml), "gpus: {devices: %s/nvidia%%s}\n"
             "disk: {enabled: false}\nmemory: {enabled: false}\n"
             "cpu: {enabled: false}\n", gdir);
    ok(run(yaml, "0,1", "0,1,2", NULL, &r) == 0 && !r.ok,
       "gpus: 3 granted, fewer usable: the result fails");
    ok((c = find(&r, "gpus")) && !c->ok && c->figure == 1 && c->limit == 3
           && strstr(c->detail, "nvidia1: No such file")
           && strstr(c->detail, "GPU 2: not found by the GPU library"),
       "... 1 of 3: GPU 1's file missing, GPU 2 dropped by the library");
    pl_vet_result_clear(&r);
    ok(run(yaml, "0,2", "0,2", NULL, &r) == 0 && r.ok
           && (c = find(&r, "gpus")) && c->figure == 2 && c->limit == 2,
       "gpus: 2 granted, both with their files: ok");
    pl_vet_result_clear(&r);

    /* external programs: the hook for pilot-vetcheck */
    snprintf(yaml, sizeof(yaml),
             "gpus: {enabled: false}\ndisk: {enabled: false}\n"
             "memory: {enabled: false}\ncpu: {enabled: false}\n"
             "external:\n"
             "  - name: good\n"
             "    command: [sh, -c, 'echo \"{\\\"checks\\\": [{\\\"name\\\": "
             "\\\"nccl\\\", \\\"ok\\\": true, \\\"figure\\\": 180.5, "
             "\\\"unit\\\": \\\"GB/s\\\", \\\"limit\\\": 100, \\\"detail\\\":"
             " \\\"all-reduce\\\"}, {\\\"name\\\": \\\"gpu-temp\\\", "
             "\\\"ok\\\": false, \\\"figure\\\": 91}]}\"']\n"
             "  - name: broken\n"
             "    command: [sh, -c, 'echo oops; exit 3']\n"
             "  - name: slow\n"
             "    command: [sleep, '10']\n"
             "    timeout: 0.5\n"
             "  - name: missing\n"
             "    command: [/nonexistent/pilot-vetcheck]\n");
    ok(run(yaml, "", NULL, NULL, &r) == 0 && !r.ok,
       "external programs run; a failed one fails the result");
    ok((c = find(&r, "nccl")) && c->ok && c->figure == 180.5
           && c->limit == 100 && !strcmp(c->unit, "GB/s")
           && !strcmp(c->detail, "all-reduce"),
       "a program's JSON check joins the result: figure, unit, limit");
    ok((c = find(&r, "gpu-temp")) && !c->ok && c->figure == 91,
       "... and its failed one");
    ok((c = find(&r, "broken")) && !c->ok && strstr(c->detail, "(exit 3)")
           && strstr(c->detail, "printed no {\"checks\""),
       "a program that prints no JSON: a failed check of its name");
    ok((c = find(&r, "slow")) && !c->ok && strstr(c->detail, "timed out"),
       "a program past its timeout: killed, failed");
    ok((c = find(&r, "missing")) && !c->ok
           && strstr(c->detail, "No such file"),
       "a program that is not there: failed");
    pl_vet_result_clear(&r);

    t_rmtree(dir);
    return done_testing();
}
