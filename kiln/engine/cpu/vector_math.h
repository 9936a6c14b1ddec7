#pragma once
// Vectors of 16 floats for kiln's own loops (small-batch LSTM, small Conv and MatMul): GCC and
// Clang lower them to the widest registers a function's target has (one zmm, two ymm or four
// xmm). Floats8 is one ymm, for loops built for AVX2 (avx2_gemm.cpp); the math helpers below
// take either. KILN_VECTOR_CLONES builds AVX-512 and AVX2 variants of a function next to the
// baseline one, picked at load by the CPU (GCC's function multi-versioning); other compilers build
// the baseline only. Include from .cpp files only.

#include <cstdint>
#include <cstring>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define KILN_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
// The helpers below are inlined into each variant; their by-value vectors never cross a call,
// so the ABI note GCC gives for them does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"
#else
#define KILN_VECTOR_CLONES
#endif
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpsabi"
#endif

namespace kiln::engine::cpu::vec {

using Floats = float __attribute__((vector_size(64)));  // NOLINT: a GCC/Clang vector type
using Ints = int32_t __attribute__((vector_size(64)));
using Floats8 = float __attribute__((vector_size(32)));  // NOLINT: a GCC/Clang vector type
using Ints8 = int32_t __attribute__((vector_size(32)));
constexpr int64_t kLanes = 16;

// The integer vector of a float vector's width.
template <typename V>
struct IntsOf;
template <>
struct IntsOf<Floats> {
  using type = Ints;
};
template <>
struct IntsOf<Floats8> {
  using type = Ints8;
};

[[gnu::always_inline]] inline Floats load(const float* p) {
  Floats v;
  std::memcpy(&v, p, sizeof v);  // one unaligned vector load
  return v;
}
[[gnu::always_inline]] inline void store(float* p, Floats v) { std::memcpy(p, &v, sizeof v); }
[[gnu::always_inline]] inline Floats splat(float x) { return Floats{} + x; }
template <typename V>
[[gnu::always_inline]] inline V splat_as(float x) {
  return V{} + x;
}

// exp(x) for x clamped to [-87, 88]: 2^k e^r with k = round(x / ln2), |r| <= ln2 / 2, and
// Cephes' polynomial for e^r; relative error about 2e-7.
template <typename V>
[[gnu::always_inline]] inline V exp_of(V x) {
  using I = typename IntsOf<V>::type;
  x = x < splat_as<V>(-87.0f) ? splat_as<V>(-87.0f) : x;
  x = x > splat_as<V>(88.0f) ? splat_as<V>(88.0f) : x;
  const V t = x * 1.44269504088896341f;
  const I k = __builtin_convertvector(
      t + (t < splat_as<V>(0.0f) ? splat_as<V>(-0.5f) : splat_as<V>(0.5f)), I);
  const V kf = __builtin_convertvector(k, V);
  const V r = (x - kf * 0.693359375f) - kf * -2.12194440e-4f;
  V p = splat_as<V>(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * reinterpret_cast<V>((k + 127) << 23);
}

template <typename V>
[[gnu::always_inline]] inline V sigmoid(V x) {
  return 1.0f / (1.0f + exp_of(-x));
}
template <typename V>
[[gnu::always_inline]] inline V tanh_of(V x) {
  return 2.0f / (1.0f + exp_of(-2.0f * x)) - 1.0f;
}

// erf(x) by Abramowitz and Stegun 7.1.26: 1 - t (a1 + t (a2 + ...)) e^(-x^2) with
// t = 1 / (1 + p |x|), sign restored; absolute error under 2e-7.
template <typename V>
[[gnu::always_inline]] inline V erf_of(V x) {
  const V a = x < splat_as<V>(0.0f) ? -x : x;
  const V t = 1.0f / (1.0f + 0.3275911f * a);
  V p = splat_as<V>(1.061405429f);
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  const V y = 1.0f - p * t * exp_of(-a * a);
  return x < splat_as<V>(0.0f) ? -y : y;
}

}  // namespace kiln::engine::cpu::vec
