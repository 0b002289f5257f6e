"""``fastkern test mmd|hsic``: the kernel tests on CSV files.

In-process runs through tests/test_cli.py's ``fastkern`` helper (as a fresh
``python -m fastkern`` would run); the numbers printed are checked against
the library functions on the same data.
"""
import re

import numpy as np
import pytest

from fastkern.kernel_tests import hsic_test, mmd_test
from test_cli import assert_usage_error, fastkern, fastkern_subprocess, write_csv


def _numbers(out):
    stat = float(re.search(r"^statistic \([^)]*\): (\S+)$", out, re.M).group(1))
    p = float(re.search(r"^p-value: (\S+) ", out, re.M).group(1))
    return stat, p


@pytest.fixture
def samples(tmp_path):
    rng = np.random.default_rng(0)
    A = rng.standard_normal((40, 3))
    B = rng.standard_normal((47, 3)) + 0.6
    write_csv(tmp_path / "a.csv", [["u", "v", "w"]] + A.tolist())
    write_csv(tmp_path / "b.csv", B.tolist())  # no header: detected
    return A, B, "a.csv", "b.csv"  # the commands run in tmp_path


@pytest.fixture
def paired(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((61, 2))
    y = X[:, 0] ** 2 + 0.2 * rng.standard_normal(61)
    z = rng.standard_normal(61)
    rows = [["p", "q", "r", "noise"]] + np.column_stack([X, y, z]).tolist()
    write_csv(tmp_path / "d.csv", rows)
    return np.column_stack([X, y, z]), "d.csv"


def test_mmd(tmp_path, samples):
    A, B, a, b = samples
    proc = fastkern("test", "mmd", a, b, "--seed", 3, "--permutations", 199, "--no-scale",
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert lines[0] == ("MMD two-sample test: a.csv (40 rows) vs b.csv (47 rows), 3 columns, "
                        "columns not scaled (--no-scale)")
    ref = mmd_test(A, B, gamma="median", n_permutations=199, random_state=3)
    stat, p = _numbers(proc.stdout)
    assert stat == pytest.approx(ref.statistic, rel=1e-9)
    assert p == pytest.approx(ref.pvalue, rel=1e-5)
    assert p < 0.01
    assert f"gamma {ref.kernel_params['gamma']:.6g} (median heuristic)" in proc.stdout
    # Deterministic: the same bytes again, and from a second thread count.
    again = fastkern("test", "mmd", a, b, "--seed", 3, "--permutations", 199, "--no-scale",
                     "--threads", 1, cwd=tmp_path)
    assert again.stdout == proc.stdout


def test_mmd_options(tmp_path, samples):
    A, B, a, b = samples
    proc = fastkern("test", "mmd", a, b, "--kernel", "laplacian", "--gamma", "0.3",
                    "--method", "gamma", "--estimator", "biased", "--no-scale", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    ref = mmd_test(A, B, kernel="laplacian", gamma=0.3, method="gamma", estimator="biased")
    stat, p = _numbers(proc.stdout)
    assert stat == pytest.approx(ref.statistic, rel=1e-9)
    assert p == pytest.approx(ref.pvalue, rel=1e-5)
    assert "Gamma approximation" in proc.stdout and "gamma 0.3 (given)" in proc.stdout
    lin = fastkern("test", "mmd", a, b, "--kernel", "linear", "--permutations", 50,
                   cwd=tmp_path)
    assert lin.returncode == 0 and "kernel: linear\n" in lin.stdout


def test_hsic(tmp_path, paired):
    D, path = paired
    proc = fastkern("test", "hsic", path, "--x-columns", "p,q", "--y-columns", "r",
                    "--permutations", 299, "--no-scale", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == \
        "HSIC independence test: d.csv (61 rows), X = p,q, Y = r, columns not scaled (--no-scale)"
    ref = hsic_test(D[:, :2], D[:, 2:3], gamma_x="median", gamma_y="median",
                    n_permutations=299, random_state=0)
    stat, p = _numbers(proc.stdout)
    assert stat == pytest.approx(ref.statistic, rel=1e-9)
    assert p == pytest.approx(ref.pvalue, rel=1e-5) and p < 0.01
    # Indices, and one option alone: the other view is the remaining columns.
    by_index = fastkern("test", "hsic", path, "--x-columns", "0,1", "--y-columns", "2",
                        "--permutations", 299, "--no-scale", cwd=tmp_path)
    assert by_index.stdout == proc.stdout
    rest = fastkern("test", "hsic", path, "--x-columns", "noise", "--permutations", 99,
                    "--seed", 5, "--no-scale", cwd=tmp_path)
    assert rest.returncode == 0, rest.stderr
    assert "X = noise, Y = p,q,r" in rest.stdout
    ref = hsic_test(D[:, 3:], D[:, :3], gamma_x="median", gamma_y="median",
                    n_permutations=99, random_state=5)
    assert _numbers(rest.stdout)[1] == pytest.approx(ref.pvalue, rel=1e-5)


def test_help(tmp_path):
    for args in (("test", "--help"), ("test", "mmd", "--help"), ("test", "hsic", "--help")):
        proc = fastkern(*args, cwd=tmp_path)
        assert proc.returncode == 0 and "usage: fastkern test" in proc.stdout


@pytest.mark.slow
def test_entry_point_in_a_subprocess(tmp_path, samples):
    _, _, a, b = samples
    proc = fastkern_subprocess("test", "mmd", a, b, "--permutations", 99, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == fastkern("test", "mmd", a, b, "--permutations", 99,
                                   cwd=tmp_path).stdout


def test_errors(tmp_path, samples, paired):
    _, _, a, b = samples
    _, d = paired
    c = write_csv(tmp_path / "c.csv", [[1, 2], [3, 4], [5, 7]])
    one = write_csv(tmp_path / "one.csv", [["u", "v", "w"], [1, 2, 3]])
    bad = write_csv(tmp_path / "bad.csv", [["u", "v", "w"], [1, 2, 3], [1, "x", 2]])
    cases = [
        (("test", "mmd", a, tmp_path / "nope.csv"), ["fastkern test mmd: error:", "no such file"]),
        (("test", "mmd", a, c), ["same columns"]),
        (("test", "mmd", a, one), ["at least 2 samples"]),
        (("test", "mmd", a, bad), ["line 3", "non-numeric"]),
        (("test", "mmd", a, b, "--gamma", "-1"), ["--gamma", "'median'", "'scale'"]),
        (("test", "mmd", a, b, "--permutations", "0"), ["--permutations"]),
        (("test", "mmd", a, b, "--seed", "x"), ["--seed"]),
        (("test", "mmd", a, b, "--method", "exact"), ["--method"]),
        (("test", "mmd", a), ["B.csv"]),
        (("test",), ["TEST"]),
        (("test", "hsic", d), ["--x-columns and/or --y-columns"]),
        (("test", "hsic", d, "--x-columns", "zz"), ["column 'zz' not found", "p, q, r"]),
        (("test", "hsic", d, "--x-columns", "9"), ["out of range"]),
        (("test", "hsic", d, "--x-columns", "p", "--y-columns", "p"), ["share a column"]),
        (("test", "hsic", d, "--x-columns", "p,,q"), ["--x-columns"]),
        (("test", "hsic", d, "--x-columns", "p,q,r,noise"), ["no feature columns left"]),
        (("test", "hsic", d, "--x-columns", "p", "--method", "gamma", "--threads", "0"),
         ["--threads"]),
    ]
    for args, fragments in cases:
        assert_usage_error(fastkern(*args, cwd=tmp_path), *fragments)
    few = write_csv(tmp_path / "few.csv", [["a", "b"], [1, 2], [2, 1], [3, 3]])
    assert_usage_error(fastkern("test", "hsic", few, "--x-columns", "a", cwd=tmp_path),
                       "fastkern test hsic: error:", "at least 4 samples")


def _standardised(M):
    return (M - M.mean(axis=0)) / M.std(axis=0)


def test_columns_are_standardised_by_default(tmp_path, paired, samples):
    """Issue 26, item 10: as kpca and cca, the tests scale each column first.

    On diabetes, sex against the other columns gave p = 0.71 unscaled (the
    target, 25-346, swamps the median-heuristic gamma) and 0.001 scaled.
    Here a dependent column on a scale 1000 times the others hides the
    dependence of the other two unless the columns are standardised.
    """
    D, path = paired
    big = D.copy()
    big[:, 3] *= 1000.0  # the noise column, independent of p
    write_csv(tmp_path / "big.csv", [["p", "q", "r", "noise"]] + big.tolist())
    args = ("test", "hsic", "big.csv", "--x-columns", "p", "--y-columns", "r,noise",
            "--permutations", 199)
    scaled = fastkern(*args, cwd=tmp_path)
    assert scaled.returncode == 0, scaled.stderr
    assert "columns standardised (--no-scale to turn off)" in scaled.stdout
    ref = hsic_test(_standardised(big[:, :1]), _standardised(big[:, 2:]), gamma_x="median",
                    gamma_y="median", n_permutations=199, random_state=0)
    assert _numbers(scaled.stdout)[1] == pytest.approx(ref.pvalue, rel=1e-5)
    raw = fastkern(*args, "--no-scale", cwd=tmp_path)
    assert _numbers(scaled.stdout)[1] < 0.01 < 0.1 < _numbers(raw.stdout)[1]
    # mmd: one scaling for both samples, the pooled one.
    A, B, a, b = samples
    proc = fastkern("test", "mmd", a, b, "--permutations", 99, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    pooled = _standardised(np.vstack([A, B]))
    ref = mmd_test(pooled[:40], pooled[40:], gamma="median", n_permutations=99, random_state=0)
    assert _numbers(proc.stdout)[0] == pytest.approx(ref.statistic, rel=1e-9)


def test_id_column_missing_values_and_gamma_strings(tmp_path, paired):
    """Issue 26, items 9, 11 and 13 for the tests."""
    D, _ = paired
    ids = [f"s{i}" for i in range(len(D))]
    rows = [["id", "p", "q", "r"]] + [[i, *row[:3]] for i, row in zip(ids, D.tolist())]
    write_csv(tmp_path / "ids.csv", rows)
    # A text id: the error says how to leave it out, and no longer suggests
    # --label-column, which `fastkern test` does not take.
    proc = fastkern("test", "hsic", "ids.csv", "--x-columns", "p", cwd=tmp_path)
    assert_usage_error(proc, "column 'id'", "non-numeric value 's0'", "--drop-columns id")
    assert "--label-column" not in proc.stderr
    ok = fastkern("test", "hsic", "ids.csv", "--x-columns", "p", "--drop-columns", "id",
                  "--permutations", 99, "--no-scale", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "X = p, Y = q,r" in ok.stdout
    ref = hsic_test(D[:, :1], D[:, 1:3], gamma_x="median", gamma_y="median",
                    n_permutations=99, random_state=0)
    assert _numbers(ok.stdout)[0] == pytest.approx(ref.statistic, rel=1e-9)
    # A missing value: named as such, and --drop-missing drops its row.
    holes = [["p", "q"]] + [[f"{x:.17g}", f"{y:.17g}"] for x, y in D[:, :2]]
    holes[5][1] = ""
    write_csv(tmp_path / "holes.csv", holes)
    proc = fastkern("test", "hsic", "holes.csv", "--x-columns", "p", cwd=tmp_path)
    assert_usage_error(proc, "line 6", "column 'q'", "missing value", "--drop-missing")
    ok = fastkern("test", "hsic", "holes.csv", "--x-columns", "p", "--drop-missing",
                  "--permutations", 99, "--no-scale", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "dropped 1 of 61 rows" in ok.stderr and "(60 rows)" in ok.stdout
    keep = np.arange(len(D)) != 4
    ref = hsic_test(D[keep, :1], D[keep, 1:2], gamma_x="median", gamma_y="median",
                    n_permutations=99, random_state=0)
    assert _numbers(ok.stdout)[0] == pytest.approx(ref.statistic, rel=1e-9)
    # gamma="scale" everywhere a gamma is taken: 1 / (features * variance).
    sc = fastkern("test", "hsic", "holes.csv", "--x-columns", "p", "--drop-missing",
                  "--gamma", "scale", "--permutations", 99, "--no-scale", cwd=tmp_path)
    assert sc.returncode == 0, sc.stderr
    gx = 1.0 / D[keep, 0].var()
    assert f"X kernel: rbf, gamma {gx:.6g} (scale)" in sc.stdout


def test_every_kernel_is_offered_with_its_parameters(tmp_path, paired):
    """Issue 26, item 13: the kernels come from fastkern.pairwise's table, and
    degree/coef0/order reach the kernel."""
    from fastkern.pairwise import KERNEL_PARAMS

    _, path = paired
    help_text = fastkern("test", "hsic", "--help", cwd=tmp_path).stdout
    for kernel in KERNEL_PARAMS:
        assert kernel in help_text
    D, _ = paired
    proc = fastkern("test", "hsic", path, "--x-columns", "p", "--y-columns", "q",
                    "--kernel", "poly", "--degree", "2", "--coef0", "0.5", "--gamma", "0.7",
                    "--permutations", 99, "--no-scale", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    params = {"degree": 2.0, "coef0": 0.5}
    ref = hsic_test(D[:, :1], D[:, 1:2], kernel_x="poly", kernel_y="poly", gamma_x=0.7,
                    gamma_y=0.7, kernel_params_x=params, kernel_params_y=params,
                    n_permutations=99, random_state=0)
    assert _numbers(proc.stdout)[0] == pytest.approx(ref.statistic, rel=1e-9)
