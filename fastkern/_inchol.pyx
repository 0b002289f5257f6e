"""One pivot step of the incomplete Cholesky factorisation, in one parallel pass.

G is stored transposed, Gt (capacity x n, C order): Gt[j] is column j of G.
For pivot p, step k:

    G[i, k] = (K[i, p] - sum_{j<k} G[i, j] G[p, j]) / tau,   tau = sqrt(r_p)
    r_i    -= G[i, k]^2

where r is the residual diagonal, diag(K - G G^T), and the next pivot is the
first row with the largest r_i.  Rows are processed in blocks of ROWS; for
each block one pass computes the block of the kernel column (RBF and
Laplacian: directly from x_p and X transposed; other kernels: the caller has
put the column in Gt[k] already), the update, the residuals, and the block's
maximum (first index) and sum.  The blocks' maxima and sums are then reduced
in block order by one thread.

Determinism: the block partition is fixed (ROWS), each row's sum runs over j
in order in float64, and the per-block results are reduced in block order
with ties going to the lower index, so G, the pivots and the reported traces
do not depend on the thread count or on the batching.

The step is memory bound: it reads all of Gt[:k] once (a streaming axpy over
j on a block of rows whose float64 accumulator stays in L1).  So ``prepare``
subtracts the sums of many candidate pivots in one read of Gt[:k]
(src/fk_inchol.h, the same arithmetic in the same order), and a later step
at one of them starts from its partial column and reads only the rows of Gt
added since (fastkern.lowrank._Candidates chooses the candidates).  One parallel
region per step (several only when a step takes longer than the Ctrl-C
batch target), instead of the 9 or so a generic Gram call for the kernel
column opens, which on a loaded 2-core machine made 2 threads slower than 1.

Also here: ``syevr``, ``syev`` and ``posv`` (LAPACK's symmetric eigensolvers
and Cholesky solve) called without the GIL (scipy's f2py wrappers hold it for the whole call, so a
thread waiting on them could not even raise KeyboardInterrupt): the dense
eigensolvers run them in a worker thread (fastkern._eigen.interruptible).
"""
from cython cimport floating
from cython.parallel cimport prange
from libc.stdlib cimport free, malloc
from scipy.linalg.cython_lapack cimport dposv, dpotrf, dsyev, dsyevd, dsyevr, spotrf, ssyev, ssyevd, ssyevr

import numpy as np
from numpy.linalg import LinAlgError

from fastkern._batches cimport Batches
from fastkern._openmp cimport omp_get_thread_num
from fastkern._maps cimport (
    K_LAPLACIAN, K_RBF, fk_l1dist_row_d, fk_l1dist_row_f, fk_sqdist_row_d, fk_sqdist_row_f,
    fk_vexp_d, fk_vexp_f, FK_N_PARAMS, FK_P_GAMMA,
)

cdef enum:
    # Rows per block: 512 float64 accumulators (4 KB) stay in L1, and each read
    # of Gt[j, block] is a 2-4 KB contiguous run the prefetcher follows.
    # At most FK_MAX_SEG (the maps' segment limit).
    ROWS = 512
    # Rows per block of prepare, its unit of parallel work and of candidate
    # kernel columns (at most ROWS); within a block, fk_inchol.h copies each
    # 8-row panel of Gt once and every candidate sweeps it.
    PASS_ROWS = 128

# The kernel columns computed here carry the compiled loops' kind codes
# (src/fk_maps.h: K_RBF, K_LAPLACIAN); GIVEN, outside them, means the caller
# has put the column in Gt[k] already.
cdef enum:
    K_GIVEN = -1

GIVEN = K_GIVEN
#: The kinds whose columns step() computes from X itself.
DIRECT_KINDS = frozenset((K_RBF, K_LAPLACIAN))


cdef void _kernel_column(const floating *xp, const floating *Xt, Py_ssize_t n, Py_ssize_t d,
                         Py_ssize_t i0, Py_ssize_t m, int kind, double gamma,
                         double *acc) noexcept nogil:
    """acc[:m] = k(x_p, x_i) for rows i0..i0 + m - 1 (m <= ROWS), a DIRECT_KINDS kernel."""
    cdef floating kc[ROWS]
    cdef Py_ssize_t i
    # Direct differences: exact or correctly rounded whatever the data's
    # offset, so no centring and no cancellation (the Gram code's direct
    # path, with the same chunked sums and exp).
    if floating is double:
        if kind == K_RBF:
            fk_sqdist_row_d(xp, Xt + i0, n, d, m, kc)
        else:
            fk_l1dist_row_d(xp, Xt + i0, n, d, m, kc)
        fk_vexp_d(kc, m, -gamma)
    else:
        if kind == K_RBF:
            fk_sqdist_row_f(xp, Xt + i0, n, d, m, kc)
        else:
            fk_l1dist_row_f(xp, Xt + i0, n, d, m, kc)
        fk_vexp_f(kc, m, <float> -gamma)
    for i in range(m):
        acc[i] = kc[i]


cdef void _step_block(floating *Gt, Py_ssize_t n, Py_ssize_t k, Py_ssize_t i0,
                      Py_ssize_t i1, const double *gp, double tau, Py_ssize_t p,
                      double *resid, const floating *xp, const floating *Xt, Py_ssize_t d,
                      int kind, double gamma, const double *partial, Py_ssize_t j0,
                      double *bmax, Py_ssize_t *barg, double *bsum) noexcept nogil:
    cdef double acc[ROWS]
    cdef Py_ssize_t i, j, m = i1 - i0, best
    cdef const floating *row
    cdef floating *col = Gt + k * n + i0
    cdef double g, v, r, top, s, inv_tau = 1.0 / tau
    if partial != NULL:
        # prepare's sums over j < j0 (the same arithmetic, already done).
        for i in range(m):
            acc[i] = partial[i0 + i]
    elif kind == K_GIVEN:
        for i in range(m):
            acc[i] = col[i]
    else:
        _kernel_column(xp, Xt, n, d, i0, m, kind, gamma, acc)
    for j in range(j0, k):
        g = gp[j]
        row = Gt + j * n + i0
        for i in range(m):
            acc[i] = acc[i] - g * row[i]
    for i in range(m):
        v = acc[i] * inv_tau
        col[i] = <floating> v
        resid[i0 + i] = resid[i0 + i] - v * v
    if i0 <= p < i1:
        # Exact values for the pivot itself: its residual is 0 by construction.
        col[p - i0] = <floating> tau
        resid[p] = 0.0
    # The first index of the largest residual; a NaN never wins here, but it
    # makes the sum NaN, which the caller refuses.
    top = resid[i0]
    best = i0
    s = 0.0
    for i in range(i0, i1):
        r = resid[i]
        s = s + r
        if r > top:
            top = r
            best = i
    bmax[0] = top
    barg[0] = best
    bsum[0] = s


def step(floating[:, ::1] Gt, Py_ssize_t k, Py_ssize_t p, const double[::1] gp, double tau,
         double[::1] resid, const floating[:, ::1] X, const floating[:, ::1] Xt, int kind,
         const double[::1] params, int n_threads, Py_ssize_t first=0,
         const double[::1] partial=None, Py_ssize_t j0=0):
    """Pivot step k at row p: column k of G, the residuals, and the next pivot.

    gp is G[p, :k] in float64 and tau = sqrt(r_p).  With kind GIVEN, Gt[k]
    holds the kernel column K[:, p] on entry; with a kind of DIRECT_KINDS the column
    is computed here from X (n x d, row p used) and Xt (X transposed, d x n)
    with the parameter array params (``fastkern._gram.pack_params``; not read
    with GIVEN).  partial (n entries) and j0: the column with the terms
    j < j0 already subtracted, as ``prepare`` leaves it; the step then reads
    Gt[j0:k] alone.  Row blocks run in time-bounded batches
    (fastkern._batches) so Ctrl-C is seen within one long step; ``first`` is
    the batch size learned by the previous step.

    Returns (batch size learned, next pivot, its residual, sum of the
    residuals).  Inputs are validated by fastkern.lowrank.
    """
    cdef Py_ssize_t n = Gt.shape[1], d = X.shape[1]
    cdef const double *part = NULL
    if partial is not None:
        if partial.shape[0] != n or not 0 <= j0 <= k:
            raise ValueError(f"partial must hold {n} entries and 0 <= j0 <= k, got "
                             f"{partial.shape[0]} entries and j0={j0} for k={k}")
        part = &partial[0]
    else:
        j0 = 0
    cdef Py_ssize_t nblocks = (n + ROWS - 1) // ROWS, b
    cdef floating *G = &Gt[0, 0]
    cdef const double *g = &gp[0] if k > 0 else NULL
    cdef double *r = &resid[0]
    cdef const floating *xp = NULL
    cdef const floating *xt = NULL
    cdef int threads
    cdef double top, trace
    cdef Py_ssize_t best
    if kind != K_GIVEN and kind not in DIRECT_KINDS:
        raise ValueError(f"kind must be GIVEN or one of DIRECT_KINDS, got {kind}")
    if params is None or params.shape[0] != FK_N_PARAMS:
        raise ValueError(f"params must hold the {FK_N_PARAMS} values of pack_params()")
    cdef double gamma = params[FK_P_GAMMA]
    if kind != K_GIVEN:
        xp = &X[p, 0]
        xt = &Xt[0, 0]
    cdef double *bmax = <double *> malloc(nblocks * sizeof(double))
    cdef double *bsum = <double *> malloc(nblocks * sizeof(double))
    cdef Py_ssize_t *barg = <Py_ssize_t *> malloc(nblocks * sizeof(Py_ssize_t))
    if bmax == NULL or bsum == NULL or barg == NULL:
        free(bmax)
        free(bsum)
        free(barg)
        raise MemoryError()
    cdef Batches batches = Batches(nblocks, n_threads, first)
    try:
        while batches.next():
            # No more threads than blocks: an idle thread still costs every
            # barrier, which on a loaded machine can mean a scheduler time slice.
            threads = <int> min(<Py_ssize_t> batches.threads, batches.stop - batches.start)
            with nogil:
                # dynamic: blocks cost the same, but on a shared machine a
                # descheduled thread's share is taken over by the running one
                # (results do not depend on which thread runs a block).
                for b in prange(batches.start, batches.stop, num_threads=threads,
                                schedule='dynamic', chunksize=4):
                    _step_block(G, n, k, b * ROWS, min(b * ROWS + ROWS, n), g, tau, p, r,
                                xp, xt, d, kind, gamma, part, j0, bmax + b, barg + b,
                                bsum + b)
        top = bmax[0]
        best = barg[0]
        trace = 0.0
        for b in range(nblocks):
            trace = trace + bsum[b]
            if bmax[b] > top:
                top = bmax[b]
                best = barg[b]
    finally:
        free(bmax)
        free(bsum)
        free(barg)
    return batches.size, best, top, trace


cdef extern from "fk_inchol.h" nogil:
    void fk_inchol_update_d(double *w, Py_ssize_t ldw, Py_ssize_t c, const double *g,
                            Py_ssize_t k, const double *gt, Py_ssize_t ldg, Py_ssize_t m,
                            double *panel)
    void fk_inchol_update_f(double *w, Py_ssize_t ldw, Py_ssize_t c, const double *g,
                            Py_ssize_t k, const float *gt, Py_ssize_t ldg, Py_ssize_t m,
                            double *panel)
    int FK_INCHOL_PANEL


cdef void _prepare_block(const floating *Gt, Py_ssize_t n, Py_ssize_t k, Py_ssize_t i0,
                         Py_ssize_t i1, const Py_ssize_t *cand, Py_ssize_t c,
                         const double *gc, double *W, const floating *X, const floating *Xt,
                         Py_ssize_t d, int kind, double gamma, double *panel) noexcept nogil:
    cdef Py_ssize_t t
    for t in range(c):
        _kernel_column(X + cand[t] * d, Xt, n, d, i0, i1 - i0, kind, gamma, W + t * n + i0)
    if k == 0:
        return
    if floating is double:
        fk_inchol_update_d(W + i0, n, c, gc, k, Gt + i0, n, i1 - i0, panel)
    else:
        fk_inchol_update_f(W + i0, n, c, gc, k, Gt + i0, n, i1 - i0, panel)


def prepare(const floating[:, ::1] Gt, Py_ssize_t k, const Py_ssize_t[::1] cand,
            const double[:, ::1] gc, double[:, ::1] W, const floating[:, ::1] X,
            const floating[:, ::1] Xt, int kind, const double[::1] params, int n_threads,
            Py_ssize_t first=0):
    """The columns of candidate pivots up to step k, for ``step``'s partial.

    W[t] = K[:, cand[t]] - sum over j < k of G[cand[t], j] Gt[j], in the
    step's arithmetic and order, so that ``step(..., partial=W[t], j0=k)``
    at a later step finishes the column the plain step would compute, bit
    for bit.  gc is G[cand, :k] in float64 (c x k, C order); W has at least
    c rows of n.  A DIRECT_KINDS kernel (the column from X and Xt, as step
    computes it).  Gt[:k] is read once for all the candidates rather than
    once per step, in time-bounded batches of row blocks (Ctrl-C).

    Returns the batch size learned (``first`` for the next call).
    """
    cdef Py_ssize_t n = Gt.shape[1], d = X.shape[1], c = cand.shape[0], t
    cdef Py_ssize_t nblocks = (n + PASS_ROWS - 1) // PASS_ROWS, b
    if kind not in DIRECT_KINDS:
        raise ValueError(f"kind must be one of DIRECT_KINDS, got {kind}")
    if params is None or params.shape[0] != FK_N_PARAMS:
        raise ValueError(f"params must hold the {FK_N_PARAMS} values of pack_params()")
    if not 0 <= k <= Gt.shape[0] or c == 0 or gc.shape[0] != c or gc.shape[1] != k \
            or W.shape[0] < c or W.shape[1] != n or X.shape[0] != n \
            or Xt.shape[0] != d or Xt.shape[1] != n:
        raise ValueError(f"prepare needs gc of {c} x {k}, W of at least {c} x {n}, X of "
                         f"{n} rows and Xt of {d} x {n}")
    if n_threads < 1:
        raise ValueError(f"n_threads must be at least 1, got {n_threads}")
    for t in range(c):
        if not 0 <= cand[t] < n:
            raise ValueError(f"candidate rows must be in [0, {n}), got {cand[t]}")
    if n == 0:
        return first
    cdef double gamma = params[FK_P_GAMMA]
    cdef const floating *G = &Gt[0, 0]
    cdef const double *g = &gc[0, 0] if k > 0 else NULL
    cdef int threads
    # Each thread's copy of the panel of Gt its block is at (fk_inchol.h).
    cdef double[:, ::1] panels = np.empty((n_threads, max(k, 1) * FK_INCHOL_PANEL))
    cdef Batches batches = Batches(nblocks, n_threads, first)
    while batches.next():
        threads = <int> min(<Py_ssize_t> batches.threads, batches.stop - batches.start)
        with nogil:
            for b in prange(batches.start, batches.stop, num_threads=threads,
                            schedule='dynamic'):
                _prepare_block(G, n, k, b * PASS_ROWS, min(b * PASS_ROWS + PASS_ROWS, n),
                               &cand[0], c, g, &W[0, 0], &X[0, 0], &Xt[0, 0], d, kind, gamma,
                               &panels[omp_get_thread_num(), 0])
    return batches.size


def syevr(floating[::1, :] a, bint lower, int il, int iu):
    """Eigenpairs il..iu (1-based, ascending) of the symmetric Fortran-ordered a,
    by LAPACK's syevr without the GIL; a is destroyed.  Returns (w, z), with
    as many pairs as syevr found (it can find fewer on clustered spectra)."""
    cdef int n = a.shape[0], m = 0, info = 0, lwork = -1, liwork = -1, iwq = 0
    cdef int ldz = max(n, 1)
    cdef floating vl = 0, vu = 0, abstol = 0, wq = 0
    cdef char jobz = b'V', rng = b'A' if il == 1 and iu == n else b'I'
    cdef char uplo = b'L' if lower else b'U'
    if a.shape[1] != n or not 1 <= il <= iu <= n:
        raise ValueError(f"syevr needs a square matrix and 1 <= il <= iu <= n, got shape "
                         f"({a.shape[0]}, {a.shape[1]}), il={il}, iu={iu}")
    dtype = np.float32 if floating is float else np.float64
    w_a = np.empty(n, dtype=dtype)
    z_a = np.empty((n, iu - il + 1), dtype=dtype, order="F")
    isuppz_a = np.empty(2 * (iu - il + 1), dtype=np.intc)
    cdef floating[::1] w = w_a
    cdef floating[::1, :] z = z_a
    cdef int[::1] isuppz = isuppz_a
    with nogil:
        if floating is float:
            ssyevr(&jobz, &rng, &uplo, &n, &a[0, 0], &n, &vl, &vu, &il, &iu, &abstol, &m,
                   &w[0], &z[0, 0], &ldz, &isuppz[0], &wq, &lwork, &iwq, &liwork, &info)
        else:
            dsyevr(&jobz, &rng, &uplo, &n, &a[0, 0], &n, &vl, &vu, &il, &iu, &abstol, &m,
                   &w[0], &z[0, 0], &ldz, &isuppz[0], &wq, &lwork, &iwq, &liwork, &info)
    lwork, liwork = <int> wq, iwq
    work_a = np.empty(max(lwork, 1), dtype=dtype)
    iwork_a = np.empty(max(liwork, 1), dtype=np.intc)
    cdef floating[::1] work = work_a
    cdef int[::1] iwork = iwork_a
    with nogil:
        if floating is float:
            ssyevr(&jobz, &rng, &uplo, &n, &a[0, 0], &n, &vl, &vu, &il, &iu, &abstol, &m,
                   &w[0], &z[0, 0], &ldz, &isuppz[0], &work[0], &lwork, &iwork[0], &liwork,
                   &info)
        else:
            dsyevr(&jobz, &rng, &uplo, &n, &a[0, 0], &n, &vl, &vu, &il, &iu, &abstol, &m,
                   &w[0], &z[0, 0], &ldz, &isuppz[0], &work[0], &lwork, &iwork[0], &liwork,
                   &info)
    if info != 0:
        raise LinAlgError(f"LAPACK syevr failed (info={info})")
    return w_a[:m], z_a[:, :m]


def syev(floating[::1, :] a, bint lower, bint divide=False):
    """All eigenvalues (ascending) of the symmetric Fortran-ordered a, by LAPACK's
    syev (O(n) workspace) or, with divide, syevd (divide and conquer: faster,
    O(n^2) workspace), without the GIL; a is overwritten by the eigenvectors."""
    cdef int n = a.shape[0], info = 0, lwork = -1, liwork = -1, iwq = 0
    cdef floating wq = 0
    cdef char jobz = b'V'
    cdef char uplo = b'L' if lower else b'U'
    if a.shape[1] != n:
        raise ValueError(f"syev needs a square matrix, got shape ({a.shape[0]}, {a.shape[1]})")
    dtype = np.float32 if floating is float else np.float64
    w_a = np.empty(n, dtype=dtype)
    cdef floating[::1] w = w_a
    with nogil:
        _syev(divide, &jobz, &uplo, n, &a[0, 0], &w[0], &wq, lwork, &iwq, liwork, &info)
    lwork, liwork = <int> wq, iwq
    work_a = np.empty(max(lwork, 1), dtype=dtype)
    iwork_a = np.empty(max(liwork, 1), dtype=np.intc)
    cdef floating[::1] work = work_a
    cdef int[::1] iwork = iwork_a
    with nogil:
        _syev(divide, &jobz, &uplo, n, &a[0, 0], &w[0], &work[0], lwork, &iwork[0], liwork,
              &info)
    if info != 0:
        raise LinAlgError(f"LAPACK syev{'d' if divide else ''} failed (info={info})")
    return w_a


cdef void _syev(bint divide, char *jobz, char *uplo, int n, floating *a, floating *w,
                floating *work, int lwork, int *iwork, int liwork, int *info) noexcept nogil:
    if floating is float:
        if divide:
            ssyevd(jobz, uplo, &n, a, &n, w, work, &lwork, iwork, &liwork, info)
        else:
            ssyev(jobz, uplo, &n, a, &n, w, work, &lwork, info)
    else:
        if divide:
            dsyevd(jobz, uplo, &n, a, &n, w, work, &lwork, iwork, &liwork, info)
        else:
            dsyev(jobz, uplo, &n, a, &n, w, work, &lwork, info)


def posv(double[::1, :] a, double[::1, :] b, bint lower):
    """Solve a x = b for the symmetric positive definite Fortran-ordered a, by
    LAPACK's dposv without the GIL: a is overwritten by its Cholesky factor
    and b by x."""
    cdef int n = a.shape[0], nrhs = b.shape[1], info = 0
    cdef int ldb = max(n, 1)
    cdef char uplo = b'L' if lower else b'U'
    if a.shape[1] != n or b.shape[0] != n:
        raise ValueError(f"posv needs a square a and b with as many rows, got shapes "
                         f"({a.shape[0]}, {a.shape[1]}) and ({b.shape[0]}, {b.shape[1]})")
    if n == 0 or nrhs == 0:
        return
    with nogil:
        dposv(&uplo, &n, &nrhs, &a[0, 0], &ldb, &b[0, 0], &ldb, &info)
    if info > 0:
        raise LinAlgError(f"{info}-th leading minor of the array is not positive definite")
    if info < 0:
        raise LinAlgError(f"LAPACK posv failed (info={info})")


def potrf(floating[::1, :] a, bint lower):
    """Cholesky-factor the symmetric Fortran-ordered a in place (one triangle,
    the other untouched) by LAPACK's potrf without the GIL; returns info (0,
    or k > 0: the k-th leading minor is not positive definite)."""
    cdef int n = a.shape[0], info = 0
    cdef char uplo = b'L' if lower else b'U'
    if a.shape[1] != n:
        raise ValueError(f"potrf needs a square matrix, got shape ({a.shape[0]}, {a.shape[1]})")
    if n == 0:
        return 0
    with nogil:
        if floating is float:
            spotrf(&uplo, &n, &a[0, 0], &n, &info)
        else:
            dpotrf(&uplo, &n, &a[0, 0], &n, &info)
    if info < 0:
        raise LinAlgError(f"LAPACK potrf failed (info={info})")
    return info
