"""fastkern.incomplete_cholesky and fastkern.estimate_gamma.

References: the exact Gram (scikit-learn), scipy's pdist, and kernlab's
inchol and sigest through values stored in tests/data/kernlab_refs.json,
written by tests/data/make_kernlab_refs.R (CI has no R; the last test reruns
the script where R and kernlab are installed and checks the file is current).
"""
import json
import pathlib
import signal
import threading

import numpy as np
import pytest
from scipy.spatial.distance import pdist
from sklearn.metrics import pairwise as skp

import fastkern
from fastkern import _gram, _inchol, kernels, lowrank
from fastkern._testing import least_time_to_interrupt
from fastkern._gamma import _gamma_from_pairs
from fastkern.lowrank import estimate_gamma, incomplete_cholesky
from fastkern._testing import have_kernlab, rerun_r_script

DATA = pathlib.Path(__file__).resolve().parent / "data"
REFS = json.loads((DATA / "kernlab_refs.json").read_text())


def _data(n, d, dtype=np.float64, seed=0):
    return np.random.default_rng(seed).standard_normal((n, d)).astype(dtype)


def _sk_gram(X, kernel, **params):
    X = np.asarray(X, dtype=np.float64)
    if kernel == "exponential":  # not a scikit-learn kernel
        return np.exp(params["gamma"] * (X @ X.T))
    return skp.pairwise_kernels(X, metric=kernel, **params)


# ---------------------------------------------------------------- incomplete Cholesky

@pytest.mark.parametrize("case", REFS["inchol"], ids=lambda c: c["name"])
def test_pivots_and_residuals_agree_with_kernlab(case):
    X = np.array(case["X"])
    params = dict(case["fastkern"])
    res = incomplete_cholesky(X, tol=case["tol"], **params)
    np.testing.assert_array_equal(res.pivots, case["pivots"])
    # kernlab's maxresiduals: the largest residual before each pivot.
    np.testing.assert_allclose(res.max_residual[:-1], case["maxresiduals"],
                               rtol=1e-9, atol=1e-12)
    # And the one that stopped it, from kernlab's final residual diagonal.
    assert res.max_residual[-1] == pytest.approx(max(case["diagresidues"]), rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("dtype, tol, atol", [(np.float64, 1e-6, 1e-12),
                                              (np.float32, 1e-3, 2e-6)])
@pytest.mark.parametrize("n", [1, 2, 257])
@pytest.mark.parametrize("kernel, params", [
    ("rbf", {"gamma": 0.3}),
    ("laplacian", {"gamma": 0.2}),
    ("poly", {"gamma": 0.5, "degree": 3, "coef0": 1.0}),
    ("exponential", {"gamma": 0.1}),
])
def test_factor_approximates_the_exact_gram(dtype, tol, atol, n, kernel, params):
    X = _data(n, 6, dtype)
    res = incomplete_cholesky(X, kernel, tol=tol, **params)
    assert res.G.dtype == dtype and res.G.shape == (n, len(res.pivots))
    K = _sk_gram(X, kernel, **params)
    G = res.G.astype(np.float64)
    R = K - G @ G.T
    # R is positive semi-definite, so |R_ij| <= max_i R_ii <= tol.
    assert res.max_residual[-1] <= tol
    scale = max(1.0, np.abs(K).max())
    assert np.abs(R).max() <= tol * scale + atol * scale
    # Distinct pivots, and the factor reproduces the pivot columns.
    assert len(set(res.pivots.tolist())) == len(res.pivots)
    np.testing.assert_allclose(R[:, res.pivots], 0, atol=10 * atol * scale)


def test_residual_trace_and_maximum_match_every_step():
    X = _data(120, 4, seed=3)
    res = incomplete_cholesky(X, "rbf", gamma=0.02, tol=1e-6)
    K = _sk_gram(X, "rbf", gamma=0.02)
    rank = len(res.pivots)
    assert res.residual_trace.shape == res.max_residual.shape == (rank + 1,)
    assert 10 < rank < 120
    for k in range(rank + 1):
        diag = np.diag(K) - np.sum(res.G[:, :k] ** 2, axis=1)
        assert res.residual_trace[k] == pytest.approx(np.sum(diag), rel=1e-9, abs=1e-11)
        assert res.max_residual[k] == pytest.approx(diag.max(), rel=1e-9, abs=1e-11)
    R = K - res.G @ res.G.T
    assert np.trace(R) == pytest.approx(res.residual_trace[-1], rel=1e-9, abs=1e-11)
    assert np.all(np.diff(res.residual_trace) <= 1e-12)


def test_kernel_objects_and_callables():
    X = _data(90, 3, seed=4)
    k = kernels.RBF(gamma=0.4) + 0.5 * kernels.Linear()
    res = incomplete_cholesky(X, k, tol=1e-8)
    K = _sk_gram(X, "rbf", gamma=0.4) + 0.5 * _sk_gram(X, "linear")
    assert np.abs(K - res.G @ res.G.T).max() <= 1e-8 * np.diag(K).max() + 1e-12

    def rbf(x, y, gamma):
        return np.exp(-gamma * np.sum((x - y) ** 2))

    small = X[:30]
    res_c = incomplete_cholesky(small, rbf, kernel_params={"gamma": 0.4}, tol=1e-8)
    res_s = incomplete_cholesky(small, "rbf", gamma=0.4, tol=1e-8)
    np.testing.assert_array_equal(res_c.pivots, res_s.pivots)
    np.testing.assert_allclose(res_c.G, res_s.G, atol=1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_and_two_threads_give_identical_factors(dtype):
    # 1100 rows: two full row blocks of the update and a partial one.
    X = _data(1100, 5, dtype, seed=5)
    one = incomplete_cholesky(X, "rbf", gamma=0.2, max_rank=80, n_threads=1)
    two = incomplete_cholesky(X, "rbf", gamma=0.2, max_rank=80, n_threads=2)
    np.testing.assert_array_equal(one.pivots, two.pivots)
    np.testing.assert_array_equal(one.G, two.G)
    np.testing.assert_array_equal(one.residual_trace, two.residual_trace)


def test_short_default_runs_take_the_free_cores_and_the_rest_keep_the_chooser(monkeypatch):
    # n_threads=None on a busy machine: a short factorisation runs on the
    # cores no other process runs on (as an estimator's short work does); a
    # long one, one without max_rank, or an explicit n_threads keeps every
    # thread for the per-step chooser; one whose every step is below the
    # serial threshold runs one thread and reads nothing.  The factor is the
    # same in every case.
    X = _data(400, 6, np.float64, seed=3)
    counts = []
    real_chooser, real_check = lowrank.StepThreads, lowrank.check_n_threads

    def chooser(n_threads, *args, **kwargs):
        counts.append(n_threads)
        return real_chooser(n_threads, *args, **kwargs)
    monkeypatch.setattr(lowrank, "StepThreads", chooser)
    monkeypatch.setattr(lowrank, "check_n_threads",
                        lambda n: 3 if n is None else real_check(n))
    free = [1]
    readings = []

    def cores_free():
        readings.append(free[0])
        return free[0]
    monkeypatch.setattr(lowrank, "cores_free", cores_free)

    def run(**kwargs):
        counts.clear()
        result = incomplete_cholesky(X, "rbf", gamma=0.3, tol=1e-3, **kwargs)
        return counts[0], result.G

    reference = incomplete_cholesky(X, "rbf", gamma=0.3, tol=1e-3, max_rank=30,
                                    n_threads=1).G
    # This X's steps are below the serial threshold (its own part, below).
    serial = lowrank.SERIAL_MULTIPLY_ADDS
    monkeypatch.setattr(lowrank, "SERIAL_MULTIPLY_ADDS", 0)
    assert run(max_rank=30)[0] == 1
    free[0] = 2
    assert run(max_rank=30)[0] == 2
    free[0] = 1
    threads, G = run(max_rank=30, n_threads=2)
    assert threads == 2
    np.testing.assert_array_equal(G, reference)
    assert run(max_rank=None)[0] == 3
    # Every step below the serial threshold (400 x (30 + 6) multiply-adds at
    # the last): one thread, without reading the load.
    readings.clear()
    free[0] = 2
    monkeypatch.setattr(lowrank, "SERIAL_MULTIPLY_ADDS", 400 * (30 + 6) + 1)
    threads, G = run(max_rank=30)
    assert threads == 1 and readings == []
    np.testing.assert_array_equal(G, reference)
    monkeypatch.setattr(lowrank, "SERIAL_MULTIPLY_ADDS", 400 * (30 + 6))
    assert run(max_rank=30)[0] == 2 and readings == [2]
    assert run(max_rank=30, n_threads=3)[0] == 3
    monkeypatch.setattr(lowrank, "SERIAL_MULTIPLY_ADDS", serial)
    assert run(max_rank=30)[0] == 1
    monkeypatch.setattr(lowrank, "SERIAL_MULTIPLY_ADDS", 0)
    monkeypatch.setattr(lowrank, "LOAD_AWARE_MADDS", 400 * 30 ** 2 / 2 - 1)
    threads, G = run(max_rank=30)
    assert threads == 3
    np.testing.assert_array_equal(G, reference)


@pytest.mark.parametrize("n", [1, 2, 511, 512, 513, 1537])
@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "poly"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_step_is_thread_independent_at_block_edges(n, kernel, dtype):
    # 512-row blocks: partial, exact and one-over sizes; poly takes the generic column.
    X = _data(n, 16, dtype, seed=n)
    res = [incomplete_cholesky(X, kernel, gamma=0.05, tol=0.0, max_rank=40, n_threads=t)
           for t in (1, 2)]
    np.testing.assert_array_equal(res[0].pivots, res[1].pivots)
    np.testing.assert_array_equal(res[0].G, res[1].G)
    np.testing.assert_array_equal(res[0].residual_trace, res[1].residual_trace)
    np.testing.assert_array_equal(res[0].max_residual, res[1].max_residual)


def _force_candidate_passes(monkeypatch, count):
    """Candidate passes from the first step, `count` candidates; returns the list
    of the steps at which a pass ran."""
    monkeypatch.setattr(lowrank, "PREPARE_FROM_BYTES", 0)
    monkeypatch.setattr(lowrank, "PREPARE_FROM_STEP", 0)
    monkeypatch.setattr(lowrank, "PREPARE_PER_FEATURE", 0)
    monkeypatch.setattr(lowrank, "CANDIDATES", count)
    monkeypatch.setattr(lowrank, "MIN_CANDIDATES", 1)
    passes = []
    real = _inchol.prepare

    def spy(Gt, k, *args):
        passes.append(k)
        return real(Gt, k, *args)

    monkeypatch.setattr(_inchol, "prepare", spy)
    return passes


# n across the passes' 128-row blocks and 8-row panels; counts that are and
# are not multiples of the 4-candidate tiles, one below the pivots' spread
# (every few steps a pivot is not a candidate: a new pass).
@pytest.mark.parametrize("n, count", [(9, 3), (129, 13), (1031, 32), (2500, 32)])
@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_threads", [1, 2])
def test_candidate_passes_give_the_plain_factor_bit_for_bit(monkeypatch, n, count, kernel,
                                                            dtype, n_threads):
    X = _data(n, 6, dtype, seed=n)
    kwargs = dict(gamma=0.3, tol=0.0, max_rank=min(n, 150), n_threads=n_threads)
    monkeypatch.setattr(lowrank, "PREPARE_FROM_BYTES", 1 << 62)
    plain = incomplete_cholesky(X, kernel, **kwargs)
    passes = _force_candidate_passes(monkeypatch, count)
    fast = incomplete_cholesky(X, kernel, **kwargs)
    assert passes, "no candidate pass ran"
    np.testing.assert_array_equal(fast.pivots, plain.pivots)
    np.testing.assert_array_equal(fast.G, plain.G)
    np.testing.assert_array_equal(fast.residual_trace, plain.residual_trace)
    np.testing.assert_array_equal(fast.max_residual, plain.max_residual)


def test_candidate_passes_keep_ties_on_the_first_row(monkeypatch):
    # Repeated rows: each pair ties at every step, and more rows than there are
    # candidates tie for the largest residual at the start.
    X = np.repeat(_data(40, 3, seed=17), 2, axis=0)
    passes = _force_candidate_passes(monkeypatch, 8)
    res = incomplete_cholesky(X, "rbf", gamma=0.3, tol=1e-12, n_threads=2)
    assert passes
    assert res.pivots[0] == 0
    assert np.all(res.pivots % 2 == 0) and len(res.pivots) == 40


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n, k, c", [(1, 0, 1), (7, 3, 5), (300, 17, 9), (1031, 40, 32)])
def test_prepare_subtracts_each_candidates_pivot_sums(kernel, dtype, n, k, c):
    rng = np.random.default_rng(n + k)
    X = (rng.standard_normal((n, 5)) + 50).astype(dtype)
    Xt = np.ascontiguousarray(X.T)
    # Rows past k are never read: NaN would show.
    Gt = np.vstack([rng.standard_normal((k, n)), np.full((2, n), np.nan)]).astype(dtype)
    cand = rng.choice(n, c, replace=c > n).astype(np.intp)
    gc = rng.standard_normal((c, k))
    W = np.full((c + 1, n), np.nan)
    _inchol.prepare(Gt, k, cand, gc, W, X, Xt, _gram.kind_codes()[kernel],
                    _gram.pack_params({"gamma": 0.3}), 2)
    # Direct differences (the data sit at an offset of 50, where |x|^2 - 2 x.y
    # + |y|^2 would lose digits).
    diff = X.astype(np.float64)[cand][:, None, :] - X.astype(np.float64)[None, :, :]
    dist = (diff ** 2).sum(-1) if kernel == "rbf" else np.abs(diff).sum(-1)
    K = np.exp(-0.3 * dist)
    expected = K - gc @ Gt[:k].astype(np.float64)
    # Float32 data: the kernel value is rounded to float32, as the plain step's.
    kernel_err = np.finfo(dtype).eps * 4
    bound = kernel_err + 1e-13 * (1 + np.abs(gc) @ np.abs(Gt[:k].astype(np.float64)))
    assert np.all(np.abs(W[:c] - expected) <= bound)
    assert np.isnan(W[c]).all()


@pytest.mark.parametrize("change, match", [
    (dict(k=5), "gc of"), (dict(cand=np.array([0, 9], dtype=np.intp)), "candidate rows"),
    (dict(n_threads=0), "n_threads"), (dict(kind=0), "DIRECT_KINDS"),
    (dict(W=np.empty((1, 9))), "W of at least"),
])
def test_prepare_refuses_what_does_not_fit(change, match):
    X = _data(9, 2)
    args = dict(Gt=np.zeros((4, 9)), k=2, cand=np.array([0, 3], dtype=np.intp),
                gc=np.zeros((2, 2)), W=np.empty((2, 9)), X=X, Xt=np.ascontiguousarray(X.T),
                kind=_gram.kind_codes()["rbf"], params=_gram.pack_params({}), n_threads=1)
    args.update(change)
    with pytest.raises(ValueError, match=match):
        _inchol.prepare(*args.values())


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
def test_fused_column_matches_the_gram_path(kernel):
    # The kernel object goes through the generic column (fastkern's Gram code);
    # the string through the fused direct-difference step.
    X = _data(600, 9, seed=15)
    obj = kernels.RBF(gamma=0.1) if kernel == "rbf" else kernels.Laplacian(gamma=0.1)
    fused = incomplete_cholesky(X, kernel, gamma=0.1, tol=1e-9, max_rank=60)
    generic = incomplete_cholesky(X, obj * 1.0, tol=1e-9, max_rank=60)
    np.testing.assert_array_equal(fused.pivots, generic.pivots)
    np.testing.assert_allclose(fused.G, generic.G, atol=1e-10)
    # And a bare RBF/Laplacian object takes the fused path with its own gamma.
    np.testing.assert_array_equal(incomplete_cholesky(X, obj, tol=1e-9, max_rank=60).G,
                                  fused.G)


def test_fused_column_has_no_cancellation_far_from_the_origin():
    # Rows near a common offset of 1e4: |x|^2 - 2 x.y + |y|^2 would lose every
    # digit; direct differences are exact.
    Z = _data(300, 4, seed=16)
    X = Z + 1e4
    res = incomplete_cholesky(X, "rbf", gamma=0.5, tol=1e-10)
    K = np.exp(-0.5 * np.sum((Z[:, None, :] - Z[None, :, :]) ** 2, axis=-1))
    assert np.abs(K - res.G @ res.G.T).max() <= 1e-10 + 1e-12
    np.testing.assert_array_equal(res.pivots, incomplete_cholesky(Z, "rbf", gamma=0.5,
                                                                  tol=1e-10).pivots)


def test_ties_go_to_the_first_row():
    # Repeated rows: every residual is tied at each step between the copies.
    X = np.repeat(_data(30, 3, seed=17), 2, axis=0)
    res = incomplete_cholesky(X, "rbf", gamma=0.3, tol=1e-12, n_threads=2)
    assert res.pivots[0] == 0
    assert np.all(res.pivots % 2 == 0) and len(res.pivots) == 30


def test_gamma_scale_and_median():
    X = _data(200, 5, seed=18) * [1, 2, 3, 4, 5]
    for name, value in (("scale", 1 / (5 * X.var())),
                        ("median", estimate_gamma(X, random_state=0).gamma)):
        a = incomplete_cholesky(X, "rbf", gamma=name, max_rank=30)
        b = incomplete_cholesky(X, "rbf", gamma=value, max_rank=30)
        np.testing.assert_array_equal(a.G, b.G)
    # A kernel without gamma ignores it.
    np.testing.assert_array_equal(incomplete_cholesky(X, "linear", gamma="median").G,
                                  incomplete_cholesky(X, "linear").G)
    with pytest.raises(ValueError, match="gamma must be"):
        incomplete_cholesky(X, "rbf", gamma="mean")


@pytest.mark.parametrize("tol", [1e-6, 0.0])
def test_exactly_rank_deficient_kernels_stop_at_their_rank(tol):
    X = _data(300, 5, seed=6)
    lin = incomplete_cholesky(X, "linear", tol=tol)
    assert lin.G.shape == (300, 5)
    np.testing.assert_allclose(lin.G @ lin.G.T, X @ X.T, atol=1e-10)
    # Degree-2 polynomial on 3 features: a 10-dimensional feature space.
    poly = incomplete_cholesky(X[:, :3], "poly", degree=2, gamma=1.0, coef0=1.0, tol=tol)
    assert poly.G.shape == (300, 10)


def test_max_rank_is_honoured_and_capacity_growth_is_invisible():
    X = _data(400, 8, seed=7)
    capped = incomplete_cholesky(X, "rbf", gamma=0.05, tol=0.0, max_rank=7)
    assert capped.G.shape == (400, 7) and capped.pivots.shape == (7,)
    assert capped.residual_trace.shape == (8,)
    # Without max_rank G grows past its first capacity of 64 columns.
    grown = incomplete_cholesky(X, "rbf", gamma=0.05, tol=1e-7)
    fixed = incomplete_cholesky(X, "rbf", gamma=0.05, tol=1e-7, max_rank=400)
    assert grown.G.shape[1] > 64
    np.testing.assert_array_equal(grown.pivots, fixed.pivots)
    np.testing.assert_array_equal(grown.G, fixed.G)
    np.testing.assert_array_equal(capped.pivots, grown.pivots[:7])
    # Above n means n.
    assert incomplete_cholesky(X[:5], "rbf", tol=0.0, max_rank=50).G.shape[1] <= 5


def test_strided_and_read_only_input():
    X = _data(200, 10, seed=8)
    ref = incomplete_cholesky(np.ascontiguousarray(X[::2, ::2]), "rbf", gamma=0.3)
    ro = np.asfortranarray(X)[::2, ::2]
    ro.setflags(write=False)
    res = incomplete_cholesky(ro, "rbf", gamma=0.3)
    np.testing.assert_array_equal(res.pivots, ref.pivots)
    np.testing.assert_array_equal(res.G, ref.G)


def test_zero_kernel_gives_rank_zero():
    res = incomplete_cholesky(np.zeros((4, 2)), "linear")
    assert res.G.shape == (4, 0) and res.pivots.shape == (0,)
    np.testing.assert_array_equal(res.residual_trace, [0.0])


@pytest.mark.parametrize("kwargs, err, match", [
    ({"X": [[np.nan, 1.0]]}, ValueError, "X contains NaN"),
    ({"X": [[np.inf, 1.0]]}, ValueError, "X contains NaN"),
    ({"X": np.zeros((0, 3))}, ValueError, "X is empty"),
    ({"X": [1.0, 2.0]}, ValueError, "2-D"),
    ({"tol": -1e-3}, ValueError, "tol must be >= 0"),
    ({"tol": float("nan")}, ValueError, "tol must be finite"),
    ({"tol": "small"}, TypeError, "tol must be a real"),
    ({"max_rank": 0}, ValueError, "max_rank must be >= 1"),
    ({"max_rank": 2.5}, TypeError, "max_rank must be"),
    ({"kernel": "gaussian"}, ValueError, "kernel must be one of"),
    ({"kernel": "precomputed"}, ValueError, "precomputed"),
    ({"n_threads": 0}, ValueError, "n_threads"),
    ({"kernel": "exponential", "gamma": 1e3}, ValueError, "not finite"),
])
def test_bad_input_is_refused(kwargs, err, match):
    args = {"X": _data(5, 2)} | kwargs
    with pytest.raises(err, match=match):
        incomplete_cholesky(args.pop("X"), **args)


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs POSIX signals")
def test_ctrl_c_stops_the_factorisation():
    # Some seconds on 2 cores if it runs to the end.
    X = _data(60000, 16, seed=9)
    threads = threading.active_count()
    latency = least_time_to_interrupt(
        lambda: incomplete_cholesky(X, "rbf", tol=0.0, max_rank=1500), 1.0)
    assert latency is not None, "the factorisation finished before Ctrl-C: make it larger"
    assert latency < 1.0
    assert threading.active_count() == threads


def test_exported_from_the_package():
    assert fastkern.incomplete_cholesky is incomplete_cholesky
    assert fastkern.estimate_gamma is estimate_gamma
    assert {"incomplete_cholesky", "estimate_gamma"} <= set(fastkern.__all__)


# ---------------------------------------------------------------- gamma estimates

def test_median_heuristic_matches_pdist():
    X = _data(200, 5, seed=10) * [1, 2, 3, 0.5, 1]
    d = pdist(X, "sqeuclidean")
    est = estimate_gamma(X)
    assert est.gamma == pytest.approx(1 / np.median(d), rel=1e-12)
    np.testing.assert_allclose(est.quantiles, 1 / np.quantile(d, [0.9, 0.5, 0.1]), rtol=1e-12)
    assert est.gamma == est.quantiles[1]


def test_median_heuristic_drops_identical_rows_and_scales():
    X = np.repeat(_data(40, 3, seed=11), 3, axis=0)
    d = pdist(X, "sqeuclidean")
    assert estimate_gamma(X).gamma == pytest.approx(1 / np.median(d[d > 0]), rel=1e-12)
    Z = (X - X.mean(0)) / X.std(0, ddof=1)
    dz = pdist(Z, "sqeuclidean")
    assert estimate_gamma(X, scaled=True).gamma == pytest.approx(1 / np.median(dz[dz > 0]),
                                                                  rel=1e-12)


def test_median_heuristic_subsamples_large_inputs():
    X = _data(1500, 4, seed=12)  # 1,124,250 pairs: more than the 1,000,000 used
    exact = 1 / np.median(pdist(X, "sqeuclidean"))
    a = estimate_gamma(X, random_state=0)
    np.testing.assert_array_equal(a.quantiles, estimate_gamma(X, random_state=0).quantiles)
    assert a.gamma != estimate_gamma(X, random_state=1).gamma
    assert a.gamma == pytest.approx(exact, rel=0.01)
    few = estimate_gamma(X, n_pairs=20000, random_state=0)
    assert few.gamma == pytest.approx(exact, rel=0.05)
    assert estimate_gamma(X[:50], n_pairs=10**6).gamma == pytest.approx(
        1 / np.median(pdist(X[:50], "sqeuclidean")), rel=1e-12)


@pytest.mark.parametrize("case", REFS["sigest"], ids=lambda c: c["name"])
def test_sigest_agrees_with_kernlab_on_the_same_pairs(case):
    est = _gamma_from_pairs(np.array(case["X"]), case["i"], case["j"], case["scaled"])
    np.testing.assert_allclose(est.quantiles, case["sigest"], rtol=1e-12)
    assert est.gamma == est.quantiles[1]


@pytest.mark.parametrize("case", [c for c in REFS["sigest"] if c["name"].startswith("simplex")],
                         ids=lambda c: c["name"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sigest_agrees_with_kernlab_where_sampling_cannot_matter(case, seed):
    # Rows of 3 * identity: every pair of distinct rows is at the same
    # distance, so whichever pairs are drawn the values are kernlab's.
    est = estimate_gamma(np.array(case["X"]), "sigest", frac=case["frac"],
                         scaled=case["scaled"], random_state=seed)
    np.testing.assert_allclose(est.quantiles, case["sigest"], rtol=1e-12)


def test_sigest_draws_frac_n_pairs_with_replacement():
    X = _data(101, 3, seed=13)
    rng = np.random.RandomState(7)
    i, j = rng.randint(101, size=50), rng.randint(101, size=50)
    d = np.sum((X[i] - X[j]) ** 2, axis=1)
    expected = 1 / np.quantile(d[d != 0], [0.9, 0.5, 0.1])
    est = estimate_gamma(X, "sigest", frac=0.5, random_state=7)
    np.testing.assert_allclose(est.quantiles, expected, rtol=1e-12)


def test_sigest_constant_column_is_not_scaled_with_a_warning():
    X = np.column_stack([_data(30, 2, seed=14), np.ones(30)])
    with pytest.warns(UserWarning, match="constant"):
        scaled = estimate_gamma(X, scaled=True)
    np.testing.assert_array_equal(scaled.quantiles, estimate_gamma(X).quantiles)


@pytest.mark.parametrize("args, kwargs, err, match", [
    ((), {"method": "mean"}, ValueError, "method must be"),
    ((), {"frac": 0.0}, ValueError, "frac must be > 0"),
    ((), {"n_pairs": 0}, ValueError, "n_pairs must be >= 1"),
    ((), {"scaled": "yes"}, TypeError, "scaled must be"),
    ((), {"method": "sigest", "frac": 0.01}, ValueError, "gives no pairs"),
])
def test_estimate_gamma_bad_input(args, kwargs, err, match):
    with pytest.raises(err, match=match):
        estimate_gamma(_data(20, 2), *args, **kwargs)


def test_estimate_gamma_degenerate_data():
    with pytest.raises(ValueError, match="at least 2 rows"):
        estimate_gamma(np.ones((1, 3)))
    with pytest.raises(ValueError, match="all distances"):
        estimate_gamma(np.ones((5, 3)))
    with pytest.raises(ValueError, match="NaN"):
        estimate_gamma([[0.0, np.nan], [1.0, 2.0]])


# ---------------------------------------------------------------- stored references

@pytest.mark.skipif(not have_kernlab(), reason="needs Rscript with kernlab")
def test_stored_kernlab_references_are_current(tmp_path):
    out = tmp_path / "refs.json"
    assert rerun_r_script(DATA / "make_kernlab_refs.R", out) == REFS


def test_max_rank_cap_before_tol_warns_with_the_residual():
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    # 2000 rows, RBF: tol=1e-6 needs far more than 300 pivots.
    X = np.random.default_rng(7).normal(size=(2000, 6))
    with pytest.warns(ConvergenceWarning, match=r"max_rank=300.*tol=1e-06.*residual") as rec:
        res = incomplete_cholesky(X, "rbf", gamma=0.5, tol=1e-6, max_rank=300)
    assert res.G.shape[1] == 300
    # The residual the message gives is the factor's, against the Gram itself.
    K = skp.rbf_kernel(X, gamma=0.5)
    top = float(np.max(np.diag(K - res.G @ res.G.T)))
    assert f"{top:.3g}" in str(rec[0].message)
    assert top > 1e-6
    # Reaching tol first, or a cap at n, says nothing.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        incomplete_cholesky(X[:200], "rbf", gamma=0.5, tol=1e-3, max_rank=200)
        incomplete_cholesky(X[:50], "rbf", gamma=0.5, tol=0.0, max_rank=50)


def test_centered_tol_is_relative_to_the_centred_kernel():
    # gamma=1e-9: K is 1 to within 1e-8, so the absolute rule stops after one
    # pivot; the centred kernel's scale is ~1e-8 and needs the next columns.
    X = np.random.default_rng(3).normal(size=(400, 3))
    K = skp.rbf_kernel(X, gamma=1e-9)
    H = np.eye(400) - 1 / 400
    Kc = H @ K @ H
    assert incomplete_cholesky(X, "rbf", gamma=1e-9, tol=1e-6).G.shape[1] == 1
    res = incomplete_cholesky(X, "rbf", gamma=1e-9, tol=1e-6, centered=True)
    Gc = res.G - res.G.mean(axis=0)
    scale = np.trace(Kc) / 400
    assert np.max(np.diag(K - res.G @ res.G.T)) <= 1e-6 * scale + 1e-15
    top = np.linalg.eigvalsh(Kc)[::-1][:3]
    approx = np.linalg.eigvalsh(Gc.T @ Gc)[::-1][:3]
    np.testing.assert_allclose(approx, top, rtol=1e-4)


@pytest.mark.parametrize("n, d", [(2, 1), (3, 31), (17, 32), (40, 33), (129, 65), (300, 7)])
@pytest.mark.parametrize("threads", [1, 2])
def test_every_pair_distance_is_pdists_in_its_order(n, d, threads):
    # Direct differences, row by row in scipy's condensed order (a pair out
    # of place would be off by O(1), not by rounding).
    from scipy.spatial.distance import pdist

    from fastkern import _gram

    X = np.random.default_rng(n * d).standard_normal((n, d)) * 1e-3 + 1e8
    X[n // 2] = X[0] + 1e-8 * (n > 2)  # a near-duplicate pair, far from 0
    out = np.full(n * (n - 1) // 2, np.nan)
    _gram.upper_sq_dists(X, out, threads)
    ref = pdist(X, "sqeuclidean")
    np.testing.assert_allclose(out, ref, rtol=4 * d * np.finfo(float).eps, atol=0)
    one = np.empty_like(out)
    _gram.upper_sq_dists(X, one, 1)
    np.testing.assert_array_equal(out, one)


def test_every_pair_distance_rejects_bad_arguments_and_edges():
    from fastkern import _gram

    X = np.ones((4, 3))
    with pytest.raises(ValueError, match="out must hold the 6 pairs of 4 rows, got 5"):
        _gram.upper_sq_dists(X, np.empty(5), 1)
    with pytest.raises(ValueError, match="n_threads must be at least 1"):
        _gram.upper_sq_dists(X, np.empty(6), 0)
    _gram.upper_sq_dists(np.ones((1, 3)), np.empty(0), 1)
    _gram.upper_sq_dists(np.ones((0, 3)), np.empty(0), 1)
    out = np.full(6, np.nan)
    _gram.upper_sq_dists(np.ones((4, 0)), out, 1)
    np.testing.assert_array_equal(out, 0.0)


@pytest.mark.parametrize("layout", ["C", "F", "strided", "readonly", "float32"])
def test_median_heuristic_takes_any_layout(layout):
    from scipy.spatial.distance import pdist

    base = np.random.default_rng(5).standard_normal((301, 12))
    X = {"C": base, "F": np.asfortranarray(base), "strided": np.repeat(base, 2, axis=1)[:, ::2],
         "readonly": base.copy(), "float32": base.astype(np.float32)}[layout]
    if layout == "readonly":
        X.flags.writeable = False
    ref = 1 / np.median(pdist(np.asarray(X, dtype=np.float64), "sqeuclidean"))
    assert estimate_gamma(X).gamma == pytest.approx(ref, rel=1e-14)


@pytest.mark.parametrize("m", [1, 2, 3, 4, 9, 10, 11, 101, 1000, 19900])
@pytest.mark.parametrize("kind", ["spread", "ties", "ascending", "descending"])
def test_distance_quantiles_are_numpys(m, kind):
    # R's type 7 from one partition per order statistic on shrinking ranges:
    # numpy's own quantile, to the bit.
    from fastkern._gamma import _quantiles

    v = np.random.default_rng(m).standard_normal(m) ** 2
    v = {"spread": v, "ties": np.round(v, 1) + 0.1, "ascending": np.sort(v),
         "descending": np.sort(v)[::-1].copy()}[kind]
    probs = [0.9, 0.5, 0.1]
    expected = np.quantile(v, probs)
    work = v.copy()
    np.testing.assert_array_equal(_quantiles(work, probs), expected)
    np.testing.assert_array_equal(np.sort(work), np.sort(v))  # partitioned, nothing lost
    np.testing.assert_array_equal(_quantiles(v.copy(), [0.0, 1.0, 0.25]),
                                  np.quantile(v, [0.0, 1.0, 0.25]))


def test_median_gamma_in_an_estimator_keeps_to_its_n_threads(monkeypatch):
    from fastkern import _gram, _threads

    seen = []
    real = _gram.upper_sq_dists

    def recording(X, out, n_threads):
        seen.append(n_threads)
        return real(X, out, n_threads)

    monkeypatch.setattr(_gram, "upper_sq_dists", recording)
    monkeypatch.setattr(_threads, "default_n_threads", lambda: 3)
    monkeypatch.setattr(_threads, "cores_free", lambda: 3)
    X = _data(600, 4, np.float64, seed=2)
    y = X[:, 0]
    fits = {t: fastkern.KernelRidge(kernel="rbf", gamma="median", n_threads=t).fit(X, y)
            for t in (1, 2, None)}
    assert seen == [1, 2, 3]
    assert fits[1].gamma_ == fits[2].gamma_ == fits[None].gamma_
