"""``fastkern test mmd`` and ``fastkern test hsic``: kernel tests on CSV files."""
import argparse
import sys

import numpy as np

from fastkern.cli import _common
from fastkern.cli._common import CLIError
from fastkern.cli._csv import check_disjoint, feature_columns, read_table

DESCRIPTION = """\
Kernel tests on CSV files (UTF-8, header row optional and detected as for
kpca; --header/--no-header override it).

  fastkern test mmd A.csv B.csv    two-sample test: do the rows of A and B
                                   come from the same distribution?
  fastkern test hsic DATA.csv --x-columns a,b --y-columns c
                                   independence test between two groups of
                                   columns (names or 0-based indices; either
                                   option alone takes the other columns as
                                   the other group)

Prints what was tested, the statistic and its p-value. Columns are
standardised to mean 0 and variance 1 first (--scale, the default, as kpca
and cca; for mmd with the pooled mean and variance of both files, which
keeps the test exact); --no-scale uses them as they are. The RBF-type
kernels take gamma from the median heuristic unless --gamma is given.
P-values come from --permutations random permutations drawn from --seed (the
same seed gives the same output) or, with --method gamma, from the Gamma
approximation. --drop-columns leaves columns out (a row id); --drop-missing
drops the rows with a missing value."""


def _add_test_options(parser):
    _common.add_kernel(parser, "median", "median")
    parser.add_argument("--estimator", default="unbiased",
                        choices=["unbiased", "biased", "hyppo", "hyppo_biased"],
                        help="statistic (default: unbiased; hyppo: hyppo's normalised one)")
    parser.add_argument("--method", default="permutation", choices=["permutation", "gamma"],
                        help="p-value by permutations or the Gamma approximation "
                             "(default: permutation)")
    parser.add_argument("--permutations", type=_common.positive_int, default=1000, metavar="B",
                        help="number of permutations (default: 1000)")
    _common.add_scale(parser, "each column")
    _common.add_table_options(parser)
    _common.add_threads(parser)
    _common.add_seed(parser)


def add_parser(sub):
    parser = _common.add_command(
        sub, "test", help="kernel two-sample (mmd) and independence (hsic) tests of CSV files",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    tests = parser.add_subparsers(dest="test", metavar="TEST", parser_class=_common.Parser)
    tests.required = True
    mmd = _common.add_command(
        tests, "mmd", help="kernel two-sample test (MMD)",
        description="Kernel two-sample test (MMD): do the rows of the two CSV files come from "
                    "the same distribution? Both files need the same columns.")
    mmd.add_argument("data_x", metavar="A.csv", help="first sample")
    mmd.add_argument("data_y", metavar="B.csv", help="second sample")
    _add_test_options(mmd)
    mmd.set_defaults(func=run_mmd)
    hsic = _common.add_command(
        tests, "hsic", help="kernel independence test (HSIC)",
        description="Kernel independence test (HSIC) between two groups of columns of one CSV "
                    "file, the same kernel on both.")
    hsic.add_argument("data", metavar="DATA.csv", help="input CSV file")
    hsic.add_argument("--x-columns", type=_common.column_list, default=None, metavar="C1,C2,...",
                      help="columns of the first group (names or 0-based indices)")
    hsic.add_argument("--y-columns", type=_common.column_list, default=None, metavar="C1,C2,...",
                      help="columns of the second group (default: the columns not in "
                           "--x-columns)")
    _add_test_options(hsic)
    hsic.set_defaults(func=run_hsic)


def _result_lines(result, kind, args, note):
    """What was tested, the statistic, the p-value."""
    if result.method == "gamma":
        how = "Gamma approximation of the biased statistic's null"
    else:
        how = f"{args.permutations} permutations, seed {args.seed}"
    return [f"statistic ({result.estimator} {kind}): {result.statistic:.10g}",
            f"p-value: {result.pvalue:.6g} ({how})", note]


def _gamma(args, Z):
    """What the tests get: "median" stays theirs, "scale" is resolved here."""
    if args.gamma == "scale":
        return _common.resolve_gamma("scale", Z, args.kernel)
    return args.gamma


def _kernel_note(kernel, params, gamma_option):
    if "gamma" not in params:
        return f"kernel: {kernel}"
    source = {"median": "median heuristic", "scale": "scale"}.get(gamma_option, "given")
    return f"kernel: {kernel}, gamma {params['gamma']:.6g} ({source})"


def _scaling(args):
    return ("columns standardised (--no-scale to turn off)" if args.scale
            else "columns not scaled (--no-scale)")


def _report(table, X, dropped, cols, command):
    table.report_dropped(command, dropped)
    for warning in table.id_warnings(cols, X):
        print(f"fastkern {command}: warning: {table.path}: {warning}", file=sys.stderr)


def run_mmd(args):
    from fastkern._threads import blas_limit
    from fastkern.kernel_tests import mmd_test

    samples = []
    for path in (args.data_x, args.data_y):
        table = read_table(path, args.header, args.drop_columns, args.decimal)
        cols = feature_columns(table, set(), args.drop_columns)
        X, dropped = table.numeric(cols, args.drop_missing)
        _report(table, X, dropped, cols, "test mmd")
        samples.append(X)
    A, B = samples
    if A.shape[1] != B.shape[1]:
        raise CLIError(f"{args.data_x} has {A.shape[1]} columns and {args.data_y} has "
                       f"{B.shape[1]}: the two samples need the same columns")
    if args.scale:
        # One scaling for both samples: the pooled one, the same whichever
        # way the rows are split, so permutations remain a valid null.
        pooled, _ = _common.standardise(np.vstack([A, B]), [table.names[j] for j in cols])
        A, B = pooled[:len(A)], pooled[len(A):]
    with blas_limit(args.threads):
        result = mmd_test(A, B, kernel=args.kernel, gamma=_gamma(args, np.vstack([A, B])),
                          estimator=args.estimator, method=args.method,
                          n_permutations=args.permutations, random_state=args.seed,
                          n_threads=args.threads, **_common.kernel_kwargs(args))
    head = (f"MMD two-sample test: {args.data_x} ({A.shape[0]} rows) vs {args.data_y} "
            f"({B.shape[0]} rows), {A.shape[1]} columns, {_scaling(args)}")
    note = _kernel_note(args.kernel, result.kernel_params, args.gamma)
    for line in [head] + _result_lines(result, "MMD^2", args, note):
        print(line)
    return 0


def run_hsic(args):
    from fastkern._threads import blas_limit
    from fastkern.kernel_tests import hsic_test

    if args.x_columns is None and args.y_columns is None:
        raise CLIError("give --x-columns and/or --y-columns (the other group is the remaining "
                       "columns)")
    given = [*(args.x_columns or ()), *(args.y_columns or ()), *args.drop_columns]
    table = read_table(args.data, args.header, given, args.decimal)
    xs = table.columns(args.x_columns, "--x-columns") if args.x_columns is not None else None
    ys = table.columns(args.y_columns, "--y-columns") if args.y_columns is not None else None
    check_disjoint(table, (xs or []) + (ys or []), args.drop_columns)
    if xs is None:
        xs = feature_columns(table, set(ys), args.drop_columns)
    if ys is None:
        ys = feature_columns(table, set(xs), args.drop_columns)
    if set(xs) & set(ys):
        raise CLIError("--x-columns and --y-columns share a column")
    V, dropped = table.numeric(xs + ys, args.drop_missing)
    _report(table, V, dropped, xs + ys, "test hsic")
    X, Y = V[:, :len(xs)], V[:, len(xs):]
    if args.scale:
        X, _ = _common.standardise(X, [table.names[j] for j in xs])
        Y, _ = _common.standardise(Y, [table.names[j] for j in ys])
    with blas_limit(args.threads):
        result = hsic_test(X, Y, kernel_x=args.kernel, kernel_y=args.kernel,
                           gamma_x=_gamma(args, X), gamma_y=_gamma(args, Y),
                           estimator=args.estimator, method=args.method,
                           n_permutations=args.permutations, random_state=args.seed,
                           n_threads=args.threads, **_hsic_kwargs(args))
    names = table.names
    head = (f"HSIC independence test: {args.data} ({X.shape[0]} rows), "
            f"X = {','.join(names[j] for j in xs)}, Y = {','.join(names[j] for j in ys)}, "
            f"{_scaling(args)}")
    note = "; ".join(f"{v} {_kernel_note(args.kernel, p, args.gamma)}" for v, p in
                     (("X", result.kernel_params_x), ("Y", result.kernel_params_y)))
    for line in [head] + _result_lines(result, "HSIC", args, note):
        print(line)
    return 0


def _hsic_kwargs(args):
    """degree, coef0 and order as hsic_test takes them: kernel_params of both views."""
    kwargs = _common.kernel_kwargs(args)
    params = {**kwargs.pop("kernel_params", {}), **kwargs}
    return {"kernel_params_x": params, "kernel_params_y": params} if params else {}
