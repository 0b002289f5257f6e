"""Input validation shared by every public entry point.

Everything that could make compiled code misbehave (NaN, wrong ndim, empty
arrays, bad parameters, wrong `out`) is rejected here, before any nogil code
runs, with a message that names the offending argument.
"""
import contextlib
import math
import numbers
import os
import re
import threading
import time

import numpy as np

from fastkern import _gram, _openmp, _sparse
from fastkern._threads import MAX_THREADS, default_threads_now, openmp_threads

# Row-block size for the NaN/inf scan of large arrays: bounds the boolean
# temporary to a few MB instead of one the size of the input.
_FINITE_CHUNK = 1 << 20
# The dtypes _gram.all_finite and _sparse.max_abs scan.
_COMPILED_FINITE = (np.dtype(np.float32), np.dtype(np.float64))


def check_n_threads(n_threads):
    """Normalise n_threads: None means _threads.default_threads_now(); the count
    returned is what fastkern's OpenMP loops may use (_threads.openmp_threads)."""
    if n_threads is None:
        return default_threads_now()
    if type(n_threads) is int and 1 <= n_threads <= MAX_THREADS:
        # The common case without the abstract-class checks below.
        if n_threads > 1:
            _warn_if_serial(n_threads)
        return openmp_threads(n_threads)
    if isinstance(n_threads, (bool, np.bool_)) or not isinstance(n_threads, numbers.Integral):
        raise TypeError(f"n_threads must be None or a positive integer, got {n_threads!r}")
    if n_threads < 1:
        raise ValueError(f"n_threads must be None or a positive integer, got {n_threads}")
    if n_threads > MAX_THREADS:
        raise ValueError(f"n_threads must be at most {MAX_THREADS}, got {n_threads}")
    if n_threads > 1:
        _warn_if_serial(n_threads)
    return openmp_threads(int(n_threads))


_serial_warned = False


def _warn_if_serial(n_threads):
    """Say once per process that a serial build ignores n_threads > 1.

    Not at import: a serial build is reported by the build itself and by
    show_config(), and a user who never asks for threads loses nothing.
    """
    global _serial_warned
    if _serial_warned or _openmp.openmp_enabled():
        return
    _serial_warned = True
    import warnings

    warnings.warn(
        f"fastkern was built without OpenMP: n_threads={n_threads} runs on one thread "
        "(see fastkern.show_config())",
        RuntimeWarning,
        stacklevel=3,
    )


def check_int(value, name, low, *, allow_none=False):
    """An integer >= low (bools rejected); None passes through when allow_none."""
    if value is None and allow_none:
        return None
    kind = "None or an integer" if allow_none else "an integer"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be {kind}, got {value!r}")
    if value < low:
        raise ValueError(f"{name} must be >= {low}, got {value}")
    return int(value)


def check_bool(value, name):
    """True or False (numpy's bools too); anything else is a TypeError naming `name`."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_option(value, name, choices):
    """One of the strings `choices`; anything else is a ValueError listing them."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def check_real(value, name, *, low=None, low_inclusive=True, allow_none=False):
    """A finite real scalar, optionally bounded below; bools are rejected."""
    if type(value) is not float:
        if value is None and allow_none:
            return None
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
            raise TypeError(f"{name} must be a real number, got {value!r}")
        try:
            value = float(value)
        except OverflowError:
            # 10**400: no float64 holds it (float() raised a bare OverflowError).
            raise ValueError(f"{name} must be finite in float64 (magnitude at most "
                             f"{np.finfo(np.float64).max:.6g}), got {str(value)[:20]}...") \
                from None
    if not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if low is not None and (value < low or (value == low and not low_inclusive)):
        op = ">=" if low_inclusive else ">"
        raise ValueError(f"{name} must be {op} {low}, got {value}")
    return value


def _compiled(A):
    """Whether the compiled scans (_gram.all_finite, _sparse.max_abs) take A."""
    return A.dtype in _COMPILED_FINITE and (A.flags.c_contiguous or A.flags.f_contiguous)


def _all_finite(A):
    if _compiled(A):
        # A compiled scan of the values' bits: numpy's sum below and its
        # errstate were a tenth of a 200-row Gram's fixed cost.
        return _gram.all_finite(A.ravel(order="K"))
    # The sum is NaN/inf whenever an element is; only if it is not finite
    # (or overflowed) do we scan in chunks to be sure.
    with np.errstate(over="ignore", invalid="ignore"):
        if np.isfinite(np.sum(A, dtype=np.float64)):
            return True
    # A 1-D array reshapes to a view whatever its strides (a strided y had no shape[1]).
    flat = (A.reshape(-1) if A.ndim == 1 or A.flags.c_contiguous or A.flags.f_contiguous
            else None)
    if flat is not None:
        return all(np.isfinite(flat[i:i + _FINITE_CHUNK]).all()
                   for i in range(0, flat.size, _FINITE_CHUNK))
    rows = max(1, _FINITE_CHUNK // max(1, A.shape[1]))
    return all(np.isfinite(A[i:i + rows]).all() for i in range(0, A.shape[0], rows))


def _check_numeric_2d_nonempty(A, name):
    """Dense or sparse A: a numeric dtype, 2-D, at least one row and column."""
    if A.dtype.kind not in "biuf":
        raise TypeError(f"{name} must be a numeric array, got dtype {A.dtype}")
    if A.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array, got {A.ndim}-D with shape {A.shape}")
    if A.shape[0] == 0 or A.shape[1] == 0:
        raise ValueError(f"{name} is empty (shape {A.shape}); at least one row and one column are needed")


def _as_float(original, A, name):
    """Object, string and pandas nullable (Int64, Float64) data as float64, as
    scikit-learn's check_array converts them (pd.NA becomes NaN)."""
    from sklearn.utils import check_array

    if A.dtype.kind == "O" and any(np.iscomplexobj(v) for v in A.flat[:1000]):
        raise ValueError(f"Complex data not supported in {name}")
    try:
        return check_array(original, dtype=np.float64, ensure_all_finite=False,
                           ensure_2d=False, allow_nd=True, ensure_min_samples=0,
                           ensure_min_features=0)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric: {exc}") from None


def check_float64_range(A, name):
    """Raise ValueError naming `name` if A (array or sparse) has a float dtype
    wider than float64 (long double) holding values past float64's range:
    fastkern computes in float64, where the cast makes them inf (a long
    double 1e400 passed the finiteness checks and gave NaN predictions)."""
    dtype = getattr(A, "dtype", None)
    if dtype is None or dtype.kind != "f" or dtype.itemsize <= 8:
        return
    values = A.data if hasattr(A, "tocsr") else np.asarray(A)
    if values.size and max(values.max(), -values.min()) > np.finfo(np.float64).max:
        raise ValueError(f"{name} holds values past float64's range (largest magnitude "
                         f"{np.format_float_scientific(max(values.max(), -values.min()), 3)}): "
                         "fastkern computes in "
                         "float64")


def scale_exponent(A, bound=400):
    """e with max |A| = m 2^e, 0.5 <= m < 1, when e is outside [-bound, bound]
    (the squares of A's values would leave float64), else 0: A 2^-e, exact,
    has the same ratios with values near 1.  A: dense, or scipy sparse."""
    values = A.data if hasattr(A, "tocsr") else np.asarray(A)
    if not values.size:
        return 0
    e = math.frexp(float(max(values.max(), -values.min())))[1]
    return e if abs(e) > bound else 0


def check_array_2d(A, name, *, finite=True):
    """Return A as a 2-D numeric ndarray (no copy), or raise naming `name`."""
    return _check_array_2d(A, name, finite, False)[0]


def _check_array_2d(A, name, finite, largest):
    """(check_array_2d's A, with ``largest`` the largest |value| of A where
    the finiteness scan can give it (_sparse.max_abs, one scan for both),
    else None)."""
    if hasattr(A, "tocsr") or hasattr(A, "todense"):
        raise TypeError(f"{name} is a sparse matrix; this computation needs a dense array")
    original = A
    A = np.asarray(A)
    if A.dtype.kind == "c":
        raise ValueError(f"Complex data not supported in {name}")
    if A.dtype.kind in "OUS":
        A = _as_float(original, A, name)
    _check_numeric_2d_nonempty(A, name)
    most = None
    if finite and A.dtype.kind == "f":
        if largest and _compiled(A):
            most = _sparse.max_abs(A.ravel(order="K"))
            ok = math.isfinite(most)
        else:
            ok = _all_finite(A)
        if not ok:
            raise ValueError(f"{name} contains NaN or infinity")
    check_float64_range(A, name)
    return A, most


def is_dask_array(X):
    """True for a dask.array (without importing dask)."""
    return type(X).__module__.startswith("dask.") and type(X).__name__ == "Array"


def result_dtype(*arrays):
    """float32 only when every input is float32 (as scikit-learn); else float64."""
    if all(a.dtype == np.float32 for a in arrays if a is not None):
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def check_pair(X, Y, *, largest=False):
    """Validate X (and Y) for a Gram matrix; returns C-contiguous (X, Y, symmetric).

    Y is None, or the very same object as X, means K(X, X): symmetric.
    largest=True adds a fourth value: the largest |value| of X and Y (from
    the finiteness scan where it applies).
    """
    symmetric = Y is None or Y is X
    X, most_x = _check_array_2d(X, "X", True, largest)
    Y, most_y = (X, most_x) if symmetric else _check_array_2d(Y, "Y", True, largest)
    if X.shape[1] != Y.shape[1]:
        raise ValueError(
            f"Incompatible dimension for X and Y matrices: X.shape[1] == {X.shape[1]} "
            f"while Y.shape[1] == {Y.shape[1]}"
        )
    dtype = result_dtype(X, Y)
    X = np.ascontiguousarray(X, dtype=dtype)
    Y = X if symmetric else np.ascontiguousarray(Y, dtype=dtype)
    if not largest:
        return X, Y, symmetric
    # float32 to float64 keeps the values; other conversions are scanned here.
    if most_x is None:
        most_x = _sparse.max_abs(X.ravel())
    if most_y is None:
        most_y = _sparse.max_abs(Y.ravel())
    return X, Y, symmetric, max(most_x, most_y)


def check_out(out, shape, dtype, inputs=()):
    """Validate a user-supplied output buffer, or allocate one."""
    if out is None:
        return np.empty(shape, dtype=dtype)
    if not isinstance(out, np.ndarray):
        raise TypeError(f"out must be a numpy.ndarray, got {type(out).__name__}")
    if out.dtype != dtype:
        raise TypeError(f"out has dtype {out.dtype}, expected {np.dtype(dtype)}")
    if out.shape != tuple(shape):
        raise ValueError(f"out has shape {out.shape}, expected {tuple(shape)}")
    if not out.flags.c_contiguous:
        raise ValueError("out must be C-contiguous")
    if not out.flags.aligned:
        # Finished tiles are written with aligned streaming stores.
        raise ValueError("out must be aligned to its itemsize")
    if not out.flags.writeable:
        raise ValueError("out is read-only")
    for a in inputs:
        if np.may_share_memory(out, a):
            raise ValueError("out must not share memory with the inputs")
    return out


_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_memory_budget(budget):
    """Bytes from None (no budget), a number of bytes, or a string such as "2GB" / "512 MiB"."""
    if budget is None:
        return None
    if isinstance(budget, str):
        match = re.fullmatch(r"\s*([0-9.]+(?:[eE][0-9]+)?)\s*([A-Za-z]*)\s*", budget)
        if match is None or match.group(2).lower() not in _UNITS:
            raise ValueError(f"memory_budget must be a number of bytes or a string like "
                             f"'2GB', got {budget!r}")
        budget = float(match.group(1)) * _UNITS[match.group(2).lower()]
    budget = check_real(budget, "memory_budget", low=0.0, low_inclusive=False)
    return int(budget)


def memory_budget_bytes(memory_budget):
    """Bytes an estimator may use: parse_memory_budget, with None meaning half the
    available RAM."""
    if memory_budget is not None:
        return parse_memory_budget(memory_budget)
    return 0.5 * _available_memory()


def within_memory_budget(nbytes, memory_budget):
    """Whether nbytes fit in memory_budget_bytes(memory_budget).

    With the default budget (half the available memory), a request under a
    tenth of the budget last read, within the last ``_AVAILABLE_REUSE_S``
    seconds, is judged by that reading: /proc/meminfo took 20-30 us on a busy
    VM, 2% of a 200-row KernelPCA fit, and a tenth of the budget fits unless
    the available memory fell tenfold in that time.
    """
    global _last_budget
    if memory_budget is None:
        now = time.monotonic()
        when, budget = _last_budget
        if now - when <= _AVAILABLE_REUSE_S and nbytes <= 0.1 * budget:
            return True
    budget = memory_budget_bytes(memory_budget)
    if memory_budget is None:
        _last_budget = (now, budget)
    return nbytes <= budget


# (time.monotonic(), bytes) of within_memory_budget's last default budget.
_last_budget = (-float("inf"), 0)
_AVAILABLE_REUSE_S = 1.0


def _available_memory():
    """Bytes of memory available to new allocations: the kernel's MemAvailable.

    Read from /proc/meminfo directly: KernelPCA asks at every fit, and
    psutil's parse of the whole file took 22 us against 3.5 us, 2% of a fit
    on 200 rows.  Elsewhere psutil, else the free pages.
    """
    try:
        with open("/proc/meminfo", "rb") as f:
            head = f.read(512)
        at = head.index(b"MemAvailable:") + len(b"MemAvailable:")
        return int(head[at:head.index(b"\n", at)].split()[0]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        import psutil

        return psutil.virtual_memory().available
    except ImportError:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def check_square(K, name="K"):
    K = check_array_2d(K, name)
    if K.shape[0] != K.shape[1]:
        raise ValueError(f"{name} must be a square matrix, got shape {K.shape}")
    return K


def is_sparse(A):
    """A scipy.sparse matrix or array (without importing scipy.sparse for dense input)."""
    if type(A) is np.ndarray:
        return False
    import scipy.sparse as sp

    return sp.issparse(A)


def check_sparse_2d(A, name, dtype, *, canonical=True):
    """A sparse input as canonical CSR of `dtype`, copying only what must change.

    Other formats are converted to CSR (as scikit-learn's check_array); the
    result has sorted indices and no duplicates (summed, as scipy does), on a
    copy when the input had them (canonical=False skips this); the input
    itself is never modified.
    """
    _check_numeric_2d_nonempty(A, name)
    A = A.tocsr()
    check_float64_range(A, name)
    if A.dtype != dtype:
        A = A.astype(dtype)
    if A.dtype.kind == "f" and A.data.size and not _all_finite(A.data):
        raise ValueError(f"{name} contains NaN or infinity")
    if canonical and not A.has_canonical_format:
        A = A.copy()
        A.sum_duplicates()
    return A


def sparse_result_dtype(*arrays):
    """result_dtype for a mix of sparse and dense (or array-like) inputs."""
    return result_dtype(*(a if hasattr(a, "dtype") else np.asarray(a) for a in arrays))


def check_pair_sparse(X, Y):
    """Validate a pair with at least one sparse member: canonical CSR (X, Y, symmetric).

    A dense member is validated as dense input, then stored as CSR (its zeros
    dropped): the sparse one is never densified.
    """
    import scipy.sparse as sp

    symmetric = Y is None or Y is X
    if not is_sparse(X):
        X = check_array_2d(X, "X")
    if not symmetric and not is_sparse(Y):
        Y = check_array_2d(Y, "Y")
    dtype = sparse_result_dtype(X) if symmetric else sparse_result_dtype(X, Y)
    pair = []
    for A, name in ((X, "X"),) if symmetric else ((X, "X"), (Y, "Y")):
        if is_sparse(A):
            pair.append(check_sparse_2d(A, name, dtype))
        else:
            pair.append(sp.csr_matrix(np.asarray(A, dtype=dtype)))
    X = pair[0]
    Y = X if symmetric else pair[1]
    if X.shape[1] != Y.shape[1]:
        raise ValueError(
            f"Incompatible dimension for X and Y matrices: X.shape[1] == {X.shape[1]} "
            f"while Y.shape[1] == {Y.shape[1]}"
        )
    return X, Y, symmetric


def n_threads_constraint():
    """``_parameter_constraints`` entry of an estimator's n_threads (None or 1..MAX_THREADS)."""
    from sklearn.utils._param_validation import Interval

    return [Interval(numbers.Integral, 1, MAX_THREADS, closed="both"), None]


def memory_budget_constraint():
    """``_parameter_constraints`` entry of memory_budget: None, bytes > 0, or a string
    such as "2GB" (parsed by parse_memory_budget at fit)."""
    from sklearn.utils._param_validation import Interval

    return [Interval(numbers.Real, 0, None, closed="neither"), str, None]


class CachedParamValidation:
    """scikit-learn's parameter validation with each class's constraints built once.

    ``sklearn.base._fit_context`` validates every parameter before each fit:
    scikit-learn rebuilds the constraint objects from
    ``_parameter_constraints`` and reads the parameters through
    ``get_params`` (a signature inspection) every time, which counts in a
    fit of a few hundred samples (performance_history, "Small and mid
    sizes").  Here the same constraint objects
    (``make_constraint``, the same ``is_satisfied_by``) are built once per
    class and the parameters read directly; a parameter none satisfies is
    handed to scikit-learn's own validation, which raises its
    ``InvalidParameterError``.
    """

    def _validate_params(self):
        cls = type(self)
        checks = _PARAM_CHECKS.get(cls)
        if checks is None:
            from sklearn.utils._param_validation import make_constraint

            names = set(cls._get_param_names())
            checks = _PARAM_CHECKS[cls] = [
                (name, [make_constraint(c) for c in constraints])
                for name, constraints in cls._parameter_constraints.items()
                if name in names and not (isinstance(constraints, str)
                                          and constraints == "no_validation")]
        passed = _PARAMS_PASSED.setdefault(cls, {})
        for name, constraints in checks:
            value = getattr(self, name)
            # A scalar's verdict depends on its type and value alone: one that
            # passed before passes again (a GridSearchCV refits the same few).
            key = (name, type(value), value) if type(value) in _SCALARS else None
            if key is not None and key in passed:
                continue
            if not any(c.is_satisfied_by(value) for c in constraints):
                super()._validate_params()
                return
            if key is not None:
                if len(passed) >= _MAX_PASSED:
                    passed.clear()
                passed[key] = True


# Estimator class -> [(parameter, its constraint objects)] (CachedParamValidation).
_PARAM_CHECKS = {}
# Estimator class -> {(parameter, type, value)} of the scalar values that passed.
_PARAMS_PASSED = {}
_SCALARS = frozenset((type(None), bool, int, float, str))
# A randomized search draws a new float each fit: the cache stays small.
_MAX_PASSED = 1024


class _SeededStates(threading.local):
    """Each thread's RandomState objects free for ``seeded_random_state``."""

    def __init__(self):
        self.free = []


_seeded_states = _SeededStates()


@contextlib.contextmanager
def seeded_random_state(random_state):
    """scikit-learn's ``check_random_state(random_state)`` for the length of a
    with block (a solve, a draw of rows).

    An int seed's RandomState is one of this thread's, re-seeded: the same
    stream as ``RandomState(seed)``, whose construction first seeds an
    MT19937 from the OS's entropy (0.12-0.22 ms, a tenth of a 200-row
    KernelPCA fit) before the legacy seeding (3 us) replaces that state.
    The object goes back to the thread's free list when the block ends, so
    it must not outlive the block; a nested block gets another one.
    """
    if isinstance(random_state, bool) or not isinstance(random_state,
                                                         (numbers.Integral, np.integer)):
        from sklearn.utils import check_random_state

        yield check_random_state(random_state)
        return
    free = _seeded_states.free
    rng = free.pop() if free else np.random.RandomState()
    try:
        rng.seed(random_state)
        yield rng
    finally:
        free.append(rng)
