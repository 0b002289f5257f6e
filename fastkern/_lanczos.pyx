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

The products are scipy's BLAS (symv and gemv); the caller holds scipy's BLAS to
one thread.  One step is a few microseconds at a few hundred rows, where a
Python-level iteration (scipy's ARPACK calls back into Python each step) costs
more than the product: this loop never returns to Python between checks.
"""
from scipy.linalg.cython_blas cimport dgemv, dnrm2, dscal, dsymv, sgemv, snrm2, sscal, ssymv
from cython cimport floating


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


cdef Py_ssize_t _expand(int n, floating* K, floating* V, floating* H, int ldh, floating* h2,
                        floating* u, int start, int stop, floating breakdown,
                        floating* norm) noexcept nogil:
    cdef int one = 1, j, i
    cdef floating alpha = 1, zero = 0, beta, scale
    cdef floating* w
    cdef floating* h
    cdef floating* x
    cdef char upper = b"U"
    for j in range(start, stop):
        # K is C-ordered: BLAS reads it as K^T, whose upper triangle is K's lower one.
        w = V + <Py_ssize_t>(j + 1) * n
        h = H + <Py_ssize_t>j * ldh
        x = V + <Py_ssize_t>j * n
        if u != NULL:
            # The basis is orthogonal to 1 to rounding; H on both sides keeps
            # K's large mean out of the product even so.
            _remove_mean(n, x, u)
            x = u
        if floating is double:
            dsymv(&upper, &n, &alpha, K, &n, x, &one, &zero, w, &one)
        else:
            ssymv(&upper, &n, &alpha, K, &n, x, &one, &zero, w, &one)
        if u != NULL:
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
        # K v_j lies in the span of the basis to the rounding of a product
        # with K (of K's null space, K v_j is that rounding alone): an
        # invariant subspace, which the caller leaves with a new direction.
        if beta <= breakdown * norm[0]:
            return j
        scale = 1 / beta
        if floating is double:
            dscal(&n, &scale, w, &one)
        else:
            sscal(&n, &scale, w, &one)
    return stop


def expand(const floating[:, ::1] K, floating[:, ::1] V, floating[:, ::1] H,
           floating[::1] scratch, Py_ssize_t start, Py_ssize_t stop, double breakdown,
           floating[::1] norm, bint centred=False):
    """Lanczos steps start..stop-1 (see the module docstring); the step it stopped at.

    K: n x n, its lower triangle read.  V: at least stop + 1 rows of n, the
    first start + 1 orthonormal.  H: at least stop rows of stop + 1.  scratch:
    at least stop entries.  norm[0]: an estimate of ||K|| from below, raised
    to every ||K v_j||.  Returns stop, or the step j whose K v_j had a
    component outside the basis of at most breakdown * norm[0]: V[j + 1] is
    then not set and H[j, j + 1] holds that tiny norm.  centred: the
    operator is H K H (see the module docstring), scratch then at least
    max(stop, n) entries.
    """
    cdef int n = K.shape[0]
    if K.shape[1] != n or V.shape[1] != n:
        raise ValueError("K must be square and V's rows as long as K's")
    if not 0 <= start <= stop or V.shape[0] < stop + 1 or H.shape[0] < stop \
            or H.shape[1] < stop + 1 or scratch.shape[0] < stop or norm.shape[0] < 1 \
            or (centred and scratch.shape[0] < n):
        raise ValueError(f"steps {start}..{stop} do not fit V {V.shape[0]} x {V.shape[1]}, "
                         f"H {H.shape[0]} x {H.shape[1]} and {scratch.shape[0]} entries of scratch")
    if n == 0 or start == stop:
        return stop
    cdef Py_ssize_t reached
    # h2 (stop entries) and u (n) share scratch: h2 is used after the product.
    cdef floating* u = &scratch[0] if centred else NULL
    with nogil:
        # BLAS declares no const: symv only reads K.
        reached = _expand(n, <floating*>&K[0, 0], &V[0, 0], &H[0, 0], <int>H.shape[1], &scratch[0],
                          u, <int>start, <int>stop, <floating>breakdown, &norm[0])
    return reached
