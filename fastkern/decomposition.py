"""Kernel PCA on one in-place Gram buffer.

``KernelPCA`` is a drop-in for ``sklearn.decomposition.KernelPCA``: the Gram
matrix is computed once into a C-contiguous buffer and handed to the
eigensolver without copies, so fitting needs about one N x N matrix where
scikit-learn needs up to three.  The "dense", "arpack" and "randomized"
solvers read it double-centred in place (``KernelCenterer``); "block_krylov"
reads it uncentred and centres each block product implicitly
(``fastkern.centering.CentredGram``), which saves both passes over K.
"""

import sys
import warnings
from numbers import Integral, Real

import numpy as np
from scipy import linalg, sparse
from scipy.sparse.linalg import eigsh
from sklearn.base import (BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                          _fit_context)
from sklearn.exceptions import NotFittedError
from sklearn.preprocessing import normalize
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.extmath import svd_flip
from sklearn.utils.validation import _check_psd_eigenvalues, check_is_fitted

from fastkern import _registry
from fastkern._eigen import (block_eigsh, column_signs, krylov_basis, randomized_eigsh,
                             top_eigh)
from fastkern._kernel_api import (STRING_KERNELS, KernelSpec, gram_dtype, is_precomputed,
                                  kernel_constraints, kernel_gram, resolve_gamma,
                                  structured_kernel, validate_input)
from fastkern._threads import limits_blas
from fastkern._validation import (_all_finite, check_n_threads, check_real, is_dask_array,
                                  memory_budget_bytes, parse_memory_budget)
from fastkern._linalg import solve_shifted_in_place
from fastkern._progress import report_iteration, report_stage
from fastkern.centering import CentredGram, KernelCenterer

__all__ = ["KernelPCA"]

EIGEN_SOLVERS = ("auto", "dense", "block_krylov", "arpack", "randomized", "matrix-free",
                 "nystrom", "incomplete_cholesky")
# Old solver names, still accepted with a FutureWarning until fastkern 0.3.
DEPRECATED_SOLVERS = {"lanczos": "block_krylov"}
LARGE_N_SOLVERS = ("matrix-free", "nystrom")
_BOUNDED_KERNELS = tuple(name for k in _registry.KERNELS if k.bounded for name in k.names)


def krylov_block_size(k):
    """Columns per block product of the "block_krylov" solver: k + 3, at least 8,
    rounded up to a multiple of 4.

    fastkern's own product (``_centering.gram_matmat``) pads a block to a
    multiple of 4 columns and costs about as much for 8 columns as for 4 (K
    is read once either way), so the block is as wide as that allows.  With
    the basis of ``_KRYLOV_MAX_BLOCKS`` blocks, measured at N=8000, RBF, d=16,
    2 cores (fit_transform, best of 3): for 5 components, 8 columns took
    0.279 s against 12's 0.334 s at gamma=1/16, 0.542 s against 0.700 s at
    gamma=1/2 and 0.203 s against 0.231 s at gamma=1/160; for 2 components,
    8 columns beat 4 and 12; for 20, 24 beat 28 and 32.
    """
    return -(-max(8, k + 3) // 4) * 4


# Blocks in the "block_krylov" basis before a thick restart.  The basis of an
# explicit Gram is small next to K (at N=8000, 21 blocks of 8 columns and
# their products are 4% of K), and a restart discards Krylov information, so
# a long basis saves products (docs/developer/performance_history.rst).
_KRYLOV_MAX_BLOCKS = 20

# "auto" picks an iterative solver above this many samples (the dense LAPACK
# reduction costs O(n^3) whatever k), as scikit-learn.
_ITERATIVE_MIN_SAMPLES = 200
# ... and the block Krylov solver, for fewer than 10 components, from this
# many samples.  At N=1000 (2 threads, benchmarks/bench_sizes.py) it ranged
# from 3x faster than ARPACK (a near-diagonal Gram) to 1.9x slower (flat
# spectra), so ARPACK, never slower than scikit-learn's, stays below 2000.
_KRYLOV_MIN_SAMPLES = 2000
# Convergence target of "block_krylov" when "auto" picks it with tol=0: the
# eigenvectors then agree with LAPACK's to ~1e-13 (subspace angle; at most
# 1.2e-13 over 5 seeds at N=2000, against 1.4e-12 with 1e-12), as ARPACK's.
# The residuals fall ~30x per product here, so the last product often
# overshoots: at N=8000 (gamma 1/16, 1/2, 1/160) 2e-13 took as many products
# as 1e-12 (13, 24 and 8 of 8 columns).
_AUTO_KRYLOV_TOL = 2e-13


def _caller_level():
    """warnings.warn stacklevel of the first frame outside fastkern and scikit-learn
    (fit runs under fastkern's and scikit-learn's decorators)."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_globals.get("__name__", "").split(".")[0] in (
            "fastkern", "sklearn"):
        frame, level = frame.f_back, level + 1
    return level


class KernelPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
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
        clamped to n_samples (the large-N solvers, which compute only leading
        components, need 1 <= n_components < n_samples instead).
    kernel : str, Kernel or callable, default="linear"
        "linear", "poly", "rbf", "sigmoid", "cosine", "laplacian",
        "exponential", "precomputed" (X is then the training Gram, and
        transform takes k(X, X_train)), a fastkern kernel object or a callable.
    gamma : float or {"scale", "median"}, default=None
        Kernel coefficient, as scikit-learn (None: 1 / n_features); may also be
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
        One of "auto", "dense", "arpack", "randomized", "block_krylov",
        "matrix-free", "nystrom" and "incomplete_cholesky".
        "dense": LAPACK syevr on the centred Gram, in place.
        "arpack": scipy's eigsh on the centred Gram (n_components >= n_samples:
        scipy warns and solves densely, as in scikit-learn).
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
        "block_krylov", "arpack" or "dense" (see Notes).
    tol : float, default=0
        Eigensolver convergence for "arpack" and "block_krylov" (tol=0: the
        solver's default).  For "block_krylov", converged means every
        residual ||K v - lambda v|| <= tol * lambda_max (tol=0: 1e-10, or
        2e-13 when "auto" chose it).  For "incomplete_cholesky", tol bounds
        the largest residual diagonal of K - G G^T relative to the mean
        diagonal of the centred factor (tol=0: 1e-6; ``incomplete_cholesky``
        with centered=True).
    max_iter : int or None, default=None
        Eigensolver iteration limit for "arpack" and "block_krylov".  On
        max_iter "block_krylov" warns with the residual norms and keeps the
        best Ritz pairs found.
    iterated_power : int >= 0 or "auto", default="auto"
        Power iterations of "randomized" (as scikit-learn: "auto" is 7 when
        n_components < n_samples / 10, else 4).
    remove_zero_eig : bool, default=False
        As scikit-learn: drop the components whose eigenvalue is not > 0.
    random_state : int, RandomState instance or None, default=None
        Start vectors of "arpack", "randomized" and "block_krylov"; a fixed
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
        The gamma used: gamma resolved on the training X.
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
    (run to tol 2e-13, as accurate as ARPACK); "arpack" for n_components < 10
    from 201 to 1999 samples, and for 10 <= n_components <= n_samples / 50;
    else "dense".

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
        "kernel": [StrOptions(set(STRING_KERNELS) | {"cosine"}), callable],
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

    def _kernel(self, X, Y=None, *, gamma=None, out=None):
        kernel = self.kernel
        if isinstance(kernel, str) and kernel == "cosine":
            # Cosine similarity is the linear kernel of L2-normalised rows
            # (zero rows stay zero), as scikit-learn's cosine_similarity.
            X, Y, kernel = normalize(X), None if Y is None else normalize(Y), "linear"
        return kernel_gram(X, Y, kernel=kernel, gamma=self.gamma if gamma is None else gamma,
                           degree=self.degree, coef0=self.coef0, kernel_params=self.kernel_params,
                           n_threads=self.n_threads, out=out)

    def _validate(self, X, reset):
        if isinstance(X, (list, tuple)) and structured_kernel(self.kernel) is None:
            # A nested list is converted straight to float64 by check_array
            # when a dtype is requested, and complex entries then raise a
            # TypeError; as an array they get scikit-learn's "Complex data not
            # supported" ValueError.
            X = np.asarray(X)
        return validate_input(self, X, accept_sparse=["csr", "csc"],
                              dtype=[np.float64, np.float32], reset=reset)

    def _choose_solver(self, X, k, solver):
        if solver != "auto":
            return solver
        n = X.shape[0]
        if (not self._precomputed and not sparse.issparse(X) and X.ndim == 2
                and self.kernel != "cosine"
                and n * n * X.dtype.itemsize > memory_budget_bytes(self.memory_budget)):
            return "matrix-free"
        if n > _ITERATIVE_MIN_SAMPLES and k < 10:
            return "block_krylov" if n >= _KRYLOV_MIN_SAMPLES else "arpack"
        if n > _ITERATIVE_MIN_SAMPLES and k <= n // 50:
            return "arpack"
        return "dense"

    @_fit_context(prefer_skip_nested_validation=True)
    @limits_blas
    def fit(self, X, y=None, *, client=None, timeout=600.0):
        """Fit the model from X (n_samples, n_features), or a precomputed kernel (n, n).

        A ``dask.array`` X, or a ``distributed.Client`` given as ``client``, runs
        the matrix-free solver's kernel passes on that Dask cluster
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
        client : distributed.Client, default=None
            Run the matrix-free solver's kernel passes on this Dask cluster
            (eigen_solver "matrix-free" or "auto", not kernel="precomputed").
        timeout : float, default=600.0
            Seconds (> 0) that bound each pass over the cluster, retries after
            a lost worker included, and the loading of a dask X: a lost
            cluster raises TimeoutError instead of hanging.

        Returns
        -------
        self : KernelPCA
            The fitted estimator.
        """
        self._fit(X, client, timeout)
        return self

    def _fit(self, X, client=None, timeout=600.0):
        if self.fit_inverse_transform and self._precomputed:
            raise ValueError("Cannot fit_inverse_transform with a precomputed kernel.")
        solver = self._solver_name()
        memory_budget_bytes(self.memory_budget)
        self._client = client
        self._timeout = check_real(timeout, "timeout", low=0, low_inclusive=False)
        if client is not None or is_dask_array(X):
            # sklearn's validation would load a dask array into memory; the
            # Dask backend validates it block by block instead.
            if solver not in ("auto", "matrix-free"):
                raise ValueError("a dask array or a Dask client needs eigen_solver='matrix-free' "
                                 f"(or 'auto'), got {self.eigen_solver!r}")
            if self._precomputed:
                raise ValueError("kernel='precomputed' cannot run on a Dask cluster")
            from fastkern import _dask

            client, self._timeout = _dask.connect(client, self._timeout)
            self._client = client
            X, bounds = _dask.materialize(X, client=client, timeout=self._timeout)
            self.n_features_in_ = X.shape[1]
            self._fit_large_n(X, "matrix-free", lambda spec: _dask.fit_products(
                X, bounds, spec, client=client, timeout=self._timeout))
            return None
        X = self._validate(X, reset=True)
        n = X.shape[0]
        if self._precomputed and X.shape[1] != n:
            raise ValueError(f"X must be a square kernel matrix for kernel='precomputed', "
                             f"got shape {X.shape}")
        # As scikit-learn: None is every component (the non-positive ones are
        # dropped below), a larger request is clamped to n_samples.
        k = n if self.n_components is None else min(n, self.n_components)
        solver = self._choose_solver(X, k, solver)
        self.ichol_pivots_ = None
        if solver in LARGE_N_SOLVERS:
            if sparse.issparse(X):
                raise TypeError(f"eigen_solver={solver!r} does not support sparse input: X "
                                "must be dense (the dense, arpack, randomized and "
                                "block_krylov solvers take sparse X)")
            if self.kernel == "cosine":
                raise ValueError(f"kernel='cosine' is not available with eigen_solver="
                                 f"{solver!r}; use kernel='linear' on rows scaled to unit "
                                 "norm (sklearn.preprocessing.normalize)")
            self._fit_large_n(X, solver)
            return None
        gamma = resolve_gamma(self.gamma, X, self.kernel)
        self.gamma_ = 1 / X.shape[1] if gamma is None and X.ndim == 2 else gamma
        if solver == "incomplete_cholesky":
            return self._fit_ichol(X, k)
        if self.fit_inverse_transform and sparse.issparse(X):
            raise NotImplementedError("Inverse transform not implemented for sparse matrices!")

        # The eigensolver's basis before the Gram: see krylov_basis.
        basis = (krylov_basis(n, krylov_block_size(k), _KRYLOV_MAX_BLOCKS)
                 if solver == "block_krylov" else None)
        report_stage("kernel matrix")
        # The block Krylov solver's product can read the upper triangle
        # alone, packed (fastkern.pairwise.PackedUpperGram): the tiles below
        # the diagonal are never computed, each product reads half of K, and
        # K takes half the memory and half the page faults.
        K = (self._kernel_spec(X, gamma=self.gamma_).upper_gram(X)
             if solver == "block_krylov" and not self._precomputed else None)
        if K is None:
            K = self._full_gram(X)
        # The bounded kernels' values (RBF, Laplacian, sigmoid, cosine, ...: the
        # registry's) lie in [-1, 1] for finite X: only the other kernels can
        # overflow, so only they pay a pass over K.
        if self.kernel not in _BOUNDED_KERNELS and not _all_finite(K):
            raise ValueError("the kernel matrix contains NaN or infinity (overflow in the "
                             "kernel? check gamma)")
        # K was built here, C-contiguous and finite, so it is not scanned
        # again.  The block Krylov solver centres implicitly in its products
        # (fastkern.centering.CentredGram): no update pass over K.  The other
        # solvers read K itself: one pass for the means, one for the update.
        self._centerer = KernelCenterer(n_threads=self.n_threads)
        report_stage(f"eigensolver ({solver})")
        if solver == "block_krylov":
            # A Gram computed here is symmetric (the tiles are mirrored, or
            # equal to rounding): its means come from the first block product,
            # with no pass of their own.  A precomputed kernel may not be, and
            # float32 products would sum it in float32: one read pass.
            if self._precomputed or K.dtype != np.float64:
                row_means = self._centerer._fit_means_checked(K)
                op = CentredGram(K, row_means, self._centerer.K_fit_rows_,
                                 self._centerer.K_fit_all_)
            else:
                op = CentredGram(K, symmetric=True, n_threads=self.n_threads)
            eigenvalues, eigenvectors = self._block_krylov(op, k, basis)
            self._centerer._set_means(op.col_means, op.grand_mean)
            del op
        else:
            self._centerer._fit_transform_checked(K)

            def rebuild():
                # The dense solver's fallback needs the centred Gram again
                # (see _eigen): the same means, so the centerer is refitted as is.
                return self._centerer._fit_transform_checked(self._full_gram(X))

            eigenvalues, eigenvectors = self._eigen(K, solver, k, rebuild)

        self._store_eigenpairs(eigenvalues, eigenvectors, K.dtype)
        self._fit_solver = solver

        X_transformed = None
        if self.fit_inverse_transform:
            X_transformed = self.eigenvectors_ * np.sqrt(self.eigenvalues_)
            # The Gram buffer is dead after the eigensolver: the pre-image
            # kernel is computed into it (or, for a packed K, after it is
            # freed), so only one N x N array is ever live.
            if isinstance(K, np.ndarray):
                Kt = self._kernel(X_transformed, gamma=self.gamma_, out=K)
                del K
            else:
                del K
                Kt = self._kernel(X_transformed, gamma=self.gamma_)
            self.dual_coef_ = solve_shifted_in_place(Kt, X.astype(Kt.dtype, copy=False),
                                                     float(self.alpha))
            self.X_transformed_fit_ = X_transformed
        else:
            del K
        if self._precomputed:
            self.X_fit_ = X
        else:
            self.X_fit_ = X.copy() if self.copy_X else X
        return X_transformed

    def _full_gram(self, X):
        """The training Gram, writeable, C-contiguous, in the Gram dtype: a copy of a
        precomputed kernel, into a buffer the solvers may destroy."""
        if self._precomputed:
            return X.toarray(order="C") if sparse.issparse(X) else np.array(X, order="C",
                                                                             copy=True)
        K = self._kernel(X, gamma=self.gamma_)
        if not (K.flags.c_contiguous and K.flags.writeable) or K.dtype != gram_dtype(X):
            K = np.array(K, dtype=gram_dtype(X), order="C", copy=True)
        return K

    def _kernel_spec(self, X=None, gamma=None):
        """The estimator's kernel as one KernelSpec (gamma: the fitted one, else resolved on X)."""
        return KernelSpec.of(self, gamma=self.gamma if gamma is None else gamma, X=X)

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
        eigenvalues = _check_psd_eigenvalues(np.asarray(eigenvalues),
                                             enable_warnings=False)
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

    def _fit_large_n(self, X, solver, products=None):
        """eigen_solver="matrix-free" or "nystrom" (fastkern.large_n): the Gram is never stored.

        products(spec) gives the matmat(V) = K @ V of another backend (Dask);
        None computes them here.
        """
        from fastkern import large_n

        n = X.shape[0]
        if n < 2:
            raise ValueError(f"X must have at least 2 samples for eigen_solver={solver!r}, "
                             f"got n_samples={n}")
        if self.n_components is None:
            raise ValueError(f"eigen_solver={solver!r} needs n_components to be set "
                             "(it computes only the leading components)")
        X = np.ascontiguousarray(X)
        spec = self._kernel_spec(X)
        self.gamma_ = spec.gamma(X.shape[1])
        budget = parse_memory_budget(self.memory_budget)
        if solver == "nystrom":
            if self._precomputed:
                raise ValueError("eigen_solver='nystrom' needs the samples, not "
                                 "kernel='precomputed'")
            m = self.n_landmarks if self.n_landmarks is not None else min(n, 1000)
            if m > n:
                raise ValueError(f"n_landmarks={m} must be in [1, n_samples={n}]")
            k = self._large_n_components(n, m, solver)
            fit = large_n.nystroem_eigenpairs(X, spec, k, m, random_state=self.random_state,
                                              memory_budget=budget, verbose=self.verbose)
            order, signs = self._store_eigenpairs(fit.eigenvalues, fit.eigenvectors, X.dtype)
            self._nystroem_basis = np.ascontiguousarray(fit.basis[:, order] * signs)
            self._nystroem_map, self._nystroem_mean = fit.feature_map, fit.mean
        else:
            if self._precomputed and X.shape[1] != n:
                raise ValueError(f"X must be a square kernel matrix for kernel='precomputed', "
                                 f"got shape {X.shape}")
            k = self._large_n_components(n, n - 1, solver)
            matmat = (large_n.in_process_products(X, spec, memory_budget=budget)
                      if products is None else products(spec))
            fit = large_n.matrix_free_eigenpairs(n, k, matmat, tol=self.tol,
                                                 max_iter=self.max_iter,
                                                 random_state=self.random_state,
                                                 verbose=self.verbose)
            self._store_eigenpairs(fit.eigenvalues, fit.eigenvectors, X.dtype)
            self._fit_row_means, self._fit_grand_mean = fit.row_means, fit.grand_mean
        self.X_fit_ = np.array(X, copy=True) if self.copy_X else X
        self.n_features_in_ = X.shape[1]
        self._fit_solver = solver

    def _large_n_components(self, n, upper, solver):
        k = self.n_components
        if not 1 <= k <= upper:
            raise ValueError(f"n_components={k} must be in [1, {upper}] for "
                             f"eigen_solver={solver!r} with {n} samples")
        return int(k)

    def _transform_large_n(self, X, client=None):
        """Project X with the matrix-free or Nystroem fit (on the Dask cluster with a client)."""
        from fastkern import large_n

        bounds = None
        if client is not None or is_dask_array(X):
            from fastkern import _dask

            client, timeout = _dask.connect(client, getattr(self, "_timeout", 600.0))
            X, bounds = _dask.materialize(X, client=client, timeout=timeout)
            if X.shape[1] != self.n_features_in_:
                raise ValueError(f"X has {X.shape[1]} features, but KernelPCA is expecting "
                                 f"{self.n_features_in_} features as input")
        if sparse.issparse(X):
            raise TypeError(f"eigen_solver={self._fit_solver!r} does not support sparse "
                            "input: X must be dense")
        X = np.ascontiguousarray(X, dtype=self.X_fit_.dtype)
        if self._fit_solver == "nystrom":
            phi = self._nystroem_map.transform(X).astype(np.float64, copy=False)
            return ((phi - self._nystroem_mean) @ self._nystroem_basis).astype(X.dtype,
                                                                               copy=False)
        A = self._scaled_eigenvectors(np.float64)
        # K_t 1 comes from the same pass as K_t A (centred_projection needs both).
        A1 = np.hstack([A, np.ones((self.X_fit_.shape[0], 1))])
        spec = self._kernel_spec(gamma=self.gamma_)
        if client is not None:
            KA1 = _dask.cross_product(self.X_fit_, spec, X, A1, bounds, client=client,
                                      timeout=timeout)
        else:
            KA1 = large_n.transform_products(
                self.X_fit_, spec, A1, X, memory_budget=parse_memory_budget(self.memory_budget))
        return large_n.centred_projection(KA1, A, self._fit_row_means,
                                          self._fit_grand_mean).astype(X.dtype, copy=False)

    def _ichol_kernel_args(self):
        kernel = "linear" if self.kernel == "cosine" else self.kernel
        return dict(kernel=kernel, gamma=self.gamma_, degree=self.degree, coef0=self.coef0,
                    kernel_params=self.kernel_params)

    def _fit_ichol(self, X, k):
        """eigen_solver="incomplete_cholesky" (see the class docstring)."""
        from fastkern.lowrank import incomplete_cholesky

        if self._precomputed:
            raise ValueError("eigen_solver='incomplete_cholesky' evaluates the kernel of X: "
                             "it cannot use kernel='precomputed'")
        if sparse.issparse(X):
            raise TypeError("eigen_solver='incomplete_cholesky' needs a dense X, got a "
                            "sparse matrix")
        Xk = normalize(X) if self.kernel == "cosine" else X
        # tol relative to the centred kernel, the matrix whose spectrum this is.
        res = incomplete_cholesky(Xk, **self._ichol_kernel_args(), tol=self.tol or 1e-6,
                                  max_rank=self.ichol_max_rank, n_threads=self.n_threads,
                                  centered=True)
        G = np.array(res.G, dtype=np.float64)
        self._ichol_L = G[res.pivots]
        self._ichol_mean = G.mean(axis=0)
        G -= self._ichol_mean
        r = G.shape[1]
        lam, V = linalg.eigh(G.T @ G, check_finite=False) if r else (np.zeros(0),
                                                                       np.zeros((0, 0)))
        lam, V = lam[::-1][:k], V[:, ::-1][:, :k]
        # Components beyond the rank reached: eigenvalue 0, no direction.
        if lam.size < k:
            lam = np.concatenate([lam, np.zeros(k - lam.size)])
            V = np.hstack([V, np.zeros((r, k - V.shape[1]))])
        lam = _check_psd_eigenvalues(lam, enable_warnings=False)
        embedding = G @ V
        del G
        nonzero = lam > 0
        U = np.zeros_like(embedding)
        U[:, nonzero] = embedding[:, nonzero] / np.sqrt(lam[nonzero])
        U, _ = svd_flip(u=U, v=None)
        signs = np.where(np.sum(U * embedding, axis=0) < 0, -1.0, 1.0)
        V *= signs
        if self.remove_zero_eig or self.n_components is None:
            U, V, lam = U[:, nonzero], V[:, nonzero], lam[nonzero]
        self.eigenvalues_ = lam.astype(X.dtype)
        self.eigenvectors_ = np.ascontiguousarray(U, dtype=X.dtype)
        self._ichol_V = V
        self.ichol_pivots_ = res.pivots
        self._fit_solver = "incomplete_cholesky"
        self.X_fit_ = X.copy() if self.copy_X else X
        X_transformed = self.eigenvectors_ * np.sqrt(self.eigenvalues_)
        if self.fit_inverse_transform:
            # As the exact path, but the pre-image Gram is n x n here too.
            Kt = self._kernel(X_transformed, gamma=self.gamma_)
            self.dual_coef_ = solve_shifted_in_place(np.array(Kt, order="C"),
                                                     X.astype(Kt.dtype, copy=False),
                                                     float(self.alpha))
            self.X_transformed_fit_ = X_transformed
        return X_transformed

    def _ichol_transform(self, X):
        from fastkern.lowrank import pivot_features

        args = self._ichol_kernel_args()
        Xk, Xp = X, self.X_fit_[self.ichol_pivots_]
        if self.kernel == "cosine":
            Xk, Xp = normalize(X), normalize(Xp)
        Kp = kernel_gram(Xk.astype(self.X_fit_.dtype, copy=False), Xp, **args,
                         n_threads=self.n_threads)
        g = pivot_features(Kp, self._ichol_L) - self._ichol_mean
        return (g @ self._ichol_V).astype(self.eigenvectors_.dtype, copy=False)

    def _eigen(self, K, solver, k, rebuild):
        """Top-k eigenpairs of the Gram K, centred in place, by "dense", "arpack"
        or "randomized" ("block_krylov" takes a CentredGram: _block_krylov).
        rebuild() gives the centred K again, after "dense" destroyed it."""
        n = K.shape[0]
        if solver == "dense":
            # K.T is K's F-ordered view, so LAPACK works in place; its upper
            # triangle is K's lower one, the triangle scikit-learn's eigh reads
            # (they differ for a non-symmetric precomputed kernel).
            return top_eigh(K.T, k, lower=False, overwrite_a=True,
                            rebuild=lambda: rebuild().T)
        if solver == "arpack":
            # k == n: scipy warns and falls back to eigh, as in scikit-learn.
            v0 = check_random_state(self.random_state).uniform(-1, 1, n)
            return eigsh(K, k, which="LA", tol=self.tol, maxiter=self.max_iter, v0=v0)
        if solver == "randomized":
            return randomized_eigsh(K, k, n_iter=self.iterated_power,
                                    random_state=self.random_state)
        raise ValueError(f"unknown exact eigen_solver {solver!r}")

    def _block_krylov(self, op, k, basis=None):
        K = op.K
        n = K.shape[0]
        tol = self.tol
        if tol == 0:
            tol = _AUTO_KRYLOV_TOL if self.eigen_solver == "auto" else 1e-10

        def callback(iteration, residuals):
            report_iteration(iteration, residuals.max(), tol)
            if self.verbose:
                print(f"[KernelPCA] block_krylov iteration {iteration}: "
                      f"max residual {residuals.max():.3e}", flush=True)
        # Rows of the uncentred K start the iteration (for a symmetric K, K
        # applied to unit vectors, one step for free; they need no means, and
        # converged in as many products as rows of Kc at N=8000).  As many
        # rows as the first product takes for the cost of p columns (11, or
        # 15 with AVX-512, instead of 8: see block_eigsh's v0).
        p = krylov_block_size(k)
        rng = check_random_state(self.random_state)
        rows = np.sort(rng.choice(n, size=min(op.block_width(p), n), replace=False))
        v0 = K.columns(rows) if op.upper else K[rows].T
        return block_eigsh(op, n, k, dtype=K.dtype, block_size=p, tol=tol,
                           max_iter=self.max_iter, random_state=rng, callback=callback,
                           v0=v0, max_blocks=_KRYLOV_MAX_BLOCKS,
                           n_threads=check_n_threads(self.n_threads), matmat_blas=op.uses_blas,
                           basis=basis)

    @_fit_context(prefer_skip_nested_validation=True)
    @limits_blas
    def fit_transform(self, X, y=None, *, client=None, timeout=600.0):
        """Fit and return the training embedding sqrt(eigenvalues_) * eigenvectors_.

        ``client`` and ``timeout`` (seconds per pass over a Dask cluster) are
        those of :meth:`fit`.

        Parameters
        ----------
        X : {array-like, sparse matrix, dask array} of shape (n_samples, n_features)
            Training data, or the training Gram with kernel="precomputed" (see
            :meth:`fit`).
        y : None
            Ignored.
        client : distributed.Client, default=None
            Dask cluster of the matrix-free solver's kernel passes (see
            :meth:`fit`).
        timeout : float, default=600.0
            Seconds per pass over a Dask cluster (see :meth:`fit`).

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
        client = getattr(self, "_client", None)
        if self._fit_solver in LARGE_N_SOLVERS and (client is not None or is_dask_array(X)):
            return self._transform_large_n(X, client)
        X = self._validate(X, reset=False)
        if self._fit_solver in LARGE_N_SOLVERS:
            return self._transform_large_n(X)
        if self._fit_solver == "incomplete_cholesky":
            return self._ichol_transform(X)
        if self._precomputed:
            # validate_data checked X.shape[1] == n_samples of the fit.
            K = X.toarray(order="C") if sparse.issparse(X) else X
            K = np.array(K, dtype=self.eigenvectors_.dtype, order="C", copy=True)
        else:
            K = self._kernel(X.astype(self.X_fit_.dtype, copy=False), self.X_fit_,
                             gamma=self.gamma_)
        K = self._centerer.transform(K, copy=False)
        return K @ self._scaled_eigenvectors(self.eigenvectors_.dtype)

    def _scaled_eigenvectors(self, dtype):
        """eigenvectors_ / sqrt(eigenvalues_), zero columns for zero eigenvalues (clipped >= 0)."""
        scaled = np.zeros_like(self.eigenvectors_, dtype=dtype)
        nonzero = np.flatnonzero(self.eigenvalues_)
        scaled[:, nonzero] = self.eigenvectors_[:, nonzero] / np.sqrt(self.eigenvalues_[nonzero])
        return scaled

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
        K = self._kernel(X.astype(self.X_transformed_fit_.dtype, copy=False),
                         self.X_transformed_fit_, gamma=self.gamma_)
        return K @ self.dual_coef_

    @property
    def _n_features_out(self):
        return self.eigenvalues_.shape[0]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # The incomplete Cholesky factor and the large-N solvers' kernel
        # passes take dense X only (they raise a TypeError on sparse X).
        tags.input_tags.sparse = self.eigen_solver not in ("incomplete_cholesky",
                                                           *LARGE_N_SOLVERS)
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.input_tags.pairwise = self._precomputed
        return tags
