/* tests/unit/test_client_clean.c - control characters made visible in
 * human output (client/clean.c): the escapes, a C1 control split across
 * two writes, and stdout replaced by the escaping stream */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/clean.h"
#include "tests/unit/tap.h"

static void is_clean(const char *in, const char *want, const char *desc)
{
    char *got = pl_clean_str(in);

    is_str(got, want, "%s", desc);
    free(got);
}

static void test_str(void)
{
    is_clean("plain name-1_2.x", "plain name-1_2.x", "plain text unchanged");
    is_clean("\x1b[2J\x1b]0;owned\x07", "\\x1b[2J\\x1b]0;owned\\x07",
             "ESC, BEL: \\xHH (clear screen, retitle)");
    is_clean("a\rb\bc", "a\\x0db\\x08c", "CR and backspace escaped");
    is_clean("line\n\ttab", "line\n\ttab", "newline and tab kept");
    is_clean("del\x7f", "del\\x7f", "DEL escaped");
    is_clean("\xc2\x9b" "31m", "\\u009b31m", "C1 CSI (U+009B) escaped");
    is_clean("caf\xc3\xa9 \xc2\xa2 \xe2\x82\xac", "caf\xc3\xa9 \xc2\xa2 \xe2\x82\xac",
             "UTF-8 letters and signs (U+00A2 too) kept");
    is_clean("end\xc2", "end\xc2", "a truncated C2 at the end kept as it was");
    is_clean("", "", "empty string");
}

static void test_split(void)
{
    struct pl_clean st = { false };
    char out[64];
    size_t w = pl_clean_bytes(&st, "ab\xc2", 3, out);

    ok(w == 2 && st.held_c2, "a C2 at the end of a piece is held");
    w += pl_clean_bytes(&st, "\x9b" "x", 2, out + w);
    w += pl_clean_end(&st, out + w);
    out[w] = '\0';
    is_str(out, "ab\\u009bx", "... and escaped with the next piece's byte");
    w = pl_clean_bytes(&st, "\xc2", 1, out);
    w += pl_clean_bytes(&st, "\xa9", 1, out + w);
    ok(w == 2 && !memcmp(out, "\xc2\xa9", 2), "a held C2 of U+00A9 kept");
}

static void test_stdout(void)
{
    char path[] = "/tmp/test_client_clean.XXXXXX";
    int fd = mkstemp(path), saved = dup(STDOUT_FILENO);
    char buf[256] = "";

    if (fd < 0 || saved < 0 || dup2(fd, STDOUT_FILENO) < 0) {
        ok(0, "redirect stdout");
        return;
    }
    /* N.B. no ok() while stdout goes to the file: TAP would go there */
    FILE *orig = pl_clean_stdout();
    bool replaced = orig != NULL && stdout != orig;
    printf("id %d name \x1b[31mred\x1b[0m\n", 7);
    fputs("split \xc2", stdout);
    fflush(stdout);
    fputs("\x9b end\n", stdout);
    bool closed = pl_clean_stdout_close(orig) == 0 && stdout == orig;
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    ok(replaced, "stdout replaced by the escaping stream");
    ok(closed, "closed, the old stdout back");
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    is_str(buf, "id 7 name \\x1b[31mred\\x1b[0m\nsplit \\u009b end\n",
           "what printf wrote arrives escaped, a C1 split by a flush too");
    close(fd);
    unlink(path);
    ok(pl_clean_stdout_close(NULL) == 0, "close with nothing replaced: a flush");
}

int main(void)
{
    plan(16);
    test_str();
    test_split();
    test_stdout();
    return done_testing();
}
