/* Rows of a product with a symmetric matrix held as float32 hi + lo parts
 * (see fastkern/_split.pyx for the layout).
 *
 * Why C: a row's dot product is a sum, which the compiler may not reorder on
 * its own (no -ffast-math), so it would stay scalar; four partial sums in a
 * fixed order let it vectorise while keeping the result independent of the
 * machine.  The pointers are restrict so the T update vectorises without
 * run-time overlap checks, and the band is compiled for several instruction
 * sets (FK_CLONES, fk_maps.h): with AVX2 and FMA a pass at n = 6000 ran in
 * about half the time of the SSE2 build.
 */
#ifndef FK_SPLIT_H
#define FK_SPLIT_H

#include <stddef.h>

#include "fk_maps.h"

/* Where row i of the packed strict upper triangle starts: rows 0..i-1 hold
 * n - 1, n - 2, ..., n - i values. */
FK_INLINE ptrdiff_t fk_split_lo_offset(ptrdiff_t i, ptrdiff_t n)
{
    return i * (n - 1) - i * (i - 1) / 2;
}

/* Returns sum_j a_j v[j] and adds a_j x to T[j], a_j = hi[j] + lo[j] in double, j < len. */
FK_INLINE double fk_split_row(const float *FK_RESTRICT hi, const float *FK_RESTRICT lo,
                              const double *FK_RESTRICT v, double *FK_RESTRICT T,
                              ptrdiff_t len, double x)
{
    double s[4] = {0.0, 0.0, 0.0, 0.0};
    ptrdiff_t j = 0;
    for (; j + 4 <= len; j += 4)
        for (int q = 0; q < 4; q++) {
            double a = (double)hi[j + q] + (double)lo[j + q];
            s[q] += a * v[j + q];
            T[j + q] += a * x;
        }
    for (; j < len; j++) {
        double a = (double)hi[j] + (double)lo[j];
        s[0] += a * v[j];
        T[j] += a * x;
    }
    return (s[0] + s[1]) + (s[2] + s[3]);
}

/* Rows r0..r1-1 of the n x n split matrix times the t columns of V (Vt = V^T,
 * t x n): out[c, i] = diag[i] v_c[i] + upper part of row i . v_c, and the
 * mirror image, row i's upper part times v_c[i], is added to T[c, i+1:]. */
FK_CLONES static void fk_split_band(const float *K, const float *lo, const double *diag,
                                    const double *Vt, double *out, double *T, ptrdiff_t n,
                                    ptrdiff_t t, ptrdiff_t r0, ptrdiff_t r1)
{
    for (ptrdiff_t i = r0; i < r1; i++) {
        const float *l = lo + fk_split_lo_offset(i, n);
        for (ptrdiff_t c = 0; c < t; c++) {
            const double *v = Vt + c * n;
            out[c * n + i] = diag[i] * v[i] + fk_split_row(K + i * n + i + 1, l, v + i + 1,
                                                           T + c * n + i + 1, n - 1 - i, v[i]);
        }
    }
}

/* An optimisation barrier on a float in a register: the compiler must treat
 * its value as unknown.  GCC 12.2 at -O3 vectorised a 4-way unrolled
 * version of the loop below into code that took (double)(float)a for a and
 * stored lo = 0 for some entries (tests/test_split.py caught it); with the
 * barrier no compiler can fold that round trip, and the loop stays scalar,
 * which costs nothing here: it is bound by the stores to hi and lo. */
#if defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__))
#define FK_OPAQUE_FLOAT(h) __asm__("" : "+x"(h))
#elif defined(__GNUC__) && defined(__aarch64__)
#define FK_OPAQUE_FLOAT(h) __asm__("" : "+w"(h))
#else
#define FK_OPAQUE_FLOAT(h) do { volatile float fk_opaque_ = (h); (h) = fk_opaque_; } while (0)
#endif

/* src[j] itself, or 0 where |src[j]| < tiny: values that would only make
 * float32 subnormals (see fastkern/_mixed.py). */
#define FK_SPLIT_SOURCE(x, tiny) (fabs(x) < (tiny) ? 0.0 : (x))

/* Stores hi = fl32(a_j) and lo = fl32(a_j - hi) for a_j = src[j] (0 where
 * |src[j]| < tiny; scaled by si * s[j] when s is not NULL, in that order, as
 * fk_split_column) and returns sum_j |a_j|, j < len, summed in order. */
static double fk_split_store_row(const double *FK_RESTRICT src, const double *FK_RESTRICT s,
                                 double si, float *FK_RESTRICT hi, float *FK_RESTRICT lo,
                                 ptrdiff_t len, double tiny)
{
    double acc = 0.0;
    for (ptrdiff_t j = 0; j < len; j++) {
        double x = FK_SPLIT_SOURCE(src[j], tiny);
        double a = s ? (x * si) * s[j] : x;
        float h = (float)a;
        FK_OPAQUE_FLOAT(h);
        hi[j] = h;
        lo[j] = (float)(a - (double)h);
        acc += fabs(a);
    }
    return acc;
}

/* The mirror image of a panel's column: dst[r] = fl32(a_r) for a_r =
 * src[r * stride] (0 where that is under tiny in magnitude; scaled by s[r] * sj
 * when s is not NULL, in the order of fk_split_store_row, so both triangles
 * hold the same value), or 0 where |a_r| < factor_tiny; returns sum_r |a_r|,
 * r < len.  The mirror is only the
 * float32 Cholesky factor's input (the products read hi + lo above the
 * diagonal), so zeroing its tiny entries changes the preconditioner, not
 * the matrix solved. */
static double fk_split_column(const double *FK_RESTRICT src, ptrdiff_t stride,
                              const double *FK_RESTRICT s, double sj, float *FK_RESTRICT dst,
                              ptrdiff_t len, double tiny, double factor_tiny)
{
    double acc = 0.0;
    for (ptrdiff_t r = 0; r < len; r++) {
        double x = FK_SPLIT_SOURCE(src[r * stride], tiny);
        double a = s ? (x * s[r]) * sj : x;
        dst[r] = fabs(a) < factor_tiny ? 0.0f : (float)a;
        acc += fabs(a);
    }
    return acc;
}

#endif
