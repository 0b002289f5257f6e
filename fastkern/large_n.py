"""Kernel PCA for many samples: matrix-free exact solver and Nystroem approximation.

Solver strategies that return results and set nothing:
``fastkern.decomposition.KernelPCA`` chooses one when ``eigen_solver`` is
"matrix-free" or "nystrom" (or "auto" and the dense Gram would exceed
``memory_budget``), hands it the products with K (in-process from
``fastkern._operator``, or on a Dask cluster from ``fastkern._dask``) and
post-processes the eigenpairs in one place, as for its other solvers.

Matrix-free solver
------------------
The centred Gram is never formed.  With N training rows, K = K(X, X), the row
means r = K 1 / N and the grand mean m = 1^T K 1 / N^2 (K is symmetric, so
row and column means agree), the double-centred kernel is

    K~ = (I - 1 1^T / N) K (I - 1 1^T / N) = K - 1 r^T - r 1^T + m 1 1^T,

so for a block V (N x b), with s = 1^T V (1 x b),

    K~ V = K V - 1 (r^T V) - r s + m 1 s,

and only K V needs the kernel: ``fastkern._matfree`` computes it tile by tile
(one pass over K per product; r and m come from the first product, which
carries a column of ones).  A new block X_t (n_t rows) is centred with the
training means, as ``KernelCenterer``:

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
import logging
import time
from typing import Any, NamedTuple

import numpy as np
import scipy.linalg

from fastkern._eigen import block_eigsh, rounding_floor, top_eigh
from fastkern._operator import KernelOperator
from fastkern._progress import _PASS_LABEL, pass_label, report_iteration, reporting_progress, say

__all__ = ["MatrixFreeFit", "NystroemFit", "matrix_free_eigenpairs", "nystroem_eigenpairs",
           "in_process_products", "centred_projection", "KernelOperator",
           "reporting_progress"]

logger = logging.getLogger("fastkern")


class MatrixFreeFit(NamedTuple):
    """Result of :func:`matrix_free_eigenpairs`, a named tuple.

    Parameters
    ----------
    eigenvalues : ndarray of shape (k,)
        Eigenvalues of the centred Gram (float64, in the solver's order).
    eigenvectors : ndarray of shape (N, k)
        The eigenvectors, unit columns.
    row_means : ndarray of shape (N,)
        K 1 / N, with which transform centres a new block.
    grand_mean : float
        1^T K 1 / N^2.
    """

    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    row_means: np.ndarray
    grand_mean: float


class NystroemFit(NamedTuple):
    """Result of :func:`nystroem_eigenpairs`, a named tuple.

    Parameters
    ----------
    eigenvalues : ndarray of shape (k,)
        Eigenvalues of the approximated centred Gram.
    eigenvectors : ndarray of shape (N, k)
        The eigenvectors, unit columns.
    feature_map : fastkern.Nystroem
        The fitted map phi.
    mean : ndarray of shape (m,)
        Column means of the training features.
    basis : ndarray of shape (m, k)
        Directions in feature space: new rows project to (phi - mean) @ basis
        (columns in the order and with the signs of ``eigenvectors``).
    """

    eigenvalues: np.ndarray
    eigenvectors: np.ndarray
    feature_map: Any
    mean: np.ndarray
    basis: np.ndarray


def in_process_products(X, spec, *, n_threads=None, memory_budget=None):
    """Return the product with K(X, X) computed here with OpenMP (the in-process backend).

    For float64 X and a kernel of the compiled tile loops, each product
    evaluates only the tiles on and above the diagonal
    (``KernelOperator.symmetric_matmat``: half the kernel evaluations; at
    N=40,000, d=16 on 2 cores a pass took 0.7 of the full product's time).

    Parameters
    ----------
    X : ndarray of shape (N, n_features)
        Training rows.
    spec : fastkern._kernel_api.KernelSpec
        The kernel.
    n_threads : int, default=None
        OpenMP threads (None: the default).
    memory_budget : int, default=None
        Bytes the products' temporaries may use.

    Returns
    -------
    matmat : callable
        ``matmat(V)`` is K @ V.
    """
    op = KernelOperator.from_spec(X, spec, n_threads=n_threads, memory_budget=memory_budget)
    return op.symmetric_matmat if op.has_symmetric_product else op.matmat


class _Progress:
    """Times each pass over K and reports the eigensolver's residuals (to the
    logger, and to the progress sink of fastkern._progress)."""

    def __init__(self, verbose, solver, tol=None):
        self.verbose = bool(verbose)
        self.solver = solver
        self.tol = tol
        self.passes = 0
        self.pass_seconds = 0.0
        self.last = 0.0
        self.residual = None

    def report(self, msg, *args):
        logger.log(logging.INFO if self.verbose else logging.DEBUG, msg, *args)
        if self.verbose and not logger.hasHandlers():
            say("fastkern", msg % args)

    def timed(self, fn):
        def wrapped(*args):
            t0 = time.perf_counter()
            token = _PASS_LABEL.set(self.pass_label())
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
        if self.tol is not None:
            report_iteration(iteration, self.residual, self.tol)
        self.report("%s iteration %d: max residual %.3e (per component %s); last pass %.2f s",
                    self.solver, iteration, residuals.max(),
                    np.array2string(residuals, formatter={"float_kind": "{:.2e}".format}),
                    self.last)


def matrix_free_eigenpairs(n, k, matmat, *, tol=0, max_iter=None, random_state=None,
                           verbose=False):
    """Compute the k leading eigenpairs of the implicitly centred K from its products.

    The centring is applied to each product (see the module docstring).  The
    row means come from the first product, with a column of ones appended to
    its block, rather than from a pass of their own.

    Parameters
    ----------
    n : int
        Number of training rows.
    k : int
        Number of eigenpairs.
    matmat : callable
        ``matmat(V)`` returns K @ V (float64, (n, b)), on any backend.
    tol : float, default=0
        Residual tolerance relative to the largest eigenvalue; <= 0 means 1e-10.
    max_iter : int, default=None
        Eigensolver iterations (None: its default).
    random_state : int, RandomState or None, default=None
        Start block of the eigensolver.
    verbose : bool, default=False
        Log each pass and residual.

    Returns
    -------
    fit : MatrixFreeFit
        The eigenpairs and the training means.
    """
    tol = tol if tol and tol > 0 else 1e-10
    progress = _Progress(verbose, "matrix-free", tol)
    matmat = progress.timed(matmat)
    means = {}

    def centred(V):
        s = V.sum(axis=0)
        if not means:
            # The first product also gives K 1: the row means need no pass.
            KV1 = matmat(np.hstack([V, np.ones((n, 1))]))
            r = KV1[:, -1] / n
            if not np.all(np.isfinite(r)):
                raise ValueError("the kernel matrix of X contains NaN or infinity "
                                 "(check gamma and the scale of X)")
            means.update(r=r, m=float(r.mean()))
            KV = KV1[:, :-1]
        else:
            KV = matmat(V)
        r, m = means["r"], means["m"]
        KV -= r @ V
        KV -= np.outer(r, s)
        KV += m * s
        return KV

    t0 = time.perf_counter()
    values, vectors = block_eigsh(centred, n, k, dtype=np.float64, tol=tol,
                                  max_iter=max_iter, random_state=random_state,
                                  callback=progress.callback,
                                  floor=lambda: rounding_floor(n, means["r"]))
    progress.report("matrix-free: done in %.2f s, %d passes over K (%.2f s each on average)",
                    time.perf_counter() - t0, progress.passes,
                    progress.pass_seconds / max(progress.passes, 1))
    return MatrixFreeFit(values, vectors, means["r"], means["m"])


def centred_projection(KA1, A, row_means, grand_mean):
    """Project new rows on the components, centring with the training means.

    As ``KernelCenterer``; see the module docstring.

    Parameters
    ----------
    KA1 : ndarray of shape (n_new, k + 1)
        K(X_new, X_fit) @ [A, 1]; overwritten.
    A : ndarray of shape (N, k)
        Eigenvectors divided by the square roots of their eigenvalues.
    row_means : ndarray of shape (N,)
        Training row means of K.
    grand_mean : float
        Training grand mean of K.

    Returns
    -------
    projection : ndarray of shape (n_new, k)
        The new rows' coordinates.
    """
    n = row_means.shape[0]
    kt = KA1[:, -1] / n
    KA = KA1[:, :-1]
    ones_A = A.sum(axis=0)
    KA -= row_means @ A
    KA -= np.outer(kt, ones_A)
    KA += grand_mean * ones_A
    return KA


def transform_products(X_fit, spec, A1, X, *, n_threads=None, memory_budget=None):
    """Compute K(X, X_fit) @ A1 in-process, the pass :func:`centred_projection` needs.

    Parameters
    ----------
    X_fit : ndarray of shape (N, n_features)
        Training rows.
    spec : fastkern._kernel_api.KernelSpec
        The kernel.
    A1 : ndarray of shape (N, k + 1)
        The scaled eigenvectors with a column of ones appended.
    X : ndarray of shape (n_new, n_features)
        New rows.
    n_threads : int, default=None
        OpenMP threads (None: the default).
    memory_budget : int, default=None
        Bytes the products' temporaries may use.

    Returns
    -------
    KA1 : ndarray of shape (n_new, k + 1)
        The product, in float64.
    """
    op = KernelOperator.from_spec(X_fit, spec, n_threads=n_threads,
                                  memory_budget=memory_budget)
    with pass_label("transform"):
        return op.matmat(A1, X)


def nystroem_eigenpairs(X, spec, k, n_landmarks, *, n_threads=None, random_state=None,
                        memory_budget=None, verbose=False):
    """Compute the k leading eigenpairs of the Nystroem approximation of the centred Gram.

    See the module docstring for the algebra.

    Parameters
    ----------
    X : ndarray of shape (N, n_features)
        Training rows.
    spec : fastkern._kernel_api.KernelSpec
        The kernel.
    k : int
        Number of eigenpairs (<= n_landmarks).
    n_landmarks : int
        Landmarks drawn from X.
    n_threads : int, default=None
        OpenMP threads (None: the default).
    random_state : int, RandomState or None, default=None
        Draws the landmarks.
    memory_budget : int, default=None
        Bytes allowed; about 3 N m 8 are needed.
    verbose : bool, default=False
        Log the time taken.

    Returns
    -------
    fit : NystroemFit
        The eigenpairs and what projects new rows.
    """
    from fastkern.nystroem import Nystroem

    n = X.shape[0]
    m = n_landmarks
    if memory_budget is not None and 3 * n * m * 8 > memory_budget:
        raise ValueError(f"memory_budget={memory_budget} bytes is too small for the Nystroem "
                         f"solver with n_landmarks={m} (needs about {3 * n * m * 8} bytes)")
    progress = _Progress(verbose, "nystrom")
    t0 = time.perf_counter()
    feature_map = Nystroem(kernel=spec.kernel, n_components=m, random_state=random_state,
                           n_threads=n_threads)._fit_spec(X, spec)
    Phi = feature_map.transform(X).astype(np.float64, copy=False)
    mean = Phi.mean(axis=0)
    Phi -= mean
    # Top k of Phi^T Phi = V S^2 V^T (m x m) instead of an N x m SVD: the
    # leading singular pairs are all we keep, and U = Phi V / S.
    G = Phi.T @ Phi
    values, V = top_eigh(G, k)
    values = np.maximum(values, 0.0)
    U = Phi @ V
    del Phi
    norms = np.linalg.norm(U, axis=0)
    U /= np.where(norms > 0, norms, 1.0)
    progress.report("nystrom: N=%d, %d landmarks, k=%d in %.2f s", n, m, k,
                    time.perf_counter() - t0)
    return NystroemFit(values, U, feature_map, mean, V)
