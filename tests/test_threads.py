"""The execution context (fastkern._threads): n_threads, the OpenMP wait policy,
the serial path for small work and the BLAS limit."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from threadpoolctl import threadpool_info

import fastkern
from fastkern import _openmp, _threads

needs_openmp = pytest.mark.skipif(not _openmp.openmp_enabled(), reason="serial build")


@pytest.mark.parametrize("bad", [4097, 50_000, 100_000, 2**40])
def test_too_many_threads_is_a_value_error_naming_n_threads(bad):
    X = np.random.default_rng(0).normal(size=(20, 3))
    with pytest.raises(ValueError, match="n_threads"):
        fastkern.rbf_kernel(X, n_threads=bad)
    with pytest.raises(ValueError, match="n_threads"):
        fastkern.KernelPCA(2, n_threads=bad).fit(X)
    with pytest.raises(ValueError, match="n_threads"):
        fastkern.KernelRidge(n_threads=bad).fit(X, X[:, 0])


@pytest.mark.parametrize("bad", [0, -1])
def test_non_positive_threads_is_a_value_error(bad):
    with pytest.raises(ValueError, match="n_threads"):
        fastkern.rbf_kernel(np.eye(3), n_threads=bad)


@pytest.mark.parametrize("bad", [2.0, "2", True])
def test_non_integer_threads_is_a_type_error(bad):
    with pytest.raises(TypeError, match="n_threads"):
        fastkern.rbf_kernel(np.eye(3), n_threads=bad)


@needs_openmp
def test_many_threads_on_a_large_gram_gives_the_same_bits():
    """More threads than tiles: the tile buffers follow the tiles, not n_threads."""
    X = np.random.default_rng(1).normal(size=(700, 20))
    np.testing.assert_array_equal(fastkern.rbf_kernel(X, n_threads=4096),
                                  fastkern.rbf_kernel(X, n_threads=1))


_IDLE_CPU = textwrap.dedent("""
    import time, numpy as np, fastkern
    X = np.random.default_rng(0).normal(size=(3000, 8))
    fastkern.rbf_kernel(X, n_threads=2)      # wakes fastkern's OpenMP threads
    t0, c0 = time.perf_counter(), time.process_time()
    time.sleep(1.0)
    print(time.process_time() - c0)
""")


def _idle_cpu_seconds(cwd, **env):
    full = {k: v for k, v in os.environ.items() if k not in _threads._WAIT_VARIABLES}
    full.update(env)
    full["PYTHONPATH"] = os.path.dirname(os.path.dirname(fastkern.__file__))
    out = subprocess.run([sys.executable, "-c", _IDLE_CPU], env=full, capture_output=True,
                         text=True, timeout=120, check=True, cwd=cwd)
    return float(out.stdout.split()[-1])


@needs_openmp
def test_idle_openmp_threads_sleep_unless_the_user_asks_them_to_spin(tmp_path):
    """After a parallel region the process uses no CPU while it sleeps 1 s; with
    the user's OMP_WAIT_POLICY=active (the control) its idle thread spins, and
    gets at least a sixth of a core even when the other tests load the machine."""
    # (In a temporary folder: `python -c` puts the working folder first on
    # sys.path, where a checkout's fastkern/ would shadow the tested one.)
    assert _idle_cpu_seconds(tmp_path) < 0.05
    assert _idle_cpu_seconds(tmp_path, OMP_WAIT_POLICY="active") > 0.15


def test_the_wait_policy_leaves_the_environment_alone(tmp_path):
    code = ("import os, fastkern; print('OMP_WAIT_POLICY' in os.environ, "
            "fastkern.config_info()['wait_policy'])")
    env = {k: v for k, v in os.environ.items() if k not in _threads._WAIT_VARIABLES}
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(fastkern.__file__))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120, check=True, cwd=tmp_path).stdout
    assert out.startswith("False passive")
    env["GOMP_SPINCOUNT"] = "1000"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=120, check=True, cwd=tmp_path).stdout
    assert "GOMP_SPINCOUNT=1000" in out


def _blas_threads_seen():
    return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}


class _Estimator:
    def __init__(self, n_threads):
        self.n_threads = n_threads

    @_threads.limits_blas
    def fit(self, X):
        return _blas_threads_seen()


def test_estimators_hold_blas_to_one_thread_on_small_data():
    small = np.zeros((_threads.BLAS_SERIAL_ROWS - 1, 2))
    large = np.zeros((_threads.BLAS_SERIAL_ROWS, 2))
    assert _Estimator(2).fit(small) == {1}
    assert _Estimator(2).fit(large) == {2}
    assert _Estimator(None).fit(large) == {_threads.default_n_threads()}


def test_unbatched_loops_are_serial_below_the_work_threshold(monkeypatch):
    monkeypatch.setattr(_threads, "SERIAL_VALUES", 1 << 16)
    assert _threads.threads_for(4, (1 << 16) - 1) == 1
    assert _threads.threads_for(4, 1 << 16) == 4


@pytest.mark.parametrize("n", [100, 333, 2000])
def test_small_and_large_work_give_the_same_results_with_the_serial_path(n, monkeypatch):
    """The serial decision changes the thread count only, never a bit of the result."""
    from fastkern import _batches

    X = np.random.default_rng(n).normal(size=(n, 10))
    K0 = fastkern.rbf_kernel(X, n_threads=2)
    C0 = fastkern.center_gram(K0.copy(), n_threads=2)
    monkeypatch.setattr(_batches, "SERIAL_BELOW", 1e-3)
    monkeypatch.setattr(_threads, "SERIAL_VALUES", 1 << 16)
    K1 = fastkern.rbf_kernel(X, n_threads=2)
    np.testing.assert_array_equal(K1, K0)
    np.testing.assert_array_equal(fastkern.center_gram(K1, n_threads=2), C0)


def test_interruptible_runs_small_calls_in_place_and_large_ones_aside():
    # A thread per LAPACK call cost more than the call on small matrices
    # (KernelPCA on 200 samples makes two); a large call runs in a worker
    # so that Ctrl-C is seen.
    import threading

    import numpy as np

    from fastkern._threads import INTERRUPTIBLE_IN_PLACE, interruptible

    def where(a):
        return threading.current_thread(), float(a.sum())

    side = int(np.sqrt(INTERRUPTIBLE_IN_PLACE))
    small = np.ones((side, side))
    large = np.ones((side + 1, side + 1))
    thread, total = interruptible(where, small)
    assert thread is threading.main_thread() and total == side * side
    thread, total = interruptible(where, large)
    assert thread is not threading.main_thread() and total == (side + 1) ** 2


def test_one_kernel_spec_serves_every_thread_count():
    # The spec describes the kernel only; the thread count is an argument of
    # the work (before, it was a field of the spec and None was "unset" there).
    import dataclasses

    from fastkern._kernel_api import KernelSpec
    from fastkern._operator import KernelOperator

    assert "n_threads" not in {f.name for f in dataclasses.fields(KernelSpec)}
    X = np.random.default_rng(3).normal(size=(300, 4))
    spec = KernelSpec.from_params("rbf", gamma=0.5)
    ref = np.exp(-0.5 * ((X[:, None, :] - X[None, :, :]) ** 2).sum(axis=2))
    V = np.random.default_rng(4).normal(size=(300, 2))
    for n_threads in (None, 1, 2, 3):
        np.testing.assert_allclose(spec.gram(X, n_threads=n_threads), ref, rtol=1e-12)
        np.testing.assert_allclose(spec.upper_gram(X, n_threads=n_threads).toarray(), ref,
                                   rtol=1e-12)
        op = KernelOperator.from_spec(X, spec, n_threads=n_threads)
        np.testing.assert_allclose(op.matmat(V), ref @ V, rtol=1e-10)
    with pytest.raises(ValueError, match="n_threads"):
        spec.gram(X, n_threads=0)
    with pytest.raises(TypeError, match="n_threads"):
        spec.upper_gram(X, n_threads=2.0)


def test_step_threads_follow_the_faster_count_and_probe_the_other():
    from fastkern._threads import StepThreads

    c = StepThreads(2)
    probe = StepThreads.PROBE_EVERY
    assert c.pick(1) == 2
    c.record(2, 2.0, 1)
    assert c.pick(2) == 1
    c.record(1, 1.0, 1)
    assert [c.pick(k) for k in range(3, 6)] == [1, 1, 1]
    assert c.pick(probe) == 2      # the other count is re-timed
    c.record(2, 0.1, 1)            # and wins now
    assert c.pick(probe + 1) == 2
    assert StepThreads(1).pick(probe) == 1


def test_threads_for_takes_its_own_threshold():
    from fastkern._threads import SERIAL_MULTIPLY_ADDS, threads_for

    assert threads_for(4, SERIAL_MULTIPLY_ADDS - 1, serial_below=SERIAL_MULTIPLY_ADDS) == 1
    assert threads_for(4, SERIAL_MULTIPLY_ADDS, serial_below=SERIAL_MULTIPLY_ADDS) == 4
