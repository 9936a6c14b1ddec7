// The last step of kiln's Conv loops whose tiles store raw sums (conv_loops.h's finish_sums):
// biases, post-ops and padding lanes over a finished row, in L1. One pass over the pixels per
// post-op, the first fused with the biases: a switch on the post-op at every vector cost an
// image's Conv (3 input channels, 27 multiply-adds an output) a sixth of its time.

#include <kiln/engine/cpu/conv_loops.h>
#include <kiln/engine/cpu/vector_math.h>

namespace kiln::engine::cpu::dnnl_impl {

namespace {

using namespace vec;  // NOLINT: the vector helpers of the loops below

[[gnu::always_inline]] inline Floats clip(Floats v, Floats lo, Floats hi) {
  v = v < lo ? lo : v;
  return v > hi ? hi : v;
}

// Post-op `op` over `count` vectors of `out` (AddResidual: plus `r`'s), with `bias` added
// first when kFirst. (Macros, not lambdas: a lambda would be compiled for the baseline target.)
#define KILN_FINISH_PASS(expr)             \
  for (int64_t px = 0; px < count; ++px) { \
    Floats v = load(out + px * kLanes);    \
    if constexpr (kFirst) v += bias;       \
    store(out + px * kLanes, (expr));      \
  }
template <bool kFirst>
[[gnu::always_inline]] inline void apply(const PostOp& op, float* out, const float* r,
                                         int64_t count, Floats bias) {
  switch (op.kind) {
    case PostOpKind::Relu:
      KILN_FINISH_PASS(v < splat(0.0f) ? splat(0.0f) : v)
      break;
    case PostOpKind::Clip: {
      const Floats lo = splat(op.alpha), hi = splat(op.beta);
      KILN_FINISH_PASS(clip(v, lo, hi))
      break;
    }
    case PostOpKind::Sigmoid:
      KILN_FINISH_PASS(sigmoid(v))
      break;
    case PostOpKind::Tanh:
      KILN_FINISH_PASS(tanh_of(v))
      break;
    case PostOpKind::Swish:
      KILN_FINISH_PASS(v * sigmoid(v))
      break;
    case PostOpKind::Linear: {
      const Floats alpha = splat(op.alpha), beta = splat(op.beta);
      KILN_FINISH_PASS(v * alpha + beta)
      break;
    }
    case PostOpKind::AddResidual:
      KILN_FINISH_PASS(v + load(r + px * kLanes))
      break;
    case PostOpKind::Gelu:
      KILN_FINISH_PASS(v)  // declined at creation
      break;
  }
}
#undef KILN_FINISH_PASS

[[gnu::always_inline]] inline void finish_body(const ConvJob& j, int64_t n, int64_t ob,
                                               int64_t blocks, int64_t p0, int64_t count) {
  for (int64_t k = 0; k < blocks; ++k) {
    const int64_t at = ((n * j.blocks_out + ob + k) * j.pixels + p0) * kLanes;
    float* out = j.y + at;
    const float* r = j.residual != nullptr ? j.residual + at : nullptr;
    const Floats bias = j.bias != nullptr ? load(j.bias + (ob + k) * kLanes) : Floats{};
    if (j.num_ops > 0) {
      apply<true>(j.ops[0], out, r, count, bias);
      for (size_t i = 1; i < j.num_ops; ++i) apply<false>(j.ops[i], out, r, count, bias);
    } else if (j.bias != nullptr) {
      for (int64_t px = 0; px < count; ++px)
        store(out + px * kLanes, load(out + px * kLanes) + bias);
    }
    if (ob + k + 1 == j.blocks_out && j.last_lanes != nullptr) {
      const Floats keep = load(j.last_lanes);
      for (int64_t px = 0; px < count; ++px) {
        const Floats v = load(out + px * kLanes);
        store(out + px * kLanes, keep > splat(0.0f) ? v : splat(0.0f));
      }
    }
  }
}

[[gnu::target("avx512f")]] void finish_avx512(const ConvJob& j, int64_t n, int64_t ob,
                                              int64_t blocks, int64_t p0, int64_t count) {
  finish_body(j, n, ob, blocks, p0, count);
}

void finish_baseline(const ConvJob& j, int64_t n, int64_t ob, int64_t blocks, int64_t p0,
                     int64_t count) {
  finish_body(j, n, ob, blocks, p0, count);
}

}  // namespace

void finish_sums(const ConvJob& j, int64_t n, int64_t ob, int64_t blocks, int64_t p0,
                 int64_t count) {
  if (__builtin_cpu_supports("avx512f")) {
    finish_avx512(j, n, ob, blocks, p0, count);
  } else {
    finish_baseline(j, n, ob, blocks, p0, count);
  }
}

}  // namespace kiln::engine::cpu::dnnl_impl
