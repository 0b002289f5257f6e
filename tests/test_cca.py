"""KernelCCA.

References: the generalized symmetric eigenproblem written plainly
(scipy.linalg.eigh on the 2n x 2n pair), scikit-learn's KernelCenterer for the
test-kernel centring, kernlab's kcca through values stored in
tests/data/kcca_refs.json (tests/data/make_kcca_refs.R; rerun and compared when
Rscript and kernlab are there), and cca-zoo's KCCA through
tests/data/cca_zoo_refs.json (tests/data/make_cca_zoo_refs.py; rerun when
cca-zoo is installed).
"""
import json
import pathlib
import subprocess
import sys
import warnings

import numpy as np
import pytest
from scipy import linalg, sparse
from sklearn.metrics.pairwise import linear_kernel, polynomial_kernel, rbf_kernel
from sklearn.preprocessing import KernelCenterer
from sklearn.utils.estimator_checks import parametrize_with_checks

import fastkern
from fastkern.cca import KernelCCA
from fastkern._testing import have_kernlab, rerun_r_script

DATA = pathlib.Path(__file__).resolve().parent / "data"
KCCA_REFS = json.loads((DATA / "kcca_refs.json").read_text())
ZOO_REFS = json.loads((DATA / "cca_zoo_refs.json").read_text())


def _views(n, seed=0, p=3):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, p))
    Y = np.column_stack([np.sin(X[:, 0]) + 0.2 * rng.standard_normal(n),
                         X[:, 1] ** 2 + 0.2 * rng.standard_normal(n)])
    return X, Y


def _centre(K):
    n = K.shape[0]
    H = np.eye(n) - 1.0 / n
    return H @ K @ H


def _plain(Kx, Ky, r, e, k):
    """Top k generalized eigenvalues and vectors of [[0, KxKy], [KyKx, 0]] v = rho RH v."""
    n = Kx.shape[0]
    Z = np.zeros((n, n))
    LH = np.block([[Z, Kx @ Ky], [Ky @ Kx, Z]])
    RH = np.block([[Kx @ Kx + r * Kx + e * np.eye(n), Z], [Z, Ky @ Ky + r * Ky + e * np.eye(n)]])
    w, V = linalg.eigh((LH + LH.T) / 2, (RH + RH.T) / 2)
    return w[::-1][:k], V[:, ::-1][:, :k], LH, RH


def _cos(a, b):
    return abs(a @ b) / (np.linalg.norm(a) * np.linalg.norm(b))


# ---------------------------------------------------------------- the plain reference

@pytest.mark.parametrize("n", [3, 8, 41, 257])
@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("r,e", [(0.1, 1e-6), (1.0, 1e-3), (5.0, 0.0)])
def test_matches_plain_generalized_eigenproblem(n, center, r, e):
    X, Y = _views(n, seed=n)
    Kx, Ky = rbf_kernel(X, gamma=0.5), rbf_kernel(Y, gamma=0.5)
    if center:
        Kx, Ky = _centre(Kx), _centre(Ky)
    k = min(3, n - 1)
    if e == 0.0:
        # The plain reference needs a definite right side; KernelCCA does not.
        # 1e-12 was within the rounding of Ky @ Ky at n=257 (indefinite with
        # single-threaded BLAS, as under pytest -n); 1e-9 moves rho by 1e-11.
        e_ref, tol = 1e-9, 1e-6
    else:
        e_ref, tol = e, 1e-9
    rho_ref, _, LH, RH = _plain(Kx, Ky, r, e_ref, k)
    model = KernelCCA(n_components=k, gamma=0.5, regularization=r, jitter=e, center=center,
                      solver="dense").fit(X, Y)
    np.testing.assert_allclose(model.canonical_correlations_, rho_ref, atol=tol)
    if e == 0.0:
        return
    # The dual coefficients solve LH v = rho RH v (checked residual, scale-free).
    for j in range(k):
        if j + 1 < k and abs(rho_ref[j] - rho_ref[j + 1]) < 1e-6:
            continue
        a, b = model.x_dual_coef_[:, j], model.y_dual_coef_[:, j]
        # Each view's coefficients are scaled separately (unit-variance
        # variates); the eigenvector has a^T RHx a = b^T RHy b.
        a = a / np.sqrt(a @ RH[:n, :n] @ a)
        b = b / np.sqrt(b @ RH[n:, n:] @ b)
        v = np.concatenate([a, b])
        resid = LH @ v - model.canonical_correlations_[j] * (RH @ v)
        assert np.linalg.norm(resid) <= 1e-8 * np.linalg.norm(RH @ v)


def test_separate_kernels_and_inherited_parameters():
    X, Y = _views(30, seed=1)
    r = 0.3
    Kx = _centre(rbf_kernel(X, gamma=0.4))
    rho_lin, *_ = _plain(Kx, _centre(linear_kernel(Y)), r, 1e-6, 2)
    m = KernelCCA(kernel="rbf", gamma=0.4, kernel_y="linear", regularization=r,
                  jitter=1e-6).fit(X, Y)
    np.testing.assert_allclose(m.canonical_correlations_, rho_lin, atol=1e-9)
    # gamma_y overrides gamma for y only; kernel_y=None keeps "rbf" for y.
    rho_g, *_ = _plain(Kx, _centre(rbf_kernel(Y, gamma=2.0)), r, 1e-6, 2)
    m = KernelCCA(gamma=0.4, gamma_y=2.0, regularization=r, jitter=1e-6).fit(X, Y)
    np.testing.assert_allclose(m.canonical_correlations_, rho_g, atol=1e-9)
    # degree_y / coef0_y with a poly kernel_y, degree inherited when left at None.
    rho_p, *_ = _plain(Kx, _centre(polynomial_kernel(Y, degree=2, gamma=0.5, coef0=2.0)),
                       r, 1e-6, 2)
    m = KernelCCA(gamma=0.4, degree=2, kernel_y="poly", gamma_y=0.5, coef0_y=2.0,
                  regularization=r, jitter=1e-6).fit(X, Y)
    np.testing.assert_allclose(m.canonical_correlations_, rho_p, atol=1e-9)
    # gamma=None is 1 / n_features of each view.
    rho_d, *_ = _plain(_centre(rbf_kernel(X, gamma=1 / 3)), _centre(rbf_kernel(Y, gamma=1 / 2)),
                       r, 1e-6, 2)
    m = KernelCCA(regularization=r, jitter=1e-6).fit(X, Y)
    np.testing.assert_allclose(m.canonical_correlations_, rho_d, atol=1e-9)


def test_views_swap():
    X, Y = _views(40, seed=2)
    a = KernelCCA(n_components=3, gamma=0.5).fit(X, Y)
    b = KernelCCA(n_components=3, gamma=0.5).fit(Y, X)
    np.testing.assert_allclose(a.canonical_correlations_, b.canonical_correlations_, atol=1e-12)
    Xa, Ya = a.transform(X, Y)
    Yb, Xb = b.transform(Y, X)
    for j in range(3):
        assert _cos(Xa[:, j], Xb[:, j]) == pytest.approx(1, abs=1e-9)
        assert _cos(Ya[:, j], Yb[:, j]) == pytest.approx(1, abs=1e-9)


def test_precomputed_kernels():
    X, Y = _views(35, seed=3)
    Xt, Yt = _views(9, seed=4)
    ref = KernelCCA(n_components=2, gamma=0.5, gamma_y=0.8).fit(X, Y)
    Kx, Ky = rbf_kernel(X, gamma=0.5), rbf_kernel(Y, gamma=0.8)
    pre = KernelCCA(n_components=2, kernel="precomputed").fit(Kx, Ky)
    np.testing.assert_allclose(pre.canonical_correlations_, ref.canonical_correlations_,
                               atol=1e-12)
    got = pre.transform(rbf_kernel(Xt, X, gamma=0.5), rbf_kernel(Yt, Y, gamma=0.8))
    want = ref.transform(Xt, Yt)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, atol=1e-10)
    with pytest.raises(ValueError, match="X must be a square kernel matrix"):
        KernelCCA(kernel="precomputed").fit(X, Ky)
    with pytest.raises(ValueError, match="expecting 35 features"):
        pre.transform(rbf_kernel(Xt, X[:20], gamma=0.5))
    with pytest.raises(ValueError, match="precomputed kernel for X"):
        KernelCCA(kernel="precomputed", solver="incomplete_cholesky").fit(Kx, Ky)


# ---------------------------------------------------------------- variates

@pytest.mark.parametrize("solver", ["dense", "incomplete_cholesky"])
def test_variates_training_and_new_points(solver):
    X, Y = _views(50, seed=5)
    Xt, Yt = _views(13, seed=6)
    m = KernelCCA(n_components=3, gamma=0.5, regularization=0.5, solver=solver, tol=0.0)
    A, B = m.fit(X, Y).transform(X, Y)
    # Unit variance, mean zero, sign rule, and the empirical correlation >= rho.
    np.testing.assert_allclose(A.mean(axis=0), 0, atol=1e-10)
    np.testing.assert_allclose(A.std(axis=0), 1, atol=1e-10)
    np.testing.assert_allclose(B.std(axis=0), 1, atol=1e-10)
    assert np.all(A[np.argmax(np.abs(A), axis=0), np.arange(3)] > 0)
    emp = np.array([np.corrcoef(A[:, j], B[:, j])[0, 1] for j in range(3)])
    assert np.all(emp >= m.canonical_correlations_ - 1e-12)
    np.testing.assert_allclose(m.transform(X), A, atol=1e-8)
    # New points: the training-mean centred cross-kernel (KernelCenterer's test rule)
    # times the coefficients, written with the dense model's training basis.
    d = KernelCCA(n_components=3, gamma=0.5, regularization=0.5, solver="dense").fit(X, Y)
    centerer = KernelCenterer().fit(rbf_kernel(X, gamma=0.5))
    want = centerer.transform(rbf_kernel(Xt, X, gamma=0.5)) @ d.x_dual_coef_
    np.testing.assert_allclose(m.transform(Xt), want, atol=1e-7)
    centerer = KernelCenterer().fit(rbf_kernel(Y, gamma=0.5))
    want = centerer.transform(rbf_kernel(Yt, Y, gamma=0.5)) @ d.y_dual_coef_
    np.testing.assert_allclose(m.transform(Xt, Yt)[1], want, atol=1e-7)


def test_uncentred_variates_have_unit_mean_square():
    X, Y = _views(30, seed=7)
    A, B = KernelCCA(center=False, gamma=0.5).fit(X, Y).transform(X, Y)
    np.testing.assert_allclose(np.mean(A * A, axis=0), 1, atol=1e-10)
    np.testing.assert_allclose(np.mean(B * B, axis=0), 1, atol=1e-10)


# ---------------------------------------------------------------- low rank

@pytest.mark.parametrize("center", [True, False])
@pytest.mark.parametrize("n", [2, 37, 255])
def test_low_rank_at_full_rank_equals_dense(center, n):
    X, Y = _views(n, seed=8)
    Xt, Yt = _views(7, seed=9)
    k = min(3, n - 1) if center else min(3, n)
    kw = dict(n_components=k, gamma=0.3, regularization=0.2, jitter=1e-8, center=center)
    d = KernelCCA(solver="dense", **kw).fit(X, Y)
    lr = KernelCCA(solver="incomplete_cholesky", tol=0.0, **kw).fit(X, Y)
    assert lr.solver_ == "incomplete_cholesky" and d.solver_ == "dense"
    np.testing.assert_allclose(lr.canonical_correlations_, d.canonical_correlations_,
                               atol=1e-9)
    for g, w in zip(lr.transform(Xt, Yt), d.transform(Xt, Yt)):
        if n == 2:
            # Both training variates are +-1: the sign rule's tie is broken by rounding.
            g, w = np.abs(g), np.abs(w)
        np.testing.assert_allclose(g, w, atol=1e-6 * max(1.0, np.abs(w).max()))


def test_low_rank_is_the_problem_of_its_factor():
    """Truncated (max_rank): the exact problem of the kernel G G^T."""
    X, Y = _views(120, seed=10)
    lr = KernelCCA(n_components=3, gamma=0.5, regularization=0.1,
                   solver="incomplete_cholesky", max_rank=15).fit(X, Y)
    assert lr.x_rank_ <= 15 and lr.y_rank_ <= 15
    Gx = fastkern.incomplete_cholesky(X, gamma=0.5, tol=1e-6, max_rank=15).G
    Gy = fastkern.incomplete_cholesky(Y, gamma=0.5, tol=1e-6, max_rank=15).G
    pre = KernelCCA(n_components=3, kernel="precomputed", regularization=0.1).fit(
        Gx @ Gx.T, Gy @ Gy.T)
    np.testing.assert_allclose(lr.canonical_correlations_, pre.canonical_correlations_,
                               atol=1e-9)


def test_auto_solver_threshold(monkeypatch):
    from fastkern import cca

    X, Y = _views(20, seed=11)
    assert KernelCCA().fit(X, Y).solver_ == "dense"
    monkeypatch.setattr(cca, "AUTO_DENSE_MAX", 10)
    assert KernelCCA().fit(X, Y).solver_ == "incomplete_cholesky"


# ---------------------------------------------------------------- peers

@pytest.mark.parametrize("case", KCCA_REFS["kcca"], ids=lambda c: c["name"])
def test_kernlab_kcca(case):
    X, Y = np.array(case["X"]), np.array(case["Y"])
    kcor = np.array(case["kcor"])
    k = kcor.size // 2
    for solver in ("dense", "incomplete_cholesky"):
        m = KernelCCA(n_components=k, center=False, regularization=case["regularization"],
                      jitter=1e-6, solver=solver, tol=0.0, **case["fastkern"]).fit(X, Y)
        # kernlab lists each correlation twice, as +rho and -rho.
        np.testing.assert_allclose(m.canonical_correlations_, np.abs(kcor[0::2]), atol=1e-6)
        np.testing.assert_allclose(m.canonical_correlations_, np.abs(kcor[1::2]), atol=1e-6)
    m = KernelCCA(n_components=k, center=False, regularization=case["regularization"],
                  jitter=1e-6, solver="dense", **case["fastkern"]).fit(X, Y)
    for key, coef in (("xcoef", m.x_dual_coef_), ("ycoef", m.y_dual_coef_)):
        ref = np.array(case[key])
        for i in range(2 * k):
            assert _cos(ref[:, i], coef[:, i // 2]) == pytest.approx(1, abs=1e-8)


@pytest.mark.skipif(not have_kernlab(), reason="needs Rscript with kernlab")
def test_stored_kcca_references_are_current(tmp_path):
    out = tmp_path / "refs.json"
    assert rerun_r_script(DATA / "make_kcca_refs.R", out) == KCCA_REFS


def _zoo_model(case):
    n, c = case["n"], case["shrinkage"]
    return KernelCCA(n_components=case["n_components"], regularization=c * (n - 1) / (1 - c),
                     **case["kernel"])


@pytest.mark.parametrize("case", ZOO_REFS["kcca"], ids=lambda c: c["name"])
def test_cca_zoo_kcca(case):
    X, Y = np.array(case["X"]), np.array(case["Y"])
    m = _zoo_model(case).fit(X, Y)
    A, B = m.transform(X, Y)
    zx, zy = np.array(case["x_variates"]), np.array(case["y_variates"])
    for j in range(case["n_components"]):
        assert _cos(A[:, j], zx[:, j]) == pytest.approx(1, abs=1e-8)
        assert _cos(B[:, j], zy[:, j]) == pytest.approx(1, abs=1e-8)
    # The regularised correlation of cca-zoo's own weights is ours.
    params = dict(case["kernel"])
    Kx = _centre(fastkern.pairwise_kernels(X, metric=params.pop("kernel"), **params))
    Ky = _centre(fastkern.pairwise_kernels(Y, metric=case["kernel"]["kernel"], **params))
    r = m.regularization
    wx, wy = np.array(case["x_weights"]), np.array(case["y_weights"])
    for j in range(case["n_components"]):
        a, b = wx[:, j], wy[:, j]
        rho = abs(a @ Kx @ Ky @ b) / np.sqrt((a @ (Kx @ Kx + r * Kx) @ a)
                                             * (b @ (Ky @ Ky + r * Ky) @ b))
        assert rho == pytest.approx(m.canonical_correlations_[j], abs=1e-8)


def test_cca_zoo_live(tmp_path):
    pytest.importorskip("cca_zoo")
    out = tmp_path / "zoo.json"
    subprocess.run([sys.executable, str(DATA / "make_cca_zoo_refs.py"), str(out)], check=True,
                   capture_output=True, timeout=300)
    live = json.loads(out.read_text())
    for got, want in zip(live["kcca"], ZOO_REFS["kcca"]):
        for key in ("x_variates", "y_variates"):
            g, w = np.array(got[key]), np.array(want[key])
            # Same up to each column's sign (BLAS rounding may flip it).
            np.testing.assert_allclose(np.abs(g), np.abs(w), atol=1e-8)


# ---------------------------------------------------------------- inputs

@pytest.mark.parametrize("solver", ["dense", "incomplete_cholesky"])
def test_layouts_dtypes_and_threads(solver):
    X, Y = _views(60, seed=12)
    kw = dict(n_components=2, gamma=0.5, solver=solver, tol=0.0)
    ref = KernelCCA(n_threads=1, **kw).fit(X, Y)
    A_ref, B_ref = ref.transform(X, Y)
    Xr, Yr = X.copy(), Y.copy()
    Xr.flags.writeable = False
    Yr.flags.writeable = False
    Xs = np.repeat(X, 2, axis=0)[::2]
    for Xi, Yi, threads in ((np.asfortranarray(X), np.asfortranarray(Y), 1),
                            (Xs, Y, 1), (Xr, Yr, 1), (X, Y, 2)):
        m = KernelCCA(n_threads=threads, **kw).fit(Xi, Yi)
        np.testing.assert_allclose(m.canonical_correlations_, ref.canonical_correlations_,
                                   atol=1e-12)
        A, B = m.transform(Xi, Yi)
        np.testing.assert_allclose(A, A_ref, atol=1e-9)
        np.testing.assert_allclose(B, B_ref, atol=1e-9)
    m32 = KernelCCA(n_threads=1, **kw).fit(X.astype(np.float32), Y.astype(np.float32))
    np.testing.assert_allclose(m32.canonical_correlations_, ref.canonical_correlations_,
                               atol=1e-5)
    assert m32.transform(X.astype(np.float32)).dtype == np.float64


def test_one_dimensional_y_and_sparse_input():
    X, Y = _views(40, seed=13)
    a = KernelCCA(n_components=1, kernel="linear", regularization=0.5).fit(X, Y[:, 0])
    b = KernelCCA(n_components=1, kernel="linear", regularization=0.5).fit(X, Y[:, :1])
    np.testing.assert_allclose(a.canonical_correlations_, b.canonical_correlations_)
    assert a.n_features_y_ == 1
    s = KernelCCA(gamma=0.5).fit(sparse.csr_matrix(X), Y)
    d = KernelCCA(gamma=0.5).fit(X, Y)
    np.testing.assert_allclose(s.canonical_correlations_, d.canonical_correlations_, atol=1e-12)
    with pytest.raises(TypeError, match="sparse input is not supported"):
        KernelCCA(solver="incomplete_cholesky").fit(sparse.csr_matrix(X), Y)


def test_more_components_than_rank_warns_and_pads():
    X, Y = _views(20, seed=14)
    with pytest.warns(UserWarning, match="only 1 canonical pair"):
        m = KernelCCA(n_components=3, kernel="linear").fit(X, Y[:, :1])
    assert m.canonical_correlations_[0] > 0
    np.testing.assert_array_equal(m.canonical_correlations_[1:], 0)
    np.testing.assert_array_equal(m.transform(X)[:, 1:], 0)


def test_errors_name_the_argument():
    X, Y = _views(20, seed=15)
    with pytest.raises(ValueError, match="y has 19 samples but X has 20"):
        KernelCCA().fit(X, Y[:19])
    with pytest.raises(ValueError, match="requires y to be passed"):
        KernelCCA().fit(X, None)
    with pytest.raises(ValueError, match="n_components=21 must be <= n_samples=20"):
        KernelCCA(n_components=21).fit(X, Y)
    with pytest.raises(ValueError, match="regularization"):
        KernelCCA(regularization=-1.0).fit(X, Y)
    with pytest.raises(ValueError, match="solver"):
        KernelCCA(solver="eig").fit(X, Y)
    with pytest.raises(ValueError, match="kernel_y"):
        KernelCCA(kernel_y="nope").fit(X, Y)
    with pytest.raises(ValueError, match="NaN"):
        KernelCCA().fit(X, np.where(Y > 1, np.nan, Y))
    with pytest.raises(ValueError, match="centred kernel matrix of y is zero"):
        KernelCCA().fit(X, np.ones((20, 2)))
    m = KernelCCA().fit(X, Y)
    with pytest.raises(ValueError, match="y has 3 features"):
        m.transform(X, np.ones((20, 3)))
    with pytest.raises(ValueError, match="y has 5 samples but X has 20"):
        m.transform(X, Y[:5])
    with pytest.raises(ValueError, match="X has 2 features"):
        m.transform(X[:, :2])


def test_feature_names_and_set_output():
    pd = pytest.importorskip("pandas")
    X, Y = _views(25, seed=16)
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    m = KernelCCA(n_components=2).fit(df, Y)
    np.testing.assert_array_equal(m.feature_names_in_, ["a", "b", "c"])
    np.testing.assert_array_equal(m.get_feature_names_out(), ["kernelcca0", "kernelcca1"])
    m.set_output(transform="pandas")
    out = m.transform(df)
    assert list(out.columns) == ["kernelcca0", "kernelcca1"]
    Xc, Yc = m.transform(df, Y)
    assert list(Xc.columns) == ["kernelcca0", "kernelcca1"] and isinstance(Yc, np.ndarray)


def test_exported():
    assert fastkern.KernelCCA is KernelCCA


@parametrize_with_checks([KernelCCA(n_threads=1),
                          KernelCCA(solver="incomplete_cholesky", n_threads=1)])
def test_sklearn_compatible(estimator, check):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        check(estimator)


@pytest.mark.parametrize("gamma", ["scale", "median"])
def test_gamma_strings_resolved_once_on_each_view(gamma):
    from fastkern._kernel_api import resolve_gamma

    rng = np.random.default_rng(4)
    X, Y = rng.normal(size=(80, 3)) * 5, rng.normal(size=(80, 2))
    est = KernelCCA(gamma=gamma).fit(X, Y)
    ref = KernelCCA(gamma=resolve_gamma(gamma, X, "rbf"),
                    gamma_y=resolve_gamma(gamma, Y, "rbf")).fit(X, Y)
    np.testing.assert_allclose(est.canonical_correlations_, ref.canonical_correlations_)
    for a, b in zip(est.transform(X[:5] + 1, Y[:5]), ref.transform(X[:5] + 1, Y[:5])):
        np.testing.assert_allclose(a, b)


def test_fit_transform_is_transform_of_the_fit():
    """fit_transform(X, y) gives transform(X)'s array (it gave the pair before);
    transform(X, y) still gives both views' variates."""
    rng = np.random.default_rng(9)
    X, Y = rng.normal(size=(60, 3)), rng.normal(size=(60, 2))
    m = KernelCCA(n_components=2, gamma=0.3)
    Xc = m.fit_transform(X, Y)
    assert isinstance(Xc, np.ndarray)
    np.testing.assert_array_equal(Xc, m.transform(X))
    A, B = m.transform(X, Y)
    np.testing.assert_array_equal(A, Xc)
    assert B.shape == (60, 2)
