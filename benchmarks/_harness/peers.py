"""The Gram computations a user would otherwise pick (``fastkern bench``'s peers).

What a competent user would write with each package (:data:`PEERS`), each
run only when its package is importable (imports are lazy): the RBF Gram
with numba (a parallel jitted loop) and numexpr (BLAS X X^T, then one
numexpr expression), and, for the product K @ V with V of
:data:`MATVEC_COLUMNS` columns ("matvec"), pykeops on the CPU, a reduction
library that never materialises the Gram, against fastkern's matrix-free
product.  JIT compilation (numba) and pykeops' C++ build happen in the
untimed warm-up run of each measurement.
"""
import contextlib
import io

import numpy as np

PEERS = ("numba", "numexpr", "pykeops")
# The tasks each peer implements.  pykeops has no dense-Gram output: its
# natural use, and the honest comparison, is the kernel product K @ V.
PEER_TASKS = {"numba": ("gram",), "numexpr": ("gram",), "pykeops": ("matvec",)}
MATVEC_COLUMNS = 5


_numba_gram = None


def _numba_kernel():
    """The jitted RBF Gram, compiled on first call (cached on disk)."""
    global _numba_gram
    if _numba_gram is None:
        import numba

        # What a numba user writes for speed: the cross products by BLAS
        # (np.dot), then the exp in a parallel pass over the rows.
        @numba.njit(parallel=True, fastmath=False, cache=True)
        def gram(X, gamma):
            n = X.shape[0]
            sq = np.empty(n)
            for i in range(n):
                sq[i] = np.dot(X[i], X[i])
            K = np.dot(X, X.T)
            for i in numba.prange(n):
                for j in range(n):
                    K[i, j] = np.exp(-gamma * max(sq[i] + sq[j] - 2.0 * K[i, j], 0.0))
            return K

        _numba_gram = gram
    return _numba_gram


def numba_rbf_gram(X, gamma):
    """RBF Gram by a numba-jitted function: BLAS X X^T, then a prange pass for the exp."""
    return _numba_kernel()(np.ascontiguousarray(X, dtype=np.float64), float(gamma))


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


def unavailable(package, pip_name=None):
    """Why a peer's package cannot run here, or None if it imports.

    Not installed, or installed but failing at import (hyppo 0.5.2 with SciPy
    1.17 raises AttributeError there): a broken peer is skipped with its
    error rather than ending the run.
    """
    import importlib
    import importlib.util

    try:
        found = importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        return f"not installed (pip install {pip_name or package})"
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            importlib.import_module(package)
    except Exception as exc:  # noqa: BLE001 - any failure of a third-party import
        return f"fails to import: {type(exc).__name__}: {exc}"
    return None


def peer_status():
    """{peer: None if its package imports, else why it is skipped}."""
    return {name: unavailable(name) for name in PEERS}


