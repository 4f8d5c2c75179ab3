"""etl.jobs - a pool function in Python: a distributed sample sort with
mpi4py on the task's communicator (examples/pool/README.md).

    sort_table(ctx, ROWS_OR_PATH, KEYS="1000", SKEW="0", SEED="1",
               OUTDIR=None)

ROWS_OR_PATH is either a row count, and then the table is the one sort.c
sorts (table.h's table 3 of ROWS rows, keys in [0, KEYS), skew SKEW, seed
SEED: this module generates the same rows, bit for bit), or the path of a
text file of "KEY VALUE" lines (unsigned integers below 2^64; the other
arguments are then ignored).  The arguments may be strings, as a task's
arguments are.  Rank r takes rows [r*N/p, (r+1)*N/p), sorts them by key
and value, sends SAMPLES of them to everyone (allgather), and the size-1
splitters from all samples decide where each row goes (Alltoallv).  Then
the checks of sort.c: rows in order within each rank and across ranks
(an exscan of the largest last row), count and multiset checksum kept.
Rank 0 prints one line, for a generated table the line sort.c and
'poolcheck sort' print:

    sort rows=N keys=K skew=S seed=X checksum=C ok
    sort file=PATH rows=N checksum=C ok

and every rank returns 0; 2 if a check failed, 1 for bad arguments.
With OUTDIR, rank r writes its sorted rows to OUTDIR/part-r in sort.c's
format (pairs of little-endian uint64), which 'poolcheck sorted' reads.

ctx needs comm (an mpi4py Intracomm holding exactly the task's ranks),
rank and size.  Run without a pool, on MPI_COMM_WORLD:

    mpirun -n 4 python3 -m etl.jobs ROWS_OR_PATH [KEYS SKEW SEED [OUTDIR]]

(with examples/pool on PYTHONPATH).
"""

import math
import os
import sys
import types

import numpy as np
from mpi4py import MPI

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
TAB_SORT = 3            # table.h's id of the sort's table
ZIPF_HEAD = 65536       # table.c's exact keys
ZIPF_BUCKET_SHIFT = 6
SAMPLES = 128           # per rank, as sort.c

U = np.uint64


def mix64(x):
    """table.c's tab_mix64 on a uint64 array (wrapping, as in C)."""
    x = x ^ (x >> U(30))
    x = x * U(0xBF58476D1CE4E5B9)
    x = x ^ (x >> U(27))
    x = x * U(0x94D049BB133111EB)
    return x ^ (x >> U(31))


def mix64_int(x):
    """tab_mix64 on a Python int."""
    x ^= x >> 30
    x = (x * 0xBF58476D1CE4E5B9) & M64
    x ^= x >> 27
    x = (x * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def mulhi(a, b):
    """floor(a * b / 2^64) on uint64 arrays, from 32-bit halves."""
    m32 = U(0xFFFFFFFF)
    s32 = U(32)
    al, ah = a & m32, a >> s32
    bl, bh = b & m32, b >> s32
    hl = ah * bl
    # each term < 2^32 but the last, and the sum stays below 2^64
    cross = ((al * bl) >> s32) + (hl & m32) + al * bh
    return ah * bh + (hl >> s32) + (cross >> s32)


def zipf_table(keys, skew):
    """table.c's zipf_init: the same thresholds and bucket starts, from
    the same libm calls (math.pow and friends call the C library) in the
    same order."""
    head = min(keys, ZIPF_HEAD)
    lo = list(range(head))
    w = [math.pow(float(i + 1), -skew) for i in range(head)]
    start = head
    while start < keys:
        wd = start >> ZIPF_BUCKET_SHIFT
        hi = start + wd if wd < keys - start else keys
        a, b = float(start) + 0.5, float(hi) + 0.5
        lr = math.log1p((b - a) / a)
        t = 1.0 - skew
        w.append(lr if abs(t) < 1e-12
                 else math.pow(a, t) * math.expm1(t * lr) / t)
        lo.append(start)
        start = hi
    lo.append(keys)
    total = 0.0
    for x in w:
        total += x
    thresh, acc = [], 0.0
    for x in w[:-1]:
        acc += x
        f = acc / total
        thresh.append(M64 if f >= 1.0 else int(math.ldexp(f, 64)))
    return (np.array(thresh, dtype=np.uint64),
            np.array(lo, dtype=np.uint64))


def gen_rows(nrows, keys, skew, seed, first, n, table_id=TAB_SORT):
    """Rows [first, first + n) of table.h's table: an (n, 2) uint64 array
    of (key, value)."""
    base = mix64_int((mix64_int(seed) + table_id * GOLDEN) & M64)
    with np.errstate(over="ignore"):
        i = np.arange(first, first + n, dtype=np.uint64)
        ctr = U(base) + U(4) * i * U(GOLDEN)
        rows = np.empty((n, 2), dtype=np.uint64)
        rows[:, 1] = mix64(ctr)
        u = mix64(ctr + U(GOLDEN))
        if skew > 0.0 and keys > 1:
            thresh, lo = zipf_table(keys, skew)
            a = np.searchsorted(thresh, u, side="right")
            width = lo[a + 1] - lo[a]
            extra = mulhi(mix64(ctr + U((2 * GOLDEN) & M64)), width)
            rows[:, 0] = lo[a] + np.where(width == U(1), U(0), extra)
        else:
            rows[:, 0] = mulhi(u, np.full(n, keys, dtype=np.uint64))
    return rows


def row_hash(rows):
    """table.c's tab_row_hash per row."""
    with np.errstate(over="ignore"):
        return mix64(mix64(rows[:, 0] ^ U(0xA4093822299F31D0)) + rows[:, 1])


def lexsort(rows):
    return rows[np.lexsort((rows[:, 1], rows[:, 0]))]


def read_slice(path, rank, size):
    """Rows [r*N/p, (r+1)*N/p) of a "KEY VALUE" text file, and N."""
    with open(path) as f:
        lines = [ln.split() for ln in f if ln.strip()]
    n = len(lines)
    a, b = n * rank // size, n * (rank + 1) // size
    rows = np.empty((b - a, 2), dtype=np.uint64)
    for j, parts in enumerate(lines[a:b]):
        vals = [int(x) for x in parts]
        if len(vals) != 2 or not all(0 <= x <= M64 for x in vals):
            raise ValueError("%s line %d: not 'KEY VALUE' (unsigned "
                             "64-bit integers)" % (path, a + j + 1))
        rows[j] = vals
    return rows, n


def sort_table(ctx, path_or_rows, keys="1000", skew="0", seed="1",
               outdir=None):
    comm, rank, size = ctx.comm, ctx.rank, ctx.size
    say = sys.stderr.write if rank == 0 else (lambda s: None)
    gen = str(path_or_rows).isdigit()
    try:
        if gen:
            nrows, keys, seed = int(path_or_rows), int(keys), int(seed)
            skew = float(skew)
            if not (keys >= 1 and 0.0 <= skew <= 100.0 and 0 <= seed <= M64
                    and nrows <= M64 and keys <= M64):
                raise ValueError("KEYS >= 1, 0 <= SKEW <= 100, SEED < 2^64")
            a, b = nrows * rank // size, nrows * (rank + 1) // size
            rows = gen_rows(nrows, keys, skew, seed, a, b - a)
        else:
            rows, nrows = read_slice(path_or_rows, rank, size)
        err = ""
    except (OSError, ValueError, OverflowError) as e:
        err = "%s: %s" % (type(e).__name__, e)
    # a file may fail on one rank only: decide together
    errs = comm.allgather(err)
    if any(errs):
        say("sort_table: %s\n" % next(e for e in errs if e))
        return 1
    gen_sum = int(row_hash(rows).sum(dtype=np.uint64))

    # sort locally, sample, split at the gathered samples' even ranks
    rows = lexsort(rows)
    n = len(rows)
    m = min(n, SAMPLES)
    samp = rows[(2 * np.arange(m) + 1) * n // (2 * m)] if m else rows[:0]
    allsamp = lexsort(np.concatenate(comm.allgather(samp)))
    t = len(allsamp)
    counts = np.zeros(size, dtype=np.int64)
    prev = 0
    for d in range(size):
        end = n
        if d + 1 < size:
            end = 0
            if t:
                sk, sv = allsamp[t * (d + 1) // size]
                # the first row above the splitter (key, value)
                lo_k = np.searchsorted(rows[:, 0], sk, side="left")
                hi_k = np.searchsorted(rows[:, 0], sk, side="right")
                end = lo_k + np.searchsorted(rows[lo_k:hi_k, 1], sv,
                                             side="right")
        end = max(end, prev)
        counts[d] = end - prev
        prev = end
    rcounts = np.empty(size, dtype=np.int64)
    comm.Alltoall(counts, rcounts)
    got = np.empty((int(rcounts.sum()), 2), dtype=np.uint64)
    sc, rc = 2 * counts, 2 * rcounts
    sd = np.concatenate(([0], np.cumsum(sc)[:-1]))
    rd = np.concatenate(([0], np.cumsum(rc)[:-1]))
    comm.Alltoallv([rows, (sc, sd), MPI.UINT64_T],
                   [got, (rc, rd), MPI.UINT64_T])
    got = lexsort(got)

    # the checks, as sort.c's
    ng = len(got)
    k, v = got[:, 0], got[:, 1]
    unsorted = int(np.count_nonzero((k[1:] < k[:-1])
                                    | ((k[1:] == k[:-1]) & (v[1:] < v[:-1]))))
    last = (1, int(k[-1]), int(v[-1])) if ng else (0, 0, 0)
    before = comm.exscan(last, op=MPI.MAX)   # tuples: lexicographic
    breaks = int(rank > 0 and ng > 0 and before is not None and before[0]
                 and before[1:] > (int(k[0]), int(v[0])))
    first = comm.exscan(ng, op=MPI.SUM)
    if rank == 0:
        first = 0           # exscan gives rank 0 None
    with np.errstate(over="ignore"):
        pos = U(2) * (U(first) + np.arange(ng, dtype=np.uint64)) + U(1)
        h = row_hash(got)
        checksum = int((h * pos).sum(dtype=np.uint64))
        got_sum = int(h.sum(dtype=np.uint64))
    if outdir:
        try:
            os.makedirs(outdir, exist_ok=True)
            got.astype("<u8").tofile(os.path.join(outdir, "part-%d" % rank))
            err = ""
        except OSError as e:
            err = "%s: %s" % (outdir, e)
        errs = comm.allgather(err)
        if any(errs):
            say("sort_table: %s\n" % next(e for e in errs if e))
            return 1
    tot = comm.allreduce(np.array([n, ng, unsorted, breaks], dtype=np.int64),
                         op=MPI.SUM)
    sums = comm.allgather((gen_sum, got_sum, checksum))
    gen_sum, got_sum, checksum = (sum(s[i] for s in sums) & M64
                                  for i in range(3))
    ok = True
    if tot[0] != nrows or tot[1] != nrows:
        say("sort_table: %d rows read, %d after the exchange, not %d\n"
            % (tot[0], tot[1], nrows))
        ok = False
    if got_sum != gen_sum:
        say("sort_table: the rows after the exchange are not the rows "
            "read (multiset checksums differ)\n")
        ok = False
    if tot[2] or tot[3]:
        say("sort_table: out of order: %d rows within ranks, %d between "
            "ranks\n" % (tot[2], tot[3]))
        ok = False
    if not ok:
        return 2
    if rank == 0:
        if gen:
            # %g, as the C functions print the skew
            print("sort rows=%d keys=%d skew=%s seed=%d checksum=%d ok"
                  % (nrows, keys, "%g" % skew, seed, checksum))
        else:
            print("sort file=%s rows=%d checksum=%d ok"
                  % (path_or_rows, nrows, checksum))
        sys.stdout.flush()
    return 0


def main(argv):
    if not 2 <= len(argv) <= 6:
        sys.stderr.write("usage: python3 -m etl.jobs ROWS_OR_PATH "
                         "[KEYS SKEW SEED [OUTDIR]]\n")
        return 1
    comm = MPI.COMM_WORLD.Dup()
    ctx = types.SimpleNamespace(comm=comm, rank=comm.Get_rank(),
                                size=comm.Get_size(), task_id=0,
                                outdir=os.getcwd())
    rc = sort_table(ctx, *argv[1:])
    rc = comm.allreduce(rc, op=MPI.MAX)
    comm.Free()
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv))
