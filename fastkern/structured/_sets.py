"""The set kernels: intersection, Jaccard and min-max (multisets)."""
import numbers
from collections import Counter
from collections.abc import Mapping

import numpy as np

from fastkern import _structured
from fastkern.structured._base import _SET_MIN, _SET_RATIO, StructuredKernel


class _SetKernel(StructuredKernel):
    _sample_kind = "set"
    _multiset = False

    def _check_sample(self, item, name):
        if isinstance(item, (str, bytes)):
            raise TypeError(f"{name} is a {type(item).__name__}; a set kernel takes "
                            "collections of items (wrap a single item in a set: {item})")
        if isinstance(item, Mapping):
            if not self._multiset:
                raise TypeError(f"{name} is a mapping; {type(self).__name__} takes sets "
                                "(MinMax takes item -> count mappings)")
            counts = {}
            for key, value in item.items():
                if (isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real)
                        or not np.isfinite(value) or value < 0):
                    raise ValueError(f"{name}[{key!r}] must be a finite count >= 0, "
                                     f"got {value!r}")
                if value > 0:
                    counts[key] = float(value)
            return counts
        if isinstance(item, numbers.Number) or not hasattr(item, "__iter__"):
            raise TypeError(f"{name} is a {type(item).__name__}, not a collection of items "
                            "(numbers mixed with sets?)")
        try:
            if self._multiset:
                return {key: float(c) for key, c in Counter(item).items()}
            return frozenset(item)
        except TypeError as exc:
            raise TypeError(f"{name} holds an item that is not hashable: {exc}") from None

    def _encode(self, samples, vocab):
        """Sorted item ids, weights and offsets of every sample (vocab grows)."""
        ids, weights, offsets = [], [], [0]
        for s in samples:
            if isinstance(s, dict):
                pairs = sorted((vocab.setdefault(key, len(vocab)), c) for key, c in s.items())
            else:
                pairs = sorted((vocab.setdefault(key, len(vocab)), 1.0) for key in s)
            ids.extend(p[0] for p in pairs)
            weights.extend(p[1] for p in pairs)
            offsets.append(len(ids))
        return (np.asarray(ids, dtype=np.int64), np.asarray(weights, dtype=np.float64),
                np.asarray(offsets, dtype=np.int64))

    def _gram(self, X, Y, out, n_threads):
        vocab = {}
        ix, wx, ox = self._encode(X, vocab)
        iy, wy, oy = (ix, wx, ox) if Y is None else self._encode(Y, vocab)
        if not self._ratio:
            _structured._gram(_SET_MIN, ix, ox, iy, oy, out, Y is None, n_threads, wx=wx,
                              wy=wy)
            return
        # Each sample scaled by a power of two that brings its largest weight
        # into [1/2, 1) (exact), and each pair brought to a common scale in
        # the loop: sums of weights near 1e308 overflowed.  Two empty
        # samples: similarity 1 (a block of ones keeps the Gram PSD).
        wx, ex = _power_of_two_scaled(wx, ox)
        wy, ey = (wx, ex) if Y is None else _power_of_two_scaled(wy, oy)
        _structured._gram(_SET_RATIO, ix, ox, iy, oy, out, Y is None, n_threads, wx=wx, wy=wy,
                          ex=ex, ey=ey)


def _power_of_two_scaled(w, offsets):
    """w with each sample's run divided by 2^e (e int32 per sample, 0 when empty),
    its largest weight then in [1/2, 1)."""
    sizes = np.diff(offsets)
    top = np.zeros(sizes.size)
    filled = sizes > 0
    if filled.any():
        top[filled] = np.maximum.reduceat(w, offsets[:-1][filled])
    e = np.frexp(top)[1].astype(np.int32)
    return np.ldexp(w, -np.repeat(e, sizes)), e


class SetIntersection(_SetKernel):
    """The set intersection kernel k(A, B) = |A & B|.

    On sets of hashable items (the linear kernel of their indicators).
    """

    _ratio = False


class Jaccard(_SetKernel):
    """The Jaccard (Tanimoto) kernel k(A, B) = |A & B| / |A | B|.

    1 for two empty sets.  Positive semi-definite (Gower 1971; a min-max kernel on
    indicator vectors).

    Examples
    --------
    >>> from fastkern import Jaccard
    >>> Jaccard()([{1, 2}, {2, 3}])
    array([[1.        , 0.33333333],
           [0.33333333, 1.        ]])
    """

    _ratio = True


class MinMax(_SetKernel):
    """The min-max kernel k(a, b) = sum_i min(a_i, b_i) / sum_i max(a_i, b_i) on multisets.

    A sample is an iterable of hashable items (repeats count) or a mapping
    item -> count (real, >= 0).  On sets it is ``Jaccard``.
    """

    _ratio = True
    _multiset = True

