/* lib/pilot.c - libpilot: connections, submits, log paths */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/spec.h"
#include "client/spec_py.h"
#include "client/submit.h"
#include "lib/pilot_private.h"
#include "proto/pilotdir.h"
#include "proto/watchmsg.h"

/* libslurm keeps its state in globals: slurm_init() reads the Slurm
 * configuration into them and slurm_fini() frees them for every user,
 * and neither is safe from two threads at once.  So the process has
 * one session, started by the first look at a Slurm pilot that does
 * not answer on its port (client/pilot.c), lent to one struct pilot at
 * a time under 'slurm_lock', and never ended (the library may be
 * unloaded while another thread's struct pilot still runs). */
static pthread_mutex_t slurm_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pl_slurm *slurm_session;

void pl_lib_slurm_lend(struct pl_find *f)
{
    pthread_mutex_lock(&slurm_lock);
    f->slurm = slurm_session;
}

void pl_lib_slurm_return(struct pl_find *f)
{
    slurm_session = f->slurm;
    f->slurm = NULL;
    pthread_mutex_unlock(&slurm_lock);
}

int pl_lib_fail(struct pilot_error *err, const struct pl_error *e)
{
    int errnum = errno ? errno : EIO;

    if (err) {
        err->errnum = errnum;
        snprintf(err->text, sizeof(err->text), "%s", e->text);
    }
    errno = errnum;
    return -1;
}

/* pl_lib_fail() for spec 'i' of a submit of 'n' ('n' > 1: the text
 * says which, as specs[i] in the caller's array). */
static int fail_spec(struct pilot_error *err, size_t i, size_t n,
                     const struct pl_error *e)
{
    int errnum = errno ? errno : EIO;

    if (n > 1 && err) {
        err->errnum = errnum;
        snprintf(err->text, sizeof(err->text), "specs[%zu]: %s", i, e->text);
        errno = errnum;
        return -1;
    }
    return pl_lib_fail(err, e);
}

int pl_lib_dump(const json_t *j, char **out, struct pl_error *errp)
{
    if (!(*out = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY)))
        return pl_errset(errp, ENOMEM, "out of memory");
    return 0;
}

bool pl_lib_recheck(struct pilot *p)
{
    bool switched;

    pl_lib_slurm_lend(&p->find);
    switched = pl_conn_recheck(p->conn);
    pl_lib_slurm_return(&p->find);
    return switched;
}

int pilot_api_version(void)
{
    return PILOT_API_VERSION;
}

/* Copy 's' into buf (len bytes) for 'what'; 0, or -1 with errp. */
static int copy_arg(const char *what, const char *s, char *buf, size_t len,
                    struct pl_error *errp)
{
    if (!*s || strlen(s) >= len)
        return pl_errset(errp, EINVAL, "%s: '%.64s' is %s", what, s,
                         *s ? "too long" : "empty");
    memcpy(buf, s, strlen(s) + 1);
    return 0;
}

struct pilot *pilot_open(const char *id, const char *home, int timeout_ms,
                         struct pilot_error *err)
{
    struct pl_error e = { { 0 } };
    struct pilot *p;
    int need;

    if (!(p = calloc(1, sizeof(*p)))) {
        errno = ENOMEM;
        pl_errprintf(&e, "out of memory");
        pl_lib_fail(err, &e);
        return NULL;
    }
    pthread_mutex_init(&p->lock, NULL);
    if (pl_find_init(&p->find, &e) < 0)
        goto error;
    /* the environment's strings may change under us: our copies */
    if (!id)
        id = p->find.pilot;
    if (id) {
        if (copy_arg("pilot id", id, p->id, sizeof(p->id), &e) < 0)
            goto error;
        p->find.pilot = p->id;
    }
    if (home) {
        if (copy_arg("pilot home", home, p->home, sizeof(p->home), &e) < 0)
            goto error;
        p->find.home = p->home;
    }
    if (p->find.keys) {
        if (copy_arg("PILOT_KEYS", p->find.keys, p->keys, sizeof(p->keys),
                     &e) < 0)
            goto error;
        p->find.keys = p->keys;
    }
    if (timeout_ms > 0)
        p->find.timeout_ms = timeout_ms;
    /* a pilot named by its id may be read when it no longer runs, as
     * 'pilot ls --pilot ID' does; the one found is a running one */
    need = p->find.pilot ? PL_CONN_READ : PL_CONN_WRITE;
    pl_lib_slurm_lend(&p->find);
    p->conn = pl_conn_open(&p->find, need, &e);
    pl_lib_slurm_return(&p->find);
    if (!p->conn)
        goto error;
    return p;
error:
    pl_lib_fail(err, &e);
    pilot_close(p);
    return NULL;
}

void pilot_close(struct pilot *p)
{
    if (!p)
        return;
    int saved = errno;
    pl_conn_free(p->conn);
    pthread_mutex_destroy(&p->lock);
    free(p);
    errno = saved;
}

const char *pilot_id(const struct pilot *p)
{
    return p->conn->pilot.id;
}

const char *pilot_dir(const struct pilot *p)
{
    return p->conn->pilot.dir;
}

int pilot_is_live(struct pilot *p)
{
    int live;

    pthread_mutex_lock(&p->lock);
    live = p->conn->rpc != NULL;
    pthread_mutex_unlock(&p->lock);
    return live;
}

/* The specs of 'in' (a JSON array of task-file entries) into *specsp
 * (n of them, each checked by pl_spec_check()), a pickled call over
 * 256 KiB staged under the pilot directory 'dir''s inputs/.  0, or -1
 * with err set naming the spec at fault. */
static int build_specs(const json_t *in, const char *dir,
                       struct pl_spec **specsp, struct pilot_error *err)
{
    size_t n = json_array_size(in), built = 0;
    struct pl_spec *specs;
    struct pl_error e;
    char here[PATH_MAX];

    *specsp = NULL;
    if (!getcwd(here, sizeof(here))) {
        pl_errprintf(&e, "cannot get the current directory: %s (give "
                     "each task its cwd)", strerror(errno));
        return pl_lib_fail(err, &e);
    }
    if (!(specs = calloc(n, sizeof(*specs)))) {
        errno = ENOMEM;
        pl_errprintf(&e, "out of memory");
        return pl_lib_fail(err, &e);
    }
    for (; built < n; built++) {
        struct pl_cli_spec b;
        pl_cli_spec_init(&b);
        if (pl_cli_spec_entry(&b, json_array_get(in, built), here, &e) < 0) {
            pl_cli_spec_clear(&b);
            goto error;
        }
        pl_cli_spec_take(&b, &specs[built]);
        if (pl_cli_spec_py_stage(&specs[built], dir, &e) < 0
            || pl_spec_check(&specs[built], &e) < 0) {
            pl_cli_spec_py_unstage(&specs[built], 1, 0);
            pl_spec_clear(&specs[built]);
            goto error;
        }
    }
    *specsp = specs;
    return 0;
error:
    fail_spec(err, built, n, &e);
    pl_cli_spec_py_unstage(specs, built, 0); /* preserves errno */
    for (size_t k = 0; k < built; k++)
        pl_spec_clear(&specs[k]); /* preserves errno */
    free(specs);
    return -1;
}

static void free_specs(struct pl_spec *specs, size_t n)
{
    for (size_t i = 0; specs && i < n; i++)
        pl_spec_clear(&specs[i]);
    free(specs);
}

/* A failed submit's error, naming the spec pilotd refused when it can:
 * its "task K: " is the K-th spec of the request 'f' describes. */
static int submit_failed(struct pilot_error *err, size_t n,
                         const struct pl_submit_fail *f,
                         const struct pl_error *e)
{
    struct pl_error rest;
    unsigned k;
    int used = 0;

    if (f->bad_reply)
        return pl_lib_fail(err, e);
    if (sscanf(e->text, "task %u: %n", &k, &used) == 1 && used > 0 && k >= 1
        && k <= f->m) {
        snprintf(rest.text, sizeof(rest.text), "%s", e->text + used);
        return fail_spec(err, f->off + k - 1, n, &rest);
    }
    if (f->m == 1)
        return fail_spec(err, f->off, n, e);
    return pl_lib_fail(err, e);
}

/* The options of pilot_submit_opts() ('opts' NULL: none) into 'watch'
 * (a token, or "").  0, or -1 with errp (EINVAL). */
static int submit_opts(const char *opts, char *watch, size_t len,
                       struct pl_error *errp)
{
    json_t *o, *v;
    json_error_t jerr;
    const char *k;
    int rc = -1;

    watch[0] = '\0';
    if (!opts || !*opts)
        return 0;
    if (!(o = json_loads(opts, JSON_REJECT_DUPLICATES, &jerr)))
        return pl_errset(errp, EINVAL, "submit options: not JSON: %s",
                         jerr.text);
    if (!json_is_object(o)) {
        pl_errset(errp, EINVAL, "submit options: want a JSON object");
        goto done;
    }
    json_object_foreach(o, k, v) {
        if (strcmp(k, "watch")) {
            pl_errset(errp, EINVAL, "submit options: unknown field '%.40s' "
                      "(watch)", k);
            goto done;
        }
        if (json_is_null(v))
            continue;
        if (!json_is_string(v) || !pl_watch_token_ok(json_string_value(v))
            || json_string_length(v) >= len) {
            pl_errset(errp, EINVAL, "submit options: 'watch' must be a "
                      "watch's token (pilot_watch_token())");
            goto done;
        }
        snprintf(watch, len, "%s", json_string_value(v));
    }
    rc = 0;
done:
    json_decref(o);
    return rc;
}

int pilot_submit(struct pilot *p, const char *specs_json, char **reply_json,
                 struct pilot_error *err)
{
    return pilot_submit_opts(p, specs_json, NULL, reply_json, err);
}

int pilot_submit_opts(struct pilot *p, const char *specs_json,
                      const char *opts_json, char **reply_json,
                      struct pilot_error *err)
{
    struct pl_error e = { { 0 } };
    struct pl_submit_fail f;
    struct pl_spec *specs = NULL;
    json_t *in = NULL, *ids = NULL, *out = NULL;
    json_error_t jerr;
    char watch[PL_WATCH_TOKEN_MAX + 1];
    size_t n = 0;
    int rc = -1;

    if (reply_json)
        *reply_json = NULL;
    if (!p || !specs_json || !reply_json) {
        pl_errset(&e, EINVAL, "pilot_submit: a NULL argument");
        return pl_lib_fail(err, &e);
    }
    if (submit_opts(opts_json, watch, sizeof(watch), &e) < 0)
        return pl_lib_fail(err, &e);
    if (!(in = json_loads(specs_json, JSON_REJECT_DUPLICATES, &jerr))) {
        pl_errset(&e, EINVAL, "specs: not JSON: %s", jerr.text);
        return pl_lib_fail(err, &e);
    }
    if (!json_is_array(in) || !(n = json_array_size(in))) {
        json_decref(in);
        pl_errset(&e, EINVAL, "specs: want a JSON array of task objects");
        return pl_lib_fail(err, &e);
    }
    if (build_specs(in, p->conn->pilot.dir, &specs, err) < 0) {
        json_decref(in);
        return -1;
    }
    json_decref(in);
    if (!(ids = json_array())) {
        pl_errset(&e, ENOMEM, "out of memory");
        pl_lib_fail(err, &e);
        goto done;
    }
    pthread_mutex_lock(&p->lock);
    rc = pl_submit_specs(p->conn, specs, n, watch[0] ? watch : NULL, ids,
                         NULL, NULL, &f, &e);
    pthread_mutex_unlock(&p->lock);
    if (rc < 0) {
        /* what pilotd refused it did not store (a slice's array keeps
         * the elements sent before); what it did not answer it may have */
        size_t unsent = f.bad_reply || errno == ETIMEDOUT
                            ? n : f.off + (f.slice ? 1 : 0);
        submit_failed(err, n, &f, &e);
        pl_cli_spec_py_unstage(specs, n, unsent); /* preserves errno */
    }
    if (watch[0] && json_array_size(ids) > 0)
        pl_lib_watch_noted(watch, ids); /* preserves errno */
    /* the ids queued, all of them or those before the failed request */
    if ((rc == 0 || json_array_size(ids) > 0)
        && (!(out = json_pack("{s:O}", "ids", ids))
            || pl_lib_dump(out, reply_json, &e) < 0)) {
        if (rc == 0) {
            errno = ENOMEM;
            pl_errprintf(&e, "out of memory");
            pl_lib_fail(err, &e);
        }
        rc = -1;
    }
done:
    json_decref(out);
    json_decref(ids);
    free_specs(specs, n);
    return rc;
}

int pilot_log_path(const struct pilot *p, uint64_t id, unsigned attempt,
                   int stream, char *buf, size_t len)
{
    if (!p || !id || !buf || !len
        || (stream != PILOT_STDOUT && stream != PILOT_STDERR)) {
        errno = EINVAL;
        return -1;
    }
    /* N.B. pl_path_task_log() sets errno ENAMETOOLONG itself */
    return pl_path_task_log(p->conn->pilot.dir, (unsigned long long)id,
                            attempt, stream == PILOT_STDERR, false, buf, len);
}

void pilot_free(void *ptr)
{
    free(ptr);
}
