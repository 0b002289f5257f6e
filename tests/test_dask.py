"""Matrix-free KernelPCA with the kernel passes on a local Dask cluster (127.0.0.1 only)."""
import os
import signal
import sys
import threading

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from fastkern import _dask, large_n  # noqa: E402
from fastkern.decomposition import KernelPCA  # noqa: E402

RNG = np.random.default_rng(7)
TIMEOUT = 30  # seconds per pass: a lost cluster fails the test instead of hanging it


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address=None,
                                       silence_logs=50)
    c = distributed.Client(cluster, timeout=TIMEOUT)
    try:
        yield c
    finally:
        c.close(timeout=TIMEOUT)
        cluster.close(timeout=TIMEOUT)


def _kpca(**kw):
    return KernelPCA(4, kernel="rbf", gamma=0.3, eigen_solver="matrix-free", random_state=0, **kw)


@pytest.fixture(scope="module")
def data():
    X, Xt = RNG.standard_normal((700, 5)), RNG.standard_normal((33, 5))
    ref = _kpca().fit(X)
    return X, Xt, ref


def test_numpy_input_with_client_matches_in_process(client, data):
    X, Xt, ref = data
    est = large_n.fit_kernel_pca(_kpca(), X, client=client, timeout=TIMEOUT)
    assert est._fit_solver == "matrix-free"
    np.testing.assert_allclose(est.eigenvalues_, ref.eigenvalues_, rtol=1e-8)
    np.testing.assert_allclose(est.eigenvectors_, ref.eigenvectors_, atol=1e-7)
    np.testing.assert_allclose(est._fit_row_means, ref._fit_row_means, rtol=1e-12)
    P = large_n.transform_kernel_pca(est, Xt, client=client, timeout=TIMEOUT)
    np.testing.assert_allclose(P, ref.transform(Xt), atol=1e-7)


def test_kernelpca_fit_with_client(client, data, monkeypatch):
    X, Xt, ref = data
    passes = []
    run = _dask._Passes.run
    monkeypatch.setattr(_dask._Passes, "run",
                        lambda self, V, A=None: passes.append(1) or run(self, V, A))
    est = _kpca()
    Z = est.fit_transform(X, client=client)  # the usage shown in fastkern._dask's docstring
    assert len(passes) > 2  # the row-mean pass and the eigensolver's products
    np.testing.assert_allclose(Z, ref.eigenvectors_ * np.sqrt(ref.eigenvalues_), atol=1e-7)
    n_passes = len(passes)
    np.testing.assert_allclose(est.transform(Xt), ref.transform(Xt), atol=1e-7)
    assert len(passes) > n_passes  # transform ran on the cluster too


def test_kernelpca_with_dask_array(client, data):
    X, Xt, ref = data
    est = _kpca().fit(da.from_array(X, chunks=(200, 5)))  # default client, no loading
    np.testing.assert_allclose(est.eigenvalues_, ref.eigenvalues_, rtol=1e-8)
    P = est.transform(da.from_array(Xt, chunks=(10, 5)))
    np.testing.assert_allclose(P, ref.transform(Xt), atol=1e-7)
    with pytest.raises(ValueError, match="matrix-free"):
        _kpca().set_params(eigen_solver="dense").fit(da.from_array(X, chunks=(200, 5)))


def test_dask_array_input(client, data):
    X, Xt, ref = data
    Xd = da.from_array(X, chunks=(123, 5))  # ragged row chunks
    est = large_n.fit_kernel_pca(_kpca(), Xd, timeout=TIMEOUT)  # default client
    np.testing.assert_allclose(est.eigenvalues_, ref.eigenvalues_, rtol=1e-8)
    assert isinstance(est.X_fit_, np.ndarray)
    np.testing.assert_array_equal(est.X_fit_, X)
    P = large_n.transform_kernel_pca(est, da.from_array(Xt, chunks=(10, 5)), client=client,
                                     timeout=TIMEOUT)
    np.testing.assert_allclose(P, ref.transform(Xt), atol=1e-7)


def test_worker_killed_mid_fit_is_retried(client, data, monkeypatch):
    X, _, ref = data
    pids = list(client.run(os.getpid).values())
    assert len(pids) == 2
    run = _dask._Passes.run
    calls = []
    killed = threading.Event()

    def kill_soon():
        threading.Event().wait(0.05)
        os.kill(pids[0], signal.SIGKILL)
        killed.set()

    def counting_run(self, V, A=None):
        calls.append(1)
        if len(calls) == 3:  # after the row-mean pass and the first product
            threading.Thread(target=kill_soon, daemon=True).start()
        return run(self, V, A)

    monkeypatch.setattr(_dask._Passes, "run", counting_run)
    est = large_n.fit_kernel_pca(_kpca(), X, client=client, timeout=TIMEOUT)
    assert killed.is_set() and len(calls) > 3
    np.testing.assert_allclose(est.eigenvalues_, ref.eigenvalues_, rtol=1e-8)
    np.testing.assert_allclose(est.eigenvectors_, ref.eigenvectors_, atol=1e-7)
    client.wait_for_workers(2, timeout=TIMEOUT)  # the nanny restarted it
    assert pids[0] not in client.run(os.getpid).values()


def test_openmp_threads_per_task_do_not_oversubscribe(client):
    client.wait_for_workers(2, timeout=TIMEOUT)  # a worker killed earlier may be restarting
    hosts = _dask._host_threads(client)
    assert hosts == {"tcp://127.0.0.1": 2}
    threads = client.submit(_dask._task_threads, hosts, None, pure=False).result(TIMEOUT)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert threads == max(1, cores // 2)
    assert client.submit(_dask._task_threads, hosts, 3, pure=False).result(TIMEOUT) == 3


def test_bad_dask_input(client):
    X = RNG.standard_normal((300, 6))
    with pytest.raises(ValueError, match="chunked along its columns.*rechunk"):
        large_n.fit_kernel_pca(_kpca(), da.from_array(X, chunks=(100, 3)), timeout=TIMEOUT)
    Xn = X.copy()
    Xn[250, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        large_n.fit_kernel_pca(_kpca(), da.from_array(Xn, chunks=(100, 6)), timeout=TIMEOUT)
    with pytest.raises(ValueError, match="2-D"):
        large_n.fit_kernel_pca(_kpca(), da.ones(10, chunks=5), timeout=TIMEOUT)
    with pytest.raises(TypeError, match="distributed.Client"):
        large_n.fit_kernel_pca(_kpca(), X, client="tcp://127.0.0.1:1")
    with pytest.raises(ValueError, match="nystrom"):
        large_n.fit_kernel_pca(KernelPCA(2, eigen_solver="nystrom"), X, client=client)


def test_missing_dask_gives_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "distributed", None)
    with pytest.raises(ImportError, match=r'pip install "fastkern\[dask\]"'):
        _dask._require()


def test_pass_retried_when_a_scatter_loses_its_worker(client, data, monkeypatch):
    # A worker dying while the client scatters to it fails the scatter with
    # CommClosedError; the pass must be run again, not the fit abandoned.
    from distributed.comm.core import CommClosedError

    X, _, ref = data
    scatter = type(client).scatter
    failures = []

    def flaky_scatter(self, *args, **kwargs):
        if not failures:
            failures.append(1)
            raise CommClosedError("worker lost during scatter")
        return scatter(self, *args, **kwargs)

    monkeypatch.setattr(type(client), "scatter", flaky_scatter)
    est = large_n.fit_kernel_pca(_kpca(), X, client=client, timeout=TIMEOUT)
    assert failures == [1]
    np.testing.assert_allclose(est.eigenvalues_, ref.eigenvalues_, rtol=1e-8)


def test_pass_timeout_is_not_retried(client, data, monkeypatch):
    calls = []

    def slow(self, *args, **kwargs):
        calls.append(1)
        raise TimeoutError("no answer")

    monkeypatch.setattr(type(client), "scatter", slow)
    with pytest.raises(TimeoutError):
        large_n.fit_kernel_pca(_kpca(), data[0], client=client, timeout=TIMEOUT)
    assert calls == [1]
