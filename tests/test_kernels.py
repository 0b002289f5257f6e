"""Kernel objects: base kernels, composition rules, positive definiteness, min_eigenvalue."""
import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

import fastkern
from fastkern import kernels as fk
from fastkern.kernels import (
    RBF,
    Exponential,
    Laplacian,
    Linear,
    Polynomial,
    Sigmoid,
    min_eigenvalue,
)


def data(n, d=4, seed=0, dtype=np.float64):
    return np.random.default_rng(seed).uniform(-1, 1, size=(n, d)).astype(dtype)


def sq_dist(X, Y):
    return ((X[:, None, :] - Y[None, :, :]) ** 2).sum(-1)


# Plain-NumPy Gram matrices of the base kernels used below.
def G_lin(X, Y):
    return X @ Y.T


def G_rbf(X, Y, gamma=0.5):
    return np.exp(-gamma * sq_dist(X, Y))


def G_lap(X, Y, gamma=0.3):
    return np.exp(-gamma * np.abs(X[:, None, :] - Y[None, :, :]).sum(-1))


def G_poly(X, Y, degree=2, gamma=0.5, coef0=1.0):
    return (gamma * X @ Y.T + coef0) ** degree


def G_exp(X, Y, gamma=0.25):
    return np.exp(gamma * X @ Y.T)


BASE = {
    "Linear": (Linear(), G_lin),
    "RBF": (RBF(gamma=0.5), G_rbf),
    "Laplacian": (Laplacian(gamma=0.3), G_lap),
    "Polynomial": (Polynomial(degree=2, gamma=0.5, coef0=1.0), G_poly),
    "Exponential": (Exponential(gamma=0.25), G_exp),
}


def compositions():
    lin, rbf, lap, poly, ex = (BASE[k][0] for k in
                               ("Linear", "RBF", "Laplacian", "Polynomial", "Exponential"))
    return {
        "rbf + lin": (rbf + lin, lambda X, Y: G_rbf(X, Y) + G_lin(X, Y)),
        "lap + poly + ex": (lap + poly + ex,
                            lambda X, Y: G_lap(X, Y) + G_poly(X, Y) + G_exp(X, Y)),
        "rbf * poly": (rbf * poly, lambda X, Y: G_rbf(X, Y) * G_poly(X, Y)),
        "lin * lap": (lin * lap, lambda X, Y: G_lin(X, Y) * G_lap(X, Y)),
        "2.5 * rbf": (2.5 * rbf, lambda X, Y: 2.5 * G_rbf(X, Y)),
        "rbf * 0.1": (rbf * 0.1, lambda X, Y: 0.1 * G_rbf(X, Y)),
        "np.float64(3) * lap": (np.float64(3.0) * lap, lambda X, Y: 3.0 * G_lap(X, Y)),
        "lin.polynomial": (lin.polynomial([1.0, 0.5, 0.0, 2.0]),
                           lambda X, Y: 1.0 + 0.5 * G_lin(X, Y) + 2.0 * G_lin(X, Y) ** 3),
        "rbf.polynomial const": (rbf.polynomial([0.7]), lambda X, Y: np.full((len(X), len(Y)), 0.7)),
        "lin ** 3": (lin ** 3, lambda X, Y: G_lin(X, Y) ** 3),
        "rbf ** 1": (rbf ** 1, G_rbf),
        "exp(lin)": (fk.exp(lin), lambda X, Y: np.exp(G_lin(X, Y))),
        "rbf.exp()": (rbf.exp(), lambda X, Y: np.exp(G_rbf(X, Y))),
        "nested": (2.0 * (rbf + lin) ** 2 * lap.exp(),
                   lambda X, Y: 2.0 * (G_rbf(X, Y) + G_lin(X, Y)) ** 2 * np.exp(G_lap(X, Y))),
    }


@pytest.mark.parametrize("name", sorted(BASE))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_base_kernels_match_numpy(name, dtype):
    k, G = BASE[name]
    X, Y = data(70, seed=1, dtype=dtype), data(257, seed=2, dtype=dtype)
    X64, Y64 = X.astype(np.float64), Y.astype(np.float64)
    tol = 1e-12 if dtype == np.float64 else 1e-5
    for y, y64 in ((Y, Y64), (None, X64)):
        K = k(X, y)
        assert K.dtype == dtype
        assert_allclose(K, G(X64, y64), rtol=tol, atol=tol)


def test_sigmoid_matches_numpy_and_sklearn():
    from sklearn.metrics.pairwise import sigmoid_kernel

    X, Y = data(40, seed=3), data(30, seed=4)
    K = Sigmoid(gamma=0.7, coef0=-0.3)(X, Y)
    assert_allclose(K, np.tanh(0.7 * X @ Y.T - 0.3), rtol=1e-12)
    assert_allclose(K, sigmoid_kernel(X, Y, gamma=0.7, coef0=-0.3), rtol=1e-12)


def test_gamma_none_means_one_over_n_features():
    X = data(30, d=5, seed=5)
    assert_allclose(RBF()(X), G_rbf(X, X, gamma=0.2), rtol=1e-12)
    assert_allclose(Polynomial(degree=3)(X), G_poly(X, X, degree=3, gamma=0.2), rtol=1e-12)
    assert_allclose(Exponential()(X), G_exp(X, X, gamma=0.2), rtol=1e-12)


@pytest.mark.parametrize("name", sorted(compositions()))
def test_composition_equals_numpy_combination(name):
    k, G = compositions()[name]
    X, Y = data(60, seed=6), data(45, seed=7)
    assert_allclose(k(X, Y), G(X, Y), rtol=1e-12, atol=1e-12)
    K = k(X)
    assert_allclose(K, G(X, X), rtol=1e-12, atol=1e-12)
    assert_array_equal(K, K.T)


@pytest.mark.parametrize("name", sorted(compositions()))
def test_composition_float32(name):
    k, G = compositions()[name]
    X = data(50, seed=8, dtype=np.float32)
    K = k(X)
    assert K.dtype == np.float32
    ref = G(X.astype(np.float64), X.astype(np.float64))
    assert_allclose(K, ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


@pytest.mark.parametrize("name", sorted(compositions()))
def test_composition_out_and_threads(name):
    k, G = compositions()[name]
    X, Y = data(300, seed=9), data(20, seed=10)
    out = np.full((300, 20), np.nan)
    assert k(X, Y, out=out, n_threads=1) is out
    assert_allclose(out, G(X, Y), rtol=1e-12, atol=1e-12)
    assert_array_equal(out, k(X, Y, n_threads=2))
    with pytest.raises(ValueError, match="out"):
        k(X, Y, out=np.empty((20, 300)))
    with pytest.raises(ValueError, match="n_threads"):
        k(X, Y, n_threads=0)


def _psd_margin(K):
    w = np.linalg.eigvalsh(K)
    return w[0], w[-1]


@pytest.mark.parametrize("name", sorted(set(compositions()) | set(BASE)))
def test_results_are_positive_semidefinite(name):
    k = compositions()[name][0] if name in compositions() else BASE[name][0]
    for seed in range(3):
        X = data(80, d=3, seed=20 + seed) * (1 + seed)
        lo, hi = _psd_margin(k(X))
        assert lo >= -1e-8 * hi, (name, lo, hi)


def test_sigmoid_gram_can_be_indefinite():
    # Documented: tanh(gamma <x,y> + coef0) is not a positive definite kernel.
    X = np.random.default_rng(11).standard_normal((60, 3))
    for params in ({"gamma": 1.0, "coef0": 0.0}, {"gamma": 0.5, "coef0": 1.0}):
        K = Sigmoid(**params)(X)
        lo, hi = _psd_margin(K)
        assert lo < -1e-3 * hi, (params, lo, hi)
        assert_allclose(min_eigenvalue(K), lo, rtol=1e-9, atol=1e-12 * hi)


# ------------------------------------------------------- refused compositions
def test_refused_compositions():
    rbf, lin = RBF(0.5), Linear()
    with pytest.raises(ValueError, match="c must be > 0"):
        0 * rbf
    with pytest.raises(ValueError, match="c must be > 0"):
        rbf * -2.0
    with pytest.raises(ValueError, match="c must be > 0"):
        -0.5 * rbf
    with pytest.raises(ValueError, match="coefficients\\[1\\]"):
        rbf.polynomial([1.0, -0.5, 2.0])
    with pytest.raises(ValueError, match="coefficients must not be empty"):
        rbf.polynomial([])
    with pytest.raises(ValueError, match="coefficients\\[0\\] must be finite"):
        rbf.polynomial([np.nan])
    with pytest.raises(ValueError, match="difference"):
        rbf - lin
    with pytest.raises(ValueError, match="difference"):
        1.0 - rbf
    with pytest.raises(ValueError, match="-k"):
        -rbf
    for p in (1.5, 0, -1, 2.0, True):
        with pytest.raises(ValueError, match="integer power"):
            rbf ** p
    with pytest.raises(ValueError, match="coef0"):
        Polynomial(coef0=-1.0)
    for degree in (0, 2.5, True):
        with pytest.raises(ValueError, match="degree"):
            Polynomial(degree=degree)
    for cls in (RBF, Laplacian, Exponential, Sigmoid):
        with pytest.raises(ValueError, match="gamma"):
            cls(gamma=-1.0)
    with pytest.raises(TypeError, match="exp expects a fastkern kernel"):
        fk.exp(np.ones((2, 2)))
    with pytest.raises(TypeError):
        rbf + 1.0
    with pytest.raises(TypeError):
        rbf * "2"


def test_power_accepts_numpy_integers():
    X = data(20, seed=12)
    assert_allclose((Linear() ** np.int64(2))(X), (X @ X.T) ** 2, rtol=1e-12)


def test_polynomial_trailing_zero_coefficients_are_dropped():
    k = Linear().polynomial([1.0, 2.0, 0.0, 0.0])
    assert k.coefficients == (1.0, 2.0)


# ----------------------------------------------------------------- repr, eq
def test_readable_repr():
    assert repr(RBF(gamma=0.5)) == "RBF(gamma=0.5)"
    assert repr(Linear()) == "Linear()"
    assert repr(Polynomial(degree=2, gamma=None, coef0=1)) == \
        "Polynomial(degree=2, gamma=None, coef0=1.0)"
    assert repr(2 * RBF(0.5) + Linear()) == "(2.0 * RBF(gamma=0.5) + Linear())"
    assert repr(RBF(0.5) * Laplacian(1.0)) == "(RBF(gamma=0.5) * Laplacian(gamma=1.0))"
    assert repr(Linear() ** 2) == "PolynomialOf(kernel=Linear(), coefficients=(0.0, 0.0, 1.0))"
    assert repr(RBF(1.0).exp()) == "ExpOf(kernel=RBF(gamma=1.0))"
    assert repr(Sigmoid(0.1, -1)) == "Sigmoid(gamma=0.1, coef0=-1.0)"


def test_equality_and_clone():
    from sklearn.base import clone
    from sklearn.svm import SVC

    assert RBF(0.5) == RBF(0.5)
    assert RBF(0.5) != RBF(0.6)
    assert RBF(0.5) != Laplacian(0.5)
    assert RBF(0.5) + Linear() == RBF(0.5) + Linear()
    assert hash(RBF(0.5)) == hash(RBF(0.5))
    k = 2 * RBF(0.5) + Linear()
    assert clone(SVC(kernel=k)).kernel == k


def test_kernel_object_matches_pairwise_function():
    X, Y = data(300, seed=13), data(30, seed=14)
    assert_array_equal(RBF(0.3)(X, Y), fastkern.rbf_kernel(X, Y, gamma=0.3))
    assert_array_equal(Polynomial(3, 0.2, 0.5)(X),
                       fastkern.polynomial_kernel(X, degree=3, gamma=0.2, coef0=0.5))


def test_kernel_objects_reject_bad_input():
    X = data(5)
    with pytest.raises(ValueError, match="^X contains NaN"):
        RBF()(np.full((3, 4), np.nan))
    with pytest.raises(ValueError, match="Incompatible dimension"):
        (RBF() + Linear())(X, np.ones((3, 2)))
    with pytest.raises(ValueError, match="^Y must be a 2-D"):
        Linear().exp()(X, np.ones(4))


# -------------------------------------------------------------- min_eigenvalue
@pytest.mark.parametrize("n", [1, 2, 50, 301])
def test_min_eigenvalue_small(n):
    rng = np.random.default_rng(15)
    A = rng.standard_normal((n, n))
    for K in ((A + A.T) / 2, G_rbf(data(n, seed=16), data(n, seed=16))):
        w = np.linalg.eigvalsh(K)
        scale = np.abs(w).max()
        assert_allclose(min_eigenvalue(K), w[0], rtol=0, atol=1e-12 * scale)


@pytest.mark.parametrize("kind", ["sigmoid", "rbf"])
def test_min_eigenvalue_large(kind):
    # Above 1500 rows the Gram is the typical case: an RBF Gram has a cloud of
    # eigenvalues decaying to 0, a Sigmoid Gram a separated negative one.
    n = 1600
    X = np.random.default_rng(17).standard_normal((n, 5))
    K = fastkern.rbf_kernel(X) if kind == "rbf" else fastkern.sigmoid_kernel(X, gamma=0.5)
    w = np.linalg.eigvalsh(K)
    assert_allclose(min_eigenvalue(K), w[0], rtol=0, atol=1e-10 * w[-1])


def test_min_eigenvalue_accepts_integer_and_float32():
    K = np.array([[2, 1], [1, 2]])
    assert_allclose(min_eigenvalue(K), 1.0, rtol=1e-14)
    assert_allclose(min_eigenvalue(K.astype(np.float32)), 1.0, rtol=1e-14)


def test_min_eigenvalue_rejects_bad_input():
    with pytest.raises(ValueError, match="^K must be a square matrix"):
        min_eigenvalue(np.ones((3, 4)))
    with pytest.raises(ValueError, match="^K must be symmetric"):
        min_eigenvalue(np.random.default_rng(18).standard_normal((20, 20)))
    K = G_rbf(data(200, seed=19), data(200, seed=19))
    K[0, 5] += 0.1  # row 0 is sampled by the symmetry check
    with pytest.raises(ValueError, match="^K must be symmetric"):
        min_eigenvalue(K)
    with pytest.raises(ValueError, match="^K contains NaN"):
        min_eigenvalue(np.array([[1.0, np.nan], [np.nan, 1.0]]))
    with pytest.raises(ValueError, match="^K must be a 2-D"):
        min_eigenvalue(np.ones(3))
