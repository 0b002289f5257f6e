"""Suite-wide settings: Ctrl-C handling, thread counts for parallel runs (pytest -n),
the serial path, the slow tier (--run-slow) and a deadline (FASTKERN_TEST_DEADLINE)."""
import ast
import functools
import gc
import logging
import os
import signal
import sys
import threading
import time

import pytest


def _serialise_ast_parse():
    """Make ast.parse safe from nested and concurrent calls on Python < 3.12.

    CPython 3.11 keeps the AST constructor's recursion counter in state
    shared by every call: a second ast.parse that starts while one is
    converting its tree makes the first raise "SystemError: AST constructor
    recursion depth mismatch".  pytest parses the test's source to report a
    failure (or an xfail); a garbage collection in the middle of it freed an
    asyncio task left by a Dask test, whose finaliser logged "Task exception
    was never retrieved" with a traceback, which Python 3.11 underlines by
    parsing the line: the SystemError then ended a whole xdist worker
    (INTERNALERROR).  Another thread formatting a traceback does the same.
    So ast.parse runs under one lock, with the collector paused.
    """
    if sys.version_info >= (3, 12) or getattr(ast.parse, "_fastkern_serialised", False):
        return
    parse, lock = ast.parse, threading.RLock()

    @functools.wraps(parse)
    def serialised(*args, **kwargs):
        with lock:
            collecting = gc.isenabled()
            gc.disable()
            try:
                return parse(*args, **kwargs)
            finally:
                if collecting:
                    gc.enable()

    serialised._fastkern_serialised = True
    ast.parse = serialised


_serialise_ast_parse()


class _Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.records = []

    def emit(self, record):
        self.records.append(record)


# asyncio's errors from the whole run, installed before any event loop starts so
# that none is missed: asyncio logs a task whose exception was never retrieved
# (or that was destroyed while pending) when the task is freed, which may be
# long after the code that left it, in whatever test is running then.
_ASYNCIO_ERRORS = _Records()
logging.getLogger("asyncio").addHandler(_ASYNCIO_ERRORS)


def _check_asyncio_errors(when):
    """Fail if asyncio logged an error since the last check.

    A collection first frees the tasks that only reference cycles keep
    (an exception's traceback holds the frame of the task that raised it).
    A task left so by a Dask test is what made Python 3.11's ast.parse fail
    (_serialise_ast_parse).
    """
    gc.collect()
    records, _ASYNCIO_ERRORS.records = _ASYNCIO_ERRORS.records, []
    if records:
        pytest.fail(f"asyncio logged {len(records)} error(s) {when}:\n" + "\n".join(
            logging.Formatter().format(r) for r in records), pytrace=False)


def _tornado_timer_timeout(record):
    """asyncio's report of a future that tornado's with_timeout failed at its
    deadline after its waiter was gone: a TimeoutError("Timeout") that was
    never raised, so it has no traceback.  Dask's BatchedSend waits with
    such timers; a cluster lost under it (the scheduler closed, the workers
    retired) leaves them to fire into nothing."""
    exc = record.exc_info[1] if record.exc_info else None
    return (isinstance(exc, TimeoutError) and exc.args == ("Timeout",)
            and exc.__traceback__ is None)


@pytest.fixture
def tornado_timer_timeout():
    """The predicate of the reports tornado_timer_timeouts_forgiven drops (for
    its own test: ``import conftest`` may find another directory's)."""
    return _tornado_timer_timeout


@pytest.fixture
def tornado_timer_timeouts_forgiven():
    """For a test that loses a Dask cluster on purpose: drops the reports of
    ``_tornado_timer_timeout`` before no_asyncio_errors checks (this fixture is
    torn down first).  Any other asyncio error still fails the test."""
    yield
    gc.collect()
    _ASYNCIO_ERRORS.records = [r for r in _ASYNCIO_ERRORS.records
                               if not _tornado_timer_timeout(r)]


@pytest.fixture
def no_asyncio_errors():
    """Fail the test after which asyncio logs an error (a task with an
    exception nobody retrieved, or one destroyed while pending)."""
    yield
    _check_asyncio_errors("during or after this test")


@pytest.fixture(scope="module")
def no_asyncio_errors_in_module():
    """The same check before a module's first test and after its last
    fixture (a cluster closed at the end of the module)."""
    _check_asyncio_errors("before this module's tests, left by an earlier test")
    yield
    _check_asyncio_errors("after this module's tests, when its fixtures closed")


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", default=False,
                     help="also run the tests marked slow: whole programs in subprocesses "
                          "(command line, benchmarks' quick runs, Ctrl-C, the serial build) "
                          "and the Dask cluster")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-slow"):
        return
    skip = pytest.mark.skip(reason="slow (a whole program in a subprocess, or a Dask "
                                   "cluster): run with --run-slow")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def pytest_runtest_setup(item):
    # CI's time is capped: past this moment (seconds since the epoch) the
    # tests not yet started are skipped, and say so, instead of the whole run
    # being cut off without its summary.
    deadline = os.environ.get("FASTKERN_TEST_DEADLINE")
    if deadline and time.time() > float(deadline):
        pytest.skip("not started: past FASTKERN_TEST_DEADLINE (CI's time budget)")


def pytest_configure(config):
    # A shell starts a background job (`cmd &`, nohup) with SIGINT ignored,
    # and Python then installs no KeyboardInterrupt handler: the tests that
    # send themselves SIGINT (test_interrupt.py) would wait for a Ctrl-C that
    # never comes.  Restored here, in every xdist worker too, and so for the
    # subprocesses the tests start.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # Each xdist worker gets its share of the cores for OpenMP and BLAS, as in
    # scikit-learn's conftest: N workers each starting one thread per core
    # would run N times as many threads as cores, and threads that spin while
    # waiting for work (OpenBLAS's) then slow every test down.
    # Tests that pass n_threads explicitly still get what they ask for.
    workers = os.environ.get("PYTEST_XDIST_WORKER_COUNT")
    if not workers:
        return
    from joblib import cpu_count
    from threadpoolctl import threadpool_limits

    # Loaded first, so that the limit reaches their OpenMP and BLAS libraries.
    import fastkern._openmp  # noqa: F401
    import scipy.linalg  # noqa: F401

    threadpool_limits(max(cpu_count() // int(workers), 1))


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
