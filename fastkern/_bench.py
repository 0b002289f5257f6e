"""Timing and peak-memory harness shared by ``fastkern bench`` and benchmarks/.

Four tasks (RBF Gram, double centering of a given Gram, KernelPCA from X,
KernelRidge fit from X) are each implemented four ways:

- naive: the Gram by a Python double loop over ``np.ndindex``, one kernel
  call per entry, then plain NumPy (full ``eigh``, ``solve``); centering is
  the textbook H K H with H = I - 11^T/n;
- numpy: vectorised NumPy (in-place updates of one N x N array);
- sklearn: scikit-learn (KernelPCA with eigen_solver="arpack");
- fastkern.

With n_threads set, BLAS is held to the same number of threads for every
implementation.

Peers (:data:`PEERS`), each run only when its package is importable: the
RBF Gram a user would otherwise write with numba (a parallel jitted loop),
numexpr (BLAS X X^T, then one numexpr expression) and, for the product
K @ V with V of :data:`MATVEC_COLUMNS` columns ("matvec"), pykeops on the
CPU, a reduction library that never materialises the Gram, against
fastkern's matrix-free product.  JIT compilation (numba) and pykeops' C++
build happen in the untimed warm-up run of each measurement.

Peak memory is the increase of the process's peak resident set size over its
resident size just before the call, measured in a fresh process per
measurement: the peak-RSS counter of the child is reset through
``/proc/self/clear_refs`` (Linux), so it sees everything the call touches,
BLAS/LAPACK work space included.  Where that counter cannot be reset the
harness falls back to tracemalloc, which sees only allocations made through
Python and NumPy; :func:`memory_method` says which one is in use.
"""
import contextlib
import json
import math
import multiprocessing
import os
import sys
import time
import tracemalloc

import numpy as np

TASKS = ("gram", "center", "kpca", "ridge")
TASK_TITLES = {
    "gram": "RBF Gram",
    "center": "centering",
    "kpca": "KernelPCA",
    "ridge": "KernelRidge",
    "matvec": "RBF K @ V",
}
IMPLS = ("naive", "numpy", "sklearn", "fastkern")
PEERS = ("numba", "numexpr", "pykeops")
# The tasks each peer implements.  pykeops has no dense-Gram output: its
# natural use, and the honest comparison, is the kernel product K @ V.
PEER_TASKS = {"numba": ("gram",), "numexpr": ("gram",), "pykeops": ("matvec",)}
MATVEC_COLUMNS = 5
N_FEATURES = 16
N_COMPONENTS = 5
RIDGE_ALPHA = 1.0

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
    "fastkern._bench",
    # Optional peers: the fork server skips those that are not installed.
    "numexpr",
    "numba",
]


# ---------------------------------------------------------------- data


def make_data(n, d=N_FEATURES, *, dtype=np.float64, seed=0):
    """Standard normal features and a smooth noisy target."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(dtype, copy=False)
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.standard_normal(n)
    return X, y


# ---------------------------------------------------------------- reference implementations


def naive_rbf_gram(X, gamma):
    """The classic double loop: one Python-level kernel call per entry."""
    N = X.shape[0]

    def kernel(x, z):
        return np.exp(-gamma * np.sum((x - z) ** 2))

    K = np.empty((N, N))
    for i, j in np.ndindex(N, N):
        K[i, j] = kernel(X[i], X[j])
    return K


def numpy_rbf_gram(X, gamma):
    """exp(-gamma (|x|^2 + |z|^2 - 2 x.z)) with one N x N array, updated in place."""
    sq = np.einsum("ij,ij->i", X, X)
    K = X @ X.T
    K *= -2.0
    K += sq[:, None]
    K += sq[None, :]
    np.maximum(K, 0.0, out=K)
    K *= -gamma
    np.exp(K, out=K)
    return K


def textbook_center(K):
    """H K H with the centering matrix H = I - 11^T/n (two N^3 products)."""
    n = K.shape[0]
    H = np.eye(n) - 1.0 / n
    return H @ K @ H


def numpy_center(K):
    """K - column means - row means + grand mean, by broadcasting, in place."""
    col = K.mean(axis=0)
    row = K.mean(axis=1)
    grand = col.mean()
    K -= col[None, :]
    K -= row[:, None]
    K += grand
    return K


def numpy_kpca(Kc, n_components):
    """Top eigenpairs of a centred Gram by a full symmetric eigendecomposition."""
    vals, vecs = np.linalg.eigh(Kc)
    vals = vals[::-1][:n_components]
    vecs = vecs[:, ::-1][:, :n_components]
    return vecs * np.sqrt(np.maximum(vals, 0.0))


def numpy_ridge(K, y, alpha):
    """Dual coefficients (K + alpha I)^-1 y."""
    K.flat[:: K.shape[0] + 1] += alpha
    return np.linalg.solve(K, y)


# ---------------------------------------------------------------- peers
# What a competent user would write with each package.  Imports are lazy:
# every peer is optional.

_numba_functions = None


def _numba_kernels():
    """The jitted RBF Gram functions, compiled on first call (cached on disk)."""
    global _numba_functions
    if _numba_functions is None:
        import numba

        @numba.njit(parallel=True, fastmath=False, cache=True)
        def loop(X, gamma):
            n, d = X.shape
            K = np.empty((n, n))
            for i in numba.prange(n):
                for j in range(n):
                    s = 0.0
                    for k in range(d):
                        t = X[i, k] - X[j, k]
                        s += t * t
                    K[i, j] = np.exp(-gamma * s)
            return K

        @numba.njit(parallel=True, fastmath=False, cache=True)
        def dot(X, gamma):
            n = X.shape[0]
            sq = np.empty(n)
            for i in range(n):
                sq[i] = np.dot(X[i], X[i])
            K = np.dot(X, X.T)
            for i in numba.prange(n):
                for j in range(n):
                    K[i, j] = np.exp(-gamma * max(sq[i] + sq[j] - 2.0 * K[i, j], 0.0))
            return K

        _numba_functions = {"loop": loop, "dot": dot}
    return _numba_functions


# The numba variant `fastkern bench` runs: of the two above, the faster at
# N=8000 d=16 on 2 cores (the BLAS product plus a parallel exp pass).
NUMBA_VARIANT = "dot"


def numba_rbf_gram(X, gamma, *, variant=NUMBA_VARIANT):
    """RBF Gram by a numba-jitted parallel loop (prange over rows).

    variant "loop": the direct triple loop, sum over features of (x - z)^2;
    "dot": |x|^2 + |z|^2 - 2 x.z with the product by np.dot (BLAS).
    """
    return _numba_kernels()[variant](np.ascontiguousarray(X, dtype=np.float64), float(gamma))


def numexpr_rbf_gram(X, gamma):
    """BLAS X X^T, then exp(-gamma (|x|^2 + |z|^2 - 2 x.z)) by numexpr, in place."""
    import numexpr

    sq = np.einsum("ij,ij->i", X, X)
    C = X @ X.T
    return numexpr.evaluate("exp(-g * (a + b - 2.0 * C))", out=C,
                            local_dict={"a": sq[:, None], "b": sq[None, :], "C": C,
                                        "g": float(gamma)})


def _pykeops_lazy_tensor():
    # pykeops prints to stdout on import (no CUDA found) and when it builds a
    # formula; that would land in the middle of the bench table.
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        import pykeops
        from pykeops.numpy import LazyTensor

    pykeops.set_verbose(False)
    return LazyTensor


def pykeops_rbf_matvec(X, V, gamma):
    """K @ V by pykeops LazyTensors on the CPU: the Gram is never stored."""
    LazyTensor = _pykeops_lazy_tensor()

    x_i = LazyTensor(X[:, None, :])
    x_j = LazyTensor(X[None, :, :])
    K = (-gamma * ((x_i - x_j) ** 2).sum(-1)).exp()
    return K @ V


def fastkern_rbf_matvec(X, V, gamma, n_threads=None):
    """K @ V by fastkern's matrix-free tile loop (the large-N KernelPCA operator)."""
    from fastkern.large_n import KernelOperator

    return KernelOperator(X, kernel="rbf", gamma=gamma, n_threads=n_threads).matmat(V)


def numpy_rbf_matvec(X, V, gamma):
    """The Gram by scikit-learn, then one BLAS product: N x N memory."""
    from sklearn.metrics.pairwise import rbf_kernel

    return rbf_kernel(X, gamma=gamma) @ V


@contextlib.contextmanager
def peer_threads(impl, n_threads):
    """Hold a peer's own thread pool to n_threads (None: its default)."""
    if n_threads is None:
        yield
        return
    if impl == "numba":
        import numba

        before = numba.get_num_threads()
        numba.set_num_threads(min(n_threads, numba.config.NUMBA_NUM_THREADS))
        try:
            yield
        finally:
            numba.set_num_threads(before)
    elif impl == "numexpr":
        import numexpr

        before = numexpr.set_num_threads(n_threads)
        try:
            yield
        finally:
            numexpr.set_num_threads(before)
    elif impl == "pykeops":
        # KeOps' CPU reductions are OpenMP loops with the default team size.
        from threadpoolctl import threadpool_limits

        with threadpool_limits(limits=n_threads, user_api="openmp"):
            yield
    else:
        yield


def peer_status():
    """{peer: None if its package is installed, else why it is skipped}."""
    import importlib.util

    status = {}
    for name in PEERS:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        status[name] = None if found else f"not installed (pip install {name})"
    return status


# ---------------------------------------------------------------- tasks


def build(task, impl, n, *, d=N_FEATURES, n_threads=None):
    """A zero-argument callable running `task` with `impl` on fresh data of n rows.

    The inputs (and, for the centering task, the Gram matrix) are prepared
    here, outside what is timed.
    """
    if task not in TASKS + ("matvec",):
        raise ValueError(f"task must be one of {TASKS + ('matvec',)}, got {task!r}")
    if impl not in IMPLS + PEERS:
        raise ValueError(f"impl must be one of {IMPLS + PEERS}, got {impl!r}")
    X, y = make_data(n, d)
    gamma = 1.0 / d

    if impl in PEERS or task == "matvec":
        return _build_peer(task, impl, X, gamma, n_threads)

    if task == "gram":
        if impl == "naive":
            return lambda: naive_rbf_gram(X, gamma)
        if impl == "numpy":
            return lambda: numpy_rbf_gram(X, gamma)
        if impl == "sklearn":
            from sklearn.metrics.pairwise import rbf_kernel
            return lambda: rbf_kernel(X, gamma=gamma)
        from fastkern import rbf_kernel
        return lambda: rbf_kernel(X, gamma=gamma, n_threads=n_threads)

    if task == "center":
        from fastkern import rbf_kernel
        K = rbf_kernel(X, gamma=gamma)
        if impl == "naive":
            return lambda: textbook_center(K)
        if impl == "numpy":
            return lambda: numpy_center(K)
        if impl == "sklearn":
            from sklearn.preprocessing import KernelCenterer
            return lambda: KernelCenterer().fit_transform(K)
        from fastkern import center_gram
        return lambda: center_gram(K, n_threads=n_threads)

    if task == "kpca":
        if impl in ("naive", "numpy"):
            gram = naive_rbf_gram if impl == "naive" else numpy_rbf_gram
            return lambda: numpy_kpca(numpy_center(gram(X, gamma)), N_COMPONENTS)
        if impl == "sklearn":
            from sklearn.decomposition import KernelPCA
            est = KernelPCA(n_components=N_COMPONENTS, kernel="rbf", gamma=gamma,
                            eigen_solver="arpack", random_state=0)
            return lambda: est.fit_transform(X)
        from fastkern.decomposition import KernelPCA
        est = KernelPCA(n_components=N_COMPONENTS, kernel="rbf", gamma=gamma,
                        n_threads=n_threads, random_state=0)
        return lambda: est.fit_transform(X)

    if impl in ("naive", "numpy"):
        gram = naive_rbf_gram if impl == "naive" else numpy_rbf_gram
        return lambda: numpy_ridge(gram(X, gamma), y, RIDGE_ALPHA)
    if impl == "sklearn":
        from sklearn.kernel_ridge import KernelRidge
        est = KernelRidge(alpha=RIDGE_ALPHA, kernel="rbf", gamma=gamma)
        return lambda: est.fit(X, y)
    from fastkern.kernel_ridge import KernelRidge
    est = KernelRidge(alpha=RIDGE_ALPHA, kernel="rbf", gamma=gamma, n_threads=n_threads)
    return lambda: est.fit(X, y)


def _build_peer(task, impl, X, gamma, n_threads):
    if task not in PEER_TASKS.get(impl, ("matvec",)) or (
            task == "matvec" and impl not in ("pykeops", "sklearn", "fastkern")):
        raise ValueError(f"impl {impl!r} does not implement task {task!r}")
    if task == "matvec":
        V = np.random.default_rng(1).standard_normal((X.shape[0], MATVEC_COLUMNS))
        if impl == "fastkern":
            return lambda: fastkern_rbf_matvec(X, V, gamma, n_threads)
        if impl == "sklearn":
            return lambda: numpy_rbf_matvec(X, V, gamma)
        fn = pykeops_rbf_matvec
        args = (X, V, gamma)
    else:
        fn = numba_rbf_gram if impl == "numba" else numexpr_rbf_gram
        args = (X, gamma)

    def run():
        with peer_threads(impl, n_threads):
            return fn(*args)

    return run


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


def _rss_peak(fn):
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



def measure_once(fn):
    """(seconds, peak bytes) of one call: peak RSS where the kernel resets it, else tracemalloc."""
    if memory_method() == "rss":
        return _rss_peak(fn)
    t0 = time.perf_counter()
    _, peak = tracemalloc_peak(fn)
    return time.perf_counter() - t0, peak

def best_time(fn, *, min_time=0.2, max_repeat=5, first=None):
    """Fastest of up to max_repeat calls, stopping once min_time has been spent.

    `first` is the duration of a call already made, counted as the first run.
    """
    times = [] if first is None else [first]
    spent = sum(times)
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
        if method == "rss":
            first, peak = _rss_peak(fn)
        else:
            _, peak = tracemalloc_peak(fn)
            first = None
        seconds, repeats = best_time(fn, min_time=min_time, max_repeat=max_repeat, first=first)
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


# ---------------------------------------------------------------- suite


def plan(sizes, tasks=TASKS, impls=IMPLS):
    """(task, impl, n) triples to run; the naive loop only at the smallest size."""
    smallest = min(sizes)
    return [(task, impl, n) for task in tasks for n in sizes for impl in impls
            if impl != "naive" or n == smallest]


def run_suite(sizes, *, tasks=TASKS, impls=IMPLS, d=N_FEATURES, n_threads=None,
              min_time=0.2, max_repeat=5, progress=None):
    """Measure every planned triple; progress(i, total, task, impl, n) before each."""
    jobs = plan(sizes, tasks, impls)
    results = []
    for i, (task, impl, n) in enumerate(jobs):
        if progress is not None:
            progress(i, len(jobs), task, impl, n)
        results.append(measure(task, impl, n, d=d, n_threads=n_threads,
                               min_time=min_time, max_repeat=max_repeat))
    add_speedups(results)
    return results


def add_speedups(results):
    """speedup_vs_sklearn = sklearn time / this time, for the same task and size."""
    ref = {(r["task"], r["n"]): r["time_s"] for r in results if r["impl"] == "sklearn"}
    for r in results:
        base = ref.get((r["task"], r["n"]))
        r["speedup_vs_sklearn"] = None if base is None else base / r["time_s"]
    return results


def plan_peers(sizes, status):
    """(task, impl, n) of the installed peers, with fastkern's K @ V next to pykeops'."""
    jobs = []
    for n in sizes:
        for peer in PEERS:
            if status.get(peer) is None:
                jobs += [(task, peer, n) for task in PEER_TASKS[peer]]
        if any(t == "matvec" and m == n for t, _, m in jobs):
            jobs.append(("matvec", "fastkern", n))
    return jobs


def run_peers(sizes, results, *, status=None, d=N_FEATURES, n_threads=None, min_time=0.2,
              max_repeat=5, progress=None):
    """Measure the installed peers; (rows, skipped).

    results: run_suite's rows, whose fastkern Gram times the peers' Gram
    times are compared with.  Each row gets fastkern_speedup = its time over
    fastkern's on the same task and size.  skipped maps a peer to the reason
    it did not run: not installed, or its first measurement failed (e.g.
    pykeops without a working C++ compiler).
    """
    status = peer_status() if status is None else dict(status)
    jobs = plan_peers(sizes, status)
    rows = []
    for i, (task, impl, n) in enumerate(jobs):
        if status.get(impl) is not None or (task == "matvec" and status.get("pykeops")):
            continue
        if progress is not None:
            progress(i, len(jobs), task, impl, n)
        try:
            rows.append(measure(task, impl, n, d=d, n_threads=n_threads, min_time=min_time,
                                max_repeat=max_repeat))
        except MeasurementError as exc:
            if impl not in PEERS:
                raise
            status[impl] = f"failed: {exc}"
            rows = [r for r in rows if r["impl"] != impl]
    ref = {(r["task"], r["n"]): r["time_s"] for r in list(results) + rows
           if r["impl"] == "fastkern"}
    for r in rows:
        base = ref.get((r["task"], r["n"]))
        r["fastkern_speedup"] = None if base is None else r["time_s"] / base
    if not any(r["impl"] == "pykeops" for r in rows):
        rows = [r for r in rows if r["task"] != "matvec"]
    skipped = {k: v for k, v in status.items() if v is not None}
    return rows, skipped


PEERS_NOTE = (
    "peers: RBF Gram (N x N, float64) by numba (@njit(parallel=True) loop: BLAS X X^T, then "
    "a prange pass for the exp) and numexpr (BLAS X X^T, then numexpr.evaluate of the exp); "
    f"pykeops cannot store a Gram, so it is timed on K @ V (V: N x {MATVEC_COLUMNS}, LazyTensor "
    "reduction on the CPU) against fastkern's matrix-free product, which also never stores K. "
    "Each peer uses --threads threads; numba's JIT and pykeops' C++ build run in an untimed "
    "warm-up call.")


def format_peers(rows, skipped):
    """The peers' table: time, and how many times faster fastkern is on the same task and N."""
    header = (f"{'task':<12} {'N':>6}  {'implementation':<14} {'time':>10} "
              f"{'fastkern faster':>16} {'peak mem':>10}")
    lines = [header, "-" * len(header)]
    order = PEERS + ("fastkern",)
    for task in ("gram", "matvec"):
        sel = sorted((r for r in rows if r["task"] == task),
                     key=lambda r: (r["n"], order.index(r["impl"])))
        for r in sel:
            sp = r.get("fastkern_speedup")
            sp = "" if sp is None or r["impl"] == "fastkern" else f"{sp:.3g}x"
            lines.append(f"{TASK_TITLES[task]:<12} {r['n']:>6}  {r['impl']:<14} "
                         f"{_fmt_time(r['time_s']):>10} {sp:>16} "
                         f"{_fmt_bytes(r['peak_bytes']):>10}")
        if sel:
            lines.append("")
    if not rows:
        lines.append("(no peer installed)")
    for name in PEERS:
        if name in skipped:
            lines.append(f"skipped {name}: {skipped[name]}")
    return "\n".join(lines).rstrip("\n")


def machine_info(n_threads=None):
    """config_info() plus the thread counts the measurements use and the memory method."""
    from fastkern import config_info

    info = config_info()
    info["n_threads"] = n_threads if n_threads is not None else info["threads"]
    # measure() holds BLAS to n_threads when it is given (see blas_threads).
    info["blas_threads"] = n_threads
    info["memory_method"] = memory_method()
    return info


def describe_machine(info):
    limit = info.get("blas_threads")
    blas = "; ".join(
        f"{b['internal_api']} {b['version']} "
        f"({b['num_threads'] if limit is None else limit} threads)"
        for b in info["blas"]) or "not detected"
    omp = "OpenMP on" if info["openmp"] else "OpenMP off"
    return (f"machine: {info['cores']} cores, {omp}, fastkern threads: {info['n_threads']}, "
            f"BLAS: {blas}\n"
            f"fastkern {info['fastkern']}, python {info['python']}, numpy {info['numpy']}, "
            f"scipy {info['scipy']}")


MEMORY_NOTE = {
    "rss": "peak memory: increase of peak RSS during one call, fresh process per measurement",
    "tracemalloc": ("peak memory: tracemalloc peak during one call (Python/NumPy allocations "
                    "only; BLAS-internal buffers not seen), fresh process per measurement"),
}


def _fmt_time(s):
    if s >= 1.0:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} us"


def _fmt_bytes(b):
    if b >= 1 << 30:
        return f"{b / (1 << 30):.2f} GiB"
    if b >= 1 << 20:
        return f"{b / (1 << 20):.1f} MiB"
    return f"{b / 1024:.0f} KiB"


def format_table(results):
    """A plain-text table: one block per task, one row per (size, implementation)."""
    header = (f"{'task':<12} {'N':>6}  {'implementation':<14} {'time':>10} "
              f"{'vs sklearn':>11} {'peak mem':>10}")
    lines = [header, "-" * len(header)]
    for task in TASKS:
        rows = [r for r in results if r["task"] == task]
        rows.sort(key=lambda r: (r["n"], IMPLS.index(r["impl"])))
        for r in rows:
            sp = r.get("speedup_vs_sklearn")
            sp = "" if sp is None else f"{sp:.3g}x"
            lines.append(f"{TASK_TITLES[task]:<12} {r['n']:>6}  {r['impl']:<14} "
                         f"{_fmt_time(r['time_s']):>10} {sp:>11} {_fmt_bytes(r['peak_bytes']):>10}")
        if rows:
            lines.append("")
    return "\n".join(lines).rstrip("\n")


def write_json(path, results, info, sizes, peers=None):
    """peers: (rows, skipped) of run_peers, stored under "peers"."""
    doc = {"machine": info, "sizes": list(sizes), "n_features": N_FEATURES,
           "n_components": N_COMPONENTS, "ridge_alpha": RIDGE_ALPHA, "results": results}
    if peers is not None:
        doc["peers"] = {"results": peers[0], "skipped": peers[1],
                        "matvec_columns": MATVEC_COLUMNS}
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)


def plot_results(results, path, info=None, format=None):
    """Time against N on log-log axes, one panel per task, one line per implementation.

    results may include run_peers' rows: the Gram peers join the Gram panel.

    format: the image format when it is not path's extension.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = [t for t in TASKS if any(r["task"] == t for r in results)]
    cols = min(2, len(tasks))
    rows = math.ceil(len(tasks) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 4.2 * rows), squeeze=False)
    markers = {"naive": "x", "numpy": "s", "sklearn": "o", "fastkern": "D",
               "numba": "^", "numexpr": "v", "pykeops": "P"}
    for ax, task in zip(axes.flat, tasks):
        for impl in IMPLS + PEERS:
            pts = sorted((r["n"], r["time_s"]) for r in results
                         if r["task"] == task and r["impl"] == impl)
            if pts:
                ns, ts = zip(*pts)
                ax.plot(ns, ts, marker=markers[impl], label=impl)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(TASK_TITLES[task])
        ax.set_xlabel("N (samples)")
        ax.set_ylabel("time (s)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    for ax in list(axes.flat)[len(tasks):]:
        ax.set_visible(False)
    if info is not None:
        fig.suptitle(f"fastkern bench: d={N_FEATURES}, {info['cores']} cores, "
                     f"{info['n_threads']} threads")
    fig.tight_layout()
    fig.savefig(path, dpi=110, format=format)
    plt.close(fig)


def progress_printer(stream=None):
    """A progress callback writing one updating line (a line per step when not a terminal)."""
    stream = sys.stderr if stream is None else stream
    tty = hasattr(stream, "isatty") and stream.isatty()

    def report(i, total, task, impl, n):
        msg = f"[{i + 1:>3}/{total}] {TASK_TITLES[task]} / {impl} at N={n} ..."
        if tty:
            stream.write("\r" + msg.ljust(60))
            if i + 1 == total:
                stream.write("\n")
        else:
            stream.write(msg + "\n")
        stream.flush()

    return report


# ---------------------------------------------------------------- benchmarks/ helpers

QUICK_SCALE = 0.01


def bench_scale():
    """Size multiplier for benchmarks/: FASTKERN_BENCH_QUICK=1 means 0.01, else
    FASTKERN_BENCH_SCALE (default 1, the sizes of the performance targets)."""
    if os.environ.get("FASTKERN_BENCH_QUICK", "").strip().lower() in ("1", "true", "yes", "on"):
        return QUICK_SCALE
    text = os.environ.get("FASTKERN_BENCH_SCALE", "1")
    try:
        scale = float(text)
    except ValueError:
        raise ValueError(f"FASTKERN_BENCH_SCALE must be a positive number, got {text!r}") from None
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"FASTKERN_BENCH_SCALE must be a positive number, got {text!r}")
    return scale


def scaled(n, minimum=10):
    return max(minimum, int(round(n * bench_scale())))


def side_by_side(fns, *, rounds=3):
    """Fastest time of each named callable, calls interleaved round by round so
    that load from other processes hits every contestant alike."""
    best = {name: math.inf for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best
