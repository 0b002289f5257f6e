"""In-place double centering of Gram matrices.

Train:  K <- K - 1K/n - K1/n + 1K1/n^2, i.e. K[i,j] += t - r[i] - c[j] with
        r the row means, c the column means and t the grand mean.
Test:   K[i,j] += t - r[i] - c[j] with r the row means of the cross-Gram itself
        and c, t the training column means and grand mean.

One read pass for the means, row after row (float64 accumulation over fixed
blocks of rows, so the result does not depend on the thread count; n^2/256
doubles of scratch, 0.4% of the matrix), one read-write pass for the update.  Both
passes run in time-bounded batches (fastkern._batches) so Ctrl-C stops them
within a fraction of a second; an interrupted in-place centering leaves K
partly centred.

Also here: the products of the block eigensolver that runs on an uncentred
Gram (gram_matmat, K V for narrow V; gram_matmat_packed, the same from the
packed upper triangle, laid out by packed_layout) and on its own basis
(tall_matmul, tall_inner, tall_residual).
"""
from cython.parallel cimport prange
from cython cimport floating
from libc.string cimport memset
from scipy.linalg.cython_blas cimport dgemm

import numpy as np

from fastkern._batches cimport Batches


cdef extern from "fk_matmat.h" nogil:
    int FK_MM_ROWS
    int fk_mm_fast_available()
    int fk_mm_fast_level()
    void fk_mm_rows(const double *K, Py_ssize_t ldk, Py_ssize_t r0, Py_ssize_t r1,
                    Py_ssize_t n, const double *V, Py_ssize_t bp, double *out, int fast)
    void fk_mm_sym_strip(const double *K, Py_ssize_t ldk, Py_ssize_t i0, Py_ssize_t R,
                         Py_ssize_t n, const double *V, Py_ssize_t bp, double *out, double *T,
                         int fast)
    void fk_mm_tn(const double *A, Py_ssize_t lda, Py_ssize_t R, Py_ssize_t c, const double *Z,
                  Py_ssize_t bp, double *out, int fast)
    void fk_mm_nn(const double *A, Py_ssize_t lda, Py_ssize_t R, Py_ssize_t c, const double *B,
                  Py_ssize_t bp, double *out, int add, int fast)


#: Whether this CPU runs gram_matmat's AVX2+FMA code (fk_matmat.h).
FAST_MATMAT = bool(fk_mm_fast_available())
#: The symmetric strip's best body on this CPU: 2 AVX-512, 1 AVX2+FMA, 0 portable.
FAST_LEVEL = fk_mm_fast_level()


cdef enum:
    # Rows per block of the means pass: the block's partial column sums (m
    # doubles) stay in cache while its rows stream past in order, and all the
    # blocks' partial sums cost n / ROW_BLOCK rows of m doubles, 0.4% of K.
    ROW_BLOCK = 256
    # Columns per chunk of a row sum, the chunk sums added in order: a
    # sequential sum's rounding error grows with its length.
    COL_CHUNK = 512


cdef inline double _row_sum(const floating *row, Py_ssize_t m) noexcept nogil:
    """sum(row[0:m]) in float64, in chunks of COL_CHUNK added in order, each
    with eight running sums combined in a fixed order: one running sum waits
    on every addition's latency (the means pass read K at 13 GB/s on a Zen 5
    host, against 19 GB/s for NumPy's single-threaded sum); eight vectorise."""
    cdef Py_ssize_t j0 = 0, j, j1
    cdef double s = 0.0, c, a0, a1, a2, a3, a4, a5, a6, a7
    while j0 < m:
        j1 = min(j0 + COL_CHUNK, m)
        a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = 0.0
        j = j0
        while j + 8 <= j1:
            a0 = a0 + row[j]
            a1 = a1 + row[j + 1]
            a2 = a2 + row[j + 2]
            a3 = a3 + row[j + 3]
            a4 = a4 + row[j + 4]
            a5 = a5 + row[j + 5]
            a6 = a6 + row[j + 6]
            a7 = a7 + row[j + 7]
            j = j + 8
        c = ((a0 + a1) + (a2 + a3)) + ((a4 + a5) + (a6 + a7))
        while j < j1:
            c = c + row[j]
            j = j + 1
        s = s + c
        j0 = j1
    return s


cdef void _row_block_sums(const floating *K, Py_ssize_t n, Py_ssize_t m, double *r,
                          double *partial, Py_ssize_t b0, Py_ssize_t b1,
                          int n_threads) noexcept nogil:
    """Row sums, and the partial column sums of each block of rows, for blocks b0..b1-1.

    K is read row after row (a column-block order read it at 13 GB/s, each
    row's 4 KB piece a page of its own).  Work is split into fixed blocks of
    ROW_BLOCK rows, each row summed whole by one thread and each block's
    column sums (partial: nblocks x m scratch) over its rows in order; they
    are added in block order by _add_partials, so the result is bit-identical
    for any thread count.
    """
    cdef Py_ssize_t b, i, j, i0, i1
    cdef double *cp
    cdef const floating *row
    for b in prange(b0, b1, num_threads=n_threads, schedule='dynamic'):
        i0 = b * ROW_BLOCK
        i1 = min(i0 + ROW_BLOCK, n)
        cp = partial + b * m
        for j in range(m):
            cp[j] = 0.0
        for i in range(i0, i1):
            row = K + i * m
            r[i] = _row_sum(row, m)
            for j in range(m):
                cp[j] = cp[j] + row[j]


cdef void _add_partials(const double *partial, Py_ssize_t nb, Py_ssize_t m, double *c,
                        int n_threads) noexcept nogil:
    """c[j] = sum over blocks b, in order, of partial[b, j]."""
    cdef Py_ssize_t b, j, q, j0, j1
    for q in prange((m + COL_CHUNK - 1) // COL_CHUNK, num_threads=n_threads, schedule='static'):
        j0 = q * COL_CHUNK
        j1 = min(j0 + COL_CHUNK, m)
        for j in range(j0, j1):
            c[j] = 0.0
        for b in range(nb):
            for j in range(j0, j1):
                c[j] = c[j] + partial[b * m + j]


cdef _row_col_sums(const floating *K, Py_ssize_t n, Py_ssize_t m, double *r,
                   double *colsum, double *partial, int n_threads):
    """r[i] = sum_j K[i,j]; colsum[j] = sum_i K[i,j], in time-bounded batches of row blocks.

    partial: _partial_size(n, m) doubles of scratch."""
    cdef Py_ssize_t nb = (n + ROW_BLOCK - 1) // ROW_BLOCK
    cdef Batches batches = Batches(nb, n_threads)
    while batches.next():
        with nogil:
            _row_block_sums(K, n, m, r, partial, batches.start, batches.stop, batches.threads)
    with nogil:
        _add_partials(partial, nb, m, colsum, batches.threads)


cdef Py_ssize_t _partial_size(Py_ssize_t n, Py_ssize_t m):
    return max(1, ((n + ROW_BLOCK - 1) // ROW_BLOCK) * m)


cdef void _update_rows(floating *K, Py_ssize_t m, const double *r, const double *c,
                       double t, Py_ssize_t i0, Py_ssize_t i1, int n_threads) noexcept nogil:
    cdef Py_ssize_t i, j
    cdef double a
    for i in prange(i0, i1, num_threads=n_threads, schedule='static'):
        a = t - r[i]
        for j in range(m):
            K[i * m + j] = <floating> (K[i * m + j] + (a - c[j]))


cdef _update(floating *K, Py_ssize_t n, Py_ssize_t m, const double *r, const double *c,
             double t, int n_threads):
    """K[i,j] += t - r[i] - c[j], in time-bounded batches of rows.

    Interrupted (KeyboardInterrupt between batches), K is left with its first
    rows centred and the others untouched.
    """
    cdef Batches batches = Batches(n, n_threads)
    while batches.next():
        with nogil:
            _update_rows(K, m, r, c, t, batches.start, batches.stop, batches.threads)


def center_train(floating[:, ::1] K, int n_threads):
    """Double-centre a square K in place; return (column means, grand mean)."""
    cdef Py_ssize_t n = K.shape[0]
    cdef double[::1] r = np.empty(n)
    cdef double[::1] c = np.empty(n)
    cdef double[::1] partial = np.empty(_partial_size(n, n))
    cdef double t = 0.0
    cdef Py_ssize_t i
    _row_col_sums(&K[0, 0], n, n, &r[0], &c[0], &partial[0], n_threads)
    for i in range(n):
        r[i] /= n
        c[i] /= n
        t += c[i]
    t /= n
    _update(&K[0, 0], n, n, &r[0], &c[0], t, n_threads)
    return np.asarray(c), t


def center_test(floating[:, ::1] K, const double[::1] fit_col_means, double fit_mean,
                int n_threads):
    """Centre a cross-Gram K(X_test, X_train) in place with the training means."""
    cdef Py_ssize_t n = K.shape[0], m = K.shape[1], i, j
    cdef double[::1] r = np.empty(n)
    cdef double s
    cdef int nt
    cdef Batches batches = Batches(n, n_threads)
    while batches.next():
        nt = batches.threads
        with nogil:
            for i in prange(batches.start, batches.stop, num_threads=nt,
                            schedule='static'):
                s = 0.0
                for j in range(m):
                    s = s + K[i, j]
                r[i] = s / m
    _update(&K[0, 0], n, m, &r[0], &fit_col_means[0], fit_mean, n_threads)


def row_col_means(const floating[:, ::1] K, int n_threads):
    """(row means, column means, grand mean) of K in one read pass, K unchanged:
    what centring K implicitly needs (``fastkern.centering.CentredGram``)."""
    cdef Py_ssize_t n = K.shape[0], m = K.shape[1], i, j
    cdef double[::1] r = np.empty(n)
    cdef double[::1] c = np.empty(m)
    cdef double[::1] partial = np.empty(_partial_size(n, m))
    _row_col_sums(&K[0, 0], n, m, &r[0], &c[0], &partial[0], n_threads)
    for i in range(n):
        r[i] /= m
    for j in range(m):
        c[j] /= n
    return np.asarray(r), np.asarray(c), float(np.mean(c))


def column_means(const floating[:, ::1] K, int n_threads):
    """Column means and grand mean of K without modifying it (KernelCenterer.fit)."""
    cdef Py_ssize_t n = K.shape[0], m = K.shape[1], j
    cdef double[::1] r = np.empty(n)
    cdef double[::1] c = np.empty(m)
    cdef double[::1] partial = np.empty(_partial_size(n, m))
    _row_col_sums(&K[0, 0], n, m, &r[0], &c[0], &partial[0], n_threads)
    for j in range(m):
        c[j] /= n
    return np.asarray(c), float(np.mean(c))


def gram_matmat(const double[:, ::1] K, const double[:, ::1] V, double[:, ::1] out,
                int n_threads, bint fast=True):
    """out = K @ V for C-contiguous float64 K (m x n), V (n x b), out (m x b), b % 4 == 0.

    For the narrow blocks of the block eigensolver, where BLAS is slow (see
    src/fk_matmat.h).  Blocks of rows are dealt dynamically to the threads;
    each row is summed by one thread in a fixed order, so the result is the
    same for any thread count.  fast=False forces the portable code (tests).
    """
    cdef Py_ssize_t m = K.shape[0], n = K.shape[1], bp = V.shape[1], blk, nblk, r0
    # Rows per task: a multiple of the kernel's rows, small enough to balance.
    cdef Py_ssize_t rows = 8 * FK_MM_ROWS
    cdef int use_fast = fast and FAST_MATMAT
    if V.shape[0] != n or out.shape[0] != m or out.shape[1] != bp:
        raise ValueError(f"shapes do not match: K {m}x{n}, V {V.shape[0]}x{bp}, "
                         f"out {out.shape[0]}x{out.shape[1]}")
    if bp % 4 != 0:
        raise ValueError(f"V must have a multiple of 4 columns, got {bp}")
    if m == 0 or bp == 0:
        return
    if n == 0:
        out[:, :] = 0.0
        return
    nblk = (m + rows - 1) // rows
    with nogil:
        for blk in prange(nblk, num_threads=n_threads, schedule='dynamic'):
            r0 = blk * rows
            fk_mm_rows(&K[0, 0], n, r0, min(m, r0 + rows), n, &V[0, 0], bp, &out[0, 0],
                       use_fast)


cdef enum:
    # Rows per strip of the packed upper triangle and its product: a multiple
    # of the micro-kernels' 6 and 12 rows, small enough that a strip's chunk
    # of K stays in cache for its transposed pass.
    STRIP = 12

#: Rows per strip of the packed upper triangle (``packed_layout``).
STRIP_ROWS = STRIP


def packed_layout(Py_ssize_t n):
    """(row_start, size): where the packed upper triangle of an n x n matrix keeps K[i, j].

    Rows are grouped in strips of STRIP_ROWS; strip s (rows i0 = s *
    STRIP_ROWS on) stores its rows from column i0 to n - 1, row-major with
    leading dimension n - i0, right after strip s - 1.  K[i, j] for j >= i
    (and j >= i's strip start) is data[row_start[i] + j].  The size is about
    n^2 / 2 + 6 n values: half of the full matrix, and each strip is one
    block of the full matrix's layout, so the product reads it with the
    full matrix's kernel (``gram_matmat_packed``).  row_start[i] >= 0, even
    as the address of a column before the strip's start.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    i = np.arange(n, dtype=np.intp)
    i0 = i - i % STRIP
    # Values of the strips before i's: sum over t < s of STRIP (n - t STRIP).
    s = i0 // STRIP
    before = STRIP * s * n - STRIP * STRIP * s * (s - 1) // 2
    row_start = before + (i - i0) * (n - i0) - i0
    size = int(row_start[n - 1] + n) if n else 0
    return row_start, size


def gram_matmat_packed(const double[::1] data, const Py_ssize_t[::1] row_start,
                       const double[:, ::1] V, double[:, ::1] out, double[:, :, ::1] acc,
                       int n_threads, int level=-1):
    """out = K @ V for a symmetric n x n K kept as its packed upper triangle.

    data and row_start as ``packed_layout(n)`` lays them out (n = V's rows).
    V (n x b, b % 4 == 0) and out as for :func:`gram_matmat`.  Strip s goes
    to slot s % S (S = acc.shape[0], acc of shape (S, n, b), zeroed here); a
    slot's strips add the lower triangle's share of the product into
    acc[slot] in order, and the slots are added in order at the end, so the
    result is the same from run to run for a given S.  Each thread takes
    whole slots: with S = n_threads each keeps one accumulator warm in cache
    (N = 8000, 8 columns, 2 threads: 13.7 ms with 2 slots, 14.3 ms with 4).
    The thread that fills a slot zeroes it, and the final sum runs on all
    threads, row by row in slot order: done serially, these two passes over
    acc took a quarter of a product on 16 threads.
    A strip is a block of rows with its own leading dimension, handed to the
    full matrix's strip kernel as such (``fk_mm_sym_strip``).  level: the
    body, as FAST_LEVEL numbers them (-1: the best this CPU runs; a higher
    one than it runs is lowered to that).  With AVX-512 (level 2) an element
    of K takes one fused multiply-add of 8 columns instead of two of 4, and
    the result is the AVX2 body's, bit for bit.
    """
    cdef Py_ssize_t n = V.shape[0], bp = V.shape[1], S = acc.shape[0], nstrips, slot, st, i0
    cdef Py_ssize_t i, s2, c
    cdef int use_fast = FAST_LEVEL if level < 0 else min(level, FAST_LEVEL)
    if row_start.shape[0] != n or out.shape[0] != n or out.shape[1] != bp:
        raise ValueError(f"shapes do not match: {row_start.shape[0]} row starts, V "
                         f"{n}x{bp}, out {out.shape[0]}x{out.shape[1]}")
    if n and data.shape[0] != row_start[n - 1] + n:
        raise ValueError(f"data must hold {row_start[n - 1] + n} values (packed_layout), "
                         f"got {data.shape[0]}")
    if bp % 4 != 0:
        raise ValueError(f"V must have a multiple of 4 columns, got {bp}")
    if S < 1 or acc.shape[1] != n or acc.shape[2] != bp:
        raise ValueError("acc must have shape (S, n, b) with S >= 1")
    if n == 0 or bp == 0:
        return
    nstrips = (n + STRIP - 1) // STRIP
    with nogil:
        for slot in prange(S, num_threads=n_threads, schedule='static', chunksize=1):
            memset(&acc[slot, 0, 0], 0, n * bp * sizeof(double))
            st = slot
            while st < nstrips:
                i0 = st * STRIP
                # Row i of the strip starts at row_start[i0] + (i - i0) (n - i0):
                # the strip kernel's K[i * (n - i0) + j] with K at that base.
                fk_mm_sym_strip(&data[0] + row_start[i0] - i0 * (n - i0), n - i0, i0,
                                min(<Py_ssize_t> STRIP, n - i0), n, &V[0, 0], bp,
                                &out[0, 0], &acc[slot, 0, 0], use_fast)
                st = st + S
        for i in prange(n, num_threads=n_threads, schedule='static'):
            for s2 in range(S):
                for c in range(bp):
                    out[i, c] += acc[s2, i, c]


cdef enum:
    # Rows per block of tall_matmul, tall_inner and tall_residual: fixed, so
    # that results do not depend on the thread count.
    TALL_ROWS = 512


cdef Py_ssize_t _row_stride(const double[:, :] A, str name) except -1:
    """A's leading dimension in doubles; its rows must be contiguous."""
    if A.shape[1] > 1 and A.strides[1] != sizeof(double):
        raise ValueError(f"{name} must have contiguous rows")
    if A.strides[0] % sizeof(double) != 0 or A.strides[0] < max(1, A.shape[1]) * sizeof(double):
        raise ValueError(f"{name} must be a row-major view with a forward row stride")
    return A.strides[0] // sizeof(double)


def _blocks_in_order(partial):
    """The sum of the per-block partials partial[0], partial[1], ... in that
    order: the same result for any thread count."""
    total = partial[0].copy()
    for blk in range(1, partial.shape[0]):
        total += partial[blk]
    return total


cdef inline bint _tall_fast(Py_ssize_t p, bint fast) noexcept:
    # fastkern's register tiles take 4 or 8 columns at a time; other widths,
    # CPUs without AVX2 and FMA, and fast=False take dgemm.
    return fast and FAST_MATMAT and p % 4 == 0


def tall_matmul(const double[:, :] A, const double[:, :] B, double[:, :] out, int n_threads,
                bint fast=True):
    """out = A @ B for a tall A (n x c) and a small B (c x p), rows split among threads.

    The block eigensolver's own linear algebra (Ritz vectors, projections) is
    made of such products, on blocks of n rows against a basis of a few
    hundred columns.  Each thread takes fixed blocks of TALL_ROWS rows, so the
    result does not depend on the thread count.  A block is one call of
    fastkern's register-tiled product (``fk_matmat.h``, AVX2 and FMA, p a
    multiple of 4, B and out contiguous), else one single-threaded dgemm (the
    caller holds BLAS to one thread).  OpenBLAS packs A for every call: 8000
    rows, a 104-column A, 8 columns, 2 threads, 0.11 ms against dgemm's
    0.20 ms (tall_inner: 0.13 ms against 0.31 ms; best of 30).  All three
    arrays are row-major views with contiguous rows (slices of wider arrays
    are fine).  fast=False forces dgemm (tests).
    """
    cdef Py_ssize_t n = A.shape[0], c = A.shape[1], p = B.shape[1], nb, blk, r0
    cdef Py_ssize_t lda, ldb, ldo
    cdef int m_, n_, k_, lda_, ldb_, ldo_
    cdef double one = 1.0, zero = 0.0
    cdef char tn = b'N'
    if B.shape[0] != c or out.shape[0] != n or out.shape[1] != p:
        raise ValueError(f"shapes do not match: A {n}x{c}, B {B.shape[0]}x{p}, "
                         f"out {out.shape[0]}x{out.shape[1]}")
    if n == 0 or p == 0:
        return
    if c == 0:
        out[:, :] = 0.0
        return
    lda, ldb, ldo = _row_stride(A, "A"), _row_stride(B, "B"), _row_stride(out, "out")
    cdef bint own = _tall_fast(p, fast) and ldb == p and ldo == p
    m_, k_, lda_, ldb_, ldo_ = <int> p, <int> c, <int> lda, <int> ldb, <int> ldo
    nb = (n + TALL_ROWS - 1) // TALL_ROWS
    with nogil:
        for blk in prange(nb, num_threads=n_threads, schedule='static'):
            r0 = blk * TALL_ROWS
            n_ = <int> min(<Py_ssize_t> TALL_ROWS, n - r0)
            if own:
                fk_mm_nn(&A[r0, 0], lda, n_, c, &B[0, 0], p, &out[r0, 0], 0, 1)
            else:
                # Row-major out = A B is column-major out^T = B^T A^T: no transposes.
                dgemm(&tn, &tn, &m_, &n_, &k_, &one, &B[0, 0], &ldb_, &A[r0, 0], &lda_, &zero,
                      &out[r0, 0], &ldo_)


def tall_residual(const double[:, :] V, const double[:, :] W, const double[:, :] S,
                  const double[:, :] ST, double[:, :] out, int n_threads, bint fast=True):
    """out = W @ S - V @ ST for tall V and W (n x c), and out's column norms.

    The block eigensolver's Ritz residuals A Y - Y Theta with Y = V S and
    A Y = W S (ST = S Theta): each fixed block of TALL_ROWS rows is summed by
    two products into out while it is in cache (as in :func:`tall_matmul`),
    and its squared column norms are kept per block and added in block order,
    so the result does not depend on the thread count.  Neither Y nor A Y is
    formed: the solver only needs them at a restart and at the end.  Views as
    in :func:`tall_matmul`; fast=False forces dgemm (tests).
    """
    cdef Py_ssize_t n = V.shape[0], c = V.shape[1], p = S.shape[1], nb, blk, r0, i, j, rows
    cdef Py_ssize_t ldv, ldw, lds, ldt, ldo
    cdef int m_, n_, k_, ldv_, ldw_, lds_, ldt_, ldo_
    cdef double one = 1.0, zero = 0.0, minus = -1.0, x
    cdef char tn = b'N'
    if (W.shape[0] != n or W.shape[1] != c or S.shape[0] != c or ST.shape[0] != c
            or ST.shape[1] != p or out.shape[0] != n or out.shape[1] != p):
        raise ValueError(f"shapes do not match: V {n}x{c}, W {W.shape[0]}x{W.shape[1]}, "
                         f"S {S.shape[0]}x{p}, ST {ST.shape[0]}x{ST.shape[1]}, "
                         f"out {out.shape[0]}x{out.shape[1]}")
    if n == 0 or p == 0 or c == 0:
        out[:, :] = 0.0
        return np.zeros(p)
    ldv, ldw, lds = _row_stride(V, "V"), _row_stride(W, "W"), _row_stride(S, "S")
    ldt, ldo = _row_stride(ST, "ST"), _row_stride(out, "out")
    cdef bint own = _tall_fast(p, fast) and lds == p and ldo == p
    # The own product adds V (-ST): negated once here.
    cdef const double[:, ::1] NST = -np.asarray(ST) if own else None
    m_, k_ = <int> p, <int> c
    ldv_, ldw_, lds_, ldt_, ldo_ = <int> ldv, <int> ldw, <int> lds, <int> ldt, <int> ldo
    nb = (n + TALL_ROWS - 1) // TALL_ROWS
    partial = np.zeros((nb, p))
    cdef double[:, ::1] part = partial
    with nogil:
        for blk in prange(nb, num_threads=n_threads, schedule='static'):
            r0 = blk * TALL_ROWS
            rows = min(<Py_ssize_t> TALL_ROWS, n - r0)
            n_ = <int> rows
            if own:
                fk_mm_nn(&W[r0, 0], ldw, rows, c, &S[0, 0], p, &out[r0, 0], 0, 1)
                fk_mm_nn(&V[r0, 0], ldv, rows, c, &NST[0, 0], p, &out[r0, 0], 1, 1)
            else:
                # Row-major products as column-major transposes (see tall_matmul).
                dgemm(&tn, &tn, &m_, &n_, &k_, &one, &S[0, 0], &lds_, &W[r0, 0], &ldw_, &zero,
                      &out[r0, 0], &ldo_)
                dgemm(&tn, &tn, &m_, &n_, &k_, &minus, &ST[0, 0], &ldt_, &V[r0, 0], &ldv_,
                      &one, &out[r0, 0], &ldo_)
            for i in range(r0, r0 + rows):
                for j in range(p):
                    x = out[i, j]
                    part[blk, j] += x * x
    return np.sqrt(_blocks_in_order(partial))


def tall_inner(const double[:, :] A, const double[:, :] B, int n_threads, bint fast=True):
    """Return A^T @ B (c x p) for tall A (n x c) and B (n x p), rows split among threads.

    Each fixed block of TALL_ROWS rows gives a partial product (fastkern's
    transposed register tiles, or one single-threaded dgemm, as in
    :func:`tall_matmul`); the partials are added in block order, so the
    result does not depend on the thread count.  Views as in
    :func:`tall_matmul`; fast=False forces dgemm (tests).
    """
    cdef Py_ssize_t n = A.shape[0], c = A.shape[1], p = B.shape[1], nb, blk, r0, rows
    cdef Py_ssize_t lda, ldb
    cdef int m_, n_, k_, lda_, ldb_
    cdef double one = 1.0, zero = 0.0
    cdef char tn = b'N', tt = b'T'
    if B.shape[0] != n:
        raise ValueError(f"shapes do not match: A {n}x{c}, B {B.shape[0]}x{p}")
    if n == 0 or c == 0 or p == 0:
        return np.zeros((c, p))
    lda, ldb = _row_stride(A, "A"), _row_stride(B, "B")
    cdef bint own = _tall_fast(p, fast) and ldb == p
    m_, n_, lda_, ldb_ = <int> p, <int> c, <int> lda, <int> ldb
    nb = (n + TALL_ROWS - 1) // TALL_ROWS
    partial = np.zeros((nb, c, p)) if own else np.empty((nb, c, p))
    cdef double[:, :, ::1] part = partial
    with nogil:
        for blk in prange(nb, num_threads=n_threads, schedule='static'):
            r0 = blk * TALL_ROWS
            rows = min(<Py_ssize_t> TALL_ROWS, n - r0)
            if own:
                fk_mm_tn(&A[r0, 0], lda, rows, c, &B[r0, 0], p, &part[blk, 0, 0], 1)
            else:
                k_ = <int> rows
                # Row-major part (c x p) = A_blk^T B_blk is column-major
                # part^T = B_blk^T A_blk: B_blk^T as stored, A_blk transposed.
                dgemm(&tn, &tt, &m_, &n_, &k_, &one, &B[r0, 0], &ldb_, &A[r0, 0], &lda_, &zero,
                      &part[blk, 0, 0], &m_)
    return _blocks_in_order(partial)


