"""Every estimator with a kernel builds its KernelSpec once, at fit (``kernel_spec_``),
and evaluates that spec afterwards."""
import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.metrics.pairwise import pairwise_kernels

import fastkern

RNG = np.random.default_rng(0)
X = RNG.normal(size=(80, 4))
Y_REG = X[:, 0] - 2 * X[:, 1] + 0.1 * RNG.normal(size=80)
Y_CLS = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5).astype(int)
Y_VIEW = np.column_stack([np.sin(X[:, 0]), X[:, 1] ** 2])

# (name, estimator, target, the method run after fit)
CASES = [
    ("KernelPCA", fastkern.KernelPCA(3, kernel="rbf", gamma="median", random_state=0),
     None, "transform"),
    ("KernelPCA-matrix-free", fastkern.KernelPCA(3, kernel="rbf", gamma="scale",
                                                 eigen_solver="matrix-free", random_state=0),
     None, "transform"),
    ("KernelPCA-ichol", fastkern.KernelPCA(3, kernel="rbf", gamma=0.3,
                                           eigen_solver="incomplete_cholesky"),
     None, "transform"),
    ("KernelRidge", fastkern.KernelRidge(alpha=0.1, kernel="rbf", gamma="median"),
     Y_REG, "predict"),
    ("KernelRidge-ichol", fastkern.KernelRidge(alpha=0.1, kernel="rbf", gamma=0.3,
                                               solver="incomplete_cholesky"), Y_REG, "predict"),
    ("KernelRidgeCV", fastkern.KernelRidgeCV(kernel="rbf", gamma="scale"), Y_REG, "predict"),
    ("KernelSIR", fastkern.KernelSIR(2, kernel="rbf", gamma="median"), Y_REG, "transform"),
    ("KernelFDA", fastkern.KernelFDA(kernel="rbf", gamma="median"), Y_CLS, "predict"),
    ("KernelCCA", fastkern.KernelCCA(2, kernel="rbf", gamma="median"), Y_VIEW, "transform"),
    ("Nystroem", fastkern.Nystroem(kernel="rbf", gamma="median", n_components=20,
                                   random_state=0), None, "transform"),
]
IDS = [c[0] for c in CASES]


def _fit(est, y):
    return est.fit(X) if y is None else est.fit(X, y)


@pytest.mark.parametrize("name, est, y, method", CASES, ids=IDS)
def test_kernel_spec_is_the_fitted_kernel(name, est, y, method):
    est = _fit(clone(est), y)
    spec = est.kernel_spec_
    gamma = dict(spec.params)["gamma"]
    if hasattr(est, "gamma_"):
        assert gamma == est.gamma_
    np.testing.assert_allclose(spec.gram(X), pairwise_kernels(X, metric="rbf", gamma=gamma),
                               rtol=1e-12)


@pytest.mark.parametrize("name, est, y, method", CASES, ids=IDS)
def test_later_calls_use_the_fitted_kernel_not_the_parameters(name, est, y, method):
    # Before, predict/transform rebuilt the kernel from the parameters: a
    # parameter changed after fit changed the model.
    est = _fit(clone(est), y)
    before = getattr(est, method)(X[:7])
    est.set_params(kernel="laplacian", gamma=5.0)
    np.testing.assert_array_equal(getattr(est, method)(X[:7]), before)


@pytest.mark.parametrize("name, est, y, method", CASES, ids=IDS)
def test_fitted_estimators_pickle_and_clone(name, est, y, method):
    est = _fit(clone(est), y)
    again = pickle.loads(pickle.dumps(est))
    assert again.kernel_spec_ == est.kernel_spec_
    np.testing.assert_array_equal(getattr(again, method)(X[:7]), getattr(est, method)(X[:7]))
    assert not hasattr(clone(est), "kernel_spec_")
