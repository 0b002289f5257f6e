"""``fastkern demo``: kernel PCA and kernel SIR of the UCI wine data."""
import sys

import numpy as np

from fastkern.cli import _common
from fastkern.cli._common import PLOT_EXTRA, Outputs, fmt_vals

# load_wine ships no cultivar names, only class_0..2; label them by number.
CULTIVARS = ("cultivar 1 (class_0)", "cultivar 2 (class_1)", "cultivar 3 (class_2)")

DESCRIPTION = ("Kernel PCA and KernelSIR of the UCI wine data shipped with scikit-learn "
               "(z-scored, RBF kernel): leading eigenvalues, the share of the total "
               "feature-space variance of each kernel PC, the between-cultivar share "
               "(eta^2) of each SIR direction's variance, leave-one-out 1-NN accuracy "
               "of both 2-D projections, and a scatter plot (which needs matplotlib: "
               f"{PLOT_EXTRA}; without it the results are printed and no figure is written).")


def add_parser(sub):
    parser = _common.add_command(sub, "demo", writes_files=True,
                                 help="kernel PCA and kernel SIR of the UCI wine data",
                                 description=DESCRIPTION)
    # The demo's data are tiny, so its default is one thread.
    _common.add_threads(parser, "1; the wine data are too small to gain from more")
    _common.add_seed(parser)
    parser.add_argument("--out-png", default="fastkern-demo.png", metavar="PATH",
                        help="where to write the plot (default: fastkern-demo.png)")
    parser.set_defaults(func=run)


def loo_1nn_accuracy(estimator, X, y):
    """Leave-one-out accuracy of 1-NN on the projection of the z-scored raw data X.

    The protocol of tests/test_sir.py: z-scoring, projection and classifier
    are refitted in every fold, which keeps the left-out sample (and, for
    the supervised KernelSIR, its label) out of everything it is judged by.
    """
    from sklearn.base import clone
    from sklearn.model_selection import LeaveOneOut, cross_val_score
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    model = make_pipeline(StandardScaler(), clone(estimator), KNeighborsClassifier(n_neighbors=1))
    return float(np.mean(cross_val_score(model, X, y, cv=LeaveOneOut())))


def between_class_share(z, y):
    """eta^2 of each column of z: between-class sum of squares over total sum of squares.

    The share of a projection's variance that the class means account for,
    in [0, 1] for each direction separately.
    """
    z = np.asarray(z, dtype=np.float64)
    y = np.asarray(y)
    dev = z - z.mean(axis=0)
    between = sum(np.sum(y == c) * dev[y == c].mean(axis=0) ** 2 for c in np.unique(y))
    return between / np.sum(dev ** 2, axis=0)


def run(args):
    from fastkern._threads import blas_limit
    from fastkern.cli._plot import have_matplotlib

    plotting = have_matplotlib()
    with Outputs("demo") as outputs:
        png = outputs.add(args.out_png, "--out-png", plot=True) if plotting else None
        # 178 samples: one thread is fastest, more only add synchronisation
        # (and on a busy machine, oversubscription) to each of the ~360 fits.
        threads = 1 if args.threads is None else args.threads
        with blas_limit(threads):
            _demo(args, threads, png)
        outputs.commit()
    if plotting:
        print(f"wrote {args.out_png}")
    else:
        print(f"fastkern demo: no figure written: the figure needs matplotlib ({PLOT_EXTRA})",
              file=sys.stderr)
    return 0


def _demo(args, threads, png):
    from sklearn.datasets import load_wine
    from sklearn.preprocessing import StandardScaler

    from fastkern import center_gram, rbf_kernel
    from fastkern.decomposition import KernelPCA
    from fastkern.sir import KernelSIR

    wine = load_wine()
    X = StandardScaler().fit_transform(wine.data)
    y = wine.target
    protocol = f"(z-scoring and 2-D projection refitted in each of {len(y)} folds)"
    names = np.asarray(CULTIVARS)
    gamma = 1.0 / X.shape[1]
    print(f"UCI wine (scikit-learn load_wine): {X.shape[0]} samples, {X.shape[1]} features, "
          f"{len(names)} cultivars; z-scored; RBF kernel, gamma = 1/{X.shape[1]} = {gamma:.4f}")

    # The total variance in feature space is the trace of the centred Gram,
    # and the eigenvalues of kernel PCA are parts of it.
    total = float(np.trace(center_gram(rbf_kernel(X, gamma=gamma, n_threads=threads))))
    kpca = KernelPCA(n_components=2, kernel="rbf", gamma=gamma, n_threads=threads,
                     random_state=args.seed)
    Z_pca = kpca.fit_transform(X)
    ev = np.asarray(kpca.eigenvalues_)
    share = ev / total
    acc_pca = loo_1nn_accuracy(kpca, wine.data, y)
    print(f"KernelPCA  leading eigenvalues: {fmt_vals(ev)}  "
          f"share of the total feature-space variance: {fmt_vals(share, pct=True)} "
          f"(together {share.sum():.1%})")
    print(f"KernelPCA  LOO 1-NN accuracy {protocol}: {acc_pca:.4f}")

    sir = KernelSIR(n_components=2, kernel="rbf", gamma=gamma, n_threads=threads,
                    random_state=args.seed)
    Z_sir = sir.fit(X, y).transform(X)
    sev = np.asarray(sir.eigenvalues_)
    # Each SIR direction is judged on its own: the share of its variance
    # that lies between the cultivar means.  The directions are not parts
    # of one total, so these shares do not add up to anything.
    eta2 = between_class_share(Z_sir, y)
    acc_sir = loo_1nn_accuracy(sir, wine.data, y)
    print(f"KernelSIR  leading eigenvalues: {fmt_vals(sev)}  "
          f"between-cultivar share of each direction's own variance "
          f"(eta^2; each in [0, 1], not parts of one total): {fmt_vals(eta2, pct=True)}")
    print(f"KernelSIR  LOO 1-NN accuracy {protocol}: {acc_sir:.4f}")
    if png is None:
        return

    from fastkern.cli._plot import pyplot, save, scatter

    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6))
    labels = names[y]
    scatter(fig, axes[0], Z_pca, labels,
            f"Kernel PCA (RBF), LOO 1-NN accuracy {acc_pca:.3f}",
            f"kernel PC 1 ({share[0]:.1%} of total variance)",
            f"kernel PC 2 ({share[1]:.1%} of total variance)", "cultivar", CULTIVARS)
    scatter(fig, axes[1], Z_sir, labels,
            f"Kernel SIR (RBF), LOO 1-NN accuracy {acc_sir:.3f}",
            f"kernel SIR direction 1\n({eta2[0]:.1%} of its variance between cultivars)",
            f"kernel SIR direction 2\n({eta2[1]:.1%} of its variance between cultivars)",
            "cultivar", CULTIVARS)
    fig.suptitle("UCI wine data: 178 wines from 3 cultivars, 13 chemical measurements (z-scored)")
    save(fig, png)
    plt.close(fig)
