/* tests/fuzz/mkcorpus.c - write the fuzzers' seed corpus: valid messages
 *
 * mkcorpus DIR writes DIR/msg/<type>-N (one whole frame of each message
 * type, as pilotd, the agent and the CLI send them) and DIR/task/<kind>-N
 * (one task entry alone: run entries, submit specs, an event) for
 * tests/fuzz/fuzz_msg.c and fuzz_task.c, and the text files of the other
 * targets: DIR/keys/ (key files), DIR/pilotdir/ (endpoint and info
 * files), DIR/taskfile/ (submit files), DIR/reply/ (reply bodies) and
 * DIR/agentseq/ (sequences of agent frames).  `make fuzz-corpus` runs
 * it; the output is committed, so a change here shows up in the diff.
 * N.B. the keys are fixed ones, made once for the corpus: the output of
 * a second run is the same.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "proto/agentmsg.h"
#include "proto/allocmsg.h"
#include "proto/msg.h"
#include "proto/clientmsg.h"
#include "proto/poolmsg.h"
#include "proto/pilotdir.h"
#include "proto/run.h"
#include "proto/spec.h"
#include "proto/state.h"
#include "proto/vetconf.h"
#include "proto/vetmsg.h"
#include "proto/tlmsg.h"
#include "proto/watchmsg.h"
#include "tests/mpw.h"

static const char *outdir;

static void put(const char *sub, const char *name, const void *buf,
                size_t len)
{
    char path[4096];
    FILE *fp;

    snprintf(path, sizeof(path), "%s/%s", outdir, sub);
    if (mkdir(path, 0755) < 0 && errno != EEXIST) {
        perror(path);
        exit(1);
    }
    snprintf(path, sizeof(path), "%s/%s/%s", outdir, sub, name);
    if (!(fp = fopen(path, "wb")) || fwrite(buf, 1, len, fp) != len
        || fclose(fp) != 0) {
        perror(path);
        exit(1);
    }
}

static const char *msg_dir = "msg";

static void put_msg(const char *name, struct pl_wbuf *w)
{
    struct pl_msg m;
    struct pl_error e;

    /* every seed must be valid, or it seeds nothing */
    if (pl_msg_decode(w->sb.data, w->sb.size, &m, &e) < 0) {
        fprintf(stderr, "mkcorpus: %s does not decode: %s\n", name, e.text);
        exit(1);
    }
    pl_msg_release(&m);
    put(msg_dir, name, w->sb.data, w->sb.size);
    pl_wbuf_destroy(w);
}

/* One object packed alone, for fuzz_task. */
typedef void (*entry_f)(msgpack_packer *pk);

/* 0 if the decoder of 'kind' accepts 'o': a seed the decoder refuses
 * would only seed its first checks. */
static int accepted(const char *kind, const msgpack_object *o,
                    struct pl_error *e)
{
    int rc;

    if (!strcmp(kind, "spec")) {
        struct pl_spec s;
        if ((rc = pl_spec_decode(o, &s, e)) == 0)
            pl_spec_clear(&s);
    }
    else if (!strcmp(kind, "run")) {
        struct pl_run s;
        bool have_id;
        rc = pl_run_decode(o, &s, &have_id, e);
        pl_run_clear(&s);
    }
    else {
        struct pl_event ev;
        if ((rc = pl_event_decode(o, &ev, e)) == 0)
            pl_event_clear(&ev);
    }
    return rc;
}

static void put_entry(const char *name, entry_f f)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_unpacked up;
    struct pl_error e;
    char kind[16];

    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    f(&pk);
    msgpack_unpacked_init(&up);
    snprintf(kind, sizeof(kind), "%.*s", (int)strcspn(name, "-"), name);
    if (msgpack_unpack_next(&up, sb.data, sb.size, NULL)
            != MSGPACK_UNPACK_SUCCESS
        || accepted(kind, &up.data, &e) < 0) {
        fprintf(stderr, "mkcorpus: %s is refused: %s\n", name, e.text);
        exit(1);
    }
    msgpack_unpacked_destroy(&up);
    put("task", name, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
}

/* ---- task specs (as the CLI sends them: proto/spec.c) ---- */

static char a_sh[] = "sh", a_c[] = "-c", a_cmd[] = "echo $PILOT_RANK";
static char *argv3[] = { a_sh, a_c, a_cmd, NULL };
static char e_a[] = "A=1", e_b[] = "PATH=/usr/bin:/bin";
static char *env2[] = { e_a, e_b, NULL };
static char t_a[] = "model=lstm", t_b[] = "stage.n=2";
static char *tags2[] = { t_a, t_b, NULL };

static void spec_min(msgpack_packer *pk)
{
    msgpack_pack_map(pk, 1);
    raw_kstrv(pk, "argv", argv3);
}

static void spec_full(msgpack_packer *pk)
{
    msgpack_pack_map(pk, 20);
    raw_kstrv(pk, "argv", argv3);
    raw_kstr(pk, "name", "train");
    raw_kuint(pk, "append", 7);
    raw_key(pk, "priority");
    msgpack_pack_int64(pk, -5);
    raw_kstrv(pk, "tags", tags2);
    raw_kuint(pk, "retry_failed", 40);
    raw_key(pk, "after");
    msgpack_pack_array(pk, 2);
    msgpack_pack_map(pk, 2);
    raw_kuint(pk, "id", 12);
    raw_kuint(pk, "index", 3);
    msgpack_pack_map(pk, 2);
    raw_kstr(pk, "name", "prep");
    raw_kbool(pk, "any", true);
    raw_key(pk, "array");
    msgpack_pack_array(pk, 3);
    msgpack_pack_uint64(pk, 0);
    msgpack_pack_uint64(pk, 99);
    msgpack_pack_uint64(pk, 3);
    raw_kstr(pk, "cwd", "/tmp");
    raw_kstrv(pk, "env", env2);
    raw_kuint(pk, "ranks", 8);
    raw_kuint(pk, "nodes", 2);
    raw_kuint(pk, "ranks_per_node", 4);
    raw_kbool(pk, "exclusive", true);
    raw_kstr(pk, "comm", "mpi");
    raw_kstr(pk, "launcher", "mpirun");
    raw_kuint(pk, "cores_per_rank", 2);
    raw_kuint(pk, "gpus_per_rank", 0);
    raw_kdouble(pk, "timeout", 30.5);
    raw_kuint(pk, "retries", 2);
}

static void spec_torch(msgpack_packer *pk)
{
    msgpack_pack_map(pk, 5);
    raw_kstrv(pk, "argv", argv3);
    raw_kuint(pk, "nodes", 2);
    raw_kuint(pk, "ranks_per_node", 2);
    raw_kstr(pk, "comm", "torch");
    raw_kuint(pk, "gpus_per_rank", 1);
}

/* ---- run entries (as pilotd sends them: proto/run.c) ---- */

/* id, attempt, argv, env, cwd: 5 pairs */
static void run_head(msgpack_packer *pk, uint64_t id)
{
    raw_kuint(pk, "id", id);
    raw_kuint(pk, "attempt", 1);
    raw_kstrv(pk, "argv", argv3);
    raw_kstrv(pk, "env", env2);
    raw_kstr(pk, "cwd", "/tmp");
}

static void run_common(msgpack_packer *pk, uint64_t id)
{
    uint64_t cores[] = { 0, 1 };
    uint64_t gpus[] = { 0 };

    run_head(pk, id);
    raw_kuintv(pk, "cores", cores, 2);
    raw_kuintv(pk, "gpus", gpus, 1);
    raw_kstr(pk, "stdout", "/tmp/p1/tasks/0/7.out");
    raw_kstr(pk, "stderr", "/tmp/p1/tasks/0/7.err");
    raw_kdouble(pk, "timeout", 60);
}

static char n1[] = "n1", n2[] = "n2";
static char *nodes2[] = { n1, n2, NULL };

static void run_rank(msgpack_packer *pk, const char *comm)
{
    raw_kuint(pk, "rank", 1);
    raw_kuint(pk, "size", 4);
    raw_kuint(pk, "local_rank", 1);
    raw_kuint(pk, "local_size", 2);
    raw_kuint(pk, "node_rank", 0);
    raw_kstrv(pk, "nodelist", nodes2);
    raw_kstr(pk, "comm", comm);
}

static void run_none(msgpack_packer *pk)
{
    msgpack_pack_map(pk, 10);
    run_common(pk, 7);
}

static void run_torch(msgpack_packer *pk)
{
    msgpack_pack_map(pk, 19);
    run_common(pk, 8);
    run_rank(pk, "torch");
    raw_kstr(pk, "master_addr", "n1");
    raw_kuint(pk, "master_port", 20001);
}

/* a prefetched entry (protocol 13): no cores or GPUs yet, the cores it
 * takes once an end frees them */
static void run_prefetch(msgpack_packer *pk)
{
    uint64_t none[] = { 0 };

    msgpack_pack_map(pk, 10);
    run_head(pk, 9);
    raw_kuintv(pk, "cores", none, 0);
    raw_kuintv(pk, "gpus", none, 0);
    raw_kuint(pk, "prefetch", 2);
    raw_kstr(pk, "stdout", "/tmp/p1/tasks/0/9.out");
    raw_kstr(pk, "stderr", "/tmp/p1/tasks/0/9.err");
}

/* a pool task's rank 1 of 2, in worker 3 of the pool's job 2 */
static void run_pool(msgpack_packer *pk)
{
    static char fn[] = "/tmp/lib.so:join", a1[] = "100";
    char *argv[] = { fn, a1, NULL };
    uint64_t group[] = { 2, 3 };

    msgpack_pack_map(pk, 18);
    raw_kuint(pk, "id", 8);
    raw_kuint(pk, "attempt", 1);
    raw_kstrv(pk, "argv", argv);
    raw_kstr(pk, "cwd", "/tmp");
    raw_kuintv(pk, "cores", group, 0);
    raw_kstr(pk, "stdout", "/tmp/p1/tasks/0/8.out");
    raw_kstr(pk, "stderr", "/tmp/p1/tasks/0/8.err");
    raw_kuint(pk, "rank", 1);
    raw_kuint(pk, "size", 2);
    raw_kuint(pk, "local_rank", 1);
    raw_kuint(pk, "local_size", 2);
    raw_kuint(pk, "node_rank", 0);
    raw_kstr(pk, "pool", "etl");
    raw_kstr(pk, "fn", "c");
    raw_kuint(pk, "pool_job", 2);
    raw_kuint(pk, "pool_attempt", 1);
    raw_kuint(pk, "world_rank", 3);
    raw_kuintv(pk, "group", group, 2);
}

static void run_pycall(msgpack_packer *pk)
{
    static char fn[] = "pickled";
    char *argv[] = { fn, NULL };
    uint64_t core[] = { 0 };
    static const unsigned char in[] = { 0x80, 0x05, 0x95, 0x00 };

    msgpack_pack_map(pk, 11);
    raw_kuint(pk, "id", 9);
    raw_kuint(pk, "attempt", 1);
    raw_kstrv(pk, "argv", argv);
    raw_kstr(pk, "cwd", "/tmp");
    raw_kuintv(pk, "cores", core, 1);
    raw_kstr(pk, "stdout", "/tmp/p1/tasks/0/9.out");
    raw_kstr(pk, "stderr", "/tmp/p1/tasks/0/9.err");
    raw_kstr(pk, "fn", "pycall");
    msgpack_pack_str(pk, 5);
    msgpack_pack_str_body(pk, "input", 5);
    msgpack_pack_bin(pk, sizeof(in));
    msgpack_pack_bin_body(pk, in, sizeof(in));
    raw_kstr(pk, "py_prelude", "import os");
    raw_kstr(pk, "result_file", "/tmp/p1/tasks/0/9.result");
}

/* a pickled call that receives the values of calls 7 (inline), 8 (in
 * a file) and 6 (none) */
static void run_pycall_refs(msgpack_packer *pk)
{
    static char fn[] = "pickled";
    char *argv[] = { fn, NULL };
    uint64_t core[] = { 0 };
    static const unsigned char in[] = { 0x80, 0x05, 0x95, 0x00 };

    msgpack_pack_map(pk, 10);
    raw_kuint(pk, "id", 9);
    raw_kuint(pk, "attempt", 1);
    raw_kstrv(pk, "argv", argv);
    raw_kuintv(pk, "cores", core, 1);
    raw_kstr(pk, "stdout", "/tmp/p1/tasks/0/9.out");
    raw_kstr(pk, "stderr", "/tmp/p1/tasks/0/9.err");
    raw_kstr(pk, "fn", "pycall");
    raw_key(pk, "input");
    msgpack_pack_bin(pk, sizeof(in));
    msgpack_pack_bin_body(pk, in, sizeof(in));
    raw_kstr(pk, "result_file", "/tmp/p1/tasks/0/9.result");
    raw_key(pk, "refs");
    msgpack_pack_array(pk, 3);
    msgpack_pack_map(pk, 3);
    raw_kuint(pk, "id", 7);
    raw_kstr(pk, "status", "ok");
    raw_key(pk, "data");
    msgpack_pack_bin(pk, 3);
    msgpack_pack_bin_body(pk, "\x80\x05K", 3);
    msgpack_pack_map(pk, 3);
    raw_kuint(pk, "id", 8);
    raw_kstr(pk, "status", "raised");
    raw_kstr(pk, "file", "/tmp/p1/tasks/0/8.result");
    msgpack_pack_map(pk, 2);
    raw_kuint(pk, "id", 6);
    raw_kstr(pk, "status", "none");
}

/* a pickled call spec with refs, each in its after */
static void spec_refs(msgpack_packer *pk)
{
    static char fn[] = "pickled";
    char *argv[] = { fn, NULL };
    uint64_t refs[] = { 7, 8 };
    static const unsigned char in[] = { 0x80, 0x05, 0x95, 0x00 };

    msgpack_pack_map(pk, 5);
    raw_kstrv(pk, "argv", argv);
    raw_kstr(pk, "fn", "pycall");
    raw_key(pk, "input");
    msgpack_pack_bin(pk, sizeof(in));
    msgpack_pack_bin_body(pk, in, sizeof(in));
    raw_kuintv(pk, "refs", refs, 2);
    raw_key(pk, "after");
    msgpack_pack_array(pk, 2);
    msgpack_pack_map(pk, 1);
    raw_kuint(pk, "id", 7);
    msgpack_pack_map(pk, 1);
    raw_kuint(pk, "id", 8);
}

static void run_mpi(msgpack_packer *pk)
{
    char *hosts[] = { n1, n1, n2, n2, NULL };
    static const char *g[] = { "0", "1", "0", "1" };

    msgpack_pack_map(pk, 21);
    run_common(pk, 9);
    raw_kuint(pk, "rank", 0);
    raw_kuint(pk, "size", 4);
    raw_kuint(pk, "local_rank", 0);
    raw_kuint(pk, "local_size", 2);
    raw_kuint(pk, "node_rank", 0);
    raw_kstrv(pk, "nodelist", nodes2);
    raw_kstr(pk, "comm", "mpi");
    raw_kstr(pk, "launcher", "srun");
    raw_kstrv(pk, "hosts", hosts);
    raw_key(pk, "rank_cores");
    msgpack_pack_array(pk, 4);
    for (int r = 0; r < 4; r++) {
        msgpack_pack_array(pk, 2);
        msgpack_pack_uint64(pk, 2 * (r % 2));
        msgpack_pack_uint64(pk, 2 * (r % 2) + 1);
    }
    raw_key(pk, "rank_gpus");
    msgpack_pack_array(pk, 4);
    for (int r = 0; r < 4; r++) {
        msgpack_pack_array(pk, 1);
        pl_w_str(pk, g[r]);
    }
}

/* ---- agent events (as agents send them: proto/agentmsg.c) ---- */

static void event_full(msgpack_packer *pk)
{
    msgpack_pack_map(pk, 10);
    raw_kuint(pk, "id", 7);
    raw_kuint(pk, "attempt", 1);
    raw_kuint(pk, "rank", 0);
    raw_kstr(pk, "state", "failed");
    raw_kdouble(pk, "time", 1700000000.25);
    raw_kuint(pk, "pid", 4242);
    raw_kint(pk, "exit_code", 127);
    raw_kint(pk, "signal", 0);
    raw_kuint(pk, "maxrss_kb", 2048);
    raw_kstr(pk, "error", "spawn: no such file or directory");
}

static void event_result(msgpack_packer *pk)
{
    msgpack_pack_map(pk, 10);
    raw_kuint(pk, "id", 9);
    raw_kuint(pk, "attempt", 1);
    raw_kuint(pk, "rank", 0);
    raw_kstr(pk, "state", "done");
    raw_kdouble(pk, "time", 1700000000.75);
    raw_kint(pk, "exit_code", 0);
    raw_kstr(pk, "result_status", "ok");
    raw_kuint(pk, "result_size", 4);
    msgpack_pack_str(pk, 6);
    msgpack_pack_str_body(pk, "result", 6);
    msgpack_pack_bin(pk, 4);
    msgpack_pack_bin_body(pk, "\x80\x05K\x02", 4);
    raw_kstr(pk, "result_repr", "2");
}

static void event_running(msgpack_packer *pk)
{
    msgpack_pack_map(pk, 6);
    raw_kuint(pk, "id", 8);
    raw_kuint(pk, "attempt", 1);
    raw_kuint(pk, "rank", 3);
    raw_kstr(pk, "state", "running");
    raw_kdouble(pk, "time", 1700000000.5);
    raw_kuint(pk, "pid", 4243);
}

/* ---- a warm Python worker's frames (proto/pywmsg.h) ---- */

/* Frames from a worker, as the agent reads them: each a 4-byte length,
 * a 4-byte header length, the JSON header and the payload. */
static size_t pyframe(unsigned char *buf, const char *h, const char *data)
{
    size_t hl = strlen(h), dl = strlen(data), n = 4 + hl + dl;

    for (int i = 0; i < 4; i++) {
        buf[i] = (unsigned char)(n >> (24 - 8 * i));
        buf[4 + i] = (unsigned char)(hl >> (24 - 8 * i));
    }
    memcpy(buf + 8, h, hl);
    memcpy(buf + 8 + hl, data, dl);
    return 4 + n;
}

static void pywmsg(void)
{
    unsigned char buf[2048];
    size_t n;

    n = pyframe(buf, "{\"kind\":406,\"pid\":77,\"version\":\"3.11.2\"}",
                "");
    put("pywmsg", "hello", buf, n);
    n += pyframe(buf + n, "{\"kind\":409,\"id\":3,\"attempt\":1}", "");
    n += pyframe(buf + n, "{\"kind\":408,\"id\":3,\"attempt\":1,"
                 "\"status\":\"ok\",\"size\":5,\"repr\":\"5\"}",
                 "\x80\x05K\x05.");
    put("pywmsg", "hello-result", buf, n);
    n = pyframe(buf, "{\"kind\":408,\"id\":3,\"attempt\":2,"
                "\"status\":\"raised\",\"size\":70000,\"file\":"
                "\"/tmp/p1/tasks/0/3.2.result\",\"reason\":\"ValueError: "
                "x\",\"interrupted\":false}", "");
    put("pywmsg", "result-file", buf, n);
    n = pyframe(buf, "{\"kind\":408,\"id\":3,\"attempt\":1,"
                "\"status\":\"error\",\"reason\":\"the prelude failed: "
                "ImportError: no torch\"}", "");
    put("pywmsg", "result-error", buf, n);
}

/* ---- key files (proto/keys.c, proto/allow.c) ---- */

static void put_text(const char *sub, const char *name, const char *text)
{
    put(sub, name, text, strlen(text));
}

#define PUB_A "LE{qsa4[B8Ja1]?]+)=UnZXvyXCoupbIaGh@I/Gn"
#define SEC_A "*OBZ3u8S}JnyTun?jd8RL347R>+uj9iX}jDeR#j$"
#define PUB_B "+hG&Asul&z^B8.xT0*R}Sj&DDoq#)^=5#peK1ONF"

static void keys(void)
{
    put_text("keys", "pair-1", "# pilot: a CURVE keypair (Z85); the secret "
             "key must stay private\npublic " PUB_A "\nsecret " SEC_A "\n");
    put_text("keys", "pub-1", "# pilot: a CURVE public key (Z85)\npublic "
             PUB_B "\n");
    put_text("keys", "allow-1", "# pilot: a CURVE public key (Z85) and what "
             "it may do\npublic " PUB_B "\nrole submit\nadded 1718000000\n");
    put_text("keys", "allow-2", "public " PUB_A "\r\nrole read \nadded 0\n");
}

/* ---- the pilot directory's endpoint and info files (proto/pilotdir.c) */

static void pilotdir(void)
{
    char text[1200], host[520];

    put_text("pilotdir", "endpoint-1", "client tcp://10.0.0.1:5000\nagent "
             "tcp://10.0.0.1:5001\nhost node-a12\npid 4242\njob 1234567\n");
    put_text("pilotdir", "endpoint-2", "client tcp://127.0.0.1:40001\nagent "
             "tcp://127.0.0.1:40002\nhost login1\npid 77\njob 0\n");
    put_text("pilotdir", "info-1", "id p12\nmode slurm\njob 99\nnodes 3\n"
             "created 1700000000.125\n");
    put_text("pilotdir", "info-2", "id p1\nmode local\njob 0\nnodes 1\n"
             "created 1718000000.000\n");
    /* a line of 511 bytes, the most there may be */
    memset(host, 'h', sizeof(host));
    snprintf(text, sizeof(text), "client tcp://a:1\nagent tcp://a:2\nhost "
             "%.*s\n", PL_KV_LINE_MAX - 5, host);
    put_text("pilotdir", "endpoint-long", text);
}

/* ---- task files (client/taskfile.c): a byte for the reader, 0 JSONL
 * and 1 YAML, then the file ---- */

static void put_taskfile(const char *name, bool yaml, const char *text)
{
    char buf[2048];
    size_t n = strlen(text);

    buf[0] = yaml ? 1 : 0;
    memcpy(buf + 1, text, n);
    put("taskfile", name, buf, n + 1);
}

static void taskfiles(void)
{
    put_taskfile("jsonl-1", false, "# a comment\n\n"
                 "{\"name\": \"a\", \"cmd\": \"echo 1\"}\n"
                 "{\"argv\": [\"b\", \"c d\"], \"cwd\": \"sub\", "
                 "\"after\": [\"a\"]}\r\n");
    put_taskfile("jsonl-2", false, "{\"name\": \"t\", \"cmd\": \"x\", "
                 "\"ranks\": 8, \"nodes\": 2, \"comm\": \"mpi\", "
                 "\"launcher\": \"mpirun\", \"timeout\": 30.5, "
                 "\"priority\": -5, \"tags\": {\"model\": \"lstm\"}, "
                 "\"env\": {\"A\": \"1\"}, \"array\": [0, 99, 3], "
                 "\"retries\": 2, \"gpus_per_rank\": 1, "
                 "\"cores_per_rank\": 2, \"exclusive\": true}\n"
                 "{\"cmd\": \"y\", \"after\": [{\"id\": 12}, "
                 "{\"name\": \"t\", \"any\": true}]}\n");
    put_taskfile("yaml-1", true, "# a pipeline\ntasks:\n"
                 "  - name: ytrain\n    cmd: cat a\n    after: [yprep]\n"
                 "    tags: {model: mlp, epochs: 3}\n    priority: 2\n"
                 "  - name: yprep\n    argv: [true, 3, \"x y\"]\n"
                 "    env: {X: 42}\n    timeout: 10m\n"
                 "  - {name: null, cmd: x, ranks: 2, exclusive: true}\n");
    put_taskfile("yaml-2", true, "- cmd: a\n- cmd: b\n  after: a\n");
    put_taskfile("yaml-alias", true, "- &t {name: a, cmd: x, tags: &g "
                 "{k: v, n: 1}}\n- {name: b, cmd: y, tags: *g, after: a}\n"
                 "- {cmd: z, ranks: 1e3, timeout: 1.5e2}\n");
}

/* ---- replies, as the CLI reads them (client/output.c) ---- */

static void replies(void)
{
    struct pl_wbuf w;
    uint64_t cores[] = { 0, 1, 2, 3 };

    msg_dir = "reply";
    /* a list: tasks with their times, sizes, placements */
    pl_wbuf_reply(&w, 3, 0, NULL);
    msgpack_pack_array(&w.pk, 2);
    msgpack_pack_map(&w.pk, 12);
    raw_kuint(&w.pk, "id", 7);
    raw_kstr(&w.pk, "name", "train");
    raw_kstr(&w.pk, "state", "running");
    raw_kdouble(&w.pk, "submitted", 1700000000.25);
    raw_kdouble(&w.pk, "started", 1700000001.5);
    raw_kdouble(&w.pk, "ended", 1e300);
    raw_kdouble(&w.pk, "runtime", 98765.5);
    raw_kint(&w.pk, "maxrss_kb", 123456789);
    raw_kuint(&w.pk, "attempts", 2);
    raw_kuintv(&w.pk, "cores", cores, 4);
    raw_kstrv(&w.pk, "argv", argv3);
    raw_kstr(&w.pk, "nodes", "n1,n2,n3,node-with-a-long-name");
    msgpack_pack_map(&w.pk, 3);
    raw_kuint(&w.pk, "id", 8);
    raw_kstr(&w.pk, "state", "done");
    raw_kdouble(&w.pk, "runtime", -1.5);
    put_msg("list-1", &w);
    /* counts, as pilot wait reads them */
    pl_wbuf_reply(&w, 4, 0, NULL);
    msgpack_pack_map(&w.pk, 4);
    raw_kuint(&w.pk, "total", 10);
    raw_kuint(&w.pk, "done", 7);
    raw_kuint(&w.pk, "failed", 1);
    raw_kuintv(&w.pk, "unknown", cores, 2);
    put_msg("counts-1", &w);
    /* status */
    pl_wbuf_reply(&w, 5, 0, NULL);
    msgpack_pack_map(&w.pk, 5);
    raw_kstr(&w.pk, "pilot", "p1");
    raw_kdouble(&w.pk, "walltime_left", 3600.5);
    raw_kdouble(&w.pk, "started", 1700000000.0);
    raw_key(&w.pk, "nodes");
    msgpack_pack_array(&w.pk, 1);
    msgpack_pack_map(&w.pk, 3);
    raw_kstr(&w.pk, "name", "n1");
    raw_kuint(&w.pk, "cores_busy", 3);
    raw_kuint(&w.pk, "running", 2);
    raw_key(&w.pk, "tasks");
    msgpack_pack_map(&w.pk, 2);
    raw_kuint(&w.pk, "pending", 4);
    raw_kuint(&w.pk, "running", 2);
    put_msg("status-1", &w);
    pl_wbuf_reply(&w, 6, 2, "no task 7");
    put_msg("error-1", &w);
    msg_dir = "msg";
}

/* ---- sequences of agent frames (tests/fuzz/fuzz_agentseq.c): pieces
 * [agent][length, 2 bytes LE][frame].  Its pilotd holds tasks 1..7: one
 * rank, one rank, two ranks, an MPI job of three, one after task 1, one
 * with retries, four ranks. ---- */

static struct {
    unsigned char buf[8192];
    size_t len;
} seq;

static void piece(int agent, struct pl_wbuf *w)
{
    size_t n = w->sb.size;

    if (seq.len + 3 + n > sizeof(seq.buf)) {
        fprintf(stderr, "mkcorpus: a sequence too long\n");
        exit(1);
    }
    seq.buf[seq.len++] = (unsigned char)agent;
    seq.buf[seq.len++] = (unsigned char)(n & 0xff);
    seq.buf[seq.len++] = (unsigned char)(n >> 8);
    memcpy(seq.buf + seq.len, w->sb.data, n);
    seq.len += n;
    pl_wbuf_destroy(w);
}

static void seq_register(int agent, uint64_t s, const char *node,
                         uint64_t pid, uint32_t ncores, uint64_t last_run,
                         struct pl_held *running, uint32_t nrunning,
                         struct pl_event *ended, uint32_t nended)
{
    uint64_t cpu[16];
    struct pl_wbuf w;

    for (uint32_t i = 0; i < ncores; i++)
        cpu[i] = i;
    struct pl_register r = { .node = (char *)node, .pid = pid, .cpu = cpu,
                             .ncpu = ncores, .last_run = last_run,
                             .running = running, .nrunning = nrunning,
                             .ended = ended, .nended = nended };
    pl_register_encode(&w, s, &r);
    piece(agent, &w);
}

/* Events of 'agent': (id, attempt, rank, state, core + 1 or 0) each:
 * a 'running' with a core is a prefetched task's start. */
static void seq_events5(int agent, uint64_t s, const uint64_t (*ev)[5],
                        uint32_t n)
{
    struct pl_wbuf w;

    pl_events_begin(&w, s, n);
    for (uint32_t i = 0; i < n; i++) {
        struct pl_event e;
        uint64_t core = ev[i][4] ? ev[i][4] - 1 : 0;
        pl_event_init(&e, ev[i][0], ev[i][1], ev[i][2], (int)ev[i][3],
                      1700000000.0 + i);
        if (ev[i][3] == PL_ST_FAILED)
            e.exit_code = 3;
        if (ev[i][4]) {
            e.cores = &core;
            e.ncores = 1;
        }
        pl_event_encode(&w, &e);
    }
    piece(agent, &w);
}

/* Events of 'agent': (id, attempt, rank, state) each. */
static void seq_events(int agent, uint64_t s, const uint64_t (*ev)[4],
                       uint32_t n)
{
    uint64_t ev5[16][5];

    for (uint32_t i = 0; i < n && i < 16; i++) {
        memcpy(ev5[i], ev[i], sizeof(ev[i]));
        ev5[i][4] = 0;
    }
    seq_events5(agent, s, (const uint64_t(*)[5])ev5, n < 16 ? n : 16);
}

static void seq_got(int agent, uint64_t s, uint64_t got)
{
    struct pl_wbuf w;

    pl_got_encode(&w, s, got);
    piece(agent, &w);
}

static void seq_pull(int agent, uint64_t s)
{
    struct pl_wbuf w;
    struct pl_pull p = { .free_cores = 4 };

    pl_pull_encode(&w, s, &p);
    piece(agent, &w);
}

static void seq_bare(int agent, int type, uint64_t s)
{
    struct pl_wbuf w;

    pl_bare_encode(&w, type, s);
    piece(agent, &w);
}

static void seq_put(const char *name)
{
    put("agentseq", name, seq.buf, seq.len);
    seq.len = 0;
}

static void agentseqs(void)
{
    enum { R = PL_ST_RUNNING, D = PL_ST_DONE, F = PL_ST_FAILED,
           C = PL_ST_CANCELED };

    /* one agent of 4 cores: tasks 1, 2, 3 run and end, then the rest */
    seq_register(0, 1, "n1", 100, 4, 0, NULL, 0, NULL, 0);
    seq_pull(0, 2);
    seq_got(0, 3, 1);
    seq_events(0, 4, (const uint64_t[][4]){ { 1, 1, 0, R }, { 2, 1, 0, R },
                                            { 3, 1, 0, R }, { 3, 1, 1, R } },
               4);
    seq_events(0, 5, (const uint64_t[][4]){ { 1, 1, 0, D }, { 2, 1, 0, F } },
               2);
    seq_pull(0, 6);
    seq_bare(0, PL_MSG_HEARTBEAT, 7);
    seq_events(0, 8, (const uint64_t[][4]){ { 3, 1, 0, D }, { 3, 1, 1, D },
                                            { 5, 1, 0, R }, { 4, 1, 0, R } },
               4);
    seq_got(0, 9, 3);
    seq_events(0, 10, (const uint64_t[][4]){ { 4, 1, 0, D }, { 5, 1, 0, D },
                                             { 6, 1, 0, R }, { 6, 1, 0, F } },
               4);
    seq_pull(0, 11);
    seq_events(0, 12, (const uint64_t[][4]){ { 6, 2, 0, R }, { 7, 1, 0, R },
                                             { 7, 1, 1, R }, { 7, 1, 2, R },
                                             { 7, 1, 3, R } },
               5);
    seq_events(0, 13, (const uint64_t[][4]){ { 6, 2, 0, D }, { 7, 1, 0, D },
                                             { 7, 1, 1, D }, { 7, 1, 2, F },
                                             { 7, 1, 3, D } },
               5);
    seq_got(0, 14, 6);
    seq_put("one-agent");

    /* two agents of 2 cores, one restarts (another pid) and loses its
     * tasks, a third comes as a second agent for n1 */
    seq_register(0, 1, "n1", 100, 2, 0, NULL, 0, NULL, 0);
    seq_register(1, 1, "n2", 200, 2, 0, NULL, 0, NULL, 0);
    seq_pull(1, 2);
    seq_events(1, 2, (const uint64_t[][4]){ { 3, 1, 0, R }, { 3, 1, 1, R } },
               2);
    seq_events(0, 2, (const uint64_t[][4]){ { 1, 1, 0, R }, { 2, 1, 0, R } },
               2);
    seq_register(1, 3, "n2", 201, 2, 0, NULL, 0, NULL, 0);
    seq_register(2, 1, "n1", 300, 2, 0, NULL, 0, NULL, 0);
    seq_events(0, 3, (const uint64_t[][4]){ { 1, 1, 0, D }, { 2, 1, 0, D } },
               2);
    seq_got(1, 4, 2);
    seq_put("restart");

    /* an agent that comes back with what it runs and what ended (the same
     * pid: adopt), and events out of turn */
    struct pl_held run[] = { { .id = 1, .attempt = 1 },
                             { .id = 9, .attempt = 1 } };
    struct pl_event end;
    pl_event_init(&end, 2, 1, 0, PL_ST_DONE, 1700000001.0);
    seq_register(0, 1, "n1", 100, 4, 0, NULL, 0, NULL, 0);
    seq_pull(0, 2);
    seq_events(0, 2, (const uint64_t[][4]){ { 2, 1, 0, R }, { 1, 1, 0, D } },
               2);
    seq_register(0, 3, "n1", 100, 4, 2, run, 2, &end, 1);
    seq_events(0, 4, (const uint64_t[][4]){ { 1, 1, 0, R }, { 1, 2, 0, D },
                                            { 7, 1, 3, R } },
               3);
    seq_bare(1, PL_MSG_HEARTBEAT, 1);
    seq_put("rejoin");

    /* prefetch (its pilotd holds 2 a node beyond the free cores): one
     * agent of 4 cores; tasks start on the cores of the ends before them
     * in the message, on a core still held, and are given back */
    seq_register(0, 1, "n1", 100, 4, 0, NULL, 0, NULL, 0);
    seq_got(0, 2, 1);
    seq_events5(0, 3, (const uint64_t[][5]){ { 1, 1, 0, R, 0 },
                                             { 2, 1, 0, R, 0 },
                                             { 3, 1, 0, R, 0 },
                                             { 3, 1, 1, R, 0 } },
                4);
    seq_events5(0, 4, (const uint64_t[][5]){ { 1, 1, 0, D, 0 },
                                             { 2, 1, 0, D, 0 },
                                             { 3, 1, 0, D, 0 },
                                             { 3, 1, 1, D, 0 } },
                4);
    seq_got(0, 5, 2);
    seq_events5(0, 6, (const uint64_t[][5]){ { 4, 1, 0, R, 0 },
                                             { 5, 1, 0, R, 0 },
                                             { 5, 1, 0, D, 0 },
                                             { 6, 1, 0, R, 4 } },
                4);
    seq_events5(0, 7, (const uint64_t[][5]){ { 6, 1, 0, D, 0 },
                                             { 7, 1, 0, R, 4 },
                                             { 4, 1, 0, F, 0 },
                                             { 6, 1, 0, R, 1 } },
                4);
    seq_events5(0, 8, (const uint64_t[][5]){ { 7, 1, 0, C, 0 } }, 1);
    seq_put("prefetch");
}

static void messages(void)
{
    struct pl_wbuf w;
    uint64_t ids[] = { 1, 2, 3 };
    uint64_t cores[] = { 0, 1, 2, 3 };
    char g0[] = "0", g1[] = "1";
    char *gpus[] = { g0, g1, NULL };

    /* client -> pilotd */
    raw_wbuf_init(&w, PL_MSG_SUBMIT, 1, 1);
    raw_key(&w.pk, "tasks");
    msgpack_pack_array(&w.pk, 1);
    spec_min(&w.pk);
    put_msg("submit-1", &w);
    raw_wbuf_init(&w, PL_MSG_SUBMIT, 2, 1);
    raw_key(&w.pk, "tasks");
    msgpack_pack_array(&w.pk, 3);
    spec_full(&w.pk);
    spec_torch(&w.pk);
    spec_min(&w.pk);
    put_msg("submit-2", &w);
    raw_wbuf_init(&w, PL_MSG_LIST, 3, 3);
    raw_kstr(&w.pk, "state", "running");
    raw_kuintv(&w.pk, "ids", ids, 3);
    raw_kuint(&w.pk, "limit", 10);
    put_msg("list-1", &w);
    raw_wbuf_init(&w, PL_MSG_SHOW, 4, 1);
    raw_kuint(&w.pk, "id", 7);
    put_msg("show-1", &w);
    raw_wbuf_init(&w, PL_MSG_CANCEL, 5, 1);
    raw_kuintv(&w.pk, "ids", ids, 3);
    put_msg("cancel-1", &w);
    raw_wbuf_init(&w, PL_MSG_STATUS, 6, 0);
    put_msg("status-1", &w);
    raw_wbuf_init(&w, PL_MSG_SHUTDOWN, 7, 0);
    put_msg("shutdown-1", &w);
    raw_wbuf_init(&w, PL_MSG_COUNTS, 8, 1);
    raw_kuintv(&w.pk, "ids", ids, 2);
    put_msg("counts-1", &w);
    {
        uint64_t rids[] = { 7, 8, 9 };
        struct pl_results_req rq = { .ids = rids, .nids = 3 };
        pl_results_req_encode(&w, 16, &rq);
        put_msg("results-1", &w);
    }
    {
        char kv[] = "stage=train", name[] = "train";
        char *tags[] = { kv, NULL };
        uint64_t el[] = { 40, 3 };
        struct pl_tl_req tq = { .tags = tags, .name = name, .since = 1.7e9,
                                .after = 12, .limit = 100,
                                .sel = { ids, 2, el, 1 } };
        pl_tl_req_encode(&w, 17, &tq);
        put_msg("timeline-1", &w);
    }

    /* watches: WATCH, UNWATCH, a submit with 'watch', a reply, a push */
    {
        uint64_t el[] = { 40, 3 };
        struct pl_watch_req wq = { .token = "fuzz-watch-token-01",
                                   .attach = true, .has_after = true,
                                   .after = 12, .sel = { ids, 2, el, 1 } };
        pl_watch_req_encode(&w, 12, &wq);
        put_msg("watch-1", &w);
        struct pl_watch_req wa = { .token = "fuzz-watch-token-01",
                                   .all = true };
        pl_watch_req_encode(&w, 13, &wa);
        put_msg("watch-2", &w);
        pl_unwatch_encode(&w, 14, "fuzz-watch-token-01");
        put_msg("unwatch-1", &w);
        pl_submit_begin_watch(&w, 15, 1, "fuzz-watch-token-01");
        spec_min(&w.pk);
        put_msg("submit-3", &w);
        struct pl_watch_reply wr = { .token = "fuzz-watch-token-01",
                                     .seq = 90, .n = 2, .watching = 3,
                                     .pending = 1 };
        pl_watch_reply_encode(&w, 12, &wr);
        put_msg("reply-watch-1", &w);
        struct pl_end ends[] = {
            { .seq = 7, .id = 3, .state = PL_ST_DONE, .exit_code = 0,
              .signal = 0, .end_time = 1.7e9 },
            { .seq = 9, .id = 4, .state = PL_ST_FAILED, .exit_code = 137,
              .signal = 9, .end_time = 1.7e9, .reason = (char *)"signal 9" },
        };
        pl_ends_encode(&w, "fuzz-watch-token-01", 3, 1, ends, 2);
        put_msg("ends-1", &w);
        /* a Python call's small result with its end */
        ends[0].result = "\x80\x05K*.";
        ends[0].result_size = 5;
        pl_ends_encode(&w, "fuzz-watch-token-01", 4, 0, ends, 1);
        put_msg("ends-2", &w);
    }

    /* pools: the requests, an agent's HELLO report, a worker's messages
     * (proto's own encoders: their fields are checked by the decoders
     * the fuzzer runs) */
    {
        static char e1[] = "OMP_NUM_THREADS=1";
        char *penv[] = { e1, NULL };
        struct pl_pool_req pr = { .name = "etl", .nodes = 2, .rpn = 2,
                                  .cpr = 1, .gpr = 1,
                                  .launcher = PL_LAUNCHER_SRUN,
                                  .env = penv };
        pl_pool_req_encode(&w, PL_MSG_POOL_START, 9, &pr);
        put_msg("pool-start-1", &w);
        pl_pool_req_encode(&w, PL_MSG_POOL_STOP, 10, &pr);
        put_msg("pool-stop-1", &w);
        pl_pool_req_encode(&w, PL_MSG_POOL_LIST, 11, &pr);
        put_msg("pool-list-1", &w);
        uint64_t wr[] = { 0, 1 };
        struct pl_pool_ready rdy = { .job = 2, .attempt = 1, .ranks = wr,
                                     .nranks = 2 };
        pl_pool_ready_encode(&w, 5, &rdy);
        put_msg("pool-ready-1", &w);
        /* node vetting (proto/vetmsg.h) */
        struct pl_vetconf vc;
        static const char vy[] = "external:\n  - name: gpu\n"
                                 "    command: [pilot-vetcheck, --json]\n";
        struct pl_error ve;
        if (pl_vetconf_parse("seed", vy, sizeof(vy) - 1, &vc, &ve) < 0) {
            fprintf(stderr, "mkcorpus: %s\n", ve.text);
            exit(1);
        }
        pl_vet_encode(&w, 0, 3, &vc);
        pl_vetconf_clear(&vc);
        put_msg("vet-1", &w);
        static char vn[] = "n1", vdisk[] = "disk", vcpu[] = "cpu",
                    vmib[] = "MiB", vops[] = "Mop/s", vdet[] = "/tmp: free";
        struct pl_vet_check vch[] = {
            { vdisk, false, 16, vmib, 64, vdet },
            { vcpu, true, 512.5, vops, NAN, NULL },
        };
        struct pl_vet_result vr = { .node = vn, .token = 3, .time = 1.7e9,
                                    .took = 0.2, .ok = false, .check = vch,
                                    .ncheck = 2 };
        pl_vet_result_encode(&w, 6, &vr);
        put_msg("vet-result-1", &w);
        char *vnodes[] = { vn, NULL };
        struct pl_vet_req vq = { vnodes };
        pl_vet_req_encode(&w, 12, &vq);
        put_msg("vet-req-1", &w);
        static char vwhy[] = "ECC errors";
        struct pl_cordon_req cq = { vn, vwhy, false };
        pl_cordon_req_encode(&w, 13, &cq);
        put_msg("cordon-1", &w);
        struct pl_grow_req gq = { .nodes = 4, .time = (char *)"1:00:00",
                                  .partition = (char *)"debug", .drain = 60 };
        pl_grow_req_encode(&w, 14, &gq);
        put_msg("grow-1", &w);
        struct pl_shrink_req sq = { .idle = 300 };
        pl_shrink_req_encode(&w, 15, &sq);
        put_msg("shrink-1", &w);
        struct pl_whello h = { .pool = (char *)"etl", .job = 2, .attempt = 1,
                               .world_rank = 3, .world_size = 8, .pid = 77,
                               .python = true, .nccl = (char *)"no GPU" };
        pl_whello_encode(&w, &h);
        put_msg("hello-1", &w);
        static char fn[] = "./lib.so:join", a1[] = "x";
        char *cargv[] = { fn, a1, NULL };
        uint64_t grp[] = { 3, 1, 2 };
        struct pl_wcall c = { .id = 8, .attempt = 1, .rank = 1, .size = 3,
                              .group = grp, .fn = PL_FN_C, .argv = cargv,
                              .env = penv, .cwd = (char *)"/tmp",
                              .out = (char *)"/tmp/8.out",
                              .err = (char *)"/tmp/8.err",
                              .array_index = 4 };
        pl_wcall_encode(&w, &c);
        put_msg("call-1", &w);
        struct pl_wentered en = { .id = 8, .attempt = 1, .time = 1.7e9 };
        pl_wentered_encode(&w, &en);
        put_msg("entered-1", &w);
        struct pl_wreturn rt = { .id = 8, .attempt = 1, .code = 3,
                                 .error = (char *)"no symbol", .time = 1.7e9 };
        pl_wreturn_encode(&w, &rt);
        put_msg("return-1", &w);
        pl_wcrash_encode(&w, 11);
        put_msg("crash-1", &w);
    }

    /* pilotd -> agent */
    raw_wbuf_init(&w, PL_MSG_WELCOME, 0, 2);
    raw_kstr(&w.pk, "node", "n1");
    raw_kdouble(&w.pk, "heartbeat", 2.0);
    put_msg("welcome-1", &w);
    raw_wbuf_init(&w, PL_MSG_RUN, 0, 1);
    raw_key(&w.pk, "tasks");
    msgpack_pack_array(&w.pk, 4);
    run_none(&w.pk);
    run_torch(&w.pk);
    run_mpi(&w.pk);
    run_pool(&w.pk);
    put_msg("run-1", &w);
    raw_wbuf_init(&w, PL_MSG_KILL, 0, 4);
    raw_kuint(&w.pk, "id", 7);
    raw_kuint(&w.pk, "attempt", 1);
    raw_kuint(&w.pk, "rank", 0);
    raw_kdouble(&w.pk, "grace", 5.0);
    put_msg("kill-1", &w);
    raw_wbuf_init(&w, PL_MSG_EXIT, 0, 0);
    put_msg("exit-1", &w);

    /* agent -> pilotd */
    raw_wbuf_init(&w, PL_MSG_REGISTER, 1, 5);
    raw_kstr(&w.pk, "node", "n1");
    raw_kuint(&w.pk, "pid", 1234);
    raw_kuintv(&w.pk, "cores", cores, 4);
    raw_kstrv(&w.pk, "gpus", gpus);
    raw_key(&w.pk, "running");
    msgpack_pack_array(&w.pk, 1);
    msgpack_pack_map(&w.pk, 3);
    raw_kuint(&w.pk, "id", 7);
    raw_kuint(&w.pk, "attempt", 1);
    raw_kuint(&w.pk, "rank", 0);
    put_msg("register-1", &w);
    raw_wbuf_init(&w, PL_MSG_PULL, 2, 2);
    raw_kuint(&w.pk, "free_cores", 4);
    raw_kuint(&w.pk, "free_gpus", 2);
    put_msg("pull-1", &w);
    raw_wbuf_init(&w, PL_MSG_EVENTS, 3, 1);
    raw_key(&w.pk, "events");
    msgpack_pack_array(&w.pk, 2);
    event_running(&w.pk);
    event_full(&w.pk);
    put_msg("events-1", &w);
    raw_wbuf_init(&w, PL_MSG_HEARTBEAT, 4, 0);
    put_msg("heartbeat-1", &w);

    /* replies */
    pl_wbuf_reply(&w, 6, 0, NULL);
    msgpack_pack_map(&w.pk, 6);
    raw_kstr(&w.pk, "pilot", "p1");
    raw_kint(&w.pk, "walltime_left", -1);
    raw_kdouble(&w.pk, "started", 1.5);
    raw_kbool(&w.pk, "ok", true);
    raw_key(&w.pk, "nodes");
    msgpack_pack_array(&w.pk, 1);
    msgpack_pack_map(&w.pk, 2);
    raw_kstr(&w.pk, "name", "n1");
    raw_kuintv(&w.pk, "cores", cores, 4);
    raw_key(&w.pk, "job");
    msgpack_pack_nil(&w.pk);
    put_msg("reply-1", &w);
    pl_wbuf_reply(&w, 7, 2, "no task 7");
    put_msg("reply-2", &w);
    /* a retry's submit, more to send from index 5000 */
    pl_wbuf_reply(&w, 8, 0, NULL);
    msgpack_pack_map(&w.pk, 2);
    raw_kuintv(&w.pk, "ids", ids, 3);
    raw_kuint(&w.pk, "more", 5000);
    put_msg("reply-3", &w);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: mkcorpus DIR\n");
        return 2;
    }
    outdir = argv[1];
    if (mkdir(outdir, 0755) < 0 && errno != EEXIST) {
        perror(outdir);
        return 1;
    }
    messages();
    keys();
    pilotdir();
    taskfiles();
    replies();
    agentseqs();
    pywmsg();
    put_entry("spec-min", spec_min);
    put_entry("spec-full", spec_full);
    put_entry("spec-torch", spec_torch);
    put_entry("run-none", run_none);
    put_entry("run-torch", run_torch);
    put_entry("run-mpi", run_mpi);
    put_entry("run-pool", run_pool);
    put_entry("run-prefetch", run_prefetch);
    put_entry("run-pycall", run_pycall);
    put_entry("run-pycall-refs", run_pycall_refs);
    put_entry("spec-refs", spec_refs);
    put_entry("event-result", event_result);
    put_entry("event-full", event_full);
    put_entry("event-running", event_running);
    return 0;
}
