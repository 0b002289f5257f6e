"""A Python script in a subprocess, every wait on it under a deadline.

The tests of Ctrl-C and of interpreter exit need a process of their own (a
signal, a crash or a hang at exit would take the test run with it).  Such a
process can hang on exactly the regressions they look for, so no wait on it
is unbounded: ``read_line`` and ``finish`` fail the test at their deadline,
and ``running`` kills and reaps a process still alive when the test leaves
the block, passed or failed.
"""
import contextlib
import selectors
import subprocess
import sys

import pytest


@contextlib.contextmanager
def running(script, *args, cwd):
    """Start ``python script *args`` in ``cwd``, with stdout and stderr piped as text."""
    proc = subprocess.Popen([sys.executable, str(script), *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def read_line(proc, timeout):
    """The script's next line of stdout, stripped; the test fails if none comes
    within ``timeout`` seconds.

    Call it before anything else reads stdout: it waits on the pipe, which
    does not see what a previous read left in the text buffer.  The scripts
    print whole lines with flush=True.
    """
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            pytest.fail(f"no line from the script within {timeout} s: it hangs")
    return proc.stdout.readline().strip()


def finish(proc, timeout):
    """(stdout, stderr) once the script has ended; the test fails if it still
    runs after ``timeout`` seconds (``running`` then kills it)."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the script still runs after {timeout} s: it hangs")
