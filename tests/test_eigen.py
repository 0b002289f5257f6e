import sys

import numpy as np
import pytest
from scipy import linalg
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.extmath import _randomized_eigsh

from fastkern import _eigen, _validation, rbf_kernel
from fastkern._eigen import block_eigsh, krylov_basis, randomized_eigsh


def _spectrum_matrix(eigenvalues, seed=0):
    n = eigenvalues.size
    Q = np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))[0]
    return (Q * eigenvalues) @ Q.T


def _rbf(n, d=5, gamma=0.05, seed=0):
    X = np.random.default_rng(seed).standard_normal((n, d))
    return rbf_kernel(X, gamma=gamma)


def _repeated(n=501):
    tail = np.linspace(1.0, 0.0, n - 7) ** 3
    return _spectrum_matrix(np.r_[[5.0] * 4, [3.0] * 3, tail], seed=1)


def _low_rank(n=433, rank=4):
    B = np.random.default_rng(2).standard_normal((n, rank))
    return B @ B.T


def _slow_decay(n=350):
    # Eigenvalues 1/j: small relative gaps, many restarts needed.
    return _spectrum_matrix(1.0 / np.arange(1, n + 1), seed=3)


def _reference(A, k):
    n = A.shape[0]
    w, V = linalg.eigh(A, subset_by_index=(n - k, n - 1))
    return w[::-1], V[:, ::-1]


@pytest.mark.parametrize("make, k", [
    (lambda: _rbf(420), 1),
    (lambda: _rbf(420), 7),
    (lambda: _rbf(150), 5),          # small n: exact dense path
    (lambda: _rbf(12), 11),          # n = k + 1
    (_repeated, 4),                  # k inside the top cluster boundary
    (_repeated, 7),                  # both clusters
    (_low_rank, 4),
    (_low_rank, 6),                  # k beyond the rank: zero eigenvalues
    (_slow_decay, 5),
])
def test_matches_lapack(make, k):
    A = make()
    n = A.shape[0]
    calls = []

    def matmat(V):
        calls.append(V.shape)
        assert V.flags.c_contiguous and V.dtype == np.float64
        return A @ V

    w, V = block_eigsh(matmat, n, k, random_state=0)
    w_ref, V_ref = _reference(A, k)
    assert w.shape == (k,) and V.shape == (n, k)
    np.testing.assert_allclose(w, w_ref, rtol=1e-8, atol=1e-8 * w_ref[0])
    # Residuals (well defined even inside clusters) and orthonormality.
    res = np.linalg.norm(A @ V - V * w, axis=0)
    assert res.max() <= 1e-8 * w_ref[0]
    np.testing.assert_allclose(V.T @ V, np.eye(k), atol=1e-10)
    # Same invariant subspace wherever the spectrum has a gap after k.
    if k < n and w_ref[-1] - linalg.eigh(A, eigvals_only=True)[n - k - 1] > 1e-6 * w_ref[0]:
        assert np.max(linalg.subspace_angles(V, V_ref)) < 1e-6
    assert all(shape[0] == n for shape in calls)


def test_eigenvalues_descending_and_block_products():
    A = _rbf(400)
    widths = []
    w, _ = block_eigsh(lambda V: widths.append(V.shape[1]) or A @ V, 400, 3, block_size=9,
                       random_state=0)
    assert np.all(np.diff(w) <= 0)
    assert set(widths) == {9}


@pytest.mark.parametrize("max_blocks", [3, 5, 20])
def test_max_blocks_bounds_the_basis_and_converges(max_blocks):
    # A spectrum without a gap at k (slow convergence): the basis fills and
    # restarts; whatever its size the answer is the same to the tolerance.
    n, k = 900, 4
    rng = np.random.default_rng(5)
    Q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    lam = np.r_[np.linspace(10.0, 9.0, 12), np.linspace(8.9, 0.0, n - 12)]
    A = (Q * lam) @ Q.T
    peak = [0]

    def watch(iteration, residuals):
        # The basis width is block_eigsh's local `cols` (the caller's frame).
        peak[0] = max(peak[0], sys._getframe(1).f_locals["cols"])

    w, V = block_eigsh(lambda X: A @ X, n, k, block_size=6, tol=1e-11, random_state=0,
                       max_blocks=max_blocks, callback=watch)
    # max_blocks + 1 blocks at most; the small bases fill up, so they restarted.
    assert peak[0] <= 6 * (max_blocks + 1)
    if max_blocks < 20:
        assert peak[0] == 6 * (max_blocks + 1)
    np.testing.assert_allclose(w, lam[:k], rtol=1e-10)
    res = np.linalg.norm(A @ V - V * w, axis=0)
    assert res.max() <= 1e-11 * lam[0]


def test_threaded_solver_products_are_the_same_for_any_thread_count():
    # From _TALL_MIN_ROWS rows the solver's own tall products run on OpenMP
    # threads over fixed row blocks: any thread count gives the same bits,
    # and the answer agrees with the NumPy path to the tolerance.
    from fastkern import _eigen

    n = _eigen._TALL_MIN_ROWS + 3
    X = np.random.default_rng(8).standard_normal((n, 6))
    A = rbf_kernel(X, gamma=0.2)
    kw = dict(block_size=8, tol=1e-12, random_state=0, max_blocks=20)
    runs = [block_eigsh(lambda V: A @ V, n, 5, n_threads=t, omp_products=True, **kw)
            for t in (1, 2, 3, None)]
    for w, V in runs[1:]:
        np.testing.assert_array_equal(w, runs[0][0])
        np.testing.assert_array_equal(V, runs[0][1])
    w_np, V_np = block_eigsh(lambda V: A @ V, n, 5, **kw)
    np.testing.assert_allclose(runs[0][0], w_np, rtol=1e-12)
    assert np.max(linalg.subspace_angles(runs[0][1], V_np)) < 1e-9
    res = np.linalg.norm(A @ runs[0][1] - runs[0][1] * runs[0][0], axis=0)
    assert res.max() <= 1e-12 * runs[0][0][0]


def test_float32_operator():
    A = _rbf(500)
    A32 = A.astype(np.float32)
    seen = []

    def matmat(V):
        seen.append(V.dtype)
        return A32 @ V

    w, V = block_eigsh(matmat, 500, 6, dtype=np.float32, random_state=0)
    w_ref, _ = _reference(A, 6)
    np.testing.assert_allclose(w, w_ref, rtol=1e-5, atol=1e-5 * w_ref[0])
    assert set(seen) == {np.dtype(np.float32)}


def test_callback_reports_residuals():
    A = _slow_decay()
    log = []
    w, _ = block_eigsh(lambda V: A @ V, A.shape[0], 4, tol=1e-9, random_state=0,
                       callback=lambda it, r: log.append((it, r)))
    assert [it for it, _ in log] == list(range(1, len(log) + 1))
    assert all(r.shape == (4,) for _, r in log)
    assert log[-1][1].max() <= 1e-9 * w[0]
    assert len(log) > 1 and log[0][1].max() > 1e-9 * w[0]


def test_deterministic_with_random_state():
    A = _rbf(300)
    a = block_eigsh(lambda V: A @ V, 300, 3, random_state=5)
    b = block_eigsh(lambda V: A @ V, 300, 3, random_state=5)
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def _check_ritz_pairs(A, w, V):
    """(w, V) are Rayleigh-Ritz pairs of A: orthonormal V, V^T A V = diag(w), each w_j
    the Rayleigh quotient of its vector and below the j-th eigenvalue (Cauchy interlacing)."""
    n, k = V.shape
    scale = linalg.eigh(A, eigvals_only=True, subset_by_index=(n - 1, n - 1))[0]
    np.testing.assert_allclose(V.T @ V, np.eye(k), atol=1e-12)
    np.testing.assert_allclose(V.T @ A @ V, np.diag(w), atol=1e-12 * scale)
    w_ref, _ = _reference(A, k)
    assert np.all(w <= w_ref + 1e-12 * scale)
    assert np.all(np.diff(w) <= 0)
    # A Ritz residual is orthogonal to the basis it came from, so to V.
    R = A @ V - V * w
    np.testing.assert_allclose(V.T @ R, 0, atol=1e-12 * scale)
    return np.linalg.norm(R, axis=0)


@pytest.mark.parametrize("make, k", [(_slow_decay, 5), (lambda: _rbf(420), 3), (_repeated, 4)])
def test_max_iter_returns_best_ritz_pairs(make, k):
    # Forced non-convergence: the pairs returned are the Ritz pairs of the
    # basis built so far (not its first columns), the warning and the callback
    # report their true residual norms, and a larger basis gives better pairs.
    A = make()
    n = A.shape[0]
    out = {}
    for max_iter in (1, 2, 3):
        log = []
        with pytest.warns(ConvergenceWarning, match="did not converge") as record:
            w, V = block_eigsh(lambda X: A @ X, n, k, tol=0, max_iter=max_iter, random_state=0,
                               callback=lambda it, r: log.append(r))
        res = _check_ritz_pairs(A, w, V)
        np.testing.assert_allclose(log[-1], res, rtol=1e-6, atol=1e-13 * w[0])
        assert len(log) == max_iter
        assert "residual norms" in str(record[0].message)
        out[max_iter] = w, res
    # Nested bases: Ritz values can only grow (Courant-Fischer).
    assert np.all(out[2][0] >= out[1][0] - 1e-12 * out[1][0][0])
    assert np.all(out[3][0] >= out[2][0] - 1e-12 * out[1][0][0])
    assert out[3][1].max() < out[1][1].max()


@pytest.mark.filterwarnings("error::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("eigenvalues, k", [
    (np.r_[1.0, 0.5, 1e-12, 5e-13, np.zeros(496)], 4),     # wanted ones ~1e-12 lambda_max
    (np.r_[1.0, 0.5, 1e-12, 5e-13, np.zeros(496)], 6),     # k beyond the numerical rank
    (np.r_[np.ones(40), np.linspace(0.5, 0.0, 460)], 5),   # multiplicity 40 > block size 10
    (np.r_[1 + 1e-3 * np.arange(30.0)[::-1], np.linspace(0.9, 0.0, 470)], 5),  # wide cluster
    (np.r_[1.0, 0.9, 0.8, np.linspace(0.5, -3.0, 497)], 3),  # |lambda_min| > lambda_max
    (np.linspace(1.0, 0.99, 500), 3),                       # flat: relative gaps 2e-5
])
@pytest.mark.parametrize("rr_cost", [None, 1e9])
def test_hard_spectra(eigenvalues, k, rr_cost, monkeypatch):
    if rr_cost is not None:
        # Rayleigh-Ritz priced so high that the basis is extended by the
        # products of its newest block whenever it has room (as at small n).
        monkeypatch.setattr(_eigen, "_RR_COST", rr_cost)
    A = _spectrum_matrix(eigenvalues, seed=5)
    n = A.shape[0]
    scale = np.abs(eigenvalues).max()
    w, V = block_eigsh(lambda X: A @ X, n, k, tol=1e-10, random_state=0)
    w_ref, _ = _reference(A, k)
    np.testing.assert_allclose(w, w_ref, rtol=0, atol=1e-9 * scale)
    np.testing.assert_allclose(V.T @ V, np.eye(k), atol=1e-12)
    assert np.linalg.norm(A @ V - V * w, axis=0).max() <= 1e-10 * scale


def test_tolerance_relative_to_largest_eigenvalue():
    # The same Gram scaled by 1e-12: the same products and the same pairs, scaled.
    A = _rbf(420)
    runs = []
    for factor in (1.0, 1e-12):
        calls = []
        w, V = block_eigsh(lambda X: calls.append(1) or factor * A @ X, 420, 5, random_state=0)
        runs.append((len(calls), w / factor, V))
    assert runs[0][0] == runs[1][0]
    np.testing.assert_allclose(runs[1][1], runs[0][1], rtol=1e-12)
    assert np.max(linalg.subspace_angles(runs[0][2], runs[1][2])) < 1e-8


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(k=0), ValueError, "k must be >= 1"),
    (dict(k=11), ValueError, "k must be <= n"),
    (dict(k=2.5), TypeError, "k must be an integer"),
    (dict(k=True), TypeError, "k must be an integer"),
    (dict(k=3, block_size=2), ValueError, "block_size must be >= k"),
    (dict(k=3, tol=-1.0), ValueError, "tol"),
    (dict(k=3, max_iter=0), ValueError, "max_iter"),
    (dict(k=3, max_blocks=2), ValueError, "max_blocks"),
    (dict(k=3, max_blocks=2.0), TypeError, "max_blocks"),
    (dict(k=3, n_threads=0), ValueError, "n_threads"),
    (dict(k=3, dtype=np.int64), TypeError, "dtype"),
])
def test_bad_arguments(kwargs, exc, match):
    A = np.eye(10)
    with pytest.raises(exc, match=match):
        block_eigsh(lambda V: A @ V, 10, **kwargs)


def test_bad_matmat():
    with pytest.raises(TypeError, match="matmat must be callable"):
        block_eigsh(None, 10, 2)
    with pytest.raises(ValueError, match="matmat returned shape"):
        block_eigsh(lambda V: V[:, :1], 300, 2)


def test_large_n_operator():
    # n = 50000 through an implicit operator Q diag(lam) Q^T with a cluster
    # at the top and known eigenpairs.
    n, r = 50000, 40
    rng = np.random.default_rng(4)
    Q = np.linalg.qr(rng.standard_normal((n, r)))[0]
    lam = np.r_[10.0, 10.0, 9.9, 5.0, 4.0, np.linspace(3.0, 0.1, r - 5)]
    w, V = block_eigsh(lambda X: Q @ (lam[:, None] * (Q.T @ X)), n, 4, random_state=0)
    np.testing.assert_allclose(w, lam[:4], rtol=1e-8)
    assert np.max(linalg.subspace_angles(V, Q[:, :4])) < 1e-6


@pytest.mark.parametrize("make, k", [(lambda: _rbf(420), 5), (_repeated, 4), (_low_rank, 6)])
def test_starting_block(make, k):
    # Columns of A as the start (what KernelPCA passes), including fewer
    # columns than the block and duplicated ones: same eigenpairs as LAPACK.
    A = make()
    n = A.shape[0]
    w_ref, _ = _reference(A, k)
    for v0 in (A[:, :3], A[:, [0, 0, 1, 1]], A[:, :k + 5]):
        w, V = block_eigsh(lambda X: A @ X, n, k, random_state=0, v0=v0)
        np.testing.assert_allclose(w, w_ref, rtol=1e-8, atol=1e-8 * w_ref[0])
        assert np.linalg.norm(A @ V - V * w, axis=0).max() <= 1e-8 * w_ref[0]
    with pytest.raises(ValueError, match="v0 must have shape"):
        block_eigsh(lambda X: A @ X, n, k, v0=np.ones((n + 1, 2)))


def test_starting_block_wider_than_the_block():
    # A v0 wider than block_size is the first block whole (what KernelPCA
    # passes when its first product has room for more columns): the first
    # product takes all its columns, the next ones block_size, and the
    # eigenpairs are LAPACK's.  Wider than the basis less one block raises.
    A = _rbf(1200, gamma=0.02)
    n, k = A.shape[0], 5
    w_ref, _ = _reference(A, k)
    widths = []

    def matmat(X):
        widths.append(X.shape[1])
        return A @ X

    for b in (11, 24):
        widths.clear()
        w, V = block_eigsh(matmat, n, k, block_size=8, random_state=0, v0=A[:, :b])
        assert widths[0] == b and set(widths[1:]) == {8}, widths
        np.testing.assert_allclose(w, w_ref, rtol=1e-9)
        assert np.linalg.norm(A @ V - V * w, axis=0).max() <= 1e-9 * w_ref[0]
        np.testing.assert_allclose(V.T @ V, np.eye(k), atol=1e-12)
    basis = krylov_basis(n, 8, 5)
    assert basis[0].shape[1] == 48
    widths.clear()
    w, _ = block_eigsh(matmat, n, k, block_size=8, max_blocks=5, random_state=0,
                       v0=A[:, :40], basis=basis)
    assert widths[0] == 40
    np.testing.assert_allclose(w, w_ref, rtol=1e-9)
    with pytest.raises(ValueError, match="basis width less one block"):
        block_eigsh(matmat, n, k, block_size=8, max_blocks=5, v0=A[:, :41])


def test_basis_allocated_by_the_caller():
    # krylov_basis gives the arrays block_eigsh would allocate (KernelPCA
    # writes them before its Gram): the same bits with them as without, and
    # they hold the final basis.  Small n (the dense path) needs none.
    A = _rbf(420)
    kw = dict(block_size=8, max_blocks=5, random_state=0, tol=1e-12)
    basis = krylov_basis(420, 8, 5)
    assert basis[0].shape == basis[1].shape == (420, 48)
    assert not basis[0].any() and not basis[1].any()
    w, V = block_eigsh(lambda X: A @ X, 420, 5, basis=basis, **kw)
    w0, V0 = block_eigsh(lambda X: A @ X, 420, 5, **kw)
    np.testing.assert_array_equal(w, w0)
    np.testing.assert_array_equal(V, V0)
    assert basis[0].any()
    assert krylov_basis(150, 8) is None
    assert krylov_basis(420, 200) is None  # the basis would not be much smaller than n
    for bad in ((basis[0][:, :40], basis[1]), (basis[0], basis[1].astype(np.float32)),
                (basis[0], np.asfortranarray(basis[1]))):
        with pytest.raises(ValueError, match="basis"):
            block_eigsh(lambda X: A @ X, 420, 5, basis=bad, **kw)


def test_blas_held_for_the_whole_solve_when_matmat_needs_none():
    # matmat_blas=False: BLAS stays on one thread in the product too, the
    # caller's limit comes back afterwards, and the answer is bit for bit the
    # one of the default (the solver's own steps run on one thread either way).
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads():
        return {d["num_threads"] for d in threadpool_info() if d["user_api"] == "blas"}

    A = _rbf(420)
    seen = set()

    def product(V):
        # einsum's own loop: the same bits on any number of BLAS threads.
        return np.einsum("ij,jk->ik", A, V)

    def matmat(V):
        seen.update(blas_threads())
        return product(V)

    with threadpool_limits(limits=2, user_api="blas"):
        held = block_eigsh(matmat, 420, 3, random_state=0, matmat_blas=False)
        assert blas_threads() == {2}
        default = block_eigsh(product, 420, 3, random_state=0)
    assert seen == {1}
    np.testing.assert_array_equal(held[0], default[0])
    np.testing.assert_array_equal(held[1], default[1])


# -- randomized_eigsh: scikit-learn's randomized "module" eigensolver, re-implemented ----------

def _indefinite(n=300):
    # Largest moduli alternate in sign: -9, 8, -7, ... then a decaying tail.
    head = np.array([-9.0, 8.0, -7.0, 6.0, -5.0])
    return _spectrum_matrix(np.r_[head, 0.5 ** np.arange(n - 5)], seed=4)


@pytest.mark.parametrize("make, k", [
    (lambda: _rbf(420), 1), (lambda: _rbf(420), 7), (lambda: _rbf(257), 30),
    (lambda: _rbf(3), 2), (lambda: _rbf(1), 1), (lambda: _rbf(2), 2),
    (_indefinite, 4), (_low_rank, 6), (_slow_decay, 5),
    (lambda: np.random.default_rng(7).standard_normal((50, 50)), 3),  # not symmetric
])
@pytest.mark.parametrize("n_iter", ["auto", 0, 1, 2, 3, 6])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_randomized_eigsh_matches_sklearn(make, k, n_iter, dtype):
    A = np.ascontiguousarray(make(), dtype=dtype)
    before = A.copy()
    w, V = randomized_eigsh(A, k, n_iter=n_iter, random_state=0)
    w_sk, V_sk = _randomized_eigsh(A, k, n_iter=n_iter, random_state=0, selection="module")
    np.testing.assert_array_equal(A, before)  # only read
    assert w.shape == (k,) and V.shape == (A.shape[0], k)
    assert w.dtype == V.dtype == w_sk.dtype
    # Same algorithm, same random stream, same BLAS calls: equal to rounding.
    tol = 1e-12 if dtype == np.float64 else 1e-5
    scale = np.abs(w_sk).max()
    np.testing.assert_allclose(w, w_sk, rtol=tol, atol=tol * scale)
    np.testing.assert_allclose(V, V_sk, rtol=tol, atol=tol)


@pytest.mark.parametrize("make, k", [(lambda: _rbf(420), 5), (_indefinite, 4), (_low_rank, 4)])
def test_randomized_eigsh_finds_the_largest_modulus_eigenpairs(make, k):
    A = make()
    w, V = randomized_eigsh(A, k, n_iter=8, random_state=1)
    full_w, full_V = linalg.eigh(A)
    top = np.argsort(np.abs(full_w))[::-1][:k]
    np.testing.assert_allclose(w, full_w[top], rtol=1e-8, atol=1e-10 * np.abs(full_w).max())
    np.testing.assert_allclose(np.abs(np.sum(V * full_V[:, top], axis=0)), 1.0, atol=1e-7)
    np.testing.assert_allclose(A @ V, V * w, atol=1e-7 * np.abs(w).max())


def test_randomized_eigsh_random_state():
    A = _rbf(300)
    a = randomized_eigsh(A, 3, n_iter=1, random_state=np.random.RandomState(3))
    b = randomized_eigsh(A, 3, n_iter=1, random_state=3)
    c = randomized_eigsh(A, 3, n_iter=1, random_state=4)
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.array_equal(a[1], c[1])


def test_bookkeeping_on_one_blas_thread_products_on_the_callers():
    # The solver's QR, projections and Rayleigh-Ritz run on one BLAS thread
    # (threaded, they cost several times more at N=8000); the product keeps
    # the threads the caller allows, and they are restored afterwards.
    from threadpoolctl import threadpool_info, threadpool_limits

    def blas_threads():
        return {d["num_threads"] for d in threadpool_info() if d["user_api"] == "blas"}

    A = _rbf(420)
    seen = {"matmat": set(), "callback": set()}

    def matmat(V):
        seen["matmat"] |= blas_threads()
        return A @ V

    with threadpool_limits(limits=2, user_api="blas"):
        block_eigsh(matmat, 420, 3, random_state=0,
                    callback=lambda it, res: seen["callback"].update(blas_threads()))
        assert blas_threads() == {2}
    assert seen == {"matmat": {2}, "callback": {1}}


def _centred_identity(n):
    return np.eye(n) - 1.0 / n


@pytest.mark.parametrize("n, k", [(20, 1), (300, 1), (300, 5), (300, 40)])
def test_top_eigh_on_a_repeated_eigenvalue_returns_k_pairs(n, k):
    # syevr asked for the top k of this spectrum (1 with multiplicity n - 1)
    # returned fewer pairs than asked.
    from fastkern._eigen import top_eigh

    A = _centred_identity(n)
    w, v = top_eigh(A.copy(), k)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(A)[n - k:], atol=1e-12)
    np.testing.assert_allclose(A @ v, v * w, atol=1e-12)
    np.testing.assert_allclose(v.T @ v, np.eye(k), atol=1e-12)
    # In place, the destroyed matrix is rebuilt for the fallback.
    w2, v2 = top_eigh(np.asfortranarray(A), k, overwrite_a=True,
                      rebuild=lambda: np.asfortranarray(A))
    np.testing.assert_allclose(w2, w, atol=1e-12)
    np.testing.assert_allclose(A @ v2, v2 * w2, atol=1e-12)


@pytest.mark.parametrize("k", [1, 5])
def test_top_eigh_gives_the_same_pairs_of_a_repeated_eigenvalue_every_call(k, monkeypatch):
    # Any orthonormal basis of the eigenvalue 1's space is an answer; the
    # one returned must not change from call to call (a KernelPCA fit and its
    # refit).  syevr is made to answer short, so that ARPACK's fallback, whose
    # new directions after an invariant subspace came from a fresh generator
    # each call, runs on every CPU (syevr's own answer is luck).
    if not _eigen._EIGSH_TAKES_RNG:
        pytest.skip("this scipy's eigsh has no rng: ARPACK draws from its own generator")
    syevr = _eigen._inchol.syevr
    monkeypatch.setattr(_eigen._inchol, "syevr",
                        lambda *args: tuple(x[..., :0] for x in syevr(*args)))
    A = _centred_identity(300)
    first = _eigen.top_eigh(A, k)
    for _ in range(3):
        w, v = _eigen.top_eigh(A, k)
        np.testing.assert_array_equal(w, first[0])
        np.testing.assert_array_equal(v, first[1])
    np.testing.assert_allclose(A @ v, v, atol=1e-12)


def test_seeded_eigsh_draws_its_new_directions_from_rng():
    if not _eigen._EIGSH_TAKES_RNG:
        pytest.skip("this scipy's eigsh has no rng: ARPACK draws from its own generator")
    # The start vector is an eigenvector, exactly: every further basis vector
    # is one of rng's.
    A = np.eye(200)
    v0 = A[0]
    runs = {seed: [_eigen.seeded_eigsh(A, 4, which="LA", v0=v0, ncv=30, rng=seed)[1]
                   for _ in range(2)] for seed in (0, 1)}
    for seed, (a, b) in runs.items():
        np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(A @ a, a, atol=1e-12)
    # Another seed, another basis of the repeated eigenvalue's space.
    assert np.abs(runs[0][0] - runs[1][0]).max() > 1e-3


@pytest.mark.parametrize("n", [20, 150, 300, 3000])
@pytest.mark.parametrize("k", [1, 3, 12])
def test_block_eigsh_on_exactly_repeated_and_zero_residual_spectra(n, k):
    # The centred identity: every start block is already invariant, its
    # residuals are exactly zero, and the top eigenvalue's multiplicity
    # exceeds any block.
    A = _centred_identity(n)
    w, v = block_eigsh(lambda V: A @ V, n, k, random_state=0)
    np.testing.assert_allclose(w, np.ones(k), atol=1e-12)
    np.testing.assert_allclose(v.T @ v, np.eye(k), atol=1e-10)
    np.testing.assert_allclose(A @ v, v * w, atol=1e-10)


@pytest.mark.parametrize("n", [150, 600])
def test_block_eigsh_on_a_rank_below_the_block(n):
    # Rank 2, top eigenvalue repeated: the second block's residuals vanish.
    rng = np.random.default_rng(5)
    Q = np.linalg.qr(rng.standard_normal((n, 2)))[0]
    A = 3.0 * Q @ Q.T
    k = 4
    w, v = block_eigsh(lambda V: A @ V, n, k, random_state=0)
    np.testing.assert_allclose(w, np.linalg.eigvalsh(A)[::-1][:k], atol=1e-10)
    np.testing.assert_allclose(v.T @ v, np.eye(k), atol=1e-10)
    np.testing.assert_allclose(A @ v, v * w, atol=1e-10)


@pytest.mark.parametrize("fallback", ["arpack", "syev", "syevd"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("lower", [True, False])
def test_top_eigh_fallback_by_each_driver(fallback, dtype, lower, monkeypatch):
    """syevr returns too few of a clustered top; ARPACK gives them all, and syev or
    syevd (by size) where ARPACK does not converge.  Only the triangle named is
    read: the other one holds garbage."""
    from scipy.sparse.linalg import ArpackNoConvergence

    from fastkern import _eigen

    syevr = _eigen._inchol.syevr

    def short_answer(*args, **kwargs):
        # Which layouts and dtypes syevr fails on is luck (it returned all 4
        # pairs for one of these four): every case is made to fall back.
        w, v = syevr(*args, **kwargs)
        return w[:1], v[:, :1]

    monkeypatch.setattr(_eigen._inchol, "syevr", short_answer)
    if fallback != "arpack":
        def no_convergence(*args, **kwargs):
            raise ArpackNoConvergence("no convergence", np.empty(0), np.empty((0, 0)))

        monkeypatch.setattr(_eigen, "eigsh", no_convergence)
        monkeypatch.setattr(_eigen, "_SYEVD_MAX_N", 10**6 if fallback == "syevd" else 0)
    n, k = 120, 4
    H = (np.eye(n) - 1.0 / n).astype(dtype)   # eigenvalue 1 (n - 1 times) and 0
    M = H.copy()
    M[np.triu_indices(n, 1) if lower else np.tril_indices(n, -1)] = 7.0
    w, v = _eigen.top_eigh(M, k, lower=lower)
    assert w.dtype == v.dtype == dtype and v.shape == (n, k)
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(w, np.ones(k), rtol=tol)
    np.testing.assert_allclose(H @ v, v, atol=tol)
    np.testing.assert_allclose(v.T @ v, np.eye(k), atol=tol)


def _stream(rng):
    """Draws of every kind the solvers make, in order."""
    return (rng.uniform(-1, 1, 7), rng.randint(np.iinfo(np.int32).max),
            rng.choice(50, size=5, replace=False), rng.standard_normal(3))


def _assert_same_stream(a, b):
    for x, y in zip(a, b):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("seed", [0, 7, np.int64(12345), np.uint32(2 ** 32 - 1)])
def test_seeded_random_state_is_randomstate_of_the_seed(seed):
    for _ in range(2):  # the second block re-seeds the object the first returned
        with _validation.seeded_random_state(seed) as rng:
            _assert_same_stream(_stream(rng), _stream(np.random.RandomState(seed)))


def test_seeded_random_state_nested_blocks_and_errors_keep_each_stream():
    reference = np.random.RandomState(3)
    with _validation.seeded_random_state(3) as outer:
        _assert_same_stream(_stream(outer), _stream(reference))
        with _validation.seeded_random_state(4) as inner:
            assert inner is not outer
            _assert_same_stream(_stream(inner), _stream(np.random.RandomState(4)))
        # The outer stream goes on where it was, as RandomState(3)'s would.
        _assert_same_stream(_stream(outer), _stream(reference))
    with pytest.raises(RuntimeError):
        with _validation.seeded_random_state(5) as rng:
            rng.uniform()
            raise RuntimeError("a solve failed")
    with _validation.seeded_random_state(5) as rng:
        _assert_same_stream(_stream(rng), _stream(np.random.RandomState(5)))
    with pytest.raises(ValueError, match="Seed must be between 0 and 2"):
        with _validation.seeded_random_state(-1):
            pass


def test_seeded_random_state_passes_other_values_to_check_random_state():
    mine = np.random.RandomState(1)
    with _validation.seeded_random_state(mine) as rng:
        assert rng is mine
    with _validation.seeded_random_state(None) as rng:
        assert rng is np.random.mtrand._rand
    with pytest.raises(ValueError, match="cannot be used to seed"):
        with _validation.seeded_random_state("seven"):
            pass


def test_seeded_random_state_threads_draw_their_own_streams():
    import threading

    barrier = threading.Barrier(4)
    results, errors = {}, []

    def draw(seed):
        try:
            with _validation.seeded_random_state(seed) as rng:
                barrier.wait(timeout=30)  # every thread holds its object at once
                results[seed] = [rng.uniform(-1, 1, 5) for _ in range(50)]
        except Exception as exc:  # reported below, in the main thread
            errors.append(exc)

    threads = [threading.Thread(target=draw, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and not any(t.is_alive() for t in threads)
    for seed, draws in results.items():
        reference = np.random.RandomState(seed)
        for x in draws:
            np.testing.assert_array_equal(x, reference.uniform(-1, 1, 5))


def test_every_seeded_draw_is_the_randomstate_of_the_seed():
    # Each estimator that re-seeds a pooled RandomState for an int seed gives
    # the bits of the same fit given RandomState(seed) itself.
    import scipy.sparse as sp

    from fastkern import KernelSIR, Nystroem, estimate_gamma
    from fastkern._gamma import median_gamma

    rng = np.random.default_rng(8)
    X = rng.standard_normal((300, 5))
    y = X[:, 0] + 0.1 * rng.standard_normal(300)
    for seed in (0, 11):
        for kwargs in ({"method": "median", "n_pairs": 500}, {"method": "sigest"}):
            a = estimate_gamma(X, random_state=seed, **kwargs)
            b = estimate_gamma(X, random_state=np.random.RandomState(seed), **kwargs)
            np.testing.assert_array_equal(a.quantiles, b.quantiles)
        ours = Nystroem(n_components=20, random_state=seed).fit(X)
        ref = Nystroem(n_components=20, random_state=np.random.RandomState(seed)).fit(X)
        np.testing.assert_array_equal(ours.component_indices_, ref.component_indices_)
        ours = KernelSIR(n_basis=40, random_state=seed, n_threads=1).fit(X, y)
        ref = KernelSIR(n_basis=40, random_state=np.random.RandomState(seed), n_threads=1).fit(X, y)
        np.testing.assert_array_equal(ours.transform(X), ref.transform(X))
    # More pairs than the median heuristic draws; sparse rows' distances
    # round differently, and another draw would move the median by ~1e-3.
    big = rng.standard_normal((1500, 3))
    assert median_gamma(sp.csr_matrix(big)) == pytest.approx(
        estimate_gamma(big, random_state=np.random.RandomState(0)).gamma, rel=1e-12)
