"""Helpers shared by the tests and the benchmarks (not part of the public API)."""
import functools
import signal
import threading
import time
import tracemalloc

import numpy as np

__all__ = ["have_kernlab", "least_time_to_interrupt", "raised", "rerun_r_script",
           "same_on_threads_and_layouts", "time_to_interrupt", "tracemalloc_peak"]


def tracemalloc_peak(fn):
    """(result, peak bytes allocated through Python/NumPy while fn runs)."""
    was_tracing = tracemalloc.is_tracing()
    if not was_tracing:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    try:
        result = fn()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        if not was_tracing:
            tracemalloc.stop()
    return result, peak


def time_to_interrupt(fn, delay=0.3):
    """Run fn(), send SIGINT to the main thread after `delay` seconds.

    Returns the seconds from the signal to the KeyboardInterrupt, or None if
    fn finished first (then any pending signal is absorbed here).
    """
    if threading.current_thread() is not threading.main_thread():
        raise RuntimeError("time_to_interrupt must run in the main thread (signals go there)")
    main = threading.get_ident()
    state = {}

    def fire():
        state["fired"] = time.perf_counter()
        signal.pthread_kill(main, signal.SIGINT)

    timer = threading.Timer(delay, fire)
    try:
        timer.start()
        fn()
        state["done"] = True
        timer.cancel()
        timer.join(timeout=10)
        if "fired" in state:
            time.sleep(1.0)  # a signal that arrived after fn returned raises here
        return None
    except KeyboardInterrupt:
        caught = time.perf_counter()
        timer.join(timeout=10)
        if state.get("done"):
            return None
        return caught - state["fired"]


def least_time_to_interrupt(fn, bound, tries=3, delay=0.3):
    """time_to_interrupt(fn, delay), tried again while over `bound`, at most `tries` times.

    Returns the first latency under `bound`, else the smallest one seen, or
    None as soon as fn finishes before the signal.  A burst of load on a
    shared machine can delay one try past the bound; a loop that does not
    check for Ctrl-C fails every try.
    """
    least = None
    for _ in range(tries):
        latency = time_to_interrupt(fn, delay=delay)
        if latency is None:
            return None
        least = latency if least is None else min(least, latency)
        if least < bound:
            break
    return least


def raised(fn):
    """The exception fn() raises, or None: for comparing errors with scikit-learn's."""
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the exception itself is compared
        return e
    return None


@functools.lru_cache(maxsize=None)
def have_kernlab():
    """Whether Rscript with R's kernlab is on this machine (CI has neither).

    Asked once per process: each test module asks at collection, and one
    Rscript start took 6 s on a loaded machine."""
    import shutil
    import subprocess

    if shutil.which("Rscript") is None:
        return False
    proc = subprocess.run(["Rscript", "-e", "quit(status = !requireNamespace('kernlab'))"],
                          capture_output=True, timeout=120)
    return proc.returncode == 0


def rerun_r_script(script, out):
    """Run a tests/data/make_*_refs.R script writing `out`, and return the JSON it wrote."""
    import json
    import subprocess

    subprocess.run(["Rscript", str(script), str(out)], check=True, capture_output=True,
                   timeout=300)
    return json.loads(out.read_text())


def same_on_threads_and_layouts(est, method, X):
    """Assert that ``getattr(est, method)(X)`` is the same array on 1, 2 and 3 threads
    (``n_threads``) and for X Fortran-ordered or strided, read-only; return it."""
    ref = getattr(est.set_params(n_threads=1), method)(X)
    for n_threads in (2, 3):
        np.testing.assert_array_equal(getattr(est.set_params(n_threads=n_threads), method)(X),
                                      ref)
    wide = np.zeros((X.shape[0], 2 * X.shape[1]), dtype=X.dtype)
    wide[:, ::2] = X
    for other in (np.asfortranarray(X), wide[:, ::2]):
        other.flags.writeable = False
        np.testing.assert_array_equal(getattr(est, method)(other), ref)
    return ref
