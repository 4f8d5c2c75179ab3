/* tests/unit/test_proto_pilotdir.c - the pilot directory: home, ids, files */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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

#define OTHER 12345 /* a uid that is not ours (chown: the tests run as root) */

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

    /* a line over 511 bytes was read as two: its tail at byte 511 became
     * a line of its own, here a second client (tests/fuzz/fuzz_pilotdir.c) */
    char long_host[507];
    memset(long_host, 'x', sizeof(long_host) - 1);
    long_host[sizeof(long_host) - 1] = '\0';
    fp = fopen(path, "w");
    fprintf(fp, "client tcp://good:1\nagent tcp://good:2\nhost %s"
            "client tcp://evil:9\n", long_host);
    fclose(fp);
    errno = 0;
    ok(pl_endpoint_read(dir, &ep2, &e) == -1 && errno == EPROTO
           && strstr(e.text, "line 3 is longer than 511"),
       "a line over 511 bytes: EPROTO, not truncated: %s", e.text);
    fp = fopen(path, "w");
    fputs("client tcp://a:1\nagent tcp://a:2\npid 12abc\n", fp);
    fclose(fp);
    errno = 0;
    ok(pl_endpoint_read(dir, &ep2, &e) == -1 && errno == EPROTO,
       "pid 12abc: EPROTO, not pid 12: %s", e.text);
    fp = fopen(path, "w");
    fputs("client tcp://a:1\nagent tcp://a:2\nclient tcp://b:1\n", fp);
    fclose(fp);
    errno = 0;
    ok(pl_endpoint_read(dir, &ep2, &e) == -1 && errno == EPROTO,
       "two client lines: EPROTO: %s", e.text);
    const char *t = "client c\nagent a\nnew thing\nhost h";
    ok(pl_endpoint_parse("ep", t, strlen(t), &ep2, &e) == 0
           && !strcmp(ep2.host, "h") && !strcmp(ep2.agent, "a"),
       "pl_endpoint_parse: unknown keys skipped, no final newline needed");
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
    errno = 0;
    t = "id p1\ncreated nan\n";
    ok(pl_info_parse("info", t, strlen(t), &in2, &e) == -1
           && errno == EPROTO && in2.created == 0,
       "info created nan: EPROTO: %s", e.text);
    t = "mode slurmslurmslurmslurm\n";
    ok(pl_info_parse("info", t, strlen(t), &in2, &e) == -1 && errno == EPROTO,
       "info mode longer than its field: EPROTO, not cut: %s", e.text);

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
    pl_path_task_log(dir, 18446744073709551615ull, 4294967295u, false, false,
                     path, sizeof(path));
    snprintf(want, sizeof(want), "%s/tasks/18446744073709551/"
             "18446744073709551615.4294967295.out", dir);
    is_str(path, want, "the largest id and attempt: every digit");
    pl_path_task_log(dir, 1234, 0, false, false, path, sizeof(path));
    snprintf(want, sizeof(want), "%s/tasks/1/1234.out", dir);
    is_str(path, want, "attempt 0 (none started yet) is the first's path");
    size_t need = strlen(dir) + strlen("/tasks/1/1234.out");
    ok(pl_path_task_log(dir, 1234, 1, false, false, path, need + 1) == 0
           && pl_path_task_log(dir, 1234, 1, false, false, path, need) == -1,
       "a buffer of exactly the length + 1 fits, one less does not");
}

/* 'path' made anew as a directory of mode 'mode' (exactly: no umask),
 * owned by 'uid' (-1: ours). */
static void mkdir_as(const char *path, unsigned mode, int uid)
{
    mkdir(path, 0700);
    if (chmod(path, mode) < 0 || (uid >= 0 && chown(path, (uid_t)uid,
                                                    (gid_t)-1) < 0))
        diag("mkdir_as %s: %s", path, strerror(errno));
}

static char *slurp(const char *path)
{
    static char buf[256];
    FILE *fp = fopen(path, "r");
    size_t n = 0;

    if (!fp)
        return NULL;
    n = fread(buf, 1, sizeof(buf) - 1, fp);
    buf[n] = '\0';
    fclose(fp);
    return buf;
}

static void put(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");

    if (fp) {
        fputs(text, fp);
        fclose(fp);
    }
}

/* PILOT_HOME and the directories above it (pl_home()). */
static void test_home_checks(void)
{
    char buf[PL_PATH_MAX], path[128], link[128];
    struct pl_error e;

    if (geteuid() != 0)
        diag("not root: the checks of another user's directories fail");
    snprintf(path, sizeof(path), "%s/ww", tmp);
    mkdir_as(path, 0777, -1);
    setenv("PILOT_HOME", path, 1);
    errno = 0;
    e.text[0] = '\0';
    ok(pl_home(buf, sizeof(buf), &e) == -1 && errno == EACCES
           && strstr(e.text, path) && strstr(e.text, "mode 0777")
           && strstr(e.text, "chmod go-w"),
       "a PILOT_HOME others may write: EACCES, path, mode, what to do (%s)",
       e.text);
    chmod(path, 0755);
    is(pl_home(buf, sizeof(buf), &e), 0, "... once chmod go-w: accepted "
       "(others may read it)");

    snprintf(path, sizeof(path), "%s/theirs", tmp);
    mkdir_as(path, 0700, OTHER);
    setenv("PILOT_HOME", path, 1);
    errno = 0;
    ok(pl_home(buf, sizeof(buf), &e) == -1 && errno == EPERM
           && strstr(e.text, path) && strstr(e.text, "uid 12345"),
       "a PILOT_HOME of another user: EPERM, naming its owner (%s)", e.text);

    /* above PILOT_HOME: root's or ours, sticky if others may write */
    snprintf(path, sizeof(path), "%s/open", tmp);
    mkdir_as(path, 0777, 0);
    snprintf(buf, sizeof(buf), "%s/open/home", tmp);
    setenv("PILOT_HOME", buf, 1);
    errno = 0;
    ok(pl_home(buf, sizeof(buf), &e) == -1 && errno == EACCES
           && strstr(e.text, path) && strstr(e.text, "not sticky"),
       "a PILOT_HOME in a directory anyone may write: EACCES (%s)", e.text);
    snprintf(buf, sizeof(buf), "%s/open/home", tmp);
    ok(!is_dir(buf), "... and it is not made there");
    chmod(path, 01777);
    is(pl_home(buf, sizeof(buf), &e), 0, "... sticky (as /tmp): accepted");
    snprintf(path, sizeof(path), "%s/above", tmp);
    mkdir_as(path, 0755, OTHER);
    snprintf(buf, sizeof(buf), "%s/above/home", tmp);
    mkdir_as(buf, 0700, -1);
    setenv("PILOT_HOME", buf, 1);
    errno = 0;
    ok(pl_home(buf, sizeof(buf), &e) == -1 && errno == EPERM
           && strstr(e.text, path) && strstr(e.text, "uid 12345"),
       "a PILOT_HOME in another user's directory: EPERM (%s)", e.text);

    /* PILOT_HOME a link to a directory of ours: its real path */
    snprintf(path, sizeof(path), "%s/real-home", tmp);
    mkdir_as(path, 0700, -1);
    snprintf(link, sizeof(link), "%s/home-link", tmp);
    symlink(path, link);
    setenv("PILOT_HOME", link, 1);
    ok(pl_home(buf, sizeof(buf), &e) == 0 && !strcmp(buf, path),
       "a PILOT_HOME that is a link: followed, its real path (%s)", buf);
    unsetenv("PILOT_HOME");
}

/* pilots/ and pilots/<id>: pl_pilotdir_path(), _list(), _create(). */
static void test_dir_checks(void)
{
    char home[128], path[256], dir[PL_PATH_MAX], id[PL_ID_MAX];
    struct pl_error e;
    char **v;

    snprintf(home, sizeof(home), "%s/h2", tmp);
    pl_mkdirs(home, 0700);
    is(pl_pilotdir_create(home, id, sizeof(id), dir, sizeof(dir), &e), 0,
       "checks: a pilot p1 to start with");

    snprintf(path, sizeof(path), "%s/pilots/p1", home);
    chmod(path, 0770);
    errno = 0;
    ok(pl_pilotdir_path(home, "p1", dir, sizeof(dir), &e) == -1
           && errno == EACCES && strstr(e.text, path)
           && strstr(e.text, "mode 0770") && strstr(e.text, "go-rwx"),
       "pilots/p1 writable by its group: refused, chmod go-rwx (%s)",
       e.text);
    chmod(path, 0750);
    errno = 0;
    ok(pl_pilotdir_path(home, "p1", dir, sizeof(dir), &e) == -1
           && errno == EACCES && strstr(e.text, "mode 0750")
           && strstr(e.text, "chmod go-rwx"),
       "... readable by it: refused too, as keys/ (%s)", e.text);
    chmod(path, 0700);
    snprintf(path, sizeof(path), "%s/pilots", home);
    chmod(path, 0755);
    chmod(home, 0755);
    is(pl_pilotdir_path(home, "p1", dir, sizeof(dir), &e), 0,
       "pilots/p1 0700 in a PILOT_HOME and pilots/ others may read: "
       "accepted");
    snprintf(path, sizeof(path), "%s/pilots/p1", home);
    chown(path, OTHER, (gid_t)-1);
    errno = 0;
    ok(pl_pilotdir_path(home, "p1", dir, sizeof(dir), &e) == -1
           && errno == EPERM && strstr(e.text, path)
           && strstr(e.text, "uid 12345"),
       "pilots/p1 another user's: refused (%s)", e.text);
    chown(path, 0, (gid_t)-1);

    /* pilots/p2 -> a directory elsewhere (the other user's, or ours) */
    char elsewhere[128];
    snprintf(elsewhere, sizeof(elsewhere), "%s/elsewhere", tmp);
    mkdir_as(elsewhere, 0700, -1);
    snprintf(path, sizeof(path), "%s/pilots/p2", home);
    symlink(elsewhere, path);
    errno = 0;
    ok(pl_pilotdir_path(home, "p2", dir, sizeof(dir), &e) == -1
           && errno == ELOOP && strstr(e.text, path)
           && strstr(e.text, "symbolic link"),
       "pilots/p2 a link, even to a directory of ours: refused (%s)",
       e.text);
    errno = 0;
    ok(pl_pilotdir_create(home, id, sizeof(id), dir, sizeof(dir), &e) == 0
           && !strcmp(id, "p3"),
       "create passes the link by (%s)", id);

    /* pilots/ itself */
    snprintf(path, sizeof(path), "%s/pilots", home);
    chmod(path, 0777);
    errno = 0;
    v = pl_pilotdir_list(home, &e);
    ok(!v && errno == EACCES && strstr(e.text, path),
       "pilots/ writable by others: the list is refused (%s)", e.text);
    pl_strv_free(v);
    errno = 0;
    ok(pl_pilotdir_path(home, "p1", dir, sizeof(dir), &e) == -1
           && errno == EACCES,
       "... and so is each pilot in it");
    errno = 0;
    ok(pl_pilotdir_create(home, id, sizeof(id), dir, sizeof(dir), &e) == -1
           && errno == EACCES,
       "... and a new pilot in it");
    snprintf(path, sizeof(path), "%s/pilots/p4", home);
    ok(!is_dir(path), "... which is not made");
    snprintf(path, sizeof(path), "%s/pilots", home);
    chmod(path, 0700);
    chown(path, OTHER, (gid_t)-1);
    errno = 0;
    v = pl_pilotdir_list(home, &e);
    ok(!v && errno == EPERM, "pilots/ another user's: refused (%s)",
       e.text);
    pl_strv_free(v);
    chown(path, 0, (gid_t)-1);

    /* pilotd --dir, pilot-agent --dir */
    char real[PL_PATH_MAX];
    snprintf(path, sizeof(path), "%s/pilots/p1/", home);
    snprintf(dir, sizeof(dir), "%s/pilots/p1", home);
    ok(pl_pilotdir_check(path, real, sizeof(real), &e) == 0
           && !strcmp(real, dir),
       "pl_pilotdir_check of a good one, trailing slash (%s)", real);
    snprintf(path, sizeof(path), "%s/pilots/p2", home);
    errno = 0;
    ok(pl_pilotdir_check(path, real, sizeof(real), &e) == -1
           && errno == ELOOP,
       "pl_pilotdir_check of a link: refused (%s)", e.text);
    snprintf(path, sizeof(path), "%s/home-link/../h2/pilots/p1", tmp);
    ok(pl_pilotdir_check(path, real, sizeof(real), &e) == 0
           && !strcmp(real, dir),
       "... a link above it is resolved (%s)", real);
    char cwd[PL_PATH_MAX];
    if (getcwd(cwd, sizeof(cwd)) && chdir(dir) == 0) {
        ok(pl_pilotdir_check(".", real, sizeof(real), &e) == 0
               && !strcmp(real, dir),
           "... '.' is its real path (%s)", real);
        if (chdir(cwd) < 0)
            diag("chdir back: %s", strerror(errno));
    }
    else
        ok(0, "chdir %s: %s", dir, strerror(errno));
    snprintf(path, sizeof(path), "%s/pilots/p3", home);
    chown(path, OTHER, (gid_t)-1);
    errno = 0;
    ok(pl_pilotdir_check(path, real, sizeof(real), &e) == -1
           && errno == EPERM && strstr(e.text, "uid 12345"),
       "pl_pilotdir_check of another user's: refused (%s)", e.text);
    errno = 0;
    snprintf(path, sizeof(path), "%s/pilots/p9", home);
    ok(pl_pilotdir_check(path, real, sizeof(real), &e) == -1
           && errno == ENOENT,
       "pl_pilotdir_check of none: ENOENT");
}

/* pl_output_open(): the task output files. */
static void test_output(void)
{
    char dir[128], path[256], other[256], target[256];
    struct pl_error e;
    struct stat st;
    int fd, fd2;

    snprintf(dir, sizeof(dir), "%s/out/tasks/0", tmp);
    snprintf(path, sizeof(path), "%s/1.out", dir);
    fd = pl_output_open(path, false, &e);
    ok(fd >= 0 && fstat(fd, &st) == 0 && (st.st_mode & 07777) == 0600
           && (fcntl(fd, F_GETFD) & FD_CLOEXEC),
       "output: a new file, 0600, close-on-exec");
    ok(is_dir(dir) && mode_of(dir) == 0700, "output: its bucket made 0700");
    if (fd >= 0 && write(fd, "one\n", 4) != 4)
        diag("write: %s", strerror(errno));
    if (fd >= 0)
        close(fd);
    errno = 0;
    e.text[0] = '\0';
    ok(pl_output_open(path, false, &e) == -1 && errno == EEXIST
           && strstr(e.text, path) && strstr(e.text, "exists already"),
       "output: one that exists: EEXIST, not written over (%s)", e.text);
    is_str(slurp(path), "one\n", "... its text kept");

    /* the ranks of one task: the first creates, the others append */
    snprintf(path, sizeof(path), "%s/2.out", dir);
    fd = pl_output_open(path, true, &e);
    fd2 = pl_output_open(path, true, &e);
    ok(fd >= 0 && fd2 >= 0, "output: shared: two ranks open one file");
    if (fd >= 0 && fd2 >= 0 && (write(fd, "a\n", 2) != 2
                                || write(fd2, "b\n", 2) != 2
                                || write(fd, "c\n", 2) != 2))
        diag("write: %s", strerror(errno));
    ok(fd2 >= 0 && (fcntl(fd2, F_GETFL) & (O_APPEND | O_NONBLOCK))
                       == O_APPEND,
       "... the second appends, and blocks as a file does");
    if (fd >= 0)
        close(fd);
    if (fd2 >= 0)
        close(fd2);
    is_str(slurp(path), "a\nb\nc\n", "... every write at the end");

    /* planted: a link, a FIFO, a hard link, another user's file */
    snprintf(target, sizeof(target), "%s/target", tmp);
    put(target, "target\n");
    for (int shared = 0; shared < 2; shared++) {
        snprintf(path, sizeof(path), "%s/link%d.out", dir, shared);
        symlink(target, path);
        errno = 0;
        ok(pl_output_open(path, shared, &e) == -1 && errno == EEXIST
               && strstr(e.text, "symbolic link"),
           "output: a link there (%s): refused (%s)",
           shared ? "shared" : "one rank", e.text);
    }
    is_str(slurp(target), "target\n", "... its target untouched");
    snprintf(path, sizeof(path), "%s/fifo.out", dir);
    mkfifo(path, 0600);
    errno = 0;
    ok(pl_output_open(path, true, &e) == -1 && errno == EEXIST,
       "output: shared, a FIFO there: refused at once (%s)", e.text);
    snprintf(path, sizeof(path), "%s/hard.out", dir);
    link(target, path);
    errno = 0;
    ok(pl_output_open(path, true, &e) == -1 && errno == EEXIST,
       "output: shared, a hard link there: refused (%s)", e.text);
    snprintf(path, sizeof(path), "%s/theirs.out", dir);
    put(path, "theirs\n");
    chown(path, OTHER, (gid_t)-1);
    errno = 0;
    ok(pl_output_open(path, true, &e) == -1 && errno == EEXIST
           && strstr(e.text, "uid 12345"),
       "output: shared, another user's file: refused (%s)", e.text);
    is_str(slurp(path), "theirs\n", "... not written into");

    /* the bucket */
    snprintf(dir, sizeof(dir), "%s/out/tasks/1", tmp);
    mkdir_as(dir, 0777, -1);
    snprintf(path, sizeof(path), "%s/1000.out", dir);
    errno = 0;
    ok(pl_output_open(path, false, &e) == -1 && errno == EACCES
           && strstr(e.text, dir),
       "output: a bucket others may write: refused (%s)", e.text);
    ok(access(path, F_OK) < 0, "... nothing made in it");
    chmod(dir, 0700);
    chown(dir, OTHER, (gid_t)-1);
    errno = 0;
    ok(pl_output_open(path, false, &e) == -1 && errno == EPERM,
       "output: another user's bucket: refused (%s)", e.text);
    snprintf(dir, sizeof(dir), "%s/out/tasks/2", tmp);
    snprintf(other, sizeof(other), "%s/elsewhere", tmp);
    symlink(other, dir);
    snprintf(path, sizeof(path), "%s/2000.out", dir);
    errno = 0;
    ok(pl_output_open(path, false, &e) == -1 && errno == ELOOP,
       "output: a bucket that is a link: refused (%s)", e.text);
    errno = 0;
    ok(pl_output_open("nodir", false, &e) == -1 && errno == EINVAL,
       "output: a path without a directory: EINVAL");
}

/* pl_outdir_get(): the bucket kept open, and given up when its path no
 * longer names it; pl_output_why(). */
static void test_outdir(void)
{
    char dir[128], moved[160], path[256], path2[256];
    struct pl_outdir c;
    struct pl_error e;
    struct stat st1, st2;
    const char *name = NULL;
    int fd, fd2;

    pl_outdir_init(&c);
    snprintf(dir, sizeof(dir), "%s/od/tasks/5", tmp);
    snprintf(path, sizeof(path), "%s/5000.out", dir);
    snprintf(path2, sizeof(path2), "%s/5001.err", dir);
    fd = pl_outdir_get(&c, path, &name, &e);
    ok(fd >= 0 && name && !strcmp(name, "5000.out") && is_dir(dir)
           && mode_of(dir) == 0700,
       "outdir: the bucket made 0700, the name in it");
    fd2 = pl_outdir_get(&c, path2, &name, &e);
    ok(fd2 == fd && !strcmp(name, "5001.err"), "outdir: the same one kept");
    int f = openat(fd, "5000.out", O_WRONLY | O_CREAT | O_EXCL, 0600);
    ok(f >= 0, "outdir: a file made in it");
    if (f >= 0)
        close(f);
    errno = 0;
    ok(pl_output_why(fd, path, "5000.out", EEXIST, &e) == -1
           && errno == EEXIST && strstr(e.text, path)
           && strstr(e.text, "exists already"),
       "outdir: why: exists already (%s)", e.text);
    ok(pl_output_why(fd, path, "5000.out", EACCES, &e) == -1
           && errno == EACCES && strstr(e.text, strerror(EACCES)),
       "outdir: why: another error (%s)", e.text);
    /* moved away and made again: the new one, not the one kept */
    snprintf(moved, sizeof(moved), "%s.moved", dir);
    ok(rename(dir, moved) == 0, "outdir: bucket moved away");
    fd2 = pl_outdir_get(&c, path, &name, &e);
    ok(fd2 >= 0 && fstat(fd2, &st1) == 0 && stat(dir, &st2) == 0
           && st1.st_ino == st2.st_ino,
       "outdir: a bucket moved away is not used: made again");
    /* one open to others: refused, as pl_output_open() refuses it */
    chmod(dir, 0777);
    errno = 0;
    ok(pl_outdir_get(&c, path, &name, &e) == -1 && errno == EACCES,
       "outdir: a bucket writable by others: refused (%s)", e.text);
    chmod(dir, 0700);
    pl_outdir_close(&c);
    ok(c.fd == -1, "outdir: closed");
    pl_outdir_close(NULL);
}

static void test_rank_log(void)
{
    char buf[128];

    ok(pl_path_rank_log("/p/tasks/0/7.out", 3, buf, sizeof(buf)) == 0
           && !strcmp(buf, "/p/tasks/0/7.r3.out"),
       "rank log: 7.out -> 7.r3.out (%s)", buf);
    ok(pl_path_rank_log("/p/tasks/0/7.2.err", 0, buf, sizeof(buf)) == 0
           && !strcmp(buf, "/p/tasks/0/7.2.r0.err"),
       "rank log: attempt 2's 7.2.err -> 7.2.r0.err (%s)", buf);
    ok(pl_path_rank_log("/p.d/x/log", 1, buf, sizeof(buf)) == 0
           && !strcmp(buf, "/p.d/x/log.r1"),
       "rank log: a name without a dot gets .r1 at its end (%s)", buf);
    errno = 0;
    ok(pl_path_rank_log("/p/tasks/0/7.out", 3, buf, 12) < 0
           && errno == ENAMETOOLONG,
       "rank log: too long for the buffer: ENAMETOOLONG");
    ok(pl_output_per_rank(4, "none", "none", false)
           && pl_output_per_rank(2, "torch", NULL, false),
       "per-rank files: 4 ranks of comm none, 2 of torch");
    ok(!pl_output_per_rank(1, "none", "none", false)
           && !pl_output_per_rank(4, "mpi", "none", false),
       "... not 1 rank, not comm mpi (one launcher)");
    ok(!pl_output_per_rank(4, "none", "c", true)
           && !pl_output_per_rank(4, "none", "py", true)
           && !pl_output_per_rank(2, "none", "pycall", false),
       "... not a pool task's ranks, not a warm Python call's");
}

int main(void)
{
    char home[128];

    plan(113 + 4 + 3 + 9 + 1);
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
    test_home_checks();
    test_dir_checks();
    test_output();
    test_outdir();
    test_rank_log();
    t_rmtree(tmp);
    ok(!is_dir(tmp), "temporary directory removed");
    return done_testing();
}
