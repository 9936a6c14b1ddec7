#pragma once
// What kiln's own Conv and MatMul loops do to their sums before storing them (biases, then the
// fused post-ops), and the checks they share of what an op asks. Include from .cpp files only
// (vector_math.h's pragmas).

#include <kiln/engine/cpu/dnnl_common.h>
#include <kiln/engine/cpu/vector_math.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace kiln::engine::cpu::dnnl_impl {

struct Epilogue {
  const float* row_bias = nullptr;  // [M], or null
  const float* col_bias = nullptr;  // [N], or null
  const PostOp* ops = nullptr;      // Relu, Clip, Sigmoid, Tanh, Gelu, Linear, Swish; AddResidual
                                    // for MatMul
  size_t num_ops = 0;
  const float* residual = nullptr;  // [M, N] (row stride ldc), for AddResidual
};

// `residual`: the residual's values at the vector's place (AddResidual only).
[[gnu::always_inline]] inline vec::Floats post_process(vec::Floats v, const Epilogue& e,
                                                       vec::Floats residual) {
  for (size_t i = 0; i < e.num_ops; ++i) {
    const PostOp& op = e.ops[i];
    switch (op.kind) {
      case PostOpKind::Relu:
        v = v < vec::splat(0.0f) ? vec::splat(0.0f) : v;
        break;
      case PostOpKind::Clip:
        v = v < vec::splat(op.alpha) ? vec::splat(op.alpha) : v;
        v = v > vec::splat(op.beta) ? vec::splat(op.beta) : v;
        break;
      case PostOpKind::Sigmoid:
        v = vec::sigmoid(v);
        break;
      case PostOpKind::Tanh:
        v = vec::tanh_of(v);
        break;
      case PostOpKind::Gelu:
        if (op.alpha == 1.0f) {
          v = 0.5f * v * (1.0f + vec::tanh_of(0.7978845608f * (v + 0.044715f * v * v * v)));
        } else {
          v = 0.5f * v * (1.0f + vec::erf_of(v * 0.7071067812f));
        }
        break;
      case PostOpKind::AddResidual:
        v += residual;
        break;
      case PostOpKind::Linear:
        v = v * vec::splat(op.alpha) + vec::splat(op.beta);
        break;
      case PostOpKind::Swish:
        v = v * vec::sigmoid(v);
        break;
    }
  }
  return v;
}

// Writes the sums of rows [m, m + rows) for the panel of columns [n0, n0 + 16): biases,
// post-ops, and only the columns before n_count.
[[gnu::always_inline]] inline void write_sums(const vec::Floats* sums, int64_t rows, int64_t m,
                                              int64_t n0, int64_t n_count, float* c, int64_t ldc,
                                              const Epilogue& e) {
  const int64_t width = std::min(vec::kLanes, n_count - n0);
  float padded[vec::kLanes] = {};
  if (e.col_bias != nullptr) std::memcpy(padded, e.col_bias + n0, sizeof(float) * width);
  const vec::Floats col_bias = vec::load(padded);
  for (int64_t r = 0; r < rows; ++r) {
    vec::Floats v = sums[r] + col_bias;
    if (e.row_bias != nullptr) v += e.row_bias[m + r];
    vec::Floats residual{};
    if (e.residual != nullptr) {
      float row[vec::kLanes] = {};
      std::memcpy(row, e.residual + (m + r) * ldc + n0, sizeof(float) * width);
      residual = vec::load(row);
    }
    v = post_process(v, e, residual);
    float* out = c + (m + r) * ldc + n0;
    if (width == vec::kLanes) {
      vec::store(out, v);
    } else {
      vec::store(padded, v);
      std::memcpy(out, padded, sizeof(float) * width);
    }
  }
}

// How a GEMM's tiles share out an epilogue: a first post-op AddResidual (x + bias + residual),
// with no row bias, is where full tiles' sums start (`residual_first`), and `rest` is what is
// left after it; `finish` says whether anything is left to apply after the last step over K
// (`finish_all`: for tiles that did not start from the residual).
struct EpilogueSplit {
  bool residual_first = false;
  bool finish = false;      // for tiles that started from the residual
  bool finish_all = false;  // for tiles that did not (the edge tiles)
  Epilogue rest;
};

inline EpilogueSplit split_epilogue(const Epilogue& e) {
  EpilogueSplit split;
  split.finish_all = e.row_bias != nullptr || e.num_ops > 0;
  split.residual_first = e.row_bias == nullptr && e.num_ops > 0 &&
                         e.ops[0].kind == PostOpKind::AddResidual && e.residual != nullptr;
  split.rest = e;
  if (split.residual_first) ++split.rest.ops, --split.rest.num_ops;
  split.finish = split.residual_first ? split.rest.num_ops > 0 : split.finish_all;
  return split;
}

// Post-ops and the row bias on the sums `t` (row stride ldt) of rows [m0, m0 + rows) and
// columns [n0, n0 + width) of C, 16 at a time; `ldc` is the residual's row stride. (The column
// bias is where the sums started.) A last part of fewer than 16 columns is read and written
// as a whole vector: `t` must have room for it (a tile's edge buffer). Built for each CPU
// (KILN_VECTOR_CLONES, loop_epilogue.cpp): the GEMMs call it once per tile after the last step
// over K.
void finish_sums(float* t, int64_t ldt, int rows, int64_t width, int64_t m0, int64_t n0,
                 int64_t ldc, const Epilogue& e);

// Whether the loops apply every post-op of `desc`: Relu, Clip, Sigmoid, Tanh, Linear, Swish, and
// with `streaming` (a matrix-vector product) Gelu and one residual too.
inline bool supported_post_ops(const OpDesc& desc, bool streaming = false) {
  return std::all_of(desc.post_ops.begin(), desc.post_ops.end(), [streaming](const PostOp& op) {
    return op.kind == PostOpKind::Relu || op.kind == PostOpKind::Clip ||
           op.kind == PostOpKind::Sigmoid || op.kind == PostOpKind::Tanh ||
           op.kind == PostOpKind::Linear || op.kind == PostOpKind::Swish ||
           (streaming && (op.kind == PostOpKind::Gelu || op.kind == PostOpKind::AddResidual));
  });
}

// Whether every input present is f32.
inline bool all_float(const OpDesc& desc) {
  for (size_t i = 0; i < desc.inputs.size(); ++i) {
    bool present = desc.inputs_present.empty() || desc.inputs_present[i];
    if (present && desc.inputs[i].dtype != runtime::ScalarType::Float32) return false;
  }
  return true;
}

/// The bias of N values from constant input `index` of `desc` (numel N, or 1: broadcast), times
/// `scale`; empty when absent. Errors: NotSupported for a computed bias or one of other sizes;
/// those of `desc.verify_constant`.
Result<std::vector<float>> column_bias(const OpDesc& desc, size_t index, int64_t n, float scale);

}  // namespace kiln::engine::cpu::dnnl_impl
