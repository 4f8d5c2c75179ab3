/* tests/unit/test_proto_pilotdir.c - the pilot directory: home, ids, files */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto/msg.h"
#include "proto/pilotdir.h"
#include "tests/unit/helpers.h"

static char tmp[64]; /* our mkdtemp() directory */

static int mode_of(const char *path)
{
    struct stat st;

    return stat(path, &st) < 0 ? -1 : (int)(st.st_mode & 07777);
}

static bool is_dir(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static void test_home(void)
{
    char buf[PL_PATH_MAX], want[128], path[128];
    struct pl_error e = { "" };

    snprintf(want, sizeof(want), "%s/a/b/home", tmp);
    setenv("PILOT_HOME", want, 1);
    is(pl_home(buf, sizeof(buf), &e), 0, "pl_home with PILOT_HOME");
    is_str(buf, want, "... is $PILOT_HOME");
    ok(is_dir(want) && mode_of(want) == 0700, "... created, mode 0700 (%o)",
       mode_of(want));
    is(pl_home(buf, sizeof(buf), &e), 0, "pl_home again (exists)");

    e.text[0] = '\0';
    errno = 0;
    ok(pl_home(buf, 8, &e) == -1 && errno == ENAMETOOLONG && e.text[0],
       "pl_home into a short buffer: ENAMETOOLONG");

    /* PILOT_HOME empty: $HOME/.pilot */
    snprintf(path, sizeof(path), "%s/h", tmp);
    mkdir(path, 0700);
    setenv("HOME", path, 1);
    setenv("PILOT_HOME", "", 1);
    snprintf(want, sizeof(want), "%s/h/.pilot", tmp);
    is(pl_home(buf, sizeof(buf), &e), 0, "pl_home with PILOT_HOME empty");
    is_str(buf, want, "... is $HOME/.pilot");
    ok(mode_of(want) == 0700, "... created, mode 0700");

    unsetenv("PILOT_HOME");
    unsetenv("HOME");
    errno = 0;
    ok(pl_home(buf, sizeof(buf), &e) == -1 && errno == ENOENT,
       "pl_home with neither set: ENOENT");

    /* a PILOT_HOME that is a regular file is no home */
    snprintf(path, sizeof(path), "%s/file", tmp);
    FILE *fp = fopen(path, "w");
    fclose(fp);
    setenv("PILOT_HOME", path, 1);
    ok(pl_home(buf, sizeof(buf), &e) == -1,
       "pl_home with PILOT_HOME a regular file fails (mkdir -p would)");
    snprintf(path, sizeof(path), "%s/file/x", tmp);
    errno = 0;
    ok(pl_mkdirs(path, 0700) == -1 && errno == ENOTDIR,
       "pl_mkdirs under a regular file: ENOTDIR");
}

static void test_create_list(const char *home)
{
    char id[PL_ID_MAX], dir[PL_PATH_MAX], path[PL_PATH_MAX + 16];
    struct pl_error e = { "" };
    char **v;

    v = pl_pilotdir_list(home, &e);
    ok(v && v[0] == NULL, "no pilots/ yet: empty list");
    pl_strv_free(v);

    is(pl_pilotdir_create(home, id, sizeof(id), dir, sizeof(dir), &e), 0,
       "pl_pilotdir_create");
    is_str(id, "p1", "... first id p1");
    snprintf(path, sizeof(path), "%s/pilots/p1", home);
    is_str(dir, path, "... dir HOME/pilots/p1");
    ok(is_dir(dir) && mode_of(dir) == 0700, "... mode 0700");
    snprintf(path, sizeof(path), "%s/logs", dir);
    ok(is_dir(path) && mode_of(path) == 0700, "... logs/ 0700");
    snprintf(path, sizeof(path), "%s/tasks", dir);
    ok(is_dir(path) && mode_of(path) == 0700, "... tasks/ 0700");
    is(pl_pilotdir_create(home, id, sizeof(id), dir, sizeof(dir), &e), 0,
       "pl_pilotdir_create again");
    is_str(id, "p2", "... p2");

    /* not pilots: ignored by the list */
    snprintf(path, sizeof(path), "%s/pilots/notapilot", home);
    mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/pilots/p3x", home);
    mkdir(path, 0700);
    v = pl_pilotdir_list(home, &e);
    ok(v && pl_strv_len(v) == 2 && !strcmp(v[0], "p2") && !strcmp(v[1], "p1"),
       "list: p2, p1 (newest first, others ignored)");
    pl_strv_free(v);

    /* past the first allocation and past one digit */
    for (int i = 3; i <= 12; i++)
        pl_pilotdir_create(home, id, sizeof(id), dir, sizeof(dir), &e);
    is_str(id, "p12", "twelfth pilot is p12");
    v = pl_pilotdir_list(home, &e);
    bool order = v && pl_strv_len(v) == 12;
    for (int i = 0; order && i < 12; i++) {
        char want[8];
        snprintf(want, sizeof(want), "p%d", 12 - i);
        order = !strcmp(v[i], want);
    }
    ok(order, "list: p12 ... p1, numeric order (p12 before p9)");
    pl_strv_free(v);

    /* a gap: the next id follows the largest */
    snprintf(path, sizeof(path), "%s/pilots/p40", home);
    mkdir(path, 0700);
    pl_pilotdir_create(home, id, sizeof(id), dir, sizeof(dir), &e);
    is_str(id, "p41", "after a stray p40 comes p41");
}

static void test_path(const char *home)
{
    char dir[PL_PATH_MAX], want[PL_PATH_MAX];
    struct pl_error e = { "" };
    const char *bad[] = { "x", "p", "", "p1/../", "../p1", "p1/", "p1 ",
                          "P1", "p-1", "p1x" };

    is(pl_pilotdir_path(home, "p1", dir, sizeof(dir), &e), 0,
       "pl_pilotdir_path p1");
    snprintf(want, sizeof(want), "%s/pilots/p1", home);
    is_str(dir, want, "... HOME/pilots/p1");

    int refused = 0;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        e.text[0] = '\0';
        if (pl_pilotdir_path(home, bad[i], dir, sizeof(dir), &e) == -1
            && e.text[0])
            refused++;
        else
            diag("'%s' accepted", bad[i]);
    }
    is(refused, (int)(sizeof(bad) / sizeof(bad[0])),
       "pl_pilotdir_path refuses ids that are not pilot ids");
    errno = 0;
    pl_pilotdir_path(home, "x", dir, sizeof(dir), &e);
    is(errno, EINVAL, "... with errno EINVAL, as pilotdir.h says");

    errno = 0;
    ok(pl_pilotdir_path(home, "p999", dir, sizeof(dir), &e) == -1
           && errno == ENOENT,
       "pl_pilotdir_path of an unknown pilot: ENOENT");
    snprintf(want, sizeof(want), "%s/pilots/p77", home);
    FILE *fp = fopen(want, "w");
    fclose(fp);
    errno = 0;
    ok(pl_pilotdir_path(home, "p77", dir, sizeof(dir), &e) == -1
           && errno == ENOENT,
       "pl_pilotdir_path of a regular file: ENOENT");
    unlink(want);
}

/* A stray directory with the largest id a long holds: the next id must
 * still be a valid one (or creation must fail cleanly).  In a child, as
 * UBSan aborts on the signed overflow. */
static void test_id_overflow(void)
{
    char home[128], path[256];
    int fds[2];
    pid_t pid;
    int status;
    char id[PL_ID_MAX] = "";

    snprintf(home, sizeof(home), "%s/ovf", tmp);
    snprintf(path, sizeof(path), "%s/pilots/p9223372036854775807", home);
    pl_mkdirs(path, 0700);
    if (pipe(fds) < 0 || (pid = fork()) < 0) {
        ok(0, "pipe/fork: %s", strerror(errno));
        return;
    }
    if (pid == 0) {
        char dir[PL_PATH_MAX];
        close(fds[0]);
        int rc = pl_pilotdir_create(home, id, sizeof(id), dir, sizeof(dir),
                                    NULL);
        if (rc == 0 && write(fds[1], id, strlen(id)) < 0)
            _exit(3);
        _exit(rc == 0 ? 0 : 2);
    }
    close(fds[1]);
    ssize_t n = read(fds[0], id, sizeof(id) - 1);
    id[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    waitpid(pid, &status, 0);
    char dir[PL_PATH_MAX];
    bool clean = WIFEXITED(status)
                 && (WEXITSTATUS(status) == 2
                     || (WEXITSTATUS(status) == 0
                         && pl_pilotdir_path(home, id, dir, sizeof(dir), NULL)
                                == 0));
    if (!ok(clean, "create after p9223372036854775807: a valid id or a "
            "clean error"))
        diag("child %s %d, id '%s'",
             WIFEXITED(status) ? "exited" : "killed by signal",
             WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), id);
}

static void test_files(const char *home)
{
    char dir[PL_PATH_MAX], path[PL_PATH_MAX + 64];
    struct pl_error e = { "" };
    struct pl_endpoint ep = { .pid = 4242, .job = 1234567 }, ep2;
    struct pl_info in = { .job = 99, .nodes = 3, .created = 1700000000.125 },
                   in2;

    pl_pilotdir_path(home, "p1", dir, sizeof(dir), &e);
    snprintf(ep.client, sizeof(ep.client), "tcp://10.0.0.1:5000");
    snprintf(ep.agent, sizeof(ep.agent), "tcp://10.0.0.1:5001");
    snprintf(ep.host, sizeof(ep.host), "node-a12");
    snprintf(in.id, sizeof(in.id), "p1");
    snprintf(in.mode, sizeof(in.mode), "slurm");

    errno = 0;
    ok(pl_endpoint_read(dir, &ep2, &e) == -1 && errno == ENOENT,
       "endpoint_read before any write: ENOENT");
    umask(022);
    is(pl_endpoint_write(dir, &ep, &e), 0, "endpoint_write");
    snprintf(path, sizeof(path), "%s/endpoint", dir);
    is(mode_of(path), 0600, "... endpoint is 0600 (umask 022)");
    is(pl_endpoint_read(dir, &ep2, &e), 0, "endpoint_read");
    ok(!strcmp(ep2.client, ep.client) && !strcmp(ep2.agent, ep.agent)
           && !strcmp(ep2.host, ep.host) && ep2.pid == 4242
           && ep2.job == 1234567,
       "... same endpoint back");
    ep.pid = 7;
    snprintf(ep.client, sizeof(ep.client), "tcp://10.0.0.2:6000");
    is(pl_endpoint_write(dir, &ep, &e), 0, "endpoint_write over it");
    ok(pl_endpoint_read(dir, &ep2, &e) == 0 && ep2.pid == 7
           && !strcmp(ep2.client, "tcp://10.0.0.2:6000"),
       "... the new one is read");

    int tmpfiles = 0;
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)))
        if (strstr(de->d_name, ".tmp"))
            tmpfiles++;
    if (d)
        closedir(d);
    is(tmpfiles, 0, "no temporary file left behind");

    is(pl_endpoint_remove(dir), 0, "endpoint_remove");
    errno = 0;
    ok(pl_endpoint_read(dir, &ep2, &e) == -1 && errno == ENOENT,
       "... then endpoint_read: ENOENT");
    errno = 0;
    ok(pl_endpoint_remove(dir) == -1 && errno == ENOENT,
       "endpoint_remove twice: ENOENT");

    FILE *fp = fopen(path, "w");
    fputs("host somewhere\npid 3\n", fp);
    fclose(fp);
    errno = 0;
    ok(pl_endpoint_read(dir, &ep2, &e) == -1 && errno == EPROTO,
       "endpoint without client/agent: EPROTO");
    unlink(path);

    errno = 0;
    ok(pl_info_read(dir, &in2, &e) == -1 && errno == ENOENT,
       "info_read before any write: ENOENT");
    is(pl_info_write(dir, &in, &e), 0, "info_write");
    snprintf(path, sizeof(path), "%s/info", dir);
    is(mode_of(path), 0600, "... info is 0600");
    is(pl_info_read(dir, &in2, &e), 0, "info_read");
    ok(!strcmp(in2.id, "p1") && !strcmp(in2.mode, "slurm") && in2.job == 99
           && in2.nodes == 3 && in2.created > 1700000000.124
           && in2.created < 1700000000.126,
       "... same info back");

    pl_path_db(dir, path, sizeof(path));
    char want[PL_PATH_MAX + 64];
    snprintf(want, sizeof(want), "%s/state.db", dir);
    is_str(path, want, "pl_path_db");
}

static void test_task_log(const char *home)
{
    char dir[PL_PATH_MAX], path[PL_PATH_MAX + 64], want[PL_PATH_MAX + 64];
    struct pl_error e;

    pl_pilotdir_path(home, "p2", dir, sizeof(dir), &e);
    is(pl_path_task_log(dir, 1234, 1, false, true, path, sizeof(path)), 0,
       "task log of 1234");
    snprintf(want, sizeof(want), "%s/tasks/1/1234.out", dir);
    is_str(path, want, "... tasks/1/1234.out");
    snprintf(want, sizeof(want), "%s/tasks/1", dir);
    ok(is_dir(want) && mode_of(want) == 0700,
       "... bucket tasks/1 created 0700");
    is(pl_path_task_log(dir, 1234, 1, true, false, path, sizeof(path)), 0,
       "stderr log of 1234");
    snprintf(want, sizeof(want), "%s/tasks/1/1234.err", dir);
    is_str(path, want, "... tasks/1/1234.err");
    pl_path_task_log(dir, 999, 1, false, true, path, sizeof(path));
    snprintf(want, sizeof(want), "%s/tasks/0/999.out", dir);
    is_str(path, want, "999 goes to bucket 0");
    pl_path_task_log(dir, 5000, 1, false, false, path, sizeof(path));
    snprintf(want, sizeof(want), "%s/tasks/5/5000.out", dir);
    is_str(path, want, "5000 goes to bucket 5");
    snprintf(want, sizeof(want), "%s/tasks/5", dir);
    ok(!is_dir(want), "... not created without mkdirs");
    errno = 0;
    ok(pl_path_task_log(dir, 1234, 1, false, false, path, 10) == -1
           && errno == ENAMETOOLONG,
       "a short buffer: ENAMETOOLONG");
    pl_path_task_log(dir, 1234, 3, true, false, path, sizeof(path));
    snprintf(want, sizeof(want), "%s/tasks/1/1234.3.err", dir);
    is_str(path, want, "attempt 3's stderr: tasks/1/1234.3.err");
    pl_path_task_log(dir, 1234, 0, false, false, path, sizeof(path));
    snprintf(want, sizeof(want), "%s/tasks/1/1234.out", dir);
    is_str(path, want, "attempt 0 (none started yet) is the first's path");
    size_t need = strlen(dir) + strlen("/tasks/1/1234.out");
    ok(pl_path_task_log(dir, 1234, 1, false, false, path, need + 1) == 0
           && pl_path_task_log(dir, 1234, 1, false, false, path, need) == -1,
       "a buffer of exactly the length + 1 fits, one less does not");
}

int main(void)
{
    char home[128];

    plan(62);
    if (!t_tmpdir("pilotdir", tmp, sizeof(tmp)))
        return 1;
    umask(022);
    test_home();
    snprintf(home, sizeof(home), "%s/home", tmp);
    pl_mkdirs(home, 0700);
    test_create_list(home);
    test_path(home);
    test_id_overflow();
    test_files(home);
    test_task_log(home);
    t_rmtree(tmp);
    ok(!is_dir(tmp), "temporary directory removed");
    return done_testing();
}
