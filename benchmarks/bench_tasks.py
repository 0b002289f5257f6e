"""The `fastkern bench` tasks as grouped pytest benchmarks (group = task and size).

RBF Gram (d=16), centering of that Gram, KernelPCA (5 components) and
KernelRidge, each as naive Python loop (smallest size only), vectorised NumPy,
scikit-learn and fastkern.  The peak memory of one call, measured in a fresh
process (see _harness.measuring), is stored in extra_info.
"""
import pytest

import _harness  # benchmarks/_harness/, on sys.path by conftest.py

SIZES = sorted({_harness.scaled(n) for n in (1000, 4000, 8000)})
CASES = [pytest.param(task, impl, n, id=f"{task}-{impl}-N{n}")
         for task, impl, n in _harness.plan(SIZES)]


@pytest.mark.parametrize("task, impl, n", CASES)
def test_task(benchmark, run, task, impl, n):
    benchmark.group = f"{_harness.TASK_TITLES[task]} N={n}"
    mem = _harness.measure(task, impl, n, min_time=0.0, max_repeat=1)
    benchmark.extra_info.update(
        peak_mem_bytes=mem["peak_bytes"], memory_method=mem["memory_method"],
        n=n, d=_harness.N_FEATURES, impl=impl,
    )
    run(_harness.build(task, impl, n))
