"""Thread limits for the BLAS/LAPACK calls fastkern makes.

OpenMP regions call gemm from every thread, so BLAS must run on one thread
there (no nested oversubscription); estimators hold BLAS/LAPACK to their
``n_threads`` so that one parameter bounds all the threads they use.
"""
import contextlib
import functools
import numbers
import os
import threading

_controller = None
_controller_lock = threading.Lock()


@functools.lru_cache(maxsize=None)
def default_n_threads():
    """Threads used for n_threads=None, as scikit-learn's _openmp_effective_n_threads.

    OMP_NUM_THREADS, when set, wins.  Otherwise OpenMP's default (all CPUs in
    this process's affinity mask) capped by joblib's cpu_count, which also
    honours a container's CPU quota (cgroups): a container limited to 2 CPUs
    on a 64-core host must not start 64 threads.  Cached: neither changes
    while a process runs.
    """
    from fastkern import _openmp

    n = _openmp.max_threads()
    if not os.environ.get("OMP_NUM_THREADS"):
        from joblib import cpu_count

        n = min(n, cpu_count())
    return max(1, n)


def blas_limit(n_threads):
    """Context manager limiting BLAS/LAPACK to n_threads (None: leave as is)."""
    global _controller
    if n_threads is None:
        return contextlib.nullcontext()
    with _controller_lock:
        if _controller is None:
            # Built once: inspecting the loaded libraries costs milliseconds.
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController()
    return _controller.limit(limits=n_threads, user_api="blas")


def limits_blas(method):
    """Run an estimator method with BLAS/LAPACK held to ``self.n_threads``."""

    @functools.wraps(method)
    def wrapped(self, *args, **kwargs):
        n_threads = self.n_threads
        # An invalid n_threads runs unlimited here: the method's parameter
        # validation rejects it with the estimator's message.
        valid = (isinstance(n_threads, numbers.Integral)
                 and not isinstance(n_threads, bool) and n_threads >= 1)
        with blas_limit(int(n_threads) if valid else None):
            return method(self, *args, **kwargs)

    return wrapped
