"""``fastkern bench``: fastkern against scikit-learn, side by side.

The installed package carries only this quick comparison; the full harness
(naive and NumPy baselines, peak memory in fresh processes, numba, numexpr,
pykeops, the kernlab-style methods) lives in the source checkout's
benchmarks/ folder, which ``--full`` and ``--methods`` run when it is there.
"""
import argparse
import json
import math
import pathlib
import sys
import time

import numpy as np

from fastkern.cli import _common
from fastkern.cli._common import PLOT_EXTRA, CLIError, Outputs
from fastkern.cli._table import fmt_ratio, fmt_time, text_table

TASKS = ("RBF Gram", "centering", "KernelPCA", "KernelRidge")
SIZES = [1000, 4000]
QUICK_SIZES = [200, 400]
ROUNDS, QUICK_ROUNDS = 5, 3
# Each side's turn repeats its call, the same count for both, until the
# slower side's turn lasts about this long: one call of 100 us varied 2x
# from turn to turn on an idle machine, which said nothing about the host.
TURN_S = 0.05
# A cell whose round-by-round speed-ups differ by more than this factor
# (largest over smallest) was timed on a host too noisy for its ratio to
# mean anything.
NOISY_SPREAD = 1.5
# Exit status of --strict when some cell was too noisy.
EXIT_NOISY = 3
# Inside a parallel grid search each fit has fewer cores, and fastkern's
# advantage shrinks: benchmarks/bench_gridsearch.py on the 2-core Xeon of the
# benchmarks page (tests/test_cli.py checks these against its saved results).
GRID_SEARCH_NOTE = (
    "A parallel grid search (GridSearchCV(n_jobs=-1)) gains less than a single fit: "
    "each fit gets fewer cores. The benchmarks page measured 1.5-2.4x for KernelRidge "
    "and 2.1-3.4x for a KernelPCA pipeline at 1000-3000 rows on 2 cores "
    "(benchmarks/bench_gridsearch.py).")
N_FEATURES = 16
N_COMPONENTS = 5
RIDGE_ALPHA = 1.0
BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"

DESCRIPTION = f"""\
Time fastkern against scikit-learn on the same data, side by side in this
process: the RBF Gram (d={N_FEATURES}), the double centering of that Gram, KernelPCA
({N_COMPONENTS} components; scikit-learn's with arpack) and KernelRidge (alpha={RIDGE_ALPHA:g}),
at {','.join(map(str, SIZES))} rows (--quick: {','.join(map(str, QUICK_SIZES))} rows). The two libraries take turns,
the order reversed every round ({ROUNDS} rounds; --quick: {QUICK_ROUNDS}); each side's median
time is shown, with the median of the rounds' speed-ups, their spread and
the largest difference between the two results. Where a cell's speed-ups
differ by more than {NOISY_SPREAD}x between rounds, the host was too busy for the
ratio to mean anything: the cell is marked, a warning says so, and with
--strict the exit status is {EXIT_NOISY}.

This quick comparison is all the installed package has. From a source
checkout (the benchmarks/ folder next to fastkern/), --full runs the full
harness: a naive Python loop and vectorised NumPy as well, peak memory of
each call in a fresh process, and numba, numexpr and pykeops where installed
(pip install numba numexpr pykeops), with --json and --plot (the plot needs
pip install matplotlib); --methods compares kernel CCA, the MMD/HSIC
tests, chi2, string and graph kernels against cca-zoo, hyppo, scikit-learn
and grakel. The pytest-benchmark suite is
`pytest benchmarks/ --benchmark-only`."""


def _size_list(text):
    sizes = []
    for part in text.split(","):
        try:
            n = int(part)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected comma-separated sample counts like 1000,4000, got {text!r}") from None
        if n < 10:
            raise argparse.ArgumentTypeError(f"sample counts must be at least 10, got {n}")
        sizes.append(n)
    return sorted(set(sizes))


def add_parser(sub):
    parser = _common.add_command(
        sub, "bench", writes_files=True,
        help="time fastkern against scikit-learn (--full: the benchmark harness of a source "
             "checkout)",
        description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true",
                        help=f"small sizes ({','.join(map(str, QUICK_SIZES))}) and "
                             f"{QUICK_ROUNDS} rounds: seconds")
    parser.add_argument("--sizes", type=_size_list, default=None, metavar="N1,N2,...",
                        help=f"sample counts (default: {','.join(map(str, SIZES))})")
    parser.add_argument("--rounds", type=_common.positive_int, default=None, metavar="R",
                        help=f"calls of each side, taking turns (default: {ROUNDS}; --quick: "
                             f"{QUICK_ROUNDS})")
    parser.add_argument("--strict", action="store_true",
                        help=f"exit with status {EXIT_NOISY} when the host was too noisy for "
                             "some ratio to mean anything")
    parser.add_argument("--json", default=None, metavar="FILE", help="write the results as JSON")
    parser.add_argument("--full", action="store_true",
                        help="the full harness of a source checkout (benchmarks/)")
    parser.add_argument("--methods", action="store_true",
                        help="the methods' comparison of a source checkout (benchmarks/)")
    parser.add_argument("--plot", default=None, metavar="FILE",
                        help=f"with --full: time against N, one panel per task ({PLOT_EXTRA})")
    _common.add_threads(parser)
    parser.set_defaults(func=run)


def make_data(n, d=N_FEATURES, seed=0):
    """Standard normal features and a smooth noisy target."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    return X, np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.standard_normal(n)


def pairs(n, n_threads):
    """{task: (scikit-learn callable, fastkern callable)} on the same data of n rows."""
    from sklearn.decomposition import KernelPCA as SkKernelPCA
    from sklearn.kernel_ridge import KernelRidge as SkKernelRidge
    from sklearn.metrics.pairwise import rbf_kernel as sk_rbf
    from sklearn.preprocessing import KernelCenterer as SkKernelCenterer

    import fastkern

    X, y = make_data(n)
    gamma = 1.0 / N_FEATURES
    K = sk_rbf(X, gamma=gamma)

    def embedding(est):
        # Eigenvector signs are arbitrary: compare |Z|.
        return lambda: np.abs(est.fit_transform(X))

    def ridge(est):
        return lambda: est.fit(X, y).dual_coef_

    return {
        "RBF Gram": (lambda: sk_rbf(X, gamma=gamma),
                     lambda: fastkern.rbf_kernel(X, gamma=gamma, n_threads=n_threads)),
        "centering": (lambda: SkKernelCenterer().fit_transform(K),
                      lambda: fastkern.center_gram(K, n_threads=n_threads)),
        "KernelPCA": (embedding(SkKernelPCA(N_COMPONENTS, kernel="rbf", gamma=gamma,
                                            eigen_solver="arpack", random_state=0)),
                      embedding(fastkern.KernelPCA(N_COMPONENTS, kernel="rbf", gamma=gamma,
                                                   n_threads=n_threads, random_state=0))),
        "KernelRidge": (ridge(SkKernelRidge(alpha=RIDGE_ALPHA, kernel="rbf", gamma=gamma)),
                        ridge(fastkern.KernelRidge(alpha=RIDGE_ALPHA, kernel="rbf", gamma=gamma,
                                                   n_threads=n_threads))),
    }


def _timed(fn, calls):
    """Seconds per call of fn, over ``calls`` calls in a row."""
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def compare(sizes, rounds, n_threads, progress=None):
    """One row per (task, size): each side's time per call, in turns of about
    TURN_S (the order reversed every round, so that neither always runs
    after the other), their medians, the median and the spread of the
    rounds' speed-ups, and the largest difference between the two results."""
    rows = []
    total = len(sizes) * len(TASKS)
    for n in sizes:
        for task, (theirs, ours) in pairs(n, n_threads).items():
            if progress is not None:
                progress.step(len(rows), total, f"{task} at N={n}")
            # Warm-up: imports, thread pools and the first touch of the output.
            difference = float(np.max(np.abs(theirs() - ours())))
            slowest = max(_timed(theirs, 1), _timed(ours, 1))
            calls = max(1, math.ceil(TURN_S / max(slowest, 1e-9)))
            times = {"scikit-learn": [], "fastkern": []}
            sides = [("scikit-learn", theirs), ("fastkern", ours)]
            for r in range(rounds):
                for name, fn in (sides if r % 2 == 0 else sides[::-1]):
                    times[name].append(_timed(fn, calls))
            theirs_s, ours_s = np.array(times["scikit-learn"]), np.array(times["fastkern"])
            speedups = theirs_s / ours_s
            rows.append({"task": task, "n": n, "rounds": rounds,
                         "sklearn_s": float(np.median(theirs_s)),
                         "fastkern_s": float(np.median(ours_s)),
                         "speedup": float(np.median(speedups)),
                         "speedup_min": float(speedups.min()),
                         "speedup_max": float(speedups.max()),
                         "noisy": bool(speedups.max() > NOISY_SPREAD * speedups.min()),
                         "sklearn_times_s": theirs_s.tolist(),
                         "fastkern_times_s": ours_s.tolist(),
                         "max_abs_difference": difference})
    if progress is not None:
        progress.close()
    return rows


def format_rows(rows):
    """The comparison's table: one line per (task, size); * marks a noisy cell."""
    return text_table(
        ("task", "N", "scikit-learn", "fastkern", "speed-up", "spread", "max |diff|"),
        [(r["task"], r["n"], fmt_time(r["sklearn_s"]), fmt_time(r["fastkern_s"]),
          fmt_ratio(r["speedup"], ".3g") + ("*" if r["noisy"] else ""),
          f"{r['speedup_min']:.3g}-{r['speedup_max']:.3g}x",
          f"{r['max_abs_difference']:.2e}") for r in rows],
        align="<>>>>>>")


def noise_warning(rows):
    """A warning for the cells too noisy to trust (None if there are none)."""
    import os

    noisy = [r for r in rows if r["noisy"]]
    if not noisy:
        return None
    load = ""
    if hasattr(os, "getloadavg"):
        load = f" (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
    return (f"warning: {len(noisy)} of {len(rows)} cells (marked *) were timed on a host too "
            f"busy for their speed-up to mean anything{load}: it varied more than "
            f"{NOISY_SPREAD:g}x between rounds. Rerun on an idle machine, or with more --rounds.")


def _harness():
    """The benchmark harness of the source checkout, imported from benchmarks/."""
    if not (BENCHMARKS / "_harness" / "__init__.py").is_file():
        raise CLIError("--full and --methods run the benchmark harness of a source checkout "
                       f"(benchmarks/ next to fastkern/, not found at {BENCHMARKS}); the "
                       "installed package has the quick comparison (fastkern bench)")
    if str(BENCHMARKS) not in sys.path:
        sys.path.insert(0, str(BENCHMARKS))
    from _harness import command, measuring

    return command, measuring


def run(args):
    from fastkern._threads import blas_limit

    if args.full and args.methods:
        raise CLIError("--full and --methods are two different runs: give one")
    if args.methods:
        if args.sizes or args.json or args.plot or args.rounds or args.strict:
            raise CLIError("--methods takes --quick and --threads only (its sizes are fixed)")
        command, _ = _harness()
        command.run_methods(args.threads, args.quick)
        return 0
    if args.plot is not None and not args.full:
        raise CLIError("--plot needs --full (the quick comparison has no plot)")
    if args.strict and args.full:
        raise CLIError("--strict is for the quick comparison, not --full")
    warning = None
    with Outputs("bench") as outputs:
        json_out = outputs.add(args.json, "--json")
        plot_out = outputs.add(args.plot, "--plot", plot=True)
        if args.full:
            if args.rounds:
                raise CLIError("--rounds is for the quick comparison; --full times each call "
                               "until it has spent its budget")
            command, measuring = _harness()
            try:
                command.run_full(args.sizes, args.threads, args.quick, json_out, plot_out)
            except measuring.MeasurementError as exc:
                raise CLIError(str(exc)) from None
        else:
            sizes = args.sizes or (QUICK_SIZES if args.quick else SIZES)
            rounds = args.rounds or (QUICK_ROUNDS if args.quick else ROUNDS)
            from fastkern import config_info

            info = config_info()
            print(f"fastkern {info['fastkern']} against scikit-learn, {info['cores']} cores, "
                  f"threads: {args.threads or info['threads']}; median of {rounds} "
                  "calls each, taking turns in this process; d = 16")
            sys.stdout.flush()
            bar = _common.progress_bar(argparse.Namespace(progress=None), "bench")
            with blas_limit(args.threads):
                rows = compare(sizes, rounds, args.threads, bar)
            print(format_rows(rows))
            print(GRID_SEARCH_NOTE)
            warning = noise_warning(rows)
            if warning is not None:
                print(f"fastkern bench: {warning}", file=sys.stderr)
            if json_out is not None:
                with json_out.open() as f:
                    json.dump({"machine": info, "threads": args.threads, "rounds": rounds,
                               "n_features": N_FEATURES, "results": rows}, f, indent=2,
                              default=str)
        outputs.commit()
    for path in (args.json, args.plot):
        if path is not None:
            print(f"wrote {path}")
    if args.strict and warning is not None:
        return EXIT_NOISY
    return 0
