"""The O(n k) row update of one pivot of the incomplete Cholesky factorisation.

G is stored transposed, Gt (capacity x n, C order): Gt[j] is column j of G.
For pivot p, step k, with Gt[k] already holding the kernel column K[:, p]:

    G[i, k] = (K[i, p] - sum_{j<k} G[i, j] G[p, j]) / tau,   tau = sqrt(r_p)
    r_i    -= G[i, k]^2

where r is the residual diagonal, diag(K - G G^T).  Each row's sum runs over
j in order, in float64, whatever the block or thread that computes it, so the
result does not depend on the thread count.  The step reads all of
Gt[:k] once: it is memory bound, hence a streaming axpy over j on a block of
rows whose float64 accumulator stays in L1.
"""
from cython cimport floating
from cython.parallel cimport prange

from fastkern._batches cimport Batches

cdef enum:
    # Rows per block: 512 float64 accumulators (4 KB) stay in L1, and each read
    # of Gt[j, block] is a 2-4 KB contiguous run the prefetcher follows.
    ROWS = 512


cdef void _update_block(floating *Gt, Py_ssize_t n, Py_ssize_t k, Py_ssize_t i0,
                        Py_ssize_t i1, const double *gp, double inv_tau,
                        double *resid) noexcept nogil:
    cdef double acc[ROWS]
    cdef Py_ssize_t i, j, m = i1 - i0
    cdef const floating *row
    cdef floating *col = Gt + k * n + i0
    cdef double g, v
    for i in range(m):
        acc[i] = col[i]
    for j in range(k):
        g = gp[j]
        row = Gt + j * n + i0
        for i in range(m):
            acc[i] = acc[i] - g * row[i]
    for i in range(m):
        v = acc[i] * inv_tau
        col[i] = <floating> v
        resid[i0 + i] = resid[i0 + i] - v * v


def update(floating[:, ::1] Gt, Py_ssize_t k, const double[::1] gp, double tau,
           double[::1] resid, int n_threads, Py_ssize_t first=0):
    """Turn Gt[k] from the kernel column into column k of G and update resid.

    gp is G[p, :k] in float64.  Row blocks run in time-bounded batches
    (fastkern._batches) so Ctrl-C is seen within one long step; ``first`` is
    the batch size learned by the previous step, and the one learned here is
    returned.  Inputs are validated by fastkern.lowrank.
    """
    cdef Py_ssize_t n = Gt.shape[1]
    cdef Py_ssize_t nblocks = (n + ROWS - 1) // ROWS, b
    cdef double inv_tau = 1.0 / tau
    cdef floating *G = &Gt[0, 0]
    cdef const double *g = &gp[0] if k > 0 else NULL
    cdef double *r = &resid[0]
    cdef int threads
    cdef Batches batches = Batches(nblocks, n_threads, first)
    while batches.next():
        # No more threads than blocks: an idle thread still costs every
        # barrier, which on a loaded machine can mean a scheduler time slice.
        threads = <int> min(<Py_ssize_t> n_threads, batches.stop - batches.start)
        with nogil:
            # static: every block costs the same (k axpys of ROWS elements).
            for b in prange(batches.start, batches.stop, num_threads=threads,
                            schedule='static'):
                _update_block(G, n, k, b * ROWS, min(b * ROWS + ROWS, n), g, inv_tau, r)
    return batches.size
