/* client/cmd_result.c - pilot result: a Python call's pickled result */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/cli.h"
#include "client/conn.h"
#include "client/output.h"
#include "proto/strv.h"

static const char help[] =
    "usage: pilot result [--raw] ID\n"
    "\n"
    "Write the result of Python call ID (pilot submit --py-call or\n"
    "--input) to stdout: the bytes its worker pickled with cloudpickle,\n"
    "the function's value, or, when it raised, (exception, traceback\n"
    "text).  Not to a terminal unless --raw: there its repr is printed\n"
    "instead (as pilot show does).\n"
    "\n"
    "exit status: 0 the call returned, 1 it raised (the pair is written)\n"
    "or has no result (not ended, failed without one: the reason is\n"
    "printed), 2 usage error.\n"
    "\n"
    "options:\n"
    "  --raw        write the pickle even to a terminal\n"
    "  --pilot ID   the pilot to ask\n"
    "  -h, --help   this help\n"
    "\n"
    "example:\n"
    "  pilot result 12 | python3 -c 'import pickle, sys; "
    "print(pickle.load(sys.stdin.buffer))'\n";

static int write_all(int fd, const unsigned char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Copy the result file 'path' to stdout: it must lie under the pilot's
 * tasks/ (a link or another place is refused) and be 'size' bytes.
 * 0, or PL_EXIT_ERROR after saying why. */
static int copy_file(const char *dir, const char *path, long long size)
{
    char real[PATH_MAX], tasks[PATH_MAX + 16], rtasks[PATH_MAX];
    unsigned char buf[65536];
    struct stat st;
    long long total = 0;
    int bad = 0;
    ssize_t n;
    int fd;

    snprintf(tasks, sizeof(tasks), "%s/tasks", dir);
    if (!realpath(tasks, rtasks))
        return pl_cli_error("%s: %s", tasks, strerror(errno));
    if (!realpath(path, real))
        return pl_cli_error("result file %s: %s", path, strerror(errno));
    if (strncmp(real, rtasks, strlen(rtasks)) || real[strlen(rtasks)] != '/')
        return pl_cli_error("result file %s: not under the pilot's tasks/",
                            path);
    /* O_NONBLOCK: a fifo put there must not hang us (a file ignores it) */
    if ((fd = open(real, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK))
        < 0)
        return pl_cli_error("result file %s: %s", path, strerror(errno));
    /* checked before a byte is written: a cut or changed file must not
     * land half in the caller's output */
    if (fstat(fd, &st) < 0)
        bad = pl_cli_error("result file %s: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        bad = pl_cli_error("result file %s: not a regular file", path);
    else if (st.st_size != size)
        bad = pl_cli_error("result file %s: %lld bytes, not the %lld "
                           "recorded", path, (long long)st.st_size, size);
    if (bad) {
        close(fd);
        return bad;
    }
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
        if (write_all(STDOUT_FILENO, buf, (size_t)n) < 0) {
            close(fd);
            return pl_cli_error("stdout: %s", strerror(errno));
        }
        total += n;
    }
    close(fd);
    if (n < 0)
        return pl_cli_error("result file %s: %s", path, strerror(errno));
    if (total != size)
        return pl_cli_error("result file %s: %lld bytes, not the %lld "
                            "recorded", path, total, size);
    return 0;
}

int pl_cmd_result(struct pl_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {
        { "raw", no_argument, NULL, PL_OPT_CMD },
        PL_CLI_COMMON_OPTS,
        { 0 },
    };
    struct pl_error err;
    struct pl_conn *conn = NULL;
    struct pl_sel_req sel = { 0 };
    json_t *t = NULL;
    bool raw = false;
    int c, rc;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
        if (c == PL_OPT_CMD) {
            raw = true;
            continue;
        }
        if (pl_cli_opt(cli, c, argv, help, &rc) < 0)
            return rc;
    }
    if (optind + 1 != argc)
        return pl_cli_usage(cli, "give one task id");
    if (!(conn = pl_conn_open_sel(cli, PL_CONN_READ, 1, argv + optind, &sel,
                                  &rc)))
        goto done;
    rc = PL_EXIT_ERROR;
    if (!(t = pl_conn_show(conn, &sel, &err))) {
        pl_cli_error("%s", err.text);
        goto done;
    }
    const char *st = pl_out_jstr(t, "result_status");
    const char *state = pl_out_jstr(t, "state");
    const char *b64 = pl_out_jstr(t, "result");
    const char *file = pl_out_jstr(t, "result_file");
    long long id = pl_out_jint(t, "id", 0);
    if (!st) {
        const char *why = pl_out_jstr(t, "reason");
        pl_cli_error("task %lld has no result (%s%s%s)", id,
                     state ? state : "?", why ? ": " : "", why ? why : "");
        goto done;
    }
    if (!raw && isatty(STDOUT_FILENO)) {
        printf("%s\n", !strcmp(st, "ok") ? pl_out_jstr(t, "result_repr")
                                          : pl_out_jstr(t, "reason"));
        fprintf(stderr, "pilot result: the pickle goes to a pipe or a file "
                "(or --raw)\n");
    }
    else if (b64) {
        unsigned char *bytes;
        size_t n;
        if (pl_b64_decode(b64, &bytes, &n) < 0) {
            pl_cli_error("task %lld: its result is not base64", id);
            goto done;
        }
        int w = write_all(STDOUT_FILENO, bytes, n);
        free(bytes);
        if (w < 0) {
            pl_cli_error("stdout: %s", strerror(errno));
            goto done;
        }
    }
    else if (!file
             || copy_file(conn->pilot.dir, file,
                          pl_out_jint(t, "result_size", -1)) != 0) {
        if (!file)
            pl_cli_error("task %lld: its result has neither bytes nor a "
                         "file", id);
        goto done;
    }
    rc = !strcmp(st, "ok") ? PL_EXIT_OK : PL_EXIT_ERROR;
done:
    json_decref(t);
    pl_conn_free(conn);
    pl_sel_req_clear(&sel);
    return rc;
}
