"""The Weisfeiler-Lehman subtree kernel on labelled graphs."""
from collections.abc import Mapping

import numpy as np
import scipy.sparse as sp

from fastkern._validation import check_bool, check_int
from fastkern.structured._base import StructuredKernel, _feature_gram


class _Neighbours:
    """A checked graph's adjacency: CSR neighbour lists (sorted), nothing else."""

    __slots__ = ("indptr", "indices")

    def __init__(self, indptr, indices):
        self.indptr, self.indices = indptr, indices


class WeisfeilerLehman(StructuredKernel):
    """Weisfeiler-Lehman subtree kernel (Shervashidze et al., 2011), vertex-histogram base.

    A graph is a pair ``(adjacency, node_labels)``: ``adjacency`` an
    (n_nodes, n_nodes) scipy sparse matrix or array, finite, whose nonzero
    entries (i, j) make j a neighbour of i (symmetric in its nonzero pattern
    unless ``directed=True``), ``node_labels`` a sequence of n_nodes hashable labels (node i has
    node_labels[i]) or a dict {i: label} over 0..n_nodes-1.  An edge list
    [(u, v), ...] becomes such a matrix with
    ``scipy.sparse.coo_array((np.ones(len(e)), tuple(np.transpose(e))), shape=(n, n))``.

    Parameters
    ----------
    n_iter : int, default=5
        Relabelling iterations (>= 0).
    normalize : bool, default=False
        Divide by sqrt(k(G, G) k(G', G')).
    directed : bool, default=False
        Accept adjacency matrices whose nonzero pattern is not symmetric: the
        neighbours of node i are then its out-neighbours, the j with
        A[i, j] != 0.  With False such a matrix is refused (a ValueError), as
        a directed graph given by mistake would be compared silently.

    Notes
    -----
    Iteration 0 uses the given labels; iteration h relabels every node by its
    label and the sorted multiset of its neighbours' labels, compressed to a
    new label.  k(G, G') = sum over h = 0..n_iter of the dot product of the
    label histograms of G and G' at iteration h (n_iter + 1 histograms, as
    grakel's ``WeisfeilerLehman(n_iter=...)``).  The relabelling runs in Python
    (O(n_iter x edges)); the histograms are a sparse count matrix whose Gram
    is computed as ``Spectrum``'s (BLAS for frequent labels, OpenMP posting
    lists for rare ones).

    Examples
    --------
    >>> import numpy as np
    >>> from fastkern import WeisfeilerLehman
    >>> path = (np.array([[0, 1], [1, 0]]), ["a", "b"])
    >>> WeisfeilerLehman(n_iter=1)([path])
    array([[4.]])
    """

    _sample_kind = "graph"

    def __init__(self, n_iter=5, normalize=False, directed=False):
        self.n_iter = check_int(n_iter, "n_iter", 0)
        self.normalize = check_bool(normalize, "normalize")
        self.directed = check_bool(directed, "directed")

    def _params(self):
        return {"n_iter": self.n_iter, "normalize": self.normalize, "directed": self.directed}

    def _check_sample(self, item, name):
        if isinstance(item, (np.ndarray, str, bytes)) or sp.issparse(item) or \
                not isinstance(item, (tuple, list)):
            raise ValueError(f"{name} must be a pair (adjacency, node_labels); a graph without "
                             f"node labels (got {type(item).__name__}) cannot be compared by "
                             "WeisfeilerLehman")
        if len(item) != 2:
            raise ValueError(f"{name} must be a pair (adjacency, node_labels), got "
                             f"{len(item)} elements")
        A, labels = item
        if isinstance(A, _Neighbours):
            return item  # checked before (the estimators keep checked training graphs)
        if labels is None:
            raise ValueError(f"{name} has no node labels (None); WeisfeilerLehman needs "
                             "(adjacency, node_labels)")
        if not sp.issparse(A):
            A = np.asarray(A)
            if A.dtype.kind not in "biuf":
                raise TypeError(f"{name}: the adjacency matrix must be numeric, got dtype "
                                f"{A.dtype}")
            if A.ndim != 2:
                raise ValueError(f"{name}: the adjacency matrix must be 2-D, got shape "
                                 f"{A.shape}")
        n = A.shape[0]
        if A.shape != (n, n) or n == 0:
            raise ValueError(f"{name}: the adjacency matrix must be square and non-empty, "
                             f"got shape {A.shape}")
        if sp.issparse(A):
            # A copy: eliminate_zeros must not touch the caller's matrix.
            A = sp.csr_matrix(A, copy=True)
            self._check_entries(A.data, name)
            A.eliminate_zeros()
            A.sort_indices()
            if not self.directed:
                pattern = A.astype(bool)
                if (pattern != pattern.T).nnz:
                    self._asymmetric(name)
            A = _Neighbours(A.indptr, A.indices)
        else:
            self._check_entries(A, name)
            # Neighbour lists straight from the dense matrix: a scipy matrix per
            # small graph cost more than the whole relabelling.
            nonzero = A != 0
            if not self.directed and not np.array_equal(nonzero, nonzero.T):
                self._asymmetric(name)
            A = _Neighbours(np.concatenate([[0], np.cumsum(nonzero.sum(axis=1))]),
                            np.nonzero(nonzero)[1])
        if isinstance(labels, Mapping):
            if set(labels) != set(range(n)):
                raise ValueError(f"{name}: the node-label dict must have the keys 0..{n - 1}")
            labels = [labels[i] for i in range(n)]
        elif isinstance(labels, (str, bytes)) or not hasattr(labels, "__len__"):
            raise ValueError(f"{name}: node_labels must be a sequence of {n} labels, got "
                             f"{type(labels).__name__}")
        labels = list(labels)
        if len(labels) != n:
            raise ValueError(f"{name} has {n} nodes but {len(labels)} node labels")
        for v in labels:
            try:
                hash(v)
            except TypeError:
                raise TypeError(f"{name}: node label {v!r} is not hashable") from None
        return (A, labels)

    @staticmethod
    def _check_entries(values, name):
        if values.dtype.kind == "f" and not np.isfinite(values).all():
            what = "NaN" if np.isnan(values).any() else "infinite"
            raise ValueError(f"{name}: the adjacency matrix has {what} entries; its nonzero "
                             "entries are the edges, so they must be finite")

    @staticmethod
    def _asymmetric(name):
        raise ValueError(f"{name}: the adjacency matrix is not symmetric (an edge i -> j "
                         "without j -> i): give both directions of every edge for an "
                         "undirected graph, or directed=True for a directed one")

    def features(self, X, Y=None):
        """Compute the WL label-histogram matrices of X (and Y), with shared label ids.

        Parameters
        ----------
        X : sequence of graphs
            Pairs ``(adjacency, node_labels)``.
        Y : sequence of graphs, default=None
            Second graphs, relabelled with the same label ids.

        Returns
        -------
        Cx : scipy.sparse.csr_matrix of shape (n_samples_X, n_labels)
            Label counts of X over all iterations.
        Cy : scipy.sparse.csr_matrix of shape (n_samples_Y, n_labels) or None
            Label counts of Y, None when Y is None.
        """
        Xs = self.check_samples(X, "X")
        Ys = None if Y is None else self.check_samples(Y, "Y")
        return self._features(Xs, Ys)

    def _features(self, X, Y):
        graphs = list(X) if Y is None else list(X) + list(Y)
        sizes = np.array([A.indptr.size - 1 for A, _ in graphs], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(sizes)])
        # All graphs as one block-diagonal adjacency (CSR arrays, neighbours
        # sorted): node v of graph g is starts[g] + v, and one pass relabels
        # every node of every graph.
        edges = np.cumsum([0] + [A.indptr[-1] for A, _ in graphs])
        indptr = np.concatenate([[0]] + [A.indptr[1:] + e for (A, _), e
                                         in zip(graphs, edges)]).astype(np.int64)
        indices = np.concatenate([np.zeros(0, np.int64)] + [
            A.indices.astype(np.int64) + start for (A, _), start in zip(graphs, starts)])
        vocab = {}
        current = np.array([vocab.setdefault((0, v), len(vocab))
                            for _, lab in graphs for v in lab], dtype=np.int64)
        histograms = [current]
        for h in range(1, self.n_iter + 1):
            neigh = current[indices]
            new = np.empty_like(current)
            for v in range(current.size):
                signature = (h, current[v], tuple(sorted(neigh[indptr[v]:indptr[v + 1]])))
                new[v] = vocab.setdefault(signature, len(vocab))
            current = new
            histograms.append(current)
        cols = np.concatenate(histograms)
        rows = np.tile(np.repeat(np.arange(len(graphs)), sizes), self.n_iter + 1)
        C = sp.csr_matrix((np.ones(cols.size), (rows, cols)), shape=(len(graphs), len(vocab)))
        C.sum_duplicates()
        return (C, None) if Y is None else (C[:len(X)], C[len(X):])

    def _gram(self, X, Y, out, n_threads):
        # Every graph has a node, so no self-similarity is 0 (no keys needed).
        _feature_gram(*self._features(X, Y), out, n_threads, self.normalize)
