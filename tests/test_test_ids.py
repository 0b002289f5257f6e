"""Every process must collect the same test ids, or pytest-xdist refuses to run
(`pytest -n auto`): no memory address or hash-ordered set in a parametrize id."""
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _collect(hash_seed, cwd):
    env = dict(os.environ, PYTHONHASHSEED=str(hash_seed))
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_XDIST_WORKER_COUNT", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-p", "no:xdist", str(TESTS)],
        cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return proc


def test_two_processes_collect_the_same_ids(tmp_path):
    # Not from the checkout: `python -m` puts the working folder first on
    # sys.path, and a checkout without compiled modules would shadow the
    # installed package.
    first, second = _collect(1, tmp_path), _collect(2, tmp_path)  # concurrently
    out = []
    for proc in (first, second):
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, (stdout[-3000:], stderr[-3000:])
        out.append([line for line in stdout.splitlines() if "::" in line])
    assert len(out[0]) > 100
    differing = sorted(set(out[0]) ^ set(out[1]))
    assert not differing, differing[:20]
    assert out[0] == out[1]
