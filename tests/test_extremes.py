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
