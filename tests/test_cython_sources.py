"""Static checks of the Cython sources.

setup.py compiles every module with wraparound=False, under which Cython
neither checks nor corrects a negative index: on a memoryview or pointer it
reads outside the buffer, on a Python object it hands the raw negative index
to the object's item slot, whose result depends on the library version
(numpy 2.5 raises IndexError where 2.4 wrapped).  So no subscript in a .pyx or
.pxd file may start with a unary minus, and slices are held to the same rule
(`x[:-1]` is correct on a Python object but reads before the start of a
memoryview).  The debug build (FASTKERN_DEBUG_CYTHON=1) catches the computed
negative indices this scan cannot see.
"""
import io
import keyword
import pathlib
import tokenize

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "fastkern"
SOURCES = sorted(PACKAGE.glob("*.pyx")) + sorted(PACKAGE.glob("*.pxd"))

_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = set(_OPEN.values())


def _significant_tokens(text):
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
            tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER}
    return [tok for tok in tokenize.generate_tokens(io.StringIO(text).readline)
            if tok.type not in skip]


def _is_subscript(previous):
    """A '[' indexes when it follows a name (not a keyword), ')' or ']'."""
    if previous is None:
        return False
    if previous.type == tokenize.NAME:
        return not keyword.iskeyword(previous.string)
    return previous.type == tokenize.OP and previous.string in (")", "]")


def negative_subscripts(text):
    """Line numbers of subscripts with an index or slice bound that starts with a unary minus.

    Comments and strings are skipped by Python's tokenizer, which reads
    Cython's syntax (typed memoryviews, casts, cdef) as ordinary tokens.
    """
    tokens = _significant_tokens(text)
    lines = set()
    for start, tok in enumerate(tokens):
        if not (tok.type == tokenize.OP and tok.string == "["
                and _is_subscript(tokens[start - 1] if start else None)):
            continue
        depth = 0
        piece_start = True  # at the start of an index or a slice bound
        for inner in tokens[start + 1:]:
            op = inner.string if inner.type == tokenize.OP else None
            if piece_start and op == "-":
                lines.add(inner.start[0])
            if op in _OPEN:
                depth += 1
                # x[(-1)] is x[-1]: an opening parenthesis keeps the piece's start.
                piece_start = piece_start and op == "("
                continue
            if op in _CLOSE:
                if depth == 0:
                    break
                depth -= 1
            piece_start = depth == 0 and op in (",", ":", "::")
    return sorted(lines)


@pytest.mark.parametrize(
    "snippet, flagged",
    [
        ("a = x[-1]\n", [1]),
        ("a = x[i, -1]\n", [1]),
        ("a = x[-k]\n", [1]),
        ("a = x[- 1]\n", [1]),
        ("a = x[:-1]\n", [1]),
        ("a = x[-k:]\n", [1]),
        ("a = x[::-1]\n", [1]),
        ("a = x[(-1)]\n", [1]),
        ("a = x[i, (-k)]\n", [1]),
        ("a = f(y)[-1]\n", [1]),
        ("a = x[0][-1]\n", [1]),
        ("a = x[y[-1]]\n", [1]),
        ("b = 0\na = x[\n    i,\n    -1]\n", [4]),
        ("cdef double[:, ::1] m = x\n", []),
        ("a = x[n - 1]\n", []),
        ("a = x[i, n - 1]\n", []),
        ("a = x[(n - 1) * d]\n", []),
        ("a = x[f(-1)]\n", []),
        ("a = [-1, 2]\n", []),
        ("return [-1]\n", []),
        ("a = x in [-1, 0]\n", []),
        ("a = f(-1)\n", []),
        ("a = x[1]  # not x[-1]\n", []),
        ('a = "x[-1]"\n', []),
        ('"""\nx[-1]\n"""\n', []),
    ],
)
def test_scanner_finds_negative_subscripts(snippet, flagged):
    assert negative_subscripts(snippet) == flagged


def test_every_source_is_scanned():
    names = {p.name for p in SOURCES}
    assert {"_centering.pyx", "_gram.pyx", "_gram.pxd"} <= names


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_no_negative_literal_index(path):
    found = negative_subscripts(path.read_text())
    assert not found, "".join(
        f"\n{path.relative_to(PACKAGE.parent)}:{line}: negative index under wraparound=False"
        for line in found)
