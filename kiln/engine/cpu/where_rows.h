#pragma once
// Where's rows on kiln's own loops, shared by the op of known shapes (where_op.cpp) and the
// one of run-time shapes (runtime_elementwise.cpp). Include from .cpp files only.

#include <cstdint>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace kiln::engine::cpu::dnnl_impl {

// One row of `count` outputs; each input at its own row start, read contiguously (true) or as
// one value repeated (false).
template <bool kCond, bool kX, bool kY>
[[gnu::always_inline]] inline void select_tail(const bool* c, const float* x, const float* y,
                                               float* to, int64_t begin, int64_t count) {
  for (int64_t i = begin; i < count; ++i) to[i] = c[kCond ? i : 0] ? x[kX ? i : 0] : y[kY ? i : 0];
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define KILN_WHERE_AVX512 1
// 16 lanes a step: the condition's bytes widened to a lane mask (vpmovzxbd, which GCC's generic
// vectors lower to 16 scalar inserts), then a masked blend.
template <bool kCond, bool kX, bool kY>
__attribute__((target("avx512f"))) void select_row_avx512(const bool* c, const float* x,
                                                          const float* y, float* to,
                                                          int64_t count) {
  const __mmask16 repeated = c[0] ? 0xFFFF : 0;
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    __mmask16 mask = repeated;
    if constexpr (kCond) {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(c + i));
      mask = _mm512_test_epi32_mask(_mm512_maskz_cvtepu8_epi32(0xFFFF, bytes),
                                    _mm512_set1_epi32(0xFF));
    }
    const __m512 a = kX ? _mm512_loadu_ps(x + i) : _mm512_set1_ps(x[0]);
    const __m512 b = kY ? _mm512_loadu_ps(y + i) : _mm512_set1_ps(y[0]);
    _mm512_storeu_ps(to + i, _mm512_mask_blend_ps(mask, b, a));
  }
  select_tail<kCond, kX, kY>(c, x, y, to, i, count);
}
#endif

template <bool kCond, bool kX, bool kY>
void select_row(bool avx512, const bool* c, const float* x, const float* y, float* to,
                int64_t count) {
#ifdef KILN_WHERE_AVX512
  if (avx512) return select_row_avx512<kCond, kX, kY>(c, x, y, to, count);
#endif
  (void)avx512;
  select_tail<kCond, kX, kY>(c, x, y, to, 0, count);
}

// `contiguous`: bit 0 the condition's, bit 1 X's, bit 2 Y's row is contiguous.
inline void select_rows(bool avx512, int contiguous, const bool* c, const float* x, const float* y,
                        float* to, int64_t count) {
  switch (contiguous) {
    case 0:
      return select_row<false, false, false>(avx512, c, x, y, to, count);
    case 1:
      return select_row<true, false, false>(avx512, c, x, y, to, count);
    case 2:
      return select_row<false, true, false>(avx512, c, x, y, to, count);
    case 3:
      return select_row<true, true, false>(avx512, c, x, y, to, count);
    case 4:
      return select_row<false, false, true>(avx512, c, x, y, to, count);
    case 5:
      return select_row<true, false, true>(avx512, c, x, y, to, count);
    case 6:
      return select_row<false, true, true>(avx512, c, x, y, to, count);
    default:
      return select_row<true, true, true>(avx512, c, x, y, to, count);
  }
}

}  // namespace kiln::engine::cpu::dnnl_impl
