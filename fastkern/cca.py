"""Regularised kernel canonical correlation analysis of two views.

The problem.  Each view has its own kernel, k_x on the rows of X and k_y on
the rows of y (the second view, called y as in scikit-learn's CCA).  With the
Gram matrices Kx, Ky of the training rows, double-centred when
``center=True``, KernelCCA finds dual coefficients a, b maximising

    a^T Kx Ky b   subject to   a^T (Kx Kx + r Kx + e I) a = 1,
                               b^T (Ky Ky + r Ky + e I) b = 1,

r = ``regularization``, e = ``jitter``: the functions f = sum_i a_i k_x(x_i, .)
and g = sum_i b_i k_y(y_i, .) of largest regularised correlation

    cov(f, g) / sqrt((var f + r ||f||^2 / n + ...) (var g + r ||g||^2 / n + ...)).

Its stationary values rho_1 >= rho_2 >= ... are ``canonical_correlations_``.
This one form covers the usual conventions:

* kernlab's ``kcca(x, y, kernel, kpar, gamma, ncomps)`` (kernlab 0.9.32) is
  ``center=False, regularization=gamma, jitter=1e-6``: its left side is
  (K + gamma I) K + 1e-6 I, symmetrised, and kernlab does not centre its
  kernels.  Its ``kcor`` lists each rho twice, as rho and -rho (its eigen()
  sees a matrix that is not exactly symmetric and orders the eigenvalues by
  modulus), so ``kcca(..., ncomps=2 * k)`` gives rho_1..rho_k up to sign; its
  ``xcoef``/``ycoef`` columns are these a, b up to scale and sign.  kernlab
  uses one kernel for both views;
  its ``rbfdot(sigma)`` is ``kernel="rbf", gamma=sigma`` and ``polydot(degree,
  scale, offset)`` is ``kernel="poly", gamma=scale, coef0=offset``.
* Bach & Jordan (2002), constraint a^T (Kx + n kappa / 2 I)^2 a = 1 on centred
  kernels, is ``regularization=n * kappa, jitter=(n * kappa / 2) ** 2``.
* cca-zoo's ``KCCA(shrinkage=c)``, constraint a^T ((1 - c) K^2 / (n - 1) + c K) a,
  is ``regularization=c * (n - 1) / (1 - c), jitter=0`` (for 0 <= c < 1);
  its generalized eigenvalues are rho / (1 - c).

With r = e = 0 any two views whose Gram matrices have full rank correlate
perfectly (all rho = 1): some regularisation is needed for a meaningful answer.

Solution.  With the eigendecompositions Kx = Ux diag(lx) Ux^T (eigenvalues
above lx_max * n * eps, the numerical rank) and Ky = Uy diag(ly) Uy^T, the
constraint is diagonal in those bases, and the rho are the singular values of

    T = diag(dx) Ux^T Uy diag(dy),   d = l / sqrt(l^2 + r l + e)

(directions outside the ranges only add e ||a||^2 to the constraint, so the
optimum has none).  This is the generalized symmetric eigenproblem
[[0, Kx Ky], [Ky Kx, 0]] v = rho blockdiag(Kx^2 + r Kx + e I, ...) v of
kernlab and Bach & Jordan, solved without factorising its ill-conditioned
right side, at the cost of two n x n symmetric eigendecompositions (LAPACK syevr) and one SVD
instead of one 2n x 2n generalized ``eigh`` (about 8 times the flops).
Memory: the Gram being diagonalised, the two eigenvector bases, T and its
SVD, a peak of about 6.3 n^2 float64 values (RSS increase at n=1,000).

Low rank (``solver="incomplete_cholesky"``).  Each kernel is factored by
:func:`fastkern.incomplete_cholesky`, K ~ G G^T with G of n x rank, never
forming K; centring is K~ = (G - mean G)(G - mean G)^T.  The thin SVD of the
centred G gives U and l = s^2, and the same T, now rank_x x rank_y.  When G G^T
equals K (full rank, tol=0) both paths solve the same problem; otherwise the
low-rank path solves it for the kernel G G^T (the Nystroem approximation on
the pivots), and a new point x is mapped by the same formula, through
k(x, pivots).  Memory: the two factors, O(n (rank_x + rank_y)).

Outputs.  ``transform(X)`` gives f_j(x) = sum_i a_ij k~_x(x, x_i) (the test
kernel centred with the training means, when ``center=True``).  The
coefficients are scaled so that the training variates have mean 0 and
variance 1 (with ``center=False``: mean square 1); their sign makes the
training x-variate's largest-magnitude value positive, the y-variate
following it.  The empirical correlation of the j-th training variates is at
least rho_j: the regularisation only shrinks.
"""
import warnings
from numbers import Integral, Real

import numpy as np
from scipy import linalg, sparse
from sklearn.base import (BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                          _fit_context)
from sklearn.utils import check_array
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _num_samples, check_is_fitted

from fastkern import _inchol, _solver_names
from fastkern._eigen import column_signs
from fastkern._kernel_api import (STRING_KERNELS, KernelSpec, is_precomputed, kernel_constraints,
                                  resolve_gamma, structured_kernel, validate_input)
from fastkern._operator import cross_kernel_times
from fastkern._linalg import serial_blas
from fastkern._threads import interruptible, limits_blas
from fastkern._validation import CachedParamValidation, check_int, check_n_threads, check_real
from fastkern.centering import center_gram
from fastkern.lowrank import factor

__all__ = ["KernelCCA"]

_SOLVERS = _solver_names.KERNEL_CCA
# solver="auto" takes the exact path up to this many samples.  The exact path
# peaks at about 6.3 n x n float64 arrays (the Gram being diagonalised, the two
# eigenvector bases, T and its SVD; RSS increase measured at n=1,000): about
# 450 MB at 3,000, and its time grows as n^3.
AUTO_DENSE_MAX = 3000


def _view_params(est, view):
    """The kernel parameters of view "x" or "y" (a None *_y parameter takes X's value),
    as given (gamma not resolved: the fitted kernels are ``kernel_spec_`` and
    ``kernel_spec_y_``)."""
    names = ("kernel", "gamma", "degree", "coef0", "kernel_params")
    params = {name: getattr(est, name) for name in names}
    if view == "y":
        for name in names:
            value = getattr(est, f"{name}_y")
            if value is not None:
                params[name] = value
    return params


def _spectrum(U, lam, n, name, centred):
    """Keep the numerically positive part of a (centred) kernel's spectrum."""
    if not lam.size or not lam.max() > 0:
        what = "centred kernel matrix" if centred else "kernel matrix"
        raise ValueError(f"the {what} of {name} is zero or not positive semi-definite"
                         + (": all its samples coincide in feature space" if centred else ""))
    keep = lam > lam.max() * n * np.finfo(np.float64).eps
    return U[:, keep], lam[keep]


def _correlations(Ax, Ay):
    """The SVD (P, rho, Q^T) of T = Ax^T Ay (numpy's, which releases the GIL)."""
    return np.linalg.svd(Ax.T @ Ay, full_matrices=False)


class KernelCCA(CachedParamValidation, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                BaseEstimator):
    """Regularised kernel canonical correlation analysis of two views (X, y).

    See the module docstring (``fastkern.cca``) for the problem solved, its
    relation to kernlab's ``kcca``, Bach & Jordan and cca-zoo, and the
    low-rank path.

    Parameters
    ----------
    n_components : int, default=2
        Number of canonical pairs (<= n_samples).  Pairs beyond the numerical
        rank of the (centred) kernels are zero, with a warning.
    kernel : str, Kernel or callable, default="rbf"
        Kernel of the first view X, as in KernelPCA; "precomputed" means X is
        its training Gram (and transform takes the n_test x n_train cross-Gram).
    gamma : float or {"scale", "median"}, default=None
        Kernel coefficient of X's kernel (None is 1 / n_features of X).
    degree : float, default=3
        Degree of X's polynomial kernel.
    coef0 : float, default=1
        Constant term of X's polynomial and sigmoid kernels.
    kernel_params : dict, default=None
        Parameters of X's callable kernel, passed as keyword arguments.
    kernel_y : str, Kernel or callable, default=None
        Kernel of the second view y.  Each ``*_y`` parameter left at None
        takes the value of its X counterpart (so by default both views use the
        same kernel; gamma=None still means 1 / n_features of each view).
    gamma_y : float, default=None
        Kernel coefficient of y's kernel.
    degree_y : float, default=None
        Degree of y's polynomial kernel.
    coef0_y : float, default=None
        Constant term of y's polynomial and sigmoid kernels.
    kernel_params_y : dict, default=None
        Parameters of y's callable kernel.
    regularization : float, default=0.1
        The ridge r in the constraint a^T (K K + r K + e I) a = 1 (kernlab's ``gamma``,
        whose default is 0.1).  Absolute, not relative to n or to the kernel's
        scale.
    jitter : float, default=0.0
        The jitter e in that constraint (kernlab adds 1e-6).
    center : bool, default=True
        Centre each view in feature space (kernlab's kcca does not).
    solver : {"auto", "dense", "incomplete_cholesky"}, default="auto"
        "dense": the exact path (n x n Gram matrices); "incomplete_cholesky":
        the low-rank path; "auto": dense up to 3,000 samples, low rank above.
    tol : float, default=1e-6
        Stopping tolerance (>= 0) of the incomplete Cholesky factorisations (largest
        residual diagonal, as :func:`fastkern.incomplete_cholesky`).
    max_rank : int, default=None
        Largest rank of each factor (None: no limit but tol).
    n_threads : int, default=None
        OpenMP threads for the Gram matrices, centring and factorisations
        (None: the default).  BLAS and LAPACK run on one thread, so that the
        results are the same bits for any n_threads.

    Attributes
    ----------
    canonical_correlations_ : ndarray of shape (n_components,)
        Regularised canonical correlations rho_j, decreasing.
    x_dual_coef_ : ndarray of shape (n_basis_x, n_components)
        Coefficients a on the basis rows of X (all training rows on the exact
        path, the pivots on the low-rank path).
    y_dual_coef_ : ndarray of shape (n_basis_y, n_components)
        Coefficients b on the basis rows of y.
    X_fit_ : ndarray of shape (n_basis_x, n_features)
        Basis rows of X (column indices for a precomputed kernel).
    y_fit_ : ndarray of shape (n_basis_y, n_features_y)
        Basis rows of y (column indices for a precomputed kernel).
    x_fit_means_ : ndarray of shape (n_basis_x,)
        Training means of the kernel columns of X's basis (zeros when
        center=False).
    y_fit_means_ : ndarray of shape (n_basis_y,)
        The same for y.
    x_rank_ : int
        Numerical rank of X's (centred) kernel used.
    y_rank_ : int
        Numerical rank of y's (centred) kernel used.
    solver_ : str
        The path taken ("dense" or "incomplete_cholesky").
    kernel_spec_ : fastkern._kernel_api.KernelSpec
        The kernel of X as fitted (kernel, the resolved gamma, degree, coef0,
        kernel_params), built once at fit and evaluated by every later Gram.
    kernel_spec_y_ : fastkern._kernel_api.KernelSpec
        The same for y (the ``*_y`` parameters, X's where they are None).
    n_features_in_ : int
        Number of features of X seen during fit.
    n_features_y_ : int or None
        Number of features of y seen during fit (None for strings, sets or
        graphs).
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features of X, when X has string column names.

    See Also
    --------
    sklearn.cross_decomposition.CCA : Linear canonical correlation analysis.

    Examples
    --------
    >>> import numpy as np
    >>> from fastkern import KernelCCA
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(100, 3))
    >>> y = X[:, :1] ** 2 + 0.1 * rng.normal(size=(100, 1))
    >>> cca = KernelCCA(n_components=1).fit(X, y)
    >>> X_c, y_c = cca.transform(X, y)
    >>> X_c.shape, y_c.shape
    ((100, 1), (100, 1))
    """

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        **kernel_constraints(),
        "kernel_y": [StrOptions(set(STRING_KERNELS)), callable, None],
        "gamma_y": [Interval(Real, 0, None, closed="left"), None],
        "degree_y": [Interval(Real, 0, None, closed="left"), None],
        "coef0_y": [Interval(Real, None, None, closed="neither"), None],
        "kernel_params_y": [dict, None],
        "regularization": [Interval(Real, 0, None, closed="left")],
        "jitter": [Interval(Real, 0, None, closed="left")],
        "center": ["boolean"],
        "solver": [StrOptions(set(_SOLVERS))],
        "tol": [Interval(Real, 0, None, closed="left")],
        "max_rank": [Interval(Integral, 1, None, closed="left"), None],
        "n_threads": [Interval(Integral, 1, None, closed="left"), None],
    }

    def __init__(self, n_components=2, kernel="rbf", gamma=None, degree=3, coef0=1,
                 kernel_params=None, kernel_y=None, gamma_y=None, degree_y=None, coef0_y=None,
                 kernel_params_y=None, regularization=0.1, jitter=0.0, center=True,
                 solver="auto", tol=1e-6, max_rank=None, n_threads=None):
        self.n_components = n_components
        self.kernel = kernel
        self.gamma = gamma
        self.degree = degree
        self.coef0 = coef0
        self.kernel_params = kernel_params
        self.kernel_y = kernel_y
        self.gamma_y = gamma_y
        self.degree_y = degree_y
        self.coef0_y = coef0_y
        self.kernel_params_y = kernel_params_y
        self.regularization = regularization
        self.jitter = jitter
        self.center = center
        self.solver = solver
        self.tol = tol
        self.max_rank = max_rank
        self.n_threads = n_threads

    # ------------------------------------------------------------ validation

    def _check_y(self, y, n, reset):
        if y is None:
            raise ValueError("KernelCCA requires y to be passed, but the target y is None "
                             "(y is the second view: fit(X, y))")
        kern = structured_kernel(_view_params(self, "y")["kernel"])
        n_y = len(y) if kern is not None and hasattr(y, "__len__") else _num_samples(y)
        if n_y != n:
            raise ValueError(f"y has {n_y} samples but X has {n}: the two views must "
                             "describe the same samples (one row of each per sample)")
        if kern is not None:
            # Strings, sets or graphs: checked by their kernel, no feature count.
            if reset:
                self.n_features_y_ = None
            return kern.check_samples(y, "y")
        y = check_array(y, accept_sparse=["csr", "csc"], dtype=np.float64, ensure_2d=False,
                        input_name="y", ensure_min_samples=1)
        if y.ndim == 1:
            y = y.reshape(-1, 1)
        if reset:
            self.n_features_y_ = y.shape[1]
        elif y.shape[1] != self.n_features_y_:
            raise ValueError(f"y has {y.shape[1]} features, but KernelCCA was fitted with "
                             f"{self.n_features_y_} features in y")
        return y

    @staticmethod
    def _check_precomputed(A, name, kernel, n_cols=None):
        if not is_precomputed(kernel):
            return A
        if sparse.issparse(A):
            A = A.toarray()
        if n_cols is None and A.shape[0] != A.shape[1]:
            raise ValueError(f"{name} must be a square kernel matrix when its kernel is "
                             f"'precomputed', got shape {A.shape}")
        if n_cols is not None and A.shape[1] != n_cols:
            raise ValueError(f"{name} must have {n_cols} columns (one per training sample) "
                             f"when its kernel is 'precomputed', got shape {A.shape}")
        return A

    def _view_spec(self, view):
        return self.kernel_spec_ if view == "x" else self.kernel_spec_y_

    def _gram(self, view, A, B=None, out=None, n_threads=None):
        return self._view_spec(view).gram(A, B, out=out, n_threads=n_threads)

    # ------------------------------------------------------------ fit

    @_fit_context(prefer_skip_nested_validation=True)
    @limits_blas
    def fit(self, X, y):
        """Fit on the two views X and y.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features) or list
            The first view: data, its Gram with kernel="precomputed", or a list of
            strings, sets or graphs for the kernels of ``fastkern.structured``.
        y : {array-like, sparse matrix} of shape (n_samples, n_features_y) or (n_samples,)
            The second view, one row per sample of X (or a list, as X).

        Returns
        -------
        self : KernelCCA
            The fitted estimator.

        Raises
        ------
        ValueError
            If y is None or its number of samples differs from X's.
        """
        n_x = _num_samples(X)
        y = self._check_y(y, n_x, reset=True)
        X = validate_input(self, X, accept_sparse=["csr", "csc"], dtype=np.float64,
                           ensure_min_samples=2)
        n = X.shape[0]
        kx, ky = _view_params(self, "x")["kernel"], _view_params(self, "y")["kernel"]
        X = self._check_precomputed(X, "X", kx)
        y = self._check_precomputed(y, "y", ky)
        # gamma="scale"/"median" resolved on each view's training data.
        self.kernel_spec_, self.kernel_spec_y_ = (
            KernelSpec.from_params(**{**params, "gamma": resolve_gamma(params["gamma"], A,
                                                                       params["kernel"])})
            for params, A in ((_view_params(self, "x"), X), (_view_params(self, "y"), y)))
        k = check_int(self.n_components, "n_components", 1)
        if k > n:
            raise ValueError(f"n_components={k} must be <= n_samples={n}")
        reg = check_real(self.regularization, "regularization", low=0.0)
        jitter = check_real(self.jitter, "jitter", low=0.0)
        n_threads = check_n_threads(self.n_threads)
        solver = self.solver
        if solver not in _SOLVERS:
            raise ValueError(f"solver must be one of {_SOLVERS}, got {solver!r}")
        if solver == "auto":
            structured = any(structured_kernel(_view_params(self, v)["kernel"]) is not None
                             for v in ("x", "y"))
            solver = "dense" if n <= AUTO_DENSE_MAX or structured else "incomplete_cholesky"
        if solver == "incomplete_cholesky":
            for name, A, kern in (("X", X, kx), ("y", y, ky)):
                if structured_kernel(kern) is not None:
                    raise ValueError(f"solver='incomplete_cholesky' needs vector samples; the "
                                     f"kernel of {name}, {kern!r}, takes "
                                     f"{kern._sample_kind}s: use solver='dense'")
                if is_precomputed(kern):
                    raise ValueError(f"solver='incomplete_cholesky' cannot use a precomputed "
                                     f"kernel for {name}: use solver='dense'")
                if sparse.issparse(A):
                    raise TypeError(f"sparse input is not supported by "
                                    f"solver='incomplete_cholesky': {name} must be dense "
                                    "(or use solver='dense')")

        with serial_blas():
            views = []
            for view, A, name in (("x", X, "X"), ("y", y, "y")):
                if solver == "dense":
                    views.append(self._dense_view(view, A, name, n_threads))
                else:
                    views.append(self._lowrank_view(view, A, name, n_threads))
            (Ux, lx, _), (Uy, ly, _) = views
            denom_x = np.sqrt(lx * lx + reg * lx + jitter)
            denom_y = np.sqrt(ly * ly + reg * ly + jitter)
            # The n x n product and SVD are single LAPACK/BLAS calls of
            # seconds at a few thousand samples: interruptible sees Ctrl-C.
            P, rho, Qt = interruptible(_correlations, Ux * (lx / denom_x), Uy * (ly / denom_y))
            rank = rho.size
            m = min(k, rank)
            P, Q, rho = P[:, :m], Qt[:m].T, rho[:m]
            # Training variates F = U diag(l / denom) P; their norms give the unit-variance scale.
            cx = lx / denom_x
            cy = ly / denom_y
            Fx = interruptible(np.matmul, Ux, cx[:, None] * P)
            scale_x = np.sqrt(n) / np.linalg.norm(cx[:, None] * P, axis=0)
            scale_y = np.sqrt(n) / np.linalg.norm(cy[:, None] * Q, axis=0)
            signs = column_signs(Fx)
            del Fx
            coef_x = views[0][2](P / denom_x[:, None]) * (scale_x * signs)
            coef_y = views[1][2](Q / denom_y[:, None]) * (scale_y * signs)

        if k > m:
            warnings.warn(
                f"only {m} canonical pair(s) exist (the centred kernels have ranks "
                f"{lx.size} and {ly.size}); the other {k - m} are set to zero",
                UserWarning, stacklevel=2,
            )
            coef_x = np.hstack([coef_x, np.zeros((coef_x.shape[0], k - m))])
            coef_y = np.hstack([coef_y, np.zeros((coef_y.shape[0], k - m))])
            rho = np.concatenate([rho, np.zeros(k - m)])
        self.canonical_correlations_ = np.clip(rho, 0.0, 1.0)
        self.x_dual_coef_, self.y_dual_coef_ = coef_x, coef_y
        self.x_rank_, self.y_rank_ = int(lx.size), int(ly.size)
        self.solver_ = solver
        self._x_offset = self.x_fit_means_ @ coef_x
        self._y_offset = self.y_fit_means_ @ coef_y
        return self

    def _dense_view(self, view, A, name, n_threads):
        """U, l of the (centred) Gram, and the map from coefficients in U to dual ones."""
        n = A.shape[0]
        K = np.empty((n, n))
        if self._view_spec(view).precomputed:
            np.copyto(K, A)
            basis = np.arange(n)
        else:
            self._gram(view, A, out=K, n_threads=n_threads)
            basis = A
        means = K.mean(axis=0) if self.center else np.zeros(n)
        if self.center:
            center_gram(K, n_threads=n_threads)
        else:
            # eigh reads one triangle: a kernel that is not exactly symmetric
            # (a callable) is symmetrised so both triangles count.
            K += K.T
            K *= 0.5
        # One LAPACK call of a minute at n=6000, without the GIL, so that
        # interruptible sees Ctrl-C.  K is symmetric: K.T is K in Fortran
        # order, destroyed in place.
        lam, U = interruptible(_inchol.syevr, K.T, True, 1, n)
        del K
        U, lam = _spectrum(U, lam, n, name, self.center)
        setattr(self, f"{view if view == 'y' else 'X'}_fit_", basis)
        setattr(self, f"{view}_fit_means_", means)

        def dual(coef):
            alpha = U @ coef
            if self.center:
                # The centred Gram's range is orthogonal to the constant vector;
                # removing the rounding left along it makes transform's short
                # form (no row means of the test kernel) exact.
                alpha -= alpha.mean(axis=0)
            return alpha

        return U, lam, dual

    def _lowrank_view(self, view, A, name, n_threads):
        max_rank = check_int(self.max_rank, "max_rank", 1, allow_none=True)
        tol = check_real(self.tol, "tol", low=0.0)
        chol = factor(A, self._view_spec(view), tol=tol, max_rank=max_rank,
                      n_threads=n_threads)
        G = np.asarray(chol.G, dtype=np.float64)
        piv = chol.pivots
        if piv.size == 0:
            raise ValueError(f"the kernel matrix of {name} is zero (its diagonal is <= tol)")
        L = np.array(G[piv], order="F")
        gbar = G.mean(axis=0) if self.center else np.zeros(G.shape[1])
        Gc = G - gbar
        del G
        U, s, Vt = interruptible(np.linalg.svd, Gc, full_matrices=False)
        del Gc
        keep = s * s > (s[0] * s[0] if s.size else 0.0) * A.shape[0] * np.finfo(np.float64).eps
        U, lam = _spectrum(U, s * s, A.shape[0], name, self.center)
        s, V = s[keep], Vt[keep].T
        setattr(self, f"{view if view == 'y' else 'X'}_fit_", A[piv])
        # Training means of k(., pivot) columns: K[:, piv] = G L^T.
        setattr(self, f"{view}_fit_means_", L @ gbar)

        def dual(coef):
            # f = Gc w with w = V diag(s) coef (U^T f = s^2 coef), and
            # k(x, pivots) = g(x)^T L^T, so the pivot coefficients are L^-T w.
            w = V @ (s[:, None] * coef)
            return linalg.solve_triangular(L, w, lower=True, trans="T", check_finite=False)

        return U, s * s, dual

    # ------------------------------------------------------------ transform

    @property
    def _n_features_out(self):
        return self.x_dual_coef_.shape[1]

    def _variates(self, view, A, n_threads):
        coef = getattr(self, f"{view}_dual_coef_")
        basis = self.X_fit_ if view == "x" else self.y_fit_
        spec = self._view_spec(view)
        if spec.precomputed:
            Kt_coef = A[:, basis] @ coef
        else:
            Kt_coef = cross_kernel_times(spec, A, basis, coef, n_threads=n_threads)
        offset = self._x_offset if view == "x" else self._y_offset
        return Kt_coef - offset

    @limits_blas
    def transform(self, X, y=None):
        """Compute the canonical variates of X, and of y when given.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features) or list
            The first view: data, its Gram with kernel="precomputed", or a list of
            strings, sets or graphs for the kernels of ``fastkern.structured``.
        y : {array-like, sparse matrix} of shape (n_samples, n_features_y), default=None
            The second view; None returns the variates of X only.

        Returns
        -------
        X_c : ndarray of shape (n_samples, n_components)
            The variates of X.
        y_c : ndarray of shape (n_samples, n_components)
            The variates of y, returned (as the tuple (X_c, y_c)) only when y is given.
        """
        check_is_fitted(self, "x_dual_coef_")
        n_threads = check_n_threads(self.n_threads)
        n = _num_samples(X)
        if y is not None:
            y = self._check_y(y, _num_samples(X), reset=False)
        X = validate_input(self, X, accept_sparse=["csr", "csc"], dtype=np.float64, reset=False)
        n_train = self.x_fit_means_.shape[0] if self.solver_ == "dense" else None
        X = self._check_precomputed(X, "X", _view_params(self, "x")["kernel"], n_train)
        with serial_blas():
            Xc = self._variates("x", X, n_threads)
            if y is None:
                return Xc
            y = self._check_precomputed(y, "y", _view_params(self, "y")["kernel"], n_train)
            return Xc, self._variates("y", y, n_threads)

    @limits_blas
    def fit_transform(self, X, y=None):
        """Fit, then return the training variates of X: ``fit(X, y).transform(X)``.

        The same array as ``transform(X)`` after ``fit``, as every scikit-learn
        transformer (and ``check_estimator``) expects.  scikit-learn's CCA
        returns the pair here instead; for both views' variates use
        ``fit(X, y).transform(X, y)``.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features) or list
            The first view: data, its Gram with kernel="precomputed", or a list of
            strings, sets or graphs for the kernels of ``fastkern.structured``.
        y : {array-like, sparse matrix} of shape (n_samples, n_features_y)
            The second view (required).

        Returns
        -------
        X_c : ndarray of shape (n_samples, n_components)
            The variates of X.
        """
        return self.fit(X, y).transform(X)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.target_tags.multi_output = True
        tags.input_tags.sparse = self.solver != "incomplete_cholesky"
        tags.input_tags.pairwise = is_precomputed(self.kernel)
        return tags
