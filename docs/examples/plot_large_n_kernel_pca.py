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
# 20,000 points on two circles
# ----------------------------
# Two noisy concentric circles, which no linear projection separates.  The
# dense Gram matrix of these points would take 3.2 GB; the matrix-free fit
# below needs a few MB.
import logging
import sys
import time

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_circles

from fastkern import KernelPCA
from fastkern.large_n import reporting_progress

X, y = make_circles(n_samples=20_000, factor=0.3, noise=0.05, random_state=0)

# %%
# Progress messages
# -----------------
# ``verbose=True`` sends one message per eigensolver iteration (the largest
# residual ||K v - lambda v|| of the current eigenpairs, and the time of the
# last pass over K) to the ``"fastkern"`` logger.  Here they go
# to standard output, where this page shows them; without a handler they
# are printed to standard error.
logger = logging.getLogger("fastkern")
handler = logging.StreamHandler(sys.stdout)
handler.setFormatter(logging.Formatter("[%(name)s] %(message)s"))
logger.addHandler(handler)
logger.setLevel(logging.INFO)

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


kpca = KernelPCA(n_components=2, kernel="rbf", gamma=2.0, eigen_solver="matrix-free",
                 tol=1e-6, random_state=0, verbose=True)
with reporting_progress(sink):
    Z = kpca.fit_transform(X)
# Leave the logger as it was, for whatever runs next in this process.
logger.removeHandler(handler)
logger.setLevel(logging.NOTSET)
print("eigenvalues:", np.round(kpca.eigenvalues_, 2))

# %%
# The embedding and the progress of the fit
# -----------------------------------------
# Left: the 20,000 points in the first two kernel principal components,
# coloured by circle: the first component alone separates the inner circle
# from the outer one.
# Right: what the sink was told, drawn as a progress bar would use it: the
# number of passes over K completed (pass index plus the fraction of the
# current pass) against the time since the fit began.  Each pass takes about
# the same time, so the fit's duration is the number of passes, set by how
# fast the eigensolver converges to ``tol``, times the time of one pass.
# The labels from the second pass on carry the largest residual
# ||K v - lambda v|| of the eigenpairs so far (the same numbers as the
# messages above): the solver stops once every residual is below ``tol``
# times the largest eigenvalue.
passes = list(dict.fromkeys(label for _, label, _ in events))
print(f"{len(passes)} passes over K in {events[-1][0]:.1f} s; tol x largest eigenvalue = "
      f"{kpca.tol * kpca.eigenvalues_[0]:.1e}")

fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
axes[0].scatter(*Z.T, c=y, s=1, cmap="coolwarm")
axes[0].set_title("Kernel PCA of 20,000 points (matrix-free)")
axes[0].set_xlabel("component 1")
axes[0].set_ylabel("component 2")
for index, label in enumerate(passes):
    seconds = [s for s, lab, _ in events if lab == label]
    done = [index + f for _, lab, f in events if lab == label]
    axes[1].plot(seconds, done, color="C0")
    text = label.replace(", largest residual", "\nresidual")
    axes[1].annotate(text, (seconds[0], index), fontsize=7, xytext=(4, 6),
                     textcoords="offset points")
axes[1].set_xlabel("seconds since the fit began")
axes[1].set_ylabel("passes over K completed")
axes[1].set_ylim(0, len(passes) + 0.8)
axes[1].set_title("Progress reported to the sink")
fig.tight_layout()
plt.show()
