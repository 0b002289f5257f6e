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
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

static inline void fk_stream_row_d(double *dst, const double *src, ptrdiff_t n)
{
    ptrdiff_t j = 0;
#if defined(__SSE2__)
    if (((uintptr_t)dst & 15) != 0 && n > 0) { dst[0] = src[0]; j = 1; }
    for (; j + 2 <= n; j += 2) _mm_stream_pd(dst + j, _mm_loadu_pd(src + j));
#endif
    for (; j < n; j++) dst[j] = src[j];
}

static inline void fk_stream_row_f(float *dst, const float *src, ptrdiff_t n)
{
    ptrdiff_t j = 0;
#if defined(__SSE2__)
    while (((uintptr_t)(dst + j) & 15) != 0 && j < n) { dst[j] = src[j]; j++; }
    for (; j + 4 <= n; j += 4) _mm_stream_ps(dst + j, _mm_loadu_ps(src + j));
#endif
    for (; j < n; j++) dst[j] = src[j];
}

static inline void fk_store_fence(void)
{
#if defined(__SSE2__)
    _mm_sfence();   /* streaming stores are weakly ordered */
#endif
}

/* Stream a bi x bj buffer (leading dim ldb) into K (leading dim ldk); with
   transpose, write its transpose (bj x bi) instead. */
#define FK_DEFINE_STREAM(T, S)                                                       \
static void fk_stream_tile_##S(const T *buf, ptrdiff_t ldb, T *K, ptrdiff_t ldk,     \
                               ptrdiff_t bi, ptrdiff_t bj, T *scratch, int transpose) \
{                                                                                    \
    if (!transpose) {                                                                \
        for (ptrdiff_t i = 0; i < bi; i++) fk_stream_row_##S(K + i * ldk, buf + i * ldb, bj); \
        return;                                                                      \
    }                                                                                \
    /* Transpose in 8 x 8 blocks inside the cache, then stream whole rows. */        \
    for (ptrdiff_t ii = 0; ii < bi; ii += 8)                                         \
        for (ptrdiff_t jj = 0; jj < bj; jj += 8) {                                   \
            ptrdiff_t ie = ii + 8 < bi ? ii + 8 : bi, je = jj + 8 < bj ? jj + 8 : bj; \
            for (ptrdiff_t i = ii; i < ie; i++)                                      \
                for (ptrdiff_t j = jj; j < je; j++) scratch[j * bi + i] = buf[i * ldb + j]; \
        }                                                                            \
    for (ptrdiff_t j = 0; j < bj; j++) fk_stream_row_##S(K + j * ldk, scratch + j * bi, bi); \
}

FK_DEFINE_STREAM(double, d)
FK_DEFINE_STREAM(float, f)

#endif
