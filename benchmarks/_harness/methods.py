"""``fastkern bench --methods``: fastkern's kernlab-style methods against the Python
library a user would otherwise pick, side by side.

Each case makes its data once, checks that both sides compute the same thing
(the largest difference is reported), then times them alternately in this
process (fastest of ``rounds``, so load from other processes hits both
alike).  A peer that is not installed is listed as skipped with the package
to install; none of them is a fastkern dependency.  The sizes keep the
slowest peer (cca-zoo's 2N x 2N eigenproblem, hyppo's Python permutation
loop) to seconds; the full-size comparisons are in ``benchmarks/``.
"""
import warnings
from typing import Callable, NamedTuple

import numpy as np

from fastkern.cli._table import fmt_time

from _harness.measuring import side_by_side
from _harness.peers import unavailable


class Case(NamedTuple):
    name: str
    peer: str  # what the peer is, as printed
    package: str  # the module to import; pip name in PIP
    setup: Callable  # (scale) -> (describe, ours, theirs, difference)


PIP = {"sklearn": "scikit-learn", "cca_zoo": "cca-zoo", "hyppo": "hyppo", "grakel": "grakel"}


def _scaled(n, scale, minimum=8):
    return max(minimum, int(round(n * scale)))


def _chi2(scale):
    from sklearn.metrics.pairwise import chi2_kernel as sk_chi2

    import fastkern

    n = _scaled(2000, scale)
    X = np.random.default_rng(0).uniform(0, 1, (n, 16))
    ours, theirs = (lambda: fastkern.chi2_kernel(X, gamma=0.5)), (lambda: sk_chi2(X, gamma=0.5))
    return f"N={n}, d=16", ours, theirs, lambda: np.abs(ours() - theirs()).max()


def _spectrum(scale):
    from sklearn.feature_extraction.text import CountVectorizer

    from fastkern.structured import Spectrum

    n = _scaled(1000, scale)
    rng = np.random.default_rng(0)
    docs = ["".join(row) for row in rng.choice(list("ACGT"), size=(n, 300))]

    def theirs():
        C = CountVectorizer(analyzer="char", ngram_range=(5, 5), lowercase=False)
        C = C.fit_transform(docs).astype(np.float64)
        return (C @ C.T).toarray()

    def ours():
        return Spectrum(k=5, normalized=False)(docs)

    return (f"{n} DNA strings of length 300, k=5", ours, theirs,
            lambda: np.abs(ours() - theirs()).max())


def _kcca(scale):
    from cca_zoo.nonparametric import KCCA

    from fastkern import KernelCCA

    n, c = _scaled(400, scale, 20), 0.1
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 5))
    Y = np.column_stack([np.sin(X[:, 0]), X[:, 1] ** 2, X[:, 2] * X[:, 3]])
    Y += 0.3 * rng.standard_normal(Y.shape)
    # cca-zoo's shrinkage c is regularization = c (n - 1) / (1 - c) (fastkern.cca).
    ours = lambda: KernelCCA(n_components=2, gamma=0.2, gamma_y=1 / 3,  # noqa: E731
                             regularization=c * (n - 1) / (1 - c), solver="dense").fit(X, Y)
    theirs = lambda: KCCA(n_components=2, kernel="rbf", gamma=[0.2, 1 / 3],  # noqa: E731
                          shrinkage=c).fit([X, Y])

    def difference():
        a, b = ours().transform(X), theirs().transform([X, Y])[0]
        # 1 - |correlation| of the first canonical variates (their scales differ)
        return 1 - abs(np.corrcoef(a[:, 0], b[:, 0])[0, 1])

    return f"N={n}, d=5 and 3, exact", ours, theirs, difference


def _permutation(test, scale):
    import fastkern

    n, reps, gamma = _scaled(300, scale, 20), 100, 0.5
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n, 2))
    Y = X ** 2 + rng.standard_normal((n, 2)) if test == "hsic" else rng.standard_normal((n, 2))
    if test == "mmd":
        from hyppo.ksample import MMD

        def peer():
            return MMD(compute_kernel="rbf", gamma=gamma)
        ours = lambda: fastkern.mmd_test(X, Y, gamma=gamma, estimator="hyppo",  # noqa: E731
                                         n_permutations=reps, random_state=0)
    else:
        from hyppo.independence import Hsic

        def peer():
            return Hsic(compute_kernel="rbf", gamma=gamma)
        ours = lambda: fastkern.hsic_test(X, Y, gamma_x=gamma, gamma_y=gamma,  # noqa: E731
                                          estimator="hyppo", n_permutations=reps,
                                          random_state=0)

    def theirs():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # hyppo warns about reps < 1000
            return peer().test(X, Y, reps=reps, workers=1, auto=False)

    def difference():
        # A new hyppo object: one that has run test() computes another statistic().
        return abs(ours().statistic - peer().statistic(X, Y))

    size = f"{n} + {n} rows" if test == "mmd" else f"{n} pairs"
    return f"{size}, d=2, {reps} permutations", ours, theirs, difference


def _wl(scale):
    from grakel.kernels import VertexHistogram, WeisfeilerLehman as GrakelWL

    from fastkern.structured import WeisfeilerLehman

    n = _scaled(300, scale)
    rng = np.random.default_rng(0)
    graphs = []
    for _ in range(n):
        m = int(rng.integers(8, 20))
        A = np.triu((rng.uniform(size=(m, m)) < 0.25).astype(float), 1)
        graphs.append((A + A.T, [str(c) for c in rng.choice(list("ABC"), size=m)]))
    ours = lambda: WeisfeilerLehman(n_iter=3)(graphs)  # noqa: E731

    def theirs():
        data = [[A, dict(enumerate(labels))] for A, labels in graphs]
        return GrakelWL(n_iter=3, base_graph_kernel=VertexHistogram).fit_transform(data)

    return (f"{n} graphs of 8-19 nodes, 3 iterations", ours, theirs,
            lambda: np.abs(ours() - theirs()).max())


CASES = (
    Case("chi2 Gram", "scikit-learn chi2_kernel", "sklearn", _chi2),
    Case("spectrum string kernel Gram", "scikit-learn CountVectorizer + sparse C C^T",
         "sklearn", _spectrum),
    Case("kernel CCA fit", "cca-zoo KCCA", "cca_zoo", _kcca),
    Case("MMD two-sample test", "hyppo MMD().test", "hyppo",
         lambda scale: _permutation("mmd", scale)),
    Case("HSIC independence test", "hyppo Hsic().test", "hyppo",
         lambda scale: _permutation("hsic", scale)),
    Case("Weisfeiler-Lehman graph kernel Gram", "grakel WeisfeilerLehman", "grakel", _wl),
)


def run(*, scale=1.0, rounds=3, progress=None):
    """One row per case: dict(name, peer, size, fastkern, peer_seconds, ratio, difference),
    or dict(name, peer, skipped=reason) when the peer is not installed or fails to import."""
    rows = []
    for case in CASES:
        reason = unavailable(case.package, PIP[case.package])
        if reason is not None:
            rows.append(dict(name=case.name, peer=case.peer, skipped=reason))
            continue
        if progress is not None:
            progress(case.name)
        size, ours, theirs, difference = case.setup(scale)
        ours(), theirs()  # imports, JIT and caches out of the timing
        t = side_by_side({"fastkern": ours, "peer": theirs}, rounds=rounds)
        rows.append(dict(name=case.name, peer=case.peer, size=size, fastkern=t["fastkern"],
                         peer_seconds=t["peer"], ratio=t["peer"] / t["fastkern"],
                         difference=float(difference())))
    return rows


def format_rows(rows):
    """The table ``fastkern bench --methods`` prints, then one line per skipped peer."""
    lines = ["| method | size | fastkern | peer | peer time | fastkern faster | "
             "largest difference |", "|---|---|---|---|---|---|---|"]
    skipped = []
    for r in rows:
        if "skipped" in r:
            skipped.append(f"skipped {r['name']} vs {r['peer']}: {r['skipped']}")
            continue
        lines.append(f"| {r['name']} | {r['size']} | {fmt_time(r['fastkern'])} | {r['peer']} | "
                     f"{fmt_time(r['peer_seconds'])} | {r['ratio']:.1f}x | "
                     f"{r['difference']:.1e} |")
    return "\n".join(lines + skipped)
