"""The documentation's promises: every public name in the API reference, the
code on its pages runs, and the benchmarks page's plots are drawn from saved
results, whatever series they hold.  (The full Sphinx build, gallery included,
is .ci/docs.sh.)
"""
import ast
import importlib.util
import json
import re
import textwrap
from pathlib import Path

import pytest

import fastkern

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


def _code_blocks():
    """(page, index, code) of every ``.. code-block:: python`` on the documentation's pages."""
    found = []
    for page in sorted(DOCS.rglob("*.rst")):
        rel = page.relative_to(DOCS).as_posix()
        if rel.startswith(("_build/", "auto_examples/", "api/generated/", "benchmarks/_generated/")):
            continue
        lines = page.read_text(encoding="utf-8").splitlines()
        index = 0
        for i, line in enumerate(lines):
            if line.strip() != ".. code-block:: python":
                continue
            body = []
            for nxt in lines[i + 1:]:
                if nxt.strip() and not nxt.startswith("   "):
                    break
                body.append(nxt)
            found.append((rel, index, textwrap.dedent("\n".join(body)).strip() + "\n"))
            index += 1
    return found


BLOCKS = _code_blocks()


def _api_names():
    text = (DOCS / "api.rst").read_text(encoding="utf-8")
    names = set()
    for block in re.findall(r"\.\. autosummary::\n((?:   .*\n|\n)+)", text):
        names.update(line.strip() for line in block.splitlines()
                     if line.strip() and not line.strip().startswith(":"))
    return names


def test_every_public_name_is_in_the_api_reference():
    missing = sorted(set(fastkern.__all__) - _api_names())
    assert not missing, f"not in docs/api.rst: {missing}"


def test_the_api_reference_lists_only_public_names():
    extra = sorted(_api_names() - set(fastkern.__all__))
    assert not extra, f"docs/api.rst lists names outside fastkern.__all__: {extra}"


def test_the_pages_have_examples():
    pages = {page for page, _, _ in BLOCKS}
    assert {"getting_started.rst", "user_guide/gram.rst", "user_guide/kernel_pca.rst"} <= pages


@pytest.mark.parametrize("page, index, code", BLOCKS,
                         ids=[f"{page}:{index}" for page, index, _ in BLOCKS])
def test_page_example_runs(page, index, code, tmp_path, monkeypatch):
    if "distributed" in code:
        pytest.importorskip("distributed")
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"docs/{page} example {index}", "exec"), {"__name__": "__docs__"})


def test_the_gallery_is_configured_as_documented():
    conf = ast.parse((DOCS / "conf.py").read_text(encoding="utf-8"))
    gallery = next(node.value for node in conf.body if isinstance(node, ast.Assign)
                   and getattr(node.targets[0], "id", None) == "sphinx_gallery_conf")
    settings = {k.value: v for k, v in zip(gallery.keys, gallery.values)}
    assert ast.literal_eval(settings["examples_dirs"]) == "examples"
    assert ast.literal_eval(settings["gallery_dirs"]) == "auto_examples"
    assert (DOCS / "examples" / "README.txt").is_file()
    assert list((DOCS / "examples").glob("*.py"))


def _make_plots():
    pytest.importorskip("matplotlib")
    spec = importlib.util.spec_from_file_location("make_plots",
                                                  DOCS / "benchmarks" / "make_plots.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(task, impl, n, time_s, n_threads=None, peak=1 << 20):
    return {"task": task, "impl": impl, "n": n, "d": 16, "n_threads": n_threads,
            "time_s": time_s, "repeats": 1, "peak_bytes": peak, "memory_method": "rss"}


def _run_file(path, rows, n_threads=2, cpu="Test CPU"):
    doc = {"host": {"cpu": cpu}, "results": rows, "n_features": 16,
           "machine": {"cores": 4, "openmp": True, "blas": [], "n_threads": n_threads,
                       "fastkern": "0", "python": "3", "numpy": "2", "scipy": "1"}}
    path.write_text(json.dumps(doc), encoding="utf-8")


def test_benchmark_page_from_the_saved_results(tmp_path):
    plots = _make_plots()
    out = plots.build(DOCS / "benchmarks" / "data", tmp_path)
    text = out.read_text(encoding="utf-8")
    for saved in (DOCS / "benchmarks" / "data").glob("*.json"):
        doc = json.loads(saved.read_text(encoding="utf-8"))
        assert doc["host"]["cpu"] in text
        if "benchmark" not in doc:  # a benchmarks/bench_*.py script's rows have their own form
            assert any(r["impl"] == "fastkern" for r in doc["results"])
    for image in re.findall(r"_generated/(\S+\.png)", text):
        assert (tmp_path / image).stat().st_size > 0


def test_benchmark_page_tolerates_missing_series(tmp_path):
    plots = _make_plots()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert "No saved results" in plots.build(empty, tmp_path / "out0").read_text()

    data = tmp_path / "data"
    data.mkdir()
    _run_file(data / "only-fastkern.json", [_row("gram", "fastkern", 1000, 0.01, peak=0)])
    text = plots.build(data, tmp_path / "out1").read_text()
    assert "No thread-scaling results" in text
    assert "list-table" not in text          # no scikit-learn rows to compare with
    assert "time_vs_n_0.png" in text
    assert "No memory results" in text     # its only peak memory is 0


def test_benchmark_page_draws_thread_scaling_and_time_against_n(tmp_path):
    plots = _make_plots()
    data = tmp_path / "data"
    data.mkdir()
    for t, time_s in ((1, 4.0), (2, 2.1), (4, 1.2)):
        _run_file(data / f"threads-{t}.json",
                  [_row("kpca", "fastkern", 8000, time_s, n_threads=t),
                   _row("kpca", "sklearn", 8000, 8.0, n_threads=t)], n_threads=t)
    _run_file(data / "suite.json", [_row("kpca", impl, n, s * n / 1000)
                                    for n in (200, 20_000, 200_000)
                                    for impl, s in (("fastkern", 0.1), ("sklearn", 0.5))])
    out = tmp_path / "out"
    text = plots.build(data, out).read_text()
    assert (out / "threads_0.png").stat().st_size > 0
    assert "No thread-scaling results" not in text
    assert plots.thread_scaling(plots.best_rows(plots.load(data)))["kpca"] == \
        (8000, [(1, 4.0), (2, 2.1), (4, 1.2)])
    # Time against N at the thread count most rows have (the suite's default, 2),
    # with scikit-learn's time over fastkern's in the table.
    assert "200,000" in text and "5.0x" in text
