"""Kernel two-sample (MMD) and independence (HSIC) permutation tests against
hyppo (skipped when hyppo is not installed; it is not a fastkern dependency).

Both sides run the same permutation test: hyppo's ``MMD`` / ``Hsic``
``test(..., auto=False, workers=1)`` and fastkern's ``mmd_test`` /
``hsic_test`` with ``estimator="hyppo"`` (hyppo's statistic) and
``n_threads=1``, timed side by side (calls interleaved, best of the rounds)
so that load from other processes hits both alike.  The ratio hyppo /
fastkern is recorded in extra_info; fastkern with all cores is recorded
too.  Under --benchmark-only at full size (MMD: 500 + 500 rows, HSIC: 1000
rows, 4 features, 100 permutations) fastkern must be faster; the issue sets
no number for this item.  FASTKERN_BENCH_QUICK=1 runs at N=20.
"""
import warnings

import numpy as np
import pytest

import fastkern
import _harness  # benchmarks/_harness/, on sys.path by conftest.py

hyppo = pytest.importorskip("hyppo")

N = _harness.scaled(1000, minimum=20)
D = 4
REPS = 100
GAMMA = 0.1


def _data():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N, D))
    return X, np.tanh(X) + rng.standard_normal((N, D))


@pytest.mark.parametrize("test", ["mmd", "hsic"])
def test_permutation_test_vs_hyppo(benchmark, benchmark_only, test):
    from hyppo.independence import Hsic
    from hyppo.ksample import MMD

    X, Y = _data()
    if test == "mmd":
        X, Y = X[:N // 2], Y[:N // 2]
        theirs = lambda: MMD(compute_kernel="rbf", gamma=GAMMA).test(  # noqa: E731
            X, Y, reps=REPS, workers=1, auto=False)
        ours = lambda threads: fastkern.mmd_test(  # noqa: E731
            X, Y, gamma=GAMMA, estimator="hyppo", n_permutations=REPS, random_state=0,
            n_threads=threads)
        mine = MMD(compute_kernel="rbf", gamma=GAMMA).statistic(X, Y)
    else:
        theirs = lambda: Hsic(compute_kernel="rbf", gamma=GAMMA).test(  # noqa: E731
            X, Y, reps=REPS, workers=1, auto=False)
        ours = lambda threads: fastkern.hsic_test(  # noqa: E731
            X, Y, gamma_x=GAMMA, gamma_y=GAMMA, estimator="hyppo", n_permutations=REPS,
            random_state=0, n_threads=threads)
        mine = Hsic(compute_kernel="rbf", gamma=GAMMA).statistic(X, Y)
    benchmark.group = f"{test} permutation test, N={N}, {REPS} permutations: hyppo vs fastkern"
    assert ours(1).statistic == pytest.approx(mine, rel=1e-8, abs=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # hyppo warns about reps < 1000
        theirs()  # numba compiles on the first call
        times = _harness.side_by_side({"hyppo": theirs, "fastkern": lambda: ours(1),
                                     "fastkern_all_cores": lambda: ours(None)},
                                    rounds=2 if _harness.bench_scale() < 1 else 1)
    ratio = times["hyppo"] / times["fastkern"]
    benchmark.extra_info.update(
        hyppo_version=hyppo.__version__, seconds=times, ratio_hyppo_over_fastkern=ratio,
        ratio_all_cores=times["hyppo"] / times["fastkern_all_cores"],
        target="fastkern (1 thread) faster than hyppo (workers=1)")
    benchmark.pedantic(lambda: ours(None), rounds=1, iterations=1, warmup_rounds=0)
    if benchmark_only and _harness.bench_scale() == 1:
        assert ratio > 1, times
