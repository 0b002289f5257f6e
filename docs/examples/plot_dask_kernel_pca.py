"""
=====================================================
Kernel PCA with the kernel passes on a Dask cluster
=====================================================

The matrix-free kernel PCA solver (``eigen_solver="matrix-free"``) spends
its time in passes over the kernel matrix, each a product K @ V.  Inside a
``with fastkern.cluster(client):`` block, or given a ``dask.array`` X,
:class:`fastkern.KernelPCA` sends each pass to a Dask cluster: one task per
row block of X computes K(X_block, X) @ V with the same compiled tile loop as
the in-process solver, and the eigensolver itself runs on the client.  The
results agree with the in-process ones to within the eigensolver's
tolerance, whatever the cluster.

Dask is an optional dependency (``pip install "dask[array]" distributed``).  This
example starts a small cluster inside this process; on a real cluster you
would connect with ``Client("tcp://scheduler-host:8786")`` instead.  Where
Dask is not installed, it runs the in-process solver only.
"""

# %%
# Data
# ----
# Two interleaved half-moons, 3,000 points: small enough for a few seconds,
# large enough that the work is split into blocks.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_moons

import fastkern
from fastkern import KernelPCA

X, y = make_moons(n_samples=3000, noise=0.05, random_state=0)


def make_kpca():
    return KernelPCA(n_components=2, kernel="rbf", gamma=5.0, eigen_solver="matrix-free",
                     tol=1e-8, random_state=0)


Z_local = make_kpca().fit_transform(X)

# %%
# The same fit on a local Dask cluster
# ------------------------------------
# ``LocalCluster(processes=False)`` runs the scheduler and one worker with
# two threads in this process (fastkern divides the host's cores between a
# host's Dask threads, so the two tasks at a time do not oversubscribe them).
# ``timeout`` bounds every wait on the cluster: a lost cluster raises
# ``TimeoutError`` instead of hanging.
try:
    from distributed import Client, LocalCluster
except ImportError:
    Client = None
    print("dask.distributed is not installed: only the in-process fit is shown")

if Client is not None:
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        with fastkern.cluster(client, timeout=120):
            kpca_dask = make_kpca().fit(X)
        Z_dask = kpca_dask.transform(X)  # on the cluster of the fit
    print("largest difference between the in-process and the Dask embedding:",
          f"{np.abs(Z_dask - Z_local).max():.1e}")
else:
    Z_dask = None

# %%
# The embeddings
# --------------
# Both panels show the moons in the first two kernel principal components,
# computed in-process (left) and on the cluster (right).  They agree to
# within the eigensolver's tolerance (``tol=1e-8``; the largest difference
# is printed above): each task runs the same code on its rows, and only the
# order of the floating-point sums differs.
n_panels = 1 if Z_dask is None else 2
fig, axes = plt.subplots(1, n_panels, figsize=(5 * n_panels, 4), squeeze=False)
panels = [("in-process (OpenMP)", Z_local), ("Dask cluster", Z_dask)][:n_panels]
for ax, (title, Z) in zip(axes[0], panels):
    ax.scatter(*Z.T, c=y, cmap="coolwarm", s=4)
    ax.set_title(title)
    ax.set_xlabel("component 1")
    ax.set_ylabel("component 2")
fig.tight_layout()
plt.show()
