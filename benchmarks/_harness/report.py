"""What ``fastkern bench`` prints and writes: tables, machine description, JSON, plot."""
import json
import math
import sys

from fastkern.cli._table import fmt_bytes, fmt_ratio, fmt_time, text_table

from _harness.measuring import memory_method
from _harness.peers import MATVEC_COLUMNS, PEERS
from _harness.tasks import (IMPLS, N_COMPONENTS, N_FEATURES, RIDGE_ALPHA, TASK_TITLES,
                                   TASKS)


PEERS_NOTE = (
    "peers: RBF Gram (N x N, float64) by numba (@njit(parallel=True) loop: BLAS X X^T, then "
    "a prange pass for the exp) and numexpr (BLAS X X^T, then numexpr.evaluate of the exp); "
    f"pykeops cannot store a Gram, so it is timed on K @ V (V: N x {MATVEC_COLUMNS}, LazyTensor "
    "reduction on the CPU) against fastkern's matrix-free product, which also never stores K. "
    "Each peer uses --threads threads; numba's JIT and pykeops' C++ build run in an untimed "
    "warm-up call.")


def format_peers(rows, skipped):
    """The peers' table: time, and how many times faster fastkern is on the same task and N."""
    order = PEERS + ("fastkern",)
    cells = []
    for task in ("gram", "matvec"):
        sel = sorted((r for r in rows if r["task"] == task),
                     key=lambda r: (r["n"], order.index(r["impl"])))
        cells += [_row(r, None if r["impl"] == "fastkern" else r.get("fastkern_speedup"))
                  for r in sel] + ([None] if sel else [])
    lines = [_table("fastkern faster", cells)]
    if not rows:
        lines.append("(no peer installed)")
    lines += [f"skipped {name}: {skipped[name]}" for name in PEERS if name in skipped]
    return "\n".join(lines)


def _row(r, speedup):
    return (TASK_TITLES[r["task"]], r["n"], r["impl"], fmt_time(r["time_s"]),
            "" if speedup is None else fmt_ratio(speedup, ".3g"), fmt_bytes(r["peak_bytes"]))


def _table(speedup_title, cells):
    return text_table(("task", "N", "implementation", "time", speedup_title, "peak mem"),
                      cells, align="<><>>>")


def machine_info(n_threads=None):
    """config_info() plus the thread counts the measurements use and the memory method."""
    from fastkern import config_info

    info = config_info()
    info["n_threads"] = n_threads if n_threads is not None else info["threads"]
    # measure() holds BLAS to n_threads when it is given (see blas_threads).
    info["blas_threads"] = n_threads
    info["memory_method"] = memory_method()
    return info


def describe_machine(info):
    limit = info.get("blas_threads")
    blas = "; ".join(
        f"{b['internal_api']} {b['version']} "
        f"({b['num_threads'] if limit is None else limit} threads)"
        for b in info["blas"]) or "not detected"
    omp = "OpenMP on" if info["openmp"] else "OpenMP off"
    return (f"machine: {info['cores']} cores, {omp}, fastkern threads: {info['n_threads']}, "
            f"BLAS: {blas}\n"
            f"fastkern {info['fastkern']}, python {info['python']}, numpy {info['numpy']}, "
            f"scipy {info['scipy']}")


_TIME_NOTE = ("; time: fastest of the calls after that first one, each allocating its "
              "output")
MEMORY_NOTE = {
    "rss": ("peak memory: increase of peak RSS during the first call, fresh process per "
            "measurement" + _TIME_NOTE),
    "tracemalloc": ("peak memory: tracemalloc peak during the first call (Python/NumPy "
                    "allocations only; BLAS-internal buffers not seen), fresh process per "
                    "measurement" + _TIME_NOTE),
}


def format_table(results):
    """A plain-text table: one block per task, one row per (size, implementation)."""
    cells = []
    for task in TASKS:
        rows = sorted((r for r in results if r["task"] == task),
                      key=lambda r: (r["n"], IMPLS.index(r["impl"])))
        cells += [_row(r, r.get("speedup_vs_sklearn")) for r in rows] + ([None] if rows else [])
    return _table("vs sklearn", cells)


def write_json(path, results, info, sizes, peers=None):
    """peers: (rows, skipped) of run_peers, stored under "peers"."""
    doc = {"machine": info, "sizes": list(sizes), "n_features": N_FEATURES,
           "n_components": N_COMPONENTS, "ridge_alpha": RIDGE_ALPHA, "results": results}
    if peers is not None:
        doc["peers"] = {"results": peers[0], "skipped": peers[1],
                        "matvec_columns": MATVEC_COLUMNS}
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)


def plot_results(results, path, info=None, format=None):
    """Time against N on log-log axes, one panel per task, one line per implementation.

    results may include run_peers' rows: the Gram peers join the Gram panel.

    format: the image format when it is not path's extension.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = [t for t in TASKS if any(r["task"] == t for r in results)]
    cols = min(2, len(tasks))
    rows = math.ceil(len(tasks) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.5 * cols, 4.2 * rows), squeeze=False)
    markers = {"naive": "x", "numpy": "s", "sklearn": "o", "fastkern": "D",
               "numba": "^", "numexpr": "v", "pykeops": "P"}
    for ax, task in zip(axes.flat, tasks):
        for impl in IMPLS + PEERS:
            pts = sorted((r["n"], r["time_s"]) for r in results
                         if r["task"] == task and r["impl"] == impl)
            if pts:
                ns, ts = zip(*pts)
                ax.plot(ns, ts, marker=markers[impl], label=impl)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(TASK_TITLES[task])
        ax.set_xlabel("N (samples)")
        ax.set_ylabel("time (s)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    for ax in list(axes.flat)[len(tasks):]:
        ax.set_visible(False)
    if info is not None:
        fig.suptitle(f"fastkern bench: d={N_FEATURES}, {info['cores']} cores, "
                     f"{info['n_threads']} threads")
    fig.tight_layout()
    fig.savefig(path, dpi=110, format=format)
    plt.close(fig)


def progress_printer(stream=None):
    """A progress callback (i, total, task, impl, n) drawing fastkern's one progress bar."""
    from fastkern._progress import ProgressBar

    stream = sys.stderr if stream is None else stream
    tty = hasattr(stream, "isatty") and stream.isatty()
    bar = ProgressBar(stream, tty, prefix="fastkern bench")

    def report(i, total, task, impl, n):
        bar.step(i, total, f"[{i + 1:>3}/{total}] {TASK_TITLES[task]} / {impl} at N={n}")
        if i + 1 == total:
            bar.close()

    return report
