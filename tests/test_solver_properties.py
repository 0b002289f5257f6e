"""KernelFDA's and KernelCCA's solvers against plain scipy references on adversarial rows.

The references are the generalized eigenproblems on explicitly built n x n
matrices, solved by scipy.linalg.eigh (test_fda.reference_kfda,
test_cca._plain); the rows are those that give repeated eigenvalues and
rank-deficient Grams (one-hot, duplicated, rank-deficient), drawn by
hypothesis.  KernelPCA's and KernelRidge's are in test_repeated_eigenvalues.
"""
import warnings

import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from sklearn.metrics.pairwise import rbf_kernel
from test_cca import _centre, _plain
from test_fda import reference_kfda

from fastkern import KernelCCA, KernelFDA


def _rows(kind, n, d, rng):
    if kind == "one-hot":
        return np.eye(d)[rng.integers(0, d, n)] + 0.0
    if kind == "duplicated":
        return np.repeat(rng.standard_normal((-(-n // 3), d)), 3, axis=0)[:n]
    if kind == "rank-deficient":
        return rng.standard_normal((n, 1)) @ rng.standard_normal((1, d))
    return rng.standard_normal((n, d))


KINDS = ["one-hot", "duplicated", "rank-deficient", "gaussian"]


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(kind=st.sampled_from(KINDS), n=st.integers(12, 120), d=st.integers(1, 5),
       classes=st.integers(2, 4), reg=st.sampled_from([1e-3, 1e-1]),
       solver=st.sampled_from(["dense", "inchol"]), seed=st.integers(0, 2 ** 16))
def test_kernel_fda_matches_the_generalized_eigenproblem(kind, n, d, classes, reg, solver,
                                                         seed):
    rng = np.random.default_rng(seed)
    X = _rows(kind, n, d, rng)
    labels = np.arange(n) % classes
    rng.shuffle(labels)
    K = rbf_kernel(X, gamma=0.5)
    Kc = _centre(K)
    # The reference needs a right side LAPACK can factor: Kc not zero.
    assume(np.abs(Kc).max() > 1e-8)
    try:
        w, _, _, _ = reference_kfda(K, K[:3], labels, reg)
    except np.linalg.LinAlgError:
        # The reference's right side is singular to rounding: no reference.
        assume(False)
    options = {"max_rank": n, "tol": 1e-14} if solver == "inchol" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = KernelFDA(gamma=0.5, regularization=reg, solver=solver, **options).fit(X, labels)
    got = np.sort(est.eigenvalues_)[::-1]
    np.testing.assert_allclose(got, w[:got.size], rtol=1e-6, atol=1e-9)


@settings(max_examples=30, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(kind=st.sampled_from(KINDS), n=st.integers(12, 100), d=st.integers(1, 4),
       r=st.sampled_from([0.1, 1.0]), seed=st.integers(0, 2 ** 16))
def test_kernel_cca_matches_the_generalized_eigenproblem(kind, n, d, r, seed):
    rng = np.random.default_rng(seed)
    X = _rows(kind, n, d, rng)
    Y = np.column_stack([np.sin(X.sum(axis=1)), X[:, 0] ** 2]) \
        + 0.1 * rng.standard_normal((n, 2))
    Kx, Ky = _centre(rbf_kernel(X, gamma=0.5)), _centre(rbf_kernel(Y, gamma=0.5))
    # Constant rows are a ValueError naming X (test_cca).
    assume(np.abs(Kx).max() > 1e-8)
    e = 1e-3
    k = 2
    try:
        rho, _, _, _ = _plain(Kx, Ky, r, e, k)
    except np.linalg.LinAlgError:
        assume(False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = KernelCCA(n_components=k, gamma=0.5, regularization=r, jitter=e,
                          solver="dense").fit(X, Y)
    np.testing.assert_allclose(model.canonical_correlations_, rho, atol=1e-8)
