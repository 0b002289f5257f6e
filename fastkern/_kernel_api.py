"""How estimators turn their ``kernel=`` parameters into Gram matrices.

One rule for every estimator, the same as scikit-learn's KernelPCA and
KernelRidge: a string kernel takes ``gamma``, ``degree`` and ``coef0`` (only
the ones it uses), a callable takes ``kernel_params``, a fastkern kernel
object is called as it is, and "precomputed" means X already is the kernel.

The string kernels are fastkern's own plus every other name scikit-learn's
``pairwise_kernels`` knows ("chi2", "additive_chi2", "cosine", ...): one
dispatch, ``fastkern.pairwise_kernels``, computes them all, natively where it
can and through scikit-learn otherwise.
"""
import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping, NamedTuple

import numpy as np
from sklearn.metrics.pairwise import KERNEL_PARAMS as _SK_KERNEL_PARAMS

from fastkern._gamma import median_gamma
from fastkern._validation import (_all_finite, check_float64_range, check_n_threads,
                                  check_real, scale_exponent)
from fastkern.kernels import Kernel
from fastkern import _registry
from fastkern.pairwise import (KERNEL_CODES, KERNEL_PARAMS, compiled_params, pairwise_kernels,
                               _registered, _upper_triangle_gram)

#: String kernel -> the parameters it takes; fastkern's table wins where both know a name.
KERNEL_PARAM_NAMES = {**_SK_KERNEL_PARAMS, **KERNEL_PARAMS}
STRING_KERNELS = tuple(sorted(KERNEL_PARAM_NAMES)) + ("precomputed",)


def is_precomputed(kernel):
    """Whether ``kernel`` says that X already is the kernel matrix."""
    return isinstance(kernel, str) and kernel == "precomputed"


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


def string_kernel_params(kernel, *, gamma=None, degree=None, coef0=None, kernel_params=None):
    """Keyword arguments for the string kernel `kernel`.

    kernel_params entries override gamma/degree/coef0; only the parameters
    the kernel takes are kept, and a None value is dropped so the kernel
    function's own default applies (gamma=None is 1/n_features for "rbf" but
    1.0 for "chi2", as in scikit-learn).
    """
    params = {"gamma": gamma, "degree": degree, "coef0": coef0}
    if kernel_params:
        params.update(kernel_params)
    names = KERNEL_PARAM_NAMES[kernel]
    return {k: v for k, v in params.items() if k in names and v is not None}


def kernel_gram(X, Y=None, *, kernel="rbf", gamma=None, degree=3, coef0=1,
                kernel_params=None, n_threads=None, out=None):
    """Gram matrix k(X, Y) for an estimator's kernel parameters (see :class:`KernelSpec`).

    With kernel="precomputed", X is returned (validated) as the kernel.
    X and Y may be scipy sparse matrices: they are handed to
    ``pairwise_kernels`` as they are, never densified here.
    """
    spec = KernelSpec.from_params(kernel, gamma=gamma, degree=degree, coef0=coef0,
                                  kernel_params=kernel_params)
    return spec.gram(X, Y, out=out, n_threads=n_threads)


def gram_dtype(X):
    """float32 for float32 input, float64 otherwise (the Gram functions' rule)."""
    dtype = X.dtype if hasattr(X, "dtype") else np.asarray(X).dtype
    return np.float32 if dtype == np.float32 else np.float64


#: The data-dependent values ``gamma`` may take (see :func:`resolve_gamma`).
GAMMA_STRINGS = ("scale", "median")


def takes_gamma(kernel):
    """True if the estimators' ``gamma`` parameter reaches `kernel` (a string kernel
    with a gamma; kernel objects carry their own, callables take kernel_params)."""
    return isinstance(kernel, str) and "gamma" in KERNEL_PARAM_NAMES.get(kernel, ())


def _scale_gamma(X):
    """gamma="scale": 1 / (n_features * X.var()), 1.0 for constant X.

    Constant means every entry equal (a variance computed as 0.0 or as a
    rounding residue, 1e-31 on a constant column of 0.1, gave gamma 1e30);
    X is brought near 1 by a power of two where its squares would leave
    float64 (X * 1e200 gave gamma 0), and the variance of sparse X comes
    from the stored values' deviations, not E[x^2] - E[x]^2, which cancels.
    """
    size = X.shape[0] * X.shape[1]
    if hasattr(X, "tocsr"):
        X = X.tocsr()
        values = np.asarray(X.data, dtype=np.float64)
        # The implicit zeros are values too.
        if X.nnz < size:
            values = np.append(values, 0.0)
    else:
        values = X = np.asarray(X, dtype=np.float64)
    if values.max() == values.min():
        return 1.0
    e = scale_exponent(values)
    if hasattr(X, "tocsr"):
        data = np.ldexp(np.asarray(X.data, dtype=np.float64), -e)
        mean = data.sum() / size
        var = (((data - mean) ** 2).sum() + (size - X.nnz) * mean ** 2) / size
    else:
        var = (np.ldexp(X, -e) if e else X).var()
    with np.errstate(over="ignore", under="ignore"):
        gamma = float(np.ldexp(1.0 / (X.shape[1] * var), -2 * e))
    if not 0.0 < gamma < np.inf:
        raise ValueError(f"gamma='scale' = 1 / (n_features * X.var()) is past float64's "
                         f"range: X's variance is about "
                         f"1e{round(math.log10(var) + 2 * e * math.log10(2.0))}")
    return gamma


def resolve_gamma(gamma, X, kernel="rbf"):
    """The numeric ``gamma`` an estimator uses, from its parameter and the training X.

    Resolved once, at fit (estimators store it as ``gamma_`` and use it for
    transform/predict):

    * a number or None: returned as is (None keeps each kernel's default);
    * "scale": 1 / (n_features * X.var()), X.var() over all entries (as
      scikit-learn's SVC; 1.0 when X is constant);
    * "median": the median heuristic on X,
      ``fastkern.estimate_gamma(X, "median", random_state=0).gamma`` (every pair
      of rows up to 1,414 rows, else 1,000,000 pairs drawn with a fixed seed, so a
      fit is reproducible).

    For a kernel that does not take gamma (linear, precomputed, callables, kernel
    objects) a string resolves to None, which such kernels ignore.  X may be dense
    or scipy sparse.
    """
    if not isinstance(gamma, str):
        return gamma
    if gamma not in GAMMA_STRINGS:
        raise ValueError(f"gamma must be a non-negative number, None, 'scale' or 'median', "
                         f"got {gamma!r}")
    if not takes_gamma(kernel):
        return None
    n_features = X.shape[1]
    if gamma == "scale":
        return _scale_gamma(X)
    if X.shape[0] < 2:
        # scikit-learn's checks recognise the "1 sample" wording.
        raise ValueError("gamma='median' needs at least 2 samples, got 1 sample")
    return median_gamma(X)


def kernel_constraints():
    """``_parameter_constraints`` entries of the kernel parameters (scikit-learn's, widened
    to fastkern's kernel names and gamma's "scale"/"median"; a fastkern kernel object
    is a callable)."""
    from numbers import Real

    from sklearn.utils._param_validation import Interval, StrOptions

    return {
        "kernel": [StrOptions(set(STRING_KERNELS)), callable],
        "gamma": [Interval(Real, 0, None, closed="left"), StrOptions(set(GAMMA_STRINGS)),
                  None],
        "degree": [Interval(Real, 0, None, closed="left")],
        "coef0": [Interval(Real, None, None, closed="neither")],
        "kernel_params": [dict, None],
    }


def structured_kernel(kernel):
    """The kernel on non-vector samples (strings, sets, graphs) in `kernel`, or None.

    A kernel object declares ``takes_vectors = False`` (fastkern.structured);
    a composition (k1 + k2, c * k, exp(k), ...) takes what its parts take.
    """
    if not isinstance(kernel, Kernel):
        return None
    if getattr(kernel, "takes_vectors", True) is False:
        return kernel
    for part in kernel._params().values():
        found = structured_kernel(part)
        if found is not None:
            return found
    return None


# Estimator options that only make sense for vectors (KernelPCA's pre-images
# and large-N solvers evaluate kernels on vectors they build themselves).
_VECTOR_ONLY_OPTIONS = {"fit_inverse_transform": (True,),
                        "eigen_solver": ("matrix-free", "nystrom", "incomplete_cholesky"),
                        "solver": ("incomplete_cholesky", "inchol"),
                        "basis": ("incomplete_cholesky",)}


def validate_input(estimator, X="no_validation", y="no_validation", *, reset=True,
                   **check_params):
    """scikit-learn's ``validate_data``, unless the estimator's kernel takes non-vector samples.

    Then X is checked by that kernel (``check_samples``: a 1-D object array of
    strings, sets or graphs comes back), ``ensure_min_samples`` is honoured,
    y is checked as ``validate_data`` checks it (``multi_output``,
    ``y_numeric``) and its length against X's, and no ``n_features_in_`` is
    set (a fit removes the ones of an earlier fit on vectors).  Every other
    check parameter (dtype, accept_sparse, ...) concerns numeric X and is
    ignored.
    """
    from sklearn.utils.validation import _check_y, check_consistent_length, validate_data

    kernel = structured_kernel(getattr(estimator, "kernel", None))
    if kernel is None:
        plain = _plain_input(estimator, X, y, reset, check_params)
        if plain is not None:
            return plain
        checked = validate_data(estimator, X, y, reset=reset, **check_params)
        # validate_data returns the validated ones of X and y, a tuple if both.
        names = [name for name, value in (("X", X), ("y", y))
                 if value is not None and not (isinstance(value, str)
                                               and value == "no_validation")]
        for name, value in zip(names, checked if len(names) == 2 else (checked,)):
            check_float64_range(value, name)
        return checked
    for option, values in _VECTOR_ONLY_OPTIONS.items():
        value = getattr(estimator, option, None)
        if isinstance(value, (bool, str)) and value in values:
            raise ValueError(f"{option}={value!r} needs vector samples; {kernel!r} takes "
                             f"{kernel._sample_kind}s")
    X = kernel.check_samples(X, "X")
    min_samples = check_params.get("ensure_min_samples", 1)
    if X.shape[0] < min_samples:
        raise ValueError(f"X has {X.shape[0]} sample(s), while a minimum of {min_samples} "
                         f"is required by {type(estimator).__name__}.")
    if reset:
        for attr in ("n_features_in_", "feature_names_in_"):
            if hasattr(estimator, attr):
                delattr(estimator, attr)
    if y is None or (isinstance(y, str) and y == "no_validation"):
        if y is None and estimator.__sklearn_tags__().target_tags.required:
            raise ValueError(f"{type(estimator).__name__} requires y to be passed, but the "
                             "target y is None.")
        return X
    y = _check_y(y, multi_output=check_params.get("multi_output", False),
                 y_numeric=check_params.get("y_numeric", False), estimator=estimator)
    check_consistent_length(X, y)
    return X, y


# The check parameters (of the estimators' calls) under which _plain_input decides.
_PLAIN_CHECK_PARAMS = frozenset({"accept_sparse", "dtype", "multi_output", "y_numeric",
                                 "ensure_min_samples"})


def _plain_input(estimator, X, y, reset, check_params):
    """What ``validate_data`` returns for input it passes through unchanged, or None.

    A float ndarray X of the requested dtype, rows and columns, finite (y too:
    a float ndarray of X's length, 1-D or, with multi_output, 2-D), is
    returned as it is, with ``n_features_in_`` set on reset (and a previous
    fit's ``feature_names_in_`` removed) or checked.  That is all
    ``validate_data`` does with it, in a fraction of the time, which counts
    in a fit of a few hundred samples (performance_history, "Small and mid
    sizes").  Anything else (lists, DataFrames, sparse or integer data, NaN,
    a column count that differs, an estimator fitted with feature names,
    other check parameters, array API dispatch) gets None, and
    ``validate_data`` checks it and words its errors and warnings.
    """
    from sklearn import get_config

    # Long double goes to validate_data and check_float64_range.
    if (type(X) is not np.ndarray or X.ndim != 2 or X.dtype.kind != "f" or X.dtype.itemsize > 8
            or not _PLAIN_CHECK_PARAMS.issuperset(check_params)):
        return None
    dtype = check_params.get("dtype", "numeric")
    if not (isinstance(dtype, str) and dtype == "numeric"
            or X.dtype in (dtype if isinstance(dtype, (list, tuple)) else (dtype,))):
        return None
    n, d = X.shape
    if n < check_params.get("ensure_min_samples", 1) or d < 1:
        return None
    no_y = isinstance(y, str) and y == "no_validation"
    if no_y and not {"multi_output", "y_numeric"}.isdisjoint(check_params):
        # check_array alone takes no y parameters (a TypeError there).
        return None
    if not no_y and (type(y) is not np.ndarray or y.dtype.kind != "f" or y.dtype.itemsize > 8
                     or y.ndim not in ((1, 2) if check_params.get("multi_output") else (1,))
                     or y.shape[0] != n or y.ndim == 2 and y.shape[1] < 1):
        return None
    config = get_config()
    if config["array_api_dispatch"]:
        return None
    if not config["assume_finite"] and not (_all_finite(X) and (no_y or _all_finite(y))):
        return None
    if reset:
        if hasattr(estimator, "feature_names_in_"):
            del estimator.feature_names_in_
        estimator.n_features_in_ = d
    elif (hasattr(estimator, "feature_names_in_")
          or getattr(estimator, "n_features_in_", d) != d):
        return None
    return X if no_y else (X, y)


class CompiledKernel(NamedTuple):
    """A kernel as the compiled tile loops read it: its kind code (src/fk_maps.h's
    FK_KINDS) and parameter array (``pairwise.compiled_params``)."""

    kind: int
    params: Any


@dataclass(frozen=True)
class KernelSpec:
    """One validated kernel choice: computes Gram matrices, hands the compiled loops their numbers.

    Every estimator builds one, at fit, from its ``kernel``, ``gamma``,
    ``degree``, ``coef0`` and ``kernel_params`` (:meth:`from_params`), and
    stores it as ``kernel_spec_``; a data-dependent gamma ("scale", "median") is
    resolved there, once, on the training X.  A fastkern kernel object that
    is one named kernel (``RBF(0.5)``) becomes that string kernel, so the
    matrix-free and low-rank solvers read its parameters from here rather
    than from the object.

    Parameters
    ----------
    kernel : str, Kernel or callable
        A string kernel name, "precomputed", a fastkern kernel object (a
        composition) or a callable on two rows.
    param_items : tuple of (str, value)
        The items of :attr:`params` (a tuple, so that a spec pickles to Dask
        workers and cannot be changed in place).

    Notes
    -----
    The spec describes the kernel only: the thread count is an argument of
    the calls that do the work (:meth:`gram`, :meth:`upper_gram`, the
    matrix-free operator, ...), so one spec serves callers that run on
    different numbers of threads.
    """

    kernel: Any
    param_items: tuple = ()

    @property
    def params(self):
        """Read-only keyword arguments of the kernel.

        String kernels: the parameters the kernel takes, None values dropped
        (so the kernel function's default applies).  Callables: their
        ``kernel_params``.  Empty otherwise.
        """
        return MappingProxyType(dict(self.param_items))

    @classmethod
    def from_params(cls, kernel="rbf", *, gamma=None, degree=3, coef0=1, kernel_params=None,
                    X=None):
        """Validate the kernel parameters once and resolve gamma.

        Parameters
        ----------
        kernel : str, Kernel or callable, default="rbf"
            As the estimators' ``kernel``.
        gamma : float, "scale", "median" or None, default=None
            A string is resolved on ``X`` (:func:`resolve_gamma`).
        degree, coef0 : float
            Polynomial and sigmoid parameters.
        kernel_params : dict or None
            Overrides gamma/degree/coef0 for string kernels; the parameters of a callable.
        X : array-like or None
            Training data; needed only for a data-dependent gamma.

        Returns
        -------
        spec : KernelSpec
        """
        check_kernel_param(kernel)
        if isinstance(gamma, str):
            if X is None:
                raise ValueError(f"gamma={gamma!r} is resolved on the training X, which "
                                 "was not given")
            gamma = resolve_gamma(gamma, X, kernel)
        if kernel_params is not None and not isinstance(kernel_params, Mapping):
            raise TypeError(f"kernel_params must be a dict or None, got "
                            f"{type(kernel_params).__name__}")
        if isinstance(kernel, Kernel):
            metric = kernel.as_metric()
            if metric is not None:
                return cls(metric[0], tuple(metric[1].items()))
            return cls(kernel, ())
        if callable(kernel):
            return cls(kernel, tuple((kernel_params or {}).items()))
        if kernel == "precomputed":
            return cls(kernel, ())
        params = string_kernel_params(kernel, gamma=gamma, degree=degree, coef0=coef0,
                                      kernel_params=kernel_params)
        for name in ("gamma", "degree", "coef0"):
            if name in params:
                params[name] = check_real(params[name], name, low=0.0 if name != "coef0"
                                          else None)
        return cls(kernel, tuple(params.items()))

    @classmethod
    def of(cls, estimator, *, gamma, X=None):
        """The spec of an estimator's ``kernel``, ``degree``, ``coef0`` and ``kernel_params``,
        with ``gamma`` given (the fitted one, or the parameter and X)."""
        return cls.from_params(estimator.kernel, gamma=gamma, degree=estimator.degree,
                               coef0=estimator.coef0, kernel_params=estimator.kernel_params,
                               X=X)

    @property
    def precomputed(self):
        """Whether X already is the kernel matrix."""
        return is_precomputed(self.kernel)

    def gamma(self, n_features):
        """The numeric gamma in effect on data with ``n_features`` columns, or None.

        None for a kernel without a gamma (linear, precomputed, callables,
        compositions).
        """
        if not (isinstance(self.kernel, str) and takes_gamma(self.kernel)):
            return None
        kdef = _registry.BY_NAME.get(self.kernel)
        if kdef is None:
            # A scikit-learn kernel fastkern does not define: scikit-learn's default.
            gamma = self.params.get("gamma")
            return 1.0 / n_features if gamma is None else gamma
        param = kdef.param("gamma")
        return param.resolve(self.params.get("gamma", param.default), n_features)

    def compiled(self, n_features):
        """The kernel for the matrix-free tile loops, or None if they do not have it.

        Parameters
        ----------
        n_features : int
            Columns of the data (gamma=None means 1 / n_features).

        Returns
        -------
        compiled : CompiledKernel or None
        """
        if not (isinstance(self.kernel, str) and self.kernel in KERNEL_CODES):
            return None
        params = compiled_params(_registry.get(self.kernel), self.params, n_features)
        return CompiledKernel(KERNEL_CODES[self.kernel], params)

    def upper_gram(self, X, *, n_threads=None):
        """k(X, X) as its packed upper triangle (half the memory), or None.

        ``fastkern.pairwise._upper_triangle_gram``: for the bounded compiled
        string kernels ("rbf", "laplacian", "sigmoid", ...: the registry's) on
        dense float64 X; None otherwise (the caller computes the full Gram).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
        n_threads : int or None, default=None
            OpenMP threads (None: ``fastkern._threads.default_n_threads()``).

        Returns
        -------
        K : fastkern.pairwise.PackedUpperGram or None
        """
        if not isinstance(self.kernel, str) or self.precomputed:
            return None
        return _upper_triangle_gram(X, self.kernel, self.params,
                                    n_threads=check_n_threads(n_threads))

    def gram(self, X, Y=None, *, out=None, n_threads=None):
        """The Gram matrix k(X, Y) (Y None: k(X, X)); with "precomputed", X itself, checked.

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples_X, n_features)
        Y : array-like or sparse matrix of shape (n_samples_Y, n_features), default=None
        out : ndarray, default=None
            C-contiguous buffer of the result's shape and dtype.
        n_threads : int or None, default=None
            OpenMP threads (None: ``fastkern._threads.default_n_threads()``).

        Returns
        -------
        K : ndarray of shape (n_samples_X, n_samples_Y)
        """
        n_threads = check_n_threads(n_threads)
        if (type(self.kernel) is str and self.kernel in KERNEL_CODES
                and type(X) is np.ndarray and (Y is None or type(Y) is np.ndarray)):
            # What pairwise_kernels does for these kernels on dense input
            # (their functions hand their parameters to _registered, with the
            # registry's defaults), without its layers: a third of a 10-row
            # Gram's time.
            return _registered(self.kernel, X, Y, dict(self.param_items), out, n_threads)
        if isinstance(self.kernel, Kernel):
            return self.kernel(X, Y, out=out, n_threads=n_threads)
        if callable(self.kernel):
            return pairwise_kernels(X, Y, metric=self.kernel, filter_params=True, out=out,
                                    n_threads=n_threads, **self.params)
        if self.precomputed:
            return pairwise_kernels(X, Y, metric="precomputed", out=out)
        return pairwise_kernels(X, Y, metric=self.kernel, out=out, n_threads=n_threads,
                                **self.params)
