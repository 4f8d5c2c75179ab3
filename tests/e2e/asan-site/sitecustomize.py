"""tests/e2e/asan-site/sitecustomize.py - under 'make asan', a Python that
loads the ASan-built libpilot runs with the ASan runtime preloaded
(tests/e2e/lib.sh, PYLIB); what it starts (pilot up, and so pilotd, the
agents and the warm workers) gets the environment as it was before: the
saved LD_PRELOAD, ASAN_OPTIONS and PYTHONPATH are put back here, at the
interpreter's start, before any child is made."""
import json
import os

_saved = os.environ.pop("PILOT_ASAN_SAVED", None)
if _saved is not None:
    for _k, _v in json.loads(_saved).items():
        if _v is None:
            os.environ.pop(_k, None)
        else:
            os.environ[_k] = _v
