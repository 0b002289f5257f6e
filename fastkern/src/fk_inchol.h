/* The candidate pass of incomplete Cholesky (fastkern/_inchol.pyx, ``prepare``).
 *
 * w_t[i] -= sum over j < k of g[t][j] * Gt[j][i], for c candidate rows t at
 * once, over one block of m rows.  A pivot step reads all of Gt[:k] to
 * subtract the same sum for one row, so it is bound by the memory; here each
 * 8-row panel of Gt[:k] is read from memory once, copied contiguous, and swept
 * by every candidate (FK_INCHOL_UPDATE below).
 *
 * The arithmetic of each entry is the pivot step's, in the same order:
 * w = w - g * Gt[j][i] for j = 0, 1, ..., with a separate multiply and
 * subtract (no fused multiply-add: no clone here targets FMA, and the
 * step's loop is compiled for the baseline), so a column finished from w is
 * the column the step would have computed, bit for bit.
 */
#ifndef FK_INCHOL_H
#define FK_INCHOL_H

#include <stddef.h>

#include "fk_portable.h"

/* AVX2 without FMA, which GCC keeps apart ("avx2" does not enable it); see
 * the note above on why no clone may have FMA. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__)
#define FK_INCHOL_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define FK_INCHOL_CLONES
#endif

/* Rows per panel, the rows of one tile (FK_INCHOL_TILE is written for 8). */
#define FK_INCHOL_PANEL 8

/* One tile: w0..w3[0:8] -= sum_j g0..g3[j] panel[j][0:8], the 32 sums held
 * over the whole sum over j.  GCC and clang: four-lane vectors (eight AVX2
 * registers in the avx2 clone; loads and stores at any alignment).  Other
 * compilers (MSVC), or FK_INCHOL_PLAIN defined (the tests): the same
 * arithmetic on arrays. */
#if defined(__GNUC__) && !defined(FK_INCHOL_PLAIN)
typedef double fk_inchol_v4d __attribute__((vector_size(32), aligned(8), __may_alias__));

#define FK_INCHOL_TILE(w0, w1, w2, w3, g0, g1, g2, g3, panel, k)                        \
do {                                                                                    \
    const double *row_ = (panel);                                                       \
    ptrdiff_t j_;                                                                       \
    fk_inchol_v4d a00 = *(fk_inchol_v4d *)(w0), a01 = *(fk_inchol_v4d *)((w0) + 4);     \
    fk_inchol_v4d a10 = *(fk_inchol_v4d *)(w1), a11 = *(fk_inchol_v4d *)((w1) + 4);     \
    fk_inchol_v4d a20 = *(fk_inchol_v4d *)(w2), a21 = *(fk_inchol_v4d *)((w2) + 4);     \
    fk_inchol_v4d a30 = *(fk_inchol_v4d *)(w3), a31 = *(fk_inchol_v4d *)((w3) + 4);     \
    for (j_ = 0; j_ < (k); j_++, row_ += 8) {                                           \
        const fk_inchol_v4d r0 = *(const fk_inchol_v4d *)row_;                          \
        const fk_inchol_v4d r1 = *(const fk_inchol_v4d *)(row_ + 4);                    \
        const double b0 = (g0)[j_], b1 = (g1)[j_], b2 = (g2)[j_], b3 = (g3)[j_];        \
        a00 = a00 - b0 * r0;                                                            \
        a01 = a01 - b0 * r1;                                                            \
        a10 = a10 - b1 * r0;                                                            \
        a11 = a11 - b1 * r1;                                                            \
        a20 = a20 - b2 * r0;                                                            \
        a21 = a21 - b2 * r1;                                                            \
        a30 = a30 - b3 * r0;                                                            \
        a31 = a31 - b3 * r1;                                                            \
    }                                                                                   \
    *(fk_inchol_v4d *)(w0) = a00;                                                       \
    *(fk_inchol_v4d *)((w0) + 4) = a01;                                                 \
    *(fk_inchol_v4d *)(w1) = a10;                                                       \
    *(fk_inchol_v4d *)((w1) + 4) = a11;                                                 \
    *(fk_inchol_v4d *)(w2) = a20;                                                       \
    *(fk_inchol_v4d *)((w2) + 4) = a21;                                                 \
    *(fk_inchol_v4d *)(w3) = a30;                                                       \
    *(fk_inchol_v4d *)((w3) + 4) = a31;                                                 \
} while (0)
#else
#define FK_INCHOL_TILE(w0, w1, w2, w3, g0, g1, g2, g3, panel, k)                        \
do {                                                                                    \
    const double *row_ = (panel);                                                       \
    ptrdiff_t j_, l_;                                                                   \
    double a0_[8], a1_[8], a2_[8], a3_[8];                                              \
    for (l_ = 0; l_ < 8; l_++) {                                                        \
        a0_[l_] = (w0)[l_];                                                             \
        a1_[l_] = (w1)[l_];                                                             \
        a2_[l_] = (w2)[l_];                                                             \
        a3_[l_] = (w3)[l_];                                                             \
    }                                                                                   \
    for (j_ = 0; j_ < (k); j_++, row_ += 8) {                                           \
        const double b0 = (g0)[j_], b1 = (g1)[j_], b2 = (g2)[j_], b3 = (g3)[j_];        \
        for (l_ = 0; l_ < 8; l_++) {                                                    \
            a0_[l_] = a0_[l_] - b0 * row_[l_];                                          \
            a1_[l_] = a1_[l_] - b1 * row_[l_];                                          \
            a2_[l_] = a2_[l_] - b2 * row_[l_];                                          \
            a3_[l_] = a3_[l_] - b3 * row_[l_];                                          \
        }                                                                               \
    }                                                                                   \
    for (l_ = 0; l_ < 8; l_++) {                                                        \
        (w0)[l_] = a0_[l_];                                                             \
        (w1)[l_] = a1_[l_];                                                             \
        (w2)[l_] = a2_[l_];                                                             \
        (w3)[l_] = a3_[l_];                                                             \
    }                                                                                   \
} while (0)
#endif

/* w_t[0:m] -= sum_j g_t[j] gt[j][0:m] for t < c (w_t = w + t ldw, g_t = g + t k,
 * gt[j] = gt + j ldg).  Each panel of 8 rows is first copied to `panel`
 * (k x 8, float64, contiguous), then every tile of 4 candidates sweeps it: one
 * read of Gt from memory for all c candidates, and sequential reads of the
 * panel from L1/L2 rather than k runs a row of Gt apart.  The rows after the
 * last whole panel, and the candidates after the last 4, run one by one. */
#define FK_INCHOL_UPDATE(NAME, T)                                                         \
FK_INCHOL_CLONES static void NAME(double *w, ptrdiff_t ldw, ptrdiff_t c,                  \
                                  const double *g, ptrdiff_t k, const T *gt,              \
                                  ptrdiff_t ldg, ptrdiff_t m, double *panel)              \
{                                                                                         \
    ptrdiff_t t, j, i, l;                                                                 \
    for (i = 0; i + FK_INCHOL_PANEL <= m; i += FK_INCHOL_PANEL) {                         \
        for (j = 0; j < k; j++)                                                           \
            for (l = 0; l < FK_INCHOL_PANEL; l++)                                         \
                panel[j * FK_INCHOL_PANEL + l] = gt[j * ldg + i + l];                     \
        for (t = 0; t + 4 <= c; t += 4) {                                                 \
            double *w0 = w + t * ldw + i, *w1 = w0 + ldw, *w2 = w1 + ldw, *w3 = w2 + ldw; \
            const double *g0 = g + t * k, *g1 = g0 + k, *g2 = g1 + k, *g3 = g2 + k;       \
            FK_INCHOL_TILE(w0, w1, w2, w3, g0, g1, g2, g3, panel, k);                     \
        }                                                                                 \
        for (; t < c; t++) {                                                              \
            double *w0 = w + t * ldw + i;                                                 \
            const double *g0 = g + t * k;                                                 \
            for (j = 0; j < k; j++)                                                       \
                for (l = 0; l < FK_INCHOL_PANEL; l++)                                     \
                    w0[l] = w0[l] - g0[j] * panel[j * FK_INCHOL_PANEL + l];               \
        }                                                                                 \
    }                                                                                     \
    for (t = 0; t < c && i < m; t++) {                                                    \
        double *w0 = w + t * ldw;                                                         \
        const double *g0 = g + t * k;                                                     \
        for (j = 0; j < k; j++)                                                           \
            for (l = i; l < m; l++)                                                       \
                w0[l] = w0[l] - g0[j] * gt[j * ldg + l];                                  \
    }                                                                                     \
}

FK_INCHOL_UPDATE(fk_inchol_update_d, double)
FK_INCHOL_UPDATE(fk_inchol_update_f, float)

#undef FK_INCHOL_UPDATE

#endif
