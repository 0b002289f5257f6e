# Shared declarations of the Gram tile kernel, cimported by _matfree.pyx.
from cython cimport floating

cdef enum:
    K_LINEAR = 0
    K_POLY = 1
    K_RBF = 2
    K_LAPLACIAN = 3
    K_SIGMOID = 4
    K_EXPONENTIAL = 5

cdef struct KernelSpec:
    int kind
    double gamma
    double coef0
    double degree
    long idegree      # degree as an integer when it is one, else 0
    bint direct       # fused distance loop (narrow data) instead of BLAS inner products

cdef KernelSpec make_spec(int kind, double gamma, double coef0, double degree,
                          bint direct) noexcept nogil

cdef void gram_tile(const floating *X, const floating *Y, const floating *Yt,
                    Py_ssize_t ldyt, Py_ssize_t d,
                    const double *Xc, const double *Yc,
                    const double *xn, const double *yn,
                    floating *out, Py_ssize_t ldo, double *dtile,
                    Py_ssize_t bi, Py_ssize_t bj,
                    const KernelSpec *spec, bint diag) noexcept nogil

cdef void row_sq_norms(const floating *X, Py_ssize_t n, Py_ssize_t d, double *xn,
                       int n_threads) noexcept nogil
