"""Gram matrices of feature-wise kernels: a direct, tiled, OpenMP loop.

The kernels here are a sum or a product over features of a function of the
pair (x_k, y_k), so no inner product (and no BLAS) computes them:

* ANOVA (kernlab's anovadot): (sum_k exp(-gamma (x_k - y_k)^2))^degree
* spline (kernlab's splinedot): prod_k (1 + x y + x y m - (x + y) m^2 / 2 + m^3 / 3),
  m = min(x_k, y_k)
* additive chi2: -sum_k (x_k - y_k)^2 / (x_k + y_k) (terms with x_k + y_k = 0 are 0)
* chi2: exp(-gamma sum_k (x_k - y_k)^2 / (x_k + y_k)), both as scikit-learn
* histogram intersection: sum_k min(x_k, y_k)

K is built tile by tile as the direct path of fastkern._gram: Y transposed
(features x rows, one O(m d) copy) so that for each row x of a tile the
loop over the tile's columns reads contiguous memory and vectorises, the
per-feature terms accumulated in a float64 row buffer (L1-resident) in
feature order, whatever the input precision (float32 data are widened per
element, and the result rounded once).  When Y is X only tiles on or above
the diagonal are computed (on a diagonal tile only j >= i), mirrored in the
cache and streamed to both positions, so K is exactly symmetric.  Tiles run
in time-bounded batches (fastkern._batches) so Ctrl-C is seen between them.
Each entry is computed by the same sequence of operations whichever thread
runs it: results do not depend on n_threads.

Memory: Y transposed (m x d) and, per thread, two tiles and one row buffer;
nothing of size n x m besides the output.
"""
from cython cimport floating
from cython.parallel cimport prange, parallel
from libc.math cimport pow

import numpy as np

from fastkern._batches cimport Batches
from fastkern._openmp cimport omp_get_thread_num
from fastkern._stream cimport fk_store_fence, stream_tile
from fastkern._maps cimport (
    K_ANOVA, K_ADDITIVE_CHI2, K_CHI2, FK_FEATUREWISE, FK_N_PARAMS, FK_P_GAMMA, FK_P_DEGREE,
    fk_kind_geometry,
)
from fastkern._gram import transposed


# The row loops are C (one function per precision, compiled per CPU family by
# fk_maps.h's target_clones) so that GCC vectorises each feature's pass over
# the columns; fk_exp1_d is fk_maps.h's vectorisable exp (2 ulp).
cdef extern from * nogil:
    """
    #include "fk_maps.h"

    /* acc[j] = sum (or product, spline) over k of the kernel's term of
       (x[k], yt[k * ld + j]), j < n, accumulated in float64 in feature order. */
    #define FK_FW_DEFINE(T, S)                                                     \\
    FK_CLONES static void fk_fw_row_##S(int kind, const T *FK_RESTRICT x,         \\
                                        const T *FK_RESTRICT yt, ptrdiff_t ld,    \\
                                        ptrdiff_t d, ptrdiff_t n, double gamma,   \\
                                        double *FK_RESTRICT acc)                  \\
    {                                                                              \\
        const double init = kind == FK_K_SPLINE ? 1.0 : 0.0;                       \\
        for (ptrdiff_t j = 0; j < n; j++) acc[j] = init;                           \\
        for (ptrdiff_t k = 0; k < d; k++) {                                        \\
            const double a = x[k];                                                 \\
            const T *FK_RESTRICT y = yt + k * ld;                                  \\
            switch (kind) {                                                        \\
            case FK_K_ANOVA:                                                       \\
                for (ptrdiff_t j = 0; j < n; j++) {                                \\
                    double t = a - (double)y[j];                                   \\
                    acc[j] += fk_exp1_d(-gamma * (t * t));                         \\
                }                                                                  \\
                break;                                                             \\
            case FK_K_SPLINE:                                                      \\
                for (ptrdiff_t j = 0; j < n; j++) {                                \\
                    double b = y[j], m = a < b ? a : b, p = a * b;                 \\
                    acc[j] *= 1.0 + p + p * m - 0.5 * (a + b) * (m * m)            \\
                              + (m * m * m) / 3.0;                                 \\
                }                                                                  \\
                break;                                                             \\
            case FK_K_ADDITIVE_CHI2:                                               \\
            case FK_K_CHI2:                                                        \\
                /* x + y = 0 only where x = y = 0 (inputs are >= 0): the term */  \\
                /* is then 0 / 1 = 0, as scikit-learn skips it. */                 \\
                for (ptrdiff_t j = 0; j < n; j++) {                                \\
                    double b = y[j], t = a - b, s = a + b;                         \\
                    acc[j] += t * t / (s == 0.0 ? 1.0 : s);                        \\
                }                                                                  \\
                break;                                                             \\
            default:                                                               \\
                for (ptrdiff_t j = 0; j < n; j++) {                                \\
                    double b = y[j];                                               \\
                    acc[j] += a < b ? a : b;                                       \\
                }                                                                  \\
            }                                                                      \\
        }                                                                          \\
    }
    FK_FW_DEFINE(double, d)
    FK_FW_DEFINE(float, f)

    /* acc[j] = exp(scale * acc[j]) */
    FK_CLONES static void fk_fw_exp(double *FK_RESTRICT acc, ptrdiff_t n, double scale)
    {
        for (ptrdiff_t j = 0; j < n; j++) acc[j] = fk_exp1_d(scale * acc[j]);
    }
    """
    void fk_fw_row_d(int kind, const double *x, const double *yt, Py_ssize_t ld,
                     Py_ssize_t d, Py_ssize_t n, double gamma, double *acc)
    void fk_fw_row_f(int kind, const float *x, const float *yt, Py_ssize_t ld,
                     Py_ssize_t d, Py_ssize_t n, double gamma, double *acc)
    void fk_fw_exp(double *acc, Py_ssize_t n, double scale)

cdef enum:
    # Tile side: a float64 tile buffer of 128 x 128 (128 KB) and its transpose
    # stay in L2; float32 tiles hold twice the columns in the same bytes.
    TILE = 128
    MIN_TILE = 16
    # Ctrl-C is seen between batches of whole tiles: wide data get smaller
    # tiles so that tile^2 * d stays below this many (feature, pair) terms,
    # a few ms of one core for the costliest term (ANOVA's exp).
    MAX_TILE_WORK = 128 * 128 * 256
    MIRROR_BLOCK = 32


cdef inline void _tile(int kind, const floating *X, const floating *Yt, Py_ssize_t ldyt,
                       Py_ssize_t d, floating *out, Py_ssize_t ldo, double *acc,
                       Py_ssize_t bi, Py_ssize_t bj, double gamma, double degree,
                       bint diag) noexcept nogil:
    """out[0:bi, 0:bj] (leading dimension ldo) = k(X[0:bi], Y block); Yt points at
    the block's first column in Y transposed.  diag: the blocks are the same
    rows, only j >= i is computed (the caller mirrors)."""
    cdef Py_ssize_t i, j, j0, w
    cdef floating *row
    for i in range(bi):
        j0 = i if diag else 0
        w = bj - j0
        if floating is double:
            fk_fw_row_d(kind, X + i * d, Yt + j0, ldyt, d, w, gamma, acc)
        else:
            fk_fw_row_f(kind, X + i * d, Yt + j0, ldyt, d, w, gamma, acc)
        if kind == K_CHI2:
            fk_fw_exp(acc, w, -gamma)
        elif kind == K_ADDITIVE_CHI2:
            for j in range(w):
                acc[j] = -acc[j]
        elif kind == K_ANOVA and degree != 1.0:
            for j in range(w):
                acc[j] = pow(acc[j], degree)
        row = out + i * ldo + j0
        for j in range(w):
            row[j] = <floating> acc[j]


cdef void _mirror_diag(floating *T, Py_ssize_t ld, Py_ssize_t n) noexcept nogil:
    """T[j, i] = T[i, j] for j > i within an n x n tile, in L1-sized blocks."""
    cdef Py_ssize_t ii, jj, i, j, jstart
    # Literal steps (MIRROR_BLOCK): Cython makes a C loop of range() only for a
    # constant step.
    for ii in range(0, n, 32):
        for jj in range(ii, n, 32):
            for i in range(ii, min(ii + MIRROR_BLOCK, n)):
                jstart = max(jj, i + 1)
                for j in range(jstart, min(jj + MIRROR_BLOCK, n)):
                    T[j * ld + i] = T[i * ld + j]


def gram(const floating[:, ::1] X, const floating[:, ::1] Y, floating[:, ::1] out,
         int kind, const double[::1] params, bint symmetric, int n_threads):
    """Fill out with k(X, Y) for a feature-wise kernel code (FK_FEATUREWISE kinds).

    Inputs are validated by fastkern.pairwise (finite, non-negative where the
    kernel needs it, out of the right shape and dtype); params is the
    kernel's parameter array (``fastkern._gram.pack_params``); symmetric
    means Y is X.
    """
    cdef Py_ssize_t n = X.shape[0], m = Y.shape[0], d = X.shape[1]
    cdef Py_ssize_t tile = TILE * (2 if floating is float else 1)
    while tile > MIN_TILE and tile * tile * d > MAX_TILE_WORK:
        tile //= 2
    cdef Py_ssize_t nbi = (n + tile - 1) // tile, nbj = (m + tile - 1) // tile
    cdef Py_ssize_t ntiles, t, I, J, i0, j0, bi, bj
    cdef int tid
    cdef bint diag
    cdef floating *tbuf
    cdef floating *tscr
    cdef double *acc
    if fk_kind_geometry(kind) != FK_FEATUREWISE:
        raise ValueError(f"kind {kind} is not a feature-wise kernel code")
    if params is None or params.shape[0] != FK_N_PARAMS:
        raise ValueError(f"params must hold the {FK_N_PARAMS} values of pack_params()")
    cdef double gamma = params[FK_P_GAMMA], degree = params[FK_P_DEGREE]

    dtype = np.float64 if floating is double else np.float32
    cdef const floating[:, ::1] Yt = transposed(Y, n_threads)
    if symmetric:
        iu, ju = np.triu_indices(nbi)
    else:
        iu, ju = np.divmod(np.arange(nbi * nbj), nbj)
    cdef Py_ssize_t[::1] ti = np.ascontiguousarray(iu, dtype=np.intp)
    cdef Py_ssize_t[::1] tj = np.ascontiguousarray(ju, dtype=np.intp)
    ntiles = ti.shape[0]
    # No more threads (and per-thread buffers) than work items.
    n_threads = <int> min(<Py_ssize_t> n_threads, max(ntiles, 1))
    cdef const floating *Xp = &X[0, 0]
    cdef const floating *Ytp = &Yt[0, 0]
    cdef floating *Op = &out[0, 0]
    cdef floating[:, :, ::1] bufs = np.empty((n_threads, 2, tile * tile), dtype=dtype)
    cdef double[:, ::1] accs = np.empty((n_threads, tile))

    cdef int nt
    cdef Batches batches = Batches(ntiles, n_threads)
    while batches.next():
        nt = batches.threads
        with nogil, parallel(num_threads=nt):
            tid = omp_get_thread_num()
            tbuf = &bufs[tid, 0, 0]
            tscr = &bufs[tid, 1, 0]
            acc = &accs[tid, 0]
            # dynamic: diagonal tiles do half the work of the others.
            for t in prange(batches.start, batches.stop, schedule='dynamic'):
                I = ti[t]
                J = tj[t]
                i0 = I * tile
                j0 = J * tile
                bi = min(tile, n - i0)
                bj = min(tile, m - j0)
                diag = symmetric and I == J
                _tile(kind, Xp + i0 * d, Ytp + j0, m, d, tbuf, bj, acc, bi, bj,
                      gamma, degree, diag)
                if diag:
                    _mirror_diag(tbuf, bj, bj)
                stream_tile(tbuf, bj, Op + i0 * m + j0, m, bi, bj, tscr, False, False)
                if symmetric and I != J:
                    stream_tile(tbuf, bj, Op + j0 * m + i0, m, bi, bj, tscr, True, False)
            fk_store_fence()
    return np.asarray(out)
