"""fastkern against scikit-learn at every size users fit, and eigen_solver="auto"
against every explicit solver (issue 22, targets 1).

    python benchmarks/bench_sizes.py [--quick] [--sizes 200,1000] [--json PATH]

At each N in {200, 500, 1000, 2000, 4000, 8000}, for d in {8, 16, 64} and
two spectra of the RBF Gram (steep: gamma = 1/d; flat: gamma = 0.5, many
eigenvalues of similar size), side by side in this process:

* KernelPCA(5, kernel="rbf").fit_transform against the faster of
  scikit-learn's eigen_solver "auto" and "arpack";
* KernelRidge(alpha=1, kernel="rbf").fit;
* rbf_kernel(X, gamma) (a fresh output each call);

each the fastest of k interleaved calls (fastkern and scikit-learn in turn,
the order reversed every round; k adaptive, about one second per cell), the
ratio scikit-learn time / fastkern time; targets: >= 2 everywhere, never < 1.

The "auto" grid: at each N (d = 16, both spectra) fastkern's KernelPCA with
eigen_solver="auto" against each explicit solver ("dense", "arpack",
"thick_restart_lanczos", "randomized", "block_krylov" run to the tolerance
"auto" gives it), in a random order each round, the ratio auto time /
fastest time; target <= 1.2.  "dense" is skipped above --dense-max (an N x N eigh takes minutes
there, never the fastest).  From the third round on, an explicit solver
over twice the fastest contestant's time is not timed again (it cannot be
the fastest), so the budget buys "auto" and the close solvers more rounds.

Each call starts once no other thread of this process runs
(_standalone.wait_until_quiet): scikit-learn's OpenBLAS workers spin about
85 ms after a threaded call, and on the 2-core VM the call right after one
(fastkern's, or the next solver's) ran up to 1.4x slower beside it, while
scikit-learn's calls never start beside fastkern's sleeping threads.

A full run takes about 6-10 minutes on 2 cores (most of it scikit-learn at
N = 4000 and 8000).  fastkern runs with its default thread count and
scikit-learn with its own defaults.
"""
import time

import _standalone as S

NAME = "sizes"
SIZES = (200, 500, 1000, 2000, 4000, 8000)
DIMS = (8, 16, 64)
AUTO_DIM = 16
N_COMPONENTS = 5
ALPHA = 1.0
SOLVERS = ("dense", "arpack", "thick_restart_lanczos", "randomized", "block_krylov")
TARGET = 2.0
FLOOR = 1.0
TARGET_AUTO = 1.2
# The auto grid's explicit solvers stop being timed once over this many times
# the fastest contestant (_standalone.interleaved's retire).
RETIRE = 2.0
QUICK = {"sizes": (200, 500), "dims": (8,), "budget": 0.15}
TASK_TITLES = {"kpca": "KernelPCA(5) fit_transform", "ridge": "KernelRidge fit",
               "rbf": "rbf_kernel"}


def spectra(d):
    """(name, gamma): a steep and a flat spectrum of the RBF Gram."""
    return (("steep", 1.0 / d), ("flat", 0.5))


def sklearn_kpca_solvers(n):
    # scikit-learn's "auto" is "arpack" for N > 200 and fewer than 10
    # components (sklearn.decomposition.KernelPCA): timing both there would
    # time one solver twice.
    return ("arpack",) if n > 200 and N_COMPONENTS < 10 else ("auto", "arpack")


def contestants(task, X, y, gamma):
    """{name: callable}: fastkern first, then scikit-learn's settings."""
    import sklearn.decomposition
    import sklearn.kernel_ridge
    from sklearn.metrics.pairwise import rbf_kernel as sk_rbf

    import fastkern

    if task == "kpca":
        # The same random_state as scikit-learn's: a seed's start vector
        # costs each its RandomState.
        fns = {"fastkern": lambda: fastkern.KernelPCA(
            N_COMPONENTS, kernel="rbf", gamma=gamma, random_state=0).fit_transform(X)}
        for solver in sklearn_kpca_solvers(X.shape[0]):
            fns[f"sklearn:{solver}"] = (lambda s=solver: sklearn.decomposition.KernelPCA(
                N_COMPONENTS, kernel="rbf", gamma=gamma, eigen_solver=s,
                random_state=0).fit_transform(X))
        return fns
    if task == "ridge":
        return {"fastkern": lambda: fastkern.KernelRidge(
                    alpha=ALPHA, kernel="rbf", gamma=gamma).fit(X, y),
                "sklearn": lambda: sklearn.kernel_ridge.KernelRidge(
                    alpha=ALPHA, kernel="rbf", gamma=gamma).fit(X, y)}
    return {"fastkern": lambda: fastkern.rbf_kernel(X, gamma=gamma),
            "sklearn": lambda: sk_rbf(X, gamma=gamma)}


def measure_cell(task, n, d, spectrum, gamma, budget):
    X, y = S.make_data(n, d)
    t = S.interleaved(contestants(task, X, y, gamma), budget=budget, max_rounds=15,
                      settle="quiet")
    sk = {name.partition(":")[2] or "default": v["time_s"] for name, v in t.items()
          if name.startswith("sklearn")}
    ok = {k: v for k, v in sk.items() if v is not None}
    setting = min(ok, key=ok.get) if ok else None
    fk = t["fastkern"]["time_s"]
    # Reported, not judged: scikit-learn's faster setting over fastkern round
    # by round (geometric mean), which a change of the host's speed between
    # rounds does not move, against the fastest calls' ratio, which it can.
    paired = None
    if setting is not None and fk is not None:
        name = "sklearn" if setting == "default" else f"sklearn:{setting}"
        paired = S.paired_ratio(t[name]["times_s"], t["fastkern"]["times_s"])
    return {"task": task, "n": n, "d": d, "spectrum": spectrum, "gamma": gamma,
            "fastkern_s": fk, "sklearn_s": ok.get(setting), "sklearn_setting": setting,
            "sklearn_settings_s": sk, "ratio": S.ratio(ok.get(setting), fk),
            "paired_ratio": paired and paired[0],
            "paired_interval": paired and [paired[1], paired[2]],
            "rounds": t["fastkern"]["rounds"], "errors": S.errors_of(t)}


def measure_auto(n, d, spectrum, gamma, budget, dense_max):
    import fastkern

    X, _ = S.make_data(n, d)
    solvers = ("auto",) + tuple(s for s in SOLVERS if s != "dense" or n <= dense_max)
    chosen = {}

    from fastkern._kpca_solvers import _AUTO_KRYLOV_TOL

    def fit(solver):
        # "auto" runs the block solver to ARPACK's accuracy (tol 2e-13); its
        # explicit default (1e-10) would be timed against a looser answer.
        tol = _AUTO_KRYLOV_TOL if solver == "block_krylov" else 0.0
        est = fastkern.KernelPCA(N_COMPONENTS, kernel="rbf", gamma=gamma, eigen_solver=solver,
                                 random_state=0, tol=tol)
        est.fit_transform(X)
        if solver == "auto":
            chosen["solver"] = getattr(est, "_fit_solver", None)

    # A solver over twice the fastest's time cannot be the fastest: it stops
    # after two rounds, and the rounds go to "auto" and the close ones.
    t = S.interleaved({s: (lambda s=s: fit(s)) for s in solvers}, budget=budget, max_rounds=15,
                      settle="quiet", retire=RETIRE, keep=("auto",))
    times = {s: v["time_s"] for s, v in t.items()}
    explicit = {s: v for s, v in times.items() if s != "auto" and v is not None}
    fastest = min(explicit, key=explicit.get) if explicit else None
    return {"task": "kpca_auto", "n": n, "d": d, "spectrum": spectrum, "gamma": gamma,
            "times_s": times, "auto_s": times["auto"], "auto_chose": chosen.get("solver"),
            "fastest_solver": fastest, "fastest_s": explicit.get(fastest),
            "ratio": S.ratio(times["auto"], explicit.get(fastest)),
            "skipped": [] if "dense" in times else ["dense"], "rounds": t["auto"]["rounds"],
            "errors": S.errors_of(t)}


def missed(doc):
    out = []
    for r in doc["results"]:
        where = f"{r['task']} N={r['n']} d={r['d']} {r['spectrum']}"
        # A scikit-learn setting that raised (its dense eigh got no pair of a
        # clustered spectrum) is the peer's failure, kept in the row's errors:
        # the ratio is over the settings that ran.
        own = {k: v for k, v in (r["errors"] or {}).items() if not k.startswith("sklearn")}
        if own:
            out.append(f"{where}: failed: {own}")
        if r["ratio"] is None:
            continue
        if r["task"] == "kpca_auto":
            if r["ratio"] > TARGET_AUTO:
                out.append(f"{where}: auto {r['ratio']:.2f}x the fastest ({r['fastest_solver']}),"
                           f" target <= {TARGET_AUTO}")
        elif r["ratio"] < TARGET:
            out.append(f"{where}: {r['ratio']:.2f}x scikit-learn, target >= {TARGET}")
    return out


def main(argv=None):
    p = S.parser(NAME, __doc__)
    p.add_argument("--sizes", type=S.sizes_arg, help="comma-separated N (default: "
                   + ",".join(map(str, SIZES)) + ")")
    p.add_argument("--dims", type=S.sizes_arg, metavar="D,...",
                   help="feature counts (default: " + ",".join(map(str, DIMS)) + ")")
    p.add_argument("--tasks", default="kpca,ridge,rbf,auto",
                   help="any of kpca,ridge,rbf,auto (default: all)")
    p.add_argument("--budget", type=float, help="seconds per cell (default 1, --quick 0.15)")
    p.add_argument("--dense-max", type=int, default=4000,
                   help="largest N at which the auto grid times eigen_solver='dense' (4000)")
    args = p.parse_args(argv)
    sizes = args.sizes or (QUICK["sizes"] if args.quick else SIZES)
    dims = args.dims or (QUICK["dims"] if args.quick else DIMS)
    budget = args.budget or (QUICK["budget"] if args.quick else 1.0)
    tasks = [t for t in args.tasks.split(",") if t]
    unknown = set(tasks) - {"kpca", "ridge", "rbf", "auto"}
    if unknown:
        p.error(f"--tasks: unknown {sorted(unknown)}")
    auto_dim = AUTO_DIM if AUTO_DIM in dims else dims[0]

    info = S.begin()
    start = time.monotonic()
    rows = []
    for n in sizes:
        for task in [t for t in tasks if t != "auto"]:
            for d in dims:
                for spectrum, gamma in spectra(d):
                    row = measure_cell(task, n, d, spectrum, gamma, budget)
                    rows.append(row)
                    S.say(f"  {task:5s} N={n:<6d} d={d:<3d} {spectrum:5s} sklearn "
                          f"{S.fmt_time(row['sklearn_s']):>9s} ({row['sklearn_setting']}) "
                          f"fastkern {S.fmt_time(row['fastkern_s']):>9s}  "
                          f"{S.fmt_ratio(row['ratio'])}")
        if "auto" in tasks:
            for spectrum, gamma in spectra(auto_dim):
                row = measure_auto(n, auto_dim, spectrum, gamma, budget, args.dense_max)
                rows.append(row)
                S.say(f"  auto  N={n:<6d} d={auto_dim:<3d} {spectrum:5s} auto "
                      f"{S.fmt_time(row['auto_s'])} (chose {row['auto_chose']}), fastest "
                      f"{row['fastest_solver']} {S.fmt_time(row['fastest_s'])}: "
                      f"{S.fmt_ratio(row['ratio'])}")
    elapsed = time.monotonic() - start

    cells = [r for r in rows if r["task"] != "kpca_auto"]
    if cells:
        S.say("\nscikit-learn time / fastkern time (target >= 2, never < 1):")
        S.say(S.table(cells, [
            ("task", lambda r: r["task"]), ("N", lambda r: str(r["n"])),
            ("d", lambda r: str(r["d"])), ("spectrum", lambda r: r["spectrum"]),
            ("scikit-learn", lambda r: S.fmt_time(r["sklearn_s"])),
            ("setting", lambda r: r["sklearn_setting"]),
            ("fastkern", lambda r: S.fmt_time(r["fastkern_s"])),
            ("ratio", lambda r: S.fmt_ratio(r["ratio"])),
            ("paired", lambda r: S.fmt_ratio(r["paired_ratio"])),
            ("", lambda r: "FAILED" if r["ratio"] is None else "" if r["ratio"] >= TARGET
             else ("SLOWER" if r["ratio"] < FLOOR else "< 2x"))]))
    auto = [r for r in rows if r["task"] == "kpca_auto"]
    if auto:
        S.say("\nKernelPCA eigen_solver='auto' time / fastest explicit solver (target <= 1.2):")
        S.say(S.table(auto, [
            ("N", lambda r: str(r["n"])), ("spectrum", lambda r: r["spectrum"]),
            ("auto", lambda r: S.fmt_time(r["auto_s"])),
            ("auto chose", lambda r: str(r["auto_chose"])),
            ("fastest", lambda r: r["fastest_solver"]),
            ("its time", lambda r: S.fmt_time(r["fastest_s"])),
            ("ratio", lambda r: S.fmt_ratio(r["ratio"])),
            ("", lambda r: "FAILED" if r["ratio"] is None else ""
             if r["ratio"] <= TARGET_AUTO else "> 1.2x")]))
    misses = missed({"results": rows})
    S.say(f"\n{len(misses)} target(s) missed; {elapsed:.0f} s of measuring")
    notes = ["scikit-learn's eigen_solver='auto' is 'arpack' for N > 200 and fewer than 10 "
             "components, so only 'arpack' is timed there",
             "auto grid: the explicit 'block_krylov' runs to the tolerance 'auto' gives it "
             "(2e-13, ARPACK's accuracy); 'randomized' is approximate (scikit-learn's "
             "power iterations) and is timed as it comes",
             f"auto grid: from the third round on, an explicit solver over {RETIRE:g}x the "
             "fastest contestant's time is not timed again, so 'auto' and the close solvers "
             "get the rounds",
             "each call starts once no other thread of this process runs (OpenBLAS's "
             "workers spin about 85 ms after a threaded call: _standalone.wait_until_quiet)"]
    if any(r.get("skipped") for r in auto):
        notes.append(f"eigen_solver='dense' not timed above N = {args.dense_max}")
    settings = {"sizes": list(sizes), "dims": list(dims), "auto_dim": auto_dim,
                "n_components": N_COMPONENTS, "alpha": ALPHA, "budget_s": budget,
                "auto_retire": RETIRE,
                "tasks": tasks, "targets": {"ratio_min": TARGET, "ratio_floor": FLOOR,
                                            "auto_max": TARGET_AUTO},
                "elapsed_s": elapsed}
    return S.save(NAME, args, argv, settings, rows, notes=notes, info=info)


def test_sizes(benchmark, benchmark_only, tmp_path):
    S.pytest_run(benchmark, benchmark_only, tmp_path, main, missed)


if __name__ == "__main__":
    main()
