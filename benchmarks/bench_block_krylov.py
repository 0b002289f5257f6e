"""KernelPCA's block Krylov solver: products per fit, and the fit time.

Each product reads the whole Gram once, so the number of products is the
solver's cost; it is recorded (extra_info: products, their block widths)
rather than asserted in tests/, where any retuning of the solver would break
a pinned count.  The default problem is the performance target's: N=8000
standard-normal points in 16 dimensions, RBF with gamma 1/16, 5 components.
The fit time includes the order of the solver's allocations (the basis is
written before the Gram: see fastkern._eigen.krylov_basis).
"""
import numpy as np

import fastkern
from fastkern import _kpca_solvers

import _harness  # benchmarks/_harness.py, on sys.path by conftest.py

N = _harness.scaled(8000, minimum=300)


def _counting_products(monkeypatch):
    runs = []
    real = _kpca_solvers.block_eigsh

    def counting(matmat, *args, **kwargs):
        widths = []
        try:
            return real(lambda V: widths.append(V.shape[1]) or matmat(V), *args, **kwargs)
        finally:
            runs.append(widths)

    monkeypatch.setattr(_kpca_solvers, "block_eigsh", counting)
    return runs


def test_block_krylov_products(benchmark, run, monkeypatch):
    benchmark.group = f"KernelPCA block_krylov N={N} d=16 RBF 5 components"
    X = np.random.default_rng(1).standard_normal((N, 16))
    est = fastkern.KernelPCA(n_components=5, kernel="rbf", gamma=1 / 16,
                             eigen_solver="block_krylov", random_state=0)
    runs = _counting_products(monkeypatch)
    run(lambda: est.fit(X))
    benchmark.extra_info.update(products=len(runs[-1]), block_widths=runs[-1])
    assert est.eigenvalues_.shape == (5,) and np.all(np.diff(est.eigenvalues_) <= 0)
