"""The matrix-free kernel operator: products with K(A, X) without storing K.

``KernelOperator`` returns K(A, X) @ V computed tile by tile
(``fastkern._matfree``) for the kernels the compiled loops have, and in row
blocks through ``KernelSpec.gram`` for the others.  It knows nothing of
eigensolvers or estimators: ``fastkern.large_n``'s solvers and the Dask
backend's tasks (``fastkern._dask``) call it.

Passes over K report how far they have got to the sink installed by
:func:`reporting_progress` (``fastkern._progress``: the command line's progress bar).
"""
import numpy as np

from fastkern import _gram, _matfree, _sparse
from fastkern._kernel_api import CompiledKernel, KernelSpec
from fastkern._progress import report_fraction as _report_fraction
from fastkern._progress import reporting_progress
from fastkern._threads import blas_limit
from fastkern._validation import check_n_threads
from fastkern.pairwise import tile_path, tile_scale

__all__ = ["KernelOperator", "cross_kernel_times", "kernel_times", "reporting_progress"]

_TILE = _matfree.tile_size


class KernelOperator:
    """Products with K(A, X) for fixed training rows X, without storing the kernel.

    String kernels (and fastkern's named kernel objects) run the Cython tile
    loop of ``fastkern._matfree``; other kernels (callables, composed kernel
    objects) are evaluated in row blocks by ``KernelSpec.gram`` and multiplied
    by NumPy; "precomputed" multiplies the given kernel matrix.

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Training rows (C-contiguous float32 or float64), or the kernel matrix
        for kernel="precomputed".
    kernel : str, Kernel or callable, default="rbf"
        As the estimators' ``kernel``.
    gamma : float, "scale", "median" or None, default=None
        Kernel width; a string is resolved on X.
    degree : float, default=3
        Polynomial degree.
    coef0 : float, default=1
        Polynomial and sigmoid constant.
    kernel_params : dict, default=None
        Overrides the above for string kernels; the parameters of a callable.
    n_threads : int, default=None
        OpenMP threads (None: the default).
    memory_budget : int, default=None
        Bytes the products' temporaries may use (fewer threads or smaller
        row blocks rather than more); None: one tile per thread.
    """

    def __init__(self, X, *, kernel="rbf", gamma=None, degree=3, coef0=1,
                 kernel_params=None, n_threads=None, memory_budget=None):
        spec = KernelSpec.from_params(kernel, gamma=gamma, degree=degree, coef0=coef0,
                                      kernel_params=kernel_params, X=X)
        self._setup(X, spec, n_threads, memory_budget)

    @classmethod
    def from_spec(cls, X, spec, *, n_threads=None, memory_budget=None):
        """Build the operator of a kernel specification on training rows X.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Training rows.
        spec : fastkern._kernel_api.KernelSpec
            The kernel and its parameters.
        n_threads : int, default=None
            OpenMP threads (None: the default).
        memory_budget : int, default=None
            As the constructor's.

        Returns
        -------
        op : KernelOperator
        """
        op = cls.__new__(cls)
        op._setup(X, spec, n_threads, memory_budget)
        return op

    def _setup(self, X, spec, n_threads, memory_budget, largest=None):
        self.X = X
        self.kernel_spec = spec
        self.n_threads = check_n_threads(n_threads)
        self.budget = memory_budget
        self.compiled = spec.compiled(X.shape[1])
        if self.compiled is not None:
            # Data whose squares leave the dtype's range (X of 1e154 in
            # float64) is brought near 1 by a power of two, with gamma to
            # match, as the Gram functions do (pairwise._rescaled); largest:
            # the largest |value| of X and the rows it will meet.
            self._compiled_in = self.compiled
            self.largest = (_sparse.max_abs(np.ravel(X)) if largest is None else largest)
            self._tile_rows, params, self.shift = tile_scale(self.compiled.kind, X,
                                                             self.compiled.params, self.largest)
            if self.shift:
                self.compiled = CompiledKernel(self.compiled.kind, params)
            self._setup_tiles(self.compiled)
        elif not spec.precomputed:
            # One block of rows of K(A, X) at a time, in float64.
            rows = _TILE if memory_budget is None else memory_budget // (8 * X.shape[0])
            if rows < 1:
                raise ValueError(
                    f"memory_budget={memory_budget} bytes is too small for one row of "
                    f"the kernel matrix ({8 * X.shape[0]} bytes)")
            self.block_rows = int(min(rows, _TILE))

    def _setup_tiles(self, spec):
        X = self._tile_rows
        # The centred rows are made once here, not per product: no row minimum.
        path = tile_path(spec.kind, X.shape[1], X.dtype)
        self.direct = path == "direct"
        per_thread = _TILE * _TILE * (X.itemsize + (8 if X.dtype == np.float32 else 0))
        if self.budget is not None:
            if self.budget < per_thread:
                raise ValueError(
                    f"memory_budget={self.budget} bytes is too small for one "
                    f"{_TILE} x {_TILE} kernel tile ({per_thread} bytes)")
            # Fewer threads rather than more memory than the caller allowed.
            self.n_threads = max(1, min(self.n_threads, self.budget // per_thread))
        self.Xt = np.ascontiguousarray(X.T) if self.direct else X
        # The BLAS path of the squared-distance kernels works on rows centred in
        # float64 (see fastkern._gram):
        # O(N d) more memory, outside the tile budget.
        self.mean = None
        self.Xc, self.xn = np.empty((0, X.shape[1])), np.empty(0)
        self.Xct = np.empty((0, 0))
        if _gram.kind_geometry(spec.kind) == "sqdist" and not self.direct:
            self.mean = _gram.common_mean(X)
            self.Xc, self.xn = _gram.centred_rows(X, self.mean, self.n_threads)
            if path == "dot":
                self.Xct = _gram.transposed(self.Xc, self.n_threads)
        self.tiles = np.empty((self.n_threads, _TILE * _TILE), dtype=X.dtype)
        self.dtiles = np.empty((self.n_threads, _TILE * _TILE) if X.dtype == np.float32
                               else (1, 1))

    def matmat(self, V, A=None):
        """Compute K(A, X) @ V.

        Parameters
        ----------
        V : array-like of shape (n_samples, b)
            The block to multiply (converted to C-contiguous float64).
        A : ndarray of shape (n_A, n_features), default=None
            Rows of the kernel's first argument; None means X itself.

        Returns
        -------
        KV : ndarray of shape (n_A, b)
            The product, in float64.
        """
        V = np.ascontiguousarray(V, dtype=np.float64)
        return self._product(V, A)

    @property
    def has_symmetric_product(self):
        """Whether :meth:`symmetric_matmat` is available (float64 X, a compiled kernel)."""
        return self.compiled is not None and self.X.dtype == np.float64

    def symmetric_matmat(self, V):
        """Compute K(X, X) @ V from the tiles on and above the diagonal only.

        Half the kernel evaluations of :meth:`matmat`.  The tiles are summed
        into 2 n_threads buffers of shape (n, b), each in a fixed order, and
        the buffers are dealt to the threads dynamically, so a thread slowed
        by another process holds up no other; the result is the same run to
        run for a given thread count (but not across thread counts).

        Parameters
        ----------
        V : array-like of shape (n_samples, b)
            The block to multiply (converted to C-contiguous float64).

        Returns
        -------
        KV : ndarray of shape (n_samples, b)
            The product, in float64.

        Raises
        ------
        ValueError
            If the kernel has no compiled tile loop or X is not float64
            (:attr:`has_symmetric_product` is False).
        """
        if not self.has_symmetric_product:
            raise ValueError("the symmetric product needs float64 X and a kernel of the "
                             "compiled tile loops")
        spec = self.compiled
        V = np.ascontiguousarray(V, dtype=np.float64)
        if V.shape[1] == 0:
            return np.zeros(V.shape)
        # Two buffers per thread: enough slots to balance the threads.
        acc = np.empty((2 * self.n_threads,) + V.shape)
        # One float64 scratch value per thread: dtiles only serve float32 data.
        dtiles = np.empty((self.n_threads, 1))
        progress = _report_fraction()
        with blas_limit(1):
            return _matfree.symmetric_kernel_product(
                self._tile_rows, self.Xt, self.Xc, self.Xct, self.xn, V, acc, self.tiles,
                dtiles,
                spec.kind, spec.params, self.direct, self.n_threads, progress)

    def _product(self, V, A):
        symmetric = A is None
        if V.shape[1] == 0:
            return np.zeros(((self.X if symmetric else A).shape[0], 0))
        if self.compiled is None:
            return self._product_blocks(V, self.X if symmetric else A, symmetric)
        A = self._tile_rows if symmetric else A
        if not symmetric:
            most = _sparse.max_abs(np.ravel(A))
            if most > self.largest and tile_scale(self._compiled_in.kind, A[:1],
                                                  self._compiled_in.params,
                                                  most)[2] != self.shift:
                # Rows of another scale than X's: both at the scale of the two.
                both = type(self).__new__(type(self))
                both._setup(self.X, self.kernel_spec, self.n_threads, self.budget,
                            largest=most)
                return both._product(V, A)
            if self.shift:
                A = np.ldexp(A, np.int32(-self.shift)).astype(A.dtype, copy=False)
        progress = _report_fraction()
        spec = self.compiled
        out = np.empty((A.shape[0], V.shape[1]))
        Ac, an = self.Xc, self.xn
        if self.mean is not None and not symmetric:
            Ac, an = _gram.centred_rows(A, self.mean, self.n_threads)
        with blas_limit(1):
            _matfree.kernel_product(A, self._tile_rows, self.Xt, Ac, self.Xc, self.Xct, an,
                                    self.xn, V, out, self.tiles, self.dtiles, spec.kind,
                                    spec.params, self.direct, symmetric, self.n_threads,
                                    progress)
        return out

    def _product_blocks(self, V, A, symmetric):
        if self.kernel_spec.precomputed:
            return np.asarray(A, dtype=np.float64) @ V
        progress = _report_fraction()
        out = np.empty((A.shape[0], V.shape[1]))
        for i in range(0, A.shape[0], self.block_rows):
            block = self.kernel_spec.gram(A[i:i + self.block_rows], self.X,
                                         n_threads=self.n_threads)
            np.matmul(block, V, out=out[i:i + self.block_rows], dtype=np.float64)
            if progress is not None:
                progress(min(1.0, (i + self.block_rows) / A.shape[0]))
        return out


def kernel_times(spec, X, X_fit, V, *, n_threads=None):
    """K(X, X_fit) @ V with the kernel computed tile by tile and never stored, or None
    where the tile loops do not have it.

    The predictions and projections of the estimators that store their
    training rows.  Writing K(X, X_fit) out and reading it back for the
    product cost more than computing it (performance_history, "Small and
    mid sizes"), and no n_X x n_fit matrix is held.  Each row block of the result is summed by
    one thread in a fixed order (``fastkern._matfree.kernel_product``), so
    it does not depend on the thread count.

    Parameters
    ----------
    spec : fastkern._kernel_api.KernelSpec
        The kernel.
    X : ndarray of shape (n_X, n_features)
        New rows, dense.
    X_fit : ndarray of shape (n_fit, n_features)
        Training rows, dense.
    V : ndarray of shape (n_fit,) or (n_fit, b)
        The coefficients.
    n_threads : int, default=None
        OpenMP threads (None: the default).

    Returns
    -------
    KV : ndarray of shape (n_X,) or (n_X, b), or None
        The product in float64; None for a precomputed kernel, one without
        compiled tile loops (callables, composed kernel objects, cosine, the
        structured kernels), sparse input or empty V.
    """
    if spec.precomputed or not (_numeric_rows(X) and _numeric_rows(X_fit)) or V.size == 0:
        return None
    if spec.compiled(X_fit.shape[1]) is None:
        return None
    # float32 tiles only when both sides are float32, as the Gram functions.
    dtype = (np.float32 if X.dtype == np.float32 and X_fit.dtype == np.float32
             else np.float64)
    X = np.ascontiguousarray(X, dtype=dtype)
    X_fit = np.ascontiguousarray(X_fit, dtype=dtype)
    op = KernelOperator.from_spec(X_fit, spec, n_threads=n_threads)
    KV = op.matmat(V.reshape(V.shape[0], -1), X)
    return KV.reshape((X.shape[0],) + V.shape[1:])


def cross_kernel_times(spec, X, X_fit, V, *, n_threads=None):
    """K(X, X_fit) @ V: from the tiles (:func:`kernel_times`) where the compiled loops
    have the kernel, else from the Gram ``spec.gram(X, X_fit)``.

    Parameters
    ----------
    spec : fastkern._kernel_api.KernelSpec
        The kernel (not "precomputed").
    X : array-like, sparse matrix or list of shape (n_X, ...)
        New rows (strings, sets or graphs for the structured kernels).
    X_fit : array-like, sparse matrix or list of shape (n_fit, ...)
        Training rows.
    V : ndarray of shape (n_fit,) or (n_fit, b)
        The coefficients.
    n_threads : int, default=None
        OpenMP threads (None: the default).

    Returns
    -------
    KV : ndarray of shape (n_X,) or (n_X, b)
        The product (float64 from the tiles; the Gram's and V's promoted
        dtype from the Gram).
    """
    KV = kernel_times(spec, X, X_fit, V, n_threads=n_threads)
    if KV is None:
        KV = spec.gram(X, X_fit, n_threads=n_threads) @ V
    return KV


def _numeric_rows(A):
    """Whether A is a dense 2-D array of numbers (not sparse, not strings or graphs)."""
    return isinstance(A, np.ndarray) and A.ndim == 2 and A.dtype.kind in "biuf"
