"""fastkern: fast kernel methods with Cython/OpenMP Gram matrices."""
import importlib
import importlib.util

from fastkern._version import __version__

# A source tree imported before its extensions are built (python from the
# repository's root, where ./fastkern shadows an installed copy, or a fresh
# clone) would fail below on a "partially initialized module": say what to do.
if importlib.util.find_spec("fastkern._openmp") is None:
    raise ImportError(
        f"fastkern's compiled extensions are not built in {__path__[0]}: install it with "
        "`pip install .` from the source tree (then run Python from another directory, "
        "so that the source tree does not shadow the installed package), or build it in "
        "place with `python setup.py build_ext --inplace`")

# First: it loads the OpenMP runtime with fastkern's wait policy (fastkern._threads).
from fastkern import _threads  # noqa: F401, E402  isort: skip

# The public names, each loaded from its module at first use: `import fastkern`
# then costs milliseconds instead of importing scikit-learn and every estimator,
# and a command line started by `fastkern ...` can answer Ctrl-C from its first
# line (PEP 562).
_PUBLIC = {
    "cluster": "_dask",
    "config_info": "_config",
    "show_config": "_config",
    "estimate_gamma": "_gamma",
    "KernelCCA": "cca",
    "KernelCenterer": "centering",
    "center_gram": "centering",
    "KernelPCA": "decomposition",
    "KernelFDA": "fda",
    "KernelRidge": "kernel_ridge",
    "KernelRidgeCV": "kernel_ridge",
    "hsic_test": "kernel_tests",
    "linear_mmd_test": "kernel_tests",
    "mmd_test": "kernel_tests",
    "min_eigenvalue": "kernels",
    "incomplete_cholesky": "lowrank",
    "Nystroem": "nystroem",
    "additive_chi2_kernel": "pairwise",
    "anova_kernel": "pairwise",
    "bessel_kernel": "pairwise",
    "chi2_kernel": "pairwise",
    "cosine_similarity": "pairwise",
    "exponential_kernel": "pairwise",
    "histogram_intersection_kernel": "pairwise",
    "laplacian_kernel": "pairwise",
    "laplacian_l2_kernel": "pairwise",
    "linear_kernel": "pairwise",
    "pairwise_kernels": "pairwise",
    "polynomial_kernel": "pairwise",
    "rbf_kernel": "pairwise",
    "sigmoid_kernel": "pairwise",
    "spline_kernel": "pairwise",
    "KernelSIR": "sir",
    "SlicedInverseRegression": "sir",
    "AllSubstrings": "structured",
    "BoundedRange": "structured",
    "ExponentialDecay": "structured",
    "Jaccard": "structured",
    "MinMax": "structured",
    "SetIntersection": "structured",
    "Spectrum": "structured",
    "Subsequence": "structured",
    "Substring": "structured",
    "WeisfeilerLehman": "structured",
    "stringdot": "structured",
}

# The Gram function of every registered kernel (fastkern._registry: no numpy
# at import), the ones generated from its entry included.
from fastkern import _registry  # noqa: E402  isort: skip

_PUBLIC.update({k.function: "pairwise" for k in _registry.KERNELS})

__all__ = sorted(_PUBLIC)



def __getattr__(name):
    module = _PUBLIC.get(name)
    if module is None:
        if name.startswith("__"):
            raise AttributeError(f"module 'fastkern' has no attribute {name!r}")
        # A submodule reached as an attribute (fastkern.pairwise after `import fastkern`).
        try:
            return importlib.import_module(f"fastkern.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"fastkern.{name}":
                raise
            raise AttributeError(f"module 'fastkern' has no attribute {name!r}") from None
    value = getattr(importlib.import_module(f"fastkern.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
