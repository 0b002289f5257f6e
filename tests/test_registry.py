"""The kernel registry (fastkern._registry): every kernel against its own
formula and an independent one, on every path it declares; the tables derived
from it; and the rational quadratic kernel, added through it, in every
estimator and the command line (issue 25)."""
import inspect
import math

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.spatial.distance import euclidean
from scipy.special import jv
from sklearn.gaussian_process.kernels import RationalQuadratic
from sklearn.metrics import pairwise as skp

import fastkern
from fastkern import _featurewise, _gram, _inchol, _registry, _sparse, kernels, pairwise
from fastkern._kernel_api import STRING_KERNELS, KernelSpec, kernel_constraints
from fastkern._operator import KernelOperator

NAMES = [k.name for k in _registry.KERNELS]


def _loop(f):
    """A Gram from a function of two rows, one pair at a time."""
    def gram(X, Y, **params):
        return np.array([[f(x, y, **params) for y in Y] for x in X])
    return gram


def _bessel_pair(x, y, gamma, order, degree):
    r = gamma * euclidean(x, y)
    if r == 0:
        return 1.0
    return (math.gamma(order + 1) * (2 / r) ** order * jv(order, r)) ** degree


def _spline_pair(x, y):
    out = 1.0
    for a, b in zip(x, y):
        m = min(a, b)
        out *= 1 + a * b + a * b * m - (a + b) * m * m / 2 + m ** 3 / 3
    return out


# Independent references: scikit-learn where it has the kernel, scipy/NumPy
# loops over pairs otherwise; and the parameters each kernel is tested with.
INDEPENDENT = {
    "linear": (lambda X, Y: skp.linear_kernel(X, Y), {}),
    "poly": (lambda X, Y, **p: skp.polynomial_kernel(X, Y, **p),
             {"degree": 2, "gamma": 0.3, "coef0": 0.5}),
    "rbf": (lambda X, Y, **p: skp.rbf_kernel(X, Y, **p), {"gamma": 0.4}),
    "laplacian": (lambda X, Y, **p: skp.laplacian_kernel(X, Y, **p), {"gamma": 0.6}),
    "sigmoid": (lambda X, Y, **p: skp.sigmoid_kernel(X, Y, **p), {"gamma": 0.2, "coef0": 0.3}),
    "exponential": (_loop(lambda x, y, gamma: math.exp(gamma * float(np.dot(x, y)))),
                    {"gamma": 0.5}),
    "cosine": (lambda X, Y: skp.cosine_similarity(X, Y), {}),
    "laplacian_l2": (_loop(lambda x, y, gamma: math.exp(-gamma * euclidean(x, y))),
                     {"gamma": 0.7}),
    "anova": (_loop(lambda x, y, gamma, degree:
                    sum(math.exp(-gamma * (a - b) ** 2) for a, b in zip(x, y)) ** degree),
              {"gamma": 0.6, "degree": 2}),
    "bessel": (_loop(_bessel_pair), {"gamma": 0.8, "order": 1.5, "degree": 2}),
    "spline": (_loop(_spline_pair), {}),
    "chi2": (lambda X, Y, **p: skp.chi2_kernel(X, Y, **p), {"gamma": 0.5}),
    "additive_chi2": (lambda X, Y: skp.additive_chi2_kernel(X, Y), {}),
    "histogram_intersection": (_loop(lambda x, y: sum(min(a, b) for a, b in zip(x, y))), {}),
    "rational_quadratic": (lambda X, Y, alpha, length_scale:
                           RationalQuadratic(length_scale=length_scale, alpha=alpha)(X, Y),
                           {"alpha": 0.7, "length_scale": 1.3}),
}


def _data(n=9, m=7, d=4, seed=0):
    """Non-negative rows (the chi2 kernels need them), one row of Y equal to one of X."""
    rng = np.random.default_rng(seed)
    X, Y = rng.random((n, d)), rng.random((m, d))
    X[3] = Y[2]
    return X, Y


def test_every_kernel_has_an_independent_reference():
    assert set(INDEPENDENT) == set(NAMES)


@pytest.mark.parametrize("name", NAMES, ids=NAMES)
def test_values_against_the_registry_formula_and_an_independent_one(name):
    kdef = _registry.get(name)
    independent, params = INDEPENDENT[name]
    X, Y = _data()
    expected = independent(X, Y, **params)
    resolved = kdef.resolve(params, X.shape[1])
    np.testing.assert_allclose(kdef.reference(X, Y, **resolved), expected, rtol=1e-12,
                               atol=1e-14)
    for alias in kdef.names:
        np.testing.assert_allclose(pairwise.pairwise_kernels(X, Y, metric=alias, **params),
                                   expected, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(getattr(fastkern, kdef.function)(X, Y, **params), expected,
                               rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.diagonal(kdef.reference(X[:7], Y, **resolved)),
                               kdef.paired(X[:7], Y, **resolved), rtol=1e-14)
    if kdef.class_name:
        obj = getattr(kernels, kdef.class_name)(**params)
        np.testing.assert_allclose(obj(X, Y), expected, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", NAMES, ids=NAMES)
def test_every_declared_path(name):
    kdef = _registry.get(name)
    _, params = INDEPENDENT[name]
    X, Y = _data(300, 280, 5, seed=1)
    K = pairwise.pairwise_kernels(X, Y, metric=name, **params)
    if "sparse" in kdef.paths:
        Xs, Ys = sp.csr_matrix(np.where(X < 0.3, 0, X)), sp.csr_matrix(np.where(Y < 0.3, 0, Y))
        np.testing.assert_allclose(pairwise.pairwise_kernels(Xs, Ys, metric=name, **params),
                                   pairwise.pairwise_kernels(Xs.toarray(), Ys.toarray(),
                                                             metric=name, **params),
                                   rtol=1e-12, atol=1e-13)
    else:
        with pytest.raises(TypeError, match="sparse"):
            pairwise.pairwise_kernels(sp.csr_matrix(X), metric=name, **params)
    if "float32" in kdef.paths:
        K32 = pairwise.pairwise_kernels(X.astype(np.float32), Y.astype(np.float32),
                                        metric=name, **params)
        assert K32.dtype == np.float32
        np.testing.assert_allclose(K32, K, rtol=2e-5, atol=2e-6 * np.abs(K).max())
    spec = KernelSpec.from_params(name, kernel_params=params)
    if "matrix-free" in kdef.paths:
        V = np.random.default_rng(2).normal(size=(Y.shape[0], 3))
        op = KernelOperator(Y, kernel=name, kernel_params=params, n_threads=2)
        assert op.compiled is not None
        np.testing.assert_allclose(op.matmat(V, X), K @ V, rtol=1e-10, atol=1e-10)
        KY = pairwise.pairwise_kernels(Y, metric=name, **params)
        np.testing.assert_allclose(op.matmat(V), KY @ V, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(op.symmetric_matmat(V), KY @ V, rtol=1e-10, atol=1e-10)
    else:
        assert spec.compiled(X.shape[1]) is None


@pytest.mark.parametrize("name", [k.name for k in _registry.KERNELS if k.params],
                         ids=[k.name for k in _registry.KERNELS if k.params])
def test_bad_parameters_raise_naming_them(name):
    kdef = _registry.get(name)
    X, _ = _data()
    for p in kdef.params:
        bad = [np.nan, "a"]
        if p.low is not None:
            bad.append(p.low if not p.low_inclusive else p.low - 1)
        if p.high is not None:
            bad.append(p.high + 1)
        if p.integer:
            bad.append(p.default + 0.5)
        for value in bad:
            with pytest.raises((ValueError, TypeError), match=p.name):
                getattr(fastkern, kdef.function)(X, **{p.name: value})


def test_the_tables_are_derived_from_the_registry():
    names = set(_registry.BY_NAME)
    assert set(pairwise.KERNEL_PARAMS) == names
    for name, kdef in _registry.BY_NAME.items():
        assert pairwise.KERNEL_PARAMS[name] == kdef.param_names
        assert pairwise._FUNCTIONS[name] is getattr(fastkern, kdef.function)
        assert kdef.function in fastkern.__all__ and kdef.function in pairwise.__all__
    assert set(STRING_KERNELS) >= names
    assert names <= kernel_constraints()["kernel"][0].options
    from fastkern.cli._common import kernel_names

    assert kernel_names() == sorted(names)
    with pytest.raises(ValueError) as err:
        pairwise.pairwise_kernels(np.eye(2), metric="nope")
    assert all(repr(name) in str(err.value) for name in names)
    assert {k.class_name for k in _registry.KERNELS if k.class_name} <= set(kernels.__all__)


def test_one_set_of_kind_codes():
    # Every compiled kernel, feature-wise ones included, has its code in the one
    # table of src/fk_maps.h, and the feature-wise loop takes no other numbering.
    codes = _gram.kind_codes()
    compiled = {k.compiled: k for k in _registry.KERNELS if k.compiled}
    assert set(codes) == set(compiled)
    assert sorted(codes.values()) == list(range(len(codes)))
    for name, code in codes.items():
        assert _gram.kind_geometry(code) == compiled[name].geometry
    assert _inchol.DIRECT_KINDS == {codes["rbf"], codes["laplacian"]}
    assert {name: codes[k.compiled] for name, k in _registry.BY_NAME.items()
            if k.compiled and {"sparse", "matrix-free"} <= k.paths} == pairwise.KERNEL_CODES
    assert not [n for n in dir(_featurewise) if n.isupper()]


def test_parameter_array_slots_and_defaults():
    slots = _gram.param_slots()
    assert sorted(slots.values()) == list(range(len(slots)))
    defaults = _gram.pack_params({})
    assert defaults.dtype == np.float64 and defaults.shape == (len(slots),)
    packed = _gram.pack_params({"gamma": 0.25, "order": 3.0})
    for name, i in slots.items():
        expected = {"gamma": 0.25, "order": 3.0}.get(name, defaults[i])
        assert packed[i] == expected
    with pytest.raises(ValueError, match="no parameter slot 'alpha'"):
        _gram.pack_params({"alpha": 1.0})
    # Every registry kernel's compiled numbers name slots of the array.
    for k in _registry.KERNELS:
        if k.compiled:
            assert set(k.compiled_numbers({}, 3)) <= set(slots), k.name


@pytest.mark.parametrize("params", [np.ones(1), np.ones(9), None], ids=["short", "long", "none"])
def test_compiled_loops_refuse_a_wrong_parameter_array(params):
    # The loops read the array without the GIL: its length is checked first.
    X = np.ones((3, 2))
    out = np.empty((3, 3))
    code = _gram.kind_codes()
    with pytest.raises(ValueError, match="params"):
        _gram.gram(X, X, out, code["rbf"], params, True, True, 1)
    with pytest.raises(ValueError, match="params"):
        _featurewise.gram(X, X, out, code["chi2"], params, True, 1)
    with pytest.raises(ValueError, match="params"):
        _sparse.gram(sp.csr_matrix(X), sp.csr_matrix(X), out, code["rbf"], params, True, 1)


def test_compiled_loops_refuse_a_kind_of_the_other_loop():
    X = np.ones((3, 2))
    out = np.empty((3, 3))
    code = _gram.kind_codes()
    with pytest.raises(ValueError, match="not a kernel code of the tile loops"):
        _gram.gram(X, X, out, code["chi2"], _gram.pack_params({}), True, True, 1)
    with pytest.raises(ValueError, match="not a kernel code of the tile loops"):
        _gram.gram(X, X, out, len(code), _gram.pack_params({}), True, True, 1)
    with pytest.raises(ValueError, match="not a feature-wise kernel code"):
        _featurewise.gram(X, X, out, code["rbf"], _gram.pack_params({}), True, 1)


def test_generated_function_and_class_have_real_signatures():
    sig = inspect.signature(fastkern.rational_quadratic_kernel)
    assert list(sig.parameters) == ["X", "Y", "alpha", "length_scale", "out", "n_threads",
                                    "path"]
    assert sig.parameters["alpha"].default == 1.0
    doc = fastkern.rational_quadratic_kernel.__doc__
    for section in ("Parameters", "alpha : float", "length_scale : float", "out : ndarray",
                    "n_threads : int", "path : ", "Returns", "See Also"):
        assert section in doc
    assert list(inspect.signature(kernels.RationalQuadratic).parameters) == \
        ["alpha", "length_scale"]
    k = kernels.RationalQuadratic(length_scale=2.0)
    assert k.as_metric() == ("rational_quadratic", {"alpha": 1.0, "length_scale": 2.0})
    with pytest.raises(TypeError):
        fastkern.rational_quadratic_kernel(np.eye(2), gamma=1.0)


# ---------------------------------------------------------------- rational quadratic


@pytest.mark.parametrize("alpha,length_scale", [(1.0, 1.0), (0.3, 2.5), (5.0, 0.7)])
@pytest.mark.parametrize("d", [3, 20, 100])
@pytest.mark.parametrize("path", [None, "direct", "dot", "blas"])
def test_rational_quadratic_matches_scikit_learn(alpha, length_scale, d, path):
    rng = np.random.default_rng(d)
    X, Y = rng.normal(size=(300, d)), rng.normal(size=(200, d))
    expected = RationalQuadratic(length_scale=length_scale, alpha=alpha)(X, Y)
    K = fastkern.rational_quadratic_kernel(X, Y, alpha=alpha, length_scale=length_scale,
                                           path=path)
    np.testing.assert_allclose(K, expected, rtol=1e-12)
    KX = fastkern.pairwise_kernels(X, metric="rq", alpha=alpha, length_scale=length_scale)
    np.testing.assert_allclose(KX, RationalQuadratic(length_scale, alpha)(X), rtol=1e-12)
    assert np.all(np.diagonal(KX) == 1)


RQ_PARAMS = {"alpha": 0.7, "length_scale": 1.3}


@pytest.fixture
def rq_data():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(60, 3))
    y = (X[:, 0] + 0.3 * rng.normal(size=60) > 0).astype(int)
    return X, y, RationalQuadratic(length_scale=1.3, alpha=0.7)(X)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("solver", ["dense", "matrix-free", "block_krylov"])
def test_rational_quadratic_kernel_pca(rq_data, solver, dtype):
    X, _, K = rq_data
    ref = fastkern.KernelPCA(n_components=3, kernel="precomputed").fit(K)
    model = fastkern.KernelPCA(n_components=3, kernel="rational_quadratic",
                               kernel_params=RQ_PARAMS, eigen_solver=solver,
                               random_state=0).fit(X.astype(dtype))
    rtol = 1e-8 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(model.eigenvalues_, ref.eigenvalues_, rtol=rtol)
    np.testing.assert_allclose(np.abs(model.transform(X[:5].astype(dtype))),
                               np.abs(ref.transform(K[:5])), rtol=100 * rtol, atol=100 * rtol)


def test_rational_quadratic_estimators(rq_data):
    X, y, K = rq_data
    ridge = fastkern.KernelRidge(alpha=0.1, kernel="rational_quadratic",
                                 kernel_params=RQ_PARAMS).fit(X, y)
    ref = fastkern.KernelRidge(alpha=0.1, kernel="precomputed").fit(K, y)
    np.testing.assert_allclose(ridge.predict(X), ref.predict(K), rtol=1e-9, atol=1e-12)
    for cls in (fastkern.KernelSIR, fastkern.KernelFDA):
        model = cls(n_components=1, kernel="rq", kernel_params=RQ_PARAMS).fit(X, y)
        ref = cls(n_components=1, kernel="precomputed").fit(K, y)
        np.testing.assert_allclose(np.abs(model.transform(X)), np.abs(ref.transform(K)),
                                   rtol=1e-6, atol=1e-9)
    Y2 = np.random.default_rng(6).normal(size=(60, 2)) + X[:, :2]
    L = RationalQuadratic(length_scale=1.3, alpha=0.7)(Y2)
    cca = fastkern.KernelCCA(n_components=1, kernel="rational_quadratic",
                             kernel_params=RQ_PARAMS, kernel_params_y=RQ_PARAMS).fit(X, Y2)
    ref = fastkern.KernelCCA(n_components=1, kernel="precomputed").fit(K, L)
    for a, b in zip(cca.transform(X, Y2), ref.transform(K, L)):
        np.testing.assert_allclose(np.abs(a), np.abs(b), rtol=1e-6, atol=1e-9)


def test_rational_quadratic_kernel_tests(rq_data):
    X, _, _ = rq_data
    Y = X[::-1] + 0.5

    def rq(x, y):
        return (1 + np.sum((x - y) ** 2) / (2 * 0.7 * 1.3 ** 2)) ** -0.7

    kw = {"n_permutations": 5, "random_state": 0}
    mmd = fastkern.mmd_test(X, Y, kernel="rational_quadratic", kernel_params=RQ_PARAMS, **kw)
    ref = fastkern.mmd_test(X, Y, kernel=rq, **kw)
    assert mmd.statistic == pytest.approx(ref.statistic, rel=1e-10)
    hsic = fastkern.hsic_test(X, Y, kernel_x="rq", kernel_y="rq", kernel_params_x=RQ_PARAMS,
                              kernel_params_y=RQ_PARAMS, **kw)
    ref = fastkern.hsic_test(X, Y, kernel_x=rq, kernel_y=rq, **kw)
    assert hsic.statistic == pytest.approx(ref.statistic, rel=1e-10)
    lin = fastkern.linear_mmd_test(X, Y, kernel="rq", kernel_params=RQ_PARAMS)
    ref = fastkern.linear_mmd_test(X, Y, kernel=rq)
    assert lin.statistic == pytest.approx(ref.statistic, rel=1e-12)


def test_rational_quadratic_on_the_command_line(tmp_path, rq_data):
    from fastkern.cli import main

    X, _, _ = rq_data
    data, out = tmp_path / "x.csv", tmp_path / "out.csv"
    np.savetxt(data, X, delimiter=",")
    code = main(["kpca", str(data), "--no-header", "--no-scale", "--kernel",
                 "rational_quadratic", "--alpha", "0.7", "--length-scale", "1.3",
                 "--components", "2", "--threads", "1", "--out", str(out)])
    assert not code
    Z = np.loadtxt(out, delimiter=",", skiprows=1)
    ref = fastkern.KernelPCA(n_components=2, kernel="rq", kernel_params=RQ_PARAMS).fit(X)
    np.testing.assert_allclose(np.abs(Z[:, -2:]), np.abs(ref.transform(X)), rtol=1e-6,
                               atol=1e-8)


# ---------------------------------------------------------------- gamma, one rule


@pytest.mark.parametrize("gamma", ["scale", "median", 0.0])
def test_kernel_tests_resolve_gamma_as_the_estimators(gamma, rq_data):
    X, _, _ = rq_data
    Y = X[::-1] + 0.5
    r = fastkern.mmd_test(X, Y, gamma=gamma, n_permutations=5, random_state=0)
    from fastkern._kernel_api import resolve_gamma

    expected = resolve_gamma(gamma, np.concatenate([X, Y]), "rbf")
    assert r.kernel_params["gamma"] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("path", ["direct", "dot", "blas"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
def test_rational_quadratic_keeps_accuracy_far_from_the_origin(path, dtype):
    # Rows at offset 1000 with a spread of 0.01: the expansion |x|^2 + |y|^2 - 2 x.y
    # would cancel every digit; the RBF path's centring and recomputation (which
    # every squared-distance kernel shares) keep the distances.  scikit-learn's
    # RationalQuadratic takes direct differences (scipy's pdist/cdist).
    rng = np.random.default_rng(11)
    X = (1000.0 + 0.01 * rng.normal(size=(200, 40))).astype(dtype)
    Y = (1000.0 + 0.01 * rng.normal(size=(150, 40))).astype(dtype)
    l = 0.02
    expected = RationalQuadratic(length_scale=l, alpha=0.5)(X.astype(np.float64),
                                                            Y.astype(np.float64))
    K = fastkern.rational_quadratic_kernel(X, Y, alpha=0.5, length_scale=l, path=path)
    rtol = 1e-12 if dtype == np.float64 else 1e-5
    np.testing.assert_allclose(K, expected, rtol=rtol)
