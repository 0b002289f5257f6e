"""fastkern in child processes after threaded work in the parent: fork (GNU OpenMP's
thread pool does not survive it: fastkern._threads.openmp_threads), multiprocessing's
fork Pool, joblib's multiprocessing backend, and spawn, forkserver and loky.

Each run is a script in a subprocess of its own, under a deadline: a child
that hangs fails the test instead of the test run.  The script computes every
case in the parent after a threaded call, then again in the children, and
compares.
"""
import os
import signal
import subprocess
import sys
import threading
import warnings

import numpy as np
import pytest

import fastkern
from fastkern import _openmp

needs_openmp = pytest.mark.skipif(not _openmp.openmp_enabled(),
                                  reason="serial build: no thread pool to outlive a fork")

# Every parallel loop, however small its work, runs its threads in the
# script (as tests/conftest.py's _parallel_even_when_small does in-process):
# on the original code the children then reach a region of two threads.
_PRELUDE = """
from fastkern import _batches, _threads, lowrank
_batches.SERIAL_BELOW = 0.0
_threads.SERIAL_VALUES = 0
lowrank.SERIAL_MULTIPLY_ADDS = 0
"""


def _data():
    rng = np.random.default_rng(0)
    X = rng.random((120, 4))
    Y = np.column_stack([np.sin(3 * X[:, 0]), X[:, 1] ** 2]) + 0.1 * rng.random((120, 2))
    return X, Y, X[:, 0] + np.sin(4 * X[:, 1]), (X[:, 0] * 3).astype(int)


def _result(value):
    """A case's result as a flat float array."""
    if isinstance(value, np.ndarray):
        return value.astype(float).ravel()
    if hasattr(value, "statistic"):  # the tests' results
        return np.array([value.statistic, value.pvalue], dtype=float)
    if isinstance(value, tuple):  # IncompleteCholesky
        return np.concatenate([_result(np.asarray(v)) for v in value])
    return np.atleast_1d(np.asarray(value, dtype=float)).ravel()


def _cases():
    """name -> a call of one public function or estimator on two threads."""
    X, Y, y, labels = _data()
    K = fastkern.rbf_kernel(X, gamma=0.5, n_threads=1)
    strings = ["abcab", "bcabc", "cabca", "aabbc"] * 5
    sets, counts = [{"a", "b"}, {"b"}, {"a", "c"}] * 5, [{"a": 1.0}, {"a": 2.0, "b": 1.0}] * 5
    graphs = [(np.array([[0, 1], [1, 0]]), ["a", "b"]),
              (np.array([[0, 1, 1], [1, 0, 0], [1, 0, 0]]), ["a", "b", "a"])] * 5
    t = 2
    cases = {
        "center_gram": lambda: fastkern.center_gram(K, copy=True, n_threads=t),
        "KernelCenterer": lambda: fastkern.KernelCenterer(n_threads=t).fit(K).transform(K),
        "KernelRidge": lambda: fastkern.KernelRidge(1e-2, kernel="rbf", gamma=0.5,
                                                    n_threads=t).fit(X, y).predict(X),
        "KernelRidge-ichol": lambda: fastkern.KernelRidge(
            1e-2, kernel="rbf", gamma=0.5, solver="incomplete_cholesky",
            n_threads=t).fit(X, y).predict(X),
        "KernelRidgeCV": lambda: fastkern.KernelRidgeCV(kernel="rbf", gamma=0.5,
                                                        n_threads=t).fit(X, y).predict(X),
        "KernelSIR": lambda: np.abs(fastkern.KernelSIR(2, gamma=0.5, random_state=0,
                                                       n_threads=t).fit(X, y).transform(X)),
        "SlicedInverseRegression": lambda: np.abs(
            fastkern.SlicedInverseRegression(n_threads=t).fit(X, y).transform(X)),
        "KernelCCA": lambda: np.abs(fastkern.KernelCCA(2, gamma=0.5, gamma_y=1.0,
                                                       n_threads=t).fit(X, Y).transform(X)),
        "KernelFDA": lambda: np.abs(fastkern.KernelFDA(2, gamma=0.5, n_threads=t)
                                    .fit(X, labels).transform(X)),
        "Nystroem": lambda: np.abs(fastkern.Nystroem(gamma=0.5, n_components=30, random_state=0,
                                                     n_threads=t).fit_transform(X)),
        "incomplete_cholesky": lambda: fastkern.incomplete_cholesky(X, gamma=0.5, max_rank=20,
                                                                    n_threads=t),
        "mmd_test": lambda: fastkern.mmd_test(X[:60], X[60:] + 0.1, gamma=0.5,
                                              n_permutations=50, random_state=0, n_threads=t),
        "hsic_test": lambda: fastkern.hsic_test(X, Y, n_permutations=50, random_state=0,
                                                n_threads=t),
        "linear_mmd_test": lambda: fastkern.linear_mmd_test(X[:60], X[60:], gamma=0.5,
                                                            n_threads=t),
        "estimate_gamma": lambda: fastkern.estimate_gamma(X),
        "min_eigenvalue": lambda: fastkern.min_eigenvalue(K),
        "pairwise_kernels": lambda: fastkern.pairwise_kernels(X, metric="rbf", n_threads=t),
        "rbf_kernel-default": lambda: fastkern.rbf_kernel(X, gamma=0.5),
        "AllSubstrings": lambda: fastkern.AllSubstrings()(strings, n_threads=t),
        "BoundedRange": lambda: fastkern.BoundedRange(3)(strings, n_threads=t),
        "ExponentialDecay": lambda: fastkern.ExponentialDecay()(strings, n_threads=t),
        "Spectrum": lambda: fastkern.Spectrum(2)(strings, n_threads=t),
        "Subsequence": lambda: fastkern.Subsequence(2)(strings, n_threads=t),
        "Substring": lambda: fastkern.Substring(2)(strings, n_threads=t),
        "stringdot": lambda: fastkern.stringdot("spectrum", 2)(strings, n_threads=t),
        "Jaccard": lambda: fastkern.Jaccard()(sets, n_threads=t),
        "SetIntersection": lambda: fastkern.SetIntersection()(sets, n_threads=t),
        "MinMax": lambda: fastkern.MinMax()(counts, n_threads=t),
        "WeisfeilerLehman": lambda: fastkern.WeisfeilerLehman()(graphs, n_threads=t),
    }
    from fastkern._kpca_solvers import SOLVERS

    for solver in SOLVERS:
        extra = {"n_landmarks": 60} if solver == "nystrom" else {}
        cases[f"KernelPCA-{solver}"] = (lambda s, e: lambda: np.abs(fastkern.KernelPCA(
            3, kernel="rbf", gamma=0.5, eigen_solver=s, random_state=0, n_threads=t,
            **e).fit_transform(X)))(solver, extra)
    # The large-N path: a memory budget below the Gram's size (and above two
    # threads' kernel tiles).
    big = np.random.default_rng(2).random((400, 4))
    cases["KernelPCA-auto-large-N"] = lambda: np.abs(fastkern.KernelPCA(
        3, kernel="rbf", gamma=0.5, random_state=0, memory_budget=big.shape[0] ** 2 * 6,
        n_threads=t).fit_transform(big))
    for name in fastkern.__all__:
        if name.endswith(("_kernel", "_similarity")):
            cases[name] = (lambda f: lambda: f(X + 0.1, n_threads=t))(getattr(fastkern, name))
    return cases


# The fast tier's cases: a Gram, the centring, an estimator, a test.
QUICK = ("rbf_kernel", "center_gram", "KernelPCA-dense", "mmd_test")


def run_case(name):
    return _result(_cases()[name]())


def _main(how, names):
    import multiprocessing

    X = np.random.default_rng(1).random((400, 8))
    fastkern.rbf_kernel(X, n_threads=2)  # a team of two threads in this thread
    expected = [run_case(name) for name in names]
    if how == "os.fork":
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            import pickle

            try:
                data = pickle.dumps([run_case(name) for name in names])
                with os.fdopen(write, "wb") as out:
                    out.write(data)
            finally:
                os._exit(0)
        os.close(write)
        import pickle

        with os.fdopen(read, "rb") as pipe:
            got = pickle.loads(pipe.read())
        os.waitpid(pid, 0)
    elif how == "joblib-multiprocessing":
        import joblib

        got = joblib.Parallel(n_jobs=2, backend="multiprocessing")(
            joblib.delayed(run_case)(name) for name in names)
    elif how == "loky":
        import joblib

        got = joblib.Parallel(n_jobs=2, backend="loky")(
            joblib.delayed(run_case)(name) for name in names)
    else:
        with multiprocessing.get_context(how.replace("pool-", "")).Pool(2) as pool:
            got = pool.map(run_case, names)
    bad = [name for name, e, g in zip(names, expected, got)
           if e.shape != g.shape or not np.allclose(e, g, rtol=1e-8, atol=1e-10)]
    print("mismatch: " + " ".join(bad) if bad else "ok", flush=True)


def _run(how, names, timeout):
    script = (f"import sys; sys.path.insert(0, {os.path.dirname(__file__)!r})\n" + _PRELUDE
              + "import test_fork\n"
              + f"test_fork._main({how!r}, {list(names)!r})\n")
    # Run where the imported fastkern lives: `python -c` puts its working
    # folder first on sys.path, and a source checkout's unbuilt package there
    # would shadow an installed one.
    home = os.path.dirname(os.path.dirname(fastkern.__file__))
    env = dict(os.environ, PYTHONPATH=home)
    # A session of its own: a hung child is killed with the script.
    proc = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            cwd=home)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"{how}: the children did not finish within {timeout} s: they hang")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 0, err[-3000:]
    assert out.strip().splitlines()[-1] == "ok", out + err[-3000:]


@needs_openmp
@pytest.mark.parametrize("how", ["os.fork", "pool-fork", "joblib-multiprocessing"])
def test_fork_children_after_threaded_work_finish_with_the_parents_results(how):
    _run(how, QUICK, 60)


@needs_openmp
@pytest.mark.slow
@pytest.mark.parametrize("how", ["os.fork", "pool-fork", "joblib-multiprocessing",
                                 "pool-spawn", "pool-forkserver", "loky"])
def test_every_function_and_estimator_in_children_after_threaded_work(how):
    _run(how, sorted(_cases()), 300)


def _forked(child):
    """The bytes child() returns, run in a child forked from the calling thread."""
    read, write = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12 warns of a fork in a process with threads (pytest-xdist's).
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        try:
            os.write(write, child())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        got = pipe.read()
    os.waitpid(pid, 0)
    return list(got)


def test_only_a_forking_thread_that_ran_teams_runs_serial_in_the_child():
    from fastkern import _threads
    from fastkern._validation import check_n_threads

    def counts():
        box = []
        thread = threading.Thread(target=lambda: box.append(_threads.openmp_threads(2)))
        thread.start()
        thread.join()
        # This thread's counts, then a new thread's.
        return bytes([_threads.openmp_threads(2), check_n_threads(3), check_n_threads(None)]
                     + box)

    default = _threads.default_n_threads()  # cached here, the same in the children
    # Forked from a thread that never ran a team: its threads stay.
    box = []
    fresh = threading.Thread(target=lambda: box.append(_forked(counts)))
    fresh.start()
    fresh.join()
    assert box == [[2, 3, default, 2]]
    fastkern.rbf_kernel(np.ones((50, 2)), n_threads=2)
    assert _forked(counts) == [1, 1, 1, 2]


_FORK_DURING_LAPACK = """
import os, threading, time
import numpy as np
from fastkern import _threads

started, release = threading.Event(), threading.Event()

def long_call(a):
    started.set()
    release.wait(30)
    return a.sum()

def main_thread_call():
    _threads.interruptible(long_call, np.ones((300, 300)))

# interruptible runs its call in a worker thread when called from the main
# thread: fork from another thread while the worker is inside it.
threading.Thread(target=lambda: (started.wait(30), fork(), release.set()), daemon=True).start()

def fork():
    pid = os.fork()
    if pid == 0:
        with _threads.blas_limit(1):
            pass
        os._exit(7)
    _, status = os.waitpid(pid, 0)
    print("child", os.waitstatus_to_exitcode(status), flush=True)

main_thread_call()
"""


def test_a_child_forked_during_a_lapack_call_does_not_wait_for_the_parents_worker():
    # The worker is the parent's; a blas_limit in the child waited for it
    # to finish, and it never runs there.
    home = os.path.dirname(os.path.dirname(fastkern.__file__))
    env = dict(os.environ, PYTHONPATH=home)
    proc = subprocess.Popen([sys.executable, "-c", _FORK_DURING_LAPACK], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, cwd=home)
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail("the child forked during a LAPACK call hangs")
    assert "child 7" in out, out + err
