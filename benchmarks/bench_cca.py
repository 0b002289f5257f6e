"""KernelCCA against cca-zoo's KCCA, side by side (no target asserted).

Exact path at a moderate N (both libraries form the two N x N Grams; cca-zoo
then solves a 2N x 2N generalized eigenproblem on the kernel feature maps,
fastkern an SVD of the N x N cross-product of the two eigenbases), and the
low-rank path (incomplete Cholesky, rank 200) at a larger N that no N x N
method reaches.  The fastkern/cca-zoo time ratio is recorded in extra_info;
cca-zoo is not a fastkern dependency, so its benchmark skips without it.
FASTKERN_BENCH_QUICK=1 runs tiny sizes.
"""
import numpy as np
import pytest

from fastkern import KernelCCA

import _harness  # benchmarks/_harness/, on sys.path by conftest.py

N = _harness.scaled(1500)
N_LARGE = _harness.scaled(50000)
RANK = min(200, N_LARGE)
D = 5
SHRINKAGE = 0.1
ROUNDS = 2


def views(n, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, D))
    Y = np.column_stack([np.sin(X[:, 0]), X[:, 1] ** 2, X[:, 2] * X[:, 3]])
    Y += 0.3 * rng.standard_normal(Y.shape)
    return X, Y


def _ours(n):
    # cca-zoo's shrinkage c is regularization = c (n - 1) / (1 - c) (fastkern.cca).
    return KernelCCA(n_components=2, kernel="rbf", gamma=1.0 / D, gamma_y=1.0 / 3,
                     regularization=SHRINKAGE * (n - 1) / (1 - SHRINKAGE), solver="dense")


def test_kcca_dense(benchmark, run):
    benchmark.group = f"KernelCCA exact N={N}"
    X, Y = views(N)
    model = run(lambda: _ours(N).fit(X, Y), max_rounds=3)
    assert np.all(np.diff(model.canonical_correlations_) <= 0)


def test_kcca_vs_cca_zoo(benchmark, ratios):
    cca_zoo = pytest.importorskip("cca_zoo.nonparametric")
    benchmark.group = f"KernelCCA exact N={N} vs cca-zoo KCCA"
    X, Y = views(N)

    def theirs():
        return cca_zoo.KCCA(n_components=2, kernel="rbf", gamma=[1.0 / D, 1.0 / 3],
                            shrinkage=SHRINKAGE).fit([X, Y])

    small = views(30)
    _ours(30).fit(*small)
    cca_zoo.KCCA(n_components=2, kernel="rbf").fit(list(small))  # imports, out of the timing
    t = ratios.get("cca_zoo", lambda: _harness.side_by_side(
        {"cca-zoo": theirs, "fastkern": lambda: _ours(N).fit(X, Y)}, rounds=ROUNDS))
    benchmark.extra_info.update(fastkern_seconds=t["fastkern"], cca_zoo_seconds=t["cca-zoo"],
                                ratio=t["cca-zoo"] / t["fastkern"],
                                note="cca-zoo time / fastkern time, fastest of "
                                     f"{ROUNDS} interleaved rounds")
    # The timed entry of this group: one cca-zoo fit (fastkern's is test_kcca_dense).
    zoo = benchmark.pedantic(theirs, rounds=1, iterations=1, warmup_rounds=0)
    # The same canonical variates (up to sign) on the training data.
    ours = _ours(N).fit(X, Y).transform(X)
    zx = zoo.transform([X, Y])[0]
    for j in range(2):
        c = abs(np.corrcoef(ours[:, j], zx[:, j])[0, 1])
        assert c > 1 - 1e-6, c


def test_kcca_low_rank(benchmark):
    benchmark.group = f"KernelCCA incomplete Cholesky N={N_LARGE} rank {RANK}"
    X, Y = views(N_LARGE, seed=1)
    model = KernelCCA(n_components=2, gamma=1.0 / D, gamma_y=1.0 / 3, regularization=1.0,
                      solver="incomplete_cholesky", max_rank=RANK, tol=0.0)
    measured = {}

    def fit():
        measured["seconds"], measured["peak"] = _harness.measure_once(
            lambda: measured.setdefault("model", model.fit(X, Y)))

    benchmark.pedantic(fit, rounds=1, iterations=1, warmup_rounds=0)
    benchmark.extra_info.update(seconds=measured["seconds"], peak_mem_bytes=measured["peak"],
                                memory_method=_harness.memory_method(),
                                factors_bytes=2 * N_LARGE * RANK * 8)
    fitted = measured["model"]
    assert fitted.x_rank_ <= RANK and fitted.y_rank_ <= RANK
