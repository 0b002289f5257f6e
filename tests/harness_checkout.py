"""The benchmark harness (benchmarks/_harness) beside tests/ in a source checkout.

Importing this module from a test module skips that module where there is
no such checkout (tests run against an installed package), and otherwise
makes ``import _harness`` work.  STANDALONE_SCRIPTS names the stand-alone
benchmark scripts: those whose one pytest test hands main() to
_standalone.pytest_run.
"""
import pathlib
import sys

import pytest

BENCH_DIR = pathlib.Path(__file__).resolve().parents[1] / "benchmarks"
if not (BENCH_DIR / "_harness" / "__init__.py").exists():
    pytest.skip("the benchmark harness is in benchmarks/, next to tests/ in a source checkout",
                allow_module_level=True)
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

STANDALONE_SCRIPTS = sorted(
    p.name for p in BENCH_DIR.glob("bench_*.py")
    if "S.pytest_run(" in p.read_text(encoding="utf-8"))
