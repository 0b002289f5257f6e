"""KernelFDA against independent references.

References: the n x n generalized eigenproblem of Mika et al. written out in
NumPy and solved by scipy.linalg.eigh; regularised LDA on explicit
incomplete-Cholesky features (the low-rank solver); scikit-learn's
LinearDiscriminantAnalysis for the linear kernel; KernelSIR with one slice
per class (the same subspace).  Estimators run with n_threads=1 unless the
thread count is what is tested: the machine is shared.
"""
import importlib.util
import pathlib
import tracemalloc
import warnings

import numpy as np
import pytest
from scipy import linalg, sparse
from sklearn.datasets import load_iris, load_wine, make_circles
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score
from sklearn.neighbors import KNeighborsClassifier
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

import fastkern
from fastkern import KernelFDA, KernelSIR, incomplete_cholesky

BENCH = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "fda_accuracy.py"


def assert_equal_up_to_sign(A, B, rtol=1e-8):
    assert A.shape == B.shape
    scale = np.abs(B).max(axis=0)
    for j in range(A.shape[1]):
        s = np.sign(A[:, j] @ B[:, j])
        np.testing.assert_allclose(s * A[:, j], B[:, j], rtol=0, atol=rtol * scale[j])


def class_data(rng, n, n_classes, p=3, spread=1.5):
    """Gaussian classes around random centres; every class present, sizes uneven."""
    labels = np.arange(n) % n_classes
    labels[: n // 3] = 0  # uneven class sizes, all classes still present when n >= 2 C
    labels[:n_classes] = np.arange(n_classes)
    rng.shuffle(labels)
    centres = spread * rng.normal(size=(n_classes, p))
    return centres[labels] + rng.normal(size=(n, p)), labels


def nearest_centroid(Z, centroids):
    d = ((Z[:, None, :] - centroids[None]) ** 2).sum(-1)
    return np.argmin(d, axis=1)


def reference_kfda(K, Kt, labels, reg):
    """Mika et al.'s multiclass KFD as n x n matrices, solved by scipy.linalg.eigh.

    M a = lambda (N + c K~) a, M = K~ L K~, N = K~ (I - L) K~, c = reg trace(K~),
    L_ij = [c_i = c_j] / n_{c_j}.  J = 11^T / n makes the right side positive
    definite (K~ 1 = 0 and M 1 = 0, so J only meets the constant vector, whose
    eigenvalue 0 is dropped).  a^T (N + c K~) a = n: whitened projections.
    """
    n = K.shape[0]
    C = labels.max() + 1
    counts = np.bincount(labels)
    H = np.eye(n) - np.ones((n, n)) / n
    Kc = H @ K @ H
    Ktc = (Kt - K.mean(axis=0)) - Kt.mean(axis=1, keepdims=True) + K.mean()
    L = (labels[:, None] == labels[None, :]) / counts[labels][None, :]
    M = Kc @ L @ Kc
    N = Kc @ (np.eye(n) - L) @ Kc
    c = reg * np.trace(Kc)
    w, A = linalg.eigh(M, N + c * Kc + np.ones((n, n)) / n)
    w, A = w[::-1][:C - 1], A[:, ::-1][:, :C - 1]
    A *= np.sqrt(n / np.einsum("ij,ij->j", A, (N + c * Kc) @ A))
    train, test = Kc @ A, Ktc @ A
    centroids = np.array([train[labels == h].mean(axis=0) for h in range(C)])
    return w, train, test, centroids


# ----------------------------------------------------------------- estimator checks

@parametrize_with_checks([
    KernelFDA(n_threads=1),
    KernelFDA(kernel="linear", n_components=1, n_threads=1),
    KernelFDA(solver="inchol", max_rank=20, n_threads=1),
])
def test_sklearn_compatible(estimator, check):
    check(estimator)


# ------------------------------------------------------------- dense vs reference

@pytest.mark.parametrize("n, C, reg", [(2, 2, 1e-2), (13, 3, 1e-2), (40, 4, 1e-3),
                                       (257, 5, 1e-3)])
def test_matches_generalized_eigenproblem(n, C, reg):
    rng = np.random.default_rng(n)
    X, labels = class_data(rng, n, C)
    Xt = rng.normal(size=(9, 3)) * 2
    gamma = 0.4
    w, train, test, centroids = reference_kfda(rbf_kernel(X, gamma=gamma),
                                               rbf_kernel(Xt, X, gamma=gamma), labels, reg)
    names = np.array(["ant", "bee", "cat", "dog", "eel"])[labels]
    est = KernelFDA(gamma=gamma, regularization=reg, n_threads=1).fit(X, names)
    np.testing.assert_array_equal(est.classes_, np.array(["ant", "bee", "cat", "dog", "eel"])[:C])
    assert est.n_components_ == C - 1
    np.testing.assert_allclose(est.eigenvalues_, w, rtol=1e-7)
    np.testing.assert_allclose(est.explained_variance_ratio_, w / w.sum(), rtol=1e-7)
    assert_equal_up_to_sign(est.transform(Xt), test, rtol=1e-7)
    assert_equal_up_to_sign(est.transform(X), train, rtol=1e-7)
    # The centroids match the reference's up to the same column signs.
    signs = np.sign(np.einsum("ij,ij->j", est.transform(X), train))
    np.testing.assert_allclose(est.centroids_ * signs, centroids,
                               atol=1e-7 * np.abs(centroids).max())
    np.testing.assert_array_equal(est.predict(Xt), est.classes_[nearest_centroid(test, centroids)])
    np.testing.assert_array_equal(est.predict(X), est.classes_[nearest_centroid(train, centroids)])


def test_projection_is_whitened():
    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    reg = 1e-2
    est = KernelFDA(regularization=reg, n_threads=1).fit(X, y)
    Z = est.transform(X)
    means = np.array([Z[y == h].mean(axis=0) for h in range(3)])
    W = Z - means[y]
    # (within scatter + ridge) / n = I, the ridge term being c a^T K~ a.
    Kc = rbf_kernel(X, gamma=1 / 13)
    Kc = Kc - Kc.mean(0) - Kc.mean(1)[:, None] + Kc.mean()
    ridge = reg * np.trace(Kc) * est.dual_coef_.T @ Kc @ est.dual_coef_
    np.testing.assert_allclose((W.T @ W + ridge) / len(y), np.eye(2), atol=1e-8)
    # Fisher ratios: between scatter / (within + ridge) on the projections.
    counts = np.bincount(y)
    between = (counts[:, None] * means ** 2).sum(axis=0)
    np.testing.assert_allclose(between / len(y), est.eigenvalues_, rtol=1e-8)
    assert est.eigenvalues_[0] > est.eigenvalues_[1] > 0


def test_same_subspace_as_kernel_sir_with_class_slices():
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    for reg in (1e-3, 1e-1):
        fda = KernelFDA(gamma=0.3, regularization=reg, n_threads=1).fit(X, y)
        sir = KernelSIR(n_components=2, gamma=0.3, slicing="classes", regularization=reg,
                        n_threads=1).fit(X, y)
        lam = fda.eigenvalues_
        np.testing.assert_allclose(sir.eigenvalues_, lam / (1 + lam), rtol=1e-8)
        Zf, Zs = fda.transform(X), sir.transform(X)
        for j in range(2):
            assert abs(np.corrcoef(Zf[:, j], Zs[:, j])[0, 1]) == pytest.approx(1.0, abs=1e-10)


# ------------------------------------------------------------ linear kernel vs LDA

def test_linear_kernel_is_lda():
    X, y = load_wine(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    Xtr, Xte, ytr = X[::2], X[1::2], y[::2]
    fda = KernelFDA(kernel="linear", regularization=1e-10, n_threads=1).fit(Xtr, ytr)
    for solver in ("svd", "eigen"):
        lda = LinearDiscriminantAnalysis(solver=solver).fit(Xtr, ytr)
        np.testing.assert_allclose(fda.explained_variance_ratio_,
                                   lda.explained_variance_ratio_, rtol=1e-6)
        # The eigen solver's transform is not centred (X @ scalings_): centre by
        # the training mean, as KernelFDA and the svd solver do.
        Zl = lda.transform(Xte) - (lda.transform(Xtr).mean(axis=0) if solver == "eigen" else 0)
        # scikit-learn 1.9 whitens with the pooled within-class covariance over n,
        # older versions over n - C: put LDA's own scaling on the 1.9 footing.
        Ztr = lda.transform(Xtr)
        means = np.array([Ztr[ytr == c].mean(axis=0) for c in lda.classes_])
        pooled = ((Ztr - means[np.searchsorted(lda.classes_, ytr)]) ** 2).mean(axis=0)
        assert_equal_up_to_sign(fda.transform(Xte), Zl / np.sqrt(pooled), rtol=1e-6)
    # predict ignores the class proportions: LDA with equal priors.
    lda_eq = LinearDiscriminantAnalysis(priors=np.full(3, 1 / 3)).fit(Xtr, ytr)
    np.testing.assert_array_equal(fda.predict(Xte), lda_eq.predict(Xte))
    np.testing.assert_array_equal(fda.predict(Xtr), lda_eq.predict(Xtr))
    assert fda.score(Xte, y[1::2]) == lda_eq.score(Xte, y[1::2])


def test_linear_kernel_subspace_angles_and_predictions():
    rng = np.random.default_rng(3)
    n, p, C = 600, 8, 6
    X, y = class_data(rng, n, C, p=p, spread=1.0)
    X = X @ rng.normal(size=(p, p))  # correlated features: the whitening matters
    Xt, _ = class_data(np.random.default_rng(4), 300, C, p=p, spread=1.0)
    lda = LinearDiscriminantAnalysis().fit(X, y)
    lda_eq = LinearDiscriminantAnalysis(priors=np.full(C, 1 / C)).fit(X, y)
    for k in (2, 5):
        fda = KernelFDA(n_components=k, kernel="linear", regularization=1e-10,
                        n_threads=1).fit(X, y)
        # The primal directions w = X_fit^T a span LDA's leading discriminant subspace.
        W = fda.X_fit_.T @ fda.dual_coef_[:, :k]
        angles = linalg.subspace_angles(W, lda.scalings_[:, :k])
        assert angles.max() < 1e-6
        assert fda.transform(Xt).shape == (300, k)
        np.testing.assert_array_equal(fda.predict(Xt), lda_eq.predict(Xt))
    # A larger ridge moves the subspace (the test above can fail).
    shrunk = KernelFDA(n_components=2, kernel="linear", regularization=0.5,
                       n_threads=1).fit(X, y)
    W = shrunk.X_fit_.T @ shrunk.dual_coef_[:, :2]
    assert linalg.subspace_angles(W, lda.scalings_[:, :2]).max() > 1e-2


def test_nonlinear_classes_beat_lda():
    X, y = make_circles(400, noise=0.05, factor=0.4, random_state=0)
    Xt, yt = make_circles(400, noise=0.05, factor=0.4, random_state=1)
    assert KernelFDA(gamma=2.0, n_threads=1).fit(X, y).score(Xt, yt) >= 0.97
    # Concentric circles have equal class means: the linear discriminant is chance.
    assert LinearDiscriminantAnalysis().fit(X, y).score(Xt, yt) < 0.7


# ------------------------------------------------------------ low-rank solver

def test_inchol_matches_regularised_lda_on_its_features():
    rng = np.random.default_rng(5)
    n, C, reg, gamma, r = 301, 4, 1e-3, 0.5, 25
    X, y = class_data(rng, n, C)
    Xt = rng.normal(size=(17, 3)) * 2
    est = KernelFDA(gamma=gamma, regularization=reg, solver="inchol", max_rank=r,
                    n_threads=1).fit(X, y)
    G, piv = incomplete_cholesky(X, gamma=gamma, max_rank=r, tol=1e-6)[:2]
    assert est.rank_ == r == piv.size
    np.testing.assert_array_equal(est.X_fit_, X[piv])
    Gc = G - G.mean(axis=0)
    counts = np.bincount(y)
    means = np.array([Gc[y == h].mean(axis=0) for h in range(C)])
    Sb = (counts[:, None] * means).T @ means
    Sw = (Gc - means[y]).T @ (Gc - means[y])
    w, U = linalg.eigh(Sb, Sw + reg * np.trace(Gc.T @ Gc) * np.eye(r))
    w, U = w[::-1][:C - 1], U[:, ::-1][:, :C - 1] * np.sqrt(n)
    np.testing.assert_allclose(est.eigenvalues_, w, rtol=1e-7)
    assert_equal_up_to_sign(est.transform(X), Gc @ U, rtol=1e-7)
    # A new point's features: G_P g = k(x_P, x).
    Gt = linalg.solve(G[piv], rbf_kernel(X[piv], Xt, gamma=gamma)).T
    assert_equal_up_to_sign(est.transform(Xt), (Gt - G.mean(axis=0)) @ U, rtol=1e-6)


def test_inchol_full_rank_is_the_dense_problem():
    rng = np.random.default_rng(6)
    X, y = class_data(rng, 60, 3)
    Xt = rng.normal(size=(11, 3))
    dense = KernelFDA(gamma=1.0, n_threads=1).fit(X, y)
    full = KernelFDA(gamma=1.0, solver="inchol", tol=0.0, n_threads=1).fit(X, y)
    assert full.rank_ == 60
    np.testing.assert_allclose(full.eigenvalues_, dense.eigenvalues_, rtol=1e-8)
    assert_equal_up_to_sign(full.transform(Xt), dense.transform(Xt), rtol=1e-7)
    np.testing.assert_array_equal(full.predict(Xt), dense.predict(Xt))


def test_inchol_memory_is_linear_in_n():
    rng = np.random.default_rng(7)
    N, r = 4000, 50
    X, y = class_data(rng, N, 3)
    KernelFDA(solver="inchol", max_rank=r, n_threads=1).fit(X[:100], y[:100])
    tracemalloc.start()
    try:
        est = KernelFDA(solver="inchol", max_rank=r, n_threads=1).fit(X, y)
        est.predict(X)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert est.X_fit_.shape == (r, 3)
    # G is centred in place and the within scatter accumulated by row blocks:
    # measured 2.6 N r doubles (4.1 N r before); an N x N array is 80 N r.
    assert peak < 3.2 * N * r * 8
    assert peak < N * N * 8 / 20


def test_dense_fit_allocates_one_gram():
    # The Gram is centred and factorised in place; a second n x n would double the peak.
    rng = np.random.default_rng(8)
    n = 1000
    X, y = class_data(rng, n, 4)
    KernelFDA(n_threads=1).fit(X[:50], y[:50])
    tracemalloc.start()
    try:
        KernelFDA(n_threads=1).fit(X, y)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1.3 * n * n * 8


# ------------------------------------------------------------ classifier interface

def test_decision_function_and_predict_agree():
    X, y = load_iris(return_X_y=True)
    est = KernelFDA(n_threads=1).fit(X, y)
    scores = est.decision_function(X)
    assert scores.shape == (150, 3)
    np.testing.assert_array_equal(est.predict(X), est.classes_[np.argmax(scores, axis=1)])
    Z = est.transform(X)
    np.testing.assert_allclose(scores[:, 1], -0.5 * ((Z - est.centroids_[1]) ** 2).sum(1))
    assert not hasattr(est, "predict_proba")
    binary = KernelFDA(n_threads=1).fit(X[50:], y[50:])
    dec = binary.decision_function(X[50:])
    assert dec.shape == (100,)
    np.testing.assert_array_equal(binary.predict(X[50:]), np.where(dec > 0, 2, 1))
    assert binary.score(X[50:], y[50:]) > 0.9


def test_n_components_and_unidentifiable_directions():
    X, y = load_iris(return_X_y=True)
    one = KernelFDA(n_components=1, n_threads=1).fit(X, y)
    both = KernelFDA(n_threads=1).fit(X, y)
    assert one.transform(X).shape == (150, 1)
    np.testing.assert_allclose(one.transform(X), both.transform(X)[:, :1])
    # predict uses every discriminant direction, whatever n_components.
    np.testing.assert_array_equal(one.predict(X), both.predict(X))
    # A linear kernel on one feature identifies one direction out of C - 1 = 2.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        auto = KernelFDA(kernel="linear", n_threads=1).fit(X[:, :1], y)
    assert auto.n_components_ == 1 and auto.eigenvalues_.shape == (1,)
    with pytest.warns(UserWarning, match="only 1 discriminant direction"):
        two = KernelFDA(n_components=2, kernel="linear", n_threads=1).fit(X[:, :1], y)
    Z = two.transform(X[:, :1])
    np.testing.assert_array_equal(Z[:, 1], 0.0)
    assert np.abs(Z[:, 0]).max() > 0


def test_precomputed_kernel():
    rng = np.random.default_rng(9)
    X, y = class_data(rng, 80, 3)
    Xt = rng.normal(size=(11, 3))
    K, Kt = rbf_kernel(X, gamma=0.2), rbf_kernel(Xt, X, gamma=0.2)
    ref = KernelFDA(gamma=0.2, n_threads=1).fit(X, y)
    K_in = K.copy()
    pre = KernelFDA(kernel="precomputed", n_threads=1).fit(K_in, y)
    np.testing.assert_array_equal(K_in, K)  # the user's kernel is not centred in place
    np.testing.assert_allclose(pre.transform(Kt), ref.transform(Xt), atol=1e-10)
    np.testing.assert_array_equal(pre.predict(Kt), ref.predict(Xt))
    with pytest.raises(ValueError, match="square kernel matrix"):
        KernelFDA(kernel="precomputed").fit(K[:, :50], y)
    with pytest.raises(ValueError, match="solver='inchol'.*precomputed"):
        KernelFDA(kernel="precomputed", solver="inchol").fit(K, y)


@pytest.mark.parametrize("layout", ["float32", "fortran", "strided", "readonly", "sparse"])
def test_input_layouts_and_threads(layout):
    rng = np.random.default_rng(10)
    X, y = class_data(rng, 97, 3)
    ref = KernelFDA(n_threads=1).fit(X, y)
    tol = 1e-10
    if layout == "float32":
        Xv, tol = X.astype(np.float32), 1e-4
    elif layout == "fortran":
        Xv = np.asfortranarray(X)
    elif layout == "strided":
        wide = np.zeros((97, 6))
        wide[:, ::2] = X
        Xv = wide[:, ::2]
    elif layout == "readonly":
        Xv = X.copy()
        Xv.flags.writeable = False
    else:
        Xv = sparse.csr_matrix(X)
    est = KernelFDA(n_threads=2).fit(Xv, y)
    scale = np.abs(ref.transform(X)).max()
    np.testing.assert_allclose(est.transform(Xv), ref.transform(X), atol=tol * scale)
    assert est.transform(Xv).dtype == np.float64
    agree = np.mean(est.predict(Xv) == ref.predict(X))
    assert agree == 1.0


def test_bad_input():
    rng = np.random.default_rng(11)
    X, y = class_data(rng, 20, 3)
    with pytest.raises(ValueError, match="at least 2 classes; y has 1 class"):
        KernelFDA().fit(X, np.zeros(20))
    with pytest.raises(ValueError, match="at least 2 classes; y has 1 class \\('a'\\)"):
        KernelFDA().fit(X, np.array(["a"] * 20))
    Xn = X.copy()
    Xn[3, 1] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        KernelFDA().fit(Xn, y)
    yn = y.astype(float)
    yn[0] = np.nan
    with pytest.raises(ValueError, match="Input y contains NaN"):
        KernelFDA().fit(X, yn)
    with pytest.raises(ValueError, match="inconsistent numbers of samples: \\[20, 19\\]"):
        KernelFDA().fit(X, y[:19])
    with pytest.raises(ValueError, match="Unknown label type: continuous"):
        KernelFDA().fit(X, rng.normal(size=20))
    with pytest.raises(ValueError, match="n_components=3 must be <= n_classes - 1 = 2"):
        KernelFDA(n_components=3).fit(X, y)
    with pytest.raises(InvalidParameterError, match="'n_components' parameter"):
        KernelFDA(n_components=0).fit(X, y)
    for bad in (0.0, -1e-3):
        with pytest.raises(InvalidParameterError, match="'regularization' parameter"):
            KernelFDA(regularization=bad).fit(X, y)
    with pytest.raises(InvalidParameterError, match="'solver' parameter"):
        KernelFDA(solver="eig").fit(X, y)
    with pytest.raises(InvalidParameterError, match="'kernel' parameter"):
        KernelFDA(kernel="gaussian").fit(X, y)
    with pytest.raises(ValueError, match="all samples coincide"):
        KernelFDA().fit(np.ones((20, 3)), y)
    with pytest.raises(ValueError, match="all samples coincide"):
        KernelFDA(solver="inchol").fit(np.ones((20, 3)), y)
    with pytest.raises(TypeError, match="Sparse data was passed"):
        KernelFDA(solver="inchol").fit(sparse.csr_matrix(X), y)
    est = KernelFDA(n_threads=1).fit(X, y)
    with pytest.raises(ValueError, match="X has 2 features"):
        est.predict(X[:, :2])
    with pytest.raises(ValueError, match="Input X contains NaN"):
        est.transform(Xn)


# ------------------------------------------------------------ scikit-learn drop-in

def test_feature_names_and_pandas_output():
    pd = pytest.importorskip("pandas")
    X, y = load_wine(return_X_y=True, as_frame=True)
    est = KernelFDA(n_threads=1).set_output(transform="pandas").fit(X, y)
    assert list(est.feature_names_in_) == list(X.columns)
    assert list(est.get_feature_names_out()) == ["kernelfda0", "kernelfda1"]
    out = est.transform(X.iloc[:7])
    assert isinstance(out, pd.DataFrame)
    assert list(out.columns) == ["kernelfda0", "kernelfda1"]
    np.testing.assert_allclose(out.to_numpy(),
                               KernelFDA(n_threads=1).fit(X.to_numpy(), y).transform(
                                   X.to_numpy()[:7]), rtol=1e-12)
    with pytest.raises(ValueError, match="The feature names should match"):
        est.transform(X[X.columns[::-1]])
    assert list(KernelFDA(n_components=1, n_threads=1).fit(X, y)
                .get_feature_names_out()) == ["kernelfda0"]


def test_pipelines_and_grid_search():
    X, y = load_wine(return_X_y=True)
    cv = StratifiedKFold(3, shuffle=True, random_state=0)
    clf = make_pipeline(StandardScaler(), KernelFDA(n_threads=1))
    grid = GridSearchCV(clf, {"kernelfda__gamma": [0.01, 0.077, 30.0]}, cv=cv).fit(X, y)
    # gamma=30 makes every sample its own cluster: it must lose the search.
    assert grid.best_params_["kernelfda__gamma"] != 30.0
    assert grid.best_score_ >= 0.95
    assert grid.cv_results_["mean_test_score"][2] < 0.8
    # As a transformer in front of another classifier.
    proj = make_pipeline(StandardScaler(), KernelFDA(n_threads=1), KNeighborsClassifier(5))
    assert cross_val_score(proj, X, y, cv=cv).mean() >= 0.95


def test_exported():
    assert fastkern.KernelFDA is KernelFDA
    assert "KernelFDA" in fastkern.__all__


# ------------------------------------------------------------ the accuracy script

@pytest.mark.skipif(not BENCH.exists(), reason="benchmarks/ is not next to tests/")
def test_accuracy_script_on_iris():
    spec = importlib.util.spec_from_file_location("fda_accuracy", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    res = mod.main(datasets=("iris",), models=("KernelFDA", "KernelSIR+LDA"), n_splits=3,
                   verbose=False)
    assert set(res) == {("iris", "KernelFDA"), ("iris", "KernelSIR+LDA")}
    for scores in res.values():
        assert scores.shape == (3,)
        assert scores.mean() > 0.9
    text = mod.table(res)
    assert text.splitlines()[0] == "| model | iris |"
    assert "| KernelFDA | " in text


@pytest.mark.parametrize("gamma", ["scale", "median"])
def test_gamma_strings_resolved_once_on_the_training_data(gamma):
    from fastkern._kernel_api import resolve_gamma

    rng = np.random.default_rng(2)
    X, y = rng.normal(size=(90, 3)) * 5, np.repeat([0, 1, 2], 30)
    value = resolve_gamma(gamma, X, "rbf")
    est = KernelFDA(gamma=gamma).fit(X, y)
    ref = KernelFDA(gamma=value).fit(X, y)
    np.testing.assert_allclose(est.transform(X[:7] + 1), ref.transform(X[:7] + 1))
