"""The small matrix of ``fastkern._eigen.lanczos_eigsh``: the Lanczos
tridiagonal's eigenvalues and vectors, the convergence check on them, and
the plan of the probe for missed copies of repeated values.

``fastkern._lanczos`` takes the steps that build the tridiagonal; this
module reads it.  Every function works on H[:j, :j] (or another diagonal
block of H) as ``expand`` leaves it: the diagonal and the subdiagonal (or
superdiagonal) hold the tridiagonal.  Its order is a Lanczos basis, a few
hundred at most, so these loops run on one thread: what they save is the
cost of a call from Python and of LAPACK routines that find more than is
read (stemr's vectors of every pair, where the check needs their last
components).
"""
from libc.math cimport acosh, ceil, copysign, fabs, INFINITY, log1p, sqrt
from libc.stdlib cimport free, malloc
from scipy.linalg.cython_lapack cimport dstein, dstemr
from cython cimport floating


cdef void _read_tridiagonal(floating[:, ::1] H, Py_ssize_t start, Py_ssize_t stop,
                           bint upper, double* d, double* e) noexcept nogil:
    """The tridiagonal in H[start:stop, start:stop] as LAPACK takes it: its
    diagonal into d, its subdiagonal (superdiagonal with upper) into e, and
    e[stop - start - 1] = 0."""
    cdef Py_ssize_t i, n = stop - start
    for i in range(n):
        d[i] = H[start + i, start + i]
        if i + 1 < n:
            e[i] = H[start + i, start + i + 1] if upper else H[start + i + 1, start + i]
        else:
            e[i] = 0


cdef double _ritz_ratio(Py_ssize_t j, Py_ssize_t k, double beta, bint exact,
                        const double* theta, const double* Z, double tol, double floor,
                        double* relative) noexcept nogil:
    """ARPACK's test on k Ritz pairs of a tridiagonal of order j: each pair's
    residual estimate |beta z_j| (z: its vector, column-major in Z) relative
    to max(floor, |theta|) into relative (0 with exact: the basis spans the
    whole space); returns the largest over tol, NaN (from a NaN in H) winning
    as in NumPy's max."""
    cdef double bound, scale, x, ratio = 0
    cdef Py_ssize_t i
    for i in range(k):
        bound = 0 if exact else fabs(beta * Z[i * j + j - 1])
        scale = floor if floor > fabs(theta[i]) else fabs(theta[i])
        relative[i] = bound / scale
        x = bound / (tol * scale)
        if x > ratio or x != x:
            ratio = x
            if x != x:
                break
    return ratio


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
    cdef double vl = 0, vu = 0, ratio = 0
    cdef char jobz = b"V", which = b"I"
    need, ineed = check_workspace(j, k)
    if not 1 <= k <= j or H.shape[0] < j or H.shape[1] < j + 1 or theta.shape[0] < j \
            or Z.shape[0] < j * k or relative.shape[0] < k or work.shape[0] < need \
            or iwork.shape[0] < ineed:
        raise ValueError(f"a check of {k} pairs on {j} steps does not fit its arrays")
    with nogil:
        d = &work[18 * j]
        e = &work[19 * j]
        _read_tridiagonal(H, 0, j, False, d, e)
        dstemr(&jobz, &which, &n, d, e, &vl, &vu, &il, &iu, &found, &theta[0], &Z[0], &ldz,
               &nzc, &iwork[10 * j], &tryrac, &work[0], &lwork, &iwork[0], &liwork, &info)
        if info == 0 and found == k:
            ratio = _ritz_ratio(j, k, H[j - 1, j], exact, &theta[0], &Z[0], tol, floor,
                                &relative[0])
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
    cdef double* e = <double*>malloc(n * sizeof(double))
    if e == NULL:
        return -2
    _read_tridiagonal(H, start, stop, upper, w, e)
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
    _read_tridiagonal(H, 0, j, False, buf, buf + j)
    for i in range(j):
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
    cdef double beta, scale, x, ratio = 0, noise
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
                    ratio = _ritz_ratio(j, k, beta, exact, &w[j - k], &Z[0], tol, floor,
                                        &relative[0])
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
