"""The package's layers, as README's "Architecture" section draws them.

Each module may import only from the layers below its own (a function-level
import counts: a lazy import is still a dependency).  So there are no import
cycles, the compiled loops know nothing of estimators, and the estimators
reach kernels only through the kernel specification.  A new module must be
placed in a layer here and in README, or this test fails.
"""
import ast
import pathlib
import re

import pytest

import fastkern

PACKAGE = pathlib.Path(fastkern.__file__).parent
README = pathlib.Path(__file__).resolve().parents[1] / "README.md"

#: Bottom to top.  Modules of one layer do not import each other.
LAYERS = [
    ("compiled loops", {"_openmp", "_batches", "_gram", "_centering", "_matfree", "_split",
                        "_sparse", "_inchol", "_structured", "_kstats", "_featurewise"}),
    ("leaves", {"_version", "_testing", "_progress"}),
    ("thread policy", {"_threads"}),
    ("validation", {"_validation"}),
    ("configuration", {"_config"}),
    ("Gram functions", {"pairwise", "_gamma"}),
    ("kernel objects", {"kernels"}),
    ("structured kernels", {"structured"}),
    ("kernel specification", {"_kernel_api"}),
    ("numerical building blocks", {"centering", "_eigen", "_linalg", "_operator", "lowrank",
                                   "nystroem"}),
    ("mixed-precision solve", {"_mixed"}),
    ("solver strategies and backends", {"large_n", "_dask"}),
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


def test_readme_draws_every_layer():
    text = README.read_text()
    match = re.search(r"\n## Architecture\n(.*?)(?=\n## |\Z)", text, re.S)
    assert match, "README has no '## Architecture' section"
    section = match.group(1)
    for title, modules in LAYERS:
        assert title in section, f"README's Architecture section does not name {title!r}"
        for module in modules:
            if module not in ("__main__", "_version"):
                assert module.lstrip("_") in section, f"README does not place {module}"


def test_library_code_does_not_import_test_helpers():
    users = [p.stem for p in PACKAGE.rglob("*.py") if "_testing" in _imports(p)
             and p.stem != "_testing"]
    assert not users, f"_testing is imported by {sorted(users)}"


def test_benchmark_harness_is_not_installed():
    # benchmarks/ holds it; `fastkern bench --full` runs it from a source checkout.
    assert not (PACKAGE / "_bench").exists()
    assert not any("_harness" in p.read_text() for p in PACKAGE.rglob("*.py")
                   if p.parent.name != "cli")
