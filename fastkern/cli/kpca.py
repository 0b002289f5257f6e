"""``fastkern kpca``: kernel PCA of the numeric columns of a CSV file."""
import argparse
import contextlib
import os
import sys
import time

import numpy as np

from fastkern import _solver_names
from fastkern.cli import _common
from fastkern.cli._common import PLOT_EXTRA, CLIError, Outputs, fmt_vals
from fastkern.cli._csv import check_disjoint, feature_columns, read_table

DESCRIPTION = f"""\
Kernel PCA of the numeric columns of a CSV file (UTF-8, a byte-order mark is
fine; comma, semicolon, tab or bar as delimiter). Writes the projection as CSV
to stdout, with the summary, progress and warnings on stderr, so that stdout
stays clean CSV; or to --out, the summary then on stdout (progress and
warnings still on stderr).

Columns are standardised to mean 0 and variance 1 before the kernel is
applied (--scale, the default; a constant column becomes 0): on raw
measurements in different units a kernel with gamma = 1/features sees almost
no similarity between points and puts nearly all of them at one spot.
--no-scale uses the values as they are. A warning is printed when the
embedding is degenerate (its first components carried by a few points), and
when a column looks like a row id (leave it out with --drop-columns).

A header row is optional and detected: the first row is a header when it
holds the --label-column or a --drop-columns name, has no number at all, or
is 0,1,2,... or 1,2,3,...; otherwise its cells vote, a cell counting as a
name when it is text above numbers, an integer above decimals (a year), one
of consecutive integers (2019,2020,label), or a new value above a column of
repeating classes, and as data when it is a
number like those below it or a value found in its column. More name votes
make it a header; a tie or a repeated cell makes it data. A first row with
numbers in it that is taken as a header is reported. --header or --no-header overrides the detection.

A missing value (empty, NA, N/A, NaN, null, None, ?) is an error; with
--drop-missing its row is left out and the count is reported.

--plot draws the first two components, coloured by --label-column (a legend
for a few classes, a colour bar for a numeric label with many values), the
axes labelled with each component's share of the total feature-space
variance (the trace of the centred kernel matrix). It needs matplotlib
({PLOT_EXTRA}).

On a terminal a progress bar shows the fit's stage, elapsed time, and, once
the eigensolver has run a few iterations, the percentage and time left
(--no-progress hides it; --progress shows it in a log, a line per step).

Random choices (starting vectors, Nystroem landmarks) use --seed, so two runs
give the same output."""

# An embedding is degenerate when each of its first two components is
# carried by fewer than this fraction of the points.  Measured on sklearn's
# data with the RBF default gamma: unscaled wine, breast_cancer and digits
# give 0.4-1.4% (one or a few points off a common spot); standardised, the
# same data give 44-60%, and no other case tried (iris, diabetes, Gaussian
# blobs, scaled or not, RBF or linear) went below 4%.
DEGENERATE_SHARE = 0.03


def solvers():
    """KernelPCA's eigen_solver values, "auto" first (fastkern._solver_names: the
    help lists them without importing the estimator)."""
    return ["auto"] + sorted(s for s in _solver_names.KERNEL_PCA if s != "auto")


def deprecated_solvers():
    return dict(_solver_names.KERNEL_PCA_DEPRECATED)


def add_parser(sub):
    parser = _common.add_command(
        sub, "kpca", writes_files=True, help="kernel PCA of a CSV file", description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", metavar="DATA.csv", help="input CSV file")
    _common.add_kernel(parser, None, "1 / number of features for rbf and most kernels, "
                                     "as KernelPCA")
    parser.add_argument("--components", type=_common.positive_int, default=2, metavar="K",
                        help="number of components (default: 2)")
    names = solvers()
    parser.add_argument("--solver", default="auto", choices=names + list(deprecated_solvers()),
                        metavar="{" + ",".join(names) + "}",
                        help="eigensolver (KernelPCA's eigen_solver; default: auto; " + "; ".join(
                            f"'{old}' is the deprecated name of {new}"
                            for old, new in deprecated_solvers().items()) + ")")
    _common.add_scale(parser)
    _common.add_table_options(parser)
    _common.add_id_columns(parser)
    parser.add_argument("--label-column", default=None, metavar="C",
                        help="class column (name or 0-based index): not a feature, colours the "
                             "plot and is copied to the output")
    parser.add_argument("--out", default=None, metavar="PROJ.csv",
                        help="projection CSV to write (default: stdout)")
    parser.add_argument("--plot", default=None, metavar="PROJ.png",
                        help=f"scatter plot of the first two components ({PLOT_EXTRA})")
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bar with the time left on stderr (default: when stderr "
                             "is a terminal; --progress elsewhere writes a line per step)")
    parser.add_argument("--verbose", action="store_true",
                        help="report reading, scaling and the eigensolver's iterations on stderr")
    _common.add_threads(parser)
    _common.add_seed(parser)
    parser.set_defaults(func=run)


def run(args):
    say = _common.verbose_printer(args.verbose, "kpca")
    _common.check_not_input(args.out, "--out", args.data)
    if args.solver in deprecated_solvers():
        new = deprecated_solvers()[args.solver]
        print(f"fastkern kpca: warning: --solver {args.solver} is deprecated and will be "
              f"removed in fastkern 0.3; use --solver {new} (the same solver)", file=sys.stderr)
        args.solver = new
    with Outputs("kpca") as outputs:
        # Before reading the data: outputs are checked before any work.
        csv_out = outputs.add(args.out, "--out")
        plot_out = outputs.add(args.plot, "--plot", plot=True)
        t0 = time.perf_counter()
        given = [c for c in [args.label_column, *args.drop_columns, *args.id_columns]
                 if c is not None]
        table = read_table(args.data, args.header, given, args.decimal)
        label = None if args.label_column is None else table.column(args.label_column,
                                                                    "--label-column")
        id_cols = table.columns(args.id_columns, "--id-columns")
        check_disjoint(table, id_cols + ([] if label is None else [label]), args.drop_columns)
        cols = feature_columns(table, {label, *id_cols}, args.drop_columns,
                               " besides the label and id columns")
        args.ids = _common.id_columns(table, id_cols, cols + ([] if label is None else [label]),
                                      args.drop_missing)
        X, dropped = table.numeric(cols, args.drop_missing,
                                   ("--id-columns to carry it to the output",)
                                   + (("--label-column for a class column",)
                                      if label is None else ()))
        labels = (None if label is None else
                  [r[0] for r in table.kept_cells([label], cols, args.drop_missing)])
        args.label_name = None if label is None else table.names[label]
        table.report_dropped("kpca", dropped)
        for warning in table.id_warnings(cols, X):
            print(f"fastkern kpca: warning: {warning}", file=sys.stderr)
        n, d = X.shape
        say(f"read {n} rows x {d} feature columns from {args.data} in "
            f"{time.perf_counter() - t0:.2f} s (header row: {'yes' if table.header else 'no'}, "
            f"{'detected' if table.header_detected else 'given'})")
        from fastkern._progress import reporting_progress
        from fastkern._threads import blas_limit

        bar = _common.progress_bar(args, "kpca")
        try:
            with blas_limit(args.threads), reporting_progress(bar) if bar is not None \
                    else contextlib.nullcontext():
                lines = _kpca(args, table, X, labels, [table.names[j] for j in cols],
                              csv_out, plot_out, say)
        finally:
            if bar is not None:
                bar.close()
        outputs.commit()
    _common.print_summary(lines, args.out)
    return 0


def participation(Z):
    """(sum z^2)^2 / sum z^4 of each column: about how many points carry it.

    Equal to n when every point is as far out as the others, to 1 when a
    single point carries the whole component.
    """
    Z = np.asarray(Z, dtype=np.float64)
    Z = Z - Z.mean(axis=0)
    s2 = np.sum(Z ** 2, axis=0)
    s4 = np.sum(Z ** 4, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(s4 > 0, s2 ** 2 / s4, 0.0)


def degenerate_warning(Z, scaled, kernel):
    """A warning line when most points of the embedding sit on one spot, else None."""
    n = Z.shape[0]
    shown = Z[:, :2]
    carriers = participation(shown)
    if n < 10 or not np.all(carriers < DEGENERATE_SHARE * n):
        return None
    if len(carriers) == 1:
        which = f"PC1 is carried by about {carriers[0]:.1f}"
    else:
        which = f"PC1 and PC2 are carried by about {carriers[0]:.1f} and {carriers[1]:.1f}"
    message = (f"warning: degenerate embedding: {which} of {n} points, and the other points "
               "sit near one spot")
    tips = []
    if not scaled:
        tips.append("standardise the columns (drop --no-scale)")
    from fastkern.pairwise import KERNEL_PARAMS

    # Every kernel with a gamma: a smaller one spreads the similarity out.
    if "gamma" in KERNEL_PARAMS.get(kernel, ()):
        tips.append("try a smaller --gamma (the kernel sees almost no similarity between "
                    "the points)")
    if tips:
        message += "; " + " or ".join(tips)
    return message


def total_variance(kpca, X):
    """The trace of the fitted kpca's centred kernel matrix: sum_i k(x_i, x_i) - 1'K1 / n.

    The diagonal in row blocks, 1'K1 in one matrix-free pass: no N x N array.
    """
    from fastkern._progress import pass_label
    from fastkern.large_n import KernelOperator

    spec = kpca.kernel_spec_
    n = X.shape[0]
    diagonal = sum(float(np.trace(spec.gram(X[i:i + 256], n_threads=kpca.n_threads)))
                   for i in range(0, n, 256))
    with pass_label("total variance"):
        ones = KernelOperator.from_spec(X, spec, n_threads=kpca.n_threads).matmat(
            np.ones((n, 1)))
    return diagonal - float(ones.sum()) / n


def _kpca(args, table, X, labels, names, csv_out, plot_out, say):
    from fastkern.decomposition import KernelPCA

    n, d = X.shape
    if n < 2:
        raise CLIError(f"{args.data} has {n} data row; kernel PCA needs at least 2")
    if args.components > n - 1:
        raise CLIError(f"--components {args.components} needs at least {args.components + 1} "
                       f"data rows; {args.data} has {n}")
    constant = 0
    if args.scale:
        X, constant = _common.standardise(X, names)
        say(f"standardised {d} columns to mean 0, variance 1 ({constant} constant column(s) "
            "set to 0)")
    gamma = _common.resolve_gamma(args.gamma, X, args.kernel)
    kpca = KernelPCA(n_components=args.components, kernel=args.kernel, gamma=gamma,
                     eigen_solver=args.solver, n_threads=args.threads, verbose=args.verbose,
                     random_state=args.seed, **_common.kernel_kwargs(args))
    say(f"fitting: kernel {args.kernel}, solver {args.solver}, {args.components} "
        f"component(s), seed {args.seed}")
    t0 = time.perf_counter()
    # stdout may be the projection CSV: whatever a solver prints goes to stderr.
    with contextlib.redirect_stdout(sys.stderr):
        try:
            Z = kpca.fit_transform(X)
        except ValueError as exc:
            if args.scale and "negative" in str(exc):
                raise CLIError(f"{exc} (the {args.kernel} kernel takes non-negative values; "
                               "standardised columns have negative ones: use --no-scale)") \
                    from None
            raise
    gamma = getattr(kpca, "gamma_", gamma)
    solver = getattr(kpca, "_fit_solver", args.solver)
    kernel = _common.kernel_text(args.kernel, gamma, args.gamma)
    say(f"fit done in {time.perf_counter() - t0:.2f} s (solver {solver})")
    _write_projection(Z, labels, args, csv_out)

    if args.scale:
        constants = f", {constant} constant set to 0" if constant else ""
        scaling = f"columns standardised (mean 0, variance 1{constants}; --no-scale to turn off)"
    else:
        scaling = "columns not scaled (--no-scale)"
    lines = _common.summary_lines(
        f"kernel PCA ({kernel}, solver {solver}, seed {args.seed}) of {n} samples x {d} "
        f"features ({','.join(names)}), {scaling}: eigenvalues "
        f"{fmt_vals(np.asarray(kpca.eigenvalues_))}",
        table, args.out, (n, Z.shape[1] + (labels is not None)))
    warning = degenerate_warning(Z, args.scale, args.kernel)
    if warning is not None:
        print(f"fastkern kpca: {warning}", file=sys.stderr)
    if plot_out is not None:
        _plot(args, kpca, X, Z, labels, plot_out)
        lines.append(f"wrote {args.plot}")
    return lines


def _write_projection(Z, labels, args, csv_out):
    id_names, id_cells = args.ids
    header = id_names + [f"PC{k + 1}" for k in range(Z.shape[1])]
    if labels is not None:
        header.append(args.label_name)
    _common.write_csv(csv_out, header, Z, labels, id_cells)


def _plot(args, kpca, X, Z, labels, plot_out):
    from fastkern.cli._plot import pyplot, save, scatter

    n = Z.shape[0]
    share = np.asarray(kpca.eigenvalues_) / total_variance(kpca, X)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 5.2))
    xlabel = f"PC1 ({share[0]:.1%} of total variance)"
    if Z.shape[1] >= 2:
        P = Z[:, :2]
        ylabel = f"PC2 ({share[1]:.1%} of total variance)"
    else:
        P = np.column_stack([Z[:, 0], np.arange(n)])
        ylabel = "sample index"
    scaled = "standardised columns" if args.scale else "unscaled columns"
    title = f"Kernel PCA ({args.kernel}) of {os.path.basename(args.data)}, {scaled}"
    scatter(fig, ax, P, labels, title, xlabel, ylabel, args.label_name)
    save(fig, plot_out)
    plt.close(fig)
