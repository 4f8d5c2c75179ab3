#!/usr/bin/python3 -IS
"""contrib/snakemake/submit.py - Snakemake's --cluster: a job as a pilot task

Snakemake runs 'submit.py JOBSCRIPT' and takes the first line of its
output as the job's id.  The job's properties are a JSON line of the
jobscript ('# properties = {...}'); they become pilot submit options:

  threads             --cores-per-rank N
  resources.gpus      --gpus-per-rank N (resources.gpu too)
  resources.runtime   --timeout Nm (Snakemake gives minutes)
  resources.mem_mb    --tag mem_mb=N: pilot does not limit memory
  rule (group id)     --name RULE (group-GROUPID)

and the task runs JOBSCRIPT.  Snakemake runs this once a job, one
after another: -S (no site module) saves 20 ms of Python's start each,
-I keeps the user's PYTHON* variables and site-packages out.  PILOT names the pilot program (default:
pilot, from PATH); PILOT_SUBMIT_OPTS adds options (split on spaces), as
'--exclusive' or '--priority 10'.
"""
import json
import os
import sys

PROPS = "# properties = "


def properties(path):
    """The job's properties, from its jobscript."""
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if line.startswith(PROPS):
                    return json.loads(line[len(PROPS):])
    except (OSError, ValueError) as e:
        sys.exit(f"pilot submit.py: {path}: {e}")
    sys.exit(f"pilot submit.py: {path}: no '{PROPS.strip()}' line "
             "(not a Snakemake jobscript?)")


def count(res, *keys):
    """The first of 'keys' in 'res' as an integer, or 0."""
    for k in keys:
        v = res.get(k)
        if v not in (None, ""):
            try:
                return int(v)
            except (TypeError, ValueError):
                sys.exit(f"pilot submit.py: resource {k}={v!r} is not a "
                         "number")
    return 0


def options(p):
    """pilot submit's options for a job of properties 'p'."""
    res = p.get("resources") or {}
    if p.get("type") == "group":
        name = f"group-{p.get('groupid')}"
    else:
        name = p.get("rule") or "snakemake"
    opts = ["--name", name, "--tag", f"snakemake_jobid={p.get('jobid')}",
            "--cores-per-rank", str(max(int(p.get("threads") or 1), 1))]
    gpus = count(res, "gpus", "gpu")
    if gpus > 0:
        opts += ["--gpus-per-rank", str(gpus)]
    runtime = count(res, "runtime")
    if runtime > 0:
        opts += ["--timeout", f"{runtime}m"]
    mem = count(res, "mem_mb")
    if mem > 0:
        opts += ["--tag", f"mem_mb={mem}"]
    return opts + os.environ.get("PILOT_SUBMIT_OPTS", "").split()


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: submit.py JOBSCRIPT (Snakemake's --cluster)")
    script = sys.argv[1]
    pilot = os.environ.get("PILOT", "pilot")
    argv = [pilot, "submit", "--parsable"] + options(properties(script))
    argv += ["--", os.path.abspath(script)]
    try:
        os.execvp(pilot, argv)
    except OSError as e:
        sys.exit(f"pilot submit.py: cannot run {pilot}: {e}")


if __name__ == "__main__":
    main()
