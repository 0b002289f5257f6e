"""Pairwise loops of the kernels on strings and sets (fastkern.structured).

Every sample is a run of a flat array: sample i of a batch is
``items[offsets[i]:offsets[i + 1]]`` (string code points, or sorted set item
ids with ``weights`` beside them).  Each entry of the Gram is an independent
computation: O(|y|) for the substring kernels (x's suffix automaton, built
once per row of the Gram by the thread that meets the row: src/fk_sam.h),
O(k |x| |y|) time and O(k |y|) memory for subsequences and O(|x| + |y|)
for sets.  The entries (pairs of samples) are numbered row by
row and run in time-bounded batches of consecutive pairs
(fastkern._batches), each batch split into chunks that threads take with a
dynamic schedule: a batch is a few pairs when a pair is long (Subsequence on
strings of thousands of characters: a pair takes tens of milliseconds, a row
of 600 of them took seconds), so Ctrl-C is seen within a batch's time
whatever the row costs.  For a symmetric Gram only
the upper triangle is computed and then mirrored.  An entry's value does not
depend on the thread that computes it, so the Gram is bit-identical for any
thread count.  Inputs are validated by fastkern.structured.
"""
from cython.parallel cimport prange, parallel
from libc.math cimport exp, floor, frexp, ldexp
from libc.stdint cimport int32_t, int64_t, uint64_t

import numpy as np

from fastkern._batches cimport Batches
from fastkern._openmp cimport omp_get_thread_num

cdef extern from "fk_sam.h" nogil:
    ctypedef struct fk_sam:
        int64_t row
    size_t fk_sam_bytes(Py_ssize_t m)
    fk_sam *fk_sam_init(void *buf, Py_ssize_t m)
    fk_sam *fk_sam_at(void *buf)
    void fk_sam_build(fk_sam *s, const int32_t *x, Py_ssize_t p, const double *W,
                      const int64_t *We, int64_t row)
    double fk_sam_match(const fk_sam *s, const int32_t *t, Py_ssize_t q, const double *W)
    double fk_sam_match_scaled(const fk_sam *s, const int32_t *t, Py_ssize_t q,
                               const double *W, const int64_t *We, int64_t shift2)

cdef enum:
    SUBSTRING = 0
    SUBSEQUENCE = 1
    SET_MIN = 2
    SET_RATIO = 3


cdef extern from "fk_spin.h" nogil:
    ctypedef long fk_spin_int
    fk_spin_int fk_spin_claim(fk_spin_int *next, fk_spin_int limit)
    void fk_spin_add(fk_spin_int *word)
    void fk_spin_set(fk_spin_int *word, fk_spin_int value)
    fk_spin_int FK_ATOMIC_LOAD(fk_spin_int *word)
    void FK_PAUSE()

cdef extern from *:
    """
    #if defined(_WIN32) || defined(_WIN64)
    #include <windows.h>
    static void fk_nap(void) { Sleep(1); }
    #else
    #include <time.h>
    static void fk_nap(void) { struct timespec t = {0, 1000000L}; nanosleep(&t, NULL); }
    #endif
    """
    void fk_nap() nogil

# The error indicator it sets is left for _gram to raise once the threads
# have stopped (see _Watch).
cdef extern from "Python.h":
    int _check_signals "PyErr_CheckSignals"()


cdef enum:
    # DP cells (cell updates times levels) the calling thread computes
    # between two looks for a signal: about a millisecond.
    POLL_CELLS = 1 << 20
    # Its pauses for the other threads before it waits in naps (see _gram).
    WAIT_SPINS = 2000


cdef struct _Watch:
    # Set once a signal handler raised (KeyboardInterrupt): every thread
    # drops its work and _gram raises.
    fk_spin_int stop
    # Cells the calling thread computed since it last looked for a signal.
    Py_ssize_t cells


cdef bint _signalled(_Watch *w) noexcept nogil:
    """Whether a signal handler raised; only the calling thread (OpenMP's
    thread 0, Python's thread) asks, taking the GIL for it."""
    with gil:
        if _check_signals() < 0:
            fk_spin_set(&w.stop, 1)
    return FK_ATOMIC_LOAD(&w.stop) != 0


cdef bint _give_up(_Watch *w, bint watcher, Py_ssize_t cells) noexcept nogil:
    """Whether to drop the work (a signal arrived); the watcher looks for one
    every POLL_CELLS cells."""
    if watcher:
        w.cells = w.cells + cells
        if w.cells >= POLL_CELLS:
            w.cells = 0
            return _signalled(w)
    return FK_ATOMIC_LOAD(&w.stop) != 0


cdef void _wait_for(fk_spin_int *done, fk_spin_int target, _Watch *w) noexcept nogil:
    """The calling thread, out of chunks: waits for the other threads' (one
    long pair can take seconds), looking for a signal every millisecond."""
    cdef int spins = 0
    while FK_ATOMIC_LOAD(done) < target and FK_ATOMIC_LOAD(&w.stop) == 0:
        if spins < WAIT_SPINS:
            FK_PAUSE()
            spins = spins + 1
        else:
            fk_nap()
            _signalled(w)


cdef int _raise_pending() except -1:
    """Raises what the signal handler raised in _signalled."""
    return -1


cdef double _subsequence_pair(const int32_t *s, Py_ssize_t p, const int32_t *t,
                              Py_ssize_t q, int n, double lam, double *kp,
                              _Watch *w, bint watcher) noexcept nogil:
    """Lodhi et al.'s gap-weighted subsequence kernel K_n(s, t) by dynamic programming.

    K'_l(s[:i], t[:j]) = lam K'_l(s[:i-1], t[:j]) + K''_l(i, j) with K''_l(i, j)
    = lam K''_l(i, j-1) + [t_j == s_i] lam^2 K'_{l-1}(i-1, j-1), K'_0 = 1,
    and K_n = sum over s_i == t_j of lam^2 K'_{n-1}(s[:i-1], t[:j-1]).  Row i
    of level l needs only row i - 1 of levels l and l - 1, so the rows of
    s run outermost and kp holds one row per level l = 0 .. n - 1 (n x (q +
    1), row stride q + 1; level 0 all ones), each overwritten in place by
    row i, the levels from the top down so that level l - 1 still holds row
    i - 1.
    O(n q) memory instead of O(p q) (two tables of 6.4 GB per thread for
    strings of 20,000 characters), and every value is the same sum in the
    same order as level by level.

    Every term holds the factor lam^2 once per matched character, lam^(2n)
    in all, and lam^(gaps) besides: this returns K_n / lam^(2n) (each match
    weighs 1 instead of lam^2), which the caller multiplies back or, for the
    normalised kernel, drops.  It is at least 1 for k(x, x) (x's contiguous
    n-substrings against themselves) and, for lam <= 1, at most the number
    of index-tuple pairs, where lam^(2n) alone underflows for lam below about
    1e-308^(1/2n).  Returns early (a meaningless value) once _give_up says so.
    """
    cdef Py_ssize_t stride = q + 1, i, j
    cdef double kpp, acc = 0.0
    cdef double *row
    cdef double *lower
    cdef int32_t x
    cdef int l
    if p < n or q < n:
        return 0.0
    for j in range(stride):
        kp[j] = 1.0
    for j in range(stride, n * stride):
        kp[j] = 0.0
    for i in range(1, p + 1):
        x = s[i - 1]
        # The terms of K_n ending at s_i: level n - 1 still holds row i - 1.
        row = kp + (n - 1) * stride
        for j in range(1, q + 1):
            if t[j - 1] == x:
                acc = acc + row[j - 1]
        for l in range(n - 1, 0, -1):
            row = kp + l * stride
            lower = row - stride
            kpp = 0.0
            for j in range(1, q + 1):
                kpp = lam * kpp
                if t[j - 1] == x:
                    kpp = kpp + lower[j - 1]
                row[j] = lam * row[j] + kpp
        if _give_up(w, watcher, n * q):
            return 0.0
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


cdef double _ratio_pair(const int64_t *a, const double *wa, Py_ssize_t na, int ea,
                        const int64_t *b, const double *wb, Py_ssize_t nb,
                        int eb) noexcept nogil:
    """sum_i min(a_i, b_i) / sum_i max(a_i, b_i) (1 for two empty samples), scaled.

    The weights come divided by 2^ea and 2^eb, powers of two that bring each
    sample's largest weight into [1/2, 1), and are brought to the pair's
    common scale 2^max(ea, eb): no sum can overflow (weights of 1e308 made
    inf before) and the smaller sample's weights lose only what is
    negligible next to the larger's (the ratio is scale-free).
    """
    cdef Py_ssize_t i = 0, j = 0
    cdef int e = ea if ea > eb else eb
    cdef double fa = ldexp(1.0, ea - e), fb = ldexp(1.0, eb - e), lo = 0.0, hi = 0.0, x, y
    while i < na and j < nb:
        if a[i] < b[j]:
            hi = hi + wa[i] * fa
            i = i + 1
        elif a[i] > b[j]:
            hi = hi + wb[j] * fb
            j = j + 1
        else:
            x = wa[i] * fa
            y = wb[j] * fb
            if x < y:
                lo = lo + x
                hi = hi + y
            else:
                lo = lo + y
                hi = hi + x
            i = i + 1
            j = j + 1
    while i < na:
        hi = hi + wa[i] * fa
        i = i + 1
    while j < nb:
        hi = hi + wb[j] * fb
        j = j + 1
    return lo / hi if hi > 0.0 else 1.0


cdef void _cells(int kind, Py_ssize_t t0, Py_ssize_t t1, bint symmetric, Py_ssize_t nx,
                 Py_ssize_t ny, const int64_t *rowstart,
                 const int32_t *sx, const int32_t *sy, const int64_t *ix, const int64_t *iy,
                 const double *wx, const double *wy, const int32_t *ex, const int32_t *ey,
                 const int64_t *ox, const int64_t *oy, const double *W,
                 const int64_t *We, const int64_t *bx, const int64_t *by, int n,
                 double lam, double *buf, double *out, _Watch *w,
                 bint watcher) noexcept nogil:
    """Entries t0 .. t1 - 1 of the Gram, numbered row by row (from the diagonal
    when symmetric): rowstart[i] is the number of the first entry of row i.
    Stops early once a signal arrived (w.stop)."""
    cdef Py_ssize_t lo = 0, hi = nx, mid, i, j, t, a0, p, q
    cdef fk_sam *sam
    while hi - lo > 1:  # the row holding t0: rowstart[i] <= t0 < rowstart[i + 1]
        mid = (lo + hi) // 2
        if rowstart[mid] <= t0:
            lo = mid
        else:
            hi = mid
    i = lo
    j = (i if symmetric else 0) + t0 - rowstart[i]
    for t in range(t0, t1):
        if FK_ATOMIC_LOAD(&w.stop):
            return
        if j == ny:
            i = i + 1
            j = i if symmetric else 0
        a0 = ox[i]
        p = ox[i + 1] - a0
        q = oy[j + 1] - oy[j]
        if kind == SUBSTRING:
            sam = fk_sam_at(buf)
            if sam.row != i:
                fk_sam_build(sam, sx + a0, p, W, We, i)
            if We == NULL:
                out[i * ny + j] = fk_sam_match(sam, sy + oy[j], q, W)
            else:
                out[i * ny + j] = fk_sam_match_scaled(sam, sy + oy[j], q, W, We, bx[i] + by[j])
        elif kind == SUBSEQUENCE:
            out[i * ny + j] = _subsequence_pair(sx + a0, p, sy + oy[j], q, n, lam, buf,
                                                w, watcher)
        elif kind == SET_MIN:
            out[i * ny + j] = _min_sum(ix + a0, wx + a0, p, iy + oy[j], wy + oy[j], q)
        else:
            out[i * ny + j] = _ratio_pair(ix + a0, wx + a0, p, ex[i], iy + oy[j], wy + oy[j],
                                          q, ey[j])
        j = j + 1


def _gram(int kind, sx, const int64_t[::1] ox, sy, const int64_t[::1] oy,
          double[:, ::1] out, bint symmetric, int n_threads, wx=None, wy=None,
          const double[::1] W=None, int n=1, double lam=1.0, Py_ssize_t buf_size=0,
          ex=None, ey=None, const double[::1] logW=None, lsx=None, lsy=None):
    """out[i, j] = the kernel of sample i of x and j of y (kind: SUBSTRING with
    the cumulative weights W[L] = w(1) + ... + w(L), W[0] = 0, L up to the
    longest sample of x, or with their logarithms logW and per-sample log
    scales lsx, lsy: then out[i, j] is the kernel times about exp(-(lsx[i] +
    lsy[j]) / 2), exactly 2^(-(bx[i] + by[j]) / 2) with bx = round(lsx /
    log 2), a factor that cancels in the normalisation; SUBSEQUENCE with n
    and lam; SET_MIN or SET_RATIO with weights wx, wy, and for SET_RATIO the
    exponents ex, ey of their scaling)."""
    cdef Py_ssize_t nx = ox.shape[0] - 1, ny = oy.shape[0] - 1, i, j, size, nchunks
    cdef const int32_t[::1] sxv, syv
    cdef const int64_t[::1] ixv, iyv
    cdef const double[::1] wxv, wyv
    cdef const int32_t[::1] exv, eyv
    cdef const int32_t *psx = NULL
    cdef const int32_t *psy = NULL
    cdef const int64_t *pix = NULL
    cdef const int64_t *piy = NULL
    cdef const double *pwx = NULL
    cdef const double *pwy = NULL
    cdef const int32_t *pex = NULL
    cdef const int32_t *pey = NULL
    cdef const double *pW = NULL
    cdef const int64_t *pWe = NULL
    cdef const int64_t *pbx = NULL
    cdef const int64_t *pby = NULL
    cdef double[::1] Wm
    cdef int64_t[::1] We, bxv, byv
    cdef double r
    cdef int k
    cdef Py_ssize_t longest = 0, L
    cdef double *pbuf = NULL
    cdef double[:, ::1] bufs
    cdef double *po = &out[0, 0]
    cdef int threads, tid = 0
    cdef fk_spin_int c = 0
    # Chunks: the next to claim, and those done.
    cdef fk_spin_int chunks[2]
    cdef _Watch watch
    watch.stop = 0
    watch.cells = 0
    if kind == SET_MIN or kind == SET_RATIO:
        ixv, iyv, wxv, wyv = sx, sy, wx, wy
        if ixv.shape[0]:
            pix, pwx = &ixv[0], &wxv[0]
        if iyv.shape[0]:
            piy, pwy = &iyv[0], &wyv[0]
        if kind == SET_RATIO:
            exv, eyv = ex, ey
            pex, pey = &exv[0], &eyv[0]
    else:
        sxv, syv = sx, sy
        if sxv.shape[0]:
            psx = &sxv[0]
        if syv.shape[0]:
            psy = &syv[0]
    if logW is not None:
        # W[L] = Wm[L] 2^We[L], 0.5 <= Wm[L] < 1: exp of logW[L] - e log 2, e
        # log 2 in two parts (fdlibm's) so that its first part is exact.
        Wm, We = np.zeros(logW.shape[0]), np.zeros(logW.shape[0], dtype=np.int64)
        for L in range(logW.shape[0]):
            if logW[L] > -np.inf:
                r = floor(logW[L] / 6.93147180559945286227e-01)
                Wm[L] = exp((logW[L] - r * 6.93147180369123816490e-01)
                            - r * 1.90821492927058770002e-10)
                Wm[L] = frexp(Wm[L], &k)
                We[L] = <int64_t> r + k
        W = Wm
        pWe = &We[0]
        bxv = np.rint(np.asarray(lsx) / np.log(2.0)).astype(np.int64)
        byv = np.rint(np.asarray(lsy) / np.log(2.0)).astype(np.int64)
        pbx, pby = &bxv[0], &byv[0]
    if W is not None:
        pW = &W[0]
        longest = max(np.diff(ox).max(initial=0), 1)
        if W.shape[0] <= longest:
            raise ValueError(f"W has {W.shape[0]} entries; strings of {longest} characters "
                             f"need {longest + 1}")
        buf_size = max(buf_size, <Py_ssize_t> (fk_sam_bytes(longest) // 8 + 1))
    # Entry numbers: row i starts at rowstart[i] (the upper triangle alone
    # when symmetric).
    rowstart_a = np.zeros(nx + 1, dtype=np.int64)
    if symmetric:
        np.cumsum(np.arange(ny, ny - nx, -1, dtype=np.int64), out=rowstart_a[1:])
    else:
        rowstart_a[1:] = np.arange(1, nx + 1, dtype=np.int64) * ny
    cdef const int64_t[::1] rowstart = rowstart_a
    # One workspace per thread (the DP table, or a suffix automaton for x's
    # longest sample), allocated here so that a failure is a MemoryError
    # rather than a crash inside nogil code.
    # No more threads (and workspaces) than pairs.
    n_threads = <int> min(<Py_ssize_t> n_threads, max(rowstart[nx], 1))
    bufs = np.zeros((max(n_threads, 1), max(buf_size, 1)))
    if W is not None:
        for i in range(bufs.shape[0]):
            fk_sam_init(&bufs[i, 0], longest)
    cdef Batches batches = Batches(rowstart[nx], n_threads)
    while batches.next():
        size = batches.stop - batches.start
        threads = <int> min(<Py_ssize_t> batches.threads, size)
        # A few chunks per thread: a pair's cost depends on its samples'
        # lengths, so threads that draw short ones take more chunks.
        nchunks = min(size, 4 * <Py_ssize_t> threads)
        chunks[0] = 0
        chunks[1] = 0
        # The chunks are claimed rather than scheduled by OpenMP: the calling
        # thread, out of chunks, must not wait in OpenMP's barrier, where it
        # could not look for Ctrl-C while another thread spends seconds on a
        # long pair.
        with nogil, parallel(num_threads=threads):
            tid = omp_get_thread_num()
            pbuf = &bufs[tid, 0]
            c = fk_spin_claim(&chunks[0], nchunks)
            while c >= 0:
                _cells(kind, batches.start + size * c // nchunks,
                       batches.start + size * (c + 1) // nchunks, symmetric, nx, ny,
                       &rowstart[0], psx, psy, pix, piy, pwx, pwy, pex, pey, &ox[0], &oy[0],
                       pW, pWe, pbx, pby, n, lam, pbuf, po, &watch, tid == 0)
                fk_spin_add(&chunks[1])
                c = fk_spin_claim(&chunks[0], nchunks)
            if tid == 0:
                _wait_for(&chunks[1], nchunks, &watch)
        if watch.stop:
            _raise_pending()
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
        threads = <int> min(<Py_ssize_t> batches.threads, batches.stop - batches.start)
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
