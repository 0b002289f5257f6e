"""Run scikit-learn's own test files against fastkern's drop-ins.

At collection time each file listed in ``SUITES`` is copied from the
*installed* scikit-learn into ``_copies/`` (git-ignored) with one change: the
names fastkern provides are imported from fastkern instead of scikit-learn.
Nothing else in the file is edited, so the copies test fastkern exactly as
scikit-learn tests itself.

Only the tests that reach a replaced name (directly, through a module-level
helper, or through a parametrize decorator) are kept: the others exercise
scikit-learn alone and would pass whatever fastkern did.  Tests of
scikit-learn's private internals are skipped with the reason given in
``not_applicable.py``.
"""
import ast
import importlib.util
import os
import sys
from pathlib import Path

import pytest
# scikit-learn's own fixtures and seed parametrisation, which its test files use.
from sklearn.conftest import (  # noqa: F401
    global_dtype,
    hide_available_pandas,
    pyplot,
    pytest_generate_tests,
)

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from not_applicable import NOT_APPLICABLE  # noqa: E402

COPIES = HERE / "_copies"

# scikit-learn module -> {name: fastkern module it comes from}
_PAIRWISE = {name: "fastkern" for name in (
    "pairwise_kernels", "rbf_kernel", "polynomial_kernel", "linear_kernel", "cosine_similarity",
    "laplacian_kernel", "sigmoid_kernel", "chi2_kernel", "additive_chi2_kernel")}
REPLACED = {
    "sklearn.decomposition": {"KernelPCA": "fastkern"},
    "sklearn.kernel_ridge": {"KernelRidge": "fastkern"},
    "sklearn.kernel_approximation": {"Nystroem": "fastkern"},
    "sklearn.preprocessing": {"KernelCenterer": "fastkern"},
    "sklearn.metrics.pairwise": _PAIRWISE,
    "sklearn.metrics": _PAIRWISE,
}

# copy name -> scikit-learn test file (relative to the installed package)
SUITES = {
    "test_sklearn_kernel_pca.py": "decomposition/tests/test_kernel_pca.py",
    "test_sklearn_kernel_ridge.py": "tests/test_kernel_ridge.py",
    "test_sklearn_kernel_approximation.py": "tests/test_kernel_approximation.py",
    "test_sklearn_pairwise.py": "metrics/tests/test_pairwise.py",
    "test_sklearn_data.py": "preprocessing/tests/test_data.py",
}


def _rewrite(source):
    """Return (new source, names now imported from fastkern)."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits = []  # (first line, last line, replacement text), 1-based inclusive
    replaced = set()
    for node in tree.body:
        if not (isinstance(node, ast.ImportFrom) and node.module in REPLACED):
            continue
        table = REPLACED[node.module]
        ours = [a for a in node.names if a.name in table]
        if not ours:
            continue
        keep = [a for a in node.names if a.name not in table]
        text = ""
        if keep:
            text += "from {} import {}\n".format(node.module, ", ".join(
                a.name + (f" as {a.asname}" if a.asname else "") for a in keep))
        for a in ours:
            text += "from {} import {}{}\n".format(
                table[a.name], a.name, f" as {a.asname}" if a.asname else "")
            replaced.add(a.asname or a.name)
        # Keep the line count so tracebacks point at the original lines.
        n_lines = node.end_lineno - node.lineno + 1
        text += "\n" * max(0, n_lines - text.count("\n"))
        edits.append((node.lineno, node.end_lineno, text))
    for first, last, text in reversed(edits):
        lines[first - 1:last] = [text]
    return "".join(lines), replaced


def _names(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def _relevant_tests(source, replaced):
    """Test functions that reach a replaced name, directly or via module helpers."""
    tree = ast.parse(source)
    top = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            top[node.name] = _names(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        top[n.id] = top.get(n.id, set()) | _names(node.value)
    reaching = set(replaced)
    changed = True
    while changed:
        changed = False
        for name, used in top.items():
            if name not in reaching and used & reaching:
                reaching.add(name)
                changed = True
    return {name for name in top if name.startswith("test") and name in reaching}


def _write_if_changed(path, text):
    # Every pytest-xdist worker runs this conftest: a file another worker may
    # be importing is never truncated, only replaced whole (os.replace) when
    # its text changed (another scikit-learn version).
    if path.exists() and path.read_text() == text:
        return
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _make_copies():
    spec = importlib.util.find_spec("sklearn")
    root = Path(spec.origin).parent
    COPIES.mkdir(exist_ok=True)
    relevant = {}
    for copy, rel in SUITES.items():
        source = (root / rel).read_text()
        new, replaced = _rewrite(source)
        header = f"# Copied from scikit-learn's {rel} with fastkern's drop-ins imported.\n"
        _write_if_changed(COPIES / copy, header + new)
        relevant[copy] = _relevant_tests(source, replaced)
    return relevant


RELEVANT = _make_copies()


def pytest_collection_modifyitems(config, items):
    kept, dropped = [], []
    for item in items:
        path = Path(str(item.fspath))
        if path.parent != COPIES:
            kept.append(item)
            continue
        func = item.originalname if hasattr(item, "originalname") else item.name
        if func not in RELEVANT.get(path.name, ()):
            dropped.append(item)
            continue
        reason = NOT_APPLICABLE.get(f"{path.name}::{func}") or NOT_APPLICABLE.get(
            f"{path.name}::{item.name}")
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))
        kept.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept
