"""Cross-validated accuracy of KernelFDA, KernelSIR-based classifiers and LDA.

Protocol (every number in the table comes from it):

* outer loop: 5-fold StratifiedKFold(shuffle=True, random_state=seed);
  every model is refitted inside each outer fold, scaler included;
* every model is a Pipeline starting with StandardScaler (z-scored features,
  the scaler fitted on the training fold only);
* rbf kernels: gamma chosen in each outer fold by GridSearchCV over
  GAMMA_FACTORS / n_features with an inner 3-fold
  StratifiedKFold(shuffle=True, random_state=seed) on the training fold
  (accuracy; ties go to the first grid value); regularization stays at the
  estimators' default 1e-3.  The "gamma=1/d" rows use the default
  gamma=None (1 / n_features) without a search.

Models:

* ``LDA``: sklearn's LinearDiscriminantAnalysis() (svd solver, class
  priors from the training fold) - the linear baseline;
* ``KernelFDA``: fastkern.KernelFDA(kernel="rbf") used as the classifier
  (nearest class centroid in its whitened discriminant space);
* ``KernelSIR+NC``: fastkern.KernelSIR(kernel="rbf", slicing="classes",
  n_components=n_classes - 1) as a transformer, then
  sklearn.neighbors.NearestCentroid (Euclidean, on KernelSIR's unit-norm,
  not whitened, directions);
* ``KernelSIR+LDA``: the same KernelSIR, then LinearDiscriminantAnalysis()
  on its n_classes - 1 columns.

Run ``python benchmarks/fda_accuracy.py`` (about a minute on 2 cores).
"""
import argparse
import time

import numpy as np
from sklearn.datasets import load_breast_cancer, load_iris, load_wine
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score
from sklearn.neighbors import NearestCentroid
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

from fastkern import KernelFDA, KernelSIR

DATASETS = {"wine": load_wine, "iris": load_iris, "breast_cancer": load_breast_cancer}
GAMMA_FACTORS = (0.1, 0.3, 1.0, 3.0)
MODELS = ("LDA", "KernelFDA", "KernelFDA gamma=1/d", "KernelSIR+NC", "KernelSIR+LDA")


def make_model(name, n_classes, n_features, seed, n_threads=1):
    """The pipeline (with its inner gamma search where the protocol says so) for `name`."""
    if name == "LDA":
        return Pipeline([("scale", StandardScaler()), ("lda", LinearDiscriminantAnalysis())])
    if name.startswith("KernelFDA"):
        steps = [("scale", StandardScaler()), ("model", KernelFDA(n_threads=n_threads))]
    else:
        sir = KernelSIR(n_components=n_classes - 1, slicing="classes", n_threads=n_threads)
        last = NearestCentroid() if name.endswith("+NC") else LinearDiscriminantAnalysis()
        steps = [("scale", StandardScaler()), ("model", sir), ("clf", last)]
    pipe = Pipeline(steps)
    if name.endswith("gamma=1/d"):
        return pipe
    grid = {"model__gamma": [f / n_features for f in GAMMA_FACTORS]}
    inner = StratifiedKFold(3, shuffle=True, random_state=seed)
    return GridSearchCV(pipe, grid, cv=inner)


def main(datasets=tuple(DATASETS), models=MODELS, n_splits=5, seed=0, n_threads=1,
         verbose=True):
    """Run the protocol; return {(dataset, model): array of fold accuracies}."""
    results = {}
    for ds in datasets:
        X, y = DATASETS[ds](return_X_y=True)
        n_classes, n_features = np.unique(y).size, X.shape[1]
        outer = StratifiedKFold(n_splits, shuffle=True, random_state=seed)
        for name in models:
            model = make_model(name, n_classes, n_features, seed, n_threads)
            t0 = time.perf_counter()
            scores = cross_val_score(model, X, y, cv=outer)
            results[ds, name] = scores
            if verbose:
                print(f"  {ds:14s} {name:20s} {scores.mean():.3f}  "
                      f"({time.perf_counter() - t0:.1f} s)", flush=True)
    return results


def table(results):
    """Markdown table: mean +- std of the fold accuracies, a column per dataset."""
    datasets = list(dict.fromkeys(ds for ds, _ in results))
    models = list(dict.fromkeys(m for _, m in results))
    lines = ["| model | " + " | ".join(datasets) + " |",
             "|---|" + "---|" * len(datasets)]
    for m in models:
        cells = [f"{results[ds, m].mean():.3f} ± {results[ds, m].std():.3f}"
                 for ds in datasets]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n-threads", type=int, default=1)
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    args = parser.parse_args()
    res = main(datasets=tuple(args.datasets), seed=args.seed, n_threads=args.n_threads)
    print()
    print(table(res))
