/* tests/fuzz/fuzz_taskfile.c - libFuzzer target: pilot submit --file
 *
 * The input is one byte that chooses the reader (even: JSONL, odd:
 * YAML) and then the file, read by client/taskfile.c's
 * pl_taskfile_read() through fmemopen() as `pilot submit --file` reads
 * it: libyaml or jansson, the YAML to JSON conversion (aliases, nesting,
 * numbers), every entry through pl_cli_spec_entry() (client/spec.c) and
 * the order of "after".  Checked: a refusal leaves the result empty with
 * a message; an accepted file gives specs with a command, in an order
 * where a task named in another's "after" comes before it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/taskfile.h"
#include "tests/fuzz/check.h"

/* Whether a task named 'name' comes before the i-th. */
static int before(const struct pl_taskfile *tf, size_t i, const char *name)
{
    for (size_t j = 0; j < i; j++)
        if (tf->specs[j].name && !strcmp(tf->specs[j].name, name))
            return 1;
    return 0;
}

static int named(const struct pl_taskfile *tf, const char *name)
{
    return before(tf, tf->n, name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pl_taskfile tf;
    struct pl_error e = { "" };
    size_t line;
    FILE *fp;

    if (size < 2)
        return 0;
    bool yaml = data[0] & 1;
    if (!(fp = fmemopen((void *)(data + 1), size - 1, "r")))
        return 0;
    errno = 0;
    int rc = pl_taskfile_read(fp, yaml, "/here", &tf, &line, &e);
    fclose(fp);
    if (rc < 0) {
        CHECK(errno != 0 && e.text[0] && tf.n == 0 && !tf.specs
              && !tf.lines);
        return 0;
    }
    CHECK(tf.n >= 1 && tf.specs && tf.lines);
    for (size_t i = 0; i < tf.n; i++) {
        const struct pl_spec *s = &tf.specs[i];
        CHECK(s->argv && s->argv[0]);
        CHECK(s->cwd && s->cwd[0] == '/');
        for (uint32_t k = 0; k < s->nafter; k++) {
            const char *dep = s->after[k].name;
            /* the last task of that name: before this one */
            if (dep && named(&tf, dep))
                CHECK(before(&tf, i, dep));
        }
    }
    pl_taskfile_clear(&tf);
    CHECK(tf.n == 0 && !tf.specs);
    return 0;
}
