"""The four tasks of ``fastkern bench`` and their baseline implementations.

RBF Gram, double centering of a given Gram, KernelPCA from X and KernelRidge
fit from X, each implemented four ways (:data:`IMPLS`):

- naive: the Gram by a Python double loop over ``np.ndindex``, one kernel
  call per entry, then plain NumPy (full ``eigh``, ``solve``); centering is
  the textbook H K H with H = I - 11^T/n;
- numpy: vectorised NumPy (in-place updates of one N x N array);
- sklearn: scikit-learn (KernelPCA with eigen_solver="arpack");
- fastkern.

:func:`build` also builds the peers' callables (_harness.peers).
"""
import numpy as np

from _harness.peers import (MATVEC_COLUMNS, PEER_TASKS, PEERS, fastkern_rbf_matvec,
                                   numba_rbf_gram, numexpr_rbf_gram, numpy_rbf_matvec,
                                   peer_threads, pykeops_rbf_matvec)

TASKS = ("gram", "center", "kpca", "ridge")
TASK_TITLES = {
    "gram": "RBF Gram",
    "center": "centering",
    "kpca": "KernelPCA",
    "ridge": "KernelRidge",
    "matvec": "RBF K @ V",
}
IMPLS = ("naive", "numpy", "sklearn", "fastkern")
N_FEATURES = 16
N_COMPONENTS = 5
RIDGE_ALPHA = 1.0

# ---------------------------------------------------------------- data


def make_data(n, d=N_FEATURES, *, dtype=np.float64, seed=0):
    """Standard normal features and a smooth noisy target."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(dtype, copy=False)
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.standard_normal(n)
    return X, y


# ---------------------------------------------------------------- reference implementations


def naive_rbf_gram(X, gamma):
    """The classic double loop: one Python-level kernel call per entry."""
    N = X.shape[0]

    def kernel(x, z):
        return np.exp(-gamma * np.sum((x - z) ** 2))

    K = np.empty((N, N))
    for i, j in np.ndindex(N, N):
        K[i, j] = kernel(X[i], X[j])
    return K


def numpy_rbf_gram(X, gamma):
    """exp(-gamma (|x|^2 + |z|^2 - 2 x.z)) with one N x N array, updated in place."""
    sq = np.einsum("ij,ij->i", X, X)
    K = X @ X.T
    K *= -2.0
    K += sq[:, None]
    K += sq[None, :]
    np.maximum(K, 0.0, out=K)
    K *= -gamma
    np.exp(K, out=K)
    return K


def textbook_center(K):
    """H K H with the centering matrix H = I - 11^T/n (two N^3 products)."""
    n = K.shape[0]
    H = np.eye(n) - 1.0 / n
    return H @ K @ H


def numpy_center(K):
    """K - column means - row means + grand mean, by broadcasting, in place."""
    col = K.mean(axis=0)
    row = K.mean(axis=1)
    grand = col.mean()
    K -= col[None, :]
    K -= row[:, None]
    K += grand
    return K


def numpy_kpca(Kc, n_components):
    """Top eigenpairs of a centred Gram by a full symmetric eigendecomposition."""
    vals, vecs = np.linalg.eigh(Kc)
    vals = vals[::-1][:n_components]
    vecs = vecs[:, ::-1][:, :n_components]
    return vecs * np.sqrt(np.maximum(vals, 0.0))


def numpy_ridge(K, y, alpha):
    """Dual coefficients (K + alpha I)^-1 y."""
    K.flat[:: K.shape[0] + 1] += alpha
    return np.linalg.solve(K, y)



# ---------------------------------------------------------------- tasks


def build(task, impl, n, *, d=N_FEATURES, n_threads=None):
    """A zero-argument callable running `task` with `impl` on fresh data of n rows.

    The inputs (and, for the centering task, the Gram matrix) are prepared
    here, outside what is timed.
    """
    if task not in TASKS + ("matvec",):
        raise ValueError(f"task must be one of {TASKS + ('matvec',)}, got {task!r}")
    if impl not in IMPLS + PEERS:
        raise ValueError(f"impl must be one of {IMPLS + PEERS}, got {impl!r}")
    X, y = make_data(n, d)
    gamma = 1.0 / d

    if impl in PEERS or task == "matvec":
        return _build_peer(task, impl, X, gamma, n_threads)

    if task == "gram":
        if impl == "naive":
            return lambda: naive_rbf_gram(X, gamma)
        if impl == "numpy":
            return lambda: numpy_rbf_gram(X, gamma)
        if impl == "sklearn":
            from sklearn.metrics.pairwise import rbf_kernel
            return lambda: rbf_kernel(X, gamma=gamma)
        from fastkern import rbf_kernel
        return lambda: rbf_kernel(X, gamma=gamma, n_threads=n_threads)

    if task == "center":
        from fastkern import rbf_kernel
        K = rbf_kernel(X, gamma=gamma)
        if impl == "naive":
            return lambda: textbook_center(K)
        if impl == "numpy":
            return lambda: numpy_center(K)
        if impl == "sklearn":
            from sklearn.preprocessing import KernelCenterer
            return lambda: KernelCenterer().fit_transform(K)
        from fastkern import center_gram
        return lambda: center_gram(K, n_threads=n_threads)

    if task == "kpca":
        if impl in ("naive", "numpy"):
            gram = naive_rbf_gram if impl == "naive" else numpy_rbf_gram
            return lambda: numpy_kpca(numpy_center(gram(X, gamma)), N_COMPONENTS)
        if impl == "sklearn":
            from sklearn.decomposition import KernelPCA
            est = KernelPCA(n_components=N_COMPONENTS, kernel="rbf", gamma=gamma,
                            eigen_solver="arpack", random_state=0)
            return lambda: est.fit_transform(X)
        from fastkern.decomposition import KernelPCA
        est = KernelPCA(n_components=N_COMPONENTS, kernel="rbf", gamma=gamma,
                        n_threads=n_threads, random_state=0)
        return lambda: est.fit_transform(X)

    if impl in ("naive", "numpy"):
        gram = naive_rbf_gram if impl == "naive" else numpy_rbf_gram
        return lambda: numpy_ridge(gram(X, gamma), y, RIDGE_ALPHA)
    if impl == "sklearn":
        from sklearn.kernel_ridge import KernelRidge
        est = KernelRidge(alpha=RIDGE_ALPHA, kernel="rbf", gamma=gamma)
        return lambda: est.fit(X, y)
    from fastkern.kernel_ridge import KernelRidge
    est = KernelRidge(alpha=RIDGE_ALPHA, kernel="rbf", gamma=gamma, n_threads=n_threads)
    return lambda: est.fit(X, y)


def _build_peer(task, impl, X, gamma, n_threads):
    if task not in PEER_TASKS.get(impl, ("matvec",)) or (
            task == "matvec" and impl not in ("pykeops", "sklearn", "fastkern")):
        raise ValueError(f"impl {impl!r} does not implement task {task!r}")
    if task == "matvec":
        V = np.random.default_rng(1).standard_normal((X.shape[0], MATVEC_COLUMNS))
        if impl == "fastkern":
            return lambda: fastkern_rbf_matvec(X, V, gamma, n_threads)
        if impl == "sklearn":
            return lambda: numpy_rbf_matvec(X, V, gamma)
        fn = pykeops_rbf_matvec
        args = (X, V, gamma)
    else:
        fn = numba_rbf_gram if impl == "numba" else numexpr_rbf_gram
        args = (X, gamma)

    def run():
        with peer_threads(impl, n_threads):
            return fn(*args)

    return run


