"""``fastkern cca``: kernel canonical correlation of two sets of columns of a CSV file."""
import argparse
import sys
import time
import warnings

from fastkern import _solver_names
from fastkern.cli import _common
from fastkern.cli._common import CLIError, Outputs, fmt_vals
from fastkern.cli._csv import check_disjoint, read_table

DESCRIPTION = """\
Regularised kernel canonical correlation analysis (fastkern.KernelCCA) of two
sets of columns of a CSV file: X (--x-columns) and Y (--y-columns), given by
name or 0-based index; other columns are ignored and may hold text. Prints the
canonical correlations, and writes the canonical variates (x_variate1..K,
y_variate1..K, unit variance on these data) as CSV to stdout, the summary and
warnings then on stderr so that stdout stays clean CSV; or to --out, the
summary then on stdout.

The regularisation r (--regularization) is kernlab's kcca gamma: each
variate's coefficients a satisfy a'(K K + r K)a = 1 with the centred kernel
K. Columns are standardised before the kernels (--scale, the default). The
header row is detected as for `fastkern kpca` (--header / --no-header
override); missing values as there (--drop-missing). Nothing is random: two
runs print the same bytes."""


def solvers():
    """KernelCCA's solver values (fastkern._solver_names: the help lists them
    without importing the estimator)."""
    return ["auto"] + sorted(set(_solver_names.KERNEL_CCA) - {"auto"})


def add_parser(sub):
    parser = _common.add_command(
        sub, "cca", writes_files=True,
        help="kernel canonical correlation of two column sets of a CSV",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", metavar="DATA.csv", help="input CSV file")
    parser.add_argument("--x-columns", type=_common.column_list, required=True, metavar="A,B,...",
                        help="columns of the first view X (names, or 0-based indices)")
    parser.add_argument("--y-columns", type=_common.column_list, required=True, metavar="C,D,...",
                        help="columns of the second view Y (names, or 0-based indices)")
    _common.add_kernel(parser, None, "1 / number of columns of each view")
    _common.add_kernel(parser, None, "--gamma, resolved on Y", suffix="-y", which="Y")
    parser.add_argument("--components", "--n-components", dest="components",
                        type=_common.positive_int, default=2, metavar="K",
                        help="number of canonical pairs (default: 2)")
    parser.add_argument("--regularization", type=_common.non_negative_float, default=0.1,
                        metavar="R", help="ridge r of the constraint a'(K K + r K)a = 1, "
                                          "kernlab's gamma (default: 0.1)")
    parser.add_argument("--solver", default="auto", choices=solvers(),
                        help="KernelCCA's solver (default: auto: dense up to 3,000 rows)")
    _common.add_scale(parser, "each column")
    _common.add_table_options(parser)
    _common.add_id_columns(parser)
    parser.add_argument("--out", "--output", dest="out", default=None, metavar="VARIATES.csv",
                        help="canonical variates CSV to write (default: stdout)")
    parser.add_argument("--verbose", action="store_true",
                        help="report reading, scaling and fitting on stderr")
    _common.add_threads(parser)
    parser.set_defaults(func=run)


def read_views(args, say):
    """(X, Y, x_names, y_names, table) of the selected columns."""
    t0 = time.perf_counter()
    table = read_table(args.data, args.header,
                       [*args.x_columns, *args.y_columns, *args.drop_columns, *args.id_columns],
                       args.decimal)
    xi = table.columns(args.x_columns, "--x-columns")
    yi = table.columns(args.y_columns, "--y-columns")
    both = sorted(set(xi) & set(yi))
    if both:
        raise CLIError(f"column(s) {', '.join(table.names[j] for j in both)} are in both "
                       "--x-columns and --y-columns")
    ids = table.columns(args.id_columns, "--id-columns")
    check_disjoint(table, xi + yi + ids, args.drop_columns)
    args.ids = _common.id_columns(table, ids, xi + yi, args.drop_missing)
    V, dropped = table.numeric(xi + yi, args.drop_missing,
                               ("--id-columns to carry it to the output",))
    table.report_dropped("cca", dropped)
    for warning in table.id_warnings(xi + yi, V):
        print(f"fastkern cca: warning: {warning}", file=sys.stderr)
    say(f"read {V.shape[0]} rows from {args.data} in {time.perf_counter() - t0:.2f} s "
        f"(header row: {'yes' if table.header else 'no'}, "
        f"{'detected' if table.header_detected else 'given'})")
    return (V[:, :len(xi)], V[:, len(xi):], [table.names[j] for j in xi],
            [table.names[j] for j in yi], table)


def run(args):
    _common.check_not_input(args.out, "--out", args.data)
    say = _common.verbose_printer(args.verbose, "cca")
    from fastkern._threads import blas_limit

    with Outputs("cca") as outputs:
        # Before reading the data: outputs are checked before any work.
        csv_out = outputs.add(args.out, "--out")
        views = read_views(args, say)
        with blas_limit(args.threads):
            lines = _cca(args, views, csv_out, say)
        outputs.commit()
    _common.print_summary(lines, args.out)
    return 0


def _cca(args, views, csv_out, say):
    from fastkern.cca import KernelCCA

    X, Y, x_names, y_names, table = views
    n = X.shape[0]
    if n < 2:
        raise CLIError(f"{args.data} has {n} data row; kernel CCA needs at least 2")
    if args.components > n - 1:
        raise CLIError(f"--components {args.components} needs at least {args.components + 1} "
                       f"data rows; {args.data} has {n}")
    if args.scale:
        X, _ = _common.standardise(X, x_names)
        Y, _ = _common.standardise(Y, y_names)
        say("standardised the columns of both views to mean 0, variance 1")
    kernel_y = args.kernel if args.kernel_y is None else args.kernel_y
    # A number as given; "median"/"scale" resolved on each view's own columns;
    # the default, as KernelCCA's, 1 / number of columns of each view.
    given_y = args.gamma if args.gamma_y is None else args.gamma_y
    gamma_x = _common.resolve_gamma(args.gamma, X, args.kernel)
    gamma_y = _common.resolve_gamma(given_y, Y, kernel_y)
    kw_x = _common.kernel_kwargs(args)
    kw_y = {f"{k}_y": v for k, v in _common.kernel_kwargs(args, "_y").items()}
    kw_y = {**{f"{k}_y": v for k, v in kw_x.items()}, **kw_y}
    model = KernelCCA(n_components=args.components, kernel=args.kernel, gamma=gamma_x,
                      kernel_y=kernel_y, gamma_y=gamma_y, regularization=args.regularization,
                      solver=args.solver, n_threads=args.threads, **kw_x, **kw_y)
    shown = lambda g: "none" if g is None else f"{g:.4g}"  # noqa: E731
    kernels = f"{args.kernel} / {kernel_y}, gamma {shown(gamma_x)} / {shown(gamma_y)}"
    say(f"fitting: kernels {kernels}, regularization {args.regularization:.4g}, "
        f"solver {args.solver}, {args.components} component(s)")
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        A, B = model.fit(X, Y).transform(X, Y)
    say(f"fit done in {time.perf_counter() - t0:.2f} s (solver {model.solver_})")
    k = args.components
    id_names, id_cells = args.ids
    _common.write_csv(csv_out, id_names + [f"x_variate{j + 1}" for j in range(k)]
                      + [f"y_variate{j + 1}" for j in range(k)],
                      ([*a, *b] for a, b in zip(A, B)), ids=id_cells)
    scaling = ("columns standardised (--no-scale to turn off)" if args.scale
               else "columns not scaled (--no-scale)")
    lines = _common.summary_lines(
        f"kernel CCA ({kernels}, regularization {args.regularization:.4g}, solver "
        f"{model.solver_}) of {n} samples, X: {','.join(x_names)}, Y: {','.join(y_names)}, "
        f"{scaling}: canonical correlations {fmt_vals(model.canonical_correlations_)}",
        table, args.out, (n, 2 * k))
    for warning in caught:
        print(f"fastkern cca: warning: {warning.message}", file=sys.stderr)
    return lines
