"""Every process must collect the same test ids, or pytest-xdist refuses to run
(`pytest -n auto`): no memory address or hash-ordered set in a parametrize id."""
import os
import subprocess
import sys


def _collect(hash_seed, cwd, paths):
    env = dict(os.environ, PYTHONHASHSEED=str(hash_seed))
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_XDIST_WORKER_COUNT", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
         "-p", "no:xdist", *paths],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_another_process_collects_the_same_ids(request, tmp_path):
    # This session's ids against one more collection of the same files under
    # another hash seed (this process's is random, or PYTHONHASHSEED's).
    # The files are passed in the order the session met them, so the other
    # collection's order is the session's.  Not from the checkout: `python -m`
    # puts the working folder first on sys.path, and a checkout without
    # compiled modules would shadow the installed package.
    mine = [item.nodeid for item in request.session.items]
    paths = list(dict.fromkeys(str(item.path) for item in request.session.items))
    seed = 2 if os.environ.get("PYTHONHASHSEED") == "1" else 1
    proc = _collect(seed, tmp_path, paths)
    assert proc.returncode == 0, (proc.stdout[-3000:], proc.stderr[-3000:])
    theirs = [line for line in proc.stdout.splitlines() if "::" in line]
    # A run given -k or -m holds fewer items than its files: compare those.
    chosen = set(mine)
    missing = sorted(chosen - set(theirs))
    assert not missing, missing[:20]
    assert [nodeid for nodeid in theirs if nodeid in chosen] == mine


def test_ast_parse_from_many_threads_does_not_raise():
    """The suite's ast.parse survives threads parsing at once (conftest's lock).

    Without it, Python 3.11 raised "AST constructor recursion depth mismatch"
    here within a few hundred parses: the garbage collector runs finalisers
    (bytecode, so a thread switch) in the middle of a parse."""
    import ast
    import sys
    import threading

    source = "\n".join(f"def f{i}(x):\n    return [x + {i} for _ in range(3)]"
                       for i in range(300))
    errors = []

    class Finaliser:
        def __del__(self):
            sum(range(100))

    def work():
        for _ in range(30):
            for _ in range(50):
                cycle = [Finaliser()]
                cycle.append(cycle)  # freed by the collector, which runs __del__
            try:
                ast.parse(source)
            except SystemError as exc:
                errors.append(str(exc))
                return

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=work) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    finally:
        sys.setswitchinterval(interval)
    assert not any(t.is_alive() for t in threads)
    assert errors == []


def test_ast_parse_survives_a_finaliser_that_parses():
    """A garbage collection inside ast.parse whose finaliser formats a traceback
    (asyncio's "Task exception was never retrieved") does not make it raise."""
    import ast
    import gc
    import traceback

    class Logs:
        def __del__(self):
            try:
                raise ValueError("never retrieved")
            except ValueError as exc:
                # Python 3.11 parses the source line to underline it.
                traceback.format_exception(exc)

    source = "\n".join(f"def f{i}(x):\n    return [x + {i} for _ in range(3)]"
                       for i in range(300))
    threshold = gc.get_threshold()
    gc.set_threshold(10)  # a collection every few allocations: inside the parse
    try:
        for _ in range(20):
            for _ in range(20):
                cycle = [Logs()]
                cycle.append(cycle)
            ast.parse(source)
    finally:
        gc.set_threshold(*threshold)


def test_only_tornado_timer_timeouts_are_forgiven(tornado_timer_timeout):
    """The lost-cluster test forgives one asyncio report, the future tornado's
    with_timeout fails at its deadline (never raised: no traceback); a raised
    TimeoutError, another message or another error still fail a test."""
    import logging

    forgiven = tornado_timer_timeout

    def record(exc):
        return logging.LogRecord("asyncio", logging.ERROR, __file__, 1,
                                 "Future exception was never retrieved", None,
                                 (type(exc), exc, exc.__traceback__))

    assert forgiven(record(TimeoutError("Timeout")))
    try:
        raise TimeoutError("Timeout")
    except TimeoutError as exc:
        raised = exc
    assert not forgiven(record(raised))
    assert not forgiven(record(TimeoutError("No valid workers found")))
    assert not forgiven(record(TimeoutError()))
    assert not forgiven(record(RuntimeError("Timeout")))
    plain = logging.LogRecord("asyncio", logging.ERROR, __file__, 1, "Task was destroyed "
                              "but it is pending!", None, None)
    assert not forgiven(plain)
