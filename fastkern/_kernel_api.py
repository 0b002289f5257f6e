"""How estimators turn their ``kernel=`` parameters into Gram matrices.

One rule for every estimator, the same as scikit-learn's KernelPCA and
KernelRidge: a string kernel takes ``gamma``, ``degree`` and ``coef0`` (only
the ones it uses), a callable takes ``kernel_params``, a fastkern kernel
object is called as it is, and "precomputed" means X already is the kernel.
"""
import numpy as np

from fastkern.kernels import Kernel
from fastkern.pairwise import KERNEL_PARAMS, pairwise_kernels

STRING_KERNELS = tuple(KERNEL_PARAMS) + ("precomputed",)


def check_kernel_param(kernel):
    """Raise if `kernel` is not a string kernel, a fastkern kernel or a callable."""
    if isinstance(kernel, Kernel) or callable(kernel):
        return
    if isinstance(kernel, str) and kernel in STRING_KERNELS:
        return
    raise ValueError(
        f"kernel must be one of {sorted(STRING_KERNELS)}, a fastkern kernel object "
        f"or a callable, got {kernel!r}"
    )


def kernel_gram(X, Y=None, *, kernel="rbf", gamma=None, degree=3, coef0=1,
                kernel_params=None, n_threads=None, out=None):
    """Gram matrix k(X, Y) for an estimator's kernel parameters.

    With kernel="precomputed", X is returned (validated) as the kernel.
    """
    check_kernel_param(kernel)
    if isinstance(kernel, Kernel):
        return kernel(X, Y, out=out, n_threads=n_threads)
    if callable(kernel):
        params = kernel_params or {}
        return pairwise_kernels(X, Y, metric=kernel, filter_params=True,
                                out=out, n_threads=n_threads, **params)
    if kernel == "precomputed":
        return pairwise_kernels(X, Y, metric="precomputed", out=out)
    params = {"gamma": gamma, "degree": degree, "coef0": coef0}
    if kernel_params:
        params.update(kernel_params)
    params = {k: v for k, v in params.items() if k in KERNEL_PARAMS[kernel]}
    return pairwise_kernels(X, Y, metric=kernel, out=out, n_threads=n_threads, **params)


def gram_dtype(X):
    """float32 for float32 input, float64 otherwise (the Gram functions' rule)."""
    return np.float32 if np.asarray(X).dtype == np.float32 else np.float64
