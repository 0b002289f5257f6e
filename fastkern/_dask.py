"""Matrix-free kernel PCA with the kernel passes run on a Dask cluster.

Install the optional extra with ``pip install "fastkern[dask]"`` (dask and
distributed).  Nothing here is imported unless it is used.

How it runs
-----------
``KernelPCA(eigen_solver="matrix-free", ...).fit(X)`` goes to the cluster
when X is a ``dask.array`` (on the default client) or a ``distributed.Client``
is given (``fit(X, client=client)``); without either it runs in-process with
OpenMP.  Each pass over the kernel matrix (one per product of the
eigensolver, plus one for the row means) scatters X and the current block V
to every worker (``client.scatter(..., broadcast=True)``) and submits one
task per row block of X, which computes K(X_block, X) @ V with the same
Cython tile loop as the in-process solver; the client concatenates the
results, and the eigensolver (``fastkern._eigen.block_eigsh``) runs on the
client.  Row blocks are the chunks of a dask array (which must be a single
chunk of columns) or, for a NumPy X, about four blocks per worker thread.
Tasks are pure functions of their inputs, so a worker that dies mid-pass is
replaced (by its nanny) and its tasks are rerun by the scheduler.

Threads
-------
A worker with T threads runs up to T tasks at once, so each task uses
max(1, C // T_host) OpenMP threads, where C is the number of cores the worker
process may use (its CPU affinity) and T_host is the total number of Dask
threads of all workers on that host: the threads of a host never exceed its
cores.  For example ``dask worker --nworkers 1 --nthreads 1`` on an 8-core
machine gives 8 OpenMP threads per task; ``--nworkers 2 --nthreads 2`` gives
2.  Setting the estimator's ``n_threads`` overrides the rule.

Using an existing cluster
-------------------------
::

    from distributed import Client
    client = Client("tcp://scheduler-host:8786")
    kpca = KernelPCA(n_components=5, eigen_solver="matrix-free")
    kpca.fit(X, client=client)               # or pass a dask array as X
"""
import os

import numpy as np

from fastkern._validation import check_array_2d, result_dtype

_MISSING = ("fastkern's Dask support needs the optional packages dask and distributed: "
            'pip install "fastkern[dask]"')


def _require():
    try:
        import dask.array  # noqa: F401
        import distributed
    except ImportError as exc:
        raise ImportError(_MISSING) from exc
    return distributed


def _get_client(client):
    distributed = _require()
    if client is None:
        try:
            return distributed.default_client()
        except ValueError:
            raise ValueError("a dask array X needs a distributed.Client: create one "
                             "(distributed.Client(...)) or pass client=") from None
    if not isinstance(client, distributed.Client):
        raise TypeError(f"client must be a distributed.Client, got {type(client).__name__}")
    return client


def _checked_block(block):
    return check_array_2d(block, "X")


def materialize(X, name="X"):
    """A validated NumPy X and its row-block boundaries (dask chunks, or None).

    Each chunk of a dask array is checked for NaN/inf on the worker that
    computes it; a chunked column axis is refused before anything runs.
    """
    if type(X).__module__.startswith("dask.") and type(X).__name__ == "Array":
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
        X = X.map_blocks(_checked_block, dtype=X.dtype).compute()
        X = check_array_2d(X, name)
        return np.ascontiguousarray(X, dtype=result_dtype(X)), bounds
    return X, None


def _row_bounds(n, client):
    from fastkern._matfree import tile_size

    threads = sum(client.nthreads().values()) or 1
    per = max(tile_size, -(-n // (4 * threads)))
    per = -(-per // tile_size) * tile_size
    return np.append(np.arange(0, n, per), n)


def _host_threads(client):
    hosts = {}
    for addr, nthreads in client.nthreads().items():
        host = addr.rsplit(":", 1)[0]
        hosts[host] = hosts.get(host, 0) + nthreads
    return hosts


def _task_threads(host_threads, n_threads):
    if n_threads is not None:
        return n_threads
    from distributed import get_worker

    host = get_worker().address.rsplit(":", 1)[0]
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return max(1, cores // max(1, host_threads.get(host, 1)))


def _block_task(Z, V, A, start, stop, params, host_threads, n_threads):
    """K(rows, Z) @ V on a worker; rows are Z[start:stop] or, if A is given, A[start:stop]."""
    from fastkern.large_n import KernelOperator

    op = KernelOperator(Z, n_threads=_task_threads(host_threads, n_threads), **params)
    rows = (Z if A is None else A)[start:stop]
    if V is None:
        return op.row_sums(rows)[:, None]
    return op.matmat(V, rows)


# Attempts per kernel pass when a worker's connection is lost mid-pass.
_PASS_ATTEMPTS = 3


class _Passes:
    """One scatter + one task per row block for every product with K."""

    def __init__(self, client, Z, bounds, params, n_threads, timeout):
        self.client = client
        self.Z = Z
        self.bounds = bounds
        self.params = params
        self.n_threads = n_threads
        self.timeout = timeout

    def run(self, V, A=None):
        """K(X_rows, X) @ V over the cluster, retried if a connection is lost.

        The scheduler reruns the tasks of a worker that dies, but not a
        client's scatter to it, which then fails with CommClosedError (an
        OSError).  A pass is a pure function of its inputs, so it is run
        again once a worker is available.  Timeouts are not retried: a lost
        cluster fails within the pass timeout instead of hanging.
        """
        for attempt in range(_PASS_ATTEMPTS):
            try:
                return self._run_once(V, A)
            except TimeoutError:
                raise
            except OSError:
                if attempt == _PASS_ATTEMPTS - 1:
                    raise
                self.client.wait_for_workers(
                    1, timeout=self.timeout if self.timeout is not None else 60)

    def _run_once(self, V, A):
        import distributed

        client = self.client
        limit = {} if self.timeout is None else {"timeout": self.timeout}
        # Fresh keys every pass (hash=False): reusing a key races with the
        # release of the previous pass's future; X is small next to a pass.
        Zf = client.scatter(self.Z, broadcast=True, hash=False, **limit)
        Af = None if A is None else client.scatter(A, broadcast=True, hash=False, **limit)
        Vf = None if V is None else client.scatter(np.ascontiguousarray(V, dtype=np.float64),
                                                   broadcast=True, hash=False,
                                                   **limit)
        host_threads = _host_threads(client)
        futures = [client.submit(_block_task, Zf, Vf, Af, int(a), int(b), self.params,
                                 host_threads, self.n_threads, pure=False, retries=3)
                   for a, b in zip(self.bounds[:-1], self.bounds[1:])]
        try:
            distributed.wait(futures, timeout=self.timeout)
            parts = client.gather(futures)
        finally:
            client.cancel(futures)
        return np.concatenate(parts, axis=0)


def _params(est):
    from fastkern._kernel_api import check_kernel_param

    check_kernel_param(est.kernel)
    return {"kernel": est.kernel, "gamma": est.gamma, "degree": est.degree,
            "coef0": est.coef0, "kernel_params": est.kernel_params}


def fit_kernel_pca(est, X, *, client=None, timeout=None):
    """Matrix-free fit of ``est`` with the kernel passes on a Dask cluster.

    timeout: seconds to wait for one pass before raising (None: no limit).
    """
    from fastkern import large_n

    client = _get_client(client)
    if est.eigen_solver == "nystrom":
        raise ValueError("eigen_solver='nystrom' runs in-process; the Dask backend "
                         "implements the matrix-free solver")
    X, bounds = materialize(X)
    _, X = large_n._validate_fit(est, X)
    if bounds is None:
        bounds = _row_bounds(X.shape[0], client)
    passes = _Passes(client, X, bounds, _params(est), est.n_threads, timeout)
    large_n.solve_matrix_free(est, X, passes.run, lambda: passes.run(None)[:, 0])
    return est


def cross_product(est, X, V, *, client=None, timeout=None):
    """K(X, X_fit_) @ V with the passes on the cluster (row blocks of X)."""
    client = _get_client(client)
    X, bounds = materialize(X)
    if bounds is None:
        bounds = _row_bounds(X.shape[0], client)
    passes = _Passes(client, est.X_fit_, bounds, _params(est), est.n_threads, timeout)
    return passes.run(V, X)
