/* client/cmd_logs.c - pilot logs: a task's captured output */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/cli.h"
#include "client/conn.h"
#include "client/output.h"
#include "proto/pilotdir.h"
#include "proto/state.h"

static const char help[] =
    "usage: pilot logs [--stderr] [-f] [--attempt N] ID\n"
    "\n"
    "Print what task ID wrote to its stdout (or stderr), from the file in\n"
    "the pilot directory that holds it (see 'pilot show ID').  A task run\n"
    "again (its node was lost) keeps each attempt's output: the last one\n"
    "is printed, --attempt N chooses.\n"
    "\n"
    "options:\n"
    "  --stderr       the task's stderr instead\n"
    "  -f, --follow   keep printing what it writes until it ends (and go\n"
    "                 on with the next attempt's if it is run again)\n"
    "  --attempt N    attempt N's output (1 is the first)\n"
    "  --pilot ID     the pilot the task belongs to\n"
    "  -h, --help     this help\n"
    "\n"
    "example:\n"
    "  pilot logs -f 17\n";

enum {
    OPT_STDERR = PL_OPT_CMD,
    OPT_ATTEMPT,
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

/* The task's state, or -1 with errp set; *ran: it has started once;
 * *attempts: how many attempts have started (0: none). */
static int task_state(struct pl_conn *conn, uint64_t id, bool *ran,
                      unsigned *attempts, struct pl_error *errp)
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
    json_decref(t);
    if (st < 0) {
        errno = ENOENT;
        return pl_errprintf(errp, "no task %llu", (unsigned long long)id);
    }
    return st;
}

/* Copy what 'fd' has from '*off' on to stdout.  A file that shrank (the
 * task ran again) is read from its start.  0 or -1 (errno). */
static int drain(int fd, off_t *off)
{
    char buf[65536];
    struct stat st;
    ssize_t n;

    if (fstat(fd, &st) == 0 && st.st_size < *off) {
        *off = 0;
        if (lseek(fd, 0, SEEK_SET) < 0)
            return -1;
    }
    while ((n = read(fd, buf, sizeof(buf))) != 0) {
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        if (fwrite(buf, 1, (size_t)n, stdout) != (size_t)n)
            return -1;
        *off += n;
    }
    return fflush(stdout) == EOF ? -1 : 0;
}

/* The output file of attempt 'att' of task 'id' into 'path'.  0, or -1
 * after printing the error. */
static int log_path(struct pl_conn *conn, uint64_t id, unsigned att,
                    bool use_err, char *path, size_t len)
{
    if (pl_path_task_log(conn->pilot.dir, id, att, use_err, false, path, len)
        < 0) {
        pl_cli_error("task %llu: log path too long", (unsigned long long)id);
        return -1;
    }
    return 0;
}

/* Print the output file of attempt 'want' of task 'id' (0: the last one,
 * 'att' of them so far) and, with 'follow', what is added to it until
 * the task has ended, going on with the next attempt's file when the
 * task is run again.  Returns an exit code. */
static int print_log(struct pl_conn *conn, uint64_t id, int st, bool ran,
                     unsigned att, unsigned want, bool use_err, bool follow)
{
    unsigned long long uid = (unsigned long long)id;
    unsigned cur = want ? want : att ? att : 1;
    char path[PL_PATH_MAX + 64];
    struct pl_error err;
    off_t off = 0;
    int fd = -1, rc = PL_EXIT_ERROR;
    bool said = false;

    if (log_path(conn, id, cur, use_err, path, sizeof(path)) < 0)
        return PL_EXIT_ERROR;
    for (;;) {
        /* N.B. O_NOFOLLOW: what the agent writes is never a link
         * (pl_output_open()); one that is there is not its output */
        if (fd < 0
            && (fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0
            && errno != ENOENT) {
            pl_cli_error("cannot read %s: %s", path,
                         errno == ELOOP ? "a symbolic link, not followed"
                                        : strerror(errno));
            goto done;
        }
        if (fd >= 0 && drain(fd, &off) < 0) {
            pl_cli_error("cannot copy %s: %s", path, strerror(errno));
            goto done;
        }
        if (fd < 0 && !said) {
            if (pl_state_final(st) && !ran)
                pl_cli_note("task %llu never started (it is %s)", uid,
                            pl_state_name(st));
            else if (!ran && follow && conn->rpc)
                pl_cli_note("task %llu has not started yet: waiting", uid);
            else if (!ran)
                pl_cli_note("task %llu has not started", uid);
            else if (!follow || pl_state_final(st))
                pl_cli_note("task %llu has no output file %s", uid, path);
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
        if ((st = task_state(conn, id, &ran, &att, &err)) < 0) {
            if (pl_conn_recheck(conn) && conn->db
                && (st = task_state(conn, id, &ran, &att, &err)) >= 0)
                continue;
            pl_cli_error("%s", err.text);
            goto done;
        }
        if (!want && att > cur) {
            /* run again: the rest of this attempt's file, then the next */
            if (fd >= 0 && drain(fd, &off) < 0) {
                pl_cli_error("cannot copy %s: %s", path, strerror(errno));
                goto done;
            }
            if (fd >= 0)
                close(fd);
            fd = -1;
            off = 0;
            said = false;
            cur = att;
            pl_cli_note("task %llu runs again (attempt %u): its output "
                        "follows", uid, cur);
            if (log_path(conn, id, cur, use_err, path, sizeof(path)) < 0)
                goto done;
        }
    }
    rc = PL_EXIT_OK;
done:
    if (fd >= 0)
        close(fd);
    return rc;
}

int pl_cmd_logs(struct pl_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        { "stderr", no_argument, NULL, OPT_STDERR },
        { "follow", no_argument, NULL, 'f' },
        { "attempt", required_argument, NULL, OPT_ATTEMPT },
        PL_CLI_COMMON_OPTS,
        { 0 },
    };
    struct pl_error err;
    struct pl_conn *conn = NULL;
    bool use_err = false, follow = false;
    struct pl_sel_req sel = { 0 };
    uint64_t id, want = 0;
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
        }
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
        || (st = task_state(conn, id, &ran, &att, &err)) < 0) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    if (want > (att ? att : 1)) {
        pl_cli_error("task %llu has had %u attempt%s; there is no attempt "
                     "%llu", (unsigned long long)id, att, att == 1 ? "" : "s",
                     (unsigned long long)want);
        goto done;
    }
    rc = print_log(conn, id, st, ran, att, (unsigned)want, use_err, follow);
done:
    pl_conn_free(conn);
    pl_sel_req_clear(&sel);
    return rc;
}
