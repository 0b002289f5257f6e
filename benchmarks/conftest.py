"""pytest-benchmark suite for fastkern.

Run ``pytest benchmarks/ --benchmark-only`` for the full-size suite (the sizes
of the performance targets; minutes), or with ``FASTKERN_BENCH_QUICK=1`` (or
``FASTKERN_BENCH_SCALE=0.1`` etc.) for scaled-down sizes.  The files are
named ``bench_*.py`` and collected by the hook below, so a plain ``pytest``
run of tests/ never picks them up.
"""
import pathlib
import sys
import time

import pytest

# The bench_*.py files import their helpers as `_harness` (benchmarks/_harness/),
# whatever pytest's import mode and working directory.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _harness  # noqa: E402


def pytest_collect_file(file_path, parent):
    # Files named on the command line are collected by pytest itself.
    if (file_path.suffix == ".py" and file_path.name.startswith("bench_")
            and not parent.session.isinitpath(file_path)):
        return pytest.Module.from_parent(parent, path=file_path)
    return None


def pytest_report_header(config):
    return (f"fastkern benchmarks: size scale {_harness.bench_scale()} "
            f"(FASTKERN_BENCH_QUICK / FASTKERN_BENCH_SCALE); "
            f"memory method: {_harness.memory_method()}")


@pytest.fixture
def benchmark_only(request):
    """True when run with --benchmark-only: only then are ratio targets asserted."""
    return bool(request.config.getoption("benchmark_only", default=False))


# Total time to spend on the timed rounds of one benchmark.
TARGET_SECONDS = 3.0


def run_benchmark(benchmark, fn, *, max_rounds=20):
    """Benchmark fn with a number of rounds suited to its duration.

    One untimed warm-up call measures the duration; slow calls (the naive loop,
    sklearn's KernelPCA at N=8000) then get few rounds instead of
    pytest-benchmark's default minimum of five.
    """
    if benchmark.disabled:
        return benchmark(fn)
    t0 = time.perf_counter()
    fn()
    once = time.perf_counter() - t0
    rounds = int(max(1, min(max_rounds, TARGET_SECONDS // max(once, 1e-9))))
    return benchmark.pedantic(fn, rounds=rounds, iterations=1, warmup_rounds=0)


class RatioCache:
    """Ratios measured once per session, shared by a benchmark and its target check."""

    def __init__(self):
        self._values = {}

    def get(self, name, compute):
        if name not in self._values:
            self._values[name] = compute()
        return self._values[name]


@pytest.fixture(scope="session")
def ratios():
    return RatioCache()


@pytest.fixture
def run(benchmark):
    """run(fn): benchmark fn with rounds suited to its duration (see run_benchmark)."""
    return lambda fn, **kw: run_benchmark(benchmark, fn, **kw)
