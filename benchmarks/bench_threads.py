"""fastkern's thread scaling, 1 thread to all cores (issue 22, target 4).

    python benchmarks/bench_threads.py [--quick] [--large-n] [--threads 1,2,4] [--json PATH]

At 1, 2, 4, 8 and 16 threads (capped at the core count; the core count
itself is added when it is not a power of two), BLAS held to the same count:

* RBF Gram, N = 20000, d = 16, into a reused ``out=`` buffer (3.2 GB);
* KernelPCA(5, rbf) fit_transform, N = 16000, d = 16 (eigen_solver "auto"),
  and one more fit per thread count timed stage by stage (validation, the
  kernel matrix, the eigensolver and what follows it) with its iterations;
* KernelPCA's block product alone (``_centering.gram_matmat_packed``: the
  packed upper triangle of the same N = 16000 Gram times 8 columns, the block
  of 5 components), with the rate at which it reads K: the product reads all
  of K (1 GB) for a few flops per value, so its speed-up is that of the
  memory bandwidth.  From it and the 1-thread stage split, a note gives the
  most KernelPCA could gain at the largest count if everything but its
  products scaled perfectly (see ``fit_bound``);
* with --large-n: matrix-free KernelPCA(5, rbf), N = 200,000, d = 16, timed
  over a fixed MATFREE_ITERATIONS block iterations (as many passes over K) at
  the smallest and the largest thread count.  A converged fit takes a dozen
  or more passes of the same work (about 77 s each on one thread of a
  16-core Xeon): 15 minutes or more on one thread.

The thread counts are interleaved (1, 2, 4, ... then the reverse), fastest
of each; the speed-up is the 1-thread time over the T-thread time (without
1 in --threads: the smallest count's time times that count, as if it scaled
perfectly up to there).  Targets
(on a machine with at least 16 cores): Gram >= 12x, KernelPCA >= 10x,
matrix-free >= 10x at 16 threads.

Duration: the Gram and KernelPCA take under a minute on 16 cores (about 5
on 2 cores).  --large-n adds about 3 minutes on 16 cores (two passes on one
thread, two on 16), 4-5 on 2 cores.
"""
import contextlib
import os
import time
import warnings

import numpy as np

import _standalone as S

NAME = "threads"
D = 16
GAMMA = 1.0 / D
THREADS = (1, 2, 4, 8, 16)
SIZES = {"gram": 20000, "kpca": 16000, "matfree": 200000}
QUICK_SIZES = {"gram": 2000, "kpca": 1000, "matfree": 3000}
# KernelPCA(5)'s block: krylov_block_size(5) columns.
PRODUCT_COLUMNS = 8
TARGETS = {"gram": 12.0, "kpca": 10.0, "matfree": 10.0}
TARGET_THREADS = 16
# Two block iterations: the first pass (which also gives the row means) and
# one more, the work every later pass repeats.
MATFREE_ITERATIONS = 2
TITLES = {"gram": "RBF Gram into out=", "kpca": "KernelPCA(5)",
          "product": f"KernelPCA's block product ({PRODUCT_COLUMNS} columns, packed K)",
          "matfree": f"matrix-free KernelPCA(5), {MATFREE_ITERATIONS} iterations"}


def thread_counts(cores):
    counts = {min(t, cores) for t in THREADS}
    if cores <= max(THREADS):
        counts.add(cores)
    return sorted(counts)


def _fit(task, X, t, out):
    """The call to time: task's work on t threads, without the BLAS limit."""
    import fastkern

    if task == "gram":
        return lambda: fastkern.rbf_kernel(X, gamma=GAMMA, out=out, n_threads=t)
    if task == "kpca":
        return lambda: fastkern.KernelPCA(5, kernel="rbf", gamma=GAMMA,
                                          n_threads=t).fit_transform(X)
    return lambda: fastkern.KernelPCA(5, kernel="rbf", gamma=GAMMA, eigen_solver="matrix-free",
                                      max_iter=MATFREE_ITERATIONS, n_threads=t).fit(X)


@contextlib.contextmanager
def _held_to(t):
    """BLAS held to t threads; the fixed iterations' warning silenced (they stop
    short of convergence on purpose)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=t, user_api="blas"), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*did not converge")
        yield


def contestant(task, X, t, out):
    fn = _fit(task, X, t, out)

    def run():
        with _held_to(t):
            fn()
    return run


class _Stages:
    """A progress sink (fastkern._progress) that notes when each stage of a fit
    begins and when each of the eigensolver's iterations ends."""

    def __init__(self):
        self.marks, self.ends = [], []

    def __call__(self, label, fraction):
        pass

    def stage(self, name):
        self.marks.append((name, time.perf_counter()))

    def iteration(self, iteration, residual, tol):
        self.ends.append(time.perf_counter())


def stage_split(task, X, t):
    """One more KernelPCA fit on t threads, timed stage by stage: where the time
    goes at each thread count ("validation" is what comes before the kernel
    matrix; the eigensolver's stage ends with the fit), with its iterations
    and, from the second on, their mean time: one block product and the
    solver's own steps each, to set beside the product timed alone."""
    from fastkern._progress import reporting_progress

    sink, fn = _Stages(), _fit(task, X, t, None)
    with _held_to(t), reporting_progress(sink):
        start = time.perf_counter()
        fn()
        end = time.perf_counter()
    marks = [("validation", start)] + sink.marks + [("end", end)]
    ends = sink.ends
    return {"stages_s": {name: later - at for (name, at), (_, later) in zip(marks, marks[1:])},
            "iterations": len(ends),
            "iteration_s": (ends[-1] - ends[0]) / (len(ends) - 1) if len(ends) > 1 else None}


def product_contestants(X, counts):
    """KernelPCA's block product on c threads for each count c, on one packed
    Gram (as block_krylov multiplies it, each count with its own accumulators),
    and the bytes of K each call reads."""
    from fastkern import _centering
    from fastkern.pairwise import _upper_triangle_gram

    K = _upper_triangle_gram(X, "rbf", {"gamma": GAMMA}, n_threads=max(counts))
    V = np.random.default_rng(0).standard_normal((X.shape[0], PRODUCT_COLUMNS))
    out = np.empty_like(V)

    def run(c):
        acc = np.empty((c,) + V.shape)
        return lambda: _centering.gram_matmat_packed(K.data, K.row_start, V, out, acc, c)
    return {c: run(c) for c in counts}, K.data.nbytes


def fit_bound(rows):
    """The most KernelPCA's fit could gain at the largest thread count if all
    but its block products scaled perfectly, or None.

    T1 / (P1 / s + (T1 - P1) / T): T1 the fit on one thread, P1 its products
    (one per iteration of the 1-thread stage split, each timed as the
    "product" task; the first product is wider, so this undercounts P1 and
    can only raise the bound), s the product's speed-up at T threads.  Only
    for block_krylov, whose products these are.
    """
    kpca = {r["threads"]: r for r in rows if r["task"] == "kpca" and r["error"] is None}
    prod = {r["threads"]: r for r in rows if r["task"] == "product" and r["error"] is None}
    top = max(kpca, default=None)
    one = kpca.get(1)
    if (one is None or top is None or top == 1 or top not in prod or 1 not in prod
            or "eigensolver (block_krylov)" not in one.get("stages_s", {})):
        return None
    t1 = one["time_s"]
    p1 = min(t1, one["iterations"] * prod[1]["time_s"])
    s = prod[1]["time_s"] / prod[top]["time_s"]
    bound = t1 / (p1 / s + (t1 - p1) / top)
    return (f"KernelPCA N={one['n']}: its {one['iterations']} block products take "
            f"{p1 / t1:.0%} of the 1-thread fit and scale {s:.1f}x to {top} threads (reading "
            f"K at {prod[1]['read_gb_s']:.1f} GB/s on 1 thread, {prod[top]['read_gb_s']:.1f} on "
            f"{top}); with everything else scaling {top}x the fit could gain at most "
            f"{bound:.1f}x")


def measure(task, n, counts, budget, min_rounds):
    X, _ = S.make_data(n, D)
    out = np.empty((n, n)) if task == "gram" else None
    nbytes = None
    if task == "product":
        fns, nbytes = product_contestants(X, counts)
    else:
        fns = {c: contestant(task, X, c, out) for c in counts}
    t = S.interleaved(fns, budget=budget, min_rounds=min_rounds, max_rounds=5)
    base = S.ratio(t[counts[0]]["time_s"], 1.0 / counts[0])
    rows = [{"task": task, "n": n, "d": D, "threads": c, "time_s": t[c]["time_s"],
             "rounds": t[c]["rounds"], "speedup": S.ratio(base, t[c]["time_s"]),
             "error": t[c].get("error")} for c in counts]
    if task == "kpca":
        for row in rows:
            if row["error"] is None:
                row.update(stage_split(task, X, row["threads"]))
    if nbytes is not None:
        for row in rows:
            row["read_gb_s"] = S.ratio(nbytes / 1e9, row["time_s"])
    return rows


def missed(doc):
    out = []
    for r in doc["results"]:
        if r["error"]:
            out.append(f"{r['task']} N={r['n']} at {r['threads']} threads failed: {r['error']}")
        elif r["threads"] == TARGET_THREADS and r["task"] in TARGETS \
                and r["speedup"] < TARGETS[r["task"]]:
            out.append(f"{r['task']} N={r['n']}: {r['speedup']:.1f}x at 16 threads, "
                       f"target >= {TARGETS[r['task']]}x")
    return out


def main(argv=None):
    p = S.parser(NAME, __doc__)
    p.add_argument("--large-n", action="store_true",
                   help="add the matrix-free KernelPCA at N=200,000 (minutes per thread count)")
    p.add_argument("--threads", type=S.int_list(1, "thread counts"),
                   help="thread counts (default: 1,2,4,8,16 capped at the core count)")
    p.add_argument("--gram-n", type=int, help=f"N of the Gram (default {SIZES['gram']})")
    p.add_argument("--kpca-n", type=int, help=f"N of KernelPCA (default {SIZES['kpca']})")
    p.add_argument("--large-n-size", type=int,
                   help=f"N of the matrix-free fit (default {SIZES['matfree']})")
    args = p.parse_args(argv)
    cores = os.cpu_count() or 1
    counts = sorted(set(args.threads)) if args.threads else thread_counts(cores)
    sizes = dict(QUICK_SIZES if args.quick else SIZES)
    for key, value in (("gram", args.gram_n), ("kpca", args.kpca_n),
                       ("matfree", args.large_n_size)):
        if value is not None:
            if value < 10:
                p.error(f"sizes must be at least 10, got {value}")
            sizes[key] = value
    sizes["product"] = sizes["kpca"]
    tasks = ["gram", "kpca", "product"] + (["matfree"] if args.large_n or args.quick else [])
    budget = 0.3 if args.quick else 20.0

    info = S.begin()
    S.say(f"thread counts: {counts}")
    start = time.monotonic()
    rows, notes = [], []
    available = S.memory_available()
    for task in tasks:
        n = sizes[task]
        dense_bytes = 8 * n * n
        if task != "matfree" and available is not None and dense_bytes > 0.8 * available:
            notes.append(f"{task} N={n} skipped: its {dense_bytes / 2 ** 30:.1f} GiB Gram "
                         f"does not fit the {available / 2 ** 30:.1f} GiB available")
            S.say("  " + notes[-1])
            continue
        # The large fits: one call per thread count, at the ends of the range.
        if task == "matfree":
            result = measure(task, n, sorted({counts[0], counts[-1]}), budget, min_rounds=1)
        else:
            result = measure(task, n, counts, budget, min_rounds=2)
        rows += result
        for r in result:
            split = "".join(f"  {name} {S.fmt_time(v)}" for name, v in r.get("stages_s", {}).items())
            S.say(f"  {task:7s} N={n:<6d} {r['threads']:>3d} threads "
                  f"{S.fmt_time(r['time_s']):>9s}  {S.fmt_ratio(r['speedup'])}{split}")
    elapsed = time.monotonic() - start
    bound = fit_bound(rows)
    if bound:
        notes.append(bound)
        S.say("  " + bound)
    S.say("\nspeed-up over 1 thread:")
    S.say(S.table(rows, [
        ("task", lambda r: TITLES[r["task"]]), ("N", lambda r: f"{r['n']:,}"),
        ("threads", lambda r: str(r["threads"])), ("time", lambda r: S.fmt_time(r["time_s"])),
        ("speed-up", lambda r: S.fmt_ratio(r["speedup"]))]))
    misses = missed({"results": rows})
    for m in misses:
        S.say("  missed: " + m)
    if cores < TARGET_THREADS:
        notes.append(f"{cores} cores: the 16-thread targets are not measured on this machine")
    S.say(f"{len(misses)} target(s) missed; {elapsed:.0f} s of measuring")
    settings = {"threads": counts, "sizes": {t: sizes[t] for t in tasks}, "d": D,
                "gamma": GAMMA, "budget_s": budget, "large_n": bool(args.large_n),
                "matfree_iterations": MATFREE_ITERATIONS,
                "targets": {"threads": TARGET_THREADS, "speedup_min": TARGETS},
                "elapsed_s": elapsed}
    return S.save(NAME, args, argv, settings, rows, notes=notes, info=info)


def test_threads(benchmark, benchmark_only, tmp_path):
    S.pytest_run(benchmark, benchmark_only, tmp_path, main, missed)


if __name__ == "__main__":
    main()
