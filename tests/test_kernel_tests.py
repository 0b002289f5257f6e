"""The kernel two-sample (MMD) and independence (HSIC) tests.

Statistics are checked against plain NumPy formulas, hyppo (stored values in
tests/data/hyppo_refs.json, and live when hyppo is installed) and kernlab's
kmmd (tests/data/kmmd_refs.json; re-run when Rscript + kernlab are there);
the permutation null against the NumPy statistic of the same permutations;
the Gamma approximations against NumPy transcriptions of Gretton's
hsicTestGamma.m / mmdTestGamma.m.
"""
import gc
import json
import pathlib
import signal
import subprocess
import sys
import threading
import tracemalloc

import numpy as np
import pytest
from scipy import stats as sps
from sklearn.metrics import pairwise as skp

import fastkern
from fastkern._testing import least_time_to_interrupt
from fastkern.kernel_tests import hsic_test, linear_mmd_test, mmd_test
from fastkern._testing import have_kernlab, rerun_r_script

DATA = pathlib.Path(__file__).resolve().parent / "data"
HYPPO = json.loads((DATA / "hyppo_refs.json").read_text())
KMMD = json.loads((DATA / "kmmd_refs.json").read_text())


def _data(n, d, seed, dtype=np.float64, shift=0.0):
    return (np.random.default_rng(seed).standard_normal((n, d)) + shift).astype(dtype)


def _gram(A, B, kernel="rbf", **params):
    return skp.pairwise_kernels(np.asarray(A, np.float64), np.asarray(B, np.float64),
                                metric=kernel, **params)


# ---------------------------------------------------------------- NumPy oracles


def np_mmd(X, Y, estimator="unbiased", **kp):
    Kxx, Kyy, Kxy = _gram(X, X, **kp), _gram(Y, Y, **kp), _gram(X, Y, **kp)
    m, n = len(X), len(Y)
    if estimator == "biased":
        return Kxx.mean() + Kyy.mean() - 2 * Kxy.mean()
    return ((Kxx.sum() - np.trace(Kxx)) / (m * (m - 1))
            + (Kyy.sum() - np.trace(Kyy)) / (n * (n - 1)) - 2 * Kxy.mean())


def np_hsic(K, L, estimator="unbiased"):
    n = len(K)
    H = np.eye(n) - 1.0 / n
    if estimator == "biased":
        return np.trace(K @ H @ L @ H) / n ** 2
    Kt = K - np.diag(np.diag(K))
    Lt = L - np.diag(np.diag(L))
    one = np.ones(n)
    return (np.trace(Kt @ Lt) + (one @ Kt @ one) * (one @ Lt @ one) / ((n - 1) * (n - 2))
            - 2.0 / (n - 2) * one @ Kt @ Lt @ one) / (n * (n - 3))


def np_mmd_gamma(X, Y, gamma):
    """Gretton's mmdTestGamma.m (m = n), transcribed; returns (m MMD_b^2, shape, scale)."""
    m = len(X)
    K, L, KL = _gram(X, X, gamma=gamma), _gram(Y, Y, gamma=gamma), _gram(X, Y, gamma=gamma)
    stat = m * (K + L - KL - KL.T).sum() / m ** 2
    mean = 2.0 / m * (1 - np.mean(np.diag(KL)))
    K, L, KL = (A - np.diag(np.diag(A)) for A in (K, L, KL))
    var = 2.0 / m / (m - 1) / m / (m - 1) * np.sum((K + L - KL - KL.T) ** 2)
    return stat, mean ** 2 / var, var * m / mean


def np_hsic_gamma(X, Y, gx, gy):
    """Gretton's hsicTestGamma.m, transcribed; returns (m HSIC_b, shape, scale)."""
    m = len(X)
    H = np.eye(m) - 1.0 / m
    K, L = _gram(X, X, gamma=gx), _gram(Y, Y, gamma=gy)
    Kc, Lc = H @ K @ H, H @ L @ H
    stat = np.sum(Kc * Lc) / m
    v = (Kc * Lc / 6) ** 2
    v = (v.sum() - np.trace(v)) / m / (m - 1)
    v = 72 * (m - 4) * (m - 5) / m / (m - 1) / (m - 2) / (m - 3) * v
    K, L = K - np.diag(np.diag(K)), L - np.diag(np.diag(L))
    mux, muy = K.sum() / m / (m - 1), L.sum() / m / (m - 1)
    mean = (1 + mux * muy - mux - muy) / m
    return stat, mean ** 2 / v, v * m / mean


# ---------------------------------------------------------------- statistics


@pytest.mark.parametrize("nx,ny", [(2, 2), (3, 5), (17, 9), (40, 40), (129, 127)])
@pytest.mark.parametrize("estimator", ["unbiased", "biased"])
def test_mmd_statistic_matches_numpy(nx, ny, estimator):
    X, Y = _data(nx, 3, 1), _data(ny, 3, 2, shift=0.3)
    r = mmd_test(X, Y, gamma=0.4, estimator=estimator, n_permutations=5, random_state=0)
    assert r.statistic == pytest.approx(np_mmd(X, Y, estimator, gamma=0.4), rel=1e-10,
                                        abs=1e-13)
    assert (r.n_x, r.n_y, r.estimator, r.method) == (nx, ny, estimator, "permutation")
    assert r.kernel_params == {"gamma": 0.4}


@pytest.mark.parametrize("kernel,kp", [("linear", {}), ("laplacian", {"gamma": 0.3}),
                                       ("poly", {"gamma": 0.5, "degree": 2, "coef0": 1}),
                                       ("sigmoid", {"gamma": 0.1, "coef0": 0.5})])
def test_mmd_other_kernels(kernel, kp):
    X, Y = _data(21, 4, 3), _data(30, 4, 4, shift=0.2)
    r = mmd_test(X, Y, kernel=kernel, n_permutations=3, random_state=0, **kp)
    assert r.statistic == pytest.approx(np_mmd(X, Y, kernel=kernel, **kp), rel=1e-10)


def test_kernel_objects_and_callables():
    X, Y = _data(30, 2, 60), _data(35, 2, 61, shift=0.2)
    f = lambda a, b: np.exp(-0.3 * np.sum((a - b) ** 2))  # noqa: E731
    k = fastkern.kernels.RBF(gamma=0.3)
    ref = np_mmd(X, Y, gamma=0.3)
    for kernel in (f, k):
        assert mmd_test(X, Y, kernel=kernel, n_permutations=2).statistic == \
            pytest.approx(ref, rel=1e-10)
        assert linear_mmd_test(X, Y, kernel=kernel).statistic == \
            pytest.approx(linear_mmd_test(X, Y, gamma=0.3).statistic, rel=1e-10)
    K, L = _gram(X, X, gamma=0.3), _gram(Y[:30], Y[:30], gamma=0.3)
    assert hsic_test(X, Y[:30], kernel_x=f, kernel_y=k, n_permutations=2).statistic == \
        pytest.approx(np_hsic(K, L), rel=1e-9)


@pytest.mark.parametrize("n", [4, 5, 31, 128, 257])
@pytest.mark.parametrize("estimator", ["unbiased", "biased"])
def test_hsic_statistic_matches_numpy(n, estimator):
    X = _data(n, 2, 5)
    Y = np.sin(X[:, :1]) + 0.3 * _data(n, 1, 6)
    r = hsic_test(X, Y, gamma_x=0.5, gamma_y=2.0, estimator=estimator, n_permutations=3,
                  random_state=0)
    K, L = _gram(X, X, gamma=0.5), _gram(Y, Y, gamma=2.0)
    assert r.statistic == pytest.approx(np_hsic(K, L, estimator), rel=1e-9, abs=1e-14)
    assert r.n_samples == n


def test_hsic_views_may_differ_in_kernel():
    X, Y = _data(50, 3, 7), _data(50, 2, 8)
    r = hsic_test(X, Y, kernel_x="linear", kernel_y="poly",
                  kernel_params_y={"degree": 2, "gamma": 0.5, "coef0": 1}, n_permutations=2)
    K = _gram(X, X, "linear")
    L = _gram(Y, Y, "poly", degree=2, gamma=0.5, coef0=1)
    assert r.statistic == pytest.approx(np_hsic(K, L), rel=1e-9)
    assert r.kernel_params_y == {"degree": 2, "gamma": 0.5, "coef0": 1}


def test_permutation_null_is_the_statistic_of_each_permutation():
    X, Y = _data(23, 2, 9), _data(18, 2, 10, shift=0.5)
    r = mmd_test(X, Y, gamma=0.7, n_permutations=40, random_state=123)
    Z = np.vstack([X, Y])
    rng = np.random.default_rng(123)
    expected = []
    for _ in range(40):
        p = rng.permutation(len(Z))
        expected.append(np_mmd(Z[p[:23]], Z[p[23:]], gamma=0.7))
    np.testing.assert_allclose(r.null_distribution, expected, rtol=1e-9, atol=1e-14)
    assert r.pvalue == (1 + np.sum(np.asarray(expected) >= r.statistic - 1e-12)) / 41

    X = _data(37, 2, 11)
    Y = X[:, :1] ** 2 + _data(37, 1, 12)
    r = hsic_test(X, Y, gamma_x=0.5, gamma_y=0.5, estimator="unbiased", n_permutations=30,
                  random_state=7)
    K, L = _gram(X, X, gamma=0.5), _gram(Y, Y, gamma=0.5)
    rng = np.random.default_rng(7)
    expected = []
    for _ in range(30):
        p = rng.permutation(37)
        expected.append(np_hsic(K, L[np.ix_(p, p)]))
    np.testing.assert_allclose(r.null_distribution, expected, rtol=1e-9, atol=1e-14)


@pytest.mark.parametrize("estimator", ["biased", "hyppo", "hyppo_biased"])
def test_permuted_statistics_of_every_estimator(estimator):
    # Each permuted statistic equals the statistic of the permuted data.
    X = _data(26, 2, 13)
    Y = np.cos(X[:, :1]) + 0.5 * _data(26, 1, 14)
    r = hsic_test(X, Y, gamma_x=0.6, gamma_y=0.6, estimator=estimator, n_permutations=6,
                  random_state=3)
    rng = np.random.default_rng(3)
    for k in range(6):
        p = rng.permutation(26)
        again = hsic_test(X, Y[p], gamma_x=0.6, gamma_y=0.6, estimator=estimator,
                          n_permutations=1)
        assert r.null_distribution[k] == pytest.approx(again.statistic, rel=1e-9, abs=1e-14)
    Xm, Ym = _data(15, 2, 15), _data(19, 2, 16)
    r = mmd_test(Xm, Ym, gamma=0.6, estimator=estimator, n_permutations=6, random_state=4)
    Z = np.vstack([Xm, Ym])
    rng = np.random.default_rng(4)
    for k in range(6):
        p = rng.permutation(34)
        again = mmd_test(Z[p[:15]], Z[p[15:]], gamma=0.6, estimator=estimator,
                         n_permutations=1)
        assert r.null_distribution[k] == pytest.approx(again.statistic, rel=1e-9, abs=1e-14)


# ---------------------------------------------------------------- hyppo


def _hyppo_case(case, estimator):
    fn = mmd_test if case["test"] == "mmd" else hsic_test
    return fn(np.array(case["X"]), np.array(case["Y"]), estimator=estimator,
              n_permutations=1, **case["fastkern"]).statistic


@pytest.mark.parametrize("case", HYPPO["cases"], ids=lambda c: f"{c['test']}-{c['name']}")
def test_stored_hyppo_statistics(case):
    for estimator, value in case["statistics"].items():
        assert _hyppo_case(case, estimator) == pytest.approx(value, rel=1e-8, abs=1e-8)


def test_live_hyppo_statistics(tmp_path):
    pytest.importorskip("hyppo")
    from hyppo.independence import Hsic
    from hyppo.ksample import MMD

    out = tmp_path / "refs.json"
    subprocess.run([sys.executable, str(DATA / "make_hyppo_refs.py"), str(out)], check=True,
                   capture_output=True, timeout=600)
    fresh = json.loads(out.read_text())
    for case in fresh["cases"]:
        for estimator, value in case["statistics"].items():
            assert _hyppo_case(case, estimator) == pytest.approx(value, rel=1e-8, abs=1e-8)
    # New data, not the stored cases: float32 and odd sizes.
    X, Y = _data(33, 3, 40), _data(28, 3, 41, shift=0.3)
    for bias, est in [(False, "hyppo"), (True, "hyppo_biased")]:
        h = MMD(compute_kernel="rbf", gamma=0.25, bias=bias).statistic(X, Y)
        assert mmd_test(X, Y, gamma=0.25, estimator=est, n_permutations=1).statistic == \
            pytest.approx(h, rel=1e-8, abs=1e-8)
        h = Hsic(compute_kernel="rbf", gamma=0.25, bias=bias).statistic(X[:28], Y)
        assert hsic_test(X[:28], Y, gamma_x=0.25, gamma_y=0.25, estimator=est,
                         n_permutations=1).statistic == pytest.approx(h, rel=1e-8, abs=1e-8)
        # A sigmoid Gram whose largest value is negative on one view only: hyppo's
        # 1 - K / max(K) then flips the sign of that view.
        Xs, Ys = 0.1 * X[:28], 5 * Y
        h = Hsic(compute_kernel="sigmoid", gamma=0.05, coef0=-3.0, bias=bias).statistic(Xs, Ys)
        kp = {"coef0": -3.0}
        assert hsic_test(Xs, Ys, kernel_x="sigmoid", kernel_y="sigmoid", gamma_x=0.05,
                         gamma_y=0.05, kernel_params_x=kp, kernel_params_y=kp, estimator=est,
                         n_permutations=1).statistic == pytest.approx(h, rel=1e-8, abs=1e-8)


# ---------------------------------------------------------------- kernlab kmmd


@pytest.mark.parametrize("case", KMMD["cases"], ids=lambda c: c["name"])
def test_kernlab_kmmd(case):
    X, Y = np.array(case["X"]), np.array(case["Y"])
    kp = dict(case["fastkern"])
    kernel = kp.pop("kernel")
    biased = mmd_test(X, Y, kernel=kernel, estimator="biased", n_permutations=1, **kp)
    # kmmd's mmdstats[1] is sqrt(max(0, MMD_b^2)).
    assert np.sqrt(max(0.0, biased.statistic)) == pytest.approx(case["mmdstats"][0], rel=1e-10)
    # mmdstats[2] is kernlab's U-statistic over the pairs (x_i, y_i), i < min(m, n); with
    # m = n it is MMD_u^2 + 2 / (m - 1) (mean(diag Kxy) - mean(Kxy)).
    if len(X) == len(Y):
        m = len(X)
        Kxy = _gram(X, Y, kernel, **kp)
        u = mmd_test(X, Y, kernel=kernel, n_permutations=1, **kp).statistic
        paired = u + 2.0 / (m - 1) * (np.mean(np.diag(Kxy)) - Kxy.mean())
        assert paired == pytest.approx(case["mmdstats"][1], rel=1e-9, abs=1e-12)
    # kmmd's asymptotic bound is a bootstrap 95% quantile of its statistic's null; the
    # permutation null of MMD_u^2 is nearly the same distribution (both are random: loose).
    r = mmd_test(X, Y, kernel=kernel, n_permutations=1000, random_state=0, **kp)
    q95 = np.quantile(r.null_distribution, 0.95)
    assert q95 == pytest.approx(case["Asymbound"], rel=0.35)
    assert (r.pvalue < 0.05) == case["AsympH0"]


@pytest.mark.skipif(not have_kernlab(), reason="needs Rscript with kernlab")
def test_stored_kmmd_references_are_current(tmp_path):
    out = tmp_path / "refs.json"
    assert rerun_r_script(DATA / "make_kmmd_refs.R", out) == KMMD


# ---------------------------------------------------------------- Gamma approximations


def test_mmd_gamma_matches_grettons_code():
    X, Y = _data(50, 2, 20), _data(50, 2, 21, shift=0.25)
    r = mmd_test(X, Y, gamma=0.5, method="gamma")
    stat, shape, scale = np_mmd_gamma(X, Y, 0.5)
    p = r.null_params
    assert 50 * p["tested_statistic"] == pytest.approx(stat, rel=1e-10)
    assert p["shape"] == pytest.approx(shape, rel=1e-9)
    assert 50 * p["scale"] == pytest.approx(scale, rel=1e-9)
    assert r.pvalue == pytest.approx(sps.gamma.sf(stat, shape, scale=scale), rel=1e-8)
    assert r.null_distribution is None and r.method == "gamma"
    # The statistic reported is still the estimator's.
    assert r.statistic == pytest.approx(np_mmd(X, Y, gamma=0.5), rel=1e-10)


def test_mmd_gamma_unequal_sizes_is_close_to_permutation():
    X, Y = _data(60, 2, 22), _data(90, 2, 23, shift=0.3)
    g = mmd_test(X, Y, gamma=0.5, method="gamma")
    p = mmd_test(X, Y, gamma=0.5, estimator="biased", n_permutations=2000, random_state=1)
    assert g.pvalue == pytest.approx(p.pvalue, abs=0.05)
    assert g.null_params["mean"] == pytest.approx(np.mean(p.null_distribution), rel=0.1)


def test_hsic_gamma_matches_grettons_code():
    X = _data(60, 2, 24)
    Y = np.tanh(X[:, :1]) + 0.8 * _data(60, 1, 25)
    r = hsic_test(X, Y, gamma_x=0.5, gamma_y=1.5, method="gamma")
    stat, shape, scale = np_hsic_gamma(X, Y, 0.5, 1.5)
    p = r.null_params
    assert 60 * p["tested_statistic"] == pytest.approx(stat, rel=1e-10)
    assert p["shape"] == pytest.approx(shape, rel=1e-9)
    assert 60 * p["scale"] == pytest.approx(scale, rel=1e-9)
    assert r.pvalue == pytest.approx(sps.gamma.sf(stat, shape, scale=scale), rel=1e-8)


def test_gamma_and_permutation_agree_on_clear_cases():
    X, Y = _data(80, 2, 26), _data(80, 2, 27, shift=1.0)
    assert mmd_test(X, Y, gamma="median", method="gamma").pvalue < 1e-4
    Xh = _data(80, 2, 28)
    assert hsic_test(Xh, Xh[:, :1] ** 2, gamma_x="median", gamma_y="median",
                     method="gamma").pvalue < 1e-4
    assert hsic_test(Xh, _data(80, 1, 29), method="gamma").pvalue > 0.01


# ---------------------------------------------------------------- calibration


def test_permutation_pvalues_are_uniform_under_the_null():
    # Fixed seeds: deterministic, so this cannot flake; 120 draws of each.
    p_mmd, p_hsic = [], []
    for k in range(120):
        X, Y = _data(25, 2, 1000 + k), _data(25, 2, 5000 + k)
        p_mmd.append(mmd_test(X, Y, gamma=0.5, n_permutations=199, random_state=k).pvalue)
        p_hsic.append(hsic_test(X, Y, gamma_x=0.5, gamma_y=0.5, n_permutations=199,
                                random_state=k).pvalue)
    for p in (p_mmd, p_hsic):
        assert sps.kstest(p, "uniform").pvalue > 0.01
        assert 0.01 <= np.mean(np.asarray(p) < 0.1) <= 0.2


def test_clear_alternatives_are_detected():
    X, Y = _data(60, 3, 30), _data(60, 3, 31, shift=0.8)
    assert mmd_test(X, Y, gamma="median", random_state=0).pvalue < 0.01
    # Same mean and variance, different shape: uniform vs normal.
    U = np.random.default_rng(32).uniform(-np.sqrt(3), np.sqrt(3), (500, 1))
    assert mmd_test(U, _data(500, 1, 33), gamma="median", random_state=0).pvalue < 0.01
    # Dependent but uncorrelated.
    X = _data(100, 1, 34)
    assert abs(np.corrcoef(X[:, 0], X[:, 0] ** 2)[0, 1]) < 0.3
    assert hsic_test(X, X ** 2, gamma_x="median", gamma_y="median",
                     random_state=0).pvalue < 0.01


def test_linear_mmd():
    X, Y = _data(41, 2, 35), _data(44, 2, 36, shift=0.2)
    r = linear_mmd_test(X, Y, gamma=0.5)
    M2 = 20
    k = lambda A, B: np.exp(-0.5 * np.sum((A - B) ** 2, axis=1))  # noqa: E731
    x0, x1, y0, y1 = X[0:40:2], X[1:40:2], Y[0:40:2], Y[1:40:2]
    h = k(x0, x1) + k(y0, y1) - k(x0, y1) - k(x1, y0)
    assert r.statistic == pytest.approx(h.mean(), rel=1e-12)
    assert r.null_params["std"] == pytest.approx(h.std(ddof=1) / np.sqrt(M2), rel=1e-12)
    assert r.pvalue == pytest.approx(sps.norm.sf(h.mean() / (h.std(ddof=1) / np.sqrt(M2))))
    # Chunks give the same result; another kernel goes through the Gram fallback.
    again = linear_mmd_test(X, Y, gamma=0.5, chunk_size=3)
    assert again.statistic == pytest.approx(r.statistic, rel=1e-12)
    assert again.null_params["std"] == pytest.approx(r.null_params["std"], rel=1e-10)
    chi = linear_mmd_test(np.abs(X), np.abs(Y), kernel="chi2", gamma=0.5)
    kc = lambda A, B: np.diag(skp.chi2_kernel(A, B, gamma=0.5))  # noqa: E731
    a0, a1, b0, b1 = (np.abs(v) for v in (x0, x1, y0, y1))
    assert chi.statistic == pytest.approx(np.mean(kc(a0, a1) + kc(b0, b1) - kc(a0, b1)
                                                  - kc(a1, b0)), rel=1e-10)
    # Large N: detects a shift, calibrated under the null.
    big_x, big_y = _data(20000, 2, 37), _data(20000, 2, 38, shift=0.3)
    assert linear_mmd_test(big_x, big_y, gamma="median").pvalue < 0.01
    p = [linear_mmd_test(_data(400, 2, 100 + k), _data(400, 2, 300 + k)).pvalue
         for k in range(100)]
    assert sps.kstest(p, "uniform").pvalue > 0.01


# ---------------------------------------------------------------- dtypes, layouts, threads


def test_float32_and_layouts():
    X64, Y64 = _data(70, 3, 40), _data(65, 3, 41, shift=0.2)
    ref = mmd_test(X64, Y64, gamma=0.3, n_permutations=50, random_state=5)
    r32 = mmd_test(X64.astype(np.float32), Y64.astype(np.float32), gamma=0.3,
                   n_permutations=50, random_state=5)
    assert r32.statistic == pytest.approx(ref.statistic, rel=1e-4, abs=1e-6)
    np.testing.assert_allclose(r32.null_distribution, ref.null_distribution, atol=1e-5)
    Xf = np.asfortranarray(X64)
    Ys = np.repeat(Y64, 2, axis=0)[::2]
    Xs = np.repeat(X64, 2, axis=1)[:, ::2]
    Xs.flags.writeable = False
    for X, Y in [(Xf, Y64), (Xs, Ys)]:
        r = mmd_test(X, Y, gamma=0.3, n_permutations=50, random_state=5)
        assert r.statistic == pytest.approx(ref.statistic, rel=1e-12)
        np.testing.assert_allclose(r.null_distribution, ref.null_distribution, rtol=1e-10)
    H = hsic_test(X64[:65], Y64, n_permutations=20, random_state=2)
    H32 = hsic_test(X64[:65].astype(np.float32), Y64.astype(np.float32), n_permutations=20,
                    random_state=2)
    assert H32.statistic == pytest.approx(H.statistic, rel=1e-3, abs=1e-6)
    Hf = hsic_test(np.asfortranarray(X64[:65]), Ys, n_permutations=20, random_state=2)
    assert Hf.statistic == pytest.approx(H.statistic, rel=1e-12)


def test_one_and_two_threads_give_identical_results():
    # Above 256 x 256, where more than one thread is used.
    X, Y = _data(300, 3, 42), _data(257, 3, 43, shift=0.1)
    for est in ("unbiased", "hyppo"):
        a = mmd_test(X, Y, gamma=0.2, estimator=est, n_permutations=100, random_state=9,
                     n_threads=1)
        b = mmd_test(X, Y, gamma=0.2, estimator=est, n_permutations=100, random_state=9,
                     n_threads=2)
        assert a.statistic == b.statistic and a.pvalue == b.pvalue
        np.testing.assert_array_equal(a.null_distribution, b.null_distribution)
        a = hsic_test(X[:257], Y, estimator=est, n_permutations=100, random_state=9,
                      n_threads=1)
        b = hsic_test(X[:257], Y, estimator=est, n_permutations=100, random_state=9,
                      n_threads=2)
        assert a.statistic == b.statistic and a.pvalue == b.pvalue
        np.testing.assert_array_equal(a.null_distribution, b.null_distribution)


def test_random_state():
    X, Y = _data(30, 2, 44), _data(30, 2, 45)
    a = mmd_test(X, Y, n_permutations=50, random_state=1)
    b = mmd_test(X, Y, n_permutations=50, random_state=np.random.default_rng(1))
    c = mmd_test(X, Y, n_permutations=50, random_state=2)
    np.testing.assert_array_equal(a.null_distribution, b.null_distribution)
    assert not np.array_equal(a.null_distribution, c.null_distribution)
    mmd_test(X, Y, n_permutations=5, random_state=np.random.RandomState(0))


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("call,exc,match", [
    (lambda: mmd_test(_data(5, 2, 0), _data(5, 3, 1)), ValueError, "same number of features"),
    (lambda: hsic_test(_data(5, 2, 0), _data(6, 2, 1)), ValueError, "same number of samples"),
    (lambda: mmd_test(_data(1, 2, 0), _data(5, 2, 1)), ValueError, "at least 2"),
    (lambda: hsic_test(_data(3, 2, 0), _data(3, 2, 1)), ValueError, "at least 4"),
    (lambda: hsic_test(_data(5, 2, 0), _data(5, 2, 1), method="gamma"), ValueError,
     "at least 6"),
    (lambda: linear_mmd_test(_data(3, 2, 0), _data(9, 2, 1)), ValueError, "at least 4"),
    (lambda: mmd_test(np.array([[0.0], [np.nan]]), _data(5, 1, 1)), ValueError, "X contains NaN"),
    (lambda: hsic_test(_data(5, 1, 1), np.full((5, 1), np.inf)), ValueError, "Y contains NaN"),
    (lambda: mmd_test(_data(5, 2, 0), _data(5, 2, 1), method="exact"), ValueError, "method"),
    (lambda: mmd_test(_data(5, 2, 0), _data(5, 2, 1), estimator="v"), ValueError, "estimator"),
    (lambda: mmd_test(_data(5, 2, 0), _data(5, 2, 1), n_permutations=0), ValueError,
     "n_permutations"),
    (lambda: mmd_test(_data(5, 2, 0), _data(5, 2, 1), gamma=-1.0), ValueError, "gamma"),
    (lambda: mmd_test(_data(5, 2, 0), _data(5, 2, 1), gamma="mean"), ValueError, "gamma"),
    (lambda: hsic_test(_data(5, 2, 0), _data(5, 2, 1), gamma_y="x"), ValueError, "gamma_y"),
    (lambda: mmd_test(_data(5, 2, 0), _data(5, 2, 1), kernel="precomputed"), ValueError,
     "precomputed"),
    (lambda: hsic_test(_data(5, 2, 0), _data(5, 2, 1), kernel_y="nope"), ValueError,
     "kernel_y"),
    (lambda: mmd_test(_data(5, 2, 0), _data(5, 2, 1), random_state="a"), TypeError,
     "random_state"),
    (lambda: mmd_test(_data(5, 2, 0), _data(5, 2, 1), n_threads=0), ValueError, "n_threads"),
    (lambda: mmd_test(np.zeros((0, 2)), _data(5, 2, 1)), ValueError, "X is empty"),
    (lambda: mmd_test(_data(5, 2, 0), [["a", "b"]] * 5), ValueError, "Y must be numeric"),
    (lambda: mmd_test(np.zeros((5, 1)), np.zeros((5, 1)), method="gamma"), ValueError,
     "Gamma approximation"),
])
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


# ---------------------------------------------------------------- memory, Ctrl-C, exports


def _peak(fn):
    gc.collect()
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_memory_is_one_gram():
    n = 1000
    X, Y = _data(n, 8, 50), _data(n, 8, 51)
    pooled = (2 * n) ** 2 * 8  # N = 2000: the pooled Gram, 32 MB
    # +5% for the vectors, one chunk of permutation labels and the tiles of L.
    assert _peak(lambda: mmd_test(X, Y, gamma=0.1, n_permutations=200,
                                  random_state=0)) < 1.05 * pooled
    assert _peak(lambda: mmd_test(X, Y, gamma=0.1, method="gamma")) < 1.05 * pooled
    X2, Y2 = _data(2 * n, 8, 52), _data(2 * n, 8, 53)
    # HSIC: the n x n buffer, plus a tile of L (2^17 values) and kernel scratch.
    assert _peak(lambda: hsic_test(X2, Y2, n_permutations=50, random_state=0)) < 1.08 * pooled
    assert _peak(lambda: hsic_test(X2, Y2, method="gamma")) < 1.08 * pooled


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs POSIX signals")
def test_ctrl_c_stops_the_permutations():
    X, Y = _data(1500, 4, 52), _data(1500, 4, 53)
    threads = threading.active_count()
    latency = least_time_to_interrupt(lambda: hsic_test(X, Y, n_permutations=100000,
                                                        random_state=0, n_threads=2),
                                      1.0, delay=1.0)
    assert latency is not None, "the test finished before Ctrl-C: make it larger"
    assert latency < 1.0
    assert threading.active_count() == threads


def test_exported_from_the_package():
    for name in ("mmd_test", "linear_mmd_test", "hsic_test"):
        assert getattr(fastkern, name) is getattr(fastkern.kernel_tests, name)
        assert name in fastkern.__all__
