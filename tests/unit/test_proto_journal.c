/* tests/unit/test_proto_journal.c - journals: frames, index, torn tails */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/journal.h"
#include "tests/unit/tap.h"

static char tmp[64];

struct want {
    uint64_t id;
    uint32_t attempt;
    int calls;
};

static bool want_one(uint64_t id, uint32_t attempt, void *arg)
{
    struct want *w = arg;

    w->calls++;
    return id == w->id && attempt == w->attempt;
}

static bool want_odd(uint64_t id, uint32_t attempt, void *arg)
{
    (void)attempt;
    (void)arg;
    return id % 2 == 1;
}

/* Everything the reader gives for 'w' now, stream 'stream' (0: both),
 * into 'buf' (NUL-terminated); the number of frames. */
static int read_all(struct pl_jr *r, int stream, char *buf, size_t len)
{
    struct pl_jframe f;
    struct pl_error e;
    size_t n = 0;
    int frames = 0;

    buf[0] = '\0';
    while (pl_jr_next(r, &f, &e) == 1) {
        frames++;
        if (stream && f.stream != stream)
            continue;
        if (n + f.len < len) {
            memcpy(buf + n, f.data, f.len);
            n += f.len;
            buf[n] = '\0';
        }
    }
    return frames;
}

static struct pl_jstate st(uint64_t id, uint32_t att, uint32_t rank)
{
    return (struct pl_jstate){ .id = id, .attempt = att, .rank = rank };
}

static void test_crc(void)
{
    /* the CRC-32 check value of "123456789" (IEEE 802.3, as zlib's) */
    is(pl_crc32(0, "123456789", 9), 0xcbf43926u, "crc32 check value");
    uint32_t c = pl_crc32(0, "12345", 5);
    is(pl_crc32(c, "6789", 4), 0xcbf43926u, "crc32 goes on");
}

static void test_write_read(void)
{
    struct pl_error e = { "" };
    struct pl_jw *w = pl_jw_open(tmp, "n1", 0, &e);
    char buf[4096];

    ok(w != NULL, "open a writer (%s)", e.text);
    if (!w)
        return;
    is(pl_jw_segment(w), 1, "first segment is 1");
    struct pl_jstate a0 = st(7, 1, 0), a1 = st(7, 1, 1), b = st(8, 1, 0);
    ok(pl_jw_write(w, &a0, PL_J_STDOUT, "rank 0 ", 7, &e) == 0, "write");
    pl_jw_write(w, &b, PL_J_STDOUT, "other\n", 6, &e);
    pl_jw_write(w, &a1, PL_J_STDOUT, "rank 1\n", 7, &e);
    pl_jw_write(w, &a0, PL_J_STDERR, "oops\n", 5, &e);
    pl_jw_write(w, &a0, PL_J_STDOUT, "of 2\n", 5, &e);
    pl_jw_end(w, &a0, &e);
    pl_jw_end(w, &a1, &e);
    pl_jw_end(w, &b, &e);
    is(a0.bytes, 17, "bytes counted");

    struct want wt = { .id = 7, .attempt = 1 };
    struct pl_jr *r = pl_jr_open(tmp, NULL, want_one, &wt, &e);
    ok(r != NULL, "open a reader (%s)", e.text);
    if (!r) {
        pl_jw_close(w);
        return;
    }
    is(read_all(r, 0, buf, sizeof(buf)), 4, "four frames of task 7");
    is_str(buf, "rank 0 rank 1\noops\nof 2\n", "in the order written");
    pl_jr_close(r);
    r = pl_jr_open(tmp, "n1", want_one, &wt, &e);
    read_all(r, PL_J_STDERR, buf, sizeof(buf));
    is_str(buf, "oops\n", "stderr apart");
    pl_jr_close(r);

    /* -f: what is written after the reader reached the end */
    wt.id = 9;
    r = pl_jr_open(tmp, NULL, want_one, &wt, &e);
    is(read_all(r, 0, buf, sizeof(buf)), 0, "task 9: nothing yet");
    struct pl_jstate c = st(9, 1, 0);
    pl_jw_write(w, &c, PL_J_STDOUT, "late\n", 5, &e);
    is(read_all(r, 0, buf, sizeof(buf)), 1, "task 9: its frame once written");
    is_str(buf, "late\n", "followed");
    pl_jw_write(w, &c, PL_J_STDOUT, "later\n", 6, &e);
    read_all(r, 0, buf, sizeof(buf));
    is_str(buf, "later\n", "and the next");
    pl_jr_close(r);
    pl_jw_close(w);
}

/* The index: a task that ended early is read without the frames after
 * it. */
static void test_index(void)
{
    struct pl_error e = { "" };
    char dir[128], buf[256];

    snprintf(dir, sizeof(dir), "%s/idx", tmp);
    mkdir(dir, 0700);
    struct pl_jw *w = pl_jw_open(dir, "n1", 0, &e);
    struct pl_jstate first = st(1, 1, 0);
    pl_jw_write(w, &first, PL_J_STDOUT, "first\n", 6, &e);
    pl_jw_end(w, &first, &e);
    static char big[65536];
    memset(big, 'x', sizeof(big));
    for (uint64_t id = 2; id < 200; id++) {
        struct pl_jstate s = st(id, 1, 0);
        pl_jw_write(w, &s, PL_J_STDOUT, big, sizeof(big), &e);
        pl_jw_end(w, &s, &e);
    }
    struct want wt = { .id = 1, .attempt = 1 };
    struct pl_jr *r = pl_jr_open(dir, NULL, want_one, &wt, &e);
    read_all(r, 0, buf, sizeof(buf));
    is_str(buf, "first\n", "task 1 from a journal of 13 MB");
    ok(pl_jr_read_bytes(r) < 2 * 1024 * 1024,
       "read %llu bytes of the journal, not all of it",
       (unsigned long long)pl_jr_read_bytes(r));
    pl_jr_close(r);
    /* a task in the middle: found by its start */
    wt.id = 150;
    r = pl_jr_open(dir, NULL, want_one, &wt, &e);
    int n = 0;
    struct pl_jframe f;
    uint64_t bytes = 0;
    while (pl_jr_next(r, &f, &e) == 1) {
        n++;
        bytes += f.len;
    }
    is(bytes, sizeof(big), "task 150's 64 KiB");
    ok(pl_jr_read_bytes(r) < 4 * 1024 * 1024, "without reading it all (%llu)",
       (unsigned long long)pl_jr_read_bytes(r));
    pl_jr_close(r);
    pl_jw_close(w);
}

/* A torn tail (an agent killed mid-write), then a new writer. */
static void test_torn(void)
{
    struct pl_error e = { "" };
    char dir[128], path[256], buf[256];

    snprintf(dir, sizeof(dir), "%s/torn", tmp);
    mkdir(dir, 0700);
    struct pl_jw *w = pl_jw_open(dir, "n1", 0, &e);
    struct pl_jstate a = st(1, 1, 0), b = st(2, 1, 0);
    pl_jw_write(w, &a, PL_J_STDOUT, "whole\n", 6, &e);
    pl_jw_write(w, &b, PL_J_STDOUT, "torn in two\n", 12, &e);
    pl_jw_close(w);
    /* cut the last frame in the middle, as a kill during its write */
    snprintf(path, sizeof(path), "%s/journal/n1/000001.pj", dir);
    struct stat sb;
    stat(path, &sb);
    ok(truncate(path, sb.st_size - 5) == 0, "tear the tail");

    struct want wt = { .id = 1, .attempt = 1 };
    struct pl_jr *r = pl_jr_open(dir, NULL, want_one, &wt, &e);
    read_all(r, 0, buf, sizeof(buf));
    is_str(buf, "whole\n", "the frame before the tear reads");
    pl_jr_close(r);

    /* the agent started again: a new segment, never after the tear */
    w = pl_jw_open(dir, "n1", 0, &e);
    is(pl_jw_segment(w), 2, "a new writer opens segment 2");
    struct pl_jstate c = st(3, 1, 0);
    pl_jw_write(w, &c, PL_J_STDOUT, "after\n", 6, &e);
    wt.id = 2;
    r = pl_jr_open(dir, NULL, want_one, &wt, &e);
    is(read_all(r, 0, buf, sizeof(buf)), 0, "the torn frame is not read");
    is(pl_jr_torn(r), 1, "and is counted torn");
    pl_jr_close(r);
    wt.id = 3;
    r = pl_jr_open(dir, NULL, want_one, &wt, &e);
    read_all(r, 0, buf, sizeof(buf));
    is_str(buf, "after\n", "the new segment reads");
    pl_jr_close(r);

    /* a bad byte inside a frame: its check fails */
    snprintf(path, sizeof(path), "%s/journal/n1/000002.pj", dir);
    int fd = open(path, O_WRONLY);
    ok(pwrite(fd, "X", 1, PL_J_HEAD + PL_J_FRAME_HEAD + 1) == 1, "corrupt");
    close(fd);
    pl_jw_write(w, &c, PL_J_STDOUT, "more\n", 5, &e);
    r = pl_jr_open(dir, NULL, want_one, &wt, &e);
    read_all(r, 0, buf, sizeof(buf));
    is_str(buf, "", "a frame failing its CRC ends the segment's reading");
    pl_jr_close(r);
    pl_jw_close(w);
}

static void test_rotation(void)
{
    struct pl_error e = { "" };
    char dir[128], buf[8192], line[64];

    snprintf(dir, sizeof(dir), "%s/rot", tmp);
    mkdir(dir, 0700);
    struct pl_jw *w = pl_jw_open(dir, "n2", 1000, &e);
    struct pl_jstate a = st(5, 2, 0);
    size_t want = 0;
    for (int i = 0; i < 100; i++) {
        int n = snprintf(line, sizeof(line), "line %d\n", i);
        pl_jw_write(w, &a, PL_J_STDOUT, line, (size_t)n, &e);
        want += (size_t)n;
        struct pl_jstate o = st(6 + (uint64_t)i, 1, 0);
        pl_jw_write(w, &o, PL_J_STDOUT, "noise\n", 6, &e);
        pl_jw_end(w, &o, &e);
    }
    pl_jw_end(w, &a, &e);
    ok(pl_jw_segment(w) > 5, "rotated at 1000 bytes: %u segments",
       pl_jw_segment(w));
    ok(pl_jw_size(w) <= 1000, "a segment stays under its size");
    struct want wt = { .id = 5, .attempt = 2 };
    struct pl_jr *r = pl_jr_open(dir, NULL, want_one, &wt, &e);
    read_all(r, 0, buf, sizeof(buf));
    is(strlen(buf), want, "every line across the segments");
    ok(!strncmp(buf, "line 0\nline 1\n", 14)
           && strstr(buf, "line 98\nline 99\n"),
       "in order");
    pl_jr_close(r);
    wt.attempt = 1;
    r = pl_jr_open(dir, NULL, want_one, &wt, &e);
    is(read_all(r, 0, buf, sizeof(buf)), 0, "attempt 1 has none");
    pl_jr_close(r);
    /* many tasks at once (an array's grep) */
    r = pl_jr_open(dir, NULL, want_odd, NULL, &e);
    is(read_all(r, 0, buf, sizeof(buf)), 150, "the odd tasks' frames");
    pl_jr_close(r);

    /* big writes are cut into frames */
    static char big[3 * PL_J_FRAME_MAX + 10];
    memset(big, 'y', sizeof(big));
    struct pl_jstate h = st(1000, 1, 0);
    ok(pl_jw_write(w, &h, PL_J_STDERR, big, sizeof(big), &e) == 0,
       "write %zu bytes", sizeof(big));
    wt.id = 1000;
    r = pl_jr_open(dir, NULL, want_one, &wt, &e);
    struct pl_jframe f;
    uint64_t bytes = 0;
    int frames = 0;
    while (pl_jr_next(r, &f, &e) == 1) {
        frames++;
        bytes += f.len;
    }
    is(frames, 4, "in frames of at most 1 MiB");
    is(bytes, sizeof(big), "all of it");
    pl_jr_close(r);
    pl_jw_close(w);
}

static void test_refusals(void)
{
    struct pl_error e = { "" };

    ok(pl_jw_open(tmp, "../x", 0, &e) == NULL, "a node name with / refused");
    ok(pl_jw_open(tmp, "", 0, &e) == NULL, "an empty node name refused");
    struct want wt = { 0 };
    errno = 0;
    ok(pl_jr_open("/nonexistent", NULL, want_one, &wt, &e) == NULL
           && errno == ENOENT,
       "no journal: ENOENT");
}

int main(void)
{
    plan(38);
    snprintf(tmp, sizeof(tmp), "/tmp/test_journal.XXXXXX");
    if (!mkdtemp(tmp))
        return 1;
    test_crc();
    test_write_read();
    test_index();
    test_torn();
    test_rotation();
    test_refusals();
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
    if (system(cmd) != 0)
        diag("could not remove %s", tmp);
    return done_testing();
}
