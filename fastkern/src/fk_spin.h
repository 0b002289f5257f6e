/* A barrier for the threads of one parallel region that waits by spinning,
 * then by yielding the core, never by sleeping.
 *
 * fastkern's OpenMP threads sleep when idle (OMP_WAIT_POLICY=passive, see
 * fastkern._threads), so each parallel region wakes them: tens of
 * microseconds, and Linux often wakes a thread on its waker's core, where it
 * runs after the waker instead of beside it.  For a run of steps of a few
 * hundred microseconds each (the Lanczos products of fastkern._lanczos), one
 * region holds the threads and this barrier separates the steps.  A waiting
 * thread spins FK_SPIN_PAUSES pauses (about 100 us), then yields between
 * checks, so that on a busy core the thread it waits for gets the core.
 *
 * count and sense are shared, zero before the region; *local is each
 * thread's own, zero before its first wait.  Every one of the region's
 * nthreads threads must call it the same number of times.
 */
#ifndef FK_SPIN_H
#define FK_SPIN_H

#include "fk_portable.h"

#if defined(_WIN32) || defined(_WIN64)
#include <windows.h>
#define FK_YIELD() SwitchToThread()
#else
#include <sched.h>
#define FK_YIELD() sched_yield()
#endif

#if defined(_MSC_VER) && !defined(__clang__)
#include <intrin.h>
#define FK_PAUSE() _mm_pause()
#define FK_ATOMIC_INC(p) _InterlockedIncrement((volatile long *)(p))
#define FK_ATOMIC_LOAD(p) _InterlockedOr((volatile long *)(p), 0)
#define FK_ATOMIC_STORE(p, v) _InterlockedExchange((volatile long *)(p), (v))
typedef long fk_spin_int;
#else
#if defined(__x86_64__) || defined(__i386__)
#define FK_PAUSE() __builtin_ia32_pause()
#else
#define FK_PAUSE() ((void)0)
#endif
#define FK_ATOMIC_INC(p) __atomic_add_fetch((p), 1, __ATOMIC_ACQ_REL)
#define FK_ATOMIC_LOAD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define FK_ATOMIC_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
typedef long fk_spin_int;
#endif

#define FK_SPIN_PAUSES 2000

/* Sense-reversing: the last thread to arrive resets the count and flips the
 * shared sense, which the others wait to see equal their own flipped one. */
static void fk_spin_barrier(fk_spin_int *count, fk_spin_int *sense, int nthreads,
                            fk_spin_int *local)
{
    fk_spin_int mine = !*local;
    *local = mine;
    if (FK_ATOMIC_INC(count) == nthreads) {
        FK_ATOMIC_STORE(count, 0);
        FK_ATOMIC_STORE(sense, mine);
        return;
    }
    for (int spins = 0; FK_ATOMIC_LOAD(sense) != mine;) {
        if (spins < FK_SPIN_PAUSES) {
            FK_PAUSE();
            spins++;
        } else {
            FK_YIELD();
        }
    }
}

#endif
