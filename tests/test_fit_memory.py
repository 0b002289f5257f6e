"""Peak memory of a KernelPCA or KernelRidge fit over its Gram matrix's 8 N^2 bytes.

Each case runs in a fresh process.  The peak is the rise of the process's
peak resident set (VmHWM, reset through /proc/self/clear_refs) over its
resident set just before the fit, read with the fitted estimator alive: the
Gram, every temporary and LAPACK's work space count.  A fit of the same
estimator runs first, so that the modules a fit imports on first use
(scikit-learn, the pandas it pulls in, scipy.linalg, ARPACK: about 130 MB
since ``import fastkern`` became lazy) are loaded before the measurement:
they are the interpreter's, not the fit's.

* Slow tier, N = 6000 (issue 47's size): the first fit of that size in the
  process, after a 200-row fit for the imports, at most 1.1 Gram.  This
  includes the work space OpenBLAS's Cholesky packs into and keeps for the
  life of the process, about 3 KB per row (18 MB at N = 6000).
* Fast tier, N = 2000: the second fit of that size, the first having
  touched that work space, so that only fastkern's own arrays count, at most
  1.1 Gram (at 2000 rows the work space alone is a fifth of the Gram).
  glibc's malloc is told to map every block of 64 KiB or more on its own, so
  the first fit's freed temporaries leave the resident set instead of being
  reused by the second unseen.

The fits run on one thread: each OpenBLAS thread adds its own buffers.
"""
import os
import sys
import textwrap

import pytest

import fastkern

from _subprocess import finish, running

SCRIPT = textwrap.dedent("""
    import ctypes
    import sys

    import numpy as np

    case, n, source, warm_rows = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    M_MMAP_THRESHOLD = -3
    ctypes.CDLL(None).mallopt(M_MMAP_THRESHOLD, 64 * 1024)
    sys.path.insert(0, source)
    from fastkern import KernelPCA, KernelRidge  # noqa: E402

    ESTIMATORS = {
        "KernelPCA-dense": lambda: KernelPCA(10, eigen_solver="dense", n_threads=1),
        "KernelPCA-arpack": lambda: KernelPCA(10, eigen_solver="arpack", n_threads=1),
        "KernelRidge-cholesky": lambda: KernelRidge(alpha=0.1, kernel="rbf",
                                                    solver="cholesky", n_threads=1),
        "KernelRidge-default": lambda: KernelRidge(alpha=0.1, kernel="rbf", n_threads=1),
    }


    def status(key):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1]) * 1024


    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 10))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)
    ESTIMATORS[case]().fit(X[:warm_rows], y[:warm_rows])
    base = status("VmRSS:")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    est = ESTIMATORS[case]().fit(X, y)
    print(f"{(status('VmHWM:') - base) / (8 * n * n):.4f}", flush=True)
""")
CASES = ["KernelPCA-dense", "KernelPCA-arpack", "KernelRidge-cholesky", "KernelRidge-default"]

needs_proc = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and os.access("/proc/self/clear_refs", os.W_OK)),
    reason="needs Linux's /proc/self/clear_refs to reset the peak resident set")


def _peak_over_gram(case, n, warm_rows, tmp_path, timeout):
    script = tmp_path / "fit_memory.py"
    script.write_text(SCRIPT)
    # The fastkern under test, wherever the subprocess starts.
    source = os.path.dirname(os.path.dirname(fastkern.__file__))
    with running(script, case, n, source, warm_rows, cwd=tmp_path) as proc:
        out, err = finish(proc, timeout)
    assert proc.returncode == 0, err
    return float(out.split()[-1])


@needs_proc
@pytest.mark.parametrize("case", CASES)
def test_fit_holds_nothing_but_the_gram_at_2000(case, tmp_path):
    assert _peak_over_gram(case, 2000, 2000, tmp_path, timeout=120) <= 1.1


@needs_proc
@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_first_fit_at_6000_peaks_at_most_1_1_times_the_gram(case, tmp_path):
    assert _peak_over_gram(case, 6000, 200, tmp_path, timeout=600) <= 1.1
