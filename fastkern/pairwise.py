"""Drop-in replacements for sklearn.metrics.pairwise kernels, computed by _gram.

Same names, signatures, defaults and results as scikit-learn, plus
``exponential_kernel`` (exp(gamma <x, y>)) and two keyword-only arguments on
each function: ``out`` (a C-contiguous array of the result's shape and dtype,
filled and returned; nothing else of size N x M is allocated) and
``n_threads`` (None = OpenMP's default).

float32 inputs give float32 results; any other numeric input gives float64.

X and Y may be scipy sparse matrices or arrays (any format; mixed with dense
too): they are computed natively by fastkern._sparse, never densified.

Beyond scikit-learn's kernels (whose ``chi2_kernel`` and
``additive_chi2_kernel`` are computed natively too), the kernels of R's
kernlab: ``laplacian_l2_kernel`` (laplacedot), ``anova_kernel`` (anovadot),
``bessel_kernel`` (besseldot), ``spline_kernel`` (splinedot), and
``histogram_intersection_kernel``.  Their parameter ``gamma`` is kernlab's
``sigma``.  These take dense input only (a sparse X or Y raises TypeError, as
scikit-learn's chi2 kernels do).
``linear_kernel`` and ``cosine_similarity`` with two sparse inputs and
``dense_output=False`` return scipy's sparse X @ Y.T, as scikit-learn.
"""
import numpy as np

from fastkern import _featurewise, _gram, _sparse
from fastkern._threads import blas_limit
from fastkern._validation import (
    check_n_threads, check_out, check_pair, check_pair_sparse, check_real, is_sparse,
)

__all__ = [
    "linear_kernel",
    "polynomial_kernel",
    "rbf_kernel",
    "laplacian_kernel",
    "sigmoid_kernel",
    "exponential_kernel",
    "cosine_similarity",
    "laplacian_l2_kernel",
    "anova_kernel",
    "bessel_kernel",
    "spline_kernel",
    "chi2_kernel",
    "additive_chi2_kernel",
    "histogram_intersection_kernel",
    "pairwise_kernels",
    "KERNEL_PARAMS",
]

# The compiled loops' kernel codes (one table: _gram.pxd's cpdef enum).
_K = _gram.KernelKind
_LINEAR, _POLY, _RBF, _LAPLACIAN = _K.K_LINEAR, _K.K_POLY, _K.K_RBF, _K.K_LAPLACIAN
_SIGMOID, _EXPONENTIAL = _K.K_SIGMOID, _K.K_EXPONENTIAL
# Functions of the Euclidean distance computed from the RBF path's squared
# distances: dense Gram only, so not in KERNEL_CODES, which lists the kernels
# every tile loop has (the sparse and matrix-free ones too).
_LAPLACIAN_L2, _BESSEL = _K.K_LAPLACIAN_L2, _K.K_BESSEL
#: String kernel names -> the codes of the compiled tile loops.
KERNEL_CODES = {"linear": _LINEAR, "poly": _POLY, "polynomial": _POLY, "rbf": _RBF,
                "laplacian": _LAPLACIAN, "sigmoid": _SIGMOID, "exponential": _EXPONENTIAL}
_DISTANCE_KINDS = (_RBF, _LAPLACIAN_L2, _BESSEL)
# kernlab's lim = 1 / (Gamma(nu + 1) 2^nu) overflows beyond nu = 170; fastkern's
# J_nu(r) (2 / r)^nu Gamma(nu + 1) is exact in float64 up to nu = 100 (_gram._bessel).
MAX_BESSEL_ORDER = 100.0

# Up to this many features the fused distance loop beats a gemm on the tile
# for RBF (measured on the 2-core dev machine: d=16 direct is faster, d=64 BLAS).
DIRECT_MAX_FEATURES = 32

def uses_direct_path(kind, n_features):
    """Whether a kernel code is computed by the fused distance loop rather than BLAS."""
    return kind == _LAPLACIAN or (kind in _DISTANCE_KINDS and n_features <= DIRECT_MAX_FEATURES)


def default_gamma(gamma, n_features):
    """gamma as the compiled loops take it: None means 1 / n_features (scikit-learn's
    default, the one place it is computed), else a checked number >= 0."""
    if gamma is None:
        return 1.0 / n_features
    return check_real(gamma, "gamma", low=0.0)


def _compute(X, Y, kind, *, gamma=1.0, coef0=0.0, degree=1.0, order=0.0, out, n_threads,
             path=None):
    """Validated, dispatched call into the Cython tile loop.

    path: None chooses; "direct" or "blas" force a path (tests exercise both).
    """
    # The kernels outside KERNEL_CODES have no sparse loop: check_pair (in _run)
    # rejects a sparse X or Y.
    if kind in KERNEL_CODES.values() and (is_sparse(X) or (Y is not None and is_sparse(Y))):
        if path is not None:
            raise ValueError("path applies to dense input only; sparse input has one path")
        return _run_sparse(X, Y, kind, gamma, coef0, degree, out, n_threads)
    # _features, not X.shape: X is not validated yet (it may be a list or 1-D).
    direct = uses_direct_path(kind, _features(X))
    if path is not None:
        if path not in ("direct", "blas"):
            raise ValueError(f"path must be None, 'direct' or 'blas', got {path!r}")
        if kind == _LAPLACIAN and path == "blas":
            raise ValueError("the Laplacian (L1) kernel has no BLAS path")
        if kind not in _DISTANCE_KINDS + (_LAPLACIAN,) and path == "direct":
            raise ValueError("only the RBF, Laplacian, Laplacian (L2) and Bessel kernels "
                             "have a direct path")
        direct = path == "direct"
    return _run(X, Y, kind, gamma, coef0, degree, out, n_threads, direct, order)


def _output(out, shape, dtype, inputs, n_threads):
    """The checked out=, or a new matrix whose pages all threads fault in."""
    if out is not None:
        return check_out(out, shape, dtype, inputs=inputs)
    out = check_out(None, shape, dtype)
    if n_threads > 1:
        _gram.first_touch(out, n_threads)
    return out


def _run(Xin, Yin, kind, gamma, coef0, degree, out, n_threads, direct, order=0.0):
    X, Y, symmetric = check_pair(Xin, Yin)
    n_threads = check_n_threads(n_threads)
    out = _output(out, (X.shape[0], Y.shape[0]), X.dtype, (X, Y), n_threads)
    # gram() returns a new ndarray over out's buffer; the caller's object is returned.
    if direct:
        _gram.gram(X, Y, out, kind, gamma, coef0, degree, symmetric, True, n_threads, order)
        return out
    # Each OpenMP thread runs its own single-threaded gemm on a tile.
    with blas_limit(1):
        _gram.gram(X, Y, out, kind, gamma, coef0, degree, symmetric, False, n_threads, order)
    return out


def _run_sparse(Xin, Yin, kind, gamma, coef0, degree, out, n_threads, pair=None):
    X, Y, symmetric = check_pair_sparse(Xin, Yin) if pair is None else pair
    n_threads = check_n_threads(n_threads)
    out = _output(out, (X.shape[0], Y.shape[0]), X.dtype,
                  (X.data,) if symmetric else (X.data, Y.data), n_threads)
    # Each OpenMP thread runs its own single-threaded gemm on a tile.
    with blas_limit(1):
        _sparse.gram(X, Y, out, kind, gamma, coef0, degree, symmetric, n_threads)
    return out


def _features(X):
    shape = np.shape(X)
    return shape[1] if len(shape) == 2 and shape[1] > 0 else 1


def _sparse_product(X, Y, dense_output, out):
    """Whether to return scipy's sparse X @ Y.T (both inputs sparse, dense_output False)."""
    if dense_output or not is_sparse(X) or (Y is not None and not is_sparse(Y)):
        return False
    if out is not None:
        raise ValueError("out= needs dense_output=True (the result would be sparse)")
    return True


def linear_kernel(X, Y=None, dense_output=True, *, out=None, n_threads=None):
    """K(x, y) = <x, y>.

    With X and Y sparse and ``dense_output=False`` the result is scipy's
    sparse X @ Y.T (as scikit-learn); otherwise a dense array.
    """
    if _sparse_product(X, Y, dense_output, out):
        check_n_threads(n_threads)
        X, Y, _ = check_pair_sparse(X, Y)
        return X @ Y.T
    return _compute(X, Y, _LINEAR, out=out, n_threads=n_threads)


def polynomial_kernel(X, Y=None, degree=3, gamma=None, coef0=1, *, out=None, n_threads=None):
    """K(x, y) = (gamma <x, y> + coef0)^degree; gamma=None means 1/n_features."""
    degree = check_real(degree, "degree", low=1.0)
    coef0 = check_real(coef0, "coef0")
    return _compute(X, Y, _POLY, gamma=default_gamma(gamma, _features(X)), coef0=coef0,
                    degree=degree, out=out, n_threads=n_threads)


def rbf_kernel(X, Y=None, gamma=None, *, out=None, n_threads=None, path=None):
    """K(x, y) = exp(-gamma ||x - y||^2); gamma=None means 1/n_features."""
    return _compute(X, Y, _RBF, gamma=default_gamma(gamma, _features(X)), out=out,
                    n_threads=n_threads, path=path)


def laplacian_kernel(X, Y=None, gamma=None, *, out=None, n_threads=None):
    """K(x, y) = exp(-gamma ||x - y||_1) (L1 distance, as scikit-learn)."""
    return _compute(X, Y, _LAPLACIAN, gamma=default_gamma(gamma, _features(X)), out=out,
                    n_threads=n_threads)


def sigmoid_kernel(X, Y=None, gamma=None, coef0=1, *, out=None, n_threads=None):
    """K(x, y) = tanh(gamma <x, y> + coef0).

    Not positive definite in general (only for some gamma, coef0 and data).
    """
    coef0 = check_real(coef0, "coef0")
    return _compute(X, Y, _SIGMOID, gamma=default_gamma(gamma, _features(X)), coef0=coef0,
                    out=out, n_threads=n_threads)


def exponential_kernel(X, Y=None, gamma=None, *, out=None, n_threads=None):
    """K(x, y) = exp(gamma <x, y>); gamma=None means 1/n_features.

    Positive definite (the exponential of the linear kernel).  Large gamma <x, y>
    overflows to inf exactly as numpy's exp would.
    """
    return _compute(X, Y, _EXPONENTIAL, gamma=default_gamma(gamma, _features(X)), out=out,
                    n_threads=n_threads)


def _normalized_rows(A):
    """A copy of A with rows of unit L2 norm (zero rows stay zero), as sklearn's normalize."""
    if is_sparse(A):
        norms = np.sqrt(_sparse.row_sq_norms(A.data, A.indptr, 1))
        norms[norms == 0] = 1
        # New data, the same (read-only) index arrays: O(nnz) values only.
        data = A.data / np.repeat(norms, np.diff(A.indptr)).astype(A.dtype, copy=False)
        return type(A)((data, A.indices, A.indptr), shape=A.shape, copy=False)
    norms = np.sqrt(np.einsum("ij,ij->i", A, A))
    norms[norms == 0] = 1
    return A / norms[:, None]


def _sparse_interface(K):
    """scikit-learn >= 1.9 returns its sparse results in the configured container."""
    import scipy.sparse as sp
    import sklearn

    interface = sklearn.get_config().get("sparse_interface")
    if interface == "spmatrix" and not sp.isspmatrix(K):
        return sp.csr_matrix(K)
    if interface == "sparray" and sp.isspmatrix(K):
        return sp.csr_array(K)
    return K


def cosine_similarity(X, Y=None, dense_output=True, *, out=None, n_threads=None):
    """K(x, y) = <x, y> / (|x| |y|), as ``sklearn.metrics.pairwise.cosine_similarity``.

    Rows are L2-normalised (copies; zero rows stay zero, so their similarity
    is 0) and their linear kernel is computed natively, dense or sparse.  With
    X and Y sparse and ``dense_output=False`` the result is sparse.
    """
    n_threads = check_n_threads(n_threads)
    if is_sparse(X) or (Y is not None and is_sparse(Y)):
        sparse_out = _sparse_product(X, Y, dense_output, out)
        X, Y, symmetric = check_pair_sparse(X, Y)
        Xn = _normalized_rows(X)
        Yn = Xn if symmetric else _normalized_rows(Y)
        if sparse_out:
            return _sparse_interface(Xn @ Yn.T)
        return _run_sparse(Xn, Yn, _LINEAR, 1.0, 0.0, 1.0, out, n_threads,
                           pair=(Xn, Yn, symmetric))
    X, Y, symmetric = check_pair(X, Y)
    Xn = _normalized_rows(X)
    Yn = Xn if symmetric else _normalized_rows(Y)
    return _run(Xn, Yn, _LINEAR, 1.0, 0.0, 1.0, out, n_threads, False)


def laplacian_l2_kernel(X, Y=None, gamma=None, *, out=None, n_threads=None, path=None):
    """K(x, y) = exp(-gamma ||x - y||_2), the Laplacian kernel of the Euclidean distance.

    kernlab's ``laplacedot(sigma)`` with ``sigma = gamma``; ``laplacian_kernel``
    is scikit-learn's, of the L1 distance.  gamma=None means 1/n_features (as
    scikit-learn's distance kernels; kernlab's default is sigma = 1).

    The squared distances are the RBF kernel's (fused loop for narrow data,
    BLAS with centring and recomputation of cancelled entries otherwise; see
    fastkern._gram), then mapped to exp(-gamma sqrt(d2)).  kernlab rounds the
    squared distance to 9 decimals first; fastkern does not.
    """
    gamma = _positive_gamma(gamma, _features(X))
    return _compute(X, Y, _LAPLACIAN_L2, gamma=gamma, out=out, n_threads=n_threads, path=path)


def bessel_kernel(X, Y=None, gamma=1.0, order=1, degree=1, *, out=None, n_threads=None,
                  path=None):
    """K(x, y) = (Gamma(nu + 1) (2 / r)^nu J_nu(r))^degree, r = gamma ||x - y||_2, nu = order.

    kernlab's ``besseldot(sigma, order, degree)`` with ``sigma = gamma``: its
    ``kernelMatrix`` computes J_nu(r) r^-nu divided by its value at r = 0,
    1 / (Gamma(nu + 1) 2^nu), so that K(x, x) = 1.  J_nu is the Bessel function
    of the first kind (scipy.special.jv).  kernlab returns exactly 1 for
    r < 1e-4 (a relative error up to 2.5e-9) and rounds the squared distance
    to 9 decimals; fastkern uses the power series near 0 instead and no rounding.

    Parameters
    ----------
    gamma : float > 0, default=1.0
        Scale of the distance (kernlab's sigma); None means 1.0 as well.
    order : float in [0, 100], default=1
        nu.  The kernel is positive definite on R^d when nu >= d / 2 - 1
        (Gneiting's Bessel family); below that, for instance kernlab's default
        nu = 1 with d > 4 features, its Gram matrices can be indefinite.
    degree : int >= 1, default=1
        The power (J_nu changes sign, so only integer powers are real).

    The squared distances come from the RBF kernel's loops, as in
    ``laplacian_l2_kernel``; each value then costs one scipy ``jv`` call.
    """
    gamma = 1.0 if gamma is None else _positive_gamma(gamma, None)
    order = check_real(order, "order", low=0.0)
    if order > MAX_BESSEL_ORDER:
        raise ValueError(f"order must be <= {MAX_BESSEL_ORDER:g}, got {order}")
    degree = _integer_degree(degree)
    return _compute(X, Y, _BESSEL, gamma=gamma, degree=degree, order=order, out=out,
                    n_threads=n_threads, path=path)


def _positive_gamma(gamma, n_features):
    if gamma is None:
        return default_gamma(None, n_features)
    return check_real(gamma, "gamma", low=0.0, low_inclusive=False)


def _integer_degree(degree):
    """An integer >= 1 (a float with an integer value is accepted, as estimators'
    degree may be one); returned as a float for the compiled loops."""
    value = check_real(degree, "degree", low=1.0)
    if value != int(value):
        raise ValueError(f"degree must be an integer >= 1, got {degree!r}")
    return value


def _featurewise_gram(X, Y, kind, *, gamma=1.0, degree=1.0, nonnegative=False, out,
                      n_threads):
    """Validated call into fastkern._featurewise (dense input only)."""
    X, Y, symmetric = check_pair(X, Y)
    if nonnegative:
        # As scikit-learn's chi2 kernels: same messages, same order of checks.
        if X.min() < 0:
            raise ValueError("X contains negative values.")
        if not symmetric and Y.min() < 0:
            raise ValueError("Y contains negative values.")
    n_threads = check_n_threads(n_threads)
    out = _output(out, (X.shape[0], Y.shape[0]), X.dtype, (X, Y), n_threads)
    _featurewise.gram(X, Y, out, kind, gamma, degree, symmetric, n_threads)
    return out


def anova_kernel(X, Y=None, gamma=1.0, degree=1, *, out=None, n_threads=None):
    """K(x, y) = (sum_k exp(-gamma (x_k - y_k)^2))^degree, kernlab's ``anovadot``.

    ``gamma`` is kernlab's sigma (> 0; None means kernlab's default 1.0) and
    ``degree`` an integer >= 1 (kernlab's default 1; the estimators' own
    ``degree`` parameter, default 3, is passed when they use this kernel by name).
    """
    gamma = 1.0 if gamma is None else check_real(gamma, "gamma", low=0.0, low_inclusive=False)
    degree = _integer_degree(degree)
    return _featurewise_gram(X, Y, _featurewise.ANOVA, gamma=gamma, degree=degree, out=out,
                             n_threads=n_threads)


def spline_kernel(X, Y=None, *, out=None, n_threads=None):
    """K(x, y) = prod_k (1 + x_k y_k + x_k y_k m_k - (x_k + y_k) m_k^2 / 2 + m_k^3 / 3),
    m_k = min(x_k, y_k): kernlab's ``splinedot`` (the infinite linear spline kernel).

    Positive definite on non-negative data (where it is derived); any finite
    input is accepted, as by kernlab.  A product of d factors: on wide or
    large-valued data it overflows as kernlab's does.
    """
    return _featurewise_gram(X, Y, _featurewise.SPLINE, out=out, n_threads=n_threads)


def additive_chi2_kernel(X, Y=None, *, out=None, n_threads=None):
    """K(x, y) = -sum_k (x_k - y_k)^2 / (x_k + y_k), as scikit-learn's additive_chi2_kernel.

    Terms with x_k + y_k = 0 count 0.  Negative input raises ValueError (as
    scikit-learn); sparse input raises TypeError.  Only conditionally positive
    definite (the negative of a distance).
    """
    return _featurewise_gram(X, Y, _featurewise.ADDITIVE_CHI2, nonnegative=True, out=out,
                             n_threads=n_threads)


def chi2_kernel(X, Y=None, gamma=1.0, *, out=None, n_threads=None):
    """K(x, y) = exp(-gamma sum_k (x_k - y_k)^2 / (x_k + y_k)), as scikit-learn's chi2_kernel.

    gamma > 0 (default 1.0, as scikit-learn).  Negative input raises ValueError.
    """
    gamma = check_real(gamma, "gamma", low=0.0, low_inclusive=False)
    return _featurewise_gram(X, Y, _featurewise.CHI2, gamma=gamma, nonnegative=True, out=out,
                             n_threads=n_threads)


def histogram_intersection_kernel(X, Y=None, *, out=None, n_threads=None):
    """K(x, y) = sum_k min(x_k, y_k), the histogram intersection kernel.

    Positive definite on non-negative data, which is required (negative input
    raises ValueError).  Named "histogram_intersection" in ``pairwise_kernels``
    and the estimators.
    """
    return _featurewise_gram(X, Y, _featurewise.INTERSECTION, nonnegative=True, out=out,
                             n_threads=n_threads)


_FUNCTIONS = {
    "linear": linear_kernel,
    "poly": polynomial_kernel,
    "polynomial": polynomial_kernel,
    "rbf": rbf_kernel,
    "laplacian": laplacian_kernel,
    "sigmoid": sigmoid_kernel,
    "exponential": exponential_kernel,
    "cosine": cosine_similarity,
    "laplacian_l2": laplacian_l2_kernel,
    "anova": anova_kernel,
    "bessel": bessel_kernel,
    "spline": spline_kernel,
    "chi2": chi2_kernel,
    "additive_chi2": additive_chi2_kernel,
    "histogram_intersection": histogram_intersection_kernel,
}

#: Parameters each string kernel accepts (as sklearn's KERNEL_PARAMS).
KERNEL_PARAMS = {
    "linear": (),
    "poly": ("gamma", "degree", "coef0"),
    "polynomial": ("gamma", "degree", "coef0"),
    "rbf": ("gamma",),
    "laplacian": ("gamma",),
    "sigmoid": ("gamma", "coef0"),
    "exponential": ("gamma",),
    "cosine": (),
    "laplacian_l2": ("gamma",),
    "anova": ("gamma", "degree"),
    "bessel": ("gamma", "order", "degree"),
    "spline": (),
    "chi2": ("gamma",),
    "additive_chi2": (),
    "histogram_intersection": (),
}


class KernelBase:
    """The call protocol of fastkern's kernel objects: ``k(X, Y=None, *, out=None, n_threads=None)``.

    ``fastkern.kernels.Kernel`` (which adds the algebra) derives from it.  It
    lives here so that ``pairwise_kernels`` can tell a kernel object (called on
    whole arrays) from a scikit-learn callable (called on pairs of rows)
    without importing the module of kernel objects, which builds on this one.
    """

    def __call__(self, X, Y=None, *, out=None, n_threads=None):
        raise NotImplementedError


def pairwise_kernels(X, Y=None, metric="linear", *, filter_params=False, n_jobs=None,
                     out=None, n_threads=None, **kwds):
    """Kernel between arrays X and Y, as ``sklearn.metrics.pairwise.pairwise_kernels``.

    metric: one of fastkern's string kernels ("linear", "poly"/"polynomial",
    "rbf", "laplacian", "sigmoid", "exponential", "cosine", "chi2",
    "additive_chi2", and kernlab's "laplacian_l2", "anova", "bessel",
    "spline", plus "histogram_intersection"), "precomputed" (X is the kernel;
    it must be square when Y is None), a fastkern kernel object, any other
    scikit-learn kernel name or a callable k(x, y) on two rows; the last two
    are computed by scikit-learn (``n_jobs`` is passed to it).
    """
    if isinstance(metric, KernelBase):
        return metric(X, Y, out=out, n_threads=n_threads)
    if isinstance(metric, str) and metric in _FUNCTIONS:
        if filter_params:
            kwds = {k: v for k, v in kwds.items() if k in KERNEL_PARAMS[metric]}
        return _FUNCTIONS[metric](X, Y, out=out, n_threads=n_threads, **kwds)
    if metric == "precomputed":
        check_n_threads(n_threads)
        return _precomputed(X, Y, out)
    from sklearn.metrics import pairwise as skp

    if not (callable(metric) or metric in skp.PAIRWISE_KERNEL_FUNCTIONS):
        raise ValueError(
            f"Unknown kernel {metric!r}; expected one of {sorted(_FUNCTIONS)}, "
            "'precomputed', a scikit-learn kernel name, a fastkern kernel or a callable"
        )
    check_n_threads(n_threads)
    K = skp.pairwise_kernels(X, Y, metric=metric, filter_params=filter_params,
                             n_jobs=n_jobs, **kwds)
    if out is None:
        return K
    out = check_out(out, K.shape, K.dtype)
    np.copyto(out, K)
    return out


def _precomputed(X, Y, out):
    """X itself (as float), checked as scikit-learn's check_pairwise_arrays(precomputed=True)."""
    from fastkern._validation import check_array_2d, check_sparse_2d, result_dtype

    if is_sparse(X):
        X = check_sparse_2d(X, "X", result_dtype(X), canonical=False)
    else:
        X = check_array_2d(X, "X")
        X = np.asarray(X, dtype=result_dtype(X))
    n_indexed = X.shape[0]
    if Y is not None:
        n_indexed = (Y if is_sparse(Y) else check_array_2d(Y, "Y")).shape[0]
    # Y None means the queries are the indexed samples: X must be square.
    if X.shape[1] != n_indexed:
        raise ValueError(
            f"Precomputed metric requires shape (n_queries, n_indexed). Got {X.shape} "
            f"for {n_indexed} indexed."
        )
    if out is None:
        return X
    out = check_out(out, X.shape, X.dtype,
                    inputs=(X.data,) if is_sparse(X) else (X,))
    if is_sparse(X):
        X.toarray(out=out)
    else:
        np.copyto(out, X)
    return out
