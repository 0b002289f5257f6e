"""Draw the benchmarks page's plots and tables from the saved results.

Run by docs/conf.py at every build (no benchmark is run then), or by hand:
``python docs/benchmarks/make_plots.py [DATA_DIR [OUT_DIR]]``.

Input: every ``*.json`` file in DATA_DIR, each the output of ``fastkern bench
--json FILE`` (see docs/benchmarks.rst, "Format of the saved results"), with
an optional ``"host"`` object naming the machine.  Output, in OUT_DIR:
``results.rst`` (included by docs/benchmarks.rst) and the PNG files it shows.
Missing series are skipped with a sentence saying so, so a data directory with
only some of the results still builds.
"""
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

TASK_TITLES = {"gram": "RBF Gram", "center": "centering", "kpca": "KernelPCA",
               "ridge": "KernelRidge", "matvec": "K @ V"}
IMPL_TITLES = {"naive": "naive Python loop", "numpy": "vectorised NumPy",
               "sklearn": "scikit-learn", "fastkern": "fastkern", "numba": "numba",
               "numexpr": "numexpr", "pykeops": "pykeops"}
MARKERS = {"naive": "x", "numpy": "s", "sklearn": "o", "fastkern": "D", "numba": "^",
           "numexpr": "v", "pykeops": "P"}
ORDER = list(IMPL_TITLES)
# One colour per implementation in every plot, whichever series a plot lacks.
COLORS = {"naive": "tab:gray", "numpy": "tab:orange", "sklearn": "tab:green",
          "fastkern": "tab:red", "numba": "tab:purple", "numexpr": "tab:brown",
          "pykeops": "tab:blue"}


def load(data_dir):
    """The saved runs, each a dict with "name", "machine", "host" and "rows"."""
    runs = []
    for path in sorted(Path(data_dir).glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        machine = doc.get("machine", {})
        rows = list(doc.get("results", []))
        rows += list(doc.get("peers", {}).get("results", []))
        for row in rows:
            # A row's thread count: its own, or the run's default (n_threads None).
            row["threads"] = row.get("n_threads") or machine.get("n_threads")
        runs.append({"name": path.stem, "machine": machine, "host": doc.get("host", {}),
                     "rows": rows, "n_features": doc.get("n_features")})
    return runs


def host_key(run):
    """Runs on one machine are plotted together: its name, else its cores and BLAS."""
    host = run["host"]
    if host.get("cpu"):
        return host["cpu"]
    m = run["machine"]
    arch = ", ".join(sorted({b.get("architecture") or "?" for b in m.get("blas", [])}))
    return f"{m.get('cores', '?')} cores, BLAS architecture {arch or 'unknown'}"


def describe(runs):
    """One paragraph naming the machine and software of a host's runs."""
    host, m = runs[0]["host"], runs[0]["machine"]
    parts = [f"**Machine:** {host.get('cpu', 'not named in the saved results')}"]
    if host.get("memory"):
        parts.append(f"{host['memory']} of memory")
    parts.append(f"{m.get('cores', '?')} cores")
    parts.append("OpenMP on" if m.get("openmp") else "OpenMP off")
    blas = sorted({f"{b.get('internal_api')} {b.get('version')}" for b in m.get("blas", [])})
    if blas:
        parts.append("BLAS: " + ", ".join(blas))
    soft = (f"fastkern {m.get('fastkern', '?')}, Python {m.get('python', '?')}, "
            f"NumPy {m.get('numpy', '?')}, SciPy {m.get('scipy', '?')}")
    text = "; ".join(parts) + ". **Software:** " + soft + "."
    if host.get("commit"):
        text += f" Measured on fastkern's commit ``{host['commit']}``."
    if host.get("notes"):
        text += " " + host["notes"]
    files = ", ".join(f"``{r['name']}.json``" for r in runs)
    return text + f" Saved results: {files}."


def best_rows(runs):
    """(task, impl, n, threads) -> the row with the smallest time over a host's runs."""
    best = {}
    for run in runs:
        for row in run["rows"]:
            key = (row["task"], row["impl"], row["n"], row["threads"])
            if key not in best or row["time_s"] < best[key]["time_s"]:
                best[key] = row
    return best


def default_threads(runs):
    """The thread count most rows were measured with (the time-against-N series)."""
    counts = defaultdict(int)
    for run in runs:
        for row in run["rows"]:
            counts[row["threads"]] += 1
    return max(counts, key=lambda t: (counts[t], t or 0)) if counts else None


def _axes_grid(plt, n_panels):
    cols = min(2, n_panels)
    rows = math.ceil(n_panels / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.9 * rows), squeeze=False)
    for ax in list(axes.flat)[n_panels:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def _series(best, threads, field):
    """task -> impl -> sorted [(n, value)] at one thread count."""
    out = defaultdict(lambda: defaultdict(list))
    for (task, impl, n, t), row in best.items():
        if t == threads and row.get(field) is not None:
            out[task][impl].append((n, row[field]))
    for task in out:
        for impl in out[task]:
            out[task][impl].sort()
    return out


def plot_against_n(best, threads, field, ylabel, path, title, scale=1.0):
    """Log-log plot of `field` against N, a panel per task, a line per implementation."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    series = _series(best, threads, field)
    # Log axes: values of 0 (no measurable memory rise) cannot be drawn.
    for task in series:
        for impl in list(series[task]):
            series[task][impl] = [(n, v) for n, v in series[task][impl] if v > 0]
            if not series[task][impl]:
                del series[task][impl]
    tasks = [t for t in TASK_TITLES if series.get(t)]
    if not tasks:
        return False
    fig, axes = _axes_grid(plt, len(tasks))
    for ax, task in zip(axes, tasks):
        sizes = sorted({n for pts in series[task].values() for n, _ in pts})
        for impl in sorted(series[task], key=lambda i: ORDER.index(i) if i in ORDER else 99):
            ns, vs = zip(*series[task][impl])
            ax.plot(ns, [v / scale for v in vs], marker=MARKERS.get(impl, "o"),
                    color=COLORS.get(impl), label=IMPL_TITLES.get(impl, impl),
                    linewidth=2.2 if impl == "fastkern" else 1.2)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(sizes, [f"{n:,}" for n in sizes])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_title(TASK_TITLES[task])
        ax.set_xlabel("N (samples)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def thread_scaling(best):
    """task -> (n, [(threads, time)]): fastkern at the largest N measured with >= 2 thread counts."""
    by = defaultdict(dict)
    for (task, impl, n, t), row in best.items():
        if impl == "fastkern" and t:
            by[(task, n)][t] = row["time_s"]
    out = {}
    for (task, n), times in by.items():
        if len(times) >= 2 and (task not in out or n > out[task][0]):
            out[task] = (n, sorted(times.items()))
    return out


def plot_threads(scaling, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.2, 4.2))
    top = 1
    for task in [t for t in TASK_TITLES if t in scaling]:
        n, pts = scaling[task]
        ts, times = zip(*pts)
        base = dict(pts).get(1, times[0] * ts[0])
        ax.plot(ts, [base / x for x in times], marker="o",
                label=f"{TASK_TITLES[task]}, N={n:,}")
        top = max(top, max(ts))
    ax.plot([1, top], [1, top], color="grey", linestyle="--", linewidth=1, label="ideal")
    ax.set_xlabel("threads")
    ax.set_ylabel("speed-up over 1 thread")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def fmt_time(s):
    if s >= 1.0:
        return f"{s:.2f} s"
    if s >= 1e-3:
        return f"{s * 1e3:.1f} ms"
    return f"{s * 1e6:.0f} µs"


def fmt_bytes(b):
    if b >= 1 << 30:
        return f"{b / (1 << 30):.2f} GiB"
    if b >= 1 << 20:
        return f"{b / (1 << 20):.0f} MiB"
    return f"{b / 1024:.0f} KiB"


def table(best, threads):
    """An RST list-table: fastkern against scikit-learn, time and peak memory."""
    rows = []
    for task in TASK_TITLES:
        for n in sorted({k[2] for k in best if k[0] == task and k[3] == threads}):
            fk = best.get((task, "fastkern", n, threads))
            sk = best.get((task, "sklearn", n, threads))
            if fk is None or sk is None:
                continue
            rows.append((TASK_TITLES[task], f"{n:,}", fmt_time(sk["time_s"]),
                         fmt_time(fk["time_s"]), f"{sk['time_s'] / fk['time_s']:.1f}x",
                         fmt_bytes(sk.get("peak_bytes") or 0),
                         fmt_bytes(fk.get("peak_bytes") or 0)))
    if not rows:
        return []
    head = ("task", "N", "scikit-learn", "fastkern", "speed-up", "scikit-learn memory",
            "fastkern memory")
    lines = [".. list-table::", "   :header-rows: 1", ""]
    for row in (head,) + tuple(rows):
        lines.append("   * - " + row[0])
        lines += [f"     - {cell}" for cell in row[1:]]
    return lines + [""]


def _figure(name, alt):
    return [f".. image:: /benchmarks/_generated/{name}", f"   :alt: {alt}", ""]


def build(data_dir, out_dir):
    """Write out_dir/results.rst and its figures from the saved runs in data_dir."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("*.png"):
        old.unlink()
    runs = load(data_dir)
    hosts = defaultdict(list)
    for run in runs:
        hosts[host_key(run)].append(run)
    lines = []
    if not runs:
        lines += ["No saved results are in ``docs/benchmarks/data`` yet.", ""]
    for h, (key, host_runs) in enumerate(hosts.items()):
        title = host_runs[0]["host"].get("cpu") or key
        lines += [title, "-" * len(title), "", describe(host_runs), ""]
        best = best_rows(host_runs)
        threads = default_threads(host_runs)
        d = host_runs[0].get("n_features")
        lines += ["Time against N", "^" * 14, ""]
        name = f"time_vs_n_{h}.png"
        if plot_against_n(best, threads, "time_s", "time (s)", out_dir / name,
                          f"time against N, d={d}, {threads} threads"):
            lines += [f"Each implementation at {threads} threads, d = {d}.", ""]
            lines += _figure(name, "time against N for each implementation")
            lines += table(best, threads)
        else:
            lines += ["No time-against-N results are saved for this machine.", ""]
        lines += ["Thread scaling", "^" * 14, ""]
        scaling = thread_scaling(best)
        if scaling:
            name = f"threads_{h}.png"
            plot_threads(scaling, out_dir / name, "fastkern: speed-up against threads")
            lines += _figure(name, "speed-up against the number of threads")
        else:
            lines += ["No thread-scaling results are saved for this machine (runs of "
                      "``fastkern bench --threads T`` for several T; see `Reproducing`_).", ""]
        lines += ["Memory", "^" * 6, ""]
        name = f"memory_{h}.png"
        if plot_against_n(best, threads, "peak_bytes", "peak memory (MiB)", out_dir / name,
                          "peak memory during one call", scale=2 ** 20):
            lines += ["The rise of the process's peak resident memory during one call, "
                      "in a fresh process per measurement.  An N x N float64 Gram takes "
                      "8 N² bytes (488 MiB at N = 8000).  A rise of 0 cannot be "
                      "drawn on these log axes; the table above has every value.", ""]
            lines += _figure(name, "peak memory against N for each implementation")
        else:
            lines += ["No memory results are saved for this machine.", ""]
    (out_dir / "results.rst").write_text("\n".join(lines), encoding="utf-8")
    return out_dir / "results.rst"


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    data = Path(sys.argv[1]) if len(sys.argv) > 1 else here / "data"
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else here / "_generated"
    print(build(data, out))
