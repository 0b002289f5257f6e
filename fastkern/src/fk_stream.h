/* Moving finished tiles from a cache-resident buffer into the Gram matrix.
 *
 * Why: for narrow data the Gram matrix is memory-bound: writing N x N values
 * costs more than computing them.  Ordinary stores first read every cache line
 * they write (read-for-ownership), doubling the traffic; streaming
 * (non-temporal) stores write whole lines without reading them.  The tile is
 * built in a small thread-local buffer, transposed there for the mirrored
 * half, and each row segment is streamed out once.  SSE2 is baseline x86-64,
 * so this needs no special flags; other targets fall back to plain stores.
 */
#ifndef FK_STREAM_H
#define FK_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#include <xmmintrin.h>
#endif

/* The unaligned head and odd tail of a row are streamed too: one ordinary
   store into a line that is being streamed pulls the line into the cache and
   costs more than the streaming saved (odd row counts ran at half speed). */
#if defined(__SSE2__) && defined(__x86_64__)
static inline void fk_stream_one_d(double *dst, const double *src)
{
    long long v;
    memcpy(&v, src, sizeof v);
    _mm_stream_si64((long long *)dst, v);
}
#endif
#if defined(__SSE2__)
static inline void fk_stream_one_f(float *dst, const float *src)
{
    int v;
    memcpy(&v, src, sizeof v);
    _mm_stream_si32((int *)dst, v);
}
#endif

static inline void fk_stream_row_d(double *dst, const double *src, ptrdiff_t n)
{
    ptrdiff_t j = 0;
#if defined(__SSE2__) && defined(__x86_64__)
    if (((uintptr_t)dst & 15) != 0 && n > 0) { fk_stream_one_d(dst, src); j = 1; }
    for (; j + 2 <= n; j += 2) _mm_stream_pd(dst + j, _mm_loadu_pd(src + j));
    if (j < n) { fk_stream_one_d(dst + j, src + j); j++; }
#endif
    for (; j < n; j++) dst[j] = src[j];
}

static inline void fk_stream_row_f(float *dst, const float *src, ptrdiff_t n)
{
    ptrdiff_t j = 0;
#if defined(__SSE2__)
    while (((uintptr_t)(dst + j) & 15) != 0 && j < n) { fk_stream_one_f(dst + j, src + j); j++; }
    for (; j + 4 <= n; j += 4) _mm_stream_ps(dst + j, _mm_loadu_ps(src + j));
    for (; j < n; j++) fk_stream_one_f(dst + j, src + j);
#endif
    for (; j < n; j++) dst[j] = src[j];
}

static inline void fk_store_fence(void)
{
#if defined(__SSE2__)
    _mm_sfence();   /* streaming stores are weakly ordered */
#endif
}

/* Transposes walk FK_TBLOCK x FK_TBLOCK blocks so the rows read and the rows
   written both stay in L1. */
#define FK_TBLOCK 16

/* dst[j * bi + i] = src[i * lds + j]: the transpose of a bi x bj tile, inside
   the cache.  SSE2 4 x 4 (float) and 2 x 2 (double) register transposes do the
   bulk (a scalar transpose cost float32 a third of its speed-up); the edges
   are copied one by one. */
static void fk_transpose_d(const double *src, ptrdiff_t lds, double *dst, ptrdiff_t bi,
                           ptrdiff_t bj)
{
    ptrdiff_t i2 = 0, j2 = 0;
#if defined(__SSE2__)
    i2 = bi & ~(ptrdiff_t)1;
    j2 = bj & ~(ptrdiff_t)1;
    for (ptrdiff_t ii = 0; ii < i2; ii += FK_TBLOCK)
        for (ptrdiff_t jj = 0; jj < j2; jj += FK_TBLOCK)
            for (ptrdiff_t i = ii; i < ii + FK_TBLOCK && i < i2; i += 2)
                for (ptrdiff_t j = jj; j < jj + FK_TBLOCK && j < j2; j += 2) {
                    __m128d a = _mm_loadu_pd(src + i * lds + j);
                    __m128d b = _mm_loadu_pd(src + (i + 1) * lds + j);
                    _mm_storeu_pd(dst + j * bi + i, _mm_unpacklo_pd(a, b));
                    _mm_storeu_pd(dst + (j + 1) * bi + i, _mm_unpackhi_pd(a, b));
                }
#endif
    for (ptrdiff_t i = 0; i < bi; i++)
        for (ptrdiff_t j = (i < i2 ? j2 : 0); j < bj; j++) dst[j * bi + i] = src[i * lds + j];
}

static void fk_transpose_f(const float *src, ptrdiff_t lds, float *dst, ptrdiff_t bi,
                           ptrdiff_t bj)
{
    ptrdiff_t i4 = 0, j4 = 0;
#if defined(__SSE2__)
    i4 = bi & ~(ptrdiff_t)3;
    j4 = bj & ~(ptrdiff_t)3;
    for (ptrdiff_t ii = 0; ii < i4; ii += FK_TBLOCK)
        for (ptrdiff_t jj = 0; jj < j4; jj += FK_TBLOCK)
            for (ptrdiff_t i = ii; i < ii + FK_TBLOCK && i < i4; i += 4)
                for (ptrdiff_t j = jj; j < jj + FK_TBLOCK && j < j4; j += 4) {
                    __m128 r0 = _mm_loadu_ps(src + i * lds + j);
                    __m128 r1 = _mm_loadu_ps(src + (i + 1) * lds + j);
                    __m128 r2 = _mm_loadu_ps(src + (i + 2) * lds + j);
                    __m128 r3 = _mm_loadu_ps(src + (i + 3) * lds + j);
                    _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
                    _mm_storeu_ps(dst + j * bi + i, r0);
                    _mm_storeu_ps(dst + (j + 1) * bi + i, r1);
                    _mm_storeu_ps(dst + (j + 2) * bi + i, r2);
                    _mm_storeu_ps(dst + (j + 3) * bi + i, r3);
                }
#endif
    for (ptrdiff_t i = 0; i < bi; i++)
        for (ptrdiff_t j = (i < i4 ? j4 : 0); j < bj; j++) dst[j * bi + i] = src[i * lds + j];
}

/* Stream a bi x bj buffer (leading dim ldb) into K (leading dim ldk); with
   transpose, write its transpose (bj x bi) instead, via scratch.  With cached,
   ordinary stores instead: for a matrix small enough to stay in the cache that
   its caller reads back at once (a streamed one is read again from memory). */
#define FK_DEFINE_STREAM(T, S)                                                       \
static inline void fk_put_row_##S(T *dst, const T *src, ptrdiff_t n, int cached)     \
{                                                                                    \
    if (cached) memcpy(dst, src, (size_t)n * sizeof(T));                             \
    else fk_stream_row_##S(dst, src, n);                                             \
}                                                                                    \
static void fk_stream_tile_##S(const T *buf, ptrdiff_t ldb, T *K, ptrdiff_t ldk,     \
                               ptrdiff_t bi, ptrdiff_t bj, T *scratch, int transpose, \
                               int cached)                                           \
{                                                                                    \
    if (!transpose) {                                                                \
        for (ptrdiff_t i = 0; i < bi; i++)                                           \
            fk_put_row_##S(K + i * ldk, buf + i * ldb, bj, cached);                  \
        return;                                                                      \
    }                                                                                \
    fk_transpose_##S(buf, ldb, scratch, bi, bj);                                     \
    for (ptrdiff_t j = 0; j < bj; j++)                                               \
        fk_put_row_##S(K + j * ldk, scratch + j * bi, bi, cached);                   \
}

FK_DEFINE_STREAM(double, d)
FK_DEFINE_STREAM(float, f)

#endif
