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
#include "proto/msg.h"

static const char help[] =
    "usage: pilot submit [options] [--] COMMAND [ARGS...]\n"
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
    "  --pilot ID              the pilot to submit to\n"
    "  --json                  print {\"ids\": [ID]}\n"
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
    "  pilot submit --exclusive --nodes 1 -- ./needs-whole-node\n";

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
};

/* The limits of docs/protocol.md "task spec". */
#define MAX_CORES 4096
#define MAX_GPUS 64
#define MAX_RETRIES 100
#define MAX_ENV 4096
#define MAX_RANKS 65536
#define MAX_NODES 65536
#define MAX_RPN 4096

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
};

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
        switch (c) {
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
    return spec;
nomem:
    errno = ENOMEM;
    pl_errprintf(errp, "out of memory");
    return NULL;
}

int pl_cmd_submit(struct pl_cli *cli, int argc, char **argv)
{
    struct submit_opts o = { .cores = 1, .ranks = 1 };
    struct pl_error err;
    struct pl_conn *conn = NULL;
    json_t *spec = NULL, *body = NULL, *reply = NULL, *ids;
    int rc;

    if (!(o.env = json_array()))
        return pl_cli_error("out of memory");
    if ((rc = parse_opts(cli, argc, argv, &o)) >= 0)
        goto done;
    rc = PL_EXIT_ERROR;
    if (!(spec = make_spec(&o, argc - optind, argv + optind, &err))) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    if (!(body = json_pack("{s:[O]}", "tasks", spec))) {
        pl_cli_error("out of memory");
        goto done;
    }
    if (!(conn = pl_conn_open(cli, PL_CONN_WRITE, &err))
        || !(reply = pl_conn_request(conn, PL_MSG_SUBMIT, body, &err))) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    ids = json_object_get(reply, "ids");
    if (!json_is_array(ids) || json_array_size(ids) != 1
        || !json_is_integer(json_array_get(ids, 0))) {
        pl_cli_error("pilotd answered submit without a task id");
        goto done;
    }
    if (cli->json)
        pl_out_json(reply);
    else
        printf("%lld\n", (long long)json_integer_value(json_array_get(ids, 0)));
    rc = PL_EXIT_OK;
done:
    json_decref(reply);
    json_decref(body);
    json_decref(spec);
    json_decref(o.env);
    pl_conn_free(conn);
    return rc;
}
