"""A symmetric float64 matrix held as two float32 parts, and its products.

``fastkern._mixed`` factors the float32 rounding of the kernel ridge matrix in
place (spotrf) and refines the solution with float64 residuals, which need the
matrix to float64 accuracy.  Recomputing the kernel for each residual took
25 ms at n = 6000 on 2 cores, and 39-45 ms right after spotrf, while
OpenBLAS's worker still spins on one core; a product with the stored parts
takes 7 ms (11 ms right after spotrf).  The float64 values are kept as
hi + lo with hi = fl32(a) and lo = fl32(a - hi):

* hi fills the whole float32 buffer K (both triangles).  spotrf on K's lower
  triangle (the upper triangle of its Fortran view K.T) leaves the strict
  upper triangle, hi above the diagonal, untouched.
* lo holds the strict upper triangle, row after row (row i: the n - 1 - i
  values a[i, i+1:] - hi), a quarter of a float64 matrix.
* diag holds the diagonal in float64.

hi + lo is a to about 2^-48 of |a| (24 + 24 bits), a backward error far below
a float64 Cholesky solve's.  A product reads a quarter of a float64 matrix
from each part instead of evaluating the kernel again.
"""
from libc.math cimport fabs
from cython.parallel cimport prange

import numpy as np

cdef extern from "fk_split.h" nogil:
    Py_ssize_t fk_split_lo_offset(Py_ssize_t i, Py_ssize_t n)
    void fk_split_band(const float *K, const float *lo, const double *diag, const double *Vt,
                       double *out, double *T, Py_ssize_t n, Py_ssize_t t, Py_ssize_t r0,
                       Py_ssize_t r1)
    double fk_split_store_row(const double *src, const double *s, double si, float *hi,
                              float *lo, Py_ssize_t length, double tiny)
    double fk_split_column(const double *src, Py_ssize_t stride, const double *s, double sj,
                           float *dst, Py_ssize_t length, double tiny, double factor_tiny)


def lo_size(Py_ssize_t n):
    """Length of the packed strict upper triangle of an n x n matrix."""
    return n * (n - 1) // 2


def split_panel(const double[:, ::1] D, const double[:, ::1] P, Py_ssize_t i0,
                const double[::1] s, float[:, ::1] K, float[::1] lo, double[::1] diag,
                double[::1] absrow, int n_threads, double tiny=0.0,
                double factor_tiny=0.0):
    """Store rows i0 .. i0+b-1 of a symmetric matrix, from its diagonal on, in split form.

    D (b x b, symmetric) is the diagonal block a[i0:i0+b, i0:i0+b] and P
    (b x (n - i0 - b)) the block to its right; s, if not empty, scales a to
    diag(s) a diag(s).  Writes K[i, j] = K[j, i] = hi for i in the panel and
    j >= i, lo and diag for those rows, and adds |a[i, j]| to absrow[i] and
    absrow[j] (absrow summed over all panels: the absolute row sums of a).
    Entries of a under ``tiny`` in magnitude (before scaling) are taken as 0,
    and below the diagonal, those of diag(s) a diag(s) under ``factor_tiny``
    are stored as 0 (see fk_split_column).  Each row and column is written by one thread.
    """
    cdef Py_ssize_t n = K.shape[0], b = D.shape[0], r, i, j, o, stride, length
    cdef Py_ssize_t ldp = n - i0 - b
    cdef const double *sp
    cdef const double *Dp
    cdef const double *Pp
    cdef const double *src
    cdef float *Kp
    cdef float *lop
    cdef double v, si, sj, acc
    if (b < 1 or D.shape[1] != b or K.shape[1] != n or i0 < 0 or ldp < 0
            or (ldp > 0 and (P.shape[0] != b or P.shape[1] != ldp))
            or lo.shape[0] != lo_size(n) or diag.shape[0] != n or absrow.shape[0] != n
            or (s.shape[0] != 0 and s.shape[0] != n)):
        raise ValueError("inconsistent shapes for a panel of the split matrix")
    sp = &s[0] if s.shape[0] else NULL
    Dp = &D[0, 0]
    Pp = &P[0, 0] if ldp > 0 else NULL
    Kp = &K[0, 0]
    lop = &lo[0] if lo.shape[0] else NULL
    with nogil:
        for r in prange(b, num_threads=n_threads, schedule='static'):
            i = i0 + r
            o = fk_split_lo_offset(i, n)
            si = sp[i] if sp != NULL else 1.0
            v = fabs(Dp[r * b + r])
            v = 0.0 if v < tiny else Dp[r * b + r]
            if sp != NULL:
                v = (v * si) * si
            Kp[i * n + i] = <float> v
            diag[i] = v
            # Row i right of the diagonal: the rest of D's row r, then P's.
            acc = fabs(v) + fk_split_store_row(
                Dp + r * b + r + 1, sp + i + 1 if sp != NULL else NULL, si, Kp + i * n + i + 1,
                lop + o, b - 1 - r, tiny)
            if ldp > 0:
                acc = acc + fk_split_store_row(
                    Pp + r * ldp, sp + i0 + b if sp != NULL else NULL, si, Kp + i * n + i0 + b,
                    lop + o + b - 1 - r, ldp, tiny)
            absrow[i] += acc
        # The mirror image below the diagonal, and the columns' share of absrow.
        for j in prange(i0 + 1, n, num_threads=n_threads, schedule='static'):
            sj = sp[j] if sp != NULL else 1.0
            # Column j of the panel: in D (its first j - i0 rows) or in P (all b).
            if j < i0 + b:
                src, stride, length = Dp + j - i0, b, j - i0
            else:
                src, stride, length = Pp + j - i0 - b, ldp, b
            absrow[j] += fk_split_column(src, stride, sp + i0 if sp != NULL else NULL, sj,
                                         Kp + j * n + i0, length, tiny, factor_tiny)


def split_matmat(const float[:, ::1] K, const float[::1] lo, const double[::1] diag,
                 const double[:, ::1] Vt, double[:, :, ::1] acc, int n_threads):
    """Return (a V)^T for the split symmetric a (hi: K's strict upper triangle, lo, diag).

    Vt is V^T (t x n).  Rows are cut into S = acc.shape[0] bands of about equal
    area; band k sums its rows' upper parts into the result and their mirror
    images into acc[k] (S, t, n; zeroed here), and the bands are added in
    order at the end, so the result is the same from run to run for a given
    S.  Bands are dealt to threads dynamically (a thread slowed by another
    process takes fewer).  Shapes are checked here; the values by the caller.
    """
    cdef Py_ssize_t n = K.shape[0], t = Vt.shape[0], S = acc.shape[0], k
    cdef Py_ssize_t[::1] edges = np.empty(S + 1, dtype=np.intp)
    cdef double total = 0.5 * n * (n + 1), done, share
    cdef Py_ssize_t i
    if n < 1 or K.shape[1] != n or lo.shape[0] != lo_size(n) or diag.shape[0] != n:
        raise ValueError("K must be n x n, n >= 1, lo of length n (n - 1) / 2 and diag of "
                         "length n")
    if Vt.shape[1] != n or t < 1 or S < 1 or acc.shape[1] != t or acc.shape[2] != n:
        raise ValueError("Vt must be (t, n), t >= 1, and acc (S, t, n), S >= 1")
    out = np.empty((t, n))
    cdef double[:, ::1] o = out
    # Row i costs n - i: band k ends where the rows above hold k / S of the area.
    edges[0] = 0
    i = 0
    done = 0.0
    for k in range(1, S):
        share = total * k / S
        while i < n and done + (n - i) <= share:
            done += n - i
            i += 1
        edges[k] = i
    edges[S] = n
    acc[:, :, :] = 0.0
    with nogil:
        for k in prange(S, num_threads=n_threads, schedule='dynamic'):
            fk_split_band(&K[0, 0], &lo[0] if lo.shape[0] else NULL, &diag[0], &Vt[0, 0],
                          &o[0, 0], &acc[k, 0, 0], n, t, edges[k], edges[k + 1])
    for k in range(S):
        out += np.asarray(acc[k])
    return out
