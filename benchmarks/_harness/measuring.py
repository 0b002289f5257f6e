"""Time and peak memory of one call, each measurement in a fresh process.

Peak memory is the increase of the process's peak resident set size over its
resident size just before the call, measured in a fresh process per
measurement: the peak-RSS counter of the child is reset through
``/proc/self/clear_refs`` (Linux), so it sees everything the call touches,
BLAS/LAPACK work space included.  Where that counter cannot be reset the
harness falls back to tracemalloc, which sees only allocations made through
Python and NumPy; :func:`memory_method` says which one is in use.

With n_threads set, BLAS is held to the same number of threads for every
implementation (:func:`blas_threads`).
"""
import contextlib
import math
import multiprocessing
import time

from fastkern._testing import tracemalloc_peak

from _harness.tasks import N_FEATURES, build

# The child processes import these once, in the fork server, so that each
# measurement starts in milliseconds instead of re-importing SciPy/sklearn.
_PRELOAD = [
    "numpy",
    "scipy.linalg",
    "threadpoolctl",
    "fastkern",
    "fastkern.decomposition",
    "fastkern.kernel_ridge",
    "sklearn.decomposition",
    "sklearn.kernel_ridge",
    "sklearn.metrics.pairwise",
    "sklearn.preprocessing",
    "_harness",
    # Optional peers: the fork server skips those that are not installed.
    "numexpr",
    "numba",
]



# ---------------------------------------------------------------- memory


def _proc_status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
    raise OSError(f"{key} not in /proc/self/status")


def _reset_peak_rss():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def memory_method():
    """"rss" when the peak RSS can be reset (Linux), else "tracemalloc"."""
    try:
        _proc_status("VmHWM:")
        _reset_peak_rss()
    except OSError:
        return "tracemalloc"
    return "rss"


def rss_peak(fn):
    """(seconds, peak RSS increase in bytes) of one call of fn.

    The peak is read while fn's result is still alive.  The kernel keeps
    RSS in per-CPU counters and reads the high-water mark from them without
    summing exactly when memory is unmapped, so a peak recorded when a
    result is freed can fall short by up to 32 pages per CPU (a 1000 x 1000
    float64 Gram was once measured at 7,995,392 bytes, under its 8,000,000).  VmHWM is the
    larger of that mark and the exact current RSS, so with the result alive
    everything the result holds is counted exactly; only memory that fn
    allocated and freed itself (temporaries) carries the per-CPU slack.
    """
    base = _proc_status("VmRSS:")
    _reset_peak_rss()
    t0 = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - t0
    peak = _proc_status("VmHWM:") - base
    del result
    return elapsed, max(0, peak)


# ---------------------------------------------------------------- timing


def best_time(fn, *, min_time=0.2, max_repeat=5):
    """Fastest of up to max_repeat calls (at least one), stopping once min_time has been spent."""
    times = []
    spent = 0.0
    while len(times) < max_repeat and (not times or spent < min_time):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
        spent += times[-1]
    return min(times), len(times)


@contextlib.contextmanager
def blas_threads(n_threads):
    """Hold BLAS to n_threads (None: leave it alone) so every implementation gets the same cores."""
    if n_threads is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=n_threads, user_api="blas"):
        yield


def measure_here(task, impl, n, *, d=N_FEATURES, n_threads=None, min_time=0.2,
                 max_repeat=5, method=None):
    """Time and peak memory of one (task, impl, n) in the current process."""
    method = memory_method() if method is None else method
    with blas_threads(n_threads):
        # A tiny warm-up run performs the lazy imports and starts the thread
        # pools, whose memory would otherwise count against the first task.
        build(task, impl, min(n, 48), d=d, n_threads=n_threads)()
        fn = build(task, impl, n, d=d, n_threads=n_threads)
        # The first full-size call gives the peak memory and is not timed.
        # It faults in fresh pages for its output, and how long that takes
        # depends on the machine, not on the implementation: on the 2-core
        # VM of issue 11, whose free pages go back to the host (virtio-balloon
        # free page reporting), faulting in a new 512 MB Gram took 0.66-2.05 s of
        # kernel time when the pages had been returned, 0.05 s when they had
        # not, against 0.14 s for fastkern's whole Gram, and a Gram after a
        # 5 s pause was as slow as one after numba's.  Timing that call made
        # fastkern vs numba swing from 0.36x to 3.4x.  The timed calls still
        # allocate their output on every call (no out=), as a user's calls
        # do, and every implementation is measured the same way.
        if method == "rss":
            _, peak = rss_peak(fn)
        else:
            _, peak = tracemalloc_peak(fn)
        seconds, repeats = best_time(fn, min_time=min_time, max_repeat=max_repeat)
    return {
        "task": task, "impl": impl, "n": n, "d": d, "n_threads": n_threads,
        "time_s": seconds, "repeats": repeats, "peak_bytes": int(peak),
        "memory_method": method,
    }


def _child(conn, args, kwargs):
    try:
        conn.send(("ok", measure_here(*args, **kwargs)))
    except BaseException as exc:  # sent to the parent, which raises it
        # A parent stopped by Ctrl-C has closed its end: nobody to tell.
        with contextlib.suppress(OSError):
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


_context = None


def _mp_context():
    global _context
    if _context is None:
        if "forkserver" in multiprocessing.get_all_start_methods():
            _context = multiprocessing.get_context("forkserver")
            _context.set_forkserver_preload(_PRELOAD)
        else:
            _context = multiprocessing.get_context("spawn")
    return _context


class MeasurementError(RuntimeError):
    """A measurement failed in its child process."""


def measure(task, impl, n, *, d=N_FEATURES, n_threads=None, min_time=0.2, max_repeat=5):
    """Time and peak memory of one (task, impl, n) in a fresh process.

    Returns a dict with time_s (fastest call), repeats, peak_bytes and
    memory_method.  A fresh process per measurement keeps one task's heap
    growth and cached pools out of the next one's peak.
    """
    ctx = _mp_context()
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(
        target=_child,
        args=(child, (task, impl, n),
              {"d": d, "n_threads": n_threads, "min_time": min_time, "max_repeat": max_repeat}),
    )
    try:
        # start() is inside: the first one launches the fork server, which
        # takes seconds to import its preloads, long enough to be Ctrl-C'd.
        proc.start()
        child.close()
        status, payload = parent.recv()
    except EOFError:
        proc.join()
        raise MeasurementError(
            f"{task}/{impl} at N={n} died (exit code {proc.exitcode}); out of memory?"
        ) from None
    except BaseException:
        # Ctrl-C in the parent: the child would run on after the parent has
        # gone, and the parent's exit would wait for it.
        if proc.pid is not None:
            proc.kill()
            proc.join()
        raise
    finally:
        parent.close()
    proc.join()
    if status != "ok":
        raise MeasurementError(f"{task}/{impl} at N={n}: {payload}")
    return payload



def side_by_side(fns, *, rounds=3, settle=0.0):
    """Fastest time of each named callable, calls interleaved round by round so
    that load from other processes hits every contestant alike.

    settle: seconds to wait before each timed call.  OpenBLAS's worker
    threads keep spinning for about 0.1 s after a BLAS or LAPACK call, so a
    call started at once shares a core with them: fastkern's KernelPCA fit
    at N=8000 took 0.31-0.64 s right after scikit-learn's arpack fit, and
    0.25-0.28 s after a pause (2 cores).  Waiting lets each contestant start
    from the same quiet state instead of paying for the one before it.
    """
    best = {name: math.inf for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            if settle:
                time.sleep(settle)
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best
