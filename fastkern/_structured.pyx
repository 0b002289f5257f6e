"""Pairwise loops of the kernels on strings and sets (fastkern.structured).

Every sample is a run of a flat array: sample i of a batch is
``items[offsets[i]:offsets[i + 1]]`` (string code points, or sorted set item
ids with ``weights`` beside them).  Each entry of the Gram is an independent
O(|x| |y|) (or O(k |x| |y|), or O(|x| + |y|)) computation, so rows are shared
between threads with a dynamic schedule, in time-bounded batches
(fastkern._batches) so that Ctrl-C is seen.  For a symmetric Gram only the
upper triangle is computed and then mirrored.  An entry's value does not
depend on the thread that computes it, so the Gram is bit-identical for any
thread count.  Inputs are validated by fastkern.structured.
"""
from cython.parallel cimport prange, parallel
from libc.stdint cimport int32_t, int64_t, uint64_t

import numpy as np

from fastkern._batches cimport Batches
from fastkern._openmp cimport omp_get_thread_num

cdef enum:
    SUBSTRING = 0
    SUBSEQUENCE = 1
    SET_MIN = 2


cdef double _substring_pair(const int32_t *a, Py_ssize_t p, const int32_t *b,
                            Py_ssize_t q, const double *cw) noexcept nogil:
    """sum over position pairs (i, j) of W(lcp(a[i:], b[j:])), W cumulative.

    Along each diagonal the common prefixes form runs: a run of r matching
    characters holds positions whose lcp is r, r - 1, ..., 1, and cw[r] is
    W(1) + ... + W(r).
    """
    cdef double acc = 0.0
    cdef Py_ssize_t d, i, j, run
    for d in range(-(p - 1), q):
        i = -d if d < 0 else 0
        j = i + d
        run = 0
        while i < p and j < q:
            if a[i] == b[j]:
                run = run + 1
            elif run:
                acc = acc + cw[run]
                run = 0
            i = i + 1
            j = j + 1
        if run:
            acc = acc + cw[run]
    return acc


cdef double _subsequence_pair(const int32_t *s, Py_ssize_t p, const int32_t *t,
                              Py_ssize_t q, int n, double lam,
                              double *prev, double *cur) noexcept nogil:
    """Lodhi et al.'s gap-weighted subsequence kernel K_n(s, t) by dynamic programming.

    prev/cur hold K'_{l-1} and K'_l on all prefix pairs, (p + 1) x (q + 1),
    row stride q + 1: K'_l(s[:i], t[:j]) = lam K'_l(s[:i-1], t[:j]) + K''_l(i, j)
    with K''_l(i, j) = lam K''_l(i, j-1) + [t_j == s_i] lam^2 K'_{l-1}(i-1, j-1),
    and K_n = sum over s_i == t_j of lam^2 K'_{n-1}(s[:i-1], t[:j-1]).
    """
    cdef Py_ssize_t stride = q + 1, i, j, idx
    cdef double lam2 = lam * lam, kpp, acc = 0.0
    cdef double *tmp
    cdef int32_t x
    cdef int l
    if p < n or q < n:
        return 0.0
    for idx in range((p + 1) * stride):
        prev[idx] = 1.0
    for l in range(1, n):
        for j in range(stride):
            cur[j] = 0.0
        for i in range(1, p + 1):
            cur[i * stride] = 0.0
            kpp = 0.0
            x = s[i - 1]
            for j in range(1, q + 1):
                kpp = lam * kpp
                if t[j - 1] == x:
                    kpp = kpp + lam2 * prev[(i - 1) * stride + j - 1]
                cur[i * stride + j] = lam * cur[(i - 1) * stride + j] + kpp
        tmp = prev
        prev = cur
        cur = tmp
    for i in range(1, p + 1):
        x = s[i - 1]
        for j in range(1, q + 1):
            if t[j - 1] == x:
                acc = acc + lam2 * prev[(i - 1) * stride + j - 1]
    return acc


cdef double _min_sum(const int64_t *a, const double *wa, Py_ssize_t na,
                     const int64_t *b, const double *wb, Py_ssize_t nb) noexcept nogil:
    """sum over common ids of min(weight in a, weight in b): a merge of two sorted runs."""
    cdef Py_ssize_t i = 0, j = 0
    cdef double acc = 0.0
    while i < na and j < nb:
        if a[i] < b[j]:
            i = i + 1
        elif a[i] > b[j]:
            j = j + 1
        else:
            acc = acc + (wa[i] if wa[i] < wb[j] else wb[j])
            i = i + 1
            j = j + 1
    return acc


cdef void _row(int kind, Py_ssize_t i, Py_ssize_t j0, Py_ssize_t ny,
               const int32_t *sx, const int32_t *sy, const int64_t *ix, const int64_t *iy,
               const double *wx, const double *wy,
               const int64_t *ox, const int64_t *oy, const double *cw, int n, double lam,
               double *buf, double *orow) noexcept nogil:
    cdef Py_ssize_t j, a0 = ox[i], p = ox[i + 1] - ox[i]
    for j in range(j0, ny):
        if kind == SUBSTRING:
            orow[j] = _substring_pair(sx + a0, p, sy + oy[j], oy[j + 1] - oy[j], cw)
        elif kind == SUBSEQUENCE:
            orow[j] = _subsequence_pair(sx + a0, p, sy + oy[j], oy[j + 1] - oy[j], n, lam,
                                        buf, buf + (p + 1) * (oy[j + 1] - oy[j] + 1))
        else:
            orow[j] = _min_sum(ix + a0, wx + a0, p, iy + oy[j], wy + oy[j],
                               oy[j + 1] - oy[j])


def _gram(int kind, sx, const int64_t[::1] ox, sy, const int64_t[::1] oy,
          double[:, ::1] out, bint symmetric, int n_threads, wx=None, wy=None,
          const double[::1] cw=None, int n=1, double lam=1.0, Py_ssize_t buf_size=0):
    cdef Py_ssize_t nx = ox.shape[0] - 1, ny = oy.shape[0] - 1, i, j
    cdef const int32_t[::1] sxv, syv
    cdef const int64_t[::1] ixv, iyv
    cdef const double[::1] wxv, wyv
    cdef const int32_t *psx = NULL
    cdef const int32_t *psy = NULL
    cdef const int64_t *pix = NULL
    cdef const int64_t *piy = NULL
    cdef const double *pwx = NULL
    cdef const double *pwy = NULL
    cdef const double *pcw = NULL
    cdef double *pbuf = NULL
    cdef double[:, ::1] bufs
    cdef double *po = &out[0, 0]
    cdef int threads, tid
    cdef Batches batches = Batches(nx, n_threads)
    if kind == SET_MIN:
        ixv, iyv, wxv, wyv = sx, sy, wx, wy
        if ixv.shape[0]:
            pix, pwx = &ixv[0], &wxv[0]
        if iyv.shape[0]:
            piy, pwy = &iyv[0], &wyv[0]
    else:
        sxv, syv = sx, sy
        if sxv.shape[0]:
            psx = &sxv[0]
        if syv.shape[0]:
            psy = &syv[0]
    if cw is not None:
        pcw = &cw[0]
    # One DP workspace per thread, allocated here so that a failure is a
    # MemoryError rather than a crash inside nogil code.
    bufs = np.empty((max(n_threads, 1), max(buf_size, 1)))
    while batches.next():
        threads = <int> min(<Py_ssize_t> n_threads, batches.stop - batches.start)
        with nogil, parallel(num_threads=threads):
            tid = omp_get_thread_num()
            pbuf = &bufs[tid, 0]
            # dynamic: a row's cost depends on its sample's length and, for a
            # symmetric Gram, on how much of the row is left of the diagonal.
            for i in prange(batches.start, batches.stop, schedule='dynamic'):
                _row(kind, i, i if symmetric else 0, ny, psx, psy, pix, piy, pwx, pwy,
                     &ox[0], &oy[0], pcw, n, lam, pbuf, po + i * ny)
    if symmetric:
        for i in range(nx):
            for j in range(i):
                out[i, j] = out[j, i]


def kmer_csr(const int64_t[::1] codes, const int64_t[::1] offsets, int k, int64_t card):
    """CSR (indptr, indices, data) of k-mer counts, and the number of distinct k-mers.

    codes[p] is the exact code of the k-mer starting at p of the concatenated
    strings (k-mers crossing the end of a string are skipped here).  Columns
    are numbered in order of first appearance through an open-addressing hash
    table (exact: the keys themselves are stored); within a row they are in
    order of first appearance too.  ``card`` bounds the codes (0 <= code <
    card), so at most min(len(codes), card) columns exist and the tables are
    sized for that.  Serial: O(total length).
    """
    cdef Py_ssize_t n = offsets.shape[0] - 1, r, p, stop, slot, nnz = 0, D = 0
    cdef Py_ssize_t cap = 1
    cdef int64_t key, col
    cdef uint64_t h
    cdef Py_ssize_t most = max(1, min(codes.shape[0], card))
    # Load factor <= 2/3 even if every k-mer is distinct (linear probing).
    while cap < most + most // 2:
        cap *= 2
    keys_a = np.full(cap, -1, dtype=np.int64)
    vals_a = np.empty(cap, dtype=np.int64)
    indptr_a = np.zeros(n + 1, dtype=np.int64)
    indices_a = np.empty(max(codes.shape[0], 1), dtype=np.int64)
    data_a = np.empty(max(codes.shape[0], 1), dtype=np.float64)
    # Per column: the last row that saw it and where its count sits in that row.
    last_a = np.full(most, -1, dtype=np.int64)
    where_a = np.empty(most, dtype=np.int64)
    cdef int64_t[::1] keys = keys_a, vals = vals_a, indptr = indptr_a, indices = indices_a
    cdef int64_t[::1] last = last_a, where = where_a
    cdef double[::1] data = data_a
    cdef uint64_t mask = cap - 1
    with nogil:
        for r in range(n):
            stop = offsets[r + 1] - k + 1
            for p in range(offsets[r], stop):
                key = codes[p]
                h = (<uint64_t> key) * <uint64_t> 0x9E3779B97F4A7C15ULL
                slot = <Py_ssize_t> ((h >> 20) & mask)
                while keys[slot] != -1 and keys[slot] != key:
                    slot = <Py_ssize_t> ((slot + 1) & mask)
                if keys[slot] == -1:
                    keys[slot] = key
                    vals[slot] = D
                    D = D + 1
                col = vals[slot]
                if last[col] == r:
                    data[where[col]] += 1.0
                else:
                    last[col] = r
                    where[col] = nnz
                    indices[nnz] = col
                    data[nnz] = 1.0
                    nnz = nnz + 1
            indptr[r + 1] = nnz
    return indptr_a, indices_a[:nnz].copy(), data_a[:nnz].copy(), D


def count_gram_sparse(const int64_t[::1] xptr, const int64_t[::1] xind, const double[::1] xdat,
                      const int64_t[::1] yptr, const int64_t[::1] yind, const double[::1] ydat,
                      const unsigned char[::1] dense, double[:, ::1] out, int n_threads):
    """out[i, j] += sum over sparse features f of X[i, f] Y[j, f] (Y given by columns).

    X is CSR (rows), Y CSC (a posting list of (row j, value) per feature);
    features marked ``dense`` are left to a gemm.  Row i of out is written
    only by the thread that owns row i.  The cost is sum_f df_X(f) df_Y(f)
    scattered updates, so only rare features belong here.
    """
    cdef Py_ssize_t nx = xptr.shape[0] - 1, ny = out.shape[1], i, a, b, f
    cdef double v
    cdef double *orow
    cdef int threads
    cdef Batches batches = Batches(nx, n_threads)
    while batches.next():
        threads = <int> min(<Py_ssize_t> n_threads, batches.stop - batches.start)
        with nogil:
            for i in prange(batches.start, batches.stop, num_threads=threads,
                            schedule='dynamic'):
                orow = &out[i, 0]
                for a in range(xptr[i], xptr[i + 1]):
                    f = xind[a]
                    if dense[f]:
                        continue
                    v = xdat[a]
                    for b in range(yptr[f], yptr[f + 1]):
                        orow[yind[b]] += v * ydat[b]
