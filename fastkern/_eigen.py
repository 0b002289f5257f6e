"""Eigensolvers for the top of a symmetric Gram spectrum.

``block_eigsh`` (KernelPCA's "block_krylov") only touches the operator
through ``matmat(V) = A @ V`` on a block of vectors, so the same code serves
an explicit Gram matrix (one BLAS gemm reads K once per block) and a
matrix-free Gram (each product recomputes the kernel tiles once per block).

``lanczos_eigsh`` (KernelPCA's "thick_restart_lanczos") is the Lanczos
recurrence on an explicit symmetric matrix, its steps compiled
(``fastkern._lanczos``): for the few hundred to few thousand rows where
scipy's ARPACK spends more time returning to Python than in its products.

``randomized_eigsh`` (KernelPCA's "randomized") is scikit-learn's randomized
eigendecomposition with selection="module", on an explicit matrix.
"""
import contextlib
import functools
import inspect
import math
import numbers
import time
import warnings

import numpy as np
from scipy import linalg
from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from fastkern import _centering, _inchol, _lanczos, _tridiagonal
from fastkern._threads import StepThreads, blas_limit, interruptible, scipy_blas_serial
from fastkern.pairwise import PackedUpperGram
from fastkern._validation import check_int, check_n_threads

__all__ = ["block_eigsh", "column_signs", "interruptible", "krylov_basis", "lanczos_basis_size",
           "lanczos_eigsh", "missed_values", "one_triangle_product", "probe_steps",
           "randomized_eigsh", "rounding_floor", "symmetric_product", "top_eigh"]

# Below this many unknowns, or when the Krylov basis would not be much smaller
# than n, forming A column block by column block and calling LAPACK is cheaper
# and exact; it is also the only sound method when n is close to k.
_DENSE_N = 200

# Budget on the Krylov basis width (columns of V and of A V kept per cycle).
_BASIS_COLUMNS = 300
# At most this many blocks before a thick restart, unless the caller says.
_MAX_BLOCKS = 6
# A Rayleigh-Ritz step on a basis of c columns (the eigh of c x c H) costs
# about as much as _RR_COST c^3 / (n^2 p) block products of p columns on an n x
# n Gram.  Measured on one thread (AVX-512): numpy's eigh of 160 x 160, 1.3
# ms; an 8-column product with the packed N=1000 Gram, 0.57 ms.  block_eigsh
# skips Rayleigh-Ritz while it would cost more than the products since the
# last one; at N >= 4000 this never happens.
_RR_COST = 4.5
# From this many rows, with tall_threads given (block_eigsh's omp_products), the
# solver's tall-skinny products run on the OpenMP threads
# (fastkern._centering.tall_matmul / tall_inner); with None, NumPy's.
_TALL_MIN_ROWS = 2048


def _row_major(A):
    """A itself if its rows are contiguous (a column slice of a C array is), else a C copy."""
    if A.strides[1] == A.itemsize and A.strides[0] >= A.shape[1] * A.itemsize:
        return A
    return np.ascontiguousarray(A)


def _matmul(A, B, tall_threads):
    """A @ B for a tall A (n x c) and a small B, on tall_threads when A is long."""
    if tall_threads is None or A.shape[0] < _TALL_MIN_ROWS:
        return A @ B
    out = np.empty((A.shape[0], B.shape[1]))
    _centering.tall_matmul(_row_major(A), _row_major(B), out, tall_threads)
    return out


def _inner(A, B, tall_threads):
    """A^T @ B for tall A and B (n rows each), on tall_threads when they are long."""
    if tall_threads is None or A.shape[0] < _TALL_MIN_ROWS:
        return A.T @ B
    return _centering.tall_inner(_row_major(A), _row_major(B), tall_threads)


def column_signs(U):
    """+1/-1 per column making its largest-magnitude entry positive (scikit-learn's
    svd_flip convention); an all-zero column gets +1."""
    rows = np.argmax(np.abs(U), axis=0)
    signs = np.sign(U[rows, np.arange(U.shape[1])])
    signs[signs == 0] = 1.0
    return signs


def _blocks(n, p, max_blocks):
    """(blocks before a thick restart, basis columns) of block_eigsh with p
    columns per block, or None where it forms A densely instead."""
    m = min(_MAX_BLOCKS if max_blocks is None else max_blocks, max(3, _BASIS_COLUMNS // p - 1))
    return None if n < _DENSE_N or 2 * (m + 1) * p >= n else (m, min(n, (m + 1) * p))


def krylov_basis(n, block_size, max_blocks=None):
    """The basis and product arrays block_eigsh would allocate, written once, or None.

    For a caller that allocates a large operator just before the solve (a
    Gram matrix): pages first written after such an allocation can cost far
    more than the same pages written before it.  On this project's 2-core
    VM, right after scikit-learn's KernelPCA fit, writing the 21 MB basis at
    N=8000 took 22-55 ms once the 512 MB Gram had been allocated and
    2.6-3.0 ms before it (the same page faults, each about ten times
    slower: the host had taken back the memory scikit-learn freed).  None
    where block_eigsh forms A densely (small n).

    Parameters
    ----------
    n : int
        Unknowns.
    block_size : int
        Columns per block, as given to block_eigsh.
    max_blocks : int, default=None
        As given to block_eigsh.

    Returns
    -------
    basis : tuple of two ndarrays of shape (n, width), or None
        Zero-filled V and W for ``block_eigsh(..., basis=basis)``.
    """
    layout = _blocks(n, min(check_int(block_size, "block_size", 1), n), max_blocks)
    if layout is None:
        return None
    V = np.empty((n, layout[1]))
    W = np.empty_like(V)
    # Written, not just reserved: the first write is what costs.
    V.fill(0.0)
    W.fill(0.0)
    return V, W


# Largest n for which top_eigh's fallback uses syevd (2 n^2 doubles: 128 MB).
_SYEVD_MAX_N = 2896


def top_eigh(A, k, *, lower=True, overwrite_a=False, rebuild=None):
    """The k largest eigenpairs of a symmetric matrix A, ascending, as scipy's eigh.

    LAPACK's syevr asked for an index range (``subset_by_index``) may return
    fewer pairs than asked on a clustered spectrum: for the centred 300 x 300
    identity (eigenvalue 1, multiplicity 299) it returned none of the top 5
    and one of the top 1; syevx failed the same way.  A short answer is
    followed by ARPACK on the same triangle (``_arpack_top``): a clustered
    top converges in a few restarts, sooner than the whole spectrum
    (performance_history, "Small and mid sizes").  Should ARPACK
    not converge, the whole spectrum comes from syev (implicit QL/QR, which
    overwrites A with the eigenvectors and needs only O(n) workspace, so the
    fallback holds no second n x n array beyond A).  With overwrite_a, the
    first call has destroyed A, and rebuild() must return it again.
    The LAPACK calls run without the GIL (``_inchol.syevr``, ``_inchol.syev``)
    through ``interruptible``, and ARPACK returns to Python after every
    product, so Ctrl-C is seen.  A (float32 or float64) is used in place when
    overwrite_a and Fortran-ordered (a C-ordered symmetric K passes as K.T),
    else copied.
    """
    n = A.shape[0]
    # The reduction to tridiagonal form dominates: 4/3 n^3 multiply-adds.
    w, v = interruptible(_inchol.syevr, _lapack_input(A, overwrite_a), lower, n - k + 1, n,
                         work=4 * n ** 3 / 3)
    if w.size == k:
        return w, v
    del w, v
    a = _lapack_input(rebuild() if overwrite_a else A, overwrite_a)
    pairs = _arpack_top(a, k, lower)
    if pairs is not None:
        return pairs
    # Divide and conquer (syevd) is 2-5x faster but needs 2 n^2 more values
    # of workspace: only where that is small next to the machine.
    w = interruptible(_inchol.syev, a, lower, n <= _SYEVD_MAX_N)
    return w[n - k:].copy(), np.array(a[:, n - k:])


# Implicit restarts top_eigh's ARPACK fallback may take before the whole spectrum
# is computed instead: 20 restarts of up to 25 products are at most 500 n^2
# multiply-adds, under syevd's ~10 n^3 / 3 from n = 150 on.  A clustered top
# that syevr misses converges in one or two (the centred identity).
_FALLBACK_RESTARTS = 20


# scipy's eigsh draws ARPACK's new start vectors, after an invariant
# subspace, from its ``rng`` argument where it has one (the C translation of
# ARPACK); before, from ARPACK's own generator, whose state lives on between
# calls.
_EIGSH_TAKES_RNG = "rng" in inspect.signature(eigsh).parameters


def seeded_eigsh(A, k, *, rng, **kwargs):
    """scipy's eigsh, its new directions after an invariant subspace drawn from rng
    (a seed or a numpy Generator) where scipy lets them be.

    A Krylov basis meets an invariant subspace when the spectrum has fewer
    distinct values than the basis vectors (the centred identity after two
    products); with scipy's default, a fresh generator each call, the pairs
    of a repeated eigenvalue then differed from one fit of the same data to
    the next.
    """
    if _EIGSH_TAKES_RNG:
        kwargs["rng"] = rng
    return eigsh(A, k, **kwargs)


def _arpack_top(a, k, lower):
    """The k largest eigenpairs of the symmetric a (one triangle read: symv with
    ``lower``), ascending, from ARPACK at full precision; None when k >= n - 1
    (ARPACK's limit) or it did not converge within ``_FALLBACK_RESTARTS``."""
    n = a.shape[0]
    # One pair more than asked, for the probe (missed_values).
    if k + 1 >= n - 1:
        return None
    op = one_triangle_product(a, lower)
    # A fixed start: the same pairs on every run.
    v0 = np.random.RandomState(0).uniform(-1, 1, n).astype(a.dtype)
    try:
        with scipy_blas_serial():
            w, v = seeded_eigsh(op, k + 1, which="LA", v0=v0,
                                ncv=min(n, max(2 * k + 3, k + 26)),
                                maxiter=_FALLBACK_RESTARTS, rng=0)
    except ArpackNoConvergence:
        return None
    order = np.argsort(w)
    w, v = w[order], v[:, order]
    # This path serves clustered tops: a missed copy sends it to syev.  The
    # probe reads a's upper triangle (a.T's lower); a is symmetric here.
    if missed_values(np.ascontiguousarray(a.T), w, v, 0,
                     psd=bool(np.min(np.diagonal(a)) >= 0)):
        return None
    return w[1:], np.asfortranarray(v[:, 1:])


def one_triangle_product(a, lower):
    """x -> a @ x for a symmetric Fortran-ordered a from one triangle (BLAS symv,
    ``lower`` or upper), as an operator for ARPACK: half the memory of a gemv."""
    symv = linalg.get_blas_funcs("symv", (a,))
    return LinearOperator(a.shape, matvec=lambda x: symv(1.0, a, x, lower=int(lower)),
                          dtype=a.dtype)


# Lanczos vectors lanczos_eigsh keeps beyond the k wanted before a thick
# restart.  With 75 (k = 5: 80 in all) the RBF spectra of the sizes benchmark
# (N = 200-1000, d = 8-64, gamma 1/d and 0.5) converged without a restart in
# 43-77 products, against 52-104 for ARPACK with 30 (performance_history,
# "Small and mid sizes"); a basis of 50 restarted and took up to 12% longer.
LANCZOS_EXTRA_VECTORS = 75
# lanczos_eigsh's cost model, microseconds on one thread (2-core Xeon,
# AVX-512): a step on n rows (symv and two Gram-Schmidt passes) about
# n^2 / 8000 (5 us at n = 200, 170 at 1000); a convergence check on j basis
# vectors after a restart (syevr on the dense projected matrix, from Python)
# about 40 + j^2 / 30, and before the first restart, where that matrix is
# tridiagonal (QL on all its values, ritz_check), about 2 + j^2 / 55 (3 us
# at j = 10, 73 at 63), and 2 j more near convergence (stein).  It only
# spaces the checks, so that they cost no more than half the steps between
# them; it never changes what converged means.
_STEP_US_PER_N2 = 1 / 8000
_CHECK_US = 40
_CHECK_US_PER_J2 = 1 / 30
_TRIDIAGONAL_CHECK_US = 2
_TRIDIAGONAL_CHECK_US_PER_J2 = 1 / 55
# The steps between two checks cost this many checks.  With 1 the checks
# took 40% of the solver at n = 200 (0.32 of 0.77 ms, 8 checks for 65
# steps), where the steps after convergence cost less: KernelPCA's fit at
# N = 200 took 0.81-0.95x the time with 2 in five of the sizes benchmark's
# six spectra (1.02x on the near-identity one), 0.98-0.99x at 500 and
# 0.99-1.01x at 1000; with 3, up to 1.22x (performance_history).
_CHECK_SPACING = 2
# lanczos_eigsh's products leave n_threads for one thread only when one was
# this much faster.  The first call meets a cold cache: on 2 threads it took
# 1.1-1.6x the later calls' time per unit of work (KernelPCA at N = 2000 and
# 4000), and with no margin one fit in eight ran on one thread from its
# second call (53.6 ms against 27-42 ms).  Another pool's spinning threads
# leave n_threads about as fast as one (the blocks are claimed: fk_spin.h).
_ONE_THREAD_MARGIN = 1.25
# The products' thread rates of recent solves, by size class (n.bit_length()):
# a solve of 1000 rows makes 2-3 product calls, so a chooser of its own ran
# most of them before it had timed both counts.  KernelPCA at N = 1000 with a
# spinning competitor per core, 60 fits each way: default threads' median
# 1.20-1.22x n_threads=1's, 0.76-0.89x with the rates remembered; idle,
# 0.73-0.88x against 0.73-0.79x.
_CHOOSER_MEMORY = {}

# Most multiply-adds (about n^2 a step) between two returns to Python, where
# Ctrl-C is seen: under 0.1 s even where K is read from memory.
_LANCZOS_CALL_MADDS = 5e7


# From this many rows lanczos_eigsh's float64 products are fastkern's own
# (fk_symv.h), their row blocks shared by up to n_threads threads held in one
# parallel region between checks (_lanczos.expand), with the same sums for
# any count; below, BLAS's symv on one thread.  KernelPCA fit time with two
# threads over BLAS's symv on one, side by side on 2 idle cores (RBF, d = 8
# to 64, steep and flat): 1.06-1.17x at N = 500, 0.95x at 600 (one case of
# four 1.5x), 0.76-0.89x at 700, 0.72-0.77x at 1000, 0.60-0.75x at 2000.  On
# one thread fastkern's product took 1.00-1.05x BLAS's time.
LANCZOS_THREADED_ROWS = 700


def symmetric_product(K, x, n_threads=1):
    """K x with lanczos_eigsh's float64 products (fk_symv.h: the same sums on any
    thread count), K a PackedUpperGram or a C-contiguous float64 n x n array
    (its lower triangle read)."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    n_threads = check_n_threads(n_threads)
    if isinstance(K, PackedUpperGram):
        return _lanczos.product(K.data, x, n_threads, row_start=K.row_start)
    return _lanczos.product(K, x, n_threads)


# lanczos_eigsh's probe for eigenvalues its Krylov space cannot hold.  From
# one start vector, a Krylov space holds one direction of each eigenspace
# (in exact arithmetic): a repeated top eigenvalue's other copies are missed
# until rounding brings them in, and the convergence check can pass without
# them.  The probe is a Lanczos run from a random direction orthogonal to
# the k converged Ritz vectors, on K projected on their complement: there a
# missed copy keeps its value (>= the k-th), and every other value is at
# most the (k+1)-th.  The probe runs as many steps as the Chebyshev bound
# of Lanczos's convergence (Saad, "Numerical Methods for Large Eigenvalue
# Problems", 6.6) needs for a missed copy's Ritz value to pass the midpoint
# between the k-th and (k+1)-th values, for every start but a fraction
# _PROBE_FAILURE of random ones.  A probe that passes it, or values the
# bound cannot separate in _PROBE_MAX_STEPS, send the caller to a block
# solver.
_PROBE_FAILURE = 1e-4
_PROBE_MIN_STEPS = 4
_PROBE_MAX_STEPS = 60


def probe_steps(n, top, following, lowest, largest=None):
    """Steps of lanczos_eigsh's probe (see _PROBE_FAILURE) on an n x n matrix whose
    k-th value is ``top``, the largest ``largest`` (None: top), the value the
    probe's complement holds apart from missed ones at most ``following``, and
    the least at least ``lowest``; None where the bound needs more than
    _PROBE_MAX_STEPS."""
    steps = _tridiagonal.probe_step_count(n, top, following, lowest,
                                      top if largest is None else largest, _PROBE_FAILURE,
                                      _PROBE_MIN_STEPS, _PROBE_MAX_STEPS)
    return int(steps) if math.isfinite(steps) else None


def lanczos_basis_size(n, k):
    """The basis lanczos_eigsh keeps for k pairs of an n x n matrix (ncv=None)."""
    return min(n, max(2 * k + 1, k + LANCZOS_EXTRA_VECTORS))


def lanczos_eigsh(K, k, *, tol=0.0, max_iter=None, v0=None, ncv=None, random_state=None,
                  callback=None, centred=False, n_threads=1, probe=True):
    """The k largest eigenpairs of the symmetric K, ascending, as scipy's eigsh(which="LA").

    K: a C-contiguous float32 or float64 n x n array of which only the lower
    triangle is read (the triangle "dense" and LAPACK's syevr read), or a
    ``fastkern.pairwise.PackedUpperGram`` (its products are then fastkern's
    at any size).  The
    Lanczos recurrence, each new vector orthogonalised against the whole
    basis twice (classical Gram-Schmidt; ``fastkern._lanczos.expand``), with
    thick restarts when the basis holds ncv vectors (None: k + 75, at most
    n): the top Ritz vectors are kept and the recurrence goes on from them
    (Wu and Simon's thick-restart Lanczos, which is Stewart's Krylov-Schur
    for a symmetric matrix).  Converged as ARPACK's: every wanted Ritz pair's
    residual estimate |beta_j y_j| <= tol * max(eps^(2/3), |theta|), tol=0
    meaning the dtype's machine epsilon.  v0: the start vector (None: drawn
    from random_state).  max_iter: restarts (None: 10 n, as ARPACK).
    centred: the pairs of the double-centred H K H (H = I - 1 1^T / n)
    instead, K itself unchanged: the basis is kept orthogonal to 1 (the
    eigenvector of eigenvalue 0 that every centred Gram has), so it needs
    ncv <= n - 2.
    callback(step, residual) after each convergence check, with the largest
    residual estimate relative to max(eps^(2/3), |theta|).  scipy's BLAS
    should be held to one thread: the products are its symv below
    LANCZOS_THREADED_ROWS rows or in float32.  n_threads: the threads of the
    float64 products from LANCZOS_THREADED_ROWS rows (at most
    ``_lanczos.PRODUCT_BLOCKS``); the result is the same for any count.

    probe: after convergence, look for values the single start vector's
    Krylov space missed (copies of a repeated eigenvalue; see
    _PROBE_FAILURE).

    Returns (eigenvalues, eigenvectors, residuals): the residual estimates
    relative to max(eps^(2/3), |theta|), all <= tol unless max_iter restarts
    ended the iteration first; all infinite where the probe found, or could
    not rule out, a missed value (the pairs may then not be the top k).
    """
    n = K.shape[0]
    dtype = K.dtype
    packed = isinstance(K, PackedUpperGram)
    if not packed and (K.ndim != 2 or K.shape[1] != n or dtype not in (np.float32, np.float64)
                       or not K.flags.c_contiguous):
        raise ValueError("K must be a square C-contiguous float32 or float64 array "
                         "or a PackedUpperGram")
    if not 1 <= k < n:
        raise ValueError(f"k must be in [1, n - 1], got k={k} for n={n}")
    eps = float(np.finfo(dtype).eps)
    tol = float(tol) or eps
    floor = eps ** (2 / 3)
    if ncv is not None and not k < ncv <= n:
        raise ValueError(f"ncv must be in [k + 1, n], got {ncv} for k={k} and n={n}")
    m = lanczos_basis_size(n, k) if ncv is None else ncv
    if centred and m > n - 2:
        raise ValueError(f"centred=True needs ncv <= n - 2, got ncv={m} for n={n}")
    max_iter = 10 * n if max_iter is None else max_iter
    n_threads = min(check_n_threads(n_threads), _lanczos.PRODUCT_BLOCKS)
    rng = check_random_state(random_state)
    # Room for the probe's steps after the locked vectors.
    room = max(m, min(n - 1, m + _PROBE_MAX_STEPS))
    V = np.empty((room + 1, n), dtype)
    H = np.zeros((m, m + 1), dtype)
    scratch = np.empty(max(room, n) if centred else room, dtype)
    norm = np.zeros(1, dtype)
    acc = (np.empty((_lanczos.PRODUCT_BLOCKS, n))
           if packed or (dtype == np.float64 and n >= LANCZOS_THREADED_ROWS) else None)
    operand, row_start = (K.data, K.row_start) if packed else (K, None)
    # A new vector shorter than this times ||K|| is the rounding of the
    # product (about sqrt(n) eps ||K||): an invariant subspace.  Otherwise the
    # Ritz pairs of K's null space, coupled by rounding, would never pass
    # ARPACK's test, which asks eps^(5/3) of a zero eigenvalue.
    breakdown = math.sqrt(n) * eps
    v = rng.uniform(-1, 1, n) if v0 is None else np.asarray(v0, dtype=np.float64)
    if centred:
        v = v - v.mean()
        if not np.linalg.norm(v) > 0:
            raise ValueError("v0 must not be constant with centred=True (1 is the centred "
                             "matrix's null vector)")
    if not np.linalg.norm(v) > 0:
        raise ValueError("v0 must be a nonzero vector")
    V[0] = v / np.linalg.norm(v)
    # The checks' arrays (ritz_check, tridiagonal_check), made once.
    theta_buf, z_buf, relative = np.empty(m), np.empty(m * k), np.empty(k)
    ritz_w, ritz_last = np.empty(m), np.empty(m)
    work, iwork = (np.empty(size, dtype) for size, dtype in
                   zip(_tridiagonal.check_workspace(m, k), (np.float64, np.intc)))
    step_us = n * n * _STEP_US_PER_N2
    per_call = max(1, int(_LANCZOS_CALL_MADDS / (n * n)))

    def gap(j):
        # Steps that cost as much as a check on j vectors.
        if not restarts:
            check_us = _TRIDIAGONAL_CHECK_US + j * j * _TRIDIAGONAL_CHECK_US_PER_J2
        else:
            check_us = _CHECK_US + j * j * _CHECK_US_PER_J2
        return max(1, math.ceil(_CHECK_SPACING * check_us / step_us))

    # The products' threads: n_threads, or one where one was clearly faster
    # lately (another pool's threads or another process on the cores).  The
    # thread count does not change the result.
    chooser = (StepThreads(n_threads, margin=_ONE_THREAD_MARGIN, memory=_CHOOSER_MEMORY,
                           key=n.bit_length())
               if acc is not None and n_threads > 1 else None)
    calls = 0
    j, restarts, last = 0, 0, None
    stop = min(m, max(2 * k, gap(2 * k)))
    while True:
        while j < stop:
            end = min(stop, j + per_call)
            threads = chooser.pick(calls) if chooser is not None else 1
            started = time.perf_counter()
            reached = _lanczos.expand(operand, V, H, scratch, j, end, breakdown, norm,
                                      centred, acc, threads, row_start)
            if chooser is not None:
                # Values read: K's triangle and the basis twice, per step.
                chooser.record(threads, time.perf_counter() - started,
                               (min(reached + 1, end) - j) * n * (n // 2 + 4 * j + 4))
            calls += 1
            if reached == end:
                j = end
                continue
            # K v lies in the basis: an invariant subspace.  As in ARPACK, a
            # random direction outside it goes on, coupled by 0, so that the
            # Ritz pairs are judged on a basis that grew to `stop` (of the
            # centred identity, the first vectors span the top eigenvalue 1
            # once and 0, which would pass for converged).
            H[reached, reached + 1] = 0
            j = reached + 1
            if j < n:
                _lanczos.new_direction(V, j, rng.uniform(-1, 1, n), scratch, centred)
        # Until the first restart the projected matrix is the Lanczos
        # tridiagonal (the rest of H's lower triangle is rounding).  A basis
        # of all n directions: H is K in it, the pairs are exact.
        # ritz_check (QL) finds the vectors only near convergence; stemr's
        # check where QL declined, or where max_iter=0 wants the pairs now.
        ratio, have, ritz = -1.0, False, None
        if not restarts:
            ratio, have = _tridiagonal.ritz_check(H, j, k, tol, floor, j >= n, ritz_w, ritz_last,
                                              z_buf, relative)
            if ratio < 0 or (not have and j == m and restarts >= max_iter):
                ratio = _tridiagonal.tridiagonal_check(H, j, k, tol, floor, j >= n, theta_buf,
                                                   z_buf, relative, work, iwork)
                theta, have = theta_buf[:k], ratio >= 0
            else:
                theta, ritz = ritz_w[j - k:j].copy(), (ritz_w, ritz_last)
        if have:
            Y = z_buf[:j * k].reshape(k, j).T
        elif not (ratio >= 0 or ritz):
            # After a restart, or where QL and stemr declined.
            theta, Y = _top_pairs(H, j, k)
            bounds = np.abs(H[j - 1, j] * Y[j - 1]) if j < n else np.zeros(k)
            scale = np.maximum(floor, np.abs(theta))
            ratio = float(np.max(bounds / (tol * scale)))
            relative = bounds / scale
        if callback is not None:
            callback(j, ratio * tol)
        if probe and ratio <= 1 and j < n - centred:
            vectors = V[:j].T @ Y.astype(dtype, copy=False)
            if _missed_copies(H, V, j, k, theta, Y, ritz, restarts, norm[0], scratch, centred,
                              rng, operand, breakdown, acc, n_threads, row_start):
                relative = np.full(k, np.inf)
            return theta, vectors, relative
        if ratio <= 1 or (j == m and restarts >= max_iter):
            return theta, V[:j].T @ Y.astype(dtype, copy=False), relative
        if j == m:
            # The top l Ritz vectors and the last basis vector carry on.
            l = min(m - 1, k + (m - k) // 2)
            kept, Yl = _top_pairs(H, m, l, tridiagonal=not restarts)
            restarts += 1
            V[:l] = Yl.T.astype(dtype, copy=False) @ V[:m]
            V[l] = V[m]
            H[:] = 0
            H[np.arange(l), np.arange(l)] = kept
            j, last = l, None
            stop = min(m, j + gap(j))
            continue
        if last is not None and last[1] > ratio:
            # The estimates have fallen geometrically so far: check again
            # about when they should pass, or after a quarter more steps.
            rate = math.log(last[1] / ratio) / (j - last[0])
            step = min(math.ceil(0.9 * math.log(ratio) / rate), max(gap(j), math.ceil(j / 4)))
        else:
            step = max(gap(j), math.ceil(j / 4))
        last = (j, ratio)
        stop = min(m, j + max(1, step))


def _missed_copies(H, V, j, k, theta, Y, ritz, restarts, norm, scratch, centred, rng, operand,
                   breakdown, acc, n_threads, row_start):
    """Whether lanczos_eigsh's probe (see _PROBE_FAILURE) finds, or cannot rule
    out, a value of K that the basis V[:j] missed, theta and Y its k
    converged Ritz pairs in the basis, ritz None or every Ritz value of the
    Lanczos tridiagonal with the last components of their vectors
    (_tridiagonal.ritz_check).  Overwrites V."""
    n = V.shape[1]
    top = float(theta.min())
    if not top > breakdown * norm:
        # The k-th value is 0 to the rounding of a product (a centred Gram's
        # values are >= 0): so is every value below it.
        return False
    # The probe locks the top r >= k Ritz vectors.  Orthogonal to them, K's
    # values are at most the (r+1)-th, raised by those vectors' error, apart
    # from missed copies of the top r, which are orthogonal to the locked
    # vectors to their residuals (to the whole basis only in exact
    # arithmetic: rounding brings part of a copy into it).  The further that
    # bound lies below the k-th value, the fewer steps; _tridiagonal.probe_plan
    # weighs them against the locking, and never splits a cluster.  Every
    # Ritz value counts, with its residual bound: from the Lanczos
    # tridiagonal before a restart (QL), else from the projected matrix.
    Z = None
    if ritz is not None:
        w, last = ritz
        plan = _tridiagonal.probe_plan(H, j, k, top, norm, n, w, last, False, _PROBE_FAILURE,
                                   _PROBE_MIN_STEPS, _PROBE_MAX_STEPS)
    elif not restarts:
        w, last = np.empty(j), np.empty(j)
        plan = _tridiagonal.probe_plan(H, j, k, top, norm, n, w, last, True, _PROBE_FAILURE,
                                   _PROBE_MIN_STEPS, _PROBE_MAX_STEPS)
    else:
        plan = (-2,)
    if plan[0] == -2:
        w, Z = linalg.eigh(np.array(H[:j, :j], dtype=np.float64), lower=True,
                           check_finite=False)
        last = np.ascontiguousarray(Z[j - 1])
        plan = _tridiagonal.probe_plan(H, j, k, top, norm, n, w, last, False, _PROBE_FAILURE,
                                   _PROBE_MIN_STEPS, _PROBE_MAX_STEPS)
    r, following, steps, lowest = plan
    if r < 0:
        return True
    if Z is None:
        # The locked vectors as rows: inverse iteration's beyond Y's k, then Y's.
        rows = np.empty((r, j))
        rows[r - k:] = Y.T
        if r > k and _tridiagonal.tridiagonal_vectors(H, j, w[j - r:j - k], rows.reshape(-1)):
            rows = _top_pairs(H, j, r, tridiagonal=True)[1].T
    else:
        rows = Z[:, j - r:].T
    V[:r] = rows.astype(V.dtype, copy=False) @ V[:j]
    return _probe(V, r, steps, top, following, lowest, float(w[j - 1]), scratch, centred, rng,
                  operand, breakdown, norm, acc, n_threads, row_start)


def _probe(V, k, steps, top, following, lowest, largest, scratch, centred, rng, operand,
           breakdown, norm, acc=None, n_threads=1, row_start=None):
    """The probe (see _PROBE_FAILURE) from a random direction orthogonal to V's
    first k rows, the locked Ritz vectors, for ``steps`` steps, the count
    probe_steps gives for ``top``, ``following``, ``lowest`` and ``largest``:
    whether its largest Ritz value passes the midpoint of top and following.
    Overwrites V[k:].

    A largest Ritz value above ``following`` shows the complement holds more
    than the bound said (a cluster the basis had not resolved): the bound is
    raised to it and the probe runs on for the steps the new gap needs, or
    says it cannot rule a missed value out."""
    n = V.shape[1]
    limit = min(V.shape[0] - 1 - k, n - centred - k)
    steps = min(steps, limit)
    if steps <= 0:
        return False
    _lanczos.new_direction(V, k, rng.uniform(-1, 1, n), scratch, centred)
    step, end = k, k + steps
    norm_buf = np.array([norm], dtype=V.dtype)
    # The probe's projected matrix (its rows from k; the solver's own H is
    # sized for its basis alone).
    H = np.zeros((k + limit, k + limit + 1), V.dtype)
    found = np.empty(limit)
    while True:
        while True:
            reached = _lanczos.expand(operand, V, H, scratch, step, end, breakdown, norm_buf,
                                      centred, acc, n_threads, row_start)
            if reached == end:
                break
            # The complement holds an invariant subspace: the probe goes on outside it.
            H[reached, reached + 1] = 0
            step = reached + 1
            if step < n - centred:
                _lanczos.new_direction(V, step, rng.uniform(-1, 1, n), scratch, centred)
            if step == end:
                break
        # The probe's projections on the locked vectors are the rounding of
        # their residuals; among themselves its vectors form a Lanczos
        # tridiagonal, read by its superdiagonal (where an invariant subspace
        # left a 0).
        done = end - k
        if _tridiagonal.tridiagonal_values(H, k, end, True, found):
            found[:done] = linalg.eigvalsh(np.array(H[k:end, k:end], dtype=np.float64),
                                           lower=False, check_finite=False)
        # The top Ritz value: the complement's largest value is at least it.
        value = float(found[done - 1])
        if value > (top + following) / 2:
            return True
        if value <= following:
            return False
        following = value
        more = probe_steps(n, top, following, lowest, largest)
        if more is None or more > limit:
            return True
        if more <= done:
            return False
        step, end = end, k + more


def missed_values(K, w, v, rng, psd=True):
    """Whether the probe of lanczos_eigsh (see _PROBE_FAILURE) finds, or cannot
    rule out, a value a single-vector solver (ARPACK) missed.

    K: the symmetric C-contiguous float32 or float64 matrix, its lower
    triangle read; w, v: the solver's k + 1 largest pairs, ascending, the
    first the (k+1)-th; psd: whether K's values are >= 0.
    """
    n = K.shape[0]
    k = w.size - 1
    top = float(w[1])
    breakdown = math.sqrt(n) * float(np.finfo(K.dtype).eps)
    norm = float(np.max(np.abs(w)))
    if not top > breakdown * norm:
        # 0 to the rounding of a product, as every value below it.
        return False
    x = np.ascontiguousarray(v[:, 0], dtype=K.dtype)
    # K x from the triangle the probe reads (K.T is K's F-ordered view).
    residual = linalg.blas.get_blas_funcs("symv", (K,))(1.0, K.T, x, lower=0) - w[0] * x
    following = float(w[0]) + float(np.linalg.norm(residual))
    lowest, largest = (0.0 if psd else -norm), float(w[-1])
    steps = probe_steps(n, top, following, lowest, largest)
    if steps is None:
        return True
    # Room for the probe to run on (_probe).
    room = min(n - 1, k + _PROBE_MAX_STEPS)
    V = np.empty((room + 1, n), K.dtype)
    V[:k] = v[:, 1:].T
    with blas_limit(1):
        return _probe(V, k, steps, top, following, lowest, largest, np.empty(room, K.dtype),
                      False, check_random_state(rng), K, breakdown, norm)


def _top_pairs(H, j, l, tridiagonal=False):
    """The l largest eigenpairs of lanczos_eigsh's projected matrix (H[:j, :j]'s
    lower triangle), ascending, in float64.

    tridiagonal: read its diagonal and subdiagonal alone, the Lanczos
    tridiagonal matrix (without a restart, the other entries are the
    rounding of projections on the basis, which full reorthogonalisation
    removed from the vectors).  The check with LAPACK's stemr on it took
    21-93 us against 28-210 us with syevr on the dense matrix at j = 20-80
    (5 pairs); KernelPCA's fit at 200-1000 rows took 0.87-1.01x its time.
    The checks before a restart are now ``_tridiagonal.ritz_check``'s (QL, and
    stein near convergence) or ``tridiagonal_check``'s (the same stemr call
    from C); this one keeps the first restart's pairs.
    """
    if tridiagonal:
        d = np.array(np.diagonal(H[:j, :j]), dtype=np.float64)
        # stemr overwrites e (its last entry is workspace).
        e = np.zeros(j)
        e[:j - 1] = np.diagonal(H[1:j, :j - 1])
        found, w, Z, info = linalg.lapack.dstemr(d, e, 2, 0.0, 0.0, j - l + 1, j)
        if info == 0 and found == l:
            return w[:l], Z[:, :l]
        # MRRR declines some clustered spectra: the dense solve below.
    # The transposed copy is Fortran-ordered with H's lower triangle as its upper one.
    T = np.array(H[:j, :j].T, dtype=np.float64, order="F")
    w, Z, found, _, info = linalg.lapack.dsyevr(T, compute_v=1, range="I", il=j - l + 1, iu=j,
                                                lower=0)
    if info == 0 and found == l:
        return w[:l], Z[:, :l]
    # syevr may return fewer pairs than asked on a clustered spectrum (see top_eigh).
    w, Z = np.linalg.eigh(np.asarray(T), UPLO="U")
    return w[j - l:], Z[:, j - l:]


def _lapack_input(A, overwrite_a):
    """A as the Fortran-ordered float array LAPACK overwrites: A itself if allowed."""
    dtype = np.float32 if A.dtype == np.float32 else np.float64
    if overwrite_a and A.flags.f_contiguous and A.flags.writeable and A.dtype == dtype:
        return A
    return np.array(A, dtype=dtype, order="F")


def _orthonormal_block(Z, basis, width, rng, tall_threads=None, norms=None):
    """`width` orthonormal columns spanning Z's directions outside `basis`, orthogonal to it.

    Block classical Gram-Schmidt, then a QR of the block, repeated until no
    column loses more than half its norm in a pass (Kahan-Parlett "twice is
    enough": such a pass leaves it orthogonal to working precision).  A single
    pass is not enough when the columns of Z nearly depend on each other or
    on the basis: the QR then divides rounding errors by a tiny pivot, and
    the basis loses orthogonality (it did, to 1e-8, on the raw breast_cancer
    RBF Gram), which froze the Ritz residuals above the tolerance.  Columns
    numerically inside the span (pivot below 1e-10 of their norm), missing
    columns and zero columns become random directions.  norms: Z's column
    norms when the caller has them.

    A repeated pass starts from the orthonormal Q of the last QR.  When its
    corrections C = basis^T Q are tiny (below 1e-8), Q - basis C is returned
    without a new QR: its Gram matrix is I - C^T C, orthonormal to rounding.
    Near convergence the residuals of neighbouring Ritz vectors nearly depend
    on each other, so at N=8000 most blocks took a second pass (44 of 51), and
    this saves its QR.
    """
    n = Z.shape[0]
    Z = np.array(Z[:, :width], dtype=np.float64)
    if Z.shape[1] < width:
        Z = np.hstack([Z, rng.standard_normal((n, width - Z.shape[1]))])
        norms = None
    ref = np.linalg.norm(Z, axis=0) if norms is None else np.asarray(norms, dtype=np.float64)
    has_basis = basis is not None and basis.shape[1] > 0
    repeat = False
    for _ in range(8):
        if has_basis:
            C = _inner(basis, Z, tall_threads)
            Z -= _matmul(basis, C, tall_threads)
            if repeat and np.abs(C).max() <= 1e-8:
                return Z
        # LAPACK's QR on a Fortran copy: 1.2 ms against numpy.linalg.qr's 5.6
        # ms for 8000 x 16 (one thread).  The caller holds BLAS to one thread,
        # so scipy's separate OpenBLAS pool is not woken (see block_eigsh).
        Q, R = linalg.qr(np.asfortranarray(Z), mode="economic", overwrite_a=True,
                         check_finite=False)
        pivots = np.abs(np.diag(R))
        lost = ~(pivots > 1e-10 * ref)  # also catches zero and NaN columns
        if lost.any():
            Z = Q
            Z[:, lost] = rng.standard_normal((n, int(lost.sum())))
            ref = np.linalg.norm(Z, axis=0)
            repeat = False
            continue
        if not has_basis or np.all(pivots > 0.5 * ref):
            return Q
        Z, ref, repeat = Q, np.ones(width), True
    return Q


def _apply(matmat, V, dtype, n):
    W = matmat(np.ascontiguousarray(V, dtype=dtype))
    W = np.asarray(W)
    if W.shape != V.shape:
        raise ValueError(f"matmat returned shape {W.shape} for a block of shape {V.shape}")
    return np.asarray(W, dtype=np.float64)


def rounding_floor(n, row_means, dtype=np.float64):
    """The rounding of a product with the centred Gram, as a residual norm: the
    uncentred K has norm at least ||K 1|| / sqrt(n) = sqrt(n) ||row_means||, and
    a product and its centring round to about sqrt(n) eps times that (eps:
    the products' dtype's).  An eigenvalue within it of 0 is 0."""
    return 4.0 * n * float(np.finfo(dtype).eps) * float(np.linalg.norm(row_means))


def block_eigsh(matmat, n, k, *, dtype=np.float64, block_size=None, tol=1e-10, max_iter=None,
                random_state=None, callback=None, v0=None, max_blocks=None, n_threads=None,
                omp_products=False, matmat_blas=True, basis=None, floor=None):
    """Largest k eigenpairs of a symmetric positive semi-definite n x n operator.

    matmat(V) -> A @ V for V of shape (n, b) (C-contiguous, dtype) ; each call should read A once.
    Returns (eigenvalues (k,) descending, eigenvectors (n, k)); converged when every wanted residual
    ||A v - lambda v|| <= tol * lambda_max. callback(iteration, residuals_array) is called each iteration
    (for verbose progress); a ConvergenceWarning is issued if max_iter is hit.
    v0: optional (n, b) starting block (its span is used; random columns fill
    it up to the block size), e.g. columns of A, which cost no product and act
    as one free step of the iteration.  A v0 wider than the block (at most
    the basis width less one block) is the first block whole: for an
    operator that pads its blocks (KernelPCA's product pads to 4 columns, or
    8 with AVX-512, and its first call adds one for the means), the columns
    up to the padding cost nothing.  At N=8000 (RBF, 5 components, 20 seeds)
    8-column blocks needed 13 products from an 8-column start, 12.45 on
    average from 11 columns and 12 from 15.
    max_blocks: most blocks in the basis before a thick restart, at least 3
    (None: 6; the basis is also held to about 300 columns).  More blocks
    cost memory and O(n * basis * p) work per product, and restart less
    often.
    n_threads, omp_products: with omp_products, the solver's own products of
    n x basis blocks run on n_threads OpenMP threads (None: the default
    count; from 2048 rows; fixed row blocks, so the result is the same for
    any thread count); without, NumPy's on one BLAS thread.  matmat's
    threads are its own business.
    matmat_blas: whether matmat calls BLAS.  The solver's own linear algebra
    runs on one BLAS thread, and matmat on the caller's; with False (an
    operator on its own OpenMP threads, as KernelPCA's CentredGram) BLAS is
    held to one thread for the whole solve instead of switched around every
    product (KernelPCA at N=8000, 13 products, side by side: fit 0.249 s
    against 0.252 s best of 10, 0.253 s against 0.269 s median).
    basis: the arrays of ``krylov_basis(n, block_size, max_blocks)`` to hold
    the basis and its products, instead of new ones (see there).
    floor: None, or a callable giving (after the first product) the rounding
    of matmat's products, as a residual norm: the target is at least it, and
    the eigenvalues within it of 0 are returned as 0.  An operator that is a
    difference of large terms (a centred Gram of nearly constant data: zero
    but for rounding) otherwise has no eigenvalue the relative target can
    resolve, and would run max_iter iterations.

    KernelPCA calls it eigen_solver="block_krylov" (formerly "lanczos", a
    misnomer: there is no three-term Lanczos recurrence and no tridiagonal
    matrix; the basis is a block Krylov space, fully reorthogonalised, with
    Rayleigh-Ritz on the exact projection V^T A V).

    Method: thick-restarted block Krylov iteration with Rayleigh-Ritz.  The
    basis V holds p = block_size columns per block (p >= k, default
    k + max(5, k // 2)) and at most m + 1 blocks (m = max_blocks, lowered
    so the basis has at most ~300 columns), with A V stored next to it, so
    the projected matrix H = V^T A V and the Ritz residuals are exact
    without extra products.  Each iteration does one Rayleigh-Ritz step on
    the current basis and, unless converged, adds one block: the Ritz
    residuals R = A Y - Y Theta of the top p Ritz vectors Y (Y lies in the
    basis, so R adds exactly the next block-Krylov directions),
    orthogonalised against the whole basis by block Gram-Schmidt repeated
    until no column loses more than half its norm in a pass, then one
    ``matmat`` call reading A once.  Converged Ritz vectors
    are soft-locked: they stay in the basis, but their residuals are replaced
    in the next block by those of the next Ritz vectors.  When the basis is
    full, the Ritz pairs whose residuals form the next block (the top p and
    their replacements) and their products become its first columns (the
    thick restart).  H grows by one block row and column per product, and
    the solver's own linear algebra runs on one BLAS thread, its tall
    products on n_threads OpenMP threads when given (only matmat gets the
    caller's BLAS threads).  Convergence is judged on the true residual
    norms of the k wanted pairs against tol times the largest |Ritz value| (so any scaling
    of A takes the same steps); for float32 operators the target is raised to
    what float32 products can deliver, max(tol, 4 sqrt(n) eps32).  Memory: the
    basis V and A V, 2 n (m + 1) p float64 values, preallocated once.  The
    small projected problems, the basis and the Ritz vectors are float64
    throughout.  When n is small (< 200) or not much larger than the basis, A
    is formed by block products (an n x n float64 array) and solved by LAPACK
    instead.  All random directions (the start block without v0, and the
    fill-ins for directions already in the basis) come from random_state, so
    a fixed random_state gives bit-identical results.

    A block method converges on clusters and repeated eigenvalues as long as
    the block spans the cluster, and on the fast-decaying spectra of kernel
    Gram matrices; eigenvalues closer together than about tol * lambda_max
    in a cluster wider than the block are not separated to that tolerance
    (scipy's ARPACK eigsh does not converge there either).  After max_iter
    iterations without convergence (at most max_iter products) a
    ConvergenceWarning gives the residual norms of the k wanted pairs, and
    the best Ritz pairs of the current basis are returned: orthonormal
    vectors whose Rayleigh quotients are the values.
    """
    n = check_int(n, "n", 1)
    k = check_int(k, "k", 1)
    if k > n:
        raise ValueError(f"k must be <= n, got k={k} for n={n}")
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise TypeError(f"dtype must be float32 or float64, got {dtype}")
    if not callable(matmat):
        raise TypeError(f"matmat must be callable, got {type(matmat).__name__}")
    if isinstance(tol, (bool, np.bool_)) or not isinstance(tol, numbers.Real) or not tol >= 0:
        raise ValueError(f"tol must be a non-negative real number, got {tol!r}")
    if max_iter is not None:
        max_iter = check_int(max_iter, "max_iter", 1)
    p = k + max(5, k // 2) if block_size is None else check_int(block_size, "block_size", 1)
    if block_size is not None and p < k:
        raise ValueError(f"block_size must be >= k, got block_size={p} for k={k}")
    p = min(p, n)
    rng = check_random_state(random_state)
    n_threads = check_n_threads(n_threads)
    # The tall products' threads; None: NumPy's (_matmul, _inner).
    tall_threads = n_threads if omp_products else None
    if max_blocks is not None:
        # A thick restart keeps up to 2p - 1 columns and adds p.
        max_blocks = check_int(max_blocks, "max_blocks", 3)
    # Products in the operator's precision cannot give residuals below ~sqrt(n) eps.
    tol_eff = max(float(tol), 4.0 * math.sqrt(n) * float(np.finfo(dtype).eps))

    layout = _blocks(n, p, max_blocks)
    if layout is None:
        return _dense(matmat, n, k, p, dtype, callback)
    m, width = layout

    if max_iter is None:
        max_iter = m * max(100, 10 * n // ((m + 1) * p))
    # V holds the basis and W = A V, preallocated once: the basis is the
    # solver's only O(n) memory besides a few n x p blocks.
    if basis is None:
        V = np.empty((n, width))
        W = np.empty((n, width))
    else:
        V, W = basis
        for name, arr in (("V", V), ("W", W)):
            if (not isinstance(arr, np.ndarray) or arr.shape != (n, width)
                    or arr.dtype != np.float64 or not arr.flags.c_contiguous
                    or not arr.flags.writeable):
                raise ValueError(f"basis {name} must be a writeable C-contiguous float64 array "
                                 f"of shape {(n, width)} (krylov_basis), got "
                                 f"{getattr(arr, 'shape', type(arr).__name__)}")
    if v0 is None:
        start = rng.standard_normal((n, p))
    else:
        start = np.asarray(v0, dtype=np.float64)  # only read: QR makes the basis
        if start.ndim != 2 or start.shape[0] != n or start.shape[1] > width - p:
            raise ValueError(f"v0 must have shape (n, b) with b <= {width - p} (the basis "
                             f"width less one block), got {np.shape(v0)}")
    # The solver's own linear algebra (block Gram-Schmidt, QR, Rayleigh-Ritz
    # on a few hundred columns) runs on one BLAS thread; only matmat gets the
    # caller's threads.  Threaded, these n x p operations cost several times
    # more than serial (N=8000, 2 cores: 0.8-1.4 s of CPU against 0.12 s for
    # the QRs alone; more on a busy machine), as waking and synchronising the
    # BLAS threads outweighs their few megaflops, and OpenBLAS's workers then
    # spin beside matmat's threads.  The tall products (n x basis against
    # basis x p) instead go to OpenMP threads with n_threads, each running a
    # single-threaded dgemm on fixed row blocks: 6 such products at N=8000
    # with a 120-column basis took 1.97 ms on 2 threads against NumPy's
    # 4.52 ms on one; the whole solve for 5 components, 0.238 s against
    # 0.246 s (best of 8, side by side; the products dominate).
    args = (matmat, n, k, p, width, V, W, start, dtype, rng, tol_eff, max_iter, callback,
            tall_threads, floor)
    if matmat_blas:
        return _iterate(*args, functools.partial(blas_limit, 1))
    with blas_limit(1):
        return _iterate(*args, contextlib.nullcontext)


def _iterate(matmat, n, k, p, width, V, W, start, dtype, rng, tol_eff, max_iter, callback,
             tall_threads, floor, serial):
    """block_eigsh's iteration on the preallocated basis V and products W;
    serial() holds BLAS to one thread around the solver's own steps."""
    cols = max(p, start.shape[1])
    with serial():
        V[:, :cols] = _orthonormal_block(start, None, cols, rng, tall_threads)
    Wb = W[:, :cols] = _apply(matmat, V[:, :cols], dtype, n)
    # H = V^T A V, symmetrised, grown by one block row and column per product
    # (O(n cols p) instead of O(n cols^2) for the full product each time).
    H = np.empty((width, width))
    with serial():
        _extend_projection(H, V, Wb, 0, cols, tall_threads)
    # Product work since the last Rayleigh-Ritz step, in units of n^2 p.
    owed = 0.0
    for iteration in range(1, max_iter + 1):
        owed += 1.0
        if iteration < max_iter and cols + p <= width and owed * n * n * p < _RR_COST * cols ** 3:
            # Rayleigh-Ritz would cost more than the products since the last
            # one: extend the basis by the newest block's products instead.
            # In exact arithmetic A V_last adds the same block-Krylov
            # directions as the Ritz residuals, without the eigh of H.
            with serial():
                V[:, cols:cols + p] = _orthonormal_block(W[:, cols - p:cols], V[:, :cols], p,
                                                         rng, tall_threads)
        else:
            owed = 0.0
            with serial():
                # Rayleigh-Ritz after every product: it costs O(n * cols * p), a
                # few percent of one product, and lets fast-decaying spectra stop
                # early.  numpy's eigh, not scipy's: numpy and scipy may ship
                # separate OpenBLAS builds, and waking scipy's thread pool between
                # products made every other product twice as slow on 2 cores (its
                # threads and numpy's spinning ones competed).  H is small, so the
                # full solve costs nothing.
                theta, S = np.linalg.eigh(H[:cols, :cols])
                # Relative to the largest |eigenvalue| seen, so that a spectrum
                # scaled by any factor (tiny Gram matrices included) converges in
                # the same steps.
                scale = max(float(np.abs(theta).max()), float(np.finfo(float).tiny))
                theta, S = theta[::-1], S[:, ::-1]
                done = tol_eff * scale if floor is None else max(tol_eff * scale, floor())
                R, res = _residuals(V, W, cols, S, theta, 0, p, tall_threads)
                if callback is not None:
                    callback(iteration, res[:k].copy())
                if np.all(res[:k] <= done) or iteration == max_iter:
                    break
                # Soft locking: a Ritz vector whose residual is below the tolerance
                # stays in the basis (it is among the top p kept at a restart) but
                # its residual, rounding noise by then, is not expanded; the next
                # Ritz vectors' residuals take its place in the block.
                active = np.flatnonzero(res > done)
                extra = min(p - active.size, cols - p)
                R, res = R[:, active], res[active]
                if extra:
                    R2, res2 = _residuals(V, W, cols, S, theta, p, p + extra, tall_threads)
                    R, res = np.hstack([R, R2]), np.concatenate([res, res2])
                    del R2
                if cols + p > width:
                    # Thick restart: keep the Ritz pairs whose residuals form the
                    # next block (the p best and any that replace locked ones),
                    # products included, so the next block still extends a
                    # block-Krylov space.  Their projection is S^T H S (diagonal
                    # up to rounding), with no pass over n.
                    keep = p + extra
                    Y, AY = _ritz(V, W, cols, S, 0, keep, tall_threads)
                    V[:, :keep] = Y
                    W[:, :keep] = AY
                    del Y, AY
                    Sk = S[:, :keep]
                    Hk = Sk.T @ H[:cols, :cols] @ Sk
                    H[:keep, :keep] = (Hk + Hk.T) * 0.5
                    cols = keep
                V[:, cols:cols + p] = _orthonormal_block(R, V[:, :cols], p, rng, tall_threads, res)
                del R
        Wb = W[:, cols:cols + p] = _apply(matmat, V[:, cols:cols + p], dtype, n)
        with serial():
            _extend_projection(H, V, Wb, cols, cols + p, tall_threads)
        cols += p
    if not np.all(res[:k] <= done):
        warnings.warn(
            f"block_eigsh did not converge in max_iter={max_iter} iterations: residual norms "
            f"||A v - lambda v|| of the {k} wanted pairs {np.array2string(res[:k], precision=3)}"
            f", target tol * lambda_max = {done:.3g}; returning the best Ritz pairs of the "
            "current basis",
            ConvergenceWarning,
            stacklevel=3,
        )
    with serial():
        Y = _matmul(V[:, :cols], np.ascontiguousarray(S[:, :k]), tall_threads)
    values = theta[:k].copy()
    if floor is not None:
        values[np.abs(values) <= floor()] = 0.0
    return values, np.ascontiguousarray(Y)


def randomized_eigsh(A, k, *, n_oversamples=10, n_iter="auto", random_state=None):
    """The k eigenpairs of largest modulus of a square matrix A, by a randomized range finder.

    The same algorithm, random stream and operation order as scikit-learn's
    ``_randomized_eigsh(A, k, n_iter=n_iter, selection="module")`` (Halko et
    al. 2009, algorithm 4.3 and 4.4), so both give the same results to
    rounding; written here because scikit-learn's function is private.  A is
    only read, by products ``A @ Q`` and ``A.T @ Q`` with blocks of
    k + n_oversamples columns (for a C-contiguous A both are one gemm reading
    it once, no copy), so KernelPCA hands it the Gram matrix centred in place.

    n_iter: power iterations, or "auto": 7 when k < 0.1 n, else 4.  Each
    iteration is normalised by an LU factorisation (none for n_iter <= 2), the
    final basis by QR, as scikit-learn's ``randomized_range_finder``.  The
    start block is ``random_state.normal(size=(n, k + n_oversamples))`` (in
    A's dtype when A is float32).  The singular values of Q^T A become the
    eigenvalues, negated where the left and right singular vectors disagree
    in sign: "module" selection returns the k eigenvalues of largest |lambda|,
    so a significant negative eigenvalue is returned rather than skipped.

    Returns (eigenvalues (k,), eigenvectors (n, k)), in decreasing modulus.
    """
    n = A.shape[0]
    rng = check_random_state(random_state)
    if n_iter == "auto":
        n_iter = 7 if k < 0.1 * n else 4
    size = k + n_oversamples
    Q = rng.normal(size=(n, size))
    if A.dtype == np.float32:
        Q = Q.astype(np.float32, copy=False)
    if n_iter <= 2:
        def normalise(M):
            return M
    else:
        def normalise(M):
            return linalg.lu(M, permute_l=True, check_finite=False)[0]
    for _ in range(n_iter):
        Q = normalise(A @ Q)
        Q = normalise(A.T @ Q)
    Q = linalg.qr(A @ Q, mode="economic", check_finite=False)[0]
    B = Q.T @ A
    Uhat, s, Vt = linalg.svd(B, full_matrices=False, lapack_driver="gesdd")
    del B
    U = Q @ Uhat
    vectors = U[:, :k]
    signs = np.sign(np.einsum("ji,ij->j", Vt[:k, :], vectors))
    return s[:k] * signs, vectors


def _extend_projection(H, V, Wb, c0, c1, tall_threads=None):
    """Fill rows and columns c0..c1-1 of H = V^T W, symmetrised ((H + H^T) / 2), for
    the new columns c0..c1-1 of the basis V and their products Wb (n x (c1 - c0))."""
    # H[i, j] for an old column i and a new j is v_i . w_j alone: v_j . w_i is
    # the same number up to rounding, and a second pass over the basis for
    # their mean would cost as much as this one.  Wb is the product as
    # returned, contiguous: as a column slice of W it takes dgemm instead
    # of the register tiles (KernelPCA at N=8000, 13 calls: 6.0 ms against
    # 3.9 ms per fit).
    B = _inner(V[:, :c1], Wb, tall_threads)
    B[c0:] = (B[c0:] + B[c0:].T) * 0.5
    H[:c1, c0:c1] = B
    H[c0:c1, :c0] = B[:c0].T


def _ritz(V, W, cols, S, lo, hi, tall_threads=None):
    """Ritz vectors lo..hi-1 of the basis and their products."""
    Sj = np.ascontiguousarray(S[:, lo:hi])
    return _matmul(V[:, :cols], Sj, tall_threads), _matmul(W[:, :cols], Sj, tall_threads)


def _residuals(V, W, cols, S, theta, lo, hi, tall_threads=None):
    """Residuals A y - theta y of Ritz pairs lo..hi-1 and their norms, without forming y.

    A y = W s and y = V s, so the residual is W s - V (s theta): one pass over
    the basis instead of two products, a difference and a norm (8000 rows, a
    104-column basis, 8 pairs, 2 threads: 0.29 ms against 1.27 ms, best of 30).
    """
    Sj = np.ascontiguousarray(S[:, lo:hi])
    STj = Sj * theta[lo:hi]
    if tall_threads is None or V.shape[0] < _TALL_MIN_ROWS:
        R = W[:, :cols] @ Sj - V[:, :cols] @ STj
        return R, np.linalg.norm(R, axis=0)
    R = np.empty((V.shape[0], hi - lo))
    norms = _centering.tall_residual(V[:, :cols], W[:, :cols], Sj, STj, R, tall_threads)
    return R, norms


def _form(matmat, n, p, dtype):
    """The operator as an n x n array, symmetrised, from products with blocks of
    p columns wide (so the identity blocks stay O(n) memory)."""
    A = np.empty((n, n))
    for start in range(0, n, p):
        stop = min(n, start + p)
        E = np.zeros((n, stop - start))
        E[np.arange(start, stop), np.arange(stop - start)] = 1.0
        A[:, start:stop] = _apply(matmat, E, dtype, n)
    return (A + A.T) * 0.5


def _dense(matmat, n, k, p, dtype, callback):
    p = min(p, 256)
    # _form's result is symmetric: its transpose is the same matrix in Fortran order.
    w, v = top_eigh(_form(matmat, n, p, dtype).T, k, overwrite_a=True,
                    rebuild=lambda: _form(matmat, n, p, dtype).T)
    w, v = w[::-1].copy(), np.ascontiguousarray(v[:, ::-1])
    if callback is not None:
        A_v = np.empty_like(v)
        for start in range(0, k, p):
            A_v[:, start:start + p] = _apply(matmat, v[:, start:start + p], dtype, n)
        callback(1, np.linalg.norm(A_v - v * w, axis=0))
    return w, v


def class_ridge_solve(K, labels, counts, reg, zero_message):
    """Z = (K~ + c I)^{-1} HQ for a centred Gram K~, overwriting K (Cholesky in place).

    HQ = H [1_c / sqrt(n_c)] is the centred, size-scaled class indicator
    (n x C) and c = reg * trace(K~): the solve behind KernelSIR's sliced and
    KernelFDA's discriminant problems.  Returns (c, HQ, Z); raises
    ValueError(zero_message) when K~ is zero.
    """
    n = K.shape[0]
    trace = np.trace(K)
    if not trace > 0:
        raise ValueError(zero_message)
    c = reg * trace
    K.flat[:: n + 1] += c
    HQ = np.zeros((n, counts.size))
    HQ[np.arange(n), labels] = 1.0 / np.sqrt(counts[labels])
    HQ -= np.sqrt(counts) / n
    # K is symmetric and C-ordered, so K.T is the same matrix in Fortran
    # order: LAPACK factorises it in place without a copy.  Without the GIL,
    # in a worker thread, so that Ctrl-C is seen during the n^3 / 3 flops
    # (scipy's cholesky holds the GIL for the whole factorisation).
    Z = np.array(HQ, order="F")
    interruptible(_inchol.posv, K.T, Z, False)
    return c, HQ, Z
