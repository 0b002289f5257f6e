"""Nystroem feature map, a drop-in for ``sklearn.kernel_approximation.Nystroem``.

m rows of the training data (the landmarks L, drawn as scikit-learn draws
them for the same ``random_state``) give phi(x) = K(x, L) W^(-1/2) with
W = K(L, L), so that phi(X) phi(X)^T = K(X, L) W^+ K(L, X) approximates K.
W^(-1/2) is taken from the SVD of W with singular values clipped at 1e-12,
as scikit-learn.  Kernels are evaluated by fastkern (``kernel_gram``).
"""
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import (BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                          _fit_context)
from sklearn.utils._param_validation import Interval
from sklearn.utils.validation import check_is_fitted, validate_data

from fastkern._kernel_api import KernelSpec, is_precomputed, kernel_constraints, resolve_gamma
from fastkern._threads import limits_blas
from fastkern._validation import (CachedParamValidation, check_n_threads, n_threads_constraint,
                                  seeded_random_state)

__all__ = ["Nystroem"]


class Nystroem(CachedParamValidation, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
               BaseEstimator):
    """Approximate a kernel map from a random subset of the training data.

    Parameters are those of scikit-learn's Nystroem (``n_jobs`` is accepted and
    ignored: fastkern's kernels use OpenMP, see ``n_threads``).

    With kernel="precomputed", X is the training Gram matrix (n x n), the
    landmarks are the columns ``component_indices_`` and ``transform`` takes
    the cross-Gram K(X_test, X_train) (n_test x n).  For n_components =
    n_samples this is scikit-learn's result; scikit-learn cannot fit fewer
    components on a precomputed kernel, fastkern uses W = K[L][:, L].

    X may be a dense array or a scipy CSR/CSC matrix (kept sparse).

    Parameters
    ----------
    kernel : str, Kernel or callable, default="rbf"
        A fastkern string kernel, "precomputed", a fastkern kernel object or a
        callable.
    gamma : float or {"scale", "median"}, default=None
        Kernel coefficient; None takes the kernel's default (1/n_features for
        "rbf", 1 for "chi2").  "scale" means 1 / (n_features X.var()) and
        "median" the median heuristic (``fastkern.estimate_gamma``), resolved on
        the training X (all of it, not only the landmarks) into ``gamma_``.
    coef0 : float, default=None
        Constant term of the polynomial and sigmoid kernels; None means 1.
    degree : float, default=None
        Degree of the polynomial kernel; None means 3.
    kernel_params : dict, default=None
        Parameters of a callable kernel, passed as keyword arguments.
    n_components : int, default=100
        Number of landmarks (at most n_samples: more warns and uses n_samples).
    random_state : int, RandomState instance or None, default=None
        Draws the landmarks.
    n_jobs : int, default=None
        Accepted for compatibility with scikit-learn and ignored.
    n_threads : int, default=None
        OpenMP threads of the Gram matrices; None means the default
        (OMP_NUM_THREADS, else the CPUs available to this process, capped by its
        CPU quota).

    Attributes
    ----------
    components_ : {ndarray, sparse matrix} of shape (n_components, n_features)
        The landmark rows.
    component_indices_ : ndarray of shape (n_components,)
        Indices of the landmarks in the training X.
    normalization_ : ndarray of shape (n_components, n_components)
        W^(-1/2), W the Gram matrix of the landmarks.
    gamma_ : float or None
        The gamma used (resolved at fit; None: the kernel's default).
    kernel_spec_ : fastkern._kernel_api.KernelSpec
        The kernel as fitted (kernel, gamma_, degree, coef0, kernel_params),
        built once at fit and evaluated by transform.
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features seen during fit, when X had string column names.

    Notes
    -----
    gamma, coef0 and degree must stay None for a callable, a fastkern kernel
    object or "precomputed".

    Examples
    --------
    >>> import numpy as np
    >>> from fastkern import Nystroem
    >>> X = np.random.default_rng(0).normal(size=(50, 4))
    >>> Nystroem(n_components=10, random_state=0).fit_transform(X).shape
    (50, 10)
    """

    _parameter_constraints: dict = {
        **kernel_constraints(),
        "coef0": [Interval(Real, None, None, closed="neither"), None],
        "degree": [Interval(Real, 1, None, closed="left"), None],
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "random_state": ["random_state"],
        "n_jobs": [Integral, None],
        "n_threads": n_threads_constraint(),
    }

    def __init__(self, kernel="rbf", *, gamma=None, coef0=None, degree=None,
                 kernel_params=None, n_components=100, random_state=None, n_jobs=None,
                 n_threads=None):
        self.kernel = kernel
        self.gamma = gamma
        self.coef0 = coef0
        self.degree = degree
        self.kernel_params = kernel_params
        self.n_components = n_components
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.n_threads = n_threads

    @property
    def _precomputed(self):
        return is_precomputed(self.kernel)

    def _gram(self, X, Y=None):
        return self.kernel_spec_.gram(X, Y, n_threads=self.n_threads)

    @_fit_context(prefer_skip_nested_validation=True)
    @limits_blas
    def fit(self, X, y=None):
        """Draw the landmarks and compute W^(-1/2).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            Training data, or the training Gram with kernel="precomputed".
        y : None
            Ignored.

        Returns
        -------
        self : Nystroem
            The fitted transformer.

        Raises
        ------
        ValueError
            If gamma, coef0 or degree is given with a callable or precomputed
            kernel, or a precomputed X is not square.
        """
        X = validate_data(self, X, accept_sparse=["csr", "csc"])
        if (callable(self.kernel) or self._precomputed) and (
                self.gamma is not None or self.coef0 is not None or self.degree is not None):
            raise ValueError("Don't pass gamma, coef0 or degree to Nystroem if using a "
                             "callable or precomputed kernel")
        check_n_threads(self.n_threads)
        # gamma="scale"/"median" resolved once, on the whole training X.
        self.gamma_ = resolve_gamma(self.gamma, X, self.kernel)
        return self._fit_spec(X, KernelSpec.of(self, gamma=self.gamma_))

    def _fit_spec(self, X, spec):
        """fit's landmarks and W^(-1/2) for a validated X and a kernel spec already
        built (KernelPCA's nystrom solver hands over its own ``kernel_spec_``)."""
        self.kernel_spec_ = spec
        self.n_features_in_ = X.shape[1]
        n = X.shape[0]
        if self._precomputed and X.shape[1] != n:
            raise ValueError(f"X must be a square kernel matrix for kernel='precomputed', "
                             f"got shape {X.shape}")
        k = self.n_components
        if k > n:
            warnings.warn("n_components > n_samples. This is not possible.\nn_components was "
                          "set to n_samples, which results in inefficient evaluation of the "
                          "full kernel.")
            k = n
        with seeded_random_state(self.random_state) as rnd:
            inds = rnd.permutation(n)[:k].astype(np.int64)
        basis = X[inds]
        if self._precomputed:
            W = basis[:, inds]
            W = W.toarray() if hasattr(W, "toarray") else W
        else:
            W = self._gram(basis)
        W = np.asarray(W)
        if W.dtype not in (np.float32, np.float64):
            W = W.astype(np.float64)
        if np.array_equal(W, W.T):
            # scikit-learn's U S^(-1/2) V^T from the SVD of W, through the
            # eigendecomposition W = Q L Q^T: S = |L|, V = U sign(L) (LAPACK's
            # SVD keeps the sign of a -0.0, as signbit does).  A symmetric
            # eigensolver is several times faster than the SVD, and its
            # threads wait less on a busy machine.
            values, Q = np.linalg.eigh(W)
            scale = (np.where(np.signbit(values), -1.0, 1.0)
                     / np.sqrt(np.maximum(np.abs(values), 1e-12)))
            self.normalization_ = (Q * scale.astype(Q.dtype, copy=False)) @ Q.T
        else:  # a callable kernel or a precomputed K that is not symmetric
            U, S, Vt = np.linalg.svd(W)
            S = np.maximum(S, 1e-12)
            self.normalization_ = (U / np.sqrt(S)) @ Vt
        self.components_ = basis
        self.component_indices_ = inds
        self._n_features_out = k
        return self

    @limits_blas
    def transform(self, X):
        """Map X to the approximate feature space.

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples, n_features)
            The data; for kernel="precomputed", the cross-Gram K(X, X_train).

        Returns
        -------
        X_new : ndarray of shape (n_samples, n_components)
            The features phi(X) = K(X, components_) @ normalization_.T.
        """
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse=["csr", "csc"], reset=False)
        if self._precomputed:
            embedded = X[:, self.component_indices_]
            embedded = embedded.toarray() if hasattr(embedded, "toarray") else embedded
        else:
            embedded = self._gram(X, self.components_)
        embedded = np.asarray(embedded)
        if embedded.dtype not in (np.float32, np.float64):
            embedded = embedded.astype(np.float64)
        return embedded @ self.normalization_.T

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
