/* tests/unit/test_proto_vet.c - node vetting: a vet.yaml's settings (bad
 * files refused with their line), and VET, VET_RESULT, VET and CORDON
 * requests: round trips, and hostile bodies refused */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <msgpack.h>

#include "proto/msg.h"
#include "proto/vetconf.h"
#include "proto/vetmsg.h"
#include "tests/mpw.h"
#include "tests/unit/helpers.h"

/* ---- vet.yaml ---- */

static int parse(const char *text, struct pl_vetconf *c, struct pl_error *e)
{
    return pl_vetconf_parse("vet.yaml", text, strlen(text), c, e);
}

/* 'text' is refused, with an error that holds 'want'. */
static void refused(const char *text, const char *want, const char *what)
{
    struct pl_vetconf c;
    struct pl_error e = { "" };
    int rc = parse(text, &c, &e);

    ok(rc == -1 && errno == EINVAL && strstr(e.text, want), "refused: %s",
       what);
    if (rc == 0 || !strstr(e.text, want))
        diag("rc %d, error '%s', wanted '%s'", rc, e.text, want);
    if (rc == 0)
        pl_vetconf_clear(&c);
}

static void test_conf(void)
{
    struct pl_vetconf c;
    struct pl_error e = { "" };

    is(pl_vetconf_default(&c), 0, "default: made");
    ok(c.gpus && c.disk && c.memory && c.cpu && c.disk_task_dir
           && c.disk_paths && !strcmp(c.disk_paths[0], "/tmp")
           && !c.disk_paths[1] && c.disk_min_mb == 1024
           && c.mem_min_mb == 1024 && c.cpu_max_slower == 30
           && c.revet_signals == 3 && c.next == 0
           && !strcmp(c.gpu_devices, "/dev/nvidia%s"),
       "default: every check, the documented limits");
    ok(!pl_vetconf_empty(&c), "default: not empty");
    pl_vetconf_clear(&c);

    /* docs/vet.yaml writes the default out: it must say the same */
    is(pl_vetconf_load("docs/vet.yaml", &c, &e), 0, "docs/vet.yaml loads");
    if (e.text[0])
        diag("%s", e.text);
    ok(c.gpus && c.disk && c.memory && c.cpu && c.disk_task_dir
           && c.disk_paths && !strcmp(c.disk_paths[0], "/tmp")
           && c.disk_min_mb == 1024 && c.mem_min_mb == 1024
           && c.cpu_iterations == 2000000 && c.cpu_slices == 3
           && c.cpu_max_slower == 30 && c.revet_signals == 3
           && c.revet_window == 600 && c.timeout == 60 && c.next == 0
           && c.gpu_vetcheck && c.gpu_min_free_pct == 90
           && c.gpu_max_temp == 85 && !c.net_start && !c.nccl_start
           && c.net_max_latency == 0 && c.net_min_bw == 0
           && c.net_size == 4194304 && c.net_iters == 100
           && c.net_timeout == 300 && c.nccl_min_busbw == 0
           && c.nccl_size == 67108864 && c.nccl_iters == 20
           && c.gpu_devices && !strcmp(c.gpu_devices, "/dev/nvidia%s"),
       "... and says what the built-in default is");
    pl_vetconf_clear(&c);

    is(parse("", &c, &e), 0, "an empty file: the default");
    ok(c.cpu && c.disk_min_mb == 1024, "... its values");
    pl_vetconf_clear(&c);

    is(parse("timeout: 30\n"
             "gpus:\n  enabled: true\n  devices: /run/x/nvidia%s\n"
             "disk:\n  min_free_mb: 64\n  task_dir: false\n"
             "  paths: [/tmp, /var/tmp]\n"
             "memory: {enabled: no}\n"
             "cpu:\n  iterations: 100000\n  slices: 2\n"
             "  max_slower_pct: 60\n"
             "revet: {signals: 5, window_s: 120}\n"
             "external:\n"
             "  - name: gpu-health\n"
             "    command: [pilot-vetcheck, --json]\n"
             "    timeout: 45\n",
             &c, &e),
       0, "a full file parses");
    if (e.text[0])
        diag("%s", e.text);
    ok(c.timeout == 30 && c.gpus && !strcmp(c.gpu_devices, "/run/x/nvidia%s")
           && c.disk_min_mb == 64 && !c.disk_task_dir
           && !strcmp(c.disk_paths[1], "/var/tmp") && !c.memory
           && c.cpu_iterations == 100000 && c.cpu_slices == 2
           && c.cpu_max_slower == 60 && c.revet_signals == 5
           && c.revet_window == 120 && c.next == 1
           && !strcmp(c.ext[0].name, "gpu-health")
           && !strcmp(c.ext[0].argv[1], "--json") && c.ext[0].timeout == 45,
       "... every value as given");
    pl_vetconf_clear(&c);

    is(parse("gpus: {min_free_pct: 50, max_temp_c: 70, vetcheck: no}\n"
             "net: {max_latency_us: 5.5, min_bandwidth_mbs: 1000, size: 1024,"
             " iters: 10, timeout: 30, at_start: true}\n"
             "nccl: {min_busbw_gbs: 100, size: 4096, iters: 5}\n", &c, &e),
       0, "gpus' thresholds, net: and nccl: parse");
    ok(c.gpu_min_free_pct == 50 && c.gpu_max_temp == 70 && !c.gpu_vetcheck
           && c.net_max_latency == 5.5 && c.net_min_bw == 1000
           && c.net_size == 1024 && c.net_iters == 10 && c.net_timeout == 30
           && c.net_start && c.nccl_min_busbw == 100 && c.nccl_size == 4096
           && c.nccl_iters == 5,
       "... every value as given");
    pl_vetconf_clear(&c);
    ok(parse("net: {max_latency_us: -1}\n", &c, &e) == -1
           && strstr(e.text, "net.max_latency_us"),
       "a negative latency limit: refused, named");
    ok(parse("nccl: {busbw: 1}\n", &c, &e) == -1
           && strstr(e.text, "nccl.busbw: unknown key"),
       "an unknown nccl key: refused");

    is(parse("gpus: {devices: none}\n", &c, &e), 0, "devices: none");
    ok(c.gpus && !c.gpu_devices, "... no device file opened");
    pl_vetconf_clear(&c);

    is(parse("enabled: false\n", &c, &e), 0, "enabled: false");
    ok(pl_vetconf_empty(&c), "... checks nothing");
    pl_vetconf_clear(&c);
    is(pl_vetconf_load("none", &c, &e), 0, "'none' loads");
    ok(pl_vetconf_empty(&c), "... and checks nothing");
    pl_vetconf_clear(&c);
    ok(pl_vetconf_load("/nonexistent/vet.yaml", &c, &e) == -1
           && errno == ENOENT && strstr(e.text, "/nonexistent/vet.yaml"),
       "a missing file: ENOENT, named");

    refused("cpu:\n  slices: [1\n", "vet.yaml:3: not YAML",
            "a syntax error, with its line");
    refused("timeout: 10\ncpus:\n  slices: 2\n", "vet.yaml:2: cpus: unknown",
            "an unknown key, with its line");
    refused("cpu:\n  enabled: true\n  speed: 3\n",
            "vet.yaml:3: cpu.speed: unknown key",
            "an unknown key in a section");
    refused("cpu:\n  slices: 0\n", "vet.yaml:2: cpu.slices: want a whole "
            "number 1 to 1000", "a number out of range");
    refused("cpu:\n  slices: 2.5\n", "cpu.slices: want a whole number",
            "a fraction where a count goes");
    refused("disk:\n  min_free_mb: lots\n", "vet.yaml:2: disk.min_free_mb",
            "a word where a number goes");
    refused("memory:\n  enabled: maybe\n", "vet.yaml:2: memory.enabled: want "
            "true or false", "a bad boolean");
    refused("disk: 12\n", "vet.yaml:1: disk: want a mapping",
            "a scalar where a section goes");
    refused("disk:\n  paths: [tmp]\n", "'tmp' is not an absolute path",
            "a relative path");
    refused("gpus:\n  devices: /dev/nvidia\n", "gpus.devices: want one %s",
            "a device pattern without %s");
    refused("gpus:\n  devices: /dev/%s/nvidia%s\n", "gpus.devices: want one",
            "a device pattern with two %s");
    refused("external:\n  - name: a\n    command: [x]\n  - name: a\n"
            "    command: [y]\n", "vet.yaml:4: external.name: 'a' is given "
            "twice", "two programs of one name");
    refused("external:\n  - name: a\n", "vet.yaml:2: external: each program "
            "needs a name and a command", "a program without a command");
    refused("external:\n  - name: Bad Name\n    command: [x]\n",
            "external.name: want 1 to 32", "a program's bad name");
    refused("external:\n  - name: a\n    command: []\n",
            "external.command: want a list of 1 to 64",
            "an empty command");
    refused("- a\n- b\n", "vet.yaml:1: vet.yaml: want a mapping",
            "a list at the top");
    refused("timeout: 0\n", "vet.yaml:1: timeout", "a zero timeout");
    refused("cpu:\n  max_slower_pct: 150\n", "cpu.max_slower_pct",
            "a percentage over 100");
}

/* ---- VET ---- */

static void test_vet(void)
{
    struct pl_vetconf c, d;
    struct pl_wbuf w;
    struct pl_msg m;
    struct pl_error e = { "" };
    uint64_t token = 0;

    pl_vetconf_parse("x", "external:\n  - name: gpu\n    command: [a, b]\n",
                     strlen("external:\n  - name: gpu\n    command: [a, b]\n"),
                     &c, &e);
    pl_vet_encode(&w, 7, 42, &c);
    ok(pl_msg_decode(w.sb.data, w.sb.size, &m, &e) == 0
           && m.type == PL_MSG_VET,
       "VET: the envelope decodes");
    is(pl_vet_decode(m.body, &token, &d, &e), 0, "VET: decodes");
    ok(token == 42 && d.gpus && d.cpu && d.cpu_slices == c.cpu_slices
           && d.cpu_iterations == c.cpu_iterations && d.disk_task_dir
           && !strcmp(d.disk_paths[0], "/tmp") && d.next == 1
           && !strcmp(d.ext[0].argv[1], "b") && d.timeout == c.timeout
           && !strcmp(d.gpu_devices, "/dev/nvidia%s") && d.gpu_vetcheck
           && d.gpu_min_free_pct == 90 && d.gpu_max_temp == 85,
       "VET: round trip (the GPU check's thresholds too)");
    pl_vetconf_clear(&d);
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    pl_vetconf_clear(&c);

    struct t_body b;
    const msgpack_object *o;
    /* hostile: each refused with nothing held */
    t_body_begin(&b, PL_MSG_VET, 2);
    raw_kuint(&b.w.pk, "token", 1);
    raw_kdouble(&b.w.pk, "timeout", NAN);
    ok((o = t_body_end(&b)) && pl_vet_decode(o, &token, &d, &e) == -1
           && errno == EPROTO,
       "VET: a NaN timeout refused");
    t_body_free(&b);
    t_body_begin(&b, PL_MSG_VET, 3);
    raw_kuint(&b.w.pk, "token", 1);
    raw_kdouble(&b.w.pk, "timeout", 5);
    raw_kstr(&b.w.pk, "gpu_devices", "/dev/nvidia");
    ok((o = t_body_end(&b)) && pl_vet_decode(o, &token, &d, &e) == -1,
       "VET: a device pattern without %%s refused");
    t_body_free(&b);
    t_body_begin(&b, PL_MSG_VET, 3);
    raw_kuint(&b.w.pk, "token", 1);
    raw_kdouble(&b.w.pk, "timeout", 5);
    raw_kbool(&b.w.pk, "cpu", true);
    ok((o = t_body_end(&b)) && pl_vet_decode(o, &token, &d, &e) == -1,
       "VET: cpu without iterations refused");
    t_body_free(&b);
    t_body_begin(&b, PL_MSG_VET, 3);
    raw_kuint(&b.w.pk, "token", 1);
    raw_kdouble(&b.w.pk, "timeout", 5);
    raw_key(&b.w.pk, "external");
    msgpack_pack_array(&b.w.pk, 1);
    msgpack_pack_map(&b.w.pk, 2);
    raw_kstr(&b.w.pk, "name", "x");
    raw_kdouble(&b.w.pk, "timeout", 1);
    ok((o = t_body_end(&b)) && pl_vet_decode(o, &token, &d, &e) == -1,
       "VET: an external program without argv refused");
    t_body_free(&b);
    t_body_begin(&b, PL_MSG_VET, 3);
    raw_kuint(&b.w.pk, "token", 1);
    raw_kdouble(&b.w.pk, "timeout", 5);
    raw_key(&b.w.pk, "external");
    msgpack_pack_array(&b.w.pk, 1);
    msgpack_pack_uint64(&b.w.pk, 3);
    ok((o = t_body_end(&b)) && pl_vet_decode(o, &token, &d, &e) == -1,
       "VET: an external entry that is not a map refused");
    t_body_free(&b);
}

/* ---- VET_RESULT ---- */

static void test_result(void)
{
    static char s_disk[] = "disk", s_mib[] = "MiB", s_tmp[] = "/tmp",
                s_cpu[] = "cpu", s_mops[] = "Mop/s", s_n1[] = "n1";
    struct pl_vet_check ch[2] = {
        { .name = s_disk, .ok = true, .figure = 100, .unit = s_mib,
          .limit = 64, .detail = s_tmp },
        { .name = s_cpu, .ok = true, .figure = 512.5, .unit = s_mops,
          .limit = NAN, .detail = NULL },
    };
    struct pl_vet_result r = { .node = s_n1, .token = 9, .time = 1e9,
                               .took = 0.25, .ok = true, .check = ch,
                               .ncheck = 2 }, d;
    struct pl_wbuf w;
    struct pl_msg m;
    struct pl_error e = { "" };

    pl_vet_result_encode(&w, 3, &r);
    ok(pl_msg_decode(w.sb.data, w.sb.size, &m, &e) == 0
           && m.type == PL_MSG_VET_RESULT,
       "VET_RESULT: the envelope decodes");
    is(pl_vet_result_decode(m.body, &d, &e), 0, "VET_RESULT: decodes");
    ok(!strcmp(d.node, "n1") && d.token == 9 && d.time == 1e9
           && d.took == 0.25 && d.ok && d.ncheck == 2
           && !strcmp(d.check[0].name, "disk") && d.check[0].figure == 100
           && !strcmp(d.check[0].unit, "MiB") && d.check[0].limit == 64
           && !strcmp(d.check[0].detail, "/tmp")
           && d.check[1].figure == 512.5 && isnan(d.check[1].limit)
           && !d.check[1].detail,
       "VET_RESULT: round trip (an absent limit is NaN)");
    pl_vet_result_clear(&d);
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);

    /* a node that says ok with a failed check is not ok */
    ch[0].ok = false;
    pl_vet_result_encode(&w, 3, &r);
    pl_msg_decode(w.sb.data, w.sb.size, &m, &e);
    is(pl_vet_result_decode(m.body, &d, &e), 0, "a failed check decodes");
    ok(!d.ok, "... and the result is not ok, whatever 'ok' said");
    pl_vet_result_clear(&d);
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    ch[0].ok = true;

    struct t_body b;
    const msgpack_object *o;
    struct {
        const char *what;
        const char *node, *name, *detail;
        double time;
        uint32_t nchecks;
        bool check_is_map;
    } bad[] = {
        { "a bad node name", "n 1", "cpu", "x", 1e9, 1, true },
        { "a node name of 64 bytes",
          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
          "cpu", "x", 1e9, 1, true },
        { "a check name with a capital", "n1", "CPU", "x", 1e9, 1, true },
        { "a check name of 33 bytes", "n1",
          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "x", 1e9, 1, true },
        { "a detail that is not UTF-8", "n1", "cpu", "\xff\xfe", 1e9, 1,
          true },
        { "a time of 0", "n1", "cpu", "x", 0, 1, true },
        { "an infinite time", "n1", "cpu", "x", INFINITY, 1, true },
        { "65 checks", "n1", "cpu", "x", 1e9, 65, true },
        { "a check that is not a map", "n1", "cpu", "x", 1e9, 1, false },
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        t_body_begin(&b, PL_MSG_VET_RESULT, 5);
        raw_kstr(&b.w.pk, "node", bad[i].node);
        raw_kuint(&b.w.pk, "token", 1);
        raw_kdouble(&b.w.pk, "time", bad[i].time);
        raw_kbool(&b.w.pk, "ok", true);
        raw_key(&b.w.pk, "checks");
        msgpack_pack_array(&b.w.pk, bad[i].nchecks);
        for (uint32_t k = 0; k < bad[i].nchecks; k++) {
            if (!bad[i].check_is_map) {
                pl_w_str(&b.w.pk, "cpu");
                continue;
            }
            msgpack_pack_map(&b.w.pk, 3);
            raw_kstr(&b.w.pk, "name", bad[i].name);
            raw_kbool(&b.w.pk, "ok", true);
            raw_kstr(&b.w.pk, "detail", bad[i].detail);
        }
        o = t_body_end(&b);
        errno = 0;
        ok(o && pl_vet_result_decode(o, &d, &e) == -1 && errno == EPROTO
               && !d.node && !d.check,
           "VET_RESULT: %s refused, nothing held", bad[i].what);
        t_body_free(&b);
    }
    /* wrong types */
    t_body_begin(&b, PL_MSG_VET_RESULT, 5);
    raw_kstr(&b.w.pk, "node", "n1");
    raw_kstr(&b.w.pk, "token", "1");
    raw_kdouble(&b.w.pk, "time", 1e9);
    raw_kbool(&b.w.pk, "ok", true);
    raw_key(&b.w.pk, "checks");
    msgpack_pack_array(&b.w.pk, 0);
    ok((o = t_body_end(&b)) && pl_vet_result_decode(o, &d, &e) == -1,
       "VET_RESULT: a token that is a string refused");
    t_body_free(&b);
    t_body_begin(&b, PL_MSG_VET_RESULT, 4);
    raw_kstr(&b.w.pk, "node", "n1");
    raw_kuint(&b.w.pk, "token", 1);
    raw_kdouble(&b.w.pk, "time", 1e9);
    raw_kbool(&b.w.pk, "ok", true);
    ok((o = t_body_end(&b)) && pl_vet_result_decode(o, &d, &e) == -1,
       "VET_RESULT: no checks refused");
    t_body_free(&b);
    t_body_begin(&b, PL_MSG_VET_RESULT, 5);
    raw_kstr(&b.w.pk, "node", "n1");
    raw_kuint(&b.w.pk, "token", 1);
    raw_kdouble(&b.w.pk, "time", 1e9);
    raw_kbool(&b.w.pk, "ok", true);
    raw_key(&b.w.pk, "checks");
    msgpack_pack_array(&b.w.pk, 1);
    msgpack_pack_map(&b.w.pk, 3);
    raw_kstr(&b.w.pk, "name", "cpu");
    raw_kbool(&b.w.pk, "ok", true);
    raw_kstr(&b.w.pk, "figure", "fast");
    ok((o = t_body_end(&b)) && pl_vet_result_decode(o, &d, &e) == -1,
       "VET_RESULT: a figure that is a string refused");
    t_body_free(&b);
    t_body_begin(&b, PL_MSG_VET_RESULT, 5);
    raw_kstr(&b.w.pk, "node", "n1");
    raw_kuint(&b.w.pk, "token", 1);
    raw_kdouble(&b.w.pk, "time", 1e9);
    raw_kbool(&b.w.pk, "ok", true);
    raw_key(&b.w.pk, "checks");
    msgpack_pack_array(&b.w.pk, 1);
    msgpack_pack_map(&b.w.pk, 3);
    raw_kstr(&b.w.pk, "name", "cpu");
    raw_kbool(&b.w.pk, "ok", true);
    raw_kstr(&b.w.pk, "unit", "a unit far too long");
    ok((o = t_body_end(&b)) && pl_vet_result_decode(o, &d, &e) == -1,
       "VET_RESULT: a unit over 16 bytes refused");
    t_body_free(&b);

    /* garbage: random bytes after a valid envelope head never crash the
     * decoder (ASan and UBSan watch under make asan) */
    unsigned seed = 12345;
    int decoded = 0;
    for (int i = 0; i < 2000; i++) {
        unsigned char buf[64];
        size_t n = 8 + (unsigned)rand_r(&seed) % (sizeof(buf) - 8);
        buf[0] = 0x94;                           /* array of 4 */
        buf[1] = 0x0b;                           /* version 11 */
        buf[2] = 0xcd, buf[3] = 0x01, buf[4] = 0x33; /* 307 */
        buf[5] = 0x01;                           /* seq */
        for (size_t k = 6; k < n; k++)
            buf[k] = (unsigned char)rand_r(&seed);
        if (pl_msg_decode(buf, n, &m, &e) < 0)
            continue;
        if (pl_vet_result_decode(m.body, &d, &e) == 0) {
            decoded++;
            pl_vet_result_clear(&d);
        }
        pl_msg_release(&m);
    }
    ok(decoded == 0, "2000 random bodies: none taken for a result");
}

/* ---- client requests ---- */

static void test_requests(void)
{
    static char s_n1[] = "n1", s_n2[] = "n2", s_n3[] = "n3",
                s_ecc[] = "ECC errors", s_bad[] = "n;2";
    char *nodes[] = { s_n1, s_n2, NULL };
    struct pl_vet_req q = { nodes }, dq;
    struct pl_cordon_req c = { s_n3, s_ecc, false }, dc;
    struct pl_wbuf w;
    struct pl_msg m;
    struct pl_error e = { "" };
    struct t_body b;
    const msgpack_object *o;

    pl_vet_req_encode(&w, 1, &q);
    pl_msg_decode(w.sb.data, w.sb.size, &m, &e);
    ok(m.type == PL_MSG_VET_REQ && pl_vet_req_decode(m.body, &dq, &e) == 0
           && !strcmp(dq.nodes[1], "n2") && !dq.nodes[2],
       "VET request: round trip");
    pl_vet_req_clear(&dq);
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);
    q.nodes = NULL;
    pl_vet_req_encode(&w, 1, &q);
    pl_msg_decode(w.sb.data, w.sb.size, &m, &e);
    ok(pl_vet_req_decode(m.body, &dq, &e) == 0 && !dq.nodes,
       "VET request: no nodes (all)");
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);

    pl_cordon_req_encode(&w, 1, &c);
    pl_msg_decode(w.sb.data, w.sb.size, &m, &e);
    ok(m.type == PL_MSG_CORDON && pl_cordon_req_decode(m.body, &dc, &e) == 0
           && !strcmp(dc.node, "n3") && !strcmp(dc.reason, "ECC errors")
           && !dc.uncordon,
       "CORDON: round trip");
    pl_cordon_req_clear(&dc);
    pl_msg_release(&m);
    pl_wbuf_destroy(&w);

    char *badnodes[] = { s_n1, s_bad, NULL };
    t_body_begin(&b, PL_MSG_VET_REQ, 1);
    raw_kstrv(&b.w.pk, "nodes", badnodes);
    ok((o = t_body_end(&b)) && pl_vet_req_decode(o, &dq, &e) == -1
           && !dq.nodes,
       "VET request: a bad node name refused");
    t_body_free(&b);
    t_body_begin(&b, PL_MSG_CORDON, 1);
    raw_kstr(&b.w.pk, "reason", "x");
    ok((o = t_body_end(&b)) && pl_cordon_req_decode(o, &dc, &e) == -1,
       "CORDON: no node refused");
    t_body_free(&b);
    char longr[300];
    memset(longr, 'r', sizeof(longr) - 1);
    longr[sizeof(longr) - 1] = '\0';
    t_body_begin(&b, PL_MSG_CORDON, 2);
    raw_kstr(&b.w.pk, "node", "n1");
    raw_kstr(&b.w.pk, "reason", longr);
    ok((o = t_body_end(&b)) && pl_cordon_req_decode(o, &dc, &e) == -1
           && !dc.node,
       "CORDON: a reason over 256 bytes refused, nothing held");
    t_body_free(&b);
    t_body_begin(&b, PL_MSG_CORDON, 2);
    raw_kstr(&b.w.pk, "node", "n1");
    raw_kuint(&b.w.pk, "uncordon", 1);
    ok((o = t_body_end(&b)) && pl_cordon_req_decode(o, &dc, &e) == -1,
       "CORDON: an uncordon that is not a bool refused");
    t_body_free(&b);
}

int main(void)
{
    plan(72);
    test_conf();
    test_vet();
    test_result();
    test_requests();
    return done_testing();
}
