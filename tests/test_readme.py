"""README's promises are checked, so they cannot rot.

Its install and test commands are the ones CI runs, its Python example runs
and prints what its comments say, its speed table is the saved benchmark run
it names, and its links point at files that exist.
"""
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
    rows = re.findall(r"^\| ([^|]+?) \| ([\d.]+)x \| ([\d.]+) MiB / ([\d.]+) MiB \|$",
                      _text(), flags=re.M)
    assert len(rows) == 4
    return rows


def test_readme_speed_table_is_the_saved_run():
    name = re.search(r"saved in `(docs/benchmarks/data/[\w.-]+\.json)`", _text()).group(1)
    doc = json.loads((ROOT / name).read_text(encoding="utf-8"))
    n = int(re.search(r"at N = (\d+):", _text()).group(1))
    assert f"{doc['host']['cpu']}" in _text()
    assert f"{doc['machine']['n_threads']} threads, d = {doc['n_features']}" in _text()
    tasks = {"RBF Gram": "gram", "double centering": "center",
             "KernelPCA, 5 components": "kpca", "KernelRidge": "ridge"}
    rows = {(r["task"], r["impl"]): r for r in doc["results"] if r["n"] == n}
    for title, speedup, mem_sk, mem_fk in _speed_table():
        task = tasks[title]
        fk, sk = rows[task, "fastkern"], rows[task, "sklearn"]
        assert float(speedup) == pytest.approx(sk["time_s"] / fk["time_s"], abs=0.05), title
        for shown, row in ((mem_sk, sk), (mem_fk, fk)):
            assert float(shown) == pytest.approx(row["peak_bytes"] / 2 ** 20,
                                                 abs=0.5 if "." not in shown else 0.05), title


def test_readme_links_exist():
    targets = re.findall(r"\]\(([^)#]+)\)", _text())
    assert targets
    missing = [t for t in targets if not t.startswith("http") and not (ROOT / t).exists()]
    assert not missing, missing
