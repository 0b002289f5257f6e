cdef class Batches:
    cdef Py_ssize_t n, start, stop, size, min_size
    # Threads the current batch may use: 1 until the work measured so far
    # says the rest is worth a parallel region, then max_threads.
    cdef public int threads
    cdef int max_threads
    cdef double target, t_last
    cdef public double serial_below
    # A serial batch shorter than this (seconds) does not decide for threads.
    cdef public double min_decide
    cdef bint started
    cdef bint next(self) except -1
