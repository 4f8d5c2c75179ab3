"""etl - the pool examples in Python (examples/pool/README.md): pool
functions that run on the task's communicator with mpi4py."""
