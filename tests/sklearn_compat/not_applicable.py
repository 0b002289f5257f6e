"""scikit-learn tests that do not apply to fastkern, with the reason.

Keys are ``<copy file>::<test name>`` (a parametrized id such as
``test_x[a-b]`` selects one case).  Two kinds belong here: tests of
scikit-learn's private internals, and features README's drop-in section says
fastkern does not offer.  A failure of anything else is a fastkern bug.

No private internal is tested by the copied files' selected tests today.
"""
_ARRAY_API = (
    "array API dispatch (PyTorch, CuPy, dpnp or array_api_strict arrays under "
    "sklearn.set_config(array_api_dispatch=True)) is not offered: fastkern computes on "
    "NumPy and SciPy sparse inputs with its own OpenMP loops (README, drop-in section). "
    "These tests also skip wherever those libraries are missing."
)
NOT_APPLICABLE = {
    "test_sklearn_data.py::test_preprocessing_array_api_compliance": _ARRAY_API,
    "test_sklearn_data.py::test_preprocessing_integer_array_api_on_float32_only_device": _ARRAY_API,
    "test_sklearn_kernel_approximation.py::test_nystroem_approximation_array_api": _ARRAY_API,
    "test_sklearn_pairwise.py::test_pairwise_kernels_array_api": _ARRAY_API,
    "test_sklearn_pairwise.py::test_pairwise_parallel_array_api": _ARRAY_API,
}
