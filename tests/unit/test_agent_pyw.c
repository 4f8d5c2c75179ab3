/* tests/unit/test_agent_pyw.c - Python calls in warm workers (agent/pyw.c)
 * with a real agent, real /usr/bin/python3 workers and a fake pilotd:
 * a value comes back inline, the same worker runs the next call and its
 * prelude ran once, an exception's line and traceback (one that will not
 * pickle: a RemoteError), a failing prelude, a large result in a file, a
 * pickled call (and a bad one), a worker that dies (exit, SIGSEGV) or
 * writes garbage on its socket fails only its call, a timeout and a
 * cancel interrupt the call and leave the worker warm
 */
#include "tests/unit/agent_fixture.h"

#define PY "/usr/bin/python3"

static const char mod_py[] =
    "import os, signal, sys, time\n"
    "def add(a, b):\n"
    "    print('adding', a, b)\n"
    "    return int(a) + int(b)\n"
    "def pid():\n"
    "    return os.getpid()\n"
    "def boom(msg):\n"
    "    raise ValueError(msg)\n"
    "def leave(code):\n"
    "    os._exit(int(code))\n"
    "def segv():\n"
    "    os.kill(os.getpid(), signal.SIGSEGV)\n"
    "def garbage():\n"
    "    os.write(3, b'\\x00\\x00\\x00\\x10' + b'\\xff' * 16)\n"
    "    time.sleep(5)\n"
    "def spin(s):\n"
    "    end = time.process_time() + float(s)\n"
    "    while time.process_time() < end:\n"
    "        pass\n"
    "def nap(s):\n"
    "    time.sleep(float(s))\n"
    "    return 'woke'\n"
    "def big(n):\n"
    "    return b'x' * int(n)\n"
    "def env(k):\n"
    "    return os.environ.get(k), os.getcwd() == sys.path[0]\n"
    "class Locked(Exception):\n"
    "    def __init__(self):\n"
    "        super().__init__('locked')\n"
    "        self.lock = __import__('threading').Lock()\n"
    "def unpicklable():\n"
    "    raise Locked()\n";

static uint64_t next_id = 100;

/* Send a call of 'argv' (NULL-terminated; argv[0] "mod:fn", or a label
 * with 'input'), prelude 'pre' (may be NULL), timeout 't'; its id. */
static uint64_t call(struct fixture *f, char **argv, const char *pre,
                     double t, const unsigned char *input, size_t ninput)
{
    static char out[8][256], res[8][256];
    static int n;
    uint64_t id = next_id++;
    struct pl_run r = entry(f, id, 1, &f->cores[0], argv);
    int k = n++ % 8;

    snprintf(out[k], sizeof(out[k]), "%s/t%llu.out", f->dir,
             (unsigned long long)id);
    snprintf(res[k], sizeof(res[k]), "%s/t%llu.result", f->dir,
             (unsigned long long)id);
    r.out = out[k];
    r.err = out[k];
    r.cwd = f->dir;
    r.fn = PL_FN_PYCALL;
    r.python = (char *)PY;
    r.py_prelude = (char *)pre;
    r.result_file = res[k];
    r.timeout = t;
    r.input = (unsigned char *)input;
    r.ninput = ninput;
    send_run(f, &r, 1);
    return id;
}

/* Wait for the end of call 'id': its final event, or NULL. */
static const struct pl_event *ended(struct fixture *f, uint64_t id)
{
    struct want w = { id, 1, 0 };

    if (!wait_for(f, has_ev, &w, WAIT_MS))
        return NULL;
    for (int i = 0; i < f->nev; i++)
        if (f->ev[i].id == id && pl_state_final(f->ev[i].state))
            return &f->ev[i];
    return NULL;
}

static int64_t pid_of(struct fixture *f, uint64_t id)
{
    const struct pl_event *e = find_ev(f, id, 1, PL_ST_RUNNING);

    return e ? e->pid : -1;
}

static void test_warm(struct fixture *f)
{
    char a0[] = "mod:add", a1[] = "2", a2[] = "3";
    char *argv[] = { a0, a1, a2, NULL };
    char pre[300];
    char mark[256];

    /* the prelude leaves a mark each time it runs */
    snprintf(mark, sizeof(mark), "%s/prelude.txt", f->dir);
    snprintf(pre, sizeof(pre), "open('%s', 'a').write('ran\\n')", mark);
    uint64_t a = call(f, argv, pre, 0, NULL, 0);
    const struct pl_event *e = ended(f, a);
    ok(e && e->state == PL_ST_DONE && e->exit_code == 0,
       "warm: mod:add 2 3 done (%s)", e && e->error ? e->error : "");
    ok(e && e->result_status == PL_PYR_OK && e->result && e->nresult > 0
           && e->result_size == (int64_t)e->nresult && !e->result_file
           && e->result_repr && !strcmp(e->result_repr, "5"),
       "warm: its value inline, repr 5");
    ok(strstr(slurp_task(f, a), "adding 2 3") != NULL,
       "warm: what it printed is in the task's output");
    uint64_t b = call(f, argv, pre, 0, NULL, 0);
    e = ended(f, b);
    ok(e && e->state == PL_ST_DONE && pid_of(f, a) > 0
           && pid_of(f, a) == pid_of(f, b),
       "warm: the next call runs in the same worker (pid %lld)",
       (long long)pid_of(f, b));
    is_str(slurp(mark), "ran\n", "warm: the prelude ran once");
    char e0[] = "mod:env", e1[] = "PILOT_TASK_ID";
    char *argv_env[] = { e0, e1, NULL };
    uint64_t c = call(f, argv_env, pre, 0, NULL, 0);
    e = ended(f, c);
    char want[64];
    snprintf(want, sizeof(want), "('%llu', True)", (unsigned long long)c);
    ok(e && e->result_repr && !strcmp(e->result_repr, want),
       "warm: the call's environment and cwd first on sys.path (%s)",
       e && e->result_repr ? e->result_repr : "-");
}

/* A call's CPU: the worker's over the call, from /proc (0.3 s of it
 * burned, a nap that burns none); a call whose worker died has none. */
static void test_cpu(struct fixture *f)
{
    char s0[] = "mod:spin", s1[] = "0.3", n0[] = "mod:nap", n1[] = "0.3";
    char g0[] = "mod:segv";
    char *spin[] = { s0, s1, NULL }, *nap[] = { n0, n1, NULL };
    char *segv[] = { g0, NULL };

    const struct pl_event *e = ended(f, call(f, spin, NULL, 0, NULL, 0));
    ok(e && e->state == PL_ST_DONE && (e->use.has & PL_USE_CPU)
           && e->use.cpu_user + e->use.cpu_sys >= 0.28
           && e->use.cpu_user + e->use.cpu_sys < 1.5,
       "cpu: a call that burns 0.3 s: %.3f s user + %.3f s system",
       e ? e->use.cpu_user : -1, e ? e->use.cpu_sys : -1);
    e = ended(f, call(f, nap, NULL, 0, NULL, 0));
    ok(e && e->state == PL_ST_DONE && (e->use.has & PL_USE_CPU)
           && e->use.cpu_user + e->use.cpu_sys < 0.1,
       "cpu: a call that sleeps 0.3 s: %.3f s", e ? e->use.cpu_user
                                                    + e->use.cpu_sys : -1);
    e = ended(f, call(f, segv, NULL, 0, NULL, 0));
    ok(e && e->state == PL_ST_FAILED && !(e->use.has & PL_USE_CPU),
       "cpu: a call whose worker died: no CPU figures");
}

static void test_raise(struct fixture *f)
{
    char a0[] = "mod:boom", a1[] = "bad input";
    char *argv[] = { a0, a1, NULL };
    uint64_t id = call(f, argv, NULL, 0, NULL, 0);
    const struct pl_event *e = ended(f, id);

    ok(e && e->state == PL_ST_FAILED && e->exit_code == 1 && e->error
           && !strcmp(e->error, "ValueError: bad input"),
       "raise: failed, exit 1, reason the exception's line (%s)",
       e && e->error ? e->error : "-");
    ok(e && e->result_status == PL_PYR_RAISED && e->result,
       "raise: (exception, traceback) pickled");
    const char *out = slurp_task(f, id);
    ok(out && strstr(out, "Traceback") && strstr(out, "in boom"),
       "raise: the traceback in the task's stderr");
}

/* An exception that will not pickle comes back as a RemoteError; a
 * prelude that raises fails its call with its traceback. */
static void test_remote(struct fixture *f)
{
    char a0[] = "mod:unpicklable", b0[] = "mod:pid";
    char *argv[] = { a0, NULL };
    char *argv_pid[] = { b0, NULL };
    char path[256], cmd[700];
    uint64_t id = call(f, argv, NULL, 0, NULL, 0);
    const struct pl_event *e = ended(f, id);
    FILE *fp;

    snprintf(path, sizeof(path), "%s/remote.pkl", f->dir);
    if (e && e->result && (fp = fopen(path, "wb"))) {
        fwrite(e->result, 1, e->nresult, fp);
        fclose(fp);
    }
    snprintf(cmd, sizeof(cmd), PY " -c 'import pickle, sys; e, tb = "
             "pickle.load(open(sys.argv[1], \"rb\")); sys.exit(0 if "
             "type(e).__name__ == \"RemoteError\" and e.type_name == "
             "\"Locked\" and \"Locked\" in tb else 1)' %s", path);
    ok(e && e->state == PL_ST_FAILED && e->result_status == PL_PYR_RAISED
           && e->error && strstr(e->error, "Locked: locked")
           && system(cmd) == 0,
       "an exception that will not pickle: a RemoteError in its place (%s)",
       e && e->error ? e->error : "-");
    id = call(f, argv_pid, "raise ImportError('no torch here')", 0, NULL, 0);
    e = ended(f, id);
    ok(e && e->state == PL_ST_FAILED && e->error
           && !strcmp(e->error, "the prelude failed: ImportError: no torch "
                                "here")
           && e->result_status == PL_PYR_NONE,
       "a prelude that raises fails the call: %s",
       e && e->error ? e->error : "-");
    const char *out = slurp_task(f, id);
    ok(out && strstr(out, "Traceback") && strstr(out, "<py_prelude>"),
       "... its traceback in the call's stderr");
}

static void test_big(struct fixture *f)
{
    char a0[] = "mod:big", a1[] = "100000";
    char *argv[] = { a0, a1, NULL };
    uint64_t id = call(f, argv, NULL, 0, NULL, 0);
    const struct pl_event *e = ended(f, id);
    struct stat st;

    ok(e && e->state == PL_ST_DONE && e->result_file && !e->result
           && e->result_size > 100000
           && stat(e->result_file, &st) == 0
           && st.st_size == e->result_size && (st.st_mode & 0777) == 0600,
       "big: a result of 100,000 bytes in its file (0600, its size)");
    /* (one over PL_PY_RESULT_MAX, 256 MiB, takes a while to pickle:
     * t1120-pycall.sh has it) */
}

static void test_pickled(struct fixture *f)
{
    char path[256], cmd[600], label[] = "pickled";
    char *argv[] = { label, NULL };
    unsigned char buf[4096];
    size_t n = 0;
    FILE *fp;

    snprintf(path, sizeof(path), "%s/call.pkl", f->dir);
    snprintf(cmd, sizeof(cmd), PY " -c 'import cloudpickle, sys; "
             "sys.stdout.buffer.write(cloudpickle.dumps(((lambda x, y=1: "
             "x * y), (6,), {\"y\": 7})))' > %s", path);
    if (system(cmd) == 0 && (fp = fopen(path, "rb"))) {
        n = fread(buf, 1, sizeof(buf), fp);
        fclose(fp);
    }
    uint64_t id = call(f, argv, NULL, 0, buf, n);
    const struct pl_event *e = ended(f, id);
    ok(n > 0 && e && e->state == PL_ST_DONE && e->result_repr
           && !strcmp(e->result_repr, "42"),
       "pickled: a lambda with args and kwargs gives 42 (%s)",
       e && e->error ? e->error : "");
    /* garbage as the pickle: the call fails, the worker stays */
    id = call(f, argv, NULL, 0, (const unsigned char *)"nope", 4);
    e = ended(f, id);
    ok(e && e->state == PL_ST_FAILED && e->error
           && strstr(e->error, "cannot load the call"),
       "pickled: a bad pickle fails its call: %s",
       e && e->error ? e->error : "-");
}

static void test_deaths(struct fixture *f)
{
    char pa[] = "mod:pid";
    char *argv_pid[] = { pa, NULL };
    char la[] = "mod:leave", l1[] = "3";
    char *argv_leave[] = { la, l1, NULL };
    char sa[] = "mod:segv";
    char *argv_segv[] = { sa, NULL };
    char ga[] = "mod:garbage";
    char *argv_garbage[] = { ga, NULL };

    uint64_t p1 = call(f, argv_pid, NULL, 0, NULL, 0);
    ended(f, p1);
    uint64_t id = call(f, argv_leave, NULL, 0, NULL, 0);
    const struct pl_event *e = ended(f, id);
    ok(e && e->state == PL_ST_FAILED && e->exit_code == 3 && e->error
           && strstr(e->error, "exited with code 3 during the call"),
       "os._exit(3): failed, exit 3: %s", e && e->error ? e->error : "-");
    id = call(f, argv_segv, NULL, 0, NULL, 0);
    e = ended(f, id);
    ok(e && e->state == PL_ST_FAILED && e->signal == 11
           && e->exit_code == 139 && e->error
           && strstr(e->error, "signal 11"),
       "SIGSEGV: failed, signal 11: %s", e && e->error ? e->error : "-");
    id = call(f, argv_garbage, NULL, 0, NULL, 0);
    e = ended(f, id);
    ok(e && e->state == PL_ST_FAILED && e->error
           && strstr(e->error, "bad message"),
       "garbage on fd 3: its call fails: %s", e && e->error ? e->error : "-");
    uint64_t p2 = call(f, argv_pid, NULL, 0, NULL, 0);
    e = ended(f, p2);
    ok(e && e->state == PL_ST_DONE && pid_of(f, p2) != pid_of(f, p1),
       "after them a call runs in a new worker (pid %lld, not %lld)",
       (long long)pid_of(f, p2), (long long)pid_of(f, p1));
}

static void test_stop(struct fixture *f)
{
    char na[] = "mod:nap", n1[] = "30", pa[] = "mod:pid";
    char *argv_nap[] = { na, n1, NULL };
    char *argv_pid[] = { pa, NULL };

    uint64_t id = call(f, argv_nap, NULL, 0.5, NULL, 0);
    const struct pl_event *e = ended(f, id);
    ok(e && e->state == PL_ST_TIMEOUT && e->error
           && strstr(e->error, "stays"),
       "timeout: interrupted, its worker stays: %s",
       e && e->error ? e->error : "-");
    uint64_t p = call(f, argv_pid, NULL, 0, NULL, 0);
    ended(f, p);
    ok(pid_of(f, p) == pid_of(f, id), "timeout: the next call in the same "
       "worker");
    id = call(f, argv_nap, NULL, 0, NULL, 0);
    struct want w = { id, 1, PL_ST_RUNNING };
    wait_for(f, has_ev, &w, WAIT_MS);
    /* as pilotd cancels: a grace of 5 s, of which 2 s after the SIGINT */
    struct pl_kill k = { .id = id, .attempt = 1, .grace = 5 };
    struct pl_wbuf wb;
    pl_kill_encode(&wb, f->seq++, &k);
    send_wbuf(f, &wb);
    e = ended(f, id);
    ok(e && e->state == PL_ST_CANCELED && e->error
           && strstr(e->error, "stays"),
       "cancel: interrupted, its worker stays: %s",
       e && e->error ? e->error : "-");
    id = call(f, argv_nap, NULL, 0, NULL, 0);
    w.id = id;
    wait_for(f, has_ev, &w, WAIT_MS);
    send_kill(f, id, 1);
    e = ended(f, id);
    ok(e && e->state == PL_ST_CANCELED && e->error
           && strstr(e->error, "was killed"),
       "cancel with no grace: its worker killed: %s",
       e && e->error ? e->error : "-");
}

int main(void)
{
    struct fixture *f = calloc(1, sizeof(*f));
    char path[PATH_MAX], mod[512];
    FILE *fp;

    plan(24 + 3);
    if (!realpath("python/pilot/_pyworker.py", path))
        abort();
    setenv("PILOT_PYWORKER", path, 1);
    if (!f || fixture_up(f, false) < 0)
        abort();
    snprintf(mod, sizeof(mod), "%s/mod.py", f->dir);
    if (!(fp = fopen(mod, "w")) || fputs(mod_py, fp) < 0 || fclose(fp))
        abort();
    test_warm(f);
    test_cpu(f);
    test_raise(f);
    test_remote(f);
    test_big(f);
    test_pickled(f);
    test_deaths(f);
    test_stop(f);
    fixture_stop(f);
    ok(fixture_free(f), "uv_loop_close: every handle closed");
    free(f);
    return done_testing();
}
