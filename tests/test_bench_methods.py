"""fastkern bench --methods (benchmarks/_harness/methods.py, run from a source checkout):
each case computes what its peer computes; absent peers skip."""
import importlib
import importlib.util

import pytest

from test_cli import fastkern

from fastkern.cli import bench as bench_command

from harness_checkout import BENCH_DIR  # skips outside a source checkout

from _harness import measuring, methods  # noqa: E402


def _imports(package):
    try:
        importlib.import_module(package)
    except Exception:  # noqa: BLE001 - a broken third-party install
        return False
    return True


def test_every_installed_case_agrees_with_its_peer_and_absent_ones_are_skipped():
    rows = methods.run(scale=0.02, rounds=1)
    assert [r["name"] for r in rows] == [c.name for c in methods.CASES]
    for case, row in zip(methods.CASES, rows):
        if importlib.util.find_spec(case.package) is None:
            assert row["skipped"] == f"not installed (pip install {methods.PIP[case.package]})"
            continue
        if not _imports(case.package):
            assert row["skipped"].startswith("fails to import: "), row
            continue
        assert row["difference"] < 1e-9, row
        assert row["ratio"] == pytest.approx(row["peer_seconds"] / row["fastkern"])
    # scikit-learn is a dependency: its cases always run.
    assert all("skipped" not in r for r in rows if "scikit-learn" in r["peer"])


def test_a_peer_that_fails_to_import_is_skipped_with_its_error(tmp_path, monkeypatch):
    # An installed peer whose import raises something other than ImportError
    # (hyppo 0.5.2 on SciPy 1.17: AttributeError) is skipped, not fatal.
    (tmp_path / "brokenpeer").mkdir()
    (tmp_path / "brokenpeer" / "__init__.py").write_text(
        "raise AttributeError('module has no attribute random')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    case = methods.Case("broken case", "brokenpeer Thing", "brokenpeer",
                        lambda scale: pytest.fail("a broken peer must not be set up"))
    monkeypatch.setattr(methods, "CASES", (case,))
    monkeypatch.setitem(methods.PIP, "brokenpeer", "brokenpeer")
    [row] = methods.run(scale=0.02, rounds=1)
    assert row["skipped"] == ("fails to import: AttributeError: module has no attribute "
                              "random")
    assert "skipped broken case vs brokenpeer Thing: fails to import" in \
        methods.format_rows([row])


def test_cli_methods_table_lists_skipped_peers(tmp_path, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("cca_zoo", "hyppo", "grakel")
                        else real(name, *a))
    # The checkout's harness, also when the installed package is tested.
    monkeypatch.setattr(bench_command, "BENCHMARKS", BENCH_DIR)
    proc = fastkern("bench", "--methods", "--quick", "--threads", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert "| method | size | fastkern | peer | peer time | fastkern faster | largest difference |" \
        in lines
    assert sum(line.startswith("| chi2 Gram | N=") for line in lines) == 1
    assert "skipped kernel CCA fit vs cca-zoo KCCA: not installed (pip install cca-zoo)" in lines
    assert sum(line.startswith("skipped ") for line in lines) == 4


def test_cli_methods_refuses_grid_options(tmp_path):
    proc = fastkern("bench", "--methods", "--json", tmp_path / "x.json", cwd=tmp_path)
    assert proc.returncode == 2
    assert "--methods takes --quick and --threads only" in proc.stderr
    assert not (tmp_path / "x.json").exists()


def test_side_by_side_interleaves_and_settles(monkeypatch):
    # Calls alternate round by round, each after the settle pause, and the
    # fastest time of each contestant is kept.
    events, sleeps = [], []
    monkeypatch.setattr(measuring.time, "sleep", lambda s: sleeps.append(s))
    clock = iter(range(100))
    monkeypatch.setattr(measuring.time, "perf_counter", lambda: next(clock))
    best = measuring.side_by_side({"a": lambda: events.append("a"),
                                   "b": lambda: events.append("b")}, rounds=2, settle=0.3)
    assert events == ["a", "b", "a", "b"]
    assert sleeps == [0.3] * 4
    assert best == {"a": 1, "b": 1}
    sleeps.clear()
    measuring.side_by_side({"a": lambda: None}, rounds=2)
    assert sleeps == []
