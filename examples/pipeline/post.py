#!/usr/bin/python3
"""examples/pipeline/post.py - stage 3 of the pipeline demo: compare the
trained models' forecasts on the test windows with the naive forecast (no
change: the last observed value), print the table, write it as
RESULTS/metrics.txt and RESULTS/metrics.json, and plot the forecasts
against the truth in RESULTS/forecast.png.

The truth and the naive forecast come from prep's test shards, not from
what the trainings wrote: a model's predictions.npy must have one value per
test window, in order."""

import argparse
import json
import os
import sys

import numpy as np

import shards


def die(msg):
    print("post: error: %s" % msg, file=sys.stderr, flush=True)
    sys.exit(1)


def test_records(data):
    meta, recs = shards.load(data, ("test",), die)
    w, r = meta["W"], recs["test"]
    if len(r) != meta["totals"]["test"]:
        die("%s: %d test records, meta.json says %d"
            % (data, len(r), meta["totals"]["test"]))
    return meta, {"time": r[:, w + 3].astype(np.float64),
                  "last": r[:, w + 1].astype(np.float64),
                  "future": r[:, w + 2].astype(np.float64)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True, help="prep's output directory")
    ap.add_argument("--results", required=True,
                    help="train.py's --out: RESULTS/MODEL/ per model")
    ap.add_argument("--models", default="mlp,lstm,cnn",
                    help="comma-separated (default: mlp,lstm,cnn)")
    a = ap.parse_args()
    models = [m for m in a.models.split(",") if m]
    if not models:
        die("--models names no model")

    meta, t = test_records(a.data)
    truth = t["future"]
    rows, preds = [], {}
    naive = t["last"]
    rows.append({"model": "naive (no change)",
                 "mae": float(np.abs(naive - truth).mean()),
                 "rmse": float(np.sqrt(((naive - truth) ** 2).mean())),
                 "epochs": None, "train_seconds": None})
    for m in models:
        d = os.path.join(a.results, m)
        try:
            with open(os.path.join(d, "metrics.json")) as f:
                info = json.load(f)
            p = np.load(os.path.join(d, "predictions.npy"))
        except (OSError, ValueError) as e:
            die("%s: no results for model %s: %s" % (d, m, e))
        if p.shape != truth.shape or not np.all(np.isfinite(p)):
            die("%s/predictions.npy: %s values, expected %d finite ones"
                % (d, p.shape, len(truth)))
        preds[m] = p
        rows.append({"model": m,
                     "mae": float(np.abs(p - truth).mean()),
                     "rmse": float(np.sqrt(((p - truth) ** 2).mean())),
                     "epochs": info.get("epochs"),
                     "best_epoch": info.get("best_epoch"),
                     "train_seconds": info.get("train_seconds"),
                     "ranks": info.get("ranks")})
    for r in rows:
        r["mae_vs_naive"] = r["mae"] / rows[0]["mae"]

    lo, hi = t["time"].min(), t["time"].max()
    lines = ["test set: %d windows, forecasts of the level %d weeks ahead, "
             "%.1f to %.1f" % (len(truth), meta["H"], lo, hi),
             "%-18s %9s %9s %9s %8s %8s" % ("model", "MAE ppm", "RMSE ppm",
                                            "MAE/naive", "epochs", "train s")]
    for r in rows:
        lines.append("%-18s %9.3f %9.3f %9.2f %8s %8s" % (
            r["model"], r["mae"], r["rmse"], r["mae_vs_naive"],
            "" if r["epochs"] is None else
            "%d/%d" % (r["best_epoch"], r["epochs"]),  # best/run
            "" if r["train_seconds"] is None else
            "%.1f" % r["train_seconds"]))
    lines.append("(epochs: the best one / those run; MAE/naive < 1: better "
                 "than no change)")
    table = "\n".join(lines)
    print(table)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bot) = plt.subplots(2, 1, figsize=(10, 7), sharex=True,
                                   gridspec_kw={"height_ratios": [3, 2]})
    top.plot(t["time"], truth, color="black", lw=1.6, label="truth")
    top.plot(t["time"], naive, color="grey", lw=1, ls=":",
             label="naive (last value)")
    for m, p in preds.items():
        top.plot(t["time"], p, lw=1, label=m)
    top.set_ylabel("CO2 (ppm)")
    top.set_title("Mauna Loa CO2: %d-week-ahead forecasts on the test "
                  "period" % meta["H"])
    top.legend(loc="upper left")
    top.grid(alpha=0.3)
    bot.axhline(0, color="grey", lw=0.8)
    for m, p in preds.items():
        bot.plot(t["time"], p - truth, lw=1, label=m)
    bot.plot(t["time"], naive - truth, color="grey", lw=1, ls=":",
             label="naive")
    bot.set_ylabel("forecast - truth (ppm)")
    bot.set_xlabel("year (of the forecast target)")
    bot.grid(alpha=0.3)
    fig.tight_layout()
    png = os.path.join(a.results, "forecast.png")
    fig.savefig(png, dpi=100)
    plt.close(fig)

    with open(os.path.join(a.results, "metrics.txt"), "w") as f:
        f.write(table + "\n")
    with open(os.path.join(a.results, "metrics.json"), "w") as f:
        json.dump({"H": meta["H"], "test_windows": len(truth),
                   "rows": rows}, f, indent=1)
    print("plot: %s" % os.path.abspath(png))


if __name__ == "__main__":
    main()
