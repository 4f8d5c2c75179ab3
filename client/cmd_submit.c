/* client/cmd_submit.c - pilot submit: tasks into the pilot's queue */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/cli.h"
#include "client/conn.h"
#include "client/output.h"
#include "client/spec.h"
#include "client/spec_py.h"
#include "client/submit.h"
#include "client/taskfile.h"
#include "proto/strv.h"

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
    "  --output-limit SIZE     stop the task (failed, reason output-limit)\n"
    "                          once its stdout or stderr is over SIZE\n"
    "                          (500M, 10G; default 10G)\n"
    "  --output MODE           files (a pair per rank, the default) or\n"
    "                          journal: into its node's journal, no file\n"
    "                          of its own (docs/output.md)\n"
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
    "                          prints the array's id (its first\n"
    "                          task's).  Over 5,000 tasks go in slices\n"
    "                          of 5,000: a submit cut short leaves the\n"
    "                          slices sent (pilot ls ID lists them)\n"
    "  --retry-failed ID       with the command (and --array A-B:S, to\n"
    "                          narrow it): a new array of only the indexes\n"
    "                          whose tasks failed or timed out in array ID\n"
    "                          (which must have ended)\n"
    "  --priority N            higher starts first (-1000000..1000000,\n"
    "                          default 0); FIFO within a priority\n"
    "  --vetted[=MINUTES]      start only on nodes whose vetting passed\n"
    "                          within MINUTES (default 60; 'pilot vet')\n"
    "  --tag KEY=VALUE         a label for 'pilot ls --tag' (repeatable)\n"
    "  --pool NAME             run a function in the workers of pool NAME\n"
    "                          (pilot pool start); the arguments after the\n"
    "                          options are the function's:\n"
    "  --fn LIB.so:SYMBOL      a C function, int SYMBOL(const struct\n"
    "                          pilot_fn_ctx *ctx, int argc, char **argv)\n"
    "                          (pilot_fn.h), on ctx->comm, an MPI\n"
    "                          communicator of the task's ranks\n"
    "  --py MODULE:FUNCTION    a Python function FUNCTION(ctx, *args), with\n"
    "                          ctx.comm an mpi4py communicator\n"
    "  --py-call MODULE:FUNCTION\n"
    "                          a Python call in a warm worker of the agent\n"
    "                          (no pool): FUNCTION(*ARGS), the arguments\n"
    "                          strings; 'pilot show' gives the result's\n"
    "                          repr, 'pilot result' the pickled value\n"
    "  --input FILE            a Python call pickled by a client: FILE\n"
    "                          (- reads stdin) holds a cloudpickle of\n"
    "                          (function, args, kwargs); the command words,\n"
    "                          if any, are a label; up to 256 MiB (over\n"
    "                          256 KiB it is copied under the pilot's\n"
    "                          inputs/)\n"
    "  --py-prelude CODE       run CODE once when a worker starts (\"import\n"
    "                          torch\"); default: pilot up --py-prelude\n"
    "  --python PATH           the worker's interpreter (default: pilot up\n"
    "                          --python, else python3 from the task's PATH)\n"
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
    "  --parsable              for scripts: print only the id (an array's\n"
    "                          id with --array; with --file the ids, one a\n"
    "                          line) and nothing else, on a terminal too\n"
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
    "  # a Python call in a warm worker: its result's repr in pilot show\n"
    "  pilot submit --py-call mymod:score -- data.csv 0.5\n"
    "  # for a script or a workflow manager: the id alone on stdout\n"
    "  id=$(pilot submit --parsable --name align -- ./job.sh)\n"
    "  # a file: {\"name\": \"a\", \"cmd\": \"./prep\"}\n"
    "  #         {\"argv\": [\"./train\"], \"after\": [\"a\"]}\n"
    "  pilot submit --file tasks.jsonl\n";

enum {
    OPT_SPEC = PL_OPT_CMD, /* an option that describes the task */
    OPT_FILE,
    OPT_PY,                /* a Python call's (client/spec_py.h) */
    OPT_INPUT,
    OPT_PARSABLE,
};

/* Parse the options: the task's into 'b', --file into *file.  Returns
 * -1 to go on, else the exit code (help printed, or a usage error). */
static int parse_opts(struct pl_cli *cli, int argc, char **argv,
                      struct pl_cli_spec *b, const char **file,
                      const char **input, bool *parsable)
{
    static const struct option opts[] = {
        { "name", required_argument, NULL, OPT_SPEC },
        { "cores-per-rank", required_argument, NULL, OPT_SPEC },
        { "gpus-per-rank", required_argument, NULL, OPT_SPEC },
        { "ranks", required_argument, NULL, OPT_SPEC },
        { "timeout", required_argument, NULL, OPT_SPEC },
        { "output-limit", required_argument, NULL, OPT_SPEC },
        { "output", required_argument, NULL, OPT_SPEC },
        { "retries", required_argument, NULL, OPT_SPEC },
        { "cwd", required_argument, NULL, OPT_SPEC },
        { "env", required_argument, NULL, OPT_SPEC },
        { "nodes", required_argument, NULL, OPT_SPEC },
        { "ranks-per-node", required_argument, NULL, OPT_SPEC },
        { "exclusive", no_argument, NULL, OPT_SPEC },
        { "comm", required_argument, NULL, OPT_SPEC },
        { "launcher", required_argument, NULL, OPT_SPEC },
        { "after", required_argument, NULL, OPT_SPEC },
        { "array", required_argument, NULL, OPT_SPEC },
        { "retry-failed", required_argument, NULL, OPT_SPEC },
        { "priority", required_argument, NULL, OPT_SPEC },
        { "vetted", optional_argument, NULL, OPT_SPEC },
        { "tag", required_argument, NULL, OPT_SPEC },
        { "pool", required_argument, NULL, OPT_SPEC },
        { "fn", required_argument, NULL, OPT_SPEC },
        { "py", required_argument, NULL, OPT_SPEC },
        { "file", required_argument, NULL, OPT_FILE },
        { "py-call", required_argument, NULL, OPT_PY },
        { "py-prelude", required_argument, NULL, OPT_PY },
        { "python", required_argument, NULL, OPT_PY },
        { "input", required_argument, NULL, OPT_INPUT },
        { "parsable", no_argument, NULL, OPT_PARSABLE },
        PL_CLI_COMMON_OPTS,
        { 0 },
    };
    struct pl_error err;
    bool task_opts = false;
    int c, r, rc, idx;

    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:h", opts, &idx)) != -1) {
        if ((r = pl_cli_opt(cli, c, argv, help, &rc)) < 0)
            return rc;
        if (r > 0)
            continue;
        if (c == OPT_FILE) {
            if (!*optarg)
                return pl_cli_usage(cli, "--file: empty file name");
            *file = optarg;
            continue;
        }
        if (c == OPT_PARSABLE) {
            *parsable = true;
            continue;
        }
        task_opts = true;
        if (c == OPT_INPUT) {
            if (!*optarg)
                return pl_cli_usage(cli, "--input: empty file name");
            *input = optarg;
            continue;
        }
        if (c == OPT_PY ? pl_cli_spec_py(b, opts[idx].name, optarg, &err) < 0
                        : pl_cli_spec_flag(b, opts[idx].name, optarg, &err)
                              < 0)
            return pl_cli_usage(cli, "%s", err.text);
    }
    bool pycall = b->spec.fn == PL_FN_PYCALL || *input;
    if (*input && b->fn_name)
        return pl_cli_usage(cli, "--input holds the function: no --py-call, "
                            "--fn or --py with it");
    if (pycall && !*input && !b->fn_name)
        return pl_cli_usage(cli, "--py-prelude and --python go with "
                            "--py-call MODULE:FUNCTION or --input FILE");
    if (pycall && b->spec.pool)
        return pl_cli_usage(cli, "a Python call (--py-call, --input) runs "
                            "in a warm worker of its agent, not in a pool");
    if (b->spec.launcher != PL_LAUNCHER_UNSET && b->spec.comm != PL_COMM_MPI)
        return pl_cli_usage(cli, "--launcher goes with --comm mpi");
    if (*parsable && cli->json)
        return pl_cli_usage(cli, "--parsable and --json: choose one");
    if (*file) {
        if (task_opts)
            return pl_cli_usage(cli, "--file: the file says what each task "
                                "is; no other task option goes with it");
        if (optind < argc)
            return pl_cli_usage(cli, "--file: no command goes with it ('%s')",
                                argv[optind]);
        return -1;
    }
    if (b->fn_name && !b->spec.pool && !pycall)
        return pl_cli_usage(cli, "--fn and --py run in a pool: give --pool "
                            "NAME (pilot pool ls)");
    if (b->spec.pool && !b->fn_name)
        return pl_cli_usage(cli, "--pool: name the function, --fn "
                            "LIB.so:SYMBOL or --py MODULE:FUNCTION");
    if (optind >= argc && !b->fn_name && !pycall)
        return pl_cli_usage(cli, "no command given (usage: pilot submit "
                            "[options] -- COMMAND [ARGS...])");
    if (optind < argc && !argv[optind][0])
        return pl_cli_usage(cli, "the command is an empty string");
    if (pl_cli_spec_counts(b, &err) < 0)
        return pl_cli_usage(cli, "%s", err.text);
    return -1;
}

/* Read FILE ('-': stdin) into 'tf'.  0, or -1 after printing the
 * error. */
static int read_file(const char *path, struct pl_taskfile *tf)
{
    FILE *fp = strcmp(path, "-") ? fopen(path, "r") : stdin;
    char here[PATH_MAX];
    struct pl_error err;
    size_t line;
    int rc = -1;

    if (!fp) {
        pl_cli_error("--file: cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    if (!getcwd(here, sizeof(here)))
        pl_cli_error("cannot get the current directory: %s", strerror(errno));
    else if (pl_taskfile_read(fp, pl_taskfile_is_yaml(path), here, tf, &line,
                              &err) == 0)
        rc = 0;
    else if (line)
        pl_cli_error("%s: line %zu: %s", path, line, err.text);
    else if (ferror(fp))
        pl_cli_error("--file: cannot read %s: %s", path, err.text);
    else
        pl_cli_error("%s: %s", path, err.text);
    if (fp != stdin)
        fclose(fp);
    return rc;
}

/* A task file's pickled calls over 256 KiB go to new files under the
 * pilot's inputs/, as --input's do (pl_cli_spec_py_stage()).  0, or -1
 * after printing the error. */
static int stage_inputs(struct pl_cli *cli, struct pl_spec *specs,
                        size_t n, const size_t *lines, const char *file)
{
    struct pl_pilot p;
    struct pl_error err;
    bool found = false;

    for (size_t i = 0; i < n; i++) {
        if (!specs[i].input || specs[i].ninput <= PL_SPEC_MAX_INPUT)
            continue;
        if (!found && pl_conn_find(&cli->find, PL_CONN_WRITE, &p, &err) < 0)
            return pl_cli_error("%s", err.text);
        found = true;
        if (pl_cli_spec_py_stage(&specs[i], p.dir, &err) < 0)
            return pl_cli_error("%s: line %zu: %s", file, lines[i],
                                err.text);
    }
    return 0;
}

/* Check each spec as pilotd will (pl_spec_check()), in the order they
 * are sent: a fault is named by its line when 'lines' is given.  0, or
 * -1 after printing the error. */
static int check_specs(struct pl_spec *specs, size_t n, const size_t *lines,
                       const char *file)
{
    struct pl_error err;

    for (size_t i = 0; i < n; i++) {
        if (pl_spec_check(&specs[i], &err) == 0)
            continue;
        if (lines)
            pl_cli_error("%s: line %zu: %s", file, lines[i], err.text);
        else
            pl_cli_error("%s", err.text);
        return -1;
    }
    return 0;
}

/* pilot submit's progress on a terminal, for a submit of many requests */
static void progress_cb(size_t done, uint64_t total, void *arg)
{
    (void)arg;
    fprintf(stderr, "\rsubmitted %zu of %llu tasks", done,
            (unsigned long long)total);
}

/* Send the 'n' specs (pl_submit_specs()); their ids into 'ids'.  An
 * error of spec K of a request names its line when 'lines' is given.
 * Progress goes to a terminal unless 'quiet' (--parsable).
 * 0, or -1 after printing the error, 'ids' then holding those of the
 * requests that were queued before it, and *unsent the first spec that
 * pilotd surely did not store (n: it may have stored them all). */
static int send_specs(struct pl_cli *cli, const struct pl_spec *specs,
                      size_t n, const size_t *lines, const char *file,
                      bool quiet, json_t *ids, size_t *unsent)
{
    struct pl_error err;
    struct pl_submit_fail f;
    struct pl_conn *conn;
    bool tty;
    unsigned k;
    int used = 0, rc, errnum;

    *unsent = 0;
    if (!(conn = pl_conn_open(&cli->find, PL_CONN_WRITE, &err))) {
        pl_cli_error("%s", err.text);
        return -1;
    }
    tty = !quiet && isatty(STDERR_FILENO)
          && pl_submit_tasks(specs, n) > PL_SUBMIT_MAX_TASKS;
    rc = pl_submit_specs(conn, specs, n, NULL, ids,
                         tty ? progress_cb : NULL, NULL, &f, &err);
    errnum = errno;
    pl_conn_free(conn);
    if (rc == 0) {
        if (tty)
            fprintf(stderr, "\n");
        return 0;
    }
    /* pilotd refused the request that failed, and stored none of it (a
     * slice's array keeps the elements sent before); one it did not
     * answer, or answered without ids, it may have stored */
    *unsent = f.bad_reply || errnum == ETIMEDOUT ? n
              : f.off + (f.slice ? 1 : 0);
    if (f.bad_reply) {
        pl_cli_error("%s", err.text);
        return -1;
    }
    /* the requests before this one were queued: their ids go to stdout
     * all the same (pl_cmd_submit), and the error says so */
    size_t had = json_array_size(ids);
    char before[128] = "";
    if (had)
        snprintf(before, sizeof(before), " (the %zu tasks of the requests "
                 "before it were queued: %s on stdout)", had,
                 f.slice && !lines ? "the array's id is" : "their ids are");
    if (lines && sscanf(err.text, "task %u: %n", &k, &used) == 1 && used > 0
        && k >= 1 && k <= f.m)
        pl_cli_error("%s: line %zu: %s%s", file, lines[f.off + k - 1],
                     err.text + used, before);
    else if (lines && f.m == 1)
        pl_cli_error("%s: line %zu: %s%s", file, lines[f.off], err.text,
                     before);
    else
        pl_cli_error("%s%s", err.text, before);
    return -1;
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

/* The ids, one a line, or {"ids": [...]} with --json: in the file's
 * order when 'lines' is given (not the order they were sent in; 'lines'
 * holds at least as many entries as 'ids'). */
static void print_ids(const struct pl_cli *cli, json_t *ids,
                      const size_t *lines)
{
    size_t n = json_array_size(ids);

    if (cli->json) {
        json_t *out = json_pack("{s:O}", "ids", ids);
        pl_out_json(out);
        json_decref(out);
        return;
    }
    struct byline *bl = lines ? malloc(n * sizeof(*bl)) : NULL;

    for (size_t i = 0; bl && i < n; i++)
        bl[i] = (struct byline){ lines[i],
                                 json_integer_value(json_array_get(ids, i)) };
    if (bl)
        qsort(bl, n, sizeof(*bl), cmp_line);
    for (size_t i = 0; i < n; i++)
        printf("%lld\n", bl ? (long long)bl[i].id
                            : (long long)json_integer_value(
                                  json_array_get(ids, i)));
    free(bl);
}

/* The id of an array (its first task's), and its size on a terminal
 * unless 'quiet' (--parsable). */
static void print_array(const struct pl_cli *cli, json_t *ids, bool quiet)
{
    long long first = json_integer_value(json_array_get(ids, 0));
    size_t n = json_array_size(ids);

    if (cli->json) {
        json_t *out = json_pack("{s:O, s:I}", "ids", ids, "array",
                                (json_int_t)first);
        pl_out_json(out);
        json_decref(out);
        return;
    }
    printf("%lld\n", first);
    if (!quiet && isatty(STDERR_FILENO))
        fprintf(stderr, "array %lld: %zu tasks (%lld..%lld)\n", first, n,
                first,
                (long long)json_integer_value(json_array_get(ids, n - 1)));
}

/* --input FILE: the pickled call, inline or under the pilot's inputs/;
 * the command words are a label, FILE's name when there are none. */
static int pickled_input(struct pl_cli *cli, struct pl_cli_spec *b,
                         const char *input, struct pl_error *errp)
{
    struct pl_pilot p;
    const char *slash = strrchr(input, '/');

    if (pl_conn_find(&cli->find, PL_CONN_WRITE, &p, errp) < 0
        || pl_cli_spec_py_input(b, input, p.dir, errp) < 0)
        return -1;
    if (b->spec.argv && b->spec.argv[0])
        return 0;
    pl_strv_free(b->spec.argv);
    if (!(b->spec.argv = calloc(2, sizeof(char *)))
        || !(b->spec.argv[0] = strdup(slash ? slash + 1 : input))) {
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    return 0;
}

int pl_cmd_submit(struct pl_cli *cli, int argc, char **argv)
{
    struct pl_cli_spec b;
    struct pl_taskfile tf = { 0 };
    struct pl_spec *specs = &b.spec;
    struct pl_error err;
    const char *file = NULL, *input = NULL;
    json_t *ids = json_array();
    size_t n = 1, unsent = 0;
    bool parsable = false;
    int rc;

    pl_cli_spec_init(&b);
    if (!ids) {
        rc = pl_cli_error("out of memory");
        goto done;
    }
    if ((rc = parse_opts(cli, argc, argv, &b, &file, &input, &parsable)) >= 0)
        goto done;
    rc = PL_EXIT_ERROR;
    if (file) {
        if (read_file(file, &tf) < 0)
            goto done;
        if (stage_inputs(cli, tf.specs, tf.n, tf.lines, file) < 0) {
            pl_cli_spec_py_unstage(tf.specs, tf.n, 0);
            goto done;
        }
        specs = tf.specs;
        n = tf.n;
    }
    else if (pl_cli_spec_command(&b, argc - optind, argv + optind, &err)
                 < 0
             || (input && pickled_input(cli, &b, input, &err) < 0)) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    if (check_specs(specs, n, tf.lines, file) < 0) {
        pl_cli_spec_py_unstage(specs, n, 0);
        goto done;
    }
    if (send_specs(cli, specs, n, tf.lines, file, parsable, ids, &unsent)
        < 0) {
        pl_cli_spec_py_unstage(specs, n, unsent);
        /* nothing queued is left without its id (issue 12) */
        if (json_array_size(ids) > 0 && (b.spec.array || b.spec.retry))
            print_array(cli, ids, parsable);
        else if (json_array_size(ids) > 0)
            print_ids(cli, ids, tf.lines);
        goto done;
    }
    if (b.spec.array || b.spec.retry)
        print_array(cli, ids, parsable);
    else
        print_ids(cli, ids, json_array_size(ids) == n ? tf.lines : NULL);
    rc = PL_EXIT_OK;
done:
    json_decref(ids);
    pl_taskfile_clear(&tf);
    pl_cli_spec_clear(&b);
    return rc;
}
