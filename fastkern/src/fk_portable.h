/* Portable spellings shared by the C headers: MSVC has neither GNU attributes
   nor C99 `restrict`. */
#ifndef FK_PORTABLE_H
#define FK_PORTABLE_H

#if defined(_MSC_VER) && !defined(__clang__)
#define FK_INLINE static __forceinline
#define FK_RESTRICT __restrict
#elif defined(__GNUC__)
#define FK_INLINE static inline __attribute__((always_inline))
#define FK_RESTRICT __restrict__
#else
#define FK_INLINE static inline
#define FK_RESTRICT
#endif

#endif
