"""
=====================================================
Centring Gram matrices: in place, and for test points
=====================================================

Kernel PCA, kernel CCA and the kernel tests work with feature vectors of
zero mean, phi(x) - mu, without ever computing phi.  On the Gram matrix this
is double centring, K~ = H K H with H = I - 1 1^T / n.
:func:`fastkern.center_gram` does it in place, with O(n) extra memory, where
the textbook formula allocates n x n temporaries.  A test point must be
centred with the *training* mean mu: :class:`fastkern.KernelCenterer` records
the training Gram's means in ``fit`` and applies them to the cross-Gram
K(X_test, X_train) in ``transform``.

With the linear kernel phi(x) = x, so both rules can be checked against
centring the data themselves.
"""

# %%
# Check with the linear kernel
# ----------------------------
# The centred linear Gram is the Gram of the centred data, and the centred
# test cross-Gram is the product of the test and training data, both minus
# the training mean.
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_wine
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from fastkern import KernelCenterer, center_gram, linear_kernel, rbf_kernel

X, y = load_wine(return_X_y=True)
X = StandardScaler().fit_transform(X)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, stratify=y,
                                                    random_state=0)
mean = X_train.mean(axis=0)

K = linear_kernel(X_train)
K_centred = center_gram(K)  # in place: K itself is overwritten and returned
print("center_gram returned K itself:", K_centred is K)
print("train: largest difference from the centred data's Gram",
      f"{np.abs(K_centred - (X_train - mean) @ (X_train - mean).T).max():.1e}")

centerer = KernelCenterer().fit(linear_kernel(X_train))
K_test = centerer.transform(linear_kernel(X_test, X_train))
print("test:  largest difference from the centred data's cross-Gram",
      f"{np.abs(K_test - (X_test - mean) @ (X_train - mean).T).max():.1e}")

# %%
# What centring changes: the RBF kernel's spectrum
# ------------------------------------------------
# An RBF Gram matrix has only positive entries, so its leading eigenvector
# is close to the constant vector: it describes the mean of the feature
# vectors, not their variation.  Centring removes that direction (the
# centred matrix has the constant vector in its null space) and leaves the
# spectrum of the variation around the mean, which kernel PCA decomposes.
# Left: the RBF Gram of the (z-scored) wine training set, rows sorted by
# cultivar; middle: its centred version, negative (blue) where two wines
# are less similar than the average pair, which makes the three cultivars'
# blocks stand out; right: the leading eigenvalues of both.  The largest
# eigenvalue of the uncentred matrix, the mean's direction, is gone after
# centring, and the rest of the spectrum is close to the uncentred one
# moved up by one place.
order = np.argsort(y_train, kind="stable")
K_rbf = rbf_kernel(X_train[order], gamma=0.05)
K_rbf_centred = center_gram(K_rbf, copy=True)  # keep K_rbf for the comparison

fig, axes = plt.subplots(1, 3, figsize=(12, 3.8))
im = axes[0].imshow(K_rbf, cmap="viridis")
axes[0].set_title("RBF Gram matrix")
fig.colorbar(im, ax=axes[0], fraction=0.046)
limit = np.quantile(np.abs(K_rbf_centred), 0.99)
im = axes[1].imshow(K_rbf_centred, cmap="RdBu_r", vmin=-limit, vmax=limit)
axes[1].set_title("centred")
fig.colorbar(im, ax=axes[1], fraction=0.046)
for M, name in [(K_rbf, "uncentred"), (K_rbf_centred, "centred")]:
    eigenvalues = np.linalg.eigvalsh(M)[::-1][:15]
    axes[2].plot(np.arange(1, 16), eigenvalues, "o-", label=name)
axes[2].set_xlabel("eigenvalue index")
axes[2].set_xticks([1, 5, 10, 15])
axes[2].set_title("leading eigenvalues")
axes[2].legend(loc="upper right")
fig.tight_layout()
plt.show()
