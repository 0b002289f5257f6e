"""The pytest-benchmark suite still runs: every benchmark body once, at tiny sizes."""
import os
import pathlib
import re
import subprocess
import sys

import pytest

BENCH_DIR = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.mark.skipif(not (BENCH_DIR / "conftest.py").exists(),
                    reason="benchmarks/ is not next to tests/ (not a source checkout)")
def test_benchmarks_run_quick(tmp_path):
    pytest.importorskip("pytest_benchmark")
    env = dict(os.environ, FASTKERN_BENCH_QUICK="1")
    env.pop("FASTKERN_BENCH_SCALE", None)
    # Run from an empty directory so that the installed fastkern is imported,
    # not the source tree.
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", str(BENCH_DIR), "--benchmark-disable", "-q",
         "-p", "no:cacheprovider"],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    tail = proc.stdout.strip().splitlines()[-1]
    assert "failed" not in tail and "error" not in tail, tail
    # At least the task grid ran: 4 tasks x (3 implementations x 3 sizes + the
    # naive loop at the smallest size).
    passed = re.search(r"(\d+) passed", tail)
    assert passed and int(passed.group(1)) >= 40, tail
