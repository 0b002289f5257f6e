"""Kernel objects that compose by the rules that keep a kernel positive definite.

If k1, k2 are positive definite kernels then so are k1 + k2, k1 * k2 (Schur
product theorem), c * k for c > 0, sum_i a_i k^i with every a_i >= 0, and
exp(k) (the limit of such polynomials).  Each operation below implements one
of these rules and refuses the ones that break positive definiteness
(c <= 0, a negative coefficient, differences of kernels).

Every kernel is callable as ``k(X, Y=None, *, out=None, n_threads=None)`` and
returns the Gram matrix; base kernels run the Cython tile loops directly.

A kernel of ``fastkern._registry`` without a class written here gets one
made from its entry (:func:`_registered_class`), named by its
``class_name``.
"""
import inspect
import numbers
import re

import numpy as np

from fastkern import _registry
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


# The Parameters and Returns of every kernel's __call__: the kernels here and
# fastkern.structured's (whose module imports this one) fill in the inputs they
# take and their result's dtype (see _call_doc).
_CALL_DOC = """Parameters
----------
X : {X}
    {X_doc}
Y : {Y}, default=None
    Second input; None means X.
out : ndarray of shape (n_samples_X, n_samples_Y), default=None
    C-contiguous array of the result's dtype, filled and returned.
n_threads : int, default=None
    OpenMP threads; None means the default (OMP_NUM_THREADS, else the CPUs
    available to this process, capped by its CPU quota).

Returns
-------
K : ndarray of shape (n_samples_X, n_samples_Y)
    The Gram matrix, ``out`` when it was given; of dtype
    {dtype}."""

_VECTOR_INPUTS = {
    "X": "{array-like, sparse matrix} of shape (n_samples_X, n_features)",
    "X_doc": "First input (sparse input only for the kernels whose functions in\n"
             "``fastkern.pairwise`` take it).",
    "Y": "{array-like, sparse matrix} of shape (n_samples_Y, n_features)",
    "dtype": "float32 when X and Y are float32, float64 otherwise",
}


def _call_doc(inputs):
    """Replace the ``@call@`` line of a __call__ docstring by _CALL_DOC filled in
    with ``inputs`` (a description of X spanning lines continues at its indent)."""
    fields = dict(inputs, X_doc=inputs["X_doc"].replace("\n", "\n    "))
    text = _CALL_DOC.format(**fields)

    def decorate(function):
        function.__doc__ = re.sub(r"^( *)@call@$", lambda m: _pw._indented(text, m.group(1)),
                                  function.__doc__, flags=re.M)
        return function

    return decorate


class Kernel(_pw.KernelBase):
    """Base class of the kernel objects: their algebra and call protocol.

    A kernel ``k`` is called as ``k(X, Y=None, *, out=None, n_threads=None)`` and
    returns the Gram matrix.  Kernels compose by the rules that keep a kernel
    positive definite: ``k1 + k2`` (``Sum``), ``k1 * k2`` (``Product``), ``c * k``
    for c > 0 (``Scaled``), ``k ** p`` for an integer p >= 1 and
    ``k.polynomial(coefficients)`` with coefficients >= 0 (``PolynomialOf``), and
    ``k.exp()`` (``ExpOf``).  ``k1 - k2``, ``-k`` and non-positive scale factors
    raise ValueError.

    See Also
    --------
    fastkern.pairwise.pairwise_kernels : Accepts a kernel object as ``metric``.

    Examples
    --------
    >>> import numpy as np
    >>> from fastkern.kernels import RBF, Linear
    >>> k = 0.5 * RBF(gamma=1.0) + Linear() ** 2
    >>> k
    (0.5 * RBF(gamma=1.0) + PolynomialOf(kernel=Linear(), coefficients=(0.0, 0.0, 1.0)))
    >>> k(np.array([[0.0], [1.0]]))
    array([[0.5       , 0.18393972],
           [0.18393972, 1.5       ]])
    """

    @_call_doc(_VECTOR_INPUTS)
    def __call__(self, X, Y=None, *, out=None, n_threads=None):
        """Compute the Gram matrix (implemented by each kernel).

        @call@

        Raises
        ------
        NotImplementedError
            On the base class itself.
        """
        raise NotImplementedError

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
        """Return sum_i coefficients[i] * k^i (elementwise powers).

        Parameters
        ----------
        coefficients : sequence of float
            The coefficients a_0, a_1, ..., all >= 0 (a_0 is a constant kernel).

        Returns
        -------
        PolynomialOf
            The polynomial of this kernel.

        Raises
        ------
        ValueError
            If ``coefficients`` is empty or has a negative value.
        """
        return PolynomialOf(self, coefficients)

    def exp(self):
        """Return exp(k) elementwise, positive definite whenever k is.

        Returns
        -------
        ExpOf
            The exponential of this kernel.
        """
        return ExpOf(self)

    # -- introspection (sklearn's clone/get_params deep-copy these objects) --
    def _params(self):
        return {}

    def as_metric(self):
        """Return this kernel as a ``pairwise_kernels`` metric, or None for a composition.

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
        """Return this kernel as a ``pairwise_kernels`` metric.

        Returns
        -------
        metric : tuple (str, dict)
            The string kernel name and its parameters.
        """
        return self._metric, dict(self._params())

    @_call_doc(_VECTOR_INPUTS)
    def __call__(self, X, Y=None, *, out=None, n_threads=None):
        """Compute the Gram matrix with ``fastkern.pairwise.pairwise_kernels``.

        @call@
        """
        return _pw.pairwise_kernels(X, Y, metric=self._metric, out=out,
                                    n_threads=n_threads, **self._params())


class _Base(_Named):
    """A named kernel of ``pairwise.KERNEL_CODES``: every tile loop has it, the
    matrix-free (fastkern.large_n) and sparse ones too."""


class Linear(_Base):
    """The linear kernel k(x, y) = <x, y>.

    See Also
    --------
    fastkern.pairwise.linear_kernel : The same kernel as a function.
    """

    _metric = "linear"


class Polynomial(_Base):
    """The polynomial kernel k(x, y) = (gamma <x, y> + coef0)^degree.

    Positive definite for an integer degree >= 1 and coef0 >= 0 (a polynomial
    of the linear kernel with non-negative coefficients), which is enforced.

    Parameters
    ----------
    degree : int, default=3
        An integer >= 1.
    gamma : float, default=None
        Kernel coefficient (>= 0); None means 1 / n_features.
    coef0 : float, default=1.0
        Constant term (>= 0).
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
    """The RBF (Gaussian) kernel k(x, y) = exp(-gamma ||x - y||^2).

    Parameters
    ----------
    gamma : float, default=None
        Kernel coefficient (>= 0); None means 1 / n_features.
    """

    _metric = "rbf"


class Laplacian(_GammaKernel):
    """The Laplacian kernel k(x, y) = exp(-gamma ||x - y||_1).

    Parameters
    ----------
    gamma : float, default=None
        Kernel coefficient (>= 0); None means 1 / n_features.
    """

    _metric = "laplacian"


class Exponential(_GammaKernel):
    """The exponential kernel k(x, y) = exp(gamma <x, y>).

    Parameters
    ----------
    gamma : float, default=None
        Kernel coefficient (>= 0); None means 1 / n_features.
    """

    _metric = "exponential"


class LaplacianL2(_Named):
    """The Laplacian kernel of the Euclidean distance, k(x, y) = exp(-gamma ||x - y||_2).

    kernlab's laplacedot (sigma = gamma).

    Parameters
    ----------
    gamma : float, default=None
        Kernel coefficient (> 0); None means 1 / n_features.

    See Also
    --------
    fastkern.pairwise.laplacian_l2_kernel : The same kernel as a function.
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
    """The ANOVA kernel k(x, y) = (sum_k exp(-gamma (x_k - y_k)^2))^degree.

    kernlab's anovadot (sigma = gamma).  Positive definite: a sum of Gaussian
    kernels of one feature each, raised to an integer power.

    Parameters
    ----------
    gamma : float, default=1.0
        Kernel coefficient (> 0), kernlab's sigma.
    degree : int, default=1
        An integer >= 1.

    See Also
    --------
    fastkern.pairwise.anova_kernel : The same kernel as a function.
    """

    _metric = "anova"

    def __init__(self, gamma=1.0, degree=1):
        self.gamma = check_real(gamma, "gamma", low=0.0, low_inclusive=False)
        self.degree = _check_integer_degree(degree)

    def _params(self):
        return {"gamma": self.gamma, "degree": self.degree}


class Bessel(_Named):
    """The Bessel kernel k(x, y) = (Gamma(nu + 1) (2 / r)^nu J_nu(r))^degree.

    Here r = gamma ||x - y|| and nu = order: kernlab's besseldot(sigma = gamma,
    order, degree).

    Positive definite on R^d only when order >= d / 2 - 1 (with fewer, for
    instance kernlab's default order 1 on more than 4 features, Gram matrices
    can be indefinite: check with ``fastkern.min_eigenvalue``).

    Parameters
    ----------
    gamma : float, default=1.0
        Scale of the distance (> 0), kernlab's sigma.
    order : float, default=1
        The order nu, in [0, 100].
    degree : int, default=1
        An integer >= 1.

    See Also
    --------
    fastkern.pairwise.bessel_kernel : The same kernel as a function.
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
    """The spline kernel of kernlab's splinedot.

    A product over features of the infinite linear spline kernel, positive
    definite on non-negative data.

    See Also
    --------
    fastkern.pairwise.spline_kernel : The same kernel as a function.
    """

    _metric = "spline"


class Chi2(_Named):
    """The chi-squared kernel k(x, y) = exp(-gamma sum_k (x_k - y_k)^2 / (x_k + y_k)).

    On non-negative data, as scikit-learn's chi2_kernel (positive definite).

    Parameters
    ----------
    gamma : float, default=1.0
        Kernel coefficient (> 0).
    """

    _metric = "chi2"

    def __init__(self, gamma=1.0):
        self.gamma = check_real(gamma, "gamma", low=0.0, low_inclusive=False)

    def _params(self):
        return {"gamma": self.gamma}


class AdditiveChi2(_Named):
    """The additive chi-squared kernel k(x, y) = -sum_k (x_k - y_k)^2 / (x_k + y_k).

    As scikit-learn's additive_chi2_kernel.  Only conditionally positive definite
    (the negative of a distance): its Gram matrices have negative eigenvalues, and
    compositions do not make it positive definite (``Chi2`` is the exponentiated,
    positive definite form).  Offered for compatibility with scikit-learn.
    """

    _metric = "additive_chi2"


class HistogramIntersection(_Named):
    """The histogram intersection kernel k(x, y) = sum_k min(x_k, y_k).

    Positive definite on non-negative data.
    """

    _metric = "histogram_intersection"


class Sigmoid(_Base):
    """The sigmoid kernel k(x, y) = tanh(gamma <x, y> + coef0).

    Not positive definite in general: its Gram matrix can have negative
    eigenvalues for many gamma/coef0 and data sets (check one with
    ``fastkern.min_eigenvalue``).  It is offered for compatibility with
    scikit-learn; compositions that assume positive definiteness do not make
    it one.

    Parameters
    ----------
    gamma : float, default=None
        Kernel coefficient (>= 0); None means 1 / n_features.
    coef0 : float, default=1.0
        Constant term.
    """

    _metric = "sigmoid"

    def __init__(self, gamma=None, coef0=1.0):
        self.gamma = check_real(gamma, "gamma", low=0.0, allow_none=True)
        self.coef0 = check_real(coef0, "coef0")

    def _params(self):
        return {"gamma": self.gamma, "coef0": self.coef0}


class Sum(Kernel):
    """The sum k1 + k2 of two kernels.

    Parameters
    ----------
    k1 : Kernel
        First term.
    k2 : Kernel
        Second term.
    """

    def __init__(self, k1, k2):
        self.k1, self.k2 = k1, k2

    @_call_doc(_VECTOR_INPUTS)
    def __call__(self, X, Y=None, *, out=None, n_threads=None):
        """Compute the Gram matrix k1(X, Y) + k2(X, Y).

        @call@

        Notes
        -----
        k1 is computed into ``out``; k2 needs one temporary Gram matrix.
        """
        K = self.k1(X, Y, out=out, n_threads=n_threads)
        K += self.k2(X, Y, n_threads=n_threads)
        return K

    def _params(self):
        return {"k1": self.k1, "k2": self.k2}

    def __repr__(self):
        return f"({self.k1!r} + {self.k2!r})"


class Product(Kernel):
    """The elementwise product k1 * k2 of two kernels.

    Positive definite by the Schur product theorem.

    Parameters
    ----------
    k1 : Kernel
        First factor.
    k2 : Kernel
        Second factor.
    """

    def __init__(self, k1, k2):
        self.k1, self.k2 = k1, k2

    @_call_doc(_VECTOR_INPUTS)
    def __call__(self, X, Y=None, *, out=None, n_threads=None):
        """Compute the Gram matrix k1(X, Y) * k2(X, Y) elementwise.

        @call@

        Notes
        -----
        k1 is computed into ``out``; k2 needs one temporary Gram matrix.
        """
        K = self.k1(X, Y, out=out, n_threads=n_threads)
        K *= self.k2(X, Y, n_threads=n_threads)
        return K

    def _params(self):
        return {"k1": self.k1, "k2": self.k2}

    def __repr__(self):
        return f"({self.k1!r} * {self.k2!r})"


class Scaled(Kernel):
    """The kernel c * k for c > 0.

    Parameters
    ----------
    kernel : Kernel
        The kernel k.
    c : float
        The scale factor (> 0).
    """

    def __init__(self, kernel, c):
        self.c = check_real(c, "c", low=0.0, low_inclusive=False)
        self.kernel = kernel

    @_call_doc(_VECTOR_INPUTS)
    def __call__(self, X, Y=None, *, out=None, n_threads=None):
        """Compute the Gram matrix c * k(X, Y), in place.

        @call@
        """
        K = self.kernel(X, Y, out=out, n_threads=n_threads)
        K *= K.dtype.type(self.c)
        return K

    def _params(self):
        return {"kernel": self.kernel, "c": self.c}

    def __repr__(self):
        return f"{self.c!r} * {self.kernel!r}"


class PolynomialOf(Kernel):
    """The polynomial sum_i a_i k^i of a kernel, with a_i >= 0.

    a_0 is a constant kernel, also positive definite.  Trailing zero coefficients
    are dropped.

    Parameters
    ----------
    kernel : Kernel
        The kernel k.
    coefficients : sequence of float
        The coefficients a_0, a_1, ..., all >= 0.
    """

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

    @_call_doc(_VECTOR_INPUTS)
    def __call__(self, X, Y=None, *, out=None, n_threads=None):
        """Compute the Gram matrix sum_i a_i k(X, Y)^i elementwise.

        @call@

        Notes
        -----
        Horner's rule in ``out``, from one Gram matrix of the kernel k.
        """
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
    """The elementwise exponential exp(k) of a kernel.

    Parameters
    ----------
    kernel : Kernel
        The kernel k.
    """

    def __init__(self, kernel):
        self.kernel = kernel

    @_call_doc(_VECTOR_INPUTS)
    def __call__(self, X, Y=None, *, out=None, n_threads=None):
        """Compute the Gram matrix exp(k(X, Y)), in place.

        @call@
        """
        K = self.kernel(X, Y, out=out, n_threads=n_threads)
        np.exp(K, out=K)
        return K

    def _params(self):
        return {"kernel": self.kernel}


def exp(kernel):
    """Return exp(k), positive definite whenever k is.

    Parameters
    ----------
    kernel : Kernel
        The kernel k.

    Returns
    -------
    ExpOf
        The elementwise exponential of ``kernel``.

    Raises
    ------
    TypeError
        If ``kernel`` is not a fastkern kernel.

    Examples
    --------
    >>> import numpy as np
    >>> from fastkern.kernels import Linear, exp
    >>> exp(Linear())(np.array([[0.0], [1.0]]))
    array([[1.        , 1.        ],
           [1.        , 2.71828183]])
    """
    if not isinstance(kernel, Kernel):
        raise TypeError(f"exp expects a fastkern kernel, got {type(kernel).__name__}")
    return ExpOf(kernel)


def _registered_class(kdef):
    """The kernel class of a registry kernel that has none written above.

    Its ``__init__`` takes the kernel's parameters with their defaults and
    checks them by the registry's rules (None kept where it means a
    default, to be resolved on the data).
    """
    P = inspect.Parameter
    signature = inspect.Signature(
        [P("self", P.POSITIONAL_OR_KEYWORD)]
        + [P(p.name, P.POSITIONAL_OR_KEYWORD, default=p.default) for p in kdef.params])

    def __init__(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        for p in kdef.params:
            value = bound.arguments[p.name]
            if not (value is None and p.none is not None):
                value = p.resolve(value)
            setattr(self, p.name, value)

    def _params(self):
        return {p.name: getattr(self, p.name) for p in kdef.params}

    __init__.__signature__ = signature
    __init__.__doc__ = "Check and store the kernel's parameters."
    doc = [f"The {kdef.name.replace('_', ' ')} kernel {kdef.formula}.", ""]
    if kdef.params:
        doc += ["Parameters", "----------"] + [p.describe() for p in kdef.params] + [""]
    doc += ["See Also", "--------",
            f"fastkern.pairwise.{kdef.function} : The same kernel as a function."]
    return type(kdef.class_name, (_Base if "matrix-free" in kdef.paths else _Named,), {
        "__init__": __init__, "_params": _params, "_metric": kdef.name,
        "__module__": __name__, "__qualname__": kdef.class_name,
        "__doc__": "\n".join(doc).replace("\n", "\n    ") + "\n    "})


for _kdef in _registry.KERNELS:
    if _kdef.class_name and _kdef.class_name not in globals():
        globals()[_kdef.class_name] = _registered_class(_kdef)
        __all__.append(_kdef.class_name)
del _kdef


def min_eigenvalue(K):
    """Compute the smallest eigenvalue of a symmetric matrix, without the others.

    One LAPACK call (syevr: tridiagonalisation, then bisection for a single
    eigenvalue).  A clearly negative result means the kernel is not positive
    definite on these data.

    Parameters
    ----------
    K : array-like of shape (n_samples, n_samples)
        A symmetric matrix, computed in float64.  Symmetry is checked on a
        sample of up to 64 rows.

    Returns
    -------
    float
        The smallest eigenvalue.

    Raises
    ------
    ValueError
        If ``K`` is not square or not symmetric.

    Notes
    -----
    Lanczos is not used: a positive semi-definite Gram has a cloud of eigenvalues
    decaying towards 0, where ARPACK's stopping test (relative to the Ritz value)
    is never met.

    Examples
    --------
    >>> import numpy as np
    >>> from fastkern import min_eigenvalue
    >>> round(min_eigenvalue(np.array([[2.0, 1.0], [1.0, 2.0]])), 12)
    1.0
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

