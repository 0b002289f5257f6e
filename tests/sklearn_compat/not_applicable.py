"""scikit-learn tests that do not apply to fastkern, with the reason.

Keys are ``<copy file>::<test name>`` (a parametrized id such as
``test_x[a-b]`` selects one case).  Only tests of scikit-learn's private
internals belong here; a failure of public behaviour is a fastkern bug.
"""
NOT_APPLICABLE = {
}
