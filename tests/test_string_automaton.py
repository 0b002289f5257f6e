"""The substring kernels' suffix-automaton path (fastkern/src/fk_sam.h) on adversarial strings.

Reference: the definition as a sum over position pairs (i, j) of
W(lcp(x[i:], y[j:])), W(L) = w(1) + ... + w(L), with the lcp of every pair
from NumPy diagonal runs (an O(|x| |y|) computation sharing nothing with the
automaton), summed with math.fsum; and, for rational weights, the same sum
in exact fractions.  The strings are the automaton's hard cases: one
repeated character (a chain of states), periodic strings (many clones),
code points above 0xFFFF (hash keys beyond the BMP), length 1, very
different lengths, random binary strings.
"""
import functools
import math
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from fastkern import _batches, _structured
from fastkern._testing import least_time_to_interrupt
from fastkern.structured import (AllSubstrings, BoundedRange, ExponentialDecay, Substring,
                                 stringdot)


@functools.lru_cache(maxsize=None)
def lcp_counts(x, y):
    """{L: number of position pairs (i, j) with lcp(x[i:], y[j:]) = L >= 1}."""
    a = np.array([ord(c) for c in x], dtype=np.int64)
    b = np.array([ord(c) for c in y], dtype=np.int64)
    counts = Counter()
    for d in range(-(len(a) - 1), len(b)):
        i0 = max(0, -d)
        n = min(len(a) - i0, len(b) - i0 - d)
        # Read backwards, the lcp at a position is the distance to the last
        # mismatch seen: a running maximum of mismatch indices.
        eq = (a[i0:i0 + n] == b[i0 + d:i0 + d + n])[::-1]
        idx = np.arange(n)
        run = idx - np.maximum.accumulate(np.where(eq, -1, idx))
        counts.update(dict(zip(*(v.tolist() for v in np.unique(run[run > 0],
                                                                return_counts=True)))))
    return counts


def pair_ref(weight):
    """k(x, y) = sum over position pairs of W(lcp), W cumulative, in float (fsum)."""
    def f(x, y):
        counts = lcp_counts(x, y)
        if not counts:
            return 0.0
        top = max(counts)
        W = np.cumsum([weight(L) for L in range(1, top + 1)])
        return math.fsum(c * W[L - 1] for L, c in counts.items())
    return f


def pair_exact(weight):
    """The same sum with Fraction weights, exactly."""
    def f(x, y):
        counts = lcp_counts(x, y)
        total, W, acc = Fraction(0), [Fraction(0)], Fraction(0)
        for L in range(1, max(counts, default=0) + 1):
            acc += weight(L)
            W.append(acc)
        for L, c in counts.items():
            total += c * W[L]
        return total
    return f


def gram_ref(pair, X, Y=None, norm=False):
    Y = X if Y is None else Y
    K = np.array([[pair(x, y) for y in Y] for x in X])
    if norm:
        # fastkern's 0/0 (a string without any weighted substring): 1 for x == y, else 0.
        dx = np.array([pair(x, x) for x in X])
        dy = np.array([pair(y, y) for y in Y])
        den = np.sqrt(dx)[:, None] * np.sqrt(dy)[None, :]
        same = np.array([[float(x == y) for y in Y] for x in X])
        K = np.where(den > 0, K / np.where(den > 0, den, 1), same)
    return K


def astral(n, start=0x10000, step=1):
    return "".join(chr(start + step * i) for i in range(n))


ADVERSARIAL = {
    "repeated": ["a" * 300, "a" * 7, "a", "aaab" * 20 + "a" * 50],
    "periodic": ["ab" * 90, "abc" * 61, "ba" * 45 + "c", "abcab" * 30, "abaababaabaab" * 9],
    "astral": [astral(200), astral(150, 0x10000 + 40), astral(3, 0x10FFFD),
               astral(100, 0x1F600, 0) + astral(20)],
    "lengths": ["x", "xyzzy" * 300, "z", "yx" * 2, "zyxzy" * 2],
    "binary": ["".join(np.random.default_rng(s).choice(["0", "1"], size=n))
               for s, n in enumerate([1, 2, 40, 250, 600, 611])],
}

KERNELS = {
    "constant": (lambda norm: AllSubstrings(normalized=norm), lambda L: 1.0),
    "boundrange": (lambda norm: BoundedRange(5, normalized=norm), lambda L: float(L <= 5)),
    "exponential": (lambda norm: ExponentialDecay(1.1, normalized=norm), lambda L: 1.1 ** -L),
    "exponential-growing": (lambda norm: ExponentialDecay(0.995, normalized=norm),
                            lambda L: 0.995 ** -L),
    "string": (lambda norm: Substring(4, 0.9, normalized=norm),
               lambda L: 0.9 ** 8 if L == 4 else 0.0),
    "fullstring": (lambda norm: Substring(6, 0.999, full=True, normalized=norm),
                   lambda L: 0.999 ** (2 * L) if L <= 6 else 0.0),
    "string-1": (lambda norm: Substring(1, 1.0, normalized=norm), lambda L: float(L == 1)),
}


@pytest.mark.parametrize("norm", [False, True], ids=["raw", "normalized"])
@pytest.mark.parametrize("kind", list(KERNELS))
@pytest.mark.parametrize("family", list(ADVERSARIAL))
def test_adversarial_strings_match_the_position_pair_definition(family, kind, norm):
    make, weight = KERNELS[kind]
    X = ADVERSARIAL[family]
    K = make(norm)(X)
    ref = gram_ref(pair_ref(weight), X, norm=norm)
    np.testing.assert_allclose(K, ref, rtol=1e-12, atol=0)
    # A cross Gram: x's automaton read by every y, the long against the short.
    Y = ADVERSARIAL["lengths"][:3] + X[:2]
    np.testing.assert_allclose(make(norm)(X, Y), gram_ref(pair_ref(weight), X, Y, norm=norm),
                               rtol=1e-12, atol=0)


@pytest.mark.parametrize("kind", ["constant", "boundrange"])
def test_integer_weights_give_exact_counts(kind):
    make, weight = KERNELS[kind]
    X = ADVERSARIAL["periodic"] + ADVERSARIAL["repeated"]
    exact = pair_exact(lambda L: Fraction(weight(L)).limit_denominator(1))
    K = make(False)(X)
    assert np.array_equal(K, [[float(exact(x, y)) for y in X] for x in X])


def test_slowly_decaying_weights_on_long_repeats_match_exact_rationals():
    # lambda_ = 0.9995: W(L) grows almost linearly, and along a run of
    # hundreds of equal characters the automaton's W(L) - W(l) is a small
    # difference of two large sums: the double-double W keeps it exact to
    # rounding.  Exact reference: weights (1999/2000)**(2L) as fractions.
    lam = Fraction(1999, 2000)
    X = ["a" * 700, "a" * 650 + "b", "ab" * 300, "a" * 40]
    K = Substring(700, float(lam), full=True, normalized=False)(X)
    exact = pair_exact(lambda L: lam ** (2 * L))
    ref = np.array([[float(exact(x, y)) for y in X] for x in X])
    np.testing.assert_allclose(K, ref, rtol=1e-12, atol=0)


def test_stringdot_types_match_the_definition_with_kernlabs_terminator():
    rng = np.random.default_rng(5)
    X = ["".join(rng.choice(list("acgt"), size=n)) for n in (1, 3, 60, 200, 201)] + ["a" * 80]
    for kind, weight in [("constant", lambda L: 1.0), ("boundrange", lambda L: float(L <= 4)),
                         ("exponential", lambda L: 1.1 ** -L)]:
        K = stringdot(kind, length=4, lambda_=1.1, normalized=True)(X)
        ref = gram_ref(pair_ref(weight), [x + "\n" for x in X], norm=True)
        np.testing.assert_allclose(K, ref, rtol=1e-12, atol=0, err_msg=kind)


def test_empty_samples_at_the_compiled_level_give_zero():
    # The kernels refuse empty strings; the compiled loop still gives 0 for
    # them, whichever side (an automaton with only its root, or nothing to read).
    codes = np.array([ord(c) for c in "abcab"], dtype=np.int32)
    offsets = np.array([0, 0, 3, 3, 5], dtype=np.int64)
    W = np.array([0.0, 1.0, 2.0, 3.0])
    out = np.full((4, 4), np.nan)
    _structured._gram(0, codes, offsets, codes, offsets, out, True, 2, W=W)
    ref = gram_ref(pair_ref(lambda L: 1.0), ["", "abc", "", "ab"])
    np.testing.assert_array_equal(out, ref)
    with pytest.raises(ValueError, match=r"X\[1\] is an empty string"):
        AllSubstrings()(["ab", ""])
    # Weights too short for the strings: refused before the compiled loop.
    with pytest.raises(ValueError, match="W has 3 entries"):
        _structured._gram(0, codes, offsets, codes, offsets, out, True, 1, W=W[:3])


@pytest.mark.parametrize("kind", ["constant", "exponential", "fullstring"])
def test_any_thread_count_and_batching_gives_the_same_bits(kind, monkeypatch):
    make, _ = KERNELS[kind]
    rng = np.random.default_rng(2)
    X = ["".join(rng.choice(list("ab"), size=n)) for n in rng.integers(1, 120, size=40)]
    Y = X[5:25] + ["b" * 300]
    base = make(False)(X, Y, n_threads=1)
    for n_threads in (2, 3, 5):
        assert np.array_equal(make(False)(X, Y, n_threads=n_threads), base)
    # Tiny batches: a thread's chunks end in the middle of rows, so the
    # automata are rebuilt in every order the schedule gives.
    monkeypatch.setattr(_batches, "TARGET", 1e-6)
    for n_threads in (1, 3):
        assert np.array_equal(make(False)(X, Y, n_threads=n_threads), base)
        sym = make(True)(X, n_threads=n_threads)
        assert np.array_equal(sym, sym.T)


def test_substring_gram_stops_on_ctrl_c():
    # A pair of these is ~3000 automaton steps; the Gram has 4.5 million
    # pairs, a minute or more on two cores if it ran to the end.
    rng = np.random.default_rng(0)
    X = ["".join(row) for row in rng.choice(list("acgt"), size=(3000, 3000))]
    latency = least_time_to_interrupt(lambda: AllSubstrings()(X), 2.0, delay=0.5)
    assert latency is not None and latency < 2.0
    small = ["gattaca", "tacag"]
    np.testing.assert_allclose(AllSubstrings(normalized=False)(small),
                               gram_ref(pair_ref(lambda L: 1.0), small), rtol=0, atol=0)


@pytest.mark.parametrize("kind", ["exponential", "fullstring"])
def test_long_strings_are_accurate_to_a_few_ulps_per_term(kind):
    # The O(|x| |y|) walk summed cw[r] = W(1) + ... + W(r), a cumulative sum
    # of a cumulative sum: 2.3e-12 off the definition on these strings; the
    # automaton adds W differences, each exact to a few ulps (fk_sam.h).
    make, weight = {"exponential": (lambda: ExponentialDecay(1.1, normalized=False),
                                    lambda L: 1.1 ** -L),
                    "fullstring": (lambda: Substring(4, 1.1, full=True, normalized=False),
                                   lambda L: 1.1 ** (2 * L) if L <= 4 else 0.0)}[kind]
    rng = np.random.default_rng(7)
    X = ["".join(r) for r in rng.choice(list("ACGT"), size=(3, 1000))]
    X += ["ACGT" * 200, "A" * 900]
    np.testing.assert_allclose(make()(X), gram_ref(pair_ref(weight), X), rtol=1e-13, atol=0)


def exact_normalized_gram(weight, X, Y=None):
    """The normalised Gram from exact rational kernels, rounded once to float."""
    from decimal import Decimal, localcontext

    Y = X if Y is None else Y
    pair = pair_exact(weight)

    def dec(f):
        return Decimal(f.numerator) / Decimal(f.denominator)

    out = np.empty((len(X), len(Y)))
    with localcontext() as ctx:
        ctx.prec = 60
        for a, x in enumerate(X):
            for b, y in enumerate(Y):
                num, den = pair(x, y), pair(x, x) * pair(y, y)
                out[a, b] = (float(dec(num) / dec(den).sqrt()) if den else float(x == y))
    return out


SCALED = {
    # Weights 1000**L: W(300) ~ 1e900.
    "exponential-huge": (lambda: ExponentialDecay(1e-3), lambda L: Fraction(1000) ** L),
    # lambda_**8 ~ 1e-480 and lambda_**(2L) down to 1e-1200.
    "string-tiny": (lambda: Substring(4, 1e-60),
                    lambda L: Fraction(1e-60) ** 8 if L == 4 else Fraction(0)),
    "fullstring-tiny": (lambda: Substring(10, 1e-60, full=True),
                        lambda L: Fraction(1e-60) ** (2 * L) if L <= 10 else Fraction(0)),
}


@pytest.mark.parametrize("kind", list(SCALED))
@pytest.mark.parametrize("family", ["repeated", "periodic", "astral", "lengths"])
def test_weights_outside_float64_match_exact_rationals(family, kind):
    # Normalised kernels whose weights over- or underflow float64 run in
    # extended range (fk_xf in fk_sam.h); only ratios of the weights matter.
    make, weight = SCALED[kind]
    X = [x[:300] for x in ADVERSARIAL[family]]
    np.testing.assert_allclose(make()(X), exact_normalized_gram(weight, X), rtol=1e-12,
                               atol=0)
    Y = X[1:3] + ["a"]
    np.testing.assert_allclose(make()(Y, X), exact_normalized_gram(weight, Y, X), rtol=1e-12,
                               atol=0)
