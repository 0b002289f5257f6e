"""Mixed-precision kernel ridge solve without a float64 Gram matrix.

LAPACK's dsposv factors a float64 matrix in float32 and refines the float32
solution with float64 residuals; it keeps the float64 matrix for those
residuals.  Here the float64 matrix is never stored: the Gram matrix is
computed in float32, straight into its one buffer (half a float64 Gram),
shifted and Cholesky-factored there (spotrf, about half the time of dpotrf),
and each residual b - (S K S + alpha I) x takes its kernel product K @ v
matrix-free in float64 from X (``fastkern._matfree.symmetric_kernel_product``,
the tiles on and above the diagonal).  Iterative refinement with the float32
factor contracts the error by about kappa * eps32 per step; it stops, as
dsposv does, when every column's float64 residual satisfies
||r||_inf <= sqrt(n) eps64 ||A||_inf ||x||_inf, the level a float64 Cholesky
solve reaches.

The caller falls back to the float64 solve (``None`` is returned) when the
float32 matrix cannot carry the problem: spotrf fails (not positive definite
in float32), alpha is below float32's resolution of ||K||, or the refinement
would not converge within ``MAX_PASSES`` residual passes (it diverges, or the
contraction measured after two passes predicts too many more).
"""
import math

import numpy as np
from scipy.linalg import blas, lapack

from fastkern._kernel_api import kernel_gram
from fastkern._linalg import restore_factored_triangle
from fastkern._operator import KernelOperator
from fastkern.pairwise import KERNEL_CODES

#: String kernels with a compiled matrix-free product (the mixed path's kernels).
MIXED_KERNELS = frozenset(KERNEL_CODES)
# Kernels of x - y only: X is centred in float64 before it is rounded to
# float32, so an offset (X + 1e4) does not eat the float32 mantissa.
_TRANSLATION_INVARIANT = frozenset({"rbf", "laplacian"})
#: Residual passes over K (one matrix-free product each) before giving up.  A
#: pass costs about a tenth of spotrf at n = 6000 (2 cores), so beyond ~8
#: passes the float64 factorisation would have been faster.
MAX_PASSES = 8
# A contraction factor above this is treated as no convergence.
_MAX_RATE = 0.5
# How far below the tolerance a predicted residual must be to skip its check.
_PREDICTED_MARGIN = 100.0
# Right-hand sides solved column by column with strsv rather than spotrs.
_TRSV_MAX_COLUMNS = 3
_EPS64 = np.finfo(np.float64).eps
_EPS32 = float(np.finfo(np.float32).eps)


def gram32(X, *, kernel, gamma, degree, coef0, kernel_params, n_threads):
    """The float32 Gram matrix of float64 dense X, in a fresh C-contiguous buffer."""
    if kernel in _TRANSLATION_INVARIANT:
        X32 = (X - X.mean(axis=0)).astype(np.float32)
    else:
        X32 = X.astype(np.float32)
    K = kernel_gram(X32, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0,
                    kernel_params=kernel_params, n_threads=n_threads)
    if K.dtype != np.float32 or not (K.flags.c_contiguous and K.flags.writeable):
        K = np.array(K, dtype=np.float32, order="C")
    return K


def _symmetric_product(X, *, kernel, gamma, degree, coef0, kernel_params, n_threads):
    """V -> K(X, X) @ V in float64 without storing K (X dense float64 C-contiguous)."""
    op = KernelOperator(X, kernel=kernel, gamma=gamma, degree=degree, coef0=coef0,
                        kernel_params=kernel_params, n_threads=n_threads)
    if op.compiled is None:
        raise ValueError(f"kernel {kernel!r} has no compiled matrix-free product")
    return op.symmetric_matmat


def _factor_solve(factor, R):
    """(factor^T factor)^-1 R in float32, each column scaled to 1 first (no underflow).

    Up to ``_TRSV_MAX_COLUMNS`` columns, each takes two strsv calls: spotrs
    goes through strsm, which for one column took 15.6-18.6 ms at n=6000
    against 4.3-4.6 ms for the two strsv (2 cores, OpenBLAS 0.3.30); from 4
    columns on spotrs was faster (16.5 ms against 18.5 for 4).
    """
    scale = np.abs(R).max(axis=0)
    scale[scale == 0] = 1.0
    B = np.asfortranarray(R / scale, dtype=np.float32)
    if B.shape[1] <= _TRSV_MAX_COLUMNS:
        for j in range(B.shape[1]):
            z = blas.strsv(factor, B[:, j], trans=1, lower=0)  # U^T z = b
            B[:, j] = blas.strsv(factor, z, trans=0, lower=0, overwrite_x=1)  # U x = z
        Z = B
    else:
        Z, info = lapack.spotrs(factor, B, lower=0)
        if info != 0:
            raise ValueError(f"spotrs failed with info={info}")
    return Z.astype(np.float64) * scale


def refine(factor, matvec, B, anorm, max_passes=None):
    """Solve A X = B by iterative refinement; None if it does not converge.

    factor: float32 upper Cholesky factor of A (Fortran-ordered, from spotrf);
    matvec(V) = A @ V in float64; anorm: ||A||_inf; max_passes: residual
    passes allowed (None: ``MAX_PASSES``).  Returns (X or None, passes made).

    A column is done when its residual meets the tolerance, or, from the
    second pass on, when the contraction measured between its last two
    residuals (rate <= 1e-2) predicts that the correction about to be added
    leaves a residual ``_PREDICTED_MARGIN`` times below the tolerance: the
    pass that would only confirm it is skipped.  Refinement contracts the
    error by the same factor each step (the error of the float32 factor), so
    the prediction is the measured rate applied once more.
    """
    max_passes = MAX_PASSES if max_passes is None else max_passes
    n = B.shape[0]
    X = _factor_solve(factor, B)
    active = np.arange(B.shape[1])
    tol = math.sqrt(n) * _EPS64 * anorm
    previous = None
    for passes in range(1, max_passes + 1):
        R = B[:, active] - matvec(X[:, active])
        if not np.all(np.isfinite(R)):
            return None, passes
        rn = np.abs(R).max(axis=0)
        target = tol * np.abs(X[:, active]).max(axis=0)
        done = rn <= target
        if np.all(done):
            return X, passes
        last = np.zeros_like(done)
        if previous is not None:
            keep = ~done
            rates = rn / np.maximum(previous, np.finfo(float).tiny)
            rate = float(np.max(rates[keep]))
            if rate > _MAX_RATE:
                return None, passes
            # Passes still needed at this rate, the worst column first.
            more = max(math.log(t / r) / math.log(rate) if rate > 0 else 1.0
                       for r, t in zip(rn[keep], target[keep]))
            if passes + math.ceil(more) > max_passes:
                return None, passes
            last = keep & (rates <= 1e-2) & (rn * rates * _PREDICTED_MARGIN <= target)
        X[:, active[~done]] += _factor_solve(factor, R[:, ~done])
        finished = done | last
        if np.all(finished):
            return X, passes
        previous = rn[~finished]
        active = active[~finished]
    return None, max_passes


def solve_mixed(X, Y, alphas, s, *, kernel, gamma, degree, coef0, kernel_params, n_threads):
    """c~ solving (S K S + alpha_j I) c~_j = y_j (Y already scaled by S), or None.

    X: dense float64; Y: (n, t) float64; alphas: (t,) > 0; s: sqrt of the
    sample weights or None.  Peak memory: the float32 Gram (half a float64
    Gram) plus O(n t) vectors.  None means the float64 solve must be used.
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    params = dict(kernel=kernel, gamma=gamma, degree=degree, coef0=coef0,
                  kernel_params=kernel_params, n_threads=n_threads)
    K = gram32(X, **params)
    if s is not None:
        s32 = s.astype(np.float32)
        K *= s32[:, None]
        K *= s32[None, :]
    diag = K.diagonal().copy()
    product = _symmetric_product(X, **params)
    out = np.empty(Y.shape)
    groups = np.unique(alphas)
    info = {"passes": []}
    for g, alpha in enumerate(groups):
        cols = np.flatnonzero(alphas == alpha)
        if g:
            restore_factored_triangle(K, diag)
        np.fill_diagonal(K, diag + np.float32(alpha))
        # ||A||_inf from the float32 matrix: the stopping test needs its size only.
        anorm = float(lapack.slange("I", K.T))
        if not np.isfinite(anorm) or alpha <= _EPS32 * anorm:
            return None, "alpha below float32 resolution"
        factor, err = lapack.spotrf(K.T, lower=0, overwrite_a=1, clean=0)
        if err != 0:
            return None, "spotrf failed"
        if s is None:
            def matvec(V, alpha=alpha):
                return product(V) + alpha * V
        else:
            def matvec(V, alpha=alpha):
                return s[:, None] * product(s[:, None] * V) + alpha * V
        coef, passes = refine(factor, matvec, Y[:, cols], anorm)
        info["passes"].append(passes)
        if coef is None:
            return None, "refinement did not converge"
        out[:, cols] = coef
        del factor
    return out, info
