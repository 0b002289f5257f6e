/* Vectorisable element-wise kernel maps for fastkern.
 *
 * Why this file exists: the exp in the RBF/Laplacian/exponential maps is the hot
 * loop for narrow data, and glibc's scalar exp cannot be vectorised without
 * -ffast-math.  The exp below is plain arithmetic (Cody-Waite range reduction,
 * a Taylor polynomial, exponent bits built with integer adds and left shifts
 * only), so GCC vectorises the loops that call it at -O3 while keeping IEEE
 * semantics.  Accuracy: within 2 ulp of libm over the whole double range,
 * including subnormal results (the 2^k scale is applied in two halves).
 *
 * Each function is compiled several times (target_clones) and the best clone
 * for the running CPU is chosen by the dynamic loader, so the portable build
 * still uses AVX2 with FMA, or AVX-512, when the machine has them.
 */
#ifndef FK_MAPS_H
#define FK_MAPS_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <stddef.h>

#include "fk_portable.h"

/* target_clones resolves the clone through an ifunc, which only glibc's loader
 * implements (musl's rejects the IRELATIVE relocation at load time), so the
 * test is glibc, not Linux.  __GLIBC__ comes from the headers included above. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__)
/* "avx2" alone leaves out FMA, which is a feature of its own: the AVX2 machines
 * without AVX-512 (AMD Zen, most laptops) ran the maps without fused
 * multiply-adds.  x86-64-v3 is AVX2 with FMA; GCC 12 takes it as a clone (an
 * older GCC keeps the plain AVX2 clone).  On a Zen 3 EPYC the v3 clone made
 * the RBF and Laplacian Grams 1.29x faster on one thread. */
#if __GNUC__ >= 12
#define FK_CLONES __attribute__((target_clones("avx512f", "arch=x86-64-v3", "avx2", "default")))
#else
#define FK_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#else
#define FK_CLONES
#endif

/* Longest row segment a map is called on; Cython tiles never exceed it. */
#define FK_MAX_SEG 1024

FK_INLINE double fk_exp1_d(double x)
{
    /* 1.5 * 2^52: adding it rounds x*log2(e) to an integer held in the low bits. */
    const double magic = 6755399441055744.0;
    x = x < -746.0 ? -746.0 : x;
    x = x > 710.0 ? 710.0 : x;
    double t = x * 1.4426950408889634 + magic;
    double kf = t - magic;
    double r = (x - kf * 6.93147180369123816490e-01) - kf * 1.90821492927058770002e-10;
    /* Taylor series to degree 13: truncation error < 5e-18 for |r| <= ln2/2. */
    double p = 1.6059043836821613e-10;
    p = p * r + 2.08767569878681e-09;
    p = p * r + 2.505210838544172e-08;
    p = p * r + 2.755731922398589e-07;
    p = p * r + 2.7557319223985893e-06;
    p = p * r + 2.48015873015873e-05;
    p = p * r + 1.984126984126984e-04;
    p = p * r + 1.388888888888889e-03;
    p = p * r + 8.333333333333333e-03;
    p = p * r + 4.166666666666666e-02;
    p = p * r + 1.666666666666667e-01;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    uint64_t tb, mb;
    memcpy(&tb, &t, 8);
    memcpy(&mb, &magic, 8);
    int64_t k = (int64_t)(tb - mb);              /* k in [-1077, 1025] */
    /* floor(k/2) with a logical shift of a non-negative value (no 64-bit
       arithmetic shift before AVX-512). */
    int64_t k1 = (int64_t)(((uint64_t)(k + 2048)) >> 1) - 1024;
    int64_t k2 = k - k1;
    uint64_t b1 = (uint64_t)(k1 + 1023) << 52, b2 = (uint64_t)(k2 + 1023) << 52;
    double s1, s2;
    memcpy(&s1, &b1, 8);
    memcpy(&s2, &b2, 8);
    return p * s1 * s2;
}

FK_INLINE float fk_exp1_f(float x)
{
    const float magic = 12582912.0f;             /* 1.5 * 2^23 */
    x = x < -104.0f ? -104.0f : x;
    x = x > 89.0f ? 89.0f : x;
    float t = x * 1.44269504f + magic;
    float kf = t - magic;
    float r = (x - kf * 0.693359375f) - kf * -2.12194440e-4f;
    /* Taylor series to degree 7: truncation error < 2e-8 for |r| <= ln2/2. */
    float p = 1.98412698e-4f;
    p = p * r + 1.38888889e-3f;
    p = p * r + 8.33333333e-3f;
    p = p * r + 4.16666667e-2f;
    p = p * r + 1.66666667e-1f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    uint32_t tb, mb;
    memcpy(&tb, &t, 4);
    memcpy(&mb, &magic, 4);
    int32_t k = (int32_t)(tb - mb);
    int32_t k1 = (int32_t)(((uint32_t)(k + 256)) >> 1) - 128;
    int32_t k2 = k - k1;
    uint32_t b1 = (uint32_t)(k1 + 127) << 23, b2 = (uint32_t)(k2 + 127) << 23;
    float s1, s2;
    memcpy(&s1, &b1, 4);
    memcpy(&s2, &b2, 4);
    return p * s1 * s2;
}

/* Distance rows in blocks of two 64-byte vectors of columns, accumulated in
 * registers across all features (the plain loop reloads and stores out[j] for
 * every feature; this is about 1.6x faster at d = 16).  GCC/clang vector
 * extensions are lowered to whatever width each target clone has.
 *
 * Accuracy: features are summed in chunks of FK_KCHUNK_S, each chunk in a
 * fresh accumulator of type T, and the chunk sums are added in double.  The
 * relative error of a sequential sum of d positive terms grows with d; chunking
 * bounds it by the chunk length (RBF, d = 1024, random rows: error 7.9e-16 ->
 * 1.3e-16 in float64, 4.9e-7 -> 2.4e-8 in float32).  With d <= FK_KCHUNK_S
 * there is one chunk and no conversion (float64: the whole default RBF direct
 * range); measured cost at d = 64, 1 thread on 2 cores: Laplacian float32 +6%,
 * float64 +3%.  Returns the first column not done. */
#define FK_KCHUNK_d 32
/* 32-byte vectors: native on AVX2 and AVX-512.  64-byte generic vectors are
 * native only with AVX-512; on AVX2 GCC 12 lowered them through the stack
 * (x[k] broadcast by stores and reloads, accumulators in memory), which made
 * the direct path 4x slower than the BLAS path at d = 16 on an AMD EPYC. */
#define FK_VBYTES 32
#define FK_KCHUNK_f 16
#if defined(__GNUC__)
#define FK_DEFINE_BLOCKS(T, S, IT)                                                  \
typedef T fk_v_##S __attribute__((vector_size(FK_VBYTES)));                                \
typedef IT fk_vi_##S __attribute__((vector_size(FK_VBYTES)));                              \
typedef double fk_vw_##S __attribute__((vector_size(FK_VBYTES / sizeof(T) * 8)));          \
enum { FK_LANES_##S = FK_VBYTES / sizeof(T) };                                             \
FK_INLINE void                                   \
fk_chunk_##S(const T *FK_RESTRICT x, const T *FK_RESTRICT yt, ptrdiff_t ld, ptrdiff_t k0, \
             ptrdiff_t k1, ptrdiff_t j, int l1, fk_v_##S *a0, fk_v_##S *a1)         \
{                                                                                   \
    const fk_vi_##S absmask = ~((fk_vi_##S){0} + ((IT)1 << (8 * sizeof(T) - 1)));   \
    fk_v_##S s0 = {0}, s1 = {0};                                                    \
    for (ptrdiff_t k = k0; k < k1; k++) {                                           \
        fk_v_##S y0, y1;                                                            \
        memcpy(&y0, yt + k * ld + j, FK_VBYTES);                                           \
        memcpy(&y1, yt + k * ld + j + FK_LANES_##S, FK_VBYTES);                            \
        fk_v_##S d0 = x[k] - y0, d1 = x[k] - y1;                                    \
        if (l1) {                                                                   \
            s0 += (fk_v_##S)((fk_vi_##S)d0 & absmask);                              \
            s1 += (fk_v_##S)((fk_vi_##S)d1 & absmask);                              \
        } else {                                                                    \
            s0 += d0 * d0;                                                          \
            s1 += d1 * d1;                                                          \
        }                                                                           \
    }                                                                               \
    *a0 = s0;                                                                       \
    *a1 = s1;                                                                       \
}                                                                                   \
FK_INLINE ptrdiff_t                              \
fk_blocks_##S(const T *FK_RESTRICT x, const T *FK_RESTRICT yt, ptrdiff_t ld, ptrdiff_t d, \
              ptrdiff_t n, T *FK_RESTRICT out, int l1)                                 \
{                                                                                   \
    ptrdiff_t j = 0;                                                                \
    for (; j + 2 * FK_LANES_##S <= n; j += 2 * FK_LANES_##S) {                      \
        fk_v_##S a0, a1;                                                            \
        fk_chunk_##S(x, yt, ld, 0, d < FK_KCHUNK_##S ? d : FK_KCHUNK_##S, j, l1,    \
                     &a0, &a1);                                                     \
        if (d > FK_KCHUNK_##S) {                                                    \
            fk_vw_##S w0 = __builtin_convertvector(a0, fk_vw_##S);                  \
            fk_vw_##S w1 = __builtin_convertvector(a1, fk_vw_##S);                  \
            for (ptrdiff_t k0 = FK_KCHUNK_##S; k0 < d; k0 += FK_KCHUNK_##S) {       \
                ptrdiff_t k1 = k0 + FK_KCHUNK_##S < d ? k0 + FK_KCHUNK_##S : d;     \
                fk_chunk_##S(x, yt, ld, k0, k1, j, l1, &a0, &a1);                   \
                w0 += __builtin_convertvector(a0, fk_vw_##S);                       \
                w1 += __builtin_convertvector(a1, fk_vw_##S);                       \
            }                                                                       \
            a0 = __builtin_convertvector(w0, fk_v_##S);                             \
            a1 = __builtin_convertvector(w1, fk_v_##S);                             \
        }                                                                           \
        memcpy(out + j, &a0, FK_VBYTES);                                                   \
        memcpy(out + j + FK_LANES_##S, &a1, FK_VBYTES);                                    \
    }                                                                               \
    return j;                                                                       \
}
FK_DEFINE_BLOCKS(double, d, int64_t)
FK_DEFINE_BLOCKS(float, f, int32_t)
#define FK_SQDIST_BLOCKS_d(x, yt, ld, d, n, out) fk_blocks_d(x, yt, ld, d, n, out, 0)
#define FK_SQDIST_BLOCKS_f(x, yt, ld, d, n, out) fk_blocks_f(x, yt, ld, d, n, out, 0)
#define FK_L1DIST_BLOCKS_d(x, yt, ld, d, n, out) fk_blocks_d(x, yt, ld, d, n, out, 1)
#define FK_L1DIST_BLOCKS_f(x, yt, ld, d, n, out) fk_blocks_f(x, yt, ld, d, n, out, 1)
#else
#define FK_SQDIST_BLOCKS_d(x, yt, ld, d, n, out) ((ptrdiff_t)0)
#define FK_SQDIST_BLOCKS_f(x, yt, ld, d, n, out) ((ptrdiff_t)0)
#define FK_L1DIST_BLOCKS_d(x, yt, ld, d, n, out) ((ptrdiff_t)0)
#define FK_L1DIST_BLOCKS_f(x, yt, ld, d, n, out) ((ptrdiff_t)0)
#endif

/* Squared distances below this fraction of |x|^2 + |y|^2 are recomputed
 * directly by the BLAS RBF path (see the module docstring of _gram.pyx). */
#define FK_RECOMPUTE (1.0 / 16)

/* One definition per precision T (double/float), suffix S (d/f). */
#define FK_DEFINE_MAPS(T, S)                                                        \
/* x[j] = exp(scale * x[j]) */                                                      \
FK_CLONES static void fk_vexp_##S(T *FK_RESTRICT x, ptrdiff_t n, T scale)             \
{                                                                                   \
    for (ptrdiff_t j = 0; j < n; j++) x[j] = fk_exp1_##S(scale * x[j]);             \
}                                                                                   \
                                                                                    \
/* RBF from float64 inner products g of centred rows:                               \
   out[j] = exp(-gamma * max(|x|^2 + |y_j|^2 - 2 g_j, 0)), the exp in double and    \
   rounded once to T.  Where the squared distance is below FK_RECOMPUTE times       \
   |x|^2 + |y_j|^2 the expansion has cancelled most of its digits: out[j] is        \
   set to -1 instead, for the caller to recompute directly.  out may be g           \
   itself when T is double (no restrict).  Returns whether any entry was set to     \
   -1, so that the caller scans only those rows (the flag is found by a second      \
   loop: inside the first, GCC does not vectorise the reduction). */                \
FK_CLONES static int fk_rbf_dot_##S(const double *g, T *out, const double *FK_RESTRICT yn, \
                                    double xn, double gamma, ptrdiff_t n)           \
{                                                                                   \
    for (ptrdiff_t j = 0; j < n; j++) {                                             \
        double s = xn + yn[j];                                                      \
        double d2 = s - 2.0 * g[j];                                                 \
        T k = (T)fk_exp1_d(-gamma * (d2 > 0.0 ? d2 : 0.0));                         \
        out[j] = d2 < FK_RECOMPUTE * s ? (T)-1 : k;                                 \
    }                                                                               \
    int flagged = 0;                                                                \
    for (ptrdiff_t j = 0; j < n; j++) flagged |= out[j] < 0;                        \
    return flagged;                                                                 \
}                                                                                   \
                                                                                    \
/* out[j] = sum_k (x[k] - yt[k*ld + j])^2 ; yt is Y transposed (features x rows). */ \
FK_CLONES static void fk_sqdist_row_##S(const T *FK_RESTRICT x, const T *FK_RESTRICT yt,  \
                                        ptrdiff_t ld, ptrdiff_t d, ptrdiff_t n,     \
                                        T *FK_RESTRICT out)                            \
{                                                                                   \
    ptrdiff_t j = FK_SQDIST_BLOCKS_##S(x, yt, ld, d, n, out);                       \
    /* The columns left over, in the same chunks as the blocks. */                  \
    for (; j < n; j++) {                                                            \
        double a = 0;                                                               \
        for (ptrdiff_t k0 = 0; k0 < d; k0 += FK_KCHUNK_##S) {                       \
            ptrdiff_t k1 = k0 + FK_KCHUNK_##S < d ? k0 + FK_KCHUNK_##S : d;         \
            T c = 0;                                                                \
            for (ptrdiff_t k = k0; k < k1; k++) { T df = x[k] - yt[k * ld + j]; c += df * df; } \
            a += c;                                                                 \
        }                                                                           \
        out[j] = (T)a;                                                              \
    }                                                                               \
}                                                                                   \
                                                                                    \
/* out[j] = sum_k |x[k] - yt[k*ld + j]| */                                          \
FK_CLONES static void fk_l1dist_row_##S(const T *FK_RESTRICT x, const T *FK_RESTRICT yt,  \
                                        ptrdiff_t ld, ptrdiff_t d, ptrdiff_t n,     \
                                        T *FK_RESTRICT out)                            \
{                                                                                   \
    ptrdiff_t j = FK_L1DIST_BLOCKS_##S(x, yt, ld, d, n, out);                       \
    for (; j < n; j++) {                                                            \
        double a = 0;                                                               \
        for (ptrdiff_t k0 = 0; k0 < d; k0 += FK_KCHUNK_##S) {                       \
            ptrdiff_t k1 = k0 + FK_KCHUNK_##S < d ? k0 + FK_KCHUNK_##S : d;         \
            T c = 0;                                                                \
            for (ptrdiff_t k = k0; k < k1; k++) {                                   \
                T df = x[k] - yt[k * ld + j];                                       \
                c += df < 0 ? -df : df;                                             \
            }                                                                       \
            a += c;                                                                 \
        }                                                                           \
        out[j] = (T)a;                                                              \
    }                                                                               \
}                                                                                   \
                                                                                    \
/* g[j] = (gamma g[j] + coef0)^degree for an integer degree >= 1, by squaring     \
   (n <= FK_MAX_SEG). */                                                            \
FK_CLONES static void fk_ipow_##S(T *FK_RESTRICT g, ptrdiff_t n, T gamma, T coef0,     \
                                  long degree)                                      \
{                                                                                   \
    T base[FK_MAX_SEG];                                                             \
    for (ptrdiff_t j = 0; j < n; j++) { base[j] = gamma * g[j] + coef0; g[j] = 1; } \
    while (degree) {                                                                \
        if (degree & 1) for (ptrdiff_t j = 0; j < n; j++) g[j] *= base[j];          \
        degree >>= 1;                                                               \
        if (degree) for (ptrdiff_t j = 0; j < n; j++) base[j] *= base[j];           \
    }                                                                               \
}                                                                                   \
                                                                                    \
/* g[j] = gamma g[j] + coef0, the affine part of the polynomial/sigmoid maps */   \
FK_CLONES static void fk_affine_##S(T *FK_RESTRICT g, ptrdiff_t n, T gamma, T coef0)  \
{                                                                                   \
    for (ptrdiff_t j = 0; j < n; j++) g[j] = gamma * g[j] + coef0;                  \
}

/* g[i*ldo + j] = sum_k xc[i*d + k] yct[k*ld + j] for i < bi, j < bj: the tile of
 * inner products of the RBF path's centred rows, Y's transposed (features x
 * rows) so that columns are contiguous.  For narrow data a dgemm spends more
 * on packing its operands than on its d-long sums; here 4 rows by 2 vectors
 * of columns accumulate in registers (RBF at d = 16, 128 x 128 tiles, one
 * core: inner products and map 41 ms against the fused distance loop's 48).
 * Every entry sums its d products in the order k = 0, 1, ..., in the tiles
 * and at the edges alike. */
#if defined(__GNUC__)
FK_CLONES static void fk_dot_tile_d(const double *FK_RESTRICT xc, ptrdiff_t d,
                                    const double *FK_RESTRICT yct, ptrdiff_t ld,
                                    ptrdiff_t bi, ptrdiff_t bj, double *FK_RESTRICT g,
                                    ptrdiff_t ldo)
{
    ptrdiff_t i = 0;
    for (; i + 4 <= bi; i += 4) {
        const double *x0 = xc + i * d, *x1 = x0 + d, *x2 = x1 + d, *x3 = x2 + d;
        ptrdiff_t j = 0;
        for (; j + 2 * FK_LANES_d <= bj; j += 2 * FK_LANES_d) {
            fk_v_d a00 = {0}, a01 = {0}, a10 = {0}, a11 = {0};
            fk_v_d a20 = {0}, a21 = {0}, a30 = {0}, a31 = {0};
            for (ptrdiff_t k = 0; k < d; k++) {
                fk_v_d y0, y1;
                memcpy(&y0, yct + k * ld + j, FK_VBYTES);
                memcpy(&y1, yct + k * ld + j + FK_LANES_d, FK_VBYTES);
                a00 += x0[k] * y0; a01 += x0[k] * y1;
                a10 += x1[k] * y0; a11 += x1[k] * y1;
                a20 += x2[k] * y0; a21 += x2[k] * y1;
                a30 += x3[k] * y0; a31 += x3[k] * y1;
            }
            double *o = g + i * ldo + j;
            memcpy(o, &a00, FK_VBYTES); memcpy(o + FK_LANES_d, &a01, FK_VBYTES);
            o += ldo;
            memcpy(o, &a10, FK_VBYTES); memcpy(o + FK_LANES_d, &a11, FK_VBYTES);
            o += ldo;
            memcpy(o, &a20, FK_VBYTES); memcpy(o + FK_LANES_d, &a21, FK_VBYTES);
            o += ldo;
            memcpy(o, &a30, FK_VBYTES); memcpy(o + FK_LANES_d, &a31, FK_VBYTES);
        }
        for (; j < bj; j++) {
            double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            for (ptrdiff_t k = 0; k < d; k++) {
                double y = yct[k * ld + j];
                s0 += x0[k] * y; s1 += x1[k] * y; s2 += x2[k] * y; s3 += x3[k] * y;
            }
            g[i * ldo + j] = s0;
            g[(i + 1) * ldo + j] = s1;
            g[(i + 2) * ldo + j] = s2;
            g[(i + 3) * ldo + j] = s3;
        }
    }
    for (; i < bi; i++)
        for (ptrdiff_t j = 0; j < bj; j++) {
            double s = 0;
            for (ptrdiff_t k = 0; k < d; k++) s += xc[i * d + k] * yct[k * ld + j];
            g[i * ldo + j] = s;
        }
}
#else
static void fk_dot_tile_d(const double *xc, ptrdiff_t d, const double *yct, ptrdiff_t ld,
                          ptrdiff_t bi, ptrdiff_t bj, double *g, ptrdiff_t ldo)
{
    for (ptrdiff_t i = 0; i < bi; i++)
        for (ptrdiff_t j = 0; j < bj; j++) {
            double s = 0;
            for (ptrdiff_t k = 0; k < d; k++) s += xc[i * d + k] * yct[k * ld + j];
            g[i * ldo + j] = s;
        }
}
#endif

/* fk_dot_tile_d with AVX-512 (fk_dot_tile; chosen once by fk_dot_level): 4
 * rows by 16 columns in registers of 8 doubles, twice the columns of a
 * 32-byte tile per multiply-add.  Rows and columns past the last whole tile
 * are left to fk_dot_tile_d; each entry is the same ordered sum either way. */
#if defined(__GNUC__) && defined(__x86_64__)
typedef double fk_dot_z __attribute__((vector_size(64)));

__attribute__((target("avx512f,fma"))) static void
fk_dot_tile_wide(const double *FK_RESTRICT xc, ptrdiff_t d, const double *FK_RESTRICT yct,
                 ptrdiff_t ld, ptrdiff_t bi, ptrdiff_t bj, double *FK_RESTRICT g, ptrdiff_t ldo)
{
    ptrdiff_t i4 = bi / 4 * 4, j16 = bj / 16 * 16;
    for (ptrdiff_t i = 0; i < i4; i += 4) {
        const double *x0 = xc + i * d, *x1 = x0 + d, *x2 = x1 + d, *x3 = x2 + d;
        for (ptrdiff_t j = 0; j < j16; j += 16) {
            fk_dot_z a00 = {0}, a01 = {0}, a10 = {0}, a11 = {0};
            fk_dot_z a20 = {0}, a21 = {0}, a30 = {0}, a31 = {0};
            for (ptrdiff_t k = 0; k < d; k++) {
                fk_dot_z y0, y1;
                memcpy(&y0, yct + k * ld + j, sizeof(fk_dot_z));
                memcpy(&y1, yct + k * ld + j + 8, sizeof(fk_dot_z));
                a00 += x0[k] * y0; a01 += x0[k] * y1;
                a10 += x1[k] * y0; a11 += x1[k] * y1;
                a20 += x2[k] * y0; a21 += x2[k] * y1;
                a30 += x3[k] * y0; a31 += x3[k] * y1;
            }
            double *o = g + i * ldo + j;
            memcpy(o, &a00, sizeof(fk_dot_z)); memcpy(o + 8, &a01, sizeof(fk_dot_z));
            o += ldo;
            memcpy(o, &a10, sizeof(fk_dot_z)); memcpy(o + 8, &a11, sizeof(fk_dot_z));
            o += ldo;
            memcpy(o, &a20, sizeof(fk_dot_z)); memcpy(o + 8, &a21, sizeof(fk_dot_z));
            o += ldo;
            memcpy(o, &a30, sizeof(fk_dot_z)); memcpy(o + 8, &a31, sizeof(fk_dot_z));
        }
    }
    if (j16 < bj)
        fk_dot_tile_d(xc, d, yct + j16, ld, i4, bj - j16, g + j16, ldo);
    if (i4 < bi)
        fk_dot_tile_d(xc + i4 * d, d, yct, ld, bi - i4, bj, g + i4 * ldo, ldo);
}

/* 1 if fk_dot_tile takes the AVX-512 tiles; call once, outside parallel regions. */
static int fk_dot_level(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
}

static void fk_dot_tile(const double *xc, ptrdiff_t d, const double *yct, ptrdiff_t ld,
                        ptrdiff_t bi, ptrdiff_t bj, double *g, ptrdiff_t ldo, int wide)
{
    if (wide)
        fk_dot_tile_wide(xc, d, yct, ld, bi, bj, g, ldo);
    else
        fk_dot_tile_d(xc, d, yct, ld, bi, bj, g, ldo);
}
#else
static int fk_dot_level(void)
{
    return 0;
}

static void fk_dot_tile(const double *xc, ptrdiff_t d, const double *yct, ptrdiff_t ld,
                        ptrdiff_t bi, ptrdiff_t bj, double *g, ptrdiff_t ldo, int wide)
{
    (void)wide;
    fk_dot_tile_d(xc, d, yct, ld, bi, bj, g, ldo);
}
#endif

FK_DEFINE_MAPS(double, d)
FK_DEFINE_MAPS(float, f)

/* Whether any of x[0:n] is NaN or infinite (all exponent bits set), for the
 * input checks: integer arithmetic on the bits vectorises, where a float test
 * or sum would need -ffast-math or raise numpy's overflow warnings.
 * (~b & e) - 1 has its top bit set exactly when ~b & e is 0 (it is below
 * the top bit otherwise); the flags are OR-ed over blocks of 64 values and
 * the scan stops at the first block with one.  One definition per precision
 * T, suffix S, unsigned integer U of T's width and exponent mask E. */
#define FK_DEFINE_NONFINITE(T, S, U, E)                                             \
FK_CLONES static int fk_any_nonfinite_##S(const T *x, ptrdiff_t n)                  \
{                                                                                   \
    const U e = (E);                                                                \
    for (ptrdiff_t j0 = 0; j0 < n; j0 += 64) {                                      \
        ptrdiff_t m = n - j0 < 64 ? n - j0 : 64;                                    \
        U bad = 0;                                                                  \
        for (ptrdiff_t j = 0; j < m; j++) {                                         \
            U b;                                                                    \
            memcpy(&b, x + j0 + j, sizeof b);                                       \
            bad |= ((~b & e) - 1) >> (8 * sizeof b - 1);                            \
        }                                                                           \
        if (bad) return 1;                                                          \
    }                                                                               \
    return 0;                                                                       \
}

FK_DEFINE_NONFINITE(double, d, uint64_t, 0x7ff0000000000000ULL)
FK_DEFINE_NONFINITE(float, f, uint32_t, 0x7f800000U)

/* The bits of the largest |x[j]| (an unsigned integer of T's width: for
 * IEEE values, the order of |x| is the order of its bits with the sign
 * cleared), in blocks of 64 values; the scan stops at the first block with
 * a NaN or an infinity (bits >= E, the exponent mask), so a non-finite
 * result means "some value is not finite".  The largest magnitude also says
 * whether the squares of the values leave T's range (fastkern.pairwise
 * rescales such data).  One definition per precision T, suffix S, unsigned
 * and signed integers U and I of T's width and exponent mask E. */
#define FK_DEFINE_MAX_ABS(T, S, U, I, E)                                            \
FK_CLONES static U fk_max_abs_bits_##S(const T *x, ptrdiff_t n)                     \
{                                                                                   \
    /* With the sign bit cleared the bits are a non-negative signed integer:  \
       AVX2 compares those (not unsigned 64-bit ones) in one instruction. */   \
    const I e = (I)(E), mag = (I)~((U)1 << (8 * sizeof(U) - 1));                    \
    I most = 0;                                                                     \
    for (ptrdiff_t j0 = 0; j0 < n; j0 += 64) {                                      \
        ptrdiff_t m = n - j0 < 64 ? n - j0 : 64;                                    \
        for (ptrdiff_t j = 0; j < m; j++) {                                         \
            I b;                                                                    \
            memcpy(&b, x + j0 + j, sizeof b);                                       \
            b &= mag;                                                               \
            most = b > most ? b : most;                                             \
        }                                                                           \
        if (most >= e) return (U)most;                                              \
    }                                                                               \
    return (U)most;                                                                 \
}

FK_DEFINE_MAX_ABS(double, d, uint64_t, int64_t, 0x7ff0000000000000ULL)
FK_DEFINE_MAX_ABS(float, f, uint32_t, int32_t, 0x7f800000U)

/* The compiled kernels, one line each: id, the registry's name of the compiled
 * map (fastkern/_registry.py), and the geometry the tile loops compute before
 * the map (FK_INNER: inner products; FK_SQDIST: squared Euclidean distances;
 * FK_L1: L1 distances; FK_FEATUREWISE: a sum or product of per-feature terms,
 * fastkern/_featurewise.pyx).  The enum below numbers them for every .pyx
 * (fastkern._gram.kind_codes() reads the names).  A kernel of FK_SQDIST
 * geometry needs nothing else in Cython: the dense, sparse and matrix-free
 * loops compute its squared distances as RBF's and call fk_sqdist_map (its
 * case below) on each row; RBF and Bessel are mapped in Cython instead
 * (RBF's fused exp, Bessel's scipy jv). */
#define FK_KINDS(X)                                      \
    X(LINEAR, "linear", FK_INNER)                        \
    X(POLY, "poly", FK_INNER)                            \
    X(RBF, "rbf", FK_SQDIST)                             \
    X(LAPLACIAN, "laplacian", FK_L1)                     \
    X(SIGMOID, "sigmoid", FK_INNER)                      \
    X(EXPONENTIAL, "exponential", FK_INNER)              \
    X(LAPLACIAN_L2, "laplacian_l2", FK_SQDIST)           \
    X(BESSEL, "bessel", FK_SQDIST)                       \
    X(RATIONAL_QUADRATIC, "rational_quadratic", FK_SQDIST) \
    X(ANOVA, "anova", FK_FEATUREWISE)                    \
    X(SPLINE, "spline", FK_FEATUREWISE)                  \
    X(ADDITIVE_CHI2, "additive_chi2", FK_FEATUREWISE)    \
    X(CHI2, "chi2", FK_FEATUREWISE)                      \
    X(HISTOGRAM_INTERSECTION, "histogram_intersection", FK_FEATUREWISE)

enum { FK_INNER = 0, FK_SQDIST = 1, FK_L1 = 2, FK_FEATUREWISE = 3 };
#define FK_KIND_ENUM(id, name, geometry) FK_K_##id,
enum fk_kind { FK_KINDS(FK_KIND_ENUM) FK_N_KINDS };
#undef FK_KIND_ENUM

/* The registry's name of a kind, or NULL outside 0 <= kind < FK_N_KINDS. */
static const char *fk_kind_name(int kind)
{
#define FK_KIND_NAME(id, name, geometry) name,
    static const char *const names[] = { FK_KINDS(FK_KIND_NAME) };
#undef FK_KIND_NAME
    return kind >= 0 && kind < FK_N_KINDS ? names[kind] : NULL;
}

static int fk_kind_geometry(int kind)
{
#define FK_KIND_GEOMETRY(id, name, geometry) geometry,
    static const int geometries[] = { FK_KINDS(FK_KIND_GEOMETRY) };
#undef FK_KIND_GEOMETRY
    return kind >= 0 && kind < FK_N_KINDS ? geometries[kind] : -1;
}

/* The one parameter array every compiled loop reads (p[FK_P_GAMMA], ...): a
 * slot per number, its name (the keys of a registry entry's compiled_args)
 * and the value a kernel that does not set it gets.  A kernel with a new
 * kind of number adds a slot here; no loop's signature changes. */
#define FK_PARAMS(X)                 \
    X(GAMMA, "gamma", 1.0)           \
    X(COEF0, "coef0", 0.0)           \
    X(DEGREE, "degree", 1.0)         \
    X(ORDER, "order", 0.0)           \
    X(LOG_GAMMA, "log_gamma", 0.0)

#define FK_PARAM_ENUM(id, name, value) FK_P_##id,
enum fk_param { FK_PARAMS(FK_PARAM_ENUM) FK_N_PARAMS };
#undef FK_PARAM_ENUM

/* A slot's name, or NULL outside 0 <= slot < FK_N_PARAMS. */
static const char *fk_param_name(int slot)
{
#define FK_PARAM_NAME(id, name, value) name,
    static const char *const names[] = { FK_PARAMS(FK_PARAM_NAME) };
#undef FK_PARAM_NAME
    return slot >= 0 && slot < FK_N_PARAMS ? names[slot] : NULL;
}

static double fk_param_default(int slot)
{
#define FK_PARAM_VALUE(id, name, value) value,
    static const double values[] = { FK_PARAMS(FK_PARAM_VALUE) };
#undef FK_PARAM_VALUE
    return slot >= 0 && slot < FK_N_PARAMS ? values[slot] : 0.0;
}

/* Squared distances -> kernel values in place, for the FK_SQDIST kernels that
 * are neither RBF nor Bessel.  p is the kernel's parameter array (FK_PARAMS);
 * each kernel's registry entry (compiled_args) says what its slots hold.  One switch per row: the loop of each case is tight and vectorisable
 * (float: the float32 direct path's distances; mapped in double where the
 * kernel needs it, rounded once). */
/* log(1 + gamma d2) of the rational quadratic kernel where gamma d2 is past
 * the double range (alpha tiny, the distance large: the kernel is near 1, not
 * 0) or gamma itself is (a length scale of 1e-200: then gamma is inf and
 * p[FK_P_LOG_GAMMA] holds log gamma). */
static double fk_rq_log1p(double d2, double gamma, const double *FK_RESTRICT p)
{
    double t = gamma * d2;
    if (t <= DBL_MAX)
        return log1p(t);
    if (d2 == 0.0)
        return 0.0;
    double lt = log(d2) + p[FK_P_LOG_GAMMA];
    /* Past e^37, 1 + t is t in double. */
    return lt > 37.0 ? lt : log1p(exp(lt));
}

static void fk_sqdist_map_d(double *FK_RESTRICT g, ptrdiff_t n, int kind,
                            const double *FK_RESTRICT p)
{
    const double gamma = p[FK_P_GAMMA], degree = p[FK_P_DEGREE];
    switch (kind) {
    case FK_K_LAPLACIAN_L2:
        for (ptrdiff_t j = 0; j < n; j++) g[j] = fk_exp1_d(-gamma * sqrt(g[j]));
        break;
    case FK_K_RATIONAL_QUADRATIC:
        /* (1 + gamma d2)^-alpha, gamma = 1 / (2 alpha l^2), alpha in degree. */
        for (ptrdiff_t j = 0; j < n; j++) g[j] = exp(-degree * fk_rq_log1p(g[j], gamma, p));
        break;
    default:
        break;
    }
}

static void fk_sqdist_map_f(float *FK_RESTRICT g, ptrdiff_t n, int kind,
                            const double *FK_RESTRICT p)
{
    const double gamma = p[FK_P_GAMMA], degree = p[FK_P_DEGREE];
    switch (kind) {
    case FK_K_LAPLACIAN_L2:
        for (ptrdiff_t j = 0; j < n; j++) g[j] = fk_exp1_f((float)-gamma * sqrtf(g[j]));
        break;
    case FK_K_RATIONAL_QUADRATIC:
        for (ptrdiff_t j = 0; j < n; j++)
            g[j] = (float)exp(-degree * fk_rq_log1p((double)g[j], gamma, p));
        break;
    default:
        break;
    }
}

#endif /* FK_MAPS_H */
