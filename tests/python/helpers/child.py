"""Code run in a fresh interpreter: for what changes the process it runs in
(registrations, signal handlers, resource limits, a fork), what may crash
it, and what is measured from its start (peak memory, imported modules).

The child is ``sys.executable``, so it imports the same ``blockmap`` as the
tests (the source tree's or, under ``make test-wheels``, the installed
one), and it imports the test helpers (``tests/python`` is first on its
``PYTHONPATH``).
"""

import os
import subprocess
import sys
import textwrap

from helpers import TESTS_DIR


def environment(**changes):
    """``os.environ`` with ``tests/python`` first on ``PYTHONPATH`` and the
    ``changes`` made (a value of None removes that variable)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        part for part in (str(TESTS_DIR), env.get("PYTHONPATH", "")) if part
    )
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def run_python(code, *args, timeout=120, check=True, script=None, env=None):
    """Run ``code`` (dedented) as ``python -c CODE ARGS...`` in a fresh
    interpreter and return the :class:`subprocess.CompletedProcess` (text).

    ``script``: a file to write the code to and run instead of ``-c`` (a
    worker started by spawn imports the functions of its parent's main
    file). ``env``: the child's environment (:func:`environment` by
    default). With ``check``, an exit other than 0 (a crash, a signal, an
    assertion of the child) fails the calling test, showing what the child
    printed.
    """
    code = textwrap.dedent(code)
    if script is not None:
        with open(script, "w") as file:
            file.write(code)
        command = [sys.executable, os.fspath(script)]
    else:
        command = [sys.executable, "-c", code]
    result = subprocess.run(
        [*command, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=environment() if env is None else env,
    )
    if check:
        assert result.returncode == 0, (
            f"the child process exited with {result.returncode}:\n"
            f"{result.stdout[-4000:]}\n{result.stderr[-8000:]}"
        )
    return result
