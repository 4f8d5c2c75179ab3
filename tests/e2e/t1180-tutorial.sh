#!/bin/bash
# t1180-tutorial.sh - docs/python.md's tutorial, run as a user would: its
# python blocks, in order, as one program with /usr/bin/python3 against a
# 2-node Slurm pilot it brings up and down itself.  What the page says
# each block prints is checked here, so the page cannot drift from the
# code.
. "$(dirname "$0")/lib.sh"

plan 12

export PILOT_LIBPILOT=$PILOT_BIN/../lib/libpilot.so.1
export PYTHONPATH=$REPO/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONDONTWRITEBYTECODE=1
export PILOT_REPO=$REPO
DOC=$REPO/docs/python.md

# the tutorial's blocks: the ```python fences before "## Where to go next"
"$PY" - "$DOC" >"$WORK/tutorial.py" <<'PYEOF'
import re, sys
text = open(sys.argv[1]).read()
text = text.split("\n## Where to go next", 1)[0]
blocks = re.findall(r"^```python\n(.*?)^```$", text, re.S | re.M)
print("\n".join(blocks))
PYEOF
nblocks=$(grep -c '^import os, pilot$\|^c.down()$' "$WORK/tutorial.py")
is "$nblocks" 2 "the tutorial's program starts a pilot and brings it down"

cd "$WORK" || abort "no work directory"
CAPTURE_TIMEOUT=900 capture "${PYLIB[@]}" "$WORK/tutorial.py"
is "$RC" 0 "the tutorial runs to its end" || diag "$OUT" "$ERR"
like "$OUT" "(^|$'\n')2 nodes up: p[0-9]+" "1: the pilot is up on 2 nodes"
like "$OUT" "done \[.*n1.*n2.*\]|done \[.*n2.*n3.*\]|done \['n[1-4]', 'n[1-4]'\]" \
    "2: prep ran on two nodes"
like "$OUT" "done 0 4 ranks \(gloo\): loss 0\.0" \
    "2: the training ran on 4 ranks over GLOO and converged"
ok "2: the model was written" test -s "$WORK/model.pt"
like "$OUT" "200 calls, mean of means [-+]0\.0" "3: 200 calls, their values"
like "$OUT" "sum over 4 parts: 7998000" "4: futures as arguments"
like "$OUT" "\('n[1-4]', '0', False\)" \
    "5: a call with gpus=1 sees its GPU (no CUDA here: False)"
like "$OUT" "3 raised ValueError\('bad input 3'\)" \
    "6: the exception, raised again here"
like "$OUT" "4 failed: .*(exit|code) 7" "6: a worker's os._exit(7)"
like "$OUT" "10000 \[0, 1, 4, 9\] 99980001" "7: map in chunks"
