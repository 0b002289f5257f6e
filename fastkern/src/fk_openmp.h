/* OpenMP behind one #ifdef so the package builds and runs serially without it
   and can report which happened. */
#ifndef FK_OPENMP_H
#define FK_OPENMP_H
#ifdef _OPENMP
#include <omp.h>
#define FK_HAVE_OPENMP 1
#else
#define FK_HAVE_OPENMP 0
static inline int omp_get_max_threads(void) { return 1; }
static inline int omp_get_thread_num(void) { return 0; }
static inline int omp_get_num_threads(void) { return 1; }
#endif
#endif
