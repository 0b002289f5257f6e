"""The performance targets of the core, solver and ridge issues.

Each ``test_<target>`` benchmarks the fastkern side and records, in
extra_info, the ratio measured side by side (calls interleaved, fastest of
each; for the estimators, each call after a 0.3 s pause, see SETTLE)
against the reference and the target it is held to.  These tests assert
only correctness, never a timing.  The matching ``test_check_<target>`` benchmarks
the reference side and asserts the ratio against the target, but only under
``--benchmark-only`` (a deliberate performance run on a quiet machine).

Sizes are those of the targets; FASTKERN_BENCH_QUICK=1 / FASTKERN_BENCH_SCALE
shrink them (the ratios are then recorded but not asserted).
"""
import os

import numpy as np
import pytest
import scipy.linalg.blas as blas

import fastkern
import _harness  # benchmarks/_harness/, on sys.path by conftest.py

N_GRAM = _harness.scaled(8000)
N_RIDGE = _harness.scaled(6000)
N_RIDGE_CV = _harness.scaled(3000)
QUICK = _harness.bench_scale() < 0.1
ROUNDS = 1 if QUICK else 3
# The estimator targets wait this long before each timed call: both sides
# call BLAS/LAPACK, whose workers spin on after a call and would otherwise
# take a core from whichever contestant runs next (_harness.side_by_side).
SETTLE = 0.0 if QUICK else 0.3


def _data(n, d, dtype=np.float64):
    return _harness.make_data(n, d, dtype=dtype)


def _record(benchmark, name, ratio, target, kind):
    """kind ">=": speedup (reference / fastkern), "<=": slowdown (fastkern / reference)."""
    benchmark.extra_info.update(target_name=name, ratio=ratio, target=f"{kind} {target}")


def _check(benchmark_only, name, ratio, target, kind):
    if not benchmark_only:
        pytest.skip("target ratios are asserted only under --benchmark-only")
    if _harness.bench_scale() != 1:
        pytest.skip("target ratios are asserted only at the targets' sizes (scale 1)")
    if kind == ">=":
        assert ratio >= target, f"{name}: measured {ratio:.2f}x, target >= {target}x"
    else:
        assert ratio <= target, f"{name}: measured {ratio:.2f}x, target <= {target}x"


# ---------------------------------------------------------------- RBF Gram vs scikit-learn

def _rbf_setup(d=16, dtype=np.float64, n=N_GRAM):
    X, _ = _data(n, d, dtype)
    return X, 1.0 / d


def _ratio_rbf_vs_sklearn():
    from sklearn.metrics.pairwise import rbf_kernel as sk_rbf

    X, g = _rbf_setup()
    out = np.empty((X.shape[0], X.shape[0]))
    t = _harness.side_by_side({
        "sklearn": lambda: sk_rbf(X, gamma=g),
        "fastkern": lambda: fastkern.rbf_kernel(X, gamma=g),
        "fastkern_out": lambda: fastkern.rbf_kernel(X, gamma=g, out=out),
    }, rounds=ROUNDS)
    return {"alloc": t["sklearn"] / t["fastkern"], "out": t["sklearn"] / t["fastkern_out"]}


def test_rbf_gram_vs_sklearn(benchmark, run, ratios):
    benchmark.group = f"target: RBF Gram N={N_GRAM} d=16 vs sklearn"
    X, g = _rbf_setup()
    r = ratios.get("rbf_vs_sklearn", _ratio_rbf_vs_sklearn)["alloc"]
    _record(benchmark, "RBF Gram speedup vs sklearn.metrics.pairwise.rbf_kernel", r, 4, ">=")
    K = run(lambda: fastkern.rbf_kernel(X, gamma=g))
    from sklearn.metrics.pairwise import rbf_kernel as sk_rbf
    np.testing.assert_allclose(K[:50], sk_rbf(X[:50], X, gamma=g), rtol=1e-10, atol=1e-13)


def test_rbf_gram_out_vs_sklearn(benchmark, run, ratios):
    benchmark.group = f"target: RBF Gram N={N_GRAM} d=16 vs sklearn"
    X, g = _rbf_setup()
    out = np.empty((X.shape[0], X.shape[0]))
    r = ratios.get("rbf_vs_sklearn", _ratio_rbf_vs_sklearn)["out"]
    _record(benchmark, "RBF Gram into a reused out= buffer, speedup vs sklearn", r, 8, ">=")
    run(lambda: fastkern.rbf_kernel(X, gamma=g, out=out))


def test_check_rbf_gram_vs_sklearn(benchmark, run, ratios, benchmark_only):
    from sklearn.metrics.pairwise import rbf_kernel as sk_rbf

    benchmark.group = f"target: RBF Gram N={N_GRAM} d=16 vs sklearn"
    X, g = _rbf_setup()
    r = ratios.get("rbf_vs_sklearn", _ratio_rbf_vs_sklearn)
    _record(benchmark, "sklearn rbf_kernel (reference)", r["alloc"], 4, ">=")
    benchmark.extra_info["ratio_out"] = r["out"]
    run(lambda: sk_rbf(X, gamma=g))
    _check(benchmark_only, "RBF Gram vs sklearn", r["alloc"], 4, ">=")
    _check(benchmark_only, "RBF Gram with out= vs sklearn", r["out"], 8, ">=")


# ---------------------------------------------------------------- RBF Gram vs a bare syrk

def _syrk(X):
    # X is C-ordered (n x d), so X.T is an F-ordered (d x n) array that BLAS
    # reads without a copy; trans=1 gives (X.T)^T X.T = X X^T.
    return blas.dsyrk(1.0, X.T, trans=1)


def _ratio_rbf_vs_syrk():
    X, g = _rbf_setup(d=256)
    t = _harness.side_by_side({
        "syrk": lambda: _syrk(X),
        "fastkern": lambda: fastkern.rbf_kernel(X, gamma=g),
    }, rounds=ROUNDS)
    return t["fastkern"] / t["syrk"]


def test_rbf_gram_d256_vs_syrk(benchmark, run, ratios):
    benchmark.group = f"target: RBF Gram N={N_GRAM} d=256 vs dsyrk"
    X, g = _rbf_setup(d=256)
    r = ratios.get("rbf_vs_syrk", _ratio_rbf_vs_syrk)
    _record(benchmark, "RBF Gram time / dsyrk(X X^T) time", r, 1.5, "<=")
    run(lambda: fastkern.rbf_kernel(X, gamma=g))


def test_check_rbf_gram_d256_vs_syrk(benchmark, run, ratios, benchmark_only):
    benchmark.group = f"target: RBF Gram N={N_GRAM} d=256 vs dsyrk"
    X, _ = _rbf_setup(d=256)
    r = ratios.get("rbf_vs_syrk", _ratio_rbf_vs_syrk)
    _record(benchmark, "dsyrk (reference)", r, 1.5, "<=")
    run(lambda: _syrk(X))
    _check(benchmark_only, "RBF Gram d=256 vs dsyrk", r, 1.5, "<=")


# ---------------------------------------------------------------- float32, threads

def _ratio_f32():
    X64, g = _rbf_setup()
    X32 = X64.astype(np.float32)
    t = _harness.side_by_side({
        "f64": lambda: fastkern.rbf_kernel(X64, gamma=g),
        "f32": lambda: fastkern.rbf_kernel(X32, gamma=g),
    }, rounds=ROUNDS)
    return t["f64"] / t["f32"]


def test_rbf_gram_float32(benchmark, run, ratios):
    benchmark.group = f"target: RBF Gram N={N_GRAM} d=16 float32 vs float64"
    X, g = _rbf_setup(dtype=np.float32)
    r = ratios.get("f32", _ratio_f32)
    _record(benchmark, "float32 speedup over float64", r, 1.6, ">=")
    K = run(lambda: fastkern.rbf_kernel(X, gamma=g))
    assert K.dtype == np.float32


def test_check_rbf_gram_float32(benchmark, run, ratios, benchmark_only):
    benchmark.group = f"target: RBF Gram N={N_GRAM} d=16 float32 vs float64"
    X, g = _rbf_setup()
    r = ratios.get("f32", _ratio_f32)
    _record(benchmark, "float64 (reference)", r, 1.6, ">=")
    run(lambda: fastkern.rbf_kernel(X, gamma=g))
    _check(benchmark_only, "float32 vs float64", r, 1.6, ">=")


def _ratio_threads():
    X, g = _rbf_setup()
    t = _harness.side_by_side({
        "1": lambda: fastkern.rbf_kernel(X, gamma=g, n_threads=1),
        "2": lambda: fastkern.rbf_kernel(X, gamma=g, n_threads=2),
    }, rounds=ROUNDS)
    return t["1"] / t["2"]


def test_rbf_gram_two_threads(benchmark, run, ratios):
    benchmark.group = f"target: RBF Gram N={N_GRAM} d=16 2 threads vs 1"
    X, g = _rbf_setup()
    r = ratios.get("threads", _ratio_threads)
    _record(benchmark, "2-thread speedup over 1 thread", r, 1.6, ">=")
    benchmark.extra_info["cores"] = os.cpu_count()
    run(lambda: fastkern.rbf_kernel(X, gamma=g, n_threads=2))


def test_check_rbf_gram_two_threads(benchmark, run, ratios, benchmark_only):
    benchmark.group = f"target: RBF Gram N={N_GRAM} d=16 2 threads vs 1"
    X, g = _rbf_setup()
    r = ratios.get("threads", _ratio_threads)
    _record(benchmark, "1 thread (reference)", r, 1.6, ">=")
    run(lambda: fastkern.rbf_kernel(X, gamma=g, n_threads=1))
    if (os.cpu_count() or 1) < 2:
        pytest.skip("needs two cores")
    _check(benchmark_only, "2 threads vs 1", r, 1.6, ">=")


# ---------------------------------------------------------------- centering

def _gram(n=N_GRAM):
    X, g = _rbf_setup(n=n)
    return fastkern.rbf_kernel(X, gamma=g)


def _ratio_center():
    K = _gram()
    dst = np.empty_like(K)
    t = _harness.side_by_side({
        "copyto": lambda: np.copyto(dst, K),
        "center": lambda: fastkern.center_gram(K),
    }, rounds=ROUNDS)
    _, extra = _harness.tracemalloc_peak(lambda: fastkern.center_gram(K))
    return {"time": t["center"] / t["copyto"], "memory": extra / K.nbytes}


def test_center_gram(benchmark, run, ratios):
    benchmark.group = f"target: center_gram {N_GRAM}x{N_GRAM} vs np.copyto"
    K = _gram()
    r = ratios.get("center", _ratio_center)
    _record(benchmark, "center_gram time / np.copyto time", r["time"], 3, "<=")
    benchmark.extra_info["extra_memory_fraction"] = r["memory"]
    benchmark.extra_info["extra_memory_target"] = "< 0.01 of the matrix (tracemalloc)"
    ref = K - K.mean(axis=0) - K.mean(axis=1)[:, None] + K.mean()
    Kc = K.copy()
    fastkern.center_gram(Kc)
    np.testing.assert_allclose(Kc, ref, atol=1e-12)
    run(lambda: fastkern.center_gram(K))


def test_check_center_gram(benchmark, run, ratios, benchmark_only):
    benchmark.group = f"target: center_gram {N_GRAM}x{N_GRAM} vs np.copyto"
    K = _gram()
    dst = np.empty_like(K)
    r = ratios.get("center", _ratio_center)
    _record(benchmark, "np.copyto (reference)", r["time"], 3, "<=")
    run(lambda: np.copyto(dst, K))
    _check(benchmark_only, "center_gram vs np.copyto", r["time"], 3, "<=")
    _check(benchmark_only, "center_gram extra memory fraction", r["memory"], 0.01, "<=")


# ---------------------------------------------------------------- KernelPCA

def _kpca_pair(n=N_GRAM):
    from sklearn.decomposition import KernelPCA as SkKernelPCA

    from fastkern.decomposition import KernelPCA

    X, g = _rbf_setup(n=n)
    kw = dict(n_components=5, kernel="rbf", gamma=g)
    return X, KernelPCA(**kw), SkKernelPCA(eigen_solver="arpack", random_state=0, **kw)


def _ratio_kpca():
    X, fk, sk = _kpca_pair()
    t = _harness.side_by_side({"sklearn": lambda: sk.fit_transform(X),
                             "fastkern": lambda: fk.fit_transform(X)}, rounds=min(ROUNDS, 2),
                            settle=SETTLE)
    mem = {impl: _harness.measure("kpca", impl, N_GRAM, min_time=0.0, max_repeat=1)["peak_bytes"]
           for impl in ("sklearn", "fastkern")}
    return {"time": t["sklearn"] / t["fastkern"], "memory": mem,
            "eig_fk": fk.eigenvalues_, "eig_sk": sk.eigenvalues_}


def test_kernel_pca(benchmark, run, ratios):
    benchmark.group = f"target: KernelPCA N={N_GRAM} d=16 5 components vs sklearn arpack"
    X, fk, _ = _kpca_pair()
    r = ratios.get("kpca", _ratio_kpca)
    _record(benchmark, "KernelPCA fit_transform speedup vs sklearn (arpack)", r["time"], 6, ">=")
    benchmark.extra_info.update(peak_mem_bytes=r["memory"]["fastkern"],
                                sklearn_peak_mem_bytes=r["memory"]["sklearn"],
                                gram_bytes=8 * N_GRAM * N_GRAM,
                                memory_method=_harness.memory_method())
    np.testing.assert_allclose(r["eig_fk"], r["eig_sk"], rtol=1e-6)
    run(lambda: fk.fit_transform(X))


def test_check_kernel_pca(benchmark, run, ratios, benchmark_only):
    benchmark.group = f"target: KernelPCA N={N_GRAM} d=16 5 components vs sklearn arpack"
    X, _, sk = _kpca_pair()
    r = ratios.get("kpca", _ratio_kpca)
    _record(benchmark, "sklearn KernelPCA arpack (reference)", r["time"], 6, ">=")
    run(lambda: sk.fit_transform(X), max_rounds=3)
    _check(benchmark_only, "KernelPCA vs sklearn arpack", r["time"], 6, ">=")


# ---------------------------------------------------------------- KernelRidge

def _ridge_pair(n=N_RIDGE):
    from sklearn.kernel_ridge import KernelRidge as SkKernelRidge

    from fastkern.kernel_ridge import KernelRidge

    X, y = _data(n, 16)
    kw = dict(alpha=1.0, kernel="rbf", gamma=1.0 / 16)
    return X, y, KernelRidge(**kw), SkKernelRidge(**kw)


def _ratio_ridge():
    X, y, fk, sk = _ridge_pair()
    t = _harness.side_by_side({"sklearn": lambda: sk.fit(X, y), "fastkern": lambda: fk.fit(X, y)},
                            rounds=ROUNDS, settle=SETTLE)
    mem = {impl: _harness.measure("ridge", impl, N_RIDGE, min_time=0.0, max_repeat=1)["peak_bytes"]
           for impl in ("sklearn", "fastkern")}
    gram = 8 * N_RIDGE * N_RIDGE
    return {"time": t["sklearn"] / t["fastkern"],
            "mem_fk": mem["fastkern"] / gram, "mem_sk": mem["sklearn"] / gram,
            "coef_fk": fk.dual_coef_, "coef_sk": sk.dual_coef_}


def test_kernel_ridge(benchmark, run, ratios):
    benchmark.group = f"target: KernelRidge fit N={N_RIDGE} vs sklearn"
    X, y, fk, _ = _ridge_pair()
    r = ratios.get("ridge", _ratio_ridge)
    _record(benchmark, "KernelRidge fit speedup vs sklearn", r["time"], 3, ">=")
    benchmark.extra_info.update(peak_mem_in_grams=r["mem_fk"], sklearn_peak_mem_in_grams=r["mem_sk"],
                                peak_mem_target="<= 1.05 Gram (sklearn ~3)",
                                memory_method=_harness.memory_method())
    np.testing.assert_allclose(r["coef_fk"], r["coef_sk"], rtol=1e-6, atol=1e-8)
    run(lambda: fk.fit(X, y))


def test_check_kernel_ridge(benchmark, run, ratios, benchmark_only):
    benchmark.group = f"target: KernelRidge fit N={N_RIDGE} vs sklearn"
    X, y, _, sk = _ridge_pair()
    r = ratios.get("ridge", _ratio_ridge)
    _record(benchmark, "sklearn KernelRidge (reference)", r["time"], 3, ">=")
    run(lambda: sk.fit(X, y))
    _check(benchmark_only, "KernelRidge vs sklearn", r["time"], 3, ">=")
    _check(benchmark_only, "KernelRidge peak memory in Grams", r["mem_fk"], 1.05, "<=")


# ---------------------------------------------------------------- KernelRidgeCV

ALPHAS = np.logspace(-3, 2, 20)


def _ridge_cv_pair(n=N_RIDGE_CV):
    from sklearn.kernel_ridge import KernelRidge as SkKernelRidge
    from sklearn.model_selection import GridSearchCV

    from fastkern.kernel_ridge import KernelRidgeCV

    X, y = _data(n, 16)
    g = 1.0 / 16
    fk = KernelRidgeCV(alphas=ALPHAS, kernel="rbf", gamma=g)
    sk = GridSearchCV(SkKernelRidge(kernel="rbf", gamma=g), {"alpha": ALPHAS}, cv=5)
    return X, y, fk, sk


def _ratio_ridge_cv():
    X, y, fk, sk = _ridge_cv_pair()
    t = _harness.side_by_side({"sklearn": lambda: sk.fit(X, y), "fastkern": lambda: fk.fit(X, y)},
                            rounds=min(ROUNDS, 2))
    return t["sklearn"] / t["fastkern"]


def test_kernel_ridge_cv(benchmark, run, ratios):
    benchmark.group = f"target: KernelRidgeCV N={N_RIDGE_CV} 20 alphas vs GridSearchCV cv=5"
    X, y, fk, _ = _ridge_cv_pair()
    r = ratios.get("ridge_cv", _ratio_ridge_cv)
    benchmark.extra_info.update(target_name="KernelRidgeCV (exact LOO) speedup vs "
                                            "GridSearchCV(KernelRidge(), cv=5)", ratio=r)
    run(lambda: fk.fit(X, y))
    assert fk.alpha_ in ALPHAS


def test_reference_kernel_ridge_grid_search(benchmark, run, ratios):
    benchmark.group = f"target: KernelRidgeCV N={N_RIDGE_CV} 20 alphas vs GridSearchCV cv=5"
    X, y, _, sk = _ridge_cv_pair()
    r = ratios.get("ridge_cv", _ratio_ridge_cv)
    benchmark.extra_info.update(target_name="GridSearchCV(KernelRidge(), cv=5) (reference)",
                                ratio=r)
    run(lambda: sk.fit(X, y), max_rounds=3)
