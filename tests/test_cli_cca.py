"""``fastkern cca``: kernel CCA of two column sets of a CSV file.

Run in-process through tests/test_cli.py's ``fastkern`` helper; the reference
is KernelCCA fitted on the same standardised columns.
"""
import re

import numpy as np
import pytest
from sklearn.preprocessing import StandardScaler
from test_cli import assert_usage_error, fastkern, read_csv, write_csv

from fastkern import KernelCCA


def _data(n=50, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 3))
    Y = np.column_stack([np.sin(X[:, 0]) + 0.2 * rng.standard_normal(n),
                         X[:, 1] ** 2 + 0.2 * rng.standard_normal(n)])
    return X, Y


@pytest.fixture
def table(tmp_path):
    """id (text), a, b, c (X), note (text), d, e (Y)."""
    X, Y = _data()
    rows = [["id", "a", "b", "c", "note", "d", "e"]]
    rows += [[f"s{i}", *map(repr, X[i].tolist()), "free text", *map(repr, Y[i].tolist())]
             for i in range(len(X))]
    return write_csv(tmp_path / "data.csv", rows), X, Y


def _correlations(text):
    match = re.search(r"canonical correlations \[([^\]]*)\]", text)
    assert match, text
    return np.array([float(v) for v in match.group(1).split(",")])


def _reference(X, Y, k, **kw):
    Xs = StandardScaler().fit_transform(X)
    Ys = StandardScaler().fit_transform(Y)
    model = KernelCCA(n_components=k, gamma=kw.pop("gamma", 1 / X.shape[1]),
                      gamma_y=kw.pop("gamma_y", 1 / Y.shape[1]), **kw)
    A, B = model.fit(Xs, Ys).transform(Xs, Ys)
    return model, A, B


def test_cca_names_out_file(tmp_path, table):
    data, X, Y = table
    out = tmp_path / "variates.csv"
    proc = fastkern("cca", data, "--x-columns", "a,b,c", "--y-columns", "d,e",
                    "--components", "3", "--out", out, "--threads", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    model, A, B = _reference(X, Y, 3)
    np.testing.assert_allclose(_correlations(proc.stdout), model.canonical_correlations_,
                               rtol=1e-3)
    assert "X: a,b,c, Y: d,e" in proc.stdout
    assert f"wrote {out} (50 rows x 6 columns)" in proc.stdout
    rows = read_csv(out)
    assert rows[0] == ["x_variate1", "x_variate2", "x_variate3",
                       "y_variate1", "y_variate2", "y_variate3"]
    V = np.array(rows[1:], dtype=float)
    np.testing.assert_allclose(V[:, :3], A, atol=1e-10)
    np.testing.assert_allclose(V[:, 3:], B, atol=1e-10)
    assert not list(tmp_path.glob(".*.part"))


def test_cca_stdout_csv_aliases_and_determinism(tmp_path, table):
    data, X, Y = table
    a = fastkern("cca", data, "--x-columns", "a,b,c", "--y-columns", "d,e", "--gamma", "0.4",
                 "--n-components", "2", cwd=tmp_path)
    assert a.returncode == 0, a.stderr
    # The CSV on stdout, the summary on stderr.
    assert a.stdout.splitlines()[0] == "x_variate1,x_variate2,y_variate1,y_variate2"
    assert len(a.stdout.splitlines()) == 51
    model, A, _ = _reference(X, Y, 2, gamma=0.4, gamma_y=0.4)
    np.testing.assert_allclose(_correlations(a.stderr), model.canonical_correlations_,
                               rtol=1e-3)
    b = fastkern("cca", data, "--x-columns", "a,b,c", "--y-columns", "d,e", "--gamma", "0.4",
                 "--components", "2", cwd=tmp_path)
    assert a.stdout == b.stdout and a.stderr == b.stderr
    out = tmp_path / "v.csv"
    c = fastkern("cca", data, "--x-columns", "a,b,c", "--y-columns", "d,e", "--gamma", "0.4",
                 "--output", out, cwd=tmp_path)
    assert c.returncode == 0, c.stderr
    assert out.read_text() == a.stdout


def test_cca_indices_kernels_and_no_scale(tmp_path):
    X, Y = _data(40, seed=1)
    data = write_csv(tmp_path / "d.csv", np.column_stack([X, Y]).tolist())
    proc = fastkern("cca", data, "--x-columns", "0,1,2", "--y-columns", "3,4", "--no-scale",
                    "--kernel", "rbf", "--gamma", "0.5", "--kernel-y", "linear",
                    "--regularization", "2", "--solver", "dense", "--components", "1",
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    model = KernelCCA(n_components=1, gamma=0.5, kernel_y="linear", regularization=2.0).fit(X, Y)
    np.testing.assert_allclose(_correlations(proc.stderr), model.canonical_correlations_,
                               rtol=1e-3)
    assert "X: x0,x1,x2, Y: x3,x4" in proc.stderr
    V = np.array(proc.stdout.splitlines()[1:][0].split(","), dtype=float)
    np.testing.assert_allclose(V, np.concatenate([m[0] for m in model.transform(X, Y)]),
                               atol=1e-10)


def test_cca_low_rank_solver_and_gamma_y(tmp_path, table):
    data, X, Y = table
    proc = fastkern("cca", data, "--x-columns", "a,b,c", "--y-columns", "d,e",
                    "--gamma-y", "0.7", "--solver", "incomplete_cholesky", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "gamma 0.3333 / 0.7" in proc.stderr and "solver incomplete_cholesky" in proc.stderr
    model, _, _ = _reference(X, Y, 2, gamma_y=0.7)
    np.testing.assert_allclose(_correlations(proc.stderr), model.canonical_correlations_,
                               rtol=1e-3)


def test_cca_rank_warning(tmp_path, table):
    data, _, _ = table
    proc = fastkern("cca", data, "--x-columns", "a,b", "--y-columns", "d", "--kernel", "linear",
                    "--components", "2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    warning = [ln for ln in proc.stderr.splitlines() if "warning" in ln]
    assert len(warning) == 1 and warning[0].startswith("fastkern cca: warning: only 1 canonical")


@pytest.mark.parametrize("args,fragments", [
    (["--x-columns", "a,zz", "--y-columns", "d"], ["--x-columns", "'zz' not found", "id, a, b"]),
    (["--x-columns", "a", "--y-columns", "9"], ["--y-columns", "index 9 is out of range"]),
    (["--x-columns", "a,b", "--y-columns", "b,d"], ["b", "both --x-columns and --y-columns"]),
    (["--x-columns", "a,a", "--y-columns", "d"], ["'a' is listed twice"]),
    (["--x-columns", "a,note", "--y-columns", "d"], ["column 'note'", "non-numeric", "free text"]),
    (["--x-columns", "a,", "--y-columns", "d"], ["--x-columns", "comma-separated"]),
    (["--y-columns", "d"], ["--x-columns"]),
    (["--x-columns", "a", "--y-columns", "d", "--components", "50"], ["needs at least 51"]),
    (["--x-columns", "a", "--y-columns", "d", "--regularization", "-1"], ["--regularization"]),
    (["--x-columns", "a", "--y-columns", "d", "--gamma", "0"], ["--gamma"]),
    (["--x-columns", "a", "--y-columns", "d", "--solver", "eig"], ["--solver"]),
])
def test_cca_usage_errors(tmp_path, table, args, fragments):
    data, _, _ = table
    out = tmp_path / "v.csv"
    assert_usage_error(fastkern("cca", data, *args, "--out", out, cwd=tmp_path), *fragments)
    assert not out.exists() and not list(tmp_path.glob(".*.part"))


def test_cca_file_errors(tmp_path, table):
    data, _, _ = table
    cols = ["--x-columns", "a", "--y-columns", "d"]
    assert_usage_error(fastkern("cca", tmp_path / "nope.csv", *cols, cwd=tmp_path),
                       "nope.csv", "no such file")
    assert_usage_error(fastkern("cca", data, *cols, "--out", data, cwd=tmp_path),
                       "would overwrite the input file")
    assert_usage_error(fastkern("cca", data, *cols, "--out", tmp_path, cwd=tmp_path),
                       "is a directory")
    assert_usage_error(fastkern("cca", data, *cols, "--out", tmp_path / "no" / "v.csv",
                                cwd=tmp_path), "does not exist")
    one = write_csv(tmp_path / "one.csv", [["a", "d"], ["1", "2"]])
    assert_usage_error(fastkern("cca", one, *cols, cwd=tmp_path), "1 data row")
    ragged = write_csv(tmp_path / "ragged.csv", [["a", "d"], ["1", "2"], ["3"]])
    assert_usage_error(fastkern("cca", ragged, *cols, cwd=tmp_path), "line 3", "1 fields")
    # A file that exists is left as it was when the command fails.
    out = tmp_path / "keep.csv"
    out.write_text("old\n")
    assert_usage_error(fastkern("cca", data, "--x-columns", "zz", "--y-columns", "d",
                                "--out", out, cwd=tmp_path), "zz")
    assert out.read_text() == "old\n"


def test_cca_help(tmp_path):
    proc = fastkern("cca", "--help", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for option in ("--x-columns", "--y-columns", "--kernel-y", "--gamma-y", "--regularization",
                   "--components", "--n-components", "--out", "--output", "--threads"):
        assert option in proc.stdout
    assert "cca" in fastkern("--help", cwd=tmp_path).stdout
