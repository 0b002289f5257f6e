"""The harness of ``fastkern bench`` (not part of the public API).

Layers, each importing only those above it:

- peers: the Gram computations a user would otherwise pick (numba,
  numexpr, pykeops), all optional;
- tasks: the four tasks, their naive/NumPy baselines, and :func:`build`,
  which makes the callable for any (task, implementation, size);
- measuring: time and peak memory of one call in a fresh process;
- suite: what ``fastkern bench`` measures, in order;
- report: tables, JSON and plot;
- methods: ``fastkern bench --methods`` (kernlab-style methods against their
  Python peers).

The benchmarks' own helpers (size scaling, one-call measurements) are in
benchmarks/_harness.py; this package holds what the command needs.
"""
from fastkern._bench.measuring import (MeasurementError, blas_threads, measure, measure_here,
                                       memory_method, side_by_side, tracemalloc_peak)
from fastkern._bench.peers import MATVEC_COLUMNS, PEER_TASKS, PEERS, peer_status
from fastkern._bench.report import (MEMORY_NOTE, PEERS_NOTE, describe_machine, format_peers,
                                    format_table, machine_info, plot_results, progress_printer,
                                    write_json)
from fastkern._bench.suite import plan, run_peers, run_suite
from fastkern._bench.tasks import (IMPLS, N_COMPONENTS, N_FEATURES, RIDGE_ALPHA, TASK_TITLES,
                                   TASKS, build, make_data)

__all__ = [
    "IMPLS", "MATVEC_COLUMNS", "MEMORY_NOTE", "MeasurementError", "N_COMPONENTS", "N_FEATURES",
    "PEERS", "PEERS_NOTE", "PEER_TASKS", "RIDGE_ALPHA", "TASKS", "TASK_TITLES", "blas_threads",
    "build", "describe_machine", "format_peers", "format_table", "machine_info", "make_data",
    "measure", "measure_here", "memory_method", "peer_status", "plan", "plot_results",
    "progress_printer", "run_peers", "run_suite", "side_by_side", "tracemalloc_peak",
    "write_json",
]
