import sys
import tracemalloc
import types

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, make_circles
from sklearn.decomposition import KernelPCA as SkKernelPCA
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression
from sklearn.metrics.pairwise import laplacian_kernel as sk_laplacian
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

import fastkern
from fastkern import decomposition, kernels
from fastkern.decomposition import KernelPCA, lanczos_block_size

RNG = np.random.default_rng(0)
X_TRAIN = RNG.standard_normal((237, 7))
X_TEST = RNG.standard_normal((41, 7))


def _expected_failures(estimator):
    if estimator.kernel == "precomputed":
        return {"check_estimators_dtypes": (
            "the check truncates its linear kernel to integers, which makes it indefinite; "
            "scikit-learn's KernelPCA(kernel='precomputed') rejects it the same way")}
    return {}


@parametrize_with_checks(
    [KernelPCA(), KernelPCA(kernel="rbf", eigen_solver="lanczos"),
     KernelPCA(n_components=2, kernel="poly", eigen_solver="arpack", fit_inverse_transform=True),
     KernelPCA(kernel="precomputed")],
    expected_failed_checks=_expected_failures,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def _sk_reference(kernel, **params):
    """scikit-learn's KernelPCA on the same problem (kernels it lacks go in precomputed)."""
    if kernel == "laplacian":
        sk = SkKernelPCA(kernel="precomputed", **params).fit(sk_laplacian(X_TRAIN, gamma=0.1))
        return sk, sk.transform(sk_laplacian(X_TEST, X_TRAIN, gamma=0.1))
    sk = SkKernelPCA(kernel=kernel, **params).fit(X_TRAIN)
    return sk, sk.transform(X_TEST)


def _callable(x, y, scale=1.0):
    return scale * np.exp(-np.sum((x - y) ** 2) / 7.0)


KERNELS = [
    dict(kernel="linear"),
    dict(kernel="poly", degree=2, gamma=0.1, coef0=1.5),
    dict(kernel="rbf", gamma=0.1),
    dict(kernel="sigmoid", gamma=0.01, coef0=0.5),
    dict(kernel="laplacian", gamma=0.1),
]


@pytest.mark.parametrize("params", KERNELS, ids=lambda p: p["kernel"])
@pytest.mark.parametrize("solver", ["dense", "lanczos", "arpack"])
def test_matches_sklearn(params, solver):
    sk, sk_test = _sk_reference(params["kernel"], n_components=5,
                                **{k: v for k, v in params.items() if k != "kernel"
                                   and params["kernel"] != "laplacian"})
    fk = KernelPCA(n_components=5, eigen_solver=solver, **params)
    Z = fk.fit_transform(X_TRAIN)
    assert fk._fit_solver == solver
    np.testing.assert_allclose(fk.eigenvalues_, sk.eigenvalues_, rtol=1e-8)
    # Same signs as scikit-learn (svd_flip), not only up to sign.
    scale = np.abs(sk.eigenvectors_).max()
    np.testing.assert_allclose(fk.eigenvectors_, sk.eigenvectors_, atol=1e-7 * scale)
    Z_sk = sk.eigenvectors_ * np.sqrt(sk.eigenvalues_)
    np.testing.assert_allclose(Z, Z_sk, atol=1e-7 * np.abs(Z_sk).max())
    np.testing.assert_allclose(fk.transform(X_TEST), sk_test, atol=1e-7 * np.abs(sk_test).max())


@pytest.mark.parametrize("kernel", [kernels.RBF(gamma=1 / 7.0), _callable],
                         ids=["kernel-object", "callable"])
def test_kernel_objects_and_callables(kernel):
    sk = SkKernelPCA(n_components=4, kernel="rbf", gamma=1 / 7.0).fit(X_TRAIN)
    fk = KernelPCA(n_components=4, kernel=kernel).fit(X_TRAIN)
    np.testing.assert_allclose(fk.eigenvalues_, sk.eigenvalues_, rtol=1e-8)
    np.testing.assert_allclose(np.abs(fk.transform(X_TEST)), np.abs(sk.transform(X_TEST)),
                               atol=1e-8)
    fk2 = KernelPCA(n_components=4, kernel=_callable, kernel_params={"scale": 2.0}).fit(X_TRAIN)
    np.testing.assert_allclose(fk2.eigenvalues_, 2 * sk.eigenvalues_, rtol=1e-8)


def test_precomputed_matches_and_input_untouched():
    K = fastkern.rbf_kernel(X_TRAIN, gamma=0.1)
    K_before = K.copy()
    K_test = fastkern.rbf_kernel(X_TEST, X_TRAIN, gamma=0.1)
    K_test_before = K_test.copy()
    fk = KernelPCA(n_components=3, kernel="precomputed").fit(K)
    sk = SkKernelPCA(n_components=3, kernel="rbf", gamma=0.1).fit(X_TRAIN)
    np.testing.assert_allclose(fk.transform(K_test), sk.transform(X_TEST), atol=1e-8)
    np.testing.assert_array_equal(K, K_before)
    np.testing.assert_array_equal(K_test, K_test_before)


@pytest.mark.parametrize("solver", ["lanczos", "arpack"])
def test_solvers_agree_with_dense(solver):
    dense = KernelPCA(n_components=6, kernel="rbf", gamma=0.05, eigen_solver="dense").fit(X_TRAIN)
    other = KernelPCA(n_components=6, kernel="rbf", gamma=0.05, eigen_solver=solver,
                      random_state=0).fit(X_TRAIN)
    np.testing.assert_allclose(other.eigenvalues_, dense.eigenvalues_, rtol=1e-8)


@pytest.fixture
def block_products(monkeypatch):
    """Number of matmat calls (block products, each reading K once) of every block_eigsh run."""
    counts = []
    real = decomposition.block_eigsh

    def counting(matmat, *args, **kwargs):
        calls = []
        try:
            return real(lambda V: calls.append(V.shape[1]) or matmat(V), *args, **kwargs)
        finally:
            counts.append(len(calls))

    monkeypatch.setattr(decomposition, "block_eigsh", counting)
    return counts


def _assert_same_embedding_up_to_sign(Z, Z_ref, rtol):
    signs = np.sign(np.sum(Z * Z_ref, axis=0))
    np.testing.assert_allclose(Z * signs, Z_ref, atol=rtol * np.abs(Z_ref).max())


@pytest.mark.filterwarnings("error::sklearn.exceptions.ConvergenceWarning")
def test_lanczos_converges_on_raw_breast_cancer_for_every_seed(block_products):
    # Unscaled breast_cancer with gamma = 1/30: the RBF Gram is nearly the
    # identity, so most of the centred spectrum clusters near 1.  The solver
    # used to lose basis orthogonality there and stall at max_iter=600 for
    # about half the seeds; it now converges in about 15 block products.
    X = load_breast_cancer().data
    sk = SkKernelPCA(n_components=2, kernel="rbf", eigen_solver="dense").fit(X)
    Z_sk = sk.eigenvectors_ * np.sqrt(sk.eigenvalues_)
    arpack = SkKernelPCA(n_components=2, kernel="rbf", eigen_solver="arpack",
                         random_state=0).fit(X)
    np.testing.assert_allclose(arpack.eigenvalues_, sk.eigenvalues_, rtol=1e-9)
    for seed in range(8):
        fk = KernelPCA(n_components=2, kernel="rbf", random_state=seed)
        Z = fk.fit_transform(X)
        assert fk._fit_solver == "lanczos"
        assert block_products[-1] <= 30, (seed, block_products)
        np.testing.assert_allclose(fk.eigenvalues_, sk.eigenvalues_, rtol=1e-9)
        _assert_same_embedding_up_to_sign(Z, Z_sk, 1e-7)


def test_lanczos_block_products_default_problem(block_products):
    # A standard-normal RBF problem like the N=8000 benchmark, smaller: the
    # number of products (each one read of K) is what the solver's speed is.
    X = np.random.default_rng(1).standard_normal((1500, 16))
    fk = KernelPCA(n_components=5, kernel="rbf", gamma=1 / 16, eigen_solver="lanczos",
                   random_state=0).fit(X)
    sk = SkKernelPCA(n_components=5, kernel="rbf", gamma=1 / 16, eigen_solver="dense").fit(X)
    assert block_products == [9]
    np.testing.assert_allclose(fk.eigenvalues_, sk.eigenvalues_, rtol=1e-9)
    _assert_same_embedding_up_to_sign(fk.eigenvectors_, sk.eigenvectors_, 1e-7)


@pytest.mark.filterwarnings("error::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("n_components", [3, 4, 5, 6])
def test_lanczos_rank_deficient_gram(n_components):
    # 4 distinct points repeated: the centred Gram has rank 3, so components
    # beyond it have eigenvalues at rounding level (1e-16 of the largest).
    X = np.repeat(np.random.default_rng(2).standard_normal((4, 3)), 75, axis=0)
    fk = KernelPCA(n_components=n_components, kernel="rbf", gamma=0.3,
                   eigen_solver="lanczos", random_state=0).fit(X)
    sk = SkKernelPCA(n_components=n_components, kernel="rbf", gamma=0.3,
                     eigen_solver="dense").fit(X)
    top = sk.eigenvalues_[0]
    np.testing.assert_allclose(fk.eigenvalues_, sk.eigenvalues_, rtol=1e-9, atol=1e-9 * top)
    r = min(n_components, 3)
    _assert_same_embedding_up_to_sign(fk.eigenvectors_[:, :r] * np.sqrt(fk.eigenvalues_[:r]),
                                      sk.eigenvectors_[:, :r] * np.sqrt(sk.eigenvalues_[:r]),
                                      1e-7)


@pytest.mark.parametrize("solver", ["lanczos", "arpack"])
def test_reproducible_with_random_state(solver):
    # Same random_state, same bits: the random start and every random fill
    # come from it, never from numpy's global state.
    X = load_breast_cancer().data[:400]
    runs = []
    for global_seed in (0, 1):
        np.random.seed(global_seed)
        for random_state in (7, np.random.RandomState(7)):
            est = KernelPCA(n_components=3, kernel="rbf", eigen_solver=solver,
                            random_state=random_state)
            runs.append((est.fit_transform(X), est.eigenvalues_))
    for Z, w in runs[1:]:
        np.testing.assert_array_equal(Z, runs[0][0])
        np.testing.assert_array_equal(w, runs[0][1])


def test_n_components_none_and_remove_zero_eig():
    X = X_TRAIN[:30, :3]        # linear kernel: rank 3 after centering
    fk = KernelPCA(kernel="linear").fit(X)
    sk = SkKernelPCA(kernel="linear").fit(X)
    assert fk.eigenvalues_.shape == sk.eigenvalues_.shape == (3,)
    np.testing.assert_allclose(fk.eigenvalues_, sk.eigenvalues_, rtol=1e-8)
    fk = KernelPCA(n_components=5, kernel="linear", remove_zero_eig=True).fit(X)
    assert fk.eigenvalues_.shape == (3,)


def test_inverse_transform_matches_sklearn():
    params = dict(n_components=4, kernel="rbf", gamma=0.1, alpha=0.3, fit_inverse_transform=True)
    fk = KernelPCA(**params).fit(X_TRAIN)
    sk = SkKernelPCA(**params).fit(X_TRAIN)
    Z = sk.transform(X_TEST)
    np.testing.assert_allclose(fk.inverse_transform(Z), sk.inverse_transform(Z), atol=1e-8)
    np.testing.assert_allclose(fk.dual_coef_, sk.dual_coef_, atol=1e-7)
    with pytest.raises(NotFittedError, match="fit_inverse_transform"):
        KernelPCA(n_components=2).fit(X_TRAIN).inverse_transform(Z[:, :2])
    with pytest.raises(ValueError, match="X must have shape"):
        fk.inverse_transform(Z[:, :3])


@pytest.mark.parametrize("solver", ["dense", "lanczos"])
def test_float32(solver):
    X32 = X_TRAIN.astype(np.float32)
    fk32 = KernelPCA(n_components=4, kernel="rbf", gamma=0.1, eigen_solver=solver,
                     fit_inverse_transform=True).fit(X32)
    fk64 = KernelPCA(n_components=4, kernel="rbf", gamma=0.1, eigen_solver=solver).fit(X_TRAIN)
    assert fk32.eigenvalues_.dtype == fk32.eigenvectors_.dtype == np.float32
    Z = fk32.transform(X_TEST.astype(np.float32))
    assert Z.dtype == np.float32
    assert fk32.fit_transform(X32).dtype == np.float32
    np.testing.assert_allclose(fk32.eigenvalues_, fk64.eigenvalues_, rtol=1e-4)
    np.testing.assert_allclose(Z, fk64.transform(X_TEST), atol=1e-4)


def test_memory_layouts():
    ref = KernelPCA(n_components=3, kernel="rbf", gamma=0.1).fit(X_TRAIN).transform(X_TEST)
    big = np.zeros((X_TRAIN.shape[0], 2 * X_TRAIN.shape[1]))
    big[:, ::2] = X_TRAIN
    for X in (np.asfortranarray(X_TRAIN), big[:, ::2]):
        Z = KernelPCA(n_components=3, kernel="rbf", gamma=0.1).fit(X).transform(
            np.asfortranarray(X_TEST))
        np.testing.assert_allclose(Z, ref, atol=1e-12)


def test_auto_solver_choice():
    assert KernelPCA(n_components=3).fit(X_TRAIN[:150])._fit_solver == "dense"
    assert KernelPCA(n_components=3).fit(X_TRAIN)._fit_solver == "lanczos"
    assert KernelPCA(n_components=100).fit(X_TRAIN)._fit_solver == "dense"


def test_verbose_lanczos(capsys):
    KernelPCA(n_components=3, kernel="rbf", eigen_solver="lanczos", verbose=True).fit(X_TRAIN)
    assert "lanczos iteration 1" in capsys.readouterr().out


@pytest.fixture
def fake_large_n(monkeypatch):
    calls = []

    def fit_kernel_pca(est, X):
        calls.append(("fit", X.shape))
        est.eigenvalues_ = np.ones(2)
        est.eigenvectors_ = np.zeros((X.shape[0], 2))
        est.X_fit_ = X
        est._fit_solver = "nystrom" if est.eigen_solver == "nystrom" else "matrix-free"
        return est

    def transform_kernel_pca(est, X):
        calls.append(("transform", X.shape))
        return np.zeros((X.shape[0], 2))

    fake = types.ModuleType("fastkern.large_n")
    fake.fit_kernel_pca = fit_kernel_pca
    fake.transform_kernel_pca = transform_kernel_pca
    monkeypatch.setitem(sys.modules, "fastkern.large_n", fake)
    monkeypatch.setattr(fastkern, "large_n", fake, raising=False)
    return calls


@pytest.mark.parametrize("params", [dict(eigen_solver="matrix-free"),
                                    dict(eigen_solver="nystrom", n_landmarks=20),
                                    dict(eigen_solver="auto", memory_budget=1000)])
def test_large_n_hook(fake_large_n, params):
    est = KernelPCA(n_components=2, kernel="rbf", **params)
    Z = est.fit_transform(X_TRAIN)
    assert Z.shape == (X_TRAIN.shape[0], 2)
    est.transform(X_TEST)
    assert fake_large_n == [("fit", X_TRAIN.shape), ("transform", X_TEST.shape)]


def test_large_n_hook_not_used_for_small_or_precomputed(fake_large_n):
    KernelPCA(n_components=2, kernel="rbf", memory_budget=10**9).fit(X_TRAIN).transform(X_TEST)
    K = fastkern.rbf_kernel(X_TRAIN)
    KernelPCA(n_components=2, kernel="precomputed", memory_budget=1000).fit(K)
    assert fake_large_n == []


@pytest.mark.parametrize("solver, dtype, inverse", [
    ("dense", np.float64, False), ("lanczos", np.float64, False),
    ("dense", np.float64, True), ("dense", np.float32, True)])
def test_fit_memory_is_one_gram(solver, dtype, inverse):
    n = 1500
    X = np.random.default_rng(1).standard_normal((n, 5)).astype(dtype)
    est = KernelPCA(n_components=5, kernel="rbf", eigen_solver=solver,
                    fit_inverse_transform=inverse)
    tracemalloc.start()
    try:
        est.fit(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    itemsize = np.dtype(dtype).itemsize
    gram = n * n * itemsize
    # O(N k) allowance, in n x p float64 blocks (p = lanczos_block_size(k)):
    # the Krylov basis and its products (2 x 7 blocks) and at most 10 more
    # (Ritz vectors and their products, residuals, the block being
    # orthonormalised, QR work, the product's input and output, the start).
    basis = (2 * 7 + 10) * n * lanczos_block_size(5) * 8
    assert peak <= 1.1 * gram + basis, peak / gram


def test_bad_input():
    with pytest.raises(ValueError, match="n_components=300 must be <= n_samples=237"):
        KernelPCA(n_components=300).fit(X_TRAIN)
    with pytest.raises(ValueError, match="n_components"):
        KernelPCA(n_components=0).fit(X_TRAIN)
    with pytest.raises(ValueError, match="square kernel"):
        KernelPCA(kernel="precomputed").fit(X_TRAIN)
    with pytest.raises(ValueError, match="eigen_solver must be one of"):
        KernelPCA(eigen_solver="magic").fit(X_TRAIN)
    with pytest.raises(ValueError, match="alpha must be >= 0"):
        KernelPCA(alpha=-1.0).fit(X_TRAIN)
    with pytest.raises(ValueError, match="tol must be >= 0"):
        KernelPCA(tol=-1e-3).fit(X_TRAIN)
    with pytest.raises(ValueError, match="kernel must be one of"):
        KernelPCA(kernel="nope").fit(X_TRAIN)
    with pytest.raises(ValueError, match="fit_inverse_transform with a precomputed"):
        KernelPCA(kernel="precomputed", fit_inverse_transform=True).fit(np.eye(5))
    with pytest.raises(ValueError, match="needs n_components < n_samples"):
        KernelPCA(n_components=20, eigen_solver="arpack").fit(X_TRAIN[:20])
    with pytest.raises(ValueError, match="NaN or infinity"):
        KernelPCA(kernel="exponential", gamma=1e3).fit(X_TRAIN * 100)
    fitted = KernelPCA(n_components=2).fit(X_TRAIN)
    with pytest.raises(ValueError, match="features"):
        fitted.transform(X_TEST[:, :5])
    with pytest.raises(NotFittedError):
        KernelPCA().transform(X_TEST)


def test_pipeline_and_grid_search():
    X, y = make_circles(n_samples=200, factor=0.3, noise=0.05, random_state=0)
    pipe = Pipeline([("kpca", KernelPCA(n_components=2, kernel="rbf")),
                     ("clf", LogisticRegression())])
    search = GridSearchCV(pipe, {"kpca__gamma": [0.01, 10.0]}, cv=3).fit(X, y)
    assert search.best_params_ == {"kpca__gamma": 10.0}
    assert search.best_score_ > 0.95
    assert search.best_estimator_.named_steps["kpca"].eigenvalues_.shape == (2,)
