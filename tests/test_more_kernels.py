"""kernlab's kernels and native chi2 / histogram intersection (issue 10, item 6).

References: plain NumPy formulas written here (and scipy's jv for the Bessel
kernel), scikit-learn's chi2_kernel / additive_chi2_kernel, and kernlab's
kernelMatrix through values stored in tests/data/kernelmatrix_refs.json,
written by tests/data/make_kernelmatrix_refs.R (CI has no R; the last test
reruns the script where R and kernlab are installed and checks the file is
current).
"""
import json
from math import lgamma
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import jv
from sklearn.metrics import pairwise as skp

import fastkern
from fastkern import _gram, kernels, pairwise
from fastkern._kernel_api import KERNEL_PARAM_NAMES, STRING_KERNELS, kernel_gram
from fastkern._testing import have_kernlab, rerun_r_script

DATA = Path(__file__).parent / "data"
REFS = json.loads((DATA / "kernelmatrix_refs.json").read_text())


# -- independent references ---------------------------------------------------

def _diff(X, Y):
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    return X[:, None, :], Y[None, :, :]


def ref_laplacian_l2(X, Y, gamma):
    x, y = _diff(X, Y)
    return np.exp(-gamma * np.sqrt(((x - y) ** 2).sum(-1)))


def ref_anova(X, Y, gamma, degree):
    x, y = _diff(X, Y)
    return np.exp(-gamma * (x - y) ** 2).sum(-1) ** degree


def ref_bessel(X, Y, gamma, order, degree):
    x, y = _diff(X, Y)
    r = gamma * np.sqrt(((x - y) ** 2).sum(-1))
    safe = np.where(r == 0, 1.0, r)
    # Gamma(nu + 1) (2 / r)^nu J_nu(r), whose limit at r = 0 is 1.
    v = jv(order, safe) * np.exp(lgamma(order + 1) + order * np.log(2 / safe))
    return np.where(r == 0, 1.0, v) ** degree


def ref_spline(X, Y):
    x, y = _diff(X, Y)
    m = np.minimum(x, y)
    return np.prod(1 + x * y + x * y * m - (x + y) / 2 * m ** 2 + m ** 3 / 3, axis=-1)


def ref_additive_chi2(X, Y):
    x, y = _diff(X, Y)
    s = x + y
    return -np.where(s == 0, 0.0, (x - y) ** 2 / np.where(s == 0, 1.0, s)).sum(-1)


def ref_chi2(X, Y, gamma):
    return np.exp(gamma * ref_additive_chi2(X, Y))


def ref_intersection(X, Y):
    x, y = _diff(X, Y)
    return np.minimum(x, y).sum(-1)


# name -> (fastkern function, parameters, reference, non-negative data only)
KERNELS = {
    "laplacian_l2": (fastkern.laplacian_l2_kernel, {"gamma": 0.3},
                     lambda X, Y: ref_laplacian_l2(X, Y, 0.3), False),
    "anova": (fastkern.anova_kernel, {"gamma": 0.7, "degree": 2},
              lambda X, Y: ref_anova(X, Y, 0.7, 2), False),
    "bessel": (fastkern.bessel_kernel, {"gamma": 0.8, "order": 1.5, "degree": 2},
               lambda X, Y: ref_bessel(X, Y, 0.8, 1.5, 2), False),
    "spline": (fastkern.spline_kernel, {}, ref_spline, True),
    "chi2": (fastkern.chi2_kernel, {"gamma": 0.4}, lambda X, Y: ref_chi2(X, Y, 0.4), True),
    "additive_chi2": (fastkern.additive_chi2_kernel, {}, ref_additive_chi2, True),
    "histogram_intersection": (fastkern.histogram_intersection_kernel, {}, ref_intersection,
                               True),
}
NAMES = sorted(KERNELS)
NONNEG = [n for n in NAMES if n in ("chi2", "additive_chi2", "histogram_intersection")]
DISTANCE = ["laplacian_l2", "bessel"]


def _data(name, n, d, seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    if name == "spline":
        # Non-negative and small: a product of d factors grows fast.
        X = rng.uniform(0, 0.5, (n, d))
    elif KERNELS[name][3]:
        X = rng.uniform(0, 2, (n, d))
        X[rng.random((n, d)) < 0.2] = 0  # zero bins: x + y = 0 terms
    else:
        X = rng.normal(size=(n, d))
    return X.astype(dtype)


def _scale(K):
    return max(1.0, float(np.abs(K).max()))


# -- values -------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (255, 257), (257, 255)])
@pytest.mark.parametrize("same", [True, False])
def test_matches_numpy_formula_float64(name, shape, same):
    fn, params, ref, _ = KERNELS[name]
    n, m = shape
    X = _data(name, n, 5, seed=1)
    Y = None if same else _data(name, m, 5, seed=2)
    K = fn(X, Y, **params)
    R = ref(X, X if same else Y)
    assert K.dtype == np.float64 and K.shape == R.shape
    np.testing.assert_allclose(K, R, rtol=1e-12, atol=1e-13 * _scale(R))
    if same:
        assert np.array_equal(K, K.T)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("shape", [(1, 2), (255, 257)])
def test_float32_is_float64_rounded(name, shape):
    fn, params, ref, _ = KERNELS[name]
    X = _data(name, shape[0], 6, seed=3, dtype=np.float32)
    Y = _data(name, shape[1], 6, seed=4, dtype=np.float32)
    K = fn(X, Y, **params)
    R = ref(X, Y)  # float64 values of the float32 inputs
    assert K.dtype == np.float32
    np.testing.assert_allclose(K, R, rtol=2e-6, atol=2e-6 * _scale(R))
    # Mixed precision computes in float64, as scikit-learn.
    assert fn(X, Y.astype(np.float64), **params).dtype == np.float64


@pytest.mark.parametrize("name", DISTANCE)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("path", ["direct", "dot", "blas"])
@pytest.mark.parametrize("d", [3, 40])
def test_distance_kernels_every_path(name, dtype, path, d):
    fn, params, ref, _ = KERNELS[name]
    X = _data(name, 257, d, seed=5, dtype=dtype)
    Y = _data(name, 130, d, seed=6, dtype=dtype)
    X[7] = Y[3]  # a zero distance in K(X, Y)
    tol = 1e-12 if dtype == np.float64 else 2e-6
    for A, B in ((X, Y), (X, None)):
        K = fn(A, B, path=path, **params)
        R = ref(A, A if B is None else B)
        np.testing.assert_allclose(K, R, rtol=tol, atol=tol)
    assert fn(X, Y, **params)[7, 3] == 1
    K = fn(X, path=path, **params)
    assert np.all(np.diag(K) == 1) and np.array_equal(K, K.T)


@pytest.mark.parametrize("name", DISTANCE)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_distance_kernels_survive_offsets_and_near_duplicates(name, dtype):
    # Rows 1e4 from the origin and pairs 1e-3 apart: the BLAS expansion
    # |x|^2 + |y|^2 - 2 x.y alone would lose every digit of these distances.
    fn, params, ref, _ = KERNELS[name]
    rng = np.random.default_rng(7)
    base = 1e4 + rng.normal(size=(60, 48))
    X = np.vstack([base, base + 1e-3 * rng.normal(size=base.shape)]).astype(dtype)
    R = ref(X, X)
    for path in ("direct", "dot", "blas"):
        K = fn(X, path=path, **params)
        tol = 1e-10 if dtype == np.float64 else 1e-5
        np.testing.assert_allclose(K, R, rtol=0, atol=tol)


@pytest.mark.parametrize("order", [0.0, 0.5, 1.0, 3.0, 20.0, 100.0])
def test_bessel_across_series_and_jv_ranges(order):
    # _gram._bessel sums the power series up to r = 2 sqrt(order + 1) and uses
    # jv beyond: both sides of the switch, tiny r and large r.
    edge = 2 * np.sqrt(order + 1)
    r = np.array([1e-9, 1e-5, 0.3, edge * (1 - 1e-9), edge, edge * (1 + 1e-9), 1.5 * edge, 40.0])
    X = np.zeros((1, 1))
    Y = r[:, None]
    K = fastkern.bessel_kernel(X, Y, gamma=1.0, order=order)[0]
    # Near 0, J_nu(r) underflows for large nu: there, the series' first terms
    # (exact to 1e-18 for r < 1e-3).
    small = r < 1e-3
    nu = order
    series = 1 - r ** 2 / (4 * (nu + 1)) + r ** 4 / (32 * (nu + 1) * (nu + 2))
    np.testing.assert_allclose(K[small], series[small], rtol=1e-15)
    R = ref_bessel(X, Y[~small], 1.0, order, 1)[0]
    np.testing.assert_allclose(K[~small], R, rtol=1e-13, atol=1e-15)


def test_known_values():
    X = np.array([[1.0, 2.0]])
    Y = np.array([[4.0, 6.0]])
    assert fastkern.laplacian_l2_kernel(X, Y, gamma=0.5)[0, 0] == pytest.approx(np.exp(-2.5),
                                                                               rel=1e-15)
    assert fastkern.anova_kernel(X, X, gamma=0.1, degree=3)[0, 0] == 8.0
    assert fastkern.histogram_intersection_kernel([[1, 5, 0]], [[3, 2, 0]])[0, 0] == 3.0
    # J_1(r) 2 / r: at r = 2, J_1(2) = 0.5767248077568734.
    assert fastkern.bessel_kernel([[0.0]], [[2.0]], gamma=1.0, order=1)[0, 0] == pytest.approx(
        0.5767248077568734, rel=1e-15)
    # spline at x = y = 1: 1 + 1 + 1 - 1 + 1/3 per feature.
    assert fastkern.spline_kernel([[1.0, 1.0]])[0, 0] == pytest.approx((7 / 3) ** 2, rel=1e-15)


# -- kernlab ------------------------------------------------------------------

@pytest.mark.parametrize("case", REFS["cases"], ids=[c["name"] for c in REFS["cases"]])
def test_agrees_with_kernlab_kernelmatrix(case):
    X = np.array(REFS["X"])
    Y = np.array(REFS["Y"])
    params = dict(case["fastkern"])
    name = params.pop("kernel")
    for A, B, key in ((X, None, "K_XX"), (X, Y, "K_XY")):
        K = fastkern.pairwise_kernels(A, B, metric=name, **params)
        R = np.array(case[key])
        np.testing.assert_allclose(K, R, rtol=1e-12, atol=1e-12)
        for path in ("direct", "dot", "blas") if name in DISTANCE else ():
            K = fastkern.pairwise_kernels(A, B, metric=name, path=path, **params)
            np.testing.assert_allclose(K, R, rtol=1e-12, atol=1e-12)


# -- chi2 against scikit-learn ------------------------------------------------

@pytest.mark.parametrize("shape", [(1, 1), (2, 3), (255, 257), (300, 300)])
@pytest.mark.parametrize("same", [True, False])
def test_chi2_matches_scikit_learn_float64(shape, same):
    X = _data("chi2", shape[0], 16, seed=8)
    Y = None if same else _data("chi2", shape[1], 16, seed=9)
    for gamma in (1.0, 0.05):
        np.testing.assert_allclose(fastkern.chi2_kernel(X, Y, gamma=gamma),
                                   skp.chi2_kernel(X, Y, gamma=gamma), rtol=1e-12, atol=0)
    np.testing.assert_allclose(fastkern.additive_chi2_kernel(X, Y),
                               skp.additive_chi2_kernel(X, Y), rtol=1e-12, atol=0)


def test_chi2_matches_scikit_learn_float32_and_integers():
    X = _data("chi2", 40, 8, seed=10, dtype=np.float32)
    Y = _data("chi2", 30, 8, seed=11, dtype=np.float32)
    for fk, sk in ((fastkern.chi2_kernel, skp.chi2_kernel),
                   (fastkern.additive_chi2_kernel, skp.additive_chi2_kernel)):
        K, S = fk(X, Y), sk(X, Y)
        assert K.dtype == S.dtype == np.float32
        np.testing.assert_allclose(K, S, rtol=1e-5, atol=1e-6)
        Xi = np.arange(24).reshape(6, 4) % 5
        K, S = fk(Xi), sk(Xi)
        assert K.dtype == S.dtype == np.float64
        np.testing.assert_allclose(K, S, rtol=1e-12)


def test_chi2_through_pairwise_kernels_and_scikit_learn_names():
    X = _data("chi2", 20, 5, seed=12)
    np.testing.assert_allclose(fastkern.pairwise_kernels(X, metric="chi2", gamma=0.3),
                               skp.pairwise_kernels(X, metric="chi2", gamma=0.3), rtol=1e-12)
    np.testing.assert_allclose(fastkern.pairwise_kernels(X, metric="additive_chi2"),
                               skp.pairwise_kernels(X, metric="additive_chi2"), rtol=1e-12)
    # filter_params drops what the kernel does not take, as scikit-learn.
    K = fastkern.pairwise_kernels(X, metric="chi2", filter_params=True, gamma=0.3, degree=2)
    np.testing.assert_allclose(K, skp.chi2_kernel(X, gamma=0.3), rtol=1e-12)


@pytest.mark.parametrize("fk,sk", [(fastkern.chi2_kernel, skp.chi2_kernel),
                                   (fastkern.additive_chi2_kernel, skp.additive_chi2_kernel)])
@pytest.mark.parametrize("X,Y", [([[0, -1]], None), ([[0, -1]], [[-1, -1]]),
                                 ([[0, 1]], [[-1, -1]]), ([[0, 1]], [[0.2, 0.2, 0.6]]),
                                 ([[np.nan, 1]], None), ([[1, 1]], [[np.inf, 1]])])
def test_chi2_errors_match_scikit_learn(fk, sk, X, Y):
    with pytest.raises(ValueError) as sk_err:
        sk(X, Y)
    with pytest.raises(ValueError) as fk_err:
        fk(X, Y)
    if "negative" in str(sk_err.value):
        assert str(fk_err.value) == str(sk_err.value)


def test_chi2_sparse_and_gamma_errors():
    X = sp.csr_matrix(np.eye(3))
    with pytest.raises(TypeError):
        skp.chi2_kernel(X)
    # The feature-wise kernels; laplacian_l2 and bessel have a sparse loop
    # (tests/test_registry.py).
    for fn in (fastkern.chi2_kernel, fastkern.additive_chi2_kernel,
               fastkern.anova_kernel, fastkern.spline_kernel,
               fastkern.histogram_intersection_kernel):
        with pytest.raises(TypeError, match="sparse"):
            fn(X)
        with pytest.raises(TypeError, match="sparse"):
            fn(np.eye(3), X)
    for gamma in (0, -1.0):
        with pytest.raises(ValueError):
            skp.chi2_kernel(np.eye(2), gamma=gamma)
        with pytest.raises(ValueError, match="gamma"):
            fastkern.chi2_kernel(np.eye(2), gamma=gamma)


# -- layouts, threads, out= ---------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_layouts_and_read_only_inputs(name):
    fn, params, _, _ = KERNELS[name]
    big = _data(name, 200, 14, seed=13)
    C = np.ascontiguousarray(big[::2, ::2])
    expected = fn(C, C[:37], **params)
    F = np.asfortranarray(C)
    strided = big[::2, ::2]
    ro = C.copy()
    ro.flags.writeable = False
    for A in (F, strided, ro):
        assert np.array_equal(fn(A, A[:37], **params), expected)
    assert np.array_equal(fn(ro, **params), fn(C, **params))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_one_and_two_threads_identical(name, dtype):
    fn, params, _, _ = KERNELS[name]
    X = _data(name, 300, 7, seed=14, dtype=dtype)
    Y = _data(name, 290, 7, seed=15, dtype=dtype)
    for B in (None, Y):
        assert np.array_equal(fn(X, B, n_threads=1, **params), fn(X, B, n_threads=2, **params))


@pytest.mark.parametrize("name", NAMES)
def test_batches_do_not_change_results(name, monkeypatch):
    # Tiny batch target: every tile its own batch (one Ctrl-C check each).
    from fastkern import _batches

    fn, params, _, _ = KERNELS[name]
    X = _data(name, 300, 6, seed=16)
    expected = fn(X, **params)
    monkeypatch.setattr(_batches, "TARGET", 1e-9)
    assert np.array_equal(fn(X, **params), expected)


@pytest.mark.parametrize("name", NAMES)
def test_out_buffer(name):
    fn, params, _, _ = KERNELS[name]
    X = _data(name, 9, 4, seed=17)
    Y = _data(name, 5, 4, seed=18)
    out = np.full((9, 5), np.nan)
    K = fn(X, Y, out=out, **params)
    assert K is out and np.array_equal(out, fn(X, Y, **params))
    out32 = np.empty((9, 9), dtype=np.float32)
    assert fn(X.astype(np.float32), out=out32, **params) is out32
    with pytest.raises(ValueError, match="shape"):
        fn(X, Y, out=np.empty((5, 9)), **params)
    with pytest.raises(TypeError, match="dtype"):
        fn(X, Y, out=np.empty((9, 5), dtype=np.float32), **params)
    with pytest.raises(ValueError, match="C-contiguous"):
        fn(X, Y, out=np.empty((5, 9)).T, **params)
    with pytest.raises(TypeError, match="ndarray"):
        fn(X, Y, out=[[0.0] * 5] * 9, **params)


@pytest.mark.parametrize("name", NAMES)
def test_out_must_not_alias_input(name):
    fn, params, _, _ = KERNELS[name]
    buf = _data(name, 6, 6, seed=19)
    with pytest.raises(ValueError, match="share memory"):
        fn(buf, out=buf, **params)


# -- validation ---------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_bad_input(name):
    fn, params, _, _ = KERNELS[name]
    X = _data(name, 4, 3, seed=20)
    for bad in (np.nan, np.inf):
        Z = X.copy()
        Z[1, 2] = bad
        with pytest.raises(ValueError, match="NaN or infinity"):
            fn(Z, **params)
        with pytest.raises(ValueError, match="Y contains NaN"):
            fn(X, Z, **params)
    with pytest.raises(ValueError, match="Incompatible dimension"):
        fn(X, X[:, :2], **params)
    with pytest.raises(ValueError, match="empty"):
        fn(np.empty((0, 3)), **params)
    with pytest.raises(ValueError, match="2-D"):
        fn(X[0], **params)
    with pytest.raises(TypeError):
        fn(X, n_threads=0.5, **params)
    with pytest.raises(ValueError):
        fn(X, n_threads=0, **params)


@pytest.mark.parametrize("name", NONNEG)
def test_negative_input_rejected(name):
    fn, params, _, _ = KERNELS[name]
    X = _data(name, 4, 3, seed=21)
    Z = X.copy()
    Z[2, 1] = -1e-300
    with pytest.raises(ValueError, match="X contains negative values"):
        fn(Z, **params)
    with pytest.raises(ValueError, match="Y contains negative values"):
        fn(X, Z, **params)


def test_parameter_ranges():
    X = np.random.default_rng(22).normal(size=(5, 3))
    bad = [
        (fastkern.laplacian_l2_kernel, {"gamma": 0}, ValueError),
        (fastkern.laplacian_l2_kernel, {"gamma": "1"}, TypeError),
        (fastkern.anova_kernel, {"gamma": -1}, ValueError),
        (fastkern.anova_kernel, {"degree": 0}, ValueError),
        (fastkern.anova_kernel, {"degree": 1.5}, ValueError),
        (fastkern.anova_kernel, {"degree": np.inf}, ValueError),
        (fastkern.bessel_kernel, {"gamma": 0.0}, ValueError),
        (fastkern.bessel_kernel, {"order": -0.5}, ValueError),
        (fastkern.bessel_kernel, {"order": 100.5}, ValueError),
        (fastkern.bessel_kernel, {"degree": 2.5}, ValueError),
        (fastkern.bessel_kernel, {"degree": True}, TypeError),
    ]
    for fn, params, err in bad:
        with pytest.raises(err, match="gamma|degree|order"):
            fn(X, **params)
    # Integer-valued floats are integer degrees (estimators may pass 3.0).
    np.testing.assert_array_equal(fastkern.anova_kernel(X, degree=3.0),
                                  fastkern.anova_kernel(X, degree=3))
    with pytest.raises(ValueError, match="path"):
        fastkern.laplacian_l2_kernel(X, path="fast")


def test_defaults():
    X = np.random.default_rng(23).normal(size=(6, 4))
    # laplacian_l2 follows scikit-learn's distance kernels: gamma = 1 / n_features.
    np.testing.assert_allclose(fastkern.laplacian_l2_kernel(X), ref_laplacian_l2(X, X, 0.25),
                               rtol=1e-13)
    # anova and bessel follow kernlab: sigma = 1, degree = 1, order = 1.
    np.testing.assert_allclose(fastkern.anova_kernel(X), ref_anova(X, X, 1.0, 1), rtol=1e-13)
    np.testing.assert_allclose(fastkern.bessel_kernel(X), ref_bessel(X, X, 1.0, 1.0, 1),
                               rtol=1e-12, atol=1e-14)
    np.testing.assert_array_equal(fastkern.anova_kernel(X, gamma=None), fastkern.anova_kernel(X))


# -- names in every estimator -------------------------------------------------

def test_names_are_registered():
    for name in NAMES:
        assert name in pairwise.KERNEL_PARAMS and name in STRING_KERNELS
        assert set(KERNEL_PARAM_NAMES[name]) == set(pairwise.KERNEL_PARAMS[name])
    # The matrix-free and sparse loops know the kernels of the squared distance
    # (the RBF path's distances), not the feature-wise ones.
    assert set(NAMES) & set(pairwise.KERNEL_CODES) == {"laplacian_l2", "bessel"}


@pytest.mark.parametrize("name", NAMES)
def test_kernel_gram_passes_estimator_parameters(name):
    fn, params, _, _ = KERNELS[name]
    X = _data(name, 12, 3, seed=24)
    kp = {k: v for k, v in params.items() if k not in ("gamma", "degree")}
    K = kernel_gram(X, kernel=name, gamma=params.get("gamma"), degree=params.get("degree", 3),
                    coef0=1, kernel_params=kp or None)
    np.testing.assert_array_equal(K, fn(X, **params))


def _estimators():
    from fastkern import KernelPCA, KernelRidge, KernelRidgeCV, KernelSIR, Nystroem

    return {
        "KernelPCA": lambda **kw: KernelPCA(n_components=2, **kw),
        "KernelRidge": lambda **kw: KernelRidge(alpha=0.5, **kw),
        "KernelRidgeCV": lambda **kw: KernelRidgeCV(**kw),
        "KernelSIR": lambda **kw: KernelSIR(n_components=1, n_slices=3, **kw),
        "Nystroem": lambda **kw: Nystroem(n_components=10, random_state=0, **kw),
    }


# additive_chi2 is not positive definite: KernelRidge falls back to least squares.
@pytest.mark.filterwarnings("ignore::scipy.linalg.LinAlgWarning")
@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("est", ["KernelPCA", "KernelRidge", "KernelRidgeCV", "KernelSIR",
                                 "Nystroem"])
def test_every_estimator_accepts_the_name(name, est):
    fn, params, _, _ = KERNELS[name]
    make = _estimators()[est]
    X = _data(name, 30, 3, seed=25)
    y = X.sum(1) + np.random.default_rng(26).normal(scale=0.1, size=30)
    gamma = params.get("gamma")
    degree = params.get("degree", 3)
    kp = {k: v for k, v in params.items() if k not in ("gamma", "degree")} or None
    model = make(kernel=name, gamma=gamma, degree=degree, kernel_params=kp)
    model.fit(X, y)
    # The same model on the precomputed Gram gives the same result.
    K = fn(X, **params)
    pre = make(kernel="precomputed").fit(K, y)
    if est in ("KernelRidge", "KernelRidgeCV"):
        np.testing.assert_allclose(model.predict(X[:5]), pre.predict(K[:5]), rtol=1e-9,
                                   atol=1e-9)
    elif est == "Nystroem":
        assert np.isfinite(model.transform(X[:5])).all()
    else:
        np.testing.assert_allclose(np.abs(model.transform(X[:5])),
                                   np.abs(pre.transform(K[:5])), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("name", NAMES)
def test_two_view_and_discriminant_estimators_accept_the_name(name):
    # KernelFDA and KernelCCA by name against the same kernel as an object.
    from fastkern import KernelCCA, KernelFDA

    _, params, _, _ = KERNELS[name]
    X = _data(name, 30, 3, seed=31)
    y = (X[:, 0] > np.median(X[:, 0])).astype(int)
    V = np.random.default_rng(32).normal(size=(30, 2))
    kw = {k: v for k, v in params.items() if k in ("gamma", "degree")}
    kp = {k: v for k, v in params.items() if k not in ("gamma", "degree")} or None
    Z = KernelFDA(n_components=1, kernel=name, kernel_params=kp, **kw).fit(X, y).transform(X)
    Zo = KernelFDA(n_components=1, kernel=OBJECTS[name]).fit(X, y).transform(X)
    np.testing.assert_allclose(Z, Zo, rtol=1e-12, atol=1e-12)
    c = KernelCCA(n_components=1, kernel=name, kernel_params=kp, kernel_y="linear",
                  **kw).fit(X, V)
    co = KernelCCA(n_components=1, kernel=OBJECTS[name], kernel_y="linear").fit(X, V)
    np.testing.assert_allclose(c.canonical_correlations_, co.canonical_correlations_,
                               rtol=1e-12)


def test_kernel_pca_anova_readme_example():
    from fastkern import KernelPCA

    X = np.random.default_rng(27).normal(size=(50, 4))
    Z = KernelPCA(n_components=2, kernel="anova", gamma=0.5, degree=2).fit_transform(X)
    assert Z.shape == (50, 2)


# -- kernel objects -----------------------------------------------------------

OBJECTS = {
    "laplacian_l2": kernels.LaplacianL2(gamma=0.3),
    "anova": kernels.Anova(gamma=0.7, degree=2),
    "bessel": kernels.Bessel(gamma=0.8, order=1.5, degree=2),
    "spline": kernels.Spline(),
    "chi2": kernels.Chi2(gamma=0.4),
    "additive_chi2": kernels.AdditiveChi2(),
    "histogram_intersection": kernels.HistogramIntersection(),
}


@pytest.mark.parametrize("name", NAMES)
def test_kernel_objects(name):
    fn, params, _, _ = KERNELS[name]
    k = OBJECTS[name]
    X = _data(name, 20, 3, seed=28)
    Y = _data(name, 7, 3, seed=29)
    np.testing.assert_array_equal(k(X, Y), fn(X, Y, **params))
    np.testing.assert_array_equal(fastkern.pairwise_kernels(X, metric=k), fn(X, **params))
    out = np.empty((20, 7))
    assert k(X, Y, out=out, n_threads=1) is out
    assert eval(repr(k), vars(kernels)) == k and hash(k) == hash(eval(repr(k), vars(kernels)))


def test_kernel_objects_compose():
    X = _data("chi2", 25, 4, seed=30)
    a, c, h = OBJECTS["anova"], OBJECTS["chi2"], OBJECTS["histogram_intersection"]
    A = fastkern.anova_kernel(X, gamma=0.7, degree=2)
    C = fastkern.chi2_kernel(X, gamma=0.4)
    H = fastkern.histogram_intersection_kernel(X)
    np.testing.assert_allclose((a + c)(X), A + C, rtol=1e-15)
    np.testing.assert_allclose((a * c)(X), A * C, rtol=1e-15)
    np.testing.assert_allclose((2.5 * h)(X), 2.5 * H, rtol=1e-15)
    np.testing.assert_allclose((h ** 2)(X), H ** 2, rtol=1e-14)
    np.testing.assert_allclose(kernels.exp(c)(X), np.exp(C), rtol=1e-15)
    np.testing.assert_allclose((OBJECTS["laplacian_l2"] * OBJECTS["bessel"] + OBJECTS["spline"])(X),
                               fastkern.laplacian_l2_kernel(X, gamma=0.3)
                               * fastkern.bessel_kernel(X, gamma=0.8, order=1.5, degree=2)
                               + fastkern.spline_kernel(X), rtol=1e-14)
    # Positive definite compositions stay so on these data.
    assert fastkern.min_eigenvalue((a * c + h)(X)) > -1e-10
    from fastkern import KernelPCA

    Z = KernelPCA(n_components=2, kernel=a + c).fit_transform(X)
    Zp = KernelPCA(n_components=2, kernel="precomputed").fit_transform(A + C)
    np.testing.assert_allclose(np.abs(Z), np.abs(Zp), rtol=1e-8, atol=1e-10)


def test_kernel_object_parameter_errors():
    with pytest.raises(ValueError, match="gamma"):
        kernels.LaplacianL2(gamma=0)
    with pytest.raises(ValueError, match="degree"):
        kernels.Anova(degree=1.5)
    with pytest.raises(ValueError, match="degree"):
        kernels.Bessel(degree=0)
    with pytest.raises(ValueError, match="order"):
        kernels.Bessel(order=101)
    with pytest.raises(ValueError, match="gamma"):
        kernels.Chi2(gamma=-1)


def test_objects_stay_off_the_matrix_free_path():
    # The compiled matrix-free products know only KERNEL_CODES kernels (not the
    # feature-wise ones).
    from fastkern._kernel_api import KernelSpec

    for name in sorted(set(NAMES) - {"laplacian_l2", "bessel"}):
        assert KernelSpec.from_params(name).compiled(4) is None
        assert KernelSpec.from_params(OBJECTS[name]).compiled(4) is None
    slot = _gram.param_slots()
    assert KernelSpec.from_params(OBJECTS["bessel"]).compiled(4).params[slot["order"]] == \
        OBJECTS["bessel"].order
    assert KernelSpec.from_params(kernels.RBF(0.5)).compiled(4).params[slot["gamma"]] == 0.5
    assert KernelSpec.from_params("rbf").compiled(4).params[slot["gamma"]] == 0.25


# -- kernlab reference file ---------------------------------------------------

@pytest.mark.skipif(not have_kernlab(), reason="needs Rscript with kernlab")
def test_stored_kernelmatrix_references_are_current(tmp_path):
    out = tmp_path / "refs.json"
    assert rerun_r_script(DATA / "make_kernelmatrix_refs.R", out) == REFS
