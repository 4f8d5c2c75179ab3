/* pilot.h - libpilot: submit to, query and control a running pilot
 *
 * A pilot is a pilot-job system inside one Slurm allocation (or on this
 * machine: pilot up --local).  This library is the client half of its
 * protocol, shared by the pilot CLI's way of finding a pilot, the C
 * programs that link it and the Python package (cffi): requests and
 * replies are JSON text, in the shapes 'pilot ... --json' prints.
 * docs/libpilot.md has every call's arguments and replies.
 *
 * Conventions:
 * - A call returns 0 or a pointer on success; -1 or NULL on failure,
 *   with errno set and, when 'err' is not NULL, err->errnum (the same
 *   errno) and err->text (one line for a person, as the CLI would say
 *   it after "pilot: error: ").
 * - Strings given to a call are borrowed for the call.  Strings a call
 *   returns through a char ** are the caller's: free them with
 *   pilot_free().  pilot_id() and pilot_dir() are borrowed from the
 *   struct pilot and valid until pilot_close().
 * - Threads: any call on a struct pilot may come from any thread; its
 *   requests are sent one at a time (a mutex), so concurrent callers
 *   wait their turn.  Use one struct pilot per thread for requests in
 *   parallel.  A struct pilot may not be used in a child after fork().
 * - Versions: PILOT_API_VERSION is bumped when a call changes its
 *   meaning or signature; new calls, ops and JSON fields keep it.  The
 *   shared object's SONAME is libpilot.so.1, and only pilot_* is
 *   exported.
 *
 * No declaration below uses a typedef or anything but plain C types:
 * the Python package gives the block between the "cdef" lines to cffi
 * as it is (python/pilot/_cdef.py is made from it: make cdef).
 */
#ifndef PILOT_H
#define PILOT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* cdef: begin */
#define PILOT_API_VERSION 1

#define PILOT_STDOUT 1
#define PILOT_STDERR 2
#define PILOT_LOGS_LABEL 1

/* A connection to one pilot: opaque. */
struct pilot;

/* Why a call failed: errnum is the errno value, text one line. */
struct pilot_error {
    int errnum;
    char text[256];
};

/* PILOT_API_VERSION of the library loaded (which may be newer than the
 * header a program was built with). */
int pilot_api_version(void);

/* Find a pilot and connect to it, as the pilot CLI does.
 * id: the pilot's id ("p3"), or NULL: $PILOT_ID, else the one running
 * pilot (an error if none or several run).  A pilot named by its id that
 * no longer runs is opened read-only on its state database: list,
 * show, counts and status answer from there, the rest fail ENOTCONN.
 * home: the pilot home, or NULL: $PILOT_HOME, else ~/.pilot.
 * timeout_ms: how long one request may wait for pilotd, or <= 0:
 * $PILOT_TIMEOUT, else 10 s.  $PILOT_KEYS names other client keys.
 * Nothing is sent yet: a pilotd that does not answer shows at the
 * first request (ETIMEDOUT).  Returns the connection (pilot_close()),
 * or NULL: ENOENT (no pilot running, no such pilot), EEXIST (several
 * running: name one), ENOTCONN (it does not run: starting, stale),
 * EACCES or EPERM (keys or directories others may read or write),
 * EINVAL (a bad id or PILOT_TIMEOUT). */
struct pilot *pilot_open(const char *id, const char *home, int timeout_ms,
                         struct pilot_error *err);

/* Close the connection and free 'p'; NULL is ignored.  Preserves
 * errno.  No call on 'p' may be in progress. */
void pilot_close(struct pilot *p);

/* The pilot's id ("p3") and directory (under the pilot home): borrowed. */
const char *pilot_id(const struct pilot *p);
const char *pilot_dir(const struct pilot *p);

/* 1 if requests go to a running pilotd, 0 if 'p' reads the state
 * database of a pilot that does not run (pilot_open() found it so, or a
 * request found pilotd gone since). */
int pilot_is_live(struct pilot *p);

/* Submit tasks.  specs_json: a JSON array of task objects with the keys
 * of a task file (pilot submit --file): "argv" (a list) or "cmd" (a
 * shell line), "name", "cwd" (relative: to this process's current
 * directory, which is also the default), "ranks", "nodes",
 * "ranks_per_node", "cores_per_rank", "gpus_per_rank", "exclusive",
 * "comm", "launcher", "timeout", "output_limit", "retries", "env" and
 * "tags" ({"K": "V"} or ["K=V"]), "after" (ids, "ID.N", names, each
 * string with ":ok" or ":any"), "array" ("A-B:S" or [A, B, S]),
 * "priority", "pool", "fn", "py".  A Python call in a warm worker of
 * its agent: "py_call" ("MOD:FN", "argv" its string arguments), or
 * "input" (the cloudpickle of (function, args, kwargs) in base64: inline
 * up to 256 KiB, larger written by the library to a new file under the
 * pilot's inputs/, over 256 MiB refused) or "input_file" (a file holding
 * it, read here); "py_prelude", "python"; "refs": [ID, ...] (at most 64
 * Python calls whose values this one receives: its pickle names each as
 * the persistent id ("pilot-ref", ID); each is added to "after" as
 * "ID:ok"); "argv"/"cmd" are then a label, optional.  A name in "after"
 * may be an earlier spec's of the same call.  Large submits go in
 * several requests as pilot submit sends them (at most 5,000 tasks
 * each; an array of more in slices that append to it).  On success
 * *reply_json is {"ids": [ID, ...]}: every task's id in the order of
 * the specs, each element of an array.  On failure nothing is queued
 * if a spec is refused before any request (err->text names it:
 * "specs[3]: ...");
 * if a later request fails, the tasks of the earlier ones stay queued
 * and *reply_json holds their ids (else it is NULL).  errno: EINVAL (a
 * spec pilotd would refuse, or not JSON), E2BIG, ENOTCONN, ETIMEDOUT,
 * EACCES (the key's role may not submit), or what pilotd replied. */
int pilot_submit(struct pilot *p, const char *specs_json, char **reply_json,
                 struct pilot_error *err);

/* One request, 'op' with the JSON object args_json (NULL or "": {}),
 * its reply in *reply_json (pilot_free()) as pilot ... --json prints:
 *   "list"       {state?, tags?, ids?, limit?} -> [task, ...]
 *   "show"       {id} -> task with "events"
 *   "counts"     {ids?} -> {total, waiting, queued, ..., unknown}
 *   "status"     {} -> the status object
 *   "results"    {ids: [ID, ...] (1..1000)} -> [{id, status: "ok" or
 *                "raised", size, result: base64 or result_file: path},
 *                or {id, status: null}: no result; past 32 MiB of
 *                results the rest are {id, more: true}: ask again]
 *   "cancel"     {ids} -> {canceled: [...], final: [...]}
 *   "pool_start" {name, ranks_per_node, nodes?, cores_per_rank?,
 *                 gpus_per_rank?, launcher?, env?} -> the pool
 *   "pool_stop"  {name} -> the pool, stopping
 *   "pool_list"  {} -> [pool, ...]
 *   "shutdown"   {} -> {}: pilotd stops its agents and exits
 * ids: task ids (an array's id: all its elements) or "ID.N" strings.
 * errno: EINVAL (an unknown op or field, a bad value), ENOENT (no such
 * task or pool), ENOTCONN (the pilot does not run: a write), ETIMEDOUT,
 * EACCES, or what pilotd replied. */
int pilot_call(struct pilot *p, const char *op, const char *args_json,
               char **reply_json, struct pilot_error *err);

/* The file that holds stream 'stream' (PILOT_STDOUT or PILOT_STDERR) of
 * attempt 'attempt' (0 or 1: the first; show's "attempts" is the last)
 * of task 'id', into buf (len bytes).  The file may not exist yet.
 * 0, or -1 with errno: EINVAL, ENAMETOOLONG. */
int pilot_log_path(const struct pilot *p, uint64_t id, unsigned attempt,
                   int stream, char *buf, size_t len);

/* Free what a call returned through a char **; NULL is ignored. */
void pilot_free(void *ptr);

/* pilot_submit() with options.  opts_json: NULL (as pilot_submit()) or
 * a JSON object: {"watch": TOKEN}: the tasks made join the watch TOKEN
 * (pilot_watch_token(): a watch of the same key) in the request that
 * makes them, before anything can end them, so that no end falls
 * between the submit and the watch.  The reply and the errors are
 * pilot_submit()'s, and: EINVAL (a bad option or token), ENOENT (pilotd
 * has no watch TOKEN: it expired, or pilotd restarted), EACCES (another
 * key's watch), E2BIG (the watch would hold more than 1,000,000 tasks).
 * A watch of this process is also told the ids, so that it holds them
 * if it must be made again (pilotd restarted). */
int pilot_submit_opts(struct pilot *p, const char *specs_json,
                      const char *opts_json, char **reply_json,
                      struct pilot_error *err);

/* A watch: a subscription to the ends of tasks, which pilotd pushes as
 * it stores them (no polling), each once, in the order of its end
 * sequence ("seq": every end of the pilot takes the next number).  A
 * watch has its own connection to pilotd, so one thread may block in
 * pilot_watch_next() while others use the struct pilot it came from
 * (its requests never wait for the watch, nor the watch for them).
 * Calls on one watch may come from several threads: they take turns
 * (a pilot_watch_next() that waits lets the others go within 0.1 s).
 * pilot_watch_close() may come while another thread waits in
 * pilot_watch_next() (that call returns -1, ECANCELED, within 0.1 s,
 * and the close waits for it), but no call may begin once the close has
 * begun.  Opaque. */
struct pilot_watch;

/* Open a watch on the running pilot of 'p' (a connection of its own,
 * found as 'p' found its pilot: 'p' may be closed first).  args_json
 * (NULL or "": {}), a JSON object:
 *   {"ids": [ID or "ID.N", ...]}  these tasks (an array's id: all its
 *                                 elements), as pilot_call()'s "cancel"
 *   {"all": true}                 every task of the pilot, those
 *                                 submitted later too
 *   {}                            none yet: pilot_watch_add() them, or
 *                                 give the token to pilot_submit_opts()
 * and optionally "token": the token of a watch to come back to (one
 * another process or struct pilot opened: the same key's), with
 * "after": the last end seq that one had (pilot_watch_last_seq()):
 * the ends of its tasks after it are pushed again, in order, then the
 * new ones.  Without "after", a new watch gives the ends from now on (a
 * task that has ended already is not given: read it with "show").  A
 * resumed watch that pilotd no longer has (it expired 10 minutes after
 * its last client went, or pilotd restarted) is made again from "ids"
 * or "all" if given, else ENOENT.  Returns the watch
 * (pilot_watch_close()), or NULL: EINVAL (not JSON, an unknown field, a
 * bad id or token, "ids" with "all", "after" without "token"), ENOTCONN
 * (the pilot does not run: 'p' reads its state database), ENOENT (no
 * such task, no such watch to resume), EACCES (another key's watch),
 * E2BIG, EMFILE (pilotd's limits: 1,000,000 tasks a watch, 1,024
 * watches, 64 a key), ETIMEDOUT. */
struct pilot_watch *pilot_watch_open(struct pilot *p, const char *args_json,
                                     struct pilot_error *err);

/* Add tasks to the watch: ids_json a JSON array of ids (ID, or "ID.N")
 * as in pilot_call()'s "cancel".  A task that has ended already is not
 * given (read it with "show").  0, or -1: EINVAL, ENOENT (no such
 * task), E2BIG, ENOTCONN, ETIMEDOUT. */
int pilot_watch_add(struct pilot_watch *w, const char *ids_json,
                    struct pilot_error *err);

/* The watch's token (16 to 64 of A-Z a-z 0-9 _ -): borrowed, valid until
 * pilot_watch_close().  Give it as "watch" to pilot_submit_opts() so the
 * tasks are watched from their submit on, or as "token" to
 * pilot_watch_open() to come back to the watch from elsewhere. */
const char *pilot_watch_token(const struct pilot_watch *w);

/* Wait up to timeout_ms (0: take only what has come; < 0: no limit) for
 * ends.  Returns 1 with *ends_json (pilot_free()):
 *   {"ends": [{"seq": S, "id": ID, "state": "done" | "failed" |
 *     "canceled" | "timeout", "exit_code": N | null, "signal": N | null,
 *     "end_time": T (s since the epoch), "reason": "..." | null,
 *     "result": "<base64>" | null}, ...], "pending": N | null,
 *    "last_seq": S}
 * the ends in ascending seq, each given once; "result": a Python call's
 * result pickle (its value if "done", (exception, traceback) if
 * "failed") when it is at most 4 KiB and stored inline, else null (ask
 * with the "results" request); "pending": the watch's
 * tasks that had not ended (or whose end was not pushed yet) when
 * pilotd last said, null before it said; "last_seq": the last end's
 * seq.  0 when the time passed with nothing (*ends_json NULL), -1 on
 * failure (*ends_json NULL; ends taken before it are given by the next
 * call).  The watch reconnects and resumes by itself: after a lost
 * connection, or when pilotd was killed and started again (a local
 * pilot's on another port too) it asks pilotd for what came after its
 * last end, and makes the watch again if pilotd lost it: nothing is
 * lost, nothing given twice (asking pilotd again may hold a call up to
 * one request's timeout, pilot_open()'s).  errno: ENOTCONN (the pilot does not run:
 * a later call asks again), EACCES, ENOENT (a resumed watch that pilotd
 * lost, with nothing to make it again from), ENOMEM. */
int pilot_watch_next(struct pilot_watch *w, int timeout_ms, char **ends_json,
                     struct pilot_error *err);

/* The seq of the last end pilot_watch_next() gave (at open: pilotd's
 * last seq then, or the "after" resumed from): what to resume with. */
uint64_t pilot_watch_last_seq(const struct pilot_watch *w);

/* The watch's tasks not ended (or whose end was not given yet) as
 * pilotd last said; UINT64_MAX: unknown.  After a submit into the watch
 * (pilot_submit_opts()) pilotd is asked, so that its tasks are counted
 * (at least 1 if it does not answer: pilot_watch_next() says why). */
uint64_t pilot_watch_pending(const struct pilot_watch *w);

/* Close the watch and free 'w'; NULL is ignored.  unwatch != 0 also
 * drops it in pilotd; 0 leaves it there for a resume (its ends are kept
 * for it) until it expires, 10 minutes later.  Preserves errno. */
void pilot_watch_close(struct pilot_watch *w, int unwatch);

/* A reader of a task's output, as 'pilot logs' reads it: the task's
 * files in the pilot directory, or, when it has none, the frames of it
 * in the nodes' journals (--output journal).  No request is sent.
 * Opaque; one thread at a time. */
struct pilot_logs;

/* Read stream 'stream' (PILOT_STDOUT or PILOT_STDERR) of attempt
 * 'attempt' (0: the last, show's "attempts", or 1 before it ran) of
 * the task 'task_json' describes: its object as "show" or "list"
 * gives it (its "id", "ranks", "comm", "fn", "pool" and "attempts"
 * are read).  'rank' >= 0: that rank's output alone, as it wrote it;
 * -1: every rank's, merged by whole lines (rank 0's, then rank 1's,
 * ... from files; in the order written on each node from a journal).
 * flags: PILOT_LOGS_LABEL puts "R: " before each line.  Returns the
 * reader (pilot_logs_close()), or NULL: EINVAL (bad JSON, no id, a
 * bad stream, a rank the task does not have), ENOMEM. */
struct pilot_logs *pilot_logs_open(const struct pilot *p,
                                   const char *task_json, unsigned attempt,
                                   int stream, long rank, int flags,
                                   struct pilot_error *err);

/* What was written since the last call: *data (pilot_free(); NULL when
 * nothing came) holding *len bytes.  'final' != 0 when the task has
 * ended: what is left of a rank's last line comes too, with a newline
 * when the ranks are merged.  Returns 1 when the task has output (a
 * file, or frames in a journal), 0 when it has none yet, -1 with err
 * (a file or journal that cannot be read). */
int pilot_logs_read(struct pilot_logs *l, int final, char **data,
                    size_t *len, struct pilot_error *err);

/* Where the output is, as a JSON array of paths (pilot_free()): the
 * journal segments (DIR/journal/NODE/SEQ.pj) its frames were read from
 * so far, once pilot_logs_read() found it in the journals; else its
 * files (each rank's for a task whose ranks write apart), which may
 * not exist yet.  0, or -1 (ENOMEM). */
int pilot_logs_paths(const struct pilot_logs *l, char **paths_json,
                     struct pilot_error *err);

/* Close the reader and free 'l'; NULL is ignored. */
void pilot_logs_close(struct pilot_logs *l);
/* cdef: end */

#ifdef __cplusplus
}
#endif

#endif /* !PILOT_H */
