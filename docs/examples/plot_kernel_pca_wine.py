"""
Kernel PCA of the wine data
===========================

Kernel PCA with an RBF kernel on the 13 z-scored measurements of the UCI wine
data (178 wines from three cultivars), next to linear PCA.  Neither method
sees the cultivars, yet both group them.  fastkern's
:class:`~fastkern.KernelPCA` gives scikit-learn's eigenvalues and projections.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_wine
from sklearn.decomposition import KernelPCA as SkKernelPCA
from sklearn.decomposition import PCA
from sklearn.preprocessing import StandardScaler

import fastkern

X, y = load_wine(return_X_y=True)
X = StandardScaler().fit_transform(X)

kpca = fastkern.KernelPCA(n_components=2, kernel="rbf", gamma=0.05)
Z = kpca.fit_transform(X)
Z_linear = PCA(n_components=2).fit_transform(X)

# The same eigenvalues as scikit-learn's KernelPCA.
reference = SkKernelPCA(n_components=2, kernel="rbf", gamma=0.05).fit(X)
print("fastkern eigenvalues:    ", np.round(kpca.eigenvalues_, 6))
print("scikit-learn eigenvalues:", np.round(reference.eigenvalues_, 6))

# %%
# The two embeddings, coloured by cultivar.

fig, axes = plt.subplots(1, 2, figsize=(9, 4))
for ax, emb, title in [(axes[0], Z_linear, "linear PCA"),
                       (axes[1], Z, "fastkern.KernelPCA, RBF, gamma = 0.05")]:
    for label, marker in zip(range(3), "osD"):
        ax.scatter(emb[y == label, 0], emb[y == label, 1], s=18, marker=marker,
                   label=f"cultivar {label + 1}")
    ax.set_title(title)
    ax.set_xlabel("component 1")
    ax.set_ylabel("component 2")
axes[1].legend(loc="best", fontsize=8)
fig.tight_layout()
plt.show()
