"""Gram functions of fastkern.pairwise against plain-NumPy formulas and scikit-learn."""

import functools
import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.metrics import pairwise as skp

import fastkern
from fastkern import (
    exponential_kernel,
    laplacian_kernel,
    linear_kernel,
    pairwise_kernels,
    polynomial_kernel,
    rbf_kernel,
    sigmoid_kernel,
)
from fastkern._testing import tracemalloc_peak
from fastkern.kernels import RBF

KERNELS = ["linear", "poly", "rbf", "laplacian", "sigmoid", "exponential"]
FUNCS = {
    "linear": linear_kernel,
    "poly": polynomial_kernel,
    "rbf": rbf_kernel,
    "laplacian": laplacian_kernel,
    "sigmoid": sigmoid_kernel,
    "exponential": exponential_kernel,
}
# Parameters chosen so every kernel's values stay O(1) on the data below.
PARAMS = {
    "linear": {},
    "poly": {"degree": 3, "gamma": 0.3, "coef0": 0.7},
    "rbf": {"gamma": 0.4},
    "laplacian": {"gamma": 0.3},
    "sigmoid": {"gamma": 0.2, "coef0": 0.3},
    "exponential": {"gamma": 0.2},
}
SK_FUNCS = {
    "linear": skp.linear_kernel,
    "poly": skp.polynomial_kernel,
    "rbf": skp.rbf_kernel,
    "laplacian": skp.laplacian_kernel,
    "sigmoid": skp.sigmoid_kernel,
}
TILE_SIZES = [1, 2, 255, 256, 257, 511, 512, 513]
# (n, m) pairs straddling the 256-row tile edges in both directions.
TILE_PAIRS = [(1, 1), (1, 513), (2, 257), (255, 256), (256, 255), (257, 511), (511, 2),
              (512, 513), (513, 512)]


# ---------------------------------------------------------------- references
def _sq_dist(X, Y):
    """Squared Euclidean distances by explicit differences (no norm expansion)."""
    out = np.empty((X.shape[0], Y.shape[0]))
    for i in range(0, X.shape[0], 64):
        diff = X[i:i + 64, None, :] - Y[None, :, :]
        out[i:i + 64] = np.einsum("ijk,ijk->ij", diff, diff)
    return out


def _l1_dist(X, Y):
    out = np.empty((X.shape[0], Y.shape[0]))
    for i in range(0, X.shape[0], 64):
        out[i:i + 64] = np.abs(X[i:i + 64, None, :] - Y[None, :, :]).sum(axis=2)
    return out


def reference(kernel, X, Y=None, gamma=None, degree=3, coef0=1.0):
    """The kernel's formula in float64 NumPy (gamma=None means 1/n_features)."""
    X = np.asarray(X, dtype=np.float64)
    Y = X if Y is None else np.asarray(Y, dtype=np.float64)
    g = 1.0 / X.shape[1] if gamma is None else gamma
    if kernel == "linear":
        return X @ Y.T
    if kernel == "poly":
        return (g * (X @ Y.T) + coef0) ** degree
    if kernel == "rbf":
        return np.exp(-g * _sq_dist(X, Y))
    if kernel == "laplacian":
        return np.exp(-g * _l1_dist(X, Y))
    if kernel == "sigmoid":
        return np.tanh(g * (X @ Y.T) + coef0)
    if kernel == "exponential":
        return np.exp(g * (X @ Y.T))
    raise AssertionError(kernel)


def assert_gram_close(K, ref, dtype, X=None, Y=None):
    """float64: ~1e-12 relative; float32: float32 rounding of the inputs' products.

    The absolute part is scaled by the largest |<x, y>| the data allow, the
    size of the rounding error of any inner product.
    """
    assert K.dtype == np.dtype(dtype)
    assert K.shape == ref.shape
    tol = 1e-12 if dtype == np.float64 else 2e-5
    scale = max(1.0, float(np.abs(ref).max()))
    if X is not None:
        Xa = np.abs(np.asarray(X, dtype=np.float64))
        Ya = Xa if Y is None else np.abs(np.asarray(Y, dtype=np.float64))
        scale = max(scale, float((Xa @ Ya.T).max()))
    assert_allclose(K, ref, rtol=tol, atol=tol * scale)


def data(n, d, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-1.0, 1.0, size=(n, d)).astype(dtype)


def call(kernel, X, Y=None, **kw):
    return FUNCS[kernel](X, Y, **{**PARAMS[kernel], **kw})


def ref_for(kernel, X, Y=None):
    return reference(kernel, X, Y, **PARAMS[kernel])


# ------------------------------------------------ sizes, dtypes, Y given/omitted
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("n", TILE_SIZES)
def test_symmetric_matches_numpy(kernel, dtype, n):
    X = data(n, 5, dtype)
    K = call(kernel, X)
    assert_gram_close(K, ref_for(kernel, X), dtype, X)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("n,m", TILE_PAIRS)
def test_cross_matches_numpy(kernel, dtype, n, m):
    X, Y = data(n, 5, dtype, 1), data(m, 5, dtype, 2)
    K = call(kernel, X, Y)
    assert_gram_close(K, ref_for(kernel, X, Y), dtype, X, Y)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel", sorted(SK_FUNCS))
@pytest.mark.parametrize("n,m", [(1, 1), (2, 2), (257, 255), (513, 256), (256, 512)])
def test_matches_sklearn(kernel, dtype, n, m):
    X, Y = data(n, 7, dtype, 3), data(m, 7, dtype, 4)
    for y in (None, Y):
        K = call(kernel, X, y)
        expected = SK_FUNCS[kernel](X, y, **PARAMS[kernel])
        # fastkern keeps float32 for every kernel; sklearn's Laplacian upcasts.
        assert expected.dtype == K.dtype or kernel == "laplacian"
        assert_gram_close(K, expected.astype(np.float64), dtype, X, y)


@pytest.mark.parametrize("kernel", sorted(SK_FUNCS))
def test_default_parameters_match_sklearn(kernel):
    X, Y = data(40, 6, seed=5), data(30, 6, seed=6)
    assert_allclose(FUNCS[kernel](X, Y), SK_FUNCS[kernel](X, Y), rtol=1e-12, atol=1e-12)
    assert_allclose(FUNCS[kernel](X), SK_FUNCS[kernel](X), rtol=1e-12, atol=1e-12)


def test_mixed_precision_gives_float64():
    X32, Y64 = data(20, 4, np.float32), data(10, 4, np.float64)
    for kernel in KERNELS:
        K = call(kernel, X32, Y64)
        assert K.dtype == np.float64
        assert_gram_close(K, ref_for(kernel, X32, Y64), np.float64, X32, Y64)


@pytest.mark.parametrize("kernel", ["poly", "rbf", "laplacian", "sigmoid", "exponential"])
def test_gamma_none_is_one_over_n_features(kernel):
    X, Y = data(30, 8, seed=7), data(20, 8, seed=8)
    params = {k: v for k, v in PARAMS[kernel].items() if k != "gamma"}
    K = FUNCS[kernel](X, Y, gamma=None, **params)
    assert_gram_close(K, reference(kernel, X, Y, gamma=1 / 8, **params), np.float64, X, Y)
    assert_array_equal(K, FUNCS[kernel](X, Y, gamma=1 / 8, **params))


def test_polynomial_non_integer_degree_and_zero_gamma():
    X, Y = np.abs(data(30, 4, seed=9)), np.abs(data(20, 4, seed=10))
    K = polynomial_kernel(X, Y, degree=2.5, gamma=0.5, coef0=1.0)
    assert_gram_close(K, reference("poly", X, Y, gamma=0.5, degree=2.5, coef0=1.0),
                      np.float64, X, Y)
    assert_array_equal(rbf_kernel(X, Y, gamma=0.0), np.ones((30, 20)))


# ---------------------------------------------------------- RBF's three paths
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("path", ["direct", "dot", "blas"])
@pytest.mark.parametrize("d", [1, 3, 11, 12, 31, 32, 33, 64, 65, 70])
def test_rbf_paths_match_numpy(path, d, dtype):
    X, Y = data(257, d, dtype, 11), data(300, d, dtype, 12)
    gamma = 1.0 / d
    assert_gram_close(rbf_kernel(X, Y, gamma=gamma, path=path),
                      reference("rbf", X, Y, gamma=gamma), dtype)
    assert_gram_close(rbf_kernel(X, gamma=gamma, path=path),
                      reference("rbf", X, gamma=gamma), dtype)


def test_rbf_paths_agree_with_sklearn_on_both_sides_of_32_features():
    for d in (16, 64):
        X, Y = data(100, d, seed=13), data(90, d, seed=14)
        expected = skp.rbf_kernel(X, Y)
        for path in (None, "direct", "dot", "blas"):
            assert_allclose(rbf_kernel(X, Y, path=path), expected, rtol=1e-12, atol=1e-14)


def test_path_argument_is_validated():
    X = data(5, 3)
    with pytest.raises(ValueError, match="path"):
        rbf_kernel(X, path="gpu")
    for path in ("blas", "dot"):
        with pytest.raises(ValueError, match="Laplacian"):
            fastkern.pairwise._compute(X, None, fastkern.pairwise._LAPLACIAN,
                                       fastkern.pairwise._NO_PARAMS, out=None, n_threads=1,
                                       path=path)
    for path in ("direct", "dot"):
        with pytest.raises(ValueError, match=f"have a {path} path"):
            fastkern.pairwise._compute(X, None, fastkern.pairwise._LINEAR,
                                       fastkern.pairwise._NO_PARAMS, out=None, n_threads=1,
                                       path=path)


def test_default_paths_by_features_and_dtype():
    # The thresholds of fastkern.pairwise, at their edges: float64 RBF goes
    # direct below 12 features, to the dot tiles up to 64, to BLAS beyond;
    # float32 stays direct up to 32 (its vectors hold twice the values).
    from fastkern.pairwise import _LAPLACIAN, _LINEAR, _RBF, tile_path, uses_direct_path

    def path(kind, d, dtype=np.float64, rows=None):
        chosen = tile_path(kind, d, dtype, rows)
        assert uses_direct_path(kind, d, dtype, rows) == (chosen == "direct")
        return chosen

    assert [path(_RBF, d) for d in (1, 11, 12, 64, 65)] == [
        "direct", "direct", "dot", "dot", "blas"]
    assert [path(_RBF, d, np.float32) for d in (1, 32, 33, 64, 65)] == [
        "direct", "direct", "dot", "dot", "blas"]
    # Below 512 rows in either input the dot tiles' centring costs more than
    # they save: the distance loop up to 32 features, BLAS beyond.
    assert [path(_RBF, d, rows=511) for d in (11, 12, 32, 33, 64)] == [
        "direct", "direct", "direct", "blas", "blas"]
    assert [path(_RBF, d, rows=512) for d in (11, 12, 64)] == ["direct", "dot", "dot"]
    assert path(_LAPLACIAN, 500) == "direct" and path(_LINEAR, 16) == "blas"
    # The Gram of X with itself centres X once: the dot tiles from 400 rows
    # (float64; float32 keeps the distance loop up to 32 features), and at
    # any size beyond 32 features.
    def square(d, rows, dtype=np.float64):
        return tile_path(_RBF, d, dtype, rows, square=True)

    assert [square(d, 399) for d in (11, 12, 32, 33, 64, 65)] == [
        "direct", "direct", "direct", "dot", "dot", "blas"]
    assert [square(d, 400) for d in (11, 12, 32)] == ["direct", "dot", "dot"]
    assert [square(d, 2) for d in (32, 33)] == ["direct", "dot"]
    assert [square(d, 400, np.float32) for d in (32, 33)] == ["direct", "dot"]
    assert square(16, None) == "dot" and tile_path(_LAPLACIAN, 64, square=True) == "direct"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("d", [13, 33, 64])
@pytest.mark.parametrize("n", [1, 2, 3, 7, 17, 399, 400])
def test_small_square_grams_on_the_default_path_match_numpy(n, d, dtype):
    # Square Grams of few rows now take the dot tiles (d > 32, or 400 rows):
    # sizes below and across their tile edges, and the rows with a large
    # offset, which the tiles' centring must undo exactly.
    X = data(n, d, dtype, 40 + n) + 1e3
    for gamma in (1.0 / d, 0.5):
        assert_gram_close(rbf_kernel(X, gamma=gamma), reference("rbf", X, gamma=gamma), dtype)


def test_small_calls_keep_the_distance_loop(monkeypatch):
    # KernelRidge builds its Gram in panels of 128 rows: there the dot tiles'
    # centring cost more than the tiles saved, so such calls take the other
    # paths; a large call takes the dot tiles.
    import fastkern.pairwise as pw

    calls = []
    real = pw._run
    sig = inspect.signature(real)
    monkeypatch.setattr(pw, "_run", lambda *a, **kw: calls.append(
        sig.bind(*a, **kw).arguments["path"]) or real(*a, **kw))
    X = data(700, 16, seed=3)
    rbf_kernel(X[:128], X[128:])
    rbf_kernel(X[:40, :8])
    wide = data(700, 40, seed=4)
    rbf_kernel(wide[:128], wide[128:])
    rbf_kernel(X)
    rbf_kernel(wide[:100])
    assert calls == ["direct", "direct", "blas", "dot", "dot"]


# --------------------------------------------------- layouts and input types
def _layouts(dtype):
    base = data(600, 12, dtype, 15)
    ro = base[:300, :6].copy()
    ro.flags.writeable = False
    return {
        "F": np.asfortranarray(base[:300, :6]),
        "rows::2": base[::2, :6],
        "cols::2": base[:300, ::2],
        "both": base[::2, ::2],
        "readonly": ro,
    }


@pytest.mark.parametrize("layout", ["F", "rows::2", "cols::2", "both", "readonly"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel", KERNELS)
def test_noncontiguous_and_readonly_inputs(kernel, dtype, layout):
    X = _layouts(dtype)[layout]
    Y = np.asfortranarray(data(260, X.shape[1], dtype, 16))[::-1]
    assert_gram_close(call(kernel, X), ref_for(kernel, X), dtype, X)
    assert_gram_close(call(kernel, X, Y), ref_for(kernel, X, Y), dtype, X, Y)
    assert_array_equal(call(kernel, X, Y), call(kernel, np.ascontiguousarray(X),
                                                np.ascontiguousarray(Y)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_readonly_memmap_input(tmp_path, dtype):
    X0 = data(300, 6, dtype, 17)
    path = tmp_path / "x.dat"
    X0.tofile(path)
    X = np.memmap(path, dtype=dtype, mode="r", shape=X0.shape)
    assert not X.flags.writeable
    for kernel in KERNELS:
        K = call(kernel, X)
        assert type(K) is np.ndarray
        assert_gram_close(K, ref_for(kernel, X0), dtype, X0)
        assert_array_equal(call(kernel, X0[:7], X), call(kernel, X0[:7], X0))
    del X


@pytest.mark.parametrize("kernel", KERNELS)
def test_integer_bool_and_float16_inputs_give_float64(kernel):
    rng = np.random.default_rng(18)
    Xi = rng.integers(-2, 3, size=(40, 5)).astype(np.int32)
    Xb = rng.random((30, 5)) > 0.5
    Xh = rng.uniform(-1, 1, size=(20, 5)).astype(np.float16)
    for X, Y in ((Xi, None), (Xb, None), (Xi, Xb), (Xi.astype(np.int64), Xi.astype(np.uint8) % 2),
                 (Xh, None), (Xh, Xi)):
        K = call(kernel, X, Y)
        assert K.dtype == np.float64
        assert_gram_close(K, ref_for(kernel, X, Y), np.float64, X, Y)


def test_list_input():
    X = [[0.0, 1.0], [2.0, 3.0], [1.0, -1.0]]
    assert_allclose(rbf_kernel(X, gamma=0.5), skp.rbf_kernel(X, gamma=0.5), rtol=1e-12)


# --------------------------------------------------------------------- out=
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel", KERNELS)
def test_out_is_filled_and_returned(kernel, dtype):
    X, Y = data(300, 5, dtype, 19), data(257, 5, dtype, 20)
    for y, shape in ((None, (300, 300)), (Y, (300, 257))):
        out = np.full(shape, np.nan, dtype=dtype)
        K = call(kernel, X, y, out=out)
        assert K is out
        assert_gram_close(out, ref_for(kernel, X, y), dtype, X, y)
        first = out.copy()
        out.fill(-7.0)
        assert call(kernel, X, y, out=out) is out
        assert_array_equal(out, first)
        assert_array_equal(out, call(kernel, X, y))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shift", [0, 1, 2, 3])
def test_out_at_every_element_offset(dtype, shift):
    # Rows of an odd-width out start at every offset inside a 16-byte line;
    # the streamed head and tail of each row segment must land exactly.
    X, Y = data(259, 7, dtype, 21), data(67, 7, dtype, 22)
    for y, shape in ((None, (259, 259)), (Y, (259, 67))):
        raw = np.full(shape[0] * shape[1] + shift, np.nan, dtype=dtype)
        out = raw[shift:].reshape(shape)
        assert fastkern.rbf_kernel(X, y, gamma=0.3, out=out) is out
        assert_array_equal(out, fastkern.rbf_kernel(X, y, gamma=0.3))
        assert np.isnan(raw[:shift]).all()


# ---------------------------------------------------------------- threading
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel", KERNELS)
def test_one_and_two_threads_identical(kernel, dtype):
    X, Y = data(513, 40, dtype, 21), data(300, 40, dtype, 22)
    for y in (None, Y):
        K1 = call(kernel, X, y, n_threads=1)
        assert_array_equal(K1, call(kernel, X, y, n_threads=2))
        assert_array_equal(K1, call(kernel, X, y, n_threads=3))
        assert_array_equal(K1, call(kernel, X, y, n_threads=64))
        assert_array_equal(K1, call(kernel, X, y))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("path", ["direct", "dot", "blas"])
def test_rbf_paths_one_and_two_threads_identical(path, dtype):
    X = data(600, 20, dtype, 23)
    for y in (None, X[:257] + 0.1):
        assert_array_equal(rbf_kernel(X, y, path=path, n_threads=1),
                           rbf_kernel(X, y, path=path, n_threads=2))


# ------------------------------------------- Grams read back at once (read_back)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("n", [1, 255, 257, 513])  # odd rows, around the tiles
def test_gram_read_back_is_the_streamed_gram(kernel, dtype, n, monkeypatch):
    from fastkern import pairwise

    X, Y = data(n, 9, dtype, 26), data(301, 9, dtype, 27)
    for y in (None, Y):
        for n_threads in (1, 2):
            # Small outputs are kept in the cache anyway: streamed only
            # without that size.
            with monkeypatch.context() as m:
                m.setattr(pairwise, "SMALL_OUTPUT_BYTES", 0)
                streamed = call(kernel, X, y, n_threads=n_threads)
            assert_array_equal(call(kernel, X, y, n_threads=n_threads), streamed)
            with pairwise.read_back():
                assert_array_equal(call(kernel, X, y, n_threads=n_threads), streamed)


def test_packed_gram_read_back_is_the_streamed_one():
    from fastkern.pairwise import _upper_triangle_gram, read_back

    X = data(517, 7, np.float64, 28)
    streamed = _upper_triangle_gram(X, "rbf", {"gamma": 0.3}, n_threads=2)
    with read_back():
        kept = _upper_triangle_gram(X, "rbf", {"gamma": 0.3}, n_threads=2)
    # The matrices they hold: the packed buffer also has slots no entry uses,
    # left as allocated.
    assert_array_equal(kept.toarray(), streamed.toarray())
    assert_allclose(kept.toarray(), skp.rbf_kernel(X, gamma=0.3), rtol=1e-13, atol=1e-15)


def test_read_back_ends_with_its_block():
    from fastkern import pairwise

    with pytest.raises(RuntimeError):
        with pairwise.read_back():
            assert pairwise._read_back.get()
            raise RuntimeError
    assert not pairwise._read_back.get()


def test_last_level_cache_bytes(tmp_path):
    from fastkern.pairwise import last_level_cache_bytes

    for index, (kind, size) in enumerate([("Data", "48K"), ("Instruction", "64M"),
                                          ("Unified", "2048K"), ("Unified", "480M")]):
        (tmp_path / f"index{index}").mkdir()
        (tmp_path / f"index{index}" / "type").write_text(kind + "\n")
        (tmp_path / f"index{index}" / "size").write_text(size + "\n")
    (tmp_path / "uevent").write_text("")
    assert last_level_cache_bytes(str(tmp_path)) == 480 << 20
    (tmp_path / "index3" / "size").write_text("9000\n")
    assert last_level_cache_bytes(str(tmp_path)) == 2048 << 10
    (tmp_path / "index3" / "size").write_text("large\n")
    assert last_level_cache_bytes(str(tmp_path)) is None
    assert last_level_cache_bytes(str(tmp_path / "missing")) is None


# ------------------------------------------------------ the symmetric case
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel", KERNELS)
def test_symmetric_is_exact(kernel, dtype):
    X = data(513, 9, dtype, 24)
    K = call(kernel, X)
    assert_array_equal(K, K.T)
    assert_array_equal(call(kernel, X, X), K)  # Y is X counts as omitted
    if kernel in ("rbf", "laplacian"):
        assert np.all(np.diag(K) == 1)
        assert K.max() <= 1


def _hard_rbf_inputs(dtype):
    rng = np.random.default_rng(25)
    base = rng.standard_normal((1, 40))
    near = np.repeat(base, 300, axis=0) + 1e-7 * rng.standard_normal((300, 40))
    near[::3] = base  # exact duplicates as well
    big = 1e4 + 1e-3 * rng.standard_normal((300, 40))
    return {"near-duplicates": near.astype(dtype), "large-norm": big.astype(dtype)}


@pytest.mark.parametrize("case", ["near-duplicates", "large-norm"])
@pytest.mark.parametrize("path", ["direct", "dot", "blas"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rbf_symmetric_diagonal_one_and_bounded(dtype, path, case):
    X = _hard_rbf_inputs(dtype)[case]
    K = rbf_kernel(X, path=path)
    assert_array_equal(K, K.T)
    assert np.all(K <= 1), K.max()
    assert np.all(K >= 0)
    assert_array_equal(np.diag(K), np.ones(len(X), dtype=dtype))


@pytest.mark.parametrize("case", ["near-duplicates", "large-norm"])
@pytest.mark.parametrize("path", ["direct", "dot", "blas"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_rbf_cross_never_above_one(dtype, path, case):
    X = _hard_rbf_inputs(dtype)[case]
    K = rbf_kernel(X, X.copy(), path=path)
    assert np.all(K <= 1), K.max()
    assert np.all(K >= 0)


def test_laplacian_symmetric_diagonal_one_large_norm():
    X = _hard_rbf_inputs(np.float64)["large-norm"]
    for x in (X, X.astype(np.float32)):
        K = laplacian_kernel(x)
        assert_array_equal(np.diag(K), np.ones(len(x), dtype=x.dtype))
        assert np.all(K <= 1)


# ----------------------------------------------------------- pairwise_kernels
SK_METRIC_PARAMS = {
    "linear": {},
    "poly": {"degree": 2, "gamma": 0.5, "coef0": 1.5},
    "polynomial": {"degree": 4, "gamma": 0.2, "coef0": 0.5},
    "rbf": {"gamma": 0.7},
    "laplacian": {"gamma": 0.4},
    "sigmoid": {"gamma": 0.3, "coef0": -0.2},
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("metric", sorted(SK_METRIC_PARAMS))
def test_pairwise_kernels_string_metrics_match_sklearn(metric, dtype):
    X, Y = data(260, 6, dtype, 26), data(40, 6, dtype, 27)
    for y in (None, Y):
        K = pairwise_kernels(X, y, metric=metric, **SK_METRIC_PARAMS[metric])
        expected = skp.pairwise_kernels(X, y, metric=metric, **SK_METRIC_PARAMS[metric])
        assert_gram_close(K, expected.astype(np.float64), dtype, X, y)


def test_pairwise_kernels_exponential_matches_numpy():
    X, Y = data(60, 6, seed=28), data(50, 6, seed=29)
    assert_gram_close(pairwise_kernels(X, Y, metric="exponential", gamma=0.4),
                      reference("exponential", X, Y, gamma=0.4), np.float64, X, Y)


def test_pairwise_kernels_precomputed_returns_x_and_validates():
    K = data(20, 20, seed=30)
    assert pairwise_kernels(K, metric="precomputed") is K
    # With Y given, X is the (n_queries, n_indexed) kernel and need not be square.
    Kq = data(20, 30, seed=33)
    assert pairwise_kernels(Kq, data(30, 3), metric="precomputed") is Kq
    Ki = np.arange(16).reshape(4, 4)
    Kf = pairwise_kernels(Ki, metric="precomputed")
    assert Kf.dtype == np.float64
    assert_array_equal(Kf, Ki)
    out = np.empty((20, 20))
    assert pairwise_kernels(K, metric="precomputed", out=out) is out
    assert_array_equal(out, K)
    bad = K.copy()
    bad[3, 4] = np.nan
    with pytest.raises(ValueError, match=r"\bX\b"):
        pairwise_kernels(bad, metric="precomputed")
    with pytest.raises(ValueError, match=r"\bX\b"):
        pairwise_kernels(K[0], metric="precomputed")
    with pytest.raises(ValueError, match="Precomputed"):
        pairwise_kernels(Kq, data(29, 3), metric="precomputed")
    # As scikit-learn: without Y, a precomputed kernel must be square.
    with pytest.raises(ValueError, match=r"Got \(20, 30\) for 20 indexed"):
        pairwise_kernels(Kq, metric="precomputed")
    with pytest.raises(ValueError, match="out"):
        pairwise_kernels(K, metric="precomputed", out=np.empty((20, 21)))
    with pytest.raises(ValueError, match="n_threads"):
        pairwise_kernels(K, metric="precomputed", n_threads=0)


def test_pairwise_kernels_callable():
    X, Y = data(25, 4, seed=31), data(15, 4, seed=32)

    def k(x, y, scale=1.0):
        return scale * np.exp(-np.abs(x - y).max())

    K = pairwise_kernels(X, Y, metric=k, scale=2.0)
    assert_allclose(K, skp.pairwise_kernels(X, Y, metric=k, scale=2.0), rtol=1e-15)
    ref = 2.0 * np.exp(-np.abs(X[:, None] - Y[None]).max(axis=2))
    assert_allclose(K, ref, rtol=1e-14)
    out = np.empty((25, 15))
    assert pairwise_kernels(X, Y, metric=k, scale=2.0, out=out) is out
    assert_array_equal(out, K)


def test_pairwise_kernels_kernel_object():
    X, Y = data(300, 5, seed=33), data(20, 5, seed=34)
    k = RBF(gamma=0.3)
    assert_array_equal(pairwise_kernels(X, Y, metric=k), rbf_kernel(X, Y, gamma=0.3))
    assert_array_equal(pairwise_kernels(X, metric=k), rbf_kernel(X, gamma=0.3))
    out = np.empty((300, 20))
    assert pairwise_kernels(X, Y, metric=k, out=out, n_threads=1) is out
    assert_gram_close(out, reference("rbf", X, Y, gamma=0.3), np.float64)


def test_pairwise_kernels_filter_params():
    X, Y = data(30, 5, seed=35), data(20, 5, seed=36)
    params = {"gamma": 0.5, "degree": 2, "coef0": 3.0}
    K = pairwise_kernels(X, Y, metric="rbf", filter_params=True, **params)
    assert_gram_close(K, reference("rbf", X, Y, gamma=0.5), np.float64)
    K = pairwise_kernels(X, Y, metric="linear", filter_params=True, **params)
    assert_gram_close(K, X @ Y.T, np.float64, X, Y)
    K = pairwise_kernels(X, Y, metric="poly", filter_params=True, foo=1, **params)
    assert_gram_close(K, reference("poly", X, Y, **params), np.float64, X, Y)
    with pytest.raises(TypeError):
        pairwise_kernels(X, Y, metric="rbf", degree=2)


def test_pairwise_kernels_unknown_metric():
    X = data(5, 3)
    with pytest.raises(ValueError, match="nope"):
        pairwise_kernels(X, metric="nope")
    with pytest.raises(ValueError, match="Unknown kernel"):
        pairwise_kernels(X, metric="euclidean")


@pytest.mark.parametrize("metric", ["cosine", "chi2", "additive_chi2"])
def test_pairwise_kernels_delegates_sklearn_only_metrics(metric):
    X, Y = np.abs(data(30, 5, seed=37)), np.abs(data(20, 5, seed=38))
    for y, shape in ((None, (30, 30)), (Y, (30, 20))):
        expected = skp.pairwise_kernels(X, y, metric=metric)
        assert_allclose(pairwise_kernels(X, y, metric=metric), expected, rtol=1e-14)
        out = np.full(shape, np.nan)
        assert pairwise_kernels(X, y, metric=metric, out=out) is out
        assert_allclose(out, expected, rtol=1e-14)
    if metric == "cosine":
        Xn = X / np.linalg.norm(X, axis=1, keepdims=True)
        assert_allclose(pairwise_kernels(X, metric=metric), Xn @ Xn.T, rtol=1e-12)
    with pytest.raises(ValueError, match="out"):
        pairwise_kernels(X, Y, metric=metric, out=np.empty((20, 30)))
    with pytest.raises(ValueError, match="n_threads"):
        pairwise_kernels(X, Y, metric=metric, n_threads=0)


# ---------------------------------------------------------------- memory
def _peak_bytes(fn):
    return tracemalloc_peak(fn)[1]


@pytest.mark.parametrize("path,d", [("direct", 16), ("blas", 64)])
def test_rbf_with_out_allocates_far_less_than_the_gram(path, d):
    n = 2000
    X = data(n, d, seed=39)
    buf = np.empty((n, n))
    rbf_kernel(X[:10], out=np.empty((10, 10)), path=path)  # warm imports and caches
    # Besides O(n d) for norms and Y transposed, each thread owns two tile
    # buffers (the tile and its transpose, at most 256 x 256 doubles each):
    # a constant, whatever n is.  The BLAS path also holds the rows of X and Y
    # centred in float64 (its accuracy method): O((n + m) d).
    tiles = 2 * 256 * 256 * 8 * 2
    centred = 8 * d if path == "blas" else 0
    peak = _peak_bytes(lambda: rbf_kernel(X, out=buf, path=path, n_threads=2))
    assert peak < 0.05 * buf.nbytes + tiles + centred * n, peak
    assert_allclose(buf[:50, :50], reference("rbf", X[:50], gamma=1 / d), rtol=1e-12)
    cross = np.empty((n, 1000))
    peak = _peak_bytes(lambda: rbf_kernel(X, X[1000:], out=cross, path=path, n_threads=2))
    assert peak < 0.05 * cross.nbytes + tiles + centred * (n + 1000), peak
    assert_allclose(cross[:50, :50], reference("rbf", X[:50], X[1000:1050], gamma=1 / d),
                    rtol=1e-12)


# ----------------------------------------------------------- property-based
@settings(max_examples=40, deadline=None)
@given(
    kernel=st.sampled_from(KERNELS),
    n=st.integers(1, 300),
    m=st.integers(1, 300),
    d=st.integers(1, 40),
    dtype=st.sampled_from([np.float32, np.float64]),
    scale=st.floats(0.01, 3.0),
    offset=st.floats(-3.0, 3.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_property_matches_numpy(kernel, n, m, d, dtype, scale, offset, seed):
    rng = np.random.default_rng(seed)
    X = (offset + scale * rng.standard_normal((n, d))).astype(dtype)
    Y = (offset + scale * rng.standard_normal((m, d))).astype(dtype)
    # Keep gamma*<x,y> and gamma*||x-y||^2 moderate whatever the scale.
    gamma = 1.0 / (d * (scale**2 + offset**2))
    params = {"linear": {}, "poly": {"gamma": gamma, "degree": 2, "coef0": 1.0},
              "sigmoid": {"gamma": gamma, "coef0": 0.5}}.get(kernel, {"gamma": gamma})
    K = FUNCS[kernel](X, Y, **params)
    assert_gram_close(K, reference(kernel, X, Y, **params), dtype, X, Y)


@settings(max_examples=40, deadline=None)
@given(
    kernel=st.sampled_from(KERNELS),
    n=st.integers(1, 300),
    d=st.integers(1, 40),
    dtype=st.sampled_from([np.float32, np.float64]),
    values=st.lists(st.floats(-100, 100, allow_nan=False, width=32), min_size=1, max_size=64),
    seed=st.integers(0, 2**32 - 1),
)
def test_property_symmetric_exact(kernel, n, d, dtype, values, seed):
    # Hypothesis chooses the value pool (duplicates, zeros, extremes); rows are drawn from it.
    rng = np.random.default_rng(seed)
    X = rng.choice(np.array(values), size=(n, d)).astype(dtype)
    gamma = 1.0 / (d * (1.0 + float(np.abs(X).max()) ** 2))
    params = {"linear": {}, "poly": {"gamma": gamma}}.get(kernel, {"gamma": gamma})
    K = FUNCS[kernel](X, **params)
    assert_array_equal(K, K.T)
    assert_gram_close(K, reference(kernel, X, **params), dtype, X)
    if kernel in ("rbf", "laplacian"):
        assert np.all(np.diag(K) == 1)
        assert np.all(K <= 1)


# --------------------------------------------------------------- bad input
GOOD = data(6, 3)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("which", ["X", "Y"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_non_finite_input(kernel, which, bad, dtype):
    A = GOOD.astype(dtype)
    A[2, 1] = bad
    args = (A, GOOD.astype(dtype)) if which == "X" else (GOOD.astype(dtype), A)
    with pytest.raises(ValueError, match=rf"\b{which}\b.*NaN or infinity"):
        FUNCS[kernel](*args)


def test_non_finite_in_strided_large_input_is_found():
    A = data(600, 4000)
    A[597, 3998] = np.nan  # row 597 and column 3998 are inside A[::3, ::2]
    with pytest.raises(ValueError, match=r"\bX\b"):
        linear_kernel(A[::3, ::2], A[:2, ::2])
    with pytest.raises(ValueError, match=r"\bY\b"):
        linear_kernel(A[:2, ::2], A[::3, ::2])
    A[597, 3998] = 0.0
    A[0, 0] = 1e308
    A[0, 2] = 1e308  # the sum overflows but every value is finite
    X = A[:2, ::2]
    K = linear_kernel(X, np.full_like(X, 1e-300))
    assert np.isfinite(K).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["C", "F", "strided", "read-only", "1-D"])
def test_all_finite_agrees_with_numpy(dtype, layout):
    from fastkern._validation import _all_finite

    rng = np.random.default_rng(3)
    info = np.finfo(dtype)
    base = rng.standard_normal((67, 130)).astype(dtype)
    # Finite extremes: the largest value (a sum of two overflows), subnormals, -0.
    base[0, :4] = [info.max, info.max, info.smallest_subnormal, -0.0]
    views = {"C": lambda B: B, "F": np.asfortranarray, "strided": lambda B: B[::2, 1::3],
             "read-only": lambda B: B.copy(), "1-D": lambda B: B.reshape(-1)}
    A = views[layout](base.copy())
    A.flags.writeable = layout != "read-only"
    assert _all_finite(A)
    # Each bad value at the ends and on both sides of a 64-value block edge.
    for bad in (np.nan, np.inf, -np.inf):
        for where in (0, 63, 64, 65, A.size - 1):
            B = views[layout](base.copy())
            B[np.unravel_index(where, B.shape)] = bad
            assert not _all_finite(B)
            assert not np.isfinite(B).all()


def test_all_finite_across_its_scan_chunks():
    # More values than one nogil scan (_gram's FINITE_CHUNK, 2^22): the flag
    # in the second chunk is found, and a clean array of that size passes.
    from fastkern._validation import _all_finite

    A = np.zeros((2, (1 << 22) // 2 + 7), dtype=np.float32)
    assert _all_finite(A)
    A[1, -1] = np.nan
    assert not _all_finite(A)


BAD_SHAPES = {
    "1-D": np.ones(4),
    "3-D": np.ones((2, 3, 4)),
    "0-D": np.float64(3.0),
    "0 rows": np.ones((0, 3)),
    "0 columns": np.ones((3, 0)),
}


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("which", ["X", "Y"])
@pytest.mark.parametrize("case", sorted(BAD_SHAPES))
def test_bad_shapes(kernel, which, case):
    A = BAD_SHAPES[case]
    args = (A, GOOD) if which == "X" else (GOOD, A)
    with pytest.raises(ValueError, match=rf"^{which}\b"):
        FUNCS[kernel](*args)


@pytest.mark.parametrize("kernel", KERNELS)
def test_mismatched_features(kernel):
    with pytest.raises(ValueError, match=r"X\.shape\[1\] == 3 while Y\.shape\[1\] == 4"):
        FUNCS[kernel](GOOD, np.ones((5, 4)))


@pytest.mark.parametrize("kernel", ["poly", "rbf", "laplacian", "sigmoid", "exponential"])
@pytest.mark.parametrize("gamma,exc", [(-0.1, ValueError), (np.nan, ValueError),
                                       (np.inf, ValueError), ("scale", TypeError),
                                       (True, TypeError)])
def test_bad_gamma(kernel, gamma, exc):
    with pytest.raises(exc, match="gamma"):
        FUNCS[kernel](GOOD, gamma=gamma)


@pytest.mark.parametrize("kernel", ["poly", "sigmoid"])
@pytest.mark.parametrize("coef0", [np.nan, np.inf, -np.inf])
def test_bad_coef0(kernel, coef0):
    with pytest.raises(ValueError, match="coef0"):
        FUNCS[kernel](GOOD, coef0=coef0)


@pytest.mark.parametrize("degree,exc", [(0, ValueError), (0.5, ValueError), (-2, ValueError),
                                        (np.nan, ValueError), ("3", TypeError)])
def test_bad_degree(degree, exc):
    with pytest.raises(exc, match="degree"):
        polynomial_kernel(GOOD, degree=degree)


def _overlapping_out():
    buf = np.zeros((6, 6))
    buf[:, :3] = GOOD
    return buf, buf[:, :3]


@pytest.mark.parametrize("kernel", KERNELS)
def test_bad_out(kernel):
    X = GOOD
    ro = np.empty((6, 6))
    ro.flags.writeable = False
    cases = [
        (np.empty((6, 5)), ValueError, "out has shape"),
        (np.empty((6, 6), dtype=np.float32), TypeError, "out has dtype"),
        (np.empty((6, 6), order="F"), ValueError, "out must be C-contiguous"),
        (np.empty((6, 12))[:, ::2], ValueError, "out must be C-contiguous"),
        (ro, ValueError, "out is read-only"),
        ([[0.0] * 6] * 6, TypeError, "out must be a numpy.ndarray"),
        (np.empty((6, 6), dtype=np.int64), TypeError, "out has dtype"),
    ]
    for out, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            call(kernel, X, out=out)
    with pytest.raises(TypeError, match="out has dtype"):
        call(kernel, X.astype(np.float32), out=np.empty((6, 6)))
    # out overlapping an input: K(X, X) written into X's own buffer
    Xsq = data(6, 6)
    with pytest.raises(ValueError, match="out must not share memory"):
        call(kernel, Xsq, out=Xsq)
    with pytest.raises(ValueError, match="out must not share memory"):
        call(kernel, data(6, 6, seed=1), Xsq, out=Xsq)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("n_threads,exc", [(0, ValueError), (-1, ValueError), (1.0, TypeError),
                                           (2.5, TypeError), (True, TypeError),
                                           (np.bool_(True), TypeError), ("2", TypeError)])
def test_bad_n_threads(kernel, n_threads, exc):
    with pytest.raises(exc, match="n_threads"):
        call(kernel, GOOD, n_threads=n_threads)


def test_numpy_integer_n_threads_accepted():
    assert_array_equal(rbf_kernel(GOOD, n_threads=np.int64(2)), rbf_kernel(GOOD, n_threads=1))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("which", ["X", "Y"])
@pytest.mark.parametrize("dtype", [object, "U8"])
def test_object_and_string_data_converted_as_sklearn(kernel, which, dtype):
    A = GOOD.astype(dtype)
    args = (A, GOOD) if which == "X" else (GOOD, A)
    expected = FUNCS[kernel](*(np.asarray(a, dtype=np.float64) for a in args))
    assert_allclose(FUNCS[kernel](*args), expected, rtol=1e-13)
    if kernel in SK_FUNCS:
        assert_allclose(FUNCS[kernel](*args), SK_FUNCS[kernel](*args), rtol=1e-12)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("which", ["X", "Y"])
def test_pandas_nullable_columns(kernel, which):
    pd = pytest.importorskip("pandas")
    A = pd.DataFrame(np.round(GOOD * 10)).astype("Int64")
    args = (A, GOOD) if which == "X" else (GOOD, A)
    dense = [np.asarray(a, dtype=np.float64) for a in args]
    assert_allclose(FUNCS[kernel](*args), FUNCS[kernel](*dense), rtol=1e-13)
    if kernel in SK_FUNCS:
        assert_allclose(FUNCS[kernel](*args), SK_FUNCS[kernel](*args), rtol=1e-12)
    A.iloc[1, 1] = pd.NA
    with pytest.raises(ValueError, match=rf"^{which} contains NaN"):
        FUNCS[kernel](*args)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("which", ["X", "Y"])
@pytest.mark.parametrize("bad,exc,msg", [
    (np.complex128, ValueError, "Complex data not supported in {}"),
    ("complex-object", ValueError, "Complex data not supported in {}"),
    ("letters", ValueError, "{} must be numeric: could not convert"),
    ("datetime64[s]", TypeError, "{} must be a numeric array"),
])
def test_non_numeric_data(kernel, which, bad, exc, msg):
    if bad == "complex-object":
        A = GOOD.astype(complex).astype(object)
    elif bad == "letters":
        A = np.full(GOOD.shape, "a")
    else:
        A = GOOD.astype(bad)
    args = (A, GOOD) if which == "X" else (GOOD, A)
    with pytest.raises(exc, match="^" + msg.format(which)):
        FUNCS[kernel](*args)


def test_out_unaligned_rejected():
    # Tiles are written with aligned streaming stores: an unaligned buffer must
    # be refused before any compiled code runs.
    X = np.random.default_rng(0).normal(size=(5, 3))
    raw = np.zeros(5 * 5 * 8 + 1, dtype=np.uint8)
    out = raw[1:].view(np.float64).reshape(5, 5)
    assert not out.flags.aligned
    with pytest.raises(ValueError, match="out must be aligned"):
        fastkern.rbf_kernel(X, out=out)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(0, 5), (1, 1), (3, 1025), (257, 513)])
def test_first_touch_writes_one_zero_a_page_and_nothing_else(dtype, shape):
    from fastkern import _gram

    a = np.full(shape, 7, dtype=dtype)
    _gram.first_touch(a, 2)
    touched = np.zeros(shape, dtype=bool)
    touched[:, ::4096 // a.itemsize] = True
    assert_array_equal(a[touched], 0)
    assert_array_equal(a[~touched], 7)


def _numpy_common_mean(arrays, rows_per_chunk):
    """The reference: numpy's float64 column sums of fixed row chunks, added in order
    (of C-ordered rows: numpy sums a contiguous column pairwise instead)."""
    total = np.zeros(arrays[0].shape[1])
    for A in map(np.ascontiguousarray, arrays):
        for s in range(0, A.shape[0], rows_per_chunk):
            total += A[s:s + rows_per_chunk].sum(axis=0, dtype=np.float64)
    return total / sum(A.shape[0] for A in arrays)


@pytest.mark.parametrize("layout", ["C", "F", "strided", "read-only"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n, d", [(1, 1), (3, 31), (50, 32), (257, 33), (40, 65)])
def test_common_mean_and_centred_rows_equal_numpy(n, d, dtype, layout):
    from fastkern import _gram

    rng = np.random.default_rng(n + d)
    # Columns of very different scales around a large offset: any change in
    # the order of the sums shows in the last bits.
    base = rng.standard_normal((2 * n, 2 * d)) * 10.0 ** rng.uniform(-3, 5, 2 * d) + 1e4
    base = base.astype(dtype)
    X = {"C": np.ascontiguousarray(base[:n, :d]), "F": np.asfortranarray(base[:n, :d]),
         "strided": base[::2, ::2][:n, :d], "read-only": base[:n, :d].copy()}[layout]
    X.flags.writeable = layout != "read-only"
    Y = base[n:, :d].astype(np.float64)          # another dtype than X for float32
    rows = max(1, (1 << 22) // d)
    assert_array_equal(_gram.common_mean(X), _numpy_common_mean([X], rows))
    assert_array_equal(_gram.common_mean(X, Y), _numpy_common_mean([X, Y], rows))
    mean = _gram.common_mean(X, Y)
    for threads in (1, 2):
        Xc, xn = _gram.centred_rows(X, mean, threads)
        assert Xc.dtype == np.float64 and Xc.flags.c_contiguous
        assert_array_equal(Xc, np.subtract(X, mean))
        assert_allclose(xn, (Xc.astype(np.longdouble) ** 2).sum(axis=1).astype(np.float64),
                        rtol=4 * np.finfo(np.float64).eps, atol=0)


def test_common_mean_of_many_row_chunks_equals_numpy():
    # More rows than one chunk of (1 << 22) // d: the chunk sums are added in order.
    from fastkern import _gram

    X = np.random.default_rng(1).standard_normal((70_000, 64)) * 1e3 + 1e6
    assert_array_equal(_gram.common_mean(X), _numpy_common_mean([X], (1 << 22) // 64))


def test_centred_rows_and_common_mean_reject_mismatched_columns():
    from fastkern import _gram

    with pytest.raises(ValueError, match="mean must hold 3 values"):
        _gram.centred_rows(np.ones((2, 3)), np.zeros(4), 1)
    with pytest.raises(ValueError, match="the same columns"):
        _gram.common_mean(np.ones((2, 3)), np.ones((2, 4)))


def test_tile_scratch_is_kept_per_thread_and_only_when_small(monkeypatch):
    import threading

    from fastkern import _gram

    a = _gram.scratch("test scratch", (3, 5), np.float32)
    assert a.shape == (3, 5) and a.dtype == np.float32 and a.flags.c_contiguous
    b = _gram.scratch("test scratch", (2, 4), np.float64)
    assert np.shares_memory(a, b)          # the same kept buffer, reshaped
    again = _gram.scratch("test scratch", (2, 4), np.float64)
    assert again.shape == (2, 4) and again.dtype == np.float64 and np.shares_memory(again, b)
    wide = _gram.scratch("test scratch", (200, 30), np.float64)    # grows the kept buffer
    assert wide.shape == (200, 30) and not np.shares_memory(wide, b)
    assert not np.shares_memory(a, _gram.scratch("other scratch", (3, 5), np.float32))
    other = {}
    thread = threading.Thread(
        target=lambda: other.setdefault("a", _gram.scratch("test scratch", (3, 5), np.float32)))
    thread.start()
    thread.join(10)
    assert not np.shares_memory(a, other["a"])
    monkeypatch.setattr(_gram, "SCRATCH_KEEP", 64)
    big = _gram.scratch("test scratch", (3, 5), np.float64)   # 120 bytes > 64: new
    assert big.shape == (3, 5) and not np.shares_memory(a, big)


@pytest.mark.parametrize("path", [None, "blas"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_grams_in_concurrent_python_threads(dtype, path):
    # Each Python thread has its own tile buffers, and the BLAS limit the
    # tiles hold is shared: Grams computed at once in several threads equal
    # the same Grams computed one after another in the main thread, bit for
    # bit, and the process's BLAS thread counts are as they were.  (With
    # threadpoolctl >= 3.7 a limit set from a thread other than the first
    # to set one did nothing: the diagonal tiles' gemms ran on two BLAS
    # threads and rounded a few entries otherwise, 30 of 170,000 here.)
    from concurrent.futures import ThreadPoolExecutor

    from threadpoolctl import threadpool_info

    def counts():
        return {i["filepath"]: i["num_threads"] for i in threadpool_info()
                if i["user_api"] == "blas"}

    d = 64 if path is None else 150
    inputs = [data(300 + 37 * i, d, dtype, 40 + i) for i in range(4)]
    gram = functools.partial(fastkern.rbf_kernel, gamma=0.5 / d, path=path)
    expected = [gram(X) for X in inputs]
    before = counts()
    with ThreadPoolExecutor(4) as pool:
        for _ in range(3):
            for K, ref in zip(pool.map(gram, inputs), expected):
                assert_array_equal(K, ref)
    assert counts() == before
