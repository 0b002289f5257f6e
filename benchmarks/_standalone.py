"""Shared by the stand-alone benchmark scripts of issue 22 (bench_sizes, bench_busy,
bench_gridsearch, bench_threads, bench_time_vs_n): the machine's description,
interleaved timing, the printed table and the saved JSON.

Each script runs in one command (``python benchmarks/bench_X.py``), prints a
table and saves a JSON document that docs/benchmarks/make_plots.py reads:

    {"benchmark": "sizes" | "busy" | "gridsearch" | "threads" | "time_vs_n",
     "format": 1, "quick": false, "command": "...", "created": "2026-...Z",
     "host": {"cpu": ..., "memory": ..., "commit": ...},
     "machine": {versions, cores, fastkern's threads, "blas": threadpoolctl's entries,
                 "steadiness": {"start": ..., "end": ...}, ...},
     "settings": {...}, "results": [one dict per measurement], "notes": [...]}

The scripts import this module as ``_standalone``: run as scripts, their
folder is sys.path[0]; under pytest, benchmarks/conftest.py puts it there.
"""
import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

# fmt_time and fmt_ratio: the scripts' S.fmt_time, S.fmt_ratio.
from fastkern.cli._table import fmt_ratio, fmt_time, text_table  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "docs" / "benchmarks" / "data"
FORMAT = 1


# ---------------------------------------------------------------- the machine


def cpu_model():
    """The CPU's model name (/proc/cpuinfo), else what platform knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _meminfo_bytes(key):
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def memory_available():
    """Bytes the kernel says a new allocation can take (MemAvailable), None if unknown."""
    return _meminfo_bytes("MemAvailable")


def usable_cpus():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def git_commit():
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        if out.returncode != 0:
            return None
        commit = out.stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "diff", "--quiet", "HEAD", "--",
                                "fastkern"], capture_output=True, timeout=10)
        return commit + ("+modified" if dirty.returncode == 1 else "")
    except (OSError, subprocess.SubprocessError):
        return None


def host():
    total = _meminfo_bytes("MemTotal")
    out = {"cpu": cpu_model(), "commit": git_commit()}
    if total:
        out["memory"] = f"{total / 2 ** 30:.0f} GiB"
    return out


def machine():
    """Versions, cores, fastkern's thread count and wait policy, and every thread pool
    threadpoolctl sees (BLAS and OpenMP runtimes), as loaded when this is called."""
    import scipy
    import sklearn
    import threadpoolctl

    import fastkern

    info = fastkern.config_info()
    pools = threadpoolctl.threadpool_info()
    keep = ("internal_api", "version", "num_threads", "architecture", "threading_layer",
            "filepath")
    info.update(
        sklearn=sklearn.__version__, threadpoolctl=threadpoolctl.__version__,
        scipy=scipy.__version__, numpy=np.__version__, platform=platform.platform(),
        usable_cpus=usable_cpus(), n_threads=info.get("threads"),
        blas=[{k: p.get(k) for k in keep if k in p} for p in pools if p["user_api"] == "blas"],
        openmp_runtimes=[{k: p.get(k) for k in keep if k in p} for p in pools
                         if p["user_api"] == "openmp"],
        environment={k: v for k, v in os.environ.items()
                     if re.match(r"^(OMP_|OPENBLAS_|MKL_|GOMP_|KMP_|BLIS_)", k)})
    info["blas"] = [dict(b, filepath=os.path.basename(b.get("filepath") or ""))
                    for b in info["blas"]]
    info["openmp_runtimes"] = [dict(b, filepath=os.path.basename(b.get("filepath") or ""))
                               for b in info["openmp_runtimes"]]
    return info


def describe(info):
    blas = "; ".join(f"{b.get('internal_api')} {b.get('version')} ({b.get('num_threads')} threads, "
                     f"{b.get('architecture', '?')})" for b in info["blas"]) or "not detected"
    return (f"{cpu_model()}; {info['cores']} cores ({info['usable_cpus']} usable); fastkern "
            f"{info['fastkern']} with {info['n_threads']} threads, idle OpenMP threads: "
            f"{info.get('wait_policy', '?')}\nBLAS: {blas}\nPython {info['python']}, NumPy "
            f"{info['numpy']}, SciPy {info['scipy']}, scikit-learn {info['sklearn']}")


# steadiness: how long a fixed unit of pure-Python work is timed back to back,
# and how much longer than its fastest time a unit must take to count as a pause.
STEADY_S = 1.0
PAUSE_S = 0.05


def _unit_of_work():
    return sum(range(200_000))


def steadiness(seconds=None, clock=time.perf_counter):
    """How steadily this process held a core: a fixed unit of pure-Python work (a few
    milliseconds) timed back to back for `seconds` (None: STEADY_S), at least 10 times.

    A host that stalls the process (a VM descheduled by its hypervisor; seen on
    the 2-core development VM: pauses of 20-600 ms, several a second, for whole
    sessions) makes the times of that moment meaningless, and the process's
    CPU time goes on counting through a pause, so only wall time shows it.
    Returns {"unit_ms": the fastest unit, "p90_ms", "longest_ms", "pauses":
    units that took PAUSE_S longer than the fastest, "pause_ms": PAUSE_S in ms,
    "seconds": how long it ran}.
    """
    if seconds is None:
        seconds = STEADY_S
    times = []
    start = clock()
    while True:
        t0 = clock()
        _unit_of_work()
        t1 = clock()
        times.append(t1 - t0)
        if t1 - start >= seconds and len(times) >= 10:
            break
    times.sort()
    fastest = times[0]
    return {"unit_ms": round(fastest * 1e3, 3),
            "p90_ms": round(times[int(0.9 * (len(times) - 1))] * 1e3, 3),
            "longest_ms": round(times[-1] * 1e3, 3),
            "pauses": sum(t - fastest > PAUSE_S for t in times),
            "pause_ms": PAUSE_S * 1e3, "seconds": round(t1 - start, 3)}


def is_steady(gauge):
    """No pause, and the 90th percentile unit within 1.5x of the fastest."""
    return gauge["pauses"] == 0 and gauge["p90_ms"] <= 1.5 * gauge["unit_ms"]


def steadiness_text(gauge):
    return (f"a {gauge['unit_ms']:.3g} ms unit: 90th percentile {gauge['p90_ms']:.3g} ms, "
            f"longest {gauge['longest_ms']:.3g} ms, {gauge['pauses']} pauses over "
            f"{gauge['pause_ms']:.0f} ms in {gauge['seconds']:.2g} s")


def steadiness_note(gauges):
    """The saved run's note on the host's steadiness, which the benchmarks page shows
    with the other notes; a run with a pause says so in bold."""
    text = ("Host steadiness (a fixed unit of pure-Python work timed back to back): "
            + "; ".join(f"at the {when}, {steadiness_text(g)}" for when, g in gauges.items())
            + ".")
    if any(g["pauses"] for g in gauges.values()):
        text += (" **The host stalled the process during this run: its ratios are less "
                 "trustworthy than a steady run's.**")
    return text


def _record_steadiness(info, when):
    gauge = steadiness()
    info.setdefault("steadiness", {})[when] = gauge
    say(f"host steadiness at the {when}: {steadiness_text(gauge)}")
    if not is_steady(gauge):
        say("warning: the host did not run this process steadily; the times measured "
            "around now are not comparable with a steady run's (run again on a quiet machine)")


# ---------------------------------------------------------------- data


def make_data(n, d, seed=0):
    """(X, y): standard normal X (n x d, C-ordered float64), a smooth target y."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.standard_normal(n)
    return X, y


# ---------------------------------------------------------------- timing


# interleaved: how many times its budget a cell may run when calls stall.
STALL_BUDGETS = 5
# Rounds a contestant runs before interleaved's retire may drop it.
RETIRE_AFTER = 2

# How long "quiet" settling waits at most, and how often it looks.
QUIET_MAX_S = 0.3
QUIET_POLL_S = 0.002


def _others_running_here():
    """Threads of this process other than the calling one that are running now
    (a BLAS pool's idle workers spinning); 0 where /proc cannot tell."""
    from fastkern._threads import _own_running

    try:
        return len(_own_running() - {str(threading.get_native_id())})
    except OSError:
        return 0


def wait_until_quiet(max_s=QUIET_MAX_S):
    """Wait (at most max_s) until no other thread of this process runs: OpenBLAS's
    workers spin for tens of milliseconds after a threaded call (its
    THREAD_TIMEOUT), and on this VM a spinning thread slows the next call's
    own threads.  Returns the seconds waited."""
    start = time.perf_counter()
    while _others_running_here() and time.perf_counter() - start < max_s:
        time.sleep(QUIET_POLL_S)
    return time.perf_counter() - start


def interleaved(fns, *, budget=1.0, min_rounds=2, max_rounds=7, settle=0.0, deadline=None,
                retire=None, keep=()):
    """Fastest time of each named callable, the calls interleaved round by round.

    Two contestants: round r calls them in order, the next round in the
    reverse order (A B, B A, A B, ...), so each follows itself as often as it
    follows the other: a contestant's idle BLAS or OpenMP threads, still
    spinning after its call, or the memory its call freed, then slow the
    other no more than itself, and the fastest call of each is one that
    started on a quiet machine as far as the others go.  More contestants:
    the first round in the given order, each later one in an order drawn at
    random (seeded, the same every run), so that each follows every other
    about equally often; reversing one order would have each follow only
    its two neighbours in it (a grid's "auto" always after "dense").  Load
    from other processes hits every contestant alike.

    The first round is timed too.  The number of rounds is as many as fit in
    `budget` seconds at each contestant's fastest call so far (estimated again
    after every round), within [min_rounds, max_rounds]: a call stalled by the
    host (this VM pauses a process for tenths of a second, at worst several
    times a second) must not cut a cell to min_rounds, when more rounds are
    what finds its true time.  Beyond
    min_rounds, no round starts once the cell has run STALL_BUDGETS times its
    budget, or after `deadline` (a time.monotonic() value).

    settle: seconds slept before each call, or "quiet": wait until no other
    thread of this process runs (wait_until_quiet).  A peer's OpenBLAS
    workers spin on after its call; fastkern's OpenMP threads sleep.  So
    without it the calls right after a peer's start beside its spinning
    thread, and the peer's never beside fastkern's.

    A contestant that raises is not called again: its entry has time_s None
    and the error, and the others go on (one failing call must not lose a
    run of minutes).

    retire: from round RETIRE_AFTER on (whatever min_rounds asks of the
    others), a contestant not in ``keep`` whose fastest call is over
    ``retire`` times the fastest of all is not called again (its calls so far
    stand): where the question is which contestant is fastest,
    one that far behind cannot be, and the budget then buys the close ones
    more rounds.  Without it, a grid's slow solvers (a dense eigh at
    N = 2000) took most of each round and left the fastest two rounds.

    Returns {name: {"time_s": fastest, "rounds": calls, "median_s": median,
    "times_s": every call's time, in order}}: the k-th times of two
    contestants kept to the end were taken in the same round (paired_ratio).
    """
    names = list(fns)
    orders = np.random.default_rng(0)
    times = {name: [] for name in names}
    errors = {}

    retired = set()

    def one_round(order):
        for name in order:
            if name in errors or name in retired:
                continue
            if settle == "quiet":
                wait_until_quiet()
            elif settle:
                time.sleep(settle)
            t0 = time.perf_counter()
            try:
                fns[name]()
            except Exception as exc:  # recorded in the results, see the docstring
                errors[name] = f"{type(exc).__name__}: {exc}"
                say(f"  {name} failed: {errors[name]}")
                continue
            times[name].append(time.perf_counter() - t0)

    def rounds_wanted():
        per_round = sum(min(t) for name, t in times.items() if t and name not in retired)
        rounds = max_rounds if per_round <= 0 else int(budget // per_round)
        return max(min_rounds, min(max_rounds, rounds))

    def retire_the_slow():
        best = min((min(t) for t in times.values() if t), default=None)
        for name, t in times.items():
            if t and name not in keep and min(t) > retire * best:
                retired.add(name)

    start = time.monotonic()
    one_round(names)
    r = 1
    while True:
        if retire is not None and r >= RETIRE_AFTER:
            retire_the_slow()
        if not (r < rounds_wanted() and len(set(errors) | retired) < len(names)):
            break
        if r >= min_rounds and (time.monotonic() - start > STALL_BUDGETS * budget
                                or (deadline is not None and time.monotonic() > deadline)):
            break
        if len(names) <= 2:
            one_round(names if r % 2 == 0 else names[::-1])
        else:
            one_round([names[i] for i in orders.permutation(len(names))])
        r += 1
    out = {}
    for name, ts in times.items():
        if name in errors:
            out[name] = {"time_s": None, "rounds": len(ts), "median_s": None,
                         "error": errors[name], "times_s": ts}
        else:
            out[name] = {"time_s": min(ts), "rounds": len(ts), "median_s": float(np.median(ts)),
                         "times_s": ts}
    return out


def paired_ratio(numerators, denominators):
    """Geometric mean of numerators[k] / denominators[k], calls of the same round, with
    its 95% confidence interval: (mean, low, high), or None with fewer than 2 pairs.

    A pair's two calls ran a fraction of a second apart, so a change of the
    host's speed between rounds cancels in their ratio, and every call counts,
    the slow ones too.  The interval is the normal one on the log ratios.
    """
    k = min(len(numerators), len(denominators))
    if k < 2:
        return None
    logs = np.log(np.asarray(numerators[:k], float) / np.asarray(denominators[:k], float))
    half = 1.96 * logs.std(ddof=1) / np.sqrt(k)
    mean = logs.mean()
    return float(np.exp(mean)), float(np.exp(mean - half)), float(np.exp(mean + half))


def ratio(numerator, denominator):
    """numerator / denominator, None when either time is missing (a failed call)."""
    if numerator is None or denominator is None:
        return None
    return numerator / denominator


def errors_of(timings):
    """{name: error} of the contestants that failed, None when none did."""
    return {k: v["error"] for k, v in timings.items() if v.get("error")} or None


def begin():
    """What every script does before measuring: describe the machine, gauge its
    steadiness, then warm up.

    Returns machine()'s description, for save (which gauges the end)."""
    info = machine()
    say(describe(info))
    _record_steadiness(info, "start")
    warm_up()
    return info


def warm_up():
    """Load what every first call would otherwise pay for: lazy imports, OpenMP and BLAS pools."""
    import sklearn.decomposition
    import sklearn.kernel_ridge
    from sklearn.metrics.pairwise import rbf_kernel as sk_rbf

    import fastkern

    X, y = make_data(64, 4)
    fastkern.rbf_kernel(X)
    sk_rbf(X)
    fastkern.KernelPCA(2, kernel="rbf").fit_transform(X)
    sklearn.decomposition.KernelPCA(2, kernel="rbf").fit_transform(X)
    fastkern.KernelRidge(kernel="rbf").fit(X, y)
    sklearn.kernel_ridge.KernelRidge(kernel="rbf").fit(X, y)


# ---------------------------------------------------------------- output


def table(rows, columns):
    """A plain-text table: columns is [(header, function of a row -> str)]."""
    return text_table([h for h, _ in columns], [[f(row) for _, f in columns] for row in rows])


def parser(name, description):
    p = argparse.ArgumentParser(prog=f"benchmarks/bench_{name}.py", description=description,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true",
                   help="tiny sizes, under 30 s: a smoke run (saved to the temporary "
                        "directory unless --json is given)")
    p.add_argument("--json", metavar="PATH", type=Path,
                   help=f"where to save the results (default: docs/benchmarks/data/"
                        f"{name}-CPU-Ncore.json, or the temporary directory with --quick)")
    return p


def int_list(minimum, what="sizes"):
    """An argparse type: comma-separated integers, each at least `minimum`."""

    def parse(text):
        try:
            values = [int(s) for s in text.replace(" ", "").split(",") if s]
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected comma-separated integers, got {text!r}") from None
        if not values or min(values) < minimum:
            raise argparse.ArgumentTypeError(f"{what} must be integers >= {minimum}, "
                                             f"got {text!r}")
        return values

    return parse


sizes_arg = int_list(10)


def default_path(name, quick):
    if quick:
        return Path(tempfile.gettempdir()) / f"fastkern-bench-{name}-quick.json"
    slug = re.sub(r"[^a-z0-9]+", "-", cpu_model().lower()).strip("-") or "cpu"
    return DATA_DIR / f"{name}-{slug}-{os.cpu_count()}core.json"


def save(name, args, argv, settings, results, *, notes=(), info=None, **extra):
    """Write the JSON document (see the module docstring) and say where.

    argv: the script's arguments as main() got them (None: the command line's).
    Returns what the scripts' main() returns: {"results": results, "path": str}."""
    notes = list(notes)
    if info is not None and "start" in info.get("steadiness", {}):
        _record_steadiness(info, "end")
        notes.insert(0, steadiness_note(info["steadiness"]))
    for row in results:
        failed = row.get("errors") or ({"": row["error"]} if row.get("error") else None)
        if failed:
            where = " ".join(f"{k}={row[k]}" for k in ("task", "impl", "solver", "n", "d",
                                                         "spectrum", "condition", "threads")
                             if k in row)
            note = f"failed ({where}): " + "; ".join(f"{k} {v}".strip()
                                                     for k, v in failed.items())
            if note not in notes:
                notes.append(note)
    doc = {
        "benchmark": name, "format": FORMAT, "quick": bool(args.quick),
        "command": " ".join([f"python benchmarks/bench_{name}.py"]
                            + list(sys.argv[1:] if argv is None else argv)),
        "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": host(), "machine": info if info is not None else machine(),
        "settings": settings, "results": results, "notes": notes,
    }
    doc.update(extra)
    path = args.json if args.json is not None else default_path(name, args.quick)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, default=_jsonable) + "\n", encoding="utf-8")
    say(f"saved {path}")
    return {"results": results, "path": str(path)}


def _jsonable(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def say(*parts):
    print(*parts, flush=True)


# ---------------------------------------------------------------- under pytest


def pytest_run(benchmark, benchmark_only, tmp_path, main, missed):
    """Run a script's main() once as a pytest-benchmark test.

    Full size only under --benchmark-only with no FASTKERN_BENCH_QUICK /
    FASTKERN_BENCH_SCALE (a deliberate performance run), where the targets
    missed (missed(doc): a list of sentences) fail the test; otherwise the
    --quick sizes, targets recorded but not asserted.  Results go to tmp_path,
    never to docs/benchmarks/data.
    """
    import _harness

    full = benchmark_only and _harness.bench_scale() == 1
    argv = ["--json", str(tmp_path / "result.json")] + ([] if full else ["--quick"])
    doc = benchmark.pedantic(lambda: main(argv), rounds=1, iterations=1, warmup_rounds=0)
    misses = missed(doc)
    benchmark.extra_info.update(full_size=full, targets_missed=misses)
    assert doc["results"], "no measurement was made"
    if full:
        assert not misses, "\n".join(misses)
    return doc
