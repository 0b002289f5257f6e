"""
=====================================================
Kernel algebra: building a kernel from simpler ones
=====================================================

Sums, products, positive multiples, polynomials with non-negative
coefficients and the exponential of positive definite kernels are positive
definite kernels again.  The kernel objects of :mod:`fastkern.kernels`
(``RBF``, ``Linear``, ``Polynomial``, ...) compose with ``+``, ``*`` and
``**`` by exactly these rules, and refuse the operations that would break
positive definiteness (a difference, a negative factor).  A composed kernel
is accepted wherever a kernel name is, for example by
:class:`fastkern.KernelRidge`.

Here a linear kernel (a trend) plus an RBF kernel (local wiggles) lets
kernel ridge regression extrapolate a trend that an RBF kernel alone
forgets as soon as it leaves the data.
"""

# %%
# Data with a trend
# -----------------
# y = 0.4 x + sin(2 x) + noise, observed for x in [0, 10]; we predict up to
# x = 14.
import matplotlib.pyplot as plt
import numpy as np

from fastkern import KernelRidge
from fastkern.kernels import RBF, Linear

rng = np.random.default_rng(0)
X = np.sort(rng.uniform(0, 10, size=(80, 1)), axis=0)
y = 0.4 * X[:, 0] + np.sin(2 * X[:, 0]) + rng.normal(scale=0.2, size=80)
X_plot = np.linspace(0, 14, 300)[:, None]

# %%
# Composing kernels
# -----------------
# ``0.05 * Linear() + RBF(gamma=2.0)`` is a ``Sum`` of a ``Scaled`` linear
# kernel and an RBF kernel; calling it on data returns its Gram matrix, the
# sum of the two parts' Gram matrices.  (The factor 0.05 puts the linear
# part, which grows as x^2, on the scale of the RBF part over the data.)
# A difference of kernels is refused, since it need not be positive
# definite.
rbf = RBF(gamma=2.0)
trend = 0.05 * Linear()
trend_plus_wiggles = trend + rbf
print(trend_plus_wiggles)
K_sum = trend_plus_wiggles(X)
print("Gram of the sum = sum of the Grams:",
      np.allclose(K_sum, 0.05 * Linear()(X) + rbf(X)))
try:
    Linear() - rbf
except ValueError as exc:
    print("Linear() - RBF() raises ValueError:", exc)

# %%
# Kernel ridge regression with each kernel
# ----------------------------------------
# Left: the Gram matrices of the two parts and of their sum on the
# training points (sorted by x): the linear part grows with x, the RBF part
# is a band along the diagonal.  Right: the fits.  Within the data both
# follow the sine; beyond x = 10 the RBF kernel's prediction decays to zero
# (no training point is similar to x = 14), while the sum kernel continues
# the linear trend.
fits = {"RBF": KernelRidge(alpha=0.1, kernel=rbf).fit(X, y),
        "0.05 * Linear + RBF": KernelRidge(alpha=0.1, kernel=trend_plus_wiggles).fit(X, y)}

fig = plt.figure(figsize=(12, 4))
grid = fig.add_gridspec(1, 5)
for i, (title, K) in enumerate([("0.05 * Linear", trend(X)), ("RBF", rbf(X)),
                                ("0.05 * Linear + RBF", K_sum)]):
    ax = fig.add_subplot(grid[0, i])
    ax.imshow(K, cmap="viridis")
    ax.set_title(title)
    ax.set_xticks([])
    ax.set_yticks([])
ax = fig.add_subplot(grid[0, 3:])
ax.scatter(X[:, 0], y, s=10, color="gray", label="data")
ax.plot(X_plot[:, 0], 0.4 * X_plot[:, 0] + np.sin(2 * X_plot[:, 0]), "k--", linewidth=1,
        label="true function")
for (name, model), colour in zip(fits.items(), ["C0", "C3"]):
    ax.plot(X_plot[:, 0], model.predict(X_plot), color=colour, label=name)
ax.axvspan(10, 14, color="0.9", zorder=0)
ax.set_title("extrapolation (shaded: no data)")
ax.legend(loc="upper left", fontsize=8)
fig.tight_layout()
plt.show()
