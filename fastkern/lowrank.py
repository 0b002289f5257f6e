"""Low-rank kernel tools: pivoted incomplete Cholesky and kernel width estimates.

``incomplete_cholesky`` factors K ~ G G^T from the columns of K at greedily
chosen pivots, never forming K (O(n rank) memory, plus a transposed copy of X
for RBF/Laplacian; O(n rank^2) time).  ``pivot_features`` extends the factor to
new points (the Nystroem map on the pivots), as the estimators' low-rank
solvers use it.
``estimate_gamma`` (from ``fastkern._gamma``, exported here too) picks an RBF
``gamma`` from the distribution of squared distances: the median heuristic, or
kernlab's ``sigest``.
"""
import math
import time
import warnings
from typing import NamedTuple

import numpy as np
from scipy import linalg
from sklearn.exceptions import ConvergenceWarning

from fastkern import _gram, _inchol
from fastkern._gamma import GammaEstimate, estimate_gamma
from fastkern._kernel_api import KernelSpec, check_kernel_param
from fastkern._threads import SERIAL_MULTIPLY_ADDS, StepThreads, cores_free, threads_for
from fastkern._validation import check_array_2d, check_int, check_n_threads, check_real

__all__ = ["IncompleteCholesky", "GammaEstimate", "incomplete_cholesky", "estimate_gamma"]

# Rows per call of the Gram code when reading the diagonal of K: each call
# computes a DIAG_BLOCK x DIAG_BLOCK block (one tile of the Gram code) and
# keeps its diagonal, which costs DIAG_BLOCK / rank of the pivot columns' work
# and amortises the call overhead (measured at N=100,000, d=16: 64 and 256
# rows take the same time, 1024 four times as long).
DIAG_BLOCK = 128
# Residuals at or below ROUNDING * eps * max(diag K) are rounding errors of
# the kernel values and of the running update: a pivot there would add a
# column of noise, so the factorisation stops (the numerical rank).
ROUNDING = 4.0
# Candidate pivots whose columns one pass prepares (``_Candidates``), and the
# most memory their partial columns may take (then fewer, at least
# MIN_CANDIDATES, else no pass).
CANDIDATES = 32
MIN_CANDIDATES = 8
CANDIDATE_BYTES = 64 << 20
# Passes start once Gt[:k] holds this many bytes.  Below, a step reads it from
# the caches about as fast as a pass computes, and the pass's unused
# candidates are lost work: on a 2-core AMD EPYC (32 MB of L3), starting at
# 4 MB made N=5000, rank 200 1.2x slower.
PREPARE_FROM_BYTES = 8 << 20
# ... and from step max(PREPARE_FROM_STEP, PREPARE_PER_FEATURE * d) on: a pass
# also computes the kernel columns of all its candidates (O(c n d), and an
# exp each), which before that outweighed the sums it saves (N=100,000, d=8,
# rank 60: 1.15x slower with passes from step 11).  With both rules no size
# measured (N = 2000 to 200,000, d = 8 to 64, rank 40 to 800) was slower
# than without passes.
PREPARE_FROM_STEP = 64
PREPARE_PER_FEATURE = 2
# With n_threads=None, a factorisation of at most this many multiply-adds
# (n max_rank^2 / 2) runs on the cores that no other process is running on
# when it starts (``_threads.cores_free``), as an estimator method's short
# work does (``_threads.LOAD_AWARE_ROWS``): its pivot steps' chooser
# otherwise times n_threads every 16 steps, and on a busy machine such a
# step can wait a time slice for a descheduled thread.  Longer runs keep the
# chooser, which follows a load that changes during them.  1e9 is about 0.4 s
# on one core of a 2-core AMD EPYC (N = 5000, rank 200, 1e8: 37 ms).
LOAD_AWARE_MADDS = 1e9


class _Candidates:
    """The columns of likely next pivots, prepared in one pass over Gt.

    A pivot step subtracts G[p, :k] Gt[:k] from the kernel column: it reads
    all of Gt[:k] for one column, so past the caches it runs at the memory's
    speed.  The next pivots are nearly always among the rows of largest
    residual now (each pivot lowers the residuals of its neighbours, not of
    rows far from it): on RBF data, the 32 largest held the next 18 pivots on
    average.  So a pass (``_inchol.prepare``) subtracts the sums for those
    rows together, reading each part of Gt once for all of them; the step of
    such a pivot then adds only the columns made since the pass.  The
    columns are the plain step's bit for bit (the same arithmetic in the
    same order), so the passes change the time alone.  A pivot outside the
    candidates, or one as many steps after the pass as there are candidates,
    starts a new pass.
    """

    def __init__(self, n, count):
        self.W = np.empty((count, n))
        self.slot = np.full(n, -1, dtype=np.intp)
        self.rows = np.empty(0, dtype=np.intp)
        self.start = 0
        self.batch = 0

    def partial(self, Gt, k, p, resid, X, Xt, kind, kparams, threads):
        """(W row, j0) for step k's pivot p: its column less the terms j < j0."""
        count = self.W.shape[0]
        s = self.slot[p] if k - self.start < count else -1
        if s < 0:
            self.slot[self.rows] = -1
            n = resid.shape[0]
            rows = np.argpartition(resid, n - count)[n - count:]
            if not (rows == p).any():
                # Tied for the largest residual with more than `count` rows.
                rows[0] = p
            self.rows = rows
            self.slot[rows] = np.arange(count)
            gc = np.ascontiguousarray(Gt[:k, rows].T, dtype=np.float64)
            self.batch = _inchol.prepare(Gt, k, rows, gc, self.W, X, Xt, kind, kparams,
                                         threads, self.batch)
            self.start = k
            s = self.slot[p]
        return self.W[s], self.start


class IncompleteCholesky(NamedTuple):
    """Result of :func:`incomplete_cholesky`, a named tuple.

    Parameters
    ----------
    G : ndarray of shape (n_samples, rank)
        Fortran order (its columns are contiguous), K ~ G G^T.
    pivots : ndarray of shape (rank,)
        The pivot rows (int), in the order they were chosen.
    residual_trace : ndarray of shape (rank + 1,)
        The float64 trace(K - G_k G_k^T) after k pivots (entry 0 is trace(K)).
    max_residual : ndarray of shape (rank + 1,)
        The largest diagonal entry of K - G_k G_k^T after k pivots (float64); the
        first `rank` entries are kernlab's ``maxresiduals``, and the
        factorisation stopped because the last one is <= tol (or rank reached
        max_rank, or the rounding level).
    """

    G: np.ndarray
    pivots: np.ndarray
    residual_trace: np.ndarray
    max_residual: np.ndarray


def _check_kernel(kernel):
    if isinstance(kernel, str) and kernel == "precomputed":
        raise ValueError("kernel='precomputed' is not supported: incomplete_cholesky "
                         "evaluates columns of the kernel of X; for a given matrix K use "
                         "a (pivoted) Cholesky of K itself")
    check_kernel_param(kernel)


def _diagonal(X, spec):
    """diag(K), from DIAG_BLOCK x DIAG_BLOCK Gram blocks (so any kernel works).

    One thread: a block is a single tile, so more threads would only add the
    cost of starting a parallel region to every block.
    """
    n = X.shape[0]
    diag = np.empty(n)
    for start in range(0, n, DIAG_BLOCK):
        block = spec.gram(X[start:start + DIAG_BLOCK], n_threads=1)
        diag[start:start + block.shape[0]] = np.diagonal(block)
    return diag




def incomplete_cholesky(X, kernel="rbf", *, gamma=None, degree=3, coef0=1,
                        kernel_params=None, tol=1e-6, max_rank=None, n_threads=None,
                        centered=False):
    """Compute a pivoted incomplete Cholesky factor of the kernel matrix of X: K ~ G G^T.

    Greedy pivoting, as kernlab's ``inchol``: each step takes the row p with
    the largest residual diagonal r_p (the first such row on ties), computes
    the kernel column K[:, p], and appends

        G[:, k] = (K[:, p] - G[:, :k] G[p, :k]^T) / sqrt(r_p),

    then r -= G[:, k]^2.  K itself is never formed.  For the RBF and
    Laplacian kernels one parallel pass per pivot computes the kernel column
    from direct differences x_i - x_p (no cancellation whatever the data's
    offset), the update, the residuals and the next pivot; other kernels
    compute the column with fastkern's Gram code first.  Once G no longer
    fits in the caches, the RBF and Laplacian steps take the sums of the
    likely next pivots (the rows of largest residual) in one pass over G for
    several steps, instead of one pass each, with the same arithmetic: the
    factor is the same bit for bit.  Memory: n x rank for G, plus a
    transposed copy of X (n x d, RBF/Laplacian), those pivots' columns (32 x
    n float64, at most 64 MB) and O(n).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Finite data.  float32 input gives a float32 G (kernel columns in
        float32, the update accumulated in float64).
    kernel : str, Kernel or callable, default="rbf"
        A fastkern string kernel ("rbf", "laplacian", "linear", "poly",
        "sigmoid", "exponential"), a fastkern kernel object or a callable.
        "precomputed" is refused.
    gamma : float or {"scale", "median"}, default=None
        Kernel coefficient, as the estimators take it: None is 1 / n_features;
        "scale" and "median" as the estimators, 1 / (n_features X.var()) and the
        median heuristic of :func:`estimate_gamma`.
    degree : float, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1
        Constant term of the polynomial and sigmoid kernels.
    kernel_params : dict, default=None
        Further parameters of a callable kernel, as the estimators take them.
    tol : float, default=1e-6
        The bound (>= 0) on the largest residual diagonal.
    max_rank : int, default=None
        The most pivots (>= 1); None means n, and values above n mean n.
    n_threads : int, default=None
        The most threads used; None means OpenMP's default, and for a short
        run (max_rank given, n * max_rank^2 / 2 <= ``LOAD_AWARE_MADDS``
        multiply-adds) at most the cores no other process is running on
        when it starts, or one thread where every step is below the serial
        threshold (n * (max_rank + d) < ``SERIAL_MULTIPLY_ADDS``).  Each pivot step
        runs on 1 or n_threads threads, whichever has been faster per unit of
        work on recent steps (both re-timed as it goes): on a loaded machine a
        parallel step can be slower than a serial one.  The result does not
        depend on the thread count.
    centered : bool, default=False
        Make tol relative to the centred kernel, for a factor that serves the
        double-centred Gram (kernel PCA): stop when the largest residual
        diagonal is <= tol * ||Gc||_F^2 / n, the mean diagonal of the centred
        approximation Gc Gc^T (Gc = G less its column means), which grows
        towards trace(K~) / n.  The centred residual H (K - G G^T) H has trace
        at most that of K - G G^T, so its eigenvalues are then small next to
        the centred kernel's whatever K's offset: an RBF of tiny gamma is
        nearly constant (K_ij = 1 - O(gamma)), and the absolute rule stopped
        it after one pivot with the centred spectrum, O(gamma), lost.

    Returns
    -------
    IncompleteCholesky
        The named tuple (G, pivots, residual_trace, max_residual).

    See Also
    --------
    pivot_features : The rows of G for new points.

    Notes
    -----
    Stopping rule (kernlab's, so that ranks and pivots agree with it): before
    each step the largest residual diagonal max_i r_i is compared with
    ``tol``; the factorisation stops when it is <= tol.  Since the residual
    K - G G^T is positive semi-definite for a positive definite kernel, every
    entry of it is then at most tol in absolute value.  (kernlab calls this
    value ``residue`` and records it in ``maxresiduals``; its default tol is
    0.001.)  It also stops after ``max_rank`` pivots, and when max_i r_i is
    at the rounding level of K, 4 * eps * max_i K_ii with eps of the working
    precision, where a further column would be noise (so exactly
    rank-deficient kernels stop at their rank even with tol=0).  The trace of
    the residual, sum_i r_i (the nuclear norm of K - G G^T), is reported at
    every step in ``residual_trace``.  Stopped by max_rank with the largest
    residual diagonal still above tol (and the rounding level), it issues a
    ConvergenceWarning giving tol, max_rank and that residual.

    Ctrl-C is honoured between pivots and within a long step.

    Examples
    --------
    >>> import numpy as np
    >>> from fastkern import incomplete_cholesky
    >>> X = np.random.default_rng(0).normal(size=(100, 3))
    >>> res = incomplete_cholesky(X, "rbf", gamma=0.5, tol=1e-3)
    >>> bool(res.max_residual[-1] <= 1e-3), res.G.shape[0]
    (True, 100)
    """
    _check_kernel(kernel)
    X = _check_X(X)
    spec = KernelSpec.from_params(kernel, gamma=gamma, degree=degree, coef0=coef0,
                                  kernel_params=kernel_params, X=X)
    return factor(X, spec, tol=tol, max_rank=max_rank, n_threads=n_threads, centered=centered)


def _check_X(X):
    X = check_array_2d(X, "X")
    return np.ascontiguousarray(X, dtype=np.float32 if X.dtype == np.float32 else np.float64)


def factor(X, spec, *, tol=1e-6, max_rank=None, n_threads=None, centered=False):
    """:func:`incomplete_cholesky` of a kernel given as a ``KernelSpec``.

    The estimators' route: they hand over their fitted ``kernel_spec_``
    (gamma already resolved) rather than loose kernel arguments.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Training rows.
    spec : fastkern._kernel_api.KernelSpec
        The kernel (not "precomputed").
    tol : float, default=1e-6
        As :func:`incomplete_cholesky`'s.
    max_rank : int or None, default=None
        As :func:`incomplete_cholesky`'s.
    n_threads : int or None, default=None
        As :func:`incomplete_cholesky`'s.
    centered : bool, default=False
        As :func:`incomplete_cholesky`'s.

    Returns
    -------
    result : IncompleteCholesky
        As :func:`incomplete_cholesky`'s.
    """
    _check_kernel(spec.kernel)
    X = _check_X(X)
    n, d = X.shape
    tol = check_real(tol, "tol", low=0.0)
    max_rank = check_int(max_rank, "max_rank", 1, allow_none=True)
    rank_given = max_rank is not None
    max_rank = n if max_rank is None else min(max_rank, n)
    default = n_threads is None
    n_threads = check_n_threads(n_threads)
    if default and n_threads > 1 and rank_given:
        if n * (max_rank + d) < SERIAL_MULTIPLY_ADDS:
            # Every step, the last and largest too, is below the serial
            # threshold: the chooser's probes of n_threads and a reading of
            # the load (0.6 ms beside busy processes) would be all the threads
            # add (N = 1000, rank 50, one thread 1.2 ms: 1.8 ms busy).
            n_threads = 1
        elif n * max_rank ** 2 / 2 <= LOAD_AWARE_MADDS:
            n_threads = min(n_threads, cores_free())
    if not isinstance(centered, (bool, np.bool_)):
        raise TypeError(f"centered must be a bool, got {centered!r}")
    dtype = X.dtype
    compiled = spec.compiled(d)
    if compiled is not None and compiled.kind in _inchol.DIRECT_KINDS:
        # exp(-gamma * 0) on the diagonal.
        kind, kparams = compiled
        resid = np.ones(n)
        Xt = np.ascontiguousarray(X.T)
    else:
        kind, kparams = _inchol.GIVEN, _gram.pack_params({})
        resid = _diagonal(X, spec)
        Xt = np.empty((0, 0), dtype=dtype)
    if not np.all(np.isfinite(resid)):
        raise ValueError("the kernel's diagonal k(x, x) is not finite for some rows of X "
                         "(e.g. an exponential kernel overflowing): choose a smaller gamma")
    floor = ROUNDING * np.finfo(dtype).eps * max(float(resid.max()), 0.0)

    # Gt[j] is column j of G.  Without max_rank the capacity grows by
    # doubling with ndarray.resize, a realloc that large allocations do by
    # remapping pages rather than copying them.
    capacity = max_rank if max_rank <= 64 or max_rank < n else min(64, n)
    Gt = np.empty((capacity, n), dtype=dtype)
    pivots, traces, maxima = [], [], []
    column_threads = threads_for(n_threads, n * d, serial_below=SERIAL_MULTIPLY_ADDS)
    chooser = StepThreads(n_threads)
    count = min(CANDIDATES, CANDIDATE_BYTES // (8 * max(n, 1)), n)
    candidates = (_Candidates(n, count) if kind != _inchol.GIVEN and count >= MIN_CANDIDATES
                  else None)
    k = 0
    p = int(np.argmax(resid))
    top = float(resid[p])
    trace = float(np.sum(resid))
    # ||Gc||_F^2 / n, the mean diagonal of the centred approximation (centered=True).
    centred_scale = 0.0
    while True:
        if not (math.isfinite(top) and math.isfinite(trace)):
            raise ValueError("the kernel returned values that are not finite")
        maxima.append(top)
        traces.append(trace)
        bound = tol * centred_scale if centered else tol
        if top <= bound or top <= floor:
            break
        if k == max_rank:
            if k == n:
                break
            target = f" (against tol * mean centred diagonal = {bound:.3g})" if centered else ""
            warnings.warn(f"incomplete_cholesky stopped at max_rank={max_rank} before "
                          f"reaching tol={tol:g}: the largest residual diagonal of K - G G^T "
                          f"is {top:.3g}{target}; raise max_rank, or accept the coarser "
                          "factor", ConvergenceWarning, stacklevel=2)
            break
        if k == capacity:
            capacity = min(2 * capacity, max_rank)
            Gt.resize((capacity, n), refcheck=False)
        if kind == _inchol.GIVEN:
            # As a 1 x n row: the Gram code's tiles are then 1 x 256 (long
            # vectorised rows) rather than 128 x 1 (measured 1.3x faster at d=16).
            spec.gram(X[p:p + 1], X, out=Gt[k].reshape(1, n), n_threads=column_threads)
        gp = np.array(Gt[:k, p], dtype=np.float64)
        threads = chooser.pick(k)
        partial, j0 = None, 0
        if (candidates is not None and k >= max(PREPARE_FROM_STEP, PREPARE_PER_FEATURE * d)
                and k * n * Gt.itemsize >= PREPARE_FROM_BYTES):
            partial, j0 = candidates.partial(Gt, k, p, resid, X, Xt, kind, kparams, threads)
        start = time.perf_counter()
        chooser.batch[threads], p_next, top, trace = _inchol.step(
            Gt, k, p, gp, math.sqrt(top), resid, X, Xt, kind, kparams, threads,
            chooser.batch[threads], partial, j0)
        chooser.record(threads, time.perf_counter() - start, n * (k - j0 + d))
        if centered:
            column = Gt[k].astype(np.float64)
            column -= column.mean()
            centred_scale += float(column @ column) / n
        pivots.append(p)
        p = int(p_next)
        k += 1
    if k < capacity:
        Gt.resize((k, n), refcheck=False)
    return IncompleteCholesky(Gt.T, np.asarray(pivots, dtype=np.intp),
                              np.asarray(traces), np.asarray(maxima))


def pivot_features(K_cross, L):
    """Compute the rows of an incomplete Cholesky factor for new points.

    The Nystroem map on the pivots: since G G^T reproduces K on the pivot
    columns, G = K[:, pivots] L^-T, so on training points the result gives back
    the rows of G, and g(x) g(y)^T is the Nystroem approximation
    k_P(x) K_PP^-1 k_P(y).

    Parameters
    ----------
    K_cross : array-like of shape (n_queries, rank)
        The kernel k(X_new, X[pivots]).
    L : ndarray of shape (rank, rank)
        G[pivots], lower triangular up to rounding (a pivot's residual is 0 in
        later columns).

    Returns
    -------
    g : ndarray of shape (n_queries, rank)
        The solution of L g(x)^T = k(X[pivots], x), float64.
    """
    K_cross = np.asarray(K_cross, dtype=np.float64)
    if L.shape[0] == 0:
        return np.zeros((K_cross.shape[0], 0))
    return linalg.solve_triangular(L, K_cross.T, lower=True, check_finite=False).T
