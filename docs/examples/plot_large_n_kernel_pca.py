"""
=====================================================
Matrix-free kernel PCA at large N, with its progress
=====================================================

The Gram matrix of N samples takes 8 N^2 bytes: 3.2 GB at N=20,000 and
80 GB at N=100,000.  With ``eigen_solver="matrix-free"``,
:class:`fastkern.KernelPCA` never stores it: a block eigensolver only needs
products of the centred kernel matrix with a few vectors, and each product
is one pass over K, computed tile by tile in compiled code and thrown away.
The memory used is O(N k) for k components.  (``eigen_solver="auto"``
switches to this solver by itself when the dense Gram would not fit in
``memory_budget``.)

Each pass over K costs O(N^2 d), so at large N a fit takes a while; this
example shows the two ways to watch it: ``verbose=True``, which reports each
iteration of the eigensolver through the ``"fastkern"`` logger, and
:func:`fastkern.large_n.reporting_progress`, which calls a function of yours
as each pass advances (the command line draws its progress bar from it).
"""

# %%
# 20,000 points on a swiss roll
# -----------------------------
# A 2-D sheet rolled up in 3-D.  The dense Gram matrix of these points would
# take 3.2 GB; the matrix-free fit below needs a few MB.
import logging
import sys
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_swiss_roll

from fastkern import KernelPCA
from fastkern.large_n import reporting_progress

X, t = make_swiss_roll(n_samples=20_000, noise=0.1, random_state=0)
X = (X - X.mean(axis=0)) / X.std(axis=0)

# %%
# Progress messages
# -----------------
# ``verbose=True`` sends one message per eigensolver iteration (the largest
# residual ||K v - lambda v|| relative to the largest eigenvalue, and the
# time of the last pass over K) to the ``"fastkern"`` logger.  Here they go
# to standard output, where this page shows them; without a handler they
# are printed to standard error.
handler = logging.StreamHandler(sys.stdout)
handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
logging.getLogger("fastkern").addHandler(handler)
logging.getLogger("fastkern").setLevel(logging.INFO)

# %%
# A progress callback
# -------------------
# ``reporting_progress(sink)`` calls ``sink(label, fraction)`` as each pass
# over K advances: the label names the pass ("pass 3, largest residual
# 2.1e-05", or "transform" for projecting new points) and the fraction runs
# from 0 to 1 within it.  We record every call with its time.
events = []
start = time.perf_counter()


def sink(label, fraction):
    events.append((time.perf_counter() - start, label, fraction))


kpca = KernelPCA(n_components=2, kernel="rbf", gamma=0.5, eigen_solver="matrix-free",
                 tol=1e-6, random_state=0, verbose=True)
with reporting_progress(sink):
    Z = kpca.fit_transform(X)
print("eigenvalues:", kpca.eigenvalues_)

# %%
# The embedding and the progress of the fit
# -----------------------------------------
# Left: the 20,000 points in the first two kernel principal components,
# coloured by their position along the roll: the components unroll it.
# Right: what the sink was told.  Each pass over K reported its fraction
# from 0 to 1; from the second pass on its label carries the largest
# residual of the eigenpairs so far, relative to the largest eigenvalue,
# which falls until it is below ``tol`` (dotted line) and the fit stops.
# The time of the fit is the number of passes times the time of one pass.
passes = list(dict.fromkeys(label for _, label, _ in events))
residuals = [float(label.split("largest residual ")[1]) for label in passes
             if "largest residual" in label]
print(f"{len(passes)} passes over K in {events[-1][0]:.1f} s")

fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
axes[0].scatter(*Z.T, c=t, s=1, cmap="viridis")
axes[0].set_title("Kernel PCA of 20,000 points (matrix-free)")
axes[0].set_xlabel("component 1")
axes[0].set_ylabel("component 2")
axes[1].semilogy(np.arange(2, len(residuals) + 2), residuals, "o-")
axes[1].axhline(kpca.tol, color="gray", linestyle=":", label="tol")
axes[1].set_xlabel("pass over K")
axes[1].set_ylabel("largest relative residual before the pass")
axes[1].set_title("Convergence reported to the progress sink")
axes[1].legend()
fig.tight_layout()
plt.show()
