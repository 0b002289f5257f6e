"""Dense linear algebra shared by the estimators: shifted Cholesky solves in place.

A symmetric C-ordered K seen as K.T is Fortran-ordered memory, so LAPACK
factors it in place (``cho_factor(K.T, overwrite_a=True)`` copies nothing);
KernelRidge, KernelPCA's pre-image ridge and the mixed-precision solve use it.

``serial_blas``: the BLAS/LAPACK thread count of the estimators whose results
are the same bits for any ``n_threads`` (KernelCCA, KernelFDA, KernelSIR).
"""
import warnings

import numpy as np
from scipy import linalg

from fastkern import _inchol
from fastkern._threads import blas_limit, interruptible

__all__ = ["factor_in_place", "restore_factored_triangle", "serial_blas", "solve_shifted_in_place"]

# Rows per block of the row-blocked passes over an n x n array: bounds their
# temporaries to this many rows, O(n) memory.
_BLOCK_ROWS = 64


def serial_blas():
    """Context manager holding BLAS/LAPACK to one thread.

    OpenBLAS shares the work of its threaded routines (syevr, potrf, gesdd,
    geqrf, symv, gemm with a narrow side) among its threads in a way that
    changes their rounding with the count, and the count is one per process:
    another Python thread's limit (a Gram's tiles run BLAS on one thread)
    changes it under a running fit.  A fixed count gives the same bits for
    any ``n_threads`` and for fits from several Python threads at once, and
    one thread is the only count that every ``n_threads`` allows (a library
    runs at the smallest count held, ``fastkern._threads``).
    """
    return blas_limit(1)


def factor_in_place(K):
    """LAPACK potrf of the symmetric C-ordered K as K.T (uplo='U', K's lower
    triangle), in place; returns potrf's info (0: positive definite).

    Without the GIL, in a worker thread when it is long (Ctrl-C is seen
    during it; scipy's cho_factor holds the GIL for all of it), in the
    calling thread when its n^3 / 3 multiply-adds are few.
    """
    return interruptible(_inchol.potrf, K.T, False, work=K.shape[0] ** 3 / 3)


def restore_factored_triangle(K, diag, tiny=0.0):
    """Undo an in-place Cholesky of K.T (uplo='U'), which wrote K's lower triangle.

    The strict upper triangle of K is untouched by the factorisation, so the
    symmetric matrix is rebuilt from it and the saved diagonal, with O(n) rows
    of temporary memory; entries under ``tiny`` in magnitude are rebuilt as 0
    (fastkern._mixed: the factor's input only).
    """
    n = K.shape[0]
    for r0 in range(0, n, _BLOCK_ROWS):
        r1 = min(n, r0 + _BLOCK_ROWS)
        K[r0:r1, :r0] = K[:r0, r0:r1].T
        block = K[r0:r1, r0:r1]
        lower = np.tril_indices(r1 - r0, -1)
        block[lower] = block.T[lower]
        if tiny:
            rows = K[r0:r1, :r1]
            np.copyto(rows, 0, where=np.abs(rows) < tiny)
    np.fill_diagonal(K, diag)


def solve_shifted_in_place(K, Y, alphas):
    """Solve (K + alpha_j I) c_j = y_j for every column j, destroying K.

    K: C-contiguous symmetric buffer (overwritten).  Y: (n, t) right-hand sides
    in K's dtype.  alphas: (t,) penalties; columns sharing a penalty share one
    Cholesky factorisation.  A system that is not positive definite gets a
    warning and the least-squares solution, as scikit-learn does.
    """
    alphas = np.asarray(alphas, dtype=np.float64)
    diag = K.diagonal().copy()
    out = np.empty(Y.shape, dtype=K.dtype)
    if alphas.size == 1:
        # One penalty for every column (np.unique and the column gathers cost
        # a tenth of the solve at 200 rows).
        groups, every = alphas.reshape(1), slice(None)
    else:
        alphas = np.broadcast_to(alphas, (Y.shape[1],))
        groups, every = np.unique(alphas), None
    potrs, = linalg.get_lapack_funcs(("potrs",), (K,))
    for g, alpha in enumerate(groups):
        cols = every if every is not None else np.flatnonzero(alphas == alpha)
        if g:
            restore_factored_triangle(K, diag)
        np.fill_diagonal(K, diag + alpha)
        rhs = Y[:, cols]
        try:
            if factor_in_place(K):
                raise linalg.LinAlgError("not positive definite")
            # cho_solve's own LAPACK call, without its wrapper's checks.
            solution, info = potrs(K.T, rhs, lower=0)
            if info:
                raise linalg.LinAlgError(f"potrs failed: info={info}")
            out[:, cols] = solution
        except linalg.LinAlgError:
            warnings.warn(
                "Singular matrix in solving dual problem. Using least-squares solution instead.",
                linalg.LinAlgWarning,
                stacklevel=3,
            )
            restore_factored_triangle(K, diag + alpha)
            last = g == len(groups) - 1
            out[:, cols] = linalg.lstsq(K.T, rhs, overwrite_a=last, check_finite=False)[0]
    return out
