"""``fastkern ridge``: kernel ridge regression of a CSV file's target column."""
import argparse
import math
import sys
import time

import numpy as np

from fastkern.cli import _common
from fastkern.cli._common import CLIError, Outputs
from fastkern.cli._csv import check_disjoint, feature_columns, read_table

DESCRIPTION = """\
Kernel ridge regression (fastkern.KernelRidge) of the --target column of
TRAIN.csv on its other numeric columns, read and scaled as `fastkern kpca`
reads and scales them (--scale, the default, standardises each feature
column by the training rows' mean and variance, and TEST.csv's rows by the
same). Writes the predictions for the rows of --predict TEST.csv (default:
the training rows' fitted values) as CSV to stdout, the summary on stderr
so that stdout stays clean CSV; or to --out, the summary then on stdout.

TEST.csv needs the training feature columns, found by name when TRAIN.csv
has a header row (in any order, other columns ignored), else by position;
where it has the target column too, the summary gives the test RMSE and R^2.
--id-columns are copied, as read, to the output's first columns."""


def add_parser(sub):
    parser = _common.add_command(
        sub, "ridge", writes_files=True, help="kernel ridge regression of a CSV file",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", metavar="TRAIN.csv", help="training CSV file")
    parser.add_argument("--target", required=True, metavar="C",
                        help="the column to predict (name or 0-based index)")
    parser.add_argument("--predict", default=None, metavar="TEST.csv",
                        help="CSV file of the rows to predict (default: the training rows)")
    # --alpha is the rational quadratic kernel's (every kernel parameter is a flag).
    parser.add_argument("--penalty", type=_common.non_negative_float, default=1.0, metavar="A",
                        help="the ridge penalty, KernelRidge's alpha (default: 1.0)")
    _common.add_kernel(parser, None, "1 / number of features for rbf and most kernels, "
                                     "as KernelRidge")
    _common.add_scale(parser)
    _common.add_table_options(parser)
    _common.add_id_columns(parser)
    parser.add_argument("--out", "--output", dest="out", default=None, metavar="PRED.csv",
                        help="predictions CSV to write (default: stdout)")
    _common.add_threads(parser)
    parser.set_defaults(func=run)


def _read(path, args, header, features, what):
    """(X, y or None, (id column names, id cells or None), the feature columns'
    indices, table) of a CSV file.  features: None for the training file (every column but the
    target, the id and the dropped ones; the target required), else the
    training feature columns (names, or indices as text), found in this one
    (the target read where it has it)."""
    # --drop-columns names the training file's columns; the test file's
    # features are found by name, the rest ignored.
    drop = args.drop_columns if features is None else ()
    given = [*drop, *args.id_columns, args.target, *(features or ())]
    table = read_table(path, header, given, args.decimal)
    ids = table.columns(args.id_columns, "--id-columns")
    if features is None:
        target = [table.column(args.target, "--target")]
    else:
        target = [j for j in range(table.ncols)
                  if (table.names[j] if table.header else str(j)) == args.target]
    check_disjoint(table, ids + target, drop)
    if features is None:
        cols = feature_columns(table, set(ids + target), drop,
                               " besides the target and id columns")
    else:
        cols = [table.column(name, f"{what} (a training feature column)") for name in features]
    id_part = _common.id_columns(table, ids, cols + target, args.drop_missing)
    V, dropped = table.numeric(cols + target, args.drop_missing,
                               ("--id-columns to carry it to the output",))
    table.report_dropped("ridge", dropped)
    y = V[:, len(cols)] if target else None
    return V[:, :len(cols)], y, id_part, cols, table


def run(args):
    _common.check_not_input(args.out, "--out", args.data)
    if args.predict is not None:
        _common.check_not_input(args.out, "--out", args.predict)
    with Outputs("ridge") as outputs:
        # Before reading the data: outputs are checked before any work.
        out = outputs.add(args.out, "--out")
        X, y, ids, cols, table = _read(args.data, args, args.header, None, "--target")
        for warning in table.id_warnings(cols, X):
            print(f"fastkern ridge: warning: {warning}", file=sys.stderr)
        names = [table.names[j] if table.header else str(j) for j in cols]
        n, d = X.shape
        if n < 2:
            raise CLIError(f"{args.data} has {n} data row; kernel ridge needs at least 2")
        Xt, yt = X, None
        if args.predict is not None:
            # The test file has a header row as the training file has, unless told.
            header = table.header if args.header is None else args.header
            Xt, yt, ids, _, _ = _read(args.predict, args, header, names, "--predict")
        if args.scale:
            X, scaler = _common.fitted_scaler(X, names)
            with np.errstate(over="ignore", invalid="ignore"):
                Xt = X if args.predict is None else scaler.transform(Xt)
            if not np.all(np.isfinite(Xt)):
                raise CLIError(f"the values of {args.predict} are too large to standardise "
                               "by the training rows' scale: use --no-scale")
        gamma = _common.resolve_gamma(args.gamma, X, args.kernel)
        from fastkern._threads import blas_limit
        from fastkern.kernel_ridge import KernelRidge

        model = KernelRidge(alpha=args.penalty, kernel=args.kernel, gamma=gamma,
                            n_threads=args.threads, **_common.kernel_kwargs(args))
        t0 = time.perf_counter()
        with blas_limit(args.threads):
            model.fit(X, y)
            fitted = model.predict(X)
            pred = fitted if args.predict is None else model.predict(Xt)
        seconds = time.perf_counter() - t0
        id_names, id_cells = ids
        _common.write_csv(out, id_names + ["prediction"], pred[:, None], ids=id_cells)
        outputs.commit()
    scaling = ("columns standardised by the training rows (--no-scale to turn off)"
               if args.scale else "columns not scaled (--no-scale)")
    kernel = _common.kernel_text(args.kernel, gamma, args.gamma)
    line = (f"kernel ridge ({kernel}, penalty {args.penalty:g}) of {args.target} on {n} training "
            f"rows x {d} features ({','.join(names)}), {scaling}, fit in {seconds:.2f} s: "
            f"training RMSE {_rmse(fitted, y):.4g}")
    if yt is not None:
        line += (f"; {args.predict}: RMSE {_rmse(pred, yt):.4g}, "
                 f"R^2 {_r2(pred, yt):.4g} on {len(yt)} rows")
    elif args.predict is not None:
        line += f"; predicted {len(pred)} rows of {args.predict}"
    if args.out is not None:
        line += f"; wrote {args.out}"
    _common.print_summary([line], args.out)
    return 0


def _rmse(pred, y):
    return math.sqrt(float(np.mean((pred - y) ** 2)))


def _r2(pred, y):
    total = float(np.sum((y - np.mean(y)) ** 2))
    return 1.0 - float(np.sum((pred - y) ** 2)) / total if total > 0 else float("nan")
