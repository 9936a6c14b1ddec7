#pragma once

#include <kiln/engine/passes/rewrite_context.h>

#include <cstddef>

namespace kiln::engine::passes {

/// Layer normalization as exporters decompose it (PyTorch before opset 17, TensorFlow's
/// converters), anchored at node `n`:
///   mean = ReduceMean(x, trailing axes, keepdims=1); d = Sub(x, mean);
///   var = ReduceMean(Pow(d, 2) or Mul(d, d), the same axes); std = Sqrt(Add(var, eps));
///   y = Div(d, std) or Mul(d, Reciprocal(std)); then optionally Mul by a constant scale and
///   Add of a constant bias, each of exactly the normalized shape (either operand order)
/// → one `LayerNormalization(x, scale, bias)` with `axis` the first normalized axis and
/// `epsilon` eps (a scale of ones when the pattern has none). x f32 of known rank; eps a
/// constant f32 scalar, finite and >= 0; every intermediate value read by the pattern only.
/// Normalized over the spatial axes 2.. of x [N, C, ...] (C static) and followed by a Mul by
/// and/or an Add of constants of one value per channel ([C, 1, 1], [1, C, 1, 1], a scalar),
/// it becomes `InstanceNormalization(x, scale [C], B [C])` instead, those steps absorbed.
/// Returns true when rewritten.
bool rewrite_layer_norm(RewriteContext& c, size_t n);

/// RMS normalization as Llama's and T5's RMSNorm is exported (ONNX has no op for it before
/// opset 23), anchored at the ReduceMean node `n`:
///   ms = ReduceMean(Pow(x, 2) or Mul(x, x), trailing axes, keepdims=1);
///   rms = Sqrt(Add(ms, eps)); y = Div(x, rms), Mul(x, Reciprocal(rms)) or Mul(x, Div(1, rms));
///   then optionally Mul by a constant scale of exactly the normalized shape (either order)
/// → one `RMSNormalization(x, scale)` (the opset-23 op, which the reference kernels and the CPU
/// device implement) with `axis` the first normalized axis and `epsilon` eps (a scale of ones
/// when the pattern has none). x f32 of known rank (x itself may have other readers, as the
/// residual stream does); eps a constant f32 scalar, finite and >= 0; every intermediate value
/// read by the pattern only. Returns true when rewritten.
bool rewrite_rms_norm(RewriteContext& c, size_t n);

/// Group normalization as PyTorch exports GroupNorm before opset 18, anchored at the
/// InstanceNormalization node `n`:
///   r = Reshape(x, [0 or N, G, -1 or the rest]); i = InstanceNormalization(r, s [G], b [G]);
///   y = Reshape(i, Shape(x) or a constant of x's shape); then optionally Mul by and/or Add of
///   constants of one value per channel ([C, 1, 1], [1, C, 1, 1], a scalar), either order
/// → one `GroupNormalization(x, scale [C], bias [C])` with `num_groups` G and the
/// InstanceNormalization's `epsilon`: scale = gamma[c] * s[g], bias = gamma[c] * b[g] + beta[c]
/// (the opset-21 op; the reference kernels and the CPU device implement it). x f32 [N, C, ...]
/// of known rank, C static and a multiple of G; s and b constant; r and i read by the pattern
/// only (x may have other readers; the Shape node is absorbed when only the Reshape reads it).
/// Returns true when rewritten.
bool rewrite_group_norm(RewriteContext& c, size_t n);

}  // namespace kiln::engine::passes
