import tracemalloc
import warnings

import numpy as np
import pytest
from scipy import linalg
from sklearn.kernel_ridge import KernelRidge as SkKernelRidge
from sklearn.linear_model import RidgeCV
from sklearn.metrics.pairwise import laplacian_kernel as sk_laplacian
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

import fastkern
from fastkern import kernels
from fastkern.kernel_ridge import KernelRidge, KernelRidgeCV
from fastkern._testing import raised, same_on_threads_and_layouts

RNG = np.random.default_rng(0)
X_TRAIN = RNG.standard_normal((123, 6))
X_TEST = RNG.standard_normal((29, 6))
Y2 = np.c_[np.sin(X_TRAIN[:, 0]) + 0.1 * RNG.standard_normal(123),
           X_TRAIN[:, 1] ** 2 + 0.1 * RNG.standard_normal(123)]
SW = RNG.uniform(0.2, 3.0, 123)


@parametrize_with_checks(
    [KernelRidge(), KernelRidge(kernel="rbf", alpha=[0.5]), KernelRidge(kernel="precomputed"),
     KernelRidge(kernel="rbf", solver="mixed"), KernelRidge(kernel="linear", solver="cholesky"),
     KernelRidgeCV(), KernelRidgeCV(kernel="rbf", alphas=[0.01, 1.0]),
     KernelRidgeCV(kernel="precomputed")],
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


KERNELS = [
    dict(kernel="linear"),
    dict(kernel="poly", degree=2, gamma=0.1, coef0=1.5),
    dict(kernel="rbf", gamma=0.2),
    dict(kernel="laplacian", gamma=0.2),
    dict(kernel="sigmoid", gamma=0.01, coef0=0.5),
]


def _rel(a, b):
    return np.max(np.abs(a - b)) / np.max(np.abs(b))


@pytest.mark.parametrize("params", KERNELS, ids=lambda p: p["kernel"])
@pytest.mark.parametrize("case", ["1d", "2d", "weights", "per-target-alpha"])
def test_matches_sklearn(params, case):
    y = Y2[:, 0] if case == "1d" else Y2
    alpha = [0.3, 2.0] if case == "per-target-alpha" else 0.7
    sw = SW if case in ("weights", "per-target-alpha") else None
    fk = KernelRidge(alpha=alpha, **params).fit(X_TRAIN, y, sample_weight=sw)
    sk = SkKernelRidge(alpha=alpha, **params).fit(X_TRAIN, y, sample_weight=sw)
    assert fk.dual_coef_.shape == sk.dual_coef_.shape
    assert _rel(fk.dual_coef_, sk.dual_coef_) < 1e-8
    assert _rel(fk.predict(X_TEST), sk.predict(X_TEST)) < 1e-8


@pytest.mark.parametrize("kernel", [kernels.Laplacian(gamma=0.2),
                                    lambda x, y, gamma=0.2: np.exp(-gamma * np.abs(x - y).sum())],
                         ids=["kernel-object", "callable"])
def test_kernel_objects_and_callables(kernel):
    ref = SkKernelRidge(alpha=0.5, kernel="precomputed").fit(sk_laplacian(X_TRAIN, gamma=0.2), Y2)
    fk = KernelRidge(alpha=0.5, kernel=kernel).fit(X_TRAIN, Y2)
    assert _rel(fk.predict(X_TEST), ref.predict(sk_laplacian(X_TEST, X_TRAIN, gamma=0.2))) < 1e-8


def test_precomputed_input_untouched():
    K = fastkern.rbf_kernel(X_TRAIN, gamma=0.2)
    K_before = K.copy()
    fk = KernelRidge(alpha=0.4, kernel="precomputed").fit(K, Y2, sample_weight=SW)
    sk = SkKernelRidge(alpha=0.4, kernel="rbf", gamma=0.2).fit(X_TRAIN, Y2, sample_weight=SW)
    np.testing.assert_array_equal(K, K_before)
    K_test = fastkern.rbf_kernel(X_TEST, X_TRAIN, gamma=0.2)
    assert _rel(fk.predict(K_test), sk.predict(X_TEST)) < 1e-8


def test_per_target_alpha_uses_each_alpha():
    fk = KernelRidge(alpha=[0.3, 2.0, 0.3], kernel="rbf").fit(X_TRAIN, np.c_[Y2, Y2[:, 0]])
    for j, a in enumerate([0.3, 2.0, 0.3]):
        single = KernelRidge(alpha=a, kernel="rbf").fit(X_TRAIN, np.c_[Y2, Y2[:, 0]][:, j])
        np.testing.assert_allclose(fk.dual_coef_[:, j], single.dual_coef_, rtol=1e-10)


def test_float32():
    X32, Y32 = X_TRAIN.astype(np.float32), Y2.astype(np.float32)
    fk = KernelRidge(alpha=0.7, kernel="rbf", gamma=0.2).fit(X32, Y32)
    assert fk.dual_coef_.dtype == np.float32
    pred = fk.predict(X_TEST.astype(np.float32))
    assert pred.dtype == np.float32
    ref = SkKernelRidge(alpha=0.7, kernel="rbf", gamma=0.2).fit(X_TRAIN, Y2).predict(X_TEST)
    assert _rel(pred, ref) < 1e-4


def test_memory_layouts():
    ref = KernelRidge(alpha=0.7, kernel="rbf").fit(X_TRAIN, Y2).predict(X_TEST)
    big = np.zeros((X_TRAIN.shape[0], 12))
    big[:, ::2] = X_TRAIN
    for X in (np.asfortranarray(X_TRAIN), big[:, ::2]):
        pred = KernelRidge(alpha=0.7, kernel="rbf").fit(X, np.asfortranarray(Y2)).predict(
            np.asfortranarray(X_TEST))
        np.testing.assert_allclose(pred, ref, rtol=1e-12, atol=1e-12)


def test_singular_system_falls_back_to_least_squares():
    K = np.ones((20, 20))          # rank one: the Cholesky factorisation fails exactly
    y = np.arange(20.0)
    with pytest.warns(linalg.LinAlgWarning, match="least-squares"):
        fk = KernelRidge(alpha=0.0, kernel="precomputed").fit(K, y)
    with pytest.warns(UserWarning, match="least-squares"):
        sk = SkKernelRidge(alpha=0.0, kernel="precomputed").fit(K, y)
    np.testing.assert_allclose(fk.dual_coef_, sk.dual_coef_, rtol=1e-10)
    np.testing.assert_allclose(fk.dual_coef_, linalg.lstsq(K, y)[0], rtol=1e-10)


@pytest.mark.parametrize("estimator", [KernelRidge(alpha=0.5, kernel="rbf", solver="cholesky"),
                                       KernelRidge(alpha=[0.5, 1.0], kernel="rbf",
                                                   solver="cholesky")])
def test_fit_memory_is_one_gram(estimator):
    n = 1500
    X = np.random.default_rng(1).standard_normal((n, 5))
    y = np.random.default_rng(2).standard_normal((n, 2))
    tracemalloc.start()
    try:
        estimator.fit(X, y, sample_weight=np.full(n, 2.0))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak / (n * n * 8) <= 1.05, peak / (n * n * 8)


def _brute_force_loo(X, y, alpha, sw=None, **params):
    """Refit scikit-learn's KernelRidge once per sample with one copy of it removed:
    weight w_i -> w_i - min(w_i, 1) (the whole sample when w_i <= 1)."""
    n = X.shape[0]
    errors = np.empty(y.shape)
    for i in range(n):
        if sw is None:
            keep = np.arange(n) != i
            model = SkKernelRidge(alpha=alpha, **params).fit(X[keep], y[keep])
        else:
            w = sw.astype(float).copy()
            w[i] -= min(w[i], 1.0)
            model = SkKernelRidge(alpha=alpha, **params).fit(X, y, sample_weight=w)
        errors[i] = y[i] - model.predict(X[i:i + 1])[0]
    return errors ** 2


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ndim", [1, 2])
def test_cv_loo_errors_match_refits(weighted, ndim):
    X, y = X_TRAIN[:30], (Y2[:30, 0] if ndim == 1 else Y2[:30])
    sw = SW[:30] if weighted else None
    alphas = [0.01, 0.3, 5.0]
    cv = KernelRidgeCV(alphas=alphas, kernel="rbf", gamma=0.2).fit(X, y, sample_weight=sw)
    shape = (30, 3) if ndim == 1 else (30, 2, 3)
    assert cv.loo_errors_.shape == shape
    for a, alpha in enumerate(alphas):
        brute = _brute_force_loo(X, y, alpha, sw, kernel="rbf", gamma=0.2)
        np.testing.assert_allclose(cv.loo_errors_[..., a], brute, rtol=1e-8, atol=1e-12)
    w = np.ones(30) if sw is None else sw
    per_alpha = [np.average(cv.loo_errors_[..., a].reshape(30, -1).mean(axis=1), weights=w)
                 for a in range(3)]
    assert cv.alpha_ == alphas[int(np.argmin(per_alpha))]
    np.testing.assert_allclose(cv.best_score_, -min(per_alpha), rtol=1e-10)
    ref = KernelRidge(alpha=cv.alpha_, kernel="rbf", gamma=0.2).fit(X, y, sample_weight=sw)
    np.testing.assert_allclose(cv.dual_coef_, ref.dual_coef_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(cv.predict(X_TEST), ref.predict(X_TEST), rtol=1e-8, atol=1e-10)


def test_cv_matches_sklearn_ridgecv_for_linear_kernel():
    alphas = np.logspace(-2, 3, 11)
    y = X_TRAIN @ RNG.standard_normal(6) + 0.5 * RNG.standard_normal(123)
    ours = KernelRidgeCV(alphas=alphas, kernel="linear").fit(X_TRAIN, y)
    ref = RidgeCV(alphas=alphas, fit_intercept=False).fit(X_TRAIN, y)
    assert ours.alpha_ == ref.alpha_
    np.testing.assert_allclose(ours.best_score_, ref.best_score_, rtol=1e-8)
    np.testing.assert_allclose(ours.predict(X_TEST), ref.predict(X_TEST), rtol=1e-8)


GRAM_BYTES = 123 * 123 * 8


@pytest.mark.parametrize("budget, driver", [(1, "ev"), (2.5 * GRAM_BYTES, "evr"),
                                            (3 * GRAM_BYTES, "evd"), (None, "evd")])
def test_cv_eigensolver_drivers_agree(budget, driver):
    cv = KernelRidgeCV(alphas=[0.1, 1.0], kernel="rbf", memory_budget=budget).fit(X_TRAIN, Y2)
    assert cv._eigen_driver == driver
    ref = KernelRidge(alpha=cv.alpha_, kernel="rbf").fit(X_TRAIN, Y2)
    np.testing.assert_allclose(cv.dual_coef_, ref.dual_coef_, rtol=1e-8, atol=1e-10)


def test_cv_float32_and_precomputed():
    cv32 = KernelRidgeCV(alphas=[0.1, 1.0], kernel="rbf").fit(X_TRAIN.astype(np.float32),
                                                               Y2.astype(np.float32))
    cv64 = KernelRidgeCV(alphas=[0.1, 1.0], kernel="rbf").fit(X_TRAIN, Y2)
    assert cv32.alpha_ == cv64.alpha_ and cv32.dual_coef_.dtype == np.float32
    assert _rel(cv32.predict(X_TEST.astype(np.float32)), cv64.predict(X_TEST)) < 1e-4
    K = fastkern.rbf_kernel(X_TRAIN)
    K_before = K.copy()
    cvp = KernelRidgeCV(alphas=[0.1, 1.0], kernel="precomputed").fit(K, Y2)
    np.testing.assert_array_equal(K, K_before)
    np.testing.assert_allclose(cvp.loo_errors_, cv64.loo_errors_, rtol=1e-10)


def test_bad_input():
    y = Y2[:, 0]
    with pytest.raises(InvalidParameterError, match="'alpha' parameter of KernelRidge"):
        KernelRidge(alpha=-1.0).fit(X_TRAIN, y)
    with pytest.raises(ValueError, match="alpha must be >= 0"):
        KernelRidge(alpha=[-1.0]).fit(X_TRAIN, y)
    with pytest.raises(ValueError, match="alpha has 3 values but y has 2 targets"):
        KernelRidge(alpha=[1.0, 2.0, 3.0]).fit(X_TRAIN, Y2)
    with pytest.raises(ValueError, match="alphas must be > 0"):
        KernelRidgeCV(alphas=[1.0, -0.1]).fit(X_TRAIN, y)
    with pytest.raises(ValueError, match="alphas must be a non-empty"):
        KernelRidgeCV(alphas=[]).fit(X_TRAIN, y)
    with pytest.raises(TypeError, match="alphas must be real"):
        KernelRidgeCV(alphas=["a"]).fit(X_TRAIN, y)
    for est in (KernelRidge(), KernelRidgeCV()):
        y_nan = y.copy()
        y_nan[3] = np.nan
        with pytest.raises(ValueError, match="NaN"):
            est.fit(X_TRAIN, y_nan)
        with pytest.raises(ValueError, match="inconsistent numbers of samples"):
            est.fit(X_TRAIN, y[:-1])
        with pytest.raises(ValueError, match="square kernel"):
            est.set_params(kernel="precomputed").fit(X_TRAIN, y)
        with pytest.raises(InvalidParameterError, match="'kernel' parameter"):
            est.set_params(kernel="nope").fit(X_TRAIN, y)
        with pytest.raises(ValueError, match="sample_weight"):
            est.set_params(kernel="linear").fit(X_TRAIN, y, sample_weight=SW[:-1])
        fitted = est.set_params(kernel="linear").fit(X_TRAIN, y)
        with pytest.raises(ValueError, match="features"):
            fitted.predict(X_TEST[:, :4])
    with pytest.raises(ValueError, match="Negative values in data passed to `sample_weight`"):
        KernelRidgeCV().fit(X_TRAIN, y, sample_weight=np.r_[-1.0, SW[1:]])
    with pytest.raises(ValueError, match="non-zero|no positive weight"):
        KernelRidgeCV().fit(X_TRAIN, y, sample_weight=np.zeros(y.size))
    with pytest.raises(InvalidParameterError, match="memory_budget"):
        KernelRidgeCV(memory_budget=-5).fit(X_TRAIN, y)


def test_pipeline_and_grid_search():
    y = Y2[:, 0]
    pipe = Pipeline([("scale", StandardScaler()), ("krr", KernelRidge(kernel="rbf"))])
    search = GridSearchCV(pipe, {"krr__alpha": [1e-3, 0.1, 100.0], "krr__gamma": [0.05, 0.5]},
                          cv=3).fit(X_TRAIN, y)
    assert search.best_params_["krr__alpha"] != 100.0
    assert search.best_score_ > 0.5
    cv_pipe = Pipeline([("scale", StandardScaler()),
                        ("krr", KernelRidgeCV(alphas=np.logspace(-3, 2, 6), kernel="rbf"))])
    search = GridSearchCV(cv_pipe, {"krr__gamma": [0.05, 0.5]}, cv=3).fit(X_TRAIN, y)
    assert search.best_score_ > 0.5
    assert search.best_estimator_.named_steps["krr"].alpha_ in np.logspace(-3, 2, 6)


@pytest.mark.parametrize("grams", [1.5, 2.5, 3.5])
def test_cv_memory_within_budget(grams):
    n = 700
    X = np.random.default_rng(1).standard_normal((n, 5))
    y = np.random.default_rng(2).standard_normal(n)
    gram = n * n * 8
    est = KernelRidgeCV(alphas=np.logspace(-3, 2, 20), kernel="rbf", memory_budget=grams * gram)
    tracemalloc.start()
    try:
        est.fit(X, y)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # O(n * n_alphas) on top: coefficients, diagonals and residuals per alpha.
    assert peak <= (grams - 0.4) * gram + 8 * n * 20 * 8, peak / gram


# ----------------------------------------------------------------- drop-in behaviour
XP = np.abs(X_TRAIN) / 3      # chi2 kernels need non-negative data
XP_TEST = np.abs(X_TEST) / 3
YP = Y2[:, 0]


def _callable_rbf(x, y, gamma=1.0):
    return np.exp(-gamma * np.sum((x - y) ** 2))


KERNEL_NAMES = [
    dict(kernel="linear"), dict(kernel="poly", degree=2, gamma=0.5),
    dict(kernel="polynomial", coef0=0.5), dict(kernel="rbf"), dict(kernel="laplacian"),
    dict(kernel="sigmoid", gamma=0.1), dict(kernel="cosine"), dict(kernel="chi2", gamma=0.5),
    dict(kernel="additive_chi2"), dict(kernel=_callable_rbf, kernel_params={"gamma": 0.3}),
]


@pytest.mark.parametrize("params", KERNEL_NAMES, ids=lambda p: str(p["kernel"])[:20])
def test_every_sklearn_kernel_name(params):
    """KernelRidge, KernelRidgeCV and KernelPCA take every kernel scikit-learn's do."""
    from sklearn.decomposition import KernelPCA as SkKernelPCA
    from sklearn.metrics.pairwise import pairwise_kernels as sk_pairwise_kernels

    ref = SkKernelRidge(alpha=0.3, **params).fit(XP, YP)
    ours = KernelRidge(alpha=0.3, **params).fit(XP, YP)
    assert _rel(ours.dual_coef_, ref.dual_coef_) < 1e-8
    assert _rel(ours.predict(XP_TEST), ref.predict(XP_TEST)) < 1e-8
    cv = KernelRidgeCV(alphas=[0.3], **params).fit(XP, YP)
    assert _rel(cv.predict(XP_TEST), ref.predict(XP_TEST)) < 1e-8

    kw = dict(params)
    kernel = kw.pop("kernel")
    K = sk_pairwise_kernels(XP, metric=kernel, filter_params=True,
                            **(kw.pop("kernel_params", None) or kw))
    Kt = sk_pairwise_kernels(XP_TEST, XP, metric=kernel, filter_params=True,
                             **(params.get("kernel_params") or kw))
    sk_pca = SkKernelPCA(n_components=3, kernel="precomputed").fit(K)
    pca = fastkern.KernelPCA(n_components=3, eigen_solver="dense", **params).fit(XP)
    proj, ref_proj = pca.transform(XP_TEST), sk_pca.transform(Kt)
    signs = np.sign(np.sum(proj * ref_proj, axis=0))
    np.testing.assert_allclose(proj * signs, ref_proj, rtol=1e-6,
                               atol=1e-8 * np.abs(ref_proj).max())


def test_chi2_gamma_none_is_chi2_default():
    """gamma=None leaves chi2 its own default (1.0); scikit-learn's KernelRidge fails there."""
    ref = SkKernelRidge(alpha=0.3, kernel="chi2", gamma=1.0).fit(XP, YP)
    ours = KernelRidge(alpha=0.3, kernel="chi2").fit(XP, YP)
    assert _rel(ours.predict(XP_TEST), ref.predict(XP_TEST)) < 1e-8


@pytest.mark.parametrize("x_dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("y_dtype", [np.float32, np.float64])
@pytest.mark.parametrize("alpha", [0.5, [0.5, 2.0]], ids=["one-alpha", "per-target"])
@pytest.mark.parametrize("kernel", ["rbf", "cosine", _callable_rbf], ids=["rbf", "cosine", "call"])
@pytest.mark.parametrize("weighted", [False, True])
def test_dtypes_follow_sklearn(x_dtype, y_dtype, alpha, kernel, weighted):
    X = (XP * 10).astype(x_dtype)
    Xt = (XP_TEST * 10).astype(x_dtype)
    y = Y2.astype(y_dtype)
    sw = SW.astype(y_dtype) if weighted else None
    ref = SkKernelRidge(alpha=alpha, kernel=kernel).fit(X, y, sample_weight=sw)
    ours = KernelRidge(alpha=alpha, kernel=kernel).fit(X, y, sample_weight=sw)
    assert ours.dual_coef_.dtype == ref.dual_coef_.dtype
    assert ours.X_fit_.dtype == ref.X_fit_.dtype
    pred, ref_pred = ours.predict(Xt), ref.predict(Xt)
    assert pred.dtype == ref_pred.dtype
    # Before a float64 solve scikit-learn rounds a float32 X's Gram, and float32
    # y * sqrt(w), to float32; fastkern computes both in float64.
    if ours.dual_coef_.dtype == np.float32:
        tol = 2e-3
    else:
        tol = 1e-5 if np.float32 in (x_dtype, y_dtype) else 1e-8
    assert _rel(pred, ref_pred) < tol
    if np.ndim(alpha) == 0:
        cv = KernelRidgeCV(alphas=[alpha], kernel=kernel).fit(X, y, sample_weight=sw)
        assert cv.dual_coef_.dtype == ref.dual_coef_.dtype
        assert cv.predict(Xt).dtype == ref_pred.dtype


@pytest.mark.parametrize("X", [
    np.ones((4, 3), dtype=complex), np.empty((0, 3)), np.empty((4, 0)), np.ones(4),
    [[1.0, 2.0]] * 3 + [[3.0, "a"]], np.array([[1.0, np.inf]] * 4),
], ids=["complex", "no-rows", "no-columns", "1-D", "string", "inf"])
@pytest.mark.parametrize("method", ["fit", "predict"])
@pytest.mark.parametrize("cls", [KernelRidge, KernelRidgeCV])
def test_bad_input_raises_as_sklearn(X, method, cls):
    y = np.arange(4.0)

    def call(est):
        if method == "predict":
            est.fit(np.eye(4)[:, :3] + 1, y)
            return lambda: est.predict(X)
        return lambda: est.fit(X, y)

    ref, ours = raised(call(SkKernelRidge())), raised(call(cls()))
    assert ref is not None
    assert type(ours) is type(ref)
    assert str(ours).replace(cls.__name__, "KernelRidge") == str(ref)


def test_lists_object_arrays_and_pandas_nullable_columns():
    pd = pytest.importorskip("pandas")
    Xi = (XP * 10).astype(np.int64)
    ref = SkKernelRidge(alpha=0.5, kernel="rbf", gamma=0.01).fit(Xi, YP).predict(Xi)
    df = pd.DataFrame({f"c{j}": pd.array(Xi[:, j], dtype="Int64") for j in range(6)})
    dff = pd.DataFrame({f"c{j}": pd.array(Xi[:, j] * 1.0, dtype="Float64") for j in range(6)})
    for X in (Xi.tolist(), Xi.astype(object), df, dff):
        for est in (KernelRidge(alpha=0.5, kernel="rbf", gamma=0.01),
                    KernelRidgeCV(alphas=[0.5], kernel="rbf", gamma=0.01)):
            pred = est.fit(X, YP.tolist()).predict(X)
            assert pred.dtype == np.float64
            np.testing.assert_allclose(pred, ref, rtol=1e-10)
    fitted = KernelRidge().fit(df, YP)
    assert list(fitted.feature_names_in_) == list(df.columns)
    with pytest.raises(ValueError, match="The feature names should match"):
        fitted.predict(df.rename(columns={"c0": "d0"}))


def test_cv_integer_weights_equal_repeated_samples():
    """Weight w means w copies: the leave-one-out of one copy, as on repeated data."""
    rng = np.random.default_rng(7)
    X = rng.uniform(size=(31, 4))
    y = rng.standard_normal(31)
    w = rng.integers(1, 5, size=31)
    alphas = np.logspace(-3, 1, 9)
    rep = KernelRidgeCV(alphas=alphas, kernel="rbf").fit(X.repeat(w, axis=0), y.repeat(w))
    wtd = KernelRidgeCV(alphas=alphas, kernel="rbf").fit(X, y, sample_weight=w)
    assert wtd.alpha_ == rep.alpha_
    np.testing.assert_allclose(wtd.best_score_, rep.best_score_, rtol=1e-8)
    np.testing.assert_allclose(wtd.loo_errors_.repeat(w, axis=0), rep.loo_errors_,
                               rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(wtd.predict(X_TEST[:, :4]), rep.predict(X_TEST[:, :4]),
                               rtol=1e-8, atol=1e-10)


def test_cv_zero_weights_equal_dropping_the_samples():
    rng = np.random.default_rng(8)
    X = rng.uniform(size=(40, 3))
    y = np.c_[rng.standard_normal(40), rng.standard_normal(40)]
    w = rng.uniform(0.5, 2.0, 40)
    w[[0, 5, 6, 39]] = 0.0
    keep = w > 0
    alphas = np.logspace(-3, 1, 7)
    full = KernelRidgeCV(alphas=alphas, kernel="rbf").fit(X, y, sample_weight=w)
    sub = KernelRidgeCV(alphas=alphas, kernel="rbf").fit(X[keep], y[keep], sample_weight=w[keep])
    assert full.alpha_ == sub.alpha_
    np.testing.assert_allclose(full.best_score_, sub.best_score_, rtol=1e-10)
    np.testing.assert_allclose(full.dual_coef_[keep], sub.dual_coef_, rtol=1e-8, atol=1e-12)
    assert np.all(full.dual_coef_[~keep] == 0)
    np.testing.assert_allclose(full.predict(X_TEST[:, :3]), sub.predict(X_TEST[:, :3]),
                               rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(full.loo_errors_[keep], sub.loo_errors_, rtol=1e-8, atol=1e-14)
    # a zero-weight sample's leave-one-out residual is its residual under the fit
    for a, alpha in enumerate(alphas):
        model = SkKernelRidge(alpha=alpha, kernel="rbf").fit(X[keep], y[keep],
                                                             sample_weight=w[keep])
        resid = (y[~keep] - model.predict(X[~keep])) ** 2
        np.testing.assert_allclose(full.loo_errors_[~keep][..., a], resid, rtol=1e-8)
    # the precomputed kernel gives the same
    pre = KernelRidgeCV(alphas=alphas, kernel="precomputed").fit(
        fastkern.rbf_kernel(X), y, sample_weight=w)
    np.testing.assert_allclose(pre.loo_errors_, full.loo_errors_, rtol=1e-8, atol=1e-14)


def test_scalar_sample_weight_as_sklearn():
    ref = SkKernelRidge(alpha=0.5, kernel="rbf").fit(X_TRAIN, YP, sample_weight=2.5)
    ours = KernelRidge(alpha=0.5, kernel="rbf").fit(X_TRAIN, YP, sample_weight=2.5)
    assert _rel(ours.dual_coef_, ref.dual_coef_) < 1e-10


# Sparse X is handed to fastkern.pairwise as it is; these need its native sparse support.
@pytest.mark.parametrize("fmt", ["csr", "csc"])
@pytest.mark.parametrize("cls", [KernelRidge, KernelRidgeCV])
@pytest.mark.parametrize("kernel", ["linear", "rbf", "poly", "cosine"])
def test_sparse_input_matches_dense(fmt, cls, kernel):
    from scipy import sparse

    Xs = sparse.random(50, 40, density=0.2, format=fmt, random_state=3)
    Xts = sparse.random(9, 40, density=0.2, format=fmt, random_state=4)
    y = np.random.default_rng(5).standard_normal(50)
    est = cls(kernel=kernel).fit(Xs, y)
    assert sparse.issparse(est.X_fit_)
    ref = SkKernelRidge(alpha=getattr(est, "alpha_", 1.0), kernel=kernel).fit(Xs.toarray(), y)
    np.testing.assert_allclose(est.predict(Xts), ref.predict(Xts.toarray()), rtol=1e-8,
                               atol=1e-12)


# ------------------------------------------- solver="incomplete_cholesky" and gamma strings

@parametrize_with_checks(
    [KernelRidge(kernel="rbf", solver="incomplete_cholesky", ichol_max_rank=15),
     KernelRidge(kernel="poly", degree=2, solver="incomplete_cholesky", ichol_tol=0.0)],
)
def test_sklearn_compatible_incomplete_cholesky(estimator, check):
    check(estimator)


def _gamma_string_failures(estimator):
    return dict.fromkeys(
        ("check_sample_weight_equivalence_on_dense_data",
         "check_sample_weight_equivalence_on_sparse_data"),
        "a data-dependent gamma is resolved from the rows of X, so repeating rows "
        "(the check's stand-in for weights) changes it, as with SVC's gamma='scale'")


@parametrize_with_checks([KernelRidge(kernel="rbf", gamma="median"),
                          KernelRidgeCV(kernel="laplacian", gamma="scale")],
                         expected_failed_checks=_gamma_string_failures)
def test_sklearn_compatible_gamma_strings(estimator, check):
    check(estimator)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("alpha", [0.3, [0.3, 2.0]])
@pytest.mark.parametrize("params", [dict(kernel="rbf", gamma=0.2),
                                    dict(kernel="laplacian", gamma=0.2),
                                    dict(kernel="poly", degree=2, gamma=0.1, coef0=1.5)],
                         ids=lambda p: p["kernel"])
def test_incomplete_cholesky_at_full_rank_is_the_exact_solve(params, alpha, weighted):
    sw = SW if weighted else None
    n = X_TRAIN.shape[0]
    exact = KernelRidge(alpha=alpha, **params).fit(X_TRAIN, Y2, sample_weight=sw)
    low = KernelRidge(alpha=alpha, solver="incomplete_cholesky", ichol_tol=0.0,
                      ichol_max_rank=n, **params).fit(X_TRAIN, Y2, sample_weight=sw)
    scale = np.abs(exact.predict(X_TEST)).max()
    np.testing.assert_allclose(low.predict(X_TEST), exact.predict(X_TEST), atol=1e-9 * scale)
    np.testing.assert_allclose(low.predict(X_TRAIN), exact.predict(X_TRAIN), atol=1e-9 * scale)
    np.testing.assert_allclose(low.dual_coef_, exact.dual_coef_,
                               atol=1e-8 * np.abs(exact.dual_coef_).max())
    # The Woodbury identity: G-space weights are G^T dual_coef_ (unweighted case).
    if not weighted:
        from fastkern.lowrank import incomplete_cholesky

        G = incomplete_cholesky(X_TRAIN, tol=0.0, **params).G
        np.testing.assert_allclose(G.T @ low.dual_coef_, low.ichol_coef_, atol=1e-8)


def test_incomplete_cholesky_error_decreases_with_rank():
    y = Y2[:, 0]
    exact = KernelRidge(alpha=0.1, kernel="rbf", gamma=0.2).fit(X_TRAIN, y).predict(X_TEST)
    errors = []
    for rank in (3, 10, 30, 60, 123):
        low = KernelRidge(alpha=0.1, kernel="rbf", gamma=0.2, solver="incomplete_cholesky",
                          ichol_tol=0.0, ichol_max_rank=rank).fit(X_TRAIN, y)
        assert low.ichol_pivots_.shape == (rank,) and low.ichol_coef_.shape == (rank,)
        errors.append(np.abs(low.predict(X_TEST) - exact).max())
    assert all(b < a for a, b in zip(errors, errors[1:])), errors
    assert errors[-1] < 1e-9 < errors[0]


def test_incomplete_cholesky_1d_y_float32_and_tol():
    X = X_TRAIN.astype(np.float32)
    m = KernelRidge(alpha=0.5, kernel="rbf", gamma=0.05, solver="incomplete_cholesky",
                    ichol_tol=1e-3)
    pred = m.fit(X, Y2[:, 0]).predict(X_TEST)
    assert pred.shape == (29,) and m.dual_coef_.shape == (123,)
    assert 0 < m.ichol_pivots_.size < 123
    exact = KernelRidge(alpha=0.5, kernel="rbf", gamma=0.05).fit(X_TRAIN, Y2[:, 0])
    exact = exact.predict(X_TEST)
    assert np.abs(pred - exact).max() < 0.05 * np.abs(exact).max()
    # Refitting with the exact solver drops the low-rank model.
    m.set_params(solver="auto").fit(X_TRAIN, Y2[:, 0])
    assert m.ichol_coef_ is None
    np.testing.assert_allclose(m.predict(X_TEST), exact, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("params, X, err, match", [
    ({"solver": "qr"}, X_TRAIN, InvalidParameterError, "solver"),
    ({"ichol_tol": -1.0}, X_TRAIN, InvalidParameterError, "ichol_tol"),
    ({"ichol_max_rank": 0}, X_TRAIN, InvalidParameterError, "ichol_max_rank"),
    ({"ichol_max_rank": 2.5}, X_TRAIN, InvalidParameterError, "ichol_max_rank"),
    ({"kernel": "precomputed"}, X_TRAIN @ X_TRAIN.T, ValueError, "precomputed"),
    ({"alpha": 0.0}, X_TRAIN, ValueError, "alpha > 0"),
    ({}, __import__("scipy.sparse").sparse.csr_matrix(X_TRAIN), TypeError, "dense X"),
])
def test_incomplete_cholesky_bad_parameters(params, X, err, match):
    with pytest.raises(err, match=match):
        KernelRidge(**({"solver": "incomplete_cholesky"} | params)).fit(X, Y2)


@pytest.mark.parametrize("Est", [KernelRidge, KernelRidgeCV])
def test_gamma_scale_and_median_resolved_once_at_fit(Est):
    from scipy import sparse

    X = X_TRAIN * [1, 2, 3, 1, 0.5, 1]
    scale = 1 / (X.shape[1] * X.var())
    median = fastkern.estimate_gamma(X, random_state=0).gamma
    for name, value in (("scale", scale), ("median", median)):
        m = Est(kernel="rbf", gamma=name).fit(X, Y2)
        assert m.gamma_ == pytest.approx(value, rel=1e-12)
        ref = Est(kernel="rbf", gamma=value).fit(X, Y2)
        # predict uses gamma_ of the training X, not one of the test X.
        np.testing.assert_allclose(m.predict(X_TEST), ref.predict(X_TEST), rtol=1e-12)
        # Sparse X: the same value.
        assert Est(kernel="rbf", gamma=name).fit(sparse.csr_matrix(X), Y2).gamma_ == \
            pytest.approx(value, rel=1e-10)
    # A kernel without gamma ignores it; a number and None pass through.
    assert Est(kernel="linear", gamma="median").fit(X, Y2).gamma_ is None
    assert Est(kernel="rbf", gamma=0.5).fit(X, Y2).gamma_ == 0.5
    assert Est(kernel="rbf").fit(X, Y2).gamma_ is None
    with pytest.raises(InvalidParameterError, match="gamma"):
        Est(kernel="rbf", gamma="mean").fit(X, Y2)


def test_gamma_scale_of_constant_x_is_one():
    X = np.ones((10, 3))
    assert KernelRidge(kernel="rbf", gamma="scale").fit(X, np.arange(10.0)).gamma_ == 1.0
    with pytest.raises(ValueError, match="all distances"):
        KernelRidge(kernel="rbf", gamma="median").fit(X, np.arange(10.0))


# ---------------------------------------------------------------- mixed precision

def _exact_dual(X, y, alpha, sw=None, **params):
    """scipy.linalg.solve of scikit-learn's weighted system, all in float64."""
    from sklearn.metrics.pairwise import pairwise_kernels

    kernel = params.pop("kernel")
    if kernel == "exponential":      # fastkern's exp(gamma <x, y>), unknown to scikit-learn
        K = np.exp(params["gamma"] * (X @ X.T))
    else:
        K = pairwise_kernels(X, metric=kernel, filter_params=True, **params)
    Y = y.reshape(len(y), -1).astype(float)
    s = np.ones(len(y)) if sw is None else np.sqrt(sw)
    alphas = np.broadcast_to(np.asarray(alpha, dtype=float), (Y.shape[1],))
    out = np.empty_like(Y)
    for j, a in enumerate(alphas):
        A = s[:, None] * K * s[None, :] + a * np.eye(len(y))
        out[:, j] = s * linalg.solve(A, s * Y[:, j], assume_a="pos")
    return out.reshape(y.shape)


def _mixed_case(name):
    rng = np.random.default_rng(7)
    n, d = {"n1": (1, 3), "n2": (2, 3), "n255": (255, 4), "n257": (257, 4)}.get(name, (301, 5))
    X = rng.standard_normal((n, d))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)
    kw, sw, alpha = dict(kernel="rbf", gamma=0.2), None, 1.0
    if name == "offset":
        X = X + 1e4
    elif name == "tiny-gamma":
        kw["gamma"] = 1e-4
    elif name == "large-gamma":
        kw["gamma"] = 50.0
    elif name == "near-duplicates":
        X[1::2] = X[::2][: n // 2] + 1e-9 * rng.standard_normal((n // 2, d))
    elif name == "weights":
        sw = rng.uniform(0.0, 3.0, n)
        sw[:5] = 0.0
    elif name == "2d-y":
        y = np.c_[y, X[:, 1] ** 2, rng.standard_normal(n)]
    elif name == "per-target-alpha":
        y = np.c_[y, X[:, 1] ** 2, -y]
        alpha = [0.1, 3.0, 0.1]
        sw = rng.uniform(0.5, 2.0, n)
    elif name in ("linear", "poly", "laplacian", "sigmoid", "exponential"):
        kw = {"linear": dict(kernel="linear"), "poly": dict(kernel="poly", gamma=0.1, degree=3),
              "laplacian": dict(kernel="laplacian", gamma=0.3),
              "sigmoid": dict(kernel="sigmoid", gamma=0.01, coef0=0.2),
              "exponential": dict(kernel="exponential", gamma=0.05)}[name]
        alpha = 5.0 if name == "sigmoid" else 1.0
    return X, y, sw, alpha, kw


MIXED_CASES = ["plain", "offset", "tiny-gamma", "large-gamma", "near-duplicates", "weights",
               "2d-y", "per-target-alpha", "n1", "n2", "n255", "n257", "linear", "poly",
               "laplacian", "sigmoid", "exponential"]


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("name", MIXED_CASES)
def test_mixed_solve_is_exact(name, n_threads):
    X, y, sw, alpha, kw = _mixed_case(name)
    fk = KernelRidge(alpha=alpha, solver="mixed", n_threads=n_threads, **kw).fit(
        X, y, sample_weight=sw)
    assert fk.solver_ == "mixed", getattr(fk, "_mixed_info", None)
    # scikit-learn's RBF Gram of X + 1e4 cancels ||x||^2 ~ 1e9 against 2 x.y and
    # keeps only ~1e-7 of each distance; the kernel depends on x - y only, so the
    # references are computed from the centred X, where that cancellation is harmless.
    Xr = X - X.mean(axis=0) if kw["kernel"] in ("rbf", "laplacian") else X
    ref = _exact_dual(Xr, y, alpha, sw, **kw)
    assert fk.dual_coef_.dtype == np.float64 and fk.dual_coef_.shape == ref.shape
    assert _rel(fk.dual_coef_, ref) < 1e-10
    if kw["kernel"] == "exponential":
        return
    sk = SkKernelRidge(alpha=alpha, **kw).fit(Xr, y, sample_weight=sw)
    assert _rel(fk.dual_coef_, sk.dual_coef_) < 1e-10
    X_new = X[:7] + 0.01
    assert _rel(fk.predict(X_new), sk.predict(X_new - (X - Xr)[:1])) < 1e-10


@pytest.mark.parametrize("columns", [1, 3, 4, 6])  # strsv up to 3 columns, then spotrs
def test_mixed_factor_solve_matches_cholesky_solve(columns):
    from scipy.linalg import cho_solve, lapack

    from fastkern._mixed import _factor_solve

    rng = np.random.default_rng(columns)
    n = 301
    B = rng.standard_normal((n, n))
    A = B @ B.T / n + np.eye(n)
    factor, info = lapack.spotrf(A.astype(np.float32), lower=0, clean=1)
    assert info == 0
    # Columns of very different sizes: each is scaled to 1 before the float32 solve.
    R = rng.standard_normal((n, columns)) * 10.0 ** np.arange(-20, -20 + 12 * columns, 12)
    Z = _factor_solve(factor, R)
    ref = cho_solve((factor.astype(np.float64), False), R)
    assert Z.dtype == np.float64
    # Float32 triangular solves: within ~n eps32 of the float64 solve with
    # the same factor, column by column (relative to each column's size).
    assert np.all(np.abs(Z - ref) <= 1e-4 * np.abs(ref).max(axis=0))
    exact = np.linalg.solve(A, R)  # the float32 factor's own error: kappa * eps32
    assert np.all(np.abs(Z - exact) <= 1e-3 * np.abs(exact).max(axis=0))


def test_mixed_one_and_two_threads_agree_and_repeat():
    X, y, sw, alpha, kw = _mixed_case("weights")
    fits = [KernelRidge(alpha=alpha, solver="mixed", n_threads=t, **kw).fit(X, y, sample_weight=sw)
            for t in (1, 2, 2)]
    assert _rel(fits[0].dual_coef_, fits[1].dual_coef_) < 1e-12
    np.testing.assert_array_equal(fits[1].dual_coef_, fits[2].dual_coef_)


@pytest.mark.parametrize("alpha", [1e-10, 1e-8, 1e-6, 1e-3, 1e-1, 1.0, 1e3])
def test_mixed_alpha_sweep_small_alphas_fall_back(alpha):
    X, y, _, _, kw = _mixed_case("plain")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", linalg.LinAlgWarning)
        fk = KernelRidge(alpha=alpha, solver="mixed", **kw).fit(X, y)
        exact = KernelRidge(alpha=alpha, solver="cholesky", **kw).fit(X, y)
    # kappa * eps32 >= 1 below about alpha = 1e-5 here: the float32 factor is no
    # preconditioner, so the float64 solve must have been used.
    assert fk.solver_ == ("cholesky" if alpha <= 1e-6 else "mixed")
    if fk.solver_ == "cholesky":
        np.testing.assert_array_equal(fk.dual_coef_, exact.dual_coef_)
    else:
        assert _rel(fk.dual_coef_, exact.dual_coef_) < 1e-10
        assert _rel(fk.dual_coef_, _exact_dual(X, y, alpha, **kw)) < 1e-10


def _assert_fallback(fk, exact, reason=None):
    assert fk.solver_ == "cholesky"
    if reason is not None:
        assert fk._mixed_info == reason
    np.testing.assert_array_equal(fk.dual_coef_, exact.dual_coef_)


@pytest.mark.parametrize("kernel", ["precomputed", "cosine", "callable", "object", "sparse"])
def test_mixed_falls_back_for_kernels_without_matrix_free_product(kernel):
    import scipy.sparse

    X, y, _, _, _ = _mixed_case("plain")
    X = np.abs(X)
    kw = {"precomputed": dict(kernel="precomputed"), "cosine": dict(kernel="cosine"),
          "callable": dict(kernel=_callable_rbf), "object": dict(kernel=kernels.RBF(gamma=0.2)),
          "sparse": dict(kernel="rbf", gamma=0.2)}[kernel]
    Xin = (X @ X.T if kernel == "precomputed"
           else scipy.sparse.csr_matrix(X) if kernel == "sparse" else X)
    fk = KernelRidge(alpha=0.5, solver="mixed", **kw).fit(Xin, y)
    assert not hasattr(fk, "_mixed_info") or fk._mixed_info is None
    _assert_fallback(fk, KernelRidge(alpha=0.5, solver="cholesky", **kw).fit(Xin, y))
    if kernel == "object":
        kw = dict(kernel="rbf", gamma=0.2)
    sk = SkKernelRidge(alpha=0.5, **kw).fit(Xin, y)
    assert _rel(fk.dual_coef_, sk.dual_coef_) < 1e-10


def test_mixed_falls_back_when_spotrf_fails():
    # An indefinite sigmoid Gram: not positive definite in float32 (nor float64,
    # where scikit-learn's least-squares answer is the reference).
    X, y, _, _, _ = _mixed_case("plain")
    kw = dict(kernel="sigmoid", gamma=0.5, coef0=-1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fk = KernelRidge(alpha=1e-2, solver="mixed", **kw).fit(X, y)
        exact = KernelRidge(alpha=1e-2, solver="cholesky", **kw).fit(X, y)
        sk = SkKernelRidge(alpha=1e-2, **kw).fit(X, y)
    _assert_fallback(fk, exact, "spotrf failed")
    assert _rel(fk.dual_coef_, sk.dual_coef_) < 1e-8


def test_mixed_falls_back_when_refinement_does_not_converge(monkeypatch):
    from fastkern import _mixed

    X, y, _, _, kw = _mixed_case("plain")
    # kappa * eps32 ~ 0.1 at alpha = 3e-5: refinement needs 4 passes here.
    slow = KernelRidge(alpha=3e-5, solver="mixed", **kw).fit(X, y)
    assert slow.solver_ == "mixed" and slow._mixed_info["passes"] == [4]
    exact = KernelRidge(alpha=3e-5, solver="cholesky", **kw).fit(X, y)
    # kappa ~ 1e6: two backward-stable float64 solves differ by ~ kappa * eps64.
    assert _rel(slow.dual_coef_, exact.dual_coef_) < 1e-8
    # Under a cap of 3 the rate measured after two passes predicts 4: give up then.
    monkeypatch.setattr(_mixed, "MAX_PASSES", 3)
    fk = KernelRidge(alpha=3e-5, solver="mixed", **kw).fit(X, y)
    _assert_fallback(fk, exact, "refinement did not converge")
    # A cap of one pass sees only the first residual, never convergence.
    monkeypatch.setattr(_mixed, "MAX_PASSES", 1)
    fk = KernelRidge(alpha=1.0, solver="mixed", **kw).fit(X, y)
    _assert_fallback(fk, KernelRidge(alpha=1.0, solver="cholesky", **kw).fit(X, y),
                     "refinement did not converge")


def test_mixed_falls_back_when_kernel_values_exceed_float32():
    X, y, _, _, _ = _mixed_case("plain")
    kw = dict(kernel="poly", gamma=1.0, degree=3, coef0=0.0)
    X = X * 1e14  # values up to ~1e86: finite in float64, not in float32
    fk = KernelRidge(alpha=1e84, solver="mixed", **kw).fit(X, y)
    _assert_fallback(fk, KernelRidge(alpha=1e84, solver="cholesky", **kw).fit(X, y),
                     "kernel row sums beyond float32 range")


def test_mixed_falls_back_below_float32_resolution_of_alpha():
    X, y, _, _, kw = _mixed_case("plain")
    fk = KernelRidge(alpha=1e-6, solver="mixed", **kw).fit(X, y)
    _assert_fallback(fk, KernelRidge(alpha=1e-6, solver="cholesky", **kw).fit(X, y),
                     "alpha below float32 resolution")


@pytest.mark.parametrize("n_threads, threshold", [(2, "MIXED_MIN_SAMPLES"),
                                                   (1, "MIXED_MIN_SAMPLES_SERIAL")])
def test_auto_uses_mixed_from_min_samples(monkeypatch, n_threads, threshold):
    # From MIXED_MIN_SAMPLES samples, or MIXED_MIN_SAMPLES_SERIAL on one thread.
    from fastkern import kernel_ridge

    X, y, _, _, kw = _mixed_case("plain")
    est = dict(kw, n_threads=n_threads)
    auto = KernelRidge(alpha=1.0, **est).fit(X, y)
    assert X.shape[0] < getattr(kernel_ridge, threshold) and auto.solver_ == "cholesky"
    np.testing.assert_array_equal(
        auto.dual_coef_, KernelRidge(alpha=1.0, solver="cholesky", **est).fit(X, y).dual_coef_)
    monkeypatch.setattr(kernel_ridge, threshold, X.shape[0])
    auto = KernelRidge(alpha=1.0, **est).fit(X, y)
    assert auto.solver_ == "mixed"
    assert _rel(auto.dual_coef_, _exact_dual(X, y, 1.0, **kw)) < 1e-10
    monkeypatch.setattr(kernel_ridge, threshold, X.shape[0] + 1)
    assert KernelRidge(alpha=1.0, **est).fit(X, y).solver_ == "cholesky"
    # alpha = 0 never tries float32 (K alone may be singular).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", linalg.LinAlgWarning)
        assert KernelRidge(alpha=0.0, **est).fit(X, y).solver_ == "cholesky"


@pytest.mark.parametrize("y_dtype", [np.float32, np.float64])
def test_mixed_keeps_float32_solve_for_float32_data(y_dtype):
    X, y, _, _, kw = _mixed_case("plain")
    X32 = X.astype(np.float32)
    fk = KernelRidge(alpha=1.0, solver="mixed", **kw).fit(X32, y.astype(y_dtype))
    sk = SkKernelRidge(alpha=1.0, **kw).fit(X32, y.astype(y_dtype))
    assert fk.dual_coef_.dtype == sk.dual_coef_.dtype == y_dtype
    # float32 data and y: scikit-learn's float32 solve; float64 y: the exact solve.
    assert fk.solver_ == ("cholesky" if y_dtype == np.float32 else "mixed")
    exact = KernelRidge(alpha=1.0, solver="cholesky", **kw).fit(X32, y.astype(y_dtype))
    if y_dtype == np.float32:
        np.testing.assert_array_equal(fk.dual_coef_, exact.dual_coef_)
    else:
        # scikit-learn solves with the float32 Gram (1e-7 away); fastkern's
        # float64 solve widens X first, and the mixed solve must equal it.
        assert _rel(fk.dual_coef_, exact.dual_coef_) < 1e-10
    assert _rel(fk.dual_coef_, sk.dual_coef_) < 1e-5


@pytest.mark.parametrize("solver, limit", [("mixed", 0.82), ("cholesky", 1.05)])
@pytest.mark.parametrize("alpha", [0.5, [0.5, 1.0]])
def test_fit_memory_mixed_and_float64(solver, limit, alpha):
    # n = 3000, mixed: the float32 matrix is 0.5 Gram, the packed rounding
    # errors 0.25 and the float64 panel they are split from (128 x n) 0.04.
    n = 3000
    X = np.random.default_rng(1).standard_normal((n, 5))
    y = np.random.default_rng(2).standard_normal((n, 2))
    est = KernelRidge(alpha=alpha, kernel="rbf", solver=solver)
    tracemalloc.start()
    try:
        est.fit(X, y, sample_weight=np.full(n, 2.0))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert est.solver_ == solver
    assert peak / (n * n * 8) <= limit, peak / (n * n * 8)


@pytest.mark.parametrize("name", ["plain", "offset", "tiny-gamma", "near-duplicates", "2d-y",
                                  "n257", "linear", "poly", "laplacian", "exponential"])
def test_mixed_residual_is_at_the_level_of_a_float64_solve(name):
    # The last correction may be accepted on the measured contraction (its
    # residual pass skipped): the true float64 residual must still meet the
    # direct solve's level, ||r||_inf <= sqrt(n) eps ||A||_inf ||c||_inf.
    from sklearn.metrics.pairwise import pairwise_kernels

    X, y, _, alpha, kw = _mixed_case(name)
    fk = KernelRidge(alpha=alpha, solver="mixed", **kw).fit(X, y)
    assert fk.solver_ == "mixed"
    params = {k: v for k, v in kw.items() if k != "kernel"}
    Xr = X - X.mean(axis=0) if kw["kernel"] in ("rbf", "laplacian") else X
    K = (np.exp(params["gamma"] * (X @ X.T)) if kw["kernel"] == "exponential"
         else pairwise_kernels(Xr, metric=kw["kernel"], filter_params=True, **params))
    A = K + alpha * np.eye(len(X))
    C = fk.dual_coef_.reshape(len(X), -1)
    R = y.reshape(len(X), -1) - A @ C
    bound = np.sqrt(len(X)) * np.finfo(float).eps * np.abs(A).sum(axis=1).max()
    assert np.all(np.abs(R).max(axis=0) <= bound * np.abs(C).max(axis=0))


def test_mixed_solve_of_a_gram_of_tiny_entries_matches_float64():
    """RBF at gamma=0.5, d=64: most off-diagonal entries lie between 1e-57 and
    1e-10, float32 subnormals; the mixed solve zeroes those below 2^-60 of the
    diagonal (they made it 10-100x slower) and still matches scikit-learn."""
    from sklearn.kernel_ridge import KernelRidge as SKKernelRidge

    rng = np.random.default_rng(21)
    X, y = rng.normal(size=(600, 64)), rng.normal(size=600)
    mixed = KernelRidge(alpha=0.5, kernel="rbf", gamma=0.5, solver="mixed").fit(X, y)
    assert mixed.solver_ == "mixed"
    ref = SKKernelRidge(alpha=0.5, kernel="rbf", gamma=0.5).fit(X, y)
    np.testing.assert_allclose(mixed.dual_coef_, ref.dual_coef_, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(mixed.predict(X[:50] * 0.1), ref.predict(X[:50] * 0.1),
                               rtol=1e-12, atol=1e-13)


# -- predict without the cross Gram (fastkern._operator.kernel_times) ---------

PRODUCT_KERNELS = [dict(kernel="rbf", gamma=0.3), dict(kernel="rbf", gamma=0.02),
                   dict(kernel="laplacian", gamma=0.2),
                   dict(kernel="poly", gamma=0.1, degree=2, coef0=1.0),
                   dict(kernel="sigmoid", gamma=0.01, coef0=0.5), dict(kernel="linear")]


@pytest.mark.parametrize("params", PRODUCT_KERNELS,
                         ids=lambda p: f"{p['kernel']}-{p.get('gamma', '')}")
@pytest.mark.parametrize("n_test", [1, 255, 256, 257, 513])  # around the 256-row tiles
@pytest.mark.parametrize("ndim", [1, 2])
def test_predict_matches_gram_times_dual_coef(params, n_test, ndim):
    from sklearn.metrics.pairwise import pairwise_kernels

    rng = np.random.default_rng(n_test)
    # d = 40: the BLAS tiles of the RBF kernel (d = 6 below takes the direct ones).
    d = 40 if params.get("gamma") == 0.02 else 6
    X, Xt = rng.standard_normal((300, d)), rng.standard_normal((n_test, d))
    y = rng.standard_normal((300, 2))
    fk = KernelRidge(alpha=0.7, **params).fit(X, y[:, 0] if ndim == 1 else y)
    kw = {k: v for k, v in params.items() if k != "kernel"}
    K = pairwise_kernels(Xt, X, metric=params["kernel"], **kw)
    pred = fk.predict(Xt)
    assert pred.shape == ((n_test,) if ndim == 1 else (n_test, 2))
    # Judged against |K| |c|: the sums may cancel.
    atol = 1e-12 * (np.abs(K) @ np.abs(fk.dual_coef_)).max()
    np.testing.assert_allclose(pred, K @ fk.dual_coef_, rtol=0, atol=atol)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_predict_is_the_same_on_any_thread_count_layout_and_read_only_input(dtype):
    rng = np.random.default_rng(7)
    X = rng.standard_normal((530, 5)).astype(dtype)
    Xt = rng.standard_normal((700, 5)).astype(dtype)
    fk = KernelRidge(alpha=0.3, kernel="rbf", gamma=0.4).fit(X, rng.standard_normal(530))
    same_on_threads_and_layouts(fk, "predict", Xt)
    frozen = np.asfortranarray(X)
    frozen.flags.writeable = False
    refit = KernelRidge(alpha=0.3, kernel="rbf", gamma=0.4, n_threads=2).fit(
        frozen, rng.standard_normal(530))
    assert not refit.X_fit_.flags.c_contiguous
    K = np.exp(-0.4 * ((Xt.astype(float)[:, None, :] - X.astype(float)[None]) ** 2).sum(-1))
    tol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(refit.predict(Xt), K @ refit.dual_coef_, rtol=0,
                               atol=tol * (K @ np.abs(refit.dual_coef_)).max())


def test_predict_dtype_of_mixed_precision_input():
    rng = np.random.default_rng(8)
    X, y = rng.standard_normal((80, 4)), rng.standard_normal(80)
    fk32 = KernelRidge(kernel="rbf").fit(X.astype(np.float32), y.astype(np.float32))
    sk32 = SkKernelRidge(kernel="rbf").fit(X.astype(np.float32), y.astype(np.float32))
    for Xt in (X[:9].astype(np.float32), X[:9]):
        pred, ref = fk32.predict(Xt), sk32.predict(Xt)
        assert pred.dtype == ref.dtype
        assert _rel(pred, ref) < 1e-5


@pytest.mark.parametrize("alphas", [0.7, [0.7], [0.7, 2.0, 0.7]])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_solve_shifted_in_place_against_numpy(alphas, dtype):
    from fastkern._linalg import solve_shifted_in_place

    rng = np.random.default_rng(5)
    A = rng.standard_normal((37, 37))
    K = (A @ A.T / 37).astype(dtype)
    Y = rng.standard_normal((37, 3)).astype(dtype)
    Y_before = Y.copy()
    per_column = np.broadcast_to(np.asarray(alphas, dtype=np.float64), (3,))
    expected = np.column_stack([np.linalg.solve(K.astype(np.float64) + a * np.eye(37),
                                                Y[:, j].astype(np.float64))
                                for j, a in enumerate(per_column)])
    out = solve_shifted_in_place(K.copy(), Y, alphas)
    assert out.dtype == dtype and out.shape == (37, 3)
    np.testing.assert_allclose(out, expected, rtol=2e-4 if dtype == np.float32 else 1e-10,
                               atol=1e-5 if dtype == np.float32 else 1e-12)
    np.testing.assert_array_equal(Y, Y_before)


@pytest.mark.parametrize("value", [1, 0, 2.5, 0.0, 1e-300, 2 ** 60, np.float64(0.3), np.int64(4)])
@pytest.mark.parametrize("positive", [False, True])
def test_alpha_check_of_a_number_equals_that_of_a_list(value, positive):
    # Plain ints and floats take a path of their own: the same result and
    # the same errors as the one-element list.
    from fastkern.kernel_ridge import _check_alpha_array

    def outcome(alpha):
        try:
            return _check_alpha_array(alpha, "alpha", positive=positive)
        except ValueError as exc:
            return str(exc).split(", got")[0]

    got, expected = outcome(value), outcome([value])
    if isinstance(expected, str):
        assert got == expected
    else:
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("value", [-1, -0.5, float("nan"), float("inf"), -float("inf")])
def test_alpha_check_rejects_bad_numbers(value):
    from fastkern.kernel_ridge import _check_alpha_array

    for alpha in (value, [value]):
        with pytest.raises(ValueError, match=r"^alpha must be (finite|>= 0)"):
            _check_alpha_array(alpha, "alpha")
