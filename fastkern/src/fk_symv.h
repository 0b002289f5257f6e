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
 * body gives the same bits for any thread count.  fk_symv_upper_rows does
 * the same from the upper triangle kept packed (PackedUpperGram's strips).
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

/* Rows r, ..., r + R - 1 (R <= 4; k[q] addresses row r + q by column) over
 * the columns [c0, c1), c1 - c0 a multiple of 4, none of them the rows' own,
 * four at a time: dot[q] += K[r + q, j] v[j] lane by lane, acc[j] += sum_q
 * K[r + q, j] x[q]. */
FK_INLINE void fk_sv_panel(const double *const *k, int R, const double *x, ptrdiff_t c0,
                           ptrdiff_t c1, const double *FK_RESTRICT v, double *FK_RESTRICT acc,
                           fk_sv_v *dot)
{
    for (ptrdiff_t j = c0; j < c1; j += 4) {
        fk_sv_v vj, a, kq;
        FK_SV_LOAD(vj, v + j);
        FK_SV_LOAD(a, acc + j);
        for (int q = 0; q < R; q++) {
            /* The broadcast is loop-invariant: the compiler keeps it in a register. */
            fk_sv_v xq = {x[q], x[q], x[q], x[q]};
            FK_SV_LOAD(kq, k[q] + j);
            dot[q] += kq * vj;
            a += kq * xq;
        }
        FK_SV_STORE(acc + j, a);
    }
}
#endif

/* Rows r, ..., r + R - 1 over the columns [c0, c1), none of them the rows'
 * own: s[q] += K[r + q, j] v[j] and acc[j] += sum_q K[r + q, j] x[q], four
 * columns at a time (each row's lanes added in a fixed order at the end),
 * then the rest one by one. */
FK_INLINE void fk_sv_columns(const double *const *k, int R, const double *x, ptrdiff_t c0,
                             ptrdiff_t c1, const double *FK_RESTRICT v,
                             double *FK_RESTRICT acc, double *s)
{
    ptrdiff_t c = c0;
#if defined(__GNUC__)
    fk_sv_v dot[4];
    ptrdiff_t cv = c0 + (c1 - c0) / 4 * 4;
    for (int q = 0; q < 4; q++)
        dot[q] = (fk_sv_v){0.0, 0.0, 0.0, 0.0};
    /* A constant row count, so that the row loop unrolls and the sums stay
     * in registers. */
    if (R == 4)
        fk_sv_panel(k, 4, x, c0, cv, v, acc, dot);
    else
        fk_sv_panel(k, R, x, c0, cv, v, acc, dot);
    for (int q = 0; q < R; q++)
        s[q] += (dot[q][0] + dot[q][1]) + (dot[q][2] + dot[q][3]);
    c = cv;
#endif
    for (ptrdiff_t j = c; j < c1; j++) {
        double a = acc[j];
        for (int q = 0; q < R; q++) {
            s[q] += k[q][j] * v[j];
            a += k[q][j] * x[q];
        }
        acc[j] = a;
    }
}

FK_INLINE void fk_symv_rows_body(const double *K, ptrdiff_t ldk, ptrdiff_t r0, ptrdiff_t r1,
                                 const double *FK_RESTRICT v, double *FK_RESTRICT acc)
{
    for (ptrdiff_t r = r0; r < r1; r += 4) {
        int R = r1 - r < 4 ? (int)(r1 - r) : 4;
        const double *k[4];
        /* Set for all 4, so that the compiler sees none read unset. */
        double x[4] = {0.0, 0.0, 0.0, 0.0}, s[4] = {0.0, 0.0, 0.0, 0.0};
        for (int q = 0; q < R; q++) {
            k[q] = K + (r + q) * ldk;
            x[q] = v[r + q];
        }
        /* The columns before the rows' own diagonal block, then that block's
         * lower triangle, in column order. */
        fk_sv_columns(k, R, x, 0, r, v, acc, s);
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

/* The same from K's upper triangle, each row r given by its own address:
 * K[r, j] = data[row_start[r] + j] for j >= r (PackedUpperGram's strips).
 * For each row r in [r0, r1): K[r, r+1:] x[r] into acc[r+1:] and
 * K[r, r:] . x[r:] into acc[r].  Four rows go together: their diagonal
 * block's upper triangle, then the columns after it, four at a time and
 * the rest one by one, in column order. */
FK_INLINE void fk_symv_upper_rows_body(const double *data, const ptrdiff_t *row_start,
                                       ptrdiff_t n, ptrdiff_t r0, ptrdiff_t r1,
                                       const double *FK_RESTRICT v, double *FK_RESTRICT acc)
{
    for (ptrdiff_t r = r0; r < r1; r += 4) {
        int R = r1 - r < 4 ? (int)(r1 - r) : 4;
        const double *k[4];
        /* Set for all 4, so that the compiler sees none read unset. */
        double x[4] = {0.0, 0.0, 0.0, 0.0}, s[4] = {0.0, 0.0, 0.0, 0.0};
        for (int q = 0; q < R; q++) {
            k[q] = data + row_start[r + q];
            x[q] = v[r + q];
            s[q] = k[q][r + q] * x[q];
        }
        for (int q = 0; q < R; q++)
            for (int p = q + 1; p < R; p++) {
                s[q] += k[q][r + p] * v[r + p];
                acc[r + p] += k[q][r + p] * x[q];
            }
        fk_sv_columns(k, R, x, r + R, n, v, acc, s);
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

#ifdef FK_SV_HAVE_FAST
__attribute__((target("avx2,fma"))) static void
fk_symv_upper_rows_fast(const double *data, const ptrdiff_t *row_start, ptrdiff_t n,
                        ptrdiff_t r0, ptrdiff_t r1, const double *v, double *acc)
{
    fk_symv_upper_rows_body(data, row_start, n, r0, r1, v, acc);
}
#endif

static void fk_symv_upper_rows_base(const double *data, const ptrdiff_t *row_start,
                                    ptrdiff_t n, ptrdiff_t r0, ptrdiff_t r1, const double *v,
                                    double *acc)
{
    fk_symv_upper_rows_body(data, row_start, n, r0, r1, v, acc);
}

static void fk_symv_upper_rows(const double *data, const ptrdiff_t *row_start, ptrdiff_t n,
                               ptrdiff_t r0, ptrdiff_t r1, const double *v, double *acc,
                               int fast)
{
#ifdef FK_SV_HAVE_FAST
    if (fast) {
        fk_symv_upper_rows_fast(data, row_start, n, r0, r1, v, acc);
        return;
    }
#endif
    (void)fast;
    fk_symv_upper_rows_base(data, row_start, n, r0, r1, v, acc);
}

/* 1 if this CPU runs the AVX2+FMA bodies (and the OS saves their
 * registers); call once, outside parallel regions. */
static int fk_symv_fast_available(void)
{
#ifdef FK_SV_HAVE_FAST
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
    return 0;
#endif
}

/* fast: 1 for the AVX2+FMA body (fk_symv_fast_available), 0 portable. */
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
