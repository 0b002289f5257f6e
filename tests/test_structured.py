"""Kernels on strings, sets and graphs (fastkern.structured) and their use by the estimators.

References: plain-Python definitions written here (k-mer Counters, every
substring, every index tuple of a subsequence, a hand-made WL relabelling),
kernlab's stringdot values stored in tests/data/stringdot_refs.json and
grakel's Weisfeiler-Lehman values in tests/data/grakel_refs.json (each
re-made live when R/kernlab or grakel is there).
"""
import itertools
import json
import math
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import fastkern
from fastkern import KernelPCA, KernelRidge, KernelRidgeCV, KernelSIR
from fastkern.structured import (AllSubstrings, BoundedRange, ExponentialDecay, Jaccard, MinMax,
                                 SetIntersection, Spectrum, Subsequence, Substring,
                                 WeisfeilerLehman, stringdot)
from fastkern._testing import have_kernlab, rerun_r_script

DATA = Path(__file__).parent / "data"
STRINGDOT = json.loads((DATA / "stringdot_refs.json").read_text())
GRAKEL = json.loads((DATA / "grakel_refs.json").read_text())


def random_strings(n, low, high, alphabet="abcd", seed=0):
    rng = np.random.default_rng(seed)
    return ["".join(rng.choice(list(alphabet), size=rng.integers(low, high + 1)))
            for _ in range(n)]


def gram_of(pair, X, Y=None):
    Y = X if Y is None else Y
    return np.array([[pair(x, y) for y in Y] for x in X], dtype=float)


def normalized(pair):
    """k(x, y) / sqrt(k(x, x) k(y, y)); fastkern's 0/0 is 1 for x == y, else 0."""
    def f(x, y):
        d = math.sqrt(pair(x, x) * pair(y, y))
        return pair(x, y) / d if d > 0 else float(x == y)
    return f


# --------------------------------------------------------------- plain references
def spectrum_ref(k):
    def f(x, y):
        cx = Counter(x[i:i + k] for i in range(len(x) - k + 1))
        cy = Counter(y[i:i + k] for i in range(len(y) - k + 1))
        return float(sum(c * cy[s] for s, c in cx.items()))
    return f


def substrings_ref(weight):
    """sum over all common substrings s of weight(len(s)) n_x(s) n_y(s)."""
    def f(x, y):
        cx = Counter(x[i:j] for i in range(len(x)) for j in range(i + 1, len(x) + 1))
        cy = Counter(y[i:j] for i in range(len(y)) for j in range(i + 1, len(y) + 1))
        return float(sum(weight(len(s)) * c * cy[s] for s, c in cx.items()))
    return f


def subsequence_ref(k, lam):
    """Lodhi et al.'s definition, every index tuple enumerated."""
    def f(x, y):
        total = 0.0
        for i in itertools.combinations(range(len(x)), k):
            u = "".join(x[a] for a in i)
            for j in itertools.combinations(range(len(y)), k):
                if "".join(y[b] for b in j) == u:
                    total += lam ** (i[-1] - i[0] + 1 + j[-1] - j[0] + 1)
        return total
    return f


def wl_ref(graphs, n_iter):
    """The WL subtree kernel by hand: dict relabelling, Counter histograms."""
    labels = [list(lab) for _, lab in graphs]
    neigh = [[list(np.flatnonzero(np.asarray(A)[v])) for v in range(len(lab))]
             for A, lab in graphs]
    feats = [Counter((0, v) for v in lab) for lab in labels]
    for h in range(1, n_iter + 1):
        table = {}
        new = []
        for g, lab in enumerate(labels):
            sigs = [(lab[v], tuple(sorted(lab[u] for u in neigh[g][v]))) for v in range(len(lab))]
            new.append([table.setdefault(s, len(table)) for s in sigs])
        labels = new
        for g, lab in enumerate(labels):
            feats[g].update((h, v) for v in lab)
    return np.array([[sum(c * fb[key] for key, c in fa.items()) for fb in feats]
                     for fa in feats], dtype=float)


# --------------------------------------------------------------- strings
@pytest.mark.parametrize("n", [1, 2, 7])
@pytest.mark.parametrize("k", [1, 2, 3, 5])
@pytest.mark.parametrize("norm", [False, True])
def test_spectrum_matches_counter_reference(n, k, norm):
    X = random_strings(n, 1, 12, seed=n + k)
    Y = random_strings(5, 3, 9, alphabet="abcde", seed=1)
    pair = spectrum_ref(k)
    ref = normalized(pair) if norm else pair
    kern = Spectrum(k=k, normalized=norm)
    np.testing.assert_allclose(kern(X), gram_of(ref, X), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(kern(X, Y), gram_of(ref, X, Y), rtol=1e-13, atol=1e-15)


def test_spectrum_unicode_terminator_and_large_alphabet():
    X = ["héllo wörld", "wörld", "日本語の文字列", "語の文"]
    np.testing.assert_array_equal(Spectrum(k=2, normalized=False)(X),
                                  gram_of(spectrum_ref(2), X))
    end = [s + "$" for s in X]
    np.testing.assert_array_equal(Spectrum(k=3, normalized=False, terminator="$")(X),
                                  gram_of(spectrum_ref(3), end))
    # A large alphabet and long k-mers: alphabet ** k overflows int64, so the
    # codes are ranked on the way (still exact).
    rng = np.random.default_rng(0)
    long_ = ["".join(chr(c) for c in rng.integers(40, 3000, size=60)) for _ in range(4)]
    long_ += [long_[0][10:50], long_[1][:30] + long_[0][:30]]
    np.testing.assert_array_equal(Spectrum(k=9, normalized=False)(long_),
                                  gram_of(spectrum_ref(9), long_))


def test_spectrum_kmer_counts():
    C, _ = Spectrum(k=2).kmer_counts(["abab", "ba"])
    assert sp.issparse(C) and C.shape == (2, 2)
    np.testing.assert_array_equal(np.sort(C.toarray(), axis=1), [[1, 2], [0, 1]])


SUBSTRING_CASES = [
    (BoundedRange(k=3, normalized=False), lambda L: float(L <= 3)),
    (AllSubstrings(normalized=False), lambda L: 1.0),
    (ExponentialDecay(lambda_=1.5, normalized=False), lambda L: 1.5 ** -L),
    (ExponentialDecay(lambda_=0.7, normalized=False), lambda L: 0.7 ** -L),
    (Substring(k=2, lambda_=0.8, normalized=False), lambda L: 0.8 ** 4 * (L == 2)),
    (Substring(k=3, lambda_=0.8, full=True, normalized=False),
     lambda L: 0.8 ** (2 * L) * (L <= 3)),
    (Spectrum(k=2, normalized=False), lambda L: float(L == 2)),
]


@pytest.mark.parametrize("kern, weight", SUBSTRING_CASES,
                         ids=[repr(kern)[:40] for kern, _ in SUBSTRING_CASES])
def test_substring_kernels_match_every_substring_reference(kern, weight):
    X = random_strings(9, 1, 14, alphabet="abc", seed=4)
    Y = random_strings(4, 2, 8, alphabet="abc", seed=5)
    pair = substrings_ref(weight)
    np.testing.assert_allclose(kern(X), gram_of(pair, X), rtol=1e-13)
    np.testing.assert_allclose(kern(X, Y), gram_of(pair, X, Y), rtol=1e-13)


def test_spectrum_fast_path_equals_substring_path():
    from fastkern.structured._strings import _SubstringFamily

    X = random_strings(40, 1, 30, seed=9)
    kern = Spectrum(k=3)
    out = np.empty((40, 40))
    # The generic diagonal-run loop with Spectrum's length weights.
    _SubstringFamily._gram(kern, kern.check_samples(X), None, out, 2)
    np.testing.assert_allclose(kern(X), out, rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("k, lam", [(1, 0.5), (2, 0.5), (3, 0.9), (2, 1.3)])
def test_subsequence_matches_definition(k, lam):
    X = random_strings(6, 1, 7, alphabet="ab", seed=k) + ["abba"]
    Y = random_strings(3, 2, 6, alphabet="abc", seed=11)
    pair = subsequence_ref(k, lam)
    np.testing.assert_allclose(Subsequence(k, lam, normalized=False)(X), gram_of(pair, X),
                               rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(Subsequence(k, lam, normalized=False)(X, Y),
                               gram_of(pair, X, Y), rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(Subsequence(k, lam)(X, Y), gram_of(normalized(pair), X, Y),
                               rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("case", STRINGDOT["cases"],
                         ids=lambda c: f"{c['type']}-{c['length']}-{c['lambda']}-"
                                       f"{'norm' if c['normalized'] else 'raw'}")
def test_stringdot_matches_kernlab(case):
    X = [STRINGDOT["strings"][i] for i in case["rows"]]
    kern = stringdot(case["type"], case["length"], case["lambda"], case["normalized"])
    K = kern(X)
    ref = np.array([[np.nan if v is None else v for v in row] for row in case["K"]])
    # kernlab's 0/0 (a normalised kernel and a string without any substring of
    # the length) is NaN; fastkern documents 1 for equal strings and 0 there.
    same = np.equal.outer(np.array(X, dtype=object), np.array(X, dtype=object))
    np.testing.assert_array_equal(K[np.isnan(ref)], same[np.isnan(ref)])
    ok = ~np.isnan(ref)
    np.testing.assert_allclose(K[ok], ref[ok], rtol=1e-12, atol=1e-12 * np.abs(ref[ok]).max())


def test_stringdot_defaults_are_kernlabs():
    k = stringdot()
    assert k == Spectrum(k=4, normalized=True, terminator="\n")
    assert stringdot("sequence", 3, 0.5) == Subsequence(3, 0.5)
    with pytest.raises(ValueError, match="type"):
        stringdot("nope")


@pytest.mark.skipif(not have_kernlab(), reason="needs Rscript with kernlab")
def test_stored_stringdot_references_are_current(tmp_path):
    out = tmp_path / "refs.json"
    assert rerun_r_script(DATA / "make_stringdot_refs.R", out) == STRINGDOT


# --------------------------------------------------------------- sets
def set_samples(n, seed=0):
    rng = np.random.default_rng(seed)
    items = ["a", "b", "c", 1, 2, (3, 4), frozenset({5}), None, 2.5, "z"]
    return [set(items[i] for i in rng.choice(len(items), size=rng.integers(0, 6)))
            for _ in range(n)]


def test_set_kernels_match_python_sets():
    X = set_samples(23) + [set(), set()]
    Y = set_samples(5, seed=1)
    inter = lambda a, b: float(len(a & b))  # noqa: E731
    jac = lambda a, b: len(a & b) / len(a | b) if a | b else 1.0  # noqa: E731
    np.testing.assert_array_equal(SetIntersection()(X), gram_of(inter, X))
    np.testing.assert_array_equal(SetIntersection()(X, Y), gram_of(inter, X, Y))
    np.testing.assert_allclose(Jaccard()(X), gram_of(jac, X), rtol=1e-15)
    np.testing.assert_allclose(Jaccard()(X, Y), gram_of(jac, X, Y), rtol=1e-15)
    # Lists with repeats are sets for Jaccard, multisets for MinMax.
    np.testing.assert_allclose(MinMax()([list(s) for s in X]), gram_of(jac, X), rtol=1e-15)


def test_minmax_multisets_and_mappings():
    X = [["a", "a", "b"], {"a": 1.5, "c": 2.0}, ("b",), ["c", "c", "c", "a"], {"z": 0.0}]
    counts = [Counter(x) if not isinstance(x, dict) else Counter(x) for x in X]

    def ref(a, b):
        keys = set(a) | set(b)
        hi = sum(max(a[k], b[k]) for k in keys)
        return sum(min(a[k], b[k]) for k in keys) / hi if hi else 1.0

    np.testing.assert_allclose(MinMax()(X), gram_of(ref, counts), rtol=1e-15)
    with pytest.raises(ValueError, match=r"X\[0\]\['a'\]"):
        MinMax()([{"a": -1}])
    with pytest.raises(TypeError, match="mapping"):
        Jaccard()([{"a": 1}])


# --------------------------------------------------------------- graphs
def stored_graphs():
    out = []
    for g in GRAKEL["graphs"]:
        A = np.zeros((g["n"], g["n"]))
        for i, j in g["edges"]:
            A[i, j] = A[j, i] = 1.0
        out.append((A, g["labels"]))
    return out


@pytest.mark.parametrize("case", GRAKEL["cases"],
                         ids=lambda c: f"n_iter={c['n_iter']}-normalize={c['normalize']}")
def test_weisfeiler_lehman_matches_grakel(case):
    graphs = stored_graphs()
    K = WeisfeilerLehman(n_iter=case["n_iter"], normalize=case["normalize"])(graphs)
    np.testing.assert_allclose(K, np.array(case["K"]), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("n_iter", [0, 1, 3])
def test_weisfeiler_lehman_matches_hand_relabelling(n_iter):
    graphs = stored_graphs()
    ref = wl_ref(graphs, n_iter)
    np.testing.assert_array_equal(WeisfeilerLehman(n_iter=n_iter)(graphs), ref)
    # Sparse adjacency and dict labels give the same; so does a cross Gram.
    sparse_graphs = [(sp.csr_array(A), dict(enumerate(lab))) for A, lab in graphs]
    np.testing.assert_array_equal(WeisfeilerLehman(n_iter=n_iter)(sparse_graphs[:5],
                                                                  sparse_graphs), ref[:5])


def test_weisfeiler_lehman_live_grakel(tmp_path):
    pytest.importorskip("grakel")
    out = tmp_path / "refs.json"
    subprocess.run([sys.executable, str(DATA / "make_grakel_refs.py"), str(out)], check=True,
                   capture_output=True, timeout=300)
    live = json.loads(out.read_text())
    assert live["graphs"] == json.loads(json.dumps(GRAKEL["graphs"]))
    for a, b in zip(live["cases"], GRAKEL["cases"]):
        np.testing.assert_allclose(a["K"], b["K"], rtol=1e-12, atol=1e-12)


def test_graph_errors():
    A = np.eye(3)
    wl = WeisfeilerLehman()
    with pytest.raises(ValueError, match=r"X\[0\].*node labels"):
        wl([A])
    with pytest.raises(ValueError, match=r"X\[1\] has no node labels"):
        wl([(A, [1, 2, 3]), (A, None)])
    with pytest.raises(ValueError, match=r"3 nodes but 2 node labels"):
        wl([(A, [1, 2])])
    with pytest.raises(ValueError, match="square"):
        wl([(np.ones((2, 3)), [1, 2])])
    with pytest.raises(TypeError, match="not hashable"):
        wl([(A, [[1], [2], [3]])])


# --------------------------------------------------------------- common properties
def all_kernels():
    strings = random_strings(61, 1, 40, seed=3)
    sets = set_samples(61, seed=3)
    graphs = [(A, lab) for A, lab in stored_graphs()] * 4
    return [
        (Spectrum(k=3), strings), (Spectrum(k=2, normalized=False), strings),
        (BoundedRange(k=3), strings), (ExponentialDecay(1.2), strings),
        (Subsequence(k=3, lambda_=0.6), strings[:25]),
        (SetIntersection(), sets), (Jaccard(), sets), (MinMax(), sets),
        (WeisfeilerLehman(n_iter=3), graphs), (WeisfeilerLehman(normalize=True), graphs),
    ]


# Ids name the data by size and item type: the repr of a set follows PYTHONHASHSEED.
@pytest.mark.parametrize("kern, X", all_kernels(),
                         ids=lambda v: (f"{len(v)}-{type(v[0]).__name__}" if isinstance(v, list)
                                        else repr(v)[:30]))
def test_threads_symmetry_psd_and_out(kern, X):
    K1 = kern(X, n_threads=1)
    K2 = kern(X, n_threads=2)
    assert K1.dtype == np.float64 and K1.shape == (len(X), len(X))
    np.testing.assert_array_equal(K1, K2)
    np.testing.assert_array_equal(K1, K1.T)
    w = np.linalg.eigvalsh(K1)
    assert w.min() >= -1e-10 * w.max()
    out = np.full((len(X), 7), np.nan)
    res = kern(X, X[:7], out=out, n_threads=2)
    assert res is out
    # k(x, y) and k(y, x) may differ by rounding (the DP runs in another order).
    np.testing.assert_allclose(out, K1[:, :7], rtol=1e-13, atol=1e-300)
    with pytest.raises(ValueError, match="shape"):
        kern(X, out=np.empty((2, 2)))


@pytest.mark.parametrize("kern", [Spectrum(), Subsequence(), AllSubstrings()])
def test_string_input_errors(kern):
    with pytest.raises(TypeError, match=r"X\[1\] is a int.*strings mixed with numbers"):
        kern(["abc", 3])
    with pytest.raises(ValueError, match=r"X\[2\] is an empty string"):
        kern(["abc", "d", ""])
    with pytest.raises(ValueError, match="X is empty"):
        kern([])
    with pytest.raises(TypeError, match="single str"):
        kern("abc")
    with pytest.raises(TypeError, match="numeric array"):
        kern(np.ones(3))
    with pytest.raises(ValueError, match="1-D"):
        kern(np.array([["a", "b"]]))
    with pytest.raises(TypeError, match=r"Y\[0\] is a bytes.*decode"):
        kern(["abc"], [b"abc"])
    # numpy string arrays and tuples are sequences of strings
    np.testing.assert_array_equal(kern(np.array(["ab", "abc"])), kern(("ab", "abc")))


def test_set_input_errors():
    with pytest.raises(TypeError, match=r"X\[1\] is a str"):
        Jaccard()([{1}, "abc"])
    with pytest.raises(TypeError, match=r"X\[0\] is a int.*numbers mixed"):
        SetIntersection()([3, {1}])
    with pytest.raises(TypeError, match="not hashable"):
        SetIntersection()([[[1], [2]]])
    with pytest.raises(ValueError, match="X is empty"):
        Jaccard()([])


def test_parameter_validation_and_equality():
    with pytest.raises(ValueError, match="k must be >= 1"):
        Spectrum(k=0)
    with pytest.raises(ValueError, match="lambda_ must be > 0"):
        Subsequence(lambda_=0)
    with pytest.raises(TypeError, match="normalized"):
        Spectrum(normalized="yes")
    assert Spectrum(3) == Spectrum(k=3) and Spectrum(3) != Spectrum(4)
    assert "Spectrum(k=3" in repr(Spectrum(3))
    assert fastkern.Spectrum is Spectrum


# --------------------------------------------------------------- estimators
def labelled_strings(n=80, seed=0):
    """Two classes: strings rich in "ab" repeats or in "cd" repeats."""
    rng = np.random.default_rng(seed)
    X, y = [], []
    for i in range(n):
        c = i % 2
        motif = "ab" if c else "cd"
        s = "".join(motif if rng.uniform() < 0.5 else rng.choice(list("abcd"))
                    for _ in range(rng.integers(5, 15)))
        X.append(s)
        y.append(float(c) + 0.1 * rng.normal())
    return X, np.array(y)


def test_kernel_pca_on_strings_equals_precomputed():
    X, _ = labelled_strings()
    kern = Spectrum(k=2)
    est = KernelPCA(n_components=3, kernel=kern, eigen_solver="dense").fit(X)
    ref = KernelPCA(n_components=3, kernel="precomputed", eigen_solver="dense").fit(kern(X))
    np.testing.assert_allclose(est.eigenvalues_, ref.eigenvalues_, rtol=1e-10)
    np.testing.assert_allclose(est.transform(X[:10]), ref.transform(kern(X[:10], X)),
                               rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(est.fit_transform(X), ref.fit_transform(kern(X)),
                               rtol=1e-8, atol=1e-10)
    assert not hasattr(est, "n_features_in_")
    assert est.X_fit_.shape == (len(X),)


def test_kernel_pca_refuses_vector_only_options():
    X, _ = labelled_strings(20)
    with pytest.raises(ValueError, match="fit_inverse_transform=True needs vector samples"):
        KernelPCA(kernel=Spectrum(), fit_inverse_transform=True).fit(X)
    with pytest.raises(ValueError, match="eigen_solver='matrix-free' needs vector samples"):
        KernelPCA(n_components=2, kernel=Spectrum(), eigen_solver="matrix-free").fit(X)


def test_kernel_ridge_on_strings_sets_and_graphs():
    X, y = labelled_strings()
    kern = Spectrum(k=3) + Subsequence(k=2, lambda_=0.5)
    est = KernelRidge(alpha=0.3, kernel=kern).fit(X, y)
    ref = KernelRidge(alpha=0.3, kernel="precomputed").fit(kern(X), y)
    np.testing.assert_allclose(est.dual_coef_, ref.dual_coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(est.predict(X[:7]), ref.predict(kern(X[:7], X)), rtol=1e-9)
    assert not hasattr(est, "n_features_in_")
    # A refit on vectors after strings (and back) keeps its bookkeeping right.
    est.set_params(kernel="rbf").fit(np.ones((5, 2)), np.arange(5.0))
    assert est.n_features_in_ == 2
    est.set_params(kernel=Spectrum()).fit(X, y)
    assert not hasattr(est, "n_features_in_")

    sets = set_samples(40, seed=2)
    ys = np.array([len(s) for s in sets], dtype=float)
    est = KernelRidge(alpha=0.1, kernel=Jaccard()).fit(sets, ys)
    assert est.predict(sets[:3]).shape == (3,)

    graphs = stored_graphs()
    yg = np.arange(len(graphs), dtype=float)
    est = KernelRidge(alpha=1.0, kernel=WeisfeilerLehman(normalize=True)).fit(graphs, yg)
    ref = KernelRidge(alpha=1.0, kernel="precomputed").fit(
        WeisfeilerLehman(normalize=True)(graphs), yg)
    np.testing.assert_allclose(est.predict(graphs), ref.predict(
        WeisfeilerLehman(normalize=True)(graphs)), rtol=1e-10)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        KernelRidge(kernel=Spectrum()).fit(X, y[:-1])


def test_kernel_ridge_cv_and_sir_on_strings():
    X, y = labelled_strings()
    kern = Spectrum(k=2)
    cv = KernelRidgeCV(alphas=(0.01, 0.1, 1.0), kernel=kern).fit(X, y)
    ref = KernelRidgeCV(alphas=(0.01, 0.1, 1.0), kernel="precomputed").fit(kern(X), y)
    assert cv.alpha_ == ref.alpha_
    np.testing.assert_allclose(cv.predict(X[:5]), ref.predict(kern(X[:5], X)), rtol=1e-8)

    labels = (y > 0.5).astype(int)
    sir = KernelSIR(n_components=1, kernel=kern).fit(X, labels)
    ref = KernelSIR(n_components=1, kernel="precomputed").fit(kern(X), labels)
    np.testing.assert_allclose(sir.transform(X[:9]), ref.transform(kern(X[:9], X)),
                               rtol=1e-7, atol=1e-9)
    sir_b = KernelSIR(n_components=1, kernel=kern, n_basis=30, random_state=0).fit(X, labels)
    assert sir_b.X_fit_.shape == (30,)
    assert sir_b.transform(X[:4]).shape == (4, 1)
    with pytest.raises(ValueError, match="minimum of 2"):
        KernelSIR(kernel=kern).fit(["abc"], [1])


def test_pipeline_and_grid_search_with_structured_kernel():
    X, y = labelled_strings(60)
    grid = GridSearchCV(KernelRidge(), {"kernel": [Spectrum(k=1), Spectrum(k=2),
                                                   Subsequence(k=2, lambda_=0.5)],
                                        "alpha": [0.1, 1.0]}, cv=3)
    grid.fit(X, y)
    assert isinstance(grid.best_estimator_.kernel, (Spectrum, Subsequence))
    assert np.all(np.isfinite(grid.cv_results_["mean_test_score"]))
    assert np.isfinite(grid.best_score_)
    pipe = make_pipeline(KernelPCA(n_components=2, kernel=Spectrum(k=2)), StandardScaler(),
                         KernelRidge(alpha=0.1))
    pipe.fit(X, y)
    assert pipe.predict(X[:3]).shape == (3,)


def test_estimators_reject_bad_structured_input():
    X, y = labelled_strings(10)
    with pytest.raises(TypeError, match=r"X\[1\] is a float"):
        KernelRidge(kernel=Spectrum()).fit(["abc", 1.5] + X[2:], y)
    with pytest.raises(ValueError, match="empty string"):
        KernelPCA(kernel=Spectrum()).fit(["abc", ""])
    with pytest.raises(ValueError, match="X is empty"):
        KernelPCA(kernel=Spectrum()).fit([])


def test_structured_kernels_are_reachable_from_the_package():
    # All but the base class users subclass (fastkern.structured.StructuredKernel).
    names = set(fastkern.structured.__all__) - {"StructuredKernel"}
    assert "Spectrum" in names and "WeisfeilerLehman" in names
    for name in names:
        assert getattr(fastkern, name) is getattr(fastkern.structured, name)


def test_kernel_fda_on_strings_matches_the_precomputed_gram():
    rng = np.random.default_rng(0)
    docs = (["".join(r) for r in rng.choice(list("ab"), size=(30, 12))]
            + ["".join(r) for r in rng.choice(list("bc"), size=(30, 12))])
    y = np.repeat([0, 1], 30)
    kern = Spectrum(k=2)
    est = fastkern.KernelFDA(kernel=kern).fit(docs, y)
    ref = fastkern.KernelFDA(kernel="precomputed").fit(kern(docs), y)
    np.testing.assert_allclose(est.transform(docs[:5]), ref.transform(kern(docs[:5], docs)),
                               rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(est.predict(docs), ref.predict(kern(docs, docs)))


@pytest.mark.parametrize("make", [
    lambda k: KernelRidge(kernel=k, solver="incomplete_cholesky"),
    lambda k: fastkern.KernelFDA(kernel=k, solver="inchol"),
    lambda k: KernelPCA(kernel=k, eigen_solver="incomplete_cholesky"),
    lambda k: KernelSIR(kernel=k, basis="incomplete_cholesky"),
])
def test_low_rank_solvers_refuse_non_vector_samples_by_name(make):
    docs = ["ab", "ba", "abc", "cab", "bca", "acb"]
    with pytest.raises(ValueError, match="needs vector samples"):
        make(Spectrum(k=2)).fit(docs, [0.0, 1.0, 0.0, 1.0, 0.0, 1.0])


def test_kernel_cca_with_a_string_view_matches_the_precomputed_gram():
    rng = np.random.default_rng(0)
    docs = ["".join(r) for r in rng.choice(list("abc"), size=(50, 12))]
    Y = np.array([[d.count("a"), d.count("b")] for d in docs], float)
    Y += 0.1 * rng.standard_normal(Y.shape)
    kern = Spectrum(k=2)
    est = fastkern.KernelCCA(kernel=kern, kernel_y="rbf", gamma_y=0.5,
                             regularization=1.0).fit(docs, Y)
    ref = fastkern.KernelCCA(kernel="precomputed", kernel_y="rbf", gamma_y=0.5,
                             regularization=1.0).fit(kern(docs), Y)
    np.testing.assert_allclose(est.canonical_correlations_, ref.canonical_correlations_,
                               rtol=1e-10)
    for a, b in zip(est.transform(docs[:5], Y[:5]), ref.transform(kern(docs[:5], docs), Y[:5])):
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-12)
    # The second view may be the structured one; the low-rank solver refuses it.
    sets = [set(d[:4]) for d in docs]
    flipped = fastkern.KernelCCA(kernel="rbf", gamma=0.5, kernel_y=Jaccard(),
                                 regularization=1.0).fit(Y, sets)
    assert flipped.canonical_correlations_[0] > 0
    with pytest.raises(ValueError, match="the kernel of y, Jaccard.*takes sets"):
        fastkern.KernelCCA(kernel_y=Jaccard(), solver="incomplete_cholesky").fit(Y, sets)


# --------------------------------------------------------------- the whole float range
def _exact_subsequence_features(x, k, lam):
    """u -> sum over index tuples i of x spelling u of lam**span(i), in exact rationals."""
    from fractions import Fraction

    lam = Fraction(lam)
    feats = {}
    for i in itertools.combinations(range(len(x)), k):
        u = "".join(x[a] for a in i)
        feats[u] = feats.get(u, 0) + lam ** (i[-1] - i[0] + 1)
    return feats


def _substring_counts(x):
    """Every substring of x and its number of occurrences."""
    return Counter(x[i:j] for i in range(len(x)) for j in range(i + 1, len(x) + 1))


def _exact_normalized(dot, feats):
    """The normalised Gram from exact rational inner products, rounded once to float."""
    from decimal import Decimal, localcontext

    n = len(feats)
    K = [[dot(feats[a], feats[b]) for b in range(n)] for a in range(n)]
    out = np.empty((n, n))
    with localcontext() as ctx:
        ctx.prec = 60
        for a in range(n):
            for b in range(n):
                num = K[a][b]
                if num == 0:
                    out[a, b] = 0.0
                    continue
                den = (Decimal(K[a][a].numerator) / Decimal(K[a][a].denominator)
                       * Decimal(K[b][b].numerator) / Decimal(K[b][b].denominator)).sqrt()
                out[a, b] = float(Decimal(num.numerator) / Decimal(num.denominator) / den)
    return out


def _fdot(fa, fb):
    from fractions import Fraction

    return sum((v * fb[u] for u, v in fa.items() if u in fb), Fraction(0))


@pytest.mark.parametrize("X, k, lam", [
    # k(x, x) near 1e162: the product overflowed.
    (["abcabcabc" * 30, "abc", "cab" * 20], 2, 2.0),
    # k(x, x) near 1e-180: it underflowed.
    (["abcab", "acbca", "bcabbac", "cabcab"], 3, 1e-30),
    # lam**4 alone underflows float64.
    (["ab" * 15, "ba" * 9, "aabb"], 2, 1e-160),
], ids=["lam2-long", "lam1e-30", "lam1e-160"])
def test_normalized_subsequence_over_the_float_range_matches_exact_rationals(X, k, lam):
    feats = [_exact_subsequence_features(x, k, lam) for x in X]
    ref = _exact_normalized(_fdot, feats)
    K = Subsequence(k=k, lambda_=lam)(X)
    np.testing.assert_allclose(K, ref, rtol=1e-12, atol=0)
    np.testing.assert_allclose(Subsequence(k=k, lambda_=lam)(X[:1], X), ref[:1], rtol=1e-12)


def _substring_weight(lam, power, keep):
    from fractions import Fraction

    return lambda L: Fraction(lam) ** (power * L) if keep(L) else 0


@pytest.mark.parametrize("make, weight", [
    (lambda: Substring(k=3, lambda_=1e-60), _substring_weight(1e-60, 2, lambda L: L == 3)),
    (lambda: Substring(k=4, lambda_=1e-100, full=True),
     _substring_weight(1e-100, 2, lambda L: L <= 4)),
    (lambda: ExponentialDecay(lambda_=1e-3), _substring_weight(1e-3, -1, lambda L: True)),
], ids=["substring-tiny", "fullstring-tiny", "exponential-huge-weights"])
def test_normalized_substring_kernels_over_the_float_range_match_exact_rationals(make, weight):
    # Weights below 1e-308 (underflowed to 0) or above 1e308 (refused as an
    # overflow) before: normalised, only their ratios matter.
    from fractions import Fraction

    X = ["abcab" * 25, "abcabd", "cab" * 4, "bbab"]

    def dot(fa, fb):
        return sum((weight(len(s)) * c * fb[s] for s, c in fa.items() if s in fb),
                   Fraction(0))

    ref = _exact_normalized(dot, [_substring_counts(x) for x in X])
    np.testing.assert_allclose(make()(X), ref, rtol=1e-12, atol=0)
    np.testing.assert_allclose(make()(X[1:3], X), ref[1:3], rtol=1e-12, atol=0)


def test_min_max_over_the_float_range_matches_exact_rationals():
    from fractions import Fraction

    X = [{"a": 1e308, "b": 1e308}, {"a": 1e308}, {"a": 1e-300, "b": 3e-300},
         {"b": 5e-324}, {"a": 2.0, "c": 1e300}, {}]

    def ratio(p, q):
        keys = set(p) | set(q)
        lo = sum(Fraction(min(p.get(s, 0.0), q.get(s, 0.0))) for s in keys)
        hi = sum(Fraction(max(p.get(s, 0.0), q.get(s, 0.0))) for s in keys)
        return float(lo / hi) if hi else 1.0

    ref = np.array([[ratio(p, q) for q in X] for p in X])
    np.testing.assert_allclose(MinMax()([X[0], X[1]]), [[1.0, 0.5], [0.5, 1.0]], rtol=1e-15)
    np.testing.assert_allclose(MinMax()(X), ref, rtol=1e-14, atol=0)
    np.testing.assert_allclose(MinMax()(X[:2], X), ref[:2], rtol=1e-14, atol=0)


@pytest.mark.parametrize("make", [
    lambda: Subsequence(k=2, lambda_=4.0),
    lambda: Subsequence(k=2, lambda_=4.0, normalized=False),
    lambda: Substring(k=2, lambda_=1e200, normalized=False),
], ids=["subsequence-normalized", "subsequence", "substring"])
def test_overflowing_string_kernels_say_so(make):
    # lambda_**span passes 1e308 on these lengths: no inf, NaN or silent 0.
    with pytest.raises(ValueError, match="overflow"):
        make()(["ab" * 300, "ba" * 10])


# --------------------------------------------------------------- bad input named
@pytest.mark.parametrize("make", [lambda: Spectrum(k=3), lambda: Subsequence(k=2),
                                  lambda: AllSubstrings()], ids=["spectrum", "subsequence",
                                                                 "allsubstrings"])
def test_lone_surrogate_is_a_value_error_naming_the_sample(make):
    with pytest.raises(ValueError, match=r"X\[0\].*surrogate"):
        make()(["\ud800abc", "xyz"])
    with pytest.raises(ValueError, match=r"Y\[1\].*surrogate"):
        make()(["abc"], ["xyz", "ab\udfffc"])


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf], ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_weisfeiler_lehman_rejects_non_finite_adjacency(bad, sparse):
    A = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, bad], [0.0, bad, 0.0]])
    ok = (np.array([[0, 1], [1, 0]]), ["a", "b"])
    graph = (sp.csr_matrix(A) if sparse else A, ["a", "b", "a"])
    with pytest.raises(ValueError, match=r"X\[1\].*(NaN|infinite)"):
        WeisfeilerLehman(n_iter=2)([ok, graph])


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_weisfeiler_lehman_directed_adjacency_needs_directed_true(sparse):
    # A directed path a -> b -> c: node b has one out-neighbour.
    A = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]])
    graph = (sp.csr_matrix(A) if sparse else A, ["a", "b", "c"])
    with pytest.raises(ValueError, match=r"X\[0\].*not symmetric.*directed=True"):
        WeisfeilerLehman(n_iter=1)([graph])
    # With directed=True the neighbours are the out-neighbours: compare with
    # the hand-made relabelling of the same out-neighbour lists.
    K = WeisfeilerLehman(n_iter=2, directed=True)([graph, graph])
    np.testing.assert_array_equal(K, wl_ref([(A, ["a", "b", "c"])] * 2, 2))
    # A symmetric pattern with unequal weights is an undirected graph.
    W = np.array([[0, 2.0, 0], [0.5, 0, 1], [0, 3, 0]])
    sym = (W != 0).astype(float)
    np.testing.assert_array_equal(WeisfeilerLehman(n_iter=2)([(W, list("aba"))]),
                                  wl_ref([(sym, list("aba"))], 2))


def test_subsequence_workspace_is_a_few_rows_not_a_table():
    # The DP held two (|x| + 1)(|y| + 1) tables per thread: 144 MB for this
    # pair of 3000 characters (6.4 GB at 20,000).  k rows of |y| + 1 are 72 kB.
    from fastkern._testing import tracemalloc_peak

    X = random_strings(2, 3000, 3000, alphabet="acgt", seed=3)
    K, peak = tracemalloc_peak(lambda: Subsequence(k=3, lambda_=0.5)(X, n_threads=1))
    assert peak < 2**20
    # The same values as the sum over pairs of index tuples, on a prefix
    # short enough for it.
    short = [x[:9] for x in X]
    pair = subsequence_ref(3, 0.5)
    np.testing.assert_allclose(Subsequence(k=3, lambda_=0.5, normalized=False)(short),
                               gram_of(pair, short), rtol=1e-12)


def test_subsequence_memory_error_names_the_kernel_and_the_size():
    X = ["a" * 2_000_000]
    with pytest.raises(MemoryError, match=r"Subsequence\(k=1000000.*GiB.*2000000 characters"):
        Subsequence(k=10**6, lambda_=0.5)(X, n_threads=1)


def test_subsequence_stops_on_ctrl_c_inside_one_long_pair():
    # One pair of these strings is seconds of DP on one thread: Ctrl-C was
    # seen only between pairs.
    import signal
    from fastkern._testing import least_time_to_interrupt

    if not hasattr(signal, "pthread_kill"):
        pytest.skip("needs POSIX signals")
    X = random_strings(2, 8000, 8000, alphabet="acgt", seed=4)
    for n_threads in (1, 2):
        latency = least_time_to_interrupt(
            lambda: Subsequence(k=10, lambda_=0.5)(X, n_threads=n_threads), 0.5, delay=0.3)
        assert latency is not None and latency < 0.5
    np.testing.assert_allclose(Subsequence(k=2, lambda_=0.5)(["ab", "ab"]), 1.0)
