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

/* (pilot_watch_*: the pushed ends of tasks come with the subscription,
 * messages 112 and 113: not in this version yet.) */
/* cdef: end */

#ifdef __cplusplus
}
#endif

#endif /* !PILOT_H */
