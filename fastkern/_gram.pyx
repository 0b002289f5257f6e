"""Tiled, OpenMP-parallel Gram matrices.

K is computed tile by tile, each tile built in a thread-local buffer that
stays in cache:

* BLAS path (wide data, and every inner-product kernel): one single-threaded
  gemm writes the tile of inner products into the buffer, then the kernel map
  is applied row by row while the tile is hot.
* Direct path (narrow data, and Laplacian's L1 distance): a fused loop over
  features with Y transposed (features x rows) so the inner loop runs over
  contiguous columns and vectorises, followed by the vectorised exp.
* Dot tiles (the Euclidean kernels on moderately narrow data, ``dot``): the
  BLAS path's rule, but the tile of centred inner products comes from
  fastkern's register tiles (``fk_dot_tile_d``, Y's centred rows
  transposed) instead of a dgemm, whose packing outweighs its short sums.

Every other kernel of the squared Euclidean distance (the FK_SQDIST kinds of
src/fk_maps.h: the Euclidean Laplacian exp(-gamma |x - y|), kernlab's Bessel
kernel, ...) takes the RBF kernel's squared distances, on either path with
its safeguards below, and maps them in the tile (``map_dist``) instead of
exp(-gamma d2).

The finished tile is written to K with streaming stores (src/fk_stream.h).
When Y is X only tiles on and above the diagonal are computed; each is
transposed in the cache and streamed to its mirror position, which makes K
exactly symmetric and the RBF/Laplacian diagonal exactly 1.

Accuracy
--------
An error e in a squared distance D changes exp(-gamma D) by about
gamma e K, so what matters is e relative to 1 / gamma, not to D.

* BLAS RBF (and the dot tiles) forms D = |x|^2 + |y|^2 - 2 x.y, whose
  rounding error is about eps (|x|^2 + |y|^2): with rows near a common
  offset c (|x|^2 ~ |c|^2 much larger than D) that is catastrophic
  cancellation (float32, offset 100,
  gamma 10: errors of 0.9 in K).  D is translation invariant, so both X and
  Y are first centred by their common mean mu (computed in float64 over the
  rows of X and Y together) and the expansion is applied to x - mu, y - mu:
  the error becomes eps64 (|x - mu|^2 + |y - mu|^2), the spread of the data
  instead of its offset.  The centred rows are float64 whatever the input
  (``centred_rows``, O((n + m) d) memory, never n x m) and the tile's gemm is
  a dgemm: a float32 gemm has an error of eps32 |x|^2 even on centred data,
  far more than float32 rounding of K when gamma |x - mu|^2 is not small
  (scikit-learn's float32 euclidean_distances upcasts to float64 for the
  same reason).  For float32 data the map reads the float64 tile, takes the
  exp in float64 and rounds once to float32.  Centring cannot help rows that
  are close to each other but far from the mean (near-duplicates in separate
  clusters): where the expansion gives D < (|x - mu|^2 + |y - mu|^2) / 16,
  the entry is recomputed from direct differences of the input rows in
  float64.  Every other entry then has D's relative error below about
  16 c eps64 (c a small multiple from the gemm's sums), so its K error is
  below 16 c eps64 gamma D K <= 6 c eps64 whatever the data's offset or
  clustering.  Independent rows have D ~ |x - mu|^2 + |y - mu|^2 and are
  never recomputed; only near-duplicate pairs are, at O(d) each.
* The direct path subtracts the raw coordinates, x_k - y_k, which is exact
  or correctly rounded whatever the offset (Sterbenz), so it needs no
  centring (centring would round x - mu to the data's precision and lose
  the difference of two near-duplicate rows far from the mean).  Its error
  is in the sum over features: a sequential sum of d positive terms has a
  relative error up to about d eps.  The features are therefore summed in
  chunks (32 for float64, 16 for float32, in the data's precision) and the
  chunk sums in float64; the squared norms of the centred rows likewise.
* Inner-product kernels (linear, polynomial, sigmoid, exponential) are not
  translation invariant: their gemm runs in the data's precision, as
  scikit-learn's does, and has the same error.

tests/test_accuracy.py holds every kernel and path to the error of
scikit-learn against an exact (long double) reference, over offsets up to
1e4, scales down to 1e-4, d up to 1024 and near-duplicate rows.
"""
from cpython.exc cimport PyErr_CheckSignals
from cython.parallel cimport prange, parallel
from libc.math cimport exp, fabs, log, lgamma, pow, sqrt
from scipy.special.cython_special cimport jv
from libc.string cimport memset
from scipy.linalg.cython_blas cimport dgemm, dsyrk, sgemm

import math
import threading

import numpy as np

from fastkern._stream cimport fk_store_fence, stream_tile

from fastkern._batches cimport Batches
from fastkern._openmp cimport omp_get_thread_num
from fastkern._maps cimport (
    fk_vexp_d, fk_vexp_f, fk_rbf_dot_d, fk_rbf_dot_f, fk_sqdist_row_d,
    fk_sqdist_row_f, fk_l1dist_row_d, fk_l1dist_row_f, fk_dot_tile, fk_dot_level,
    FK_N_KINDS, FK_FEATUREWISE, fk_kind_name, fk_param_name, fk_param_default,
    fk_sqdist_map_d, fk_sqdist_map_f, fk_any_nonfinite_d, fk_any_nonfinite_f,
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


cdef inline void _syrk_upper(const double *A, double *C, int n, int d, int ldc) noexcept nogil:
    """The upper triangle (j >= i) of C[n x n, row-major, leading dim ldc] = A A^T,
    A being n x d row-major; the strict lower triangle is left as it was.

    Row-major upper is column-major lower, and row-major A is column-major
    A^T: syrk's C = A^T A, lower, on A's memory as it is.  Half the
    multiply-adds of the gemm of the whole tile.
    """
    cdef char uplo = b'L'
    cdef char trans = b'T'
    cdef double done = 1.0, dzero = 0.0
    dsyrk(&uplo, &trans, &n, &d, &done, <double *> A, &d, &dzero, C, &ldc)


cdef inline double _sqdist(const floating *x, const floating *y, Py_ssize_t d) noexcept nogil:
    """|x - y|^2 in float64, summed in chunks of 32 as the norms."""
    cdef Py_ssize_t k, k0
    cdef double s = 0.0, c, t
    for k0 in range(0, d, 32):
        c = 0.0
        for k in range(k0, min(k0 + 32, d)):
            t = (<double> x[k]) - y[k]
            c = c + t * t
        s = s + c
    return s


cdef KernelMap make_map(int kind, const double[::1] params, bint direct) except *:
    """The KernelMap of a kind code and its parameter array (``pack_params``),
    both checked here, before any loop reads them without the GIL."""
    if fk_kind_name(kind) == NULL or fk_kind_geometry(kind) == FK_FEATUREWISE:
        raise ValueError(f"kind {kind} is not a kernel code of the tile loops")
    if params is None or params.shape[0] != FK_N_PARAMS:
        raise ValueError(f"params must hold the {FK_N_PARAMS} values of pack_params()")
    cdef KernelMap spec
    spec.kind = kind
    spec.params = &params[0]
    spec.gamma = params[FK_P_GAMMA]
    spec.coef0 = params[FK_P_COEF0]
    spec.degree = params[FK_P_DEGREE]
    # Integer degrees up to 64 use repeated squaring (vectorised); others pow().
    spec.idegree = <long> spec.degree if (
        spec.degree == <long> spec.degree and 1 <= spec.degree <= 64) else 0
    spec.direct = direct
    spec.order = params[FK_P_ORDER]
    spec.lognorm = lgamma(spec.order + 1.0) + spec.order * log(2.0)
    return spec


_SLOTS = {fk_param_name(i).decode(): i for i in range(FK_N_PARAMS)}
_DEFAULTS = np.array([fk_param_default(i) for i in range(FK_N_PARAMS)])
_DEFAULTS.flags.writeable = False


def param_slots():
    """The parameter array's slot names -> their indices (FK_PARAMS of src/fk_maps.h)."""
    return dict(_SLOTS)


def pack_params(numbers):
    """The parameter array the compiled loops read, from {slot name: value}.

    Parameters
    ----------
    numbers : mapping
        Values of some slots of :func:`param_slots` (a registry entry's
        ``compiled_args``); the others get their default of FK_PARAMS.

    Returns
    -------
    ndarray of shape (FK_N_PARAMS,), float64
    """
    params = _DEFAULTS.copy()
    for name, value in numbers.items():
        slot = _SLOTS.get(name)
        if slot is None:
            raise ValueError(f"no parameter slot {name!r} in FK_PARAMS {list(_SLOTS)}")
        params[slot] = value
    return params


def kind_codes():
    """The compiled kernels' names (``_registry``'s ``compiled``) -> their kind codes.

    Read from the one table of src/fk_maps.h (FK_KINDS).
    """
    return {fk_kind_name(k).decode(): k for k in range(FK_N_KINDS)}


def kind_geometry(int kind):
    """"inner", "sqdist", "l1" or "featurewise": what the loops compute before a kind's map."""
    return {FK_INNER: "inner", FK_SQDIST: "sqdist", FK_L1: "l1",
            FK_FEATUREWISE: "featurewise"}[fk_kind_geometry(kind)]


cdef inline double _bessel(double r, const KernelMap *spec) noexcept nogil:
    """Gamma(nu + 1) (2 / r)^nu J_nu(r), which is 1 at r = 0 (kernlab's besseldot
    divided by its limit), to the power degree.

    Up to r^2 / 4 = nu + 1 the power series in -r^2 / 4: its terms then fall
    at least as fast as those of e^1 and the sum is positive (J_nu's first zero
    lies beyond 2 sqrt(nu + 1)), so it is accurate to a few ulp and exact at
    r = 0, where J_nu(r) r^-nu is 0 * inf.  kernlab instead returns the limit
    itself for r < 1e-4 (a relative error up to 2.5e-9 / (nu + 1)).  Beyond,
    J_nu(r) times the factor in logarithms (for nu <= 100 neither underflows
    nor overflows there).
    """
    cdef double nu = spec.order, q, term, s
    cdef int k
    if r * r <= 4.0 * (nu + 1.0):
        q = -0.25 * r * r
        term = 1.0
        s = 1.0
        for k in range(1, 200):
            term = term * q / (k * (nu + k))
            s = s + term
            if fabs(term) < 1e-18:
                break
    else:
        s = jv(nu, r) * exp(spec.lognorm - nu * log(r))
    if spec.degree != 1.0:
        s = pow(s, spec.degree)
    return s


cdef void map_dist(double *g, Py_ssize_t n, const KernelMap *spec) noexcept nogil:
    """Squared Euclidean distances -> kernel values in place (the FK_SQDIST kernels
    but RBF, whose map is fused with the distances): Bessel here, the others by
    their case of fk_sqdist_map."""
    cdef Py_ssize_t j
    if spec.kind != K_BESSEL:
        fk_sqdist_map_d(g, n, spec.kind, spec.params)
        return
    for j in range(n):
        g[j] = _bessel(spec.gamma * sqrt(g[j]), spec)


cdef inline void _map_dist_f(float *g, Py_ssize_t n, const KernelMap *spec) noexcept nogil:
    """map_dist for the float32 distances of the direct path."""
    cdef Py_ssize_t j
    if spec.kind != K_BESSEL:
        fk_sqdist_map_f(g, n, spec.kind, spec.params)
        return
    for j in range(n):
        g[j] = <float> _bessel(spec.gamma * sqrt(g[j]), spec)


# The dot tiles' AVX-512 body where the CPU has it (fk_maps.h); set once, here.
cdef int DOT_WIDE = fk_dot_level()
# Rows per strip of a diagonal tile's register-tile products: a multiple of
# the 4-row and 16-column blocks; 32 computes 56% of a 256 x 256 tile.
cdef enum:
    DOT_STRIP = 32


cdef inline bint _centred_dot(const double *Xc, const double *Yc, const double *Yct,
                              Py_ssize_t ldyt, double *G, Py_ssize_t bi, Py_ssize_t bj,
                              Py_ssize_t d, Py_ssize_t ldo, bint diag) noexcept nogil:
    """G = Xc Yc^T for a tile: fastkern's register tiles when Yct (Yc
    transposed) is given, else one dgemm, or for a diagonal tile (diag: the
    same rows) one syrk of its upper triangle, or register tiles over strips
    of DOT_STRIP rows, each from the 16-column block holding its diagonal
    on.  Returns whether only the upper triangle (j >= i, and some entries
    below it) was computed."""
    cdef Py_ssize_t r0 = 0, c0, rows
    if Yct != NULL:
        if not (diag and bi == bj):
            fk_dot_tile(Xc, d, Yct, ldyt, bi, bj, G, ldo, DOT_WIDE)
            return False
        # An entry past a strip's last whole 16-column block is summed by the
        # edge code, which may round its last bit otherwise, as at any tile
        # edge; the strips are fixed, so no thread count changes a value.
        while r0 < bi:
            rows = bi - r0 if bi - r0 < DOT_STRIP else DOT_STRIP
            c0 = r0 // 16 * 16
            fk_dot_tile(Xc + r0 * d, d, Yct + c0, ldyt, rows, bj - c0, G + r0 * ldo + c0, ldo,
                        DOT_WIDE)
            r0 += DOT_STRIP
        return True
    if diag and bi == bj:
        _syrk_upper(Xc, G, <int> bi, <int> d, <int> ldo)
        return True
    _gemm_nt(Xc, Yc, G, <int> bi, <int> bj, <int> d, <int> ldo)
    return False


cdef void gram_tile(const floating *X, const floating *Y, const floating *Yt,
                    Py_ssize_t ldyt, Py_ssize_t d,
                    const double *Xc, const double *Yc, const double *Yct,
                    const double *xn, const double *yn,
                    floating *out, Py_ssize_t ldo, double *dtile,
                    Py_ssize_t bi, Py_ssize_t bj,
                    const KernelMap *spec, bint diag) noexcept nogil:
    """Fill out[0:bi, 0:bj] (leading dimension ldo) with k(X[0:bi], Y[0:bj]).

    X and Y point at the first row of each block (row-major, d columns); Yt at
    column 0 of the block in Y transposed (leading dimension ldyt), used by the
    direct path.  BLAS RBF uses instead Xc/Yc, the same blocks centred in
    float64 (see ``centred_rows``), and xn/yn, their squared norms; for float32
    data its inner products go to dtile (bi x bj doubles, leading dimension
    ldo).  With Yct, column 0 of the block in the centred rows transposed
    (leading dimension ldyt), those inner products come from fastkern's
    register tiles (``fk_dot_tile_d``) instead of a dgemm.  Other paths take
    NULL for Xc, Yc, Yct, xn, yn and dtile.  diag says the two blocks are the
    same rows: then the RBF diagonal is set to exactly 1, and the direct path
    and the BLAS RBF and squared-distance kinds (a syrk) compute only j >= i:
    the caller mirrors the rest (``mirror_block``).
    """
    cdef Py_ssize_t i, j, j0
    cdef int flagged
    cdef bint upper
    cdef floating *row
    cdef double *G
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
                    if spec.kind == K_RBF:
                        fk_vexp_d(row, bj - j0, scale)
                    else:
                        map_dist(row, bj - j0, spec)
                else:
                    fk_sqdist_row_f(X + i * d, Yt + j0, ldyt, d, bj - j0, row)
                    if spec.kind == K_RBF:
                        fk_vexp_f(row, bj - j0, <float> scale)
                    else:
                        _map_dist_f(row, bj - j0, spec)
        return
    if spec.kind == K_RBF:
        # float64 gemm of the centred rows whatever the data's precision.
        if floating is double:
            G = out
        else:
            G = dtile
        # A diagonal tile's lower triangle is the caller's mirror of its
        # upper one: with syrk only the upper is computed and mapped.
        upper = _centred_dot(Xc, Yc, Yct, ldyt, G, bi, bj, d, ldo, diag)
        for i in range(bi):
            j0 = i if upper else 0
            row = out + i * ldo
            if floating is double:
                flagged = fk_rbf_dot_d(G + i * ldo + j0, row + j0, yn + j0, xn[i], spec.gamma,
                                       bj - j0)
            else:
                flagged = fk_rbf_dot_f(G + i * ldo + j0, row + j0, yn + j0, xn[i], spec.gamma,
                                       bj - j0)
            if not flagged:
                continue
            # Entries the map flagged (-1) as cancelled: direct differences.
            for j in range(j0, bj):
                if row[j] < 0:
                    row[j] = <floating> exp(-spec.gamma * _sqdist(X + i * d, Y + j * d, d))
        if diag:
            # The distance of a point to itself is 0, but the rounded
            # |x|^2 - 2 x.x + |x|^2 need not be exactly 0.
            for i in range(bi):
                out[i * ldo + i] = 1
        return
    if fk_kind_geometry(spec.kind) == FK_SQDIST:
        # The RBF path's squared distances (same centring and recomputation),
        # then the kernel's map of the squared distance, in float64.
        if floating is double:
            G = out
        else:
            G = dtile
        upper = _centred_dot(Xc, Yc, Yct, ldyt, G, bi, bj, d, ldo, diag)
        for i in range(bi):
            j0 = i if upper else 0
            sqdist_from_dot(G + i * ldo + j0, yn + j0, xn[i], bj - j0)
            for j in range(j0, bj):
                if G[i * ldo + j] < 0:
                    G[i * ldo + j] = _sqdist(X + i * d, Y + j * d, d)
            if diag:
                G[i * ldo + i] = 0.0
            map_dist(G + i * ldo + j0, bj - j0, spec)
            if floating is float:
                row = out + i * ldo
                for j in range(j0, bj):
                    row[j] = <float> G[i * ldo + j]
        return
    _gemm_nt(X, Y, out, <int> bi, <int> bj, <int> d, <int> ldo)
    for i in range(bi):
        map_dot(out + i * ldo, bj, spec)


# Per-thread tile buffers kept between calls, up to this many bytes each.
# Allocated afresh per call (1-2 MB), glibc gave them back to the kernel with
# the Gram's own pages and every call faulted them in again: a 500 x 500 RBF
# Gram (d = 64) took 1.6-2.3 ms on 2 threads against 0.9 ms with the buffers
# kept (or with MALLOC_TRIM_THRESHOLD_ raised).
SCRATCH_KEEP = 1 << 23
_scratch = threading.local()


def scratch(name, shape, dtype):
    """np.empty(shape, dtype) from a buffer kept for the calling Python thread
    under `name` (one live array per name), when it is at most SCRATCH_KEEP
    bytes; larger ones are new each call."""
    dtype = np.dtype(dtype)
    kept = _scratch.__dict__.get(name)
    # The last request's view again: most callers ask for the same shape each
    # call, and the four views below cost more than a small Gram's tile.
    if kept is not None and kept[1].shape == shape and kept[1].dtype == dtype:
        return kept[1]
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > SCRATCH_KEEP:
        return np.empty(shape, dtype=dtype)
    buf = None if kept is None else kept[0]
    if buf is None or buf.nbytes < nbytes:
        buf = np.empty(max(nbytes, 64) // 8 + 1, dtype=np.float64)
    view = buf.view(np.uint8)[:nbytes].view(dtype).reshape(shape)
    _scratch.__dict__[name] = (buf, view)
    return view


# Values per nogil scan of all_finite, between checks for Ctrl-C (a few ms).
cdef Py_ssize_t FINITE_CHUNK = 1 << 22


def all_finite(const floating[::1] x):
    """Whether every value of x is finite: no NaN, no infinity.

    In chunks of FINITE_CHUNK values, Ctrl-C checked between them.
    """
    cdef Py_ssize_t n = x.shape[0], start = 0, stop
    cdef int bad = 0
    while start < n:
        stop = min(n, start + FINITE_CHUNK)
        with nogil:
            if floating is double:
                bad = fk_any_nonfinite_d(&x[start], stop - start)
            else:
                bad = fk_any_nonfinite_f(&x[start], stop - start)
        if bad:
            return False
        start = stop
        if start < n:
            PyErr_CheckSignals()
    return True


def first_touch(floating[:, ::1] out, int n_threads):
    """Fault a new Gram matrix's pages in, in parallel, before the tiles write them.

    The kernel zeroes each page at its first write.  The first symmetric tile
    row mirrors into every row of K, so left to the tiles nearly all of that
    zeroing falls on the thread holding it while the other waits on the same
    pages (2 threads, N = 8000: sparse cosine 0.31 s against 0.21 s into a
    reused out=, dense RBF 0.20 s against 0.17 s).  In batches of rows, so
    Ctrl-C is seen: a huge page can wait on the kernel's memory compaction
    (seen: 3.5 s for 512 MB on a busy machine).
    """
    cdef Py_ssize_t n = out.shape[0], m = out.shape[1], i, j
    # One write per 4 KB page (the kernel faults 4 KB or a 2 MB huge page).
    cdef Py_ssize_t step = 4096 // sizeof(floating)
    if m == 0:
        return
    cdef int nt
    cdef Batches batches = Batches(n, n_threads)
    while batches.next():
        nt = batches.threads
        with nogil:
            for i in prange(batches.start, batches.stop, num_threads=nt,
                            schedule='static'):
                j = 0
                while j < m:
                    out[i, j] = 0
                    j = j + step


def centred_rows(X, const double[::1] mean, int n_threads):
    """(X - mean in float64, its squared row norms): what the BLAS RBF path needs.

    Row blocks in time-bounded batches (fastkern._batches): at n x d of
    hundreds of MB this O(n d) pass alone would hold off Ctrl-C for seconds.
    """
    X = np.ascontiguousarray(X)
    if X.dtype == np.float32:
        return _centred_rows[float](X, mean, n_threads)
    return _centred_rows[double](np.asarray(X, dtype=np.float64), mean, n_threads)


cdef _centred_rows(const floating[:, ::1] X, const double[::1] mean, int n_threads):
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1]
    if mean.shape[0] != d:
        raise ValueError(f"mean must hold {d} values, got {mean.shape[0]}")
    Xc = np.empty((n, d), dtype=np.float64)
    xn = np.zeros(n)
    if n == 0 or d == 0:
        return Xc, xn
    cdef double[:, ::1] xc = Xc
    cdef double[::1] xnv = xn
    cdef Batches batches = Batches(n, n_threads)
    while batches.next():
        with nogil:
            _centre_rows(&X[0, 0], d, &mean[0], &xc[0, 0], &xnv[0], batches.start,
                         batches.stop, batches.threads)
    return Xc, xn


cdef void _centre_rows(const floating *X, Py_ssize_t d, const double *mean, double *xc,
                       double *xn, Py_ssize_t i0, Py_ssize_t i1, int n_threads) noexcept nogil:
    """xc[i] = X[i] - mean in float64 and xn[i] = |xc[i]|^2, for rows i0..i1-1."""
    cdef Py_ssize_t i
    if n_threads == 1:
        # No parallel region for one thread: most calls are a few rows.
        for i in range(i0, i1):
            _centre_row(X + i * d, d, mean, xc + i * d, xn + i)
        return
    for i in prange(i0, i1, num_threads=n_threads, schedule='static'):
        _centre_row(X + i * d, d, mean, xc + i * d, xn + i)


cdef inline void _centre_row(const floating *x, Py_ssize_t d, const double *mean, double *xc,
                             double *xn) noexcept nogil:
    cdef Py_ssize_t k, k0
    cdef double s = 0.0, c
    for k in range(d):
        xc[k] = <double> x[k] - mean[k]
    # Chunks of 32 bound the rounding error of the sum as in the direct
    # path's distances (a sequential sum's error grows with d).
    for k0 in range(0, d, 32):
        c = 0.0
        for k in range(k0, min(k0 + 32, d)):
            c = c + xc[k] * xc[k]
        s = s + c
    xn[0] = s


def common_mean(X, Y=None):
    """The mean of the rows of X and Y together, in float64.

    Summed in chunks of a fixed number of rows (about 4M values), each chunk
    column by column in row order and then added to the total, so the result
    depends only on the data, not on its memory layout (the sums of numpy's
    ``A[chunk].sum(axis=0, dtype=np.float64)`` on C-ordered A, bit for bit),
    and Ctrl-C is checked between chunks.
    """
    d = np.shape(X)[1]
    cdef double[::1] total = np.zeros(d)
    cdef double[::1] chunk = np.empty(d)
    count = 0
    for A in (X,) if Y is None else (X, Y):
        A = np.ascontiguousarray(A)
        if A.ndim != 2 or A.shape[1] != d:
            raise ValueError(f"X and Y must be 2-D with the same columns, got {np.shape(X)} "
                             f"and {A.shape}")
        if A.dtype == np.float32:
            _add_column_sums[float](A, chunk, total)
        else:
            _add_column_sums[double](np.asarray(A, dtype=np.float64), chunk, total)
        count += A.shape[0]
    return np.asarray(total) / count


cdef double[::1] _common_mean(const floating[:, ::1] X, const floating[:, ::1] Y, bint only_x):
    """common_mean of X (only_x) or of X and Y, for inputs already checked."""
    cdef Py_ssize_t d = X.shape[1], k
    cdef double[::1] total = np.zeros(d)
    cdef double[::1] chunk = np.empty(d)
    cdef double count = X.shape[0] + (0 if only_x else Y.shape[0])
    _add_column_sums(X, chunk, total)
    if not only_x:
        _add_column_sums(Y, chunk, total)
    if count > 0:
        for k in range(d):
            total[k] = total[k] / count
    return total


cdef int _add_column_sums(const floating[:, ::1] A, double[::1] chunk,
                          double[::1] total) except -1:
    cdef Py_ssize_t n = A.shape[0], d = A.shape[1], i, k, start, stop
    cdef Py_ssize_t rows = max(1, (1 << 22) // max(1, d))
    if n == 0 or d == 0:
        return 0
    for start in range(0, n, rows):
        PyErr_CheckSignals()
        stop = min(n, start + rows)
        with nogil:
            for k in range(d):
                chunk[k] = A[start, k]
            for i in range(start + 1, stop):
                for k in range(d):
                    chunk[k] = chunk[k] + A[i, k]
            for k in range(d):
                total[k] = total[k] + chunk[k]
    return 0


cdef void mirror_block(floating *K, Py_ssize_t ld, Py_ssize_t i0, Py_ssize_t i1,
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
    cdef int nt
    cdef Batches batches = Batches(nb, n_threads)
    while batches.next():
        nt = batches.threads
        with nogil:
            for b in prange(batches.start, batches.stop, num_threads=nt,
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


cdef void _stream_packed(const floating *tbuf, Py_ssize_t bj, floating *packed,
                         const Py_ssize_t *row_start, Py_ssize_t strip, Py_ssize_t i0,
                         Py_ssize_t j0, Py_ssize_t bi, Py_ssize_t n, floating *scratch,
                         bint diag, bint cached) noexcept nogil:
    """Stream the tile K[i0:i0+bi, j0:j0+bj] (in tbuf, leading dimension bj)
    into the packed upper triangle (``_centering.packed_layout``), one strip's
    rows at a time: within a strip, rows have one leading dimension.  A strip
    keeps its rows from its first row's column on: the diagonal tile's
    columns before it are not stored."""
    cdef Py_ssize_t a = i0, b, s0, c0
    while a < i0 + bi:
        s0 = a - a % strip
        b = min(s0 + strip, i0 + bi)
        c0 = max(j0, s0) if diag else j0
        if c0 < j0 + bj:
            stream_tile(tbuf + (a - i0) * bj + (c0 - j0), bj, packed + row_start[a] + c0,
                        n - s0, b - a, j0 + bj - c0, scratch, False, cached)
        a = b


def gram(const floating[:, ::1] X, const floating[:, ::1] Y, floating[:, ::1] out,
         int kind, const double[::1] params, bint symmetric,
         bint direct, int n_threads, bint dot=False,
         floating[::1] packed=None, const Py_ssize_t[::1] row_start=None,
         Py_ssize_t strip=0, progress=None, bint cached=False):
    """Fill out with k(X, Y).  Inputs are validated by fastkern.pairwise.

    kind and params: the kernel's code and parameter array (``kind_codes``,
    ``pack_params``); symmetric means Y is X; direct selects the fused
    distance loop; dot, on the BLAS path of the Euclidean kernels, computes
    the centred inner products with fastkern's register tiles instead of
    dgemm.  With packed (and symmetric),
    the tiles on and above the diagonal go to packed instead of out, which
    is not touched, laid out by ``_centering.packed_layout(n)`` (row_start,
    strips of strip rows).  progress, if given, is called with the
    fraction of the tiles done after each batch.  cached writes the tiles
    with ordinary stores instead of streaming them past the cache
    (``fastkern.pairwise.read_back``).
    """
    cdef Py_ssize_t n = X.shape[0], m = Y.shape[0], d = X.shape[1]
    # float32 direct tiles are twice as wide: the same bytes in the buffer, and
    # half as many tiles (measured: float32 1.6x -> 1.9x faster than float64).
    cdef Py_ssize_t tile = (DTILE * (2 if floating is float else 1)) if direct or dot else BTILE
    cdef Py_ssize_t min_tile = MIN_DIRECT_TILE if direct else MIN_BLAS_TILE
    while tile > min_tile and tile * tile * d > MAX_TILE_WORK:
        tile //= 2
    cdef Py_ssize_t nbi = (n + tile - 1) // tile, nbj = (m + tile - 1) // tile
    cdef Py_ssize_t ntiles, t, I, J, i0, j0, bi, bj
    cdef int tid
    cdef floating *tbuf
    cdef floating *tscr
    cdef KernelMap spec = make_map(kind, params, direct)

    dtype = np.float64 if floating is double else np.float32
    cdef const floating[:, ::1] Yt = transposed(Y, n_threads) if direct else Y
    # The BLAS path of every function of the Euclidean distance needs the centred rows.
    cdef bint rbf_blas = not direct and fk_kind_geometry(kind) == FK_SQDIST
    cdef const double[:, ::1] Xc = None
    cdef const double[:, ::1] Yc = None
    cdef const double[::1] xn = None
    cdef const double[::1] yn = None
    cdef const double *Xc_p = NULL
    cdef const double *Yc_p = NULL
    cdef const double *xn_p = NULL
    cdef const double *yn_p = NULL
    if rbf_blas:
        mean = _common_mean(X, Y, symmetric)
        Xc, xn = _centred_rows(X, mean, n_threads)
        if symmetric:
            Yc, yn = Xc, xn
        else:
            Yc, yn = _centred_rows(Y, mean, n_threads)
        Xc_p, Yc_p, xn_p, yn_p = &Xc[0, 0], &Yc[0, 0], &xn[0], &yn[0]
    cdef const double[:, ::1] Yct = None
    cdef const double *Yct_p = NULL
    if rbf_blas and dot:
        Yct = transposed(Yc, n_threads)
        Yct_p = &Yct[0, 0]

    # Tile list, row by row: the upper triangle of tiles when symmetric, all
    # tiles otherwise.  Filled here: numpy's triu_indices took 9 us, a tenth
    # of a 200-row Gram.
    ntiles = nbi * (nbi + 1) // 2 if symmetric else nbi * nbj
    cdef Py_ssize_t[::1] ti = np.empty(ntiles, dtype=np.intp)
    cdef Py_ssize_t[::1] tj = np.empty(ntiles, dtype=np.intp)
    t = 0
    for I in range(nbi):
        for J in range(I if symmetric else 0, nbj):
            ti[t] = I
            tj[t] = J
            t += 1
    # No more threads (and per-thread buffers) than work items.
    n_threads = <int> min(<Py_ssize_t> n_threads, max(ntiles, 1))
    cdef const floating *Xp = &X[0, 0]
    cdef const floating *Yp = &Y[0, 0]
    cdef const floating *Ytp = &Yt[0, 0]
    cdef floating *Op = NULL
    cdef floating *Pp = NULL
    cdef const Py_ssize_t *rs_p = NULL
    if packed is not None:
        if not symmetric or strip < 1 or row_start is None or row_start.shape[0] != n:
            raise ValueError("packed needs symmetric, a strip height and n row starts")
        if n and packed.shape[0] != row_start[n - 1] + n:
            raise ValueError("packed must hold row_start[n - 1] + n values")
        if n:
            Pp, rs_p = &packed[0], &row_start[0]
    elif out.shape[0] and out.shape[1]:
        Op = &out[0, 0]
    cdef floating[:, :, ::1] bufs = scratch("gram tiles", (n_threads, 2, tile * tile), dtype)
    # float32 BLAS RBF: the float64 gemm's tile, converted into bufs by the map.
    cdef bint wide_tile = rbf_blas and floating is float
    cdef double[:, ::1] dbufs = (scratch("gram wide tiles", (n_threads, tile * tile), np.float64)
                                 if wide_tile else None)
    cdef double *dbuf

    # Tiles run in time-bounded batches, each one parallel region, so Ctrl-C
    # is seen between them (fastkern._batches).
    cdef int nt
    cdef Batches batches = Batches(ntiles, n_threads)
    while batches.next():
        if progress is not None and batches.start:
            progress(<double> batches.start / ntiles)
        nt = batches.threads
        with nogil, parallel(num_threads=nt):
            tid = omp_get_thread_num()
            tbuf = &bufs[tid, 0, 0]
            tscr = &bufs[tid, 1, 0]
            dbuf = &dbufs[tid, 0] if wide_tile else NULL
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
                          Xc_p + i0 * d if rbf_blas else NULL,
                          Yc_p + j0 * d if rbf_blas else NULL,
                          Yct_p + j0 if Yct_p != NULL else NULL,
                          xn_p + i0 if rbf_blas else NULL,
                          yn_p + j0 if rbf_blas else NULL,
                          tbuf, bj, dbuf, bi, bj, &spec, symmetric and I == J)
                if symmetric and I == J:
                    mirror_block(tbuf, bj, 0, bi, 0, bj, True)
                if Pp != NULL:
                    _stream_packed(tbuf, bj, Pp, rs_p, strip, i0, j0, bi, n, tscr, I == J,
                                   cached)
                else:
                    stream_tile(tbuf, bj, Op + i0 * m + j0, m, bi, bj, tscr, False, cached)
                    if symmetric and I != J:
                        stream_tile(tbuf, bj, Op + j0 * m + i0, m, bi, bj, tscr, True, cached)
            fk_store_fence()
    return np.asarray(out) if packed is None else np.asarray(packed)


# ---------------------------------------------------------------- every pair's distance


cdef void _upper_sq_dists(const double *X, Py_ssize_t n, Py_ssize_t d, double *out,
                          Py_ssize_t i0, Py_ssize_t i1, int n_threads) noexcept nogil:
    cdef Py_ssize_t i, j, base
    for i in prange(i0, i1, num_threads=n_threads, schedule='dynamic'):
        # Row i's pairs (i, j > i) start at i n - i (i + 1) / 2 in pdist's order.
        base = i * n - (i * (i + 1)) // 2 - i - 1
        for j in range(i + 1, n):
            out[base + j] = _sqdist(X + i * d, X + j * d, d)


def upper_sq_dists(const double[:, ::1] X, double[::1] out, int n_threads):
    """||X[i] - X[j]||^2 for every pair i < j into out, in scipy's pdist order
    (row 0's pairs, then row 1's, ...), from the direct differences of the
    coordinates, the squares summed in chunks of 32 features.  Rows run in
    time-bounded batches (Ctrl-C between them)."""
    cdef Py_ssize_t n = X.shape[0], d = X.shape[1]
    if out.shape[0] != n * (n - 1) // 2:
        raise ValueError(f"out must hold the {n * (n - 1) // 2} pairs of {n} rows, got "
                         f"{out.shape[0]}")
    if n_threads < 1:
        raise ValueError(f"n_threads must be at least 1, got {n_threads}")
    if n < 2:
        return
    if d == 0:
        out[:] = 0.0
        return
    cdef Batches batches = Batches(n - 1, n_threads)
    while batches.next():
        with nogil:
            _upper_sq_dists(&X[0, 0], n, d, &out[0], batches.start, batches.stop,
                            batches.threads)
