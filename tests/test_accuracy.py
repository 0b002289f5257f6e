"""Accuracy of every kernel and path against an exact reference, held to scikit-learn's.

The reference is exact up to long double rounding: it is computed from the
exact input values (float32 inputs are widened exactly) in np.longdouble, by
direct differences for the RBF and Laplacian kernels and by long double dot
products for the inner-product kernels.

The rule (``assert_no_worse_than_sklearn``), for each input:

    max |fastkern - exact|  <=  FACTOR * max |sklearn - exact|  +  FLOOR * eps * scale

with FACTOR = 2, FLOOR = 4 and eps the machine epsilon of the result's dtype:
a few roundings at the scale of the result are allowed even where
scikit-learn happens to be more accurate.  The scale is the largest entry of
S, the size of one rounding of each entry: for RBF and Laplacian (K <= 1)
S = 1 (the exp, the final rounding to float32).  For the inner-product
kernels S = |K| + sqrt(d) |k'(<x, y>)| sum_k |x_k y_k|: one rounding of the
result plus the typical rounding error of a dot product of d terms, carried
through the map.  Their gemm runs in the data's precision as scikit-learn's
does, with identical results from two rows on; for a single row NumPy uses
a dot/gemv kernel that sums in another order, more or less accurately by
chance (measured on random rows: 0.1x to 30x fastkern's error), which the
sqrt(d) term covers.

scikit-learn is run on the same input (its float32 RBF computes distances in
float64, its Laplacian returns float64); it has no exponential kernel, so
there exp(gamma * sklearn's linear kernel) stands in.

The matrix-free operator (KernelOperator.matmat) is held to the same rule
against exact K @ V, with scikit-learn's K @ V (in float64) as the comparison
and scale = max(S @ |V|).

Before centring on the BLAS path these tests failed: float32, offset 100,
gamma 10 gave an error of 0.9 (scikit-learn: 1e-7).
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import linalg
from sklearn.kernel_ridge import KernelRidge as SkKernelRidge
from sklearn.metrics import pairwise as skp

import fastkern
from fastkern.kernel_ridge import KernelRidge
from fastkern.large_n import KernelOperator

LD = np.longdouble
FACTOR = 2.0
FLOOR = 4.0
# (kernel, path): every kernel, RBF on each of its paths.
CASES = [("rbf", "direct"), ("rbf", "dot"), ("rbf", "blas"), ("laplacian", None), ("linear", None),
         ("poly", None), ("sigmoid", None), ("exponential", None)]


# ---------------------------------------------------------------- references

def exact_kernel(kernel, X, Y, **p):
    """k(X, Y) in long double from the exact input values."""
    X, Y = X.astype(LD), Y.astype(LD)
    if kernel in ("rbf", "laplacian"):
        diff = X[:, None, :] - Y[None, :, :]
        if kernel == "rbf":
            return np.exp(-LD(p["gamma"]) * (diff * diff).sum(-1))
        return np.exp(-LD(p["gamma"]) * np.abs(diff).sum(-1))
    G = X @ Y.T
    if kernel == "linear":
        return G
    if kernel == "poly":
        return (LD(p["gamma"]) * G + LD(p["coef0"])) ** p["degree"]
    if kernel == "sigmoid":
        return np.tanh(LD(p["gamma"]) * G + LD(p["coef0"]))
    return np.exp(LD(p["gamma"]) * G)


def rounding_scale(kernel, X, Y, **p):
    """S: the size of one rounding of each entry of k(X, Y) (see the module docstring)."""
    if kernel in ("rbf", "laplacian"):
        return np.ones((X.shape[0], Y.shape[0]), dtype=LD)
    XL, YL = X.astype(LD), Y.astype(LD)
    G, terms = XL @ YL.T, np.abs(XL) @ np.abs(YL).T
    K = np.abs(exact_kernel(kernel, X, Y, **p))
    if kernel == "linear":
        return K + np.sqrt(X.shape[1]) * terms
    g = LD(p["gamma"])
    if kernel == "poly":
        slope = p["degree"] * np.abs(g * G + LD(p["coef0"])) ** (p["degree"] - 1) * g
    elif kernel == "sigmoid":
        slope = (1 - np.tanh(g * G + LD(p["coef0"])) ** 2) * g
    else:
        slope = K * g
    return K + np.sqrt(X.shape[1]) * slope * terms


def sklearn_kernel(kernel, X, Y, **p):
    if kernel == "exponential":
        return np.exp(p["gamma"] * skp.linear_kernel(X, Y))
    return skp.pairwise_kernels(X, Y, metric=kernel, **p)


def fastkern_kernel(kernel, path, X, Y, **p):
    if kernel == "rbf":
        return fastkern.rbf_kernel(X, Y, path=path, **p)
    return fastkern.pairwise_kernels(X, Y, metric=kernel, **p)


def max_err(A, exact):
    return float(np.max(np.abs(np.asarray(A).astype(LD) - exact)))


def assert_no_worse_than_sklearn(fk, sk, exact, dtype, scale, what=""):
    e_fk, e_sk = max_err(fk, exact), max_err(sk, exact)
    bound = FACTOR * e_sk + FLOOR * np.finfo(dtype).eps * scale
    assert e_fk <= bound, (f"{what}: fastkern error {e_fk:.3g} > {bound:.3g} "
                           f"(scikit-learn's error {e_sk:.3g})")


def params_for(kernel, gamma, coef0=1.0, degree=3):
    if kernel in ("rbf", "laplacian", "exponential"):
        return {"gamma": gamma}
    if kernel == "linear":
        return {}
    if kernel == "poly":
        return {"gamma": gamma, "coef0": coef0, "degree": degree}
    return {"gamma": gamma, "coef0": coef0}


# ---------------------------------------------------------------- data

@st.composite
def datasets(draw, max_rows=40):
    """(X, Y or None, gamma) with offsets up to 1e4, scales down to 1e-4, d in 1..1024.

    Near-duplicate rows are copies of a few base rows plus noise far smaller
    than the spread.  gamma puts gamma * (typical squared distance) for the
    distance kernels, or gamma * (typical inner product) for the others, in
    [1e-2, 10], so that K is neither all 0 nor all 1.
    """
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    d = draw(st.one_of(st.sampled_from([1, 2, 16, 31, 32, 33, 64, 257, 784, 1024]),
                       st.integers(1, 1024)))
    n = draw(st.integers(1, max_rows))
    m = draw(st.one_of(st.none(), st.integers(1, max_rows)))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    offset = draw(st.sampled_from([0.0, 1.0, 30.0, 100.0, 1e3, 1e4]))
    offset *= draw(st.sampled_from([1.0, -1.0]))
    scale = 10.0 ** draw(st.floats(-4, 1))
    # Either a common offset, or an offset per feature (rows far from 0 in
    # different directions).
    centre = offset * (rng.uniform(0.5, 1.5, d) if draw(st.booleans()) else np.ones(d))
    near_dup = draw(st.booleans())
    spread = scale
    rows = n + (m or 0)
    if near_dup:
        noise = scale * 10.0 ** draw(st.floats(-4, -1))
        base = centre + scale * rng.standard_normal((draw(st.integers(1, 4)), d))
        data = base[rng.integers(0, len(base), rows)] + noise * rng.standard_normal((rows, d))
        spread = noise
    else:
        data = centre + scale * rng.standard_normal((rows, d))
    data = data.astype(dtype)
    X, Y = data[:n], (data[n:] if m else None)
    t = 10.0 ** draw(st.floats(-2, 1))
    return X, Y, t, spread, offset, scale


def gamma_for(kernel, t, d, spread, offset, scale):
    if kernel in ("rbf", "laplacian"):
        typical = d * spread**2 if kernel == "rbf" else d * spread
        return t / max(typical, 1e-300)
    return t / (d * (offset**2 + scale**2))


# ---------------------------------------------------------------- property search

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(CASES), data=datasets(), coef0=st.floats(-1, 1),
       degree=st.sampled_from([2, 3]))
def test_property_no_worse_than_sklearn(case, data, coef0, degree):
    kernel, path = case
    X, Y, t, spread, offset, scale = data
    p = params_for(kernel, gamma_for(kernel, t, X.shape[1], spread, offset, scale),
                   coef0, degree)
    Yr = X if Y is None else Y
    fk = fastkern_kernel(kernel, path, X, Y, **p)
    assert fk.dtype == X.dtype
    assert_no_worse_than_sklearn(fk, sklearn_kernel(kernel, X, Y, **p),
                                 exact_kernel(kernel, X, Yr, **p), X.dtype,
                                 float(np.max(rounding_scale(kernel, X, Yr, **p))),
                                 what=f"{kernel} {path} {X.dtype} {X.shape} {p}")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kernel=st.sampled_from(["rbf", "laplacian", "linear", "poly", "sigmoid",
                               "exponential"]),
       data=datasets(), b=st.integers(1, 3), seed=st.integers(0, 2**32 - 1))
def test_property_matrix_free_no_worse_than_sklearn(kernel, data, b, seed):
    X, A, t, spread, offset, scale = data
    p = params_for(kernel, gamma_for(kernel, t, X.shape[1], spread, offset, scale))
    V = np.random.default_rng(seed).standard_normal((X.shape[0], b))
    op = KernelOperator(X, kernel=kernel, n_threads=2, **p)
    rows = X if A is None else A
    fk = op.matmat(V, A)
    K = exact_kernel(kernel, rows, X, **p)
    exact = K @ V.astype(LD)
    sk = np.asarray(sklearn_kernel(kernel, rows, X, **p), dtype=np.float64) @ V
    scale_kv = float(np.max(rounding_scale(kernel, rows, X, **p) @ np.abs(V).astype(LD)))
    assert_no_worse_than_sklearn(fk, sk, exact, X.dtype, scale=scale_kv,
                                 what=f"matrix-free {kernel} {X.dtype} {X.shape} {p}")


# ---------------------------------------------------------------- the issue's cases

def _issue_data(kind, dtype):
    if kind == "offset100":
        return (100 + 0.01 * np.random.RandomState(0).randn(50, 64)).astype(dtype), 10.0
    if kind == "offset50":
        return (50 + np.random.RandomState(0).randn(50, 64)).astype(dtype), 1 / 64
    if kind == "offset1000":
        return (1000 + 1e-3 * np.random.RandomState(0).randn(50, 64)).astype(dtype), 1000.0
    # Near-duplicate 784-pixel images: 5 images with pixels in 0..255, 10 noisy
    # copies of each.
    rng = np.random.RandomState(0)
    base = rng.randint(0, 256, (5, 784)).astype(np.float64)
    return (np.repeat(base, 10, axis=0) + rng.randn(50, 784)).astype(dtype), 1e-4


@pytest.mark.parametrize("kind", ["offset100", "offset50", "offset1000", "pixels"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("path", ["direct", "dot", "blas"])
def test_issue_examples_rbf(kind, dtype, path):
    """Errors at the rounding level of the dtype, whatever scikit-learn's error.

    Before: float32 offset100 0.91, offset50 6e-4, pixels 1.5e-3 (BLAS path);
    float64 offset1000 8.5e-5 (scikit-learn itself: 7.7e-5).
    """
    X, gamma = _issue_data(kind, dtype)
    exact = exact_kernel("rbf", X, X, gamma=gamma)
    K = fastkern.rbf_kernel(X, gamma=gamma, path=path)
    assert max_err(K, exact) <= 4 * np.finfo(dtype).eps
    Y = X[::-1][:17].copy()
    Kxy = fastkern.rbf_kernel(X, Y, gamma=gamma, path=path)
    assert max_err(Kxy, exact_kernel("rbf", X, Y, gamma=gamma)) <= 4 * np.finfo(dtype).eps
    assert np.all(np.diag(K) == 1)
    assert np.array_equal(K, K.T)


@pytest.mark.parametrize("kind", ["offset100", "offset50", "offset1000", "pixels"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_issue_examples_matrix_free(kind, dtype):
    X, gamma = _issue_data(kind, dtype)
    V = np.random.default_rng(1).standard_normal((X.shape[0], 2))
    K = exact_kernel("rbf", X, X, gamma=gamma)
    got = KernelOperator(X, kernel="rbf", gamma=gamma).matmat(V)
    exact = K @ V.astype(LD)
    scale = float(np.max(np.abs(K) @ np.abs(V).astype(LD)))
    assert max_err(got, exact) <= 4 * np.finfo(dtype).eps * scale
    A = X[:7] + np.asarray(1e-3 * X.std(), dtype=dtype)
    got = KernelOperator(X, kernel="rbf", gamma=gamma).matmat(V, A)
    exact = exact_kernel("rbf", A, X, gamma=gamma) @ V.astype(LD)
    assert max_err(got, exact) <= 4 * np.finfo(dtype).eps * scale


@pytest.mark.parametrize("off,scale,gamma", [(100, 0.01, 10.0), (50, 1.0, 1 / 64),
                                             (1000, 1e-3, 1000.0)])
def test_kernel_ridge_predictions_on_offset_float32_data(off, scale, gamma):
    """Predictions as accurate as scikit-learn's (before: off by 2e2 and 14)."""
    rng = np.random.RandomState(0)
    X = (off + scale * rng.randn(150, 64)).astype(np.float32)
    y = np.sin((X - off).sum(1) / (scale * 8)).astype(np.float32)
    Xt = (off + scale * rng.randn(40, 64)).astype(np.float32)
    alpha = 1e-2
    K = exact_kernel("rbf", X, X, gamma=gamma).astype(np.float64)
    dual = linalg.solve(K + alpha * np.eye(len(X)), y.astype(np.float64), assume_a="pos")
    exact = exact_kernel("rbf", Xt, X, gamma=gamma).astype(np.float64) @ dual
    fk = KernelRidge(kernel="rbf", gamma=gamma, alpha=alpha).fit(X, y).predict(Xt)
    sk = SkKernelRidge(kernel="rbf", gamma=gamma, alpha=alpha).fit(X, y).predict(Xt)
    e_fk, e_sk = np.abs(fk - exact).max(), np.abs(sk - exact).max()
    assert e_fk <= FACTOR * e_sk + 1e-5, (e_fk, e_sk)


def test_inner_product_kernels_match_sklearn_error_with_large_offset():
    """No translation invariance to use: the error is the gemm's, as scikit-learn's."""
    rng = np.random.default_rng(3)
    for dtype in (np.float32, np.float64):
        X = (1e3 + rng.standard_normal((60, 300))).astype(dtype)
        for kernel in ("linear", "poly", "sigmoid", "exponential"):
            p = params_for(kernel, 1 / (300 * 1e6), 0.5, 2)
            assert_no_worse_than_sklearn(fastkern_kernel(kernel, None, X, None, **p),
                                         sklearn_kernel(kernel, X, None, **p),
                                         exact_kernel(kernel, X, X, **p), dtype,
                                         float(np.max(rounding_scale(kernel, X, X, **p))),
                                         what=kernel)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_long_sums_are_chunked(dtype):
    """d = 1024 on the direct path: the distance sums' error does not grow with d."""
    rng = np.random.default_rng(4)
    X = rng.standard_normal((70, 1024)).astype(dtype)
    Y = rng.standard_normal((37, 1024)).astype(dtype)   # 37: block columns and a tail
    for kernel, path in (("rbf", "direct"), ("rbf", "blas"), ("laplacian", None)):
        g = 1 / 1024 if kernel == "rbf" else 1 / 1024 / 1.1
        exact = exact_kernel(kernel, X, Y, gamma=g)
        got = fastkern_kernel(kernel, path, X, Y, gamma=g)
        assert max_err(got, exact) <= 2 * np.finfo(dtype).eps, (kernel, path)
