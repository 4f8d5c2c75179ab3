/* tests/fuzz/body.c - run every body decoder of the protocol on one body */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "agent/comm.h"
#include "agent/env.h"
#include "agent/mpi.h"
#include "agent/task.h"
#include "daemon/decode.h"
#include "proto/error.h"
#include "proto/mpjson.h"
#include "proto/msg.h"
#include "proto/state.h"
#include "tests/fuzz/body.h"

/* A broken promise: abort, so that libFuzzer records the input. */
#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond))                                                           \
            __builtin_trap();                                                  \
    } while (0)

/* pilotd keeps a spec's strings as JSON (argv, env in the database) and
 * answers list and show in JSON: each must be a JSON string. */
static bool json_ok(const char *s)
{
    json_t *j;

    if (!s)
        return true;
    if (!(j = json_string(s)))
        return false;
    json_decref(j);
    return true;
}

/* -1 must come with errno and a text for a person. */
static void check_refusal(int rc, const struct pl_error *e)
{
    if (rc < 0)
        CHECK(errno != 0 && e->text[0] != '\0');
}

/* ---- pilotd: client requests (daemon/daemon.c, h_*) ---- */

static void submit(const msgpack_object *body)
{
    const msgpack_object *arr = NULL;
    struct pl_error e = { "" };

    /* h_submit: MAX_SUBMIT specs, each through pl_spec_decode() */
    if (pl_mp_array(body, "tasks", true, 100000, &arr, &e) < 0)
        return;
    for (uint32_t i = 0; i < arr->via.array.size; i++) {
        struct pl_spec s;
        e.text[0] = '\0';
        errno = 0;
        int rc = pl_spec_decode(&arr->via.array.ptr[i], &s, &e);
        check_refusal(rc, &e);
        if (rc == 0) {
            CHECK(s.argv && s.argv[0] && s.argv[0][0]);
            CHECK(s.ranks >= 1 && s.ranks <= 65536 && s.cpr >= 1);
            CHECK(isfinite(s.timeout) && s.timeout >= 0);
            CHECK(s.nodes <= s.ranks);
            for (char **p = s.env; p && *p; p++)
                CHECK(strchr(*p, '=') && **p != '=' && json_ok(*p));
            for (char **p = s.argv; *p; p++)
                CHECK(json_ok(*p));
            CHECK(json_ok(s.name) && json_ok(s.cwd));
        }
        else
            CHECK(!s.argv && !s.env && !s.name && !s.cwd);
        pl_spec_clear(&s);
    }
}

static void queries(const msgpack_object *body)
{
    struct pl_error e = { "" };
    char *state = NULL;
    uint64_t *ids = NULL, limit = 0, id = 0;
    uint32_t nids = 0;

    /* h_list */
    if (pl_mp_str(body, "state", false, 16, &state, &e) == 1)
        (void)pl_state_parse(state);
    free(state);
    if (pl_mp_uintv(body, "ids", false, 100000, UINT64_MAX, &ids, &nids, &e)
        == 1)
        free(ids);
    (void)pl_mp_uint(body, "limit", false, UINT64_MAX, &limit, &e);
    /* h_show */
    (void)pl_mp_uint(body, "id", true, UINT64_MAX, &id, &e);
    /* h_cancel (h_counts reads 'ids' as h_list does) */
    ids = NULL;
    if (pl_mp_uintv(body, "ids", true, 100000, UINT64_MAX, &ids, &nids, &e)
        == 1) {
        CHECK(nids <= 100000);
        free(ids);
    }
}

/* ---- pilotd: agent messages (daemon/daemon.c, agent_*) ---- */

static void reg(const msgpack_object *body)
{
    struct pl_agent_reg r;
    struct pl_error e = { "" };

    errno = 0;
    int rc = pl_agent_reg_decode(body, &r, &e);
    check_refusal(rc, &e);
    if (rc == 0) {
        CHECK(r.node && r.node[0] && strlen(r.node) <= 63);
        CHECK(!strpbrk(r.node, ",: \t\n;"));
        CHECK(r.ncpu >= 1 && r.ncpu <= 4096 && r.cpu);
        for (uint32_t i = 0; i < r.ncpu; i++)
            for (uint32_t j = 0; j < i; j++)
                CHECK(r.cpu[i] != r.cpu[j]);
        for (char **g = r.gpus; g && *g; g++) {
            CHECK(**g && !strpbrk(*g, ",;"));
            for (char **h = r.gpus; h < g; h++)
                CHECK(strcmp(*g, *h) != 0);
        }
    }
    else
        CHECK(!r.node && !r.cpu && !r.gpus);
    pl_agent_reg_clear(&r);
}

static void events(const msgpack_object *body)
{
    const msgpack_object *arr = NULL;
    struct pl_error e = { "" };

    if (pl_mp_array(body, "events", true, 1000000, &arr, &e) < 0)
        return;
    for (uint32_t i = 0; i < arr->via.array.size; i++) {
        struct pl_agent_event ev;
        errno = 0;
        int rc = pl_agent_event_decode(&arr->via.array.ptr[i], &ev, &e);
        check_refusal(rc, &e);
        if (rc == 0) {
            CHECK(ev.state && ev.attempt <= UINT32_MAX
                  && ev.rank <= UINT32_MAX);
            (void)pl_state_parse(ev.state);
        }
        else
            CHECK(!ev.state && !ev.error);
        pl_agent_event_clear(&ev);
    }
}

/* ---- the agent (agent/agent.c, *_cb) ---- */

/* What the agent builds from a run entry it accepted, before spawning:
 * the rank's environment and, for MPI, the launcher's argv and files. */
static void run_consumers(const struct pl_task_spec *s)
{
    struct pl_env *env = pl_env_new(NULL);
    struct pl_error e;

    if (!env)
        return;
    (void)pl_comm_env(s, "n1", env, &e);
    /* what an agent in a Slurm job has: pl_mpi_env() orders mpirun's
     * nodes by it */
    (void)pl_env_set(env, "SLURM_JOB_NODELIST", "n[1-4],gpu[01-02]");
    if (s->comm == PL_COMM_MPI) {
        char **argv = pl_mpi_argv(s, "/bin/pilot-agent");
        char *hosts = pl_mpi_hostfile(s);
        char *ranks = pl_mpi_rankfile(s);
        (void)pl_mpi_env(s, "/tmp/x.hosts", false, env, &e);
        pl_strv_free(argv);
        free(hosts);
        free(ranks);
    }
    (void)pl_env_vector(env);
    pl_env_free(env);
}

static void run(const msgpack_object *body)
{
    const msgpack_object *tasks = NULL;
    struct pl_error e = { "" };

    if (pl_mp_array(body, "tasks", true, 100000, &tasks, &e) < 0)
        return;
    for (uint32_t i = 0; i < tasks->via.array.size; i++) {
        struct pl_task_spec s;
        bool have_id;
        errno = 0;
        e.text[0] = '\0';
        int rc = pl_task_spec_decode(&tasks->via.array.ptr[i], &s, &have_id,
                                     &e);
        check_refusal(rc, &e);
        if (rc == 0) {
            CHECK(have_id && s.argv && s.argv[0] && s.ncores >= 1);
            CHECK(s.size >= 1 && s.rank < s.size);
            CHECK(s.local_size >= 1 && s.local_rank < s.local_size
                  && s.local_size <= s.size);
            CHECK(s.out && s.out[0] && s.err && s.err[0]);
            CHECK(isfinite(s.timeout) && s.timeout >= 0);
            if (s.comm == PL_COMM_TORCH)
                CHECK(s.master_addr && s.master_addr[0] && s.master_port);
            if (s.comm == PL_COMM_MPI)
                CHECK(s.hosts && pl_strv_len(s.hosts) == s.size
                      && s.rank_cores);
            run_consumers(&s);
        }
        pl_task_spec_release(&s);
    }
}

static void agent_msgs(const msgpack_object *body)
{
    struct pl_error e;
    char *node = NULL, *text = NULL;
    double hb, grace;
    uint64_t id, attempt, rank;
    int64_t errnum;

    /* welcome_cb */
    if (pl_mp_str(body, "node", true, 255, &node, &e) == 1)
        free(node);
    (void)pl_mp_double(body, "heartbeat", true, &hb, &e);
    /* kill_cb */
    (void)pl_mp_uint(body, "id", true, UINT64_MAX, &id, &e);
    (void)pl_mp_uint(body, "attempt", true, UINT32_MAX, &attempt, &e);
    (void)pl_mp_uint(body, "rank", false, UINT32_MAX, &rank, &e);
    (void)pl_mp_double(body, "grace", true, &grace, &e);
    /* reply_cb */
    (void)pl_mp_int(body, "errno", true, &errnum, &e);
    if (pl_mp_str(body, "error", false, 1024, &text, &e) == 1)
        free(text);
}

/* ---- the CLI: a reply (proto/rpc.c, client/conn.c) ---- */

static void reply(const msgpack_object *body)
{
    struct pl_error e;
    char *text = NULL;
    int64_t errnum;
    const msgpack_object *data;

    (void)pl_mp_int(body, "errno", true, &errnum, &e);
    if (pl_mp_str(body, "error", false, 4096, &text, &e) == 1)
        free(text);
    if ((data = pl_mp_get(body, "data"))) {
        json_t *j = pl_mpjson_to_json(data);
        if (j) {
            char *s = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
            free(s);
        }
        json_decref(j);
    }
}

void fuzz_body(const msgpack_object *body)
{
    submit(body);
    queries(body);
    reg(body);
    events(body);
    run(body);
    agent_msgs(body);
    reply(body);
}
