"""Kernel ridge regression on one in-place Gram buffer.

``KernelRidge`` is a drop-in for ``sklearn.kernel_ridge.KernelRidge``: the Gram
matrix is computed once into a C-contiguous buffer, alpha is added to its
diagonal and LAPACK factors it in place (a symmetric C-ordered K seen as K.T is
Fortran-ordered memory, so ``cho_factor(K.T, overwrite_a=True)`` copies
nothing).  Peak extra memory is the one Gram buffer; scikit-learn holds up to
three.

``KernelRidgeCV`` selects alpha by exact leave-one-out cross-validation from one
eigendecomposition of the Gram matrix.
"""
import warnings

import numpy as np
from scipy import linalg
from sklearn.base import BaseEstimator, MultiOutputMixin, RegressorMixin
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from fastkern._kernel_api import check_kernel_param, kernel_gram
from fastkern._threads import limits_blas
from fastkern._validation import check_n_threads, memory_budget_bytes

__all__ = ["KernelRidge", "KernelRidgeCV"]

# Rows per block of the row-blocked passes over an n x n array (restoring the
# Cholesky-overwritten triangle, the diagonal of (K + alpha I)^-1): bounds
# their temporaries to this many rows, O(n) memory.
_BLOCK_ROWS = 64


def gram_buffer(X, *, kernel, gamma, degree, coef0, kernel_params, n_threads, dtype):
    """The training Gram matrix in a fresh, writeable C-contiguous buffer we may destroy.

    A precomputed kernel is copied once (it belongs to the caller); any other
    kernel is computed straight into its own buffer.
    """
    if isinstance(kernel, str) and kernel == "precomputed":
        return np.array(X, dtype=dtype, order="C", copy=True)
    K = kernel_gram(X, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0,
                    kernel_params=kernel_params, n_threads=n_threads)
    if not (K.flags.c_contiguous and K.flags.writeable) or K.dtype != dtype:
        K = np.array(K, dtype=dtype, order="C", copy=True)
    return K


def _restore_factored_triangle(K, diag):
    """Undo an in-place Cholesky of K.T (uplo='U'), which wrote K's lower triangle.

    The strict upper triangle of K is untouched by the factorisation, so the
    symmetric matrix is rebuilt from it and the saved diagonal, with O(n) rows
    of temporary memory.
    """
    n = K.shape[0]
    for r0 in range(0, n, _BLOCK_ROWS):
        r1 = min(n, r0 + _BLOCK_ROWS)
        K[r0:r1, :r0] = K[:r0, r0:r1].T
        block = K[r0:r1, r0:r1]
        lower = np.tril_indices(r1 - r0, -1)
        block[lower] = block.T[lower]
    np.fill_diagonal(K, diag)


def solve_shifted_in_place(K, Y, alphas):
    """Solve (K + alpha_j I) c_j = y_j for every column j, destroying K.

    K: C-contiguous symmetric buffer (overwritten).  Y: (n, t) right-hand sides
    in K's dtype.  alphas: (t,) penalties; columns sharing a penalty share one
    Cholesky factorisation.  A system that is not positive definite gets a
    warning and the least-squares solution, as scikit-learn does.
    """
    alphas = np.broadcast_to(np.asarray(alphas, dtype=np.float64), (Y.shape[1],))
    diag = K.diagonal().copy()
    out = np.empty(Y.shape, dtype=K.dtype)
    groups = np.unique(alphas)
    for g, alpha in enumerate(groups):
        cols = np.flatnonzero(alphas == alpha)
        if g:
            _restore_factored_triangle(K, diag)
        np.fill_diagonal(K, diag + alpha)
        rhs = Y[:, cols]
        try:
            factor = linalg.cho_factor(K.T, lower=False, overwrite_a=True, check_finite=False)
            out[:, cols] = linalg.cho_solve(factor, rhs, check_finite=False)
        except linalg.LinAlgError:
            warnings.warn(
                "Singular matrix in solving dual problem. Using least-squares solution instead.",
                linalg.LinAlgWarning,
                stacklevel=3,
            )
            _restore_factored_triangle(K, diag + alpha)
            last = g == len(groups) - 1
            out[:, cols] = linalg.lstsq(K.T, rhs, overwrite_a=last, check_finite=False)[0]
    return out


def _check_alpha_array(alpha, name, *, positive=False):
    values = np.atleast_1d(np.asarray(alpha))
    if values.ndim != 1 or values.size == 0:
        raise ValueError(f"{name} must be a non-empty scalar or 1-D array, "
                         f"got shape {values.shape}")
    if values.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be real numbers, got dtype {values.dtype}")
    values = values.astype(np.float64)
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name} must be finite, got {alpha!r}")
    if positive and np.any(values <= 0):
        raise ValueError(f"{name} must be > 0, got {alpha!r}")
    if np.any(values < 0):
        raise ValueError(f"{name} must be >= 0, got {alpha!r}")
    return values


class _KernelRegressorBase(MultiOutputMixin, RegressorMixin, BaseEstimator):
    def _validate_fit(self, X, y, sample_weight):
        check_kernel_param(self.kernel)
        check_n_threads(self.n_threads)
        X, y = validate_data(self, X, y, dtype=[np.float64, np.float32], multi_output=True,
                             y_numeric=True)
        if self._precomputed and X.shape[0] != X.shape[1]:
            raise ValueError(f"X must be a square kernel matrix for kernel='precomputed', "
                             f"got shape {X.shape}")
        sw = None
        if sample_weight is not None:
            sw = _check_sample_weight(sample_weight, X, dtype=np.float64, ensure_non_negative=True)
        return X, y, sw

    @property
    def _precomputed(self):
        return isinstance(self.kernel, str) and self.kernel == "precomputed"

    def _gram(self, X, dtype):
        return gram_buffer(X, kernel=self.kernel, gamma=self.gamma, degree=self.degree,
                           coef0=self.coef0, kernel_params=self.kernel_params,
                           n_threads=self.n_threads, dtype=dtype)

    @limits_blas
    def predict(self, X):
        """Predictions k(X, X_fit_) @ dual_coef_.

        For kernel="precomputed", X is the cross-kernel k(X_test, X_train).
        """
        check_is_fitted(self, "dual_coef_")
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        K = kernel_gram(X, self.X_fit_, kernel=self.kernel, gamma=self.gamma, degree=self.degree,
                        coef0=self.coef0, kernel_params=self.kernel_params,
                        n_threads=self.n_threads)
        return K @ self.dual_coef_.astype(K.dtype, copy=False)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = isinstance(self.kernel, str) and self.kernel == "precomputed"
        return tags


class KernelRidge(_KernelRegressorBase):
    """Kernel ridge regression, a drop-in for ``sklearn.kernel_ridge.KernelRidge``.

    Solves (K + alpha I) c = y for the dual coefficients c (``dual_coef_``),
    with sample weights w as scikit-learn does: (S K S + alpha I) c~ = S y,
    c = S c~, S = diag(sqrt(w)).  ``alpha`` is a scalar or one value per
    target.  The Gram matrix is computed by fastkern's Cython kernels into one
    buffer, which is weighted, shifted and Cholesky-factored in place; if the
    shifted matrix is not positive definite a warning is issued and the
    least-squares solution is used.  Predictions use the cross-Gram
    k(X, X_fit_).  float32 input is fitted in float32.

    Parameters: alpha, kernel (string, "precomputed", fastkern kernel object or
    callable), gamma, degree, coef0, kernel_params as scikit-learn;
    n_threads (None = OpenMP default) for the Gram computations.

    Attributes: dual_coef_ ((n_samples,) or (n_samples, n_targets)), X_fit_,
    n_features_in_ (and feature_names_in_ for DataFrames).
    """

    def __init__(self, alpha=1, *, kernel="linear", gamma=None, degree=3, coef0=1,
                 kernel_params=None, n_threads=None):
        self.alpha = alpha
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.n_threads = n_threads

    @limits_blas
    def fit(self, X, y, sample_weight=None):
        alpha = _check_alpha_array(self.alpha, "alpha")
        X, y, sw = self._validate_fit(X, y, sample_weight)
        ravel = y.ndim == 1
        Y = y.reshape(-1, 1) if ravel else y
        if alpha.size not in (1, Y.shape[1]):
            raise ValueError(f"alpha has {alpha.size} values but y has {Y.shape[1]} targets")
        K = self._gram(X, X.dtype)
        Y = np.array(Y, dtype=K.dtype, order="C", copy=True)
        if sw is not None:
            s = np.sqrt(sw).astype(K.dtype)
            K *= s[:, None]
            K *= s[None, :]
            Y *= s[:, None]
        coef = solve_shifted_in_place(K, Y, alpha)
        del K
        if sw is not None:
            coef *= s[:, None]
        self.dual_coef_ = coef.ravel() if ravel else coef
        self.X_fit_ = X
        return self


class KernelRidgeCV(_KernelRegressorBase):
    """Kernel ridge regression with alpha chosen by exact leave-one-out CV.

    One symmetric eigendecomposition K = U diag(l) U^T (in place on the Gram
    buffer) serves every alpha: the dual coefficients are
    c = U diag(1 / (l + alpha)) U^T y and G = (K + alpha I)^-1 has diagonal
    G_ii = sum_j U_ij^2 / (l_j + alpha), so the leave-one-out residual of
    sample i, y_i - f_{-i}(x_i), is exactly c_i / G_ii (no refits).  With
    sample weights w the problem is the weighted one of ``KernelRidge``;
    the residual is c~_i / (G~_ii sqrt(w_i)) on the weighted system and
    alpha minimises the w-weighted mean squared residual.  Weights must be
    positive.

    Parameters: alphas (non-empty, > 0), kernel, gamma, degree, coef0,
    kernel_params as ``KernelRidge``; n_threads; memory_budget (bytes, None =
    half the available RAM) picks the fastest LAPACK eigensolver that fits:
    divide-and-conquer (syevd, 2 n^2 extra workspace) when three Gram matrices
    fit, else MRRR (syevr, a second n x n for the eigenvectors) when two fit,
    else the QR algorithm (syev) in place with O(n) workspace.  Indicative
    times at n=3000 on the 2-core dev machine: syevd 5.7 s, syevr 14 s,
    syev 24 s.

    Attributes:
    alpha_ : the selected alpha (the first of any ties).
    best_score_ : negative mean squared leave-one-out error at alpha_
        (averaged over samples and targets; scikit-learn's RidgeCV convention).
    loo_errors_ : squared leave-one-out residuals, shape (n_samples, n_alphas)
        for 1-D y and (n_samples, n_targets, n_alphas) for 2-D y (the layout of
        RidgeCV's ``cv_results_``).
    dual_coef_, X_fit_, n_features_in_ : as ``KernelRidge`` fitted with alpha_.
    """

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

    @limits_blas
    def fit(self, X, y, sample_weight=None):
        alphas = _check_alpha_array(self.alphas, "alphas", positive=True)
        budget = memory_budget_bytes(self.memory_budget)
        X, y, sw = self._validate_fit(X, y, sample_weight)
        if sw is not None and np.any(sw <= 0):
            raise ValueError("sample_weight must be positive for KernelRidgeCV: a zero-weight "
                             "sample has no closed-form leave-one-out residual")
        ravel = y.ndim == 1
        Y = np.array(y.reshape(-1, 1) if ravel else y, dtype=np.float64, order="C", copy=True)
        n, t = Y.shape
        K = self._gram(X, X.dtype)
        s = None
        if sw is not None:
            s = np.sqrt(sw)
            K *= s.astype(K.dtype)[:, None]
            K *= s.astype(K.dtype)[None, :]
            Y *= s[:, None]
        # The fastest LAPACK driver whose peak memory fits the budget.  K.T is
        # K's memory in Fortran order: syevd and syev overwrite it with the
        # eigenvectors; syevr returns them in a second n x n array.
        if 3 * K.nbytes <= budget:
            driver = "evd"
        elif 2 * K.nbytes <= budget:
            driver = "evr"
        else:
            driver = "ev"
        lam, U = linalg.eigh(K.T, overwrite_a=True, driver=driver, check_finite=False)
        self._eigen_driver = driver
        lam = lam.astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            D = 1.0 / (lam[:, None] + alphas[None, :])                    # (n, A)
            Q = (U.T @ Y.astype(U.dtype)).astype(np.float64)              # (n, t)
            coef = (U @ (Q[:, :, None] * D[:, None, :]).reshape(n, -1).astype(U.dtype))
            coef = coef.astype(np.float64).reshape(n, t, alphas.size)     # c~ per target, alpha
            G = np.empty((n, alphas.size))
            for r0 in range(0, n, _BLOCK_ROWS):
                rows = np.asarray(U[r0:r0 + _BLOCK_ROWS], dtype=np.float64)
                G[r0:r0 + _BLOCK_ROWS] = (rows * rows) @ D
            resid = coef / G[:, None, :]
            if s is not None:
                resid /= s[:, None, None]
            sq = resid ** 2
            w = np.ones(n) if sw is None else sw
            crit = np.einsum("i,ita->a", w, sq) / (w.sum() * t)
        crit = np.where(np.isfinite(crit), crit, np.inf)
        best = int(np.argmin(crit))
        del U, K
        dual = coef[:, :, best]
        if s is not None:
            dual = dual * s[:, None]
        dual = dual.astype(X.dtype, copy=False)
        self.alpha_ = float(alphas[best])
        self.best_score_ = float(-crit[best])
        self.loo_errors_ = sq[:, 0, :] if ravel else sq
        self.dual_coef_ = dual.ravel() if ravel else dual
        self.X_fit_ = X
        return self
