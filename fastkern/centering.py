"""In-place double centering of Gram matrices (Cython kernels in _centering.pyx)."""
import numpy as np
from sklearn.base import (BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                          _fit_context)
from sklearn.utils.validation import check_is_fitted, validate_data

from fastkern import _centering
from fastkern._threads import limits_blas, limits_threads, threads_for
from fastkern._validation import (CachedParamValidation, check_n_threads, check_square,
                                  n_threads_constraint, result_dtype)
from fastkern.pairwise import PackedUpperGram

__all__ = ["center_gram", "CentredGram", "KernelCenterer"]


def _inplace_view(K):
    """A C-contiguous float view of K's own memory, or None if K cannot be centred in place.

    A Fortran-ordered square K is centred through K.T: the double-centering
    rule is symmetric in rows and columns, so centring K.T is centring K.
    """
    if not isinstance(K, np.ndarray) or K.dtype not in (np.float32, np.float64):
        return None
    if not K.flags.writeable:
        return None
    if K.flags.c_contiguous:
        return K
    if K.flags.f_contiguous and K.shape[0] == K.shape[1]:
        return K.T
    return None


@limits_threads
def center_gram(K, *, copy=False, n_threads=None):
    """Double-centre a square Gram matrix: K - 1K/n - K1/n + 1K1/n^2.

    O(n) extra memory, one read pass for the means and one read-write pass for
    the update.

    Parameters
    ----------
    K : array-like of shape (n_samples, n_samples)
        The Gram matrix.  In-place centering needs a writeable C- or
        F-contiguous float32/float64 array.
    copy : bool, default=False
        Centre a C-contiguous copy (float32 stays float32, other dtypes become
        float64) instead of K itself.
    n_threads : int, default=None
        OpenMP threads; None means the default (OMP_NUM_THREADS, else the CPUs
        available to this process, capped by its CPU quota).

    Returns
    -------
    K : ndarray of shape (n_samples, n_samples)
        The centred matrix: K itself unless ``copy=True`` (a list given with
        ``copy=False`` is converted and its conversion returned).

    Raises
    ------
    ValueError
        If K is not square, or ``copy=False`` and K cannot be centred in place.

    See Also
    --------
    KernelCenterer : The same centring as a transformer, for test Gram matrices too.

    Examples
    --------
    >>> import numpy as np
    >>> from fastkern import center_gram
    >>> center_gram(np.array([[2.0, 0.0], [0.0, 2.0]]))
    array([[ 1., -1.],
           [-1.,  1.]])
    """
    given = K
    K = check_square(K, "K")
    n_threads = check_n_threads(n_threads)
    if copy:
        K = np.array(K, dtype=result_dtype(K), order="C", copy=True)
        view = K
    else:
        # An ndarray that had to be converted (object dtype) would be centred in
        # a copy, leaving the caller's array untouched: refuse, as for int
        # arrays.  A list cannot be changed in place; its conversion is returned.
        converted = K is not given and isinstance(given, np.ndarray)
        view = None if converted else _inplace_view(K)
        if view is None:
            raise ValueError(
                "K cannot be centred in place: it must be a writeable C- or F-contiguous "
                f"float32/float64 array (got {type(given).__name__} of dtype "
                f"{getattr(given, 'dtype', K.dtype)}); pass copy=True"
            )
    _centering.center_train(view, n_threads)
    return K


class CentredGram:
    """The operator V -> Kc^T V of the double-centred Kc of K, without centring K.

    Kc = K - 1 c^T - r 1^T + t 1 1^T (r, c the row and column means of K, t
    the grand mean: ``_centering.row_col_means``), so

        Kc^T V = K^T V - c (1^T V) - 1 (r^T V - t 1^T V),

    one product with K plus O(n p) rank-one corrections: a block eigensolver
    on Kc needs no centring pass over K (the update pass reads and writes all
    of it).  K^T V is computed as (V^T K)^T: for a C-contiguous K and a block
    of 10-16 columns OpenBLAS runs the short-wide product about 1.8x faster
    than K V (N=8000, 2 cores: 34 ms against 61 ms).  With ``symmetric=True``
    on a CPU with AVX2 and FMA, K V itself is computed by fastkern's own
    narrow-block product (``_centering.gram_matmat``), which reads K in place
    instead of packing it as BLAS does: at N=8000, 2 cores, 16 columns took
    23 ms against OpenBLAS's 41-52 ms in one run; its result does not depend
    on the thread count.  For a symmetric K (r = c) this is Kc V.  The
    corrections and the result are float64 whatever K's dtype.

    Without means (``symmetric=True``: K must be symmetric, and float64 so
    that BLAS sums it in float64), the first call computes them from its own
    product, as one more column: K^T [V, 1] gives K^T V and n c, and r = c.
    That saves the read pass over K the means would otherwise cost.  Until
    then ``col_means``, ``row_means`` and ``grand_mean`` are None.

    Rounding: the product's error is relative to |K| rather than |Kc|, which
    is larger when the kernel's mean dominates; the explicitly centred K
    carries an error of the same order (each centred entry is rounded
    relative to the uncentred one), and in the tests the Ritz residuals
    reached 1e-13 of the largest eigenvalue for means up to 1e5 times it,
    as with explicit centring.

    Parameters
    ----------
    K : ndarray of shape (n, n) or PackedUpperGram
        The uncentred matrix (float32 or float64), kept as ``K`` without a
        copy; the products are computed in its dtype.  C-contiguous for the
        fast short-wide product above.  A ``fastkern.pairwise.PackedUpperGram``
        (half the memory, ``symmetric=True``) is multiplied from its packed
        triangle by fastkern's own product.
    row_means : array-like of shape (n,), default=None
        Row means r of K (``_centering.row_col_means``), stored in float64.
        Ignored with ``symmetric=True``.
    col_means : array-like of shape (n,), default=None
        Column means c of K, stored in float64.  Ignored with ``symmetric=True``.
    grand_mean : float, default=None
        Grand mean t of K.  Ignored with ``symmetric=True``.
    symmetric : bool, default=False
        Compute the means from the first call's product instead of taking
        them (K must then be symmetric and float64).
    n_threads : int, default=None
        OpenMP threads of fastkern's own product (``symmetric=True``); None
        means the default (OMP_NUM_THREADS, else the CPUs available to this
        process, capped by its CPU quota).  BLAS products use BLAS's threads.

    Attributes
    ----------
    K : ndarray of shape (n, n)
        The uncentred matrix.
    row_means : ndarray of shape (n,) or None
        Row means r of K; None until the first call with ``symmetric=True``.
    col_means : ndarray of shape (n,) or None
        Column means c of K; None until the first call with ``symmetric=True``.
    grand_mean : float or None
        Grand mean t of K; None until the first call with ``symmetric=True``.
    upper : bool
        Whether K is a ``fastkern.pairwise.PackedUpperGram`` (its packed upper
        triangle, read by ``_centering.gram_matmat_packed``, with or without
        AVX2; K must then be symmetric, and ``symmetric=True``).
    uses_blas : bool
        Whether the products call BLAS (False: fastkern's own product on
        ``n_threads`` OpenMP threads, used with ``symmetric=True`` where AVX2
        and FMA are available, and for a packed K).

    Raises
    ------
    TypeError
        If ``symmetric=True`` and K is not float64.

    See Also
    --------
    center_gram : Centre K itself, in place.
    KernelCenterer : Centring of training and test Gram matrices.

    Examples
    --------
    >>> import numpy as np
    >>> from fastkern.centering import CentredGram
    >>> K = np.array([[2.0, 0.0], [0.0, 2.0]])
    >>> CentredGram(K, symmetric=True)(np.eye(2))
    array([[ 1., -1.],
           [-1.,  1.]])
    """

    def __init__(self, K, row_means=None, col_means=None, grand_mean=None, *,
                 symmetric=False, n_threads=None):
        self.n_threads = check_n_threads(n_threads)
        self.upper = isinstance(K, PackedUpperGram)
        if self.upper and not symmetric:
            raise ValueError("a packed upper triangle (PackedUpperGram) needs symmetric=True")
        # K V by gram_matmat needs K V = K^T V, so only for a symmetric K.
        self.uses_blas = not (symmetric and (self.upper or (_centering.FAST_MATMAT
                                                            and K.flags.c_contiguous)))
        if symmetric:
            if K.dtype != np.float64:
                raise TypeError("means from the product need a float64 K, got "
                                f"{K.dtype}: pass the means (row_col_means)")
            self.row_means = self.col_means = self.grand_mean = None
        else:
            self.row_means = np.asarray(row_means, dtype=np.float64)
            self.col_means = np.asarray(col_means, dtype=np.float64)
            self.grand_mean = float(grand_mean)
        self.K = K
        self._acc = None

    def block_width(self, p):
        """The most columns the next call takes for the cost of p.

        fastkern's own product pads a block to a multiple of 4 columns, and
        its first call with ``symmetric=True`` adds one for the means: there,
        8 columns cost as much as 11.  The packed product on a CPU with
        AVX-512 works in groups of 8: 16 columns cost about what 12 do
        (N=8000: 15.4 ms against 15.0 ms; 8 columns 8.7 ms), so there 8 cost
        as much as 15.  BLAS products take p.

        Parameters
        ----------
        p : int
            Columns wanted.

        Returns
        -------
        width : int
            At least p.
        """
        if self.uses_blas:
            return p
        means = self.col_means is None
        group = 8 if self.upper and _centering.FAST_LEVEL >= 2 else 4
        return -(-(p + means) // group) * group - means

    def __call__(self, V):
        """Apply the centred operator: Kc^T V (Kc V for a symmetric K).

        With ``symmetric=True`` the first call also sets ``row_means``,
        ``col_means`` and ``grand_mean`` from its product.

        Parameters
        ----------
        V : ndarray of shape (n, p)
            The block of vectors.

        Returns
        -------
        W : ndarray of shape (n, p)
            Kc^T V, in float64 whatever K's dtype.
        """
        K = self.K
        n, p = V.shape
        if not self.uses_blas:
            # One more column of ones on the first call gives the means.
            q = p + (self.col_means is None)
            Vq = np.zeros((n, -(-q // 4) * 4))  # gram_matmat takes multiples of 4
            Vq[:, :p] = V
            Vq[:, p:q] = 1.0
            full = np.empty_like(Vq)
            threads = threads_for(self.n_threads, n * n)
            if self.upper:
                # One buffer for every call: fresh, each product's accumulators
                # (threads x n x width) would be page faults again.
                size = threads * Vq.size
                if self._acc is None or self._acc.size < size:
                    self._acc = np.empty(size)
                acc = self._acc[:size].reshape((threads,) + Vq.shape)
                _centering.gram_matmat_packed(K.data, K.row_start, Vq, full, acc, threads)
            else:
                _centering.gram_matmat(K, Vq, full, threads)
            if q > p:
                self.row_means = self.col_means = full[:, p] / n
                self.grand_mean = float(np.mean(self.col_means))
            W = full[:, :p]
        elif self.col_means is None:
            Vt = np.empty((p + 1, n), dtype=K.dtype)
            Vt[:p] = V.T
            Vt[p] = 1.0
            full = Vt @ K
            self.row_means = self.col_means = full[p] / n
            self.grand_mean = float(np.mean(self.col_means))
            W = full[:p].T
        else:
            W = np.asarray((np.ascontiguousarray(V.T, dtype=K.dtype) @ K).T, dtype=np.float64)
        V = np.asarray(V, dtype=np.float64)
        s = V.sum(axis=0)
        W -= self.col_means[:, None] * s
        W += self.grand_mean * s - self.row_means @ V
        return W


class KernelCenterer(CachedParamValidation, ClassNamePrefixFeaturesOutMixin, TransformerMixin,
                     BaseEstimator):
    """Centre a kernel matrix as if the feature vectors had zero mean.

    Drop-in for ``sklearn.preprocessing.KernelCenterer``: ``fit`` records the
    training Gram's column means ``K_fit_rows_`` and grand mean ``K_fit_all_``
    (accumulated in float64 whatever K's dtype); ``transform`` centres the
    training Gram or a test cross-Gram K(X_test, X_train) with them.
    Input is converted as scikit-learn converts it (lists, DataFrames, other
    dtypes become float64; float32 stays float32), and
    ``get_feature_names_out`` / ``set_output`` work as scikit-learn's.
    ``copy=False`` centres in place whenever K is a writeable C-contiguous float
    array (otherwise a converted copy is made, as scikit-learn does).

    Parameters
    ----------
    n_threads : int, default=None
        OpenMP threads; None means the default (OMP_NUM_THREADS, else the CPUs
        available to this process, capped by its CPU quota).

    Attributes
    ----------
    K_fit_rows_ : ndarray of shape (n_samples,)
        Column means of the training Gram (float64).
    K_fit_all_ : float
        Grand mean of the training Gram.
    n_features_in_ : int
        Number of columns of the training Gram (its number of samples).
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Column names of the training Gram, when it had string column names.

    See Also
    --------
    center_gram : In-place centring of one square Gram matrix.

    Examples
    --------
    >>> import numpy as np
    >>> from fastkern import KernelCenterer
    >>> K = np.array([[2.0, 0.0], [0.0, 2.0]])
    >>> KernelCenterer().fit_transform(K)
    array([[ 1., -1.],
           [-1.,  1.]])
    """

    _parameter_constraints: dict = {"n_threads": n_threads_constraint()}

    def __init__(self, n_threads=None):
        self.n_threads = n_threads

    def _validate(self, K, *, reset):
        K = validate_data(self, K, dtype=[np.float64, np.float32], reset=reset)
        if reset and K.shape[0] != K.shape[1]:
            raise ValueError("Kernel matrix must be a square matrix."
                             f" Input is a {K.shape[0]}x{K.shape[1]} matrix.")
        return K

    @_fit_context(prefer_skip_nested_validation=True)
    @limits_blas
    def fit(self, K, y=None):
        """Record the column means and the grand mean of a training Gram matrix.

        Parameters
        ----------
        K : array-like of shape (n_samples, n_samples)
            The training Gram matrix.
        y : None
            Ignored.

        Returns
        -------
        self : KernelCenterer
            The fitted centerer.

        Raises
        ------
        ValueError
            If K is not square.
        """
        K = self._validate(K, reset=True)
        n_threads = check_n_threads(self.n_threads)
        Kc = np.ascontiguousarray(K)
        self.K_fit_rows_, self.K_fit_all_ = _centering.column_means(Kc, n_threads)
        return self

    @limits_blas
    def transform(self, K, copy=True):
        """Centre a Gram matrix with the training means.

        Parameters
        ----------
        K : array-like of shape (n_queries, n_samples)
            The training Gram or a cross-Gram K(X_test, X_train).
        copy : bool, default=True
            False centres K in place when it is a writeable C-contiguous float array.

        Returns
        -------
        K_new : ndarray of shape (n_queries, n_samples)
            The centred matrix.
        """
        check_is_fitted(self, "K_fit_rows_")
        n_threads = check_n_threads(self.n_threads)
        K = self._validate(K, reset=False)
        Kc = self._target(K, copy)
        _centering.center_test(Kc, self.K_fit_rows_, self.K_fit_all_, n_threads)
        return Kc

    @_fit_context(prefer_skip_nested_validation=True)
    @limits_blas
    def fit_transform(self, K, y=None, copy=True):
        """Fit on K and centre it.

        One pass for the means, one for the update (in place when copy=False and K
        is a writeable C-contiguous float array).

        Parameters
        ----------
        K : array-like of shape (n_samples, n_samples)
            The training Gram matrix.
        y : None
            Ignored.
        copy : bool, default=True
            False centres K in place when it is a writeable C-contiguous float array.

        Returns
        -------
        K_new : ndarray of shape (n_samples, n_samples)
            The centred matrix.
        """
        K = self._validate(K, reset=True)
        return self._fit_transform_checked(self._target(K, copy))

    def _fit_transform_checked(self, K):
        """fit_transform of a square, finite, C-contiguous float K, in place.

        For callers that built K themselves (KernelPCA): the public method's
        NaN scan would be one more pass over the N x N matrix.
        """
        n_threads = check_n_threads(self.n_threads)
        self.K_fit_rows_, self.K_fit_all_ = _centering.center_train(K, n_threads)
        self.n_features_in_ = K.shape[1]
        return K

    def _fit_means_checked(self, K):
        """Fit on a square, finite, C-contiguous float K without changing it; return
        its row means (for ``CentredGram``, with K_fit_rows_ and K_fit_all_):
        one read pass, the means pass of _fit_transform_checked."""
        n_threads = check_n_threads(self.n_threads)
        row_means, self.K_fit_rows_, self.K_fit_all_ = _centering.row_col_means(K, n_threads)
        self.n_features_in_ = K.shape[1]
        return row_means

    def _set_means(self, col_means, grand_mean):
        """Fitted state from means computed elsewhere (``CentredGram`` of a
        symmetric training Gram): what ``fit`` on that Gram records."""
        self.K_fit_rows_ = np.asarray(col_means, dtype=np.float64)
        self.K_fit_all_ = float(grand_mean)
        self.n_features_in_ = self.K_fit_rows_.shape[0]
        return self

    @property
    def _n_features_out(self):
        # As scikit-learn: one output column per training sample, named
        # kernelcenterer0, kernelcenterer1, ... (not a one-to-one mapping).
        return self.n_features_in_

    @staticmethod
    def _target(K, copy):
        """K itself when it can be centred in place and copy=False, else a C copy."""
        if not copy and K.flags.c_contiguous and K.flags.writeable:
            return K
        return np.array(K, order="C", copy=True)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.pairwise = True
        return tags
