"""The package's layers, as docs/developer/architecture.rst draws them.

Each module may import only from the layers below its own (a function-level
import counts: a lazy import is still a dependency).  So there are no import
cycles, the compiled loops know nothing of estimators, and the estimators
reach kernels only through the kernel specification.  A new module must be
placed in a layer here and in that page's picture, or this test fails.
"""
import ast
import pathlib
import re

import pytest

import fastkern

PACKAGE = pathlib.Path(fastkern.__file__).parent
ARCHITECTURE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "developer" / "architecture.rst"

#: Bottom to top.  Modules of one layer do not import each other.
LAYERS = [
    ("compiled loops", {"_openmp", "_batches", "_gram", "_centering", "_matfree", "_split",
                        "_sparse", "_inchol", "_structured", "_kstats", "_featurewise", "_lanczos",
                        "_tridiagonal"}),
    ("leaves", {"_version", "_testing", "_progress", "_solver_names"}),
    ("thread policy", {"_threads"}),
    ("validation", {"_validation"}),
    ("configuration", {"_config"}),
    ("kernel registry", {"_registry"}),
    ("Gram functions", {"pairwise", "_gamma"}),
    ("kernel objects", {"kernels"}),
    ("structured kernels", {"structured"}),
    ("kernel specification", {"_kernel_api"}),
    ("numerical building blocks", {"centering", "_eigen", "_linalg", "_operator", "lowrank",
                                   "nystroem"}),
    ("mixed-precision solve", {"_mixed"}),
    ("solver strategies and backends", {"large_n", "_dask"}),
    ("KernelPCA solvers", {"_kpca_solvers"}),
    ("estimators and tests", {"decomposition", "kernel_ridge", "sir", "fda", "cca",
                              "kernel_tests"}),
    ("package", {"__init__"}),
    ("command line", {"cli"}),
    ("entry point", {"__main__"}),
]


def _module_names():
    names = set()
    for path in PACKAGE.rglob("*"):
        if path.suffix in (".py", ".pyx") and "src" not in path.relative_to(PACKAGE).parts:
            rel = path.relative_to(PACKAGE).with_suffix("")
            names.add(rel.parts[0])
    return names


def _imports(path):
    """The fastkern modules a source file imports, anywhere in it."""
    deps = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and \
                node.module.split(".")[0] == "fastkern":
            parts = node.module.split(".")
            if len(parts) > 1:
                deps.add(parts[1])
            else:
                modules = _module_names()
                deps.update(a.name if a.name in modules else "__init__" for a in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "fastkern":
                    deps.add(parts[1] if len(parts) > 1 else "__init__")
    return deps


def _layer_of():
    return {m: i for i, (_, modules) in enumerate(LAYERS) for m in modules}


def test_every_module_has_a_layer():
    placed = set(_layer_of())
    missing = _module_names() - placed
    assert not missing, f"modules not placed in a layer: {sorted(missing)}"


def test_modules_import_only_from_lower_layers():
    layer = _layer_of()
    wrong = []
    for path in sorted(PACKAGE.rglob("*.py")):
        # A subpackage (fastkern/cli/) is one module of its layer.
        name = path.relative_to(PACKAGE).with_suffix("").parts[0]
        for dep in sorted(_imports(path) - {name}):
            if dep in layer and layer[dep] >= layer[name]:
                wrong.append(f"{name} ({LAYERS[layer[name]][0]}) imports {dep} "
                             f"({LAYERS[layer[dep]][0]})")
    assert not wrong, "\n".join(wrong)


def test_the_check_itself_sees_lazy_imports(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from fastkern.cli import main\n    import fastkern._gram\n")
    assert _imports(source) == {"cli", "_gram"}


def _picture():
    """{layer title: the words of its lines} from the page's literal block between its
    layers-begin and layers-end markers; a line starting with spaces continues the
    layer above it."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    match = re.search(r"\n\.\. layers-begin\n(.*?)\n\.\. layers-end\n", text, re.S)
    assert match, f"{ARCHITECTURE.name} has no layers-begin/layers-end markers"
    lines = [line[3:] for line in match.group(1).splitlines() if line.startswith("   ")]
    titles = {title for title, _ in LAYERS}
    picture, current = {}, None
    for line in lines:
        if not line.strip() or set(line.strip()) == {"-"}:
            continue
        if line.startswith(" "):
            assert current is not None, f"continuation line before any layer: {line!r}"
            picture[current] += " " + line
            continue
        current = next((t for t in titles if line.startswith(t + "  ")), None)
        assert current is not None, f"the picture's line {line!r} starts with no layer name"
        picture[current] = line[len(current):]
    return picture


def test_the_picture_draws_every_layer_and_module_in_its_place():
    picture = _picture()
    assert list(picture) == [title for title, _ in reversed(LAYERS)], \
        "the picture's layers, top to bottom, are not LAYERS reversed"
    for title, modules in LAYERS:
        words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", picture[title]))
        for module in modules:
            assert module in words, f"the picture does not place {module} in {title!r}"
    placed = {m: t for t, ms in LAYERS for m in ms}
    for title, line in picture.items():
        for word in re.findall(r"(?<![\w`])_?[a-z][a-z0-9_]*", line.split("(")[0]):
            if word in placed:
                assert placed[word] == title, f"the picture places {word} in {title!r}"


def test_library_code_does_not_import_test_helpers():
    users = [p.stem for p in PACKAGE.rglob("*.py") if "_testing" in _imports(p)
             and p.stem != "_testing"]
    assert not users, f"_testing is imported by {sorted(users)}"


def test_benchmark_harness_is_not_installed():
    # benchmarks/ holds it; `fastkern bench --full` runs it from a source checkout.
    assert not (PACKAGE / "_bench").exists()
    assert not any("_harness" in p.read_text() for p in PACKAGE.rglob("*.py")
                   if p.parent.name != "cli")


def _kernel_name_collections(path, names):
    """Literal dicts, lists, tuples and sets in a source file that hold two or more
    kernel names (as keys or items): a second table of kernels."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Dict):
            items = node.keys
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            items = node.elts
        else:
            continue
        hits = {i.value for i in items
                if isinstance(i, ast.Constant) and isinstance(i.value, str) and i.value in names}
        if len(hits) >= 2:
            found.append((node.lineno, sorted(hits)))
    return found


def test_only_the_registry_lists_kernels():
    """Each vector kernel is defined once, in fastkern/_registry.py: no other module
    keeps a table of kernel names (derive it from the registry instead)."""
    from fastkern import _registry

    names = set(_registry.BY_NAME)
    wrong = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "_registry.py":
            continue
        found = _kernel_name_collections(path, names)
        if found:
            wrong[str(path.relative_to(PACKAGE))] = found
    assert not wrong, f"kernel names listed outside fastkern/_registry.py: {wrong}"


def test_the_kernel_table_check_sees_a_table(tmp_path):
    source = tmp_path / "m.py"
    source.write_text('KINDS = {"rbf": 2, "laplacian": 3}\nOK = ("rbf", "precomputed")\n')
    assert _kernel_name_collections(source, {"rbf", "laplacian"}) == [(1, ["laplacian", "rbf"])]


# The execution context (fastkern/_threads.py) owns the thread count and the
# BLAS limit; _validation.check_n_threads is its argument check.
_THREAD_RULE_DEFS = {"check_n_threads", "default_n_threads"}
_THREAD_RULE_CALLS = {"sched_getaffinity", "max_threads", "threadpool_limits",
                      "ThreadpoolController", "threadpool_info"}


def _thread_policy_sites(path):
    """Where a source file imports threadpoolctl, defines the n_threads rule or counts
    cores and OpenMP threads itself: (line, what) pairs."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names
                      if a.name.split(".")[0] == "threadpoolctl"]
        elif isinstance(node, ast.ImportFrom) and node.module and \
                node.module.split(".")[0] == "threadpoolctl":
            found.append((node.lineno, node.module))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.name in _THREAD_RULE_DEFS:
            found.append((node.lineno, f"def {node.name}"))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
            if name in _THREAD_RULE_CALLS:
                found.append((node.lineno, f"{name}()"))
    return found


def test_only_the_execution_context_sets_threads_and_limits_blas():
    """Only _threads.py imports threadpoolctl and counts cores; only _threads.py and
    _validation.py define what n_threads (and None) means."""
    allowed = {"_threads.py": None, "_validation.py": {"def check_n_threads"}}
    wrong = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        found = _thread_policy_sites(path)
        if path.parent == PACKAGE and path.name in allowed:
            ok = allowed[path.name]
            found = [] if ok is None else [f for f in found if f[1] not in ok]
        if found:
            wrong[str(path.relative_to(PACKAGE))] = found
    assert not wrong, f"thread policy outside fastkern/_threads.py: {wrong}"


def test_the_thread_policy_check_sees_violations(tmp_path):
    source = tmp_path / "m.py"
    source.write_text("import os\nfrom threadpoolctl import threadpool_limits\n"
                      "def default_n_threads():\n    return len(os.sched_getaffinity(0))\n")
    assert _thread_policy_sites(source) == [(2, "threadpoolctl"), (3, "def default_n_threads"),
                                           (4, "sched_getaffinity()")]
