"""Kernel Fisher discriminant analysis (multiclass, regularised): ``KernelFDA``.

Mika, Raetsch, Weston, Schoelkopf and Mueller (1999) in its multiclass form:
the discriminant directions w = sum_i a_i phi~(x_i) maximise the Fisher ratio
of between-class to (regularised) within-class scatter in the feature space
of a kernel.  ``KernelFDA`` is both a transformer (projection on the at most
n_classes - 1 discriminant directions) and a classifier (nearest class
centroid in that projection).
"""
import warnings
from numbers import Integral, Real

import numpy as np
from scipy import linalg, sparse
from sklearn.base import (BaseEstimator, ClassifierMixin, ClassNamePrefixFeaturesOutMixin,
                          TransformerMixin, _fit_context)
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from fastkern._eigen import class_ridge_solve, column_signs
from fastkern._kernel_api import (KernelSpec, is_precomputed, kernel_constraints,
                                  resolve_gamma, validate_input)
from fastkern._operator import cross_kernel_times
from fastkern._linalg import serial_blas
from fastkern._threads import interruptible, limits_blas
from fastkern._validation import (CachedParamValidation, check_int, check_real,
                                  n_threads_constraint)
from fastkern.centering import center_gram
from fastkern.lowrank import factor

__all__ = ["KernelFDA"]

# A discriminant direction whose share mu = between / (total + ridge) of the
# variance is below this carries no class information: it is rounding noise
# (the threshold KernelSIR uses for the same quantity).
_MIN_SHARE = 1e-10
# Rows per block when accumulating the low-rank within-class scatter: bounds
# the deviation temporary to _ROW_BLOCK x rank.
_ROW_BLOCK = 2048


def _class_means(Z, labels, counts):
    """Mean of the rows of Z within each class: a (n_classes, Z.shape[1]) array."""
    sums = np.zeros((counts.size, Z.shape[1]))
    np.add.at(sums, labels, Z)
    return sums / counts[:, None]


def _complement_basis(counts):
    """Orthonormal basis (C x (C-1)) of the complement of s = sqrt(counts).

    H Q s = H 1 = 0 for Q = [1_c / sqrt(n_c)], so s is a null direction of
    every C x C matrix of the dense problem and carries no discriminant.
    """
    s = np.sqrt(counts)[:, None]
    q, _ = linalg.qr(s / np.linalg.norm(s), mode="full")
    return q[:, 1:]


def _definite_eigh(A, B):
    """Eigenpairs of A u = lambda B u (B positive definite), ascending, U^T B U = I.

    scipy's eigh(A, B) in numpy's linalg, which releases the GIL (for
    ``interruptible``): with B = L L^T, the standard problem of
    L^-1 A L^-T (symmetrised), whose eigenvectors v give u = L^-T v.
    """
    L = np.linalg.cholesky(B)
    Linv = np.linalg.solve(L, np.eye(L.shape[0]))
    C = Linv @ A @ Linv.T
    lam, V = np.linalg.eigh((C + C.T) / 2)
    return lam, Linv.T @ V


class KernelFDA(CachedParamValidation, ClassNamePrefixFeaturesOutMixin, ClassifierMixin,
                TransformerMixin, BaseEstimator):
    """Kernel Fisher discriminant analysis (multiclass, regularised).

    Scatter matrices.  With phi~(x) = phi(x) - mu the feature map centred at
    the training mean, classes c of sizes n_c (C classes, n samples) and
    class means m_c of phi~, the between-, within- and total scatters are
    S_B = sum_c n_c m_c m_c^T, S_W = sum_i (phi~_i - m_c(i))(phi~_i - m_c(i))^T
    and S_T = S_B + S_W.  KernelFDA maximises

        J(w) = w^T S_B w / w^T (S_W + eps I) w,   eps = regularization * trace(S_T),

    a ridge on the within-class scatter relative to the total feature-space
    variance, so that the result does not depend on the scale of the kernel
    (regularization=1e-3 adds 0.1 % of the total variance to every direction).
    The optimum lies in the span of the phi~_i: w = sum_i a_i phi~(x_i).  With
    the centred Gram K~ = H K H (H = I - 11^T/n), the class-averaging matrix
    L = sum_c 1_c 1_c^T / n_c (L_ij = 1/n_c when i and j are both in class c)
    and J = 11^T / n, the problem in a is Mika et al.'s generalized symmetric
    eigenproblem

        M a = lambda (N + c K~) a,   M = K (L - J) K = K~ L K~,
                                     N = K (I - L) K = K~ (I - L) K~,
                                     c = regularization * trace(K~).

    The ridge is c K~ (w^T w = a^T K~ a, the squared norm of w in feature
    space), not Mika et al.'s c I (which penalises ||a||^2, a quantity that
    depends on how w happens to be expanded): with c K~ the problem is
    exactly regularised LDA in feature space, so that kernel="linear" gives
    scikit-learn's LinearDiscriminantAnalysis as regularization -> 0.

    Dense solver (solver="dense").  M has rank <= C - 1, so the n x n problem
    reduces exactly to a C x C one.  With HQ = H [1_c / sqrt(n_c)] (n x C),
    Z = (K~ + c I)^{-1} HQ and D = c HQ^T Z, the eigenpairs D v = d v with v
    orthogonal to s = (sqrt(n_c))_c give a = Z v, between-class share
    mu = 1 - d (between / (total + ridge)) and Fisher ratio lambda = mu / d.
    Computing d rather than mu keeps lambda accurate when mu is close to 1.
    Cost: one n x n Gram, centred and Cholesky-factorised in place (O(n^3/3)),
    no other n x n array.  The condition number of K~ + c I is at most
    1 + 1 / regularization: results carry a relative error of about
    1e-16 / regularization; keep regularization above ~1e-8.

    Low-rank solver (solver="inchol").  The pivoted incomplete Cholesky
    factor K ~ G G^T (fastkern.incomplete_cholesky, n x r, K never formed)
    gives explicit features g_i, the rows of G; the problem is then
    regularised LDA on the centred g_i: the r x r generalized symmetric
    eigenproblem S_B u = lambda (S_W + c I) u (scipy.linalg.eigh), with
    c = regularization * trace(S_T).  A new point's features are
    g(x) = G_P^{-1} k(x_P, x) (G_P: G's rows at the r pivots, lower
    triangular), so only the pivot points are kept.  Memory O(n r).  With
    every pivot (tol=0, a full-rank kernel) it is the dense problem.

    Scaling.  Each direction is scaled so that the regularised pooled
    within-class variance of its projections, w^T (S_W + eps I) w / n, is 1
    and the directions are uncorrelated with respect to it: the projection is
    whitened with the pooled maximum-likelihood within-class covariance, as
    LinearDiscriminantAnalysis's transform (scikit-learn 1.9).  Directions come by decreasing
    Fisher ratio; at most min(C - 1, rank of K~) are identifiable, and a
    direction with mu below 1e-10 is dropped as rounding noise.

    Prediction rule.  ``predict`` assigns x to the class whose centroid (mean
    projection of its training samples) is nearest in Euclidean distance in
    the space of all identifiable discriminant directions, whatever
    n_components (which only limits ``transform``); ties go to the first
    class in ``classes_``.  Because the projection is whitened, this is
    LinearDiscriminantAnalysis's rule with equal class priors
    (priors=uniform); the training class proportions are not used.
    ``decision_function`` returns the score -||z(x) - centroid_c||^2 / 2 per
    class (its difference between the two classes when there are two, > 0
    favouring classes_[1]); it is a score, not a log-probability.  There is
    no ``predict_proba``: the Gaussian model behind LDA's probabilities does
    not describe kernel projections, whose within-class spread on the
    training data is shrunk by the fit itself, so no honest probability can
    be read off these distances without a separate calibration
    (sklearn.calibration.CalibratedClassifierCV wraps this estimator).

    transform(X) = (K(X, X_fit_) - K_fit_rows_) @ dual_coef_[:, :n_components_]
    (the KernelCenterer test rule, the row-mean terms vanishing because the
    columns of dual_coef_ sum to zero).  transform, predict and
    decision_function form the n_test x n_fit cross-Gram, n_fit = n_samples
    (dense) or the number of pivots (inchol), and nothing larger.

    Parameters
    ----------
    n_components : int or None, default=None
        Columns returned by ``transform``; None: every identifiable direction
        (at most n_classes - 1).  More than n_classes - 1 is an error; more
        than are identifiable gives zero columns, with a warning.
    kernel : str, Kernel or callable, default="rbf"
        Any kernel accepted by fastkern's estimators, including "precomputed"
        (X is then the n x n training Gram, and transform/predict take the
        n_test x n_train cross-Gram; dense solver only).
    gamma : float or {"scale", "median"}, default=None
        Kernel coefficient, as in scikit-learn's KernelPCA (None is
        1 / n_features for "rbf"); "scale" and "median" are resolved on the
        training X.
    degree : float, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1
        Constant term of the polynomial and sigmoid kernels.
    kernel_params : dict, default=None
        Parameters of a callable kernel, passed as keyword arguments.
    regularization : float, default=1e-3
        Ridge (> 0) relative to the total feature-space variance (see above).
    solver : {"dense", "inchol"}, default="dense"
        The exact solver or the low-rank one (see above).
    tol : float, default=1e-6
        With solver="inchol": stop when the largest residual diagonal of
        K - G G^T is <= tol (absolute, >= 0; the rbf kernel's diagonal is 1).
    max_rank : int, default=None
        With solver="inchol": at most this many pivots (None: up to n_samples).
    n_threads : int, default=None
        OpenMP threads for the Gram matrices, centring and factorisation
        (None: the default).  BLAS and LAPACK run on one thread, so that the
        results are the same bits for any n_threads.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels.
    n_components_ : int
        Number of columns ``transform`` returns.
    dual_coef_ : ndarray of shape (n_fit, n_discriminants)
        Coefficients of every identifiable direction on K(., X_fit_) - K_fit_rows_.
    eigenvalues_ : ndarray of shape (n_discriminants,)
        Fisher ratios w^T S_B w / w^T (S_W + eps I) w, decreasing.
    explained_variance_ratio_ : ndarray of shape (n_discriminants,)
        eigenvalues_ / their sum (LinearDiscriminantAnalysis's quantity).
    centroids_ : ndarray of shape (n_classes, n_discriminants)
        Class means of the training projections (the prediction rule).
    X_fit_ : ndarray of shape (n_fit, n_features)
        All training samples (dense solver) or the pivot points (inchol);
        with kernel="precomputed", the indices of the training columns.
    K_fit_rows_ : ndarray of shape (n_fit,)
        Training means of the columns of K(X_train, X_fit_).
    rank_ : int
        Pivots used by solver="inchol" (n_samples for the dense solver).
    kernel_spec_ : fastkern._kernel_api.KernelSpec
        The kernel as fitted (kernel, the resolved gamma, degree, coef0,
        kernel_params), built once at fit and evaluated by every later Gram.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features seen during fit, when X had string column names.

    See Also
    --------
    sklearn.discriminant_analysis.LinearDiscriminantAnalysis : The linear case.
    KernelSIR : Kernel sliced inverse regression (KernelFDA for categorical y).

    Examples
    --------
    >>> import numpy as np
    >>> from fastkern import KernelFDA
    >>> rng = np.random.default_rng(0)
    >>> X = np.vstack([rng.normal(0, 1, (30, 2)), rng.normal(4, 1, (30, 2))])
    >>> y = np.repeat([0, 1], 30)
    >>> clf = KernelFDA().fit(X, y)
    >>> clf.transform(X).shape, float(clf.score(X, y))
    ((60, 1), 1.0)
    """

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left"), None],
        **kernel_constraints(),
        "regularization": [Interval(Real, 0, None, closed="neither")],
        "solver": [StrOptions({"dense", "inchol"})],
        "tol": [Interval(Real, 0, None, closed="left")],
        "max_rank": [Interval(Integral, 1, None, closed="left"), None],
        "n_threads": n_threads_constraint(),
    }

    def __init__(self, n_components=None, kernel="rbf", gamma=None, degree=3, coef0=1,
                 kernel_params=None, regularization=1e-3, solver="dense", tol=1e-6,
                 max_rank=None, n_threads=None):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.regularization = regularization
        self.solver = solver
        self.tol = tol
        self.max_rank = max_rank
        self.n_threads = n_threads

    def _precomputed(self):
        return is_precomputed(self.kernel)

    def _sparse_formats(self):
        return ["csr", "csc"] if self.solver == "dense" else False

    # ------------------------------------------------------------------ fit

    @_fit_context(prefer_skip_nested_validation=True)
    @limits_blas
    def fit(self, X, y):
        """Fit the discriminant directions and the class centroids.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features) or list
            Training data (sparse with the dense solver only), the
            (n_samples, n_samples) Gram when kernel="precomputed", or a list of
            strings, sets or graphs for the kernels of ``fastkern.structured``.
        y : array-like of shape (n_samples,)
            Class labels (at least two classes).

        Returns
        -------
        self : KernelFDA
            The fitted estimator.
        """
        # The incomplete Cholesky reads dense rows: scikit-learn's own message for
        # sparse input then says that dense data is required.
        X, y = validate_input(self, X, y, accept_sparse=self._sparse_formats(),
                             dtype=np.float64, ensure_min_samples=2, y_numeric=False)
        self.kernel_spec_ = KernelSpec.of(self, gamma=resolve_gamma(self.gamma, X, self.kernel))
        check_classification_targets(y)
        self.classes_, labels = np.unique(y, return_inverse=True)
        labels = labels.reshape(-1)
        counts = np.bincount(labels).astype(np.float64)
        n_classes = counts.size
        if n_classes < 2:
            raise ValueError(
                f"KernelFDA needs samples of at least 2 classes; y has 1 class "
                f"({self.classes_.tolist()[0]!r})"
            )
        n = X.shape[0]
        precomputed = self._precomputed()
        if precomputed:
            if self.solver == "inchol":
                raise ValueError("solver='inchol' evaluates kernel columns of X and cannot "
                                 "take kernel='precomputed'; use solver='dense'")
            if sparse.issparse(X):
                X = X.toarray()
            if X.shape[0] != X.shape[1]:
                raise ValueError("X must be a square kernel matrix when kernel='precomputed', "
                                 f"got shape {X.shape}")
        k = check_int(self.n_components, "n_components", 1, allow_none=True)
        if k is not None and k > n_classes - 1:
            raise ValueError(f"n_components={k} must be <= n_classes - 1 = {n_classes - 1}")
        reg = check_real(self.regularization, "regularization", low=0.0, low_inclusive=False)
        dof = n
        with serial_blas():
            if self.solver == "dense":
                coef, lam, proj, col_means = self._fit_dense(X, labels, counts, reg, dof)
                fit_index = np.arange(n)
                self.rank_ = n
            else:
                coef, lam, proj, col_means, fit_index = self._fit_inchol(
                    X, labels, counts, reg, dof)
                self.rank_ = int(fit_index.size)
        mu = lam / (1.0 + lam)
        ok = (mu > _MIN_SHARE) & np.isfinite(lam)
        n_disc = int(np.argmin(ok)) if not ok.all() else ok.size
        coef, lam, proj = coef[:, :n_disc], lam[:n_disc], proj[:, :n_disc]
        signs = column_signs(coef) if n_disc else np.ones(0)
        coef, proj = coef * signs, proj * signs
        n_out = n_disc if k is None else k
        if n_out > n_disc or n_disc == 0:
            n_out = max(n_out, 1)
            warnings.warn(
                f"only {n_disc} discriminant direction(s) are identifiable from "
                f"{n_classes} classes with this kernel; transform's other "
                f"{n_out - n_disc} column(s) are zero (C classes identify at most C - 1, "
                "and no more than the rank of the centred kernel matrix)",
                UserWarning, stacklevel=2,
            )
        self.dual_coef_ = coef
        self.eigenvalues_ = lam
        total = lam.sum()
        self.explained_variance_ratio_ = lam / total if total > 0 else lam.copy()
        self.centroids_ = _class_means(proj, labels, counts)
        self.K_fit_rows_ = col_means
        self.X_fit_ = fit_index.copy() if precomputed else X[fit_index]
        self.n_components_ = int(n_out)
        return self

    def _fit_dense(self, X, labels, counts, reg, dof):
        n = X.shape[0]
        K = np.empty((n, n))
        if self._precomputed():
            np.copyto(K, X)
        else:
            self.kernel_spec_.gram(X, out=K, n_threads=self.n_threads)
        col_means = K.mean(axis=0)
        center_gram(K, n_threads=self.n_threads)
        c, HQ, Z = class_ridge_solve(K, labels, counts, reg, "the centred kernel matrix is "
                                     "zero: all samples coincide in feature space, there is "
                                     "nothing to discriminate")
        del K
        B = _complement_basis(counts)
        D = B.T @ (c * (HQ.T @ Z)) @ B
        d, V = linalg.eigh((D + D.T) / 2, check_finite=False)
        V = B @ V
        # d = within / (total + ridge) = 1 - mu; it lies in (0, 1] up to rounding.
        d = np.clip(d, np.finfo(np.float64).tiny, 1.0)
        mu = 1.0 - d
        lam = mu / d
        a = Z @ V
        # a^T (N + c K~) a = mu d for unit v: rescale to dof.  A direction
        # without between-class variance (mu ~ 0) is dropped by fit: scale 0.
        wd = mu * d
        informative = wd > _MIN_SHARE * d
        scale = np.zeros_like(wd)
        scale[informative] = np.sqrt(dof / wd[informative])
        a *= scale
        # Training projections K~ a, from K~ Z = HQ - c Z (K~ no longer exists).
        proj = (HQ @ V) * scale - c * a
        a -= a.mean(axis=0)
        return a, lam, proj, col_means

    def _fit_inchol(self, X, labels, counts, reg, dof):
        ic = factor(X, self.kernel_spec_, tol=self.tol, max_rank=self.max_rank,
                    n_threads=self.n_threads)
        piv = ic.pivots
        if piv.size == 0:
            raise ValueError("the kernel matrix is zero (to within tol): there is nothing to "
                             "discriminate")
        # G is ours: centred in place, so that fit holds one n x r array
        # (measured peak 1.8-2.6 n r doubles at n = 8000-4000, r = 50).
        Gc = np.asarray(ic.G, dtype=np.float64)
        del ic
        Gp = Gc[piv]
        g_mean = Gc.mean(axis=0)
        Gc -= g_mean
        means = _class_means(Gc, labels, counts)
        root_b = np.sqrt(counts)[:, None] * means
        Sb = root_b.T @ root_b
        # Within-class scatter from the deviations themselves (S_T - S_B would
        # lose the small within-class variances to cancellation), by row
        # blocks so that no second n x r array is formed.
        r = Gc.shape[1]
        Sw = np.zeros((r, r))
        for start in range(0, Gc.shape[0], _ROW_BLOCK):
            rows = slice(start, start + _ROW_BLOCK)
            dev = Gc[rows] - means[labels[rows]]
            Sw += dev.T @ dev
        trace = np.einsum("ij,ij->", Gc, Gc)
        if not trace > 0:
            raise ValueError("the centred kernel matrix is zero: all samples coincide in "
                             "feature space, there is nothing to discriminate")
        Sw.flat[:: Sw.shape[0] + 1] += reg * trace
        lam, U = interruptible(_definite_eigh, Sb, Sw)
        m = min(counts.size - 1, U.shape[1])
        lam, U = lam[::-1][:m], U[:, ::-1][:, :m]
        # eigh normalises U^T (S_W + c I) U = I.
        U *= np.sqrt(dof)
        proj = Gc @ U
        coef = linalg.solve_triangular(Gp, U, lower=True, trans="T", check_finite=False)
        # Mean over the training rows of K(x_i, pivots) = G G_P^T at the pivots.
        col_means = Gp @ g_mean
        return coef, np.maximum(lam, 0.0), proj, col_means, piv

    # ------------------------------------------------------------ transform

    @property
    def _n_features_out(self):
        return self.n_components_

    def _project(self, X):
        """Projections of X on every identifiable direction (n_samples, n_discriminants)."""
        check_is_fitted(self, "dual_coef_")
        X = validate_input(self, X, accept_sparse=self._sparse_formats(), dtype=np.float64,
                           reset=False)
        precomputed = self._precomputed()
        if precomputed and sparse.issparse(X):
            X = X.toarray()
        with serial_blas():
            if precomputed:
                Kt_coef = X[:, self.X_fit_] @ self.dual_coef_
            else:
                Kt_coef = cross_kernel_times(self.kernel_spec_, X, self.X_fit_, self.dual_coef_,
                                             n_threads=self.n_threads)
            return Kt_coef - self.K_fit_rows_ @ self.dual_coef_

    @limits_blas
    def transform(self, X):
        """Project X on the first n_components_ discriminant directions.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features) or list
            The data (sparse with the dense solver only), the (n_samples, n_train)
            cross-Gram when kernel="precomputed", or a list of strings, sets or
            graphs for the kernels of ``fastkern.structured``.

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_components_)
            The projections, whitened (see the class docstring).
        """
        Z = self._project(X)
        k = self.n_components_
        if k <= Z.shape[1]:
            return Z[:, :k]
        return np.hstack([Z, np.zeros((Z.shape[0], k - Z.shape[1]))])

    # ------------------------------------------------------------ classifier

    @limits_blas
    def decision_function(self, X):
        """Compute the scores -||z(x) - centroid_c||^2 / 2 of every class.

        z(x) is the projection on every identifiable direction.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features) or list
            The data (sparse with the dense solver only), the (n_samples, n_train)
            cross-Gram when kernel="precomputed", or a list of strings, sets or
            graphs for the kernels of ``fastkern.structured``.

        Returns
        -------
        scores : ndarray of shape (n_samples, n_classes) or (n_samples,)
            The class scores; with two classes, the score of classes_[1] minus that
            of classes_[0] (> 0 predicts classes_[1]).  Scores, not
            log-probabilities.
        """
        Z = self._project(X)
        # Differences rather than |z|^2 - 2 z.c + |c|^2, which cancels for
        # points near a centroid; n x C x n_discriminants is small (C^2 n).
        diff = Z[:, None, :] - self.centroids_[None, :, :]
        scores = -0.5 * np.einsum("ijk,ijk->ij", diff, diff)
        if scores.shape[1] == 2:
            return scores[:, 1] - scores[:, 0]
        return scores

    @limits_blas
    def predict(self, X):
        """Predict the class of the nearest centroid in the discriminant space.

        See the class docstring for the rule.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features) or list
            The data (sparse with the dense solver only), the (n_samples, n_train)
            cross-Gram when kernel="precomputed", or a list of strings, sets or
            graphs for the kernels of ``fastkern.structured``.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,)
            The predicted class labels.
        """
        scores = self.decision_function(X)
        if scores.ndim == 1:
            return self.classes_[(scores > 0).astype(np.intp)]
        return self.classes_[np.argmax(scores, axis=1)]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = self._precomputed()
        tags.input_tags.sparse = self.solver == "dense"
        return tags
