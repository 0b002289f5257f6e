"""``fastkern bench --full`` and ``fastkern bench --methods`` (from a source checkout).

Both print to stdout and write the --json/--plot outputs that the command
line reserved; a failed measurement raises MeasurementError, which the
command line reports as one line.
"""
import contextlib
import sys

from threadpoolctl import threadpool_limits

from _harness import measuring, methods, report, suite, tasks

FULL_SIZES = [1000, 4000, 8000]
QUICK_SIZES = [60, 120]


def run_full(sizes, n_threads, quick, json_out=None, plot_out=None):
    """The full comparison: naive loop, NumPy, scikit-learn and fastkern in fresh
    processes (time and peak memory), then the installed peers."""
    sizes = sizes or (QUICK_SIZES if quick else FULL_SIZES)
    info = report.machine_info(n_threads)
    print(report.describe_machine(info))
    print(f"tasks: RBF Gram (d={tasks.N_FEATURES}), centering of that Gram, KernelPCA "
          f"({tasks.N_COMPONENTS} components), KernelRidge (alpha={tasks.RIDGE_ALPHA}); "
          f"naive loop at N={min(sizes)} only")
    print(report.MEMORY_NOTE[info["memory_method"]])
    print(report.PEERS_NOTE)
    sys.stdout.flush()
    min_time = 0.02 if quick else 0.3
    results = suite.run_suite(sizes, n_threads=n_threads, min_time=min_time,
                              progress=report.progress_printer())
    peers = suite.run_peers(sizes, results, n_threads=n_threads, min_time=min_time,
                            progress=report.progress_printer())
    print()
    print(report.format_table(results))
    print()
    print(report.format_peers(*peers))
    if json_out is not None:
        report.write_json(json_out.dest, results, info, sizes, peers)
    if plot_out is not None:
        report.plot_results(results + peers[0], plot_out.dest, info, format=plot_out.format)


def run_methods(n_threads, quick):
    """Kernel CCA, MMD/HSIC tests, chi2, string and graph kernels against their peers."""
    print(report.describe_machine(report.machine_info(n_threads)))
    print("methods against the library a user would otherwise pick (fastest of 3 alternating "
          "calls in this process; peers that are not installed are skipped)")
    sys.stdout.flush()

    def progress(name):
        print(f"[fastkern bench] {name} ...", file=sys.stderr, flush=True)

    openmp = (contextlib.nullcontext() if n_threads is None
              else threadpool_limits(limits=n_threads, user_api="openmp"))
    with measuring.blas_threads(n_threads), openmp:
        rows = methods.run(scale=0.05 if quick else 1.0, rounds=1 if quick else 3,
                           progress=progress)
    print()
    print(methods.format_rows(rows))
