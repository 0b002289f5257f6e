import re
import tracemalloc
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer, make_circles
from sklearn.decomposition import KernelPCA as SkKernelPCA
from sklearn.exceptions import NotFittedError
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.linear_model import LogisticRegression
from sklearn.metrics.pairwise import laplacian_kernel as sk_laplacian
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

import fastkern
from fastkern import _kpca_solvers, kernels
from fastkern._kpca_solvers import _KRYLOV_MAX_BLOCKS, krylov_block_size
from fastkern._testing import same_on_threads_and_layouts
from fastkern.decomposition import KernelPCA

RNG = np.random.default_rng(0)
X_TRAIN = RNG.standard_normal((237, 7))
X_TEST = RNG.standard_normal((41, 7))


def _expected_failures(estimator):
    if estimator.kernel == "precomputed":
        return {"check_estimators_dtypes": (
            "the check truncates its linear kernel to integers, which makes it indefinite; "
            "scikit-learn's KernelPCA(kernel='precomputed') rejects it the same way")}
    if estimator.fit_inverse_transform:
        return dict.fromkeys(
            ("check_estimator_sparse_tag", "check_estimator_sparse_array",
             "check_estimator_sparse_matrix"),
            "fit_inverse_transform=True raises NotImplementedError on sparse X, as "
            "scikit-learn's KernelPCA does")
    return {}


@parametrize_with_checks(
    [KernelPCA(), KernelPCA(kernel="rbf", eigen_solver="block_krylov"),
     KernelPCA(n_components=2, kernel="poly", eigen_solver="arpack", fit_inverse_transform=True),
     KernelPCA(n_components=3, kernel="rbf", eigen_solver="randomized", random_state=0),
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
@pytest.mark.parametrize("solver", ["dense", "block_krylov", "thick_restart_lanczos", "arpack"])
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


@pytest.mark.parametrize("solver", ["block_krylov", "thick_restart_lanczos", "arpack"])
def test_solvers_agree_with_dense(solver):
    dense = KernelPCA(n_components=6, kernel="rbf", gamma=0.05, eigen_solver="dense").fit(X_TRAIN)
    other = KernelPCA(n_components=6, kernel="rbf", gamma=0.05, eigen_solver=solver,
                      random_state=0).fit(X_TRAIN)
    np.testing.assert_allclose(other.eigenvalues_, dense.eigenvalues_, rtol=1e-8)


@pytest.fixture
def block_products(monkeypatch):
    """Number of matmat calls (block products, each reading K once) of every block_eigsh
    run; ``.widths`` holds their block widths, one list per run."""
    counts = _Counts()
    real = _kpca_solvers.block_eigsh

    def counting(matmat, *args, **kwargs):
        calls = []
        try:
            return real(lambda V: calls.append(V.shape[1]) or matmat(V), *args, **kwargs)
        finally:
            counts.append(len(calls))
            counts.widths.append(calls)

    monkeypatch.setattr(_kpca_solvers, "block_eigsh", counting)
    return counts


class _Counts(list):
    def __init__(self):
        super().__init__()
        self.widths = []


def _assert_same_embedding_up_to_sign(Z, Z_ref, rtol):
    signs = np.sign(np.sum(Z * Z_ref, axis=0))
    np.testing.assert_allclose(Z * signs, Z_ref, atol=rtol * np.abs(Z_ref).max())


@pytest.mark.filterwarnings("error::sklearn.exceptions.ConvergenceWarning")
def test_block_krylov_converges_on_raw_breast_cancer_for_every_seed(block_products):
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
        fk = KernelPCA(n_components=2, kernel="rbf", eigen_solver="block_krylov",
                       random_state=seed)
        Z = fk.fit_transform(X)
        assert block_products[-1] <= 30, (seed, block_products)
        np.testing.assert_allclose(fk.eigenvalues_, sk.eigenvalues_, rtol=1e-9)
        _assert_same_embedding_up_to_sign(Z, Z_sk, 1e-7)


def test_block_krylov_default_problem_matches_dense():
    # A standard-normal RBF problem like the N=8000 benchmark, smaller.  How
    # many products (reads of K) the solver takes is its speed, recorded by
    # benchmarks/bench_block_krylov.py, not pinned here.
    X = np.random.default_rng(1).standard_normal((1500, 16))
    fk = KernelPCA(n_components=5, kernel="rbf", gamma=1 / 16, eigen_solver="block_krylov",
                   random_state=0).fit(X)
    sk = SkKernelPCA(n_components=5, kernel="rbf", gamma=1 / 16, eigen_solver="dense").fit(X)
    np.testing.assert_allclose(fk.eigenvalues_, sk.eigenvalues_, rtol=1e-9)
    _assert_same_embedding_up_to_sign(fk.eigenvectors_, sk.eigenvectors_, 1e-7)


@pytest.mark.filterwarnings("error::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("n_components", [3, 4, 5, 6])
def test_block_krylov_rank_deficient_gram(n_components):
    # 4 distinct points repeated: the centred Gram has rank 3, so components
    # beyond it have eigenvalues at rounding level (1e-16 of the largest).
    X = np.repeat(np.random.default_rng(2).standard_normal((4, 3)), 75, axis=0)
    fk = KernelPCA(n_components=n_components, kernel="rbf", gamma=0.3,
                   eigen_solver="block_krylov", random_state=0).fit(X)
    sk = SkKernelPCA(n_components=n_components, kernel="rbf", gamma=0.3,
                     eigen_solver="dense").fit(X)
    top = sk.eigenvalues_[0]
    np.testing.assert_allclose(fk.eigenvalues_, sk.eigenvalues_, rtol=1e-9, atol=1e-9 * top)
    r = min(n_components, 3)
    _assert_same_embedding_up_to_sign(fk.eigenvectors_[:, :r] * np.sqrt(fk.eigenvalues_[:r]),
                                      sk.eigenvectors_[:, :r] * np.sqrt(sk.eigenvalues_[:r]),
                                      1e-7)


@pytest.mark.parametrize("solver", ["block_krylov", "thick_restart_lanczos", "arpack",
                                    "randomized"])
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


@pytest.mark.parametrize("solver", ["dense", "block_krylov"])
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


# What "auto" chooses (fastkern._kpca_solvers.choose), checked through the
# fit: the thresholds at 189/190 (k < 10) and 200/201 (k <= n // 50), 4999/5000
# (on one thread too), ARPACK's products on more than 2 threads from 680 rows
# (n_threads=4) and the block solver there from 2000, the nearly diagonal
# Gram (gamma 1e8 on 2 features) handed to the block solver from 2000 rows,
# k < 10 and k <= n // 50, the memory budget's boundary (n * n * itemsize,
# float64 and float32), and the inputs that never go matrix-free
# (precomputed, sparse, cosine).  n >= 2000 fits only where they are cheap
# (few components).
_B400, _B500_32 = 400 * 400 * 8, 500 * 500 * 4
_TRL = "thick_restart_lanczos"
_AUTO_CASES = [
    (150, 3, {}, "dense"), (189, 3, {}, "dense"), (190, 3, {}, _TRL),
    (200, 3, {}, _TRL), (200, 10, {}, "dense"), (201, 3, {}, _TRL),
    (237, 3, {}, _TRL), (237, 9, {}, _TRL), (237, 10, {}, "dense"),
    (237, 100, {}, "dense"), (237, None, {}, "dense"), (1000, 20, {}, "arpack"),
    (1000, 21, {}, "dense"), (2000, 9, dict(n_threads=2), _TRL),
    (4999, 3, dict(n_threads=2), _TRL), (5000, 3, dict(n_threads=2), "block_krylov"),
    (800, 3, dict(n_threads=1), _TRL), (4999, 3, dict(n_threads=1), _TRL),
    (5000, 3, dict(n_threads=1), "block_krylov"),
    (1999, 3, dict(gamma=1e8), _TRL), (2000, 3, dict(gamma=1e8), "block_krylov"),
    (2000, 3, dict(gamma=1e8, n_threads=1), "block_krylov"),
    (679, 3, dict(n_threads=4), _TRL), (680, 3, dict(n_threads=4), "arpack"),
    (1999, 3, dict(n_threads=4), "arpack"), (2000, 3, dict(n_threads=4), "block_krylov"),
    (2000, 40, {}, "arpack"),
    (400, 3, dict(memory_budget=_B400), _TRL),
    (400, 3, dict(memory_budget=_B400 - 1), "matrix-free"),
    (400, 50, dict(memory_budget=_B400 - 1), "matrix-free"),
    (500, 3, dict(memory_budget=_B500_32, dtype="float32"), _TRL),
    (500, 3, dict(memory_budget=_B500_32 - 1, dtype="float32"), "matrix-free"),
    (300, 3, dict(memory_budget=1000, kernel="precomputed"), _TRL),
    (300, 3, dict(memory_budget=1000, sparse=True), _TRL),
    (150, 3, dict(memory_budget=1000, sparse=True), "dense"),
    (300, 3, dict(memory_budget=1000, kernel="cosine"), _TRL),
    (150, 20, dict(memory_budget=1000, kernel="cosine"), "dense"),
]


@pytest.mark.parametrize("n, k, case, solver", _AUTO_CASES,
                         ids=[f"{n}-{k}-{'-'.join(map(str, c.values()))}-{s}"
                              for n, k, c, s in _AUTO_CASES])
def test_auto_solver_choice(n, k, case, solver):
    case = dict(case)
    dtype, to_sparse = case.pop("dtype", "float64"), case.pop("sparse", False)
    kernel = case.pop("kernel", "rbf")
    X = np.random.default_rng(n).standard_normal((n, 2)).astype(dtype)
    if kernel == "precomputed":
        X = fastkern.rbf_kernel(X, gamma=0.5)
    elif to_sparse:
        X = sp.csr_matrix(X)
    est = KernelPCA(n_components=k, kernel=kernel, random_state=0, **case).fit(X)
    assert est._fit_solver == solver
    assert est.eigenvectors_.shape[0] == n


@pytest.mark.parametrize("case, expected", [
    ("identity", True), ("identity-times-1e-300", True), ("off-diagonal-4e-12", True),
    ("off-diagonal-1e-11", False), ("rbf", False), ("zero", False),
    ("negative-off-diagonal", False), ("one-row", True),
])
def test_nearly_diagonal(case, expected):
    # The off-diagonal mass of the sampled rows against their diagonal's, in
    # absolute value (so signed entries do not cancel), below 5e-12.
    from fastkern._kpca_solvers import _nearly_diagonal
    n = 300
    if case == "identity":
        K = np.eye(n)
    elif case == "identity-times-1e-300":
        K = 1e-300 * np.eye(n)
    elif case.startswith("off-diagonal"):
        # Each row's off-diagonal entries sum to the fraction named.
        fraction = {"off-diagonal-4e-12": 4e-12, "off-diagonal-1e-11": 1e-11}[case]
        K = np.eye(n) + fraction / (n - 1) * (1 - np.eye(n))
    elif case == "rbf":
        K = fastkern.rbf_kernel(np.random.default_rng(0).standard_normal((n, 4)))
    elif case == "zero":
        K = np.zeros((n, n))
    elif case == "negative-off-diagonal":
        K = np.eye(n) - 1e-3 * (1 - np.eye(n))
    else:
        K = np.ones((1, 1))
    assert _nearly_diagonal(K) is expected


def test_auto_hands_a_nearly_diagonal_gram_to_the_block_solver():
    # gamma 1e8 on 2 features: the Gram is the identity to rounding, its top
    # eigenvalues one cluster of n - 1 (so the vectors are any of it): the
    # eigenvalues are those of "dense", the pairs those of the centred Gram,
    # and transform of the training rows is fit_transform's embedding.
    X = np.random.default_rng(5).standard_normal((2000, 2))
    kw = dict(n_components=3, kernel="rbf", gamma=1e8, random_state=0)
    est = KernelPCA(**kw)
    embedding = est.fit_transform(X)
    assert est._fit_solver == "block_krylov"
    dense = KernelPCA(eigen_solver="dense", **kw).fit(X)
    np.testing.assert_allclose(est.eigenvalues_, dense.eigenvalues_, rtol=1e-12)
    K = fastkern.rbf_kernel(X, gamma=1e8)
    Kc = K - K.mean(0) - K.mean(1)[:, None] + K.mean()
    V = est.eigenvectors_
    np.testing.assert_allclose(V.T @ V, np.eye(3), atol=1e-12)
    assert np.abs(Kc @ V - V * est.eigenvalues_).max() <= 1e-12
    np.testing.assert_allclose(est.transform(X), embedding, atol=1e-12)


def test_auto_block_krylov_is_as_accurate_as_arpack():
    # scikit-learn's auto picks ARPACK here (tol=0: machine precision); the
    # block Krylov solver "auto" runs instead must be as close to LAPACK.
    from scipy.linalg import subspace_angles
    X = np.random.default_rng(3).standard_normal((2000, 16))
    kw = dict(n_components=5, kernel="rbf", gamma=1 / 16)
    # More threads than ARPACK_SYMV_MAX_THREADS: the block solver from 2000 rows.
    est = KernelPCA(random_state=0, n_threads=4, **kw).fit(X)
    dense = KernelPCA(eigen_solver="dense", **kw).fit(X)
    arpack = SkKernelPCA(eigen_solver="arpack", random_state=0, **kw).fit(X)
    assert est._fit_solver == "block_krylov"
    np.testing.assert_allclose(est.eigenvalues_, dense.eigenvalues_, rtol=1e-13)
    ours = np.max(subspace_angles(est.eigenvectors_, dense.eigenvectors_))
    theirs = np.max(subspace_angles(arpack.eigenvectors_, dense.eigenvectors_))
    assert ours <= max(10 * theirs, 1e-12), (ours, theirs)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kernel", ["rbf", "precomputed"])
def test_block_krylov_centres_implicitly(monkeypatch, dtype, kernel):
    # "block_krylov" never centres K (no update pass): its products apply the
    # centring (centred_matmat), and transform centres a test Gram with the
    # stored training means, as scikit-learn's explicit centring does.
    from fastkern import _centering

    def refuse(*args):
        raise AssertionError("K was centred explicitly")

    monkeypatch.setattr(_centering, "center_train", refuse)
    rng = np.random.default_rng(4)
    X, Xt = rng.standard_normal((613, 6)) + 2.0, rng.standard_normal((37, 6)) + 2.0
    kw = dict(n_components=4)
    if kernel == "precomputed":
        fit_in, test_in = fastkern.rbf_kernel(X, gamma=0.1), fastkern.rbf_kernel(Xt, X, gamma=0.1)
        fit_in, test_in = fit_in.astype(dtype), test_in.astype(dtype)
        kw["kernel"] = "precomputed"
    else:
        fit_in, test_in = X.astype(dtype), Xt.astype(dtype)
        kw.update(kernel="rbf", gamma=0.1)
    est = KernelPCA(eigen_solver="block_krylov", random_state=0, **kw)
    Z = est.fit_transform(fit_in)
    sk = SkKernelPCA(eigen_solver="dense", **kw).fit(fit_in.astype(np.float64))
    rtol = 1e-9 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(est.eigenvalues_, sk.eigenvalues_, rtol=rtol)
    _assert_same_embedding_up_to_sign(Z, sk.eigenvectors_ * np.sqrt(sk.eigenvalues_), rtol)
    signs = np.sign(np.sum(Z * sk.eigenvectors_, axis=0))
    Zt_sk = sk.transform(test_in.astype(np.float64))
    np.testing.assert_allclose(est.transform(test_in) * signs, Zt_sk,
                               atol=rtol * np.abs(Zt_sk).max())
    assert Z.dtype == dtype


def test_verbose_block_krylov(capsys):
    KernelPCA(n_components=3, kernel="rbf", eigen_solver="block_krylov", verbose=True).fit(X_TRAIN)
    assert "block_krylov iteration 1" in capsys.readouterr().out


@pytest.fixture
def fake_large_n(monkeypatch):
    """Records which fits and transforms KernelPCA hands to its large-N solvers."""
    calls = []

    def fit(solver, est, X, k, products=None):
        calls.append(("fit", X.shape))
        est.eigenvalues_ = np.ones(2)
        est.eigenvectors_ = np.zeros((X.shape[0], 2))
        est.X_fit_ = X

    def transform(solver, est, X, client=None):
        calls.append(("transform", X.shape))
        return np.zeros((X.shape[0], 2))

    monkeypatch.setattr(_kpca_solvers._LargeN, "fit", fit)
    monkeypatch.setattr(_kpca_solvers._LargeN, "transform", transform)
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
    ("dense", np.float64, False), ("block_krylov", np.float64, False),
    ("block_krylov", np.float32, False), ("dense", np.float64, True), ("dense", np.float32, True),
    ("block_krylov", np.float64, True), ("thick_restart_lanczos", np.float64, False),
    ("thick_restart_lanczos", np.float32, False), ("thick_restart_lanczos", np.float64, True)])
def test_fit_memory_is_one_gram(solver, dtype, inverse):
    # block_krylov, and thick_restart_lanczos from LANCZOS_THREADED_ROWS, on a
    # float64 RBF Gram keep it packed (PackedUpperGram): half a Gram.  With
    # fit_inverse_transform the pre-image kernel is one full Gram, allocated
    # once the packed one is freed.
    n = 1500
    X = np.random.default_rng(1).standard_normal((n, 5)).astype(dtype)
    est = KernelPCA(n_components=5, kernel="rbf", eigen_solver=solver,
                    fit_inverse_transform=inverse)
    # The Gram's per-thread tile buffers are kept between calls (_gram.scratch,
    # at most SCRATCH_KEEP bytes each): a fit before the measured one makes
    # them, so the peak is this fit's own.  Counted, they had put a first fit
    # at 1.63-1.69 Grams against an allowance of 1.65.
    est.fit(X)
    tracemalloc.start()
    try:
        est.fit(X)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    itemsize = np.dtype(dtype).itemsize
    gram = n * n * itemsize
    # O(N k) allowance, in n x p float64 blocks (p = krylov_block_size(k)):
    # the Krylov basis and its products (2 x (_KRYLOV_MAX_BLOCKS + 1) blocks)
    # and at most 10 more (Ritz vectors and their products, residuals, the
    # block being orthonormalised, QR work, the product's input and output,
    # the start).
    basis = (2 * (_KRYLOV_MAX_BLOCKS + 1) + 10) * n * krylov_block_size(5) * 8
    packed = solver != "dense" and dtype == np.float64 and not inverse
    assert peak <= (0.55 if packed else 1.1) * gram + basis, peak / gram


def test_bad_input():
    with pytest.raises(InvalidParameterError, match="'n_components' parameter of KernelPCA"):
        KernelPCA(n_components=0).fit(X_TRAIN)
    with pytest.raises(ValueError, match="square kernel"):
        KernelPCA(kernel="precomputed").fit(X_TRAIN)
    with pytest.raises(InvalidParameterError, match="'eigen_solver' parameter of KernelPCA"):
        KernelPCA(eigen_solver="magic").fit(X_TRAIN)
    with pytest.raises(InvalidParameterError, match="'alpha' parameter of KernelPCA"):
        KernelPCA(alpha=-1.0).fit(X_TRAIN)
    with pytest.raises(InvalidParameterError, match="'tol' parameter of KernelPCA"):
        KernelPCA(tol=-1e-3).fit(X_TRAIN)
    with pytest.raises(InvalidParameterError, match="'kernel' parameter of KernelPCA"):
        KernelPCA(kernel="nope").fit(X_TRAIN)
    with pytest.raises(ValueError, match="fit_inverse_transform with a precomputed"):
        KernelPCA(kernel="precomputed", fit_inverse_transform=True).fit(np.eye(5))
    with pytest.raises(ValueError, match="NaN or infinity"):
        KernelPCA(kernel="exponential", gamma=1e3).fit(X_TRAIN * 100)
    fitted = KernelPCA(n_components=2).fit(X_TRAIN)
    with pytest.raises(ValueError, match="features"):
        fitted.transform(X_TEST[:, :5])
    with pytest.raises(NotFittedError):
        KernelPCA().transform(X_TEST)


@pytest.mark.parametrize("params, name", [
    (dict(n_threads=0), "n_threads"), (dict(n_threads=1.5), "n_threads"),
    (dict(memory_budget=-1), "memory_budget"), (dict(memory_budget=[1]), "memory_budget"),
    (dict(n_landmarks=0), "n_landmarks"), (dict(verbose="loud"), "verbose"),
    (dict(iterated_power=-1), "iterated_power"), (dict(iterated_power="many"), "iterated_power"),
    (dict(max_iter=0), "max_iter"), (dict(degree=-1), "degree"), (dict(gamma=-0.5), "gamma"),
    (dict(n_jobs=1.5), "n_jobs"), (dict(kernel_params=[1]), "kernel_params"),
    (dict(copy_X="yes"), "copy_X"), (dict(random_state="seed"), "random_state"),
])
@pytest.mark.parametrize("method", ["fit", "fit_transform"])
def test_parameter_validation_names_the_parameter(params, name, method):
    with pytest.raises(InvalidParameterError, match=f"'{name}' parameter of KernelPCA"):
        getattr(KernelPCA(**params), method)(X_TRAIN[:20])


@pytest.mark.parametrize("solver", ["matrix-free", "nystrom"])
def test_cosine_kernel_not_on_large_n_solvers(solver):
    with pytest.raises(ValueError, match="kernel='cosine' is not available with eigen_solver"):
        KernelPCA(2, kernel="cosine", eigen_solver=solver).fit(X_TRAIN)
    # "auto" over the memory budget keeps the dense Gram for cosine.
    est = KernelPCA(2, kernel="cosine", memory_budget=1000).fit(X_TRAIN)
    sk = SkKernelPCA(2, kernel="cosine").fit(X_TRAIN)
    np.testing.assert_allclose(est.eigenvalues_, sk.eigenvalues_, rtol=1e-10)


def test_memory_budget_string_still_parsed():
    assert KernelPCA(2, memory_budget="1GB").fit(X_TRAIN)._fit_solver == "thick_restart_lanczos"
    with pytest.raises(ValueError, match="memory_budget must be a number of bytes"):
        KernelPCA(2, memory_budget="lots").fit(X_TRAIN)


# -- scikit-learn parameters, the clamp rules and the randomized solver ------------------------

_SK_SETTINGS = [
    dict(),
    dict(n_components=3, kernel="rbf", gamma=0.2, eigen_solver="randomized", iterated_power=0,
         random_state=0),
    dict(n_components=4, kernel="poly", degree=2, coef0=0.5, eigen_solver="arpack", tol=1e-12,
         max_iter=5000, random_state=1),
    dict(n_components=2, kernel="cosine", eigen_solver="dense", remove_zero_eig=True),
    dict(n_components=2, kernel="sigmoid", gamma=0.01, eigen_solver="randomized",
         iterated_power=5, random_state=np.random.RandomState(3)),
    dict(n_components=3, kernel="rbf", fit_inverse_transform=True, alpha=0.5, copy_X=False,
         n_jobs=2),
    dict(n_components=2, kernel=_callable, kernel_params={"scale": 2.0}),
]


@pytest.mark.parametrize("settings", _SK_SETTINGS)
def test_sklearn_get_params_round_trip(settings):
    sk = SkKernelPCA(**settings)
    fk = KernelPCA(**sk.get_params())
    assert {k: v for k, v in fk.get_params().items() if k in sk.get_params()} == sk.get_params()
    sk_state = sk.get_params()["random_state"]
    if isinstance(sk_state, np.random.RandomState):
        sk.set_params(random_state=3)
        fk.set_params(random_state=3)
    Z_sk = sk.fit_transform(X_TRAIN)
    Z = fk.fit_transform(X_TRAIN)
    np.testing.assert_allclose(fk.eigenvalues_, sk.eigenvalues_, rtol=1e-8,
                               atol=1e-12 * sk.eigenvalues_.max())
    _assert_same_embedding_up_to_sign(Z, Z_sk, 1e-7)
    _assert_same_embedding_up_to_sign(fk.transform(X_TEST), sk.transform(X_TEST), 1e-7)
    if settings.get("fit_inverse_transform"):
        np.testing.assert_allclose(fk.inverse_transform(Z), sk.inverse_transform(Z_sk),
                                   atol=1e-7)


def _circles(n):
    X, _ = make_circles(n_samples=n, factor=0.3, noise=0.05, random_state=0)
    return X


def _breast_cancer(n):
    return StandardScaler().fit_transform(load_breast_cancer().data[:n])


RANDOMIZED_PROBLEMS = [
    ("rbf-normal", lambda: X_TRAIN, dict(kernel="rbf", gamma=0.1)),
    ("rbf-circles", lambda: _circles(600), dict(kernel="rbf", gamma=2.0)),
    ("poly-breast-cancer", lambda: _breast_cancer(401), dict(kernel="poly", degree=2,
                                                                gamma=0.01)),
    ("linear-wide", lambda: RNG.standard_normal((257, 300)), dict(kernel="linear")),
]


@pytest.mark.parametrize("name, make, params", RANDOMIZED_PROBLEMS,
                         ids=[p[0] for p in RANDOMIZED_PROBLEMS])
@pytest.mark.parametrize("n_components, iterated_power", [(5, "auto"), (30, "auto"), (5, 0),
                                                          (5, 2), (12, 3)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_randomized_matches_sklearn_randomized(name, make, params, n_components, iterated_power,
                                               dtype):
    X = make().astype(dtype)
    kw = dict(n_components=n_components, eigen_solver="randomized", random_state=0,
              iterated_power=iterated_power, **params)
    sk = SkKernelPCA(**kw).fit(X)
    fk = KernelPCA(**kw)
    Z = fk.fit_transform(X)
    assert fk._fit_solver == "randomized"
    assert fk.eigenvalues_.dtype == fk.eigenvectors_.dtype == dtype
    # The same algorithm and random stream: only the rounding of the Gram and
    # of its centring differ.
    rtol = 1e-9 if dtype == np.float64 else 2e-4
    top = sk.eigenvalues_.max()
    np.testing.assert_allclose(fk.eigenvalues_, sk.eigenvalues_, rtol=rtol, atol=rtol * top)
    # Eigenvectors only where the randomized estimate separates them from the
    # next one (a gap of 1e-3 of the top); the embedding everywhere.
    lam = sk.eigenvalues_
    gaps = np.minimum(np.abs(np.diff(np.r_[np.inf, lam])), np.abs(np.diff(np.r_[lam, -np.inf])))
    sep = gaps > 1e-3 * top
    _assert_same_embedding_up_to_sign(fk.eigenvectors_[:, sep], sk.eigenvectors_[:, sep],
                                      1e3 * rtol)
    Z_sk = sk.eigenvectors_ * np.sqrt(sk.eigenvalues_)
    _assert_same_embedding_up_to_sign(Z[:, sep], Z_sk[:, sep], 1e3 * rtol)


@pytest.mark.parametrize("name, make, params", RANDOMIZED_PROBLEMS[:3],
                         ids=[p[0] for p in RANDOMIZED_PROBLEMS[:3]])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_randomized_matches_dense_lapack(name, make, params, dtype):
    X = make().astype(dtype)
    dense = KernelPCA(n_components=4, eigen_solver="dense", **params).fit(X)
    fk = KernelPCA(n_components=4, eigen_solver="randomized", iterated_power=10, random_state=0,
                   **params).fit(X)
    rtol = 1e-8 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(fk.eigenvalues_, dense.eigenvalues_, rtol=rtol)
    _assert_same_embedding_up_to_sign(fk.eigenvectors_ * np.sqrt(fk.eigenvalues_),
                                      dense.eigenvectors_ * np.sqrt(dense.eigenvalues_),
                                      1e2 * rtol)


def test_randomized_is_reproducible_and_seeded():
    runs = [KernelPCA(3, kernel="rbf", eigen_solver="randomized", iterated_power=1,
                      random_state=rs).fit_transform(X_TRAIN)
            for rs in (5, np.random.RandomState(5), 5)]
    np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_array_equal(runs[0], runs[2])
    other = KernelPCA(3, kernel="rbf", eigen_solver="randomized", iterated_power=1,
                      random_state=6).fit_transform(X_TRAIN)
    assert not np.array_equal(other, runs[0])


@pytest.mark.parametrize("n", [1, 2, 3, 257])
@pytest.mark.parametrize("solver", ["auto", "dense", "thick_restart_lanczos", "arpack",
                                    "randomized", "block_krylov"])
@pytest.mark.parametrize("n_components", [None, 1, "n", "n+5"])
@pytest.mark.parametrize("remove_zero_eig", [False, True])
def test_n_components_clamped_as_sklearn(n, solver, n_components, remove_zero_eig):
    X = np.random.default_rng(n).standard_normal((n, 4))
    k = {"n": n, "n+5": n + 5}.get(n_components, n_components)
    kw = dict(n_components=k, kernel="rbf", random_state=0, remove_zero_eig=remove_zero_eig)
    with warnings.catch_warnings():
        # scipy's "k >= N ... use scipy.linalg.eigh instead" for arpack.
        warnings.simplefilter("ignore", RuntimeWarning)
        sk = SkKernelPCA(eigen_solver="dense" if solver in ("block_krylov", "thick_restart_lanczos")
                         else solver, **kw).fit(X)
        fk = KernelPCA(eigen_solver=solver, **kw)
        Z = fk.fit_transform(X)
    assert fk.eigenvalues_.shape == sk.eigenvalues_.shape
    assert Z.shape == (n, sk.eigenvalues_.size)
    top = max(float(sk.eigenvalues_.max(initial=0.0)), 1e-300)
    np.testing.assert_allclose(fk.eigenvalues_, sk.eigenvalues_, rtol=1e-8, atol=1e-10 * top)
    assert fk.transform(X[:2]).shape == (min(n, 2), sk.eigenvalues_.size)


def test_arpack_with_all_components_warns_and_solves_densely_as_sklearn():
    X = X_TRAIN[:20]
    with pytest.warns(RuntimeWarning, match="k >= N"):
        sk = SkKernelPCA(n_components=20, kernel="rbf", eigen_solver="arpack").fit(X)
    with pytest.warns(RuntimeWarning, match="k >= N"):
        fk = KernelPCA(n_components=25, kernel="rbf", eigen_solver="arpack").fit(X)
    np.testing.assert_allclose(fk.eigenvalues_, sk.eigenvalues_, rtol=1e-10)
    assert fk.eigenvalues_.shape == (20,)


def test_lanczos_is_a_deprecated_name_of_block_krylov():
    new = KernelPCA(n_components=4, kernel="rbf", eigen_solver="block_krylov", random_state=0)
    old = KernelPCA(n_components=4, kernel="rbf", eigen_solver="lanczos", random_state=0)
    Z_new = new.fit_transform(X_TRAIN)
    with pytest.warns(FutureWarning, match=r"'lanczos' is deprecated.*fastkern 0\.3.*"
                                           r"'block_krylov'"):
        Z_old = old.fit_transform(X_TRAIN)
    with pytest.warns(FutureWarning, match="'block_krylov'"):
        old.fit(X_TRAIN)
    assert old._fit_solver == new._fit_solver == "block_krylov"
    assert old.get_params()["eigen_solver"] == "lanczos"  # set_params/clone keep what was given
    np.testing.assert_array_equal(Z_old, Z_new)
    np.testing.assert_array_equal(old.transform(X_TEST), new.transform(X_TEST))
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        new.fit(X_TRAIN)


# A non-PSD "kernel" captured from an isomap call (scikit-learn's test): 5
# positive eigenvalues, 3 negative ([52.72, 7.65, 7.65, 5.02, 0, 0, -6.13, -15.11]).
NOT_PSD = np.array([
    [4.48, -1.0, 8.07, 2.33, 2.33, 2.33, -5.76, -12.78],
    [-1.0, -6.48, 4.5, -1.24, -1.24, -1.24, -0.81, 7.49],
    [8.07, 4.5, 15.48, 2.09, 2.09, 2.09, -11.1, -23.23],
    [2.33, -1.24, 2.09, 4.0, -3.65, -3.65, 1.02, -0.9],
    [2.33, -1.24, 2.09, -3.65, 4.0, -3.65, 1.02, -0.9],
    [2.33, -1.24, 2.09, -3.65, -3.65, 4.0, 1.02, -0.9],
    [-5.76, -0.81, -11.1, 1.02, 1.02, 1.02, 4.86, 9.75],
    [-12.78, 7.49, -23.23, -0.9, -0.9, -0.9, 9.75, 21.46],
])


def _outcome(est, K):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            est.fit(K)
    except ValueError as exc:
        return type(exc), str(exc)
    return None, est.eigenvalues_


@pytest.mark.parametrize("solver", ["auto", "dense", "thick_restart_lanczos", "arpack",
                                    "randomized"])
@pytest.mark.parametrize("n_components", [2, 4, 5, 7, 8])
def test_precomputed_not_psd_as_sklearn(solver, n_components):
    kw = dict(kernel="precomputed", eigen_solver=solver, n_components=n_components,
              random_state=0)
    # scikit-learn has no Lanczos solver of its own: ARPACK's is the same method.
    expected = _outcome(SkKernelPCA(**dict(kw, eigen_solver="arpack" if solver == _TRL
                                           else solver)), NOT_PSD.tolist())
    got = _outcome(KernelPCA(**kw), NOT_PSD.tolist())
    assert got[0] == expected[0]
    if expected[0] is None:
        np.testing.assert_allclose(got[1], expected[1], rtol=1e-9, atol=1e-12)
    else:
        assert got[1] == expected[1]  # the same message, "significant negative eigenvalues"


def _psd_cases():
    """Eigenvalue vectors around every edge of scikit-learn's _check_psd_eigenvalues."""
    rng = np.random.default_rng(11)
    cases = []
    for dtype, ratio in ((np.float64, 1e-12), (np.float32, 2e-7)):
        for top in (1.0, 1e-30, 1e30, 3.7):
            for rel in (0.0, -1e-300, 1e-300, ratio * 0.5, ratio, ratio * 1.999, ratio * 2,
                        ratio * 2.001, ratio * 3, -ratio, -1e-6, 0.5, 1.0):
                cases.append(np.array([top, rel * top, top * 0.25], dtype=dtype))
        cases += [np.array(v, dtype=dtype) for v in
                  ([1.0, np.nan, 2.0], [np.inf, 1.0], [1.0, np.inf], [-1.0, -2.0], [0.0, 0.0],
                   [5.0], [], rng.uniform(0, 1, 70))]
        cases += [rng.uniform(0, 1, 5).astype(dtype) for _ in range(20)]
    return cases


def test_eigenvalue_fast_path_agrees_with_sklearns_psd_check():
    """The 200-row fit skips scikit-learn's _check_psd_eigenvalues where it would
    change nothing: wherever the skip applies, the check returns the values
    unchanged, and it does apply to the usual well-separated top eigenvalues."""
    from sklearn.utils.validation import _check_psd_eigenvalues

    from fastkern.decomposition import _clearly_positive

    skipped = 0
    for w in _psd_cases():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            if not _clearly_positive(w):
                continue
            skipped += 1
            checked = _check_psd_eigenvalues(w.copy(), enable_warnings=False)
        assert checked.dtype == w.dtype
        np.testing.assert_array_equal(checked, w)
    assert skipped >= 40
    assert not _clearly_positive(np.array([1.0, 1.999e-12]))
    assert _clearly_positive(np.array([1.0, 2.001e-12]))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_store_eigenpairs_as_sklearns_psd_check(dtype):
    """_store_eigenpairs's eigenvalues are those of scikit-learn's check, clipped,
    zeroed and raised on alike, with and without the fast path."""
    from sklearn.utils.validation import _check_psd_eigenvalues

    for w in _psd_cases():
        if w.dtype != dtype or w.size == 0 or not np.isfinite(w).all():
            continue
        V = np.random.default_rng(w.size).standard_normal((6, w.size)).astype(dtype)
        try:
            expected = _check_psd_eigenvalues(w.copy(), enable_warnings=False)
        except ValueError as exc:
            with pytest.raises(ValueError, match=re.escape(str(exc))):
                KernelPCA(n_components=2)._store_eigenpairs(w.copy(), V, dtype)
            continue
        est = KernelPCA(n_components=2)
        est._store_eigenpairs(w.copy(), V, dtype)
        np.testing.assert_array_equal(est.eigenvalues_, np.sort(expected)[::-1])


@pytest.mark.parametrize("solver", ["dense", "arpack", "randomized", "block_krylov"])
def test_precomputed_non_symmetric_uses_the_same_triangle_as_sklearn(solver):
    K = np.random.default_rng(4).standard_normal((9, 9))
    K = K @ K.T + np.triu(np.random.default_rng(5).standard_normal((9, 9)), 1)
    kw = dict(kernel="precomputed", n_components=3, random_state=0)
    sk = SkKernelPCA(eigen_solver="dense" if solver == "block_krylov" else solver, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sk.fit(K)
        fk = KernelPCA(eigen_solver=solver, **kw).fit(K)
    if solver != "block_krylov":  # K^T's eigenproblem there: only symmetric K is defined
        np.testing.assert_allclose(fk.eigenvalues_, sk.eigenvalues_, rtol=1e-9)
        np.testing.assert_allclose(fk.transform(K[:4]), sk.transform(K[:4]), atol=1e-8)


# -- input handling as scikit-learn -------------------------------------------------------------

def _error(est, X):
    try:
        est.fit(X)
    except (ValueError, TypeError) as exc:
        return type(exc), str(exc)
    raise AssertionError(f"{type(est).__name__} accepted {X!r}")


@pytest.mark.parametrize("X", [
    np.array([[1 + 1j, 2], [3, 4j]]),
    [[1 + 1j, 2.0], [3.0, 4.0]],
    np.empty((0, 3)),
    np.empty((3, 0)),
    np.arange(5.0),
    [[1.0, np.nan], [2.0, 3.0]],
    [[1.0, np.inf], [2.0, 3.0]],
    np.array([["a", "b"], ["c", "d"]], dtype=object),
], ids=["complex", "complex-list", "no-samples", "no-features", "1-D", "nan", "inf", "strings"])
def test_bad_data_same_error_as_sklearn(X):
    expected = _error(SkKernelPCA(n_components=1), X)
    got = _error(KernelPCA(n_components=1), X)
    assert got == expected


def test_lists_object_arrays_and_pandas_nullable():
    pd = pytest.importorskip("pandas")
    X = X_TRAIN[:40, :3]
    ref = KernelPCA(2, kernel="rbf").fit(X)
    frame = pd.DataFrame({"a": pd.array(np.round(X[:, 0] * 100), dtype="Int64"),
                          "b": pd.array(X[:, 1], dtype="Float64"), "c": X[:, 2]})
    Xi = np.column_stack([np.round(X[:, 0] * 100), X[:, 1:]])
    ref_i = KernelPCA(2, kernel="rbf").fit(Xi)
    for data, expected in ((X.tolist(), ref), (X.astype(object), ref), (frame, ref_i)):
        est = KernelPCA(2, kernel="rbf").fit(data)
        np.testing.assert_allclose(est.eigenvalues_, expected.eigenvalues_, rtol=1e-12)
        np.testing.assert_allclose(est.transform(data), expected.transform(
            Xi if data is frame else X), atol=1e-10)
    est = KernelPCA(2, kernel="rbf").fit(frame)
    np.testing.assert_array_equal(est.feature_names_in_, ["a", "b", "c"])
    assert est.get_feature_names_out().tolist() == ["kernelpca0", "kernelpca1"]
    with pytest.raises(ValueError, match="Feature names unseen at fit time"):
        est.transform(frame.rename(columns={"c": "z"}))
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        est.transform(Xi)
    with pytest.raises(ValueError, match="X has 2 features, but KernelPCA is expecting 3"):
        est.transform(Xi[:, :2])
    sk = SkKernelPCA(2, kernel="rbf").fit(frame)
    np.testing.assert_array_equal(sk.feature_names_in_, est.feature_names_in_)


@pytest.mark.parametrize("fmt", ["csr", "csc"])
@pytest.mark.parametrize("solver", ["dense", "thick_restart_lanczos", "arpack", "randomized",
                                    "block_krylov"])
@pytest.mark.parametrize("kernel", ["rbf", "linear", "cosine"])
def test_sparse_input_matches_dense(fmt, solver, kernel):
    X = X_TRAIN.copy()
    X[np.abs(X) < 0.8] = 0
    Xs = sp.csr_matrix(X).asformat(fmt)
    kw = dict(n_components=4, kernel=kernel, eigen_solver=solver, random_state=0)
    dense = KernelPCA(**kw).fit(X)
    est = KernelPCA(**kw).fit(Xs)
    assert sp.issparse(est.X_fit_) and est.X_fit_ is not Xs  # copy_X, still sparse
    np.testing.assert_allclose(est.eigenvalues_, dense.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(est.transform(sp.csr_matrix(X_TEST)), dense.transform(X_TEST),
                               atol=1e-9)


def test_sparse_input_is_not_densified(monkeypatch):
    from fastkern._kernel_api import KernelSpec
    seen = []
    real = KernelSpec.gram

    def spy(self, X, Y=None, **kw):
        seen.append((sp.issparse(X), Y is None or sp.issparse(Y)))
        return real(self, X, Y, **kw)

    monkeypatch.setattr(KernelSpec, "gram", spy)
    Xs = sp.random(60, 500, density=0.01, format="csr", random_state=0)
    est = KernelPCA(3, kernel="rbf").fit(Xs)
    est.transform(Xs[:5])
    assert seen == [(True, True), (True, True)]


def test_sparse_fit_inverse_transform_not_implemented_as_sklearn():
    Xs = sp.csr_matrix(X_TRAIN[:20])
    with pytest.raises(NotImplementedError, match="sparse"):
        SkKernelPCA(2, fit_inverse_transform=True).fit(Xs)
    with pytest.raises(NotImplementedError, match="sparse"):
        KernelPCA(2, fit_inverse_transform=True).fit(Xs)


def test_sparse_precomputed_kernel_is_densified_once():
    K = fastkern.rbf_kernel(X_TRAIN, gamma=0.1)
    K[np.abs(K) < 1e-3] = 0
    dense = KernelPCA(3, kernel="precomputed").fit(K)
    est = KernelPCA(3, kernel="precomputed").fit(sp.csr_matrix(K))
    np.testing.assert_allclose(est.eigenvalues_, dense.eigenvalues_, rtol=1e-12)
    np.testing.assert_allclose(est.transform(sp.csc_matrix(K[:5])), dense.transform(K[:5]),
                               atol=1e-10)


def test_pipeline_and_grid_search():
    X, y = make_circles(n_samples=200, factor=0.3, noise=0.05, random_state=0)
    pipe = Pipeline([("kpca", KernelPCA(n_components=2, kernel="rbf")),
                     ("clf", LogisticRegression())])
    search = GridSearchCV(pipe, {"kpca__gamma": [0.01, 10.0]}, cv=3).fit(X, y)
    assert search.best_params_ == {"kpca__gamma": 10.0}
    assert search.best_score_ > 0.95
    assert search.best_estimator_.named_steps["kpca"].eigenvalues_.shape == (2,)


# -- eigen_solver="incomplete_cholesky" and gamma="scale"/"median" -----------------------------

def _gamma_string_failures(estimator):
    if estimator.gamma in ("scale", "median"):
        return dict.fromkeys(
            ("check_sample_weight_equivalence_on_dense_data",
             "check_sample_weight_equivalence_on_sparse_data"),
            "a data-dependent gamma is resolved from the rows of X, so repeating rows "
            "changes it")
    return {}


@parametrize_with_checks(
    [KernelPCA(n_components=3, kernel="rbf", eigen_solver="incomplete_cholesky",
               ichol_max_rank=20),
     KernelPCA(kernel="poly", degree=2, eigen_solver="incomplete_cholesky"),
     KernelPCA(n_components=2, kernel="rbf", gamma="median")],
    expected_failed_checks=_gamma_string_failures,
)
def test_sklearn_compatible_incomplete_cholesky_and_gamma_strings(estimator, check):
    check(estimator)


def _assert_same_components(A, B, atol):
    np.testing.assert_allclose(A, B, atol=atol * np.abs(B).max())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
# Not sigmoid: it is not positive semi-definite here, and a Cholesky factor stops at
# the first non-positive residual.
@pytest.mark.parametrize("params", [p for p in KERNELS if p["kernel"] != "sigmoid"]
                         + [dict(kernel="cosine")], ids=lambda p: p["kernel"])
def test_incomplete_cholesky_at_full_rank_is_the_dense_solver(params, dtype):
    X, Xt = X_TRAIN.astype(dtype), X_TEST.astype(dtype)
    dense = KernelPCA(5, eigen_solver="dense", **params).fit(X)
    low = KernelPCA(5, eigen_solver="incomplete_cholesky", tol=1e-300,
                    ichol_max_rank=X.shape[0], **params)
    Z = low.fit_transform(X)
    atol = 1e-9 if dtype == np.float64 else 2e-3
    assert low.eigenvalues_.dtype == dtype and low.eigenvectors_.dtype == dtype
    np.testing.assert_allclose(low.eigenvalues_, dense.eigenvalues_,
                               atol=atol * dense.eigenvalues_[0])
    # The same signs as scikit-learn's convention, so no sign alignment here.
    _assert_same_components(low.eigenvectors_, dense.eigenvectors_, atol)
    _assert_same_components(Z, dense.transform(X), atol)
    _assert_same_components(low.transform(Xt), dense.transform(Xt), atol)
    # transform of the training set is the training embedding.
    np.testing.assert_allclose(low.transform(X), Z, atol=atol * np.abs(Z).max())


def test_incomplete_cholesky_error_decreases_with_rank():
    dense = KernelPCA(4, kernel="rbf", gamma=0.1, eigen_solver="dense").fit(X_TRAIN)
    errors = []
    for rank in (4, 15, 40, 100, 237):
        low = KernelPCA(4, kernel="rbf", gamma=0.1, eigen_solver="incomplete_cholesky",
                        tol=1e-300, ichol_max_rank=rank).fit(X_TRAIN)
        assert low.ichol_pivots_.shape == (rank,)
        errors.append(np.abs(low.eigenvalues_ - dense.eigenvalues_).max())
    assert all(b < a for a, b in zip(errors, errors[1:])), errors
    assert errors[-1] < 1e-10 * dense.eigenvalues_[0] < errors[0]


def test_incomplete_cholesky_rank_below_n_components_pads_with_zeros():
    # A linear kernel on 7 features has rank 7.
    est = KernelPCA(10, kernel="linear", eigen_solver="incomplete_cholesky")
    Z = est.fit_transform(X_TRAIN)
    assert Z.shape == (237, 10) and est.transform(X_TEST).shape == (41, 10)
    np.testing.assert_array_equal(est.eigenvalues_[7:], 0)
    np.testing.assert_array_equal(Z[:, 7:], 0)
    dense = KernelPCA(7, kernel="linear", eigen_solver="dense").fit(X_TRAIN)
    np.testing.assert_allclose(est.eigenvalues_[:7], dense.eigenvalues_, rtol=1e-10)
    assert KernelPCA(kernel="linear", eigen_solver="incomplete_cholesky").fit(
        X_TRAIN).eigenvalues_.shape == (7,)
    inv = KernelPCA(3, kernel="rbf", eigen_solver="incomplete_cholesky",
                    fit_inverse_transform=True).fit(X_TRAIN)
    assert inv.inverse_transform(inv.transform(X_TEST)).shape == X_TEST.shape


@pytest.mark.parametrize("params, X, err, match", [
    (dict(ichol_max_rank=0), X_TRAIN, InvalidParameterError, "ichol_max_rank"),
    (dict(kernel="precomputed"), X_TRAIN @ X_TRAIN.T, ValueError, "precomputed"),
    (dict(), sp.csr_matrix(X_TRAIN), TypeError, "dense X"),
])
def test_incomplete_cholesky_bad_parameters(params, X, err, match):
    with pytest.raises(err, match=match):
        KernelPCA(2, **({"eigen_solver": "incomplete_cholesky"} | params)).fit(X)


@pytest.mark.parametrize("solver", ["dense", "incomplete_cholesky"])
def test_gamma_scale_and_median_resolved_once_at_fit(solver):
    X = X_TRAIN * np.arange(1, 8)
    for name, value in (("scale", 1 / (7 * X.var())),
                        ("median", fastkern.estimate_gamma(X, random_state=0).gamma)):
        est = KernelPCA(3, kernel="rbf", gamma=name, eigen_solver=solver).fit(X)
        assert est.gamma_ == pytest.approx(value, rel=1e-12)
        ref = KernelPCA(3, kernel="rbf", gamma=value, eigen_solver=solver).fit(X)
        np.testing.assert_allclose(est.transform(X_TEST), ref.transform(X_TEST), rtol=1e-10,
                                   atol=1e-12)
    # Sparse X (dense solver): the same gamma.
    assert KernelPCA(2, kernel="rbf", gamma="scale").fit(sp.csr_matrix(X)).gamma_ == \
        pytest.approx(1 / (7 * X.var()), rel=1e-10)
    # The large-N solvers resolve it the same way (tests/test_large_n.py compares them).
    median = fastkern.estimate_gamma(X, random_state=0).gamma
    assert KernelPCA(2, kernel="rbf", gamma="median",
                     eigen_solver="matrix-free").fit(X).gamma_ == pytest.approx(median, rel=1e-12)


@pytest.mark.parametrize("kernel, params", [("rbf", {}), ("rbf", {"gamma": 0.01}),
                                            ("laplacian", {"gamma": 0.3}),
                                            ("sigmoid", {"gamma": 0.02, "coef0": -0.1})])
@pytest.mark.parametrize("n, d", [(1, 3), (2, 3), (255, 5), (257, 40), (300, 40), (300, 70)])
def test_upper_triangle_gram_matches_the_full_gram(kernel, params, n, d):
    # RBF: d = 5 its fused distance loop, d = 40 its dot tiles, d = 70 its
    # BLAS path.  Tiles of 128 and 256 rows against strips of 12: 255, 257
    # and 300 rows end inside a tile, and strips straddle tiles.  Every
    # stored entry is the full Gram's, bit for bit, whatever the thread count.
    from fastkern.pairwise import PackedUpperGram, _upper_triangle_gram, pairwise_kernels

    X = np.random.default_rng(n + d).standard_normal((n, d)) + 3.0
    full = pairwise_kernels(X, metric=kernel, n_threads=2, **params)
    for threads in (1, 2):
        K = _upper_triangle_gram(X, kernel, params, n_threads=threads)
        assert isinstance(K, PackedUpperGram) and K.shape == (n, n)
        np.testing.assert_array_equal(K.toarray(), full)


@pytest.mark.parametrize("n", [600, 2100])
def test_block_eigsh_in_a_preallocated_basis_matches_the_known_eigenpairs(n):
    # KernelPCA hands block_eigsh the arrays of krylov_basis, allocated
    # before the Gram (why: see krylov_basis; the time it saves is the
    # KernelPCA fit of benchmarks/).  The answer must be the one without them.
    # A = Q diag(d) Q with the Householder reflection Q = I - 2 u u^T: known
    # eigenpairs (d, the columns of Q) and a product that costs O(n) a column.
    from fastkern._eigen import block_eigsh, krylov_basis

    rng = np.random.default_rng(n)
    d = np.geomspace(1, 1e-3, n)
    u = rng.standard_normal(n)
    u /= np.linalg.norm(u)

    def reflect(V):
        return V - 2 * np.outer(u, u @ V)

    def matmat(V):
        return np.ascontiguousarray(reflect(d[:, None] * reflect(V)))

    block = 8
    values, vectors = block_eigsh(matmat, n, 5, block_size=block, random_state=0,
                                  basis=krylov_basis(n, block))
    plain_values, _ = block_eigsh(matmat, n, 5, block_size=block, random_state=0)
    np.testing.assert_allclose(values, d[:5], rtol=1e-9)
    np.testing.assert_allclose(values, plain_values, rtol=1e-12)
    from scipy.linalg import subspace_angles
    assert np.max(subspace_angles(vectors, reflect(np.eye(n)[:, :5]))) < 1e-6


def test_upper_triangle_gram_declines_what_it_does_not_cover():
    import scipy.sparse

    from fastkern.pairwise import _upper_triangle_gram

    X = np.random.default_rng(0).standard_normal((20, 3))
    assert _upper_triangle_gram(X.astype(np.float32), "rbf") is None
    assert _upper_triangle_gram(scipy.sparse.csr_matrix(X), "rbf") is None
    for kernel in ("linear", "poly", "exponential", "cosine", "chi2"):
        assert _upper_triangle_gram(X, kernel) is None


@pytest.mark.parametrize("kernel", ["rbf", "laplacian", "sigmoid"])
def test_block_krylov_on_the_bounded_kernels_matches_dense(kernel):
    # The bounded kernels' Gram is written above the diagonal only and the
    # products read only that; the answer is the full Gram's (scikit-learn's
    # ARPACK solve to machine precision) to rounding.
    from sklearn.metrics.pairwise import pairwise_kernels

    X = np.random.default_rng(3).standard_normal((2100, 6))
    upper = KernelPCA(n_components=5, kernel=kernel, gamma=0.05, coef0=1.0,
                      eigen_solver="block_krylov", random_state=0, tol=1e-12).fit(X)
    full = SkKernelPCA(n_components=5, kernel="precomputed", eigen_solver="arpack", tol=0,
                       random_state=0).fit(
        pairwise_kernels(X, metric=kernel, gamma=0.05))
    np.testing.assert_allclose(upper.eigenvalues_, full.eigenvalues_, rtol=1e-11)
    from scipy.linalg import subspace_angles
    assert np.max(subspace_angles(upper.eigenvectors_, full.eigenvectors_)) < 1e-8
    Z = upper.transform(X[:9])
    Z_ref = full.transform(pairwise_kernels(X[:9], X, metric=kernel, gamma=0.05))
    np.testing.assert_allclose(Z * np.sign(np.sum(Z * Z_ref, axis=0)), Z_ref, atol=1e-9)


def _centred_top(K, k):
    """The top k eigenvalues of the double-centred K, by a plain full numpy eigh."""
    n = K.shape[0]
    H = np.eye(n) - 1.0 / n
    return np.linalg.eigvalsh(H @ K @ H)[::-1][:k]


def _polygon(n):
    """n points on a circle: the RBF Gram is circulant, its eigenvalues come in equal pairs."""
    t = 2 * np.pi * np.arange(n) / n
    return np.c_[np.cos(t), np.sin(t)]


_ALL_SOLVERS = ["dense", "block_krylov", "thick_restart_lanczos", "arpack", "auto", "randomized",
                "matrix-free",
                "nystrom", "incomplete_cholesky"]


@pytest.mark.parametrize("solver", _ALL_SOLVERS)
@pytest.mark.parametrize("n", [20, 300])
@pytest.mark.parametrize("k", [1, 5])
def test_repeated_top_eigenvalue_gives_every_component(solver, n, k):
    # The centred identity has eigenvalue 1 with multiplicity n - 1: LAPACK's
    # syevr, asked for the top k alone, returned fewer pairs (none or one).
    X = np.eye(n)
    kpca = KernelPCA(k, eigen_solver=solver, random_state=0).fit(X)
    np.testing.assert_allclose(kpca.eigenvalues_, _centred_top(X @ X.T, k), rtol=1e-8)
    U = kpca.eigenvectors_
    assert U.shape == (n, k)
    np.testing.assert_allclose(U.T @ U, np.eye(k), atol=1e-8)
    np.testing.assert_allclose(kpca.transform(X), kpca.fit_transform(X), atol=1e-8)


@pytest.mark.parametrize("solver", _ALL_SOLVERS)
@pytest.mark.parametrize("n", [40, 301])
def test_clustered_spectrum_matches_numpy_eigh(solver, n):
    X = _polygon(n)
    params = dict(kernel="rbf", gamma=0.5)
    K = fastkern.rbf_kernel(X, gamma=0.5)
    k = 6
    kpca = KernelPCA(k, eigen_solver=solver, random_state=0, **params).fit(X)
    ref = _centred_top(K, k)
    # Equal pairs at the top: the solvers must return both members of each.
    assert abs(ref[0] - ref[1]) < 1e-10 * ref[0]
    np.testing.assert_allclose(kpca.eigenvalues_, ref, rtol=1e-7, atol=1e-12 * ref[0])


@parametrize_with_checks(
    [KernelPCA(n_components=2, eigen_solver="matrix-free", random_state=0),
     KernelPCA(n_components=2, eigen_solver="nystrom", random_state=0),
     KernelPCA(eigen_solver="matrix-free"), KernelPCA(eigen_solver="nystrom")],
    expected_failed_checks=lambda est: {},
)
def test_sklearn_compatible_large_n_solvers(estimator, check):
    check(estimator)


@pytest.mark.parametrize("solver", ["matrix-free", "nystrom"])
def test_large_n_solvers_keep_every_component_for_none(solver):
    # As scikit-learn: n_components=None is every component with a positive
    # eigenvalue (here n - 1 of the centred Gram, whose landmarks are all the
    # rows for nystrom), the same as the dense solver's.
    X = np.random.default_rng(4).standard_normal((70, 3))
    dense = KernelPCA(kernel="rbf", gamma=0.3, eigen_solver="dense").fit(X)
    est = KernelPCA(kernel="rbf", gamma=0.3, eigen_solver=solver, random_state=0).fit(X)
    assert est.eigenvalues_.shape == dense.eigenvalues_.shape == (69,)
    np.testing.assert_allclose(est.eigenvalues_, dense.eigenvalues_, rtol=1e-6,
                               atol=1e-9 * dense.eigenvalues_[0])
    Z, Zd = est.transform(X[:5]), dense.transform(X[:5])
    lead = dense.eigenvalues_ > 1e-6 * dense.eigenvalues_[0]
    np.testing.assert_allclose(np.abs(Z[:, lead]), np.abs(Zd[:, lead]), atol=1e-6)


def test_none_beyond_the_memory_budget_names_n_components():
    X = np.random.default_rng(5).standard_normal((400, 3))
    for solver in ("matrix-free", "nystrom", "auto"):
        with pytest.raises(ValueError, match="n_components=None keeps every component"):
            KernelPCA(kernel="rbf", eigen_solver=solver, memory_budget="1MB").fit(X)


@pytest.mark.parametrize("solver", ["matrix-free", "nystrom"])
@pytest.mark.parametrize("container", [sp.csr_matrix, sp.csr_array, sp.csc_matrix],
                         ids=["csr_matrix", "csr_array", "csc_matrix"])
def test_large_n_solvers_refuse_sparse_input_by_name(solver, container):
    X = container(np.eye(20))
    kpca = KernelPCA(2, eigen_solver=solver)
    assert not kpca.__sklearn_tags__().input_tags.sparse
    with pytest.raises(TypeError, match=f"eigen_solver='{solver}' does not support sparse"):
        kpca.fit(X)
    kpca.fit(np.eye(20))
    with pytest.raises(TypeError, match="sparse"):
        kpca.transform(X)


@pytest.mark.parametrize("gamma", [1e-9, 1e-6, 0.1])
def test_incomplete_cholesky_is_relative_to_the_centred_problem(gamma):
    # An RBF of tiny gamma is a nearly constant Gram: the eigenvalues of the
    # centred Gram are ~gamma, and an absolute tol on the uncentred diagonal
    # stopped at rank 1 (eigenvalues [7.6e-15, 0, 0] against 7.6e-7...).
    X = np.random.default_rng(11).normal(size=(300, 3))
    dense = KernelPCA(3, kernel="rbf", gamma=gamma, eigen_solver="dense").fit(X)
    ichol = KernelPCA(3, kernel="rbf", gamma=gamma, eigen_solver="incomplete_cholesky").fit(X)
    np.testing.assert_allclose(ichol.eigenvalues_, dense.eigenvalues_, rtol=1e-4)
    np.testing.assert_allclose(np.abs(ichol.transform(X_TEST[:, :3])),
                               np.abs(dense.transform(X_TEST[:, :3])),
                               rtol=1e-3, atol=1e-3 * np.sqrt(dense.eigenvalues_[0]))


# -- the solver table ----------------------------------------------------------------------------

def test_solver_names_come_from_one_table():
    from pathlib import Path

    from fastkern.cli import kpca as kpca_command

    names = set(_kpca_solvers.SOLVERS)
    assert set(_kpca_solvers.EIGEN_SOLVERS) == names | {"auto"}
    (options,) = KernelPCA._parameter_constraints["eigen_solver"]
    assert options.options == names | {"auto"} | set(_kpca_solvers.DEPRECATED_SOLVERS)
    assert kpca_command.solvers()[0] == "auto"
    assert set(kpca_command.solvers()) == names | {"auto"}
    # The documentation lists every solver.
    doc = KernelPCA.__doc__
    listed = doc[doc.index("eigen_solver : str"):doc.index("tol : float")]
    docs = Path(__file__).resolve().parents[1] / "docs" / "user_guide"
    for text in (listed, (docs / "kernel_pca.rst").read_text(encoding="utf-8")):
        assert all(f'"{name}"' in text for name in names), text
    cli_page = (docs / "cli.rst").read_text(encoding="utf-8")
    assert all(name in cli_page for name in names)


@pytest.mark.parametrize("name", list(_kpca_solvers.SOLVERS))
def test_every_solver_of_the_table_fits_and_transforms(name):
    # Each solver, at settings where it is exact, gives the dense solver's
    # eigenvalues and a transform of the training set equal to its embedding.
    X = X_TRAIN[:120]
    extra = dict(n_landmarks=X.shape[0]) if name == "nystrom" else {}
    if name == "incomplete_cholesky":
        extra = dict(tol=1e-14)
    est = KernelPCA(3, kernel="rbf", gamma=0.1, eigen_solver=name, random_state=0, **extra)
    Z = est.fit_transform(X)
    ref = SkKernelPCA(3, kernel="rbf", gamma=0.1, eigen_solver="dense").fit(X)
    assert est._fit_solver == name
    np.testing.assert_allclose(est.eigenvalues_, ref.eigenvalues_, rtol=1e-6)
    np.testing.assert_allclose(est.transform(X), Z, atol=1e-6 * np.abs(Z).max())
    _assert_same_embedding_up_to_sign(est.transform(X_TEST), ref.transform(X_TEST), 1e-5)
    assert est.__sklearn_tags__().input_tags.sparse == _kpca_solvers.SOLVERS[name].sparse


@pytest.mark.parametrize("solver", list(_kpca_solvers.SOLVERS))
@pytest.mark.parametrize("kernel,gamma", [("linear", None), ("linear", 0.7), ("rbf", None),
                                          ("chi2", None), ("rbf", 0.3)])
def test_gamma_is_scikit_learns_for_every_solver(solver, kernel, gamma):
    # scikit-learn's KernelPCA: gamma_ is gamma, or 1 / n_features when None,
    # whatever the kernel.  The matrix-free and Nystroem solvers gave None for
    # the linear kernel and their kernel's own default (1.0 for chi2) instead.
    X = np.abs(np.random.default_rng(5).normal(size=(60, 4)))
    expected = 1 / X.shape[1] if gamma is None else gamma
    if kernel != "chi2":  # not a KernelPCA kernel of scikit-learn's
        assert SkKernelPCA(3, kernel=kernel, gamma=gamma).fit(X).gamma_ == expected
    est = KernelPCA(3, kernel=kernel, gamma=gamma, eigen_solver=solver,
                    random_state=0).fit(X)
    assert est.gamma_ == expected
    # ...and it is the gamma the kernel is evaluated with, on every path.
    ref = fastkern.pairwise_kernels(X, metric=kernel, **({"gamma": expected}
                                                         if kernel != "linear" else {}))
    np.testing.assert_allclose(est.kernel_spec_.gram(X), ref, rtol=1e-12)


@pytest.mark.parametrize("solver", list(_kpca_solvers.SOLVERS))
def test_kernel_spec_is_built_once_and_pickles_and_clones(solver):
    import pickle

    from sklearn.base import clone

    X = np.random.default_rng(6).normal(size=(60, 4))
    est = KernelPCA(3, kernel="rbf", gamma="median", eigen_solver=solver,
                    random_state=0).fit(X)
    assert dict(est.kernel_spec_.params) == {"gamma": est.gamma_}
    again = pickle.loads(pickle.dumps(est))
    assert again.kernel_spec_ == est.kernel_spec_
    np.testing.assert_allclose(again.transform(X[:5]), est.transform(X[:5]), rtol=1e-10)
    assert not hasattr(clone(est), "kernel_spec_")


@pytest.mark.parametrize("n", [301, _kpca_solvers.ARPACK_SYMV_ROWS - 1,
                               _kpca_solvers.ARPACK_SYMV_ROWS, 701])
@pytest.mark.parametrize("n_threads", [1, _kpca_solvers.ARPACK_SYMV_MAX_THREADS + 1])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_arpack_on_either_product_matches_numpy_eigh(n, n_threads, dtype):
    # ARPACK's products read one triangle of a Gram fastkern computed on few
    # BLAS threads or below ARPACK_SYMV_ROWS rows, and all of it otherwise:
    # the same eigenpairs either way, for both dtypes.
    X = np.random.default_rng(n).standard_normal((n, 6)).astype(dtype)
    kpca = KernelPCA(4, kernel="rbf", gamma=0.3, eigen_solver="arpack", random_state=0,
                     n_threads=n_threads).fit(X)
    K = fastkern.rbf_kernel(X.astype(np.float64), gamma=0.3)
    H = np.eye(n) - 1.0 / n
    w, V = np.linalg.eigh(H @ K @ H)
    rtol = 1e-5 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(kpca.eigenvalues_, w[::-1][:4], rtol=rtol)
    # The same subspace: the top 4 of eigh are well separated here.
    U = kpca.eigenvectors_.astype(np.float64)
    overlap = np.linalg.svd(V[:, ::-1][:, :4].T @ U, compute_uv=False)
    np.testing.assert_allclose(overlap, 1.0, atol=1e-4 if dtype == np.float32 else 1e-9)


# -- transform without the cross Gram (fastkern._operator.kernel_times) -------

def _centred_projection_reference(est, Xt, kernel, **kw):
    """scikit-learn's centring of k(Xt, X_fit_) with the training Gram's means, times
    the scaled eigenvectors: the explicit formula, in float64."""
    from sklearn.metrics.pairwise import pairwise_kernels

    Xf = np.asarray(est.X_fit_, dtype=np.float64)
    Xt = np.asarray(Xt, dtype=np.float64)
    K_fit = pairwise_kernels(Xf, metric=kernel, **kw)
    K = pairwise_kernels(Xt, Xf, metric=kernel, **kw)
    Kc = K - K_fit.mean(axis=0) - K.mean(axis=1, keepdims=True) + K_fit.mean()
    A = est.eigenvectors_.astype(np.float64) / np.sqrt(est.eigenvalues_.astype(np.float64))
    return Kc @ A, np.abs(K) @ np.abs(A)


@pytest.mark.parametrize("case", ["rbf", "rbf-blas", "laplacian", "poly", "linear-offset",
                                  "tiny-gamma", "near-duplicates"])
@pytest.mark.parametrize("solver", ["dense", "thick_restart_lanczos", "arpack", "block_krylov"])
@pytest.mark.parametrize("n_test", [1, 256, 257])  # around the 256-row tiles
def test_transform_matches_explicit_centring(case, solver, n_test):
    rng = np.random.default_rng(n_test)
    X, Xt = rng.standard_normal((300, 6)), rng.standard_normal((n_test, 6))
    kernel, kw = "rbf", {"gamma": 0.2}
    if case == "rbf-blas":
        X, Xt, kw = rng.standard_normal((300, 40)), rng.standard_normal((n_test, 40)), {
            "gamma": 0.01}
    elif case == "laplacian":
        kernel = "laplacian"
    elif case == "poly":
        kernel, kw = "poly", {"gamma": 0.1, "degree": 3, "coef0": 1.0}
    elif case == "linear-offset":
        # Gram entries ~6e6 whose centred values are ~1: the centring cancels.
        kernel, kw, X, Xt = "linear", {}, X + 1e3, Xt + 1e3
    elif case == "tiny-gamma":
        kw = {"gamma": 1e-7}
    elif case == "near-duplicates":
        X[1::2] = X[::2] + 1e-9 * rng.standard_normal((150, 6))
        Xt[::2] = X[:len(Xt[::2])]
    est = KernelPCA(4, kernel=kernel, eigen_solver=solver, random_state=0, **kw).fit(X)
    ref, scale = _centred_projection_reference(est, Xt, kernel, **kw)
    np.testing.assert_allclose(est.transform(Xt), ref, rtol=0, atol=1e-12 * scale.max())


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_transform_is_the_same_on_any_thread_count_and_layout(dtype):
    rng = np.random.default_rng(3)
    X = rng.standard_normal((400, 5)).astype(dtype)
    Xt = rng.standard_normal((600, 5)).astype(dtype)
    est = KernelPCA(3, kernel="rbf", gamma=0.3, eigen_solver="dense").fit(X)
    ref = same_on_threads_and_layouts(est, "transform", Xt)
    assert ref.dtype == dtype
    # float64 rows on a float32 fit are projected as float32 rows, as before.
    np.testing.assert_array_equal(est.transform(Xt.astype(np.float64)), ref)
    expected, scale = _centred_projection_reference(est, Xt, "rbf", gamma=0.3)
    tol = 1e-12 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(ref, expected, rtol=0, atol=tol * scale.max())


@pytest.mark.parametrize("kernel", ["anova", "bessel"])
def test_gamma_none_is_the_kernels_own_default_for_fastkerns_kernels(kernel, tmp_path):
    # scikit-learn's KernelPCA reads gamma=None as 1 / n_features for its
    # kernels; the kernels fastkern adds take their own default (1), as
    # KernelRidge, the Gram functions and the command line do: the Python fit
    # gave eigenvalues [355.1, 277.1] where `fastkern kpca` gave [238.9, 203.3].
    from fastkern.cli import main

    X = np.random.default_rng(3).standard_normal((80, 4))
    model = fastkern.KernelPCA(2, kernel=kernel).fit(X)
    assert model.gamma_ == 1.0
    K = fastkern.pairwise_kernels(X, metric=kernel, degree=3)
    reference = fastkern.KernelPCA(2, kernel="precomputed").fit(K)
    np.testing.assert_allclose(model.eigenvalues_, reference.eigenvalues_, rtol=1e-12)
    data = tmp_path / "x.csv"
    np.savetxt(data, X, delimiter=",")
    out = tmp_path / "t.csv"
    assert main(["kpca", str(data), "--kernel", kernel, "--no-scale", "--no-header",
                 "--components", "2", "--solver", "dense", "--out", str(out)]) == 0
    # The command line's scores are the model's (signs free).
    scores = np.loadtxt(out, delimiter=",", skiprows=1)
    np.testing.assert_allclose(np.abs(scores[:, -2:]), np.abs(model.transform(X)),
                               rtol=1e-8, atol=1e-8)


def test_gamma_none_stays_one_over_n_features_for_scikit_learns_kernels():
    X = np.abs(np.random.default_rng(4).standard_normal((30, 5)))
    for kernel in ["rbf", "chi2", "laplacian", "sigmoid", "poly", "linear"]:
        assert fastkern.KernelPCA(2, kernel=kernel).fit(X).gamma_ == 0.2
