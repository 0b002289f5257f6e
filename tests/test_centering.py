"""In-place double centering against the NumPy formula and sklearn's KernelCenterer."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from scipy import sparse
from sklearn.preprocessing import KernelCenterer as SkKernelCenterer
from sklearn.utils.estimator_checks import parametrize_with_checks

from fastkern import KernelCenterer, center_gram
from fastkern._testing import tracemalloc_peak
from fastkern._testing import raised


def gram(n, dtype=np.float64, seed=0, d=4):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return np.exp(-0.5 * ((X[:, None] - X[None]) ** 2).sum(-1)).astype(dtype)


def cross(n_test, n_train, seed=1, d=4):
    rng = np.random.default_rng(seed)
    A, B = rng.standard_normal((n_test, d)), rng.standard_normal((n_train, d))
    return np.exp(-0.5 * ((A[:, None] - B[None]) ** 2).sum(-1))


def numpy_center(K):
    """K - 1K/n - K1/n + 1K1/n^2 with explicit (n x n) averaging matrices."""
    K = np.asarray(K, dtype=np.float64)
    n = K.shape[0]
    one = np.full((n, n), 1.0 / n)
    return K - one @ K - K @ one + one @ K @ one


def tol(dtype):
    return {"rtol": 1e-12, "atol": 1e-12} if dtype == np.float64 else {"rtol": 1e-5, "atol": 1e-5}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 2, 3, 257])
def test_center_gram_matches_formula_and_sklearn(n, dtype):
    K = gram(n, dtype)
    expected = numpy_center(K)
    sk = SkKernelCenterer().fit_transform(K.astype(np.float64))
    Kc = center_gram(K.copy())
    assert Kc.dtype == dtype
    assert_allclose(Kc, expected, **tol(dtype))
    assert_allclose(Kc, sk, **tol(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 2, 257])
def test_centred_rows_and_columns_sum_to_zero(n, dtype):
    K = gram(n, dtype, seed=2)
    scale = float(np.abs(K).sum(axis=0).max())
    Kc = center_gram(K)
    eps = 1e-12 if dtype == np.float64 else 1e-5
    assert np.abs(Kc.sum(axis=0, dtype=np.float64)).max() <= eps * scale
    assert np.abs(Kc.sum(axis=1, dtype=np.float64)).max() <= eps * scale


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_center_gram_is_in_place(dtype):
    K = gram(100, dtype, seed=3)
    expected = numpy_center(K)
    Kc = center_gram(K)
    assert Kc is K
    assert_allclose(K, expected, **tol(dtype))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_center_gram_fortran_order_in_place(dtype):
    rng = np.random.default_rng(4)
    # A non-symmetric square matrix, so a mix-up of rows and columns would show.
    A = rng.standard_normal((57, 57)).astype(dtype)
    K = np.asfortranarray(A)
    expected = numpy_center(A)
    Kc = center_gram(K)
    assert Kc is K
    assert K.flags.f_contiguous
    assert_allclose(K, expected, **tol(dtype))


def test_center_gram_non_symmetric_c_order():
    A = np.random.default_rng(5).standard_normal((31, 31))
    assert_allclose(center_gram(A.copy()), numpy_center(A), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_center_gram_copy_leaves_input_untouched(dtype):
    K = (gram(50, np.float64, seed=6) * 10).astype(dtype)
    before = K.copy()
    Kc = center_gram(K, copy=True)
    assert Kc is not K
    assert_array_equal(K, before)
    assert Kc.dtype == (np.float32 if dtype == np.float32 else np.float64)
    assert_allclose(Kc, numpy_center(before), **tol(Kc.dtype))


def test_center_gram_copy_of_strided_and_readonly_input():
    base = gram(80, seed=7)
    for K in (base[::2, ::2], np.asfortranarray(base)[::2, ::2]):
        assert_allclose(center_gram(K, copy=True), numpy_center(K), rtol=1e-12, atol=1e-12)
    ro = base.copy()
    ro.flags.writeable = False
    assert_allclose(center_gram(ro, copy=True), numpy_center(base), rtol=1e-12, atol=1e-12)
    assert_array_equal(ro, base)


@pytest.mark.parametrize("make", [
    lambda K: K[::2, ::2],
    lambda K: K.astype(np.int64),
    lambda K: np.asfortranarray(K)[:10, :10],  # F-ordered but not contiguous
    lambda K: np.asfortranarray(K)[:, :10].T[:, :10].copy(order="K")[::1, ::-1],
])
def test_center_gram_refuses_what_it_cannot_centre_in_place(make):
    K = make(gram(20, seed=8))
    with pytest.raises(ValueError, match="copy=True"):
        center_gram(K)


def test_center_gram_of_a_list_returns_a_centred_array():
    K = gram(9, seed=26)
    as_list = K.tolist()
    Kc = center_gram(as_list)
    assert isinstance(Kc, np.ndarray) and Kc.dtype == np.float64
    assert_allclose(Kc, numpy_center(K), rtol=1e-12, atol=1e-12)
    assert as_list == K.tolist()


def test_center_gram_refuses_readonly_in_place():
    K = gram(20, seed=9)
    K.flags.writeable = False
    with pytest.raises(ValueError, match="writeable"):
        center_gram(K)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [2, 257, 1001])
def test_center_gram_one_and_two_threads_identical(n, dtype):
    K = gram(n, dtype, seed=10)
    assert_array_equal(center_gram(K.copy(), n_threads=1), center_gram(K.copy(), n_threads=2))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_center_gram_threads_agree_with_formula(dtype):
    K = gram(513, dtype, seed=11)
    expected = numpy_center(K)
    for t in (1, 2, 3):
        assert_allclose(center_gram(K.copy(), n_threads=t), expected, **tol(dtype))


# ------------------------------------------------------------ KernelCenterer
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n_train,n_test", [(1, 1), (2, 5), (257, 3), (40, 300)])
def test_kernel_centerer_matches_sklearn(n_train, n_test, dtype):
    K_train = gram(n_train, np.float64, seed=12)
    K_test = cross(n_test, n_train)
    sk = SkKernelCenterer().fit(K_train)
    kc = KernelCenterer().fit(K_train.astype(dtype))
    assert kc.K_fit_rows_.dtype == np.float64
    assert_allclose(kc.K_fit_rows_, sk.K_fit_rows_, **tol(dtype))
    assert_allclose(kc.K_fit_all_, sk.K_fit_all_, **tol(dtype))
    assert kc.n_features_in_ == n_train
    Kt = kc.transform(K_test.astype(dtype))
    assert Kt.dtype == dtype
    assert_allclose(Kt, sk.transform(K_test), **tol(dtype))
    assert_allclose(kc.transform(K_train.astype(dtype)), sk.transform(K_train), **tol(dtype))
    assert_allclose(KernelCenterer().fit_transform(K_train.astype(dtype)),
                    sk.transform(K_train), **tol(dtype))


def test_kernel_centerer_test_formula():
    """K_test - 1' K_train / n - K_test 1 / n + 1' K_train 1 / n^2 (NumPy, by hand)."""
    K_train, K_test = gram(30, seed=13), cross(20, 30, seed=14)
    n = K_train.shape[0]
    ones_test = np.full((20, n), 1.0 / n)
    ones_train = np.full((n, n), 1.0 / n)
    expected = K_test - ones_test @ K_train - K_test @ ones_train + ones_test @ K_train @ ones_train
    assert_allclose(KernelCenterer().fit(K_train).transform(K_test), expected,
                    rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernel_centerer_transform_copy_false_is_in_place(dtype):
    K_train, K_test = gram(60, np.float64, seed=15), cross(70, 60, seed=16).astype(dtype)
    kc = KernelCenterer().fit(K_train)
    expected = kc.transform(K_test)
    out = kc.transform(K_test, copy=False)
    assert out is K_test
    assert_array_equal(K_test, expected)


def test_kernel_centerer_transform_copy_true_leaves_input():
    K_train, K_test = gram(60, seed=17), cross(70, 60, seed=18)
    before = K_test.copy()
    out = KernelCenterer().fit(K_train).transform(K_test)
    assert out is not K_test
    assert_array_equal(K_test, before)


def test_kernel_centerer_copy_false_converts_what_it_cannot_centre_in_place():
    K_train = gram(40, seed=19)
    kc = KernelCenterer().fit(K_train)
    sk = SkKernelCenterer().fit(K_train)
    F = np.asfortranarray(cross(30, 40, seed=20))
    before = F.copy()
    out = kc.transform(F, copy=False)
    assert_allclose(out, sk.transform(before), rtol=1e-12, atol=1e-12)
    Ki = (cross(30, 40) * 100).astype(np.int64)
    assert_allclose(kc.transform(Ki, copy=False), sk.transform(Ki.astype(float)),
                    rtol=1e-12, atol=1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kernel_centerer_one_and_two_threads_identical(dtype):
    K_train, K_test = gram(300, dtype, seed=21), cross(257, 300, seed=22).astype(dtype)
    a = KernelCenterer(n_threads=1).fit(K_train)
    b = KernelCenterer(n_threads=2).fit(K_train)
    assert_array_equal(a.K_fit_rows_, b.K_fit_rows_)
    assert a.K_fit_all_ == b.K_fit_all_
    assert_array_equal(a.transform(K_test), b.transform(K_test))


def test_kernel_centerer_is_an_sklearn_estimator():
    from sklearn.base import clone
    from sklearn.exceptions import NotFittedError

    kc = KernelCenterer(n_threads=2)
    assert clone(kc).get_params() == {"n_threads": 2}
    with pytest.raises(NotFittedError):
        kc.transform(gram(3))


# -------------------------------------------------------------------- memory
def _peak_bytes(fn):
    return tracemalloc_peak(fn)[1]


def test_center_gram_allocates_under_one_percent():
    n = 2000
    K = np.random.default_rng(23).random((n, n))
    center_gram(K[:4, :4].copy())  # warm imports
    peak = _peak_bytes(lambda: center_gram(K))
    assert peak < 0.01 * K.nbytes, peak
    assert np.abs(K.sum(axis=0)).max() < 1e-9 * n


def test_center_gram_fortran_allocates_under_one_percent():
    K = np.asfortranarray(np.random.default_rng(24).random((2000, 2000)))
    peak = _peak_bytes(lambda: center_gram(K))
    assert peak < 0.01 * K.nbytes, peak


def test_kernel_centerer_transform_copy_false_allocates_under_one_percent():
    rng = np.random.default_rng(25)
    K_train = rng.random((1000, 1000))
    K_test = rng.random((2000, 1000))
    kc = KernelCenterer().fit(K_train)
    kc.transform(K_test[:3].copy(), copy=False)
    peak = _peak_bytes(lambda: kc.transform(K_test, copy=False))
    assert peak < 0.01 * K_test.nbytes, peak
    peak_fit = _peak_bytes(lambda: kc.fit(K_train))
    assert peak_fit < 0.01 * K_train.nbytes * 2, peak_fit


# ------------------------------------------------------------ property-based
@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 300),
    dtype=st.sampled_from([np.float32, np.float64]),
    scale=st.floats(1e-3, 1e3),
    shift=st.floats(-1e3, 1e3),
    seed=st.integers(0, 2**32 - 1),
)
def test_property_centred_sums_vanish(n, dtype, scale, shift, seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    K = (shift + scale * (A + A.T)).astype(dtype)
    expected = numpy_center(K)
    bound = float(np.abs(K.astype(np.float64)).sum(axis=0).max())
    Kc = center_gram(K)
    eps = 1e-12 if dtype == np.float64 else 1e-5
    assert np.abs(Kc.sum(axis=0, dtype=np.float64)).max() <= eps * bound
    assert np.abs(Kc.sum(axis=1, dtype=np.float64)).max() <= eps * bound
    assert_allclose(Kc, expected, rtol=0, atol=eps * bound / max(1, n) * 4)


# ------------------------------------------------------------------ bad input
BAD_K = [
    (np.ones((3, 4)), ValueError, r"^K must be a square matrix"),
    (np.ones(3), ValueError, r"^K must be a 2-D array"),
    (np.ones((2, 2, 2)), ValueError, r"^K must be a 2-D array"),
    (np.ones((0, 0)), ValueError, r"^K is empty"),
    (np.array([[1.0, np.nan], [np.nan, 1.0]]), ValueError, r"^K contains NaN"),
    (np.array([[1.0, np.inf], [np.inf, 1.0]]), ValueError, r"^K contains NaN"),
    (np.eye(2, dtype=complex), ValueError, r"^Complex data not supported in K"),
    # Converted to float64 as scikit-learn does, so it cannot be centred in place.
    (np.eye(2).astype(object), ValueError, r"^K cannot be centred in place"),
    (np.array([["a", "b"], ["c", "d"]]), ValueError, r"^K must be numeric"),
    (np.eye(2).astype("datetime64[s]"), TypeError, r"^K must be a numeric array"),
    (sparse.csr_matrix(np.eye(2)), TypeError, r"^K is a sparse matrix"),
]


@pytest.mark.parametrize("K,exc,msg", BAD_K)
def test_bad_k_center_gram(K, exc, msg):
    with pytest.raises(exc, match=msg):
        center_gram(K)


@pytest.mark.parametrize("method", ["fit", "transform", "fit_transform"])
@pytest.mark.parametrize("K", [K for K, _, _ in BAD_K] + [
    np.ones((2, 3)), [[1.0, 2.0], [3.0, "a"]], np.eye(3)[:, :1]], ids=range(14))
def test_kernel_centerer_bad_input_raises_as_sklearn(method, K):
    """Same exception class and message as scikit-learn's KernelCenterer."""
    def call(est):
        if method == "transform":
            est.fit(np.eye(2))
        return lambda: getattr(est, method)(K)

    ref = raised(call(SkKernelCenterer()))
    ours = raised(call(KernelCenterer()))
    if ref is None:
        assert ours is None
        return
    assert type(ours) is type(ref)
    assert str(ours) == str(ref)


def test_kernel_centerer_converts_input_as_sklearn():
    K = gram(6, seed=30)
    sk = SkKernelCenterer().fit(K)
    kc = KernelCenterer().fit(K.tolist())
    # lists, object arrays and integer arrays are converted to float64
    for Kin in (K.tolist(), K.astype(object), (K * 100).astype(np.int64)):
        out = kc.transform(Kin)
        assert out.dtype == np.float64
        assert_allclose(out, sk.transform(np.asarray(Kin, dtype=float)), rtol=1e-12, atol=1e-10)


def test_kernel_centerer_feature_names_and_pandas_output():
    pd = pytest.importorskip("pandas")
    K = gram(5, seed=31)
    cols = [f"s{i}" for i in range(5)]
    df = pd.DataFrame(K, columns=cols)
    sk = SkKernelCenterer().set_output(transform="pandas").fit(df)
    kc = KernelCenterer().set_output(transform="pandas").fit(df)
    assert list(kc.feature_names_in_) == cols
    assert list(kc.get_feature_names_out()) == list(sk.get_feature_names_out())
    out = kc.transform(df)
    assert isinstance(out, pd.DataFrame)
    pd.testing.assert_frame_equal(out, sk.transform(df), rtol=1e-12)
    pd.testing.assert_frame_equal(kc.fit_transform(df), sk.fit_transform(df), rtol=1e-12)
    # a test cross-Gram with other column names: scikit-learn's error, word for word
    bad = df.rename(columns={"s0": "t0"})
    ref = raised(lambda: sk.transform(bad))
    ours = raised(lambda: kc.transform(bad))
    assert type(ours) is type(ref) and str(ours) == str(ref)
    # fitted on a DataFrame, transformed with an array: scikit-learn's warning
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        kc.transform(K)


@pytest.mark.parametrize("n_threads,exc", [(0, ValueError), (-2, ValueError), (1.5, TypeError),
                                           (2.0, TypeError), (True, TypeError), ("1", TypeError)])
def test_bad_n_threads(n_threads, exc):
    K = gram(4)
    with pytest.raises(exc, match="n_threads"):
        center_gram(K, n_threads=n_threads)
    with pytest.raises(exc, match="n_threads"):
        KernelCenterer(n_threads=n_threads).fit(K)
    kc = KernelCenterer().fit(K)
    kc.n_threads = n_threads
    with pytest.raises(exc, match="n_threads"):
        kc.transform(K)


@parametrize_with_checks([KernelCenterer(), KernelCenterer(n_threads=1)])
def test_kernel_centerer_sklearn_compatible(estimator, check):
    check(estimator)


# ---------------------------------------------------------------- implicit centring

@pytest.mark.parametrize("n", [1, 2, 255, 257, 513])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("symmetric", [True, False])
def test_centred_matmat_equals_explicit_centring(n, dtype, symmetric):
    # Kc^T V from the uncentred K and its means, against K centred by the
    # NumPy formula; 513 spans two of the means pass's 512-column blocks.
    from fastkern._centering import row_col_means
    from fastkern.centering import CentredGram

    rng = np.random.default_rng(n)
    K = gram(n, dtype) if symmetric else rng.standard_normal((n, n)).astype(dtype) + 3.0
    before = K.copy()
    for n_threads in (1, 2):
        r, c, t = row_col_means(K, n_threads)
        assert_allclose(r, K.astype(np.float64).mean(axis=1), rtol=1e-12)
        assert_allclose(c, K.astype(np.float64).mean(axis=0), rtol=1e-12)
        assert_allclose(t, K.astype(np.float64).mean(), rtol=1e-12)
        V = np.ascontiguousarray(rng.standard_normal((n, 3)))
        W = CentredGram(K, r, c, t)(V)
        assert W.dtype == np.float64 and W.shape == (n, 3)
        expected = numpy_center(K).T @ V
        scale = np.abs(K.astype(np.float64)).sum() / max(n, 1) * np.abs(V).max()
        atol = (1e-12 if dtype == np.float64 else 1e-5) * scale
        assert_allclose(W, expected, atol=atol)
    if symmetric and dtype == np.float64:
        # Means taken from the first product itself (one more column).
        op = CentredGram(K, symmetric=True)
        V = np.ascontiguousarray(rng.standard_normal((n, 3)))
        W = op(V)
        assert_allclose(op.col_means, K.mean(axis=0), rtol=1e-12)
        assert_allclose(op.row_means, K.mean(axis=1), rtol=1e-12)
        assert_allclose(op.grand_mean, K.mean(), rtol=1e-12)
        assert_allclose(W, numpy_center(K) @ V, atol=1e-12 * scale)
        assert_allclose(op(V), W, atol=1e-12 * scale)  # later calls reuse the means
    assert_array_equal(K, before)  # K itself is never modified


@pytest.mark.parametrize("m,n", [(1, 1), (2, 2), (5, 7), (7, 5), (13, 255), (49, 257),
                                 (257, 513), (97, 1100), (14, 4101)])
@pytest.mark.parametrize("bp", [4, 8, 12, 20, 36])
@pytest.mark.parametrize("fast", [True, False])
def test_gram_matmat_against_numpy(m, n, bp, fast):
    # Ragged edges everywhere: rows not a multiple of the kernel's 6 (12 for
    # a last group of 4 columns) or of a task's 48, columns of K across the
    # 2048-column chunks, column groups of 8 with a group of 4 left over;
    # fast=False is the portable code.
    from fastkern._centering import gram_matmat

    rng = np.random.default_rng(m * 1000 + n + bp)
    K = rng.standard_normal((m, n))
    V = rng.standard_normal((n, bp))
    K.setflags(write=False)
    V.setflags(write=False)  # only read
    out = np.full((m, bp), np.nan)
    gram_matmat(K, V, out, 2, fast)
    expected = K @ V
    bound = 4 * n * np.finfo(float).eps * (np.abs(K) @ np.abs(V))
    assert np.all(np.abs(out - expected) <= bound)
    one = np.full((m, bp), np.nan)
    gram_matmat(K, V, one, 1, fast)
    assert_array_equal(one, out)  # each row summed in the same order for any thread count


def test_gram_matmat_accuracy_against_exact_sums():
    # Adversarial magnitudes (entries from 1e-8 to 1e8 with cancellation):
    # the error stays within n eps of |K| |V| against sums taken exactly.
    import math

    from fastkern._centering import gram_matmat

    rng = np.random.default_rng(3)
    n = 600
    K = rng.standard_normal((13, n)) * 10.0 ** rng.integers(-8, 9, size=(13, n))
    V = rng.standard_normal((n, 8)) + 1e4
    out = np.empty((13, 8))
    gram_matmat(K, V, out, 2)
    for i in range(13):
        for c in range(8):
            exact = _exact_dot(K[i], V[:, c])
            bound = n * np.finfo(float).eps * float(np.abs(K[i]) @ np.abs(V[:, c]))
            assert abs(out[i, c] - exact) <= bound


def _exact_dot(a, b):
    """sum(a * b) exactly rounded: the products split exactly (Dekker) before fsum."""
    import math

    prods = []
    for x, y in zip(a.tolist(), b.tolist()):
        p = x * y
        prods.append(p)
        prods.append(math.fma(x, y, -p) if hasattr(math, "fma") else _two_product_error(x, y, p))
    return math.fsum(prods)


def _two_product_error(x, y, p):
    split = 134217729.0  # 2^27 + 1
    def halves(v):
        t = split * v
        hi = t - (t - v)
        return hi, v - hi
    xh, xl = halves(x)
    yh, yl = halves(y)
    return ((xh * yh - p) + xh * yl + xl * yh) + xl * yl


def test_gram_matmat_rejects_bad_shapes():
    from fastkern._centering import gram_matmat

    K = np.zeros((5, 6))
    with pytest.raises(ValueError, match="multiple of 4"):
        gram_matmat(K, np.zeros((6, 3)), np.zeros((5, 3)), 1)
    with pytest.raises(ValueError, match="shapes do not match"):
        gram_matmat(K, np.zeros((5, 4)), np.zeros((5, 4)), 1)
    with pytest.raises(ValueError, match="shapes do not match"):
        gram_matmat(K, np.zeros((6, 4)), np.zeros((6, 4)), 1)
    with pytest.raises(ValueError):  # not C-contiguous: the memoryview refuses it
        gram_matmat(np.zeros((6, 5)).T, np.zeros((6, 4)), np.zeros((5, 4)), 1)


@pytest.mark.parametrize("p", [1, 3, 4, 11, 16])
def test_centred_gram_own_product_matches_blas(p, monkeypatch):
    # With symmetric=True on an AVX2+FMA CPU, K V comes from gram_matmat
    # (padded to a multiple of 4 columns, plus the ones column on the first
    # call); without it, from BLAS.  Both must give the same operator.
    from fastkern import _centering
    from fastkern.centering import CentredGram

    K = gram(301, np.float64)
    V = np.random.default_rng(p).standard_normal((301, p))
    scale = np.abs(K).sum() / 301 * np.abs(V).max()
    op = CentredGram(K, symmetric=True, n_threads=2)
    assert op.uses_blas != _centering.FAST_MATMAT
    first, second = op(V), op(V)
    monkeypatch.setattr(_centering, "FAST_MATMAT", False)
    ref = CentredGram(K, symmetric=True)
    assert ref.uses_blas
    assert_allclose(first, ref(V), atol=1e-13 * scale)
    assert_allclose(second, first, atol=1e-13 * scale)
    assert_allclose(op.col_means, ref.col_means, rtol=1e-13)
    assert_allclose(op.grand_mean, ref.grand_mean, rtol=1e-13)
    assert_allclose(first, numpy_center(K) @ V, atol=1e-12 * scale)


@pytest.mark.parametrize("fast", [True, False])
def test_centred_gram_block_width_is_what_a_call_costs(fast, monkeypatch):
    # block_width(p): the columns the next call takes for the cost of p.  The
    # own product pads to 4 columns and its first call adds the ones column
    # for the means, so 8 columns cost as much as 11 then, and 8 after; BLAS
    # pads nothing.  The product of a block that wide is still exact.
    from fastkern import _centering
    from fastkern.centering import CentredGram
    from fastkern.pairwise import PackedUpperGram

    monkeypatch.setattr(_centering, "FAST_MATMAT", fast and _centering.FAST_MATMAT)
    monkeypatch.setattr(_centering, "FAST_LEVEL", 1)  # AVX2's groups of 4 (below: AVX-512's)
    K = gram(301, np.float64)
    op = CentredGram(K, symmetric=True, n_threads=2)
    blas = op.uses_blas
    expected = {p: p if blas else -(-(p + 1) // 4) * 4 - 1 for p in (1, 4, 5, 8, 11)}
    assert {p: op.block_width(p) for p in expected} == expected
    if not blas:
        assert (op.block_width(8), op.block_width(4), op.block_width(12)) == (11, 7, 15)
    V = np.random.default_rng(0).standard_normal((301, op.block_width(8)))
    scale = np.abs(K).sum() / 301 * np.abs(V).max()
    assert_allclose(op(V), numpy_center(K) @ V, atol=1e-12 * scale)
    # The means are known now: no column is added any more.
    assert {p: op.block_width(p) for p in (1, 4, 5, 8)} == (
        {1: 1, 4: 4, 5: 5, 8: 8} if blas else {1: 4, 4: 4, 5: 8, 8: 8})
    packed = PackedUpperGram(301)
    packed.data[:] = _packed(K)[0]
    upper = CentredGram(packed, symmetric=True, n_threads=2)
    assert upper.upper and upper.block_width(8) == 11 and not upper.uses_blas
    # With AVX-512 the packed product works in groups of 8: 16 cost what 12 do.
    monkeypatch.setattr(_centering, "FAST_LEVEL", 2)
    assert (upper.block_width(8), upper.block_width(4), upper.block_width(16)) == (15, 7, 23)
    assert CentredGram(K, symmetric=True).block_width(8) in (8 + 3, 8)
    explicit = CentredGram(K, K.mean(axis=1), K.mean(axis=0), K.mean())
    assert explicit.uses_blas and explicit.block_width(8) == 8


def test_centred_gram_means_from_product_need_float64():
    from fastkern.centering import CentredGram

    with pytest.raises(TypeError, match="float64"):
        CentredGram(gram(5, np.float32), symmetric=True)


@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (257, 9), (513, 1031), (1031, 300)])
def test_row_col_means_against_exact_sums(shape):
    # Rows summed in chunks of 512 with eight running sums each, columns over
    # blocks of 256 rows added in order: every mean within the rounding of
    # sums of 256 terms (32 ulp; a dropped term costs 1e-3 here) of the exact
    # one (math.fsum), on values with a large common offset, across the chunk
    # and block edges.
    import math

    from fastkern._centering import row_col_means

    rng = np.random.default_rng(sum(shape))
    K = 1e6 + rng.standard_normal(shape) * np.exp(rng.uniform(-20, 5, shape))
    r, c, t = row_col_means(K, 2)
    exact_r = np.array([math.fsum(row) / shape[1] for row in K])
    exact_c = np.array([math.fsum(col) / shape[0] for col in K.T])
    assert_allclose(r, exact_r, rtol=32 * np.finfo(float).eps, atol=0)
    assert_allclose(c, exact_c, rtol=32 * np.finfo(float).eps, atol=0)
    assert t == pytest.approx(math.fsum(K.ravel()) / K.size, rel=1e-15)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_row_col_means_one_and_two_threads_identical(dtype):
    from fastkern._centering import row_col_means

    K = np.random.default_rng(5).standard_normal((1031, 1031)).astype(dtype)
    one, two = row_col_means(K, 1), row_col_means(K, 2)
    assert_array_equal(one[0], two[0])
    assert_array_equal(one[1], two[1])
    assert one[2] == two[2]


def test_fit_means_checked_matches_fit_and_centres_test_kernels_alike():
    # The implicit path's centerer (KernelPCA "block_krylov") must centre a
    # test cross-Gram exactly as one fitted on K itself.
    K, Kt = gram(203), cross(17, 203)
    a = KernelCenterer()
    row_means = a._fit_means_checked(K.copy())
    b = KernelCenterer().fit(K)
    assert_allclose(row_means, K.mean(axis=1), rtol=1e-13)
    assert_array_equal(a.K_fit_rows_, b.K_fit_rows_)
    assert a.K_fit_all_ == b.K_fit_all_ and a.n_features_in_ == 203
    assert_allclose(a.transform(Kt), SkKernelCenterer().fit(K).transform(Kt), rtol=1e-12,
                    atol=1e-12)


@pytest.mark.parametrize("n", [1, 2, 511, 512, 513, 1537])
@pytest.mark.parametrize("c, p", [(1, 1), (7, 8), (13, 4), (40, 12), (5, 20)])
@pytest.mark.parametrize("fast", [True, False])
def test_tall_products_against_numpy(n, c, p, fast):
    # The block eigensolver's tall-skinny products: fixed blocks of 512 rows,
    # on column slices of wider arrays (its basis) and on plain C arrays;
    # fastkern's register tiles (p a multiple of 4, with AVX2) and dgemm.
    from fastkern._centering import tall_inner, tall_matmul, tall_residual

    rng = np.random.default_rng(n + c)
    wide = rng.standard_normal((n, c + 5)) * 10.0 ** rng.uniform(-3, 3, c + 5)
    A = wide[:, 2:2 + c]  # rows contiguous, leading dimension c + 5
    A2 = rng.standard_normal((n, c + 3))[:, 1:1 + c]
    B = rng.standard_normal((c, p))
    ST = rng.standard_normal((c, p)) * 3.0
    Z = rng.standard_normal((n, p)) + 100.0
    outs, inners, resids = [], [], []
    for threads in (1, 2, 3):
        out = np.empty((n, p))
        tall_matmul(A, B, out, threads, fast)
        outs.append(out)
        inners.append(tall_inner(A, Z, threads, fast))
        R = np.empty((n, p))
        resids.append((R, tall_residual(A, A2, B, ST, R, threads, fast)))
    # A different thread count never changes a bit: the row blocks are fixed.
    for other in outs[1:]:
        np.testing.assert_array_equal(other, outs[0])
    for other in inners[1:]:
        np.testing.assert_array_equal(other, inners[0])
    for R, norms in resids[1:]:
        np.testing.assert_array_equal(R, resids[0][0])
        np.testing.assert_array_equal(norms, resids[0][1])
    eps = np.finfo(float).eps
    assert np.all(np.abs(outs[0] - A @ B) <= 2 * c * eps * (np.abs(A) @ np.abs(B)))
    assert np.all(np.abs(inners[0] - A.T @ Z) <= 2 * n * eps * (np.abs(A).T @ np.abs(Z)))
    # Z as a column slice (rows longer than p): the register tiles need
    # contiguous rows of p, so this takes dgemm.
    Zs = np.hstack([Z, Z[:, :1]])[:, :p]
    assert np.all(np.abs(tall_inner(A, Zs, 2, fast) - A.T @ Z)
                  <= 2 * n * eps * (np.abs(A).T @ np.abs(Z)))
    R, norms = resids[0]
    bound = (np.abs(A2) @ np.abs(B) + np.abs(A) @ np.abs(ST)) * 2 * (c + 1) * eps
    assert np.all(np.abs(R - (A2 @ B - A @ ST)) <= bound)
    np.testing.assert_allclose(norms, np.linalg.norm(R, axis=0), rtol=1e-13)


def test_tall_products_read_only_and_bad_layouts():
    from fastkern._centering import tall_inner, tall_matmul, tall_residual

    rng = np.random.default_rng(0)
    A, B = rng.standard_normal((600, 5)), rng.standard_normal((5, 3))
    Z = rng.standard_normal((600, 3))
    for arr in (A, B, Z):
        arr.flags.writeable = False
    out = np.empty((600, 3))
    tall_matmul(A, B, out, 2)
    np.testing.assert_allclose(out, A @ B, rtol=1e-13)
    np.testing.assert_allclose(tall_inner(A, Z, 2), A.T @ Z, rtol=1e-12)
    with pytest.raises(ValueError, match="contiguous rows"):
        tall_matmul(np.asfortranarray(A), B, out, 1)
    with pytest.raises(ValueError, match="contiguous rows"):
        tall_inner(A, np.asfortranarray(Z), 1)
    with pytest.raises(ValueError, match="shapes do not match"):
        tall_matmul(A, B[:4], out, 1)
    with pytest.raises(ValueError, match="shapes do not match"):
        tall_inner(A, Z[:599], 1)
    with pytest.raises(ValueError, match="shapes do not match"):
        tall_matmul(A, B, out[:, :2], 1)
    R = np.empty((600, 3))
    np.testing.assert_allclose(tall_residual(A, A, B, B, R, 2), np.zeros(3), atol=0)
    with pytest.raises(ValueError, match="shapes do not match"):
        tall_residual(A, A[:599], B, B, R, 1)
    with pytest.raises(ValueError, match="shapes do not match"):
        tall_residual(A, A, B, B[:, :2], R, 1)
    with pytest.raises(ValueError, match="contiguous rows"):
        tall_residual(A, np.asfortranarray(A), B, B, R, 1)


def _packed(A):
    """A symmetric A as its packed upper triangle: data, row_start (independent
    of the layout's code: each row's stored columns are found from the strip)."""
    from fastkern._centering import STRIP_ROWS, packed_layout

    n = A.shape[0]
    row_start, size = packed_layout(n)
    data = np.full(size, np.nan)
    for i in range(n):
        first = i - i % STRIP_ROWS  # a row keeps its strip's columns from the strip's start
        data[row_start[i] + first:row_start[i] + n] = A[i, first:]
    return data, row_start


def test_packed_layout_is_strips_of_rows_back_to_back():
    # Strip s (rows 12 s ...) keeps columns 12 s .. n - 1 of its rows, one
    # strip after the other with no gap and no overlap: about n^2 / 2 values.
    from fastkern._centering import STRIP_ROWS, packed_layout

    assert STRIP_ROWS == 12
    for n in (0, 1, 2, 11, 12, 13, 25, 257, 2061):
        row_start, size = packed_layout(n)
        slots = np.zeros(size, dtype=int)
        for i in range(n):
            first = i - i % STRIP_ROWS
            assert row_start[i] + first >= 0
            slots[row_start[i] + first:row_start[i] + n] += 1
        assert np.all(slots == 1), n
        assert size == sum((min(s + 12, n) - s) * (n - s) for s in range(0, n, 12))
    with pytest.raises(ValueError, match="n must be >= 0"):
        packed_layout(-1)


# n = 4101 (a whole middle chunk of 2048 columns) with one width only: 12
# has both a group of 8 and one of 4; 2061 already has the ragged chunk.
@pytest.mark.parametrize("n, bp", [(n, bp) for n in [1, 2, 11, 12, 13, 25, 257, 2061, 4101]
                                   for bp in [4, 8, 12, 20] if n < 4101 or bp == 12])
@pytest.mark.parametrize("level", [0, 1, 2])
def test_gram_matmat_packed_reads_only_the_upper_triangle(n, bp, level):
    # Strips of 12 rows with a short last one, chunks of 2048 columns with a
    # ragged end, column groups of 8 and a group of 4; level 0 is the
    # portable code, 1 AVX2, 2 AVX-512 (each lowered to what the CPU runs).
    # The strips' entries below the diagonal hold NaN: none of it may be read.
    from fastkern._centering import gram_matmat_packed

    rng = np.random.default_rng(n + 100 * bp)
    A = rng.standard_normal((n, n))
    A = A + A.T
    data, row_start = _packed(A)
    for i in range(n):
        data[row_start[i] + i - i % 12:row_start[i] + i] = np.nan
    V = rng.standard_normal((n, bp))
    data.setflags(write=False)
    V.setflags(write=False)
    runs = []
    for threads, slots in ((2, 2), (1, 2), (2, 3)):
        out = np.full((n, bp), np.nan)
        # The accumulators arrive dirty (a reused buffer): they are zeroed first.
        acc = np.full((slots, n, bp), np.nan)
        gram_matmat_packed(data, row_start, V, out, acc, threads, level)
        runs.append(out)
    bound = 4 * n * np.finfo(float).eps * (np.abs(A) @ np.abs(V))
    for out in runs:
        assert np.all(np.abs(out - A @ V) <= bound)
    # The same slots give the same bits whichever threads run them.
    assert_array_equal(runs[1], runs[0])
    if level == 2:
        # AVX-512 sums every output in AVX2's order: the same bits.
        avx2 = np.full((n, bp), np.nan)
        gram_matmat_packed(data, row_start, V, avx2, np.empty((2, n, bp)), 2, 1)
        assert_array_equal(runs[0], avx2)


def test_gram_matmat_packed_bad_shapes():
    from fastkern._centering import gram_matmat_packed
    from fastkern.centering import CentredGram
    from fastkern.pairwise import PackedUpperGram

    data, row_start = _packed(np.eye(5))
    V, out = np.ones((5, 4)), np.empty((5, 4))
    with pytest.raises(ValueError, match="shapes do not match"):
        gram_matmat_packed(data, row_start, V[:4], out, np.empty((1, 5, 4)), 1)
    with pytest.raises(ValueError, match="data must hold"):
        gram_matmat_packed(data[:-1], row_start, V, out, np.empty((1, 5, 4)), 1)
    with pytest.raises(ValueError, match="multiple of 4"):
        gram_matmat_packed(data, row_start, np.ones((5, 3)), np.empty((5, 3)),
                           np.empty((1, 5, 3)), 1)
    with pytest.raises(ValueError, match="acc must have shape"):
        gram_matmat_packed(data, row_start, V, out, np.empty((0, 5, 4)), 1)
    K = PackedUpperGram(5)
    with pytest.raises(ValueError, match="needs symmetric=True"):
        CentredGram(K, np.zeros(5), np.zeros(5), 0.0)


def test_packed_upper_gram_columns_and_memory():
    # columns() gathers K's columns from the triangle; the buffer is half
    # the full matrix's (plus the strips' diagonal blocks), and new.
    from fastkern.pairwise import PackedUpperGram

    n = 301
    A = np.random.default_rng(0).standard_normal((n, n))
    A = A + A.T
    K = PackedUpperGram(n, n_threads=2)
    data, row_start = _packed(A)
    assert_array_equal(K.row_start, row_start)
    K.data[:] = data
    assert K.shape == (n, n) and K.dtype == np.float64 and K.nbytes == data.nbytes
    assert K.nbytes <= 8 * (n * n / 2 + 6 * n)
    idx = [0, 1, 11, 12, 150, 300]
    assert_array_equal(K.columns(idx), A[:, idx])
    assert_array_equal(K.toarray(), A)
    with pytest.raises(ValueError, match="out of range"):
        K.columns([n])
