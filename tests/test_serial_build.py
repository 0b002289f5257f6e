"""Without OpenMP the package still builds, runs serially and says so once:
at build time, and the first time n_threads > 1 is asked for (not at import)."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("Cython")
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]

PROBE = """
import warnings
def serial_warnings(caught):
    return [str(w.message) for w in caught if "without OpenMP" in str(w.message)]
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import fastkern
    import fastkern.pairwise
assert serial_warnings(caught) == [], serial_warnings(caught)
import io
buf = io.StringIO()
fastkern.show_config(file=buf)
assert "OpenMP: off" in buf.getvalue(), buf.getvalue()
import numpy as np
from sklearn.metrics.pairwise import rbf_kernel
X = np.random.default_rng(0).normal(size=(300, 5))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    assert np.allclose(fastkern.rbf_kernel(X), rbf_kernel(X), rtol=1e-12)
    assert serial_warnings(caught) == []
    assert np.allclose(fastkern.rbf_kernel(X, n_threads=2), rbf_kernel(X), rtol=1e-12)
    K = fastkern.center_gram(fastkern.rbf_kernel(X, n_threads=2), n_threads=2)
assert len(serial_warnings(caught)) == 1, serial_warnings(caught)
assert np.allclose(K.sum(axis=0), 0, atol=1e-10)
print("serial ok")
"""


def test_builds_and_runs_without_openmp(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(ROOT / "fastkern", src / "fastkern",
                    ignore=shutil.ignore_patterns("*.so", "*.c", "__pycache__"))
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    # The C files the source tree's last build generated, with their key:
    # setup.py then only recompiles them (the C does not depend on OpenMP),
    # and cythonizes anew if they are not this tree's.
    stamp = ROOT / "build" / "fastkern-cython.key"
    if stamp.exists():
        (src / "build").mkdir()
        shutil.copy(stamp, src / "build" / stamp.name)
        for c in ROOT.glob("fastkern/*.c"):
            shutil.copy(c, src / "fastkern" / c.name)
    # -O0: this build shows that the code builds and runs without OpenMP, not
    # its speed, and compiles in about a quarter of -O3's time.
    env = dict(os.environ, FASTKERN_NO_OPENMP="1", FASTKERN_QUICK_BUILD="1")
    # A deadline for a hung compiler, not a speed bound: compiling the C of
    # every module at -O3 ran past 15 minutes on a loaded 2-core machine (CI).
    build = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace", "-j", "2"], cwd=src,
                           env=env, capture_output=True, text=True, timeout=3600)
    assert build.returncode == 0, build.stderr[-3000:]
    assert "-fopenmp" not in build.stdout + build.stderr
    assert "OpenMP not available" in build.stderr
    run = subprocess.run([sys.executable, "-c", PROBE], cwd=tmp_path,
                         env=dict(os.environ, PYTHONPATH=str(src)),
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "serial ok" in run.stdout
