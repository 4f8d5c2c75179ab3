/* agent/vetcheck.h - pilot-vetcheck's checks and what they share: the
 * JSON report, the list of failed checks, the exit codes */
#ifndef PL_AGENT_VETCHECK_H
#define PL_AGENT_VETCHECK_H

#include <stddef.h>
#include <stdio.h>

#include <jansson.h>

/* The exit codes, which node vetting reads (docs/vetcheck.md). */
enum pl_vet_rc {
    PL_VET_PASS = 0,   /* every check passed */
    PL_VET_FAIL = 1,   /* a check failed: the report's "failed" says which */
    PL_VET_USAGE = 2,  /* bad arguments: nothing was checked */
    PL_VET_CANNOT = 3, /* the check cannot run here (no GPU, no NVML, no
                          CUDA driver, no NCCL, one MPI rank): "error" */
};

/* One run's report: the JSON object printed on stdout at the end. */
struct pl_vet {
    const char *check; /* "gpu", "net", "nccl": borrowed, static */
    json_t *out;       /* the report; owned */
    json_t *failed;    /* out's "failed": [{check, value, limit, text...}] */
    int nfailed;       /* pl_vet_fail() calls */
    int cannot;        /* pl_vet_cannot() was called */
};

/* Start a report for 'check' (a static string): {"check": check,
 * "host": this node's name, "failed": []}.  Returns 0, or -1 with
 * errno ENOMEM. */
int pl_vet_init(struct pl_vet *v, const char *check);

/* Record a failed check: 'name' ("gpu.temperature"), the figure and the
 * limit it broke (NaN: none), 'where' (an object of more members, such as
 * {"gpu": 0} or {"nodes": [...]}: stolen, may be NULL) and the text a
 * person reads, which also goes to stderr. */
__attribute__((format(printf, 6, 7)))
void pl_vet_fail(struct pl_vet *v, const char *name, double value,
                 double limit, json_t *where, const char *fmt, ...);

/* The check cannot run here: "error" gets the text, which also goes to
 * stderr; the exit code becomes PL_VET_CANNOT. */
__attribute__((format(printf, 2, 3)))
void pl_vet_cannot(struct pl_vet *v, const char *fmt, ...);

/* Finish the report: "status" ("pass", "fail" or "cannot-run") and "ok",
 * print it on stdout as one line, free it.  Returns the exit code. */
int pl_vet_end(struct pl_vet *v);

/* Free the report without printing it (accepts a zeroed 'v'). */
void pl_vet_free(struct pl_vet *v);

/* Parse option 'opt''s value 's', a number in [min, max] (a size may end
 * in K, M or G: powers of 1024, when 'size' is set).  Returns 0, or -1
 * after a message on stderr (a usage error). */
int pl_vet_number(const char *opt, const char *s, double min, double max,
                  int size, double *out);

/* Print the usage of 'check' (NULL: all) on 'f'. */
void pl_vet_usage(FILE *f, const char *check);

/* The partner of rank 'me' in round 'r' (0 to m-2) of the circle
 * method over m places (m even: the ranks, and one place more when their
 * count is odd): place m-1 meets r, the others pair off around the
 * circle so that their places add up to 2r (mod m-1).  Each round is a
 * perfect matching, and the m-1 rounds meet every pair once.  A partner
 * that is not a rank (the extra place) means idle this round. */
int pl_vet_partner(int me, int r, int m);

/* The GPUs CUDA_VISIBLE_DEVICES leaves, as the CUDA driver reads it,
 * among the 'nall' GPUs whose UUIDs ("GPU-...", NVML's order) are
 * 'uuids': idx[] (room for nall) gets their places in 'uuids', in the
 * variable's order.  'cvd' NULL (unset): all of them.  Else a list of
 * indices or UUIDs ("GPU-" and a unique prefix), which ends at the first
 * entry that is none of these, or repeats one ("" leaves none).
 * Returns how many. */
unsigned int pl_vet_visible(const char *cvd, const char *const *uuids,
                            unsigned int nall, unsigned int *idx);

/* CUDA's 16 bytes of a UUID as NVML writes it: "GPU-" and 8-4-4-4-12
 * hex digits, into buf (len >= 41). */
void pl_vet_uuid_text(const unsigned char *bytes, char *buf, size_t len);

/* The checks.  Each parses its arguments (argv[0] is the check's name)
 * and returns a pl_vet_rc. */
int pl_vet_gpu(int argc, char **argv);
int pl_vet_net(int argc, char **argv);
int pl_vet_nccl(int argc, char **argv);

/* The PTX of the GPU check's kernel (agent/vetcheck_gpu.c). */
extern const char pl_vet_ptx[];

#endif /* !PL_AGENT_VETCHECK_H */
