/* tests/unit/test_agent_vetcheck.c - pilot-vetcheck's pure parts: the
 * GPUs CUDA_VISIBLE_DEVICES leaves, CUDA's UUIDs as NVML writes them,
 * the rounds of pairs of the net check, numbers of options, the report */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/vetcheck.h"
#include "tests/unit/tap.h"

static const char *const uuids[] = {
    "GPU-aaaa1111-0000-0000-0000-000000000000",
    "GPU-aaaa2222-0000-0000-0000-000000000000",
    "GPU-bbbb0000-0000-0000-0000-000000000000",
    "GPU-cccc0000-0000-0000-0000-000000000000",
};

/* pl_vet_visible() of 'cvd' among the 4, as "i,j,..." */
static const char *vis(const char *cvd)
{
    static char out[64];
    unsigned int idx[4], n = pl_vet_visible(cvd, uuids, 4, idx);
    size_t off = 0;

    out[0] = '\0';
    for (unsigned int i = 0; i < n; i++)
        off += (size_t)snprintf(out + off, sizeof(out) - off, "%s%u",
                                i ? "," : "", idx[i]);
    return out;
}

static void test_visible(void)
{
    static const struct {
        const char *cvd, *want, *why;
    } cases[] = {
        { NULL, "0,1,2,3", "unset: all, in NVML's order" },
        { "", "", "empty: none" },
        { "2,0", "2,0", "indices, in the variable's order" },
        { " 3 , 1", "3,1", "spaces around an index" },
        { "1,1,2", "1", "a repeated index ends the list" },
        { "1,7,2", "1", "an index out of range ends it" },
        { "0,x,1", "0", "something else ends it" },
        { "-1,0", "", "a negative index ends it at once" },
        { "GPU-bbbb,0", "2,0", "a unique UUID prefix, then an index" },
        { "GPU-aaaa,2", "", "an ambiguous prefix ends it" },
        { "GPU-aaaa2222-0000-0000-0000-000000000000", "1", "a whole UUID" },
        { "GPU-dddd", "", "an unknown UUID" },
        { "MIG-aaaa1111", "", "a MIG id is not a GPU of NVML's list" },
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *got = vis(cases[i].cvd);
        if (!ok(!strcmp(got, cases[i].want), "CUDA_VISIBLE_DEVICES=%s%s%s: "
                "%s", cases[i].cvd ? "'" : "(unset)",
                cases[i].cvd ? cases[i].cvd : "", cases[i].cvd ? "'" : "",
                cases[i].why))
            diag("got '%s', want '%s'", got, cases[i].want);
    }
}

static void test_uuid(void)
{
    unsigned char b[16];
    char buf[64];

    for (int i = 0; i < 16; i++)
        b[i] = (unsigned char)(i * 17);
    pl_vet_uuid_text(b, buf, sizeof(buf));
    ok(!strcmp(buf, "GPU-00112233-4455-6677-8899-aabbccddeeff"),
       "a CUDA UUID written as NVML does (%s)", buf);
    pl_vet_uuid_text(b, buf, 12);
    ok(strlen(buf) < 12, "... cut, not overrun, in a short buffer");
}

/* Every n from 2 to 17: each round a matching of ranks, every pair met
 * exactly once over the rounds. */
static void test_rounds(void)
{
    int bad = 0;

    for (int n = 2; n <= 17 && !bad; n++) {
        int m = n % 2 ? n + 1 : n;
        int *met = calloc((size_t)(n * n), sizeof(int));

        for (int r = 0; r < m - 1; r++)
            for (int me = 0; me < n; me++) {
                int p = pl_vet_partner(me, r, m);
                if (p < 0 || p >= m || p == me
                    || (p < n && pl_vet_partner(p, r, m) != me)) {
                    diag("n %d round %d: %d -> %d", n, r, me, p);
                    bad = 1;
                }
                if (p < n && p > me)
                    met[me * n + p]++;
            }
        for (int a = 0; a < n; a++)
            for (int b = a + 1; b < n; b++)
                if (met[a * n + b] != 1) {
                    diag("n %d: %d and %d met %d times", n, a, b,
                         met[a * n + b]);
                    bad = 1;
                }
        free(met);
    }
    ok(!bad, "2 to 17 ranks: each round pairs ranks off, every pair meets "
             "once in n-1 rounds (n even) or n (odd)");
}

static void test_number(void)
{
    double x = 0;
    int e;
    FILE *saved = stderr;

    ok(pl_vet_number("--size", "4M", 1, 1e12, 1, &x) == 0 && x == 4194304,
       "4M is 4 MiB");
    ok(pl_vet_number("--size", "2k", 1, 1e12, 1, &x) == 0 && x == 2048,
       "2k is 2 KiB");
    ok(pl_vet_number("--x", "1e9", 0, 1e12, 0, &x) == 0 && x == 1e9,
       "1e9");
    /* the refusals print on stderr: not into the TAP */
    stderr = fopen("/dev/null", "w");
    e = pl_vet_number("--x", "4M", 0, 1e12, 0, &x) < 0
        && pl_vet_number("--x", "-1", 0, 10, 0, &x) < 0
        && pl_vet_number("--x", "11", 0, 10, 0, &x) < 0
        && pl_vet_number("--x", "", 0, 10, 0, &x) < 0
        && pl_vet_number("--x", "nan", 0, 10, 0, &x) < 0
        && pl_vet_number("--x", "3x", 0, 10, 1, &x) < 0;
    fclose(stderr);
    stderr = saved;
    ok(e, "refused: a suffix where none is taken, out of range, empty, "
          "NaN, an unknown suffix");
}

/* The report of a run, as pl_vet_end() prints it, into 'buf'. */
static int end_into(struct pl_vet *v, char *buf, size_t len)
{
    int fd[2], saved = dup(1), rc;
    ssize_t got;

    if (pipe(fd) < 0)
        return -1;
    fflush(stdout);
    dup2(fd[1], 1);
    close(fd[1]);
    rc = pl_vet_end(v);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    got = read(fd[0], buf, len - 1);
    buf[got > 0 ? got : 0] = '\0';
    close(fd[0]);
    return rc;
}

static void test_report(void)
{
    struct pl_vet v;
    char out[4096];
    json_t *j;
    FILE *saved = stderr;

    ok(pl_vet_init(&v, "gpu") == 0, "a report");
    ok(end_into(&v, out, sizeof(out)) == PL_VET_PASS
       && strstr(out, "\"status\":\"pass\"") && strstr(out, "\"ok\":true"),
       "with nothing failed: exit 0, pass");
    stderr = fopen("/dev/null", "w");
    pl_vet_init(&v, "gpu");
    pl_vet_cannot(&v, "no GPU here: %s", "NVML not found");
    ok(end_into(&v, out, sizeof(out)) == PL_VET_CANNOT
       && strstr(out, "\"status\":\"cannot-run\""),
       "cannot run: exit 3, cannot-run");
    pl_vet_init(&v, "gpu");
    pl_vet_cannot(&v, "no CUDA driver");
    pl_vet_fail(&v, "gpu.temperature", 91, 85, json_pack("{si}", "gpu", 1),
                "GPU 1 at %d C", 91);
    ok(end_into(&v, out, sizeof(out)) == PL_VET_FAIL,
       "a failed check and one that could not run: exit 1 (the failure "
       "says more)");
    fclose(stderr);
    stderr = saved;
    j = json_loads(out, 0, NULL);
    json_t *f = json_array_get(json_object_get(j, "failed"), 0);
    ok(j && !strcmp(json_string_value(json_object_get(j, "status")), "fail")
       && !strcmp(json_string_value(json_object_get(f, "check")),
                  "gpu.temperature")
       && json_real_value(json_object_get(f, "value")) == 91
       && json_real_value(json_object_get(f, "limit")) == 85
       && json_integer_value(json_object_get(f, "gpu")) == 1
       && !strcmp(json_string_value(json_object_get(f, "text")),
                  "GPU 1 at 91 C")
       && json_is_string(json_object_get(j, "error")),
       "... one line of JSON: the check, its figure, limit, GPU and text");
    json_decref(j);
    pl_vet_init(&v, "net");
    stderr = fopen("/dev/null", "w");
    pl_vet_fail(&v, "net.x", NAN, NAN, NULL, "x");
    fclose(stderr);
    stderr = saved;
    end_into(&v, out, sizeof(out));
    ok(strstr(out, "\"value\":null,\"limit\":null") != NULL,
       "a figure not known is null");
}

int main(void)
{
    plan(13 + 2 + 1 + 4 + 6);
    test_visible();
    test_uuid();
    test_rounds();
    test_number();
    test_report();
    return done_testing();
}
