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
j on a block of rows whose float64 accumulator stays in L1).  One parallel
region per step (several only when a step takes longer than the Ctrl-C
batch target), instead of the 9 or so a generic Gram call for the kernel
column opens, which on a loaded 2-core machine made 2 threads slower than 1.
"""
from cython cimport floating
from cython.parallel cimport prange
from libc.stdlib cimport free, malloc

from fastkern._batches cimport Batches
from fastkern._maps cimport (
    fk_l1dist_row_d, fk_l1dist_row_f, fk_sqdist_row_d, fk_sqdist_row_f, fk_vexp_d, fk_vexp_f,
)

cdef enum:
    # Rows per block: 512 float64 accumulators (4 KB) stay in L1, and each read
    # of Gt[j, block] is a 2-4 KB contiguous run the prefetcher follows.
    # At most FK_MAX_SEG (the maps' segment limit).
    ROWS = 512

cdef enum:
    # Kernel columns computed here (K_GIVEN: already in Gt[k]).
    K_GIVEN = 0
    K_RBF = 1
    K_LAPLACIAN = 2

GIVEN = K_GIVEN
RBF = K_RBF
LAPLACIAN = K_LAPLACIAN


cdef void _step_block(floating *Gt, Py_ssize_t n, Py_ssize_t k, Py_ssize_t i0,
                      Py_ssize_t i1, const double *gp, double tau, Py_ssize_t p,
                      double *resid, const floating *xp, const floating *Xt, Py_ssize_t d,
                      int kind, double gamma, double *bmax, Py_ssize_t *barg,
                      double *bsum) noexcept nogil:
    cdef double acc[ROWS]
    cdef floating kc[ROWS]
    cdef Py_ssize_t i, j, m = i1 - i0, best
    cdef const floating *row
    cdef floating *col = Gt + k * n + i0
    cdef double g, v, r, top, s, inv_tau = 1.0 / tau
    if kind == K_GIVEN:
        for i in range(m):
            acc[i] = col[i]
    else:
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
    for j in range(k):
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
         double gamma, int n_threads, Py_ssize_t first=0):
    """Pivot step k at row p: column k of G, the residuals, and the next pivot.

    gp is G[p, :k] in float64 and tau = sqrt(r_p).  With kind GIVEN, Gt[k]
    holds the kernel column K[:, p] on entry; with RBF or LAPLACIAN the column
    is computed here from X (n x d, row p used) and Xt (X transposed, d x n)
    with the given gamma.  Row blocks run in time-bounded batches
    (fastkern._batches) so Ctrl-C is seen within one long step; ``first`` is
    the batch size learned by the previous step.

    Returns (batch size learned, next pivot, its residual, sum of the
    residuals).  Inputs are validated by fastkern.lowrank.
    """
    cdef Py_ssize_t n = Gt.shape[1], d = X.shape[1]
    cdef Py_ssize_t nblocks = (n + ROWS - 1) // ROWS, b
    cdef floating *G = &Gt[0, 0]
    cdef const double *g = &gp[0] if k > 0 else NULL
    cdef double *r = &resid[0]
    cdef const floating *xp = NULL
    cdef const floating *xt = NULL
    cdef int threads
    cdef double top, trace
    cdef Py_ssize_t best
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
            threads = <int> min(<Py_ssize_t> n_threads, batches.stop - batches.start)
            with nogil:
                # dynamic: blocks cost the same, but on a shared machine a
                # descheduled thread's share is taken over by the running one
                # (results do not depend on which thread runs a block).
                for b in prange(batches.start, batches.stop, num_threads=threads,
                                schedule='dynamic', chunksize=4):
                    _step_block(G, n, k, b * ROWS, min(b * ROWS + ROWS, n), g, tau, p, r,
                                xp, xt, d, kind, gamma, bmax + b, barg + b, bsum + b)
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
