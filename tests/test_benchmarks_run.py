"""The pytest-benchmark suite still runs: every benchmark body once, at tiny sizes."""
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

BENCH_DIR = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.skipif(not (BENCH_DIR / "conftest.py").exists(),
                    reason="benchmarks/ is not next to tests/ (not a source checkout)")
def test_benchmarks_run_quick(tmp_path):
    pytest.importorskip("pytest_benchmark")
    env = dict(os.environ, FASTKERN_BENCH_QUICK="1")
    env.pop("FASTKERN_BENCH_SCALE", None)
    # Run from an empty directory so that the installed fastkern is imported,
    # not the source tree.
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(BENCH_DIR), "--benchmark-disable", "-q",
         "-p", "no:cacheprovider"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    tail = proc.stdout.strip().splitlines()[-1]
    assert "failed" not in tail and "error" not in tail, tail
    # At least the task grid ran: 4 tasks x (3 implementations x 3 sizes + the
    # naive loop at the smallest size).
    passed = re.search(r"(\d+) passed", tail)
    assert passed and int(passed.group(1)) >= 40, tail


# ---------------------------------------------------------------- the harness itself

def test_baseline_implementations_compute_the_task():
    """The naive and NumPy baselines of `fastkern bench` agree with scikit-learn."""
    from sklearn.decomposition import KernelPCA
    from sklearn.kernel_ridge import KernelRidge
    from sklearn.metrics.pairwise import rbf_kernel
    from sklearn.preprocessing import KernelCenterer

    from fastkern import _bench

    X, y = _bench.make_data(37, 5)
    g = 0.3
    K = rbf_kernel(X, gamma=g)
    np.testing.assert_allclose(_bench.naive_rbf_gram(X, g), K, rtol=1e-12)
    np.testing.assert_allclose(_bench.numpy_rbf_gram(X, g), K, rtol=1e-12)
    Kc = KernelCenterer().fit_transform(K)
    np.testing.assert_allclose(_bench.textbook_center(K), Kc, atol=1e-12)
    np.testing.assert_allclose(_bench.numpy_center(K.copy()), Kc, atol=1e-12)
    Z = _bench.numpy_kpca(Kc.copy(), 3)
    ref = KernelPCA(n_components=3, kernel="rbf", gamma=g).fit_transform(X)
    np.testing.assert_allclose(np.abs(Z), np.abs(ref), rtol=1e-7, atol=1e-9)
    coef = _bench.numpy_ridge(K.copy(), y, 0.7)
    np.testing.assert_allclose(coef, KernelRidge(alpha=0.7, kernel="rbf", gamma=g)
                               .fit(X, y).dual_coef_, rtol=1e-9)


def test_every_task_builds_and_runs():
    from fastkern import _bench

    for task, impl, n in _bench.plan([12, 20]):
        _bench.build(task, impl, n, d=3, n_threads=1)()
    with pytest.raises(ValueError, match="task"):
        _bench.build("svd", "numpy", 10)
    with pytest.raises(ValueError, match="impl"):
        _bench.build("gram", "cupy", 10)


def test_peak_memory_sees_the_gram():
    """A 1000 x 1000 float64 Gram is 8 MB: each memory method must see it."""
    from fastkern import _bench

    gram = 1000 * 1000 * 8
    child = _bench.measure("gram", "numpy", 1000, min_time=0.0, max_repeat=1)
    if child["memory_method"] == "rss":
        assert gram <= child["peak_bytes"] < 3 * gram
    traced = _bench.measure_here("gram", "numpy", 1000, min_time=0.0, max_repeat=1,
                                 method="tracemalloc")
    assert gram <= traced["peak_bytes"] < 3 * gram
    assert traced["time_s"] > 0 and traced["repeats"] == 1
