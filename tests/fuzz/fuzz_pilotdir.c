/* tests/fuzz/fuzz_pilotdir.c - libFuzzer target: the pilot directory's
 * endpoint and info files
 *
 * The input is the text of a file, as pl_endpoint_read() and
 * pl_info_read() read it (at most PL_KV_FILE_MAX - 1 bytes), given to
 * both parsers, pl_endpoint_parse() and pl_info_parse().  Checked: a
 * text with a line longer than PL_KV_LINE_MAX bytes is refused (never
 * cut into a different value), what is accepted is within its ranges,
 * and written back as the writers write it, it reads back the same.
 */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "proto/pilotdir.h"
#include "tests/fuzz/check.h"

/* Whether a line of 'text' is longer than PL_KV_LINE_MAX bytes. */
static int too_long(const char *text, size_t len)
{
    size_t n = 0;

    for (size_t i = 0; i < len; i++, n++) {
        if (text[i] == '\n')
            n = (size_t)-1;
        else if (n >= PL_KV_LINE_MAX)
            return 1;
    }
    return 0;
}

static void str_ok(const char *s, size_t size)
{
    CHECK(memchr(s, '\0', size) && !strchr(s, '\n'));
}

static void endpoint(const char *text, size_t len)
{
    struct pl_endpoint ep, again;
    struct pl_error e;
    char buf[1024];

    if (pl_endpoint_parse("endpoint", text, len, &ep, &e) < 0) {
        CHECK(e.text[0] && !ep.client[0] && !ep.pid);
        return;
    }
    CHECK(!too_long(text, len));
    str_ok(ep.client, sizeof(ep.client));
    str_ok(ep.agent, sizeof(ep.agent));
    str_ok(ep.host, sizeof(ep.host));
    CHECK(ep.client[0] && ep.agent[0]);
    CHECK(ep.pid >= 0 && ep.pid <= INT_MAX && ep.job >= 0
          && ep.job <= (long)UINT32_MAX);
    /* as pl_endpoint_write() writes it */
    int n = snprintf(buf, sizeof(buf),
                     "client %s\nagent %s\nhost %s\npid %ld\njob %ld\n",
                     ep.client, ep.agent, ep.host, ep.pid, ep.job);
    CHECK(n > 0 && (size_t)n < sizeof(buf));
    CHECK(pl_endpoint_parse("endpoint", buf, (size_t)n, &again, &e) == 0);
    CHECK(!strcmp(again.client, ep.client) && !strcmp(again.agent, ep.agent)
          && !strcmp(again.host, ep.host) && again.pid == ep.pid
          && again.job == ep.job);
}

static void info(const char *text, size_t len)
{
    struct pl_info in, again;
    struct pl_error e;
    char buf[512];

    if (pl_info_parse("info", text, len, &in, &e) < 0) {
        CHECK(e.text[0] && !in.id[0] && !in.job);
        return;
    }
    CHECK(!too_long(text, len));
    str_ok(in.id, sizeof(in.id));
    str_ok(in.mode, sizeof(in.mode));
    CHECK(in.job >= 0 && in.job <= (long)UINT32_MAX && in.nodes >= 0
          && in.nodes <= INT_MAX);
    CHECK(isfinite(in.created) && in.created >= 0);
    /* as pl_info_write() writes it (%.3f: the time to the millisecond) */
    int n = snprintf(buf, sizeof(buf),
                     "id %s\nmode %s\njob %ld\nnodes %ld\ncreated %.3f\n",
                     in.id, in.mode, in.job, in.nodes, in.created);
    if (n < 0 || (size_t)n >= sizeof(buf))
        return; /* created near DBL_MAX: 300 digits */
    CHECK(pl_info_parse("info", buf, (size_t)n, &again, &e) == 0);
    CHECK(!strcmp(again.id, in.id) && !strcmp(again.mode, in.mode)
          && again.job == in.job && again.nodes == in.nodes
          && fabs(again.created - in.created) <= 0.0005 * (1 + in.created));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size >= PL_KV_FILE_MAX)
        return 0; /* the readers refuse it before parsing */
    endpoint((const char *)data, size);
    info((const char *)data, size);
    return 0;
}
