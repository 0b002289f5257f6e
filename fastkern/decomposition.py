"""Kernel PCA on one in-place Gram buffer.

``KernelPCA`` is a drop-in for ``sklearn.decomposition.KernelPCA``: the Gram
matrix is computed once into a C-contiguous buffer, double-centred in place
(``KernelCenterer.fit_transform(K, copy=False)``) and handed to the eigensolver without copies, so fitting needs
about one N x N matrix where scikit-learn needs up to three.
"""

import numpy as np
from scipy import linalg
from scipy.sparse.linalg import eigsh
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils import check_random_state
from sklearn.utils.extmath import svd_flip
from sklearn.utils.validation import _check_psd_eigenvalues, check_is_fitted, validate_data

from fastkern._eigen import block_eigsh
from fastkern._kernel_api import check_kernel_param, kernel_gram
from fastkern._threads import limits_blas
from fastkern._validation import (_all_finite, check_int, check_n_threads, check_real,
                                  is_dask_array, memory_budget_bytes)
from fastkern.centering import KernelCenterer
from fastkern.kernel_ridge import gram_buffer, solve_shifted_in_place

__all__ = ["KernelPCA"]

EIGEN_SOLVERS = ("auto", "dense", "lanczos", "arpack", "matrix-free", "nystrom")
LARGE_N_SOLVERS = ("matrix-free", "nystrom")
_BOUNDED_KERNELS = ("rbf", "laplacian", "sigmoid")


def lanczos_block_size(k):
    """Columns per block product of the "lanczos" solver.

    A product with 16 columns costs no more than one with 10 (measured at
    N=8000: both read K once) and converges in fewer products.
    """
    return max(16, k + max(5, k // 2))

# "auto" uses the block Krylov solver above this many samples when few
# components are wanted (the dense LAPACK reduction costs O(n^3) whatever k).
_LANCZOS_MIN_SAMPLES = 200


class KernelPCA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Kernel principal component analysis, a drop-in for scikit-learn's ``KernelPCA``.

    With Kc the double-centred training Gram matrix and (lambda_j, u_j) its top
    eigenpairs, the embedding of the training set is ``sqrt(lambda_j) u_j``
    and a new point x is projected as ``kc(x) @ u_j / sqrt(lambda_j)``, where
    kc(x) is k(x, X_fit_) centred with the training means.  Eigenvector signs
    follow scikit-learn (``svd_flip``: the largest-magnitude entry of each
    eigenvector is positive).

    Parameters (as scikit-learn where the name exists)
    n_components : int or None (all non-zero components); > n_samples is an error.
    kernel : "linear", "poly", "rbf", "laplacian", "sigmoid", "exponential",
        "precomputed", a fastkern kernel object or a callable; gamma, degree,
        coef0, kernel_params as scikit-learn.
    alpha, fit_inverse_transform : the kernel ridge pre-image map (``inverse_transform``).
    eigen_solver : "dense" (LAPACK syevr on the centred Gram, in place),
        "lanczos" (fastkern's block Krylov solver, reading K once per block
        product), "arpack" (scipy's eigsh on the centred Gram), "matrix-free"
        or "nystrom" (fastkern.large_n: the Gram is never stored), or "auto":
        the large-N solvers when the dense Gram would exceed ``memory_budget``,
        else "lanczos" for more than 200 samples and few components
        (k < 10 or k <= n / 50), else "dense".
    tol, max_iter : eigensolver convergence (tol=0: the solver's default).  For
        "lanczos", converged means every residual ||K v - lambda v|| <= tol *
        lambda_max (default tol 1e-10); on max_iter it warns with the residual
        norms and keeps the best Ritz pairs found.  A fixed random_state makes
        "lanczos" and "arpack" bit-identical from run to run.
    remove_zero_eig, random_state, copy_X : as scikit-learn.  For
        kernel="precomputed", ``X_fit_`` references the given kernel (only its
        shape is used) so that no second N x N copy is kept.
    n_jobs : accepted for compatibility, unused (see n_threads).
    n_threads : threads of the Gram and centering kernels (None = OpenMP default).
    memory_budget : bytes the Gram matrix may use; None = half the available RAM.
    n_landmarks : number of Nystrom landmarks (eigen_solver="nystrom").
    verbose : print eigensolver progress.

    Attributes: eigenvalues_, eigenvectors_, X_fit_, gamma_, n_features_in_,
    dual_coef_ and X_transformed_fit_ (with fit_inverse_transform).
    """

    def __init__(self, n_components=None, *, kernel="linear", gamma=None, degree=3, coef0=1,
                 kernel_params=None, alpha=1.0, fit_inverse_transform=False,
                 eigen_solver="auto", tol=0, max_iter=None, remove_zero_eig=False,
                 random_state=None, copy_X=True, n_jobs=None, n_threads=None,
                 memory_budget=None, n_landmarks=None, verbose=False):
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
        self.remove_zero_eig = remove_zero_eig
        self.random_state = random_state
        self.copy_X = copy_X
        self.n_jobs = n_jobs
        self.n_threads = n_threads
        self.memory_budget = memory_budget
        self.n_landmarks = n_landmarks
        self.verbose = verbose

    @property
    def _precomputed(self):
        return isinstance(self.kernel, str) and self.kernel == "precomputed"

    def _check_params(self):
        check_kernel_param(self.kernel)
        check_n_threads(self.n_threads)
        check_int(self.n_components, "n_components", 1, allow_none=True)
        check_int(self.max_iter, "max_iter", 1, allow_none=True)
        check_int(self.n_landmarks, "n_landmarks", 1, allow_none=True)
        check_real(self.alpha, "alpha", low=0.0)
        check_real(self.tol, "tol", low=0.0)
        check_real(self.gamma, "gamma", low=0.0, allow_none=True)
        if not (isinstance(self.eigen_solver, str) and self.eigen_solver in EIGEN_SOLVERS):
            raise ValueError(f"eigen_solver must be one of {EIGEN_SOLVERS}, "
                             f"got {self.eigen_solver!r}")
        if self.fit_inverse_transform and self._precomputed:
            raise ValueError("Cannot fit_inverse_transform with a precomputed kernel.")

    def _kernel(self, X, Y=None, *, gamma=None, out=None):
        return kernel_gram(X, Y, kernel=self.kernel, gamma=self.gamma if gamma is None else gamma,
                           degree=self.degree, coef0=self.coef0, kernel_params=self.kernel_params,
                           n_threads=self.n_threads, out=out)

    def _choose_solver(self, n, k, itemsize):
        solver = self.eigen_solver
        if solver != "auto":
            return solver
        if not self._precomputed and n * n * itemsize > memory_budget_bytes(self.memory_budget):
            return "matrix-free"
        if n > _LANCZOS_MIN_SAMPLES and (k < 10 or k <= n // 50):
            return "lanczos"
        return "dense"

    @limits_blas
    def fit(self, X, y=None, *, client=None, timeout=600.0):
        """Fit the model from X (n_samples, n_features), or a precomputed kernel (n, n).

        A ``dask.array`` X, or a ``distributed.Client`` given as ``client``, runs
        the matrix-free solver's kernel passes on that Dask cluster
        (``fastkern._dask``); ``transform`` then uses the same client and
        timeout.  ``timeout`` (seconds, default 600) bounds each pass over the
        cluster, retries after a lost worker included, and the loading of a
        dask X: a lost cluster raises TimeoutError instead of hanging.
        """
        self._fit(X, client, timeout)
        return self

    def _fit(self, X, client=None, timeout=600.0):
        self._check_params()
        memory_budget_bytes(self.memory_budget)
        from fastkern import large_n

        self._client = client
        self._timeout = check_real(timeout, "timeout", low=0, low_inclusive=False)
        if client is not None or is_dask_array(X):
            # sklearn's validation would load a dask array into memory; the
            # Dask backend validates it block by block instead.
            if self.eigen_solver not in ("auto", "matrix-free"):
                raise ValueError("a dask array or a Dask client needs eigen_solver='matrix-free' "
                                 f"(or 'auto'), got {self.eigen_solver!r}")
            if self._precomputed:
                raise ValueError("kernel='precomputed' cannot run on a Dask cluster")
            self.n_features_in_ = X.shape[1] if len(X.shape) == 2 else None
            self.gamma_ = 1 / X.shape[1] if self.gamma is None else self.gamma
            large_n.fit_kernel_pca(self, X, client=client, timeout=self._timeout)
            return None
        X = validate_data(self, X, dtype=[np.float64, np.float32])
        n = X.shape[0]
        if self._precomputed and X.shape[1] != n:
            raise ValueError(f"X must be a square kernel matrix for kernel='precomputed', "
                             f"got shape {X.shape}")
        if self.n_components is not None and self.n_components > n:
            raise ValueError(f"n_components={self.n_components} must be <= n_samples={n}")
        k = n if self.n_components is None else self.n_components
        solver = self._choose_solver(n, k, X.dtype.itemsize)
        self.gamma_ = 1 / X.shape[1] if self.gamma is None else self.gamma
        if solver in LARGE_N_SOLVERS:
            large_n.fit_kernel_pca(self, X)
            return None
        if solver == "arpack" and k >= n:
            raise ValueError(f"eigen_solver='arpack' needs n_components < n_samples, got "
                             f"n_components={k}, n_samples={n}; use eigen_solver='dense'")

        K = gram_buffer(X, kernel=self.kernel, gamma=self.gamma_, degree=self.degree,
                        coef0=self.coef0, kernel_params=self.kernel_params,
                        n_threads=self.n_threads, dtype=X.dtype)
        # RBF, Laplacian and sigmoid values lie in [-1, 1] for finite X: only
        # the other kernels can overflow, so only they pay a pass over K.
        if self.kernel not in _BOUNDED_KERNELS and not _all_finite(K):
            raise ValueError("the kernel matrix contains NaN or infinity (overflow in the "
                             "kernel? check gamma)")
        # One pass for the means, one for the in-place update (K was built
        # here, C-contiguous and finite, so it is not scanned again).
        self._centerer = KernelCenterer(n_threads=self.n_threads)
        self._centerer._fit_transform_checked(K)
        eigenvalues, eigenvectors = self._eigen(K, solver, k)

        eigenvalues = _check_psd_eigenvalues(eigenvalues, enable_warnings=False)
        eigenvectors, _ = svd_flip(u=eigenvectors, v=None)
        order = eigenvalues.argsort()[::-1]
        eigenvalues, eigenvectors = eigenvalues[order], eigenvectors[:, order]
        if self.remove_zero_eig or self.n_components is None:
            keep = eigenvalues > 0
            eigenvalues, eigenvectors = eigenvalues[keep], eigenvectors[:, keep]
        self.eigenvalues_ = eigenvalues.astype(X.dtype, copy=False)
        self.eigenvectors_ = np.ascontiguousarray(eigenvectors, dtype=X.dtype)
        self._fit_solver = solver

        X_transformed = None
        if self.fit_inverse_transform:
            X_transformed = self.eigenvectors_ * np.sqrt(self.eigenvalues_)
            # The Gram buffer is dead after the eigensolver: the pre-image
            # kernel is computed into it, so only one N x N array is ever live.
            Kt = self._kernel(X_transformed, gamma=self.gamma_, out=K)
            del K
            self.dual_coef_ = solve_shifted_in_place(Kt, X.astype(Kt.dtype, copy=False),
                                                     float(self.alpha))
            self.X_transformed_fit_ = X_transformed
        else:
            del K
        if self._precomputed:
            self.X_fit_ = X
        else:
            self.X_fit_ = np.array(X, copy=True) if self.copy_X else X
        return X_transformed

    def _eigen(self, K, solver, k):
        n = K.shape[0]
        if solver == "dense":
            return linalg.eigh(K.T, subset_by_index=(n - k, n - 1), overwrite_a=True,
                               driver="evr", check_finite=False)
        if solver == "arpack":
            v0 = check_random_state(self.random_state).uniform(-1, 1, n)
            return eigsh(K, k, which="LA", tol=self.tol, maxiter=self.max_iter, v0=v0)
        callback = None
        if self.verbose:
            def callback(iteration, residuals):
                print(f"[KernelPCA] lanczos iteration {iteration}: "
                      f"max residual {residuals.max():.3e}", flush=True)
        # K is symmetric, so K V = (V^T K)^T; OpenBLAS runs the short-wide
        # product V^T K about 1.8x faster than K V for a block of 10-16 columns
        # (measured at N=8000 on the 2-core machine: 34 ms against 61 ms).
        # Random columns of K start the iteration: K applied to unit vectors,
        # one step of it for free.
        p = lanczos_block_size(k)
        rng = check_random_state(self.random_state)
        v0 = K[:, np.sort(rng.choice(n, size=min(p, n), replace=False))]
        return block_eigsh(lambda V: (np.ascontiguousarray(V.T) @ K).T, n, k, dtype=K.dtype,
                           block_size=p, tol=self.tol if self.tol > 0 else 1e-10,
                           max_iter=self.max_iter, random_state=rng, callback=callback, v0=v0)

    @limits_blas
    def fit_transform(self, X, y=None, *, client=None, timeout=600.0):
        """Fit and return the training embedding sqrt(eigenvalues_) * eigenvectors_.

        ``client`` and ``timeout`` (seconds per pass over a Dask cluster) are
        those of :meth:`fit`.
        """
        X_transformed = self._fit(X, client, timeout)
        if X_transformed is None:
            X_transformed = self.eigenvectors_ * np.sqrt(self.eigenvalues_)
        return X_transformed

    @limits_blas
    def transform(self, X):
        """Project X (or, for kernel="precomputed", k(X, X_train)) on the components.

        After a fit on a Dask cluster the pass runs there, with fit's timeout.
        """
        check_is_fitted(self, "eigenvectors_")
        from fastkern import large_n

        client = getattr(self, "_client", None)
        if self._fit_solver in LARGE_N_SOLVERS and (client is not None
                                                    or is_dask_array(X)):
            return large_n.transform_kernel_pca(self, X, client=client,
                                                timeout=getattr(self, "_timeout", 600.0))
        X = validate_data(self, X, dtype=[np.float64, np.float32], reset=False)
        if self._fit_solver in LARGE_N_SOLVERS:
            return large_n.transform_kernel_pca(self, X)
        if self._precomputed:
            K = np.array(self._kernel(X, self.X_fit_), dtype=self.eigenvectors_.dtype,
                         order="C", copy=True)
        else:
            K = self._kernel(X.astype(self.X_fit_.dtype, copy=False), self.X_fit_,
                             gamma=self.gamma_)
        K = self._centerer.transform(K, copy=False)
        nonzero = np.flatnonzero(self.eigenvalues_)
        scaled = np.zeros_like(self.eigenvectors_)
        scaled[:, nonzero] = self.eigenvectors_[:, nonzero] / np.sqrt(self.eigenvalues_[nonzero])
        return K @ scaled

    @limits_blas
    def inverse_transform(self, X):
        """Approximate pre-images: k(X, X_transformed_fit_) @ dual_coef_ (kernel ridge)."""
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
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        tags.input_tags.pairwise = self._precomputed
        return tags
