"""Sliced inverse regression: linear SIR (Li 1991) and kernel SIR.

Both estimators slice the response y and look for the directions along which
the slice means of x (linear) or of phi(x) (kernel) vary most, relative to the
total variance.  Slicing rule, shared by both (``slicing="auto"``):

* y of bool, string or object dtype, or of integer dtype with at most
  ``n_slices`` distinct values, is categorical: one slice per class;
* any other y (float, or integer with more than ``n_slices`` values) is cut
  into ``n_slices`` slices of (near) equal count by its order statistics;
  tied values always fall in the same slice, so heavy ties can give fewer
  slices.

``slicing="classes"`` or ``slicing="quantile"`` overrides the rule.
"""
import warnings
from numbers import Integral, Real

import numpy as np
from scipy import linalg, sparse
from sklearn.base import (BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                          _fit_context)
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from fastkern._eigen import class_ridge_solve, column_signs
from fastkern._kernel_api import (KernelSpec, is_precomputed, kernel_constraints,
                                  resolve_gamma, validate_input)
from fastkern._operator import cross_kernel_times
from fastkern._linalg import serial_blas
from fastkern._threads import blas_for, interruptible, limits_blas
from fastkern._validation import (CachedParamValidation, check_int, check_n_threads, check_real,
                                  n_threads_constraint, scale_exponent, seeded_random_state)
from fastkern.centering import center_gram

__all__ = ["SlicedInverseRegression", "KernelSIR"]

_SLICINGS = ("auto", "quantile", "classes")
_MIN_EIGENVALUE = 1e-10

def _slice_labels(y, n_slices, slicing):
    """Slice index (0..H-1) of every sample, and the slice sizes n_h.

    See the module docstring for the rule.  Raises if fewer than two slices
    result (constant y or a single class).
    """
    if slicing not in _SLICINGS:
        raise ValueError(f"slicing must be one of {_SLICINGS}, got {slicing!r}")
    n_slices = check_int(n_slices, "n_slices", 2)
    y = np.asarray(y)
    n = y.shape[0]
    kind = y.dtype.kind
    if slicing == "auto":
        if kind in "bOSU":
            slicing = "classes"
        elif kind in "iu" and np.unique(y).size <= n_slices:
            slicing = "classes"
        else:
            slicing = "quantile"
    if slicing == "classes":
        _, labels = np.unique(y, return_inverse=True)
    else:
        if kind not in "biuf":
            raise TypeError(f"slicing='quantile' needs a numeric y, got dtype {y.dtype}")
        if n_slices > n:
            raise ValueError(f"n_slices={n_slices} must be <= n_samples={n}")
        y_sorted = np.sort(y)
        cuts = y_sorted[(np.arange(1, n_slices) * n) // n_slices]
        # searchsorted(side="right") puts every tie of a cut value in one slice;
        # np.unique then drops slices emptied by ties.
        _, labels = np.unique(np.searchsorted(cuts, y, side="right"), return_inverse=True)
    labels = labels.reshape(-1)
    counts = np.bincount(labels)
    if counts.size < 2:
        raise ValueError(
            "y has a single class or a constant value: sliced inverse regression "
            "needs at least 2 slices"
        )
    return labels, counts


def _slice_sums(Z, labels, n_slices):
    """Row sums of Z within each slice: an (n_slices, Z.shape[1]) array."""
    out = np.zeros((n_slices, Z.shape[1]))
    np.add.at(out, labels, Z)
    return out


def _pad(lam, coef, k):
    """Zero-fill eigenvalues and coefficient columns up to k components."""
    missing = k - coef.shape[1]
    if missing > 0:
        coef = np.hstack([coef, np.zeros((coef.shape[0], missing))])
        lam = np.concatenate([lam, np.zeros(missing)])
    return lam, coef


def _n_identifiable(lam, norm2, n_slices):
    """Number of leading KernelSIR components that carry information.

    At most n_slices - 1 (the centred slice means span that many dimensions);
    a component whose eigenvalue is below _MIN_EIGENVALUE (it explains less
    than that share of the variance) or whose feature-space norm rounds to
    zero or below is only rounding noise.
    """
    ok = (lam > _MIN_EIGENVALUE) & (norm2 > 0)
    ok[n_slices - 1:] = False
    return int(np.argmin(ok)) if not ok.all() else ok.size


def _dense_if_precomputed(X, precomputed):
    # A precomputed kernel is indexed by rows and columns and factorised: dense.
    return X.toarray() if precomputed and sparse.issparse(X) else X


_SIR_CONSTRAINTS = {
    "n_slices": [Interval(Integral, 2, None, closed="left")],
    "slicing": [StrOptions(set(_SLICINGS))],
    "n_threads": n_threads_constraint(),
}


class SlicedInverseRegression(CachedParamValidation, ClassNamePrefixFeaturesOutMixin,
                              TransformerMixin, BaseEstimator):
    """Linear sliced inverse regression (Li, 1991).

    With the sample covariance Sigma = Xc^T Xc / n of the centred data Xc, the
    slices I_h of y (see the module docstring) with proportions p_h = n_h / n
    and slice means m_h, SIR solves

        sum_h p_h (m_h - xbar)(m_h - xbar)^T b = lambda Sigma b

    by whitening: Sigma = U diag(s) U^T, z = diag(s)^{-1/2} U^T (x - xbar)
    (directions of zero variance, s <= max(s) * max(n, p) * eps, are dropped),
    then the eigenvectors eta of V = sum_h p_h zbar_h zbar_h^T are mapped back,
    b = U diag(s)^{-1/2} eta, and scaled to unit norm.  The eigenvalues lie in
    [0, 1]: the share of the variance of b^T x explained by the slice means.
    At most (number of slices - 1) of them are non-zero; the remaining
    directions are an arbitrary basis of the rest of the space.

    Parameters
    ----------
    n_directions : int, default=2
        Number of e.d.r. directions kept (at most n_features).
    n_slices : int, default=10
        Number of equal-count slices of a continuous y (>= 2, <= n_samples).
    slicing : {"auto", "quantile", "classes"}, default="auto"
        How y is sliced; see the module docstring.
    n_threads : int, default=None
        BLAS/LAPACK threads used by fit and transform (None: the BLAS default).

    Attributes
    ----------
    directions_ : ndarray of shape (n_features, n_directions)
        Unit-norm e.d.r. directions, by decreasing eigenvalue.
    eigenvalues_ : ndarray of shape (n_directions,)
        The eigenvalues, in [0, 1], in decreasing order.
    mean_ : ndarray of shape (n_features,)
        The training mean of X.
    n_slices_ : int
        Number of slices actually used.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features seen during fit, when X had string column names.

    See Also
    --------
    KernelSIR : Sliced inverse regression in the feature space of a kernel.
    """

    _parameter_constraints: dict = {
        "n_directions": [Interval(Integral, 1, None, closed="left")],
        **_SIR_CONSTRAINTS,
    }

    def __init__(self, n_directions=2, n_slices=10, slicing="auto", n_threads=None):
        self.n_directions = n_directions
        self.n_slices = n_slices
        self.slicing = slicing
        self.n_threads = n_threads

    @_fit_context(prefer_skip_nested_validation=True)
    @limits_blas
    def fit(self, X, y):
        """Fit the e.d.r. directions.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data (at least 2 samples); sparse X is never centred (densified).
        y : array-like of shape (n_samples,)
            The response, sliced as the module docstring says.

        Returns
        -------
        self : SlicedInverseRegression
            The fitted estimator.

        Raises
        ------
        ValueError
            If n_directions > n_features, X has zero variance, or y gives fewer than
            two slices.
        """
        X, y = validate_data(self, X, y, accept_sparse=["csr", "csc"], dtype=np.float64,
                             ensure_min_samples=2, y_numeric=False)
        n, p = X.shape
        k = check_int(self.n_directions, "n_directions", 1)
        if k > p:
            raise ValueError(f"n_directions={k} must be <= n_features={p}")
        n_threads = check_n_threads(self.n_threads)
        labels, counts = _slice_labels(y, self.n_slices, self.slicing)
        with blas_for(n_threads, n):
            self.mean_ = np.asarray(X.mean(axis=0)).ravel()
            # X 2^-e where X's squares would leave float64 (X * 1e200: an inf
            # covariance, X * 1e-200: a zero one); the directions do not
            # depend on X's scale.
            e = scale_exponent(X)
            mean = np.ldexp(self.mean_, -e)
            if sparse.issparse(X):
                if e:
                    X = X.copy()
                    X.data = np.ldexp(X.data, -e)
                # Centring would densify X: the covariance is X^T X / n - m m^T.
                cov = (X.T @ X).toarray() / n - np.outer(mean, mean)
            else:
                Xc = X - self.mean_
                if e:
                    np.ldexp(Xc, -e, out=Xc)
                cov = Xc.T @ Xc / n
            s, U = linalg.eigh(cov, check_finite=False)
            if s[-1] <= 0:
                raise ValueError("X has zero variance: every sample is the same")
            keep = s > s[-1] * max(n, p) * np.finfo(np.float64).eps
            W = U[:, keep] / np.sqrt(s[keep])
            XcW = X @ W - mean @ W if sparse.issparse(X) else Xc @ W
            zbar = _slice_sums(XcW, labels, counts.size) / counts[:, None]
            root = np.sqrt(counts / n)[:, None] * zbar
            lam, eta = linalg.eigh(root.T @ root, check_finite=False)
            lam, eta = lam[::-1], eta[:, ::-1]
            B = W @ eta
            # Directions without variance in X cannot be whitened; they come last
            # (eigenvalue 0) so that n_directions up to n_features is always valid.
            B = np.hstack([B, U[:, ~keep]])[:, :k]
            lam = np.concatenate([lam, np.zeros(p - keep.sum())])[:k]
        B /= np.linalg.norm(B, axis=0)
        self.directions_ = B * column_signs(B)
        self.eigenvalues_ = np.clip(lam, 0.0, 1.0)
        self.n_slices_ = int(counts.size)
        return self

    @property
    def _n_features_out(self):
        return self.directions_.shape[1]

    @limits_blas
    def transform(self, X):
        """Project X on the e.d.r. directions.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The data.

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_directions)
            (X - mean_) @ directions_.
        """
        check_is_fitted(self, "directions_")
        X = validate_data(self, X, accept_sparse=["csr", "csc"], dtype=np.float64, reset=False)
        with blas_for(check_n_threads(self.n_threads), X.shape[0]):
            return np.asarray(X @ self.directions_) - self.mean_ @ self.directions_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.input_tags.sparse = True
        return tags


class KernelSIR(CachedParamValidation, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                BaseEstimator):
    """Kernel sliced inverse regression (SIR in the feature space of a kernel).

    Feature space problem.  With phi~(x) = phi(x) - mu the feature map centred
    at the training mean mu, Sigma_zz = (1/n) sum_i phi~(x_i) phi~(x_i)^T and
    Sigma_wz = sum_h p_h (slice mean of phi~)(slice mean of phi~)^T, KernelSIR
    maximises beta^T Sigma_wz beta / beta^T (Sigma_zz + eps I) beta, with the
    ridge eps = regularization * trace(Sigma_zz): `regularization` is relative
    to the total feature-space variance, so it does not depend on the scale of
    the kernel.  Each direction beta has unit norm in feature space, and a
    point is projected as <beta, phi(x) - mu>.

    Full problem (n_basis=None).  beta = sum_i alpha_i phi~(x_i); with the
    double-centred Gram K~ and E_H = sum_h 1_h 1_h^T / n_h = M M^T,
    M = [1_h / sqrt(n_h)], the problem is the generalized symmetric one

        K~ E_H K~ alpha = lambda (K~ K~ + c K~) alpha,   c = regularization * trace(K~)

    (the ridge eps I of Sigma_zz becomes c K~ with c = n eps).  Because E_H has
    rank H it reduces exactly to an H x H problem: with Z = (K~ + c I)^{-1} H M
    (H M = M minus its column means), C = (HM)^T K~ Z = (HM)^T HM - c (HM)^T Z,
    the eigenpairs C w = lambda w give alpha = Z w.  Cost: one n x n Gram, its
    in-place centring and Cholesky factorisation (O(n^3 / 3)), no other n x n
    array.  alpha is scaled so that alpha^T K~ alpha = 1.

    Reduced problem (n_basis=m).  beta = sum_j a_j phi(b_j) over m basis points
    drawn at random within each slice in proportion to its size.  With
    Kb = K(X, B) minus its column means (the training mean of each basis column,
    which is exactly centring phi at mu) and K(B, B) = V diag(t) V^T, the
    centred Nystroem features F = Kb V diag(t)^{-1/2} (n x r, t above
    max(t) * m * eps) turn the problem into ridge SIR on F:

        F^T M M^T F u = lambda (F^T F + c I) u,   c = regularization * trace(F^T F)

    (trace(F^T F) is the Nystroem estimate of trace(K~); with m = n both
    problems are the same one).  Solved by Cholesky whitening of the r x r
    right side; a = V diag(t)^{-1/2} u with ||u|| = 1 = ||beta||.  Memory is
    O(n m): nothing n x n is ever formed.

    In both cases the eigenvalues lie in [0, 1) and at most min(H - 1, rank)
    are non-zero (H = number of slices; phi~ sums to zero).  Components beyond
    that, or with an eigenvalue below 1e-10, carry no information: their
    coefficients and eigenvalues are set to zero (with a warning).

    Accuracy.  The condition number of K~ + c I (full) or F^T F + c I
    (reduced) is at most 1 + 1 / regularization, so results carry a relative
    error of about 1e-16 / regularization; keep regularization above ~1e-8.
    Categorical y (one slice per class) makes this kernel Fisher discriminant
    analysis, with eigenvalues gamma / (1 + gamma) of the Fisher ratios.

    transform(X) = (K(X, X_fit_) - K_fit_rows_) @ dual_coef_, which for the
    full problem is the KernelCenterer test rule applied to the cross-Gram
    (dual_coef_ columns sum to zero, so the row-mean terms of that rule vanish).

    Defaults.  gamma=None (1 / n_features) and regularization=1e-3 were
    chosen on z-scored data by a leave-one-out grid on the wine data (1-NN on
    the 2-D projection, scaler and KernelSIR refitted in every fold): accuracy
    0.978-0.989 at gamma=None for regularization 1e-5 ... 1e-1, and >= 0.972
    over gamma in 0.01 ... 0.3; 0.989 at the defaults.  On the seed example
    y = sin(x1) + noise (x uniform on [0, 2 pi]^5, n=1000) the defaults give a
    held-out |Spearman| of 0.93-0.94 between the first component and sin(x1).

    Parameters
    ----------
    n_components : int, default=2
        Number of directions kept.
    kernel : str, Kernel or callable, default="rbf"
        Any kernel accepted by fastkern's estimators, including "precomputed"
        (X is then the n x n training Gram, and transform takes the
        n_test x n_train cross-Gram).
    gamma : float or {"scale", "median"}, default=None
        Kernel coefficient, as in scikit-learn's KernelPCA (None: the
        kernel's default, 1 / n_features for "rbf"); "scale" means
        1 / (n_features X.var()) and "median" the median heuristic
        (``fastkern.estimate_gamma``), resolved on the training X into gamma_.
    degree : float, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1
        Constant term of the polynomial and sigmoid kernels.
    kernel_params : dict, default=None
        Parameters of a callable kernel, passed as keyword arguments.
    n_slices : int, default=10
        Slices of a continuous y (>= 2, <= n_samples).
    slicing : {"auto", "quantile", "classes"}, default="auto"
        How y is sliced; see the module docstring.
    regularization : float, default=1e-3
        Ridge relative to the total feature-space variance (see above).
    n_basis : int or None, default=None
        None: full problem; m (1 <= m <= n_samples): reduced kernel on m
        basis points.
    basis : {"random", "incomplete_cholesky"}, default="random"
        How the reduced problem's basis points are chosen.  "random": n_basis
        rows drawn within each slice in proportion to its size.
        "incomplete_cholesky": the pivots of ``fastkern.incomplete_cholesky(X,
        tol=ichol_tol, max_rank=n_basis)`` (n_basis is then a largest rank,
        values above n_samples mean n_samples; None: as many as tol needs;
        components beyond the rank reached are zero; dense X, not
        "precomputed"), deterministic; their Nystroem
        features span the same space as the factor G (K(X, B) K(B, B)^-1 K(B, X)
        = G G^T), so this is SIR on the incomplete Cholesky approximation of K.
    ichol_tol : float, default=1e-6
        The ``tol`` (>= 0) of the incomplete Cholesky basis (the largest
        residual diagonal).
    random_state : int, RandomState instance or None, default=None
        Draws the basis points when n_basis is set and basis="random".
    n_threads : int, default=None
        OpenMP threads for the Gram matrices, centring and factorisation
        (None: the default).  BLAS and LAPACK run on one thread, so that the
        results are the same bits for any n_threads.

    Attributes
    ----------
    dual_coef_ : ndarray of shape (n_basis, n_components)
        Coefficients of the directions on the basis points.
    eigenvalues_ : ndarray of shape (n_components,)
        The eigenvalues, in [0, 1), in decreasing order.
    X_fit_ : ndarray of shape (n_basis, n_features)
        The basis points (all training samples when n_basis is None); with
        kernel="precomputed", the basis columns' indices instead.
    basis_indices_ : ndarray of shape (n_basis,)
        Rows of the training X used as basis points.
    K_fit_rows_ : ndarray of shape (n_basis,)
        Training means of the columns of K(X_train, X_fit_).
    n_slices_ : int
        Number of slices actually used.
    gamma_ : float or None
        The gamma used (gamma resolved at fit; None: the kernel's default).
    kernel_spec_ : fastkern._kernel_api.KernelSpec
        The kernel as fitted (kernel, the resolved gamma, degree, coef0,
        kernel_params), built once at fit and evaluated by every later Gram.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features seen during fit, when X had string column names.

    See Also
    --------
    SlicedInverseRegression : Linear sliced inverse regression.
    KernelFDA : Kernel Fisher discriminant analysis, with a classifier.

    Examples
    --------
    >>> import numpy as np
    >>> from fastkern import KernelSIR
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(0, 2 * np.pi, size=(200, 3))
    >>> y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=200)
    >>> KernelSIR(n_components=1).fit_transform(X, y).shape
    (200, 1)
    """

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        **kernel_constraints(),
        **_SIR_CONSTRAINTS,
        "regularization": [Interval(Real, 0, None, closed="neither")],
        "n_basis": [Interval(Integral, 1, None, closed="left"), None],
        "basis": [StrOptions({"random", "incomplete_cholesky"})],
        "ichol_tol": [Interval(Real, 0, None, closed="left")],
        "random_state": ["random_state"],
    }

    def __init__(self, n_components=2, kernel="rbf", gamma=None, degree=3, coef0=1,
                 kernel_params=None, n_slices=10, slicing="auto", regularization=1e-3,
                 n_basis=None, basis="random", ichol_tol=1e-6, random_state=None,
                 n_threads=None):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.n_slices = n_slices
        self.slicing = slicing
        self.regularization = regularization
        self.n_basis = n_basis
        self.basis = basis
        self.ichol_tol = ichol_tol
        self.random_state = random_state
        self.n_threads = n_threads

    def _precomputed(self):
        return is_precomputed(self.kernel)

    def _gram(self, X, Y=None, out=None):
        return self.kernel_spec_.gram(X, Y, out=out, n_threads=self.n_threads)

    @_fit_context(prefer_skip_nested_validation=True)
    @limits_blas
    def fit(self, X, y):
        """Fit the kernel SIR directions.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features) or list
            Training data (at least 2 samples), the training Gram with
            kernel="precomputed", or a list of strings, sets or graphs for the
            kernels of ``fastkern.structured``.
        y : array-like of shape (n_samples,)
            The response, sliced as the module docstring says.

        Returns
        -------
        self : KernelSIR
            The fitted estimator.
        """
        X, y = validate_input(self, X, y, accept_sparse=["csr", "csc"], dtype=np.float64,
                              ensure_min_samples=2, y_numeric=False)
        n = X.shape[0]
        precomputed = self._precomputed()
        X = _dense_if_precomputed(X, precomputed)
        if precomputed and X.shape[0] != X.shape[1]:
            raise ValueError(
                f"X must be a square kernel matrix when kernel='precomputed', got shape {X.shape}"
            )
        # gamma="scale"/"median" resolved once, on the training X.
        self.gamma_ = resolve_gamma(self.gamma, X, self.kernel)
        self.kernel_spec_ = KernelSpec.of(self, gamma=self.gamma_)
        k = check_int(self.n_components, "n_components", 1)
        if k > n:
            raise ValueError(f"n_components={k} must be <= n_samples={n}")
        reg = check_real(self.regularization, "regularization", low=0.0, low_inclusive=False)
        n_threads = check_n_threads(self.n_threads)
        if self.n_basis is not None and self.basis == "random":
            m = check_int(self.n_basis, "n_basis", 1)
            if m > n:
                raise ValueError(f"n_basis={m} must be <= n_samples={n}")
            if k > m:
                raise ValueError(f"n_components={k} must be <= n_basis={m}")
        labels, counts = _slice_labels(y, self.n_slices, self.slicing)
        with serial_blas():
            if self.basis == "incomplete_cholesky":
                basis = self._ichol_basis(X, precomputed, n_threads)
                lam, coef, col_means, rank = self._fit_reduced(X, basis, labels, counts, reg, k)
            elif self.n_basis is None:
                basis = np.arange(n)
                lam, coef, col_means, rank = self._fit_full(X, labels, counts, reg, k)
            else:
                basis = self._draw_basis(labels, counts, m)
                lam, coef, col_means, rank = self._fit_reduced(X, basis, labels, counts, reg, k)
        if k > rank:
            warnings.warn(
                f"only {rank} KernelSIR component(s) are identifiable from {counts.size} "
                f"slices; the other {k - rank} are set to zero (H slices identify at "
                "most H - 1; fewer means eigenvalues below 1e-10 or lost to rounding, "
                "in which case a larger regularization helps)",
                UserWarning, stacklevel=2,
            )
            coef[:, rank:] = 0.0
            lam[rank:] = 0.0
        self.dual_coef_ = coef * column_signs(coef)
        self.eigenvalues_ = np.clip(lam, 0.0, 1.0)
        self.K_fit_rows_ = col_means
        self.basis_indices_ = basis
        # For a precomputed kernel the basis is a set of columns, not of points.
        self.X_fit_ = basis.copy() if precomputed else X[basis]
        self.n_slices_ = int(counts.size)
        return self

    def _ichol_basis(self, X, precomputed, n_threads):
        """The incomplete Cholesky pivots, sorted, as the reduced problem's basis."""
        from fastkern.lowrank import factor

        if precomputed:
            raise ValueError("basis='incomplete_cholesky' evaluates the kernel of X: it "
                             "cannot use kernel='precomputed'")
        if sparse.issparse(X):
            raise TypeError("basis='incomplete_cholesky' needs a dense X, got a sparse matrix")
        res = factor(X, self.kernel_spec_, tol=self.ichol_tol, max_rank=self.n_basis,
                     n_threads=n_threads)
        if res.pivots.size == 0:
            raise ValueError("the kernel matrix is zero: all samples coincide in feature space")
        return np.sort(res.pivots)

    def _draw_basis(self, labels, counts, m):
        """m training rows, each slice contributing in proportion to its size."""
        n = labels.shape[0]
        quota = counts * m / n
        take = np.floor(quota).astype(np.intp)
        # Largest remainders get the leftover points (never more than n_h: quota <= n_h).
        extra = np.argsort(-(quota - take), kind="stable")[: m - take.sum()]
        take[extra] += 1
        order = np.argsort(labels, kind="stable")
        starts = np.concatenate([[0], np.cumsum(counts)])
        with seeded_random_state(self.random_state) as rng:
            picked = [rng.choice(order[starts[h]:starts[h + 1]], size=take[h], replace=False)
                      for h in range(counts.size)]
        return np.sort(np.concatenate(picked))

    def _centred_gram(self, X):
        n = X.shape[0]
        K = np.empty((n, n))
        if self._precomputed():
            np.copyto(K, X)
        else:
            self._gram(X, out=K)
        col_means = K.mean(axis=0)
        center_gram(K, n_threads=self.n_threads)
        return K, col_means

    def _fit_full(self, X, labels, counts, reg, k):
        K, col_means = self._centred_gram(X)
        c, HM, Z = class_ridge_solve(K, labels, counts, reg, "the centred kernel matrix is "
                                     "zero: all samples coincide in feature space")
        del K
        C = HM.T @ HM - c * (HM.T @ Z)
        lam, Wc = linalg.eigh((C + C.T) / 2, check_finite=False)
        lam, Wc = lam[::-1][:k], Wc[:, ::-1][:, :k]
        alpha = Z @ Wc
        # alpha^T K~ alpha with K~ Z = HM - c Z.
        norm2 = np.einsum("ij,ij->j", alpha, HM @ Wc - c * alpha)
        rank = _n_identifiable(lam, norm2, counts.size)
        alpha[:, :rank] /= np.sqrt(norm2[:rank])
        alpha -= alpha.mean(axis=0)
        lam, alpha = _pad(lam, alpha, k)
        return lam, alpha, col_means, rank

    def _fit_reduced(self, X, basis, labels, counts, reg, k):
        if self._precomputed():
            Kb = np.ascontiguousarray(X[:, basis])
            Kbb = X[np.ix_(basis, basis)]
        else:
            Xb = X[basis]
            Kb = self._gram(X, Xb, out=np.empty((X.shape[0], basis.size)))
            Kbb = self._gram(Xb)
        col_means = Kb.mean(axis=0)
        Kb -= col_means
        # numpy's linalg releases the GIL (scipy's does not): in a worker
        # thread, Ctrl-C is seen during the basis-size factorisations.
        t, V = interruptible(np.linalg.eigh, Kbb)
        if not t[-1] > 0:
            raise ValueError("the kernel matrix of the basis points is zero")
        keep = t > t[-1] * basis.size * np.finfo(np.float64).eps
        W = V[:, keep] / np.sqrt(t[keep])
        F = Kb @ W
        del Kb
        S = F.T @ F
        trace = np.trace(S)
        if not trace > 0:
            raise ValueError("the centred kernel matrix is zero: all samples coincide "
                             "in feature space")
        S.flat[:: S.shape[0] + 1] += reg * trace
        L = interruptible(np.linalg.cholesky, S)
        R = (_slice_sums(F, labels, counts.size) / np.sqrt(counts)[:, None]).T
        Y = linalg.solve_triangular(L, R, lower=True, check_finite=False)
        lam, Wc = linalg.eigh(Y.T @ Y, check_finite=False)
        lam, Wc = lam[::-1][:k], Wc[:, ::-1][:, :k]
        u = linalg.solve_triangular(L, Y @ Wc, lower=True, trans="T", check_finite=False)
        norm2 = np.einsum("ij,ij->j", u, u)
        rank = _n_identifiable(lam, norm2, counts.size)
        u[:, :rank] /= np.sqrt(norm2[:rank])
        lam, coef = _pad(lam, W @ u, k)
        return lam, coef, col_means, rank

    @property
    def _n_features_out(self):
        return self.dual_coef_.shape[1]

    @limits_blas
    def transform(self, X):
        """Project X on the kernel SIR directions.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features) or list
            The data, or the cross-Gram K(X, X_train) with kernel="precomputed".

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_components)
            (K(X, X_fit_) - K_fit_rows_) @ dual_coef_.
        """
        check_is_fitted(self, "dual_coef_")
        X = validate_input(self, X, accept_sparse=["csr", "csc"], dtype=np.float64, reset=False)
        X = _dense_if_precomputed(X, self._precomputed())
        with serial_blas():
            if self._precomputed():
                Kt_coef = X[:, self.X_fit_] @ self.dual_coef_
            else:
                Kt_coef = cross_kernel_times(self.kernel_spec_, X, self.X_fit_, self.dual_coef_,
                                             n_threads=self.n_threads)
            return Kt_coef - self.K_fit_rows_ @ self.dual_coef_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.input_tags.pairwise = self._precomputed()
        # The incomplete Cholesky basis is computed from dense X only.
        tags.input_tags.sparse = self.basis != "incomplete_cholesky"
        return tags
