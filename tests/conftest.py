"""Suite-wide fixtures."""
import pytest


@pytest.fixture(autouse=True)
def _parallel_even_when_small(monkeypatch):
    """Run every parallel loop on its n_threads, however small the input.

    In use, loops whose work is too small for a parallel region stay on one
    thread (fastkern._batches.SERIAL_BELOW, fastkern._threads.SERIAL_VALUES);
    the tests' inputs are mostly that small, and the tests that compare
    results across thread counts must really run the threads.  The tests of
    that policy set their own thresholds.
    """
    from fastkern import _batches, _threads

    monkeypatch.setattr(_batches, "SERIAL_BELOW", 0.0)
    monkeypatch.setattr(_threads, "SERIAL_VALUES", 0)

