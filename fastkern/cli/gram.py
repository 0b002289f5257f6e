"""``fastkern gram``: the kernel matrix of the numeric columns of a CSV file."""
import argparse
import sys
import time

import numpy as np

from fastkern.cli import _common
from fastkern.cli._common import CLIError, Outputs
from fastkern.cli._csv import check_disjoint, feature_columns, read_table

DESCRIPTION = """\
The kernel (Gram) matrix K[i, j] = k(x_i, x_j) of the rows of a CSV file's
numeric columns, read and scaled as `fastkern kpca` reads and scales them
(--scale, the default, standardises each column; --no-scale uses the values
as they are). The same kernels and parameters as kpca and the Gram
functions (fastkern.rbf_kernel and the rest).

Output, by --out's extension: .npy writes NumPy's format (float64, for
numpy.load); anything else, or stdout without --out, CSV: one row of K a
line, each value as repr(float) (it reads back as the same float64), no
header. With --id-columns, each line starts with the row's id cells and a
header names the id columns, then the rows by the first id column. The
summary goes to stderr when K goes to stdout, else to stdout.

K has N x N values: 20,000 rows are 3.2 GB in memory and more as CSV."""


def add_parser(sub):
    parser = _common.add_command(
        sub, "gram", writes_files=True, help="the kernel matrix of a CSV file",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("data", metavar="DATA.csv", help="input CSV file")
    _common.add_kernel(parser, None, "1 / number of features for rbf and most kernels, "
                                     "as the Gram functions")
    _common.add_scale(parser)
    _common.add_table_options(parser)
    _common.add_id_columns(parser)
    parser.add_argument("--out", "--output", dest="out", default=None, metavar="K.npy|K.csv",
                        help="file to write (.npy: NumPy's format; else CSV; default: CSV "
                             "on stdout)")
    _common.add_threads(parser)
    parser.set_defaults(func=run)


def run(args):
    _common.check_not_input(args.out, "--out", args.data)
    with Outputs("gram") as outputs:
        # Before reading the data: outputs are checked before any work.
        out = outputs.add(args.out, "--out")
        table = read_table(args.data, args.header, [*args.drop_columns, *args.id_columns],
                           args.decimal)
        id_cols = table.columns(args.id_columns, "--id-columns")
        check_disjoint(table, id_cols, args.drop_columns)
        cols = feature_columns(table, set(id_cols), args.drop_columns,
                               " besides the id columns")
        id_names, id_cells = _common.id_columns(table, id_cols, cols, args.drop_missing)
        X, dropped = table.numeric(cols, args.drop_missing,
                                   ("--id-columns to carry it to the output",))
        table.report_dropped("gram", dropped)
        for warning in table.id_warnings(cols, X):
            print(f"fastkern gram: warning: {warning}", file=sys.stderr)
        names = [table.names[j] for j in cols]
        if args.scale:
            X, _ = _common.standardise(X, names)
        gamma = _common.resolve_gamma(args.gamma, X, args.kernel)
        from fastkern._kernel_api import KernelSpec
        from fastkern._threads import blas_limit

        t0 = time.perf_counter()
        spec = KernelSpec.from_params(args.kernel, gamma=gamma, **_common.kernel_kwargs(args))
        with blas_limit(args.threads):
            try:
                K = spec.gram(X, n_threads=args.threads)
            except ValueError as exc:
                if args.scale and "negative" in str(exc):
                    raise CLIError(f"{exc} (the {args.kernel} kernel takes non-negative "
                                   "values; standardised columns have negative ones: use "
                                   "--no-scale)") from None
                raise
        seconds = time.perf_counter() - t0
        K = np.asarray(K, dtype=np.float64)
        if args.out is not None and str(args.out).lower().endswith(".npy"):
            with out.open(binary=True) as f:
                np.save(f, K, allow_pickle=False)
            written = "NumPy .npy"
        else:
            header = None
            if id_cells is not None:
                header = id_names + [row[0] for row in id_cells]
            _common.write_csv(out, header, K, ids=id_cells)
            written = "CSV"
        outputs.commit()
    n, d = X.shape
    scaling = ("columns standardised (--no-scale to turn off)" if args.scale
               else "columns not scaled (--no-scale)")
    lines = [f"kernel matrix ({_common.kernel_text(args.kernel, gamma, args.gamma)}) of {n} "
             f"samples x {d} features ({','.join(names)}), {scaling}: {n} x {n} in "
             f"{seconds:.2f} s, {written}" + ("" if args.out is None else f", wrote {args.out}")]
    _common.print_summary(lines, args.out)
    return 0
