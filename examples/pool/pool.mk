# examples/pool/pool.mk - the pool examples: a distributed join and sort
# (included by the Makefile; rules to come)
