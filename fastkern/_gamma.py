"""Data-dependent RBF widths: the median heuristic and kernlab's ``sigest``.

Below the kernel plumbing (``_kernel_api.resolve_gamma`` uses
:func:`median_gamma` for the estimators' ``gamma="median"``); public as
``fastkern.estimate_gamma`` and ``fastkern.lowrank.estimate_gamma``.
"""
import math
import warnings
from typing import NamedTuple

import numpy as np

from fastkern import _gram
from fastkern._threads import default_threads_now
from fastkern._validation import (check_array_2d, check_bool, check_int, check_real,
                                  scale_exponent, seeded_random_state)

__all__ = ["GammaEstimate", "estimate_gamma", "median_gamma"]


class GammaEstimate(NamedTuple):
    """Result of :func:`estimate_gamma`, a named tuple.

    Parameters
    ----------
    gamma : float
        The point estimate 1 / median of the squared distances.
    quantiles : ndarray of shape (3,)
        The float64 1 / the 0.9, 0.5 and 0.1 quantiles of the squared distances,
        in that order (kernlab's ``sigest`` value; quantiles[1] == gamma).  Any
        gamma between quantiles[0] and quantiles[2] is a reasonable RBF width.
    """

    gamma: float
    quantiles: np.ndarray


# Pairs per chunk when computing distances: bounds the temporary to
# PAIR_CHUNK x d float64.
PAIR_CHUNK = 1 << 15
# The median heuristic uses every pair up to this many, else this many random pairs.
MAX_PAIRS = 1_000_000


def _sq_dists(X, i, j):
    """||X[i] - X[j]||^2 for index arrays i, j, from direct differences in float64."""
    out = np.empty(len(i))
    for s in range(0, len(i), PAIR_CHUNK):
        diff = X[i[s:s + PAIR_CHUNK]] - X[j[s:s + PAIR_CHUNK]]
        if hasattr(diff, "multiply"):  # scipy sparse rows
            out[s:s + PAIR_CHUNK] = np.asarray(diff.multiply(diff).sum(axis=1)).ravel()
        else:
            np.einsum("ij,ij->i", diff, diff, out=out[s:s + PAIR_CHUNK])
    return out


def _all_pair_dists(X):
    """||X[i] - X[j]||^2 over every pair i < j of the dense X, as _sq_dists gives
    them for np.triu_indices's pairs but compiled (``_gram.upper_sq_dists``):
    gathering each pair's rows made ``gamma="median"`` cost a 200-row
    KernelRidge fit several times its time with a given gamma."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    n = X.shape[0]
    out = np.empty(n * (n - 1) // 2)
    _gram.upper_sq_dists(X, out, default_threads_now())
    return out


def _scale(X):
    """kernlab's scaled=TRUE: standardise columns (sample sd), unless one is constant."""
    sd = X.std(axis=0, ddof=1) if X.shape[0] > 1 else np.zeros(X.shape[1])
    constant = np.flatnonzero(sd == 0)
    if constant.size:
        warnings.warn(f"column(s) {constant.tolist()} of X are constant: X is not scaled "
                      "(as kernlab's sigest)", UserWarning, stacklevel=3)
        return X
    return (X - X.mean(axis=0)) / sd


def _select(a, ks, start, stop):
    """Partition a[start:stop] in place so that a[k] is the k-th smallest of it for
    every k of the sorted ks (all in [start, stop)): one kth at a time, the
    middle one first, each on the range the ones before it left."""
    if not ks:
        return
    mid = len(ks) // 2
    k = ks[mid]
    a[start:stop].partition(k - start)
    _select(a, ks[:mid], start, k)
    _select(a, ks[mid + 1:], k + 1, stop)


def _quantiles(values, probs):
    """np.quantile(values, probs), the linear method (R's type 7, quantile()'s
    default), partitioning values in place.

    numpy's partition with several kth (the two order statistics around
    each of three quantiles) took 7-11 ms on 500,000 distances, against
    1.6 ms for one kth: its kth are taken one after the other over the
    whole array.  _select narrows the range for each.
    """
    m = values.size
    pos = [p * (m - 1) for p in probs]
    lows = [min(int(math.floor(x)), m - 1) for x in pos]
    wanted = sorted({k for lo in lows for k in (lo, min(lo + 1, m - 1))})
    _select(values, wanted, 0, m)
    out = np.empty(len(probs))
    for i, (x, lo) in enumerate(zip(pos, lows)):
        a, b, t = values[lo], values[min(lo + 1, m - 1)], x - lo
        # numpy's _lerp: from the nearer end, so that t = 0 and t = 1 are exact.
        out[i] = b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t
    return out


def _from_distances(dist, e=0):
    """The estimate from squared distances of X 2^-e (see _unit_scale)."""
    dist = dist[dist != 0]
    if dist.size == 0:
        raise ValueError("every sampled pair of rows of X is identical (all distances "
                         "are 0): gamma cannot be estimated")
    q = _quantiles(dist, [0.9, 0.5, 0.1])
    with np.errstate(over="ignore", under="ignore"):
        quantiles = np.ldexp(1.0 / q, -2 * e)
    if not (np.isfinite(quantiles).all() and (quantiles > 0).all()):
        raise ValueError(f"gamma = 1 / a quantile of X's squared distances is past float64's "
                         f"range: the median squared distance is about "
                         f"1e{round(math.log10(q[1]) + 2 * e * math.log10(2.0))}")
    return GammaEstimate(float(quantiles[1]), quantiles)


def _unit_scale(X):
    """(X 2^-e, e): a power of two, exact, brings X's values near 1 where their
    squares would leave float64 (X * 1e-200: every distance 0, "identical
    rows"; X * 1e200: inf), else e = 0 and X itself."""
    e = scale_exponent(X)
    if not e:
        return X, 0
    if hasattr(X, "tocsr"):
        X = X.copy()
        X.data = np.ldexp(X.data, -e)
        return X, e
    return np.ldexp(X, -e), e


def _gamma_from_pairs(X, i, j, scaled=False):
    """The estimate from given pairs (kernlab's sigest once its pairs are drawn)."""
    X, e = _unit_scale(np.asarray(X, dtype=np.float64))
    if scaled:
        X, e = _scale(X), 0
    return _from_distances(_sq_dists(X, np.asarray(i), np.asarray(j)), e)


def estimate_gamma(X, method="median", *, frac=0.5, random_state=None, n_pairs=None,
                   scaled=False):
    """Estimate an RBF ``gamma`` for X from its squared pairwise distances.

    Both methods drop zero distances (identical rows, and i == j) and return 1 /
    the 0.9, 0.5, 0.1 quantiles (R's default quantile type 7): kernlab's three
    values, the middle one being the point estimate ``gamma``.  kernlab's gamma
    is its rbfdot's ``sigma``: both kernels are exp(-gamma ||x - y||^2).

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        The data (at least 2 rows).
    method : {"median", "sigest"}, default="median"
        "median" (the median heuristic): gamma = 1 / median ||x_i - x_j||^2
        over pairs i != j.  With ``n_pairs`` None it uses every pair when there
        are at most 1,000,000 (n <= 1414), else 1,000,000 random pairs; with
        ``n_pairs`` it uses every pair if n_pairs >= n (n - 1) / 2, else n_pairs
        random pairs.  Random pairs are uniform over the unordered pairs of
        distinct rows (i uniform, j uniform among the other rows, with
        replacement), drawn from ``random_state``.
        "sigest": kernlab's ``sigest`` (kernlab 0.9.32): floor(frac * n)
        pairs (i, j), i and j drawn independently and uniformly with replacement
        (so i == j happens), or n_pairs pairs if given.  kernlab draws them with
        R's random generator; the same pairs give the same values (tested), but
        a seed here does not reproduce R's draw.
    frac : float, default=0.5
        The share (> 0) of n giving the number of pairs of "sigest".
    random_state : int, RandomState instance or None, default=None
        Draws the random pairs.
    n_pairs : int, default=None
        The number of pairs (>= 1), see ``method``.
    scaled : bool, default=False
        True standardises the columns first (centred, divided by the sample
        standard deviation; if any column is constant nothing is scaled, with a
        warning), as kernlab's default ``scaled = TRUE``; kernlab's ksvm scales
        the data it fits too.  fastkern's kernels use X as given, so the default
        estimates gamma for X as given.

    Returns
    -------
    GammaEstimate
        The named tuple (gamma, quantiles).

    Raises
    ------
    ValueError
        If ``method`` is unknown, X has fewer than 2 rows, "sigest" gets no
        pairs, or the estimate is past float64's range (X's squared
        distances near 1e-400 or 1e400; the distances themselves are
        computed on X scaled by a power of two, so any scale within that
        range is exact).

    Examples
    --------
    >>> import numpy as np
    >>> from fastkern import estimate_gamma
    >>> estimate_gamma(np.array([[0.0], [1.0], [3.0]])).gamma
    0.25
    """
    if method not in ("median", "sigest"):
        raise ValueError(f"method must be 'median' or 'sigest', got {method!r}")
    X = check_array_2d(X, "X")
    frac = check_real(frac, "frac", low=0.0, low_inclusive=False)
    n_pairs = check_int(n_pairs, "n_pairs", 1, allow_none=True)
    scaled = check_bool(scaled, "scaled")
    n = X.shape[0]
    if n < 2:
        raise ValueError(f"X needs at least 2 rows to estimate gamma, got {n}")
    X, e = _unit_scale(np.asarray(X, dtype=np.float64))
    if scaled:
        X, e = _scale(X), 0
    with seeded_random_state(random_state) as rng:
        if method == "sigest":
            m = n_pairs if n_pairs is not None else int(math.floor(frac * n))
            if m < 1:
                raise ValueError(f"frac * n_samples = {frac * n} gives no pairs: increase frac")
            i = rng.randint(n, size=m)
            j = rng.randint(n, size=m)
        else:
            i, j = _median_pairs(n, n_pairs, rng)
    if i is None:
        return _from_distances(_all_pair_dists(X), e)
    return _from_distances(_sq_dists(X, i, j), e)


def _median_pairs(n, n_pairs, rng):
    """The pairs of the median heuristic (see estimate_gamma): (i, j), or (None,
    None) for every pair."""
    total = n * (n - 1) // 2
    m = min(total, MAX_PAIRS) if n_pairs is None else n_pairs
    if m >= total:
        return None, None
    i = rng.randint(n, size=m)
    return i, (i + 1 + rng.randint(n - 1, size=m)) % n


def median_gamma(X):
    """Compute gamma="median" of the estimators.

    ``estimate_gamma(X, "median", random_state=0).gamma``, for dense or scipy
    sparse X.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
        The data, validated by the caller.

    Returns
    -------
    float
        The median heuristic's gamma.

    Raises
    ------
    ValueError
        If X has fewer than 2 rows.
    """
    if not hasattr(X, "tocsr"):
        return estimate_gamma(X, "median", random_state=0).gamma
    n = X.shape[0]
    if n < 2:
        raise ValueError(f"gamma='median' needs at least 2 rows of X, got {n}")
    X, e = _unit_scale(X.tocsr().astype(np.float64))
    with seeded_random_state(0) as rng:
        i, j = _median_pairs(n, None, rng)
    if i is None:
        i, j = np.triu_indices(n, k=1)
    return _from_distances(_sq_dists(X, i, j), e).gamma
