"""Plain-text tables and the units of their cells.

``fastkern bench`` prints its table with these; a source checkout's benchmark
harness and scripts (benchmarks/) and the benchmarks page's generator
(docs/benchmarks/make_plots.py) import them from here, so that every table of
timings reads the same.  The installed package imports neither of those.
"""
import math


def fmt_time(seconds, micro="us"):
    """Format a duration in s, ms or us, with three significant digits or so.

    Parameters
    ----------
    seconds : float or None
        The duration; None or NaN is a call that failed.
    micro : str, default="us"
        The microsecond symbol ("µs" where the output is not a terminal).

    Returns
    -------
    str
        "1.23 s", "4.5 ms", "67 us", or "-" for a missing duration.
    """
    if seconds is None or math.isnan(seconds):
        return "-"
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} {micro}"


def fmt_bytes(n):
    """Format a size in bytes as KiB, MiB or GiB ("1.5 MiB")."""
    if n >= 1 << 30:
        return f"{n / (1 << 30):.2f} GiB"
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MiB"
    return f"{n / 1024:.0f} KiB"


def fmt_ratio(r, spec=".2f"):
    """Format a ratio of times as "2.50x" (format ``spec``); "-" when it is None."""
    return "-" if r is None else f"{r:{spec}}x"


def text_table(head, rows, align=None):
    """Lay out a table: the header, a rule under it, one line per row.

    Parameters
    ----------
    head : sequence of str
        The column titles.
    rows : iterable of (sequence of str or None)
        The cells of each row; None is a blank line (between blocks of rows).
    align : str, default=None
        One character per column, "<" (left) or ">" (right); None: all right.

    Returns
    -------
    str
        The lines, each column as wide as its widest cell, two spaces apart.
    """
    rows = [None if row is None else [str(c) for c in row] for row in rows]
    align = align or ">" * len(head)
    widths = [max([len(h)] + [len(row[i]) for row in rows if row is not None])
              for i, h in enumerate(head)]

    def line(cells):
        return "  ".join(f"{c:{a}{w}}" for c, a, w in zip(cells, align, widths)).rstrip()

    lines = [line(head), "  ".join("-" * w for w in widths)]
    lines += ["" if row is None else line(row) for row in rows]
    return "\n".join(lines).rstrip("\n")
