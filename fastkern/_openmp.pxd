cdef extern from "fk_openmp.h" nogil:
    int FK_HAVE_OPENMP
    int omp_get_max_threads()
    int omp_get_thread_num()
    int omp_get_num_threads()
