"""fastkern's Lanczos solver (``fastkern._eigen.lanczos_eigsh``, KernelPCA's
eigen_solver="thick_restart_lanczos") against LAPACK's eigh on hard spectra."""
import warnings

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from scipy import linalg
from sklearn.exceptions import ConvergenceWarning

import fastkern
from fastkern import _eigen, _kpca_solvers, _lanczos, _tridiagonal
from fastkern._eigen import lanczos_eigsh as _lanczos_eigsh


def lanczos_eigsh(*args, probe=False, **kwargs):
    """The Lanczos iteration itself; its probe for missed copies of repeated
    values (which declines flat spectra) is tested in test_repeated_eigenvalues
    and below."""
    return _lanczos_eigsh(*args, probe=probe, **kwargs)


def _spectrum_matrix(eigenvalues, seed=0):
    n = eigenvalues.size
    Q = np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))[0]
    return np.ascontiguousarray((Q * eigenvalues) @ Q.T)


def _double_centred(K):
    return K - K.mean(0) - K.mean(1)[:, None] + K.mean()


def _rbf(n, d, gamma, seed=0):
    X = np.random.default_rng(seed).standard_normal((n, d))
    return fastkern.rbf_kernel(X, gamma=gamma)


def _centred_rbf(n, d, gamma, seed=0):
    return np.ascontiguousarray(_double_centred(_rbf(n, d, gamma, seed)))


_SPECTRA = {
    "rbf-steep": lambda: _centred_rbf(300, 8, 1 / 8),
    "rbf-flat": lambda: _centred_rbf(333, 16, 0.5),
    # gamma 0.5 at d = 64: the centred identity to 1e-6, a tight top cluster.
    "near-identity": lambda: _centred_rbf(257, 64, 0.5),
    "centred-identity": lambda: np.eye(200) - 1 / 200,
    "rank-2": lambda: _spectrum_matrix(np.r_[3.0, 1.0, np.zeros(198)], seed=1),
    "repeated": lambda: _spectrum_matrix(np.r_[[5.0] * 4, [3.0] * 3,
                                               np.linspace(1, 0, 243) ** 3], seed=2),
    "indefinite": lambda: _spectrum_matrix(np.r_[1.0, 0.9, 0.8, np.linspace(0.5, -3, 197)],
                                           seed=3),
    "slow-decay": lambda: _spectrum_matrix(1 / np.arange(1.0, 351), seed=4),
    "flat": lambda: _spectrum_matrix(np.linspace(1.0, 0.99, 300), seed=5),
    "offset": lambda: _spectrum_matrix(1e6 + np.linspace(1, 0, 211) ** 2, seed=6),
    "tiny-scale": lambda: 1e-9 * _centred_rbf(240, 8, 1 / 8),
}


def _check_pairs(A, w, V, k, tol):
    """w, V: the k largest eigenpairs of A to within tol of its largest |eigenvalue|."""
    all_w = linalg.eigh(A, eigvals_only=True)
    scale = np.abs(all_w).max()
    assert w.shape == (k,) and V.shape == (A.shape[0], k)
    np.testing.assert_allclose(w, all_w[-k:], rtol=0, atol=tol * scale)
    np.testing.assert_allclose(V.T @ V, np.eye(k), atol=max(tol, 1e-12))
    assert np.linalg.norm(A @ V - V * w, axis=0).max() <= tol * scale


@pytest.mark.parametrize("name", list(_SPECTRA))
@pytest.mark.parametrize("k", [1, 5, 9])
def test_matches_lapack(name, k):
    A = _SPECTRA[name]()
    w, V, residuals = lanczos_eigsh(A, k, random_state=0)
    assert residuals.max() <= np.finfo(float).eps
    # ARPACK's test bounds the residual estimates by eps |theta|; the true
    # residuals carry the rounding of the products, about sqrt(n) eps ||A||.
    _check_pairs(A, w, V, k, 1e-12)


@pytest.mark.parametrize("ncv", [7, 9, 30])
def test_restarts_keep_the_answer(ncv):
    # A basis of 7 for 5 pairs restarts hundreds of times on this spectrum.
    A = _SPECTRA["slow-decay"]()
    w, V, residuals = lanczos_eigsh(A, 5, ncv=ncv, random_state=0)
    assert residuals.max() <= np.finfo(float).eps
    _check_pairs(A, w, V, 5, 1e-12)


def _lanczos_H(j, cluster, dtype=np.float64, rows=80):
    """lanczos_eigsh's H with a Lanczos tridiagonal of order j (and rounding below it)."""
    rng = np.random.default_rng(j)
    H = np.zeros((rows, rows + 1), dtype)
    d = np.full(j, 1.0) + 1e-13 * rng.standard_normal(j) if cluster else rng.standard_normal(j)
    e = 1e-14 * rng.random(j) if cluster else rng.random(j)
    H[np.arange(j), np.arange(j)] = d
    H[np.arange(1, j), np.arange(j - 1)] = e[:j - 1]
    H[np.arange(j), np.arange(1, j + 1)] = e
    H[:j, :j] += np.tril(1e-17 * rng.standard_normal((j, j)), -2).astype(dtype)
    return H


@pytest.mark.parametrize("j", [1, 2, 6, 40, 80])
@pytest.mark.parametrize("cluster", [False, True])
def test_top_pairs_of_the_tridiagonal_match_lapack_on_the_dense_matrix(j, cluster):
    # Before a restart the projected matrix is the Lanczos tridiagonal, and
    # its other lower entries are rounding: the pairs read from its two
    # diagonals alone (stemr) are those of the whole lower triangle (syevr)
    # to that rounding.  Signs of eigenvectors are free.
    H = _lanczos_H(j, cluster)
    d = np.diagonal(H)[:j]
    H_before = H.copy()
    k = min(5, j)
    w, Y = _eigen._top_pairs(H, j, k, tridiagonal=True)
    w_dense, Y_dense = _eigen._top_pairs(H, j, k, tridiagonal=False)
    assert_array_equal(H, H_before)  # the solver's workspace is a copy
    # Both solvers are accurate to a few n eps of the largest eigenvalue.
    scale = max(1.0, np.abs(d).max())
    np.testing.assert_allclose(w, w_dense, rtol=0, atol=4 * j * np.finfo(float).eps * scale)
    np.testing.assert_allclose(Y.T @ Y, np.eye(k), atol=1e-12)
    T = np.tril(H[:j, :j])
    T = T + np.tril(T, -1).T
    assert np.abs(T @ Y - Y * w).max() <= 1e-13
    if not cluster:  # distinct eigenvalues: the same vectors up to sign
        np.testing.assert_allclose(np.abs(Y), np.abs(Y_dense), atol=1e-10)


def _check(H, j, k, tol=2.0 ** -52, floor=1e-11, exact=False):
    theta, Z, relative = np.empty(j), np.empty(j * k), np.empty(k)
    work, iwork = _tridiagonal.check_workspace(j, k)
    ratio = _tridiagonal.tridiagonal_check(H, j, k, tol, floor, exact, theta, Z, relative,
                                           np.empty(work), np.empty(iwork, np.intc))
    return ratio, theta[:k], Z.reshape(k, j).T, relative


@pytest.mark.parametrize("j", [1, 2, 6, 40, 80])
@pytest.mark.parametrize("cluster", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_tridiagonal_check_is_the_numpy_check_on_stemrs_pairs(j, cluster, dtype):
    # The check lanczos_eigsh makes before a restart, in C: stemr's pairs as
    # scipy's wrapper gives them, and ARPACK's test on them as NumPy computes
    # it, to the last bit.
    H = _lanczos_H(j, cluster, dtype)
    H_before = H.copy()
    k = min(5, j)
    tol, floor = float(np.finfo(dtype).eps), float(np.finfo(dtype).eps) ** (2 / 3)
    ratio, theta, Y, relative = _check(H, j, k, tol, floor)
    assert_array_equal(H, H_before)
    w, Z = _eigen._top_pairs(H, j, k, tridiagonal=True)
    assert_array_equal(theta, w)
    assert_array_equal(Y, Z)
    bounds = np.abs(H[j - 1, j] * Z[j - 1])
    scale = np.maximum(floor, np.abs(w))
    assert ratio == float(np.max(bounds / (tol * scale)))
    assert_array_equal(relative, bounds / scale)
    # The whole space spanned: exact pairs.
    ratio, _, _, relative = _check(H, j, k, tol, floor, exact=True)
    assert ratio == 0 and not relative.any()


def test_tridiagonal_check_declines_where_stemr_does_and_keeps_nan():
    H = _lanczos_H(6, False)
    H[2, 2] = np.nan  # stemr returns an error: the caller's dense solve takes over
    assert _check(H, 6, 3)[0] == -1
    H = _lanczos_H(6, False)
    H[5, 6] = np.nan  # a NaN coupling: NaN estimates, never a pass
    assert np.isnan(_check(H, 6, 3)[0])


def test_tridiagonal_check_rejects_arrays_too_small():
    H = _lanczos_H(10, False)
    work, iwork = _tridiagonal.check_workspace(10, 5)
    args = [H, 10, 5, 1e-16, 1e-11, False, np.empty(10), np.empty(50), np.empty(5),
            np.empty(work), np.empty(iwork, np.intc)]
    for position, small in [(6, np.empty(9)), (7, np.empty(49)), (8, np.empty(4)),
                            (9, np.empty(work - 1)), (10, np.empty(iwork - 1, np.intc)),
                            (0, H[:9])]:
        bad = list(args)
        bad[position] = small
        with pytest.raises(ValueError, match="does not fit"):
            _tridiagonal.tridiagonal_check(*bad)
    for j, k in [(10, 0), (10, 11), (81, 5)]:
        with pytest.raises(ValueError, match="does not fit"):
            _tridiagonal.tridiagonal_check(H, j, k, *args[3:])


def test_checks_fall_back_to_the_dense_solve_when_ql_and_stemr_decline(monkeypatch):
    A = _SPECTRA["rbf-steep"]()
    expected = lanczos_eigsh(A, 5, random_state=0)
    stemr_calls, check_calls = [], []

    def declined(d, e, *args, **kwargs):
        stemr_calls.append(d.size)
        return 0, np.zeros(d.size), np.zeros((d.size, d.size)), 1

    def check_declined(H, j, *args):
        check_calls.append(j)
        return -1.0
    monkeypatch.setattr(linalg.lapack, "dstemr", declined)
    monkeypatch.setattr(_tridiagonal, "tridiagonal_check", check_declined)
    # QL (ritz_check) declines too, as it would on a matrix it cannot reduce.
    monkeypatch.setattr(_tridiagonal, "ritz_check", lambda *args: (-1.0, False))
    # ncv = 30: restarts too, the first of which solves the tridiagonal (stemr).
    for ncv, restarts in [(None, False), (30, True)]:
        stemr_calls.clear()
        check_calls.clear()
        w, V, residuals = lanczos_eigsh(A, 5, ncv=ncv, random_state=0)
        assert check_calls and bool(stemr_calls) == restarts
        assert residuals.max() <= np.finfo(float).eps
        _check_pairs(A, w, V, 5, 1e-12)
        np.testing.assert_allclose(w, expected[0], rtol=0, atol=1e-12 * np.abs(w).max())


def test_max_iter_returns_the_ritz_pairs_and_their_residuals():
    A = _SPECTRA["slow-decay"]()
    w, V, residuals = lanczos_eigsh(A, 5, ncv=7, max_iter=2, random_state=0)
    assert residuals.max() > np.finfo(float).eps
    np.testing.assert_allclose(V.T @ V, np.eye(5), atol=1e-12)
    # Ritz values bound the eigenvalues from below (Cauchy interlacing).
    assert np.all(w <= linalg.eigh(A, eigvals_only=True)[-5:] + 1e-12)


@pytest.mark.parametrize("n", [6, 7, 30])
def test_whole_space_and_k_next_to_n(n):
    A = _spectrum_matrix(np.linspace(2.0, -1.0, n), seed=n)
    w, V, _ = lanczos_eigsh(A, n - 1, random_state=0)
    _check_pairs(A, w, V, n - 1, 1e-12)


@pytest.mark.parametrize("order", ["C", "strided", "read-only"])
def test_reads_the_lower_triangle_only(order):
    A = _SPECTRA["rbf-steep"]()
    B = A + np.triu(np.random.default_rng(0).standard_normal(A.shape), 1)
    if order == "read-only":
        B.setflags(write=False)
    elif order == "strided":
        # lanczos_eigsh takes C-contiguous K only (KernelPCA's own copy).
        with pytest.raises(ValueError, match="C-contiguous"):
            lanczos_eigsh(np.zeros((600, 600))[::2, ::2], 3)
        return
    w, V, _ = lanczos_eigsh(B, 4, random_state=0)
    _check_pairs(A, w, V, 4, 1e-12)


def test_float32():
    A = _SPECTRA["rbf-flat"]().astype(np.float32)
    w, V, residuals = lanczos_eigsh(A, 5, random_state=0)
    assert w.dtype == np.float64 and V.dtype == np.float32
    assert residuals.max() <= np.finfo(np.float32).eps
    _check_pairs(A.astype(np.float64), w, V.astype(np.float64), 5, 1e-5)


def test_same_bits_for_the_same_start():
    A = _SPECTRA["centred-identity"]()  # random directions after each breakdown
    runs = [lanczos_eigsh(A, 5, random_state=np.random.RandomState(3)) for _ in range(2)]
    np.testing.assert_array_equal(runs[0][0], runs[1][0])
    np.testing.assert_array_equal(runs[0][1], runs[1][1])


@pytest.mark.parametrize("kwargs, match", [
    (dict(k=0), r"k must be in \[1, n - 1\]"),
    (dict(k=40), r"k must be in \[1, n - 1\]"),
    (dict(k=3, ncv=3), r"ncv must be in \[k \+ 1, n\]"),
    (dict(k=3, ncv=41), r"ncv must be in \[k \+ 1, n\]"),
    (dict(k=3, v0=np.zeros(40)), "v0 must be a nonzero vector"),
    (dict(k=3, ncv=39, centred=True), r"centred=True needs ncv <= n - 2"),
    # A constant start vector has no component outside the direction of 1.
    (dict(k=3, ncv=10, v0=np.ones(40), centred=True),
     "v0 must not be constant with centred=True"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        lanczos_eigsh(np.eye(40), **kwargs)


# Symmetric matrices whose double-centred form is wanted: each adds to K a
# part the centring removes (a constant, c 1 x^T + x c^T) or has a top
# cluster, a null space or a tiny scale.
_UNCENTRED = {
    "rbf-steep": lambda: _rbf(300, 8, 1 / 8),
    "rbf-flat": lambda: _rbf(333, 16, 0.5),
    "near-identity": lambda: _rbf(257, 64, 0.5),
    "identity": lambda: np.eye(150),
    "offset": lambda: _rbf(211, 8, 1 / 8) + 1e3,
    "row-offsets": lambda: (lambda K, c: K + c[:, None] + c[None, :])(
        _rbf(240, 8, 1 / 8), 1e2 * np.random.default_rng(7).standard_normal(240)),
    "repeated": lambda: _spectrum_matrix(np.r_[[5.0] * 4, [3.0] * 3,
                                               np.linspace(1, 0, 243) ** 3], seed=2) + 1.0,
    "tiny-scale": lambda: 1e-9 * _rbf(240, 8, 1 / 8),
}


@pytest.mark.parametrize("name", list(_UNCENTRED))
@pytest.mark.parametrize("k", [1, 5])
def test_centred_matches_lapack_on_the_centred_matrix(name, k):
    K = _UNCENTRED[name]()
    before = K.copy()
    w, V, residuals = lanczos_eigsh(K, k, random_state=0, centred=True)
    assert_array_equal(K, before)
    A = _double_centred(K)
    # Centring in the products rounds at K's scale, not the centred one's.
    scale = np.abs(linalg.eigh(A, eigvals_only=True)).max()
    tol = 1e-12 * max(1.0, np.abs(K).max() / scale)
    _check_pairs(A, w, V, k, tol)
    # The pairs of H K H that are not the direction of 1, its null vector.
    assert np.abs(V.sum(axis=0)).max() <= 1e-10 * np.sqrt(K.shape[0])


def test_centred_float32():
    K = _rbf(300, 8, 1 / 8).astype(np.float32)
    w, V, _ = lanczos_eigsh(K, 5, random_state=0, centred=True)
    assert V.dtype == np.float32
    _check_pairs(_double_centred(K.astype(np.float64)), w, V.astype(np.float64), 5, 1e-5)


def test_callback_sees_the_estimates_fall_to_tol():
    A = _SPECTRA["rbf-flat"]()
    seen = []
    lanczos_eigsh(A, 5, random_state=0, callback=lambda step, r: seen.append((step, r)))
    steps = [s for s, _ in seen]
    assert steps == sorted(steps) and seen[-1][1] <= np.finfo(float).eps
    assert all(r > np.finfo(float).eps for _, r in seen[:-1])


# ------------------------------------------- fastkern's own products (fk_symv.h)


def _one_step(K, x, acc, n_threads, centred=False):
    """K x (centred: H K H x) from one step of expand: h_0 v_0 + beta_0 v_1."""
    n = K.shape[0]
    V = np.zeros((2, n))
    V[0] = x / np.linalg.norm(x)
    H = np.zeros((1, 2))
    _lanczos.expand(K, V, H, np.empty(n), 0, 1, 0.0, np.zeros(1), centred, acc, n_threads)
    return np.linalg.norm(x) * (H[0, 0] * V[0] + H[0, 1] * V[1])


# Sizes across the row blocks' edges (4 blocks of equal area), the 4-row
# groups and the 4-column vectors, from one row.
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 64, 101, 257, 700])
def test_product_reads_the_lower_triangle_in_blocks(n):
    rng = np.random.default_rng(n)
    A = rng.standard_normal((n, n))
    K = np.tril(A) + np.tril(A, -1).T
    # The upper triangle is never read: NaN there would spread.
    B = K + np.triu(np.full((n, n), np.nan), 1)
    x = rng.standard_normal(n)
    acc = np.empty((_lanczos.PRODUCT_BLOCKS, n))
    expected = K @ x
    runs = [_one_step(B, x, acc, t) for t in (1, 2, 3, 4, 8)]
    scale = np.abs(K).sum(axis=1).max() * np.abs(x).max()
    np.testing.assert_allclose(runs[0], expected, rtol=0, atol=1e-13 * scale)
    for run in runs[1:]:
        assert_array_equal(run, runs[0])


def test_product_on_the_centred_matrix():
    K = _rbf(333, 8, 1 / 8) + 1e3
    x = np.random.default_rng(1).standard_normal(333)
    x -= x.mean()
    acc = np.empty((_lanczos.PRODUCT_BLOCKS, 333))
    got = _one_step(K, x, acc, 2, centred=True)
    np.testing.assert_allclose(got, _double_centred(K) @ x, rtol=0, atol=1e-9)


@pytest.mark.parametrize("acc, dtype, n_threads, match", [
    (np.empty((_lanczos.PRODUCT_BLOCKS, 9)), np.float64, 1, r"acc must be None or.*\(4, 10\)"),
    (np.empty((_lanczos.PRODUCT_BLOCKS + 1, 10)), np.float64, 1, r"acc must be None"),
    (np.empty((_lanczos.PRODUCT_BLOCKS, 10)), np.float32, 1, r"acc must be None"),
    (None, np.float64, 0, "n_threads must be at least 1"),
])
def test_product_bad_arguments(acc, dtype, n_threads, match):
    K = np.eye(10, dtype=dtype)
    V = np.zeros((2, 10), dtype)
    V[0, 0] = 1
    with pytest.raises((ValueError, TypeError), match=match):
        _lanczos.expand(K, V, np.zeros((1, 2), dtype), np.empty(10, dtype), 0, 1, 0.0,
                        np.zeros(1, dtype), False, acc, n_threads)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("centred", [False, True])
@pytest.mark.parametrize("n, j", [(1, 0), (7, 0), (7, 5), (200, 40), (301, 80)])
def test_new_direction_is_a_unit_vector_orthogonal_to_the_basis(dtype, centred, n, j):
    if centred and j >= n - 1 or centred and n == 1:
        pytest.skip("no room orthogonal to the basis and 1")
    rng = np.random.default_rng(n + j)
    # An orthonormal basis, orthogonal to 1 when centred, then rows of garbage
    # that must be neither read nor changed.
    B = rng.standard_normal((n, j))
    if centred:
        B -= B.mean(0)
    V = np.full((j + 3, n), 7.0, dtype)
    V[:j] = np.linalg.qr(B)[0].T if j else V[:0]
    before = V.copy()
    w = rng.uniform(-1, 1, n) + 5.0   # a large mean, which centring removes
    _lanczos.new_direction(V, j, w, np.full(j + 1, np.nan, dtype), centred)
    tol = 1e-12 if dtype == np.float64 else 2e-6
    v = V[j].astype(np.float64)
    assert abs(np.linalg.norm(v) - 1) < tol
    np.testing.assert_allclose(V[:j].astype(np.float64) @ v, 0, atol=tol)
    if centred:
        assert abs(v.sum()) < tol * np.sqrt(n)
    # The direction is w's: its part outside the basis (and 1), normalised.
    ref = w - (w.mean() if centred else 0)
    Q = V[:j].astype(np.float64)
    ref = ref - Q.T @ (Q @ ref)
    np.testing.assert_allclose(v, ref / np.linalg.norm(ref), atol=10 * tol)
    assert_array_equal(np.delete(V, j, axis=0), np.delete(before, j, axis=0))


def test_new_direction_bad_arguments():
    V = np.zeros((3, 4))
    with pytest.raises(ValueError, match="row 3"):
        _lanczos.new_direction(V, 3, np.ones(4), np.empty(3))
    with pytest.raises(ValueError, match="w of 4"):
        _lanczos.new_direction(V, 1, np.ones(5), np.empty(3))
    with pytest.raises(ValueError, match="scratch"):
        _lanczos.new_direction(V, 2, np.ones(4), np.empty(1))
    # A w in the basis' span (here 1, with centring) has no direction left.
    with pytest.raises(ValueError, match="span"):
        _lanczos.new_direction(V, 0, np.ones(4), np.empty(1), True)


def _packed(K):
    """K's upper triangle as a PackedUpperGram (NaN where nothing may be read)."""
    from fastkern.pairwise import PackedUpperGram
    n = K.shape[0]
    P = PackedUpperGram(n)
    P.data[:] = np.nan
    for i in range(n):
        P.data[P.row_start[i] + i:P.row_start[i] + n] = K[i, i:]
    return P


# Sizes across the strips of 12 rows, the 4-row groups and the row blocks.
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 11, 12, 13, 24, 25, 37, 101, 257, 700])
def test_packed_product_reads_the_upper_triangle_in_blocks(n):
    rng = np.random.default_rng(n)
    A = rng.standard_normal((n, n))
    K = np.triu(A) + np.triu(A, 1).T
    x = rng.standard_normal(n)
    P = _packed(K)
    runs = [_eigen.symmetric_product(P, x, t) for t in (1, 2, 3, 8)]
    scale = np.abs(K).sum(axis=1).max() * np.abs(x).max()
    np.testing.assert_allclose(runs[0], K @ x, rtol=0, atol=1e-13 * scale)
    for run in runs[1:]:
        assert_array_equal(run, runs[0])
    # The full matrix's product (its lower triangle) agrees to rounding.
    np.testing.assert_allclose(_eigen.symmetric_product(K, x), K @ x, rtol=0,
                               atol=1e-13 * scale)


@pytest.mark.parametrize("name", list(_SPECTRA))
def test_packed_matches_lapack_with_the_same_bits(name):
    A = _SPECTRA[name]()
    P = _packed(A)
    runs = [lanczos_eigsh(P, 5, random_state=0, n_threads=t) for t in (1, 2, 3)]
    assert runs[0][2].max() <= np.finfo(float).eps
    _check_pairs(A, runs[0][0], runs[0][1], 5, 1e-12)
    for run in runs[1:]:
        assert_array_equal(run[1], runs[0][1])


@pytest.mark.parametrize("name", list(_UNCENTRED))
def test_packed_centred(name):
    K = _UNCENTRED[name]()
    w, V, _ = lanczos_eigsh(_packed(K), 5, random_state=0, centred=True, n_threads=2)
    A = _double_centred(K)
    scale = np.abs(linalg.eigh(A, eigvals_only=True)).max()
    _check_pairs(A, w, V, 5, 1e-12 * max(1.0, np.abs(K).max() / scale))


@pytest.mark.parametrize("name", list(_SPECTRA))
def test_threaded_products_match_lapack_with_the_same_bits(monkeypatch, name):
    # From LANCZOS_THREADED_ROWS rows (here every size) the products are
    # fastkern's own, their blocks shared by the threads.
    monkeypatch.setattr(_eigen, "LANCZOS_THREADED_ROWS", 0)
    A = _SPECTRA[name]()
    runs = [lanczos_eigsh(A, 5, random_state=0, n_threads=t) for t in (1, 2, 3, 8)]
    assert runs[0][2].max() <= np.finfo(float).eps
    _check_pairs(A, runs[0][0], runs[0][1], 5, 1e-12)
    for run in runs[1:]:
        assert_array_equal(run[0], runs[0][0])
        assert_array_equal(run[1], runs[0][1])


@pytest.mark.parametrize("name", list(_UNCENTRED))
def test_threaded_products_centred(monkeypatch, name):
    monkeypatch.setattr(_eigen, "LANCZOS_THREADED_ROWS", 0)
    K = _UNCENTRED[name]()
    runs = [lanczos_eigsh(K, 5, random_state=0, centred=True, n_threads=t) for t in (1, 2)]
    A = _double_centred(K)
    scale = np.abs(linalg.eigh(A, eigvals_only=True)).max()
    _check_pairs(A, runs[0][0], runs[0][1], 5, 1e-12 * max(1.0, np.abs(K).max() / scale))
    assert_array_equal(runs[1][1], runs[0][1])


# ------------------------------------------------------------- through KernelPCA


def _kpca(X, **kw):
    return fastkern.KernelPCA(5, kernel="rbf", gamma=0.2, random_state=0, **kw)


def test_kernel_pca_same_bits_for_any_thread_count():
    X = np.random.default_rng(0).standard_normal((701, 6))
    runs = [_kpca(X, eigen_solver="thick_restart_lanczos", n_threads=t).fit(X)
            for t in (1, 2, 4)]
    for run in runs[1:]:
        np.testing.assert_array_equal(run.eigenvectors_, runs[0].eigenvectors_)
        np.testing.assert_array_equal(run.eigenvalues_, runs[0].eigenvalues_)


def test_kernel_pca_max_iter_warns_and_keeps_the_ritz_pairs(monkeypatch):
    monkeypatch.setattr(_eigen, "LANCZOS_EXTRA_VECTORS", 2)
    X = np.random.default_rng(1).standard_normal((400, 8))
    with pytest.warns(ConvergenceWarning, match="thick_restart_lanczos did not converge in "
                                                "max_iter=1 restarts"):
        est = _kpca(X, eigen_solver="thick_restart_lanczos", max_iter=1).fit(X)
    assert est.eigenvalues_.shape == (5,)


# 701 rows: the Gram is packed (ThickRestartLanczos.gram), LAPACK gets it whole.
@pytest.mark.parametrize("n", [400, 701])
def test_kernel_pca_unconverged_without_max_iter_is_solved_by_lapack(monkeypatch, n):
    # No restart allowed and a basis too small to converge in: LAPACK's pairs.
    monkeypatch.setattr(_eigen, "LANCZOS_EXTRA_VECTORS", 2)
    monkeypatch.setattr(_kpca_solvers, "_LANCZOS_RESTARTS", 0)
    X = np.random.default_rng(2).standard_normal((n, 8))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est = _kpca(X, eigen_solver="thick_restart_lanczos").fit(X)
    dense = _kpca(X, eigen_solver="dense").fit(X)
    np.testing.assert_allclose(est.eigenvalues_, dense.eigenvalues_, rtol=1e-12)
    np.testing.assert_allclose(est.eigenvectors_, dense.eigenvectors_, atol=1e-10)


@pytest.mark.parametrize("kernel, params, offset", [
    ("rbf", dict(gamma=0.2), 0.0), ("linear", {}, 1e3), ("poly", dict(degree=2), 3.0)])
def test_kernel_pca_centres_in_the_products(kernel, params, offset):
    # A Gram computed here is centred in each product (lanczos_eigsh's
    # centred): the fitted means, the pairs and new points' projections are
    # those of the Gram centred first.
    rng = np.random.default_rng(5)
    X = rng.standard_normal((300, 6)) + offset
    est = fastkern.KernelPCA(5, kernel=kernel, eigen_solver="thick_restart_lanczos",
                             random_state=0, **params).fit(X)
    dense = fastkern.KernelPCA(5, kernel=kernel, eigen_solver="dense", **params).fit(X)
    K = fastkern.pairwise_kernels(X, metric=kernel, **params)
    centerer = fastkern.KernelCenterer().fit(K)
    np.testing.assert_allclose(est._centerer.K_fit_rows_, centerer.K_fit_rows_,
                               rtol=1e-13, atol=1e-13 * np.abs(K).max())
    np.testing.assert_allclose(est._centerer.K_fit_all_, centerer.K_fit_all_, rtol=1e-13)
    scale = np.abs(K).max() / dense.eigenvalues_[0]
    np.testing.assert_allclose(est.eigenvalues_, dense.eigenvalues_, rtol=1e-11 * scale)
    Z = rng.standard_normal((20, 6)) + offset
    np.testing.assert_allclose(est.transform(Z), dense.transform(Z),
                               atol=1e-9 * scale * np.abs(dense.transform(Z)).max())


@pytest.mark.parametrize("kernel", ["rbf", "linear"])
def test_kernel_pca_gram_that_centres_to_zero(kernel):
    # Identical rows: K centred first is exactly 0, and products centred one
    # by one leave only rounding, which must not pass for components.
    X = np.full((150, 4), 3.0)
    for remove_zero_eig in (True, False):
        kw = dict(kernel=kernel, remove_zero_eig=remove_zero_eig)
        est = fastkern.KernelPCA(5, eigen_solver="thick_restart_lanczos", random_state=0,
                                 **kw).fit(X)
        dense = fastkern.KernelPCA(5, eigen_solver="dense", **kw).fit(X)
        assert_array_equal(est.eigenvalues_, dense.eigenvalues_)
        assert est.eigenvalues_.size == (0 if remove_zero_eig else 5)
        assert_array_equal(est.transform(X[:3]), np.zeros((3, est.eigenvalues_.size)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [190, 257, 700])
def test_kernel_pca_matches_dense(dtype, n):
    X = np.random.default_rng(n).standard_normal((n, 5)).astype(dtype)
    est = _kpca(X, eigen_solver="thick_restart_lanczos").fit(X)
    dense = _kpca(X, eigen_solver="dense").fit(X)
    assert est.eigenvectors_.dtype == dtype
    rtol = 1e-4 if dtype == np.float32 else 1e-11
    np.testing.assert_allclose(est.eigenvalues_, dense.eigenvalues_, rtol=rtol)
    np.testing.assert_allclose(est.eigenvectors_, dense.eigenvectors_,
                               atol=rtol * np.abs(dense.eigenvectors_).max())


@pytest.mark.parametrize("case", ["many-components", "inverse-transform", "float32"])
def test_kernel_pca_packed_gram_edges(case):
    # Nearly every component (the basis does not fit: LAPACK on the whole
    # matrix), pre-images (their Gram computed anew), and float32 X (a full
    # float32 Gram, centred first): each as "dense" gives.
    n = 701
    X = np.random.default_rng(4).standard_normal((n, 5))
    kw = dict(n_components=5)
    if case == "many-components":
        kw = dict(n_components=n - 1)
    elif case == "inverse-transform":
        kw = dict(n_components=5, fit_inverse_transform=True)
    else:
        X = X.astype(np.float32)
    est = _kpca_kw(X, eigen_solver="thick_restart_lanczos", **kw).fit(X)
    dense = _kpca_kw(X, eigen_solver="dense", **kw).fit(X)
    rtol = 1e-4 if case == "float32" else 1e-10
    top = slice(0, 5)
    np.testing.assert_allclose(est.eigenvalues_[top], dense.eigenvalues_[top], rtol=rtol)
    if case == "inverse-transform":
        np.testing.assert_allclose(est.inverse_transform(est.transform(X[:3])),
                                   dense.inverse_transform(dense.transform(X[:3])),
                                   rtol=1e-6, atol=1e-8)


def _kpca_kw(X, **kw):
    return fastkern.KernelPCA(kernel="rbf", gamma=0.2, random_state=0, **kw)


@pytest.mark.parametrize("name", list(_SPECTRA))
def test_probe_keeps_the_pairs_or_says_they_may_miss_a_value(name):
    # With the probe, the pairs are those without it; the residuals are
    # infinite only where a value could have been missed, never where the
    # spectrum is steep at the k-th value.
    A = _SPECTRA[name]()
    plain = lanczos_eigsh(A, 5, random_state=0)
    w, V, residuals = lanczos_eigsh(A, 5, random_state=0, probe=True)
    assert_array_equal(w, plain[0])
    assert_array_equal(V, plain[1])
    if name in ("rbf-steep", "rank-2", "slow-decay"):
        assert residuals.max() <= np.finfo(float).eps
    else:
        assert residuals.max() <= np.finfo(float).eps or np.isinf(residuals).all()


def _lanczos_tridiagonals(n=400, d=8, gamma=0.5, k=5):
    """The H of every convergence check of a real solve (an RBF Gram, centred),
    with the check's order j."""
    X = np.random.default_rng(0).standard_normal((n, d))
    K = np.ascontiguousarray(_double_centred(fastkern.rbf_kernel(X, gamma=gamma)))
    seen = []
    check = _tridiagonal.ritz_check

    def record(H, j, *args):
        seen.append((np.array(H), j))
        return check(H, j, *args)
    mp = pytest.MonkeyPatch()
    mp.setattr(_tridiagonal, "ritz_check", record)
    try:
        lanczos_eigsh(K, k, random_state=0)
    finally:
        mp.undo()
    return seen


def _tridiagonal_matrix(H, j, start=0, upper=False):
    d = np.diagonal(H[start:j, start:j])
    if upper:
        e = np.diagonal(H[start:j, start + 1:j + 1])
    else:
        e = np.diagonal(H[start + 1:j, start:j])
    return np.diag(d) + np.diag(e[:j - start - 1], 1) + np.diag(e[:j - start - 1], -1)


@pytest.mark.parametrize("case", ["random", "cluster", "zero", "split", "huge", "tiny",
                                  "lanczos"])
@pytest.mark.parametrize("upper", [False, True])
def test_tridiagonal_values_are_lapacks_with_the_last_row(case, upper):
    # All eigenvalues of the tridiagonal and the last components of its
    # eigenvectors, against LAPACK's eigh on the dense matrix: each value to
    # a few j eps of the norm, each last component to a few j eps where the
    # value is apart from the others, and within a cluster their norm.
    if case == "lanczos":
        H, j = _lanczos_tridiagonals()[-1]
        upper = False
    else:
        j = 40
        H = _lanczos_H(j, case == "cluster")
        if case == "zero":
            H[:] = 0
        elif case == "split":
            H[np.arange(1, j), np.arange(j - 1)] *= np.arange(1, j) % 7 != 0
            H[np.arange(j - 1), np.arange(1, j)] *= np.arange(1, j) % 7 != 0
        elif case in ("huge", "tiny"):
            H *= 1e150 if case == "huge" else 1e-150
    start = 3 if upper else 0
    T = _tridiagonal_matrix(H, j, start, upper)
    w, last = np.empty(j - start), np.empty(j - start)
    assert _tridiagonal.tridiagonal_values(H, start, j, upper, w, last) == 0
    w_ref, Z_ref = linalg.eigh(T)
    scale = max(np.abs(T).max(), np.finfo(float).tiny)
    tol = 8 * j * np.finfo(float).eps
    np.testing.assert_allclose(w, w_ref, rtol=0, atol=tol * scale)
    # Clusters: values within tol of each other share their last components' norm.
    groups = np.cumsum(np.r_[True, np.diff(w_ref) > 1e3 * tol * scale])
    for g in np.unique(groups):
        members = groups == g
        np.testing.assert_allclose(np.linalg.norm(last[members]),
                                   np.linalg.norm(Z_ref[-1, members]), atol=1e3 * tol)


def test_tridiagonal_vectors_match_stemr_to_their_tiny_last_components():
    # The vectors of converged Ritz values have last components far below
    # eps; inverse iteration computes them as stemr does, to a few digits
    # down to a hundredth of eps (stemr rounds some of those to 0), which is
    # what the convergence test reads.
    tiny = np.finfo(float).eps / 100
    for H, j in _lanczos_tridiagonals():
        k = min(8, j)
        w = np.empty(j)
        assert _tridiagonal.tridiagonal_values(H, 0, j, False, w) == 0
        Z = np.empty(j * k)
        assert _tridiagonal.tridiagonal_vectors(H, j, w[j - k:], Z) == 0
        Z = Z.reshape(k, j).T
        T = _tridiagonal_matrix(H, j)
        assert np.abs(T @ Z - Z * w[j - k:]).max() <= 1e-13 * np.abs(T).max()
        np.testing.assert_allclose(Z.T @ Z, np.eye(k), atol=1e-13)
        _, _, Z_ref = _check(H, j, k)[:3]
        np.testing.assert_allclose(np.abs(Z[-1]), np.abs(Z_ref[-1]), rtol=1e-3, atol=tiny)


def test_ritz_check_decides_as_the_stemr_check():
    # On every check of a real solve: the same top values, and where the QL
    # values show no pair clearly short, the same estimates from the vectors;
    # where they do, stemr's check also finds the pairs short.
    tiny = np.finfo(float).eps / 100
    for H, j in _lanczos_tridiagonals():
        k = min(5, j)
        tol, floor = np.finfo(float).eps, np.finfo(float).eps ** (2 / 3)
        w, last, Z, relative = np.empty(j), np.empty(j), np.empty(j * k), np.empty(k)
        ratio, vectors = _tridiagonal.ritz_check(H, j, k, tol, floor, False, w, last, Z, relative)
        ratio_ref, theta, _, relative_ref = _check(H, j, k, tol, floor)
        np.testing.assert_allclose(w[j - k:], theta, rtol=0,
                                   atol=8 * j * tol * np.abs(theta).max())
        if vectors:
            np.testing.assert_allclose(ratio, ratio_ref, rtol=1e-3)
            np.testing.assert_allclose(relative[:k], relative_ref, rtol=1e-3, atol=tiny)
        else:
            assert ratio > 1 and ratio_ref > 1


def _plan_reference(H, j, k, top, norm, n):
    """_tridiagonal.probe_plan in NumPy: every r, its bound and steps, the cheapest kept."""
    w, Z = linalg.eigh(_tridiagonal_matrix(H, j))
    bounds = np.abs(H[j - 1, j] * Z[-1])
    lowest = 0.0 if np.diagonal(H[:j, :j]).min() >= 0 else -norm
    best = (np.inf, -1, 0.0, 0)
    for r in range(k, j - 1):
        a = j - 1 - r
        if r > k and not bounds[a + 1] <= 2.0 ** -26 * abs(w[a + 1]):
            break
        gap = w[a + 1] - bounds[a + 1] - w[a] - bounds[a]
        if not gap > 0:
            continue
        following = (w[a] + bounds[a] + np.sum(bounds[a + 1:] ** 2) / gap ** 2
                     * max(abs(w[-1]), abs(lowest)))
        steps = _eigen.probe_steps(n, top, following, lowest, w[-1])
        if steps is None:
            continue
        cost = steps * (n * n + 4 * n * (r + steps)) + r * j * (2 * n + 500)
        if cost < best[0]:
            best = (cost, r, following, steps)
    return best[1:]


def test_probe_plan_is_its_numpy_reference():
    for H, j in _lanczos_tridiagonals()[-1:] + _lanczos_tridiagonals(300, 64, 1 / 64)[-1:]:
        k = 5
        w, last = np.empty(j), np.empty(j)
        top = float(np.sort(np.linalg.eigvalsh(_tridiagonal_matrix(H, j)))[-k])
        r, following, steps, lowest = _tridiagonal.probe_plan(
            H, j, k, top, 10.0, 400, w, last, True, _eigen._PROBE_FAILURE,
            _eigen._PROBE_MIN_STEPS, _eigen._PROBE_MAX_STEPS)
        r_ref, following_ref, steps_ref = _plan_reference(H, j, k, top, 10.0, 400)
        assert r >= k and lowest == 0
        assert (r, steps) == (r_ref, steps_ref)
        np.testing.assert_allclose(following, following_ref, rtol=1e-6)


@pytest.mark.parametrize("copy", [False, True])
def test_probe_runs_on_where_the_complement_holds_more_than_the_bound_said(copy):
    # The locked vectors are exact eigenvectors of the top 3 values; the bound
    # handed to the probe says the rest is at most 1, but the complement
    # holds 3.0 (a cluster the basis had not resolved).  Without a copy of
    # the top values there, the probe must not report one; with a copy of
    # the third (5.0), it must, for every start.
    n = 300
    rest = np.linspace(0, 3.0, n - 3 - copy)
    values = np.r_[[7.0, 6.0, 5.0], [5.0] * copy, rest]
    K = _spectrum_matrix(values, seed=1)
    Q = np.linalg.eigh(K)[1][:, ::-1]
    for seed in range(10):
        room = 3 + _eigen._PROBE_MAX_STEPS
        V = np.empty((room + 1, n))
        V[:3] = Q[:, :3].T
        steps = _eigen.probe_steps(n, 5.0, 1.0, 0.0, 7.0)
        found = _eigen._probe(V, 3, steps, 5.0, 1.0, 0.0, 7.0, np.empty(room), False,
                              np.random.RandomState(seed), K, np.sqrt(n) * 2.0 ** -52, 7.0)
        assert found == copy
