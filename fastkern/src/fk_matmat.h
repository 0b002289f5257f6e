/* out = K V for a large row-major K and a block V of a few columns.
 *
 * The block eigensolver's products K V (n x n times n x 16) are too narrow for
 * BLAS: OpenBLAS packs K for every product and reaches about a third of its
 * dgemm peak (N = 8000, 16 columns, 2 cores: 45 ms, against 23 ms here).  Here
 * K is read in place, FK_MM_ROWS rows at a time, each row element multiplied
 * into 8 columns held in registers (12 accumulators of 4 doubles: 6 rows x 2
 * vectors, with the two vectors of V and one broadcast, 15 of AVX2's 16
 * registers); a remaining group of 4 columns takes 12 rows at a time.  K is
 * streamed in chunks of FK_MM_JB columns, so that a chunk of its rows stays in
 * L2 while the column groups pass over it (N = 8000, 12 columns: 18.2 ms with
 * chunks of 2048, 19.4 ms with 1024, 20.9 ms with whole rows).
 *
 * Every output row is summed by one call in a fixed order (columns of K in
 * order, chunk by chunk), so the result does not depend on how rows are
 * dealt to threads.  V and out have bp columns, a multiple of 4 (the caller
 * pads).  The AVX2+FMA body is compiled with a target attribute and chosen at
 * run time (fk_mm_fast_available); the portable body is the same code without
 * it, and plain C loops where GCC's vector extensions are missing (MSVC).  The
 * symmetric strip also has an AVX-512 body (fk_mm_sym_strip_wide, chosen by
 * fk_mm_fast_level): on an AMD Zen 5 host, 8 columns at N = 8000 from the
 * packed triangle took 8.7 ms against AVX2's 12.0 ms, and 16 columns 15.4 ms
 * against 20.0 ms.
 */
#ifndef FK_MATMAT_H
#define FK_MATMAT_H

#include <stddef.h>
#include <string.h>

#include "fk_portable.h"

#define FK_MM_ROWS 6
#define FK_MM_JB 2048

#if defined(__GNUC__)
typedef double fk_mm_v __attribute__((vector_size(32)));

/* out[r, 0:4 nv] += sum_j k[r][j] V[j, 0:4 nv] for r < nr (k[r] valid for all r). */
FK_INLINE void fk_mm_micro(const double *const *k, int nr, const double *FK_RESTRICT V,
                           ptrdiff_t ldv, ptrdiff_t jb, int nv, double *FK_RESTRICT out,
                           ptrdiff_t ldo)
{
    fk_mm_v a[FK_MM_ROWS][2];
    for (int r = 0; r < FK_MM_ROWS; r++)
        for (int q = 0; q < nv; q++)
            a[r][q] = (fk_mm_v){0.0, 0.0, 0.0, 0.0};
    for (ptrdiff_t j = 0; j < jb; j++) {
        fk_mm_v v[2];
        for (int q = 0; q < nv; q++)
            memcpy(&v[q], V + j * ldv + 4 * q, sizeof(fk_mm_v));
        for (int r = 0; r < FK_MM_ROWS; r++) {
            double x = k[r][j];
            for (int q = 0; q < nv; q++)
                a[r][q] += x * v[q];
        }
    }
    for (int r = 0; r < nr; r++)
        for (int q = 0; q < nv; q++) {
            fk_mm_v t;
            memcpy(&t, out + r * ldo + 4 * q, sizeof(fk_mm_v));
            t += a[r][q];
            memcpy(out + r * ldo + 4 * q, &t, sizeof(fk_mm_v));
        }
}

/* The 12 x 1 register tiles of a vector type VT: ROWS, out[r, :] += sum_j
 * k[r][j] V[j, :] for 12 rows of K (the 4-column remainder, so that 12 sums
 * are in flight: 6 x 1 would leave the FMA units waiting on their latency);
 * COLS, out[c, :] += sum_{r < R} K[r, c] V[r, :] for 12 columns of K (the
 * transposed products of the symmetric strip; columns past nj repeat the
 * last one, computed, not stored).  VT is 4 doubles here, and 8 for the
 * AVX-512 strip below. */
#define FK_MM_DEFINE_TILES12(VT, ROWS, COLS)                                          \
FK_INLINE void ROWS(const double *const *k, int nr, const double *FK_RESTRICT V,       \
                    ptrdiff_t ldv, ptrdiff_t jb, double *FK_RESTRICT out, ptrdiff_t ldo) \
{                                                                                     \
    VT a[12];                                                                         \
    for (int r = 0; r < 12; r++)                                                      \
        a[r] = (VT){0.0};                                                             \
    for (ptrdiff_t j = 0; j < jb; j++) {                                              \
        VT v;                                                                         \
        memcpy(&v, V + j * ldv, sizeof(VT));                                          \
        for (int r = 0; r < 12; r++)                                                  \
            a[r] += k[r][j] * v;                                                      \
    }                                                                                 \
    for (int r = 0; r < nr; r++) {                                                    \
        VT t;                                                                         \
        memcpy(&t, out + r * ldo, sizeof(VT));                                        \
        t += a[r];                                                                    \
        memcpy(out + r * ldo, &t, sizeof(VT));                                        \
    }                                                                                 \
}                                                                                     \
                                                                                      \
FK_INLINE void COLS(const double *K, ptrdiff_t ldk, int nj, ptrdiff_t R,              \
                    const double *FK_RESTRICT V, ptrdiff_t ldv, double *FK_RESTRICT out, \
                    ptrdiff_t ldo)                                                    \
{                                                                                     \
    VT a[12];                                                                         \
    int off[12];                                                                      \
    for (int c = 0; c < 12; c++) {                                                    \
        off[c] = c < nj ? c : nj - 1;                                                 \
        a[c] = (VT){0.0};                                                             \
    }                                                                                 \
    for (ptrdiff_t r = 0; r < R; r++) {                                               \
        VT v;                                                                         \
        const double *k = K + r * ldk;                                                \
        memcpy(&v, V + r * ldv, sizeof(VT));                                          \
        for (int c = 0; c < 12; c++)                                                  \
            a[c] += k[off[c]] * v;                                                    \
    }                                                                                 \
    for (int c = 0; c < nj; c++) {                                                    \
        VT t;                                                                         \
        memcpy(&t, out + c * ldo, sizeof(VT));                                        \
        t += a[c];                                                                    \
        memcpy(out + c * ldo, &t, sizeof(VT));                                        \
    }                                                                                 \
}

FK_MM_DEFINE_TILES12(fk_mm_v, fk_mm_micro12, fk_mm_micro_t12)
#else
FK_INLINE void fk_mm_micro(const double *const *k, int nr, const double *FK_RESTRICT V,
                           ptrdiff_t ldv, ptrdiff_t jb, int nv, double *FK_RESTRICT out,
                           ptrdiff_t ldo)
{
    double a[FK_MM_ROWS][8] = {{0.0}};
    int w = 4 * nv;
    for (ptrdiff_t j = 0; j < jb; j++)
        for (int r = 0; r < FK_MM_ROWS; r++) {
            double x = k[r][j];
            for (int c = 0; c < w; c++)
                a[r][c] += x * V[j * ldv + c];
        }
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < w; c++)
            out[r * ldo + c] += a[r][c];
}

FK_INLINE void fk_mm_micro12(const double *const *k, int nr, const double *FK_RESTRICT V,
                             ptrdiff_t ldv, ptrdiff_t jb, double *FK_RESTRICT out,
                             ptrdiff_t ldo)
{
    double a[12][4] = {{0.0}};
    for (ptrdiff_t j = 0; j < jb; j++)
        for (int r = 0; r < 12; r++)
            for (int c = 0; c < 4; c++)
                a[r][c] += k[r][j] * V[j * ldv + c];
    for (int r = 0; r < nr; r++)
        for (int c = 0; c < 4; c++)
            out[r * ldo + c] += a[r][c];
}
#endif

/* The transposed products of a symmetric K stored by its upper triangle:
 * out[c, 0:4 nv] += sum_{r < R} K[r, c] V[r, 0:4 nv] for the nj <= 6 columns
 * c of K (row r at K + r * ldk), the register tile of fk_mm_micro with the
 * roles of rows and columns swapped.  Columns past nj repeat the last one
 * (computed, not stored), so no read leaves the nj columns. */
#if defined(__GNUC__)
FK_INLINE void fk_mm_micro_t(const double *K, ptrdiff_t ldk, int nj, ptrdiff_t R,
                             const double *FK_RESTRICT V, ptrdiff_t ldv, int nv,
                             double *FK_RESTRICT out, ptrdiff_t ldo)
{
    fk_mm_v a[FK_MM_ROWS][2];
    int off[FK_MM_ROWS];
    for (int c = 0; c < FK_MM_ROWS; c++) {
        off[c] = c < nj ? c : nj - 1;
        for (int q = 0; q < nv; q++)
            a[c][q] = (fk_mm_v){0.0, 0.0, 0.0, 0.0};
    }
    for (ptrdiff_t r = 0; r < R; r++) {
        fk_mm_v v[2];
        const double *k = K + r * ldk;
        for (int q = 0; q < nv; q++)
            memcpy(&v[q], V + r * ldv + 4 * q, sizeof(fk_mm_v));
        for (int c = 0; c < FK_MM_ROWS; c++) {
            double x = k[off[c]];
            for (int q = 0; q < nv; q++)
                a[c][q] += x * v[q];
        }
    }
    for (int c = 0; c < nj; c++)
        for (int q = 0; q < nv; q++) {
            fk_mm_v t;
            memcpy(&t, out + c * ldo + 4 * q, sizeof(fk_mm_v));
            t += a[c][q];
            memcpy(out + c * ldo + 4 * q, &t, sizeof(fk_mm_v));
        }
}
#else
FK_INLINE void fk_mm_micro_t(const double *K, ptrdiff_t ldk, int nj, ptrdiff_t R,
                             const double *FK_RESTRICT V, ptrdiff_t ldv, int nv,
                             double *FK_RESTRICT out, ptrdiff_t ldo)
{
    double a[FK_MM_ROWS][8] = {{0.0}};
    int w = 4 * nv;
    for (ptrdiff_t r = 0; r < R; r++)
        for (int c = 0; c < nj; c++) {
            double x = K[r * ldk + c];
            for (int e = 0; e < w; e++)
                a[c][e] += x * V[r * ldv + e];
        }
    for (int c = 0; c < nj; c++)
        for (int e = 0; e < w; e++)
            out[c * ldo + e] += a[c][e];
}

FK_INLINE void fk_mm_micro_t12(const double *K, ptrdiff_t ldk, int nj, ptrdiff_t R,
                               const double *FK_RESTRICT V, ptrdiff_t ldv,
                               double *FK_RESTRICT out, ptrdiff_t ldo)
{
    double a[12][4] = {{0.0}};
    for (ptrdiff_t r = 0; r < R; r++)
        for (int c = 0; c < nj; c++)
            for (int e = 0; e < 4; e++)
                a[c][e] += K[r * ldk + c] * V[r * ldv + e];
    for (int c = 0; c < nj; c++)
        for (int e = 0; e < 4; e++)
            out[c * ldo + e] += a[c][e];
}
#endif

/* k[r] = row i + r of K from column jc, for r < R; rows past the nr that
 * remain repeat the last one (their sums are computed but not stored). */
FK_INLINE void fk_mm_row_ptrs(const double *K, ptrdiff_t ldk, ptrdiff_t i, int nr,
                              ptrdiff_t jc, int R, const double **k)
{
    for (int r = 0; r < R; r++)
        k[r] = K + (i + (r < nr ? r : nr - 1)) * ldk + jc;
}

/* out[r0:r1, :] += K[r0:r1, jc:jc+jb] V[jc:jc+jb, :], one chunk of columns;
 * K row-major (leading dimension ldk), V and out with bp columns.
 * wide: 8 columns per pass (needs 16 registers of 32 bytes: AVX2), then the
 * 4 left over 12 rows at a time; else only 4-column passes of 6 rows, so that
 * 16-byte registers (SSE2, where a 32-byte vector takes two) do not spill. */
FK_INLINE void fk_mm_row_tiles(const double *K, ptrdiff_t ldk, ptrdiff_t r0, ptrdiff_t r1,
                               ptrdiff_t jc, ptrdiff_t jb, const double *V, ptrdiff_t bp,
                               double *out, int wide)
{
    const double *k[12];
    ptrdiff_t c8 = wide ? bp / 8 * 8 : 0;
    int rows4 = wide ? 12 : FK_MM_ROWS;
    for (ptrdiff_t i = r0; i < r1 && c8 > 0; i += FK_MM_ROWS) {
        int nr = r1 - i < FK_MM_ROWS ? (int)(r1 - i) : FK_MM_ROWS;
        fk_mm_row_ptrs(K, ldk, i, nr, jc, FK_MM_ROWS, k);
        for (ptrdiff_t c = 0; c < c8; c += 8)
            fk_mm_micro(k, nr, V + jc * bp + c, bp, jb, 2, out + i * bp + c, bp);
    }
    for (ptrdiff_t i = r0; i < r1 && c8 < bp; i += rows4) {
        int nr = r1 - i < rows4 ? (int)(r1 - i) : rows4;
        fk_mm_row_ptrs(K, ldk, i, nr, jc, rows4, k);
        for (ptrdiff_t c = c8; c < bp; c += 4) {
            if (wide)
                fk_mm_micro12(k, nr, V + jc * bp + c, bp, jb, out + i * bp + c, bp);
            else
                fk_mm_micro(k, nr, V + jc * bp + c, bp, jb, 1, out + i * bp + c, bp);
        }
    }
}

/* out[r0:r1, :] = K[r0:r1, 0:n] V, chunk by chunk of FK_MM_JB columns. */
FK_INLINE void fk_mm_rows_body(const double *K, ptrdiff_t ldk, ptrdiff_t r0, ptrdiff_t r1,
                               ptrdiff_t n, const double *V, ptrdiff_t bp, double *out,
                               int wide)
{
    memset(out + r0 * bp, 0, (size_t)((r1 - r0) * bp) * sizeof(double));
    for (ptrdiff_t jc = 0; jc < n; jc += FK_MM_JB)
        fk_mm_row_tiles(K, ldk, r0, r1, jc, n - jc < FK_MM_JB ? n - jc : FK_MM_JB, V, bp, out,
                        wide);
}

/* out[0:c, :] += A[0:R, 0:c]^T Z[0:R, :] for a row-major A (leading dimension
 * lda), Z and out with bp columns (leading dimension bp): the transposed
 * register tiles, 6 (or 12) columns of A at a time.  The symmetric product
 * below keeps its own copy of these loops: calling this from it changed
 * GCC's code for the whole strip, and the 8-column product at N=8000 took
 * 12.5-12.8 ms against 11.9-12.2 ms. */
FK_INLINE void fk_mm_tn_body(const double *A, ptrdiff_t lda, ptrdiff_t R, ptrdiff_t c,
                             const double *Z, ptrdiff_t bp, double *out, int wide)
{
    const ptrdiff_t ldz = bp;
    ptrdiff_t c8 = wide ? bp / 8 * 8 : 0;
    int rows4 = wide ? 12 : FK_MM_ROWS;
    for (ptrdiff_t j = 0; j < c && c8 > 0; j += FK_MM_ROWS) {
        int nj = c - j < FK_MM_ROWS ? (int)(c - j) : FK_MM_ROWS;
        for (ptrdiff_t q = 0; q < c8; q += 8)
            fk_mm_micro_t(A + j, lda, nj, R, Z + q, ldz, 2, out + j * bp + q, bp);
    }
    for (ptrdiff_t j = 0; j < c && c8 < bp; j += rows4) {
        int nj = c - j < rows4 ? (int)(c - j) : rows4;
        for (ptrdiff_t q = c8; q < bp; q += 4) {
            if (wide)
                fk_mm_micro_t12(A + j, lda, nj, R, Z + q, ldz, out + j * bp + q, bp);
            else
                fk_mm_micro_t(A + j, lda, nj, R, Z + q, ldz, 1, out + j * bp + q, bp);
        }
    }
}

/* out[i0:i1] = K[i0:i1, i0:i1] V[i0:i1] for the strip's own diagonal block,
 * read from its upper triangle, summed plainly (out zeroed here). */
FK_INLINE void fk_mm_sym_diag(const double *K, ptrdiff_t ldk, ptrdiff_t i0, ptrdiff_t i1,
                              const double *V, ptrdiff_t bp, double *out)
{
    memset(out + i0 * bp, 0, (size_t)((i1 - i0) * bp) * sizeof(double));
    for (ptrdiff_t i = i0; i < i1; i++)
        for (ptrdiff_t j = i0; j < i1; j++) {
            double x = j >= i ? K[i * ldk + j] : K[j * ldk + i];
            for (ptrdiff_t c = 0; c < bp; c++)
                out[i * bp + c] += x * V[j * bp + c];
        }
}

/* One strip, rows [i0, i0 + R), of out = K V for a symmetric n x n K of
 * which only the upper triangle (j >= i) is read: half the memory traffic
 * of fk_mm_rows_body for the same arithmetic.  The strip's own R x R block
 * is summed plainly into out[i0:i0+R] (zeroed here).  Right of it, each chunk of FK_MM_JB columns
 * gives out[i0:i0+R] += K_chunk V_chunk (the row tiles) and then, while the
 * chunk is still in cache, T[chunk] += K_chunk^T V[i0:i0+R]: what the lower
 * triangle would add to the rows below the strip.  Every sum runs in a
 * fixed order. */
FK_INLINE void fk_mm_sym_strip_body(const double *K, ptrdiff_t ldk, ptrdiff_t i0, ptrdiff_t R,
                                    ptrdiff_t n, const double *V, ptrdiff_t bp, double *out,
                                    double *T, int wide)
{
    ptrdiff_t c8 = wide ? bp / 8 * 8 : 0;
    int rows4 = wide ? 12 : FK_MM_ROWS;
    ptrdiff_t i1 = i0 + R;
    const double *strip = K + i0 * ldk;
    fk_mm_sym_diag(K, ldk, i0, i1, V, bp, out);
    for (ptrdiff_t jc = i1; jc < n; jc += FK_MM_JB) {
        ptrdiff_t jb = n - jc < FK_MM_JB ? n - jc : FK_MM_JB;
        fk_mm_row_tiles(K, ldk, i0, i1, jc, jb, V, bp, out, wide);
        for (ptrdiff_t j = jc; j < jc + jb && c8 > 0; j += FK_MM_ROWS) {
            int nj = jc + jb - j < FK_MM_ROWS ? (int)(jc + jb - j) : FK_MM_ROWS;
            for (ptrdiff_t c = 0; c < c8; c += 8)
                fk_mm_micro_t(strip + j, ldk, nj, R, V + i0 * bp + c, bp, 2, T + j * bp + c, bp);
        }
        for (ptrdiff_t j = jc; j < jc + jb && c8 < bp; j += rows4) {
            int nj = jc + jb - j < rows4 ? (int)(jc + jb - j) : rows4;
            for (ptrdiff_t c = c8; c < bp; c += 4) {
                if (wide)
                    fk_mm_micro_t12(strip + j, ldk, nj, R, V + i0 * bp + c, bp, T + j * bp + c,
                                    bp);
                else
                    fk_mm_micro_t(strip + j, ldk, nj, R, V + i0 * bp + c, bp, 1,
                                  T + j * bp + c, bp);
            }
        }
    }
}

#if defined(__GNUC__) && defined(__x86_64__)
#define FK_MM_HAVE_FAST 1
__attribute__((target("avx2,fma"))) static void
fk_mm_rows_fast(const double *K, ptrdiff_t ldk, ptrdiff_t r0, ptrdiff_t r1, ptrdiff_t n,
                const double *V, ptrdiff_t bp, double *out)
{
    fk_mm_rows_body(K, ldk, r0, r1, n, V, bp, out, 1);
}
#endif

static void fk_mm_rows_base(const double *K, ptrdiff_t ldk, ptrdiff_t r0, ptrdiff_t r1,
                            ptrdiff_t n, const double *V, ptrdiff_t bp, double *out)
{
    fk_mm_rows_body(K, ldk, r0, r1, n, V, bp, out, 0);
}

#ifdef FK_MM_HAVE_FAST
__attribute__((target("avx2,fma"))) static void
fk_mm_sym_strip_fast(const double *K, ptrdiff_t ldk, ptrdiff_t i0, ptrdiff_t R, ptrdiff_t n,
                     const double *V, ptrdiff_t bp, double *out, double *T)
{
    fk_mm_sym_strip_body(K, ldk, i0, R, n, V, bp, out, T, 1);
}
#endif

static void fk_mm_sym_strip_base(const double *K, ptrdiff_t ldk, ptrdiff_t i0, ptrdiff_t R,
                                 ptrdiff_t n, const double *V, ptrdiff_t bp, double *out,
                                 double *T)
{
    fk_mm_sym_strip_body(K, ldk, i0, R, n, V, bp, out, T, 0);
}

#ifdef FK_MM_HAVE_FAST
/* The symmetric strip with AVX-512: 8 columns of V in one register of 8
 * doubles, so each element of K takes one fused multiply-add where AVX2
 * takes two of 4, and the row and column tiles are 12 wide (12 sums in
 * flight).  A group of 4 columns left over takes AVX2's 12 x 1 tiles.
 * Every output is summed in the same order as in the AVX2 body (over the
 * columns of K in order, chunk by chunk; over the strip's rows in order for
 * the transposed part), so both give the same bits. */
typedef double fk_mm_z __attribute__((vector_size(64)));

FK_MM_DEFINE_TILES12(fk_mm_z, fk_mm_micro_z, fk_mm_micro_tz)

__attribute__((target("avx512f,avx2,fma"))) static void
fk_mm_sym_strip_wide(const double *K, ptrdiff_t ldk, ptrdiff_t i0, ptrdiff_t R, ptrdiff_t n,
                     const double *V, ptrdiff_t bp, double *out, double *T)
{
    ptrdiff_t c8 = bp / 8 * 8;
    ptrdiff_t i1 = i0 + R;
    const double *strip = K + i0 * ldk;
    const double *k[12];
    fk_mm_sym_diag(K, ldk, i0, i1, V, bp, out);
    for (ptrdiff_t jc = i1; jc < n; jc += FK_MM_JB) {
        ptrdiff_t jb = n - jc < FK_MM_JB ? n - jc : FK_MM_JB;
        for (ptrdiff_t i = i0; i < i1; i += 12) {
            int nr = i1 - i < 12 ? (int)(i1 - i) : 12;
            fk_mm_row_ptrs(K, ldk, i, nr, jc, 12, k);
            for (ptrdiff_t c = 0; c < c8; c += 8)
                fk_mm_micro_z(k, nr, V + jc * bp + c, bp, jb, out + i * bp + c, bp);
            for (ptrdiff_t c = c8; c < bp; c += 4)
                fk_mm_micro12(k, nr, V + jc * bp + c, bp, jb, out + i * bp + c, bp);
        }
        for (ptrdiff_t j = jc; j < jc + jb; j += 12) {
            int nj = jc + jb - j < 12 ? (int)(jc + jb - j) : 12;
            for (ptrdiff_t c = 0; c < c8; c += 8)
                fk_mm_micro_tz(strip + j, ldk, nj, R, V + i0 * bp + c, bp, T + j * bp + c, bp);
            for (ptrdiff_t c = c8; c < bp; c += 4)
                fk_mm_micro_t12(strip + j, ldk, nj, R, V + i0 * bp + c, bp, T + j * bp + c, bp);
        }
    }
}
#endif

/* What this CPU runs: 2 the AVX-512 symmetric strip (and AVX2+FMA
 * elsewhere), 1 the AVX2+FMA bodies, 0 the portable ones; call once, outside
 * parallel regions.  __builtin_cpu_supports also checks that the OS saves
 * the wide registers. */
static int fk_mm_fast_level(void)
{
#ifdef FK_MM_HAVE_FAST
    __builtin_cpu_init();
    if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")))
        return 0;
    return __builtin_cpu_supports("avx512f") ? 2 : 1;
#else
    return 0;
#endif
}

/* 1 if this CPU runs the AVX2+FMA body; call once, outside parallel regions. */
static int fk_mm_fast_available(void)
{
    return fk_mm_fast_level() > 0;
}

static void fk_mm_rows(const double *K, ptrdiff_t ldk, ptrdiff_t r0, ptrdiff_t r1, ptrdiff_t n,
                       const double *V, ptrdiff_t bp, double *out, int fast)
{
#ifdef FK_MM_HAVE_FAST
    if (fast) {
        fk_mm_rows_fast(K, ldk, r0, r1, n, V, bp, out);
        return;
    }
#endif
    (void)fast;
    fk_mm_rows_base(K, ldk, r0, r1, n, V, bp, out);
}

/* fast: a level of fk_mm_fast_level (2: AVX-512, 1: AVX2+FMA, 0: portable). */
static void fk_mm_sym_strip(const double *K, ptrdiff_t ldk, ptrdiff_t i0, ptrdiff_t R,
                            ptrdiff_t n, const double *V, ptrdiff_t bp, double *out, double *T,
                            int fast)
{
#ifdef FK_MM_HAVE_FAST
    if (fast >= 2) {
        fk_mm_sym_strip_wide(K, ldk, i0, R, n, V, bp, out, T);
        return;
    }
    if (fast) {
        fk_mm_sym_strip_fast(K, ldk, i0, R, n, V, bp, out, T);
        return;
    }
#endif
    (void)fast;
    fk_mm_sym_strip_base(K, ldk, i0, R, n, V, bp, out, T);
}

/* The block eigensolver's tall products on one block of R rows: out (c x bp)
 * += A^T Z, and out (R x bp) = A B (add: out += A B); A row-major with
 * leading dimension lda, Z, B (c x bp) and out contiguous. */
#ifdef FK_MM_HAVE_FAST
__attribute__((target("avx2,fma"))) static void
fk_mm_tn_fast(const double *A, ptrdiff_t lda, ptrdiff_t R, ptrdiff_t c, const double *Z,
              ptrdiff_t bp, double *out)
{
    fk_mm_tn_body(A, lda, R, c, Z, bp, out, 1);
}

__attribute__((target("avx2,fma"))) static void
fk_mm_nn_fast(const double *A, ptrdiff_t lda, ptrdiff_t R, ptrdiff_t c, const double *B,
              ptrdiff_t bp, double *out)
{
    fk_mm_row_tiles(A, lda, 0, R, 0, c, B, bp, out, 1);
}
#endif

static void fk_mm_tn(const double *A, ptrdiff_t lda, ptrdiff_t R, ptrdiff_t c, const double *Z,
                     ptrdiff_t bp, double *out, int fast)
{
#ifdef FK_MM_HAVE_FAST
    if (fast) {
        fk_mm_tn_fast(A, lda, R, c, Z, bp, out);
        return;
    }
#endif
    (void)fast;
    fk_mm_tn_body(A, lda, R, c, Z, bp, out, 0);
}

static void fk_mm_nn(const double *A, ptrdiff_t lda, ptrdiff_t R, ptrdiff_t c, const double *B,
                     ptrdiff_t bp, double *out, int add, int fast)
{
    if (!add)
        memset(out, 0, (size_t)(R * bp) * sizeof(double));
#ifdef FK_MM_HAVE_FAST
    if (fast) {
        fk_mm_nn_fast(A, lda, R, c, B, bp, out);
        return;
    }
#endif
    (void)fast;
    fk_mm_row_tiles(A, lda, 0, R, 0, c, B, bp, out, 0);
}

#endif
