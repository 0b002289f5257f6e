# Shared declarations of the Gram tile kernel, cimported by _matfree.pyx.
from cython cimport floating
from libc.math cimport pow, tanh

from fastkern._maps cimport (
    FK_MAX_SEG, fk_affine_d, fk_affine_f, fk_ipow_d, fk_ipow_f, fk_vexp_d, fk_vexp_f,
    K_LINEAR, K_POLY, K_RBF, K_LAPLACIAN, K_SIGMOID, K_EXPONENTIAL, K_LAPLACIAN_L2, K_BESSEL,
    FK_INNER, FK_SQDIST, FK_L1, fk_kind_geometry, FK_P_GAMMA, FK_P_COEF0, FK_P_DEGREE,
    FK_P_ORDER, FK_N_PARAMS,
)

# A kernel as the tile loops read it: its kind and parameter array (FK_PARAMS
# of src/fk_maps.h), with what the maps derive from them once per call.
cdef struct KernelMap:
    int kind
    const double *params
    double gamma      # the slots the inlined maps read, copied out of params
    double coef0
    double degree
    long idegree      # degree as an integer when it is one, else 0
    bint direct       # fused distance loop (narrow data) instead of BLAS inner products
    double order      # Bessel: the order nu of J_nu
    double lognorm    # Bessel: log(Gamma(nu + 1) 2^nu), which makes k(x, x) = 1

cdef KernelMap make_map(int kind, const double[::1] params, bint direct) except *

cdef void map_dist(double *g, Py_ssize_t n, const KernelMap *spec) noexcept nogil


cdef inline void sqdist_from_dot(double *g, const double *yn, double xn,
                                 Py_ssize_t n) noexcept nogil:
    """g[j] = |x|^2 + |y_j|^2 - 2 g[j], or -1 where that cancelled (the rule of
    fk_rbf_dot: below FK_RECOMPUTE of |x|^2 + |y_j|^2), for the caller to
    recompute directly."""
    cdef Py_ssize_t j
    cdef double s, d2
    for j in range(n):
        s = xn + yn[j]
        d2 = s - 2.0 * g[j]
        g[j] = -1.0 if d2 < s * (1.0 / 16) else d2

cdef void gram_tile(const floating *X, const floating *Y, const floating *Yt,
                    Py_ssize_t ldyt, Py_ssize_t d,
                    const double *Xc, const double *Yc, const double *Yct,
                    const double *xn, const double *yn,
                    floating *out, Py_ssize_t ldo, double *dtile,
                    Py_ssize_t bi, Py_ssize_t bj,
                    const KernelMap *spec, bint diag) noexcept nogil

# Copy K[i0:i1, j0:j1] into K[j0:j1, i0:i1] transposed (upper part only if
# diag): completes a diagonal tile, of which gram_tile fills j >= i.
cdef void mirror_block(floating *K, Py_ssize_t ld, Py_ssize_t i0, Py_ssize_t i1,
                       Py_ssize_t j0, Py_ssize_t j1, bint diag) noexcept nogil

cdef inline void map_dot(floating *g, Py_ssize_t n, const KernelMap *spec) noexcept nogil:
    """Inner products -> kernel values in place (linear, poly, sigmoid, exponential):
    the rule of the BLAS tile path, shared by _gram and _sparse."""
    cdef Py_ssize_t j, j0, len_
    cdef int kind = spec.kind
    if kind == K_LINEAR:
        return
    if kind == K_EXPONENTIAL:
        if floating is double:
            fk_vexp_d(g, n, spec.gamma)
        else:
            fk_vexp_f(g, n, <float> spec.gamma)
    elif kind == K_POLY and spec.idegree > 0:
        # fk_ipow keeps a stack buffer of FK_MAX_SEG values.
        j0 = 0
        while j0 < n:
            len_ = min(<Py_ssize_t> FK_MAX_SEG, n - j0)
            if floating is double:
                fk_ipow_d(g + j0, len_, spec.gamma, spec.coef0, spec.idegree)
            else:
                fk_ipow_f(g + j0, len_, <float> spec.gamma, <float> spec.coef0, spec.idegree)
            j0 += len_
    else:
        if floating is double:
            fk_affine_d(g, n, spec.gamma, spec.coef0)
        else:
            fk_affine_f(g, n, <float> spec.gamma, <float> spec.coef0)
        if kind == K_POLY:
            for j in range(n):
                g[j] = pow(g[j], spec.degree)
        else:
            for j in range(n):
                g[j] = tanh(g[j])
