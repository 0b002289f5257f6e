"""KernelCCA, KernelFDA and KernelSIR give the same bits for any n_threads, and
when fitted from several Python threads at once.

The data have more rows than fastkern._threads.BLAS_SERIAL_ROWS, where the
other estimators' BLAS and LAPACK calls take n_threads threads: OpenBLAS's
threaded syevr, potrf, gesdd and narrow gemms round differently on 1, 2 and
3 threads, and another Python thread's BLAS limit changes the count of a fit
running beside it.  Every fitted array and every output is compared with
np.array_equal.
"""
import threading

import numpy as np
import pytest

from fastkern import KernelCCA, KernelFDA, KernelSIR
from fastkern._threads import BLAS_SERIAL_ROWS

N = BLAS_SERIAL_ROWS + 88
THREAD_COUNTS = (1, 2, 3, None)
# The concurrent fits' deadline: each takes well under a second alone.
JOIN_TIMEOUT_S = 120


def _data(n=N, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4))
    Y = np.column_stack([np.sin(X[:, 0]), X[:, 1] ** 2]) + 0.2 * rng.standard_normal((n, 2))
    classes = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5) + (X[:, 2] > 1.0)
    response = X[:, 0] ** 2 + 0.1 * rng.standard_normal(n)
    X_new = rng.standard_normal((N, 4))
    return X, Y, classes, response, X_new


def _fitted_arrays(est):
    return {name: value for name, value in sorted(vars(est).items())
            if name.endswith("_") and isinstance(value, np.ndarray)}


def _cca(solver):
    def run(n_threads):
        X, Y, _, _, X_new = _data()
        est = KernelCCA(n_components=3, solver=solver, tol=1e-5, n_threads=n_threads).fit(X, Y)
        out = _fitted_arrays(est)
        out["transform_x"], out["transform_y"] = est.transform(X_new, Y[::-1])
        return out
    return run


def _fda(solver, precomputed=False):
    def run(n_threads):
        X, _, classes, _, X_new = _data()
        if precomputed:
            X, X_new = X @ X.T, X_new @ X.T
        est = KernelFDA(solver=solver, kernel="precomputed" if precomputed else "rbf",
                        n_threads=n_threads).fit(X, classes)
        out = _fitted_arrays(est)
        out["transform"] = est.transform(X_new)
        out["decision_function"] = est.decision_function(X_new)
        out["predict"] = est.predict(X_new)
        return out
    return run


def _sir(**params):
    def run(n_threads):
        X, _, _, response, X_new = _data()
        est = KernelSIR(n_components=2, n_threads=n_threads, **params).fit(X, response)
        out = _fitted_arrays(est)
        out["transform"] = est.transform(X_new)
        return out
    return run


CASES = {
    "KernelCCA-dense": _cca("dense"),
    "KernelCCA-incomplete_cholesky": _cca("incomplete_cholesky"),
    "KernelFDA-dense": _fda("dense"),
    "KernelFDA-dense-precomputed": _fda("dense", precomputed=True),
    "KernelFDA-inchol": _fda("inchol"),
    "KernelSIR-full": _sir(),
    "KernelSIR-random-basis": _sir(n_basis=150, random_state=0),
    "KernelSIR-incomplete_cholesky-basis": _sir(basis="incomplete_cholesky", ichol_tol=1e-3),
}


def _assert_same_bits(got, expected, what):
    assert got.keys() == expected.keys()
    differ = [name for name in expected if not np.array_equal(got[name], expected[name])]
    assert not differ, f"{what}: {differ} differ from the fit on one thread"


@pytest.mark.parametrize("case", sorted(CASES))
def test_same_bits_for_any_thread_count(case):
    run = CASES[case]
    expected = run(1)
    for n_threads in THREAD_COUNTS[1:]:
        _assert_same_bits(run(n_threads), expected, f"n_threads={n_threads}")


@pytest.mark.parametrize("case", sorted(CASES))
def test_fits_from_four_python_threads_at_once_match_the_serial_fit(case):
    run = CASES[case]
    expected = run(None)
    start = threading.Barrier(len(THREAD_COUNTS), timeout=JOIN_TIMEOUT_S)
    results, errors = {}, []

    def fit(n_threads):
        try:
            start.wait()
            results[n_threads] = run(n_threads)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=fit, args=(t,)) for t in THREAD_COUNTS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_TIMEOUT_S)
    assert not any(t.is_alive() for t in threads), "a concurrent fit did not finish"
    assert not errors, errors
    for n_threads in THREAD_COUNTS:
        _assert_same_bits(results[n_threads], expected, f"concurrent, n_threads={n_threads}")
