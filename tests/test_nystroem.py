"""fastkern.Nystroem against scikit-learn's Nystroem as the oracle."""
import numpy as np
import pytest
from numpy.testing import assert_allclose
from scipy import sparse
from sklearn.kernel_approximation import Nystroem as SkNystroem
from sklearn.metrics.pairwise import rbf_kernel
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

from fastkern import kernels
from fastkern.nystroem import Nystroem
from fastkern._testing import raised

RNG = np.random.default_rng(0)
# chi2 kernels need non-negative data; every kernel is fine on [0, 1).
X_TRAIN = RNG.uniform(size=(61, 5))
X_TEST = RNG.uniform(size=(17, 5))


@parametrize_with_checks([Nystroem(n_threads=1), Nystroem(kernel="poly", n_components=5, degree=2),
                          Nystroem(kernel="cosine", n_components=7)])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def _sq_callable(x, y, scale=1.0):
    return scale * np.exp(-np.sum((x - y) ** 2))


KERNELS = [
    dict(kernel="linear"),
    dict(kernel="poly", degree=2, gamma=0.5, coef0=0.3),
    dict(kernel="polynomial"),
    dict(kernel="rbf"),
    dict(kernel="rbf", gamma=2.0),
    dict(kernel="laplacian", gamma=0.3),
    dict(kernel="sigmoid", gamma=0.1, coef0=0.2),
    dict(kernel="cosine"),
    dict(kernel="chi2"),
    dict(kernel="chi2", gamma=0.4),
    dict(kernel="additive_chi2"),
    dict(kernel=_sq_callable, kernel_params={"scale": 2.0}),
]


def _cases():
    # Up to 5 landmarks every kernel's W is well conditioned on 5 features; the
    # full 61 only for kernels of full rank (linear, cosine, polynomial have
    # rank <= 56, and W^(-1/2) of a singular W amplifies rounding by 1e6).
    for p in KERNELS:
        for m in (1, 2, 5):
            yield p, m
        if p["kernel"] in ("rbf", "laplacian", "chi2", _sq_callable):
            yield p, 61


@pytest.mark.parametrize("params, n_components", list(_cases()),
                         ids=lambda p: (getattr(p["kernel"], "__name__", str(p["kernel"]))
                                        if isinstance(p, dict) else str(p)))
def test_matches_sklearn_for_every_kernel(params, n_components):
    ours = Nystroem(n_components=n_components, random_state=4, **params).fit(X_TRAIN)
    ref = SkNystroem(n_components=n_components, random_state=4, **params).fit(X_TRAIN)
    np.testing.assert_array_equal(ours.component_indices_, ref.component_indices_)
    assert_allclose(ours.components_, ref.components_)
    scale = np.abs(ref.normalization_).max()
    assert_allclose(ours.normalization_, ref.normalization_, rtol=1e-7, atol=1e-9 * scale)
    ref_t = ref.transform(X_TEST)
    assert_allclose(ours.transform(X_TEST), ref_t, rtol=1e-7, atol=1e-9 * np.abs(ref_t).max())


def test_exponential_kernel_object_and_name_agree():
    """fastkern's own kernel name and the kernel object give the same map."""
    by_name = Nystroem("exponential", gamma=0.5, n_components=9, random_state=1).fit(X_TRAIN)
    by_obj = Nystroem(kernels.Exponential(gamma=0.5), n_components=9, random_state=1).fit(X_TRAIN)
    ref = SkNystroem(lambda x, y: np.exp(0.5 * x @ y), n_components=9, random_state=1).fit(X_TRAIN)
    assert_allclose(by_name.transform(X_TEST), ref.transform(X_TEST), rtol=1e-8, atol=1e-10)
    assert_allclose(by_obj.transform(X_TEST), ref.transform(X_TEST), rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtypes_follow_sklearn(dtype):
    X, Xt = X_TRAIN.astype(dtype), X_TEST.astype(dtype)
    ours = Nystroem(n_components=20, random_state=0).fit(X)
    ref = SkNystroem(n_components=20, random_state=0).fit(X)
    assert ours.normalization_.dtype == ref.normalization_.dtype
    out, ref_out = ours.transform(Xt), ref.transform(Xt)
    assert out.dtype == ref_out.dtype == dtype
    tol = 1e-3 if dtype == np.float32 else 1e-8
    assert_allclose(out, ref_out, rtol=tol, atol=tol * np.abs(ref_out).max())


def test_precomputed_equals_sklearn_and_the_kernel_on_the_samples():
    K = rbf_kernel(X_TRAIN, gamma=0.7)
    Kt = rbf_kernel(X_TEST, X_TRAIN, gamma=0.7)
    n = K.shape[0]
    # n_components = n_samples: scikit-learn's own precomputed rule
    ours = Nystroem("precomputed", n_components=n, random_state=2).fit(K)
    ref = SkNystroem("precomputed", n_components=n, random_state=2).fit(K)
    assert_allclose(ours.transform(Kt), ref.transform(Kt), rtol=1e-6, atol=1e-8)
    # fewer components (scikit-learn cannot): the same map as from the samples
    ours = Nystroem("precomputed", n_components=11, random_state=2).fit(K)
    on_samples = Nystroem("rbf", gamma=0.7, n_components=11, random_state=2).fit(X_TRAIN)
    assert_allclose(ours.transform(Kt), on_samples.transform(X_TEST), rtol=1e-8, atol=1e-10)
    with pytest.raises(ValueError, match="square kernel"):
        Nystroem("precomputed").fit(K[:, :5])


@pytest.mark.parametrize("params", [{"gamma": 1.0}, {"coef0": 1.0}, {"degree": 2}])
@pytest.mark.parametrize("kernel", ["precomputed", _sq_callable, kernels.RBF(1.0)],
                         ids=["precomputed", "callable", "kernel-object"])
def test_kernel_parameters_refused_for_callables_and_precomputed(kernel, params):
    K = rbf_kernel(X_TRAIN)
    X = K if kernel == "precomputed" else X_TRAIN
    with pytest.raises(ValueError, match="Don't pass gamma, coef0 or degree to Nystroem"):
        Nystroem(kernel, n_components=5, **params).fit(X)


@pytest.mark.parametrize("X", [
    np.ones((4, 3), dtype=complex), np.empty((0, 3)), np.empty((4, 0)), np.ones(5),
    [[1.0, 2.0], [3.0, "a"]], np.array([[1.0, np.nan]] * 3), np.ones((2, 2, 2)),
], ids=["complex", "no-rows", "no-columns", "1-D", "string", "nan", "3-D"])
@pytest.mark.parametrize("method", ["fit", "transform"])
def test_bad_input_raises_as_sklearn(X, method):
    def call(cls):
        est = cls(n_components=2, random_state=0)
        if method == "transform":
            est.fit(np.ones((3, 3)) + np.eye(3))
            return lambda: est.transform(X)
        return lambda: est.fit(X)

    ref, ours = raised(call(SkNystroem)), raised(call(Nystroem))
    assert ref is not None
    assert type(ours) is type(ref)
    assert str(ours).replace("fastkern", "sklearn") == str(ref)


def test_lists_object_arrays_and_pandas_nullable_columns():
    pd = pytest.importorskip("pandas")
    Xi = (X_TRAIN * 10).astype(np.int64)
    ref = SkNystroem(n_components=7, random_state=0).fit(Xi).transform(Xi)
    df = pd.DataFrame({f"c{j}": pd.array(Xi[:, j], dtype="Int64") for j in range(5)})
    dff = pd.DataFrame({f"c{j}": pd.array(Xi[:, j] * 1.0, dtype="Float64") for j in range(5)})
    for X in (Xi.tolist(), Xi.astype(object), df, dff):
        out = Nystroem(n_components=7, random_state=0).fit(X).transform(X)
        assert out.dtype == np.float64
        assert_allclose(out, ref, rtol=1e-10, atol=1e-12)


def test_feature_names_and_pandas_output_as_sklearn():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(X_TRAIN, columns=[f"f{j}" for j in range(5)])
    ours = Nystroem(n_components=6, random_state=0).set_output(transform="pandas").fit(df)
    ref = SkNystroem(n_components=6, random_state=0).set_output(transform="pandas").fit(df)
    assert list(ours.feature_names_in_) == list(df.columns)
    assert list(ours.get_feature_names_out()) == list(ref.get_feature_names_out())
    assert list(ours.get_feature_names_out()) == [f"nystroem{i}" for i in range(6)]
    out = ours.transform(df)
    assert isinstance(out, pd.DataFrame)
    pd.testing.assert_frame_equal(out, ref.transform(df), rtol=1e-8)
    bad = df.rename(columns={"f0": "g0"})
    ref_err, our_err = raised(lambda: ref.transform(bad)), raised(lambda: ours.transform(bad))
    assert type(our_err) is type(ref_err) and str(our_err) == str(ref_err)
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        ours.transform(X_TEST)
    # capped n_components: names follow the number of features actually produced
    small = Nystroem(n_components=100).fit(X_TRAIN[:4])
    assert list(small.get_feature_names_out()) == [f"nystroem{i}" for i in range(4)]


def test_param_validation():
    with pytest.raises(InvalidParameterError, match="'n_components' parameter"):
        Nystroem(n_components=0).fit(X_TRAIN)
    with pytest.raises(InvalidParameterError, match="'kernel' parameter"):
        Nystroem("nope").fit(X_TRAIN)
    with pytest.raises(InvalidParameterError, match="'n_threads' parameter"):
        Nystroem(n_threads=0).fit(X_TRAIN)
    with pytest.warns(UserWarning, match="n_components > n_samples"):
        Nystroem(n_components=80, random_state=0).fit(X_TRAIN)


# Sparse input is handed to fastkern.pairwise as it is (never densified by the
# estimator); these need fastkern.pairwise's native sparse support.
@pytest.mark.parametrize("fmt", ["csr", "csc"])
@pytest.mark.parametrize("params", [dict(kernel="rbf"), dict(kernel="linear"),
                                    dict(kernel="cosine"), dict(kernel="poly", degree=2)],
                         ids=lambda p: p["kernel"])
def test_sparse_input_matches_dense(fmt, params):
    Xs = sparse.random(40, 30, density=0.2, format=fmt, random_state=5)
    Xts = sparse.random(9, 30, density=0.2, format=fmt, random_state=6)
    ours = Nystroem(n_components=12, random_state=0, **params).fit(Xs)
    ref = SkNystroem(n_components=12, random_state=0, **params).fit(Xs.toarray())
    assert sparse.issparse(ours.components_)
    assert_allclose(ours.transform(Xts), ref.transform(Xts.toarray()), rtol=1e-7, atol=1e-9)


# ----------------------------------------------------------- gamma="scale" and "median"

@parametrize_with_checks([Nystroem(gamma="scale", n_components=5),
                          Nystroem(kernel="laplacian", gamma="median", n_components=5)],
                         expected_failed_checks=lambda est: dict.fromkeys(
                             ("check_sample_weight_equivalence_on_dense_data",
                              "check_sample_weight_equivalence_on_sparse_data"),
                             "a data-dependent gamma is resolved from the rows of X"))
def test_sklearn_compatible_gamma_strings(estimator, check):
    check(estimator)


@pytest.mark.parametrize("fmt", ["dense", "csr"])
def test_gamma_scale_and_median_resolved_once_at_fit(fmt):
    import fastkern

    X = X_TRAIN * np.arange(1, 6)
    Xf = sparse.csr_matrix(X) if fmt == "csr" else X
    for name, value in (("scale", 1 / (5 * X.var())),
                        ("median", fastkern.estimate_gamma(X, random_state=0).gamma)):
        est = Nystroem(gamma=name, n_components=20, random_state=0).fit(Xf)
        assert est.gamma_ == pytest.approx(value, rel=1e-10)
        # The landmark kernel and transform use the value from all of the training X.
        ref = Nystroem(gamma=value, n_components=20, random_state=0).fit(X)
        assert_allclose(est.transform(X_TEST), ref.transform(X_TEST), rtol=1e-9, atol=1e-12)
        sk = SkNystroem(gamma=value, n_components=20, random_state=0).fit(X)
        assert_allclose(est.transform(X_TEST), sk.transform(X_TEST), rtol=1e-7, atol=1e-9)
    with pytest.raises(InvalidParameterError, match="'gamma' parameter"):
        Nystroem(gamma="auto").fit(X)
    with pytest.raises(ValueError, match="callable"):
        Nystroem(kernel=_sq_callable, gamma="scale").fit(X)


@pytest.mark.parametrize("symmetric", [True, False])
def test_precomputed_gram_symmetric_or_not_gives_sklearns_svd_formula(symmetric):
    # A symmetric landmark block goes through an eigendecomposition, any
    # other through the SVD: both give scikit-learn's U S^(-1/2) V^T.
    K = rbf_kernel(X_TRAIN, gamma=0.7)
    if not symmetric:
        K = K + 0.05 * np.triu(np.random.default_rng(11).uniform(size=K.shape), 1)
    ours = Nystroem("precomputed", n_components=20, random_state=3).fit(K)
    inds = ours.component_indices_
    U, S, Vt = np.linalg.svd(K[np.ix_(inds, inds)])
    expected = (U / np.sqrt(np.maximum(S, 1e-12))) @ Vt
    scale = np.abs(expected).max()
    assert_allclose(ours.normalization_, expected, rtol=1e-7, atol=1e-9 * scale)
    assert_allclose(ours.transform(K[:7]), K[:7][:, inds] @ expected.T, rtol=1e-7,
                    atol=1e-9 * scale)
