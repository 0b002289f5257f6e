/* Waiting without sleeping, and claiming work with atomics, for the threads
 * of one parallel region (the Lanczos products of fastkern._lanczos).
 *
 * fastkern's OpenMP threads sleep when idle (OMP_WAIT_POLICY=passive, see
 * fastkern._threads), so each parallel region wakes them: tens of
 * microseconds, and Linux often wakes a thread on its waker's core, where it
 * runs after the waker instead of beside it.  For a run of steps of a few
 * hundred microseconds each, one region holds the threads; between steps a
 * waiting thread spins FK_SPIN_PAUSES pauses (about 100 us), then yields
 * between checks, so that on a busy core the thread it waits for runs.
 *
 * The work of a step is claimed, not dealt: a thread that is not running
 * (another pool spinning on its core, another process) claims nothing, and
 * the others do its share instead of waiting for it.
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
/* On failure *expected becomes the value found, as GCC's builtin does. */
static int fk_cas_msvc(volatile long *p, long *expected, long desired)
{
    long found = _InterlockedCompareExchange(p, desired, *expected);
    if (found == *expected)
        return 1;
    *expected = found;
    return 0;
}
#define FK_CAS(p, e, d) fk_cas_msvc((volatile long *)(p), (e), (d))
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
#define FK_CAS(p, e, d) \
    __atomic_compare_exchange_n((p), (e), (d), 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
typedef long fk_spin_int;
#endif

#define FK_SPIN_PAUSES 2000

FK_INLINE void fk_spin_pause(int *spins)
{
    if (*spins < FK_SPIN_PAUSES) {
        FK_PAUSE();
        (*spins)++;
    } else {
        FK_YIELD();
    }
}

/* Wait until *word differs from old or *quit is set; the value of *word. */
static fk_spin_int fk_spin_wait_change(fk_spin_int *word, fk_spin_int old, fk_spin_int *quit)
{
    fk_spin_int now;
    for (int spins = 0; (now = FK_ATOMIC_LOAD(word)) == old && !FK_ATOMIC_LOAD(quit);)
        fk_spin_pause(&spins);
    return now;
}

/* Wait until *word is at least target. */
static void fk_spin_wait_reach(fk_spin_int *word, fk_spin_int target)
{
    for (int spins = 0; FK_ATOMIC_LOAD(word) < target;)
        fk_spin_pause(&spins);
}

/* The next ticket below limit from *next (taken), or -1 when none is left. */
static fk_spin_int fk_spin_claim(fk_spin_int *next, fk_spin_int limit)
{
    fk_spin_int t = FK_ATOMIC_LOAD(next);
    while (t < limit) {
        if (FK_CAS(next, &t, t + 1))
            return t;
    }
    return -1;
}

static void fk_spin_add(fk_spin_int *word)
{
    FK_ATOMIC_INC(word);
}

static void fk_spin_set(fk_spin_int *word, fk_spin_int value)
{
    FK_ATOMIC_STORE(word, value);
}

#endif
