"""Tiled, OpenMP-parallel Gram matrices.

K is computed tile by tile, each tile built in a thread-local buffer that
stays in cache:

* BLAS path (wide data, and every inner-product kernel): one single-threaded
  gemm writes the tile of inner products into the buffer, then the kernel map
  is applied row by row while the tile is hot.  RBF uses
  ||x - y||^2 = ||x||^2 - 2 x.y + ||y||^2 with the norms in float64 and the
  result clipped at 0.
* Direct path (narrow data, and Laplacian's L1 distance): a fused loop over
  features with Y transposed (features x rows) so the inner loop runs over
  contiguous columns and vectorises, followed by the vectorised exp.

The finished tile is written to K with streaming stores (src/fk_stream.h).
When Y is X only tiles on and above the diagonal are computed; each is
transposed in the cache and streamed to its mirror position, which makes K
exactly symmetric and the RBF/Laplacian diagonal exactly 1.
"""
from cython.parallel cimport prange, parallel
from libc.math cimport tanh, pow
from libc.string cimport memset
from scipy.linalg.cython_blas cimport dgemm, sgemm

import numpy as np

cdef extern from "fk_stream.h" nogil:
    void fk_stream_tile_d(const double *buf, Py_ssize_t ldb, double *K, Py_ssize_t ldk,
                          Py_ssize_t bi, Py_ssize_t bj, double *scratch, int transpose)
    void fk_stream_tile_f(const float *buf, Py_ssize_t ldb, float *K, Py_ssize_t ldk,
                          Py_ssize_t bi, Py_ssize_t bj, float *scratch, int transpose)
    void fk_store_fence()

from fastkern._batches cimport Batches
from fastkern._openmp cimport omp_get_thread_num
from fastkern._maps cimport (
    fk_vexp_d, fk_vexp_f, fk_rbf_dot_d, fk_rbf_dot_f, fk_sqdist_row_d,
    fk_sqdist_row_f, fk_l1dist_row_d, fk_l1dist_row_f, fk_ipow_d, fk_ipow_f,
    fk_affine_d, fk_affine_f,
)

cdef enum:
    # Tiles are built in two thread-local buffers (the tile and its transpose)
    # that stay in L2.  BLAS-path tiles are BTILE x BTILE (a gemm of that size
    # runs near peak); direct-path tiles DTILE x DTILE (float64).
    BTILE = 256
    DTILE = 128
    # Mirror in 32 x 32 blocks so both the read rows and the written columns stay in L1.
    MIRROR_BLOCK = 32
    # Ctrl-C is seen between batches of whole tiles, so one tile must stay
    # short: wide data gets narrower tiles, tile^2 * d <= MAX_TILE_WORK (about
    # 20 ms of one core for either path, measured on the 2-core dev machine).
    # BLAS tiles stay >= MIN_BLAS_TILE: a narrower gemm reads X faster than it
    # computes (arithmetic intensity tile / 8 flops per byte).
    MAX_TILE_WORK = 256 * 256 * 512
    MIN_BLAS_TILE = 128
    MIN_DIRECT_TILE = 32


cdef inline void _gemm_nt(const floating *A, const floating *B, floating *C,
                          int bi, int bj, int d, int ldc) noexcept nogil:
    """C[bi x bj, row-major, leading dim ldc] = A[bi x d] . B[bj x d]^T.

    Row-major C is column-major C^T = B . A^T, so gemm is called with the
    operands swapped instead of copying anything.
    """
    cdef char ta = b'T'
    cdef char tb = b'N'
    cdef int lda = d
    cdef double done = 1.0, dzero = 0.0
    cdef float sone = 1.0, szero = 0.0
    if floating is double:
        dgemm(&ta, &tb, &bj, &bi, &d, &done, <double *> B, &lda, <double *> A, &lda,
              &dzero, C, &ldc)
    else:
        sgemm(&ta, &tb, &bj, &bi, &d, &sone, <float *> B, &lda, <float *> A, &lda,
              &szero, C, &ldc)


cdef inline void _map_dot_row(floating *g, Py_ssize_t n, const double *yn, double xn,
                              const KernelSpec *spec) noexcept nogil:
    """Turn a row segment of inner products into kernel values in place."""
    cdef Py_ssize_t j
    cdef int kind = spec.kind
    if kind == K_LINEAR:
        return
    if kind == K_RBF:
        if floating is double:
            fk_rbf_dot_d(g, yn, xn, spec.gamma, n)
        else:
            fk_rbf_dot_f(g, yn, xn, spec.gamma, n)
    elif kind == K_EXPONENTIAL:
        if floating is double:
            fk_vexp_d(g, n, spec.gamma)
        else:
            fk_vexp_f(g, n, <float> spec.gamma)
    elif kind == K_POLY and spec.idegree > 0:
        if floating is double:
            fk_ipow_d(g, n, spec.gamma, spec.coef0, spec.idegree)
        else:
            fk_ipow_f(g, n, <float> spec.gamma, <float> spec.coef0, spec.idegree)
    else:
        if floating is double:
            fk_affine_d(g, n, spec.gamma, spec.coef0)
        else:
            fk_affine_f(g, n, <float> spec.gamma, <float> spec.coef0)
        if kind == K_POLY:
            for j in range(n):
                g[j] = pow(g[j], spec.degree)
        else:
            for j in range(n):
                g[j] = tanh(g[j])


cdef KernelSpec make_spec(int kind, double gamma, double coef0, double degree,
                          bint direct) noexcept nogil:
    cdef KernelSpec spec
    spec.kind = kind
    spec.gamma = gamma
    spec.coef0 = coef0
    spec.degree = degree
    # Integer degrees up to 64 use repeated squaring (vectorised); others pow().
    spec.idegree = <long> degree if (degree == <long> degree and 1 <= degree <= 64) else 0
    spec.direct = direct
    return spec


cdef void gram_tile(const floating *X, const floating *Y, const floating *Yt,
                    Py_ssize_t ldyt, Py_ssize_t d,
                    const double *xn, const double *yn,
                    floating *out, Py_ssize_t ldo,
                    Py_ssize_t bi, Py_ssize_t bj,
                    const KernelSpec *spec, bint diag) noexcept nogil:
    """Fill out[0:bi, 0:bj] (leading dimension ldo) with k(X[0:bi], Y[0:bj]).

    X and Y point at the first row of each block (row-major, d columns); Yt at
    column 0 of the block in Y transposed (leading dimension ldyt), used by the
    direct path; xn/yn are the blocks' squared norms, used by BLAS RBF.  diag
    says the two blocks are the same rows: then the RBF diagonal is set to
    exactly 1, and the direct path computes only j >= i (the caller mirrors the
    rest).
    """
    cdef Py_ssize_t i, j0
    cdef floating *row
    cdef double scale = -spec.gamma
    if spec.direct:
        for i in range(bi):
            j0 = i if diag else 0
            row = out + i * ldo + j0
            if spec.kind == K_LAPLACIAN:
                if floating is double:
                    fk_l1dist_row_d(X + i * d, Yt + j0, ldyt, d, bj - j0, row)
                    fk_vexp_d(row, bj - j0, scale)
                else:
                    fk_l1dist_row_f(X + i * d, Yt + j0, ldyt, d, bj - j0, row)
                    fk_vexp_f(row, bj - j0, <float> scale)
            else:
                if floating is double:
                    fk_sqdist_row_d(X + i * d, Yt + j0, ldyt, d, bj - j0, row)
                    fk_vexp_d(row, bj - j0, scale)
                else:
                    fk_sqdist_row_f(X + i * d, Yt + j0, ldyt, d, bj - j0, row)
                    fk_vexp_f(row, bj - j0, <float> scale)
        return
    _gemm_nt(X, Y, out, <int> bi, <int> bj, <int> d, <int> ldo)
    for i in range(bi):
        _map_dot_row(out + i * ldo, bj, yn, xn[i] if xn != NULL else 0.0, spec)
    if diag and spec.kind == K_RBF:
        # The distance of a point to itself is 0, but the gemm's rounded x.x
        # (float32, or cancellation at large norms) need not give exactly 0.
        for i in range(bi):
            out[i * ldo + i] = 1


cdef void row_sq_norms(const floating *X, Py_ssize_t n, Py_ssize_t d, double *xn,
                       int n_threads) noexcept nogil:
    cdef Py_ssize_t i, k
    cdef double s
    for i in prange(n, num_threads=n_threads, schedule='static'):
        s = 0.0
        for k in range(d):
            s = s + (<double> X[i * d + k]) * X[i * d + k]
        xn[i] = s


cdef void _mirror_block(floating *K, Py_ssize_t ld, Py_ssize_t i0, Py_ssize_t i1,
                        Py_ssize_t j0, Py_ssize_t j1, bint diag) noexcept nogil:
    """Copy K[i0:i1, j0:j1] into K[j0:j1, i0:i1] transposed (upper part only if diag)."""
    cdef Py_ssize_t ii, jj, i, j, jstart
    cdef Py_ssize_t nbi = (i1 - i0 + MIRROR_BLOCK - 1) // MIRROR_BLOCK
    cdef Py_ssize_t nbj = (j1 - j0 + MIRROR_BLOCK - 1) // MIRROR_BLOCK
    for ii in range(i0, i0 + nbi * MIRROR_BLOCK, 32):
        for jj in range(j0, j0 + nbj * MIRROR_BLOCK, 32):
            for i in range(ii, min(ii + MIRROR_BLOCK, i1)):
                jstart = jj
                if diag and jstart <= i:
                    jstart = i + 1
                for j in range(jstart, min(jj + MIRROR_BLOCK, j1)):
                    K[j * ld + i] = K[i * ld + j]


cdef inline void _stream(const floating *buf, Py_ssize_t ldb, floating *K, Py_ssize_t ldk,
                         Py_ssize_t bi, Py_ssize_t bj, floating *scratch,
                         bint transpose) noexcept nogil:
    if floating is double:
        fk_stream_tile_d(buf, ldb, K, ldk, bi, bj, scratch, transpose)
    else:
        fk_stream_tile_f(buf, ldb, K, ldk, bi, bj, scratch, transpose)


def transposed(const floating[:, ::1] Y, int n_threads):
    """Y.T as a new C-contiguous array, for the direct path's column-major reads.

    Copied in MIRROR_BLOCK x MIRROR_BLOCK blocks, so that the strided reads of
    a block stay in L1 (numpy's Y.T copy walks all of Y per output row: 4x
    slower at 3000 x 8192), by all threads, in batches (fastkern._batches) so
    Ctrl-C is seen during a large copy too.
    """
    cdef Py_ssize_t m = Y.shape[0], d = Y.shape[1]
    cdef Py_ssize_t nb = (m + MIRROR_BLOCK - 1) // MIRROR_BLOCK, b, i, i0, i1, k, k0, k1
    cdef Py_ssize_t nkb = (d + MIRROR_BLOCK - 1) // MIRROR_BLOCK, kb
    Yt = np.empty((d, m), dtype=np.float64 if floating is double else np.float32)
    cdef floating[:, ::1] T = Yt
    cdef Batches batches = Batches(nb, n_threads)
    while batches.next():
        with nogil:
            for b in prange(batches.start, batches.stop, num_threads=n_threads,
                            schedule='static'):
                i0 = b * MIRROR_BLOCK
                i1 = min(i0 + MIRROR_BLOCK, m)
                for kb in range(nkb):
                    k0 = kb * MIRROR_BLOCK
                    k1 = min(k0 + MIRROR_BLOCK, d)
                    for k in range(k0, k1):
                        for i in range(i0, i1):
                            T[k, i] = Y[i, k]
    return Yt


def gram(const floating[:, ::1] X, const floating[:, ::1] Y, floating[:, ::1] out,
         int kind, double gamma, double coef0, double degree, bint symmetric,
         bint direct, int n_threads):
    """Fill out with k(X, Y).  Inputs are validated by fastkern.pairwise.

    symmetric means Y is X; direct selects the fused distance loop.
    """
    cdef Py_ssize_t n = X.shape[0], m = Y.shape[0], d = X.shape[1]
    # float32 direct tiles are twice as wide: the same bytes in the buffer, and
    # half as many tiles (measured: float32 1.6x -> 1.9x faster than float64).
    cdef Py_ssize_t tile = (DTILE * (2 if floating is float else 1)) if direct else BTILE
    cdef Py_ssize_t min_tile = MIN_DIRECT_TILE if direct else MIN_BLAS_TILE
    while tile > min_tile and tile * tile * d > MAX_TILE_WORK:
        tile //= 2
    cdef Py_ssize_t nbi = (n + tile - 1) // tile, nbj = (m + tile - 1) // tile
    cdef Py_ssize_t ntiles, t, I, J, i0, j0, bi, bj
    cdef int tid
    cdef floating *tbuf
    cdef floating *tscr
    cdef KernelSpec spec = make_spec(kind, gamma, coef0, degree, direct)

    dtype = np.float64 if floating is double else np.float32
    cdef const floating[:, ::1] Yt = transposed(Y, n_threads) if direct else Y
    cdef double[::1] xn = np.zeros(n if kind == K_RBF and not direct else 0)
    cdef double[::1] yn = xn if symmetric else np.zeros(m if kind == K_RBF and not direct else 0)
    cdef double *xn_p = &xn[0] if xn.shape[0] else NULL
    cdef double *yn_p = &yn[0] if yn.shape[0] else NULL

    # Tile list: the upper triangle of tiles when symmetric, all tiles otherwise.
    if symmetric:
        iu, ju = np.triu_indices(nbi)
    else:
        iu, ju = np.divmod(np.arange(nbi * nbj), nbj)
    cdef Py_ssize_t[::1] ti = np.ascontiguousarray(iu, dtype=np.intp)
    cdef Py_ssize_t[::1] tj = np.ascontiguousarray(ju, dtype=np.intp)
    ntiles = ti.shape[0]
    cdef const floating *Xp = &X[0, 0]
    cdef const floating *Yp = &Y[0, 0]
    cdef const floating *Ytp = &Yt[0, 0]
    cdef floating *Op = &out[0, 0]
    cdef floating[:, :, ::1] bufs = np.empty((n_threads, 2, tile * tile), dtype=dtype)

    with nogil:
        if xn_p != NULL:
            row_sq_norms(Xp, n, d, xn_p, n_threads)
            if not symmetric:
                row_sq_norms(Yp, m, d, yn_p, n_threads)
    # Tiles run in time-bounded batches, each one parallel region, so Ctrl-C
    # is seen between them (fastkern._batches).
    cdef Batches batches = Batches(ntiles, n_threads)
    while batches.next():
        with nogil, parallel(num_threads=n_threads):
            tid = omp_get_thread_num()
            tbuf = &bufs[tid, 0, 0]
            tscr = &bufs[tid, 1, 0]
            # dynamic: diagonal tiles of the direct path do half the work of the others.
            for t in prange(batches.start, batches.stop, schedule='dynamic'):
                I = ti[t]
                J = tj[t]
                i0 = I * tile
                j0 = J * tile
                bi = min(tile, n - i0)
                bj = min(tile, m - j0)
                # The tile is built in the thread's buffer (gemm + map, or the
                # fused distance loop), mirrored there if it is diagonal, and
                # streamed to K once per orientation.
                gram_tile(Xp + i0 * d, Yp + j0 * d, Ytp + (j0 if direct else 0), m, d,
                          xn_p + i0 if xn_p != NULL else NULL,
                          yn_p + j0 if yn_p != NULL else NULL,
                          tbuf, bj, bi, bj, &spec, symmetric and I == J)
                if symmetric and I == J:
                    _mirror_block(tbuf, bj, 0, bi, 0, bj, True)
                _stream(tbuf, bj, Op + i0 * m + j0, m, bi, bj, tscr, False)
                if symmetric and I != J:
                    _stream(tbuf, bj, Op + j0 * m + i0, m, bi, bj, tscr, True)
            fk_store_fence()
    return np.asarray(out)
