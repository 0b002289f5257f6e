cdef class Batches:
    cdef Py_ssize_t n, start, stop, size, min_size
    cdef double target, t_last
    cdef bint started
    cdef bint next(self) except -1
