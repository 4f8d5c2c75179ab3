/* proto/vetconf.c - node vetting's settings from a vet.yaml (libyaml's
 * document API: every node keeps its line for the error) */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "proto/strv.h"
#include "proto/vetconf.h"

/* The built-in default: docs/vet.yaml says the same, with the reasons. */
#define DEF_TIMEOUT 60.0
#define DEF_GPU_DEVICES "/dev/nvidia%s"
#define DEF_DISK_MB 1024
#define DEF_MEM_MB 1024
/* 2 M turns of the loop in cpu_loop() (agent/vet.c): about 3 ms on a
 * 2.5 GHz core, so 3 slices on each of 4 cores take ~40 ms */
#define DEF_CPU_ITERATIONS 2000000
#define DEF_CPU_SLICES 3
#define DEF_CPU_SLOWER 30.0
#define DEF_REVET_SIGNALS 3
#define DEF_REVET_WINDOW 600.0
/* pilot-vetcheck's own defaults (docs/vetcheck.md) */
#define DEF_GPU_FREE_PCT 90.0
#define DEF_GPU_TEMP 85.0
#define DEF_NET_SIZE (4 * 1024 * 1024)
#define DEF_NET_ITERS 100
#define DEF_NCCL_SIZE (64 * 1024 * 1024)
#define DEF_NCCL_ITERS 20
#define DEF_NET_TIMEOUT 300.0

int pl_vetconf_default(struct pl_vetconf *c)
{
    static const char *const paths[] = { "/tmp", NULL };

    memset(c, 0, sizeof(*c));
    c->timeout = DEF_TIMEOUT;
    c->gpus = c->disk = c->disk_task_dir = c->memory = c->cpu = true;
    c->disk_min_mb = DEF_DISK_MB;
    c->mem_min_mb = DEF_MEM_MB;
    c->cpu_iterations = DEF_CPU_ITERATIONS;
    c->cpu_slices = DEF_CPU_SLICES;
    c->cpu_max_slower = DEF_CPU_SLOWER;
    c->revet_signals = DEF_REVET_SIGNALS;
    c->revet_window = DEF_REVET_WINDOW;
    c->gpu_vetcheck = true;
    c->gpu_min_free_pct = DEF_GPU_FREE_PCT;
    c->gpu_max_temp = DEF_GPU_TEMP;
    c->net_size = DEF_NET_SIZE;
    c->net_iters = DEF_NET_ITERS;
    c->nccl_size = DEF_NCCL_SIZE;
    c->nccl_iters = DEF_NCCL_ITERS;
    c->net_timeout = DEF_NET_TIMEOUT;
    if (!(c->gpu_devices = strdup(DEF_GPU_DEVICES))
        || !(c->disk_paths = pl_strv_dup((char *const *)paths))) {
        pl_vetconf_clear(c);
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

/* Every check off (enabled: false, or "none"). */
static void off(struct pl_vetconf *c)
{
    c->gpus = c->disk = c->memory = c->cpu = false;
    c->net_start = c->nccl_start = false;
    for (uint32_t i = 0; i < c->next; i++) {
        free(c->ext[i].name);
        pl_strv_free(c->ext[i].argv);
    }
    free(c->ext);
    c->ext = NULL;
    c->next = 0;
    c->off = true;
}

bool pl_vetconf_empty(const struct pl_vetconf *c)
{
    return !c->gpus && !c->disk && !c->memory && !c->cpu && !c->next;
}

/* ------------------------------------------------------------ parsing */

struct ctx {
    const char *name;          /* the file, for errors */
    yaml_document_t *doc;
    struct pl_error *errp;
};

static unsigned long line(const yaml_node_t *n)
{
    return (unsigned long)n->start_mark.line + 1;
}

static int fail(struct ctx *x, const yaml_node_t *n, const char *key,
                const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(struct ctx *x, const yaml_node_t *n, const char *key,
                const char *fmt, ...)
{
    char what[128];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    errno = EINVAL;
    return pl_errprintf(x->errp, "%s:%lu: %s: %s", x->name, line(n), key,
                        what);
}

static const char *scalar(const yaml_node_t *n)
{
    return n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value
                                       : NULL;
}

static int get_bool(struct ctx *x, const yaml_node_t *n, const char *key,
                    bool *v)
{
    const char *s = scalar(n);

    if (s && (!strcmp(s, "true") || !strcmp(s, "yes") || !strcmp(s, "on")))
        *v = true;
    else if (s && (!strcmp(s, "false") || !strcmp(s, "no")
                   || !strcmp(s, "off")))
        *v = false;
    else
        return fail(x, n, key, "want true or false");
    return 0;
}

static int get_num(struct ctx *x, const yaml_node_t *n, const char *key,
                   double lo, double hi, bool integer, double *v)
{
    const char *s = scalar(n);
    char *end;
    double d;
    char range[80];

    snprintf(range, sizeof(range), "want %s %g to %g",
             integer ? "a whole number" : "a number", lo, hi);
    if (!s || !*s)
        return fail(x, n, key, "%s", range);
    errno = 0;
    d = strtod(s, &end);
    if (errno || *end || !isfinite(d) || d < lo || d > hi
        || (integer && d != floor(d)))
        return fail(x, n, key, "%s", range);
    *v = d;
    return 0;
}

static int get_str(struct ctx *x, const yaml_node_t *n, const char *key,
                   char **v)
{
    const char *s = scalar(n);
    char *copy;

    if (!s || !*s || strlen(s) > PL_VET_TEXT_MAX || !pl_utf8_str(s))
        return fail(x, n, key, "want a text of 1 to %d bytes", PL_VET_TEXT_MAX);
    if (!(copy = strdup(s))) {
        errno = ENOMEM;
        return pl_errprintf(x->errp, "out of memory");
    }
    free(*v);
    *v = copy;
    return 0;
}

static int get_strv(struct ctx *x, const yaml_node_t *n, const char *key,
                    size_t minn, size_t maxn, char ***v)
{
    char **out;
    size_t k = 0, count;

    if (n->type != YAML_SEQUENCE_NODE)
        return fail(x, n, key, "want a list of texts");
    count = (size_t)(n->data.sequence.items.top
                     - n->data.sequence.items.start);
    if (count < minn || count > maxn)
        return fail(x, n, key, "want a list of %zu to %zu texts",
                    minn, maxn);
    if (!(out = calloc(count + 1, sizeof(*out)))) {
        errno = ENOMEM;
        return pl_errprintf(x->errp, "out of memory");
    }
    for (yaml_node_item_t *it = n->data.sequence.items.start;
         it < n->data.sequence.items.top; it++) {
        yaml_node_t *e = yaml_document_get_node(x->doc, *it);
        if (get_str(x, e, key, &out[k]) < 0) {
            pl_strv_free(out);
            return -1;
        }
        k++;
    }
    pl_strv_free(*v);
    *v = out;
    return 0;
}

/* Each pair of mapping 'n' to 'fn' with its key; keys must be texts. */
typedef int (*pair_f)(struct ctx *x, const char *key, yaml_node_t *k,
                      yaml_node_t *v, void *arg);

static int each_pair(struct ctx *x, const yaml_node_t *n, const char *what,
                     pair_f fn, void *arg)
{
    if (n->type != YAML_MAPPING_NODE)
        return fail(x, n, what, "want a mapping of keys");
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
         p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(x->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(x->doc, p->value);
        const char *key = scalar(k);
        if (!key)
            return fail(x, k, what, "a key that is not a text");
        if (fn(x, key, k, v, arg) < 0)
            return -1;
    }
    return 0;
}

static int unknown(struct ctx *x, yaml_node_t *k, const char *section,
                   const char *key)
{
    char full[96];

    snprintf(full, sizeof(full), "%s%s%s", section, *section ? "." : "",
             key);
    return fail(x, k, full, "unknown key");
}

static int gpus_pair(struct ctx *x, const char *key, yaml_node_t *k,
                     yaml_node_t *v, void *arg)
{
    struct pl_vetconf *c = arg;

    if (!strcmp(key, "enabled"))
        return get_bool(x, v, "gpus.enabled", &c->gpus);
    if (!strcmp(key, "devices")) {
        const char *s = scalar(v);
        if (s && (!strcmp(s, "none") || !*s)) {
            free(c->gpu_devices);
            c->gpu_devices = NULL;
            return 0;
        }
        if (get_str(x, v, "gpus.devices", &c->gpu_devices) < 0)
            return -1;
        const char *p = strstr(c->gpu_devices, "%s");
        if (!p || strchr(c->gpu_devices, '%') != p || strchr(p + 1, '%'))
            return fail(x, v, "gpus.devices", "want one %%s where the GPU "
                        "id goes (/dev/nvidia%%s), or none");
        return 0;
    }
    if (!strcmp(key, "vetcheck"))
        return get_bool(x, v, "gpus.vetcheck", &c->gpu_vetcheck);
    if (!strcmp(key, "min_free_pct"))
        return get_num(x, v, "gpus.min_free_pct", 0, 100, false,
                       &c->gpu_min_free_pct);
    if (!strcmp(key, "max_temp_c"))
        return get_num(x, v, "gpus.max_temp_c", 1, 200, false,
                       &c->gpu_max_temp);
    return unknown(x, k, "gpus", key);
}

static int disk_pair(struct ctx *x, const char *key, yaml_node_t *k,
                     yaml_node_t *v, void *arg)
{
    struct pl_vetconf *c = arg;
    double d;

    if (!strcmp(key, "enabled"))
        return get_bool(x, v, "disk.enabled", &c->disk);
    if (!strcmp(key, "task_dir"))
        return get_bool(x, v, "disk.task_dir", &c->disk_task_dir);
    if (!strcmp(key, "paths")) {
        if (get_strv(x, v, "disk.paths", 0, PL_VET_MAX_PATHS, &c->disk_paths)
            < 0)
            return -1;
        for (char **p = c->disk_paths; *p; p++)
            if (**p != '/')
                return fail(x, v, "disk.paths", "'%s' is not an absolute "
                            "path", *p);
        return 0;
    }
    if (!strcmp(key, "min_free_mb")) {
        if (get_num(x, v, "disk.min_free_mb", 0, UINT32_MAX, true, &d) < 0)
            return -1;
        c->disk_min_mb = (uint64_t)d;
        return 0;
    }
    return unknown(x, k, "disk", key);
}

static int memory_pair(struct ctx *x, const char *key, yaml_node_t *k,
                       yaml_node_t *v, void *arg)
{
    struct pl_vetconf *c = arg;
    double d;

    if (!strcmp(key, "enabled"))
        return get_bool(x, v, "memory.enabled", &c->memory);
    if (!strcmp(key, "min_free_mb")) {
        if (get_num(x, v, "memory.min_free_mb", 0, UINT32_MAX, true, &d) < 0)
            return -1;
        c->mem_min_mb = (uint64_t)d;
        return 0;
    }
    return unknown(x, k, "memory", key);
}

static int cpu_pair(struct ctx *x, const char *key, yaml_node_t *k,
                    yaml_node_t *v, void *arg)
{
    struct pl_vetconf *c = arg;
    double d;

    if (!strcmp(key, "enabled"))
        return get_bool(x, v, "cpu.enabled", &c->cpu);
    if (!strcmp(key, "iterations")) {
        if (get_num(x, v, "cpu.iterations", 1000, 1e12, true, &d) < 0)
            return -1;
        c->cpu_iterations = (uint64_t)d;
        return 0;
    }
    if (!strcmp(key, "slices")) {
        if (get_num(x, v, "cpu.slices", 1, 1000, true, &d) < 0)
            return -1;
        c->cpu_slices = (uint32_t)d;
        return 0;
    }
    if (!strcmp(key, "max_slower_pct"))
        return get_num(x, v, "cpu.max_slower_pct", 0, 100, false,
                       &c->cpu_max_slower);
    return unknown(x, k, "cpu", key);
}

static int revet_pair(struct ctx *x, const char *key, yaml_node_t *k,
                      yaml_node_t *v, void *arg)
{
    struct pl_vetconf *c = arg;
    double d;

    if (!strcmp(key, "signals")) {
        if (get_num(x, v, "revet.signals", 0, 1000, true, &d) < 0)
            return -1;
        c->revet_signals = (uint32_t)d;
        return 0;
    }
    if (!strcmp(key, "window_s"))
        return get_num(x, v, "revet.window_s", 1, 86400, false,
                       &c->revet_window);
    return unknown(x, k, "revet", key);
}

/* net: and nccl: (pilot vet --net / --nccl, client/cmd_vet.c) */
static int net_pair(struct ctx *x, const char *key, yaml_node_t *k,
                    yaml_node_t *v, void *arg)
{
    struct pl_vetconf *c = arg;
    double d;

    if (!strcmp(key, "at_start"))
        return get_bool(x, v, "net.at_start", &c->net_start);
    if (!strcmp(key, "max_latency_us"))
        return get_num(x, v, "net.max_latency_us", 0, 1e9, false,
                       &c->net_max_latency);
    if (!strcmp(key, "min_bandwidth_mbs"))
        return get_num(x, v, "net.min_bandwidth_mbs", 0, 1e9, false,
                       &c->net_min_bw);
    if (!strcmp(key, "size")) {
        if (get_num(x, v, "net.size", 8, 1 << 30, true, &d) < 0)
            return -1;
        c->net_size = (uint64_t)d;
        return 0;
    }
    if (!strcmp(key, "iters")) {
        if (get_num(x, v, "net.iters", 1, 1e6, true, &d) < 0)
            return -1;
        c->net_iters = (uint64_t)d;
        return 0;
    }
    if (!strcmp(key, "timeout"))
        return get_num(x, v, "net.timeout", 1, PL_VET_TIMEOUT_MAX, false,
                       &c->net_timeout);
    return unknown(x, k, "net", key);
}

static int nccl_pair(struct ctx *x, const char *key, yaml_node_t *k,
                     yaml_node_t *v, void *arg)
{
    struct pl_vetconf *c = arg;
    double d;

    if (!strcmp(key, "at_start"))
        return get_bool(x, v, "nccl.at_start", &c->nccl_start);
    if (!strcmp(key, "min_busbw_gbs"))
        return get_num(x, v, "nccl.min_busbw_gbs", 0, 1e6, false,
                       &c->nccl_min_busbw);
    if (!strcmp(key, "size")) {
        if (get_num(x, v, "nccl.size", 4, 1 << 30, true, &d) < 0)
            return -1;
        c->nccl_size = (uint64_t)d;
        return 0;
    }
    if (!strcmp(key, "iters")) {
        if (get_num(x, v, "nccl.iters", 1, 1e6, true, &d) < 0)
            return -1;
        c->nccl_iters = (uint64_t)d;
        return 0;
    }
    return unknown(x, k, "nccl", key);
}

static int ext_pair(struct ctx *x, const char *key, yaml_node_t *k,
                    yaml_node_t *v, void *arg)
{
    struct pl_vet_external *e = arg;

    if (!strcmp(key, "name")) {
        if (get_str(x, v, "external.name", &e->name) < 0)
            return -1;
        if (!pl_vet_name_ok(e->name))
            return fail(x, v, "external.name", "want 1 to 32 of a-z 0-9 _ "
                        ". -");
        return 0;
    }
    if (!strcmp(key, "command"))
        return get_strv(x, v, "external.command", 1, PL_VET_MAX_ARGS,
                        &e->argv);
    if (!strcmp(key, "timeout"))
        return get_num(x, v, "external.timeout", 0.001, PL_VET_TIMEOUT_MAX,
                       false, &e->timeout);
    return unknown(x, k, "external", key);
}

static int external(struct ctx *x, yaml_node_t *n, struct pl_vetconf *c)
{
    size_t count;

    if (n->type != YAML_SEQUENCE_NODE)
        return fail(x, n, "external", "want a list of programs");
    count = (size_t)(n->data.sequence.items.top
                     - n->data.sequence.items.start);
    if (count > PL_VET_MAX_EXTERNAL)
        return fail(x, n, "external", "at most %d programs",
                    PL_VET_MAX_EXTERNAL);
    for (uint32_t i = 0; i < c->next; i++) {
        free(c->ext[i].name);
        pl_strv_free(c->ext[i].argv);
    }
    free(c->ext);
    c->ext = NULL;
    c->next = 0;
    if (count && !(c->ext = calloc(count, sizeof(*c->ext)))) {
        errno = ENOMEM;
        return pl_errprintf(x->errp, "out of memory");
    }
    for (yaml_node_item_t *it = n->data.sequence.items.start;
         it < n->data.sequence.items.top; it++) {
        yaml_node_t *e = yaml_document_get_node(x->doc, *it);
        struct pl_vet_external *p = &c->ext[c->next++];
        p->timeout = DEF_TIMEOUT;
        if (each_pair(x, e, "external", ext_pair, p) < 0)
            return -1;
        if (!p->name || !p->argv)
            return fail(x, e, "external", "each program needs a name and "
                        "a command");
        for (uint32_t j = 0; j + 1 < c->next; j++)
            if (!strcmp(c->ext[j].name, p->name))
                return fail(x, e, "external.name", "'%s' is given twice",
                            p->name);
    }
    return 0;
}

static int top_pair(struct ctx *x, const char *key, yaml_node_t *k,
                    yaml_node_t *v, void *arg)
{
    struct pl_vetconf *c = arg;

    if (!strcmp(key, "enabled"))
        return get_bool(x, v, "enabled", &c->off) < 0 ? -1
               : (c->off = !c->off, 0);
    if (!strcmp(key, "timeout"))
        return get_num(x, v, "timeout", 1, PL_VET_TIMEOUT_MAX, false,
                       &c->timeout);
    if (!strcmp(key, "gpus"))
        return each_pair(x, v, "gpus", gpus_pair, c);
    if (!strcmp(key, "disk"))
        return each_pair(x, v, "disk", disk_pair, c);
    if (!strcmp(key, "memory"))
        return each_pair(x, v, "memory", memory_pair, c);
    if (!strcmp(key, "cpu"))
        return each_pair(x, v, "cpu", cpu_pair, c);
    if (!strcmp(key, "revet"))
        return each_pair(x, v, "revet", revet_pair, c);
    if (!strcmp(key, "external"))
        return external(x, v, c);
    if (!strcmp(key, "net"))
        return each_pair(x, v, "net", net_pair, c);
    if (!strcmp(key, "nccl"))
        return each_pair(x, v, "nccl", nccl_pair, c);
    return unknown(x, k, "", key);
}

int pl_vetconf_parse(const char *name, const char *buf, size_t len,
                     struct pl_vetconf *c, struct pl_error *errp)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_node_t *root;
    struct ctx x = { name, &doc, errp };
    int rc = -1;

    if (pl_vetconf_default(c) < 0)
        return pl_errprintf(errp, "out of memory");
    if (!yaml_parser_initialize(&parser)) {
        pl_vetconf_clear(c);
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)buf, len);
    if (!yaml_parser_load(&parser, &doc)) {
        errno = EINVAL;
        pl_errprintf(errp, "%s:%lu: not YAML: %s%s%s", name,
                     (unsigned long)parser.problem_mark.line + 1,
                     parser.problem ? parser.problem : "a syntax error",
                     parser.context ? " " : "",
                     parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        pl_vetconf_clear(c);
        return -1;
    }
    if (!(root = yaml_document_get_root_node(&doc)))
        rc = 0; /* empty: the default */
    else
        rc = each_pair(&x, root, "vet.yaml", top_pair, c);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    if (rc < 0)
        pl_vetconf_clear(c);
    else if (c->off)
        off(c);
    return rc;
}

int pl_vetconf_load(const char *path, struct pl_vetconf *c,
                    struct pl_error *errp)
{
    FILE *fp;
    char *buf = NULL;
    size_t cap = 0, len = 0, got;
    int rc;

    if (!strcmp(path, "none")) {
        if (pl_vetconf_default(c) < 0)
            return pl_errprintf(errp, "out of memory");
        off(c);
        return 0;
    }
    if (!(fp = fopen(path, "re")))
        return pl_errprintf(errp, "%s: %s", path, strerror(errno));
    do {
        if (len + 4096 > cap) {
            char *nb;
            if (cap >= 1024 * 1024) {
                fclose(fp);
                free(buf);
                errno = EINVAL;
                return pl_errprintf(errp, "%s: over 1 MiB", path);
            }
            if (!(nb = realloc(buf, cap = cap ? 2 * cap : 8192))) {
                fclose(fp);
                free(buf);
                errno = ENOMEM;
                return pl_errprintf(errp, "out of memory");
            }
            buf = nb;
        }
        got = fread(buf + len, 1, cap - len, fp);
        len += got;
    } while (got > 0);
    if (ferror(fp)) {
        int saved = errno;
        fclose(fp);
        free(buf);
        errno = saved ? saved : EIO;
        return pl_errprintf(errp, "%s: %s", path, strerror(errno));
    }
    fclose(fp);
    rc = pl_vetconf_parse(path, buf ? buf : "", len, c, errp);
    free(buf);
    return rc;
}
