"""The gallery scripts in docs/examples run to the end, draw a figure and warn about nothing.

The documentation is built with ``sphinx -W``, which executes every
``plot_*.py``; here each script runs alone in a fresh interpreter (the
Agg backend, no display), so a failing example is named by its file.  The
scripts import the same fastkern as this test process (its parent folder
goes first on PYTHONPATH), so the tests check the in-tree build from a
source checkout and the installed package otherwise.
"""
import os
import pathlib
import subprocess
import sys

import pytest

import fastkern

EXAMPLES_DIR = pathlib.Path(__file__).resolve().parent.parent / "docs" / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("plot_*.py"))

# Each example runs in a few seconds; the bound only catches a hang.
TIMEOUT = 600

pytestmark = pytest.mark.skipif(not EXAMPLES, reason="docs/examples is not in this tree")


def _environment():
    env = dict(os.environ)
    env["MPLBACKEND"] = "Agg"
    package_root = os.path.dirname(os.path.dirname(fastkern.__file__))
    env["PYTHONPATH"] = os.pathsep.join(
        [package_root] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.pop("PYTHONWARNINGS", None)
    # One thread each: the examples are small, and under pytest-xdist several
    # run at once, where OpenMP and BLAS threads per example would only
    # oversubscribe the cores (busy-waiting BLAS threads then take minutes).
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env[name] = "1"
    return env


def _run_and_render(path):
    # Run the script as sphinx-gallery does (as __main__), then render every
    # open figure: a script that draws nothing fails, and so does a figure
    # that cannot be drawn.
    return (
        "import io, runpy, sys\n"
        "import matplotlib.pyplot as plt\n"
        f"sys.argv = [{str(path)!r}]\n"
        f"runpy.run_path({str(path)!r}, run_name='__main__')\n"
        "numbers = plt.get_fignums()\n"
        "assert numbers, 'the example drew no figure'\n"
        "for n in numbers:\n"
        "    plt.figure(n).savefig(io.BytesIO(), format='png')\n"
    )


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs_without_warnings(path, tmp_path):
    result = subprocess.run(
        [sys.executable, "-W", "error::DeprecationWarning", "-W", "error::FutureWarning",
         "-c", _run_and_render(path)],
        cwd=tmp_path, env=_environment(), capture_output=True, text=True,
        timeout=TIMEOUT)
    assert result.returncode == 0, f"{path.name} failed:\n{result.stderr}"
    # The documentation is built with -W: any warning (Python's, matplotlib's
    # or a library's log message) would fail it.
    assert "warn" not in result.stderr.lower(), f"{path.name} warned:\n{result.stderr}"
