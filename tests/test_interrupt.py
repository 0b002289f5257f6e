"""Ctrl-C stops Gram, centering and matrix-free passes between batches of work.

Each test sends SIGINT to this process from a timer thread while a compiled
loop runs, and checks that KeyboardInterrupt comes out of the call soon after
(the work would otherwise take many seconds), that nothing is left behind
(threads, memory) and that the next call gives the right answer.  The 0.2 s
latency target is asserted in benchmarks/bench_interrupt.py; here the bound
is loose (LATENCY), and a try over it is tried again (least_time_to_interrupt),
so a loaded machine cannot make the test flaky (one try took 2.002 s in CI, on
a loaded 2-core machine), yet today's code without batches fails it by
seconds on every try.
"""
import gc
import signal
import threading
import time
import tracemalloc

import numpy as np
import pytest
from sklearn.metrics import pairwise as skp

import fastkern
from fastkern import _batches
from fastkern._testing import least_time_to_interrupt, time_to_interrupt
from fastkern.large_n import KernelOperator

from _subprocess import finish, read_line, running

pytestmark = pytest.mark.skipif(not hasattr(signal, "pthread_kill"),
                                reason="needs POSIX signals")

# Seconds from SIGINT to KeyboardInterrupt that a test accepts: ten times
# the 0.2 s target, the project's rule for wall-clock bounds in unit tests.
LATENCY = 2.0

def test_helper_returns_none_when_the_work_ends_first():
    assert time_to_interrupt(lambda: None, delay=0.05) is None
    assert time_to_interrupt(lambda: time.sleep(0.01), delay=0.5) is None


@pytest.mark.parametrize("latencies, expected", [
    ([3.0, 0.1, 0.1], 0.1),      # the first try under the bound counts
    ([3.0, 5.0, 4.0, 0.1], 3.0),  # three tries, all over: the least
    ([3.0, None, 0.1], None),     # the work ended before the signal
], ids=["second", "all-over", "finished"])
def test_least_time_to_interrupt_tries_again_only_over_the_bound(latencies, expected,
                                                                  monkeypatch):
    from fastkern import _testing

    left = iter(latencies)
    monkeypatch.setattr(_testing, "time_to_interrupt", lambda fn, delay: next(left))
    assert _testing.least_time_to_interrupt(None, 2.0) == expected


def test_threaded_lanczos_stops_on_ctrl_c():
    from fastkern._eigen import lanczos_eigsh

    # A cluster of 2000 eigenvalues within 1e-3, 9 wanted from a basis of 11:
    # the restarts (300 take 0.2 s) go on until Ctrl-C, with the products'
    # threads held in one parallel region between checks.
    K = np.diag(np.linspace(1.0, 1.0 - 1e-3, 2000))
    threads = threading.active_count()
    latency = least_time_to_interrupt(lambda: lanczos_eigsh(K, 9, ncv=11, max_iter=10**6,
                                                            random_state=0, n_threads=2),
                                      LATENCY)
    assert latency is not None, "the solver finished before Ctrl-C"
    assert latency < LATENCY
    assert threading.active_count() == threads


def _wide(n, d, dtype, seed=0):
    return np.random.default_rng(seed).standard_normal(size=(n, d), dtype=dtype)


@pytest.mark.parametrize("case", ["laplacian-direct", "rbf-blas-64", "rbf-blas-32",
                                  "rbf-direct-cross", "linear-out"])
def test_gram_stops_on_ctrl_c(case):
    # Each call takes several seconds on 2 cores if it runs to the end.
    if case == "laplacian-direct":
        X = _wide(3000, 8192, np.float64)
        call = lambda: fastkern.laplacian_kernel(X, gamma=1e-4)  # noqa: E731
    elif case == "rbf-blas-64":
        X = _wide(3000, 16384, np.float64)
        call = lambda: fastkern.rbf_kernel(X, gamma=1e-5)  # noqa: E731
    elif case == "rbf-blas-32":
        X = _wide(3000, 32768, np.float32)
        call = lambda: fastkern.rbf_kernel(X, gamma=1e-5)  # noqa: E731
    elif case == "rbf-direct-cross":
        X, Y = _wide(30000, 32, np.float32), _wide(8000, 32, np.float32, 1)
        call = lambda: fastkern.rbf_kernel(X, Y, path="direct", n_threads=1)  # noqa: E731
    else:
        X = _wide(3000, 16384, np.float64)
        out = np.empty((3000, 3000))
        call = lambda: fastkern.linear_kernel(X, out=out)  # noqa: E731
    threads = threading.active_count()
    latency = least_time_to_interrupt(call, LATENCY)
    assert latency is not None, "the Gram finished before Ctrl-C: make the case larger"
    assert latency < LATENCY
    assert threading.active_count() == threads


def test_gram_is_right_after_an_interrupt_and_leaks_nothing():
    X = _wide(3000, 8192, np.float64)
    small = _wide(300, 40, np.float32)
    expected = skp.rbf_kernel(small.astype(np.float64), gamma=0.05)
    # A first interrupted call warms up the allocator; the second is measured.
    time_to_interrupt(lambda: fastkern.laplacian_kernel(X, gamma=1e-4))
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        assert time_to_interrupt(lambda: fastkern.laplacian_kernel(X, gamma=1e-4)) is not None
        gc.collect()
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    # The 72 MB Gram and every scratch buffer are released with the exception.
    assert after - before < 1_000_000
    np.testing.assert_allclose(fastkern.rbf_kernel(small, gamma=0.05), expected,
                               rtol=1e-5, atol=1e-6)


def test_matrix_free_product_stops_on_ctrl_c():
    X = _wide(60000, 16, np.float64)
    op = KernelOperator(X, kernel="rbf", gamma=0.1)
    V = np.ones((X.shape[0], 8))
    latency = least_time_to_interrupt(lambda: op.matmat(V), LATENCY)
    assert latency is not None and latency < LATENCY
    # The operator still works: its product matches a dense reference.
    Xs = X[:700]
    small = KernelOperator(Xs, kernel="rbf", gamma=0.1)
    Vs = np.random.default_rng(2).normal(size=(700, 3))
    np.testing.assert_allclose(small.matmat(Vs), skp.rbf_kernel(Xs, gamma=0.1) @ Vs,
                               rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("n_threads", [1, 2])
def test_batched_matrix_free_product_equals_one_pass(n_threads, monkeypatch):
    """Column ranges of any length give the product of one pass, bit for bit."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(1030, 40))
    V = rng.normal(size=(1030, 5))
    op = KernelOperator(X, kernel="rbf", gamma=0.02, n_threads=n_threads)
    reference = op.matmat(V)
    # A tiny target makes every batch one column tile after the first.
    monkeypatch.setattr(_batches, "TARGET", 1e-9)
    np.testing.assert_array_equal(op.matmat(V), reference)
    K = skp.rbf_kernel(X, gamma=0.02)
    np.testing.assert_allclose(reference, K @ V, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_gram_and_centering_do_not_depend_on_batches(dtype, monkeypatch):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(777, 9)).astype(dtype)
    Xw = rng.normal(size=(600, 70)).astype(dtype)
    K, Kw = fastkern.rbf_kernel(X), fastkern.rbf_kernel(Xw, Xw[:333])
    C = fastkern.center_gram(K.copy())
    monkeypatch.setattr(_batches, "TARGET", 1e-9)
    np.testing.assert_array_equal(fastkern.rbf_kernel(X), K)
    np.testing.assert_array_equal(fastkern.rbf_kernel(Xw, Xw[:333]), Kw)
    np.testing.assert_array_equal(fastkern.center_gram(K.copy()), C)


def test_centering_stops_on_ctrl_c():
    n = 16000
    K = np.ones((n, n), dtype=np.float32)
    calls = {"n": 0}

    def work():
        # Centering is memory-bound (a pass over 1 GB is ~0.2 s), so it runs
        # repeatedly; each call would take too long to finish unbatched only
        # at sizes a test cannot allocate.
        while True:
            fastkern.center_gram(K)
            calls["n"] += 1

    latency = least_time_to_interrupt(work, LATENCY, delay=0.5)
    assert latency is not None and latency < LATENCY
    # A centred all-ones matrix is 0; an interrupted pass leaves a prefix of
    # the rows updated and the others as they were: every row is constant.
    assert np.all(K == K[:, :1])


def test_batches_cover_the_range_in_order():
    b = _batches.Batches(1000, 3)
    ranges = list(b.ranges())
    assert ranges[0] == (0, 1)
    assert [r[0] for r in ranges[1:]] == [r[1] for r in ranges[:-1]]
    assert ranges[-1][1] == 1000
    assert list(_batches.Batches(0, 2).ranges()) == []


def test_batches_shrink_to_the_target():
    b = _batches.Batches(10**9, 1, 1000, 1e-3)
    sizes = []
    for start, stop in b.ranges():
        sizes.append(stop - start)
        time.sleep(0.005)   # each batch "takes" 5 ms against a 1 ms target
        if len(sizes) == 6:
            break
    assert sizes[0] == 1000 and sizes[-1] < 10


def test_batches_grow_at_most_twofold():
    b = _batches.Batches(10**9, 2)
    sizes = [stop - start for _, (start, stop) in zip(range(8), b.ranges())]
    assert sizes[0] == 1
    assert all(s1 <= max(2, 2 * s0) for s0, s1 in zip(sizes, sizes[1:]))
    assert sizes[-1] > sizes[1] >= 2


def test_small_work_stays_on_one_thread():
    """The first item on one thread; the rest too when it is cheaper than waking threads."""
    b = _batches.Batches(1000, 4)
    b.serial_below = 10.0   # the loop's own overhead must count as small work
    ranges, threads = [], []
    for r in b.ranges():
        ranges.append(r)
        threads.append(b.threads)
    # 999 items of (next to) no work: one serial batch holds them all.
    assert ranges == [(0, 1), (1, 1000)] and threads == [1, 1]


def test_large_work_goes_parallel():
    b = _batches.Batches(1000, 4)
    b.serial_below = 1e-3
    threads = []
    for start, stop in b.ranges():
        threads.append(b.threads)
        time.sleep(0.002)   # 2 ms per batch: the rest would take far more than SERIAL_BELOW
        if len(threads) == 3:
            break
    assert threads == [1, 4, 4]


def test_too_short_a_batch_does_not_decide_for_threads():
    """Items of (next to) no work, whose extrapolated rest still exceeds serial_below:
    the batches stay serial and double, instead of waking threads on the loop's
    own per-batch cost."""
    b = _batches.Batches(1000, 4)
    b.serial_below = 1e-12
    # Every batch here is "too short": a test process preempted between two
    # batches for more than the real 50 us (under a loaded test run) must not
    # turn the loop parallel and fail the test.
    b.min_decide = 10.0
    sizes, threads = [], []
    for start, stop in b.ranges():
        sizes.append(stop - start)
        threads.append(b.threads)
    assert threads == [1] * len(threads)
    assert sizes[:4] == [1, 2, 4, 8] and sum(sizes) == 1000


def test_a_short_rest_is_one_parallel_batch():
    """Once parallel, a rest that the last batch's pace puts well inside the
    target runs as one batch (one parallel region), not in doubling steps."""
    b = _batches.Batches(1000, 4)
    b.serial_below = 0.0    # items of no work, parallel all the same
    ranges, threads = [], []
    for r in b.ranges():
        ranges.append(r)
        threads.append(b.threads)
    assert ranges == [(0, 1), (1, 1000)] and threads == [1, 4]


def test_learned_first_batch_starts_parallel():
    b = _batches.Batches(1000, 4, 64)
    next(b.ranges())
    assert b.threads == 4


def test_subprocess_waits_fail_at_their_deadline_and_kill_the_script(tmp_path):
    """The subprocess tests' guard against a hang: a script that never ends
    fails the test at each wait's deadline, and is not left running."""
    script = tmp_path / "hang.py"
    script.write_text("import time\nprint('up', flush=True)\ntime.sleep(600)\n")
    with pytest.raises(pytest.fail.Exception, match="still runs after 0.5 s"):
        with running(script, cwd=tmp_path) as proc:
            assert read_line(proc, timeout=60) == "up"
            finish(proc, timeout=0.5)
    assert proc.returncode == -signal.SIGKILL
    with pytest.raises(pytest.fail.Exception, match="no line from the script within 0.5 s"):
        with running(script, cwd=tmp_path) as proc:
            read_line(proc, timeout=60)
            read_line(proc, timeout=0.5)
    assert proc.returncode == -signal.SIGKILL


@pytest.mark.slow
def test_keyboard_interrupt_in_subprocess_exits_cleanly(tmp_path):
    """A script interrupted inside a Gram exits by KeyboardInterrupt, no crash or hang."""
    script = tmp_path / "gram.py"
    script.write_text(
        "import numpy as np, fastkern, sys\n"
        "X = np.random.default_rng(0).normal(size=(3000, 8192))\n"
        "print('start', flush=True)\n"
        "fastkern.laplacian_kernel(X, gamma=1e-4)\n"
        "print('finished', flush=True)\n")
    with running(script, cwd=tmp_path) as proc:
        assert read_line(proc, timeout=60) == "start"
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        # A hang fails at the deadline; the latency target is benchmarks/bench_interrupt.py's.
        out, err = finish(proc, timeout=60)
    assert "finished" not in out
    assert "KeyboardInterrupt" in err
    assert proc.returncode == 1 or proc.returncode == -signal.SIGINT


@pytest.mark.slow
def test_interrupted_cholesky_leaves_blas_usable_and_exits(tmp_path):
    """After Ctrl-C in KernelRidge's Cholesky, the process fits again and exits.

    The interrupted potrf runs on in the background; OpenBLAS's thread count
    changed under it (the fit's BLAS limit ending) left its thread server
    hanging at exit in about one run of three.  The worker sends the signal
    itself just before its potrf, so the interrupt lands inside the call on
    a machine of any speed; the refit then waits for that potrf (seconds on
    a loaded 2-core machine: the deadline is for a hang, not for speed)."""
    script = tmp_path / "ridge.py"
    script.write_text(
        "import os, signal, numpy as np, fastkern\n"
        "from fastkern import _linalg\n"
        "real = _linalg.interruptible\n"
        "def spy(fn, *a, **k):\n"
        "    def call(*args, **kwargs):\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        return fn(*args, **kwargs)\n"
        "    return real(call, *a, **k)\n"
        "_linalg.interruptible = spy\n"
        "X = np.random.default_rng(0).normal(size=(6000, 5))\n"
        "try:\n"
        "    fastkern.KernelRidge(kernel='rbf', solver='cholesky').fit(X, X[:, 0])\n"
        "    print('finished', flush=True)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
        "_linalg.interruptible = real\n"
        "m = fastkern.KernelRidge(kernel='rbf', alpha=0.1).fit(X[:600], X[:600, 0])\n"
        "print('refit', round(m.score(X[:600], X[:600, 0]), 3) > 0.9, flush=True)\n")
    with running(script, cwd=tmp_path) as proc:
        out, err = finish(proc, timeout=600)
    assert proc.returncode == 0, err
    assert out.split() == ["interrupted", "refit", "True"]


# KernelCCA on one BLAS thread, interrupted in its eigh (seconds at n=N).
# With a second argument the call, once done, sleeps for an hour: a script
# that ends before that did not wait for the call it left running, on a
# machine of any speed.
_LAPACK_AT_EXIT = """
import os, signal, sys, threading, time, numpy as np, fastkern
from fastkern import cca
real = cca.interruptible
OUTLAST = len(sys.argv) > 2
def spy(fn, *a, **k):
    def call(*args, **kwargs):
        value = fn(*args, **kwargs)
        if OUTLAST:
            time.sleep(3600)
        return value
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()
    print('lapack', flush=True)
    return real(call, *a, **k)
cca.interruptible = spy
rng = np.random.default_rng(0)
N = int(sys.argv[1])
X, Y = rng.normal(size=(N, 5)), rng.normal(size=(N, 3))
"""


def _run_past_lapack(tmp_path, body, n, *, outlast=False, timeout=300):
    """Run the script; return (seconds from its 'lapack' line to its end,
    seconds from its start to that line, stdout, stderr, status).  Each of
    the two waits fails the test after `timeout` seconds.  ``outlast``: the
    interrupted call outlasts any deadline (see _LAPACK_AT_EXIT)."""
    script = tmp_path / "lapack_exit.py"
    script.write_text(_LAPACK_AT_EXIT + body)
    begun = time.perf_counter()
    with running(script, n, *(["outlast"] if outlast else []), cwd=tmp_path) as proc:
        assert read_line(proc, timeout) == "lapack"
        start = time.perf_counter()
        out, err = finish(proc, timeout)
        return time.perf_counter() - start, start - begun, out, err, proc.returncode


def _exits_at_once(elapsed, startup):
    """Ending within LATENCY of the signal, plus what the machine's load adds.

    After an uncaught interrupt Python tears its modules down before it
    kills itself (a garbage collection over everything numpy, scipy and
    scikit-learn imported: 5-25 s on a loaded 2-core machine, where the same
    imports at the script's start took 17-39 s), while the interrupted call
    takes a core beside it; so twice the start's time bounds that teardown.
    Waiting for the call left running takes an hour (see _LAPACK_AT_EXIT)."""
    return elapsed < 0.3 + LATENCY + 2 * startup


@pytest.mark.slow
def test_uncaught_ctrl_c_in_lapack_ends_the_process_at_once(tmp_path):
    """An uncaught interrupt ends the script as Python does, the traceback
    and then killed by SIGINT, without waiting for the eigh left running
    (the wait at exit for a caught one must not apply here)."""
    elapsed, startup, out, err, status = _run_past_lapack(
        tmp_path, "fastkern.KernelCCA(solver='dense', n_threads=1).fit(X, Y)\n"
                  "print('finished', flush=True)\n", 4000, outlast=True)
    assert out == ""
    assert err.rstrip().endswith("KeyboardInterrupt")
    assert status == -signal.SIGINT
    assert _exits_at_once(elapsed, startup), (elapsed, startup)


@pytest.mark.slow
@pytest.mark.xfail(strict=False, reason=(
    "known defect, under watch: on a loaded 2-core machine one run of 3 printed OpenBLAS's "
    "'BLAS : Bad memory unallocation!' and ended by SIGSEGV after the atexit wait for the "
    "interrupted eigh; the suspected cause (the exit went on while the worker thread was "
    "still ending) is fixed and tested in test_threads, but the crash was never reproduced "
    "at will, so this run cannot yet confirm the fix"))
def test_caught_ctrl_c_in_lapack_then_a_normal_exit_does_not_crash(tmp_path):
    """A script that catches the interrupt and ends normally: the exit waits
    for the eigh left running instead of unloading OpenBLAS under it (a
    segfault in about one run of three).  Three runs."""
    for _ in range(3):
        _, _, out, err, status = _run_past_lapack(
            tmp_path, "try:\n"
                      "    fastkern.KernelCCA(solver='dense', n_threads=1).fit(X, Y)\n"
                      "except KeyboardInterrupt:\n"
                      "    print('interrupted', flush=True)\n", 2500)
        assert (status, out.split()) == (0, ["interrupted"]), err


@pytest.mark.slow
def test_cli_ctrl_c_in_lapack_exits_130_at_once(tmp_path):
    """fastkern cca interrupted in its eigh (tens of seconds at n=4000 on one
    thread): one line and status 130 at once; its exit segfaulted (OpenBLAS
    unloaded under the call) in three runs of four."""
    np.savetxt(tmp_path / "d.csv", np.random.default_rng(0).normal(size=(4000, 8)),
               delimiter=",", header="a,b,c,d,e,f,g,h", comments="")
    elapsed, startup, out, err, status = _run_past_lapack(
        tmp_path, "from fastkern.cli import main\n"
                  "sys.exit(main(['cca', 'd.csv', '--x-columns', 'a,b,c,d,e', "
                  "'--y-columns', 'f,g,h', '--solver', 'dense', '--threads', '1', "
                  "'--out', 'cv.csv']))\n", 4000, outlast=True)
    assert err.strip() == "fastkern cca: interrupted"
    assert status == 130
    assert _exits_at_once(elapsed, startup), (elapsed, startup)
    assert not (tmp_path / "cv.csv").exists()


def _join_lapack_workers(timeout=600):
    """Wait for the LAPACK calls an interrupt left running in the background.

    A signal that lands while ``interruptible`` starts its worker interrupts
    Thread.start() before the thread says it has started: the thread is
    listed but join() refuses it for a moment, so that case is retried.
    """
    deadline = time.monotonic() + timeout
    for t in threading.enumerate():
        if not t.name.startswith("fastkern-lapack"):
            continue
        while True:
            try:
                t.join(timeout=max(deadline - time.monotonic(), 0))
                break
            except RuntimeError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        assert not t.is_alive(), "a LAPACK worker still runs after the deadline"


def test_subsequence_kernel_stops_on_ctrl_c():
    # A pair of these strings is ~10^7 DP cells (tens of ms); a row of the
    # 200 x 200 Gram is 200 pairs, so batches of rows ignored Ctrl-C for
    # seconds, and the whole Gram takes minutes.
    from fastkern.structured import Subsequence

    rng = np.random.default_rng(0)
    X = ["".join(rng.choice(list("acgt"), size=1500)) for _ in range(200)]
    threads = threading.active_count()
    latency = least_time_to_interrupt(lambda: Subsequence(k=5, lambda_=0.5)(X), LATENCY,
                                      delay=0.5)
    assert latency is not None and latency < LATENCY
    assert threading.active_count() == threads
    # Still right afterwards, on strings short enough for the definition.
    small = ["gattaca", "tacag", "cgat"]
    K = Subsequence(k=2, lambda_=0.5, normalized=False)(small)
    lam = 0.5

    def ref(x, y):
        return sum(lam ** (i2 - i1 + 1 + j2 - j1 + 1)
                   for i1 in range(len(x)) for i2 in range(i1 + 1, len(x))
                   for j1 in range(len(y)) for j2 in range(j1 + 1, len(y))
                   if x[i1] == y[j1] and x[i2] == y[j2])

    np.testing.assert_allclose(K, [[ref(x, y) for y in small] for x in small], rtol=1e-13)


def _interrupt_inside(fn, monkeypatch, module, name, delay=0.3):
    """Seconds from the first call of module.name during fn() to fn's
    KeyboardInterrupt, when another process sends SIGINT `delay` seconds
    after that call began; None if fn finished first.  module.name is the
    step just before the eigensolver (the centring), so the signal lands in
    the eigensolver.

    time_to_interrupt's timer thread needs the GIL to send the signal, and a
    LAPACK call through f2py holds it: the signal would only leave once the
    call is over, and the latency look small.  A shell needs no GIL.  The
    signal is timed from the call, not from fn's start, so that it lands in
    the solver however long the Gram before it takes on a loaded machine.
    """
    import os
    import subprocess

    real = getattr(module, name)
    state = {}

    def spy(*args, **kwargs):
        if "start" not in state:
            state["start"] = time.perf_counter()
            state["killer"] = subprocess.Popen(
                ["sh", "-c", f"sleep {delay}; kill -INT {os.getpid()}"])
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    try:
        fn()
    except KeyboardInterrupt:
        elapsed = time.perf_counter() - state["start"]
        state["killer"].wait()
        return elapsed
    finally:
        monkeypatch.setattr(module, name, real)
    try:
        if "killer" in state:
            state["killer"].wait()
            time.sleep(1.0)  # the signal that arrives after fn returned raises here
    except KeyboardInterrupt:
        pass
    return None


@pytest.mark.parametrize("solver", ["kcca-dense", "kpca-dense", "ridge-cv", "kfda-dense",
                                    "ksir-dense", "ridge-cholesky", "ridge-mixed"])
def test_dense_eigensolvers_stop_on_ctrl_c(solver, monkeypatch):
    # LAPACK's eigh of a 2500 x 2500 Gram takes seconds and cannot be
    # interrupted: it runs without the GIL in a worker thread that the main
    # thread waits on.  KernelFDA's and KernelSIR's dense solvers factorise
    # the Gram (Cholesky, 3-10x cheaper than eigh): at 8000 samples it too
    # takes seconds.
    from fastkern import cca, centering, fda, sir

    rng = np.random.default_rng(1)
    X, Y = rng.normal(size=(2500, 5)), rng.normal(size=(2500, 3))
    if solver in ("kfda-dense", "ksir-dense"):
        Xl = rng.normal(size=(8000, 5))
        yl = (Xl[:, 0] > 0).astype(int) + (Xl[:, 1] > 0)
        if solver == "kfda-dense":
            call = lambda: fastkern.KernelFDA(kernel="rbf").fit(Xl, yl)  # noqa: E731
            before = (fda, "center_gram")
        else:
            call = lambda: fastkern.KernelSIR(kernel="rbf").fit(Xl, Xl[:, 0])  # noqa: E731
            before = (sir, "center_gram")
    elif solver in ("ridge-cholesky", "ridge-mixed"):
        # The Cholesky factorisation of the (shifted) Gram: seconds at these
        # sizes (float64 at 8000, float32 at 12000), scipy's held the GIL.
        from fastkern import _linalg

        n = 8000 if solver == "ridge-cholesky" else 12000
        Xr = rng.normal(size=(n, 5))
        call = lambda: fastkern.KernelRidge(  # noqa: E731
            kernel="rbf", solver=solver.split("-")[1]).fit(Xr, Xr[:, 0])
        # Both factorise through _linalg.factor_in_place.
        before = (_linalg, "interruptible")
    elif solver == "kcca-dense":
        call = lambda: fastkern.KernelCCA(solver="dense").fit(X, Y)  # noqa: E731
        before = (cca, "center_gram")
    elif solver == "ridge-cv":
        call = lambda: fastkern.KernelRidgeCV(kernel="rbf").fit(X, Y[:, 0])  # noqa: E731
        before = (fastkern.KernelRidgeCV, "_gram")
    else:
        # 1800 rows: the eigh still runs for seconds, and the test waits for
        # all of it after the interrupt (about a third of 2500 rows' time).
        call = lambda: fastkern.KernelPCA(1700, kernel="rbf",  # noqa: E731
                                          eigen_solver="dense").fit(X[:1800])
        before = (centering.KernelCenterer, "_fit_transform_checked")
    from threadpoolctl import threadpool_info

    def blas_counts():
        return sorted((m["filepath"], m["num_threads"]) for m in threadpool_info()
                      if m["user_api"] == "blas")

    counts = blas_counts()
    delay = 0.3
    elapsed = _interrupt_inside(call, monkeypatch, *before, delay)
    _join_lapack_workers()
    assert elapsed is not None, "the fit finished before Ctrl-C: make the case larger"
    assert elapsed - delay < LATENCY
    # The estimator still fits, and right, afterwards; and the BLAS thread
    # counts the interrupted fit limited are the user's again.
    small = X[:60]
    kpca = fastkern.KernelPCA(3, kernel="rbf", gamma=0.2, eigen_solver="dense").fit(small)
    assert blas_counts() == counts
    K = skp.rbf_kernel(small, gamma=0.2)
    H = np.eye(60) - 1 / 60
    np.testing.assert_allclose(kpca.eigenvalues_, np.linalg.eigvalsh(H @ K @ H)[::-1][:3],
                               rtol=1e-10)


def test_median_heuristic_over_every_pair_stops_on_ctrl_c():
    # 1e6 pairs of 4000 features: about 4e9 differences, seconds on 2 cores.
    X = _wide(1414, 4000, np.float64)
    latency = least_time_to_interrupt(lambda: fastkern.estimate_gamma(X), LATENCY)
    assert latency is not None, "the estimate finished before Ctrl-C"
    assert latency < LATENCY
    assert fastkern.estimate_gamma(X[:50]).gamma > 0
