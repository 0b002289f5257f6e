"""Gram matrices of sparse (CSR) data, OpenMP-parallel, never densifying the input.

K is computed in blocks of ROWS rows by up to MAX_WIDTH columns (one work
item), X . Y^T first into a thread-local float64 buffer, in two parts:

* Sparse part (Gustavson's algorithm, row by row): each stored x_ik is
  multiplied into column k of Y (Y in CSC form, restricted to the block's
  columns) and added to the buffer's row, which stays in L2.  Its cost is the
  number of non-zero products, sum_k nnz(X[:, k]) nnz(Y[:, k]).  The
  alternative, scattering x_i into a dense length-d buffer and gathering it
  against every row of Y, costs n nnz(Y) whatever the overlap: on the
  TF-IDF-like benchmark (benchmarks/bench_sparse.py, 8000 x 50000, 100
  entries a row, Zipf columns) 6.4e9 gathers against 6e8 products.  Square
  tiles with a cursor per (row, entry) were tried too: each tile re-reads
  every cursor's column at a random place, and that cache miss per entry
  and tile made them 1.5x slower than whole rows.
* Dense part: with Zipf-like column popularity a few columns (frequent terms)
  make most of the products (benchmark: the 34 chosen make two thirds).  A
  column present in a fraction f_x of X's rows and f_y of Y's costs f_x f_y
  scattered products per entry of K, against one multiply-add of a gemm, about
  DENSE_GAIN times cheaper: columns with f_x f_y > 1 / DENSE_GAIN (at most
  MAX_DENSE of them) are copied into small dense blocks (n x K and m x K
  float64) and their share of every block comes from one dgemm.

The finished block is mapped by the same element-wise maps as the dense path
(src/fk_maps.h) and streamed to the Gram matrix (src/fk_stream.h); when Y is
X only columns from the block's first row on are computed, and each block is
also streamed, transposed, to its mirror.

Accuracy: RBF forms d2 = |x|^2 + |y|^2 - 2 x.y in float64 (float32 data too,
as scikit-learn upcasts), clamped at 0.  Sparse data cannot be centred (that
would make it dense), so the dense BLAS path's second safeguard does all the
work: an entry whose d2 is below 1/16 of |x|^2 + |y|^2 has cancelled most of
its digits and is recomputed from the differences of the two rows (a merge of
their sorted index lists).  The diagonal of K(X, X) is exactly 1.  The other
kernels of the squared distance (the FK_SQDIST kinds: laplacian_l2, Bessel,
...) take the same d2, recomputed by the same rule (0 on the diagonal), and
map it with the dense path's ``map_dist``.  Laplacian's
L1 distances are computed directly by the same merge, per pair, as
scikit-learn's sparse manhattan_distances.

Inputs are validated and canonicalised (CSR, sorted indices, no duplicates,
one index dtype) by fastkern.pairwise before any code here runs.
"""
from cython cimport floating
from cython.parallel cimport prange, parallel
from cpython.exc cimport PyErr_CheckSignals
from libc.math cimport exp, fabs
from libc.stdint cimport uint32_t, uint64_t
from libc.string cimport memcpy
from scipy.linalg.cython_blas cimport dgemm

import numpy as np

from fastkern._stream cimport fk_store_fence, stream_tile

from fastkern._batches cimport Batches
from fastkern._openmp cimport omp_get_thread_num
from fastkern._gram cimport (
    KernelMap, make_map, map_dist, map_dot, sqdist_from_dot, K_RBF, K_LAPLACIAN, FK_SQDIST,
    fk_kind_geometry,
)
from fastkern._maps cimport (fk_vexp_d, fk_vexp_f, fk_rbf_dot_d, fk_rbf_dot_f,
                             fk_max_abs_bits_d, fk_max_abs_bits_f)

# A work item is ROWS rows of K by up to MAX_WIDTH columns: one row of its
# float64 buffer (64 KB) stays in L2 while that row's products are scattered
# into it, and the three buffers of a thread take 6 MB at most.
ROWS = 32
MAX_WIDTH = 8192
# A scattered product costs about this many gemm multiply-adds (measured on
# the 2-core dev machine: 1.6 ns against 0.1 ns).
DENSE_GAIN = 16
# Bounds the dense blocks to (n + m) x 256 float64, O(n) memory.
MAX_DENSE = 256
# Work of one item, in scattered products: about 20 ms of one core.
MAX_ITEM_WORK = 1 << 23

ctypedef fused index_t:
    int
    long long

def row_sq_norms(const floating[::1] data, const index_t[::1] indptr, int n_threads):
    """Squared L2 norm of each row of a CSR matrix, in float64."""
    cdef Py_ssize_t n = indptr.shape[0] - 1, i, p
    cdef double s
    norms = np.empty(n)
    cdef double[::1] out = norms
    if data.shape[0] == 0:
        norms[:] = 0
        return norms
    with nogil:
        for i in prange(n, num_threads=n_threads, schedule='static'):
            s = 0.0
            for p in range(indptr[i], indptr[i + 1]):
                s = s + (<double> data[p]) * data[p]
            out[i] = s
    return norms


cdef inline Py_ssize_t _lower_bound(const index_t *a, Py_ssize_t lo, Py_ssize_t hi,
                                    Py_ssize_t v) noexcept nogil:
    """First position in the sorted a[lo:hi] holding a value >= v."""
    cdef Py_ssize_t mid
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if a[mid] < v:
            lo = mid + 1
        else:
            hi = mid
    return lo


cdef double _merge_dist(const floating *xd, const index_t *xi, Py_ssize_t xa, Py_ssize_t xb,
                        const floating *yd, const index_t *yi, Py_ssize_t ya, Py_ssize_t yb,
                        bint l1) noexcept nogil:
    """|x - y|^2 (or |x - y|_1 if l1) of two sparse rows with sorted, unique indices.

    Each term is a difference of the raw coordinates, as the dense direct path.
    """
    cdef Py_ssize_t p = xa, q = ya
    cdef double s = 0.0, t
    while p < xb or q < yb:
        if q >= yb or (p < xb and xi[p] < yi[q]):
            t = xd[p]
            p += 1
        elif p >= xb or yi[q] < xi[p]:
            t = yd[q]
            q += 1
        else:
            t = (<double> xd[p]) - yd[q]
            p += 1
            q += 1
        s = s + (fabs(t) if l1 else t * t)
    return s


cdef inline void _scatter(double *g, double v, const floating *cd, const index_t *ci,
                          Py_ssize_t q, Py_ssize_t q1, Py_ssize_t c1,
                          bint to_end) noexcept nogil:
    """g[ci[q]] += v cd[q] along column entries q.. while ci[q] < c1 (to q1 if to_end).

    Its own function, so the hot loop keeps its operands in registers.
    """
    if to_end:
        for q in range(q, q1):
            g[ci[q]] += v * cd[q]
    else:
        while q < q1 and ci[q] < c1:
            g[ci[q]] += v * cd[q]
            q = q + 1


def csc_positions(const index_t[::1] indices, const index_t[::1] indptr,
                  const index_t[::1] colptr):
    """pos[p]: where CSR entry p sits in the CSC form (rows ascending in each column)."""
    cdef Py_ssize_t n = indptr.shape[0] - 1, i, p
    nxt_arr = np.array(colptr[:colptr.shape[0] - 1])
    pos_arr = np.empty(indices.shape[0], dtype=nxt_arr.dtype)
    cdef index_t[::1] nxt = nxt_arr
    cdef index_t[::1] pos = pos_arr
    with nogil:
        for i in range(n):
            for p in range(indptr[i], indptr[i + 1]):
                pos[p] = nxt[indices[p]]
                nxt[indices[p]] += 1
    return pos_arr


cdef inline const floating *_ptr(const floating[::1] a) noexcept nogil:
    return &a[0] if a.shape[0] > 0 else NULL


cdef inline const index_t *_iptr(const index_t[::1] a) noexcept nogil:
    return &a[0] if a.shape[0] > 0 else NULL


cdef inline void _gemm_nt(const double *A, const double *B, double *C, int bi, int bj,
                          int k, int ldc) noexcept nogil:
    """C[bi x bj, row-major] = A[bi x k] . B[bj x k]^T (operands swapped for BLAS)."""
    cdef char ta = b'T'
    cdef char tb = b'N'
    cdef double one = 1.0, zero = 0.0
    dgemm(&ta, &tb, &bj, &bi, &k, &one, <double *> B, &k, <double *> A, &k, &zero, C, &ldc)


cdef void _block(Py_ssize_t i0, Py_ssize_t bi, Py_ssize_t c0, Py_ssize_t c1, Py_ssize_t m,
                 const floating *xd, const index_t *xi, const index_t *xp,
                 const floating *yd, const index_t *yi, const index_t *yp,
                 const floating *cd, const index_t *ci, const index_t *cp,
                 const index_t *pos, const int *dense_pos, const double *Xd, const double *Yd, int kd,
                 const double *xn, const double *yn,
                 double *G, floating *tbuf, floating *tscr,
                 floating *out, const KernelMap *spec, bint symmetric) noexcept nogil:
    """K[i0:i0 + bi, c0:c1]; when symmetric (c0 >= i0) also its mirror K[c0:c1, i0:i0 + bi]."""
    cdef Py_ssize_t w = c1 - c0, i, j, p, q, k, skip
    cdef double v
    cdef double *g
    cdef floating *row
    cdef bint diag = symmetric and c0 == i0
    if spec.kind == K_LAPLACIAN:
        for i in range(bi):
            row = tbuf + i * w
            for j in range(w):
                row[j] = <floating> _merge_dist(xd, xi, xp[i0 + i], xp[i0 + i + 1],
                                                yd, yi, yp[c0 + j], yp[c0 + j + 1], True)
            if floating is double:
                fk_vexp_d(row, w, -spec.gamma)
            else:
                fk_vexp_f(row, w, <float> -spec.gamma)
    else:
        if kd > 0:
            _gemm_nt(Xd + i0 * kd, Yd + c0 * kd, G, <int> bi, <int> w, kd, <int> w)
        else:
            for j in range(bi * w):
                G[j] = 0.0
        for i in range(bi):
            # Row by row, so the scattered adds stay in one row of G (8 w bytes, L2).
            g = G + i * w - c0
            for p in range(xp[i0 + i], xp[i0 + i + 1]):
                k = xi[p]
                if dense_pos[k] >= 0:
                    continue
                if diag:
                    # Y is X: row i0 + i itself is in column k, at pos[p]; the
                    # columns before it are the diagonal block's lower half,
                    # copied from the upper half below.
                    q = pos[p]
                elif c0 == 0:
                    q = cp[k]
                else:
                    q = _lower_bound(ci, cp[k], cp[k + 1], c0)
                _scatter(g, xd[p], cd, ci, q, cp[k + 1], c1, c1 == m)
        for i in range(bi):
            g = G + i * w
            row = tbuf + i * w
            if spec.kind == K_RBF:
                if floating is double:
                    fk_rbf_dot_d(g, row, yn + c0, xn[i0 + i], spec.gamma, w)
                else:
                    fk_rbf_dot_f(g, row, yn + c0, xn[i0 + i], spec.gamma, w)
                # Entries the map flagged (-1) as cancelled: direct differences.
                for j in range(w):
                    if row[j] < 0:
                        row[j] = <floating> exp(-spec.gamma * _merge_dist(
                            xd, xi, xp[i0 + i], xp[i0 + i + 1],
                            yd, yi, yp[c0 + j], yp[c0 + j + 1], False))
                if diag and i < w:
                    row[i] = 1
            elif fk_kind_geometry(spec.kind) == FK_SQDIST:
                # RBF's squared distances (same recomputation), then the kernel's map.
                sqdist_from_dot(g, yn + c0, xn[i0 + i], w)
                for j in range(w):
                    if g[j] < 0:
                        g[j] = _merge_dist(xd, xi, xp[i0 + i], xp[i0 + i + 1],
                                           yd, yi, yp[c0 + j], yp[c0 + j + 1], False)
                if diag and i < w:
                    g[i] = 0.0
                map_dist(g, w, spec)
                for j in range(w):
                    row[j] = <floating> g[j]
            else:
                for j in range(w):
                    row[j] = <floating> g[j]
                map_dot(row, w, spec)
    skip = 0
    if diag:
        # The diagonal block tbuf[:, :bi] is made exactly symmetric (upper half
        # copied down) and is not mirrored again.
        skip = min(bi, w)
        for i in range(skip):
            for j in range(i):
                tbuf[i * w + j] = tbuf[j * w + i]
    stream_tile(tbuf, w, out + i0 * m + c0, m, bi, w, tscr, False, False)
    if symmetric and w > skip:
        stream_tile(tbuf + skip, w, out + (c0 + skip) * m + i0, m, bi, w - skip, tscr, True,
                    False)


def _gram(const floating[::1] xd, const index_t[::1] xi, const index_t[::1] xp,
          const floating[::1] yd, const index_t[::1] yi, const index_t[::1] yp,
          const floating[::1] cd, const index_t[::1] ci, const index_t[::1] cp,
          const index_t[::1] pos, const int[::1] dense_pos, const double[:, ::1] Xd, const double[:, ::1] Yd,
          const double[::1] xn, const double[::1] yn, floating[:, ::1] out,
          int kind, const double[::1] params, bint symmetric,
          Py_ssize_t rows, Py_ssize_t width, int n_threads):
    cdef Py_ssize_t n = out.shape[0], m = out.shape[1], t, i0, c0
    cdef Py_ssize_t nbi = (n + rows - 1) // rows
    cdef int tid, kd = Xd.shape[1]
    cdef KernelMap spec = make_map(kind, params, False)
    cdef bint sqdist = fk_kind_geometry(kind) == FK_SQDIST
    cdef bint lap = kind == K_LAPLACIAN
    # No more threads (and per-thread buffers) than work items.
    n_threads = <int> min(<Py_ssize_t> n_threads, max(nbi * ((m + width - 1) // width), 1))
    cdef double[:, ::1] Gs = np.empty((n_threads, 1 if lap else rows * width))
    dtype = np.float64 if floating is double else np.float32
    # float64 results are mapped in place in the accumulator (the maps allow
    # it), so only the transpose scratch is needed besides; float32 results
    # and Laplacian's distances need their own buffer.
    cdef bint in_place = floating is double and not lap
    cdef floating[:, :, ::1] bufs = np.empty((n_threads, 1 if in_place else 2, rows * width),
                                             dtype=dtype)
    cdef const floating *xdp = _ptr(xd)
    cdef const floating *ydp = _ptr(yd)
    cdef const floating *cdp = _ptr(cd)
    cdef const index_t *xip = _iptr(xi)
    cdef const index_t *yip = _iptr(yi)
    cdef const index_t *cip = _iptr(ci)
    cdef const index_t *posp = _iptr(pos) if symmetric else NULL
    cdef const double *Xdp = &Xd[0, 0] if kd > 0 else NULL
    cdef const double *Ydp = &Yd[0, 0] if kd > 0 else NULL
    cdef const double *xnp = &xn[0] if sqdist else NULL
    cdef const double *ynp = &yn[0] if sqdist else NULL

    # Work items (row block, first column): `rows` rows by up to `width`
    # columns, from the block's first row on when symmetric (the upper
    # triangle), else from column 0.
    first = np.arange(nbi) * rows if symmetric else np.zeros(nbi, dtype=np.intp)
    counts = (m - first + width - 1) // width
    blocks = np.repeat(np.arange(nbi), counts)
    within = np.arange(blocks.size) - np.repeat(np.cumsum(counts) - counts, counts)
    cdef Py_ssize_t[:, ::1] items = np.ascontiguousarray(
        np.stack([blocks * rows, first[blocks] + within * width], axis=1), dtype=np.intp)
    # Items in time-bounded batches, each one parallel region, so Ctrl-C is
    # seen between them (fastkern._batches).  dynamic: the work of an item
    # varies (the last columns of a row block, rows of many entries).
    cdef int nt
    cdef Batches batches = Batches(items.shape[0], n_threads)
    while batches.next():
        nt = batches.threads
        with nogil, parallel(num_threads=nt):
            tid = omp_get_thread_num()
            for t in prange(batches.start, batches.stop, schedule='dynamic'):
                i0 = items[t, 0]
                c0 = items[t, 1]
                _block(i0, min(rows, n - i0), c0, min(m, c0 + width), m,
                       xdp, xip, &xp[0], ydp, yip, &yp[0], cdp, cip, &cp[0], posp,
                       &dense_pos[0], Xdp, Ydp, kd, xnp, ynp, &Gs[tid, 0],
                       <floating *> &Gs[tid, 0] if in_place else &bufs[tid, 1, 0],
                       &bufs[tid, 0, 0], &out[0, 0], &spec, symmetric)
            fk_store_fence()
    return np.asarray(out)


def _dense_columns(X, Y, symmetric):
    """Columns worth a gemm (see the module docstring), most frequent first."""
    cx = np.bincount(X.indices, minlength=X.shape[1])
    cy = cx if symmetric else np.bincount(Y.indices, minlength=Y.shape[1])
    score = (cx / X.shape[0]) * (cy / Y.shape[0])
    cols = np.flatnonzero(score * DENSE_GAIN > 1)
    return cols[np.argsort(-score[cols], kind="stable")][:MAX_DENSE]


def _blocking(X, Y, cols, laplacian):
    """(rows, width) of a work item, from the work per entry of K.

    A work item must stay short (Ctrl-C is seen between batches of items):
    rows * width * (cost of one entry) <= MAX_ITEM_WORK, in scattered
    products (a merge step costs about one, a gemm multiply-add 1 / DENSE_GAIN).
    """
    if laplacian:
        per_entry = X.nnz / X.shape[0] + Y.nnz / Y.shape[0]
    else:
        cx = np.bincount(X.indices, minlength=X.shape[1]).astype(np.float64)
        cy = cx if X is Y else np.bincount(Y.indices, minlength=Y.shape[1])
        cx[cols] = 0
        per_entry = (cx @ cy) / (X.shape[0] * Y.shape[0]) + cols.size / DENSE_GAIN
    width = int(MAX_ITEM_WORK / (ROWS * max(per_entry, 1e-3))) // ROWS * ROWS
    # At least ROWS, so that a symmetric item's diagonal block is whole.
    return ROWS, max(ROWS, min(width, MAX_WIDTH, Y.shape[0]))


def gram(X, Y, out, int kind, const double[::1] params, bint symmetric, int n_threads):
    """Fill out with k(X, Y) for canonical CSR X and Y of out's dtype.

    X and Y are validated by fastkern.pairwise (sorted unique indices, finite
    data); kind and params: the kernel's code and parameter array
    (``fastkern._gram.pack_params``); symmetric means Y is X.  BLAS must be
    held to one thread.
    """
    lap = kind == K_LAPLACIAN
    d = X.shape[1]
    dense_pos = np.full(d, -1, dtype=np.intc)
    if lap:
        C = Y
        Xd = Yd = np.empty((0, 0))
    else:
        cols = _dense_columns(X, Y, symmetric)
        dense_pos[cols] = np.arange(cols.size, dtype=np.intc)
        Xd = np.ascontiguousarray(X[:, cols].toarray(), dtype=np.float64)
        Yd = Xd if symmetric else np.ascontiguousarray(Y[:, cols].toarray(), dtype=np.float64)
        if cols.size == 0:
            Xd = Yd = np.empty((0, 0))
        # Y's columns for the sparse part (scipy's CSR -> CSC transpose is a
        # counting sort: its row indices come out sorted).  O(nnz(Y) + d).
        C = Y.tocsc()
    itype = np.result_type(X.indices, Y.indices, C.indices, X.indptr, Y.indptr, C.indptr)

    def idx(a):
        return a if a.dtype == itype else a.astype(itype)

    if fk_kind_geometry(kind) == FK_SQDIST:
        xn = row_sq_norms(X.data, idx(X.indptr), n_threads)
        yn = xn if symmetric else row_sq_norms(Y.data, idx(Y.indptr), n_threads)
    else:
        xn = yn = np.empty(0)
    pos = np.empty(0, dtype=itype)
    if symmetric and not lap:
        pos = csc_positions(idx(X.indices), idx(X.indptr), idx(C.indptr))
    rows, width = _blocking(X, Y, np.flatnonzero(dense_pos >= 0), lap)
    return _gram(X.data, idx(X.indices), idx(X.indptr), Y.data, idx(Y.indices),
                 idx(Y.indptr), C.data, idx(C.indices), idx(C.indptr), pos, dense_pos, Xd, Yd,
                 xn, yn, out, kind, params, symmetric, rows, width, n_threads)


# Values per nogil scan of max_abs, between checks for Ctrl-C (a few ms).
cdef Py_ssize_t FINITE_CHUNK = 1 << 22


def max_abs(const floating[::1] x):
    """The largest |value| of x (0.0 if empty); inf or NaN if some value is
    not finite (the scan stops at the first such block).

    The Gram functions' one scan of their input, dense or sparse (the
    stored values), for finiteness and for the scale of the data
    (fastkern.pairwise._rescaled); _gram.all_finite, a faster test of
    finiteness alone, serves the other checks.  In chunks of FINITE_CHUNK
    values, Ctrl-C checked between them.
    """
    cdef Py_ssize_t n = x.shape[0], start = 0, stop
    cdef uint64_t bits = 0, part
    cdef uint64_t top = 0x7ff0000000000000ULL if floating is double else 0x7f800000U
    cdef double d
    cdef float f
    cdef uint32_t bits32
    while start < n:
        stop = min(n, start + FINITE_CHUNK)
        with nogil:
            if floating is double:
                part = fk_max_abs_bits_d(&x[start], stop - start)
            else:
                part = fk_max_abs_bits_f(&x[start], stop - start)
        bits = part if part > bits else bits
        start = stop
        if bits >= top:
            break
        if start < n:
            PyErr_CheckSignals()
    if floating is double:
        memcpy(&d, &bits, 8)
        return d
    else:
        bits32 = <uint32_t> bits
        memcpy(&f, &bits32, 4)
        return f
