"""fastkern against R's kernlab on the same data: inchol, kernelMatrix, stringdot,
kcca and kmmd (skipped without Rscript and kernlab: apt-get install r-cran-kernlab).

kernlab runs in one Rscript process per case, timed inside R (ROUNDS calls
with ``system.time``, so R's start-up and the data loading are not counted);
fastkern runs the same call here, ROUNDS times.  The two sides alternate
(R, fastkern, R, fastkern) so that load from other processes hits both
alike.  The ratio of the fastest calls, kernlab / fastkern, is recorded in
extra_info with the slowest call of each side (how much load moved them);
kernlab is the reference for the values, which the tests check against
stored kernlab output.  stringdot has issue 22's target, asserted under
--benchmark-only at full size: at least 2x kernlab for every type at
lengths 500-3000.  FASTKERN_BENCH_QUICK=1 runs tiny sizes.
"""
import subprocess
import time

import numpy as np
import pytest

import fastkern
import _harness  # benchmarks/_harness/, on sys.path by conftest.py
from fastkern._testing import have_kernlab
from fastkern.structured import stringdot

ROUNDS = 3
GAMMA = 0.05
QUICK = _harness.bench_scale() < 0.1


pytestmark = pytest.mark.skipif(not have_kernlab(), reason="needs Rscript and kernlab")


def _kernlab_seconds(tmp_path, setup, call):
    """The ROUNDS timings of `call` in R after `setup` (both R code)."""
    script = tmp_path / "bench.R"
    script.write_text(
        "suppressMessages(library(kernlab))\n" + setup + "\n"
        f"t <- sapply(1:{ROUNDS}, function(i) system.time({call})[['elapsed']])\n"
        "cat(sprintf('%.6f\\n', t))\n")
    done = subprocess.run(["Rscript", str(script)], capture_output=True, text=True,
                          timeout=1800, check=True)
    return [float(v) for v in done.stdout.split()[-ROUNDS:]]


def _fastkern_seconds(fn):
    """The ROUNDS timings of fn here."""
    fn()  # imports and thread pools out of the timing
    times = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def _compare(benchmark, tmp_path, name, setup, call, ours):
    """Alternate kernlab and fastkern twice (once in QUICK mode, where only
    that the comparison runs matters: each Rscript start took seconds on a
    loaded machine), keep each side's fastest time (and the slowest, to show
    how much load from other processes moved them)."""
    r, f = [], []
    rounds = 1 if QUICK else 2
    for _ in range(rounds):
        r += _kernlab_seconds(tmp_path, setup, call)
        f += _fastkern_seconds(ours)
    benchmark.extra_info.update(kernlab_seconds=min(r), fastkern_seconds=min(f),
                                ratio=min(r) / min(f), kernlab_slowest=max(r),
                                fastkern_slowest=max(f),
                                note=f"kernlab / fastkern, fastest of {ROUNDS} calls, "
                                     f"{rounds} alternating round(s)")
    benchmark.pedantic(ours, rounds=1, iterations=1, warmup_rounds=0)
    return min(r) / min(f)


def _matrix_csv(tmp_path, name, X):
    path = tmp_path / f"{name}.csv"
    np.savetxt(path, X, delimiter=",", fmt="%.17g")
    return f"{name} <- as.matrix(read.csv('{path}', header = FALSE))"


# Issue 22: at least this much faster than inchol at rank 800.
INCHOL_TARGET = 4.0


@pytest.mark.parametrize("n, rank", [(5000, 200), (20000, 800)], ids=["rank200", "rank800"])
def test_inchol(benchmark, benchmark_only, tmp_path, n, rank):
    n = _harness.scaled(n)
    benchmark.group = f"kernlab inchol vs incomplete_cholesky N={n} d=16 rank <= {rank}"
    X = np.random.default_rng(0).standard_normal((n, 16))
    setup = _matrix_csv(tmp_path, "x", X)
    call = (f"inchol(x, kernel = 'rbfdot', kpar = list(sigma = {GAMMA}), tol = 1e-6, "
            f"maxiter = {rank})")
    ratio = _compare(benchmark, tmp_path, "inchol", setup, call,
                     lambda: fastkern.incomplete_cholesky(X, "rbf", gamma=GAMMA, tol=1e-6,
                                                          max_rank=rank))
    if benchmark_only and _harness.bench_scale() == 1 and rank == 800:
        assert ratio >= INCHOL_TARGET, f"incomplete_cholesky at rank 800: {ratio:.2f}x inchol"


def test_kernel_matrix(benchmark, tmp_path):
    n = _harness.scaled(2000)
    benchmark.group = f"kernlab kernelMatrix(rbfdot) vs rbf_kernel N={n} d=16"
    X = np.random.default_rng(1).standard_normal((n, 16))
    setup = _matrix_csv(tmp_path, "x", X)
    _compare(benchmark, tmp_path, "kernelMatrix", setup,
             f"kernelMatrix(rbfdot(sigma = {GAMMA}), x)",
             lambda: fastkern.rbf_kernel(X, gamma=GAMMA))


# kernlab's "sequence" is left out: its Gram of 4 strings of 500 characters
# took 5.5 s (48 s at 1000), too long to repeat here.
STRING_TYPES = ["spectrum", "boundrange", "constant", "exponential", "string", "fullstring"]
# A quick run scales every length to 20-30 characters, one case three times
# over (an Rscript start each): it runs the shortest alone.
STRING_LENGTHS = [500] if QUICK else [500, 1000, 3000]
# Strings per Gram, so that kernlab's Gram takes about 0.2-1.5 s (its
# "string" and "fullstring" types cost length^2: 60 ms a pair of 3000
# characters).
STRING_COUNTS = {"string": {500: 20, 1000: 12, 3000: 6},
                 "fullstring": {500: 20, 1000: 12, 3000: 6}}
STRING_COUNT = {500: 40, 1000: 30, 3000: 20}
# Issue 22: at least this much faster than stringdot, every type, length 500-3000.
STRING_TARGET = 2.0


@pytest.mark.parametrize("length", STRING_LENGTHS, ids=[f"len{L}" for L in STRING_LENGTHS])
@pytest.mark.parametrize("kind", STRING_TYPES)
def test_stringdot(benchmark, benchmark_only, tmp_path, kind, length):
    # kernlab's defaults (length 4, lambda 1.1, normalised) on DNA-like text.
    n = _harness.scaled(STRING_COUNTS.get(kind, STRING_COUNT)[length], minimum=4)
    length = _harness.scaled(length, minimum=20)
    benchmark.group = f"kernlab stringdot({kind}) vs stringdot N={n} strings of {length}"
    rng = np.random.default_rng(2)
    docs = ["".join(row) for row in rng.choice(list("ACGT"), size=(n, length))]
    path = tmp_path / "docs.txt"
    path.write_text("\n".join(docs) + "\n")
    setup = f"docs <- as.list(readLines('{path}'))"
    call = f"kernelMatrix(stringdot(type = '{kind}', length = 4, lambda = 1.1), docs)"
    kern = stringdot(kind, length=4, lambda_=1.1)
    ratio = _compare(benchmark, tmp_path, "stringdot", setup, call, lambda: kern(docs))
    benchmark.extra_info.update(target=STRING_TARGET)
    if benchmark_only and _harness.bench_scale() == 1:
        assert ratio >= STRING_TARGET, (f"stringdot({kind}) at length {length}: "
                                        f"{ratio:.2f}x kernlab, target {STRING_TARGET}x")


def test_kcca(benchmark, tmp_path):
    n = _harness.scaled(300, minimum=20)
    benchmark.group = f"kernlab kcca vs KernelCCA N={n}"
    rng = np.random.default_rng(3)
    X = rng.standard_normal((n, 5))
    Y = np.column_stack([np.sin(X[:, 0]), X[:, 1] ** 2, X[:, 2]]) + 0.3 * rng.standard_normal(
        (n, 3))
    setup = _matrix_csv(tmp_path, "x", X) + "\n" + _matrix_csv(tmp_path, "y", Y)
    call = f"kcca(x, y, kernel = 'rbfdot', kpar = list(sigma = {GAMMA}), gamma = 0.1, ncomps = 4)"
    # kernlab's kcca is this KernelCCA (fastkern.cca's docstring).
    est = fastkern.KernelCCA(n_components=2, gamma=GAMMA, regularization=0.1, jitter=1e-6,
                             center=False, solver="dense")
    _compare(benchmark, tmp_path, "kcca", setup, call, lambda: est.fit(X, Y))


def test_kmmd(benchmark, tmp_path):
    n = _harness.scaled(200, minimum=20)
    benchmark.group = f"kernlab kmmd vs mmd_test {n} + {n} rows, 100 permutations"
    rng = np.random.default_rng(4)
    X, Y = rng.standard_normal((n, 2)), rng.standard_normal((n, 2)) + 0.2
    setup = _matrix_csv(tmp_path, "x", X) + "\n" + _matrix_csv(tmp_path, "y", Y)
    # kmmd's ntimes bootstrap draws against mmd_test's permutations.
    call = f"kmmd(x, y, kernel = 'rbfdot', kpar = list(sigma = {GAMMA}), ntimes = 100)"
    _compare(benchmark, tmp_path, "kmmd", setup, call,
             lambda: fastkern.mmd_test(X, Y, gamma=GAMMA, n_permutations=100, random_state=0))
