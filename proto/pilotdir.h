/* proto/pilotdir.h - the pilot directory: ids, info and endpoint files */
#ifndef PL_PROTO_PILOTDIR_H
#define PL_PROTO_PILOTDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "proto/error.h"

#define PL_PATH_MAX 1024
#define PL_ID_MAX 32

/* What pilotd publishes once its sockets are bound ("endpoint" file,
 * removed on a clean exit). */
struct pl_endpoint {
    char client[256]; /* tcp://ADDR:PORT for the CLI */
    char agent[256];  /* tcp://ADDR:PORT for the agents */
    char host[256];   /* where pilotd runs */
    long pid;
    long job;         /* Slurm job id, 0 for a local pilot */
};

/* What the creator of a pilot records ("info" file). */
struct pl_info {
    char id[PL_ID_MAX];
    char mode[16];    /* "slurm" or "local" */
    long job;         /* Slurm job id once known, else 0 */
    long nodes;       /* nodes asked for */
    double created;   /* seconds since the epoch */
};

/* The pilot tree's directories ($PILOT_HOME, pilots/, pilots/<id>/, the
 * buckets of task outputs) must belong to the effective user and be
 * writable by no one else (a pilot directory: no permission at all for
 * group and others, as keys/), and the directories above $PILOT_HOME must
 * belong to root or the user and be writable by no one else unless
 * sticky (/tmp): then no other user can swap a name on the way.  Below
 * the real path of $PILOT_HOME, no symbolic link is followed.  A refusal
 * is -1 with one line in errp naming the path, what was found and what
 * to do, and errno EPERM (another user's), EACCES (writable by others),
 * ELOOP (a symbolic link) or ENOTDIR. */

/* The real path of $PILOT_HOME, else of $HOME/.pilot, created 0700 if
 * missing, then checked. */
int pl_home(char *buf, size_t len, struct pl_error *errp);
/* The same for the home 'path' (libpilot's pilot_open() names one). */
int pl_home_at(const char *path, char *buf, size_t len,
               struct pl_error *errp);

/* Create HOME/pilots/<id> (0700) with a fresh id ("p1", "p2", ...) and
 * its logs/ and tasks/ subdirectories, after the checks of HOME and
 * pilots/ (made 0700 if missing).  'dir' is under HOME's real path. */
int pl_pilotdir_create(const char *home, char *id, size_t idlen, char *dir,
                       size_t dirlen, struct pl_error *errp);

/* HOME/pilots/ID into 'dir' (under HOME's real path), all three
 * checked (ID's 0700); -1 with errp and errno ENOENT if it does not
 * exist, EINVAL if 'id' is not a valid pilot id, or a refusal. */
int pl_pilotdir_path(const char *home, const char *id, char *dir,
                     size_t dirlen, struct pl_error *errp);

/* Check 'dir', a pilot directory given by name (pilotd --dir,
 * pilot-agent --dir): not a symbolic link, and checked as the pilot
 * tree's directories are, its parents as those above $PILOT_HOME.  Its
 * real path (its parents' links resolved) into 'real'. */
int pl_pilotdir_check(const char *dir, char *real, size_t len,
                      struct pl_error *errp);

/* Ids of all pilots under HOME, newest first, as a NULL-terminated
 * vector the caller frees with pl_strv_free(); HOME and pilots/ are
 * checked. */
char **pl_pilotdir_list(const char *home, struct pl_error *errp);

#define PL_KV_LINE_MAX 511  /* bytes of a line of the endpoint or info file */
#define PL_KV_FILE_MAX 4096 /* bytes read of one, and one more: too large */

/* Atomic write (temporary file + rename, mode 0600) and read of the
 * endpoint and info files.  Read gives -1 with errno ENOENT if absent,
 * EPROTO if pl_endpoint_parse() or pl_info_parse() refuses the text. */
int pl_endpoint_write(const char *dir, const struct pl_endpoint *ep,
                      struct pl_error *errp);
int pl_endpoint_read(const char *dir, struct pl_endpoint *ep,
                     struct pl_error *errp);
int pl_endpoint_remove(const char *dir);
int pl_info_write(const char *dir, const struct pl_info *in,
                  struct pl_error *errp);
int pl_info_read(const char *dir, struct pl_info *in, struct pl_error *errp);

/* The readers' parsers: 'text' ('len' bytes, not NUL-terminated), read
 * from 'path' (named in messages), into 'ep' or 'in'.  Lines of "KEY
 * VALUE"; a line without a space and a key not known (a later
 * version's) are skipped.  Refused, -1 with errp set and errno EPROTO and
 * the struct zeroed: a NUL byte, a line longer than PL_KV_LINE_MAX, a
 * key given twice, a value longer than its field, a number that is not
 * all decimal digits or out of range (pid: 0..INT_MAX, job: a Slurm id,
 * 0..UINT32_MAX, nodes: 0..INT_MAX, created: a finite number >= 0), an
 * endpoint without client and agent.  Nothing is truncated. */
int pl_endpoint_parse(const char *path, const char *text, size_t len,
                      struct pl_endpoint *ep, struct pl_error *errp);
int pl_info_parse(const char *path, const char *text, size_t len,
                  struct pl_info *in, struct pl_error *errp);

/* Paths inside a pilot directory. */
void pl_path_db(const char *dir, char *buf, size_t len);
/* tasks/<id/1000>/<id>.out or .err for a task's first attempt, and
 * <id>.<attempt>.out or .err for the later ones (a task run again after
 * its node was lost keeps each attempt's output); the bucket keeps
 * directories small.  'mkdirs' creates the bucket directory. */
int pl_path_task_log(const char *dir, unsigned long long id,
                     unsigned attempt, bool err, bool mkdirs, char *buf,
                     size_t len);

/* The file of one rank of a task of several ranks (not comm mpi: its
 * launcher's output is one stream) that writes to 'path'
 * (pl_path_task_log()): "<id>.out" becomes "<id>.r<rank>.out" (and
 * "<id>.<attempt>.out" "<id>.<attempt>.r<rank>.out"), so that the ranks
 * never write into one file (docs/output.md).  0, or -1
 * (ENAMETOOLONG). */
int pl_path_rank_log(const char *path, unsigned long long rank, char *buf,
                     size_t len);

/* Whether each rank of a task writes its own files (pl_path_rank_log()):
 * a task of several ranks that the agents start as processes of their
 * own.  Not comm "mpi" (one launcher, one stream), not a pool task (its
 * ranks are calls in the pool's workers) and not a warm Python call (fn
 * "pycall": calls in the agent's workers), which keep one file.  'comm'
 * and 'fn' are the names (NULL: none); the agent and the CLI ask the
 * same question here. */
bool pl_output_per_rank(unsigned long long ranks, const char *comm,
                        const char *fn, bool pool);

/* Where a Python call's result over PL_PY_RESULT_INLINE goes: beside its
 * output, DIR/tasks/<id / 1000>/<id>.result (<id>.<attempt>.result after
 * the first attempt).  0, or -1 (ENAMETOOLONG). */
int pl_path_task_result(const char *dir, unsigned long long id,
                        unsigned attempt, char *buf, size_t len);

/* Open a task's output file 'path' for writing: its directory is made
 * (0700) if missing and checked as the pilot tree's are; the file is
 * created (0600) and must not exist yet (O_EXCL, O_NOFOLLOW: nothing
 * that someone put there is written into or through), except with
 * 'shared' (the ranks of one task append to one file, whichever rank
 * comes first creates it), where a regular file of ours with one link
 * is opened for appending.  Returns the descriptor (close-on-exec), or
 * -1 with errp ("PATH ...") and errno: EEXIST (something is there
 * already), a refusal of the directory, or open(2)'s. */
int pl_output_open(const char *path, bool shared, struct pl_error *errp);

/* Why creating output file 'name' (the last part of 'path') in the
 * directory open on 'dfd' failed with 'errnum': errp as
 * pl_output_open() says it ("PATH exists already (uid U, mode M)", "PATH
 * is a symbolic link: not followed", "PATH: " and strerror).  Returns
 * -1 with errno 'errnum'. */
int pl_output_why(int dfd, const char *path, const char *name, int errnum,
                  struct pl_error *errp);

/* The checked directory of the last output file asked for, kept open,
 * so that a task's files are made with one openat() each in the spawned
 * child (agent/spawn.h) and not a walk and a check per file. */
struct pl_outdir {
    char path[PL_PATH_MAX];     /* its path ("": none kept) */
    int fd;                     /* O_PATH, or -1 */
    dev_t dev;                  /* what it is */
    ino_t ino;
};

void pl_outdir_init(struct pl_outdir *c);
/* Close the directory kept, if any; 'c' may be NULL. */
void pl_outdir_close(struct pl_outdir *c);
/* The descriptor (borrowed: owned by 'c', valid until the next call) of
 * the directory of output file 'path', made (0700) if missing and
 * checked as pl_output_open() does; *name is set to the file's name in
 * 'path'.  The one kept serves while 'path' is in it and its path still
 * names it and passes the checks (one lstat()).  -1 with errp and errno as pl_output_open(). */
int pl_outdir_get(struct pl_outdir *c, const char *path, const char **name,
                  struct pl_error *errp);

/* mkdir -p with 'mode' for each created level. */
int pl_mkdirs(const char *path, unsigned mode);

#endif /* !PL_PROTO_PILOTDIR_H */
