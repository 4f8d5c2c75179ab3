/* proto/journal.h - output journals: every task's output on a node in few files
 *
 * With --output journal (docs/output.md) an agent writes what its tasks
 * print into its node's journal, DIR/journal/<node>/<seq>.pj, instead of
 * two files per task: frames of one read each, framed by task, attempt,
 * rank and stream, each with its length and a CRC-32 (a torn tail, what
 * an agent killed mid-write leaves, is found and skipped).  Beside each
 * segment an index, <seq>.pji, has a record where a rank's output starts
 * in that segment and one where it ends, so that a reader seeks to a
 * task's frames instead of reading whole journals.  A segment is closed
 * at a size and the next one opened (rotation); an agent started again
 * never appends to a segment it did not open.
 *
 * Written by the agent (pl_jw_*), read by the client and the tests
 * (pl_jr_*): this is the one definition of the format.  Numbers are
 * little-endian.
 */
#ifndef PL_PROTO_JOURNAL_H
#define PL_PROTO_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/error.h"

#define PL_J_MAGIC "PLJRNL01"      /* a segment's first 8 bytes */
#define PL_J_HEAD 16               /* segment header: magic, 8 reserved */
#define PL_J_FRAME_MAGIC 0x4a4c5046u /* "FPLJ" */
#define PL_J_FRAME_HEAD 40         /* frame header (docs/output.md) */
#define PL_J_FRAME_MAX (1u << 20)  /* payload bytes in one frame */
#define PL_J_INDEX_REC 32          /* an index record */
#define PL_J_SIZE_DEFAULT (256ull << 20) /* rotation size */

enum pl_jstream { PL_J_STDOUT = 1, PL_J_STDERR = 2 };
enum pl_jflag { PL_J_END = 1 };     /* the rank's stream ends here */
enum pl_jkind { PL_JI_START = 1, PL_JI_LAST = 2 };

/* One frame as read. */
struct pl_jframe {
    uint64_t id;
    uint32_t attempt;
    uint32_t rank;
    int stream;            /* enum pl_jstream */
    unsigned flags;        /* enum pl_jflag */
    uint64_t off;          /* where it starts in its segment */
    uint64_t prev;         /* the offset of the stream's previous frame in
                              this segment, 0: none */
    const char *node;      /* its segment, DIR/journal/NODE/SEQ.pj */
    uint32_t seq;          /* ('node' valid until the next call) */
    const char *data;      /* 'len' bytes, valid until the next call */
    uint32_t len;
};

/* CRC-32 (IEEE, as zlib's crc32()) of 'n' bytes, going on from 'crc'
 * (0 to start). */
uint32_t pl_crc32(uint32_t crc, const void *p, size_t n);

/* ---- writing (the agent) ---- */

struct pl_jw;

/* What the writer keeps of one rank's stream; zero it to start. */
struct pl_jstate {
    uint64_t id;
    uint32_t attempt;
    uint32_t rank;
    uint32_t seg;          /* segment of its last frame, 0: none yet */
    uint64_t last;         /* offset of its last frame there */
    uint64_t bytes;        /* payload written in all */
};

/* Open a new segment of node 'node''s journal in pilot directory 'dir'
 * (DIR/journal/NODE/ made 0700 if missing), numbered after the highest
 * there; rotate at 'max' bytes (0: PL_J_SIZE_DEFAULT).  NULL with errp
 * set. */
struct pl_jw *pl_jw_open(const char *dir, const char *node, uint64_t max,
                         struct pl_error *errp);
void pl_jw_close(struct pl_jw *w);

/* Append 'len' bytes (any number: cut into frames of at most
 * PL_J_FRAME_MAX) of stream 'stream' of 's'; each frame is one write,
 * and its index record (the stream's first frame in this segment) the
 * next one.  Rotates first when the segment is full.  0, or -1 with
 * errp (the write failed: the disk is full, say). */
int pl_jw_write(struct pl_jw *w, struct pl_jstate *s, int stream,
                const void *data, size_t len, struct pl_error *errp);

/* The stream of 's' has ended: its last frame's index record. */
int pl_jw_end(struct pl_jw *w, struct pl_jstate *s, struct pl_error *errp);

/* The segment being written (1, 2, ...), and its size so far. */
uint32_t pl_jw_segment(const struct pl_jw *w);
uint64_t pl_jw_size(const struct pl_jw *w);

/* ---- reading (the client, the tests) ---- */

struct pl_jr;

/* Whether a reader wants the frames of attempt 'attempt' of task 'id'. */
typedef bool (*pl_jr_want_f)(uint64_t id, uint32_t attempt, void *arg);

/* A reader of the journals in DIR/journal (every node's, or node
 * 'node''s if not NULL), of the tasks 'want' chooses.  NULL with errp
 * set (ENOENT: no journal there). */
struct pl_jr *pl_jr_open(const char *dir, const char *node, pl_jr_want_f want,
                         void *arg, struct pl_error *errp);
void pl_jr_close(struct pl_jr *r);

/* The next frame wanted, in the order written on each node (the nodes
 * one after the other), into *f.  1: a frame; 0: none more for now (call
 * again later for what is written meanwhile: -f); -1 with errp.  A frame
 * that is torn or fails its check ends its segment's reading (what
 * follows it is not trusted); pl_jr_torn() counts them. */
int pl_jr_next(struct pl_jr *r, struct pl_jframe *f, struct pl_error *errp);
unsigned pl_jr_torn(const struct pl_jr *r);
/* Bytes of journal read for frame headers and data so far (the index
 * saves reading the rest: tests check it). */
uint64_t pl_jr_read_bytes(const struct pl_jr *r);

#endif /* !PL_PROTO_JOURNAL_H */
