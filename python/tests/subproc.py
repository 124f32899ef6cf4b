"""Runs a scenario in a child interpreter, bounded: a hang becomes a failure, not a stuck suite."""

import os
import subprocess
import sys


def run_script(code, *args, timeout=60, env=None):
    """Runs code with this interpreter and this varlog; returns (returncode, stdout, stderr).
    A child still running after timeout seconds is killed and reported as returncode None,
    with what it printed so far."""
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    e.update(env or {})
    p = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=e)
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        return None, out, err
