"""Whether this build has OpenMP, and the default thread count it would use."""
from fastkern._openmp cimport FK_HAVE_OPENMP, omp_get_max_threads


def openmp_enabled():
    return bool(FK_HAVE_OPENMP)


def max_threads():
    """OpenMP's default team size (honours OMP_NUM_THREADS); 1 without OpenMP."""
    return omp_get_max_threads()
