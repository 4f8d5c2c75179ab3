/* agent/vet.h - the node's vetting: pilotd's VET run in a child process,
 * its result sent back as VET_RESULT */
#ifndef PL_AGENT_VET_H
#define PL_AGENT_VET_H

#include <stdbool.h>
#include <sys/types.h>

struct pl_agent;
struct pl_vet;

/* The vetting of agent 'a' (nothing runs yet).  NULL (ENOMEM). */
struct pl_vet *pl_vet_new(struct pl_agent *a);

/* Stop a running check process (SIGKILL) and close its handles; the
 * memory goes with the last close callback, so the loop must run a few
 * more iterations (pl_agent_free() does).  NULL is ok. */
void pl_vet_close(struct pl_vet *v);

/* Whether 'pid' is the check process (agent.c's reaper of orphans must
 * leave it to libuv). */
bool pl_vet_child(const struct pl_vet *v, pid_t pid);

/* The check process: `pilot-agent --vet-child ...` (agent/vet_child.c).
 * Returns the exit code. */
int pl_vet_child_main(int argc, char **argv);

/* Where pl_vet_gpu_adapt() puts a check (its texts are borrowed). */
typedef void (*pl_vet_add_f)(void *arg, const char *name, bool ok,
                             double figure, const char *unit, double limit,
                             const char *detail);

/* `pilot-vetcheck gpu`'s report ('len' bytes at 'buf', any bytes at all)
 * and exit code 'code' as checks to 'add': on a pass one check "gpu"
 * (the GPU count, the hottest, the least free); on a failure one check
 * for each entry of "failed" (its name, "gpu.temperature", its value and
 * limit); exit 3 (cannot run) a "gpu" check that passes with a note when
 * no NVML library loaded ("no_nvml": nothing to judge the GPUs by) and
 * fails otherwise (NVML or the CUDA driver loaded and failed); anything
 * else (no report, cut short, wrong types) a failed "gpu". */
void pl_vet_gpu_adapt(const char *buf, size_t len, int code,
                      pl_vet_add_f add, void *arg);

#endif /* !PL_AGENT_VET_H */
