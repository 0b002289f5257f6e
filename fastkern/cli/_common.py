"""What the commands share: the user error, the parser class, option types and
the options several commands take, output files written all or nothing, the
verbose printer and the progress bar."""
import argparse
import contextlib
import math
import os
import stat
import sys
import tempfile

EXIT_USAGE = 2
# The shell's status for a program ended by SIGINT (128 + 2).
EXIT_INTERRUPTED = 130
# ... and by SIGTERM (128 + 15).
EXIT_TERMINATED = 143
DEFAULT_SEED = 0
PLOT_EXTRA = 'pip install matplotlib'


class CLIError(Exception):
    """A user error, reported as one line on stderr with exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse's parser, with one-line errors that name the (sub)command.

    argparse reports unknown options from the top-level parser, as
    "fastkern: error: unrecognized arguments"; here the subcommand that was
    chosen reports them under its own name ("fastkern kpca: error: ...").
    """

    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")

    def parse_args(self, args=None, namespace=None):
        args, extra = self.parse_known_args(args, namespace)
        if extra:
            owner = getattr(args, "parser", None) or self
            owner.error(f"unrecognized arguments: {' '.join(extra)}")
        return args


OUTPUT_FILES = """\
Output files: a new path, or an existing file (replaced, which is said on
stderr), is written under a temporary name in the file's directory and
renamed onto it at the end, so a failed run, Ctrl-C or SIGTERM leaves no
partial file; through a symlink, the link's target is written and the link
kept. A device (/dev/null), a FIFO or /dev/fd/N (a pipe: >(gzip > x.gz)) is
written to in place. A full disk, on a file or on stdout, ends the command
with one error line."""


def add_command(sub, name, writes_files=False, **kwargs):
    """A subcommand's parser; it records itself so that it reports its own errors.
    writes_files: the command takes output paths, and its --help says how they
    are written (OUTPUT_FILES)."""
    if writes_files:
        kwargs["epilog"] = OUTPUT_FILES
    parser = sub.add_parser(name, **kwargs)
    parser.set_defaults(parser=parser)
    return parser


# ---------------------------------------------------------------- option types


def positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def seed(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if not 0 <= value < 2 ** 32:
        raise argparse.ArgumentTypeError(f"expected an integer from 0 to 2**32 - 1, got {value}")
    return value


def _number(text, what, ok):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
    if not (math.isfinite(value) and ok(value)):
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}")
    return value


def positive_float(text):
    return _number(text, "a positive number", lambda v: v > 0)


def non_negative_float(text):
    return _number(text, "a number >= 0", lambda v: v >= 0)


def real(text):
    return _number(text, "a number", lambda v: True)


def gamma(text):
    """A positive number, or "median"/"scale", resolved on the data (resolve_gamma)."""
    from fastkern._kernel_api import GAMMA_STRINGS

    if text in GAMMA_STRINGS:
        return text
    try:
        return positive_float(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected a positive number, {' or '.join(map(repr, GAMMA_STRINGS))}, "
            f"got {text!r}") from None


def column_list(text):
    cells = [c.strip() for c in text.split(",")]
    if not text.strip() or any(not c for c in cells):
        raise argparse.ArgumentTypeError(
            f"expected comma-separated column names or 0-based indices like a,b or 0,1, "
            f"got {text!r}")
    return cells


# ---------------------------------------------------------------- shared options


def kernel_names():
    """Every kernel fastkern's Gram functions compute on numeric data: the
    registry's names (fastkern.pairwise.KERNEL_PARAMS' keys), read without
    importing the Gram functions."""
    from fastkern import _registry

    return sorted(name for k in _registry.KERNELS for name in k.names)


def add_threads(parser, default_text="all cores, or OMP_NUM_THREADS"):
    parser.add_argument("--threads", type=positive_int, default=None, metavar="N",
                        help=f"threads for fastkern's kernels (n_threads) and for BLAS "
                             f"(default: {default_text})")


def add_seed(parser):
    parser.add_argument("--seed", type=seed, default=DEFAULT_SEED, metavar="S",
                        help=f"random seed (default: {DEFAULT_SEED}); the same seed gives the "
                             "same output")


def _extra_kernel_params():
    """name -> (Param, kernels taking it) for the registry's kernel parameters other
    than gamma, degree and coef0 (the estimators' own), which reach the kernel
    through kernel_params: Bessel's order, the rational quadratic's alpha, ..."""
    from fastkern import _registry

    extra = {}
    for k in _registry.KERNELS:
        for p in k.params:
            if p.name not in ("gamma", "degree", "coef0"):
                extra.setdefault(p.name, (p, []))[1].append(k.name)
    return extra


def add_kernel(parser, gamma_default, gamma_default_text, suffix="", which=""):
    """--kernel, --gamma, --degree, --coef0 and every other registry kernel parameter
    (--order, --alpha, ...; with a suffix: of the Y view)."""
    of = f" of {which}" if which else ""
    parser.add_argument(f"--kernel{suffix}", default="rbf" if not suffix else None,
                        choices=kernel_names(), metavar="KERNEL",
                        help=f"kernel{of}: {', '.join(kernel_names())} "
                             f"(default: {'rbf' if not suffix else '--kernel'})")
    parser.add_argument(f"--gamma{suffix}", type=gamma, default=gamma_default, metavar="G",
                        help=f"kernel coefficient{of}: a positive number, 'median' (1 / median "
                             f"squared distance) or 'scale' (1 / (features * variance)) "
                             f"(default: {gamma_default_text})")
    parser.add_argument(f"--degree{suffix}", type=non_negative_float, default=None, metavar="D",
                        help=f"degree{of} of the poly, anova and bessel kernels (default: the "
                             "kernel's)")
    parser.add_argument(f"--coef0{suffix}", type=real, default=None, metavar="C",
                        help=f"coef0{of} of the poly and sigmoid kernels (default: the kernel's)")
    for name, (param, kernels) in _extra_kernel_params().items():
        strict = param.low is not None and not param.low_inclusive
        parser.add_argument(f"--{name.replace('_', '-')}{suffix}",
                            type=positive_float if strict else non_negative_float,
                            default=None, metavar=name[0].upper(),
                            help=f"{name}{of} of the {', '.join(kernels)} kernel(s) (default: "
                                 "the kernel's)")


def kernel_kwargs(args, suffix=""):
    """degree, coef0 and kernel_params (the other kernel parameters) as given: the
    estimators' defaults otherwise."""
    get = lambda name: getattr(args, f"{name}{suffix}")  # noqa: E731
    kwargs = {k: get(k) for k in ("degree", "coef0") if get(k) is not None}
    params = {name: get(name) for name in _extra_kernel_params() if get(name) is not None}
    if params:
        kwargs["kernel_params"] = params
    return kwargs


def add_header(parser):
    parser.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                        help="the first row names the columns (--header) or is data "
                             "(--no-header); default: detected")


def add_id_columns(parser):
    """--id-columns, for the commands that write a row per input row."""
    parser.add_argument("--id-columns", type=column_list, default=(), metavar="C1,C2,...",
                        help="columns copied to the output unchanged, before the results "
                             "(names or 0-based indices), e.g. a row id to join on; not "
                             "used as features")


def id_columns(table, ids, used, drop_missing):
    """(names, cells) of the --id-columns ids (indices; the caller checks them
    against --drop-columns): cells a list per row numeric(used, drop_missing)
    keeps, or None without id columns.  An id column among those used is an
    error."""
    if not ids:
        return [], None
    both = [table.names[j] for j in ids if j in used]
    if both:
        raise CLIError(f"column(s) {', '.join(both)} are both used and in --id-columns")
    return [table.names[j] for j in ids], table.kept_cells(ids, used, drop_missing)


def add_table_options(parser):
    """The options of every command that reads a CSV file."""
    add_header(parser)
    parser.add_argument("--decimal", choices=(".", ","), default=None,
                        help="the numbers' decimal mark (default: detected: a comma where "
                             "the delimiter is not one and the numbers have commas, no "
                             "points, as 14,23;0,5)")
    parser.add_argument("--drop-columns", type=column_list, default=(), metavar="C1,C2,...",
                        help="columns to leave out (names or 0-based indices), e.g. a row id")
    parser.add_argument("--drop-missing", action="store_true",
                        help="drop the rows with a missing value (empty, NA, NaN, null, ?) in "
                             "the columns used, and say on stderr how many and which lines; "
                             "without it a missing value is an error")


def add_scale(parser, what="each feature column"):
    parser.add_argument("--scale", action=argparse.BooleanOptionalAction, default=True,
                        help=f"standardise {what} to mean 0, variance 1 before the kernel "
                             "(default: on; --no-scale uses the raw values)")


# ---------------------------------------------------------------- output files


def _through_proc(path):
    """Whether path leads through /proc (/dev/fd/N, /dev/stdout): a descriptor
    the caller holds, whose link names no path a new file could take."""
    path = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on a chain of links
        if os.path.realpath(os.path.dirname(path)).startswith("/proc/"):
            return True
        if not os.path.islink(path):
            return False
        path = os.path.join(os.path.dirname(path), os.readlink(path))
    return False


class Output:
    """An output reserved before the work starts, and how to write it.

    A new path or an existing regular file is written under a temporary name
    in the file's own directory and renamed onto it by commit(), so an
    error, Ctrl-C or SIGTERM never leaves half a file; creating that
    temporary file is the real test that the path can be written.  A
    symlink's target is what gets written (the link stays).  Replacing an
    existing file is said on stderr.

    Anything else that exists (a device such as /dev/null, a FIFO, a pipe
    behind /dev/fd/N) is written through, with no temporary file: replacing
    it would destroy it, or leave the data where nobody reads them.
    """

    def __init__(self, path, option, plot=False, command=None):
        self.path, self.option, self.tmp = path, option, None
        self.prefix = "fastkern" if command is None else f"fastkern {command}"
        if plot:
            from fastkern.cli._plot import image_format

            self.format = image_format(path, option)
        else:
            self.format = None
        try:
            st = os.stat(path)
        except FileNotFoundError:  # a new file, or a link to one
            st = None
        except OSError as exc:
            raise self._error(exc) from None
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise CLIError(f"{option} {path} is a directory")
        self.stream = st is not None and (not stat.S_ISREG(st.st_mode) or _through_proc(path))
        self.replaces = st is not None and not self.stream
        self.committed = False
        if self.stream:
            if stat.S_ISSOCK(st.st_mode):
                raise CLIError(f"cannot write {option} {path}: it is a socket")
            if not os.access(path, os.W_OK):
                raise CLIError(f"cannot write {option} {path}: permission denied")
            self.target = path
            return
        self.target = os.path.realpath(path)
        folder = os.path.dirname(self.target)
        if not os.path.isdir(folder):
            what = "is not a directory" if os.path.exists(folder) else "does not exist"
            raise CLIError(f"cannot write {option} {path}: directory {folder} {what}")
        if self.replaces and not os.access(self.target, os.W_OK):
            raise CLIError(f"cannot write {option} {path}: the file is read-only")
        try:
            fd, self.tmp = tempfile.mkstemp(dir=folder,
                                            prefix=f".{os.path.basename(self.target)}.",
                                            suffix=".part")
        except OSError as exc:
            raise self._error(exc) from None
        os.close(fd)

    def _error(self, exc):
        return CLIError(f"cannot write {self.option} {self.path}: {exc.strerror or exc}")

    @property
    def dest(self):
        """The path to write to: the temporary file, or the device, FIFO or pipe itself."""
        return self.target if self.stream else self.tmp

    @contextlib.contextmanager
    def open(self, binary=False):
        """dest opened for writing (text: UTF-8, newlines as written); a failed
        write (a full disk) ends the command with one line, and a reader that
        has gone raises BrokenPipeError (main stops quietly)."""
        try:
            if binary:
                f = open(self.dest, "wb")
            else:
                f = open(self.dest, "w", newline="", encoding="utf-8")
            with f:
                yield f
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise self._error(exc) from None

    def commit(self):
        self.committed = True
        if self.stream:
            return
        # mkstemp makes the file private (0600); give it the mode a plain
        # open() would have, or keep that of the file it replaces.
        try:
            mode = os.stat(self.target).st_mode & 0o7777
        except OSError:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        try:
            os.chmod(self.tmp, mode)
            os.replace(self.tmp, self.target)
        except OSError as exc:
            raise self._error(exc) from None
        self.tmp = None
        if self.replaces:
            via = ("" if self.target == os.path.abspath(self.path)
                   else f" {self.target}, the link's target")
            print(f"{self.prefix}: {self.option} {self.path}: replaced the existing file{via}",
                  file=sys.stderr)

    def discard(self):
        if self.tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(self.tmp)
            self.tmp = None
        if self.stream and not self.committed:
            # A reader blocked opening the FIFO would wait forever for a
            # writer that never comes: open and close it, the reader sees
            # the end of the file (as after a shell's `cmd > fifo` that fails).
            with contextlib.suppress(OSError):
                if stat.S_ISFIFO(os.stat(self.target).st_mode):
                    os.close(os.open(self.target, os.O_WRONLY | os.O_NONBLOCK))


class Outputs:
    """The command's output files: all reserved up front, all renamed at the end."""

    def __init__(self, command=None):
        self.files, self.command = [], command

    def add(self, path, option, plot=False):
        if path is None:
            return None
        for other in self.files:
            if os.path.realpath(other.path) == os.path.realpath(path):
                raise CLIError(f"{option} and {other.option} are the same file {path}")
        out = Output(path, option, plot, self.command)
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


def flush_stdout():
    """Flush stdout now, so that a full disk shows as one error line, not as
    Python's complaint at exit."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise CLIError(f"cannot write to stdout: {exc.strerror or exc}") from None


def check_not_input(out, option, data):
    if out is None:
        return
    with contextlib.suppress(OSError):
        # A link to the input, or a second name (hard link) of it.
        if os.path.realpath(out) == os.path.realpath(data) or os.path.samefile(out, data):
            raise CLIError(f"{option} {out} would overwrite the input file")


# ---------------------------------------------------------------- reporting


def verbose_printer(enabled, command):
    from fastkern._progress import say

    def printer(message):
        if enabled:
            say(f"fastkern {command}", message)
    return printer


def progress_bar(args, command):
    """The progress bar of this run, or None: on by default when stderr is a
    terminal, --progress / --no-progress decide otherwise."""
    from fastkern._progress import ProgressBar

    tty = sys.stderr.isatty()
    wanted = tty if args.progress is None else args.progress
    return ProgressBar(sys.stderr, tty, prefix=f"fastkern {command}") if wanted else None


def fmt_vals(values, pct=False):
    if pct:
        return "[" + ", ".join(f"{v:.1%}" for v in values) + "]"
    return "[" + ", ".join(f"{v:.4g}" for v in values) + "]"


def standardise(X, names=None):
    """StandardScaler's z-scores; a constant column becomes 0 (scale 1), not NaN.
    (z-scores, number of constant columns).

    A column whose mean or variance overflows float64 (values near 1e154 and
    beyond) cannot be standardised: a CLIError naming it (names: the column
    names, else 0-based indices) and suggesting --no-scale, rather than the
    NaN or the zeroed column the scaler would hand on.
    """
    import numpy as np

    Xs, scaler = fitted_scaler(X, names)
    return Xs, int(np.sum(scaler.var_ == 0))


def fitted_scaler(X, names=None):
    """(X's z-scores, the StandardScaler fitted to X), checked as standardise
    says; the scaler's transform then scales new rows (fastkern ridge's)."""
    import numpy as np
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler()
    with np.errstate(over="ignore", invalid="ignore"):
        Xs = scaler.fit_transform(X)
    bad = ~(np.isfinite(scaler.mean_) & np.isfinite(scaler.var_)
            & np.all(np.isfinite(Xs), axis=0))
    if bad.any():
        cols = np.flatnonzero(bad)
        which = ", ".join(repr(names[j]) if names is not None else str(j) for j in cols)
        raise CLIError(f"the values of column(s) {which} are too large to standardise (up to "
                       f"{np.max(np.abs(X[:, cols])):.3g}; their variance overflows float64): "
                       "use --no-scale, or rescale the data")
    return Xs, scaler


def resolve_gamma(gamma, X, kernel):
    """The numeric gamma the kernel will use on X, None for a kernel without one.

    "median"/"scale" by fastkern's one rule (``_kernel_api.resolve_gamma``,
    through the spec); None by the kernel's registry default (1 / number of
    features where it is None, as scikit-learn), so that the summary can
    print the value.
    """
    from fastkern._kernel_api import KernelSpec, takes_gamma

    if not takes_gamma(kernel):
        return None
    return KernelSpec.from_params(kernel, gamma=gamma, X=X).gamma(X.shape[1])


def kernel_text(kernel, gamma, given):
    """The kernel as a summary names it: with its gamma where it has one (the
    summary said "gamma 0.25" for the linear kernel)."""
    from fastkern import _registry

    kdef = _registry.BY_NAME.get(kernel)
    if kdef is not None and "gamma" not in kdef.param_names:
        return kernel
    if gamma is None:
        return f"{kernel}, the kernel's default gamma"
    source = f" ({given})" if isinstance(given, str) else ""
    return f"{kernel}, gamma {gamma:.4g}{source}"


def write_csv(csv_out, header, values, labels=None, ids=None):
    """Write the rows of values under header, as CSV: to --out (csv_out, an Output), or to
    stdout when there is no --out.

    Each value is written as repr(float): it reads back as the same float64.  labels,
    when given, is a last column (one label a row); ids, the --id-columns cells (a
    list a row), the first columns, as read.  header names every column (None: no
    header row).
    """
    import csv

    def rows(out):
        w = csv.writer(out, lineterminator="\n")
        if header is not None:
            w.writerow(header)
        for i, row in enumerate(values):
            w.writerow(([] if ids is None else ids[i]) + [repr(float(v)) for v in row]
                       + ([] if labels is None else [labels[i]]))

    if csv_out is not None:
        with csv_out.open() as out:
            rows(out)
        return
    try:
        rows(sys.stdout)
    except BrokenPipeError:
        raise
    except OSError as exc:
        raise CLIError(f"cannot write to stdout: {exc.strerror or exc}") from None
    flush_stdout()


def summary_lines(first, table, out, shape):
    """A command's summary: its first line, the note on the input's first row, and the
    file written to --out (out: its path, None for stdout) with its shape (rows, columns)."""
    lines = [first]
    note = table.first_row_note()
    if note is not None:
        lines.append(note)
    if out is not None:
        lines.append(f"wrote {out} ({shape[0]} rows x {shape[1]} columns)")
    return lines


def print_summary(lines, out):
    """Print the summary where it cannot mix with the CSV: on stderr when the CSV went to
    stdout (out None), else on stdout."""
    log = sys.stderr if out is None else sys.stdout
    for line in lines:
        print(line, file=log)
