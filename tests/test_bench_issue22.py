"""Smoke test of the stand-alone benchmark scripts of issue 22: each runs with
--quick in a subprocess and saves a JSON document that
docs/benchmarks/make_plots.py can read.  No timing is asserted."""
import contextlib
import importlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import fastkern

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
# The folder holding the fastkern these tests import: the installed package
# (in CI, whose checkout has no compiled modules), or the checkout built in place.
FASTKERN_ROOT = str(Path(fastkern.__file__).resolve().parent.parent)

COMMON = {"benchmark", "format", "quick", "command", "created", "host", "machine", "settings",
          "results", "notes"}
MACHINE = {"cores", "n_threads", "blas", "numpy", "scipy", "sklearn", "fastkern", "python"}
# script -> (benchmark name, keys of every result row)
SCRIPTS = {
    "bench_sizes.py": ("sizes", {"task", "n", "d", "spectrum", "gamma", "ratio", "rounds"}),
    "bench_busy.py": ("busy", {"task", "n", "condition", "competitors", "default_s",
                               "one_thread_s", "peer_s", "default_over_one",
                               "peer_over_default", "paired_default_over_one",
                               "paired_interval", "median_default_over_one",
                               "others_running_read"}),
    "bench_gridsearch.py": ("gridsearch", {"part", "task", "n", "ratio"}),
    "bench_threads.py": ("threads", {"task", "n", "threads", "time_s", "speedup"}),
    "bench_time_vs_n.py": ("time_vs_n", {"task", "impl", "solver", "n", "time_s"}),
}


def _import_from(folder, name):
    """The module `name` of `folder` (not a package), sys.path left as it was."""
    sys.path.insert(0, str(folder))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(folder))


def run_quick(script, path, *extra):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [FASTKERN_ROOT, env.get("PYTHONPATH")]))
    out = subprocess.run([sys.executable, str(BENCH / script), "--quick", "--json", str(path),
                          *extra], cwd=path.parent, env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


@contextlib.contextmanager
def _locked(path):
    """An exclusive lock on `path` across processes (none where fcntl is missing)."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture
def saved(tmp_path_factory):
    """saved(script) -> (path of its --quick JSON, its stdout).

    Each script runs once per test session, its result kept in files: a
    module-scoped fixture is torn down whenever a pytest-xdist worker's
    queue runs dry, and the scripts then ran again for the next reader.
    The workers share the parent of their base temporary folders, and the
    first to need a script runs it there while the others wait for it.
    """
    base = tmp_path_factory.getbasetemp()
    shared = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "bench_issue22"
    shared.mkdir(exist_ok=True)

    def get(script):
        path = shared / f"{SCRIPTS[script][0]}.json"
        out = path.with_suffix(".stdout")
        with _locked(path.with_suffix(".lock")):
            if not out.exists():
                out.write_text(run_quick(script, path))
        return path, out.read_text()

    return get


def test_every_standalone_script_is_run_here():
    """test_benchmarks_run leaves the quick runs of the scripts whose pytest
    test is _standalone.pytest_run to this module: each must be in SCRIPTS."""
    from harness_checkout import STANDALONE_SCRIPTS

    assert set(STANDALONE_SCRIPTS) == set(SCRIPTS)


@pytest.mark.parametrize("script", sorted(SCRIPTS), ids=sorted(SCRIPTS))
@pytest.mark.slow
def test_quick_run_saves_its_results(script, saved):
    name, row_keys = SCRIPTS[script]
    path, stdout = saved(script)
    assert f"saved {path}" in stdout
    doc = json.loads(path.read_text())
    assert COMMON <= set(doc), COMMON - set(doc)
    assert doc["benchmark"] == name and doc["quick"] is True
    assert MACHINE <= set(doc["machine"]), MACHINE - set(doc["machine"])
    assert set(doc["machine"]["steadiness"]) == {"start", "end"}
    assert "host steadiness at the start" in stdout and "host steadiness at the end" in stdout
    assert doc["host"]["cpu"]
    assert doc["results"]
    for row in doc["results"]:
        assert row_keys <= set(row), (row_keys - set(row), row)
        for key, value in row.items():
            if key.endswith("_s") and value is not None and not isinstance(value, dict):
                assert value > 0, (key, row)


@pytest.mark.slow
def test_sizes_rows_cover_each_task_and_the_auto_grid(saved):
    rows = json.loads(saved("bench_sizes.py")[0].read_text())["results"]
    assert {r["task"] for r in rows} == {"kpca", "ridge", "rbf", "kpca_auto"}
    assert {r["spectrum"] for r in rows} == {"steep", "flat"}
    for r in rows:
        if r["task"] == "kpca_auto":
            assert set(r["times_s"]) == {"auto", "dense", "thick_restart_lanczos", "arpack",
                                         "randomized", "block_krylov"}
            assert r["ratio"] == pytest.approx(r["auto_s"] / min(
                v for k, v in r["times_s"].items() if k != "auto"))
        else:
            assert r["ratio"] == pytest.approx(r["sklearn_s"] / r["fastkern_s"])
            low, high = r["paired_interval"]
            assert 0 < low <= r["paired_ratio"] <= high


@pytest.mark.slow
def test_threads_splits_each_kernel_pca_fit_by_stage(saved):
    rows = json.loads(saved("bench_threads.py")[0].read_text())["results"]
    kpca = [r for r in rows if r["task"] == "kpca"]
    assert kpca and all(r["error"] is None for r in kpca)
    for r in kpca:
        stages = r["stages_s"]
        assert list(stages)[:2] == ["validation", "kernel matrix"], stages
        solver = next(name for name in stages if name.startswith("eigensolver ("))
        assert all(v >= 0 for v in stages.values())
        # fastkern's own iterative solvers report each iteration; ARPACK (the
        # choice below 2000 rows on many BLAS threads) and LAPACK report none.
        reports = solver in ("eigensolver (block_krylov)", "eigensolver (thick_restart_lanczos)")
        assert (r["iterations"] >= 1) == reports, (solver, r["iterations"])
        # The mean time of an iteration after the first: within the solver's stage.
        if r["iterations"] >= 2:
            assert 0 < r["iteration_s"] <= stages[solver]
        else:
            assert r["iteration_s"] is None
    assert all("stages_s" not in r for r in rows if r["task"] != "kpca")


def test_threads_fit_bound_is_amdahls_law_over_the_products():
    bench = _import_from(BENCH, "bench_threads")
    split = {"validation": 0.1, "kernel matrix": 2.0, "eigensolver (block_krylov)": 7.9}

    def rows(solver_stage=split):
        # A 10 s fit with 5 products of 1 s: half of it; the product 8x faster on 16.
        return [{"task": "kpca", "n": 16000, "threads": 1, "time_s": 10.0, "error": None,
                 "stages_s": solver_stage, "iterations": 5},
                {"task": "kpca", "n": 16000, "threads": 16, "time_s": 1.5, "error": None,
                 "stages_s": solver_stage, "iterations": 5},
                {"task": "product", "n": 16000, "threads": 1, "time_s": 1.0, "error": None,
                 "read_gb_s": 1.0},
                {"task": "product", "n": 16000, "threads": 16, "time_s": 0.125, "error": None,
                 "read_gb_s": 8.0}]
    note = bench.fit_bound(rows())
    assert note is not None and "50%" in note and "8.0x" in note
    assert note.endswith(f"{10 / (5 / 8 + 5 / 16):.1f}x")  # 10.7x
    # Products longer than the fit (a wider first product, noise): all of it.
    long = rows()
    long[2]["time_s"] = 3.0
    long[3]["time_s"] = 3.0 / 8
    assert bench.fit_bound(long).endswith("at most 8.0x")
    # Not block_krylov's products, or no 1-thread row: no bound.
    assert bench.fit_bound(rows({"validation": 0.1, "eigensolver (arpack)": 9.9})) is None
    assert bench.fit_bound([r for r in rows() if r["threads"] != 1]) is None


def test_sizes_counts_fastkerns_failures_and_misses_not_a_peers_failure():
    bench = _import_from(BENCH, "bench_sizes")

    def row(ratio, errors=None, task="kpca"):
        return {"task": task, "n": 200, "d": 64, "spectrum": "flat", "ratio": ratio,
                "errors": errors, "fastest_solver": "dense"}

    # scikit-learn's dense eigh got no pair of a clustered top (its "auto"
    # raised): the cell compares against its arpack, which ran.
    peer = {"sklearn:auto": "ValueError: zero-size array"}
    assert bench.missed({"results": [row(2.3, peer)]}) == []
    assert len(bench.missed({"results": [row(1.9, peer)]})) == 1
    ours = bench.missed({"results": [row(None, {"fastkern": "LinAlgError: no"})]})
    assert len(ours) == 1 and "LinAlgError" in ours[0] and "sklearn" not in ours[0]
    assert len(bench.missed({"results": [row(1.3, {"dense": "MemoryError"},
                                             task="kpca_auto")]})) == 2
    assert bench.missed({"results": [row(1.1, task="kpca_auto")]}) == []


def test_busy_judges_the_fastest_and_the_paired_calls_not_the_medians():
    bench = _import_from(BENCH, "bench_busy")

    def row(fastest, paired, median=1.0, interval=(0.9, 1.1)):
        return {"task": "kpca", "n": 1000, "condition": "busy", "errors": {},
                "default_over_one": fastest, "paired_default_over_one": paired,
                "paired_interval": list(interval), "median_default_over_one": median,
                "peer_over_default": 3.0, "peer": "scikit-learn"}

    assert bench.missed({"results": [row(1.1, 1.15, median=1.5)]}) == []
    paired = bench.missed({"results": [row(1.1, 1.3, interval=(1.21, 1.4))]})
    assert len(paired) == 1 and "1.30x" in paired[0] and "1.21-1.40" in paired[0]
    assert len(bench.missed({"results": [row(1.25, 1.0)]})) == 1
    idle = dict(row(2.0, 2.0), condition="idle")
    assert bench.missed({"results": [idle]}) == []
    assert bench.readings_text({"2": 58, "3": 2}) == "2 (58), 3 (2)"
    assert bench.readings_text({}) == "-"


@pytest.mark.filterwarnings("ignore:incomplete_cholesky stopped at max_rank")  # its tol=0
def test_busy_runs_every_task_of_its_plan_quickly_and_a_chosen_few():
    bench = _import_from(BENCH, "bench_busy")
    assert {t for t, _ in bench.FULL} == {t for t, _ in bench.QUICK}
    for task, n in bench.QUICK:
        fns, _, _ = bench.contestants(task, n, 10)
        for name in ("default", "one"):
            fns[name]()
    with pytest.raises(SystemExit):
        bench.main(["--quick", "--tasks", "kpca,nope"])


def test_busy_counts_every_reading_of_the_load_and_restores_the_reader():
    bench = _import_from(BENCH, "bench_busy")
    from fastkern import _threads

    reader = _threads.others_running
    with bench.recording_load() as counts:
        free = [_threads.cores_free() for _ in range(3)]
    assert _threads.others_running is reader
    assert sum(counts.values()) == 3
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    # Each reading's count gives the free cores cores_free returned, at least 1.
    assert sorted(free) == sorted(max(1, cores - k) for k, v in counts.items() for _ in range(v))


@pytest.mark.slow
def test_busy_leaves_no_competitor_running(tmp_path):
    import psutil

    before = {p.pid for p in psutil.Process().children(recursive=True)}
    path = tmp_path / "busy.json"
    run_quick("bench_busy.py", path, "--conditions", "busy", "--competitors", "1")
    doc = json.loads(path.read_text())
    assert {r["condition"] for r in doc["results"]} == {"busy"}
    assert all(r["competitors"] == 1 for r in doc["results"])
    after = {p.pid for p in psutil.Process().children(recursive=True)}
    assert after <= before


def test_bad_arguments_are_refused(tmp_path):
    env = dict(os.environ, PYTHONPATH=FASTKERN_ROOT)
    for script, bad in (("bench_sizes.py", "--sizes=2,x"), ("bench_threads.py", "--threads=0"),
                        ("bench_busy.py", "--conditions=noisy")):
        out = subprocess.run([sys.executable, str(BENCH / script), "--quick", bad, "--json",
                              str(tmp_path / "x.json")], env=env, capture_output=True,
                             text=True, timeout=120)
        assert out.returncode == 2 and "error" in out.stderr, (script, out.stderr)
        assert not (tmp_path / "x.json").exists()


@pytest.mark.slow
def test_saved_results_draw_on_the_benchmarks_page(saved, tmp_path):
    """make_plots reads every script's saved document beside the suite's."""
    pytest.importorskip("matplotlib")
    data = tmp_path / "data"
    data.mkdir()
    for script in SCRIPTS:
        path, _ = saved(script)
        (data / path.name).write_text(path.read_text())
    suite = ROOT / "docs" / "benchmarks" / "data" / "suite-xeon-2core.json"
    if suite.exists():
        (data / suite.name).write_text(suite.read_text())
    make_plots = _import_from(ROOT / "docs" / "benchmarks", "make_plots")
    rst = make_plots.build(data, tmp_path / "out").read_text()
    for heading in ("Time against N", "Thread scaling", "Against scikit-learn at every size",
                    "A busy machine", "Parallel grid searches"):
        assert heading in rst, heading
    assert "smoke run" in rst  # --quick documents are labelled as such
    assert "stages of one more fit" in rst and "kernel matrix" in rst  # bench_threads' split
    names = {p.name for p in (tmp_path / "out").glob("*.png")}
    for stem in ("time_vs_n", "threads", "sizes", "busy", "gridsearch"):
        assert any(n.startswith(stem) for n in names), (stem, names)


@pytest.mark.slow
def test_a_large_n_thread_run_keeps_its_section_beside_a_newer_short_run(saved, tmp_path):
    """The --large-n run of bench_threads.py is made apart from the short one:
    a newer short run must not hide it, and its section shows the matrix-free
    rows alone (its Gram and KernelPCA rows are the short run's section's)."""
    pytest.importorskip("matplotlib")
    path, _ = saved("bench_threads.py")
    short = json.loads(path.read_text())
    long = json.loads(path.read_text())
    long["settings"]["large_n"] = True
    long["created"] = "2000-01-01T00:00:00Z"  # older than the short run
    data = tmp_path / "data"
    data.mkdir()
    (data / "threads.json").write_text(json.dumps(short))
    (data / "threads-large-n.json").write_text(json.dumps(long))
    make_plots = _import_from(ROOT / "docs" / "benchmarks", "make_plots")
    rst = make_plots.build(data, tmp_path / "out").read_text()
    heading = "Thread scaling of the matrix-free solver"
    assert heading in rst and "threads-large-n.json" in rst
    large = rst.split(heading, 1)[1].split("Against scikit-learn at every size", 1)[0]
    short_part = rst.split("Thread scaling\n", 1)[1].split(heading, 1)[0]
    assert "matrix-free KernelPCA" in large
    assert "RBF Gram" not in large and "RBF Gram" in short_part
    names = {p.name for p in (tmp_path / "out").glob("*.png")}
    assert any(n.startswith("threads_large_n_") for n in names), names


def test_a_host_measured_at_several_commits_names_each_files_commit():
    make_plots = _import_from(ROOT / "docs" / "benchmarks", "make_plots")
    runs = [{"name": name, "host": {"cpu": "X", "commit": commit}, "machine": {"cores": 2}}
            for name, commit in (("sizes-x", "aaa1111"), ("busy-x", "aaa1111"),
                                 ("kernlab-x", "bbb2222"))]
    text = make_plots.describe(runs)
    assert ("commits ``aaa1111`` (``sizes-x.json``, ``busy-x.json``); ``bbb2222`` "
            "(``kernlab-x.json``)") in text
    assert "Measured on fastkern's commit ``aaa1111``." in make_plots.describe(runs[:2])


def test_interleaved_records_a_failing_contestant_and_goes_on():
    _standalone = _import_from(BENCH, "_standalone")
    calls = []

    def broken():
        calls.append("broken")
        raise ValueError("no eigenvalues")

    t = _standalone.interleaved({"ok": lambda: calls.append("ok"), "broken": broken},
                                budget=1.0, min_rounds=3, max_rounds=3)
    assert calls.count("broken") == 1 and calls.count("ok") == 3
    assert t["broken"]["time_s"] is None
    assert t["broken"]["error"] == "ValueError: no eigenvalues"
    assert t["ok"]["time_s"] > 0 and t["ok"]["rounds"] == 3 and "error" not in t["ok"]
    assert _standalone.ratio(None, 1.0) is None and _standalone.ratio(3.0, 2.0) == 1.5
    assert _standalone.errors_of(t) == {"broken": "ValueError: no eigenvalues"}


def test_paired_ratio_is_the_geometric_mean_of_each_rounds_ratio():
    _standalone = _import_from(BENCH, "_standalone")
    # The host's speed changes 10x between rounds: in the first three a takes
    # twice b's time and the pairs give exactly 2x; the last round (20x)
    # moves the mean to 2 * 10^(1/4), while the medians' ratio jumps to 11x.
    a, b = [0.002, 0.02, 0.2, 0.2], [0.001, 0.01, 0.1, 0.01]
    mean, low, high = _standalone.paired_ratio(a, b)
    logs = np.log(np.array(a) / np.array(b))
    half = 1.96 * logs.std(ddof=1) / np.sqrt(4)
    assert mean == pytest.approx(np.exp(logs.mean()), rel=1e-12)
    assert (low, high) == pytest.approx((np.exp(logs.mean() - half), np.exp(logs.mean() + half)),
                                        rel=1e-12)
    assert mean == pytest.approx(2 * 10 ** 0.25, rel=1e-12) and low < mean < high
    same = _standalone.paired_ratio(a[:3], b[:3])
    assert same == pytest.approx((2.0, 2.0, 2.0), rel=1e-12)
    # Only complete pairs count (a contestant that failed stops early).
    assert _standalone.paired_ratio(a[:3] + [5.0], b[:3]) == same
    assert _standalone.paired_ratio([1.0], [1.0]) is None
    assert _standalone.paired_ratio([], []) is None


def test_interleaved_gives_every_calls_time_in_round_order():
    _standalone = _import_from(BENCH, "_standalone")
    calls = []

    def sleeper(name, seconds):
        def fn():
            calls.append(name)
            time.sleep(seconds[len([c for c in calls if c == name]) - 1])
        return fn

    a, b = [0.004, 0.001, 0.008, 0.002], [0.002, 0.006, 0.001, 0.004]
    t = _standalone.interleaved({"a": sleeper("a", a), "b": sleeper("b", b)},
                                budget=10.0, min_rounds=4, max_rounds=4)
    for name, slept in (("a", a), ("b", b)):
        times = t[name]["times_s"]
        assert len(times) == t[name]["rounds"] == 4 and min(times) == t[name]["time_s"]
        # Sleeps overrun, never underrun: each time is its own round's sleep.
        assert all(s <= x < s + 0.05 for x, s in zip(times, slept)), (times, slept)


def test_interleaved_rounds_follow_the_fastest_calls_not_a_stalled_first_one():
    # The host pauses this VM's processes for tenths of a second, at worst
    # several times a second: a stalled first call must not cut the cell to
    # min_rounds (the saved auto grid had 2 rounds at 2000 rows, its ratio
    # then 1.33x for the same solver).  The budget leaves 5 s to STALL_BUDGETS
    # for a real stall on top of the test's own.
    _standalone = _import_from(BENCH, "_standalone")
    calls = []

    def stalls_once():
        calls.append("a")
        if len(calls) == 1:
            time.sleep(0.3)

    t = _standalone.interleaved({"a": stalls_once, "b": lambda: None},
                                budget=1.0, min_rounds=2, max_rounds=9)
    assert t["a"]["rounds"] == t["b"]["rounds"] == 9
    assert t["a"]["time_s"] < 0.1


def test_interleaved_ends_a_cell_whose_calls_keep_stalling():
    # ... and one fast call among stalled ones does not run max_rounds of
    # them: the cell ends at STALL_BUDGETS times its budget (after min_rounds).
    _standalone = _import_from(BENCH, "_standalone")
    calls = []

    def fast_once():
        calls.append(1)
        time.sleep(0.001 if len(calls) == 1 else 0.05)

    t = _standalone.interleaved({"a": fast_once}, budget=0.02, min_rounds=2, max_rounds=20)
    stop = _standalone.STALL_BUDGETS * 0.02
    # Rounds start while under `stop`: at most one 0.05 s round beyond it.
    assert 2 <= t["a"]["rounds"] <= 2 + int(stop / 0.05) + 1 < 20


def test_interleaved_retires_the_contestants_too_slow_to_be_fastest():
    # The auto grid asks which solver is fastest: one 10x behind after the
    # first rounds leaves the rounds to the close ones, unless it is kept
    # ("auto" itself, whose time is the question).
    _standalone = _import_from(BENCH, "_standalone")
    calls = []

    def call(name, seconds):
        def fn():
            calls.append(name)
            time.sleep(seconds)
        return fn

    fns = {"auto": call("auto", 0.02), "close": call("close", 0.003),
           "slow": call("slow", 0.04), "fast": call("fast", 0.002)}
    t = _standalone.interleaved(fns, budget=0.5, min_rounds=2, max_rounds=12,
                                retire=2.0, keep=("auto",))
    assert t["slow"]["rounds"] == 2 and t["slow"]["time_s"] >= 0.04
    assert t["fast"]["rounds"] == t["close"]["rounds"] == t["auto"]["rounds"] > 2
    # Retired after round 2: every later round has the other three only.
    assert "slow" not in calls[8:] and calls[:8].count("slow") == 2
    # A cell that needs many rounds of the kept pair (min_rounds: the busy
    # cells' pairs) still retires the slow one after RETIRE_AFTER rounds.
    t = _standalone.interleaved(fns, budget=0.01, min_rounds=6, max_rounds=6,
                                retire=2.0, keep=("auto",))
    assert t["slow"]["rounds"] == _standalone.RETIRE_AFTER == 2
    assert t["fast"]["rounds"] == t["close"]["rounds"] == t["auto"]["rounds"] == 6
    # Without retire every contestant gets every round.
    calls.clear()
    t = _standalone.interleaved(fns, budget=0.5, min_rounds=2, max_rounds=12)
    assert len({v["rounds"] for v in t.values()}) == 1


def test_interleaved_varies_who_runs_before_whom():
    # A grid of solvers: a contestant that always ran right after the same
    # other one (reverse-order rounds put "auto" after "dense" every time)
    # would carry that one's leftovers into its fastest time.
    _standalone = _import_from(BENCH, "_standalone")
    calls = []
    names = ["auto", "dense", "arpack", "lanczos", "block"]
    t = _standalone.interleaved({n: (lambda n=n: calls.append(n)) for n in names},
                                budget=1.0, min_rounds=30, max_rounds=30)
    assert all(t[n]["rounds"] == 30 for n in names)
    rounds = [calls[i:i + len(names)] for i in range(0, len(calls), len(names))]
    assert rounds[0] == names and all(sorted(r) == sorted(names) for r in rounds)
    follows = {(a, b) for r in rounds for a, b in zip(r, r[1:])}
    assert follows == {(a, b) for a in names for b in names if a != b}
    # Two contestants keep the A B, B A alternation.
    calls.clear()
    _standalone.interleaved({n: (lambda n=n: calls.append(n)) for n in names[:2]},
                            budget=1.0, min_rounds=4, max_rounds=4)
    assert calls == ["auto", "dense", "dense", "auto", "auto", "dense", "dense", "auto"]


def _clock(unit_times, gap=1e-4):
    """A perf_counter stand-in: each unit of work takes the next of unit_times."""
    now = [0.0]
    durations = iter(unit_times)
    reads = [0]

    def clock():
        # steadiness reads the clock once at the start, then twice per unit.
        reads[0] += 1
        if reads[0] > 1 and reads[0] % 2 == 1:
            now[0] += next(durations)
        else:
            now[0] += gap
        return now[0]
    return clock


def test_steadiness_counts_the_pauses_of_a_stalling_host():
    _standalone = _import_from(BENCH, "_standalone")
    steady = [0.003] * 400
    gauge = _standalone.steadiness(seconds=1.0, clock=_clock(steady))
    assert gauge["pauses"] == 0 and gauge["unit_ms"] == gauge["longest_ms"] == 3.0
    assert _standalone.is_steady(gauge) and gauge["seconds"] >= 1.0
    stalled = [0.003] * 400
    stalled[5], stalled[100], stalled[200] = 0.3, 0.052, 0.06  # 0.052: under 50 ms over 3 ms
    gauge = _standalone.steadiness(seconds=1.0, clock=_clock(stalled))
    assert gauge["pauses"] == 2 and gauge["longest_ms"] == 300.0
    assert not _standalone.is_steady(gauge)
    assert "2 pauses over 50 ms" in _standalone.steadiness_text(gauge)
    # No pause, but a machine shared with other processes: most units slow.
    busy = [0.003, 0.003] + [0.006] * 400
    assert not _standalone.is_steady(_standalone.steadiness(seconds=1.0, clock=_clock(busy)))
    # The real clock: at least 10 units, each timed.
    gauge = _standalone.steadiness(seconds=0.0)
    assert gauge["unit_ms"] > 0 and gauge["longest_ms"] >= gauge["p90_ms"] >= gauge["unit_ms"]


def test_a_run_saves_the_hosts_steadiness_at_its_start_and_end(tmp_path, monkeypatch):
    import argparse

    _standalone = _import_from(BENCH, "_standalone")
    monkeypatch.setattr(_standalone, "STEADY_S", 0.0)
    monkeypatch.setattr(_standalone, "warm_up", lambda: None)

    def run(name):
        info = _standalone.begin()
        args = argparse.Namespace(quick=True, json=tmp_path / f"{name}.json")
        _standalone.save("sizes", args, [], {}, [{"task": "rbf", "n": 10, "ratio": 2.0}],
                         info=info)
        return json.loads((tmp_path / f"{name}.json").read_text())

    doc = run("measured")
    gauge = doc["machine"]["steadiness"]
    assert set(gauge) == {"start", "end"}
    assert all(g["unit_ms"] > 0 and g["pause_ms"] == 50 for g in gauge.values())
    pytest.importorskip("matplotlib")
    make_plots = _import_from(ROOT / "docs" / "benchmarks", "make_plots")
    note = "\n".join(make_plots._notes(doc))
    assert note.startswith("* Host steadiness") and "at the start" in note and "at the end" in note
    steady = {"unit_ms": 3.0, "p90_ms": 3.1, "longest_ms": 3.2, "pauses": 0, "pause_ms": 50.0,
              "seconds": 1.0}
    gauges = iter([steady, dict(steady, pauses=3, longest_ms=300.0)])
    monkeypatch.setattr(_standalone, "steadiness", lambda: next(gauges))
    assert "The host stalled the process" in "\n".join(make_plots._notes(run("stalled")))
    monkeypatch.setattr(_standalone, "steadiness", lambda: dict(steady))
    assert "stalled" not in "\n".join(make_plots._notes(run("steady")))
