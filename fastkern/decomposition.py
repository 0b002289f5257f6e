"""Kernel PCA on one in-place Gram buffer.

``KernelPCA`` is a drop-in for ``sklearn.decomposition.KernelPCA``: the Gram
matrix is computed once into a C-contiguous buffer and handed to the
eigensolver without copies, so fitting needs about one N x N matrix where
scikit-learn needs up to three.  The "dense", "arpack" and "randomized"
solvers read it double-centred in place (``KernelCenterer``); "block_krylov"
reads it uncentred and centres each block product implicitly
(``fastkern.centering.CentredGram``), which saves both passes over K.
Each ``eigen_solver`` is an object of ``fastkern._kpca_solvers`` (its table
``SOLVERS``); this module validates, picks the solver and stores its
eigenpairs.
"""

import sys
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import (BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                          _fit_context)
from sklearn.exceptions import NotFittedError
from sklearn.metrics.pairwise import PAIRWISE_KERNEL_FUNCTIONS
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _check_psd_eigenvalues, check_is_fitted

from fastkern import _dask
from fastkern._eigen import column_signs
from fastkern._kernel_api import (STRING_KERNELS, KernelSpec, is_precomputed,
                                  kernel_constraints, resolve_gamma,
                                  structured_kernel, validate_input)
from fastkern._kpca_solvers import (DEPRECATED_SOLVERS, EIGEN_SOLVERS, SOLVERS, choose,
                                    cluster_solvers)
from fastkern._operator import cross_kernel_times
from fastkern._threads import limits_blas
from fastkern._validation import (CachedParamValidation, check_real, is_dask_array,
                                  parse_memory_budget)

__all__ = ["KernelPCA"]


def _caller_level():
    """warnings.warn stacklevel of the first frame outside fastkern and scikit-learn
    (fit runs under fastkern's and scikit-learn's decorators)."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] in (
            "fastkern", "sklearn"):
        frame, level = frame.f_back, level + 1
    return level


# _check_psd_eigenvalues zeroes a positive eigenvalue below this share of the
# largest (float64; float32: 2e-7).
_SMALL_POSITIVE_RATIO = {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 2e-7}


def _clearly_positive(eigenvalues):
    """True when scikit-learn's _check_psd_eigenvalues would return the eigenvalues
    unchanged: a few finite real values, each at least twice its floor for
    "too small" (the margin covers float32's rounding of that floor).  Its 25 us
    were 2% of a 200-row fit, for the usual top few eigenvalues."""
    ratio = _SMALL_POSITIVE_RATIO.get(eigenvalues.dtype)
    if ratio is None or not 0 < eigenvalues.size <= 64:
        return False
    values = eigenvalues.tolist()
    top = max(values)
    floor = 2 * ratio * top
    # NaN fails every comparison; an infinite top makes the floor infinite.
    return 0 < floor < float("inf") and all(v >= floor for v in values)


#: The kernels whose gamma=None scikit-learn's KernelPCA reads as 1 / n_features.
_SKLEARN_KERNELS = frozenset(PAIRWISE_KERNEL_FUNCTIONS) | {"precomputed"}


class KernelPCA(CachedParamValidation, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                BaseEstimator):
    """Kernel principal component analysis, a drop-in for scikit-learn's ``KernelPCA``.

    With Kc the double-centred training Gram matrix and (lambda_j, u_j) its top
    eigenpairs, the embedding of the training set is ``sqrt(lambda_j) u_j``
    and a new point x is projected as ``kc(x) @ u_j / sqrt(lambda_j)``, where
    kc(x) is k(x, X_fit_) centred with the training means.  Eigenvector signs
    follow scikit-learn (``svd_flip``: the largest-magnitude entry of each
    eigenvector is positive).  Every scikit-learn parameter and value is
    accepted (``KernelPCA(**sklearn_kpca.get_params())`` works); the
    parameters mean what they mean in scikit-learn where the name exists.

    X may be a dense array or a CSR/CSC sparse matrix (the Gram is computed
    from it without densifying X; not with the "matrix-free", "nystrom" and
    "incomplete_cholesky" solvers, which raise a TypeError), float32 (kept)
    or float64.

    Parameters
    ----------
    n_components : int or None, default=None
        Number of components.  As scikit-learn: None means n_samples and
        drops the eigenvalues that are not > 0; a value above n_samples is
        clamped to n_samples.  The large-N solvers need 1 <= n_components <
        n_samples ("matrix-free") or <= n_landmarks ("nystrom"), and read None
        as that largest value (refused, naming n_components, when its
        eigenvectors would exceed memory_budget).
    kernel : str, Kernel or callable, default="linear"
        A kernel name of ``fastkern.pairwise.KERNEL_PARAMS`` ("linear",
        "poly", "rbf", "sigmoid", "cosine", "laplacian", "rational_quadratic",
        ...), "precomputed" (X is then the training Gram, and transform takes
        k(X, X_train)), a fastkern kernel object or a callable.
    gamma : float or {"scale", "median"}, default=None
        Kernel coefficient, as scikit-learn (None: 1 / n_features for
        scikit-learn's kernels, the kernel's own default for those fastkern
        adds, as the Gram functions: 1 for "anova" and "bessel"); may also be
        "scale" (1 / (n_features X.var())) or "median" (the median heuristic,
        ``fastkern.estimate_gamma``), resolved on the training X into gamma_.
    degree : float, default=3
        Degree of the polynomial kernel, as scikit-learn.
    coef0 : float, default=1
        Constant term of the polynomial and sigmoid kernels, as scikit-learn.
    kernel_params : dict, default=None
        Parameters of a callable kernel, passed as keyword arguments, as
        scikit-learn.
    alpha : float, default=1.0
        Ridge of the kernel ridge pre-image map (``inverse_transform``).
    fit_inverse_transform : bool, default=False
        Learn the kernel ridge pre-image map of ``inverse_transform`` (not
        with kernel="precomputed").
    eigen_solver : str, default="auto"
        One of "auto", "dense", "thick_restart_lanczos", "arpack",
        "randomized", "block_krylov", "matrix-free", "nystrom" and
        "incomplete_cholesky".
        "dense": LAPACK syevr on the centred Gram, in place.
        "thick_restart_lanczos": fastkern's compiled Lanczos solver on the
        centred Gram's lower triangle (the triangle "dense" reads), on one
        thread (``fastkern._eigen.lanczos_eigsh``): full
        reorthogonalisation, thick restarts, ARPACK's convergence test, the
        start vector ARPACK gets from random_state; LAPACK solves instead
        when it has not converged in 20 restarts (max_iter=None).  At a few
        hundred to a few thousand samples it needs fewer products than
        ARPACK and no return to Python between them.  A probe after
        convergence looks for copies of repeated eigenvalues that one start
        vector cannot hold; where it finds one or cannot rule one out,
        "block_krylov" solves instead.
        "arpack": scipy's eigsh on the centred Gram (n_components >= n_samples:
        scipy warns and solves densely, as in scikit-learn), with the same
        probe, LAPACK solving where it finds a missed copy.
        "randomized": scikit-learn's randomized range finder with "module"
        selection (``fastkern._eigen.randomized_eigsh``; same random stream,
        so the same results as scikit-learn's to rounding).  As there, the
        components are those of largest |eigenvalue|: a kernel that is not
        positive semi-definite raises if a significant negative eigenvalue
        is among them.
        "block_krylov": fastkern's thick-restarted block Krylov solver
        (``fastkern._eigen.block_eigsh``, see Notes).
        "lanczos" is its former name (it is not the Lanczos three-term
        recurrence): deprecated, a FutureWarning, removed in 0.3.
        "matrix-free" or "nystrom": fastkern.large_n, the Gram is never stored.
        "incomplete_cholesky": K ~ G G^T from ``fastkern.incomplete_cholesky``,
        never forming K (see Notes).
        "auto": "matrix-free" when the dense Gram would exceed
        ``memory_budget`` (not for precomputed, cosine or sparse X), else
        "block_krylov", "thick_restart_lanczos", "arpack" or "dense" (see
        Notes).
    tol : float, default=0
        Eigensolver convergence for "thick_restart_lanczos", "arpack" and
        "block_krylov" (tol=0: the solver's default; for the first two,
        ARPACK's: machine precision).  For "block_krylov", converged means every
        residual ||K v - lambda v|| <= tol * lambda_max (tol=0: 1e-10, or
        2e-13 when "auto" chose it).  For "incomplete_cholesky", tol bounds
        the largest residual diagonal of K - G G^T relative to the mean
        diagonal of the centred factor (tol=0: 1e-6; ``incomplete_cholesky``
        with centered=True).
    max_iter : int or None, default=None
        Eigensolver iteration limit for "thick_restart_lanczos" (restarts),
        "arpack" and "block_krylov".  On max_iter "block_krylov" and
        "thick_restart_lanczos" warn with the residual norms (estimates for
        the latter) and keep the best Ritz pairs found.
    iterated_power : int >= 0 or "auto", default="auto"
        Power iterations of "randomized" (as scikit-learn: "auto" is 7 when
        n_components < n_samples / 10, else 4).
    remove_zero_eig : bool, default=False
        As scikit-learn: drop the components whose eigenvalue is not > 0.
    random_state : int, RandomState instance or None, default=None
        Start vectors of "thick_restart_lanczos", "arpack", "randomized" and
        "block_krylov"; a fixed
        value makes them bit-identical from run to run.
    copy_X : bool, default=True
        As scikit-learn: store a copy of X in ``X_fit_`` rather than X
        itself.  For kernel="precomputed", ``X_fit_`` references the given
        kernel (only its shape is used) so that no second N x N copy is kept.
    n_jobs : int or None, default=None
        Accepted for compatibility, unused (see n_threads).
    n_threads : int or None, default=None
        Threads of the Gram and centering kernels (None = OpenMP default).
    memory_budget : float, str or None, default=None
        Bytes (or a string such as "2GB") the Gram matrix may use; None = half
        the available RAM.
    n_landmarks : int or None, default=None
        Number of Nystrom landmarks (eigen_solver="nystrom"; None: the smaller
        of n_samples and 1000).
    ichol_max_rank : int or None, default=None
        The largest rank of "incomplete_cholesky" (None: no limit but tol);
        a ConvergenceWarning says when it stops the factor before tol.
    verbose : bool, default=False
        Print eigensolver progress.

    Attributes
    ----------
    eigenvalues_ : ndarray of shape (n_components,)
        Eigenvalues of the centred training Gram, in decreasing order.
    eigenvectors_ : ndarray of shape (n_samples, n_components)
        The matching unit eigenvectors, signs as ``svd_flip``.
    dual_coef_ : ndarray of shape (n_samples, n_features)
        Coefficients of the pre-image map (with fit_inverse_transform).
    X_transformed_fit_ : ndarray of shape (n_samples, n_components)
        The training embedding, the inputs of the pre-image map (with
        fit_inverse_transform).
    X_fit_ : {ndarray, sparse matrix} of shape (n_samples, n_features)
        The training data (see copy_X); for kernel="precomputed", the given
        kernel.
    gamma_ : float or None
        The gamma used: gamma resolved on the training X ("scale",
        "median"), or where gamma is None, 1 / n_features for scikit-learn's
        kernels, "precomputed" and callables, whatever the eigen_solver (as
        scikit-learn; kernels without a gamma ignore it), and the kernel's
        own default for the kernels fastkern adds (None for those without a
        gamma).
    kernel_spec_ : fastkern._kernel_api.KernelSpec
        The kernel as fitted (kernel, gamma_, degree, coef0, kernel_params),
        built once at fit; transform, inverse_transform and every solver
        evaluate it.
    ichol_pivots_ : ndarray of shape (rank,) or None
        The pivots of the incomplete Cholesky factor (with
        eigen_solver="incomplete_cholesky"; None with another solver).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features seen during fit, for X with string column names.

    See Also
    --------
    sklearn.decomposition.KernelPCA : The scikit-learn estimator this replaces.
    KernelCenterer : The centring of the training and test Gram matrices.
    fastkern.incomplete_cholesky : The low-rank factor of "incomplete_cholesky".

    Notes
    -----
    Block Krylov solver (eigen_solver="block_krylov").  Each step is one
    product of the centred Gram with a block of vectors (reading the
    uncentred K once, the centring applied to the product from K's row and
    column means, so K is never centred itself), the basis spans a block
    Krylov space with full reorthogonalisation and exact Rayleigh-Ritz on
    V^T K V, and converged Ritz vectors are soft-locked.

    Incomplete Cholesky solver (eigen_solver="incomplete_cholesky").  K ~ G G^T
    from ``fastkern.incomplete_cholesky`` (tol as above,
    max_rank=ichol_max_rank; dense X, not "precomputed"), never forming K:
    with Gc = G minus its column means (so Gc Gc^T is the double-centred
    G G^T) and Gc^T Gc = V diag(lambda) V^T (rank x rank), eigenvalues_ =
    lambda and eigenvectors_ = Gc V diag(lambda)^-1/2, signs as
    scikit-learn's (svd_flip on eigenvectors_), the training embedding Gc V.
    transform(X) = (g(X) - mean of G's rows) V, where g(x) solves
    L g = k(X_fit_[ichol_pivots_], x), L = G[pivots] (lower triangular): the
    Nystroem feature map on the pivots, which gives back the rows of G for
    training points, so transform(X_train) = fit_transform(X_train).  Cost
    O(n r^2) time and O(n r) memory (r the rank reached); transform
    O(r d + r^2) per point.  Components beyond the rank have eigenvalue 0.
    The kernel must be positive semi-definite (not sigmoid in general): the
    factorisation stops at the first non-positive residual.

    Solver choice (eigen_solver="auto").  "matrix-free" when the dense Gram
    would exceed ``memory_budget`` (not for precomputed, cosine or sparse X).
    Otherwise chosen by measurement (benchmarks/bench_sizes.py, the "auto"
    grid): "block_krylov" for n_components < 10 and at least 2000 samples
    (run to tol 2e-13, as accurate as ARPACK); "thick_restart_lanczos" for
    n_components < 10 from 190 samples up to there ("arpack" where its
    products would use more than 2 BLAS threads, from 680 samples); "arpack"
    for 10 <= n_components <= n_samples / 50; else "dense".

    Examples
    --------
    >>> import numpy as np
    >>> from fastkern import KernelPCA
    >>> X = np.random.default_rng(0).normal(size=(50, 3))
    >>> KernelPCA(n_components=2, kernel="rbf").fit_transform(X).shape
    (50, 2)
    """

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        "kernel": [StrOptions(set(STRING_KERNELS)), callable],
        "gamma": kernel_constraints()["gamma"],
        "degree": [Interval(Real, 0, None, closed="left")],
        "coef0": [Interval(Real, None, None, closed="neither")],
        "kernel_params": [dict, None],
        "alpha": [Interval(Real, 0, None, closed="left")],
        "fit_inverse_transform": ["boolean"],
        "eigen_solver": [StrOptions(set(EIGEN_SOLVERS) | set(DEPRECATED_SOLVERS),
                                    deprecated=set(DEPRECATED_SOLVERS))],
        "tol": [Interval(Real, 0, None, closed="left")],
        "max_iter": [Interval(Integral, 1, None, closed="left"), None],
        "iterated_power": [Interval(Integral, 0, None, closed="left"), StrOptions({"auto"})],
        "remove_zero_eig": ["boolean"],
        "random_state": ["random_state"],
        "copy_X": ["boolean"],
        "n_jobs": [Integral, None],
        "n_threads": [Interval(Integral, 1, None, closed="left"), None],
        "memory_budget": [Interval(Real, 0, None, closed="neither"), str, None],
        "n_landmarks": [Interval(Integral, 1, None, closed="left"), None],
        "ichol_max_rank": [Interval(Integral, 1, None, closed="left"), None],
        "verbose": ["verbose"],
    }

    def __init__(self, n_components=None, *, kernel="linear", gamma=None, degree=3, coef0=1,
                 kernel_params=None, alpha=1.0, fit_inverse_transform=False,
                 eigen_solver="auto", tol=0, max_iter=None, iterated_power="auto",
                 remove_zero_eig=False, random_state=None, copy_X=True, n_jobs=None,
                 n_threads=None, memory_budget=None, n_landmarks=None, ichol_max_rank=None,
                 verbose=False):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.alpha = alpha
        self.fit_inverse_transform = fit_inverse_transform
        self.eigen_solver = eigen_solver
        self.tol = tol
        self.max_iter = max_iter
        self.iterated_power = iterated_power
        self.remove_zero_eig = remove_zero_eig
        self.random_state = random_state
        self.copy_X = copy_X
        self.n_jobs = n_jobs
        self.n_threads = n_threads
        self.memory_budget = memory_budget
        self.n_landmarks = n_landmarks
        self.ichol_max_rank = ichol_max_rank
        self.verbose = verbose

    @property
    def _precomputed(self):
        return is_precomputed(self.kernel)

    def _solver_name(self):
        """eigen_solver with a deprecated name replaced, after a FutureWarning."""
        solver = self.eigen_solver
        if isinstance(solver, str) and solver in DEPRECATED_SOLVERS:
            new = DEPRECATED_SOLVERS[solver]
            warnings.warn(f"eigen_solver={solver!r} is deprecated and will be removed in "
                          f"fastkern 0.3; use eigen_solver={new!r} (the same solver under "
                          "its accurate name)", FutureWarning, stacklevel=_caller_level())
            return new
        return solver

    def _gram(self, X, Y=None, *, out=None):
        """k(X, Y) of the fitted kernel (``kernel_spec_``)."""
        return self.kernel_spec_.gram(X, Y, out=out, n_threads=self.n_threads)

    def _fit_kernel_spec(self, X):
        """Resolve gamma on the training X and build ``kernel_spec_``.

        As scikit-learn's KernelPCA, ``gamma_`` is gamma, or 1 / n_features
        when it is None, for its kernels whatever the eigensolver; the
        kernels fastkern adds take their own default instead, as KernelRidge,
        the Gram functions and the command line give them (anova's gamma was
        1 / n_features here and 1 everywhere else)."""
        gamma = resolve_gamma(self.gamma, X, self.kernel)
        if gamma is None and X.ndim == 2:
            if isinstance(self.kernel, str) and self.kernel not in _SKLEARN_KERNELS:
                gamma = KernelSpec.of(self, gamma=None).gamma(X.shape[1])
            else:
                gamma = 1 / X.shape[1]
        self.gamma_ = gamma
        self.kernel_spec_ = KernelSpec.of(self, gamma=self.gamma_)

    def _validate(self, X, reset):
        if isinstance(X, (list, tuple)) and structured_kernel(self.kernel) is None:
            # A nested list is converted straight to float64 by check_array
            # when a dtype is requested, and complex entries then raise a
            # TypeError; as an array they get scikit-learn's "Complex data not
            # supported" ValueError.
            X = np.asarray(X)
        return validate_input(self, X, accept_sparse=["csr", "csc"],
                              dtype=[np.float64, np.float32], reset=reset)

    @_fit_context(prefer_skip_nested_validation=True)
    @limits_blas
    def fit(self, X, y=None, *, client="deprecated", timeout="deprecated"):
        """Fit the model from X (n_samples, n_features), or a precomputed kernel (n, n).

        A ``dask.array`` X, or a fit inside ``with fastkern.cluster(client):``,
        runs the matrix-free solver's kernel passes on that Dask cluster
        (``fastkern._dask``); ``transform`` then uses the same client and
        timeout.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array} of shape (n_samples, n_features)
            Training data: dense or CSR/CSC (not densified), float32 (kept) or
            float64; with kernel="precomputed", the square training Gram
            (n_samples, n_samples); for the kernels of ``fastkern.structured``,
            a list of strings, sets or graphs.  A dask array runs on a Dask
            cluster (eigen_solver "matrix-free" or "auto").
        y : None
            Ignored.
        client : distributed.Client
            Deprecated (a FutureWarning; removed in fastkern 0.3): use
            ``with fastkern.cluster(client, timeout=...): kpca.fit(X)``.  Given,
            it takes the place of the enclosing ``cluster`` block's client.
        timeout : float
            Deprecated with ``client``: the ``timeout`` of
            :func:`fastkern.cluster`.

        Returns
        -------
        self : KernelPCA
            The fitted estimator.
        """
        self._fit(X, client, timeout)
        return self

    def _cluster_settings(self, client, timeout):
        """The client (None: in-process) and timeout of this fit: fit's deprecated
        arguments where given, else those of the enclosing fastkern.cluster block."""
        given = [name for name, value in (("client", client), ("timeout", timeout))
                 if not (isinstance(value, str) and value == "deprecated")]
        if given:
            warnings.warn(f"fit's {' and '.join(given)} parameter"
                          f"{'s are' if len(given) > 1 else ' is'} deprecated and will be "
                          "removed in fastkern 0.3; use `with fastkern.cluster(client, "
                          "timeout=...): kpca.fit(X)` instead", FutureWarning,
                          stacklevel=_caller_level())
        active_client, active_timeout = _dask.active_cluster()
        client = active_client if "client" not in given else client
        timeout = active_timeout if "timeout" not in given else timeout
        return client, check_real(timeout, "timeout", low=0, low_inclusive=False)

    def _fit(self, X, client, timeout):
        if self.fit_inverse_transform and self._precomputed:
            raise ValueError("Cannot fit_inverse_transform with a precomputed kernel.")
        name = self._solver_name()
        # Checked before any work; the available memory is read only where a
        # solver needs it (/proc/meminfo is slow next to a small fit).
        parse_memory_budget(self.memory_budget)
        self._client, self._timeout = self._cluster_settings(client, timeout)
        if self._client is not None or is_dask_array(X):
            # sklearn's validation would load a dask array into memory; the
            # Dask backend validates it block by block instead.
            if not (name == "auto" or SOLVERS[name].cluster):
                raise ValueError(f"a dask array or a Dask client needs eigen_solver="
                                 f"{cluster_solvers()}, got {self.eigen_solver!r}")
            if self._precomputed:
                raise ValueError("kernel='precomputed' cannot run on a Dask cluster")
            solver = SOLVERS["matrix-free" if name == "auto" else name]
            solver.fit_on_cluster(self, X, self._client, self._timeout)
            self._fit_solver = solver.name
            return None
        X = self._validate(X, reset=True)
        n = X.shape[0]
        if self._precomputed and X.shape[1] != n:
            raise ValueError(f"X must be a square kernel matrix for kernel='precomputed', "
                             f"got shape {X.shape}")
        # As scikit-learn: None is every component (the non-positive ones are
        # dropped by _store_eigenpairs), a larger request is clamped to n_samples.
        k = n if self.n_components is None else min(n, self.n_components)
        solver = choose(self, X, k) if name == "auto" else SOLVERS[name]
        self.ichol_pivots_ = None
        solver.check(self, X)
        if not solver.large_n:
            # The large-N solvers build it on the contiguous X they keep.
            self._fit_kernel_spec(X)
        # Before the fit: a Gram solver may hand the Gram to another
        # (_GramSolver.for_gram), which it records here.
        self._fit_solver = solver.name
        return solver.fit(self, X, k)

    def _store_eigenpairs(self, eigenvalues, eigenvectors, dtype):
        """The one post-processing of every solver's eigenpairs, as scikit-learn's KernelPCA.

        Descending order; small negative eigenvalues clipped to 0 and
        significant ones raised on (a kernel that is not PSD); each
        eigenvector's largest entry positive; zero eigenvalues dropped with
        remove_zero_eig or n_components=None.  Returns the order and the signs
        applied, for the solvers whose other outputs follow the eigenvectors.
        """
        # Clipped before sorting, as scikit-learn: eigenvalues clipped to 0
        # then keep its order among themselves.
        eigenvalues = np.asarray(eigenvalues)
        if not _clearly_positive(eigenvalues):
            eigenvalues = _check_psd_eigenvalues(eigenvalues, enable_warnings=False)
        order = eigenvalues.argsort()[::-1]
        eigenvalues, eigenvectors = eigenvalues[order], eigenvectors[:, order]
        signs = column_signs(eigenvectors)
        eigenvectors = eigenvectors * signs
        if self.remove_zero_eig or self.n_components is None:
            keep = eigenvalues > 0
            eigenvalues, eigenvectors = eigenvalues[keep], eigenvectors[:, keep]
            order, signs = order[keep], signs[keep]
        self.eigenvalues_ = eigenvalues.astype(dtype, copy=False)
        self.eigenvectors_ = np.ascontiguousarray(eigenvectors, dtype=dtype)
        return order, signs

    @_fit_context(prefer_skip_nested_validation=True)
    @limits_blas
    def fit_transform(self, X, y=None, *, client="deprecated", timeout="deprecated"):
        """Fit and return the training embedding sqrt(eigenvalues_) * eigenvectors_.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array} of shape (n_samples, n_features)
            Training data, or the training Gram with kernel="precomputed" (see
            :meth:`fit`).
        y : None
            Ignored.
        client : distributed.Client
            Deprecated, as in :meth:`fit`: use :func:`fastkern.cluster`.
        timeout : float
            Deprecated, as in :meth:`fit`: use :func:`fastkern.cluster`.

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_components)
            The training embedding.
        """
        X_transformed = self._fit(X, client, timeout)
        if X_transformed is None:
            X_transformed = self.eigenvectors_ * np.sqrt(self.eigenvalues_)
        return X_transformed

    @limits_blas
    def transform(self, X):
        """Project X (or, for kernel="precomputed", k(X, X_train)) on the components.

        After a fit on a Dask cluster the pass runs there, with fit's timeout.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array} of shape (n_queries, n_features)
            The points to project; with kernel="precomputed", the cross-Gram
            k(X, X_train) of shape (n_queries, n_samples).

        Returns
        -------
        X_new : ndarray of shape (n_queries, n_components)
            The projections.
        """
        check_is_fitted(self, "eigenvectors_")
        solver = SOLVERS[self._fit_solver]
        client = getattr(self, "_client", None)
        if solver.large_n and (client is not None or is_dask_array(X)):
            return solver.transform(self, X, client)
        return solver.transform(self, self._validate(X, reset=False))

    @limits_blas
    def inverse_transform(self, X):
        """Approximate pre-images: k(X, X_transformed_fit_) @ dual_coef_ (kernel ridge).

        Parameters
        ----------
        X : array-like of shape (n_queries, n_components)
            Points in the space of the components.

        Returns
        -------
        X_original : ndarray of shape (n_queries, n_features)
            Their approximate pre-images.

        Raises
        ------
        NotFittedError
            If the estimator was not fitted with fit_inverse_transform=True.
        ValueError
            If X does not have one column per component.
        """
        if not self.fit_inverse_transform:
            raise NotFittedError(
                "The fit_inverse_transform parameter was not set to True when instantiating "
                "and hence the inverse transform is not available."
            )
        check_is_fitted(self, "dual_coef_")
        X = np.asarray(X)
        if X.ndim != 2 or X.shape[1] != self.X_transformed_fit_.shape[1]:
            raise ValueError(f"X must have shape (n_samples, {self.X_transformed_fit_.shape[1]}), "
                             f"got {X.shape}")
        return cross_kernel_times(self.kernel_spec_,
                                  X.astype(self.X_transformed_fit_.dtype, copy=False),
                                  self.X_transformed_fit_, self.dual_coef_,
                                  n_threads=self.n_threads).astype(self.dual_coef_.dtype,
                                                                   copy=False)

    @property
    def _n_features_out(self):
        return self.eigenvalues_.shape[0]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # The incomplete Cholesky factor and the large-N solvers' kernel
        # passes take dense X only (they raise a TypeError on sparse X).
        name = self.eigen_solver
        solver = SOLVERS.get(DEPRECATED_SOLVERS.get(name, name)) if isinstance(name, str) \
            else None
        tags.input_tags.sparse = solver is None or solver.sparse
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.input_tags.pairwise = self._precomputed
        return tags
