"""The inner loop of fastkern's thick-restart Lanczos solver (``fastkern._eigen.lanczos_eigsh``).

``expand`` takes Lanczos steps j = start, ..., stop - 1 on a symmetric K, of
which it reads the lower triangle: v_{j+1} beta_j = K v_j - V_j h_j with h_j =
V_j^T K v_j, the projection on every basis vector so far (classical
Gram-Schmidt, twice: the basis stays orthonormal to rounding, where the
three-term recurrence alone loses orthogonality as Ritz values converge).
h_j, the column of the projected matrix V^T K V, goes into row j of H with
beta_j after it: after a thick restart, the coupling of the kept Ritz vectors
to the next vector is in h_j too, so H's lower triangle is the projected
matrix whatever the restarts.

With ``centred`` the operator is the double-centred H K H (H = I - 1 1^T / n)
of a symmetric K, never formed: each product is K (v - mean(v)) less the
mean of the result, O(n) beyond the symv, where centring K itself takes two
passes over it (a quarter of a fit at 1000 rows).

The products are scipy's BLAS symv, or where the caller passes ``acc``
(float64), fastkern's own (``fk_symv.h``: K's triangle read once, in row
blocks that threads share without changing the result), from the full
matrix's lower triangle or from the packed upper one (``PackedUpperGram``);
``product`` is the same product alone.  The projections are BLAS's gemv.
The caller holds scipy's BLAS to one thread.  One step is a few
microseconds at a few hundred rows, where a Python-level iteration (scipy's
ARPACK calls back into Python each step) costs more than the product: this
loop never returns to Python between checks.
"""
from cython.parallel cimport parallel, prange
from libc.math cimport sqrt
from libc.string cimport memset
from scipy.linalg.cython_blas cimport dgemv, dnrm2, dscal, dsymv, sgemv, snrm2, sscal, ssymv
from cython cimport floating

from fastkern._openmp cimport omp_get_num_threads, omp_get_thread_num

import numpy as np


cdef extern from "fk_symv.h" nogil:
    void fk_symv_rows(const double *K, Py_ssize_t ldk, Py_ssize_t r0, Py_ssize_t r1,
                      const double *v, double *acc, int fast)
    void fk_symv_upper_rows(const double *data, const Py_ssize_t *row_start, Py_ssize_t n,
                            Py_ssize_t r0, Py_ssize_t r1, const double *v, double *acc,
                            int fast)
    int fk_symv_fast_available()


cdef extern from "fk_spin.h" nogil:
    ctypedef long fk_spin_int
    fk_spin_int fk_spin_wait_change(fk_spin_int *word, fk_spin_int old, fk_spin_int *quit)
    void fk_spin_wait_reach(fk_spin_int *word, fk_spin_int target)
    fk_spin_int fk_spin_claim(fk_spin_int *next, fk_spin_int limit)
    void fk_spin_add(fk_spin_int *word)
    void fk_spin_set(fk_spin_int *word, fk_spin_int value)


cdef enum:
    # Row blocks of the symmetric product, each with its accumulator: fixed,
    # so that the result does not depend on the thread count.
    SYMV_BLOCKS = 4

#: Accumulator rows ``expand`` needs for K's symmetric product in float64.
PRODUCT_BLOCKS = SYMV_BLOCKS
cdef int _FAST = fk_symv_fast_available()


cdef floating _nrm2(int n, floating* x) noexcept nogil:
    cdef int one = 1
    if floating is double:
        return dnrm2(&n, x, &one)
    else:
        return snrm2(&n, x, &one)


cdef void _project_out(int n, int j, floating* V, floating* w, floating* h) noexcept nogil:
    """h = V_j^T w, then w -= V_j h (V_j: the first j rows of V, each a basis vector)."""
    cdef int one = 1
    cdef floating alpha = 1, zero = 0, minus = -1
    cdef char trans = b"T", notrans = b"N"
    if floating is double:
        dgemv(&trans, &n, &j, &alpha, V, &n, w, &one, &zero, h, &one)
        dgemv(&notrans, &n, &j, &minus, V, &n, h, &one, &alpha, w, &one)
    else:
        sgemv(&trans, &n, &j, &alpha, V, &n, w, &one, &zero, h, &one)
        sgemv(&notrans, &n, &j, &minus, V, &n, h, &one, &alpha, w, &one)


cdef Py_ssize_t _block_start(Py_ssize_t n, int b) noexcept nogil:
    """The first row of block b of K's lower triangle: the blocks have equal area."""
    if b >= SYMV_BLOCKS:
        return n
    return <Py_ssize_t>(n * sqrt(<double>b / SYMV_BLOCKS))


cdef Py_ssize_t _upper_block_start(Py_ssize_t n, int b) noexcept nogil:
    """The first row of block b of K's upper triangle: the blocks have equal area."""
    if b >= SYMV_BLOCKS:
        return n
    return <Py_ssize_t>(n * (1 - sqrt(1 - <double>b / SYMV_BLOCKS)))


cdef void _symv_block(Py_ssize_t n, const double* K, const Py_ssize_t* row_start,
                      const double* x, double* acc, int b) noexcept nogil:
    """Row block b's share of K x into acc's row b: from K's lower triangle, or
    with row_start, from the packed upper triangle K (PackedUpperGram's data)."""
    memset(acc + b * n, 0, n * sizeof(double))
    if row_start == NULL:
        fk_symv_rows(K, n, _block_start(n, b), _block_start(n, b + 1), x, acc + b * n, _FAST)
    else:
        fk_symv_upper_rows(K, row_start, n, _upper_block_start(n, b),
                           _upper_block_start(n, b + 1), x, acc + b * n, _FAST)


cdef void _sum_blocks(Py_ssize_t n, const double* acc, double* y) noexcept nogil:
    """y = the sum of acc's SYMV_BLOCKS rows, in block order."""
    cdef int b
    cdef Py_ssize_t i
    for i in range(n):
        y[i] = acc[i]
    for b in range(1, SYMV_BLOCKS):
        for i in range(n):
            y[i] += acc[b * n + i]


cdef void _remove_mean(int n, const floating* x, floating* out) noexcept nogil:
    """out = x - mean(x) (out may be x), the mean summed in index order."""
    cdef double total = 0
    cdef floating mean
    cdef int i
    for i in range(n):
        total += x[i]
    mean = <floating>(total / n)
    for i in range(n):
        out[i] = x[i] - mean


cdef floating* _operand(int n, floating* V, floating* u, int j) noexcept nogil:
    """The vector step j multiplies by K: v_j, or with centring (u) v_j less its mean, in u."""
    if u == NULL:
        return V + <Py_ssize_t>j * n
    # The basis is orthogonal to 1 to rounding; H on both sides keeps K's
    # large mean out of the product even so.
    _remove_mean(n, V + <Py_ssize_t>j * n, u)
    return u


cdef bint _finish(int n, floating* V, floating* H, int ldh, floating* h2, bint centred, int j,
                  floating breakdown, floating* norm) noexcept nogil:
    """Step j after its product w = K v_j went into V[j + 1]: w centred (with
    centring), projected out of the basis, normalised.  True where K v_j lay
    in the basis (then w is left unscaled)."""
    cdef int one = 1, i
    cdef floating beta, scale
    cdef floating* w = V + <Py_ssize_t>(j + 1) * n
    cdef floating* h = H + <Py_ssize_t>j * ldh
    if centred:
        _remove_mean(n, w, w)
    scale = _nrm2(n, w)
    if scale > norm[0]:
        norm[0] = scale
    _project_out(n, j + 1, V, w, h)
    _project_out(n, j + 1, V, w, h2)
    for i in range(j + 1):
        h[i] += h2[i]
    beta = _nrm2(n, w)
    h[j + 1] = beta
    # K v_j lies in the span of the basis to the rounding of a product with K
    # (of K's null space, K v_j is that rounding alone): an invariant
    # subspace, which the caller leaves with a new direction.
    if beta <= breakdown * norm[0]:
        return True
    scale = 1 / beta
    if floating is double:
        dscal(&n, &scale, w, &one)
    else:
        sscal(&n, &scale, w, &one)
    return False


cdef Py_ssize_t _expand(int n, floating* K, const Py_ssize_t* row_start, floating* V,
                        floating* H, int ldh, floating* h2, floating* u, int start, int stop,
                        floating breakdown, floating* norm, double* acc) noexcept nogil:
    """Steps start..stop-1 on this thread; the step it stopped at (see expand)."""
    cdef int one = 1, j, b
    cdef floating alpha = 1, zero = 0
    cdef floating* w
    cdef floating* x
    cdef char upper = b"U"
    for j in range(start, stop):
        w = V + <Py_ssize_t>(j + 1) * n
        x = _operand(n, V, u, j)
        if floating is double and acc != NULL:
            for b in range(SYMV_BLOCKS):
                _symv_block(n, K, row_start, x, acc, b)
            _sum_blocks(n, acc, w)
        elif floating is double:
            # K is C-ordered: BLAS reads it as K^T, whose upper triangle is K's lower one.
            dsymv(&upper, &n, &alpha, K, &n, x, &one, &zero, w, &one)
        else:
            ssymv(&upper, &n, &alpha, K, &n, x, &one, &zero, w, &one)
        if _finish(n, V, H, ldh, h2, u != NULL, j, breakdown, norm):
            return j
    return stop


cdef void _claim_blocks(Py_ssize_t n, const double* K, const Py_ssize_t* row_start,
                        const double* x, double* acc, fk_spin_int* sync,
                        fk_spin_int step) noexcept nogil:
    """Compute the row blocks of step `step` (its tickets step * SYMV_BLOCKS
    onwards) that no other thread has claimed, counting each one done."""
    cdef fk_spin_int ticket
    while True:
        ticket = fk_spin_claim(&sync[_NEXT], (step + 1) * SYMV_BLOCKS)
        if ticket < 0:
            return
        _symv_block(n, K, row_start, x, acc, <int>(ticket - step * SYMV_BLOCKS))
        fk_spin_add(&sync[_DONE])


cdef enum:
    # sync's words: the step published (its number + 1), the next ticket,
    # the blocks done, and the signal to leave.
    _STEP = 0
    _NEXT = 1
    _DONE = 2
    _QUIT = 3


cdef Py_ssize_t _expand_threaded(int n, double* K, const Py_ssize_t* row_start, double* V,
                                 double* H, int ldh, double* h2, double* u, int start, int stop,
                                 double breakdown, double* norm, double* acc,
                                 int n_threads) noexcept nogil:
    """_expand's steps with the row blocks of each product shared by n_threads
    threads held in one parallel region.  The first thread does the rest of
    each step and publishes the next one; the others wait for it (fk_spin.h)
    and claim blocks as the first thread does, so a thread that is not
    running delays no step.  Which thread computes a block does not change
    its sums."""
    cdef fk_spin_int sync[4]
    cdef Py_ssize_t result[1]
    # Each thread's own (Cython copies them in: set, so that none is read unset).
    cdef int tid = 0, j = start, finished = 0
    cdef fk_spin_int seen = 0, published = 0, step = 0
    cdef double* x = NULL
    sync[_STEP] = 0
    sync[_NEXT] = 0
    sync[_DONE] = 0
    sync[_QUIT] = 0
    result[0] = stop
    with parallel(num_threads=n_threads):
        tid = omp_get_thread_num()
        if tid == 0:
            j = start
            finished = 0
            while not finished:
                step = j - start
                x = _operand(n, V, u, j)
                fk_spin_set(&sync[_STEP], step + 1)
                _claim_blocks(n, K, row_start, x, acc, &sync[0], step)
                fk_spin_wait_reach(&sync[_DONE], (step + 1) * SYMV_BLOCKS)
                _sum_blocks(n, acc, V + <Py_ssize_t>(j + 1) * n)
                if _finish(n, V, H, ldh, h2, u != NULL, j, breakdown, norm):
                    result[0] = j
                    finished = 1
                elif j + 1 == stop:
                    finished = 1
                j = j + 1
            fk_spin_set(&sync[_QUIT], 1)
        else:
            seen = 0
            while True:
                published = fk_spin_wait_change(&sync[_STEP], seen, &sync[_QUIT])
                if published == seen:
                    break
                seen = published
                step = published - 1
                x = u if u != NULL else V + <Py_ssize_t>(start + step) * n
                _claim_blocks(n, K, row_start, x, acc, &sync[0], step)
    return result[0]


def expand(K, floating[:, ::1] V, floating[:, ::1] H, floating[::1] scratch,
           Py_ssize_t start, Py_ssize_t stop, double breakdown, floating[::1] norm,
           bint centred=False, double[:, ::1] acc=None, int n_threads=1, row_start=None):
    """Lanczos steps start..stop-1 (see the module docstring); the step it stopped at.

    K: n x n (C-contiguous, V's dtype), its lower triangle read; or with
    row_start, the float64 packed upper triangle (``PackedUpperGram``'s data
    and row_start), which needs acc.  V: at least stop + 1 rows of n, the
    first start + 1 orthonormal.  H: at least stop rows of stop + 1.  scratch:
    at least stop entries.  norm[0]: an estimate of ||K|| from below, raised
    to every ||K v_j||.  Returns stop, or the step j whose K v_j had a
    component outside the basis of at most breakdown * norm[0]: V[j + 1] is
    then not set and H[j, j + 1] holds that tiny norm.  centred: the
    operator is H K H (see the module docstring), scratch then at least
    max(stop, n) entries.  acc: None (the products are BLAS's symv), or for a
    float64 K, PRODUCT_BLOCKS x n of scratch for fastkern's products
    (fk_symv.h), which run on up to n_threads threads (one per row block)
    with the same result for any count.
    """
    cdef int n = V.shape[1]
    cdef const floating[:, ::1] full
    cdef const double[::1] data
    cdef const Py_ssize_t[::1] starts
    cdef floating* k_p = NULL
    cdef const Py_ssize_t* starts_p = NULL
    if row_start is None:
        full = K
        if full.shape[0] != n or full.shape[1] != n:
            raise ValueError("K must be square and V's rows as long as K's")
    else:
        if floating is not double or acc is None:
            raise ValueError("a packed K needs float64 and acc")
        data = K
        starts = row_start
        _check_packed(data, starts, n)
    if not 0 <= start <= stop or V.shape[0] < stop + 1 or H.shape[0] < stop \
            or H.shape[1] < stop + 1 or scratch.shape[0] < stop or norm.shape[0] < 1 \
            or (centred and scratch.shape[0] < n):
        raise ValueError(f"steps {start}..{stop} do not fit V {V.shape[0]} x {V.shape[1]}, "
                         f"H {H.shape[0]} x {H.shape[1]} and {scratch.shape[0]} entries of scratch")
    if acc is not None and (floating is not double or acc.shape[0] != SYMV_BLOCKS
                            or acc.shape[1] != n):
        raise ValueError(f"acc must be None or, for a float64 K, of shape ({SYMV_BLOCKS}, {n})")
    if n_threads < 1:
        raise ValueError(f"n_threads must be at least 1, got {n_threads}")
    if n == 0 or start == stop:
        return stop
    # BLAS declares no const: symv only reads K.
    if row_start is None:
        k_p = <floating*>&full[0, 0]
    else:
        k_p = <floating*>&data[0]
        starts_p = &starts[0]
    cdef double* acc_p = &acc[0, 0] if acc is not None else NULL
    cdef Py_ssize_t reached
    # h2 (stop entries) and u (n) share scratch: h2 is used after the product.
    cdef floating* u = &scratch[0] if centred else NULL
    with nogil:
        if floating is double and acc_p != NULL and n_threads > 1:
            reached = _expand_threaded(n, k_p, starts_p, &V[0, 0], &H[0, 0],
                                       <int>H.shape[1], &scratch[0], u, <int>start, <int>stop,
                                       breakdown, &norm[0], acc_p,
                                       min(n_threads, <int>SYMV_BLOCKS))
        else:
            reached = _expand(n, k_p, starts_p, &V[0, 0], &H[0, 0], <int>H.shape[1],
                              &scratch[0], u, <int>start, <int>stop, <floating>breakdown,
                              &norm[0], acc_p)
    return reached


def new_direction(floating[:, ::1] V, Py_ssize_t j, const double[::1] w, floating[::1] scratch,
                  bint centred=False):
    """V[j] = the random w made a unit vector orthogonal to V's first j rows
    (orthonormal), projected out twice as ``expand``'s steps are; centred:
    and to 1 (the rows being so).  scratch: at least j entries.

    The direction ``lanczos_eigsh`` goes on with after an invariant subspace.
    A nearly diagonal Gram meets one every few steps, and the same arithmetic
    as NumPy calls took 53 us of a 200-row fit's 1.3 ms, five times over.
    """
    cdef int n = V.shape[1]
    cdef Py_ssize_t i
    if not 0 <= j < V.shape[0] or w.shape[0] != n or scratch.shape[0] < j:
        raise ValueError(f"row {j} of V {V.shape[0]} x {V.shape[1]} needs w of {n} "
                         f"entries and {j} of scratch")
    if n == 0:
        return
    cdef floating* v = &V[j, 0]
    cdef floating scale
    with nogil:
        for i in range(n):
            v[i] = <floating>w[i]
        if centred:
            _remove_mean(n, v, v)
        if j:
            _project_out(n, <int>j, &V[0, 0], v, &scratch[0])
            _project_out(n, <int>j, &V[0, 0], v, &scratch[0])
        scale = _nrm2(n, v)
    if not scale > 0:
        raise ValueError("w lies in the span of V's rows")
    scale = 1 / scale
    for i in range(n):
        v[i] *= scale


cdef _check_packed(const double[::1] data, const Py_ssize_t[::1] starts, Py_ssize_t n):
    """Raise unless data and starts hold a packed K of n rows (PackedUpperGram)."""
    if starts.shape[0] != n or (n and data.shape[0] < starts[n - 1] + n):
        raise ValueError(f"a packed K of {n} rows needs {n} row starts and the values "
                         "they address (PackedUpperGram)")


def product(K, const double[::1] x, int n_threads=1, row_start=None):
    """K x with expand's float64 products (the same sums), K as expand takes it."""
    cdef Py_ssize_t n = x.shape[0]
    cdef const double[:, ::1] full
    cdef const double[::1] data
    cdef const Py_ssize_t[::1] starts
    cdef const double* k_p
    cdef const Py_ssize_t* starts_p = NULL
    cdef int b
    if row_start is None:
        full = K
        if full.shape[0] != n or full.shape[1] != n:
            raise ValueError("K must be n x n for x of n entries")
    else:
        data = K
        starts = row_start
        _check_packed(data, starts, n)
    if n_threads < 1:
        raise ValueError(f"n_threads must be at least 1, got {n_threads}")
    out = np.empty(n)
    if n == 0:
        return out
    cdef double[::1] y = out
    cdef double[:, ::1] acc = np.empty((SYMV_BLOCKS, n))
    if row_start is None:
        k_p = &full[0, 0]
    else:
        k_p = &data[0]
        starts_p = &starts[0]
    with nogil:
        for b in prange(SYMV_BLOCKS, num_threads=min(n_threads, <int>SYMV_BLOCKS),
                        schedule="static", chunksize=1):
            _symv_block(n, k_p, starts_p, &x[0], &acc[0, 0], b)
        _sum_blocks(n, &acc[0, 0], &y[0])
    return out
