"""Helpers of the benchmarks in this folder (not installed with fastkern).

The bench_*.py files import them as ``_harness`` (conftest.py puts this
folder on sys.path).  What they share with ``fastkern bench`` (the task
builders, measure() in a fresh process, side_by_side, the peak-memory
counters) stays in fastkern._bench and is imported from there.
"""
import math
import os
import time

from fastkern._bench.measuring import memory_method, rss_peak, tracemalloc_peak

__all__ = ["QUICK_SCALE", "bench_scale", "measure_once", "scaled"]

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
