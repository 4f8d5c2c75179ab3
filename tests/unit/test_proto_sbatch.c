/* tests/unit/test_proto_sbatch.c - the batch scripts' file and #SBATCH
 * path lines (proto/sbatch.c: pilot up's and pilotd's allocations') */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "proto/sbatch.h"
#include "tests/unit/helpers.h"
#include "tests/unit/tap.h"

static void read_back(const char *path, char *buf, size_t len)
{
    FILE *fp = fopen(path, "r");
    size_t n = fp ? fread(buf, 1, len - 1, fp) : 0;

    buf[n] = '\0';
    if (fp)
        fclose(fp);
}

int main(void)
{
    char tmp[128], path[256], text[512];
    struct pl_error err;
    struct stat st = { 0 };
    FILE *fp;

    plan(8);
    if (!t_tmpdir("sbatch", tmp, sizeof(tmp)))
        return 1;
    snprintf(path, sizeof(path), "%s/x.sbatch", tmp);
    mode_t old = umask(022);
    fp = pl_sbatch_create(path, &err);
    ok(fp != NULL, "pl_sbatch_create under umask 022");
    ok(umask(old) == 022, "... the umask is given back");
    int rc = stat(path, &st);
    ok(rc == 0 && (st.st_mode & 0777) == 0600, "... the script is 0600");
    pl_sbatch_path(fp, "--output", "/a/100%/dir", "/logs/slurm-%j.out");
    pl_sbatch_path(fp, "--error", "/with blank", "/e");
    is(pl_sbatch_close(fp, path, false, &err), 0, "pl_sbatch_close: 0");
    read_back(path, text, sizeof(text));
    is_str(text,
           "#SBATCH --output=/a/100%%/dir/logs/slurm-%j.out\n"
           "#SBATCH --error=\"/with blank/e\"\n",
           "percent signs doubled in the path (not the suffix); quoted with blanks");
    fp = pl_sbatch_create(path, &err);
    errno = ENOMEM;
    ok(pl_sbatch_close(fp, path, true, &err) < 0 && errno == ENOMEM
           && strstr(err.text, "cannot write ")
           && strstr(err.text, strerror(ENOMEM)),
       "closed after a failure: that failure (%s)", err.text);
    snprintf(path, sizeof(path), "%s/none/x.sbatch", tmp);
    ok(!pl_sbatch_create(path, &err) && errno == ENOENT
           && strstr(err.text, "cannot write ") && strstr(err.text, path),
       "a directory that does not exist: ENOENT (%s)", err.text);
    fp = fopen("/dev/full", "w");
    if (fp)
        fputs("x", fp);
    ok(fp && pl_sbatch_close(fp, "/dev/full", false, &err) < 0
           && errno == ENOSPC,
       "a write that fails at the close: ENOSPC (%s)", err.text);
    t_rmtree(tmp);
    return done_testing();
}
