/* proto/sbatch.c - writing the batch scripts pilot gives sbatch */
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "proto/sbatch.h"

FILE *pl_sbatch_create(const char *path, struct pl_error *errp)
{
    /* N.B. the umask is the process's: pilot and pilotd are one thread
     * here (pilotd's loop) */
    mode_t old = umask(077);
    FILE *fp = fopen(path, "w");

    umask(old);
    if (!fp)
        pl_errprintf(errp, "cannot write %s: %s", path, strerror(errno));
    return fp;
}

int pl_sbatch_close(FILE *fp, const char *path, bool failed,
                    struct pl_error *errp)
{
    int e = errno;

    /* a write that failed in a flush before the close is sticky */
    if (!failed && ferror(fp)) {
        failed = true;
        e = EIO;
    }
    if (fclose(fp) == EOF && !failed) {
        failed = true;
        e = errno;
    }
    if (!failed)
        return 0;
    errno = e;
    return pl_errprintf(errp, "cannot write %s: %s", path, strerror(e));
}

void pl_sbatch_path(FILE *fp, const char *opt, const char *path,
                    const char *suffix)
{
    bool quote = strpbrk(path, " \t") != NULL;

    fprintf(fp, "#SBATCH %s=%s", opt, quote ? "\"" : "");
    for (const char *p = path; *p; p++)
        fputs(*p == '%' ? "%%" : (char[]){ *p, '\0' }, fp);
    fprintf(fp, "%s%s\n", suffix, quote ? "\"" : "");
}
