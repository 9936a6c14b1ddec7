#pragma once
// Vectors of 16 floats for kiln's own loops (small-batch LSTM, small Conv and MatMul): GCC and
// Clang lower them to the widest registers a function's target has (one zmm, two ymm or four
// xmm). KILN_VECTOR_CLONES builds AVX-512 and AVX2 variants of a function next to the baseline
// one, picked at load by the CPU (GCC's function multi-versioning); other compilers build the
// baseline only. Include from .cpp files only.

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
constexpr int64_t kLanes = 16;

[[gnu::always_inline]] inline Floats load(const float* p) {
  Floats v;
  std::memcpy(&v, p, sizeof v);  // one unaligned vector load
  return v;
}
[[gnu::always_inline]] inline void store(float* p, Floats v) { std::memcpy(p, &v, sizeof v); }
[[gnu::always_inline]] inline Floats splat(float x) { return Floats{} + x; }

// exp(x) for x up to 88 (clamped there): 2^k e^r with k = round(x / ln2), |r| <= ln2 / 2, and
// Cephes' polynomial for e^r; relative error about 2e-7. Below -87 it is 0 (e^-87 is near the
// smallest normal float): a softmax's masked logits (-1e9, -inf) give 0, not e^-87 divided by
// the row's sum, a subnormal that makes every product reading it slow (GPT prefill's
// probabilities times values took 5.7 ms instead of 0.05 on an Intel Xeon).
[[gnu::always_inline]] inline Floats exp_of(Floats x) {
  const auto under = x < splat(-87.0f);
  x = under ? splat(-87.0f) : x;
  x = x > splat(88.0f) ? splat(88.0f) : x;
  const Floats t = x * 1.44269504088896341f;
  const Ints k = __builtin_convertvector(t + (t < splat(0.0f) ? splat(-0.5f) : splat(0.5f)), Ints);
  const Floats kf = __builtin_convertvector(k, Floats);
  const Floats r = (x - kf * 0.693359375f) - kf * -2.12194440e-4f;
  Floats p = splat(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const Floats y = p * reinterpret_cast<Floats>((k + 127) << 23);
  return under ? splat(0.0f) : y;
}

[[gnu::always_inline]] inline Floats sigmoid(Floats x) { return 1.0f / (1.0f + exp_of(-x)); }
[[gnu::always_inline]] inline Floats tanh_of(Floats x) {
  return 2.0f / (1.0f + exp_of(-2.0f * x)) - 1.0f;
}

// erf(x) by Abramowitz and Stegun 7.1.26: 1 - t (a1 + t (a2 + ...)) e^(-x^2) with
// t = 1 / (1 + p |x|), sign restored; absolute error under 2e-7.
[[gnu::always_inline]] inline Floats erf_of(Floats x) {
  const Floats a = x < splat(0.0f) ? -x : x;
  const Floats t = 1.0f / (1.0f + 0.3275911f * a);
  Floats p = splat(1.061405429f);
  p = p * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  const Floats y = 1.0f - p * t * exp_of(-a * a);
  return x < splat(0.0f) ? -y : y;
}

}  // namespace kiln::engine::cpu::vec
