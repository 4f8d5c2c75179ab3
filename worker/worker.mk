# worker/worker.mk - pilot-worker, the pool's MPI worker (docs/pool.md)
# (included by the Makefile; rules to come)
