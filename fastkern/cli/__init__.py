"""The ``fastkern`` command line: ``demo``, ``kpca``, ``cca``, ``gram``,
``ridge``, ``test`` and ``bench``.

One module per command (each with ``add_parser(sub)`` and the ``run`` its
parser calls), on top of ``_common`` (errors, option types, output files),
``_csv`` (reading CSV files) and ``_plot`` (matplotlib, optional).

Every user error (unreadable file, missing column, non-numeric data, too few
rows, bad option value, unwritable output path, a full disk) ends the program
with one line on stderr and exit status 2, and so does an error the
computation raises on a bad parameter or value (ValueError, TypeError, an
ArithmeticError such as a division by zero or an overflow, MemoryError,
OSError): no traceback.  Ctrl-C ends it with one line and status 130, SIGTERM
with one line and status 143, at any moment after ``main`` starts, imports
included; a reader of stdout that has gone ends it quietly with status 1.
Output paths are checked before any work starts, and every output file is
written by ``_common.Output``: under a temporary name in its own directory,
renamed only when the command succeeds, so an error, an interrupt or SIGTERM
never leaves a partial file; a device, FIFO or pipe is written in place, never
replaced (``fastkern kpca --help`` says the whole rule).  Every random choice
(eigensolver starting vectors, Nystroem landmarks) is seeded, so a command run
twice prints the same bytes.
"""
import os
import signal
import sys

from fastkern.cli._common import EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_USAGE, CLIError

__all__ = ["main"]

COMMANDS = ("demo", "kpca", "cca", "gram", "ridge", "test", "bench")


def build_parser():
    """The ``fastkern`` parser: one subparser per command module."""
    import importlib

    from fastkern._version import __version__
    from fastkern.cli._common import Parser

    parser = Parser(prog="fastkern",
                    description="Fast kernel methods: kernel PCA, kernel SIR, kernel CCA, "
                                "kernel tests, benchmarks.")
    parser.add_argument("--version", action="version", version=f"fastkern {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for name in COMMANDS:
        importlib.import_module(f"fastkern.cli.{name}").add_parser(sub)
    return parser


def main(argv=None):
    """Run the ``fastkern`` command line.

    Every user error ends the command with one line on stderr; Ctrl-C and
    SIGTERM end it with one line and status 130 or 143 (see the module
    docstring).

    Parameters
    ----------
    argv : list of str, default=None
        The arguments after the program name; None means ``sys.argv[1:]``.

    Returns
    -------
    int
        The exit status: the command's own (0 on success), 2 for a user error
        (bad option, unreadable input, invalid parameter, out of memory, a
        failed write), 130 when interrupted, 143 when terminated (SIGTERM), 1
        when the reader of stdout has gone.

    Raises
    ------
    SystemExit
        From argparse: after ``--help`` or ``--version`` (status 0), and for a
        malformed command line (status 2).
    """
    command = "fastkern"
    previous = _catch_sigterm()
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        words = [a for a in argv if not a.startswith("-")]
        if words and words[0] in COMMANDS:
            # Named before the parser is built (its imports take a while), so
            # that a Ctrl-C meanwhile is reported under the command's name.
            command = f"fastkern {words[0]}"
        args = build_parser().parse_args(argv)
        command = f"fastkern {args.command}"
        if getattr(args, "test", None):
            command += f" {args.test}"
        code = args.func(args)
        # A full disk under stdout shows here, as one line, not at exit.
        from fastkern.cli._common import flush_stdout

        flush_stdout()
        return code
    except (KeyboardInterrupt, Terminated) as exc:
        # One line, no traceback; the outputs' temporary files are already
        # gone (Outputs.__exit__ ran on the way out).
        status = EXIT_TERMINATED if isinstance(exc, Terminated) else EXIT_INTERRUPTED
        print(f"{command}: {'terminated' if status == EXIT_TERMINATED else 'interrupted'}",
              file=sys.stderr)
        if "fastkern._threads" in sys.modules:
            # An eigensolver's LAPACK call may run on in the background; the
            # interpreter's exit would wait for it (minutes), or crash.
            sys.modules["fastkern._threads"].exit_now(status)
        return status
    except CLIError as exc:
        print(f"{command}: error: {exc}", file=sys.stderr)
    except BrokenPipeError:
        # The reader (e.g. `| head`) has gone: stop quietly.
        _drop_stdout()
        return 1
    except (ValueError, TypeError) as exc:
        # Parameter checks in the estimators name the offending argument.
        # The first line only: scikit-learn's messages go on with advice.
        print(f"{command}: error: {_first_line(exc)}", file=sys.stderr)
    except ArithmeticError as exc:
        # A parameter or a value at the edge of float64 (a length scale of
        # 1e-200, 1e308 in the data) that a check upstream let through.
        text = exc.args[-1] if exc.args and isinstance(exc.args[-1], str) else str(exc)
        print(f"{command}: error: {text} ({type(exc).__name__}): a parameter or a data value "
              "is too large or too small", file=sys.stderr)
    except MemoryError:
        print(f"{command}: error: out of memory", file=sys.stderr)
    except OSError as exc:
        where = f": {exc.filename}" if exc.filename else ""
        print(f"{command}: error: {exc.strerror or exc}{where}", file=sys.stderr)
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
    _settle_stdout()
    return EXIT_USAGE


class Terminated(BaseException):
    """SIGTERM, raised where the program is, as Ctrl-C raises KeyboardInterrupt:
    the same way out removes the temporary files.  Not an Exception, so that no
    ``except Exception`` on the way swallows it."""


def _terminate(signum, frame):
    raise Terminated


def _catch_sigterm():
    """Turn SIGTERM into Terminated while main runs; the previous handler (to
    restore), or None where no handler can be set (not the main thread)."""
    try:
        return signal.signal(signal.SIGTERM, _terminate)
    except ValueError:
        return None


def _first_line(exc):
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _drop_stdout():
    """Point stdout at /dev/null, so that Python's flush at exit does not fail
    again on what is left in its buffer (a reader gone, a full disk)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (tests capture it)
        return
    os.dup2(os.open(os.devnull, os.O_WRONLY), fd)


def _settle_stdout():
    """Before an error exit: write what stdout holds, or drop it if it cannot be written."""
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        _drop_stdout()
