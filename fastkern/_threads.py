"""fastkern's execution context: how many threads its loops and its BLAS/LAPACK calls use.

One module owns the thread policy:

- ``check_n_threads``: what ``n_threads`` may be, and that None means
  ``default_n_threads()`` (OpenMP's default, capped by the CPUs this process
  may use), for fastkern's loops and for the BLAS/LAPACK calls alike;
- the compiled loops wake their threads only for work worth a parallel
  region (``fastkern._batches`` measures the first item; ``threads_for``
  does the same by size for loops that are not batched; ``StepThreads``
  times 1 against n threads for a run of short steps);
- ``blas_limit`` / ``blas_for`` / ``limits_blas``: BLAS/LAPACK runs on one
  thread inside OpenMP regions and for small problems, on ``n_threads``
  otherwise, so BLAS's and OpenMP's threads never both run wide at once
  (no other module calls threadpoolctl: tests/test_architecture.py);
- ``share_of_cores``: a Dask task's threads, the host's cores shared among
  the tasks running on it;
- ``openmp_threads``: one thread in a forked child's forking thread, whose
  OpenMP pool is the parent's (every count for the compiled loops comes
  through it);
- fastkern's OpenMP threads sleep when idle instead of spinning (set before
  the OpenMP runtime loads, below), so they do not take the cores from
  BLAS, from the other processes of a busy machine or from a grid search's
  workers.
"""
import contextlib
import contextvars
import functools
import numbers
import os
import sys
import threading
import time

_controller = None
_controller_lock = threading.Lock()

# The OpenMP runtime reads its wait policy once, when it loads.  Spinning idle
# threads make the next parallel region start a few microseconds sooner on an
# idle machine, but they keep a core busy for up to milliseconds after every
# region: on a loaded machine, or beside OpenBLAS's own spinning threads, that
# costs 3-13x (benchmarks/bench_threads.py).  A user's own OMP_WAIT_POLICY,
# GOMP_SPINCOUNT or KMP_BLOCKTIME wins; the variable is set only while the
# runtime loads, so fastkern leaves the process's environment as it found it.
_WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")


def _load_openmp_runtime():
    user_set = [v for v in _WAIT_VARIABLES if v in os.environ]
    if user_set:
        from fastkern import _openmp  # noqa: F401
        return "as set by " + ", ".join(f"{v}={os.environ[v]}" for v in user_set)
    os.environ["OMP_WAIT_POLICY"] = "passive"
    try:
        from fastkern import _openmp  # noqa: F401
    finally:
        del os.environ["OMP_WAIT_POLICY"]
    return "passive (idle threads sleep)"


WAIT_POLICY = _load_openmp_runtime()

# More threads than this are refused: thread creation fails (or the process
# aborts inside the OpenMP runtime) long before such counts, and no machine
# fastkern runs on has more cores.
MAX_THREADS = 4096

# Loops that are not batched (fastkern._batches) run on one thread below this
# many values of work (read or written): a parallel region costs a thread
# wake-up and a barrier, about what 2^16 values of a memory-bound pass cost.
SERIAL_VALUES = 1 << 16

# BLAS/LAPACK calls on matrices with fewer rows than this run on one thread:
# below it a threaded call (eigh, potrf, the matrix-vector products of
# ARPACK on a few hundred rows) gains little on an idle machine, and its
# spinning workers cost much more on a busy one; at 1000 rows two BLAS
# threads made KernelPCA's ARPACK solve up to 1.5x faster idle
# (benchmarks/bench_sizes.py, bench_busy.py).
BLAS_SERIAL_ROWS = 512


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
    return max(1, min(n, MAX_THREADS))


def share_of_cores(host_threads):
    """OpenMP threads for one of ``host_threads`` tasks running at once on this host:
    the cores this process may use (its CPU affinity) divided among them, at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(1, cores // max(1, host_threads))


# The same for work counted in multiply-adds (incomplete Cholesky's kernel
# columns, n x d): below it a column takes less time than starting and
# joining a parallel region.
SERIAL_MULTIPLY_ADDS = 1 << 18


def threads_for(n_threads, values, serial_below=None):
    """Threads for one unbatched parallel loop over about `values` values of work
    (or units of work, with its own ``serial_below``; default ``SERIAL_VALUES``)."""
    return n_threads if values >= (SERIAL_VALUES if serial_below is None else serial_below) else 1


class StepThreads:
    """Runs each of many short parallel steps on 1 or n_threads threads, whichever
    was faster lately (incomplete Cholesky's pivot steps).

    A step is one parallel region of a few milliseconds; on a shared machine a
    region waits for its slowest thread, and a descheduled one costs a time
    slice (measured on the 2-core machine under load 10: 2 threads took twice
    as long as 1).  The result does not depend on the thread count, so it
    can follow the machine: seconds per unit of work are kept for both counts
    (the incumbent's averaged, alpha 0.25) and the other count is re-timed
    every ``PROBE_EVERY`` steps.  ``batch[threads]`` is the caller's learned
    batch size (fastkern._batches) for each count.  ``margin``: one thread
    takes over only when it was this many times faster than n_threads (a
    first timing that met a cold cache or a moment's load must not decide a
    whole run).

    ``memory`` (a dict the caller keeps) and ``key``: a run of few steps
    (a Lanczos solve of 1000 rows makes 2-3 calls) would spend most of them
    timing both counts.  With a memory, a run starts from the rates of the
    last run of the same key and thread count if it ended under
    ``REMEMBER_S`` ago, and the steps that probe the other count are counted
    across runs.
    """

    PROBE_EVERY = 16
    REMEMBER_S = 5.0

    def __init__(self, n_threads, margin=1.0, memory=None, key=None):
        self.options = (n_threads, 1) if n_threads > 1 else (1,)
        self.margin = margin
        self.rate = {}
        self.batch = dict.fromkeys(self.options, 0)
        self._memory, self._key = memory, (self.options, key)
        self._offset = self._next = 0
        if memory is not None:
            seen = memory.get(self._key)
            if seen is not None and time.monotonic() - seen[0] < self.REMEMBER_S:
                _, rate, self._offset = seen
                self.rate = dict(rate)
                self._next = self._offset

    def pick(self, step):
        """The thread count for step number ``step``."""
        step += self._offset
        self._next = step + 1
        untried = [t for t in self.options if t not in self.rate]
        if untried:
            return untried[0]
        first = self.options[0]
        best = min(self.options, key=self.rate.__getitem__)
        if best != first and self.rate[best] * self.margin > self.rate[first]:
            best = first
        if len(self.options) > 1 and step % self.PROBE_EVERY == 0:
            return self.options[1] if best == self.options[0] else self.options[0]
        return best

    def record(self, threads, seconds, work):
        """A step on ``threads`` threads took ``seconds`` for ``work`` units."""
        rate = seconds / work
        old = self.rate.get(threads)
        best = min(self.rate.values()) if self.rate else None
        # The incumbent is averaged; a probe replaces the other's value.
        self.rate[threads] = rate if old is None or old != best else 0.75 * old + 0.25 * rate
        if self._memory is not None:
            self._memory[self._key] = (time.monotonic(), dict(self.rate), self._next)


def _blas_controller():
    global _controller
    with _controller_lock:
        if _controller is None:
            # Built once: inspecting the loaded libraries costs milliseconds.
            from threadpoolctl import ThreadpoolController

            _controller = ThreadpoolController().select(user_api="blas")
    return _controller


class _SharedLimits:
    """The BLAS thread counts fastkern holds, shared by every Python thread.

    A library's thread count is one value for the whole process (OpenBLAS on
    its own threads, MKL, BLIS).  Each request holds every library it names
    to at most its count; while several are held at once (Grams computed
    from several Python threads, one estimator's limit around another
    thread's tiles), a library runs at the smallest count requested of it,
    and its original count comes back only when the last request ends.
    threadpoolctl's own limiters each restore the count they found on entry:
    two Python threads' limits ending in the other order left the process's
    BLAS at one thread for good.  An OpenBLAS on OpenMP threads keeps a count
    per thread: its requests are held per Python thread.
    """

    def __init__(self):
        self._lock = threading.Lock()
        # key -> [library controller, original count, requested counts]
        self._held = {}

    @staticmethod
    def _key(lib):
        if getattr(lib, "threading_layer", None) == "openmp":
            return lib.filepath, threading.get_ident()
        return lib.filepath

    def acquire(self, controller, n_threads):
        """Hold controller's libraries to at most n_threads; returns the release token."""
        keys = []
        with self._lock:
            for lib in controller.lib_controllers:
                key = self._key(lib)
                entry = self._held.get(key)
                if entry is None:
                    entry = self._held[key] = [lib, self._count(lib), []]
                entry[2].append(n_threads)
                self._set(lib, min(entry[2]))
                keys.append(key)
        return keys, n_threads

    def release(self, token):
        keys, n_threads = token
        with self._lock:
            for key in keys:
                lib, original, requests = self._held[key]
                requests.remove(n_threads)
                if requests:
                    self._set(lib, min(requests))
                else:
                    del self._held[key]
                    if original is not None:
                        self._set(lib, original)

    @staticmethod
    def _direct(lib):
        """(get, set) thread-count functions of an OpenBLAS on its own threads, called
        directly, or None (other libraries go through threadpoolctl).

        threadpoolctl's property and setter, with the controlling-thread
        release around each set, took 37-49 us to hold a KernelPCA fit's two
        OpenBLAS copies to one thread and back, and 250 us as the first call
        after other work (its Python frames out of the caches): a sixth of a
        200-row fit.  The direct calls are the functions threadpoolctl ends
        in (``openblas_get/set_num_threads``, process-wide on this layer).
        """
        found = _DIRECT.get(lib.filepath, _UNSET)
        if found is _UNSET:
            found = None
            symbol = getattr(lib, "_get_symbol", None)
            if (symbol is not None and getattr(lib, "internal_api", None) == "openblas"
                    and getattr(lib, "threading_layer", None) == "pthreads"):
                get, put = symbol("openblas_get_num_threads"), symbol("openblas_set_num_threads")
                if get is not None and put is not None:
                    found = get, put
            _DIRECT[lib.filepath] = found
        return found

    @staticmethod
    def _count(lib):
        direct = _SharedLimits._direct(lib)
        return direct[0]() if direct is not None else lib.num_threads

    @staticmethod
    def _set(lib, n_threads):
        direct = _SharedLimits._direct(lib)
        if direct is not None:
            if direct[0]() != n_threads:
                direct[1](n_threads)
            return
        if lib.num_threads == n_threads:
            return
        # threadpoolctl >= 3.7 lets one Python thread only (the first to set
        # it) change a process-wide OpenBLAS count, and ignores the others
        # without a word: a Gram's tile limit in a worker thread did nothing,
        # and its tile gemms ran on OpenBLAS's threads inside fastkern's own.
        # Here self._lock orders the changes, so no thread keeps that role.
        release = getattr(lib, "clear_controlling_thread", None)
        if release is not None:
            release(force=True)
        lib.set_num_threads(n_threads)
        if release is not None:
            release(force=True)


# Library path -> _SharedLimits._direct's functions, or None.
_DIRECT = {}
_UNSET = object()
_limits = _SharedLimits()

# interruptible's workers still inside a LAPACK call, and the BLAS limits
# whose release waits for them.  OpenBLAS's thread count must not change
# while one of its calls runs (a count changed under a running potrf left
# its thread server unable to shut down: the process hung at exit), so a
# limit that ends while an interrupted call still runs is released later,
# by the next blas_limit, once the call is over.
_workers = set()
_deferred = []
_workers_lock = threading.Lock()
# The kernel thread ids of workers whose caller stopped waiting (Ctrl-C):
# what _at_exit waits for, to the end of the thread (see there).
_abandoned = []
# _at_exit's longest wait for those threads to end, once their calls returned.
EXIT_WAIT_S = 10.0


def _wait_for_workers():
    """Wait, Ctrl-C-ably, for interrupted LAPACK calls still running; then
    release the limits that ended while they ran."""
    me = threading.current_thread()
    while True:
        with _workers_lock:
            worker = next((w for w in _workers if w is not me), None)
            if worker is None:
                deferred = _deferred[::-1]
                _deferred.clear()
                break
        worker.join(0.05)
        if not worker.is_alive():
            # Marked stopped by an interrupted join, yet still in its call.
            time.sleep(0.01)
    for token in deferred:
        _limits.release(token)


# Per Python thread: the smallest count each of its enclosing default-controller
# limits holds BLAS to, innermost last (_BlasLimit).
_held_here = threading.local()


class _BlasLimit:
    def __init__(self, n_threads, controller=None):
        self.n_threads = n_threads
        self.controller = controller

    def __enter__(self):
        self._token = None
        if self.controller is None:
            held = _held_here.__dict__.setdefault("counts", [])
            if held and held[-1] <= self.n_threads:
                # An enclosing limit of this thread already holds every library
                # to at most n_threads (a library runs at the smallest count
                # requested): the threadpoolctl calls would change nothing.
                held.append(held[-1])
                return self
        _wait_for_workers()
        controller = _blas_controller() if self.controller is None else self.controller
        self._token = _limits.acquire(controller, self.n_threads)
        if self.controller is None:
            # Here any enclosing count is above n_threads: n_threads is the smallest.
            held.append(self.n_threads)
        return self

    def __exit__(self, *exc):
        if self.controller is None:
            _held_here.counts.pop()
        if self._token is None:
            return False
        with _workers_lock:
            if _workers - {threading.current_thread()}:
                _deferred.append(self._token)
                return False
        _limits.release(self._token)
        return False


def blas_limit(n_threads):
    """Context manager holding BLAS/LAPACK to n_threads (None: default_n_threads())."""
    if n_threads is None:
        n_threads = default_n_threads()
    return _BlasLimit(n_threads)


def _scipy_own_blas():
    """The BLAS copy of scipy's wheel (in ``scipy.libs``) as a controller, when
    numpy has a copy of its own (numpy.libs; the wheels' layout), else None."""
    controller = _blas_controller()
    paths = [lib.filepath for lib in controller.lib_controllers]
    own = [p for p in paths if os.path.basename(os.path.dirname(p)) == "scipy.libs"]
    if not own or len(own) == len(paths):
        return None
    return controller.select(filepath=own)


def scipy_blas_serial():
    """Context manager holding scipy's own BLAS copy to one thread, numpy's untouched.

    For scipy's ARPACK (``eigsh``) on a matrix: its products ``A @ x`` run on
    numpy's BLAS, its own small vector operations on scipy's, and the two
    thread pools, each spinning after its calls, took the cores from each
    other: repeated ``eigsh`` calls on a 1000 x 1000 Gram on 2 cores took
    36-104 ms, 17-18 ms with scipy's copy on one thread (and 33 ms with both
    on one).  Where numpy and scipy share one BLAS library (a conda or system
    install), nothing is changed: that would hold the products to one thread.
    """
    controller = _scipy_own_blas()
    return contextlib.nullcontext() if controller is None else _BlasLimit(1, controller)


def blas_threads(n_threads, n_rows):
    """BLAS/LAPACK threads for an estimator's work on n_rows samples."""
    return n_threads if n_rows >= BLAS_SERIAL_ROWS else 1


# From BLAS_SERIAL_ROWS to below this many rows, the default thread count
# (n_threads=None) of an estimator method's work (and center_gram's),
# OpenMP and BLAS/LAPACK, is also capped by the cores that no other process
# is running on when it starts (``cores_free``; ``limits_blas`` on methods,
# ``limits_threads`` on functions).  A threaded
# LAPACK call, or ARPACK's hundreds of threaded products, waits for a
# descheduled thread at every step on a busy machine: with one busy process
# per core (2 cores), KernelPCA at N=1000 (ARPACK) took 461 ms (median of
# 12) by default against 42 ms on one thread, KernelRidge at N=2000 170 ms
# against 121 ms.  Above it the calls are long enough to pay their threads
# even there, and a momentary reading must not decide minutes of work.
LOAD_AWARE_ROWS = 4096


def _read_proc(path):
    """The start of a /proc file: os.open and os.read, about half the time of
    open() and its text layer, which is most of a reading (below)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 512)
    finally:
        os.close(fd)


def _runnable_now():
    """The kernel's count of runnable threads, this process's among them (/proc/loadavg)."""
    return int(_read_proc("/proc/loadavg").split()[3].split(b"/")[0])


def _own_running():
    """The ids of this process's threads in state R (running or runnable) now."""
    running = set()
    for tid in os.listdir("/proc/self/task"):
        try:
            stat = _read_proc(f"/proc/self/task/{tid}/stat")
        except OSError:  # the thread ended meanwhile
            continue
        # The state follows the command name, which is in parentheses and may
        # itself contain them.
        state = stat.rindex(b")") + 2
        if stat[state:state + 1] == b"R":
            running.add(tid)
    return running


# others_running's readings when the first one finds other processes'
# threads, this many seconds apart.
_LOAD_READINGS = 3
_LOAD_READING_GAP = 2e-4


def _one_reading():
    """Threads of other processes runnable at one instant (see others_running)."""
    # This thread is running: a count of 1 is this process alone, and the
    # idle machine's reading stops here, without a look at every thread.
    if _runnable_now() <= 1:
        return 0
    # This process's threads first, then the kernel's count: a BLAS worker
    # that stops spinning in between lowers the count too, so it is never
    # taken for another process's thread.
    own = _own_running()
    return max(0, _runnable_now() - len(own))


def others_running():
    """Threads of other processes runnable right now: the kernel's count of runnable
    threads less this process's own running ones (a BLAS pool's spinning workers
    among them); 0 where /proc cannot tell.

    A reading is an instant.  A reading that finds others is taken again, up
    to ``_LOAD_READINGS`` readings ``_LOAD_READING_GAP`` apart, and the least
    stands: a short-lived task (a shell command, a monitor's sample, another
    tenant's thread on a shared host, which /proc/loadavg counts but this
    process cannot see) is not a busy machine, while a CPU-bound competitor
    stays runnable in every reading (performance_history, "Small and mid
    sizes").  The readings cost about 10 us on an idle machine and 0.7 ms on
    a busy one (they took 0.24 and 1.1-1.6 ms, a tenth of a 1000-row
    KernelPCA fit there, before they read /proc without Python's text layer
    and skipped the thread scan when this thread was the only one running).
    """
    least = None
    try:
        for reading in range(_LOAD_READINGS):
            if reading:
                # Waited out on this core: a sleep gives it up, and on a busy
                # machine getting it back takes milliseconds.
                resume = time.perf_counter() + _LOAD_READING_GAP
                while time.perf_counter() < resume:
                    pass
            others = _one_reading()
            least = others if least is None else min(least, others)
            if least == 0:
                break
    except (OSError, ValueError, IndexError):
        return 0
    return least


def cores_free():
    """Cores of this process's CPU affinity that no other process is running on now,
    at least 1."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(1, cores - others_running())


# The cap on n_threads=None that an estimator method on a busy machine set
# (limits_blas); None: no cap.
_default_cap = contextvars.ContextVar("fastkern_default_cap", default=None)


def _default_count():
    cap = _default_cap.get()
    n = default_n_threads()
    return n if cap is None else max(1, min(n, cap))


def default_threads_now():
    """What n_threads=None means here and now for fastkern's OpenMP loops:
    default_n_threads(), at most the cap an estimator method set for its work
    on a busy machine (limits_blas), and 1 where a team would hang
    (openmp_threads)."""
    return openmp_threads(_default_count())


# The ident of the thread that forked this process, when that thread had been
# given an OpenMP team of several threads before the fork: see openmp_threads.
_stale_pool_thread = None
# Per Python thread: ``team`` is set once the thread was given a count above 1.
_given_team = threading.local()


def openmp_threads(n_threads):
    """The thread count a parallel region started from this thread may use: n_threads,
    or 1 in a forked child's forking thread after that thread ran teams in the parent.

    GNU OpenMP keeps a thread's pool of team threads in that thread's own
    storage and does not handle fork: in the child, the forking thread's pool
    still lists the parent's workers, which do not exist there, and its next
    region of more than one thread waits for them for ever (after any
    threaded call, ``os.fork()`` then a Gram in the child hung, and so did a
    ``multiprocessing`` fork Pool's and joblib's multiprocessing workers,
    which run their tasks in that thread).  A region of one thread does not
    touch the pool, and other threads of the child, made after the fork, get
    pools of their own: only the forking thread runs serial, and results do
    not depend on the thread count.  Every count fastkern hands to its
    compiled loops comes through here (``check_n_threads``,
    ``default_threads_now``), which also records that the thread may own a
    pool, so a child forked from a thread that never ran a team keeps its
    threads.
    """
    if n_threads > 1:
        if _stale_pool_thread is not None and threading.get_ident() == _stale_pool_thread:
            return 1
        _given_team.team = True
    return n_threads


def _after_fork_in_child():
    global _stale_pool_thread, _controller_lock, _workers_lock
    # The forking thread's thread-local data survive the fork; its flag stays
    # set, so a grandchild forked from it is treated the same.
    if getattr(_given_team, "team", False):
        _stale_pool_thread = threading.get_ident()
    # The locks may have been held by threads that do not exist here, and
    # the LAPACK workers interruptible waits for are gone: their limits are
    # released by the next blas_limit (_wait_for_workers).
    _controller_lock = threading.Lock()
    _workers_lock = threading.Lock()
    _limits._lock = threading.Lock()
    _workers.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def blas_for(n_threads, n_rows):
    """Context manager holding BLAS/LAPACK to :func:`blas_threads` for an estimator's
    work on n_rows samples (n_threads validated, None: default_threads_now())."""
    return blas_limit(blas_threads(_default_count() if n_threads is None else n_threads,
                                   n_rows))


def blas_info():
    """The BLAS libraries loaded in this process, as threadpoolctl reports them (looked
    up afresh: the limiter's cached controller may predate a library loaded since)."""
    from threadpoolctl import threadpool_info

    return [i for i in threadpool_info() if i.get("user_api") == "blas"]


def _rows(args):
    X = args[0] if args else None
    shape = getattr(X, "shape", None)
    if shape:
        return shape[0]
    try:
        return len(X)
    except TypeError:
        return 0


def _within_limits(n_threads, rows, call):
    """call() with BLAS/LAPACK held to n_threads, or to one thread for fewer than
    BLAS_SERIAL_ROWS rows, and n_threads=None inside it meaning at most n_threads
    (default_threads_now); with the default on a busy machine, at most the
    cores free (LOAD_AWARE_ROWS)."""
    # An invalid n_threads runs with the default here: the caller's parameter
    # validation rejects it with its own message.
    valid = (isinstance(n_threads, numbers.Integral)
             and not isinstance(n_threads, bool) and 1 <= n_threads <= MAX_THREADS)
    cap = None
    if valid:
        # What the call runs on the default threads (gamma="median"'s
        # distances, a helper given n_threads=None) stays within its count too.
        cap = int(n_threads)
    elif (n_threads is None and _default_cap.get() is None
            and BLAS_SERIAL_ROWS <= rows < LOAD_AWARE_ROWS and default_n_threads() > 1):
        # Short work on the default threads: none on the cores other
        # processes are running on (LOAD_AWARE_ROWS), for the call's OpenMP
        # loops and its BLAS/LAPACK calls alike.  Inside another such call
        # (fit_transform's fit, a solver's Nystroem) the enclosing cap holds:
        # one reading per call of the user's.
        cap = cores_free()
    token = _default_cap.set(cap) if cap is not None else None
    try:
        with blas_for(int(n_threads) if valid else None, rows):
            return call()
    finally:
        if token is not None:
            _default_cap.reset(token)


def limits_blas(method):
    """Run an estimator method within its threads (_within_limits): BLAS/LAPACK
    held to ``self.n_threads``, or to one thread when its data (the first
    argument) has few rows; n_threads=None inside it means at most
    ``self.n_threads``, and on a busy machine the cores free."""

    @functools.wraps(method)
    def wrapped(self, *args, **kwargs):
        return _within_limits(self.n_threads, _rows(args),
                              lambda: method(self, *args, **kwargs))

    return wrapped


def limits_threads(function):
    """limits_blas for a public function whose keyword-only ``n_threads`` bounds its
    work on the rows of its first argument (center_gram's K)."""
    import inspect

    parameter = inspect.signature(function).parameters.get("n_threads")
    if parameter is None or parameter.kind is not inspect.Parameter.KEYWORD_ONLY:
        raise TypeError(f"{function.__name__} has no keyword-only n_threads")

    @functools.wraps(function)
    def wrapped(*args, **kwargs):
        return _within_limits(kwargs.get("n_threads"), _rows(args),
                              lambda: function(*args, **kwargs))

    return wrapped


# interruptible runs fn in place when no array argument holds more values
# than this (a 256 x 256 matrix): its LAPACK call takes well under the
# half-second Ctrl-C allows (a full eigh of 256 x 256, ~1.5e8 flops, some
# tens of ms), and a thread's start and join would cost more than the call
# itself on a busy machine (KernelPCA on 200 samples: two calls per fit).
INTERRUPTIBLE_IN_PLACE = 256 * 256
# ... and so does a call its caller says takes at most this many
# multiply-adds (``work=``): a quarter second even at 1 GFlop/s, a core
# shared with dozens of busy processes.  A call moved to a worker thread pays
# the thread's start and a cold cache on the other core (performance_history,
# "Small and mid sizes").
INTERRUPTIBLE_WORK = 2e8


def _largest_array(args):
    return max((a.size for a in args if hasattr(a, "size") and hasattr(a, "shape")),
               default=0)


def lapack_running():
    """Whether a LAPACK call that Ctrl-C left behind still runs in the background."""
    # Membership, not is_alive(): CPython 3.11's Thread.join, interrupted,
    # can mark a thread that still runs as stopped (bpo-45274); a worker
    # leaves the set when its call returns.
    with _workers_lock:
        return bool(_workers - {threading.current_thread()})


def exit_now(status):
    """End the process with status at once (stdio flushed) if an interrupted
    LAPACK call still runs; return otherwise.  The interpreter's normal exit
    unloads OpenBLAS while the call uses it: that hung or segfaulted (fastkern
    cca interrupted in KernelCCA's eigh at n=4000: a segfault in 3 runs of 4)."""
    if lapack_running():
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # closed or broken: nothing left to keep
                pass
        os._exit(status)


@functools.lru_cache(maxsize=None)
def _exit_hook_once():
    import atexit

    atexit.register(_at_exit)


def _at_exit():
    """At interpreter exit, wait for an interrupted LAPACK call still running:
    the exit would unload OpenBLAS under it (the process hung or segfaulted),
    and the exit status is not known here, so exit_now cannot be used.  Not
    after an uncaught KeyboardInterrupt (sys.last_value): Python then kills
    itself by SIGINT after atexit, before any library is unloaded."""
    if not isinstance(getattr(sys, "last_value", None), KeyboardInterrupt):
        _wait_for_workers()
        _wait_for_thread_ends(time.monotonic() + EXIT_WAIT_S)


def _wait_for_thread_ends(deadline):
    """Wait until the abandoned workers' threads have ended, as the kernel
    sees them (their /proc/self/task entries gone), or until `deadline`.

    A worker leaves _workers when its call returns, but its thread goes on:
    it still needs the GIL to finish, and its OpenBLAS buffers are freed by
    the thread's exit.  An exit that went on from there finalised the
    interpreter beside it: the suspected cause of a crash seen once in a few
    runs (OpenBLAS printed "Bad memory unallocation!", then SIGSEGV), not
    reproduced at will.  Sleeping here lets the thread take the GIL and end
    first.  Without /proc (not Linux), nothing to wait on: Thread.join
    cannot be trusted after an interrupted join (bpo-45274).
    """
    with _workers_lock:
        tids = list(_abandoned)
    for tid in tids:
        while _thread_exists(tid) and time.monotonic() < deadline:
            time.sleep(0.002)


def _thread_exists(tid):
    """Whether this process has a thread of kernel id tid (False without /proc)."""
    return os.path.exists(f"/proc/self/task/{tid}")


def interruptible(fn, *args, work=None, **kwargs):
    """fn(*args, **kwargs), run so that Ctrl-C raises KeyboardInterrupt at once.

    For one long LAPACK or BLAS call (an eigh or an SVD of a Gram matrix:
    scipy's eigh took 118 s at N=6000 in KernelCCA), which holds no point
    where Python could handle a signal.  fn runs in a worker thread and the
    main thread waits on it in 0.05 s steps, handling any signal between
    them, so KeyboardInterrupt comes out within a step; the worker, which
    cannot be stopped, finishes in the background and drops its result (the
    thread is named "fastkern-lapack").  fn must release the GIL for its
    long part (``_inchol.syevr``/``syev``, numpy's linalg and matmul do;
    scipy.linalg's f2py wrappers do not, and the main thread would wait
    for the GIL instead).  Called from another thread than the main one
    (where signals do not arrive), on arrays of at most
    ``INTERRUPTIBLE_IN_PLACE`` values, or with ``work`` (the call's
    multiply-adds, as its caller counts them) at most ``INTERRUPTIBLE_WORK``,
    fn runs in place.
    """
    if (threading.current_thread() is not threading.main_thread()
            or _largest_array(args) <= INTERRUPTIBLE_IN_PLACE
            or (work is not None and work <= INTERRUPTIBLE_WORK)):
        return fn(*args, **kwargs)
    box = {}

    def work():
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = exc
        finally:
            with _workers_lock:
                _workers.discard(worker)

    worker = threading.Thread(target=work, name="fastkern-lapack", daemon=True)
    with _workers_lock:
        _workers.add(worker)
        _exit_hook_once()
    try:
        worker.start()
    except BaseException:
        # Ctrl-C inside start(): the thread may or may not run; a thread
        # that never ran must not be waited for.
        if not worker.is_alive() and worker.ident is None:
            with _workers_lock:
                _workers.discard(worker)
        raise
    try:
        while worker.is_alive():
            worker.join(0.05)
    except BaseException:
        with _workers_lock:
            # Ended threads' ids go first: the kernel may give one to a new thread.
            _abandoned[:] = [t for t in _abandoned if _thread_exists(t)]
            _abandoned.append(worker.native_id)
        raise
    if "error" in box:
        raise box.pop("error")
    return box["value"]
