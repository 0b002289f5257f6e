"""The base class of the structured kernels and the Gram arithmetic they share.

The kernel codes of ``_structured._gram``, the normalisation by the
self-similarities, and the Gram of sparse feature-count matrices (Spectrum's
k-mer counts, WeisfeilerLehman's label histograms).
"""
import numpy as np
import scipy.sparse as sp

from fastkern import _structured
from fastkern.kernels import Kernel, _call_doc
from fastkern._validation import check_n_threads, check_out

# The kernel codes of _structured._gram.
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

    @_call_doc({"X": "sequence of n_samples_X samples",
                "X_doc": "Strings, sets or graphs, as the kernel takes.",
                "Y": "sequence of n_samples_Y samples", "dtype": "float64"})
    def __call__(self, X, Y=None, *, out=None, n_threads=None):
        """Compute the Gram matrix k(X, Y) (k(X, X) when Y is None).

        @call@
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


def _feature_gram(Cx, Cy, out, n_threads, normalize, kx=None, ky=None):
    """out = the Gram of the count rows (_count_gram), normalised when normalize is
    true by the self-similarities, the rows' sums of squares (keys kx, ky: see
    _normalize)."""
    _count_gram(Cx, Cy, out, n_threads)
    if normalize:
        dx = _row_sq_sums(Cx)
        dy = dx if Cy is None else _row_sq_sums(Cy)
        _normalize(out, dx, dy, kx, ky)
