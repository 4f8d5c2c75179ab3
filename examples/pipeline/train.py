#!/usr/bin/python3
"""examples/pipeline/train.py - stage 2 of the pipeline demo: train one model
(MLP, LSTM or 1-D CNN) on prep's windows, data-parallel with
torch.distributed (GLOO on CPU, NCCL on GPUs), and write the test set's
forecasts and metrics (docs/pipeline.md).

The ranks find each other through the env:// variables (MASTER_ADDR,
MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK) that `pilot submit --comm torch`
sets; without them, from an srun step's SLURM_* variables; without either,
one process trains alone.

The model predicts the change over H weeks (normalised by the training
period's statistics, meta.json) from the last W normalised weekly
differences; the forecast in ppm is the last observed value plus that
change. Every rank trains on its share of the training windows
(DistributedSampler) and evaluates its share of the validation windows (the
sums are all-reduced), so all ranks take the same early-stopping decision.
Rank 0 evaluates the best model on the test windows and writes, under
OUT/MODEL/: metrics.json, predictions.npy (ppm, in test order)."""

import argparse
import copy
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

import shards

SPLITS = ("train", "val", "test")


def die(msg):
    print("train: error: %s" % msg, file=sys.stderr, flush=True)
    sys.exit(1)


class MLP(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(w, 64), nn.ReLU(),
                                 nn.Linear(64, 32), nn.ReLU(),
                                 nn.Linear(32, 1))

    def forward(self, x):                   # x: (B, W)
        return self.net(x).squeeze(-1)


class LSTM(nn.Module):
    def __init__(self, w, hidden=32):
        super().__init__()
        self.lstm = nn.LSTM(1, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x):
        out, _ = self.lstm(x.unsqueeze(-1))  # (B, W, hidden)
        return self.head(out[:, -1]).squeeze(-1)


class CNN(nn.Module):
    """Dilated causal-ish 1-D convolutions, then a linear read-out of every
    position: the season is in where a week sits in the window, so no
    global pooling."""

    def __init__(self, w, ch=16):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv1d(1, ch, 5, padding=2), nn.ReLU(),
            nn.Conv1d(ch, ch, 5, padding=4, dilation=2), nn.ReLU(),
            nn.Conv1d(ch, ch, 5, padding=8, dilation=4), nn.ReLU())
        self.head = nn.Linear(ch * w, 1)

    def forward(self, x):
        h = self.conv(x.unsqueeze(1))        # (B, ch, W)
        return self.head(h.flatten(1)).squeeze(-1)


MODELS = {"mlp": MLP, "lstm": LSTM, "cnn": CNN}


def slurm_env():
    """Inside an srun step without the torch variables: derive them from
    Slurm's (the step's first node is the master)."""
    if "RANK" in os.environ or "SLURM_PROCID" not in os.environ:
        return
    os.environ["RANK"] = os.environ["SLURM_PROCID"]
    os.environ["WORLD_SIZE"] = os.environ.get("SLURM_STEP_NUM_TASKS",
                                              os.environ.get("SLURM_NTASKS",
                                                             "1"))
    os.environ["LOCAL_RANK"] = os.environ.get("SLURM_LOCALID", "0")
    if "MASTER_ADDR" not in os.environ:
        nodes = os.environ.get("SLURM_STEP_NODELIST",
                               os.environ.get("SLURM_JOB_NODELIST", ""))
        host = subprocess.run(["scontrol", "show", "hostnames", nodes],
                              check=True, capture_output=True,
                              text=True).stdout.split()[0]
        os.environ["MASTER_ADDR"] = host
    if "MASTER_PORT" not in os.environ:
        # one port per step: concurrent steps may share a master node
        step = int(os.environ.get("SLURM_STEP_ID", "0"))
        job = int(os.environ.get("SLURM_JOB_ID", "0"))
        os.environ["MASTER_PORT"] = str(20000 + (job * 64 + step) % 20000)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=sorted(MODELS), required=True)
    ap.add_argument("--data", required=True, help="prep's output directory")
    ap.add_argument("--out", required=True, help="results go to OUT/MODEL/")
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--patience", type=int, default=6,
                    help="stop after this many epochs without a better "
                         "validation loss")
    ap.add_argument("--batch", type=int, default=64,
                    help="per rank")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads per rank")
    a = ap.parse_args()
    if a.epochs < 1 or a.patience < 1 or a.batch < 1:
        die("--epochs, --patience and --batch must be >= 1")

    t_start = time.time()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    np.random.seed(a.seed)

    slurm_env()
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.set_device(local % torch.cuda.device_count())
        dev = torch.device("cuda")
    else:
        dev = torch.device("cpu")
    if world > 1:
        dist.init_process_group("nccl" if cuda else "gloo",
                                init_method="env://")
    say = print if rank == 0 else (lambda *x, **k: None)

    meta, data = shards.load(a.data, SPLITS, die)
    w, tm, ts = meta["W"], meta["target_mean"], meta["target_std"]

    def tensors(s):
        r = data[s]
        x = torch.from_numpy(r[:, :w].copy())
        y = torch.from_numpy(((r[:, w] - tm) / ts).astype(np.float32))
        return x, y

    xtr, ytr = tensors("train")
    xva, yva = tensors("val")
    ds = TensorDataset(xtr, ytr)
    sampler = DistributedSampler(ds, num_replicas=world, rank=rank,
                                 shuffle=True, seed=a.seed)
    loader = DataLoader(ds, batch_size=a.batch, sampler=sampler)

    model = MODELS[a.model](w).to(dev)
    net = DistributedDataParallel(model) if world > 1 else model
    opt = torch.optim.Adam(net.parameters(), lr=a.lr)
    loss_fn = nn.MSELoss()
    # this rank's share of the validation windows; the sums are reduced
    vidx = torch.arange(rank, len(xva), world)
    xv, yv = xva[vidx].to(dev), yva[vidx].to(dev)

    say("train %s: %d ranks (%s), %d train / %d val / %d test windows, "
        "W=%d H=%d, %d parameters" % (
            a.model, world, "nccl" if cuda and world > 1 else
            "gloo" if world > 1 else "single", len(xtr), len(xva),
            len(data["test"]), w, meta["H"],
            sum(p.numel() for p in model.parameters())), flush=True)

    best, best_state, best_epoch, history = float("inf"), None, 0, []
    t0 = time.time()
    epoch = 0
    for epoch in range(1, a.epochs + 1):
        sampler.set_epoch(epoch)
        net.train()
        tl = torch.zeros(2, dtype=torch.float64, device=dev)
        for xb, yb in loader:
            xb, yb = xb.to(dev), yb.to(dev)
            opt.zero_grad()
            loss = loss_fn(net(xb), yb)
            loss.backward()
            opt.step()
            tl += torch.tensor([loss.item() * len(xb), len(xb)],
                               dtype=torch.float64, device=dev)
        net.eval()
        with torch.no_grad():
            err = model(xv) - yv
            vl = torch.tensor([float((err ** 2).sum()), len(err)],
                              dtype=torch.float64, device=dev)
        if world > 1:
            dist.all_reduce(tl)
            dist.all_reduce(vl)
        train_mse = float(tl[0] / tl[1])
        val_mse = float(vl[0] / vl[1])
        # the validation RMSE in ppm of change
        val_rmse = val_mse ** 0.5 * ts
        history.append({"epoch": epoch, "train_mse": train_mse,
                        "val_rmse_ppm": val_rmse})
        better = val_mse < best
        if better:
            best, best_epoch = val_mse, epoch
            best_state = copy.deepcopy(model.state_dict())
        say("  epoch %2d: train mse %.4f, val rmse %.3f ppm%s" % (
            epoch, train_mse, val_rmse, " *" if better else ""), flush=True)
        if epoch - best_epoch >= a.patience:
            say("  early stop: no better validation loss for %d epochs"
                % a.patience, flush=True)
            break
    train_seconds = time.time() - t0

    if rank == 0:
        model.load_state_dict(best_state)
        model.eval()
        r = data["test"]
        with torch.no_grad():
            change = model(torch.from_numpy(r[:, :w].copy()).to(dev))
        change = change.cpu().double().numpy() * ts + tm
        last = r[:, w + 1].astype(np.float64)
        future = r[:, w + 2].astype(np.float64)
        pred = last + change
        e = pred - future
        naive = last - future
        metrics = {
            "model": a.model, "ranks": world,
            "backend": ("nccl" if cuda else "gloo") if world > 1 else None,
            "test_windows": int(len(r)),
            "mae": float(np.abs(e).mean()),
            "rmse": float(np.sqrt((e ** 2).mean())),
            "naive_mae": float(np.abs(naive).mean()),
            "naive_rmse": float(np.sqrt((naive ** 2).mean())),
            "best_epoch": best_epoch, "epochs": epoch,
            "best_val_rmse_ppm": best ** 0.5 * ts,
            "train_seconds": train_seconds,
            "seconds": time.time() - t_start,
            "parameters": sum(p.numel() for p in model.parameters()),
            "history": history,
        }
        out = os.path.join(a.out, a.model)
        os.makedirs(out, exist_ok=True)
        np.save(os.path.join(out, "predictions.npy"), pred)
        tmp = os.path.join(out, ".metrics.json.tmp")
        with open(tmp, "w") as f:
            json.dump(metrics, f, indent=1)
        os.replace(tmp, os.path.join(out, "metrics.json"))
        say("train %s: %d epochs (best %d) in %.1f s; test MAE %.3f ppm, "
            "RMSE %.3f (naive: MAE %.3f, RMSE %.3f)" % (
                a.model, epoch, best_epoch, train_seconds, metrics["mae"],
                metrics["rmse"], metrics["naive_mae"],
                metrics["naive_rmse"]), flush=True)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
