"""Kernel PCA for many samples: matrix-free exact solver and Nystroem approximation.

``fastkern.decomposition.KernelPCA`` calls :func:`fit_kernel_pca` and
:func:`transform_kernel_pca` when ``eigen_solver`` is "matrix-free" or
"nystrom" (or "auto" and the dense Gram would exceed ``memory_budget``).

Matrix-free solver
------------------
The centred Gram is never formed.  With N training rows, K = K(X, X), the row
means r = K 1 / N and the grand mean m = 1^T K 1 / N^2 (K is symmetric, so
row and column means agree), the double-centred kernel is

    K~ = (I - 1 1^T / N) K (I - 1 1^T / N) = K - 1 r^T - r 1^T + m 1 1^T,

so for a block V (N x b), with s = 1^T V (1 x b),

    K~ V = K V - 1 (r^T V) - r s + m 1 s,

and only K V needs the kernel: ``fastkern._matfree`` computes it tile by tile
(one pass over K per product; r and m come from one extra pass).  A new block
X_t (n_t rows) is centred with the training means, as ``KernelCenterer``:

    K~_t A = K_t A - 1 (r^T A) - k_t (1^T A) + m 1 (1^T A),   k_t = K_t 1 / N,

where K_t = K(X_t, X) and A = eigenvectors / sqrt(eigenvalues); K_t A and
K_t 1 come from the same pass by appending a column of ones to A.

Memory: O(N b) for the eigensolver's blocks plus one 256 x 256 tile per
thread.  The eigenvalues are those of K~ (the scale of scikit-learn's
KernelPCA), converged on the residuals ||K~ v - l v|| <= tol * l_max.

Nystroem solver
---------------
m landmarks L drawn at random give the feature map phi(x) = K(x, L) W^(-1/2)
with W = K(L, L) (:class:`fastkern.nystroem.Nystroem`), and K ~ Phi Phi^T.
With the column means mu of Phi and Phi - mu = U S V^T, the centred Gram is
approximated by U S^2 U^T: eigenvalues S^2 (the top of the spectrum of the
m x m matrix (Phi - mu)^T (Phi - mu) = V S^2 V^T), eigenvectors
U = (Phi - mu) V / S, and a new point projects to (phi(x) - mu) V.
Memory O(N m).
"""
import contextlib
import contextvars
import logging
import numbers
import sys
import time

import numpy as np
import scipy.linalg

from fastkern import _gram, _matfree
from fastkern._kernel_api import check_kernel_param, kernel_gram, resolve_gamma
from fastkern._validation import (check_array_2d, check_n_threads, check_real, is_dask_array,
                                  parse_memory_budget, result_dtype)
from fastkern._eigen import column_signs
from fastkern._threads import blas_limit
from fastkern.pairwise import KERNEL_CODES, KERNEL_PARAMS, uses_direct_path

__all__ = ["fit_kernel_pca", "transform_kernel_pca", "KernelOperator", "parse_memory_budget",
           "reporting_progress"]

logger = logging.getLogger("fastkern")

_TILE = _matfree.tile_size
_SOLVERS = ("matrix-free", "nystrom")
# Who hears how far a pass over K has got (see reporting_progress).
_PROGRESS_SINK = contextvars.ContextVar("fastkern_progress_sink", default=None)
_PASS_LABEL = contextvars.ContextVar("fastkern_pass_label", default="pass over K")


@contextlib.contextmanager
def reporting_progress(sink):
    """Within the block, matrix-free passes over K report to ``sink(label, fraction)``.

    label says which pass ("row means", "pass 3, largest residual 2.1e-05",
    "transform"); fraction runs from 0 to 1 within it.  The command line
    draws its progress bar from these calls; the estimators' signatures stay
    scikit-learn's.
    """
    token = _PROGRESS_SINK.set(sink)
    try:
        yield
    finally:
        _PROGRESS_SINK.reset(token)


@contextlib.contextmanager
def _label(label):
    token = _PASS_LABEL.set(label)
    try:
        yield
    finally:
        _PASS_LABEL.reset(token)


def _report_fraction():
    """A per-pass progress callback for the current sink, or None without one."""
    sink = _PROGRESS_SINK.get()
    if sink is None:
        return None
    label = _PASS_LABEL.get()
    sink(label, 0.0)
    return lambda fraction: sink(label, fraction)


class KernelOperator:
    """Products with K(A, X) for fixed training rows X, without storing the kernel.

    String kernels (and fastkern's base kernel objects) run the Cython tile loop
    of ``fastkern._matfree``; other kernels (callables, composed kernel objects)
    are evaluated in row blocks by ``kernel_gram`` and multiplied by NumPy;
    "precomputed" multiplies the given kernel matrix.
    """

    def __init__(self, X, *, kernel="rbf", gamma=None, degree=3, coef0=1,
                 kernel_params=None, n_threads=None, memory_budget=None):
        self.X = X
        self.n_threads = check_n_threads(n_threads)
        self.kernel = kernel
        self.kernel_params = kernel_params
        self.gamma, self.degree, self.coef0 = gamma, degree, coef0
        self.budget = memory_budget
        spec = _cython_spec(kernel, gamma, degree, coef0, kernel_params, X.shape[1])
        self.spec = spec
        if spec is not None:
            self._setup_tiles(spec)
        elif kernel != "precomputed":
            # One block of rows of K(A, X) at a time, in float64.
            rows = _TILE if memory_budget is None else memory_budget // (8 * X.shape[0])
            if rows < 1:
                raise ValueError(
                    f"memory_budget={memory_budget} bytes is too small for one row of "
                    f"the kernel matrix ({8 * X.shape[0]} bytes)")
            self.block_rows = int(min(rows, _TILE))

    def _setup_tiles(self, spec):
        X = self.X
        self.direct = uses_direct_path(spec["kind"], X.shape[1])
        per_thread = _TILE * _TILE * (X.itemsize + (8 if X.dtype == np.float32 else 0))
        if self.budget is not None:
            if self.budget < per_thread:
                raise ValueError(
                    f"memory_budget={self.budget} bytes is too small for one "
                    f"{_TILE} x {_TILE} kernel tile ({per_thread} bytes)")
            # Fewer threads rather than more memory than the caller allowed.
            self.n_threads = max(1, min(self.n_threads, self.budget // per_thread))
        self.Xt = np.ascontiguousarray(X.T) if self.direct else X
        # BLAS RBF works on rows centred in float64 (see fastkern._gram):
        # O(N d) more memory, outside the tile budget.
        self.mean = None
        self.Xc, self.xn = np.empty((0, X.shape[1])), np.empty(0)
        if spec["kind"] == KERNEL_CODES["rbf"] and not self.direct:
            self.mean = _gram.common_mean(X)
            self.Xc, self.xn = _gram.centred_rows(X, self.mean, self.n_threads)
        self.tiles = np.empty((self.n_threads, _TILE * _TILE), dtype=X.dtype)
        self.dtiles = np.empty((self.n_threads, _TILE * _TILE) if X.dtype == np.float32
                               else (1, 1))

    def matmat(self, V, A=None):
        """K(A, X) @ V (A None means X itself) as a float64 (n_A, b) array."""
        V = np.ascontiguousarray(V, dtype=np.float64)
        return self._product(V, A)

    def row_sums(self, A=None):
        """K(A, X) @ 1 as a float64 vector."""
        if self.spec is not None:
            return self._product(np.empty((self.X.shape[0], 0)), A)[:, 0]
        return self._product(np.ones((self.X.shape[0], 1)), A)[:, 0]

    def _product(self, V, A):
        symmetric = A is None
        A = self.X if symmetric else A
        if self.spec is None:
            return self._product_blocks(V, A, symmetric)
        progress = _report_fraction()
        spec = self.spec
        out = np.empty((A.shape[0], max(V.shape[1], 1)))
        Ac, an = self.Xc, self.xn
        if self.mean is not None and not symmetric:
            Ac, an = _gram.centred_rows(A, self.mean, self.n_threads)
        with blas_limit(1):
            _matfree.kernel_product(A, self.X, self.Xt, Ac, self.Xc, an, self.xn, V, out,
                                    self.tiles, self.dtiles, spec["kind"], spec["gamma"],
                                    spec["coef0"], spec["degree"], self.direct, symmetric,
                                    self.n_threads, progress)
        return out

    def _product_blocks(self, V, A, symmetric):
        if self.kernel == "precomputed":
            return np.asarray(A, dtype=np.float64) @ V
        progress = _report_fraction()
        out = np.empty((A.shape[0], V.shape[1]))
        for i in range(0, A.shape[0], self.block_rows):
            block = kernel_gram(A[i:i + self.block_rows], self.X, kernel=self.kernel,
                                gamma=self.gamma, degree=self.degree, coef0=self.coef0,
                                kernel_params=self.kernel_params, n_threads=self.n_threads)
            np.matmul(block, V, out=out[i:i + self.block_rows], dtype=np.float64)
            if progress is not None:
                progress(min(1.0, (i + self.block_rows) / A.shape[0]))
        return out


def _cython_spec(kernel, gamma, degree, coef0, kernel_params, n_features):
    """Kernel code and parameters for _matfree, or None if the kernel has no tile loop."""
    from fastkern.kernels import _Base

    if isinstance(kernel, _Base):
        name, params = kernel._metric, dict(kernel._params())
    elif isinstance(kernel, str) and kernel in KERNEL_CODES:
        name = kernel
        params = {"gamma": gamma, "degree": degree, "coef0": coef0}
        params.update(kernel_params or {})
        params = {k: v for k, v in params.items() if k in KERNEL_PARAMS[kernel]}
    else:
        return None
    g = params.get("gamma")
    return {
        "kind": KERNEL_CODES[name],
        "gamma": 1.0 / n_features if g is None else check_real(g, "gamma", low=0.0),
        "degree": check_real(params.get("degree", 3), "degree", low=1.0),
        "coef0": check_real(params.get("coef0", 1), "coef0"),
    }


class _Progress:
    """Times each pass over K and reports the eigensolver's residuals."""

    def __init__(self, verbose, solver):
        self.verbose = bool(verbose)
        self.solver = solver
        self.passes = 0
        self.pass_seconds = 0.0
        self.last = 0.0
        self.residual = None

    def report(self, msg, *args):
        logger.log(logging.INFO if self.verbose else logging.DEBUG, msg, *args)
        if self.verbose and not logger.hasHandlers():
            print("[fastkern] " + msg % args, file=sys.stderr)

    def timed(self, fn, label=None):
        def wrapped(*args):
            t0 = time.perf_counter()
            token = _PASS_LABEL.set(label or self.pass_label())
            try:
                result = fn(*args)
            finally:
                _PASS_LABEL.reset(token)
            self.last = time.perf_counter() - t0
            self.passes += 1
            self.pass_seconds += self.last
            return result
        return wrapped

    def pass_label(self):
        label = f"pass {self.passes + 1}"
        if self.residual is not None:
            label += f", largest residual {self.residual:.1e}"
        return label

    def callback(self, iteration, residuals):
        residuals = np.asarray(residuals, dtype=np.float64)
        self.residual = float(residuals.max())
        self.report("%s iteration %d: max residual %.3e (per component %s); last pass %.2f s",
                    self.solver, iteration, residuals.max(),
                    np.array2string(residuals, formatter={"float_kind": "{:.2e}".format}),
                    self.last)


def _check_n_components(est, n, upper, solver):
    k = est.n_components
    if k is None:
        raise ValueError(f"eigen_solver={solver!r} needs n_components to be set "
                         "(it computes only the leading components)")
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Integral):
        raise TypeError(f"n_components must be an integer, got {k!r}")
    if not 1 <= k <= upper:
        raise ValueError(f"n_components={k} must be in [1, {upper}] for "
                         f"eigen_solver={solver!r} with {n} samples")
    return int(k)


def _finish(est, eigenvalues, eigenvectors):
    """Order, clip and sign-fix as scikit-learn's KernelPCA; returns the order and signs."""
    from sklearn.utils.validation import _check_psd_eigenvalues

    eigenvalues = np.asarray(eigenvalues, dtype=np.float64)
    order = np.argsort(eigenvalues)[::-1]
    eigenvalues = _check_psd_eigenvalues(eigenvalues[order], enable_warnings=False)
    eigenvectors = eigenvectors[:, order]
    signs = column_signs(eigenvectors)
    eigenvectors = eigenvectors * signs
    if getattr(est, "remove_zero_eig", False):
        keep = eigenvalues > 0
        eigenvalues, eigenvectors, signs = eigenvalues[keep], eigenvectors[:, keep], signs[keep]
    est.eigenvalues_ = eigenvalues
    est.eigenvectors_ = np.ascontiguousarray(eigenvectors)
    return order, signs


def _validate_fit(est, X):
    solver = est.eigen_solver if est.eigen_solver in _SOLVERS else "matrix-free"
    check_kernel_param(est.kernel)
    X = check_array_2d(X, "X")
    X = np.ascontiguousarray(X, dtype=result_dtype(X))
    if X.shape[0] < 2:
        raise ValueError(f"X must have at least 2 samples for KernelPCA, got {X.shape[0]}")
    if est.kernel == "precomputed" and X.shape[0] != X.shape[1]:
        raise ValueError(f"X must be a square kernel matrix for kernel='precomputed', "
                         f"got shape {X.shape}")
    # gamma="scale"/"median" resolved once, on the training X (in-process and Dask).
    est._fit_gamma = resolve_gamma(est.gamma, X, est.kernel)
    return solver, X


def fit_kernel_pca(est, X, *, client=None, timeout=600.0):
    """Fit ``est`` (a fastkern KernelPCA) with the matrix-free or Nystroem solver.

    Sets eigenvalues_ (descending, eigenvalues of the centred Gram),
    eigenvectors_ (N x k, unit columns, largest entry of each positive),
    X_fit_, n_features_in_, gamma_, _fit_solver, and what transform needs:
    _fit_row_means (float64 (N,)) and _fit_grand_mean (float) for
    "matrix-free"; _nystroem_map, _nystroem_mean and _nystroem_basis for
    "nystrom".  A dask array X, or a ``distributed.Client`` given as
    ``client``, runs the kernel passes on that cluster (fastkern._dask):
    each pass, and the loading of a dask X, must finish within ``timeout``
    seconds or raise TimeoutError.
    """
    if client is not None or is_dask_array(X):
        from fastkern import _dask

        return _dask.fit_kernel_pca(est, X, client=client, timeout=timeout)
    solver, X = _validate_fit(est, X)
    budget = parse_memory_budget(getattr(est, "memory_budget", None))
    if solver == "nystrom":
        _fit_nystrom(est, X, budget)
    else:
        op = KernelOperator(X, kernel=est.kernel, gamma=est._fit_gamma, degree=est.degree,
                            coef0=est.coef0, kernel_params=est.kernel_params,
                            n_threads=est.n_threads, memory_budget=budget)
        solve_matrix_free(est, X, op.matmat, op.row_sums)
    return est


def _set_common(est, X, solver):
    # Results in the data's precision, as the dense solver (float32 stays float32).
    est.eigenvalues_ = est.eigenvalues_.astype(X.dtype, copy=False)
    est.eigenvectors_ = est.eigenvectors_.astype(X.dtype, copy=False)
    est.X_fit_ = np.array(X, copy=True) if getattr(est, "copy_X", True) else X
    est.n_features_in_ = X.shape[1]
    est.gamma_ = 1.0 / X.shape[1] if est._fit_gamma is None else est._fit_gamma
    est._fit_solver = solver


def solve_matrix_free(est, X, matmat, row_sums):
    """Eigen-decompose the implicitly centred K given K @ V and K @ 1 (any backend)."""
    from fastkern._eigen import block_eigsh

    n = X.shape[0]
    k = _check_n_components(est, n, n - 1, "matrix-free")
    progress = _Progress(getattr(est, "verbose", False), "matrix-free")
    matmat = progress.timed(matmat)
    row_sums = progress.timed(row_sums, "row means")
    r = row_sums() / n
    if not np.all(np.isfinite(r)):
        raise ValueError("the kernel matrix of X contains NaN or infinity "
                         "(check gamma and the scale of X)")
    m = float(r.mean())
    progress.report("matrix-free: N=%d, k=%d; row-mean pass %.2f s", n, k, progress.last)

    def centred(V):
        s = V.sum(axis=0)
        KV = matmat(V)
        KV -= r @ V
        KV -= np.outer(r, s)
        KV += m * s
        return KV

    tol = est.tol if est.tol and est.tol > 0 else 1e-10
    t0 = time.perf_counter()
    values, vectors = block_eigsh(centred, n, k, dtype=np.float64, tol=tol,
                                  max_iter=est.max_iter, random_state=est.random_state,
                                  callback=progress.callback)
    progress.report("matrix-free: done in %.2f s, %d passes over K (%.2f s each on average)",
                    time.perf_counter() - t0, progress.passes,
                    progress.pass_seconds / max(progress.passes, 1))
    _finish(est, values, vectors)
    _set_common(est, X, "matrix-free")
    est._fit_row_means = r
    est._fit_grand_mean = m
    return est


def _fit_nystrom(est, X, budget):
    from fastkern.nystroem import Nystroem

    n = X.shape[0]
    m = est.n_landmarks if est.n_landmarks is not None else min(n, 1000)
    if isinstance(m, (bool, np.bool_)) or not isinstance(m, numbers.Integral):
        raise TypeError(f"n_landmarks must be None or an integer, got {m!r}")
    if not 1 <= m <= n:
        raise ValueError(f"n_landmarks={m} must be in [1, n_samples={n}]")
    if est.kernel == "precomputed":
        raise ValueError("eigen_solver='nystrom' needs the samples, not kernel='precomputed'")
    k = _check_n_components(est, n, m, "nystrom")
    if budget is not None and 3 * n * m * 8 > budget:
        raise ValueError(f"memory_budget={budget} bytes is too small for the Nystroem "
                         f"solver with n_landmarks={m} (needs about {3 * n * m * 8} bytes)")
    progress = _Progress(getattr(est, "verbose", False), "nystrom")
    t0 = time.perf_counter()
    params = _kernel_params(est)
    feature_map = Nystroem(n_components=m, random_state=est.random_state,
                           n_threads=est.n_threads, **params).fit(X)
    Phi = feature_map.transform(X).astype(np.float64, copy=False)
    mean = Phi.mean(axis=0)
    Phi -= mean
    # Top k of Phi^T Phi = V S^2 V^T (m x m) instead of an N x m SVD: the
    # leading singular pairs are all we keep, and U = Phi V / S.
    G = Phi.T @ Phi
    values, V = scipy.linalg.eigh(G, subset_by_index=(m - k, m - 1))
    values = np.maximum(values, 0.0)
    U = Phi @ V
    del Phi
    norms = np.linalg.norm(U, axis=0)
    U /= np.where(norms > 0, norms, 1.0)
    order, signs = _finish(est, values, U)
    est._nystroem_basis = np.ascontiguousarray(V[:, order] * signs)
    est._nystroem_map = feature_map
    est._nystroem_mean = mean
    _set_common(est, X, "nystrom")
    progress.report("nystrom: N=%d, %d landmarks, k=%d in %.2f s", n, m, k,
                    time.perf_counter() - t0)
    return est


def _kernel_params(est):
    return {"kernel": est.kernel, "gamma": est._fit_gamma, "degree": est.degree,
            "coef0": est.coef0, "kernel_params": est.kernel_params}


def _validate_transform(est, X):
    X = check_array_2d(X, "X")
    if X.shape[1] != est.n_features_in_:
        raise ValueError(f"X has {X.shape[1]} features, but KernelPCA is expecting "
                         f"{est.n_features_in_} features as input")
    return np.ascontiguousarray(X, dtype=est.X_fit_.dtype)


def transform_kernel_pca(est, X, *, client=None, timeout=600.0):
    """Project X on the components fitted by :func:`fit_kernel_pca`.

    With a dask array X or a client (``client``) the cross-kernel pass of
    the matrix-free solver runs on the cluster; it, and the loading of a dask
    X, must finish within ``timeout`` seconds or raise TimeoutError.
    """
    if is_dask_array(X):
        from fastkern import _dask

        X, _ = _dask.materialize(X, client=client, timeout=timeout)
    X = _validate_transform(est, X)
    if est._fit_solver == "nystrom":
        phi = est._nystroem_map.transform(X).astype(np.float64, copy=False)
        return ((phi - est._nystroem_mean) @ est._nystroem_basis).astype(X.dtype, copy=False)
    A = scaled_eigenvectors(est)
    n = est.X_fit_.shape[0]
    A1 = np.hstack([A, np.ones((n, 1))])
    if client is not None:
        from fastkern import _dask

        KA = _dask.cross_product(est, X, A1, client=client, timeout=timeout)
    else:
        budget = parse_memory_budget(getattr(est, "memory_budget", None))
        op = KernelOperator(est.X_fit_, kernel=est.kernel, gamma=est._fit_gamma,
                            degree=est.degree, coef0=est.coef0,
                            kernel_params=est.kernel_params, n_threads=est.n_threads,
                            memory_budget=budget)
        with _label("transform"):
            KA = op.matmat(A1, X)
    kt = KA[:, -1] / n
    KA = KA[:, :-1]
    r, m = est._fit_row_means, est._fit_grand_mean
    ones_A = A.sum(axis=0)
    KA -= r @ A
    KA -= np.outer(kt, ones_A)
    KA += m * ones_A
    return KA.astype(X.dtype, copy=False)


def scaled_eigenvectors(est):
    """eigenvectors_ / sqrt(eigenvalues_), with zero columns for zero eigenvalues."""
    A = np.zeros_like(est.eigenvectors_, dtype=np.float64)
    nz = est.eigenvalues_ > 0
    A[:, nz] = est.eigenvectors_[:, nz] / np.sqrt(est.eigenvalues_[nz])
    return A
