"""Drop-in replacements for sklearn.metrics.pairwise kernels, computed by _gram.

Same names, signatures, defaults and results as scikit-learn, plus
``exponential_kernel`` (exp(gamma <x, y>)) and two keyword-only arguments on
each function: ``out`` (a C-contiguous array of the result's shape and dtype,
filled and returned; nothing else of size N x M is allocated) and
``n_threads`` (None = OpenMP's default).

float32 inputs give float32 results; any other numeric input gives float64.

X and Y may be scipy sparse matrices or arrays (any format; mixed with dense
too): they are computed natively by fastkern._sparse, never densified.

Beyond scikit-learn's kernels (whose ``chi2_kernel`` and
``additive_chi2_kernel`` are computed natively too), the kernels of R's
kernlab: ``laplacian_l2_kernel`` (laplacedot), ``anova_kernel`` (anovadot),
``bessel_kernel`` (besseldot), ``spline_kernel`` (splinedot), and
``histogram_intersection_kernel``.  Their parameter ``gamma`` is kernlab's
``sigma``.  The feature-wise ones (anova, spline, the chi2 kernels,
histogram intersection) take dense input only (a sparse X or Y raises
TypeError, as scikit-learn's chi2 kernels do).

Each kernel is defined once, in ``fastkern._registry``: the tables here
(``KERNEL_CODES``, ``KERNEL_PARAMS``, the dispatch of ``pairwise_kernels``)
are derived from it, and so is the Gram function of a registered kernel that
has no hand-written one below (``rational_quadratic_kernel``, for instance).
``linear_kernel`` and ``cosine_similarity`` with two sparse inputs and
``dense_output=False`` return scipy's sparse X @ Y.T, as scikit-learn.
"""
import contextlib
import contextvars
import functools
import inspect
import math
import os
import re
import textwrap

import numpy as np

from fastkern import _centering, _featurewise, _gram, _registry, _sparse
from fastkern._progress import _setting, report_stage_fraction
from fastkern._threads import blas_limit
from fastkern._validation import (
    check_n_threads, check_out, check_pair, check_pair_sparse, is_sparse,
)

__all__ = [
    "linear_kernel",
    "polynomial_kernel",
    "rbf_kernel",
    "laplacian_kernel",
    "sigmoid_kernel",
    "exponential_kernel",
    "cosine_similarity",
    "laplacian_l2_kernel",
    "anova_kernel",
    "bessel_kernel",
    "spline_kernel",
    "chi2_kernel",
    "additive_chi2_kernel",
    "histogram_intersection_kernel",
    "pairwise_kernels",
    "KERNEL_PARAMS",
]

# The compiled loops' kind codes: one table, FK_KINDS of src/fk_maps.h.
_CODES = _gram.kind_codes()
_LINEAR, _RBF, _LAPLACIAN = _CODES["linear"], _CODES["rbf"], _CODES["laplacian"]
# The linear kernel's parameter array (it reads none of it).
_NO_PARAMS = _gram.pack_params({})
# The kernels of the tile loops (_gram, _sparse, _matfree); the feature-wise
# ones have their own loop (_featurewise).
_COMPILED = [k for k in _registry.KERNELS
             if k.compiled is not None and k.geometry != "featurewise"]
#: String kernel names -> the codes of the compiled tile loops, for the kernels
#: every loop has (dense, sparse and matrix-free).
KERNEL_CODES = {name: _CODES[k.compiled] for k in _COMPILED
                if {"sparse", "matrix-free"} <= k.paths for name in k.names}
_SPARSE_KINDS = frozenset(_CODES[k.compiled] for k in _COMPILED if "sparse" in k.paths)
# Kernels of the squared Euclidean distance (the RBF path's distances) and of the L1 one.
_DISTANCE_KINDS = tuple(_CODES[k.compiled] for k in _COMPILED if k.geometry == "sqdist")
_L1_KINDS = tuple(_CODES[k.compiled] for k in _COMPILED if k.geometry == "l1")
_PATH_KINDS = _DISTANCE_KINDS + _L1_KINDS
# Kind code -> the registry's gamma_degree: how gamma follows a rescaling of the data.
_GAMMA_DEGREE = {_CODES[k.compiled]: k.gamma_degree for k in _COMPILED}
_GAMMA_SLOT = _gram.param_slots()["gamma"]
_LOG_GAMMA_SLOT = _gram.param_slots()["log_gamma"]
# Data whose largest |value| is 2^e, e outside these bounds, is rescaled
# (_rescaled): its squares, summed over the features, would leave the
# dtype's range or lose digits to subnormals (float64: 2^(2 * 448) leaves
# room for 2^127 features; float32: 2^(2 * 48) for 2^30).
_SAFE_EXPONENT = {np.dtype(np.float64): (-448, 448), np.dtype(np.float32): (-40, 48)}
# The kernels whose float32 loops take gamma in float32: a gamma past
# float32's range became inf there, and inf * 0 made the diagonal NaN.
_FLOAT32_GAMMA = frozenset(_CODES[k.compiled] for k in _COMPILED if k.float32_gamma)
_FLOAT32 = np.dtype(np.float32)
_FLOAT32_MAX = float(np.finfo(np.float32).max)
_FLOAT64_MAX = float(np.finfo(np.float64).max)
_FLOAT64_TINY = float(np.finfo(np.float64).tiny)
# kernlab's lim = 1 / (Gamma(nu + 1) 2^nu) overflows beyond nu = 170; fastkern's
# J_nu(r) (2 / r)^nu Gamma(nu + 1) is exact in float64 up to nu = 100 (_gram._bessel).
MAX_BESSEL_ORDER = _registry.get("bessel").param("order").high

# Docstring fragments shared by the Gram functions: ``@name@`` in a docstring
# is replaced by _DOC[name] (see _doc).
_DOC = {
    "XY": """X : {array-like, sparse matrix} of shape (n_samples_X, n_features)
    First input.  float32 gives a float32 result, any other numeric dtype float64.
Y : {array-like, sparse matrix} of shape (n_samples_Y, n_features), default=None
    Second input; None means X.""",
    "XY_dense": """X : array-like of shape (n_samples_X, n_features)
    First input (dense only: a sparse matrix raises TypeError).  float32 gives
    a float32 result, any other numeric dtype float64.
Y : array-like of shape (n_samples_Y, n_features), default=None
    Second input; None means X.""",
    "out": """out : ndarray of shape (n_samples_X, n_samples_Y), default=None
    C-contiguous, aligned, writeable array of the result's dtype, sharing no
    memory with the inputs, filled and returned; nothing else of size
    n_samples_X x n_samples_Y is allocated.
n_threads : int, default=None
    OpenMP threads; None means the default (OMP_NUM_THREADS, else the CPUs
    available to this process, capped by its CPU quota).""",
    "path": """path : {None, "direct", "dot", "blas"}, default=None
    None chooses by the number of features (``tile_path``): the fused
    distance loop for narrow data, then inner products of centred rows
    on fastkern's register tiles, then by BLAS; "direct", "dot" or
    "blas" force one (for tests).""",
    "K": """Returns
-------
K : ndarray of shape (n_samples_X, n_samples_Y)
    The Gram matrix, ``out`` when it was given.""",
}


def _indented(text, indent):
    """text with indent before each non-empty line (a docstring fragment in place)."""
    return "\n".join((indent + line) if line else line for line in text.split("\n"))


def _doc(function):
    """Replace each ``@name@`` line of the docstring by the fragment _DOC[name]."""
    def sub(match):
        return _indented(_DOC[match.group(2)], match.group(1))

    function.__doc__ = re.sub(r"^( *)@(\w+)@$", sub, function.__doc__, flags=re.M)
    return function


# The Euclidean kernels' paths by the number of features d (tile_path).  The
# fused distance loop subtracts coordinates (exact whatever the offset) and is
# the fastest for narrow data: float64 below DOT_MIN_FEATURES, float32 up to
# DIRECT_MAX_FEATURES (its vectors hold twice the values).  Above, inner
# products of centred rows: on fastkern's register tiles up to
# DOT_MAX_FEATURES, by dgemm beyond.  The crossovers
# come from side-by-side timings (docs/developer/performance_history.rst).
DIRECT_MAX_FEATURES = 32
DOT_MIN_FEATURES = 12
DOT_MAX_FEATURES = 64
# The dot tiles first centre and transpose the rows of both inputs, which
# costs about what a 256-row block of the Gram does: smaller calls, such as
# KernelRidge's panels of 128 rows, are faster on the other paths.
DOT_MIN_ROWS = 512
# The Gram of one input with itself centres and transposes it once, and is
# faster on the dot tiles than on dgemm at any size above
# DIRECT_MAX_FEATURES (1 thread, 50 to 400 rows, d = 40 to 64: 0.74-0.92x
# the time in float32 and float64), and than the distance loop from
# SQUARE_DOT_MIN_ROWS rows (400 rows: d = 12 1.01x, 16 0.96x, 24 0.85x,
# 32 0.77x; 200 rows: 0.99-1.11x).
SQUARE_DOT_MIN_ROWS = 400


def tile_path(kind, n_features, dtype=np.float64, n_rows=None, square=False):
    """Tell which loop computes a kernel code's Gram tiles.

    Parameters
    ----------
    kind : int
        A kernel code of the compiled tile loops (a value of ``KERNEL_CODES``, or
        one of the distance kernels' private codes).
    n_features : int
        Number of features of the input.
    dtype : dtype, default=np.float64
        The input's dtype (float32 or float64 once converted).
    n_rows : int, default=None
        The smaller of the two inputs' numbers of rows; None means large.
    square : bool, default=False
        Whether the Gram is of one input with itself (Y None), whose dot
        tiles centre that input once: then ``SQUARE_DOT_MIN_ROWS`` rows take
        the dot tiles where the distance loop would run (in float64), and
        fewer rows take them where dgemm would.

    Returns
    -------
    path : {"direct", "dot", "blas"}
        "direct", the fused distance loop: the Laplacian (L1) kernel always,
        and the kernels of the Euclidean distance (RBF, Laplacian L2, Bessel)
        below ``DOT_MIN_FEATURES`` features in float64 (up to
        ``DIRECT_MAX_FEATURES`` with fewer than ``DOT_MIN_ROWS`` rows) and up
        to ``DIRECT_MAX_FEATURES`` in float32.  "dot", the Euclidean kernels'
        inner products of centred rows on fastkern's register tiles (instead
        of dgemm, whose packing outweighs its short sums on narrow data; the
        BLAS path's accuracy rule), for the rest up to ``DOT_MAX_FEATURES``
        features when both inputs have at least ``DOT_MIN_ROWS`` rows.
        "blas" otherwise.
    """
    if kind in _L1_KINDS:
        return "direct"
    if kind not in _DISTANCE_KINDS:
        return "blas"
    if square:
        min_rows = 0 if n_features > DIRECT_MAX_FEATURES else SQUARE_DOT_MIN_ROWS
    else:
        min_rows = DOT_MIN_ROWS
    few_rows = n_rows is not None and n_rows < min_rows
    if n_features <= DIRECT_MAX_FEATURES and (dtype == np.float32 or few_rows):
        return "direct"
    if n_features < DOT_MIN_FEATURES:
        return "direct"
    return "dot" if n_features <= DOT_MAX_FEATURES and not few_rows else "blas"


def uses_direct_path(kind, n_features, dtype=np.float64, n_rows=None):
    """Tell whether a kernel code is computed by the fused distance loop rather than BLAS.

    Parameters
    ----------
    kind : int
        A kernel code of the compiled tile loops (a value of ``KERNEL_CODES``, or
        one of the distance kernels' private codes).
    n_features : int
        Number of features of the input.
    dtype : dtype, default=np.float64
        The input's dtype (float32 or float64 once converted).
    n_rows : int, default=None
        The smaller of the two inputs' numbers of rows; None means large.

    Returns
    -------
    bool
        Whether ``tile_path`` gives "direct".
    """
    return tile_path(kind, n_features, dtype, n_rows) == "direct"


def compiled_params(kdef, params, n_features):
    """The parameter array the compiled loops read for a registry kernel.

    Parameters
    ----------
    kdef : fastkern._registry.KernelDef
        A kernel with a compiled map.
    params : mapping
        Its parameters as its Gram function takes them (missing ones at their
        default; None resolved, gamma=None with ``n_features``).
    n_features : int or None
        Columns of the data.

    Returns
    -------
    ndarray of float64
        ``fastkern._gram.pack_params`` of the registry's numbers.
    """
    return _gram.pack_params(kdef.compiled_numbers(params, n_features))


def _compute(X, Y, kind, params, *, out, n_threads, path=None):
    """Validated, dispatched call into the Cython tile loop.

    params: the kernel's parameter array (compiled_params).  path: None
    chooses; "direct" or "blas" force a path (tests exercise both).
    """
    # The kernels without a sparse loop: check_pair (in _run) rejects a sparse X or Y.
    if kind in _SPARSE_KINDS and (is_sparse(X) or (Y is not None and is_sparse(Y))):
        if path is not None:
            raise ValueError("path applies to dense input only; sparse input has one path")
        return _run_sparse(X, Y, kind, params, out, n_threads)
    # _features, not X.shape: X is not validated yet (it may be a list or 1-D).
    if path is None:
        rows = min(_rows(X), _rows(X if Y is None else Y))
        path = tile_path(kind, _features(X), getattr(X, "dtype", None), rows,
                         square=Y is None)
    elif path not in ("direct", "dot", "blas"):
        raise ValueError(f"path must be None, 'direct', 'dot' or 'blas', got {path!r}")
    elif kind in _L1_KINDS and path != "direct":
        raise ValueError("the Laplacian (L1) kernel has only the direct path")
    elif kind not in _PATH_KINDS and path != "blas":
        names = [k.name for k in _COMPILED if _CODES[k.compiled] in _PATH_KINDS]
        raise ValueError(f"only the kernels {names} have a {path} path")
    return _run(X, Y, kind, params, out, n_threads, path)


def _registered(name, X, Y, params, out, n_threads, path=None):
    """The Gram of a compiled registry kernel: its parameters checked and resolved by
    ``fastkern._registry`` (None gamma: 1 / n_features of X as given), then _compute."""
    kdef = _registry.get(name)
    return _compute(X, Y, _CODES[kdef.compiled], compiled_params(kdef, params, _features(X)),
                    out=out, n_threads=n_threads, path=path)


def _output(out, shape, dtype, inputs, n_threads):
    """The checked out=, or a new matrix whose pages all threads fault in."""
    if out is not None:
        return check_out(out, shape, dtype, inputs=inputs)
    out = check_out(None, shape, dtype)
    if n_threads > 1:
        _gram.first_touch(out, n_threads)
    return out


_read_back = contextvars.ContextVar("fastkern_read_back", default=False)
# Where the last-level cache's size cannot be read: a small laptop's.
_FALLBACK_CACHE_BYTES = 16 << 20


def read_back():
    """Keep the Grams computed within this block in the cache.

    A Gram of at most half the last-level cache is written with ordinary
    stores instead of streamed past the cache: for the estimators' own
    Grams, which the next step reads at once (centring, a Cholesky
    factorisation).  Streaming stores skip the read of each line before it
    is written, which is why the Gram functions use them: they halve the
    memory traffic of a Gram the caller keeps.  But a streamed Gram is read
    back from memory, while one that fits in the cache is read from there
    (performance_history, "Small and mid sizes"); one that does not fit
    would cost the skipped reads for nothing.

    Returns
    -------
    context : context manager
        The block's setting; it ends with the block, whatever raised.
    """
    return _setting(_read_back, True)


# Outputs up to this size are written with ordinary stores even when nobody
# reads them back: streaming them past the cache cost more than it saved.
# RBF Gram alone, one thread, cached / streamed time (2-core Xeon, 2 MB L2
# per core): 0.82-0.97 at N = 100-400 (78 KB-1.25 MB; d = 8 and 64),
# 1.05-1.14 at 500 (2 MB) and 1.18-1.30 at 1000 (8 MB).
SMALL_OUTPUT_BYTES = 1 << 20


def _cached(nbytes):
    return nbytes <= SMALL_OUTPUT_BYTES or (_read_back.get() and nbytes <= _read_back_limit())


@functools.lru_cache(maxsize=None)
def _read_back_limit():
    size = last_level_cache_bytes()
    return (size or _FALLBACK_CACHE_BYTES) // 2


def last_level_cache_bytes(cache_dir="/sys/devices/system/cpu/cpu0/cache"):
    """Read the size of CPU 0's largest data or unified cache from Linux's sysfs.

    Parameters
    ----------
    cache_dir : str, default="/sys/devices/system/cpu/cpu0/cache"
        The directory of the CPU's ``index*`` cache entries.

    Returns
    -------
    size : int or None
        The largest size; None where it cannot be read (not Linux, no sysfs).
    """
    largest = None
    try:
        for entry in os.listdir(cache_dir):
            if not entry.startswith("index"):
                continue
            with open(os.path.join(cache_dir, entry, "type"), encoding="ascii") as f:
                if f.read().strip() == "Instruction":
                    continue
            with open(os.path.join(cache_dir, entry, "size"), encoding="ascii") as f:
                text = f.read().strip()
            scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
            size = int(text[:-1] if scale > 1 else text) * scale
            largest = size if largest is None else max(largest, size)
    except (OSError, ValueError):
        return None
    return largest


def _range_exponent(largest, dtype):
    """e with largest = m 2^e (0.5 <= m < 1) when e is outside the dtype's
    _SAFE_EXPONENT bounds, else 0."""
    if not largest:
        return 0
    e = math.frexp(largest)[1]
    low, high = _SAFE_EXPONENT[dtype]
    return e if e < low or e > high else 0


def _scaled_rows(A, e):
    """A 2^-e, exactly (a power of two; sparse: new data, the same index arrays)."""
    if is_sparse(A):
        return type(A)((np.ldexp(A.data, np.int32(-e)), A.indices, A.indptr),
                       shape=A.shape, copy=False)
    return np.ldexp(A, np.int32(-e))


def _rescaled(kind, X, Y, symmetric, params, largest):
    """(X, Y, params) giving the same Gram as the arguments, X and Y brought
    near 1 by a power of two where their squares would leave their dtype's
    range (float64 rbf on values of 1e154: the squared distances overflowed;
    float32 on 2e19 likewise, on 1e-20 they underflowed), with gamma times
    2^(gamma_degree e) (_registry.KernelDef.gamma_degree); the arguments
    themselves for other data, for kernels that are not rescaled and where
    the new gamma would leave float64's range (then the kernel is 0 or 1 at
    the data's scale anyway).  Raises ValueError for float32 data whose
    float32 loops would take a gamma past float32's range (_FLOAT32_GAMMA)."""
    degree = _GAMMA_DEGREE.get(kind, 0)
    if not degree:
        return X, Y, params
    e = _range_exponent(largest, X.dtype)
    in_float32 = kind in _FLOAT32_GAMMA and X.dtype == _FLOAT32
    if not (e or in_float32):
        return X, Y, params
    gamma = params[_GAMMA_SLOT]
    high = _FLOAT32_MAX if in_float32 else _FLOAT64_MAX
    if e:
        with np.errstate(over="ignore", under="ignore"):
            scaled = np.ldexp(gamma, degree * e)
        if not 0.0 < gamma < np.inf or _FLOAT64_TINY <= scaled <= high:
            params = params.copy()
            params[_GAMMA_SLOT] = scaled
            params[_LOG_GAMMA_SLOT] += degree * e * math.log(2.0)
            X = _scaled_rows(X, e)
            Y = X if symmetric else _scaled_rows(Y, e)
    if in_float32 and params[_GAMMA_SLOT] > high:
        raise ValueError(f"gamma={gamma:.6g} is past float32's range at the scale of the "
                         "data (float32 data is computed in float32): pass float64 data")
    return X, Y, params


def tile_scale(kind, X, params, largest):
    """Bring rows near 1 by a power of two for the matrix-free tile loops.

    The same rescaling as the Gram functions' (:func:`_rescaled`), for
    ``fastkern._operator``: rows whose squares would leave the dtype's range
    are multiplied by 2^-e and gamma by 2^(gamma_degree e), which gives the
    same kernel values.

    Parameters
    ----------
    kind : int
        The compiled kernel's code.
    X : ndarray of shape (n_samples, n_features)
        Dense rows.
    params : ndarray
        The compiled kernel's parameters.
    largest : float
        The largest |value| of X and of every row X will meet.

    Returns
    -------
    X_scaled : ndarray of shape (n_samples, n_features)
        X 2^-e, or X itself where e is 0.
    params_scaled : ndarray
        The parameters for the scaled rows (params itself where e is 0).
    e : int
        The exponent: rows multiplied with X must be scaled by 2^-e too.
    """
    scaled, _, scaled_params = _rescaled(kind, X, X, True, params, largest)
    if scaled is X:
        return X, params, 0
    return scaled, scaled_params, _range_exponent(largest, X.dtype)


def _tiles_blas(path):
    """BLAS held to one thread where the tiles call gemm: each OpenMP thread
    runs its own single-threaded gemm on a tile."""
    return blas_limit(1) if path == "blas" else contextlib.nullcontext()


def _run(Xin, Yin, kind, params, out, n_threads, path):
    X, Y, symmetric, largest = check_pair(Xin, Yin, largest=True)
    X, Y, params = _rescaled(kind, X, Y, symmetric, params, largest)
    n_threads = check_n_threads(n_threads)
    out = _output(out, (X.shape[0], Y.shape[0]), X.dtype, (X, Y), n_threads)
    # gram() returns a new ndarray over out's buffer; the caller's object is returned.
    with _tiles_blas(path):
        _gram.gram(X, Y, out, kind, params, symmetric, path == "direct", n_threads,
                   path == "dot", progress=report_stage_fraction(), cached=_cached(out.nbytes))
    return out


#: Kernels whose Gram _upper_triangle_gram computes (bounded on finite data, so
#: the half never computed needs no finiteness scan either).
_UPPER_TRIANGLE_KERNELS = {name: k for k in _COMPILED if k.bounded for name in k.names}


class PackedUpperGram:
    """A symmetric n x n float64 matrix kept as its upper triangle, packed: half the memory.

    Rows are grouped in strips of ``fastkern._centering.STRIP_ROWS``; each
    strip keeps its rows from its first row's column to the end
    (``fastkern._centering.packed_layout``), so K[i, j] for j >= i is
    ``data[row_start[i] + j]``.  About n^2 / 2 values: at n = 8000, 256 MB
    instead of 512.  ``fastkern.centering.CentredGram`` multiplies by it
    (``_centering.gram_matmat_packed``) as fast as by the full matrix, each
    strip being a block of rows with its own leading dimension.

    Parameters
    ----------
    n : int
        Rows (and columns) of the matrix.
    n_threads : int, default=None
        Threads that fault the new buffer's pages in; None means the default
        (OMP_NUM_THREADS, else the CPUs available to this process, capped by
        its CPU quota).

    Attributes
    ----------
    data : ndarray of shape (size,)
        The packed values; where no strip keeps an entry, none is stored.
    row_start : ndarray of shape (n,)
        Where each row's column 0 would be in ``data``.
    shape : tuple of int
        (n, n).
    dtype : numpy.dtype
        float64.
    """

    dtype = np.dtype(np.float64)

    def __init__(self, n, n_threads=None):
        self.row_start, size = _centering.packed_layout(n)
        self.shape = (n, n)
        # Whole pages of 512 values, so that first_touch can share them out.
        pages = np.empty((max(1, -(-size // 512)), 512))
        n_threads = check_n_threads(n_threads)
        if n_threads > 1:
            _gram.first_touch(pages, n_threads)
        self.data = pages.reshape(-1)[:size]

    @property
    def nbytes(self):
        """Return the bytes of the packed values."""
        return self.data.nbytes

    def columns(self, index):
        """Gather columns of the matrix (its rows: it is symmetric) from the triangle.

        Parameters
        ----------
        index : array-like of int
            Column numbers, each in [0, n).

        Returns
        -------
        columns : ndarray of shape (n, len(index))
            K[:, index].
        """
        n = self.shape[0]
        index = np.asarray(index, dtype=np.intp)
        out = np.empty((n, index.size))
        for c, r in enumerate(index):
            if not 0 <= r < n:
                raise ValueError(f"column {r} is out of range for n={n}")
            # Above the diagonal, column r of row i; from it, row r itself.
            out[:r, c] = self.data[self.row_start[:r] + r]
            out[r:, c] = self.data[self.row_start[r] + r:self.row_start[r] + n]
        return out

    def toarray(self):
        """Return the full symmetric matrix.

        Returns
        -------
        K : ndarray of shape (n, n)
            A new array.
        """
        return self.columns(np.arange(self.shape[0]))


def _upper_triangle_gram(X, kernel, params=None, *, n_threads=None):
    """k(X, X) as a PackedUpperGram (the tiles on and above the diagonal), or None.

    For an operator that multiplies by the upper triangle alone
    (``fastkern.centering.CentredGram``).  The full Gram computes the same
    tiles and writes each one a second time, transposed, below the diagonal
    (N = 8000, RBF, d = 16, 2 threads: 41 ms against 52 ms, best of 8, for
    the upper triangle in a full matrix); packed, the matrix also takes half
    the memory, and half the page faults of a new buffer.  X: dense float64
    (others, and kernels outside _UPPER_TRIANGLE_KERNELS, give None: use the
    full Gram).  params: the kernel's, as its function takes them (None: defaults).
    """
    kdef = _UPPER_TRIANGLE_KERNELS.get(kernel)
    if kdef is None or is_sparse(X) or np.asarray(X).dtype != np.float64:
        return None
    X, _, _, largest = check_pair(X, None, largest=True)
    n_threads = check_n_threads(n_threads)
    d = X.shape[1]
    kind = _CODES[kdef.compiled]
    X, _, kparams = _rescaled(kind, X, X, True, compiled_params(kdef, params or {}, d), largest)
    n = X.shape[0]
    path = tile_path(kind, d, n_rows=n, square=True)
    K = PackedUpperGram(n, n_threads)
    with _tiles_blas(path):
        _gram.gram(X, X, np.empty((0, 0)), kind, kparams, True, path == "direct", n_threads,
                   path == "dot", K.data, K.row_start, _centering.STRIP_ROWS,
                   report_stage_fraction(), cached=_cached(K.data.nbytes))
    return K


def _run_sparse(Xin, Yin, kind, params, out, n_threads, pair=None):
    X, Y, symmetric = check_pair_sparse(Xin, Yin) if pair is None else pair
    if _GAMMA_DEGREE.get(kind, 0):
        X, Y, params = _rescaled(kind, X, Y, symmetric, params, _largest_stored(X, Y))
    n_threads = check_n_threads(n_threads)
    out = _output(out, (X.shape[0], Y.shape[0]), X.dtype,
                  (X.data,) if symmetric else (X.data, Y.data), n_threads)
    # Each OpenMP thread runs its own single-threaded gemm on a tile.
    with blas_limit(1):
        _sparse.gram(X, Y, out, kind, params, symmetric, n_threads)
    return out


def _largest_stored(X, Y):
    """The largest |stored value| of the sparse X and Y (validated: finite)."""
    return max(_sparse.max_abs(X.data), _sparse.max_abs(Y.data))


def _rows(X):
    """X's number of rows as given (before validation: 0 when it has none)."""
    shape = np.shape(X)
    return shape[0] if len(shape) else 0


def _features(X):
    shape = np.shape(X)
    return shape[1] if len(shape) == 2 and shape[1] > 0 else 1


def _sparse_product(X, Y, dense_output, out):
    """Whether to return scipy's sparse X @ Y.T (both inputs sparse, dense_output False)."""
    if dense_output or not is_sparse(X) or (Y is not None and not is_sparse(Y)):
        return False
    if out is not None:
        raise ValueError("out= needs dense_output=True (the result would be sparse)")
    return True


@_doc
def linear_kernel(X, Y=None, dense_output=True, *, out=None, n_threads=None):
    """Compute the linear kernel K(x, y) = <x, y>.

    Parameters
    ----------
    @XY@
    dense_output : bool, default=True
        With X and Y both sparse, False returns scipy's sparse X @ Y.T (as
        scikit-learn); otherwise the result is a dense array.
    @out@

    Returns
    -------
    K : ndarray or sparse matrix of shape (n_samples_X, n_samples_Y)
        The Gram matrix (``out`` when it was given); sparse only when both inputs
        are sparse and ``dense_output=False``.

    Raises
    ------
    ValueError
        If ``out`` is given with ``dense_output=False`` and sparse inputs.

    See Also
    --------
    fastkern.kernels.Linear : The same kernel as a composable object.

    Examples
    --------
    >>> import numpy as np
    >>> from fastkern import linear_kernel
    >>> linear_kernel(np.array([[1.0, 2.0], [3.0, 4.0]]))
    array([[ 5., 11.],
           [11., 25.]])
    """
    if _sparse_product(X, Y, dense_output, out):
        check_n_threads(n_threads)
        X, Y, _ = check_pair_sparse(X, Y)
        return X @ Y.T
    return _registered("linear", X, Y, {}, out, n_threads)


@_doc
def polynomial_kernel(X, Y=None, degree=3, gamma=None, coef0=1, *, out=None, n_threads=None):
    """Compute the polynomial kernel K(x, y) = (gamma <x, y> + coef0)^degree.

    Parameters
    ----------
    @XY@
    degree : float, default=3
        Exponent (>= 1).
    gamma : float, default=None
        Kernel coefficient (>= 0); None means 1 / n_features.
    coef0 : float, default=1
        Constant term.
    @out@

    @K@
    """
    return _registered("poly", X, Y, {"degree": degree, "gamma": gamma, "coef0": coef0}, out,
                       n_threads)


@_doc
def rbf_kernel(X, Y=None, gamma=None, *, out=None, n_threads=None, path=None):
    """Compute the RBF (Gaussian) kernel K(x, y) = exp(-gamma ||x - y||^2).

    Parameters
    ----------
    @XY@
    gamma : float, default=None
        Kernel coefficient (>= 0); None means 1 / n_features.
    @out@
    @path@

    @K@

    See Also
    --------
    fastkern.kernels.RBF : The same kernel as a composable object.

    Examples
    --------
    >>> import numpy as np
    >>> from fastkern import rbf_kernel
    >>> rbf_kernel(np.array([[0.0], [1.0]]), gamma=1.0).round(4)
    array([[1.    , 0.3679],
           [0.3679, 1.    ]])
    """
    return _registered("rbf", X, Y, {"gamma": gamma}, out, n_threads, path)


def _normalized_rows(A, e=0):
    """A copy of A with rows of unit L2 norm (zero rows stay zero), as sklearn's
    normalize; the norms of A 2^-e (_range_exponent: float32 values of 2e19
    had infinite norms, of 1e-23 zero ones, and the rows became 0)."""
    if e:
        A = _scaled_rows(A, e)
    if is_sparse(A):
        norms = np.sqrt(_sparse.row_sq_norms(A.data, A.indptr, 1))
        norms[norms == 0] = 1
        # New data, the same (read-only) index arrays: O(nnz) values only.
        data = A.data / np.repeat(norms, np.diff(A.indptr)).astype(A.dtype, copy=False)
        return type(A)((data, A.indices, A.indptr), shape=A.shape, copy=False)
    norms = np.sqrt(np.einsum("ij,ij->i", A, A))
    norms[norms == 0] = 1
    return A / norms[:, None]


def _sparse_interface(K):
    """scikit-learn >= 1.9 returns its sparse results in the configured container."""
    import scipy.sparse as sp
    import sklearn

    interface = sklearn.get_config().get("sparse_interface")
    if interface == "spmatrix" and not sp.isspmatrix(K):
        return sp.csr_matrix(K)
    if interface == "sparray" and sp.isspmatrix(K):
        return sp.csr_array(K)
    return K


@_doc
def cosine_similarity(X, Y=None, dense_output=True, *, out=None, n_threads=None):
    """Compute the cosine similarity K(x, y) = <x, y> / (|x| |y|).

    As ``sklearn.metrics.pairwise.cosine_similarity``.  Rows are L2-normalised
    (copies; zero rows stay zero, so their similarity is 0) and their linear kernel
    is computed natively, dense or sparse.

    Parameters
    ----------
    @XY@
    dense_output : bool, default=True
        With X and Y both sparse, False returns a sparse result.
    @out@

    Returns
    -------
    K : ndarray or sparse matrix of shape (n_samples_X, n_samples_Y)
        The similarities (``out`` when it was given); sparse only when both
        inputs are sparse and ``dense_output=False``.
    """
    n_threads = check_n_threads(n_threads)
    if is_sparse(X) or (Y is not None and is_sparse(Y)):
        sparse_out = _sparse_product(X, Y, dense_output, out)
        X, Y, symmetric = check_pair_sparse(X, Y)
        e = _range_exponent(_largest_stored(X, Y), X.dtype)
        Xn = _normalized_rows(X, e)
        Yn = Xn if symmetric else _normalized_rows(Y, e)
        if sparse_out:
            return _sparse_interface(Xn @ Yn.T)
        return _run_sparse(Xn, Yn, _LINEAR, _NO_PARAMS, out, n_threads,
                           pair=(Xn, Yn, symmetric))
    X, Y, symmetric, largest = check_pair(X, Y, largest=True)
    e = _range_exponent(largest, X.dtype)
    Xn = _normalized_rows(X, e)
    Yn = Xn if symmetric else _normalized_rows(Y, e)
    return _run(Xn, Yn, _LINEAR, _NO_PARAMS, out, n_threads, "blas")


@_doc
def laplacian_l2_kernel(X, Y=None, gamma=None, *, out=None, n_threads=None, path=None):
    """Compute the Laplacian kernel of the Euclidean distance, exp(-gamma ||x - y||_2).

    kernlab's ``laplacedot(sigma)`` with ``sigma = gamma``; ``laplacian_kernel``
    is scikit-learn's, of the L1 distance.

    Parameters
    ----------
    @XY@
    gamma : float, default=None
        Kernel coefficient (> 0); None means 1 / n_features (as scikit-learn's
        distance kernels; kernlab's default is sigma = 1).
    @out@
    @path@

    @K@

    Notes
    -----
    The squared distances are the RBF kernel's (fused loop for narrow data, BLAS
    with centring and recomputation of cancelled entries otherwise; see
    fastkern._gram), then mapped to exp(-gamma sqrt(d2)).  kernlab rounds the
    squared distance to 9 decimals first; fastkern does not.
    """
    return _registered("laplacian_l2", X, Y, {"gamma": gamma}, out, n_threads, path)


@_doc
def bessel_kernel(X, Y=None, gamma=1.0, order=1, degree=1, *, out=None, n_threads=None,
                  path=None):
    """Compute kernlab's Bessel kernel (Gamma(nu + 1) (2 / r)^nu J_nu(r))^degree.

    Here r = gamma ||x - y||_2 and nu = order: kernlab's
    ``besseldot(sigma, order, degree)`` with ``sigma = gamma``.

    Parameters
    ----------
    @XY@
    gamma : float, default=1.0
        Scale of the distance (> 0, kernlab's sigma); None means 1.0 as well.
    order : float, default=1
        The order nu, in [0, 100].  The kernel is positive definite on R^d when
        nu >= d / 2 - 1 (Gneiting's Bessel family); below that, for instance
        kernlab's default nu = 1 with d > 4 features, its Gram matrices can be
        indefinite.
    degree : int, default=1
        The power, an integer >= 1 (J_nu changes sign, so only integer powers are
        real).
    @out@
    @path@

    @K@

    Notes
    -----
    kernlab's ``kernelMatrix`` computes J_nu(r) r^-nu divided by its value at
    r = 0, 1 / (Gamma(nu + 1) 2^nu), so that K(x, x) = 1.  J_nu is the Bessel
    function of the first kind (scipy.special.jv).  kernlab returns exactly 1 for
    r < 1e-4 (a relative error up to 2.5e-9) and rounds the squared distance to 9
    decimals; fastkern uses the power series near 0 instead and no rounding.

    The squared distances come from the RBF kernel's loops, as in
    ``laplacian_l2_kernel``; each value then costs one scipy ``jv`` call.
    """
    return _registered("bessel", X, Y, {"gamma": gamma, "order": order, "degree": degree},
                       out, n_threads, path)


def _featurewise_gram(X, Y, name, params, *, nonnegative=False, out, n_threads):
    """Validated call into fastkern._featurewise (dense input only) for the
    registry's feature-wise kernel ``name`` and its parameters."""
    kdef = _registry.get(name)
    kparams = compiled_params(kdef, params, None)
    X, Y, symmetric = check_pair(X, Y)
    if nonnegative:
        # As scikit-learn's chi2 kernels: same messages, same order of checks.
        if X.min() < 0:
            raise ValueError("X contains negative values.")
        if not symmetric and Y.min() < 0:
            raise ValueError("Y contains negative values.")
    n_threads = check_n_threads(n_threads)
    out = _output(out, (X.shape[0], Y.shape[0]), X.dtype, (X, Y), n_threads)
    _featurewise.gram(X, Y, out, _CODES[kdef.compiled], kparams, symmetric, n_threads)
    return out


@_doc
def anova_kernel(X, Y=None, gamma=1.0, degree=1, *, out=None, n_threads=None):
    """Compute kernlab's ANOVA kernel (sum_k exp(-gamma (x_k - y_k)^2))^degree.

    kernlab's ``anovadot``.

    Parameters
    ----------
    @XY_dense@
    gamma : float, default=1.0
        The scale, kernlab's sigma (> 0); None means kernlab's default 1.0.
    degree : int, default=1
        An integer >= 1 (kernlab's default 1; the estimators' own ``degree``
        parameter, default 3, is passed when they use this kernel by name).
    @out@

    @K@
    """
    return _featurewise_gram(X, Y, "anova", {"gamma": gamma, "degree": degree}, out=out,
                             n_threads=n_threads)


@_doc
def spline_kernel(X, Y=None, *, out=None, n_threads=None):
    """Compute kernlab's spline kernel, the infinite linear spline kernel.

    K(x, y) = prod_k (1 + x_k y_k + x_k y_k m_k - (x_k + y_k) m_k^2 / 2 + m_k^3 / 3)
    with m_k = min(x_k, y_k): kernlab's ``splinedot``.

    Parameters
    ----------
    @XY_dense@
    @out@

    @K@

    Notes
    -----
    Positive definite on non-negative data (where it is derived); any finite
    input is accepted, as by kernlab.  A product of d factors: on wide or
    large-valued data it overflows as kernlab's does.
    """
    return _featurewise_gram(X, Y, "spline", {}, out=out, n_threads=n_threads)


@_doc
def additive_chi2_kernel(X, Y=None, *, out=None, n_threads=None):
    """Compute the additive chi-squared kernel -sum_k (x_k - y_k)^2 / (x_k + y_k).

    As scikit-learn's additive_chi2_kernel.  Terms with x_k + y_k = 0 count 0.
    Only conditionally positive definite (the negative of a distance).

    Parameters
    ----------
    @XY_dense@
    @out@

    @K@

    Raises
    ------
    ValueError
        If X or Y has negative values (as scikit-learn).
    TypeError
        If X or Y is sparse.
    """
    return _featurewise_gram(X, Y, "additive_chi2", {}, nonnegative=True, out=out,
                             n_threads=n_threads)


@_doc
def chi2_kernel(X, Y=None, gamma=1.0, *, out=None, n_threads=None):
    """Compute the chi-squared kernel exp(-gamma sum_k (x_k - y_k)^2 / (x_k + y_k)).

    As scikit-learn's chi2_kernel.

    Parameters
    ----------
    @XY_dense@
    gamma : float, default=1.0
        Kernel coefficient (> 0, default 1.0, as scikit-learn).
    @out@

    @K@

    Raises
    ------
    ValueError
        If X or Y has negative values.
    """
    return _featurewise_gram(X, Y, "chi2", {"gamma": gamma}, nonnegative=True, out=out,
                             n_threads=n_threads)


@_doc
def histogram_intersection_kernel(X, Y=None, *, out=None, n_threads=None):
    """Compute the histogram intersection kernel K(x, y) = sum_k min(x_k, y_k).

    Positive definite on non-negative data, which is required.  Named
    "histogram_intersection" in ``pairwise_kernels`` and the estimators.

    Parameters
    ----------
    @XY_dense@
    @out@

    @K@

    Raises
    ------
    ValueError
        If X or Y has negative values.
    """
    return _featurewise_gram(X, Y, "histogram_intersection", {}, nonnegative=True, out=out,
                             n_threads=n_threads)


def _generated_function(kdef):
    """The Gram function of a compiled registry kernel that has none written above.

    Its signature is ``name(X, Y=None, <params with defaults>, *, out=None,
    n_threads=None[, path=None])``, its docstring assembled from the
    registry entry and the shared fragments.
    """
    P = inspect.Parameter
    names = kdef.param_names
    # The distance kernels choose among paths (the L1 one has only the direct path).
    takes_path = kdef.geometry == "sqdist"
    signature = inspect.Signature(
        [P("X", P.POSITIONAL_OR_KEYWORD), P("Y", P.POSITIONAL_OR_KEYWORD, default=None)]
        + [P(p.name, P.POSITIONAL_OR_KEYWORD, default=p.default) for p in kdef.params]
        + [P("out", P.KEYWORD_ONLY, default=None), P("n_threads", P.KEYWORD_ONLY, default=None)]
        + ([P("path", P.KEYWORD_ONLY, default=None)] if takes_path else []))

    def function(*args, **kwargs):
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        return _registered(kdef.name, a["X"], a["Y"], {n: a[n] for n in names}, a["out"],
                           a["n_threads"], a.get("path"))

    lines = [f"Compute the {kdef.title} kernel {kdef.formula}.", ""]
    if kdef.description:
        lines += textwrap.wrap(kdef.description, 79) + [""]
    lines += ["Parameters", "----------", "@XY@" if "sparse" in kdef.paths else "@XY_dense@"]
    lines += [p.describe() for p in kdef.params]
    lines += ["@out@"] + (["@path@"] if takes_path else []) + ["", "@K@"]
    if kdef.class_name:
        lines += ["", "See Also", "--------",
                  f"fastkern.kernels.{kdef.class_name} : The same kernel as a composable object."]
    body = "\n".join(lines).replace("\n", "\n    ")
    function.__doc__ = body + "\n    "
    function.__name__ = function.__qualname__ = kdef.function
    function.__module__ = __name__
    function.__signature__ = signature
    return _doc(function)


for _kdef in _COMPILED:
    if _kdef.function not in globals():
        globals()[_kdef.function] = _generated_function(_kdef)
    if _kdef.function not in __all__:
        __all__.append(_kdef.function)
del _kdef

_FUNCTIONS = {name: globals()[k.function] for k in _registry.KERNELS for name in k.names}

#: Parameters each string kernel accepts (as sklearn's KERNEL_PARAMS).
KERNEL_PARAMS = {name: k.param_names for k in _registry.KERNELS for name in k.names}


class KernelBase:
    """The call protocol of fastkern's kernel objects: ``k(X, Y=None, *, out=None, n_threads=None)``.

    ``fastkern.kernels.Kernel`` (which adds the algebra) derives from it.  It
    lives here so that ``pairwise_kernels`` can tell a kernel object (called on
    whole arrays) from a scikit-learn callable (called on pairs of rows)
    without importing the module of kernel objects, which builds on this one.
    """

    def __call__(self, X, Y=None, *, out=None, n_threads=None):
        """Compute the Gram matrix k(X, Y) (each kernel object implements it).

        Parameters
        ----------
        X : {array-like, sparse matrix} of shape (n_samples_X, n_features)
            First input.
        Y : {array-like, sparse matrix} of shape (n_samples_Y, n_features), default=None
            Second input; None means X.
        out : ndarray of shape (n_samples_X, n_samples_Y), default=None
            C-contiguous array of the result's dtype, filled and returned.
        n_threads : int, default=None
            OpenMP threads; None means the default.

        Returns
        -------
        K : ndarray of shape (n_samples_X, n_samples_Y)
            The Gram matrix, ``out`` when it was given.
        """
        raise NotImplementedError


def pairwise_kernels(X, Y=None, metric="linear", *, filter_params=False, n_jobs=None,
                     out=None, n_threads=None, **kwds):
    """Compute the kernel between arrays X and Y.

    As ``sklearn.metrics.pairwise.pairwise_kernels``.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples_X, n_features)
        First input, or the kernel itself with ``metric="precomputed"``.
    Y : {array-like, sparse matrix} of shape (n_samples_Y, n_features), default=None
        Second input; None means X.
    metric : str, Kernel or callable, default="linear"
        One of fastkern's string kernels (the names of ``KERNEL_PARAMS``:
        scikit-learn's "linear", "poly"/"polynomial", "rbf", "laplacian",
        "sigmoid", "cosine", "chi2", "additive_chi2", kernlab's
        "laplacian_l2", "anova", "bessel", "spline", and more, each defined
        in ``fastkern._registry``), "precomputed" (X is the kernel; it must be
        square when Y is None), a fastkern kernel object, any other
        scikit-learn kernel name or a callable k(x, y) on two rows; the last
        two are computed by scikit-learn.
    filter_params : bool, default=False
        Drop the keywords in ``kwds`` that the kernel does not take
        (``KERNEL_PARAMS``).
    n_jobs : int, default=None
        Passed to scikit-learn for the kernels it computes; fastkern's own use
        ``n_threads``.
    out : ndarray of shape (n_samples_X, n_samples_Y), default=None
        C-contiguous, aligned, writeable array of the result's dtype, sharing no
        memory with the inputs, filled and returned.
    n_threads : int, default=None
        OpenMP threads; None means the default (OMP_NUM_THREADS, else the CPUs
        available to this process, capped by its CPU quota).
    **kwds : dict
        Parameters of the kernel (``KERNEL_PARAMS[metric]``).

    Returns
    -------
    K : ndarray of shape (n_samples_X, n_samples_Y)
        The Gram matrix, ``out`` when it was given.

    Raises
    ------
    ValueError
        If ``metric`` is unknown, or a precomputed X does not have the shape
        (n_samples_X, n_samples_Y).

    Examples
    --------
    >>> import numpy as np
    >>> from fastkern import pairwise_kernels
    >>> pairwise_kernels(np.eye(2), metric="poly", degree=2, gamma=1.0, coef0=0.0)
    array([[1., 0.],
           [0., 1.]])
    """
    if isinstance(metric, KernelBase):
        return metric(X, Y, out=out, n_threads=n_threads)
    if isinstance(metric, str) and metric in _FUNCTIONS:
        if filter_params:
            kwds = {k: v for k, v in kwds.items() if k in KERNEL_PARAMS[metric]}
        return _FUNCTIONS[metric](X, Y, out=out, n_threads=n_threads, **kwds)
    if metric == "precomputed":
        check_n_threads(n_threads)
        return _precomputed(X, Y, out)
    from sklearn.metrics import pairwise as skp

    if not (callable(metric) or metric in skp.PAIRWISE_KERNEL_FUNCTIONS):
        raise ValueError(
            f"Unknown kernel {metric!r}; expected one of {sorted(_FUNCTIONS)}, "
            "'precomputed', a scikit-learn kernel name, a fastkern kernel or a callable"
        )
    check_n_threads(n_threads)
    K = skp.pairwise_kernels(X, Y, metric=metric, filter_params=filter_params,
                             n_jobs=n_jobs, **kwds)
    if out is None:
        return K
    out = check_out(out, K.shape, K.dtype)
    np.copyto(out, K)
    return out


def _precomputed(X, Y, out):
    """X itself (as float), checked as scikit-learn's check_pairwise_arrays(precomputed=True)."""
    from fastkern._validation import check_array_2d, check_sparse_2d, result_dtype

    if is_sparse(X):
        X = check_sparse_2d(X, "X", result_dtype(X), canonical=False)
    else:
        X = check_array_2d(X, "X")
        X = np.asarray(X, dtype=result_dtype(X))
    n_indexed = X.shape[0]
    if Y is not None:
        n_indexed = (Y if is_sparse(Y) else check_array_2d(Y, "Y")).shape[0]
    # Y None means the queries are the indexed samples: X must be square.
    if X.shape[1] != n_indexed:
        raise ValueError(
            f"Precomputed metric requires shape (n_queries, n_indexed). Got {X.shape} "
            f"for {n_indexed} indexed."
        )
    if out is None:
        return X
    out = check_out(out, X.shape, X.dtype,
                    inputs=(X.data,) if is_sparse(X) else (X,))
    if is_sparse(X):
        X.toarray(out=out)
    else:
        np.copyto(out, X)
    return out
