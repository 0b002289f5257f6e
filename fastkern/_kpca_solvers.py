"""KernelPCA's eigensolvers: one object per ``eigen_solver`` value, in one table.

Each solver fits the top eigenpairs of the centred training Gram (``fit``,
which stores them with ``KernelPCA._store_eigenpairs`` and keeps on the
estimator what its ``transform`` needs) and projects new points with them
(``transform``).  ``SOLVERS`` maps the public names to the solvers;
KernelPCA's parameter constraint, its error messages, the command line's
choices and ``choose`` (eigen_solver="auto") read it.

The solvers are stateless: the fitted state lives on the estimator, so that
pickling, ``clone`` and the attributes (``eigenvalues_``, ``_fit_row_means``,
...) are those of a plain scikit-learn estimator.
"""
import warnings

import numpy as np
from scipy import linalg, sparse
from scipy.sparse.linalg import ArpackError, ArpackNoConvergence
from sklearn.exceptions import ConvergenceWarning
from sklearn.preprocessing import normalize
from sklearn.utils.extmath import svd_flip
from sklearn.utils.validation import _check_psd_eigenvalues

from fastkern import _registry, _solver_names
from fastkern._eigen import (LANCZOS_THREADED_ROWS, block_eigsh, krylov_basis,
                             lanczos_basis_size, lanczos_eigsh, missed_values,
                             one_triangle_product,
                             randomized_eigsh, rounding_floor, seeded_eigsh, symmetric_product,
                             top_eigh)
from fastkern._kernel_api import KernelSpec, gram_dtype
from fastkern._linalg import solve_shifted_in_place
from fastkern._operator import kernel_times
from fastkern._progress import report_iteration, report_stage, stage_work
from fastkern._threads import blas_limit, blas_threads, scipy_blas_serial
from fastkern._validation import (_all_finite, check_n_threads, is_dask_array,
                                  memory_budget_bytes, parse_memory_budget,
                                  seeded_random_state, within_memory_budget)
from fastkern.centering import CentredGram, KernelCenterer
from fastkern.kernels import Kernel
from fastkern.pairwise import PackedUpperGram, read_back

# Old solver names, still accepted with a FutureWarning until fastkern 0.3.
DEPRECATED_SOLVERS = _solver_names.KERNEL_PCA_DEPRECATED

_LINEAR = KernelSpec.from_params("linear")
_BOUNDED_KERNELS = tuple(name for k in _registry.KERNELS if k.bounded for name in k.names)

# Blocks in the "block_krylov" basis before a thick restart.  The basis of an
# explicit Gram is small next to K (at N=8000, 21 blocks of 8 columns and
# their products are 4% of K), and a restart discards Krylov information, so
# a long basis saves products (docs/developer/performance_history.rst).
_KRYLOV_MAX_BLOCKS = 20

# "auto" picks an iterative solver above this many samples (the dense LAPACK
# reduction costs O(n^3) whatever k), as scikit-learn.
_ITERATIVE_MIN_SAMPLES = 200
# ... and fastkern's Lanczos (or ARPACK, where its products would not be one
# thread's symv: see _one_thread_products) for fewer than 10 components from
# this many, where ARPACK overtook syevr over the sizes benchmark's spectra
# (performance_history, "Small and mid sizes"); the Lanczos solver took
# 0.76-1.02x the time of syevr at N = 150 (five cases) and less than ARPACK
# everywhere from 200.
_ARPACK_MIN_SAMPLES = 190
# ... and the block Krylov solver, for fewer than 10 components, from this
# many samples where ARPACK would have been the choice (more than
# ARPACK_SYMV_MAX_THREADS BLAS threads): the switch measured on 2 threads
# before the Lanczos solver's products took threads (the block solver then
# the faster in 11 of 12 spectra from 3000 samples); how the two compare on
# more cores is not measured.
_KRYLOV_MIN_SAMPLES = 2000
# ... and from this many where the Lanczos solver would be.  Side by side on
# 2 idle cores (RBF, d = 8, 16, 32, 64, gamma 1/d and 0.5), with the Lanczos
# solver's products on both threads (lanczos_eigsh's LANCZOS_THREADED_ROWS),
# the Lanczos solver's time over the block solver's: 0.39-0.73x at N = 2000
# (seven spectra), 0.55-1.03x at 3000, 0.69-1.17x at 4000 (geometric mean
# 0.88), 1.04-1.66x at 6000 and 1.10-1.77x at 8000 (four).  On one thread:
# 0.57-0.97x at 2000, 0.73-1.27x at 3000 and 0.81-1.36x at 4000 (five
# spectra; geometric means 0.80, 1.03, 1.12).  Both counts take the same
# solver, so that the result does not depend on the thread count (the
# Lanczos solver's products give the same sums on any).  Nearly diagonal
# Grams go to the block solver from 2000 samples: see _NEAR_DIAGONAL.
_LANCZOS_MAX_SAMPLES = 5000
# A Gram whose off-diagonal entries sum, in absolute value, to less than this
# fraction of its diagonal (over rows sampled evenly: _nearly_diagonal) is a
# multiple of the identity to about that much where its diagonal is constant
# (RBF): the top eigenvalues are one cluster, which the Lanczos solver
# resolves to machine precision one vector per product, where the block
# solver's first product of 11-15 vectors reaches "auto"'s tolerance.
# Side by side at N = 2000 (RBF, d = 16 to 64, gamma from 1/d to 4), the
# Lanczos solver over the block solver: 1.8-2.0x at 4e-16 to 1.4e-12, 0.45-0.79x
# from 2.2e-11 up (d = 64, gamma 0.5: 6e-14 and 1.9x; gamma 0.4: 2.2e-11 and
# 0.79x).  "auto" hands such a Gram to the block solver from
# _NEAR_DIAGONAL_MIN_SAMPLES, where it chose that solver before the Lanczos
# solver's products took threads.  Below it the Lanczos solver keeps it:
# where the entries are subnormal (d = 64, gamma 4), the block solver took
# 2.7x the Lanczos solver's time at 1250 rows.
_NEAR_DIAGONAL = 5e-12
_NEAR_DIAGONAL_MIN_SAMPLES = 2000
# Rows _nearly_diagonal reads.
_NEAR_DIAGONAL_ROWS = 32
# Convergence target of "block_krylov" when "auto" picks it with tol=0: the
# eigenvectors then agree with LAPACK's to ~1e-13 (subspace angle; at most
# 1.2e-13 over 5 seeds at N=2000, against 1.4e-12 with 1e-12), as ARPACK's.
# The residuals fall ~30x per product here, so the last product often
# overshoots: at N=8000 (gamma 1/16, 1/2, 1/160) 2e-13 took as many products
# as 1e-12 (13, 24 and 8 of 8 columns).
_AUTO_KRYLOV_TOL = 2e-13


def _row_normalised(kernel):
    """Whether a kernel scales the rows to unit norm first (cosine: the registry's
    ``normalized``), which the blocked kernel passes of the large-N solvers do not."""
    kdef = _registry.BY_NAME.get(kernel) if isinstance(kernel, str) else None
    return kdef is not None and kdef.normalized


def krylov_block_size(k):
    """Columns per block product of the "block_krylov" solver: k + 3, at least 8,
    rounded up to a multiple of 4.

    fastkern's own product (``_centering.gram_matmat``) pads a block to a
    multiple of 4 columns and costs about as much for 8 columns as for 4 (K
    is read once either way), so the block is as wide as that allows.  With
    the basis of ``_KRYLOV_MAX_BLOCKS`` blocks, measured at N=8000, RBF, d=16,
    2 cores (fit_transform, best of 3): for 5 components, 8 columns took
    0.279 s against 12's 0.334 s at gamma=1/16, 0.542 s against 0.700 s at
    gamma=1/2 and 0.203 s against 0.231 s at gamma=1/160; for 2 components,
    8 columns beat 4 and 12; for 20, 24 beat 28 and 32.
    """
    return -(-max(8, k + 3) // 4) * 4


def scaled_eigenvectors(est, dtype):
    """eigenvectors_ / sqrt(eigenvalues_), zero columns for zero eigenvalues (clipped >= 0)."""
    scaled = np.zeros_like(est.eigenvectors_, dtype=dtype)
    nonzero = np.flatnonzero(est.eigenvalues_)
    scaled[:, nonzero] = est.eigenvectors_[:, nonzero] / np.sqrt(est.eigenvalues_[nonzero])
    return scaled


def _fit_pre_images(est, X, X_transformed, out=None, copy=False):
    """The kernel ridge map of inverse_transform, its Gram computed into ``out`` if
    given (or copied to a C-ordered buffer with ``copy``)."""
    Kt = est._gram(X_transformed, out=out)
    if copy:
        Kt = np.array(Kt, order="C")
    est.dual_coef_ = solve_shifted_in_place(Kt, X.astype(Kt.dtype, copy=False),
                                            float(est.alpha))
    est.X_transformed_fit_ = X_transformed


class Solver:
    """One ``eigen_solver`` value of KernelPCA.

    ``fit(est, X, k)`` takes the validated X and the number of components k
    (n_components clamped to n_samples) and returns the training embedding,
    or None for the estimator to compute it from the eigenpairs;
    ``transform(est, X)`` projects the validated X.
    """

    name = None
    #: Takes sparse X (the Gram is computed from it without densifying it).
    sparse = True
    #: The Gram is never stored: the kernel passes run in blocks, in-process
    #: or, for ``cluster``, on a Dask cluster; transform accepts a dask array.
    large_n = False
    cluster = False

    def check(self, est, X):
        """Raise on an input the solver cannot take, before any work."""


class _GramSolver(Solver):
    """The solvers on the stored training Gram, centred in place or implicitly."""

    def basis(self, n, k):
        """Storage the eigensolver allocates before the Gram (None: none)."""
        return None

    def gram(self, est, X):
        return full_gram(est, X)

    def for_gram(self, est, K):
        """The solver for the computed Gram K: this one, unless the Gram says otherwise."""
        return self

    def fit(self, est, X, k):
        if est.fit_inverse_transform and sparse.issparse(X):
            raise NotImplementedError("Inverse transform not implemented for sparse matrices!")
        basis = self.basis(X.shape[0], k)
        report_stage("kernel matrix")
        with stage_work():
            K = self.gram(est, X)
        # The bounded kernels' values (RBF, Laplacian, sigmoid, cosine, ...: the
        # registry's) lie in [-1, 1] for finite X: only the other kernels can
        # overflow, so only they pay a pass over K.
        if est.kernel not in _BOUNDED_KERNELS and not _all_finite(K):
            raise ValueError("the kernel matrix contains NaN or infinity (overflow in the "
                             "kernel? check gamma)")
        # K was built here, C-contiguous and finite, so it is not scanned again.
        est._centerer = KernelCenterer(n_threads=est.n_threads)
        solver = self.for_gram(est, K)
        if solver is not self:
            est._fit_solver = solver.name
            basis = solver.basis(K.shape[0], k)
        report_stage(f"eigensolver ({solver.name})")
        eigenvalues, eigenvectors = solver.eigenpairs(est, K, X, k, basis)
        est._store_eigenpairs(eigenvalues, eigenvectors, K.dtype)

        X_transformed = None
        if est.fit_inverse_transform:
            X_transformed = est.eigenvectors_ * np.sqrt(est.eigenvalues_)
            # The Gram buffer is dead after the eigensolver: the pre-image
            # kernel is computed into it (or, for a packed K, after it is
            # freed), so only one N x N array is ever live.
            out = K if isinstance(K, np.ndarray) else None
            del K
            _fit_pre_images(est, X, X_transformed, out=out)
        else:
            del K
        if est._precomputed:
            est.X_fit_ = X
        else:
            est.X_fit_ = X.copy() if est.copy_X else X
        return X_transformed

    def transform(self, est, X):
        if not est._precomputed:
            projection = _fused_projection(est, X)
            if projection is not None:
                return projection
            K = est._gram(X.astype(est.X_fit_.dtype, copy=False), est.X_fit_)
        else:
            # validate_data checked X.shape[1] == n_samples of the fit.
            K = X.toarray(order="C") if sparse.issparse(X) else X
            K = np.array(K, dtype=est.eigenvectors_.dtype, order="C", copy=True)
        K = est._centerer.transform(K, copy=False)
        return K @ scaled_eigenvectors(est, est.eigenvectors_.dtype)


def _fused_projection(est, X):
    """The centred K(X, X_fit_) @ A, K never stored (``_operator.kernel_times``), or None
    where the tile loops do not have the kernel.

    One pass gives K A and K 1 together; the centring is then the training
    means' correction of ``large_n.centred_projection``, O(n k).
    """
    from fastkern import large_n

    if not isinstance(X, np.ndarray) or X.ndim != 2 or est.kernel_spec_.compiled(
            X.shape[1]) is None:
        return None
    A = scaled_eigenvectors(est, np.float64)
    A1 = np.hstack([A, np.ones((A.shape[0], 1))])
    KA1 = kernel_times(est.kernel_spec_, X.astype(est.X_fit_.dtype, copy=False), est.X_fit_,
                       A1, n_threads=est.n_threads)
    if KA1 is None:
        return None
    centerer = est._centerer
    projection = large_n.centred_projection(KA1, A, centerer.K_fit_rows_, centerer.K_fit_all_)
    return projection.astype(est.eigenvectors_.dtype, copy=False)


def full_gram(est, X):
    """The training Gram, writeable, C-contiguous, in the Gram dtype: a copy of a
    precomputed kernel, into a buffer the solvers may destroy."""
    if est._precomputed:
        return X.toarray(order="C") if sparse.issparse(X) else np.array(X, order="C",
                                                                         copy=True)
    with read_back():
        K = est._gram(X)
    if not (K.flags.c_contiguous and K.flags.writeable) or K.dtype != gram_dtype(X):
        K = np.array(K, dtype=gram_dtype(X), order="C", copy=True)
    return K


class _CentredInPlace(_GramSolver):
    """The solvers that read K itself, double-centred in place: one pass for the
    means, one for the update."""

    def eigenpairs(self, est, K, X, k, basis):
        est._centerer._fit_transform_checked(K)

        def rebuild():
            # "dense"'s fallback needs the centred Gram again (see top_eigh):
            # the same means, so the centerer is refitted as is.
            return est._centerer._fit_transform_checked(full_gram(est, X))

        return self.solve(est, K, k, rebuild)


class Dense(_CentredInPlace):
    """LAPACK syevr on the centred Gram, in place."""

    name = "dense"

    def solve(self, est, K, k, rebuild):
        # K.T is K's F-ordered view, so LAPACK works in place; its upper
        # triangle is K's lower one, the triangle scikit-learn's eigh reads
        # (they differ for a non-symmetric precomputed kernel).
        return top_eigh(K.T, k, lower=False, overwrite_a=True, rebuild=lambda: rebuild().T)


# Thick restarts of "thick_restart_lanczos" with max_iter=None before LAPACK
# solves instead (see ThickRestartLanczos.solve).
_LANCZOS_RESTARTS = 20

# Lanczos vectors ARPACK keeps beyond the k wanted (see Arpack.solve).
ARPACK_EXTRA_VECTORS = 25
# ARPACK's products read one triangle of K with scipy's symv on one thread
# (see Arpack.solve) when the fit has at most this many BLAS threads, and on
# more below ARPACK_SYMV_ROWS rows, where numpy's OpenBLAS runs its gemv on
# one thread anyway (below m n = 460,800).
ARPACK_SYMV_MAX_THREADS = 2
ARPACK_SYMV_ROWS = 680


def _nearly_diagonal(K):
    """Whether K's off-diagonal entries sum in absolute value to less than
    _NEAR_DIAGONAL of its diagonal's, judged on _NEAR_DIAGONAL_ROWS rows evenly
    spaced: their entries from the diagonal on (contiguous in a full or a
    packed K), the off-diagonal sum scaled to whole rows."""
    n = K.shape[0]
    rows = np.unique(np.linspace(0, n - 1, _NEAR_DIAGONAL_ROWS).astype(np.intp))
    packed = isinstance(K, PackedUpperGram)
    diagonal = off = 0.0
    for i in rows:
        row = K.data[K.row_start[i] + i:K.row_start[i] + n] if packed else K[i, i:]
        diagonal += abs(float(row[0]))
        off += float(np.abs(row[1:]).sum())
    counted = float(np.sum(n - 1 - rows))
    if counted:
        off *= rows.size * (n - 1) / counted
    return diagonal > 0 and off < _NEAR_DIAGONAL * diagonal


def _symmetric_gram(est):
    """Whether the fit's Gram is symmetric: fastkern computed it.  A precomputed
    kernel or a callable's may not be."""
    return not est._precomputed and isinstance(est.kernel, (str, Kernel))


def _one_thread_products(est, n):
    """Whether ARPACK's products would be one thread's symv (see Arpack.solve)."""
    return (blas_threads(check_n_threads(est.n_threads), n) <= ARPACK_SYMV_MAX_THREADS
            or n < ARPACK_SYMV_ROWS)


class Arpack(_CentredInPlace):
    """scipy's eigsh on the centred Gram."""

    name = "arpack"

    def solve(self, est, K, k, rebuild):
        # k == n: scipy warns and falls back to eigh, as in scikit-learn.
        with seeded_random_state(est.random_state) as random_state:
            v0 = random_state.uniform(-1, 1, K.shape[0])
            # The same stream gives ARPACK's new directions after an
            # invariant subspace: a repeated eigenvalue's pairs too are
            # random_state's.
            rng = random_state.randint(np.iinfo(np.int32).max)
        # ARPACK's own vector operations on scipy's BLAS, one thread: see
        # scipy_blas_serial (the products K @ x keep numpy's threads).
        # A wider basis than scipy's default (20 for k = 5): fewer implicit
        # restarts (performance_history, "Small and mid sizes").
        ncv = min(K.shape[0], max(2 * k + 1, k + ARPACK_EXTRA_VECTORS))
        # A Gram fastkern computed is symmetric: its products read one
        # triangle (symv), half of what numpy's gemv reads, on scipy's BLAS,
        # which scipy_blas_serial holds to one thread.  On 2 threads gemv was
        # faster alone from 701 rows, and slower next to other libraries'
        # BLAS pools (performance_history, "Small and mid sizes"); on more
        # threads it keeps them.  Otherwise all of it, as scikit-learn's
        # ARPACK reads.
        n = K.shape[0]
        A = K
        if _symmetric_gram(est) and k < n - 1 and _one_thread_products(est, n):
            # K's lower triangle, the upper one of its F-ordered K.T: the
            # triangle "dense" reads.
            A = one_triangle_product(K.T, lower=False)
        # One pair more than asked: the (k+1)-th value bounds what the probe
        # for missed copies of the top k may find (_eigen.missed_values).
        extra = int(k + 1 < n - 1)
        try:
            with scipy_blas_serial():
                w, v = seeded_eigsh(A, k + extra, which="LA", tol=est.tol,
                                    maxiter=est.max_iter, v0=v0,
                                    ncv=min(n, max(ncv, 2 * (k + extra) + 1)), rng=rng)
        except ArpackError as error:
            # A zero centred Gram (constant data) makes the start vector's
            # product zero, which ARPACK reports as an error (-9); LAPACK
            # returns its eigenvalues at once.
            if isinstance(error, ArpackNoConvergence) or np.any(K):
                raise
            return Dense().solve(est, K, k, rebuild)
        order = np.argsort(w)
        w, v = w[order], v[:, order]
        if extra and missed_values(K, w, v, rng, psd=bool(np.min(np.diagonal(K)) >= 0)):
            # ARPACK's single start vector missed a copy of a repeated (or
            # clustered) top value: LAPACK is exact.
            return Dense().solve(est, K, k, rebuild)
        return w[extra:], v[:, extra:]


class ThickRestartLanczos(_CentredInPlace):
    """fastkern's Lanczos solver (``fastkern._eigen.lanczos_eigsh``) on the centred
    Gram's lower triangle."""

    name = "thick_restart_lanczos"

    def gram(self, est, X):
        # From LANCZOS_THREADED_ROWS the products are fastkern's own, which
        # read the packed upper triangle as fast as the full matrix's lower
        # one: half the memory, and the tiles below the diagonal never
        # computed (as the block solver's: PackedUpperGram).
        if (X.shape[0] >= LANCZOS_THREADED_ROWS and _symmetric_gram(est)
                and est.kernel in _BOUNDED_KERNELS):
            with read_back():
                K = est.kernel_spec_.upper_gram(X, n_threads=est.n_threads)
            if K is not None:
                return K
        return full_gram(est, X)

    def for_gram(self, est, K):
        # See _NEAR_DIAGONAL.
        n = K.shape[0]
        if (est.eigen_solver == "auto" and n >= _NEAR_DIAGONAL_MIN_SAMPLES
                and _nearly_diagonal(K)):
            return SOLVERS["block_krylov"]
        return self

    def eigenpairs(self, est, K, X, k, basis):
        n = K.shape[0]
        # A symmetric float64 Gram: the solver centres each product instead
        # of K (two passes over it, 12-16% of a fit at 1000-2000 rows), given
        # a basis that leaves room for the direction of 1 (lanczos_eigsh's
        # centred).  float32 keeps the centring accumulated in float64.
        if (not _symmetric_gram(est) or K.dtype != np.float64
                or lanczos_basis_size(n, k) > n - 2):
            # Centred in place: the whole matrix (a packed one only when
            # nearly every component is asked for).
            return super().eigenpairs(est, _unpacked(K), X, k, basis)
        centerer = est._centerer

        def rebuild():
            return centerer.transform(full_gram(est, X), copy=False)

        pairs = self.solve(est, K, k, rebuild, centerer=centerer)
        if pairs is not None:
            return pairs
        # The probe found a value the Lanczos basis missed (a repeated or
        # clustered k-th eigenvalue): the block solver holds k + 3 or more
        # directions of every eigenspace, on the same uncentred K.
        return SOLVERS["block_krylov"].eigenpairs(est, K, X, k, None, tol=_AUTO_KRYLOV_TOL)

    def solve(self, est, K, k, rebuild, centerer=None):
        """The pairs of the centred K, or with a centerer (eigenpairs) of K
        centred in each product, the centerer fitted to K's means."""
        n = K.shape[0]
        if k >= n:
            return Dense().solve(est, _unpacked(K), k, rebuild)
        # The start vector ARPACK gets from the same random_state; the same
        # stream gives the new directions after an invariant subspace.
        with seeded_random_state(est.random_state) as rng:
            v0 = rng.uniform(-1, 1, n)
            tol = est.tol or float(np.finfo(K.dtype).eps)

            def callback(step, residual):
                report_iteration(step, residual, tol)
                if est.verbose:
                    print(f"[KernelPCA] thick_restart_lanczos step {step}: "
                          f"largest relative residual estimate {residual:.3e}", flush=True)
            # scipy's BLAS on one thread: a threaded symv's sums depend on the
            # thread count.  lanczos_eigsh's own products, from
            # LANCZOS_THREADED_ROWS, take the threads without changing the steps.
            with blas_limit(1):
                if isinstance(K, PackedUpperGram):
                    # The means from the triangle the products read, by their kernel.
                    means = symmetric_product(K, np.ones(n), check_n_threads(est.n_threads)) / n
                    centerer._set_means(means, float(np.mean(means)))
                elif centerer is not None:
                    # The means of the triangle the products read: one more product.
                    means = linalg.blas.dsymv(1.0, K.T, np.ones(n), lower=0) / n
                    centerer._set_means(means, float(np.mean(means)))
                w, v, residuals = lanczos_eigsh(
                    K, k, tol=est.tol, v0=v0, random_state=rng, callback=callback,
                    max_iter=_LANCZOS_RESTARTS if est.max_iter is None else est.max_iter,
                    centred=centerer is not None, n_threads=check_n_threads(est.n_threads))
        if centerer is not None:
            # A Ritz value within the rounding of a product (the block
            # solvers' floor too) is 0 to working precision: as in K centred
            # first, where a Gram of identical rows centres to exact zeros
            # and remove_zero_eig drops them all.
            floor = rounding_floor(n, means, K.dtype)
            w = np.where(np.abs(w) <= floor, 0.0, w)
        if residuals.max() <= tol:
            return w, v
        if np.isinf(residuals).any():
            # The probe found a value the basis missed (lanczos_eigsh).
            if centerer is not None:
                return None
        elif est.max_iter is not None:
            warnings.warn(f"thick_restart_lanczos did not converge in max_iter={est.max_iter} "
                          f"restarts: relative residual estimates {residuals} (tol={tol:g})",
                          ConvergenceWarning, stacklevel=2)
            return w, v
        # Slow convergence: a top cluster only rounding separates (the
        # centred identity) or many restarts; LAPACK is exact, and cheap here.
        # The fallback reads the centred K: centred once, in place.
        if centerer is not None:
            K = centerer.transform(_unpacked(K), copy=False)
        return Dense().solve(est, K, k, rebuild)


def _unpacked(K):
    """K as a full matrix (a PackedUpperGram's values copied into a new one)."""
    if not isinstance(K, PackedUpperGram):
        return K
    return K.toarray()


class Randomized(_CentredInPlace):
    """scikit-learn's randomized range finder with "module" selection."""

    name = "randomized"

    def solve(self, est, K, k, rebuild):
        with seeded_random_state(est.random_state) as rng:
            return randomized_eigsh(K, k, n_iter=est.iterated_power, random_state=rng)


class BlockKrylov(_GramSolver):
    """fastkern's thick-restarted block Krylov solver on the implicitly centred Gram
    (``fastkern.centering.CentredGram``): no centring pass over K."""

    name = "block_krylov"

    def basis(self, n, k):
        # Before the Gram: see krylov_basis.
        return krylov_basis(n, krylov_block_size(k), _KRYLOV_MAX_BLOCKS)

    def gram(self, est, X):
        # The product can read the upper triangle alone, packed
        # (fastkern.pairwise.PackedUpperGram): the tiles below the diagonal
        # are never computed, each product reads half of K, and K takes half
        # the memory and half the page faults.
        with read_back():
            K = (None if est._precomputed
                 else est.kernel_spec_.upper_gram(X, n_threads=est.n_threads))
        return full_gram(est, X) if K is None else K

    def eigenpairs(self, est, K, X, k, basis, tol=None):
        centerer = est._centerer
        # A Gram computed here is symmetric (the tiles are mirrored, or equal
        # to rounding): its means come from the first block product, with no
        # pass of their own.  A precomputed kernel may not be, and float32
        # products would sum it in float32: one read pass.
        if est._precomputed or K.dtype != np.float64:
            row_means = centerer._fit_means_checked(K)
            op = CentredGram(K, row_means, centerer.K_fit_rows_, centerer.K_fit_all_)
        else:
            op = CentredGram(K, symmetric=True, n_threads=est.n_threads)
        eigenpairs = self._iterate(est, op, k, basis, tol)
        centerer._set_means(op.col_means, op.grand_mean)
        return eigenpairs

    def _iterate(self, est, op, k, basis, tol=None):
        K = op.K
        n = K.shape[0]
        tol = est.tol if tol is None else tol
        if tol == 0:
            tol = _AUTO_KRYLOV_TOL if est.eigen_solver == "auto" else 1e-10

        def callback(iteration, residuals):
            report_iteration(iteration, residuals.max(), tol)
            if est.verbose:
                print(f"[KernelPCA] block_krylov iteration {iteration}: "
                      f"max residual {residuals.max():.3e}", flush=True)
        # Rows of the uncentred K start the iteration (for a symmetric K, K
        # applied to unit vectors, one step for free; they need no means, and
        # converged in as many products as rows of Kc at N=8000).  As many
        # rows as the first product takes for the cost of p columns (11, or
        # 15 with AVX-512, instead of 8: see block_eigsh's v0).
        p = krylov_block_size(k)
        with seeded_random_state(est.random_state) as rng:
            rows = np.sort(rng.choice(n, size=min(op.block_width(p), n), replace=False))
            v0 = K.columns(rows) if op.upper else K[rows].T
            return block_eigsh(op, n, k, dtype=K.dtype, block_size=p, tol=tol,
                               max_iter=est.max_iter, random_state=rng, callback=callback,
                               v0=v0, max_blocks=_KRYLOV_MAX_BLOCKS,
                               n_threads=est.n_threads, omp_products=True,
                               matmat_blas=op.uses_blas,
                               basis=basis, floor=lambda: rounding_floor(n, op.col_means))


class IncompleteCholesky(Solver):
    """K ~ G G^T from ``fastkern.incomplete_cholesky``, never forming K (see
    KernelPCA's Notes)."""

    name = "incomplete_cholesky"
    sparse = False

    def fit(self, est, X, k):
        from fastkern.lowrank import factor

        if est._precomputed:
            raise ValueError(f"eigen_solver={self.name!r} evaluates the kernel of X: "
                             "it cannot use kernel='precomputed'")
        if sparse.issparse(X):
            raise TypeError(f"eigen_solver={self.name!r} needs a dense X, got a sparse matrix")
        Xk, spec = _ichol_kernel(est, X)
        # tol relative to the centred kernel, the matrix whose spectrum this is.
        res = factor(Xk, spec, tol=est.tol or 1e-6, max_rank=est.ichol_max_rank,
                     n_threads=est.n_threads, centered=True)
        G = np.array(res.G, dtype=np.float64)
        est._ichol_L = G[res.pivots]
        est._ichol_mean = G.mean(axis=0)
        G -= est._ichol_mean
        r = G.shape[1]
        lam, V = linalg.eigh(G.T @ G, check_finite=False) if r else (np.zeros(0),
                                                                       np.zeros((0, 0)))
        lam, V = lam[::-1][:k], V[:, ::-1][:, :k]
        # Components beyond the rank reached: eigenvalue 0, no direction.
        if lam.size < k:
            lam = np.concatenate([lam, np.zeros(k - lam.size)])
            V = np.hstack([V, np.zeros((r, k - V.shape[1]))])
        lam = _check_psd_eigenvalues(lam, enable_warnings=False)
        embedding = G @ V
        del G
        nonzero = lam > 0
        U = np.zeros_like(embedding)
        U[:, nonzero] = embedding[:, nonzero] / np.sqrt(lam[nonzero])
        U, _ = svd_flip(u=U, v=None)
        signs = np.where(np.sum(U * embedding, axis=0) < 0, -1.0, 1.0)
        V *= signs
        if est.remove_zero_eig or est.n_components is None:
            U, V, lam = U[:, nonzero], V[:, nonzero], lam[nonzero]
        est.eigenvalues_ = lam.astype(X.dtype)
        est.eigenvectors_ = np.ascontiguousarray(U, dtype=X.dtype)
        est._ichol_V = V
        est.ichol_pivots_ = res.pivots
        est.X_fit_ = X.copy() if est.copy_X else X
        X_transformed = est.eigenvectors_ * np.sqrt(est.eigenvalues_)
        if est.fit_inverse_transform:
            # As the exact path, but the pre-image Gram is n x n here too.
            _fit_pre_images(est, X, X_transformed, copy=True)
        return X_transformed

    def transform(self, est, X):
        from fastkern.lowrank import pivot_features

        Xk, spec = _ichol_kernel(est, X)
        Xp, _ = _ichol_kernel(est, est.X_fit_[est.ichol_pivots_])
        Kp = spec.gram(Xk.astype(est.X_fit_.dtype, copy=False), Xp, n_threads=est.n_threads)
        g = pivot_features(Kp, est._ichol_L) - est._ichol_mean
        return (g @ est._ichol_V).astype(est.eigenvectors_.dtype, copy=False)


def _ichol_kernel(est, X):
    """The rows and kernel the incomplete Cholesky factor reads: for a normalised kernel
    (cosine, the registry's), the rows scaled to unit norm and the linear kernel, so
    that each column does not normalise X again."""
    kdef = _registry.BY_NAME.get(est.kernel_spec_.kernel) \
        if isinstance(est.kernel_spec_.kernel, str) else None
    if kdef is not None and kdef.normalized:
        return normalize(X), _LINEAR
    return X, est.kernel_spec_


class _LargeN(Solver):
    """fastkern.large_n's solvers: the Gram is never stored."""

    sparse = False
    large_n = True

    def check(self, est, X):
        if sparse.issparse(X):
            takes_sparse = _names(n for n, s in SOLVERS.items() if s.sparse)
            raise TypeError(f"eigen_solver={self.name!r} does not support sparse input: X "
                            f"must be dense (the {takes_sparse} solvers take sparse X)")
        if _row_normalised(est.kernel):
            raise ValueError(f"kernel={est.kernel!r} is not available with eigen_solver="
                             f"{self.name!r}; use kernel='linear' on rows scaled to unit "
                             "norm (sklearn.preprocessing.normalize)")

    def fit(self, est, X, k, products=None):
        """products(spec) gives the matmat(V) = K @ V of another backend (Dask);
        None computes them here.  k is unused: the solver reads n_components
        itself (_components)."""
        n = X.shape[0]
        if n < 2:
            raise ValueError(f"X must have at least 2 samples for eigen_solver={self.name!r}, "
                             f"got n_samples={n}")
        X = np.ascontiguousarray(X)
        est._fit_kernel_spec(X)
        self._fit(est, X, est.kernel_spec_, parse_memory_budget(est.memory_budget), products)
        est.X_fit_ = np.array(X, copy=True) if est.copy_X else X
        est.n_features_in_ = X.shape[1]

    def _components(self, est, n, upper):
        """n_components for n samples, at most ``upper`` (what the solver can give)."""
        k = est.n_components
        if k is None:
            # As scikit-learn, None keeps every component (the zero ones are
            # dropped by _store_eigenpairs): here all `upper` the solver gives.
            # Their eigenvectors, and the solver's basis beside them, take
            # about 3 n upper values: refused, by name, beyond the budget.
            need = 3 * 8 * n * upper
            budget = memory_budget_bytes(est.memory_budget)
            if need > budget:
                raise ValueError(
                    f"n_components=None keeps every component: {upper} eigenvectors of "
                    f"{n} samples need about {need:.3g} bytes with eigen_solver="
                    f"{self.name!r}, more than the memory budget ({budget:.3g} bytes); set "
                    "n_components to the number of leading components you need")
            return upper
        if not 1 <= k <= upper:
            raise ValueError(f"n_components={k} must be in [1, {upper}] for "
                             f"eigen_solver={self.name!r} with {n} samples")
        return int(k)

    def transform(self, est, X, client=None):
        """Project X (on the Dask cluster with a client or a dask array X)."""
        cluster = None
        if client is not None or is_dask_array(X):
            from fastkern import _dask

            client, timeout = _dask.connect(client, getattr(est, "_timeout",
                                                            _dask.DEFAULT_TIMEOUT))
            X, bounds = _dask.materialize(X, client=client, timeout=timeout)
            if X.shape[1] != est.n_features_in_:
                raise ValueError(f"X has {X.shape[1]} features, but KernelPCA is expecting "
                                 f"{est.n_features_in_} features as input")
            cluster = (client, timeout, bounds)
        if sparse.issparse(X):
            raise TypeError(f"eigen_solver={self.name!r} does not support sparse "
                            "input: X must be dense")
        X = np.ascontiguousarray(X, dtype=est.X_fit_.dtype)
        return self._project(est, X, cluster).astype(X.dtype, copy=False)


class MatrixFree(_LargeN):
    """Block Krylov on K's products, each one pass of kernel tiles (fastkern.large_n)."""

    name = "matrix-free"
    cluster = True

    def fit_on_cluster(self, est, X, client, timeout):
        """The fit with the kernel passes on a Dask cluster (a client, or a dask X on
        the default one); sets est._client and est._timeout for transform."""
        from fastkern import _dask

        client, timeout = _dask.connect(client, timeout)
        est._client, est._timeout = client, timeout
        X, bounds = _dask.materialize(X, client=client, timeout=timeout)
        est.n_features_in_ = X.shape[1]
        self.fit(est, X, None, lambda spec: _dask.fit_products(
            X, bounds, spec, n_threads=est.n_threads, client=client, timeout=timeout))

    def _fit(self, est, X, spec, budget, products):
        from fastkern import large_n

        n = X.shape[0]
        if est._precomputed and X.shape[1] != n:
            raise ValueError(f"X must be a square kernel matrix for kernel='precomputed', "
                             f"got shape {X.shape}")
        k = self._components(est, n, n - 1)
        matmat = (large_n.in_process_products(X, spec, n_threads=est.n_threads,
                                              memory_budget=budget)
                  if products is None else products(spec))
        fit = large_n.matrix_free_eigenpairs(n, k, matmat, tol=est.tol, max_iter=est.max_iter,
                                             random_state=est.random_state,
                                             verbose=est.verbose)
        est._store_eigenpairs(fit.eigenvalues, fit.eigenvectors, X.dtype)
        est._fit_row_means, est._fit_grand_mean = fit.row_means, fit.grand_mean

    def _project(self, est, X, cluster):
        from fastkern import large_n

        A = scaled_eigenvectors(est, np.float64)
        # K_t 1 comes from the same pass as K_t A (centred_projection needs both).
        A1 = np.hstack([A, np.ones((est.X_fit_.shape[0], 1))])
        spec = est.kernel_spec_
        if cluster is not None:
            from fastkern import _dask

            client, timeout, bounds = cluster
            KA1 = _dask.cross_product(est.X_fit_, spec, X, A1, bounds,
                                      n_threads=est.n_threads, client=client, timeout=timeout)
        else:
            KA1 = large_n.transform_products(
                est.X_fit_, spec, A1, X, n_threads=est.n_threads,
                memory_budget=parse_memory_budget(est.memory_budget))
        return large_n.centred_projection(KA1, A, est._fit_row_means, est._fit_grand_mean)


class Nystrom(_LargeN):
    """The eigenpairs of the Nystroem approximation on n_landmarks landmarks."""

    name = "nystrom"

    def _fit(self, est, X, spec, budget, products):
        from fastkern import large_n

        n = X.shape[0]
        if est._precomputed:
            raise ValueError(f"eigen_solver={self.name!r} needs the samples, not "
                             "kernel='precomputed'")
        m = est.n_landmarks if est.n_landmarks is not None else min(n, 1000)
        if m > n:
            raise ValueError(f"n_landmarks={m} must be in [1, n_samples={n}]")
        k = self._components(est, n, m)
        fit = large_n.nystroem_eigenpairs(X, spec, k, m, n_threads=est.n_threads,
                                          random_state=est.random_state,
                                          memory_budget=budget, verbose=est.verbose)
        order, signs = est._store_eigenpairs(fit.eigenvalues, fit.eigenvectors, X.dtype)
        est._nystroem_basis = np.ascontiguousarray(fit.basis[:, order] * signs)
        est._nystroem_map, est._nystroem_mean = fit.feature_map, fit.mean

    def _project(self, est, X, cluster):
        phi = est._nystroem_map.transform(X).astype(np.float64, copy=False)
        return (phi - est._nystroem_mean) @ est._nystroem_basis


#: The solvers by public name, in the order the documentation lists them.
SOLVERS = {s.name: s for s in (Dense(), BlockKrylov(), ThickRestartLanczos(), Arpack(),
                               Randomized(), MatrixFree(), Nystrom(), IncompleteCholesky())}
#: Every value eigen_solver takes but the deprecated ones.
EIGEN_SOLVERS = _solver_names.KERNEL_PCA
if EIGEN_SOLVERS != ("auto", *SOLVERS):
    raise ImportError("fastkern._solver_names.KERNEL_PCA must list the solvers of "
                      f"fastkern._kpca_solvers.SOLVERS: {tuple(SOLVERS)}")


def _names(names):
    names = list(names)
    return ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]


def cluster_solvers():
    """The eigen_solver values that may run on a Dask cluster, as an error message lists them."""
    return _names(repr(n) for n, s in SOLVERS.items() if s.cluster) + " (or 'auto')"


def choose(est, X, k):
    """The solver of eigen_solver="auto" for the validated X and k components.

    "matrix-free" when the dense Gram would exceed ``memory_budget`` (not for
    precomputed, cosine or sparse X); otherwise the measured choice
    (benchmarks/bench_sizes.py, the "auto" grid): for k < 10 from 190
    samples, "thick_restart_lanczos" below 5000 samples and "block_krylov"
    from there, or where ARPACK's products would run on more than
    ``ARPACK_SYMV_MAX_THREADS`` BLAS threads (_one_thread_products),
    "arpack" below 2000 and "block_krylov" from there; "arpack" for
    10 <= k <= n / 50 above 200, else "dense".  The Lanczos solver hands a
    nearly diagonal Gram to "block_krylov" from 2000 samples
    (ThickRestartLanczos.for_gram).
    """
    n = X.shape[0]
    if (not est._precomputed and not sparse.issparse(X) and X.ndim == 2
            and not _row_normalised(est.kernel)
            and not within_memory_budget(n * n * X.dtype.itemsize, est.memory_budget)):
        return SOLVERS["matrix-free"]
    if n >= _ARPACK_MIN_SAMPLES and k < 10:
        if _one_thread_products(est, n):
            return SOLVERS["thick_restart_lanczos" if n < _LANCZOS_MAX_SAMPLES
                           else "block_krylov"]
        return SOLVERS["arpack" if n < _KRYLOV_MIN_SAMPLES else "block_krylov"]
    if n > _ITERATIVE_MIN_SAMPLES and k <= n // 50:
        return SOLVERS["arpack"]
    return SOLVERS["dense"]
