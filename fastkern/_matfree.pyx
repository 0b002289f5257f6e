"""Products with a kernel matrix that is never stored: out = K(X, Z) @ V.

Rows of X are cut into blocks of TILE rows and the blocks are shared among
the OpenMP threads (dynamic schedule).  A thread owns the output rows of its
block, so no two threads ever write the same memory.  For each column block
Z[J] it builds the tile K(X[I], Z[J]) in its own buffer with ``gram_tile``
(the same code, paths and kernel maps as ``fastkern._gram``), multiplies the
tile into V[J] with a single-threaded dgemm (beta = 1 after the first tile)
and reuses the buffer for the next tile.  Memory beyond the inputs and the
output is one TILE x TILE buffer per thread, plus, for the kernels of the
squared distance on the BLAS path,
the rows centred in float64 (the accuracy method of ``fastkern._gram``).

float32 data gives float32 tiles (the values the dense Gram would hold), which
are widened to float64 before the gemm: V and the products are always float64
so the eigensolver sees products accurate to float64 rounding of the tiles.

The caller must hold BLAS to one thread (``fastkern._threads.blas_limit(1)``):
each OpenMP thread runs its own gemm.
"""
from cython cimport floating
from cpython.exc cimport PyErr_CheckSignals
from cython.parallel cimport prange
from scipy.linalg.cython_blas cimport dgemm

import numpy as np

from fastkern._batches cimport Batches
from fastkern._gram cimport KernelMap, gram_tile, make_map, mirror_block
from fastkern._openmp cimport omp_get_thread_num

cdef enum:
    # Same tile as _gram (512 KiB of doubles, L2-sized); also <= FK_MAX_SEG.
    TILE = 256

#: Rows (and columns) per tile, exported so Python can size budgets and buffers.
tile_size = TILE


cdef void _block_product(const floating *X, const floating *Z, const floating *Zt,
                         Py_ssize_t m, Py_ssize_t d, const double *Xc, const double *Zc,
                         const double *Zct, const double *xn, const double *zn,
                         const double *V, int b, double *out,
                         Py_ssize_t i0, Py_ssize_t bi, Py_ssize_t c0, Py_ssize_t c1,
                         const KernelMap *spec, bint symmetric, floating *tile,
                         double *dtile) noexcept nogil:
    """out[i0:i0+bi] (+)= K(X[i0:i0+bi], Z[c0:c1]) @ V[c0:c1].

    out is row-major with b columns; the column range starting at 0
    overwrites out, later ranges add to it, so calling it on consecutive
    column ranges gives the whole product, summed in the same order whatever
    the ranges.
    """
    cdef Py_ssize_t j0, bj, i, j
    cdef bint diag
    cdef double *T
    cdef double one = 1.0, beta
    cdef char tn = b'N'
    cdef int ib = <int> bi, jb, ldt = TILE
    j0 = c0
    while j0 < c1:
        bj = min(<Py_ssize_t> TILE, c1 - j0)
        # The BLAS path with diag sets the RBF diagonal to exactly 1 (as the
        # dense Gram) and fills j >= i, mirrored below.  The direct path
        # computes distances of identical rows as exactly 0 anyway.
        diag = symmetric and j0 == i0 and not spec.direct
        # dtile doubles as the float64 gemm tile of float32 BLAS RBF: the
        # map has consumed it before the widening below overwrites it.
        gram_tile(X + i0 * d, Z + j0 * d, Zt + (j0 if spec.direct else 0), m, d,
                  Xc + i0 * d if Xc != NULL else NULL, Zc + j0 * d if Zc != NULL else NULL,
                  Zct + j0 if Zct != NULL else NULL,
                  xn + i0 if xn != NULL else NULL, zn + j0 if zn != NULL else NULL,
                  tile, TILE, dtile, bi, bj, spec, diag)
        if diag:
            mirror_block(tile, TILE, 0, bi, 0, bj, True)
        if floating is double:
            T = tile
        else:
            for i in range(bi):
                for j in range(bj):
                    dtile[i * TILE + j] = tile[i * TILE + j]
            T = dtile
        # Row-major out_I (bi x b) += T (bi x bj) @ V_J (bj x b) is, in
        # BLAS's column-major view, out_I^T += V_J^T @ T^T: no transposes.
        jb = <int> bj
        beta = 0.0 if j0 == 0 else 1.0
        dgemm(&tn, &tn, &b, &ib, &jb, &one, <double *> V + j0 * b, &b,
              T, &ldt, &beta, out + i0 * b, &b)
        j0 += TILE


def kernel_product(const floating[:, ::1] X, const floating[:, ::1] Z,
                   const floating[:, ::1] Zt, const double[:, ::1] Xc,
                   const double[:, ::1] Zc, const double[:, ::1] Zct,
                   const double[::1] xn, const double[::1] zn,
                   const double[:, ::1] V, double[:, ::1] out, floating[:, ::1] tiles,
                   double[:, ::1] dtiles, int kind, const double[::1] params,
                   bint direct, bint symmetric, int n_threads, progress=None):
    """out = K(X, Z) @ V (V has at least one column).

    Inputs are validated by fastkern.large_n.  Zt is Z transposed (features x
    rows) for the direct path (any C-contiguous array otherwise); for the BLAS
    RBF path Xc, Zc are X and Z centred by a common mean and xn, zn their
    squared row norms (``fastkern._gram.centred_rows``; empty otherwise),
    and Zct, if not empty, is Zc transposed: the tiles' inner products then
    come from fastkern's register tiles instead of dgemm (``_gram``'s dot);
    symmetric means Z is X.  tiles / dtiles: one TILE*TILE scratch row per
    thread (dtiles is only used for float32 data).  progress, if given, is
    called with the fraction of the product done after each group of row
    blocks (a pass at N = 200,000 takes minutes).  kind and params: the
    kernel's code and parameter array (``fastkern._gram.pack_params``).
    """
    cdef Py_ssize_t n = X.shape[0], m = Z.shape[0], d = X.shape[1]
    cdef Py_ssize_t nblocks = (n + TILE - 1) // TILE, t, i0, bi, r0, r1, c0, c1
    cdef Py_ssize_t ncols = (m + TILE - 1) // TILE, group
    cdef int b = <int> V.shape[1], tid
    cdef KernelMap spec = make_map(kind, params, direct)
    cdef const double *xn_p = &xn[0] if xn.shape[0] else NULL
    cdef const double *zn_p = &zn[0] if zn.shape[0] else NULL
    cdef const double *Xc_p = &Xc[0, 0] if xn_p != NULL else NULL
    cdef const double *Zc_p = &Zc[0, 0] if zn_p != NULL else NULL
    cdef const double *Zct_p = &Zct[0, 0] if zn_p != NULL and Zct.shape[0] else NULL
    cdef const double *V_p
    cdef const floating *Xp = &X[0, 0]
    cdef const floating *Zp = &Z[0, 0]
    cdef const floating *Ztp = &Zt[0, 0]
    cdef double *Op = &out[0, 0]
    cdef floating *tp = &tiles[0, 0]
    cdef double *dtp = &dtiles[0, 0]
    cdef Py_ssize_t dld = dtiles.shape[1]
    cdef Batches batches
    if tiles.shape[0] < n_threads or tiles.shape[1] < TILE * TILE:
        raise ValueError("scratch tiles too small for n_threads")
    if b < 1 or V.shape[0] != m or out.shape[0] != n or out.shape[1] != b:
        raise ValueError("V must be (m, b) with b >= 1 and out (n, b)")
    V_p = &V[0, 0]
    # One row block (TILE rows against all of Z) can take seconds at large m,
    # so work runs in time-bounded batches (fastkern._batches: Ctrl-C is seen
    # between them) of GROUP row blocks x a range of column tiles.  Each row
    # block is owned by one thread within a batch and walks the column ranges
    # in order, so the result is the same as one pass.  GROUP = 4 row blocks
    # per thread keeps the threads balanced (equal-cost items, dynamic schedule).
    group = min(nblocks, 4 * n_threads)
    batches = Batches(0)
    for r0 in range(0, nblocks, group):
        r1 = min(nblocks, r0 + group)
        batches = Batches(ncols, 1, batches.size)
        while batches.next():
            c0 = batches.start * TILE
            c1 = min(m, batches.stop * TILE)
            with nogil:
                for t in prange(r0, r1, num_threads=n_threads, schedule='dynamic'):
                    tid = omp_get_thread_num()
                    i0 = t * TILE
                    bi = min(<Py_ssize_t> TILE, n - i0)
                    _block_product(Xp, Zp, Ztp, m, d, Xc_p, Zc_p, Zct_p, xn_p, zn_p, V_p, b, Op,
                                   i0, bi, c0, c1, &spec, symmetric, tp + tid * TILE * TILE,
                                   dtp + tid * dld)
        if progress is not None:
            progress(<double> r1 / nblocks)
    return np.asarray(out)


def symmetric_kernel_product(const double[:, ::1] X, const double[:, ::1] Xt,
                             const double[:, ::1] Xc, const double[:, ::1] Xct,
                             const double[::1] xn,
                             const double[:, ::1] V, double[:, :, ::1] acc,
                             double[:, ::1] tiles, double[:, ::1] dtiles, int kind,
                             const double[::1] params, bint direct, int n_threads,
                             progress=None):
    """Return K(X, X) @ V from the tiles on and above the diagonal only.

    Half the kernel evaluations of ``kernel_product(X, X, ...)``: the tile
    K(X[I], X[J]), J > I, serves both out[I] += T @ V[J] and out[J] += T^T @ V[I].
    Since two tiles write the same output rows, the tiles are split into
    slots, tile t into slot t % S (S = acc.shape[0]); a slot's tiles are
    summed into acc[slot] ((S, n, b), zeroed here) in order, and the slots
    are added in order at the end, so the result is the same from run to run
    for a given S.  Within each batch of tiles the slots are dealt to the
    threads dynamically: a thread slowed by another process (OpenBLAS's
    workers spin for a while after a LAPACK call) takes fewer slots instead
    of holding the others at the batch's end, as a static split did (a
    product started right after a spotrf: 50 ms against 25 ms without the
    spinning, 39 ms with dynamic slots).  Ctrl-C is seen between batches,
    and progress (as ``kernel_product``'s) is called about every half
    percent of the tiles.  float64 only (the matrix-free KernelPCA's
    products); arguments as ``kernel_product`` with Z = X, validated by the
    caller.
    """
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1], nb = (n + TILE - 1) // TILE
    cdef Py_ssize_t ntasks = nb * (nb + 1) // 2, t, t0, t1, I, J, i0, j0, bi, bj, k
    cdef Py_ssize_t slots = acc.shape[0], slot
    cdef int b = <int> V.shape[1], tid, ib, jb
    cdef int ldt = TILE
    cdef Py_ssize_t batch = 8 * slots, dld = dtiles.shape[1], reported = 0
    cdef KernelMap spec = make_map(kind, params, direct)
    cdef const double *xn_p = &xn[0] if xn.shape[0] else NULL
    cdef const double *Xc_p = &Xc[0, 0] if xn_p != NULL else NULL
    cdef const double *Xct_p = &Xct[0, 0] if xn_p != NULL and Xct.shape[0] else NULL
    cdef double one = 1.0
    cdef char tn = b'N', tt = b'T'
    cdef double *tile
    cdef double *A
    cdef Py_ssize_t[::1] rows = np.empty(ntasks, dtype=np.intp)
    cdef Py_ssize_t[::1] cols = np.empty(ntasks, dtype=np.intp)
    if tiles.shape[0] < n_threads or tiles.shape[1] < TILE * TILE or dtiles.shape[0] < n_threads:
        raise ValueError("scratch tiles too small for n_threads")
    if slots < 1 or acc.shape[1] != n or acc.shape[2] != b or V.shape[0] != n or b < 1:
        raise ValueError("acc must have shape (slots, n, b), slots >= 1, and V (n, b), b >= 1")
    k = 0
    for I in range(nb):
        for J in range(I, nb):
            rows[k] = I
            cols[k] = J
            k += 1
    acc[:, :, :] = 0.0
    for t0 in range(0, ntasks, batch):
        t1 = min(ntasks, t0 + batch)
        with nogil:
            for slot in prange(slots, num_threads=n_threads, schedule='dynamic'):
                tid = omp_get_thread_num()
                tile = &tiles[tid, 0]
                A = &acc[slot, 0, 0]
                # This slot's tiles in the batch: t0 <= t < t1 with t % slots == slot.
                t = t0 + (slot - t0 % slots + slots) % slots
                while t < t1:
                    i0 = rows[t] * TILE
                    j0 = cols[t] * TILE
                    bi = min(<Py_ssize_t> TILE, n - i0)
                    bj = min(<Py_ssize_t> TILE, n - j0)
                    ib = <int> bi
                    jb = <int> bj
                    gram_tile(&X[0, 0] + i0 * d, &X[0, 0] + j0 * d,
                              &Xt[0, 0] + (j0 if direct else 0), n, d,
                              Xc_p + i0 * d if Xc_p != NULL else NULL,
                              Xc_p + j0 * d if Xc_p != NULL else NULL,
                              Xct_p + j0 if Xct_p != NULL else NULL,
                              xn_p + i0 if xn_p != NULL else NULL,
                              xn_p + j0 if xn_p != NULL else NULL,
                              tile, TILE, &dtiles[tid, 0], bi, bj, &spec, i0 == j0 and not direct)
                    if i0 == j0 and not direct:
                        mirror_block(tile, TILE, 0, bi, 0, bj, True)
                    # Row-major acc_I (bi x b) += T (bi x bj) @ V_J, in BLAS's
                    # column-major view acc_I^T += V_J^T @ T^T (see _block_product).
                    dgemm(&tn, &tn, &b, &ib, &jb, &one, &V[0, 0] + j0 * b, &b, tile, &ldt,
                          &one, A + i0 * b, &b)
                    if j0 != i0:
                        # acc_J (bj x b) += T^T @ V_I: acc_J^T += V_I^T @ T.
                        dgemm(&tn, &tt, &b, &jb, &ib, &one, &V[0, 0] + i0 * b, &b, tile, &ldt,
                              &one, A + j0 * b, &b)
                    t = t + slots
        PyErr_CheckSignals()
        if progress is not None and ((t1 - reported) * 200 >= ntasks or t1 == ntasks):
            reported = t1
            progress(t1 / <double> ntasks)
    out = np.asarray(acc[0]).copy()
    for k in range(1, slots):
        out += np.asarray(acc[k])
    return out
