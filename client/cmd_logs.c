/* client/cmd_logs.c - pilot logs: a task's captured output */
#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/cli.h"
#include "client/conn.h"
#include "client/logsrc.h"
#include "client/output.h"
#include "proto/pilotdir.h"
#include "proto/state.h"

static const char help[] =
    "usage: pilot logs [--stderr] [-f] [--attempt N] [--rank R] [--label] ID\n"
    "       pilot logs --array ID --grep RE [--stderr]\n"
    "\n"
    "Print what task ID wrote to its stdout (or stderr), from the files in\n"
    "the pilot directory that hold it (see 'pilot show ID') or from the\n"
    "nodes' journals (--output journal).  The ranks of a task of several\n"
    "write apart; their output is merged by whole lines, never mixed\n"
    "inside one (rank 0's, then rank 1's, ...; as they come with -f, and\n"
    "in the order written on each node from a journal).  A task run again\n"
    "(its node was lost) keeps each attempt's output: the last one is\n"
    "printed, --attempt N chooses.\n"
    "\n"
    "options:\n"
    "  --stderr       the task's stderr instead\n"
    "  --rank R       rank R's output alone, as it wrote it\n"
    "  --label        each line after its rank, \"R: \" (as srun --label)\n"
    "  --array ID --grep RE\n"
    "                 the lines of every element of array ID that match\n"
    "                 the extended regular expression RE, as \"ID.N: line\"\n"
    "                 (exit 1 if none does)\n"
    "  -f, --follow   keep printing what it writes until it ends (and go\n"
    "                 on with the next attempt's if it is run again)\n"
    "  --attempt N    attempt N's output (1 is the first)\n"
    "  --pilot ID     the pilot the task belongs to\n"
    "  -h, --help     this help\n"
    "\n"
    "example:\n"
    "  pilot logs -f 17\n"
    "  pilot logs --label 18\n"
    "  pilot logs --array 40 --grep 'loss [0-9]+'\n";

enum {
    OPT_STDERR = PL_OPT_CMD,
    OPT_ATTEMPT,
    OPT_RANK,
    OPT_LABEL,
    OPT_ARRAY,
    OPT_GREP,
};

/* What a task's show says of its output: its ranks, and whether each
 * has its own files (pl_path_rank_log()). */
struct shape {
    unsigned ranks;
    bool per_rank;
};

/* The id of the one task 'sel' names (ID.N: asked of pilotd), or 0
 * with errp set. */
static uint64_t sel_id(struct pl_conn *conn, const struct pl_sel_req *sel,
                       struct pl_error *errp)
{
    json_t *t;
    uint64_t id;

    if (sel->nids)
        return sel->ids[0];
    if (!(t = pl_conn_show(conn, sel, errp)))
        return 0;
    id = (uint64_t)pl_out_jint(t, "id", 0);
    json_decref(t);
    if (!id)
        pl_errprintf(errp, "pilotd answered show without the task's id");
    return id;
}

/* Why attempt 'want' of task 't' (pilotd's show) never started: the
 * detail (else the state) of the last event of that attempt when none
 * of its events is a rank or the task running, written to 'why'; ""
 * when it started or cannot be told.  An agent may hold a task
 * (--prefetch) and give it back unstarted: that attempt has no output,
 * and saying "no output file" would suggest one was lost. */
static void attempt_fate(const json_t *t, unsigned want, char *why,
                         size_t len)
{
    const json_t *e;
    const char *last = NULL;
    size_t i;

    json_array_foreach(json_object_get(t, "events"), i, e) {
        if (pl_out_jint(e, "attempt", 0) != (long long)want)
            continue;
        const char *st = pl_out_jstr(e, "state");
        if (!st || !strcmp(st, "running")) {
            last = NULL;
            break;
        }
        const char *d = pl_out_jstr(e, "detail");
        last = d ? d : st;
    }
    if (last)
        snprintf(why, len, "%s", last);
}

/* The task's state, or -1 with errp set; *ran: it has started once;
 * *attempts: how many attempts have started (0: none).  With 'never'
 * (of 'len' bytes): why attempt 'want', one before the last, never
 * started, or "" (attempt_fate()). */
static int task_state(struct pl_conn *conn, uint64_t id, bool *ran,
                      unsigned *attempts, struct shape *sh, unsigned want,
                      char *never, size_t len, struct pl_error *errp)
{
    struct pl_sel_req one = { .ids = &id, .nids = 1 };
    /* show, not list: list would take an array's id for all its tasks */
    json_t *t = pl_conn_show(conn, &one, errp);
    const char *s;
    int st;

    if (!t)
        return -1;
    s = pl_out_jstr(t, "state");
    st = s ? pl_state_parse(s) : -1;
    *ran = json_is_number(json_object_get(t, "start_time"));
    long long a = pl_out_jint(t, "attempts", 0);
    *attempts = a > 0 && a < UINT32_MAX ? (unsigned)a : 0;
    if (len)
        never[0] = '\0';
    if (len && want && want < *attempts)
        attempt_fate(t, want, never, len);
    long long n = pl_out_jint(t, "ranks", 1);
    const char *comm = pl_out_jstr(t, "comm");
    sh->ranks = n > 0 && n < UINT32_MAX ? (unsigned)n : 1;
    sh->per_rank = pl_output_per_rank(sh->ranks, comm,
                                      pl_out_jstr(t, "fn"),
                                      pl_out_jstr(t, "pool") != NULL);
    json_decref(t);
    if (st < 0) {
        errno = ENOENT;
        return pl_errprintf(errp, "no task %llu", (unsigned long long)id);
    }
    return st;
}

/* pl_logsrc's sink: stdout */
static int to_stdout(const void *p, size_t n, void *arg)
{
    (void)arg;
    return fwrite(p, 1, n, stdout) == n ? 0 : -1;
}

/* Drain 'src' to stdout; -1 after printing an error. */
static int drain(struct pl_logsrc *src, bool final)
{
    struct pl_error err;
    int got = pl_logsrc_drain(src, final, &err);

    if (got < 0)
        pl_cli_error("%s", err.text);
    else if (fflush(stdout) == EOF) {
        pl_cli_error("cannot write: %s", strerror(errno));
        got = -1;
    }
    return got;
}

/* Print the output of attempt 'want' of task 'id' (0: the last one,
 * 'att' of them so far) and, with 'follow', what is added to it until
 * the task has ended, going on with the next attempt's when the task is
 * run again.  'never': why attempt 'want' never started, or "" or NULL
 * (attempt_fate()).  Returns an exit code. */
static int print_log(struct pl_conn *conn, uint64_t id, int st, bool ran,
                     unsigned att, unsigned want, const char *never,
                     struct shape sh, const struct pl_logopt *o,
                     bool follow)
{
    unsigned long long uid = (unsigned long long)id;
    unsigned cur = want ? want : att ? att : 1;
    struct pl_logsrc *src;
    struct pl_error err;
    int rc = PL_EXIT_ERROR, got;
    bool said = false;

    if (o->rank >= (long)sh.ranks) {
        pl_cli_error("task %llu has %u rank%s: there is no rank %ld", uid,
                     sh.ranks, sh.ranks == 1 ? "" : "s", o->rank);
        return PL_EXIT_USAGE;
    }
    /* an earlier attempt has ended: -f has nothing to wait for */
    if (want && want < att)
        follow = false;
    if (!(src = pl_logsrc_new(conn->pilot.dir, id, cur, sh.ranks,
                              sh.per_rank, o, to_stdout, NULL))) {
        pl_cli_error("task %llu: %s", uid, strerror(errno));
        return PL_EXIT_ERROR;
    }
    for (;;) {
        bool last = !follow || pl_state_final(st) || !conn->rpc;
        if ((got = drain(src, last)) < 0)
            goto done;
        if (!got && !said) {
            const char *path = pl_logsrc_path(src);
            if (never && *never)
                pl_cli_note("task %llu: attempt %u never started (%s)", uid,
                            cur, never);
            else if (pl_state_final(st) && !ran)
                pl_cli_note("task %llu never started (it is %s)", uid,
                            pl_state_name(st));
            else if (!ran && follow && conn->rpc)
                pl_cli_note("task %llu has not started yet: waiting", uid);
            else if (!ran)
                pl_cli_note("task %llu has not started", uid);
            else if (!follow || pl_state_final(st))
                pl_cli_note("task %llu has no output file %s (nor any "
                            "output in a journal)", uid, path);
            said = !ran || !follow || pl_state_final(st);
        }
        if (!follow || pl_state_final(st))
            break;
        if (!conn->rpc) {
            pl_cli_note("pilot %s is not running: task %llu will write no "
                        "more", conn->pilot.id, uid);
            break;
        }
        pl_cli_sleep(PL_CLI_POLL);
        /* the state first: once it is final, one more drain has it all */
        if ((st = task_state(conn, id, &ran, &att, &sh, 0, NULL, 0,
                             &err)) < 0) {
            if (pl_conn_recheck(conn) && conn->db
                && (st = task_state(conn, id, &ran, &att, &sh, 0, NULL, 0,
                                    &err)) >= 0)
                continue;
            pl_cli_error("%s", err.text);
            goto done;
        }
        if (!want && att > cur) {
            /* run again: the rest of this attempt's output, then the
             * next's */
            if (drain(src, true) < 0)
                goto done;
            pl_logsrc_free(src);
            said = false;
            cur = att;
            pl_cli_note("task %llu runs again (attempt %u): its output "
                        "follows", uid, cur);
            if (!(src = pl_logsrc_new(conn->pilot.dir, id, cur, sh.ranks,
                                      sh.per_rank, o, to_stdout, NULL))) {
                pl_cli_error("task %llu: %s", uid, strerror(errno));
                goto done;
            }
        }
    }
    rc = PL_EXIT_OK;
done:
    pl_logsrc_free(src);
    return rc;
}

/* pilot logs --array ID --grep RE: every element's matching lines. */
static int grep_array(struct pl_cli *cli, struct pl_conn *conn,
                      uint64_t array, const char *re, bool use_err)
{
    struct pl_sel_req sel = { .ids = &array, .nids = 1 };
    struct pl_error err;
    json_t *tasks, *t;
    regex_t rx;
    size_t i, n = 0;
    int rc = PL_EXIT_ERROR, e;
    char msg[256];

    if ((e = regcomp(&rx, re, REG_EXTENDED | REG_NOSUB)) != 0) {
        regerror(e, &rx, msg, sizeof(msg));
        return pl_cli_usage(cli, "--grep '%s': %s", re, msg);
    }
    if (!(tasks = pl_conn_list(conn, NULL, NULL, &sel, 0, &err))) {
        pl_cli_error("%s", err.text);
        regfree(&rx);
        return PL_EXIT_ERROR;
    }
    struct pl_logelem *el = calloc(json_array_size(tasks) + 1, sizeof(*el));
    if (!el) {
        pl_cli_error("out of memory");
        goto done;
    }
    json_array_foreach(tasks, i, t) {
        if (!json_is_integer(json_object_get(t, "array_index")))
            continue; /* a task, not an element */
        long long of = pl_out_jint(t, "array_id", 0);
        if (of > 0 && (uint64_t)of != array) {
            /* an element's own id: its lines would be labelled as
             * another array's */
            pl_cli_error("%llu is element %lld of array %lld, not an array: "
                         "try --array %lld", (unsigned long long)array,
                         pl_out_jint(t, "array_index", 0), of, of);
            goto done;
        }
        long long a = pl_out_jint(t, "attempts", 0);
        long long r = pl_out_jint(t, "ranks", 1);
        const char *comm = pl_out_jstr(t, "comm");
        el[n] = (struct pl_logelem){
            .id = (uint64_t)pl_out_jint(t, "id", 0),
            .attempt = a > 0 && a < UINT32_MAX ? (unsigned)a : 0,
            .ranks = r > 0 && r < UINT32_MAX ? (unsigned)r : 1,
            .index = (uint64_t)pl_out_jint(t, "array_index", 0),
        };
        el[n].per_rank = pl_output_per_rank(el[n].ranks, comm,
                                            pl_out_jstr(t, "fn"),
                                            pl_out_jstr(t, "pool") != NULL);
        n++;
    }
    if (n == 0) {
        pl_cli_error("%llu is not an array (no elements)",
                     (unsigned long long)array);
        goto done;
    }
    long hits = pl_logsrc_grep(conn->pilot.dir, array, el, n, &rx, use_err,
                               &err);
    if (hits < 0) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    /* as grep(1): 1 when no line matched */
    rc = hits > 0 ? PL_EXIT_OK : PL_EXIT_ERROR;
done:
    free(el);
    json_decref(tasks);
    regfree(&rx);
    return rc;
}

int pl_cmd_logs(struct pl_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        { "stderr", no_argument, NULL, OPT_STDERR },
        { "follow", no_argument, NULL, 'f' },
        { "attempt", required_argument, NULL, OPT_ATTEMPT },
        { "rank", required_argument, NULL, OPT_RANK },
        { "label", no_argument, NULL, OPT_LABEL },
        { "array", required_argument, NULL, OPT_ARRAY },
        { "grep", required_argument, NULL, OPT_GREP },
        PL_CLI_COMMON_OPTS,
        { 0 },
    };
    struct pl_error err;
    struct pl_conn *conn = NULL;
    bool use_err = false, follow = false;
    struct pl_sel_req sel = { 0 };
    struct pl_logopt lo = { .rank = -1 };
    struct shape sh;
    uint64_t id, want = 0, rank, array = 0;
    char never[256] = ""; /* why attempt 'want' never started */
    const char *re = NULL;
    unsigned att;
    bool ran;
    int c, r, st, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hf", opts, NULL)) != -1) {
        if ((r = pl_cli_opt(cli, c, argv, help, &rc)) < 0)
            return rc;
        if (r > 0)
            continue;
        switch (c) {
        case OPT_STDERR:
            use_err = true;
            break;
        case 'f':
            follow = true;
            break;
        case OPT_ATTEMPT:
            if (pl_parse_uint("--attempt", optarg, 1, UINT32_MAX,
                              &want, &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            break;
        case OPT_RANK:
            if (pl_parse_uint("--rank", optarg, 0, UINT32_MAX - 1, &rank,
                              &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            lo.rank = (long)rank;
            break;
        case OPT_LABEL:
            lo.label = true;
            break;
        case OPT_ARRAY:
            if (pl_parse_uint("--array", optarg, 1, UINT64_MAX, &array,
                              &err) < 0)
                return pl_cli_usage(cli, "%s", err.text);
            break;
        case OPT_GREP:
            re = optarg;
            break;
        }
    }
    lo.use_err = use_err;
    if (!array != !re)
        return pl_cli_usage(cli, "--array and --grep go together");
    if (array) {
        if (optind < argc || follow || want || lo.rank >= 0 || lo.label)
            return pl_cli_usage(cli, "--array ID --grep RE takes no task "
                                "id, -f, --attempt, --rank or --label");
        if (!(conn = pl_conn_open(&cli->find, PL_CONN_READ, &err)))
            return pl_cli_error("%s", err.text);
        rc = grep_array(cli, conn, array, re, use_err);
        pl_conn_free(conn);
        return rc;
    }
    if (optind >= argc)
        return pl_cli_usage(cli, "no task id given");
    if (optind + 1 < argc)
        return pl_cli_usage(cli, "one task id at a time");
    if (!(conn = pl_conn_open_sel(cli, PL_CONN_READ, 1, argv + optind, &sel,
                                  &rc)))
        goto done;
    rc = PL_EXIT_ERROR;
    if ((id = sel_id(conn, &sel, &err)) == 0
        || (st = task_state(conn, id, &ran, &att, &sh, (unsigned)want,
                            never, sizeof(never), &err)) < 0) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    if (want > (att ? att : 1)) {
        pl_cli_error("task %llu has had %u attempt%s; there is no attempt "
                     "%llu", (unsigned long long)id, att, att == 1 ? "" : "s",
                     (unsigned long long)want);
        goto done;
    }
    rc = print_log(conn, id, st, ran, att, (unsigned)want, never, sh, &lo,
                   follow);
done:
    pl_conn_free(conn);
    pl_sel_req_clear(&sel);
    return rc;
}
