/* client/clean.h - control characters made visible in what people read
 *
 * A task's name, argv, cwd and reason, a node's name and an error's text
 * come from other people's input; printed raw, an escape sequence in one
 * of them moves the cursor, clears the screen or retitles the terminal of
 * whoever runs 'pilot ls' (issue 12).  Human output goes through these
 * escapes: C0 controls but newline and tab, and DEL, print as "\xHH"; C1
 * controls (U+0080..U+009F, which some terminals obey as ESC sequences)
 * as "\u00HH".  JSON output needs none (jansson escapes every control
 * character but DEL, which pl_out_json() writes "\u007f"), and 'pilot
 * logs' prints the task's bytes as they are.
 */
#ifndef PL_CLIENT_CLEAN_H
#define PL_CLIENT_CLEAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* State across the pieces of one stream: a 0xC2 byte held back, since the
 * next byte decides whether the pair is a C1 control. */
struct pl_clean {
    bool held_c2;
};

/* Room 'dst' needs for pl_clean_bytes() of 'n' bytes. */
#define PL_CLEAN_ROOM(n) (6 * (n) + 8)

/* Escape the 'n' bytes at 's' into 'dst' (PL_CLEAN_ROOM(n) bytes, not
 * terminated); returns the bytes written.  A 0xC2 at the end is held in
 * 'st' for the next call or pl_clean_end(). */
size_t pl_clean_bytes(struct pl_clean *st, const char *s, size_t n,
                      char *dst);

/* What 'st' holds back, into 'dst' (8 bytes); returns its length. */
size_t pl_clean_end(struct pl_clean *st, char *dst);

/* 's' escaped, in a new string (free()), or NULL (ENOMEM). */
char *pl_clean_str(const char *s);

/* Replace stdout with a stream that escapes what is written to it, with
 * the buffering stdout had (line on a terminal, else full); call it before
 * anything is written.  Returns the stdout it replaced, for
 * pl_clean_stdout_close(), or NULL with errno set (stdout unchanged). */
FILE *pl_clean_stdout(void);

/* Close the escaping stdout (writing what it holds) and put back 'orig',
 * the stdout pl_clean_stdout() returned; with 'orig' NULL, or when stdout
 * was not replaced, only fflush(stdout).  0, or EOF with errno set. */
int pl_clean_stdout_close(FILE *orig);

#endif /* !PL_CLIENT_CLEAN_H */
