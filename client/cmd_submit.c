/* client/cmd_submit.c - pilot submit: one task into the pilot's queue */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/cli.h"
#include "client/conn.h"
#include "client/output.h"
#include "client/yaml.h"
#include "proto/msg.h"

static const char help[] =
    "usage: pilot submit [options] [--] COMMAND [ARGS...]\n"
    "       pilot submit --file TASKS.jsonl|TASKS.yaml\n"
    "\n"
    "Submit COMMAND as a task to the running pilot and print its id.\n"
    "Options stop at the first word that is not one, so '--' is needed\n"
    "only when COMMAND itself starts with '-'.\n"
    "\n"
    "options:\n"
    "  --name NAME             a name for ls and show\n"
    "  --ranks N               processes (default: NODES x RANKS-PER-NODE,\n"
    "                          each 1 when not given)\n"
    "  --nodes N               spread the ranks over exactly N nodes\n"
    "  --ranks-per-node N      ranks on each node the task gets\n"
    "  --cores-per-rank N      cores each rank gets (default 1)\n"
    "  --gpus-per-rank N       GPUs each rank gets (default 0)\n"
    "  --exclusive             no other task runs on the task's nodes\n"
    "  --comm MODE             how the ranks find each other: none (default:\n"
    "                          independent ranks), torch (torch.distributed\n"
    "                          env:// variables: MASTER_ADDR, MASTER_PORT,\n"
    "                          WORLD_SIZE, RANK, LOCAL_RANK), mpi (one\n"
    "                          srun --mpi=pmix step on the chosen cores)\n"
    "  --launcher L            comm mpi: srun (default) or mpirun\n"
    "  --timeout S             kill the task after S (90, 90s, 10m, 2h)\n"
    "  --retries N             run it again up to N times if its node is\n"
    "                          lost (default 2)\n"
    "  --cwd DIR               working directory (default: this one)\n"
    "  --env KEY=VALUE         set a variable (repeatable); the pilot's\n"
    "                          environment is inherited\n"
    "  --after DEPS            wait until these tasks end: ID (an array's:\n"
    "                          all its tasks), ID.N (one element), or\n"
    "                          NAME (the latest task of that name),\n"
    "                          comma-separated,\n"
    "                          each with :ok (default: it must end done,\n"
    "                          else this task fails with reason\n"
    "                          'dependency') or :any (any end will do)\n"
    "  --array A-B[:STEP]      one task per index A, A+STEP, ... <= B; '{}'\n"
    "                          in the arguments and the name is replaced\n"
    "                          by the index, PILOT_ARRAY_INDEX holds it;\n"
    "                          prints the array's id (its first task's;\n"
    "                          the others follow it)\n"
    "  --retry-failed ID       with the command (and --array A-B:S, to\n"
    "                          narrow it): a new array of only the indexes\n"
    "                          whose tasks failed or timed out in array ID\n"
    "                          (which must have ended)\n"
    "  --priority N            higher starts first (-1000000..1000000,\n"
    "                          default 0); FIFO within a priority\n"
    "  --tag KEY=VALUE         a label for 'pilot ls --tag' (repeatable)\n"
    "  --file FILE             many tasks in one request: one JSON object\n"
    "                          a line (- reads stdin), or a YAML list of\n"
    "                          mappings (FILE ending in .yaml or .yml);\n"
    "                          keys as the long options with '_' for '-'\n"
    "                          (argv: [..] or cmd: \"shell line\"; after\n"
    "                          may name tasks of the file; tags: {K: V});\n"
    "                          prints their ids in order; nothing is\n"
    "                          queued if an entry is wrong\n"
    "  --pilot ID              the pilot to submit to\n"
    "  --json                  print {\"ids\": [ID...]}\n"
    "  -h, --help              this help\n"
    "\n"
    "Every rank gets PILOT_TASK_ID, PILOT_RANK, PILOT_SIZE,\n"
    "PILOT_LOCAL_RANK, PILOT_NODELIST, OMP_NUM_THREADS and, with GPUs,\n"
    "CUDA_VISIBLE_DEVICES; it is bound to its own cores.\n"
    "\n"
    "examples:\n"
    "  pilot submit -- hostname\n"
    "  pilot submit --name hello --cores-per-rank 2 -- sh -c 'echo hi; "
    "exit 3'\n"
    "  # comm none: 4 independent ranks, one GPU each\n"
    "  pilot submit --ranks 4 --gpus-per-rank 1 -- ./independent.sh\n"
    "  # comm torch: 2 nodes x 4 ranks, init_process_group(\"env://\")\n"
    "  pilot submit --nodes 2 --ranks-per-node 4 --gpus-per-rank 1 "
    "--comm torch \\\n"
    "      -- /usr/bin/python3 train.py\n"
    "  # comm mpi: one MPI job of 16 ranks, placed across nodes\n"
    "  pilot submit --ranks 16 --cores-per-rank 2 --comm mpi -- ./prep in/ "
    "out/\n"
    "  # a whole node to itself\n"
    "  pilot submit --exclusive --nodes 1 -- ./needs-whole-node\n"
    "  # 100 tasks, then one that runs once all of them are done\n"
    "  A=$(pilot submit --array 0-99 -- ./prep part-{}.csv)\n"
    "  pilot submit --after $A --name train -- ./train\n"
    "  # once array $A has ended: its failed indexes again\n"
    "  pilot submit --retry-failed $A -- ./prep part-{}.csv\n"
    "  # a file: {\"name\": \"a\", \"cmd\": \"./prep\"}\n"
    "  #         {\"argv\": [\"./train\"], \"after\": [\"a\"]}\n"
    "  pilot submit --file tasks.jsonl\n";

enum {
    OPT_NAME = PL_OPT_CMD,
    OPT_CORES,
    OPT_GPUS,
    OPT_RANKS,
    OPT_TIMEOUT,
    OPT_RETRIES,
    OPT_CWD,
    OPT_ENV,
    OPT_NODES,
    OPT_RPN,
    OPT_EXCLUSIVE,
    OPT_COMM,
    OPT_LAUNCHER,
    OPT_AFTER,
    OPT_ARRAY,
    OPT_FILE,
    OPT_RETRY,
    OPT_PRIORITY,
    OPT_TAG,
};

/* The limits of docs/protocol.md "task spec". */
#define MAX_CORES 4096
#define MAX_GPUS 64
#define MAX_RETRIES 100
#define MAX_ENV 4096
#define MAX_RANKS 65536
#define MAX_NODES 65536
#define MAX_RPN 4096
#define MAX_PRIORITY 1000000
#define MAX_TAGS 32

/* --comm values: protocol.md "task spec" field comm */
static const char *const comm_modes[] = { "none", "torch", "mpi", NULL };

static bool env_ok(const char *s)
{
    const char *eq = strchr(s, '=');

    return eq && eq != s;
}

static bool comm_ok(const char *s)
{
    for (size_t i = 0; comm_modes[i]; i++)
        if (!strcmp(s, comm_modes[i]))
            return true;
    return false;
}

/* What the options say; strings are borrowed from argv. */
struct submit_opts {
    const char *name;
    const char *cwd;
    const char *comm;
    const char *launcher;
    uint64_t cores, gpus, ranks, retries, nodes, rpn;
    double timeout;
    bool have_timeout, have_retries, have_ranks, exclusive;
    json_t *env; /* [KEY=VALUE] */
    json_t *after; /* [{id} or {name}, any] */
    json_t *array; /* [start, end, step], or NULL */
    json_t *tags; /* ["KEY=VALUE"] */
    uint64_t retry; /* --retry-failed: that array's id; 0: none */
    int64_t priority;
    bool have_priority;
    const char *file;
    bool task_opts; /* an option that describes a task (not with --file) */
};

#define MAX_AFTER 10000
#define MAX_ARRAY 1000000
#define SUBMIT_CHUNK 100000 /* specs in one request (protocol.md) */

/* "ID[:ok|:any],NAME..." into 'arr'.  0, or -1 with errp set. */
static int parse_after(const char *s, json_t *arr, struct pl_error *errp)
{
    const char *p = s;

    while (*p) {
        size_t n = strcspn(p, ",");
        char item[300];
        bool any = false;
        json_t *e;
        if (n == 0 || n >= sizeof(item))
            return pl_errprintf(errp, "--after: '%s': %s", s, n ? "an entry "
                                "is too long" : "an empty entry");
        memcpy(item, p, n);
        item[n] = '\0';
        char *colon = strrchr(item, ':');
        if (colon && (!strcmp(colon, ":any") || !strcmp(colon, ":ok"))) {
            any = !strcmp(colon, ":any");
            *colon = '\0';
        }
        if (!item[0])
            return pl_errprintf(errp, "--after: '%s': an entry without a "
                                "task", s);
        size_t digits = strspn(item, "0123456789");
        if (digits == strlen(item)) {
            char *end;
            errno = 0;
            unsigned long long id = strtoull(item, &end, 10);
            if (errno || id == 0)
                return pl_errprintf(errp, "--after: '%s' is not a task id",
                                    item);
            e = json_pack("{s:I}", "id", (json_int_t)id);
        }
        else if (digits > 0 && item[digits] == '.'
                 && item[digits + 1] >= '0' && item[digits + 1] <= '9'
                 && strspn(item + digits + 1, "0123456789")
                        == strlen(item + digits + 1)) {
            /* ID.N: element N of array ID */
            errno = 0;
            unsigned long long id = strtoull(item, NULL, 10);
            unsigned long long idx = strtoull(item + digits + 1, NULL, 10);
            if (errno || id == 0 || idx > UINT32_MAX)
                return pl_errprintf(errp, "--after: '%s' is not an array "
                                    "element (ID.N)", item);
            e = json_pack("{s:I, s:I}", "id", (json_int_t)id, "index",
                          (json_int_t)idx);
        }
        else
            e = json_pack("{s:s}", "name", item);
        if (!e)
            return pl_errprintf(errp, "--after: '%s' is not UTF-8", item);
        if (any)
            json_object_set_new(e, "any", json_true());
        if (json_array_size(arr) >= MAX_AFTER) {
            json_decref(e);
            return pl_errprintf(errp, "--after: more than %d tasks",
                                MAX_AFTER);
        }
        json_array_append_new(arr, e);
        p += n;
        if (*p == ',')
            p++;
    }
    if (json_array_size(arr) == 0)
        return pl_errprintf(errp, "--after: no task given");
    return 0;
}

/* "KEY=VALUE" with KEY of 1-64 [A-Za-z0-9_.-] and VALUE at most 256
 * bytes (docs/protocol.md, tags). */
static bool tag_ok(const char *s)
{
    size_t k = pl_cli_tag_key(s);

    return k > 0 && s[k] == '=' && strlen(s + k + 1) <= 256;
}

/* "N" in -MAX_PRIORITY..MAX_PRIORITY.  0, or -1 with errp set. */
static int parse_priority(const char *s, int64_t *v, struct pl_error *errp)
{
    char *end;
    long long x;

    errno = 0;
    x = strtoll(s, &end, 10);
    if (errno || end == s || *end || x < -MAX_PRIORITY || x > MAX_PRIORITY)
        return pl_errprintf(errp, "--priority: '%s' is not an integer in "
                            "-%d..%d", s, MAX_PRIORITY, MAX_PRIORITY);
    *v = x;
    return 0;
}

/* A decimal number at *p (digits only), moving *p past it. */
static bool read_num(const char **p, unsigned long long *v)
{
    char *end;

    if (**p < '0' || **p > '9')
        return false;
    errno = 0;
    *v = strtoull(*p, &end, 10);
    *p = end;
    return errno == 0;
}

/* "A-B[:STEP]" as [A, B, STEP].  NULL with errp set. */
static json_t *parse_array(const char *s, struct pl_error *errp)
{
    unsigned long long a, b, step = 1;
    const char *p = s;

    if (!read_num(&p, &a) || *p++ != '-' || !read_num(&p, &b)
        || (*p == ':' && (p++, !read_num(&p, &step))) || *p) {
        pl_errprintf(errp, "--array: '%s' is not A-B or A-B:STEP", s);
        return NULL;
    }
    if (step == 0) {
        pl_errprintf(errp, "--array: the step must be at least 1");
        return NULL;
    }
    if (b < a) {
        pl_errprintf(errp, "--array: %llu-%llu ends before it starts", a, b);
        return NULL;
    }
    if (b > UINT32_MAX) {
        pl_errprintf(errp, "--array: indexes go up to %u", UINT32_MAX);
        return NULL;
    }
    if ((b - a) / step + 1 > MAX_ARRAY) {
        pl_errprintf(errp, "--array: %llu tasks; at most %d",
                     (b - a) / step + 1, MAX_ARRAY);
        return NULL;
    }
    return json_pack("[I,I,I]", (json_int_t)a, (json_int_t)b,
                     (json_int_t)step);
}

/* Reconcile --ranks, --nodes and --ranks-per-node.  Without --ranks the
 * task has NODES x RANKS-PER-NODE ranks, either count defaulting to 1 (as
 * srun -N 4 starts 4 tasks); with it, --nodes needs at least a rank per
 * node, and with both others it must be their product.  Returns -1 to go
 * on, else the exit code of a usage error. */
static int check_counts(struct pl_cli *cli, struct submit_opts *o)
{
    unsigned long long nodes = o->nodes, rpn = o->rpn, ranks = o->ranks;

    if (!nodes && !rpn)
        return -1;
    if (!o->have_ranks) {
        /* at most 2^16 (MAX_NODES) x 2^12 (MAX_RPN): no overflow */
        uint64_t n = (nodes ? nodes : 1) * (rpn ? rpn : 1);
        if (n > MAX_RANKS)
            return pl_cli_usage(cli, "--nodes %llu x --ranks-per-node %llu "
                                "is more than %d ranks", nodes, rpn,
                                MAX_RANKS);
        o->ranks = n;
        o->have_ranks = true;
        return -1;
    }
    if (nodes && rpn && ranks != nodes * rpn)
        return pl_cli_usage(cli, "--ranks %llu does not match --nodes %llu "
                            "x --ranks-per-node %llu", ranks, nodes, rpn);
    if (nodes && ranks < nodes)
        return pl_cli_usage(cli, "--ranks %llu is fewer than --nodes %llu "
                            "(each node needs a rank)", ranks, nodes);
    return -1;
}

/* Parse the options into 'o'.  Returns -1 to go on, else the exit code
 * (help printed, or a usage error). */
static int parse_opts(struct pl_cli *cli, int argc, char **argv,
                      struct submit_opts *o)
{
    static const struct option opts[] = {
        { "name", required_argument, NULL, OPT_NAME },
        { "cores-per-rank", required_argument, NULL, OPT_CORES },
        { "gpus-per-rank", required_argument, NULL, OPT_GPUS },
        { "ranks", required_argument, NULL, OPT_RANKS },
        { "timeout", required_argument, NULL, OPT_TIMEOUT },
        { "retries", required_argument, NULL, OPT_RETRIES },
        { "cwd", required_argument, NULL, OPT_CWD },
        { "env", required_argument, NULL, OPT_ENV },
        { "nodes", required_argument, NULL, OPT_NODES },
        { "ranks-per-node", required_argument, NULL, OPT_RPN },
        { "exclusive", no_argument, NULL, OPT_EXCLUSIVE },
        { "comm", required_argument, NULL, OPT_COMM },
        { "launcher", required_argument, NULL, OPT_LAUNCHER },
        { "after", required_argument, NULL, OPT_AFTER },
        { "array", required_argument, NULL, OPT_ARRAY },
        { "file", required_argument, NULL, OPT_FILE },
        { "retry-failed", required_argument, NULL, OPT_RETRY },
        { "priority", required_argument, NULL, OPT_PRIORITY },
        { "tag", required_argument, NULL, OPT_TAG },
        PL_CLI_COMMON_OPTS,
        { 0 },
    };
    struct pl_error err;
    int c, r, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
        if ((r = pl_cli_opt(cli, c, argv, help, &rc)) < 0)
            return rc;
        if (r > 0)
            continue;
        if (c != OPT_FILE)
            o->task_opts = true;
        switch (c) {
        case OPT_AFTER:
            if (parse_after(optarg, o->after, &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            break;
        case OPT_ARRAY:
            json_decref(o->array);
            if (!(o->array = parse_array(optarg, &err)))
                return pl_cli_usage(cli, "%s", err.text);
            break;
        case OPT_RETRY:
            if (pl_cli_parse_uint("--retry-failed", optarg, 1, INT64_MAX,
                                  &o->retry, &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            break;
        case OPT_PRIORITY:
            if (parse_priority(optarg, &o->priority, &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            o->have_priority = true;
            break;
        case OPT_TAG:
            if (!tag_ok(optarg))
                return pl_cli_usage(cli, "--tag: '%s' is not KEY=VALUE (KEY: "
                                    "1-64 letters, digits, '_', '.', '-'; "
                                    "VALUE: at most 256 bytes)", optarg);
            if (json_array_size(o->tags) >= MAX_TAGS)
                return pl_cli_usage(cli, "--tag: more than %d", MAX_TAGS);
            if (json_array_append_new(o->tags, json_string(optarg)) < 0)
                return pl_cli_usage(cli, "--tag: '%s' is not valid UTF-8",
                                    optarg);
            break;
        case OPT_FILE:
            if (!*optarg)
                return pl_cli_usage(cli, "--file: empty file name");
            o->file = optarg;
            break;
        case OPT_NAME:
            if (strlen(optarg) > 256)
                return pl_cli_usage(cli, "--name: longer than 256 bytes");
            o->name = optarg;
            break;
        case OPT_CORES:
            if (pl_cli_parse_uint("--cores-per-rank", optarg, 1, MAX_CORES,
                                  &o->cores, &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            break;
        case OPT_GPUS:
            if (pl_cli_parse_uint("--gpus-per-rank", optarg, 0, MAX_GPUS,
                                  &o->gpus, &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            break;
        case OPT_RANKS:
            if (pl_cli_parse_uint("--ranks", optarg, 1, MAX_RANKS, &o->ranks,
                                  &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            o->have_ranks = true;
            break;
        case OPT_NODES:
            if (pl_cli_parse_uint("--nodes", optarg, 1, MAX_NODES, &o->nodes,
                                  &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            break;
        case OPT_RPN:
            if (pl_cli_parse_uint("--ranks-per-node", optarg, 1, MAX_RPN,
                                  &o->rpn, &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            break;
        case OPT_EXCLUSIVE:
            o->exclusive = true;
            break;
        case OPT_COMM:
            if (!comm_ok(optarg))
                return pl_cli_usage(cli, "--comm: '%s' is not none, torch "
                                    "or mpi", optarg);
            o->comm = optarg;
            break;
        case OPT_LAUNCHER:
            if (strcmp(optarg, "srun") && strcmp(optarg, "mpirun"))
                return pl_cli_usage(cli, "--launcher: '%s' is not srun or "
                                    "mpirun", optarg);
            o->launcher = optarg;
            break;
        case OPT_TIMEOUT:
            if (pl_cli_parse_secs("--timeout", optarg, &o->timeout, &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            o->have_timeout = true;
            break;
        case OPT_RETRIES:
            if (pl_cli_parse_uint("--retries", optarg, 0, MAX_RETRIES,
                                  &o->retries, &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            o->have_retries = true;
            break;
        case OPT_CWD:
            if (!*optarg)
                return pl_cli_usage(cli, "--cwd: empty directory");
            o->cwd = optarg;
            break;
        case OPT_ENV:
            if (!env_ok(optarg))
                return pl_cli_usage(cli, "--env: '%s' is not KEY=VALUE",
                                    optarg);
            if (json_array_size(o->env) >= MAX_ENV)
                return pl_cli_usage(cli, "--env: more than %d variables",
                                    MAX_ENV);
            if (json_array_append_new(o->env, json_string(optarg)) < 0)
                return pl_cli_usage(cli, "--env: '%s' is not valid UTF-8",
                                    optarg);
            break;
        }
    }
    if (o->launcher && (!o->comm || strcmp(o->comm, "mpi")))
        return pl_cli_usage(cli, "--launcher goes with --comm mpi");
    if (o->file) {
        if (o->task_opts)
            return pl_cli_usage(cli, "--file: the file says what each task "
                                "is; no other task option goes with it");
        if (optind < argc)
            return pl_cli_usage(cli, "--file: no command goes with it ('%s')",
                                argv[optind]);
        return -1;
    }
    if (optind >= argc)
        return pl_cli_usage(cli, "no command given (usage: pilot submit "
                            "[options] -- COMMAND [ARGS...])");
    if (!argv[optind][0])
        return pl_cli_usage(cli, "the command is an empty string");
    return check_counts(cli, o);
}

/* The task spec (docs/protocol.md) for COMMAND argv[0..argc-1], or NULL
 * with errp set. */
static json_t *make_spec(const struct submit_opts *o, int argc, char **argv,
                         struct pl_error *errp)
{
    char here[PATH_MAX], cwd[PATH_MAX + 1];
    json_t *args, *spec;

    /* the task runs elsewhere: a relative directory means this one's */
    if (o->cwd && o->cwd[0] == '/')
        snprintf(cwd, sizeof(cwd), "%s", o->cwd);
    else if (!getcwd(here, sizeof(here))) {
        pl_errprintf(errp, "cannot get the current directory: %s (use "
                     "--cwd DIR)", strerror(errno));
        return NULL;
    }
    else if (snprintf(cwd, sizeof(cwd), "%s%s%s", here, o->cwd ? "/" : "",
                      o->cwd ? o->cwd : "") >= (int)sizeof(cwd)) {
        errno = ENAMETOOLONG;
        pl_errprintf(errp, "--cwd: path too long");
        return NULL;
    }
    if (!(args = json_array()))
        goto nomem;
    for (int i = 0; i < argc; i++)
        if (json_array_append_new(args, json_string(argv[i])) < 0) {
            json_decref(args);
            errno = EINVAL;
            pl_errprintf(errp, "argument %d of the command is not valid "
                         "UTF-8", i);
            return NULL;
        }
    if (!(spec = json_pack("{s:o, s:s, s:I, s:I, s:I}", "argv", args,
                           "cwd", cwd, "ranks", (json_int_t)o->ranks,
                           "cores_per_rank", (json_int_t)o->cores,
                           "gpus_per_rank", (json_int_t)o->gpus)))
        goto nomem;
    if (o->name)
        json_object_set_new(spec, "name", json_string(o->name));
    if (json_array_size(o->env) > 0)
        json_object_set(spec, "env", o->env);
    if (o->have_timeout)
        json_object_set_new(spec, "timeout", json_real(o->timeout));
    if (o->have_retries)
        json_object_set_new(spec, "retries",
                            json_integer((json_int_t)o->retries));
    if (o->nodes > 0)
        json_object_set_new(spec, "nodes", json_integer((json_int_t)o->nodes));
    if (o->rpn > 0)
        json_object_set_new(spec, "ranks_per_node",
                            json_integer((json_int_t)o->rpn));
    if (o->exclusive)
        json_object_set_new(spec, "exclusive", json_true());
    if (o->comm)
        json_object_set_new(spec, "comm", json_string(o->comm));
    if (o->launcher)
        json_object_set_new(spec, "launcher", json_string(o->launcher));
    if (json_array_size(o->after) > 0)
        json_object_set(spec, "after", o->after);
    if (o->array)
        json_object_set(spec, "array", o->array);
    if (o->retry)
        json_object_set_new(spec, "retry_failed",
                            json_integer((json_int_t)o->retry));
    if (o->have_priority)
        json_object_set_new(spec, "priority",
                            json_integer((json_int_t)o->priority));
    if (json_array_size(o->tags) > 0)
        json_object_set(spec, "tags", o->tags);
    return spec;
nomem:
    errno = ENOMEM;
    pl_errprintf(errp, "out of memory");
    return NULL;
}

/* ------------------------------------------------------------ --file */

/* A file's env or tags, {"K": V} (V a string or a number) or ["K=V"], as
 * a new array of "K=V", each passing 'ok'; NULL if one does not. */
static json_t *kv_list(json_t *v, bool (*ok)(const char *))
{
    json_t *out = json_array(), *x;
    const char *k;
    size_t i;

    if (json_is_object(v)) {
        json_object_foreach(v, k, x) {
            char kv[8192];
            if (!*k || strchr(k, '='))
                goto bad;
            if (json_is_string(x))
                snprintf(kv, sizeof(kv), "%s=%s", k, json_string_value(x));
            else if (json_is_integer(x))
                snprintf(kv, sizeof(kv), "%s=%lld", k,
                         (long long)json_integer_value(x));
            else if (json_is_real(x))
                snprintf(kv, sizeof(kv), "%s=%g", k, json_real_value(x));
            else
                goto bad;
            if (!ok(kv))
                goto bad;
            json_array_append_new(out, json_string(kv));
        }
    }
    else if (json_is_array(v)) {
        json_array_foreach(v, i, x) {
            if (!json_is_string(x) || !ok(json_string_value(x)))
                goto bad;
            json_array_append(out, x);
        }
    }
    else
        goto bad;
    return out;
bad:
    json_decref(out);
    return NULL;
}

/* A task spec from one line's object 'in', or NULL with errp set. */
static json_t *line_spec(json_t *in, const char *here, struct pl_error *errp)
{
    json_t *spec = json_object(), *v, *after = NULL;
    const char *key;
    struct pl_error e;

    if (!json_is_object(in)) {
        pl_errprintf(errp, "not a JSON object");
        goto error;
    }
    json_object_foreach(in, key, v) {
        if (!strcmp(key, "argv")) {
            size_t i;
            json_t *a;
            if (!json_is_array(v) || json_array_size(v) == 0)
                goto type;
            json_array_foreach(v, i, a) if (!json_is_string(a)) goto type;
            json_object_set(spec, "argv", v);
        }
        else if (!strcmp(key, "cmd")) {
            if (!json_is_string(v))
                goto type;
            json_object_set_new(spec, "argv", json_pack("[s,s,O]", "/bin/sh",
                                                         "-c", v));
        }
        else if (!strcmp(key, "name") || !strcmp(key, "comm")
                 || !strcmp(key, "launcher")) {
            if (!json_is_string(v))
                goto type;
            json_object_set(spec, key, v);
        }
        else if (!strcmp(key, "cwd")) {
            char path[PATH_MAX * 2];
            if (!json_is_string(v) || !json_string_length(v))
                goto type;
            snprintf(path, sizeof(path), "%s%s%s",
                     json_string_value(v)[0] == '/' ? "" : here,
                     json_string_value(v)[0] == '/' ? "" : "/",
                     json_string_value(v));
            json_object_set_new(spec, "cwd", json_string(path));
        }
        else if (!strcmp(key, "ranks") || !strcmp(key, "nodes")
                 || !strcmp(key, "ranks_per_node")
                 || !strcmp(key, "cores_per_rank")
                 || !strcmp(key, "gpus_per_rank")
                 || !strcmp(key, "retries")) {
            if (!json_is_integer(v) || json_integer_value(v) < 0)
                goto type;
            json_object_set(spec, key, v);
        }
        else if (!strcmp(key, "exclusive")) {
            if (!json_is_boolean(v))
                goto type;
            json_object_set(spec, key, v);
        }
        else if (!strcmp(key, "priority")) {
            if (!json_is_integer(v) || json_integer_value(v) < -MAX_PRIORITY
                || json_integer_value(v) > MAX_PRIORITY)
                goto type;
            json_object_set(spec, key, v);
        }
        else if (!strcmp(key, "tags")) {
            json_t *tags = kv_list(v, tag_ok);
            if (!tags || json_array_size(tags) > MAX_TAGS) {
                json_decref(tags);
                goto type;
            }
            json_object_set_new(spec, "tags", tags);
        }
        else if (!strcmp(key, "timeout")) {
            double secs;
            if (json_is_number(v) && json_number_value(v) >= 0)
                secs = json_number_value(v);
            else if (!json_is_string(v)
                     || pl_cli_parse_secs("timeout", json_string_value(v),
                                          &secs, &e) < 0)
                goto type;
            json_object_set_new(spec, "timeout", json_real(secs));
        }
        else if (!strcmp(key, "env")) {
            json_t *env = kv_list(v, env_ok);
            if (!env)
                goto type;
            json_object_set_new(spec, "env", env);
        }
        else if (!strcmp(key, "after")) {
            json_t *x;
            size_t i;
            after = json_array();
            if (json_is_string(v)) {
                if (parse_after(json_string_value(v), after, errp) < 0)
                    goto error;
            }
            else if (json_is_array(v)) {
                json_array_foreach(v, i, x) {
                    char buf[32];
                    const char *t = buf;
                    if (json_is_integer(x) && json_integer_value(x) > 0)
                        snprintf(buf, sizeof(buf), "%lld",
                                 (long long)json_integer_value(x));
                    else if (json_is_string(x))
                        t = json_string_value(x);
                    else
                        goto type;
                    if (parse_after(t, after, errp) < 0)
                        goto error;
                }
            }
            else
                goto type;
            json_object_set(spec, "after", after);
        }
        else if (!strcmp(key, "array")) {
            json_t *arr;
            if (json_is_string(v)) {
                if (!(arr = parse_array(json_string_value(v), errp)))
                    goto error;
            }
            else if (json_is_array(v) && json_array_size(v) == 3
                     && json_is_integer(json_array_get(v, 0))
                     && json_is_integer(json_array_get(v, 1))
                     && json_is_integer(json_array_get(v, 2))) {
                char buf[96];
                snprintf(buf, sizeof(buf), "%lld-%lld:%lld",
                         (long long)json_integer_value(json_array_get(v, 0)),
                         (long long)json_integer_value(json_array_get(v, 1)),
                         (long long)json_integer_value(json_array_get(v, 2)));
                if (!(arr = parse_array(buf, errp)))
                    goto error;
            }
            else
                goto type;
            json_object_set_new(spec, "array", arr);
        }
        else {
            pl_errprintf(errp, "unknown field '%.40s'", key);
            goto error;
        }
    }
    if (!json_object_get(spec, "argv")) {
        pl_errprintf(errp, "no command: give argv (a list) or cmd (a shell "
                     "line)");
        goto error;
    }
    if (json_object_get(in, "argv") && json_object_get(in, "cmd")) {
        pl_errprintf(errp, "argv and cmd: give one of them");
        goto error;
    }
    if (!json_object_get(spec, "cwd"))
        json_object_set_new(spec, "cwd", json_string(here));
    json_decref(after);
    return spec;
type:
    pl_errprintf(errp, "field '%.40s' has the wrong type or value", key);
error:
    json_decref(after);
    json_decref(spec);
    return NULL;
}

/* Whether 'path' names a YAML file (by its suffix). */
static bool is_yaml(const char *path)
{
    size_t n = strlen(path);

    return (n > 5 && !strcmp(path + n - 5, ".yaml"))
           || (n > 4 && !strcmp(path + n - 4, ".yml"));
}

/* Read FILE ('-': stdin) into specs; 'lines[i]' is spec i's line.  Order
 * them so that a task named in another's "after" comes first.  0, or -1
 * after printing the error. */
static int read_file(const char *path, json_t **specs_out, size_t **lines_out)
{
    FILE *fp = strcmp(path, "-") ? fopen(path, "r") : stdin;
    json_t *specs = json_array(), *names = json_object();
    size_t *lines = NULL, cap = 0, n = 0, lineno = 0;
    char here[PATH_MAX], *buf = NULL;
    size_t bufcap = 0, *elines = NULL, ei = 0;
    ssize_t len;
    json_t *entries = NULL;
    struct pl_error yerr;
    bool yaml = is_yaml(path);
    int rc = -1;

    if (!fp) {
        pl_cli_error("--file: cannot open %s: %s", path, strerror(errno));
        goto done;
    }
    if (!getcwd(here, sizeof(here))) {
        pl_cli_error("cannot get the current directory: %s", strerror(errno));
        goto done;
    }
    if (yaml && !(entries = pl_yaml_tasks(fp, &elines, &yerr))) {
        pl_cli_error("%s: %s", path, yerr.text);
        goto done;
    }
    for (;;) {
        json_error_t je;
        struct pl_error err;
        json_t *obj;
        if (entries) {
            if (ei >= json_array_size(entries))
                break;
            obj = json_incref(json_array_get(entries, ei));
            lineno = elines[ei++];
        }
        else {
            if ((len = getline(&buf, &bufcap, fp)) < 0)
                break;
            lineno++;
            size_t sp = strspn(buf, " \t\r\n");
            if (buf[sp] == '\0' || buf[sp] == '#')
                continue;
            if (!(obj = json_loadb(buf, (size_t)len, 0, &je))) {
                pl_cli_error("%s: line %zu: not JSON: %s", path, lineno,
                             je.text);
                goto done;
            }
        }
        json_t *spec = line_spec(obj, here, &err);
        json_decref(obj);
        if (!spec) {
            pl_cli_error("%s: line %zu: %s", path, lineno, err.text);
            goto done;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            size_t *nl = realloc(lines, cap * sizeof(*nl));
            if (!nl) {
                json_decref(spec);
                pl_cli_error("out of memory");
                goto done;
            }
            lines = nl;
        }
        lines[n] = lineno;
        json_t *nm = json_object_get(spec, "name");
        if (nm) /* the last line of a name is the one "after" means */
            json_object_set_new(names, json_string_value(nm),
                                json_integer((json_int_t)n));
        json_array_append_new(specs, spec);
        n++;
    }
    if (ferror(fp)) {
        pl_cli_error("--file: cannot read %s: %s", path, strerror(errno));
        goto done;
    }
    if (n == 0) {
        pl_cli_error("%s: no tasks in it", path);
        goto done;
    }
    /* Kahn's order, stable: a spec goes once the file's tasks it names
     * have gone */
    size_t *indeg = calloc(n, sizeof(*indeg)), *order = malloc(n * sizeof(*order));
    size_t *edge_from = NULL, nedges = 0, ecap = 0, *edge_to = NULL;
    bool ok = indeg && order;
    for (size_t i = 0; ok && i < n; i++) {
        json_t *after = json_object_get(json_array_get(specs, i), "after"), *e;
        size_t k;
        json_array_foreach(after, k, e) {
            json_t *nm = json_object_get(e, "name");
            json_t *def = nm ? json_object_get(names, json_string_value(nm))
                             : NULL;
            if (!def)
                continue;
            size_t from = (size_t)json_integer_value(def);
            if (from == i) {
                pl_cli_error("%s: line %zu: it waits for itself ('%s')", path,
                             lines[i], json_string_value(nm));
                goto cleanup;
            }
            if (nedges == ecap) {
                ecap = ecap ? ecap * 2 : 256;
                size_t *nf = realloc(edge_from, ecap * sizeof(*nf));
                if (nf)
                    edge_from = nf;
                size_t *nt = nf ? realloc(edge_to, ecap * sizeof(*nt)) : NULL;
                if (!nt) {
                    ok = false;
                    break;
                }
                edge_to = nt;
            }
            edge_from[nedges] = from;
            edge_to[nedges++] = i;
            indeg[i]++;
        }
    }
    if (!ok) {
        pl_cli_error("out of memory");
        goto cleanup;
    }
    size_t done_n = 0;
    bool *taken = calloc(n, sizeof(*taken));
    if (!taken) {
        pl_cli_error("out of memory");
        goto cleanup;
    }
    /* quadratic only in the length of chains that point forward */
    for (bool moved = true; moved && done_n < n;) {
        moved = false;
        for (size_t i = 0; i < n; i++) {
            if (taken[i] || indeg[i])
                continue;
            taken[i] = true;
            order[done_n++] = i;
            moved = true;
            for (size_t k = 0; k < nedges; k++)
                if (edge_from[k] == i)
                    indeg[edge_to[k]]--;
        }
    }
    if (done_n < n) {
        for (size_t i = 0; i < n; i++)
            if (!taken[i]) {
                pl_cli_error("%s: line %zu: its \"after\" is part of a "
                             "cycle", path, lines[i]);
                break;
            }
        free(taken);
        goto cleanup;
    }
    free(taken);
    json_t *sorted = json_array();
    size_t *slines = malloc(n * sizeof(*slines));
    if (!sorted || !slines) {
        json_decref(sorted);
        free(slines);
        pl_cli_error("out of memory");
        goto cleanup;
    }
    for (size_t i = 0; i < n; i++) {
        json_array_append(sorted, json_array_get(specs, order[i]));
        slines[i] = lines[order[i]];
    }
    json_decref(specs);
    specs = sorted;
    free(lines);
    lines = slines;
    rc = 0;
cleanup:
    free(indeg);
    free(order);
    free(edge_from);
    free(edge_to);
done:
    if (fp && fp != stdin)
        fclose(fp);
    free(buf);
    json_decref(entries);
    free(elines);
    json_decref(names);
    if (rc == 0) {
        *specs_out = specs;
        *lines_out = lines;
    }
    else {
        json_decref(specs);
        free(lines);
    }
    return rc;
}

/* Send 'specs' in requests of SUBMIT_CHUNK; their ids into 'ids'.  An
 * error of spec K of a request names its line when 'lines' is given.
 * 0, or -1 after printing the error. */
static int send_specs(struct pl_cli *cli, json_t *specs, const size_t *lines,
                      const char *file, json_t *ids)
{
    struct pl_error err;
    struct pl_conn *conn = pl_conn_open(cli, PL_CONN_WRITE, &err);
    size_t n = json_array_size(specs), total = 0;
    bool tty = isatty(STDERR_FILENO) && n > SUBMIT_CHUNK;
    int rc = -1;

    if (!conn) {
        pl_cli_error("%s", err.text);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *arr = json_object_get(json_array_get(specs, i), "array");
        total += arr ? (size_t)((json_integer_value(json_array_get(arr, 1))
                                 - json_integer_value(json_array_get(arr, 0)))
                                    / json_integer_value(json_array_get(arr, 2))
                                + 1)
                     : 1;
    }
    /* pilotd stores about 200,000 tasks a second: give it the time */
    if (conn->timeout_ms < 10000 + (int)(total / 20))
        conn->timeout_ms = 10000 + (int)(total / 20);
    for (size_t off = 0; off < n; off += SUBMIT_CHUNK) {
        size_t m = n - off < SUBMIT_CHUNK ? n - off : SUBMIT_CHUNK;
        json_t *chunk = json_array(), *body, *reply, *got;
        for (size_t i = 0; i < m; i++)
            json_array_append(chunk, json_array_get(specs, off + i));
        body = json_pack("{s:o}", "tasks", chunk);
        reply = body ? pl_conn_request(conn, PL_MSG_SUBMIT, body, &err)
                     : NULL;
        json_decref(body);
        if (!reply) {
            unsigned k;
            int used = 0;
            if (lines && sscanf(err.text, "task %u: %n", &k, &used) == 1
                && used > 0 && k >= 1 && k <= m)
                pl_cli_error("%s: line %zu: %s%s", file, lines[off + k - 1],
                             err.text + used,
                             off ? " (the lines before it were queued)" : "");
            else if (lines && m == 1)
                pl_cli_error("%s: line %zu: %s", file, lines[off], err.text);
            else
                pl_cli_error("%s%s", err.text,
                             off ? " (the tasks before were queued)" : "");
            goto done;
        }
        got = json_object_get(reply, "ids");
        if (!json_is_array(got) || json_array_size(got) == 0) {
            json_decref(reply);
            pl_cli_error("pilotd answered submit without task ids");
            goto done;
        }
        json_array_extend(ids, got);
        json_decref(reply);
        if (tty)
            fprintf(stderr, "\rsubmitted %zu of %zu", off + m, n);
    }
    if (tty)
        fprintf(stderr, "\n");
    rc = 0;
done:
    pl_conn_free(conn);
    return rc;
}

struct byline {
    size_t line;
    json_int_t id;
};

static int cmp_line(const void *a, const void *b)
{
    const struct byline *x = a, *y = b;

    return (x->line > y->line) - (x->line < y->line);
}

int pl_cmd_submit(struct pl_cli *cli, int argc, char **argv)
{
    struct submit_opts o = { .cores = 1, .ranks = 1 };
    struct pl_error err;
    json_t *spec = NULL, *specs = NULL, *ids = json_array();
    size_t *lines = NULL;
    int rc;

    if (!(o.env = json_array()) || !(o.after = json_array())
        || !(o.tags = json_array()) || !ids) {
        rc = pl_cli_error("out of memory");
        goto done;
    }
    if ((rc = parse_opts(cli, argc, argv, &o)) >= 0)
        goto done;
    rc = PL_EXIT_ERROR;
    if (o.file) {
        if (read_file(o.file, &specs, &lines) < 0)
            goto done;
    }
    else {
        if (!(spec = make_spec(&o, argc - optind, argv + optind, &err))) {
            pl_cli_error("%s", err.text);
            goto done;
        }
        specs = json_pack("[O]", spec);
    }
    if (send_specs(cli, specs, lines, o.file, ids) < 0)
        goto done;
    if (cli->json) {
        json_t *out = json_pack("{s:O}", "ids", ids);
        if (o.array || o.retry)
            json_object_set(out, "array", json_array_get(ids, 0));
        pl_out_json(out);
        json_decref(out);
    }
    else if (o.array || o.retry) {
        /* the array's id; its tasks follow it */
        printf("%lld\n", (long long)json_integer_value(json_array_get(ids, 0)));
        if (isatty(STDERR_FILENO))
            fprintf(stderr, "array %lld: %zu tasks (%lld..%lld)\n",
                    (long long)json_integer_value(json_array_get(ids, 0)),
                    json_array_size(ids),
                    (long long)json_integer_value(json_array_get(ids, 0)),
                    (long long)json_integer_value(
                        json_array_get(ids, json_array_size(ids) - 1)));
    }
    else if (lines && json_array_size(ids) == json_array_size(specs)) {
        /* in the file's order, not the order they were sent in */
        size_t n = json_array_size(ids);
        struct byline *bl = malloc(n * sizeof(*bl));
        for (size_t i = 0; bl && i < n; i++)
            bl[i] = (struct byline){ lines[i],
                                     json_integer_value(json_array_get(ids,
                                                                       i)) };
        if (bl)
            qsort(bl, n, sizeof(*bl), cmp_line);
        for (size_t i = 0; i < n; i++)
            printf("%lld\n", bl ? (long long)bl[i].id
                                : (long long)json_integer_value(
                                      json_array_get(ids, i)));
        free(bl);
    }
    else {
        size_t i;
        json_t *id;
        json_array_foreach(ids, i, id)
            printf("%lld\n", (long long)json_integer_value(id));
    }
    rc = PL_EXIT_OK;
done:
    json_decref(spec);
    json_decref(specs);
    json_decref(ids);
    json_decref(o.env);
    json_decref(o.after);
    json_decref(o.array);
    json_decref(o.tags);
    free(lines);
    return rc;
}
