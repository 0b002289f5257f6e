"""The "For kernlab users" page's kpca mapping, against kernlab's own kpca.

docs/kernlab.rst says kernlab's ``eig`` is fastkern's ``eigenvalues_`` divided
by n and its ``rotated`` is sqrt(n) times ``fit_transform``'s result (up to
each column's sign), with ``sigma`` as ``gamma`` and ``laplacedot`` as
``laplacian_l2``.  The values are stored in tests/data/kpca_refs.json, written
by tests/data/make_kpca_refs.R (CI has no R; the last test reruns the script
where R and kernlab are installed and checks the file is current).  kcca,
inchol, sigest, kmmd, stringdot and the kernels are checked against kernlab in
test_cca.py, test_lowrank.py, test_kernel_tests.py, test_structured.py and
test_more_kernels.py.
"""
import json
from pathlib import Path

import numpy as np
import pytest

from fastkern import KernelPCA
from fastkern._testing import have_kernlab, rerun_r_script

DATA = Path(__file__).resolve().parent / "data"
REFS = json.loads((DATA / "kpca_refs.json").read_text())


@pytest.mark.parametrize("case", REFS["kpca"], ids=lambda c: c["name"])
def test_kernlab_kpca_eig_is_eigenvalues_over_n(case):
    X = np.array(case["X"])
    n = X.shape[0]
    k = int(case["features"])
    kpca = KernelPCA(n_components=k, eigen_solver="dense", **case["fastkern"])
    Z = kpca.fit_transform(X)
    np.testing.assert_allclose(kpca.eigenvalues_ / n, case["eig"], rtol=1e-10)
    rotated = np.array(case["rotated"])
    signs = np.sign(np.sum(rotated * Z, axis=0))
    np.testing.assert_allclose(np.sqrt(n) * Z * signs, rotated, rtol=1e-7, atol=1e-8)


@pytest.mark.skipif(not have_kernlab(), reason="needs Rscript with kernlab")
def test_stored_kpca_references_are_current(tmp_path):
    out = tmp_path / "refs.json"
    assert rerun_r_script(DATA / "make_kpca_refs.R", out) == REFS
