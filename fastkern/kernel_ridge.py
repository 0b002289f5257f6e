"""Kernel ridge regression on one in-place Gram buffer.

``KernelRidge`` is a drop-in for ``sklearn.kernel_ridge.KernelRidge``: the Gram
matrix is computed once into a C-contiguous buffer, alpha is added to its
diagonal and LAPACK factors it in place (a symmetric C-ordered K seen as K.T is
Fortran-ordered memory, so ``cho_factor(K.T, overwrite_a=True)`` copies
nothing).  Peak extra memory is the one Gram buffer; scikit-learn holds up to
three.  From ``MIXED_MIN_SAMPLES`` samples the float64 problem is solved in
mixed precision instead (``fastkern._mixed``: the float64 Gram kept as two
float32 parts, its rounding factored in place, the solution refined to float64
accuracy with residuals that read both parts), in three quarters of a Gram of
memory, falling back to the float64 buffer when float32 cannot carry the
problem.

``KernelRidgeCV`` selects alpha by exact leave-one-out cross-validation from one
eigendecomposition of the Gram matrix.
"""
import math
from numbers import Integral, Real

import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator, MultiOutputMixin, RegressorMixin, _fit_context
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _check_sample_weight, check_is_fitted

from fastkern._kernel_api import (KernelSpec, gram_dtype, is_precomputed, kernel_constraints,
                                  resolve_gamma, validate_input)
from fastkern import _inchol
from fastkern._linalg import solve_shifted_in_place
from fastkern._operator import kernel_times
from fastkern._threads import interruptible, limits_blas
from fastkern._validation import (CachedParamValidation, check_n_threads, memory_budget_bytes,
                                  memory_budget_constraint, n_threads_constraint)
from fastkern.pairwise import read_back

__all__ = ["KernelRidge", "KernelRidgeCV"]

# Rows per block of the row-blocked passes over an n x n array (restoring the
# Cholesky-overwritten triangle, the diagonal of (K + alpha I)^-1): bounds
# their temporaries to this many rows, O(n) memory.
_BLOCK_ROWS = 64
#: From this many samples solver="auto" tries the mixed-precision solve.  On
#: the 2-core dev machine (RBF, d=16, alpha=1, 1 and 2 threads, other jobs
#: running) the float64 solve took 0.73-0.94x the mixed one's time at 2000
#: samples and 1.24-1.39x at 3000: the crossover lies between.
MIXED_MIN_SAMPLES = 2500
#: ... and from this many on one thread (n_threads=1, or OMP_NUM_THREADS=1 as
#: in a grid search's workers), where float32's factorisation gains more
#: without a second BLAS thread (performance_history, "Small and mid sizes").
MIXED_MIN_SAMPLES_SERIAL = 1400


def gram_buffer(X, spec, *, n_threads, dtype):
    """The training Gram matrix of the kernel ``spec`` in a fresh, writeable C-contiguous
    buffer we may destroy.

    A precomputed kernel is copied once (it belongs to the caller); any other
    kernel is computed straight into its own buffer.
    """
    if spec.precomputed:
        if hasattr(X, "toarray"):  # a sparse precomputed kernel: the solve needs it dense
            return np.asarray(X.toarray(order="C"), dtype=dtype, order="C")
        return np.array(X, dtype=dtype, order="C", copy=True)
    with read_back():
        K = spec.gram(X, n_threads=n_threads)
    if not (K.flags.c_contiguous and K.flags.writeable) or K.dtype != dtype:
        K = np.array(K, dtype=dtype, order="C", copy=True)
    return K


def _check_alpha_array(alpha, name, *, positive=False):
    if type(alpha) is float or (type(alpha) is int and abs(alpha) < 2 ** 53):
        # A plain number (the default alpha=1) is judged without NumPy's
        # reductions, which cost a fiftieth of a 200-row fit.
        values = np.array([float(alpha)])
        finite, least = math.isfinite(alpha), alpha
    else:
        values = np.atleast_1d(np.asarray(alpha))
        if values.ndim != 1 or values.size == 0:
            raise ValueError(f"{name} must be a non-empty scalar or 1-D array, "
                             f"got shape {values.shape}")
        if values.dtype.kind not in "iuf":
            raise TypeError(f"{name} must be real numbers, got dtype {values.dtype}")
        values = values.astype(np.float64)
        finite = bool(np.isfinite(values).all())
        least = values.min() if finite else None
    if not finite:
        raise ValueError(f"{name} must be finite, got {alpha!r}")
    if positive and least <= 0:
        raise ValueError(f"{name} must be > 0, got {alpha!r}")
    if least < 0:
        raise ValueError(f"{name} must be >= 0, got {alpha!r}")
    return values


def _solve_dtype(K_dtype, y_dtype, sw, one_alpha):
    """dtype of dual_coef_, by scikit-learn's rule (and the one the system is solved in).

    scikit-learn solves one shared alpha with scipy.linalg.solve(K, y * sqrt(sw)),
    which works in float32 only when K, y and the sample weights all are;
    per-target alphas are written into an array of K's dtype.
    """
    if not one_alpha:
        return np.dtype(K_dtype)
    all32 = (K_dtype == np.float32 and y_dtype == np.float32
             and (sw is None or sw.dtype == np.float32))
    return np.dtype(np.float32 if all32 else np.float64)


class _KernelRegressorBase(CachedParamValidation, MultiOutputMixin, RegressorMixin, BaseEstimator):
    def _validate_fit(self, X, y, sample_weight):
        check_n_threads(self.n_threads)
        X, y = validate_input(self, X, y, accept_sparse=("csr", "csc"), multi_output=True,
                              y_numeric=True)
        if self._precomputed and X.shape[0] != X.shape[1]:
            raise ValueError(f"X must be a square kernel matrix for kernel='precomputed', "
                             f"got shape {X.shape}")
        # gamma="scale"/"median" resolved once, on the training X.
        self.gamma_ = resolve_gamma(self.gamma, X, self.kernel)
        self.kernel_spec_ = KernelSpec.of(self, gamma=self.gamma_)
        sw = None
        if sample_weight is not None:
            # Keeps a float32 array float32: it matters for dual_coef_'s dtype.
            sw = _check_sample_weight(sample_weight, X, ensure_non_negative=True)
        return X, y, sw

    @property
    def _precomputed(self):
        return is_precomputed(self.kernel)

    def _kernel_dtype(self, X):
        """dtype of the Gram matrix of X, as fastkern (and scikit-learn) compute it.

        Only float32 X can give a float32 Gram, and then only for some kernels
        (scikit-learn evaluates callables into float64): a 1 x 1 Gram tells.
        """
        if gram_dtype(X) != np.float32 or self._precomputed:
            return gram_dtype(X)
        return self.kernel_spec_.gram(X[:1], n_threads=1).dtype

    def _gram(self, X, dtype):
        """The training Gram matrix in `dtype`, in a buffer fit may destroy.

        X is cast first when the solve needs more precision than X has (float32
        X, float64 y): one float64 Gram instead of a float32 one and its copy.
        """
        if not self._precomputed and gram_dtype(X) != dtype:
            X = X.astype(dtype)
        return gram_buffer(X, self.kernel_spec_, n_threads=self.n_threads, dtype=dtype)

    @limits_blas
    def predict(self, X):
        """Predict with k(X, X_fit_) @ dual_coef_.

        For the kernels of the compiled tile loops the product is summed tile
        by tile (``fastkern._operator.kernel_times``): no n_queries x
        n_samples matrix is stored.  For kernel="precomputed", X is the
        cross-kernel k(X_test, X_train).
        With solver="incomplete_cholesky" the predictions are
        g(X) @ ichol_coef_ (the Nystroem features of X on the pivots).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_queries, n_features)
            The samples; with kernel="precomputed", the cross-kernel
            k(X_test, X_train) of shape (n_queries, n_samples).

        Returns
        -------
        y_pred : ndarray of shape (n_queries,) or (n_queries, n_targets)
            The predictions, in the promoted dtype of k(X, X_fit_) and
            dual_coef_.
        """
        check_is_fitted(self, "dual_coef_")
        X = validate_input(self, X, accept_sparse=("csr", "csc"), reset=False)
        if getattr(self, "ichol_coef_", None) is not None:
            return self._ichol_features(X) @ self.ichol_coef_
        if self._precomputed and hasattr(X, "toarray"):
            return np.asarray(X @ self.dual_coef_)
        KV = kernel_times(self.kernel_spec_, X, self.X_fit_, self.dual_coef_,
                          n_threads=self.n_threads)
        if KV is not None:
            # The dtype k(X, X_fit_) would have: float32 only from float32
            # on both sides.
            K_dtype = np.float32 if X.dtype == self.X_fit_.dtype == np.float32 else np.float64
            return KV.astype(np.result_type(K_dtype, self.dual_coef_.dtype), copy=False)
        K = self.kernel_spec_.gram(X, self.X_fit_, n_threads=self.n_threads)
        # As scikit-learn: the result has the promoted dtype of K and dual_coef_.
        return np.dot(K, self.dual_coef_)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # The incomplete Cholesky factor is computed from dense X only.
        tags.input_tags.sparse = getattr(self, "solver", "auto") != "incomplete_cholesky"
        tags.input_tags.pairwise = self._precomputed
        return tags

    def _ichol_features(self, X):
        """Rows of the fitted factor for new points (the Nystroem map on the pivots)."""
        from fastkern.lowrank import pivot_features

        Kp = self.kernel_spec_.gram(X, self.X_fit_[self.ichol_pivots_],
                                    n_threads=self.n_threads)
        return pivot_features(Kp, self._ichol_L)


class KernelRidge(_KernelRegressorBase):
    """Kernel ridge regression, a drop-in for ``sklearn.kernel_ridge.KernelRidge``.

    Solves (K + alpha I) c = y for the dual coefficients c (``dual_coef_``),
    with sample weights w as scikit-learn does: (S K S + alpha I) c~ = S y,
    c = S c~, S = diag(sqrt(w)).  ``alpha`` is a scalar or one value per
    target.  The Gram matrix is computed by fastkern's Cython kernels into one
    buffer, which is weighted, shifted and Cholesky-factored in place; if the
    shifted matrix is not positive definite a warning is issued and the
    least-squares solution is used.  Predictions use the cross-Gram
    k(X, X_fit_).  X may be dense or scipy CSR/CSC (kept sparse).

    dtypes follow scikit-learn: with one alpha the system is solved, and
    dual_coef_ stored, in float32 only when the Gram matrix and y both are
    float32 (float32 X with float64 y gives float64); with per-target alphas
    dual_coef_ has the Gram matrix's dtype.  predict returns the promoted
    dtype of k(X, X_fit_) and dual_coef_.

    Parameters
    ----------
    alpha : float or array-like of shape (n_targets,), default=1
        Regularization (>= 0): a scalar or one value per target.
    kernel : str, Kernel or callable, default="linear"
        Any of scikit-learn's kernel names, fastkern's "exponential",
        "precomputed" (X is then the training Gram, and predict takes the
        cross-Gram k(X_test, X_train)), a fastkern kernel object or a callable.
    gamma : float or {"scale", "median"}, default=None
        Kernel coefficient, as scikit-learn; may also be "scale",
        1 / (n_features X.var()), or "median", the median heuristic of
        ``fastkern.estimate_gamma``: resolved on the training X at fit,
        stored as ``gamma_`` and used by predict.
    degree : float, default=3
        Degree of the polynomial kernel, as scikit-learn.
    coef0 : float, default=1
        Constant term of the polynomial and sigmoid kernels, as scikit-learn.
    kernel_params : dict, default=None
        Parameters of a callable kernel, passed as keyword arguments, as
        scikit-learn.
    n_threads : int, default=None
        Threads of the Gram computations (None = OpenMP default).
    solver : {"auto", "cholesky", "mixed", "incomplete_cholesky"}, default="auto"
        "cholesky" is the exact solve above, in the Gram matrix's dtype.
        "mixed" solves in mixed precision (LAPACK's dsposv without a float64
        matrix; see Notes), falling back to "cholesky" where it does not
        apply.  "auto" is "mixed" from ``MIXED_MIN_SAMPLES`` (2500) samples,
        or ``MIXED_MIN_SAMPLES_SERIAL`` (1400) on one thread, and "cholesky"
        below, where the float64 factorisation is as fast.
        "incomplete_cholesky" is for large n: K is replaced by a low-rank
        factorisation G G^T (see Notes).  ``solver_`` records the solve used.
    ichol_tol : float, default=1e-6
        The ``tol`` (>= 0) of ``fastkern.incomplete_cholesky`` with
        solver="incomplete_cholesky".
    ichol_max_rank : int or None, default=None
        The ``max_rank`` of ``fastkern.incomplete_cholesky`` with
        solver="incomplete_cholesky" (None: n).

    Attributes
    ----------
    dual_coef_ : ndarray of shape (n_samples,) or (n_samples, n_targets)
        The dual coefficients c.
    X_fit_ : {ndarray, sparse matrix} of shape (n_samples, n_features)
        The training data (the training Gram with kernel="precomputed").
    gamma_ : float or None
        The gamma used: gamma resolved on the training X.
    kernel_spec_ : fastkern._kernel_api.KernelSpec
        The kernel as fitted (kernel, gamma_, degree, coef0, kernel_params),
        built once at fit and evaluated by predict.
    solver_ : str
        The solve used: "mixed", "cholesky" or "incomplete_cholesky".
    ichol_coef_ : ndarray of shape (rank,) or (rank, n_targets), or None
        Coefficients on the factor's features (solver="incomplete_cholesky";
        None otherwise).
    ichol_pivots_ : ndarray of shape (rank,) or None
        The pivots of the factor (solver="incomplete_cholesky"; None
        otherwise).
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features seen during fit, for DataFrames with string
        column names.

    See Also
    --------
    sklearn.kernel_ridge.KernelRidge : The scikit-learn estimator this replaces.
    KernelRidgeCV : Kernel ridge regression with alpha chosen by leave-one-out CV.

    Notes
    -----
    Mixed precision (solver="mixed").  LAPACK's dsposv without a float64
    matrix applies when the solve is in float64, X is dense and the kernel is
    one of "linear", "poly", "rbf", "laplacian", "sigmoid", "exponential", and
    alpha > 0: the Gram matrix is computed in float64, 128 rows at a time,
    and kept as two float32 parts (``fastkern._split``): its rounding, in one
    n x n buffer that is shifted and factored in place by spotrf, and the
    rounding errors of its strict upper triangle, packed.  The float32
    solution is refined with float64 residuals that read both parts (the
    float64 matrix to about 2^-48 of each entry), until each target's
    residual reaches the level of a float64 Cholesky solve,
    ||r|| <= sqrt(n) eps ||A|| ||c|| (dsposv's test; the last correction may
    be accepted when the contraction measured on the previous two residuals
    predicts a residual 100x below it).  dual_coef_ then agrees with the
    float64 solve to rounding.  Peak memory is about three quarters of a
    float64 Gram; time is the Gram, spotrf (about half of dpotrf) and 2-3
    residual passes of a few milliseconds.  When float32 cannot carry the
    problem (kernel values beyond float32's range, spotrf fails,
    alpha < eps32 ||K||, or the refinement would need more than
    ``fastkern._mixed.MAX_PASSES`` passes), and for other kernels, sparse X
    or float32 solves, the "cholesky" solve is used.

    Incomplete Cholesky (solver="incomplete_cholesky").  K is replaced by
    G G^T from ``fastkern.incomplete_cholesky(X, ..., tol=ichol_tol,
    max_rank=ichol_max_rank)`` (dense X, not "precomputed"; alpha > 0), and
    the ridge problem is solved in the rank-r space of G:
    ``ichol_coef_ = (G^T S G + alpha I)^-1 G^T S y`` (S the sample
    weights), which by the Woodbury identity is G^T c for the dual
    coefficients c = S (S y - S G ichol_coef_) / alpha of
    (S G G^T S + alpha I) c~ = S y.  Predictions are g(x) @ ichol_coef_,
    where g(x) solves L g = k(X_fit_[ichol_pivots_], x), L = G[pivots]
    (lower triangular): the Nystroem feature map on the pivots, which
    reproduces the rows of G on the training points.  Cost O(n r^2) time,
    O(n r) memory; prediction O(r d + r^2) per point.

    Examples
    --------
    >>> import numpy as np
    >>> from fastkern import KernelRidge
    >>> X = np.random.default_rng(0).normal(size=(50, 3))
    >>> y = X[:, 0] ** 2
    >>> KernelRidge(alpha=0.1, kernel="rbf").fit(X, y).predict(X[:3]).shape
    (3,)
    """

    _parameter_constraints: dict = {
        "alpha": [Interval(Real, 0, None, closed="left"), "array-like"],
        **kernel_constraints(),
        "n_threads": n_threads_constraint(),
        "solver": [StrOptions({"auto", "cholesky", "mixed", "incomplete_cholesky"})],
        "ichol_tol": [Interval(Real, 0, None, closed="left")],
        "ichol_max_rank": [Interval(Integral, 1, None, closed="left"), None],
    }

    def __init__(self, alpha=1, *, kernel="linear", gamma=None, degree=3, coef0=1,
                 kernel_params=None, n_threads=None, solver="auto", ichol_tol=1e-6,
                 ichol_max_rank=None):
        self.alpha = alpha
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.n_threads = n_threads
        self.solver = solver
        self.ichol_tol = ichol_tol
        self.ichol_max_rank = ichol_max_rank

    @_fit_context(prefer_skip_nested_validation=True)
    @limits_blas
    def fit(self, X, y, sample_weight=None):
        """Fit the kernel ridge model.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data, dense or CSR/CSC (kept sparse); with
            kernel="precomputed", the square training Gram (n_samples,
            n_samples); for the kernels of ``fastkern.structured``, a list of
            strings, sets or graphs.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Target values.
        sample_weight : float or array-like of shape (n_samples,), default=None
            Non-negative individual weights, as scikit-learn (None: all 1).

        Returns
        -------
        self : KernelRidge
            The fitted estimator.

        Raises
        ------
        ValueError
            If alpha has neither one value nor one per target, or
            solver="incomplete_cholesky" is used with kernel="precomputed" or
            alpha = 0.
        TypeError
            If solver="incomplete_cholesky" is given a sparse X.
        """
        X, y, sw = self._validate_fit(X, y, sample_weight)
        alpha = _check_alpha_array(self.alpha, "alpha")
        ravel = y.ndim == 1
        Y = y.reshape(-1, 1) if ravel else y
        if alpha.size not in (1, Y.shape[1]):
            raise ValueError(f"alpha has {alpha.size} values but y has {Y.shape[1]} targets")
        self.ichol_coef_ = self.ichol_pivots_ = None
        # Why the mixed solve was left ("spotrf failed", ...) or its passes per alpha.
        self._mixed_info = None
        if self.solver == "incomplete_cholesky":
            self.solver_ = "incomplete_cholesky"
            self._fit_ichol(X, Y, sw, alpha, ravel)
            return self
        dtype = _solve_dtype(self._kernel_dtype(X), y.dtype, sw,
                             alpha.size == 1 or bool(np.all(alpha == alpha[0])))
        Y = np.array(Y, dtype=dtype, order="C", copy=True)
        s = None
        if sw is not None:
            s = np.sqrt(sw).astype(dtype)
            Y *= s[:, None]
        coef = None
        self.solver_ = "cholesky"
        if self._use_mixed(X, dtype, alpha):
            from fastkern._mixed import solve_mixed

            coef, why = solve_mixed(X, Y, np.broadcast_to(alpha, (Y.shape[1],)), s,
                                    self.kernel_spec_, n_threads=self.n_threads)
            if coef is not None:
                self.solver_ = "mixed"
            self._mixed_info = why
        if coef is None:
            K = self._gram(X, dtype)
            if s is not None:
                K *= s[:, None]
                K *= s[None, :]
            coef = solve_shifted_in_place(K, Y, alpha)
            del K
        if sw is not None:
            coef *= s[:, None]
        self.dual_coef_ = coef.ravel() if ravel else coef
        self.X_fit_ = X
        return self

    def _use_mixed(self, X, dtype, alpha):
        """Whether to try the mixed-precision solve (see ``fastkern._mixed``)."""
        from fastkern._mixed import MIXED_KERNELS

        if self.solver == "cholesky":
            return False
        return (dtype == np.float64 and not hasattr(X, "toarray")
                and isinstance(self.kernel, str) and self.kernel in MIXED_KERNELS
                and (self.solver == "mixed" or X.shape[0] >= self._mixed_from())
                and bool(np.all(alpha > 0)))

    def _mixed_from(self):
        """The samples from which solver="auto" tries the mixed solve, on this
        fit's threads (n_threads=None: limits_blas's cap applies)."""
        threads = check_n_threads(self.n_threads)
        return MIXED_MIN_SAMPLES_SERIAL if threads == 1 else MIXED_MIN_SAMPLES

    def _fit_ichol(self, X, Y, sw, alpha, ravel):
        from fastkern.lowrank import factor

        if self._precomputed:
            raise ValueError("solver='incomplete_cholesky' evaluates the kernel of X: it "
                             "cannot use kernel='precomputed'")
        if hasattr(X, "toarray"):
            raise TypeError("solver='incomplete_cholesky' needs a dense X, got a sparse matrix")
        if np.any(alpha <= 0):
            raise ValueError("solver='incomplete_cholesky' needs alpha > 0 (the low-rank "
                             f"kernel G G^T is singular), got alpha={self.alpha!r}")
        res = factor(X, self.kernel_spec_, tol=self.ichol_tol, max_rank=self.ichol_max_rank,
                     n_threads=self.n_threads)
        G = np.asarray(res.G, dtype=np.float64)
        Y = np.asarray(Y, dtype=np.float64)
        s = None if sw is None else np.sqrt(np.asarray(sw, dtype=np.float64))
        Gs = G if s is None else G * s[:, None]
        Ys = Y if s is None else Y * s[:, None]
        A = Gs.T @ Gs
        B = Gs.T @ Ys
        r, t = B.shape
        W = np.zeros((r, t))
        groups = [slice(None)] if alpha.size == 1 else [slice(j, j + 1) for j in range(t)]
        for cols, a in zip(groups, alpha.flat):
            if r:
                M = A.copy()
                M.flat[:: r + 1] += a
                W[:, cols] = linalg.solve(M, B[:, cols], assume_a="pos", check_finite=False)
        # c~ = (S y - S G w) / alpha, c = S c~ (the exact solver's convention).
        coef = (Ys - Gs @ W) / np.broadcast_to(alpha, (t,))
        if s is not None:
            coef *= s[:, None]
        self.dual_coef_ = coef.ravel() if ravel else coef
        self.ichol_coef_ = W.ravel() if ravel else W
        self.ichol_pivots_ = res.pivots
        self._ichol_L = G[res.pivots]
        self.X_fit_ = X


class KernelRidgeCV(_KernelRegressorBase):
    """Kernel ridge regression with alpha chosen by exact leave-one-out CV.

    One symmetric eigendecomposition K = U diag(l) U^T (in place on the Gram
    buffer) serves every alpha: the dual coefficients are
    c = U diag(1 / (l + alpha)) U^T y and G = (K + alpha I)^-1 has diagonal
    G_ii = sum_j U_ij^2 / (l_j + alpha), so the leave-one-out residual of
    sample i, y_i - f_{-i}(x_i), is exactly c_i / G_ii (no refits).

    dtypes: the Gram matrix is decomposed, and dual_coef_ stored, in float32
    only when the Gram matrix and y are both float32 (``KernelRidge``'s rule).

    Parameters
    ----------
    alphas : float or array-like of shape (n_alphas,), default=(0.1, 1.0, 10.0)
        The candidate alphas (non-empty, > 0).
    kernel : str, Kernel or callable, default="linear"
        As ``KernelRidge``.
    gamma : float or {"scale", "median"}, default=None
        As ``KernelRidge``.
    degree : float, default=3
        As ``KernelRidge``.
    coef0 : float, default=1
        As ``KernelRidge``.
    kernel_params : dict, default=None
        As ``KernelRidge``.
    n_threads : int, default=None
        Threads of the Gram computations (None = OpenMP default).
    memory_budget : float, str or None, default=None
        Bytes (or a string such as "2GB"; None = half the available RAM):
        picks the fastest LAPACK eigensolver that fits (see Notes).

    Attributes
    ----------
    alpha_ : float
        The selected alpha (the first of any ties).
    best_score_ : float
        Negative mean squared leave-one-out error at alpha_ (averaged over
        samples and targets; scikit-learn's RidgeCV convention).
    loo_errors_ : ndarray of shape (n_samples, n_alphas) or (n_samples, n_targets, n_alphas)
        Squared leave-one-out residuals, the first shape for 1-D y and the
        second for 2-D y (the layout of RidgeCV's ``cv_results_``).
    dual_coef_ : ndarray of shape (n_samples,) or (n_samples, n_targets)
        As ``KernelRidge`` fitted with alpha_.
    X_fit_ : {ndarray, sparse matrix} of shape (n_samples, n_features)
        As ``KernelRidge`` fitted with alpha_.
    gamma_ : float or None
        The gamma used: gamma resolved on the training X.
    kernel_spec_ : fastkern._kernel_api.KernelSpec
        The kernel as fitted (kernel, gamma_, degree, coef0, kernel_params),
        built once at fit and evaluated by predict.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features seen during fit, for DataFrames with string
        column names.

    See Also
    --------
    KernelRidge : Kernel ridge regression with a given alpha.
    sklearn.linear_model.RidgeCV : The linear counterpart.

    Notes
    -----
    Sample weights mean repeated samples, as in scikit-learn's estimator
    checks: the problem is the weighted one of ``KernelRidge``, a sample of
    weight w counts as w copies, and its leave-one-out residual is that of
    leaving one copy out (the whole sample when w <= 1): with
    G~ = (S K S + alpha I)^-1, S = diag(sqrt(w)), r_i = alpha c~_i / sqrt(w_i)
    and d_i = min(w_i, 1) it is r_i w_i / (w_i - d_i + d_i alpha G~_ii).
    Integer weights therefore select the alpha the data with every sample
    repeated w_i times would; alpha minimises the w-weighted mean squared
    residual.  Samples of weight zero are dropped before the
    eigendecomposition, so the fit equals the fit without them; their
    ``loo_errors_`` are the squared residuals of that fit (leaving them out
    changes nothing) and their dual coefficients are 0.

    Eigensolver.  memory_budget picks the fastest LAPACK eigensolver that
    fits: divide-and-conquer (syevd, 2 n^2 extra workspace) when three Gram
    matrices fit, else MRRR (syevr, a second n x n for the eigenvectors)
    when two fit, else the QR algorithm (syev) in place with O(n)
    workspace.  Indicative times at n=3000 on the 2-core dev machine:
    syevd 5.7 s, syevr 14 s, syev 24 s.
    """

    _parameter_constraints: dict = {
        "alphas": [Interval(Real, 0, None, closed="neither"), "array-like"],
        **kernel_constraints(),
        "n_threads": n_threads_constraint(),
        "memory_budget": memory_budget_constraint(),
    }

    def __init__(self, alphas=(0.1, 1.0, 10.0), *, kernel="linear", gamma=None, degree=3,
                 coef0=1, kernel_params=None, n_threads=None, memory_budget=None):
        self.alphas = alphas
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.n_threads = n_threads
        self.memory_budget = memory_budget

    @_fit_context(prefer_skip_nested_validation=True)
    @limits_blas
    def fit(self, X, y, sample_weight=None):
        """Fit the model with the alpha of least leave-one-out error.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data, dense or CSR/CSC; with kernel="precomputed", the
            square training Gram (n_samples, n_samples); for the kernels of
            ``fastkern.structured``, a list of strings, sets or graphs.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Target values.
        sample_weight : float or array-like of shape (n_samples,), default=None
            Non-negative weights, meaning repeated samples (see Notes of the
            class; None: all 1).

        Returns
        -------
        self : KernelRidgeCV
            The fitted estimator.

        Raises
        ------
        ValueError
            If sample_weight has no positive weight.
        """
        alphas = _check_alpha_array(self.alphas, "alphas", positive=True)
        budget = memory_budget_bytes(self.memory_budget)
        X, y, sw = self._validate_fit(X, y, sample_weight)
        ravel = y.ndim == 1
        Y = np.array(y.reshape(-1, 1) if ravel else y, dtype=np.float64, order="C", copy=True)
        n, t = Y.shape
        dtype = _solve_dtype(self._kernel_dtype(X), y.dtype, sw, True)
        if sw is not None:
            sw = sw.astype(np.float64)
        K = self._gram(X, dtype)
        keep = drop = K_drop = None
        if sw is not None and np.any(sw == 0):
            keep, drop = np.flatnonzero(sw > 0), np.flatnonzero(sw == 0)
            if keep.size == 0:
                raise ValueError("sample_weight has no positive weight")
            K_drop = K[np.ix_(drop, keep)]
            K = _compact_in_place(K, keep)
            Y_all, Y, sw = Y, Y[keep], sw[keep]
        m = K.shape[0]
        s = None
        if sw is not None:
            s = np.sqrt(sw)
            K *= s.astype(K.dtype)[:, None]
            K *= s.astype(K.dtype)[None, :]
            Y *= s[:, None]
        # The fastest LAPACK driver whose peak memory fits the budget.  K.T is
        # K's memory in Fortran order: syevd and syev overwrite it with the
        # eigenvectors; syevr returns them in a second m x m array.
        if 3 * K.nbytes <= budget:
            driver = "evd"
        elif 2 * K.nbytes <= budget:
            driver = "evr"
        else:
            driver = "ev"
        if m == 1:
            # scipy < 1.12's syevd wrapper asks for too small a workspace at
            # n = 1 and fails; the eigenproblem of a 1 x 1 matrix is itself.
            lam, U = K[0].copy(), np.ones((1, 1), dtype=K.dtype)
        elif driver == "evr":
            lam, U = interruptible(_inchol.syevr, K.T, True, 1, m)
        else:
            # Without the GIL, in a worker thread: Ctrl-C is seen within 0.05 s
            # (scipy's eigh holds the GIL for the whole factorisation).
            lam = interruptible(_inchol.syev, K.T, True, driver == "evd")
            U = K.T
        self._eigen_driver = driver
        lam = lam.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            D = 1.0 / (lam[:, None] + alphas[None, :])                    # (m, A)
            Q = (U.T @ Y.astype(U.dtype)).astype(np.float64)              # (m, t)
            coef = (U @ (Q[:, :, None] * D[:, None, :]).reshape(m, -1).astype(U.dtype))
            coef = coef.astype(np.float64).reshape(m, t, alphas.size)     # c~ per target, alpha
            G = np.empty((m, alphas.size))
            for r0 in range(0, m, _BLOCK_ROWS):
                rows = np.asarray(U[r0:r0 + _BLOCK_ROWS], dtype=np.float64)
                G[r0:r0 + _BLOCK_ROWS] = (rows * rows) @ D
            # Sample i counts as w_i copies and one copy (all of it if w_i < 1)
            # is left out: with per-unit leverage h_i = (1 - alpha G~_ii) / w_i,
            # the residual is r_i / (1 - delta_i h_i), r_i = alpha c~_i / s_i.
            w = np.ones(m) if sw is None else sw
            root_w = np.ones(m) if s is None else s
            delta = np.minimum(w, 1.0)
            den = (w - delta)[:, None] + delta[:, None] * alphas[None, :] * G   # (m, A)
            resid = (alphas[None, None, :] * root_w[:, None, None]) * coef / den[:, None, :]
            sq = resid ** 2
            crit = np.einsum("i,ita->a", w, sq) / (w.sum() * t)
        crit = np.where(np.isfinite(crit), crit, np.inf)
        best = int(np.argmin(crit))
        del U, K
        if s is not None:
            coef *= s[:, None, None]
        if keep is not None:
            # A zero-weight sample leaves the fit unchanged when left out: its
            # leave-one-out residual is its residual under the fit on the others.
            full_sq = np.empty((n, t, alphas.size))
            full_sq[keep] = sq
            pred = (K_drop.astype(np.float64) @ coef.reshape(m, -1)).reshape(-1, t, alphas.size)
            full_sq[drop] = (Y_all[drop][:, :, None] - pred) ** 2
            full_coef = np.zeros((n, t, alphas.size))
            full_coef[keep] = coef
            sq, coef = full_sq, full_coef
        dual = coef[:, :, best].astype(dtype)
        self.alpha_ = float(alphas[best])
        self.best_score_ = float(-crit[best])
        self.loo_errors_ = sq[:, 0, :] if ravel else sq
        self.dual_coef_ = dual.ravel() if ravel else dual
        self.X_fit_ = X
        return self


def _compact_in_place(K, keep):
    """K[keep][:, keep] as a C-contiguous (m, m) array in the front of K's own buffer.

    keep is increasing, so row r of the result is written over memory that
    holds only rows <= keep[r] of K, all of which have been read already.
    """
    m = keep.size
    flat = K.reshape(-1)
    for r, i in enumerate(keep):
        flat[r * m:(r + 1) * m] = K[i, keep]
    return flat[:m * m].reshape(m, m)
