#!/usr/bin/python3
"""examples/python/train.py - the tutorial's (docs/python.md) data-parallel
training: a linear model fitted with torch DistributedDataParallel by every
rank of a `--comm torch` task (GLOO on CPU, NCCL on GPUs).

    train.py OUT.pt [STEPS]

The ranks meet through the env:// variables pilot sets for --comm torch
(MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK).  Each rank draws
its own batches of y = x . (0, 1, ..., 7) + noise; DDP averages the
gradients, so every rank holds the same weights.  Rank 0 prints the loss
and writes the weights to OUT.pt."""
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main():
    out = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    gpu = torch.cuda.is_available()
    dist.init_process_group("nccl" if gpu else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = (torch.device("cuda", int(os.environ["LOCAL_RANK"])) if gpu
           else torch.device("cpu"))
    torch.manual_seed(0)  # the same initial weights on every rank
    model = DistributedDataParallel(torch.nn.Linear(8, 1).to(dev),
                                    device_ids=[dev.index] if gpu else None)
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    g = torch.Generator().manual_seed(rank)  # each rank its own data
    w_true = torch.arange(8.0)
    for _ in range(steps):
        x = torch.randn(64, 8, generator=g)
        y = x @ w_true + 0.01 * torch.randn(64, generator=g)
        loss = ((model(x.to(dev)).squeeze(1) - y.to(dev)) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    if rank == 0:
        print(f"{world} ranks ({'nccl' if gpu else 'gloo'}): loss "
              f"{loss.item():.5f}", flush=True)
        torch.save(model.module.state_dict(), out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
