/* client/spec_py.c - pilot submit's Python calls: --py-call, --input */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/spec.h"
#include "client/spec_py.h"
#include "proto/msg.h"
#include "proto/pilotdir.h"
#include "proto/strv.h"

int pl_cli_spec_py(struct pl_cli_spec *b, const char *name, const char *arg,
                   struct pl_error *errp)
{
    struct pl_spec *s = &b->spec;
    char **dst = NULL;

    if (!strcmp(name, "py-call")) {
        if (b->fn_name && s->fn != PL_FN_PYCALL)
            return pl_errset(errp, EINVAL, "--py-call runs in a warm worker "
                             "of its agent: no --fn or --py with it");
        if (!*arg || strlen(arg) > PL_SPEC_MAX_ARG || !pl_utf8_str(arg))
            return pl_errset(errp, EINVAL, "--py-call: want "
                             "MODULE:FUNCTION");
        dst = &b->fn_name;
    }
    else if (!strcmp(name, "py-prelude")) {
        if (strlen(arg) > PL_SPEC_MAX_PRELUDE || !pl_utf8_str(arg))
            return pl_errset(errp, EINVAL, "--py-prelude: at most %d bytes "
                             "of UTF-8", PL_SPEC_MAX_PRELUDE);
        dst = &s->py_prelude;
    }
    else {
        if (!*arg || strlen(arg) > PL_SPEC_MAX_PYTHON || !pl_utf8_str(arg))
            return pl_errset(errp, EINVAL, "--python: want the "
                             "interpreter's name or path");
        dst = &s->python;
    }
    char *c = strdup(arg);
    if (!c) {
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    free(*dst);
    *dst = c;
    s->fn = PL_FN_PYCALL;
    return 0;
}

/* Read all of 'fd' (at most 'max' bytes, one more tells it is larger)
 * into *buf and *len.  0, or -1 with errno. */
static int slurp(int fd, size_t max, unsigned char **buf, size_t *len)
{
    size_t cap = 64 * 1024, n = 0;
    unsigned char *b = malloc(cap);
    ssize_t r;

    if (!b)
        return -1;
    while (n <= max) {
        if (n == cap) {
            unsigned char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                return -1;
            }
            b = nb;
            cap *= 2;
        }
        if ((r = read(fd, b + n, cap - n)) < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            free(b);
            return -1;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    *buf = b;
    *len = n;
    return 0;
}

/* Write 'len' bytes at 'p' to a new file under DIR/inputs/ (made 0700),
 * 0600, never through a link, synced; its path into 'path'.  0, or -1
 * with errp. */
static int stage(const char *dir, const unsigned char *p, size_t len,
                 char *path, size_t plen, struct pl_error *errp)
{
    unsigned char rnd[8];
    int fd;

    snprintf(path, plen, "%s/inputs", dir);
    if (pl_mkdirs(path, 0700) < 0)
        return pl_errprintf(errp, "%s: %s", path, strerror(errno));
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        return pl_errprintf(errp, "getrandom: %s", strerror(errno));
    snprintf(path, plen, "%s/inputs/%02x%02x%02x%02x%02x%02x%02x%02x.pkl",
             dir, rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6],
             rnd[7]);
    if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                   0600)) < 0)
        return pl_errprintf(errp, "%s: %s", path, strerror(errno));
    for (size_t off = 0; off < len;) {
        ssize_t w = write(fd, p + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            pl_errprintf(errp, "%s: %s", path, strerror(errno));
            close(fd);
            unlink(path);
            return -1;
        }
        off += (size_t)w;
    }
    if (fsync(fd) < 0 || close(fd) < 0) {
        pl_errprintf(errp, "%s: %s", path, strerror(errno));
        unlink(path);
        return -1;
    }
    return 0;
}

int pl_cli_spec_py_stage(struct pl_spec *s, const char *dir,
                         struct pl_error *errp)
{
    char path[PL_PATH_MAX + 64];
    char *copy;

    if (!s->input || s->ninput <= PL_SPEC_MAX_INPUT)
        return 0;
    if (!dir)
        return pl_errset(errp, E2BIG, "the pickled call is %zu bytes: over "
                         "%d (256 KiB) it goes to a file under the pilot's "
                         "inputs/, and no pilot is known here", s->ninput,
                         PL_SPEC_MAX_INPUT);
    if (stage(dir, s->input, s->ninput, path, sizeof(path), errp) < 0)
        return -1;
    if (!(copy = strdup(path))) {
        unlink(path);
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    free(s->input);
    s->input = NULL;
    s->ninput = 0;
    s->input_file = copy;
    return 0;
}

/* The bytes of FILE ('-': stdin) as the pickled call of 's', any size
 * up to PL_SPEC_MAX_INPUT_FILE ('what' names it in an error).  0, or -1
 * with errp. */
static int read_input(struct pl_spec *s, const char *what, const char *file,
                      struct pl_error *errp)
{
    unsigned char *buf = NULL;
    size_t len;
    int fd, rc = -1;

    if ((fd = strcmp(file, "-") ? open(file, O_RDONLY | O_CLOEXEC) : 0) < 0)
        return pl_errprintf(errp, "%s: cannot open %s: %s", what, file,
                            strerror(errno));
    if (slurp(fd, PL_SPEC_MAX_INPUT_FILE, &buf, &len) < 0) {
        pl_errprintf(errp, "%s: cannot read %s: %s", what, file,
                     strerror(errno));
        goto done;
    }
    if (len > PL_SPEC_MAX_INPUT_FILE) {
        pl_errset(errp, E2BIG, "%s %s: more than %llu bytes (256 MiB): "
                  "a pickled call may be no larger; pass a path to the data "
                  "instead", what, file,
                  (unsigned long long)PL_SPEC_MAX_INPUT_FILE);
        goto done;
    }
    if (len == 0) {
        pl_errset(errp, EINVAL, "%s %s: empty", what, file);
        goto done;
    }
    free(s->input);
    s->input = buf; /* staged by pl_cli_spec_py_stage() when large */
    s->ninput = len;
    s->fn = PL_FN_PYCALL;
    buf = NULL;
    rc = 0;
done:
    free(buf);
    if (fd > 0)
        close(fd);
    return rc;
}

int pl_cli_spec_py_input(struct pl_cli_spec *b, const char *file,
                         const char *dir, struct pl_error *errp)
{
    if (read_input(&b->spec, "--input", file, errp) < 0)
        return -1;
    return pl_cli_spec_py_stage(&b->spec, dir, errp);
}

/* ------------------------------------------------------------ entries */

static int wrong(const char *key, const char *want, struct pl_error *errp)
{
    return pl_errset(errp, EINVAL, "field '%s': want %s", key, want);
}

/* "input": the pickled call in base64 (at most 256 MiB decoded). */
static int entry_input(struct pl_spec *s, const json_t *v,
                       struct pl_error *errp)
{
    unsigned char *buf;
    size_t len;

    if (!json_is_string(v))
        return wrong("input", "the pickled call in base64", errp);
    if (json_string_length(v) / 4 * 3 > PL_SPEC_MAX_INPUT_FILE)
        return pl_errset(errp, E2BIG, "field 'input': more than %llu bytes "
                         "(256 MiB): a pickled call may be no larger; pass "
                         "a path to the data instead",
                         (unsigned long long)PL_SPEC_MAX_INPUT_FILE);
    if (pl_b64_decode(json_string_value(v), &buf, &len) < 0) {
        if (errno == ENOMEM)
            return pl_errprintf(errp, "out of memory");
        return wrong("input", "the pickled call in base64 (A-Z a-z 0-9 + /, "
                     "'=' padded, no line breaks)", errp);
    }
    if (len == 0) {
        free(buf);
        return pl_errset(errp, EINVAL, "field 'input': empty");
    }
    free(s->input);
    s->input = buf;
    s->ninput = len;
    s->fn = PL_FN_PYCALL;
    return 0;
}

/* "refs": task ids; each joins 'after' (:ok) when it is not there. */
static int entry_refs(struct pl_cli_spec *b, const json_t *v,
                      struct pl_error *errp)
{
    struct pl_spec *s = &b->spec;
    size_t n = json_array_size(v), i;
    json_t *x;

    if (!json_is_array(v) || n == 0)
        return wrong("refs", "a list of task ids (Python calls)", errp);
    if (n > PL_SPEC_MAX_REFS)
        return pl_errset(errp, EINVAL, "field 'refs': %zu calls; at most %d",
                         n, PL_SPEC_MAX_REFS);
    free(s->refs);
    s->nrefs = 0;
    if (!(s->refs = calloc(n, sizeof(*s->refs)))) {
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    json_array_foreach(v, i, x) {
        if (!json_is_integer(x) || json_integer_value(x) <= 0)
            return wrong("refs", "a list of task ids (Python calls)", errp);
        s->refs[s->nrefs++] = (uint64_t)json_integer_value(x);
    }
    return 0;
}

void pl_cli_spec_py_unstage(const struct pl_spec *specs, size_t n,
                            size_t from)
{
    int saved = errno;

    for (size_t i = from; i < n; i++)
        if (specs[i].input_file)
            (void)unlink(specs[i].input_file);
    errno = saved;
}

int pl_cli_spec_py_entry(struct pl_cli_spec *b, const char *key,
                         const json_t *v, const char *here,
                         struct pl_error *errp)
{
    char path[PL_PATH_MAX + 8];
    const char *f;

    if (!strcmp(key, "input"))
        return entry_input(&b->spec, v, errp);
    if (!strcmp(key, "refs"))
        return entry_refs(b, v, errp);
    if (!json_is_string(v))
        return wrong(key, "a string", errp);
    if (!strcmp(key, "input_file")) {
        /* read here as --input reads it: the file is the client's */
        f = json_string_value(v);
        if (!*f)
            return wrong(key, "a file's path", errp);
        if (f[0] != '/'
            && (size_t)snprintf(path, sizeof(path), "%s/%s", here, f)
                   >= sizeof(path)) {
            errno = ENAMETOOLONG;
            return pl_errprintf(errp, "field 'input_file': path too long");
        }
        return read_input(&b->spec, "input_file", f[0] == '/' ? f : path,
                          errp);
    }
    return pl_cli_spec_py(b, !strcmp(key, "py_call") ? "py-call"
                             : !strcmp(key, "py_prelude") ? "py-prelude"
                                                          : "python",
                          json_string_value(v), errp);
}

int pl_cli_spec_py_done(struct pl_cli_spec *b, const json_t *entry,
                        struct pl_error *errp)
{
    struct pl_spec *s = &b->spec;
    bool input = json_object_get(entry, "input") != NULL;
    bool file = json_object_get(entry, "input_file") != NULL;
    const char *label;

    if (input && file)
        return pl_errset(errp, EINVAL, "input and input_file: give one of "
                         "them");
    if ((input || file) && json_object_get(entry, "py_call"))
        return pl_errset(errp, EINVAL, "py_call and %s: give one of them "
                         "(the pickled call holds its function)",
                         input ? "input" : "input_file");
    if (s->nrefs && s->fn != PL_FN_PYCALL)
        return pl_errset(errp, EINVAL, "refs: only a Python call (py_call, "
                         "input or input_file) receives other calls' values");
    if (s->fn != PL_FN_PYCALL)
        return 0;
    if (!input && !file && !json_object_get(entry, "py_call"))
        return pl_errset(errp, EINVAL, "py_prelude and python go with "
                         "py_call, input or input_file");
    if (s->pool || json_object_get(entry, "fn") || json_object_get(entry, "py"))
        return pl_errset(errp, EINVAL, "a Python call (py_call, input, "
                         "input_file) runs in a warm worker of its agent: "
                         "no pool, fn or py");
    /* each ref is waited for, with its value: after ID:ok */
    for (uint32_t i = 0; i < s->nrefs; i++) {
        char id[24];
        bool there = false;
        for (uint32_t k = 0; k < s->nafter; k++)
            there |= !s->after[k].name && !s->after[k].elem
                     && s->after[k].id == s->refs[i];
        snprintf(id, sizeof(id), "%llu", (unsigned long long)s->refs[i]);
        if (!there && pl_cli_spec_flag(b, "after", id, errp) < 0)
            return -1;
    }
    if (s->argv || (!input && !file))
        return 0;
    /* the command words of a pickled call are a label: its file's name,
     * else "input" */
    label = file ? json_string_value(json_object_get(entry, "input_file"))
                 : "input";
    if (strrchr(label, '/'))
        label = strrchr(label, '/') + 1;
    if (!(s->argv = calloc(2, sizeof(char *)))
        || !(s->argv[0] = strdup(*label ? label : "input"))) {
        errno = ENOMEM;
        return pl_errprintf(errp, "out of memory");
    }
    return 0;
}
