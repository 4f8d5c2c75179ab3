/* agent/vet_ext.c - the vetting child's checks that run other programs:
 * vet.yaml's 'external' ones, and pilot-vetcheck's GPU health (its
 * report turned into checks)
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "agent/spawn.h"
#include "agent/vet.h"
#include "agent/vet_private.h"
#include "proto/pilotdir.h"
#include "proto/strv.h"

/* Its JSON's checks into the result: 0, or -1 with 'why'. */
static int ext_json(struct pl_vet_out *o, const char *buf, size_t len, char *why,
                    size_t wlen)
{
    json_error_t jerr;
    json_t *root = json_loadb(buf, len, 0, &jerr), *arr, *e;
    size_t i;

    if (!root || !(arr = json_object_get(root, "checks"))
        || !json_is_array(arr) || json_array_size(arr) == 0) {
        snprintf(why, wlen, "printed no {\"checks\": [...]}%s%s",
                 root ? "" : ": ", root ? "" : jerr.text);
        json_decref(root);
        return -1;
    }
    json_array_foreach(arr, i, e) {
        const char *name = json_string_value(json_object_get(e, "name"));
        json_t *ok = json_object_get(e, "ok");
        json_t *fig = json_object_get(e, "figure");
        json_t *lim = json_object_get(e, "limit");
        const char *unit = json_string_value(json_object_get(e, "unit"));
        const char *detail = json_string_value(json_object_get(e, "detail"));
        if (!name || !pl_vet_name_ok(name) || !json_is_boolean(ok)
            || (fig && !json_is_number(fig) && !json_is_null(fig))
            || (lim && !json_is_number(lim) && !json_is_null(lim))
            || (unit && strlen(unit) > PL_VET_UNIT_MAX)) {
            snprintf(why, wlen, "check %zu: want name (a-z 0-9 _ . -), ok "
                     "(true/false), figure and limit (numbers)", i);
            json_decref(root);
            return -1;
        }
        pl_vet_add(o, name, json_is_true(ok),
            json_is_number(fig) ? json_number_value(fig) : NAN, unit,
            json_is_number(lim) ? json_number_value(lim) : NAN, "%s",
            detail ? detail : "");
    }
    json_decref(root);
    return 0;
}

/* Run 'prog' ('argv', its stdin /dev/null, stderr ours) until it ends
 * or 'timeout' s pass (then killed): its stdout into *buf (malloc'd,
 * may be NULL), its wait status into *status.  0, or -1 with 'why'. */
static int run_prog(const char *prog, char **argv, double timeout,
                    char **buf, size_t *len, int *status, char *why,
                    size_t wlen)
{
    int fds[2] = { -1, -1 }, devnull = -1, rc = 0;
    pid_t pid = -1;
    extern char **environ;

    *buf = NULL;
    *len = 0;
    *status = 0;
    *why = '\0';
    if (pipe2(fds, O_CLOEXEC) < 0
        || (devnull = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0
        || (rc = pl_spawn(prog, argv, environ, devnull, fds[1], 2, -1,
                          NULL, &pid))) {
        snprintf(why, wlen, "%s", strerror(rc ? rc : errno));
        goto error;
    }
    close(fds[1]);
    fds[1] = -1;
    if (pl_vet_read_all(fds[0], buf, len, pl_vet_mono() + timeout) < 0) {
        snprintf(why, wlen, "%s", errno == ETIMEDOUT ? "timed out"
                                                     : strerror(errno));
        kill(-pid, SIGKILL);
    }
    while (waitpid(pid, status, 0) < 0 && errno == EINTR)
        ;
    if (!*why && WIFSIGNALED(*status))
        snprintf(why, wlen, "killed by signal %d", WTERMSIG(*status));
    close(fds[0]);
    close(devnull);
    return *why ? -1 : 0;
error:
    for (int i = 0; i < 2; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    if (devnull >= 0)
        close(devnull);
    return -1;
}

void pl_vet_check_external(struct pl_vet_out *o, const struct pl_vet_external *x)
{
    char prog[4096], why[256] = "", *buf = NULL;
    int status = 0, rc;
    size_t len = 0;

    if ((rc = pl_spawn_find(x->argv[0], NULL, prog, sizeof(prog)))) {
        pl_vet_add(o, x->name, false, NAN, NULL, NAN, "%s: %s", x->argv[0],
            strerror(rc));
        return;
    }
    if (run_prog(prog, x->argv, x->timeout, &buf, &len, &status, why,
                 sizeof(why)) < 0) {
        pl_vet_add(o, x->name, false, NAN, NULL, NAN, "%s: %s", x->argv[0], why);
        free(buf);
        return;
    }
    /* a non-zero exit with checks printed: the checks say what failed */
    if (ext_json(o, buf ? buf : "", len, why, sizeof(why)) < 0) {
        if (WIFEXITED(status) && WEXITSTATUS(status))
            snprintf(why + strlen(why), sizeof(why) - strlen(why),
                     " (exit %d)", WEXITSTATUS(status));
        pl_vet_add(o, x->name, false, NAN, NULL, NAN, "%s: %s", x->argv[0], why);
    }
    free(buf);
}

/* ------------------------------------------------------------ gpu health */

/* Into the result, as pl_vet_add_f wants it. */
static void add_cb(void *arg, const char *name, bool ok, double figure,
                   const char *unit, double limit, const char *detail)
{
    pl_vet_add(arg, name, ok, figure, unit, limit, "%s", detail);
}

/* A text member of 'o', or 'dflt'. */
static const char *jtext(const json_t *o, const char *key, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, key));

    return s ? s : dflt;
}

static double jnum(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);

    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* A pass: one check, the GPU count, with the hottest and least free. */
static void gpu_pass(const json_t *r, pl_vet_add_f addf, void *arg)
{
    char detail[PL_VET_TEXT_MAX];
    const json_t *g;
    double tmax = NAN, fmin = NAN;
    size_t i;

    json_array_foreach(json_object_get(r, "gpus"), i, g) {
        double t = jnum(g, "temperature_c");
        double fr = jnum(g, "memory_free_mb");
        double tot = jnum(g, "memory_total_mb");
        if (!isnan(t) && !(t <= tmax))
            tmax = t;
        if (tot > 0 && !isnan(fr) && !(100 * fr / tot >= fmin))
            fmin = 100 * fr / tot;
    }
    snprintf(detail, sizeof(detail), "%.0f GPUs (driver %.40s), NVML and a "
             "CUDA kernel ok; hottest %.0f C, least free %.1f%%",
             jnum(r, "count"), jtext(r, "driver", "?"), tmax, fmin);
    addf(arg, "gpu", true, jnum(r, "count"), "gpus", jnum(r, "expect"),
         detail);
}

void pl_vet_gpu_adapt(const char *buf, size_t len, int code,
                      pl_vet_add_f addf, void *arg)
{
    json_error_t jerr;
    json_t *r = json_loadb(buf ? buf : "", len, 0, &jerr), *e;
    const char *status;
    char detail[PL_VET_TEXT_MAX];
    size_t i, nf = 0;

    if (!json_is_object(r)) {
        snprintf(detail, sizeof(detail), "pilot-vetcheck gpu exited %d and "
                 "printed no report%s%.200s", code, r ? "" : ": ",
                 r ? "" : jerr.text);
        addf(arg, "gpu", false, NAN, NULL, NAN, detail);
        json_decref(r);
        return;
    }
    status = jtext(r, "status", "");
    if (code == 3 && !strcmp(status, "cannot-run")) {
        /* no GPU library at all (the dev cluster's fake GPUs, a node
         * without the driver's user space): nothing to judge the GPUs
         * by; a library that loaded and failed is the node's fault */
        bool no_lib = json_is_true(json_object_get(r, "no_nvml"));
        snprintf(detail, sizeof(detail), "%s%.400s", no_lib ? "not checked: "
                 : "", jtext(r, "error", "cannot run, no reason given"));
        addf(arg, "gpu", no_lib, NAN, NULL, NAN, detail);
    }
    else if (code == 0 && !strcmp(status, "pass")
             && json_is_true(json_object_get(r, "ok")))
        gpu_pass(r, addf, arg);
    else {
        json_array_foreach(json_object_get(r, "failed"), i, e) {
            const char *name = jtext(e, "check", "gpu");
            snprintf(detail, sizeof(detail), "%.400s", jtext(e, "text", ""));
            addf(arg, pl_vet_name_ok(name) ? name : "gpu", false,
                 jnum(e, "value"), NULL, jnum(e, "limit"), detail);
            if (++nf >= PL_VET_MAX_CHECKS / 2)
                break; /* a report of thousands: the first say enough */
        }
        if (!nf) {
            snprintf(detail, sizeof(detail), "pilot-vetcheck gpu exited %d "
                     "(status '%.32s') and named no failed check %.300s",
                     code, status, jtext(r, "error", ""));
            addf(arg, "gpu", false, NAN, NULL, NAN, detail);
        }
    }
    json_decref(r);
}

/* Where pilot-vetcheck is: $PILOT_VETCHECK, else beside our program (as
 * the pool's pilot-worker is).  0, or -1. */
static int find_vetcheck(char *path, size_t len)
{
    const char *env = getenv("PILOT_VETCHECK");
    char exe[PL_PATH_MAX];
    ssize_t n;

    if (env && *env) {
        snprintf(path, len, "%s", env);
        return access(path, X_OK);
    }
    snprintf(path, len, "/proc/self/exe");
    if ((n = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) <= 0)
        return -1;
    exe[n] = '\0';
    *strrchr(exe, '/') = '\0';
    snprintf(path, len, "%s/pilot-vetcheck", exe);
    return access(path, X_OK);
}

/* The granted GPUs' health: `pilot-vetcheck gpu --expect N` (NVML, a CUDA
 * kernel), its report turned into checks. */
void pl_vet_check_gpu_health(struct pl_vet_out *o,
                             const struct pl_vetconf *c,
                             size_t granted, double left)
{
    char prog[PL_PATH_MAX + 32], expect[32], pct[32], temp[32];
    char why[256] = "", *buf = NULL;
    char a_gpu[] = "gpu", a_expect[] = "--expect", a_pct[] = "--min-free-pct",
         a_temp[] = "--max-temp";
    char *argv[] = { prog, a_gpu, a_expect, expect, a_pct, pct, a_temp, temp,
                     NULL };
    int status = 0;
    size_t len = 0;

    if (find_vetcheck(prog, sizeof(prog)) < 0) {
        /* an installation without it is not the node's fault */
        pl_vet_add(o, "gpu", true, NAN, NULL, NAN, "not checked: no "
            "pilot-vetcheck (%s)", prog);
        return;
    }
    snprintf(expect, sizeof(expect), "%zu", granted);
    snprintf(pct, sizeof(pct), "%g", c->gpu_min_free_pct);
    snprintf(temp, sizeof(temp), "%g", c->gpu_max_temp);
    /* within what is left of the checks' timeout: a program that hangs
     * fails this check, not the whole vetting */
    if (run_prog(prog, argv, left > 1 ? left : 1, &buf, &len, &status, why,
                 sizeof(why)) < 0)
        pl_vet_add(o, "gpu", false, NAN, NULL, NAN, "pilot-vetcheck gpu: %s", why);
    else
        pl_vet_gpu_adapt(buf, len, WIFEXITED(status) ? WEXITSTATUS(status)
                                                     : -1, add_cb, o);
    free(buf);
}
