"""fastkern: fast kernel methods with Cython/OpenMP Gram matrices."""
import warnings

__version__ = "0.1.0"

from fastkern import _openmp
from fastkern._config import config_info, show_config
from fastkern.centering import KernelCenterer, center_gram
from fastkern.decomposition import KernelPCA
from fastkern.kernel_ridge import KernelRidge, KernelRidgeCV
from fastkern.kernels import min_eigenvalue
from fastkern.lowrank import estimate_gamma, incomplete_cholesky
from fastkern.nystroem import Nystroem
from fastkern.pairwise import (
    exponential_kernel,
    laplacian_kernel,
    linear_kernel,
    pairwise_kernels,
    polynomial_kernel,
    rbf_kernel,
    sigmoid_kernel,
)
from fastkern.sir import KernelSIR, SlicedInverseRegression

if not _openmp.openmp_enabled():
    warnings.warn(
        "fastkern was built without OpenMP: kernels run on one thread "
        "(see fastkern.show_config())",
        RuntimeWarning,
        stacklevel=2,
    )

__all__ = [
    "KernelCenterer",
    "KernelPCA",
    "KernelRidge",
    "KernelRidgeCV",
    "KernelSIR",
    "Nystroem",
    "SlicedInverseRegression",
    "center_gram",
    "config_info",
    "estimate_gamma",
    "exponential_kernel",
    "incomplete_cholesky",
    "laplacian_kernel",
    "linear_kernel",
    "min_eigenvalue",
    "pairwise_kernels",
    "polynomial_kernel",
    "rbf_kernel",
    "show_config",
    "sigmoid_kernel",
]
