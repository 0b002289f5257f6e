"""kernlab's kernels and native chi2 (issue 10, item 6).

* chi2 Gram, N = 4000, d = 16, non-negative data: fastkern's native
  ``chi2_kernel`` against scikit-learn's (a serial Cython loop), the ratio
  measured side by side (calls interleaved, fastest of each;
  ``_harness.side_by_side``) and recorded in extra_info.  No target is asserted.
* Throughput of each new kernel's symmetric Gram at the same size, as
  millions of kernel values per second (recorded in extra_info).

FASTKERN_BENCH_QUICK=1 runs everything at N = 400.
"""
import numpy as np
import pytest

import fastkern
import _harness  # benchmarks/_harness/, on sys.path by conftest.py

N = _harness.scaled(4000)
D = 16
QUICK = _harness.bench_scale() < 0.1
ROUNDS = 1 if QUICK else 3


def _data(n=N, d=D, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 1, (n, d))
    X[rng.random((n, d)) < 0.1] = 0  # empty histogram bins
    return X


KERNELS = {
    "laplacian_l2": lambda X: fastkern.laplacian_l2_kernel(X, gamma=0.5),
    "anova": lambda X: fastkern.anova_kernel(X, gamma=0.5, degree=2),
    "bessel": lambda X: fastkern.bessel_kernel(X, gamma=0.5, order=1, degree=1),
    "spline": lambda X: fastkern.spline_kernel(X),
    "chi2": lambda X: fastkern.chi2_kernel(X, gamma=0.5),
    "additive_chi2": lambda X: fastkern.additive_chi2_kernel(X),
    "histogram_intersection": lambda X: fastkern.histogram_intersection_kernel(X),
}


def _chi2_ratio():
    from sklearn.metrics.pairwise import chi2_kernel

    X = _data()
    fastkern.chi2_kernel(X[:50]), chi2_kernel(X[:50])
    t = _harness.side_by_side({"sklearn": lambda: chi2_kernel(X, gamma=0.5),
                             "fastkern": lambda: fastkern.chi2_kernel(X, gamma=0.5)},
                            rounds=ROUNDS)
    return t["sklearn"] / t["fastkern"], t


def test_chi2_gram_vs_sklearn(benchmark, run, ratios):
    from sklearn.metrics.pairwise import chi2_kernel

    benchmark.group = f"chi2 Gram N={N} d={D} vs sklearn"
    X = _data()
    r, t = ratios.get("chi2", _chi2_ratio)
    benchmark.extra_info.update(ratio_vs_sklearn=r, sklearn_seconds=t["sklearn"],
                                fastkern_seconds=t["fastkern"],
                                n_threads=fastkern._threads.default_n_threads())
    K = run(lambda: fastkern.chi2_kernel(X, gamma=0.5))
    np.testing.assert_allclose(K[:30], chi2_kernel(X[:30], X, gamma=0.5), rtol=1e-12)


def test_chi2_gram_sklearn_reference(benchmark, run, ratios):
    from sklearn.metrics.pairwise import chi2_kernel

    benchmark.group = f"chi2 Gram N={N} d={D} vs sklearn"
    X = _data()
    r, _ = ratios.get("chi2", _chi2_ratio)
    benchmark.extra_info.update(ratio_vs_sklearn=r, role="sklearn (reference)")
    run(lambda: chi2_kernel(X, gamma=0.5))


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_kernel_throughput(benchmark, run, name):
    benchmark.group = f"new kernels: symmetric Gram N={N} d={D}"
    X = _data()
    fn = KERNELS[name]
    fn(X[:50])
    t = _harness.side_by_side({name: lambda: fn(X)}, rounds=ROUNDS)[name]
    benchmark.extra_info.update(seconds=t, mvalues_per_second=N * N / t / 1e6)
    K = run(lambda: fn(X))
    assert K.shape == (N, N) and np.isfinite(K).all()
