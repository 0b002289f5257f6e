"""The gallery scripts in docs/examples run to the end, draw figures without
empty panels, and warn about nothing.

The documentation is built with ``sphinx -W``, which executes every
``plot_*.py``; here each script runs alone in a fresh interpreter (the
Agg backend, no display), so a failing example is named by its file.  The
scripts import the same fastkern as this test process (its parent folder
goes first on PYTHONPATH), so the tests check the in-tree build from a
source checkout and the installed package otherwise.
"""
import ast
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
    # Run the script as sphinx-gallery does: cell by cell ("# %%"), as
    # __main__, rendering and closing every open figure after each cell.  The
    # gallery shows a figure as it is at the end of the cell that made it, so
    # axes left empty there (to be drawn in a later cell) are empty on the
    # page.  A script that draws nothing fails, and so does a figure that
    # cannot be drawn.
    return (
        "import io, re, sys\n"
        "import matplotlib.pyplot as plt\n"
        f"path = {str(path)!r}\n"
        "sys.argv = [path]\n"
        "source = open(path, encoding='utf-8').read()\n"
        "starts = [0] + [m.start() for m in re.finditer(r'^# %%', source, flags=re.M)]\n"
        "namespace = {'__name__': '__main__', '__file__': path}\n"
        "drawn = 0\n"
        "for cell, (a, b) in enumerate(zip(starts, starts[1:] + [len(source)])):\n"
        "    # Padded with newlines so that tracebacks give the file's line numbers.\n"
        "    code = '\\n' * source.count('\\n', 0, a) + source[a:b]\n"
        "    exec(compile(code, path, 'exec'), namespace)\n"
        "    for n in plt.get_fignums():\n"
        "        fig = plt.figure(n)\n"
        "        fig.savefig(io.BytesIO(), format='png')\n"
        "        empty = [ax.get_title() or str(i) for i, ax in enumerate(fig.axes)\n"
        "                 if ax.get_visible() and not ax.has_data()]\n"
        "        assert not empty, f'cell {cell} leaves empty axes {empty} in its figure'\n"
        "        drawn += 1\n"
        "    plt.close('all')\n"
        "assert drawn, 'the example drew no figure'\n"
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


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_legend_names_its_place(path):
    # matplotlib warns when it took over a second to place a loc="best"
    # legend, which a stalled machine alone can cause, and the warning fails
    # test_example_runs_without_warnings.  The data of an example are fixed,
    # so its legends can be placed once, by hand.
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    unplaced = [node.lineno for node in ast.walk(tree)
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "legend"
                and not any(k.arg == "loc" for k in node.keywords)]
    assert not unplaced, f"{path.name}: legend() without loc= on lines {unplaced}"
