"""Kernels on strings, sets and graphs: fastkern kernel objects for non-vector data.

Every kernel here is called as ``k(X, Y=None, *, out=None, n_threads=None)``
like the vector kernels of fastkern.kernels, with X a list (or 1-D array) of
samples, and returns a float64 Gram matrix.  They declare
``takes_vectors = False``, so that fastkern's estimators accept such lists:
``KernelPCA(kernel=Spectrum(k=3)).fit(list_of_strings)``.

Strings (kernlab's ``stringdot`` types; characters are Unicode code points,
kernlab works on the bytes of the string, so the two agree on ASCII text):

- ``Spectrum(k)``: the number of pairs of equal length-k substrings,
  sum_s n_x(s) n_y(s) over all strings s of length k (Leslie et al.).
- ``BoundedRange(k)``: the same over every length 1..k; ``AllSubstrings()``
  over every length; ``ExponentialDecay(lambda_)`` over every length with
  weight lambda_**-len(s); ``Substring(k, lambda_, full)`` kernlab's "string"
  (length k, weight lambda_**(2k)) and "fullstring" (lengths 1..k, weight
  lambda_**(2 len(s))).
- ``Subsequence(k, lambda_)``: Lodhi et al.'s gap-weighted subsequence kernel.
- ``stringdot(type, length, lambda_, normalized)``: the kernel kernlab's
  ``stringdot`` with the same arguments computes (kernlab appends "\\n" to every
  string for its "spectrum", "boundrange", "constant" and "exponential" types,
  so those count the substrings that end the string; ``terminator="\\n"``
  does the same here).

Sets: ``SetIntersection()`` (|A & B|), ``Jaccard()`` (|A & B| / |A | B|) and
``MinMax()`` (sum_i min(a_i, b_i) / sum_i max(a_i, b_i) on multisets).

Graphs: ``WeisfeilerLehman(n_iter, normalize)``, the Weisfeiler-Lehman
subtree kernel with the vertex-histogram base kernel (as grakel's).

``normalized=True`` (every string kernel's default, as kernlab) divides by
sqrt(k(x, x) k(y, y)); where k(x, x) is 0 (a string shorter than k) the
value is 1 if y == x and 0 otherwise (kernlab: 1 on the diagonal of
kernelMatrix, NaN or 0 elsewhere).  Empty strings are rejected (a ValueError naming the sample).

Memory: the output Gram plus O(total length of the samples); the Spectrum
kernel also holds the sparse k-mer count matrix (one entry per distinct
k-mer of each string), Subsequence one (|x| + 1)(|y| + 1) x 2 float64
workspace per thread, and the other substring kernels one suffix automaton
per thread (250-330 bytes per character of the longest string of X).
"""
import math
import numbers
from collections import Counter
from collections.abc import Mapping

import numpy as np
import scipy.sparse as sp

from fastkern import _structured
from fastkern.kernels import Kernel
from fastkern._validation import check_bool, check_int, check_n_threads, check_out, check_real

__all__ = [
    "StructuredKernel",
    "Spectrum",
    "BoundedRange",
    "AllSubstrings",
    "ExponentialDecay",
    "Substring",
    "Subsequence",
    "stringdot",
    "SetIntersection",
    "Jaccard",
    "MinMax",
    "WeisfeilerLehman",
]

_SUBSTRING, _SUBSEQUENCE, _SET_MIN, _SET_RATIO = 0, 1, 2, 3


class StructuredKernel(Kernel):
    """Base class of the kernels on non-vector samples.

    ``takes_vectors = False`` tells fastkern's estimators to hand X to the
    kernel as a list of samples (``check_samples``) instead of validating it
    as a numeric matrix.
    """

    takes_vectors = False
    #: What one sample is, for error messages.
    _sample_kind = "sample"

    def check_samples(self, X, name="X"):
        """Validate a sequence of samples.

        Parameters
        ----------
        X : sequence
            The samples (a list or a 1-D array of strings, sets or graphs).
        name : str, default="X"
            The argument's name in error messages.

        Returns
        -------
        ndarray of shape (n_samples,), dtype object
            The validated samples.

        Raises
        ------
        TypeError
            If X is a single string, a numeric or sparse array, not iterable, or a
            sample has the wrong type.
        ValueError
            If X is empty, not 1-D, or a sample is invalid (the message names it,
            as ``X[i]``).
        """
        if isinstance(X, (str, bytes)):
            raise TypeError(f"{name} must be a sequence of {self._sample_kind}s, got a single "
                            f"{type(X).__name__} (wrap it in a list)")
        if isinstance(X, np.ndarray):
            if X.ndim != 1:
                raise ValueError(f"{name} must be a 1-D sequence of {self._sample_kind}s, "
                                 f"got an array of shape {X.shape}")
            if X.dtype.kind not in "OUS":
                raise TypeError(f"{name} must be a sequence of {self._sample_kind}s, got a "
                                f"numeric array of dtype {X.dtype}")
        elif sp.issparse(X):
            raise TypeError(f"{name} must be a sequence of {self._sample_kind}s, got a sparse "
                            "matrix")
        try:
            items = list(X)
        except TypeError:
            raise TypeError(f"{name} must be a sequence of {self._sample_kind}s, got "
                            f"{type(X).__name__}") from None
        if not items:
            raise ValueError(f"{name} is empty: at least one {self._sample_kind} is needed")
        out = np.empty(len(items), dtype=object)
        for i, item in enumerate(items):
            out[i] = self._check_sample(item, f"{name}[{i}]")
        return out

    def _check_sample(self, item, name):
        return item

    def __call__(self, X, Y=None, *, out=None, n_threads=None):
        """Compute the Gram matrix k(X, Y) (k(X, X) when Y is None).

        Parameters
        ----------
        X : sequence of n_samples_X samples
            Strings, sets or graphs, as the kernel takes.
        Y : sequence of n_samples_Y samples, default=None
            Second input; None means X.
        out : ndarray of shape (n_samples_X, n_samples_Y), default=None
            C-contiguous float64 array, filled and returned.
        n_threads : int, default=None
            OpenMP threads; None means the default (OMP_NUM_THREADS, else the CPUs
            available to this process, capped by its CPU quota).

        Returns
        -------
        K : ndarray of shape (n_samples_X, n_samples_Y)
            The float64 Gram matrix, ``out`` when it was given.
        """
        Xs = self.check_samples(X, "X")
        Ys = None if Y is None else self.check_samples(Y, "Y")
        n_threads = check_n_threads(n_threads)
        shape = (len(Xs), len(Xs) if Ys is None else len(Ys))
        out = check_out(out, shape, np.float64)
        self._gram(Xs, Ys, out, n_threads)
        return out

    def _gram(self, X, Y, out, n_threads):
        raise NotImplementedError


def _normalize(out, dx, dy, kx, ky):
    """out[i, j] / sqrt(dx[i] dy[j]) (kernlab's and grakel's formula), in row blocks.

    As out / (sqrt(dx) sqrt(dy)): the product dx dy overflows past 1e154
    each (and underflows below 1e-154) where the square roots do not.

    Where a self-similarity is 0 (kernlab: NaN) the value is 1 for equal
    samples (keys kx[i] == ky[j]) and 0 otherwise: consistent between a
    symmetric and a cross Gram, and positive semi-definite (blocks of ones).
    """
    for r0 in range(0, out.shape[0], _BLOCK):
        block = out[r0:r0 + _BLOCK]
        # dx[i] * dx[j] is dx[j] * dx[i]: a symmetric Gram stays exactly symmetric.
        den = np.sqrt(dx[r0:r0 + _BLOCK, None]) * np.sqrt(dy[None, :])
        np.divide(block, den, out=block, where=den > 0)
    zx, zy = np.flatnonzero(dx == 0), np.flatnonzero(dy == 0)
    if zx.size or zy.size:
        ids = {}
        ix = np.array([ids.setdefault(kx[i], len(ids)) for i in range(len(kx))])
        iy = np.array([ids.setdefault(ky[j], len(ids)) for j in range(len(ky))])
        out[zx] = ix[zx, None] == iy[None, :]
        out[:, zy] = ix[:, None] == iy[None, zy]


_BLOCK = 256


# --------------------------------------------------------------------------- strings
class _StringKernel(StructuredKernel):
    _sample_kind = "string"

    def __init__(self, normalized=True, terminator=None):
        normalized = check_bool(normalized, "normalized")
        if terminator is not None and not isinstance(terminator, str):
            raise TypeError(f"terminator must be None or a string, got {terminator!r}")
        self.normalized = bool(normalized)
        self.terminator = terminator

    def _params(self):
        return {"normalized": self.normalized, "terminator": self.terminator}

    def _check_sample(self, item, name):
        if not isinstance(item, str):
            kind = type(item).__name__
            hint = " (decode bytes first)" if isinstance(item, bytes) else ""
            raise TypeError(f"{name} is a {kind}, not a string: a string kernel takes only "
                            f"strings (strings mixed with numbers?){hint}")
        if not item:
            raise ValueError(f"{name} is an empty string; string kernels need non-empty "
                             "strings")
        try:
            item.encode("utf-32-le")
        except UnicodeEncodeError as exc:
            raise ValueError(f"{name} holds a lone surrogate {item[exc.start]!r} at position "
                             f"{exc.start}, not a Unicode character (text decoded with "
                             "errors='surrogateescape'? decode it with errors='replace')"
                             ) from None
        return str(item)

    def _encode(self, samples):
        """Code points of all samples (terminator appended) in one int32 array, and offsets."""
        end = self.terminator or ""
        texts = [s + end for s in samples]
        lengths = np.fromiter((len(t) for t in texts), dtype=np.int64, count=len(texts))
        offsets = np.zeros(len(texts) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        codes = np.frombuffer("".join(texts).encode("utf-32-le"), dtype=np.uint32)
        return codes.astype(np.int32), offsets

    def _gram(self, X, Y, out, n_threads):
        sx, ox = self._encode(X)
        sy, oy = (sx, ox) if Y is None else self._encode(Y)
        plan = self._plan(int(max(np.diff(ox).max(), np.diff(oy).max())))
        self._pair_gram(sx, ox, sy, oy, out, Y is None, n_threads, plan)
        if self.normalized:
            dx = (self._self_values(sx, ox, plan) if Y is not None
                  else out.diagonal().copy())
            dy = dx if Y is None else self._self_values(sy, oy, plan)
            self._check_finite(out, dx, dy)
            _normalize(out, dx, dy, X, X if Y is None else Y)
        else:
            self._unscale(out, plan)
            self._check_finite(out)

    def _plan(self, m):
        """What _pair_gram needs for strings of at most m characters, fixed
        once per Gram so that the self-values of the normalisation match."""
        return None

    def _unscale(self, out, plan):
        """Give an unnormalised Gram computed on a scale its true values."""

    def _check_finite(self, *arrays):
        if not all(np.isfinite(a).all() for a in arrays):
            raise ValueError(f"{self!r}: the kernel values overflow float64 on these "
                             "strings (too long for these weights)")

    def _self_values(self, s, o, plan):
        """k(x, x) of every sample, one 1 x 1 Gram each."""
        d = np.empty(o.size - 1)
        for i in range(d.size):
            one = np.empty((1, 1))
            seg = np.ascontiguousarray(s[o[i]:o[i + 1]])
            off = np.array([0, seg.size], dtype=np.int64)
            self._pair_gram(seg, off, seg, off, one, True, 1, plan)
            d[i] = one[0, 0]
        return d


class _SubstringFamily(_StringKernel):
    """sum over substrings s common to x and y of w(len(s)) n_x(s) n_y(s).

    Computed as sum over position pairs (i, j) of W(lcp(x[i:], y[j:])) with
    W(m) = w(1) + ... + w(m): y read through x's suffix automaton, O(|y|) per
    pair once the automaton is built (once per row; _structured, fk_sam.h).

    Where cw[r] = W(1) + ... + W(r) leaves [1e-150, 1e150] (weights
    lambda_**(2L) of a small lambda_, or lambda_**-L over long strings) the
    normalised kernel runs in extended range from log W, on a per-pair
    scale of about exp(-(s_x + s_y) / 2), s_x = log cw[|x|], so no value
    over- or underflows and the scale (a power of two) cancels in the
    normalisation.
    """

    def _log_weights(self, L):
        """log w(L) for the lengths L (-inf where w is 0)."""
        raise NotImplementedError

    def _plan(self, m):
        logw = self._log_weights(np.arange(1, m + 1, dtype=np.float64))
        with np.errstate(over="ignore", under="ignore", divide="ignore"):
            logW = np.empty(m + 1)
            logW[0] = -np.inf
            logW[1:] = np.logaddexp.accumulate(logw)
            logcw = np.logaddexp.accumulate(logW)
            used = logcw[np.isfinite(logcw)]
            if (not self.normalized or used.size == 0
                    or (used[0] >= math.log(1e-150) and used[-1] <= math.log(1e150))):
                # Exact where the weights are (integer counts stay integers).
                W = np.cumsum(np.exp(logw))
                cw = np.zeros(m + 1)
                cw[1:] = np.cumsum(W)
                if not np.all(np.isfinite(cw)):
                    raise ValueError(f"{self!r}: the substring weights overflow float64 for "
                                     f"strings of length {m}")
                return np.concatenate(([0.0], W)), None
        return None, (logcw, logW)

    def _pair_gram(self, sx, ox, sy, oy, out, symmetric, n_threads, plan):
        W, logs = plan
        if logs is None:
            _structured._gram(_SUBSTRING, sx, ox, sy, oy, out, symmetric, n_threads, W=W)
            return
        logcw, logW = logs
        # s_x = log cw[|x|]; 0 for a string with no weighted substring (its
        # k(x, x) is 0 whatever the scale).
        lsx, lsy = (np.where(np.isfinite(ls), ls, 0.0) for ls in
                    (logcw[np.diff(ox)], logcw[np.diff(oy)]))
        _structured._gram(_SUBSTRING, sx, ox, sy, oy, out, symmetric, n_threads, logW=logW,
                          lsx=lsx, lsy=lsy)


class Spectrum(_SubstringFamily):
    """The k-spectrum kernel: the number of pairs of equal length-k substrings.

    k(x, y) = sum over strings s of length k of n_x(s) n_y(s), n_x(s) the
    number of occurrences of s in x (Leslie, Eskin and Noble, 2002).  Each
    string's k-mers are counted once (exact integer k-mer codes, no hashing
    collisions) into a sparse count matrix; the Gram is its linear kernel:
    BLAS on the frequent k-mers' columns, an OpenMP loop over posting lists
    for the rare ones.

    Parameters
    ----------
    k : int, default=3
        Substring length (>= 1).
    normalized : bool, default=True
        Divide by sqrt(k(x, x) k(y, y)) (cosine of the count vectors).
    terminator : str, default=None
        Appended to every string first; kernlab's ``stringdot`` uses "\\n".

    See Also
    --------
    stringdot : The kernels of kernlab's ``stringdot`` by name.

    Examples
    --------
    >>> from fastkern import Spectrum
    >>> Spectrum(k=2, normalized=False)(["abab", "ba"])
    array([[5., 1.],
           [1., 1.]])
    """

    def __init__(self, k=3, normalized=True, terminator=None):
        super().__init__(normalized, terminator)
        self.k = check_int(k, "k", 1)

    def _params(self):
        return {"k": self.k, **super()._params()}

    def _log_weights(self, L):
        return np.where(L == self.k, 0.0, -np.inf)

    def kmer_counts(self, X, Y=None):
        """Count the k-mers of X (and Y) over one shared vocabulary.

        Parameters
        ----------
        X : sequence of str
            The strings.
        Y : sequence of str, default=None
            Second strings, counted over the same vocabulary.

        Returns
        -------
        Cx : scipy.sparse.csr_matrix of shape (n_samples_X, n_kmers)
            The k-mer counts of X.
        Cy : scipy.sparse.csr_matrix of shape (n_samples_Y, n_kmers) or None
            The k-mer counts of Y, None when Y is None.
        """
        Xs = self.check_samples(X, "X")
        Ys = None if Y is None else self.check_samples(Y, "Y")
        return self._counts(Xs, Ys)

    def _counts(self, X, Y):
        samples = list(X) if Y is None else list(X) + list(Y)
        codes, offsets = self._encode(samples)
        C = _kmer_matrix(codes, offsets, self.k)
        return (C, None) if Y is None else (C[:len(X)], C[len(X):])

    def _gram(self, X, Y, out, n_threads):
        Cx, Cy = self._counts(X, Y)
        _count_gram(Cx, Cy, out, n_threads)
        if self.normalized:
            dx = _row_sq_sums(Cx)
            dy = dx if Cy is None else _row_sq_sums(Cy)
            _normalize(out, dx, dy, X, X if Y is None else Y)


def _kmer_matrix(codes, offsets, k):
    """CSR matrix (n_strings x n_distinct_kmers) of k-mer counts.

    A k-mer's code is its base-A number (A the alphabet size); when A**k
    would overflow int64 the codes of the (m)-mers are first ranked to
    0..n_distinct-1, so codes stay exact for any k.  Columns are numbered by
    an exact hash table in compiled code (``_structured.kmer_csr``).
    """
    n = offsets.size - 1
    M = codes.size - k + 1
    if M <= 0:
        return sp.csr_matrix((n, 0))
    # Alphabet ranks through a presence table over the code points: no sort.
    present = np.zeros(int(codes.max()) + 1, dtype=np.int64)
    present[codes] = 1
    rank = np.cumsum(present) - 1
    A = int(present.sum())
    t = rank[codes]
    cur = t[:M].copy()
    card = A
    for m in range(1, k):
        if card * A >= 2 ** 62:
            _, cur = np.unique(cur, return_inverse=True)
            cur = cur.astype(np.int64).ravel()
            card = int(cur.max()) + 1
        cur *= A
        cur += t[m:m + M]
        card *= A
    indptr, indices, data, D = _structured.kmer_csr(cur, offsets, k, min(card, 2 ** 62))
    return sp.csr_matrix((data, indices, indptr), shape=(n, D))


# A feature shared by df_x rows of X and df_y of Y costs df_x df_y scattered
# updates in the sparse loop and nx ny / _DENSE_GAIN in a gemm (BLAS does
# many times more multiply-adds a second than a scatter does).
_DENSE_GAIN = 16
# Columns of the dense part are densified this many float64 entries at a time.
_DENSE_CHUNK = 1 << 25


def _row_sq_sums(C):
    rows = np.repeat(np.arange(C.shape[0]), np.diff(C.indptr))
    return np.bincount(rows, weights=C.data * C.data, minlength=C.shape[0])


def _count_gram(Cx, Cy, out, n_threads):
    """out = Cx Cy^T (Cy None: Cx Cx^T) for sparse feature-count matrices.

    Frequent features go to BLAS on a dense copy of their columns (in
    chunks), rare ones to an OpenMP loop over posting lists; with integer
    counts every sum is exact, so the result does not depend on the split or
    on the thread count, and a symmetric Gram is exactly symmetric.
    """
    from scipy.linalg import blas

    from fastkern._threads import blas_limit

    symmetric = Cy is None
    Cy = Cx if symmetric else Cy
    nx, ny, D = Cx.shape[0], Cy.shape[0], Cx.shape[1]
    dfx = np.bincount(Cx.indices, minlength=D).astype(np.float64)
    dfy = dfx if symmetric else np.bincount(Cy.indices, minlength=D).astype(np.float64)
    dense = dfx * dfy > nx * ny / _DENSE_GAIN
    out.fill(0.0)
    Yc = Cy.tocsc()
    i64 = np.int64
    _structured.count_gram_sparse(
        Cx.indptr.astype(i64), Cx.indices.astype(i64), Cx.data.astype(np.float64),
        Yc.indptr.astype(i64), Yc.indices.astype(i64), Yc.data.astype(np.float64),
        dense.view(np.uint8), out, n_threads)
    cols = np.flatnonzero(dense)
    step = max(1, _DENSE_CHUNK // max(nx + ny, 1))
    for c0 in range(0, cols.size, step):
        chunk = cols[c0:c0 + step]
        Xd = Cx[:, chunk].toarray()
        Yd = Xd if symmetric else Cy[:, chunk].toarray()
        # out.T is out's memory in Fortran order: gemm accumulates into it in place.
        with blas_limit(n_threads):
            res = blas.dgemm(1.0, Yd, Xd, beta=1.0, c=out.T, trans_b=True, overwrite_c=True)
        if not np.shares_memory(res, out):
            out[...] = res.T
    return out


class BoundedRange(_SubstringFamily):
    """Common substrings of every length 1..k, each pair of occurrences counting 1.

    kernlab's "boundrange": the sum of the spectrum kernels of orders 1..k.

    Parameters
    ----------
    k : int, default=4
        Longest substring length (>= 1).
    normalized : bool, default=True
        Divide by sqrt(k(x, x) k(y, y)) (cosine of the count vectors).
    terminator : str, default=None
        Appended to every string first; kernlab's ``stringdot`` uses "\\n".
    """

    def __init__(self, k=4, normalized=True, terminator=None):
        super().__init__(normalized, terminator)
        self.k = check_int(k, "k", 1)

    def _params(self):
        return {"k": self.k, **super()._params()}

    def _log_weights(self, L):
        return np.where(L <= self.k, 0.0, -np.inf)


class AllSubstrings(_SubstringFamily):
    """Common substrings of every length, each pair of occurrences counting 1.

    kernlab's "constant".

    Parameters
    ----------
    normalized : bool, default=True
        Divide by sqrt(k(x, x) k(y, y)) (cosine of the count vectors).
    terminator : str, default=None
        Appended to every string first; kernlab's ``stringdot`` uses "\\n".
    """

    def _log_weights(self, L):
        return np.zeros(L.size)


class ExponentialDecay(_SubstringFamily):
    """Common substrings of every length, weighted lambda_**-len(s).

    kernlab's "exponential"; lambda_ > 1 favours short substrings.

    Parameters
    ----------
    lambda_ : float, default=1.1
        Decay base (> 0).
    normalized : bool, default=True
        Divide by sqrt(k(x, x) k(y, y)) (cosine of the count vectors).
    terminator : str, default=None
        Appended to every string first; kernlab's ``stringdot`` uses "\\n".
    """

    def __init__(self, lambda_=1.1, normalized=True, terminator=None):
        super().__init__(normalized, terminator)
        self.lambda_ = check_real(lambda_, "lambda_", low=0.0, low_inclusive=False)

    def _params(self):
        return {"lambda_": self.lambda_, **super()._params()}

    def _log_weights(self, L):
        return -L * math.log(self.lambda_)


class Substring(_SubstringFamily):
    """Contiguous substrings weighted lambda_**(2 len(s)).

    Of length exactly k (kernlab's "string"), or of every length 1..k with
    ``full=True`` (kernlab's "fullstring").

    Parameters
    ----------
    k : int, default=4
        Substring length (>= 1).
    lambda_ : float, default=1.1
        Weight base (> 0).
    full : bool, default=False
        Count every length 1..k, not only k.
    normalized : bool, default=True
        Divide by sqrt(k(x, x) k(y, y)) (cosine of the count vectors).
    terminator : str, default=None
        Appended to every string first; kernlab's ``stringdot`` uses "\\n".
    """

    def __init__(self, k=4, lambda_=1.1, full=False, normalized=True, terminator=None):
        super().__init__(normalized, terminator)
        self.k = check_int(k, "k", 1)
        self.lambda_ = check_real(lambda_, "lambda_", low=0.0, low_inclusive=False)
        self.full = check_bool(full, "full")

    def _params(self):
        return {"k": self.k, "lambda_": self.lambda_, "full": self.full,
                **super()._params()}

    def _log_weights(self, L):
        return np.where(L <= self.k if self.full else L == self.k,
                        2 * L * math.log(self.lambda_), -np.inf)


class Subsequence(_StringKernel):
    """Gap-weighted subsequence kernel (Lodhi et al., 2002; kernlab's "sequence").

    k(x, y) = sum over strings u of length k, over index tuples i of x and j of
    y with x[i] = u = y[j], of lambda_**(span(i) + span(j)), span the distance
    from the first index to the last plus one: common subsequences count, and
    the more gaps they have the less (for lambda_ < 1).  O(k |x| |y|) dynamic
    programming per pair.

    Parameters
    ----------
    k : int, default=3
        Subsequence length (>= 1).
    lambda_ : float, default=0.5
        Gap decay (> 0).
    normalized : bool, default=True
        Divide by sqrt(k(x, x) k(y, y)) (cosine of the count vectors).
    """

    def __init__(self, k=3, lambda_=0.5, normalized=True):
        super().__init__(normalized, None)
        self.k = check_int(k, "k", 1)
        self.lambda_ = check_real(lambda_, "lambda_", low=0.0, low_inclusive=False)

    def _params(self):
        return {"k": self.k, "lambda_": self.lambda_, "normalized": self.normalized}

    def _pair_gram(self, sx, ox, sy, oy, out, symmetric, n_threads, plan):
        # The values divided by lambda_**(2k) (see _structured._subsequence_pair):
        # the factor cancels in the normalisation, _unscale puts it back.
        px = int(np.diff(ox).max())
        py = int(np.diff(oy).max())
        _structured._gram(_SUBSEQUENCE, sx, ox, sy, oy, out, symmetric, n_threads,
                          n=self.k, lam=self.lambda_, buf_size=2 * (px + 1) * (py + 1))

    def _unscale(self, out, plan):
        # Twice lambda_**k: lambda_**(2k) alone may overflow where the values do not.
        factor = np.float64(self.lambda_) ** self.k
        with np.errstate(over="ignore", under="ignore"):
            out *= factor
            out *= factor

    def _check_finite(self, *arrays):
        if not all(np.isfinite(a).all() for a in arrays):
            raise ValueError(f"{self!r}: the kernel values overflow float64 on these strings "
                             f"(lambda_ > 1 weighs a gap of g characters lambda_**g); use "
                             "lambda_ <= 1 or shorter strings")


def stringdot(type="spectrum", length=4, lambda_=1.1, normalized=True):
    """Make the string kernel that kernlab's ``stringdot`` makes with the same arguments.

    Defaults are kernlab's.  kernlab's "sequence" and its normalised kernels give
    NaN where a self-similarity is 0; these give 0.

    Parameters
    ----------
    type : str, default="spectrum"
        The kernel: "spectrum" -> Spectrum(length), "boundrange" -> BoundedRange(length),
        "constant" -> AllSubstrings(), "exponential" -> ExponentialDecay(lambda_),
        each with terminator="\\n" (kernlab appends a newline to every string for
        these four); "string" -> Substring(length, lambda_), "fullstring" ->
        Substring(length, lambda_, full=True), "sequence" -> Subsequence(length,
        lambda_).
    length : int, default=4
        The substring or subsequence length (kernlab's ``length``).
    lambda_ : float, default=1.1
        The decay (kernlab's ``lambda``).
    normalized : bool, default=True
        Divide by sqrt(k(x, x) k(y, y)).

    Returns
    -------
    Kernel
        The kernel; kernlab's unnormalised "string" is lambda_**2 times
        Substring(length, lambda_).

    Raises
    ------
    ValueError
        If ``type`` is not one of kernlab's seven types.

    Examples
    --------
    >>> from fastkern import stringdot
    >>> stringdot("spectrum", length=2)
    Spectrum(k=2, normalized=True, terminator='\\n')
    """
    kinds = ("spectrum", "boundrange", "constant", "exponential", "string", "fullstring",
             "sequence")
    if type not in kinds:
        raise ValueError(f"type must be one of {kinds}, got {type!r}")
    if type == "spectrum":
        return Spectrum(length, normalized, terminator="\n")
    if type == "boundrange":
        return BoundedRange(length, normalized, terminator="\n")
    if type == "constant":
        return AllSubstrings(normalized, terminator="\n")
    if type == "exponential":
        return ExponentialDecay(lambda_, normalized, terminator="\n")
    if type == "sequence":
        return Subsequence(length, lambda_, normalized)
    kern = Substring(length, lambda_, full=type == "fullstring", normalized=normalized)
    if type == "string" and not normalized:
        # kernlab's "string" weighs a match lambda**(2 length + 2), one factor
        # lambda**2 more than its "fullstring" gives the same substring.
        return lambda_ ** 2 * kern
    return kern


# --------------------------------------------------------------------------- sets
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


# --------------------------------------------------------------------------- graphs
class _Neighbours:
    """A checked graph's adjacency: CSR neighbour lists (sorted), nothing else."""

    __slots__ = ("indptr", "indices")

    def __init__(self, indptr, indices):
        self.indptr, self.indices = indptr, indices


class WeisfeilerLehman(StructuredKernel):
    """Weisfeiler-Lehman subtree kernel (Shervashidze et al., 2011), vertex-histogram base.

    A graph is a pair ``(adjacency, node_labels)``: ``adjacency`` an
    (n_nodes, n_nodes) scipy sparse matrix or array, finite, whose nonzero
    entries (i, j) make j a neighbour of i (symmetric in its nonzero pattern
    unless ``directed=True``), ``node_labels`` a sequence of n_nodes hashable labels (node i has
    node_labels[i]) or a dict {i: label} over 0..n_nodes-1.  An edge list
    [(u, v), ...] becomes such a matrix with
    ``scipy.sparse.coo_array((np.ones(len(e)), tuple(np.transpose(e))), shape=(n, n))``.

    Parameters
    ----------
    n_iter : int, default=5
        Relabelling iterations (>= 0).
    normalize : bool, default=False
        Divide by sqrt(k(G, G) k(G', G')).
    directed : bool, default=False
        Accept adjacency matrices whose nonzero pattern is not symmetric: the
        neighbours of node i are then its out-neighbours, the j with
        A[i, j] != 0.  With False such a matrix is refused (a ValueError), as
        a directed graph given by mistake would be compared silently.

    Notes
    -----
    Iteration 0 uses the given labels; iteration h relabels every node by its
    label and the sorted multiset of its neighbours' labels, compressed to a
    new label.  k(G, G') = sum over h = 0..n_iter of the dot product of the
    label histograms of G and G' at iteration h (n_iter + 1 histograms, as
    grakel's ``WeisfeilerLehman(n_iter=...)``).  The relabelling runs in Python
    (O(n_iter x edges)); the histograms are a sparse count matrix whose Gram
    is computed as ``Spectrum``'s (BLAS for frequent labels, OpenMP posting
    lists for rare ones).

    Examples
    --------
    >>> import numpy as np
    >>> from fastkern import WeisfeilerLehman
    >>> path = (np.array([[0, 1], [1, 0]]), ["a", "b"])
    >>> WeisfeilerLehman(n_iter=1)([path])
    array([[4.]])
    """

    _sample_kind = "graph"

    def __init__(self, n_iter=5, normalize=False, directed=False):
        self.n_iter = check_int(n_iter, "n_iter", 0)
        self.normalize = check_bool(normalize, "normalize")
        self.directed = check_bool(directed, "directed")

    def _params(self):
        return {"n_iter": self.n_iter, "normalize": self.normalize, "directed": self.directed}

    def _check_sample(self, item, name):
        if isinstance(item, (np.ndarray, str, bytes)) or sp.issparse(item) or \
                not isinstance(item, (tuple, list)):
            raise ValueError(f"{name} must be a pair (adjacency, node_labels); a graph without "
                             f"node labels (got {type(item).__name__}) cannot be compared by "
                             "WeisfeilerLehman")
        if len(item) != 2:
            raise ValueError(f"{name} must be a pair (adjacency, node_labels), got "
                             f"{len(item)} elements")
        A, labels = item
        if isinstance(A, _Neighbours):
            return item  # checked before (the estimators keep checked training graphs)
        if labels is None:
            raise ValueError(f"{name} has no node labels (None); WeisfeilerLehman needs "
                             "(adjacency, node_labels)")
        if not sp.issparse(A):
            A = np.asarray(A)
            if A.dtype.kind not in "biuf":
                raise TypeError(f"{name}: the adjacency matrix must be numeric, got dtype "
                                f"{A.dtype}")
            if A.ndim != 2:
                raise ValueError(f"{name}: the adjacency matrix must be 2-D, got shape "
                                 f"{A.shape}")
        n = A.shape[0]
        if A.shape != (n, n) or n == 0:
            raise ValueError(f"{name}: the adjacency matrix must be square and non-empty, "
                             f"got shape {A.shape}")
        if sp.issparse(A):
            # A copy: eliminate_zeros must not touch the caller's matrix.
            A = sp.csr_matrix(A, copy=True)
            self._check_entries(A.data, name)
            A.eliminate_zeros()
            A.sort_indices()
            if not self.directed:
                pattern = A.astype(bool)
                if (pattern != pattern.T).nnz:
                    self._asymmetric(name)
            A = _Neighbours(A.indptr, A.indices)
        else:
            self._check_entries(A, name)
            # Neighbour lists straight from the dense matrix: a scipy matrix per
            # small graph cost more than the whole relabelling.
            nonzero = A != 0
            if not self.directed and not np.array_equal(nonzero, nonzero.T):
                self._asymmetric(name)
            A = _Neighbours(np.concatenate([[0], np.cumsum(nonzero.sum(axis=1))]),
                            np.nonzero(nonzero)[1])
        if isinstance(labels, Mapping):
            if set(labels) != set(range(n)):
                raise ValueError(f"{name}: the node-label dict must have the keys 0..{n - 1}")
            labels = [labels[i] for i in range(n)]
        elif isinstance(labels, (str, bytes)) or not hasattr(labels, "__len__"):
            raise ValueError(f"{name}: node_labels must be a sequence of {n} labels, got "
                             f"{type(labels).__name__}")
        labels = list(labels)
        if len(labels) != n:
            raise ValueError(f"{name} has {n} nodes but {len(labels)} node labels")
        for v in labels:
            try:
                hash(v)
            except TypeError:
                raise TypeError(f"{name}: node label {v!r} is not hashable") from None
        return (A, labels)

    @staticmethod
    def _check_entries(values, name):
        if values.dtype.kind == "f" and not np.isfinite(values).all():
            what = "NaN" if np.isnan(values).any() else "infinite"
            raise ValueError(f"{name}: the adjacency matrix has {what} entries; its nonzero "
                             "entries are the edges, so they must be finite")

    @staticmethod
    def _asymmetric(name):
        raise ValueError(f"{name}: the adjacency matrix is not symmetric (an edge i -> j "
                         "without j -> i): give both directions of every edge for an "
                         "undirected graph, or directed=True for a directed one")

    def features(self, X, Y=None):
        """Compute the WL label-histogram matrices of X (and Y), with shared label ids.

        Parameters
        ----------
        X : sequence of graphs
            Pairs ``(adjacency, node_labels)``.
        Y : sequence of graphs, default=None
            Second graphs, relabelled with the same label ids.

        Returns
        -------
        Cx : scipy.sparse.csr_matrix of shape (n_samples_X, n_labels)
            Label counts of X over all iterations.
        Cy : scipy.sparse.csr_matrix of shape (n_samples_Y, n_labels) or None
            Label counts of Y, None when Y is None.
        """
        Xs = self.check_samples(X, "X")
        Ys = None if Y is None else self.check_samples(Y, "Y")
        return self._features(Xs, Ys)

    def _features(self, X, Y):
        graphs = list(X) if Y is None else list(X) + list(Y)
        sizes = np.array([A.indptr.size - 1 for A, _ in graphs], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)])
        # All graphs as one block-diagonal adjacency (CSR arrays, neighbours
        # sorted): node v of graph g is starts[g] + v, and one pass relabels
        # every node of every graph.
        edges = np.cumsum([0] + [A.indptr[-1] for A, _ in graphs])
        indptr = np.concatenate([[0]] + [A.indptr[1:] + e for (A, _), e
                                         in zip(graphs, edges)]).astype(np.int64)
        indices = np.concatenate([np.zeros(0, np.int64)] + [
            A.indices.astype(np.int64) + start for (A, _), start in zip(graphs, starts)])
        vocab = {}
        current = np.array([vocab.setdefault((0, v), len(vocab))
                            for _, lab in graphs for v in lab], dtype=np.int64)
        histograms = [current]
        for h in range(1, self.n_iter + 1):
            neigh = current[indices]
            new = np.empty_like(current)
            for v in range(current.size):
                signature = (h, current[v], tuple(sorted(neigh[indptr[v]:indptr[v + 1]])))
                new[v] = vocab.setdefault(signature, len(vocab))
            current = new
            histograms.append(current)
        cols = np.concatenate(histograms)
        rows = np.tile(np.repeat(np.arange(len(graphs)), sizes), self.n_iter + 1)
        C = sp.csr_matrix((np.ones(cols.size), (rows, cols)), shape=(len(graphs), len(vocab)))
        C.sum_duplicates()
        return (C, None) if Y is None else (C[:len(X)], C[len(X):])

    def _gram(self, X, Y, out, n_threads):
        Cx, Cy = self._features(X, Y)
        _count_gram(Cx, Cy, out, n_threads)
        if self.normalize:
            # Every graph has a node, so no self-similarity is 0 (no keys needed).
            dx = _row_sq_sums(Cx)
            dy = dx if Cy is None else _row_sq_sums(Cy)
            _normalize(out, dx, dy, None, None)
