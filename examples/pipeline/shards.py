"""prep's output (examples/pipeline/prep.c) read back: meta.json and the
per-rank float32 shards of each split, checked against meta.json.  Shared
by train.py and post.py; numpy only (post.py does not load torch)."""

import json
import os

import numpy as np


def load(data, splits, die):
    """meta.json and, for each of 'splits', its records as one float32
    array of shape (n, record_floats).  die(msg) is called (and must not
    return) when a file is missing or does not match meta.json."""
    try:
        with open(os.path.join(data, "meta.json")) as f:
            meta = json.load(f)
        w, nf, ranks = meta["W"], meta["record_floats"], meta["ranks"]
        for k in ("H", "target_mean", "target_std", "counts"):
            meta[k]
        if nf != w + 4 or meta["target_std"] <= 0:
            raise ValueError("record_floats %s for W %s, target_std %s"
                             % (nf, w, meta["target_std"]))
    except (OSError, ValueError, KeyError, TypeError) as e:
        die("%s: no usable meta.json (run prep first): %s: %s"
            % (data, type(e).__name__, e))
    out = {}
    for s in splits:
        parts = []
        for r in range(ranks):
            path = os.path.join(data, "%s-r%03d.f32" % (s, r))
            try:
                a = np.fromfile(path, dtype=np.float32)
            except OSError as e:
                die("%s: %s" % (path, e.strerror))
            if a.size % nf or a.size // nf != meta["counts"][s][r]:
                die("%s: %d floats, expected %d records of %d"
                    % (path, a.size, meta["counts"][s][r], nf))
            parts.append(a.reshape(-1, nf))
        out[s] = np.concatenate(parts)
        if len(out[s]) == 0:
            die("%s: the %s split is empty" % (data, s))
    return meta, out
