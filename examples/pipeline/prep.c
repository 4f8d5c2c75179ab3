/* examples/pipeline/prep.c - stage 1 of the pipeline demo: an MPI program
 * that turns the weekly Mauna Loa CO2 series (date,co2 CSV) into sliding
 * windows of normalised weekly changes, split by time into train, val and
 * test shards (docs/pipeline.md has the formats).
 *
 * Usage: prep [-W WINDOW] [-H HORIZON] [-t TRAIN] [-v VAL] CSV OUTDIR
 *
 * Each rank takes one contiguous block of the data rows and
 *  1. parses it (YYYYMMDD,value; an empty value is missing);
 *  2. fills the missing values by linear interpolation in time: the nearest
 *     valid points outside the block come from every rank's first and last
 *     valid point (MPI_Allgather);
 *  3. takes first differences: the previous rank's last value comes with
 *     one MPI_Sendrecv along the ranks;
 *  4. gets a halo of the next rank's first W+H values (MPI_Sendrecv), so
 *     windows may cross the block's end;
 *  5. computes the normalisation statistics of the training period only
 *     (sum, sum of squares, count: MPI_Allreduce);
 *  6. writes its windows as float32 records into OUTDIR/SPLIT-rNNN.f32; rank
 *     0 gathers the counts (MPI_Gather) and writes OUTDIR/meta.json.
 *
 * A window whose last observed week is t has as input the W normalised
 * differences d[t-W+1..t] (d[i] = x[i] - x[i-1]) and as target the change
 * x[t+H] - x[t]. It belongs to the rank that holds its first difference.
 * Windows are split by time, in order: the first TRAIN of them train, the
 * next VAL val, the rest test. Any error ends every rank with exit code 1
 * and one message from the first rank that saw it.
 *
 * The same work runs in a pilot pool (docs/pipeline.md, "Stage 1 on a
 * pool"): libprep.so's prep_fn is prep on the task's communicator, with the
 * same arguments and the same output, and no MPI_Init of its own. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <mpi.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "pilot_fn.h"

enum split { SPLIT_TRAIN, SPLIT_VAL, SPLIT_TEST, NSPLIT };
static const char *const split_name[NSPLIT] = { "train", "val", "test" };

/* floats per window record: W inputs, then these */
enum { REC_TARGET, REC_LAST, REC_FUTURE, REC_TIME, REC_EXTRA };

struct prep {
    MPI_Comm comm;          /* the ranks: the world, or a pool task's */
    int rank, size;
    int W, H;
    double ftrain, fval;
    const char *csv, *outdir;
    char err[512];          /* this rank's first error, "" if none */

    long nrows;             /* data rows in the file */
    long lo, hi;            /* this rank's rows: [lo, hi) */
    int *date;              /* hi - lo dates, YYYYMMDD */
    double *day;            /* day number: 1 is 0001-01-01 (Python's
                               date.toordinal()), so every day is > 0 and
                               -1 can mean "none" */
    double *x;              /* values, NAN where missing until filled */
    long nmissing;          /* in this block */
};

static void seterr(struct prep *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static void seterr(struct prep *p, const char *fmt, ...)
{
    va_list ap;

    if (p->err[0])
        return;             /* keep the first */
    va_start(ap, fmt);
    vsnprintf(p->err, sizeof(p->err), fmt, ap);
    va_end(ap);
}

/* Collective: 0 if no rank has an error, else 1 after the lowest rank with
 * an error has printed it. */
static int check(struct prep *p)
{
    int mine = p->err[0] ? p->rank : p->size, first;

    MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, p->comm);
    if (first == p->size)
        return 0;
    if (first == p->rank) {
        fprintf(stderr, "prep: error: %s\n", p->err);
        fflush(stderr);
    }
    return 1;
}

/* days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
 * days_from_civil) */
static long civil_days(int y, int m, int d)
{
    y -= m <= 2;
    long era = (y >= 0 ? y : y - 399) / 400;
    long yoe = y - era * 400;
    long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

/* the day number of 1970-01-01 */
#define EPOCH_ORDINAL 719163L

/* Parse "YYYYMMDD": 0, or -1 if it is not a valid date. */
static int parse_date(const char *s, size_t len, int *date, double *day)
{
    int v = 0;

    if (len != 8)
        return -1;
    for (size_t i = 0; i < 8; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    int y = v / 10000, m = v / 100 % 100, d = v % 100;
    static const int mdays[] = { 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30,
                                 31 };
    if (m < 1 || m > 12 || d < 1 || d > mdays[m - 1])
        return -1;
    *date = v;
    *day = (double)(civil_days(y, m, d) + EPOCH_ORDINAL);
    return 0;
}

/* Read the whole file: a NUL-terminated buffer, or NULL with p->err set. */
static char *slurp(struct prep *p)
{
    FILE *f;
    char *buf = NULL;
    long n;

    if (!(f = fopen(p->csv, "r"))) {
        seterr(p, "%s: %s", p->csv, strerror(errno));
        return NULL;
    }
    if (fseek(f, 0, SEEK_END) < 0 || (n = ftell(f)) < 0
        || fseek(f, 0, SEEK_SET) < 0) {
        seterr(p, "%s: %s", p->csv, strerror(errno));
        goto error;
    }
    if (!(buf = malloc((size_t)n + 1))) {
        seterr(p, "%s: out of memory", p->csv);
        goto error;
    }
    if (fread(buf, 1, (size_t)n, f) != (size_t)n) {
        seterr(p, "%s: read error", p->csv);
        goto error;
    }
    buf[n] = '\0';
    if (strlen(buf) != (size_t)n) {
        seterr(p, "%s: not a text file (NUL byte)", p->csv);
        goto error;
    }
    fclose(f);
    return buf;
error:
    free(buf);
    fclose(f);
    return NULL;
}

/* Every rank reads the file (a few tens of kB), counts its data rows and
 * parses only its own block. */
static int load(struct prep *p)
{
    char *buf, *line, *next;
    long row = -1, lineno = 0;

    if (!(buf = slurp(p)))
        return -1;
    /* the rows: lines after the header, blank last line allowed */
    long nlines = 0;
    for (char *s = buf; *s; s++)
        if (*s == '\n')
            nlines++;
    if (buf[0] && buf[strlen(buf) - 1] != '\n')
        nlines++;
    p->nrows = nlines - 1;
    if (strncmp(buf, "date,co2\n", 9) != 0
        && strncmp(buf, "date,co2\r\n", 10) != 0) {
        seterr(p, "%s: line 1: expected the header 'date,co2'", p->csv);
        goto error;
    }
    if (p->nrows < 2) {
        seterr(p, "%s: no data rows", p->csv);
        goto error;
    }
    p->lo = p->nrows * p->rank / p->size;
    p->hi = p->nrows * (p->rank + 1) / p->size;
    long n = p->hi - p->lo;
    p->date = calloc((size_t)n, sizeof(*p->date));
    p->day = calloc((size_t)n, sizeof(*p->day));
    p->x = calloc((size_t)n, sizeof(*p->x));
    if (!p->date || !p->day || !p->x) {
        seterr(p, "out of memory");
        goto error;
    }
    for (line = buf; line && *line; line = next, row++) {
        lineno++;
        if ((next = strchr(line, '\n')))
            *next++ = '\0';
        if (row < p->lo || row >= p->hi)
            continue;
        size_t len = strlen(line);
        if (len > 0 && line[len - 1] == '\r')
            line[--len] = '\0';
        char *comma = strchr(line, ',');
        long i = row - p->lo;
        if (!comma || parse_date(line, (size_t)(comma - line), &p->date[i],
                                 &p->day[i]) < 0) {
            seterr(p, "%s: line %ld: expected YYYYMMDD,VALUE, got '%.40s'",
                   p->csv, lineno, line);
            goto error;
        }
        if (i > 0 && p->day[i] <= p->day[i - 1]) {
            seterr(p, "%s: line %ld: date %d is not after %d", p->csv,
                   lineno, p->date[i], p->date[i - 1]);
            goto error;
        }
        const char *v = comma + 1;
        if (*v == '\0') {
            p->x[i] = NAN;
            p->nmissing++;
            continue;
        }
        char *end;
        errno = 0;
        p->x[i] = strtod(v, &end);
        if (errno || *end || !isfinite(p->x[i])) {
            seterr(p, "%s: line %ld: bad value '%.40s'", p->csv, lineno, v);
            goto error;
        }
    }
    free(buf);
    return 0;
error:
    free(buf);
    return -1;
}

/* Fill the missing values. pts holds each rank's first and last valid
 * point as (day, value, day, value), day -1 where a rank has none. */
static int fill(struct prep *p)
{
    long n = p->hi - p->lo;
    double mine[4] = { -1, 0, -1, 0 };

    for (long i = 0; i < n; i++)
        if (!isnan(p->x[i])) {
            if (mine[0] < 0) {
                mine[0] = p->day[i];
                mine[1] = p->x[i];
            }
            mine[2] = p->day[i];
            mine[3] = p->x[i];
        }
    double *pts = malloc(sizeof(double) * 4 * (size_t)p->size);
    if (!pts) {
        seterr(p, "out of memory");
        return -1;
    }
    MPI_Allgather(mine, 4, MPI_DOUBLE, pts, 4, MPI_DOUBLE, p->comm);
    /* the nearest valid point before the block and after it */
    double bday = -1, bval = 0, aday = -1, aval = 0;
    for (int r = p->rank - 1; r >= 0 && bday < 0; r--)
        if (pts[4 * r + 2] >= 0) {
            bday = pts[4 * r + 2];
            bval = pts[4 * r + 3];
        }
    for (int r = p->rank + 1; r < p->size && aday < 0; r++)
        if (pts[4 * r] >= 0) {
            aday = pts[4 * r];
            aval = pts[4 * r + 1];
        }
    int any = 0;
    for (int r = 0; r < p->size; r++)
        any |= pts[4 * r] >= 0;
    free(pts);
    if (!any) {
        seterr(p, "%s: every value is missing", p->csv);
        return -1;
    }
    /* one pass forward: the previous valid point; the next one is found
     * by scanning ahead from each gap */
    double pday = bday, pval = bval;
    for (long i = 0; i < n; i++) {
        if (!isnan(p->x[i])) {
            pday = p->day[i];
            pval = p->x[i];
            continue;
        }
        double nday = aday, nval = aval;
        for (long j = i + 1; j < n; j++)
            if (!isnan(p->x[j])) {
                nday = p->day[j];
                nval = p->x[j];
                break;
            }
        if (pday < 0)               /* before the first valid point */
            p->x[i] = nval;
        else if (nday < 0)          /* after the last one */
            p->x[i] = pval;
        else
            p->x[i] = pval + (nval - pval) * (p->day[i] - pday)
                             / (nday - pday);
    }
    return 0;
}

/* s as a JSON string */
static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static int write_all(FILE *f, const float *v, size_t n)
{
    return fwrite(v, sizeof(*v), n, f) == n ? 0 : -1;
}

/* This rank's windows, written into OUTDIR/SPLIT-rNNN.f32. */
struct windows {
    long first, last;       /* the window numbers k of this rank: [first,
                               last); window k has t = W + k */
    long nwin;              /* all ranks */
    long ntrain, nval;
    long count[NSPLIT];
    double stat[6];         /* train diffs: sum, sumsq, n; targets: same */
};

/* The whole of prep on the ranks of comm, collective: 0, or 1 on every
 * rank after one of them has printed the error. Frees what it allocates
 * and leaves MPI initialised, so that it can run many times in one process
 * (a pool's worker). */
static int prep_run(MPI_Comm comm, int argc, char **argv)
{
    struct prep p = { .comm = comm, .W = 52, .H = 4, .ftrain = 0.70,
                      .fval = 0.15 };
    struct windows w = { 0 };
    double *xe = NULL, *ye = NULL, *d = NULL, *pack = NULL;
    FILE *out[NSPLIT] = { NULL };
    int opt, rc = 1;
    double t0;

    t0 = MPI_Wtime();
    MPI_Comm_rank(comm, &p.rank);
    MPI_Comm_size(comm, &p.size);

    /* a pool's worker calls us again and again in one process: getopt
     * must start over each time */
    optind = 1;
    while ((opt = getopt(argc, argv, "W:H:t:v:h")) != -1) {
        char *end;
        switch (opt) {
        case 'W':
        case 'H': {
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 10000)
                seterr(&p, "-%c %s: expected 1..10000", opt, optarg);
            else if (opt == 'W')
                p.W = (int)v;
            else
                p.H = (int)v;
            break;
        }
        case 't':
        case 'v': {
            double v = strtod(optarg, &end);
            if (*end || !(v > 0 && v < 1))
                seterr(&p, "-%c %s: expected a fraction in (0, 1)", opt,
                       optarg);
            else if (opt == 't')
                p.ftrain = v;
            else
                p.fval = v;
            break;
        }
        default:
            seterr(&p, "usage: prep [-W WINDOW] [-H HORIZON] [-t TRAIN] "
                       "[-v VAL] CSV OUTDIR");
        }
    }
    if (optind + 2 != argc)
        seterr(&p, "usage: prep [-W WINDOW] [-H HORIZON] [-t TRAIN] "
                   "[-v VAL] CSV OUTDIR");
    else if (p.ftrain + p.fval >= 1)
        seterr(&p, "-t %g + -v %g leave nothing to test", p.ftrain, p.fval);
    if (check(&p))
        goto done;
    p.csv = argv[optind];
    p.outdir = argv[optind + 1];

    /* 1. parse this rank's block */
    load(&p);
    if (check(&p))
        goto done;
    long n = p.hi - p.lo;
    int halo = p.W + p.H;
    if (n < halo)
        seterr(&p, "%ld rows on %d ranks: each block needs at least W+H = "
                   "%d rows", p.nrows, p.size, halo);
    long nwin = p.nrows - p.W - p.H;    /* t = W .. nrows-1-H */
    if (nwin < 3)
        seterr(&p, "%ld rows make %ld windows of W=%d, H=%d: too few",
               p.nrows, nwin, p.W, p.H);
    if (check(&p))
        goto done;

    /* 2. fill the gaps, with the neighbours' valid points */
    fill(&p);
    if (check(&p))
        goto done;

    /* 3, 4. xe = x[lo-1 .. hi+halo) where they exist: the previous
     * rank's last value, this block, the next rank's first values; ye the
     * same rows' days (the targets' dates) */
    if (!(xe = malloc(sizeof(double) * (size_t)(n + 1 + halo)))
        || !(ye = malloc(sizeof(double) * (size_t)(n + 1 + halo)))
        || !(d = malloc(sizeof(double) * (size_t)(n + halo)))
        || !(pack = malloc(sizeof(double) * 4 * (size_t)halo)))
        seterr(&p, "out of memory");
    if (check(&p))
        goto done;
    int prev = p.rank > 0 ? p.rank - 1 : MPI_PROC_NULL;
    int next = p.rank < p.size - 1 ? p.rank + 1 : MPI_PROC_NULL;
    xe[0] = ye[0] = NAN;
    MPI_Sendrecv(&p.x[n - 1], 1, MPI_DOUBLE, next, 1, &xe[0], 1, MPI_DOUBLE,
                 prev, 1, p.comm, MPI_STATUS_IGNORE);
    memcpy(&xe[1], p.x, sizeof(double) * (size_t)n);
    memcpy(&ye[1], p.day, sizeof(double) * (size_t)n);
    /* the halo: (value, day) pairs of the next rank's first W+H rows;
     * pack holds what is sent, then what is received */
    double *got = pack + 2 * halo;
    for (int j = 0; j < halo; j++) {
        pack[2 * j] = p.x[j];
        pack[2 * j + 1] = p.day[j];
    }
    long nhalo = next == MPI_PROC_NULL ? 0 : halo;
    MPI_Sendrecv(pack, 2 * halo, MPI_DOUBLE, prev, 2, got, 2 * (int)nhalo,
                 MPI_DOUBLE, next, 2, p.comm, MPI_STATUS_IGNORE);
    for (long j = 0; j < nhalo; j++) {
        xe[1 + n + j] = got[2 * j];
        ye[1 + n + j] = got[2 * j + 1];
    }
    /* X(i): the value of global row i, lo-1 <= i < hi+nhalo; DAY(i) its
     * day (i >= lo); D(i) its difference, lo <= i (i >= 1) */
#define X(i) xe[(i) - p.lo + 1]
#define DAY(i) ye[(i) - p.lo + 1]
#define D(i) d[(i) - p.lo]
    for (long i = p.lo; i < p.hi + nhalo; i++)
        D(i) = i >= 1 ? X(i) - X(i - 1) : NAN;

    /* 5. the split, and the training period's statistics. Window k has
     * t = W + k, inputs D(t-W+1..t), target X(t+H) - X(t); the training
     * period is every row up to the last training window's target. */
    w.nwin = nwin;
    w.ntrain = (long)(p.ftrain * (double)nwin);
    w.nval = (long)(p.fval * (double)nwin);
    if (w.ntrain < 1 || w.nval < 1 || nwin - w.ntrain - w.nval < 1)
        seterr(&p, "%ld windows: a split would be empty", nwin);
    if (check(&p))
        goto done;
    long train_end = p.W + (w.ntrain - 1) + p.H;    /* last training row */
    double mine[6] = { 0 };
    for (long i = p.lo > 1 ? p.lo : 1; i < p.hi && i <= train_end; i++) {
        mine[0] += D(i);
        mine[1] += D(i) * D(i);
        mine[2] += 1;
    }
    /* window k starts at row s = k + 1: this rank's windows start in
     * [lo, hi) */
    w.first = p.lo > 1 ? p.lo - 1 : 0;
    w.last = p.hi - 1 < nwin ? p.hi - 1 : nwin;
    if (w.last < w.first)
        w.last = w.first;
    for (long k = w.first; k < w.last && k < w.ntrain; k++) {
        long t = p.W + k;
        double y = X(t + p.H) - X(t);
        mine[3] += y;
        mine[4] += y * y;
        mine[5] += 1;
    }
    MPI_Allreduce(mine, w.stat, 6, MPI_DOUBLE, MPI_SUM, p.comm);
    double mean = w.stat[0] / w.stat[2];
    double std = sqrt(fmax(w.stat[1] / w.stat[2] - mean * mean, 0));
    double tmean = w.stat[3] / w.stat[5];
    double tstd = sqrt(fmax(w.stat[4] / w.stat[5] - tmean * tmean, 0));
    if (!(std > 0) || !(tstd > 0))
        seterr(&p, "the training period's values are constant: cannot "
                   "normalise");
    if (check(&p))
        goto done;

    /* 6. the shards */
    if (p.rank == 0 && mkdir(p.outdir, 0777) < 0 && errno != EEXIST)
        seterr(&p, "mkdir %s: %s", p.outdir, strerror(errno));
    if (check(&p))
        goto done;
    for (int s = 0; s < NSPLIT; s++) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s-r%03d.f32", p.outdir,
                 split_name[s], p.rank);
        if (!(out[s] = fopen(path, "w")))
            seterr(&p, "%s: %s", path, strerror(errno));
    }
    if (check(&p))
        goto done;
    size_t rlen = (size_t)p.W + REC_EXTRA;
    float *rec = malloc(sizeof(float) * rlen);
    if (!rec)
        seterr(&p, "out of memory");
    for (long k = w.first; rec && k < w.last; k++) {
        long t = p.W + k;
        int s = k < w.ntrain ? SPLIT_TRAIN
                : k < w.ntrain + w.nval ? SPLIT_VAL : SPLIT_TEST;
        for (int j = 0; j < p.W; j++)
            rec[j] = (float)((D(t - p.W + 1 + j) - mean) / std);
        rec[p.W + REC_TARGET] = (float)(X(t + p.H) - X(t));
        rec[p.W + REC_LAST] = (float)X(t);
        rec[p.W + REC_FUTURE] = (float)X(t + p.H);
        /* the target's date as a decimal year: 1970 + days / 365.2425 is
         * within a day of the calendar */
        rec[p.W + REC_TIME] = (float)(1970.0 + (DAY(t + p.H) - EPOCH_ORDINAL)
                                               / 365.2425);
        if (write_all(out[s], rec, rlen) < 0) {
            seterr(&p, "%s/%s-r%03d.f32: %s", p.outdir, split_name[s],
                   p.rank, strerror(errno));
            break;
        }
        w.count[s]++;
    }
    free(rec);
    for (int s = 0; s < NSPLIT; s++) {
        if (out[s] && fclose(out[s]) != 0)
            seterr(&p, "%s/%s-r%03d.f32: %s", p.outdir, split_name[s],
                   p.rank, strerror(errno));
        out[s] = NULL;
    }
    if (check(&p))
        goto done;
#undef X
#undef DAY
#undef D

    /* meta.json: the counts per rank and split, the dates, the totals */
    int cnt[NSPLIT], *all = NULL;
    for (int s = 0; s < NSPLIT; s++)
        cnt[s] = (int)w.count[s];
    int ends[2] = { p.date[0], p.date[n - 1] }, *allends = NULL;
    long nmiss = 0;
    if (p.rank == 0) {
        all = malloc(sizeof(int) * NSPLIT * (size_t)p.size);
        allends = malloc(sizeof(int) * 2 * (size_t)p.size);
    }
    MPI_Gather(cnt, NSPLIT, MPI_INT, all, NSPLIT, MPI_INT, 0, p.comm);
    MPI_Gather(ends, 2, MPI_INT, allends, 2, MPI_INT, 0, p.comm);
    MPI_Reduce(&p.nmissing, &nmiss, 1, MPI_LONG, MPI_SUM, 0, p.comm);
    if (p.rank == 0) {
        char path[PATH_MAX], tmp[PATH_MAX];
        snprintf(path, sizeof(path), "%s/meta.json", p.outdir);
        snprintf(tmp, sizeof(tmp), "%s/.meta.json.tmp", p.outdir);
        FILE *f = fopen(tmp, "w");
        if (!f) {
            seterr(&p, "%s: %s", tmp, strerror(errno));
        } else {
            fprintf(f, "{\n  \"source\": ");
            json_string(f, p.csv);
            fprintf(f, ",\n  \"rows\": %ld,\n"
                       "  \"missing\": %ld,\n  \"first_date\": \"%d\",\n"
                       "  \"last_date\": \"%d\",\n  \"ranks\": %d,\n",
                    p.nrows, nmiss, allends[0],
                    allends[2 * p.size - 1], p.size);
            fprintf(f, "  \"W\": %d,\n  \"H\": %d,\n  \"record_floats\": %d,\n"
                       "  \"record\": [\"W normalised differences\", "
                       "\"target: change over H (ppm)\", \"last (ppm)\", "
                       "\"future (ppm)\", \"target time (decimal year)\"],\n",
                    p.W, p.H, p.W + REC_EXTRA);
            fprintf(f, "  \"windows\": %ld,\n  \"train_fraction\": %g,\n"
                       "  \"val_fraction\": %g,\n  \"train_end_row\": %ld,\n",
                    nwin, p.ftrain, p.fval, train_end);
            fprintf(f, "  \"mean\": %.17g,\n  \"std\": %.17g,\n"
                       "  \"n_stat\": %.0f,\n  \"target_mean\": %.17g,\n"
                       "  \"target_std\": %.17g,\n",
                    mean, std, w.stat[2], tmean, tstd);
            fprintf(f, "  \"counts\": {");
            for (int s = 0; s < NSPLIT; s++) {
                fprintf(f, "%s\n    \"%s\": [", s ? "," : "", split_name[s]);
                for (int r = 0; r < p.size; r++)
                    fprintf(f, "%s%d", r ? ", " : "", all[NSPLIT * r + s]);
                fprintf(f, "]");
            }
            fprintf(f, "\n  },\n  \"totals\": {\"train\": %ld, \"val\": %ld, "
                       "\"test\": %ld},\n",
                    w.ntrain, w.nval, nwin - w.ntrain - w.nval);
            fprintf(f, "  \"seconds\": %.3f\n}\n", MPI_Wtime() - t0);
            if (ferror(f) | (fclose(f) != 0))
                seterr(&p, "%s: write error", tmp);
            else if (rename(tmp, path) < 0)
                seterr(&p, "rename %s: %s", path, strerror(errno));
        }
        if (!p.err[0])
            printf("prep: %ld rows (%ld missing, filled), %d..%d, %d ranks: "
                   "%ld windows W=%d H=%d: train %ld, val %ld, test %ld; "
                   "diff mean %.4f std %.4f; %.3f s\n",
                   p.nrows, nmiss, allends[0], allends[2 * p.size - 1],
                   p.size, nwin, p.W, p.H, w.ntrain, w.nval,
                   nwin - w.ntrain - w.nval, mean, std, MPI_Wtime() - t0);
        free(all);
        free(allends);
    }
    if (check(&p))
        goto done;
    rc = 0;
done:
    for (int s = 0; s < NSPLIT; s++)
        if (out[s])
            fclose(out[s]);
    free(xe);
    free(ye);
    free(pack);
    free(d);
    free(p.date);
    free(p.day);
    free(p.x);
    return rc;
}

int main(int argc, char **argv)
{
    int rc;

    MPI_Init(&argc, &argv);
    rc = prep_run(MPI_COMM_WORLD, argc, argv);
    MPI_Finalize();
    return rc;
}

/* The pool's entry point (worker/pilot_fn.h): prep on the task's ranks,
 * `pilot submit --pool P --fn libprep.so:prep_fn -- [OPTIONS] CSV OUTDIR`;
 * argv[0] is "LIB.so:SYMBOL", as a program's name would be. */
__attribute__((visibility("default"))) pilot_fn_t prep_fn;

int prep_fn(const struct pilot_fn_ctx *ctx, int argc, char **argv)
{
    return prep_run(ctx->comm, argc, argv);
}
