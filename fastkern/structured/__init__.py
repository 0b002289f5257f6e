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
k-mer of each string), Subsequence k (|y| + 1) float64 of workspace per
thread (y the longest string of Y, or of X without Y), and the other substring kernels one suffix automaton
per thread (250-330 bytes per character of the longest string of X).
"""
from fastkern.structured._base import StructuredKernel
from fastkern.structured._graphs import WeisfeilerLehman
from fastkern.structured._sets import Jaccard, MinMax, SetIntersection
from fastkern.structured._strings import (AllSubstrings, BoundedRange, ExponentialDecay, Spectrum,
                                          Subsequence, Substring, stringdot)

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
