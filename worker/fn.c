/* worker/fn.c - C functions of a pool: "LIB.so:SYMBOL" to a pointer,
 * each library loaded once per worker */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proto/strv.h"
#include "worker/fn.h"

struct lib {
    char *key;      /* the real path, or the bare name dlopen() searched */
    void *handle;   /* never closed (pl_fns_get()) */
};

struct pl_fns {
    struct lib *libs;
    size_t n, cap;
};

struct pl_fns *pl_fns_new(void)
{
    return calloc(1, sizeof(struct pl_fns));
}

void pl_fns_free(struct pl_fns *f)
{
    int e = errno;

    if (f) {
        for (size_t i = 0; i < f->n; i++)
            free(f->libs[i].key);
        free(f->libs);
        free(f);
    }
    errno = e;
}

/* The key of library 'lib' for a call in 'cwd': a new string, or NULL
 * with errp */
static char *lib_key(const char *lib, const char *cwd, struct pl_error *errp)
{
    char here[PATH_MAX], joined[2 * PATH_MAX + 2], real[PATH_MAX];
    const char *path = lib;
    bool bare = !strchr(lib, '/');

    if (lib[0] != '/') {
        if (!cwd) {
            if (!getcwd(here, sizeof(here))) {
                pl_errprintf(errp, "getcwd: %s", strerror(errno));
                return NULL;
            }
            cwd = here;
        }
        snprintf(joined, sizeof(joined), "%s/%s", cwd, lib);
        path = joined;
        if (bare && access(path, F_OK) < 0)
            return strdup(lib); /* for dlopen()'s search */
    }
    if (!realpath(path, real)) {
        int e = errno;
        pl_errprintf(errp, "%s: %s", lib, strerror(e));
        errno = e;
        return NULL;
    }
    return strdup(real);
}

static void *lib_open(struct pl_fns *f, const char *lib, const char *cwd,
                      struct pl_error *errp)
{
    char *key;
    void *h;

    if (!(key = lib_key(lib, cwd, errp)))
        return NULL;
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->libs[i].key, key)) {
            free(key);
            return f->libs[i].handle;
        }
    if (pl_grow(&f->libs, &f->cap, f->n, 1, sizeof(*f->libs)) < 0) {
        free(key);
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    if (!(h = dlopen(key, RTLD_NOW | RTLD_LOCAL))) {
        const char *why = dlerror();
        pl_errprintf(errp, "%s", why ? why : "dlopen failed");
        free(key);
        errno = ENOENT;
        return NULL;
    }
    f->libs[f->n].key = key;
    f->libs[f->n].handle = h;
    f->n++;
    return h;
}

pilot_fn_t *pl_fns_get(struct pl_fns *f, const char *spec, const char *cwd,
                       struct pl_error *errp)
{
    const char *colon = strrchr(spec, ':');
    pilot_fn_t *fn;
    char *lib;
    void *h, *sym;

    if (!colon || colon == spec || !colon[1]) {
        errno = EINVAL;
        pl_errprintf(errp, "'%s' is not LIB:SYMBOL", spec);
        return NULL;
    }
    if (!(lib = strndup(spec, (size_t)(colon - spec)))) {
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    h = lib_open(f, lib, cwd, errp);
    free(lib);
    if (!h)
        return NULL;
    dlerror();
    if (!(sym = dlsym(h, colon + 1))) {
        const char *why = dlerror();
        pl_errprintf(errp, "%s", why ? why : "symbol is NULL");
        errno = ESRCH;
        return NULL;
    }
    /* POSIX: a dlsym() result may be converted to a function pointer */
    *(void **)&fn = sym;
    return fn;
}
