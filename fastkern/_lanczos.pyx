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
from libc.math cimport acosh, ceil, copysign, fabs, INFINITY, log1p, sqrt
from libc.stdlib cimport free, malloc
from libc.string cimport memset
from scipy.linalg.cython_blas cimport dgemv, dnrm2, dscal, dsymv, sgemv, snrm2, sscal, ssymv
from scipy.linalg.cython_lapack cimport dstein, dstemr
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


def check_workspace(Py_ssize_t j, Py_ssize_t k):
    """The doubles and ints ``tridiagonal_check`` needs for k pairs of a
    tridiagonal of order j: stemr's workspace, its support indices, and the
    diagonals' copies it overwrites."""
    return 20 * j, 10 * j + 2 * k


def tridiagonal_check(floating[:, ::1] H, Py_ssize_t j, Py_ssize_t k, double tol, double floor,
                      bint exact, double[::1] theta, double[::1] Z, double[::1] relative,
                      double[::1] work, int[::1] iwork):
    """The convergence check of ``lanczos_eigsh`` before its first restart.

    H[:j, :j]'s diagonal and subdiagonal are the Lanczos tridiagonal; its k
    largest eigenpairs (LAPACK's stemr, ascending) go to theta[:k] and Z's
    first j * k entries (column-major, j rows), and each Ritz pair's
    residual estimate |beta_j y_j| relative to max(floor, |theta|) to
    relative[:k] (0 with exact: the basis spans the whole space).  Returns
    the largest estimate over tol, or -1 where stemr declined (MRRR refuses
    some clustered spectra: the caller solves the dense matrix instead).

    The same arithmetic as the NumPy check on scipy's stemr, to the last bit:
    with that check, the solve of KernelPCA at 200 rows (RBF, d = 8 to 64,
    steep and flat spectra) took 1.10-1.26x as long, a third of its checks
    being the small arrays' making.  work and iwork: at least
    ``check_workspace(j, k)`` entries.
    """
    cdef double *d
    cdef double *e
    cdef int n = <int>j, il = <int>(j - k + 1), iu = <int>j, found = 0, ldz = <int>j
    cdef int nzc = <int>k, lwork = <int>(18 * j), liwork = <int>(10 * j), info = 0
    cdef bint tryrac = 1
    cdef double vl = 0, vu = 0, bound, scale, ratio = 0, beta, x
    cdef char jobz = b"V", which = b"I"
    cdef Py_ssize_t i
    need, ineed = check_workspace(j, k)
    if not 1 <= k <= j or H.shape[0] < j or H.shape[1] < j + 1 or theta.shape[0] < j \
            or Z.shape[0] < j * k or relative.shape[0] < k or work.shape[0] < need \
            or iwork.shape[0] < ineed:
        raise ValueError(f"a check of {k} pairs on {j} steps does not fit its arrays")
    with nogil:
        d = &work[18 * j]
        e = &work[19 * j]
        for i in range(j):
            d[i] = H[i, i]
            e[i] = H[i + 1, i] if i + 1 < j else 0
        dstemr(&jobz, &which, &n, d, e, &vl, &vu, &il, &iu, &found, &theta[0], &Z[0], &ldz,
               &nzc, &iwork[10 * j], &tryrac, &work[0], &lwork, &iwork[0], &liwork, &info)
        if info == 0 and found == k:
            beta = H[j - 1, j]
            for i in range(k):
                bound = 0 if exact else fabs(beta * Z[i * j + j - 1])
                scale = floor if floor > fabs(theta[i]) else fabs(theta[i])
                relative[i] = bound / scale
                x = bound / (tol * scale)
                # NaN (from a NaN in H) wins, as in NumPy's max.
                if x > ratio or x != x:
                    ratio = x
                    if x != x:
                        break
    if info != 0 or found != k:
        return -1.0
    return ratio


cdef enum:
    # QL sweeps one eigenvalue may take before _tridiagonal_ql gives up (as EISPACK's tql1).
    QL_SWEEPS = 30


cdef int _tridiagonal_ql(int n, double* d, double* e, double* z) noexcept nogil:
    """The eigenvalues of the symmetric tridiagonal with diagonal d[:n] and
    off-diagonal e[:n - 1] into d, ascending, and with z the last row of its
    eigenvector matrix into z[:n]: implicit QL with Wilkinson's shift, the
    rotations applied to that row alone (ARPACK's dstqrb, O(n^2)).  e[n - 1]
    is workspace; e is overwritten.  Returns 0, or -1 where an eigenvalue
    took more than QL_SWEEPS sweeps.

    The matrix is scaled to largest entry 1 first, so that the rotations'
    lengths are sqrt(f^2 + g^2) (libm's hypot took 0.9 of the time at n = 33)."""
    cdef int l, m, i, sweeps
    cdef double eps = 2.220446049250313e-16, tiny = 2.2250738585072014e-308
    cdef double g, r, s, c, p, f, b, dd, t, scale = 0
    cdef bint cut
    e[n - 1] = 0
    for i in range(n):
        scale = max(scale, fabs(d[i]))
        if i + 1 < n:
            scale = max(scale, fabs(e[i]))
    if not scale > 0 or scale != scale or scale > 1.7976931348623157e308:
        # Zero (its values are d) or not finite (left to the caller's check).
        scale = 1
    for i in range(n):
        d[i] /= scale
        e[i] /= scale
    if z != NULL:
        for i in range(n):
            z[i] = 0
        z[n - 1] = 1
    for l in range(n):
        sweeps = 0
        while True:
            m = l
            while m < n - 1:
                dd = fabs(d[m]) + fabs(d[m + 1])
                if fabs(e[m]) <= eps * dd or fabs(e[m]) <= tiny:
                    break
                m += 1
            if m == l:
                break
            sweeps += 1
            if sweeps > QL_SWEEPS:
                return -1
            g = (d[l + 1] - d[l]) / (2 * e[l])
            r = sqrt(g * g + 1)
            g = d[m] - d[l] + e[l] / (g + copysign(r, g))
            s = 1
            c = 1
            p = 0
            cut = False
            i = m - 1
            while i >= l:
                f = s * e[i]
                b = c * e[i]
                r = sqrt(f * f + g * g)
                e[i + 1] = r
                if r == 0:
                    # Underflow: the matrix splits; sweep again from l.
                    d[i + 1] -= p
                    e[m] = 0
                    cut = True
                    break
                s = f / r
                c = g / r
                g = d[i + 1] - p
                r = (d[i] - g) * s + 2 * c * b
                p = s * r
                d[i + 1] = g + p
                g = c * r - b
                if z != NULL:
                    t = z[i + 1]
                    z[i + 1] = s * z[i] + c * t
                    z[i] = c * z[i] - s * t
                i -= 1
            if cut:
                continue
            d[l] -= p
            e[l] = g
            e[m] = 0
    for i in range(n):
        d[i] *= scale
    # Insertion sort, ascending (n is a Lanczos basis: a few hundred at most).
    for l in range(1, n):
        t = d[l]
        f = z[l] if z != NULL else 0
        i = l - 1
        while i >= 0 and d[i] > t:
            d[i + 1] = d[i]
            if z != NULL:
                z[i + 1] = z[i]
            i -= 1
        d[i + 1] = t
        if z != NULL:
            z[i + 1] = f
    return 0


cdef int _ql_of(floating[:, ::1] H, Py_ssize_t start, Py_ssize_t stop, bint upper,
                double* w, double* z) noexcept nogil:
    """_tridiagonal_ql on the tridiagonal in H[start:stop, start:stop] (its
    subdiagonal, or superdiagonal with upper); -2 where memory ran out."""
    cdef int n = <int>(stop - start), status
    cdef Py_ssize_t i
    cdef double* e = <double*>malloc(n * sizeof(double))
    if e == NULL:
        return -2
    for i in range(n):
        w[i] = H[start + i, start + i]
        if i + 1 < n:
            e[i] = H[start + i, start + i + 1] if upper else H[start + i + 1, start + i]
    status = _tridiagonal_ql(n, w, e, z)
    free(e)
    return status


def tridiagonal_values(floating[:, ::1] H, Py_ssize_t start, Py_ssize_t stop, bint upper,
                       double[::1] w, double[::1] last=None):
    """The eigenvalues of the Lanczos tridiagonal in H[start:stop, start:stop]
    (its diagonal and subdiagonal, or superdiagonal with upper), ascending,
    into w[:stop - start]; with last, the last components of its unit
    eigenvectors (signs arbitrary) into last[:stop - start]: every Ritz
    value with its residual bound, without the vectors (stemr computes
    them, at several times the cost for two dozen pairs).  Implicit QL
    (_tridiagonal_ql), O((stop - start)^2).  Returns 0, or -1 where QL did
    not converge."""
    cdef Py_ssize_t n = stop - start
    if not 0 <= start < stop or H.shape[0] < stop or H.shape[1] < stop + upper \
            or w.shape[0] < n or (last is not None and last.shape[0] < n):
        raise ValueError(f"the tridiagonal {start}..{stop} does not fit its arrays")
    cdef double* z = &last[0] if last is not None else NULL
    cdef int status
    with nogil:
        status = _ql_of(H, start, stop, upper, &w[0], z)
    if status == -2:
        raise MemoryError()
    return status



cdef int _stein_of(floating[:, ::1] H, Py_ssize_t j, const double* w, int m,
                  double* Z) noexcept nogil:
    """LAPACK's stein on the tridiagonal in H[:j, :j] (diagonal and
    subdiagonal) for its m eigenvalues w, ascending: their unit eigenvectors
    into Z (column-major, j rows).  Returns stein's info, -2 where memory ran
    out."""
    cdef int n = <int>j, ldz = <int>j, info = 0
    cdef Py_ssize_t i
    cdef double* buf = <double*>malloc((7 * j) * sizeof(double))
    cdef int* ibuf = <int*>malloc((3 * j + m) * sizeof(int))
    if buf == NULL or ibuf == NULL:
        free(buf)
        free(ibuf)
        return -2
    for i in range(j):
        buf[i] = H[i, i]
        buf[j + i] = H[i + 1, i] if i + 1 < j else 0
        # One block: stein is told of no split (iblock, isplit).
        ibuf[i] = 1
        ibuf[j + i] = n
    dstein(&n, buf, buf + j, &m, <double*>w, ibuf, ibuf + j, Z, &ldz, buf + 2 * j, ibuf + 2 * j,
           ibuf + 3 * j, &info)
    free(buf)
    free(ibuf)
    return info


def tridiagonal_vectors(floating[:, ::1] H, Py_ssize_t j, const double[::1] w, double[::1] Z):
    """Unit eigenvectors of the Lanczos tridiagonal in H[:j, :j] (diagonal and
    subdiagonal, as ``tridiagonal_check``) for its eigenvalues w (ascending,
    from ``tridiagonal_values``), into Z's first j * w.size entries
    (column-major, j rows): LAPACK's stein, inverse iteration, O(j) a vector
    where stemr first finds the values again by bisection.  Values closer
    than 1e-3 of the matrix's norm get orthogonal vectors.  Returns 0, or
    stein's info where some vector did not converge."""
    cdef int m = <int>w.shape[0], info
    if not 1 <= m <= j or H.shape[0] < j or H.shape[1] < j or Z.shape[0] < j * m:
        raise ValueError(f"{m} vectors of a tridiagonal of order {j} do not fit their arrays")
    with nogil:
        info = _stein_of(H, j, &w[0], m, &Z[0])
    if info == -2:
        raise MemoryError()
    return info


def ritz_check(floating[:, ::1] H, Py_ssize_t j, Py_ssize_t k, double tol, double floor,
               bint exact, double[::1] w, double[::1] last, double[::1] Z,
               double[::1] relative):
    """The convergence check of ``lanczos_eigsh`` before its first restart, as
    ``tridiagonal_check`` (ARPACK's test on the top k Ritz pairs of the
    Lanczos tridiagonal in H[:j, :j]) for less: every Ritz value and the last
    components of their vectors by QL (``tridiagonal_values``, into w and
    last, ascending), and only where those do not show a pair clearly short
    of the test, the top k vectors by inverse iteration (stein, into Z's
    first j * k entries, column-major), whose tiny last components, unlike
    QL's (accurate to about j eps), decide convergence.

    Returns (ratio, vectors): the largest residual estimate over tol (NaN
    from a NaN in H), and whether Z and relative (the estimates relative to
    max(floor, |theta|)) were written; ratio -1 where QL or stein failed
    (the caller checks with stemr instead)."""
    if not 1 <= k <= j or H.shape[0] < j or H.shape[1] < j + 1 or w.shape[0] < j \
            or last.shape[0] < j or Z.shape[0] < j * k or relative.shape[0] < k:
        raise ValueError(f"a check of {k} pairs on {j} steps does not fit its arrays")
    cdef double beta, bound, scale, x, ratio = 0, noise
    cdef Py_ssize_t i
    cdef int status
    cdef bint short = False
    with nogil:
        status = _ql_of(H, 0, j, False, &w[0], &last[0])
        if status == 0:
            beta = fabs(H[j - 1, j])
            noise = 100.0 * j * 2.220446049250313e-16
            for i in range(j - k, j):
                scale = floor if floor > fabs(w[i]) else fabs(w[i])
                x = beta * fabs(last[i]) / (tol * scale)
                if x > ratio or x != x:
                    ratio = x
                if not exact and beta * (fabs(last[i]) - noise) > tol * scale:
                    short = True
            if not short and ratio == ratio:
                status = _stein_of(H, j, &w[j - k], <int>k, &Z[0])
                ratio = 0
                if status == 0:
                    for i in range(k):
                        bound = 0 if exact else beta * fabs(Z[i * j + j - 1])
                        scale = floor if floor > fabs(w[j - k + i]) else fabs(w[j - k + i])
                        relative[i] = bound / scale
                        x = bound / (tol * scale)
                        # NaN (from a NaN in H) wins, as in NumPy's max.
                        if x > ratio or x != x:
                            ratio = x
                            if x != x:
                                break
    if status == -2:
        raise MemoryError()
    if status:
        return -1.0, False
    return ratio, not short and ratio == ratio


cdef double _probe_steps(double n, double top, double following, double lowest, double largest,
                         double failure, int min_steps, int max_steps) noexcept nogil:
    """``fastkern._eigen.probe_steps`` (see there), INFINITY for None."""
    cdef double gap, gamma, target, rate, steps, spread
    if not (lowest <= following and following < top):
        return INFINITY
    if not largest >= top:
        largest = top
    gap = top - following
    spread = following - lowest
    gamma = gap / (spread if spread > 2.2250738585072014e-308 else 2.2250738585072014e-308)
    # A random unit start has weight below failure / sqrt(n) on a given
    # direction with probability below failure: tan^2 of its angle is then at
    # most n / failure^2.  The Ritz value's shortfall, at most
    # (largest - lowest) tan^2 / T_{s-1}(1 + 2 gamma)^2, must stay under gap / 2.
    target = sqrt(2 * (largest - lowest) * n / gap) / failure
    # acosh(1 + 2 gamma), accurate (and > 0) for a gamma below the rounding of 1.
    rate = log1p(2 * gamma + sqrt(2 * gamma * (2 + 2 * gamma)))
    if not rate > 0:
        return INFINITY
    steps = 1 + ceil(acosh(target) / rate)
    if not steps <= max_steps:
        return INFINITY
    return steps if steps > min_steps else min_steps


def probe_step_count(double n, double top, double following, double lowest, double largest,
                     double failure, int min_steps, int max_steps):
    """``fastkern._eigen.probe_steps``' bound; inf for None."""
    return _probe_steps(n, top, following, lowest, largest, failure, min_steps, max_steps)


def probe_plan(floating[:, ::1] H, Py_ssize_t j, Py_ssize_t k, double top, double norm,
               Py_ssize_t n, double[::1] w, double[::1] last, bint solve, double failure,
               int min_steps, int max_steps):
    """The probe of ``fastkern._eigen.lanczos_eigsh`` after convergence on j
    steps (see _missed_copies there): the count r >= k of top Ritz vectors to
    lock, the bound on the values of the locked vectors' complement apart
    from missed copies, and the probe's steps, at the least cost.  With
    solve, w and last first get every Ritz value of the Lanczos tridiagonal
    in H[:j, :j], ascending, and the last components of its eigenvectors
    (``tridiagonal_values``); else they hold those of the projected matrix.
    Returns (r, following, steps, lowest), lowest the bound below K's values
    taken (0, or -norm where H's diagonal has a negative entry); r = -1 where
    no r gives a bound the probe can resolve, -2 where QL did not converge."""
    if not 1 <= k < j or H.shape[0] < j or H.shape[1] < j + 1 or w.shape[0] < j \
            or last.shape[0] < j:
        raise ValueError(f"a probe after {k} pairs on {j} steps does not fit its arrays")
    cdef double beta, lowest = 0, largest, scale, cum = 0, gap, following, steps, cost
    cdef double best_cost = INFINITY, best_following = 0, best_steps = 0, b_hi, b_lo
    cdef Py_ssize_t i, r, a, best = -1
    cdef int status = 0
    with nogil:
        if solve:
            status = _ql_of(H, 0, j, False, &w[0], &last[0])
        if status == 0:
            beta = fabs(H[j - 1, j])
            for i in range(j):
                if H[i, i] < 0:
                    lowest = -norm
            largest = w[j - 1]
            scale = fabs(largest) if fabs(largest) > fabs(lowest) else fabs(lowest)
            for i in range(j - k + 1, j):
                cum += (beta * last[i]) ** 2
            for r in range(k, j - 1):
                # Locking the top r: the r-th value is w[a + 1], the (r+1)-th w[a].
                a = j - 1 - r
                b_hi = beta * fabs(last[a + 1])
                b_lo = beta * fabs(last[a])
                cum += b_hi * b_hi
                # Beyond k, only pairs converged to half the precision are
                # locked: a vector still far from its eigenspace leaves much of
                # a cluster's eigenvectors, values near its own, outside the
                # locked space, where the error term below (which takes the gap
                # to the next Ritz value for the gap to the next eigenvalue) does
                # not see them.
                if r > k and not b_hi <= 1.4901161193847656e-08 * fabs(w[a + 1]):
                    break
                gap = w[a + 1] - b_hi - w[a] - b_lo
                if not gap > 0:
                    continue
                # Orthogonal to the locked vectors, values are at most the
                # (r+1)-th raised by their error (residual over the gap, squared,
                # times the largest value).
                following = w[a] + b_lo + cum / (gap * gap) * scale
                steps = _probe_steps(<double>n, top, following, lowest, largest, failure,
                                     min_steps, max_steps)
                if steps == INFINITY:
                    continue
                # In multiply-adds: a probe step, a product (n^2) and two
                # projections on the locked vectors and the probe's; a locked
                # vector, a product with the basis and inverse iteration on the
                # tridiagonal (stein took as long as about 500 j).
                cost = steps * (<double>n * n + 4.0 * n * (r + steps)) + r * j * (2.0 * n + 500)
                if cost < best_cost:
                    best_cost, best, best_following, best_steps = cost, r, following, steps
    if status == -2:
        raise MemoryError()
    if status:
        return -2, 0.0, 0, lowest
    return best, best_following, <int>best_steps, lowest
