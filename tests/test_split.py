"""The float32 hi + lo form of a symmetric float64 matrix (fastkern._split, fastkern._mixed)."""
import numpy as np
import pytest
from sklearn.metrics.pairwise import pairwise_kernels

from fastkern import _mixed, _split
from fastkern._kernel_api import KernelSpec

EPS = np.finfo(np.float64).eps


def _symmetric(n, rng, spread=30):
    """A symmetric matrix with entries of both signs from 10^-spread to 10^spread."""
    A = rng.choice([-1.0, 1.0], (n, n)) * 10.0 ** rng.uniform(-spread, spread, (n, n))
    A = np.triu(A) + np.triu(A, 1).T
    return A


def _split_of(A, rows, s=None, n_threads=2):
    """The split form of A built panel by panel, as SplitGram does from a kernel."""
    n = A.shape[0]
    K = np.full((n, n), np.nan, dtype=np.float32)
    lo = np.full(_split.lo_size(n), np.nan, dtype=np.float32)
    diag, absrow = np.full(n, np.nan), np.zeros(n)
    sv = np.empty(0) if s is None else s
    for i0 in range(0, n, rows):
        i1 = min(n, i0 + rows)
        D = np.ascontiguousarray(A[i0:i1, i0:i1])
        P = np.ascontiguousarray(A[i0:i1, i1:])
        _split.split_panel(D, P, i0, sv, K, lo, diag, absrow, n_threads)
    return K, lo, diag, absrow


def _scaled(A, s):
    # The order split_panel scales in: (a_ij s_i) s_j.
    return A if s is None else (A * s[:, None]) * s[None, :]


@pytest.mark.parametrize("n, rows", [(1, 1), (2, 1), (2, 2), (3, 2), (127, 128), (129, 128),
                                     (255, 7), (257, 128), (300, 256)])
@pytest.mark.parametrize("weights", [False, True])
def test_split_panel_stores_hi_lo_diag_and_row_sums(n, rows, weights):
    rng = np.random.default_rng(n + rows)
    A = _symmetric(n, rng)
    s = rng.uniform(0.0, 3.0, n) if weights else None
    if weights:
        s[: min(n, 3) - 1] = 0.0  # zero weights, as sample_weight allows
    K, lo, diag, absrow = _split_of(A, rows, s)
    a = _scaled(A, s)
    hi = a.astype(np.float32)
    # Both triangles hold the rounded values, the same on both sides.
    np.testing.assert_array_equal(K, hi)
    np.testing.assert_array_equal(K, K.T)
    np.testing.assert_array_equal(diag, np.diag(a))
    iu = np.triu_indices(n, 1)  # row by row: the packed order
    np.testing.assert_array_equal(lo, (a[iu] - hi[iu].astype(np.float64)).astype(np.float32))
    # hi + lo carries a to 2^-48 of each entry (lo's own rounding), where lo
    # is a normal float32 (tiny entries are exact to float32's subnormal step).
    err = np.abs(hi[iu].astype(np.float64) + lo - a[iu])
    assert np.all(err <= 2.0 ** -47 * np.abs(a[iu]) + 1e-45)
    np.testing.assert_allclose(absrow, np.abs(a).sum(axis=1), rtol=4 * n * EPS, atol=0)
    # Each row and column is summed by one thread, in order: the same bits
    # on any thread count.
    for part, other in zip((K, lo, diag, absrow), _split_of(A, rows, s, n_threads=3)):
        np.testing.assert_array_equal(part, other)


@pytest.mark.parametrize("n", [1, 2, 5, 64, 255, 257, 301])
@pytest.mark.parametrize("t", [1, 3])
@pytest.mark.parametrize("slots", [1, 4])
def test_split_matmat_against_numpy(n, t, slots):
    rng = np.random.default_rng(10 * n + t)
    A = _symmetric(n, rng, spread=3)
    K, lo, diag, _ = _split_of(A, 64)
    # spotrf overwrites the lower triangle: the product must read only the strict upper.
    K[np.tril_indices(n)] = np.nan
    V = rng.standard_normal((n, t)) + 100.0
    Vt = np.ascontiguousarray(V.T)
    out = _split.split_matmat(K, lo, diag, Vt, np.empty((slots, t, n)), 2)
    assert out.shape == (t, n) and np.all(np.isfinite(out))
    # NumPy's float64 product is off by at most ~n eps |A| |V|; a product
    # missing lo would be off by ~6e-8 of it.
    scale = np.abs(A) @ np.abs(V)
    assert np.all(np.abs(out.T - A @ V) <= (2 * n * EPS + 2.0 ** -46) * scale)


def test_split_matmat_is_the_same_for_any_thread_count_and_read_only_inputs():
    rng = np.random.default_rng(3)
    n = 613
    K, lo, diag, _ = _split_of(_symmetric(n, rng, spread=2), 128)
    Vt = rng.standard_normal((2, n))
    for arr in (K, lo, diag, Vt):
        arr.flags.writeable = False
    runs = [_split.split_matmat(K, lo, diag, Vt, np.empty((4, 2, n)), threads)
            for threads in (1, 2, 3, 2)]
    for other in runs[1:]:
        np.testing.assert_array_equal(other, runs[0])


def test_split_functions_reject_bad_shapes():
    n = 5
    K = np.zeros((n, n), dtype=np.float32)
    lo, diag, absrow = np.zeros(_split.lo_size(n), np.float32), np.zeros(n), np.zeros(n)
    D, P = np.zeros((2, 2)), np.zeros((2, 3))
    with pytest.raises(ValueError, match="panel"):
        _split.split_panel(D, np.zeros((2, 2)), 0, np.empty(0), K, lo, diag, absrow, 1)
    with pytest.raises(ValueError, match="panel"):
        _split.split_panel(D, P, 0, np.ones(3), K, lo, diag, absrow, 1)
    with pytest.raises(ValueError, match="panel"):
        _split.split_panel(D, P, 0, np.empty(0), K, lo[1:], diag, absrow, 1)
    with pytest.raises(ValueError, match="lo of length"):
        _split.split_matmat(K, lo[1:], diag, np.zeros((1, n)), np.zeros((2, 1, n)), 1)
    with pytest.raises(ValueError, match="Vt must be"):
        _split.split_matmat(K, lo, diag, np.zeros((1, n + 1)), np.zeros((2, 1, n)), 1)
    with pytest.raises(ValueError, match="Vt must be"):
        _split.split_matmat(K, lo, diag, np.zeros((1, n)), np.zeros((0, 1, n)), 1)


@pytest.mark.parametrize("kernel, params", [("rbf", dict(gamma=0.3)), ("poly", dict(degree=3)),
                                            ("laplacian", dict(gamma=0.2)),
                                            ("sigmoid", dict(gamma=0.05, coef0=-0.3))])
@pytest.mark.parametrize("n, rows", [(1, 128), (257, 128), (300, 7)])
def test_split_gram_holds_the_float64_kernel(monkeypatch, kernel, params, n, rows):
    monkeypatch.setattr(_mixed, "_PANEL_ROWS", rows)
    rng = np.random.default_rng(n)
    X = rng.standard_normal((n, 4))
    s = rng.uniform(0.5, 2.0, n)
    spec = KernelSpec.from_params(kernel, kernel_params=params)
    A = _mixed.SplitGram(X, s, spec, n_threads=2)
    ref = pairwise_kernels(X, metric=kernel, filter_params=True, **params)
    ref = (ref * s[:, None]) * s[None, :]
    tol = 1e-14 * np.abs(ref).max()
    assert np.abs(A.K.astype(np.float64) - ref).max() <= 1e-7 * np.abs(ref).max()
    # Below the diagonal (the float32 factor's input only) the same values,
    # but 0 for those under factor_tiny (float32 subnormals in spotrf).
    U, L = np.triu(A.K, 1), np.tril(A.K, -1).T
    zeroed = (L == 0) & (np.abs(U.astype(np.float64)) <= A.factor_tiny * (1 + 1e-7))
    assert np.all((L == U) | zeroed)
    assert np.abs(A.diag - np.diag(ref)).max() <= tol
    V = rng.standard_normal((n, 2))
    assert np.abs(A.matmat(V) - ref @ V).max() <= 1e-13 * (np.abs(ref) @ np.abs(V)).max()
    # F-ordered and strided blocks are read as they are.
    np.testing.assert_array_equal(A.matmat(np.asfortranarray(V)), A.matmat(V))
    np.testing.assert_array_equal(A.matmat(np.repeat(V, 2, axis=1)[:, ::2]), A.matmat(V))
