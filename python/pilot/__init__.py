"""pilot - the Python client of a pilot (a pilot-job system for Slurm)

    import pilot
    c = pilot.connect()                     # the one running pilot
    t = c.submit(["hostname"], ranks=2, tags={"step": "a"})
    print(t.wait().exit_code, t.logs())

connect() finds and connects to a running pilot, up() starts one (with
the pilot CLI) and connects to it.  Every request goes through libpilot,
the same C code the CLI uses (docs/libpilot.md, docs/python-reference.md); the
library is loaded on first use.  Errors are pilot.Error, some of them
also TimeoutError, LookupError, ValueError, PermissionError or
ConnectionError (pilot.errors).

pilot.Executor runs Python functions on a pilot as a
concurrent.futures.Executor (pilot.executor); pilot.as_completed and
pilot.wait are concurrent.futures' own.
"""
import json
import os
import shutil
import subprocess
from concurrent.futures import (ALL_COMPLETED, FIRST_COMPLETED,
                                FIRST_EXCEPTION, CancelledError,
                                as_completed, wait)

from .errors import (BadRequest, Denied, Error, NoPilot, NoSuchPool,
                     NoSuchTask, NotRunning, RemoteError, RemoteTraceback,
                     TaskFailed, Timeout)

__all__ = ["connect", "up", "Client", "Task", "Watch", "Executor", "Future",
           "as_completed", "wait", "FIRST_COMPLETED", "FIRST_EXCEPTION",
           "ALL_COMPLETED", "CancelledError", "Error", "NoPilot",
           "NoSuchTask", "NoSuchPool", "BadRequest", "Timeout", "Denied",
           "NotRunning", "TaskFailed", "RemoteError", "RemoteTraceback"]


def __getattr__(name):
    # Client and Task load libpilot (cffi): only when asked for
    if name in ("Client", "Task"):
        from . import client
        return getattr(client, name)
    if name == "Watch":
        from ._watch import Watch
        return Watch
    if name in ("Executor", "Future"):
        from . import executor
        return getattr(executor, name)
    raise AttributeError("module 'pilot' has no attribute %r" % name)


def connect(pilot=None, home=None, timeout=None):
    """A Client of pilot 'pilot' (its id; None: $PILOT_ID, else the one
    running pilot) under 'home' (None: $PILOT_HOME or ~/.pilot); each
    request waits at most 'timeout' seconds (None: $PILOT_TIMEOUT, 10).
    pilot.NoPilot if there is none to connect to."""
    from .client import Client
    return Client(pilot, home, timeout)


def _pilot_cmd():
    """The pilot CLI: $PILOT_BIN/pilot, else 'pilot' on PATH."""
    bindir = os.environ.get("PILOT_BIN")
    if bindir and os.access(os.path.join(bindir, "pilot"), os.X_OK):
        return os.path.join(bindir, "pilot")
    found = shutil.which("pilot")
    if not found:
        raise Error(2, "the pilot command is not on PATH (nor in $PILOT_BIN)")
    return found


def _run_cli(args, timeout, env=None):
    """Run 'pilot ARGS' (in environment 'env', None: ours); its stdout.
    pilot.Error with its error line if it fails."""
    try:
        r = subprocess.run([_pilot_cmd()] + args, stdin=subprocess.DEVNULL,
                           capture_output=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise Timeout(110, "pilot %s did not finish within %g s"
                      % (" ".join(args), timeout)) from None
    out = r.stdout.decode("utf-8", "replace")
    err = r.stderr.decode("utf-8", "replace").strip()
    if r.returncode != 0:
        # its error line, else its last word (a wait that ran out)
        lines = [ln for ln in err.splitlines()
                 if ln.startswith("pilot: error: ")] or err.splitlines()
        text = lines[-1] if lines else "exit status %d" % r.returncode
        if text.startswith("pilot: error: "):
            text = text[len("pilot: error: "):]
        if not text.startswith(args[0] + ": "):
            text = args[0] + ": " + text
        e = Error(r.returncode, "pilot " + text)
        e.stdout = out
        raise e
    return out


def up(local=False, nodes=None, time=None, gpus_per_node=None,
       wait_timeout=None, home=None, timeout=None, args=(), **opts):
    """Start a pilot with 'pilot up --json --wait' and connect to it.

    local=True: on this machine (--local), else a Slurm job of 'nodes'
    nodes for 'time' ("2:00:00"), 'gpus_per_node'; 'wait_timeout'
    seconds for it to come up; any other option of 'pilot up' as a
    keyword (partition="debug" is --partition debug, True alone is the
    flag) or in 'args'.  'home': the pilot home for the new pilot
    ($PILOT_HOME otherwise).  Returns the Client; pilot.Error with the
    CLI's error line if it could not start (its .pilot: the id of a
    pilot that started but did not come up in time, else None)."""
    cmd = ["up", "--json", "--wait"]
    named = dict(opts, nodes=nodes, time=time, gpus_per_node=gpus_per_node,
                 wait_timeout=wait_timeout)
    if local:
        cmd.append("--local")
    for key, v in named.items():
        if v is None or v is False:
            continue
        flag = "--" + key.replace("_", "-")
        cmd += [flag] if v is True else [flag, str(v)]
    cmd += [str(a) for a in args]
    env = None if home is None else dict(os.environ, PILOT_HOME=str(home))
    try:
        info = json.loads(_run_cli(cmd, (wait_timeout or 600) + 60, env))
    except Error as e:
        # started, but not up in time: its id, to bring it down
        try:
            e.pilot = json.loads(getattr(e, "stdout", "") or "{}").get(
                "pilot")
        except ValueError:
            e.pilot = None
        raise
    return connect(info["pilot"], home, timeout)
