"""Kernel objects that compose by the rules that keep a kernel positive definite.

If k1, k2 are positive definite kernels then so are k1 + k2, k1 * k2 (Schur
product theorem), c * k for c > 0, sum_i a_i k^i with every a_i >= 0, and
exp(k) (the limit of such polynomials).  Each operation below implements one
of these rules and refuses the ones that break positive definiteness
(c <= 0, a negative coefficient, differences of kernels).

Every kernel is callable as ``k(X, Y=None, *, out=None, n_threads=None)`` and
returns the Gram matrix; base kernels run the Cython tile loops directly.
"""
import numbers

import numpy as np

from fastkern import pairwise as _pw
from fastkern._validation import check_real, check_square

__all__ = [
    "Kernel",
    "Linear",
    "Polynomial",
    "RBF",
    "Laplacian",
    "Sigmoid",
    "Exponential",
    "LaplacianL2",
    "Anova",
    "Bessel",
    "Spline",
    "Chi2",
    "AdditiveChi2",
    "HistogramIntersection",
    "Sum",
    "Product",
    "Scaled",
    "PolynomialOf",
    "ExpOf",
    "exp",
    "min_eigenvalue",
]


def _is_number(c):
    return isinstance(c, numbers.Real) and not isinstance(c, (bool, np.bool_))


class Kernel(_pw.KernelBase):
    """Base class: the algebra of kernels on top of the call protocol."""

    # -- algebra ---------------------------------------------------------
    def __add__(self, other):
        if isinstance(other, Kernel):
            return Sum(self, other)
        return NotImplemented

    __radd__ = __add__

    def __mul__(self, other):
        if isinstance(other, Kernel):
            return Product(self, other)
        if _is_number(other):
            return Scaled(self, other)
        return NotImplemented

    __rmul__ = __mul__

    def __pow__(self, p):
        if not isinstance(p, numbers.Integral) or isinstance(p, bool) or p < 1:
            raise ValueError(f"a kernel can only be raised to an integer power >= 1, got {p!r}")
        return PolynomialOf(self, [0.0] * int(p) + [1.0])

    def __sub__(self, other):
        raise ValueError("the difference of two kernels is not positive definite in general")

    __rsub__ = __sub__

    def __neg__(self):
        raise ValueError("-k is not positive definite: scale factors must be > 0")

    def polynomial(self, coefficients):
        """sum_i coefficients[i] * k^i (elementwise powers); all coefficients >= 0."""
        return PolynomialOf(self, coefficients)

    def exp(self):
        """exp(k) elementwise, positive definite whenever k is."""
        return ExpOf(self)

    # -- introspection (sklearn's clone/get_params deep-copy these objects) --
    def _params(self):
        return {}

    def as_metric(self):
        """This kernel as a ``pairwise_kernels`` metric, or None for a composition.

        Returns
        -------
        metric : tuple (str, dict) or None
            The string kernel name and its parameters, e.g. ``("rbf", {"gamma": 0.5})``
            for ``RBF(0.5)``; None when no single string kernel computes it.
        """
        return None

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        return f"{type(self).__name__}({args})"

    def __eq__(self, other):
        return type(self) is type(other) and self._params() == other._params()

    def __hash__(self):
        return hash((type(self).__name__, repr(self)))


class _Named(Kernel):
    """A kernel computed by ``pairwise_kernels(metric=self._metric, **self._params())``."""

    _metric = None

    def as_metric(self):
        """This kernel as a ``pairwise_kernels`` metric: ``(name, parameters)``."""
        return self._metric, dict(self._params())

    def __call__(self, X, Y=None, *, out=None, n_threads=None):
        return _pw.pairwise_kernels(X, Y, metric=self._metric, out=out,
                                    n_threads=n_threads, **self._params())


class _Base(_Named):
    """A named kernel of ``pairwise.KERNEL_CODES``: every tile loop has it, the
    matrix-free (fastkern.large_n) and sparse ones too."""


class Linear(_Base):
    """k(x, y) = <x, y>."""

    _metric = "linear"


class Polynomial(_Base):
    """k(x, y) = (gamma <x, y> + coef0)^degree.

    Positive definite for an integer degree >= 1 and coef0 >= 0 (a polynomial
    of the linear kernel with non-negative coefficients), which is enforced.
    """

    _metric = "poly"

    def __init__(self, degree=3, gamma=None, coef0=1.0):
        self.degree = _check_integer_degree(degree)
        self.gamma = check_real(gamma, "gamma", low=0.0, allow_none=True)
        self.coef0 = check_real(coef0, "coef0", low=0.0)

    def _params(self):
        return {"degree": self.degree, "gamma": self.gamma, "coef0": self.coef0}


class _GammaKernel(_Base):
    def __init__(self, gamma=None):
        self.gamma = check_real(gamma, "gamma", low=0.0, allow_none=True)

    def _params(self):
        return {"gamma": self.gamma}


class RBF(_GammaKernel):
    """k(x, y) = exp(-gamma ||x - y||^2); gamma=None means 1/n_features."""

    _metric = "rbf"


class Laplacian(_GammaKernel):
    """k(x, y) = exp(-gamma ||x - y||_1); gamma=None means 1/n_features."""

    _metric = "laplacian"


class Exponential(_GammaKernel):
    """k(x, y) = exp(gamma <x, y>); gamma=None means 1/n_features."""

    _metric = "exponential"


class LaplacianL2(_Named):
    """k(x, y) = exp(-gamma ||x - y||_2), kernlab's laplacedot (sigma = gamma).

    gamma=None means 1/n_features.  See ``fastkern.pairwise.laplacian_l2_kernel``.
    """

    _metric = "laplacian_l2"

    def __init__(self, gamma=None):
        self.gamma = check_real(gamma, "gamma", low=0.0, low_inclusive=False, allow_none=True)

    def _params(self):
        return {"gamma": self.gamma}


def _check_integer_degree(degree):
    if isinstance(degree, bool) or not isinstance(degree, numbers.Integral) or degree < 1:
        raise ValueError(f"degree must be an integer >= 1, got {degree!r}")
    return int(degree)


class Anova(_Named):
    """k(x, y) = (sum_k exp(-gamma (x_k - y_k)^2))^degree, kernlab's anovadot (sigma = gamma).

    Positive definite: a sum of Gaussian kernels of one feature each, raised to
    an integer power.  See ``fastkern.pairwise.anova_kernel``.
    """

    _metric = "anova"

    def __init__(self, gamma=1.0, degree=1):
        self.gamma = check_real(gamma, "gamma", low=0.0, low_inclusive=False)
        self.degree = _check_integer_degree(degree)

    def _params(self):
        return {"gamma": self.gamma, "degree": self.degree}


class Bessel(_Named):
    """k(x, y) = (Gamma(nu + 1) (2 / r)^nu J_nu(r))^degree, r = gamma ||x - y||, nu = order:
    kernlab's besseldot(sigma = gamma, order, degree).

    Positive definite on R^d only when order >= d / 2 - 1 (with fewer, for
    instance kernlab's default order 1 on more than 4 features, Gram matrices
    can be indefinite: check with ``fastkern.min_eigenvalue``).  See
    ``fastkern.pairwise.bessel_kernel``.
    """

    _metric = "bessel"

    def __init__(self, gamma=1.0, order=1, degree=1):
        self.gamma = check_real(gamma, "gamma", low=0.0, low_inclusive=False)
        self.order = check_real(order, "order", low=0.0)
        if self.order > _pw.MAX_BESSEL_ORDER:
            raise ValueError(f"order must be <= {_pw.MAX_BESSEL_ORDER:g}, got {order}")
        self.degree = _check_integer_degree(degree)

    def _params(self):
        return {"gamma": self.gamma, "order": self.order, "degree": self.degree}


class Spline(_Named):
    """kernlab's splinedot: a product over features of the infinite linear spline
    kernel, positive definite on non-negative data.  See
    ``fastkern.pairwise.spline_kernel``."""

    _metric = "spline"


class Chi2(_Named):
    """k(x, y) = exp(-gamma sum_k (x_k - y_k)^2 / (x_k + y_k)) on non-negative data,
    as scikit-learn's chi2_kernel (positive definite)."""

    _metric = "chi2"

    def __init__(self, gamma=1.0):
        self.gamma = check_real(gamma, "gamma", low=0.0, low_inclusive=False)

    def _params(self):
        return {"gamma": self.gamma}


class AdditiveChi2(_Named):
    """k(x, y) = -sum_k (x_k - y_k)^2 / (x_k + y_k), as scikit-learn's additive_chi2_kernel.

    Only conditionally positive definite (the negative of a distance): its Gram
    matrices have negative eigenvalues, and compositions do not make it
    positive definite (``Chi2`` is the exponentiated, positive definite form).
    Offered for compatibility with scikit-learn.
    """

    _metric = "additive_chi2"


class HistogramIntersection(_Named):
    """k(x, y) = sum_k min(x_k, y_k) on non-negative data (positive definite)."""

    _metric = "histogram_intersection"


class Sigmoid(_Base):
    """k(x, y) = tanh(gamma <x, y> + coef0).

    Not positive definite in general: its Gram matrix can have negative
    eigenvalues for many gamma/coef0 and data sets (check one with
    ``fastkern.min_eigenvalue``).  It is offered for compatibility with
    scikit-learn; compositions that assume positive definiteness do not make
    it one.
    """

    _metric = "sigmoid"

    def __init__(self, gamma=None, coef0=1.0):
        self.gamma = check_real(gamma, "gamma", low=0.0, allow_none=True)
        self.coef0 = check_real(coef0, "coef0")

    def _params(self):
        return {"gamma": self.gamma, "coef0": self.coef0}


class Sum(Kernel):
    """k1 + k2."""

    def __init__(self, k1, k2):
        self.k1, self.k2 = k1, k2

    def __call__(self, X, Y=None, *, out=None, n_threads=None):
        K = self.k1(X, Y, out=out, n_threads=n_threads)
        K += self.k2(X, Y, n_threads=n_threads)
        return K

    def _params(self):
        return {"k1": self.k1, "k2": self.k2}

    def __repr__(self):
        return f"({self.k1!r} + {self.k2!r})"


class Product(Kernel):
    """k1 * k2 (elementwise; positive definite by the Schur product theorem)."""

    def __init__(self, k1, k2):
        self.k1, self.k2 = k1, k2

    def __call__(self, X, Y=None, *, out=None, n_threads=None):
        K = self.k1(X, Y, out=out, n_threads=n_threads)
        K *= self.k2(X, Y, n_threads=n_threads)
        return K

    def _params(self):
        return {"k1": self.k1, "k2": self.k2}

    def __repr__(self):
        return f"({self.k1!r} * {self.k2!r})"


class Scaled(Kernel):
    """c * k for c > 0."""

    def __init__(self, kernel, c):
        self.c = check_real(c, "c", low=0.0, low_inclusive=False)
        self.kernel = kernel

    def __call__(self, X, Y=None, *, out=None, n_threads=None):
        K = self.kernel(X, Y, out=out, n_threads=n_threads)
        K *= K.dtype.type(self.c)
        return K

    def _params(self):
        return {"kernel": self.kernel, "c": self.c}

    def __repr__(self):
        return f"{self.c!r} * {self.kernel!r}"


class PolynomialOf(Kernel):
    """sum_i a_i k^i with a_i >= 0 (a_0 is a constant kernel, also positive definite)."""

    def __init__(self, kernel, coefficients):
        coefs = [check_real(a, f"coefficients[{i}]") for i, a in enumerate(coefficients)]
        if not coefs:
            raise ValueError("coefficients must not be empty")
        bad = [i for i, a in enumerate(coefs) if a < 0]
        if bad:
            raise ValueError(
                f"coefficients must be >= 0 to keep the kernel positive definite; "
                f"coefficients[{bad[0]}] = {coefs[bad[0]]}"
            )
        while len(coefs) > 1 and coefs[-1] == 0:
            coefs.pop()
        self.kernel = kernel
        self.coefficients = tuple(coefs)

    def __call__(self, X, Y=None, *, out=None, n_threads=None):
        base = self.kernel(X, Y, n_threads=n_threads)
        if out is None:
            out = np.empty_like(base)
        else:
            from fastkern._validation import check_out

            out = check_out(out, base.shape, base.dtype, inputs=(base,))
        # Horner's rule, elementwise, in place in `out`.
        out.fill(self.coefficients[-1])
        for a in reversed(self.coefficients[:-1]):
            out *= base
            out += out.dtype.type(a)
        return out

    def _params(self):
        return {"kernel": self.kernel, "coefficients": self.coefficients}


class ExpOf(Kernel):
    """exp(k) elementwise."""

    def __init__(self, kernel):
        self.kernel = kernel

    def __call__(self, X, Y=None, *, out=None, n_threads=None):
        K = self.kernel(X, Y, out=out, n_threads=n_threads)
        np.exp(K, out=K)
        return K

    def _params(self):
        return {"kernel": self.kernel}


def exp(kernel):
    """exp(k): positive definite whenever k is."""
    if not isinstance(kernel, Kernel):
        raise TypeError(f"exp expects a fastkern kernel, got {type(kernel).__name__}")
    return ExpOf(kernel)


def min_eigenvalue(K):
    """Smallest eigenvalue of a symmetric matrix, without computing the others.

    One LAPACK call (syevr: tridiagonalisation, then bisection for a single
    eigenvalue).  Lanczos is not used: a positive semi-definite Gram has a
    cloud of eigenvalues decaying towards 0, where ARPACK's stopping test
    (relative to the Ritz value) is never met.  A clearly negative result
    means the kernel is not positive definite on these data.
    """
    from scipy import linalg

    K = check_square(K, "K")
    K = np.asarray(K, dtype=np.float64)
    scale = max(float(np.abs(K).max()), np.finfo(float).tiny)
    # Asymmetry is checked on a sample of rows so the check costs O(n).
    n = K.shape[0]
    rows = np.unique(np.linspace(0, n - 1, min(n, 64)).astype(int))
    if not np.allclose(K[rows], K[:, rows].T, rtol=1e-7, atol=1e-9 * scale):
        raise ValueError("K must be symmetric")
    return float(linalg.eigh(K, eigvals_only=True, subset_by_index=[0, 0],
                             driver="evr")[0])

