/* tests/unit/test_agent_task.c - spawn, exit, kill, timeout, rusage, bind */
#include <errno.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/bind_cpu.h"
#include "agent/resources.h"
#include "agent/task.h"
#include "proto/journal.h"
#include "proto/log.h"
#include "proto/msg.h"
#include "proto/run.h"
#include "proto/state.h"
#include "proto/strv.h"
#include "tests/mpw.h"
#include "tests/unit/helpers.h"
#include "tests/unit/tap.h"

extern char **environ;

struct fixture {
    uv_signal_t sigchld;    /* reaps the tasks, as the agent's does */
    uv_loop_t loop;
    struct pl_task *tasks[32];
    int ntasks;
    int exited;
    char dir[64];
};

static void sigchld_cb(uv_signal_t *h, int signum)
{
    struct fixture *f = h->data;

    (void)signum;
    for (int i = 0; i < f->ntasks; i++)
        pl_task_reap(f->tasks[i]);
}

static void exit_cb(struct pl_task *t, void *arg)
{
    struct fixture *f = arg;

    (void)t;
    f->exited++;
}

static char *path(struct fixture *f, const char *name)
{
    char *p;

    if (asprintf(&p, "%s/%s", f->dir, name) < 0)
        abort();
    return p;
}

/* A spec running 'argv' on core 'core' with output to DIR/NAME.out/.err. */
static void spec_init(struct fixture *f, struct pl_run *s,
                      const char *name, const char *const *argv,
                      double timeout)
{
    char buf[256];

    memset(s, 0, sizeof(*s));
    s->id = (uint64_t)f->ntasks + 1;
    s->attempt = 1;
    s->argv = pl_strv_dup((char *const *)argv);
    s->cores = calloc(1, sizeof(*s->cores));
    s->ncores = 1;
    snprintf(buf, sizeof(buf), "%s.out", name);
    s->out = path(f, buf);
    snprintf(buf, sizeof(buf), "%s.err", name);
    s->err = path(f, buf);
    s->timeout = timeout;
}

static struct pl_task *start_spec(struct fixture *f, struct pl_run *s,
                                  int *rc, struct pl_error *err)
{
    struct pl_task *t = pl_task_new(&f->loop, s, "0123456789ab/n1/1:1", exit_cb, f);

    if (!t)
        abort();
    f->tasks[f->ntasks++] = t;
    *rc = pl_task_start(t, environ, STDIN_FILENO, NULL, err);
    return t;
}

static struct pl_task *start(struct fixture *f, const char *name,
                             const char *const *argv, double timeout,
                             int *rc)
{
    struct pl_run s;
    struct pl_error err;

    spec_init(f, &s, name, argv, timeout);
    return start_spec(f, &s, rc, &err);
}

/* Run the loop until 'n' tasks in all have exited. */
static void wait_exits(struct fixture *f, int n)
{
    while (f->exited < n && uv_run(&f->loop, UV_RUN_ONCE))
        ;
}

static char *slurp(struct fixture *f, const char *name)
{
    static char buf[4096];
    char *p = path(f, name);
    FILE *fp = fopen(p, "r");
    size_t n = 0;

    free(p);
    if (!fp)
        return NULL;
    n = fread(buf, 1, sizeof(buf) - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    return buf;
}

static void test_exits(struct fixture *f)
{
    const char *echo[] = { "echo", "hello", NULL };
    const char *fail[] = { "sh", "-c", "echo oops >&2; exit 3", NULL };
    const char *segv[] = { "sh", "-c", "kill -SEGV $$", NULL };
    int base = f->exited;
    int rc1, rc2, rc3;
    struct pl_task *t1 = start(f, "echo", echo, 0, &rc1);
    struct pl_task *t2 = start(f, "fail", fail, 0, &rc2);
    struct pl_task *t3 = start(f, "segv", segv, 0, &rc3);

    ok(rc1 == 0 && rc2 == 0 && rc3 == 0, "exits: three spawned");
    ok(pl_task_running(t1) && pl_task_pid(t1) > 0, "exits: running, pid %d",
       pl_task_pid(t1));
    wait_exits(f, base + 3);
    is(pl_task_state(t1), PL_ST_DONE, "exits: echo done");
    is(pl_task_exit_code(t1), 0, "exits: echo exit 0");
    is(pl_task_signal(t1), 0, "exits: echo no signal");
    is_str(slurp(f, "echo.out"), "hello\n", "exits: stdout written");
    ok(pl_task_maxrss_kb(t1) > 0, "exits: maxrss %ld kB",
       pl_task_maxrss_kb(t1));
    is(pl_task_state(t2), PL_ST_FAILED, "exits: exit 3 failed");
    is(pl_task_exit_code(t2), 3, "exits: exit code 3");
    is_str(slurp(f, "fail.err"), "oops\n", "exits: stderr written");
    is(pl_task_state(t3), PL_ST_FAILED, "exits: SIGSEGV failed");
    is(pl_task_signal(t3), 11, "exits: signal 11");
    is(pl_task_exit_code(t3), 128 + 11, "exits: exit code 128+11");
    ok(pl_task_error(t1) == NULL, "exits: no error text");
    ok(pl_task_runtime(t1) >= 0, "exits: runtime %.3f s",
       pl_task_runtime(t1));
}

static void test_spawn_errors(struct fixture *f)
{
    const char *nope[] = { "/nonexistent/cmd", NULL };
    const char *tru[] = { "true", NULL };
    struct pl_run s;
    struct pl_error err;
    int rc;
    struct pl_task *t = start(f, "nope", nope, 0, &rc);

    ok(rc < 0 && errno == ENOENT, "spawn: missing command fails, ENOENT");
    is(pl_task_state(t), PL_ST_FAILED, "spawn: state failed");
    is(pl_task_exit_code(t), 127, "spawn: exit code 127");
    is_str(pl_task_error(t), "spawn /nonexistent/cmd: no such file or "
           "directory", "spawn: error text names the command");
    ok(!pl_task_running(t), "spawn: not running");

    spec_init(f, &s, "badout", tru, 0);
    free(s.out);
    s.out = strdup("/proc/no/such/dir/x.out");
    t = start_spec(f, &s, &rc, &err);
    ok(rc < 0 && pl_task_state(t) == PL_ST_FAILED,
       "spawn: unwritable stdout fails (%s)", err.text);
    is(pl_task_exit_code(t), -1, "spawn: no exit code when it never ran");
    ok(pl_task_error(t) && !strncmp(pl_task_error(t), "stdout ", 7),
       "spawn: error names stdout");

    spec_init(f, &s, "nocwd", tru, 0);
    s.cwd = strdup("/nonexistent-dir");
    t = start_spec(f, &s, &rc, &err);
    ok(rc < 0 && pl_task_exit_code(t) == 127, "spawn: missing cwd fails");
    is_str(pl_task_error(t), "cwd /nonexistent-dir: no such file or "
           "directory", "... naming the cwd");

    const char *gone[] = { "no-such-command-in-path", NULL };
    spec_init(f, &s, "nopath", gone, 0);
    t = start_spec(f, &s, &rc, &err);
    is_str(pl_task_error(t), "command 'no-such-command-in-path' not found "
           "in PATH", "a command not in PATH: named so");
}

static void test_files(struct fixture *f)
{
    const char *sh[] = { "sh", "-c", "echo both; echo err >&2", NULL };
    struct pl_run s;
    struct pl_error err;
    struct stat st;
    int rc;
    int base = f->exited;

    spec_init(f, &s, "x", sh, 0);
    free(s.out);
    free(s.err);
    s.out = path(f, "a/b/c/same.log");
    s.err = strdup(s.out);
    start_spec(f, &s, &rc, &err);
    ok(rc == 0, "files: spawned into a missing directory");
    wait_exits(f, base + 1);
    char *d = path(f, "a/b");
    ok(stat(d, &st) == 0 && (st.st_mode & 0777) == 0700,
       "files: directories made 0700");
    free(d);
    d = path(f, "a/b/c/same.log");
    ok(stat(d, &st) == 0 && (st.st_mode & 0777) == 0600, "files: file 0600");
    free(d);
    is_str(slurp(f, "a/b/c/same.log"), "both\nerr\n",
           "files: same path for stdout and stderr shares one file");
}

/* A rank of a task of two writes its own files (issue 16). */
static void test_rank_files(struct fixture *f)
{
    const char *sh[] = { "sh", "-c", "echo rank one; echo e >&2", NULL };
    struct pl_run s;
    struct pl_error err;
    int rc, base = f->exited;

    spec_init(f, &s, "ranked", sh, 0);
    s.size = 2;
    s.rank = 1;
    start_spec(f, &s, &rc, &err);
    ok(rc == 0, "rank files: spawned");
    wait_exits(f, base + 1);
    is_str(slurp(f, "ranked.r1.out"), "rank one\n", "rank 1 of 2: NAME.r1.out");
    is_str(slurp(f, "ranked.r1.err"), "e\n", "... and NAME.r1.err");
    ok(slurp(f, "ranked.out") == NULL, "... not the task's NAME.out");
}

struct jwant {
    uint64_t id;
};

static bool jwant(uint64_t id, uint32_t attempt, void *arg)
{
    return id == ((struct jwant *)arg)->id && attempt == 1;
}

/* --output journal: pipes into DIR/journal/NODE/, no file. */
static void test_journal(struct fixture *f)
{
    const char *sh[] = { "sh", "-c",
                         "echo to the journal; echo e >&2; printf tail",
                         NULL };
    char e1[] = "PILOT_OUTPUT=journal", e2[] = "PILOT_NODE=tn";
    char e3[] = "PATH=/bin:/usr/bin";
    char *env[] = { e1, e2, e3, NULL };
    char out[512] = "", errs[64] = "";
    struct pl_run s;
    struct pl_error err;
    struct pl_jframe fr;
    int rc, base = f->exited;

    spec_init(f, &s, "tasks/0/jt", sh, 0);
    uint64_t id = s.id;
    struct pl_task *t = pl_task_new(&f->loop, &s, "0123456789ab/n1/1:1",
                                    exit_cb, f);
    f->tasks[f->ntasks++] = t;
    rc = pl_task_start(t, env, STDIN_FILENO, NULL, &err);
    ok(rc == 0, "journal: spawned (%s)", rc ? err.text : "");
    wait_exits(f, base + 1);
    is(pl_task_state(t), PL_ST_DONE, "journal: the task is done");
    ok(slurp(f, "tasks/0/jt.out") == NULL, "journal: no output file");
    struct jwant w = { id };
    struct pl_jr *r = pl_jr_open(f->dir, "tn", jwant, &w, &err);
    ok(r != NULL, "journal: DIR/journal/tn/ is there");
    while (r && pl_jr_next(r, &fr, &err) == 1) {
        char *dst = fr.stream == PL_J_STDOUT ? out : errs;
        size_t cap = fr.stream == PL_J_STDOUT ? sizeof(out) : sizeof(errs);
        if (strlen(dst) + fr.len < cap)
            strncat(dst, fr.data, fr.len);
    }
    pl_jr_close(r);
    is_str(out, "to the journal\ntail", "journal: stdout read back whole");
    is_str(errs, "e\n", "journal: stderr apart");
}

static void kill_later_cb(uv_timer_t *h)
{
    pl_task_kill(h->data, PL_ST_CANCELED, 0.2);
}

static void test_kill(struct fixture *f)
{
    const char *sleep10[] = { "sleep", "10", NULL };
    const char *stubborn[] = { "sh", "-c", "trap '' TERM; sleep 10", NULL };
    const char *family[] = { "sh", "-c", "sleep 10 & sleep 10 & wait", NULL };
    int base = f->exited;
    int rc;
    uv_timer_t later;
    struct pl_task *t1 = start(f, "sleep", sleep10, 0, &rc);
    struct pl_task *t2 = start(f, "stubborn", stubborn, 0, &rc);
    struct pl_task *t3 = start(f, "timeout", sleep10, 0.2, &rc);
    struct pl_task *t4 = start(f, "family", family, 0, &rc);
    int pgid = getpgid(pl_task_pid(t1));

    is(pgid, pl_task_pid(t1), "kill: task leads its process group");
    pl_task_kill(t1, PL_ST_CANCELED, 5);
    pl_task_kill(t1, PL_ST_TIMEOUT, 5); /* the first reason is kept */
    uv_timer_init(&f->loop, &later);
    later.data = t2;
    uv_timer_start(&later, kill_later_cb, 300, 0); /* after the trap */
    uv_sleep(200);
    pl_task_kill(t4, PL_ST_CANCELED, 5);
    wait_exits(f, base + 4);
    is(pl_task_state(t1), PL_ST_CANCELED, "kill: canceled");
    is(pl_task_signal(t1), 15, "kill: by SIGTERM");
    is(pl_task_state(t2), PL_ST_CANCELED, "kill: stubborn canceled");
    is(pl_task_signal(t2), 9, "kill: stubborn by SIGKILL after the grace");
    is(pl_task_state(t3), PL_ST_TIMEOUT, "kill: timeout");
    is(pl_task_signal(t3), 15, "kill: timeout by SIGTERM");
    ok(pl_task_runtime(t3) < 2, "kill: timeout after %.3f s",
       pl_task_runtime(t3));
    is(pl_task_state(t4), PL_ST_CANCELED, "kill: family canceled");
    char cmd[64];
    snprintf(cmd, sizeof(cmd), "kill -0 -- -%d 2>/dev/null", pl_task_pid(t4));
    ok(system(cmd) != 0, "kill: the whole process group is gone");
    pl_task_kill(t1, PL_ST_CANCELED, 0); /* no-op once exited */
    ok(pl_task_state(t1) == PL_ST_CANCELED, "kill: kill after exit is a no-op");
    uv_close((uv_handle_t *)&later, NULL);
    uv_run(&f->loop, UV_RUN_NOWAIT); /* 'later' is on our stack */
}

static void test_maxrss(struct fixture *f)
{
    const char *dd[] = { "dd", "if=/dev/zero", "of=/dev/null", "bs=50M",
                         "count=1", NULL };
    int base = f->exited;
    int rc;
    struct pl_task *t = start(f, "dd", dd, 0, &rc);

    wait_exits(f, base + 1);
    is(pl_task_state(t), PL_ST_DONE, "maxrss: dd done");
    ok(pl_task_maxrss_kb(t) > 50 * 1024, "maxrss: %ld kB > 50 MiB",
       pl_task_maxrss_kb(t));
}

/* The CPU time of the reap: a shell loop of fixed work, some 0.25 s of
 * one core, in a child the task waits for (counted), and a sleep that
 * burns none. */
static void test_cpu(struct fixture *f)
{
    const char *burn[] = { "sh", "-c", "sh -c 'i=0; while [ $i -lt 300000 ]; "
                           "do i=$((i+1)); done'", NULL };
    const char *nap[] = { "sleep", "0.3", NULL };
    int base = f->exited;
    int rc1, rc2;
    double u0 = -1, s0 = -1, u1 = -1, s1 = -1;
    struct pl_task *t1 = start(f, "burn", burn, 0, &rc1);
    struct pl_task *t2 = start(f, "nap", nap, 0, &rc2);

    ok(!pl_task_cpu(t1, &u0, &s0), "cpu: none before the reap");
    wait_exits(f, base + 2);
    ok(pl_task_cpu(t1, &u0, &s0) && pl_task_cpu(t2, &u1, &s1),
       "cpu: both reaped with their CPU time");
    ok(u0 + s0 > 0.1 && u0 + s0 <= pl_task_runtime(t1) + 0.05,
       "cpu: the loop (in a child) used %.3f s user + %.3f s system of "
       "%.3f s", u0, s0, pl_task_runtime(t1));
    ok(u1 + s1 < 0.05, "cpu: the sleep used %.3f s user + %.3f s system",
       u1, s1);
}

static void test_bind(struct fixture *f)
{
    const char *grep[] = { "grep", "Cpus_allowed_list", "/proc/self/status",
                           NULL };
    struct pl_resources_spec rs = { .node = "n1" };
    struct pl_resources *r = pl_resources_new(&rs, NULL);
    struct pl_bind_cpu *b = pl_bind_cpu_new(r, NULL);
    struct pl_run s;
    struct pl_error err;
    cpu_set_t before, after;
    const uint64_t *cores;
    uint32_t n;
    int rc;
    int base = f->exited;
    char want[64];

    cores = pl_resources_cores(r, &n);
    spec_init(f, &s, "bind", grep, 0);
    s.cores[0] = cores[n - 1];
    snprintf(want, sizeof(want), "Cpus_allowed_list:\t%llu\n",
             (unsigned long long)cores[n - 1]);
    sched_getaffinity(0, sizeof(before), &before);
    ok(pl_bind_cpu_enter(b, &s, &err) == 0, "bind: enter");
    struct pl_task *t = start_spec(f, &s, &rc, &err);
    pl_bind_cpu_leave(b);
    sched_getaffinity(0, sizeof(after), &after);
    ok(CPU_EQUAL(&before, &after), "bind: our mask is back");
    wait_exits(f, base + 1);
    is(pl_task_state(t), PL_ST_DONE, "bind: task done");
    is_str(slurp(f, "bind.out"), want, "bind: task on its core");
    pl_bind_cpu_free(b);
    pl_resources_free(r);
}

/* Decode the RUN entry that 'pack' packs (the decoder is proto/run.c's:
 * these are the entries pl_task_new() takes). */
static int decode(void (*pack)(msgpack_packer *pk), struct pl_run *s,
                  bool *have_id, struct pl_error *err)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_unpacked up;
    int rc;

    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    pack(&pk);
    msgpack_unpacked_init(&up);
    msgpack_unpack_next(&up, sb.data, sb.size, NULL);
    rc = pl_run_decode(&up.data, s, have_id, err);
    msgpack_unpacked_destroy(&up);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

static void common(msgpack_packer *pk, int extra)
{
    char a[] = "true";
    char *argv[] = { a, NULL };
    uint64_t cores[] = { 0, 1 };

    msgpack_pack_map(pk, (uint32_t)(6 + extra));
    raw_kuint(pk, "id", 17);
    raw_kuint(pk, "attempt", 2);
    raw_kstrv(pk, "argv", argv);
    raw_kuintv(pk, "cores", cores, 2);
    raw_kstr(pk, "stdout", "/tmp/o");
    raw_kstr(pk, "stderr", "/tmp/e");
}

static void pack_good(msgpack_packer *pk)
{
    char e[] = "A=B";
    char *env[] = { e, NULL };
    uint64_t gpus[] = { 1 };

    common(pk, 4);
    raw_kstrv(pk, "env", env);
    raw_kstr(pk, "cwd", "/tmp");
    raw_kuintv(pk, "gpus", gpus, 1);
    raw_kdouble(pk, "timeout", 1.5);
}

static void pack_minimal(msgpack_packer *pk)
{
    common(pk, 0);
}

static void pack_bad_env(msgpack_packer *pk)
{
    char e[] = "NOEQUALS";
    char *env[] = { e, NULL };

    common(pk, 1);
    raw_kstrv(pk, "env", env);
}

static void pack_bad_timeout(msgpack_packer *pk)
{
    common(pk, 1);
    raw_kdouble(pk, "timeout", -1);
}

static void pack_nan_timeout(msgpack_packer *pk)
{
    common(pk, 1);
    raw_kdouble(pk, "timeout", 0.0 / 0.0);
}

static void pack_big_core(msgpack_packer *pk)
{
    uint64_t c[] = { 5000 };

    msgpack_pack_map(pk, 6);
    raw_kuint(pk, "id", 3);
    raw_kuint(pk, "attempt", 1);
    raw_key(pk, "argv");
    msgpack_pack_array(pk, 1);
    pl_w_str(pk, "x");
    raw_kuintv(pk, "cores", c, 1);
    raw_kstr(pk, "stdout", "/o");
    raw_kstr(pk, "stderr", "/e");
}

static void pack_no_id(msgpack_packer *pk)
{
    msgpack_pack_map(pk, 1);
    raw_kstr(pk, "id", "seventeen");
}

static void pack_not_map(msgpack_packer *pk)
{
    msgpack_pack_array(pk, 0);
}

static void pack_empty_argv(msgpack_packer *pk)
{
    msgpack_pack_map(pk, 6);
    raw_kuint(pk, "id", 4);
    raw_kuint(pk, "attempt", 1);
    raw_key(pk, "argv");
    msgpack_pack_array(pk, 0);
    raw_key(pk, "cores");
    msgpack_pack_array(pk, 1);
    msgpack_pack_uint8(pk, 0);
    raw_kstr(pk, "stdout", "/o");
    raw_kstr(pk, "stderr", "/e");
}

static void test_decode(void)
{
    struct pl_run s;
    struct pl_error err;
    bool have_id;

    ok(decode(pack_good, &s, &have_id, &err) == 0, "decode: full entry");
    ok(s.id == 17 && s.attempt == 2 && have_id, "decode: id and attempt");
    ok(s.ncores == 2 && s.cores[1] == 1, "decode: cores");
    ok(s.ngpus == 1 && s.gpus[0] == 1, "decode: gpus");
    ok(s.env && !strcmp(s.env[0], "A=B") && s.cwd && !strcmp(s.cwd, "/tmp"),
       "decode: env and cwd");
    ok(s.timeout == 1.5 && !strcmp(s.out, "/tmp/o"), "decode: timeout, out");
    pl_run_clear(&s);
    ok(decode(pack_minimal, &s, &have_id, &err) == 0 && !s.env && !s.cwd
           && !s.gpus && s.timeout == 0,
       "decode: optional fields absent");
    pl_run_clear(&s);
    ok(decode(pack_bad_env, &s, &have_id, &err) < 0 && have_id
           && errno == EPROTO,
       "decode: env without '=' (%s), id kept", err.text);
    pl_run_clear(&s);
    ok(decode(pack_bad_timeout, &s, &have_id, &err) < 0 && have_id,
       "decode: negative timeout (%s)", err.text);
    pl_run_clear(&s);
    ok(decode(pack_nan_timeout, &s, &have_id, &err) < 0 && have_id,
       "decode: NaN timeout (%s)", err.text);
    pl_run_clear(&s);
    ok(decode(pack_big_core, &s, &have_id, &err) < 0 && have_id
           && s.id == 3,
       "decode: core id too large (%s)", err.text);
    pl_run_clear(&s);
    ok(decode(pack_empty_argv, &s, &have_id, &err) < 0 && have_id,
       "decode: empty argv (%s)", err.text);
    pl_run_clear(&s);
    ok(decode(pack_no_id, &s, &have_id, &err) < 0 && !have_id,
       "decode: bad id, no id (%s)", err.text);
    pl_run_clear(&s);
    ok(decode(pack_not_map, &s, &have_id, &err) < 0 && !have_id,
       "decode: not a map (%s)", err.text);
    pl_run_clear(&s);
}

int main(void)
{
    struct fixture *f = calloc(1, sizeof(*f));

    plan(62 + 4 + 10);
    if (!t_tmpdir("agent-task", f->dir, sizeof(f->dir)))
        abort();
    uv_loop_init(&f->loop);
    uv_signal_init(&f->loop, &f->sigchld);
    f->sigchld.data = f;
    uv_signal_start(&f->sigchld, sigchld_cb, SIGCHLD);

    test_decode();
    test_exits(f);
    test_spawn_errors(f);
    test_files(f);
    test_rank_files(f);
    test_journal(f);
    test_kill(f);
    test_maxrss(f);
    test_cpu(f);
    test_bind(f);

    for (int i = 0; i < f->ntasks; i++)
        pl_task_free(f->tasks[i]);
    pl_task_free(NULL);
    uv_close((uv_handle_t *)&f->sigchld, NULL);
    uv_run(&f->loop, UV_RUN_DEFAULT);
    is(uv_loop_close(&f->loop), 0, "uv_loop_close: every handle closed");
    t_rmtree(f->dir);
    free(f);
    return done_testing();
}
