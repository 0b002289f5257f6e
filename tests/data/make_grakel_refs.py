"""Reference values for tests/test_structured.py from grakel's Weisfeiler-Lehman kernel.

Run from the repository root (grakel installed):  python tests/data/make_grakel_refs.py
It writes tests/data/grakel_refs.json: a fixed set of small labelled graphs
(edge lists of undirected graphs and node labels, stored so the tests need no
grakel) and, for several n_iter and both normalisations, the Gram matrix of
``grakel.WeisfeilerLehman(n_iter, base_graph_kernel=VertexHistogram)``.
"""
import json
import sys
from pathlib import Path

import numpy as np

OUT = Path(__file__).with_name("grakel_refs.json")


def make_graphs(seed=3):
    """Random undirected graphs of 1..12 nodes with labels from a small alphabet,
    plus a few hand-made ones (a triangle, a path, a star, an isolated node)."""
    rng = np.random.default_rng(seed)
    graphs = []
    for n in [1, 2, 3, 5, 6, 8, 9, 12, 12, 7]:
        p = rng.uniform(0.2, 0.6)
        edges = [(int(i), int(j)) for i in range(n) for j in range(i + 1, n)
                 if rng.uniform() < p]
        labels = [str(c) for c in rng.choice(list("ABC"), size=n)]
        graphs.append({"n": n, "edges": edges, "labels": labels})
    graphs.append({"n": 3, "edges": [(0, 1), (1, 2), (0, 2)], "labels": ["A", "A", "A"]})
    graphs.append({"n": 3, "edges": [(0, 1), (1, 2)], "labels": ["A", "A", "A"]})
    graphs.append({"n": 4, "edges": [(0, 1), (0, 2), (0, 3)], "labels": ["B", "A", "A", "A"]})
    graphs.append({"n": 4, "edges": [(0, 1), (1, 2)], "labels": ["A", "B", "A", "C"]})
    return graphs


def adjacency(g):
    A = np.zeros((g["n"], g["n"]))
    for i, j in g["edges"]:
        A[i, j] = A[j, i] = 1.0
    return A


def main(path=OUT):
    import grakel
    from grakel.kernels import VertexHistogram, WeisfeilerLehman

    graphs = make_graphs()
    cases = []
    for n_iter in (1, 2, 5):
        for normalize in (False, True):
            gk = WeisfeilerLehman(n_iter=n_iter, base_graph_kernel=VertexHistogram,
                                  normalize=normalize)
            data = [[adjacency(g), dict(enumerate(g["labels"]))] for g in graphs]
            K = gk.fit_transform(data)
            cases.append({"n_iter": n_iter, "normalize": normalize, "K": K.tolist()})
    refs = {"grakel_version": grakel.__version__, "graphs": graphs, "cases": cases}
    Path(path).write_text(json.dumps(refs) + "\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else OUT)
