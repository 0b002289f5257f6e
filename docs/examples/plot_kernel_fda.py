"""
====================================================
Kernel Fisher discriminant analysis on breast cancer
====================================================

:class:`fastkern.KernelFDA` finds the feature-space direction along which
the two classes' means are furthest apart relative to the spread within the
classes (a ridge on the within-class scatter, relative to the total
variance, keeps the problem well posed).  It is a transformer (``transform``
gives the discriminant coordinate) and a classifier (``predict`` assigns the
nearest class centroid along it).

On the breast cancer data (569 tumours, 30 features, malignant or benign)
we compare the discriminant coordinate of linear discriminant analysis with
that of kernel FDA with an RBF kernel, on held-out tumours.
"""

# %%
# Data
# ----
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
from sklearn.model_selection import cross_val_score, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from fastkern import KernelFDA

data = load_breast_cancer()
X_train, X_test, y_train, y_test = train_test_split(data.data, data.target, test_size=0.4,
                                                    stratify=data.target, random_state=0)
scaler = StandardScaler().fit(X_train)
X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)

# %%
# Fit LDA and kernel FDA
# ----------------------
# With two classes there is one discriminant direction.  ``eigenvalues_``
# is its Fisher ratio (between-class over regularised within-class
# variance) on the training data.
lda = LinearDiscriminantAnalysis().fit(X_train, y_train)
kfda = KernelFDA(kernel="rbf", gamma=0.01, regularization=1e-2).fit(X_train, y_train)
print(f"kernel FDA Fisher ratio (training): {kfda.eigenvalues_[0]:.2f}")
print(f"held-out accuracy: LDA {lda.score(X_test, y_test):.3f}, "
      f"kernel FDA {kfda.score(X_test, y_test):.3f}")

# %%
# The held-out tumours along the discriminant direction
# -----------------------------------------------------
# Histograms of the one discriminant coordinate of the test tumours for each
# class.  The projections are whitened with the within-class spread (as in
# scikit-learn's LDA), so the two axes are comparable (the sign of a
# discriminant direction is arbitrary: here the two methods put malignant
# tumours on opposite sides); the dashed line is the midpoint between the
# class centroids, kernel FDA's decision boundary.
fig, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=True)
for ax, model, title in [(axes[0], lda, "linear discriminant"),
                         (axes[1], kfda, "kernel Fisher discriminant (RBF)")]:
    z = model.transform(X_test)[:, 0]
    bins = np.linspace(z.min(), z.max(), 35)
    for label, name in enumerate(data.target_names):
        ax.hist(z[y_test == label], bins=bins, alpha=0.6, label=name)
    ax.set_title(title)
    ax.set_xlabel("discriminant coordinate")
axes[1].axvline(kfda.centroids_[:, 0].mean(), color="k", linestyle="--",
                label="decision boundary")
axes[0].set_ylabel("held-out tumours")
axes[1].legend(loc="upper right")
fig.tight_layout()
plt.show()

# %%
# Cross-validated accuracy
# ------------------------
# Both classifiers, with the scaler refitted in each of 5 folds.  On this
# data set the classes are nearly linearly separable: the two are within a
# percentage point of each other, kernel FDA a little behind on the single
# split above and a little ahead in cross-validation, differences of the
# size of the fold-to-fold spread.  What kernel FDA adds is a discriminant
# that can bend where the classes' boundary does.
for name, clf in [("LDA", LinearDiscriminantAnalysis()),
                  ("kernel FDA", KernelFDA(kernel="rbf", gamma=0.01, regularization=1e-2))]:
    scores = cross_val_score(make_pipeline(StandardScaler(), clf), data.data, data.target, cv=5)
    print(f"{name}: accuracy {scores.mean():.3f} +/- {scores.std():.3f}")
