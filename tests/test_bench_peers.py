"""The peers of `fastkern bench --full` (numba, numexpr, pykeops; the harness in
benchmarks/): each computes the task it is timed on, and the command lists
them or says why it skipped them.

A peer's test is skipped when its package is absent (`pip install ".[bench]"`
from a checkout installs them all).
"""
import json
import re

import numpy as np
import pytest
from sklearn.metrics.pairwise import rbf_kernel

from test_cli import fastkern

from fastkern.cli import bench as bench_command

from harness_checkout import BENCH_DIR  # skips outside a source checkout

import _harness as _bench  # noqa: E402
from _harness import peers, suite  # noqa: E402


def _data(n, d, order="C"):
    X = np.random.default_rng(n).standard_normal((n, d))
    return np.asarray(X, order=order)


SIZES = [(1, 3), (2, 1), (37, 5), (257, 16)]  # odd sizes, one feature, d=16


@pytest.mark.parametrize("n,d", SIZES)
def test_numba_gram_equals_sklearn(n, d):
    pytest.importorskip("numba")
    X = _data(n, d)
    K = peers.numba_rbf_gram(X, 0.3)
    np.testing.assert_allclose(K, rbf_kernel(X, gamma=0.3), rtol=1e-10, atol=1e-12)


def test_numba_gram_takes_any_layout():
    pytest.importorskip("numba")
    X = _data(40, 6, order="F")
    X.flags.writeable = False
    ref = rbf_kernel(X, gamma=0.2)
    np.testing.assert_allclose(peers.numba_rbf_gram(X[::2], 0.2), ref[::2, ::2],
                               rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n,d", SIZES)
def test_numexpr_gram_equals_sklearn(n, d):
    pytest.importorskip("numexpr")
    X = _data(n, d)
    K = peers.numexpr_rbf_gram(X, 0.3)
    np.testing.assert_allclose(K, rbf_kernel(X, gamma=0.3), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("n,d", [(2, 1), (37, 5), (257, 16)])
def test_matvec_peers_equal_gram_product(n, d):
    X = _data(n, d)
    V = np.random.default_rng(3).standard_normal((n, _bench.MATVEC_COLUMNS))
    ref = rbf_kernel(X, gamma=0.3) @ V
    np.testing.assert_allclose(peers.fastkern_rbf_matvec(X, V, 0.3), ref,
                               rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(peers.numpy_rbf_matvec(X, V, 0.3), ref, rtol=1e-12, atol=1e-12)
    pytest.importorskip("pykeops")
    np.testing.assert_allclose(peers.pykeops_rbf_matvec(X, V, 0.3), ref,
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("impl", _bench.PEERS)
def test_built_peer_runs_with_threads(impl):
    pytest.importorskip(impl)
    (task,) = _bench.PEER_TASKS[impl]
    out = _bench.build(task, impl, 30, d=4, n_threads=1)()
    X, _ = _bench.make_data(30, 4)
    K = rbf_kernel(X, gamma=0.25)
    if task == "gram":
        np.testing.assert_allclose(out, K, rtol=1e-10, atol=1e-12)
    else:
        assert out.shape == (30, _bench.MATVEC_COLUMNS)


def test_build_rejects_a_peer_on_a_task_it_does_not_do():
    with pytest.raises(ValueError, match="does not implement"):
        _bench.build("kpca", "numba", 10)
    with pytest.raises(ValueError, match="does not implement"):
        _bench.build("matvec", "numexpr", 10)
    with pytest.raises(ValueError, match="does not implement"):
        _bench.build("gram", "pykeops", 10)


def test_peer_status_names_the_missing(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "numexpr" else real(name, *a))
    status = _bench.peer_status()
    assert set(status) == set(_bench.PEERS)
    assert status["numexpr"] == "not installed (pip install numexpr)"
    # The skip reason reaches the table.
    table = _bench.format_peers([], {k: v for k, v in status.items() if v})
    assert "skipped numexpr: not installed (pip install numexpr)" in table


def test_failing_peer_is_skipped_with_its_error(monkeypatch):
    """A peer whose measurement fails (pykeops without a compiler) is reported, not fatal."""
    calls = []

    def fake_measure(task, impl, n, **kw):
        calls.append((task, impl, n))
        if impl == "numba":
            raise _bench.MeasurementError(f"{task}/{impl} at N={n}: RuntimeError: no compiler")
        return {"task": task, "impl": impl, "n": n, "time_s": 2.0, "peak_bytes": 0}

    monkeypatch.setattr(suite, "measure", fake_measure)
    results = [{"task": "gram", "impl": "fastkern", "n": n, "time_s": 0.5} for n in (10, 20)]
    rows, skipped = _bench.run_peers([10, 20], results,
                                     status={"numba": None, "numexpr": None,
                                             "pykeops": "not installed (pip install pykeops)"})
    assert ("gram", "numba", 20) not in calls  # not retried after failing
    assert skipped["numba"].startswith("failed: gram/numba at N=10: RuntimeError")
    assert skipped["pykeops"] == "not installed (pip install pykeops)"
    assert {(r["impl"], r["n"]) for r in rows} == {("numexpr", 10), ("numexpr", 20)}
    assert all(r["fastkern_speedup"] == 4.0 for r in rows)
    assert not any(t == "matvec" for t, _, _ in calls)


@pytest.mark.slow
def test_bench_quick_lists_peers(tmp_path, monkeypatch):
    # The checkout's harness, also when the installed package is tested.
    monkeypatch.setattr(bench_command, "BENCHMARKS", BENCH_DIR)
    js = tmp_path / "b.json"
    proc = fastkern("bench", "--full", "--quick", "--threads", "1", "--json", js, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "peers:" in out and "untimed warm-up" in out
    status = _bench.peer_status()
    doc = json.loads(js.read_text())["peers"]
    ran = {r["impl"] for r in doc["results"]}
    for peer in _bench.PEERS:
        line = re.search(rf"^skipped {peer}: (.+)$", out, re.M)
        if peer in ran:
            assert line is None, out
            title = re.escape(_bench.TASK_TITLES[_bench.PEER_TASKS[peer][0]])
            for n in (60, 120):
                assert re.search(rf"^{title}\s+{n}\s+{peer}\s+\S+ \S+\s+[0-9.]+x\s+\S+ \S+$",
                                 out, re.M), out
        else:
            assert line is not None, out
            assert doc["skipped"][peer] == line.group(1)
            if status[peer] is not None:
                assert line.group(1) == status[peer]
    # A peer's Gram is compared with fastkern's row of the main table; its K @ V
    # with fastkern's K @ V, measured with the peers.
    main = json.loads(js.read_text())["results"]
    fastkern_time = {(r["task"], r["n"]): r["time_s"] for r in main + doc["results"]
                     if r["impl"] == "fastkern"}
    for r in doc["results"]:
        assert r["impl"] == "fastkern" or r["fastkern_speedup"] == pytest.approx(
            r["time_s"] / fastkern_time[r["task"], r["n"]]), r
    if "pykeops" in ran:
        assert {r["impl"] for r in doc["results"] if r["task"] == "matvec"} == {
            "pykeops", "fastkern"}
