"""
===========================================================
Nystroem features: accuracy against the number of landmarks
===========================================================

:class:`fastkern.Nystroem` approximates a kernel by an explicit feature
map: with m landmarks L drawn from the training data,
phi(x) = K(x, L) W^(-1/2), W = K(L, L), so that phi(x) . phi(y) ~ k(x, y).
A linear model on these m features then stands in for the kernel method,
at O(n m) cost instead of O(n^2).

On the digits data we measure, for a growing number of landmarks, how well
phi phi^T reproduces the Gram matrix and how accurate a linear classifier on
the features is, compared with the exact kernel machine.
"""

# %%
# Data
# ----
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_digits
from sklearn.linear_model import RidgeClassifier
from sklearn.model_selection import train_test_split
from sklearn.svm import SVC

from fastkern import Nystroem, rbf_kernel

X, y = load_digits(return_X_y=True)
X = X / 16.0
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, stratify=y,
                                                    random_state=0)
gamma = 0.05
K_train = rbf_kernel(X_train, gamma=gamma)

# %%
# Sweep the number of landmarks
# -----------------------------
# For each m: the relative Frobenius error of the approximated Gram matrix
# on the training set, and the held-out accuracy of a ridge classifier on
# the Nystroem features.  The exact reference is an SVM with the same RBF
# kernel.
exact = SVC(kernel="rbf", gamma=gamma, C=10).fit(X_train, y_train).score(X_test, y_test)
landmarks = [10, 20, 50, 100, 200, 400]
errors, accuracy = [], []
for m in landmarks:
    features = Nystroem(kernel="rbf", gamma=gamma, n_components=m, random_state=0)
    F_train = features.fit_transform(X_train)
    errors.append(np.linalg.norm(K_train - F_train @ F_train.T) / np.linalg.norm(K_train))
    clf = RidgeClassifier(alpha=1e-3).fit(F_train, y_train)
    accuracy.append(clf.score(features.transform(X_test), y_test))
    print(f"m={m:4d}: Gram error {errors[-1]:.1e}, accuracy {accuracy[-1]:.3f}")
print(f"exact RBF SVM accuracy {exact:.3f}")

# %%
# The trade-off
# -------------
# The Gram matrix error falls steadily with m, and the accuracy of the
# linear model on the features approaches the exact kernel SVM's (dashed)
# with a few hundred landmarks, a fraction of the 1257 training points.
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
axes[0].loglog(landmarks, errors, "o-")
axes[0].set_xlabel("landmarks m")
axes[0].set_ylabel("relative Frobenius error of $\\Phi \\Phi^T$")
axes[1].semilogx(landmarks, accuracy, "o-", label="ridge classifier on Nystroem features")
axes[1].axhline(exact, color="k", linestyle="--", label="exact RBF SVM")
axes[1].set_xlabel("landmarks m")
axes[1].set_ylabel("held-out accuracy")
axes[1].legend(loc="lower right")
fig.tight_layout()
plt.show()
