"""The fastkern command line, run as `python -m fastkern` in a subprocess."""
import csv
import json
import re
import subprocess
import sys

import matplotlib.image
import numpy as np
import pytest

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def fastkern(*args, cwd):
    """Run the command line; cwd must not be the source checkout, whose
    fastkern/ would shadow the installed package."""
    return subprocess.run([sys.executable, "-m", "fastkern", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=300)


def assert_png(path):
    assert path.read_bytes()[:8] == PNG_MAGIC
    img = matplotlib.image.imread(path)
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100


def assert_usage_error(proc, *fragments):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    for frag in fragments:
        assert frag in lines[0], lines[0]


def write_csv(path, rows):
    with open(path, "w", newline="") as f:
        csv.writer(f).writerows(rows)
    return path


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


@pytest.fixture(scope="module")
def blobs():
    """Three well separated 5-D clusters of 12, 13 and 14 points."""
    rng = np.random.default_rng(0)
    centres = np.array([[0.0] * 5, [6.0] * 5, [0.0, 6.0, 0.0, 6.0, 0.0]])
    sizes = [12, 13, 14]
    X = np.vstack([c + rng.standard_normal((m, 5)) for c, m in zip(centres, sizes)])
    y = np.repeat(["alpha", "beta", "gamma"], sizes)
    return X, y


# ---------------------------------------------------------------- demo


def test_demo(tmp_path):
    png = tmp_path / "fastkern-demo.png"  # the default, in the working directory
    proc = fastkern("demo", "--threads", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    acc = dict(re.findall(r"^(KernelPCA|KernelSIR)\s+LOO 1-NN accuracy[^:]*:\s*([0-9.]+)",
                          out, re.M))
    assert set(acc) == {"KernelPCA", "KernelSIR"}, out
    # The solver issue's threshold for KernelSIR; kernel PCA is unsupervised,
    # yet the cultivars stay clearly separated in its first two components.
    assert float(acc["KernelSIR"]) >= 0.97
    assert 0.9 <= float(acc["KernelPCA"]) <= 1.0
    eig = re.search(r"^KernelPCA\s+leading eigenvalues: \[([^\]]*)\]", out, re.M)
    vals = [float(v) for v in eig.group(1).split(",")]
    assert len(vals) == 2 and vals[0] >= vals[1] > 0
    assert_png(png)


# ---------------------------------------------------------------- kpca


def test_kpca_header_and_named_label(tmp_path, blobs):
    X, y = blobs
    data = write_csv(tmp_path / "d.csv",
                     [["f1", "f2", "cls", "f3", "f4", "f5"]]
                     + [[*x[:2], lab, *x[2:]] for x, lab in zip(X, y)])
    out, png = tmp_path / "proj.csv", tmp_path / "proj.png"
    proc = fastkern("kpca", data, "--kernel", "rbf", "--gamma", "0.1", "--components", "3",
                    "--label-column", "cls", "--out", out, "--plot", png, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = read_csv(out)
    assert rows[0] == ["PC1", "PC2", "PC3", "cls"]
    assert len(rows) == len(X) + 1 and all(len(r) == 4 for r in rows)
    assert [r[3] for r in rows[1:]] == list(y)
    Z = np.array([[float(v) for v in r[:3]] for r in rows[1:]])
    # Compare with scikit-learn's kernel PCA up to the sign of each component.
    from sklearn.decomposition import KernelPCA
    ref = KernelPCA(n_components=3, kernel="rbf", gamma=0.1).fit_transform(X)
    np.testing.assert_allclose(np.abs(Z), np.abs(ref), rtol=1e-6, atol=1e-8)
    assert_png(png)


def test_kpca_no_header_label_index_to_stdout(tmp_path, blobs):
    X, y = blobs
    data = write_csv(tmp_path / "d.csv", [[lab, *x] for x, lab in zip(X, y)])
    proc = fastkern("kpca", data, "--components", "2", "--label-column", "0", "--threads", "1",
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.reader(proc.stdout.splitlines()))
    assert rows[0] == ["PC1", "PC2", "x0"]
    assert len(rows) == len(X) + 1
    assert [r[2] for r in rows[1:]] == list(y)
    Z = np.array([[float(v) for v in r[:2]] for r in rows[1:]])
    from sklearn.decomposition import KernelPCA
    ref = KernelPCA(n_components=2, kernel="rbf", gamma=1 / 5).fit_transform(X)
    np.testing.assert_allclose(np.abs(Z), np.abs(ref), rtol=1e-6, atol=1e-8)


def test_kpca_numeric_only_without_label(tmp_path, blobs):
    X, _ = blobs
    data = write_csv(tmp_path / "d.csv", X.tolist())
    out, png = tmp_path / "p.csv", tmp_path / "p.png"
    proc = fastkern("kpca", data, "--kernel", "linear", "--components", "1", "--out", out,
                    "--plot", png, "--verbose", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = read_csv(out)
    assert rows[0] == ["PC1"] and len(rows) == len(X) + 1
    # Linear kernel PCA is PCA: the first component's variance is the top
    # eigenvalue of the covariance.
    z = np.array([float(r[0]) for r in rows[1:]])
    Xc = X - X.mean(axis=0)
    top = np.linalg.eigvalsh(Xc.T @ Xc)[-1]
    np.testing.assert_allclose(z @ z, top, rtol=1e-8)
    assert_png(png)


# ---------------------------------------------------------------- bench


def test_bench_quick(tmp_path):
    js, png = tmp_path / "b.json", tmp_path / "b.png"
    proc = fastkern("bench", "--quick", "--json", js, "--plot", png, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "cores" in out and "BLAS" in out and "peak memory" in out
    for title in ("RBF Gram", "centering", "KernelPCA", "KernelRidge"):
        assert title in out
    assert re.search(r"^RBF Gram\s+\d+\s+fastkern\s+\S+ \S+\s+[0-9.]+x\s+\S+ \S+$", out, re.M), out
    assert "[" in proc.stderr and "/" in proc.stderr  # the progress line
    doc = json.loads(js.read_text())
    assert {"machine", "sizes", "results"} <= set(doc)
    assert {"cores", "threads", "blas", "memory_method"} <= set(doc["machine"])
    res = doc["results"]
    assert {(r["task"], r["impl"]) for r in res} == {
        (t, i) for t in ("gram", "center", "kpca", "ridge")
        for i in ("naive", "numpy", "sklearn", "fastkern")}
    for r in res:
        assert {"n", "time_s", "peak_bytes", "speedup_vs_sklearn"} <= set(r)
        assert r["time_s"] > 0 and r["peak_bytes"] >= 0
        assert r["impl"] != "naive" or r["n"] == min(doc["sizes"])
    assert_png(png)


# ---------------------------------------------------------------- help


@pytest.mark.parametrize("cmd", [[], ["demo"], ["kpca"], ["bench"]])
def test_help(cmd, tmp_path):
    proc = fastkern(*cmd, "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "usage: fastkern" in proc.stdout
    assert "--threads" in proc.stdout or not cmd


# ---------------------------------------------------------------- errors


def test_error_missing_file(tmp_path):
    assert_usage_error(fastkern("kpca", tmp_path / "nope.csv", cwd=tmp_path),
                       "nope.csv", "no such file")


def test_error_missing_label_column(tmp_path):
    data = write_csv(tmp_path / "d.csv", [["a", "b", "c"], [1, 2, 3], [4, 5, 7], [1, 0, 1]])
    assert_usage_error(fastkern("kpca", data, "--label-column", "species", cwd=tmp_path),
                       "'species'", "a, b, c")
    assert_usage_error(fastkern("kpca", data, "--label-column", "3", cwd=tmp_path), "out of range")


def test_error_non_numeric(tmp_path):
    data = write_csv(tmp_path / "d.csv", [["a", "b"], [1, 2], [3, "x"], [4, 5]])
    assert_usage_error(fastkern("kpca", data, cwd=tmp_path),
                       "line 3", "'b'", "non-numeric", "'x'")
    # A first row with a number in it is data, so its typo is reported.
    data = write_csv(tmp_path / "e.csv", [[1, "y"], [3, 4], [5, 6]])
    assert_usage_error(fastkern("kpca", data, cwd=tmp_path),
                       "line 1", "'x1'", "non-numeric", "'y'")


def test_error_too_few_rows(tmp_path):
    data = write_csv(tmp_path / "d.csv", [["a", "b"], [1, 2]])
    assert_usage_error(fastkern("kpca", data, cwd=tmp_path), "1 data row")
    data = write_csv(tmp_path / "e.csv", [[1, 2], [3, 4], [5, 7]])
    assert_usage_error(fastkern("kpca", data, "--components", "3", cwd=tmp_path),
                       "--components 3", "has 3")


@pytest.mark.parametrize("value", ["0", "1.5"])
def test_error_bad_components(tmp_path, value):
    assert_usage_error(fastkern("kpca", tmp_path / "d.csv", "--components", value, cwd=tmp_path),
                       "--components", "positive integer")


def test_error_bad_threads(tmp_path):
    assert_usage_error(fastkern("bench", "--quick", "--threads", "-1", cwd=tmp_path), "--threads",
                       "positive integer")


def test_error_bad_numbers(tmp_path):
    assert_usage_error(fastkern("kpca", tmp_path / "d.csv", "--gamma", "-1", cwd=tmp_path),
                       "--gamma")
    assert_usage_error(fastkern("bench", "--sizes", "100,abc", cwd=tmp_path), "--sizes")
