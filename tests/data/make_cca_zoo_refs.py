"""Reference values for tests/test_cca.py from cca-zoo's KCCA.

Run from the repository root with cca-zoo installed (it is not a fastkern
dependency):  python tests/data/make_cca_zoo_refs.py [OUT.json]
It writes tests/data/cca_zoo_refs.json: the data, and cca-zoo's dual weights
and training variates.  cca-zoo's constraint (1 - c) K^2 / (n - 1) + c K on
centred kernels is KernelCCA(regularization=c (n - 1) / (1 - c), jitter=0);
cca-zoo does not report the correlations, and its eigenvalues are fastkern's
rho / (1 - c), so the tests compare the variates and the regularised
correlation of cca-zoo's weights.  The poly kernel is left out: cca-zoo 4.0.1
returns poly directions whose regularised correlation is below the optimum
(0.862 against 0.891 for the first pair on this data with c=0.1).
"""
import json
import pathlib
import sys

import numpy as np


def data(seed, n):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    Y = np.column_stack([np.sin(X[:, 0]) + 0.2 * rng.standard_normal(n),
                         X[:, 1] ** 2 + 0.2 * rng.standard_normal(n)])
    return X, Y


CASES = [
    dict(name="rbf", seed=1, n=60, n_components=3, shrinkage=0.1,
         kernel=dict(kernel="rbf", gamma=0.5)),
    dict(name="rbf_strong", seed=2, n=45, n_components=2, shrinkage=0.6,
         kernel=dict(kernel="rbf", gamma=0.2)),
    dict(name="linear", seed=3, n=50, n_components=2, shrinkage=0.3,
         kernel=dict(kernel="linear")),
]


def main(path):
    import cca_zoo
    from cca_zoo.nonparametric import KCCA

    out = {"cca_zoo_version": cca_zoo.__version__, "kcca": []}
    for case in CASES:
        X, Y = data(case["seed"], case["n"])
        model = KCCA(n_components=case["n_components"], shrinkage=case["shrinkage"],
                     **case["kernel"]).fit([X, Y])
        zx, zy = model.transform([X, Y])
        out["kcca"].append({**case, "X": X.tolist(), "Y": Y.tolist(),
                            "x_weights": model.weights_[0].tolist(),
                            "y_weights": model.weights_[1].tolist(),
                            "x_variates": np.asarray(zx).tolist(),
                            "y_variates": np.asarray(zy).tolist()})
    pathlib.Path(path).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/data/cca_zoo_refs.json")
