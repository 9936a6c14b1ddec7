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

// erf(x) as x P(x^2) / Q(x^2), a rational minimax fit over [-4, 4] (the coefficients of
// Eigen's fast float erf), x clamped there (|erf| is 1 in float beyond): absolute error under
// 5e-7 on [-6, 6] (4 ulp of 1), relative error under 1e-6 near 0, where Abramowitz and
// Stegun's 7.1.26 (with an exponential) erred by 5e-7 absolute, 1.5e-5 relative; and half its
// time (a GELU epilogue of 65536 values, 18 against 36 us on AVX-512). NaN stays NaN.
[[gnu::always_inline]] inline Floats erf_of(Floats x) {
  x = x < splat(-4.0f) ? splat(-4.0f) : x;
  x = x > splat(4.0f) ? splat(4.0f) : x;
  const Floats x2 = x * x;
  Floats p = splat(-2.72614225801306e-10f);
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 - 2.10102402082508e-06f;
  p = p * x2 - 5.69250639462346e-05f;
  p = p * x2 - 7.34990630326855e-04f;
  p = p * x2 - 2.95459980854025e-03f;
  p = p * x2 - 1.60960333262415e-02f;
  Floats q = splat(-1.45660718464996e-05f);
  q = q * x2 - 2.13374055278905e-04f;
  q = q * x2 - 1.68282697438203e-03f;
  q = q * x2 - 7.37332916720468e-03f;
  q = q * x2 - 1.42647390514189e-02f;
  return x * p / q;
}

}  // namespace kiln::engine::cpu::vec
