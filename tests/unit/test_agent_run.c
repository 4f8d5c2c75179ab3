/* tests/unit/test_agent_run.c - from a RUN entry to a process (agent/run.c):
 * the environment, refusals (another attempt, busy or foreign cores,
 * shutting down), a failed spawn, an MPI entry's launcher, the REGISTER
 * of what runs, KILL of another attempt, and bench mode
 *
 * A real pl_agent talks to a fake pilotd (a ROUTER over ipc:// in its own
 * ZeroMQ context, watched on the agent's loop) that speaks through
 * proto/'s encoders and decoders, and spawns real processes.
 */
#include "tests/unit/agent_fixture.h"

static char true_s[] = "true";
static char *argv_true[] = { true_s, NULL };

/* What the task's environment holds beyond its rank's identity. */
static void test_env(struct fixture *f)
{
    char a0[] = "sh", a1[] = "-c",
         a2[] = "echo \"id=$PILOT_TASK_ID node=$PILOT_NODE "
                "omp=$OMP_NUM_THREADS cuda=[$CUDA_VISIBLE_DEVICES] "
                "foo=$FOO inh=$PL_TEST_INHERITED\"";
    char *argv[] = { a0, a1, a2, NULL };
    char e0[] = "FOO=bar";
    char *env[] = { e0, NULL };
    struct pl_run r = entry(f, 30, 1, &f->cores[0], argv);
    struct want w = { 30, 1, PL_ST_DONE };

    r.env = env;
    send_run(f, &r, 1);
    ok(wait_for(f, has_ev, &w, WAIT_MS), "env: task 30 done");
    is_str(slurp_task(f, 30),
           "id=30 node=n1 omp=1 cuda=[] foo=bar inh=yes\n",
           "env: task id, node, threads, no GPU, the entry's env over ours");
    const struct pl_event *v = find_ev(f, 30, 1, PL_ST_RUNNING);
    ok(v && v->pid > 0, "env: running event with its pid");
    v = find_ev(f, 30, 1, PL_ST_DONE);
    ok(v && v->exit_code == 0 && v->signal == 0 && v->maxrss_kb > 0,
       "env: done event with exit 0, no signal, its maxrss");
}

/* A running attempt: what REGISTER says, another attempt refused, a
 * busy core, a KILL of another attempt. */
static void test_running(struct fixture *f)
{
    char a0[] = "sleep", a1[] = "30";
    char *argv[] = { a0, a1, NULL };
    uint64_t foreign = PL_CPU_MAX - 1;
    struct pl_run r[4];
    struct want w = { 40, 1, PL_ST_RUNNING };
    const struct pl_event *v;
    int before;

    r[0] = entry(f, 40, 1, &f->cores[0], argv);
    send_run(f, r, 1);
    ok(wait_for(f, has_ev, &w, WAIT_MS), "running: task 40 runs");

    /* a restarted pilotd learns what runs here */
    struct pl_wbuf b;
    before = f->nregister;
    pl_bare_encode(&b, PL_MSG_REREGISTER, f->seq++);
    send_wbuf(f, &b);
    ok(wait_for(f, registered, &before, WAIT_MS) && f->reg.nrunning == 1
           && f->reg.running[0].id == 40 && f->reg.running[0].attempt == 1
           && f->reg.running[0].rank == 0,
       "running: REGISTER lists task 40 attempt 1 rank 0 as running");
    ok(f->reg.node && !strcmp(f->reg.node, "n1") && f->reg.ncpu >= 1
           && f->reg.pid == (uint64_t)getpid(),
       "running: REGISTER names the node, its cores and the agent's pid");
    send_welcome(f);

    r[0] = entry(f, 40, 2, &f->cores[1], argv); /* another attempt */
    r[1] = entry(f, 41, 1, &f->cores[0], argv); /* task 40's core */
    r[2] = entry(f, 42, 1, &foreign, argv);     /* not ours */
    r[3] = entry(f, 40, 1, &f->cores[0], argv); /* the same rank again */
    send_run(f, r, 4);
    w = (struct want){ 40, 2, PL_ST_FAILED };
    ok(wait_for(f, has_ev, &w, WAIT_MS), "running: attempt 2 failed");
    v = find_ev(f, 40, 2, PL_ST_FAILED);
    is_str(v ? v->error : NULL,
           "attempt 1 of this task is still running on this node",
           "running: attempt 2 refused while attempt 1 runs");
    w = (struct want){ 41, 1, PL_ST_FAILED };
    ok(wait_for(f, has_ev, &w, WAIT_MS), "running: task 41 failed");
    v = find_ev(f, 41, 1, PL_ST_FAILED);
    ok(v && v->error && strstr(v->error, "is busy"),
       "running: a busy core refused (%s)", v && v->error ? v->error : "");
    w = (struct want){ 42, 1, PL_ST_FAILED };
    ok(wait_for(f, has_ev, &w, WAIT_MS), "running: task 42 failed");
    v = find_ev(f, 42, 1, PL_ST_FAILED);
    ok(v && v->error && strstr(v->error, "is not on this agent"),
       "running: a core not ours refused (%s)",
       v && v->error ? v->error : "");

    /* KILL of attempt 2 does not touch attempt 1 */
    send_kill(f, 40, 2);
    w = (struct want){ 40, 1, 0 };
    ok(!wait_for(f, has_ev, &w, 300), "running: KILL of attempt 2: attempt "
       "1 still runs");
    int n = 0;
    for (int i = 0; i < f->nev; i++)
        n += f->ev[i].id == 40 && f->ev[i].attempt == 1
             && f->ev[i].state == PL_ST_RUNNING;
    is(n, 1, "running: the same rank again started nothing");
    send_kill(f, 40, 1);
    w.state = PL_ST_CANCELED;
    ok(wait_for(f, has_ev, &w, WAIT_MS), "running: KILL of attempt 1 "
       "cancels it");

    /* its core is free again */
    r[0] = entry(f, 43, 1, &f->cores[0], argv_true);
    send_run(f, r, 1);
    w = (struct want){ 43, 1, PL_ST_DONE };
    ok(wait_for(f, has_ev, &w, WAIT_MS), "running: its core runs the next");

    /* the same RUN again (pilotd had no GOT for it): its end is not
     * acknowledged yet, so it does not run twice; GOT says what was read */
    uint64_t seq = f->seq;
    send_run(f, r, 1);
    ok(wait_for(f, got_seq, &seq, WAIT_MS), "running: GOT %llu: the RUN "
       "was read", (unsigned long long)seq);
    /* 300 ms for a second start to show (state -1 never comes) */
    (void)wait_for(f, has_ev, &(struct want){ 43, 1, -1 }, 300);
    n = 0;
    for (int i = 0; i < f->nev; i++)
        n += f->ev[i].id == 43 && f->ev[i].state == PL_ST_RUNNING;
    is(n, 1, "running: a RUN of a task that ended here (end not acknowledged) "
       "starts nothing");
    seq = f->seq;
    send_kill(f, 43, 1);
    ok(wait_for(f, got_seq, &seq, WAIT_MS), "running: a KILL is numbered "
       "with the RUNs: GOT %llu", (unsigned long long)seq);
}

/* A spawn that fails reports the task's own failure and frees its core. */
static void test_spawn_failed(struct fixture *f)
{
    char a0[] = "/nonexistent/cmd";
    char *argv[] = { a0, NULL };
    struct pl_run r = entry(f, 50, 1, &f->cores[0], argv);
    struct want w = { 50, 1, PL_ST_FAILED };
    const struct pl_event *v;

    send_run(f, &r, 1);
    ok(wait_for(f, has_ev, &w, WAIT_MS), "spawn: task 50 failed");
    v = find_ev(f, 50, 1, PL_ST_FAILED);
    ok(v && v->exit_code == 127 && v->error
           && !strcmp(v->error, "spawn /nonexistent/cmd: no such file or "
                        "directory"),
       "spawn: exit code 127 and the error (%s)",
       v && v->error ? v->error : "");
    ok(find_ev(f, 50, 1, PL_ST_RUNNING) == NULL, "spawn: never running");
    r = entry(f, 51, 1, &f->cores[0], argv_true);
    send_run(f, &r, 1);
    w = (struct want){ 51, 1, PL_ST_DONE };
    ok(wait_for(f, has_ev, &w, WAIT_MS), "spawn: its core runs the next");
}

/* An MPI entry runs its launcher, found on the entry's PATH: here a
 * fake srun that shows what it was given. */
static void test_mpi(struct fixture *f)
{
    char bin[128], srun[160], pathvar[256], self[PATH_MAX], want[PATH_MAX
                                                                  + 512];
    char a0[] = "true";
    char *argv[] = { a0, NULL };
    char *env[] = { pathvar, NULL };
    char h0[] = "n1";
    char *hosts[] = { h0, NULL };
    char rc[] = "0";
    struct want w = { 60, 1, PL_ST_DONE };
    FILE *fp;
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

    self[n > 0 ? n : 0] = '\0';
    snprintf(bin, sizeof(bin), "%s/bin", f->dir);
    snprintf(srun, sizeof(srun), "%s/srun", bin);
    snprintf(pathvar, sizeof(pathvar), "PATH=%s:/usr/bin:/bin", bin);
    mkdir(bin, 0700);
    if ((fp = fopen(srun, "w"))) {
        fputs("#!/bin/sh\n"
              "echo \"srun $*\"\n"
              "echo \"hosts $(cat \"$SLURM_HOSTFILE\")\"\n"
              "echo \"cores $PILOT_RANK_CORES rank $PILOT_RANK\"\n"
              "echo \"cuda ${CUDA_VISIBLE_DEVICES-unset}\"\n", fp);
        fclose(fp);
    }
    chmod(srun, 0700);
    struct pl_run r = entry(f, 60, 1, &f->cores[0], argv);
    r.env = env;
    r.comm = PL_COMM_MPI;
    r.launcher = PL_LAUNCHER_SRUN;
    r.hosts = hosts;
    r.rank_cores = rc;
    send_run(f, &r, 1);
    ok(wait_for(f, has_ev, &w, WAIT_MS), "mpi: the launcher ran");
    snprintf(want, sizeof(want),
             "srun --overlap --mpi=pmix --nodes=1 --ntasks=1 "
             "--distribution=arbitrary --cpu-bind=none --kill-on-bad-exit=1 "
             "--job-name=pilot-60 %s --exec-rank -- true\n"
             "hosts n1\n"
             "cores 0 rank 0\n"
             "cuda 7,8\n", self);
    is_str(slurp_task(f, 60), want, "mpi: srun with its hostfile, in the "
           "agent's GPU lists");
}

/* An entry that comes while the agent stops is refused. */
static void test_shutdown(struct fixture *f)
{
    /* a task that takes half a second to go: the agent waits for it */
    char a0[] = "sh", a1[] = "-c",
         a2[] = "trap 'sleep 0.5; exit 0' TERM; sleep 30 & wait";
    char *argv[] = { a0, a1, a2, NULL };
    struct pl_run r = entry(f, 70, 1, &f->cores[0], argv);
    struct want w = { 70, 1, PL_ST_RUNNING };
    const struct pl_event *v;

    send_run(f, &r, 1);
    ok(wait_for(f, has_ev, &w, WAIT_MS), "shutdown: task 70 runs");
    uv_sleep(100); /* the shell sets its trap */
    pl_agent_shutdown(f->agent, "test");
    r = entry(f, 71, 1, &f->cores[1], argv_true);
    send_run(f, &r, 1);
    w = (struct want){ 71, 1, PL_ST_FAILED };
    ok(wait_for(f, has_ev, &w, WAIT_MS), "shutdown: task 71 failed");
    v = find_ev(f, 71, 1, PL_ST_FAILED);
    is_str(v ? v->error : NULL, "agent is shutting down",
           "shutdown: a new entry refused");
    fixture_stop(f); /* the agent waits for task 70 */
    ok(wait_for(f, all_ended, NULL, WAIT_MS), "shutdown: every task that "
       "ran has ended");
    ok(find_ev(f, 70, 1, PL_ST_CANCELED) != NULL, "shutdown: task 70 canceled");
}

/* Bench mode: each entry running then done at once, with no process. */
static void test_bench(struct fixture *f)
{
    char a0[] = "/nonexistent/cmd";
    char *argv[] = { a0, NULL };
    struct pl_run r[2];
    struct want w = { 81, 1, PL_ST_DONE };
    const struct pl_event *v;
    struct stat st;
    char p[256];

    r[0] = entry(f, 80, 1, &f->cores[0], argv);
    r[1] = entry(f, 81, 1, &f->cores[0], argv); /* the same core */
    send_run(f, r, 2);
    ok(wait_for(f, has_ev, &w, WAIT_MS), "bench: task 81 done");
    v = find_ev(f, 80, 1, PL_ST_RUNNING);
    ok(v && v->pid == -1, "bench: task 80 running, with no pid");
    v = find_ev(f, 80, 1, PL_ST_DONE);
    ok(v && v->exit_code == 0 && !v->error, "bench: task 80 done, exit 0");
    ok(find_ev(f, 81, 1, PL_ST_RUNNING) != NULL
           && !find_ev(f, 81, 1, PL_ST_FAILED),
       "bench: no cores held: task 81 on the same core ran too");
    snprintf(p, sizeof(p), "%s/t80.out", f->dir);
    ok(stat(p, &st) < 0 && errno == ENOENT, "bench: no output file");
}

/* The index in f->ev of the event of (id, 1) in 'state', or -1. */
static int ev_at(struct fixture *f, uint64_t id, int state)
{
    const struct pl_event *v = find_ev(f, id, 1, state);

    return v ? (int)(v - f->ev) : -1;
}

/* While entries are held after a flush's starts, its events wait for the
 * next ones (the window made 2 s here, to be seen on a loaded machine);
 * the start of the last held entry sends them all at once. */
static void test_hold(struct fixture *f)
{
    char a0[] = "sleep", a1[] = "30", b1[] = "0.1";
    char *long_argv[] = { a0, a1, NULL };
    char *short_argv[] = { a0, b1, NULL };
    struct pl_run r[4];
    struct want w = { 93, 1, PL_ST_RUNNING };
    int at[6];

    pl_agent_set_hold(f->agent, 2000);
    r[0] = entry(f, 90, 1, &f->cores[0], argv_true);
    r[1] = entry(f, 91, 1, &f->cores[1], short_argv);
    for (int i = 2; i < 4; i++) {
        r[i] = entry(f, 90 + (uint64_t)i, 1, NULL, long_argv);
        r[i].ncores = 0;
        r[i].prefetch = 1;
    }
    uint64_t t0 = uv_hrtime();
    send_run(f, r, 4);
    ok(wait_for(f, has_ev, &w, WAIT_MS), "hold: held task 93 runs");
    double took = (double)(uv_hrtime() - t0) / 1e9;
    at[0] = ev_at(f, 90, PL_ST_RUNNING);
    at[1] = ev_at(f, 90, PL_ST_DONE);
    at[2] = ev_at(f, 91, PL_ST_RUNNING);
    at[3] = ev_at(f, 91, PL_ST_DONE);
    at[4] = ev_at(f, 92, PL_ST_RUNNING);
    at[5] = ev_at(f, 93, PL_ST_RUNNING);
    bool one = true;
    for (int i = 0; i < 6; i++)
        one = one && at[i] >= 0 && f->evmsg[at[i]] == f->evmsg[at[0]];
    ok(one, "hold: both starts, both ends 0.1 s apart and the held "
       "tasks' starts in one EVENTS message");
    ok(at[1] >= 0 && at[3] >= 0 && at[1] < at[4] && at[3] < at[5],
       "hold: each end before the start on its cores");
    ok(at[4] >= 0 && f->ev[at[4]].ncores == 1
           && f->ev[at[4]].cores[0] == f->cores[0]
           && at[5] >= 0 && f->ev[at[5]].ncores == 1
           && f->ev[at[5]].cores[0] == f->cores[1],
       "hold: task 92 on task 90's core, task 93 on task 91's");
    ok(took < 1.5, "hold: the last held task's start sent them before "
       "the window's end (%.3f s)", took);
}

int main(void)
{
    struct fixture *f = calloc(1, sizeof(*f));

    plan(44);
    /* what the agent's own step would have: an MPI launcher keeps it */
    setenv("CUDA_VISIBLE_DEVICES", "7,8", 1);
    setenv("PL_TEST_INHERITED", "yes", 1);
    if (!f || fixture_up(f, false) < 0)
        abort();
    test_env(f);
    test_running(f);
    test_spawn_failed(f);
    test_mpi(f);
    test_shutdown(f);
    ok(fixture_free(f), "uv_loop_close: every handle closed");

    if (fixture_up(f, true) < 0)
        abort();
    test_bench(f);
    fixture_stop(f);
    ok(fixture_free(f), "bench: uv_loop_close: every handle closed");

    if (fixture_up(f, false) < 0)
        abort();
    test_hold(f);
    fixture_stop(f);
    ok(fixture_free(f), "hold: uv_loop_close: every handle closed");
    free(f);
    return done_testing();
}
