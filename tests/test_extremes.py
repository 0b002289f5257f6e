"""Extreme parameters and data: a right value or an error naming the cause.

A plausible wrong value (a 1 or a 0 where the kernel is 0.78) is the worst
outcome; NaN or a ValueError naming the argument is honest.  The references
are plain formulas evaluated in NumPy's long double where float64's range
is too short (x86's 80-bit format reaches 1e4932; elsewhere those tests
skip), or the kernel's closed-form limit.
"""
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import fastkern
import fastkern.kernels as fk_kernels
from fastkern import _registry

WIDE = np.finfo(np.longdouble).maxexp > 4000
needs_wide = pytest.mark.skipif(not WIDE, reason="needs an extended-range long double")

PARAMS = [(kdef, p) for kdef in _registry.KERNELS for p in kdef.params]


@pytest.mark.parametrize("kdef, param", PARAMS,
                         ids=[f"{k.name}-{p.name}" for k, p in PARAMS])
def test_a_parameter_past_float64_is_a_value_error_naming_it(kdef, param):
    # float(10**400) raised a bare OverflowError naming nothing.
    X = np.abs(np.random.default_rng(0).normal(size=(4, 3)))
    with pytest.raises(ValueError, match=rf"^{param.name} must be finite in float64"):
        getattr(fastkern, kdef.function)(X, **{param.name: 10**400})
    with pytest.raises(ValueError, match=rf"^{param.name} must be finite in float64"):
        getattr(fk_kernels, kdef.class_name)(**{param.name: 10**400})(X)


def _rq_long_double(X, alpha, length_scale):
    """The rational quadratic Gram by its definition, in long double."""
    X = np.asarray(X, dtype=np.longdouble)
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=-1)
    alpha, length_scale = np.longdouble(alpha), np.longdouble(length_scale)
    return (1 + d2 / (2 * alpha * length_scale ** 2)) ** -alpha


def _inputs(X, float32=True):
    yield X
    yield sp.csr_matrix(X)
    if float32:
        yield X.astype(np.float32)


@needs_wide
@pytest.mark.parametrize("alpha, length_scale, scale", [
    (1.0, 1e-200, 1.0),     # 1 / (2 alpha l^2) overflows: was ZeroDivisionError
    (1e-3, 1e-160, 1.0),    # ... and is subnormal-sized before that
    (1e-6, 1e-150, 1e100),  # gamma d2 overflows: the kernel is 0.9988, not 0
    (2.0, 1e200, 1.0),      # l^2 overflows: was OverflowError; the kernel is 1
    (1e-300, 1.0, 1.0),
])
def test_rational_quadratic_at_extreme_parameters_matches_its_definition(alpha, length_scale,
                                                                        scale):
    X = np.random.default_rng(1).normal(size=(6, 3)) * scale
    ref = _rq_long_double(X, alpha, length_scale).astype(np.float64)
    for A in _inputs(X, float32=scale == 1.0):
        rtol = 1e-6 if getattr(A, "dtype", None) == np.float32 else 1e-12
        K = fastkern.rational_quadratic_kernel(A, alpha=alpha, length_scale=length_scale)
        np.testing.assert_allclose(K, ref, rtol=rtol, atol=1e-300)
        Kc = fk_kernels.RationalQuadratic(alpha=alpha, length_scale=length_scale)(A)
        np.testing.assert_allclose(Kc, ref, rtol=rtol, atol=1e-300)


def test_rational_quadratic_tends_to_the_rbf_kernel_as_alpha_grows():
    # (1 + d2 / (2 alpha l^2))^-alpha -> exp(-d2 / (2 l^2)): the definition
    # evaluated as written gives 1 (1 + 1e-301 is 1), the limit is exact to
    # about d2 / alpha.
    X = np.random.default_rng(2).normal(size=(6, 3))
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=-1)
    K = fastkern.rational_quadratic_kernel(X, alpha=1e300, length_scale=0.7)
    np.testing.assert_allclose(K, np.exp(-d2 / (2 * 0.7 ** 2)), rtol=1e-12)


# ------------------------------------------------ gamma="scale" and estimate_gamma

@pytest.mark.parametrize("make", [np.asarray, sp.csr_matrix], ids=["dense", "csr"])
@pytest.mark.parametrize("value", [0.1, 0.0, -3.7e-5])
def test_gamma_scale_of_constant_data_is_one(make, value):
    # The variance of a constant column of 0.1 came out as a rounding residue:
    # gamma 1.69e30 dense, 5.0e14 CSR (E[x^2] - E[x]^2).
    from fastkern._kernel_api import resolve_gamma

    C = np.full((50, 3), value)
    assert resolve_gamma("scale", make(C)) == 1.0
    model = fastkern.KernelRidge(kernel="rbf", gamma="scale").fit(make(C), np.arange(50.0))
    assert model.gamma_ == 1.0


@pytest.mark.parametrize("offset", [0.0, 1e4])
@pytest.mark.parametrize("scale", [1.0, 1e-150, 1e150])
def test_gamma_scale_matches_numpys_variance_at_any_scale(scale, offset):
    from fastkern._kernel_api import resolve_gamma

    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 5))
    if offset:
        X += offset  # E[x^2] - E[x]^2 loses 8 digits to it
    else:
        X[rng.random(X.shape) < 0.5] = 0.0
    X *= scale
    # Reference: the variance of the exactly rescaled data (a power of two).
    e = int(np.frexp(scale)[1])
    ref = np.ldexp(1.0 / (5 * np.ldexp(X, -e).var()), -2 * e)
    for A in (X, sp.csr_matrix(X)):
        np.testing.assert_allclose(resolve_gamma("scale", A), ref, rtol=1e-12)


@pytest.mark.parametrize("scale", [1e200, 1e-200])
def test_gamma_scale_past_float64_is_an_error(scale):
    # X * 1e200 gave gamma 0 (a kernel of ones), X * 1e-200 gamma inf.
    from fastkern._kernel_api import resolve_gamma

    X = np.random.default_rng(4).normal(size=(20, 3)) * scale
    for A in (X, sp.csr_matrix(X)):
        with pytest.raises(ValueError, match="gamma='scale'.*past float64's range"):
            resolve_gamma("scale", A)


def _median_gamma_reference(X):
    """1 / the median of the squared distances of distinct rows, by NumPy."""
    i, j = np.triu_indices(X.shape[0], k=1)
    d2 = ((X[i] - X[j]) ** 2).sum(axis=1)
    return 1.0 / np.median(d2[d2 != 0])


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.floats(-150, 150))
def test_estimate_gamma_is_scale_invariant(log10_scale):
    # X * 1e-200 said "every sampled pair of rows of X is identical": the
    # squared distances underflowed to 0.  A power of two scales X exactly,
    # so gamma(X 2^k) = gamma(X) 2^-2k to the last bit.
    from fastkern._gamma import median_gamma

    X = np.random.default_rng(5).normal(size=(30, 3))
    k = int(round(log10_scale * np.log2(10.0)))
    base = _median_gamma_reference(X)
    expected = np.ldexp(base, -2 * k)
    Xs = np.ldexp(X, k)
    np.testing.assert_allclose(fastkern.estimate_gamma(Xs).gamma, expected, rtol=1e-14)
    np.testing.assert_allclose(median_gamma(sp.csr_matrix(Xs)), expected, rtol=1e-14)
    np.testing.assert_allclose(
        fastkern.estimate_gamma(Xs, "sigest", random_state=0, scaled=True).quantiles,
        fastkern.estimate_gamma(X, "sigest", random_state=0, scaled=True).quantiles,
        rtol=1e-13)


@pytest.mark.parametrize("scale", [1e-200, 1e200])
def test_estimate_gamma_past_float64_says_so(scale):
    X = np.random.default_rng(6).normal(size=(20, 3)) * scale
    with pytest.raises(ValueError, match="past float64's range"):
        fastkern.estimate_gamma(X)


# ------------------------------------------------------------------- SIR

@pytest.mark.parametrize("scale", [1e200, 1e-200, 1e300])
@pytest.mark.parametrize("make", [np.asarray, sp.csr_matrix], ids=["dense", "csr"])
def test_sliced_inverse_regression_does_not_depend_on_the_scale_of_x(scale, make):
    # X * 1e200 overflowed the covariance, X * 1e-200 underflowed it: both
    # said "X has zero variance".
    from fastkern.sir import SlicedInverseRegression

    rng = np.random.default_rng(7)
    X = rng.normal(size=(60, 3))
    y = X[:, 0] + 0.1 * rng.normal(size=60)
    ref = SlicedInverseRegression(n_directions=2).fit(X, y)
    model = SlicedInverseRegression(n_directions=2).fit(make(X * scale), y)
    np.testing.assert_allclose(model.directions_, ref.directions_, atol=1e-13)
    np.testing.assert_allclose(model.eigenvalues_, ref.eigenvalues_, atol=1e-13)


# --------------------------------------------------------- long double input

@needs_wide
def test_long_double_past_float64_is_rejected_naming_the_argument():
    # A long double 1e400 passed validation, became inf in float64 and
    # KernelRidge predicted 40 NaN.
    rng = np.random.default_rng(8)
    X = rng.normal(size=(40, 2)).astype(np.longdouble)
    y = np.arange(40.0)
    ok = X.copy()
    X[3, 1] = np.longdouble("1e400")
    with pytest.raises(ValueError, match="^X holds values past float64's range"):
        fastkern.rbf_kernel(X)
    with pytest.raises(ValueError, match="^Y holds values past float64's range"):
        fastkern.rbf_kernel(ok, X)
    with pytest.raises(ValueError, match="^X holds values past float64's range"):
        fastkern.rbf_kernel(sp.csr_matrix(X))
    with pytest.raises(ValueError, match="^X holds values past float64's range"):
        fastkern.KernelRidge(kernel="rbf").fit(X, y)
    model = fastkern.KernelRidge(kernel="rbf").fit(ok, y)
    with pytest.raises(ValueError, match="^X holds values past float64's range"):
        model.predict(X)
    with pytest.raises(ValueError, match="^y holds values past float64's range"):
        fastkern.KernelRidge(kernel="rbf").fit(ok, X[:, 1].copy())
    # Long double within float64's range is its float64 value.
    np.testing.assert_allclose(model.predict(ok), model.predict(ok.astype(np.float64)),
                               rtol=1e-15)


# --------------------------------------------- data whose squares leave the range

def test_sparse_and_dense_rbf_at_1e154_match_the_exact_values():
    # ||x||^2 + ||y||^2 - 2 <x, y> overflowed: sparse gave [1, 0, 1].
    A = np.array([[1e154], [1.5e154], [3e154]])
    exact = np.exp(-np.array([0.0, 0.25, 4.0]) * 1e-308 * 1e308)
    for X in (A, sp.csr_matrix(A)):
        np.testing.assert_allclose(fastkern.rbf_kernel(X, gamma=1e-308)[0], exact, rtol=1e-13)


X_WIDE = np.array([[2e19, 0.0], [0.0, 2e19], [1e19, 1e19], [3e19, -1e19]])


@pytest.mark.parametrize("scale", [1.0, 1e-40])
@pytest.mark.parametrize("function, params", [
    (fastkern.bessel_kernel, {"gamma": 1e-19}),            # gave NaN
    (fastkern.rbf_kernel, {"gamma": 1e-39}),               # gave 0
    (fastkern.laplacian_l2_kernel, {"gamma": 1e-19}),      # gave 0
    (fastkern.rational_quadratic_kernel, {"length_scale": 3e19}),  # gave 0
    (fastkern.cosine_similarity, {}),                      # diagonal 0
    (fastkern.sigmoid_kernel, {"gamma": 1e-39}),
], ids=["bessel", "rbf", "laplacian_l2", "rq", "cosine", "sigmoid"])
def test_float32_data_whose_squares_leave_float32_matches_float64(function, params, scale):
    # 2e19 squared overflows float32, 2e-21 squared underflows it; the same
    # kernel of float64 data (whose squares fit) is the reference, the
    # parameters following the scale exactly where they hold a distance.
    kdef = next(k for k in _registry.KERNELS if k.function == function.__name__)
    factor = 2.0 ** np.round(np.log2(scale))
    X = X_WIDE * factor
    if "gamma" in params:
        params = {"gamma": params["gamma"] / factor ** kdef.gamma_degree}
    elif "length_scale" in params:
        params = {"length_scale": params["length_scale"] * factor}
    ref = function(X, **params)
    K = function(X.astype(np.float32), **params)
    assert K.dtype == np.float32
    np.testing.assert_allclose(K, ref, rtol=2e-6, atol=2e-6)
    assert np.abs(ref - np.diag(np.diag(ref))).max() > 0.01  # not a trivial kernel


HOMOGENEOUS = [("rbf", {"gamma": 0.3}), ("laplacian", {"gamma": 0.3}),
               ("laplacian_l2", {"gamma": 0.3}), ("bessel", {"gamma": 0.3, "order": 1.5}),
               ("rational_quadratic", {"alpha": 0.7, "length_scale": 1.3}),
               ("sigmoid", {"gamma": 0.3, "coef0": 0.2}),
               ("poly", {"gamma": 0.3, "coef0": 0.2, "degree": 2}),
               ("exponential", {"gamma": 0.3}), ("cosine", {})]


def _at_scale(kdef, params, k):
    """The parameters that give the same kernel on the data times 2^k."""
    params = dict(params)
    if "length_scale" in params:
        params["length_scale"] = np.ldexp(params["length_scale"], k)
    elif "gamma" in params:
        params["gamma"] = np.ldexp(params["gamma"], -kdef.gamma_degree * k)
    return params


@pytest.mark.parametrize("name, params", HOMOGENEOUS, ids=[n for n, _ in HOMOGENEOUS])
@settings(max_examples=25, deadline=None, derandomize=True)
@given(k=st.integers(-500, 500), float32_k=st.integers(-120, 120))
def test_kernels_follow_an_exact_rescaling_of_the_data(name, params, k, float32_k):
    # k(x 2^k, y 2^k) with gamma 2^(-degree k) is k(x, y) with gamma, exactly
    # in arithmetic: the reference is the registry's formula on the data at
    # scale 1.  Values of 2^511 overflowed the squared distances (dense and
    # sparse), float32 ones of 2^64 and 2^-66 likewise.
    kdef = _registry.get(name)
    X0 = np.abs(np.random.default_rng(9).normal(size=(6, 3))) + 0.1
    ref = kdef.reference(X0, **kdef.resolve(params, 3))
    function = getattr(fastkern, kdef.function)
    at_k = _at_scale(kdef, params, k)
    for X in (np.ldexp(X0, k), sp.csr_matrix(np.ldexp(X0, k))):
        np.testing.assert_allclose(function(X, **at_k), ref, rtol=1e-9, atol=1e-12)
    X32 = np.ldexp(X0, float32_k).astype(np.float32)
    np.testing.assert_allclose(function(X32, **_at_scale(kdef, params, float32_k)), ref,
                               rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("function", [fastkern.rbf_kernel, fastkern.laplacian_l2_kernel,
                                      fastkern.sigmoid_kernel])
def test_float32_gamma_past_float32_is_an_error_naming_it(function):
    # It became inf in the float32 loops, and inf * 0 put NaN on the diagonal.
    X = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]], dtype=np.float32)
    with pytest.raises(ValueError, match="^gamma=1e\\+39 is past float32's range"):
        function(X, gamma=1e39)
    K = function(X.astype(np.float64), gamma=1e39)
    assert not np.isnan(K).any()


def test_a_strided_target_with_a_nan_is_a_value_error():
    # _all_finite asked a 1-D strided array for its second dimension.
    X = np.random.default_rng(10).normal(size=(20, 2))
    y = np.arange(40.0)
    y[4] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        fastkern.KernelRidge(kernel="rbf").fit(X, y[::2])


def test_the_packed_upper_triangle_gram_is_rescaled_too():
    # KernelRidge's fit multiplies by the packed upper triangle
    # (pairwise._upper_triangle_gram), which computed the overflowing
    # distances as the full Gram did.
    from fastkern import pairwise

    X = np.random.default_rng(11).normal(size=(40, 3)) * 1e154
    K = fastkern.rbf_kernel(X, gamma=1e-308)
    d2 = ((X[:, None, :] / 1e154 - X[None, :, :] / 1e154) ** 2).sum(axis=-1)
    np.testing.assert_allclose(K, np.exp(-d2 * 1e-308 * 1e308), rtol=1e-12, atol=1e-300)
    packed = pairwise._upper_triangle_gram(X, "rbf", {"gamma": 1e-308})
    np.testing.assert_allclose(np.triu(packed.toarray()), np.triu(K), rtol=1e-14, atol=1e-300)


@pytest.mark.parametrize("kernel", ["rbf", "laplacian"])
@pytest.mark.parametrize("train_scale, test_scale, gamma", [
    (1e154, 1e154, 1e-308), (1e-160, 1e-160, 1e300), (1.0, 1e154, 0.5), (1e154, 1.0, 1e-308)])
def test_matrix_free_products_are_rescaled_as_the_gram(kernel, train_scale, test_scale, gamma):
    # KernelRidge's predict and the matrix-free KernelPCA multiply by tiles
    # of K never stored (fastkern._operator); their squared distances
    # overflowed (or underflowed) where the Gram functions' did not, and
    # predict came back 0.27 off.  The reference: the exact Gram in long
    # double, times the coefficients.
    from fastkern._kernel_api import KernelSpec
    from fastkern._operator import KernelOperator

    rng = np.random.default_rng(5)
    X, A = rng.normal(size=(40, 3)) * train_scale, rng.normal(size=(7, 3)) * test_scale
    V = rng.normal(size=(40, 2))

    def exact(P, Q):
        P, Q = P.astype(np.longdouble), Q.astype(np.longdouble)
        diff = P[:, None, :] - Q[None, :, :]
        dist = (diff ** 2).sum(-1) if kernel == "rbf" else np.abs(diff).sum(-1)
        return np.exp(-np.longdouble(gamma) * dist).astype(np.float64)

    if not WIDE and max(train_scale, test_scale) > 1e150:
        pytest.skip("the reference needs an extended-range long double")
    op = KernelOperator.from_spec(X, KernelSpec.from_params(kernel, gamma=gamma, X=X))
    np.testing.assert_allclose(op.matmat(V, A), exact(A, X) @ V, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(op.symmetric_matmat(V), exact(X, X) @ V, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(op.X, X)  # the operator's rows are the caller's
    model = fastkern.KernelRidge(alpha=1.0, kernel=kernel, gamma=gamma).fit(X, V[:, 0])
    np.testing.assert_allclose(model.predict(A), exact(A, X) @ model.dual_coef_,
                               rtol=1e-10, atol=1e-12)
