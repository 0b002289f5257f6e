"""Matrix-free and Nystroem KernelPCA, the tile product and the Nystroem map."""
import logging
import tracemalloc

import numpy as np
import pytest
import scipy.linalg
import scipy.sparse.linalg
from sklearn.kernel_approximation import Nystroem as SkNystroem
from sklearn.metrics.pairwise import pairwise_kernels
from sklearn.preprocessing import KernelCenterer

import fastkern.kernels as fk
from fastkern._kernel_api import KernelSpec
from fastkern.decomposition import KernelPCA
from fastkern._validation import parse_memory_budget
from fastkern.large_n import KernelOperator
from fastkern.nystroem import Nystroem

RNG = np.random.default_rng(1234)


def _sk_gram(X, Y=None, kernel="rbf", **kw):
    """scikit-learn's Gram in float64 (the oracle)."""
    X = np.asarray(X, dtype=np.float64)
    Y = None if Y is None else np.asarray(Y, dtype=np.float64)
    return pairwise_kernels(X, Y, metric=kernel, **kw)


def _dense_reference(X, Xt, k, kernel="rbf", **kw):
    """Top-k eigenpairs of the centred Gram by scipy.linalg.eigh, and test projections."""
    K = _sk_gram(X, kernel=kernel, **kw)
    centerer = KernelCenterer().fit(K)
    Kc = centerer.transform(K)
    n = K.shape[0]
    w, U = scipy.linalg.eigh(Kc, subset_by_index=(n - k, n - 1))
    w, U = w[::-1], U[:, ::-1]
    P = centerer.transform(_sk_gram(Xt, X, kernel=kernel, **kw)) @ (U / np.sqrt(w))
    return w, U, P


def _assert_product(actual, K, V, rtol=1e-12):
    """actual == K @ V up to rounding, judged against |K| @ |V| (sums may cancel)."""
    np.testing.assert_allclose(actual, K @ V, rtol=0,
                               atol=rtol * (np.abs(K) @ np.abs(V)).max())


def _same_up_to_sign(A, B):
    signs = np.sign(np.sum(A * B, axis=0))
    return A * signs, B


def _data(n, d, dtype=np.float64, scale=1.0):
    return (scale * RNG.standard_normal((n, d))).astype(dtype)


# -- the tile product --------------------------------------------------------

KERNELS = [
    ("rbf", {"gamma": 0.2}),
    ("laplacian", {"gamma": 0.1}),
    ("linear", {}),
    ("poly", {"gamma": 0.1, "degree": 3, "coef0": 1.0}),
    ("poly", {"gamma": 0.01, "degree": 2.5, "coef0": 2.0}),  # pow() path, positive base
    ("sigmoid", {"gamma": 0.01, "coef0": 0.5}),
]


@pytest.mark.parametrize("kernel,kw", KERNELS)
# RBF in float64: the direct path, the dot tiles, BLAS; in float32: direct, dot tiles.
@pytest.mark.parametrize("d", [5, 40, 70])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_kernel_product_matches_numpy(kernel, kw, d, dtype):
    X = _data(601, d, dtype)  # 601 = 2 full tiles + a ragged one
    A = _data(77, d, dtype)
    V = RNG.standard_normal((601, 3))
    op = KernelOperator(X, kernel=kernel, n_threads=2, **kw)
    if kernel == "rbf":
        assert (op.direct, op.Xct.shape) == (
            (True, (0, 0)) if d == 5 else (False, (d, 601)) if d == 40 else (False, (0, 0)))
    Xr = X.astype(np.float64)
    K = _sk_gram(Xr, kernel=kernel, **kw)
    Kt = _sk_gram(A, Xr, kernel=kernel, **kw)
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    _assert_product(op.matmat(V), K, V, rtol)
    _assert_product(op.matmat(V, A), Kt, V, rtol)
    if dtype == np.float64:
        # Half the tiles, each serving two blocks of the product.
        assert op.has_symmetric_product
        _assert_product(op.symmetric_matmat(V), K, V, rtol)
        assert op.symmetric_matmat(V[:, :0]).shape == (601, 0)
    else:
        assert not op.has_symmetric_product
        with pytest.raises(ValueError, match="symmetric product needs float64"):
            op.symmetric_matmat(V)
    assert op.matmat(V[:, :0], A).shape == (77, 0)


@pytest.mark.parametrize("n", [1, 2, 257, 601])
@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_symmetric_product_repeats_while_threads_are_disturbed(n, n_threads):
    # The tiles go to 2 n_threads slots, dealt to the threads dynamically: a
    # thread slowed by other work takes fewer slots, and the slots land on
    # other threads from run to run.  Each slot sums its tiles in a fixed
    # order, so the result must not change, bit for bit, while a second
    # Python thread competes for the cores.
    import threading

    # Its own generators: the module's RNG feeds the tests after this one.
    rng = np.random.default_rng(10 * n + n_threads)
    X = rng.standard_normal((n, 5))
    V = rng.standard_normal((n, 4))
    op = KernelOperator(X, kernel="rbf", gamma=0.2, n_threads=n_threads)
    first = op.symmetric_matmat(V)
    _assert_product(first, _sk_gram(X, kernel="rbf", gamma=0.2), V, 1e-12)
    stop = threading.Event()

    def compete():
        noise = np.random.default_rng(0).standard_normal(20000)
        while not stop.is_set():
            np.sort(noise)  # releases the GIL

    rival = threading.Thread(target=compete)
    rival.start()
    try:
        for _ in range(5):
            np.testing.assert_array_equal(op.symmetric_matmat(V), first)
    finally:
        stop.set()
        rival.join(timeout=30)
    assert not rival.is_alive()


def test_kernel_product_other_kernels_and_threads():
    X = _data(300, 4)
    V = RNG.standard_normal((300, 2))
    K = _sk_gram(X, kernel="rbf", gamma=0.3) + X @ X.T
    composed = KernelOperator(X, kernel=fk.RBF(0.3) + fk.Linear(), memory_budget=8 * 300 * 7)
    _assert_product(composed.matmat(V), K, V)
    small = X[:60]
    call = KernelOperator(small, kernel=lambda x, y: np.exp(-0.3 * np.sum((x - y) ** 2)))
    _assert_product(call.matmat(V[:60]), _sk_gram(small, gamma=0.3), V[:60])
    obj = KernelOperator(X, kernel=fk.Laplacian(0.5), n_threads=1)
    _assert_product(obj.matmat(V), _sk_gram(X, kernel="laplacian", gamma=0.5), V)
    one, two = (KernelOperator(X, kernel="rbf", n_threads=t).matmat(V) for t in (1, 2))
    np.testing.assert_array_equal(one, two)  # each row block is owned by one thread


def test_kernel_times_only_where_the_tile_loops_have_the_kernel():
    from fastkern._operator import kernel_times

    X, A = _data(40, 3), _data(7, 3)
    V = RNG.standard_normal(40)
    rbf = KernelSpec.from_params("rbf", gamma=0.5)
    _assert_product(kernel_times(rbf, A, X, V), _sk_gram(A, X, gamma=0.5), V)
    # float32 on both sides: float32 tiles, a float64 product.
    KV32 = kernel_times(rbf, A.astype(np.float32), X.astype(np.float32), V)
    assert KV32.dtype == np.float64
    _assert_product(KV32, _sk_gram(A, X, gamma=0.5), V, rtol=1e-5)
    assert kernel_times(rbf, A, X, V[:, None]).shape == (7, 1)
    for spec in (KernelSpec.from_params("cosine"), KernelSpec.from_params("precomputed"),
                 KernelSpec.from_params(fk.RBF(0.5) + fk.Linear()),
                 KernelSpec.from_params(lambda x, y: float(x @ y))):
        assert kernel_times(spec, A, X, V) is None
    import scipy.sparse
    assert kernel_times(rbf, scipy.sparse.csr_matrix(A), X, V) is None
    assert kernel_times(rbf, np.array(["ab", "c"], dtype=object), X, V) is None
    assert kernel_times(rbf, A, X, np.empty((40, 0))) is None


def _cross_gram_users():
    """(name, fitted estimator, method) of every method that multiplies k(X, X_fit_)."""
    import fastkern

    rng = np.random.default_rng(11)
    X = rng.standard_normal((1000, 5))
    y = rng.standard_normal(1000)
    labels = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0)
    kpca = KernelPCA(3, kernel="rbf", eigen_solver="arpack", random_state=0,
                     fit_inverse_transform=True).fit(X)
    return [
        ("KernelRidge.predict", fastkern.KernelRidge(kernel="rbf").fit(X, y), "predict"),
        ("KernelPCA.transform", kpca, "transform"),
        ("KernelPCA.inverse_transform", kpca, "inverse_transform"),
        ("KernelSIR.transform", fastkern.KernelSIR(2, kernel="rbf").fit(X, y), "transform"),
        ("KernelFDA.transform", fastkern.KernelFDA(kernel="rbf").fit(X, labels), "transform"),
        ("KernelCCA.transform", fastkern.KernelCCA(2, kernel="rbf").fit(X, X[:, ::-1] ** 2),
         "transform"),
    ]


def test_transforms_hold_no_cross_gram_and_ignore_the_thread_count():
    from fastkern._testing import tracemalloc_peak

    Xt = np.random.default_rng(12).standard_normal((4000, 5))
    for name, est, method in _cross_gram_users():
        rows = Xt if method != "inverse_transform" else Xt[:, :3]
        est.set_params(n_threads=1)
        one = getattr(est, method)(rows)
        est.set_params(n_threads=3)
        three, peak = tracemalloc_peak(lambda: getattr(est, method)(rows))
        np.testing.assert_array_equal(three, one, err_msg=name)
        # k(Xt, X_fit_) would be 32 MB; the tiles are 0.5 MB per thread.
        assert peak < 0.1 * 4000 * 1000 * 8, (name, peak)


def test_rbf_diagonal_is_exact_on_blas_path():
    X = _data(260, 40, scale=30.0)  # large norms: cancellation in ||x||^2 - 2 x.y + ||y||^2
    op = KernelOperator(X, kernel="rbf", gamma=1e-4)
    e = np.zeros((260, 1))
    e[3] = 1.0
    assert op.matmat(e)[3, 0] == 1.0


# -- matrix-free KernelPCA ---------------------------------------------------

@pytest.mark.parametrize("kernel,kw,d", [("rbf", {"gamma": 0.15}, 6),
                                         ("rbf", {}, 37),
                                         ("laplacian", {"gamma": 0.2}, 5),
                                         ("poly", {"gamma": 0.1, "degree": 2, "coef0": 1.0}, 9)])
def test_matrix_free_matches_dense_eigh(kernel, kw, d):
    n, k = 801, 5
    X, Xt = _data(n, d), _data(41, d)
    w, U, P = _dense_reference(X, Xt, k, kernel, **({"gamma": 1 / d} | kw if kernel != "poly"
                                                      else kw))
    est = KernelPCA(k, kernel=kernel, eigen_solver="matrix-free", random_state=0, **kw)
    Z = est.fit_transform(X)
    assert est._fit_solver == "matrix-free"
    np.testing.assert_allclose(est.eigenvalues_, w, rtol=1e-8)
    U_est, U_ref = _same_up_to_sign(est.eigenvectors_, U)
    np.testing.assert_allclose(U_est, U_ref, atol=1e-6)
    np.testing.assert_allclose(*_same_up_to_sign(Z, U * np.sqrt(w)), atol=1e-6)
    np.testing.assert_allclose(*_same_up_to_sign(est.transform(Xt), P), atol=1e-6)
    # Unit columns; training points project onto fit_transform.
    np.testing.assert_allclose(np.linalg.norm(est.eigenvectors_, axis=0), 1.0, rtol=1e-10)
    np.testing.assert_allclose(est.transform(X), Z, atol=1e-6)


def test_matrix_free_same_signs_as_dense_solver():
    X, Xt = _data(450, 3), _data(20, 3)
    dense = KernelPCA(4, kernel="rbf", gamma=0.5, eigen_solver="dense").fit(X)
    mf = KernelPCA(4, kernel="rbf", gamma=0.5, eigen_solver="matrix-free").fit(X)
    np.testing.assert_allclose(mf.eigenvectors_, dense.eigenvectors_, atol=1e-7)
    np.testing.assert_allclose(mf.transform(Xt), dense.transform(Xt), atol=1e-7)
    assert mf.gamma_ == dense.gamma_ and mf.n_features_in_ == 3
    np.testing.assert_array_equal(mf.X_fit_, X)


def test_matrix_free_n5000_against_arpack_on_dense_gram():
    # scipy.linalg.eigh at N=5000 takes minutes on the shared machine; ARPACK
    # on the explicitly centred dense Gram is the independent oracle here.
    n, k = 5000, 5
    X, Xt = _data(n, 8), _data(30, 8)
    K = _sk_gram(X, gamma=0.125)
    centerer = KernelCenterer().fit(K)
    K = centerer.transform(K)
    w, U = scipy.sparse.linalg.eigsh(K, k, which="LA", tol=1e-14,
                                     v0=np.ones(n) / np.sqrt(n))
    w, U = w[::-1], U[:, ::-1]
    P = centerer.transform(_sk_gram(Xt, X, gamma=0.125)) @ (U / np.sqrt(w))
    del K
    est = KernelPCA(k, kernel="rbf", eigen_solver="matrix-free", random_state=0).fit(X)
    np.testing.assert_allclose(est.eigenvalues_, w, rtol=1e-8)
    np.testing.assert_allclose(*_same_up_to_sign(est.transform(Xt), P), atol=1e-6)


def test_matrix_free_float32_and_layouts():
    X64 = _data(900, 5)
    ref = KernelPCA(3, kernel="rbf", gamma=0.2, eigen_solver="matrix-free").fit(X64)
    for X in (X64.astype(np.float32), np.asfortranarray(X64), np.repeat(X64, 2, axis=1)[:, ::2]):
        est = KernelPCA(3, kernel="rbf", gamma=0.2, eigen_solver="matrix-free")
        Z = est.fit_transform(X)
        assert Z.dtype == X.dtype and est.eigenvalues_.dtype == X.dtype
        assert est.transform(X[:7]).dtype == X.dtype
        rtol = 1e-5 if X.dtype == np.float32 else 1e-10
        np.testing.assert_allclose(est.eigenvalues_, ref.eigenvalues_, rtol=rtol)


def test_matrix_free_kernel_objects_and_precomputed():
    X, Xt = _data(500, 4), _data(9, 4)
    w, U, P = _dense_reference(X, Xt, 3, "rbf", gamma=0.3)
    # A composed kernel object takes the kernel_gram row-block path.
    obj = KernelPCA(3, kernel=0.5 * fk.RBF(0.3) + 0.5 * fk.RBF(0.3),
                    eigen_solver="matrix-free").fit(X)
    np.testing.assert_allclose(obj.eigenvalues_, w, rtol=1e-8)
    np.testing.assert_allclose(*_same_up_to_sign(obj.transform(Xt), P), atol=1e-6)
    K, Kt = _sk_gram(X, gamma=0.3), _sk_gram(Xt, X, gamma=0.3)
    pre = KernelPCA(3, kernel="precomputed", eigen_solver="matrix-free").fit(K)
    np.testing.assert_allclose(pre.eigenvalues_, w, rtol=1e-8)
    np.testing.assert_allclose(*_same_up_to_sign(pre.transform(Kt), P), atol=1e-6)


def test_auto_switches_to_matrix_free_over_budget():
    X = _data(400, 3)
    est = KernelPCA(2, kernel="rbf", eigen_solver="auto", memory_budget=400 * 400 * 8 - 1).fit(X)
    assert est._fit_solver == "matrix-free"


def test_matrix_free_memory_is_O_N_not_N_squared():
    n = 6000
    X = _data(n, 8)
    est = KernelPCA(3, kernel="rbf", eigen_solver="matrix-free", random_state=0)
    tracemalloc.start()
    est.fit(X)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # The Gram would be n*n*8 = 288 MB; the solver keeps O(n b) vectors
    # (its Krylov basis has at most ~300 columns, stored with A V: 29 MB).
    assert peak < 0.15 * n * n * 8, peak


def test_verbose_reports_residuals_and_pass_times(caplog, capsys):
    X = _data(600, 3)
    with caplog.at_level(logging.INFO, logger="fastkern"):
        KernelPCA(2, kernel="rbf", eigen_solver="matrix-free", verbose=True).fit(X)
    text = caplog.text
    assert "iteration 1: max residual" in text and "last pass" in text
    assert "passes over K" in text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="fastkern"):
        KernelPCA(2, kernel="rbf", eigen_solver="matrix-free", verbose=False).fit(X)
    assert "residual" not in caplog.text


def test_matrix_free_bad_input():
    X = _data(300, 3)
    with pytest.raises(ValueError, match="memory_budget.*too small for one 256 x 256"):
        KernelPCA(2, eigen_solver="matrix-free", kernel="rbf", memory_budget=1000).fit(X)
    with pytest.raises(ValueError, match="memory_budget.*too small for one row"):
        KernelPCA(2, eigen_solver="matrix-free", kernel=fk.RBF() + fk.Linear(),
                  memory_budget=100).fit(X)
    Xn = X.copy()
    Xn[17, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        KernelPCA(2, eigen_solver="matrix-free", kernel="rbf").fit(Xn)
    # None keeps every component: 299 eigenvectors of 300 samples, 2.2 MB.
    with pytest.raises(ValueError, match="n_components=None keeps every component.*"
                                         "more than the memory budget"):
        KernelPCA(eigen_solver="matrix-free", kernel="rbf", memory_budget="2MB").fit(X)
    with pytest.raises(ValueError, match="n_components=300 must be in"):
        KernelPCA(300, eigen_solver="matrix-free", kernel="rbf").fit(X)
    with pytest.raises(ValueError, match="kernel matrix of X contains NaN or infinity"):
        KernelPCA(2, eigen_solver="matrix-free", kernel="exponential", gamma=1e4).fit(X * 10)
    est = KernelPCA(2, eigen_solver="matrix-free", kernel="rbf").fit(X)
    with pytest.raises(ValueError, match="features"):
        est.transform(X[:, :2])
    Xt = X[:5].copy()
    Xt[0, 0] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        est.transform(Xt)


def test_parse_memory_budget():
    assert parse_memory_budget(None) is None
    assert parse_memory_budget(1e6) == 1_000_000
    assert parse_memory_budget("2GB") == 2 * 10**9
    assert parse_memory_budget("512 MiB") == 512 * 2**20
    with pytest.raises(ValueError, match="memory_budget"):
        parse_memory_budget("lots")
    with pytest.raises(ValueError, match="memory_budget"):
        parse_memory_budget(0)


# -- Nystroem ----------------------------------------------------------------

@pytest.mark.parametrize("kw", [{"kernel": "rbf"}, {"kernel": "rbf", "gamma": 0.5},
                                {"kernel": "laplacian", "gamma": 0.3},
                                {"kernel": "poly", "degree": 2, "coef0": 0.5},
                                {"kernel": "sigmoid", "gamma": 0.05, "coef0": 0.3},
                                {"kernel": "linear"}])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_nystroem_matches_sklearn(kw, dtype):
    # The linear kernel on 9 features would make the 40 x 40 basis Gram of
    # rank 9: its other 31 eigenvalues are rounding noise, which the pseudo-
    # inverse square root scales up, so the transforms agree only to that
    # noise (float32: 0.006 of 1.9, on a Zen 5 host; below the tolerance on
    # the Zen 2 host before).  50 features keep it of full rank.
    d = 50 if kw["kernel"] == "linear" else 9
    X, Y = _data(301, d, dtype), _data(31, d, dtype)
    ours = Nystroem(n_components=40, random_state=3, **kw).fit(X)
    ref = SkNystroem(n_components=40, random_state=3, **kw).fit(X)
    np.testing.assert_array_equal(ours.component_indices_, ref.component_indices_)
    np.testing.assert_array_equal(ours.components_, ref.components_)
    rtol = 1e-9 if dtype == np.float64 else 2e-3
    out, expected = ours.transform(Y), ref.transform(Y)
    assert out.dtype == dtype  # fastkern's rule (sklearn's laplacian upcasts float32)
    np.testing.assert_allclose(out, expected, rtol=rtol, atol=rtol * np.abs(expected).max())
    if kw["kernel"] == "rbf" and dtype == np.float64:
        np.testing.assert_allclose(ours.normalization_, ref.normalization_, rtol=0,
                                   atol=1e-9 * np.abs(ref.normalization_).max())


def test_nystroem_callable_kernel_object_and_warning():
    X = _data(50, 3)
    f = lambda x, y: np.exp(-0.5 * np.sum((x - y) ** 2))  # noqa: E731
    a = Nystroem(f, n_components=10, random_state=0).fit(X)
    b = Nystroem(fk.RBF(0.5), n_components=10, random_state=0).fit(X)
    np.testing.assert_allclose(a.transform(X), b.transform(X), rtol=1e-9, atol=1e-12)
    with pytest.warns(UserWarning, match="n_components > n_samples"):
        c = Nystroem(n_components=80, random_state=0).fit(X)
    assert c.components_.shape == (50, 3)
    assert Nystroem().get_feature_names_out  # sklearn mixin present
    with pytest.raises(ValueError, match="gamma, coef0 or degree"):
        Nystroem(f, gamma=1.0).fit(X)
    with pytest.raises(ValueError, match="NaN"):
        Nystroem().fit(np.full((4, 2), np.nan))
    with pytest.raises(ValueError, match="features"):
        a.transform(X[:, :2])


def test_nystrom_solver_error_vs_exact():
    n, k = 1000, 5
    X = _data(n, 4)
    exact = KernelPCA(k, kernel="rbf", gamma=0.25, eigen_solver="matrix-free").fit(X)
    errors = []
    for m in (40, 120, 400):
        est = KernelPCA(k, kernel="rbf", gamma=0.25, eigen_solver="nystrom", n_landmarks=m,
                        random_state=0)
        Z = est.fit_transform(X)
        assert est._fit_solver == "nystrom" and est.eigenvectors_.shape == (n, k)
        np.testing.assert_allclose(est.transform(X), Z, atol=1e-8 * np.abs(Z).max())
        errors.append(np.max(np.abs(est.eigenvalues_ - exact.eigenvalues_)
                             / exact.eigenvalues_))
    assert errors[0] > errors[1] > errors[2]
    assert errors[1] < 0.05 and errors[2] < 1e-3, errors


def test_nystrom_with_all_landmarks_is_exact():
    n, k = 400, 4
    X, Xt = _data(n, 3), _data(25, 3)
    exact = KernelPCA(k, kernel="rbf", gamma=0.25, eigen_solver="matrix-free").fit(X)
    full = KernelPCA(k, kernel="rbf", gamma=0.25, eigen_solver="nystrom", n_landmarks=n,
                     random_state=0).fit(X)
    np.testing.assert_allclose(full.eigenvalues_, exact.eigenvalues_, rtol=1e-7)
    np.testing.assert_allclose(full.eigenvectors_, exact.eigenvectors_, atol=1e-6)
    np.testing.assert_allclose(full.transform(Xt), exact.transform(Xt), atol=1e-5)


def test_nystrom_bad_input():
    X = _data(100, 3)
    with pytest.raises(ValueError, match="n_landmarks=200"):
        KernelPCA(2, kernel="rbf", eigen_solver="nystrom", n_landmarks=200).fit(X)
    with pytest.raises(ValueError, match="n_components=20 must be in"):
        KernelPCA(20, kernel="rbf", eigen_solver="nystrom", n_landmarks=10).fit(X)
    with pytest.raises(ValueError, match="memory_budget"):
        KernelPCA(2, kernel="rbf", eigen_solver="nystrom", n_landmarks=50,
                  memory_budget=1000).fit(X)
    with pytest.raises(ValueError, match="precomputed"):
        KernelPCA(2, kernel="precomputed", eigen_solver="nystrom").fit(X @ X.T)


def test_matrix_free_fit_validates():
    est = KernelPCA(2, kernel="rbf", eigen_solver="matrix-free")
    with pytest.raises(ValueError, match="2D array"):
        est.fit(np.ones(5))
    with pytest.raises(ValueError, match="at least 2 samples"):
        est.fit(np.ones((1, 3)))


@pytest.mark.parametrize("kernel", ["rbf", fk.RBF(0.1) + fk.Linear()])
def test_progress_reports_every_pass_from_0_to_1(kernel):
    """Each pass over K (the tile loop, or the row blocks of a composed kernel) is reported."""
    from fastkern.large_n import reporting_progress

    X = np.random.default_rng(3).normal(size=(1100, 4))
    calls = []
    # One thread: the transform's 1100 rows are 5 row blocks in groups of 4, so
    # its pass reports a fraction between 0 and 1.
    est = KernelPCA(n_components=3, kernel=kernel, gamma=0.1, eigen_solver="matrix-free",
                    tol=1e-8, n_threads=1)
    with reporting_progress(lambda label, fraction: calls.append((label, fraction))):
        est.fit(X)
        est.transform(X)
    labels = list(dict.fromkeys(label for label, _ in calls))
    # The first pass also gives the row means (a column of ones in its block).
    assert labels[0] == "pass 1" and labels[-1] == "transform"
    assert labels[1].startswith("pass 2, largest residual ")
    assert "largest residual" in labels[-2]
    for label in labels:
        fractions = [f for lab, f in calls if lab == label]
        assert fractions[0] == 0 and fractions[-1] == 1
        assert np.all(np.diff(fractions) > 0)
    assert len([f for lab, f in calls if lab == "transform"]) > 2
    # Without a sink nothing is reported, and the results are the same.
    again = KernelPCA(n_components=3, kernel=kernel, gamma=0.1, eigen_solver="matrix-free",
                      tol=1e-8, n_threads=1).fit(X)
    np.testing.assert_allclose(again.eigenvalues_, est.eigenvalues_)


@pytest.mark.parametrize("gamma", ["scale", "median"])
def test_gamma_strings_resolved_once_on_the_training_data(gamma):
    from fastkern._kernel_api import resolve_gamma

    X = np.random.default_rng(8).normal(size=(300, 3)) * 5
    value = resolve_gamma(gamma, X, "rbf")
    dense = KernelPCA(3, kernel="rbf", gamma=value, eigen_solver="dense").fit(X)
    for solver in ("matrix-free", "nystrom"):
        est = KernelPCA(3, kernel="rbf", gamma=gamma, eigen_solver=solver, n_landmarks=300,
                        random_state=0, tol=1e-12).fit(X)
        assert est.gamma_ == value
        np.testing.assert_allclose(est.eigenvalues_, dense.eigenvalues_, rtol=1e-7)
        # transform uses the training value, not one re-estimated on the new rows
        np.testing.assert_allclose(np.abs(est.transform(X[:9] + 3)),
                                   np.abs(dense.transform(X[:9] + 3)), rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_in_process_products_use_half_the_tiles_for_float64(dtype, monkeypatch):
    """float64 products evaluate only the tiles on and above the diagonal; float32 all of them."""
    from fastkern import _matfree, large_n

    X = _data(530, 3, dtype)
    calls = []
    for name in ("kernel_product", "symmetric_kernel_product"):
        original = getattr(_matfree, name)
        monkeypatch.setattr(_matfree, name, lambda *a, _f=original, _n=name, **k: (
            calls.append(_n), _f(*a, **k))[1])
    spec = KernelSpec.from_params("rbf", gamma=0.3, X=X)
    matmat = large_n.in_process_products(X, spec, n_threads=2)
    V = RNG.standard_normal((530, 4))
    _assert_product(matmat(V), _sk_gram(X.astype(np.float64), gamma=0.3), V,
                    1e-12 if dtype == np.float64 else 1e-5)
    assert calls == ["symmetric_kernel_product" if dtype == np.float64 else "kernel_product"]



@pytest.mark.parametrize("kernel, params", [
    ("rational_quadratic", {"alpha": 0.7, "length_scale": 2.0}),
    ("poly", {"gamma": 0.3, "degree": 2, "coef0": 0.5}),
    (fk.RBF(0.2) + fk.Linear(), {}),
], ids=["rq", "poly", "sum-object"])
def test_nystroem_eigenpairs_use_the_spec_as_nystroem_does(kernel, params):
    # The nystrom solver hands its fitted kernel spec to the feature map, which
    # then equals the public Nystroem of the same kernel, and the Nystroem
    # formula K(X, L) W^+ K(L, X) in NumPy.
    from fastkern.large_n import nystroem_eigenpairs

    rng = np.random.default_rng(5)
    X = rng.standard_normal((120, 4))
    named = {k: params[k] for k in ("gamma", "degree", "coef0") if k in params}
    rest = {k: v for k, v in params.items() if k not in named}
    spec = KernelSpec.from_params(kernel, **named, kernel_params=rest or None)
    fit = nystroem_eigenpairs(X, spec, 3, 30, random_state=0)
    assert fit.feature_map.kernel_spec_ is spec
    public = Nystroem(kernel=kernel, n_components=30, random_state=0, **named,
                      kernel_params=rest or None).fit(X)
    Phi = fit.feature_map.transform(X)
    np.testing.assert_array_equal(Phi, public.transform(X))
    L = X[fit.feature_map.component_indices_]
    K = spec.gram(X, L)
    approx = K @ np.linalg.pinv(spec.gram(L), rcond=1e-12, hermitian=True) @ K.T
    np.testing.assert_allclose(Phi @ Phi.T, approx, atol=1e-8 * np.abs(approx).max())


def test_available_memory_is_the_kernels_memavailable(monkeypatch):
    # The default memory_budget is half of it, read at every fit from
    # /proc/meminfo; psutil (else the free pages) where that cannot be read.
    from fastkern import _validation

    psutil = pytest.importorskip("psutil")
    ours, theirs = _validation._available_memory(), psutil.virtual_memory().available
    # Read a moment apart: other processes move it a little.
    assert abs(ours - theirs) <= max(0.05 * theirs, 256 << 20)
    assert _validation.memory_budget_bytes(None) == pytest.approx(0.5 * ours, rel=0.05)

    def unreadable(*args, **kwargs):
        raise OSError("no /proc here")

    monkeypatch.setattr(_validation, "open", unreadable, raising=False)
    seen = []
    monkeypatch.setattr(psutil, "virtual_memory",
                        lambda: seen.append(1) or type("M", (), {"available": 12345})())
    assert _validation._available_memory() == 12345 and seen


def test_a_small_gram_is_judged_by_a_recent_memory_reading(monkeypatch):
    # KernelPCA's "auto" asks whether the Gram fits at every fit; /proc/meminfo
    # costs a few percent of a 200-row fit.  A request far inside the budget
    # of a reading under a second old is judged by it; a larger one, or any
    # once the reading is older, reads the memory again and sees it fall.
    from fastkern import _validation

    clock, available, reads = [100.0], [8 << 30], []
    monkeypatch.setattr(_validation.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(_validation, "_available_memory",
                        lambda: reads.append(available[0]) or available[0])
    monkeypatch.setattr(_validation, "_last_budget", (-float("inf"), 0))
    small, large = 1 << 20, 1 << 30
    assert _validation.within_memory_budget(small, None) and len(reads) == 1
    available[0] = 1 << 20  # memory runs out
    assert _validation.within_memory_budget(small, None) and len(reads) == 1
    assert not _validation.within_memory_budget(large, None) and len(reads) == 2
    assert not _validation.within_memory_budget(small, None) and len(reads) == 3
    available[0] = 8 << 30
    assert _validation.within_memory_budget(small, None) and len(reads) == 4
    assert _validation.within_memory_budget(small, None) and len(reads) == 4
    clock[0] += 2.0
    assert _validation.within_memory_budget(small, None) and len(reads) == 5
    # An explicit budget reads no memory at all.
    assert not _validation.within_memory_budget(small + 1, small) and len(reads) == 5
    assert _validation.within_memory_budget(small, "1MiB")
