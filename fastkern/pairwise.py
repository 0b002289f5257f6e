"""Drop-in replacements for sklearn.metrics.pairwise kernels, computed by _gram.

Same names, signatures, defaults and results as scikit-learn, plus
``exponential_kernel`` (exp(gamma <x, y>)) and two keyword-only arguments on
each function: ``out`` (a C-contiguous array of the result's shape and dtype,
filled and returned; nothing else of size N x M is allocated) and
``n_threads`` (None = OpenMP's default).

float32 inputs give float32 results; any other numeric input gives float64.
"""
import numpy as np

from fastkern import _gram
from fastkern._threads import blas_limit
from fastkern._validation import check_n_threads, check_out, check_pair, check_real

__all__ = [
    "linear_kernel",
    "polynomial_kernel",
    "rbf_kernel",
    "laplacian_kernel",
    "sigmoid_kernel",
    "exponential_kernel",
    "pairwise_kernels",
    "KERNEL_PARAMS",
]

# Kernel codes shared with _gram.pxd.
_LINEAR, _POLY, _RBF, _LAPLACIAN, _SIGMOID, _EXPONENTIAL = range(6)
#: String kernel names -> the codes of the compiled tile loops.
KERNEL_CODES = {"linear": _LINEAR, "poly": _POLY, "polynomial": _POLY, "rbf": _RBF,
                "laplacian": _LAPLACIAN, "sigmoid": _SIGMOID, "exponential": _EXPONENTIAL}

# Up to this many features the fused distance loop beats a gemm on the tile
# for RBF (measured on the 2-core dev machine: d=16 direct is faster, d=64 BLAS).
DIRECT_MAX_FEATURES = 32

def uses_direct_path(kind, n_features):
    """Whether a kernel code is computed by the fused distance loop rather than BLAS."""
    return kind == _LAPLACIAN or (kind == _RBF and n_features <= DIRECT_MAX_FEATURES)


def _gamma(gamma, n_features):
    if gamma is None:
        return 1.0 / n_features
    return check_real(gamma, "gamma", low=0.0)


def _compute(X, Y, kind, *, gamma=1.0, coef0=0.0, degree=1.0, out, n_threads, path=None):
    """Validated, dispatched call into the Cython tile loop.

    path: None chooses; "direct" or "blas" force a path (tests exercise both).
    """
    # _features, not X.shape: X is not validated yet (it may be a list or 1-D).
    direct = uses_direct_path(kind, _features(X))
    if path is not None:
        if path not in ("direct", "blas"):
            raise ValueError(f"path must be None, 'direct' or 'blas', got {path!r}")
        if kind == _LAPLACIAN and path == "blas":
            raise ValueError("the Laplacian (L1) kernel has no BLAS path")
        if kind not in (_RBF, _LAPLACIAN) and path == "direct":
            raise ValueError("only the RBF and Laplacian kernels have a direct path")
        direct = path == "direct"
    return _run(X, Y, kind, gamma, coef0, degree, out, n_threads, direct)


def _run(Xin, Yin, kind, gamma, coef0, degree, out, n_threads, direct):
    X, Y, symmetric = check_pair(Xin, Yin)
    n_threads = check_n_threads(n_threads)
    out = check_out(out, (X.shape[0], Y.shape[0]), X.dtype, inputs=(X, Y))
    # gram() returns a new ndarray over out's buffer; the caller's object is returned.
    if direct:
        _gram.gram(X, Y, out, kind, gamma, coef0, degree, symmetric, True, n_threads)
        return out
    # Each OpenMP thread runs its own single-threaded gemm on a tile.
    with blas_limit(1):
        _gram.gram(X, Y, out, kind, gamma, coef0, degree, symmetric, False, n_threads)
    return out


def _features(X):
    shape = np.shape(X)
    return shape[1] if len(shape) == 2 and shape[1] > 0 else 1


def linear_kernel(X, Y=None, dense_output=True, *, out=None, n_threads=None):
    """K(x, y) = <x, y>.  ``dense_output`` is accepted for compatibility (always dense)."""
    return _compute(X, Y, _LINEAR, out=out, n_threads=n_threads)


def polynomial_kernel(X, Y=None, degree=3, gamma=None, coef0=1, *, out=None, n_threads=None):
    """K(x, y) = (gamma <x, y> + coef0)^degree; gamma=None means 1/n_features."""
    degree = check_real(degree, "degree", low=1.0)
    coef0 = check_real(coef0, "coef0")
    return _compute(X, Y, _POLY, gamma=_gamma(gamma, _features(X)), coef0=coef0,
                    degree=degree, out=out, n_threads=n_threads)


def rbf_kernel(X, Y=None, gamma=None, *, out=None, n_threads=None, path=None):
    """K(x, y) = exp(-gamma ||x - y||^2); gamma=None means 1/n_features."""
    return _compute(X, Y, _RBF, gamma=_gamma(gamma, _features(X)), out=out,
                    n_threads=n_threads, path=path)


def laplacian_kernel(X, Y=None, gamma=None, *, out=None, n_threads=None):
    """K(x, y) = exp(-gamma ||x - y||_1) (L1 distance, as scikit-learn)."""
    return _compute(X, Y, _LAPLACIAN, gamma=_gamma(gamma, _features(X)), out=out,
                    n_threads=n_threads)


def sigmoid_kernel(X, Y=None, gamma=None, coef0=1, *, out=None, n_threads=None):
    """K(x, y) = tanh(gamma <x, y> + coef0).

    Not positive definite in general (only for some gamma, coef0 and data).
    """
    coef0 = check_real(coef0, "coef0")
    return _compute(X, Y, _SIGMOID, gamma=_gamma(gamma, _features(X)), coef0=coef0,
                    out=out, n_threads=n_threads)


def exponential_kernel(X, Y=None, gamma=None, *, out=None, n_threads=None):
    """K(x, y) = exp(gamma <x, y>); gamma=None means 1/n_features.

    Positive definite (the exponential of the linear kernel).  Large gamma <x, y>
    overflows to inf exactly as numpy's exp would.
    """
    return _compute(X, Y, _EXPONENTIAL, gamma=_gamma(gamma, _features(X)), out=out,
                    n_threads=n_threads)


_FUNCTIONS = {
    "linear": linear_kernel,
    "poly": polynomial_kernel,
    "polynomial": polynomial_kernel,
    "rbf": rbf_kernel,
    "laplacian": laplacian_kernel,
    "sigmoid": sigmoid_kernel,
    "exponential": exponential_kernel,
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
}


def pairwise_kernels(X, Y=None, metric="linear", *, filter_params=False, n_jobs=None,
                     out=None, n_threads=None, **kwds):
    """Kernel between arrays X and Y, as ``sklearn.metrics.pairwise.pairwise_kernels``.

    metric: one of fastkern's string kernels ("linear", "poly"/"polynomial",
    "rbf", "laplacian", "sigmoid", "exponential"), "precomputed" (X is the
    kernel), a fastkern kernel object, any other scikit-learn kernel name
    ("chi2", "additive_chi2", "cosine") or a callable k(x, y) on two rows;
    the last two are computed by scikit-learn (``n_jobs`` is passed to it).
    """
    from fastkern.kernels import Kernel

    if isinstance(metric, Kernel):
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
    from fastkern._validation import check_array_2d, result_dtype

    X = check_array_2d(X, "X")
    if Y is not None:
        Y = check_array_2d(Y, "Y")
        if X.shape[1] != Y.shape[0]:
            raise ValueError(
                f"Precomputed metric requires shape (n_queries, n_indexed). Got {X.shape} "
                f"for {Y.shape[0]} indexed."
            )
    X = np.asarray(X, dtype=result_dtype(X))
    if out is None:
        return X
    out = check_out(out, X.shape, X.dtype, inputs=(X,))
    np.copyto(out, X)
    return out
