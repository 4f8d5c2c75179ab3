/* agent/vetcheck_main.c - pilot-vetcheck: a node's GPUs, the network
 * between nodes and NCCL's all-reduce, checked for node vetting; one JSON
 * report on stdout and an exit code (agent/vetcheck.h) */
#include <stdio.h>
#include <string.h>

#include "agent/vetcheck.h"

#ifdef PL_VET_NO_MPI
/* Built without MPI (no mpicc): net needs it. */
int pl_vet_net(int argc, char **argv)
{
    struct pl_vet v;

    (void)argc;
    (void)argv;
    if (pl_vet_init(&v, "net") < 0)
        return PL_VET_CANNOT;
    pl_vet_cannot(&v, "pilot-vetcheck was built without MPI (no mpicc)");
    return pl_vet_end(&v);
}
#endif

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(int argc, char **argv);
    } checks[] = {
        { "gpu", pl_vet_gpu },
        { "net", pl_vet_net },
        { "nccl", pl_vet_nccl },
    };

    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        pl_vet_usage(stdout, NULL);
        return PL_VET_PASS;
    }
    if (argc < 2) {
        fprintf(stderr, "pilot-vetcheck: which check?\n");
        pl_vet_usage(stderr, NULL);
        return PL_VET_USAGE;
    }
    for (size_t i = 0; i < sizeof(checks) / sizeof(checks[0]); i++)
        if (!strcmp(argv[1], checks[i].name))
            return checks[i].run(argc - 1, argv + 1);
    fprintf(stderr, "pilot-vetcheck: no check '%s'\n", argv[1]);
    pl_vet_usage(stderr, NULL);
    return PL_VET_USAGE;
}
