/* agent/vet_private.h - what the vetting child's two files share: the
 * result being built, the checks that run other programs */
#ifndef PL_AGENT_VET_PRIVATE_H
#define PL_AGENT_VET_PRIVATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/vetconf.h"
#include "proto/vetmsg.h"

/* The child's result, grown a check at a time (vet_child.c). */
struct pl_vet_out {
    struct pl_vet_result r;
    uint32_t cap;
};

/* A check into the result (at most PL_VET_MAX_CHECKS; a failed one makes
 * the result fail); 'fmt' is the detail's printf format. */
void pl_vet_add(struct pl_vet_out *o, const char *name, bool ok,
                double figure, const char *unit, double limit,
                const char *fmt, ...) __attribute__((format(printf, 7, 8)));
/* Seconds of CLOCK_MONOTONIC. */
double pl_vet_mono(void);
/* Read 'fd' until EOF or 'deadline' (pl_vet_mono()) into a new *buf
 * (the caller's, NUL-terminated), keeping at most PL_VET_READ_MAX bytes
 * (the rest is read and dropped); 0 or -1 (ETIMEDOUT). */
#define PL_VET_READ_MAX (256 * 1024)
int pl_vet_read_all(int fd, char **buf, size_t *len, double deadline);

/* vet_ext.c: an external program's checks (vet.yaml 'external'), and
 * `pilot-vetcheck gpu` on a node with 'ngpus' granted GPUs, within
 * 'left' seconds. */
void pl_vet_check_external(struct pl_vet_out *o,
                           const struct pl_vet_external *x);
void pl_vet_check_gpu_health(struct pl_vet_out *o,
                             const struct pl_vetconf *c, size_t ngpus,
                             double left);

#endif /* !PL_AGENT_VET_PRIVATE_H */
