"""CSV input of the commands: Python's csv module reads, NumPy converts.

The delimiter (comma, semicolon, tab or bar) is found by ``csv.Sniffer``.
Whether the first row names the columns is decided, unless --header or
--no-header says so, by these rules in order: a header when it holds a
column name given on the command line (e.g. the --label-column name), or no
number at all, or is the integers 0, 1, 2, ... or 1, 2, 3, ... (at least
three: how pandas writes a frame without names); data when a cell repeats;
otherwise each column votes, a header cell counting as a name when it is
text above numbers, an integer above decimals, one of consecutive integers
(three, or two next to a text cell: 2019,2020,label), or a new value above a
column of repeating classes, and as data when it is a number like those below it or
a value found in its column; more name votes make a header.  (Python's
csv.Sniffer.has_header takes a year above decimals for data, and a name as
long as the classes below it for data.)

Columns are chosen by name (with a header) or 0-based index.  A missing
value (an empty cell, NA, N/A, NaN, null, None or ?) is an error unless
--drop-missing drops its row; any other non-number is an error that names
the line and the column and says how to leave the column out.
"""
import csv
import re
import sys

import numpy as np

from fastkern.cli._common import CLIError

MISSING = frozenset({"", "na", "n/a", "nan", "null", "none", "?"})
# Line numbers of dropped rows the note lists before "and N more".
_DROPPED_SHOWN = 10
_INTEGER = re.compile(r"[+-]?[0-9]+")
# Rows csv.Sniffer looks at to find the delimiter.
_SNIFF_BYTES = 1 << 16
# Consecutive integers 0..n-1 or 1..n in a column of at least this many rows
# are taken for a row id (a warning only: a short count may be a feature).
_ID_MIN_ROWS = 20
# Column names that say "row id" (compared in lower case).
_ID_NAMES = {"id", "index", "idx", "row", "rowid", "row_id", "row id", "unnamed: 0"}


def _is_number(cell):
    try:
        float(cell)
    except ValueError:
        return False
    return True


def _kind(cell):
    """"int", "float" or None (not a number)."""
    if not _is_number(cell):
        return None
    return "int" if _INTEGER.fullmatch(cell) else "float"


def looks_like_header(first, rows, given=()):
    """Whether the first row names the columns (see the module docstring).

    first: the first row's cells; rows: the rows below it (the first 50 are
    looked at); given: column names from the command line.
    """
    if any(name in first for name in given if not _INTEGER.fullmatch(name)):
        return True
    kinds = [_kind(c) for c in first]
    if all(k is None for k in kinds):
        return True
    if len(set(first)) < len(first):
        return False
    # Consecutive integers name columns (2019,2020 or 0,1,2, as spreadsheets
    # and pandas do): three of them, or two next to a text cell (a data row
    # like 1,2 is too common).
    ints = [int(c) for c, k in zip(first, kinds) if k == "int"]
    numbered = (all(b == a + 1 for a, b in zip(ints, ints[1:]))
                and (len(ints) >= 3 or (len(ints) == 2 and None in kinds)))
    if numbered and len(ints) == len(first) and ints[0] in (0, 1):
        return True
    votes = 0
    for j, cell in enumerate(first):
        column = [row[j] for row in rows[:50]]
        below = {_kind(c) for c in column}
        if None not in below:
            # A name above numbers, or an integer (a year) above decimals.
            name = kinds[j] is None or (kinds[j] == "int" and ("float" in below or numbered))
            votes += 1 if name else -1
        elif cell in column:
            votes -= 1
        elif len(set(column)) < len(column):
            votes += 1  # a new value above a column of repeating classes
    return votes > 0

def _dialect(text):
    """csv.Sniffer's dialect for the file's start; the comma when it cannot tell."""
    lines = text.splitlines()
    if len(lines) > 1 and not text.endswith(("\n", "\r")):
        lines = lines[:-1]  # cut mid-line by the sample size
    try:
        return csv.Sniffer().sniff("\n".join(lines[:200]), delimiters=",;\t|")
    except csv.Error:
        return csv.excel


class Table:
    """The cells of a CSV file and its column names.

    Attributes: path, names (the header's cells, or x0, x1, ...), rows (list
    of (line number, cells)), header (bool), header_detected (bool),
    first_row (the file's first row, header or not).
    """

    def __init__(self, path, names, rows, header, header_detected, first_row):
        self.path, self.names, self.rows = path, names, rows
        self.header, self.header_detected, self.first_row = header, header_detected, first_row

    @property
    def ncols(self):
        return len(self.names)

    def column(self, spec, option):
        """The 0-based index of the column `spec` names (a name, else a 0-based index)."""
        if self.header and spec in self.names:
            return self.names.index(spec)
        if not _INTEGER.fullmatch(spec):
            known = (f"; columns are {', '.join(self.names)}" if self.header
                     else f" (read with no header row, so columns are numbered 0 to "
                          f"{self.ncols - 1}; pass --header if the first row names them)")
            raise CLIError(f"{option}: column {spec!r} not found in {self.path}{known}")
        index = int(spec)
        if not 0 <= index < self.ncols:
            raise CLIError(f"{option}: column index {index} is out of range: {self.path} has "
                           f"{self.ncols} columns (0 to {self.ncols - 1})")
        return index

    def columns(self, specs, option):
        found = []
        for spec in specs:
            index = self.column(spec, option)
            if index in found:
                raise CLIError(f"{option}: column {spec!r} is listed twice")
            found.append(index)
        return found

    def first_row_note(self):
        """A line saying that a first row with numbers was taken as names, or None."""
        if self.header and self.header_detected and any(_is_number(c) for c in self.first_row):
            return (f"first row {','.join(self.first_row)} taken as column names "
                    "(detected; --no-header reads it as data)")
        return None

    def numeric(self, cols, drop_missing=False, hints=()):
        """The columns `cols` as a float64 array, and the file's line numbers of
        the rows --drop-missing dropped.

        hints: what the non-numeric error suggests besides --drop-columns.
        """
        if not self.rows:
            raise CLIError(f"{self.path} has a header but no data rows")
        cells = [[row[j] for j in cols] for _, row in self.rows]
        missing = np.array([[c.lower() in MISSING for c in r] for r in cells], dtype=bool)
        missing = missing.reshape(len(cells), len(cols))
        dropped = []
        lines = [line for line, _ in self.rows]
        if missing.any():
            if not drop_missing:
                i, k = np.argwhere(missing)[0]
                raise CLIError(f"{self.path}, line {lines[i]}, column "
                               f"{self.names[cols[k]]!r}: missing value {cells[i][k]!r} "
                               "(--drop-missing drops the rows with missing values)")
            keep = ~missing.any(axis=1)
            dropped = [line for line, k in zip(lines, keep) if not k]
            cells = [r for r, k in zip(cells, keep) if k]
            lines = [line for line, k in zip(lines, keep) if k]
            if not cells:
                raise CLIError(f"every row of {self.path} has a missing value in the columns "
                               "used")
        try:
            X = np.array(cells, dtype=str).astype(np.float64).reshape(len(cells), len(cols))
        except ValueError:
            self._raise_non_numeric(cells, cols, lines, hints)
        bad = ~np.isfinite(X)
        if bad.any():
            i, k = np.argwhere(bad)[0]
            raise CLIError(f"{self.path}, line {lines[i]}, column {self.names[cols[k]]!r}: "
                           f"value {cells[i][k]!r} is not finite")
        return X, dropped

    def _raise_non_numeric(self, cells, cols, lines, hints):
        for i, r in enumerate(cells):
            for k, cell in enumerate(r):
                if not _is_number(cell):
                    name = self.names[cols[k]]
                    tips = [f"--drop-columns {name if self.header else cols[k]} leaves the "
                            "column out", *hints]
                    if _COMMA_NUMBER.fullmatch(cell):
                        tips.insert(0, "--decimal , reads a decimal comma")
                    if lines[i] == 1 and self.header_detected:
                        tips.append("pass --header if the first row names the columns")
                    raise CLIError(f"{self.path}, line {lines[i]}, column {name!r}: non-numeric "
                                   f"value {cell!r} ({'; '.join(tips)})")
        raise CLIError(f"{self.path}: a value is not a number")  # pragma: no cover

    def report_dropped(self, command, dropped):
        """Say on stderr which rows --drop-missing dropped (dropped: numeric()'s
        line numbers; nothing when there are none)."""
        if not dropped:
            return
        shown = ", ".join(map(str, dropped[:_DROPPED_SHOWN]))
        more = (f" and {len(dropped) - _DROPPED_SHOWN} more" if len(dropped) > _DROPPED_SHOWN
                else "")
        print(f"fastkern {command}: dropped {len(dropped)} of {len(self.rows)} rows with a "
              f"missing value (--drop-missing): line{'s' if len(dropped) > 1 else ''} "
              f"{shown}{more} of {self.path}", file=sys.stderr)

    def kept_cells(self, columns, used, drop_missing):
        """The cells of `columns` (indices), a list per row, for the rows
        numeric(used, drop_missing) keeps."""
        rows = self.rows
        if drop_missing:
            rows = [(line, r) for line, r in rows
                    if not any(r[j].lower() in MISSING for j in used)]
        return [[r[j] for j in columns] for _, r in rows]

    def id_warnings(self, cols, X):
        """A warning for each column that looks like a row id, used as a feature."""
        warnings = []
        n = X.shape[0]
        for k, j in enumerate(cols):
            name = self.names[j]
            col = X[:, k]
            counts = n >= _ID_MIN_ROWS and (np.array_equal(col, np.arange(n)) or
                                 np.array_equal(col, np.arange(1, n + 1)))
            if counts or (self.header and name.strip().lower() in _ID_NAMES):
                why = (f"the integers {col[0]:.0f} to {col[-1]:.0f} in row order" if counts
                       else "its name")
                leave = name if self.header else j
                warnings.append(f"column {name!r} looks like a row id ({why}) and is used as a "
                                f"feature; --drop-columns {leave} leaves it out, --id-columns "
                                f"{leave} carries it to the output")
        return warnings


# A number written with a decimal comma (14,23; -0,5e3), and one with a point.
_COMMA_NUMBER = re.compile(r"[+-]?(\d+,\d*|,\d+)([eE][+-]?\d+)?")
_POINT_NUMBER = re.compile(r"[+-]?(\d+\.\d*|\.\d+)([eE][+-]?\d+)?")


def _decimal_mark(rows, delimiter, decimal):
    """The decimal mark of the file's numbers: `decimal` when given, else a comma
    where the delimiter is not one, some cell is a number written with a
    comma and none with a point (a spreadsheet's export in many locales)."""
    if decimal == "," and delimiter == ",":
        raise CLIError("--decimal , needs a file whose delimiter is not a comma "
                       "(semicolon, tab or bar)")
    if decimal is not None:
        return decimal
    if delimiter == ",":
        return "."
    cells = [c for _, row in rows for c in row]
    if any(_COMMA_NUMBER.fullmatch(c) for c in cells) and \
            not any(_POINT_NUMBER.fullmatch(c) for c in cells):
        return ","
    return "."


def read_table(path, header=None, given=(), decimal=None):
    """The Table of a CSV file (UTF-8, with or without a byte-order mark; blank rows skipped).

    header: True/False says whether the first row names the columns; None
    detects it (looks_like_header), with `given` the column names the
    command line mentions.  decimal: the numbers' decimal mark, "." or ","
    (--decimal; None: detected, _decimal_mark); with a comma, the numbers
    are read with a point (and so written, where a column is copied).
    """
    try:
        # utf-8-sig drops the byte-order mark spreadsheets put in front of
        # the first cell, which would otherwise make it neither a number nor
        # the column's name.
        with open(path, newline="", encoding="utf-8-sig") as f:
            dialect = _dialect(f.read(_SNIFF_BYTES))
            f.seek(0)
            reader = csv.reader(f, dialect)
            rows = [(reader.line_num, [c.strip() for c in row])
                    for row in reader if any(c.strip() for c in row)]
        if _decimal_mark(rows, dialect.delimiter, decimal) == ",":
            rows = [(line, [c.replace(",", ".") if _COMMA_NUMBER.fullmatch(c) else c
                            for c in row]) for line, row in rows]
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
    first_row = rows[0][1]
    detected = header is None
    if detected:
        header = looks_like_header(first_row, [r for _, r in rows[1:]], given)
    if header:
        names, rows = first_row, rows[1:]
    else:
        names = [f"x{j}" for j in range(ncols)]
    return Table(path, names, rows, header, detected, first_row)


def feature_columns(table, exclude, drop, option_note=""):
    """Every column but those in `exclude` (indices) and --drop-columns `drop` (specs)."""
    dropped = table.columns(drop, "--drop-columns")
    cols = [j for j in range(table.ncols) if j not in exclude and j not in dropped]
    if not cols:
        raise CLIError(f"{table.path} has no feature columns left{option_note}")
    return cols


def check_disjoint(table, picked, drop):
    """--drop-columns may not name a column the command was told to use."""
    dropped = set(table.columns(drop, "--drop-columns"))
    both = [table.names[j] for j in picked if j in dropped]
    if both:
        raise CLIError(f"column(s) {', '.join(both)} are both used and in --drop-columns")
