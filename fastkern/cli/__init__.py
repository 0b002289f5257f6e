"""The ``fastkern`` command line: ``demo``, ``kpca``, ``cca``, ``test`` and ``bench``.

One module per command (each with ``add_parser(sub)`` and the ``run`` its
parser calls), on top of ``_common`` (errors, option types, output files),
``_csv`` (reading CSV files) and ``_plot`` (matplotlib, optional).

Every user error (unreadable file, missing column, non-numeric data, too few
rows, bad option value, unwritable output path) ends the program with one line
on stderr and exit status 2; Ctrl-C ends it with one line and status 130, at
any moment after ``main`` starts, imports included.  Output paths are checked
before any work starts, and every output file is written under a temporary
name in its own directory and renamed only when the command succeeds, so an
error or an interrupt never leaves a partial file.  Every random choice
(eigensolver starting vectors, Nystroem landmarks) is seeded, so a command run
twice prints the same bytes.
"""
import os
import sys

from fastkern.cli._common import EXIT_INTERRUPTED, EXIT_USAGE, CLIError

__all__ = ["main"]

COMMANDS = ("demo", "kpca", "cca", "test", "bench")


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
        return args.func(args)
    except KeyboardInterrupt:
        # One line, no traceback; the outputs' temporary files are already
        # gone (Outputs.__exit__ ran on the way out).
        print(f"{command}: interrupted", file=sys.stderr)
        if "fastkern._threads" in sys.modules:
            # An eigensolver's LAPACK call may run on in the background; the
            # interpreter's exit would wait for it (minutes), or crash.
            sys.modules["fastkern._threads"].exit_now(EXIT_INTERRUPTED)
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
