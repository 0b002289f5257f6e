/* One block of rows of y = K v for a symmetric row-major K, of which only the
 * lower triangle is read: the Lanczos solver's product (fastkern._lanczos).
 *
 * BLAS's symv reads the triangle once, but a threaded symv sums each entry of
 * y in an order that depends on the thread count, and fastkern's results do
 * not.  Here the triangle is cut into a fixed number of row blocks of equal
 * area (by the caller, from n alone); a block adds its rows' share into an
 * accumulator of its own, and the accumulators are added in block order, so
 * the result is the same for any number of threads taking the blocks.
 *
 * fk_symv_rows(K, ldk, r0, r1, v, acc) adds, for each row r in [r0, r1),
 * K[r, 0:r] v[r] into acc[0:r] (the column below the diagonal, read as the
 * row above it) and K[r, 0:r+1] . v[0:r+1] into acc[r].  Four rows go
 * together, so that each load of v and of acc serves four rows of K, and each
 * row's dot keeps four lanes of partial sums, added in a fixed order at the
 * end of the row.  The AVX2+FMA body is the same code compiled for that
 * target and chosen at run time (fk_mm_fast_level in fk_matmat.h); it fuses
 * the multiply-adds, so its bits differ from the portable body's, but each
 * body gives the same bits for any thread count.
 */
#ifndef FK_SYMV_H
#define FK_SYMV_H

#include <stddef.h>
#include <string.h>

#include "fk_portable.h"

#if defined(__GNUC__)
typedef double fk_sv_v __attribute__((vector_size(32)));

/* Loads and stores through memcpy: the rows have no alignment. */
#define FK_SV_LOAD(x, p) memcpy(&(x), (p), sizeof(fk_sv_v))
#define FK_SV_STORE(p, x) memcpy((p), &(x), sizeof(fk_sv_v))

/* Rows r, ..., r + R - 1 (R <= 4) over columns [0, c), c <= r, four at a
 * time: dot[q] += K[r + q, j] v[j] lane by lane, acc[j] += sum_q K[r + q, j] x[q]. */
FK_INLINE void fk_sv_panel(const double *const *k, int R, const double *x, ptrdiff_t c,
                           const double *FK_RESTRICT v, double *FK_RESTRICT acc, fk_sv_v *dot)
{
    fk_sv_v xs[4];
    for (int q = 0; q < R; q++)
        xs[q] = (fk_sv_v){x[q], x[q], x[q], x[q]};
    for (ptrdiff_t j = 0; j + 4 <= c; j += 4) {
        fk_sv_v vj, a, kq;
        FK_SV_LOAD(vj, v + j);
        FK_SV_LOAD(a, acc + j);
        for (int q = 0; q < R; q++) {
            FK_SV_LOAD(kq, k[q] + j);
            dot[q] += kq * vj;
            a += kq * xs[q];
        }
        FK_SV_STORE(acc + j, a);
    }
}
#endif

FK_INLINE void fk_symv_rows_body(const double *K, ptrdiff_t ldk, ptrdiff_t r0, ptrdiff_t r1,
                                 const double *FK_RESTRICT v, double *FK_RESTRICT acc)
{
    for (ptrdiff_t r = r0; r < r1; r += 4) {
        int R = r1 - r < 4 ? (int)(r1 - r) : 4;
        const double *k[4];
        double x[4], s[4];
        ptrdiff_t c = 0;
        for (int q = 0; q < R; q++) {
            k[q] = K + (r + q) * ldk;
            x[q] = v[r + q];
            s[q] = 0.0;
        }
#if defined(__GNUC__)
        {
            fk_sv_v dot[4];
            for (int q = 0; q < 4; q++)
                dot[q] = (fk_sv_v){0.0, 0.0, 0.0, 0.0};
            c = r / 4 * 4;
            /* A constant row count, so that the row loop unrolls and the
             * sums stay in registers. */
            if (R == 4)
                fk_sv_panel(k, 4, x, c, v, acc, dot);
            else
                fk_sv_panel(k, R, x, c, v, acc, dot);
            /* The lanes in a fixed order. */
            for (int q = 0; q < R; q++)
                s[q] = (dot[q][0] + dot[q][1]) + (dot[q][2] + dot[q][3]);
        }
#endif
        /* The columns left before the rows' own diagonal block, then that
         * block's lower triangle, in column order. */
        for (ptrdiff_t j = c; j < r; j++) {
            double a = acc[j];
            for (int q = 0; q < R; q++) {
                s[q] += k[q][j] * v[j];
                a += k[q][j] * x[q];
            }
            acc[j] = a;
        }
        for (int q = 0; q < R; q++) {
            for (int p = 0; p < q; p++) {
                s[q] += k[q][r + p] * v[r + p];
                acc[r + p] += k[q][r + p] * x[q];
            }
            s[q] += k[q][r + q] * x[q];
        }
        for (int q = 0; q < R; q++)
            acc[r + q] += s[q];
    }
}

#if defined(__GNUC__) && defined(__x86_64__)
#define FK_SV_HAVE_FAST 1
__attribute__((target("avx2,fma"))) static void
fk_symv_rows_fast(const double *K, ptrdiff_t ldk, ptrdiff_t r0, ptrdiff_t r1, const double *v,
                  double *acc)
{
    fk_symv_rows_body(K, ldk, r0, r1, v, acc);
}
#endif

static void fk_symv_rows_base(const double *K, ptrdiff_t ldk, ptrdiff_t r0, ptrdiff_t r1,
                              const double *v, double *acc)
{
    fk_symv_rows_body(K, ldk, r0, r1, v, acc);
}

/* fast: 1 for the AVX2+FMA body (where fk_mm_fast_level() >= 1), 0 portable. */
static void fk_symv_rows(const double *K, ptrdiff_t ldk, ptrdiff_t r0, ptrdiff_t r1,
                         const double *v, double *acc, int fast)
{
#ifdef FK_SV_HAVE_FAST
    if (fast) {
        fk_symv_rows_fast(K, ldk, r0, r1, v, acc);
        return;
    }
#endif
    (void)fast;
    fk_symv_rows_base(K, ldk, r0, r1, v, acc);
}

#endif
