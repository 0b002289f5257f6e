"""Draw the benchmarks page's plots and tables from the saved results.

Run by docs/conf.py at every build (no benchmark is run then), or by hand:
``python docs/benchmarks/make_plots.py [DATA_DIR [OUT_DIR]]`` (with fastkern
importable: the cells' units are fastkern.cli._table's).  ``make_plots.py
--readme`` redraws README's figure, docs/bench.png, from the saved
``benchmarks/bench_time_vs_n.py`` run that reaches the largest N (readme_run).

Input: every ``*.json`` file in DATA_DIR, each the output of ``fastkern bench
--json FILE`` (see docs/benchmarks.rst, "Format of the saved results"), with
an optional ``"host"`` object naming the machine, or of one of the scripts
benchmarks/bench_{sizes,busy,gridsearch,threads,time_vs_n}.py (a document
with a ``"benchmark"`` field, see benchmarks/_standalone.py).  Output, in OUT_DIR:
``results.rst`` (included by docs/benchmarks.rst) and the PNG files it shows.
Missing series are skipped with a sentence saying so, so a data directory with
only some of the results still builds.
"""
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

from fastkern.cli._table import fmt_bytes, fmt_ratio, fmt_time

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
        if "benchmark" in doc:  # a stand-alone script's document: load_scripts
            continue
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
    by_commit = defaultdict(list)
    for r in runs:
        if r["host"].get("commit"):
            by_commit[r["host"]["commit"]].append(r["name"])
    if len(by_commit) == 1:
        text += f" Measured on fastkern's commit ``{next(iter(by_commit))}``."
    elif by_commit:
        # Runs saved at different times: each file names its own commit.
        text += " Measured on fastkern's commits " + "; ".join(
            f"``{commit}`` ({', '.join(f'``{name}.json``' for name in names)})"
            for commit, names in by_commit.items()) + "."
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


def _spaced(sizes, min_ratio=None):
    """The sizes to label on a log axis: labels of sizes closer than min_ratio overlap
    (default: at least 1.5, and about six labels over the whole span)."""
    if min_ratio is None and sizes:
        min_ratio = max(1.5, (max(sizes) / min(sizes)) ** (1 / 6))
    kept = []
    for n in sizes:
        if not kept or n >= kept[-1] * min_ratio:
            kept.append(n)
    return kept


def plot_against_n(best, threads, field, ylabel, path, title, scale=1.0):
    """Log-log plot of `field` against N, a panel per task, a line per implementation."""
    import matplotlib.ticker

    plt = _pyplot()

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
        ax.set_xticks(_spaced(sizes), [f"{n:,}" for n in _spaced(sizes)])
        ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
        ax.set_title(TASK_TITLES[task])
        ax.set_xlabel("N (samples)")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    _save(fig, path)
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


def plot_threads(curves, path, title):
    """Speed-up over 1 thread against threads: curves is [(label, [(threads, time)])],
    each sorted by threads (without 1 thread: as if it scaled perfectly up to the first)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.2, 4.2))
    top = 1
    for label, pts in curves:
        ts, times = zip(*pts)
        base = dict(pts).get(1, times[0] * ts[0])
        ax.plot(ts, [base / x for x in times], marker="o", label=label)
        top = max(top, max(ts))
    ax.plot([1, top], [1, top], color="grey", linestyle="--", linewidth=1, label="ideal")
    ax.set_xlabel("threads")
    ax.set_ylabel("speed-up over 1 thread")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    _save(fig, path)


def table(best, threads):
    """An RST list-table: fastkern against scikit-learn, time and peak memory."""
    rows = []
    for task in TASK_TITLES:
        for n in sorted({k[2] for k in best if k[0] == task and k[3] == threads}):
            fk = best.get((task, "fastkern", n, threads))
            sk = best.get((task, "sklearn", n, threads))
            if fk is None or sk is None:
                continue
            rows.append((TASK_TITLES[task], f"{n:,}", _time(sk["time_s"]),
                         _time(fk["time_s"]), fmt_ratio(sk["time_s"] / fk["time_s"], ".1f"),
                         fmt_bytes(sk.get("peak_bytes") or 0),
                         fmt_bytes(fk.get("peak_bytes") or 0)))
    return _list_table(("task", "N", "scikit-learn", "fastkern", "speed-up",
                        "scikit-learn memory", "fastkern memory"), rows)


def _figure(name, alt):
    return [f".. image:: /benchmarks/_generated/{name}", f"   :alt: {alt}", ""]


# ---------------------------------------------------------------- the stand-alone scripts

SCRIPTS = ("time_vs_n", "threads", "sizes", "busy", "gridsearch", "kernlab")
SCRIPT_TASKS = {"kpca": "KernelPCA", "ridge": "KernelRidge", "rbf": "rbf_kernel",
                "gram": "RBF Gram into out=", "matfree": "matrix-free KernelPCA, fixed iterations",
                "product": "KernelPCA's block product (8 columns)",
                "kcca": "KernelCCA", "inchol": "incomplete Cholesky",
                "kpca_pipeline": "KernelPCA + LogisticRegression",
                "kpca_auto": "eigen_solver='auto'", "kfda": "KernelFDA", "ksir": "KernelSIR",
                "nystroem": "Nystroem", "center": "center_gram", "mmd": "mmd_test",
                "hsic": "hsic_test", "kpca_nystrom": "KernelPCA, eigen_solver='nystrom'"}


def script_kind(doc):
    """The section a script's document belongs to: its benchmark, and for
    bench_threads.py with --large-n a section of its own (the long run is
    made apart from the short one, and the newer short run must not hide it)."""
    if doc["benchmark"] == "threads" and doc.get("settings", {}).get("large_n"):
        return "threads_large_n"
    return doc["benchmark"]


def load_scripts(data_dir):
    """machine -> section kind -> its latest saved document (benchmarks/bench_*.py scripts)."""
    out = defaultdict(dict)
    for path in sorted(Path(data_dir).glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("benchmark") not in SCRIPTS:
            continue
        doc["name"] = path.stem
        cpu = doc.get("host", {}).get("cpu") or "unnamed CPU"
        key = f"{cpu}, {doc.get('machine', {}).get('cores', '?')} cores"
        kind = script_kind(doc)
        old = out[key].get(kind)
        if old is None or doc.get("created", "") > old.get("created", ""):
            out[key][kind] = doc
    return out


def describe_scripts(docs):
    """The machine paragraph of a section drawn from the scripts' documents."""
    first = next(iter(docs.values()))
    runs = [{"name": d["name"], "machine": d.get("machine", {}),
             "host": {k: v for k, v in d.get("host", {}).items() if k != "notes"}}
            for d in docs.values()]
    text = describe(runs).rsplit(" Saved results:", 1)[0]
    m = first.get("machine", {})
    if m.get("sklearn"):
        text = text.replace(f"SciPy {m.get('scipy', '?')}.",
                            f"SciPy {m.get('scipy', '?')}, scikit-learn {m['sklearn']}.", 1)
    files = ", ".join(f"``{d['name']}.json`` (``{d.get('command', '?')}``, "
                      f"{d.get('created', '?')[:10]})" for d in docs.values())
    text += f" Saved results: {files}."
    if any(d.get("quick") for d in docs.values()):
        text += (" **Some of these are --quick documents: a smoke run at tiny sizes, "
                 "not a measurement.**")
    return text


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path):
    """Lay out, write (100 dpi) and close a figure."""
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    _pyplot().close(fig)


def _list_table(head, rows):
    if not rows:
        return []
    lines = [".. list-table::", "   :header-rows: 1", ""]
    for row in (tuple(head),) + tuple(tuple(r) for r in rows):
        # A cell of "-" alone would be read as a nested bullet list.
        row = ["\u2014" if str(cell) == "-" else cell for cell in row]
        lines.append("   * - " + str(row[0]))
        lines += [f"     - {cell}" for cell in row[1:]]
    return lines + [""]


def _notes(doc):
    return [f"* {n}" for n in doc.get("notes", [])] + ([""] if doc.get("notes") else [])


def _time(s):
    """A time, or "-" for a call that failed (time None)."""
    return fmt_time(s, micro="µs")


def _time_vs_n_best(doc):
    """(task, impl, n, None) -> the fastest row of a bench_time_vs_n.py document."""
    best = {}
    for row in doc["results"]:
        if row["time_s"] is None:
            continue
        key = (row["task"], row["impl"], row["n"], None)
        if key not in best or row["time_s"] < best[key]["time_s"]:
            best[key] = row
    return best


def _plot_time_vs_n(doc, path):
    d = doc.get("settings", {}).get("d")
    return plot_against_n(_time_vs_n_best(doc), None, "time_s", "time (s)", path,
                          f"time against N, d={d}, default threads")


def readme_run(data_dir):
    """The bench_time_vs_n.py run README's figure shows: of each machine's latest,
    the one reaching the largest N (README's figure spans 200 to 200,000 rows),
    the newest among equals."""
    runs = [docs["time_vs_n"] for docs in load_scripts(data_dir).values()
            if "time_vs_n" in docs and docs["time_vs_n"].get("results")]
    if not runs:
        raise ValueError(f"no time-against-N results of bench_time_vs_n.py in {data_dir}")
    return max(runs, key=lambda d: (max(r["n"] for r in d["results"]), d.get("created", "")))


def readme_figure(data_dir, path):
    """README's figure, drawn from readme_run's document into path; returns the document."""
    doc = readme_run(data_dir)
    if not _plot_time_vs_n(doc, Path(path)):
        raise ValueError(f"{doc['name']}.json has no series to draw")
    return doc


def section_time_vs_n(doc, out_dir, h):
    best = _time_vs_n_best(doc)
    name = f"time_vs_n_scripts_{h}.png"
    d = doc.get("settings", {}).get("d")
    if not _plot_time_vs_n(doc, out_dir / name):
        return ["No time-against-N results are in the saved document.", ""]
    lines = [f"``{doc['command']}``: each library's faster setting at each N, d = {d}, "
             "default thread counts (fastkern's solver in the table).", ""]
    lines += _figure(name, "time against N, fastkern and scikit-learn, log-log")
    rows = []
    for task in ("kpca", "ridge"):
        for n in sorted({k[2] for k in best if k[0] == task}):
            fk, sk = best.get((task, "fastkern", n, None)), best.get((task, "sklearn", n, None))
            rows.append((SCRIPT_TASKS[task], f"{n:,}", _time(sk["time_s"]) if sk else "-",
                         _time(fk["time_s"]) if fk else "-", fk["solver"] if fk else "-",
                         fmt_ratio(sk["time_s"] / fk["time_s"]) if fk and sk else "-"))
    lines += _list_table(("task", "N", "scikit-learn", "fastkern", "fastkern's solver",
                          "speed-up"), rows)
    return lines + _notes(doc)


def _iterations(row):
    """A stage split's iterations, and their mean time when the run saved it."""
    text = f"{row['iterations']} iterations"
    if row.get("iteration_s"):
        text += f", {_time(row['iteration_s'])} each after the first"
    return text


def section_threads(doc, out_dir, h):
    kind = script_kind(doc)
    results = doc["results"]
    if kind == "threads_large_n":
        # Its Gram and KernelPCA rows repeat the short run's section.
        results = [r for r in results if r["task"].startswith("matfree")]
    by = defaultdict(list)
    for row in results:
        if row["time_s"] is not None:
            by[(row["task"], row["n"])].append((row["threads"], row["time_s"]))
    if not by:
        return ["No thread-scaling results are in the saved document.", ""]
    name = f"{kind}_scripts_{h}.png"
    # A task timed at one thread count (--threads with one count) has no curve: the table has it.
    plot_threads([(f"{SCRIPT_TASKS.get(task, task)}, N={n:,}", sorted(pts))
                  for (task, n), pts in sorted(by.items()) if len(pts) >= 2],
                 out_dir / name, "fastkern: speed-up against threads")
    lines = [f"``{doc['command']}``: each thread count with BLAS held to the same count; "
             "the speed-up is the 1-thread time over the T-thread time.", ""]
    lines += _figure(name, "speed-up against the number of threads")
    head = ("task", "N", "threads", "time", "speed-up")
    rows = [(SCRIPT_TASKS.get(r["task"], r["task"]), f"{r['n']:,}", r["threads"],
             _time(r["time_s"]), fmt_ratio(r["speedup"])) for r in results]
    if any(r.get("stages_s") for r in results):
        # KernelPCA's extra fit per thread count, stage by stage.
        head += ("stages of one more fit",)
        rows = [row + ("; ".join(f"{name} {_time(v)}" for name, v in r["stages_s"].items())
                       + f" ({_iterations(r)})" if r.get("stages_s") else "-",)
                for row, r in zip(rows, results)]
    lines += _list_table(head, rows)
    return lines + _notes(doc)


def section_sizes(doc, out_dir, h):
    rows = doc["results"]
    tasks = [t for t in ("kpca", "ridge", "rbf", "kpca_auto")
             if any(r["task"] == t for r in rows)]
    if not tasks:
        return ["No results are in the saved document.", ""]
    targets = doc.get("settings", {}).get("targets", {})
    plt = _pyplot()
    fig, axes = _axes_grid(plt, len(tasks))
    for ax, task in zip(axes, tasks):
        series = defaultdict(list)
        for r in rows:
            if r["task"] == task and r["ratio"] is not None:
                series[(r["d"], r["spectrum"])].append((r["n"], r["ratio"]))
        dims = sorted({d for d, _ in series})
        for (d, spectrum), pts in sorted(series.items()):
            ns, vs = zip(*sorted(pts))
            # One colour per d, solid for the steep spectrum, dashed for the flat one.
            ax.plot(ns, vs, marker="o", linestyle="-" if spectrum == "steep" else "--",
                    color=f"C{dims.index(d)}", label=f"d={d}, {spectrum}")
        if task == "kpca_auto":
            ax.axhline(targets.get("auto_max", 1.2), color="tab:red", linewidth=1,
                       label="target")
            ax.set_ylabel("auto time / fastest solver's")
        else:
            ax.axhline(targets.get("ratio_min", 2.0), color="tab:red", linewidth=1,
                       label="target")
            ax.axhline(1.0, color="grey", linewidth=1)
            ax.set_ylabel("scikit-learn time / fastkern time")
        ax.set_xscale("log")
        ax.set_yscale("log")
        sizes = sorted({r["n"] for r in rows if r["task"] == task})
        ax.set_xticks(_spaced(sizes), [f"{n:,}" for n in _spaced(sizes)])
        ax.minorticks_off()
        _ratio_ticks(ax)
        ax.set_title(SCRIPT_TASKS[task])
        ax.set_xlabel("N (samples)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    name = f"sizes_{h}.png"
    _save(fig, out_dir / name)
    lines = [f"``{doc['command']}``: fastkern (default threads) against scikit-learn's faster "
             "setting, side by side, for a steep (gamma = 1/d) and a flat (gamma = 0.5) "
             "spectrum; and KernelPCA's eigen_solver='auto' against the fastest explicit "
             "solver.  Above the grey line fastkern is faster; the red lines are the "
             "targets.", ""]
    lines += _figure(name, "speed-up over scikit-learn against N, and auto's cost")
    table_rows = []
    for task in tasks:
        for n in sorted({r["n"] for r in rows if r["task"] == task}):
            cell = [r for r in rows if r["task"] == task and r["n"] == n
                    and r["ratio"] is not None]
            failed = sum(1 for r in rows if r["task"] == task and r["n"] == n
                         and r["ratio"] is None)
            if not cell:
                table_rows.append((SCRIPT_TASKS[task], f"{n:,}", "failed", "failed"))
                continue
            lo = min(cell, key=lambda r: r["ratio"])
            hi = max(cell, key=lambda r: r["ratio"])
            table_rows.append((SCRIPT_TASKS[task], f"{n:,}",
                               f"{fmt_ratio(lo['ratio'])} (d={lo['d']}, {lo['spectrum']})",
                               f"{fmt_ratio(hi['ratio'])} (d={hi['d']}, {hi['spectrum']})"
                               + (f"; {failed} failed" if failed else "")))
    lines += _list_table(("task", "N", "lowest ratio", "highest ratio"), table_rows)
    return lines + _notes(doc)


def _ratio_ticks(ax):
    """Plain numbers on a log axis of ratios, enough of them on one that spans little."""
    import matplotlib.ticker

    low, high = ax.get_ylim()
    subs = (1.0, 2.0, 5.0) if high / low >= 4 else (1.0, 1.2, 1.5, 2.0, 3.0, 4.0, 5.0,
                                                     6.0, 7.0, 8.0, 9.0)
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=subs))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def _bars(ax, labels, groups, target, ylabel):
    width = 0.8 / max(1, len(groups))
    for i, (label, values) in enumerate(groups.items()):
        xs = [j + (i - (len(groups) - 1) / 2) * width for j in range(len(labels))]
        ax.bar(xs, [v if v is not None else 0 for v in values], width, label=label)
        for x, v in zip(xs, values):
            if v is None:
                ax.text(x, 0.03, "none", rotation=90, ha="center", va="bottom", fontsize=7,
                        transform=ax.get_xaxis_transform())
    ax.axhline(target, color="tab:red", linewidth=1, label="target")
    ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=8)


def section_busy(doc, out_dir, h):
    rows = doc["results"]
    if not rows:
        return ["No results are in the saved document.", ""]
    targets = doc.get("settings", {}).get("targets", {})
    cells = sorted({(r["task"], r["n"]) for r in rows},
                   key=lambda c: ([r["task"] for r in rows].index(c[0]), c[1]))
    labels = [f"{SCRIPT_TASKS.get(t, t)}\nN={n:,}" for t, n in cells]
    conditions = [c for c in ("idle", "busy") if any(r["condition"] == c for r in rows)]

    def values(condition, field):
        look = {(r["task"], r["n"]): r[field] for r in rows if r["condition"] == condition}
        return [look.get(c) for c in cells]

    plt = _pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    _bars(axes[0], labels, {c: values(c, "default_over_one") for c in conditions},
          targets.get("default_over_one_max", 1.2), "default threads / n_threads=1 (time)")
    axes[0].set_title("cost of the default thread count")
    _bars(axes[1], labels, {c: values(c, "peer_over_default") for c in conditions},
          targets.get("peer_over_default_min", 1.5), "peer time / fastkern time")
    peers = sorted({r["peer"] for r in rows if r.get("peer")},
                   key=lambda p: (p != "scikit-learn", p))
    axes[1].set_title(f"speed-up over the peer ({', '.join(peers) or 'none'})")
    for ax in axes:
        ax.set_yscale("log")
        _ratio_ticks(ax)
    name = f"busy_{h}.png"
    _save(fig, out_dir / name)
    count = doc.get("settings", {}).get("competitors", "?")
    lines = [f"``{doc['command']}``: busy, {count} single-threaded CPU-bound competitor "
             "processes (one per core) run throughout; idle, none.  Left: fastkern's default "
             "thread count against ``n_threads=1``, fastest calls (below the red line is "
             "the target, which the table's paired ratio has too: the geometric mean of "
             "each round's default / one-thread time; medians for reference; load read: "
             "other processes' runnable threads that fastkern's reading found (readings)); "
             "right: the peer's time over fastkern's default (above the red line).", ""]
    lines += _figure(name, "busy and idle machine: thread cost and speed-up")
    table_rows = [(r["condition"], SCRIPT_TASKS.get(r["task"], r["task"]), f"{r['n']:,}",
                   _time(r["default_s"]), _time(r["one_thread_s"]), r["peer"] or "-",
                   _time(r["peer_s"]),
                   fmt_ratio(r["default_over_one"]),
                   fmt_ratio(r.get("paired_default_over_one")),
                   fmt_ratio(r.get("median_default_over_one")),
                   ", ".join(f"{k} ({v})" for k, v in r.get("others_running_read", {}).items())
                   or "-",
                   fmt_ratio(r["peer_over_default"]))
                  for r in rows]
    lines += _list_table(("machine", "task", "N", "default threads", "n_threads=1", "peer",
                          "peer time", "default / one", "paired", "medians", "load read",
                          "peer / default"),
                         table_rows)
    return lines + _notes(doc)


def section_gridsearch(doc, out_dir, h):
    grid = [r for r in doc["results"] if r["part"] == "grid"]
    over = [r for r in doc["results"] if r["part"] == "oversubscription"]
    if not grid and not over:
        return ["No results are in the saved document.", ""]
    targets = doc.get("settings", {}).get("targets", {})
    plt = _pyplot()
    panels = [p for p in (grid, over) if p]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4.2), squeeze=False)
    axes = list(axes.flat)
    k = 0
    if grid:
        _bars(axes[k], [f"{SCRIPT_TASKS.get(r['task'], r['task'])}\nN={r['n']:,}" for r in grid],
              {"scikit-learn / fastkern": [r["ratio"] for r in grid]},
              targets.get("grid_ratio_min", 1.5), "time ratio")
        axes[k].set_title("GridSearchCV(n_jobs=-1)")
        k += 1
    if over:
        _bars(axes[k], [f"{SCRIPT_TASKS.get(r['task'], r['task'])}\nN={r['n']:,}" for r in over],
              {"OMP_NUM_THREADS=4x cores / default": [r["ratio"] for r in over]},
              targets.get("oversub_ratio_max", 1.5), "time ratio")
        axes[k].set_title("oversubscribed OMP_NUM_THREADS")
    name = f"gridsearch_{h}.png"
    _save(fig, out_dir / name)
    lines = [f"``{doc['command']}``: the same 3 x 3 grid, cv = 3, over fastkern's estimator "
             "and over scikit-learn's; and fastkern with ``OMP_NUM_THREADS`` at four times "
             "the cores against its default, each in a child process.", ""]
    lines += _figure(name, "grid search speed-up and the cost of an oversubscribed "
                           "OMP_NUM_THREADS")
    lines += _list_table(("estimator", "N", "scikit-learn", "fastkern", "speed-up"), [
        (SCRIPT_TASKS.get(r["task"], r["task"]), f"{r['n']:,}", _time(r["sklearn_s"]),
         _time(r["fastkern_s"]), fmt_ratio(r["ratio"])) for r in grid])
    lines += _list_table(("task", "N", "default", "OMP_NUM_THREADS", "oversubscribed",
                          "ratio"), [
        (SCRIPT_TASKS.get(r["task"], r["task"]), f"{r['n']:,}", _time(r["default_s"]),
         r["omp_num_threads"], _time(r["oversubscribed_s"]), fmt_ratio(r["ratio"]))
        for r in over])
    return lines + _notes(doc)


def section_kernlab(doc, out_dir, h):
    rows = doc["results"]
    if not rows:
        return ["No results are in the saved document.", ""]
    target = doc.get("settings", {}).get("target_ratio_min")
    lines = [f"``{doc['command']}``: R's kernlab ``stringdot`` against fastkern's "
             f"``stringdot`` on the same random DNA strings (the Gram of each set), "
             f"{doc.get('settings', {}).get('kernel', '')}."
             + (f"  Target: at least {target:g}x." if target else ""), ""]
    lines += _list_table(("kernel", "strings x length", "kernlab", "fastkern", "speed-up",
                          "slowest calls (kernlab / fastkern)"), [
        (r["type"], r.get("case") or f"{r['n_strings']} x {r['length']:,}",
         _time(r["kernlab_s"]), _time(r["fastkern_s"]),
         fmt_ratio(r["ratio"]), f"{_time(r['kernlab_slowest_s'])} / "
                                f"{_time(r['fastkern_slowest_s'])}") for r in rows])
    return lines + _notes(doc)


SECTIONS = (
    ("time_vs_n", "Time against N", section_time_vs_n),
    ("threads", "Thread scaling", section_threads),
    ("threads_large_n", "Thread scaling of the matrix-free solver", section_threads),
    ("sizes", "Against scikit-learn at every size", section_sizes),
    ("busy", "A busy machine", section_busy),
    ("gridsearch", "Parallel grid searches", section_gridsearch),
    ("kernlab", "String kernels against kernlab", section_kernlab),
)

# The command of a section kind that is not one script's default run.
SCRIPT_COMMANDS = {"threads_large_n": "python benchmarks/bench_threads.py --large-n"}


def build_scripts(data_dir, out_dir, first_index):
    """The sections drawn from the scripts' documents, one per machine."""
    lines = []
    for h, (key, docs) in enumerate(load_scripts(data_dir).items(), start=first_index):
        lines += [key, "-" * len(key), "", describe_scripts(docs), ""]
        for kind, heading, draw in SECTIONS:
            lines += [heading, "^" * len(heading), ""]
            if kind in docs:
                lines += draw(docs[kind], out_dir, h)
            else:
                command = SCRIPT_COMMANDS.get(kind, f"python benchmarks/bench_{kind}.py")
                lines += [f"No results of ``{command}`` are saved for this machine.", ""]
    return lines


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
    # The scripts' sections first: they are the newer runs, and a reader takes
    # the first plots on the page for the current ones.
    lines = build_scripts(data_dir, out_dir, len(hosts))
    if not runs and not lines:
        lines += ["No saved results are in ``docs/benchmarks/data`` yet.", ""]
    for h, (key, host_runs) in enumerate(hosts.items()):
        title = f"{host_runs[0]['host'].get('cpu') or key}: fastkern bench --full"
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
            plot_threads([(f"{TASK_TITLES[t]}, N={scaling[t][0]:,}", scaling[t][1])
                          for t in TASK_TITLES if t in scaling],
                         out_dir / name, "fastkern: speed-up against threads")
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
    if sys.argv[1:2] == ["--readme"]:
        # README's figure, docs/bench.png, redrawn after a new time-against-N run.
        print(readme_figure(here / "data", here.parent / "bench.png")["name"])
        sys.exit()
    data = Path(sys.argv[1]) if len(sys.argv) > 1 else here / "data"
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else here / "_generated"
    print(build(data, out))
