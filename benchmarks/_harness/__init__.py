"""The benchmark harness (not installed with fastkern).

The bench_*.py files import it as ``_harness`` (conftest.py puts this
folder on sys.path); ``fastkern bench --full`` and ``--methods`` run it from a
source checkout.  Layers, each importing only those above it:

- peers: the Gram computations a user would otherwise pick (numba,
  numexpr, pykeops), all optional;
- tasks: the four tasks, their naive/NumPy baselines, and :func:`build`,
  which makes the callable for any (task, implementation, size);
- measuring: time and peak memory of one call in a fresh process;
- suite: what the full comparison measures, in order;
- report: tables, JSON and plot;
- methods: kernlab-style methods against their Python peers;
- command: the ``fastkern bench --full`` / ``--methods`` runs;

and here the benchmarks' own helpers (size scaling, one-call measurements).
"""
import math
import os
import time

from _harness.measuring import (MeasurementError, blas_threads, measure, measure_here,
                                memory_method, rss_peak, side_by_side, tracemalloc_peak)
from _harness.peers import MATVEC_COLUMNS, PEER_TASKS, PEERS, peer_status
from _harness.report import (MEMORY_NOTE, PEERS_NOTE, describe_machine, format_peers,
                             format_table, machine_info, plot_results, progress_printer,
                             write_json)
from _harness.suite import plan, run_peers, run_suite
from _harness.tasks import (IMPLS, N_COMPONENTS, N_FEATURES, RIDGE_ALPHA, TASK_TITLES, TASKS,
                            build, make_data)

__all__ = [
    "IMPLS", "MATVEC_COLUMNS", "MEMORY_NOTE", "MeasurementError", "N_COMPONENTS", "N_FEATURES",
    "PEERS", "PEERS_NOTE", "PEER_TASKS", "QUICK_SCALE", "RIDGE_ALPHA", "TASKS", "TASK_TITLES",
    "bench_scale", "blas_threads", "build", "describe_machine", "format_peers", "format_table",
    "machine_info", "make_data", "measure", "measure_here", "measure_once", "memory_method",
    "peer_status", "plan", "plot_results", "progress_printer", "run_peers", "run_suite",
    "scaled", "side_by_side", "tracemalloc_peak", "write_json",
]

QUICK_SCALE = 0.01


def bench_scale():
    """Size multiplier for benchmarks/: FASTKERN_BENCH_QUICK=1 means 0.01, else
    FASTKERN_BENCH_SCALE (default 1, the sizes of the performance targets)."""
    if os.environ.get("FASTKERN_BENCH_QUICK", "").strip().lower() in ("1", "true", "yes", "on"):
        return QUICK_SCALE
    text = os.environ.get("FASTKERN_BENCH_SCALE", "1")
    try:
        scale = float(text)
    except ValueError:
        raise ValueError(f"FASTKERN_BENCH_SCALE must be a positive number, got {text!r}") from None
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"FASTKERN_BENCH_SCALE must be a positive number, got {text!r}")
    return scale


def scaled(n, minimum=10):
    """n times the size scale (bench_scale), at least `minimum`."""
    return max(minimum, int(round(n * bench_scale())))


def measure_once(fn):
    """(seconds, peak bytes) of one call: peak RSS where the kernel resets it, else tracemalloc."""
    if memory_method() == "rss":
        return rss_peak(fn)
    t0 = time.perf_counter()
    _, peak = tracemalloc_peak(fn)
    return time.perf_counter() - t0, peak
