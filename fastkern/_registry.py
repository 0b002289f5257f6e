"""The vector kernels, each defined once.

One :class:`KernelDef` per kernel on numeric vectors: its names, its
parameters (defaults, constraints, what None means), the geometry the
compiled loops compute before the kernel's map, the compiled map's name in
``src/fk_maps.h`` (``FK_KINDS``), the paths that compute it, whether it is
bounded on finite data, and a NumPy reference formula.  Everything else is
derived from here: ``pairwise.KERNEL_CODES``, ``KERNEL_PARAMS`` and the
dispatch of ``pairwise_kernels`` (with the error message listing the
names), the Gram function of a kernel that has no hand-written one, the
kernel classes of ``fastkern.kernels``, ``fastkern.__all__``, the
estimators' accepted kernel strings (``_kernel_api.STRING_KERNELS``), the
CLI's ``--kernel`` choices, and the tests' reference values.

Adding a kernel of the squared distance, inner product or L1 distance takes
one entry here and its map in ``src/fk_maps.h`` (see
docs/developer/extending.rst).

No numpy at import: ``import fastkern`` reads the names from here and stays
light (the reference formulas import numpy when they run).
"""
from dataclasses import dataclass
from typing import Any, Callable, Optional

__all__ = ["GEOMETRIES", "PATHS", "Param", "KernelDef", "KERNELS", "BY_NAME", "get"]

#: What the compiled loops compute before a kernel's map: inner products,
#: squared Euclidean distances, L1 distances, or a sum/product over features
#: (``fastkern._featurewise``).
GEOMETRIES = ("inner", "sqdist", "l1", "featurewise")
#: The ways a Gram can be computed: dense input, scipy sparse input, the
#: matrix-free products of the large-N solvers, float32 data in float32.
PATHS = ("dense", "sparse", "matrix-free", "float32")


@dataclass(frozen=True)
class Param:
    """One parameter of a kernel.

    ``none`` says what None means: "n_features" (1 / n_features, computed at
    the call), a number, or None when None is refused.  ``low``/``high``
    bound the value (``low_inclusive``); ``integer`` requires an integer
    value (a float such as 2.0 is accepted).
    """

    name: str
    default: Any
    doc: str
    low: Optional[float] = None
    low_inclusive: bool = True
    high: Optional[float] = None
    integer: bool = False
    none: Any = None

    def resolve(self, value, n_features=None):
        """Return the checked value as the compiled loops take it (a float).

        None becomes what ``none`` says; a bad value raises ValueError (or
        TypeError for a non-number) naming the parameter.
        """
        from fastkern._validation import check_real

        if value is None and self.none is not None:
            return 1.0 / n_features if self.none == "n_features" else float(self.none)
        value_in = value
        value = check_real(value, self.name, low=self.low,
                           low_inclusive=self.low_inclusive)
        if self.high is not None and value > self.high:
            raise ValueError(f"{self.name} must be <= {self.high:g}, got {value_in}")
        if self.integer and value != int(value):
            bound = "" if self.low is None else f" >= {self.low:g}"
            raise ValueError(f"{self.name} must be an integer{bound}, got {value_in!r}")
        return value

    def describe(self):
        """The numpydoc entry of the parameter (two lines and more)."""
        kind = "int" if self.integer else "float"
        return f"{self.name} : {kind}, default={self.default!r}\n    {self.doc}"


def _np():
    import numpy as np

    return np


def _inner(x, y):
    return (x * y).sum(axis=-1)


def _sqdist(x, y):
    """Squared Euclidean distances from direct differences (no expansion)."""
    return ((x - y) ** 2).sum(axis=-1)


def _l1dist(x, y):
    return _np().abs(x - y).sum(axis=-1)


#: Geometry -> the quantity of two broadcast row arrays (features last).
_GEOMETRY = {"inner": _inner, "sqdist": _sqdist, "l1": _l1dist}


def _unit_rows(A):
    """A with rows of unit L2 norm; zero rows stay zero."""
    np = _np()
    norms = np.linalg.norm(A, axis=1)
    return A / np.where(norms == 0, 1.0, norms)[:, None]


def _bessel(d2, gamma, order, degree):
    np = _np()
    from scipy.special import gammaln, jv

    r = gamma * np.sqrt(d2)
    with np.errstate(divide="ignore", invalid="ignore"):
        k = jv(order, r) * np.exp(gammaln(order + 1) + order * np.log(2.0 / r))
    return np.where(r == 0, 1.0, k) ** degree


def _spline(x, y):
    m = _np().minimum(x, y)
    return (1 + x * y + x * y * m - (x + y) / 2 * m ** 2 + m ** 3 / 3).prod(axis=-1)


def _chi2_terms(x, y):
    np = _np()
    s = x + y
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(s == 0, 0.0, (x - y) ** 2 / np.where(s == 0, 1.0, s)).sum(axis=-1)


@dataclass(frozen=True)
class KernelDef:
    """One vector kernel.

    Parameters
    ----------
    name : str
        The name of ``pairwise_kernels(metric=...)`` and of ``kernel=``.
    formula : str
        k(x, y) in one line (the Gram function's summary).
    params : tuple of Param
        In the order of the Gram function's positional parameters.
    geometry : str
        One of :data:`GEOMETRIES`.
    compiled : str or None
        The name of its map in ``src/fk_maps.h`` (``FK_KINDS``), or None
        (cosine: the linear map of normalised rows).
    paths : frozenset of str
        The subset of :data:`PATHS` that computes it.
    bounded : bool
        |k| <= 1 on finite data: its Grams need no finiteness scan.
    value : callable
        The formula in NumPy/SciPy, params resolved: ``value(g, **params)``
        of the geometry's quantity g (inner product, squared or L1
        distance), or for "featurewise" ``value(x, y, **params)`` of row
        arrays broadcast against each other, features on the last axis.
        :meth:`reference` and :meth:`paired` evaluate it.
    aliases : tuple of str
        Other names of the same kernel.
    function : str
        The Gram function's name in ``fastkern.pairwise`` (and ``fastkern``).
    class_name : str or None
        The kernel class's name in ``fastkern.kernels``.
    compiled_args : callable
        Resolved params -> {slot name: value} of the parameter array the
        compiled loops read (the slots of ``FK_PARAMS`` in ``src/fk_maps.h``:
        gamma, coef0, degree, order; the others keep their default).  By
        default the params themselves, for a kernel whose parameters are
        named as slots.
    description : str
        Paragraphs after the summary of the generated Gram function.
    title : str
        The kernel's name in prose (default: ``name`` with spaces).
    reference_url : str
        Where the formula comes from (the independent reference of the tests).
    normalized : bool
        The kernel of the rows scaled to unit L2 norm (cosine).
    gamma_degree : int
        The kernel of x 2^-e, y 2^-e with its compiled gamma slot times
        2^(gamma_degree e) is the kernel of x, y (gamma multiplies the squared
        distance or inner product: 2; the distance: 1).  The Gram functions
        use it to bring data whose squares leave its dtype's range (1e154 in
        float64, 2e19 in float32) near 1, exactly.  0: the kernel is not
        rescaled (its values scale with the data, or it has no such gamma).
    float32_gamma : bool
        Its float32 loops take gamma in float32: a gamma past float32's range
        (inf there, and inf * 0 is NaN) is refused for float32 data.
    """

    name: str
    formula: str
    params: tuple
    geometry: str
    compiled: Optional[str]
    paths: frozenset
    bounded: bool
    value: Callable
    aliases: tuple = ()
    function: str = ""
    class_name: Optional[str] = None
    compiled_args: Callable = dict
    description: str = ""
    reference_url: str = ""
    normalized: bool = False
    title: str = ""
    gamma_degree: int = 0
    float32_gamma: bool = False

    def __post_init__(self):
        if self.geometry not in GEOMETRIES:
            raise ValueError(f"geometry must be one of {GEOMETRIES}, got {self.geometry!r}")
        if not self.paths <= set(PATHS) or "dense" not in self.paths:
            raise ValueError(f"paths must include 'dense' and lie in {PATHS}")
        if not self.function:
            object.__setattr__(self, "function", f"{self.name}_kernel")
        if not self.title:
            object.__setattr__(self, "title", self.name.replace("_", " "))

    def _rows(self, A):
        np = _np()
        A = np.asarray(A, dtype=np.float64)
        return _unit_rows(A) if self.normalized else A

    def _evaluate(self, a, b, params):
        if self.geometry == "featurewise":
            return self.value(a, b, **params)
        return self.value(_GEOMETRY[self.geometry](a, b), **params)

    def paired(self, A, B, **params):
        """Return k(A[i], B[i]) for each row i, in NumPy (params resolved: :meth:`resolve`)."""
        return self._evaluate(self._rows(A), self._rows(B), params)

    def reference(self, X, Y=None, **params):
        """Return the Gram k(X, Y) in NumPy, O(n m d) memory: for tests and small data."""
        X = self._rows(X)
        Y = X if Y is None else self._rows(Y)
        return self._evaluate(X[:, None, :], Y[None, :, :], params)

    @property
    def names(self):
        """The name and its aliases."""
        return (self.name,) + self.aliases

    @property
    def param_names(self):
        return tuple(p.name for p in self.params)

    def param(self, name):
        """The :class:`Param` called ``name`` (KeyError if the kernel has none)."""
        for p in self.params:
            if p.name == name:
                return p
        raise KeyError(name)

    def resolve(self, params, n_features=None):
        """Every parameter checked, missing ones at their default, None resolved.

        Parameters
        ----------
        params : mapping
            Parameters of this kernel (others raise TypeError).
        n_features : int, default=None
            Columns of the data, for a default of 1 / n_features.

        Returns
        -------
        dict
            name -> float, in the order of :attr:`params`.
        """
        unknown = set(params) - set(self.param_names)
        if unknown:
            raise TypeError(f"{self.name} kernel got unexpected parameter(s) "
                            f"{sorted(unknown)}; it takes {list(self.param_names)}")
        return {p.name: p.resolve(params.get(p.name, p.default), n_features)
                for p in self.params}

    def compiled_numbers(self, params, n_features=None):
        """{slot name: value} of the compiled loops' parameter array for these
        parameters (``fastkern._gram.pack_params`` makes the array)."""
        return self.compiled_args(self.resolve(params, n_features))


_GAMMA = Param("gamma", None, "Kernel coefficient (>= 0); None means 1 / n_features.",
               low=0.0, none="n_features")
_COEF0 = Param("coef0", 1, "Constant term.")
_ALL = frozenset(PATHS)
_DENSE = frozenset(("dense", "float32"))
_SKLEARN = "https://scikit-learn.org/stable/modules/metrics.html"
_KERNLAB = "https://cran.r-project.org/package=kernlab"


def _rq_args(p):
    """gamma = 1 / (2 alpha l^2), and its logarithm for the map's terms where
    gamma d2 (or gamma itself: l = 1e-200) is past the double range.  A
    2 alpha l^2 past it (l = 1e200) is inf: gamma 0, the kernel 1."""
    import math
    import sys

    alpha, length_scale = p["alpha"], p["length_scale"]
    log_gamma = -(math.log(2.0) + math.log(alpha) + 2.0 * math.log(length_scale))
    scale = 2.0 * alpha * (length_scale * length_scale)
    # A subnormal 2 alpha l^2 has lost bits: the logarithm takes over.
    gamma = 1.0 / scale if scale >= sys.float_info.min else math.inf
    return {"gamma": gamma, "degree": alpha, "log_gamma": log_gamma}


KERNELS = (
    KernelDef("linear", "K(x, y) = <x, y>", (), "inner", "linear", _ALL, False,
              lambda g: g, class_name="Linear", reference_url=_SKLEARN),
    KernelDef("poly", "K(x, y) = (gamma <x, y> + coef0)^degree",
              (Param("degree", 3, "Exponent (>= 1).", low=1.0), _GAMMA, _COEF0),
              "inner", "poly", _ALL, False,
              lambda g, degree, gamma, coef0: (gamma * g + coef0) ** degree,
              aliases=("polynomial",), function="polynomial_kernel", class_name="Polynomial",
              reference_url=_SKLEARN, gamma_degree=2, float32_gamma=True),
    KernelDef("rbf", "K(x, y) = exp(-gamma ||x - y||^2)", (_GAMMA,), "sqdist", "rbf", _ALL,
              True, lambda d2, gamma: _np().exp(-gamma * d2), class_name="RBF",
              reference_url=_SKLEARN, gamma_degree=2, float32_gamma=True),
    KernelDef("laplacian", "K(x, y) = exp(-gamma ||x - y||_1)", (_GAMMA,), "l1", "laplacian",
              _ALL, True, lambda d1, gamma: _np().exp(-gamma * d1),
              class_name="Laplacian", reference_url=_SKLEARN, title="Laplacian",
              gamma_degree=1, float32_gamma=True,
              description="The L1 distance, as scikit-learn; ``laplacian_l2_kernel`` is "
              "kernlab's, of the Euclidean distance."),
    KernelDef("sigmoid", "K(x, y) = tanh(gamma <x, y> + coef0)", (_GAMMA, _COEF0), "inner",
              "sigmoid", _ALL, True, lambda g, gamma, coef0: _np().tanh(gamma * g + coef0),
              class_name="Sigmoid", reference_url=_SKLEARN, gamma_degree=2,
              float32_gamma=True,
              description="Not positive definite in general (only for some gamma, coef0 "
              "and data)."),
    KernelDef("exponential", "K(x, y) = exp(gamma <x, y>)", (_GAMMA,), "inner", "exponential",
              _ALL, False, lambda g, gamma: _np().exp(gamma * g), class_name="Exponential",
              gamma_degree=2, float32_gamma=True,
              description="Positive definite (the exponential of the linear kernel).  Large "
              "gamma <x, y> overflows to inf exactly as numpy's exp would."),
    KernelDef("cosine", "K(x, y) = <x, y> / (|x| |y|)", (), "inner", None,
              frozenset(("dense", "sparse", "float32")), True, lambda g: g,
              function="cosine_similarity", reference_url=_SKLEARN, normalized=True),
    KernelDef("laplacian_l2", "K(x, y) = exp(-gamma ||x - y||_2)",
              (Param("gamma", None, "Kernel coefficient (> 0); None means 1 / n_features.",
                     low=0.0, low_inclusive=False, none="n_features"),),
              "sqdist", "laplacian_l2", _ALL, True,
              lambda d2, gamma: _np().exp(-gamma * _np().sqrt(d2)),
              class_name="LaplacianL2", reference_url=_KERNLAB, gamma_degree=1,
              float32_gamma=True),
    KernelDef("anova", "K(x, y) = (sum_k exp(-gamma (x_k - y_k)^2))^degree",
              (Param("gamma", 1.0, "The scale (> 0), kernlab's sigma; None means 1.0.",
                     low=0.0, low_inclusive=False, none=1.0),
               Param("degree", 1, "An integer >= 1.", low=1.0, integer=True)),
              "featurewise", "anova", _DENSE, False,
              lambda x, y, gamma, degree: _np().exp(-gamma * (x - y) ** 2).sum(axis=-1)
              ** degree, class_name="Anova", reference_url=_KERNLAB),
    KernelDef("bessel", "K(x, y) = (Gamma(nu + 1) (2 / r)^nu J_nu(r))^degree, "
              "r = gamma ||x - y||_2",
              (Param("gamma", 1.0, "Scale of the distance (> 0, kernlab's sigma); None "
                     "means 1.0.", low=0.0, low_inclusive=False, none=1.0),
               Param("order", 1, "The order nu, in [0, 100].", low=0.0, high=100.0),
               Param("degree", 1, "An integer >= 1.", low=1.0, integer=True)),
              "sqdist", "bessel", _ALL, True, _bessel, class_name="Bessel",
              reference_url=_KERNLAB, gamma_degree=1),
    KernelDef("spline", "kernlab's infinite linear spline kernel", (), "featurewise", "spline",
              _DENSE, False, _spline, class_name="Spline", reference_url=_KERNLAB),
    KernelDef("chi2", "K(x, y) = exp(-gamma sum_k (x_k - y_k)^2 / (x_k + y_k))",
              (Param("gamma", 1.0, "Kernel coefficient (> 0).", low=0.0,
                     low_inclusive=False),),
              "featurewise", "chi2", _DENSE, True,
              lambda x, y, gamma: _np().exp(-gamma * _chi2_terms(x, y)), class_name="Chi2",
              reference_url=_SKLEARN),
    KernelDef("additive_chi2", "K(x, y) = -sum_k (x_k - y_k)^2 / (x_k + y_k)", (),
              "featurewise", "additive_chi2", _DENSE, False, lambda x, y: -_chi2_terms(x, y),
              class_name="AdditiveChi2", reference_url=_SKLEARN),
    KernelDef("rational_quadratic", "K(x, y) = (1 + ||x - y||^2 / (2 alpha l^2))^(-alpha)",
              (Param("alpha", 1.0, "The scale mixture parameter (> 0).", low=0.0,
                     low_inclusive=False),
               Param("length_scale", 1.0, "The length scale l (> 0).", low=0.0,
                     low_inclusive=False)),
              "sqdist", "rational_quadratic", _ALL, True,
              lambda d2, alpha, length_scale:
              (1 + d2 / (2 * alpha * (length_scale * length_scale))) ** -alpha,
              aliases=("rq",), class_name="RationalQuadratic", compiled_args=_rq_args,
              gamma_degree=2,
              description="scikit-learn's ``gaussian_process.kernels.RationalQuadratic"
              "(length_scale, alpha)``: a scale mixture of RBF kernels of different "
              "length scales.",
              reference_url="https://scikit-learn.org/stable/modules/gaussian_process.html"),
    KernelDef("histogram_intersection", "K(x, y) = sum_k min(x_k, y_k)", (), "featurewise",
              "histogram_intersection", _DENSE, False, lambda x, y: _np().minimum(x, y).sum(axis=-1),
              class_name="HistogramIntersection"),
)

#: Every name and alias -> its KernelDef.
BY_NAME = {name: k for k in KERNELS for name in k.names}


def get(name):
    """Return the :class:`KernelDef` of a kernel name or alias (ValueError if unknown)."""
    try:
        return BY_NAME[name]
    except (KeyError, TypeError):
        raise ValueError(f"Unknown kernel {name!r}; expected one of {sorted(BY_NAME)}") \
            from None


def _check_names():
    """Each name defined once (at import: a duplicate entry is a programming error)."""
    names = [name for k in KERNELS for name in k.names]
    if len(names) != len(set(names)):
        raise RuntimeError(f"kernel names defined twice: {sorted(names)}")


_check_names()
