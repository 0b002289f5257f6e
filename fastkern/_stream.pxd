# Streaming stores of finished Gram tiles (src/fk_stream.h), shared by the
# dense and sparse Gram paths; cached: ordinary stores (a small Gram its
# caller reads back at once).
from cython cimport floating

cdef extern from "fk_stream.h" nogil:
    void fk_stream_tile_d(const double *buf, Py_ssize_t ldb, double *K, Py_ssize_t ldk,
                          Py_ssize_t bi, Py_ssize_t bj, double *scratch, int transpose,
                          int cached)
    void fk_stream_tile_f(const float *buf, Py_ssize_t ldb, float *K, Py_ssize_t ldk,
                          Py_ssize_t bi, Py_ssize_t bj, float *scratch, int transpose,
                          int cached)
    void fk_store_fence()


cdef inline void stream_tile(const floating *buf, Py_ssize_t ldb, floating *K, Py_ssize_t ldk,
                             Py_ssize_t bi, Py_ssize_t bj, floating *scratch,
                             bint transpose, bint cached) noexcept nogil:
    if floating is double:
        fk_stream_tile_d(buf, ldb, K, ldk, bi, bj, scratch, transpose, cached)
    else:
        fk_stream_tile_f(buf, ldb, K, ldk, bi, bj, scratch, transpose, cached)
