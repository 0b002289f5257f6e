"""Time-bounded batches of parallel work, so that Ctrl-C is seen between them.

A compiled loop releases the GIL for all of its work, and Python handles a
signal only when the main thread runs Python code again: a Gram of 30000 rows
would ignore Ctrl-C for seconds.  The loops therefore run their items (tiles,
row blocks, column blocks) in consecutive ranges [start, stop): each range is
one OpenMP parallel region, and between two of them the GIL is taken back and
``PyErr_CheckSignals`` raises ``KeyboardInterrupt`` if a signal arrived.

The range length adapts so that a batch takes about ``target`` seconds
(0.05 s: well inside the 0.2 s a user waits for Ctrl-C, and long enough that
the per-batch cost, one parallel region and one barrier, is below 1% of the
work).  Results do not depend on the batching: items are independent, or (the
matrix-free products) each item always runs its own sequence in order.

The batches also choose how many threads to wake.  A parallel region costs
a wake-up of every thread (a futex call each, since fastkern's threads sleep
rather than spin: ``fastkern._threads``) and a barrier, and on a machine
whose cores are busy with other processes a woken thread can wait a whole
scheduler time slice for a core.  So the first batch is one item on the
calling thread alone, and the loop goes parallel only when that item's time
says the rest would take more than ``SERIAL_BELOW`` seconds on one thread;
a batch too short to judge by (``MIN_DECIDE``) is followed by a serial one
twice its size.
Results never depend on the thread count, so neither do they on this choice.
"""
from cpython.exc cimport PyErr_CheckSignals
from time import perf_counter

# Seconds one batch should take (see the module docstring); read when a
# Batches is made, so tests can shorten it.
TARGET = 0.05
# Work below this many seconds on one thread stays on one thread (see the
# module docstring; chosen by measurement, benchmarks/bench_threads.py).
SERIAL_BELOW = 1e-3
# A serial batch shorter than this (seconds) does not decide for threads: the
# caller's own cost per batch (a NumPy call, a memoryview) is a few
# microseconds, and a first row of a few hundred values then looked like a
# millisecond of work.  centred_rows of 200 x 64 went parallel and waited
# 0.7 ms for a sleeping thread after a LAPACK call (0.04 ms on one).
MIN_DECIDE = 5e-5
# A batch grows at most this much over the previous one: the cost of an item
# is not constant (the first items run in cache, later ones fault in fresh
# output pages or meet another process), so a long extrapolation from a tiny
# batch can overshoot the target many times (seen: x8 growth gave a 2.5 s
# batch).  Doubling reaches the target from 1 ms in six batches.
cdef double MAX_GROWTH = 2.0
# ... unless the rest, at the last batch's pace, would take at most this
# share of the target: then it is one batch.  Growing by doubling, a 1000-row
# Gram (10 tiles) ran as 4 parallel regions; an estimate 10x too low still
# ends the batch well inside the half second Ctrl-C allows.
cdef double WHOLE_REST = 0.5


cdef class Batches:
    """Iterate over [0, n) in ranges that each take about `target` seconds.

    ``while b.next(): run items b.start .. b.stop - 1 on b.threads threads``;
    ``next`` raises KeyboardInterrupt (or whatever a signal handler raises)
    between batches.  ``n_threads``: the most threads a batch may use; once
    parallel, a batch has at least n_threads items, so every thread has work.
    ``first``: the size of the first batch (a size learned by an earlier
    Batches over the same kind of items, so the work is known to be large:
    it starts parallel), else one item on one thread.
    ``target`` < 0 means the module's TARGET.
    """

    def __cinit__(self, Py_ssize_t n, int n_threads=1, Py_ssize_t first=0,
                  double target=-1.0):
        self.n = n
        self.max_threads = max(n_threads, 1)
        self.min_size = self.max_threads
        self.threads = self.max_threads if first > 0 else 1
        self.size = max(first, 1)
        self.target = TARGET if target < 0 else target
        self.start = 0
        self.stop = 0
        self.started = False
        self.serial_below = SERIAL_BELOW
        self.min_decide = MIN_DECIDE

    cdef bint next(self) except -1:
        cdef double now, elapsed, grow, rest
        now = perf_counter()
        if self.started:
            PyErr_CheckSignals()
            elapsed = now - self.t_last
            # The items left, at the last batch's pace.
            rest = elapsed / (self.stop - self.start) * (self.n - self.stop)
            if self.threads < self.max_threads:
                if rest <= self.serial_below:
                    # The rest is cheaper than waking the other threads.
                    self.size = self.n
                elif elapsed < self.min_decide and self.serial_below > 0:
                    # Too short a batch to judge by: its time is mostly the
                    # caller's fixed cost per batch, which the extrapolation
                    # would multiply by every item left.
                    self.size = self.size * 2
                else:
                    self.threads = self.max_threads
            if self.threads == self.max_threads:
                if rest <= WHOLE_REST * self.target:
                    # The rest is well inside the target: one parallel region
                    # for all of it instead of several small ones, each a
                    # wake-up and a barrier.
                    self.size = self.n
                else:
                    grow = (MAX_GROWTH if elapsed * MAX_GROWTH <= self.target
                            else self.target / elapsed)
                    self.size = max(self.min_size, <Py_ssize_t> (self.size * grow))
        self.started = True
        self.t_last = now
        self.start = self.stop
        if self.start >= self.n:
            return False
        self.stop = min(self.n, self.start + self.size)
        return True

    def ranges(self):
        """The ranges as a Python iterator (for tests)."""
        while self.next():
            yield self.start, self.stop
