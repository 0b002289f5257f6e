"""Nystroem feature map, a drop-in for ``sklearn.kernel_approximation.Nystroem``.

m rows of the training data (the landmarks L, drawn as scikit-learn draws
them for the same ``random_state``) give phi(x) = K(x, L) W^(-1/2) with
W = K(L, L), so that phi(X) phi(X)^T = K(X, L) W^+ K(L, X) approximates K.
W^(-1/2) is taken from the SVD of W with singular values clipped at 1e-12,
as scikit-learn.  Kernels are evaluated by fastkern (``kernel_gram``).
"""
import numbers
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_is_fitted

from fastkern._kernel_api import check_kernel_param, kernel_gram
from fastkern._validation import check_array_2d, check_n_threads, result_dtype
from fastkern.kernels import Kernel

__all__ = ["Nystroem"]


class Nystroem(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Approximate a kernel map from a random subset of the training data.

    Parameters are those of scikit-learn's Nystroem (``n_jobs`` is accepted and
    ignored: fastkern's kernels use OpenMP, see ``n_threads``).  gamma, coef0
    and degree left as None take the kernel's defaults (gamma = 1/n_features,
    coef0 = 1, degree = 3); they must stay None for a callable or a fastkern
    kernel object, which carry their own parameters.

    Attributes: ``components_`` (the landmark rows), ``component_indices_``,
    ``normalization_`` (W^(-1/2)), ``n_features_in_``.
    """

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

    def _gram(self, X, Y=None):
        return kernel_gram(X, Y, kernel=self.kernel, gamma=self.gamma,
                           degree=3 if self.degree is None else self.degree,
                           coef0=1 if self.coef0 is None else self.coef0,
                           kernel_params=self.kernel_params, n_threads=self.n_threads)

    def fit(self, X, y=None):
        """Draw the landmarks and compute W^(-1/2)."""
        check_kernel_param(self.kernel)
        if isinstance(self.kernel, str) and self.kernel == "precomputed":
            raise ValueError("kernel='precomputed' is not supported: Nystroem evaluates the "
                             "kernel on the samples themselves")
        if callable(self.kernel) or isinstance(self.kernel, Kernel):
            if self.gamma is not None or self.coef0 is not None or self.degree is not None:
                raise ValueError("Don't pass gamma, coef0 or degree to Nystroem if using a "
                                 "callable or a kernel object")
        k = self.n_components
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Integral):
            raise TypeError(f"n_components must be an integer, got {k!r}")
        if k < 1:
            raise ValueError(f"n_components must be >= 1, got {k}")
        check_n_threads(self.n_threads)
        X = check_array_2d(X, "X")
        X = np.asarray(X, dtype=result_dtype(X))
        n = X.shape[0]
        if k > n:
            warnings.warn("n_components > n_samples. This is not possible.\nn_components was "
                          "set to n_samples, which results in inefficient evaluation of the "
                          "full kernel.")
            k = n
        rnd = check_random_state(self.random_state)
        inds = rnd.permutation(n)[:k].astype(np.int64)
        basis = X[inds]
        W = np.asarray(self._gram(basis))
        U, S, Vt = np.linalg.svd(W)
        S = np.maximum(S, 1e-12)
        self.normalization_ = (U / np.sqrt(S)) @ Vt
        self.components_ = basis
        self.component_indices_ = inds
        self.n_features_in_ = X.shape[1]
        self._n_features_out = k
        return self

    def transform(self, X):
        """phi(X) = K(X, components_) @ normalization_.T, shape (n_samples, n_components)."""
        check_is_fitted(self)
        X = check_array_2d(X, "X")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but Nystroem is expecting "
                             f"{self.n_features_in_} features as input")
        X = np.asarray(X, dtype=self.components_.dtype)
        return self._gram(X, self.components_) @ self.normalization_.T
