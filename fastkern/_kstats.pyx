"""Compiled passes of the kernel two-sample (MMD) and independence (HSIC) tests.

What is stored (the only N x N buffer, see fastkern/kernel_tests.py):

* MMD: the Gram G of the pooled sample [X; Y], full and symmetric.  A
  permutation only relabels which rows are "X", so each permuted statistic
  is a function of the within-group sums of G's strict upper triangle,
  T_X = sum_{i<j, both X} G_ij and T_Y, and of a few O(N) dot products.
* HSIC: the centred Gram Kc = HKH of X in the upper triangle and on the
  diagonal, and the raw Gram L of Y in the strict lower triangle (L's
  diagonal is kept in a length-N vector).  Both are symmetric, so one
  triangle each loses nothing.  A permutation pi of Y's rows needs
  T(pi) = sum_{i<j} Kc_ij L_{pi(i) pi(j)} and O(N) dot products.

Permutation statistics are computed one permutation per task, each in a
fixed summation order, so the results are bit-identical for any thread
count and any batching; the work runs in time-bounded batches
(fastkern._batches) so that Ctrl-C is seen between them.
"""
from cython.parallel cimport prange
from cython cimport floating
from libc.math cimport NAN
from libc.stdlib cimport malloc, free

import numpy as np

from fastkern._batches cimport Batches


cdef enum:
    # Permutations that share one pass over a Gram row (MMD): the row (<= 32
    # KiB for N <= 4096) stays in L1 while their 0/1 indicators stream past.
    PERM_GROUP = 8
    # Side of the square tiles of the HSIC Gamma pass, which reads Kc by rows
    # and L by columns: 64 x 64 doubles of each stay in L1/L2.
    TILE = 64


cdef inline double _dot(const floating *a, const floating *b, Py_ssize_t j0,
                        Py_ssize_t j1) noexcept nogil:
    """sum_{j0 <= j < j1} a[j] b[j] in double, four partial sums in a fixed order."""
    cdef double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0
    cdef Py_ssize_t j = j0
    while j + 4 <= j1:
        s0 = s0 + <double> a[j] * b[j]
        s1 = s1 + <double> a[j + 1] * b[j + 1]
        s2 = s2 + <double> a[j + 2] * b[j + 2]
        s3 = s3 + <double> a[j + 3] * b[j + 3]
        j = j + 4
    while j < j1:
        s0 = s0 + <double> a[j] * b[j]
        j = j + 1
    return (s0 + s1) + (s2 + s3)


# ---------------------------------------------------------------- one-pass row statistics


cdef void _row_stats(const floating *G, Py_ssize_t n, double *full, double *upper,
                     double *upper_sq, Py_ssize_t i0, Py_ssize_t i1,
                     int n_threads) noexcept nogil:
    cdef Py_ssize_t i, j
    cdef double s, u, q, v
    for i in prange(i0, i1, num_threads=n_threads, schedule='dynamic'):
        s = 0.0
        for j in range(i + 1):
            s = s + G[i * n + j]
        u = 0.0
        q = 0.0
        for j in range(i + 1, n):
            v = G[i * n + j]
            u = u + v
            q = q + v * v
        full[i] = s + u
        upper[i] = u
        upper_sq[i] = q


def row_stats(const floating[:, ::1] G, int n_threads):
    """For a full symmetric G: (row sums, strict-upper row sums, and strict-upper row
    sums of squares); only the last two when the lower triangle holds something else."""
    cdef Py_ssize_t n = G.shape[0]
    full = np.zeros(n)
    upper = np.zeros(n)
    upper_sq = np.zeros(n)
    cdef double[::1] f = full, u = upper, q = upper_sq
    cdef Batches batches = Batches(n, n_threads)
    if n == 0:
        return full, upper, upper_sq
    while batches.next():
        with nogil:
            _row_stats(&G[0, 0], n, &f[0], &u[0], &q[0], batches.start, batches.stop, batches.threads)
    return full, upper, upper_sq


# ---------------------------------------------------------------- HSIC buffer set-up


cdef void _center_upper(floating *K, Py_ssize_t n, const double *r, double t,
                        Py_ssize_t i0, Py_ssize_t i1, int n_threads) noexcept nogil:
    cdef Py_ssize_t i, j
    cdef double ri
    for i in prange(i0, i1, num_threads=n_threads, schedule='dynamic'):
        ri = r[i]
        for j in range(i, n):
            K[i * n + j] = <floating> (K[i * n + j] - ri - r[j] + t)


def center_upper(floating[:, ::1] K, const double[::1] row_means, double grand_mean,
                 int n_threads):
    """Kc_ij = K_ij - r_i - r_j + t on and above the diagonal, in place."""
    cdef Py_ssize_t n = K.shape[0]
    cdef Batches batches = Batches(n, n_threads)
    if n == 0:
        return
    while batches.next():
        with nogil:
            _center_upper(&K[0, 0], n, &row_means[0], grand_mean, batches.start,
                          batches.stop, batches.threads)


def put_lower(floating[:, ::1] buf, const floating[:, ::1] tile, Py_ssize_t r0,
              double[::1] diag, double[::1] row_sums, double[::1] lower_sq):
    """Rows r0.. of a Gram, given full width in `tile`: the strict lower part into buf,
    the diagonal, the full row sums and the strict-lower sums of squares into the vectors."""
    cdef Py_ssize_t n = buf.shape[1], b = tile.shape[0], k, r, j
    cdef double s, q, v
    with nogil:
        for k in range(b):
            r = r0 + k
            s = 0.0
            q = 0.0
            for j in range(r):
                v = tile[k, j]
                buf[r, j] = tile[k, j]
                s = s + v
                q = q + v * v
            diag[r] = tile[k, r]
            for j in range(r, n):
                s = s + tile[k, j]
            row_sums[r] = s
            lower_sq[r] = q


# ---------------------------------------------------------------- MMD permutations


cdef void _mmd_group(const floating *G, Py_ssize_t n, const unsigned char *lab,
                     Py_ssize_t np_, const double *R, const double *U, Py_ssize_t nk,
                     double *out, Py_ssize_t ncol, floating *zf) noexcept nogil:
    """Statistics of np_ (<= PERM_GROUP) consecutive relabellings, one pass over G's rows.

    out row: T_X, T_Y (within-group sums of the strict upper triangle), then
    sum_i U[k, i] z_i for each k, z the 0/1 "is X" labels.
    """
    cdef Py_ssize_t q, i, k
    cdef double s
    cdef double tx[PERM_GROUP]
    cdef double ty[PERM_GROUP]
    for q in range(np_):
        tx[q] = 0.0
        ty[q] = 0.0
        for i in range(n):
            zf[q * n + i] = <floating> lab[q * n + i]
    for i in range(n):
        for q in range(np_):
            s = _dot(G + i * n, zf + q * n, i + 1, n)
            if lab[q * n + i]:
                tx[q] = tx[q] + s
            else:
                ty[q] = ty[q] + (R[i] - s)
    for q in range(np_):
        out[q * ncol] = tx[q]
        out[q * ncol + 1] = ty[q]
        for k in range(nk):
            s = 0.0
            for i in range(n):
                if lab[q * n + i]:
                    s = s + U[k * n + i]
            out[q * ncol + 2 + k] = s


cdef void _mmd_groups(const floating *G, Py_ssize_t n, const unsigned char *labels,
                      Py_ssize_t n_perm, const double *R, const double *U, Py_ssize_t nk,
                      double *out, Py_ssize_t g0, Py_ssize_t g1, int n_threads) noexcept nogil:
    cdef Py_ssize_t g, p0, np_
    cdef Py_ssize_t ncol = 2 + nk
    cdef floating *zf
    for g in prange(g0, g1, num_threads=n_threads, schedule='dynamic'):
        p0 = g * PERM_GROUP
        np_ = min(PERM_GROUP, n_perm - p0)
        zf = <floating *> malloc(PERM_GROUP * n * sizeof(floating))
        if zf != NULL:
            _mmd_group(G, n, labels + p0 * n, np_, R, U, nk, out + p0 * ncol, ncol, zf)
            free(zf)
        else:
            out[p0 * ncol] = NAN


def mmd_permutations(const floating[:, ::1] G, const unsigned char[:, ::1] labels,
                     const double[::1] upper_row_sums, const double[:, ::1] U, int n_threads):
    """One row per relabelling (labels[p, i] = 1 if row i is "X"): T_X, T_Y, U @ z."""
    cdef Py_ssize_t n = G.shape[0], n_perm = labels.shape[0], nk = U.shape[0]
    if labels.shape[1] != n or upper_row_sums.shape[0] != n or U.shape[1] != n:
        raise ValueError("mmd_permutations: sizes do not match the Gram")
    out = np.zeros((n_perm, 2 + nk))
    cdef double[:, ::1] o = out
    cdef Py_ssize_t n_groups = (n_perm + PERM_GROUP - 1) // PERM_GROUP
    cdef Batches batches = Batches(n_groups, n_threads)
    if n_perm == 0 or n == 0:
        return out
    while batches.next():
        with nogil:
            _mmd_groups(&G[0, 0], n, &labels[0, 0], n_perm, &upper_row_sums[0],
                        &U[0, 0] if nk else NULL, nk, &o[0, 0], batches.start,
                        batches.stop, batches.threads)
    if np.isnan(out).any():
        raise MemoryError("mmd_permutations: out of memory for the per-thread labels")
    return out


# ---------------------------------------------------------------- HSIC permutations


cdef double _hsic_cross(const floating *B, Py_ssize_t n, const int *perm,
                        const int *inv) noexcept nogil:
    """sum_{i<j} B_ij B_{max(p_i,p_j), min(p_i,p_j)}: the upper triangle of B (Kc)
    against the lower triangle (L) relabelled by p.

    The rows i are visited in the order of a = p_i: the L entries of a pair
    are then either in row a of the lower triangle (b < a) or in column a
    (b > a), and consecutive a share the cache lines of those columns, so
    every read is a streamed or cached one.
    """
    cdef Py_ssize_t a, b, i, j, idx
    cdef double total = 0.0, s0, s1
    for a in range(n):
        i = inv[a]
        s0 = 0.0
        s1 = 0.0
        j = i + 1
        while j + 2 <= n:
            b = perm[j]
            idx = b * n + a
            if b < a:
                idx = a * n + b
            s0 = s0 + <double> B[i * n + j] * B[idx]
            b = perm[j + 1]
            idx = b * n + a
            if b < a:
                idx = a * n + b
            s1 = s1 + <double> B[i * n + j + 1] * B[idx]
            j = j + 2
        if j < n:
            b = perm[j]
            idx = b * n + a
            if b < a:
                idx = a * n + b
            s0 = s0 + <double> B[i * n + j] * B[idx]
        total = total + (s0 + s1)
    return total


cdef void _hsic_perms(const floating *B, Py_ssize_t n, const int *perms, const int *invs,
                      const double *U, const double *W, Py_ssize_t nk, double *out,
                      Py_ssize_t p0, Py_ssize_t p1, int n_threads) noexcept nogil:
    cdef Py_ssize_t p, k, i
    cdef double s
    cdef const int *perm
    for p in prange(p0, p1, num_threads=n_threads, schedule='dynamic'):
        perm = perms + p * n
        out[p * (1 + nk)] = _hsic_cross(B, n, perm, invs + p * n)
        for k in range(nk):
            s = 0.0
            for i in range(n):
                s = s + U[k * n + i] * W[k * n + perm[i]]
            out[p * (1 + nk) + 1 + k] = s


def hsic_permutations(const floating[:, ::1] B, const int[:, ::1] perms,
                      const int[:, ::1] inverses, const double[:, ::1] U,
                      const double[:, ::1] W, int n_threads):
    """One row per permutation p of Y's rows: sum_{i<j} Kc_ij L_{p_i p_j}, then
    sum_i U[k, i] W[k, p_i] for each k.  B holds Kc above and L below the diagonal."""
    cdef Py_ssize_t n = B.shape[0], n_perm = perms.shape[0], nk = U.shape[0]
    if (perms.shape[1] != n or inverses.shape[0] != n_perm or inverses.shape[1] != n
            or W.shape[0] != nk or (nk and (U.shape[1] != n or W.shape[1] != n))):
        raise ValueError("hsic_permutations: sizes do not match the Gram")
    out = np.zeros((n_perm, 1 + nk))
    cdef double[:, ::1] o = out
    cdef Batches batches = Batches(n_perm, n_threads)
    if n_perm == 0 or n == 0:
        return out
    while batches.next():
        with nogil:
            _hsic_perms(&B[0, 0], n, &perms[0, 0], &inverses[0, 0],
                        &U[0, 0] if nk else NULL, &W[0, 0] if nk else NULL, nk,
                        &o[0, 0], batches.start, batches.stop, batches.threads)
    return out


# ---------------------------------------------------------------- Gamma approximations


cdef void _hsic_gamma_rows(const floating *B, Py_ssize_t n, const double *lm, double lt,
                           double *partial, Py_ssize_t t0, Py_ssize_t t1,
                           int n_threads) noexcept nogil:
    """partial[t] = sum over i in row tile t, j > i of (Kc_ij Lc_ij)^2, Lc_ij =
    L_ji - lm_i - lm_j + lt read from the lower triangle tile by tile."""
    cdef Py_ssize_t t, c, i, j, i0, i1, j0, j1
    cdef double s, v
    for t in prange(t0, t1, num_threads=n_threads, schedule='dynamic'):
        i0 = t * TILE
        i1 = min(i0 + TILE, n)
        s = 0.0
        for c in range(t, (n + TILE - 1) // TILE):
            j0 = c * TILE
            j1 = min(j0 + TILE, n)
            for i in range(i0, i1):
                for j in range(max(j0, i + 1), j1):
                    v = <double> B[i * n + j] * (B[j * n + i] - lm[i] - lm[j] + lt)
                    s = s + v * v
        partial[t] = s


def hsic_gamma_sumsq(const floating[:, ::1] B, const double[::1] l_means, double l_mean,
                     int n_threads):
    """sum_{i != j} (Kc_ij Lc_ij)^2 (Gretton et al. 2008's variance term)."""
    cdef Py_ssize_t n = B.shape[0]
    cdef Py_ssize_t nt = (n + TILE - 1) // TILE
    partial = np.zeros(max(nt, 1))
    cdef double[::1] p = partial
    cdef Batches batches = Batches(nt, n_threads)
    if n == 0:
        return 0.0
    while batches.next():
        with nogil:
            _hsic_gamma_rows(&B[0, 0], n, &l_means[0], l_mean, &p[0], batches.start,
                             batches.stop, batches.threads)
    return 2.0 * float(np.sum(partial))


cdef void _mmd_h_rows(const floating *G, Py_ssize_t n, Py_ssize_t nx, Py_ssize_t m,
                      double *rows, Py_ssize_t i0, Py_ssize_t i1, int n_threads) noexcept nogil:
    cdef Py_ssize_t i, j
    cdef double s, h
    for i in prange(i0, i1, num_threads=n_threads, schedule='dynamic'):
        s = 0.0
        for j in range(i + 1, m):
            h = (<double> G[i * n + j] + G[(nx + i) * n + nx + j]
                 - G[i * n + nx + j] - G[j * n + nx + i])
            s = s + h * h
        rows[i] = s


def mmd_h_sumsq(const floating[:, ::1] G, Py_ssize_t nx, Py_ssize_t m, int n_threads):
    """sum_{i != j < m} h_ij^2, h_ij = k(x_i,x_j) + k(y_i,y_j) - k(x_i,y_j) - k(x_j,y_i),
    from the pooled Gram (X in rows 0..nx-1, Y from row nx)."""
    cdef Py_ssize_t n = G.shape[0]
    if m > nx or nx + m > n:
        raise ValueError("mmd_h_sumsq: m exceeds a sample size")
    rows = np.zeros(max(m, 1))
    cdef double[::1] r = rows
    cdef Batches batches = Batches(m, n_threads)
    if m == 0:
        return 0.0
    while batches.next():
        with nogil:
            _mmd_h_rows(&G[0, 0], n, nx, m, &r[0], batches.start, batches.stop, batches.threads)
    return 2.0 * float(np.sum(rows))
