"""fastkern.show_config / config_info and the default thread count."""
import io
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import scipy

import fastkern
from fastkern import _openmp
from fastkern._validation import check_n_threads

KEYS = {"fastkern", "python", "numpy", "scipy", "openmp", "threads", "wait_policy", "cores",
        "blas"}


def test_config_info_keys_and_values():
    info = fastkern.config_info()
    assert set(info) == KEYS
    assert info["fastkern"] == fastkern.__version__
    assert info["python"] == sys.version.split()[0]
    assert info["numpy"] == np.__version__
    assert info["scipy"] == scipy.__version__
    assert info["openmp"] is _openmp.openmp_enabled()
    assert info["threads"] == _openmp.max_threads() >= 1
    assert info["cores"] == os.cpu_count()
    assert isinstance(info["blas"], list)
    for entry in info["blas"]:
        assert set(entry) == {"internal_api", "version", "num_threads", "architecture",
                              "filepath"}
    json.dumps(info)  # plain data, usable by the CLI


def test_config_info_reports_scipy_blas():
    # The Gram kernels call scipy's BLAS; threadpoolctl must see at least that one.
    from threadpoolctl import threadpool_info

    seen = {os.path.basename(i["filepath"]) for i in threadpool_info() if i["user_api"] == "blas"}
    assert seen, "threadpoolctl found no BLAS"
    assert {b["filepath"] for b in fastkern.config_info()["blas"]} == seen


def test_show_config_prints_openmp_threads_and_blas(capsys):
    fastkern.show_config()
    text = capsys.readouterr().out
    info = fastkern.config_info()
    state = "on" if info["openmp"] else "off (serial build)"
    assert f"fastkern {fastkern.__version__}" in text
    assert f"OpenMP: {state}; default threads: {info['threads']} of {info['cores']} cores" in text
    blas_lines = [line for line in text.splitlines() if line.startswith("BLAS: ")]
    assert len(blas_lines) == max(1, len(info["blas"]))
    for b, line in zip(info["blas"], blas_lines):
        assert b["internal_api"] in line and b["filepath"] in line
        assert f"{b['num_threads']} threads" in line


def test_show_config_to_a_file():
    buf = io.StringIO()
    fastkern.show_config(file=buf)
    assert "OpenMP:" in buf.getvalue() and "BLAS:" in buf.getvalue()


def _in_subprocess(code, **env):
    full_env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    full_env.update(env)
    # Outside the checkout: "python -c" puts the current directory first on
    # sys.path, and the source tree has no compiled extensions.
    res = subprocess.run([sys.executable, "-c", code], env=full_env, capture_output=True,
                         text=True, timeout=120, check=True, cwd=tempfile.gettempdir())
    return res.stdout


PROBE = ("import json, fastkern; from fastkern._validation import check_n_threads; "
         "print(json.dumps([fastkern.config_info()['threads'], check_n_threads(None)]))")


def test_omp_num_threads_changes_default_thread_count():
    one = json.loads(_in_subprocess(PROBE, OMP_NUM_THREADS="1"))
    three = json.loads(_in_subprocess(PROBE, OMP_NUM_THREADS="3"))
    if not _openmp.openmp_enabled():
        assert one == three == [1, 1]
        return
    assert one == [1, 1]
    assert three == [3, 3]


def test_omp_num_threads_shown_by_show_config():
    text = _in_subprocess("import fastkern; fastkern.show_config()", OMP_NUM_THREADS="1")
    assert "default threads: 1 of" in text


def test_default_n_threads_is_openmp_default_within_the_cpu_quota():
    from joblib import cpu_count

    assert check_n_threads(None) == max(1, min(_openmp.max_threads(), cpu_count()))
    assert check_n_threads(5) == 5


def test_default_n_threads_honours_a_container_cpu_quota(monkeypatch):
    # A cgroup quota is what joblib.cpu_count reads and OpenMP does not.
    import joblib

    from fastkern import _threads

    if _openmp.max_threads() < 2:
        pytest.skip("needs OpenMP with 2 or more default threads")
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(joblib, "cpu_count", lambda *a, **k: 1)
    _threads.default_n_threads.cache_clear()
    try:
        assert check_n_threads(None) == 1
        # OMP_NUM_THREADS set by the user wins over the quota, as in scikit-learn.
        monkeypatch.setenv("OMP_NUM_THREADS", "2")
        _threads.default_n_threads.cache_clear()
        assert check_n_threads(None) == _openmp.max_threads()
    finally:
        monkeypatch.undo()
        _threads.default_n_threads.cache_clear()
