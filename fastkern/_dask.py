"""Matrix-free kernel PCA with the kernel passes run on a Dask cluster.

Install its optional dependencies with ``pip install "dask[array]" distributed``
(the ``dask`` extra of a source install).  Nothing here is imported unless it is used.

How it runs
-----------
``KernelPCA(eigen_solver="matrix-free", ...).fit(X)`` goes to the cluster
when X is a ``dask.array`` (on the default client) or the fit runs inside
``with fastkern.cluster(client):`` (:func:`cluster`); without either it runs
in-process with OpenMP.  Each pass over the kernel matrix (one per product of the
eigensolver; the first also gives the row means) scatters X and the current block V
to the cluster and submits one task per row block of X, which computes
K(X_block, X) @ V with the same Cython tile loop as the in-process solver;
the client concatenates the results, and the eigensolver
(``fastkern._eigen.block_eigsh``) runs on the client.  Row blocks are the
chunks of a dask array (which must be a single chunk of columns) or, for a
NumPy X, about four blocks per worker thread.  Tasks are pure functions of
their inputs, so a worker that dies mid-pass is replaced (by its nanny) and
its tasks are rerun by the scheduler.

Threads
-------
A worker with T threads runs up to T tasks at once, so each task uses
max(1, C // T_host) OpenMP threads, where C is the number of cores the worker
process may use (its CPU affinity) and T_host is the total number of Dask
threads of all workers on that host: the threads of a host never exceed its
cores.  For example ``dask worker --nworkers 1 --nthreads 1`` on an 8-core
machine gives 8 OpenMP threads per task; ``--nworkers 2 --nthreads 2`` gives
2.  Setting the estimator's ``n_threads`` overrides the rule.

Deadlines
---------
Every wait on the cluster has a deadline of ``timeout`` seconds (default
600): each kernel pass as a whole (the workers' thread counts, the scatters of
X and V, the tasks and the gather of their results, and any reruns after a
lost worker), and separately the loading of a dask array X.  A wait that
reaches its deadline is cancelled and raises ``TimeoutError`` naming what was
waited for; a closed client raises ``RuntimeError`` at once.  So a lost
cluster (scheduler gone, every worker dead) fails within ``timeout`` instead
of hanging.  A pass that loses a worker is run again, up to three times and
within the same deadline: the scheduler reruns the dead worker's tasks
itself, but X and V scattered to it are lost with it.  X and V are scattered
to one worker and copied to the others by the scheduler as tasks need them:
a broadcast scatter (``Scheduler.replicate``) loops forever when a worker
dies while it copies.

Using an existing cluster
-------------------------
::

    from distributed import Client
    client = Client("tcp://scheduler-host:8786")
    kpca = KernelPCA(n_components=5, eigen_solver="matrix-free")
    with fastkern.cluster(client, timeout=600):
        kpca.fit(X)                           # or pass a dask array as X
"""
import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import time

import numpy as np

from fastkern._threads import share_of_cores
from fastkern._validation import check_array_2d, check_real, result_dtype

_MISSING = ("fastkern's Dask support needs the optional packages dask and distributed: "
            'pip install "dask[array]" distributed')

# Seconds allowed for one kernel pass (and for loading a dask array X): a
# pass costs O(N^2 d), so at large N it may take minutes; a lost cluster
# would never end.
DEFAULT_TIMEOUT = 600.0

# Attempts per kernel pass when a worker is lost mid-pass.
_PASS_ATTEMPTS = 3
# Pause before a rerun, so that the scheduler has dropped the dead worker.
_RETRY_PAUSE = 1.0


def _require():
    try:
        import dask.array  # noqa: F401
        import distributed
    except ImportError as exc:
        raise ImportError(_MISSING) from exc
    return distributed


def check_timeout(timeout):
    """``timeout`` as float seconds: a finite number > 0 (there is always a deadline)."""
    return check_real(timeout, "timeout", low=0, low_inclusive=False)


def _get_client(client):
    distributed = _require()
    if client is None:
        try:
            return distributed.default_client()
        except ValueError:
            raise ValueError("a dask array X needs a distributed.Client: create one "
                             "(distributed.Client(...)) or give it to fastkern.cluster") from None
    if not isinstance(client, distributed.Client):
        raise TypeError(f"client must be a distributed.Client, got {type(client).__name__}")
    return client


def _check_open(client):
    if client.status in ("closing", "closed"):
        raise RuntimeError(f"the Dask client is {client.status} (its scheduler was lost or "
                           "it was closed): connect a new distributed.Client")


class _Deadline:
    """Calls to a client that together may take at most ``timeout`` seconds."""

    def __init__(self, client, timeout, task):
        self.client = client
        self.timeout = timeout
        self.task = task
        self.end = time.monotonic() + timeout

    def remaining(self):
        return self.end - time.monotonic()

    def expired(self, what):
        return TimeoutError(
            f"fastkern: {self.task} did not finish within timeout={self.timeout:g} s "
            f"(waiting for {what}; client status {self.client.status!r}). Is the scheduler "
            "running, with workers? Pass a larger timeout= if the cluster is just slow.")

    def call(self, what, method, *args, **kwargs):
        """``method(*args, **kwargs)``, a client method, cancelled at the deadline.

        The method runs as a coroutine on the client's event loop, so the
        deadline covers all of it (``Client.scatter``'s own timeout only
        bounds the wait for a worker) and nothing keeps running after it.
        """
        _check_open(self.client)
        remaining = self.remaining()
        if remaining <= 0:
            raise self.expired(what)
        call = functools.partial(method, *args, asynchronous=True, **kwargs)
        try:
            return self.client.sync(call, callback_timeout=remaining)
        except (TimeoutError, asyncio.TimeoutError) as exc:  # distinct before Python 3.11
            raise self.expired(what) from exc
        except UnboundLocalError as exc:
            # distributed's sync() catches Exception alone: an asyncio
            # cancellation inside the call (seen in a gather, which joins
            # another gather request of the client's when one is pending)
            # leaves its result unset, and this is what it raises.  As a task
            # cancelled by a lost input, it is the pass's to run again.
            if not _raised_by_sync(exc):
                raise
            raise concurrent.futures.CancelledError(
                f"fastkern: {what} was cancelled inside the Dask client") from exc

    async def _gather_on_loop(self, futures, asynchronous=True):
        # On the client's event loop, so nothing else touches its state meanwhile.
        _drop_cancelled_gather(self.client)
        return await self.client.gather(futures, errors="skip", asynchronous=True)

    def gather(self, what, futures):
        """The results of ``futures``, in order, or the error of the first that failed.

        ``Client.gather`` watches each future with a task of its own; with
        errors="raise", those a gather cancelled at the deadline left raise
        when the futures are released, and asyncio logs each one ("Task
        exception was never retrieved").  With errors="skip" they end
        quietly, and a failed future is raised here instead.
        """
        results = self.call(what, self._gather_on_loop, futures)
        if len(results) < len(futures):
            failed = next(f for f in futures if f.status != "finished")
            # A failed future holds its error: result() raises it at once.
            failed.result(timeout=max(self.remaining(), 0.001))
        return results


def _drop_cancelled_gather(client):
    """Forget a gather request of ``client`` that was cancelled before it ran.

    ``Client.gather`` joins the client's pending gather request (its
    ``_gather_future``), which clears itself when it starts.  One cancelled
    before it started (a gather abandoned at a deadline, fastkern's or the
    user's) stays there, done, and every later gather on that client then
    failed as cancelled: in one CI run, every pass of the next fit on the
    test module's shared client.  A done request is no pending one; the
    client's own initial state is put back.  Runs on the client's loop.
    """
    pending = getattr(client, "_gather_future", None)
    if pending is not None and pending.done():
        client._gather_future = None
        client._gather_keys = None


def _raised_by_sync(exc):
    """Whether exc was raised by distributed's own sync() (its innermost frame)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code if tb is not None else None
    return code is not None and code.co_name == "sync" and "distributed" in code.co_filename


def _checked_block(block):
    return check_array_2d(block, "X")


def materialize(X, name="X", *, client=None, timeout=DEFAULT_TIMEOUT):
    """A validated, C-contiguous float NumPy X and its row-block boundaries (dask chunks,
    or None for a NumPy X), each entry scanned for NaN/inf once.

    Each chunk of a dask array is checked for NaN/inf on the worker that
    computes it; a chunked column axis is refused before anything runs.  On a
    cluster (``client``, or else the default client if there is one) loading
    the array may take at most ``timeout`` seconds.
    """
    if type(X).__module__.startswith("dask.") and type(X).__name__ == "Array":
        timeout = check_timeout(timeout)
        if X.ndim != 2:
            raise ValueError(f"{name} must be a 2-D array, got {X.ndim}-D with shape {X.shape}")
        if len(X.chunks[1]) != 1:
            raise ValueError(f"{name} is chunked along its columns (chunks {X.chunks[1]}); "
                             f"it must be one chunk of columns: use {name}.rechunk({{1: -1}})")
        if X.dtype.kind not in "biuf":
            raise TypeError(f"{name} must be a numeric array, got dtype {X.dtype}")
        if any(c == 0 for c in X.chunks[0]):
            X = X.rechunk({0: tuple(c for c in X.chunks[0] if c)})
        bounds = np.concatenate([[0], np.cumsum(X.chunks[0])]).astype(int)
        X = X.map_blocks(_checked_block, dtype=X.dtype)
        if client is None:
            try:
                client = _get_client(None)
            except ValueError:
                pass  # no cluster: dask's local scheduler computes it
        if client is None:
            X = X.compute()
        else:
            _check_open(client)
            futures = client.compute(list(X.to_delayed().ravel()))
            try:
                X = np.concatenate(_Deadline(client, timeout, f"loading the dask array {name}")
                                   .gather(f"its {len(futures)} chunks", futures))
            finally:
                for f in futures:
                    f.release()
        # The chunks were scanned for NaN/inf where they were computed.
        X = check_array_2d(X, name, finite=False)
        return np.ascontiguousarray(X, dtype=result_dtype(X)), bounds
    X = check_array_2d(X, name)
    return np.ascontiguousarray(X, dtype=result_dtype(X)), None


def _row_bounds(n, client, timeout):
    from fastkern._matfree import tile_size

    nthreads = _Deadline(client, timeout, "asking the scheduler for its workers").call(
        "the workers' thread counts", client.nthreads)
    threads = sum(nthreads.values()) or 1
    per = max(tile_size, -(-n // (4 * threads)))
    per = -(-per // tile_size) * tile_size
    return np.append(np.arange(0, n, per), n)


def _host_threads(nthreads):
    hosts = {}
    for addr, count in nthreads.items():
        host = addr.rsplit(":", 1)[0]
        hosts[host] = hosts.get(host, 0) + count
    return hosts


def _task_threads(host_threads, n_threads):
    if n_threads is not None:
        return n_threads
    from distributed import get_worker

    host = get_worker().address.rsplit(":", 1)[0]
    return share_of_cores(host_threads.get(host, 1))


def _block_task(Z, V, A, start, stop, spec, n_threads, host_threads):
    """K(rows, Z) @ V on a worker; rows are Z[start:stop] or, if A is given, A[start:stop]."""
    from fastkern._operator import KernelOperator

    op = KernelOperator.from_spec(Z, spec, n_threads=_task_threads(host_threads, n_threads))
    return op.matmat(V, (Z if A is None else A)[start:stop])


class _Passes:
    """One scatter + one task per row block for every product with K."""

    def __init__(self, client, Z, bounds, spec, n_threads, timeout):
        self.client = client
        self.Z = Z
        self.bounds = bounds
        self.spec = spec
        self.n_threads = n_threads
        self.timeout = timeout
        self.count = 0

    def run(self, V, A=None):
        """K(X_rows, X) @ V over the cluster within ``timeout`` seconds.

        A lost worker fails a pass in two ways the scheduler does not repair:
        a scatter to it fails with CommClosedError (an OSError), and X or V
        held only by it are lost, which cancels the tasks that need them.  A
        pass is a pure function of its inputs, so it is run again, up to
        _PASS_ATTEMPTS times, within the same deadline.  Timeouts (also
        OSErrors) and a closed client are not retried.
        """
        self.count += 1
        deadline = _Deadline(self.client, self.timeout, f"kernel pass {self.count} on the Dask "
                             f"cluster ({len(self.bounds) - 1} tasks)")
        for attempt in range(1, _PASS_ATTEMPTS + 1):
            try:
                return self._run_once(V, A, deadline)
            except TimeoutError:
                raise
            except (OSError, concurrent.futures.CancelledError) as exc:
                _check_open(self.client)
                if attempt == _PASS_ATTEMPTS:
                    raise RuntimeError(f"fastkern: {deadline.task} lost a worker in each of "
                                       f"{_PASS_ATTEMPTS} attempts ({type(exc).__name__}: "
                                       f"{exc})") from exc
                time.sleep(max(0.0, min(_RETRY_PAUSE, deadline.remaining())))

    def _run_once(self, V, A, deadline):
        client = self.client

        def scatter(data, name):
            # No broadcast: Scheduler.replicate never returns if a worker dies
            # while it copies.  Tasks fetch X and V from the worker holding
            # them.  Fresh keys every pass (hash=False): reusing a key races
            # with the release of the previous pass's future.  The scheduler's
            # own wait for a worker ends before the deadline, so that its
            # TimeoutError reaches a client still listening: raised after the
            # client gave up, it is left unretrieved in the scheduler's loop.
            remaining = deadline.remaining()
            return deadline.call(f"the scatter of {name}", client.scatter, data, hash=False,
                                 timeout=max(min(0.8 * remaining, remaining - 1.0), 0.001))

        host_threads = _host_threads(deadline.call("the workers' thread counts",
                                                   client.nthreads))
        Zf = scatter(self.Z, "X")
        Af = None if A is None else scatter(A, "the rows to transform")
        Vf = scatter(np.ascontiguousarray(V, dtype=np.float64), "V")
        futures = [client.submit(_block_task, Zf, Vf, Af, int(a), int(b), self.spec,
                                 self.n_threads, host_threads, pure=False, retries=3)
                   for a, b in zip(self.bounds[:-1], self.bounds[1:])]
        try:
            parts = deadline.gather(f"the {len(futures)} tasks and their results", futures)
        finally:
            # Releasing drops the tasks that have not run yet (cancel() would
            # be one more wait on the scheduler).
            for f in futures + [Zf, Af, Vf]:
                if f is not None:
                    f.release()
        return np.concatenate(parts, axis=0)


def connect(client, timeout):
    """The client to run on (the default one if None) and the checked timeout."""
    timeout = check_timeout(timeout)
    client = _get_client(client)
    _check_open(client)
    return client, timeout


# The (client, timeout) of the innermost fastkern.cluster block: a context
# variable, so that each thread and asyncio task has its own, as scikit-learn's
# config_context and joblib's parallel_backend.
_CLUSTER = contextvars.ContextVar("fastkern.cluster", default=(None, DEFAULT_TIMEOUT))


@contextlib.contextmanager
def cluster(client=None, *, timeout=DEFAULT_TIMEOUT):
    """Run KernelPCA's matrix-free kernel passes on a Dask cluster inside a ``with`` block.

    Within the block, ``KernelPCA.fit`` and ``fit_transform`` (eigen_solver
    "matrix-free" or "auto", not kernel="precomputed": another solver raises
    a ValueError) run each pass over the kernel matrix as tasks on the
    cluster, and the fitted estimator's ``transform`` keeps using it, with
    this timeout, after the block ends.  As scikit-learn's ``config_context``
    and joblib's ``parallel_backend("dask")``, the setting is kept out of the
    estimator's parameters (a client is not a parameter that ``clone`` can
    copy) and out of ``fit``'s arguments (which are data).  It holds for the
    thread (or asyncio task) that entered the block; blocks nest, the
    innermost one counting.

    Parameters
    ----------
    client : distributed.Client, default=None
        The cluster; None: distributed's default client (the last one
        created), as ``parallel_backend("dask")``.
    timeout : float, default=600.0
        Seconds (> 0) that bound each pass over the cluster, retries after
        a lost worker included, and the loading of a dask X: a lost cluster
        raises TimeoutError instead of hanging.

    Yields
    ------
    client : distributed.Client
        The client the block runs on.

    Raises
    ------
    ImportError
        Without the optional packages dask and distributed.
    TypeError
        If client is not a ``distributed.Client``.
    ValueError
        If timeout is not a number > 0, or client is None and there is no
        default client.
    RuntimeError
        If the client is closed.

    Examples
    --------
    >>> import numpy as np
    >>> from distributed import Client, LocalCluster
    >>> import fastkern
    >>> X = np.random.default_rng(0).normal(size=(500, 4))
    >>> kpca = fastkern.KernelPCA(3, kernel="rbf", eigen_solver="matrix-free")
    >>> with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
    ...                   dashboard_address=None) as lc, Client(lc) as client:
    ...     with fastkern.cluster(client, timeout=120):
    ...         Z = kpca.fit_transform(X)
    >>> Z.shape
    (500, 3)
    """
    settings = connect(client, timeout)
    token = _CLUSTER.set(settings)
    try:
        yield settings[0]
    finally:
        _CLUSTER.reset(token)


def active_cluster():
    """(client, timeout) of the innermost :func:`cluster` block; (None, 600.0) outside."""
    return _CLUSTER.get()


def fit_products(X, bounds, spec, *, n_threads=None, client, timeout=DEFAULT_TIMEOUT):
    """matmat(V) = K(X, X) @ V, each product one pass over the cluster.

    X is the validated training data (:func:`materialize`), bounds its row
    blocks (None: about four per worker thread).  Every pass must finish
    within ``timeout`` seconds.  ``n_threads`` is each task's OpenMP thread
    count (None: the worker's share of its host's cores, see the module
    docstring).
    """
    if bounds is None:
        bounds = _row_bounds(X.shape[0], client, timeout)
    passes = _Passes(client, X, bounds, spec, n_threads, timeout)
    return passes.run


def cross_product(X_fit, spec, X, V, bounds=None, *, n_threads=None, client,
                  timeout=DEFAULT_TIMEOUT):
    """K(X, X_fit) @ V with the passes on the cluster, in row blocks of X (``bounds``:
    the chunks of the dask array X came from, or None); n_threads as
    :func:`fit_products`'."""
    if bounds is None:
        bounds = _row_bounds(X.shape[0], client, timeout)
    passes = _Passes(client, X_fit, bounds, spec, n_threads, timeout)
    return passes.run(V, X)
