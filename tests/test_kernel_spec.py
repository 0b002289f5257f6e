"""Every estimator with a kernel builds its KernelSpec once, at fit (``kernel_spec_``),
and evaluates that spec afterwards."""
import pickle

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.metrics.pairwise import pairwise_kernels

import fastkern

RNG = np.random.default_rng(0)
X = RNG.normal(size=(80, 4))
Y_REG = X[:, 0] - 2 * X[:, 1] + 0.1 * RNG.normal(size=80)
Y_CLS = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5).astype(int)
Y_VIEW = np.column_stack([np.sin(X[:, 0]), X[:, 1] ** 2])

# (name, estimator, target, the method run after fit)
CASES = [
    ("KernelPCA", fastkern.KernelPCA(3, kernel="rbf", gamma="median", random_state=0),
     None, "transform"),
    ("KernelPCA-matrix-free", fastkern.KernelPCA(3, kernel="rbf", gamma="scale",
                                                 eigen_solver="matrix-free", random_state=0),
     None, "transform"),
    ("KernelPCA-ichol", fastkern.KernelPCA(3, kernel="rbf", gamma=0.3,
                                           eigen_solver="incomplete_cholesky"),
     None, "transform"),
    ("KernelRidge", fastkern.KernelRidge(alpha=0.1, kernel="rbf", gamma="median"),
     Y_REG, "predict"),
    ("KernelRidge-ichol", fastkern.KernelRidge(alpha=0.1, kernel="rbf", gamma=0.3,
                                               solver="incomplete_cholesky"), Y_REG, "predict"),
    ("KernelRidgeCV", fastkern.KernelRidgeCV(kernel="rbf", gamma="scale"), Y_REG, "predict"),
    ("KernelSIR", fastkern.KernelSIR(2, kernel="rbf", gamma="median"), Y_REG, "transform"),
    ("KernelFDA", fastkern.KernelFDA(kernel="rbf", gamma="median"), Y_CLS, "predict"),
    ("KernelCCA", fastkern.KernelCCA(2, kernel="rbf", gamma="median"), Y_VIEW, "transform"),
    ("Nystroem", fastkern.Nystroem(kernel="rbf", gamma="median", n_components=20,
                                   random_state=0), None, "transform"),
]
IDS = [c[0] for c in CASES]


def _fit(est, y):
    return est.fit(X) if y is None else est.fit(X, y)


@pytest.mark.parametrize("name, est, y, method", CASES, ids=IDS)
def test_kernel_spec_is_the_fitted_kernel(name, est, y, method):
    est = _fit(clone(est), y)
    spec = est.kernel_spec_
    gamma = dict(spec.params)["gamma"]
    if hasattr(est, "gamma_"):
        assert gamma == est.gamma_
    np.testing.assert_allclose(spec.gram(X), pairwise_kernels(X, metric="rbf", gamma=gamma),
                               rtol=1e-12)


@pytest.mark.parametrize("name, est, y, method", CASES, ids=IDS)
def test_later_calls_use_the_fitted_kernel_not_the_parameters(name, est, y, method):
    # Before, predict/transform rebuilt the kernel from the parameters: a
    # parameter changed after fit changed the model.
    est = _fit(clone(est), y)
    before = getattr(est, method)(X[:7])
    est.set_params(kernel="laplacian", gamma=5.0)
    np.testing.assert_array_equal(getattr(est, method)(X[:7]), before)


@pytest.mark.parametrize("name, est, y, method", CASES, ids=IDS)
def test_fitted_estimators_pickle_and_clone(name, est, y, method):
    est = _fit(clone(est), y)
    again = pickle.loads(pickle.dumps(est))
    assert again.kernel_spec_ == est.kernel_spec_
    np.testing.assert_array_equal(getattr(again, method)(X[:7]), getattr(est, method)(X[:7]))
    assert not hasattr(clone(est), "kernel_spec_")


# -- validate_input's pass-through of plain float arrays --------------------

def _validation_outcome(validate, est, X, y, reset, params):
    """(result, error, warnings, n_features_in_, has feature_names_in_) of one call."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result, error = validate(est, X, y, reset, params), None
        except (ValueError, TypeError) as exc:
            result, error = None, (type(exc), str(exc))
    return (result, error, [str(w.message) for w in caught],
            getattr(est, "n_features_in_", None), hasattr(est, "feature_names_in_"))


def _inputs():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 4))
    y = rng.standard_normal(30)
    nan = X.copy()
    nan[3, 2] = np.nan
    big = np.full((4, 3), np.finfo(np.float32).max, dtype=np.float32)  # its sum overflows
    frozen = np.asfortranarray(X)
    frozen.flags.writeable = False
    return [
        ("plain", X, "no_validation"), ("with y", X, y), ("2-D y", X, np.c_[y, y]),
        ("column y", X, y[:, None]), ("float32", X.astype(np.float32), "no_validation"),
        ("F-ordered read-only", frozen, y), ("strided", X[::2, ::2], "no_validation"),
        ("float16", X.astype(np.float16), "no_validation"), ("int", (X * 9).astype(int), y),
        ("NaN", nan, y), ("inf in y", X, np.r_[y[:-1], np.inf]), ("overflowing sum", big, "no_validation"),
        ("short y", X, y[:-1]), ("y None", X, None), ("int y", X, (y > 0).astype(int)),
        ("0-d y", X, np.float64(1.0)), ("no rows", X[:0], "no_validation"),
        ("no columns", X[:, :0], "no_validation"), ("3-D", X[:, :, None], "no_validation"),
        ("list", X.tolist(), "no_validation"), ("wrong columns", X[:, :3], "no_validation"),
    ]


@pytest.mark.parametrize("params", [
    {"accept_sparse": ["csr", "csc"], "dtype": [np.float64, np.float32]},
    {"accept_sparse": ("csr", "csc"), "multi_output": True, "y_numeric": True},
    {"accept_sparse": ["csr"], "dtype": np.float64, "ensure_min_samples": 2},
], ids=["kpca", "ridge", "sir"])
@pytest.mark.parametrize("reset", [True, False])
@pytest.mark.parametrize("fitted_with_names", [False, True])
def test_validate_input_is_validate_data(params, reset, fitted_with_names):
    """Every outcome of fastkern's validate_input is scikit-learn's validate_data's:
    the array returned, the error or warning, the attributes left on the estimator."""
    from sklearn.utils.validation import validate_data

    from fastkern._kernel_api import validate_input

    def fastkern_call(est, X, y, reset, params):
        return validate_input(est, X, y, reset=reset, **params)

    def sklearn_call(est, X, y, reset, params):
        return validate_data(est, X, y, reset=reset, **params)

    for name, X, y in _inputs():
        if y is None and not reset:
            continue
        outcomes = []
        for validate in (fastkern_call, sklearn_call):
            est = fastkern.KernelRidge()
            est.n_features_in_ = 4
            if fitted_with_names:
                est.feature_names_in_ = np.array(["a", "b", "c", "d"], dtype=object)
            outcomes.append(_validation_outcome(validate, est, X, y, reset, params))
        ours, theirs = outcomes
        assert ours[1:] == theirs[1:], name
        if theirs[0] is None:
            continue
        for a, b in zip(*(r if isinstance(r, tuple) else (r,) for r in (ours[0], theirs[0]))):
            assert type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape, name
            np.testing.assert_array_equal(a, b, err_msg=name)
            # Passed through (or a view), not copied, when scikit-learn does not copy.
            given = [v for v in (X, y) if isinstance(v, np.ndarray)]
            assert (any(np.shares_memory(a, v) for v in given)
                    == any(np.shares_memory(b, v) for v in given)), name


ESTIMATOR_CLASSES = [fastkern.KernelPCA, fastkern.KernelRidge, fastkern.KernelRidgeCV,
                     fastkern.KernelSIR, fastkern.SlicedInverseRegression, fastkern.KernelFDA,
                     fastkern.KernelCCA, fastkern.KernelCenterer, fastkern.Nystroem]


@pytest.mark.parametrize("cls", ESTIMATOR_CLASSES, ids=lambda c: c.__name__)
def test_cached_parameter_validation_is_sklearns(cls):
    """Each parameter set to a value no constraint allows raises scikit-learn's own
    error; valid values pass, before and after a failure."""
    from sklearn.utils._param_validation import (InvalidParameterError,
                                                 validate_parameter_constraints)

    est = cls()
    est._validate_params()
    for name in sorted(cls._parameter_constraints):
        bad = cls().set_params(**{name: object()})
        with pytest.raises(InvalidParameterError) as ours:
            bad._validate_params()
        with pytest.raises(InvalidParameterError) as theirs:
            validate_parameter_constraints(cls._parameter_constraints,
                                           bad.get_params(deep=False), caller_name=cls.__name__)
        assert str(ours.value) == str(theirs.value)
        est._validate_params()


def test_cached_parameter_validation_per_class():
    """A subclass's own constraints are its own: not those cached for its base."""
    from numbers import Real

    from sklearn.utils._param_validation import InvalidParameterError, Interval

    class Strict(fastkern.KernelRidge):
        _parameter_constraints = {**fastkern.KernelRidge._parameter_constraints,
                                  "alpha": [Interval(Real, 2, None, closed="left")]}

    fastkern.KernelRidge(alpha=1.0)._validate_params()
    with pytest.raises(InvalidParameterError, match="'alpha' parameter of Strict"):
        Strict(alpha=1.0)._validate_params()
    fastkern.KernelRidge(alpha=1.0)._validate_params()


@pytest.mark.parametrize("valid, invalid", [
    ({"n_components": 2}, {"n_components": 2.0}),
    ({"max_iter": 3}, {"max_iter": 3.0}),
    ({"fit_inverse_transform": True}, {"fit_inverse_transform": 1}),
    ({"degree": 3.0}, {"degree": "3"}),
])
def test_cached_parameter_validation_tells_equal_values_of_another_type_apart(valid, invalid):
    """A value that passed is remembered by type and value: an equal value of a type
    scikit-learn rejects (2.0 for an integer, 1 for a boolean) still raises its
    error, however often the valid one was checked."""
    from sklearn.utils._param_validation import (InvalidParameterError,
                                                 validate_parameter_constraints)

    for _ in range(2):
        fastkern.KernelPCA(**valid)._validate_params()
    bad = fastkern.KernelPCA(**invalid)
    with pytest.raises(InvalidParameterError) as ours:
        bad._validate_params()
    with pytest.raises(InvalidParameterError) as theirs:
        validate_parameter_constraints(fastkern.KernelPCA._parameter_constraints,
                                       bad.get_params(deep=False), caller_name="KernelPCA")
    assert str(ours.value) == str(theirs.value)


def test_cached_parameter_validation_stays_bounded(monkeypatch):
    """A randomized search's endless new floats do not grow the cache without end,
    and values still pass or fail after it is cleared."""
    from sklearn.utils._param_validation import InvalidParameterError

    from fastkern import _validation

    monkeypatch.setattr(_validation, "_MAX_PASSED", 8)
    for gamma in np.linspace(0.1, 2.0, 50):
        fastkern.KernelPCA(gamma=float(gamma))._validate_params()
    assert len(_validation._PARAMS_PASSED[fastkern.KernelPCA]) <= 8
    with pytest.raises(InvalidParameterError, match="gamma"):
        fastkern.KernelPCA(gamma=-1.0)._validate_params()


SPEC_KERNELS = [("linear", {}), ("poly", {"degree": 2, "gamma": 0.3, "coef0": 0.5}),
                ("polynomial", {}), ("rbf", {"gamma": None}), ("rbf", {"gamma": 0.7}),
                ("laplacian", {"gamma": 0.2}), ("sigmoid", {"gamma": 0.1, "coef0": -0.3}),
                ("exponential", {"gamma": 0.05}), ("laplacian_l2", {"gamma": 0.4}),
                ("bessel", {"gamma": 0.5, "order": 2, "degree": 1}),
                ("rational_quadratic", {"alpha": 2.0, "length_scale": 1.5}), ("rq", {})]


@pytest.mark.parametrize("name, params", SPEC_KERNELS, ids=[f"{n}-{i}" for i, (n, _) in
                                                            enumerate(SPEC_KERNELS)])
def test_spec_gram_is_pairwise_kernels_bit_for_bit(name, params):
    # KernelSpec.gram calls the registry kernels on dense arrays without
    # fastkern.pairwise_kernels' layers: the same values, for every input form.
    spec = fastkern._kernel_api.KernelSpec.from_params(name, kernel_params=params or None)
    A = RNG.normal(size=(37, 5))
    B = RNG.normal(size=(11, 5))
    inputs = [(A, None), (A, B), (A.astype(np.float32), None), (np.asfortranarray(A), B),
              ((A * 3).astype(np.int64), None), (A[::2], B[1:])]
    for Xa, Ya in inputs:
        got = spec.gram(Xa, Ya, n_threads=1)
        expected = fastkern.pairwise_kernels(Xa, Ya, metric=name, n_threads=1, **spec.params)
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)
        out = np.empty_like(expected)
        assert spec.gram(Xa, Ya, out=out, n_threads=2) is out
        np.testing.assert_array_equal(out, expected)
    with pytest.raises(ValueError, match="X contains NaN"):
        spec.gram(np.full((3, 5), np.nan))
