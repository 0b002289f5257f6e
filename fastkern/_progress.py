"""How far a long computation has got: one channel and one reporter for the package.

The channel: the computations report to the sink installed by
:func:`reporting_progress`, and do nothing without one.  A pass over K
(``fastkern._operator``) reports the fraction of the pass it has done,
``sink(label, fraction)``; an iterative eigensolver reports its largest
residual after each iteration (:func:`report_iteration`), and a fit the stage
it has reached (:func:`report_stage`), to the sink's ``iteration`` and
``stage`` methods where it has them.

The reporter: :class:`ProgressBar` turns these into one line with an overall
estimate, elapsed time, percentage and time left, redrawn on a terminal, one
line per finished step elsewhere.  :func:`say` prints the ``verbose`` lines
of the estimators and the command line.

The estimate.  An eigensolver's residual falls about geometrically, by the
same factor each iteration, until it reaches the target tol * r1 (r1: the
first iteration's residual, about the size of the largest eigenvalue, which
the solvers' relative tolerance refers to).  From the iterations so far, the
factor gives the iterations left, and their mean duration the time left.
"""
import contextlib
import contextvars
import math
import sys
import time

__all__ = ["ProgressBar", "pass_label", "report_fraction", "report_iteration", "report_stage",
           "report_stage_fraction", "reporting_progress", "say", "stage_work"]

# Who hears how far a computation has got (see reporting_progress).
_SINK = contextvars.ContextVar("fastkern_progress_sink", default=None)
_PASS_LABEL = contextvars.ContextVar("fastkern_pass_label", default="pass over K")
# Whether a Gram computed now is the whole of the current stage (stage_work).
_STAGE_WORK = contextvars.ContextVar("fastkern_stage_work", default=False)


@contextlib.contextmanager
def reporting_progress(sink):
    """Report how far passes over K, eigensolvers and fits have got, within a ``with`` block.

    The command line draws its progress bar from these calls; the estimators'
    signatures stay scikit-learn's.

    Parameters
    ----------
    sink : callable
        Called as ``sink(label, fraction)`` during each pass over K: label
        says which pass ("pass 1", "pass 3, largest residual 2.1e-05",
        "transform"), fraction runs from 0 to 1 within it.  If it has them,
        its methods ``iteration(iteration, residual, tol)`` and
        ``stage(name)`` hear each eigensolver iteration and each stage of a
        fit.

    Yields
    ------
    None
        Computations inside the block report to ``sink``.
    """
    with _setting(_SINK, sink):
        yield


@contextlib.contextmanager
def _setting(var, value):
    """Within the block, the context variable ``var`` holds ``value``."""
    token = var.set(value)
    try:
        yield
    finally:
        var.reset(token)


def pass_label(label):
    """Within the block, passes over K report under ``label`` (e.g. "transform")."""
    return _setting(_PASS_LABEL, label)


def report_fraction():
    """A per-pass progress callback for the current sink (called with 0 now), or None."""
    sink = _SINK.get()
    if sink is None:
        return None
    label = _PASS_LABEL.get()
    sink(label, 0.0)
    return lambda fraction: sink(label, fraction)


def stage_work():
    """Within the block, a Gram function's tiles are the current stage's work:
    it reports the fraction done to the sink's ``stage_fraction`` (KernelPCA's
    "kernel matrix" stage, which has no passes or iterations to go by)."""
    return _setting(_STAGE_WORK, True)


def report_stage_fraction():
    """The sink's ``stage_fraction`` inside :func:`stage_work`, or None."""
    if not _STAGE_WORK.get():
        return None
    return getattr(_SINK.get(), "stage_fraction", None)


def report_iteration(iteration, residual, tol):
    """Tell the sink that an eigensolver finished `iteration` with this largest residual."""
    method = getattr(_SINK.get(), "iteration", None)
    if method is not None:
        method(iteration, float(residual), float(tol))


def report_stage(name):
    """Tell the sink that a fit has reached stage `name` ("kernel matrix", ...)."""
    method = getattr(_SINK.get(), "stage", None)
    if method is not None:
        method(name)


def say(prefix, message, stream=None):
    """One verbose line, ``[prefix] message``, on stderr."""
    print(f"[{prefix}] {message}", file=sys.stderr if stream is None else stream, flush=True)


def _clock(seconds):
    seconds = max(0.0, seconds)
    if seconds >= 3600:
        return f"{int(seconds // 3600)}:{int(seconds % 3600 // 60):02d}:{int(seconds % 60):02d}"
    return f"{int(seconds // 60)}:{seconds % 60:04.1f}"


class ProgressBar:
    """One progress line with an overall estimate: elapsed time, percentage, time left.

    A sink for :func:`reporting_progress`, and a plain reporter
    (:meth:`step`) for loops that know their length (``fastkern bench``).
    On a terminal (``tty``) one line is redrawn, at most ten times a second;
    elsewhere (a log file, a pipe) one line is written per finished pass or
    step, so logs stay readable.

    Parameters
    ----------
    stream : file
        Where to draw (stderr).
    tty : bool
        Redraw one line (a terminal) or write a line per finished step.
    prefix : str, default="fastkern"
        The line's tag, e.g. "fastkern kpca".
    """

    WIDTH = 30

    def __init__(self, stream, tty, prefix="fastkern"):
        self.stream, self.tty, self.prefix = stream, tty, prefix
        self.t0 = time.perf_counter()
        self.shown = -math.inf
        self.drawn = False
        self.label = "starting"
        self.fraction = None  # overall, when known
        self.iterations = []  # (time, iteration, residual)
        self.tol = None
        self.passes_seen = False
        self.stage_t0 = self.t0
        self.stage_done = None  # fraction of the current stage, when it reports one

    # ------------------------------------------------------------ the estimate

    def _time_left(self, now):
        """Seconds left by the eigensolver's convergence so far, or None."""
        if len(self.iterations) < 2 or self.tol is None:
            return None
        (t1, i1, r1), (tn, i_n, rn) = self.iterations[0], self.iterations[-1]
        target = self.tol * r1
        if rn <= target:
            return 0.0
        if not (rn < r1 and i_n > i1):
            return None
        factor = math.log(r1 / rn) / (i_n - i1)  # per iteration
        per_iteration = (tn - t1) / (i_n - i1)
        left = math.log(rn / target) / factor * per_iteration
        return max(0.0, left - (now - tn))

    def _estimate(self, now):
        elapsed = now - self.t0
        if self.fraction is not None:
            fraction = self.fraction
            left = elapsed * (1 - fraction) / fraction if fraction > 0 else None
        else:
            left = self._time_left(now)
            if left is None and self.stage_done:
                # A stage that reports its fraction (the kernel matrix): its
                # own time left, at its pace so far.
                fraction = self.stage_done
                left = (now - self.stage_t0) * (1 - fraction) / fraction
            elif left is None:
                return elapsed, None, None
            else:
                fraction = elapsed / (elapsed + left) if elapsed + left > 0 else 1.0
        return elapsed, min(max(fraction, 0.0), 1.0), left

    def _status(self, now):
        elapsed, fraction, left = self._estimate(now)
        text = f"{_clock(elapsed)} elapsed"
        if fraction is not None and left is not None:
            text += f", {100 * fraction:.0f}%, about {_clock(left)} left"
        return fraction, text

    # ------------------------------------------------------------ events

    def __call__(self, label, fraction):
        """A pass over K has done `fraction` of its work (reporting_progress's sink)."""
        self.label = label
        self.passes_seen = True
        self._draw(final=fraction >= 1)

    def iteration(self, iteration, residual, tol):
        """An eigensolver iteration ended with this largest residual."""
        self.tol = tol
        self.iterations.append((time.perf_counter(), iteration, residual))
        # A pass over K names its iteration's residual itself: without
        # passes (an explicit Gram), the iteration is the step shown.
        if not self.passes_seen:
            self.label = f"iteration {iteration}, largest residual {residual:.1e}"
            self._draw(final=True)

    def stage(self, name):
        """A fit has reached stage `name`."""
        self.label = name
        self.stage_t0 = time.perf_counter()
        self.stage_done = None
        self._draw(final=False, force=True)

    def stage_fraction(self, fraction):
        """The current stage has done `fraction` of its work."""
        self.stage_done = fraction
        self._draw(final=False)

    def step(self, done, total, label):
        """A loop of `total` steps is at step `done` (0-based), now running `label`."""
        self.fraction = done / total if total else 1.0
        self.label = label
        self._draw(final=True, force=True)

    def _draw(self, final, force=False):
        now = time.perf_counter()
        fraction, status = self._status(now)
        if not self.tty:
            if final:
                done = ": done" if self.passes_seen else ""
                self.stream.write(f"[{self.prefix}] {self.label}{done} ({status})\n")
                self.stream.flush()
            return
        if not (final or force) and now - self.shown < 0.1:
            return
        self.shown = now
        filled = 0 if fraction is None else int(self.WIDTH * fraction)
        bar = "#" * filled + "." * (self.WIDTH - filled)
        self.stream.write(f"\r\x1b[K[{bar}] {self.label} ({status})")
        self.stream.flush()
        self.drawn = True

    def close(self):
        """End the redrawn line (on a terminal)."""
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False
