"""README's promises are checked, so they cannot rot.

Its install and test commands are the ones CI runs, its Python example runs
and prints what its comments say, its speed table is the saved benchmark runs
it names, its figure is drawn from the run it names, and its links point at
files that exist.
"""
import importlib.util
import json
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
MAX_LINES = 250


def _text():
    return README.read_text(encoding="utf-8")


def _blocks():
    return re.findall(r"```python\n(.*?)```", _text(), flags=re.S)


def _run(code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__readme__"}
    exec(compile(code, "README.md example", "exec"), namespace)
    return namespace


def test_readme_is_short():
    assert len(_text().splitlines()) <= MAX_LINES


@pytest.mark.parametrize("command", [
    'pip install ".[plot]" && fastkern demo',
    'pip install ".[test]" && pytest -n auto',
], ids=["install-and-demo", "install-and-test"])
def test_readme_keeps_the_commands_ci_runs(command):
    commands = re.findall(r"```bash\n(.*?)```", _text(), flags=re.S)
    assert any(command in block.splitlines() for block in commands), command


def test_readme_has_no_dated_measurements():
    assert not re.search(r"\b20\d\d-\d\d-\d\d\b", _text())


@pytest.mark.parametrize("index", range(len(_blocks())), ids=lambda i: f"example-{i}")
def test_readme_example_runs(index, tmp_path, monkeypatch):
    _run(_blocks()[index], tmp_path, monkeypatch)


def test_readme_example_prints_what_it_says(tmp_path, monkeypatch, capsys):
    from sklearn.decomposition import KernelPCA as SkKernelPCA
    from sklearn.metrics.pairwise import rbf_kernel
    from sklearn.preprocessing import KernelCenterer

    code = _blocks()[0]             # the first example, "A first example"
    ns = _run(code, tmp_path, monkeypatch)
    # "[25.2886 15.9759]" in the comment: the printed eigenvalues, to 4 decimals.
    claimed = [float(v) for v in re.search(r"# \[([\d. ]+)\]", code).group(1).split()]
    np.testing.assert_allclose(ns["kpca"].eigenvalues_, claimed, atol=5e-5)
    assert capsys.readouterr().out.strip()
    # "scikit-learn's KernelPCA result" (up to the sign of each component).
    ref = SkKernelPCA(n_components=2, kernel="rbf", gamma=0.05)
    Z_ref = ref.fit_transform(ns["X"])
    np.testing.assert_allclose(ns["kpca"].eigenvalues_, ref.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(np.abs(ns["Z"]), np.abs(Z_ref), atol=1e-8)
    # "sklearn.metrics.pairwise's" Gram, then "double-centred in place".
    K_ref = KernelCenterer().fit_transform(rbf_kernel(ns["X"], gamma=0.05))
    np.testing.assert_allclose(ns["K"], K_ref, atol=1e-12)


def _speed_table():
    rows = re.findall(r"^\| ([^|]+?) \| ([\d.]+) s \| ([\d.]+) s \| ([\d.]+)x \| `([\w.-]+\.json)` \|$",
                      _text(), flags=re.M)
    assert len(rows) == 3
    return rows


def _shown(text, value):
    """Whether `text` is `value` rounded to the decimals `text` has."""
    decimals = len(text.split(".")[1]) if "." in text else 0
    return abs(float(text) - value) <= 0.5 * 10 ** -decimals + 1e-12


def _measured(doc, task, n):
    """(scikit-learn's time, fastkern's time) at n in a saved benchmarks/bench_*.py document."""
    if doc["benchmark"] == "sizes":   # the steep spectrum: gamma = 1/d, as the suite's
        row, = [r for r in doc["results"] if r["task"] == task and r["n"] == n
                and r["d"] == 16 and r["spectrum"] == "steep"]
        return row["sklearn_s"], row["fastkern_s"]
    assert doc["benchmark"] == "time_vs_n"
    times = [[r["time_s"] for r in doc["results"] if r["task"] == task and r["n"] == n
              and r["impl"] == impl and r["time_s"] is not None]
             for impl in ("sklearn", "fastkern")]
    return min(times[0]), min(times[1])


def test_readme_speed_table_is_the_saved_runs():
    n = int(re.search(r"At N = (\d+):", _text()).group(1))
    tasks = {"RBF Gram, `rbf_kernel`": "rbf", "KernelPCA, 5 components": "kpca",
             "KernelRidge": "ridge"}
    for title, sk_shown, fk_shown, speedup, name in _speed_table():
        doc = json.loads((ROOT / "docs/benchmarks/data" / name).read_text(encoding="utf-8"))
        assert doc["host"]["cpu"] in _text() and not doc["quick"]
        assert doc["machine"]["cores"] == 2 and doc["machine"]["n_threads"] == 2
        sk, fk = _measured(doc, tasks[title], n)
        assert _shown(sk_shown, sk) and _shown(fk_shown, fk), title
        assert _shown(speedup, sk / fk), title


def test_readme_figure_is_the_saved_time_against_n_run():
    # docs/bench.png is drawn by `docs/benchmarks/make_plots.py --readme` from
    # the saved bench_time_vs_n.py document reaching the largest N (of each
    # machine's latest), the one README names.
    name = re.search(r"saved in `docs/benchmarks/data/([\w.-]+\.json)`", _text()).group(1)
    spec = importlib.util.spec_from_file_location(
        "make_plots", ROOT / "docs" / "benchmarks" / "make_plots.py")
    make_plots = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_plots)
    shown = make_plots.readme_run(ROOT / "docs" / "benchmarks" / "data")
    assert shown["name"] + ".json" == name
    assert max(r["n"] for r in shown["results"]) >= 200_000
    assert "](docs/bench.png)" in _text()


def test_readme_links_exist():
    targets = re.findall(r"\]\(([^)#]+)\)", _text())
    assert targets
    missing = [t for t in targets if not t.startswith("http") and not (ROOT / t).exists()]
    assert not missing, missing
