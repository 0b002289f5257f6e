"""The string kernels: kernlab's ``stringdot`` types and the subsequence kernel."""
import math

import numpy as np
import scipy.sparse as sp

from fastkern import _structured
from fastkern._validation import check_bool, check_int, check_real
from fastkern.structured._base import (_SUBSEQUENCE, _SUBSTRING, StructuredKernel, _feature_gram,
                                       _normalize)


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
        _feature_gram(*self._counts(X, Y), out, n_threads, self.normalized, X,
                      X if Y is None else Y)


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
        # A pair with a string shorter than k is 0 without a DP; the DP of
        # the others holds k rows of |y| + 1 per thread.
        py = int(np.diff(oy).max())
        buf_size = self.k * (py + 1) if self.k <= py else 1
        try:
            _structured._gram(_SUBSEQUENCE, sx, ox, sy, oy, out, symmetric, n_threads,
                              n=self.k, lam=self.lambda_, buf_size=buf_size)
        except MemoryError:
            raise MemoryError(
                f"{self!r} needs {8 * buf_size / 2**30:.3g} GiB of workspace per thread "
                f"(k={self.k} rows of the longest string's {py} characters + 1)") from None

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

