/* client/yaml.c - a YAML task file as JSON values (client/yaml.h) */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "client/yaml.h"

/* Nesting a task entry never needs; and a budget of converted nodes
 * that stops aliases from multiplying a small file into a huge value. */
#define MAX_DEPTH 64
#define MAX_NODES 20000000

struct conv {
    yaml_document_t *doc;
    size_t nodes;
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
                                        "tags", NULL };

    return is_any(key, keys);
}

/* 'n' as JSON; 'text': plain scalars stay strings. */
static json_t *convert(struct conv *c, yaml_node_t *n, int depth, bool text)
{
    json_t *out;
    unsigned long line = (unsigned long)n->start_mark.line + 1;

    if (depth > MAX_DEPTH) {
        pl_errprintf(c->errp, "line %lu: nested deeper than %d", line,
                     MAX_DEPTH);
        return NULL;
    }
    if (++c->nodes > MAX_NODES) {
        pl_errprintf(c->errp, "line %lu: more than %d values (aliases?)",
                     line, MAX_NODES);
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
            pl_errprintf(c->errp, "line %lu: a string that is not UTF-8 "
                         "text", line);
            return NULL;
        }
        return out;
    }
    case YAML_SEQUENCE_NODE:
        if (!(out = json_array()))
            goto nomem;
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
        if (!(out = json_object()))
            goto nomem;
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
             p < n->data.mapping.pairs.top; p++) {
            yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
            if (!k || k->type != YAML_SCALAR_NODE
                || strlen((const char *)k->data.scalar.value)
                       != k->data.scalar.length) {
                pl_errprintf(c->errp, "line %lu: a key that is not a string",
                             k ? (unsigned long)k->start_mark.line + 1
                               : line);
                json_decref(out);
                return NULL;
            }
            const char *key = (const char *)k->data.scalar.value;
            if (json_object_get(out, key)) {
                pl_errprintf(c->errp, "line %lu: '%.40s' is given twice",
                             (unsigned long)k->start_mark.line + 1, key);
                json_decref(out);
                return NULL;
            }
            json_t *v = convert(c, yaml_document_get_node(c->doc, p->value),
                                depth + 1, text || (depth == 1
                                                    && text_field(key)));
            if (!v || json_object_set_new(out, key, v) < 0) {
                if (v) /* set_new took it: the key was not UTF-8 */
                    pl_errprintf(c->errp, "line %lu: a key that is not "
                                 "UTF-8 text",
                                 (unsigned long)k->start_mark.line + 1);
                json_decref(out);
                return NULL;
            }
        }
        return out;
    default:
        pl_errprintf(c->errp, "line %lu: an empty node", line);
        return NULL;
    }
nomem:
    errno = ENOMEM;
    pl_errprintf(c->errp, "out of memory");
    return NULL;
}

json_t *pl_yaml_tasks(FILE *fp, size_t **lines, struct pl_error *errp)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_node_t *root, *list = NULL;
    struct conv c = { .doc = &doc, .errp = errp };
    json_t *out = NULL;
    size_t *ln = NULL, n = 0;

    errno = EINVAL;
    if (!yaml_parser_initialize(&parser)) {
        errno = ENOMEM;
        pl_errprintf(errp, "out of memory");
        return NULL;
    }
    yaml_parser_set_input_file(&parser, fp);
    if (!yaml_parser_load(&parser, &doc)) {
        pl_errprintf(errp, "line %lu: not YAML: %s%s%s",
                     (unsigned long)parser.problem_mark.line + 1,
                     parser.problem ? parser.problem : "a syntax error",
                     parser.context ? " " : "",
                     parser.context ? parser.context : "");
        yaml_parser_delete(&parser);
        return NULL;
    }
    if (!(root = yaml_document_get_root_node(&doc))) {
        pl_errprintf(errp, "no tasks in it");
        goto done;
    }
    if (root->type == YAML_SEQUENCE_NODE)
        list = root;
    else if (root->type == YAML_MAPPING_NODE) {
        /* {tasks: [...]} */
        for (yaml_node_pair_t *p = root->data.mapping.pairs.start;
             p < root->data.mapping.pairs.top; p++) {
            yaml_node_t *k = yaml_document_get_node(&doc, p->key);
            if (k && k->type == YAML_SCALAR_NODE
                && !strcmp((const char *)k->data.scalar.value, "tasks"))
                list = yaml_document_get_node(&doc, p->value);
        }
    }
    if (!list || list->type != YAML_SEQUENCE_NODE) {
        pl_errprintf(errp, "line %lu: want a list of tasks (or tasks: "
                     "[...])", (unsigned long)root->start_mark.line + 1);
        goto done;
    }
    size_t count = (size_t)(list->data.sequence.items.top
                            - list->data.sequence.items.start);
    if (!(out = json_array()) || !(ln = calloc(count ? count : 1,
                                              sizeof(*ln)))) {
        errno = ENOMEM;
        pl_errprintf(errp, "out of memory");
        goto fail;
    }
    for (yaml_node_item_t *it = list->data.sequence.items.start;
         it < list->data.sequence.items.top; it++) {
        yaml_node_t *e = yaml_document_get_node(&doc, *it);
        json_t *v = e ? convert(&c, e, 1, false) : NULL;
        if (!v)
            goto fail;
        ln[n++] = e->start_mark.line + 1;
        json_array_append_new(out, v);
    }
    *lines = ln;
    goto done;
fail:
    json_decref(out);
    out = NULL;
    free(ln);
done:
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return out;
}
