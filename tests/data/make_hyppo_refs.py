"""Reference statistics for tests/test_kernel_tests.py from hyppo's MMD and Hsic.

Run from the repository root with hyppo installed (``pip install hyppo``; not
a dependency of fastkern):  python tests/data/make_hyppo_refs.py [OUT]
It writes tests/data/hyppo_refs.json (or OUT): each case's data, hyppo's
statistic (``statistic()``, bias False and True) and fastkern's arguments
that should reproduce it.
"""
import json
import pathlib
import sys

import numpy as np
from sklearn.metrics import pairwise_distances


def median_gamma(Z):
    # hyppo's "gaussian" kernel: gamma = 1 / (2 median^2) of the off-diagonal
    # distances of its first argument, used for the second one too.
    D = pairwise_distances(Z)
    med = np.median(D[~np.eye(len(Z), dtype=bool)])
    return 1.0 / (2.0 * med ** 2)


def main(out):
    import hyppo
    from hyppo.independence import Hsic
    from hyppo.ksample import MMD

    rng = np.random.default_rng(20261123)
    cases = []
    # (name, n_x, n_y, d, shift, hyppo kernel and kwargs, fastkern kernel arguments)
    mmd_specs = [
        ("rbf", 23, 31, 3, 0.4, ("rbf", {"gamma": 0.3}), {"kernel": "rbf", "gamma": 0.3}),
        ("gaussian_default", 30, 30, 2, 0.0, ("gaussian", {}), {"kernel": "rbf"}),
        ("linear", 19, 26, 4, 0.5, ("linear", {}), {"kernel": "linear"}),
        ("poly", 17, 12, 2, 0.3, ("poly", {"gamma": 0.5, "degree": 2, "coef0": 1}),
         {"kernel": "poly", "gamma": 0.5, "degree": 2, "coef0": 1}),
        ("laplacian", 25, 20, 3, 0.2, ("laplacian", {"gamma": 0.4}),
         {"kernel": "laplacian", "gamma": 0.4}),
    ]
    for name, nx, ny, d, shift, (metric, kw), fk in mmd_specs:
        X = rng.standard_normal((nx, d))
        Y = rng.standard_normal((ny, d)) + shift
        if metric == "gaussian":
            fk = dict(fk, gamma=median_gamma(np.vstack([X, Y])))
        stats = {}
        for bias in (False, True):
            stats["hyppo_biased" if bias else "hyppo"] = float(
                MMD(compute_kernel=metric, bias=bias, **kw).statistic(X, Y))
        cases.append({"test": "mmd", "name": name, "X": X.tolist(), "Y": Y.tolist(),
                      "fastkern": fk, "statistics": stats})

    hsic_specs = [
        ("rbf", 33, 2, 1, ("rbf", {"gamma": 0.5}), {"gamma_x": 0.5, "gamma_y": 0.5}),
        ("gaussian_default", 40, 3, 2, ("gaussian", {}), {}),
        ("linear", 27, 2, 2, ("linear", {}), {"kernel_x": "linear", "kernel_y": "linear"}),
        ("laplacian", 21, 1, 1, ("laplacian", {"gamma": 0.7}),
         {"kernel_x": "laplacian", "kernel_y": "laplacian", "gamma_x": 0.7, "gamma_y": 0.7}),
    ]
    for name, n, p, q, (metric, kw), fk in hsic_specs:
        X = rng.standard_normal((n, p))
        Y = np.tanh(X[:, :q]) + 0.5 * rng.standard_normal((n, q))
        if metric == "gaussian":
            g = median_gamma(X)
            fk = {"gamma_x": g, "gamma_y": g}
        stats = {}
        for bias in (False, True):
            stats["hyppo_biased" if bias else "hyppo"] = float(
                Hsic(compute_kernel=metric, bias=bias, **kw).statistic(X, Y))
        cases.append({"test": "hsic", "name": name, "X": X.tolist(), "Y": Y.tolist(),
                      "fastkern": fk, "statistics": stats})
    text = json.dumps({"hyppo_version": hyppo.__version__, "cases": cases}, indent=1)
    pathlib.Path(out).write_text(text + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/hyppo_refs.json")
