# Declarations of the vectorised element-wise maps in src/fk_maps.h.
from libc.stdint cimport uint32_t, uint64_t

cdef extern from "fk_maps.h" nogil:
    int FK_MAX_SEG
    void fk_vexp_d(double *x, Py_ssize_t n, double scale)
    void fk_vexp_f(float *x, Py_ssize_t n, float scale)
    int fk_rbf_dot_d(const double *g, double *out, const double *yn, double xn,
                     double gamma, Py_ssize_t n)
    int fk_rbf_dot_f(const double *g, float *out, const double *yn, double xn,
                     double gamma, Py_ssize_t n)
    void fk_dot_tile_d(const double *xc, Py_ssize_t d, const double *yct, Py_ssize_t ld,
                       Py_ssize_t bi, Py_ssize_t bj, double *g, Py_ssize_t ldo)
    void fk_dot_tile(const double *xc, Py_ssize_t d, const double *yct, Py_ssize_t ld,
                     Py_ssize_t bi, Py_ssize_t bj, double *g, Py_ssize_t ldo, int wide)
    int fk_dot_level()
    void fk_sqdist_row_d(const double *x, const double *yt, Py_ssize_t ld, Py_ssize_t d,
                         Py_ssize_t n, double *out)
    void fk_sqdist_row_f(const float *x, const float *yt, Py_ssize_t ld, Py_ssize_t d,
                         Py_ssize_t n, float *out)
    void fk_l1dist_row_d(const double *x, const double *yt, Py_ssize_t ld, Py_ssize_t d,
                         Py_ssize_t n, double *out)
    void fk_l1dist_row_f(const float *x, const float *yt, Py_ssize_t ld, Py_ssize_t d,
                         Py_ssize_t n, float *out)
    void fk_ipow_d(double *g, Py_ssize_t n, double gamma, double coef0, long degree)
    void fk_ipow_f(float *g, Py_ssize_t n, float gamma, float coef0, long degree)
    void fk_affine_d(double *g, Py_ssize_t n, double gamma, double coef0)
    void fk_affine_f(float *g, Py_ssize_t n, float gamma, float coef0)
    int fk_any_nonfinite_d(const double *x, Py_ssize_t n)
    int fk_any_nonfinite_f(const float *x, Py_ssize_t n)
    uint64_t fk_max_abs_bits_d(const double *x, Py_ssize_t n)
    uint32_t fk_max_abs_bits_f(const float *x, Py_ssize_t n)
    # The kind codes of every compiled loop (FK_KINDS in fk_maps.h): one numbering.
    # Only the kinds the Cython code names are declared; fk_kind_name gives all.
    enum:
        K_LINEAR "FK_K_LINEAR"
        K_POLY "FK_K_POLY"
        K_RBF "FK_K_RBF"
        K_LAPLACIAN "FK_K_LAPLACIAN"
        K_SIGMOID "FK_K_SIGMOID"
        K_EXPONENTIAL "FK_K_EXPONENTIAL"
        K_LAPLACIAN_L2 "FK_K_LAPLACIAN_L2"
        K_BESSEL "FK_K_BESSEL"
        K_ANOVA "FK_K_ANOVA"
        K_SPLINE "FK_K_SPLINE"
        K_ADDITIVE_CHI2 "FK_K_ADDITIVE_CHI2"
        K_CHI2 "FK_K_CHI2"
        FK_N_KINDS
        FK_INNER
        FK_SQDIST
        FK_L1
        FK_FEATUREWISE
    const char *fk_kind_name(int kind)
    int fk_kind_geometry(int kind)
    # The slots of the one parameter array every loop reads (FK_PARAMS in fk_maps.h).
    enum:
        FK_P_GAMMA
        FK_P_COEF0
        FK_P_DEGREE
        FK_P_ORDER
        FK_P_LOG_GAMMA
        FK_N_PARAMS
    const char *fk_param_name(int slot)
    double fk_param_default(int slot)
    void fk_sqdist_map_d(double *g, Py_ssize_t n, int kind, const double *params)
    void fk_sqdist_map_f(float *g, Py_ssize_t n, int kind, const double *params)
