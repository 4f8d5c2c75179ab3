"""tests/py/conftest.py - the pilots the Python client's tests talk to

Run through tests/e2e/t1160-python.sh (make check), which sets
PILOT_HOME, PILOT_BIN and PILOT_LIBPILOT; run alone
(/usr/bin/python3 -m pytest tests/py), a private pilot home and the
tree's build/ are used.  One local pilot serves the whole session; the
MPI test starts a Slurm pilot of its own on the dev cluster.  Every
pilot started here is brought down at the end.
"""
import os
import subprocess
import sys
import tempfile

import pytest

# under 'make asan' (t1160) this interpreter runs with the ASan runtime
# preloaded; what it starts (pilot up, and so pilotd, the agents and the
# tasks) gets LD_PRELOAD and ASAN_OPTIONS as they were before
# (a Python child that loads libpilot itself needs them: py_child_env())
ASAN_CHILD = {}
if "PILOT_PYTEST_ENV" in os.environ:
    for _k in ("LD_PRELOAD", "ASAN_OPTIONS"):
        if _k in os.environ:
            ASAN_CHILD[_k] = os.environ.pop(_k)
    for kv in os.environ.pop("PILOT_PYTEST_ENV").split():
        k, _, v = kv.partition("=")
        os.environ[k] = v

REPO = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))
os.environ.setdefault("PILOT_BIN", os.path.join(REPO, "build", "bin"))
os.environ.setdefault("PILOT_LIBPILOT",
                      os.path.join(REPO, "build", "lib", "libpilot.so.1"))
os.environ.pop("PILOT_ID", None)
os.environ.pop("PILOT_TIMEOUT", None)
if "PILOT_HOME" not in os.environ:
    _home = tempfile.mkdtemp(prefix="pilot-pytest-")
    os.environ["PILOT_HOME"] = os.path.join(_home, "home")
    os.mkdir(os.environ["PILOT_HOME"], 0o700)

import pilot  # noqa: E402 (after the paths above)


def py_child_env():
    """The environment of a Python child process that imports pilot (and
    so loads libpilot, ASan-built under 'make asan')."""
    return dict(os.environ, PYTHONPATH=os.path.join(REPO, "python"),
                **ASAN_CHILD)


def pilot_cli(*args, check=True):
    """Run the pilot CLI; its CompletedProcess (text)."""
    return subprocess.run([os.path.join(os.environ["PILOT_BIN"], "pilot")]
                          + list(args), capture_output=True, text=True,
                          check=check, stdin=subprocess.DEVNULL, timeout=120)


@pytest.fixture(scope="session")
def client():
    """A Client of a local pilot (pilot up --local), for the session."""
    c = pilot.up(local=True, wait_timeout=60)
    yield c
    c.down()
    c.close()


@pytest.fixture
def empty_home(tmp_path):
    """A pilot home with no pilot in it."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    return str(home)
