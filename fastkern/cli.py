"""The ``fastkern`` command line: ``demo``, ``kpca`` and ``bench``.

Every user error (unreadable file, missing column, non-numeric data, too few
rows, bad option value) ends the program with one line on stderr and exit
status 2.
"""
import argparse
import csv
import math
import os
import sys

import numpy as np

EXIT_USAGE = 2


class CLIError(Exception):
    """A user error, reported as one line on stderr with exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


# ---------------------------------------------------------------- option types


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _size_list(text):
    sizes = []
    for part in text.split(","):
        try:
            n = int(part)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected comma-separated sample counts like 1000,4000, got {text!r}") from None
        if n < 10:
            raise argparse.ArgumentTypeError(f"sample counts must be at least 10, got {n}")
        sizes.append(n)
    return sorted(set(sizes))


# ---------------------------------------------------------------- CSV input


def _is_number(cell):
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _has_header(first):
    """The first row is a header when none of its cells is a number.

    A data row has at least one numeric feature, so this never mistakes data
    for a header, and a typo in the first data row is reported, not skipped.
    """
    return not any(_is_number(c) for c in first)


def _resolve_column(label_column, names, ncols, path):
    if names is not None and label_column in names:
        return names.index(label_column)
    try:
        index = int(label_column)
    except ValueError:
        known = (f"; columns are {', '.join(names)}" if names is not None
                 else " (the file has no header row)")
        raise CLIError(f"label column {label_column!r} not found in {path}{known}") from None
    if not 0 <= index < ncols:
        raise CLIError(f"label column index {index} is out of range: {path} has {ncols} columns "
                       f"(0 to {ncols - 1})")
    return index


def read_csv(path, label_column=None):
    """(X float64 array, labels or None, label column name or None) from a CSV file.

    The header row is optional and detected; the label column (name or 0-based
    index) is removed from the features.
    """
    try:
        with open(path, newline="") as f:
            reader = csv.reader(f)
            rows = [(reader.line_num, [c.strip() for c in row])
                    for row in reader if any(c.strip() for c in row)]
    except FileNotFoundError:
        raise CLIError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise CLIError(f"cannot read {path}: {exc}") from None
    if not rows:
        raise CLIError(f"{path} is empty")

    ncols = len(rows[0][1])
    for line, row in rows:
        if len(row) != ncols:
            raise CLIError(f"{path}, line {line}: {len(row)} fields where the first row "
                           f"has {ncols}")
    named = _has_header(rows[0][1])
    if named:
        names, rows = rows[0][1], rows[1:]
    else:
        names = [f"x{j}" for j in range(ncols)]

    label_index = None
    if label_column is not None:
        label_index = _resolve_column(label_column, names if named else None, ncols, path)
    feature_cols = [j for j in range(ncols) if j != label_index]
    if not feature_cols:
        raise CLIError(f"{path} has no feature columns besides the label column")
    if not rows:
        raise CLIError(f"{path} has a header but no data rows")

    X = np.empty((len(rows), len(feature_cols)))
    for i, (line, row) in enumerate(rows):
        for k, j in enumerate(feature_cols):
            try:
                X[i, k] = float(row[j])
            except ValueError:
                hint = ("" if label_column is not None
                        else " (use --label-column for a class column)")
                raise CLIError(f"{path}, line {line}, column {names[j]!r}: non-numeric value "
                               f"{row[j]!r}{hint}") from None
            if not math.isfinite(X[i, k]):
                raise CLIError(f"{path}, line {line}, column {names[j]!r}: value {row[j]!r} "
                               "is not finite")
    labels = None if label_index is None else [row[label_index] for _, row in rows]
    label_name = None if label_index is None else names[label_index]
    return X, labels, label_name


# ---------------------------------------------------------------- shared helpers


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


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _scatter(ax, Z, labels, title, xlabel, ylabel, label_title=None, order=None):
    if labels is None:
        ax.scatter(Z[:, 0], Z[:, 1], s=14, alpha=0.8, edgecolors="none")
    else:
        labels = np.asarray(labels)
        for k, value in enumerate(_unique_in_order(labels) if order is None else order):
            mask = labels == value
            ax.scatter(Z[mask, 0], Z[mask, 1], s=16, alpha=0.85, label=str(value),
                       color=f"C{k % 10}", edgecolors="white", linewidths=0.3)
        ax.legend(title=label_title, fontsize="small", title_fontsize="small", framealpha=0.85)
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.25)


def _unique_in_order(values):
    try:
        return sorted(set(values.tolist()), key=lambda v: (float(v), v))
    except ValueError:
        return sorted(set(values.tolist()))


def _save(fig, path):
    try:
        fig.savefig(path, dpi=120)
    except OSError as exc:
        raise CLIError(f"cannot write {path}: {exc.strerror or exc}") from None


# ---------------------------------------------------------------- demo


# load_wine ships no cultivar names, only class_0..2; label them by number.
CULTIVARS = ("cultivar 1 (class_0)", "cultivar 2 (class_1)", "cultivar 3 (class_2)")


def cmd_demo(args):
    from fastkern import _bench

    # 178 samples: one thread is fastest, more only add synchronisation
    # (and on a busy machine, oversubscription) to each of the ~360 fits.
    threads = 1 if args.threads is None else args.threads
    with _bench.blas_threads(threads):
        return _demo(args, threads)


def _demo(args, threads):
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

    # The total variance in feature space is the trace of the centred Gram.
    total = float(np.trace(center_gram(rbf_kernel(X, gamma=gamma, n_threads=threads))))
    kpca = KernelPCA(n_components=2, kernel="rbf", gamma=gamma, n_threads=threads)
    Z_pca = kpca.fit_transform(X)
    ev = np.asarray(kpca.eigenvalues_)
    share = ev / total
    acc_pca = loo_1nn_accuracy(kpca, wine.data, y)
    print(f"KernelPCA  leading eigenvalues: {_fmt_vals(ev)}  "
          f"explained share: {_fmt_vals(share, pct=True)} (total {share.sum():.1%})")
    print(f"KernelPCA  LOO 1-NN accuracy {protocol}: {acc_pca:.4f}")

    sir = KernelSIR(n_components=2, kernel="rbf", gamma=gamma, n_threads=threads)
    Z_sir = sir.fit(X, y).transform(X)
    sev = np.asarray(sir.eigenvalues_)
    acc_sir = loo_1nn_accuracy(sir, wine.data, y)
    # A SIR eigenvalue is the share of the variance along its direction that
    # the cultivar means explain (between-class over total variance).
    print(f"KernelSIR  leading eigenvalues: {_fmt_vals(sev)}  "
          f"explained share (between-cultivar / total variance): {_fmt_vals(sev, pct=True)}")
    print(f"KernelSIR  LOO 1-NN accuracy {protocol}: {acc_sir:.4f}")

    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6))
    labels = names[y]
    _scatter(axes[0], Z_pca, labels,
             f"Kernel PCA (RBF), LOO 1-NN accuracy {acc_pca:.3f}",
             f"kernel PC 1 ({share[0]:.1%} of variance)",
             f"kernel PC 2 ({share[1]:.1%} of variance)", "cultivar", CULTIVARS)
    _scatter(axes[1], Z_sir, labels,
             f"Kernel SIR (RBF), LOO 1-NN accuracy {acc_sir:.3f}",
             f"kernel SIR direction 1 ({sev[0]:.1%} between-cultivar)",
             f"kernel SIR direction 2 ({sev[1]:.1%} between-cultivar)", "cultivar", CULTIVARS)
    fig.suptitle("UCI wine data: 178 wines from 3 cultivars, 13 chemical measurements (z-scored)")
    fig.tight_layout()
    _save(fig, args.out_png)
    plt.close(fig)
    print(f"wrote {args.out_png}")
    return 0


def _fmt_vals(values, pct=False):
    if pct:
        return "[" + ", ".join(f"{v:.1%}" for v in values) + "]"
    return "[" + ", ".join(f"{v:.4g}" for v in values) + "]"


# ---------------------------------------------------------------- kpca


def cmd_kpca(args):
    from fastkern import _bench

    X, labels, label_name = read_csv(args.data, args.label_column)
    with _bench.blas_threads(args.threads):
        return _kpca(args, X, labels, label_name)


def _kpca(args, X, labels, label_name):
    from fastkern.decomposition import KernelPCA

    n, d = X.shape
    if n < 2:
        raise CLIError(f"{args.data} has {n} data row; kernel PCA needs at least 2")
    if args.components > n - 1:
        raise CLIError(f"--components {args.components} needs at least {args.components + 1} "
                       f"data rows; {args.data} has {n}")
    kpca = KernelPCA(n_components=args.components, kernel=args.kernel, gamma=args.gamma,
                     n_threads=args.threads, verbose=args.verbose)
    Z = kpca.fit_transform(X)

    header = [f"PC{k + 1}" for k in range(args.components)]
    if labels is not None:
        header.append(label_name)
    out = sys.stdout if args.out is None else None
    try:
        f = out or open(args.out, "w", newline="")
    except OSError as exc:
        raise CLIError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    try:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        for i in range(n):
            row = [repr(float(v)) for v in Z[i]]
            if labels is not None:
                row.append(labels[i])
            w.writerow(row)
    finally:
        if out is None:
            f.close()

    log = sys.stderr if args.out is None else sys.stdout
    ev = np.asarray(kpca.eigenvalues_)
    print(f"kernel PCA ({args.kernel}) of {n} samples x {d} features: eigenvalues {_fmt_vals(ev)}",
          file=log)
    if args.out is not None:
        print(f"wrote {args.out} ({n} rows x {len(header)} columns)", file=log)
    if args.plot is not None:
        plt = _pyplot()
        fig, ax = plt.subplots(figsize=(6.4, 5.2))
        if args.components >= 2:
            P = Z[:, :2]
            ylabel = "PC2"
        else:
            P = np.column_stack([Z[:, 0], np.arange(n)])
            ylabel = "sample index"
        title = f"Kernel PCA ({args.kernel}) of {os.path.basename(args.data)}"
        _scatter(ax, P, labels, title, "PC1", ylabel, label_name)
        fig.tight_layout()
        _save(fig, args.plot)
        plt.close(fig)
        print(f"wrote {args.plot}", file=log)
    return 0


# ---------------------------------------------------------------- bench


QUICK_SIZES = [60, 120]


def cmd_bench(args):
    from fastkern import _bench

    sizes = args.sizes or (QUICK_SIZES if args.quick else [1000, 4000, 8000])
    info = _bench.machine_info(args.threads)
    print(_bench.describe_machine(info))
    print(f"tasks: RBF Gram (d={_bench.N_FEATURES}), centering of that Gram, KernelPCA "
          f"({_bench.N_COMPONENTS} components), KernelRidge (alpha={_bench.RIDGE_ALPHA}); "
          f"naive loop at N={min(sizes)} only")
    print(_bench.MEMORY_NOTE[info["memory_method"]])
    sys.stdout.flush()
    min_time = 0.02 if args.quick else 0.3
    try:
        results = _bench.run_suite(sizes, n_threads=args.threads, min_time=min_time,
                                   progress=_bench.progress_printer())
    except _bench.MeasurementError as exc:
        raise CLIError(str(exc)) from None
    print()
    print(_bench.format_table(results))
    if args.json is not None:
        try:
            _bench.write_json(args.json, results, info, sizes)
        except OSError as exc:
            raise CLIError(f"cannot write {args.json}: {exc.strerror or exc}") from None
        print(f"wrote {args.json}")
    if args.plot is not None:
        try:
            _bench.plot_results(results, args.plot, info)
        except OSError as exc:
            raise CLIError(f"cannot write {args.plot}: {exc.strerror or exc}") from None
        print(f"wrote {args.plot}")
    return 0


# ---------------------------------------------------------------- parser


def build_parser():
    common = _Parser(add_help=False)
    common.add_argument("--threads", type=_positive_int, default=None, metavar="N",
                        help="threads for fastkern's kernels (n_threads) and for BLAS "
                             "(default: all cores, or OMP_NUM_THREADS)")

    # The demo's data are tiny, so its default is one thread.
    demo_common = _Parser(add_help=False)
    demo_common.add_argument("--threads", type=_positive_int, default=None, metavar="N",
                             help="threads for the kernels and BLAS (default: 1; the wine data "
                                  "are too small to gain from more)")

    parser = _Parser(prog="fastkern",
                     description="Fast kernel methods: kernel PCA, kernel SIR, benchmarks.")
    from fastkern import __version__

    parser.add_argument("--version", action="version", version=f"fastkern {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    demo = sub.add_parser(
        "demo", parents=[demo_common], help="kernel PCA and kernel SIR of the UCI wine data",
        description="Kernel PCA and KernelSIR of the UCI wine data shipped with scikit-learn "
                    "(z-scored, RBF kernel): leading eigenvalues, explained share, "
                    "leave-one-out 1-NN accuracy of both 2-D projections, and a scatter plot.")
    demo.add_argument("--out-png", default="fastkern-demo.png", metavar="PATH",
                      help="where to write the plot (default: fastkern-demo.png)")
    demo.set_defaults(func=cmd_demo)

    kpca = sub.add_parser(
        "kpca", parents=[common], help="kernel PCA of a CSV file",
        description="Kernel PCA of the numeric columns of a CSV file. A header row is "
                    "optional: a first row without any number in it is taken as one. Writes the "
                    "projection as CSV (to stdout without --out).")
    kpca.add_argument("data", metavar="DATA.csv", help="input CSV file")
    kpca.add_argument("--kernel", default="rbf",
                      choices=["rbf", "linear", "poly", "laplacian", "sigmoid", "exponential"],
                      help="kernel (default: rbf)")
    kpca.add_argument("--gamma", type=_positive_float, default=None, metavar="G",
                      help="kernel coefficient (default: 1 / number of features)")
    kpca.add_argument("--components", type=_positive_int, default=2, metavar="K",
                      help="number of components (default: 2)")
    kpca.add_argument("--label-column", default=None, metavar="C",
                      help="class column (name or 0-based index): not a feature, colours the plot")
    kpca.add_argument("--out", default=None, metavar="PROJ.csv",
                      help="projection CSV to write (default: stdout)")
    kpca.add_argument("--plot", default=None, metavar="PROJ.png",
                      help="scatter plot of the first two components")
    kpca.add_argument("--verbose", action="store_true", help="report the eigensolver's progress")
    kpca.set_defaults(func=cmd_kpca)

    bench = sub.add_parser(
        "bench", parents=[common], help="time naive loop, NumPy, scikit-learn and fastkern",
        description="Time and peak memory of the RBF Gram (d=16), its centering, KernelPCA "
                    "(5 components) and KernelRidge for a naive Python loop (smallest size only), "
                    "vectorised NumPy, scikit-learn and fastkern, side by side.")
    bench.add_argument("--quick", action="store_true",
                       help=f"tiny sizes ({','.join(map(str, QUICK_SIZES))}), a few seconds")
    bench.add_argument("--sizes", type=_size_list, default=None, metavar="N1,N2,...",
                       help="sample counts (default: 1000,4000,8000)")
    bench.add_argument("--json", default=None, metavar="FILE", help="write the results as JSON")
    bench.add_argument("--plot", default=None, metavar="FILE",
                       help="plot time against N (log-log), one panel per task")
    bench.set_defaults(func=cmd_bench)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except CLIError as exc:
        print(f"fastkern {args.command}: error: {exc}", file=sys.stderr)
    except (ValueError, TypeError) as exc:
        # Parameter checks in the estimators name the offending argument.
        print(f"fastkern {args.command}: error: {exc}", file=sys.stderr)
    except MemoryError:
        print(f"fastkern {args.command}: error: out of memory", file=sys.stderr)
    except BrokenPipeError:
        # The reader (e.g. `| head`) has gone: stop quietly, and keep Python's
        # final flush of stdout from raising again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
