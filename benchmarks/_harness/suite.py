"""The measurement plan of ``fastkern bench``: every (task, implementation, size), then the peers."""
from _harness.measuring import MeasurementError, measure
from _harness.peers import PEER_TASKS, PEERS, peer_status
from _harness.tasks import IMPLS, N_FEATURES, TASKS


def plan(sizes, tasks=TASKS, impls=IMPLS):
    """(task, impl, n) triples to run; the naive loop only at the smallest size."""
    smallest = min(sizes)
    return [(task, impl, n) for task in tasks for n in sizes for impl in impls
            if impl != "naive" or n == smallest]


def run_suite(sizes, *, tasks=TASKS, impls=IMPLS, d=N_FEATURES, n_threads=None,
              min_time=0.2, max_repeat=5, progress=None):
    """Measure every planned triple; progress(i, total, task, impl, n) before each."""
    jobs = plan(sizes, tasks, impls)
    results = []
    for i, (task, impl, n) in enumerate(jobs):
        if progress is not None:
            progress(i, len(jobs), task, impl, n)
        results.append(measure(task, impl, n, d=d, n_threads=n_threads,
                               min_time=min_time, max_repeat=max_repeat))
    add_speedups(results)
    return results


def add_speedups(results):
    """speedup_vs_sklearn = sklearn time / this time, for the same task and size."""
    ref = {(r["task"], r["n"]): r["time_s"] for r in results if r["impl"] == "sklearn"}
    for r in results:
        base = ref.get((r["task"], r["n"]))
        r["speedup_vs_sklearn"] = None if base is None else base / r["time_s"]
    return results


def plan_peers(sizes, status):
    """(task, impl, n) of the installed peers, with fastkern's K @ V next to pykeops'."""
    jobs = []
    for n in sizes:
        for peer in PEERS:
            if status.get(peer) is None:
                jobs += [(task, peer, n) for task in PEER_TASKS[peer]]
        if any(t == "matvec" and m == n for t, _, m in jobs):
            jobs.append(("matvec", "fastkern", n))
    return jobs


def run_peers(sizes, results, *, status=None, d=N_FEATURES, n_threads=None, min_time=0.2,
              max_repeat=5, progress=None):
    """Measure the installed peers; (rows, skipped).

    results: run_suite's rows, whose fastkern Gram times the peers' Gram
    times are compared with.  Each row gets fastkern_speedup = its time over
    fastkern's on the same task and size.  skipped maps a peer to the reason
    it did not run: not installed, or its first measurement failed (e.g.
    pykeops without a working C++ compiler).
    """
    status = peer_status() if status is None else dict(status)
    jobs = plan_peers(sizes, status)
    rows = []
    for i, (task, impl, n) in enumerate(jobs):
        if status.get(impl) is not None or (task == "matvec" and status.get("pykeops")):
            continue
        if progress is not None:
            progress(i, len(jobs), task, impl, n)
        try:
            rows.append(measure(task, impl, n, d=d, n_threads=n_threads, min_time=min_time,
                                max_repeat=max_repeat))
        except MeasurementError as exc:
            if impl not in PEERS:
                raise
            status[impl] = f"failed: {exc}"
            rows = [r for r in rows if r["impl"] != impl]
    ref = {(r["task"], r["n"]): r["time_s"] for r in list(results) + rows
           if r["impl"] == "fastkern"}
    for r in rows:
        base = ref.get((r["task"], r["n"]))
        r["fastkern_speedup"] = None if base is None else r["time_s"] / base
    if not any(r["impl"] == "pykeops" for r in rows):
        rows = [r for r in rows if r["task"] != "matvec"]
    skipped = {k: v for k, v in status.items() if v is not None}
    return rows, skipped


