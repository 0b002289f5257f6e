"""fastkern: fast kernel methods with Cython/OpenMP Gram matrices."""
from fastkern._version import __version__
# First: it loads the OpenMP runtime with fastkern's wait policy (fastkern._threads).
from fastkern import _threads  # noqa: F401  isort: skip

from fastkern._config import config_info, show_config
from fastkern.cca import KernelCCA
from fastkern.centering import KernelCenterer, center_gram
from fastkern.decomposition import KernelPCA
from fastkern.fda import KernelFDA
from fastkern.kernel_ridge import KernelRidge, KernelRidgeCV
from fastkern.kernel_tests import hsic_test, linear_mmd_test, mmd_test
from fastkern.kernels import min_eigenvalue
from fastkern._gamma import estimate_gamma
from fastkern.lowrank import incomplete_cholesky
from fastkern.nystroem import Nystroem
from fastkern.pairwise import (
    additive_chi2_kernel,
    anova_kernel,
    bessel_kernel,
    chi2_kernel,
    cosine_similarity,
    exponential_kernel,
    histogram_intersection_kernel,
    laplacian_kernel,
    laplacian_l2_kernel,
    linear_kernel,
    pairwise_kernels,
    polynomial_kernel,
    rbf_kernel,
    sigmoid_kernel,
    spline_kernel,
)
from fastkern.sir import KernelSIR, SlicedInverseRegression
from fastkern.structured import (AllSubstrings, BoundedRange, ExponentialDecay, Jaccard, MinMax,
                                 SetIntersection, Spectrum, Subsequence, Substring,
                                 WeisfeilerLehman, stringdot)

__all__ = [
    "AllSubstrings",
    "BoundedRange",
    "ExponentialDecay",
    "Jaccard",
    "KernelCCA",
    "KernelCenterer",
    "KernelFDA",
    "KernelPCA",
    "KernelRidge",
    "KernelRidgeCV",
    "KernelSIR",
    "MinMax",
    "Nystroem",
    "SetIntersection",
    "SlicedInverseRegression",
    "Spectrum",
    "Subsequence",
    "Substring",
    "WeisfeilerLehman",
    "additive_chi2_kernel",
    "anova_kernel",
    "bessel_kernel",
    "center_gram",
    "chi2_kernel",
    "config_info",
    "cosine_similarity",
    "estimate_gamma",
    "exponential_kernel",
    "hsic_test",
    "histogram_intersection_kernel",
    "incomplete_cholesky",
    "laplacian_kernel",
    "laplacian_l2_kernel",
    "linear_kernel",
    "linear_mmd_test",
    "min_eigenvalue",
    "mmd_test",
    "pairwise_kernels",
    "polynomial_kernel",
    "rbf_kernel",
    "show_config",
    "sigmoid_kernel",
    "stringdot",
    "spline_kernel",
]
