/* client/taskfile.c - pilot submit --file: a JSONL or YAML task file */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <yaml.h>

#include "client/spec.h"
#include "client/taskfile.h"
#include "proto/strv.h"

/* Nesting a task entry never needs; a budget of converted YAML nodes;
 * and of those converted more than once, through an alias, beyond the
 * document's own: aliases of aliases multiply a file of 500 bytes into
 * 10^10 values (fuzz_taskfile timed out on one: 20 M of them, the
 * budget before, take 12 s and 2 GiB).  A file without aliases converts
 * each node once, so it meets only MAX_NODES; one with them may convert
 * ALIAS_PER_NODE times its own nodes, plus ALIAS_NODES: 100,000 tasks
 * that each name a 20-entry env by alias (4 nodes of their own, 41
 * through the alias) fit, and a file of 4 KiB stays under about 250,000
 * values. */
#define MAX_DEPTH 64
#define MAX_NODES 20000000
#define ALIAS_PER_NODE 64
#define ALIAS_NODES 100000

/* A file being read. */
struct reader {
    struct pl_taskfile *tf;
    size_t speccap, linecap;    /* room in tf->specs, tf->lines */
    const char *here;
    size_t *line;               /* the line at fault */
    struct pl_error *errp;
};

static int fail(size_t *line, size_t at, struct pl_error *errp,
                const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* A fault at line 'at' (0: of the whole file): errno EINVAL. */
static int fail(size_t *line, size_t at, struct pl_error *errp,
                const char *fmt, ...)
{
    va_list ap;

    *line = at;
    if (errp) {
        va_start(ap, fmt);
        vsnprintf(errp->text, sizeof(errp->text), fmt, ap);
        va_end(ap);
    }
    errno = EINVAL;
    return -1;
}

static int nomem(size_t *line, struct pl_error *errp)
{
    fail(line, 0, errp, "out of memory");
    errno = ENOMEM;
    return -1;
}

bool pl_taskfile_is_yaml(const char *path)
{
    size_t n = strlen(path);

    return (n > 5 && !strcmp(path + n - 5, ".yaml"))
           || (n > 4 && !strcmp(path + n - 4, ".yml"));
}

void pl_taskfile_clear(struct pl_taskfile *tf)
{
    int saved = errno;

    for (size_t i = 0; i < tf->n; i++)
        pl_spec_clear(&tf->specs[i]);
    free(tf->specs);
    free(tf->lines);
    memset(tf, 0, sizeof(*tf));
    errno = saved;
}

/* The entry 'obj' of line 'at' as the next spec. */
static int add_entry(struct reader *r, const json_t *obj, size_t at)
{
    struct pl_taskfile *tf = r->tf;
    struct pl_cli_spec b;

    pl_cli_spec_init(&b);
    if (pl_cli_spec_entry(&b, obj, r->here, r->errp) < 0) {
        pl_cli_spec_clear(&b);
        *r->line = at;
        return -1;
    }
    if (pl_grow(&tf->specs, &r->speccap, tf->n, 1, sizeof(*tf->specs)) < 0
        || pl_grow(&tf->lines, &r->linecap, tf->n, 1, sizeof(*tf->lines))
               < 0) {
        pl_cli_spec_clear(&b);
        return nomem(r->line, r->errp);
    }
    pl_cli_spec_take(&b, &tf->specs[tf->n]);
    tf->lines[tf->n++] = at;
    return 0;
}

/* ------------------------------------------------------------ JSONL */

static int read_jsonl(FILE *fp, struct reader *r)
{
    char *buf = NULL;
    size_t bufcap = 0, at = 0;
    ssize_t len;
    int rc = -1;

    while ((len = getline(&buf, &bufcap, fp)) >= 0) {
        json_error_t je;
        json_t *obj;
        size_t sp = strspn(buf, " \t\r\n");
        at++;
        if (buf[sp] == '\0' || buf[sp] == '#')
            continue;
        if (!(obj = json_loadb(buf, (size_t)len, 0, &je))) {
            fail(r->line, at, r->errp, "not JSON: %s", je.text);
            goto done;
        }
        int k = add_entry(r, obj, at);
        json_decref(obj);
        if (k < 0)
            goto done;
    }
    if (ferror(fp)) {
        int saved = errno;
        fail(r->line, 0, r->errp, "%s", strerror(saved));
        errno = saved;
        goto done;
    }
    rc = 0;
done:
    free(buf);
    return rc;
}

/* ------------------------------------------------------------ YAML */

struct conv {
    yaml_document_t *doc;
    size_t nodes, budget;       /* converted, and the most there may be */
    size_t *line;
    struct pl_error *errp;
};

static bool is_any(const char *s, const char *const *words)
{
    for (size_t i = 0; words[i]; i++)
        if (!strcmp(s, words[i]))
            return true;
    return false;
}

/* A plain scalar as the JSON value it reads as. */
static json_t *plain(const char *s, size_t len)
{
    static const char *const nulls[] = { "", "~", "null", "Null", "NULL",
                                         NULL };
    static const char *const trues[] = { "true", "True", "TRUE", NULL };
    static const char *const falses[] = { "false", "False", "FALSE", NULL };
    char *end;

    if (strlen(s) != len) /* a NUL inside: keep it a string (refused) */
        return json_stringn(s, len);
    if (is_any(s, nulls))
        return json_null();
    if (is_any(s, trues))
        return json_true();
    if (is_any(s, falses))
        return json_false();
    if (strpbrk(s, "0123456789") && strspn(s, "+-0123456789") == len) {
        errno = 0;
        long long v = strtoll(s, &end, 10);
        if (!errno && *end == '\0' && end != s)
            return json_integer(v);
    }
    if (strpbrk(s, "0123456789") && strspn(s, "+-.0123456789eE") == len) {
        errno = 0;
        double v = strtod(s, &end);
        if (!errno && *end == '\0' && isfinite(v))
            return json_real(v);
    }
    return json_stringn(s, len);
}

/* Fields whose values are text, however they read: a command 'true',
 * a tag '3', a name 'null' stay what was written. */
static bool text_field(const char *key)
{
    static const char *const keys[] = { "name", "cmd", "argv", "cwd",
                                        "env", "comm", "launcher", "after",
                                        "tags", "py_call", "input",
                                        "input_file", "py_prelude",
                                        "python", NULL };

    return is_any(key, keys);
}

static unsigned long line_of(const yaml_node_t *n)
{
    return (unsigned long)n->start_mark.line + 1;
}

static json_t *convert(struct conv *c, yaml_node_t *n, int depth, bool text);

static json_t *convert_map(struct conv *c, yaml_node_t *n, int depth,
                           bool text)
{
    json_t *out = json_object();

    if (!out) {
        nomem(c->line, c->errp);
        return NULL;
    }
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
         p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
        if (!k || k->type != YAML_SCALAR_NODE
            || strlen((const char *)k->data.scalar.value)
                   != k->data.scalar.length) {
            fail(c->line, k ? line_of(k) : line_of(n), c->errp,
                 "a key that is not a string");
            goto error;
        }
        const char *key = (const char *)k->data.scalar.value;
        if (json_object_get(out, key)) {
            fail(c->line, line_of(k), c->errp, "'%.40s' is given twice", key);
            goto error;
        }
        json_t *v = convert(c, yaml_document_get_node(c->doc, p->value),
                            depth + 1, text || (depth == 1
                                                && text_field(key)));
        if (!v)
            goto error;
        if (json_object_set_new(out, key, v) < 0) {
            /* set_new took v: the key was not UTF-8 */
            fail(c->line, line_of(k), c->errp, "a key that is not UTF-8 "
                 "text");
            goto error;
        }
    }
    return out;
error:
    json_decref(out);
    return NULL;
}

/* 'n' as JSON; 'text': plain scalars stay strings. */
static json_t *convert(struct conv *c, yaml_node_t *n, int depth, bool text)
{
    json_t *out;

    if (depth > MAX_DEPTH) {
        fail(c->line, line_of(n), c->errp, "nested deeper than %d",
             MAX_DEPTH);
        return NULL;
    }
    if (++c->nodes > c->budget) {
        fail(c->line, line_of(n), c->errp, "more than %zu values: aliases "
             "that expand too far?", c->budget);
        return NULL;
    }
    switch (n->type) {
    case YAML_SCALAR_NODE: {
        const char *s = (const char *)n->data.scalar.value;
        size_t len = n->data.scalar.length;
        out = n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !text
                  ? plain(s, len)
                  : json_stringn(s, len);
        if (!out || (json_is_string(out) && strlen(s) != len)) {
            json_decref(out);
            fail(c->line, line_of(n), c->errp, "a string that is not UTF-8 "
                 "text");
            return NULL;
        }
        return out;
    }
    case YAML_SEQUENCE_NODE:
        if (!(out = json_array())) {
            nomem(c->line, c->errp);
            return NULL;
        }
        for (yaml_node_item_t *it = n->data.sequence.items.start;
             it < n->data.sequence.items.top; it++) {
            json_t *v = convert(c, yaml_document_get_node(c->doc, *it),
                                depth + 1, text);
            if (!v || json_array_append_new(out, v) < 0) {
                json_decref(out);
                return NULL;
            }
        }
        return out;
    case YAML_MAPPING_NODE:
        return convert_map(c, n, depth, text);
    default:
        fail(c->line, line_of(n), c->errp, "an empty node");
        return NULL;
    }
}

/* The list of tasks: the root, or the root mapping's "tasks". */
static yaml_node_t *task_list(yaml_document_t *doc, yaml_node_t *root)
{
    if (root->type == YAML_SEQUENCE_NODE)
        return root;
    if (root->type != YAML_MAPPING_NODE)
        return NULL;
    yaml_node_t *list = NULL;
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start;
         p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(doc, p->key);
        if (k && k->type == YAML_SCALAR_NODE
            && !strcmp((const char *)k->data.scalar.value, "tasks"))
            list = yaml_document_get_node(doc, p->value);
    }
    return list && list->type == YAML_SEQUENCE_NODE ? list : NULL;
}

/* Every entry of the document converted first, then each made a spec:
 * a document that does not convert is refused before any entry's
 * fields are looked at. */
static int convert_all(struct reader *r, yaml_document_t *doc,
                       yaml_node_t *list)
{
    size_t own = (size_t)(doc->nodes.top - doc->nodes.start);
    struct conv c = { .doc = doc, .line = r->line, .errp = r->errp,
                      .budget = ALIAS_PER_NODE * own + ALIAS_NODES };
    size_t count = (size_t)(list->data.sequence.items.top
                            - list->data.sequence.items.start);
    if (c.budget > MAX_NODES)
        c.budget = MAX_NODES;
    json_t *entries = json_array();
    size_t *at = calloc(count ? count : 1, sizeof(*at)), n = 0;
    int rc = -1;

    if (!entries || !at) {
        nomem(r->line, r->errp);
        goto done;
    }
    for (yaml_node_item_t *it = list->data.sequence.items.start;
         it < list->data.sequence.items.top; it++) {
        yaml_node_t *e = yaml_document_get_node(doc, *it);
        json_t *v = convert(&c, e, 1, false);
        if (!v)
            goto done;
        at[n++] = line_of(e);
        json_array_append_new(entries, v);
    }
    for (size_t i = 0; i < n; i++)
        if (add_entry(r, json_array_get(entries, i), at[i]) < 0)
            goto done;
    rc = 0;
done:
    json_decref(entries);
    free(at);
    return rc;
}

static int read_yaml(FILE *fp, struct reader *r)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_node_t *root, *list;
    int rc = -1;

    if (!yaml_parser_initialize(&parser))
        return nomem(r->line, r->errp);
    yaml_parser_set_input_file(&parser, fp);
    if (!yaml_parser_load(&parser, &doc)) {
        fail(r->line, (size_t)parser.problem_mark.line + 1, r->errp,
             "not YAML: %s%s%s",
             parser.problem ? parser.problem : "a syntax error",
             parser.context ? " " : "", parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        return -1;
    }
    if (!(root = yaml_document_get_root_node(&doc)))
        rc = 0; /* an empty document: no tasks */
    else if (!(list = task_list(&doc, root)))
        fail(r->line, line_of(root), r->errp, "want a list of tasks (or "
             "tasks: [...])");
    else
        rc = convert_all(r, &doc, list);
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return rc;
}

/* ------------------------------------------------------------ order */

/* The file's tasks in the order the CLI has always submitted them (the
 * ids it gets follow it): sweeps over the file, each taking in the
 * file's order every task whose named dependencies have been taken.
 * Computed without sweeping: a task is taken in the sweep its last
 * dependency was taken in if it comes after that one in the file, else
 * in the next sweep.  'from'/'to': the 'ne' edges; 0, or -1 (a cycle). */
static int order(struct reader *r, const size_t *from, const size_t *to,
                 size_t ne, size_t *perm)
{
    size_t n = r->tf->n, *indeg = calloc(n, sizeof(size_t));
    size_t *first = calloc(n + 1, sizeof(size_t));
    size_t *succ = malloc(ne * sizeof(size_t)), *queue = NULL;
    size_t *sweep = calloc(n, sizeof(size_t)), *last = NULL;
    size_t *count = NULL, head = 0, tail = 0, none = n;
    int rc = -1;

    if (!indeg || !first || !succ || !sweep
        || !(queue = malloc(n * sizeof(size_t)))
        || !(last = malloc(n * sizeof(size_t)))
        || !(count = calloc(n + 2, sizeof(size_t)))) {
        nomem(r->line, r->errp);
        goto done;
    }
    /* the successors of each task, grouped by task */
    for (size_t k = 0; k < ne; k++) {
        first[from[k] + 1]++;
        indeg[to[k]]++;
    }
    for (size_t i = 0; i < n; i++)
        first[i + 1] += first[i];
    for (size_t k = 0; k < ne; k++)
        succ[first[from[k]] + count[from[k]]++] = to[k];
    memset(count, 0, (n + 2) * sizeof(size_t));
    for (size_t i = 0; i < n; i++) {
        last[i] = none;
        if (indeg[i] == 0) {
            sweep[i] = 1;
            queue[tail++] = i;
        }
    }
    /* 'last[j]': the dependency of j taken last so far, by (sweep,
     * place in the file) */
    while (head < tail) {
        size_t p = queue[head++];
        for (size_t k = first[p]; k < first[p + 1]; k++) {
            size_t j = succ[k];
            if (last[j] == none || sweep[p] > sweep[last[j]]
                || (sweep[p] == sweep[last[j]] && p > last[j]))
                last[j] = p;
            if (--indeg[j] == 0) {
                sweep[j] = sweep[last[j]] + (last[j] > j);
                queue[tail++] = j;
            }
        }
    }
    if (tail < n) {
        for (size_t i = 0; i < n; i++)
            if (indeg[i]) {
                fail(r->line, r->tf->lines[i], r->errp, "its \"after\" is "
                     "part of a cycle");
                break;
            }
        goto done;
    }
    /* by sweep, then in the file's order */
    for (size_t i = 0; i < n; i++)
        count[sweep[i] + 1]++;
    for (size_t s = 1; s <= n; s++)
        count[s + 1] += count[s];
    for (size_t i = 0; i < n; i++)
        perm[count[sweep[i]]++] = i;
    rc = 0;
done:
    free(indeg);
    free(first);
    free(succ);
    free(queue);
    free(sweep);
    free(last);
    free(count);
    return rc;
}

/* The file's "after" names as edges between its tasks: from the last
 * task of that name to the one that names it, into 'from' and 'to'
 * (*ne of them). */
static int edges(struct reader *r, size_t **fromp, size_t **top, size_t *ne)
{
    struct pl_taskfile *tf = r->tf;
    json_t *names = json_object();
    size_t *from = NULL, *to = NULL, n = 0, fcap = 0, tcap = 0;
    int rc = -1;

    if (!names) {
        nomem(r->line, r->errp);
        goto done;
    }
    for (size_t i = 0; i < tf->n; i++)
        if (tf->specs[i].name
            && json_object_set_new(names, tf->specs[i].name,
                                   json_integer((json_int_t)i)) < 0) {
            nomem(r->line, r->errp);
            goto done;
        }
    for (size_t i = 0; i < tf->n; i++) {
        const struct pl_spec *s = &tf->specs[i];
        for (uint32_t k = 0; k < s->nafter; k++) {
            const char *dep = s->after[k].name;
            json_t *def = dep ? json_object_get(names, dep) : NULL;
            if (!def)
                continue; /* an id, or a task already queued */
            if ((size_t)json_integer_value(def) == i) {
                fail(r->line, tf->lines[i], r->errp, "it waits for itself "
                     "('%s')", dep);
                goto done;
            }
            if (pl_grow(&from, &fcap, n, 1, sizeof(*from)) < 0
                || pl_grow(&to, &tcap, n, 1, sizeof(*to)) < 0) {
                nomem(r->line, r->errp);
                goto done;
            }
            from[n] = (size_t)json_integer_value(def);
            to[n++] = i;
        }
    }
    rc = 0;
done:
    json_decref(names);
    if (rc < 0) {
        free(from);
        free(to);
        return -1;
    }
    *fromp = from;
    *top = to;
    *ne = n;
    return 0;
}

/* Put the specs in the order 'perm' gives (the spec at k is the one that
 * was at perm[k]), in place: each cycle of 'perm' in turn. */
static void permute(struct pl_taskfile *tf, size_t *perm)
{
    for (size_t i = 0; i < tf->n; i++) {
        struct pl_spec s = tf->specs[i];
        size_t line = tf->lines[i], k = i;
        if (perm[i] == i)
            continue;
        while (perm[k] != i) {
            size_t src = perm[k];
            tf->specs[k] = tf->specs[src];
            tf->lines[k] = tf->lines[src];
            perm[k] = k;
            k = src;
        }
        tf->specs[k] = s;
        tf->lines[k] = line;
        perm[k] = k;
    }
}

int pl_taskfile_read(FILE *fp, bool yaml, const char *here,
                     struct pl_taskfile *tf, size_t *line,
                     struct pl_error *errp)
{
    struct reader r = { .tf = tf, .here = here, .line = line, .errp = errp };
    size_t *from = NULL, *to = NULL, ne = 0, *perm = NULL;

    memset(tf, 0, sizeof(*tf));
    *line = 0;
    if ((yaml ? read_yaml(fp, &r) : read_jsonl(fp, &r)) < 0)
        goto error;
    if (tf->n == 0) {
        fail(line, 0, errp, "no tasks in it");
        goto error;
    }
    if (edges(&r, &from, &to, &ne) < 0)
        goto error;
    if (ne > 0) { /* else the file's order is the order */
        if (!(perm = malloc(tf->n * sizeof(*perm)))) {
            nomem(line, errp);
            goto error;
        }
        if (order(&r, from, to, ne, perm) < 0)
            goto error;
        permute(tf, perm);
    }
    free(from);
    free(to);
    free(perm);
    return 0;
error:
    free(from);
    free(to);
    free(perm);
    pl_taskfile_clear(tf);
    return -1;
}
