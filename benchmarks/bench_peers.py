"""fastkern against the Gram computations a user would otherwise pick, at
N=8000 d=16 (issue 11): numba (a parallel jitted loop), numexpr (BLAS X X^T
then one expression), scikit-learn's rbf_kernel, and pykeops on the CPU.

pykeops never stores a Gram matrix (its LazyTensors are reduced on the fly),
so it is compared on its natural use, K @ V with V of N x 5, against
fastkern's matrix-free product (the operator of large-N KernelPCA), which
does not store K either.  The others are compared on the full float64 Gram.

``test_peer`` benchmarks the peer and records the ratio peer time /
fastkern time measured side by side (each call in a fresh process, the two
alternating round by round, fastest of each, both held to the same thread
count);
``test_check_<peer>`` asserts it (>= 2x) only under ``--benchmark-only`` at
full size.  A peer that is not installed is skipped.  Compilation (numba's
JIT, pykeops' C++ build) happens in an untimed warm-up call.
"""
import numpy as np
import pytest

import _harness  # benchmarks/_harness/, on sys.path by conftest.py

N = _harness.scaled(8000)
D = 16
GAMMA = 1.0 / D
THREADS = 2
QUICK = _harness.bench_scale() < 0.1
ROUNDS = 1 if QUICK else 3
TARGET = 2.0
PEERS = ["numba", "numexpr", "sklearn", "pykeops"]


def _task(peer):
    return "matvec" if peer == "pykeops" else "gram"


def _pair(peer):
    """(peer callable, fastkern callable) on the same data and task."""
    if peer != "sklearn":
        pytest.importorskip(peer)
    task = _task(peer)
    theirs = _harness.build(task, peer, N, d=D, n_threads=THREADS)
    ours = _harness.build(task, "fastkern", N, d=D, n_threads=THREADS)
    # Imports, thread pools, JIT and C++ builds, out of the timing.
    _harness.build(task, peer, 50, d=D, n_threads=THREADS)()
    _harness.build(task, "fastkern", 50, d=D, n_threads=THREADS)()
    return theirs, ours


def _ratio(peer):
    # Each side in a fresh process (_harness.measure), alternating round by
    # round so that load from other processes hits both alike; in each, the
    # first full-size call is untimed (see measure_here): on this VM it
    # spends 0.66-2.05 s faulting in a fresh 512 MB output whenever the
    # freed pages have gone back to the host, whatever ran before it.  That,
    # not numba's threads (numba's "omp" layer shares fastkern's libgomp, and
    # fastkern's Gram right after numba's ran at its usual speed), made the
    # ratio swing from 0.36x to 3.4x.
    if peer != "sklearn":
        pytest.importorskip(peer)
    task = _task(peer)
    best = {peer: float("inf"), "fastkern": float("inf")}
    for _ in range(ROUNDS):
        for impl in best:
            r = _harness.measure(task, impl, N, d=D, n_threads=THREADS, max_repeat=2)
            best[impl] = min(best[impl], r["time_s"])
    return best[peer] / best["fastkern"]


def _group(peer):
    what = f"K @ V (V: N x {_harness.MATVEC_COLUMNS})" if peer == "pykeops" else "RBF Gram"
    return f"target: {what} N={N} d={D} {THREADS} threads, fastkern vs {peer}"


@pytest.mark.parametrize("peer", PEERS)
def test_peer(benchmark, run, ratios, peer):
    benchmark.group = _group(peer)
    theirs, ours = _pair(peer)
    r = ratios.get(peer, lambda: _ratio(peer))
    benchmark.extra_info.update(target_name=f"fastkern speedup vs {peer}", ratio=r,
                                target=f">= {TARGET}")
    with _harness.blas_threads(THREADS):
        out = run(theirs)
        ref = ours()
    np.testing.assert_allclose(out, ref, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("peer", PEERS)
def test_check_peer(benchmark, run, ratios, benchmark_only, peer):
    benchmark.group = _group(peer)
    _, ours = _pair(peer)
    r = ratios.get(peer, lambda: _ratio(peer))
    benchmark.extra_info.update(target_name="fastkern (reference)", ratio=r,
                                target=f">= {TARGET}")
    with _harness.blas_threads(THREADS):
        run(ours)
    if not benchmark_only:
        pytest.skip("target ratios are asserted only under --benchmark-only")
    if _harness.bench_scale() != 1:
        pytest.skip("target ratios are asserted only at the target's size (scale 1)")
    assert r >= TARGET, f"fastkern vs {peer}: measured {r:.2f}x, target >= {TARGET}x"
