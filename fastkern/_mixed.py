"""Mixed-precision kernel ridge solve without a float64 Gram matrix.

LAPACK's dsposv factors a float64 matrix in float32 and refines the float32
solution with float64 residuals; it keeps the float64 matrix for those
residuals.  Here the float64 matrix is computed once, panel by panel, and
kept split in two float32 parts (``fastkern._split``): its float32 rounding,
in one n x n buffer that is shifted and Cholesky-factored in place (spotrf,
about half the time of dpotrf; the factor overwrites one triangle, the other
keeps the rounded values), and the rounding errors of the strict upper
triangle, packed: three quarters of a float64 Gram in all.  Each residual
b - (S K S + alpha I) x reads both parts (``fastkern._split.split_matmat``),
which represent the float64 matrix to about 2^-48 of each entry.  Iterative
refinement with the float32 factor contracts the error by about
kappa * eps32 per step; it stops, as dsposv does, when every column's float64
residual satisfies ||r||_inf <= sqrt(n) eps64 ||A||_inf ||x||_inf, the level a
float64 Cholesky solve reaches.

The caller falls back to the float64 solve (``None`` is returned) when the
float32 matrix cannot carry the problem: the kernel values are not finite or
their row sums exceed float32's range, spotrf fails (not positive definite in float32),
alpha is below float32's resolution of ||K||, or the refinement would not
converge within ``MAX_PASSES`` residual passes (it diverges, or the
contraction measured after two passes predicts too many more).
"""
import math

import numpy as np
from scipy.linalg import blas, lapack

from fastkern import _split
from fastkern._linalg import factor_in_place, restore_factored_triangle
from fastkern._validation import check_n_threads
from fastkern.pairwise import KERNEL_CODES

#: String kernels with compiled Gram loops (the mixed path's kernels).
MIXED_KERNELS = frozenset(KERNEL_CODES)
#: Residual passes before giving up.  A pass and its float32 solves cost
#: about 12 ms at n = 6000 on 2 cores, against spotrf's 0.33 s, so the cap is
#: not about time: the error contracts by the same factor each pass, and one
#: that needs more than 8 passes means the float32 factor barely
#: preconditions the problem, where the float64 solve is the sounder answer.
MAX_PASSES = 8
# A contraction factor above this is treated as no convergence.
_MAX_RATE = 0.5
# How far below the tolerance a predicted residual must be to skip its check.
_PREDICTED_MARGIN = 100.0
# Right-hand sides solved column by column with strsv rather than spotrs.
_TRSV_MAX_COLUMNS = 3
# Rows of the float64 matrix computed at a time: a 128 x n panel (6 MB at
# n = 6000) is split while it is still in cache.
_PANEL_ROWS = 128
_EPS64 = np.finfo(np.float64).eps
_EPS32 = float(np.finfo(np.float32).eps)
_MAX32 = float(np.finfo(np.float32).max)


class SplitGram:
    """diag(s) K diag(s) for K = k(X, X) in float64, held as float32 parts (``fastkern._split``).

    K is the Gram of the kernel ``spec`` (a ``fastkern._kernel_api.KernelSpec``).

    Attributes: ``K`` (n x n float32, the rounded matrix, both triangles),
    ``lo`` (the packed rounding errors of the strict upper triangle),
    ``diag`` (the float64 diagonal) and ``abs_row_sums`` (float64 row sums of
    |a|).  Built panel by panel: memory beyond the parts is one float64 panel
    of ``_PANEL_ROWS`` rows.
    """

    def __init__(self, X, s, spec, *, n_threads):
        n = X.shape[0]
        self.n_threads = n_threads = check_n_threads(n_threads)
        self.K = np.empty((n, n), dtype=np.float32)
        self.lo = np.empty(_split.lo_size(n), dtype=np.float32)
        self.diag = np.empty(n)
        self.abs_row_sums = np.zeros(n)
        s = np.empty(0) if s is None else np.ascontiguousarray(s, dtype=np.float64)
        rows = min(n, _PANEL_ROWS)
        dbuf, pbuf = np.empty(rows * rows), np.empty(rows * (n - rows))
        scale = 0.0
        for i0 in range(0, n, rows):
            i1 = min(n, i0 + rows)
            b, m = i1 - i0, n - i1
            # The diagonal block as a symmetric Gram (exactly symmetric, exact
            # RBF diagonal, as the float64 path's Gram), the rest of the rows apart.
            D = spec.gram(X[i0:i1], out=dbuf[:b * b].reshape(b, b), n_threads=n_threads)
            P = pbuf[:b * m].reshape(b, m)
            if m:
                P = spec.gram(X[i0:i1], X[i1:], out=P, n_threads=n_threads)
            scale = max(scale, float(np.abs(D).max(initial=0.0)))
            _split.split_panel(D, P, i0, s, self.K, self.lo, self.diag, self.abs_row_sums,
                               n_threads, _TINY * scale, _FACTOR_TINY * scale)
        self.factor_tiny = _FACTOR_TINY * scale

    def matmat(self, V):
        """(S K S) V in float64 from the diagonal, the strict upper triangle of K and lo."""
        slots = 2 * self.n_threads
        Vt = np.ascontiguousarray(V.T, dtype=np.float64)
        acc = np.empty((slots,) + Vt.shape)
        return _split.split_matmat(self.K, self.lo, self.diag, Vt, acc, self.n_threads).T


# Entries below _TINY times the largest entry of the diagonal blocks are taken
# as zero by the split.  In float32 such values, their rounding errors
# (lo) and their products in spotrf are subnormal, and x86 computes on
# subnormals ~100x slower: an RBF Gram with gamma=0.5 at d=64 (most entries
# 1e-57..1e-10) took 15 s to solve at N=3000 against 1.2 s in float64.  The
# change to the matrix, at most n * 2^-60 of its scale, is far below the
# backward error of a float64 Cholesky solve (about n * eps64 of it), and the
# refinement then solves the flushed matrix to full accuracy.
_TINY = 2.0 ** -60
# The float32 Cholesky factorisation makes subnormals of much larger entries
# (their products and quotients): at N=3000 spotrf took 3.0 s with the
# entries below 2^-60 zeroed, 1.1 s below 2^-40, 0.09 s below 2^-30.  Its
# input (the triangle below the diagonal, not read by the products) is
# zeroed below 2^-30 of the scale; refinement against the exact products
# absorbs the difference, or, failing to converge, hands over to float64.
_FACTOR_TINY = 2.0 ** -30



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


def solve_mixed(X, Y, alphas, s, spec, *, n_threads):
    """c~ solving (S K S + alpha_j I) c~_j = y_j (Y already scaled by S), or None.

    X: dense float64; Y: (n, t) float64; alphas: (t,) > 0; s: sqrt of the
    sample weights or None.  Peak memory: the float32 matrix and the packed
    rounding errors (three quarters of a float64 Gram) plus O(n t) vectors.
    Returns (solution or None, why): None means the float64 solve must be
    used, and why says why; otherwise why holds the residual passes per alpha.
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    A = SplitGram(X, s, spec, n_threads=n_threads)
    K, diag = A.K, A.diag
    # Off-diagonal absolute row sums: ||A + alpha I||_inf follows for any alpha.
    off = A.abs_row_sums - np.abs(diag)
    if not (np.all(np.isfinite(A.abs_row_sums)) and A.abs_row_sums.max() <= _MAX32):
        return None, "kernel row sums beyond float32 range"
    out = np.empty(Y.shape)
    groups = np.unique(alphas)
    info = {"passes": []}
    for g, alpha in enumerate(groups):
        cols = np.flatnonzero(alphas == alpha)
        shifted = diag + alpha
        if g:
            restore_factored_triangle(K, shifted.astype(np.float32), A.factor_tiny)
        else:
            np.fill_diagonal(K, shifted.astype(np.float32))
        anorm = float(np.max(off + np.abs(shifted)))
        if not anorm <= _MAX32 or alpha <= _EPS32 * anorm:
            return None, "alpha below float32 resolution"
        err = factor_in_place(K)
        factor = K.T
        if err != 0:
            return None, "spotrf failed"

        def matvec(V, alpha=alpha):
            return A.matmat(V) + alpha * V

        coef, passes = refine(factor, matvec, Y[:, cols], anorm)
        info["passes"].append(passes)
        if coef is None:
            return None, "refinement did not converge"
        out[:, cols] = coef
        del factor
    return out, info
