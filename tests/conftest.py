"""Suite-wide settings: Ctrl-C handling, and thread counts for parallel runs (pytest -n)."""
import os
import signal


def pytest_configure(config):
    # A shell starts a background job (`cmd &`, nohup) with SIGINT ignored,
    # and Python then installs no KeyboardInterrupt handler: the tests that
    # send themselves SIGINT (test_interrupt.py) would wait for a Ctrl-C that
    # never comes.  Restored here, in every xdist worker too, and so for the
    # subprocesses the tests start.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # Each xdist worker gets its share of the cores for OpenMP and BLAS, as in
    # scikit-learn's conftest: N workers each starting one thread per core
    # would run N times as many threads as cores, and threads that spin while
    # waiting for work (OpenMP's and OpenBLAS's) then slow every test down.
    # Tests that pass n_threads explicitly still get what they ask for.
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not workers:
        return
    from joblib import cpu_count
    from threadpoolctl import threadpool_limits

    # Loaded first, so that the limit reaches their OpenMP and BLAS libraries.
    import fastkern._openmp  # noqa: F401
    import scipy.linalg  # noqa: F401

    threadpool_limits(max(cpu_count() // int(workers), 1))
