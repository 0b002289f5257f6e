"""The ``fastkern`` command line: ``demo``, ``kpca``, ``cca``, ``test`` and ``bench``.

Every user error (unreadable file, missing column, non-numeric data, too few
rows, bad option value, unwritable output path) ends the program with one line
on stderr and exit status 2; Ctrl-C ends it with one line and status 130.
Output paths are checked before any work starts, and every output file is
written under a temporary name in its own directory and renamed only when the
command succeeds, so an error or an interrupt never leaves a partial file.
Every random choice (eigensolver starting vectors, Nystroem landmarks) is
seeded, so a command run twice prints the same bytes.
"""
import argparse
import contextlib
import csv
import math
import os
import re
import sys
import tempfile
import time
import warnings

import numpy as np

EXIT_USAGE = 2
# The shell's status for a program ended by SIGINT (128 + 2).
EXIT_INTERRUPTED = 130
DEFAULT_SEED = 0
SOLVERS = ("auto", "dense", "block_krylov", "arpack", "randomized", "matrix-free", "nystrom")
# Old --solver names, accepted with a warning on stderr until fastkern 0.3.
DEPRECATED_SOLVERS = {"lanczos": "block_krylov"}


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


def _seed(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if not 0 <= value < 2 ** 32:
        raise argparse.ArgumentTypeError(f"expected an integer from 0 to 2**32 - 1, got {value}")
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


# ---------------------------------------------------------------- output files


class _Output:
    """An output file reserved before the work starts and renamed into place at the end.

    Reserving creates the temporary file next to the target, which is the
    real test that the path can be written (a missing or read-only
    directory, a path that is a directory); an error or Ctrl-C removes it.
    """

    def __init__(self, path, option, plot=False):
        self.path, self.option, self.tmp = path, option, None
        self.format = _plot_format(path, option) if plot else None
        if os.path.isdir(path):
            raise CLIError(f"{option} {path} is a directory")
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            what = "is not a directory" if os.path.exists(folder) else "does not exist"
            raise CLIError(f"cannot write {option} {path}: directory {folder} {what}")
        if os.path.exists(path) and not os.access(path, os.W_OK):
            raise CLIError(f"cannot write {option} {path}: the file is read-only")
        try:
            fd, self.tmp = tempfile.mkstemp(dir=folder, prefix=f".{os.path.basename(path)}.",
                                            suffix=".part")
        except OSError as exc:
            raise CLIError(f"cannot write {option} {path}: {exc.strerror or exc}") from None
        os.close(fd)

    def commit(self):
        # mkstemp makes the file private (0600); give it the mode a plain
        # open() would have, or keep that of the file it replaces.
        try:
            mode = os.stat(self.path).st_mode & 0o7777
        except OSError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        try:
            os.chmod(self.tmp, mode)
            os.replace(self.tmp, self.path)
        except OSError as exc:
            raise CLIError(f"cannot write {self.option} {self.path}: "
                           f"{exc.strerror or exc}") from None
        self.tmp = None

    def discard(self):
        if self.tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.tmp)
            self.tmp = None


def _plot_format(path, option):
    """The image format matplotlib infers from the extension, checked before any work."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.backend_bases import FigureCanvasBase

    ext = os.path.splitext(path)[1][1:].lower()
    fmt = ext or matplotlib.rcParams["savefig.format"]
    supported = FigureCanvasBase.get_supported_filetypes()
    if fmt not in supported:
        raise CLIError(f"{option} {path}: unknown image format {fmt!r} "
                       f"(use one of {', '.join(sorted(supported))})")
    return fmt


class _Outputs:
    """The command's output files: all reserved up front, all renamed at the end."""

    def __init__(self):
        self.files = []

    def add(self, path, option, plot=False):
        if path is None:
            return None
        for other in self.files:
            if os.path.abspath(other.path) == os.path.abspath(path):
                raise CLIError(f"{option} and {other.option} are the same file {path}")
        out = _Output(path, option, plot)
        self.files.append(out)
        return out

    def commit(self):
        for out in self.files:
            out.commit()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        for out in self.files:
            out.discard()
        return False


# ---------------------------------------------------------------- CSV input


# Not int() in a try block: on CPython 3.11 a failing int(str) inside
# `try ... except ValueError` loses a KeyboardInterrupt that arrives meanwhile
# (11 Ctrl-C out of 11 in a loop over "1.5e-01"), and the header scan runs it
# on every cell.
_INTEGER = re.compile(r"[+-]?[0-9]+")


def _number_kind(cell):
    """"int", "float" or None (not a number)."""
    try:
        float(cell)
    except ValueError:
        return None
    return "int" if _INTEGER.fullmatch(cell) else "float"


def _numbered_names(cells):
    """Consecutive integers, as spreadsheets and pandas name columns (2019,2020 or 0,1,2).

    Two of them count only next to a text cell (2019,2020,label): a data row
    like 1,2 is too common.
    """
    ints = [int(c) for c in cells if _number_kind(c) == "int"]
    if not all(b == a + 1 for a, b in zip(ints, ints[1:])):
        return False
    has_text = any(_number_kind(c) is None for c in cells)
    return len(ints) >= 3 or (len(ints) == 2 and has_text)


def _looks_like_header(first, data, label_column):
    """Whether the first row names the columns (see the kpca --help text).

    The first row is a header when it contains the --label-column name, or
    has no number in it.  Otherwise each of its cells votes: a name when it
    is text above a numeric column, an integer above a column with decimals,
    one of consecutive integers (_numbered_names), or a new value above a
    text column whose values repeat; data when it is a number of the same kind as the numbers
    below, or a value found in the text column below.  More name votes make
    it a header; a tie keeps it as data, so that a typo in the first data row
    is reported rather than silently taken for a header.  Names are distinct:
    a first row with a repeated cell is data.
    """
    if label_column is not None and _number_kind(label_column) is None and label_column in first:
        return True
    kinds = [_number_kind(c) for c in first]
    if all(k is None for k in kinds):
        return True
    if not data or len(set(first)) < len(first):
        return False
    numbered = _numbered_names(first)
    votes = 0
    for j, cell in enumerate(first):
        column = [row[j] for row in data]
        column_kinds = {_number_kind(c) for c in column}
        if None not in column_kinds:
            if kinds[j] is None:
                votes += 1
            elif kinds[j] == "int" and ("float" in column_kinds or numbered):
                votes += 1
            else:
                votes -= 1
        else:
            values = set(column)
            if cell in values:
                votes -= 1
            elif len(values) < len(column):
                votes += 1
    return votes > 0


def _resolve_column(label_column, names, ncols, path):
    if names is not None and label_column in names:
        return names.index(label_column)
    try:
        index = int(label_column)
    except ValueError:
        known = (f"; columns are {', '.join(names)}" if names is not None
                 else f" (read with no header row, so columns are numbered 0 to {ncols - 1}; "
                      "pass --header if the first row names them)")
        raise CLIError(f"label column {label_column!r} not found in {path}{known}") from None
    if not 0 <= index < ncols:
        raise CLIError(f"label column index {index} is out of range: {path} has {ncols} columns "
                       f"(0 to {ncols - 1})")
    return index


class Table:
    """What read_csv found: features X, labels, the label column's name, the header decision."""

    def __init__(self, X, labels, label_name, header, header_detected, first_row):
        self.X, self.labels, self.label_name = X, labels, label_name
        self.header, self.header_detected = header, header_detected
        self.first_row = first_row


def _csv_rows(path):
    """The non-blank rows of a CSV file as (line number, stripped cells), and their width.

    Every row must have the first row's number of fields.
    """
    try:
        # utf-8-sig drops the byte-order mark spreadsheets put in front of
        # the first cell, which would otherwise make it neither a number nor
        # the column's name.
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            rows = [(reader.line_num, [c.strip() for c in row])
                    for row in reader if any(c.strip() for c in row)]
    except FileNotFoundError:
        raise CLIError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise CLIError(f"{path} is a directory, not a CSV file") from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise CLIError(f"cannot read {path}: {exc}") from None
    if not rows:
        raise CLIError(f"{path} is empty")
    ncols = len(rows[0][1])
    for line, row in rows:
        if len(row) != ncols:
            raise CLIError(f"{path}, line {line}: {len(row)} fields where the first row "
                           f"has {ncols}")
    return rows, ncols


def read_csv(path, label_column=None, header=None):
    """A Table from a CSV file (UTF-8, with or without a byte-order mark).

    header: True/False says whether the first row names the columns; None
    detects it (_looks_like_header).  The label column (name or 0-based
    index) is removed from the features.
    """
    rows, ncols = _csv_rows(path)
    first_row = rows[0][1]
    detected = header is None
    if detected:
        header = _looks_like_header(rows[0][1], [r for _, r in rows[1:]], label_column)
    if header:
        names, rows = rows[0][1], rows[1:]
    else:
        names = [f"x{j}" for j in range(ncols)]

    label_index = None
    if label_column is not None:
        label_index = _resolve_column(label_column, names if header else None, ncols, path)
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
                hints = []
                if label_column is None:
                    hints.append("use --label-column for a class column")
                if line == 1 and detected:
                    hints.append("pass --header if the first row names the columns")
                hint = f" ({'; '.join(hints)})" if hints else ""
                raise CLIError(f"{path}, line {line}, column {names[j]!r}: non-numeric value "
                               f"{row[j]!r}{hint}") from None
            if not math.isfinite(X[i, k]):
                raise CLIError(f"{path}, line {line}, column {names[j]!r}: value {row[j]!r} "
                               "is not finite")
    labels = None if label_index is None else [row[label_index] for _, row in rows]
    label_name = None if label_index is None else names[label_index]
    return Table(X, labels, label_name, header, detected, first_row)


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


def _save(fig, out):
    try:
        fig.savefig(out.tmp, dpi=120, format=out.format, metadata=_plot_metadata(out.format))
    except OSError as exc:
        raise CLIError(f"cannot write {out.option} {out.path}: {exc.strerror or exc}") from None


def _plot_metadata(fmt):
    # PDF and SVG embed the creation date unless told not to; without it the
    # same data give the same bytes.
    if fmt == "pdf":
        return {"CreationDate": None}
    if fmt == "svg":
        return {"Date": None}
    return None


def _fmt_vals(values, pct=False):
    if pct:
        return "[" + ", ".join(f"{v:.1%}" for v in values) + "]"
    return "[" + ", ".join(f"{v:.4g}" for v in values) + "]"


# ---------------------------------------------------------------- demo


# load_wine ships no cultivar names, only class_0..2; label them by number.
CULTIVARS = ("cultivar 1 (class_0)", "cultivar 2 (class_1)", "cultivar 3 (class_2)")


def cmd_demo(args):
    from fastkern import _bench

    with _Outputs() as outputs:
        png = outputs.add(args.out_png, "--out-png", plot=True)
        # 178 samples: one thread is fastest, more only add synchronisation
        # (and on a busy machine, oversubscription) to each of the ~360 fits.
        threads = 1 if args.threads is None else args.threads
        with _bench.blas_threads(threads):
            _demo(args, threads, png)
        outputs.commit()
    print(f"wrote {args.out_png}")
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
    print(f"KernelPCA  leading eigenvalues: {_fmt_vals(ev)}  "
          f"share of the total feature-space variance: {_fmt_vals(share, pct=True)} "
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
    print(f"KernelSIR  leading eigenvalues: {_fmt_vals(sev)}  "
          f"between-cultivar share of each direction's own variance "
          f"(eta^2; each in [0, 1], not parts of one total): {_fmt_vals(eta2, pct=True)}")
    print(f"KernelSIR  LOO 1-NN accuracy {protocol}: {acc_sir:.4f}")

    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6))
    labels = names[y]
    _scatter(axes[0], Z_pca, labels,
             f"Kernel PCA (RBF), LOO 1-NN accuracy {acc_pca:.3f}",
             f"kernel PC 1 ({share[0]:.1%} of total variance)",
             f"kernel PC 2 ({share[1]:.1%} of total variance)", "cultivar", CULTIVARS)
    _scatter(axes[1], Z_sir, labels,
             f"Kernel SIR (RBF), LOO 1-NN accuracy {acc_sir:.3f}",
             f"kernel SIR direction 1\n({eta2[0]:.1%} of its variance between cultivars)",
             f"kernel SIR direction 2\n({eta2[1]:.1%} of its variance between cultivars)",
             "cultivar", CULTIVARS)
    fig.suptitle("UCI wine data: 178 wines from 3 cultivars, 13 chemical measurements (z-scored)")
    fig.tight_layout()
    _save(fig, png)
    plt.close(fig)


# ---------------------------------------------------------------- kpca


def _verbose_printer(enabled, command="kpca"):
    def say(message):
        if enabled:
            print(f"[fastkern {command}] {message}", file=sys.stderr, flush=True)
    return say


class _ProgressBar:
    """Draws the matrix-free passes over K on stderr (fastkern.large_n.reporting_progress).

    On a terminal one line is redrawn, at most ten times a second; elsewhere
    (a log file, a pipe) one line is written per finished pass, so logs stay
    readable.
    """

    WIDTH = 30

    def __init__(self, stream, tty):
        self.stream, self.tty = stream, tty
        self.t0 = time.perf_counter()
        self.shown = 0.0
        self.drawn = False

    def __call__(self, label, fraction):
        now = time.perf_counter()
        elapsed = now - self.t0
        stamp = f"{int(elapsed // 60)}:{elapsed % 60:04.1f}"
        if not self.tty:
            if fraction >= 1:
                print(f"[fastkern kpca] {label}: done ({stamp} elapsed)", file=self.stream,
                      flush=True)
            return
        if fraction < 1 and now - self.shown < 0.1:
            return
        self.shown = now
        filled = int(self.WIDTH * min(max(fraction, 0.0), 1.0))
        bar = "#" * filled + "." * (self.WIDTH - filled)
        self.stream.write(f"\r\x1b[K[{bar}] {100 * fraction:3.0f}% {label} ({stamp})")
        self.stream.flush()
        self.drawn = True

    def close(self):
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


def _progress_bar(args):
    """The progress bar for this run, or None (--no-progress, or not a terminal by default)."""
    tty = sys.stderr.isatty()
    wanted = tty if args.progress is None else args.progress
    return _ProgressBar(sys.stderr, tty) if wanted else None


def cmd_kpca(args):
    from fastkern import _bench

    say = _verbose_printer(args.verbose)
    if args.out is not None and os.path.abspath(args.out) == os.path.abspath(args.data):
        raise CLIError(f"--out {args.out} would overwrite the input file")
    if args.solver in DEPRECATED_SOLVERS:
        new = DEPRECATED_SOLVERS[args.solver]
        print(f"fastkern kpca: warning: --solver {args.solver} is deprecated and will be "
              f"removed in fastkern 0.3; use --solver {new} (the same solver)", file=sys.stderr)
        args.solver = new
    with _Outputs() as outputs:
        # Before reading the data: outputs are checked before any work.
        csv_out = outputs.add(args.out, "--out")
        plot_out = outputs.add(args.plot, "--plot", plot=True)
        t0 = time.perf_counter()
        table = read_csv(args.data, args.label_column, args.header)
        n, d = table.X.shape
        header = "detected" if table.header_detected else "given"
        say(f"read {n} rows x {d} feature columns from {args.data} in "
            f"{time.perf_counter() - t0:.2f} s (header row: "
            f"{'yes' if table.header else 'no'}, {header})")
        from fastkern.large_n import reporting_progress

        bar = _progress_bar(args)
        try:
            with _bench.blas_threads(args.threads), reporting_progress(bar):
                lines = _kpca(args, table, csv_out, plot_out, say)
        finally:
            if bar is not None:
                bar.close()
        outputs.commit()
    log = sys.stderr if args.out is None else sys.stdout
    for line in lines:
        print(line, file=log)
    return 0


def _standardise(X):
    """StandardScaler's z-scores; a constant column becomes 0 (scale 1), not NaN."""
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler()
    Xs = scaler.fit_transform(X)
    return Xs, int(np.sum(scaler.var_ == 0))


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


# An embedding is degenerate when each of its first two components is
# carried by fewer than this fraction of the points.  Measured on sklearn's
# data with the RBF default gamma: unscaled wine, breast_cancer and digits
# give 0.4-1.4% (one or a few points off a common spot); standardised, the
# same data give 44-60%, and no other case tried (iris, diabetes, Gaussian
# blobs, scaled or not, RBF or linear) went below 4%.
DEGENERATE_SHARE = 0.03


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
    if kernel in ("rbf", "laplacian", "exponential", "sigmoid"):
        tips.append("try a smaller --gamma (the kernel sees almost no similarity between "
                    "the points)")
    if tips:
        message += "; " + " or ".join(tips)
    return message


def _kpca(args, table, csv_out, plot_out, say):
    from fastkern.decomposition import KernelPCA

    X, labels, label_name = table.X, table.labels, table.label_name
    n, d = X.shape
    if n < 2:
        raise CLIError(f"{args.data} has {n} data row; kernel PCA needs at least 2")
    if args.components > n - 1:
        raise CLIError(f"--components {args.components} needs at least {args.components + 1} "
                       f"data rows; {args.data} has {n}")
    constant = 0
    if args.scale:
        X, constant = _standardise(X)
        say(f"standardised {d} columns to mean 0, variance 1 ({constant} constant column(s) "
            "set to 0)")
    gamma = 1.0 / d if args.gamma is None else args.gamma
    kpca = KernelPCA(n_components=args.components, kernel=args.kernel, gamma=gamma,
                     eigen_solver=args.solver, n_threads=args.threads, verbose=args.verbose,
                     random_state=args.seed)
    say(f"fitting: kernel {args.kernel}, gamma {gamma:.4g}, solver {args.solver}, "
        f"{args.components} component(s), seed {args.seed}")
    t0 = time.perf_counter()
    # stdout may be the projection CSV: whatever a solver prints goes to stderr.
    with contextlib.redirect_stdout(sys.stderr):
        Z = kpca.fit_transform(X)
    solver = getattr(kpca, "_fit_solver", args.solver)
    say(f"fit done in {time.perf_counter() - t0:.2f} s (solver {solver})")

    header = [f"PC{k + 1}" for k in range(args.components)]
    if labels is not None:
        header.append(label_name)
    out = sys.stdout if csv_out is None else open(csv_out.tmp, "w", newline="")
    try:
        w = csv.writer(out, lineterminator="\n")
        w.writerow(header)
        for i in range(n):
            row = [repr(float(v)) for v in Z[i]]
            if labels is not None:
                row.append(labels[i])
            w.writerow(row)
    finally:
        if csv_out is not None:
            out.close()

    if args.scale:
        constants = f", {constant} constant set to 0" if constant else ""
        scaling = f"columns standardised (mean 0, variance 1{constants}; --no-scale to turn off)"
    else:
        scaling = "columns not scaled (--no-scale)"
    lines = [f"kernel PCA ({args.kernel}, gamma {gamma:.4g}, solver {solver}, seed {args.seed}) "
             f"of {n} samples x {d} features, {scaling}: eigenvalues "
             f"{_fmt_vals(np.asarray(kpca.eigenvalues_))}"]
    if (table.header and table.header_detected
            and any(_number_kind(c) is not None for c in table.first_row)):
        lines.append(f"first row {','.join(table.first_row)} taken as column names "
                     "(detected; --no-header reads it as data)")
    warning = degenerate_warning(Z, args.scale, args.kernel)
    if warning is not None:
        print(f"fastkern kpca: {warning}", file=sys.stderr)
    if csv_out is not None:
        lines.append(f"wrote {args.out} ({n} rows x {len(header)} columns)")
    if plot_out is not None:
        plt = _pyplot()
        fig, ax = plt.subplots(figsize=(6.4, 5.2))
        if args.components >= 2:
            P = Z[:, :2]
            ylabel = "PC2"
        else:
            P = np.column_stack([Z[:, 0], np.arange(n)])
            ylabel = "sample index"
        scaled = "standardised columns" if args.scale else "unscaled columns"
        title = f"Kernel PCA ({args.kernel}) of {os.path.basename(args.data)}, {scaled}"
        _scatter(ax, P, labels, title, "PC1", ylabel, label_name)
        fig.tight_layout()
        _save(fig, plot_out)
        plt.close(fig)
        lines.append(f"wrote {args.plot}")
    return lines


# ---------------------------------------------------------------- cca


CCA_SOLVERS = ("auto", "dense", "incomplete_cholesky")
CCA_KERNELS = ["rbf", "linear", "poly", "laplacian", "sigmoid", "exponential"]


def _non_negative_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}") from None
    if not (math.isfinite(value) and value >= 0):
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _column_list(text):
    cells = [c.strip() for c in text.split(",")]
    if not text.strip() or any(not c for c in cells):
        raise argparse.ArgumentTypeError(
            f"expected comma-separated column names or 0-based indices like a,b or 0,1, "
            f"got {text!r}")
    return cells


def _select(spec, option, names, ncols, path, header):
    """0-based indices of the columns `spec` names (a name, else a 0-based index)."""
    picked = []
    for cell in spec:
        if header and cell in names:
            index = names.index(cell)
        else:
            try:
                index = int(cell)
            except ValueError:
                known = (f"; columns are {', '.join(names)}" if header
                         else " (read with no header row, so columns are numbered 0 to "
                              f"{ncols - 1}; pass --header if the first row names them)")
                raise CLIError(f"{option}: column {cell!r} not found in {path}{known}") from None
            if not 0 <= index < ncols:
                raise CLIError(f"{option}: column index {index} is out of range: {path} has "
                               f"{ncols} columns (0 to {ncols - 1})")
        if index in picked:
            raise CLIError(f"{option}: column {cell!r} is listed twice")
        picked.append(index)
    return picked


def read_views(path, x_spec, y_spec, header=None):
    """(X, Y, x_names, y_names, header, detected, first_row) from the columns of a CSV.

    Reads the file as ``read_csv`` does (UTF-8 with or without a byte-order
    mark, blank lines skipped, the same header detection); only the selected
    columns must be numeric.
    """
    rows, ncols = _csv_rows(path)
    first_row = rows[0][1]
    detected = header is None
    if detected:
        header = _looks_like_header(first_row, [r for _, r in rows[1:]], None)
    names = first_row if header else [f"x{j}" for j in range(ncols)]
    if header:
        rows = rows[1:]
    xi = _select(x_spec, "--x-columns", names, ncols, path, header)
    yi = _select(y_spec, "--y-columns", names, ncols, path, header)
    both = sorted(set(xi) & set(yi))
    if both:
        raise CLIError(f"column(s) {', '.join(names[j] for j in both)} are in both "
                       "--x-columns and --y-columns")
    if not rows:
        raise CLIError(f"{path} has a header but no data rows")
    cols = xi + yi
    V = np.empty((len(rows), len(cols)))
    for i, (line, row) in enumerate(rows):
        for k, j in enumerate(cols):
            try:
                V[i, k] = float(row[j])
            except ValueError:
                hint = (" (pass --header if the first row names the columns)"
                        if line == 1 and detected else "")
                raise CLIError(f"{path}, line {line}, column {names[j]!r}: non-numeric value "
                               f"{row[j]!r}{hint}") from None
            if not math.isfinite(V[i, k]):
                raise CLIError(f"{path}, line {line}, column {names[j]!r}: value {row[j]!r} "
                               "is not finite")
    return (V[:, :len(xi)], V[:, len(xi):], [names[j] for j in xi], [names[j] for j in yi],
            header, detected, first_row)


def cmd_cca(args):
    if args.out is not None and os.path.abspath(args.out) == os.path.abspath(args.data):
        raise CLIError(f"--out {args.out} would overwrite the input file")
    say = _verbose_printer(args.verbose, "cca")
    with _Outputs() as outputs:
        # Before reading the data: outputs are checked before any work.
        csv_out = outputs.add(args.out, "--out")
        t0 = time.perf_counter()
        views = read_views(args.data, args.x_columns, args.y_columns, args.header)
        n = views[0].shape[0]
        say(f"read {n} rows from {args.data} in {time.perf_counter() - t0:.2f} s "
            f"(header row: {'yes' if views[4] else 'no'}, "
            f"{'detected' if views[5] else 'given'})")
        lines = _cca(args, views, csv_out, say)
        outputs.commit()
    log = sys.stderr if args.out is None else sys.stdout
    for line in lines:
        print(line, file=log)
    return 0


def _cca(args, views, csv_out, say):
    from fastkern.cca import KernelCCA

    X, Y, x_names, y_names, header, detected, first_row = views
    n = X.shape[0]
    if n < 2:
        raise CLIError(f"{args.data} has {n} data row; kernel CCA needs at least 2")
    if args.components > n - 1:
        raise CLIError(f"--components {args.components} needs at least {args.components + 1} "
                       f"data rows; {args.data} has {n}")
    if args.scale:
        X, _ = _standardise(X)
        Y, _ = _standardise(Y)
        say("standardised the columns of both views to mean 0, variance 1")
    kernel_y = args.kernel if args.kernel_y is None else args.kernel_y
    gamma_x = 1.0 / X.shape[1] if args.gamma is None else args.gamma
    if args.gamma_y is not None:
        gamma_y = args.gamma_y
    else:
        gamma_y = 1.0 / Y.shape[1] if args.gamma is None else args.gamma
    model = KernelCCA(n_components=args.components, kernel=args.kernel, gamma=gamma_x,
                      kernel_y=kernel_y, gamma_y=gamma_y, regularization=args.regularization,
                      solver=args.solver, n_threads=args.threads)
    say(f"fitting: kernels {args.kernel} / {kernel_y}, gamma {gamma_x:.4g} / {gamma_y:.4g}, "
        f"regularization {args.regularization:.4g}, solver {args.solver}, "
        f"{args.components} component(s)")
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        A, B = model.fit_transform(X, Y)
    say(f"fit done in {time.perf_counter() - t0:.2f} s (solver {model.solver_})")
    k = args.components
    out = sys.stdout if csv_out is None else open(csv_out.tmp, "w", newline="")
    try:
        w = csv.writer(out, lineterminator="\n")
        w.writerow([f"x_variate{j + 1}" for j in range(k)]
                   + [f"y_variate{j + 1}" for j in range(k)])
        for i in range(n):
            w.writerow([repr(float(v)) for v in A[i]] + [repr(float(v)) for v in B[i]])
    finally:
        if csv_out is not None:
            out.close()
    scaling = ("columns standardised (--no-scale to turn off)" if args.scale
               else "columns not scaled (--no-scale)")
    lines = [f"kernel CCA ({args.kernel} / {kernel_y}, gamma {gamma_x:.4g} / {gamma_y:.4g}, "
             f"regularization {args.regularization:.4g}, solver {model.solver_}) of {n} samples, "
             f"X: {','.join(x_names)}, Y: {','.join(y_names)}, {scaling}: canonical "
             f"correlations {_fmt_vals(model.canonical_correlations_)}"]
    if header and detected and any(_number_kind(c) is not None for c in first_row):
        lines.append(f"first row {','.join(first_row)} taken as column names "
                     "(detected; --no-header reads it as data)")
    for warning in caught:
        print(f"fastkern cca: warning: {warning.message}", file=sys.stderr)
    if csv_out is not None:
        lines.append(f"wrote {args.out} ({n} rows x {2 * k} columns)")
    return lines


# ---------------------------------------------------------------- bench


QUICK_SIZES = [60, 120]


def _bench_methods(args):
    from fastkern import _bench
    from fastkern._bench import methods

    if args.sizes or args.json or args.plot:
        raise CLIError("--methods takes --quick and --threads only (its sizes are fixed)")
    print(_bench.describe_machine(_bench.machine_info(args.threads)))
    print("methods against the library a user would otherwise pick (fastest of 3 alternating "
          "calls in this process; peers that are not installed are skipped)")
    sys.stdout.flush()

    def progress(name):
        print(f"[fastkern bench] {name} ...", file=sys.stderr, flush=True)

    with _bench.blas_threads(args.threads), _threads_limit(args.threads):
        rows = methods.run(scale=0.05 if args.quick else 1.0,
                           rounds=1 if args.quick else 3, progress=progress)
    print()
    print(methods.format_rows(rows))
    return 0


def _threads_limit(n_threads):
    from threadpoolctl import threadpool_limits

    if n_threads is None:
        return contextlib.nullcontext()
    return threadpool_limits(limits=n_threads, user_api="openmp")


def cmd_bench(args):
    from fastkern import _bench

    if args.methods:
        return _bench_methods(args)
    with _Outputs() as outputs:
        json_out = outputs.add(args.json, "--json")
        plot_out = outputs.add(args.plot, "--plot", plot=True)
        sizes = args.sizes or (QUICK_SIZES if args.quick else [1000, 4000, 8000])
        info = _bench.machine_info(args.threads)
        print(_bench.describe_machine(info))
        print(f"tasks: RBF Gram (d={_bench.N_FEATURES}), centering of that Gram, KernelPCA "
              f"({_bench.N_COMPONENTS} components), KernelRidge (alpha={_bench.RIDGE_ALPHA}); "
              f"naive loop at N={min(sizes)} only")
        print(_bench.MEMORY_NOTE[info["memory_method"]])
        print(_bench.PEERS_NOTE)
        sys.stdout.flush()
        min_time = 0.02 if args.quick else 0.3
        try:
            results = _bench.run_suite(sizes, n_threads=args.threads, min_time=min_time,
                                       progress=_bench.progress_printer())
            peers = _bench.run_peers(sizes, results, n_threads=args.threads,
                                     min_time=min_time, progress=_bench.progress_printer())
        except _bench.MeasurementError as exc:
            raise CLIError(str(exc)) from None
        print()
        print(_bench.format_table(results))
        print()
        print(_bench.format_peers(*peers))
        if json_out is not None:
            try:
                _bench.write_json(json_out.tmp, results, info, sizes, peers)
            except OSError as exc:
                raise CLIError(f"cannot write --json {args.json}: {exc.strerror or exc}") from None
        if plot_out is not None:
            try:
                _bench.plot_results(results + peers[0], plot_out.tmp, info,
                                    format=plot_out.format)
            except OSError as exc:
                raise CLIError(f"cannot write --plot {args.plot}: {exc.strerror or exc}") from None
        outputs.commit()
    for path in (args.json, args.plot):
        if path is not None:
            print(f"wrote {path}")
    return 0


# ---------------------------------------------------------------- test


def _gamma_option(text):
    if text == "median":
        return text
    try:
        return _positive_float(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected a positive number or 'median', got {text!r}") from None


def _columns(items, table, option, path):
    """Indices of the named (or 0-based numbered) columns of a header-aware table."""
    ncols = table.X.shape[1]
    names = table.first_row if table.header else None
    found = []
    for item in items:
        if names is not None and item in names:
            index = names.index(item)
        else:
            index = int(item) if _INTEGER.fullmatch(item) else None
            if index is None:
                known = (f"; columns are {', '.join(names)}" if names is not None
                         else f" (read with no header row, so columns are numbered 0 to "
                              f"{ncols - 1}; pass --header if the first row names them)")
                raise CLIError(f"{option}: column {item!r} not found in {path}{known}")
            if not 0 <= index < ncols:
                raise CLIError(f"{option}: column index {index} is out of range: {path} has "
                               f"{ncols} columns (0 to {ncols - 1})")
        if index in found:
            raise CLIError(f"{option}: column {item!r} is given twice")
        found.append(index)
    return found


def _test_lines(result, kind, args, gamma_note):
    """The output: what was tested, the statistic, the p-value."""
    if result.method == "gamma":
        how = "Gamma approximation of the biased statistic's null"
    else:
        how = f"{args.permutations} permutations, seed {args.seed}"
    return [f"statistic ({result.estimator} {kind}): {result.statistic:.10g}",
            f"p-value: {result.pvalue:.6g} ({how})",
            gamma_note]


def _kernel_note(kernel, params, gamma_option):
    if "gamma" not in params:
        return f"kernel: {kernel}"
    source = "median heuristic" if gamma_option == "median" else "given"
    return f"kernel: {kernel}, gamma {params['gamma']:.6g} ({source})"


def cmd_test(args):
    from fastkern import _bench
    from fastkern.kernel_tests import hsic_test, mmd_test

    with _bench.blas_threads(args.threads):
        if args.test == "mmd":
            a = read_csv(args.data_x, None, args.header)
            b = read_csv(args.data_y, None, args.header)
            if a.X.shape[1] != b.X.shape[1]:
                raise CLIError(f"{args.data_x} has {a.X.shape[1]} columns and {args.data_y} "
                               f"has {b.X.shape[1]}: the two samples need the same columns")
            result = mmd_test(a.X, b.X, kernel=args.kernel, gamma=args.gamma,
                              estimator=args.estimator, method=args.method,
                              n_permutations=args.permutations, random_state=args.seed,
                              n_threads=args.threads)
            head = (f"MMD two-sample test: {args.data_x} ({a.X.shape[0]} rows) vs "
                    f"{args.data_y} ({b.X.shape[0]} rows), {a.X.shape[1]} columns")
            note = _kernel_note(args.kernel, result.kernel_params, args.gamma)
            lines = [head] + _test_lines(result, "MMD^2", args, note)
        else:
            table = read_csv(args.data, None, args.header)
            if args.x_columns is None and args.y_columns is None:
                raise CLIError("give --x-columns and/or --y-columns (the other view is the "
                               "remaining columns)")
            ncols = table.X.shape[1]
            xs = (_columns(args.x_columns, table, "--x-columns", args.data)
                  if args.x_columns is not None else None)
            ys = (_columns(args.y_columns, table, "--y-columns", args.data)
                  if args.y_columns is not None else None)
            if xs is None:
                xs = [j for j in range(ncols) if j not in ys]
            if ys is None:
                ys = [j for j in range(ncols) if j not in xs]
            if set(xs) & set(ys):
                raise CLIError("--x-columns and --y-columns share a column")
            if not xs or not ys:
                raise CLIError(f"{args.data} has no columns left for the "
                               f"{'X' if not xs else 'Y'} view")
            result = hsic_test(table.X[:, xs], table.X[:, ys], kernel_x=args.kernel,
                               kernel_y=args.kernel, gamma_x=args.gamma, gamma_y=args.gamma,
                               estimator=args.estimator, method=args.method,
                               n_permutations=args.permutations, random_state=args.seed,
                               n_threads=args.threads)
            names = table.first_row if table.header else [f"x{j}" for j in range(ncols)]
            head = (f"HSIC independence test: {args.data} ({table.X.shape[0]} rows), "
                    f"X = {','.join(names[j] for j in xs)}, Y = {','.join(names[j] for j in ys)}")
            note = "; ".join(f"{v} {_kernel_note(args.kernel, p, args.gamma)}" for v, p in
                             (("X", result.kernel_params_x), ("Y", result.kernel_params_y)))
            lines = [head] + _test_lines(result, "HSIC", args, note)
    for line in lines:
        print(line)
    return 0


TEST_DESCRIPTION = """\
Kernel tests on CSV files (UTF-8, header row optional and detected as for
kpca; --header/--no-header override it).

  fastkern test mmd A.csv B.csv    two-sample test: do the rows of A and B
                                   come from the same distribution?
  fastkern test hsic DATA.csv --x-columns a,b --y-columns c
                                   independence test between two groups of
                                   columns (names or 0-based indices; either
                                   option alone takes the other columns as
                                   the other group)

Prints what was tested, the statistic and its p-value. The columns are used
as they are (no scaling); the RBF-type kernels take gamma from the median
heuristic unless --gamma is given. P-values come from --permutations random
permutations drawn from --seed (the same seed gives the same output) or,
with --method gamma, from the Gamma approximation."""


# ---------------------------------------------------------------- parser


KPCA_DESCRIPTION = """\
Kernel PCA of the numeric columns of a CSV file (UTF-8, a byte-order mark is
fine). Writes the projection as CSV to stdout, or to --out; everything else
(the summary, --verbose progress, warnings) goes to stderr, so stdout stays
clean CSV.

Columns are standardised to mean 0 and variance 1 before the kernel is
applied (--scale, the default; a constant column becomes 0): on raw
measurements in different units a kernel with gamma = 1/features sees almost
no similarity between points and puts nearly all of them at one spot.
--no-scale uses the values as they are. A warning is printed when the
embedding is degenerate (its first components carried by a few points).

A header row is optional and detected: the first row is a header when it
contains the --label-column name or no number at all; otherwise its cells
vote, a cell counting as a name when it is text above a numeric column, an
integer above a column with decimals, one of consecutive integers (three or
more like 0,1,2, or two next to a text cell like 2019,2020,label), or a new
value above a repeating text column, and as data when it is a number like
those below it or a value found in its text column. More name votes make it
a header; a tie or a repeated cell makes it data. A first row with numbers
in it that is taken as a header is reported. --header or --no-header
overrides the detection.

Random choices (starting vectors, Nystroem landmarks) use --seed, so two runs
give the same output."""


CCA_DESCRIPTION = """\
Regularised kernel canonical correlation analysis (fastkern.KernelCCA) of two
sets of columns of a CSV file: X (--x-columns) and Y (--y-columns), given by
name or 0-based index; other columns are ignored and may hold text. Prints the
canonical correlations, and writes the canonical variates (x_variate1..K,
y_variate1..K, unit variance on these data) as CSV to stdout, or to --out;
the summary and warnings then go to stderr, so stdout stays clean CSV.

The regularisation r (--regularization) is kernlab's kcca gamma: each
variate's coefficients a satisfy a'(K K + r K)a = 1 with the centred kernel
K. Columns are standardised before the kernels (--scale, the default). The
header row is detected as for `fastkern kpca` (--header / --no-header
override). Nothing is random: two runs print the same bytes."""


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
    seed = _Parser(add_help=False)
    seed.add_argument("--seed", type=_seed, default=DEFAULT_SEED, metavar="S",
                      help=f"random seed of the estimators (default: {DEFAULT_SEED}); the same "
                           "seed gives the same output")

    parser = _Parser(prog="fastkern",
                     description="Fast kernel methods: kernel PCA, kernel SIR, kernel CCA, "
                                 "kernel tests, benchmarks.")
    from fastkern._version import __version__

    parser.add_argument("--version", action="version", version=f"fastkern {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    demo = sub.add_parser(
        "demo", parents=[demo_common, seed],
        help="kernel PCA and kernel SIR of the UCI wine data",
        description="Kernel PCA and KernelSIR of the UCI wine data shipped with scikit-learn "
                    "(z-scored, RBF kernel): leading eigenvalues, the share of the total "
                    "feature-space variance of each kernel PC, the between-cultivar share "
                    "(eta^2) of each SIR direction's variance, leave-one-out 1-NN accuracy "
                    "of both 2-D projections, and a scatter plot.")
    demo.add_argument("--out-png", default="fastkern-demo.png", metavar="PATH",
                      help="where to write the plot (default: fastkern-demo.png)")
    demo.set_defaults(func=cmd_demo)

    kpca = sub.add_parser(
        "kpca", parents=[common, seed], help="kernel PCA of a CSV file",
        description=KPCA_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    kpca.add_argument("data", metavar="DATA.csv", help="input CSV file")
    kpca.add_argument("--kernel", default="rbf",
                      choices=["rbf", "linear", "poly", "laplacian", "sigmoid", "exponential"],
                      help="kernel (default: rbf)")
    kpca.add_argument("--gamma", type=_positive_float, default=None, metavar="G",
                      help="kernel coefficient (default: 1 / number of features)")
    kpca.add_argument("--components", type=_positive_int, default=2, metavar="K",
                      help="number of components (default: 2)")
    kpca.add_argument("--solver", default="auto", choices=SOLVERS + tuple(DEPRECATED_SOLVERS),
                      metavar="{" + ",".join(SOLVERS) + "}",
                      help="eigensolver (KernelPCA's eigen_solver; default: auto; "
                           "'lanczos' is the deprecated name of block_krylov)")
    kpca.add_argument("--scale", action=argparse.BooleanOptionalAction, default=True,
                      help="standardise each feature column to mean 0, variance 1 before the "
                           "kernel (default: on; --no-scale uses the raw values)")
    kpca.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                      help="the first row names the columns (--header) or is data "
                           "(--no-header); default: detected")
    kpca.add_argument("--label-column", default=None, metavar="C",
                      help="class column (name or 0-based index): not a feature, colours the plot")
    kpca.add_argument("--out", default=None, metavar="PROJ.csv",
                      help="projection CSV to write (default: stdout)")
    kpca.add_argument("--plot", default=None, metavar="PROJ.png",
                      help="scatter plot of the first two components")
    kpca.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                      help="show the matrix-free solver's passes over the kernel matrix on "
                           "stderr (default: when stderr is a terminal; a line per pass "
                           "otherwise)")
    kpca.add_argument("--verbose", action="store_true",
                      help="report reading, scaling and the eigensolver's progress on stderr")
    kpca.set_defaults(func=cmd_kpca)

    cca = sub.add_parser(
        "cca", parents=[common], help="kernel canonical correlation of two column sets of a CSV",
        description=CCA_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    cca.add_argument("data", metavar="DATA.csv", help="input CSV file")
    cca.add_argument("--x-columns", type=_column_list, required=True, metavar="A,B,...",
                     help="columns of the first view X (names, or 0-based indices)")
    cca.add_argument("--y-columns", type=_column_list, required=True, metavar="C,D,...",
                     help="columns of the second view Y (names, or 0-based indices)")
    cca.add_argument("--kernel", default="rbf", choices=CCA_KERNELS,
                     help="kernel of X, and of Y unless --kernel-y (default: rbf)")
    cca.add_argument("--kernel-y", default=None, choices=CCA_KERNELS,
                     help="kernel of Y (default: --kernel)")
    cca.add_argument("--gamma", type=_positive_float, default=None, metavar="G",
                     help="kernel coefficient of X, and of Y unless --gamma-y "
                          "(default: 1 / number of columns of each view)")
    cca.add_argument("--gamma-y", type=_positive_float, default=None, metavar="G",
                     help="kernel coefficient of Y (default: --gamma)")
    cca.add_argument("--components", "--n-components", dest="components", type=_positive_int,
                     default=2, metavar="K", help="number of canonical pairs (default: 2)")
    cca.add_argument("--regularization", type=_non_negative_float, default=0.1, metavar="R",
                     help="ridge r of the constraint a'(K K + r K)a = 1, kernlab's gamma "
                          "(default: 0.1)")
    cca.add_argument("--solver", default="auto", choices=CCA_SOLVERS,
                     help="KernelCCA's solver (default: auto: dense up to 3,000 rows)")
    cca.add_argument("--scale", action=argparse.BooleanOptionalAction, default=True,
                     help="standardise each column to mean 0, variance 1 before the kernels "
                          "(default: on; --no-scale uses the raw values)")
    cca.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                     help="the first row names the columns (--header) or is data "
                          "(--no-header); default: detected")
    cca.add_argument("--out", "--output", dest="out", default=None, metavar="VARIATES.csv",
                     help="canonical variates CSV to write (default: stdout)")
    cca.add_argument("--verbose", action="store_true",
                     help="report reading, scaling and fitting on stderr")
    cca.set_defaults(func=cmd_cca)

    bench = sub.add_parser(
        "bench", parents=[common],
        help="time naive loop, NumPy, scikit-learn, installed peers and fastkern",
        description="Time and peak memory of the RBF Gram (d=16), its centering, KernelPCA "
                    "(5 components) and KernelRidge for a naive Python loop (smallest size only), "
                    "vectorised NumPy, scikit-learn and fastkern, side by side; then the Gram by "
                    "numba and numexpr, and K @ V by pykeops, for those installed "
                    "(pip install fastkern[bench]); the others are listed as skipped.")
    bench.add_argument("--quick", action="store_true",
                       help=f"tiny sizes ({','.join(map(str, QUICK_SIZES))}), a few seconds")
    bench.add_argument("--sizes", type=_size_list, default=None, metavar="N1,N2,...",
                       help="sample counts (default: 1000,4000,8000)")
    bench.add_argument("--methods", action="store_true",
                       help="instead: kernel CCA, MMD/HSIC tests, chi2, string and graph kernels "
                            "against cca-zoo, hyppo, scikit-learn and grakel where installed")
    bench.add_argument("--json", default=None, metavar="FILE", help="write the results as JSON")
    bench.add_argument("--plot", default=None, metavar="FILE",
                       help="plot time against N (log-log), one panel per task")
    bench.set_defaults(func=cmd_bench)

    test = sub.add_parser(
        "test", help="kernel two-sample (mmd) and independence (hsic) tests of CSV files",
        description=TEST_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    tests = test.add_subparsers(dest="test", metavar="TEST")
    tests.required = True
    test_common = _Parser(add_help=False)
    test_common.add_argument("--kernel", default="rbf",
                             choices=["rbf", "linear", "poly", "laplacian", "sigmoid",
                                      "exponential"],
                             help="kernel (default: rbf)")
    test_common.add_argument("--gamma", type=_gamma_option, default="median", metavar="G",
                             help="kernel coefficient, or 'median' for the median heuristic "
                                  "1 / median squared distance (default: median)")
    test_common.add_argument("--estimator", default="unbiased",
                             choices=["unbiased", "biased", "hyppo", "hyppo_biased"],
                             help="statistic (default: unbiased; hyppo: hyppo's normalised one)")
    test_common.add_argument("--method", default="permutation", choices=["permutation", "gamma"],
                             help="p-value by permutations or the Gamma approximation "
                                  "(default: permutation)")
    test_common.add_argument("--permutations", type=_positive_int, default=1000, metavar="B",
                             help="number of permutations (default: 1000)")
    test_common.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                             help="the first row names the columns (--header) or is data "
                                  "(--no-header); default: detected")
    mmd = tests.add_parser(
        "mmd", parents=[common, seed, test_common], help="kernel two-sample test (MMD)",
        description="Kernel two-sample test (MMD): do the rows of the two CSV files come from "
                    "the same distribution? Both files need the same number of columns.")
    mmd.add_argument("data_x", metavar="A.csv", help="first sample")
    mmd.add_argument("data_y", metavar="B.csv", help="second sample")
    mmd.set_defaults(func=cmd_test)
    hsic = tests.add_parser(
        "hsic", parents=[common, seed, test_common], help="kernel independence test (HSIC)",
        description="Kernel independence test (HSIC) between two groups of columns of one CSV "
                    "file, the same kernel on both.")
    hsic.add_argument("data", metavar="DATA.csv", help="input CSV file")
    hsic.add_argument("--x-columns", type=_column_list, default=None, metavar="C1,C2,...",
                      help="columns of the first group (names or 0-based indices)")
    hsic.add_argument("--y-columns", type=_column_list, default=None, metavar="C1,C2,...",
                      help="columns of the second group (default: the columns not in "
                           "--x-columns)")
    hsic.set_defaults(func=cmd_test)
    return parser


def main(argv=None):
    """Run the ``fastkern`` command line.

    Every user error ends the command with one line on stderr; Ctrl-C ends it
    with one line and status 130 (see the module docstring).

    Parameters
    ----------
    argv : list of str, default=None
        The arguments after the program name; None means ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit status: the command's own (0 on success), 2 for a user error
        (bad option, unreadable input, invalid parameter, out of memory), 130
        when interrupted, 1 when the reader of stdout has gone.

    Raises
    ------
    SystemExit
        From argparse: after ``--help`` or ``--version`` (status 0), and for a
        malformed command line (status 2).
    """
    command = "fastkern"
    try:
        parser = build_parser()
        args = parser.parse_args(argv)
        command = f"fastkern {args.command}"
        if getattr(args, "test", None):
            command += f" {args.test}"
        return args.func(args)
    except KeyboardInterrupt:
        # One line, no traceback; the outputs' temporary files are already
        # gone (_Outputs.__exit__ ran on the way out).
        print(f"{command}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except CLIError as exc:
        print(f"{command}: error: {exc}", file=sys.stderr)
    except (ValueError, TypeError) as exc:
        # Parameter checks in the estimators name the offending argument.
        print(f"{command}: error: {exc}", file=sys.stderr)
    except MemoryError:
        print(f"{command}: error: out of memory", file=sys.stderr)
    except BrokenPipeError:
        # The reader (e.g. `| head`) has gone: stop quietly, and keep Python's
        # final flush of stdout from raising again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
