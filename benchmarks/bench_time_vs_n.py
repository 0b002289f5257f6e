"""Time against N, 200 to 200,000: fastkern and scikit-learn, KernelPCA and
KernelRidge, for the docs' log-log plot (issue 22, target 6).

    python benchmarks/bench_time_vs_n.py [--quick] [--max-n 200000] [--json PATH]

KernelPCA(5, rbf) fit_transform and KernelRidge(alpha=1, rbf) fit, d = 16,
gamma = 1/16, default thread counts, fastkern and scikit-learn interleaved
where both run (scikit-learn's KernelPCA: the faster of its eigen_solver
"auto" and "arpack").

* scikit-learn up to --sklearn-max-n (8000): beyond it its dense Gram and
  ARPACK / Cholesky take minutes and gigabytes;
* fastkern's KernelPCA with eigen_solver="auto" (a dense N x N Gram) up to
  --dense-max-n (16000), and from there on with eigen_solver="matrix-free",
  the documented large-N path (no N x N matrix; both at --dense-max-n);
* fastkern's KernelRidge while its N x N Gram fits in memory (three copies'
  worth of the available memory) and N <= --ridge-max-n (20000): an exact
  kernel ridge has to hold the Gram, so the series stops there, and the
  saved notes say where and why.

A full run takes about 8-10 minutes on 2 cores (the matrix-free fit at
N = 200,000 about 4-5 of them); --max-n 50000 takes about 2-3.
"""
import time

import _standalone as S

NAME = "time_vs_n"
D = 16
GAMMA = 1.0 / D
N_COMPONENTS = 5
ALPHA = 1.0
SIZES = (200, 500, 1000, 2000, 4000, 8000, 16000, 20000, 50000, 100000, 200000)
QUICK = {"sizes": (200, 500, 1000, 2000), "sklearn_max": 1000, "dense_max": 1000,
         "ridge_max": 1000}


def kpca(library, solver, X):
    if library == "fastkern":
        from fastkern import KernelPCA
    else:
        from sklearn.decomposition import KernelPCA
    return lambda: KernelPCA(N_COMPONENTS, kernel="rbf", gamma=GAMMA, eigen_solver=solver,
                             random_state=0).fit_transform(X)


def ridge(library, X, y):
    if library == "fastkern":
        from fastkern import KernelRidge
    else:
        from sklearn.kernel_ridge import KernelRidge
    return lambda: KernelRidge(alpha=ALPHA, kernel="rbf", gamma=GAMMA).fit(X, y)


def plan(n, limits):
    """{(task, impl, solver): callable factory} measured at this N."""
    out = {}
    if n <= limits["dense_max"]:
        out[("kpca", "fastkern", "auto")] = lambda X, y: kpca("fastkern", "auto", X)
    if n >= limits["dense_max"]:
        out[("kpca", "fastkern", "matrix-free")] = lambda X, y: kpca("fastkern", "matrix-free",
                                                                     X)
    if n <= limits["sklearn_max"]:
        solvers = ("arpack",) if n > 200 and N_COMPONENTS < 10 else ("auto", "arpack")
        for s in solvers:  # sklearn's "auto" is "arpack" for N > 200 and < 10 components
            out[("kpca", "sklearn", s)] = lambda X, y, s=s: kpca("sklearn", s, X)
        out[("ridge", "sklearn", "cholesky")] = lambda X, y: ridge("sklearn", X, y)
    if n <= limits["ridge_max"]:
        out[("ridge", "fastkern", "auto")] = lambda X, y: ridge("fastkern", X, y)
    return out


def ridge_limit(requested):
    """Largest N whose Gram (8 N^2 bytes) fits three times in the available memory."""
    available = S.memory_available()
    if available is None:
        return requested, None
    fits = int((available / 24) ** 0.5)
    return min(requested, fits), fits


def missed(doc):
    """No ratio target here (the plot is the point); a failed call is a miss."""
    return [f"{r['task']} {r['impl']} {r['solver']} N={r['n']} failed: {r['error']}"
            for r in doc["results"] if r["error"]]


def main(argv=None):
    p = S.parser(NAME, __doc__)
    p.add_argument("--sizes", type=S.sizes_arg, help="comma-separated N (default: "
                   + ",".join(map(str, SIZES)) + ")")
    p.add_argument("--max-n", type=int, help="drop the sizes above this N")
    p.add_argument("--sklearn-max-n", type=int, help="largest N for scikit-learn (8000)")
    p.add_argument("--dense-max-n", type=int,
                   help="largest N of fastkern's dense-Gram KernelPCA, first N of its "
                        "matrix-free one (16000)")
    p.add_argument("--ridge-max-n", type=int, help="largest N for fastkern's KernelRidge "
                   "(20000, less when its Gram does not fit in memory)")
    p.add_argument("--budget", type=float, help="seconds per size (default 2, --quick 0.2)")
    args = p.parse_args(argv)
    sizes = list(args.sizes or (QUICK["sizes"] if args.quick else SIZES))
    if args.max_n is not None:
        sizes = [n for n in sizes if n <= args.max_n]
    if not sizes:
        p.error("no size left to measure")
    pick = lambda given, quick, full: given if given is not None else (  # noqa: E731
        quick if args.quick else full)
    requested_ridge = pick(args.ridge_max_n, QUICK["ridge_max"], 20000)
    ridge_max, ridge_fits = ridge_limit(requested_ridge)
    limits = {"sklearn_max": pick(args.sklearn_max_n, QUICK["sklearn_max"], 8000),
              "dense_max": pick(args.dense_max_n, QUICK["dense_max"], 16000),
              "ridge_max": ridge_max}
    budget = args.budget or (0.2 if args.quick else 2.0)

    info = S.begin()
    start = time.monotonic()
    rows = []
    for n in sizes:
        todo = plan(n, limits)
        if not todo:
            continue
        X, y = S.make_data(n, D)
        fns = {key: make(X, y) for key, make in todo.items()}
        t = S.interleaved(fns, budget=budget, min_rounds=2 if n <= 8000 else 1, max_rounds=7)
        for (task, impl, solver), v in t.items():
            rows.append({"task": task, "impl": impl, "solver": solver, "n": n, "d": D,
                         "n_threads": None, "time_s": v["time_s"], "rounds": v["rounds"],
                         "error": v.get("error")})
            S.say(f"  {task:5s} N={n:<7d} {impl:8s} {solver:12s} {S.fmt_time(v['time_s']):>9s}")
        del X, y, fns
    elapsed = time.monotonic() - start

    # Per (task, impl, N): the faster of its settings, as plotted.
    best = {}
    for r in rows:
        if r["time_s"] is None:
            continue
        key = (r["task"], r["impl"], r["n"])
        if key not in best or r["time_s"] < best[key]["time_s"]:
            best[key] = r
    table_rows = []
    for task in ("kpca", "ridge"):
        for n in sizes:
            fk, sk = best.get((task, "fastkern", n)), best.get((task, "sklearn", n))
            if fk or sk:
                table_rows.append({"task": task, "n": n, "fk": fk, "sk": sk})
    S.say("\ntime against N (the faster setting of each library):")
    S.say(S.table(table_rows, [
        ("task", lambda r: r["task"]), ("N", lambda r: f"{r['n']:,}"),
        ("scikit-learn", lambda r: S.fmt_time(r["sk"]["time_s"]) if r["sk"] else "-"),
        ("fastkern", lambda r: S.fmt_time(r["fk"]["time_s"]) if r["fk"] else "-"),
        ("fastkern solver", lambda r: r["fk"]["solver"] if r["fk"] else "-"),
        ("ratio", lambda r: S.fmt_ratio(r["sk"]["time_s"] / r["fk"]["time_s"])
         if r["fk"] and r["sk"] else "-")]))
    notes = [f"scikit-learn measured up to N = {limits['sklearn_max']}",
             f"fastkern KernelPCA: eigen_solver='auto' up to N = {limits['dense_max']}, "
             f"'matrix-free' from N = {limits['dense_max']} on"]
    if ridge_max < max(sizes):
        why = (f"its {8 * (ridge_max + 1) ** 2 / 2 ** 30:.1f} GiB Gram, three times over, "
               f"would not fit the available memory" if ridge_fits is not None
               and ridge_fits < requested_ridge else f"--ridge-max-n {requested_ridge}")
        notes.append(f"fastkern KernelRidge stops at N = {ridge_max}: an exact kernel ridge "
                     f"holds the N x N Gram ({why})")
    for note in notes:
        S.say("  " + note)
    S.say(f"{elapsed:.0f} s of measuring")
    settings = {"sizes": sizes, "d": D, "gamma": GAMMA, "n_components": N_COMPONENTS,
                "alpha": ALPHA, "budget_s": budget, "limits": limits, "elapsed_s": elapsed}
    return S.save(NAME, args, argv, settings, rows, notes=notes, info=info, n_features=D)


def test_time_vs_n(benchmark, benchmark_only, tmp_path):
    S.pytest_run(benchmark, benchmark_only, tmp_path, main, missed)


if __name__ == "__main__":
    main()
