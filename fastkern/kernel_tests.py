"""Kernel two-sample (MMD) and independence (HSIC) tests.

``mmd_test`` and ``hsic_test`` compute their statistic from one N x N
buffer and p-values by permutation (reusing that buffer, OpenMP over the
permutations) or by a Gamma approximation of the null distribution;
``linear_mmd_test`` is the linear-time MMD with its normal null, O(N)
memory, for samples too large for a Gram.

Estimators (the ``estimator`` argument)
---------------------------------------
MMD, samples X (m rows) and Y (n rows), pooled Gram G:

* ``"unbiased"`` (default): MMD_u^2 of Gretton et al. (2012), Lemma 6,
  eq. (3): the within-sample means over i != j minus twice the cross mean.
* ``"biased"``: MMD_b^2 (eq. 5), the squared distance of the empirical mean
  embeddings, ``mean(Kxx) + mean(Kyy) - 2 mean(Kxy)``; kernlab's ``kmmd``
  reports its square root as ``mmdstats[1]``.
* ``"hyppo"`` / ``"hyppo_biased"``: hyppo's ``MMD(bias=False/True)``
  statistic (hyppo 0.5): hyppo's Hsic of the pooled sample against the 0/1
  sample labels, a *normalised* (correlation-like) HSIC, times
  2 m^2 n^2 / (m + n)^4.  Matches ``hyppo.ksample.MMD().statistic`` with the
  same kernel to 1e-8.

HSIC, paired samples X, Y (n rows each), Grams K and L, H = I - 11'/n:

* ``"unbiased"`` (default): HSIC_u of Song et al. (2012), the U-statistic
  ``tr(U(K~) U(L~)) / (n (n - 3))`` (K~ is K with a zero diagonal, U the
  U-centring of Szekely & Rizzo 2014).
* ``"biased"``: HSIC_b = tr(K H L H) / n^2 of Gretton et al. (2005, 2008).
* ``"hyppo"`` / ``"hyppo_biased"``: hyppo's ``Hsic(bias=False/True)``,
  which is *not* HSIC but a normalised one: hyppo turns each Gram into the
  distance 1 - K / max(K) and returns its distance correlation, i.e.
  ``HSIC_u(A, B) / sqrt(HSIC_u(A, A) HSIC_u(B, B))`` with
  A = K - max(K) I (K~ for kernels with a constant diagonal such as RBF),
  or for bias=True ``sqrt(HSIC_b(K, L) / sqrt(HSIC_b(K, K) HSIC_b(L, L)))``
  (0 when a variance, or the biased covariance, is <= 0).  Matches
  ``hyppo.independence.Hsic().statistic`` to 1e-8.  (hyppo's
  ``Hsic.test(..., auto=False)`` hands the Grams themselves to Dcorr as
  distances, so the statistic it reports there differs from its
  ``statistic()`` for bias=False; fastkern follows ``statistic()``.)

P-values
--------
``method="permutation"``: (1 + #{permuted >= observed}) / (1 + B), the
permutations drawn from ``random_state`` (a numpy Generator, or what
``numpy.random.default_rng`` takes) before any compiled code runs, so a
seed gives the same p-value for any ``n_threads``.

``method="gamma"``: a Gamma distribution matched to the null mean and
variance of the *biased* statistic, as Gretton's reference code does
(``hsicTestGamma.m``, Gretton et al. 2008; ``mmdTestGamma.m``, Gretton et
al. 2012, section 5).  The p-value is that of the biased statistic
(reported in ``null_params["tested_statistic"]``) whatever ``estimator``
names ``statistic``.  For MMD with m != n (Gretton's code takes m = n) the
moments are estimated from the first min(m, n) pairs (x_i, y_i) and scaled
by 1/m + 1/n as the asymptotic null requires; for m = n this is exactly
``mmdTestGamma.m``, with the unit diagonal of the RBF kernel replaced by
the kernel's actual diagonal means (the same for RBF).

Memory
------
``mmd_test`` stores the pooled Gram (N = m + n; N^2 values of the input
dtype, float32 for float32 inputs); ``hsic_test`` stores HKH in the upper
triangle and L in the strict lower triangle of one n x n buffer, computing
L in row tiles of at most 2^17 values.  Besides that: O(N) vectors and the
permutations of one chunk (at most 2^18 int32 or uint8 values per array).
"""
import dataclasses
import math
from typing import NamedTuple, Optional

import numpy as np

from fastkern import _kstats
from fastkern import _registry
from fastkern._kernel_api import (KernelSpec, check_kernel_param, resolve_gamma,
                                  string_kernel_params)
from fastkern._threads import blas_for, threads_for
from fastkern._validation import (_all_finite, check_array_2d, check_int, check_n_threads,
                                  check_option, check_real, result_dtype)

__all__ = ["MMDTestResult", "LinearMMDTestResult", "HSICTestResult",
           "mmd_test", "linear_mmd_test", "hsic_test"]

ESTIMATORS = ("unbiased", "biased", "hyppo", "hyppo_biased")
METHODS = ("permutation", "gamma")
# Values in one chunk of permutations (int32 indices or uint8 labels) and in
# one tile of L: bounded so that they stay small next to the N x N buffer.
_CHUNK_VALUES = 1 << 18
_TILE_VALUES = 1 << 17


class MMDTestResult(NamedTuple):
    """Result of :func:`mmd_test`, a named tuple.

    Parameters
    ----------
    statistic : float
        The ``estimator``'s value.
    pvalue : float
        Its p-value.
    method : str
        The method, "permutation" or "gamma".
    estimator : str
        Which statistic.
    null_distribution : ndarray of shape (n_permutations,) or None
        The permuted statistics (permutation), else None.
    null_params : dict
        With permutation: ``n_permutations``; with gamma: ``shape``, ``scale``,
        ``mean``, ``var`` of the Gamma fitted to the biased MMD_b^2 and
        ``tested_statistic`` (MMD_b^2).
    n_x : int
        The size of the sample X.
    n_y : int
        The size of the sample Y.
    kernel_params : dict
        The kernel's parameters as used (``gamma`` resolved when it was
        "median").
    """
    statistic: float
    pvalue: float
    method: str
    estimator: str
    null_distribution: Optional[np.ndarray]
    null_params: dict
    n_x: int
    n_y: int
    kernel_params: dict


class LinearMMDTestResult(NamedTuple):
    """Result of :func:`linear_mmd_test`, a named tuple.

    Parameters
    ----------
    statistic : float
        The linear-time MMD^2 (mean of the h terms over n_pairs).
    pvalue : float
        The normal upper tail of statistic / std.
    method : str
        The method, "normal".
    null_params : dict
        ``std`` (standard error of the statistic) and ``n_pairs``.
    n_x : int
        The size of the sample X.
    n_y : int
        The size of the sample Y.
    kernel_params : dict
        The kernel's parameters as used (``gamma`` resolved when it was
        "median").
    """
    statistic: float
    pvalue: float
    method: str
    null_params: dict
    n_x: int
    n_y: int
    kernel_params: dict


class HSICTestResult(NamedTuple):
    """Result of :func:`hsic_test`, a named tuple.

    The fields are those of :class:`MMDTestResult`; ``tested_statistic`` of the
    Gamma method is HSIC_b.

    Parameters
    ----------
    statistic : float
        The ``estimator``'s value.
    pvalue : float
        Its p-value.
    method : str
        The method, "permutation" or "gamma".
    estimator : str
        Which statistic.
    null_distribution : ndarray of shape (n_permutations,) or None
        The permuted statistics (permutation), else None.
    null_params : dict
        With permutation: ``n_permutations``; with gamma: ``shape``, ``scale``,
        ``mean``, ``var`` of the fitted Gamma and ``tested_statistic`` (HSIC_b).
    n_samples : int
        The number of paired samples.
    kernel_params_x : dict
        The parameters of X's kernel as used.
    kernel_params_y : dict
        The parameters of Y's kernel as used.
    """
    statistic: float
    pvalue: float
    method: str
    estimator: str
    null_distribution: Optional[np.ndarray]
    null_params: dict
    n_samples: int
    kernel_params_x: dict
    kernel_params_y: dict


# ---------------------------------------------------------------- validation


def _rng(random_state):
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(2 ** 32, dtype=np.uint64))
    try:
        return np.random.default_rng(random_state)
    except (TypeError, ValueError) as exc:
        raise TypeError("random_state must be None, an int, a numpy Generator or "
                        f"RandomState, got {random_state!r} ({exc})") from None


def _check_kernel(kernel, name):
    if isinstance(kernel, str) and kernel == "precomputed":
        raise ValueError(f"{name}='precomputed' is not supported: pass the data and a "
                         "kernel name, a fastkern kernel object or a callable")
    try:
        check_kernel_param(kernel)
    except ValueError as exc:
        raise ValueError(str(exc).replace("kernel must", f"{name} must", 1)) from None


def _kernel_spec(kernel, gamma, degree, coef0, kernel_params, data, gamma_name):
    """The test's KernelSpec, a "median" or "scale" gamma resolved on `data` by the
    estimators' rule (``_kernel_api.resolve_gamma``), and the parameters shown in
    the result (None degree/coef0: the kernel's own defaults)."""
    if isinstance(gamma, str):
        try:
            gamma = resolve_gamma(gamma, data, kernel)
        except ValueError as exc:
            raise ValueError(str(exc).replace("gamma", gamma_name, 1)) from None
        if gamma is not None:
            gamma = float(gamma)
    elif gamma is not None:
        gamma = check_real(gamma, gamma_name, low=0.0)
    if kernel_params is not None and not isinstance(kernel_params, dict):
        raise TypeError(f"kernel_params must be a dict or None, got {kernel_params!r}")
    spec = KernelSpec.from_params(kernel, gamma=gamma, degree=degree, coef0=coef0,
                                  kernel_params=kernel_params)
    if isinstance(kernel, str):
        shown = string_kernel_params(kernel, gamma=gamma, degree=degree, coef0=coef0,
                                     kernel_params=kernel_params)
    else:
        shown = dict(kernel_params or {})
    return spec, shown


def _gram_into(buf, A, spec, n_threads):
    G = spec.gram(A, out=buf, n_threads=n_threads)
    if G is not buf:
        np.copyto(buf, G)
        del G
    # _all_finite: a sum, then a chunked scan only if it is not finite (no N x N
    # boolean temporary).
    if not _all_finite(buf):
        raise ValueError("the kernel gave non-finite values (inf or NaN): choose a smaller "
                         "gamma or another kernel")


def _permutation_pvalue(observed, null):
    # Ties up to rounding count as >= (as scipy.stats.permutation_test).
    tol = 100 * np.finfo(np.float64).eps * max(abs(observed), 1e-300)
    return float((1 + np.count_nonzero(null >= observed - tol)) / (1 + len(null)))


def _gamma_pvalue(stat, mean, var, what):
    from scipy.stats import gamma as gamma_dist

    if not (mean > 0 and var > 0 and math.isfinite(mean) and math.isfinite(var)):
        raise ValueError(f"the Gamma approximation of the {what} null is undefined here "
                         f"(null mean {mean:.3g}, variance {var:.3g}: the kernel sees no "
                         "variation in the data); use method='permutation'")
    shape, scale = mean * mean / var, var / mean
    p = float(gamma_dist.sf(stat, shape, scale=scale))
    return p, {"shape": shape, "scale": scale, "mean": mean, "var": var,
               "tested_statistic": float(stat)}


def _ucentered(T, s_at_b, s_a_bt, s_a_b, sum_at, sum_a, sum_bt, sum_b, n):
    """sum_{i != j} U(A)_ij U(B)_ij (U: U-centring) from the off-diagonal cross sum T.

    A's off-diagonal row sums are at (a_tilde), its full row sums a (with
    its diagonal), likewise bt, b for B; s_x_y are the dot products of
    those vectors (B's permuted); everything else is a sum.
    """
    c = 1.0 / (n - 2)
    a0 = sum_a / ((n - 1) * (n - 2))
    b0 = sum_b / ((n - 1) * (n - 2))
    return (T - 2 * c * s_at_b + b0 * sum_at - 2 * c * s_a_bt + a0 * sum_bt
            + 2 * (n - 2) * c * c * s_a_b + 2 * c * c * sum_a * sum_b
            - 2 * (n - 1) * c * a0 * sum_b - 2 * (n - 1) * c * b0 * sum_a
            + n * (n - 1) * a0 * b0)


def _normalised(cov, var_a, var_b, biased):
    """hyppo's Dcorr of the two centred matrices, vectorised over cov."""
    cov = np.asarray(cov, dtype=np.float64)
    if var_a <= 0 or var_b <= 0:
        return np.zeros_like(cov)
    r = cov / math.sqrt(var_a * var_b)
    if biased:
        return np.where(cov > 0, np.sqrt(np.maximum(r, 0.0)), 0.0)
    return r


def _chunk_size(n, n_threads):
    return max(8 * n_threads, min(1024, _CHUNK_VALUES // max(n, 1)))


# ---------------------------------------------------------------- MMD


def mmd_test(X, Y, kernel="rbf", gamma=None, degree=3, coef0=1, kernel_params=None, *,
             estimator="unbiased", method="permutation", n_permutations=1000,
             random_state=None, n_threads=None):
    """Test whether X and Y come from the same distribution (kernel two-sample test).

    Parameters
    ----------
    X : array-like of shape (m, d)
        The first sample (at least 2 rows; float32 for both keeps the Gram in
        float32).
    Y : array-like of shape (n, d)
        The second sample (at least 2 rows), with the same columns.
    kernel : str, Kernel or callable, default="rbf"
        As the estimators' ``kernel`` (not "precomputed").
    gamma : float (>= 0), "median" or "scale", default=None
        None: the kernel's default (1 / d for "rbf").  "median": the median
        heuristic 1 / median ||z_i - z_j||^2 over the pooled sample
        (:func:`fastkern.estimate_gamma`); "scale": 1 / (d Z.var()); both as
        the estimators' gamma.
    degree : float, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1
        Constant term of the polynomial and sigmoid kernels.
    kernel_params : dict, default=None
        Parameters of a callable kernel, passed as keyword arguments.
    estimator : {"unbiased", "biased", "hyppo", "hyppo_biased"}, default="unbiased"
        The statistic (see the module docstring).
    method : {"permutation", "gamma"}, default="permutation"
        How the p-value is computed (see the module docstring).
    n_permutations : int, default=1000
        Number of permutations (>= 1) of ``method="permutation"``.
    random_state : None, int, numpy Generator or RandomState, default=None
        Draws the permutations (before any compiled code runs, so a seed gives
        the same p-value for any ``n_threads``).
    n_threads : int, default=None
        OpenMP threads; None means the default (OMP_NUM_THREADS, else the CPUs
        available to this process, capped by its CPU quota); one thread below
        256 x 256 values, where a parallel region costs more than it saves.

    Returns
    -------
    MMDTestResult
        The statistic, its p-value and the null distribution's description.

    Raises
    ------
    ValueError
        If X and Y differ in columns, a sample has fewer than 2 rows, or an
        option is unknown.

    See Also
    --------
    linear_mmd_test : The linear-time test, for samples too large for a Gram.

    Notes
    -----
    Memory: the pooled Gram (N = m + n squared, in the input dtype) plus
    O(N) vectors and one chunk of at most 2^18 permutation labels.

    Examples
    --------
    >>> import numpy as np
    >>> from fastkern import mmd_test
    >>> rng = np.random.default_rng(0)
    >>> res = mmd_test(rng.normal(size=(50, 2)), rng.normal(1.0, size=(50, 2)),
    ...                n_permutations=200, random_state=0)
    >>> bool(res.pvalue < 0.05)
    True
    """
    _check_kernel(kernel, "kernel")
    estimator = check_option(estimator, "estimator", ESTIMATORS)
    method = check_option(method, "method", METHODS)
    X = check_array_2d(X, "X")
    Y = check_array_2d(Y, "Y")
    if X.shape[1] != Y.shape[1]:
        raise ValueError(f"X and Y must have the same number of features (columns), got "
                         f"X with {X.shape[1]} and Y with {Y.shape[1]}")
    nx, ny = X.shape[0], Y.shape[0]
    if nx < 2 or ny < 2:
        raise ValueError(f"mmd_test needs at least 2 samples in each of X and Y, got "
                         f"{nx} and {ny}")
    if estimator == "hyppo" and nx + ny < 4:
        raise ValueError("estimator='hyppo' needs at least 4 samples in all")
    n_permutations = check_int(n_permutations, "n_permutations", 1)
    n_threads = threads_for(check_n_threads(n_threads), (nx + ny) ** 2)
    rng = _rng(random_state)

    dtype = result_dtype(X, Y)
    Z = np.concatenate([np.asarray(X, dtype=dtype), np.asarray(Y, dtype=dtype)])
    spec, shown = _kernel_spec(kernel, gamma, degree, coef0, kernel_params, Z, "gamma")
    N = nx + ny
    G = np.empty((N, N), dtype=dtype)
    with blas_for(n_threads, N):
        _gram_into(G, Z, spec, n_threads)
    del Z
    label_kernel = None
    if estimator in ("hyppo", "hyppo_biased"):
        label_kernel = _label_kernel(spec, X.shape[1])
    stats = _MMDStats(G, nx, ny, estimator, n_threads, label_kernel)
    observed = float(stats.statistics(stats.observed_labels())[0])

    if method == "gamma":
        pvalue, null_params = stats.gamma_null()
        null = None
    else:
        null = np.empty(n_permutations)
        chunk = _chunk_size(N, n_threads)
        for start in range(0, n_permutations, chunk):
            count = min(chunk, n_permutations - start)
            labels = np.zeros((count, N), dtype=np.uint8)
            for k in range(count):
                labels[k, rng.permutation(N)[:nx]] = 1
            null[start:start + count] = stats.statistics(labels)
        pvalue = _permutation_pvalue(observed, null)
        null_params = {"n_permutations": n_permutations}
    return MMDTestResult(observed, pvalue, method, estimator, null, null_params, nx, ny,
                         shown)


def _label_kernel(spec, n_features):
    """k(0, 0), k(1, 1), k(0, 1) of the kernel on hyppo's 1-column sample labels,
    with the gamma in effect on the data (gamma=None: its 1 / n_features), as
    hyppo passes one gamma to both."""
    gamma = spec.gamma(n_features)
    if gamma is not None:
        spec = dataclasses.replace(spec, param_items=tuple({**spec.params,
                                                            "gamma": gamma}.items()))
    L = np.asarray(spec.gram(np.array([[0.0], [1.0]]), n_threads=1), dtype=np.float64)
    return float(L[0, 0]), float(L[1, 1]), float(L[0, 1])


class _MMDStats:
    """Statistics of relabellings of the pooled Gram G (X = rows labelled 1)."""

    def __init__(self, G, nx, ny, estimator, n_threads, label_kernel=None):
        self.G, self.nx, self.ny, self.estimator = G, nx, ny, estimator
        self.n_threads = n_threads
        N = nx + ny
        self.full, self.upper, upper_sq = _kstats.row_stats(G, n_threads)
        self.diag = np.diagonal(G).astype(np.float64)
        self.upper_total = float(np.sum(self.upper))
        self.diag_total = float(np.sum(self.diag))
        vectors = [self.diag]
        self.label_kernel = label_kernel
        if estimator in ("hyppo", "hyppo_biased"):
            # hyppo's label Gram L: the kernel of the 1-column labels 0 (X), 1 (Y).
            k00, k11, k01 = label_kernel
            # Off the diagonal L = k01 + cx [both X] + cy [both Y].
            self.cx, self.cy = k00 - k01, k11 - k01
        if estimator == "hyppo":
            # A = K - max(K) I, B = L - max(L) I (hyppo's 1 - K / max K, up to
            # a factor): off-diagonal row sums at, bt, full row sums a, b.
            self.at = self.full - self.diag
            self.a = self.at + (self.diag - float(G.max()))
            lmax = max(k00, k11, k01)
            # hyppo's 1 - K / max(K): a negative max flips the covariance's sign.
            self.sign = np.sign(float(G.max())) * np.sign(lmax)
            self.bx_t, self.by_t = self.cx * (nx - 1), self.cy * (ny - 1)
            self.bx, self.by = self.bx_t + k00 - lmax, self.by_t + k11 - lmax
            vectors += [self.at, self.a]
            sq = 2.0 * float(np.sum(upper_sq))
            self.var_a = _ucentered(sq, np.dot(self.at, self.a), np.dot(self.a, self.at),
                                    np.dot(self.a, self.a), self.at.sum(), self.a.sum(),
                                    self.at.sum(), self.a.sum(), N)
            bsq = self.cx ** 2 * nx * (nx - 1) + self.cy ** 2 * ny * (ny - 1)
            self.var_b = _ucentered(
                bsq, nx * self.bx_t * self.bx + ny * self.by_t * self.by,
                nx * self.bx * self.bx_t + ny * self.by * self.by_t,
                nx * self.bx ** 2 + ny * self.by ** 2, self.bt_sum(), self.b_sum(),
                self.bt_sum(), self.b_sum(), N)
        elif estimator == "hyppo_biased":
            vectors += [self.full]
            k = float(np.sum(self.full))
            sq = 2.0 * float(np.sum(upper_sq)) + float(np.dot(self.diag, self.diag))
            self.var_a = sq - 2.0 / N * float(np.dot(self.full, self.full)) + k * k / N ** 2
            s2 = nx * nx + ny * ny
            self.var_b = s2 - 2.0 / N * (nx ** 3 + ny ** 3) + s2 * s2 / N ** 2
        self.U = np.ascontiguousarray(np.stack(vectors))

    def bt_sum(self):
        return self.nx * self.bx_t + self.ny * self.by_t

    def b_sum(self):
        return self.nx * self.bx + self.ny * self.by

    def observed_labels(self):
        labels = np.zeros((1, self.nx + self.ny), dtype=np.uint8)
        labels[0, :self.nx] = 1
        return labels

    def statistics(self, labels):
        out = _kstats.mmd_permutations(self.G, labels, self.upper, self.U, self.n_threads)
        nx, ny = self.nx, self.ny
        N = nx + ny
        tx, ty, dx = out[:, 0], out[:, 1], out[:, 2]
        txy = self.upper_total - tx - ty
        est = self.estimator
        if est == "unbiased":
            return (2 * tx / (nx * (nx - 1)) + 2 * ty / (ny * (ny - 1))
                    - 2 * txy / (nx * ny))
        if est == "biased":
            dy = self.diag_total - dx
            return (2 * tx + dx) / nx ** 2 + (2 * ty + dy) / ny ** 2 - 2 * txy / (nx * ny)
        scale = 2.0 * nx * nx * ny * ny / N ** 4
        if est == "hyppo":
            sx_at, sx_a = out[:, 3], out[:, 4]
            at_sum, a_sum = self.at.sum(), self.a.sum()
            s_at_b = self.bx * sx_at + self.by * (at_sum - sx_at)
            s_a_bt = self.bx_t * sx_a + self.by_t * (a_sum - sx_a)
            s_a_b = self.bx * sx_a + self.by * (a_sum - sx_a)
            T = 2 * (self.cx * tx + self.cy * ty)
            cov = self.sign * _ucentered(T, s_at_b, s_a_bt, s_a_b, at_sum, a_sum,
                                         self.bt_sum(), self.b_sum(), N)
            return scale * _normalised(cov, self.var_a, self.var_b, biased=False)
        # hyppo_biased: H L H = (cx + cy) / 2 H S H, S the same-sample
        # indicator with its diagonal; tr(G H S H) from the group sums.
        sx_k = out[:, 3]
        k = float(np.sum(self.full))
        s_k = nx * sx_k + ny * (k - sx_k)
        cov = 2 * (tx + ty) + self.diag_total - 2.0 / N * s_k + k * (nx * nx + ny * ny) / N ** 2
        cov = cov * np.sign(self.cx + self.cy) * np.sign(float(self.G.max()))
        cov = cov * np.sign(max(self.label_kernel))
        return scale * _normalised(cov, self.var_a, self.var_b, biased=True)

    def biased_statistic(self):
        saved, self.estimator = self.estimator, "biased"
        U, self.U = self.U, self.U[:1]
        try:
            return float(self.statistics(self.observed_labels())[0])
        finally:
            self.estimator, self.U = saved, U

    def gamma_null(self):
        """Gretton's mmdTestGamma.m (m = n), generalised to m != n (module docstring)."""
        nx, ny, G = self.nx, self.ny, self.G
        M = min(nx, ny)
        if M < 2:
            raise ValueError("method='gamma' needs at least 2 samples in each of X and Y")
        cross_diag = float(np.mean(G[np.arange(M), nx + np.arange(M)], dtype=np.float64))
        dx = float(np.mean(self.diag[:nx]))
        dy = float(np.mean(self.diag[nx:]))
        mean = (dx - cross_diag) / nx + (dy - cross_diag) / ny
        h2 = _kstats.mmd_h_sumsq(G, nx, M, self.n_threads)
        var = 0.5 * (1.0 / nx + 1.0 / ny) ** 2 * M / (M - 1) * h2 / (M * (M - 1))
        return _gamma_pvalue(self.biased_statistic(), mean, var, "MMD")


# ---------------------------------------------------------------- linear-time MMD


def _paired_kernel(A, B, spec):
    """k(A[i], B[i]) for each row i, without a Gram."""
    if isinstance(spec.kernel, str) and spec.kernel in _registry.BY_NAME:
        kdef = _registry.BY_NAME[spec.kernel]
        return kdef.paired(A, B, **kdef.resolve(dict(spec.params), A.shape[1]))
    # Any other kernel: the diagonals of small cross Grams.
    out = np.empty(A.shape[0])
    step = 32
    for s in range(0, A.shape[0], step):
        K = spec.gram(A[s:s + step], B[s:s + step], n_threads=1)
        out[s:s + step] = np.diagonal(K)
    return out


def linear_mmd_test(X, Y, kernel="rbf", gamma=None, degree=3, coef0=1, kernel_params=None,
                    *, chunk_size=65536, n_threads=None):
    """Linear-time kernel two-sample test (Gretton et al. 2012, section 6).

    With M = min(m, n) and M2 = M // 2 disjoint pairs, the statistic is the
    mean of h_i = k(x_2i, x_2i+1) + k(y_2i, y_2i+1) - k(x_2i, y_2i+1)
    - k(x_2i+1, y_2i), an unbiased estimate of MMD^2; its null is normal with
    the variance estimated by the sample variance of the h_i, and the p-value
    is the normal upper tail.  Rows beyond the first 2 M2 of each sample are
    not used.  O(chunk_size) memory, no Gram; weaker than :func:`mmd_test`
    for the same N, meant for N too large for an N x N Gram.

    Parameters
    ----------
    X : array-like of shape (m, d)
        The first sample.
    Y : array-like of shape (n, d)
        The second sample, with the same columns.
    kernel : str, Kernel or callable, default="rbf"
        As the estimators' ``kernel`` (not "precomputed").
    gamma : float (>= 0), "median" or "scale", default=None
        None: the kernel's default (1 / d for "rbf").  "median": the median
        heuristic 1 / median ||z_i - z_j||^2 over the pooled rows used, from at
        most 1,000,000 random pairs (:func:`fastkern.estimate_gamma`);
        "scale": 1 / (d Z.var()); both as the estimators' gamma.
    degree : float, default=3
        Degree of the polynomial kernel.
    coef0 : float, default=1
        Constant term of the polynomial and sigmoid kernels.
    kernel_params : dict, default=None
        Parameters of a callable kernel, passed as keyword arguments.
    chunk_size : int, default=65536
        Pairs evaluated at a time.
    n_threads : int, default=None
        OpenMP threads; None means the default (OMP_NUM_THREADS, else the CPUs
        available to this process, capped by its CPU quota).

    Returns
    -------
    LinearMMDTestResult
        The statistic, its p-value and the normal null's standard error.

    See Also
    --------
    mmd_test : The quadratic-time test, more powerful for the same N.
    """
    _check_kernel(kernel, "kernel")
    X = check_array_2d(X, "X")
    Y = check_array_2d(Y, "Y")
    if X.shape[1] != Y.shape[1]:
        raise ValueError(f"X and Y must have the same number of features (columns), got "
                         f"X with {X.shape[1]} and Y with {Y.shape[1]}")
    chunk_size = check_int(chunk_size, "chunk_size", 1)
    n_threads = check_n_threads(n_threads)
    nx, ny = X.shape[0], Y.shape[0]
    M2 = min(nx, ny) // 2
    if M2 < 2:
        raise ValueError(f"linear_mmd_test needs at least 4 samples in each of X and Y, got "
                         f"{nx} and {ny}")
    # A data-dependent gamma from the rows the statistic uses.
    est = np.concatenate([X[:2 * M2], Y[:2 * M2]]).astype(np.float64) \
        if isinstance(gamma, str) else None
    spec, shown = _kernel_spec(kernel, gamma, degree, coef0, kernel_params, est, "gamma")
    del est
    # Chunk means and sums of squared deviations merged as Chan et al. (1979):
    # the variance is never the small difference of two large sums.
    count, mean, m2 = 0, 0.0, 0.0
    with blas_for(n_threads, min(chunk_size, M2)):
        for s in range(0, M2, chunk_size):
            e = min(M2, s + chunk_size)
            x0 = np.asarray(X[2 * s:2 * e:2], dtype=np.float64)
            x1 = np.asarray(X[2 * s + 1:2 * e:2], dtype=np.float64)
            y0 = np.asarray(Y[2 * s:2 * e:2], dtype=np.float64)
            y1 = np.asarray(Y[2 * s + 1:2 * e:2], dtype=np.float64)
            h = (_paired_kernel(x0, x1, spec) + _paired_kernel(y0, y1, spec)
                 - _paired_kernel(x0, y1, spec) - _paired_kernel(x1, y0, spec))
            if not np.isfinite(h).all():
                raise ValueError("the kernel gave non-finite values (inf or NaN)")
            c = h.shape[0]
            c_mean = float(np.mean(h))
            c_m2 = float(np.sum((h - c_mean) ** 2))
            delta = c_mean - mean
            total = count + c
            mean += delta * c / total
            m2 += c_m2 + delta * delta * count * c / total
            count = total
    stat = mean
    var = m2 / (M2 - 1)
    std = math.sqrt(var / M2)
    from scipy.stats import norm

    if std > 0:
        pvalue = float(norm.sf(stat / std))
    else:
        pvalue = 0.0 if stat > 0 else 1.0
    return LinearMMDTestResult(stat, pvalue, "normal", {"std": std, "n_pairs": M2}, nx, ny,
                               shown)


# ---------------------------------------------------------------- HSIC


def hsic_test(X, Y, kernel_x="rbf", kernel_y="rbf", gamma_x=None, gamma_y=None, *,
              kernel_params_x=None, kernel_params_y=None, estimator="unbiased",
              method="permutation", n_permutations=1000, random_state=None, n_threads=None):
    """Test whether the paired X and Y are independent (kernel HSIC test).

    Parameters
    ----------
    X : array-like of shape (n, p)
        Paired samples (row i of X goes with row i of Y).
    Y : array-like of shape (n, q)
        Paired samples, as many rows as X.
    kernel_x : str, Kernel or callable, default="rbf"
        X's kernel, as the estimators' ``kernel`` (not "precomputed").
    kernel_y : str, Kernel or callable, default="rbf"
        Y's kernel.
    gamma_x : float (>= 0), "median" or "scale", default=None
        As ``mmd_test``'s gamma, estimated on X.
    gamma_y : float (>= 0), "median" or "scale", default=None
        As ``mmd_test``'s gamma, estimated on Y.
    kernel_params_x : dict, default=None
        Other parameters (degree, coef0, ...) of X's kernel.
    kernel_params_y : dict, default=None
        Other parameters (degree, coef0, ...) of Y's kernel.
    estimator : {"unbiased", "biased", "hyppo", "hyppo_biased"}, default="unbiased"
        The statistic (see the module docstring).
    method : {"permutation", "gamma"}, default="permutation"
        How the p-value is computed (see the module docstring).
        The Gamma approximation needs n >= 6.
    n_permutations : int, default=1000
        Number of permutations (>= 1) of ``method="permutation"``.
    random_state : None, int, numpy Generator or RandomState, default=None
        Draws the permutations (before any compiled code runs, so a seed gives
        the same p-value for any ``n_threads``).
    n_threads : int, default=None
        OpenMP threads; None means the default (OMP_NUM_THREADS, else the CPUs
        available to this process, capped by its CPU quota); one thread below
        256 x 256 values, where a parallel region costs more than it saves.

    Returns
    -------
    HSICTestResult
        The statistic, its p-value and the null distribution's description.

    Raises
    ------
    ValueError
        If X and Y differ in rows, there are too few samples, or an option is
        unknown.

    Notes
    -----
    Memory: one n x n buffer (HKH above the diagonal, L below), L computed
    in row tiles of at most 2^17 values, O(n) vectors and one chunk of
    permutations (at most 2 x 2^18 int32).

    Examples
    --------
    >>> import numpy as np
    >>> from fastkern import hsic_test
    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(60, 1))
    >>> res = hsic_test(x, x ** 2, n_permutations=200, random_state=0)
    >>> bool(res.pvalue < 0.05)
    True
    """
    _check_kernel(kernel_x, "kernel_x")
    _check_kernel(kernel_y, "kernel_y")
    estimator = check_option(estimator, "estimator", ESTIMATORS)
    method = check_option(method, "method", METHODS)
    X = check_array_2d(X, "X")
    Y = check_array_2d(Y, "Y")
    n = X.shape[0]
    if Y.shape[0] != n:
        raise ValueError(f"X and Y must have the same number of samples (rows), got "
                         f"{n} and {Y.shape[0]}")
    need = 6 if method == "gamma" else 4
    if n < need:
        raise ValueError(f"hsic_test with method={method!r} needs at least {need} samples, "
                         f"got {n}")
    n_permutations = check_int(n_permutations, "n_permutations", 1)
    n_threads = threads_for(check_n_threads(n_threads), n * n)
    rng = _rng(random_state)
    dtype = result_dtype(X, Y)
    X = np.asarray(X, dtype=dtype)
    Y = np.asarray(Y, dtype=dtype)
    # degree/coef0 come only through kernel_params here; the kernel's own
    # defaults apply otherwise.
    spec_x, shown_x = _kernel_spec(kernel_x, gamma_x, None, None, kernel_params_x, X, "gamma_x")
    spec_y, shown_y = _kernel_spec(kernel_y, gamma_y, None, None, kernel_params_y, Y, "gamma_y")

    B = np.empty((n, n), dtype=dtype)
    with blas_for(n_threads, n):
        stats = _HSICStats(B, X, Y, spec_x, spec_y, estimator, n_threads)
    ident = np.arange(n, dtype=np.int32)[None, :]
    observed = float(stats.statistics(ident, ident)[0])
    if method == "gamma":
        pvalue, null_params = stats.gamma_null()
        null = None
    else:
        null = np.empty(n_permutations)
        chunk = _chunk_size(n, n_threads)
        ident = np.arange(n, dtype=np.int32)
        for start in range(0, n_permutations, chunk):
            count = min(chunk, n_permutations - start)
            perms = np.empty((count, n), dtype=np.int32)
            inv = np.empty((count, n), dtype=np.int32)
            for k in range(count):
                perms[k] = rng.permutation(n)
                inv[k, perms[k]] = ident
            null[start:start + count] = stats.statistics(perms, inv)
        pvalue = _permutation_pvalue(observed, null)
        null_params = {"n_permutations": n_permutations}
    return HSICTestResult(observed, pvalue, method, estimator, null, null_params, n,
                          shown_x, shown_y)


class _HSICStats:
    """HKH above and L below the diagonal of one buffer, and the O(n) sums of both."""

    def __init__(self, B, X, Y, spec_x, spec_y, estimator, n_threads):
        n = X.shape[0]
        self.B, self.n, self.estimator, self.n_threads = B, n, estimator, n_threads
        _gram_into(B, X, spec_x, n_threads)
        k_full, _, _ = _kstats.row_stats(B, n_threads)
        self.k_diag = np.diagonal(B).astype(np.float64)
        self.k_max = float(B.max())
        k_total = float(np.sum(k_full))
        self.mu_x = (k_total - float(np.sum(self.k_diag))) / (n * (n - 1))
        _kstats.center_upper(B, k_full / n, k_total / n ** 2, n_threads)
        self.kc_diag = np.diagonal(B).astype(np.float64)
        del k_full

        # L in row tiles of the full width: rows r0.. go below the diagonal.
        self.l_diag = np.empty(n)
        self.l_full = np.empty(n)
        l_lower_sq = np.empty(n)
        self.l_max = -np.inf
        rows = max(1, _TILE_VALUES // n)
        tile_buf = np.empty(min(rows, n) * n, dtype=B.dtype)
        for r0 in range(0, n, rows):
            r1 = min(n, r0 + rows)
            tile = tile_buf[:(r1 - r0) * n].reshape(r1 - r0, n)
            T = spec_y.gram(Y[r0:r1], Y, out=tile, n_threads=n_threads)
            if T is not tile:
                np.copyto(tile, T)
            if not _all_finite(tile):
                raise ValueError("kernel_y gave non-finite values (inf or NaN): choose a "
                                 "smaller gamma_y or another kernel")
            self.l_max = max(self.l_max, float(tile.max()))
            _kstats.put_lower(B, tile, r0, self.l_diag, self.l_full, l_lower_sq)
        del tile_buf
        l_total = float(np.sum(self.l_full))
        self.mu_y = (l_total - float(np.sum(self.l_diag))) / (n * (n - 1))
        self.l_total = l_total

        # Kc's full rows sum to 0, so its off-diagonal row sums are -diag(Kc).
        self.at = -self.kc_diag
        self.bt = self.l_full - self.l_diag
        kc_upper_sq = float(np.sum(_kstats.row_stats(B, n_threads)[2]))
        if estimator == "hyppo":
            self.a = self.at + (self.k_diag - self.k_max)
            self.b = self.bt + (self.l_diag - self.l_max)
        else:
            self.a, self.b = self.at, self.bt
        if estimator in ("hyppo", "hyppo_biased"):
            l_sq = 2.0 * float(np.sum(l_lower_sq))
            if estimator == "hyppo":
                self.var_a = self._ucp(2.0 * kc_upper_sq, self.at, self.a, self.at, self.a)
                self.var_b = self._ucp(l_sq, self.bt, self.b, self.bt, self.b)
            else:
                self.var_a = 2.0 * kc_upper_sq + float(np.dot(self.kc_diag, self.kc_diag))
                full_sq = l_sq + float(np.dot(self.l_diag, self.l_diag))
                self.var_b = (full_sq - 2.0 / n * float(np.dot(self.l_full, self.l_full))
                              + l_total * l_total / n ** 2)
        self.U = np.ascontiguousarray(np.stack([self.kc_diag, self.at, self.a, self.a]))
        self.W = np.ascontiguousarray(np.stack([self.l_diag, self.b, self.bt, self.b]))

    def _ucp(self, T, at, a, bt, b):
        return _ucentered(T, np.dot(at, b), np.dot(a, bt), np.dot(a, b), at.sum(), a.sum(),
                          bt.sum(), b.sum(), self.n)

    def statistics(self, perms, inverses):
        out = _kstats.hsic_permutations(self.B, perms, inverses, self.U, self.W,
                                        self.n_threads)
        n = self.n
        T = 2.0 * out[:, 0]
        est = self.estimator
        # hyppo's distances 1 - K / max(K) are -K / max(K) up to what the
        # centring removes: a negative max flips the sign of the covariance.
        sign = np.sign(self.k_max) * np.sign(self.l_max)
        if est in ("biased", "hyppo_biased"):
            cov = T + out[:, 1]          # n^2 HSIC_b = sum_ij Kc_ij L_pi(i)pi(j)
            if est == "biased":
                return cov / n ** 2
            return _normalised(sign * cov, self.var_a, self.var_b, biased=True)
        cov = _ucentered(T, out[:, 2], out[:, 3], out[:, 4], self.at.sum(), self.a.sum(),
                         self.bt.sum(), self.b.sum(), n)
        if est == "unbiased":
            return cov / (n * (n - 3))
        return _normalised(sign * cov, self.var_a, self.var_b, biased=False)

    def gamma_null(self):
        """Gretton's hsicTestGamma.m, with the kernels' diagonal means for its 1s."""
        n = self.n
        ident = np.arange(n, dtype=np.int32)[None, :]
        out = _kstats.hsic_permutations(self.B, ident, ident, self.U[:1], self.W[:1],
                                        self.n_threads)
        hsic_b = (2.0 * out[0, 0] + out[0, 1]) / n ** 2
        s = _kstats.hsic_gamma_sumsq(self.B, self.l_full / n, self.l_total / n ** 2,
                                     self.n_threads)
        var = (72.0 * (n - 4) * (n - 5) / (n * (n - 1) * (n - 2) * (n - 3))
               * s / 36.0 / (n * (n - 1)))
        mean = (float(np.mean(self.k_diag)) - self.mu_x) * (float(np.mean(self.l_diag))
                                                           - self.mu_y) / n
        return _gamma_pvalue(hsic_b, mean, var, "HSIC")
