"""The command line on CSV files as people have them (issue 26, items 9-13).

In-process runs through tests/test_cli.py's ``fastkern`` helper; the numbers
are checked against scikit-learn or NumPy on the same data.
"""
import csv
import subprocess
import sys

import numpy as np
import pytest

from test_cli import assert_usage_error, fastkern, write_csv


@pytest.fixture
def measured(tmp_path):
    """60 rows: an integer id 1..60, three measurements, a class and a continuous target."""
    rng = np.random.default_rng(7)
    X = rng.standard_normal((60, 3)) * [1.0, 10.0, 100.0]
    cls = np.where(X[:, 0] > 0, "up", "down")
    target = X[:, 0] + 0.1 * rng.standard_normal(60)
    rows = [["id", "a", "b", "c", "cls", "target"]] + [
        [i + 1, *map(_num, x), c, _num(t)] for i, (x, c, t) in enumerate(zip(X, cls, target))]
    return write_csv(tmp_path / "m.csv", rows), X, cls, target


def _num(v):
    return repr(float(v))


def _standardised(X):
    return (X - X.mean(axis=0)) / X.std(axis=0)


def _pcs(stdout):
    rows = list(csv.reader(stdout.splitlines()))
    return rows[0], np.array([[float(v) for v in r[:2]] for r in rows[1:]])


def _reference(X, k=2):
    from sklearn.decomposition import KernelPCA

    return KernelPCA(k, kernel="rbf", gamma=1 / X.shape[1]).fit_transform(_standardised(X))


# ---------------------------------------------------------------- item 9: id columns


def test_text_id_column_error_names_drop_columns(tmp_path, measured):
    data, X, _, _ = measured
    text = write_csv(tmp_path / "t.csv", [["id", "a", "b"]] + [[f"s{i}", *map(_num, x[:2])]
                                                            for i, x in enumerate(X)])
    proc = fastkern("kpca", text, cwd=tmp_path)
    assert_usage_error(proc, "line 2", "column 'id'", "non-numeric value 's0'",
                       "--drop-columns id", "--label-column")
    ok = fastkern("kpca", text, "--drop-columns", "id", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    _, Z = _pcs(ok.stdout)
    np.testing.assert_allclose(np.abs(Z), np.abs(_reference(X[:, :2])), atol=1e-7)


def test_integer_id_column_is_reported_and_can_be_dropped(tmp_path, measured):
    data, X, _, _ = measured
    proc = fastkern("kpca", data, "--label-column", "cls", "--drop-columns", "target",
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert ("fastkern kpca: warning: column 'id' looks like a row id (the integers 1 to 60 in "
            "row order) and is used as a feature; --drop-columns id leaves it out") in proc.stderr
    ok = fastkern("kpca", data, "--label-column", "cls", "--drop-columns", "id,target",
                  cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "row id" not in ok.stderr and "features (a,b,c)" in ok.stderr
    header, Z = _pcs(ok.stdout)
    assert header == ["PC1", "PC2", "cls"]
    np.testing.assert_allclose(np.abs(Z), np.abs(_reference(X)), atol=1e-7)
    # By 0-based index too; a dropped column may not also be the label.
    by_index = fastkern("kpca", data, "--label-column", "4", "--drop-columns", "0,5",
                        cwd=tmp_path)
    assert by_index.stdout == ok.stdout
    assert_usage_error(fastkern("kpca", data, "--drop-columns", "nope", cwd=tmp_path),
                       "--drop-columns", "'nope' not found")


# ---------------------------------------------------------------- item 11: missing values


@pytest.mark.parametrize("hole", ["", "NA", "nan", "?"])
def test_missing_value_is_named_and_drop_missing_drops_its_row(tmp_path, measured, hole):
    _, X, _, _ = measured
    rows = [["a", "b", "c"]] + [list(map(_num, x)) for x in X]
    rows[4][1] = hole
    data = write_csv(tmp_path / "h.csv", rows)
    proc = fastkern("kpca", data, cwd=tmp_path)
    assert_usage_error(proc, "line 5", "column 'b'", f"missing value {hole!r}", "--drop-missing")
    assert "non-numeric" not in proc.stderr
    ok = fastkern("kpca", data, "--drop-missing", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "fastkern kpca: dropped 1 of 60 rows with a missing value (--drop-missing)" \
        in ok.stderr
    _, Z = _pcs(ok.stdout)
    np.testing.assert_allclose(np.abs(Z), np.abs(_reference(np.delete(X, 3, axis=0))),
                               atol=1e-7)


def test_cca_drop_missing_and_columns(tmp_path, measured):
    from fastkern.cca import KernelCCA

    _, X, _, target = measured
    rows = [["note", "a", "b", "c", "t"]] + [["x", *map(_num, x), _num(t)]
                                             for x, t in zip(X, target)]
    rows[10][4] = "NA"
    data = write_csv(tmp_path / "v.csv", rows)
    assert_usage_error(fastkern("cca", data, "--x-columns", "a,b", "--y-columns", "t",
                                cwd=tmp_path), "line 11", "missing value 'NA'")
    proc = fastkern("cca", data, "--x-columns", "a,b", "--y-columns", "t", "--drop-missing",
                    "--components", "1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "dropped 1 of 60 rows" in proc.stderr
    keep = np.arange(60) != 9
    Xs, Ys = _standardised(X[keep, :2]), _standardised(target[keep, None])
    ref = KernelCCA(1, gamma=0.5, gamma_y=1.0).fit(Xs, Ys)
    assert f"canonical correlations [{ref.canonical_correlations_[0]:.4g}]" in proc.stderr
    assert_usage_error(fastkern("cca", data, "--x-columns", "a", "--y-columns", "t",
                                "--drop-columns", "a", cwd=tmp_path), "--drop-columns")


# ---------------------------------------------------------------- item 12: the plot


def _figure(monkeypatch):
    """Keep the figure kpca draws (its axes are checked instead of pixels)."""
    from fastkern.cli import _plot

    kept = []
    save = _plot.save

    def keep(fig, out):
        kept.append(fig)
        save(fig, out)
    monkeypatch.setattr(_plot, "save", keep)
    return kept


def _total_variance(Xs):
    from sklearn.metrics.pairwise import rbf_kernel
    from sklearn.preprocessing import KernelCenterer

    return np.trace(KernelCenterer().fit_transform(rbf_kernel(Xs, gamma=1 / Xs.shape[1])))


def test_numeric_label_gets_a_colour_bar_and_axes_their_variance_share(tmp_path, measured,
                                                                       monkeypatch):
    data, X, _, _ = measured
    kept = _figure(monkeypatch)
    proc = fastkern("kpca", data, "--drop-columns", "id,cls", "--label-column", "target",
                    "--plot", tmp_path / "p.png", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Warning" not in proc.stderr and "warning" not in proc.stderr, proc.stderr
    (fig,) = kept
    ax, bar = fig.axes  # the scatter and its colour bar
    assert ax.get_legend() is None and bar.get_ylabel() == "target"
    from sklearn.decomposition import KernelPCA

    Xs = _standardised(X)
    ev = KernelPCA(2, kernel="rbf", gamma=1 / 3).fit(Xs).eigenvalues_
    share = ev / _total_variance(Xs)
    assert ax.get_xlabel() == f"PC1 ({share[0]:.1%} of total variance)"
    assert ax.get_ylabel() == f"PC2 ({share[1]:.1%} of total variance)"
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"


def test_a_few_classes_get_a_legend(tmp_path, measured, monkeypatch):
    data, _, _, _ = measured
    kept = _figure(monkeypatch)
    proc = fastkern("kpca", data, "--drop-columns", "id,target", "--label-column", "cls",
                    "--plot", tmp_path / "p.png", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (fig,) = kept
    (ax,) = fig.axes
    assert sorted(t.get_text() for t in ax.get_legend().get_texts()) == ["down", "up"]


def test_slow_legend_placement_does_not_warn(tmp_path, monkeypatch):
    """matplotlib warns when placing a loc="best" legend took over a second, as
    on a stalled machine; the figure is still right, so the user is not told."""
    pytest.importorskip("matplotlib")
    import warnings

    from matplotlib.legend import Legend

    from fastkern.cli import _common, _plot

    place = Legend._find_best_position

    def slow(self, *args, **kwargs):
        warnings.warn('Creating legend with loc="best" can be slow with large amounts '
                      'of data.', UserWarning, stacklevel=2)
        return place(self, *args, **kwargs)
    monkeypatch.setattr(Legend, "_find_best_position", slow)
    plt = _plot.pyplot()
    fig, ax = plt.subplots()
    _plot.scatter(fig, ax, np.arange(8.0).reshape(4, 2), np.array(["a", "b", "a", "b"]),
                  "title", "x", "y", label_title="cls")
    out = _common.Output(str(tmp_path / "p.png"), "--plot", plot=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _plot.save(fig, out)
    out.commit()
    plt.close(fig)
    assert not [w for w in caught if "legend" in str(w.message)], [str(w.message) for w in caught]
    assert (tmp_path / "p.png").stat().st_size > 0


# ---------------------------------------------------------------- item 13


def test_unknown_option_names_the_subcommand(tmp_path, measured):
    data, _, _, _ = measured
    assert_usage_error(fastkern("kpca", data, "--bogus", cwd=tmp_path),
                       "fastkern kpca: error: unrecognized arguments: --bogus")
    assert_usage_error(fastkern("test", "hsic", data, "--x-columns", "a", "--bogus",
                                cwd=tmp_path),
                       "fastkern test hsic: error: unrecognized arguments: --bogus")


@pytest.mark.parametrize("gamma", ["median", "scale"])
def test_kpca_and_cca_take_gamma_strings(tmp_path, measured, gamma):
    from fastkern._kernel_api import resolve_gamma

    data, X, _, _ = measured
    proc = fastkern("kpca", data, "--drop-columns", "id,cls,target", "--gamma", gamma,
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    g = resolve_gamma(gamma, _standardised(X), "rbf")
    assert f"gamma {g:.4g} ({gamma})" in proc.stderr
    from sklearn.decomposition import KernelPCA

    ref = KernelPCA(2, kernel="rbf", gamma=g).fit_transform(_standardised(X))
    np.testing.assert_allclose(np.abs(_pcs(proc.stdout)[1]), np.abs(ref), atol=1e-7)
    cca = fastkern("cca", data, "--x-columns", "a,b", "--y-columns", "c", "--gamma", gamma,
                   cwd=tmp_path)
    assert cca.returncode == 0, cca.stderr
    gx = resolve_gamma(gamma, _standardised(X[:, :2]), "rbf")
    gy = resolve_gamma(gamma, _standardised(X[:, 2:]), "rbf")
    assert f"gamma {gx:.4g} / {gy:.4g}" in cca.stderr


def test_every_kernel_and_solver_is_offered(tmp_path, measured):
    from sklearn.metrics.pairwise import polynomial_kernel
    from sklearn.preprocessing import KernelCenterer

    from fastkern.decomposition import EIGEN_SOLVERS
    from fastkern.pairwise import KERNEL_PARAMS

    data, X, _, _ = measured
    help_text = fastkern("kpca", "--help", cwd=tmp_path).stdout
    for name in list(KERNEL_PARAMS) + list(EIGEN_SOLVERS):
        assert name in help_text, name
    positive = write_csv(tmp_path / "pos.csv", np.abs(X).tolist())
    for name in KERNEL_PARAMS:
        proc = fastkern("kpca", data, "--drop-columns", "id,cls,target", "--kernel", name,
                        "--components", "1", cwd=tmp_path)
        if "negative values" in proc.stderr:  # chi2 and the like: raw non-negative data
            assert "use --no-scale" in proc.stderr
            proc = fastkern("kpca", positive, "--no-scale", "--kernel", name, "--components",
                            "1", cwd=tmp_path)
        assert proc.returncode == 0, (name, proc.stderr)
    # Kernel parameters reach the kernel: a degree-2 polynomial, coef0 0.5.
    proc = fastkern("kpca", data, "--drop-columns", "id,cls,target", "--kernel", "poly",
                    "--degree", "2", "--coef0", "0.5", "--gamma", "0.4", "--solver", "dense",
                    cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    K = KernelCenterer().fit_transform(
        polynomial_kernel(_standardised(X), degree=2, gamma=0.4, coef0=0.5))
    top = np.sort(np.linalg.eigvalsh(K))[::-1][:2]
    np.testing.assert_allclose(np.sum(_pcs(proc.stdout)[1] ** 2, axis=0), top, rtol=1e-8)
    # The incomplete Cholesky solver, missing from the old hand-written list.
    ichol = fastkern("kpca", data, "--drop-columns", "id,cls,target", "--solver",
                     "incomplete_cholesky", cwd=tmp_path)
    assert ichol.returncode == 0 and "solver incomplete_cholesky" in ichol.stderr, ichol.stderr


# ---------------------------------------------------------------- matplotlib is optional


@pytest.mark.slow
def test_no_matplotlib_at_import_time(tmp_path):
    code = ("import sys, fastkern, fastkern.cli\n"
            "from fastkern.cli import bench, cca, demo, kpca, test, _csv, _plot\n"
            "fastkern.cli.build_parser()\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=tmp_path, timeout=120)
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr


_WITHOUT_MATPLOTLIB = """
import sys
sys.modules["matplotlib"] = None  # import matplotlib raises ImportError
from fastkern.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.slow
def test_without_matplotlib(tmp_path, measured):
    data, _, _, _ = measured
    run = lambda *args: subprocess.run(  # noqa: E731
        [sys.executable, "-c", _WITHOUT_MATPLOTLIB, *map(str, args)], capture_output=True,
        text=True, cwd=tmp_path, timeout=300)
    demo = run("demo")
    assert demo.returncode == 0, demo.stderr
    assert "KernelPCA  LOO 1-NN accuracy" in demo.stdout and "wrote" not in demo.stdout
    assert demo.stderr.strip().splitlines() == [
        'fastkern demo: no figure written: the figure needs matplotlib '
        '(pip install matplotlib)']
    assert not (tmp_path / "fastkern-demo.png").exists()
    plot = run("kpca", data, "--plot", tmp_path / "p.png")
    assert plot.returncode == 2 and plot.stdout == ""
    assert plot.stderr.strip().splitlines() == [
        'fastkern kpca: error: --plot needs matplotlib: pip install matplotlib']


def test_ctrl_c_while_the_command_starts(tmp_path, monkeypatch):
    """Ctrl-C while the parser and the commands' modules load: one line naming the
    command and status 130, no traceback."""
    from fastkern import cli

    def interrupted():
        raise KeyboardInterrupt
    monkeypatch.setattr(cli, "build_parser", interrupted)
    proc = fastkern("kpca", "--threads", "2", "d.csv", cwd=tmp_path)
    assert proc.returncode == 130
    assert proc.stderr == "fastkern kpca: interrupted\n"


# ---------------------------------------------------------------- id columns, dropped rows


def test_id_columns_are_carried_to_the_output_and_not_used(tmp_path, measured):
    # --drop-columns id lost the join key; --id-columns writes it first, as
    # read (text, or a number left as written), and keeps it out of the
    # features: the projection is the one without the column.
    _, X, _, _ = measured
    rows = [["id", "a", "b", "c", "site"]] + [
        [f"r{i:03d}", *map(_num, x), "0.50" if i % 2 else "x"] for i, x in enumerate(X)]
    rows[4][2] = "NA"
    data = write_csv(tmp_path / "ids.csv", rows)
    proc = fastkern("kpca", data, "--id-columns", "id,site", "--drop-missing", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = list(csv.reader(proc.stdout.splitlines()))
    assert out[0][:3] == ["id", "site", "PC1"]
    kept = [i for i in range(len(X)) if i != 3]
    assert [r[0] for r in out[1:]] == [f"r{i:03d}" for i in kept]
    assert [r[1] for r in out[1:]] == ["0.50" if i % 2 else "x" for i in kept]
    Z = np.array([r[2:] for r in out[1:]], dtype=float)
    np.testing.assert_allclose(np.abs(Z), np.abs(_reference(np.delete(X, 3, axis=0))),
                               atol=1e-7)
    cca = fastkern("cca", data, "--x-columns", "a,b", "--y-columns", "c", "--id-columns", "id",
                   "--drop-missing", "--components", "1", cwd=tmp_path)
    assert cca.returncode == 0, cca.stderr
    variates = list(csv.reader(cca.stdout.splitlines()))
    assert variates[0] == ["id", "x_variate1", "y_variate1"]
    assert [r[0] for r in variates[1:]] == [f"r{i:03d}" for i in kept]


@pytest.mark.parametrize("args, message", [
    (["kpca", "--id-columns", "id", "--drop-columns", "id"], "both used and in --drop-columns"),
    (["kpca", "--id-columns", "nope"], "--id-columns: column 'nope' not found"),
    (["kpca", "--id-columns", "id", "--label-column", "id"], "both used and in --id-columns"),
    (["kpca"], "--id-columns to carry it to the output"),
    (["cca", "--x-columns", "a", "--y-columns", "b", "--id-columns", "a"],
     "both used and in --id-columns"),
])
def test_id_columns_errors_name_the_option(tmp_path, args, message):
    data = write_csv(tmp_path / "d.csv", [["id", "a", "b"], ["p", "1", "2"], ["q", "2", "1"],
                                          ["s", "3", "0"]])
    assert_usage_error(fastkern(args[0], data, *args[1:], cwd=tmp_path), message)


def test_drop_missing_lists_the_dropped_lines(tmp_path, measured):
    _, X, _, _ = measured
    rows = [["a", "b", "c"]] + [list(map(_num, x)) for x in X]
    for i in range(1, 15):
        rows[i][0] = "?"
    data = write_csv(tmp_path / "m.csv", rows)
    proc = fastkern("kpca", data, "--drop-missing", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    # Lines 2..15 of the file (line 1 is the header): ten named, then the count.
    assert ("dropped 14 of 60 rows with a missing value (--drop-missing): lines "
            "2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 4 more of") in proc.stderr


# ---------------------------------------------------------------- decimal comma


def test_a_decimal_comma_file_reads_as_its_decimal_point_twin(tmp_path, measured):
    # A spreadsheet's export in many locales: ';' between cells, ',' in numbers.
    # It was refused with a hint to drop the column.
    _, X, _, _ = measured
    point = [["a", "b", "c"]] + [[f"{v:.6f}" for v in x] for x in X]
    comma = [[c.replace(".", ",") for c in row] for row in point]
    twin = write_csv(tmp_path / "point.csv", point)
    data = tmp_path / "comma.csv"
    data.write_text("\n".join(";".join(row) for row in comma) + "\n", encoding="utf-8")
    expected = fastkern("kpca", twin, cwd=tmp_path)
    for extra in ([], ["--decimal", ","]):
        proc = fastkern("kpca", data, *extra, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == expected.stdout
    # Told the numbers have points, the command names the way out.
    assert_usage_error(fastkern("kpca", data, "--decimal", ".", cwd=tmp_path),
                       "non-numeric value", "--decimal , reads a decimal comma")
    assert_usage_error(fastkern("kpca", twin, "--decimal", ",", cwd=tmp_path),
                       "--decimal , needs a file whose delimiter is not a comma")
    hsic = fastkern("test", "hsic", data, "--x-columns", "a", "--y-columns", "b",
                    "--permutations", "20", cwd=tmp_path)
    assert hsic.returncode == 0, hsic.stderr


# ---------------------------------------------------------------- fastkern gram


def test_gram_writes_the_gram_functions_matrix(tmp_path, measured):
    # The kernel matrix of the file's rows, read and scaled as kpca reads
    # and scales them: CSV that reads back as the same float64, or .npy.
    import fastkern as fk

    _, X, _, _ = measured
    rows = [["id", "a", "b", "c"]] + [[f"r{i}", *map(_num, x)] for i, x in enumerate(X)]
    data = write_csv(tmp_path / "g.csv", rows)
    Xs = _standardised(X)
    proc = fastkern("gram", data, "--drop-columns", "id", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    K = np.loadtxt(proc.stdout.splitlines(), delimiter=",")
    np.testing.assert_array_equal(K, fk.rbf_kernel(Xs, gamma=1 / 3))
    assert "kernel matrix (rbf, gamma 0.3333) of 60 samples x 3 features" in proc.stderr
    out = tmp_path / "K.npy"
    proc = fastkern("gram", data, "--id-columns", "id", "--no-scale", "--kernel", "poly",
                    "--degree", "2", "--out", out, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_allclose(np.load(out), fk.polynomial_kernel(X, degree=2),
                               rtol=1e-12)
    labelled = fastkern("gram", data, "--id-columns", "id", "--kernel", "linear",
                        cwd=tmp_path)
    lines = list(csv.reader(labelled.stdout.splitlines()))
    assert lines[0] == ["id"] + [f"r{i}" for i in range(len(X))]
    assert [r[0] for r in lines[1:]] == [f"r{i}" for i in range(len(X))]
    np.testing.assert_allclose(np.array([r[1:] for r in lines[1:]], dtype=float),
                               Xs @ Xs.T, rtol=1e-12, atol=1e-12)


# ---------------------------------------------------------------- fastkern ridge


def _ridge_files(tmp_path):
    rng = np.random.default_rng(7)
    X = rng.standard_normal((90, 3))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.standard_normal(90)
    train = write_csv(tmp_path / "train.csv", [["id", "a", "b", "c", "y"]] + [
        [f"r{i}", *map(_num, X[i]), _num(y[i])] for i in range(70)])
    # The test file's columns in another order, with the target.
    test = write_csv(tmp_path / "test.csv", [["c", "y", "a", "id", "b"]] + [
        [_num(X[i, 2]), _num(y[i]), _num(X[i, 0]), f"r{i}", _num(X[i, 1])]
        for i in range(70, 90)])
    return X, y, train, test


def test_ridge_predicts_as_kernel_ridge_on_scaled_columns(tmp_path):
    # A model fitted on TRAIN.csv's scaled columns predicts TEST.csv's rows,
    # scaled by the training rows: scikit-learn's StandardScaler and
    # fastkern.KernelRidge give the reference.
    from sklearn.preprocessing import StandardScaler

    import fastkern as fk

    X, y, train, test = _ridge_files(tmp_path)
    proc = fastkern("ridge", train, "--target", "y", "--id-columns", "id", "--predict", test,
                    "--penalty", "0.5", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.reader(proc.stdout.splitlines()))
    assert rows[0] == ["id", "prediction"]
    assert [r[0] for r in rows[1:]] == [f"r{i}" for i in range(70, 90)]
    pred = np.array([float(r[1]) for r in rows[1:]])
    scaler = StandardScaler().fit(X[:70])
    model = fk.KernelRidge(alpha=0.5, kernel="rbf", gamma=1 / 3).fit(scaler.transform(X[:70]),
                                                                     y[:70])
    expected = model.predict(scaler.transform(X[70:]))
    np.testing.assert_allclose(pred, expected, rtol=1e-12, atol=1e-12)
    rmse = np.sqrt(np.mean((expected - y[70:]) ** 2))
    assert f"RMSE {rmse:.4g}" in proc.stderr
    fitted = fastkern("ridge", train, "--target", "y", "--drop-columns", "id", "--no-scale",
                      "--kernel", "linear", cwd=tmp_path)
    assert fitted.returncode == 0, fitted.stderr
    values = np.array([float(r[0]) for r in list(csv.reader(fitted.stdout.splitlines()))[1:]])
    linear = fk.KernelRidge(alpha=1.0, kernel="linear").fit(X[:70], y[:70])
    np.testing.assert_allclose(values, linear.predict(X[:70]), rtol=1e-10, atol=1e-12)


def test_ridge_errors_name_the_option(tmp_path):
    X, y, train, test = _ridge_files(tmp_path)
    missing = write_csv(tmp_path / "missing.csv", [["a", "b"], ["1", "2"]])
    assert_usage_error(fastkern("ridge", train, "--target", "y", "--drop-columns", "id",
                                "--predict", missing, cwd=tmp_path),
                       "--predict (a training feature column)", "'c'")
    assert_usage_error(fastkern("ridge", train, "--drop-columns", "id", cwd=tmp_path),
                       "--target")
    assert_usage_error(fastkern("ridge", train, "--target", "nope", "--drop-columns", "id",
                                cwd=tmp_path), "--target", "'nope'")
    assert_usage_error(fastkern("ridge", train, "--target", "y", "--penalty", "-1",
                                cwd=tmp_path), "--penalty")
